/* Binary elementwise kernels: out = a op b with broadcasting and conversion.
 * The compute loops see contiguous runs (or one repeated value), so the
 * common case, contiguous float32 of one shape, is a plain loop the compiler
 * vectorises. */
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "core/backend.h"
#include "cpu/cpu_clones.h"
#include "cpu/cpu_convert.h"
#include "cpu/cpu_iter.h"
#include "cpu/cpu_kernels.h"
#include "cpu/cpu_operand.h"

/* One loop per combination of steps: both runs, a run and a repeated value,
 * or two repeated values. x and y name the operands inside EXPR. */
#define BINARY_LOOPS(T, EXPR)                                                   \
  do {                                                                          \
    if (sa && sb) {                                                             \
      for (int64_t i = 0; i < n; i++) { T x = a[i], y = b[i]; o[i] = (EXPR); }  \
    } else if (sa) {                                                            \
      const T y = b[0];                                                         \
      for (int64_t i = 0; i < n; i++) { T x = a[i]; o[i] = (EXPR); }            \
    } else if (sb) {                                                            \
      const T x = a[0];                                                         \
      for (int64_t i = 0; i < n; i++) { T y = b[i]; o[i] = (EXPR); }            \
    } else {                                                                    \
      const T x = a[0], y = b[0];                                               \
      const T r = (EXPR);                                                       \
      for (int64_t i = 0; i < n; i++) o[i] = r;                                 \
    }                                                                           \
  } while (0)

/* Python's % and // for floats, as PyTorch computes them: the remainder
 * from fmod, moved into the divisor's sign; the quotient (x - fmod) / y,
 * one less when that remainder was moved, rounded to the nearest integer
 * (it is one up to rounding), and a signed zero when it is 0. */
#define FLOAT_DIVISION(T, SUFFIX, FMOD, FLOOR, COPYSIGN)                        \
  static inline T remainder_##SUFFIX(T x, T y) {                               \
    T m = FMOD(x, y);                                                           \
    if (m != 0 && ((y < 0) != (m < 0))) m += y;                                 \
    return m;                                                                   \
  }                                                                             \
  static inline T floor_divide_##SUFFIX(T x, T y) {                            \
    if (y == 0) return x / y;                                                   \
    const T m = FMOD(x, y);                                                     \
    T d = (x - m) / y;                                                          \
    if (m != 0 && ((y < 0) != (m < 0))) d -= 1;                                 \
    if (d == 0) return COPYSIGN((T)0, x / y);                                   \
    T f = FLOOR(d);                                                             \
    if (d - f > (T)0.5) f += 1;                                                 \
    return f;                                                                   \
  }
FLOAT_DIVISION(float, float, fmodf, floorf, copysignf)
FLOAT_DIVISION(double, double, fmod, floor, copysign)

/* Floating ops, for float and double. maximum/minimum propagate NaN as
 * PyTorch; comparisons give 1/0 in the compute type (stored as bool). */
