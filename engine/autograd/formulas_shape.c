/* Gradients of ops that move values without arithmetic: views, cat, stack,
 * conversions and copies, fills. */
#include "autograd/grad_calc.h"
#include "autograd/node.h"
#include "autograd/record.h"

/* ---- views: the gradient of the base is the view's gradient put back ---- */

/* narrow/select: zeros of the base's shape with the gradient written into
 * the part the view showed. */
static lt_tensor *scatter_into_zeros(ag_calc *c, const ag_node *n, const lt_tensor *g) {
  const ag_input *in = &n->inputs[0];
  lt_tensor *z = ag_zeros(c, in->shape, in->ndim, g->dtype, g->storage->device);
  if (!z) return NULL;
  const int dim = (int)n->p.i[0];
  lt_tensor *part = n->p.op == AG_VIEW_NARROW ? ag_narrow(c, z, dim, n->p.i[1], n->p.i[2])
                                              : ag_select(c, z, dim, n->p.i[1]);
  if (part) ag_copy_into(c, part, g);
  return z;
}

static lt_status view_backward(ag_node *n, lt_tensor *const *grad_out, lt_tensor **grad_in) {
  const lt_tensor *g = grad_out[0];
  const ag_input *in = &n->inputs[0];
  ag_calc c;
  ag_calc_init(&c);
  lt_tensor *gi = NULL;
  switch ((ag_view_kind)n->p.op) {
    case AG_VIEW_RESHAPE: gi = ag_reshape(&c, g, in->shape, in->ndim); break;
    case AG_VIEW_TRANSPOSE:
      gi = in->ndim == 0 ? (lt_tensor *)g : ag_transpose(&c, g, (int)n->p.i[0], (int)n->p.i[1]);
      break;
    case AG_VIEW_PERMUTE: {
      int inverse[LT_MAX_DIMS];
      for (int d = 0; d < n->p.ni; d++) inverse[n->p.i[d]] = d;
      gi = ag_permute(&c, g, inverse, n->p.ni);
      break;
    }
    case AG_VIEW_NARROW:
    case AG_VIEW_SELECT: gi = scatter_into_zeros(&c, n, g); break;
    case AG_VIEW_EXPAND: gi = (lt_tensor *)g; break; /* the engine sums the expanded dims */
  }
  grad_in[0] = ag_out(&c, gi);
  return ag_calc_end(&c);
}

/* A narrow or select whose base already holds a gradient from elsewhere (the q, k and v
 * split from one projection: the second and third views find the first's): g goes into the
 * part it showed, in place, the same sums as adding zeros of the base's shape with g written
 * in, without the zeros and the full-size add. *done is false for any other node. */
lt_status ag_view_add_into(const ag_node *n, const lt_tensor *g, lt_tensor *base_grad, bool *done) {
  *done = false;
  if (n->backward != view_backward || (n->p.op != AG_VIEW_NARROW && n->p.op != AG_VIEW_SELECT))
    return LT_OK;
  *done = true;
  ag_calc c;
  ag_calc_init(&c);
  const int dim = (int)n->p.i[0];
  lt_tensor *part = n->p.op == AG_VIEW_NARROW ? ag_narrow(&c, base_grad, dim, n->p.i[1], n->p.i[2])
                                              : ag_select(&c, base_grad, dim, n->p.i[1]);
  if (part && c.st == LT_OK) c.st = lt_binary_(LT_OP_ADD, part, g);
  return ag_calc_end(&c);
}

lt_status ag_record_view(const char *name, ag_view_kind kind, const lt_tensor *t, lt_tensor *r,
                         const int64_t *args, int nargs) {
  if (r == t || !lt_dtype_is_floating(r->dtype)) return LT_OK;
  if (ag_any_requires_grad(&t, 1)) {
    ag_node *n = ag_node_new(name, view_backward, 1);
    if (!n) return LT_ERR_OOM;
    n->p.op = kind;
    n->p.ni = nargs;
    for (int k = 0; k < nargs && k < LT_MAX_DIMS; k++) n->p.i[k] = args[k];
    ag_node_set_input(n, 0, t);
    lt_status st = ag_node_attach(n, r, 0);
    ag_node_release(n);
    LT_TRY(st);
  }
  /* After the node: r is new, so attaching is no in-place write. */
  return ag_view_track(t, r);
}

/* ---- cat and stack: each input gets its slice of the gradient ---- */

