/* Philox4x32-10, the counter-based generator of Salmon, Moraes, Dror and Shaw,
 * "Parallel random numbers: as easy as 1, 2, 3" (SC 2011): ten rounds of a
 * multiply-xor bijection turn a 128-bit counter and a 64-bit key into 128
 * random bits. Any block can be computed directly from its counter, so threads
 * fill disjoint parts of a tensor with the same numbers a single thread would.
 * Internal to the engine (engine/ops/rng.c and its test; attention's dropout
 * regenerates its mask with it in the CPU and CUDA kernels). */
#ifndef LT_CORE_PHILOX_H
#define LT_CORE_PHILOX_H

#include <stdint.h>

#define LT_PHILOX_M0 0xD2511F53u
#define LT_PHILOX_M1 0xCD9E8D57u
#define LT_PHILOX_W0 0x9E3779B9u /* golden ratio */
#define LT_PHILOX_W1 0xBB67AE85u /* sqrt(3) - 1 */

/* Callable from CUDA kernels as well (the emulator compiles them as host code). */
#ifdef __CUDACC__
#define LT_PHILOX_FN __host__ __device__ static inline
#else
#define LT_PHILOX_FN static inline
#endif

LT_PHILOX_FN void lt_philox4x32_10(const uint32_t counter[4], const uint32_t key[2],
                                   uint32_t out[4]) {
  uint32_t c0 = counter[0], c1 = counter[1], c2 = counter[2], c3 = counter[3];
  uint32_t k0 = key[0], k1 = key[1];
  for (int round = 0; round < 10; round++) {
    if (round > 0) {
      k0 += LT_PHILOX_W0;
      k1 += LT_PHILOX_W1;
    }
    uint64_t p0 = (uint64_t)LT_PHILOX_M0 * c0;
    uint64_t p1 = (uint64_t)LT_PHILOX_M1 * c2;
    uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0;
    uint32_t n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
    c1 = (uint32_t)p1;
    c3 = (uint32_t)p0;
    c0 = n0;
    c2 = n2;
  }
  out[0] = c0;
  out[1] = c1;
  out[2] = c2;
  out[3] = c3;
}

#endif
