/* CPU kernels of engine/include/lt/index.h (kept out of cpu_kernels.h, whose
 * table they are not part of). */
#ifndef LT_CPU_INDEX_H
#define LT_CPU_INDEX_H

#include "lt/tensor.h"

/* out's k-th slice along dim = in's slice rows[k]; in and out contiguous, of
 * one dtype, with equal sizes except along dim (out's is n); rows are 0-based
 * and already checked to be in range. */
void cpu_index_select(lt_tensor *out, const lt_tensor *in, int dim, const int64_t *rows,
                      int64_t n);

#endif
