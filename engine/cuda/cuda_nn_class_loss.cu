// cross_entropy and nll_loss over logits / log-probabilities [N, C, inner]
// and int64 targets [N, inner], matching engine/cpu/cpu_nn_class_loss.c
// (the formulas are explained there): targets equal to ignore_index
// contribute nothing, other targets are index_base-based; every element's
// arithmetic and every sum is in double, as on the CPU.
//
// Forward: one group of threads per element e = (n, i) walks its C logits
// (stride inner) for the max, the log-sum-exp (written to lse) and, with
// label smoothing, the weighted sum over classes; a warp (or a block for
// very many classes) when inner == 1, one thread per element otherwise
// (neighbouring threads read neighbouring i: coalesced). For mean and sum
// each element's loss and weight go to a double workspace, summed by a
// two-stage tree (fixed chunks per block, then one block over the chunks):
// deterministic, no atomics.
//
// Backward: every gradient entry depends only on its own logit, the
// element's saved lse and target, and two scalars (the upstream scale, which
// for mean divides by the summed weight of non-ignored targets, and the sum
// of class weights for smoothing); those scalars come from a small tree
// reduction first, then one thread per entry of [N, C, inner].
#include <math.h>

#include "cuda/cuda_group_reduce.cuh"
#include "cuda/cuda_nn_kernels.h"

#define CL_THREADS 256
#define CL_WARP_MAX_CLASSES 1024 // more classes than this: a block per element
#define CL_THREAD_MAX_CLASSES 32 // fewer: one thread per element even when inner == 1
#define CL_FINAL_THREADS 1024    // the one block of a final reduction
#define CL_CHUNK 4096            // elements per block in a first reduction stage
#define CL_MAX_CHUNKS 1024
#define CL_MAX_BLOCKS (65535 * 8)

namespace {

using namespace cuda_group;

unsigned grid_for(int64_t units, int64_t per_block) {
  int64_t n = (units + per_block - 1) / per_block;
  if (n < 1) n = 1;
  if (n > CL_MAX_BLOCKS) n = CL_MAX_BLOCKS;
  return (unsigned)n;
}

// The first stage of a two-stage sum over n items: chunks of items, one block
// each, a function of n alone (so the summation order is too).
void split_chunks(int64_t n, int64_t *chunks, int64_t *chunk) {
  int64_t c = (n + CL_CHUNK - 1) / CL_CHUNK;
  if (c < 1) c = 1;
  if (c > CL_MAX_CHUNKS) c = CL_MAX_CHUNKS;
  *chunk = (n + c - 1) / c;
  if (*chunk < 1) *chunk = 1;
  *chunks = (n + *chunk - 1) / *chunk;
}

// ---- forward ----

template <typename T> struct fwd_args {
  const T *z;              // logits or log-probabilities [N, C, inner]
  const int64_t *target;   // [N, inner]
  const T *weight;         // [C] or NULL
  T *loss;                 // [N, inner] (reduction none) or NULL
  T *lse;                  // [N, inner] (cross_entropy) or NULL
  double *part_loss;       // [N inner] (mean, sum) or NULL
  double *part_weight;
  int64_t c, inner, elements, ignore_index, index_base;
  double eps;              // label smoothing
  bool log_probs;          // nll_loss: z holds log p, lse is 0
};

// One element e: logits at z[n C inner + c inner + i] for e = n inner + i.
// Branches depend on e only, so a group stays together through all().
template <typename T, class G> __device__ void class_element(const G &g, const fwd_args<T> &a,
                                                             int64_t e) {
  const T *z = a.z + (e / a.inner) * a.c * a.inner + e % a.inner;
  const int64_t st = a.inner, r0 = g.rank(), step = g.count();
  const int64_t t = a.target[e];
  const int64_t y = t == a.ignore_index ? -1 : t - a.index_base;
  double lse = 0.0;
  if (!a.log_probs) {
    double m = -INFINITY;
    for (int64_t k = r0; k < a.c; k += step) m = max_nan(m, (double)z[k * st]);
    m = g.all(m, op_max());
    double s = 0.0;
    for (int64_t k = r0; k < a.c; k += step) s += exp((double)z[k * st] - m);
    s = g.all(s, op_sum());
    lse = m + log(s);
  }
  double loss = 0.0, wy = 0.0;
  if (y >= 0) {
    wy = a.weight ? (double)a.weight[y] : 1.0;
    loss = (1.0 - a.eps) * wy * (lse - (double)z[y * st]);
    if (a.eps > 0.0) {
      double smooth = 0.0;
      for (int64_t k = r0; k < a.c; k += step)
        smooth += (a.weight ? (double)a.weight[k] : 1.0) * (lse - (double)z[k * st]);
      smooth = g.all(smooth, op_sum());
      loss += a.eps / (double)a.c * smooth;
    }
  }
  if (g.rank() == 0) {
    if (a.lse) a.lse[e] = (T)lse;
    if (a.loss) a.loss[e] = (T)loss;
    if (a.part_loss) {
      a.part_loss[e] = loss;
      a.part_weight[e] = wy; // 0 when ignored
    }
  }
}

template <typename T> __global__ void class_thread_kernel(fwd_args<T> a) {
  thread_group g;
  for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < a.elements;
       e += (int64_t)gridDim.x * blockDim.x)
    class_element<T>(g, a, e);
}

