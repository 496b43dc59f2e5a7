/* Tensor files: safetensors round trips of every dtype, the exact header lt
 * writes, atomic replacement, and malformed files built byte by byte (each an
 * error naming the problem, with nothing leaked); every truncation and every
 * single-byte corruption of a valid file (an error or a load, never a
 * crash); IDX files, gzip and plain, whole, truncated and corrupt;
 * index_select and randperm. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "check.h"
#include "lt/index.h"
#include "lt/io.h"
#include "lt/lt.h"

static char dir[64];

static const char *in_dir(const char *name) {
  static char path[400];
  snprintf(path, sizeof path, "%s/%.300s", dir, name);
  return path;
}

static int64_t allocated(void) {
  lt_memory_stats s;
  lt_memory_get_stats(lt_cpu(), &s);
  return s.allocated_bytes[LT_POOL_ALL].current;
}

static void write_bytes(const char *path, const void *data, size_t n) {
  FILE *f = fopen(path, "wb");
  CHECK(f != NULL);
  if (!f) return;
  CHECK(fwrite(data, 1, n, f) == n);
  fclose(f);
}

static unsigned char *read_bytes(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long size = ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char *b = malloc((size_t)size + 1);
  *n = fread(b, 1, (size_t)size, f);
  fclose(f);
  return b;
}

/* A safetensors file from a header text (length prefix added) and data. */
static void write_safetensors(const char *path, const char *header, const void *data, size_t n) {
  size_t h = strlen(header);
  unsigned char *b = malloc(8 + h + n + 1);
  for (int k = 0; k < 8; k++) b[k] = (unsigned char)((uint64_t)h >> (8 * k));
  memcpy(b + 8, header, h);
  if (n) memcpy(b + 8 + h, data, n);
  write_bytes(path, b, 8 + h + n);
  free(b);
}

/* Loading path must fail with LT_ERR_IO, a message containing `part`, the
 * result left empty and no bytes left allocated. */
static void expect_load_error(const char *path, const char *part, int line) {
  int64_t before = allocated();
  lt_safetensors st;
  lt_status s = lt_safetensors_load(path, &st);
  check_count++;
  if (s != LT_ERR_IO || !strstr(lt_last_error(), part) || !strstr(lt_last_error(), path) ||
      st.count != 0 || allocated() != before) {
    check_failures++;
    fprintf(stderr, "test_io.c:%d: expected an IO error containing \"%s\", got status %d: %s\n",
            line, part, (int)s, lt_last_error());
  }
  if (s == LT_OK) lt_safetensors_free(&st);
}

#define EXPECT_LOAD_ERROR(header, data, n, part)                          \
  do {                                                                     \
    write_safetensors(in_dir("bad.safetensors"), header, data, n);         \
    expect_load_error(in_dir("bad.safetensors"), part, __LINE__);          \
  } while (0)

