/* Gather/scatter with conversion between storage dtypes and compute kinds. */
#include "cpu/cpu_convert.h"

#include <math.h>
#include <string.h>

cpu_kind cpu_kind_of(lt_dtype compute) {
  switch (compute) {
    case LT_FLOAT64: return CPU_KIND_F64;
    case LT_FLOAT32:
    case LT_FLOAT16:
    case LT_BFLOAT16: return CPU_KIND_F32;
    default: return CPU_KIND_I64;
  }
}

lt_dtype cpu_kind_native(cpu_kind k) {
  return k == CPU_KIND_F32 ? LT_FLOAT32 : k == CPU_KIND_F64 ? LT_FLOAT64 : LT_INT64;
}

size_t cpu_kind_size(cpu_kind k) { return k == CPU_KIND_F32 ? 4 : 8; }

/* C leaves float -> integer undefined out of range; PyTorch users see the
 * value truncated toward zero, so define the rest: NaN 0, saturate. */
int64_t cpu_double_to_int64(double v) {
  if (isnan(v)) return 0;
  if (v >= 0x1p63) return INT64_MAX;
  if (v < -0x1p63) return INT64_MIN;
  return (int64_t)v;
}

int32_t cpu_double_to_int32(double v) {
  if (isnan(v)) return 0;
  if (v >= 0x1p31) return INT32_MAX;
  if (v <= -0x1p31 - 1.0) return INT32_MIN;
  return (int32_t)v;
}

/* Reads one element of a storage dtype as the C type named. */
#define AT(type, p) (*(const type *)(const void *)(p))

/* One gather loop per source dtype; `CONV` turns the loaded value into the
 * destination element type T. */
#define GATHER(T, dst, src, stride, n, READ)                                  \
  do {                                                                        \
    for (int64_t i = 0; i < (n); i++) (dst)[i] = (T)(READ((src) + i * (stride))); \
  } while (0)

#define READ_F32(p) AT(float, p)
#define READ_F64(p) AT(double, p)
#define READ_F16(p) lt_half_to_float(AT(uint16_t, p))
#define READ_BF16(p) lt_bfloat16_to_float(AT(uint16_t, p))
#define READ_I64(p) AT(int64_t, p)
#define READ_I32(p) AT(int32_t, p)
#define READ_U8(p) AT(uint8_t, p)
#define READ_BOOL(p) (AT(uint8_t, p) != 0)

static void load_float(float *d, const char *s, int64_t st, lt_dtype dt, int64_t n) {
  switch (dt) {
    case LT_FLOAT32: GATHER(float, d, s, st, n, READ_F32); break;
    case LT_FLOAT64: GATHER(float, d, s, st, n, READ_F64); break;
    case LT_FLOAT16: GATHER(float, d, s, st, n, READ_F16); break;
    case LT_BFLOAT16: GATHER(float, d, s, st, n, READ_BF16); break;
    case LT_INT64: GATHER(float, d, s, st, n, READ_I64); break;
    case LT_INT32: GATHER(float, d, s, st, n, READ_I32); break;
    case LT_UINT8: GATHER(float, d, s, st, n, READ_U8); break;
    case LT_BOOL: GATHER(float, d, s, st, n, READ_BOOL); break;
    default: break;
  }
}

static void load_double(double *d, const char *s, int64_t st, lt_dtype dt, int64_t n) {
  switch (dt) {
    case LT_FLOAT32: GATHER(double, d, s, st, n, READ_F32); break;
    case LT_FLOAT64: GATHER(double, d, s, st, n, READ_F64); break;
    case LT_FLOAT16: GATHER(double, d, s, st, n, READ_F16); break;
    case LT_BFLOAT16: GATHER(double, d, s, st, n, READ_BF16); break;
    case LT_INT64: GATHER(double, d, s, st, n, READ_I64); break;
    case LT_INT32: GATHER(double, d, s, st, n, READ_I32); break;
    case LT_UINT8: GATHER(double, d, s, st, n, READ_U8); break;
    case LT_BOOL: GATHER(double, d, s, st, n, READ_BOOL); break;
    default: break;
  }
}

#define READ_F32_I(p) cpu_double_to_int64(AT(float, p))
#define READ_F64_I(p) cpu_double_to_int64(AT(double, p))
#define READ_F16_I(p) cpu_double_to_int64(READ_F16(p))
#define READ_BF16_I(p) cpu_double_to_int64(READ_BF16(p))

static void load_int64(int64_t *d, const char *s, int64_t st, lt_dtype dt, int64_t n) {
  switch (dt) {
    case LT_FLOAT32: GATHER(int64_t, d, s, st, n, READ_F32_I); break;
    case LT_FLOAT64: GATHER(int64_t, d, s, st, n, READ_F64_I); break;
    case LT_FLOAT16: GATHER(int64_t, d, s, st, n, READ_F16_I); break;
    case LT_BFLOAT16: GATHER(int64_t, d, s, st, n, READ_BF16_I); break;
    case LT_INT64: GATHER(int64_t, d, s, st, n, READ_I64); break;
    case LT_INT32: GATHER(int64_t, d, s, st, n, READ_I32); break;
    case LT_UINT8: GATHER(int64_t, d, s, st, n, READ_U8); break;
    case LT_BOOL: GATHER(int64_t, d, s, st, n, READ_BOOL); break;
    default: break;
  }
}

