/* float32 rows for the nn kernels that reduce along the last dim (softmax, cross-entropy,
 * layer norm): max, sum, dot and the exp-sum of one contiguous row, written as loops over
 * ROW_LANES fixed lanes so that they vectorise inside the LT_CPU_CLONES callers (one
 * AVX-512 register, two AVX2, four SSE2 ones). Lane l takes the elements l, l + ROW_LANES,
 * ...; a row's last partial chunk goes through the same chunk code (row_tail), so rows of
 * any length (GPT's 64 to 128, 76 classes) need no scalar tail. The lanes are added in a
 * fixed pairwise order, and every ROW_BLOCK elements into a double, so each result has the
 * same bits on every clone and long rows keep the accuracy of a double sum of float32
 * blocks. */
#ifndef LT_CPU_ROWS_H
#define LT_CPU_ROWS_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "cpu/cpu_nn.h"
#include "cpu/cpu_vmath.h"

#define ROW_LANES 16
#define ROW_BLOCK 1024 /* elements summed in float lanes before they go into the double */

/* A row's last, partial chunk (n - k < ROW_LANES elements left): where n >= ROW_LANES, the
 * last ROW_LANES elements of the row, whose first *skip lanes were done by the chunk
 * before and are left out of sums (a max or a store of the same value twice changes
 * nothing); in a shorter row, the elements copied to buf and padded with pad. Reading in
 * place avoids storing lanes one by one and loading them as a vector, which stalls. */
NN_INLINE const float *row_tail(float *restrict buf, const float *x, int64_t k, int64_t n,
                                float pad, int *skip) {
  if (n >= ROW_LANES) {
    *skip = (int)(k + ROW_LANES - n);
    return x + n - ROW_LANES;
  }
  *skip = 0;
  for (int l = 0; l < ROW_LANES; l++) buf[l] = l < n ? x[l] : pad;
  return buf;
}

/* The lanes' sum, pairwise (4 dependent adds, not 16), and the lanes cleared. */
NN_INLINE double row_lanes_total(float *lane) {
  float t[8];
  for (int l = 0; l < 8; l++) t[l] = lane[l] + lane[l + 8];
  for (int l = 0; l < 4; l++) t[l] += t[l + 4];
  for (int l = 0; l < 2; l++) t[l] += t[l + 2];
  for (int l = 0; l < ROW_LANES; l++) lane[l] = 0.0f;
  return (double)(t[0] + t[1]);
}

NN_INLINE float max2(float a, float b) { return b > a ? b : a; }

NN_INLINE void max_chunk(float *restrict lane, const float *restrict c) {
  for (int l = 0; l < ROW_LANES; l++) lane[l] = max2(lane[l], c[l]);
}

/* The largest element (-inf for an empty row). NaN is not looked for: the callers' next
 * pass turns it into NaN for the whole row. */
NN_INLINE float row_max_f32(const float *x, int64_t n) {
  float lane[ROW_LANES], buf[ROW_LANES];
  for (int l = 0; l < ROW_LANES; l++) lane[l] = -INFINITY;
  int64_t k = 0;
  for (; k + ROW_LANES <= n; k += ROW_LANES) max_chunk(lane, x + k);
  if (k < n) {
    int skip = 0;
    max_chunk(lane, row_tail(buf, x, k, n, -INFINITY, &skip));
  }
  float t[8];
  for (int l = 0; l < 8; l++) t[l] = max2(lane[l], lane[l + 8]);
  for (int l = 0; l < 4; l++) t[l] = max2(t[l], t[l + 4]);
  for (int l = 0; l < 2; l++) t[l] = max2(t[l], t[l + 2]);
  return max2(t[0], t[1]);
}

NN_INLINE void dot_chunk(float *restrict lane, const float *restrict a, const float *restrict b,
                         int skip) {
  for (int l = 0; l < ROW_LANES; l++) {
    const float v = b ? a[l] * b[l] : a[l];
    lane[l] += l < skip ? 0.0f : v;
  }
}

/* sum over k of a[k] (b == NULL) or a[k] b[k]. */
NN_INLINE double row_dot_f32(const float *a, const float *b, int64_t n) {
  float lane[ROW_LANES] = {0}, abuf[ROW_LANES], bbuf[ROW_LANES];
  double total = 0.0;
  int64_t k = 0;
  for (; k + ROW_LANES <= n; k += ROW_LANES) {
    dot_chunk(lane, a + k, b ? b + k : NULL, 0);
    if ((k + ROW_LANES) % ROW_BLOCK == 0) total += row_lanes_total(lane);
  }
  if (k < n) {
    int skip = 0;
    const float *ca = row_tail(abuf, a, k, n, 0.0f, &skip);
    const float *cb = b ? row_tail(bbuf, b, k, n, 0.0f, &skip) : NULL;
    dot_chunk(lane, ca, cb, skip);
  }
  return total + row_lanes_total(lane);
}

NN_INLINE void squares_chunk(float *restrict lane, const float *restrict c, float mean, int skip) {
  for (int l = 0; l < ROW_LANES; l++) {
    const float v = c[l] - mean;
    lane[l] += l < skip ? 0.0f : v * v;
  }
}

/* sum over k of (a[k] - mean)^2: layer norm's variance, in two passes over a row that
 * stays in cache, so no cancellation as with E[x^2] - mean^2. */
NN_INLINE double row_centered_squares_f32(const float *a, int64_t n, float mean) {
  float lane[ROW_LANES] = {0}, buf[ROW_LANES];
  double total = 0.0;
  int64_t k = 0;
  for (; k + ROW_LANES <= n; k += ROW_LANES) {
    squares_chunk(lane, a + k, mean, 0);
    if ((k + ROW_LANES) % ROW_BLOCK == 0) total += row_lanes_total(lane);
  }
  if (k < n) {
    int skip = 0;
    const float *c = row_tail(buf, a, k, n, mean, &skip);
    squares_chunk(lane, c, mean, skip);
  }
  return total + row_lanes_total(lane);
}

NN_INLINE void exp_chunk(float *restrict lane, float *restrict e, const float *restrict c,
                         float m, int skip) {
  for (int l = 0; l < ROW_LANES; l++) {
    e[l] = vm_expf_neg(c[l] - m);
    lane[l] += l < skip ? 0.0f : e[l];
  }
}

/* sum over k of exp(x[k] - m), storing each exponential in y[k] when y is not NULL (y may
 * not overlap x). m is the row's maximum, so x[k] - m <= 0: vm_expf_neg. */
NN_INLINE double row_exp_sum_f32(const float *x, float *y, int64_t n, float m) {
  float lane[ROW_LANES] = {0}, buf[ROW_LANES], e[ROW_LANES];
  double total = 0.0;
  int64_t k = 0;
  for (; k + ROW_LANES <= n; k += ROW_LANES) {
    exp_chunk(lane, y ? y + k : e, x + k, m, 0);
    if ((k + ROW_LANES) % ROW_BLOCK == 0) total += row_lanes_total(lane);
  }
  if (k < n) {
    int skip = 0;
    const float *c = row_tail(buf, x, k, n, -INFINITY, &skip);
    if (y && n >= ROW_LANES) {
      exp_chunk(lane, y + n - ROW_LANES, c, m, skip); /* rewrites skipped lanes' same values */
    } else {
      exp_chunk(lane, e, c, m, skip);
      if (y) memcpy(y + k, e, (size_t)(n - k) * sizeof *e);
    }
  }
  return total + row_lanes_total(lane);
}

#endif
