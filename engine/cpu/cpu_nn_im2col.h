/* im2col and col2im (Chellapilla, Puri and Simard 2006, "High performance
 * convolutional neural networks for document processing"): the receptive
 * fields of a convolution laid out as the columns of a matrix, so that the
 * convolution becomes one GEMM with the weight. Both work on a block of that
 * matrix (a range of rows and a range of columns), so that a convolution
 * needs a column buffer of a block only (cpu_nn_conv2d.c). */
#ifndef LT_CPU_NN_IM2COL_H
#define LT_CPU_NN_IM2COL_H

#include <stdbool.h>
#include <stdint.h>

#include "lt/dtype.h"

/* One image's geometry for a window sliding over it. */
typedef struct nn_window_geom {
  int64_t channels, height, width;    /* of the image (one group's channels) */
  int64_t kh, kw, sh, sw, ph, pw, dh, dw;
  int64_t out_h, out_w;
} nn_window_geom;

/* The column matrix has rows (c, i, j) (row c kh kw + i kw + j) and columns
 * (oh, ow) (column oh out_w + ow); entry (row, column) is
 * image[c, oh sh - ph + i dh, ow sw - pw + j dw], 0 in the padding.
 *
 * cols [r1 - r0, p1 - p0] = rows [r0, r1), columns [p0, p1) of it, in the
 * compute type (double for float64, float for float32, float16 and
 * bfloat16: 16-bit images are converted on the way). image (elements of dt)
 * points at channel r0 / (kh kw). */
void cpu_nn_im2col(const nn_window_geom *g, const void *image, lt_dtype dt, int64_t r0,
                   int64_t r1, int64_t p0, int64_t p1, void *cols);
/* The adjoint: image += the block scattered back to where im2col read it.
 * cols and image (pointing at channel r0 / (kh kw)) are double when f64,
 * float otherwise. */
void cpu_nn_col2im(const nn_window_geom *g, const void *cols, bool f64, int64_t r0, int64_t r1,
                   int64_t p0, int64_t p1, void *image);

#endif
