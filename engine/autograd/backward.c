/* The backward engine: finds the nodes reachable from the root, counts the
 * edges into each, then runs them in dependency order (most recently created
 * first among the ready ones, as PyTorch does, so buffers die early), summing
 * the gradients that meet at a node and accumulating into leaves' .grad. */
#include <stdlib.h>
#include <string.h>

#include "autograd/grad_calc.h"
#include "autograd/node.h"
#include "autograd/record.h"
#include "lt/autocast.h"

/* ---- a growable array of nodes, also used as a max-heap on seq ---- */

typedef struct node_list {
  ag_node **v;
  int n, cap;
} node_list;

static lt_status list_push(node_list *l, ag_node *x) {
  if (l->n == l->cap) {
    int cap = l->cap ? 2 * l->cap : 32;
    ag_node **v = realloc(l->v, (size_t)cap * sizeof *v);
    if (!v) return lt_error(LT_ERR_OOM, "backward: out of host memory for the graph");
    l->v = v;
    l->cap = cap;
  }
  l->v[l->n++] = x;
  return LT_OK;
}

static void swap(ag_node **a, ag_node **b) {
  ag_node *t = *a;
  *a = *b;
  *b = t;
}

static lt_status heap_push(node_list *h, ag_node *x) {
  LT_TRY(list_push(h, x));
  for (int i = h->n - 1; i > 0 && h->v[(i - 1) / 2]->seq < h->v[i]->seq; i = (i - 1) / 2)
    swap(&h->v[(i - 1) / 2], &h->v[i]);
  return LT_OK;
}

static ag_node *heap_pop(node_list *h) {
  ag_node *top = h->v[0];
  h->v[0] = h->v[--h->n];
  for (int i = 0;;) {
    int l = 2 * i + 1, r = l + 1, m = i;
    if (l < h->n && h->v[l]->seq > h->v[m]->seq) m = l;
    if (r < h->n && h->v[r]->seq > h->v[m]->seq) m = r;
    if (m == i) break;
    swap(&h->v[i], &h->v[m]);
    i = m;
  }
  return top;
}

/* ---- gradients ---- */

/* Nobody else sees t or its storage, so it may be written in place. */
static bool exclusively_owned(const lt_tensor *t) {
  return t->refcount == 1 && t->storage->refcount == 1 && lt_is_contiguous(t);
}

/* Adds g (taken over) into *slot. */
static lt_status sum_into(lt_tensor **slot, lt_tensor *g) {
  lt_tensor *b = *slot;
  if (!b) {
    *slot = g;
    return LT_OK;
  }
  bool same_shape = b->ndim == g->ndim && memcmp(b->shape, g->shape, sizeof(int64_t) * b->ndim) == 0;
  lt_status st;
  if (same_shape && exclusively_owned(b)) {
    st = lt_binary_(LT_OP_ADD, b, g);
    lt_tensor_release(g);
    return st;
  }
  if (same_shape && exclusively_owned(g)) {
    st = lt_binary_(LT_OP_ADD, g, b);
    lt_tensor_release(b);
    *slot = g;
    return st;
  }
  lt_tensor *sum = NULL;
  st = lt_binary(LT_OP_ADD, b, g, &sum);
  lt_tensor_release(g);
  if (st != LT_OK) return st;
  lt_tensor_release(b);
  *slot = sum;
  return LT_OK;
}

/* No two elements share memory (not an expanded tensor). */
static bool writable(const lt_tensor *t) {
  for (int d = 0; d < t->ndim; d++)
    if (t->stride[d] == 0 && t->shape[d] > 1) return false;
  return true;
}

/* leaf.grad += g (g taken over). The first gradient becomes .grad itself
 * when nothing else holds it (PyTorch's AccumulateGrad steals it too), else
 * a contiguous copy; either way its storage counts as "gradient". */
