/* im2col / col2im for conv2d over blocks of the column matrix (see
 * cpu_nn_im2col.h). For each kernel tap (one row) the output columns whose
 * input lies inside the image form one range [lo, hi) per output row,
 * computed up front so the inner loops have no bounds checks; a block's
 * columns are walked one output row (or part of one) at a time. */
#include "cpu/cpu_nn_im2col.h"

#include <string.h>

#include "cpu/cpu_clones.h"
#include "cpu/cpu_nn_lowp.h"

/* Output positions o in [0, out) whose input o * stride - pad + offset
 * lies in [0, size). */
static void valid_range(int64_t out, int64_t stride, int64_t pad, int64_t offset, int64_t size,
                        int64_t *lo, int64_t *hi) {
  const int64_t shift = pad - offset; /* input = o * stride - shift */
  int64_t a = shift > 0 ? (shift + stride - 1) / stride : 0;
  int64_t limit = size - 1 + shift; /* o * stride <= limit */
  int64_t b = limit >= 0 ? limit / stride + 1 : 0;
  *lo = a < out ? a : out;
  *hi = b < out ? b : out;
  if (*hi < *lo) *hi = *lo;
}

static inline int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }
static inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

/* Zeroes n elements of size ce; n is often a padding width (0 or 1): a loop
 * then, not a call. */
NN_INLINE void zero_elems(char *p, int64_t n, size_t ce) {
  if (n <= 0) return;
  if (n > 8) {
    memset(p, 0, (size_t)n * ce);
  } else if (ce == sizeof(double)) {
    for (int64_t k = 0; k < n; k++) ((double *)(void *)p)[k] = 0.0;
  } else {
    for (int64_t k = 0; k < n; k++) ((float *)(void *)p)[k] = 0.0f;
  }
}

/* One tap's row, columns [p0, p1), in general: output row by output row. */
NN_INLINE void tap_general(const nn_window_geom *g, const char *plane, lt_dtype dt, size_t es,
                           size_t ce, int64_t i, int64_t j, int64_t p0, int64_t p1, char *dst) {
  int64_t oh0, oh1, ow0, ow1;
  valid_range(g->out_h, g->sh, g->ph, i * g->dh, g->height, &oh0, &oh1);
  valid_range(g->out_w, g->sw, g->pw, j * g->dw, g->width, &ow0, &ow1);
  for (int64_t p = p0; p < p1;) {
    const int64_t oh = p / g->out_w, a = p % g->out_w, b = min64(g->out_w, a + (p1 - p));
    const int64_t lo = max64(a, ow0), hi = min64(b, ow1);
    if (oh < oh0 || oh >= oh1 || lo >= hi) {
      zero_elems(dst, b - a, ce);
    } else {
      const int64_t ih = oh * g->sh - g->ph + i * g->dh;
      const int64_t src = ih * g->width - g->pw + j * g->dw + lo * g->sw; /* inside the plane */
      zero_elems(dst, lo - a, ce);
      nn_load_run(dst + (size_t)(lo - a) * ce, plane + (size_t)src * es, dt, g->sw, hi - lo);
      zero_elems(dst + (size_t)(hi - a) * ce, b - hi, ce);
    }
    dst += (size_t)(b - a) * ce;
    p += b - a;
  }
}

/* Stride 1 with the output as wide as the input (3x3 with padding 1, the
 * usual case): column (oh, ow) of tap (c, i, j) reads plane position
 * oh W + ow + shift, shift = (i dh - ph) W + j dw - pw, the same shift for
 * every column. So a tap's row of the column matrix is one run of the plane
 * from its first valid column to its last, after which the columns that fall
 * in the padding (rows above and below, and the ow < ow0 and ow >= ow1
 * borders, which the run filled with the neighbouring rows' ends) are
 * zeroed. The run never reads outside the plane: it lies between two
 * positions that are inside it. Per output row the general loop pays for its
 * setup and three short loops; here a row of out_w = 14 or 28 is a slice of
 * one copy. The values are the general loop's. */
static bool same_width_stride1(const nn_window_geom *g) {
  return g->sh == 1 && g->sw == 1 && g->out_w == g->width;
}

NN_INLINE void tap_same_width(const nn_window_geom *g, const char *plane, lt_dtype dt, size_t es,
                              size_t ce, int64_t i, int64_t j, int64_t p0, int64_t p1,
                              char *dst) {
  const int64_t w = g->width;
  int64_t oh0, oh1, ow0, ow1;
  valid_range(g->out_h, 1, g->ph, i * g->dh, g->height, &oh0, &oh1);
  valid_range(g->out_w, 1, g->pw, j * g->dw, w, &ow0, &ow1);
  int64_t a = p0, b = p0; /* the valid run [a, b) within [p0, p1) */
  if (oh0 < oh1 && ow0 < ow1) {
    a = max64(oh0 * w + ow0, p0);
    b = min64((oh1 - 1) * w + ow1, p1);
    if (b < a) b = a;
  }
  const int64_t shift = (i * g->dh - g->ph) * w + j * g->dw - g->pw;
  zero_elems(dst, a - p0, ce);
  if (b > a) nn_load_run(dst + (size_t)(a - p0) * ce, plane + (size_t)(a + shift) * es, dt, 1, b - a);
  zero_elems(dst + (size_t)(b - p0) * ce, p1 - b, ce);
  if (b > a && (ow0 > 0 || ow1 < w))
    for (int64_t q = a / w * w; q < b; q += w) { /* each output row the run touches */
      const int64_t l0 = max64(q, a), l1 = min64(q + ow0, b);
      zero_elems(dst + (size_t)(l0 - p0) * ce, l1 - l0, ce);
      const int64_t r0 = max64(q + ow1, a), r1 = min64(q + w, b);
      zero_elems(dst + (size_t)(r0 - p0) * ce, r1 - r0, ce);
    }
}

