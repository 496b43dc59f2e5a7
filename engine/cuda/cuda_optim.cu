// The CUDA optimizer table: SGD, Adam/AdamW, RMSprop, Adagrad,
// GradScaler's unscale and the foreach norm and scale, each over a list of tensors with few launches (multi-tensor apply, as PyTorch's
// foreach kernels): a launch gets up to MAX tensors' pointers and sizes and a
// table of chunks (tensor slot, chunk number) in its parameter struct, one
// block per chunk, and a list longer than that takes several launches. The
// single-tensor entries are the same launches with one tensor.
//
// The per-element arithmetic repeats engine/cpu/cpu_optim.c operation by
// operation, in float for float32 and the 16-bit types (loaded to float,
// rounded once when stored) and in double for float64. Every operation uses
// a round-to-nearest intrinsic (__fmul_rn, __fadd_rn, ...), which nvcc never
// contracts into an fma: the CPU build does not fuse either, so both devices
// round the same intermediate results.
#include "cuda/cuda_convert.cuh"

#include <type_traits>

extern "C" {
#include "core/optim_backend.h"
}

// ---- rounding arithmetic, one overload per compute type ----

__device__ inline float op_add(float a, float b) { return __fadd_rn(a, b); }
__device__ inline float op_mul(float a, float b) { return __fmul_rn(a, b); }
__device__ inline float op_div(float a, float b) { return __fdiv_rn(a, b); }
__device__ inline float op_sqrt(float a) { return __fsqrt_rn(a); }
__device__ inline double op_add(double a, double b) { return __dadd_rn(a, b); }
__device__ inline double op_mul(double a, double b) { return __dmul_rn(a, b); }
__device__ inline double op_div(double a, double b) { return __ddiv_rn(a, b); }
__device__ inline double op_sqrt(double a) { return __dsqrt_rn(a); }

// The compute type and element size of a storage dtype (a template constant,
// so cuda_load/cuda_store's switch folds away).
template <int DT> struct optim_elem {
  typedef float C;
  static const int size = 2;
};
template <> struct optim_elem<LT_FLOAT32> {
  typedef float C;
  static const int size = 4;
};
template <> struct optim_elem<LT_FLOAT64> {
  typedef double C;
  static const int size = 8;
};

// ---- the launch tables ----

// Elements per chunk (one block each). Big enough that the table stays
// small; a block strides over its chunk.
#define OPTIM_CHUNK 65536
// Chunks per launch: the grid, and the table's length.
#define OPTIM_BLOCKS 256

// Tensors per launch for a given number of pointers per tensor, sized so
// that each struct, with the other arguments, stays under the 4 KiB kernel
// parameter limit (checked below).
template <int DEPTH> struct optim_list {
  static const int MAX = DEPTH == 1 ? 110 : DEPTH <= 3 ? 48 : 36;
  char *ptr[DEPTH][MAX];
  int64_t numel[MAX];
  uint8_t slot_of_block[OPTIM_BLOCKS];
  int32_t chunk_of_block[OPTIM_BLOCKS];
};

struct sgd_list {
  optim_list<3> t; // param, grad, momentum buffer (NULL without momentum)
  uint8_t init[optim_list<3>::MAX];
};

struct adam_list {
  optim_list<5> t; // param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq
  double step_size[optim_list<5>::MAX];
  double bias_correction2_sqrt[optim_list<5>::MAX];
};

// The options every tensor of a launch shares.
struct sgd_common {
  double lr, momentum, dampening, weight_decay;
  bool nesterov, maximize, has_buf;
};

struct adam_common {
  double beta1, beta2, eps, weight_decay, param_scale;
  bool amsgrad, maximize;
};

// param, grad, square_avg, momentum buffer, grad_avg (NULL where unused);
// RMSprop has no per-tensor scalars.
typedef optim_list<5> rmsprop_list;

struct rmsprop_common {
  double lr, alpha, eps, weight_decay, momentum;
  bool centered, maximize, has_buf;
};

