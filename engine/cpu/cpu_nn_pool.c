/* max_pool2d and avg_pool2d over independent planes [P, H, W], split by
 * planes over the thread pool. Windows are clipped to the input up front
 * (padding never holds a value: max skips it, avg counts it in the divisor
 * only when count_include_pad). Backward is per plane too, so gradients of
 * overlapping windows are added in a fixed order. max_pool2d also takes
 * float16 and bfloat16 as they are (the backend's half_max_pool): the
 * maximum is one of the values, and a gradient is added in that dtype, as
 * PyTorch's CPU kernel does. */
#include <math.h>
#include <string.h>

#include "cpu/cpu_clones.h"
#include "cpu/cpu_nn.h"
#include "cpu/cpu_nn_lowp.h"
#include "lt/threads.h"

typedef struct pool_job {
  const lt_pool2d_opts *o;
  const void *x, *go;
  void *out, *gx;
  int64_t *indices;
  const int64_t *gindices;
  int64_t h, w, out_h, out_w;
  bool f64;
  lt_dtype dt; /* max: of x, out, go, gx */
} pool_job;

static int64_t plane_grain(int64_t plane_elems) {
  return NN_GRAIN / (plane_elems > 0 ? plane_elems : 1) + 1;
}

/* ---- max ---- */

NN_INLINE void max_impl(const pool_job *j, int64_t p0, int64_t p1, lt_dtype dt) {
  const lt_pool2d_opts *o = j->o;
  const int64_t hw = j->h * j->w, ohw = j->out_h * j->out_w;
  for (int64_t p = p0; p < p1; p++) {
    const int64_t in0 = p * hw;
    for (int64_t oh = 0; oh < j->out_h; oh++) {
      int64_t hs = oh * o->stride[0] - o->padding[0];
      const int64_t he = hs + (o->kernel[0] - 1) * o->dilation[0] + 1;
      while (hs < 0) hs += o->dilation[0];
      for (int64_t ow = 0; ow < j->out_w; ow++) {
        int64_t ws = ow * o->stride[1] - o->padding[1];
        const int64_t we = ws + (o->kernel[1] - 1) * o->dilation[1] + 1;
        while (ws < 0) ws += o->dilation[1];
        /* As PyTorch: start at the first tap inside the input with -inf;
         * a larger value or a NaN takes over (so the first maximum, or the
         * last NaN, wins). The selects are written so the compiler can use
         * conditional moves: on real data the comparison is a coin flip
         * that a branch predictor keeps losing. */
        int64_t best_at = hs * j->w + ws, nan_at = -1;
        double best = -INFINITY;
        for (int64_t ih = hs; ih < he && ih < j->h; ih += o->dilation[0])
          for (int64_t iw = ws; iw < we && iw < j->w; iw += o->dilation[1]) {
            const int64_t pos = ih * j->w + iw;
            const double v = nn_ld_dt(j->x, in0 + pos, dt);
            const bool greater = v > best;
            best_at = greater ? pos : best_at;
            best = greater ? v : best;
            nan_at = v != v ? pos : nan_at;
          }
        if (nan_at >= 0) best_at = nan_at, best = NAN;
        const int64_t at = p * ohw + oh * j->out_w + ow;
        nn_st_dt(j->out, at, dt, best);
        j->indices[at] = best_at;
      }
    }
  }
}

/* One tap of a window, with max_impl's rules: a larger value takes over, a
 * NaN is remembered (the last one wins). */
#define MAX_TAP(V, POS)                                                         \
  do {                                                                          \
    const double v_ = (V);                                                      \
    const int64_t pos_ = (POS);                                                 \
    const bool greater_ = v_ > best;                                            \
    best_at = greater_ ? pos_ : best_at;                                        \
    best = greater_ ? v_ : best;                                                \
    nan_at = v_ != v_ ? pos_ : nan_at;                                          \
  } while (0)

#if defined(__SSE2__)
#include <emmintrin.h>

