/* The seeded generator behind lt.rand, lt.randn, lt.randint and dropout.
 *
 * Numbers come from Philox4x32-10 (Salmon et al. 2011, see philox.h) keyed by
 * the seed. A fill of n elements gives each element a fixed place: element i
 * takes lane i % K of counter block (offset + i / K), where K is how many
 * outputs one 128-bit block yields for the distribution (4 floats from four
 * 32-bit words, 2 doubles from two 64-bit words, ...). Elements are numbered in
 * the view's row-major order, so a value depends only on the seed, the offset
 * and the element's position, never on the thread count or the strides. After
 * the fill the offset moves past the blocks used, so the next call draws new
 * numbers. */
#include "lt/autograd.h"
#include "lt/rng.h"

#include <float.h>
#include <math.h>

#include "core/known_range.h"
#include "core/philox.h"
#include "lt/ops.h"
#include "lt/threads.h"

/* PyTorch's default_rng_seed_val: the seed before any lt_manual_seed. */
#define DEFAULT_SEED UINT64_C(67280421310721)

/* Elements per thread chunk below which a fill stays on one thread. */
#define FILL_GRAIN 32768

static lt_rng_state rng_state = {DEFAULT_SEED, 0};

void lt_manual_seed(uint64_t seed) {
  rng_state.seed = seed;
  rng_state.offset = 0;
}

lt_rng_state lt_rng_get_state(void) { return rng_state; }

void lt_rng_set_state(lt_rng_state s) { rng_state = s; }

/* ---- one Philox block into K values ---- */

typedef enum { DIST_UNIFORM, DIST_NORMAL, DIST_RANDINT, DIST_BERNOULLI } dist_kind;

typedef struct fill_job {
  dist_kind kind;
  bool wide;       /* float64 target: 53-bit uniforms, two per block */
  int per_block;   /* K: outputs per Philox block */
  double a, b;     /* uniform low/high, normal mean/std, bernoulli p (a) */
  int64_t low;     /* randint: first value */
  uint64_t span;   /* randint: number of values; 0 means all 2^64 */
  uint32_t key[2];
  uint64_t first_block;
  /* the target view */
  char *data;
  size_t elsize;
  lt_dtype dtype;
  int ndim;
  const int64_t *shape, *stride;
  bool contiguous;
  float uniform_cap; /* float32 uniform: stored when rounding reaches high */
} fill_job;

static const double TWO_PI = 6.283185307179586476925286766559;

static double u32_unit(uint32_t w) { return w * 0x1p-32; } /* [0, 1) */
static uint64_t join64(uint32_t hi, uint32_t lo) { return (uint64_t)hi << 32 | lo; }
static double u53_unit(uint64_t r) { return (double)(r >> 11) * 0x1p-53; } /* [0, 1) */

/* High 64 bits of a 64x64-bit product (without relying on __int128). */
static uint64_t mul_high64(uint64_t a, uint64_t b) {
  uint64_t a_lo = (uint32_t)a, a_hi = a >> 32, b_lo = (uint32_t)b, b_hi = b >> 32;
  uint64_t lo_lo = a_lo * b_lo, hi_lo = a_hi * b_lo, lo_hi = a_lo * b_hi, hi_hi = a_hi * b_hi;
  uint64_t middle = (lo_lo >> 32) + (uint32_t)hi_lo + (uint32_t)lo_hi;
  return hi_hi + (hi_lo >> 32) + (lo_hi >> 32) + (middle >> 32);
}

/* Box-Muller: two independent uniforms give two independent normals; both are
 * used. u1 is in (0, 1] so that the log is finite. */
static void box_muller(double u1, double u2, double *z0, double *z1) {
  double r = sqrt(-2.0 * log(u1));
  *z0 = r * cos(TWO_PI * u2);
  *z1 = r * sin(TWO_PI * u2);
}

/* The same in float arithmetic, several times faster, for every target that
 * is not float64 (24-bit uniforms: the tails reach 5.8 standard deviations). */
static void box_muller_float(uint32_t w1, uint32_t w2, double *z0, double *z1) {
  float u1 = (float)((w1 >> 8) + 1u) * 0x1p-24f; /* (0, 1] */
  float u2 = (float)(w2 >> 8) * 0x1p-24f;        /* [0, 1) */
  float r = sqrtf(-2.0f * logf(u1));
  float angle = (float)TWO_PI * u2;
  *z0 = r * cosf(angle);
  *z1 = r * sinf(angle);
}