#define FLOAT_OPS(T, POW)                                                       \
  switch (op) {                                                                 \
    case LT_OP_REMAINDER: BINARY_LOOPS(T, remainder_##T(x, y)); return true;    \
    case LT_OP_FLOOR_DIVIDE: BINARY_LOOPS(T, floor_divide_##T(x, y)); return true; \
    case LT_OP_ADD: BINARY_LOOPS(T, x + y); return true;                        \
    case LT_OP_SUB: BINARY_LOOPS(T, x - y); return true;                        \
    case LT_OP_MUL: BINARY_LOOPS(T, x * y); return true;                        \
    case LT_OP_DIV: BINARY_LOOPS(T, x / y); return true;                        \
    case LT_OP_POW: BINARY_LOOPS(T, POW(x, y)); return true;                    \
    case LT_OP_MAXIMUM: BINARY_LOOPS(T, (x != x || x > y) ? x : y); return true; \
    case LT_OP_MINIMUM: BINARY_LOOPS(T, (x != x || x < y) ? x : y); return true; \
    case LT_OP_EQ: BINARY_LOOPS(T, (T)(x == y)); return true;                   \
    case LT_OP_NE: BINARY_LOOPS(T, (T)(x != y)); return true;                   \
    case LT_OP_LT: BINARY_LOOPS(T, (T)(x < y)); return true;                    \
    case LT_OP_LE: BINARY_LOOPS(T, (T)(x <= y)); return true;                   \
    case LT_OP_GT: BINARY_LOOPS(T, (T)(x > y)); return true;                    \
    case LT_OP_GE: BINARY_LOOPS(T, (T)(x >= y)); return true;                   \
    case LT_OP_RELU_GRAD: BINARY_LOOPS(T, y <= 0 ? (T)0 : x); return true;      \
    case LT_NBINARY: break;                                                     \
  }                                                                             \
  return false

static bool compute_float(lt_binary_op op, const float *a, int64_t sa, const float *b, int64_t sb,
                          float *o, int64_t n) {
  FLOAT_OPS(float, powf);
}

static bool compute_double(lt_binary_op op, const double *a, int64_t sa, const double *b,
                           int64_t sb, double *o, int64_t n) {
  FLOAT_OPS(double, pow);
}

/* Wrapping integer arithmetic: signed overflow is undefined in C, unsigned
 * wraps, and the result is stored back with the dtype's wrap anyway. */
static inline int64_t wrap_add(int64_t x, int64_t y) { return (int64_t)((uint64_t)x + (uint64_t)y); }
static inline int64_t wrap_sub(int64_t x, int64_t y) { return (int64_t)((uint64_t)x - (uint64_t)y); }
static inline int64_t wrap_mul(int64_t x, int64_t y) { return (int64_t)((uint64_t)x * (uint64_t)y); }

/* Integer division never traps: x / 0 gives 0 and INT64_MIN / -1 wraps.
 * (ops/ never sends integer division here: div is true division.) */
static inline int64_t safe_div(int64_t x, int64_t y) {
  if (y == 0) return 0;
  if (y == -1) return wrap_sub(0, x);
  return x / y;
}

/* Python's % and // for integers. Never traps: a divisor of 0 gives 0 (ops/
 * refuses one on the CPU first), and INT64_MIN // -1 wraps. */
static inline int64_t int_remainder(int64_t x, int64_t y) {
  if (y == 0 || y == -1) return 0;
  const int64_t r = x % y;
  return r != 0 && ((r < 0) != (y < 0)) ? r + y : r;
}

static inline int64_t int_floor_divide(int64_t x, int64_t y) {
  if (y == 0) return 0;
  if (y == -1) return wrap_sub(0, x);
  const int64_t q = x / y;
  return x % y != 0 && ((x < 0) != (y < 0)) ? q - 1 : q;
}

/* PyTorch's integer pow: negative exponents give 1 for base 1, +-1 for base
 * -1 and 0 otherwise (ops/ rejects a negative scalar exponent first). */
static int64_t int_pow(int64_t base, int64_t exp) {
  if (exp < 0) {
    if (base == 1) return 1;
    if (base == -1) return (exp & 1) ? -1 : 1;
    return 0;
  }
  int64_t result = 1;
  while (exp) {
    if (exp & 1) result = wrap_mul(result, base);
    base = wrap_mul(base, base);
    exp >>= 1;
  }
  return result;
}

static bool compute_int64(lt_binary_op op, const int64_t *a, int64_t sa, const int64_t *b,
                          int64_t sb, int64_t *o, int64_t n) {
  switch (op) {
    case LT_OP_ADD: BINARY_LOOPS(int64_t, wrap_add(x, y)); return true;
    case LT_OP_SUB: BINARY_LOOPS(int64_t, wrap_sub(x, y)); return true;
    case LT_OP_MUL: BINARY_LOOPS(int64_t, wrap_mul(x, y)); return true;
    case LT_OP_DIV: BINARY_LOOPS(int64_t, safe_div(x, y)); return true;
    case LT_OP_POW: BINARY_LOOPS(int64_t, int_pow(x, y)); return true;
    case LT_OP_MAXIMUM: BINARY_LOOPS(int64_t, x > y ? x : y); return true;
    case LT_OP_MINIMUM: BINARY_LOOPS(int64_t, x < y ? x : y); return true;
    case LT_OP_EQ: BINARY_LOOPS(int64_t, x == y); return true;
    case LT_OP_NE: BINARY_LOOPS(int64_t, x != y); return true;
    case LT_OP_LT: BINARY_LOOPS(int64_t, x < y); return true;
    case LT_OP_LE: BINARY_LOOPS(int64_t, x <= y); return true;
    case LT_OP_GT: BINARY_LOOPS(int64_t, x > y); return true;
    case LT_OP_GE: BINARY_LOOPS(int64_t, x >= y); return true;
    case LT_OP_REMAINDER: BINARY_LOOPS(int64_t, int_remainder(x, y)); return true;
    case LT_OP_FLOOR_DIVIDE: BINARY_LOOPS(int64_t, int_floor_divide(x, y)); return true;
    case LT_OP_RELU_GRAD: case LT_NBINARY: /* floating only */
      break;
  }
  return false;
}

typedef struct binary_ctx {
  lt_binary_op op;
  cpu_kind kind;
  lt_dtype out_dt, a_dt, b_dt;
  bool has_b;        /* b is a tensor (else the scalar) */
  bool scalar_first; /* the scalar is the left operand */
  union { float f; double d; int64_t i; } scalar;
} binary_ctx;

/* Runs op over n elements of kind; false when kind has no loop for op. */
static bool compute_kind(cpu_kind kind, lt_binary_op op, const void *a, int64_t sa,
                         const void *b, int64_t sb, void *o, int64_t n) {
  switch (kind) {
    case CPU_KIND_F32: return compute_float(op, a, sa, b, sb, o, n);
    case CPU_KIND_F64: return compute_double(op, a, sa, b, sb, o, n);
    case CPU_KIND_I64: return compute_int64(op, a, sa, b, sb, o, n);
  }
  return false;
}

static void compute(const binary_ctx *c, const void *a, int64_t sa, const void *b, int64_t sb,
                    void *o, int64_t n) {
  (void)compute_kind(c->kind, c->op, a, sa, b, sb, o, n); /* checked by cpu_binary first */
}

/* Comparisons of float operands into a contiguous bool output (ReLU's
 * backward mask y > 0, among others) write the 0/1 bytes directly: the same
 * values the float result would give once stored as bool, without the
 * buffer and the conversion pass. */
#define COMPARE_OPS(T)                                                          \
  switch (op) {                                                                 \
    case LT_OP_EQ: BINARY_LOOPS(T, x == y); break;                              \
    case LT_OP_NE: BINARY_LOOPS(T, x != y); break;                              \
    case LT_OP_LT: BINARY_LOOPS(T, x < y); break;                               \
    case LT_OP_LE: BINARY_LOOPS(T, x <= y); break;                              \
    case LT_OP_GT: BINARY_LOOPS(T, x > y); break;                               \
    case LT_OP_GE: BINARY_LOOPS(T, x >= y); break;                              \
    default: break; /* callers send comparisons only */                         \
  }

static void compare_float(lt_binary_op op, const float *a, int64_t sa, const float *b, int64_t sb,
                          unsigned char *o, int64_t n) {
  COMPARE_OPS(float)
}

static void compare_double(lt_binary_op op, const double *a, int64_t sa, const double *b,
                           int64_t sb, unsigned char *o, int64_t n) {
  COMPARE_OPS(double)
}

/* Buffers of the widest kind (8 bytes), aligned for any of them. */
typedef union kind_buf { double d[CPU_BUF]; int64_t i[CPU_BUF]; float f[CPU_BUF]; } kind_buf;

LT_CPU_CLONES static void binary_loop(void *vctx, char **p, const int64_t *st, int64_t n) {
  const binary_ctx *c = vctx;
  kind_buf abuf, bbuf, obuf;
  const size_t esize = cpu_kind_size(c->kind);
  const bool out_direct = c->out_dt == cpu_kind_native(c->kind) && st[0] == (int64_t)esize;
  bool all_direct = out_direct && cpu_operand_direct(c->kind, st[1], c->a_dt);
  if (c->has_b) all_direct = all_direct && cpu_operand_direct(c->kind, st[2], c->b_dt);
  const int64_t chunk = all_direct ? n : CPU_BUF;

  if (c->kind != CPU_KIND_I64 && lt_binary_is_comparison(c->op) && c->out_dt == LT_BOOL && st[0] == 1 &&
      cpu_operand_direct(c->kind, st[1], c->a_dt) &&
      (!c->has_b || cpu_operand_direct(c->kind, st[2], c->b_dt))) {
    const void *x = p[1], *y = c->has_b ? (const void *)p[2] : (const void *)&c->scalar;
    int64_t sx = st[1] != 0, sy = c->has_b && st[2] != 0;
    if (c->scalar_first) {
      const void *t = x;
      const int64_t ts = sx;
      x = y, sx = sy, y = t, sy = ts;
    }
    unsigned char *o = (unsigned char *)p[0];
    if (c->kind == CPU_KIND_F32)
      compare_float(c->op, x, sx, y, sy, o, n);
    else
      compare_double(c->op, x, sx, y, sy, o, n);
    return;
  }

  for (int64_t off = 0; off < n; off += chunk) {
    const int64_t m = n - off < chunk ? n - off : chunk;
    int64_t sx, sy;
    const void *x = cpu_operand_view(c->kind, p[1] + off * st[1], st[1], c->a_dt, m, &abuf, &sx);
    const void *y;
    if (c->has_b) {
      y = cpu_operand_view(c->kind, p[2] + off * st[2], st[2], c->b_dt, m, &bbuf, &sy);
    } else {
      y = &c->scalar;
      sy = 0;
    }
    void *o = out_direct ? (void *)(p[0] + off * st[0]) : (void *)&obuf;
    if (c->scalar_first)
      compute(c, y, sy, x, sx, o, m);
    else
      compute(c, x, sx, y, sy, o, m);
    if (!out_direct) cpu_store(c->kind, p[0] + off * st[0], st[0], c->out_dt, &obuf, m);
  }
}

lt_status cpu_binary(lt_binary_op op, lt_dtype compute_dt, lt_tensor *out, const lt_tensor *a,
                     const lt_tensor *b, lt_scalar s, bool scalar_first) {
  binary_ctx c;
  memset(&c, 0, sizeof c);
  c.op = op;
  c.kind = cpu_kind_of(compute_dt);
  /* Over no elements: only whether the op has a loop for this kind. */
  if (!compute_kind(c.kind, op, NULL, 1, NULL, 1, NULL, 0))
    return lt_error(LT_ERR_INTERNAL, "cpu: no %s kernel for binary op %s",
                    lt_dtype_name(compute_dt), lt_binary_op_name(op));
  c.out_dt = out->dtype;
  c.a_dt = a->dtype;
  c.has_b = b != NULL;
  c.b_dt = b ? b->dtype : compute_dt;
  c.scalar_first = !b && scalar_first;
  switch (c.kind) {
    case CPU_KIND_F32: c.scalar.f = (float)s.f; break;
    case CPU_KIND_F64: c.scalar.d = s.f; break;
    case CPU_KIND_I64: c.scalar.i = s.i; break;
  }
  const lt_tensor *ops[3] = {out, a, b};
  cpu_iter it;
  cpu_iter_init(&it, ops, b ? 3 : 2);
  cpu_iter_run(&it, binary_loop, &c);
  return LT_OK;
}