/* a where m, else b (m: all-ones or all-zeros lanes). */
static inline __m128 select_ps(__m128 m, __m128 a, __m128 b) {
  return _mm_or_ps(_mm_and_ps(m, a), _mm_andnot_ps(m, b));
}
static inline __m128i select_epi32(__m128i m, __m128i a, __m128i b) {
  return _mm_or_si128(_mm_and_si128(m, a), _mm_andnot_si128(m, b));
}

/* The float32 2x2 window, four outputs per step: even and odd taps of two
 * input rows pulled apart with shuffles, then max_2x2_impl's rules as lane
 * selects. Taps in the scalar order a (top left), b (top right), c, d: a
 * larger value takes over, so the first maximum wins; a NaN anywhere gives
 * NaN at the last NaN's position. Starting from a instead of -inf changes
 * nothing: a = -inf keeps a's position either way, and a NaN in a is
 * overridden by the NaN rule at the end. Positions are built in 32 bits
 * (plane size below 2^31, checked by the caller) and widened. Returns the
 * number of outputs done; the scalar loop finishes the row. */
static int64_t max_2x2_row_f32(const float *top, const float *bottom, float *out,
                               int64_t *indices, int64_t out_w, int64_t top_pos, int64_t w) {
  const __m128i one = _mm_set1_epi32(1), two = _mm_set1_epi32(2), three = _mm_set1_epi32(3);
  const __m128 nan = _mm_set1_ps(NAN);
  int64_t ow = 0;
  for (; ow + 4 <= out_w; ow += 4) {
    const __m128 t0 = _mm_loadu_ps(top + 2 * ow), t1 = _mm_loadu_ps(top + 2 * ow + 4);
    const __m128 b0 = _mm_loadu_ps(bottom + 2 * ow), b1 = _mm_loadu_ps(bottom + 2 * ow + 4);
    const __m128 a = _mm_shuffle_ps(t0, t1, _MM_SHUFFLE(2, 0, 2, 0));
    const __m128 b = _mm_shuffle_ps(t0, t1, _MM_SHUFFLE(3, 1, 3, 1));
    const __m128 c = _mm_shuffle_ps(b0, b1, _MM_SHUFFLE(2, 0, 2, 0));
    const __m128 d = _mm_shuffle_ps(b0, b1, _MM_SHUFFLE(3, 1, 3, 1));
    __m128 best = a;
    __m128i code = _mm_setzero_si128();
    __m128 m = _mm_cmpgt_ps(b, best);
    best = select_ps(m, b, best), code = select_epi32(_mm_castps_si128(m), one, code);
    m = _mm_cmpgt_ps(c, best);
    best = select_ps(m, c, best), code = select_epi32(_mm_castps_si128(m), two, code);
    m = _mm_cmpgt_ps(d, best);
    best = select_ps(m, d, best), code = select_epi32(_mm_castps_si128(m), three, code);
    /* The last NaN tap, if any. */
    __m128i nan_code = _mm_set1_epi32(-1);
    const __m128 na = _mm_cmpunord_ps(a, a), nb = _mm_cmpunord_ps(b, b);
    const __m128 nc = _mm_cmpunord_ps(c, c), nd = _mm_cmpunord_ps(d, d);
    nan_code = select_epi32(_mm_castps_si128(na), _mm_setzero_si128(), nan_code);
    nan_code = select_epi32(_mm_castps_si128(nb), one, nan_code);
    nan_code = select_epi32(_mm_castps_si128(nc), two, nan_code);
    nan_code = select_epi32(_mm_castps_si128(nd), three, nan_code);
    const __m128 any_nan = _mm_or_ps(_mm_or_ps(na, nb), _mm_or_ps(nc, nd));
    best = select_ps(any_nan, nan, best);
    code = select_epi32(_mm_castps_si128(any_nan), nan_code, code);
    _mm_storeu_ps(out + ow, best);
    /* position = top_pos + 2 ow + (code & 1) + (code >> 1) w */
    const __m128i col = _mm_add_epi32(_mm_set1_epi32((int)(top_pos + 2 * ow)),
                                      _mm_set_epi32(6, 4, 2, 0));
    const __m128i down = _mm_and_si128(_mm_cmpgt_epi32(code, one), _mm_set1_epi32((int)w));
    const __m128i pos = _mm_add_epi32(_mm_add_epi32(col, _mm_and_si128(code, one)), down);
    const __m128i zero = _mm_setzero_si128(); /* positions are non-negative: widen with zeros */
    _mm_storeu_si128((__m128i *)(indices + ow), _mm_unpacklo_epi32(pos, zero));
    _mm_storeu_si128((__m128i *)(indices + ow + 2), _mm_unpackhi_epi32(pos, zero));
  }
  return ow;
}
#endif

