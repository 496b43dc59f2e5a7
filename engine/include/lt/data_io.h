/* Data set files beyond tensors: CIFAR-10's binary batches, CSV tables, PNG
 * and JPEG images (decoded by Debian's libstb, stb_image), directory
 * listings for an image-folder data set, and a pool of decode threads that
 * prepares images in the background while the caller computes. As with the
 * IDX and safetensors readers, a bad file is an LT_ERR_IO error naming the
 * file and what is wrong with it, never a crash or an over-read.
 *
 * Everything here but the pool is a plain function of its arguments and safe
 * to call from any thread: errors go to lt_error's thread-local message. No
 * function here allocates tensors except the ones whose name says so (the
 * CIFAR reader and lt_image_to_tensor): lt's allocator belongs to the
 * thread that runs Lua, and images decoded on the pool's threads live in
 * malloc'ed buffers until that thread copies them into a tensor. */
#ifndef LT_DATA_IO_H
#define LT_DATA_IO_H

#include "lt/api.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lt/tensor.h"

/* ---- CIFAR-10 (https://www.cs.toronto.edu/~kriz/cifar.html, binary version) ----
 * Each record is 1 label byte (0..9) and 3072 pixel bytes: the 1024 red,
 * then green, then blue values of a 32 x 32 image, row by row. Reads the
 * records of the count files, in order, into *images (uint8 [N, 3, 32, 32])
 * and *labels (int64 [N], the file's label plus one: lt's labels are
 * 1-based). A file whose size is not a positive multiple of 3073 bytes, or a
 * label above 9, is an error naming the file (and the byte count or record). */
#define LT_CIFAR_RECORD_BYTES 3073
LT_API lt_status lt_cifar10_read(const char *const *paths, int count, lt_tensor **images,
                                 lt_tensor **labels);

/* ---- CSV ----
 * A table of numbers with an optional header line and an optional label
 * column, which may hold text (class names). Cells are separated by one
 * delimiter byte; a cell may be quoted ("a, b" and "" for a quote inside);
 * lines end in \n or \r\n; blank lines are skipped; a UTF-8 byte order mark
 * is skipped. Feature cells must be numbers as strtod reads them (surrounding
 * spaces allowed; "nan" and "inf" included). */
typedef struct lt_csv_options {
  char delimiter;
  bool header;
  /* The label column: by name (label_name, needs the header) or by 0-based
   * index (label_index); neither (NULL and -1) reads every column as a
   * feature. */
  const char *label_name;
  int64_t label_index;
} lt_csv_options;

typedef struct lt_csv {
  int64_t rows;
  int64_t features;     /* columns other than the label */
  char **names;         /* features names from the header, or NULL */
  char *label_column;   /* the label column's header name, or NULL */
  double *values;       /* rows x features, row-major */
  /* The label column when there is one: numbers (label_is_text false;
   * label_integral when every cell is an integer as written) or text,
   * mapped to class ids 0..nclasses-1 by sorted (byte order) distinct value. */
  bool has_label, label_is_text, label_integral;
  double *label_values; /* rows numbers, or the class id of each row */
  char **classes;       /* nclasses names, sorted, when label_is_text */
  int64_t nclasses;
} lt_csv;

/* Reads path into *out (zeroed first; on failure it is left empty). Errors
 * name the file, the line and the column ("csv: iris.csv:7: column 3
 * ('petal_length'): 'abc' is not a number"). */
LT_API lt_status lt_csv_read(const char *path, const lt_csv_options *opts, lt_csv *out);
LT_API void lt_csv_free(lt_csv *csv);

/* ---- images ---- */

/* A decoded image: height x width x channels bytes, interleaved (the layout
 * PNG and JPEG decoders give, and PIL's), owned by the struct (malloc). */
typedef struct lt_image {
  uint8_t *data;
  int height, width, channels;
} lt_image;

/* What to do to a file's image: convert it to `channels` (1 gray, 3 RGB, 4
 * RGBA; 0 keeps the file's), then resize it when resize_height > 0
 * (bilinear, lt_image_resize), or, when resize_short > 0, resize it so that
 * its shorter side is resize_short and the aspect ratio is kept (the longer
 * side rounded down, as torchvision's Resize(int)). */
typedef struct lt_image_spec {
  int channels;
  int resize_height, resize_width;
  int resize_short;
} lt_image_spec;

/* Reads and decodes a PNG or JPEG file (checked by its first bytes) and
 * applies spec. On failure out is empty and the error names the file. */
LT_API lt_status lt_image_decode_file(const char *path, const lt_image_spec *spec, lt_image *out);
LT_API void lt_image_free(lt_image *img);

/* The output size spec asks for an image of height x width. */
LT_API void lt_image_spec_size(const lt_image_spec *spec, int height, int width, int *out_height,
                               int *out_width);

