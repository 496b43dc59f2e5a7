/* Scaled dot-product attention, blockwise (FlashAttention: Dao, Fu, Ermon,
 * Rudra and Re, 2022; FlashAttention-2: Dao, 2023), so that no L x S matrix
 * is ever stored: only one block of BR queries x BC keys per thread.
 *
 * Forward, per problem and block of queries: the scores of one key block at
 * a time are one GEMM (S = scale Q K_j^T), masked, and folded into the rows'
 * online softmax: the running maximum m and sum l of exp(s - m) (Milakov
 * and Gimelshein 2018, "Online normalizer calculation for softmax"); when m
 * grows, the output accumulated so far is rescaled by exp(m_old - m_new),
 * then O += P V_j is a second GEMM. At the end O /= l, and lse = m + log(l)
 * is kept for backward.
 *
 * Backward recomputes P = exp(S - lse) a block at a time. With
 * D_i = rowsum(dO_i * O_i) (FlashAttention-2's trick, which replaces
 * rowsum(P * dP) when dropout is folded into O), dS = P * (dP - D) and
 *   dV = P_drop^T dO,  dP = (dO V^T) * Z,  dK = scale dS^T Q,  dQ = scale dS K.
 * It runs as two passes, one over key blocks (dK, dV, each block owned by one
 * task) and one over query blocks (dQ): the probabilities are recomputed
 * twice, but no task ever adds into another's rows, so the sums need no
 * atomics or partial buffers, and a unit's result does not depend on which
 * thread ran it or how the units were shared out.
 *
 * A row whose every key is masked keeps m = -inf: its P is 0 (not
 * exp(-inf + inf)), its output zeros and lse +inf, so that backward's P is 0
 * there too; PyTorch's math path gives the same zeros (_safe_softmax).
 *
 * Dropout: the keep decision of element (b, i, j) is drawn from Philox at
 * counter offset + n / 4, lane n % 4 (n = (b L + i) S + j), lt_bernoulli_'s
 * rule, so forward and backward regenerate the same mask from the seed and
 * offset alone and never store it.
 *
 * Work: float32 runs tasks on the thread pool (GEMMs inside a task run on its
 * thread); float64 (gradient checks) runs as one task, as OpenBLAS's dgemm
 * keeps its own threads. Scratch is one workspace (category workspace) of a
 * few blocks per task, plus D ([nbatch, L]) in backward. */
#include <math.h>
#include <string.h>

#include "core/philox.h"
#include "cpu/cpu_clones.h"
#include "cpu/cpu_nn.h"
#include "cpu/cpu_nn_kernels.h"
#include "cpu/cpu_vmath.h"
#include "lt/alloc.h"
#include "lt/threads.h"

/* Queries and keys per block: 64 x 64 GEMMs are large enough for oneDNN to
 * run near its peak and small enough that a block's scores stay in L1/L2. */
#define ATTN_BR 64
#define ATTN_BC 64

typedef struct attn_job {
  const lt_nn_attn_geom *g;
  bool f64;
  size_t es; /* bytes of an element */
  const char *q, *k, *v, *mask, *go, *o, *lse_in;
  char *out, *lse, *gq, *gk, *gv;
  char *d;  /* backward: D [nbatch, L] */
  char *ws; /* per task: task_bytes */
  size_t task_bytes, block_bytes;
  int64_t br, bc; /* block sizes, at most L and S */
  int64_t nblk;   /* blocks per problem of the pass running */
  int64_t units, tasks;
  lt_status status; /* first GEMM failure */
} attn_job;

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

static void set_status(attn_job *j, lt_status st) {
  if (st != LT_OK) {
#pragma omp critical(lt_attention_status)
    if (j->status == LT_OK) j->status = st;
  }
}

static const char *q_row(const attn_job *j, int64_t b, int64_t i) {
  return j->q + (size_t)(lt_nn_attn_offset(j->g, j->g->q_stride, b) + i * j->g->q_ld) * j->es;
}
static const char *k_row(const attn_job *j, int64_t b, int64_t r) {
  return j->k + (size_t)(lt_nn_attn_offset(j->g, j->g->k_stride, b) + r * j->g->k_ld) * j->es;
}
static const char *v_row(const attn_job *j, int64_t b, int64_t r) {
  return j->v + (size_t)(lt_nn_attn_offset(j->g, j->g->v_stride, b) + r * j->g->v_ld) * j->es;
}
/* Rows of the [nbatch, L or S, width] results and inputs. */
static size_t row_at(const attn_job *j, int64_t b, int64_t rows, int64_t r, int64_t width) {
  return (size_t)((b * rows + r) * width) * j->es;
}

