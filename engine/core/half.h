/* The 16-bit float conversions as inline functions, for the kernels that
 * convert whole buffers (a call per element would dominate); lt/dtype.h's
 * lt_float_to_half and friends are these. */
#ifndef LT_CORE_HALF_H
#define LT_CORE_HALF_H

#include <math.h>
#include <stdint.h>
#include <string.h>

static inline uint32_t lt_float_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

static inline float lt_bits_float(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

/* float -> IEEE half, round to nearest even. Integer arithmetic on the bit
 * pattern gives the same results as c10::Half's conversion (the FP16 library's
 * fp16_ieee_from_fp32_value): overflow to infinity, gradual underflow to
 * subnormals, every NaN to the quiet NaN 0x7E00 with the sign kept. */
static inline uint16_t lt_f32_to_f16(float f) {
  uint32_t x = lt_float_bits(f);
  uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
  uint32_t abs = x & 0x7FFFFFFFu;

  if (abs > 0x7F800000u) return sign | 0x7E00u;      /* NaN */
  if (abs >= 0x477FF000u) return sign | 0x7C00u;     /* >= 65520: rounds to inf */
  if (abs >= 0x38800000u) {                          /* normal half: >= 2^-14 */
    /* Rebias the exponent (127 -> 15) and drop 13 mantissa bits, rounding to
     * nearest even; a carry out of the mantissa correctly bumps the exponent. */
    uint32_t h = (abs - 0x38000000u) >> 13;
    uint32_t rest = abs & 0x1FFFu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) h++;
    return sign | (uint16_t)h;
  }
  if (abs < 0x33000000u) return sign;                /* < 2^-25: rounds to zero */
  /* Subnormal half: value = m * 2^-24 with m = full mantissa >> shift. */
  uint32_t exponent = abs >> 23;                     /* 102 .. 112 */
  uint32_t mantissa = (abs & 0x7FFFFFu) | 0x800000u; /* implicit leading 1 */
  uint32_t shift = 126u - exponent;                  /* 14 .. 24 */
  uint32_t h = mantissa >> shift;
  uint32_t rest = mantissa & ((1u << shift) - 1u);
  uint32_t half_way = 1u << (shift - 1u);
  if (rest > half_way || (rest == half_way && (h & 1u))) h++;
  return sign | (uint16_t)h;
}

/* half -> float is exact: every half is a float. */
static inline float lt_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t exponent = (h >> 10) & 0x1Fu;
  uint32_t mantissa = h & 0x3FFu;
  if (exponent == 0x1Fu) /* inf or NaN, payload kept */
    return lt_bits_float(sign | 0x7F800000u | (mantissa << 13));
  if (exponent == 0) {
    /* zero or subnormal: mantissa * 2^-24, exact in float */
    float v = (float)mantissa * 0x1p-24f;
    return sign ? -v : v;
  }
  return lt_bits_float(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

/* float -> bfloat16 as c10::BFloat16's round_to_nearest_even: add the rounding
 * bias to the full pattern and keep the top half; NaN becomes 0x7FC0. */
static inline uint16_t lt_f32_to_bf16(float f) {
  if (isnan(f)) return 0x7FC0u;
  uint32_t x = lt_float_bits(f);
  uint32_t bias = ((x >> 16) & 1u) + 0x7FFFu;
  return (uint16_t)((x + bias) >> 16);
}

static inline float lt_bf16_to_f32(uint16_t b) {
  return lt_bits_float((uint32_t)b << 16);
}

#endif
