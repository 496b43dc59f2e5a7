/* The calculator behind backward formulas (see grad_calc.h). */
#include <stdlib.h>
#include <string.h>

#include "autograd/grad_calc.h"

void ag_calc_init(ag_calc *c) {
  c->st = LT_OK;
  c->n = 0;
}

lt_status ag_calc_end(ag_calc *c) {
  for (int i = 0; i < c->n; i++) lt_tensor_release(c->held[i]);
  c->n = 0;
  return c->st;
}

/* Keeps the result of a step (or records its failure). */
static lt_tensor *hold(ag_calc *c, lt_status st, lt_tensor *t) {
  if (st != LT_OK) {
    c->st = st;
    return NULL;
  }
  if (c->n == AG_CALC_MAX) {
    lt_tensor_release(t);
    c->st = lt_error(LT_ERR_INTERNAL, "backward: a formula holds more than %d temporaries",
                     AG_CALC_MAX);
    return NULL;
  }
  c->held[c->n++] = t;
  return t;
}

#define STEP(call)                   \
  do {                               \
    if (c->st != LT_OK) return NULL; \
    lt_tensor *r_ = NULL;            \
    lt_status st_ = (call);          \
    return hold(c, st_, r_);         \
  } while (0)

lt_tensor *ag_keep(ag_calc *c, lt_status st, lt_tensor *t) {
  if (c->st != LT_OK) {
    if (t) lt_tensor_release(t);
    return NULL;
  }
  return hold(c, st, t);
}

lt_tensor *ag_out(ag_calc *c, const lt_tensor *t) {
  if (c->st != LT_OK || !t) return NULL;
  lt_tensor_retain((lt_tensor *)t);
  return (lt_tensor *)t;
}

lt_tensor *ag_bin(ag_calc *c, lt_binary_op op, const lt_tensor *a, const lt_tensor *b) {
  STEP(lt_binary(op, a, b, &r_));
}

lt_tensor *ag_bin_s(ag_calc *c, lt_binary_op op, const lt_tensor *a, double s) {
  STEP(lt_binary_scalar(op, a, s, false, false, &r_));
}

lt_tensor *ag_s_bin(ag_calc *c, lt_binary_op op, double s, const lt_tensor *a) {
  STEP(lt_binary_scalar(op, a, s, false, true, &r_));
}

lt_tensor *ag_un(ag_calc *c, lt_unary_op op, const lt_tensor *a) { STEP(lt_unary(op, a, &r_)); }

lt_tensor *ag_cast(ag_calc *c, const lt_tensor *a, lt_dtype dt) {
  STEP(lt_to_dtype(a, dt, false, &r_));
}

lt_tensor *ag_where(ag_calc *c, const lt_tensor *cond, const lt_tensor *a, const lt_tensor *b) {
  STEP(lt_where(cond, a, b, &r_));
}

lt_tensor *ag_keep_where(ag_calc *c, const lt_tensor *cond, const lt_tensor *a) {
  if (c->st != LT_OK) return NULL;
  lt_tensor *zero = ag_scalar(c, 0.0, a->dtype, a->storage->device);
  return ag_where(c, cond, a, zero);
}

lt_tensor *ag_zero_where(ag_calc *c, const lt_tensor *cond, const lt_tensor *a) {
  if (c->st != LT_OK) return NULL;
  lt_tensor *zero = ag_scalar(c, 0.0, a->dtype, a->storage->device);
  return ag_where(c, cond, zero, a);
}

lt_tensor *ag_sum(ag_calc *c, const lt_tensor *a, const int *dims, int ndims, bool keepdim) {
  STEP(lt_sum(a, dims, ndims, keepdim, &r_));
}

lt_tensor *ag_prod(ag_calc *c, const lt_tensor *a, const int *dims, int ndims, bool keepdim) {
  STEP(lt_prod(a, dims, ndims, keepdim, &r_));
}

lt_tensor *ag_matmul(ag_calc *c, const lt_tensor *a, const lt_tensor *b) {
  STEP(lt_matmul(a, b, &r_));
}

lt_tensor *ag_reshape(ag_calc *c, const lt_tensor *a, const int64_t *shape, int ndim) {
  STEP(lt_reshape(a, shape, ndim, &r_));
}

lt_tensor *ag_expand(ag_calc *c, const lt_tensor *a, const int64_t *shape, int ndim) {
  STEP(lt_expand(a, shape, ndim, &r_));
}