static void test_malformed_safetensors(void) {
  static const unsigned char zeros[64] = {0};
  const char *bad = in_dir("bad.safetensors");

  write_bytes(bad, "\x10\0\0", 3);
  expect_load_error(bad, "too short", __LINE__);
  write_bytes(bad, "\xe8\x03\0\0\0\0\0\0{}", 10); /* says 1000 header bytes, has 2 */
  expect_load_error(bad, "header length 1000 is larger than the rest of the file (2 bytes)",
                    __LINE__);
  write_bytes(bad, "\xff\xff\xff\xff\xff\xff\xff\xff{}", 10);
  expect_load_error(bad, "is larger than the rest of the file", __LINE__);
  expect_load_error(in_dir("missing.safetensors"), "cannot open", __LINE__);

  EXPECT_LOAD_ERROR("", NULL, 0, "expected '{' opening the header, found the end");
  EXPECT_LOAD_ERROR("{\"a\":", NULL, 0, "malformed header: expected '{' opening a tensor entry");
  EXPECT_LOAD_ERROR("{\"a\":{}} x", NULL, 0, "has no 'dtype' field");
  EXPECT_LOAD_ERROR("{} x", NULL, 0, "expected only spaces after the header object at byte 3");
  EXPECT_LOAD_ERROR("{\"a\" {}}", NULL, 0, "expected ':' after a tensor name at byte 5");
  EXPECT_LOAD_ERROR("{\"a\":{\"dtype\":\"F32\"", NULL, 0, "expected ',' or '}' in a tensor entry");
  EXPECT_LOAD_ERROR("{\"abc", NULL, 0, "closing quote");
  EXPECT_LOAD_ERROR("{\"a\\x\":1}", NULL, 0, "expected one of");
  EXPECT_LOAD_ERROR("{\"a\\u0000\":1}", NULL, 0, "no NUL character");
  EXPECT_LOAD_ERROR("{\"a\\ud800\":1}", NULL, 0, "low half of a surrogate pair");
  EXPECT_LOAD_ERROR("{\"a\tb\":1}", NULL, 0, "no raw control character");
  EXPECT_LOAD_ERROR("{\"\xff\":1}", NULL, 0, "not valid UTF-8");
  EXPECT_LOAD_ERROR("{\"a\":{\"dtype\":\"I8\",\"shape\":[1],\"data_offsets\":[0,1]}}", zeros, 1,
                    "tensor 'a' has dtype 'I8', which lt does not support");
  EXPECT_LOAD_ERROR("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4],\"x\":1}}",
                    zeros, 4, "tensor 'a' has an unknown field 'x'");
  EXPECT_LOAD_ERROR("{\"a\":{\"dtype\":\"F32\",\"dtype\":\"F32\"}}", NULL, 0,
                    "has the field 'dtype' twice");
  EXPECT_LOAD_ERROR("{\"a\":{\"dtype\":\"F32\",\"shape\":[1]}}", NULL, 0,
                    "tensor 'a' has no 'data_offsets' field");
  EXPECT_LOAD_ERROR("{\"a\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", zeros, 4,
                    "expected a non-negative integer");
  EXPECT_LOAD_ERROR("{\"a\":{\"dtype\":\"F32\",\"shape\":[1.5],\"data_offsets\":[0,4]}}", zeros, 4,
                    "expected an integer");
  EXPECT_LOAD_ERROR("{\"a\":{\"dtype\":\"F32\",\"shape\":[01],\"data_offsets\":[0,4]}}", zeros, 4,
                    "without leading zeros");
  EXPECT_LOAD_ERROR("{\"a\":{\"dtype\":\"F32\",\"shape\":[99999999999999999999],"
                    "\"data_offsets\":[0,4]}}", zeros, 4, "below 2^63");
  EXPECT_LOAD_ERROR("{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],"
                    "\"data_offsets\":[0,4]}}", zeros, 4, "shape has more than 8 entries");
  EXPECT_LOAD_ERROR("{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,4294967296],"
                    "\"data_offsets\":[0,4]}}", zeros, 4,
                    "tensor 'a': shape [4294967296, 4294967296, 4294967296] has too many "
                    "elements (numel: integer multiplication overflow)");
  /* A size 0 needs no data, but the other sizes' strides pass int64. */
  EXPECT_LOAD_ERROR("{\"a\":{\"dtype\":\"F32\",\"shape\":[0,4611686018427387904,"
                    "4611686018427387904],\"data_offsets\":[0,0]}}", NULL, 0,
                    "tensor 'a': shape [0, 4611686018427387904, 4611686018427387904] is too large "
                    "for its strides (Stride calculation overflowed)");
  EXPECT_LOAD_ERROR("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0]}}", zeros, 4,
                    "data_offsets has 1 entries, expected 2");
  EXPECT_LOAD_ERROR("{\"a\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,20]}}", zeros,
                    20, "tensor 'a' of shape [2, 3] and dtype F32 needs 24 bytes, but its "
                    "data_offsets [0, 20] hold 20");
  EXPECT_LOAD_ERROR("{\"a\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]}}", zeros,
                    16, "file is truncated: the tensors need 24 bytes of data, only 16 present");
  EXPECT_LOAD_ERROR("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                    "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", zeros, 12,
                    "the data of tensors 'a' and 'b' overlap");
  EXPECT_LOAD_ERROR("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                    "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}", zeros, 12,
                    "bytes 4 to 8 of the data belong to no tensor (before 'b')");
  EXPECT_LOAD_ERROR("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,4]}}", zeros, 8,
                    "data_offsets [8, 4] that end before they begin");
  EXPECT_LOAD_ERROR("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", zeros, 6,
                    "2 bytes after the last tensor's data");
  EXPECT_LOAD_ERROR("{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},"
                    "\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[1,2]}}", zeros, 2,
                    "tensor name 'a' appears twice");
  EXPECT_LOAD_ERROR("{\"__metadata__\":{\"k\":\"1\",\"k\":\"2\"}}", NULL, 0,
                    "metadata key 'k' appears twice");
  EXPECT_LOAD_ERROR("{\"__metadata__\":{},\"__metadata__\":{}}", NULL, 0,
                    "__metadata__ appears twice");
  EXPECT_LOAD_ERROR("{\"__metadata__\":{\"epoch\":3}}", NULL, 0,
                    "metadata value of 'epoch' is not a string");
  static const unsigned char two[2] = {1, 2};
  EXPECT_LOAD_ERROR("{\"m\":{\"dtype\":\"BOOL\",\"shape\":[2],\"data_offsets\":[0,2]}}", two, 2,
                    "BOOL tensor 'm' holds the byte 2 at element 2");
}

