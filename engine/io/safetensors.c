/* safetensors files: loading with every offset checked against the bytes
 * present, and atomic saving (atomic_file.c: temporary, fsync, rename). The header's
 * JSON is safetensors_header.c's job; this file deals with the layout of the
 * file and with tensors. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/atomic_file.h"
#include "io/safetensors_header.h"
#include "lt/alloc.h"
#include "lt/io.h"
#include "lt/ops.h"

/* The format stores little-endian data, which lt's tensors hold as they are
 * on the hosts it runs on; a big-endian host would need byte swapping here. */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors.c assumes a little-endian host"
#endif

/* Reads/writes in slices, as read(2) and write(2) may move less at once. */
#define IO_SLICE ((size_t)1 << 30)

static lt_status io_error(const char *what, const char *path) {
  return lt_error(LT_ERR_IO, "safetensors: %s %s: %s", what, path, strerror(errno));
}

/* Exactly n bytes from offset; a short read means the file shrank under us. */
static lt_status read_at(int fd, const char *path, void *buf, size_t n, uint64_t offset) {
  char *p = buf;
  size_t done = 0;
  while (done < n) {
    size_t slice = n - done < IO_SLICE ? n - done : IO_SLICE;
    ssize_t got = pread(fd, p + done, slice, (off_t)(offset + done));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return io_error("cannot read", path);
    if (got == 0)
      return lt_error(LT_ERR_IO, "safetensors: %s: file is truncated (it changed while being read)",
                      path);
    done += (size_t)got;
  }
  return LT_OK;
}

static lt_status write_all(int fd, const char *path, const void *buf, size_t n) {
  const char *p = buf;
  size_t done = 0;
  while (done < n) {
    size_t slice = n - done < IO_SLICE ? n - done : IO_SLICE;
    ssize_t put = write(fd, p + done, slice);
    if (put < 0 && errno == EINTR) continue;
    if (put < 0) return io_error("cannot write", path);
    done += (size_t)put;
  }
  return LT_OK;
}

/* ---- loading ---- */

/* The bytes an entry's shape and dtype need; false on overflow. */
static bool entry_bytes(const st_entry *e, uint64_t *out) {
  uint64_t n = lt_dtype_size(e->dtype);
  for (int d = 0; d < e->ndim; d++) {
    uint64_t s = (uint64_t)e->shape[d];
    if (s != 0 && n > UINT64_MAX / s) return false;
    n *= s;
  }
  *out = n;
  return true;
}

static int compare_begin(const void *a, const void *b) {
  const st_entry *x = *(const st_entry *const *)a, *y = *(const st_entry *const *)b;
  if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
  return x->end < y->end ? -1 : x->end > y->end;
}

/* Offsets as the reference implementation demands: each entry's byte count
 * fits its shape and dtype, and the entries, by offset, tile the data
 * section exactly, with no gap, no overlap and nothing after. `order`
 * receives the entries sorted by offset. */
static lt_status check_offsets(const char *path, st_header *h, uint64_t data_size,
                               st_entry **order) {
  for (int i = 0; i < h->count; i++) {
    st_entry *e = &h->entries[i];
    uint64_t need;
    order[i] = e;
    if (e->end < e->begin)
      return lt_error(LT_ERR_IO, "safetensors: %s: tensor '%s' has data_offsets [%llu, %llu] "
                      "that end before they begin", path, e->name,
                      (unsigned long long)e->begin, (unsigned long long)e->end);
    char shape[160];
    lt_format_shape(shape, sizeof shape, e->shape, e->ndim);
    if (!entry_bytes(e, &need))
      return lt_error(LT_ERR_IO, "safetensors: %s: tensor '%s' has shape %s, too large", path,
                      e->name, shape);
    if (need != e->end - e->begin)
      return lt_error(LT_ERR_IO, "safetensors: %s: tensor '%s' of shape %s and dtype %s needs "
                      "%llu bytes, but its data_offsets [%llu, %llu] hold %llu", path, e->name,
                      shape, st_dtype_name(e->dtype), (unsigned long long)need,
                      (unsigned long long)e->begin, (unsigned long long)e->end,
                      (unsigned long long)(e->end - e->begin));
  }
  qsort(order, (size_t)h->count, sizeof *order, compare_begin);
  uint64_t at = 0;
  for (int i = 0; i < h->count; i++) {
    const st_entry *e = order[i];
    if (e->begin < at)
      return lt_error(LT_ERR_IO, "safetensors: %s: the data of tensors '%s' and '%s' overlap "
                      "(bytes %llu to %llu)", path, order[i - 1]->name, e->name,
                      (unsigned long long)e->begin, (unsigned long long)at);
    if (e->begin > at)
      return lt_error(LT_ERR_IO, "safetensors: %s: bytes %llu to %llu of the data belong to no "
                      "tensor (before '%s')", path, (unsigned long long)at,
                      (unsigned long long)e->begin, e->name);
    at = e->end;
  }
  if (at > data_size)
    return lt_error(LT_ERR_IO, "safetensors: %s: file is truncated: the tensors need %llu bytes "
                    "of data, only %llu present", path, (unsigned long long)at,
                    (unsigned long long)data_size);
  if (at < data_size)
    return lt_error(LT_ERR_IO, "safetensors: %s: %llu bytes after the last tensor's data",
                    path, (unsigned long long)(data_size - at));
  return LT_OK;
}