/* Unit u of a pass over nblk blocks per problem: (problem, block). Within a
 * problem the blocks are taken from both ends in turn (0, n-1, 1, n-2, ...),
 * so that under a causal mask, where later query blocks see more keys,
 * consecutive units (one task's share) mix heavy and light ones. */
static void unit_block(const attn_job *j, int64_t u, int64_t *b, int64_t *blk) {
  const int64_t n = j->nblk, t = u % n;
  *b = u / n;
  *blk = t % 2 == 0 ? t / 2 : n - 1 - t / 2;
}

/* ---- dropout's keep mask ---- */

/* z[c] for elements n0 .. n0 + count - 1 of the draw: 1 / (1 - p) where
 * kept, 0 where dropped, by lt_bernoulli_'s rule with probability 1 - p. */
NN_INLINE void keep_run(const lt_nn_attn_geom *g, uint64_t n0, int64_t count, void *z, bool f64) {
  const uint32_t key[2] = {(uint32_t)g->seed, (uint32_t)(g->seed >> 32)};
  const double keep = 1.0 - g->dropout_p, scale = 1.0 / keep;
  uint64_t n = n0;
  int64_t c = 0;
  while (c < count) {
    const uint64_t block = g->offset + n / 4;
    const uint32_t counter[4] = {(uint32_t)block, (uint32_t)(block >> 32), 0, 0};
    uint32_t w[4];
    lt_philox4x32_10(counter, key, w);
    for (unsigned lane = (unsigned)(n % 4); lane < 4 && c < count; lane++, c++, n++)
      nn_st(z, c, f64, w[lane] * 0x1p-32 < keep ? scale : 0.0);
  }
}

/* The keep factors of rows [i0, i0 + rows) x keys [j0, j0 + cols) of problem b. */
static void keep_block(const attn_job *j, int64_t b, int64_t i0, int64_t rows, int64_t j0,
                       int64_t cols, void *z) {
  const lt_nn_attn_geom *g = j->g;
  for (int64_t r = 0; r < rows; r++) {
    const uint64_t n0 = ((uint64_t)(b * g->l + i0 + r)) * (uint64_t)g->s + (uint64_t)j0;
    char *zr = (char *)z + (size_t)(r * cols) * j->es;
    if (j->f64)
      keep_run(g, n0, cols, zr, true);
    else
      keep_run(g, n0, cols, zr, false);
  }
}

/* ---- row loops ----
 * float32 rows are computed in float with cpu_vmath.h's exp and sums kept
 * in ROW_LANES double lanes (lane l takes elements l, l + ROW_LANES, ...,
 * added in lane order), so that each loop vectorises and gives the same bits
 * on every clone and every CPU (the exp's unfused form: the blocks' GEMMs,
 * not the exponentials, bound attention); float64 rows in double with libm. */
#define ROW_LANES 8

NN_INLINE double lanes_total(const double *lane) {
  double total = 0.0;
  for (int l = 0; l < ROW_LANES; l++) total += lane[l];
  return total;
}

/* The row's maximum; NaN is skipped here (its exponential carries it into
 * the row's sum), except in a row of nothing else, which is then NaN. */
NN_INLINE double row_max(const void *x, int64_t n, bool f64) {
  double m = -INFINITY;
  if (f64) {
    const double *d = x;
    for (int64_t k = 0; k < n; k++) m = d[k] > m ? d[k] : m;
  } else {
    const float *f = x;
    float lane[ROW_LANES], mf = -INFINITY;
    for (int l = 0; l < ROW_LANES; l++) lane[l] = -INFINITY;
    int64_t k = 0;
    for (; k + ROW_LANES <= n; k += ROW_LANES)
      for (int l = 0; l < ROW_LANES; l++) lane[l] = vm_select(f[k + l] > lane[l], f[k + l], lane[l]);
    for (int l = 0; l < ROW_LANES; l++) mf = lane[l] > mf ? lane[l] : mf;
    for (; k < n; k++) mf = f[k] > mf ? f[k] : mf;
    m = mf;
  }
  if (m == -INFINITY)
    for (int64_t k = 0; k < n; k++)
      if (nn_ld(x, k, f64) != nn_ld(x, k, f64)) return NAN;
  return m;
}

/* x[k] = exp(x[k] - m) (times z[k] when z is given); returns the sum of the
 * exponentials (before z). */
