/* In-place writes through views, as PyTorch records them.
 *
 * A view made in grad mode knows its base: the root tensor (not itself a
 * view) whose storage it shows. An in-place op on such a view first records
 * its node on the view as on any tensor (input 0: the view's old history);
 * then ag_after_inplace moves that write onto the base:
 *
 *   - the base gets a CopySlices node: its input 0 is the base's history
 *     before the write, its other inputs are those of the op's node (the
 *     value written, say). Its backward copies the base's gradient, runs the
 *     op's formula on the view's part of it, puts the gradient for the view's
 *     old values back into that part (for the base's old history) and hands
 *     the op's other input gradients on;
 *   - every live view of the base gets a new history, AsStridedBackward over
 *     the base's new one, because the write changed what they all show.
 *
 * Views are placed in their base by geometry alone (offset and strides in the
 * shared storage), PyTorch's as_strided fallback, which serves every view op
 * lt has. A write into a view whose elements overlap, or whose base's do, is
 * refused; a view whose new history cannot be expressed gets one that raises
 * a clear error at backward. */
#include <stdlib.h>
#include <string.h>

#include "autograd/grad_calc.h"
#include "autograd/node.h"
#include "autograd/record.h"

struct ag_view_geom {
  int64_t offset; /* the view's first element, counted from the base's */
  int64_t shape[LT_MAX_DIMS], stride[LT_MAX_DIMS];
  int ndim;
  int64_t base_shape[LT_MAX_DIMS], base_stride[LT_MAX_DIMS];
  int base_ndim;
  bool valid; /* the view's elements can be placed in a copy of the base */
};

/* ---- geometry ---- */

/* Elements from the first to the last one a geometry touches (0 if empty). */
static int64_t extent(const int64_t *shape, const int64_t *stride, int ndim) {
  int64_t e = 1;
  for (int d = 0; d < ndim; d++) {
    if (shape[d] == 0) return 0;
    e += (shape[d] - 1) * stride[d];
  }
  return e;
}

/* No two elements share memory, counting dims of stride 0 (an expanded
 * view) as overlapping only when allow_broadcast is false. */
static bool non_overlapping(const int64_t *shape, const int64_t *stride, int ndim,
                            bool allow_broadcast) {
  int idx[LT_MAX_DIMS], n = 0;
  for (int d = 0; d < ndim; d++) {
    if (shape[d] <= 1) continue;
    if (stride[d] == 0) {
      if (!allow_broadcast) return false;
      continue;
    }
    if (stride[d] < 0) return false;
    idx[n++] = d;
  }
  /* Sorted by stride, each dim must step over all the smaller ones. */
  for (int i = 1; i < n; i++)
    for (int j = i; j > 0 && stride[idx[j]] < stride[idx[j - 1]]; j--) {
      int k = idx[j];
      idx[j] = idx[j - 1];
      idx[j - 1] = k;
    }
  int64_t reach = 0; /* the furthest offset the smaller dims reach */
  for (int i = 0; i < n; i++) {
    if (stride[idx[i]] <= reach) return false;
    reach += (shape[idx[i]] - 1) * stride[idx[i]];
  }
  return true;
}

static void geom_of(const lt_tensor *view, const lt_tensor *base, struct ag_view_geom *g) {
  memset(g, 0, sizeof *g);
  g->offset = view->offset - base->offset;
  g->ndim = view->ndim;
  memcpy(g->shape, view->shape, sizeof g->shape);
  memcpy(g->stride, view->stride, sizeof g->stride);
  g->base_ndim = base->ndim;
  memcpy(g->base_shape, base->shape, sizeof g->base_shape);
  memcpy(g->base_stride, base->stride, sizeof g->base_stride);
  const int64_t view_extent = extent(g->shape, g->stride, g->ndim);
  const int64_t base_extent = extent(g->base_shape, g->base_stride, g->base_ndim);
  g->valid = view->storage == base->storage && view->dtype == base->dtype &&
             non_overlapping(g->base_shape, g->base_stride, g->base_ndim, false) &&
             non_overlapping(g->shape, g->stride, g->ndim, true) &&
             (view_extent == 0 || (g->offset >= 0 && g->offset + view_extent <= base_extent));
}

/* A header over s's storage with the given geometry, held by c. */
static lt_tensor *strided(ag_calc *c, const lt_tensor *s, int64_t offset, const int64_t *shape,
                          const int64_t *stride, int ndim) {
  if (c->st != LT_OK) return NULL;
  lt_tensor *a = NULL;
  lt_status st = lt_alias(s, &a);
  lt_tensor *h = ag_keep(c, st, a);
  if (!h) return NULL;
  h->offset = s->offset + offset;
  h->ndim = ndim;
  memcpy(h->shape, shape, (size_t)ndim * sizeof(int64_t));
  memcpy(h->stride, stride, (size_t)ndim * sizeof(int64_t));
  return h;
}