/* lt's bool tensors hold 0 or 1; any other byte is a corrupt file. */
static lt_status check_bools(const char *path, const char *name, const lt_tensor *t) {
  const unsigned char *b = lt_data(t);
  for (int64_t i = 0, n = lt_numel(t); i < n; i++)
    if (b[i] > 1)
      return lt_error(LT_ERR_IO, "safetensors: %s: BOOL tensor '%s' holds the byte %u at "
                      "element %lld", path, name, b[i], LT_USER_INDEX(i));
  return LT_OK;
}

/* Moves the header's strings and the tensors into the result. */
static lt_status read_tensors(int fd, const char *path, st_header *h, st_entry **order,
                              uint64_t data_start, lt_safetensors *out) {
  out->names = calloc((size_t)h->count + 1, sizeof *out->names);
  out->tensors = calloc((size_t)h->count + 1, sizeof *out->tensors);
  out->meta_keys = calloc((size_t)h->nmeta + 1, sizeof *out->meta_keys);
  out->meta_values = calloc((size_t)h->nmeta + 1, sizeof *out->meta_values);
  if (!out->names || !out->tensors || !out->meta_keys || !out->meta_values)
    return lt_error(LT_ERR_OOM, "safetensors: %s: out of memory", path);
  for (int i = 0; i < h->nmeta; i++) {
    out->meta_keys[i] = h->meta_keys[i];
    out->meta_values[i] = h->meta_values[i];
    h->meta_keys[i] = h->meta_values[i] = NULL;
    out->nmeta++;
  }
  for (int i = 0; i < h->count; i++) {
    st_entry *e = order[i];
    lt_tensor *t = NULL;
    LT_TRY(lt_empty(e->shape, e->ndim, e->dtype, lt_cpu(), &t));
    out->names[i] = e->name;
    e->name = NULL;
    out->tensors[i] = t;
    out->count++;
    LT_TRY(read_at(fd, path, lt_data(t), lt_nbytes(t), data_start + e->begin));
    if (e->dtype == LT_BOOL) LT_TRY(check_bools(path, out->names[i], t));
  }
  return LT_OK;
}

/* The 8-byte length, the header, its checks and the data, from an open file. */
static lt_status load_from(int fd, const char *path, lt_safetensors *out) {
  struct stat sb;
  if (fstat(fd, &sb) != 0) return io_error("cannot stat", path);
  if (!S_ISREG(sb.st_mode))
    return lt_error(LT_ERR_IO, "safetensors: %s is not a regular file", path);
  uint64_t size = (uint64_t)sb.st_size;
  if (size < 8)
    return lt_error(LT_ERR_IO, "safetensors: %s: file of %llu bytes is too short to be a "
                    "safetensors file (8-byte header length missing)", path,
                    (unsigned long long)size);
  unsigned char len_bytes[8];
  LT_TRY(read_at(fd, path, len_bytes, 8, 0));
  uint64_t n = 0;
  for (int k = 7; k >= 0; k--) n = n << 8 | len_bytes[k];
  if (n > size - 8)
    return lt_error(LT_ERR_IO, "safetensors: %s: header length %llu is larger than the rest of "
                    "the file (%llu bytes): truncated or not a safetensors file", path,
                    (unsigned long long)n, (unsigned long long)(size - 8));
  if (n > ST_MAX_HEADER_BYTES)
    return lt_error(LT_ERR_IO, "safetensors: %s: header length %llu exceeds the format's limit "
                    "of %u bytes", path, (unsigned long long)n, ST_MAX_HEADER_BYTES);
  char *json = malloc(n ? (size_t)n : 1);
  if (!json) return lt_error(LT_ERR_OOM, "safetensors: %s: out of memory", path);
  lt_status st = read_at(fd, path, json, (size_t)n, 8);
  st_header h = {0};
  if (st == LT_OK) st = st_header_parse(path, json, (size_t)n, &h);
  free(json);
  st_entry **order = NULL;
  if (st == LT_OK) {
    order = malloc(((size_t)h.count + 1) * sizeof *order);
    if (!order) st = lt_error(LT_ERR_OOM, "safetensors: %s: out of memory", path);
  }
  if (st == LT_OK) st = check_offsets(path, &h, size - 8 - n, order);
  if (st == LT_OK) st = read_tensors(fd, path, &h, order, 8 + n, out);
  free(order);
  st_header_free(&h);
  return st;
}