NN_INLINE double row_exp(void *x, const void *z, int64_t n, double m, bool f64) {
  if (f64) {
    double *d = x, sum = 0.0;
    const double *zd = z;
    for (int64_t k = 0; k < n; k++) {
      const double e = exp(d[k] - m);
      sum += e;
      d[k] = zd ? e * zd[k] : e;
    }
    return sum;
  }
  float *f = x;
  const float *zf = z, mf = (float)m;
  double lane[ROW_LANES] = {0};
  int64_t k = 0;
  if (zf) {
    for (; k + ROW_LANES <= n; k += ROW_LANES)
      for (int l = 0; l < ROW_LANES; l++) {
        const float e = vm_expf(f[k + l] - mf);
        lane[l] += e;
        f[k + l] = e * zf[k + l];
      }
  } else {
    for (; k + ROW_LANES <= n; k += ROW_LANES)
      for (int l = 0; l < ROW_LANES; l++) {
        const float e = vm_expf(f[k + l] - mf);
        lane[l] += e;
        f[k + l] = e;
      }
  }
  for (; k < n; k++) {
    const float e = vm_expf(f[k] - mf);
    lane[k % ROW_LANES] += e;
    f[k] = zf ? e * zf[k] : e;
  }
  return lanes_total(lane);
}

/* x[k] = exp(x[k] - shift), without the sum. */
NN_INLINE void row_exp_shift(void *x, int64_t n, double shift, bool f64) {
  if (f64) {
    double *d = x;
    for (int64_t k = 0; k < n; k++) d[k] = exp(d[k] - shift);
  } else {
    float *f = x;
    const float sf = (float)shift;
    for (int64_t k = 0; k < n; k++) f[k] = vm_expf(f[k] - sf);
  }
}

NN_INLINE void row_scale(void *x, int64_t n, double a, bool f64) {
  if (f64) {
    double *d = x;
    for (int64_t k = 0; k < n; k++) d[k] *= a;
  } else {
    float *f = x;
    const float af = (float)a;
    for (int64_t k = 0; k < n; k++) f[k] *= af;
  }
}

NN_INLINE void row_fill(void *x, int64_t n, double v, bool f64) {
  if (f64) {
    double *d = x;
    for (int64_t k = 0; k < n; k++) d[k] = v;
  } else {
    float *f = x;
    for (int64_t k = 0; k < n; k++) f[k] = (float)v;
  }
}

/* ---- float32 rows without dropout ----
 * The GPT's and BERT's blocks: rows of at most ATTN_BC keys, a causal row's
 * later keys removed. Those take no exp and no max (P is 0 there, written
 * directly), and the rest run in F32_LANES float lanes (one AVX-512 register)
 * summed pairwise in a fixed order, so each clone gives the same bits. */
#define F32_LANES 16

NN_INLINE float lanes_sum_f32(const float *lane) {
  float t[F32_LANES / 2];
  for (int l = 0; l < F32_LANES / 2; l++) t[l] = lane[l] + lane[l + F32_LANES / 2];
  for (int w = F32_LANES / 4; w >= 1; w /= 2)
    for (int l = 0; l < w; l++) t[l] += t[l + w];
  return t[0];
}

/* The largest of x[0, n), NaN skipped (row_max's rule: NaN for a row of
 * nothing else); -inf for n = 0. */
NN_INLINE float row_max_f32(const float *x, int64_t n) {
  float lane[F32_LANES];
  for (int l = 0; l < F32_LANES; l++) lane[l] = -INFINITY;
  int64_t k = 0;
  for (; k + F32_LANES <= n; k += F32_LANES)
    for (int l = 0; l < F32_LANES; l++) lane[l] = vm_select(x[k + l] > lane[l], x[k + l], lane[l]);
  float m = -INFINITY;
  for (int l = 0; l < F32_LANES; l++) m = lane[l] > m ? lane[l] : m;
  for (; k < n; k++) m = x[k] > m ? x[k] : m;
  if (m == -INFINITY)
    for (k = 0; k < n; k++)
      if (x[k] != x[k]) return NAN;
  return m;
}

/* The sum of x[0, n) in lanes (a partial last chunk added one by one). */
NN_INLINE float row_sum_f32(const float *x, int64_t n) {
  float lane[F32_LANES] = {0};
  int64_t k = 0;
  for (; k + F32_LANES <= n; k += F32_LANES)
    for (int l = 0; l < F32_LANES; l++) lane[l] += x[k + l];
  float sum = lanes_sum_f32(lane);
  for (; k < n; k++) sum += x[k];
  return sum;
}

/* The keys of a block row that the causal mask keeps: query i sees keys up
 * to i, so key block [j0, j0 + cols) row i keeps its first i + 1 - j0. The
 * count is rounded up to whole lane chunks where the row has them: the keys
 * past it hold -inf (mask_scores), which change no max and whose exp is 0,
 * and whole chunks need no tail. */
