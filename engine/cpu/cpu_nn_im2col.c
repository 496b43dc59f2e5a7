/* im2col / col2im for conv2d (see cpu_nn_im2col.h). Each row of the column
 * matrix is one kernel tap (c, i, j); for that tap the output columns whose
 * input lies inside the image form one range [lo, hi) per output row,
 * computed up front so the inner loops have no bounds checks. */
#include "cpu/cpu_nn_im2col.h"

#include <string.h>

#include "cpu/cpu_clones.h"
#include "cpu/cpu_nn.h"

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

NN_INLINE void im2col_impl(const nn_window_geom *g, const void *image, void *cols, bool f64) {
  const int64_t L = g->out_h * g->out_w;
  int64_t row = 0;
  for (int64_t c = 0; c < g->channels; c++) {
    const int64_t plane = c * g->height * g->width;
    for (int64_t i = 0; i < g->kh; i++) {
      int64_t oh0, oh1;
      valid_range(g->out_h, g->sh, g->ph, i * g->dh, g->height, &oh0, &oh1);
      for (int64_t j = 0; j < g->kw; j++, row++) {
        int64_t ow0, ow1;
        valid_range(g->out_w, g->sw, g->pw, j * g->dw, g->width, &ow0, &ow1);
        const int64_t base = row * L;
        for (int64_t oh = 0; oh < g->out_h; oh++) {
          const int64_t dst = base + oh * g->out_w;
          if (oh < oh0 || oh >= oh1) {
            for (int64_t ow = 0; ow < g->out_w; ow++) nn_st(cols, dst + ow, f64, 0.0);
            continue;
          }
          const int64_t ih = oh * g->sh - g->ph + i * g->dh;
          const int64_t src = plane + ih * g->width - g->pw + j * g->dw;
          for (int64_t ow = 0; ow < ow0; ow++) nn_st(cols, dst + ow, f64, 0.0);
          if (g->sw == 1) /* a unit-stride run: a plain copy the compiler vectorises */
            for (int64_t ow = ow0; ow < ow1; ow++)
              nn_st(cols, dst + ow, f64, nn_ld(image, src + ow, f64));
          else
            for (int64_t ow = ow0; ow < ow1; ow++)
              nn_st(cols, dst + ow, f64, nn_ld(image, src + ow * g->sw, f64));
          for (int64_t ow = ow1; ow < g->out_w; ow++) nn_st(cols, dst + ow, f64, 0.0);
        }
      }
    }
  }
}

NN_INLINE void col2im_impl(const nn_window_geom *g, const void *cols, void *image, bool f64) {
  const int64_t L = g->out_h * g->out_w;
  int64_t row = 0;
  for (int64_t c = 0; c < g->channels; c++) {
    const int64_t plane = c * g->height * g->width;
    for (int64_t i = 0; i < g->kh; i++) {
      int64_t oh0, oh1;
      valid_range(g->out_h, g->sh, g->ph, i * g->dh, g->height, &oh0, &oh1);
      for (int64_t j = 0; j < g->kw; j++, row++) {
        int64_t ow0, ow1;
        valid_range(g->out_w, g->sw, g->pw, j * g->dw, g->width, &ow0, &ow1);
        for (int64_t oh = oh0; oh < oh1; oh++) {
          const int64_t ih = oh * g->sh - g->ph + i * g->dh;
          const int64_t dst = plane + ih * g->width - g->pw + j * g->dw;
          const int64_t src = row * L + oh * g->out_w;
          if (g->sw == 1 && !f64) {
            /* unit stride, float32: added in float, without the
             * conversions. Same result: a float sum rounded to double and
             * then to float is the correctly rounded float sum (double has
             * more than 2 x 24 + 2 bits), which is what the float add gives. */
            float *restrict d = (float *)image + dst;
            const float *restrict sc = (const float *)cols + src;
            for (int64_t ow = ow0; ow < ow1; ow++) d[ow] += sc[ow];
            continue;
          }
          if (g->sw == 1) { /* unit stride: vectorisable */
            for (int64_t ow = ow0; ow < ow1; ow++)
              nn_st(image, dst + ow, f64, nn_ld(image, dst + ow, f64) + nn_ld(cols, src + ow, f64));
            continue;
          }
          for (int64_t ow = ow0; ow < ow1; ow++) {
            const int64_t at = dst + ow * g->sw;
            nn_st(image, at, f64, nn_ld(image, at, f64) + nn_ld(cols, src + ow, f64));
          }
        }
      }
    }
  }
}