/* The common 2x2 window, stride 2, no padding, every window inside the
 * input: the four taps are read straight from two input rows, without the
 * general loop's clipping and its two variable-length inner loops. The taps
 * go in max_impl's order with its rules, so values and indices are the
 * same. (Regrouping the comparisons or selecting in float makes GCC branch
 * on the data, which is slower.) */
NN_INLINE void max_2x2_impl(const pool_job *j, int64_t p0, int64_t p1, lt_dtype dt) {
  const int64_t hw = j->h * j->w, ohw = j->out_h * j->out_w;
  for (int64_t p = p0; p < p1; p++)
    for (int64_t oh = 0; oh < j->out_h; oh++) {
      const int64_t top = 2 * oh * j->w, bottom = top + j->w; /* positions in the plane */
      const int64_t at0 = p * ohw + oh * j->out_w;
      int64_t ow = 0;
#if defined(__SSE2__)
      if (dt == LT_FLOAT32 && hw <= INT32_MAX)
        ow = max_2x2_row_f32((const float *)j->x + p * hw + top, (const float *)j->x + p * hw + bottom,
                             (float *)j->out + at0, j->indices + at0, j->out_w, top, j->w);
#endif
      for (; ow < j->out_w; ow++) {
        const int64_t t = top + 2 * ow, b = bottom + 2 * ow;
        int64_t best_at = t, nan_at = -1;
        double best = -INFINITY;
        MAX_TAP(nn_ld_dt(j->x, p * hw + t, dt), t);
        MAX_TAP(nn_ld_dt(j->x, p * hw + t + 1, dt), t + 1);
        MAX_TAP(nn_ld_dt(j->x, p * hw + b, dt), b);
        MAX_TAP(nn_ld_dt(j->x, p * hw + b + 1, dt), b + 1);
        if (nan_at >= 0) best_at = nan_at, best = NAN;
        nn_st_dt(j->out, at0 + ow, dt, best);
        j->indices[at0 + ow] = best_at;
      }
    }
}

static bool is_plain_2x2(const pool_job *j) {
  const lt_pool2d_opts *o = j->o;
  return o->kernel[0] == 2 && o->kernel[1] == 2 && o->stride[0] == 2 && o->stride[1] == 2 &&
         o->padding[0] == 0 && o->padding[1] == 0 && o->dilation[0] == 1 &&
         o->dilation[1] == 1 && 2 * j->out_h <= j->h && 2 * j->out_w <= j->w;
}

LT_CPU_CLONES static void max_range(void *ctx, int64_t p0, int64_t p1) {
  const pool_job *j = ctx;
  const bool plain = is_plain_2x2(j);
  switch (j->dt) {
    case LT_FLOAT64: plain ? max_2x2_impl(j, p0, p1, LT_FLOAT64) : max_impl(j, p0, p1, LT_FLOAT64); break;
    case LT_FLOAT16: plain ? max_2x2_impl(j, p0, p1, LT_FLOAT16) : max_impl(j, p0, p1, LT_FLOAT16); break;
    case LT_BFLOAT16: plain ? max_2x2_impl(j, p0, p1, LT_BFLOAT16) : max_impl(j, p0, p1, LT_BFLOAT16); break;
    default: plain ? max_2x2_impl(j, p0, p1, LT_FLOAT32) : max_impl(j, p0, p1, LT_FLOAT32); break;
  }
}

lt_status cpu_nn_max_pool2d(lt_tensor *out, lt_tensor *indices, const lt_tensor *x,
                            const lt_pool2d_opts *o) {
  pool_job j = {.o = o, .x = lt_data(x), .out = lt_data(out), .indices = lt_data(indices),
                .h = x->shape[1], .w = x->shape[2], .out_h = out->shape[1],
                .out_w = out->shape[2], .f64 = nn_is_f64(x), .dt = x->dtype};
  lt_parallel_for(x->shape[0], plane_grain(j.h * j.w), max_range, &j);
  return LT_OK;
}

