/* Unary elementwise kernels and clamp: out = op(a), a of out's shape. */
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "core/backend.h"
#include "cpu/cpu_clones.h"
#include "cpu/cpu_convert.h"
#include "cpu/cpu_iter.h"
#include "cpu/cpu_kernels.h"
#include "cpu/cpu_operand.h"
#include "cpu/cpu_vmath.h"

#define UNARY_LOOP(EXPR)                                                        \
  do {                                                                          \
    if (sa) {                                                                   \
      for (int64_t i = 0; i < n; i++) { const T x = a[i]; o[i] = (EXPR); }      \
    } else {                                                                    \
      const T x = a[0];                                                         \
      const T r = (EXPR);                                                       \
      for (int64_t i = 0; i < n; i++) o[i] = r;                                 \
    }                                                                           \
  } while (0)

/* Floating ops; the float and double versions differ only in the math
 * functions, passed in as F(name): libm's for double, and for float libm's
 * float versions except exp, tanh and erf (and sigmoid through exp), which are
 * cpu_vmath.h's, so that their loops vectorise. relu keeps NaN (x < 0 is
 * false). Each returns false for an op it has no loop for (cpu_unary refuses
 * it). */
#define FLOAT_UNARY(F)                                                          \
  switch (op) {                                                                 \
    case LT_OP_NEG: UNARY_LOOP(-x); return true;                                \
    case LT_OP_EXP: UNARY_LOOP(F(exp)(x)); return true;                         \
    case LT_OP_LOG: UNARY_LOOP(F(log)(x)); return true;                         \
    case LT_OP_SQRT: UNARY_LOOP(F(sqrt)(x)); return true;                       \
    case LT_OP_RSQRT: UNARY_LOOP((T)1 / F(sqrt)(x)); return true;               \
    case LT_OP_ABS: UNARY_LOOP(F(fabs)(x)); return true;                        \
    case LT_OP_RELU: UNARY_LOOP(x < 0 ? (T)0 : x); return true;                 \
    case LT_OP_SIGMOID: UNARY_LOOP((T)1 / ((T)1 + F(exp)(-x))); return true;    \
    case LT_OP_TANH: UNARY_LOOP(F(tanh)(x)); return true;                       \
    case LT_OP_SIN: UNARY_LOOP(F(sin)(x)); return true;                         \
    case LT_OP_COS: UNARY_LOOP(F(cos)(x)); return true;                         \
    case LT_OP_RECIPROCAL: UNARY_LOOP((T)1 / x); return true;                   \
    case LT_OP_SQUARE: UNARY_LOOP(x * x); return true;                          \
    case LT_OP_SIGN: UNARY_LOOP((T)((x > 0) - (x < 0))); return true;           \
    case LT_OP_FLOOR: UNARY_LOOP(F(floor)(x)); return true;                     \
    case LT_OP_CEIL: UNARY_LOOP(F(ceil)(x)); return true;                       \
    case LT_OP_ROUND: UNARY_LOOP(F(nearbyint)(x)); return true; /* half to even */ \
    case LT_OP_LOGICAL_NOT: UNARY_LOOP((T)(x == 0)); return true;               \
    case LT_OP_ERF: UNARY_LOOP(F(erf)(x)); return true;                         \
    case LT_NUNARY: break;                                                      \
  }                                                                             \
  return false

#define FLOAT_NAME(name) f32_##name
#define DOUBLE_NAME(name) name
#define f32_exp vm_expf
#define f32_tanh vm_tanhf
#define f32_erf vm_erff
#define f32_log logf
#define f32_sqrt sqrtf
#define f32_fabs fabsf
#define f32_sin sinf
#define f32_cos cosf
#define f32_floor floorf
#define f32_ceil ceilf
#define f32_nearbyint nearbyintf

LT_CPU_CLONES static bool unary_float(lt_unary_op op, const float *a, int64_t sa, float *o, int64_t n) {
  typedef float T;
  FLOAT_UNARY(FLOAT_NAME);
}

static bool unary_double(lt_unary_op op, const double *a, int64_t sa, double *o, int64_t n) {
  typedef double T;
  FLOAT_UNARY(DOUBLE_NAME);
}

/* Integers: floor/ceil/round are the identity; negation wraps. The
 * float-only ops never get here (ops/ promotes them to float32). */
static bool unary_int64(lt_unary_op op, const int64_t *a, int64_t sa, int64_t *o, int64_t n) {
  typedef int64_t T;
  switch (op) {
    case LT_OP_NEG: UNARY_LOOP((int64_t)(0 - (uint64_t)x)); return true;
    case LT_OP_ABS: UNARY_LOOP(x < 0 ? (int64_t)(0 - (uint64_t)x) : x); return true;
    case LT_OP_RELU: UNARY_LOOP(x < 0 ? 0 : x); return true;
    case LT_OP_SQUARE: UNARY_LOOP((int64_t)((uint64_t)x * (uint64_t)x)); return true;
    case LT_OP_SIGN: UNARY_LOOP((x > 0) - (x < 0)); return true;
    case LT_OP_LOGICAL_NOT: UNARY_LOOP(x == 0); return true;
    case LT_OP_FLOOR: case LT_OP_CEIL: case LT_OP_ROUND: UNARY_LOOP(x); return true;
    case LT_OP_EXP: case LT_OP_LOG: case LT_OP_SQRT: case LT_OP_RSQRT: case LT_OP_SIGMOID:
    case LT_OP_TANH: case LT_OP_SIN: case LT_OP_COS: case LT_OP_RECIPROCAL: case LT_OP_ERF:
    case LT_NUNARY:
      break;
  }
  return false;
}