/* Stride 1 with the output as wide as the input (3x3 with padding 1, the
 * usual case): column (oh, ow) of tap (c, i, j) reads plane position
 * oh W + ow + shift, shift = (i dh - ph) W + j dw - pw, the same shift for
 * every column. So a tap's row of the column matrix is one block copy of
 * the plane from its first valid column to its last, after which the
 * columns that fall in the padding (rows above and below, and the ow < ow0
 * and ow >= ow1 borders, which the copy filled with the neighbouring rows'
 * ends) are zeroed. The copy never reads outside the plane: it runs between
 * two positions that are inside it. Per output row the general loop pays
 * for its setup and three short loops; here a row of out_w = 14 or 28 is a
 * slice of one memcpy. Values are moved, not converted: the result is the
 * same as im2col_impl's. */
static bool same_width_stride1(const nn_window_geom *g) {
  return g->sh == 1 && g->sw == 1 && g->out_w == g->width;
}

/* Zeroes n elements, n a padding width (usually 1): a loop, not a call. */
static inline void zero_few(char *p, int64_t n, size_t es) {
  if (es == sizeof(double))
    for (int64_t k = 0; k < n; k++) ((double *)p)[k] = 0.0;
  else
    for (int64_t k = 0; k < n; k++) ((float *)p)[k] = 0.0f;
}

static void im2col_same_width(const nn_window_geom *g, const void *image, void *cols, size_t es) {
  const int64_t L = g->out_h * g->out_w, w = g->width;
  const char *img = image;
  char *out = cols;
  int64_t row = 0;
  for (int64_t c = 0; c < g->channels; c++) {
    const int64_t plane = c * g->height * w;
    for (int64_t i = 0; i < g->kh; i++) {
      int64_t oh0, oh1;
      valid_range(g->out_h, 1, g->ph, i * g->dh, g->height, &oh0, &oh1);
      for (int64_t j = 0; j < g->kw; j++, row++) {
        int64_t ow0, ow1;
        valid_range(g->out_w, 1, g->pw, j * g->dw, w, &ow0, &ow1);
        char *dst = out + (size_t)(row * L) * es;
        if (oh0 >= oh1 || ow0 >= ow1) { /* the tap sees only padding */
          memset(dst, 0, (size_t)L * es);
          continue;
        }
        const int64_t shift = (i * g->dh - g->ph) * w + j * g->dw - g->pw;
        const int64_t k0 = oh0 * w + ow0, k1 = (oh1 - 1) * w + ow1; /* [k0, k1) */
        memset(dst, 0, (size_t)k0 * es);
        memcpy(dst + (size_t)k0 * es, img + (size_t)(plane + k0 + shift) * es,
               (size_t)(k1 - k0) * es);
        memset(dst + (size_t)k1 * es, 0, (size_t)(L - k1) * es);
        if (ow0 > 0 || ow1 < w)
          for (int64_t oh = oh0; oh < oh1; oh++) {
            char *r = dst + (size_t)(oh * w) * es;
            zero_few(r, ow0, es);
            zero_few(r + (size_t)ow1 * es, w - ow1, es);
          }
      }
    }
  }
}

LT_CPU_CLONES void cpu_nn_im2col(const nn_window_geom *g, const void *image, void *cols, bool f64) {
  if (same_width_stride1(g))
    im2col_same_width(g, image, cols, f64 ? sizeof(double) : sizeof(float));
  else if (f64)
    im2col_impl(g, image, cols, true);
  else
    im2col_impl(g, image, cols, false);
}

LT_CPU_CLONES void cpu_nn_col2im(const nn_window_geom *g, const void *cols, void *image, bool f64) {
  if (f64)
    col2im_impl(g, cols, image, true);
  else
    col2im_impl(g, cols, image, false);
}