static lt_tensor *from_bytes(const void *data, lt_dtype dt, int64_t n) {
  lt_tensor *t = NULL;
  CHECK(lt_from_buffer(data, dt, &n, 1, dt, lt_cpu(), &t) == LT_OK);
  return t;
}

static const lt_tensor *find(const lt_safetensors *st, const char *name) {
  for (int i = 0; i < st->count; i++)
    if (strcmp(st->names[i], name) == 0) return st->tensors[i];
  return NULL;
}

/* Every dtype, bit patterns included (NaN payloads, -0, subnormals), comes
 * back byte for byte; the file has exactly the header the reference writes. */
static void test_round_trip(void) {
  static const float f32[] = {1.5f, -0.0f, 1e-45f, 3.4e38f};
  static const double f64[] = {3.141592653589793, -1e300, 5e-324};
  static const uint16_t f16[] = {0x3c00, 0x8000, 0x0001, 0x7e01}; /* 1, -0, subnormal, NaN */
  static const uint16_t bf16[] = {0x3f80, 0xff80, 0x7fc1};         /* 1, -inf, NaN */
  static const int64_t i64[] = {INT64_MIN, INT64_MAX, 0};
  static const int32_t i32[] = {INT32_MIN, INT32_MAX};
  static const uint8_t u8[] = {0, 255, 7};
  static const uint8_t flags[] = {1, 0, 1, 1};
  int64_t before = allocated();
  lt_tensor *ts[] = {from_bytes(f32, LT_FLOAT32, 4), from_bytes(f64, LT_FLOAT64, 3),
                     from_bytes(f16, LT_FLOAT16, 4), from_bytes(bf16, LT_BFLOAT16, 3),
                     from_bytes(i64, LT_INT64, 3),   from_bytes(i32, LT_INT32, 2),
                     from_bytes(u8, LT_UINT8, 3),    from_bytes(flags, LT_BOOL, 4)};
  const char *names[] = {"z_f32", "f64", "f16", "bf16", "i64", "i32", "u8", "bool"};
  const char *keys[] = {"note", "epoch"}, *values[] = {"say \"hi\"\n", "3"};
  const char *path = in_dir("all.safetensors");
  CHECK(lt_safetensors_save(path, names, ts, 8, keys, values, 2) == LT_OK);
  lt_safetensors st;
  CHECK(lt_safetensors_load(path, &st) == LT_OK);
  CHECK_EQ_INT(st.count, 8);
  for (int i = 0; i < 8; i++) {
    const lt_tensor *t = find(&st, names[i]);
    CHECK(t != NULL);
    if (!t) continue;
    CHECK_EQ_INT(t->dtype, ts[i]->dtype);
    CHECK_EQ_INT(t->ndim, 1);
    CHECK_EQ_INT(t->shape[0], ts[i]->shape[0]);
    CHECK(memcmp(lt_data(t), lt_data(ts[i]), lt_nbytes(t)) == 0);
  }
  /* Sorted names: the loaded order follows the data, which follows the names. */
  CHECK_EQ_STR(st.names[0], "bf16");
  CHECK_EQ_STR(st.names[7], "z_f32");
  CHECK_EQ_INT(st.nmeta, 2);
  CHECK_EQ_STR(st.meta_keys[0], "epoch");
  CHECK_EQ_STR(st.meta_values[1], "say \"hi\"\n");
  lt_safetensors_free(&st);
  lt_safetensors_free(&st); /* idempotent */

  /* The exact bytes of a small file: sorted keys, metadata first, contiguous
   * offsets, spaces up to a multiple of 8. */
  const char *small_names[] = {"b", "a"};
  lt_tensor *small[] = {ts[6], ts[7]};
  const char *k1[] = {"k"}, *v1[] = {"v"};
  CHECK(lt_safetensors_save(path, small_names, small, 2, k1, v1, 1) == LT_OK);
  size_t n = 0;
  unsigned char *b = read_bytes(path, &n);
  const char *expected = "{\"__metadata__\":{\"k\":\"v\"},"
                         "\"a\":{\"dtype\":\"BOOL\",\"shape\":[4],\"data_offsets\":[0,4]},"
                         "\"b\":{\"dtype\":\"U8\",\"shape\":[3],\"data_offsets\":[4,7]}}";
  size_t hlen = strlen(expected), padded = (hlen + 7) / 8 * 8;
  CHECK(b != NULL && n == 8 + padded + 7);
  if (b && n == 8 + padded + 7) {
    CHECK_EQ_INT(b[0] | b[1] << 8, padded);
    CHECK(memcmp(b + 8, expected, hlen) == 0);
    for (size_t i = hlen; i < padded; i++) CHECK_EQ_INT(b[8 + i], ' ');
    CHECK(memcmp(b + 8 + padded, flags, 4) == 0 && memcmp(b + 8 + padded + 4, u8, 3) == 0);
  }
  free(b);

  /* A view is written as its values in row-major order. */
  lt_tensor *m = NULL, *mt = NULL;
  int64_t shape[2] = {2, 3};
  static const float six[] = {0, 1, 2, 3, 4, 5};
  CHECK(lt_from_buffer(six, LT_FLOAT32, shape, 2, LT_FLOAT32, lt_cpu(), &m) == LT_OK);
  CHECK(lt_transpose(m, 0, 1, &mt) == LT_OK);
  const char *tn[] = {"t"};
  CHECK(lt_safetensors_save(path, tn, &mt, 1, NULL, NULL, 0) == LT_OK);
  CHECK(lt_safetensors_load(path, &st) == LT_OK);
  static const float six_t[] = {0, 3, 1, 4, 2, 5};
  CHECK(st.count == 1 && st.tensors[0]->shape[0] == 3 && st.tensors[0]->shape[1] == 2 &&
        memcmp(lt_data(st.tensors[0]), six_t, sizeof six_t) == 0);
  lt_safetensors_free(&st);
  lt_tensor_release(mt);
  lt_tensor_release(m);

  /* Nothing at all: an empty header "{}" padded to 8. */
  CHECK(lt_safetensors_save(path, NULL, NULL, 0, NULL, NULL, 0) == LT_OK);
  CHECK(lt_safetensors_load(path, &st) == LT_OK);
  CHECK(st.count == 0 && st.nmeta == 0);
  lt_safetensors_free(&st);

  for (int i = 0; i < 8; i++) lt_tensor_release(ts[i]);
  CHECK_EQ_INT(allocated(), before);
}

