/* Recording ops on the tape: what the op entry points in ops/ (and the view
 * functions of ops/views.c) call once their kernel has run. Each function
 * decides for itself whether anything is to be recorded (grad mode on, a
 * floating input that requires grad, a floating result) and returns LT_OK at
 * once when not, so an op calls it unconditionally. The formulas live in
 * autograd/formulas_*.c. */
#ifndef LT_AUTOGRAD_RECORD_H
#define LT_AUTOGRAD_RECORD_H

#include "core/backend.h"
#include "lt/autograd.h"
#include "lt/ops.h"

/* Before an in-place write to dst (src: the other operand, or NULL):
 * refuses what autograd cannot follow, in grad mode only: a leaf that
 * requires grad, a view of one, and a write with grad into a view that does
 * not know its base (made under no_grad) or whose elements overlap. A write
 * into a view that knows its base is recorded on the base when the op's node
 * is attached (view_rebase.c). When the write will
 * be recorded and keep_old is set (the formula needs dst's values from before
 * the write), *old is a copy of them for the record call (release it after);
 * else NULL. */
lt_status ag_inplace_begin(const char *op, lt_tensor *dst, const lt_tensor *src, bool keep_old,
                           lt_tensor **old);
/* Whether the in-place form of an op needs a's values from before the write. */
bool ag_binary_needs_old(lt_binary_op op, const lt_tensor *a, const lt_tensor *b /* NULL: scalar */);
bool ag_unary_needs_old(lt_unary_op op);

/* ---- elementwise (formulas_elementwise.c) ---- */
lt_status ag_record_binary(lt_binary_op op, const lt_tensor *a, const lt_tensor *b, lt_tensor *r);
lt_status ag_record_binary_scalar(lt_binary_op op, const lt_tensor *a, double s,
                                  bool scalar_first, lt_tensor *r);
/* After the in-place write to a (and its version bump); old from
 * ag_inplace_begin. */
lt_status ag_record_binary_(lt_binary_op op, lt_tensor *a, const lt_tensor *b,
                            const lt_tensor *old);
lt_status ag_record_binary_scalar_(lt_binary_op op, lt_tensor *a, double s, const lt_tensor *old);
lt_status ag_record_unary(lt_unary_op op, const lt_tensor *a, lt_tensor *r);
lt_status ag_record_unary_(lt_unary_op op, lt_tensor *a, const lt_tensor *old);
lt_status ag_record_clamp(const lt_tensor *a, bool has_lo, double lo, bool has_hi, double hi,
                          lt_tensor *r);
lt_status ag_record_clamp_(lt_tensor *a, bool has_lo, double lo, bool has_hi, double hi,
                           const lt_tensor *old);
lt_status ag_record_where(const lt_tensor *cond, const lt_tensor *a, const lt_tensor *b,
                          lt_tensor *r);

/* ---- reductions (formulas_reduce.c) ---- */
/* reduced: t->ndim flags, as the kernel got them. */
lt_status ag_record_reduce(lt_reduce_op op, const lt_tensor *t, const bool *reduced, bool keepdim,
                           lt_tensor *r);
/* Whether max/min over a dim will be recorded for t (it then needs the
 * indices even when the caller did not ask for them). */
bool ag_will_record(const lt_tensor *t);
lt_status ag_record_index_reduce(bool is_max, const lt_tensor *t, int dim, bool keepdim,
                                 int64_t index_base, lt_tensor *values, const lt_tensor *indices);
lt_status ag_record_reduce_all(bool is_max, const lt_tensor *t, lt_tensor *r);

/* ---- matmul (formulas_matmul.c) ---- */
lt_status ag_record_matmul(const lt_tensor *a, const lt_tensor *b, lt_tensor *r);

/* ---- shapes, joins and copies (formulas_shape.c) ---- */
typedef enum ag_view_kind {
  AG_VIEW_RESHAPE = 0, /* view, reshape, flatten, squeeze, unsqueeze: args none */
  AG_VIEW_TRANSPOSE,   /* args: d0, d1 */
  AG_VIEW_PERMUTE,     /* args: the dims */
  AG_VIEW_NARROW,      /* args: dim, start, length */
  AG_VIEW_SELECT,      /* args: dim, index (both wrapped) */
  AG_VIEW_EXPAND       /* args none */
} ag_view_kind;
lt_status ag_record_view(const char *name, ag_view_kind kind, const lt_tensor *t, lt_tensor *r,
                         const int64_t *args, int nargs);
/* Backward of a narrow or select view n into base_grad, its base's gradient so far, in place
 * (*done), or nothing for other nodes (!*done). */
struct ag_node;
lt_status ag_view_add_into(const struct ag_node *n, const lt_tensor *g, lt_tensor *base_grad, bool *done);
lt_status ag_record_cat(lt_tensor *const *ts, int n, int dim, lt_tensor *r);
lt_status ag_record_stack(lt_tensor *const *ts, int n, int dim, lt_tensor *r);
/* constant_pad_nd (formulas_pad.c). before: x->ndim values, the padding
 * before each dim (negative: cropped); the padding after follows from the
 * shapes of x and r. */
lt_status ag_record_constant_pad(const lt_tensor *x, const int64_t *before, lt_tensor *r);
/* An op whose gradient is the output's gradient itself (converted back to
 * t's dtype and device): to, clone, a copying contiguous. Nothing when r is t. */
lt_status ag_record_identity(const char *name, const lt_tensor *t, lt_tensor *r);
lt_status ag_record_copy_(lt_tensor *dst, const lt_tensor *src);
/* fill_/zero_: the old values get no gradient. */
lt_status ag_record_fill_(const char *name, lt_tensor *t);

#endif
