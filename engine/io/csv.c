/* The CSV reader behind lt.data.csv: the file is read whole and parsed in one
 * pass into a row-major array of doubles (the features) and the label
 * column's cells. Whether the label column holds numbers or class names is
 * known only at the end, so its cells are kept as text in an arena and
 * converted afterwards. Every error names the file, the line the record
 * starts on, and the column (by header name when there is one). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "lt/data_io.h"

#define CSV_MAX_BYTES ((uint64_t)1 << 34)

/* A growable byte arena (cell text) and array (numbers). */
typedef struct {
  char *data;
  size_t len, cap;
} arena;

static bool arena_reserve(arena *a, size_t more) {
  if (a->len + more <= a->cap) return true;
  size_t cap = a->cap ? a->cap : 256;
  while (cap < a->len + more) cap *= 2;
  char *p = realloc(a->data, cap);
  if (!p) return false;
  a->data = p;
  a->cap = cap;
  return true;
}

typedef struct {
  double *data;
  size_t len, cap;
} numbers;

static bool numbers_push(numbers *v, double x) {
  if (v->len == v->cap) {
    size_t cap = v->cap ? v->cap * 2 : 1024;
    double *p = realloc(v->data, cap * sizeof *p);
    if (!p) return false;
    v->data = p;
    v->cap = cap;
  }
  v->data[v->len++] = x;
  return true;
}

/* The cells of one record: offsets into the scratch arena, NUL-terminated. */
typedef struct {
  size_t *start;
  int64_t count, cap;
  arena text;
} record;

typedef struct {
  const char *path;
  const char *p, *end;
  int64_t line; /* the physical line p is on, 1-based */
  char delim;
} parser;

static lt_status oom(const char *path) { return lt_error(LT_ERR_OOM, "csv: out of memory reading %s", path); }

static bool is_space(char c) { return c == ' ' || c == '\t'; }

/* Appends one cell to rec: its bytes (unquoted, "" unescaped), trimmed of
 * surrounding spaces when it was not quoted. */
static lt_status parse_cell(parser *ps, record *rec, int64_t record_line) {
  if (rec->count == rec->cap) {
    int64_t cap = rec->cap ? rec->cap * 2 : 16;
    size_t *s = realloc(rec->start, sizeof *s * (size_t)cap);
    if (!s) return oom(ps->path);
    rec->start = s;
    rec->cap = cap;
  }
  rec->start[rec->count++] = rec->text.len;
  const char *p = ps->p;
  while (p < ps->end && is_space(*p)) p++;
  if (p < ps->end && *p == '"') {
    p++;
    for (;;) {
      if (p >= ps->end)
        return lt_error(LT_ERR_IO, "csv: %s:%lld: a quoted cell is not closed before the end of the file",
                        ps->path, (long long)record_line);
      char c = *p++;
      if (c == '"') {
        if (p < ps->end && *p == '"') {
          p++; /* "" is a quote inside the cell */
        } else {
          break;
        }
      } else if (c == '\n') {
        ps->line++;
      } else if (c == '\0') {
        return lt_error(LT_ERR_IO, "csv: %s:%lld: a NUL byte in a cell (not a text file?)", ps->path,
                        (long long)ps->line);
      }
      if (!arena_reserve(&rec->text, 1)) return oom(ps->path);
      rec->text.data[rec->text.len++] = c;
    }
    while (p < ps->end && is_space(*p)) p++;
    if (p < ps->end && *p != ps->delim && *p != '\n' && *p != '\r')
      return lt_error(LT_ERR_IO, "csv: %s:%lld: column %lld: text after the closing quote", ps->path,
                      (long long)ps->line, (long long)rec->count);
  } else {
    const char *s = p;
    while (p < ps->end && *p != ps->delim && *p != '\n' && *p != '\r') {
      if (*p == '\0')
        return lt_error(LT_ERR_IO, "csv: %s:%lld: a NUL byte in a cell (not a text file?)", ps->path,
                        (long long)ps->line);
      p++;
    }
    const char *e = p;
    while (e > s && is_space(e[-1])) e--;
    size_t n = (size_t)(e - s);
    if (!arena_reserve(&rec->text, n)) return oom(ps->path);
    if (n) memcpy(rec->text.data + rec->text.len, s, n);
    rec->text.len += n;
  }
  if (!arena_reserve(&rec->text, 1)) return oom(ps->path);
  rec->text.data[rec->text.len++] = '\0';
  ps->p = p;
  return LT_OK;
}