/* Any ".tmp." file left in the test directory. */
static bool temp_file_left(void) {
  DIR *d = opendir(dir);
  bool found = false;
  for (struct dirent *e; d && (e = readdir(d));)
    if (strstr(e->d_name, ".tmp.")) found = true;
  if (d) closedir(d);
  return found;
}

static void test_atomic_save(void) {
  static const uint8_t bytes[] = {1, 2, 3};
  lt_tensor *t = from_bytes(bytes, LT_UINT8, 3);
  const char *names[] = {"x"}, *dup_names[] = {"x", "x"};
  lt_tensor *two[] = {t, t};
  const char *path = in_dir("keep.safetensors");
  CHECK(lt_safetensors_save(path, names, &t, 1, NULL, NULL, 0) == LT_OK);
  size_t n0 = 0, n1 = 0;
  unsigned char *old = read_bytes(path, &n0);
  /* A failing save leaves the old file as it was and no temporary file. */
  CHECK(lt_safetensors_save(path, dup_names, two, 2, NULL, NULL, 0) == LT_ERR_ARG);
  CHECK(strstr(lt_last_error(), "tensor name 'x' appears twice") != NULL);
  const char *bad_names[] = {"__metadata__"};
  CHECK(lt_safetensors_save(path, bad_names, &t, 1, NULL, NULL, 0) == LT_ERR_ARG);
  const char *bad_utf8[] = {"\xc3("};
  CHECK(lt_safetensors_save(path, bad_utf8, &t, 1, NULL, NULL, 0) == LT_ERR_ARG);
  CHECK(strstr(lt_last_error(), "not valid UTF-8") != NULL);
  unsigned char *now = read_bytes(path, &n1);
  CHECK(old && now && n0 == n1 && memcmp(old, now, n0) == 0);
  free(now);
  /* A directory that does not exist: an IO error naming the path. */
  char missing[300];
  snprintf(missing, sizeof missing, "%s/no/such/dir/x.safetensors", dir);
  CHECK(lt_safetensors_save(missing, names, &t, 1, NULL, NULL, 0) == LT_ERR_IO);
  CHECK(strstr(lt_last_error(), "no/such/dir/x.safetensors") != NULL);
  /* A successful save replaces the file. */
  const char *k[] = {"v"}, *v[] = {"2"};
  CHECK(lt_safetensors_save(path, names, &t, 1, k, v, 1) == LT_OK);
  now = read_bytes(path, &n1);
  CHECK(now && n1 > n0);
  free(now);
  free(old);
  CHECK(!temp_file_left());
  lt_tensor_release(t);
}

