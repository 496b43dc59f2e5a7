/* dtypes: names, parsing, promotion (torch.promote_types), float16/bfloat16
 * conversions bit-exact with PyTorch, and the scalar load/store helpers. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "lt/lt.h"

static float bits_float(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

static void test_names_and_parse(void) {
  static const char *names[LT_NDTYPES] = {"float32", "float64", "float16", "bfloat16",
                                          "int64",   "int32",   "uint8",   "bool"};
  static const size_t sizes[LT_NDTYPES] = {4, 8, 2, 2, 8, 4, 1, 1};
  for (int dt = 0; dt < LT_NDTYPES; dt++) {
    CHECK_EQ_STR(lt_dtype_name((lt_dtype)dt), names[dt]);
    CHECK_EQ_INT(lt_dtype_size((lt_dtype)dt), sizes[dt]);
    lt_dtype parsed = LT_NDTYPES;
    CHECK(lt_dtype_parse(names[dt], &parsed));
    CHECK_EQ_INT(parsed, dt);
  }
  static const struct { const char *alias; lt_dtype dt; } aliases[] = {
      {"float", LT_FLOAT32}, {"double", LT_FLOAT64}, {"half", LT_FLOAT16},
      {"long", LT_INT64},    {"int", LT_INT32},
  };
  for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++) {
    lt_dtype parsed = LT_NDTYPES;
    CHECK(lt_dtype_parse(aliases[i].alias, &parsed));
    CHECK_EQ_INT(parsed, aliases[i].dt);
  }
  lt_dtype untouched = LT_UINT8;
  CHECK(!lt_dtype_parse("int8", &untouched));
  CHECK(!lt_dtype_parse("Float32", &untouched));
  CHECK(!lt_dtype_parse("", &untouched));
  CHECK(!lt_dtype_parse(NULL, &untouched));
  CHECK_EQ_INT(untouched, LT_UINT8);

  CHECK(lt_dtype_is_floating(LT_BFLOAT16) && lt_dtype_is_floating(LT_FLOAT64));
  CHECK(!lt_dtype_is_floating(LT_INT32) && !lt_dtype_is_floating(LT_BOOL));
  CHECK(lt_dtype_is_integral(LT_UINT8) && lt_dtype_is_integral(LT_INT64));
  CHECK(!lt_dtype_is_integral(LT_BOOL) && !lt_dtype_is_integral(LT_FLOAT16));
}

/* torch.promote_types over lt's dtypes, rows and columns in enum order
 * (float32 float64 float16 bfloat16 int64 int32 uint8 bool), printed by
 * PyTorch 1.13. */
static void test_promote_types(void) {
  enum { F32 = LT_FLOAT32, F64 = LT_FLOAT64, F16 = LT_FLOAT16, BF = LT_BFLOAT16,
         I64 = LT_INT64, I32 = LT_INT32, U8 = LT_UINT8, B = LT_BOOL };
  static const int table[LT_NDTYPES][LT_NDTYPES] = {
      /* f32 */ {F32, F64, F32, F32, F32, F32, F32, F32},
      /* f64 */ {F64, F64, F64, F64, F64, F64, F64, F64},
      /* f16 */ {F32, F64, F16, F32, F16, F16, F16, F16},
      /* bf  */ {F32, F64, F32, BF, BF, BF, BF, BF},
      /* i64 */ {F32, F64, F16, BF, I64, I64, I64, I64},
      /* i32 */ {F32, F64, F16, BF, I64, I32, I32, I32},
      /* u8  */ {F32, F64, F16, BF, I64, I32, U8, U8},
      /* b   */ {F32, F64, F16, BF, I64, I32, U8, B},
  };
  for (int a = 0; a < LT_NDTYPES; a++)
    for (int b = 0; b < LT_NDTYPES; b++) {
      if (lt_promote_types((lt_dtype)a, (lt_dtype)b) != (lt_dtype)table[a][b])
        fprintf(stderr, "promote_types(%s, %s)\n", lt_dtype_name((lt_dtype)a),
                lt_dtype_name((lt_dtype)b));
      CHECK_EQ_INT(lt_promote_types((lt_dtype)a, (lt_dtype)b), table[a][b]);
    }
}

static bool half_is_nan(uint16_t h) { return (h & 0x7C00u) == 0x7C00u && (h & 0x3FFu); }
static bool bf16_is_nan(uint16_t b) { return (b & 0x7F80u) == 0x7F80u && (b & 0x7Fu); }