/* Each plane is zeroed with a memset (cpu_nn_zero) and the gradients
 * scattered onto it in the tensor's own type, without two conversions per
 * element. The results are unchanged: a sum of two floats rounded to double
 * and then to float is the correctly rounded float sum (double has more
 * than 2 x 24 + 2 bits), which is what the float add gives. */
NN_INLINE void max_backward_impl(const pool_job *j, int64_t p0, int64_t p1, lt_dtype dt) {
  const bool f64 = dt == LT_FLOAT64;
  const int64_t hw = j->h * j->w, ohw = j->out_h * j->out_w;
  const size_t es = lt_dtype_size(dt);
  for (int64_t p = p0; p < p1; p++) { /* plane by plane: zeroed, then scattered while in cache */
    const int64_t *idx = j->gindices + p * ohw;
    memset((char *)j->gx + (size_t)(p * hw) * es, 0, (size_t)hw * es);
    if (nn_is_lowp(dt)) {
      char *gx = (char *)j->gx + (size_t)(p * hw) * es;
      const char *go = (const char *)j->go + (size_t)(p * ohw) * es;
      for (int64_t e = 0; e < ohw; e++)
        nn_st_dt(gx, idx[e], dt, (float)nn_ld_dt(gx, idx[e], dt) + (float)nn_ld_dt(go, e, dt));
    } else if (f64) {
      double *gx = (double *)j->gx + p * hw;
      const double *go = (const double *)j->go + p * ohw;
      for (int64_t e = 0; e < ohw; e++) gx[idx[e]] += go[e];
    } else {
      float *gx = (float *)j->gx + p * hw;
      const float *go = (const float *)j->go + p * ohw;
      for (int64_t e = 0; e < ohw; e++) gx[idx[e]] += go[e];
    }
  }
}

LT_CPU_CLONES static void max_backward_range(void *ctx, int64_t p0, int64_t p1) {
  const pool_job *j = ctx;
  switch (j->dt) {
    case LT_FLOAT64: max_backward_impl(j, p0, p1, LT_FLOAT64); break;
    case LT_FLOAT16: max_backward_impl(j, p0, p1, LT_FLOAT16); break;
    case LT_BFLOAT16: max_backward_impl(j, p0, p1, LT_BFLOAT16); break;
    default: max_backward_impl(j, p0, p1, LT_FLOAT32); break;
  }
}

lt_status cpu_nn_max_pool2d_backward(lt_tensor *gx, const lt_tensor *go,
                                     const lt_tensor *indices) {
  pool_job j = {.go = lt_data(go), .gx = lt_data(gx), .gindices = lt_data(indices),
                .h = gx->shape[1], .w = gx->shape[2], .out_h = go->shape[1],
                .out_w = go->shape[2], .f64 = nn_is_f64(gx), .dt = gx->dtype};
  lt_parallel_for(gx->shape[0], plane_grain(j.h * j.w), max_backward_range, &j);
  return LT_OK;
}

/* ---- average ---- */

/* The window of output (oh, ow) clipped to the input, and its divisor. */
typedef struct avg_window {
  int64_t h0, h1, w0, w1;
  double divisor;
} avg_window;

static avg_window avg_window_at(const pool_job *j, int64_t oh, int64_t ow) {
  const lt_pool2d_opts *o = j->o;
  avg_window a;
  a.h0 = oh * o->stride[0] - o->padding[0];
  a.w0 = ow * o->stride[1] - o->padding[1];
  /* The window may reach into the right/bottom padding, not past it. */
  a.h1 = a.h0 + o->kernel[0] < j->h + o->padding[0] ? a.h0 + o->kernel[0] : j->h + o->padding[0];
  a.w1 = a.w0 + o->kernel[1] < j->w + o->padding[1] ? a.w0 + o->kernel[1] : j->w + o->padding[1];
  const int64_t padded_count = (a.h1 - a.h0) * (a.w1 - a.w0);
  if (a.h0 < 0) a.h0 = 0;
  if (a.w0 < 0) a.w0 = 0;
  if (a.h1 > j->h) a.h1 = j->h;
  if (a.w1 > j->w) a.w1 = j->w;
  if (o->divisor_override)
    a.divisor = (double)o->divisor_override;
  else if (o->count_include_pad)
    a.divisor = (double)padded_count;
  else
    a.divisor = (double)((a.h1 - a.h0) * (a.w1 - a.w0));
  return a;
}