/* Every prefix of a valid file, and every single byte changed, loads or
 * fails cleanly (the sanitizer build turns any over-read into a failure). */
static void test_truncations_and_corruptions(void) {
  static const float f[] = {1, 2, 3, 4, 5, 6};
  static const int64_t l[] = {7, 8};
  lt_tensor *ts[] = {from_bytes(f, LT_FLOAT32, 6), from_bytes(l, LT_INT64, 2)};
  const char *names[] = {"weight", "step"}, *k[] = {"epoch"}, *v[] = {"12"};
  const char *good = in_dir("good.safetensors"), *bad = in_dir("cut.safetensors");
  CHECK(lt_safetensors_save(good, names, ts, 2, k, v, 1) == LT_OK);
  size_t n = 0;
  unsigned char *b = read_bytes(good, &n);
  int64_t before = allocated();
  int truncation_errors = 0, corruption_loads = 0;
  for (size_t cut = 0; b && cut < n; cut++) {
    write_bytes(bad, b, cut);
    lt_safetensors st;
    if (lt_safetensors_load(bad, &st) == LT_ERR_IO) truncation_errors++;
    else lt_safetensors_free(&st);
  }
  CHECK_EQ_INT(truncation_errors, n);
  for (size_t i = 0; b && i < n; i++) {
    unsigned char saved = b[i];
    b[i] = (unsigned char)(saved ^ 0x5a);
    write_bytes(bad, b, n);
    lt_safetensors st;
    lt_status s = lt_safetensors_load(bad, &st);
    CHECK(s == LT_OK || s == LT_ERR_IO);
    if (s == LT_OK) corruption_loads++;
    lt_safetensors_free(&st);
    b[i] = saved;
  }
  /* Changing data bytes still gives a valid file; changing the length or the
   * header structure does not. */
  CHECK(corruption_loads >= 6 * 4 + 2 * 8);
  CHECK((size_t)corruption_loads < n);
  CHECK_EQ_INT(allocated(), before);
  free(b);
  lt_tensor_release(ts[0]);
  lt_tensor_release(ts[1]);
}

