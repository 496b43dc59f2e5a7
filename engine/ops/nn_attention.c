/* scaled_dot_product_attention: checks, the broadcast batch, the dropout
 * draw and dispatch to the attention kernels (core/nn_backend.h). The
 * kernels see each operand contiguous in its own shape (q, k and v, on a
 * backend with attention_strided, in their own strides) and reach a batch
 * entry through strides, so a mask broadcast over heads or queries (a key
 * padding mask [N, 1, 1, S]) is read where it lies: nothing of L x S size is
 * ever made here, only [..., L, Ev] outputs and the [..., L] log-sum-exp.
 * Gradients are computed over the broadcast batch and summed down to each
 * input's shape. */
#include <math.h>

#include "autograd/grad_calc.h"
#include "lt/rng.h"
#include "ops/autocast_internal.h"
#include "ops/nn_internal.h"

static const char *const OP = "scaled_dot_product_attention";

lt_attention_opts lt_attention_default_opts(void) {
  lt_attention_opts o = {NULL, 0.0, false, false, 0.0};
  return o;
}

/* What one call computes: the kernels' geometry and the result shapes. */
typedef struct attn_plan {
  lt_nn_attn_geom g;
  int64_t out_shape[LT_MAX_DIMS], lse_shape[LT_MAX_DIMS], gq_shape[LT_MAX_DIMS],
      gk_shape[LT_MAX_DIMS], gv_shape[LT_MAX_DIMS];
  int ndim; /* of out, gq, gk, gv (lse: one fewer) */
} attn_plan;

static lt_status check_operand(const char *op, const char *role, const lt_tensor *t,
                               const char *dims) {
  LT_TRY(nn_check_float(op, role, t));
  if (t->ndim < 2) {
    char s[OPS_SHAPE_BUF];
    return lt_error(LT_ERR_SHAPE, "%s: expected %s of at least 2 dims %s, got %s", op, role, dims,
                    ops_shape_str(s, t->shape, t->ndim));
  }
  return LT_OK;
}

/* The mask's shape as ndim dims (size-1 dims prepended). */
static void padded_shape(const lt_tensor *t, int ndim, int64_t *shape) {
  const int lead = ndim - t->ndim;
  for (int d = 0; d < ndim; d++) shape[d] = d < lead ? 1 : t->shape[d - lead];
}

/* Element strides of a contiguous shape's batch dims (its first nb of ndim,
 * padded at the front) against the broadcast batch: 0 where it is 1. */
static void batch_strides(const int64_t *shape, int ndim, int nb, const int64_t *batch,
                          int64_t *stride) {
  int64_t step = 1;
  for (int d = ndim - 1; d >= 0; d--) {
    if (d < nb) stride[d] = (shape[d] == 1 && batch[d] != 1) ? 0 : step;
    step *= shape[d];
  }
}

static lt_status broadcast_error(const char *op, const lt_tensor *q, const lt_tensor *k,
                                 const lt_tensor *v, const lt_tensor *mask) {
  char sq[OPS_SHAPE_BUF], sk[OPS_SHAPE_BUF], sv[OPS_SHAPE_BUF], sm[OPS_SHAPE_BUF];
  ops_shape_str(sq, q->shape, q->ndim);
  ops_shape_str(sk, k->shape, k->ndim);
  ops_shape_str(sv, v->shape, v->ndim);
  if (mask)
    return lt_error(LT_ERR_SHAPE,
                    "%s: the batch dims of query %s, key %s, value %s and attn_mask %s do not "
                    "broadcast",
                    op, sq, sk, sv, ops_shape_str(sm, mask->shape, mask->ndim));
  return lt_error(LT_ERR_SHAPE, "%s: the batch dims of query %s, key %s and value %s do not broadcast",
                  op, sq, sk, sv);
}

