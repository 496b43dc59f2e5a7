/* The safetensors header: a recursive-descent parser for the one JSON shape
 * the format uses (an object of tensor entries and an optional
 * "__metadata__" object of strings) and its writer. The parser never reads
 * past `end`, never trusts a number before checking it, and reports the first
 * problem with the file's name and the byte where it was found. */
#include "io/safetensors_header.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct {
  const char *name;
  lt_dtype dtype;
} dtype_names[] = {
    {"F32", LT_FLOAT32}, {"F64", LT_FLOAT64}, {"F16", LT_FLOAT16}, {"BF16", LT_BFLOAT16},
    {"I64", LT_INT64},   {"I32", LT_INT32},   {"U8", LT_UINT8},    {"BOOL", LT_BOOL},
};
#define NDTYPE_NAMES (sizeof dtype_names / sizeof dtype_names[0])

const char *st_dtype_name(lt_dtype dt) {
  for (size_t i = 0; i < NDTYPE_NAMES; i++)
    if (dtype_names[i].dtype == dt) return dtype_names[i].name;
  return "?";
}

bool st_dtype_parse(const char *name, lt_dtype *out) {
  for (size_t i = 0; i < NDTYPE_NAMES; i++) {
    if (strcmp(dtype_names[i].name, name) == 0) {
      *out = dtype_names[i].dtype;
      return true;
    }
  }
  return false;
}

bool st_valid_utf8(const char *str, size_t len) {
  const unsigned char *s = (const unsigned char *)str, *end = s + len;
  while (s < end) {
    unsigned c = *s;
    int extra;
    unsigned min;
    if (c < 0x80) { s++; continue; }
    if (c >= 0xC2 && c <= 0xDF) { extra = 1; min = 0x80; c &= 0x1F; }
    else if (c >= 0xE0 && c <= 0xEF) { extra = 2; min = 0x800; c &= 0x0F; }
    else if (c >= 0xF0 && c <= 0xF4) { extra = 3; min = 0x10000; c &= 0x07; }
    else return false;
    if (end - s <= extra) return false;
    for (int k = 1; k <= extra; k++) {
      if ((s[k] & 0xC0) != 0x80) return false;
      c = c << 6 | (s[k] & 0x3F);
    }
    /* overlong forms, UTF-16 surrogates and values past U+10FFFF */
    if (c < min || (c >= 0xD800 && c <= 0xDFFF) || c > 0x10FFFF) return false;
    s += extra + 1;
  }
  return true;
}

/* ---- parsing ---- */

typedef struct parser {
  const char *path;
  const unsigned char *start, *p, *end;
} parser;

static lt_status malformed(const parser *ps, const char *expected) {
  size_t at = (size_t)(ps->p - ps->start);
  if (ps->p >= ps->end)
    return lt_error(LT_ERR_IO,
                    "safetensors: %s: malformed header: expected %s, found the end of the "
                    "header (%zu bytes)",
                    ps->path, expected, at);
  unsigned c = *ps->p;
  if (c >= 0x20 && c < 0x7F)
    return lt_error(LT_ERR_IO, "safetensors: %s: malformed header: expected %s at byte %zu, "
                    "found '%c'", ps->path, expected, at, (char)c);
  return lt_error(LT_ERR_IO, "safetensors: %s: malformed header: expected %s at byte %zu, "
                  "found byte 0x%02x", ps->path, expected, at, c);
}

static lt_status no_memory(const parser *ps) {
  return lt_error(LT_ERR_OOM, "safetensors: %s: out of memory reading the header", ps->path);
}

static void skip_space(parser *ps) {
  while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r'))
    ps->p++;
}

/* Skips space, then consumes c or fails saying what was expected. */
static lt_status expect(parser *ps, char c, const char *what) {
  skip_space(ps);
  if (ps->p >= ps->end || *ps->p != (unsigned char)c) return malformed(ps, what);
  ps->p++;
  return LT_OK;
}

/* Skips space; consumes c and returns true if it is next. */
static bool accept(parser *ps, char c) {
  skip_space(ps);
  if (ps->p < ps->end && *ps->p == (unsigned char)c) {
    ps->p++;
    return true;
  }
  return false;
}

static int hex_value(unsigned c) {
  if (c >= '0' && c <= '9') return (int)(c - '0');
  if (c >= 'a' && c <= 'f') return (int)(c - 'a' + 10);
  if (c >= 'A' && c <= 'F') return (int)(c - 'A' + 10);
  return -1;
}

