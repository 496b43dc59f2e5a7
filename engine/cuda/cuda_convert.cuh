/* Element loads and stores with conversion, on the device: every storage
 * dtype read as a compute type (float for float32/float16/bfloat16, double,
 * int64 for integers and bool) and written back with PyTorch's casts, the
 * same rules as the CPU's cpu_convert.c: floats to integers truncate toward
 * zero (NaN gives 0, out of range saturates), integers wrap, anything to bool
 * is != 0, 16-bit floats round to nearest even. */
#ifndef LT_CUDA_CONVERT_CUH
#define LT_CUDA_CONVERT_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#include "cuda/cuda_internal.h"

__device__ inline int64_t cuda_double_to_int64(double v) {
  if (v != v) return 0;
  if (v >= 0x1p63) return INT64_MAX;
  if (v < -0x1p63) return INT64_MIN;
  return (int64_t)v;
}

__device__ inline int32_t cuda_double_to_int32(double v) {
  if (v != v) return 0;
  if (v >= 0x1p31) return INT32_MAX;
  if (v <= -0x1p31 - 1.0) return INT32_MIN;
  return (int32_t)v;
}

/* 16-bit floats travel as raw bits so that no operand needs the CUDA types'
 * alignment or constructors. */
__device__ inline float cuda_half_bits_to_float(uint16_t b) {
  return __half2float(__ushort_as_half(b));
}
__device__ inline float cuda_bf16_bits_to_float(uint16_t b) {
  return __bfloat162float(__ushort_as_bfloat16(b));
}
/* Finite values and infinities: the hardware's round-to-nearest-even, the
 * same results as lt_float_to_half / lt_float_to_bfloat16. NaN: the CPU's
 * patterns (half: 0x7E00 with the sign kept; bfloat16: 0x7FC0), where cvt
 * would give the canonical 0x7FFF, so that both devices store the same bits. */
__device__ inline uint16_t cuda_float_to_half_bits(float f) {
  if (f != f) return (uint16_t)(((__float_as_uint(f) >> 16) & 0x8000u) | 0x7E00u);
  return __half_as_ushort(__float2half_rn(f));
}
__device__ inline uint16_t cuda_float_to_bf16_bits(float f) {
  if (f != f) return (uint16_t)0x7FC0u;
  return __bfloat16_as_ushort(__float2bfloat16_rn(f));
}

/* Loads one element of dtype dt at p as the compute type C. */
template <typename C> __device__ inline C cuda_load(const char *p, int dt);

template <> __device__ inline float cuda_load<float>(const char *p, int dt) {
  switch (dt) {
    case LT_FLOAT32: return *(const float *)p;
    case LT_FLOAT64: return (float)*(const double *)p;
    case LT_FLOAT16: return cuda_half_bits_to_float(*(const uint16_t *)p);
    case LT_BFLOAT16: return cuda_bf16_bits_to_float(*(const uint16_t *)p);
    case LT_INT64: return (float)*(const int64_t *)p;
    case LT_INT32: return (float)*(const int32_t *)p;
    case LT_UINT8: return (float)*(const uint8_t *)p;
    default: return *(const uint8_t *)p != 0 ? 1.0f : 0.0f;
  }
}

template <> __device__ inline double cuda_load<double>(const char *p, int dt) {
  switch (dt) {
    case LT_FLOAT32: return *(const float *)p;
    case LT_FLOAT64: return *(const double *)p;
    case LT_FLOAT16: return cuda_half_bits_to_float(*(const uint16_t *)p);
    case LT_BFLOAT16: return cuda_bf16_bits_to_float(*(const uint16_t *)p);
    case LT_INT64: return (double)*(const int64_t *)p;
    case LT_INT32: return *(const int32_t *)p;
    case LT_UINT8: return *(const uint8_t *)p;
    default: return *(const uint8_t *)p != 0 ? 1.0 : 0.0;
  }
}

template <> __device__ inline int64_t cuda_load<int64_t>(const char *p, int dt) {
  switch (dt) {
    case LT_FLOAT32: return cuda_double_to_int64(*(const float *)p);
    case LT_FLOAT64: return cuda_double_to_int64(*(const double *)p);
    case LT_FLOAT16: return cuda_double_to_int64(cuda_half_bits_to_float(*(const uint16_t *)p));
    case LT_BFLOAT16: return cuda_double_to_int64(cuda_bf16_bits_to_float(*(const uint16_t *)p));
    case LT_INT64: return *(const int64_t *)p;
    case LT_INT32: return *(const int32_t *)p;
    case LT_UINT8: return *(const uint8_t *)p;
    default: return *(const uint8_t *)p != 0;
  }
}

/* Stores v (compute type C) as dtype dt at p. */
template <typename C> __device__ inline void cuda_store(char *p, int dt, C v);

template <> __device__ inline void cuda_store<float>(char *p, int dt, float v) {
  switch (dt) {
    case LT_FLOAT32: *(float *)p = v; break;
    case LT_FLOAT64: *(double *)p = v; break;
    case LT_FLOAT16: *(uint16_t *)p = cuda_float_to_half_bits(v); break;
    case LT_BFLOAT16: *(uint16_t *)p = cuda_float_to_bf16_bits(v); break;
    case LT_INT64: *(int64_t *)p = cuda_double_to_int64(v); break;
    case LT_INT32: *(int32_t *)p = cuda_double_to_int32(v); break;
    /* uint8 wraps the truncated value, as PyTorch's cast does */
    case LT_UINT8: *(uint8_t *)p = (uint8_t)cuda_double_to_int64(v); break;
    default: *(uint8_t *)p = v != 0.0f; break;
  }
}

template <> __device__ inline void cuda_store<double>(char *p, int dt, double v) {
  switch (dt) {
    case LT_FLOAT32: *(float *)p = (float)v; break;
    case LT_FLOAT64: *(double *)p = v; break;
    case LT_FLOAT16: *(uint16_t *)p = cuda_float_to_half_bits((float)v); break; /* via float, as the CPU */
    case LT_BFLOAT16: *(uint16_t *)p = cuda_float_to_bf16_bits((float)v); break;
    case LT_INT64: *(int64_t *)p = cuda_double_to_int64(v); break;
    case LT_INT32: *(int32_t *)p = cuda_double_to_int32(v); break;
    case LT_UINT8: *(uint8_t *)p = (uint8_t)cuda_double_to_int64(v); break;
    default: *(uint8_t *)p = v != 0.0; break;
  }
}

template <> __device__ inline void cuda_store<int64_t>(char *p, int dt, int64_t v) {
  switch (dt) {
    case LT_FLOAT32: *(float *)p = (float)v; break;
    case LT_FLOAT64: *(double *)p = (double)v; break;
    case LT_FLOAT16: *(uint16_t *)p = cuda_float_to_half_bits((float)v); break;
    case LT_BFLOAT16: *(uint16_t *)p = cuda_float_to_bf16_bits((float)v); break;
    case LT_INT64: *(int64_t *)p = v; break;
    case LT_INT32: *(int32_t *)p = (int32_t)(uint32_t)(uint64_t)v; break;
    case LT_UINT8: *(uint8_t *)p = (uint8_t)(uint64_t)v; break;
    default: *(uint8_t *)p = v != 0; break;
  }
}

#endif