// Warp-uniform loop over elements.
template <typename T> __global__ void class_warp_kernel(fwd_args<T> a) {
  warp_group g;
  const int64_t per_block = blockDim.x >> 5;
  for (int64_t e = (int64_t)blockIdx.x * per_block + (threadIdx.x >> 5); e < a.elements;
       e += (int64_t)gridDim.x * per_block)
    class_element<T>(g, a, e);
}

template <typename T> __global__ void class_block_kernel(fwd_args<T> a) {
  __shared__ double sh[32];
  block_group g = {sh};
  for (int64_t e = blockIdx.x; e < a.elements; e += gridDim.x) class_element<T>(g, a, e);
}

// Stage one: block b sums items [b chunk, (b + 1) chunk) of l and w.
__global__ void pair_partial_kernel(const double *l, const double *w, int64_t n, int64_t chunk,
                                    double *out_l, double *out_w) {
  __shared__ double sh[32];
  block_group g = {sh};
  const int64_t i0 = (int64_t)blockIdx.x * chunk;
  const int64_t i1 = i0 + chunk < n ? i0 + chunk : n;
  double sl = 0.0, sw = 0.0;
  for (int64_t i = i0 + threadIdx.x; i < i1; i += blockDim.x) {
    sl += l[i];
    sw += w[i];
  }
  sl = g.all(sl, op_sum());
  sw = g.all(sw, op_sum());
  if (threadIdx.x == 0) {
    out_l[blockIdx.x] = sl;
    out_w[blockIdx.x] = sw;
  }
}

// Stage two (one block): the scalar loss. Mean over no element, or only
// ignored ones, is 0 / 0 = NaN, as in PyTorch and on the CPU.
template <typename T>
__global__ void loss_total_kernel(const double *l, const double *w, int64_t n, bool mean,
                                  T *out) {
  __shared__ double sh[32];
  block_group g = {sh};
  double sl = 0.0, sw = 0.0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    sl += l[i];
    sw += w[i];
  }
  sl = g.all(sl, op_sum());
  sw = g.all(sw, op_sum());
  if (threadIdx.x == 0) out[0] = (T)(mean ? sl / sw : sl);
}

