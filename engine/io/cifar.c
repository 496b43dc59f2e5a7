/* CIFAR-10's binary batches (data_batch_1.bin ... test_batch.bin): records of
 * one label byte and 3072 pixel bytes, already in [C, H, W] order, so each
 * record's pixels are copied to the images tensor as they are. Every file's
 * size is checked before anything is allocated: it must be a whole, positive
 * number of records. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "lt/alloc.h"
#include "lt/data_io.h"

#define CIFAR_PIXELS (LT_CIFAR_RECORD_BYTES - 1)
#define CIFAR_CLASSES 10

static lt_status file_records(const char *path, int64_t *records) {
  struct stat sb;
  if (stat(path, &sb) != 0) return lt_error(LT_ERR_IO, "cifar10: cannot open %s: %s", path, strerror(errno));
  if (!S_ISREG(sb.st_mode)) return lt_error(LT_ERR_IO, "cifar10: %s is not a regular file", path);
  int64_t size = (int64_t)sb.st_size;
  if (size == 0 || size % LT_CIFAR_RECORD_BYTES != 0)
    return lt_error(LT_ERR_IO,
                    "cifar10: %s holds %lld bytes, not a whole number of %d-byte records (1 label "
                    "byte + 3072 pixel bytes)%s",
                    path, (long long)size, LT_CIFAR_RECORD_BYTES,
                    size == 0 ? "" : ": it is truncated or not a CIFAR-10 binary batch");
  *records = size / LT_CIFAR_RECORD_BYTES;
  return LT_OK;
}

/* Reads count records of path into pixels and labels (int64, label + 1). */
static lt_status read_records(const char *path, int64_t count, uint8_t *pixels, int64_t *labels) {
  FILE *f = fopen(path, "rb");
  if (!f) return lt_error(LT_ERR_IO, "cifar10: cannot open %s: %s", path, strerror(errno));
  /* One record at a time through stdio's buffer: the label byte goes one
   * way and the pixels another, and a file is at most a few tens of MiB. */
  unsigned char record[LT_CIFAR_RECORD_BYTES];
  lt_status st = LT_OK;
  for (int64_t r = 0; r < count; r++) {
    size_t got = fread(record, 1, sizeof record, f);
    if (got != sizeof record) {
      /* The size was checked: the file changed or the read failed. */
      st = lt_error(LT_ERR_IO, "cifar10: %s is truncated: record %lld has %zu of %d bytes%s", path,
                    (long long)r + 1, got, LT_CIFAR_RECORD_BYTES,
                    ferror(f) ? " (read error)" : "");
      break;
    }
    if (record[0] >= CIFAR_CLASSES) {
      st = lt_error(LT_ERR_IO,
                    "cifar10: %s: record %lld (byte offset %lld) has label %d, expected 0 to 9: "
                    "not a CIFAR-10 binary batch (CIFAR-100's has two label bytes)",
                    path, (long long)r + 1, (long long)r * LT_CIFAR_RECORD_BYTES, record[0]);
      break;
    }
    labels[r] = (int64_t)record[0] + 1;
    memcpy(pixels + r * CIFAR_PIXELS, record + 1, CIFAR_PIXELS);
  }
  fclose(f);
  return st;
}

lt_status lt_cifar10_read(const char *const *paths, int count, lt_tensor **images, lt_tensor **labels) {
  *images = *labels = NULL;
  if (lt_estimating())
    return lt_error(LT_ERR_ARG, "cifar10: cannot read files inside lt.memory.estimate (its tensors "
                    "hold no data); read them before the estimate");
  if (count < 1) return lt_error(LT_ERR_ARG, "cifar10: no files to read");
  int64_t total = 0;
  for (int i = 0; i < count; i++) {
    int64_t n = 0;
    LT_TRY(file_records(paths[i], &n));
    total += n;
  }
  int64_t ishape[4] = {total, 3, 32, 32}, lshape[1] = {total};
  lt_tensor *im = NULL, *lb = NULL;
  lt_status st = lt_empty(ishape, 4, LT_UINT8, lt_cpu(), &im);
  if (st == LT_OK) st = lt_empty(lshape, 1, LT_INT64, lt_cpu(), &lb);
  int64_t done = 0;
  for (int i = 0; st == LT_OK && i < count; i++) {
    int64_t n = 0;
    st = file_records(paths[i], &n);
    if (st == LT_OK && done + n > total)
      st = lt_error(LT_ERR_IO, "cifar10: %s grew while being read", paths[i]);
    if (st == LT_OK)
      st = read_records(paths[i], n, (uint8_t *)lt_data(im) + done * CIFAR_PIXELS,
                        (int64_t *)lt_data(lb) + done);
    done += n;
  }
  if (st == LT_OK && done != total) st = lt_error(LT_ERR_IO, "cifar10: the files changed while being read");
  if (st != LT_OK) {
    if (im) lt_tensor_release(im);
    if (lb) lt_tensor_release(lb);
    return st;
  }
  *images = im;
  *labels = lb;
  return LT_OK;
}
