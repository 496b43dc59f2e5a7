// Host side of the strided geometry (cuda_internal.h): the same dim dropping
// and merging as the CPU's iterator, so that contiguous and broadcast
// operands cost the kernels as little index arithmetic as possible.
#include "cuda/cuda_internal.h"

void cuda_geom_init(cuda_geom *g, const lt_tensor *const *ops, int nops) {
  const lt_tensor *out = ops[0];
  g->nops = nops;
  g->numel = lt_numel(out);
  for (int k = 0; k < CUDA_MAX_OPS; k++) {
    g->data[k] = k < nops && ops[k] ? (char *)cuda_bytes(ops[k]) : NULL;
    g->dtype[k] = k < nops && ops[k] ? (int)ops[k]->dtype : 0;
  }
  if (g->numel == 0) { // nothing to visit; a view with no element may have sizes and
                       // strides whose products pass INT64_MAX (as the CPU's cpu_iter_init)
    g->ndim = 1;
    g->shape[0] = 0;
    for (int k = 0; k < nops; k++) g->stride[k][0] = 0;
    return;
  }

  // Size-1 dims never move a pointer; broadcast dims get stride 0.
  int nd = 0;
  for (int d = 0; d < out->ndim; d++) {
    if (out->shape[d] == 1) continue;
    g->shape[nd] = out->shape[d];
    for (int k = 0; k < nops; k++) {
      const lt_tensor *t = ops[k];
      int64_t s = 0;
      const int td = t ? d - (out->ndim - t->ndim) : -1; // right-aligned broadcast
      if (t && td >= 0 && t->shape[td] != 1) s = t->stride[td] * (int64_t)lt_dtype_size(t->dtype);
      g->stride[k][nd] = s;
    }
    nd++;
  }
  if (nd == 0) {
    g->shape[0] = 1;
    for (int k = 0; k < nops; k++) g->stride[k][0] = 0;
    nd = 1;
  }

  // Merge dim d into the previous one when every operand steps over it
  // exactly once per step of the outer dim.
  int m = 0;
  for (int d = 1; d < nd; d++) {
    bool mergeable = true;
    for (int k = 0; k < nops; k++)
      if (g->stride[k][m] != g->stride[k][d] * g->shape[d]) mergeable = false;
    if (mergeable) {
      g->shape[m] *= g->shape[d];
      for (int k = 0; k < nops; k++) g->stride[k][m] = g->stride[k][d];
    } else {
      m++;
      g->shape[m] = g->shape[d];
      for (int k = 0; k < nops; k++) g->stride[k][m] = g->stride[k][d];
    }
  }
  g->ndim = m + 1;
}
