/* float32 rows for the nn kernels that reduce along the last dim (softmax, cross-entropy,
 * layer norm): max, sum, dot and the exp-sum of one contiguous row, and the elementwise
 * passes that follow them, on GCC's vector type of ROW_LANES floats (one AVX-512 register,
 * two AVX2, four SSE2 ones in the LT_CPU_CLONES callers). Written as vectors, not as loops
 * over lanes left to the vectoriser: GCC unrolls a 16-lane loop before it vectorises and
 * then leaves most of it scalar. Lane l takes the elements l, l + ROW_LANES, ...; a row's
 * last partial chunk goes through the same chunk code (rv_tail), so rows of any length
 * (GPT's 64 to 128, 76 classes) need no scalar tail. The lanes are added in a fixed
 * pairwise order, and every ROW_BLOCK elements into a double, so each result has the same
 * bits on every clone and long rows keep the accuracy of a double sum of float32 blocks. */
#ifndef LT_CPU_ROWS_H
#define LT_CPU_ROWS_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "cpu/cpu_nn.h"
#include "cpu/cpu_vmath.h"

#define ROW_LANES 16
#define ROW_BLOCK 1024 /* elements summed in float lanes before they go into the double */

/* The helpers are always inlined into the clones, so the ABI GCC notes for passing 64-byte
 * vectors in the baseline build is never used: -Wno-psabi in CMakeLists.txt (a pragma here
 * does not silence the note). */

typedef float rv_f __attribute__((vector_size(ROW_LANES * sizeof(float))));
typedef int32_t rv_i __attribute__((vector_size(ROW_LANES * sizeof(int32_t))));

NN_INLINE rv_f rv_load(const float *p) {
  rv_f v;
  memcpy(&v, p, sizeof v);
  return v;
}

NN_INLINE void rv_store(float *p, rv_f v) { memcpy(p, &v, sizeof v); }

NN_INLINE rv_f rv_splat(float x) { return (rv_f){0} + x; }

/* m ? a : b lane by lane, m a comparison's result (all bits set or none). */
NN_INLINE rv_f rv_select(rv_i m, rv_f a, rv_f b) { return (rv_f)(((rv_i)a & m) | ((rv_i)b & ~m)); }

NN_INLINE rv_f rv_max(rv_f a, rv_f b) { return rv_select(b > a, b, a); }

/* a * b + c rounded once, lane by lane: GCC makes the lanes' fmaf one vector FMA in the
 * clones that have it; the baseline calls libm's fmaf for each, slowly, to the same bits. */
NN_INLINE rv_f rv_fma(rv_f a, rv_f b, rv_f c) {
  rv_f r;
  for (int l = 0; l < ROW_LANES; l++) r[l] = fmaf(a[l], b[l], c[l]);
  return r;
}

typedef uint32_t rv_u __attribute__((vector_size(ROW_LANES * sizeof(uint32_t))));
#define RV_POW2_OF_SHIFTED(t) ((rv_f)(((rv_u)(t) + 127u) << 23))
VM_DEFINE_EXPF_NEG(rv_expf_neg, rv_f, rv_i, rv_select, rv_fma, RV_POW2_OF_SHIFTED)
VM_DEFINE_EXPF_NEG(rv_expf_neg_unfused, rv_f, rv_i, rv_select, VM_UNFUSED, RV_POW2_OF_SHIFTED)

/* The lanes of v moved down by w (lane l gets lane l + w, wrapping). */
#define RV_DOWN(v, w)                                                                          \
  __builtin_shuffle((v), (rv_i){(w) % 16, (1 + (w)) % 16, (2 + (w)) % 16, (3 + (w)) % 16,      \
                                (4 + (w)) % 16, (5 + (w)) % 16, (6 + (w)) % 16, (7 + (w)) % 16, \
                                (8 + (w)) % 16, (9 + (w)) % 16, (10 + (w)) % 16,               \
                                (11 + (w)) % 16, (12 + (w)) % 16, (13 + (w)) % 16,             \
                                (14 + (w)) % 16, (15 + (w)) % 16})

/* The lanes' sum, pairwise (lane l + lane l + 8, then + 4, + 2, + 1: 4 dependent adds). */
NN_INLINE double rv_total(rv_f v) {
  v += RV_DOWN(v, 8);
  v += RV_DOWN(v, 4);
  v += RV_DOWN(v, 2);
  return (double)(v[0] + v[1]);
}

