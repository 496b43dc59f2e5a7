/* Tensor files: the IDX format of MNIST-like data sets (read only) and the
 * safetensors format (read and write, the files PyTorch's safetensors package
 * reads and writes). Every size in a file is checked against the bytes
 * actually present: a truncated or malformed file is an LT_ERR_IO error that
 * names the file and the problem, never a crash or an over-read. */
#ifndef LT_IO_H
#define LT_IO_H

#include "lt/api.h"

#include "lt/tensor.h"

/* ---- IDX (http://yann.lecun.com/exdb/mnist/) ----
 * Magic 0x0000TTNN (type TT must be 0x08, unsigned bytes; NN dims, 1 to
 * LT_MAX_DIMS), then NN big-endian 32-bit sizes, then the bytes. The file
 * may be gzip-compressed or plain. The result is a CPU uint8 tensor of the
 * file's shape. */
LT_API lt_status lt_idx_read(const char *path, lt_tensor **out);

/* ---- safetensors (https://github.com/huggingface/safetensors) ----
 * 8-byte little-endian header length N, N bytes of JSON
 *   {"__metadata__": {"k": "v"}, "name": {"dtype": "F32", "shape": [2, 3],
 *    "data_offsets": [begin, end]}, ...}
 * then the data, offsets relative to its start. dtypes: F32 F64 F16 BF16 I64
 * I32 U8 BOOL (lt's eight). */

/* What lt_safetensors_load returns: n tensors and their names, nmeta
 * metadata strings. Everything belongs to the struct; lt_safetensors_free
 * releases what is still in it (a caller may take a tensor out and set its
 * slot to NULL). */
typedef struct lt_safetensors {
  int count;
  char **names;
  lt_tensor **tensors; /* CPU tensors, contiguous */
  int nmeta;
  char **meta_keys;
  char **meta_values;
} lt_safetensors;

/* Reads path into *out (zeroed first; on failure it is left empty). */
LT_API lt_status lt_safetensors_load(const char *path, lt_safetensors *out);
/* Releases the tensors and strings still held; leaves *st empty. Idempotent. */
LT_API void lt_safetensors_free(lt_safetensors *st);

/* Writes count named tensors and nmeta metadata pairs to path: names sorted,
 * data contiguous in that order, header padded with spaces to a multiple of 8
 * (as the reference implementation writes it). Tensors on other devices are
 * copied to the CPU, views written as contiguous data in their own dtype.
 * Atomic: the bytes go to a temporary in path's directory, are fsync'ed, and
 * the file is renamed over path only when everything succeeded, so path holds
 * either its old contents or the complete new file. The temporary has no name
 * where Linux's O_TMPFILE works (a killed save leaves nothing); elsewhere it is
 * "<path>.tmp.<pid>", and a save removes those of processes that are gone.
 * Names must be unique, non-empty and not "__metadata__"; metadata keys
 * unique. */
LT_API lt_status lt_safetensors_save(const char *path, const char *const *names,
                              lt_tensor *const *tensors, int count,
                              const char *const *meta_keys, const char *const *meta_values,
                              int nmeta);

/* Replaces path with the n bytes of data as lt_safetensors_save replaces a
 * file: complete or not at all, no temporary left by a killed process. who
 * names the op in messages. */
LT_API lt_status lt_write_file_atomically(const char *who, const char *path, const void *data, size_t n);

#endif