struct adagrad_list {
  optim_list<3> t; // param, grad, sum
  double clr[optim_list<3>::MAX];
};

struct adagrad_common {
  double weight_decay, eps;
  bool maximize;
};

static_assert(sizeof(sgd_list) + sizeof(sgd_common) <= 4000, "SGD launch arguments over 4 KiB");
static_assert(sizeof(rmsprop_list) + sizeof(rmsprop_common) <= 4000,
              "RMSprop launch arguments over 4 KiB");
static_assert(sizeof(adagrad_list) + sizeof(adagrad_common) <= 4000,
              "Adagrad launch arguments over 4 KiB");
static_assert(sizeof(adam_list) + sizeof(adam_common) <= 4000, "Adam launch arguments over 4 KiB");
static_assert(sizeof(optim_list<1>) + 16 <= 4000, "unscale launch arguments over 4 KiB");

// The element range [begin, end) of this block's chunk and its tensor slot.
template <int DEPTH>
__device__ inline int chunk_range(const optim_list<DEPTH> &t, int64_t *begin, int64_t *end) {
  const int slot = t.slot_of_block[blockIdx.x];
  *begin = (int64_t)t.chunk_of_block[blockIdx.x] * OPTIM_CHUNK;
  const int64_t stop = *begin + OPTIM_CHUNK;
  *end = stop < t.numel[slot] ? stop : t.numel[slot];
  return slot;
}

// ---- kernels ----

// SGD_BODY of cpu_optim.c: d_p (maximize, weight decay), the momentum buffer
// (set to d_p on its first step), nesterov, p += -lr * d_p.
template <int DT> __global__ void sgd_kernel(sgd_list l, sgd_common o) {
  typedef typename optim_elem<DT>::C C;
  const int ES = optim_elem<DT>::size;
  int64_t begin, end;
  const int slot = chunk_range(l.t, &begin, &end);
  char *p = l.t.ptr[0][slot], *b = o.has_buf ? l.t.ptr[2][slot] : NULL;
  const char *g = l.t.ptr[1][slot];
  const bool init = l.init[slot] != 0;
  const C wd = (C)o.weight_decay, mom = (C)o.momentum;
  const C keep = (C)(1.0 - o.dampening), neg_lr = (C)(-o.lr);
  for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
    const int64_t at = i * ES;
    const C pi = cuda_load<C>(p + at, DT);
    const C gi = cuda_load<C>(g + at, DT);
    C d = o.maximize ? -gi : gi;
    if (o.weight_decay != 0.0) d = op_add(d, op_mul(wd, pi));
    if (b) {
      C bi = init ? d : op_mul(cuda_load<C>(b + at, DT), mom);
      if (!init) bi = op_add(bi, op_mul(keep, d));
      cuda_store<C>(b + at, DT, bi);
      d = o.nesterov ? op_add(d, op_mul(mom, bi)) : bi;
    }
    cuda_store<C>(p + at, DT, op_add(pi, op_mul(neg_lr, d)));
  }
}

