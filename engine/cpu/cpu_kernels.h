/* The CPU backend's kernels; cpu_backend.c puts them in the table. */
#ifndef LT_CPU_KERNELS_H
#define LT_CPU_KERNELS_H

#include "core/backend.h"

lt_status cpu_binary(lt_binary_op op, lt_dtype compute, lt_tensor *out, const lt_tensor *a,
                     const lt_tensor *b, lt_scalar s, bool scalar_first);
lt_status cpu_unary(lt_unary_op op, lt_dtype compute, lt_tensor *out, const lt_tensor *a);
lt_status cpu_clamp(lt_dtype compute, lt_tensor *out, const lt_tensor *a, bool has_lo,
                    lt_scalar lo, bool has_hi, lt_scalar hi);
lt_status cpu_where(lt_tensor *out, const lt_tensor *cond, const lt_tensor *a, const lt_tensor *b);
lt_status cpu_copy(lt_tensor *dst, const lt_tensor *src);
lt_status cpu_fill(lt_tensor *dst, double value);
lt_status cpu_read_element(const lt_tensor *t, void *host_dst);
lt_status cpu_reduce(lt_reduce_op op, lt_tensor *out, const lt_tensor *in, const bool *reduced);
lt_status cpu_reduce_index(bool is_max, lt_tensor *values, lt_tensor *indices,
                           const lt_tensor *in, int dim, int64_t index_base);
lt_status cpu_matmul(lt_tensor *out, const lt_tensor *a, const lt_tensor *b);

#endif
