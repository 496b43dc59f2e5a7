/* conv2d as im2col + GEMM per image and group (cpu_nn_im2col.h):
 *   forward       out[n, g]  = W_g [O/g, CK] cols(x[n, g]) [CK, L]  (+ bias)
 *   grad input    x[n, g]   += col2im(W_g^T go[n, g])
 *   grad weight   W_g       += go[n, g] cols(x[n, g])^T
 * with CK = C/g kh kw and L = Ho Wo. A 1x1 convolution with stride 1 and no
 * padding needs no column matrix: the image itself is [C, H W].
 *
 * Images are split over the thread pool; each task owns one column buffer,
 * taken from the caching allocator once per call (category other). GEMMs
 * called inside a task run on that task's thread (OpenMP does not nest), so
 * the pool is never oversubscribed. float64 (gradient checks) runs as one
 * task: OpenBLAS's dgemm keeps its own threads.
 *
 * The weight gradient sums over images. To keep that sum independent of the
 * thread count, images are grouped into a fixed number of blocks (set by the
 * shapes alone), each block sums into its own partial weight gradient in
 * image order, and the partials are added in block order. */
#include <string.h>

#include "cpu/cpu_clones.h"
#include "cpu/cpu_nn.h"
#include "cpu/cpu_nn_im2col.h"
#include "lt/threads.h"

/* At most this many bytes of partial weight gradients per call. */
#define CONV_PARTIAL_BYTES (16u << 20)
#define CONV_MAX_BLOCKS 32

typedef struct conv_job {
  bool f64;
  size_t es;
  int64_t n, groups, c, o, cg, og, ck, l;
  nn_window_geom geom; /* one group of one image */
  bool direct;         /* 1x1, stride 1, no padding: no column matrix */
  const char *x, *w, *b, *go;
  char *out, *gx, *gw_partials;
  char *cols;          /* one buffer of ck * l elements per task */
  int64_t tasks, blocks;
  lt_status status;    /* first GEMM failure */
} conv_job;

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

static void conv_job_init(conv_job *j, const lt_tensor *x, const lt_tensor *w,
                          const lt_conv2d_opts *o, int64_t out_h, int64_t out_w) {
  memset(j, 0, sizeof *j);
  j->f64 = nn_is_f64(x);
  j->es = lt_dtype_size(x->dtype);
  j->n = x->shape[0];
  j->c = x->shape[1];
  j->o = w->shape[0];
  j->groups = o->groups;
  j->cg = j->c / o->groups;
  j->og = j->o / o->groups;
  const int64_t kh = w->shape[2], kw = w->shape[3];
  j->ck = j->cg * kh * kw;
  j->l = out_h * out_w;
  nn_window_geom g = {j->cg,        x->shape[2],    x->shape[3],    kh,
                      kw,           o->stride[0],   o->stride[1],   o->padding[0],
                      o->padding[1], o->dilation[0], o->dilation[1], out_h,
                      out_w};
  j->geom = g;
  j->direct = kh == 1 && kw == 1 && g.sh == 1 && g.sw == 1 && g.ph == 0 && g.pw == 0;
  j->status = LT_OK;
}

static void set_status(conv_job *j, lt_status st) {
  if (st != LT_OK) {
#pragma omp critical(lt_conv_status)
    if (j->status == LT_OK) j->status = st;
  }
}

/* The per-task column buffers: tasks x ck x l elements, or none. */
static lt_status column_buffers(conv_job *j, lt_device dev, lt_dtype dt, lt_tensor **buf) {
  *buf = NULL;
  if (j->direct) return LT_OK;
  const int64_t shape[2] = {j->tasks, j->ck * j->l};
  LT_TRY(lt_empty(shape, 2, dt, dev, buf));
  j->cols = lt_data(*buf);
  return LT_OK;
}

static int64_t task_count(const conv_job *j, int64_t work) {
  if (j->f64) return 1;
  int64_t t = min64(work, lt_get_num_threads());
  return t > 0 ? t : 1;
}

/* ---- forward ---- */

static void forward_image(conv_job *j, int64_t img, char *cols) {
  const size_t es = j->es;
  const int64_t hw = j->geom.height * j->geom.width;
  char *out = j->out + (size_t)(img * j->o * j->l) * es;
  if (j->b)
    for (int64_t oc = 0; oc < j->o; oc++) {
      const double bias = nn_ld(j->b, oc, j->f64);
      for (int64_t p = 0; p < j->l; p++) nn_st(out, oc * j->l + p, j->f64, bias);
    }
  for (int64_t g = 0; g < j->groups; g++) {
    const char *image = j->x + (size_t)((img * j->c + g * j->cg) * hw) * es;
    const char *src = image;
    if (!j->direct) {
      cpu_nn_im2col(&j->geom, image, cols, j->f64);
      src = cols;
    }
    set_status(j, cpu_nn_gemm(j->f64, false, false, j->og, j->l, j->ck, 1.0,
                              j->w + (size_t)(g * j->og * j->ck) * es, j->ck, src, j->l,
                              j->b ? 1.0 : 0.0, out + (size_t)(g * j->og * j->l) * es, j->l));
  }
}

