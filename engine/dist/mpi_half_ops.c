/* Reductions of float16 and bfloat16 for MPI, which has no 16-bit float
 * types: the elements travel as 16-bit integers, and these user-defined ops
 * widen each pair to float, combine it and round back (to nearest even, as
 * lt's own kernels), so every step rounds as NCCL's 16-bit reductions do. */
#include <stdint.h>

#include "dist/mpi_internal.h"
#include "lt/dtype.h"

/* NaN wins max and min, as PyTorch's (MPI's own MPI_MAX on floats does not say). */
static inline float op_max(float x, float y) { return (x > y || x != x) ? x : y; }
static inline float op_min(float x, float y) { return (x < y || x != x) ? x : y; }
static inline float op_sum(float x, float y) { return x + y; }
static inline float op_prod(float x, float y) { return x * y; }

#define HALF_OP(name, load, store, combine)                                   \
  static void name(void *in, void *inout, int *len, MPI_Datatype *type) {     \
    (void)type;                                                               \
    const uint16_t *a = in;                                                   \
    uint16_t *b = inout;                                                      \
    for (int i = 0; i < *len; i++) b[i] = store(combine(load(a[i]), load(b[i]))); \
  }

HALF_OP(f16_sum, lt_half_to_float, lt_float_to_half, op_sum)
HALF_OP(f16_prod, lt_half_to_float, lt_float_to_half, op_prod)
HALF_OP(f16_max, lt_half_to_float, lt_float_to_half, op_max)
HALF_OP(f16_min, lt_half_to_float, lt_float_to_half, op_min)
HALF_OP(bf16_sum, lt_bfloat16_to_float, lt_float_to_bfloat16, op_sum)
HALF_OP(bf16_prod, lt_bfloat16_to_float, lt_float_to_bfloat16, op_prod)
HALF_OP(bf16_max, lt_bfloat16_to_float, lt_float_to_bfloat16, op_max)
HALF_OP(bf16_min, lt_bfloat16_to_float, lt_float_to_bfloat16, op_min)

/* [0: float16, 1: bfloat16][sum, max, min, prod] */
static MPI_User_function *const functions[2][4] = {
    {f16_sum, f16_max, f16_min, f16_prod},
    {bf16_sum, bf16_max, bf16_min, bf16_prod},
};
static MPI_Op ops[2][4];
static bool created;

void dist_mpi_half_ops_create(void) {
  if (created) return;
  for (int t = 0; t < 2; t++)
    for (int o = 0; o < 4; o++) MPI_Op_create(functions[t][o], 1 /* commutative */, &ops[t][o]);
  created = true;
}

void dist_mpi_half_ops_free(void) {
  if (!created) return;
  for (int t = 0; t < 2; t++)
    for (int o = 0; o < 4; o++) MPI_Op_free(&ops[t][o]);
  created = false;
}

MPI_Op dist_mpi_half_op(lt_dtype dt, lt_reduce_op op) {
  int t = dt == LT_BFLOAT16;
  switch (op) {
  case LT_REDUCE_MAX: return ops[t][1];
  case LT_REDUCE_MIN: return ops[t][2];
  case LT_REDUCE_PROD: return ops[t][3];
  case LT_REDUCE_SUM:
  case LT_REDUCE_AVG:
  case LT_NREDUCE_OPS: break;
  }
  return ops[t][0]; /* avg is a sum, divided after (dist_collectives.c) */
}