/* ---- IDX ---- */

static void put_be32(unsigned char *p, uint32_t v) {
  p[0] = (unsigned char)(v >> 24);
  p[1] = (unsigned char)(v >> 16);
  p[2] = (unsigned char)(v >> 8);
  p[3] = (unsigned char)v;
}

/* An IDX file of ndim sizes and (product) bytes i % 251, gzip or plain. */
static size_t write_idx(const char *path, const uint32_t *sizes, int ndim, bool gz, size_t extra) {
  size_t count = 1;
  for (int d = 0; d < ndim; d++) count *= sizes[d];
  size_t n = 4 + 4 * (size_t)ndim + count + extra;
  unsigned char *b = calloc(n, 1);
  b[2] = 0x08;
  b[3] = (unsigned char)ndim;
  for (int d = 0; d < ndim; d++) put_be32(b + 4 + 4 * d, sizes[d]);
  for (size_t i = 0; i < count + extra; i++) b[4 + 4 * ndim + i] = (unsigned char)(i % 251);
  if (gz) {
    gzFile f = gzopen(path, "wb");
    CHECK(f != NULL && gzwrite(f, b, (unsigned)n) == (int)n);
    gzclose(f);
  } else {
    write_bytes(path, b, n);
  }
  free(b);
  return count;
}

static void expect_idx_error(const char *path, const char *part, int line) {
  int64_t before = allocated();
  lt_tensor *t = NULL;
  lt_status s = lt_idx_read(path, &t);
  check_count++;
  if (s != LT_ERR_IO || t != NULL || !strstr(lt_last_error(), part) ||
      !strstr(lt_last_error(), path) || allocated() != before) {
    check_failures++;
    fprintf(stderr, "test_io.c:%d: expected an IO error containing \"%s\", got status %d: %s\n",
            line, part, (int)s, lt_last_error());
  }
  if (t) lt_tensor_release(t);
}

static void test_idx(void) {
  const uint32_t images[] = {5, 7, 3}, labels[] = {300};
  const char *path = in_dir("images-idx3-ubyte.gz");
  for (int gz = 0; gz < 2; gz++) {
    size_t count = write_idx(path, images, 3, gz, 0);
    lt_tensor *t = NULL;
    CHECK(lt_idx_read(path, &t) == LT_OK);
    CHECK(t && t->dtype == LT_UINT8 && t->ndim == 3 && t->shape[0] == 5 && t->shape[1] == 7 &&
          t->shape[2] == 3 && (size_t)lt_numel(t) == count);
    const unsigned char *p = t ? lt_data(t) : NULL;
    bool same = p != NULL;
    for (size_t i = 0; same && i < count; i++) same = p[i] == (unsigned char)(i % 251);
    CHECK(same);
    if (t) lt_tensor_release(t);
  }
  write_idx(path, labels, 1, true, 0);
  lt_tensor *l = NULL;
  CHECK(lt_idx_read(path, &l) == LT_OK);
  CHECK(l && l->ndim == 1 && l->shape[0] == 300);
  if (l) lt_tensor_release(l);

  /* A gzip file cut short: the data announced are not all there. */
  write_idx(path, images, 3, true, 0);
  size_t n = 0;
  unsigned char *b = read_bytes(path, &n);
  const char *cut = in_dir("cut-idx3-ubyte.gz");
  write_bytes(cut, b, n / 2);
  expect_idx_error(cut, "truncated", __LINE__);
  write_bytes(cut, b, 12); /* inside the gzip header */
  expect_idx_error(cut, "truncated", __LINE__);
  write_bytes(cut, b, n - 4); /* the data whole, the gzip trailer cut */
  expect_idx_error(cut, "corrupt", __LINE__);
  b[n - 8] ^= 0xff; /* the CRC of the data */
  write_bytes(cut, b, n);
  expect_idx_error(cut, "corrupt", __LINE__);
  free(b);
  /* Plain files: short data, extra data, bad magic, impossible sizes. */
  write_idx(path, images, 3, false, 0);
  b = read_bytes(path, &n);
  write_bytes(cut, b, n - 1);
  expect_idx_error(cut, "need more data than the file's", __LINE__);
  write_bytes(cut, b, 6);
  expect_idx_error(cut, "truncated: the list of dimension sizes needs 12 bytes, only 2 present", __LINE__);
  b[2] = 0x0d; /* float data */
  write_bytes(cut, b, n);
  expect_idx_error(cut, "not an IDX file of unsigned bytes: magic 0x00000d03", __LINE__);
  free(b);
  for (int gz = 0; gz < 2; gz++) {
    write_idx(cut, images, 3, gz, 5);
    expect_idx_error(cut, "has bytes after the 105 bytes of data", __LINE__);
  }
  const uint32_t huge[] = {60000, 60000, 60000};
  unsigned char header[16] = {0, 0, 8, 3};
  for (int d = 0; d < 3; d++) put_be32(header + 4 + 4 * d, huge[d]);
  write_bytes(cut, header, sizeof header);
  expect_idx_error(cut, "sizes [60000, 60000, 60000] need more data", __LINE__);
  /* A size 0 needs no data, but the sizes after it have strides past int64. */
  unsigned char empty[4 + 4 * 8] = {0, 0, 8, 8};
  for (int d = 1; d < 8; d++) put_be32(empty + 4 + 4 * d, UINT32_MAX);
  write_bytes(cut, empty, sizeof empty);
  expect_idx_error(cut, "shape [0, 4294967295, 4294967295, 4294967295, 4294967295, 4294967295, "
                   "4294967295, 4294967295] is too large for its strides (Stride calculation "
                   "overflowed)", __LINE__);
  expect_idx_error(in_dir("absent.gz"), "cannot open", __LINE__);
}