// ADAM_BODY of cpu_optim.c, with this tensor's step_size and bias correction.
template <int DT> __global__ void adam_kernel(adam_list l, adam_common s) {
  typedef typename optim_elem<DT>::C C;
  const int ES = optim_elem<DT>::size;
  int64_t begin, end;
  const int slot = chunk_range(l.t, &begin, &end);
  char *p = l.t.ptr[0][slot], *m = l.t.ptr[2][slot], *v = l.t.ptr[3][slot];
  char *vmax = s.amsgrad ? l.t.ptr[4][slot] : NULL;
  const char *g = l.t.ptr[1][slot];
  const C b1 = (C)s.beta1, b2 = (C)s.beta2;
  const C omb1 = (C)(1.0 - s.beta1), omb2 = (C)(1.0 - s.beta2);
  const C wd = (C)s.weight_decay, scale = (C)s.param_scale;
  const C bc2 = (C)l.bias_correction2_sqrt[slot], eps = (C)s.eps;
  const C neg_step = (C)(-l.step_size[slot]);
  for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
    const int64_t at = i * ES;
    C gi = cuda_load<C>(g + at, DT);
    if (s.maximize) gi = -gi;
    C pi = cuda_load<C>(p + at, DT);
    if (s.param_scale != 1.0) pi = op_mul(pi, scale);
    if (s.weight_decay != 0.0) gi = op_add(gi, op_mul(wd, pi));
    C mi = op_mul(cuda_load<C>(m + at, DT), b1);
    mi = op_add(mi, op_mul(omb1, gi));
    C vi = op_mul(cuda_load<C>(v + at, DT), b2);
    vi = op_add(vi, op_mul(op_mul(omb2, gi), gi));
    cuda_store<C>(m + at, DT, mi);
    cuda_store<C>(v + at, DT, vi);
    if (vmax) {
      C x = cuda_load<C>(vmax + at, DT);
      if (vi > x || vi != vi) x = vi; // NaN propagates, as torch.maximum
      cuda_store<C>(vmax + at, DT, x);
      vi = x;
    }
    const C denom = op_add(op_div(op_sqrt(vi), bc2), eps);
    cuda_store<C>(p + at, DT, op_add(pi, op_div(op_mul(neg_step, mi), denom)));
  }
}

// RMSPROP_BODY of cpu_optim.c: the same operations, lerp's form chosen by
// the weight as there.
template <int DT> __global__ void rmsprop_kernel(rmsprop_list l, rmsprop_common o) {
  typedef typename optim_elem<DT>::C C;
  const int ES = optim_elem<DT>::size;
  int64_t begin, end;
  const int slot = chunk_range(l, &begin, &end);
  char *p = l.ptr[0][slot], *v = l.ptr[2][slot];
  char *b = o.has_buf ? l.ptr[3][slot] : NULL, *ga = o.centered ? l.ptr[4][slot] : NULL;
  const char *g = l.ptr[1][slot];
  const C wd = (C)o.weight_decay, alpha = (C)o.alpha, w = (C)(1.0 - o.alpha);
  const C eps = (C)o.eps, mom = (C)o.momentum, neg_lr = (C)(-o.lr);
  const bool small = fabs(1.0 - o.alpha) < 0.5;
  const C one_minus_w = op_add((C)1, -w);
  for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
    const int64_t at = i * ES;
    const C pi = cuda_load<C>(p + at, DT);
    C gi = cuda_load<C>(g + at, DT);
    if (o.maximize) gi = -gi;
    if (o.weight_decay != 0.0) gi = op_add(gi, op_mul(wd, pi));
    C vi = op_mul(cuda_load<C>(v + at, DT), alpha);
    vi = op_add(vi, op_mul(op_mul(w, gi), gi));
    cuda_store<C>(v + at, DT, vi);
    C avg;
    if (ga) {
      const C a = cuda_load<C>(ga + at, DT);
      const C d = op_add(gi, -a);
      const C ai = small ? op_add(a, op_mul(w, d)) : op_add(gi, -op_mul(d, one_minus_w));
      cuda_store<C>(ga + at, DT, ai);
      avg = op_sqrt(op_add(vi, -op_mul(ai, ai)));
    } else {
      avg = op_sqrt(vi);
    }
    avg = op_add(avg, eps);
    if (b) {
      C bi = op_mul(cuda_load<C>(b + at, DT), mom);
      bi = op_add(bi, op_div(gi, avg));
      cuda_store<C>(b + at, DT, bi);
      cuda_store<C>(p + at, DT, op_add(pi, op_mul(neg_lr, bi)));
    } else {
      cuda_store<C>(p + at, DT, op_add(pi, op_div(op_mul(neg_lr, gi), avg)));
    }
  }
}

