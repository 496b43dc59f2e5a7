/* Which leaves a graph reaches: DistributedDataParallel's
 * find_unused_parameters marks the parameters a forward's outputs do not
 * depend on as ready at once, so their bucket is not waited for. */
#include <stdint.h>
#include <stdlib.h>

#include "autograd/node.h"

/* An open-addressing set of node pointers (power-of-two capacity). */
typedef struct node_set {
  ag_node **slots;
  size_t cap, n;
} node_set;

static size_t slot_of(const ag_node *p, size_t cap) {
  uint64_t h = (uint64_t)(uintptr_t)p * 0x9E3779B97F4A7C15u;
  return (size_t)(h >> 17) & (cap - 1);
}

/* Adds p; *added says whether it was new. */
static lt_status set_add(node_set *s, ag_node *p, bool *added) {
  if (2 * (s->n + 1) > s->cap) {
    size_t cap = s->cap ? 2 * s->cap : 64;
    ag_node **slots = calloc(cap, sizeof *slots);
    if (!slots) return lt_error(LT_ERR_OOM, "graph walk: out of host memory");
    for (size_t i = 0; i < s->cap; i++) {
      if (!s->slots[i]) continue;
      size_t j = slot_of(s->slots[i], cap);
      while (slots[j]) j = (j + 1) & (cap - 1);
      slots[j] = s->slots[i];
    }
    free(s->slots);
    s->slots = slots;
    s->cap = cap;
  }
  size_t j = slot_of(p, s->cap);
  while (s->slots[j] && s->slots[j] != p) j = (j + 1) & (s->cap - 1);
  *added = s->slots[j] == NULL;
  if (*added) {
    s->slots[j] = p;
    s->n++;
  }
  return LT_OK;
}

static void mark(lt_tensor *const *leaves, int nleaves, const lt_tensor *t, bool *reached) {
  for (int i = 0; i < nleaves; i++)
    if (leaves[i] == t) reached[i] = true;
}

lt_status lt_autograd_reaches(lt_tensor *const *roots, int nroots, lt_tensor *const *leaves,
                              int nleaves, bool *reached) {
  for (int i = 0; i < nleaves; i++) reached[i] = false;
  node_set seen = {0};
  ag_node **queue = NULL;
  size_t nq = 0, qcap = 0;
  lt_status st = LT_OK;
  for (int r = 0; r < nroots && st == LT_OK; r++) {
    ag_node *n = roots[r] ? ag_history(roots[r]) : NULL;
    if (!n) {
      if (roots[r]) mark(leaves, nleaves, roots[r], reached);
      continue;
    }
    bool added = false;
    st = set_add(&seen, n, &added);
    if (st == LT_OK && added) {
      if (nq == qcap) {
        qcap = qcap ? 2 * qcap : 64;
        ag_node **q = realloc(queue, qcap * sizeof *q);
        if (!q) { st = lt_error(LT_ERR_OOM, "graph walk: out of host memory"); break; }
        queue = q;
      }
      queue[nq++] = n;
    }
  }
  /* Leaves are found through edges: a parameter is reached when some node
   * of the graph accumulates into it (leaves are few next to nodes, so a
   * scan per leaf edge costs little). */
  for (size_t k = 0; k < nq && st == LT_OK; k++) {
    ag_node *x = queue[k];
    for (int i = 0; i < x->nin && st == LT_OK; i++) {
      const ag_edge *e = &x->inputs[i].edge;
      if (e->leaf) mark(leaves, nleaves, e->leaf, reached);
      if (!e->node) continue;
      bool added = false;
      st = set_add(&seen, e->node, &added);
      if (st != LT_OK || !added) continue;
      if (nq == qcap) {
        qcap = 2 * qcap;
        ag_node **q = realloc(queue, qcap * sizeof *q);
        if (!q) { st = lt_error(LT_ERR_OOM, "graph walk: out of host memory"); break; }
        queue = q;
      }
      queue[nq++] = e->node;
    }
  }
  free(queue);
  free(seen.slots);
  return st;
}