NN_INLINE void im2col_impl(const nn_window_geom *g, const char *image, lt_dtype dt, int64_t r0,
                           int64_t r1, int64_t p0, int64_t p1, char *cols) {
  const size_t es = lt_dtype_size(dt), ce = nn_compute_size(dt);
  const int64_t kk = g->kh * g->kw, hw = g->height * g->width, c0 = r0 / kk;
  const bool same = same_width_stride1(g);
  for (int64_t r = r0; r < r1; r++) {
    const int64_t c = r / kk, i = r % kk / g->kw, j = r % g->kw;
    const char *plane = image + (size_t)((c - c0) * hw) * es;
    char *dst = cols + (size_t)((r - r0) * (p1 - p0)) * ce;
    if (same)
      tap_same_width(g, plane, dt, es, ce, i, j, p0, p1, dst);
    else
      tap_general(g, plane, dt, es, ce, i, j, p0, p1, dst);
  }
}

/* One body per dtype, so that each inlines its own conversion. */
LT_CPU_CLONES static void im2col_cloned(const nn_window_geom *g, const void *image, lt_dtype dt,
                                        int64_t r0, int64_t r1, int64_t p0, int64_t p1,
                                        void *cols) {
  switch (dt) {
    case LT_FLOAT64: im2col_impl(g, image, LT_FLOAT64, r0, r1, p0, p1, cols); break;
    case LT_FLOAT16: im2col_impl(g, image, LT_FLOAT16, r0, r1, p0, p1, cols); break;
    case LT_BFLOAT16: im2col_impl(g, image, LT_BFLOAT16, r0, r1, p0, p1, cols); break;
    default: im2col_impl(g, image, LT_FLOAT32, r0, r1, p0, p1, cols); break;
  }
}

NN_INLINE void col2im_impl(const nn_window_geom *g, const char *cols, bool f64, int64_t r0,
                           int64_t r1, int64_t p0, int64_t p1, char *image) {
  const size_t ce = f64 ? sizeof(double) : sizeof(float);
  const int64_t kk = g->kh * g->kw, hw = g->height * g->width, c0 = r0 / kk;
  for (int64_t r = r0; r < r1; r++) {
    const int64_t c = r / kk, i = r % kk / g->kw, j = r % g->kw;
    char *plane = image + (size_t)((c - c0) * hw) * ce;
    const char *src = cols + (size_t)((r - r0) * (p1 - p0)) * ce;
    int64_t oh0, oh1, ow0, ow1;
    valid_range(g->out_h, g->sh, g->ph, i * g->dh, g->height, &oh0, &oh1);
    valid_range(g->out_w, g->sw, g->pw, j * g->dw, g->width, &ow0, &ow1);
    for (int64_t p = p0; p < p1;) {
      const int64_t oh = p / g->out_w, a = p % g->out_w, b = min64(g->out_w, a + (p1 - p));
      const int64_t lo = max64(a, ow0), hi = min64(b, ow1);
      if (oh >= oh0 && oh < oh1 && lo < hi) {
        const int64_t ih = oh * g->sh - g->ph + i * g->dh;
        const int64_t at = ih * g->width - g->pw + j * g->dw + lo * g->sw, n = hi - lo;
        const int64_t s = g->sw;
        /* A float sum rounded to double and then to float is the correctly
         * rounded float sum, so float32 adds in float. */
        if (f64) {
          double *restrict d = (double *)(void *)plane + at;
          const double *restrict v = (const double *)(const void *)src + (lo - a);
          for (int64_t k = 0; k < n; k++) d[k * s] += v[k];
        } else if (s == 1) {
          float *restrict d = (float *)(void *)plane + at;
          const float *restrict v = (const float *)(const void *)src + (lo - a);
          for (int64_t k = 0; k < n; k++) d[k] += v[k];
        } else {
          float *restrict d = (float *)(void *)plane + at;
          const float *restrict v = (const float *)(const void *)src + (lo - a);
          for (int64_t k = 0; k < n; k++) d[k * s] += v[k];
        }
      }
      src += (size_t)(b - a) * ce;
      p += b - a;
    }
  }
}

LT_CPU_CLONES static void col2im_cloned(const nn_window_geom *g, const void *cols, bool f64,
                                        int64_t r0, int64_t r1, int64_t p0, int64_t p1,
                                        void *image) {
  if (f64)
    col2im_impl(g, cols, true, r0, r1, p0, p1, image);
  else
    col2im_impl(g, cols, false, r0, r1, p0, p1, image);
}

/* The clones stay static (their ifuncs would be exported whatever the
 * visibility: a GCC limitation); other files call these. */
void cpu_nn_im2col(const nn_window_geom *g, const void *image, lt_dtype dt, int64_t r0,
                   int64_t r1, int64_t p0, int64_t p1, void *cols) {
  im2col_cloned(g, image, dt, r0, r1, p0, p1, cols);
}

void cpu_nn_col2im(const nn_window_geom *g, const void *cols, bool f64, int64_t r0, int64_t r1,
                   int64_t p0, int64_t p1, void *image) {
  col2im_cloned(g, cols, f64, r0, r1, p0, p1, image);
}
