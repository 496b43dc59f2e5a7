/* Hot CPU loops built three times: for the x86-64 baseline (SSE2: 4 floats or
 * 2 doubles per instruction), for x86-64-v3 (AVX2 and FMA: 8 and 4) and for
 * x86-64-v4 (AVX-512: 16 and 8), picked once at load time by the CPU lt runs on
 * (GCC's target_clones, an ifunc). The engine is built for the baseline, so that
 * one binary runs everywhere. Results are the same bits in all: the clones differ
 * only in vector width, C11 mode keeps GCC from contracting a * b + c into an FMA,
 * the few FMAs that a kernel wants are written out as fmaf (the baseline copy,
 * which an FMA CPU without AVX2 runs, gets libm's correctly rounded result), and
 * the reductions keep their explicit order (no -ffast-math), so nothing is
 * reassociated. A CPU without FMA runs those kernels' unfused forms instead
 * (cpu_vmath.h): the same error bounds, other bits. On an AVX-512 machine the float32 exp, tanh and GELU
 * loops run about 1.4-1.7x faster than with AVX2 alone (0.5M elements, 1 thread). */
#ifndef LT_CPU_CLONES_H
#define LT_CPU_CLONES_H

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__) && \
    !defined(LT_NO_CPU_CLONES)
#define LT_CPU_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define LT_CPU_CLONES
#endif

#endif
