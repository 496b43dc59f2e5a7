/* The CUDA backend's kernels; cuda_backend.cu puts them in the table. The
 * same signatures as the CPU's (engine/cpu/cpu_kernels.h). */
#ifndef LT_CUDA_KERNELS_H
#define LT_CUDA_KERNELS_H

#include "cuda/cuda_internal.h"

lt_status cuda_binary(lt_binary_op op, lt_dtype compute, lt_tensor *out, const lt_tensor *a,
                      const lt_tensor *b, lt_scalar s, bool scalar_first);
lt_status cuda_unary(lt_unary_op op, lt_dtype compute, lt_tensor *out, const lt_tensor *a);
lt_status cuda_clamp(lt_dtype compute, lt_tensor *out, const lt_tensor *a, bool has_lo,
                     lt_scalar lo, bool has_hi, lt_scalar hi);
lt_status cuda_where(lt_tensor *out, const lt_tensor *cond, const lt_tensor *a,
                     const lt_tensor *b);
lt_status cuda_copy(lt_tensor *dst, const lt_tensor *src);
lt_status cuda_copy_non_blocking(lt_tensor *dst, const lt_tensor *src);
/* Waits for and frees a storage's pending-copy event (lt_storage_set_pending_wait). */
void cuda_wait_pending_copy(void *event);
lt_status cuda_fill(lt_tensor *dst, double value);
lt_status cuda_read_element(const lt_tensor *t, void *host_dst);
lt_status cuda_reduce(lt_reduce_op op, lt_tensor *out, const lt_tensor *in, const bool *reduced);
lt_status cuda_reduce_index(bool is_max, lt_tensor *values, lt_tensor *indices,
                            const lt_tensor *in, int dim, int64_t index_base);
lt_status cuda_matmul(lt_tensor *out, const lt_tensor *a, const lt_tensor *b);
lt_status cuda_index_select(lt_tensor *out, const lt_tensor *in, int dim, const int64_t *rows,
                            int64_t n, int64_t base);
lt_status cuda_sort(lt_tensor *values, lt_tensor *indices, const lt_tensor *in, int dim,
                    bool descending, int64_t k, int64_t index_base);
lt_status cuda_gather(lt_tensor *out, const lt_tensor *in, int dim, const lt_tensor *index,
                      int64_t base);
lt_status cuda_scatter(bool add, lt_tensor *out, int dim, const lt_tensor *index, int64_t base,
                       const lt_tensor *src, lt_scalar value);

/* The error of a kernel that is not written yet: clear, never a crash. */
lt_status cuda_not_implemented(const char *op);

#endif
