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
  if (ag_history(t)) {
    if (requires_grad) return LT_OK; /* a non-leaf already does */
    return lt_error(LT_ERR_AUTOGRAD,
                    "requires_grad_: you can only change requires_grad flags of leaf tensors; to "
                    "use a computed tensor without gradient, use detach()");
  }
  /* A view made a leaf of its own no longer writes into its base's history
   * (it is refused in-place writes as a leaf), and must not hold its base: the
   * base's graph could hold this leaf, a reference cycle. */
  if (requires_grad && t->autograd && t->autograd->base) ag_view_untrack(t->autograd);
  bool was = t->requires_grad;
  t->requires_grad = requires_grad;
  /* The views of a base that now requires grad pass their gradient to it. */
  if (requires_grad && !was && t->autograd && t->autograd->views) return ag_regenerate_views(t);
  return LT_OK;
}

bool lt_is_leaf(const lt_tensor *t) { return ag_history(t) == NULL; }

const char *lt_grad_fn_name(const lt_tensor *t) {
  return t->autograd && t->autograd->grad_fn ? t->autograd->grad_fn->name : NULL;
}

lt_status ag_inplace_begin(const char *op, lt_tensor *dst, const lt_tensor *src, bool keep_old,
                           lt_tensor **old) {
  *old = NULL;
  if (!lt_is_grad_enabled()) return LT_OK; /* e.g. an optimizer step under no_grad */
  bool src_grad = src && src->requires_grad && lt_dtype_is_floating(src->dtype);
  if (dst->requires_grad && !ag_history(dst))
    return lt_error(LT_ERR_AUTOGRAD,
                    "%s: a leaf tensor that requires grad is used in an in-place operation "
                    "(use no_grad, or an out-of-place op)",
                    op);
  if (dst->is_view && lt_dtype_is_floating(dst->dtype)) {
    const lt_tensor *base = dst->autograd ? dst->autograd->base : NULL;
    if (base && base->requires_grad && !ag_history(base))
      return lt_error(LT_ERR_AUTOGRAD,
                      "%s: a view of a leaf tensor that requires grad is used in an in-place "
                      "operation (use no_grad, or an out-of-place op)",
                      op);
    if (dst->requires_grad || src_grad) {
      /* A view made under no_grad (or from such a view) does not know its
       * base, so the write could not reach the base's history. */
      if (!base)
        return lt_error(LT_ERR_AUTOGRAD,
                        "%s: in-place write with grad into a view made under no_grad (its base "
                        "would not receive the gradient); make the view with grad enabled, or "
                        "build the result out of place (cat, stack, where)",
                        op);
      LT_TRY(ag_view_check_rebase(op, dst));
    }
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
