/* Sort keys: each value mapped to an unsigned integer whose order is the
 * order lt sorts in, so that the CPU's merge sort and the CUDA kernel's
 * bitonic network compare integers only and agree on every dtype. Floats
 * flip as IEEE order requires (negative patterns reversed, the sign bit set
 * on positive ones); every NaN becomes the largest key (NaN sorts after
 * every number, PyTorch's order) and -0.0 becomes 0.0 (they are equal, so a
 * stable sort keeps their order); signed integers get their sign bit
 * flipped. A descending sort uses ~key, which puts NaN first. Shared by
 * engine/cpu/cpu_sort.c and engine/cuda/cuda_sort.cu. */
#ifndef LT_CORE_SORT_KEY_H
#define LT_CORE_SORT_KEY_H

#include <stdint.h>
#include <string.h>

#if defined(__CUDACC__)
#define LT_SORT_KEY_FN static inline __host__ __device__
#else
#define LT_SORT_KEY_FN static inline
#endif

LT_SORT_KEY_FN uint64_t lt_sort_key_f32(float f) {
  if (f != f) return UINT64_MAX;
  if (f == 0.0f) f = 0.0f; /* -0.0 -> 0.0 */
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return (u & 0x80000000u) ? (uint64_t)(uint32_t)~u : (uint64_t)(u | 0x80000000u);
}

LT_SORT_KEY_FN uint64_t lt_sort_key_f64(double d) {
  if (d != d) return UINT64_MAX;
  if (d == 0.0) d = 0.0;
  uint64_t u;
  memcpy(&u, &d, sizeof u);
  return (u & UINT64_C(0x8000000000000000)) ? ~u : (u | UINT64_C(0x8000000000000000));
}

LT_SORT_KEY_FN uint64_t lt_sort_key_i64(int64_t v) {
  return (uint64_t)v ^ UINT64_C(0x8000000000000000);
}

#endif
