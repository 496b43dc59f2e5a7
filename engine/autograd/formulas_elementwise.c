/* Gradients of elementwise ops: binary (tensor and scalar forms, in place or
 * not), unary, clamp and where. The formulas and what each saves follow
 * PyTorch's tools/autograd/derivatives.yaml; broadcasting is undone by the
 * engine (it sums each input's gradient down to the input's shape). */
#include <math.h>

#include "autograd/grad_calc.h"
#include "autograd/node.h"
#include "autograd/record.h"
#include "ops/op_table.h"

enum { SAVED_A = 0, SAVED_B = 1 };

/* ---- binary ---- */

static const char *binary_node_name(lt_binary_op op) {
  const ops_binary_row *row = ops_binary_row_of(op);
  return row ? row->node_name : "BinaryBackward";
}

/* The gradient of maximum/minimum for one side: all of g where that side
 * wins, half on ties (PyTorch splits ties evenly), none where it loses; a NaN
 * on either side gives both sides the whole gradient, as PyTorch. */
static lt_tensor *extremum_side(ag_calc *c, const lt_tensor *g, const lt_tensor *loses,
                                const lt_tensor *ties) {
  lt_tensor *half = ag_bin_s(c, LT_OP_MUL, g, 0.5);
  lt_tensor *shared = ag_where(c, ties, half, g);
  return ag_zero_where(c, loses, shared);
}