static void block_values(const fill_job *job, uint64_t block, double vals[4], int64_t ivals[4]) {
  uint32_t counter[4] = {(uint32_t)block, (uint32_t)(block >> 32), 0, 0};
  uint32_t w[4];
  lt_philox4x32_10(counter, job->key, w);
  switch (job->kind) {
    case DIST_UNIFORM:
      if (job->wide) {
        vals[0] = job->a + u53_unit(join64(w[0], w[1])) * (job->b - job->a);
        vals[1] = job->a + u53_unit(join64(w[2], w[3])) * (job->b - job->a);
      } else {
        /* 24 bits: exactly the mantissa of a float32 in [0, 1). */
        for (int k = 0; k < 4; k++) vals[k] = job->a + (w[k] >> 8) * 0x1p-24 * (job->b - job->a);
      }
      break;
    case DIST_NORMAL:
      if (job->wide) {
        box_muller((double)((join64(w[0], w[1]) >> 11) + 1) * 0x1p-53,
                   u53_unit(join64(w[2], w[3])), &vals[0], &vals[1]);
      } else {
        box_muller_float(w[0], w[1], &vals[0], &vals[1]);
        box_muller_float(w[2], w[3], &vals[2], &vals[3]);
      }
      for (int k = 0; k < job->per_block; k++) vals[k] = job->a + job->b * vals[k];
      break;
    case DIST_RANDINT:
      /* Lemire's multiply-shift maps 64 random bits onto span values; the bias
       * is at most span / 2^64, far below anything a test could see. */
      for (int k = 0; k < 2; k++) {
        uint64_t r = join64(w[2 * k], w[2 * k + 1]);
        uint64_t step = job->span ? mul_high64(r, job->span) : r;
        ivals[k] = (int64_t)((uint64_t)job->low + step); /* wraps, never overflows */
      }
      break;
    case DIST_BERNOULLI:
      for (int k = 0; k < 4; k++) vals[k] = u32_unit(w[k]) < job->a ? 1.0 : 0.0;
      break;
  }
}

/* ---- storing into the target ---- */

/* The largest 16-bit float pattern below the one given (toward -inf). */
static uint16_t half_pattern_below(uint16_t bits) {
  if (bits & 0x8000u) return (uint16_t)(bits + 1u); /* more negative */
  if (bits == 0) return 0x8001u;                     /* +0 -> smallest negative */
  return (uint16_t)(bits - 1u);
}

/* Stores a uniform draw so that a floating target stays in [low, high):
 * rounding low + u * (high - low) to the dtype can land on high itself, and
 * then the largest representable value below high is stored instead. */
static void store_uniform(void *p, lt_dtype dt, double v, double low, double high) {
  lt_store_double(p, dt, v);
  if (!lt_dtype_is_floating(dt) || !(low < high) || lt_load_double(p, dt) < high) return;
  switch (dt) {
    case LT_FLOAT64: v = nextafter(high, -INFINITY); lt_store_double(p, dt, v); break;
    case LT_FLOAT32: {
      float f = (float)high;
      while ((double)f >= high) f = nextafterf(f, -INFINITY);
      lt_store_double(p, dt, f);
      break;
    }
    default: { /* float16, bfloat16 */
      uint16_t bits;
      lt_store_double(&bits, dt, high);
      while (lt_load_double(&bits, dt) >= high) bits = half_pattern_below(bits);
      *(uint16_t *)p = bits;
      break;
    }
  }
  if (lt_load_double(p, dt) < low) lt_store_double(p, dt, low); /* low, high one ulp apart */
}

/* The common case (contiguous float32: weights, dropout masks) without the
 * per-element dtype dispatch; stores exactly what the general path stores. */
static void fill_range_float32(const fill_job *job, int64_t begin, int64_t end) {
  float *out = (float *)job->data;
  const int64_t K = job->per_block;
  double vals[4] = {0};
  int64_t ivals[4] = {0};
  int64_t i = begin;
  while (i < end) {
    block_values(job, job->first_block + (uint64_t)(i / K), vals, ivals);
    for (int64_t lane = i % K; lane < K && i < end; lane++, i++) {
      float f;
      if (job->kind == DIST_RANDINT) {
        f = (float)ivals[lane];
      } else {
        f = (float)vals[lane];
        if (job->kind == DIST_UNIFORM && job->a < job->b && (double)f >= job->b)
          f = job->uniform_cap;
      }
      out[i] = f;
    }
  }
}

