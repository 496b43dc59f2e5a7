/* Helpers shared by the nn formulas (formulas_nn_*.c, formulas_index.c):
 * making a node over an op's inputs, saving what its backward takes and
 * attaching it to the result, each step skipped after a failure. */
#ifndef LT_AUTOGRAD_FORMULAS_NN_H
#define LT_AUTOGRAD_FORMULAS_NN_H

#include "autograd/node.h"
#include "autograd/record_nn.h"

/* A node over the nin inputs (NULL entries take no gradient), or NULL when
 * nothing is to be recorded: grad mode off, a result that is not floating, or
 * no input that requires grad. *st is set when the node cannot be made. */
static inline ag_node *ag_nn_node(const char *name, ag_backward_fn backward,
                                  const lt_tensor *const *ins, int nin, const lt_tensor *r,
                                  lt_status *st) {
  *st = LT_OK;
  if (!lt_dtype_is_floating(r->dtype) || !ag_any_requires_grad(ins, nin)) return NULL;
  ag_node *n = ag_node_new(name, backward, nin);
  if (!n) {
    *st = LT_ERR_OOM;
    return NULL;
  }
  for (int i = 0; i < nin; i++) ag_node_set_input(n, i, ins[i]);
  return n;
}

/* Saves t (NULL: nothing to save) in slot when st is still LT_OK. */
static inline lt_status ag_nn_save(ag_node *n, lt_status st, int slot, const lt_tensor *t) {
  if (st != LT_OK || !t) return st;
  return ag_node_save(n, slot, t);
}

/* Makes n r's grad_fn when st is LT_OK, and drops the maker's reference. */
static inline lt_status ag_nn_finish(ag_node *n, lt_status st, lt_tensor *r) {
  if (st == LT_OK) st = ag_node_attach(n, r, 0);
  ag_node_release(n);
  return st;
}

#endif