lt_tensor *ag_transpose(ag_calc *c, const lt_tensor *a, int d0, int d1) {
  STEP(lt_transpose(a, d0, d1, &r_));
}

lt_tensor *ag_permute(ag_calc *c, const lt_tensor *a, const int *dims, int ndim) {
  STEP(lt_permute(a, dims, ndim, &r_));
}

lt_tensor *ag_unsqueeze(ag_calc *c, const lt_tensor *a, int dim) {
  STEP(lt_unsqueeze(a, dim, &r_));
}

lt_tensor *ag_squeeze(ag_calc *c, const lt_tensor *a, int dim) { STEP(lt_squeeze(a, dim, &r_)); }

lt_tensor *ag_narrow(ag_calc *c, const lt_tensor *a, int dim, int64_t start, int64_t length) {
  STEP(lt_narrow(a, dim, start, length, &r_));
}

lt_tensor *ag_select(ag_calc *c, const lt_tensor *a, int dim, int64_t index) {
  STEP(lt_select(a, dim, index, &r_));
}

lt_tensor *ag_scalar(ag_calc *c, double v, lt_dtype dt, lt_device dev) {
  STEP(lt_full(NULL, 0, v, dt, dev, &r_));
}

lt_tensor *ag_zeros(ag_calc *c, const int64_t *shape, int ndim, lt_dtype dt, lt_device dev) {
  STEP(lt_zeros(shape, ndim, dt, dev, &r_));
}

lt_tensor *ag_zeros_expanded(ag_calc *c, const int64_t *shape, int ndim, lt_dtype dt,
                             lt_device dev) {
  lt_tensor *zero = ag_scalar(c, 0.0, dt, dev);
  if (!zero) return NULL;
  return ag_expand(c, zero, shape, ndim);
}

lt_tensor *ag_arange_along(ag_calc *c, int64_t n, int64_t base, int dim, int ndim,
                           lt_device dev) {
  if (c->st != LT_OK) return NULL;
  int64_t *values = malloc((size_t)(n > 0 ? n : 1) * sizeof *values);
  if (!values) {
    c->st = lt_error(LT_ERR_OOM, "backward: out of host memory for %lld indices", (long long)n);
    return NULL;
  }
  for (int64_t i = 0; i < n; i++) values[i] = base + i;
  int64_t shape[LT_MAX_DIMS];
  for (int d = 0; d < ndim; d++) shape[d] = d == dim ? n : 1;
  lt_tensor *r = NULL;
  lt_status st = lt_from_buffer(values, LT_INT64, shape, ndim, LT_INT64, dev, &r);
  free(values);
  return hold(c, st, r);
}

void ag_copy_into(ag_calc *c, lt_tensor *dst, const lt_tensor *src) {
  if (c->st != LT_OK) return;
  c->st = lt_copy_(dst, src);
}

lt_tensor *ag_unreduce(ag_calc *c, const lt_tensor *g, const bool *reduced, int ndim,
                       bool keepdim) {
  if (c->st != LT_OK) return NULL;
  if (keepdim) return (lt_tensor *)g;
  int64_t shape[LT_MAX_DIMS];
  for (int d = 0, k = 0; d < ndim; d++) shape[d] = reduced[d] ? 1 : g->shape[k++];
  return ag_reshape(c, g, shape, ndim);
}

lt_status ag_sum_to(const char *who, const lt_tensor *g, const int64_t *shape, int ndim,
                    lt_tensor **out) {
  int lead = g->ndim - ndim;
  bool fits = lead >= 0;
  int dims[LT_MAX_DIMS], nd = 0;
  for (int d = 0; fits && d < g->ndim; d++) {
    if (d < lead) {
      dims[nd++] = d;
    } else if (shape[d - lead] != g->shape[d]) {
      if (shape[d - lead] == 1)
        dims[nd++] = d;
      else
        fits = false;
    }
  }
  if (!fits) {
    char gs[128], is[128];
    return lt_error(LT_ERR_SHAPE, "backward: %s gave a gradient of shape %s for an input of shape %s",
                    who, lt_format_shape(gs, sizeof gs, g->shape, g->ndim),
                    lt_format_shape(is, sizeof is, shape, ndim));
  }
  if (nd == 0) {
    lt_tensor_retain((lt_tensor *)g);
    *out = (lt_tensor *)g;
    return LT_OK;
  }
  lt_tensor *s;
  LT_TRY(lt_sum(g, dims, nd, true, &s));
  lt_status st = lt_reshape(s, shape, ndim, out);
  lt_tensor_release(s);
  return st;
}
