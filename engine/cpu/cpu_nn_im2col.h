/* im2col and col2im (Chellapilla, Puri and Simard 2006, "High performance
 * convolutional neural networks for document processing"): the receptive
 * fields of a convolution laid out as the columns of a matrix, so that the
 * convolution becomes one GEMM with the weight. */
#ifndef LT_CPU_NN_IM2COL_H
#define LT_CPU_NN_IM2COL_H

#include <stdbool.h>
#include <stdint.h>

/* One image's geometry for a window sliding over it. */
typedef struct nn_window_geom {
  int64_t channels, height, width;    /* of the image (one group's channels) */
  int64_t kh, kw, sh, sw, ph, pw, dh, dw;
  int64_t out_h, out_w;
} nn_window_geom;

/* cols [channels * kh * kw, out_h * out_w]: row (c, i, j), column (oh, ow)
 * holds image[c, oh sh - ph + i dh, ow sw - pw + j dw], 0 in the padding. */
void cpu_nn_im2col(const nn_window_geom *g, const void *image, void *cols, bool f64);
/* image += the columns scattered back to where im2col read them (the
 * adjoint of im2col). */
void cpu_nn_col2im(const nn_window_geom *g, const void *cols, void *image, bool f64);

#endif