/* Every 16-bit pattern survives a trip through float (NaNs stay NaN). */
static void test_round_trips(void) {
  int half_bad = 0, bf16_bad = 0;
  for (uint32_t h = 0; h <= 0xFFFFu; h++) {
    uint16_t back = lt_float_to_half(lt_half_to_float((uint16_t)h));
    if (half_is_nan((uint16_t)h) ? !half_is_nan(back) : back != h) half_bad++;
    uint16_t bback = lt_float_to_bfloat16(lt_bfloat16_to_float((uint16_t)h));
    if (bf16_is_nan((uint16_t)h) ? bback != 0x7FC0u : bback != h) bf16_bad++;
  }
  CHECK_EQ_INT(half_bad, 0);
  CHECK_EQ_INT(bf16_bad, 0);
  /* Decoding is exact: a few known values. */
  CHECK(lt_half_to_float(0x3C00) == 1.0f);
  CHECK(lt_half_to_float(0x7BFF) == 65504.0f);
  CHECK(lt_half_to_float(0x0001) == 0x1p-24f);
  CHECK(lt_half_to_float(0x03FF) == 0x1p-14f - 0x1p-24f);
  CHECK(isinf(lt_half_to_float(0xFC00)) && lt_half_to_float(0xFC00) < 0);
  CHECK(lt_bfloat16_to_float(0x3F80) == 1.0f);
  CHECK(lt_bfloat16_to_float(0xC2F7) == -123.5f);
}

/* Hand-picked cases with the bits PyTorch gives (torch.tensor([x]).half()). */
static void test_known_conversions(void) {
  static const struct { float value; uint16_t half, bf16; } cases[] = {
      {1.0f, 0x3C00, 0x3F80},
      {1.0f + 0x1p-11f, 0x3C00, 0x3F80},        /* half tie: to even */
      {1.0f + 3 * 0x1p-11f, 0x3C02, 0x3F80},    /* half tie: to even, upward */
      {1.0f + 0x1p-8f, 0x3C04, 0x3F80},         /* bfloat16 tie: to even */
      {1.0f + 3 * 0x1p-8f, 0x3C0C, 0x3F82},     /* bfloat16 tie: upward */
      {-2.5f, 0xC100, 0xC020},
      {0.1f, 0x2E66, 0x3DCD},
      {65504.0f, 0x7BFF, 0x4780},
      {65519.0f, 0x7BFF, 0x4780},
      {65520.0f, 0x7C00, 0x4780},               /* rounds to infinity */
      {65536.0f, 0x7C00, 0x4780},
      {-1e6f, 0xFC00, 0xC974},
      {0x1p-14f, 0x0400, 0x3880},               /* smallest normal half */
      {0x1p-14f - 0x1p-24f, 0x03FF, 0x3880},    /* largest subnormal half */
      {6e-8f, 0x0001, 0x3381},                  /* smallest subnormal half */
      {1e-8f, 0x0000, 0x322C},
      {0x1p-25f, 0x0000, 0x3300},               /* tie between 0 and 2^-24: to even */
      {3 * 0x1p-25f, 0x0002, 0x33C0},           /* tie between 1 and 2: to even */
      {-0.0f, 0x8000, 0x8000},
      {3.4028234663852886e38f, 0x7C00, 0x7F80}, /* FLT_MAX: bfloat16 rounds up to inf */
      {INFINITY, 0x7C00, 0x7F80},
      {-INFINITY, 0xFC00, 0xFF80},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    uint16_t h = lt_float_to_half(cases[i].value), b = lt_float_to_bfloat16(cases[i].value);
    if (h != cases[i].half || b != cases[i].bf16)
      fprintf(stderr, "case %zu (%a): half %04x bf16 %04x\n", i, (double)cases[i].value, h, b);
    CHECK_EQ_INT(h, cases[i].half);
    CHECK_EQ_INT(b, cases[i].bf16);
  }
  /* NaN: c10::Half gives the quiet NaN with the sign kept, c10::BFloat16 0x7FC0. */
  CHECK_EQ_INT(lt_float_to_half(NAN), 0x7E00);
  CHECK_EQ_INT(lt_float_to_half(-NAN), 0xFE00);
  CHECK_EQ_INT(lt_float_to_half(bits_float(0x7F800001u)), 0x7E00); /* signalling NaN */
  CHECK_EQ_INT(lt_float_to_bfloat16(NAN), 0x7FC0);
  CHECK_EQ_INT(lt_float_to_bfloat16(-NAN), 0x7FC0);
  CHECK_EQ_INT(lt_float_to_bfloat16(bits_float(0x7F800001u)), 0x7FC0);
}

/* Thousands of values converted by PyTorch (tests/fixtures/gen_dtype_fixture.py). */
static void test_pytorch_fixture(void) {
  char path[4096];
  const char *here = __FILE__, *slash = strrchr(here, '/');
  int dir_len = slash ? (int)(slash - here) : 1;
  snprintf(path, sizeof path, "%.*s/../fixtures/dtype_conversions.txt", dir_len,
           slash ? here : ".");
  FILE *f = fopen(path, "r");
  CHECK(f != NULL);
  if (!f) {
    fprintf(stderr, "missing fixture %s\n", path);
    return;
  }
  char line[128];
  int rows = 0, half_bad = 0, bf16_bad = 0;
  while (fgets(line, sizeof line, f)) {
    unsigned int fb, hb, bb;
    if (line[0] == '#' || sscanf(line, "%x %x %x", &fb, &hb, &bb) != 3) continue;
    float v = bits_float(fb);
    uint16_t h = lt_float_to_half(v), b = lt_float_to_bfloat16(v);
    if (h != hb && half_bad++ < 5)
      fprintf(stderr, "fixture: %08x -> half %04x, PyTorch %04x\n", fb, h, hb);
    if (b != bb && bf16_bad++ < 5)
      fprintf(stderr, "fixture: %08x -> bfloat16 %04x, PyTorch %04x\n", fb, b, bb);
    rows++;
  }
  fclose(f);
  CHECK(rows > 5000);
  CHECK_EQ_INT(half_bad, 0);
  CHECK_EQ_INT(bf16_bad, 0);
}