/* The next record into rec (its line in *line); *got false at the end of
 * the file. Blank lines are skipped. */
static lt_status parse_record(parser *ps, record *rec, int64_t *line, bool *got) {
  *got = false;
  for (;;) {
    if (ps->p >= ps->end) return LT_OK;
    const char *q = ps->p;
    while (q < ps->end && is_space(*q)) q++;
    if (q < ps->end && (*q == '\n' || *q == '\r')) { /* a blank line */
      if (*q == '\r' && q + 1 < ps->end && q[1] == '\n') q++;
      ps->p = q + 1;
      ps->line++;
      continue;
    }
    if (q >= ps->end) { /* spaces at the end of the file */
      ps->p = q;
      return LT_OK;
    }
    break;
  }
  rec->count = 0;
  rec->text.len = 0;
  *line = ps->line;
  for (;;) {
    LT_TRY(parse_cell(ps, rec, *line));
    if (ps->p < ps->end && *ps->p == ps->delim) {
      ps->p++;
      continue;
    }
    break;
  }
  if (ps->p < ps->end) { /* the line's end: \n, \r\n or a lone \r */
    if (*ps->p == '\r' && ps->p + 1 < ps->end && ps->p[1] == '\n') ps->p++;
    ps->p++;
    ps->line++;
  }
  *got = true;
  return LT_OK;
}

static const char *cell(const record *rec, int64_t i) { return rec->text.data + rec->start[i]; }

/* "column 3 ('petal_length')" or "column 3". */
static const char *column_label(char *buf, size_t n, char **header, int64_t j) {
  if (header) snprintf(buf, n, "column %lld ('%s')", (long long)j + 1, header[j]);
  else snprintf(buf, n, "column %lld", (long long)j + 1);
  return buf;
}

static bool parse_number(const char *s, double *out) {
  if (*s == '\0') return false;
  errno = 0;
  char *e;
  double v = strtod(s, &e);
  if (e == s || *e != '\0') return false;
  /* strtod reports overflow with ERANGE and +-HUGE_VAL: "1e999" is not a
   * float32 or float64 number anyone meant. Underflow to 0 is fine. */
  if (errno == ERANGE && isinf(v)) return false;
  *out = v;
  return true;
}

/* An integer as written: digits with an optional sign, within 2^53 (so that
 * the double holding it is exact). */
static bool is_integer_text(const char *s) {
  if (*s == '+' || *s == '-') s++;
  size_t n = 0;
  for (; *s; s++, n++)
    if (*s < '0' || *s > '9') return false;
  return n > 0 && n <= 15;
}

