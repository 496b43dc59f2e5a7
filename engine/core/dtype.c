/* Element types: sizes, names, promotion, 16-bit float conversions and the
 * slow-path scalar load/store used by item, printing and fills. */
#include "lt/dtype.h"

#include "core/half.h"

#include <math.h>
#include <string.h>

static const size_t dtype_sizes[LT_NDTYPES] = {
    [LT_FLOAT32] = 4, [LT_FLOAT64] = 8, [LT_FLOAT16] = 2, [LT_BFLOAT16] = 2,
    [LT_INT64] = 8,   [LT_INT32] = 4,   [LT_UINT8] = 1,   [LT_BOOL] = 1,
};

static const char *const dtype_names[LT_NDTYPES] = {
    [LT_FLOAT32] = "float32", [LT_FLOAT64] = "float64", [LT_FLOAT16] = "float16",
    [LT_BFLOAT16] = "bfloat16", [LT_INT64] = "int64",   [LT_INT32] = "int32",
    [LT_UINT8] = "uint8",       [LT_BOOL] = "bool",
};

size_t lt_dtype_size(lt_dtype dt) {
  return (unsigned)dt < LT_NDTYPES ? dtype_sizes[dt] : 0;
}

const char *lt_dtype_name(lt_dtype dt) {
  return (unsigned)dt < LT_NDTYPES ? dtype_names[dt] : "unknown";
}

bool lt_dtype_parse(const char *name, lt_dtype *out) {
  /* The canonical names first, then PyTorch's aliases. */
  static const struct { const char *name; lt_dtype dt; } names[] = {
      {"float32", LT_FLOAT32}, {"float64", LT_FLOAT64}, {"float16", LT_FLOAT16},
      {"bfloat16", LT_BFLOAT16}, {"int64", LT_INT64},   {"int32", LT_INT32},
      {"uint8", LT_UINT8},     {"bool", LT_BOOL},       {"float", LT_FLOAT32},
      {"double", LT_FLOAT64},  {"half", LT_FLOAT16},    {"long", LT_INT64},
      {"int", LT_INT32},
  };
  if (!name) return false;
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    if (strcmp(name, names[i].name) == 0) {
      if (out) *out = names[i].dt;
      return true;
    }
  }
  return false;
}

bool lt_dtype_is_floating(lt_dtype dt) {
  return dt == LT_FLOAT32 || dt == LT_FLOAT64 || dt == LT_FLOAT16 || dt == LT_BFLOAT16;
}

bool lt_dtype_is_integral(lt_dtype dt) {
  return dt == LT_INT64 || dt == LT_INT32 || dt == LT_UINT8;
}

/* Rank within a kind: wider types win. float16 and bfloat16 share a rank
 * because neither holds the other; promote_types settles that pair. */
static int float_rank(lt_dtype dt) {
  switch (dt) {
    case LT_FLOAT64: return 3;
    case LT_FLOAT32: return 2;
    default: return 1; /* float16, bfloat16 */
  }
}

static int integer_rank(lt_dtype dt) {
  switch (dt) {
    case LT_INT64: return 3;
    case LT_INT32: return 2;
    default: return 1; /* uint8 */
  }
}

lt_dtype lt_promote_types(lt_dtype a, lt_dtype b) {
  if (a == b) return a;
  if (a == LT_BOOL) return b;
  if (b == LT_BOOL) return a;
  bool fa = lt_dtype_is_floating(a), fb = lt_dtype_is_floating(b);
  if (fa && !fb) return a; /* any float beats any integer: int64+float16 = float16 */
  if (fb && !fa) return b;
  if (fa) {
    /* float16 + bfloat16: the smallest type that holds both is float32. */
    if (float_rank(a) == 1 && float_rank(b) == 1) return LT_FLOAT32;
    return float_rank(a) >= float_rank(b) ? a : b;
  }
  /* Both integers; uint8 with a signed type gives the signed type (int8, the
   * one case where that fails, is not an lt dtype). */
  return integer_rank(a) >= integer_rank(b) ? a : b;
}

/* ---- 16-bit floats ---- */

uint16_t lt_float_to_half(float f) { return lt_f32_to_f16(f); }
float lt_half_to_float(uint16_t h) { return lt_f16_to_f32(h); }
uint16_t lt_float_to_bfloat16(float f) { return lt_f32_to_bf16(f); }
float lt_bfloat16_to_float(uint16_t b) { return lt_bf16_to_f32(b); }

/* ---- scalar load/store ---- */

