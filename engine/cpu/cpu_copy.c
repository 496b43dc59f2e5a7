/* Copy with broadcasting and dtype conversion, fill, where, element reads. */
#include <string.h>

#include "core/backend.h"
#include "cpu/cpu_clones.h"
#include "cpu/cpu_convert.h"
#include "cpu/cpu_iter.h"
#include "cpu/cpu_kernels.h"
#include "cpu/cpu_operand.h"

typedef union kind_buf { double d[CPU_BUF]; int64_t i[CPU_BUF]; float f[CPU_BUF]; } kind_buf;

/* ---- copy ---- */

typedef struct copy_ctx {
  lt_dtype dst_dt, src_dt;
  size_t esize;  /* same-dtype copies move bytes */
  cpu_kind kind; /* conversions go through the source's kind, so each value
                    is rounded once (int64 -> float32 directly, not via double) */
} copy_ctx;

#define STRIDED_MOVE(T)                                                         \
  for (int64_t i = 0; i < n; i++)                                               \
    memcpy(p[0] + i * st[0], p[1] + i * st[1], sizeof(T))

/* One value repeated into a contiguous run: a broadcast source (an expanded gradient of
 * sum or mean made contiguous), as a loop that vectorises instead of a memcpy per element. */
#define BROADCAST_FILL(T)                                                       \
  do {                                                                          \
    T v, *o = (T *)(void *)p[0];                                                \
    memcpy(&v, p[1], sizeof v);                                                 \
    for (int64_t i = 0; i < n; i++) o[i] = v;                                   \
  } while (0)

LT_CPU_CLONES static void same_dtype_loop(void *vctx, char **p, const int64_t *st, int64_t n) {
  const copy_ctx *c = vctx;
  const int64_t es = (int64_t)c->esize;
  if (st[0] == es && st[1] == es) {
    memmove(p[0], p[1], (size_t)(n * es)); /* copy_ of a tensor onto itself is allowed */
    return;
  }
  if (st[0] == es && st[1] == 0) {
    switch (c->esize) {
      case 1: BROADCAST_FILL(uint8_t); return;
      case 2: BROADCAST_FILL(uint16_t); return;
      case 4: BROADCAST_FILL(uint32_t); return;
      case 8: BROADCAST_FILL(uint64_t); return;
      default: break;
    }
  }
  switch (c->esize) {
    case 1: STRIDED_MOVE(uint8_t); break;
    case 2: STRIDED_MOVE(uint16_t); break;
    case 4: STRIDED_MOVE(uint32_t); break;
    default: STRIDED_MOVE(uint64_t); break;
  }
}

LT_CPU_CLONES static void convert_loop(void *vctx, char **p, const int64_t *st, int64_t n) {
  const copy_ctx *c = vctx;
  kind_buf buf;
  for (int64_t off = 0; off < n; off += CPU_BUF) {
    const int64_t m = n - off < CPU_BUF ? n - off : CPU_BUF;
    cpu_load(c->kind, &buf, p[1] + off * st[1], st[1], c->src_dt, m);
    cpu_store(c->kind, p[0] + off * st[0], st[0], c->dst_dt, &buf, m);
  }
}

static cpu_kind conversion_kind(lt_dtype src) {
  if (src == LT_FLOAT64) return CPU_KIND_F64;
  if (src == LT_FLOAT32 || src == LT_FLOAT16 || src == LT_BFLOAT16) return CPU_KIND_F32;
  return CPU_KIND_I64;
}

lt_status cpu_copy(lt_tensor *dst, const lt_tensor *src) {
  copy_ctx c = {dst->dtype, src->dtype, lt_dtype_size(dst->dtype), conversion_kind(src->dtype)};
  const lt_tensor *ops[2] = {dst, src};
  cpu_iter it;
  cpu_iter_init(&it, ops, 2);
  cpu_iter_run(&it, dst->dtype == src->dtype ? same_dtype_loop : convert_loop, &c);
  return LT_OK;
}

/* ---- fill ---- */

typedef struct fill_ctx {
  unsigned char value[8]; /* one element of the destination dtype */
  size_t esize;
} fill_ctx;

#define FILL_RUN(T)                                                             \
  do {                                                                          \
    T v;                                                                        \
    memcpy(&v, c->value, sizeof v);                                             \
    if (st[0] == (int64_t)sizeof(T)) {                                          \
      T *o = (T *)(void *)p[0];                                                 \
      for (int64_t i = 0; i < n; i++) o[i] = v;                                 \
    } else {                                                                    \
      for (int64_t i = 0; i < n; i++) memcpy(p[0] + i * st[0], &v, sizeof v);   \
    }                                                                           \
  } while (0)

static void fill_loop(void *vctx, char **p, const int64_t *st, int64_t n) {
  const fill_ctx *c = vctx;
  switch (c->esize) {
    case 1: FILL_RUN(uint8_t); break;
    case 2: FILL_RUN(uint16_t); break;
    case 4: FILL_RUN(uint32_t); break;
    default: FILL_RUN(uint64_t); break;
  }
}