static lt_status check_attention(const char *op, const lt_tensor *q, const lt_tensor *k,
                                 const lt_tensor *v, const lt_attention_opts *o, attn_plan *p) {
  LT_TRY(check_operand(op, "query", q, "[..., L, E]"));
  LT_TRY(check_operand(op, "key", k, "[..., S, E]"));
  LT_TRY(check_operand(op, "value", v, "[..., S, Ev]"));
  LT_TRY(ops_check_same_device(op, q, k));
  LT_TRY(ops_check_same_device(op, q, v));
  if (k->dtype != q->dtype || v->dtype != q->dtype)
    return lt_error(LT_ERR_DTYPE, "%s: expected query, key and value of one dtype, got %s, %s and %s",
                    op, lt_dtype_name(q->dtype), lt_dtype_name(k->dtype),
                    lt_dtype_name(v->dtype));
  char sq[OPS_SHAPE_BUF], sk[OPS_SHAPE_BUF], sv[OPS_SHAPE_BUF];
  const int64_t l = q->shape[q->ndim - 2], e = q->shape[q->ndim - 1];
  const int64_t s = k->shape[k->ndim - 2], ev = v->shape[v->ndim - 1];
  if (k->shape[k->ndim - 1] != e)
    return lt_error(LT_ERR_SHAPE, "%s: query %s and key %s differ in the last dim (E: %lld and %lld)",
                    op, ops_shape_str(sq, q->shape, q->ndim), ops_shape_str(sk, k->shape, k->ndim),
                    (long long)e, (long long)k->shape[k->ndim - 1]);
  if (v->shape[v->ndim - 2] != s)
    return lt_error(LT_ERR_SHAPE,
                    "%s: key %s and value %s differ in the sequence length (S: %lld and %lld)", op,
                    ops_shape_str(sk, k->shape, k->ndim), ops_shape_str(sv, v->shape, v->ndim),
                    (long long)s, (long long)v->shape[v->ndim - 2]);
  if (!(o->dropout_p >= 0.0 && o->dropout_p < 1.0))
    return lt_error(LT_ERR_ARG, "%s: dropout_p must be in [0, 1), got %g", op, o->dropout_p);
  const lt_tensor *mask = o->attn_mask;
  if (mask && o->is_causal)
    return lt_error(LT_ERR_ARG,
                    "%s: attn_mask must not be set when is_causal is true (is_causal is the mask)",
                    op);
  if (mask) {
    LT_TRY(ops_check_live(op, mask));
    LT_TRY(ops_check_same_device(op, q, mask));
    if (mask->dtype != LT_BOOL && !lt_dtype_is_floating(mask->dtype))
      return lt_error(LT_ERR_DTYPE, "%s: expected attn_mask of dtype bool or floating point, got %s",
                      op, lt_dtype_name(mask->dtype));
  }

  /* The batch: the leading dims of q, k, v (and the mask's) broadcast. */
  int64_t batch[LT_MAX_DIMS];
  int nb = 0;
  const lt_tensor *ops[4] = {q, k, v, mask};
  for (int i = 0; i < 4; i++) {
    if (!ops[i]) continue;
    const int lead = ops[i]->ndim > 2 ? ops[i]->ndim - 2 : 0;
    int64_t next[LT_MAX_DIMS];
    int nnext;
    if (lt_broadcast_shapes(op, batch, nb, ops[i]->shape, lead, next, &nnext) != LT_OK)
      return broadcast_error(op, q, k, v, mask);
    for (int d = 0; d < nnext; d++) batch[d] = next[d];
    nb = nnext;
  }
  if (mask) {
    const int mn = mask->ndim;
    const int64_t ml = mn >= 2 ? mask->shape[mn - 2] : 1, ms = mn >= 1 ? mask->shape[mn - 1] : 1;
    if ((ml != 1 && ml != l) || (ms != 1 && ms != s)) {
      char sm[OPS_SHAPE_BUF];
      int64_t want[LT_MAX_DIMS];
      for (int d = 0; d < nb; d++) want[d] = batch[d];
      want[nb] = l, want[nb + 1] = s;
      return lt_error(LT_ERR_SHAPE, "%s: attn_mask %s does not broadcast to the scores %s", op,
                      ops_shape_str(sm, mask->shape, mask->ndim), ops_shape_str(sq, want, nb + 2));
    }
  }

  lt_nn_attn_geom *g = &p->g;
  *g = (lt_nn_attn_geom){0};
  g->nb = nb;
  g->nbatch = 1;
  for (int d = 0; d < nb; d++) g->batch[d] = batch[d], g->nbatch *= batch[d];
  g->l = l, g->s = s, g->e = e, g->ev = ev;
  g->causal = o->is_causal;
  g->scale = o->has_scale ? o->scale : 1.0 / sqrt((double)e);
  g->dropout_p = o->dropout_p;
  g->mask = !mask ? LT_NN_ATTN_NO_MASK
                  : mask->dtype == LT_BOOL ? LT_NN_ATTN_BOOL_MASK : LT_NN_ATTN_ADDITIVE_MASK;
  p->ndim = nb + 2;
  for (int d = 0; d < nb; d++)
    p->out_shape[d] = p->lse_shape[d] = p->gq_shape[d] = p->gk_shape[d] = p->gv_shape[d] =
        batch[d];
  p->out_shape[nb] = l, p->out_shape[nb + 1] = ev;
  p->lse_shape[nb] = l;
  p->gq_shape[nb] = l, p->gq_shape[nb + 1] = e;
  p->gk_shape[nb] = s, p->gk_shape[nb + 1] = e;
  p->gv_shape[nb] = s, p->gv_shape[nb + 1] = ev;
  return LT_OK;
}

