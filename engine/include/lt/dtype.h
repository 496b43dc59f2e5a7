/* Element types and their properties. */
#ifndef LT_DTYPE_H
#define LT_DTYPE_H

#include "lt/api.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum lt_dtype {
  LT_FLOAT32 = 0,
  LT_FLOAT64,
  LT_FLOAT16,
  LT_BFLOAT16,
  LT_INT64,
  LT_INT32,
  LT_UINT8,
  LT_BOOL,
  LT_NDTYPES
} lt_dtype;

LT_API size_t lt_dtype_size(lt_dtype dt);
LT_API const char *lt_dtype_name(lt_dtype dt); /* "float32", ... */
/* Parses a dtype name ("float32", also PyTorch's aliases "float", "double",
 * "half", "long", "int"); returns false if the name is unknown. */
LT_API bool lt_dtype_parse(const char *name, lt_dtype *out);
LT_API bool lt_dtype_is_floating(lt_dtype dt);
LT_API bool lt_dtype_is_integral(lt_dtype dt); /* int64, int32, uint8 (not bool) */

/* PyTorch's promotion lattice for two dtypes of the same priority class
 * (torch.promote_types): e.g. int64+float16 -> float16, float16+bfloat16 ->
 * float32, uint8+int32 -> int32, bool+x -> x. */
LT_API lt_dtype lt_promote_types(lt_dtype a, lt_dtype b);

/* 16-bit float conversions, rounding to nearest even, bit-exact with PyTorch
 * (NaN stays NaN, overflow goes to infinity). */
LT_API uint16_t lt_float_to_half(float f);
LT_API float lt_half_to_float(uint16_t h);
LT_API uint16_t lt_float_to_bfloat16(float f);
LT_API float lt_bfloat16_to_float(uint16_t b);

/* One element at p of type dt, read as double / written from double
 * (with the dtype's rounding or truncation toward zero for integers). Slow
 * path helpers for scalar access (item, printing, fill), not for kernels. */
LT_API double lt_load_double(const void *p, lt_dtype dt);
LT_API void lt_store_double(void *p, lt_dtype dt, double v);
/* Exact int64 access for integer dtypes (double loses bits above 2^53). */
LT_API int64_t lt_load_int64(const void *p, lt_dtype dt);
LT_API void lt_store_int64(void *p, lt_dtype dt, int64_t v);

#endif