typedef union kind_buf { double d[CPU_BUF]; int64_t i[CPU_BUF]; float f[CPU_BUF]; } kind_buf;

/* The shared walk of unary and clamp: view the input, compute, store. */
typedef void (*unary_compute_fn)(const void *ctx, const void *a, int64_t sa, void *o, int64_t n);

typedef struct unary_ctx {
  cpu_kind kind;
  lt_dtype out_dt, a_dt;
  unary_compute_fn fn;
  lt_unary_op op;
  bool has_lo, has_hi;
  union { float f; double d; int64_t i; } lo, hi;
} unary_ctx;

static void unary_loop(void *vctx, char **p, const int64_t *st, int64_t n) {
  const unary_ctx *c = vctx;
  kind_buf abuf, obuf;
  const bool out_direct = c->out_dt == cpu_kind_native(c->kind) &&
                          st[0] == (int64_t)cpu_kind_size(c->kind);
  const bool all_direct = out_direct && cpu_operand_direct(c->kind, st[1], c->a_dt);
  const int64_t chunk = all_direct ? n : CPU_BUF;
  for (int64_t off = 0; off < n; off += chunk) {
    const int64_t m = n - off < chunk ? n - off : chunk;
    int64_t sx;
    const void *x = cpu_operand_view(c->kind, p[1] + off * st[1], st[1], c->a_dt, m, &abuf, &sx);
    void *o = out_direct ? (void *)(p[0] + off * st[0]) : (void *)&obuf;
    c->fn(c, x, sx, o, m);
    if (!out_direct) cpu_store(c->kind, p[0] + off * st[0], st[0], c->out_dt, &obuf, m);
  }
}

/* Runs op over n elements of kind; false when kind has no loop for op. */
static bool unary_kind(cpu_kind kind, lt_unary_op op, const void *a, int64_t sa, void *o,
                       int64_t n) {
  switch (kind) {
    case CPU_KIND_F32: return unary_float(op, a, sa, o, n);
    case CPU_KIND_F64: return unary_double(op, a, sa, o, n);
    case CPU_KIND_I64: return unary_int64(op, a, sa, o, n);
  }
  return false;
}

LT_CPU_CLONES static void unary_compute(const void *vctx, const void *a, int64_t sa, void *o, int64_t n) {
  const unary_ctx *c = vctx;
  (void)unary_kind(c->kind, c->op, a, sa, o, n); /* checked by cpu_unary first */
}

static void run_unary(unary_ctx *c, lt_tensor *out, const lt_tensor *a) {
  const lt_tensor *ops[2] = {out, a};
  cpu_iter it;
  cpu_iter_init(&it, ops, 2);
  cpu_iter_run(&it, unary_loop, c);
}

lt_status cpu_unary(lt_unary_op op, lt_dtype compute, lt_tensor *out, const lt_tensor *a) {
  unary_ctx c;
  memset(&c, 0, sizeof c);
  c.kind = cpu_kind_of(compute);
  /* Over no elements: only whether the op has a loop for this kind. */
  if (!unary_kind(c.kind, op, NULL, 1, NULL, 0))
    return lt_error(LT_ERR_INTERNAL, "cpu: no %s kernel for unary op %s", lt_dtype_name(compute),
                    lt_unary_op_name(op));
  c.out_dt = out->dtype;
  c.a_dt = a->dtype;
  c.fn = unary_compute;
  c.op = op;
  run_unary(&c, out, a);
  return LT_OK;
}

/* clamp: NaN inputs stay NaN (both comparisons are false); with lo > hi
 * every element becomes hi, as PyTorch. */
#define CLAMP_LOOP(T, LO, HI)                                                   \
  do {                                                                          \
    const T *a = va;                                                            \
    T *o = vo;                                                                  \
    for (int64_t i = 0; i < n; i++) {                                           \
      T x = a[sa ? i : 0];                                                      \
      if (c->has_lo && x < (LO)) x = (LO);                                      \
      if (c->has_hi && x > (HI)) x = (HI);                                      \
      o[i] = x;                                                                 \
    }                                                                           \
  } while (0)

static void clamp_compute(const void *vctx, const void *va, int64_t sa, void *vo, int64_t n) {
  const unary_ctx *c = vctx;
  switch (c->kind) {
    case CPU_KIND_F32: CLAMP_LOOP(float, c->lo.f, c->hi.f); break;
    case CPU_KIND_F64: CLAMP_LOOP(double, c->lo.d, c->hi.d); break;
    case CPU_KIND_I64: CLAMP_LOOP(int64_t, c->lo.i, c->hi.i); break;
  }
}

lt_status cpu_clamp(lt_dtype compute, lt_tensor *out, const lt_tensor *a, bool has_lo,
                    lt_scalar lo, bool has_hi, lt_scalar hi) {
  unary_ctx c;
  memset(&c, 0, sizeof c);
  c.kind = cpu_kind_of(compute);
  c.out_dt = out->dtype;
  c.a_dt = a->dtype;
  c.fn = clamp_compute;
  c.has_lo = has_lo;
  c.has_hi = has_hi;
  c.lo.f = (float)lo.f, c.hi.f = (float)hi.f;
  if (c.kind == CPU_KIND_F64) c.lo.d = lo.f, c.hi.d = hi.f;
  if (c.kind == CPU_KIND_I64) c.lo.i = lo.i, c.hi.i = hi.i;
  run_unary(&c, out, a);
  return LT_OK;
}