NN_INLINE int64_t causal_keep(const lt_nn_attn_geom *g, int64_t i, int64_t j0, int64_t cols) {
  if (!g->causal) return cols;
  int64_t keep = i + 1 - j0;
  if (keep <= 0) return 0;
  keep = (keep + F32_LANES - 1) / F32_LANES * F32_LANES;
  return keep < cols ? keep : cols;
}

/* ---- scores ---- */

/* One row of scores masked: keys whose bool mask is false become -inf, or
 * the additive mask is added. The mask's elements are step apart. */
NN_INLINE void mask_row(const attn_job *j, const char *mrow, int64_t step, void *s, int64_t n,
                        bool f64) {
  if (j->g->mask == LT_NN_ATTN_BOOL_MASK) {
    const bool *m = (const bool *)mrow;
    if (!f64 && step == 1) {
      float *f = s;
      for (int64_t c = 0; c < n; c++) f[c] = vm_select(m[c], f[c], -INFINITY);
    } else {
      for (int64_t c = 0; c < n; c++)
        if (!m[c * step]) nn_st(s, c, f64, -INFINITY);
    }
  } else if (!f64 && step == 1) {
    float *f = s;
    const float *m = (const float *)mrow;
    for (int64_t c = 0; c < n; c++) f[c] += m[c];
  } else {
    for (int64_t c = 0; c < n; c++) nn_st(s, c, f64, nn_ld(s, c, f64) + nn_ld(mrow, c * step, f64));
  }
}

NN_INLINE void mask_scores(const attn_job *j, int64_t b, int64_t i0, int64_t rows, int64_t j0,
                           int64_t cols, char *s, bool f64) {
  const lt_nn_attn_geom *g = j->g;
  if (g->mask != LT_NN_ATTN_NO_MASK) {
    const size_t mes = g->mask == LT_NN_ATTN_BOOL_MASK ? 1 : j->es;
    const int64_t base = lt_nn_attn_offset(g, g->mask_stride, b);
    for (int64_t r = 0; r < rows; r++) {
      const char *mrow = j->mask + (size_t)(base + (i0 + r) * g->mask_row + j0 * g->mask_col) * mes;
      mask_row(j, mrow, g->mask_col, s + (size_t)(r * cols) * j->es, cols, f64);
    }
  }
  if (g->causal)
    for (int64_t r = 0; r < rows; r++) {
      int64_t first = i0 + r + 1 - j0; /* the first key past query i0 + r */
      if (first < 0) first = 0;
      if (first < cols) row_fill(s + (size_t)(r * cols + first) * j->es, cols - first, -INFINITY, f64);
    }
}

/* s [rows, cols] = scale q_i . k_j + mask (-inf where a key is removed). */
NN_INLINE lt_status score_block(const attn_job *j, int64_t b, int64_t i0, int64_t rows, int64_t j0,
                                int64_t cols, void *s) {
  const lt_nn_attn_geom *g = j->g;
  LT_TRY(cpu_nn_gemm(j->f64, false, true, rows, cols, g->e, g->scale, q_row(j, b, i0), g->q_ld,
                     k_row(j, b, j0), g->k_ld, 0.0, s, cols));
  if (j->f64)
    mask_scores(j, b, i0, rows, j0, cols, s, true);
  else
    mask_scores(j, b, i0, rows, j0, cols, s, false);
  return LT_OK;
}

/* The keys query block [i0, i0 + rows) sees: all of them, or under the
 * causal mask those up to its last query. */
static int64_t key_end(const attn_job *j, int64_t i0, int64_t rows) {
  return j->g->causal ? min64(j->g->s, i0 + rows) : j->g->s;
}

/* ---- forward ---- */

/* One key block folded into the rows' running max m and sum l: s becomes
 * the block's P (times the keep factors z, when given) and each output row
 * is rescaled by exp(m_old - m_new). */
NN_INLINE void online_rows(char *s, const char *z, int64_t rows, int64_t cols, double *m,
                           double *l, char *out, int64_t ev, bool f64) {
  const size_t es = f64 ? 8 : 4;
  for (int64_t r = 0; r < rows; r++) {
    void *srow = s + (size_t)(r * cols) * es;
    const double mx = row_max(srow, cols, f64);
    const double mnew = mx > m[r] || mx != mx ? mx : m[r];
    if (mnew == -INFINITY) { /* every key so far removed: P is 0, nothing to rescale */
      row_fill(srow, cols, 0.0, f64);
      continue;
    }
    const double sum = row_exp(srow, z ? z + (size_t)(r * cols) * es : NULL, cols, mnew, f64);
    const double alpha = m[r] == -INFINITY ? 0.0 : (f64 ? exp(m[r] - mnew) : vm_expf((float)(m[r] - mnew)));
    l[r] = l[r] * alpha + sum;
    m[r] = mnew;
    if (alpha != 1.0) row_scale(out + (size_t)(r * ev) * es, ev, alpha, f64);
  }
}