/* Zeros laid out as the base is (its strides may leave gaps: the buffer
 * spans its extent); *store is the flat buffer the base's and the view's
 * headers share. */
static lt_tensor *zeros_like_base(ag_calc *c, const struct ag_view_geom *g, lt_dtype dt,
                                  lt_device dev, lt_tensor **store) {
  const int64_t n = extent(g->base_shape, g->base_stride, g->base_ndim);
  *store = ag_zeros(c, &n, 1, dt, dev);
  if (!*store) return NULL;
  return strided(c, *store, 0, g->base_shape, g->base_stride, g->base_ndim);
}

/* The view's part of store; dims of stride 0 (an expanded view) shown once,
 * with size 1. */
static lt_tensor *view_part(ag_calc *c, const lt_tensor *store, const struct ag_view_geom *g) {
  int64_t shape[LT_MAX_DIMS];
  for (int d = 0; d < g->ndim; d++) shape[d] = g->stride[d] == 0 ? 1 : g->shape[d];
  return strided(c, store, g->offset, shape, g->stride, g->ndim);
}

static const char *invalid_view_message =
    "backward: a view was modified in place through its base (or another view of it) after it "
    "was made, and lt cannot place it in its base (its elements overlap, or it lies outside its "
    "base); make the view again after the write";

/* ---- AsStridedBackward: a view's history over its base's ---- */

static lt_status as_strided_backward(ag_node *n, lt_tensor *const *grad_out, lt_tensor **grad_in) {
  const struct ag_view_geom *g = n->geom;
  if (!g->valid) return lt_error(LT_ERR_AUTOGRAD, "%s", invalid_view_message);
  const lt_tensor *gv = grad_out[0];
  ag_calc c;
  ag_calc_init(&c);
  lt_tensor *store = NULL;
  lt_tensor *gb = zeros_like_base(&c, g, gv->dtype, gv->storage->device, &store);
  if (extent(g->shape, g->stride, g->ndim) > 0) {
    /* An expanded view's copies of one element all add to it. */
    int dims[LT_MAX_DIMS], k = 0;
    for (int d = 0; d < g->ndim; d++)
      if (g->stride[d] == 0 && g->shape[d] > 1) dims[k++] = d;
    const lt_tensor *src = k ? ag_sum(&c, gv, dims, k, true) : gv;
    lt_tensor *part = view_part(&c, store, g);
    if (part && src) ag_copy_into(&c, part, src);
  }
  grad_in[0] = ag_out(&c, gb);
  return ag_calc_end(&c);
}

/* Makes n the history of t without the in-place hook of ag_node_attach. */
static void set_history(lt_tensor *t, ag_node *n) {
  ag_node_retain(n);
  ag_node *old = t->autograd->grad_fn;
  t->autograd->grad_fn = n;
  t->autograd->output_nr = 0;
  t->requires_grad = true;
  ag_node_release(old);
}

lt_status ag_regenerate_views(lt_tensor *base) {
  if (!base->autograd || !base->requires_grad || !lt_dtype_is_floating(base->dtype)) return LT_OK;
  for (struct lt_autograd_meta *w = base->autograd->views; w; w = w->view_next) {
    lt_tensor *v = w->owner;
    ag_node *n = ag_node_new("AsStridedBackward", as_strided_backward, 1);
    if (!n) return LT_ERR_OOM;
    n->geom = malloc(sizeof *n->geom);
    if (!n->geom) {
      ag_node_release(n);
      return lt_error(LT_ERR_OOM, "AsStridedBackward: out of host memory");
    }
    geom_of(v, base, n->geom);
    ag_node_set_input(n, 0, base);
    set_history(v, n);
    ag_node_release(n);
  }
  return LT_OK;
}

/* ---- CopySlices: the write, recorded on the base ---- */

static lt_status copy_slices_backward(ag_node *n, lt_tensor *const *grad_out, lt_tensor **grad_in) {
  const struct ag_view_geom *g = n->geom;
  ag_node *op = n->inner;
  const lt_tensor *gb_in = grad_out[0];
  lt_tensor *op_grads[8] = {NULL};
  ag_calc c;
  ag_calc_init(&c);
  lt_tensor *store = NULL;
  lt_tensor *gb = zeros_like_base(&c, g, gb_in->dtype, gb_in->storage->device, &store);
  if (gb) ag_copy_into(&c, gb, gb_in);
  lt_tensor *part = view_part(&c, store, g);
  lt_tensor *gv = NULL;
  if (part) { /* the formula gets a tensor of its own, as PyTorch's clone */
    lt_status st = lt_clone(part, &gv);
    gv = ag_keep(&c, st, gv);
  }
  if (gv) {
    lt_tensor *const go[1] = {gv};
    c.st = op->backward(op, go, op_grads);
  }
  if (ag_needs(n, 0) && part) {
    /* The view's old values: their gradient replaces the part the write
     * overwrote; none (a fill, a copy) means zero. */
    if (op_grads[0]) {
      lt_tensor *fitted = NULL;
      lt_status st = ag_sum_to(op->name, op_grads[0], g->shape, g->ndim, &fitted);
      fitted = ag_keep(&c, st, fitted);
      if (fitted) ag_copy_into(&c, part, fitted);
    } else {
      lt_tensor *z = ag_zeros_expanded(&c, part->shape, part->ndim, part->dtype,
                                       part->storage->device);
      if (z) ag_copy_into(&c, part, z);
    }
    grad_in[0] = ag_out(&c, gb);
  }
  for (int i = 0; i < op->nin && i < 8; i++) {
    if (i > 0 && c.st == LT_OK && ag_needs(n, i)) {
      grad_in[i] = op_grads[i]; /* the engine fits it to the input */
    } else if (op_grads[i]) {
      lt_tensor_release(op_grads[i]);
    }
    op_grads[i] = NULL;
  }
  return ag_calc_end(&c);
}

