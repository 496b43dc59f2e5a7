/* im2col / col2im for conv2d (see cpu_nn_im2col.h). Each row of the column
 * matrix is one kernel tap (c, i, j); for that tap the output columns whose
 * input lies inside the image form one range [lo, hi) per output row,
 * computed up front so the inner loops have no bounds checks. */
#include "cpu/cpu_nn_im2col.h"

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

void cpu_nn_im2col(const nn_window_geom *g, const void *image, void *cols, bool f64) {
  if (f64)
    im2col_impl(g, image, cols, true);
  else
    im2col_impl(g, image, cols, false);
}

void cpu_nn_col2im(const nn_window_geom *g, const void *cols, void *image, bool f64) {
  if (f64)
    col2im_impl(g, cols, image, true);
  else
    col2im_impl(g, cols, image, false);
}