/* An operand's batch strides against the broadcast batch (0 where it
 * broadcasts) and its row stride, read from the tensor as prepared: its
 * contiguous copy, or itself where the kernels read it in place. */
static void operand_geometry(const lt_nn_attn_geom *g, const lt_tensor *t, int64_t width,
                             int64_t *stride, int64_t *ld) {
  const int lead = g->nb + 2 - t->ndim;
  for (int d = 0; d < g->nb; d++) {
    const int td = d - lead;
    stride[d] = (td < 0 || (t->shape[td] == 1 && g->batch[d] != 1)) ? 0 : t->stride[td];
  }
  *ld = t->shape[t->ndim - 2] == 1 ? width : t->stride[t->ndim - 2];
}

/* The operands' strides for the kernels. */
static void operand_strides(lt_nn_attn_geom *g, const lt_tensor *q, const lt_tensor *k,
                            const lt_tensor *v, const lt_tensor *mask) {
  operand_geometry(g, q, g->e, g->q_stride, &g->q_ld);
  operand_geometry(g, k, g->e, g->k_stride, &g->k_ld);
  operand_geometry(g, v, g->ev, g->v_stride, &g->v_ld);
  if (mask) {
    const int n = g->nb + 2;
    int64_t shape[LT_MAX_DIMS];
    padded_shape(mask, n, shape);
    batch_strides(shape, n, g->nb, g->batch, g->mask_stride);
    g->mask_row = shape[n - 2] == 1 ? 0 : shape[n - 1];
    g->mask_col = shape[n - 1] == 1 ? 0 : 1;
  }
}

/* Whether the kernels can read t where it lies (backends with
 * attention_strided): the compute dtype, each row's elements contiguous, rows
 * at least a row apart (a GEMM's leading dimension). The heads of a chunked
 * [B, T, 3C] projection, transposed to [B, nh, T, hs], are, so attention
 * makes no copies of q, k and v in forward or backward. */
static bool readable_in_place(const lt_tensor *t, lt_dtype ct) {
  const int n = t->ndim;
  const int64_t width = t->shape[n - 1], rows = t->shape[n - 2];
  if (t->dtype != ct || (width > 1 && t->stride[n - 1] != 1) || (rows > 1 && t->stride[n - 2] < width))
    return false;
  for (int d = 0; d < n; d++)
    if (t->stride[d] < 0) return false;
  return true;
}

static lt_status prepare_operand(nn_scope *s, const lt_nn_backend *be, const lt_tensor *t,
                                 lt_dtype ct, lt_tensor **out) {
  if (be->attention_strided && readable_in_place(t, ct)) {
    lt_tensor_retain((lt_tensor *)t);
    *out = nn_hold(s, (lt_tensor *)t);
    return LT_OK;
  }
  return nn_prepare(s, t, ct, out);
}

/* q, k, v (and the mask) as the kernels take them, held by s. */
static lt_status prepare_operands(nn_scope *s, const lt_nn_backend *be, const lt_tensor *q,
                                  const lt_tensor *k, const lt_tensor *v, const lt_tensor *mask,
                                  lt_dtype ct, lt_tensor **qc, lt_tensor **kc, lt_tensor **vc,
                                  lt_tensor **mc) {
  LT_TRY(prepare_operand(s, be, q, ct, qc));
  LT_TRY(prepare_operand(s, be, k, ct, kc));
  LT_TRY(prepare_operand(s, be, v, ct, vc));
  return nn_prepare(s, mask, mask && mask->dtype == LT_BOOL ? LT_BOOL : ct, mc);
}