static int compare_strings(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

void lt_csv_free(lt_csv *csv) {
  if (!csv) return;
  if (csv->names)
    for (int64_t i = 0; i < csv->features; i++) free(csv->names[i]);
  free(csv->names);
  free(csv->label_column);
  free(csv->values);
  free(csv->label_values);
  if (csv->classes)
    for (int64_t i = 0; i < csv->nclasses; i++) free(csv->classes[i]);
  free(csv->classes);
  memset(csv, 0, sizeof *csv);
}

static lt_status read_whole(const char *path, char **data, size_t *size) {
  *data = NULL;
  struct stat sb;
  if (stat(path, &sb) != 0) return lt_error(LT_ERR_IO, "csv: cannot open %s: %s", path, strerror(errno));
  if (!S_ISREG(sb.st_mode)) return lt_error(LT_ERR_IO, "csv: %s is not a regular file", path);
  if ((uint64_t)sb.st_size > CSV_MAX_BYTES)
    return lt_error(LT_ERR_IO, "csv: %s is too large (%lld bytes)", path, (long long)sb.st_size);
  FILE *f = fopen(path, "rb");
  if (!f) return lt_error(LT_ERR_IO, "csv: cannot open %s: %s", path, strerror(errno));
  size_t n = (size_t)sb.st_size;
  char *buf = malloc(n ? n : 1);
  if (!buf) {
    fclose(f);
    return oom(path);
  }
  size_t got = fread(buf, 1, n, f);
  int failed = ferror(f);
  fclose(f);
  if (failed || got != n) {
    free(buf);
    return lt_error(LT_ERR_IO, "csv: cannot read %s", path);
  }
  *data = buf;
  *size = n;
  return LT_OK;
}

/* The state of one read, freed in one place whatever happened. */
typedef struct {
  char *file;
  record rec;
  char **header;
  int64_t ncols;
  numbers values, label_numbers;
  arena label_text;
  size_t *label_start;
  size_t label_cap;
  char **sorted;
} csv_state;

static void state_free(csv_state *s) {
  free(s->file);
  free(s->rec.start);
  free(s->rec.text.data);
  if (s->header)
    for (int64_t i = 0; i < s->ncols; i++) free(s->header[i]);
  free(s->header);
  free(s->values.data);
  free(s->label_numbers.data);
  free(s->label_text.data);
  free(s->label_start);
  free(s->sorted);
}

/* The header's names, or the list of them for a message. */
static void list_columns(char *buf, size_t n, char **header, int64_t ncols) {
  size_t used = 0;
  buf[0] = '\0';
  for (int64_t j = 0; j < ncols && used + 8 < n; j++) {
    int w = snprintf(buf + used, n - used, "%s%s", j ? ", " : "", header[j]);
    if (w < 0) break;
    used += (size_t)w;
  }
  if (used >= n - 1 && n > 4) memcpy(buf + n - 4, "...", 4);
}

static lt_status parse_table(csv_state *s, const char *path, const lt_csv_options *opts, lt_csv *out) {
  size_t size = 0;
  LT_TRY(read_whole(path, &s->file, &size));
  parser ps = {path, s->file, s->file + size, 1, opts->delimiter};
  if (size >= 3 && memcmp(s->file, "\xEF\xBB\xBF", 3) == 0) ps.p += 3;

  int64_t line = 0, first_line = 0;
  bool got;
  LT_TRY(parse_record(&ps, &s->rec, &line, &got));
  if (!got) return lt_error(LT_ERR_IO, "csv: %s is empty", path);
  s->ncols = s->rec.count;
  first_line = line;
  bool pending = true; /* the record in s->rec is a data row not yet used */
  if (opts->header) {
    s->header = calloc((size_t)s->ncols, sizeof *s->header);
    if (!s->header) return oom(path);
    for (int64_t j = 0; j < s->ncols; j++)
      if (!(s->header[j] = strdup(cell(&s->rec, j)))) return oom(path);
    pending = false;
  }

  int64_t label = -1;
  if (opts->label_name) {
    if (!s->header)
      return lt_error(LT_ERR_ARG, "csv: %s: label '%s' names a column, but the file is read without a "
                      "header (header=false): give the label column's 1-based index", path, opts->label_name);
    for (int64_t j = 0; j < s->ncols && label < 0; j++)
      if (strcmp(s->header[j], opts->label_name) == 0) label = j;
    if (label < 0) {
      char cols[512];
      list_columns(cols, sizeof cols, s->header, s->ncols);
      return lt_error(LT_ERR_IO, "csv: %s: no column '%s' in the header (columns: %s)", path,
                      opts->label_name, cols);
    }
  } else if (opts->label_index >= 0) {
    if (opts->label_index >= s->ncols)
      return lt_error(LT_ERR_IO, "csv: %s: label column %lld, but line %lld has %lld column%s", path,
                      (long long)opts->label_index + 1, (long long)first_line, (long long)s->ncols,
                      s->ncols == 1 ? "" : "s");
    label = opts->label_index;
  }
  int64_t features = s->ncols - (label >= 0 ? 1 : 0);
  int64_t rows = 0;
  bool integral = true, text = false;
  char colbuf[320];
  for (;;) {
    if (!pending) {
      LT_TRY(parse_record(&ps, &s->rec, &line, &got));
      if (!got) break;
    }
    pending = false;
    if (s->rec.count != s->ncols)
      return lt_error(LT_ERR_IO, "csv: %s:%lld: %lld cell%s, expected %lld (as %s line %lld)", path,
                      (long long)line, (long long)s->rec.count, s->rec.count == 1 ? "" : "s",
                      (long long)s->ncols, s->header ? "in the header on" : "on", (long long)first_line);
    for (int64_t j = 0; j < s->ncols; j++) {
      const char *c = cell(&s->rec, j);
      if (j == label) {
        if (*c == '\0')
          return lt_error(LT_ERR_IO, "csv: %s:%lld: %s: empty label", path, (long long)line,
                          column_label(colbuf, sizeof colbuf, s->header, j));
        double v = 0;
        if (!text && parse_number(c, &v)) {
          if (integral && !is_integer_text(c)) integral = false;
        } else {
          text = true;
        }
        if (!text && !numbers_push(&s->label_numbers, v)) return oom(path);
        /* The text is kept too: a later cell may turn out to be a name. */
        if ((size_t)rows == s->label_cap) {
          size_t cap = s->label_cap ? s->label_cap * 2 : 1024;
          size_t *st = realloc(s->label_start, cap * sizeof *st);
          if (!st) return oom(path);
          s->label_start = st;
          s->label_cap = cap;
        }
        size_t n = strlen(c) + 1;
        if (!arena_reserve(&s->label_text, n)) return oom(path);
        s->label_start[rows] = s->label_text.len;
        memcpy(s->label_text.data + s->label_text.len, c, n);
        s->label_text.len += n;
        continue;
      }
      double v;
      if (!parse_number(c, &v)) {
        if (*c == '\0')
          return lt_error(LT_ERR_IO, "csv: %s:%lld: %s: empty cell, expected a number", path,
                          (long long)line, column_label(colbuf, sizeof colbuf, s->header, j));
        return lt_error(LT_ERR_IO, "csv: %s:%lld: %s: '%.60s' is not a number", path, (long long)line,
                        column_label(colbuf, sizeof colbuf, s->header, j), c);
      }
      if (!numbers_push(&s->values, v)) return oom(path);
    }
    rows++;
  }

  out->rows = rows;
  out->features = features;
  out->values = s->values.data;
  s->values.data = NULL;
  if (s->header) {
    out->names = calloc((size_t)(features ? features : 1), sizeof *out->names);
    if (!out->names) return oom(path);
    for (int64_t j = 0, k = 0; j < s->ncols; j++) {
      if (j == label) continue;
      out->names[k++] = s->header[j];
      s->header[j] = NULL;
    }
    if (label >= 0) {
      out->label_column = s->header[label];
      s->header[label] = NULL;
    }
  }
  if (label < 0) return LT_OK;
  out->has_label = true;
  out->label_values = malloc(sizeof *out->label_values * (size_t)(rows ? rows : 1));
  if (!out->label_values) return oom(path);
  if (!text) {
    out->label_integral = integral;
    if (rows) memcpy(out->label_values, s->label_numbers.data, sizeof(double) * (size_t)rows);
    return LT_OK;
  }
  /* Class names: sorted distinct values are classes 0..C-1 (the caller
   * adds one). */
  out->label_is_text = true;
  s->sorted = malloc(sizeof *s->sorted * (size_t)(rows ? rows : 1));
  if (!s->sorted) return oom(path);
  for (int64_t r = 0; r < rows; r++) s->sorted[r] = s->label_text.data + s->label_start[r];
  qsort(s->sorted, (size_t)rows, sizeof *s->sorted, compare_strings);
  int64_t nclasses = 0;
  for (int64_t r = 0; r < rows; r++)
    if (r == 0 || strcmp(s->sorted[r], s->sorted[nclasses - 1]) != 0) s->sorted[nclasses++] = s->sorted[r];
  out->classes = calloc((size_t)(nclasses ? nclasses : 1), sizeof *out->classes);
  if (!out->classes) return oom(path);
  out->nclasses = nclasses;
  for (int64_t k = 0; k < nclasses; k++)
    if (!(out->classes[k] = strdup(s->sorted[k]))) return oom(path);
  for (int64_t r = 0; r < rows; r++) {
    const char *v = s->label_text.data + s->label_start[r];
    char **hit = bsearch(&v, s->sorted, (size_t)nclasses, sizeof *s->sorted, compare_strings);
    out->label_values[r] = (double)(hit - s->sorted);
  }
  return LT_OK;
}

lt_status lt_csv_read(const char *path, const lt_csv_options *opts, lt_csv *out) {
  memset(out, 0, sizeof *out);
  csv_state s;
  memset(&s, 0, sizeof s);
  lt_status st = parse_table(&s, path, opts, out);
  state_free(&s);
  if (st != LT_OK) lt_csv_free(out);
  return st;
}
