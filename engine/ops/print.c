/* tostring(t): PyTorch's tensor printing, after torch/_tensor_str.py.
 *
 * One formatter per tensor decides, from the elements that will be shown, how
 * every number is written (integers "1.", fixed "0.1235", scientific
 * "1.0000e+10") and the width all of them are padded to, so columns line up.
 * Then the nested brackets are written with PyTorch's indentation, line
 * wrapping at 80 columns and "..." summaries beyond 1000 elements. Only the
 * suffixes differ from PyTorch: lt writes dtype=float16, not torch.float16,
 * and requires_grad=true in Lua's spelling, as modules print their flags
 * (bias=true); elements of a bool tensor keep PyTorch's True/False, which
 * line up as PyTorch's columns do. */
#include "lt/alloc.h"
#include "lt/print.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lt/autograd.h"
#include "lt/ops.h"

/* PyTorch's default print options. */
enum { PRECISION = 4, THRESHOLD = 1000, EDGEITEMS = 3, LINEWIDTH = 80 };

/* ---- a growable string ---- */

typedef struct strbuf {
  char *data;
  size_t len, cap;
  bool failed; /* an allocation failed; everything after is dropped */
} strbuf;

static void sb_append(strbuf *sb, const char *s, size_t n) {
  if (sb->failed) return;
  if (sb->len + n + 1 > sb->cap) {
    size_t cap = sb->cap ? sb->cap : 256;
    while (sb->len + n + 1 > cap) cap *= 2;
    char *grown = realloc(sb->data, cap);
    if (!grown) {
      sb->failed = true;
      return;
    }
    sb->data = grown;
    sb->cap = cap;
  }
  memcpy(sb->data + sb->len, s, n);
  sb->len += n;
  sb->data[sb->len] = '\0';
}

static void sb_puts(strbuf *sb, const char *s) { sb_append(sb, s, strlen(s)); }

static void sb_spaces(strbuf *sb, int n) {
  for (int i = 0; i < n; i++) sb_append(sb, " ", 1);
}

/* ---- which elements are shown ---- */

/* Indices shown along a dimension of the given size: all of them, or the
 * first and last EDGEITEMS when summarising ("..." goes between). */
static int shown_indices(int64_t size, bool summarize, int64_t out[2 * EDGEITEMS]) {
  if (summarize && size > 2 * EDGEITEMS) {
    for (int i = 0; i < EDGEITEMS; i++) {
      out[i] = i;
      out[EDGEITEMS + i] = size - EDGEITEMS + i;
    }
    return 2 * EDGEITEMS;
  }
  return -1; /* every index */
}

typedef void (*element_fn)(void *ctx, const void *elem);

/* Calls fn on every element that will be printed (torch's
 * get_summarized_data), so the formatter sees exactly those. */
static void visit_shown(const lt_tensor *t, const char *base, int dim, bool summarize,
                        element_fn fn, void *ctx) {
  size_t elsize = lt_dtype_size(t->dtype);
  if (dim == t->ndim) {
    fn(ctx, base);
    return;
  }
  int64_t picks[2 * EDGEITEMS];
  int count = shown_indices(t->shape[dim], summarize, picks);
  int64_t n = count < 0 ? t->shape[dim] : count;
  for (int64_t k = 0; k < n; k++) {
    int64_t i = count < 0 ? k : picks[k];
    visit_shown(t, base + i * t->stride[dim] * (int64_t)elsize, dim + 1, summarize, fn, ctx);
  }
}

/* ---- the formatter (torch's _Formatter) ---- */

typedef struct formatter {
  lt_dtype dtype;
  bool floating;
  bool int_mode; /* every shown float is an integer: "1." */
  bool sci_mode; /* "1.0000e+10" */
  int max_width;
  /* statistics of the nonzero finite shown values */
  int64_t count;
  double min_abs, max_abs;
} formatter;

/* Writes one value without padding, as Python's format does; returns length. */
static int format_plain(const formatter *f, const void *elem, char *buf, size_t cap) {
  if (f->dtype == LT_BOOL)
    return snprintf(buf, cap, "%s", *(const uint8_t *)elem ? "True" : "False");
  if (!f->floating) return snprintf(buf, cap, "%lld", (long long)lt_load_int64(elem, f->dtype));
  double v = lt_load_double(elem, f->dtype);
  /* Python writes every NaN as "nan" (C may write "-nan"). */
  if (isnan(v)) return snprintf(buf, cap, "nan");
  if (isinf(v)) return snprintf(buf, cap, v < 0 ? "-inf" : "inf");
  if (f->sci_mode) return snprintf(buf, cap, "%.*e", PRECISION, v);
  if (f->int_mode) return snprintf(buf, cap, "%.0f.", v);
  return snprintf(buf, cap, "%.*f", PRECISION, v);
}