lt_status lt_safetensors_load(const char *path, lt_safetensors *out) {
  memset(out, 0, sizeof *out);
  if (lt_estimating())
    return lt_error(LT_ERR_ARG, "safetensors: cannot load %s inside lt.memory.estimate (its "
                    "tensors hold no data); load it before the estimate", path);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return io_error("cannot open", path);
  lt_status st = load_from(fd, path, out);
  close(fd);
  if (st != LT_OK) lt_safetensors_free(out);
  return st;
}

void lt_safetensors_free(lt_safetensors *st) {
  for (int i = 0; i < st->count; i++) {
    free(st->names[i]);
    if (st->tensors[i]) lt_tensor_release(st->tensors[i]);
  }
  for (int i = 0; i < st->nmeta; i++) {
    free(st->meta_keys[i]);
    free(st->meta_values[i]);
  }
  free(st->names);
  free(st->tensors);
  free(st->meta_keys);
  free(st->meta_values);
  memset(st, 0, sizeof *st);
}

/* ---- saving ---- */

typedef struct named_index {
  const char *name;
  int index;
} named_index;

static int compare_named(const void *a, const void *b) {
  return strcmp(((const named_index *)a)->name, ((const named_index *)b)->name);
}

/* Indices 0..n-1 ordered by strings[i] (byte order, as the reference
 * implementation sorts); the first duplicate, if any, in *dup. */
static lt_status sort_indices(const char *const *strings, int n, int *order, const char **dup) {
  *dup = NULL;
  named_index *items = malloc(((size_t)n + 1) * sizeof *items);
  if (!items) return lt_error(LT_ERR_OOM, "safetensors: out of memory");
  for (int i = 0; i < n; i++) items[i] = (named_index){strings[i], i};
  qsort(items, (size_t)n, sizeof *items, compare_named);
  for (int i = 0; i < n; i++) {
    order[i] = items[i].index;
    if (i > 0 && !*dup && strcmp(items[i - 1].name, items[i].name) == 0) *dup = items[i].name;
  }
  free(items);
  return LT_OK;
}

static lt_status check_string(const char *path, const char *s, const char *what) {
  if (!s) return lt_error(LT_ERR_ARG, "safetensors: cannot write %s: a %s is missing", path, what);
  if (!st_valid_utf8(s, strlen(s)))
    return lt_error(LT_ERR_ARG, "safetensors: cannot write %s: %s '%s' is not valid UTF-8", path,
                    what, s);
  return LT_OK;
}

static lt_status check_inputs(const char *path, const char *const *names,
                              lt_tensor *const *tensors, int count, const char *const *keys,
                              const char *const *values, int nmeta) {
  for (int i = 0; i < count; i++) {
    LT_TRY(check_string(path, names[i], "tensor name"));
    if (names[i][0] == '\0' || strcmp(names[i], "__metadata__") == 0)
      return lt_error(LT_ERR_ARG, "safetensors: cannot write %s: '%s' cannot name a tensor",
                      path, names[i]);
    if (!tensors[i] || !tensors[i]->storage)
      return lt_error(LT_ERR_FREED, "safetensors: cannot write %s: tensor '%s' has been freed "
                      "(attempt to use a freed tensor)", path, names[i]);
  }
  for (int i = 0; i < nmeta; i++) {
    LT_TRY(check_string(path, keys[i], "metadata key"));
    LT_TRY(check_string(path, values[i], "metadata value"));
  }
  return LT_OK;
}

/* t's elements as contiguous CPU memory: t itself (one more reference) or a
 * copy. */
static lt_status host_contiguous(const lt_tensor *t, lt_tensor **out) {
  if (t->storage->device.type == LT_DEVICE_CPU) return lt_contiguous(t, out);
  lt_tensor *host = NULL;
  LT_TRY(lt_to_device(t, lt_cpu(), &host));
  lt_status st = lt_contiguous(host, out);
  lt_tensor_release(host);
  return st;
}