// ADAGRAD_BODY of cpu_optim.c, with this tensor's decayed learning rate.
template <int DT> __global__ void adagrad_kernel(adagrad_list l, adagrad_common o) {
  typedef typename optim_elem<DT>::C C;
  const int ES = optim_elem<DT>::size;
  int64_t begin, end;
  const int slot = chunk_range(l.t, &begin, &end);
  char *p = l.t.ptr[0][slot], *s = l.t.ptr[2][slot];
  const char *g = l.t.ptr[1][slot];
  const C wd = (C)o.weight_decay, eps = (C)o.eps, neg_clr = (C)(-l.clr[slot]);
  for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
    const int64_t at = i * ES;
    const C pi = cuda_load<C>(p + at, DT);
    C gi = cuda_load<C>(g + at, DT);
    if (o.maximize) gi = -gi;
    if (o.weight_decay != 0.0) gi = op_add(gi, op_mul(wd, pi));
    const C si = op_add(cuda_load<C>(s + at, DT), op_mul(gi, gi));
    cuda_store<C>(s + at, DT, si);
    const C std = op_add(op_sqrt(si), eps);
    cuda_store<C>(p + at, DT, op_add(pi, op_div(op_mul(neg_clr, gi), std)));
  }
}

// g *= inv_scale, noting a non-finite g first. Any thread that saw one
// stores 1.0f: all writers store the same value, so the race is benign, and
// nothing is ever reset here (the caller zeroes the flag).
template <int DT>
__global__ void unscale_kernel(optim_list<1> l, float inv_scale, float *found_inf) {
  typedef typename optim_elem<DT>::C C;
  const int ES = optim_elem<DT>::size;
  int64_t begin, end;
  const int slot = chunk_range(l, &begin, &end);
  char *g = l.ptr[0][slot];
  const C inv = (C)inv_scale;
  bool bad = false;
  for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
    const C x = cuda_load<C>(g + i * ES, DT);
    if (!isfinite(x)) bad = true;
    cuda_store<C>(g + i * ES, DT, op_mul(x, inv));
  }
  if (bad) *found_inf = 1.0f;
}

// ---- packing: tensors into launches ----

// Walks the tensors of one dtype, filling slots and chunk entries of a
// launch table, and calls launch(nblocks) whenever the table is full (in
// blocks or in tensor slots) and at the end. fill(slot, i) writes tensor
// i's pointers and per-tensor values into a slot; move(to, from) copies a
// slot when a tensor continues into the next launch.
template <int DEPTH, typename Fill, typename Move, typename Launch>
static lt_status pack_and_launch(optim_list<DEPTH> &t, int64_t n, lt_tensor *const *tensors,
                                 lt_dtype dt, Fill fill, Move move, Launch launch) {
  const int MAX = optim_list<DEPTH>::MAX;
  int slot = 0, nblocks = 0;
  for (int64_t i = 0; i < n; i++) {
    const int64_t numel = lt_numel(tensors[i]);
    if (tensors[i]->dtype != dt || numel == 0) continue;
    fill(slot, i);
    t.numel[slot] = numel;
    const int64_t chunks = (numel + OPTIM_CHUNK - 1) / OPTIM_CHUNK;
    for (int64_t c = 0; c < chunks; c++) {
      t.slot_of_block[nblocks] = (uint8_t)slot;
      t.chunk_of_block[nblocks] = (int32_t)c;
      nblocks++;
      const bool last_chunk = c == chunks - 1;
      if (nblocks == OPTIM_BLOCKS || (last_chunk && slot + 1 == MAX)) {
        LT_TRY(launch(nblocks));
        nblocks = 0;
        if (last_chunk) {
          slot = -1; // the next tensor starts the next launch at slot 0
        } else {
          move(0, slot); // this tensor goes on in the next launch
          t.numel[0] = numel;
          slot = 0;
        }
      }
    }
    slot++;
  }
  if (nblocks > 0) LT_TRY(launch(nblocks));
  return LT_OK;
}

static const lt_dtype optim_dtypes[] = {LT_FLOAT32, LT_FLOAT64, LT_FLOAT16, LT_BFLOAT16};