/* The four hex digits after "\u" at ps->p. */
static lt_status read_hex4(parser *ps, unsigned *out) {
  unsigned v = 0;
  for (int k = 0; k < 4; k++) {
    int h = ps->p < ps->end ? hex_value(*ps->p) : -1;
    if (h < 0) return malformed(ps, "four hex digits after \\u");
    v = v << 4 | (unsigned)h;
    ps->p++;
  }
  *out = v;
  return LT_OK;
}

static char *put_utf8(char *o, unsigned cp) {
  if (cp < 0x80) {
    *o++ = (char)cp;
  } else if (cp < 0x800) {
    *o++ = (char)(0xC0 | cp >> 6);
    *o++ = (char)(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    *o++ = (char)(0xE0 | cp >> 12);
    *o++ = (char)(0x80 | ((cp >> 6) & 0x3F));
    *o++ = (char)(0x80 | (cp & 0x3F));
  } else {
    *o++ = (char)(0xF0 | cp >> 18);
    *o++ = (char)(0x80 | ((cp >> 12) & 0x3F));
    *o++ = (char)(0x80 | ((cp >> 6) & 0x3F));
    *o++ = (char)(0x80 | (cp & 0x3F));
  }
  return o;
}

/* One escape after the backslash at ps->p - 1, written at *o. */
static lt_status read_escape(parser *ps, char **o) {
  if (ps->p >= ps->end) return malformed(ps, "an escape character");
  unsigned c = *ps->p++;
  static const char escaped[] = "\"\\/bfnrt", decoded[] = "\"\\/\b\f\n\r\t";
  for (int k = 0; escaped[k]; k++) {
    if ((unsigned char)escaped[k] == c) {
      *(*o)++ = decoded[k];
      return LT_OK;
    }
  }
  if (c != 'u') {
    ps->p--;
    return malformed(ps, "one of \\\" \\\\ \\/ \\b \\f \\n \\r \\t \\u");
  }
  unsigned cp = 0;
  LT_TRY(read_hex4(ps, &cp));
  if (cp >= 0xDC00 && cp <= 0xDFFF) return malformed(ps, "a high surrogate before a low one");
  if (cp >= 0xD800 && cp <= 0xDBFF) { /* UTF-16 pair: the low half must follow */
    unsigned low = 0;
    if (ps->end - ps->p < 2 || ps->p[0] != '\\' || ps->p[1] != 'u')
      return malformed(ps, "the low half of a surrogate pair");
    ps->p += 2;
    LT_TRY(read_hex4(ps, &low));
    if (low < 0xDC00 || low > 0xDFFF) return malformed(ps, "the low half of a surrogate pair");
    cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
  }
  if (cp == 0) {
    ps->p -= 6;
    return malformed(ps, "no NUL character (\\u0000) in a name or value");
  }
  *o = put_utf8(*o, cp);
  return LT_OK;
}

/* A JSON string into a malloc'ed NUL-terminated copy. The closing quote is
 * found first: the decoded text is never longer than the raw one. */
static lt_status parse_string(parser *ps, char **out, const char *what) {
  *out = NULL;
  skip_space(ps);
  if (ps->p >= ps->end || *ps->p != '"') return malformed(ps, what);
  const unsigned char *q = ++ps->p;
  while (q < ps->end && *q != '"') q += (*q == '\\' && q + 1 < ps->end) ? 2 : 1;
  if (q >= ps->end) {
    ps->p = ps->end;
    return malformed(ps, "the closing quote of a string");
  }
  char *s = malloc((size_t)(q - ps->p) + 1), *o = s;
  if (!s) return no_memory(ps);
  lt_status st = LT_OK;
  while (st == LT_OK && ps->p < q) {
    unsigned c = *ps->p;
    if (c < 0x20) {
      st = malformed(ps, "no raw control character inside a string");
    } else if (c == '\\') {
      ps->p++;
      st = read_escape(ps, &o);
    } else {
      *o++ = (char)c;
      ps->p++;
    }
  }
  if (st != LT_OK) {
    free(s);
    return st;
  }
  *o = '\0';
  ps->p = q + 1;
  *out = s;
  return LT_OK;
}

/* A non-negative JSON integer that fits int64 (offsets and sizes). */
static lt_status parse_uint(parser *ps, uint64_t *out, const char *what) {
  skip_space(ps);
  const unsigned char *first = ps->p;
  uint64_t v = 0;
  while (ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9') {
    unsigned digit = *ps->p - '0';
    if (v > ((uint64_t)INT64_MAX - digit) / 10) {
      ps->p = first;
      return malformed(ps, "a number below 2^63");
    }
    v = v * 10 + digit;
    ps->p++;
  }
  if (ps->p == first) return malformed(ps, what);
  if (*first == '0' && ps->p - first > 1) {
    ps->p = first;
    return malformed(ps, "a number without leading zeros");
  }
  if (ps->p < ps->end && (*ps->p == '.' || *ps->p == 'e' || *ps->p == 'E'))
    return malformed(ps, "an integer");
  *out = v;
  return LT_OK;
}

/* [n, n, ...] with at most max entries. */
static lt_status parse_uint_list(parser *ps, uint64_t *vals, int max, int *count,
                                 const char *entry_name, const char *field) {
  LT_TRY(expect(ps, '[', "'[' opening a list"));
  int n = 0;
  if (!accept(ps, ']')) {
    do {
      if (n == max)
        return lt_error(LT_ERR_IO, "safetensors: %s: tensor '%s': %s has more than %d entries",
                        ps->path, entry_name, field, max);
      LT_TRY(parse_uint(ps, &vals[n++], "a non-negative integer"));
    } while (accept(ps, ','));
    LT_TRY(expect(ps, ']', "',' or ']' in a list"));
  }
  *count = n;
  return LT_OK;
}

enum { FIELD_DTYPE = 1, FIELD_SHAPE = 2, FIELD_OFFSETS = 4 };

static lt_status parse_field(parser *ps, st_entry *e, const char *key, unsigned *seen) {
  unsigned field = strcmp(key, "dtype") == 0          ? FIELD_DTYPE
                   : strcmp(key, "shape") == 0        ? FIELD_SHAPE
                   : strcmp(key, "data_offsets") == 0 ? FIELD_OFFSETS
                                                      : 0;
  if (field == 0)
    return lt_error(LT_ERR_IO, "safetensors: %s: tensor '%s' has an unknown field '%s'",
                    ps->path, e->name, key);
  if (*seen & field)
    return lt_error(LT_ERR_IO, "safetensors: %s: tensor '%s' has the field '%s' twice",
                    ps->path, e->name, key);
  *seen |= field;
  if (field == FIELD_DTYPE) {
    char *name;
    LT_TRY(parse_string(ps, &name, "a dtype string"));
    bool known = st_dtype_parse(name, &e->dtype);
    lt_status st = known ? LT_OK
                         : lt_error(LT_ERR_IO,
                                    "safetensors: %s: tensor '%s' has dtype '%s', which lt does "
                                    "not support (F32, F64, F16, BF16, I64, I32, U8, BOOL)",
                                    ps->path, e->name, name);
    free(name);
    return st;
  }
  if (field == FIELD_SHAPE) {
    uint64_t sizes[LT_MAX_DIMS];
    LT_TRY(parse_uint_list(ps, sizes, LT_MAX_DIMS, &e->ndim, e->name, "shape"));
    for (int d = 0; d < e->ndim; d++) e->shape[d] = (int64_t)sizes[d];
    return LT_OK;
  }
  uint64_t offsets[2];
  int n = 0;
  LT_TRY(parse_uint_list(ps, offsets, 2, &n, e->name, "data_offsets"));
  if (n != 2)
    return lt_error(LT_ERR_IO, "safetensors: %s: tensor '%s': data_offsets has %d entries, "
                    "expected 2 (begin and end)", ps->path, e->name, n);
  e->begin = offsets[0];
  e->end = offsets[1];
  return LT_OK;
}

/* {"dtype": "F32", "shape": [...], "data_offsets": [b, e]}, all three once. */
static lt_status parse_entry(parser *ps, st_entry *e) {
  LT_TRY(expect(ps, '{', "'{' opening a tensor entry"));
  unsigned seen = 0;
  if (!accept(ps, '}')) {
    do {
      char *key;
      LT_TRY(parse_string(ps, &key, "a field name in quotes"));
      lt_status st = expect(ps, ':', "':' after a field name");
      if (st == LT_OK) st = parse_field(ps, e, key, &seen);
      free(key);
      LT_TRY(st);
    } while (accept(ps, ','));
    LT_TRY(expect(ps, '}', "',' or '}' in a tensor entry"));
  }
  static const char *const names[] = {"dtype", "shape", "data_offsets"};
  for (int k = 0; k < 3; k++)
    if (!(seen & (1u << k)))
      return lt_error(LT_ERR_IO, "safetensors: %s: tensor '%s' has no '%s' field", ps->path,
                      e->name, names[k]);
  /* The shape as a tensor: with a size 0 the data offsets hold no bytes,
   * but [0, 2^62, 2^62] still has strides past int64. */
  char op[4200];
  snprintf(op, sizeof op, "safetensors: %s: tensor '%s'", ps->path, e->name);
  int64_t numel;
  if (lt_check_shape(op, e->shape, e->ndim, e->dtype, &numel) != LT_OK) return LT_ERR_IO;
  return LT_OK;
}

/* Grows an array of elsize-byte items to hold one more. */
static bool grow(void **items, int *capacity, int count, size_t elsize) {
  if (count < *capacity) return true;
  int cap = *capacity ? *capacity * 2 : 16;
  void *p = realloc(*items, (size_t)cap * elsize);
  if (!p) return false;
  *items = p;
  *capacity = cap;
  return true;
}

static lt_status add_metadata(parser *ps, st_header *h, char *key, char *value) {
  int cap = h->meta_capacity;
  if (!grow((void **)&h->meta_keys, &cap, h->nmeta, sizeof(char *)) ||
      !grow((void **)&h->meta_values, &h->meta_capacity, h->nmeta, sizeof(char *))) {
    free(key);
    free(value);
    return no_memory(ps);
  }
  h->meta_keys[h->nmeta] = key;
  h->meta_values[h->nmeta++] = value;
  return LT_OK;
}

/* {"key": "value", ...}: the format's metadata holds strings only. */
static lt_status parse_metadata(parser *ps, st_header *h) {
  LT_TRY(expect(ps, '{', "'{' opening __metadata__"));
  if (accept(ps, '}')) return LT_OK;
  do {
    char *key, *value;
    LT_TRY(parse_string(ps, &key, "a metadata key in quotes"));
    lt_status st = expect(ps, ':', "':' after a metadata key");
    if (st == LT_OK) {
      skip_space(ps);
      if (ps->p < ps->end && *ps->p != '"')
        st = lt_error(LT_ERR_IO, "safetensors: %s: metadata value of '%s' is not a string "
                      "(the format's metadata holds strings only)", ps->path, key);
      else
        st = parse_string(ps, &value, "a metadata value in quotes");
    }
    if (st != LT_OK) {
      free(key);
      return st;
    }
    LT_TRY(add_metadata(ps, h, key, value));
  } while (accept(ps, ','));
  return expect(ps, '}', "',' or '}' in __metadata__");
}

static int compare_strings(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The first name that appears twice among n, or NULL. */
static const char *find_duplicate(char **names, int n, const parser *ps, lt_status *st) {
  *st = LT_OK;
  if (n < 2) return NULL;
  char **sorted = malloc((size_t)n * sizeof *sorted);
  if (!sorted) {
    *st = no_memory(ps);
    return NULL;
  }
  memcpy(sorted, names, (size_t)n * sizeof *sorted);
  qsort(sorted, (size_t)n, sizeof *sorted, compare_strings);
  const char *dup = NULL;
  for (int i = 1; i < n && !dup; i++)
    if (strcmp(sorted[i - 1], sorted[i]) == 0) dup = sorted[i];
  free(sorted);
  return dup;
}

static lt_status check_unique(const parser *ps, const st_header *h) {
  lt_status st;
  char **names = malloc((size_t)(h->count ? h->count : 1) * sizeof *names);
  if (!names) return no_memory(ps);
  for (int i = 0; i < h->count; i++) names[i] = h->entries[i].name;
  const char *dup = find_duplicate(names, h->count, ps, &st);
  if (dup)
    st = lt_error(LT_ERR_IO, "safetensors: %s: tensor name '%s' appears twice", ps->path, dup);
  free(names);
  LT_TRY(st);
  dup = find_duplicate(h->meta_keys, h->nmeta, ps, &st);
  if (dup)
    st = lt_error(LT_ERR_IO, "safetensors: %s: metadata key '%s' appears twice", ps->path, dup);
  return st;
}

static lt_status parse_top(parser *ps, st_header *h) {
  LT_TRY(expect(ps, '{', "'{' opening the header"));
  bool have_metadata = false;
  if (!accept(ps, '}')) {
    do {
      char *name;
      LT_TRY(parse_string(ps, &name, "a tensor name in quotes"));
      if (strcmp(name, "__metadata__") == 0) {
        free(name);
        if (have_metadata)
          return lt_error(LT_ERR_IO, "safetensors: %s: __metadata__ appears twice", ps->path);
        have_metadata = true;
        LT_TRY(expect(ps, ':', "':' after __metadata__"));
        LT_TRY(parse_metadata(ps, h));
        continue;
      }
      if (!grow((void **)&h->entries, &h->capacity, h->count, sizeof(st_entry))) {
        free(name);
        return no_memory(ps);
      }
      st_entry *e = &h->entries[h->count++];
      memset(e, 0, sizeof *e);
      e->name = name; /* owned by the header from here on */
      LT_TRY(expect(ps, ':', "':' after a tensor name"));
      LT_TRY(parse_entry(ps, e));
    } while (accept(ps, ','));
    LT_TRY(expect(ps, '}', "',' or '}' after a tensor entry"));
  }
  skip_space(ps); /* the writer pads with spaces */
  if (ps->p != ps->end) return malformed(ps, "only spaces after the header object");
  return check_unique(ps, h);
}

lt_status st_header_parse(const char *path, const char *json, size_t len, st_header *out) {
  memset(out, 0, sizeof *out);
  if (!st_valid_utf8(json, len))
    return lt_error(LT_ERR_IO, "safetensors: %s: malformed header: not valid UTF-8", path);
  parser ps = {path, (const unsigned char *)json, (const unsigned char *)json,
               (const unsigned char *)json + len};
  lt_status st = parse_top(&ps, out);
  if (st != LT_OK) st_header_free(out);
  return st;
}

void st_header_free(st_header *h) {
  for (int i = 0; i < h->count; i++) free(h->entries[i].name);
  for (int i = 0; i < h->nmeta; i++) {
    free(h->meta_keys[i]);
    free(h->meta_values[i]);
  }
  free(h->entries);
  free(h->meta_keys);
  free(h->meta_values);
  memset(h, 0, sizeof *h);
}

/* ---- writing ---- */

typedef struct text {
  char *data;
  size_t len, cap;
  bool failed;
} text;

static void put(text *t, const char *s, size_t n) {
  if (t->failed) return;
  if (t->len + n + 1 > t->cap) {
    size_t cap = t->cap ? t->cap : 256;
    while (cap < t->len + n + 1) cap *= 2;
    char *p = realloc(t->data, cap);
    if (!p) {
      t->failed = true;
      return;
    }
    t->data = p;
    t->cap = cap;
  }
  memcpy(t->data + t->len, s, n);
  t->len += n;
  t->data[t->len] = '\0';
}

static void put_str(text *t, const char *s) { put(t, s, strlen(s)); }

static void put_uint(text *t, uint64_t v) {
  char buf[24];
  snprintf(buf, sizeof buf, "%llu", (unsigned long long)v);
  put_str(t, buf);
}

/* A JSON string: quotes, backslashes and control characters escaped; other
 * bytes (UTF-8, checked by the caller) as they are. */
static void put_quoted(text *t, const char *s) {
  put(t, "\"", 1);
  for (const char *run = s;; s++) {
    unsigned char c = (unsigned char)*s;
    if (c != 0 && c >= 0x20 && c != '"' && c != '\\') continue;
    put(t, run, (size_t)(s - run));
    if (c == 0) break;
    char esc[8];
    if (c == '"' || c == '\\') snprintf(esc, sizeof esc, "\\%c", c);
    else snprintf(esc, sizeof esc, "\\u%04x", c);
    put_str(t, esc);
    run = s + 1;
  }
  put(t, "\"", 1);
}

lt_status st_header_write(const st_entry *entries, int n, const char *const *meta_keys,
                          const char *const *meta_values, int nmeta, char **out, size_t *len) {
  text t = {0};
  put(&t, "{", 1);
  if (nmeta > 0) {
    put_str(&t, "\"__metadata__\":{");
    for (int i = 0; i < nmeta; i++) {
      if (i) put(&t, ",", 1);
      put_quoted(&t, meta_keys[i]);
      put(&t, ":", 1);
      put_quoted(&t, meta_values[i]);
    }
    put(&t, "}", 1);
  }
  for (int i = 0; i < n; i++) {
    const st_entry *e = &entries[i];
    if (i || nmeta > 0) put(&t, ",", 1);
    put_quoted(&t, e->name);
    put_str(&t, ":{\"dtype\":\"");
    put_str(&t, st_dtype_name(e->dtype));
    put_str(&t, "\",\"shape\":[");
    for (int d = 0; d < e->ndim; d++) {
      if (d) put(&t, ",", 1);
      put_uint(&t, (uint64_t)e->shape[d]);
    }
    put_str(&t, "],\"data_offsets\":[");
    put_uint(&t, e->begin);
    put(&t, ",", 1);
    put_uint(&t, e->end);
    put_str(&t, "]}");
  }
  put(&t, "}", 1);
  /* Spaces up to a multiple of 8, so that the data start 8-byte aligned. */
  while (!t.failed && t.len % 8 != 0) put(&t, " ", 1);
  if (t.failed) {
    free(t.data);
    return lt_error(LT_ERR_OOM, "safetensors: out of memory writing the header");
  }
  *out = t.data;
  *len = t.len;
  return LT_OK;
}
