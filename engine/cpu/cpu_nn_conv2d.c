/* conv2d as im2col + GEMM per image and group (cpu_nn_im2col.h):
 *   forward       out[n, g]  = W_g [O/g, CK] cols(x[n, g]) [CK, L]  (+ bias)
 *   grad input    x[n, g]   += col2im(W_g^T go[n, g])
 *   grad weight   W_g       += go[n, g] cols(x[n, g])^T
 * with CK = C/g kh kw and L = Ho Wo. A 1x1 convolution with stride 1 and no
 * padding needs no column matrix in float32 and float64: the image itself
 * is [C, H W].
 *
 * Scratch. The column matrix is built a block at a time: columns [p0, p1)
 * (and, when even one column is too much, rows [r0, r1)), and each block is
 * one GEMM. All scratch of a call (column blocks, and for 16-bit operands
 * the float32 blocks below) is one workspace from the caching allocator
 * (category workspace), a region per task, sized so that the whole never
 * exceeds the bytes of the convolution's output (grad_output in backward):
 * the blocks are as wide as that allows, a whole image's columns when it
 * does (so that a batch's GEMMs are as large as ever), and fewer tasks run
 * rather than blocks too narrow for a GEMM to be efficient.
 *
 * float16 and bfloat16 compute in float32 without a float32 copy of any
 * tensor: im2col widens the image as it gathers, grad_output and (where it
 * does not fit the workspace whole) the weight are widened a block at a
 * time, the GEMMs run in float32 into float32 blocks, and results are
 * rounded once as they are stored; weight gradients sum in float32.
 *
 * Tasks run on the thread pool; GEMMs called inside a task run on that
 * task's thread (OpenMP does not nest), so the pool is never
 * oversubscribed. float64 (gradient checks) runs as one task: OpenBLAS's
 * dgemm keeps its own threads.
 *
 * The weight gradient sums over images. To keep that sum independent of the
 * thread count, images are grouped into a number of blocks set by the shapes
 * alone, each block sums into its own partial weight gradient in image
 * order, and the partials are added in block order. */
#include <string.h>

#include "cpu/cpu_clones.h"
#include "cpu/cpu_nn.h"
#include "cpu/cpu_nn_im2col.h"
#include "cpu/cpu_nn_lowp.h"
#include "lt/alloc.h"
#include "lt/threads.h"

#define CONV_MAX_BLOCKS 32
/* Column blocks narrower than this make slow GEMMs: fewer tasks run first. */
#define CONV_MIN_COLS 64
#define CONV_ALIGN 64

typedef struct conv_job {
  lt_dtype dt;
  bool f64, lowp;
  size_t es, ce; /* bytes of a storage element and of a compute element */
  int64_t n, groups, c, o, cg, og, ck, kk, l, hw;
  nn_window_geom geom; /* one group of one image */
  bool direct;         /* 1x1, stride 1, no padding */
  bool need_cols;      /* a column buffer (all but direct float32/float64) */
  const char *x, *w, *b, *go;
  char *out, *gx, *gw;
  /* the plan: tasks, column block width, row block height, output channels
   * per block (forward), input channels per block (grad input) */
  int64_t tasks, cb, kb, mb, cpb;
  /* the workspace: the widened weight (shared; NULL: widened per block),
   * the weight gradient partials, then a region of task_bytes per task */
  char *ws;
  const float *w32;
  bool w_shared;       /* the weight is widened whole (16-bit) */
  char *partials;
  int64_t blocks;      /* weight gradient blocks */
  int64_t pm0, pm1;    /* the rows of the weight gradient a pass sums */
  size_t task_bytes;
  size_t off_acc, off_go, off_w, off_gx; /* within a task's region */
  bool do_gw, do_gx, partials_are_gw;
  lt_status status; /* first GEMM failure */
} conv_job;

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }
static size_t align_up(size_t n) { return (n + CONV_ALIGN - 1) / CONV_ALIGN * CONV_ALIGN; }
/* What the allocator hands out for a tensor of nbytes. */
static size_t rounded(size_t nbytes) { return nbytes < 512 ? 512 : (nbytes + 511) / 512 * 512; }