// f(d) with d a std::integral_constant of dt, one of optim_dtypes, so that a launch picked at
// run time calls the kernel templated on that dtype (decltype(d)::value).
template <typename F> static lt_status by_optim_dtype(lt_dtype dt, F f) {
  switch (dt) {
    case LT_FLOAT32: return f(std::integral_constant<int, LT_FLOAT32>{});
    case LT_FLOAT64: return f(std::integral_constant<int, LT_FLOAT64>{});
    case LT_FLOAT16: return f(std::integral_constant<int, LT_FLOAT16>{});
    default: return f(std::integral_constant<int, LT_BFLOAT16>{});
  }
}

// The tensors ts a dtype at a time in one-pointer launch tables (unscale, foreach norm and
// scale): launch(d, l, nblocks) as by_optim_dtype hands d.
template <typename Launch> static lt_status each_single_list(int64_t n, lt_tensor *const *ts, Launch launch) {
  optim_list<1> l;
  for (lt_dtype dt : optim_dtypes) {
    auto fill = [&](int slot, int64_t i) { l.ptr[0][slot] = cuda_bytes(ts[i]); };
    auto move = [&](int to, int from) { l.ptr[0][to] = l.ptr[0][from]; };
    auto go = [&](int nblocks) { return by_optim_dtype(dt, [&](auto d) { return launch(d, l, nblocks); }); };
    LT_TRY(pack_and_launch(l, n, ts, dt, fill, move, go));
  }
  return LT_OK;
}

// ---- SGD ----

template <int DT>
static lt_status sgd_launch(const sgd_list &l, const sgd_common &o, int nblocks) {
  sgd_kernel<DT><<<nblocks, CUDA_THREADS, 0, cuda_stream()>>>(l, o);
  return cuda_check_launch("SGD", "sgd_kernel");
}

static lt_status cuda_sgd_many(int64_t n, lt_tensor *const *params, lt_tensor *const *grads,
                               lt_tensor *const *bufs, const bool *init_buffers,
                               const lt_sgd_options *o) {
  cuda_device_guard guard(params[0]->storage->device);
  const sgd_common common = {o->lr,       o->momentum, o->dampening, o->weight_decay,
                             o->nesterov, o->maximize, bufs != NULL};
  sgd_list l;
  for (lt_dtype dt : optim_dtypes) {
    auto fill = [&](int slot, int64_t i) {
      l.t.ptr[0][slot] = cuda_bytes(params[i]);
      l.t.ptr[1][slot] = cuda_bytes(grads[i]);
      l.t.ptr[2][slot] = bufs ? cuda_bytes(bufs[i]) : NULL;
      l.init[slot] = init_buffers[i];
    };
    auto move = [&](int to, int from) {
      for (int k = 0; k < 3; k++) l.t.ptr[k][to] = l.t.ptr[k][from];
      l.init[to] = l.init[from];
    };
    auto launch = [&](int nblocks) -> lt_status {
      return by_optim_dtype(dt, [&](auto d) { return sgd_launch<decltype(d)::value>(l, common, nblocks); });
    };
    LT_TRY(pack_and_launch(l.t, n, params, dt, fill, move, launch));
  }
  return LT_OK;
}

// ---- Adam / AdamW ----

template <int DT>
static lt_status adam_launch(const adam_list &l, const adam_common &s, int nblocks) {
  adam_kernel<DT><<<nblocks, CUDA_THREADS, 0, cuda_stream()>>>(l, s);
  return cuda_check_launch("Adam", "adam_kernel");
}