static lt_status accumulate_into_leaf(lt_tensor *leaf, lt_tensor *g) {
  if (!leaf->requires_grad) { /* requires_grad_(false) since the graph was built */
    lt_tensor_release(g);
    return LT_OK;
  }
  lt_status st = LT_OK;
  if (!leaf->grad) {
    st = lt_grad_journal_note(leaf);
    if (st != LT_OK) {
      lt_tensor_release(g);
      return st;
    }
    lt_tensor *owned = g;
    bool whole = g->offset == 0 && g->storage->nbytes == lt_nbytes(g);
    if (!(exclusively_owned(g) && whole && !g->is_view)) {
      st = lt_clone(g, &owned);
      lt_tensor_release(g);
      if (st != LT_OK) return st;
    }
    lt_block_set_category(owned->storage->block, LT_CAT_GRADIENT);
    leaf->grad = owned;
    return LT_OK;
  }
  /* In place, as PyTorch does outside create_graph; a .grad the user set to
   * something that cannot be written (an expanded tensor) is replaced. */
  if (writable(leaf->grad)) {
    st = lt_binary_(LT_OP_ADD, leaf->grad, g);
    lt_tensor_release(g);
    return st;
  }
  lt_tensor *sum = NULL;
  st = lt_grad_journal_note(leaf);
  if (st == LT_OK) st = lt_binary(LT_OP_ADD, leaf->grad, g, &sum);
  lt_tensor_release(g);
  if (st != LT_OK) return st;
  lt_block_set_category(sum->storage->block, LT_CAT_GRADIENT);
  lt_tensor_release(leaf->grad);
  leaf->grad = sum;
  return LT_OK;
}

lt_tensor *ag_grad_target(const ag_node *n, int i) {
  if (i >= 32) return NULL;
  const ag_input *in = &n->inputs[i];
  lt_tensor *leaf = in->edge.leaf;
  if (!leaf || !leaf->requires_grad || !leaf->grad) return NULL;
  const lt_tensor *g = leaf->grad;
  if (g->dtype != in->dtype || !lt_device_eq(g->storage->device, in->device) || !writable(g) ||
      g->ndim != in->ndim || memcmp(g->shape, in->shape, sizeof(int64_t) * (size_t)in->ndim) != 0)
    return NULL;
  return leaf->grad;
}

/* A gradient for input i brought to the input's shape (summing broadcast
 * dims), dtype and device. Takes over g; *out is a new reference. */
static lt_status fit_to_input(const ag_node *n, int i, lt_tensor *g, lt_tensor **out) {
  const ag_input *in = &n->inputs[i];
  lt_tensor *r = NULL;
  lt_status st = ag_sum_to(n->name, g, in->shape, in->ndim, &r);
  lt_tensor_release(g);
  if (st != LT_OK) return st;
  if (r->dtype != in->dtype) {
    lt_tensor *c = NULL;
    st = lt_to_dtype(r, in->dtype, false, &c);
    lt_tensor_release(r);
    if (st != LT_OK) return st;
    r = c;
  }
  if (!lt_device_eq(r->storage->device, in->device)) {
    lt_tensor *c = NULL;
    st = lt_to_device(r, in->device, &c);
    lt_tensor_release(r);
    if (st != LT_OK) return st;
    r = c;
  }
  *out = r;
  return LT_OK;
}

/* ---- running one node ---- */

lt_status ag_check_saved(const ag_node *n) {
  if (n->saved_released && n->has_saved)
    return lt_error(LT_ERR_AUTOGRAD,
                    "backward: trying to backward through the graph a second time (or directly "
                    "access saved tensors after they have already been freed); use "
                    "retain_graph=true the first time");
  for (int s = 0; s < AG_MAX_SAVED; s++) {
    const ag_saved *sv = &n->saved[s];
    if (!sv->t || sv->t->storage->version == sv->version) continue;
    const char *by = sv->t->storage->last_inplace_op;
    return lt_error(LT_ERR_AUTOGRAD,
                    "backward: a tensor saved by %s was modified by an in-place operation (%s): "
                    "version %llu, expected %llu",
                    n->name, by ? by : "an in-place op",
                    (unsigned long long)sv->t->storage->version, (unsigned long long)sv->version);
  }
  return n->inner ? ag_check_saved(n->inner) : LT_OK; /* CopySlices runs it */
}

/* Zeros for outputs of a multi-output node that received no gradient. */
static lt_status fill_missing(ag_node *n) {
  for (int o = 0; o < n->nout; o++) {
    if (n->buffers[o] || !n->custom) continue;
    LT_TRY(lt_zeros(n->custom->outs[o].shape, n->custom->outs[o].ndim, n->custom->outs[o].dtype,
                    n->custom->outs[o].device, &n->buffers[o]));
  }
  return LT_OK;
}

static void release_buffers(ag_node *n) {
  for (int o = 0; o < n->nout; o++) {
    if (n->buffers[o]) lt_tensor_release(n->buffers[o]);
    n->buffers[o] = NULL;
  }
}

/* The gradient that n's only input has so far, when n's backward may add into it in place
 * (ag_view_add_into): held by nothing else, of the input's shape, dtype and device. */