static void fill_range(void *ctx, int64_t begin, int64_t end) {
  const fill_job *job = ctx;
  if (job->contiguous && job->dtype == LT_FLOAT32) {
    fill_range_float32(job, begin, end);
    return;
  }
  /* Position of element `begin` in the view: its multi-index and offset. */
  int64_t index[LT_MAX_DIMS];
  int64_t pos = 0, rest = begin;
  for (int d = job->ndim - 1; d >= 0; d--) {
    index[d] = rest % job->shape[d];
    rest /= job->shape[d];
    pos += index[d] * job->stride[d];
  }
  const uint64_t K = (uint64_t)job->per_block;
  double vals[4] = {0};
  int64_t ivals[4] = {0};
  uint64_t current = 0;
  bool have_block = false;
  for (int64_t i = begin; i < end; i++) {
    uint64_t block = (uint64_t)i / K;
    if (!have_block || block != current) {
      block_values(job, job->first_block + block, vals, ivals);
      current = block;
      have_block = true;
    }
    int lane = (int)((uint64_t)i % K);
    void *p = job->data + pos * (int64_t)job->elsize;
    if (job->kind == DIST_RANDINT)
      lt_store_int64(p, job->dtype, ivals[lane]);
    else if (job->kind == DIST_UNIFORM)
      store_uniform(p, job->dtype, vals[lane], job->a, job->b);
    else
      lt_store_double(p, job->dtype, vals[lane]);
    /* Step to the next element in row-major order. */
    for (int d = job->ndim - 1; d >= 0; d--) {
      pos += job->stride[d];
      if (++index[d] < job->shape[d]) break;
      pos -= job->stride[d] * job->shape[d];
      index[d] = 0;
    }
  }
}

/* Fills a CPU tensor: reserves the blocks, runs the chunks, bumps the version. */
static lt_status fill_cpu(lt_tensor *t, fill_job *job) {
  int64_t n = lt_numel(t);
  job->data = lt_data(t);
  job->elsize = lt_dtype_size(t->dtype);
  job->dtype = t->dtype;
  job->ndim = t->ndim;
  job->shape = t->shape;
  job->stride = t->stride;
  job->contiguous = lt_is_contiguous(t);
  if (job->kind == DIST_UNIFORM) /* what store_uniform puts where a draw rounds to high */
    store_uniform(&job->uniform_cap, LT_FLOAT32, job->b, job->a, job->b);
  job->key[0] = (uint32_t)rng_state.seed;
  job->key[1] = (uint32_t)(rng_state.seed >> 32);
  job->first_block = rng_state.offset;
  rng_state.offset += ((uint64_t)n + (uint64_t)job->per_block - 1) / (uint64_t)job->per_block;
  if (!lt_estimating()) lt_parallel_for(n, FILL_GRAIN, fill_range, job); /* no data to fill */
  t->storage->version++;
  return LT_OK;
}

/* Checks the target, then fills it: on the CPU directly, elsewhere through a
 * CPU tensor copied over (the same numbers on every device). */
static lt_status fill(const char *op, lt_tensor *t, fill_job *job) {
  if (!t || !t->storage) return lt_error(LT_ERR_FREED, "%s: attempt to use a freed tensor", op);
  for (int d = 0; d < t->ndim; d++) {
    if (t->stride[d] == 0 && t->shape[d] > 1)
      return lt_error(LT_ERR_ARG,
                      "%s: more than one element of the written-to tensor refers to a "
                      "single memory location (an expanded tensor); clone it first",
                      op);
  }
  if (t->storage->device.type == LT_DEVICE_CPU) {
    fill_cpu(t, job);
    t->storage->last_inplace_op = op; /* autograd names the writer */
    return LT_OK;
  }

  lt_tensor *host = NULL;
  LT_TRY(lt_empty_named(op, t->shape, t->ndim, t->dtype, lt_cpu(), &host));
  fill_cpu(host, job);
  /* Random fills are not recorded by autograd, on any device. */
  bool grad_mode = lt_set_grad_enabled(false);
  lt_status st = lt_copy_(t, host);
  lt_set_grad_enabled(grad_mode);
  lt_tensor_release(host);
  if (st == LT_OK) t->storage->last_inplace_op = op;
  return st;
}

/* ---- the distributions ---- */