template <typename T>
lt_status class_forward(const char *op, lt_tensor *loss, lt_tensor *lse, const lt_tensor *z,
                        const lt_tensor *target, const lt_tensor *weight,
                        const lt_class_loss_opts *o, bool log_probs) {
  const cudaStream_t stream = cuda_stream();
  const lt_device dev = loss->storage->device;
  const bool per_element = o->reduction == LT_REDUCTION_NONE;
  fwd_args<T> a;
  a.z = (const T *)cuda_bytes(z);
  a.target = (const int64_t *)cuda_bytes(target);
  a.weight = weight ? (const T *)cuda_bytes(weight) : NULL;
  a.loss = per_element ? (T *)cuda_bytes(loss) : NULL;
  a.lse = lse ? (T *)cuda_bytes(lse) : NULL;
  a.part_loss = a.part_weight = NULL;
  a.c = z->shape[1];
  a.inner = z->shape[2];
  a.elements = z->shape[0] * a.inner;
  a.ignore_index = o->ignore_index;
  a.index_base = o->index_base;
  a.eps = o->label_smoothing;
  a.log_probs = log_probs;

  // Workspace for mean/sum: per-element loss and weight, then the chunks.
  int64_t chunks = 0, chunk = 1;
  cuda_workspace ws;
  double *chunk_l = NULL, *chunk_w = NULL;
  if (!per_element && a.elements > 0) {
    split_chunks(a.elements, &chunks, &chunk);
    const lt_status st =
        ws.get(dev, (size_t)(2 * a.elements + 2 * chunks) * sizeof(double));
    if (st != LT_OK) return st;
    a.part_loss = (double *)ws.ptr;
    a.part_weight = a.part_loss + a.elements;
    chunk_l = a.part_weight + a.elements;
    chunk_w = chunk_l + chunks;
  }

  if (a.elements > 0) {
    const char *kernel;
    if (a.inner > 1 || a.c < CL_THREAD_MAX_CLASSES || (log_probs && a.eps == 0.0)) {
      // nll without smoothing reads one entry per element: a thread is plenty.
      kernel = "class_thread_kernel";
      class_thread_kernel<T><<<grid_for(a.elements, CL_THREADS), CL_THREADS, 0, stream>>>(a);
    } else if (a.c <= CL_WARP_MAX_CLASSES) {
      kernel = "class_warp_kernel";
      class_warp_kernel<T><<<grid_for(a.elements, CL_THREADS / 32), CL_THREADS, 0, stream>>>(a);
    } else {
      kernel = "class_block_kernel";
      class_block_kernel<T><<<grid_for(a.elements, 1), CL_THREADS, 0, stream>>>(a);
    }
    const lt_status st = cuda_check_launch(op, kernel);
    if (st != LT_OK) return st;
  }
  if (per_element) return LT_OK;

  // No element at all: the final kernel sums nothing (0, or NaN for mean).
  if (chunks > 0) {
    pair_partial_kernel<<<(unsigned)chunks, CL_THREADS, 0, stream>>>(
        a.part_loss, a.part_weight, a.elements, chunk, chunk_l, chunk_w);
    const lt_status st = cuda_check_launch(op, "pair_partial_kernel");
    if (st != LT_OK) return st;
  }
  loss_total_kernel<T><<<1, CL_FINAL_THREADS, 0, stream>>>(
      chunk_l, chunk_w, chunks, o->reduction == LT_REDUCTION_MEAN, (T *)cuda_bytes(loss));
  return cuda_check_launch(op, "loss_total_kernel");
}

// ---- backward ----

// Stage one of the mean's denominator: block b sums w[y] over the
// non-ignored targets of its chunk.
template <typename T>
__global__ void target_weight_partial_kernel(const int64_t *target, const T *weight, int64_t n,
                                             int64_t chunk, int64_t ignore_index,
                                             int64_t index_base, double *out) {
  __shared__ double sh[32];
  block_group g = {sh};
  const int64_t i0 = (int64_t)blockIdx.x * chunk;
  const int64_t i1 = i0 + chunk < n ? i0 + chunk : n;
  double s = 0.0;
  for (int64_t i = i0 + threadIdx.x; i < i1; i += blockDim.x) {
    const int64_t t = target[i];
    if (t != ignore_index) s += weight ? (double)weight[t - index_base] : 1.0;
  }
  s = g.all(s, op_sum());
  if (threadIdx.x == 0) out[blockIdx.x] = s;
}

