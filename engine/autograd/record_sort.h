/* Recording sort, topk, gather and scatter on the tape (formulas in
 * autograd/formulas_sort.c). Each decides for itself whether anything is
 * recorded (grad mode on, a floating input that requires grad) and returns
 * LT_OK at once when not. Dims are 0-based; index values count from
 * index_base. */
#ifndef LT_AUTOGRAD_RECORD_SORT_H
#define LT_AUTOGRAD_RECORD_SORT_H

#include <stdbool.h>

#include "lt/tensor.h"

/* sort and topk (name "SortBackward" or "TopkBackward"): values came from t
 * at indices along dim; the gradient goes back to those positions. */
lt_status ag_record_sort(const char *name, const lt_tensor *t, int dim, int64_t index_base,
                         const lt_tensor *indices, lt_tensor *values);
lt_status ag_record_gather(const lt_tensor *t, int dim, const lt_tensor *index,
                           int64_t index_base, lt_tensor *r);
/* scatter (add false) or scatter_add of src (NULL: a number) through index
 * into t giving r; in place, r is t itself, written already. */
lt_status ag_record_scatter(bool add, const lt_tensor *t, int dim, const lt_tensor *index,
                            int64_t index_base, const lt_tensor *src, lt_tensor *r);

#endif