/* view (whose base is known) just got the in-place op's node as its
 * history. */
static lt_status rebase(lt_tensor *view) {
  struct lt_autograd_meta *m = view->autograd;
  lt_tensor *base = m->base;
  ag_node *op = m->grad_fn;
  /* The views are kept in step with their base, so a view whose base takes
   * a gradient takes one too; were it not, the formula would have skipped
   * the gradient of the view's old values that the base needs. */
  if (base->requires_grad && !ag_needs(op, 0))
    return lt_error(LT_ERR_AUTOGRAD,
                    "%s: the view's history is out of date with its base; make the view again",
                    op->name);
  if (op->nin > 8)
    return lt_error(LT_ERR_AUTOGRAD, "%s: too many inputs for a write through a view", op->name);
  struct lt_autograd_meta *mb = ag_meta_get(base, "CopySlices");
  if (!mb) return LT_ERR_OOM;
  ag_node *n = ag_node_new("CopySlices", copy_slices_backward, op->nin);
  if (!n) return LT_ERR_OOM;
  n->geom = malloc(sizeof *n->geom);
  if (!n->geom) {
    ag_node_release(n);
    return lt_error(LT_ERR_OOM, "CopySlices: out of host memory");
  }
  geom_of(view, base, n->geom);
  ag_node_set_input(n, 0, base); /* the base's history before the write */
  for (int i = 1; i < op->nin; i++) {
    n->inputs[i] = op->inputs[i];
    if (n->inputs[i].edge.node) ag_node_retain(n->inputs[i].edge.node);
    if (n->inputs[i].edge.leaf) lt_tensor_retain(n->inputs[i].edge.leaf);
  }
  ag_node_retain(op);
  n->inner = op;
  n->has_saved = op->has_saved;
  set_history(base, n);
  ag_node_release(n);
  return ag_regenerate_views(base);
}

lt_status ag_after_inplace(lt_tensor *t) {
  struct lt_autograd_meta *m = t->autograd;
  if (m->base) return rebase(t);
  return ag_regenerate_views(t);
}

lt_status ag_view_check_rebase(const char *op, const lt_tensor *view) {
  struct ag_view_geom g;
  geom_of(view, view->autograd->base, &g);
  if (!g.valid || !non_overlapping(g.shape, g.stride, g.ndim, false))
    return lt_error(LT_ERR_AUTOGRAD,
                    "%s: in-place write with grad into a view whose elements overlap (or whose "
                    "base's do) is not supported; clone it first",
                    op);
  return LT_OK;
}

/* ---- knowing the base ---- */

lt_status ag_view_track(const lt_tensor *t, lt_tensor *r) {
  if (!lt_is_grad_enabled() || r == t || !r->is_view || !lt_dtype_is_floating(r->dtype))
    return LT_OK;
  /* A view of a view has the same root; a view of a view that does not know
   * its root (made under no_grad) cannot know it either. */
  lt_tensor *base = t->is_view ? (t->autograd ? t->autograd->base : NULL) : (lt_tensor *)t;
  if (!base || base->storage != r->storage) return LT_OK;
  struct lt_autograd_meta *mb = ag_meta_get(base, "view");
  struct lt_autograd_meta *mr = mb ? ag_meta_get(r, "view") : NULL;
  if (!mr) return LT_ERR_OOM;
  lt_tensor_retain(base);
  mr->base = base;
  mr->view_prev = NULL;
  mr->view_next = mb->views;
  if (mb->views) mb->views->view_prev = mr;
  mb->views = mr;
  return LT_OK;
}

size_t ag_view_untrack(struct lt_autograd_meta *m) {
  lt_tensor *base = m->base;
  if (!base) return 0;
  struct lt_autograd_meta *mb = base->autograd;
  if (m->view_prev) m->view_prev->view_next = m->view_next;
  else mb->views = m->view_next;
  if (m->view_next) m->view_next->view_prev = m->view_prev;
  m->view_next = m->view_prev = NULL;
  m->base = NULL;
  return lt_tensor_release(base);
}