// One block: scalars[0] = d total / d element loss (upstream gradient,
// divided by the summed weight for mean; unused for none), scalars[1] =
// the sum of the class weights (C without weights; smoothing only).
template <typename T>
__global__ void backward_scalars_kernel(const double *chunk_w, int64_t chunks, const T *weight,
                                        int64_t c, bool need_wsum, const T *gl, int reduction,
                                        double *scalars) {
  __shared__ double sh[32];
  block_group g = {sh};
  double tw = 0.0;
  for (int64_t i = threadIdx.x; i < chunks; i += blockDim.x) tw += chunk_w[i];
  tw = g.all(tw, op_sum());
  double ws = 0.0;
  if (need_wsum)
    for (int64_t k = threadIdx.x; k < c; k += blockDim.x) ws += weight ? (double)weight[k] : 1.0;
  ws = g.all(ws, op_sum());
  if (threadIdx.x == 0) {
    double scale = 0.0;
    if (reduction == LT_REDUCTION_MEAN)
      scale = (double)gl[0] / tw; // all ignored: 0 / 0, never used (every entry is 0)
    else if (reduction == LT_REDUCTION_SUM)
      scale = (double)gl[0];
    scalars[0] = scale;
    scalars[1] = ws;
  }
}

template <typename T> struct bwd_args {
  T *gz;                 // [N, C, inner]
  const T *z, *lse;      // cross_entropy only
  const T *gl;           // [N, inner] for none, else 0-dim (read through scalars)
  const int64_t *target;
  const T *weight;
  const double *scalars; // backward_scalars_kernel's, or NULL when not needed
  int64_t c, inner, total, ignore_index, index_base;
  double eps;
  bool per_element;
};

// One thread per entry (n, k, i) of [N, C, inner]; element e = n inner + i.
template <typename T, bool LOG_PROBS> __global__ void class_backward_kernel(bwd_args<T> a) {
  for (int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; idx < a.total;
       idx += (int64_t)gridDim.x * blockDim.x) {
    const int64_t i = idx % a.inner, nk = idx / a.inner;
    const int64_t k = nk % a.c, e = (nk / a.c) * a.inner + i;
    const int64_t t = a.target[e];
    if (t == a.ignore_index) {
      a.gz[idx] = (T)0;
      continue;
    }
    const int64_t y = t - a.index_base;
    const double s = a.per_element ? (double)a.gl[e] : a.scalars[0];
    const double wy = a.weight ? (double)a.weight[y] : 1.0;
    if (LOG_PROBS) {
      // nll: only the target's log-probability has a gradient.
      a.gz[idx] = k == y ? (T)(-wy * s) : (T)0;
      continue;
    }
    const double p = exp((double)a.z[idx] - (double)a.lse[e]);
    double gv = (1.0 - a.eps) * wy * (p - (k == y ? 1.0 : 0.0));
    if (a.eps > 0.0)
      gv += a.eps / (double)a.c * (p * a.scalars[1] - (a.weight ? (double)a.weight[k] : 1.0));
    a.gz[idx] = (T)(s * gv);
  }
}

