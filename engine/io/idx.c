/* The IDX reader (MNIST and Fashion-MNIST files), through zlib so that .gz
 * files and plain ones read the same way. The data go from one gzread
 * straight into the tensor's buffer; every size in the header is checked
 * against what the file can hold before anything is allocated, and against
 * what it actually held after. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

#include "lt/alloc.h"
#include "lt/io.h"

/* Deflate cannot compress better than about 1032:1, so a gzip file of c
 * bytes never holds more than 1032 * c: a header claiming more is corrupt,
 * and is rejected before a huge allocation is even tried. */
#define DEFLATE_MAX_RATIO 1032u

/* gzread takes an unsigned count; read in slices well under that. */
#define READ_SLICE (1u << 30)

#define IDX_TYPE_UBYTE 0x08

/* Reads exactly n bytes or fails naming what was being read and how many
 * bytes of it were present. */
static lt_status read_fully(gzFile f, const char *path, void *buf, uint64_t n, const char *what) {
  unsigned char *p = buf;
  uint64_t done = 0;
  while (done < n) {
    uint64_t left = n - done;
    unsigned slice = left < READ_SLICE ? (unsigned)left : READ_SLICE;
    int got = gzread(f, p + done, slice);
    if (got < 0) {
      int code;
      const char *msg = gzerror(f, &code);
      return lt_error(LT_ERR_IO, "idx: %s is corrupt: %s while reading %s", path, msg, what);
    }
    if (got == 0) break;
    done += (uint64_t)got;
  }
  if (done < n)
    return lt_error(LT_ERR_IO, "idx: %s is truncated: %s needs %llu bytes, only %llu present",
                    path, what, (unsigned long long)n, (unsigned long long)done);
  return LT_OK;
}

static uint32_t big_endian32(const unsigned char *b) {
  return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | (uint32_t)b[3];
}

/* Magic and sizes: fills shape and ndim, and the element count. */
static lt_status read_header(gzFile f, const char *path, uint64_t file_size, int64_t *shape,
                             int *ndim, uint64_t *count) {
  unsigned char magic[4];
  LT_TRY(read_fully(f, path, magic, 4, "the magic number"));
  int n = magic[3];
  if (magic[0] != 0 || magic[1] != 0 || magic[2] != IDX_TYPE_UBYTE || n < 1 || n > LT_MAX_DIMS)
    return lt_error(LT_ERR_IO,
                    "idx: %s is not an IDX file of unsigned bytes: magic 0x%08x (expected "
                    "0x00000801 to 0x0000080%d)",
                    path, (unsigned)big_endian32(magic), LT_MAX_DIMS);
  unsigned char sizes[4 * LT_MAX_DIMS];
  LT_TRY(read_fully(f, path, sizes, 4 * (uint64_t)n, "the list of dimension sizes"));

  /* What the file can hold: exactly its remaining bytes when plain, at most
   * the deflate ratio times its size when compressed. */
  uint64_t header = 4 + 4 * (uint64_t)n;
  uint64_t capacity;
  if (gzdirect(f)) capacity = file_size > header ? file_size - header : 0;
  else if (file_size > (UINT64_MAX >> 1) / DEFLATE_MAX_RATIO) capacity = UINT64_MAX >> 1;
  else capacity = file_size * DEFLATE_MAX_RATIO;
  uint64_t total = 1;
  for (int d = 0; d < n; d++) {
    shape[d] = big_endian32(sizes + 4 * d);
    /* Saturates just above capacity instead of overflowing (a later size
     * of 0 still makes the count 0, as it should). */
    if (shape[d] != 0 && total > capacity / (uint64_t)shape[d]) total = capacity + 1;
    else total *= (uint64_t)shape[d];
  }
  if (total > capacity) {
    char buf[160];
    return lt_error(LT_ERR_IO, "idx: %s is truncated or corrupt: sizes %s need more data than "
                    "the file's %llu bytes can hold",
                    path, lt_format_shape(buf, sizeof buf, shape, n),
                    (unsigned long long)file_size);
  }
  /* A size 0 leaves no data, but the other sizes must still lay out:
   * [0, 2^32 - 1, ...] has strides past int64. */
  char op[4200];
  snprintf(op, sizeof op, "idx: %s", path);
  int64_t numel;
  if (lt_check_shape(op, shape, n, LT_UINT8, &numel) != LT_OK) return LT_ERR_IO;
  *ndim = n;
  *count = total;
  return LT_OK;
}

/* After the data the file must end. Reading on also makes zlib check the
 * gzip trailer (CRC and length), so flipped bits in the stream are caught; a
 * missing trailer shows only in gzerror (gzread reports end of file). */
static lt_status check_end(gzFile f, const char *path, uint64_t count) {
  unsigned char extra;
  int got = gzread(f, &extra, 1), code = Z_OK;
  const char *msg = gzerror(f, &code);
  if (got < 0 || code != Z_OK)
    return lt_error(LT_ERR_IO, "idx: %s is corrupt: %s after the data", path, msg);
  if (got > 0)
    return lt_error(LT_ERR_IO, "idx: %s has bytes after the %llu bytes of data its header "
                    "announces", path, (unsigned long long)count);
  return LT_OK;
}

lt_status lt_idx_read(const char *path, lt_tensor **out) {
  *out = NULL;
  if (lt_estimating())
    return lt_error(LT_ERR_ARG, "idx: cannot read %s inside lt.memory.estimate (its tensors hold "
                    "no data); read it before the estimate", path);
  struct stat sb;
  if (stat(path, &sb) != 0)
    return lt_error(LT_ERR_IO, "idx: cannot open %s: %s", path, strerror(errno));
  if (!S_ISREG(sb.st_mode)) return lt_error(LT_ERR_IO, "idx: %s is not a regular file", path);
  errno = 0;
  gzFile f = gzopen(path, "rb");
  if (f == NULL)
    return lt_error(LT_ERR_IO, "idx: cannot open %s: %s", path,
                    errno ? strerror(errno) : "out of memory");
  gzbuffer(f, 1u << 17); /* fewer, larger reads of the compressed file */

  int64_t shape[LT_MAX_DIMS];
  int ndim = 0;
  uint64_t count = 0;
  lt_tensor *t = NULL;
  lt_status st = read_header(f, path, (uint64_t)sb.st_size, shape, &ndim, &count);
  if (st == LT_OK) st = lt_empty(shape, ndim, LT_UINT8, lt_cpu(), &t);
  if (st == LT_OK) st = read_fully(f, path, lt_data(t), count, "the data");
  if (st == LT_OK) st = check_end(f, path, count);
  gzclose(f);
  if (st != LT_OK) {
    if (t) lt_tensor_release(t);
    return st;
  }
  *out = t;
  return LT_OK;
}