/* a op b (b NULL: the scalar s, on the left when scalar_first). */
static lt_status binary_backward(ag_node *n, lt_tensor *const *grad_out, lt_tensor **grad_in) {
  const lt_tensor *g = grad_out[0];
  const lt_tensor *a = ag_saved_tensor(n, SAVED_A), *b = ag_saved_tensor(n, SAVED_B);
  const bool scalar = n->p.flag[0], scalar_first = n->p.flag[1];
  const double s = n->p.s[0];
  const bool need_a = ag_needs(n, 0), need_b = !scalar && ag_needs(n, 1);
  if (n->p.op == LT_OP_FLOOR_DIVIDE) /* piecewise constant: PyTorch refuses too */
    return lt_error(LT_ERR_AUTOGRAD,
                    "backward: the derivative of floor_divide is not implemented (as in "
                    "PyTorch); detach() its inputs, or use div and floor");
  ag_calc c;
  ag_calc_init(&c);
  lt_tensor *ga = NULL, *gb = NULL;
  switch ((lt_binary_op)n->p.op) {
    case LT_OP_ADD:
      ga = need_a ? (lt_tensor *)g : NULL;
      gb = need_b ? (lt_tensor *)g : NULL;
      break;
    case LT_OP_SUB:
      if (need_a) ga = scalar && scalar_first ? ag_un(&c, LT_OP_NEG, g) : (lt_tensor *)g;
      if (need_b) gb = ag_un(&c, LT_OP_NEG, g);
      break;
    case LT_OP_MUL:
      if (scalar) {
        ga = ag_bin_s(&c, LT_OP_MUL, g, s);
      } else {
        if (need_a) ga = ag_bin(&c, LT_OP_MUL, g, b);
        if (need_b) gb = ag_bin(&c, LT_OP_MUL, g, a);
      }
      break;
    case LT_OP_DIV:
      if (scalar && !scalar_first) {
        ga = ag_bin_s(&c, LT_OP_DIV, g, s);
      } else if (scalar) { /* s / a: -g s / a^2 */
        lt_tensor *num = ag_bin_s(&c, LT_OP_MUL, g, s);
        ga = ag_un(&c, LT_OP_NEG, ag_bin(&c, LT_OP_DIV, num, ag_bin(&c, LT_OP_MUL, a, a)));
      } else {
        if (need_a) ga = ag_bin(&c, LT_OP_DIV, g, b);
        if (need_b) {
          lt_tensor *num = ag_bin(&c, LT_OP_MUL, g, a);
          gb = ag_un(&c, LT_OP_NEG, ag_bin(&c, LT_OP_DIV, num, ag_bin(&c, LT_OP_MUL, b, b)));
        }
      }
      break;
    case LT_OP_POW:
      if (scalar && !scalar_first) { /* a^s: s a^(s-1), zero for s = 0 */
        if (s == 0.0) {
          ga = ag_zeros_expanded(&c, a->shape, a->ndim, g->dtype, g->storage->device);
        } else {
          lt_tensor *p = ag_bin_s(&c, LT_OP_POW, a, s - 1.0);
          ga = ag_bin(&c, LT_OP_MUL, g, ag_bin_s(&c, LT_OP_MUL, p, s));
        }
      } else if (scalar) { /* s^a: s^a log s, zero where s = 0 and a >= 0 */
        lt_tensor *r = ag_s_bin(&c, LT_OP_POW, s, a);
        lt_tensor *d = ag_bin_s(&c, LT_OP_MUL, r, log(s));
        if (s == 0.0) d = ag_zero_where(&c, ag_bin_s(&c, LT_OP_GE, a, 0.0), d);
        ga = ag_bin(&c, LT_OP_MUL, g, d);
      } else {
        if (need_a) { /* b a^(b-1), zero where b = 0 */
          lt_tensor *p = ag_bin(&c, LT_OP_POW, a, ag_bin_s(&c, LT_OP_SUB, b, 1.0));
          lt_tensor *d = ag_bin(&c, LT_OP_MUL, g, ag_bin(&c, LT_OP_MUL, b, p));
          ga = ag_zero_where(&c, ag_bin_s(&c, LT_OP_EQ, b, 0.0), d);
        }
        if (need_b) { /* a^b log a, zero where a = 0 and b >= 0 */
          lt_tensor *r = ag_bin(&c, LT_OP_POW, a, b);
          lt_tensor *d = ag_bin(&c, LT_OP_MUL, r, ag_un(&c, LT_OP_LOG, a));
          lt_tensor *at_zero = ag_bin(&c, LT_OP_MUL, ag_bin_s(&c, LT_OP_EQ, a, 0.0),
                                      ag_bin_s(&c, LT_OP_GE, b, 0.0));
          gb = ag_bin(&c, LT_OP_MUL, g, ag_zero_where(&c, at_zero, d));
        }
      }
      break;
    case LT_OP_MAXIMUM:
    case LT_OP_MINIMUM: {
      const bool is_max = n->p.op == LT_OP_MAXIMUM;
      lt_tensor *below = scalar ? ag_bin_s(&c, LT_OP_LT, a, s) : ag_bin(&c, LT_OP_LT, a, b);
      lt_tensor *above = scalar ? ag_bin_s(&c, LT_OP_GT, a, s) : ag_bin(&c, LT_OP_GT, a, b);
      lt_tensor *ties = scalar ? ag_bin_s(&c, LT_OP_EQ, a, s) : ag_bin(&c, LT_OP_EQ, a, b);
      if (need_a) ga = extremum_side(&c, g, is_max ? below : above, ties);
      if (need_b) gb = extremum_side(&c, g, is_max ? above : below, ties);
      break;
    }
    case LT_OP_REMAINDER: /* a - floor(a / b) b: 1 for a, -floor(a / b) for b */
      if (scalar && scalar_first) { /* s % a, which PyTorch does not differentiate */
        ga = ag_bin(&c, LT_OP_MUL, g, ag_un(&c, LT_OP_NEG, ag_s_bin(&c, LT_OP_FLOOR_DIVIDE, s, a)));
      } else {
        ga = need_a ? (lt_tensor *)g : NULL;
        if (need_b)
          gb = ag_bin(&c, LT_OP_MUL, g, ag_un(&c, LT_OP_NEG, ag_bin(&c, LT_OP_FLOOR_DIVIDE, a, b)));
      }
      break;
    case LT_OP_RELU_GRAD: /* ReLU's double backward: the same mask for a, flat in b */
      if (need_a) ga = ag_bin(&c, LT_OP_RELU_GRAD, g, b);
      if (need_b) gb = ag_zeros_expanded(&c, b->shape, b->ndim, g->dtype, g->storage->device);
      break;
    case LT_OP_FLOOR_DIVIDE: /* refused above */
      break;
    case LT_OP_EQ: case LT_OP_NE: case LT_OP_LT: case LT_OP_LE: case LT_OP_GT: case LT_OP_GE:
      break; /* bool results: never recorded */
    case LT_NBINARY:
    default:
      ag_calc_end(&c);
      return lt_error(LT_ERR_INTERNAL, "backward: no formula for binary op %s",
                      lt_binary_op_name((lt_binary_op)n->p.op));
  }
  grad_in[0] = ag_out(&c, ga);
  if (!scalar) grad_in[1] = ag_out(&c, gb);
  return ag_calc_end(&c);
}

