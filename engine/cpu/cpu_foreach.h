/* The CPU's foreach kernels (cpu_foreach.c), entries of its optimizer table
 * (core/optim_backend.h says what each computes). */
#ifndef LT_CPU_FOREACH_H
#define LT_CPU_FOREACH_H

#include "lt/tensor.h"

lt_status cpu_norm_many(int64_t n, lt_tensor *const *ts, double p, lt_tensor *out);
lt_status cpu_scale_many(int64_t n, lt_tensor *const *ts, const lt_tensor *scalar);

#endif
