// cuDNN plumbing (cuda_cudnn.h): handles, errors, descriptors, the dtype
// mapping, the workspace limit and the convolution algorithm cache.
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/cuda_cudnn.h"

// ---- errors ----

lt_status cuda_cudnn_fail(const char *op, const char *call, cudnnStatus_t s) {
  return lt_error(LT_ERR_DEVICE, "cuda: %s: %s: %s", op, call, cudnnGetErrorString(s));
}

// ---- one handle per device, made on first use ----

static cudnnHandle_t handles[LT_MAX_DEVICES];
static pthread_mutex_t handles_lock = PTHREAD_MUTEX_INITIALIZER;

lt_status cuda_cudnn_handle(const char *op, lt_device dev, cudnnHandle_t *out) {
  *out = NULL;
  if (dev.index < 0 || dev.index >= LT_MAX_DEVICES)
    return lt_error(LT_ERR_DEVICE, "cuda: %s: device index %d out of range", op, (int)dev.index);
  pthread_mutex_lock(&handles_lock);
  cudnnStatus_t s = CUDNN_STATUS_SUCCESS;
  cudnnHandle_t h = handles[dev.index];
  if (!h) {
    s = cudnnCreate(&h);
    if (s == CUDNN_STATUS_SUCCESS)
      handles[dev.index] = h;
    else
      h = NULL;
  }
  pthread_mutex_unlock(&handles_lock);
  if (s != CUDNN_STATUS_SUCCESS) return cuda_cudnn_fail(op, "cudnnCreate", s);
  // The handle serves every stream of the device: bound to the current one
  // at each use (a cheap setter, as PyTorch's getCudnnHandle does), so that
  // the op's cuDNN calls queue behind its kernels and its workspace (taken on
  // this stream) is reused only after them.
  s = cudnnSetStream(h, cuda_stream());
  if (s != CUDNN_STATUS_SUCCESS) return cuda_cudnn_fail(op, "cudnnSetStream", s);
  *out = h;
  return LT_OK;
}

// ---- dtypes and scaling factors ----

bool cuda_cudnn_dtype(lt_dtype dt, cudnnDataType_t *out) {
  switch (dt) {
    case LT_FLOAT32: *out = CUDNN_DATA_FLOAT; return true;
    case LT_FLOAT64: *out = CUDNN_DATA_DOUBLE; return true;
    case LT_FLOAT16: *out = CUDNN_DATA_HALF; return true;
    case LT_BFLOAT16: *out = CUDNN_DATA_BFLOAT16; return true;
    default: return false;
  }
}

static const float one_f = 1.0f, zero_f = 0.0f;
static const double one_d = 1.0, zero_d = 0.0;

const void *cuda_cudnn_one(bool f64) { return f64 ? (const void *)&one_d : (const void *)&one_f; }
const void *cuda_cudnn_zero(bool f64) { return f64 ? (const void *)&zero_d : (const void *)&zero_f; }

// ---- descriptors ----

// Whether every dim and the product of the four fit an int (checked without
// overflowing: each dim is at most INT_MAX, so the plain product could wrap).
static bool dims_fit_int(int64_t a, int64_t b, int64_t c, int64_t d) {
  const int64_t v[4] = {a, b, c, d};
  // Every dim first: returning at the first 0 would let a later dim above
  // INT_MAX through to the (int) casts of set4d.
  for (int i = 0; i < 4; i++)
    if (!cuda_cudnn_fits_int(v[i])) return false;
  for (int i = 0; i < 4; i++)
    if (v[i] == 0) return true; // an empty tensor: the product is 0
  int64_t p = 1;
  for (int i = 0; i < 4; i++) {
    if (p > 0x7fffffffLL / v[i]) return false;
    p *= v[i];
  }
  return true;
}

static lt_status too_large(const char *op, const char *what) {
  return lt_error(LT_ERR_SHAPE, "cuda: %s: %s exceeds cuDNN's 32-bit limits", op, what);
}

lt_status cudnn_tensor_desc::set4d(const char *op, cudnnDataType_t dt, int64_t n, int64_t c,
                                   int64_t h, int64_t w) {
  if (!dims_fit_int(n, c, h, w)) return too_large(op, "a tensor");
  LT_TRY(create(op));
  CUDNN_TRY(op, cudnnSetTensor4dDescriptor,
            (d, CUDNN_TENSOR_NCHW, dt, (int)n, (int)c, (int)h, (int)w));
  return LT_OK;
}

lt_status cudnn_filter_desc::set4d(const char *op, cudnnDataType_t dt, int64_t k, int64_t c,
                                   int64_t h, int64_t w) {
  if (!dims_fit_int(k, c, h, w)) return too_large(op, "the weight");
  if (!d) CUDNN_TRY(op, cudnnCreateFilterDescriptor, (&d));
  CUDNN_TRY(op, cudnnSetFilter4dDescriptor,
            (d, dt, CUDNN_TENSOR_NCHW, (int)k, (int)c, (int)h, (int)w));
  return LT_OK;
}

