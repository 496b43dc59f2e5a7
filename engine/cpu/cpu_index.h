/* The CPU's gather kernel (core/backend.h's index_select). */
#ifndef LT_CPU_INDEX_H
#define LT_CPU_INDEX_H

#include "lt/tensor.h"

/* out's k-th slice along dim = in's slice rows[k] - base (see the table). */
lt_status cpu_index_select(lt_tensor *out, const lt_tensor *in, int dim, const int64_t *rows,
                           int64_t n, int64_t base);

#endif
