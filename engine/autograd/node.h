/* Graph nodes of the autograd tape (engine-internal).
 *
 * Ownership: a tensor's autograd meta holds one reference to its grad_fn; a
 * node holds one reference to each input node (edge) and to each leaf tensor
 * it accumulates into. Saved tensors are aliases (same storage, no autograd
 * meta), so a node that saves its own output makes no reference cycle. */
#ifndef LT_AUTOGRAD_NODE_H
#define LT_AUTOGRAD_NODE_H

#include <stdbool.h>
#include <stdint.h>

#include "lt/autograd.h"
#include "lt/ops.h"

/* Scaled dot-product attention saves the most: q, k, v, the output, the
 * log-sum-exp and the mask. */
#define AG_MAX_SAVED 6

typedef struct ag_node ag_node;

/* Where the gradient of one input goes. Both NULL: the input needs none. */
typedef struct ag_edge {
  ag_node *node;   /* the input's grad_fn */
  int output_nr;   /* which output of node the input is */
  lt_tensor *leaf; /* a leaf that requires grad: its .grad accumulates */
} ag_edge;

/* An input as the node saw it: its gradient is reduced (broadcasting),
 * converted and moved back to this shape, dtype and device. */
typedef struct ag_input {
  ag_edge edge;
  int64_t shape[LT_MAX_DIMS];
  int ndim;
  lt_dtype dtype;
  lt_device device;
} ag_input;

typedef struct ag_saved {
  lt_tensor *t;     /* alias of the saved tensor, NULL when unused/released */
  uint64_t version; /* the storage version the formula expects */
} ag_saved;

/* The non-tensor arguments a formula needs (which op, dims, numbers). */
typedef struct ag_params {
  int op;
  bool flag[2];
  double s[2];
  int64_t i[LT_MAX_DIMS];
  int ni;
} ag_params;

/* Computes grad_in[i] (new references, NULL for none) from grad_out (one per
 * output, borrowed, never NULL). Runs with grad mode off. */
typedef lt_status (*ag_backward_fn)(ag_node *n, lt_tensor *const *grad_out, lt_tensor **grad_in);

/* Extra state of a node with several outputs or a user-supplied backward. */
typedef struct ag_custom {
  lt_custom_backward_fn fn;
  void *ud;
  void (*free_ud)(void *);
  char *name; /* owned copy */
  int nout;
  struct {
    int64_t shape[LT_MAX_DIMS];
    int ndim;
    lt_dtype dtype;
    lt_device device;
  } *outs;
} ag_custom;

struct ag_node {
  int64_t refcount;
  const char *name;
  ag_backward_fn backward;
  uint64_t seq; /* creation order: backward runs later nodes first */
  ag_params p;
  ag_saved saved[AG_MAX_SAVED];
  bool has_saved;      /* something was saved (then a second backward needs retain_graph) */
  bool saved_released; /* freed by a backward without retain_graph */
  ag_custom *custom;   /* NULL for built-in nodes */
  int nout;
  /* CopySlices (a write through a view, view_rebase.c): the in-place op's own
   * node, run on the view's part of the base's gradient; NULL otherwise. */
  ag_node *inner;
  /* CopySlices and AsStridedBackward: where the view lies in its base (owned). */
  struct ag_view_geom *geom;

  /* State of the backward run in progress (see backward.c). */
  bool in_run;
  uint64_t run_id;     /* which run (a custom backward may start another one) */
  int64_t deps;        /* edges from unfinished nodes of the run */
  lt_tensor *buffer0;  /* summed gradient of output 0 */
  lt_tensor **buffers; /* nout summed gradients (&buffer0 when nout is 1) */
  /* Inputs (bit i) whose gradient the formula added into the leaf's .grad
   * itself (ag_grad_target), so that nothing is left to accumulate. */
  uint32_t added_in_place;
  ag_node *free_next;  /* worklist link while freeing */

  int nin;
  ag_input inputs[];
};

/* A tensor's autograd state. A tensor may have one without a grad_fn: a view
 * made in grad mode (it knows its base, so that an in-place write through it
 * can be recorded on the base), or a base that such views know. */
struct lt_autograd_meta {
  lt_autograd_meta_header header; /* first: how core frees it (ag_meta_free) */
  ag_node *grad_fn;
  int output_nr;
  lt_tensor *owner; /* the tensor this meta belongs to (not a reference) */
  /* A view: the root tensor (not itself a view) whose storage it shows, one
   * reference (PyTorch's DifferentiableViewMeta keeps its base the same way). */
  lt_tensor *base;
  /* A base: its live views that know it, linked through view_next/view_prev
   * (no references: a view unlinks itself when freed; it outlives nothing
   * since it holds its base). */
  struct lt_autograd_meta *views;
  struct lt_autograd_meta *view_next, *view_prev;
  /* Post-accumulate-grad hooks of a leaf (grad_hooks.c), in registration
   * order; removed ones are tombstones (fn NULL) while some are running. */
  struct ag_hook *hooks;
  int nhooks, hooks_cap;
  int hooks_running;
};