/* Which operands the formula of op needs (PyTorch's choices). */
static void binary_saves(lt_binary_op op, bool need_a, bool need_b, bool scalar,
                         bool scalar_first, bool *keep_a, bool *keep_b) {
  *keep_a = *keep_b = false;
  switch (op) {
    case LT_OP_MUL: *keep_a = need_b, *keep_b = need_a; break;
    case LT_OP_DIV: *keep_a = need_b || (scalar && scalar_first), *keep_b = need_a || need_b; break;
    case LT_OP_POW: case LT_OP_MAXIMUM: case LT_OP_MINIMUM: *keep_a = true, *keep_b = !scalar; break;
    case LT_OP_REMAINDER: *keep_a = need_b || (scalar && scalar_first), *keep_b = need_b; break;
    case LT_OP_RELU_GRAD: *keep_b = need_a || need_b; break;
    case LT_OP_ADD: case LT_OP_SUB: case LT_OP_FLOOR_DIVIDE: case LT_OP_EQ: case LT_OP_NE:
    case LT_OP_LT: case LT_OP_LE: case LT_OP_GT: case LT_OP_GE:
      break; /* their formulas read no operand */
    case LT_NBINARY:
    default: /* an op this switch does not know: keep both, its formula may read them */
      *keep_a = true, *keep_b = true;
      break;
  }
  *keep_b = *keep_b && !scalar;
}

bool ag_binary_needs_old(lt_binary_op op, const lt_tensor *a, const lt_tensor *b) {
  bool keep_a, keep_b;
  const bool need_b = b && b->requires_grad && lt_dtype_is_floating(b->dtype);
  binary_saves(op, a->requires_grad, need_b, b == NULL, false, &keep_a, &keep_b);
  return keep_a || (keep_b && b == a); /* a.mul_(a) saves a as b too */
}

/* Saves what the formula of op needs. a_saved: a itself, or for an
 * in-place op the copy of a's values from before the write. */
static lt_status save_binary(ag_node *n, lt_binary_op op, const lt_tensor *a_saved,
                             const lt_tensor *b_saved, bool scalar_first) {
  bool keep_a, keep_b;
  binary_saves(op, ag_needs(n, 0), b_saved && ag_needs(n, 1), b_saved == NULL, scalar_first,
               &keep_a, &keep_b);
  if (keep_a) LT_TRY(ag_node_save(n, SAVED_A, a_saved));
  if (keep_b) LT_TRY(ag_node_save(n, SAVED_B, b_saved));
  return LT_OK;
}

/* One node for a op b / a op s onto target (the result, or a itself when in
 * place: then input 0 is a's history before the write, and old the copy of
 * a's values from before it, when the formula needs them). */
static lt_status record_binary(lt_binary_op op, const lt_tensor *a, const lt_tensor *b, double s,
                               bool scalar_first, lt_tensor *target, const lt_tensor *old) {
  const lt_tensor *ins[2] = {a, b};
  if (!lt_dtype_is_floating(target->dtype) || !ag_any_requires_grad(ins, 2)) return LT_OK;
  ag_node *n = ag_node_new(binary_node_name(op), binary_backward, b ? 2 : 1);
  if (!n) return LT_ERR_OOM;
  n->p.op = op;
  n->p.flag[0] = b == NULL;
  n->p.flag[1] = scalar_first;
  n->p.s[0] = s;
  ag_node_set_input(n, 0, a);
  if (b) ag_node_set_input(n, 1, b);
  const lt_tensor *a_saved = old ? old : a;
  const lt_tensor *b_saved = old && b == a ? old : b;
  lt_status st = save_binary(n, op, a_saved, b_saved, scalar_first);
  if (st == LT_OK) st = ag_node_attach(n, target, 0);
  ag_node_release(n);
  return st;
}

lt_status ag_record_binary(lt_binary_op op, const lt_tensor *a, const lt_tensor *b, lt_tensor *r) {
  return record_binary(op, a, b, 0.0, false, r, NULL);
}

lt_status ag_record_binary_scalar(lt_binary_op op, const lt_tensor *a, double s,
                                  bool scalar_first, lt_tensor *r) {
  return record_binary(op, a, NULL, s, scalar_first, r, NULL);
}

lt_status ag_record_binary_(lt_binary_op op, lt_tensor *a, const lt_tensor *b,
                            const lt_tensor *old) {
  return record_binary(op, a, b, 0.0, false, a, old);
}

lt_status ag_record_binary_scalar_(lt_binary_op op, lt_tensor *a, double s, const lt_tensor *old) {
  return record_binary(op, a, NULL, s, false, a, old);
}

/* ---- unary ---- */

static const char *unary_node_name(lt_unary_op op) {
  const ops_unary_row *row = ops_unary_row_of(op);
  return row ? row->node_name : "UnaryBackward";
}