lt_status cpu_fill(lt_tensor *dst, double value) {
  fill_ctx c;
  memset(&c, 0, sizeof c);
  c.esize = lt_dtype_size(dst->dtype);
  lt_store_double(c.value, dst->dtype, value);
  const lt_tensor *ops[1] = {dst};
  cpu_iter it;
  cpu_iter_init(&it, ops, 1);
  cpu_iter_run(&it, fill_loop, &c);
  return LT_OK;
}

lt_status cpu_read_element(const lt_tensor *t, void *host_dst) {
  memcpy(host_dst, lt_data(t), lt_dtype_size(t->dtype));
  return LT_OK;
}

/* ---- where ---- */

typedef struct where_ctx {
  cpu_kind kind;
  lt_dtype out_dt, a_dt, b_dt;
} where_ctx;

#define SELECT_LOOP(T)                                                          \
  do {                                                                          \
    const T *xa = x, *xb = y;                                                   \
    T *xo = o;                                                                  \
    for (int64_t i = 0; i < m; i++) {                                           \
      const bool take_a = cond[i * st[1]] != 0;                                 \
      xo[i] = take_a ? xa[sx ? i : 0] : xb[sy ? i : 0];                         \
    }                                                                           \
  } while (0)

/* The common case (ReLU's backward, where(y > 0, grad, 0)): out, a and b
 * all of the float kind's own dtype, each a run or one repeated value, and
 * a contiguous bool mask. Both values are loaded before the select, so the
 * loop has no conditional load and the compiler turns it into vector
 * compares and blends; one loop per pattern of steps keeps the index
 * arithmetic out of it. */
#define DIRECT_SELECT(T)                                                        \
  do {                                                                          \
    const T *xa = (const T *)(const void *)p[2];                                \
    const T *xb = (const T *)(const void *)p[3];                                \
    T *xo = (T *)(void *)p[0];                                                  \
    const bool ra = st[2] != 0, rb = st[3] != 0;                                \
    if (ra && rb) {                                                             \
      for (int64_t i = 0; i < n; i++) {                                         \
        const T va = xa[i], vb = xb[i];                                         \
        xo[i] = cond[i] != 0 ? va : vb;                                         \
      }                                                                         \
    } else if (ra) {                                                            \
      const T vb = xb[0];                                                       \
      for (int64_t i = 0; i < n; i++) {                                         \
        const T va = xa[i];                                                     \
        xo[i] = cond[i] != 0 ? va : vb;                                         \
      }                                                                         \
    } else if (rb) {                                                            \
      const T va = xa[0];                                                       \
      for (int64_t i = 0; i < n; i++) {                                         \
        const T vb = xb[i];                                                     \
        xo[i] = cond[i] != 0 ? va : vb;                                         \
      }                                                                         \
    } else {                                                                    \
      const T va = xa[0], vb = xb[0];                                           \
      for (int64_t i = 0; i < n; i++) xo[i] = cond[i] != 0 ? va : vb;           \
    }                                                                           \
  } while (0)

static bool where_direct(const where_ctx *c, const int64_t *st) {
  if (c->kind == CPU_KIND_I64) return false;
  const lt_dtype dt = cpu_kind_native(c->kind);
  const int64_t es = (int64_t)cpu_kind_size(c->kind);
  return c->out_dt == dt && c->a_dt == dt && c->b_dt == dt && st[0] == es && st[1] == 1 &&
         (st[2] == 0 || st[2] == es) && (st[3] == 0 || st[3] == es);
}

LT_CPU_CLONES static void where_loop(void *vctx, char **p, const int64_t *st, int64_t n) {
  const where_ctx *c = vctx;
  if (where_direct(c, st)) {
    const unsigned char *cond = (const unsigned char *)p[1];
    if (c->kind == CPU_KIND_F32)
      DIRECT_SELECT(float);
    else
      DIRECT_SELECT(double);
    return;
  }
  kind_buf abuf, bbuf, obuf;
  for (int64_t off = 0; off < n; off += CPU_BUF) {
    const int64_t m = n - off < CPU_BUF ? n - off : CPU_BUF;
    const unsigned char *cond = (const unsigned char *)p[1] + off * st[1];
    int64_t sx, sy;
    const void *x = cpu_operand_view(c->kind, p[2] + off * st[2], st[2], c->a_dt, m, &abuf, &sx);
    const void *y = cpu_operand_view(c->kind, p[3] + off * st[3], st[3], c->b_dt, m, &bbuf, &sy);
    void *o = &obuf;
    switch (c->kind) {
      case CPU_KIND_F32: SELECT_LOOP(float); break;
      case CPU_KIND_F64: SELECT_LOOP(double); break;
      case CPU_KIND_I64: SELECT_LOOP(int64_t); break;
    }
    cpu_store(c->kind, p[0] + off * st[0], st[0], c->out_dt, &obuf, m);
  }
}

lt_status cpu_where(lt_tensor *out, const lt_tensor *cond, const lt_tensor *a,
                    const lt_tensor *b) {
  where_ctx c = {cpu_kind_of(out->dtype), out->dtype, a->dtype, b->dtype};
  const lt_tensor *ops[4] = {out, cond, a, b};
  cpu_iter it;
  cpu_iter_init(&it, ops, 4);
  cpu_iter_run(&it, where_loop, &c);
  return LT_OK;
}