/* online_rows for float32 without dropout, in passes over the block (the
 * rows' maxima, the exponentials, the sums and rescales), so that each pass
 * is short independent work per row that runs rows in parallel in the
 * core, where one row's chain of max, exp and sum runs alone. Keys past
 * keep(r) get P = 0 without an exp (the causal mask removed them). */
NN_INLINE void online_rows_f32(const lt_nn_attn_geom *g, float *s, int64_t i0, int64_t j0,
                               int64_t rows, int64_t cols, double *m, double *l, float *out) {
  int64_t keep[ATTN_BR];
  float mrow[ATTN_BR];
  for (int64_t r = 0; r < rows; r++) {
    keep[r] = causal_keep(g, i0 + r, j0, cols);
    const double mx = row_max_f32(s + r * cols, keep[r]);
    mrow[r] = (float)(mx > m[r] || mx != mx ? mx : m[r]);
  }
  for (int64_t r = 0; r < rows; r++) {
    float *srow = s + r * cols;
    const float mr = mrow[r] == -INFINITY ? 0.0f : mrow[r]; /* all removed: exp(-inf) = 0 */
    int64_t c = 0;
    for (; c + F32_LANES <= keep[r]; c += F32_LANES)
      for (int k = 0; k < F32_LANES; k++) srow[c + k] = vm_expf_neg_unfused(srow[c + k] - mr);
    for (; c < keep[r]; c++) srow[c] = vm_expf_neg_unfused(srow[c] - mr);
    for (; c < cols; c++) srow[c] = 0.0f;
  }
  for (int64_t r = 0; r < rows; r++) {
    if (mrow[r] == -INFINITY) continue; /* every key so far removed: P is 0, l and out too */
    const double sum = row_sum_f32(s + r * cols, keep[r]);
    const bool fresh = m[r] == -INFINITY; /* out's row is still zeros: nothing to rescale */
    const double alpha = fresh ? 0.0 : vm_expf_neg_unfused((float)(m[r] - mrow[r]));
    l[r] = l[r] * alpha + sum;
    m[r] = mrow[r];
    if (alpha != 1.0 && !fresh) row_scale(out + r * g->ev, g->ev, alpha, false);
  }
}

NN_INLINE void finish_rows(int64_t rows, const double *m, const double *l, char *out, int64_t ev,
                           void *lse, bool f64) {
  for (int64_t r = 0; r < rows; r++) {
    if (l[r] == 0.0) { /* no key: zeros (as accumulated) and lse +inf */
      nn_st(lse, r, f64, INFINITY);
      continue;
    }
    row_scale(out + (size_t)(r * ev) * (f64 ? 8 : 4), ev, 1.0 / l[r], f64);
    nn_st(lse, r, f64, m[r] + log(l[r]));
  }
}

NN_INLINE void forward_unit(attn_job *j, char *region, int64_t u) {
  const lt_nn_attn_geom *g = j->g;
  int64_t b, blk;
  unit_block(j, u, &b, &blk);
  const int64_t i0 = blk * j->br, rows = min64(j->br, g->l - i0);
  char *out = j->out + row_at(j, b, g->l, i0, g->ev);
  char *lse = j->lse + row_at(j, b, g->l, i0, 1);
  void *s = region, *z = g->dropout_p > 0.0 ? region + j->block_bytes : NULL;
  double m[ATTN_BR], l[ATTN_BR];
  for (int64_t r = 0; r < rows; r++) m[r] = -INFINITY, l[r] = 0.0;
  cpu_nn_zero(out, rows * g->ev, j->f64);
  const int64_t kend = key_end(j, i0, rows);
  for (int64_t j0 = 0; j0 < kend; j0 += j->bc) {
    const int64_t cols = min64(j->bc, kend - j0);
    lt_status st = score_block(j, b, i0, rows, j0, cols, s);
    if (st == LT_OK) {
      if (z) keep_block(j, b, i0, rows, j0, cols, z);
      if (j->f64)
        online_rows(s, z, rows, cols, m, l, out, g->ev, true);
      else if (!z)
        online_rows_f32(g, s, i0, j0, rows, cols, m, l, (float *)out);
      else
        online_rows(s, z, rows, cols, m, l, out, g->ev, false);
      st = cpu_nn_gemm(j->f64, false, false, rows, g->ev, cols, 1.0, s, cols, v_row(j, b, j0),
                       g->v_ld, 1.0, out, g->ev);
    }
    if (st != LT_OK) {
      set_status(j, st);
      return;
    }
  }
  if (j->f64)
    finish_rows(rows, m, l, out, g->ev, lse, true);
  else
    finish_rows(rows, m, l, out, g->ev, lse, false);
}

