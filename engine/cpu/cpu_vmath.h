/* float32 exp, tanh and erf from arithmetic, comparisons and bit operations only, so that
 * a loop calling them vectorises (they inline into the LT_CPU_CLONES loops: 4 lanes on the
 * SSE2 baseline, 8 on AVX2, 16 on AVX-512) where libm's expf, tanhf and erff are one call
 * per element.
 * Each is within 2 ulp of the exact value (checked against double libm over the whole
 * float range in tests/c/test_vmath.c); NaN gives NaN, and the limits are exact (exp: inf
 * and 0, tanh and erf: +-1).
 *
 * The polynomials are fitted here, by weighted least squares on Chebyshev nodes of the
 * functions' double values (tests/c/test_vmath.c checks the result), and evaluated by
 * Horner's rule; C11 mode keeps GCC from contracting them into FMAs, so every clone gives
 * the same bits. GELU's Phi and softmax's exp write their FMAs out: each comes as a fused
 * form (fmaf: one instruction where the CPU has FMA, the same result from libm where it is
 * compiled without) and an unfused one (a * b + c, rounded twice), and a kernel picks the
 * fused form on a CPU with FMA (vm_cpu_has_fma) and the unfused one on a CPU without, where
 * libm's fmaf per element would be 20 to 100 times slower: results are the same bits on
 * every CPU with FMA (every x86-64 since 2013), within the same error bounds elsewhere. */
#ifndef LT_CPU_VMATH_H
#define LT_CPU_VMATH_H

#include <math.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Always inlined: into a cloned loop, each copy is compiled for that clone's vector width. */
#define VM_INLINE static inline __attribute__((always_inline))

VM_INLINE float vm_from_bits(uint32_t u) {
  union { uint32_t u; float f; } v = {.u = u};
  return v.f;
}

VM_INLINE uint32_t vm_bits(float f) {
  union { float f; uint32_t u; } v = {.f = f};
  return v.u;
}

/* cond ? a : b, as bit masks: written with ?:, GCC threads the jumps of each
 * clamp through the rest of the function before it would turn them into selects, and the
 * loop no longer vectorises. */
VM_INLINE float vm_select(int cond, float a, float b) {
  const uint32_t mask = 0u - (uint32_t)(cond != 0);
  return vm_from_bits((vm_bits(a) & mask) | (vm_bits(b) & ~mask));
}

/* Whether this CPU has FMA instructions (or the build targets one that must: arm64's fmaf is
 * an instruction). LT_CPU_NO_FMA=1 in the environment says no, so that tests run the unfused
 * kernels on any machine. Found once; the kernels' threads may ask at the same time, hence
 * the atomic (each would find the same answer). */
VM_INLINE bool vm_cpu_has_fma(void) {
  static _Atomic int known = -1;
  int has = atomic_load_explicit(&known, memory_order_relaxed);
  if (has < 0) {
    const char *off = getenv("LT_CPU_NO_FMA");
    has = off == NULL || strcmp(off, "1") != 0;
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    has = has && __builtin_cpu_supports("fma");
#endif
    atomic_store_explicit(&known, has, memory_order_relaxed);
  }
  return has;
}

/* a * b + c: rounded once (fmaf), or twice (the unfused form; C11 mode does not contract). */
#define VM_FUSED(a, b, c) fmaf((a), (b), (c))
#define VM_UNFUSED(a, b, c) ((a) * (b) + (c))

/* 2^n for n in [-126, 127], built in the exponent field. */
VM_INLINE float vm_pow2i(int32_t n) { return vm_from_bits((uint32_t)(n + 127) << 23); }

/* exp(x) = 2^k exp(r): k = round(x / ln 2), r = x - k ln 2 in [-ln2/2, ln2/2] (ln 2 in two
 * parts, so k ln 2 is exact), exp(r) by its Taylor series to r^7 (truncation below 6e-9).
 * 2^k is applied as two factors, so that k down to -150 (subnormal results) and up to 128
 * (overflow to inf) stay in the exponent field's range. Below -104, where exp rounds to 0,
 * the lanes compute exp(0) and are replaced by 0 at the end: a multiply that underflows
 * takes a microcode assist (3x slower on AMD Zen), and softmax rows of masked -inf and
 * causal attention are full of such lanes. */
VM_INLINE float vm_expf(float x) {
  const float log2e = 1.44269504088896341f, ln2_hi = 0.693145751953125f,
              ln2_lo = 1.42860682030941723e-6f, round_magic = 12582912.0f; /* 1.5 * 2^23 */
  const int zero = x < -104.0f;                /* NaN is not */
  float xc = vm_select(x > 89.0f, 89.0f, x);   /* NaN passes the clamp */
  xc = vm_select(zero, 0.0f, xc);
  float k = (xc * log2e + round_magic) - round_magic; /* round to nearest */
  k = vm_select(k == k, k, 0.0f);                     /* NaN: r below carries it */
  const int32_t n = (int32_t)k;
  const float r = (xc - k * ln2_hi) - k * ln2_lo;
  float p = 1.0f / 5040.0f;
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const int32_t n1 = n / 2;
  return vm_select(zero, 0.0f, p * vm_pow2i(n1) * vm_pow2i(n - n1));
}