static lt_status cuda_adam_many(int64_t n, lt_tensor *const *params, lt_tensor *const *grads,
                                lt_tensor *const *exp_avgs, lt_tensor *const *exp_avg_sqs,
                                lt_tensor *const *max_exp_avg_sqs, const lt_adam_scalars *s) {
  cuda_device_guard guard(params[0]->storage->device);
  // Only step_size and the bias correction differ between tensors.
  const adam_common common = {s[0].beta1,       s[0].beta2,   s[0].eps,     s[0].weight_decay,
                              s[0].param_scale, s[0].amsgrad, s[0].maximize};
  adam_list l;
  for (lt_dtype dt : optim_dtypes) {
    auto fill = [&](int slot, int64_t i) {
      l.t.ptr[0][slot] = cuda_bytes(params[i]);
      l.t.ptr[1][slot] = cuda_bytes(grads[i]);
      l.t.ptr[2][slot] = cuda_bytes(exp_avgs[i]);
      l.t.ptr[3][slot] = cuda_bytes(exp_avg_sqs[i]);
      l.t.ptr[4][slot] = max_exp_avg_sqs ? cuda_bytes(max_exp_avg_sqs[i]) : NULL;
      l.step_size[slot] = s[i].step_size;
      l.bias_correction2_sqrt[slot] = s[i].bias_correction2_sqrt;
    };
    auto move = [&](int to, int from) {
      for (int k = 0; k < 5; k++) l.t.ptr[k][to] = l.t.ptr[k][from];
      l.step_size[to] = l.step_size[from];
      l.bias_correction2_sqrt[to] = l.bias_correction2_sqrt[from];
    };
    auto launch = [&](int nblocks) -> lt_status {
      return by_optim_dtype(dt, [&](auto d) { return adam_launch<decltype(d)::value>(l, common, nblocks); });
    };
    LT_TRY(pack_and_launch(l.t, n, params, dt, fill, move, launch));
  }
  return LT_OK;
}

// ---- RMSprop ----

template <int DT>
static lt_status rmsprop_launch(const rmsprop_list &l, const rmsprop_common &o, int nblocks) {
  rmsprop_kernel<DT><<<nblocks, CUDA_THREADS, 0, cuda_stream()>>>(l, o);
  return cuda_check_launch("RMSprop", "rmsprop_kernel");
}

static lt_status cuda_rmsprop_many(int64_t n, lt_tensor *const *params, lt_tensor *const *grads,
                                   lt_tensor *const *square_avgs, lt_tensor *const *bufs,
                                   lt_tensor *const *grad_avgs, const lt_rmsprop_options *o) {
  cuda_device_guard guard(params[0]->storage->device);
  const rmsprop_common common = {o->lr,       o->alpha,    o->eps,       o->weight_decay,
                                 o->momentum, o->centered, o->maximize, bufs != NULL};
  rmsprop_list l;
  for (lt_dtype dt : optim_dtypes) {
    auto fill = [&](int slot, int64_t i) {
      l.ptr[0][slot] = cuda_bytes(params[i]);
      l.ptr[1][slot] = cuda_bytes(grads[i]);
      l.ptr[2][slot] = cuda_bytes(square_avgs[i]);
      l.ptr[3][slot] = bufs ? cuda_bytes(bufs[i]) : NULL;
      l.ptr[4][slot] = grad_avgs ? cuda_bytes(grad_avgs[i]) : NULL;
    };
    auto move = [&](int to, int from) {
      for (int k = 0; k < 5; k++) l.ptr[k][to] = l.ptr[k][from];
    };
    auto launch = [&](int nblocks) -> lt_status {
      return by_optim_dtype(dt,
                            [&](auto d) { return rmsprop_launch<decltype(d)::value>(l, common, nblocks); });
    };
    LT_TRY(pack_and_launch(l, n, params, dt, fill, move, launch));
  }
  return LT_OK;
}

// ---- Adagrad ----

template <int DT>
static lt_status adagrad_launch(const adagrad_list &l, const adagrad_common &o, int nblocks) {
  adagrad_kernel<DT><<<nblocks, CUDA_THREADS, 0, cuda_stream()>>>(l, o);
  return cuda_check_launch("Adagrad", "adagrad_kernel");
}