static void gather_float_stats(void *ctx, const void *elem) {
  formatter *f = ctx;
  double v = lt_load_double(elem, f->dtype);
  if (!isfinite(v) || v == 0.0) return;
  double a = fabs(v);
  if (f->count == 0 || a < f->min_abs) f->min_abs = a;
  if (f->count == 0 || a > f->max_abs) f->max_abs = a;
  if (v != ceil(v)) f->int_mode = false;
  f->count++;
}

/* Widths count only nonzero finite floats (as torch), every integer or bool. */
static void measure_width(void *ctx, const void *elem) {
  formatter *f = ctx;
  if (f->floating) {
    double v = lt_load_double(elem, f->dtype);
    if (!isfinite(v) || v == 0.0) return;
  }
  char buf[64];
  int n = format_plain(f, elem, buf, sizeof buf);
  if (n > f->max_width) f->max_width = n;
}

static void formatter_init(formatter *f, const lt_tensor *t, bool summarize) {
  memset(f, 0, sizeof *f);
  f->dtype = t->dtype;
  f->floating = lt_dtype_is_floating(t->dtype);
  f->int_mode = true;
  f->max_width = 1;
  const char *base = lt_data(t);
  if (f->floating) {
    visit_shown(t, base, 0, summarize, gather_float_stats, f);
    if (f->count == 0) return; /* nothing finite and nonzero: plain "0." style */
    bool wide_range = f->max_abs / f->min_abs > 1000.0 || f->max_abs > 1.0e8;
    f->sci_mode = f->int_mode ? wide_range : wide_range || f->min_abs < 1.0e-4;
  }
  visit_shown(t, base, 0, summarize, measure_width, f);
}

/* One value padded on the left to the shared width. */
static void write_value(strbuf *sb, const formatter *f, const void *elem) {
  char buf[64];
  int n = format_plain(f, elem, buf, sizeof buf);
  if (n < 0) n = 0;
  if ((size_t)n >= sizeof buf) n = (int)sizeof buf - 1;
  sb_spaces(sb, f->max_width - n);
  sb_append(sb, buf, (size_t)n);
}

/* ---- layout (torch's _tensor_str_with_formatter) ---- */

static void write_vector(strbuf *sb, const lt_tensor *t, const char *base, int indent,
                         bool summarize, const formatter *f) {
  int dim = t->ndim - 1;
  size_t elsize = lt_dtype_size(t->dtype);
  int element_length = f->max_width + 2; /* ", " between elements */
  int per_line = (LINEWIDTH - indent) / element_length;
  if (per_line < 1) per_line = 1;

  int64_t picks[2 * EDGEITEMS];
  int count = shown_indices(t->shape[dim], summarize, picks);
  /* Items are the shown values plus " ..." (which counts as an item). */
  int64_t items = count < 0 ? t->shape[dim] : count + 1;
  sb_puts(sb, "[");
  for (int64_t k = 0; k < items; k++) {
    if (k > 0) {
      if (k % per_line == 0) {
        sb_puts(sb, ",\n");
        sb_spaces(sb, indent + 1);
      } else {
        sb_puts(sb, ", ");
      }
    }
    int64_t i;
    if (count < 0) {
      i = k;
    } else if (k == EDGEITEMS) {
      sb_puts(sb, " ...");
      continue;
    } else {
      i = picks[k < EDGEITEMS ? k : k - 1];
    }
    write_value(sb, f, base + i * t->stride[dim] * (int64_t)elsize);
  }
  sb_puts(sb, "]");
}

static void write_nested(strbuf *sb, const lt_tensor *t, const char *base, int dim, int indent,
                         bool summarize, const formatter *f) {
  int remaining = t->ndim - dim;
  if (remaining == 0) {
    write_value(sb, f, base);
    return;
  }
  if (remaining == 1) {
    write_vector(sb, t, base, indent, summarize, f);
    return;
  }
  size_t elsize = lt_dtype_size(t->dtype);
  int64_t picks[2 * EDGEITEMS];
  int count = shown_indices(t->shape[dim], summarize, picks);
  int64_t slices = count < 0 ? t->shape[dim] : count + 1;
  sb_puts(sb, "[");
  for (int64_t k = 0; k < slices; k++) {
    if (k > 0) {
      /* "," then a blank line per extra dimension, then the indent. */
      sb_puts(sb, ",");
      for (int d = 0; d < remaining - 1; d++) sb_puts(sb, "\n");
      sb_spaces(sb, indent + 1);
    }
    int64_t i;
    if (count < 0) {
      i = k;
    } else if (k == EDGEITEMS) {
      sb_puts(sb, "...");
      continue;
    } else {
      i = picks[k < EDGEITEMS ? k : k - 1];
    }
    write_nested(sb, t, base + i * t->stride[dim] * (int64_t)elsize, dim + 1, indent + 1,
                 summarize, f);
  }
  sb_puts(sb, "]");
}