/* exp(x) for the arguments of a softmax row, x - max <= 0 (right up to x = 88): no
 * overflow clamp, one factor 2^k, and a degree-5 polynomial for exp(r) (1 + r q(r), fitted
 * here for the least largest relative error on [-ln2/2, ln2/2] by Lawson-weighted least
 * squares on Chebyshev nodes: 9.2e-8, 1 ulp before rounding), about a quarter less work
 * than vm_expf. Results below 2^-125.5 (x < -87) are 0, the subnormals included: a
 * softmax weight of 1e-38 changes no float32 sum, and an underflowing multiply takes a
 * microcode assist. exp(0) is exactly 1 (the row's maximum); NaN gives NaN, -inf 0;
 * within 2 ulp of exp on [-87, 0] (tests/c/test_vmath.c). */
/* The function is written once for a float and for cpu_rows.h's vector of floats: T the
 * type, M a comparison's result, SEL(m, a, b) the select, FMA(a, b, c) a * b + c rounded
 * once (fmaf, or its lanes': one instruction in the FMA clones, the same result from libm
 * in the baseline), POW2(t) 2^k from t = 1.5 * 2^23 + k, whose low bits are k: shifted
 * into the exponent field, the 1.5 * 2^23 above them falls out, so there is no conversion
 * (and a NaN's bits give a factor that keeps the result NaN). k ln2_hi is exact (ln2_hi
 * has 16 bits), so fusing it changes nothing; the low part's product is rounded once. */
#define VM_DEFINE_EXPF_NEG(NAME, T, M, SEL, FMA, POW2)                                        \
  VM_INLINE T NAME(T x) {                                                                     \
    const float log2e = 1.44269504088896341f, ln2_hi = 0.693145751953125f,                   \
                ln2_lo = 1.42860682030941723e-6f, round_magic = 12582912.0f; /* 1.5 * 2^23 */ \
    const T zero = (T){0};                                                                    \
    const M under = x < -87.0f; /* NaN is not */                                              \
    const T xc = SEL(under, zero, x);                                                         \
    const T t = FMA(xc, zero + log2e, zero + round_magic), k = t - round_magic;              \
    const T r = FMA(k, zero - ln2_lo, FMA(k, zero - ln2_hi, xc));                             \
    T q = zero + 8.290314116e-03f;                                                            \
    q = FMA(q, r, zero + 4.189793020e-02f);                                                   \
    q = FMA(q, r, zero + 1.666763574e-01f);                                                   \
    q = FMA(q, r, zero + 4.999915063e-01f);                                                   \
    q = FMA(q, r, zero + 9.999997020e-01f);                                                   \
    return SEL(under, zero, FMA(r, q, zero + 1.0f) * POW2(t));                                \
  }

#define VM_POW2_OF_SHIFTED(t) vm_from_bits((vm_bits(t) + 127u) << 23)
VM_DEFINE_EXPF_NEG(vm_expf_neg, float, int, vm_select, VM_FUSED, VM_POW2_OF_SHIFTED)
VM_DEFINE_EXPF_NEG(vm_expf_neg_unfused, float, int, vm_select, VM_UNFUSED, VM_POW2_OF_SHIFTED)

VM_INLINE float vm_copysign(float magnitude, float sign) {
  return vm_from_bits((vm_bits(magnitude) & 0x7fffffffu) | (vm_bits(sign) & 0x80000000u));
}

VM_INLINE float vm_fabs(float x) { return vm_from_bits(vm_bits(x) & 0x7fffffffu); }

/* tanh(|x|): below 0.55 an odd polynomial (tanh(x)/x in x^2, relative error 5e-8),
 * above it 1 - 2 / (exp(2|x|) + 1), which loses no more than an ulp to cancellation there
 * and reaches 1 exactly (exp overflows to inf for |x| > 44). */
VM_INLINE float vm_tanhf(float x) {
  const float a = vm_fabs(x), a2 = a * a;
  float p = -6.269251928e-03f;
  p = p * a2 + 2.106690966e-02f;
  p = p * a2 + -5.385060608e-02f;
  p = p * a2 + 1.333255917e-01f;
  p = p * a2 + -3.333331645e-01f;
  p = p * a2 + 1.0f;
  const float small = a * p;
  const float large = 1.0f - 2.0f / (vm_expf(2.0f * a) + 1.0f);
  return vm_copysign(vm_select(a < 0.55f, small, large), x);
}