NN_INLINE float rv_max_total(rv_f v) {
  v = rv_max(v, RV_DOWN(v, 8));
  v = rv_max(v, RV_DOWN(v, 4));
  v = rv_max(v, RV_DOWN(v, 2));
  return v[1] > v[0] ? v[1] : v[0];
}

/* A row's last, partial chunk (n - k < ROW_LANES elements left): where n >= ROW_LANES, the
 * last ROW_LANES elements of the row, whose lanes below *keep were done by the chunk
 * before and are left out of sums (a max, or a store of the same value twice, changes
 * nothing); in a shorter row, the elements with the lanes past n set to pad. Reading in
 * place avoids storing lanes one by one and loading them as a vector, which stalls. */
NN_INLINE rv_f rv_tail(const float *x, int64_t k, int64_t n, float pad, rv_i *keep) {
  static const rv_i lane_ids = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
  if (n >= ROW_LANES) {
    *keep = lane_ids >= (rv_i){0} + (int32_t)(k + ROW_LANES - n);
    return rv_load(x + n - ROW_LANES);
  }
  float buf[ROW_LANES];
  for (int l = 0; l < ROW_LANES; l++) buf[l] = l < n ? x[l] : pad;
  *keep = lane_ids >= (rv_i){0};
  return rv_load(buf);
}

/* Each helper below works on `rows` rows at once (1 to ROW_GROUP, a constant where it is
 * inlined), row g at x + g * stride: the same operations as one row at a time, so the same
 * bits, but the rows' chains of dependent steps (a sum across lanes, an exponential, a
 * division after it) interleave instead of each waiting on the latency of the last: four
 * GPT softmax rows of 64 take 0.6 of the time of one after another. */
#define ROW_GROUP 4

/* The largest element of each row (-inf for an empty row). NaN is not looked for: the
 * callers' next pass turns it into NaN for the whole row. */
NN_INLINE void rows_max_f32(const float *x, int64_t stride, int64_t n, int rows, float *out) {
  rv_f m[ROW_GROUP];
  for (int g = 0; g < rows; g++) m[g] = rv_splat(-INFINITY);
  int64_t k = 0;
  for (; k + ROW_LANES <= n; k += ROW_LANES)
    for (int g = 0; g < rows; g++) m[g] = rv_max(m[g], rv_load(x + g * stride + k));
  for (int g = 0; g < rows && k < n; g++) {
    rv_i keep;
    m[g] = rv_max(m[g], rv_tail(x + g * stride, k, n, -INFINITY, &keep));
  }
  for (int g = 0; g < rows; g++) out[g] = rv_max_total(m[g]);
}

NN_INLINE float row_max_f32(const float *x, int64_t n) {
  float m;
  rows_max_f32(x, n, n, 1, &m);
  return m;
}

/* What each row sums in rows_reduce_f32: a[k] (b NULL), a[k] b[k], (a[k] - c)^2 or
 * exp(a[k] - c) (its FMAs fused, or not: cpu_vmath.h), stored in y[k] when y is not NULL. */
typedef enum { ROW_SUM, ROW_DOT, ROW_SQUARES, ROW_EXP, ROW_EXP_UNFUSED } row_reduction;

/* The exp-sum for a kernel that chose fused or unfused FMAs (vm_cpu_has_fma). */
#define ROW_EXP_FOR(fused) ((fused) ? ROW_EXP : ROW_EXP_UNFUSED)

NN_INLINE rv_f row_term(row_reduction what, rv_f a, const float *b, float c) {
  switch (what) {
  case ROW_DOT: return a * rv_load(b);
  case ROW_SQUARES: return (a - c) * (a - c);
  case ROW_EXP: return rv_expf_neg(a - c);
  case ROW_EXP_UNFUSED: return rv_expf_neg_unfused(a - c);
  default: return a;
  }
}

/* For each row g, the sum over k of its terms (row_term with c[g]; b's rows at the same
 * offsets as a's; y's too, which may not overlap a), in float lanes flushed into a double
 * every ROW_BLOCK elements. A row's partial last chunk (rv_tail) pads with what makes a
 * term 0 (0, c or -inf) and leaves out the lanes the chunk before had. */
