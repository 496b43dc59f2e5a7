/* Random permutations for shuffling: Fisher-Yates over Philox draws.
 *
 * Step i (from n - 1 down to 1) swaps element i with element j, uniform in
 * [0, i], taken from 64 random bits: draw i is 64-bit lane i % 2 of counter
 * block (offset + i / 2) under the generator's key, the same numbering
 * rng.c uses, so a permutation uses ceil(n / 2) blocks and the generator's
 * offset moves past them. The loop is sequential by nature; a draw never
 * depends on the thread count. */
#include "core/philox.h"
#include "lt/index.h"

/* High 64 bits of a 64x64-bit product (Lemire's multiply-shift range
 * reduction: bias at most i / 2^64, far below anything observable). */
static uint64_t mul_high64(uint64_t a, uint64_t b) {
  uint64_t a_lo = (uint32_t)a, a_hi = a >> 32, b_lo = (uint32_t)b, b_hi = b >> 32;
  uint64_t lo_lo = a_lo * b_lo, hi_lo = a_hi * b_lo, lo_hi = a_lo * b_hi, hi_hi = a_hi * b_hi;
  uint64_t middle = (lo_lo >> 32) + (uint32_t)hi_lo + (uint32_t)lo_hi;
  return hi_hi + (hi_lo >> 32) + (lo_hi >> 32) + (middle >> 32);
}

static void shuffle(int64_t *perm, int64_t n, lt_rng_state *state) {
  const uint32_t key[2] = {(uint32_t)state->seed, (uint32_t)(state->seed >> 32)};
  uint32_t words[4];
  uint64_t have = UINT64_MAX; /* the block in words */
  for (int64_t i = n - 1; i >= 1; i--) {
    uint64_t block = state->offset + (uint64_t)i / 2;
    if (block != have) {
      const uint32_t counter[4] = {(uint32_t)block, (uint32_t)(block >> 32), 0, 0};
      lt_philox4x32_10(counter, key, words);
      have = block;
    }
    int lane = (int)(i % 2);
    uint64_t r = (uint64_t)words[2 * lane] << 32 | words[2 * lane + 1];
    int64_t j = (int64_t)mul_high64(r, (uint64_t)i + 1);
    int64_t swap = perm[i];
    perm[i] = perm[j];
    perm[j] = swap;
  }
  state->offset += ((uint64_t)n + 1) / 2;
}

lt_status lt_randperm(int64_t n, int64_t base, lt_rng_state *gen, lt_tensor **out) {
  *out = NULL;
  if (n < 0)
    return lt_error(LT_ERR_ARG, "randperm: n must be non-negative, got %lld", (long long)n);
  if (base > 0 && n > INT64_MAX - base)
    return lt_error(LT_ERR_ARG, "randperm: values from %lld past %lld do not fit int64",
                    (long long)base, (long long)n);
  lt_tensor *t = NULL;
  LT_TRY(lt_empty_named("randperm", &n, 1, LT_INT64, lt_cpu(), &t));
  if (lt_estimating()) { /* a shape, no data */
    *out = t;
    return LT_OK;
  }
  int64_t *perm = lt_data(t);
  for (int64_t i = 0; i < n; i++) perm[i] = i;
  lt_rng_state global = lt_rng_get_state();
  shuffle(perm, n, gen ? gen : &global);
  if (!gen) lt_rng_set_state(global);
  if (base != 0)
    for (int64_t i = 0; i < n; i++) perm[i] += base;
  *out = t;
  return LT_OK;
}
