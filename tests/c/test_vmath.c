/* cpu/cpu_vmath.h's float32 exp, tanh and erf (and softmax's exp of x <= 0) against double
 * libm rounded to float, over every 251st bit pattern of the float range (both signs,
 * subnormals, inf, NaN) and densely where each switches formula: at most 2 ulp apart
 * everywhere, the limits exact; the kernels' forms with FMAs unfused too. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>

#include "check.h"
#include "cpu/cpu_vmath.h"

/* Distance in units in the last place between two floats of the same sign class; the
 * ordered integer line of the bit patterns makes neighbours 1 apart (0 and -0 equal). */
static int64_t ulp_distance(float a, float b) {
  if (isnan(a) || isnan(b)) return isnan(a) && isnan(b) ? 0 : INT64_MAX;
  int64_t ia = (int32_t)vm_bits(a), ib = (int32_t)vm_bits(b);
  if (ia < 0) ia = (int64_t)INT32_MIN - ia;
  if (ib < 0) ib = (int64_t)INT32_MIN - ib;
  return ia > ib ? ia - ib : ib - ia;
}

typedef struct worst { int64_t ulps; float x; } worst;

static void consider(worst *w, float x, float got, double want) {
  const int64_t d = ulp_distance(got, (float)want);
  if (d > w->ulps) w->ulps = d, w->x = x;
}

static void sweep(const char *name, float (*f)(float), double (*ref)(double)) {
  worst w = {0, 0.0f};
  for (uint64_t u = 0; u <= UINT32_MAX; u += 251) {
    const float x = vm_from_bits((uint32_t)u);
    consider(&w, x, f(x), ref(x));
  }
  /* Densely around the switches and the limits. */
  const float edges[] = {0.55f, 0.8f, 3.93f, 88.72f, -87.33f, -103.97f, 9.0f};
  for (size_t e = 0; e < sizeof edges / sizeof edges[0]; e++) {
    float x = edges[e];
    for (int i = 0; i < 20000; i++) x = nextafterf(x, -INFINITY);
    for (int i = 0; i < 40000; i++, x = nextafterf(x, INFINITY)) {
      consider(&w, x, f(x), ref(x));
      consider(&w, -x, f(-x), ref(-x));
    }
  }
  printf("%s: worst %lld ulp at %.9g\n", name, (long long)w.ulps, w.x);
  CHECK(w.ulps <= 2);
}

/* vm_phi_centered (GELU's Phi(x) - 1/2), its FMAs fused or not, is held to an absolute
 * bound, what GELU's 1/2 + (Phi - 1/2) needs, over every 251st finite pattern and densely
 * on [-7, 7]. */
static void sweep_gelu_phi(const char *name, float (*phi)(float), double bound) {
  double worst = 0.0;
  float at = 0.0f;
  for (uint64_t u = 0; u <= UINT32_MAX; u += 251) {
    const float x = vm_from_bits((uint32_t)u);
    if (isnan(x)) continue;
    const double d = fabs((double)phi(x) - erf(x * 0.70710678118654752440) / 2);
    if (d > worst) worst = d, at = x;
  }
  for (int i = -7000000; i <= 7000000; i++) {
    const float x = (float)i * 1e-6f;
    const double d = fabs((double)phi(x) - erf(x * 0.70710678118654752440) / 2);
    if (d > worst) worst = d, at = x;
  }
  printf("Phi - 1/2 for gelu (%s): worst %.3g at %.9g\n", name, worst, at);
  CHECK(worst <= bound); /* the float32 roundings: the fit alone is 2e-8 */
}

/* vm_expf_neg on its domain, softmax's x - max in [-87, 0], its FMAs fused or not: every
 * 13th float (all of their exponents and the polynomial's whole range many times over),
 * 2 ulp. */
static void sweep_exp_neg(const char *name, float (*exp_neg)(float)) {
  worst w = {0, 0.0f};
  for (uint32_t u = vm_bits(-0.0f); u <= vm_bits(-87.0f); u += 13) {
    const float x = vm_from_bits(u);
    consider(&w, x, exp_neg(x), exp(x));
  }
  printf("exp for x <= 0 (%s): worst %lld ulp at %.9g\n", name, (long long)w.ulps, w.x);
  CHECK(w.ulps <= 2);
}

static float vexp(float x) { return vm_expf(x); }
static float vtanh(float x) { return vm_tanhf(x); }
static float verf(float x) { return vm_erff(x); }
static float vphi(float x) { return vm_phi_centered(x); }
static float vphi_unfused(float x) { return vm_phi_centered_unfused(x); }
static float vexp_neg(float x) { return vm_expf_neg(x); }
static float vexp_neg_unfused(float x) { return vm_expf_neg_unfused(x); }

int main(void) {
  sweep("exp", vexp, exp);
  sweep("tanh", vtanh, tanh);
  sweep("erf", verf, erf);
  sweep_gelu_phi("fused", vphi, 2e-7);
  sweep_gelu_phi("unfused", vphi_unfused, 2.5e-7); /* rounded twice per Horner step */
  sweep_exp_neg("fused", vexp_neg);
  sweep_exp_neg("unfused", vexp_neg_unfused);
  CHECK(vm_expf_neg(0.0f) == 1.0f && vm_expf_neg(-INFINITY) == 0.0f && vm_expf_neg(-88.0f) == 0.0f &&
        isnan(vm_expf_neg(NAN)));
  CHECK(vm_expf_neg_unfused(0.0f) == 1.0f && vm_expf_neg_unfused(-INFINITY) == 0.0f &&
        vm_expf_neg_unfused(-88.0f) == 0.0f && isnan(vm_expf_neg_unfused(NAN)));
  CHECK(vm_phi_centered_unfused(INFINITY) == 0.5f && vm_phi_centered_unfused(-INFINITY) == -0.5f &&
        isnan(vm_phi_centered_unfused(NAN)) && signbit(vm_phi_centered_unfused(-0.0f)));
  CHECK(vm_phi_centered(INFINITY) == 0.5f && vm_phi_centered(-INFINITY) == -0.5f &&
        vm_phi_centered(5.6f) == 0.5f && vm_phi_centered(-1e30f) == -0.5f && isnan(vm_phi_centered(NAN)) &&
        signbit(vm_phi_centered(-0.0f)) && vm_phi_centered(0.0f) == 0.0f);
  CHECK(vm_expf(INFINITY) == INFINITY && vm_expf(-INFINITY) == 0.0f && vm_expf(100.0f) == INFINITY);
  CHECK(vm_tanhf(INFINITY) == 1.0f && vm_tanhf(-INFINITY) == -1.0f && vm_tanhf(20.0f) == 1.0f);
  CHECK(vm_erff(INFINITY) == 1.0f && vm_erff(-INFINITY) == -1.0f && vm_erff(5.0f) == 1.0f);
  CHECK(isnan(vm_expf(NAN)) && isnan(vm_tanhf(NAN)) && isnan(vm_erff(NAN)));
  CHECK(signbit(vm_tanhf(-0.0f)) && signbit(vm_erff(-0.0f)) && vm_expf(-0.0f) == 1.0f);
  return check_summary("test_vmath");
}
