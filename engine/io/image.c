/* PNG and JPEG files through Debian's libstb (stb_image and stb_image_write,
 * linked as the system library: lt does not carry their code), bilinear
 * resizing, and directory listings for lt.data.ImageFolder.
 *
 * Everything here may run on the decode pool's threads (image_pool.c): no
 * lt allocation, only malloc, and errors through lt_error's thread-local
 * message. stb_image keeps its failure reason in a thread-local too (Debian
 * builds it with C11 thread locals), so stbi_failure_reason read on the
 * thread that decoded is that decode's reason. */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <stb_image.h>
#include <stb_image_write.h>

#include "lt/data_io.h"

/* An image of more bytes than this is refused before it is decoded: a
 * corrupt header must not make a worker allocate gigabytes. 2^31 bytes is a
 * 26754 x 26754 RGB picture, far beyond any training image. */
#define IMAGE_MAX_BYTES ((uint64_t)1 << 31)

/* Files are read whole: images are small, and stb decodes from memory. */
#define FILE_MAX_BYTES ((uint64_t)1 << 31)

void lt_image_free(lt_image *img) {
  if (!img) return;
  free(img->data);
  img->data = NULL;
  img->height = img->width = img->channels = 0;
}

static lt_status read_file(const char *path, unsigned char **data, size_t *size) {
  *data = NULL;
  *size = 0;
  struct stat sb;
  if (stat(path, &sb) != 0) return lt_error(LT_ERR_IO, "image: cannot open %s: %s", path, strerror(errno));
  if (!S_ISREG(sb.st_mode)) return lt_error(LT_ERR_IO, "image: %s is not a regular file", path);
  if ((uint64_t)sb.st_size > FILE_MAX_BYTES)
    return lt_error(LT_ERR_IO, "image: %s is too large (%lld bytes) for an image file", path,
                    (long long)sb.st_size);
  FILE *f = fopen(path, "rb");
  if (!f) return lt_error(LT_ERR_IO, "image: cannot open %s: %s", path, strerror(errno));
  size_t n = (size_t)sb.st_size;
  unsigned char *buf = malloc(n ? n : 1);
  if (!buf) {
    fclose(f);
    return lt_error(LT_ERR_OOM, "image: out of memory reading %s (%zu bytes)", path, n);
  }
  size_t got = fread(buf, 1, n, f);
  int failed = ferror(f);
  fclose(f);
  if (failed || got != n) {
    free(buf);
    return lt_error(LT_ERR_IO, "image: cannot read %s: %s", path,
                    failed ? strerror(errno) : "the file shrank while being read");
  }
  *data = buf;
  *size = n;
  return LT_OK;
}

static bool is_png(const unsigned char *b, size_t n) {
  static const unsigned char sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  return n >= 8 && memcmp(b, sig, 8) == 0;
}

static bool is_jpeg(const unsigned char *b, size_t n) {
  return n >= 3 && b[0] == 0xff && b[1] == 0xd8 && b[2] == 0xff;
}

void lt_image_spec_size(const lt_image_spec *spec, int height, int width, int *out_height,
                        int *out_width) {
  *out_height = height;
  *out_width = width;
  if (spec->resize_height > 0) {
    *out_height = spec->resize_height;
    *out_width = spec->resize_width;
  } else if (spec->resize_short > 0 && height > 0 && width > 0) {
    /* torchvision's Resize(int): the shorter side becomes size, the longer
     * int(size * long / short) (truncated). */
    int s = spec->resize_short;
    if (height <= width) {
      *out_height = s;
      *out_width = (int)((int64_t)s * width / height);
    } else {
      *out_width = s;
      *out_height = (int)((int64_t)s * height / width);
    }
    if (*out_width < 1) *out_width = 1;
    if (*out_height < 1) *out_height = 1;
  }
}