/* double -> int64 truncating toward zero, defined everywhere: a C cast out of
 * range is undefined behaviour, so NaN gives 0 and out-of-range values
 * saturate. */
static int64_t double_to_int64(double v) {
  if (isnan(v)) return 0;
  if (v >= 0x1p63) return INT64_MAX;
  if (v < -0x1p63) return INT64_MIN;
  return (int64_t)v;
}

static int32_t double_to_int32(double v) {
  if (isnan(v)) return 0;
  if (v >= 0x1p31) return INT32_MAX;
  if (v <= -0x1p31 - 1.0) return INT32_MIN;
  return (int32_t)v;
}

/* uint8 takes the low byte of the truncated integer, so -1.0 gives 255 and
 * 300.0 gives 44, as PyTorch's float -> uint8 conversion does. */
static uint8_t double_to_uint8(double v) { return (uint8_t)(uint64_t)double_to_int64(v); }

double lt_load_double(const void *p, lt_dtype dt) {
  switch (dt) {
    case LT_FLOAT32: { float v; memcpy(&v, p, 4); return v; }
    case LT_FLOAT64: { double v; memcpy(&v, p, 8); return v; }
    case LT_FLOAT16: { uint16_t v; memcpy(&v, p, 2); return lt_half_to_float(v); }
    case LT_BFLOAT16: { uint16_t v; memcpy(&v, p, 2); return lt_bfloat16_to_float(v); }
    case LT_INT64: { int64_t v; memcpy(&v, p, 8); return (double)v; }
    case LT_INT32: { int32_t v; memcpy(&v, p, 4); return v; }
    case LT_UINT8: return *(const uint8_t *)p;
    case LT_BOOL: return *(const uint8_t *)p != 0;
    default: return 0.0;
  }
}

void lt_store_double(void *p, lt_dtype dt, double v) {
  switch (dt) {
    case LT_FLOAT32: { float f = (float)v; memcpy(p, &f, 4); break; }
    case LT_FLOAT64: memcpy(p, &v, 8); break;
    /* Through float, as PyTorch converts a double to c10::Half/BFloat16. */
    case LT_FLOAT16: { uint16_t h = lt_float_to_half((float)v); memcpy(p, &h, 2); break; }
    case LT_BFLOAT16: { uint16_t b = lt_float_to_bfloat16((float)v); memcpy(p, &b, 2); break; }
    case LT_INT64: { int64_t i = double_to_int64(v); memcpy(p, &i, 8); break; }
    case LT_INT32: { int32_t i = double_to_int32(v); memcpy(p, &i, 4); break; }
    case LT_UINT8: *(uint8_t *)p = double_to_uint8(v); break;
    case LT_BOOL: *(uint8_t *)p = v != 0.0; /* NaN is true, as bool(nan) */ break;
    default: break;
  }
}

int64_t lt_load_int64(const void *p, lt_dtype dt) {
  switch (dt) {
    case LT_INT64: { int64_t v; memcpy(&v, p, 8); return v; }
    case LT_INT32: { int32_t v; memcpy(&v, p, 4); return v; }
    case LT_UINT8: return *(const uint8_t *)p;
    case LT_BOOL: return *(const uint8_t *)p != 0;
    default: return double_to_int64(lt_load_double(p, dt));
  }
}

void lt_store_int64(void *p, lt_dtype dt, int64_t v) {
  switch (dt) {
    /* Directly to float: int64 -> double -> float could round twice. */
    case LT_FLOAT32: { float f = (float)v; memcpy(p, &f, 4); break; }
    case LT_FLOAT64: { double d = (double)v; memcpy(p, &d, 8); break; }
    case LT_FLOAT16: { uint16_t h = lt_float_to_half((float)v); memcpy(p, &h, 2); break; }
    case LT_BFLOAT16: { uint16_t b = lt_float_to_bfloat16((float)v); memcpy(p, &b, 2); break; }
    case LT_INT64: memcpy(p, &v, 8); break;
    case LT_INT32: {
      /* Keep the low 32 bits (two's complement wrap, as PyTorch's cast);
       * converting through uint32_t keeps the narrowing well defined. */
      uint32_t u = (uint32_t)(uint64_t)v;
      memcpy(p, &u, 4);
      break;
    }
    case LT_UINT8: *(uint8_t *)p = (uint8_t)(uint64_t)v; break;
    case LT_BOOL: *(uint8_t *)p = v != 0; break;
    default: break;
  }
}
