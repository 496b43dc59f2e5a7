/* Post-accumulate-grad hooks (PyTorch's register_post_accumulate_grad_hook):
 * the per-leaf list, and the per-backward count of edges still to run into
 * each hooked leaf, so that a leaf used by several nodes fires once, after
 * its last contribution, as PyTorch's single AccumulateGrad node does. */
#include <stdlib.h>

#include "autograd/node.h"

typedef struct ag_hook {
  lt_grad_hook_fn fn; /* NULL: removed while hooks were running */
  void *ud;
  void (*free_ud)(void *);
  uint64_t id;
} ag_hook;

static uint64_t next_hook_id = 1;

static void drop_hook(ag_hook *h) {
  void (*free_ud)(void *) = h->free_ud;
  void *ud = h->ud;
  h->fn = NULL;
  h->free_ud = NULL;
  h->ud = NULL;
  if (free_ud) free_ud(ud);
}

/* Squeezes out tombstones; only when no hook of m is running. */
static void compact(struct lt_autograd_meta *m) {
  int kept = 0;
  for (int i = 0; i < m->nhooks; i++)
    if (m->hooks[i].fn) m->hooks[kept++] = m->hooks[i];
  m->nhooks = kept;
}

static lt_status push_hook(struct lt_autograd_meta *m, ag_hook h, const char *who) {
  if (m->nhooks == m->hooks_cap) {
    int cap = m->hooks_cap ? 2 * m->hooks_cap : 4;
    ag_hook *v = realloc(m->hooks, (size_t)cap * sizeof *v);
    if (!v) return lt_error(LT_ERR_OOM, "%s: out of host memory for hooks", who);
    m->hooks = v;
    m->hooks_cap = cap;
  }
  m->hooks[m->nhooks++] = h;
  return LT_OK;
}

lt_status lt_autograd_add_post_accumulate_hook(lt_tensor *t, lt_grad_hook_fn fn, void *ud,
                                               void (*free_ud)(void *), uint64_t *id) {
  static const char who[] = "register_post_accumulate_grad_hook";
  lt_status st = LT_OK;
  if (!t || !fn || !id) st = lt_error(LT_ERR_ARG, "%s: expected a tensor and a function", who);
  else if (!t->storage || t->refcount <= 0)
    st = lt_error(LT_ERR_FREED, "%s: attempt to use a freed tensor", who);
  else if (!lt_is_leaf(t))
    st = lt_error(LT_ERR_AUTOGRAD,
                  "%s: post accumulate grad hooks cannot be registered on non-leaf tensors", who);
  else if (!t->requires_grad)
    st = lt_error(LT_ERR_AUTOGRAD,
                  "%s: cannot register a hook on a tensor that doesn't require gradient", who);
  struct lt_autograd_meta *m = st == LT_OK ? ag_meta_get(t, who) : NULL;
  if (st == LT_OK && !m) st = LT_ERR_OOM;
  if (st == LT_OK) {
    if (!m->hooks_running) compact(m);
    st = push_hook(m, (ag_hook){fn, ud, free_ud, next_hook_id}, who);
  }
  if (st != LT_OK) { /* ud is ours either way */
    if (free_ud) free_ud(ud);
    return st;
  }
  *id = next_hook_id++;
  return LT_OK;
}

bool lt_autograd_remove_post_accumulate_hook(lt_tensor *t, uint64_t id) {
  struct lt_autograd_meta *m = t ? t->autograd : NULL;
  if (!m) return false;
  for (int i = 0; i < m->nhooks; i++) {
    if (m->hooks[i].fn && m->hooks[i].id == id) {
      drop_hook(&m->hooks[i]);
      if (!m->hooks_running) compact(m);
      return true;
    }
  }
  return false;
}