static void forward_range(void *ctx, int64_t t0, int64_t t1) {
  conv_job *j = ctx;
  for (int64_t t = t0; t < t1; t++) {
    char *cols = j->cols ? j->cols + (size_t)(t * j->ck * j->l) * j->es : NULL;
    const int64_t first = t * j->n / j->tasks, last = (t + 1) * j->n / j->tasks;
    for (int64_t img = first; img < last; img++) forward_image(j, img, cols);
  }
}

lt_status cpu_nn_conv2d(lt_tensor *out, const lt_tensor *x, const lt_tensor *w,
                        const lt_tensor *b, const lt_conv2d_opts *o) {
  conv_job j;
  conv_job_init(&j, x, w, o, out->shape[2], out->shape[3]);
  if (j.n == 0 || j.o == 0 || j.l == 0) return LT_OK;
  j.x = lt_data(x);
  j.w = lt_data(w);
  j.b = b ? lt_data(b) : NULL;
  j.out = lt_data(out);
  j.tasks = task_count(&j, j.n);
  lt_tensor *buf;
  LT_TRY(column_buffers(&j, x->storage->device, x->dtype, &buf));
  lt_parallel_for(j.tasks, 1, forward_range, &j);
  if (buf) lt_tensor_release(buf);
  return j.status;
}

/* ---- backward ---- */

/* Weight gradient of one image into the partial gw of its block, then the
 * input gradient (the column buffer is reused in that order). */
static void backward_image(conv_job *j, int64_t img, char *cols, char *gw) {
  const size_t es = j->es;
  const int64_t hw = j->geom.height * j->geom.width;
  const char *go = j->go + (size_t)(img * j->o * j->l) * es;
  for (int64_t g = 0; g < j->groups; g++) {
    const char *gog = go + (size_t)(g * j->og * j->l) * es;
    const char *wg = j->w + (size_t)(g * j->og * j->ck) * es;
    if (gw) {
      const char *image = j->x + (size_t)((img * j->c + g * j->cg) * hw) * es;
      const char *src = image;
      if (!j->direct) {
        cpu_nn_im2col(&j->geom, image, cols, j->f64);
        src = cols;
      }
      set_status(j, cpu_nn_gemm(j->f64, false, true, j->og, j->ck, j->l, 1.0, gog, j->l, src,
                                j->l, 1.0, gw + (size_t)(g * j->og * j->ck) * es, j->ck));
    }
    if (j->gx) {
      char *gimage = j->gx + (size_t)((img * j->c + g * j->cg) * hw) * es;
      if (j->direct) {
        set_status(j, cpu_nn_gemm(j->f64, true, false, j->ck, j->l, j->og, 1.0, wg, j->ck, gog,
                                  j->l, 0.0, gimage, j->l));
      } else {
        set_status(j, cpu_nn_gemm(j->f64, true, false, j->ck, j->l, j->og, 1.0, wg, j->ck, gog,
                                  j->l, 0.0, cols, j->l));
        cpu_nn_zero(gimage, j->cg * hw, j->f64);
        cpu_nn_col2im(&j->geom, cols, gimage, j->f64);
      }
    }
  }
}

static void backward_range(void *ctx, int64_t t0, int64_t t1) {
  conv_job *j = ctx;
  const int64_t wsize = j->o * j->ck;
  for (int64_t t = t0; t < t1; t++) {
    char *cols = j->cols ? j->cols + (size_t)(t * j->ck * j->l) * j->es : NULL;
    /* Task t runs blocks [t B / T, (t + 1) B / T); block k owns images
     * [k N / B, (k + 1) N / B). */
    const int64_t b0 = t * j->blocks / j->tasks, b1 = (t + 1) * j->blocks / j->tasks;
    for (int64_t blk = b0; blk < b1; blk++) {
      char *gw = j->gw_partials ? j->gw_partials + (size_t)(blk * wsize) * j->es : NULL;
      if (gw) cpu_nn_zero(gw, wsize, j->f64);
      const int64_t first = blk * j->n / j->blocks, last = (blk + 1) * j->n / j->blocks;
      for (int64_t img = first; img < last; img++) backward_image(j, img, cols, gw);
    }
  }
}

/* Bias gradient: per output channel, the sum over images and positions. */
typedef struct bias_job {
  const char *go;
  char *gb;
  int64_t n, o, l;
  bool f64;
} bias_job;

/* One double accumulator makes the sum latency-bound (each add waits for
 * the last); BIAS_LANES of them, lane k taking positions p = k, k + LANES,
 * ... of every row (the tail to lanes 0, 1, ...) and added in a fixed order
 * at the end, overlap and vectorise. The order depends on the shapes only,
 * so the result is the same for any thread count. */