NN_INLINE void rows_reduce_f32(row_reduction what, const float *a, const float *b, float *y,
                               int64_t stride, int64_t n, const float *c, int rows, double *out) {
  rv_f acc[ROW_GROUP];
  for (int g = 0; g < rows; g++) acc[g] = (rv_f){0}, out[g] = 0.0;
  const float pad = what == ROW_EXP || what == ROW_EXP_UNFUSED ? -INFINITY : 0.0f;
  int64_t k = 0;
  for (; k + ROW_LANES <= n; k += ROW_LANES) {
    for (int g = 0; g < rows; g++) {
      const int64_t at = g * stride + k;
      const rv_f t = row_term(what, rv_load(a + at), b ? b + at : NULL, c ? c[g] : 0.0f);
      if (y) rv_store(y + at, t);
      acc[g] += t;
    }
    if ((k + ROW_LANES) % ROW_BLOCK == 0)
      for (int g = 0; g < rows; g++) out[g] += rv_total(acc[g]), acc[g] = (rv_f){0};
  }
  for (int g = 0; g < rows && k < n; g++) {
    const int64_t at = g * stride;
    const float cg = c ? c[g] : 0.0f;
    rv_i keep;
    rv_f v = rv_tail(a + at, k, n, what == ROW_SQUARES ? cg : pad, &keep), t;
    if (what == ROW_DOT) {
      t = v * rv_tail(b + at, k, n, 0.0f, &keep);
    } else {
      t = row_term(what, v, NULL, cg);
    }
    acc[g] += rv_select(keep, t, (rv_f){0});
    if (y && n >= ROW_LANES) {
      rv_store(y + at + n - ROW_LANES, t); /* rewrites the kept-out lanes' same values */
    } else if (y) {
      float buf[ROW_LANES];
      rv_store(buf, t);
      memcpy(y + at + k, buf, (size_t)(n - k) * sizeof *buf);
    }
  }
  for (int g = 0; g < rows; g++) out[g] += rv_total(acc[g]);
}

/* sum over k of a[k] (b == NULL) or a[k] b[k]. */
NN_INLINE double row_dot_f32(const float *a, const float *b, int64_t n) {
  double s;
  rows_reduce_f32(b ? ROW_DOT : ROW_SUM, a, b, NULL, n, n, NULL, 1, &s);
  return s;
}

/* sum over k of (a[k] - mean)^2: layer norm's variance, in two passes over a row that
 * stays in cache, so no cancellation as with E[x^2] - mean^2. */
NN_INLINE double row_centered_squares_f32(const float *a, int64_t n, float mean) {
  double s;
  rows_reduce_f32(ROW_SQUARES, a, NULL, NULL, n, n, &mean, 1, &s);
  return s;
}

/* exp(x), x <= 0, with FMAs fused or not (cpu_vmath.h): fused a constant where inlined. */
NN_INLINE rv_f rv_exp_neg_for(bool fused, rv_f x) {
  return fused ? rv_expf_neg(x) : rv_expf_neg_unfused(x);
}

/* y[k] = exp(x[k] - shift) * s over a row, x[k] - shift <= 0 (a softmax's probabilities,
 * scaled); y may not overlap x, so a partial last chunk rewrites lanes with their values. */
NN_INLINE void row_scaled_exp_f32(bool fused, float *y, const float *x, int64_t n, float shift, float s) {
  int64_t k = 0;
  for (; k + ROW_LANES <= n; k += ROW_LANES)
    rv_store(y + k, rv_exp_neg_for(fused, rv_load(x + k) - shift) * s);
  if (k < n && n >= ROW_LANES)
    rv_store(y + n - ROW_LANES, rv_exp_neg_for(fused, rv_load(x + n - ROW_LANES) - shift) * s);
  else
    for (; k < n; k++) y[k] = vm_exp_neg_for(fused, x[k] - shift) * s;
}

/* y[k] = a[k] * s + c over a row (c = 0: a scaling); y may be a. The last partial chunk
 * goes one element at a time: rewriting lanes of an in-place row would apply it twice. */
NN_INLINE void row_scale_add_f32(float *y, const float *a, int64_t n, float s, float c) {
  int64_t k = 0;
  for (; k + ROW_LANES <= n; k += ROW_LANES) rv_store(y + k, rv_load(a + k) * s + c);
  for (; k < n; k++) y[k] = a[k] * s + c;
}

#endif