lt_status lt_image_decode_file(const char *path, const lt_image_spec *spec, lt_image *out) {
  memset(out, 0, sizeof *out);
  unsigned char *bytes;
  size_t size;
  LT_TRY(read_file(path, &bytes, &size));
  if (!is_png(bytes, size) && !is_jpeg(bytes, size)) {
    free(bytes);
    return lt_error(LT_ERR_IO, "image: %s is not a PNG or JPEG file (%s)", path,
                    size < 8 ? "it is shorter than any image header" : "its first bytes are neither signature");
  }
  if (size > INT_MAX) { /* stb takes an int length; FILE_MAX_BYTES keeps this unreachable */
    free(bytes);
    return lt_error(LT_ERR_IO, "image: %s is too large", path);
  }
  int w = 0, h = 0, c = 0;
  if (!stbi_info_from_memory(bytes, (int)size, &w, &h, &c)) {
    const char *why = stbi_failure_reason();
    free(bytes);
    return lt_error(LT_ERR_IO, "image: %s is corrupt or unsupported: %s", path,
                    why && *why ? why : "unreadable header");
  }
  int want = spec->channels ? spec->channels : c;
  if ((uint64_t)w * (uint64_t)h * (uint64_t)want > IMAGE_MAX_BYTES) {
    free(bytes);
    return lt_error(LT_ERR_IO, "image: %s claims %d x %d pixels, more than lt decodes (2 GiB)", path, w, h);
  }
  int got_c = 0;
  unsigned char *pixels = stbi_load_from_memory(bytes, (int)size, &w, &h, &got_c, want);
  free(bytes);
  if (!pixels) {
    const char *why = stbi_failure_reason();
    /* stb leaves the reason empty on some truncated streams */
    return lt_error(LT_ERR_IO, "image: %s is corrupt or unsupported: %s", path,
                    why && *why ? why : "the data ends early or is damaged");
  }
  int oh, ow;
  lt_image_spec_size(spec, h, w, &oh, &ow);
  if (oh == h && ow == w) {
    /* stbi_load's buffer comes from malloc (Debian builds it with the
     * default STBI_MALLOC), so lt_image_free may free it. */
    out->data = pixels;
  } else {
    uint8_t *dst = malloc((size_t)oh * (size_t)ow * (size_t)want);
    if (!dst) {
      stbi_image_free(pixels);
      return lt_error(LT_ERR_OOM, "image: out of memory resizing %s to %d x %d", path, oh, ow);
    }
    lt_image_layout from = {(int64_t)w * want, want, 1}, to = {(int64_t)ow * want, want, 1};
    lt_image_resize_u8(pixels, h, w, want, from, dst, oh, ow, to);
    stbi_image_free(pixels);
    out->data = dst;
  }
  out->height = oh;
  out->width = ow;
  out->channels = want;
  return LT_OK;
}

/* ---- bilinear resampling ---- */

/* For each output coordinate along one axis: the two source indices and the
 * weight of the second. PyTorch's area_pixel_compute_source_index with
 * align_corners=False: src = (dst + 0.5) * scale - 0.5, negative clamped to
 * 0; the upper neighbour clamped to the last index. */
static void axis_weights(int in, int out, int *lo, int *hi, float *frac) {
  double scale = (double)in / (double)out;
  for (int i = 0; i < out; i++) {
    double src = ((double)i + 0.5) * scale - 0.5;
    if (src < 0) src = 0;
    int i0 = (int)src;
    if (i0 > in - 1) i0 = in - 1;
    lo[i] = i0;
    hi[i] = i0 < in - 1 ? i0 + 1 : i0;
    frac[i] = (float)(src - i0);
  }
}

/* One routine for both element types: the arithmetic is float, the store
 * converts (with rounding and saturation for uint8). */
#define RESIZE_BODY(T, STORE)                                                                 \
  int *ylo = malloc(sizeof(int) * (size_t)out_height * 2);                                    \
  int *xlo = malloc(sizeof(int) * (size_t)out_width * 2);                                     \
  float *yf = malloc(sizeof(float) * (size_t)out_height);                                     \
  float *xf = malloc(sizeof(float) * (size_t)out_width);                                      \
  if (ylo && xlo && yf && xf) {                                                               \
    int *yhi = ylo + out_height, *xhi = xlo + out_width;                                      \
    axis_weights(height, out_height, ylo, yhi, yf);                                           \
    axis_weights(width, out_width, xlo, xhi, xf);                                             \
    for (int y = 0; y < out_height; y++) {                                                    \
      const T *r0 = src + ylo[y] * s.stride_y, *r1 = src + yhi[y] * s.stride_y;               \
      float wy = yf[y];                                                                       \
      for (int x = 0; x < out_width; x++) {                                                   \
        int64_t a = xlo[x] * s.stride_x, b = xhi[x] * s.stride_x;                             \
        float wx = xf[x];                                                                     \
        for (int c = 0; c < channels; c++) {                                                  \
          int64_t o = c * s.stride_c;                                                         \
          float top = (float)r0[a + o] + ((float)r0[b + o] - (float)r0[a + o]) * wx;          \
          float bot = (float)r1[a + o] + ((float)r1[b + o] - (float)r1[a + o]) * wx;          \
          float v = top + (bot - top) * wy;                                                   \
          dst[y * d.stride_y + x * d.stride_x + c * d.stride_c] = STORE(v);                   \
        }                                                                                     \
      }                                                                                       \
    }                                                                                         \
  } else {                                                                                    \
    /* Out of memory for a few index arrays: nearest neighbour needs none. */                 \
    for (int y = 0; y < out_height; y++)                                                      \
      for (int x = 0; x < out_width; x++)                                                     \
        for (int c = 0; c < channels; c++)                                                    \
          dst[y * d.stride_y + x * d.stride_x + c * d.stride_c] =                             \
              src[(int64_t)y * height / out_height * s.stride_y +                             \
                  (int64_t)x * width / out_width * s.stride_x + c * s.stride_c];              \
  }                                                                                           \
  free(ylo);                                                                                  \
  free(xlo);                                                                                  \
  free(yf);                                                                                   \
  free(xf);