/* Bilinear resampling of a height x width image with `channels` channels to
 * out_height x out_width, as PyTorch's F.interpolate(mode="bilinear",
 * align_corners=False, antialias=False): output pixel (y, x) samples the
 * input at ((y + 0.5) * height / out_height - 0.5, likewise for x), clamped
 * to the image, from its four neighbours. Element (y, x, c) is at
 * y * stride_y + x * stride_x + c * stride_c (in elements) in both images, so
 * that one routine serves interleaved [H, W, C] and planar [C, H, W] data.
 * The uint8 version rounds to nearest (halves away from zero) and
 * saturates. */
typedef struct lt_image_layout {
  int64_t stride_y, stride_x, stride_c;
} lt_image_layout;
LT_API void lt_image_resize_u8(const uint8_t *src, int height, int width, int channels,
                               lt_image_layout src_layout, uint8_t *dst, int out_height,
                               int out_width, lt_image_layout dst_layout);
LT_API void lt_image_resize_f32(const float *src, int height, int width, int channels,
                                lt_image_layout src_layout, float *dst, int out_height,
                                int out_width, lt_image_layout dst_layout);

/* Writes height x width x channels interleaved bytes as a PNG (format "png")
 * or a JPEG ("jpg", quality 1..100) file: for tests and examples that need
 * image files. */
LT_API lt_status lt_image_write(const char *path, const char *format, const uint8_t *data,
                                int height, int width, int channels, int quality);

/* ---- directories ---- */

/* The entries of a directory but "." and "..", sorted by name (byte order),
 * with whether each is a directory (symbolic links followed). *names and
 * *is_dir are malloc'ed arrays of *count elements (each name malloc'ed);
 * lt_dir_list_free releases them. */
LT_API lt_status lt_dir_list(const char *path, char ***names, bool **is_dir, int64_t *count);
LT_API void lt_dir_list_free(char **names, bool *is_dir, int64_t count);

/* ---- the decode pool ----
 * Threads that decode images (lt_image_decode_file) in the background. The
 * caller submits (key, path, spec) jobs, which the threads take in
 * submission order; lt_image_pool_take(key) hands back the oldest job
 * submitted under key: at once when a thread has finished it, after waiting
 * when one is decoding it, and decoded on the calling thread when no thread
 * has started it yet. A key is a caller's name for what the job decodes
 * (the data set index): jobs with the same key must decode the same thing,
 * so that any of them may answer a take.
 *
 * One mutex guards the job list and the counters; the threads sleep on one
 * condition variable for work, takers on another for finished jobs. The pool
 * holds at most max_jobs jobs: past that a submit drops the oldest finished
 * job nobody took (abandoned by a loop that stopped early), or, when every
 * job is still waiting or running, refuses the new one (its key is then
 * decoded at take time). lt_image_pool_free stops and joins the threads. */
typedef struct lt_image_pool lt_image_pool;

typedef struct lt_image_pool_stats {
  int threads;
  int64_t submitted; /* jobs accepted */
  int64_t refused;   /* submits refused because the pool was full of unfinished jobs */
  int64_t dropped;   /* finished jobs dropped unclaimed to make room */
  int64_t decoded;   /* jobs finished by the pool's threads */
  int64_t ready;     /* takes that found their job finished: no wait at all */
  int64_t waited;    /* takes that waited for a thread to finish their job */
  int64_t stolen;    /* takes that decoded a not yet started job themselves */
  int64_t missed;    /* takes that found no job under their key */
  int64_t pending;   /* jobs in the pool now (waiting, running or finished) */
} lt_image_pool_stats;

LT_API lt_status lt_image_pool_new(int threads, int max_jobs, lt_image_pool **out);
LT_API void lt_image_pool_free(lt_image_pool *pool);
/* Queues a job; *accepted says whether the pool took it. */
LT_API lt_status lt_image_pool_submit(lt_image_pool *pool, int64_t key, const char *path,
                                      const lt_image_spec *spec, bool *accepted);
/* The result of the oldest job under key into *out (the caller owns it then)
 * and *found = true; *found = false (and LT_OK) when there is no such job. A
 * job that failed returns its error (as lt_error's message). */
LT_API lt_status lt_image_pool_take(lt_image_pool *pool, int64_t key, lt_image *out, bool *found);
/* Blocks until no job is waiting or running (finished ones stay to be
 * taken): lets a test observe what the threads did, without timing. */
LT_API void lt_image_pool_wait_idle(lt_image_pool *pool);
/* Drops every job not yet started and every finished one (a running job
 * finishes and is dropped). */
LT_API void lt_image_pool_clear(lt_image_pool *pool);
LT_API lt_image_pool_stats lt_image_pool_get_stats(lt_image_pool *pool);

#endif
