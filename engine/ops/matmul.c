/* torch.matmul: dot, matrix-vector, matrix-matrix and batched products with
 * broadcast batch dims. 1-D operands gain a dim for the product (a row for
 * the left, a column for the right) that the result then drops. */
#include <string.h>

#include "ops/autocast_internal.h"
#include "ops/ops_internal.h"

/* Float matrices BLAS can read directly: row- or column-major in the last
 * two dims (any spacing of rows or columns). */
static bool blas_readable(const lt_tensor *t) {
  const int nd = t->ndim;
  const int64_t rows = t->shape[nd - 2], cols = t->shape[nd - 1];
  const int64_t rs = t->stride[nd - 2], cs = t->stride[nd - 1];
  const bool row_major = (cs == 1 || cols == 1) && (rows == 1 || rs >= (cols > 1 ? cols : 1));
  const bool col_major = (rs == 1 || rows == 1) && (cols == 1 || cs >= (rows > 1 ? rows : 1));
  return row_major || col_major;
}

static lt_status check_operands(const lt_tensor *a, const lt_tensor *b) {
  LT_TRY(ops_check_live("matmul", a));
  LT_TRY(ops_check_live("matmul", b));
  LT_TRY(ops_check_same_device("matmul", a, b));
  if (a->ndim == 0 || b->ndim == 0)
    return lt_error(LT_ERR_SHAPE,
                    "matmul: both arguments need at least 1 dimension, but got %d and %d dims",
                    a->ndim, b->ndim);
  if (a->dtype != b->dtype)
    return lt_error(LT_ERR_DTYPE,
                    "matmul: expected both operands to have the same dtype, but got %s and %s",
                    lt_dtype_name(a->dtype), lt_dtype_name(b->dtype));
  if (a->dtype == LT_BOOL) return lt_error(LT_ERR_DTYPE, "matmul: not implemented for bool tensors");
  const int64_t ka = a->shape[a->ndim - 1];
  const int64_t kb = b->ndim == 1 ? b->shape[0] : b->shape[b->ndim - 2];
  if (ka != kb) {
    char sa[OPS_SHAPE_BUF], sb[OPS_SHAPE_BUF];
    return lt_error(LT_ERR_SHAPE, "matmul: shapes %s and %s cannot be multiplied (%lld != %lld)",
                    ops_shape_str(sa, a->shape, a->ndim), ops_shape_str(sb, b->shape, b->ndim),
                    (long long)ka, (long long)kb);
  }
  return LT_OK;
}

/* Views of a and b with matrix dims (1-D operands made [1, k] / [k, 1]) and
 * the broadcast batch dims, and the shapes of the product before and after
 * dropping the dims the 1-D operands gained. */
static lt_status product_geometry(const lt_tensor *a, const lt_tensor *b, lt_tensor *av,
                                  lt_tensor *bv, int64_t *full, int *nfull, int64_t *shape,
                                  int *ndim) {
  *av = *a;
  *bv = *b;
  if (a->ndim == 1) { /* [k] -> [1, k] */
    av->shape[1] = a->shape[0], av->stride[1] = a->stride[0];
    av->shape[0] = 1, av->stride[0] = a->shape[0];
    av->ndim = 2;
  }
  if (b->ndim == 1) { /* [k] -> [k, 1] */
    bv->shape[1] = 1, bv->stride[1] = 1;
    bv->ndim = 2;
  }
  int64_t batch[LT_MAX_DIMS];
  int nbatch = 0;
  LT_TRY(lt_broadcast_shapes("matmul", av->shape, av->ndim - 2, bv->shape, bv->ndim - 2, batch,
                             &nbatch));
  if (nbatch + 2 > LT_MAX_DIMS)
    return lt_error(LT_ERR_SHAPE, "matmul: the product would have more than %d dims", LT_MAX_DIMS);
  memcpy(full, batch, (size_t)nbatch * sizeof *full);
  full[nbatch] = av->shape[av->ndim - 2];
  full[nbatch + 1] = bv->shape[bv->ndim - 1];
  *nfull = nbatch + 2;
  int64_t numel; /* [n, 0] @ [0, m] holds nothing, but [n, m] may be past int64 */
  LT_TRY(lt_check_shape("matmul", full, *nfull, av->dtype, &numel));
  int64_t ashape[LT_MAX_DIMS], bshape[LT_MAX_DIMS];
  memcpy(ashape, batch, (size_t)nbatch * sizeof *ashape);
  memcpy(bshape, batch, (size_t)nbatch * sizeof *bshape);
  ashape[nbatch] = av->shape[av->ndim - 2], ashape[nbatch + 1] = av->shape[av->ndim - 1];
  bshape[nbatch] = bv->shape[bv->ndim - 2], bshape[nbatch + 1] = bv->shape[bv->ndim - 1];
  ops_view_expand(av, ashape, nbatch + 2);
  ops_view_expand(bv, bshape, nbatch + 2);
  *ndim = 0;
  for (int d = 0; d < nbatch; d++) shape[(*ndim)++] = batch[d];
  if (a->ndim > 1) shape[(*ndim)++] = full[nbatch];
  if (b->ndim > 1) shape[(*ndim)++] = full[nbatch + 1];
  return LT_OK;
}