static inline uint8_t store_u8(float v) {
  if (!(v > 0)) return 0;
  if (v >= 255) return 255;
  return (uint8_t)(v + 0.5f);
}

static inline float store_f32(float v) { return v; }

void lt_image_resize_u8(const uint8_t *src, int height, int width, int channels, lt_image_layout s,
                        uint8_t *dst, int out_height, int out_width, lt_image_layout d) {
  RESIZE_BODY(uint8_t, store_u8)
}

void lt_image_resize_f32(const float *src, int height, int width, int channels, lt_image_layout s,
                         float *dst, int out_height, int out_width, lt_image_layout d) {
  RESIZE_BODY(float, store_f32)
}

/* ---- writing ---- */

lt_status lt_image_write(const char *path, const char *format, const uint8_t *data, int height,
                         int width, int channels, int quality) {
  if (height < 1 || width < 1 || channels < 1 || channels > 4)
    return lt_error(LT_ERR_ARG, "image: cannot write a %d x %d image of %d channels to %s", height,
                    width, channels, path);
  int ok;
  errno = 0;
  if (strcmp(format, "png") == 0) {
    ok = stbi_write_png(path, width, height, channels, data, width * channels);
  } else if (strcmp(format, "jpg") == 0 || strcmp(format, "jpeg") == 0) {
    if (quality < 1 || quality > 100)
      return lt_error(LT_ERR_ARG, "image: JPEG quality must be 1 to 100, got %d", quality);
    ok = stbi_write_jpg(path, width, height, channels, data, quality);
  } else {
    return lt_error(LT_ERR_ARG, "image: unknown format '%s' (expected \"png\" or \"jpg\")", format);
  }
  /* stb_image_write says only that it failed: opening the file is what
   * fails in practice (a missing directory, no permission). */
  if (!ok) return lt_error(LT_ERR_IO, "image: cannot write %s: %s", path, errno ? strerror(errno) : "write failed");
  return LT_OK;
}

/* ---- directories ---- */

static int compare_names(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

void lt_dir_list_free(char **names, bool *is_dir, int64_t count) {
  if (names)
    for (int64_t i = 0; i < count; i++) free(names[i]);
  free(names);
  free(is_dir);
}

lt_status lt_dir_list(const char *path, char ***names_out, bool **is_dir_out, int64_t *count_out) {
  *names_out = NULL;
  *is_dir_out = NULL;
  *count_out = 0;
  DIR *dir = opendir(path);
  if (!dir) return lt_error(LT_ERR_IO, "cannot open directory %s: %s", path, strerror(errno));
  char **names = NULL;
  int64_t n = 0, cap = 0;
  lt_status st = LT_OK;
  struct dirent *e;
  errno = 0;
  while ((e = readdir(dir)) != NULL) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
    if (n == cap) {
      int64_t ncap = cap ? cap * 2 : 64;
      char **grown = realloc(names, sizeof *names * (size_t)ncap);
      if (!grown) {
        st = lt_error(LT_ERR_OOM, "out of memory listing %s", path);
        break;
      }
      names = grown;
      cap = ncap;
    }
    names[n] = strdup(e->d_name);
    if (!names[n]) {
      st = lt_error(LT_ERR_OOM, "out of memory listing %s", path);
      break;
    }
    n++;
  }
  if (st == LT_OK && errno != 0) st = lt_error(LT_ERR_IO, "cannot list directory %s: %s", path, strerror(errno));
  closedir(dir);
  bool *is_dir = NULL;
  if (st == LT_OK) {
    if (n > 1) qsort(names, (size_t)n, sizeof *names, compare_names);
    is_dir = malloc(sizeof *is_dir * (size_t)(n ? n : 1));
    if (!is_dir) st = lt_error(LT_ERR_OOM, "out of memory listing %s", path);
  }
  for (int64_t i = 0; st == LT_OK && i < n; i++) {
    /* stat, not d_type: it follows symbolic links (torchvision's walk does)
     * and works on file systems that leave d_type unknown. */
    size_t len = strlen(path) + strlen(names[i]) + 2;
    char *full = malloc(len);
    if (!full) {
      st = lt_error(LT_ERR_OOM, "out of memory listing %s", path);
      break;
    }
    snprintf(full, len, "%s/%s", path, names[i]);
    struct stat sb;
    is_dir[i] = stat(full, &sb) == 0 && S_ISDIR(sb.st_mode);
    free(full);
  }
  if (st != LT_OK) {
    lt_dir_list_free(names, is_dir, n);
    return st;
  }
  *names_out = names;
  *is_dir_out = is_dir;
  *count_out = n;
  return LT_OK;
}
