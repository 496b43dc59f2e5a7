/* Element conversion between storage dtypes and the three compute kinds the
 * CPU kernels work in: float (float32, float16, bfloat16 compute in float and
 * round once), double (float64) and int64 (integers and bool, with two's
 * complement wrap when stored back). Kernels gather strided or converted
 * operands into small stack buffers of the compute kind, run a plain loop,
 * and scatter the result back. */
#ifndef LT_CPU_CONVERT_H
#define LT_CPU_CONVERT_H

#include <stddef.h>
#include <stdint.h>

#include "lt/dtype.h"

typedef enum cpu_kind { CPU_KIND_F32 = 0, CPU_KIND_F64, CPU_KIND_I64 } cpu_kind;

/* Elements per stack buffer: three of them stay well inside L1. */
#define CPU_BUF 512

cpu_kind cpu_kind_of(lt_dtype compute);
/* The storage dtype whose elements are the kind's own C type. */
lt_dtype cpu_kind_native(cpu_kind k);
size_t cpu_kind_size(cpu_kind k);

/* buf[i] = (kind) element i of dt at src + i * stride (bytes). */
void cpu_load(cpu_kind k, void *buf, const char *src, int64_t stride, lt_dtype dt, int64_t n);
/* element i of dt at dst + i * stride = buf[i], converted as PyTorch casts:
 * floats to integers truncate toward zero (NaN gives 0, out of range
 * saturates), integers wrap, anything to bool is != 0. */
void cpu_store(cpu_kind k, char *dst, int64_t stride, lt_dtype dt, const void *buf, int64_t n);

/* The same conversions for one value (double -> integer, defined for every
 * input). */
int64_t cpu_double_to_int64(double v);
int32_t cpu_double_to_int32(double v);

#endif