/* float16/bfloat16: multiply in float32 (accumulating in float32, as
 * PyTorch's CPU kernels do) and round each result once. The float32 copies
 * are made without history and freed here: the graph records the product of
 * the 16-bit operands, so backward keeps those (half the bytes), not the
 * copies. */
static lt_status matmul_via_float32(const lt_tensor *a, const lt_tensor *b, lt_tensor **out) {
  lt_tensor *a32 = NULL, *b32 = NULL, *r32 = NULL, *r = NULL;
  const bool grad = lt_set_grad_enabled(false);
  lt_status st = lt_to_dtype(a, LT_FLOAT32, false, &a32);
  if (st == LT_OK) st = lt_to_dtype(b, LT_FLOAT32, false, &b32);
  if (a32 && b32) st = lt_matmul(a32, b32, &r32);
  if (a32) lt_tensor_release(a32);
  if (b32) lt_tensor_release(b32);
  if (r32) st = lt_to_dtype(r32, a->dtype, false, &r);
  if (r32) lt_tensor_release(r32);
  lt_set_grad_enabled(grad);
  if (st == LT_OK) st = ag_record_matmul(a, b, r);
  if (st != LT_OK) {
    if (r) lt_tensor_release(r);
    return st;
  }
  *out = r;
  return LT_OK;
}

lt_status lt_matmul(const lt_tensor *a, const lt_tensor *b, lt_tensor **out) {
  AC_ENTRY(AC_OP_MATMUL, a, 2, AC_LIST(a, b), lt_matmul(ac.t[0], ac.t[1], out));
  LT_TRY(check_operands(a, b));
  if (a->dtype == LT_FLOAT16 || a->dtype == LT_BFLOAT16) return matmul_via_float32(a, b, out);
  const lt_backend *be;
  LT_TRY(ops_backend("matmul", a->storage->device, &be));

  /* Float matrices BLAS cannot read are copied once into contiguous ones. */
  const bool blas = a->dtype == LT_FLOAT32 || a->dtype == LT_FLOAT64;
  lt_tensor *ac = NULL, *bc = NULL;
  lt_status st = LT_OK;
  if (blas && a->ndim >= 2 && !blas_readable(a)) st = lt_contiguous(a, &ac);
  if (st == LT_OK && blas && b->ndim >= 2 && !blas_readable(b)) st = lt_contiguous(b, &bc);
  if (st == LT_OK && blas && a->ndim == 1 && a->stride[0] == 0 && a->shape[0] > 1)
    st = lt_contiguous(a, &ac);
  if (st == LT_OK && blas && b->ndim == 1 && b->stride[0] == 0 && b->shape[0] > 1)
    st = lt_contiguous(b, &bc);

  lt_tensor av, bv, *r = NULL;
  int64_t full[LT_MAX_DIMS], shape[LT_MAX_DIMS];
  int nfull = 0, ndim = 0;
  if (st == LT_OK)
    st = product_geometry(ac ? ac : a, bc ? bc : b, &av, &bv, full, &nfull, shape, &ndim);
  if (st == LT_OK) st = lt_empty_named("matmul", shape, ndim, a->dtype, a->storage->device, &r);
  if (st == LT_OK) {
    lt_tensor rv = *r; /* the product with the dims 1-D operands gained */
    rv.ndim = nfull;
    int64_t s = 1;
    for (int d = nfull - 1; d >= 0; d--) {
      rv.shape[d] = full[d];
      rv.stride[d] = s;
      s *= full[d] > 0 ? full[d] : 1;
    }
    st = be->matmul(&rv, &av, &bv);
  }
  if (ac) lt_tensor_release(ac);
  if (bc) lt_tensor_release(bc);
  if (st == LT_OK) st = ag_record_matmul(a, b, r);
  if (st != LT_OK) {
    if (r) lt_tensor_release(r);
    return st;
  }
  *out = r;
  return LT_OK;
}
