/* The CPU clones' promise (cpu/cpu_clones.h): every copy of a kernel gives the same bits,
 * with FMA instructions or without. The float32 functions that write their FMAs out (GELU's
 * Phi - 1/2, softmax's exponential, the row kernels' exp-sum on 16-float vectors) are
 * compiled here for the x86-64 baseline, where fmaf is libm's, and for x86-64-v3 and v4,
 * where it is one instruction, and run on the same inputs on each level this CPU has: every
 * result must equal the baseline's, bit for bit (a NaN any NaN). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "cpu/cpu_rows.h"
#include "cpu/cpu_vmath.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)

enum { N = 1 << 16, CLASSES = 76, ROWS = 4 };

/* Each level's copy of the kernels: ATTR a target attribute, or nothing for the baseline. */
#define LEVEL_KERNELS(SUFFIX, ATTR)                                                         \
  ATTR static void phi_##SUFFIX(const float *x, float *y) {                                \
    for (int i = 0; i < N; i++) y[i] = vm_phi_centered(x[i]);                              \
  }                                                                                        \
  ATTR static void exp_##SUFFIX(const float *x, float *y) {                                \
    for (int i = 0; i < N; i++) y[i] = vm_expf_neg(-fabsf(x[i]));                          \
  }                                                                                        \
  ATTR static void rows_##SUFFIX(const float *z, float *probs, double *sums) {             \
    for (int r = 0; r + ROWS <= N / CLASSES; r += ROWS) {                                  \
      const float *zr = z + (int64_t)r * CLASSES;                                          \
      float max[ROWS];                                                                     \
      rows_max_f32(zr, CLASSES, CLASSES, ROWS, max);                                       \
      rows_reduce_f32(ROW_EXP, zr, NULL, probs + (int64_t)r * CLASSES, CLASSES, CLASSES,   \
                      max, ROWS, sums + r);                                                \
    }                                                                                      \
  }

LEVEL_KERNELS(base, )
LEVEL_KERNELS(v3, __attribute__((target("arch=x86-64-v3"))))
LEVEL_KERNELS(v4, __attribute__((target("arch=x86-64-v4"))))

typedef struct level {
  const char *name;
  void (*phi)(const float *, float *);
  void (*exp)(const float *, float *);
  void (*rows)(const float *, float *, double *);
} level;

static float x[N], want_phi[N], want_exp[N], want_probs[N], got_phi[N], got_exp[N], got_probs[N];
static double want_sums[N / CLASSES], got_sums[N / CLASSES];

/* Inputs: a sweep of [-90, 90] (GELU's saturation at 5.5, exp's underflow at -87), the bit
 * patterns of small and tiny values, and the specials. */
static void make_inputs(void) {
  for (int i = 0; i < N; i++) x[i] = -90.0f + 180.0f * (float)i / (float)N;
  for (int i = 0; i < 4096; i++) x[i * 16 + 1] = vm_from_bits((uint32_t)i * 262147u);
  x[3] = INFINITY, x[5] = -INFINITY, x[7] = NAN, x[9] = -0.0f, x[11] = 5.5f, x[13] = -87.0f;
}

/* Results that differ in their bits; two NaNs are the same result whatever their sign and
 * payload (x86's default NaN has the sign set, a propagated one keeps its operand's). */
static int differing_floats(const float *a, const float *b, int count) {
  int n = 0;
  for (int i = 0; i < count; i++) n += !(isnan(a[i]) && isnan(b[i])) && memcmp(&a[i], &b[i], sizeof *a) != 0;
  return n;
}

static int differing_doubles(const double *a, const double *b, int count) {
  int n = 0;
  for (int i = 0; i < count; i++) n += !(isnan(a[i]) && isnan(b[i])) && memcmp(&a[i], &b[i], sizeof *a) != 0;
  return n;
}

static void compare(const level *l) {
  l->phi(x, got_phi);
  l->exp(x, got_exp);
  l->rows(x, got_probs, got_sums);
  const int phi = differing_floats(got_phi, want_phi, N);
  const int ex = differing_floats(got_exp, want_exp, N);
  const int probs = differing_floats(got_probs, want_probs, N);
  const int sums = differing_doubles(got_sums, want_sums, N / CLASSES);
  printf("%s against the baseline: %d, %d, %d and %d results differ (Phi, exp, row exps, row sums)\n",
         l->name, phi, ex, probs, sums);
  CHECK(phi == 0 && ex == 0 && probs == 0 && sums == 0);
}

int main(void) {
  make_inputs();
  phi_base(x, want_phi);
  exp_base(x, want_exp);
  rows_base(x, want_probs, want_sums);
  __builtin_cpu_init();
  const level levels[] = {{"x86-64-v3", phi_v3, exp_v3, rows_v3}, {"x86-64-v4", phi_v4, exp_v4, rows_v4}};
  const int supported[] = {__builtin_cpu_supports("x86-64-v3"), __builtin_cpu_supports("x86-64-v4")};
  int compared = 0;
  for (int i = 0; i < 2; i++) {
    if (supported[i]) {
      compare(&levels[i]);
      compared++;
    } else {
      printf("%s: not on this CPU, not compared\n", levels[i].name);
    }
  }
  CHECK(want_exp[3] == 0.0f && isnan(want_exp[7]) && want_phi[3] == 0.5f && isnan(want_phi[7]));
  if (compared == 0) printf("test_clone_bits: only the baseline runs here\n");
  return check_summary("test_clone_bits");
}

#else

int main(void) {
  printf("test_clone_bits: the clones are built by GCC on x86-64 only; nothing to compare here\n");
  return 0;
}

#endif
