/* Nodes whose backward is supplied by the caller (lt.autograd.Function). */
#include <stdlib.h>
#include <string.h>

#include "autograd/node.h"

static lt_status custom_backward(ag_node *n, lt_tensor *const *grad_out, lt_tensor **grad_in) {
  ag_custom *c = n->custom;
  lt_status st = c->fn(c->ud, grad_out, n->nout, grad_in, n->nin);
  if (st != LT_OK && lt_last_error()[0] == '\0')
    return lt_error(st, "backward: %s failed", n->name);
  return st;
}

/* The checks of lt_autograd_custom's arguments. */
static lt_status check_args(lt_tensor **outputs, int nout, lt_tensor *const *inputs, int nin,
                            const char *name, lt_custom_backward_fn fn) {
  const char *who = name ? name : "custom function";
  if (!fn) return lt_error(LT_ERR_ARG, "%s: no backward function", who);
  if (nout < 1 || !outputs) return lt_error(LT_ERR_ARG, "%s: expected at least one output", who);
  if (nin < 0 || (nin > 0 && !inputs)) return lt_error(LT_ERR_ARG, "%s: bad list of inputs", who);
  for (int o = 0; o < nout; o++) {
    if (!outputs[o] || !outputs[o]->storage || outputs[o]->refcount <= 0)
      return lt_error(LT_ERR_FREED, "%s: output %d is not a live tensor", who, o + 1);
    for (int i = 0; i < nin; i++)
      if (outputs[o] == inputs[i])
        return lt_error(LT_ERR_ARG,
                        "%s: output %d is input %d itself; return a new tensor (e.g. a clone)",
                        who, o + 1, i + 1);
  }
  for (int i = 0; i < nin; i++)
    if (inputs[i] && (!inputs[i]->storage || inputs[i]->refcount <= 0))
      return lt_error(LT_ERR_FREED, "%s: input %d is a freed tensor", who, i + 1);
  return LT_OK;
}

static ag_custom *custom_state(const char *name, int nout, lt_tensor **outputs) {
  ag_custom *c = calloc(1, sizeof *c);
  if (!c) return NULL;
  c->name = malloc(strlen(name) + 1);
  c->outs = calloc((size_t)nout, sizeof *c->outs);
  if (!c->name || !c->outs) {
    free(c->name);
    free(c->outs);
    free(c);
    return NULL;
  }
  strcpy(c->name, name);
  c->nout = nout;
  for (int o = 0; o < nout; o++) {
    memcpy(c->outs[o].shape, outputs[o]->shape, sizeof c->outs[o].shape);
    c->outs[o].ndim = outputs[o]->ndim;
    c->outs[o].dtype = outputs[o]->dtype;
    c->outs[o].device = outputs[o]->storage->device;
  }
  return c;
}

lt_status lt_autograd_custom(lt_tensor **outputs, int nout, lt_tensor *const *inputs, int nin,
                             const char *name, lt_custom_backward_fn fn, void *ud,
                             void (*free_ud)(void *)) {
  lt_status st = check_args(outputs, nout, inputs, nin, name, fn);
  if (st != LT_OK || !ag_any_requires_grad((const lt_tensor *const *)inputs, nin)) {
    if (free_ud) free_ud(ud);
    return st;
  }
  if (!name) name = "CustomBackward";
  ag_custom *c = custom_state(name, nout, outputs);
  ag_node *n = c ? ag_node_new(c->name, custom_backward, nin) : NULL;
  if (!n) {
    if (c) {
      free(c->name);
      free(c->outs);
      free(c);
    }
    if (free_ud) free_ud(ud);
    return lt_error(LT_ERR_OOM, "%s: out of host memory for an autograd node", name);
  }
  c->fn = fn;
  c->ud = ud;
  c->free_ud = free_ud;
  n->custom = c;
  n->nout = nout;
  n->has_saved = true; /* ud is the saved state: a second backward needs retain_graph */
  for (int i = 0; i < nin; i++) ag_node_set_input(n, i, inputs[i]);
  for (int o = 0; o < nout && st == LT_OK; o++)
    if (lt_dtype_is_floating(outputs[o]->dtype)) st = ag_node_attach(n, outputs[o], o);
  ag_node_release(n); /* the outputs hold it now (or nothing does: then ud is freed) */
  return st;
}