/* ---- index_select and randperm ---- */

static void test_index_select(void) {
  int64_t shape[2] = {4, 3};
  static const int32_t vals[] = {0, 1, 2, 10, 11, 12, 20, 21, 22, 30, 31, 32};
  lt_tensor *t = NULL, *out = NULL, *out2 = NULL;
  CHECK(lt_from_buffer(vals, LT_INT32, shape, 2, LT_INT32, lt_cpu(), &t) == LT_OK);
  static const int64_t rows[] = {4, 1, 4};
  lt_tensor *idx = from_bytes(rows, LT_INT64, 3);
  CHECK(lt_index_select(t, 0, idx, 1, &out) == LT_OK);
  static const int32_t expect_rows[] = {30, 31, 32, 0, 1, 2, 30, 31, 32};
  CHECK(out && out->shape[0] == 3 && out->shape[1] == 3 &&
        memcmp(lt_data(out), expect_rows, sizeof expect_rows) == 0);
  static const int32_t cols[] = {3, 1};
  lt_tensor *cidx = from_bytes(cols, LT_INT32, 2);
  CHECK(lt_index_select(t, 1, cidx, 1, &out2) == LT_OK);
  static const int32_t expect_cols[] = {2, 0, 12, 10, 22, 20, 32, 30};
  CHECK(out2 && out2->shape[0] == 4 && out2->shape[1] == 2 &&
        memcmp(lt_data(out2), expect_cols, sizeof expect_cols) == 0);
  lt_tensor_release(out);
  lt_tensor_release(out2);
  static const int64_t bad[] = {1, 5};
  lt_tensor *bidx = from_bytes(bad, LT_INT64, 2), *none = NULL;
  CHECK(lt_index_select(t, 0, bidx, 1, &none) == LT_ERR_INDEX && none == NULL);
  CHECK_EQ_STR(lt_last_error(), "index_select: index 5 (at position 2 of the index) is out of "
                                "range for dimension 1 of size 4 (expected 1 to 4)");
  CHECK(lt_index_select(t, 0, t, 1, &none) == LT_ERR_SHAPE); /* int32 but 2-D */
  static const float fidx[] = {1.0f};
  lt_tensor *float_idx = from_bytes(fidx, LT_FLOAT32, 1);
  CHECK(lt_index_select(t, 0, float_idx, 1, &none) == LT_ERR_DTYPE);
  CHECK(lt_index_select(t, 2, idx, 1, &none) == LT_ERR_INDEX);
  lt_tensor_release(float_idx);
  lt_tensor_release(idx);
  lt_tensor_release(cidx);
  lt_tensor_release(bidx);
  lt_tensor_release(t);
}