/* ---- suffixes (torch's _add_suffixes) ---- */

typedef struct suffixes {
  char text[4][240];
  int count;
} suffixes;

static void add_suffix(suffixes *s, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
static void add_suffix(suffixes *s, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(s->text[s->count++], sizeof s->text[0], fmt, ap);
  va_end(ap);
}

/* Appends ", suffix" or, when the line would pass 80 columns, ",\n" and the
 * indent first; then ")". The line-length arithmetic copies torch's, quirks
 * included (a first line counts two more than its length). */
static void write_suffixes(strbuf *sb, const suffixes *s, int indent) {
  const char *newline = strrchr(sb->data ? sb->data : "", '\n');
  long last_line_len = newline ? (long)(sb->data + sb->len - newline) + 1 : (long)sb->len + 2;
  for (int i = 0; i < s->count; i++) {
    long n = (long)strlen(s->text[i]);
    if (last_line_len + n + 2 > LINEWIDTH) {
      sb_puts(sb, ",\n");
      sb_spaces(sb, indent);
      last_line_len = indent + n;
    } else {
      sb_puts(sb, ", ");
      last_line_len += n + 2;
    }
    sb_puts(sb, s->text[i]);
  }
  sb_puts(sb, ")");
}

/* ---- entry point ---- */

static void write_tensor(strbuf *sb, const lt_tensor *t, const lt_tensor *shown) {
  static const char prefix[] = "tensor(";
  const int indent = (int)sizeof prefix - 1;
  suffixes s = {.count = 0};
  if (t->storage->device.type != LT_DEVICE_CPU) {
    char name[16];
    add_suffix(&s, "device='%s'", lt_device_name(t->storage->device, name));
  }
  int64_t n = lt_numel(t);
  /* While estimating (and for what an estimate made) there are no values. */
  const bool no_data = n > 0 && (t->storage->meta || lt_estimating());
  sb_puts(sb, prefix);
  if (n == 0 || no_data) {
    /* No elements to show the type by, so anything but float32 is named. */
    if (t->ndim != 1 || no_data) {
      char shape[200] = "(";
      for (int d = 0; d < t->ndim; d++) {
        size_t len = strlen(shape);
        snprintf(shape + len, sizeof shape - len, "%s%lld", d ? ", " : "", (long long)t->shape[d]);
      }
      size_t len = strlen(shape);
      snprintf(shape + len, sizeof shape - len, ")");
      add_suffix(&s, "size=%s", shape);
    }
    if (t->dtype != LT_FLOAT32) add_suffix(&s, "dtype=%s", lt_dtype_name(t->dtype));
    sb_puts(sb, no_data ? "[no data: lt.memory.estimate]" : "[]");
  } else {
    if (t->dtype != LT_FLOAT32 && t->dtype != LT_INT64 && t->dtype != LT_BOOL)
      add_suffix(&s, "dtype=%s", lt_dtype_name(t->dtype));
    bool summarize = n > THRESHOLD;
    formatter f;
    formatter_init(&f, shown, summarize);
    write_nested(sb, shown, lt_data(shown), 0, indent, summarize, &f);
  }
  const char *grad_fn = lt_grad_fn_name(t);
  if (grad_fn)
    add_suffix(&s, "grad_fn=<%s>", grad_fn);
  else if (t->requires_grad)
    add_suffix(&s, "requires_grad=true");
  write_suffixes(sb, &s, indent);
}

char *lt_tensor_to_string(const lt_tensor *t) {
  if (!t || !t->storage) {
    lt_error(LT_ERR_FREED, "tostring: attempt to use a freed tensor");
    return NULL;
  }
  /* Values are read on the host: a device tensor is copied over first. */
  lt_tensor *host = NULL;
  if (t->storage->device.type != LT_DEVICE_CPU && lt_numel(t) > 0) {
    if (lt_to_device(t, lt_cpu(), &host) != LT_OK) return NULL;
  }
  strbuf sb = {0};
  write_tensor(&sb, t, host ? host : t);
  if (host) lt_tensor_release(host);
  if (sb.failed) {
    free(sb.data);
    lt_error(LT_ERR_OOM, "tostring: out of host memory for the text of a tensor");
    return NULL;
  }
  return sb.data;
}