lt_status cudnn_conv_desc::set2d(const char *op, const int64_t pad[2], const int64_t stride[2],
                                 const int64_t dilation[2], int64_t groups, cudnnDataType_t ct) {
  for (int i = 0; i < 2; i++)
    if (!cuda_cudnn_fits_int(pad[i]) || !cuda_cudnn_fits_int(stride[i]) ||
        !cuda_cudnn_fits_int(dilation[i]))
      return too_large(op, "a stride, padding or dilation");
  if (!cuda_cudnn_fits_int(groups)) return too_large(op, "the group count");
  if (!d) CUDNN_TRY(op, cudnnCreateConvolutionDescriptor, (&d));
  CUDNN_TRY(op, cudnnSetConvolution2dDescriptor,
            (d, (int)pad[0], (int)pad[1], (int)stride[0], (int)stride[1], (int)dilation[0],
             (int)dilation[1], CUDNN_CROSS_CORRELATION, ct));
  CUDNN_TRY(op, cudnnSetConvolutionGroupCount, (d, (int)groups));
  return LT_OK;
}

// ---- workspace limit ----

static pthread_once_t limit_once = PTHREAD_ONCE_INIT;
static size_t workspace_limit = (size_t)1 << 30;

static void read_workspace_limit(void) {
  const char *s = getenv("LT_CUDNN_WORKSPACE_LIMIT");
  if (!s || !*s) return;
  // Digits only: strtoull skips leading blanks, so " -1" would pass the
  // s[0] != '-' test below and wrap to the largest value (no limit).
  for (const char *p = s; *p; p++)
    if (*p < '0' || *p > '9') return;
  char *end = NULL;
  errno = 0;
  const unsigned long long v = strtoull(s, &end, 10);
  // Only a whole non-negative number counts; anything else keeps the default
  // (strtoull would take "-1" as the largest value).
  if (errno == 0 && end && *end == '\0' && s[0] != '-') workspace_limit = (size_t)v;
}

extern "C" size_t lt_cuda_cudnn_workspace_limit(void) {
  pthread_once(&limit_once, read_workspace_limit);
  return workspace_limit;
}

// ---- algorithm cache: open addressing, linear probing, grown at half load ----

struct cache_slot {
  bool used;
  cuda_conv_key key;
  cuda_conv_choice choice;
};

static cache_slot *cache_slots;
static size_t cache_cap, cache_count; // cap: 0 or a power of two
static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;

// FNV-1a over the key's bytes (the key has no padding).
static uint64_t key_hash(const cuda_conv_key *k) {
  const unsigned char *p = (const unsigned char *)k;
  uint64_t h = 1469598103934665603ULL;
  for (size_t i = 0; i < sizeof *k; i++) {
    h ^= p[i];
    h *= 1099511628211ULL;
  }
  return h;
}

// The slot holding key, or the empty slot where it would go. Needs cap > 0
// and at least one empty slot (the load stays at most a half).
static cache_slot *find_slot(cache_slot *slots, size_t cap, const cuda_conv_key *k) {
  size_t i = (size_t)key_hash(k) & (cap - 1);
  while (slots[i].used && memcmp(&slots[i].key, k, sizeof *k) != 0) i = (i + 1) & (cap - 1);
  return &slots[i];
}

bool cuda_cudnn_algo_lookup(const cuda_conv_key *key, cuda_conv_choice *out) {
  bool found = false;
  pthread_mutex_lock(&cache_lock);
  if (cache_cap > 0) {
    const cache_slot *s = find_slot(cache_slots, cache_cap, key);
    if (s->used) {
      *out = s->choice;
      found = true;
    }
  }
  pthread_mutex_unlock(&cache_lock);
  return found;
}

void cuda_cudnn_algo_store(const cuda_conv_key *key, const cuda_conv_choice *choice) {
  pthread_mutex_lock(&cache_lock);
  if (2 * (cache_count + 1) > cache_cap) {
    const size_t cap = cache_cap ? 2 * cache_cap : 64;
    cache_slot *slots = (cache_slot *)calloc(cap, sizeof *slots);
    if (!slots) {
      pthread_mutex_unlock(&cache_lock);
      return;
    }
    for (size_t i = 0; i < cache_cap; i++)
      if (cache_slots[i].used) *find_slot(slots, cap, &cache_slots[i].key) = cache_slots[i];
    free(cache_slots);
    cache_slots = slots;
    cache_cap = cap;
  }
  cache_slot *s = find_slot(cache_slots, cache_cap, key);
  if (!s->used) { // another thread may have stored the same key meanwhile
    s->used = true;
    s->key = *key;
    cache_count++;
  }
  s->choice = *choice;
  pthread_mutex_unlock(&cache_lock);
}