/* t's grad_fn (NULL for a leaf, with or without autograd metadata). */
static inline ag_node *ag_history(const lt_tensor *t) {
  return t->autograd ? t->autograd->grad_fn : NULL;
}

/* ---- nodes ---- */
/* A node with nin inputs (edges unset) and one output; refcount 1 held by the
 * caller. NULL when out of memory (the error is set). */
ag_node *ag_node_new(const char *name, ag_backward_fn backward, int nin);
void ag_node_retain(ag_node *n);
/* Drops a reference; frees the node (and, iteratively, input nodes that lose
 * their last reference) at zero. Returns the bytes the freed saved tensors
 * gave back to the allocator. */
size_t ag_node_release(ag_node *n);
/* Sets input i from tensor t (NULL allowed: no gradient): the edge when t
 * requires grad, and t's geometry. */
void ag_node_set_input(ag_node *n, int i, const lt_tensor *t);
/* Does input i take a gradient? */
static inline bool ag_needs(const ag_node *n, int i) {
  return n->inputs[i].edge.node != NULL || n->inputs[i].edge.leaf != NULL;
}
/* Saves t in slot for backward, at its current storage version: a later
 * in-place write to t makes that backward fail. */
lt_status ag_node_save(ag_node *n, int slot, const lt_tensor *t);
static inline const lt_tensor *ag_saved_tensor(const ag_node *n, int slot) {
  return n->saved[slot].t;
}
/* Frees the saved tensors (and a custom node's user data); returns the bytes
 * given back. */
size_t ag_node_release_saved(ag_node *n);
/* Makes n the grad_fn of t (output output_nr): t becomes a non-leaf that
 * requires grad; its previous grad_fn, if any, is dropped. */
lt_status ag_node_attach(ag_node *n, lt_tensor *t, int output_nr);

/* ---- tensors ---- */
/* t's metadata, created (empty, owner t) when missing; NULL when out of
 * memory (the error is set, naming who). */
struct lt_autograd_meta *ag_meta_get(lt_tensor *t, const char *who);
/* Frees t's metadata and drops its grad_fn; returns the bytes given back. */
size_t ag_meta_free(struct lt_autograd_meta *m);
/* Grad mode is on and one of the n tensors (NULLs skipped) requires grad. */
bool ag_any_requires_grad(const lt_tensor *const *ts, int n);

/* ---- post-accumulate-grad hooks (grad_hooks.c) ---- */
static inline bool ag_has_hooks(const lt_tensor *t) { return t->autograd && t->autograd->nhooks > 0; }
/* Frees m's hooks (free_ud of each). */
void ag_hooks_free(struct lt_autograd_meta *m);
/* Runs leaf's hooks in order; the first failure stops them. */
lt_status ag_run_hooks(lt_tensor *leaf);

/* The leaves with hooks that one backward reaches, each with the number of
 * edges into it not yet run: its hooks fire when that reaches 0 (once every
 * node that gives it a gradient has run, as PyTorch's AccumulateGrad node runs
 * after all its inputs), provided it received a gradient. */
typedef struct ag_leaf_wait {
  lt_tensor *leaf;
  int64_t pending;
  bool got;
} ag_leaf_wait;
typedef struct ag_leaf_waits {
  ag_leaf_wait *v;
  int n, cap;
} ag_leaf_waits;
/* One more edge into leaf (which has hooks). */
lt_status ag_leaf_waits_add(ag_leaf_waits *w, lt_tensor *leaf);
/* Sorts and merges the entries (after the last add). */
void ag_leaf_waits_seal(ag_leaf_waits *w);
/* An edge into leaf has run (got: it brought a gradient); fires the hooks
 * when it was the last. A leaf not in w is ignored. */
lt_status ag_leaf_waits_done(ag_leaf_waits *w, lt_tensor *leaf, bool got);

/* ---- views and in-place writes through them (view_rebase.c) ---- */
/* After an in-place op attached its node to t: when t is a view that knows
 * its base, records the write on the base (CopySlices) and gives every view
 * of the base a history over the new one; when t is a base with views, gives
 * them a history over t's new one. */
lt_status ag_after_inplace(lt_tensor *t);
/* Gives every view of base a history over base's current one (AsStrided). */
lt_status ag_regenerate_views(lt_tensor *base);
/* After view op made r from t (grad mode on): r remembers the root base. */
lt_status ag_view_track(const lt_tensor *t, lt_tensor *r);
/* Before an in-place write with grad to a view that knows its base: refuses
 * a view (or base) whose elements overlap. */
lt_status ag_view_check_rebase(const char *op, const lt_tensor *view);
/* Forgets t's base (t stops being a view for autograd). */
size_t ag_view_untrack(struct lt_autograd_meta *m);
/* Backward's check of a node's saved tensors (versions, already freed). */
lt_status ag_check_saved(const ag_node *n);
/* For a formula: the .grad of input i when that input is a leaf whose
 * existing gradient the new one would be added into unchanged in shape,
 * dtype and device (so the formula may add into it in place and set bit i of
 * n->added_in_place instead of returning grad_in[i]); NULL otherwise. */
lt_tensor *ag_grad_target(const ag_node *n, int i);

#endif