static lt_status cuda_adagrad_many(int64_t n, lt_tensor *const *params, lt_tensor *const *grads,
                                   lt_tensor *const *sums, const double *clrs,
                                   const lt_adagrad_options *o) {
  cuda_device_guard guard(params[0]->storage->device);
  const adagrad_common common = {o->weight_decay, o->eps, o->maximize};
  adagrad_list l;
  for (lt_dtype dt : optim_dtypes) {
    auto fill = [&](int slot, int64_t i) {
      l.t.ptr[0][slot] = cuda_bytes(params[i]);
      l.t.ptr[1][slot] = cuda_bytes(grads[i]);
      l.t.ptr[2][slot] = cuda_bytes(sums[i]);
      l.clr[slot] = clrs[i];
    };
    auto move = [&](int to, int from) {
      for (int k = 0; k < 3; k++) l.t.ptr[k][to] = l.t.ptr[k][from];
      l.clr[to] = l.clr[from];
    };
    auto launch = [&](int nblocks) -> lt_status {
      return by_optim_dtype(dt,
                            [&](auto d) { return adagrad_launch<decltype(d)::value>(l, common, nblocks); });
    };
    LT_TRY(pack_and_launch(l.t, n, params, dt, fill, move, launch));
  }
  return LT_OK;
}

// ---- GradScaler's unscale ----

template <int DT>
static lt_status unscale_launch(const optim_list<1> &l, float inv_scale, float *found_inf,
                                int nblocks) {
  unscale_kernel<DT><<<nblocks, CUDA_THREADS, 0, cuda_stream()>>>(l, inv_scale, found_inf);
  return cuda_check_launch("unscale_many", "unscale_kernel");
}

static lt_status cuda_unscale_many(int64_t n, lt_tensor *const *grads, float inv_scale,
                                   lt_tensor *found_inf) {
  cuda_device_guard guard(grads[0]->storage->device);
  float *flag = (float *)lt_data(found_inf);
  return each_single_list(n, grads, [&](auto d, const optim_list<1> &l, int nblocks) {
    return unscale_launch<decltype(d)::value>(l, inv_scale, flag, nblocks);
  });
}

// ---- foreach norm and scale (lt_foreach_norm, lt_foreach_mul_) ----

#define NORM_THREADS 256

// How |x| is folded: a sum of squares (p = 2), of magnitudes (1), of p-th
// powers, or the largest (inf; NaN wins, as max).
enum norm_fold { NORM_SQUARES, NORM_ABS, NORM_POW, NORM_MAX };

__device__ inline double norm_combine(int fold, double a, double b) {
  if (fold != NORM_MAX) return a + b;
  return (b > a || b != b) ? b : a;
}

__device__ inline double norm_term(int fold, double x, double p) {
  const double a = fabs(x);
  return fold == NORM_SQUARES ? x * x : fold == NORM_POW ? pow(a, p) : a;
}

// The block's threads' values combined in a fixed tree; thread 0 gets it.
__device__ inline double norm_block_reduce(int fold, double v) {
  __shared__ double part[NORM_THREADS];
  part[threadIdx.x] = v;
  __syncthreads();
  for (int w = NORM_THREADS / 2; w > 0; w /= 2) {
    if ((int)threadIdx.x < w) part[threadIdx.x] = norm_combine(fold, part[threadIdx.x], part[threadIdx.x + w]);
    __syncthreads();
  }
  return part[0];
}

// One chunk of one tensor per block, folded in double into partial[block]
// (the same order on every run: no atomics).
template <int DT>
__global__ void norm_kernel(optim_list<1> l, int fold, double p, double *partial) {
  const int ES = optim_elem<DT>::size;
  int64_t begin, end;
  const int slot = chunk_range(l, &begin, &end);
  const char *x = l.ptr[0][slot];
  double acc = 0.0;
  for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x)
    acc = norm_combine(fold, acc, norm_term(fold, cuda_load<double>(x + i * ES, DT), p));
  acc = norm_block_reduce(fold, acc);
  if (threadIdx.x == 0) partial[blockIdx.x] = acc;
}