/* Task t's region and units [*u0, *u1). */
static char *task_units(const attn_job *j, int64_t t, int64_t *u0, int64_t *u1) {
  *u0 = t * j->units / j->tasks;
  *u1 = (t + 1) * j->units / j->tasks;
  return j->ws + (size_t)t * j->task_bytes;
}

LT_CPU_CLONES static void forward_range(void *ctx, int64_t t0, int64_t t1) {
  for (int64_t t = t0, u0, u1; t < t1; t++) {
    char *region = task_units(ctx, t, &u0, &u1);
    for (int64_t u = u0; u < u1; u++) forward_unit(ctx, region, u);
  }
}

/* Runs a pass over nblk blocks of every problem, each task a range of units. */
static void run_pass(attn_job *j, int64_t nblk, lt_range_fn range) {
  j->nblk = nblk;
  j->units = j->g->nbatch * nblk;
  j->tasks = min64(j->units, j->f64 ? 1 : lt_get_num_threads());
  if (j->units > 0) lt_parallel_for(j->tasks, 1, range, j);
}

static void job_init(attn_job *j, const lt_nn_attn_geom *g, const lt_tensor *q, int blocks) {
  memset(j, 0, sizeof *j);
  j->g = g;
  j->f64 = q->dtype == LT_FLOAT64;
  j->es = j->f64 ? sizeof(double) : sizeof(float);
  j->br = g->l < ATTN_BR ? (g->l > 0 ? g->l : 1) : ATTN_BR;
  j->bc = g->s < ATTN_BC ? (g->s > 0 ? g->s : 1) : ATTN_BC;
  j->block_bytes = (size_t)(j->br * j->bc) * j->es;
  j->task_bytes = (size_t)blocks * j->block_bytes;
}

/* One workspace: the tasks' regions (as many as threads could run), then
 * extra bytes. */
static lt_status take_workspace(attn_job *j, lt_device dev, size_t extra, lt_block **block) {
  *block = NULL;
  const int64_t tasks = j->f64 ? 1 : lt_get_num_threads();
  const size_t bytes = (size_t)tasks * j->task_bytes + extra;
  void *p;
  LT_TRY(lt_alloc(dev, bytes, LT_CAT_WORKSPACE, &p, block));
  j->ws = p;
  return LT_OK;
}

lt_status cpu_nn_attention(lt_tensor *out, lt_tensor *lse, const lt_tensor *q, const lt_tensor *k,
                           const lt_tensor *v, const lt_tensor *mask, const lt_nn_attn_geom *g) {
  attn_job j;
  job_init(&j, g, q, g->dropout_p > 0.0 ? 2 : 1);
  lt_block *block;
  LT_TRY(take_workspace(&j, q->storage->device, 0, &block));
  if (lt_estimating()) { /* the workspace was all an estimate needs */
    lt_free(block);
    return LT_OK;
  }
  j.q = lt_data(q), j.k = lt_data(k), j.v = lt_data(v), j.mask = mask ? lt_data(mask) : NULL;
  j.out = lt_data(out), j.lse = lt_data(lse);
  run_pass(&j, (g->l + j.br - 1) / j.br, forward_range);
  lt_free(block);
  return j.status;
}

/* ---- backward ---- */

/* D[r] = sum_c dO[r, c] O[r, c], summed in double. */
NN_INLINE void d_rows(const attn_job *j, int64_t r0, int64_t r1, bool f64) {
  const int64_t ev = j->g->ev;
  for (int64_t r = r0; r < r1; r++) {
    double sum = 0.0;
    for (int64_t c = 0; c < ev; c++) sum += nn_ld(j->go, r * ev + c, f64) * nn_ld(j->o, r * ev + c, f64);
    nn_st(j->d, r, f64, sum);
  }
}

LT_CPU_CLONES static void d_range(void *ctx, int64_t r0, int64_t r1) {
  const attn_job *j = ctx;
  if (j->f64)
    d_rows(j, r0, r1, true);
  else
    d_rows(j, r0, r1, false);
}

/* s (scores) becomes P = exp(s - lse_i): 0 where a key is removed
 * (exp(-inf)) or the row has none (lse +inf). */
NN_INLINE void probabilities(char *s, const void *lse, int64_t rows, int64_t cols, bool f64) {
  for (int64_t r = 0; r < rows; r++)
    row_exp_shift(s + (size_t)(r * cols) * (f64 ? 8 : 4), cols, nn_ld(lse, r, f64), f64);
}

/* probabilities for float32: keys the causal mask removed get 0 without an
 * exp (from there on, every key of the row is removed). */
