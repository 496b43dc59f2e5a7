/* The seeded random number generator. Counter-based (Philox4x32-10, Salmon et
 * al. 2011, "Parallel random numbers: as easy as 1, 2, 3"), so that element i of
 * a random tensor depends only on the seed and the offset, never on how many
 * threads fill it. */
#ifndef LT_RNG_H
#define LT_RNG_H

#include "lt/api.h"

#include <stdint.h>

#include "lt/tensor.h"

typedef struct lt_rng_state {
  uint64_t seed;
  uint64_t offset; /* counter blocks consumed so far */
} lt_rng_state;

LT_API void lt_manual_seed(uint64_t seed);
LT_API lt_rng_state lt_rng_get_state(void);
LT_API void lt_rng_set_state(lt_rng_state s);

/* Fill t in place: uniform [low, high), normal(mean, std), integers in
 * [low, high] inclusive (as Lua's math.random), Bernoulli(p) as 0/1. */
LT_API lt_status lt_uniform_(lt_tensor *t, double low, double high);
LT_API lt_status lt_normal_(lt_tensor *t, double mean, double std);
LT_API lt_status lt_randint_(lt_tensor *t, int64_t low, int64_t high);
LT_API lt_status lt_bernoulli_(lt_tensor *t, double p);

#endif
