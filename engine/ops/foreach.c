/* The foreach ops of lt/optim.h: clip_grad_norm_'s total norm over a list of
 * tensors and its in-place scale of every tensor by a 0-dim tensor, one engine
 * call per device where the Lua loop made a few small ops per tensor. The
 * checks are here; the kernels are entries of the optimizer tables
 * (core/optim_backend.h), which already walk tensor lists in few launches. */
#include <math.h>
#include <stdlib.h>

#include "core/optim_backend.h"
#include "lt/optim.h"
#include "ops/ops_internal.h"

#define NORM "foreach_norm"
#define MUL "foreach_mul_"

static bool is_floating(lt_dtype dt) {
  return dt == LT_FLOAT32 || dt == LT_FLOAT64 || dt == LT_FLOAT16 || dt == LT_BFLOAT16;
}

/* Tensor i (0-based, named 1-based as Lua lists are) is live, floating and on
 * ts[0]'s device. */
static lt_status check_member(const char *op, lt_tensor *const *ts, int64_t i) {
  LT_TRY(ops_check_live(op, ts[i]));
  if (!is_floating(ts[i]->dtype))
    return lt_error(LT_ERR_DTYPE, "%s: tensor %lld must be floating point, got %s", op,
                    (long long)(i + 1), lt_dtype_name(ts[i]->dtype));
  if (!lt_device_eq(ts[i]->storage->device, ts[0]->storage->device)) {
    char a[16], b[16];
    return lt_error(LT_ERR_DEVICE,
                    "%s: tensor %lld is on %s but tensor 1 is on %s (one call per device)", op,
                    (long long)(i + 1), lt_device_name(ts[i]->storage->device, a),
                    lt_device_name(ts[0]->storage->device, b));
  }
  return LT_OK;
}

static lt_status check_list(const char *op, int64_t n, lt_tensor *const *ts) {
  if (n < 1 || !ts) return lt_error(LT_ERR_ARG, "%s: expected at least one tensor, got none", op);
  for (int64_t i = 0; i < n; i++) LT_TRY(check_member(op, ts, i));
  return LT_OK;
}

static lt_status kernels(const char *op, lt_device dev, const lt_optim_backend **out) {
  *out = lt_optim_backend_for(dev);
  if (*out) return LT_OK;
  char dn[16];
  return lt_error(LT_ERR_DEVICE, "%s: no kernels for device %s", op, lt_device_name(dev, dn));
}

/* Contiguous forms of ts (the same tensors, retained, where they already are):
 * the kernels see contiguous tensors only. On an error nothing is kept. */
static lt_status contiguous_list(int64_t n, lt_tensor *const *ts, lt_tensor ***out) {
  lt_tensor **c = malloc((size_t)n * sizeof *c);
  if (!c) return lt_error(LT_ERR_OOM, "foreach: out of host memory for a list of %lld tensors",
                          (long long)n);
  for (int64_t i = 0; i < n; i++) {
    lt_status st = lt_contiguous(ts[i], &c[i]);
    if (st != LT_OK) {
      while (i-- > 0) lt_tensor_release(c[i]);
      free(c);
      return st;
    }
  }
  *out = c;
  return LT_OK;
}

static void release_list(int64_t n, lt_tensor **c) {
  for (int64_t i = 0; i < n; i++) lt_tensor_release(c[i]);
  free(c);
}

lt_status lt_foreach_norm(int64_t n, lt_tensor *const *ts, double p, lt_tensor **out) {
  *out = NULL;
  if (!(p > 0.0))
    return lt_error(LT_ERR_ARG, NORM ": the norm's order must be positive or inf, got %g", p);
  LT_TRY(check_list(NORM, n, ts));
  const lt_device dev = ts[0]->storage->device;
  const lt_optim_backend *be;
  LT_TRY(kernels(NORM, dev, &be));
  lt_tensor **c, *r = NULL;
  LT_TRY(contiguous_list(n, ts, &c));
  lt_status st = lt_empty_named(NORM, NULL, 0, ts[0]->dtype, dev, &r);
  if (st == LT_OK) st = be->norm_many(n, c, p, r);
  release_list(n, c);
  if (st != LT_OK) {
    if (r) lt_tensor_release(r);
    return st;
  }
  *out = r;
  return LT_OK;
}

/* The scalar: live, one floating element, on the tensors' device, and apart
 * from every tensor (a CUDA block reads it while others write). */
static lt_status check_scalar(int64_t n, lt_tensor *const *ts, const lt_tensor *scalar) {
  LT_TRY(ops_check_live(MUL, scalar));
  if (!is_floating(scalar->dtype) || lt_numel(scalar) != 1)
    return lt_error(LT_ERR_ARG, MUL ": the scalar must be one floating-point element, got %lld of %s",
                    (long long)lt_numel(scalar), lt_dtype_name(scalar->dtype));
  LT_TRY(ops_check_same_device(MUL, ts[0], scalar));
  for (int64_t i = 0; i < n; i++)
    if (ops_overlap_of(ts[i], scalar) != OPS_OVERLAP_NONE)
      return lt_error(LT_ERR_ARG, MUL ": the scalar shares memory with tensor %lld", (long long)(i + 1));
  return LT_OK;
}

lt_status lt_foreach_mul_(int64_t n, lt_tensor *const *ts, const lt_tensor *scalar) {
  LT_TRY(check_list(MUL, n, ts));
  for (int64_t i = 0; i < n; i++) LT_TRY(ops_check_writable(MUL, ts[i]));
  LT_TRY(check_scalar(n, ts, scalar));
  const lt_optim_backend *be;
  LT_TRY(kernels(MUL, ts[0]->storage->device, &be));
  /* A strided tensor is scaled in a contiguous copy that is copied back. The
   * copies are all made before the first write, so a failed allocation
   * leaves every tensor as it was. */
  lt_tensor **c;
  LT_TRY(contiguous_list(n, ts, &c));
  lt_status st = be->scale_many(n, c, scalar);
  for (int64_t i = 0; i < n && st == LT_OK; i++)
    if (c[i] != ts[i]) st = lt_copy_(ts[i], c[i]);
  release_list(n, c);
  if (st != LT_OK) return st;
  for (int64_t i = 0; i < n; i++) ops_bump_version(ts[i], MUL);
  return LT_OK;
}