/* What the backward keeps: the op's row (lt/ops.h). */
static ops_saves unary_saves(lt_unary_op op) {
  const ops_unary_row *row = ops_unary_row_of(op);
  return row ? row->saves : OPS_SAVES_NOTHING;
}

static lt_status unary_backward(ag_node *n, lt_tensor *const *grad_out, lt_tensor **grad_in) {
  const lt_tensor *g = grad_out[0];
  const lt_tensor *x = ag_saved_tensor(n, 0); /* the input or the result (y) */
  const lt_tensor *y = x;
  const ag_input *in = &n->inputs[0];
  ag_calc c;
  ag_calc_init(&c);
  lt_tensor *gi = NULL;
  switch ((lt_unary_op)n->p.op) {
    case LT_OP_NEG: gi = ag_un(&c, LT_OP_NEG, g); break;
    case LT_OP_EXP: gi = ag_bin(&c, LT_OP_MUL, g, y); break;
    case LT_OP_LOG: gi = ag_bin(&c, LT_OP_DIV, g, x); break;
    case LT_OP_SQRT: gi = ag_bin(&c, LT_OP_DIV, g, ag_bin_s(&c, LT_OP_MUL, y, 2.0)); break;
    case LT_OP_RSQRT: { /* -y^3 / 2 */
      lt_tensor *y3 = ag_bin(&c, LT_OP_MUL, ag_bin(&c, LT_OP_MUL, y, y), y);
      gi = ag_bin(&c, LT_OP_MUL, g, ag_bin_s(&c, LT_OP_MUL, y3, -0.5));
      break;
    }
    case LT_OP_ABS: gi = ag_bin(&c, LT_OP_MUL, g, ag_un(&c, LT_OP_SIGN, x)); break;
    case LT_OP_RELU: gi = ag_bin(&c, LT_OP_RELU_GRAD, g, y); break;
    case LT_OP_SIGMOID: { /* y (1 - y) */
      lt_tensor *d = ag_bin(&c, LT_OP_MUL, y, ag_s_bin(&c, LT_OP_SUB, 1.0, y));
      gi = ag_bin(&c, LT_OP_MUL, g, d);
      break;
    }
    case LT_OP_TANH: { /* 1 - y^2 */
      lt_tensor *d = ag_s_bin(&c, LT_OP_SUB, 1.0, ag_bin(&c, LT_OP_MUL, y, y));
      gi = ag_bin(&c, LT_OP_MUL, g, d);
      break;
    }
    case LT_OP_SIN: gi = ag_bin(&c, LT_OP_MUL, g, ag_un(&c, LT_OP_COS, x)); break;
    case LT_OP_COS:
      gi = ag_un(&c, LT_OP_NEG, ag_bin(&c, LT_OP_MUL, g, ag_un(&c, LT_OP_SIN, x)));
      break;
    case LT_OP_RECIPROCAL: /* -y^2 */
      gi = ag_un(&c, LT_OP_NEG, ag_bin(&c, LT_OP_MUL, g, ag_bin(&c, LT_OP_MUL, y, y)));
      break;
    case LT_OP_SQUARE: gi = ag_bin(&c, LT_OP_MUL, g, ag_bin_s(&c, LT_OP_MUL, x, 2.0)); break;
    case LT_OP_ERF: { /* 2 / sqrt(pi) exp(-x^2) */
      lt_tensor *d = ag_un(&c, LT_OP_EXP, ag_un(&c, LT_OP_NEG, ag_bin(&c, LT_OP_MUL, x, x)));
      gi = ag_bin(&c, LT_OP_MUL, g, ag_bin_s(&c, LT_OP_MUL, d, 1.1283791670955126));
      break;
    }
    case LT_OP_SIGN: case LT_OP_FLOOR: case LT_OP_CEIL: case LT_OP_ROUND: case LT_OP_LOGICAL_NOT:
      /* flat almost everywhere */
      gi = ag_zeros_expanded(&c, in->shape, in->ndim, g->dtype, g->storage->device);
      break;
    case LT_NUNARY:
    default:
      ag_calc_end(&c);
      return lt_error(LT_ERR_INTERNAL, "backward: no formula for unary op %s",
                      lt_unary_op_name((lt_unary_op)n->p.op));
  }
  grad_in[0] = ag_out(&c, gi);
  return ag_calc_end(&c);
}

bool ag_unary_needs_old(lt_unary_op op) { return unary_saves(op) == OPS_SAVES_INPUT; }