/* erf(|x|): below 0.8, |x| P(x^2) (erf(x)/x fitted on [0, 0.8] to degree 7 in x^2); on
 * [0.8, 3.93), 1 - exp(-x^2) g(x) with g = erfc(x) exp(x^2), smooth and between 0.14 and
 * 0.49, fitted in t = (x - 2.365) / 1.565 on [-1, 1]; from 3.93 on, erf rounds to 1 in
 * float32. */
VM_INLINE float vm_erff(float x) {
  const float a = vm_fabs(x), a2 = a * a;
  float p = -1.131004683e-05f;
  p = p * a2 + 1.170122850e-04f;
  p = p * a2 + -8.529868210e-04f;
  p = p * a2 + 5.223442335e-03f;
  p = p * a2 + -2.686608583e-02f;
  p = p * a2 + 1.128379107e-01f;
  p = p * a2 + -3.761263788e-01f;
  p = p * a2 + 1.128379226e+00f;
  const float small = a * p;
  const float t = (a - 2.365f) * (1.0f / 1.565f);
  float g = 3.330753680e-05f;
  g = g * t + -9.315135685e-05f;
  g = g * t + 1.292192755e-04f;
  g = g * t + -2.883554553e-04f;
  g = g * t + 7.974228356e-04f;
  g = g * t + -1.851620502e-03f;
  g = g * t + 4.052631091e-03f;
  g = g * t + -8.716866374e-03f;
  g = g * t + 1.814761758e-02f;
  g = g * t + -3.633278608e-02f;
  g = g * t + 6.972353905e-02f;
  g = g * t + -1.276157796e-01f;
  g = g * t + 2.213182896e-01f;
  const float mid = 1.0f - vm_expf(-a2) * g;
  float r = vm_select(a < 0.8f, small, mid);
  r = vm_select(a < 3.93f, r, vm_select(a == a, 1.0f, a)); /* NaN stays NaN */
  return vm_copysign(r, x);
}

/* GELU's Phi(x) - 1/2 = erf(x / sqrt 2) / 2, where what counts is the error next to the 1/2
 * it is added to, not the relative error of erf: x P(x^2) / Q(x^2), P of degree 6 and Q of
 * degree 4, a rational fit here minimising the largest absolute error on [0, 5.5] (iterated
 * linear least squares with Lawson's weights, in x / 5.5 for conditioning): 2e-8 before
 * float32 rounding, and GELU built on it, x (1/2 + Phi - 1/2), is within 1.03e-6 of the
 * exact value on [-8, 8] (PyTorch's float32 GELU: 1.2e-6). From 5.5 on it is +-1/2 exactly
 * (1 - Phi(5.5) = 1.9e-8), so GELU saturates to x and to -0; NaN stays NaN. The lanes past
 * 5.5 compute whatever the polynomials give (inf / inf for huge x) and are replaced, so
 * there is no clamp. Horner's steps are FMAs (fused or not, see the top); a third of the
 * work of erf plus a division. */
#define VM_DEFINE_PHI_CENTERED(NAME, FMA)                                                    \
  VM_INLINE float NAME(float x) {                                                           \
    const uint32_t sign = vm_bits(x) & 0x80000000u;                                         \
    const int saturated = vm_fabs(x) > 5.5f; /* NaN is not */                               \
    const float t = x * x;                                                                  \
    float p = 1.117549456e-10f;                                                             \
    p = FMA(p, t, -2.208183858e-08f);                                                       \
    p = FMA(p, t, 3.240977094e-06f);                                                        \
    p = FMA(p, t, 1.703696616e-04f);                                                        \
    p = FMA(p, t, 4.509141669e-03f);                                                        \
    p = FMA(p, t, 3.592191264e-02f);                                                        \
    p = FMA(p, t, 3.989421427e-01f); /* 1 / sqrt(2 pi) */                                   \
    float q = 6.232471787e-05f;                                                             \
    q = FMA(q, t, 1.830621623e-03f);                                                        \
    q = FMA(q, t, 2.909130976e-02f);                                                        \
    q = FMA(q, t, 2.567074597e-01f);                                                        \
    q = FMA(q, t, 1.0f);                                                                    \
    return vm_select(saturated, vm_from_bits(sign | vm_bits(0.5f)), x * p / q);             \
  }
VM_DEFINE_PHI_CENTERED(vm_phi_centered, VM_FUSED)
VM_DEFINE_PHI_CENTERED(vm_phi_centered_unfused, VM_UNFUSED)

/* The form a kernel chose (vm_cpu_has_fma): fused a constant where inlined. */
VM_INLINE float vm_exp_neg_for(bool fused, float x) {
  return fused ? vm_expf_neg(x) : vm_expf_neg_unfused(x);
}
VM_INLINE float vm_phi_centered_for(bool fused, float x) {
  return fused ? vm_phi_centered(x) : vm_phi_centered_unfused(x);
}

#endif