NN_INLINE void avg_impl(const pool_job *j, int64_t p0, int64_t p1, bool f64) {
  const int64_t hw = j->h * j->w, ohw = j->out_h * j->out_w;
  for (int64_t p = p0; p < p1; p++)
    for (int64_t oh = 0; oh < j->out_h; oh++)
      for (int64_t ow = 0; ow < j->out_w; ow++) {
        const avg_window a = avg_window_at(j, oh, ow);
        double sum = 0.0;
        for (int64_t ih = a.h0; ih < a.h1; ih++)
          for (int64_t iw = a.w0; iw < a.w1; iw++) sum += nn_ld(j->x, p * hw + ih * j->w + iw, f64);
        const bool empty = a.h0 >= a.h1 || a.w0 >= a.w1;
        nn_st(j->out, p * ohw + oh * j->out_w + ow, f64, empty ? 0.0 : sum / a.divisor);
      }
}

LT_CPU_CLONES static void avg_range(void *ctx, int64_t p0, int64_t p1) {
  const pool_job *j = ctx;
  if (j->f64)
    avg_impl(j, p0, p1, true);
  else
    avg_impl(j, p0, p1, false);
}

lt_status cpu_nn_avg_pool2d(lt_tensor *out, const lt_tensor *x, const lt_pool2d_opts *o) {
  pool_job j = {.o = o, .x = lt_data(x), .out = lt_data(out), .h = x->shape[1],
                .w = x->shape[2], .out_h = out->shape[1], .out_w = out->shape[2],
                .f64 = nn_is_f64(x)};
  lt_parallel_for(x->shape[0], plane_grain(j.h * j.w), avg_range, &j);
  return LT_OK;
}

NN_INLINE void avg_backward_impl(const pool_job *j, int64_t p0, int64_t p1, bool f64) {
  const int64_t hw = j->h * j->w, ohw = j->out_h * j->out_w;
  for (int64_t p = p0; p < p1; p++) {
    for (int64_t e = 0; e < hw; e++) nn_st(j->gx, p * hw + e, f64, 0.0);
    for (int64_t oh = 0; oh < j->out_h; oh++)
      for (int64_t ow = 0; ow < j->out_w; ow++) {
        const avg_window a = avg_window_at(j, oh, ow);
        const double g = nn_ld(j->go, p * ohw + oh * j->out_w + ow, f64) / a.divisor;
        for (int64_t ih = a.h0; ih < a.h1; ih++)
          for (int64_t iw = a.w0; iw < a.w1; iw++) {
            const int64_t at = p * hw + ih * j->w + iw;
            nn_st(j->gx, at, f64, nn_ld(j->gx, at, f64) + g);
          }
      }
  }
}

LT_CPU_CLONES static void avg_backward_range(void *ctx, int64_t p0, int64_t p1) {
  const pool_job *j = ctx;
  if (j->f64)
    avg_backward_impl(j, p0, p1, true);
  else
    avg_backward_impl(j, p0, p1, false);
}

lt_status cpu_nn_avg_pool2d_backward(lt_tensor *gx, const lt_tensor *go,
                                     const lt_pool2d_opts *o) {
  pool_job j = {.o = o, .go = lt_data(go), .gx = lt_data(gx), .h = gx->shape[1],
                .w = gx->shape[2], .out_h = go->shape[1], .out_w = go->shape[2],
                .f64 = nn_is_f64(gx)};
  lt_parallel_for(gx->shape[0], plane_grain(j.h * j.w), avg_backward_range, &j);
  return LT_OK;
}