static void conv_job_init(conv_job *j, const lt_tensor *x, const lt_tensor *w,
                          const lt_conv2d_opts *o, int64_t out_h, int64_t out_w) {
  memset(j, 0, sizeof *j);
  j->dt = x->dtype;
  j->f64 = nn_is_f64(x);
  j->lowp = nn_is_lowp(x->dtype);
  j->es = lt_dtype_size(x->dtype);
  j->ce = nn_compute_size(x->dtype);
  j->n = x->shape[0];
  j->c = x->shape[1];
  j->o = w->shape[0];
  j->groups = o->groups;
  j->cg = j->c / o->groups;
  j->og = j->o / o->groups;
  const int64_t kh = w->shape[2], kw = w->shape[3];
  j->kk = kh * kw;
  j->ck = j->cg * j->kk;
  j->l = out_h * out_w;
  j->hw = x->shape[2] * x->shape[3];
  nn_window_geom g = {j->cg,        x->shape[2],    x->shape[3],    kh,
                      kw,           o->stride[0],   o->stride[1],   o->padding[0],
                      o->padding[1], o->dilation[0], o->dilation[1], out_h,
                      out_w};
  j->geom = g;
  j->direct = kh == 1 && kw == 1 && g.sh == 1 && g.sw == 1 && g.ph == 0 && g.pw == 0;
  j->need_cols = !j->direct || j->lowp;
  j->status = LT_OK;
}

static void set_status(conv_job *j, lt_status st) {
  if (st != LT_OK) {
#pragma omp critical(lt_conv_status)
    if (j->status == LT_OK) j->status = st;
  }
}

/* ---- the plan ---- */

/* A task's region for blocks of cb columns (and kb rows, mb output channels,
 * cpb input channels): its byte offsets into j and its size. */
static size_t task_layout(conv_job *j, bool forward, int64_t kb, int64_t mb, int64_t cpb,
                          int64_t cb) {
  size_t at = 0;
  if (j->need_cols) at = align_up((size_t)(kb * cb) * j->ce); /* the column block */
  if (j->lowp) {
    j->off_acc = at; /* forward: the float32 output block */
    if (forward) at += align_up((size_t)(mb * cb) * 4);
    j->off_go = at; /* backward: the widened grad_output block */
    if (!forward) at += align_up((size_t)(j->og * cb) * 4);
    j->off_w = at; /* the widened weight block, unless the weight is widened whole */
    if (!j->w_shared) at += align_up((size_t)((forward ? mb : j->og) * kb) * 4);
    j->off_gx = at; /* backward: the float32 input gradient of cpb channels */
    if (!forward && j->do_gx) at += align_up((size_t)(cpb * j->hw) * 4);
  }
  return at;
}

/* Picks the blocks so that shared + CONV_PLAN_TASKS x a task's bytes <=
 * budget: whole images first, then narrower column blocks down to
 * CONV_MIN_COLS, then blocks for fewer tasks, then row blocks (and, for
 * 16-bit, channel blocks) until one column fits. The blocks depend on the
 * shapes alone, so that results do not depend on the thread count (a GEMM's
 * rounding can depend on its width); then as many tasks run as threads and
 * budget allow. work: the most tasks the call can use. */
#define CONV_PLAN_TASKS 4

static void plan(conv_job *j, bool forward, size_t budget, size_t shared, int64_t work) {
  int64_t t = min64(work, CONV_PLAN_TASKS), kb = j->ck, mb = j->og, cpb = j->cg, cb = j->l;
  for (;;) {
    const size_t avail = budget > shared ? (budget - shared) / (size_t)t : 0;
    const size_t one = task_layout(j, forward, kb, mb, cpb, 1);
    if (one == 0) { /* nothing per column: direct float32 */
      cb = j->l;
      break;
    }
    /* The region grows by about one column's bytes per column: search. */
    int64_t lo = 0, hi = j->l;
    while (lo < hi) {
      const int64_t mid = (lo + hi + 1) / 2;
      if (task_layout(j, forward, kb, mb, cpb, mid) <= avail)
        lo = mid;
      else
        hi = mid - 1;
    }
    cb = lo;
    if (cb >= min64(j->l, CONV_MIN_COLS)) break;
    if (t > 1) {
      t--;
      continue;
    }
    if (cb >= 1) break;
    if (!forward && j->lowp && j->do_gx && cpb > 1) {
      cpb = (cpb + 1) / 2;
      kb = min64(kb, cpb * j->kk);
    } else if (kb > 1) {
      kb = (kb + 1) / 2;
      if (kb < cpb * j->kk) cpb = max64(1, kb / j->kk);
    } else if (forward && j->lowp && mb > 1) {
      mb = (mb + 1) / 2;
    } else { /* one element of everything: over budget only for tiny outputs */
      cb = 1;
      break;
    }
  }
  j->kb = kb;
  j->mb = mb;
  j->cpb = cpb;
  j->cb = cb;
  j->task_bytes = task_layout(j, forward, kb, mb, cpb, cb);
  int64_t fit = j->task_bytes ? (int64_t)((budget > shared ? budget - shared : 0) / j->task_bytes) : work;
  j->tasks = max64(1, min64(min64(work, fit), j->f64 ? 1 : lt_get_num_threads()));
}