static bool is_permutation(const lt_tensor *p, int64_t n, int64_t base) {
  if (p->ndim != 1 || p->shape[0] != n || p->dtype != LT_INT64) return false;
  char *seen = calloc((size_t)n + 1, 1);
  const int64_t *v = lt_data(p);
  bool ok = true;
  for (int64_t i = 0; i < n && ok; i++) {
    ok = v[i] >= base && v[i] < base + n && !seen[v[i] - base];
    if (ok) seen[v[i] - base] = 1;
  }
  free(seen);
  return ok;
}

static void test_randperm(void) {
  lt_tensor *a = NULL, *b = NULL, *c = NULL;
  lt_rng_state g1 = {1234, 0}, g2 = {1234, 0};
  lt_rng_state global = lt_rng_get_state();
  CHECK(lt_randperm(1001, 1, &g1, &a) == LT_OK);
  CHECK(lt_randperm(1001, 1, &g2, &b) == LT_OK);
  CHECK(is_permutation(a, 1001, 1));
  CHECK(memcmp(lt_data(a), lt_data(b), lt_nbytes(a)) == 0);
  CHECK_EQ_INT(g1.offset, 501);
  CHECK(lt_rng_get_state().offset == global.offset); /* a private generator */
  CHECK(lt_randperm(1001, 1, &g1, &c) == LT_OK);      /* moves on: another order */
  CHECK(memcmp(lt_data(a), lt_data(c), lt_nbytes(a)) != 0);
  lt_tensor_release(a);
  lt_tensor_release(b);
  lt_tensor_release(c);
  /* The global generator: same seed, same order, and it advances. */
  lt_manual_seed(5);
  CHECK(lt_randperm(10, 0, NULL, &a) == LT_OK);
  CHECK(is_permutation(a, 10, 0));
  CHECK_EQ_INT(lt_rng_get_state().offset, 5);
  lt_manual_seed(5);
  CHECK(lt_randperm(10, 0, NULL, &b) == LT_OK);
  CHECK(memcmp(lt_data(a), lt_data(b), lt_nbytes(a)) == 0);
  lt_tensor_release(a);
  lt_tensor_release(b);
  /* The thread count plays no part. */
  lt_rng_state g3 = {99, 0}, g4 = {99, 0};
  int threads = lt_get_num_threads();
  lt_set_num_threads(1);
  CHECK(lt_randperm(100000, 1, &g3, &a) == LT_OK);
  lt_set_num_threads(4);
  CHECK(lt_randperm(100000, 1, &g4, &b) == LT_OK);
  lt_set_num_threads(threads);
  CHECK(memcmp(lt_data(a), lt_data(b), lt_nbytes(a)) == 0);
  lt_tensor_release(a);
  lt_tensor_release(b);
  CHECK(lt_randperm(0, 1, NULL, &a) == LT_OK && lt_numel(a) == 0);
  lt_tensor_release(a);
  CHECK(lt_randperm(-1, 1, NULL, &a) == LT_ERR_ARG);
}

static void remove_dir(void) {
  DIR *d = opendir(dir);
  for (struct dirent *e; d && (e = readdir(d));) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
    unlink(in_dir(e->d_name));
  }
  if (d) closedir(d);
  rmdir(dir);
}

int main(void) {
  snprintf(dir, sizeof dir, "/tmp/lt_test_io_XXXXXX");
  if (!mkdtemp(dir)) {
    perror("mkdtemp");
    return 1;
  }
  test_malformed_safetensors();
  test_round_trip();
  test_atomic_save();
  test_truncations_and_corruptions();
  test_idx();
  test_index_select();
  test_randperm();
  remove_dir();
  return check_summary("test_io");
}