NN_INLINE void probabilities_f32(const lt_nn_attn_geom *g, float *s, const float *lse, int64_t i0,
                                 int64_t j0, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; r++) {
    float *srow = s + r * cols;
    const int64_t keep = causal_keep(g, i0 + r, j0, cols);
    const float shift = lse[r];
    int64_t c = 0;
    for (; c + F32_LANES <= keep; c += F32_LANES)
      for (int l = 0; l < F32_LANES; l++) srow[c + l] = vm_expf_neg_unfused(srow[c + l] - shift);
    for (; c < keep; c++) srow[c] = vm_expf_neg_unfused(srow[c] - shift);
    for (; c < cols; c++) srow[c] = 0.0f;
  }
}

/* t (dO V^T) becomes dS = P * (dP * z - D_i). */
NN_INLINE void score_grads(void *t, const void *p, const void *z, const void *d, int64_t rows,
                           int64_t cols, bool f64) {
  for (int64_t r = 0; r < rows; r++) {
    const int64_t base = r * cols;
    if (f64) {
      double *tr = (double *)t + base;
      const double *pr = (const double *)p + base, *zr = z ? (const double *)z + base : NULL;
      const double di = ((const double *)d)[r];
      for (int64_t c = 0; c < cols; c++) tr[c] = pr[c] * ((zr ? tr[c] * zr[c] : tr[c]) - di);
    } else {
      float *tr = (float *)t + base;
      const float *pr = (const float *)p + base, *zr = z ? (const float *)z + base : NULL;
      const float di = ((const float *)d)[r];
      if (zr)
        for (int64_t c = 0; c < cols; c++) tr[c] = pr[c] * (tr[c] * zr[c] - di);
      else
        for (int64_t c = 0; c < cols; c++) tr[c] = pr[c] * (tr[c] - di);
    }
  }
}

NN_INLINE void times(void *dst, const void *a, const void *b, int64_t n, bool f64) {
  if (f64) {
    for (int64_t i = 0; i < n; i++) ((double *)dst)[i] = ((const double *)a)[i] * ((const double *)b)[i];
  } else {
    for (int64_t i = 0; i < n; i++) ((float *)dst)[i] = ((const float *)a)[i] * ((const float *)b)[i];
  }
}

/* P of rows [i0, i0 + rows) x keys [j0, j0 + cols) into s, the keep factors
 * into z (with dropout), and dS into t; p_drop, when asked, gets P * z in t
 * first for dV (then t is overwritten). */
NN_INLINE lt_status block_grads(const attn_job *j, int64_t b, int64_t i0, int64_t rows, int64_t j0,
                             int64_t cols, char *region, bool dv_first, char *gv) {
  const lt_nn_attn_geom *g = j->g;
  void *s = region, *t = region + j->block_bytes;
  void *z = g->dropout_p > 0.0 ? region + 2 * j->block_bytes : NULL;
  LT_TRY(score_block(j, b, i0, rows, j0, cols, s));
  const char *lse = j->lse_in + row_at(j, b, g->l, i0, 1);
  const char *go = j->go + row_at(j, b, g->l, i0, g->ev);
  if (j->f64)
    probabilities(s, lse, rows, cols, true);
  else
    probabilities_f32(g, s, (const float *)lse, i0, j0, rows, cols);
  if (z) keep_block(j, b, i0, rows, j0, cols, z);
  if (dv_first) { /* dV_j += (P z)^T dO */
    const void *pd = s;
    if (z) {
      if (j->f64)
        times(t, s, z, rows * cols, true);
      else
        times(t, s, z, rows * cols, false);
      pd = t;
    }
    LT_TRY(cpu_nn_gemm(j->f64, true, false, cols, g->ev, rows, 1.0, pd, cols, go, g->ev, 1.0, gv,
                       g->ev));
  }
  /* dP = dO V_j^T, then dS */
  LT_TRY(cpu_nn_gemm(j->f64, false, true, rows, cols, g->ev, 1.0, go, g->ev, v_row(j, b, j0),
                     g->v_ld, 0.0, t, cols));
  const char *d = j->d + row_at(j, b, g->l, i0, 1);
  if (j->f64)
    score_grads(t, s, z, d, rows, cols, true);
  else
    score_grads(t, s, z, d, rows, cols, false);
  return LT_OK;
}