/* Writes the whole file to fd: length, header, data in the order given. */
static lt_status write_file(int fd, const char *path, st_entry *entries,
                            lt_tensor *const *tensors, const int *order, int count,
                            const char *const *keys, const char *const *values, int nmeta) {
  char *header = NULL;
  size_t header_len = 0;
  LT_TRY(st_header_write(entries, count, keys, values, nmeta, &header, &header_len));
  unsigned char len_bytes[8];
  for (int k = 0; k < 8; k++) len_bytes[k] = (unsigned char)((uint64_t)header_len >> (8 * k));
  lt_status st = write_all(fd, path, len_bytes, 8);
  if (st == LT_OK) st = write_all(fd, path, header, header_len);
  free(header);
  /* One tensor at a time, so that a model on a GPU never needs all of its
   * host copies at once. */
  for (int i = 0; i < count && st == LT_OK; i++) {
    lt_tensor *data = NULL;
    st = host_contiguous(tensors[order[i]], &data);
    if (st == LT_OK) {
      st = write_all(fd, path, lt_data(data), lt_nbytes(data));
      lt_tensor_release(data);
    }
  }
  return st; /* lt_atomic_file_commit syncs */
}

/* Entries in name order with contiguous offsets. */
static void plan_entries(const char *const *names, lt_tensor *const *tensors, const int *order,
                         int count, st_entry *entries) {
  uint64_t at = 0;
  for (int i = 0; i < count; i++) {
    const lt_tensor *t = tensors[order[i]];
    st_entry *e = &entries[i];
    e->name = (char *)names[order[i]]; /* borrowed: only written out */
    e->dtype = t->dtype;
    e->ndim = t->ndim;
    memcpy(e->shape, t->shape, sizeof e->shape);
    e->begin = at;
    at += lt_nbytes(t);
    e->end = at;
  }
}

lt_status lt_safetensors_save(const char *path, const char *const *names,
                              lt_tensor *const *tensors, int count,
                              const char *const *meta_keys, const char *const *meta_values,
                              int nmeta) {
  if (!path || count < 0 || nmeta < 0)
    return lt_error(LT_ERR_ARG, "safetensors: save: bad arguments");
  if (lt_estimating())
    return lt_error(LT_ERR_ARG, "safetensors: cannot save %s inside lt.memory.estimate (its "
                    "tensors hold no data)", path);
  LT_TRY(check_inputs(path, names, tensors, count, meta_keys, meta_values, nmeta));
  int *order = malloc(((size_t)count + 1) * sizeof *order);
  int *meta_order = malloc(((size_t)nmeta + 1) * sizeof *meta_order);
  st_entry *entries = calloc((size_t)count + 1, sizeof *entries);
  const char **keys = malloc(((size_t)nmeta + 1) * sizeof *keys);
  const char **values = malloc(((size_t)nmeta + 1) * sizeof *values);
  lt_status st = LT_OK;
  if (!order || !meta_order || !entries || !keys || !values)
    st = lt_error(LT_ERR_OOM, "safetensors: cannot write %s: out of memory", path);

  const char *dup = NULL;
  if (st == LT_OK) st = sort_indices(names, count, order, &dup);
  if (st == LT_OK && dup)
    st = lt_error(LT_ERR_ARG, "safetensors: cannot write %s: tensor name '%s' appears twice",
                  path, dup);
  if (st == LT_OK) st = sort_indices(meta_keys, nmeta, meta_order, &dup);
  if (st == LT_OK) {
    if (dup)
      st = lt_error(LT_ERR_ARG, "safetensors: cannot write %s: metadata key '%s' appears twice",
                    path, dup);
    for (int i = 0; i < nmeta && st == LT_OK; i++) {
      keys[i] = meta_keys[meta_order[i]];
      values[i] = meta_values[meta_order[i]];
    }
  }
  if (st == LT_OK) plan_entries(names, tensors, order, count, entries);

  lt_atomic_file f;
  if (st == LT_OK) st = lt_atomic_file_open("safetensors", path, &f);
  if (st == LT_OK) {
    st = write_file(f.fd, f.tmp, entries, tensors, order, count, keys, values, nmeta);
    if (st == LT_OK) st = lt_atomic_file_commit(&f);
    else lt_atomic_file_abort(&f); /* the old file, if any, is untouched */
  }
  free(order);
  free(meta_order);
  free(entries);
  free(keys);
  free(values);
  return st;
}
