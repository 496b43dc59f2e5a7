/* Runs of elements moved between a storage dtype and the type linear and
 * conv2d compute in: double for float64, float for float32, float16 and
 * bfloat16 (16-bit operands are widened as they are packed into a block,
 * and results rounded once as they are stored, so that no whole float32
 * copy of a 16-bit tensor is ever made). */
#ifndef LT_CPU_NN_LOWP_H
#define LT_CPU_NN_LOWP_H

#include <string.h>

#include "core/half.h"
#include "cpu/cpu_nn.h"
#include "lt/dtype.h"

static inline bool nn_is_lowp(lt_dtype dt) { return dt == LT_FLOAT16 || dt == LT_BFLOAT16; }
/* Bytes of one element of the compute type of dt. */
static inline size_t nn_compute_size(lt_dtype dt) { return dt == LT_FLOAT64 ? 8 : 4; }

/* Element i of p (dt: any floating dtype) as a double. */
NN_INLINE double nn_ld_dt(const void *p, int64_t i, lt_dtype dt) {
  switch (dt) {
    case LT_FLOAT64: return ((const double *)p)[i];
    case LT_FLOAT32: return ((const float *)p)[i];
    case LT_BFLOAT16: return lt_bf16_to_f32(((const uint16_t *)p)[i]);
    default: return lt_f16_to_f32(((const uint16_t *)p)[i]);
  }
}

/* Element i of p (dt) = v, rounded once. */
NN_INLINE void nn_st_dt(void *p, int64_t i, lt_dtype dt, double v) {
  switch (dt) {
    case LT_FLOAT64: ((double *)p)[i] = v; break;
    case LT_FLOAT32: ((float *)p)[i] = (float)v; break;
    case LT_BFLOAT16: ((uint16_t *)p)[i] = lt_f32_to_bf16((float)v); break;
    default: ((uint16_t *)p)[i] = lt_f32_to_f16((float)v); break;
  }
}

/* impl(args..., DT) with the job's dtype as a constant DT, so that each
 * floating dtype gets its own specialised loop (nn_ld_dt and nn_st_dt fold
 * into plain loads and stores). */
#define NN_BY_DTYPE(dt, impl, ...)                              \
  do {                                                          \
    switch (dt) {                                               \
      case LT_FLOAT64: impl(__VA_ARGS__, LT_FLOAT64); break;    \
      case LT_FLOAT32: impl(__VA_ARGS__, LT_FLOAT32); break;    \
      case LT_BFLOAT16: impl(__VA_ARGS__, LT_BFLOAT16); break;  \
      default: impl(__VA_ARGS__, LT_FLOAT16); break;            \
    }                                                           \
  } while (0)

/* dst[k] = element k stride of src (dt), in dt's compute type. */
NN_INLINE void nn_load_run(void *restrict dst, const void *restrict src, lt_dtype dt,
                           int64_t stride, int64_t n) {
  switch (dt) {
    case LT_FLOAT64:
      if (stride == 1) {
        memcpy(dst, src, (size_t)n * sizeof(double));
      } else {
        for (int64_t k = 0; k < n; k++) ((double *)dst)[k] = ((const double *)src)[k * stride];
      }
      break;
    case LT_FLOAT32:
      if (stride == 1) {
        memcpy(dst, src, (size_t)n * sizeof(float));
      } else {
        for (int64_t k = 0; k < n; k++) ((float *)dst)[k] = ((const float *)src)[k * stride];
      }
      break;
    case LT_BFLOAT16:
      for (int64_t k = 0; k < n; k++)
        ((float *)dst)[k] = lt_bf16_to_f32(((const uint16_t *)src)[k * stride]);
      break;
    default: /* float16 */
      for (int64_t k = 0; k < n; k++)
        ((float *)dst)[k] = lt_f16_to_f32(((const uint16_t *)src)[k * stride]);
      break;
  }
}

/* dst (dt, contiguous) = src (float), rounded: float16 and bfloat16 only. */
NN_INLINE void nn_store_run(void *restrict dst, lt_dtype dt, const float *restrict src,
                            int64_t n) {
  uint16_t *d = dst;
  if (dt == LT_BFLOAT16)
    for (int64_t k = 0; k < n; k++) d[k] = lt_f32_to_bf16(src[k]);
  else
    for (int64_t k = 0; k < n; k++) d[k] = lt_f32_to_f16(src[k]);
}

/* The same for whole matrices (cpu_nn_gemm.c): rows x cols elements, rows
 * ld elements apart in src / dst, contiguous on the float side. */
void cpu_nn_widen(float *dst, const void *src, lt_dtype dt, int64_t rows, int64_t cols,
                  int64_t ld);
void cpu_nn_narrow(void *dst, lt_dtype dt, const float *src, int64_t rows, int64_t cols,
                   int64_t ld);

#endif
