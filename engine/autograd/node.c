/* Graph nodes: creation, edges, saved tensors, attachment to results and
 * release. */
#include <stdlib.h>
#include <string.h>

#include "autograd/node.h"

/* Creation order, so that backward can run the most recent node first (as
 * PyTorch's engine does), freeing buffers as early as possible. */
static _Thread_local uint64_t next_seq;

ag_node *ag_node_new(const char *name, ag_backward_fn backward, int nin) {
  ag_node *n = calloc(1, sizeof *n + (size_t)nin * sizeof(ag_input));
  if (!n) {
    lt_error(LT_ERR_OOM, "%s: out of host memory for an autograd node", name);
    return NULL;
  }
  n->refcount = 1;
  n->name = name;
  n->backward = backward;
  n->seq = ++next_seq;
  n->nout = 1;
  n->buffers = &n->buffer0;
  n->nin = nin;
  return n;
}

void ag_node_retain(ag_node *n) { n->refcount++; }

/* Frees one node whose count reached zero; input nodes that reach zero in
 * turn are pushed on the worklist instead of recursing, so a graph of any
 * depth (a long loop of ops) is freed without deep recursion. */
static size_t free_node(ag_node *n, ag_node **worklist) {
  size_t given_back = ag_node_release_saved(n);
  for (int i = 0; i < n->nin; i++) {
    ag_edge *e = &n->inputs[i].edge;
    if (e->leaf) given_back += lt_tensor_release(e->leaf);
    if (e->node && --e->node->refcount == 0) {
      e->node->free_next = *worklist;
      *worklist = e->node;
    }
  }
  if (n->inner && --n->inner->refcount == 0) {
    n->inner->free_next = *worklist;
    *worklist = n->inner;
  }
  free(n->geom);
  if (n->custom) {
    free(n->custom->name);
    free(n->custom->outs);
    free(n->custom);
  }
  if (n->buffers != &n->buffer0) free(n->buffers);
  free(n);
  return given_back;
}

size_t ag_node_release(ag_node *n) {
  if (!n || --n->refcount > 0) return 0;
  n->free_next = NULL;
  ag_node *worklist = n;
  size_t given_back = 0;
  while (worklist) {
    ag_node *x = worklist;
    worklist = x->free_next;
    given_back += free_node(x, &worklist);
  }
  return given_back;
}

void ag_node_set_input(ag_node *n, int i, const lt_tensor *t) {
  ag_input *in = &n->inputs[i];
  memset(in, 0, sizeof *in);
  if (!t) return;
  in->ndim = t->ndim;
  memcpy(in->shape, t->shape, sizeof in->shape);
  in->dtype = t->dtype;
  in->device = t->storage->device;
  if (!t->requires_grad || !lt_dtype_is_floating(t->dtype)) return;
  if (ag_history(t)) {
    in->edge.node = t->autograd->grad_fn;
    in->edge.output_nr = t->autograd->output_nr;
    ag_node_retain(in->edge.node);
  } else {
    in->edge.leaf = (lt_tensor *)t;
    lt_tensor_retain(in->edge.leaf);
  }
}

lt_status lt_autograd_save(const lt_tensor *t, lt_tensor **alias) {
  LT_TRY(lt_alias(t, alias));
  lt_storage *s = (*alias)->storage;
  s->saved_count++;
  /* Memory statistics: a tensor kept for backward is an activation (a
   * parameter or gradient keeps its own category). */
  lt_block *b = s->block;
  if (b && lt_block_category(b) == LT_CAT_OTHER) {
    lt_block_set_category(b, LT_CAT_ACTIVATION);
    s->saved_as_activation = true;
  }
  return LT_OK;
}

size_t lt_autograd_release_saved(lt_tensor *alias) {
  if (!alias) return 0;
  lt_storage *s = alias->storage;
  if (--s->saved_count == 0 && s->saved_as_activation) {
    s->saved_as_activation = false;
    /* Unless someone gave it another category since. */
    if (s->block && lt_block_category(s->block) == LT_CAT_ACTIVATION)
      lt_block_set_category(s->block, LT_CAT_OTHER);
  }
  return lt_tensor_release(alias);
}

lt_status ag_node_save(ag_node *n, int slot, const lt_tensor *t) {
  lt_tensor *alias;
  LT_TRY(lt_autograd_save(t, &alias));
  lt_autograd_release_saved(n->saved[slot].t);
  n->saved[slot].t = alias;
  n->saved[slot].version = t->storage->version;
  n->has_saved = true;
  return LT_OK;
}


size_t ag_node_release_saved(ag_node *n) {
  size_t given_back = 0;
  for (int s = 0; s < AG_MAX_SAVED; s++) {
    given_back += lt_autograd_release_saved(n->saved[s].t);
    n->saved[s].t = NULL;
  }
  if (n->custom && n->custom->free_ud) {
    void (*free_ud)(void *) = n->custom->free_ud;
    n->custom->free_ud = NULL; /* once only, even if free_ud re-enters */
    free_ud(n->custom->ud);
  }
  if (n->custom) n->custom->ud = NULL;
  if (n->inner) { /* CopySlices runs its inner node's formula: same lifetime */
    given_back += ag_node_release_saved(n->inner);
    n->inner->saved_released = true;
  }
  return given_back;
}

struct lt_autograd_meta *ag_meta_get(lt_tensor *t, const char *who) {
  if (t->autograd) return t->autograd;
  struct lt_autograd_meta *m = calloc(1, sizeof *m);
  if (!m) {
    lt_error(LT_ERR_OOM, "%s: out of host memory for autograd metadata", who);
    return NULL;
  }
  m->header.free = ag_meta_free;
  m->owner = t;
  t->autograd = m;
  return m;
}

lt_status ag_node_attach(ag_node *n, lt_tensor *t, int output_nr) {
  struct lt_autograd_meta *m = ag_meta_get(t, n->name);
  if (!m) return LT_ERR_OOM;
  ag_node_retain(n);
  ag_node *old = m->grad_fn;
  m->grad_fn = n;
  m->output_nr = output_nr;
  t->requires_grad = true;
  ag_node_release(old); /* an in-place op's node holds it as its input */
  /* Only an in-place op attaches a built-in node to a tensor that is already
   * a known view or base (a new result has no metadata yet): the write must
   * reach the base's history, and the views must see it. */
  if (!n->custom && (m->base || m->views)) return ag_after_inplace(t);
  return LT_OK;
}

size_t ag_meta_free(struct lt_autograd_meta *m) {
  if (!m) return 0;
  size_t given_back = ag_node_release(m->grad_fn);
  given_back += ag_view_untrack(m);
  ag_hooks_free(m);
  free(m);
  return given_back;
}

bool ag_any_requires_grad(const lt_tensor *const *ts, int n) {
  if (!lt_is_grad_enabled()) return false;
  for (int i = 0; i < n; i++)
    if (ts[i] && ts[i]->requires_grad && lt_dtype_is_floating(ts[i]->dtype)) return true;
  return false;
}