/* One workspace of shared + tasks x task_bytes (none when that is 0). */
static lt_status take_workspace(conv_job *j, lt_device dev, size_t shared, lt_block **block) {
  *block = NULL;
  const size_t bytes = shared + (size_t)j->tasks * j->task_bytes;
  if (bytes == 0) return LT_OK;
  void *p;
  LT_TRY(lt_alloc(dev, bytes, LT_CAT_WORKSPACE, &p, block));
  j->ws = p;
  return LT_OK;
}

static char *task_region(const conv_job *j, size_t shared, int64_t t) {
  return j->ws ? j->ws + shared + (size_t)t * j->task_bytes : NULL;
}

/* The weight widened whole (16-bit operands), when it takes at most a
 * quarter of the budget. */
static size_t widened_weight_bytes(const conv_job *j, size_t budget) {
  if (!j->lowp) return 0;
  const size_t bytes = align_up((size_t)(j->o * j->ck) * 4);
  return bytes <= budget / 4 ? bytes : 0;
}

/* The weight rows [m0, m1) of group g, taps [r0, r1), as float32 for a GEMM:
 * a pointer and its leading dimension. */
static const void *weight_block(const conv_job *j, char *region, int64_t g, int64_t m0,
                                int64_t m1, int64_t r0, int64_t r1, int64_t *ld) {
  const int64_t first = (g * j->og + m0) * j->ck + r0;
  if (!j->lowp) {
    *ld = j->ck;
    return j->w + (size_t)first * j->es;
  }
  if (j->w32) {
    *ld = j->ck;
    return j->w32 + first;
  }
  float *blk = (float *)(void *)(region + j->off_w);
  cpu_nn_widen(blk, j->w + (size_t)first * j->es, j->dt, m1 - m0, r1 - r0, j->ck);
  *ld = r1 - r0;
  return blk;
}

/* ---- forward ---- */

typedef struct fwd_ctx {
  conv_job *j;
  size_t shared;
  int64_t col_blocks; /* per image */
} fwd_ctx;

static void forward_block(conv_job *j, char *region, int64_t img, int64_t p0, int64_t p1) {
  const size_t es = j->es;
  const int64_t cb = p1 - p0;
  char *out = j->out + (size_t)(img * j->o * j->l) * es;
  char *cols = region;
  float *acc = j->lowp ? (float *)(void *)(region + j->off_acc) : NULL;
  if (j->b && !j->lowp)
    for (int64_t oc = 0; oc < j->o; oc++) {
      const double bias = nn_ld(j->b, oc, j->f64);
      for (int64_t p = p0; p < p1; p++) nn_st(out, oc * j->l + p, j->f64, bias);
    }
  for (int64_t g = 0; g < j->groups; g++) {
    const char *image = j->x + (size_t)((img * j->c + g * j->cg) * j->hw) * es;
    for (int64_t m0 = 0; m0 < j->og; m0 += j->mb) {
      const int64_t m1 = min64(m0 + j->mb, j->og);
      for (int64_t r0 = 0; r0 < j->ck; r0 += j->kb) {
        const int64_t r1 = min64(r0 + j->kb, j->ck);
        const void *src;
        int64_t lds;
        if (!j->need_cols) {
          src = image + (size_t)(r0 * j->hw + p0) * es;
          lds = j->hw;
        } else {
          if (m0 == 0 || j->kb < j->ck) /* one row block: reused by every channel block */
            cpu_nn_im2col(&j->geom, image + (size_t)(r0 / j->kk * j->hw) * es, j->dt, r0, r1, p0,
                          p1, cols);
          src = cols;
          lds = cb;
        }
        int64_t ldw;
        const void *wb = weight_block(j, region, g, m0, m1, r0, r1, &ldw);
        if (j->lowp)
          set_status(j, cpu_nn_gemm(false, false, false, m1 - m0, cb, r1 - r0, 1.0, wb, ldw, src,
                                    lds, r0 > 0 ? 1.0 : 0.0, acc, cb));
        else
          set_status(j, cpu_nn_gemm(j->f64, false, false, m1 - m0, cb, r1 - r0, 1.0, wb, ldw,
                                    src, lds, (r0 > 0 || j->b) ? 1.0 : 0.0,
                                    out + (size_t)((g * j->og + m0) * j->l + p0) * es, j->l));
      }
      if (j->lowp)
        for (int64_t m = m0; m < m1; m++) {
          const int64_t oc = g * j->og + m;
          float *row = acc + (m - m0) * cb;
          if (j->b) {
            const float bias = (float)nn_ld_dt(j->b, oc, j->dt);
            for (int64_t p = 0; p < cb; p++) row[p] += bias;
          }
          nn_store_run(out + (size_t)(oc * j->l + p0) * es, j->dt, row, cb);
        }
    }
  }
}