/* dK and dV of key block blk of problem b, over the queries that see it. */
NN_INLINE void kv_unit(attn_job *j, char *region, int64_t u) {
  const lt_nn_attn_geom *g = j->g;
  int64_t b, blk;
  unit_block(j, u, &b, &blk);
  const int64_t j0 = blk * j->bc, cols = min64(j->bc, g->s - j0);
  char *gk = j->gk ? j->gk + row_at(j, b, g->s, j0, g->e) : NULL;
  char *gv = j->gv ? j->gv + row_at(j, b, g->s, j0, g->ev) : NULL;
  if (gk) cpu_nn_zero(gk, cols * g->e, j->f64);
  if (gv) cpu_nn_zero(gv, cols * g->ev, j->f64);
  /* Under the causal mask query i sees key j0 only from i = j0 on. */
  const int64_t first = g->causal ? j0 / j->br * j->br : 0;
  for (int64_t i0 = first; i0 < g->l; i0 += j->br) {
    const int64_t rows = min64(j->br, g->l - i0);
    lt_status st = block_grads(j, b, i0, rows, j0, cols, region, gv != NULL, gv);
    if (st == LT_OK && gk) /* dK_j += scale dS^T Q */
      st = cpu_nn_gemm(j->f64, true, false, cols, g->e, rows, g->scale, region + j->block_bytes,
                       cols, q_row(j, b, i0), g->q_ld, 1.0, gk, g->e);
    if (st != LT_OK) {
      set_status(j, st);
      return;
    }
  }
}

/* dQ of query block blk of problem b. */
NN_INLINE void q_unit(attn_job *j, char *region, int64_t u) {
  const lt_nn_attn_geom *g = j->g;
  int64_t b, blk;
  unit_block(j, u, &b, &blk);
  const int64_t i0 = blk * j->br, rows = min64(j->br, g->l - i0);
  char *gq = j->gq + row_at(j, b, g->l, i0, g->e);
  cpu_nn_zero(gq, rows * g->e, j->f64);
  const int64_t kend = key_end(j, i0, rows);
  for (int64_t j0 = 0; j0 < kend; j0 += j->bc) {
    const int64_t cols = min64(j->bc, kend - j0);
    lt_status st = block_grads(j, b, i0, rows, j0, cols, region, false, NULL);
    if (st == LT_OK) /* dQ += scale dS K_j */
      st = cpu_nn_gemm(j->f64, false, false, rows, g->e, cols, g->scale, region + j->block_bytes,
                       cols, k_row(j, b, j0), g->k_ld, 1.0, gq, g->e);
    if (st != LT_OK) {
      set_status(j, st);
      return;
    }
  }
}

LT_CPU_CLONES static void kv_range(void *ctx, int64_t t0, int64_t t1) {
  for (int64_t t = t0, u0, u1; t < t1; t++) {
    char *region = task_units(ctx, t, &u0, &u1);
    for (int64_t u = u0; u < u1; u++) kv_unit(ctx, region, u);
  }
}

LT_CPU_CLONES static void q_range(void *ctx, int64_t t0, int64_t t1) {
  for (int64_t t = t0, u0, u1; t < t1; t++) {
    char *region = task_units(ctx, t, &u0, &u1);
    for (int64_t u = u0; u < u1; u++) q_unit(ctx, region, u);
  }
}

lt_status cpu_nn_attention_backward(lt_tensor *gq, lt_tensor *gk, lt_tensor *gv,
                                    const lt_tensor *go, const lt_tensor *q, const lt_tensor *k,
                                    const lt_tensor *v, const lt_tensor *out, const lt_tensor *lse,
                                    const lt_tensor *mask, const lt_nn_attn_geom *g) {
  attn_job j;
  job_init(&j, g, q, g->dropout_p > 0.0 ? 3 : 2);
  const size_t d_bytes = (size_t)(g->nbatch * g->l) * j.es;
  lt_block *block;
  LT_TRY(take_workspace(&j, q->storage->device, d_bytes, &block));
  if (lt_estimating()) {
    lt_free(block);
    return LT_OK;
  }
  j.d = j.ws + (size_t)(j.f64 ? 1 : lt_get_num_threads()) * j.task_bytes;
  j.q = lt_data(q), j.k = lt_data(k), j.v = lt_data(v), j.mask = mask ? lt_data(mask) : NULL;
  j.go = lt_data(go), j.o = lt_data(out), j.lse_in = lt_data(lse);
  j.gq = gq ? lt_data(gq) : NULL, j.gk = gk ? lt_data(gk) : NULL, j.gv = gv ? lt_data(gv) : NULL;
  const int64_t rows = g->nbatch * g->l;
  if (rows > 0) lt_parallel_for(rows, NN_GRAIN / (g->ev + 1) + 1, d_range, &j);
  if (gk || gv) run_pass(&j, (g->s + j.bc - 1) / j.bc, kv_range);
  if (gq && j.status == LT_OK) run_pass(&j, (g->l + j.br - 1) / j.br, q_range);
  lt_free(block);
  return j.status;
}
