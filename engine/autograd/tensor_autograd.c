/* The autograd side of tensors: requires_grad_, leaves, grad_fn names, the
 * in-place rules, and attaching nodes for ops. */
#include "autograd/node.h"
#include "autograd/record.h"

lt_status lt_requires_grad_(lt_tensor *t, bool requires_grad) {
  if (!t) return lt_error(LT_ERR_ARG, "requires_grad_: expected a tensor, got nothing");
  if (!t->storage || t->refcount <= 0)
    return lt_error(LT_ERR_FREED, "requires_grad_: attempt to use a freed tensor");
  if (requires_grad && !lt_dtype_is_floating(t->dtype))
    return lt_error(LT_ERR_DTYPE,
                    "requires_grad_: only tensors of floating point dtype can require gradients "
                    "(got %s)",
                    lt_dtype_name(t->dtype));
  if (t->autograd) {
    if (requires_grad) return LT_OK; /* a non-leaf already does */
    return lt_error(LT_ERR_AUTOGRAD,
                    "requires_grad_: you can only change requires_grad flags of leaf tensors; to "
                    "use a computed tensor without gradient, use detach()");
  }
  t->requires_grad = requires_grad;
  return LT_OK;
}

bool lt_is_leaf(const lt_tensor *t) { return t->autograd == NULL; }

const char *lt_grad_fn_name(const lt_tensor *t) {
  return t->autograd && t->autograd->grad_fn ? t->autograd->grad_fn->name : NULL;
}

lt_status ag_inplace_begin(const char *op, lt_tensor *dst, const lt_tensor *src, bool keep_old,
                           lt_tensor **old) {
  *old = NULL;
  if (!lt_is_grad_enabled()) return LT_OK; /* e.g. an optimizer step under no_grad */
  bool src_grad = src && src->requires_grad && lt_dtype_is_floating(src->dtype);
  if (dst->requires_grad) {
    if (!dst->autograd)
      return lt_error(LT_ERR_AUTOGRAD,
                      "%s: a leaf tensor that requires grad is used in an in-place operation "
                      "(use no_grad, or an out-of-place op)",
                      op);
    if (dst->is_view)
      return lt_error(LT_ERR_AUTOGRAD,
                      "%s: in-place operations are not supported on a view that requires grad "
                      "(apply the op out of place, or to the base tensor)",
                      op);
  } else if (src_grad && dst->is_view && lt_dtype_is_floating(dst->dtype)) {
    return lt_error(LT_ERR_AUTOGRAD,
                    "%s: writing a tensor that requires grad into a view is not supported (the "
                    "base tensor would not receive its gradient); build the result out of place "
                    "(cat, stack, where)",
                    op);
  }
  const lt_tensor *operands[2] = {dst, src};
  if (!keep_old || !lt_dtype_is_floating(dst->dtype) || !ag_any_requires_grad(operands, 2))
    return LT_OK;
  /* The formula needs the values the write destroys: keep a copy, as
   * PyTorch saves self.clone() for such in-place ops. */
  bool grad_mode = lt_set_grad_enabled(false);
  lt_status st = lt_clone(dst, old);
  lt_set_grad_enabled(grad_mode);
  return st;
}