static lt_status record_unary(lt_unary_op op, const lt_tensor *a, lt_tensor *target,
                              const lt_tensor *old) {
  if (!lt_dtype_is_floating(target->dtype) || !ag_any_requires_grad(&a, 1)) return LT_OK;
  ag_node *n = ag_node_new(unary_node_name(op), unary_backward, 1);
  if (!n) return LT_ERR_OOM;
  n->p.op = op;
  ag_node_set_input(n, 0, a);
  lt_status st = LT_OK;
  switch (unary_saves(op)) {
    case OPS_SAVES_RESULT: st = ag_node_save(n, 0, target); break;
    case OPS_SAVES_INPUT: st = ag_node_save(n, 0, old ? old : a); break;
    case OPS_SAVES_NOTHING: break;
  }
  if (st == LT_OK) st = ag_node_attach(n, target, 0);
  ag_node_release(n);
  return st;
}

lt_status ag_record_unary(lt_unary_op op, const lt_tensor *a, lt_tensor *r) {
  return record_unary(op, a, r, NULL);
}

lt_status ag_record_unary_(lt_unary_op op, lt_tensor *a, const lt_tensor *old) {
  return record_unary(op, a, a, old);
}

/* ---- clamp ---- */

/* The gradient passes where lo <= x <= hi (bounds included, as PyTorch). */
static lt_status clamp_backward(ag_node *n, lt_tensor *const *grad_out, lt_tensor **grad_in) {
  const lt_tensor *x = ag_saved_tensor(n, 0);
  ag_calc c;
  ag_calc_init(&c);
  lt_tensor *inside = NULL;
  if (n->p.flag[0]) inside = ag_bin_s(&c, LT_OP_GE, x, n->p.s[0]);
  if (n->p.flag[1]) {
    lt_tensor *below_hi = ag_bin_s(&c, LT_OP_LE, x, n->p.s[1]);
    inside = inside ? ag_bin(&c, LT_OP_MUL, inside, below_hi) : below_hi;
  }
  grad_in[0] = ag_out(&c, ag_keep_where(&c, inside, grad_out[0]));
  return ag_calc_end(&c);
}

static lt_status record_clamp(const lt_tensor *a, bool has_lo, double lo, bool has_hi, double hi,
                              lt_tensor *target, const lt_tensor *old) {
  if (!lt_dtype_is_floating(target->dtype) || !ag_any_requires_grad(&a, 1)) return LT_OK;
  ag_node *n = ag_node_new("ClampBackward", clamp_backward, 1);
  if (!n) return LT_ERR_OOM;
  n->p.flag[0] = has_lo, n->p.s[0] = lo;
  n->p.flag[1] = has_hi, n->p.s[1] = hi;
  ag_node_set_input(n, 0, a);
  lt_status st = ag_node_save(n, 0, old ? old : a);
  if (st == LT_OK) st = ag_node_attach(n, target, 0);
  ag_node_release(n);
  return st;
}

lt_status ag_record_clamp(const lt_tensor *a, bool has_lo, double lo, bool has_hi, double hi,
                          lt_tensor *r) {
  return record_clamp(a, has_lo, lo, has_hi, hi, r, NULL);
}

lt_status ag_record_clamp_(lt_tensor *a, bool has_lo, double lo, bool has_hi, double hi,
                           const lt_tensor *old) {
  return record_clamp(a, has_lo, lo, has_hi, hi, a, old);
}

/* ---- where ---- */

static lt_status where_backward(ag_node *n, lt_tensor *const *grad_out, lt_tensor **grad_in) {
  const lt_tensor *cond = ag_saved_tensor(n, 0);
  ag_calc c;
  ag_calc_init(&c);
  if (ag_needs(n, 1)) grad_in[1] = ag_out(&c, ag_keep_where(&c, cond, grad_out[0]));
  if (ag_needs(n, 2)) grad_in[2] = ag_out(&c, ag_zero_where(&c, cond, grad_out[0]));
  return ag_calc_end(&c);
}

lt_status ag_record_where(const lt_tensor *cond, const lt_tensor *a, const lt_tensor *b,
                          lt_tensor *r) {
  const lt_tensor *ins[2] = {a, b};
  if (!lt_dtype_is_floating(r->dtype) || !ag_any_requires_grad(ins, 2)) return LT_OK;
  ag_node *n = ag_node_new("WhereBackward", where_backward, 3);
  if (!n) return LT_ERR_OOM;
  ag_node_set_input(n, 0, NULL); /* the condition takes no gradient */
  ag_node_set_input(n, 1, a);
  ag_node_set_input(n, 2, b);
  lt_status st = ag_node_save(n, 0, cond);
  if (st == LT_OK) st = ag_node_attach(n, r, 0);
  ag_node_release(n);
  return st;
}
