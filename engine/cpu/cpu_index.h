/* The CPU's index kernels (core/backend.h's index_select, sort, gather and
 * scatter). */
#ifndef LT_CPU_INDEX_H
#define LT_CPU_INDEX_H

#include "core/backend.h"

/* out's k-th slice along dim = in's slice rows[k] - base (see the table). */
lt_status cpu_index_select(lt_tensor *out, const lt_tensor *in, int dim, const int64_t *rows,
                           int64_t n, int64_t base);
/* cpu_sort.c */
lt_status cpu_sort(lt_tensor *values, lt_tensor *indices, const lt_tensor *in, int dim,
                   bool descending, int64_t k, int64_t index_base);
/* cpu_scatter.c */
lt_status cpu_gather(lt_tensor *out, const lt_tensor *in, int dim, const lt_tensor *index,
                     int64_t base);
lt_status cpu_scatter(bool add, lt_tensor *out, int dim, const lt_tensor *index, int64_t base,
                      const lt_tensor *src, lt_scalar value);

#endif