lt_status lt_autograd_move_hooks(lt_tensor *from, lt_tensor *to) {
  static const char who[] = "set_data";
  if (!from || !to || from == to || !ag_has_hooks(from)) return LT_OK;
  struct lt_autograd_meta *src = from->autograd;
  if (src->hooks_running)
    return lt_error(LT_ERR_AUTOGRAD, "%s: cannot swap a tensor's data inside one of its hooks", who);
  struct lt_autograd_meta *dst = ag_meta_get(to, who);
  if (!dst) return LT_ERR_OOM;
  compact(src);
  if (!dst->hooks_running) compact(dst);
  const int need = dst->nhooks + src->nhooks;
  if (need > dst->hooks_cap) { /* room first: the move is all or nothing */
    ag_hook *v = realloc(dst->hooks, (size_t)need * sizeof *v);
    if (!v) return lt_error(LT_ERR_OOM, "%s: out of host memory for hooks", who);
    dst->hooks = v;
    dst->hooks_cap = need;
  }
  for (int i = 0; i < src->nhooks; i++) dst->hooks[dst->nhooks++] = src->hooks[i];
  src->nhooks = 0; /* moved, not dropped: their ud now belongs to dst */
  return LT_OK;
}

void ag_hooks_free(struct lt_autograd_meta *m) {
  for (int i = 0; i < m->nhooks; i++)
    if (m->hooks[i].fn) drop_hook(&m->hooks[i]);
  free(m->hooks);
  m->hooks = NULL;
  m->nhooks = m->hooks_cap = 0;
}

lt_status ag_run_hooks(lt_tensor *leaf) {
  struct lt_autograd_meta *m = leaf->autograd;
  if (!m || m->nhooks == 0) return LT_OK;
  /* A hook may drop the last handle of leaf: keep it (and its hooks) alive
   * until the loop is done. Hooks added by a hook wait for the next backward. */
  lt_tensor_retain(leaf);
  m->hooks_running++;
  lt_status st = LT_OK;
  const int n = m->nhooks;
  for (int i = 0; i < n && st == LT_OK; i++) {
    ag_hook h = m->hooks[i]; /* a copy: a hook may grow the array */
    if (h.fn) st = h.fn(h.ud, leaf);
  }
  if (--m->hooks_running == 0) compact(m);
  lt_tensor_release(leaf);
  return st;
}

/* ---- the per-backward counts ---- */

lt_status ag_leaf_waits_add(ag_leaf_waits *w, lt_tensor *leaf) {
  if (w->n == w->cap) {
    int cap = w->cap ? 2 * w->cap : 16;
    ag_leaf_wait *v = realloc(w->v, (size_t)cap * sizeof *v);
    if (!v) return lt_error(LT_ERR_OOM, "backward: out of host memory for the graph");
    w->v = v;
    w->cap = cap;
  }
  w->v[w->n++] = (ag_leaf_wait){leaf, 1, false};
  return LT_OK;
}

static int by_leaf(const void *a, const void *b) {
  const lt_tensor *x = ((const ag_leaf_wait *)a)->leaf, *y = ((const ag_leaf_wait *)b)->leaf;
  return x < y ? -1 : x > y;
}

void ag_leaf_waits_seal(ag_leaf_waits *w) {
  if (w->n < 2) return;
  qsort(w->v, (size_t)w->n, sizeof *w->v, by_leaf);
  int kept = 0;
  for (int i = 0; i < w->n; i++) {
    if (kept > 0 && w->v[kept - 1].leaf == w->v[i].leaf)
      w->v[kept - 1].pending += w->v[i].pending;
    else
      w->v[kept++] = w->v[i];
  }
  w->n = kept;
}

lt_status ag_leaf_waits_done(ag_leaf_waits *w, lt_tensor *leaf, bool got) {
  if (w->n == 0) return LT_OK;
  ag_leaf_wait key = {leaf, 0, false};
  ag_leaf_wait *e = bsearch(&key, w->v, (size_t)w->n, sizeof *w->v, by_leaf);
  if (!e) return LT_OK;
  e->got = e->got || got;
  if (--e->pending > 0 || !e->got) return LT_OK;
  return ag_run_hooks(leaf);
}