/* The largest finite value of a floating dtype. */
static double floating_max(lt_dtype dt) {
  switch (dt) {
    case LT_FLOAT64: return DBL_MAX;
    case LT_FLOAT32: return FLT_MAX;
    case LT_FLOAT16: return 65504.0;
    default: return 0x1.FEp127; /* bfloat16 */
  }
}

lt_status lt_uniform_(lt_tensor *t, double low, double high) {
  const char *op = "uniform_";
  if (!isfinite(low) || !isfinite(high))
    return lt_error(LT_ERR_ARG, "%s: low and high must be finite, got low %g and high %g", op,
                    low, high);
  if (low > high)
    return lt_error(LT_ERR_ARG, "%s: low %g is greater than high %g", op, low, high);
  if (t && lt_dtype_is_floating(t->dtype)) {
    double max = floating_max(t->dtype);
    if (fabs(low) > max || fabs(high) > max || high - low > max)
      return lt_error(LT_ERR_ARG, "%s: range [%g, %g) does not fit %s (largest value %g)", op,
                      low, high, lt_dtype_name(t->dtype), max);
  }
  bool wide = t && t->dtype == LT_FLOAT64;
  fill_job job = {.kind = DIST_UNIFORM, .wide = wide, .per_block = wide ? 2 : 4, .a = low,
                  .b = high};
  return fill(op, t, &job);
}

lt_status lt_normal_(lt_tensor *t, double mean, double std) {
  const char *op = "normal_";
  if (!(std >= 0.0)) return lt_error(LT_ERR_ARG, "%s: std must be non-negative, got %g", op, std);
  if (!isfinite(mean) || !isfinite(std))
    return lt_error(LT_ERR_ARG, "%s: mean and std must be finite, got mean %g and std %g", op,
                    mean, std);
  bool wide = t && t->dtype == LT_FLOAT64;
  fill_job job = {.kind = DIST_NORMAL, .wide = wide, .per_block = wide ? 2 : 4, .a = mean,
                  .b = std};
  return fill(op, t, &job);
}

/* The integers a dtype holds exactly, as PyTorch's random_(from, to) checks:
 * the integer range, or +-2^digits for floating types. */
static void exact_integer_range(lt_dtype dt, int64_t *lo, int64_t *hi) {
  int digits = 0;
  switch (dt) {
    case LT_INT64: *lo = INT64_MIN; *hi = INT64_MAX; return;
    case LT_INT32: *lo = INT32_MIN; *hi = INT32_MAX; return;
    case LT_UINT8: *lo = 0; *hi = 255; return;
    case LT_BOOL: *lo = 0; *hi = 1; return;
    case LT_FLOAT64: digits = 53; break;
    case LT_FLOAT32: digits = 24; break;
    case LT_FLOAT16: digits = 11; break;
    default: digits = 8; break; /* bfloat16 */
  }
  *lo = -((int64_t)1 << digits);
  *hi = (int64_t)1 << digits;
}

lt_status lt_randint_(lt_tensor *t, int64_t low, int64_t high) {
  const char *op = "randint";
  if (low > high)
    return lt_error(LT_ERR_ARG, "%s: low %lld is greater than high %lld", op, (long long)low,
                    (long long)high);
  if (t) {
    int64_t lo, hi;
    exact_integer_range(t->dtype, &lo, &hi);
    if (low < lo || high > hi)
      return lt_error(LT_ERR_ARG, "%s: range [%lld, %lld] does not fit %s (values %lld .. %lld)",
                      op, (long long)low, (long long)high, lt_dtype_name(t->dtype),
                      (long long)lo, (long long)hi);
  }
  /* high - low + 1 in unsigned arithmetic; 0 when the range is all of int64. */
  uint64_t span = (uint64_t)high - (uint64_t)low + 1u;
  fill_job job = {.kind = DIST_RANDINT, .per_block = 2, .low = low, .span = span};
  LT_TRY(fill(op, t, &job));
  /* Random labels made on a device are range-checked without reading them. */
  lt_known_range_note(t, low, high);
  return LT_OK;
}

lt_status lt_bernoulli_(lt_tensor *t, double p) {
  const char *op = "bernoulli_";
  if (!(p >= 0.0 && p <= 1.0))
    return lt_error(LT_ERR_ARG, "%s: p must be in [0, 1], got %g", op, p);
  fill_job job = {.kind = DIST_BERNOULLI, .per_block = 4, .a = p};
  return fill(op, t, &job);
}