void cpu_load(cpu_kind k, void *buf, const char *src, int64_t stride, lt_dtype dt, int64_t n) {
  switch (k) {
    case CPU_KIND_F32: load_float(buf, src, stride, dt, n); break;
    case CPU_KIND_F64: load_double(buf, src, stride, dt, n); break;
    case CPU_KIND_I64: load_int64(buf, src, stride, dt, n); break;
  }
}

/* Scatter: element i of the buffer, converted by CONV, written as type T. */
#define SCATTER(T, dst, stride, src, n, CONV)                                 \
  do {                                                                        \
    for (int64_t i = 0; i < (n); i++) {                                       \
      T v_ = (T)(CONV((src)[i]));                                             \
      memcpy((dst) + i * (stride), &v_, sizeof v_);                           \
    }                                                                         \
  } while (0)

#define SAME(x) (x)
#define TO_HALF(x) lt_float_to_half((float)(x))
#define TO_BF16(x) lt_float_to_bfloat16((float)(x))
#define F_TO_I64(x) cpu_double_to_int64((double)(x))
#define F_TO_I32(x) cpu_double_to_int32((double)(x))
#define F_TO_U8(x) (uint8_t)(uint64_t)cpu_double_to_int64((double)(x))
#define I_TO_I32(x) (int32_t)(uint32_t)(uint64_t)(x) /* keep the low bits */
#define I_TO_U8(x) (uint8_t)(uint64_t)(x)
#define TO_BOOL(x) (uint8_t)((x) != 0)

static void store_float(char *d, int64_t st, lt_dtype dt, const float *s, int64_t n) {
  switch (dt) {
    case LT_FLOAT32: SCATTER(float, d, st, s, n, SAME); break;
    case LT_FLOAT64: SCATTER(double, d, st, s, n, SAME); break;
    case LT_FLOAT16: SCATTER(uint16_t, d, st, s, n, TO_HALF); break;
    case LT_BFLOAT16: SCATTER(uint16_t, d, st, s, n, TO_BF16); break;
    case LT_INT64: SCATTER(int64_t, d, st, s, n, F_TO_I64); break;
    case LT_INT32: SCATTER(int32_t, d, st, s, n, F_TO_I32); break;
    case LT_UINT8: SCATTER(uint8_t, d, st, s, n, F_TO_U8); break;
    case LT_BOOL: SCATTER(uint8_t, d, st, s, n, TO_BOOL); break;
    default: break;
  }
}

static void store_double(char *d, int64_t st, lt_dtype dt, const double *s, int64_t n) {
  switch (dt) {
    case LT_FLOAT32: SCATTER(float, d, st, s, n, SAME); break;
    case LT_FLOAT64: SCATTER(double, d, st, s, n, SAME); break;
    case LT_FLOAT16: SCATTER(uint16_t, d, st, s, n, TO_HALF); break;
    case LT_BFLOAT16: SCATTER(uint16_t, d, st, s, n, TO_BF16); break;
    case LT_INT64: SCATTER(int64_t, d, st, s, n, F_TO_I64); break;
    case LT_INT32: SCATTER(int32_t, d, st, s, n, F_TO_I32); break;
    case LT_UINT8: SCATTER(uint8_t, d, st, s, n, F_TO_U8); break;
    case LT_BOOL: SCATTER(uint8_t, d, st, s, n, TO_BOOL); break;
    default: break;
  }
}

static void store_int64(char *d, int64_t st, lt_dtype dt, const int64_t *s, int64_t n) {
  switch (dt) {
    case LT_FLOAT32: SCATTER(float, d, st, s, n, SAME); break;
    case LT_FLOAT64: SCATTER(double, d, st, s, n, SAME); break;
    case LT_FLOAT16: SCATTER(uint16_t, d, st, s, n, TO_HALF); break;
    case LT_BFLOAT16: SCATTER(uint16_t, d, st, s, n, TO_BF16); break;
    case LT_INT64: SCATTER(int64_t, d, st, s, n, SAME); break;
    case LT_INT32: SCATTER(int32_t, d, st, s, n, I_TO_I32); break;
    case LT_UINT8: SCATTER(uint8_t, d, st, s, n, I_TO_U8); break;
    case LT_BOOL: SCATTER(uint8_t, d, st, s, n, TO_BOOL); break;
    default: break;
  }
}

void cpu_store(cpu_kind k, char *dst, int64_t stride, lt_dtype dt, const void *buf, int64_t n) {
  switch (k) {
    case CPU_KIND_F32: store_float(dst, stride, dt, buf, n); break;
    case CPU_KIND_F64: store_double(dst, stride, dt, buf, n); break;
    case CPU_KIND_I64: store_int64(dst, stride, dt, buf, n); break;
  }
}