// One block: the partials combined, the root taken, the result stored.
__global__ void norm_finish_kernel(const double *partial, int64_t count, int fold, double p,
                                   char *out, int out_dtype) {
  double acc = 0.0;
  for (int64_t i = threadIdx.x; i < count; i += blockDim.x) acc = norm_combine(fold, acc, partial[i]);
  acc = norm_block_reduce(fold, acc);
  if (threadIdx.x != 0) return;
  const double r = fold == NORM_SQUARES ? sqrt(acc) : fold == NORM_POW ? pow(acc, 1.0 / p) : acc;
  cuda_store<double>(out, out_dtype, r);
}

template <int DT>
static lt_status norm_launch(const optim_list<1> &l, int fold, double p, double *partial,
                             int nblocks) {
  norm_kernel<DT><<<nblocks, NORM_THREADS, 0, cuda_stream()>>>(l, fold, p, partial);
  return cuda_check_launch("foreach_norm", "norm_kernel");
}

static lt_status cuda_norm_many(int64_t n, lt_tensor *const *ts, double p, lt_tensor *out) {
  cuda_device_guard guard(out->storage->device);
  const int fold = p == 2.0 ? NORM_SQUARES : p == 1.0 ? NORM_ABS : p == HUGE_VAL ? NORM_MAX : NORM_POW;
  int64_t chunks = 0; // one partial each
  for (int64_t i = 0; i < n; i++) chunks += (lt_numel(ts[i]) + OPTIM_CHUNK - 1) / OPTIM_CHUNK;
  cuda_workspace ws; // given back at scope end: safe on the stream it was taken on
  if (chunks > 0) LT_TRY(ws.get(out->storage->device, (size_t)chunks * sizeof(double)));
  double *partial = (double *)ws.ptr;
  int64_t done = 0; // partials written by the launches so far
  LT_TRY(each_single_list(n, ts, [&](auto d, const optim_list<1> &l, int nblocks) {
    double *at = partial + done;
    done += nblocks;
    return norm_launch<decltype(d)::value>(l, fold, p, at, nblocks);
  }));
  norm_finish_kernel<<<1, NORM_THREADS, 0, cuda_stream()>>>(partial, done, fold, p, cuda_bytes(out),
                                                            (int)out->dtype);
  return cuda_check_launch("foreach_norm", "norm_finish_kernel");
}

// x *= the scalar, read on the device (no host synchronisation): in float for
// float32 and the 16-bit types, in double for float64, as mul_.
template <int DT>
__global__ void scale_kernel(optim_list<1> l, const char *scalar, int scalar_dtype) {
  typedef typename optim_elem<DT>::C C;
  const int ES = optim_elem<DT>::size;
  int64_t begin, end;
  const int slot = chunk_range(l, &begin, &end);
  char *x = l.ptr[0][slot];
  const C c = cuda_load<C>(scalar, scalar_dtype);
  for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x)
    cuda_store<C>(x + i * ES, DT, op_mul(cuda_load<C>(x + i * ES, DT), c));
}

template <int DT>
static lt_status scale_launch(const optim_list<1> &l, const char *s, int sdt, int nblocks) {
  scale_kernel<DT><<<nblocks, CUDA_THREADS, 0, cuda_stream()>>>(l, s, sdt);
  return cuda_check_launch("foreach_mul_", "scale_kernel");
}

static lt_status cuda_scale_many(int64_t n, lt_tensor *const *ts, const lt_tensor *scalar) {
  cuda_device_guard guard(ts[0]->storage->device);
  const char *s = cuda_bytes(scalar);
  const int sdt = (int)scalar->dtype;
  return each_single_list(n, ts, [&](auto d, const optim_list<1> &l, int nblocks) {
    return scale_launch<decltype(d)::value>(l, s, sdt, nblocks);
  });
}

extern const lt_optim_backend cuda_optim_backend = {
    /* name */ "cuda",
    /* sgd_many */ cuda_sgd_many,
    /* adam_many */ cuda_adam_many,
    /* unscale_many */ cuda_unscale_many,
    /* rmsprop_many */ cuda_rmsprop_many,
    /* adagrad_many */ cuda_adagrad_many,
    /* norm_many */ cuda_norm_many,
    /* scale_many */ cuda_scale_many,
};