static lt_tensor *input_grad_so_far(const ag_node *n) {
  if (n->nin != 1 || n->nout != 1 || !n->buffers[0] || !ag_needs(n, 0)) return NULL;
  const ag_edge *e = &n->inputs[0].edge;
  lt_tensor *b = e->node ? e->node->buffers[e->output_nr] : NULL;
  const lt_tensor *g = n->buffers[0];
  if (!b || !exclusively_owned(b) || b->dtype != g->dtype ||
      !lt_device_eq(b->storage->device, g->storage->device) || b->ndim != n->inputs[0].ndim ||
      memcmp(b->shape, n->inputs[0].shape, sizeof(int64_t) * (size_t)b->ndim) != 0)
    return NULL;
  return b;
}

/* Runs n's formula and hands its input gradients on; ready inputs go on the
 * heap, and leaves whose last edge this was run their hooks. */
static lt_status run_node(ag_node *n, bool retain_graph, node_list *ready, ag_leaf_waits *waits) {
  bool any = false;
  for (int o = 0; o < n->nout; o++) any = any || n->buffers[o];
  lt_tensor *stack_grads[8] = {NULL};
  lt_tensor **grads = n->nin <= 8 ? stack_grads : calloc((size_t)n->nin, sizeof *grads);
  if (!grads) return lt_error(LT_ERR_OOM, "backward: out of host memory");
  lt_status st = LT_OK;
  n->added_in_place = 0;
  if (any) {
    st = ag_check_saved(n);
    if (st == LT_OK) st = fill_missing(n);
    lt_tensor *so_far = st == LT_OK ? input_grad_so_far(n) : NULL;
    bool done = false;
    if (so_far) st = ag_view_add_into(n, n->buffers[0], so_far, &done);
    if (st == LT_OK && !done) st = n->backward(n, n->buffers, grads);
  }
  release_buffers(n);
  if (!retain_graph) {
    ag_node_release_saved(n);
    n->saved_released = true;
  }
  for (int i = 0; i < n->nin; i++) {
    lt_tensor *g = grads[i];
    grads[i] = NULL;
    ag_edge *e = &n->inputs[i].edge;
    bool got = false; /* a gradient reached e->leaf */
    if (i < 32 && (n->added_in_place >> i) & 1) { /* already in the leaf's .grad */
      if (g) lt_tensor_release(g);
      got = true;
    } else if (g && st == LT_OK && ag_needs(n, i)) {
      lt_tensor *fitted = NULL;
      st = fit_to_input(n, i, g, &fitted);
      if (st == LT_OK)
        st = e->node ? sum_into(&e->node->buffers[e->output_nr], fitted)
                     : accumulate_into_leaf(e->leaf, fitted);
      got = st == LT_OK;
    } else if (g) {
      lt_tensor_release(g);
    }
    if (e->node && st == LT_OK && --e->node->deps == 0) st = heap_push(ready, e->node);
    if (!e->node && e->leaf && st == LT_OK)
      st = ag_leaf_waits_done(waits, e->leaf, got && e->leaf->requires_grad);
  }
  if (grads != stack_grads) free(grads);
  return st;
}

/* ---- the run ---- */

static lt_status reentrant_error(void) {
  return lt_error(LT_ERR_AUTOGRAD,
                  "backward: this graph is already being differentiated (a backward inside a "
                  "backward through the same nodes)");
}

/* Every node reachable from root, each retained, with deps counted, and
 * the edges into each leaf that has hooks. */
static lt_status discover(ag_node *root, node_list *all, ag_leaf_waits *waits) {
  static _Thread_local uint64_t last_run_id;
  uint64_t id = ++last_run_id;
  if (root->in_run) return reentrant_error();
  LT_TRY(list_push(all, root));
  root->in_run = true;
  root->run_id = id;
  root->deps = 0;
  ag_node_retain(root);
  for (int k = 0; k < all->n; k++) { /* all doubles as the BFS queue */
    ag_node *x = all->v[k];
    for (int i = 0; i < x->nin; i++) {
      ag_node *m = x->inputs[i].edge.node;
      lt_tensor *leaf = x->inputs[i].edge.leaf;
      if (!m && leaf && ag_has_hooks(leaf)) LT_TRY(ag_leaf_waits_add(waits, leaf));
      if (!m) continue;
      if (m->in_run && m->run_id != id) return reentrant_error();
      if (!m->in_run) {
        LT_TRY(list_push(all, m));
        m->in_run = true;
        m->run_id = id;
        m->deps = 0;
        ag_node_retain(m);
      }
      m->deps++;
    }
  }
  return LT_OK;
}