template <typename T>
lt_status class_backward(const char *op, lt_tensor *gz, const lt_tensor *gl, const lt_tensor *z,
                         const lt_tensor *target, const lt_tensor *weight, const lt_tensor *lse,
                         const lt_class_loss_opts *o, bool log_probs) {
  const cudaStream_t stream = cuda_stream();
  const lt_device dev = gz->storage->device;
  bwd_args<T> a;
  a.gz = (T *)cuda_bytes(gz);
  a.z = log_probs ? NULL : (const T *)cuda_bytes(z);
  a.lse = log_probs ? NULL : (const T *)cuda_bytes(lse);
  a.gl = (const T *)cuda_bytes(gl);
  a.target = (const int64_t *)cuda_bytes(target);
  a.weight = weight ? (const T *)cuda_bytes(weight) : NULL;
  a.scalars = NULL;
  a.c = gz->shape[1];
  a.inner = gz->shape[2];
  a.total = gz->shape[0] * a.c * a.inner;
  a.ignore_index = o->ignore_index;
  a.index_base = o->index_base;
  a.eps = o->label_smoothing;
  a.per_element = o->reduction == LT_REDUCTION_NONE;
  if (a.total == 0) return LT_OK; // no entry to write (no element or no class)

  const int64_t elements = gz->shape[0] * a.inner;
  const bool mean = o->reduction == LT_REDUCTION_MEAN;
  const bool need_wsum = !log_probs && a.eps > 0.0; // as the CPU: nll ignores smoothing
  cuda_workspace ws;
  if (!a.per_element || need_wsum) {
    int64_t chunks = 0, chunk = 1;
    if (mean) split_chunks(elements, &chunks, &chunk);
    const lt_status st = ws.get(dev, (size_t)(2 + chunks) * sizeof(double));
    if (st != LT_OK) return st;
    double *scalars = (double *)ws.ptr, *chunk_w = scalars + 2;
    if (chunks > 0) {
      target_weight_partial_kernel<T><<<(unsigned)chunks, CL_THREADS, 0, stream>>>(
          a.target, a.weight, elements, chunk, a.ignore_index, a.index_base, chunk_w);
      const lt_status s2 = cuda_check_launch(op, "target_weight_partial_kernel");
      if (s2 != LT_OK) return s2;
    }
    backward_scalars_kernel<T><<<1, CL_FINAL_THREADS, 0, stream>>>(
        chunk_w, chunks, a.weight, a.c, need_wsum, a.gl, (int)o->reduction, scalars);
    const lt_status s3 = cuda_check_launch(op, "backward_scalars_kernel");
    if (s3 != LT_OK) return s3;
    a.scalars = scalars;
  }
  const unsigned blocks = grid_for(a.total, CL_THREADS);
  if (log_probs)
    class_backward_kernel<T, true><<<blocks, CL_THREADS, 0, stream>>>(a);
  else
    class_backward_kernel<T, false><<<blocks, CL_THREADS, 0, stream>>>(a);
  return cuda_check_launch(op, "class_backward_kernel");
}

} // namespace

lt_status cuda_nn_cross_entropy(lt_tensor *loss, lt_tensor *lse, const lt_tensor *logits,
                                const lt_tensor *target, const lt_tensor *weight,
                                const lt_class_loss_opts *o) {
  cuda_device_guard guard(loss->storage->device);
  if (logits->dtype == LT_FLOAT64)
    return class_forward<double>("cross_entropy", loss, lse, logits, target, weight, o, false);
  return class_forward<float>("cross_entropy", loss, lse, logits, target, weight, o, false);
}

lt_status cuda_nn_nll_loss(lt_tensor *loss, const lt_tensor *lp, const lt_tensor *target,
                           const lt_tensor *weight, const lt_class_loss_opts *o) {
  cuda_device_guard guard(loss->storage->device);
  if (lp->dtype == LT_FLOAT64)
    return class_forward<double>("nll_loss", loss, NULL, lp, target, weight, o, true);
  return class_forward<float>("nll_loss", loss, NULL, lp, target, weight, o, true);
}

lt_status cuda_nn_cross_entropy_backward(lt_tensor *glogits, const lt_tensor *gl,
                                         const lt_tensor *logits, const lt_tensor *target,
                                         const lt_tensor *weight, const lt_tensor *lse,
                                         const lt_class_loss_opts *o) {
  cuda_device_guard guard(glogits->storage->device);
  if (glogits->dtype == LT_FLOAT64)
    return class_backward<double>("cross_entropy_backward", glogits, gl, logits, target, weight,
                                  lse, o, false);
  return class_backward<float>("cross_entropy_backward", glogits, gl, logits, target, weight, lse,
                               o, false);
}

lt_status cuda_nn_nll_loss_backward(lt_tensor *glp, const lt_tensor *gl, const lt_tensor *target,
                                    const lt_tensor *weight, const lt_class_loss_opts *o) {
  cuda_device_guard guard(glp->storage->device);
  if (glp->dtype == LT_FLOAT64)
    return class_backward<double>("nll_loss_backward", glp, gl, NULL, target, weight, NULL, o,
                                  true);
  return class_backward<float>("nll_loss_backward", glp, gl, NULL, target, weight, NULL, o, true);
}