#define BIAS_LANES 8

NN_INLINE void bias_impl(const bias_job *j, int64_t o0, int64_t o1, bool f64) {
  for (int64_t oc = o0; oc < o1; oc++) {
    double acc[BIAS_LANES] = {0};
    for (int64_t img = 0; img < j->n; img++) {
      const int64_t base = (img * j->o + oc) * j->l;
      int64_t p = 0;
      for (; p + BIAS_LANES <= j->l; p += BIAS_LANES)
        for (int k = 0; k < BIAS_LANES; k++) acc[k] += nn_ld(j->go, base + p + k, f64);
      for (int k = 0; p < j->l; p++, k++) acc[k] += nn_ld(j->go, base + p, f64);
    }
    const double sum = ((acc[0] + acc[1]) + (acc[2] + acc[3])) +
                       ((acc[4] + acc[5]) + (acc[6] + acc[7]));
    nn_st(j->gb, oc, f64, sum);
  }
}

LT_CPU_CLONES static void bias_range(void *ctx, int64_t o0, int64_t o1) {
  const bias_job *j = ctx;
  if (j->f64)
    bias_impl(j, o0, o1, true);
  else
    bias_impl(j, o0, o1, false);
}

/* Weight partials summed in block order into gw. */
typedef struct partial_sum_job {
  const char *partials;
  char *gw;
  int64_t blocks, size;
  bool f64;
} partial_sum_job;

NN_INLINE void partial_sum_impl(const partial_sum_job *j, int64_t e0, int64_t e1, bool f64) {
  for (int64_t e = e0; e < e1; e++) {
    double acc = 0.0;
    for (int64_t blk = 0; blk < j->blocks; blk++) acc += nn_ld(j->partials, blk * j->size + e, f64);
    nn_st(j->gw, e, f64, acc);
  }
}

LT_CPU_CLONES static void partial_sum_range(void *ctx, int64_t e0, int64_t e1) {
  const partial_sum_job *j = ctx;
  if (j->f64)
    partial_sum_impl(j, e0, e1, true);
  else
    partial_sum_impl(j, e0, e1, false);
}

lt_status cpu_nn_conv2d_backward(lt_tensor *gx, lt_tensor *gw, lt_tensor *gb,
                                 const lt_tensor *go, const lt_tensor *x, const lt_tensor *w,
                                 const lt_conv2d_opts *o) {
  conv_job j;
  conv_job_init(&j, x, w, o, go->shape[2], go->shape[3]);
  const lt_device dev = x->storage->device;
  if (gb) {
    bias_job bj = {lt_data(go), lt_data(gb), j.n, j.o, j.l, j.f64};
    lt_parallel_for(j.o, NN_GRAIN / (j.n * j.l + 1) + 1, bias_range, &bj);
  }
  if (!gx && !gw) return LT_OK;
  if (j.n == 0 || j.o == 0 || j.l == 0 || j.ck == 0) { /* nothing flows back */
    if (gx) cpu_nn_zero(lt_data(gx), lt_numel(gx), j.f64);
    if (gw) cpu_nn_zero(lt_data(gw), lt_numel(gw), j.f64);
    return LT_OK;
  }
  j.x = lt_data(x);
  j.w = lt_data(w);
  j.go = lt_data(go);
  j.gx = gx ? lt_data(gx) : NULL;
  const int64_t wbytes = j.o * j.ck * (int64_t)j.es;
  j.blocks = 1;
  if (gw) {
    int64_t by_memory = (int64_t)CONV_PARTIAL_BYTES / (wbytes > 0 ? wbytes : 1);
    j.blocks = min64(min64(j.n, CONV_MAX_BLOCKS), by_memory > 1 ? by_memory : 1);
  } else {
    j.blocks = j.n; /* images are independent: any split gives the same result */
  }
  j.tasks = task_count(&j, j.blocks);
  lt_tensor *buf = NULL, *partials = NULL;
  lt_status st = column_buffers(&j, dev, x->dtype, &buf);
  if (st == LT_OK && gw) {
    if (j.blocks == 1) {
      j.gw_partials = lt_data(gw); /* one block sums straight into gw */
    } else {
      const int64_t shape[2] = {j.blocks, j.o * j.ck};
      st = lt_empty(shape, 2, x->dtype, dev, &partials);
      if (st == LT_OK) j.gw_partials = lt_data(partials);
    }
  }
  if (st == LT_OK) {
    lt_parallel_for(j.tasks, 1, backward_range, &j);
    st = j.status;
  }
  if (st == LT_OK && partials) {
    partial_sum_job pj = {j.gw_partials, lt_data(gw), j.blocks, j.o * j.ck, j.f64};
    lt_parallel_for(pj.size, NN_GRAIN / (j.blocks + 1) + 1, partial_sum_range, &pj);
  }
  if (buf) lt_tensor_release(buf);
  if (partials) lt_tensor_release(partials);
  return st;
}
