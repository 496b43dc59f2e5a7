/* Gradient of matmul in each of torch.matmul's cases. With g the output's
 * gradient: d/da = g b^T and d/db = a^T g, where a 1-D operand was a row
 * (left) or a column (right) whose dim the output dropped; broadcast batch
 * dims are summed away by the engine. */
#include "autograd/grad_calc.h"
#include "autograd/node.h"
#include "autograd/record.h"

enum { SAVED_A = 0, SAVED_B = 1 };

static lt_tensor *matrix_t(ag_calc *c, const lt_tensor *m) {
  return ag_transpose(c, m, m->ndim - 2, m->ndim - 1);
}

static lt_status matmul_backward(ag_node *n, lt_tensor *const *grad_out, lt_tensor **grad_in) {
  const lt_tensor *g = grad_out[0];
  const lt_tensor *a = ag_saved_tensor(n, SAVED_A), *b = ag_saved_tensor(n, SAVED_B);
  const int na = n->inputs[0].ndim, nb = n->inputs[1].ndim;
  const bool need_a = ag_needs(n, 0), need_b = ag_needs(n, 1);
  ag_calc c;
  ag_calc_init(&c);
  lt_tensor *ga = NULL, *gb = NULL;
  if (na == 1 && nb == 1) { /* dot: g is 0-dim */
    if (need_a) ga = ag_bin(&c, LT_OP_MUL, g, b);
    if (need_b) gb = ag_bin(&c, LT_OP_MUL, g, a);
  } else if (na == 1) { /* [k] @ [..., k, m] -> [..., m]: a is the row [1, k] */
    lt_tensor *g_row = ag_unsqueeze(&c, g, g->ndim - 1);                 /* [..., 1, m] */
    if (need_a) ga = ag_matmul(&c, g_row, matrix_t(&c, b));              /* [..., 1, k] */
    if (need_b) gb = ag_matmul(&c, ag_unsqueeze(&c, a, 1), g_row);       /* [..., k, m] */
  } else if (nb == 1) { /* [..., n, k] @ [k] -> [..., n]: b is the column [k, 1] */
    lt_tensor *g_col = ag_unsqueeze(&c, g, g->ndim);                     /* [..., n, 1] */
    if (need_a) ga = ag_matmul(&c, g_col, ag_unsqueeze(&c, b, 0));       /* [..., n, k] */
    if (need_b) {
      lt_tensor *col = ag_matmul(&c, matrix_t(&c, a), g_col);            /* [..., k, 1] */
      gb = c.st == LT_OK ? ag_squeeze(&c, col, col->ndim - 1) : NULL;    /* [..., k] */
    }
  } else {
    if (need_a) ga = ag_matmul(&c, g, matrix_t(&c, b));
    if (need_b) gb = ag_matmul(&c, matrix_t(&c, a), g);
  }
  grad_in[0] = ag_out(&c, ga);
  grad_in[1] = ag_out(&c, gb);
  return ag_calc_end(&c);
}

static const char *matmul_node_name(const lt_tensor *a, const lt_tensor *b) {
  if (a->ndim == 1 && b->ndim == 1) return "DotBackward";
  if (a->ndim == 2 && b->ndim == 1) return "MvBackward";
  if (a->ndim == 2 && b->ndim == 2) return "MmBackward";
  return "MatmulBackward";
}

lt_status ag_record_matmul(const lt_tensor *a, const lt_tensor *b, lt_tensor *r) {
  const lt_tensor *ins[2] = {a, b};
  if (!lt_dtype_is_floating(r->dtype) || !ag_any_requires_grad(ins, 2)) return LT_OK;
  ag_node *n = ag_node_new(matmul_node_name(a, b), matmul_backward, 2);
  if (!n) return LT_ERR_OOM;
  ag_node_set_input(n, 0, a);
  ag_node_set_input(n, 1, b);
  lt_status st = LT_OK;
  if (ag_needs(n, 1)) st = ag_node_save(n, SAVED_A, a); /* d/db needs a, d/da needs b */
  if (st == LT_OK && ag_needs(n, 0)) st = ag_node_save(n, SAVED_B, b);
  if (st == LT_OK) st = ag_node_attach(n, r, 0);
  ag_node_release(n);
  return st;
}