static lt_status cat_backward(ag_node *n, lt_tensor *const *grad_out, lt_tensor **grad_in) {
  const lt_tensor *g = grad_out[0];
  const int dim = (int)n->p.i[0];
  ag_calc c;
  ag_calc_init(&c);
  int64_t at = 0;
  for (int i = 0; i < n->nin; i++) {
    const ag_input *in = &n->inputs[i];
    if (in->ndim != g->ndim) { /* a skipped 1-D empty tensor */
      if (ag_needs(n, i))
        grad_in[i] = ag_out(&c, ag_zeros(&c, in->shape, in->ndim, in->dtype, in->device));
      continue;
    }
    if (ag_needs(n, i)) grad_in[i] = ag_out(&c, ag_narrow(&c, g, dim, at, in->shape[dim]));
    at += in->shape[dim];
  }
  return ag_calc_end(&c);
}

static lt_status stack_backward(ag_node *n, lt_tensor *const *grad_out, lt_tensor **grad_in) {
  ag_calc c;
  ag_calc_init(&c);
  for (int i = 0; i < n->nin; i++)
    if (ag_needs(n, i)) grad_in[i] = ag_out(&c, ag_select(&c, grad_out[0], (int)n->p.i[0], i));
  return ag_calc_end(&c);
}

static lt_status record_join(const char *name, ag_backward_fn fn, lt_tensor *const *ts, int n,
                             int dim, lt_tensor *r) {
  if (!lt_dtype_is_floating(r->dtype) || !ag_any_requires_grad((const lt_tensor *const *)ts, n))
    return LT_OK;
  ag_node *node = ag_node_new(name, fn, n);
  if (!node) return LT_ERR_OOM;
  node->p.i[0] = dim;
  for (int i = 0; i < n; i++) ag_node_set_input(node, i, ts[i]);
  lt_status st = ag_node_attach(node, r, 0);
  ag_node_release(node);
  return st;
}

lt_status ag_record_cat(lt_tensor *const *ts, int n, int dim, lt_tensor *r) {
  return record_join("CatBackward", cat_backward, ts, n, dim, r);
}

lt_status ag_record_stack(lt_tensor *const *ts, int n, int dim, lt_tensor *r) {
  return record_join("StackBackward", stack_backward, ts, n, dim, r);
}

/* ---- conversions and copies ---- */

static lt_status identity_backward(ag_node *n, lt_tensor *const *grad_out, lt_tensor **grad_in) {
  (void)n;
  lt_tensor_retain(grad_out[0]);
  grad_in[0] = grad_out[0]; /* the engine converts it back to the input's dtype and device */
  return LT_OK;
}

lt_status ag_record_identity(const char *name, const lt_tensor *t, lt_tensor *r) {
  if (r == t || !lt_dtype_is_floating(r->dtype) || !ag_any_requires_grad(&t, 1)) return LT_OK;
  ag_node *n = ag_node_new(name, identity_backward, 1);
  if (!n) return LT_ERR_OOM;
  ag_node_set_input(n, 0, t);
  lt_status st = ag_node_attach(n, r, 0);
  ag_node_release(n);
  return st;
}

/* Input 0 is the overwritten tensor's history: its old values no longer
 * matter, so it gets zeros; input 1 (copy_'s source) gets the gradient. */
static lt_status overwrite_backward(ag_node *n, lt_tensor *const *grad_out, lt_tensor **grad_in) {
  const lt_tensor *g = grad_out[0];
  ag_calc c;
  ag_calc_init(&c);
  if (ag_needs(n, 0))
    grad_in[0] = ag_out(&c, ag_zeros_expanded(&c, g->shape, g->ndim, g->dtype, g->storage->device));
  if (n->nin > 1 && ag_needs(n, 1)) grad_in[1] = ag_out(&c, g);
  return ag_calc_end(&c);
}

lt_status ag_record_copy_(lt_tensor *dst, const lt_tensor *src) {
  const lt_tensor *ins[2] = {dst, src};
  if (!lt_dtype_is_floating(dst->dtype) || !ag_any_requires_grad(ins, 2)) return LT_OK;
  ag_node *n = ag_node_new("CopyBackwards", overwrite_backward, 2);
  if (!n) return LT_ERR_OOM;
  ag_node_set_input(n, 0, dst);
  ag_node_set_input(n, 1, src);
  lt_status st = ag_node_attach(n, dst, 0);
  ag_node_release(n);
  return st;
}

lt_status ag_record_fill_(const char *name, lt_tensor *t) {
  if (!ag_will_record(t)) return LT_OK;
  ag_node *n = ag_node_new(name, overwrite_backward, 1);
  if (!n) return LT_ERR_OOM;
  ag_node_set_input(n, 0, t);
  lt_status st = ag_node_attach(n, t, 0);
  ag_node_release(n);
  return st;
}