/* Philox blocks one call's keep mask takes: four elements a block, as
 * lt_bernoulli_ fills. */
static uint64_t draw_blocks(const lt_nn_attn_geom *g) {
  const uint64_t n = (uint64_t)g->nbatch * (uint64_t)g->l * (uint64_t)g->s;
  return (n + 3) / 4;
}

static lt_status attention_forward(const lt_tensor *q, const lt_tensor *k, const lt_tensor *v,
                                   const lt_attention_opts *o, lt_tensor **out, lt_tensor **lse,
                                   lt_attention_draw *draw) {
  *out = NULL;
  *lse = NULL;
  attn_plan p;
  LT_TRY(check_attention(OP, q, k, v, o, &p));
  const lt_device dev = q->storage->device;
  const lt_nn_backend *be;
  LT_TRY(nn_backend(OP, dev, &be));
  const lt_dtype ct = nn_compute_dtype(q->dtype);
  nn_scope s = {0};
  lt_tensor *qc, *kc, *vc, *mc, *r = NULL, *ls = NULL;
  lt_status st = prepare_operands(&s, be, q, k, v, o->attn_mask, ct, &qc, &kc, &vc, &mc);
  if (st == LT_OK) st = nn_result(&s, p.out_shape, p.ndim, ct, dev, &r);
  if (st == LT_OK) st = nn_result(&s, p.lse_shape, p.ndim - 1, ct, dev, &ls);
  if (st == LT_OK) {
    operand_strides(&p.g, qc, kc, vc, mc);
    /* The draw is taken only once nothing can fail before the kernel runs:
     * a refused call leaves the generator where it was. */
    if (p.g.dropout_p > 0.0) {
      lt_rng_state rs = lt_rng_get_state();
      p.g.seed = rs.seed;
      p.g.offset = rs.offset;
      rs.offset += draw_blocks(&p.g);
      lt_rng_set_state(rs);
    }
    if (draw) draw->seed = p.g.seed, draw->offset = p.g.offset;
    if (p.g.nbatch > 0 && p.g.l > 0) st = be->attention(r, ls, qc, kc, vc, mc, &p.g);
  }
  if (st == LT_OK) st = nn_deliver(r, q->dtype, out);
  if (st == LT_OK) lt_tensor_retain(ls), *lse = ls;
  nn_scope_end(&s);
  return st;
}

lt_status lt_scaled_dot_product_attention(const lt_tensor *q, const lt_tensor *k,
                                          const lt_tensor *v, const lt_attention_opts *o,
                                          lt_tensor **out, lt_tensor **logsumexp,
                                          lt_attention_draw *draw) {
  *out = NULL;
  if (logsumexp) *logsumexp = NULL;
  const lt_attention_opts defaults = lt_attention_default_opts();
  if (!o) o = &defaults;
  /* Autocast casts q, k, v and a floating mask (its row's policy). */
  if (ac_op_wanted(AC_OP_ATTENTION, q)) {
    lt_attention_opts cast = *o;
    ac_operands ac;
    LT_TRY(ac_begin(&ac, ac_row_of(AC_OP_ATTENTION)->policy, 4, AC_LIST(q, k, v, o->attn_mask)));
    cast.attn_mask = ac.t[3];
    const lt_status st =
        lt_scaled_dot_product_attention(ac.t[0], ac.t[1], ac.t[2], &cast, out, logsumexp, draw);
    ac_end(&ac);
    return st;
  }
  lt_tensor *ls = NULL;
  lt_attention_draw d = {0, 0};
  /* Off while the operands are converted: those copies need no history. */
  const bool grad_mode = lt_set_grad_enabled(false);
  lt_status st = attention_forward(q, k, v, o, out, &ls, &d);
  lt_set_grad_enabled(grad_mode);
  if (st == LT_OK) st = ag_record_attention(q, k, v, o, d, ls, *out);
  if (st == LT_OK && draw) *draw = d;
  nn_hand_over(st, ls, logsumexp);
  return nn_settle(st, out, NULL);
}

/* A gradient over the broadcast batch, summed down to its input's shape and
 * delivered in the input's dtype. */
static lt_status deliver_grad(const lt_tensor *full, const lt_tensor *input, lt_tensor **grad) {
  lt_tensor *summed = NULL;
  LT_TRY(ag_sum_to(OP, full, input->shape, input->ndim, &summed));
  lt_status st = nn_deliver(summed, input->dtype, grad);
  lt_tensor_release(summed);
  return st;
}

