/* constant_pad_nd: F.pad's "constant" mode, and the zero border of
 * Conv2d's padding="same" when the kernel's extent is even.
 *
 * One output allocation: the border slabs are filled and the (possibly
 * cropped) input is copied into the middle, both through the backend's
 * fill and copy kernels on strided views, so every device that has those
 * kernels pads without a kernel of its own. */
#include <stdio.h>
#include <string.h>

#include "autograd/record.h"
#include "ops/ops_internal.h"

/* Far beyond any tensor that fits in memory, and small enough that size +
 * before + after cannot overflow int64. */
#define PAD_LIMIT ((int64_t)1 << 48)

#define FILL_PREFIX "fill_: "

/* Fills view with value through lt_fill_, which refuses a value the dtype
 * cannot hold (300 into uint8); its message is given under pad's name. */
static lt_status fill_border(lt_tensor *view, double value) {
  if (lt_numel(view) == 0) return LT_OK;
  lt_status st = lt_fill_(view, value);
  if (st == LT_OK) return LT_OK;
  char msg[512];
  const char *m = lt_last_error();
  if (strncmp(m, FILL_PREFIX, strlen(FILL_PREFIX)) == 0) m += strlen(FILL_PREFIX);
  snprintf(msg, sizeof msg, "%s", m); /* lt_error below rewrites the buffer m points into */
  return lt_error(st, "pad: %s", msg);
}

lt_status lt_constant_pad_nd(const lt_tensor *x, const int64_t *pad, int npad, double value,
                             lt_tensor **out) {
  LT_TRY(ops_check_live("pad", x));
  if (npad < 0 || npad % 2 != 0)
    return lt_error(LT_ERR_ARG,
                    "pad: the padding list must have an even length (a (before, after) pair per "
                    "dimension), got %d values",
                    npad);
  if (npad / 2 > x->ndim)
    return lt_error(LT_ERR_ARG,
                    "pad: the padding list has %d values, more than 2 per dimension of a "
                    "%d-dimensional tensor",
                    npad, x->ndim);
  /* Per dim, in dim order: pad[0], pad[1] belong to the last dim. */
  int64_t before[LT_MAX_DIMS] = {0}, after[LT_MAX_DIMS] = {0}, shape[LT_MAX_DIMS];
  for (int k = 0; k < npad / 2; k++) {
    const int d = x->ndim - 1 - k;
    before[d] = pad[2 * k];
    after[d] = pad[2 * k + 1];
  }
  bool grows = false; /* some border to fill */
  for (int d = 0; d < x->ndim; d++) {
    const long long b = (long long)before[d], a = (long long)after[d];
    if (b > PAD_LIMIT || b < -PAD_LIMIT || a > PAD_LIMIT || a < -PAD_LIMIT)
      return lt_error(LT_ERR_ARG, "pad: padding (%lld, %lld) of dimension %lld is too large", b,
                      a, LT_USER_INDEX(d));
    const int64_t crop = (b < 0 ? -b : 0) + (a < 0 ? -a : 0);
    if (crop > x->shape[d])
      return lt_error(LT_ERR_SHAPE,
                      "pad: padding (%lld, %lld) crops %lld elements from dimension %lld, which "
                      "has %lld",
                      b, a, (long long)crop, LT_USER_INDEX(d), (long long)x->shape[d]);
    shape[d] = x->shape[d] + before[d] + after[d];
    grows = grows || before[d] > 0 || after[d] > 0;
  }

  const lt_backend *be;
  LT_TRY(ops_backend("pad", x->storage->device, &be));
  lt_tensor *r;
  LT_TRY(lt_empty_named("pad", shape, x->ndim, x->dtype, x->storage->device, &r));
  lt_status st = LT_OK;
  /* The borders: one slab per padded side. Slabs of different dims meet in
   * the corners, which are written twice: cheaper than cutting them out. */
  for (int d = 0; grows && st == LT_OK && d < x->ndim; d++) {
    if (before[d] > 0) {
      lt_tensor slab = *r;
      ops_view_narrow(&slab, d, 0, before[d]);
      st = fill_border(&slab, value);
    }
    if (st == LT_OK && after[d] > 0) {
      lt_tensor slab = *r;
      ops_view_narrow(&slab, d, shape[d] - after[d], after[d]);
      st = fill_border(&slab, value);
    }
  }
  r->storage->version = 0; /* a fresh tensor: filling its border is not a user's write */
  /* The middle: what is left of x after cropping, where the padding puts it. */
  lt_tensor src = *x, dst = *r;
  for (int d = 0; d < x->ndim; d++) {
    const int64_t crop_before = before[d] < 0 ? -before[d] : 0;
    const int64_t crop_after = after[d] < 0 ? -after[d] : 0;
    const int64_t len = x->shape[d] - crop_before - crop_after;
    ops_view_narrow(&src, d, crop_before, len);
    ops_view_narrow(&dst, d, before[d] > 0 ? before[d] : 0, len);
  }
  if (st == LT_OK && lt_numel(&src) > 0) st = be->copy(&dst, &src);
  if (st == LT_OK) st = ag_record_constant_pad(x, before, r);
  if (st != LT_OK) {
    lt_tensor_release(r);
    return st;
  }
  *out = r;
  return LT_OK;
}