static lt_status prepare_buffers(node_list *all) {
  for (int k = 0; k < all->n; k++) {
    ag_node *x = all->v[k];
    if (x->nout > 1 && x->buffers == &x->buffer0) {
      lt_tensor **b = calloc((size_t)x->nout, sizeof *b);
      if (!b) return lt_error(LT_ERR_OOM, "backward: out of host memory");
      x->buffers = b;
    }
  }
  return LT_OK;
}

static void finish_run(node_list *all) {
  for (int k = 0; k < all->n; k++) {
    ag_node *x = all->v[k];
    release_buffers(x);
    x->in_run = false;
    x->deps = 0;
  }
  for (int k = 0; k < all->n; k++) ag_node_release(all->v[k]);
  free(all->v);
}

static lt_status run_graph(ag_node *root, int output_nr, lt_tensor *grad, bool retain_graph) {
  node_list all = {0}, ready = {0};
  ag_leaf_waits waits = {0};
  lt_status st = discover(root, &all, &waits);
  ag_leaf_waits_seal(&waits);
  if (st == LT_OK) st = prepare_buffers(&all);
  if (st == LT_OK) {
    root->buffers[output_nr] = grad;
    grad = NULL;
    st = heap_push(&ready, root);
  }
  while (st == LT_OK && ready.n > 0) st = run_node(heap_pop(&ready), retain_graph, &ready, &waits);
  if (grad) lt_tensor_release(grad);
  free(ready.v);
  free(waits.v);
  finish_run(&all);
  return st;
}

/* The gradient the run starts from: grad (converted to root's dtype), or 1. */
static lt_status initial_grad(const lt_tensor *root, const lt_tensor *grad, lt_tensor **out) {
  char rs[128], gs[128];
  if (!grad) {
    if (lt_numel(root) != 1)
      return lt_error(LT_ERR_SHAPE,
                      "backward: grad can be implicitly created only for scalar outputs (shape %s)",
                      lt_format_shape(rs, sizeof rs, root->shape, root->ndim));
    return lt_full(root->shape, root->ndim, 1.0, root->dtype, root->storage->device, out);
  }
  if (!grad->storage || grad->refcount <= 0)
    return lt_error(LT_ERR_FREED, "backward: attempt to use a freed tensor (grad)");
  if (grad->ndim != root->ndim ||
      memcmp(grad->shape, root->shape, sizeof(int64_t) * root->ndim) != 0)
    return lt_error(LT_ERR_SHAPE, "backward: mismatch in shape: grad has shape %s and the tensor "
                    "has shape %s",
                    lt_format_shape(gs, sizeof gs, grad->shape, grad->ndim),
                    lt_format_shape(rs, sizeof rs, root->shape, root->ndim));
  if (!lt_device_eq(grad->storage->device, root->storage->device)) {
    char gd[16], rd[16];
    return lt_error(LT_ERR_DEVICE, "backward: grad is on %s but the tensor is on %s",
                    lt_device_name(grad->storage->device, gd),
                    lt_device_name(root->storage->device, rd));
  }
  if (!lt_dtype_is_floating(grad->dtype))
    return lt_error(LT_ERR_DTYPE, "backward: grad must be a floating tensor, got %s",
                    lt_dtype_name(grad->dtype));
  return lt_to_dtype(grad, root->dtype, false, out);
}

lt_status lt_backward(lt_tensor *root, const lt_tensor *grad, bool retain_graph) {
  if (!root) return lt_error(LT_ERR_ARG, "backward: expected a tensor, got nothing");
  if (!root->storage || root->refcount <= 0)
    return lt_error(LT_ERR_FREED, "backward: attempt to use a freed tensor");
  if (!root->requires_grad)
    return lt_error(LT_ERR_AUTOGRAD, "backward: element 1 of tensors does not require grad and "
                    "does not have a grad_fn");
  bool previous = lt_set_grad_enabled(false); /* formulas are not recorded */
  lt_autocast_suspend(); /* formulas keep the forward's dtypes */
  lt_tensor *g = NULL;
  lt_status st = initial_grad(root, grad, &g);
  if (st == LT_OK) {
    if (ag_history(root)) {
      st = run_graph(root->autograd->grad_fn, root->autograd->output_nr, g, retain_graph);
    } else {
      bool got = root->requires_grad;
      st = accumulate_into_leaf(root, g); /* a leaf: its gradient is grad itself */
      if (st == LT_OK && got) st = ag_run_hooks(root);
    }
  }
  lt_autocast_resume();
  lt_set_grad_enabled(previous);
  return st;
}