static lt_status check_saved(const char *op, const char *role, const lt_tensor *t,
                             const lt_tensor *q, lt_dtype dt, const int64_t *shape, int ndim) {
  if (!t) return lt_error(LT_ERR_ARG, "%s: expected %s, got nothing", op, role);
  LT_TRY(nn_check_operand(op, role, t, q, dt));
  if (!nn_same_shape(t->shape, t->ndim, shape, ndim)) {
    char st[OPS_SHAPE_BUF], sw[OPS_SHAPE_BUF];
    return lt_error(LT_ERR_SHAPE, "%s: expected %s of shape %s, got %s", op, role,
                    ops_shape_str(sw, shape, ndim), ops_shape_str(st, t->shape, t->ndim));
  }
  return LT_OK;
}

lt_status lt_scaled_dot_product_attention_backward(
    const lt_tensor *grad_out, const lt_tensor *q, const lt_tensor *k, const lt_tensor *v,
    const lt_tensor *out, const lt_tensor *logsumexp, const lt_attention_opts *o,
    lt_attention_draw draw, bool need_q, bool need_k, bool need_v, lt_tensor **grad_q,
    lt_tensor **grad_k, lt_tensor **grad_v) {
  const char *op = "scaled_dot_product_attention_backward";
  if (grad_q) *grad_q = NULL;
  if (grad_k) *grad_k = NULL;
  if (grad_v) *grad_v = NULL;
  const lt_attention_opts defaults = lt_attention_default_opts();
  if (!o) o = &defaults;
  attn_plan p;
  LT_TRY(check_attention(op, q, k, v, o, &p));
  const lt_dtype ct = nn_compute_dtype(q->dtype);
  LT_TRY(check_saved(op, "grad_output", grad_out, q, q->dtype, p.out_shape, p.ndim));
  LT_TRY(check_saved(op, "output", out, q, q->dtype, p.out_shape, p.ndim));
  LT_TRY(check_saved(op, "logsumexp", logsumexp, q, ct, p.lse_shape, p.ndim - 1));
  need_q = need_q && grad_q, need_k = need_k && grad_k, need_v = need_v && grad_v;
  const lt_device dev = q->storage->device;
  const lt_nn_backend *be;
  LT_TRY(nn_backend(op, dev, &be));
  nn_scope s = {0};
  lt_tensor *qc, *kc, *vc, *mc, *goc = NULL, *oc = NULL, *lc = NULL, *gq = NULL, *gk = NULL,
                                   *gv = NULL;
  lt_status st = prepare_operands(&s, be, q, k, v, o->attn_mask, ct, &qc, &kc, &vc, &mc);
  if (st == LT_OK) st = nn_prepare(&s, grad_out, ct, &goc);
  if (st == LT_OK) st = nn_prepare(&s, out, ct, &oc);
  if (st == LT_OK) st = nn_prepare(&s, logsumexp, ct, &lc);
  if (st == LT_OK && need_q) st = nn_result(&s, p.gq_shape, p.ndim, ct, dev, &gq);
  if (st == LT_OK && need_k) st = nn_result(&s, p.gk_shape, p.ndim, ct, dev, &gk);
  if (st == LT_OK && need_v) st = nn_result(&s, p.gv_shape, p.ndim, ct, dev, &gv);
  if (st == LT_OK && (gq || gk || gv)) {
    operand_strides(&p.g, qc, kc, vc, mc);
    p.g.seed = draw.seed;
    p.g.offset = draw.offset;
    if (p.g.nbatch > 0)
      st = be->attention_backward(gq, gk, gv, goc, qc, kc, vc, oc, lc, mc, &p.g);
  }
  if (st == LT_OK && gq) st = deliver_grad(gq, q, grad_q);
  if (st == LT_OK && gk) st = deliver_grad(gk, k, grad_k);
  if (st == LT_OK && gv) st = deliver_grad(gv, v, grad_v);
  if (st != LT_OK) {
    lt_tensor **outs[3] = {grad_q, grad_k, grad_v};
    for (int i = 0; i < 3; i++)
      if (outs[i] && *outs[i]) lt_tensor_release(*outs[i]), *outs[i] = NULL;
  }
  nn_scope_end(&s);
  return st;
}