static void test_load_store(void) {
  unsigned char buf[8];
  /* Integers truncate toward zero; out-of-range and NaN are defined. */
  lt_store_double(buf, LT_INT32, -3.7);
  CHECK_EQ_INT(lt_load_int64(buf, LT_INT32), -3);
  lt_store_double(buf, LT_INT32, 1e20);
  CHECK_EQ_INT(lt_load_int64(buf, LT_INT32), INT32_MAX);
  lt_store_double(buf, LT_INT32, -1e20);
  CHECK_EQ_INT(lt_load_int64(buf, LT_INT32), INT32_MIN);
  lt_store_double(buf, LT_INT64, 1e300);
  CHECK_EQ_INT(lt_load_int64(buf, LT_INT64), INT64_MAX);
  lt_store_double(buf, LT_INT64, NAN);
  CHECK_EQ_INT(lt_load_int64(buf, LT_INT64), 0);
  lt_store_double(buf, LT_INT64, -0x1p63);
  CHECK_EQ_INT(lt_load_int64(buf, LT_INT64), INT64_MIN);
  /* uint8 keeps the low byte, as PyTorch: -1 -> 255, 300 -> 44. */
  lt_store_double(buf, LT_UINT8, -1.0);
  CHECK_EQ_INT(lt_load_int64(buf, LT_UINT8), 255);
  lt_store_double(buf, LT_UINT8, 300.9);
  CHECK_EQ_INT(lt_load_int64(buf, LT_UINT8), 44);
  /* bool: anything nonzero (NaN included) is true. */
  lt_store_double(buf, LT_BOOL, 0.25);
  CHECK_EQ_INT(buf[0], 1);
  lt_store_double(buf, LT_BOOL, -0.0);
  CHECK_EQ_INT(buf[0], 0);
  lt_store_double(buf, LT_BOOL, NAN);
  CHECK(lt_load_double(buf, LT_BOOL) == 1.0);
  /* Floats round once, as the dtype does. */
  lt_store_double(buf, LT_FLOAT16, 0.1);
  CHECK_EQ_INT(*(uint16_t *)buf, 0x2E66);
  CHECK(lt_load_double(buf, LT_FLOAT16) == (double)lt_half_to_float(0x2E66));
  lt_store_double(buf, LT_BFLOAT16, 0.1);
  CHECK_EQ_INT(*(uint16_t *)buf, 0x3DCD);
  lt_store_double(buf, LT_FLOAT32, 0.1);
  CHECK(lt_load_double(buf, LT_FLOAT32) == (double)0.1f);
  lt_store_double(buf, LT_FLOAT64, 0.1);
  CHECK(lt_load_double(buf, LT_FLOAT64) == 0.1);
  /* int64 access is exact above 2^53. */
  int64_t big = ((int64_t)1 << 53) + 1;
  lt_store_int64(buf, LT_INT64, big);
  CHECK_EQ_INT(lt_load_int64(buf, LT_INT64), big);
  lt_store_int64(buf, LT_INT64, INT64_MIN);
  CHECK_EQ_INT(lt_load_int64(buf, LT_INT64), INT64_MIN);
  lt_store_int64(buf, LT_FLOAT32, 16777217);
  CHECK(lt_load_double(buf, LT_FLOAT32) == 16777216.0);
  lt_store_int64(buf, LT_INT32, ((int64_t)1 << 32) + 5); /* wraps as a cast */
  CHECK_EQ_INT(lt_load_int64(buf, LT_INT32), 5);
  lt_store_int64(buf, LT_UINT8, -2);
  CHECK_EQ_INT(lt_load_int64(buf, LT_UINT8), 254);
  lt_store_int64(buf, LT_BOOL, 7);
  CHECK_EQ_INT(lt_load_int64(buf, LT_BOOL), 1);
  lt_store_int64(buf, LT_FLOAT16, 2049); /* tie between 2048 and 2050: to even */
  CHECK(lt_load_double(buf, LT_FLOAT16) == 2048.0);
  lt_store_double(buf, LT_FLOAT64, -7.9);
  CHECK_EQ_INT(lt_load_int64(buf, LT_FLOAT64), -7);
}

int main(void) {
  test_names_and_parse();
  test_promote_types();
  test_round_trips();
  test_known_conversions();
  test_pytorch_fixture();
  test_load_store();
  return check_summary("test_dtype");
}