static void forward_range(void *ctx, int64_t t0, int64_t t1) {
  fwd_ctx *f = ctx;
  conv_job *j = f->j;
  const int64_t items = j->n * f->col_blocks;
  for (int64_t t = t0; t < t1; t++) {
    char *region = task_region(j, f->shared, t);
    for (int64_t it = t * items / j->tasks; it < (t + 1) * items / j->tasks; it++) {
      const int64_t img = it / f->col_blocks, blk = it % f->col_blocks;
      const int64_t p0 = blk * j->cb;
      forward_block(j, region, img, p0, min64(p0 + j->cb, j->l));
    }
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
  const size_t budget = rounded((size_t)lt_numel(out) * j.es);
  const size_t shared = widened_weight_bytes(&j, budget);
  j.w_shared = shared > 0;
  plan(&j, true, budget, shared, j.n * j.l);
  lt_block *block;
  LT_TRY(take_workspace(&j, x->storage->device, shared, &block));
  if (lt_estimating()) { /* the workspace was all an estimate needs */
    if (block) lt_free(block);
    return LT_OK;
  }
  if (shared) {
    float *w32 = (float *)(void *)j.ws;
    cpu_nn_widen(w32, j.w, j.dt, j.o, j.ck, j.ck);
    j.w32 = w32;
  }
  fwd_ctx f = {&j, shared, (j.l + j.cb - 1) / j.cb};
  lt_parallel_for(j.tasks, 1, forward_range, &f);
  if (block) lt_free(block);
  return j.status;
}

/* ---- backward ---- */

typedef struct bwd_ctx {
  conv_job *j;
  size_t shared;
} bwd_ctx;

/* grad_output rows [m0, m1) of group g, columns [p0, p1), for a GEMM: a
 * pointer and its leading dimension (16-bit: widened into the region). */
static const void *go_block(const conv_job *j, char *region, const char *go, int64_t g,
                            int64_t m0, int64_t m1, int64_t p0, int64_t p1, int64_t *ld) {
  const char *first = go + (size_t)((g * j->og + m0) * j->l + p0) * j->es;
  if (!j->lowp) {
    *ld = j->l;
    return first;
  }
  float *blk = (float *)(void *)(region + j->off_go);
  cpu_nn_widen(blk, first, j->dt, m1 - m0, p1 - p0, j->l);
  *ld = p1 - p0;
  return blk;
}

/* The weight gradient of one image into partial gw (rows pm0..pm1 of the
 * whole, leading dimension ck). */
static void backward_weight(conv_job *j, char *region, int64_t img, char *gw) {
  const size_t es = j->es, pe = j->lowp ? 4 : j->ce;
  const char *go = j->go + (size_t)(img * j->o * j->l) * es;
  for (int64_t g = 0; g < j->groups; g++) {
    const int64_t m0 = max64(j->pm0, g * j->og) - g * j->og;
    const int64_t m1 = min64(j->pm1, (g + 1) * j->og) - g * j->og;
    if (m0 >= m1) continue;
    const char *image = j->x + (size_t)((img * j->c + g * j->cg) * j->hw) * es;
    char *dst = gw + (size_t)((g * j->og + m0 - j->pm0) * j->ck) * pe;
    for (int64_t p0 = 0; p0 < j->l; p0 += j->cb) {
      const int64_t p1 = min64(p0 + j->cb, j->l);
      int64_t ldg;
      const void *gob = go_block(j, region, go, g, m0, m1, p0, p1, &ldg);
      for (int64_t r0 = 0; r0 < j->ck; r0 += j->kb) {
        const int64_t r1 = min64(r0 + j->kb, j->ck);
        const void *src;
        int64_t lds;
        if (!j->need_cols) {
          src = image + (size_t)(r0 * j->hw + p0) * es;
          lds = j->hw;
        } else {
          cpu_nn_im2col(&j->geom, image + (size_t)(r0 / j->kk * j->hw) * es, j->dt, r0, r1, p0,
                        p1, region);
          src = region;
          lds = p1 - p0;
        }
        set_status(j, cpu_nn_gemm(j->f64, false, true, m1 - m0, r1 - r0, p1 - p0, 1.0, gob, ldg,
                                  src, lds, 1.0, dst + (size_t)r0 * pe, j->ck));
      }
    }
  }
}

/* The input gradient of one image: per block of cpb input channels, the
 * column blocks of W^T go scattered back (into gx itself, or for 16-bit
 * into a float32 block rounded once at the end). */
static void backward_input(conv_job *j, char *region, int64_t img) {
  const size_t es = j->es;
  const char *go = j->go + (size_t)(img * j->o * j->l) * es;
  for (int64_t g = 0; g < j->groups; g++) {
    for (int64_t c0 = 0; c0 < j->cg; c0 += j->cpb) {
      const int64_t c1 = min64(c0 + j->cpb, j->cg);
      char *gimage = j->gx + (size_t)((img * j->c + g * j->cg + c0) * j->hw) * es;
      char *target = j->lowp ? region + j->off_gx : gimage;
      const int64_t plane = (c1 - c0) * j->hw;
      if (j->need_cols) memset(target, 0, (size_t)plane * j->ce);
      for (int64_t r0 = c0 * j->kk; r0 < c1 * j->kk; r0 += j->kb) {
        const int64_t r1 = min64(r0 + j->kb, c1 * j->kk);
        int64_t ldw;
        const void *wb = weight_block(j, region, g, 0, j->og, r0, r1, &ldw);
        for (int64_t p0 = 0; p0 < j->l; p0 += j->cb) {
          const int64_t p1 = min64(p0 + j->cb, j->l);
          int64_t ldg;
          const void *gob = go_block(j, region, go, g, 0, j->og, p0, p1, &ldg);
          if (!j->need_cols) { /* direct: W^T go is the input gradient */
            set_status(j, cpu_nn_gemm(j->f64, true, false, r1 - r0, p1 - p0, j->og, 1.0, wb, ldw,
                                      gob, ldg, 0.0,
                                      target + (size_t)((r0 - c0) * j->hw + p0) * es, j->hw));
            continue;
          }
          set_status(j, cpu_nn_gemm(j->f64, true, false, r1 - r0, p1 - p0, j->og, 1.0, wb, ldw,
                                    gob, ldg, 0.0, region, p1 - p0));
          /* col2im's image is the plane of channel r0 / kk */
          cpu_nn_col2im(&j->geom, region, j->f64, r0, r1, p0, p1,
                        target + (size_t)((r0 / j->kk - c0) * j->hw) * j->ce);
        }
      }
      if (j->lowp) nn_store_run(gimage, j->dt, (const float *)(void *)target, plane);
    }
  }
}

static void backward_range(void *ctx, int64_t t0, int64_t t1) {
  bwd_ctx *bc = ctx;
  conv_job *j = bc->j;
  const size_t pe = j->lowp ? 4 : j->ce;
  const int64_t psize = (j->pm1 - j->pm0) * j->ck;
  for (int64_t t = t0; t < t1; t++) {
    char *region = task_region(j, bc->shared, t);
    /* Task t runs blocks [t B / T, (t + 1) B / T); block k owns images
     * [k N / B, (k + 1) N / B). */
    const int64_t b0 = t * j->blocks / j->tasks, b1 = (t + 1) * j->blocks / j->tasks;
    for (int64_t blk = b0; blk < b1; blk++) {
      char *gw = j->do_gw ? j->partials + (size_t)(blk * psize) * pe : NULL;
      if (gw) memset(gw, 0, (size_t)psize * pe);
      const int64_t first = blk * j->n / j->blocks, last = (blk + 1) * j->n / j->blocks;
      for (int64_t img = first; img < last; img++) {
        if (gw) backward_weight(j, region, img, gw);
        if (j->do_gx) backward_input(j, region, img);
      }
    }
  }
}

/* Bias gradient: per output channel, the sum over images and positions. */
typedef struct bias_job {
  const char *go;
  char *gb;
  int64_t n, o, l;
  lt_dtype dt;
} bias_job;

/* One double accumulator makes the sum latency-bound (each add waits for
 * the last); BIAS_LANES of them, lane k taking positions p = k, k + LANES,
 * ... of every row (the tail to lanes 0, 1, ...) and added in a fixed order
 * at the end, overlap and vectorise. The order depends on the shapes only,
 * so the result is the same for any thread count. */
#define BIAS_LANES 8

NN_INLINE void bias_impl(const bias_job *j, int64_t o0, int64_t o1, lt_dtype dt) {
  for (int64_t oc = o0; oc < o1; oc++) {
    double acc[BIAS_LANES] = {0};
    for (int64_t img = 0; img < j->n; img++) {
      const int64_t base = (img * j->o + oc) * j->l;
      int64_t p = 0;
      for (; p + BIAS_LANES <= j->l; p += BIAS_LANES)
        for (int k = 0; k < BIAS_LANES; k++) acc[k] += nn_ld_dt(j->go, base + p + k, dt);
      for (int k = 0; p < j->l; p++, k++) acc[k] += nn_ld_dt(j->go, base + p, dt);
    }
    const double sum = ((acc[0] + acc[1]) + (acc[2] + acc[3])) +
                       ((acc[4] + acc[5]) + (acc[6] + acc[7]));
    nn_st_dt(j->gb, oc, dt, sum);
  }
}

LT_CPU_CLONES static void bias_range(void *ctx, int64_t o0, int64_t o1) {
  const bias_job *j = ctx;
  switch (j->dt) {
    case LT_FLOAT64: bias_impl(j, o0, o1, LT_FLOAT64); break;
    case LT_FLOAT16: bias_impl(j, o0, o1, LT_FLOAT16); break;
    case LT_BFLOAT16: bias_impl(j, o0, o1, LT_BFLOAT16); break;
    default: bias_impl(j, o0, o1, LT_FLOAT32); break;
  }
}

/* Weight partials (compute type, or float for 16-bit) summed in block order
 * into rows [pm0, pm1) of gw. */
typedef struct partial_sum_job {
  const char *partials;
  char *gw;
  int64_t blocks, size;
  lt_dtype dt;
  bool wide; /* partials are float32 */
} partial_sum_job;

NN_INLINE void partial_sum_impl(const partial_sum_job *j, int64_t e0, int64_t e1, bool f64) {
  for (int64_t e = e0; e < e1; e++) {
    double acc = 0.0;
    for (int64_t blk = 0; blk < j->blocks; blk++) acc += nn_ld(j->partials, blk * j->size + e, f64);
    if (j->wide)
      nn_st_dt(j->gw, e, j->dt, (float)acc); /* the float32 sum, rounded to 16 bits */
    else
      nn_st(j->gw, e, f64, acc);
  }
}

LT_CPU_CLONES static void partial_sum_range(void *ctx, int64_t e0, int64_t e1) {
  const partial_sum_job *j = ctx;
  if (j->dt == LT_FLOAT64)
    partial_sum_impl(j, e0, e1, true);
  else
    partial_sum_impl(j, e0, e1, false);
}

/* The weight gradient partials: how many blocks of images, and how many of
 * gw's rows one pass sums (all of them unless 16-bit float32 sums of the
 * whole weight do not fit in half the budget). Returns their bytes. */
static size_t plan_partials(conv_job *j, size_t budget, int64_t *rows_per_pass) {
  *rows_per_pass = j->o;
  if (!j->do_gw) {
    j->blocks = j->n; /* images are independent: any split gives the same result */
    return 0;
  }
  const size_t pe = j->lowp ? 4 : j->ce, wbytes = (size_t)(j->o * j->ck) * pe;
  const int64_t by_memory = (int64_t)(budget / 2 / (wbytes > 0 ? wbytes : 1));
  j->blocks = max64(1, min64(min64(j->n, CONV_MAX_BLOCKS), by_memory));
  if (!j->lowp && j->blocks == 1) {
    j->partials_are_gw = true; /* one block sums straight into gw */
    return 0;
  }
  if (by_memory < 1) /* 16-bit: sums of fewer rows at a time */
    *rows_per_pass = max64(1, (int64_t)(budget / 2 / ((size_t)j->ck * pe)));
  return align_up((size_t)(j->blocks * *rows_per_pass * j->ck) * pe);
}

lt_status cpu_nn_conv2d_backward(lt_tensor *gx, lt_tensor *gw, lt_tensor *gb,
                                 const lt_tensor *go, const lt_tensor *x, const lt_tensor *w,
                                 const lt_conv2d_opts *o) {
  conv_job j;
  conv_job_init(&j, x, w, o, go->shape[2], go->shape[3]);
  const lt_device dev = x->storage->device;
  const bool dry = lt_estimating(); /* plan and take the workspace only */
  if (gb && !dry) {
    bias_job bj = {lt_data(go), lt_data(gb), j.n, j.o, j.l, j.dt};
    lt_parallel_for(j.o, NN_GRAIN / (j.n * j.l + 1) + 1, bias_range, &bj);
  }
  if (!gx && !gw) return LT_OK;
  if (j.n == 0 || j.o == 0 || j.l == 0 || j.ck == 0) { /* nothing flows back */
    if (dry) return LT_OK;
    if (gx) memset(lt_data(gx), 0, (size_t)lt_numel(gx) * j.es);
    if (gw) memset(lt_data(gw), 0, (size_t)lt_numel(gw) * j.es);
    return LT_OK;
  }
  j.x = lt_data(x);
  j.w = lt_data(w);
  j.go = lt_data(go);
  j.gx = gx ? lt_data(gx) : NULL;
  j.gw = gw ? lt_data(gw) : NULL;
  j.do_gw = gw != NULL;
  j.do_gx = gx != NULL;
  const size_t budget = rounded((size_t)lt_numel(go) * j.es);
  int64_t rows_per_pass;
  const size_t partial_bytes = plan_partials(&j, budget, &rows_per_pass);
  const size_t wide_w = widened_weight_bytes(&j, budget - partial_bytes);
  j.w_shared = wide_w > 0;
  const size_t shared = wide_w + partial_bytes;
  /* Passes over the rows of gw (one unless 16-bit sums did not fit); grad
   * input runs with the first. */
  const int64_t passes = j.do_gw ? (j.o + rows_per_pass - 1) / rows_per_pass : 1;
  plan(&j, false, budget, shared, j.blocks);
  lt_block *block;
  LT_TRY(take_workspace(&j, dev, shared, &block));
  if (dry) {
    if (block) lt_free(block);
    return LT_OK;
  }
  if (wide_w) {
    float *w32 = (float *)(void *)j.ws;
    cpu_nn_widen(w32, j.w, j.dt, j.o, j.ck, j.ck);
    j.w32 = w32;
  }
  j.partials = j.partials_are_gw ? j.gw : j.ws ? j.ws + wide_w : NULL;
  const bool want_gx = j.do_gx;
  bwd_ctx bc = {&j, shared};
  for (int64_t pass = 0; pass < passes && j.status == LT_OK; pass++) {
    j.pm0 = pass * rows_per_pass;
    j.pm1 = min64(j.o, j.pm0 + rows_per_pass);
    j.do_gx = want_gx && pass == 0;
    lt_parallel_for(j.tasks, 1, backward_range, &bc);
    if (j.status == LT_OK && j.do_gw && !j.partials_are_gw) {
      partial_sum_job pj = {j.partials, j.gw + (size_t)(j.pm0 * j.ck) * j.es, j.blocks,
                            (j.pm1 - j.pm0) * j.ck, j.dt, j.lowp};
      lt_parallel_for(pj.size, NN_GRAIN / (j.blocks + 1) + 1, partial_sum_range, &pj);
    }
  }
  if (block) lt_free(block);
  return j.status;
}
