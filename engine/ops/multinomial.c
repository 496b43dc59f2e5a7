/* multinomial: category indices drawn from rows of non-negative weights.
 *
 * The weights are read on the host (they must be checked there anyway:
 * negative, infinite or NaN weights and rows of zeros are errors, which a
 * device could only report as an assertion) and the draws are made there
 * from lt's Philox generator, numbered as rng.c numbers a fill: draw d takes
 * 64-bit lane d % 2 of counter block (offset + d / 2). So a seed gives the
 * same indices on every device and thread count; the result then moves to
 * the weights' device.
 *
 * With replacement, each draw is a uniform u in [0, 1) and the category is
 * the first whose cumulative weight, divided by the row's total, exceeds u:
 * the sums run in order in double, so a zero weight repeats its
 * predecessor's sum and is never chosen, and the last sum divided by the
 * total is exactly 1.
 * Without replacement, each category j gets the key E_j / w_j with E_j an
 * exponential draw, and the row's samples are the categories of the
 * num_samples smallest keys in increasing order: the order of arrival of
 * independent exponential clocks with rates w_j, which is the law of drawing
 * one category at a time in proportion to the remaining weights (Efraimidis
 * and Spirakis 2006, "Weighted random sampling with a reservoir"). A zero
 * weight's key is +inf and is never taken (enough positive weights were
 * checked to exist); a positive one's is at most DBL_MAX. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/known_range.h"
#include "core/philox.h"
#include "lt/sort.h"
#include "ops/ops_internal.h"

static const char *const OP = "multinomial";

typedef struct draws {
  uint32_t key[2];
  uint64_t offset, block;
  uint32_t words[4];
  bool have;
} draws;

/* The 64 random bits of draw d. */
static uint64_t draw_bits(draws *g, uint64_t d) {
  const uint64_t block = g->offset + d / 2;
  if (!g->have || block != g->block) {
    const uint32_t counter[4] = {(uint32_t)block, (uint32_t)(block >> 32), 0, 0};
    lt_philox4x32_10(counter, g->key, g->words);
    g->block = block;
    g->have = true;
  }
  const int lane = (int)(d % 2);
  return (uint64_t)g->words[2 * lane] << 32 | g->words[2 * lane + 1];
}

static double unit_open_high(uint64_t r) { return (double)(r >> 11) * 0x1p-53; }      /* [0, 1) */
static double unit_open_low(uint64_t r) { return (double)((r >> 11) + 1) * 0x1p-53; } /* (0, 1] */

/* " of row 2" for a 2-D tensor of weights, "" for a 1-D one (written into buf). */
static const char *row_name(char *buf, size_t n, bool two_d, int64_t row) {
  if (!two_d) return "";
  snprintf(buf, n, " of row %lld", LT_USER_INDEX(row));
  return buf;
}

/* PyTorch's checks of one row of weights w[0..k), and its largest weight. */
static lt_status check_row(const double *w, int64_t k, bool two_d, int64_t row,
                           int64_t num_samples, bool replacement, double *largest) {
  char where[48];
  double max = 0;
  int64_t positive = 0;
  for (int64_t j = 0; j < k; j++) {
    if (!(w[j] >= 0) || isinf(w[j]))
      return lt_error(LT_ERR_ARG, "%s: weights must be finite and non-negative, got %g at "
                      "category %lld%s", OP, w[j], LT_USER_INDEX(j),
                      row_name(where, sizeof where, two_d, row));
    if (w[j] > 0) positive++;
    if (w[j] > max) max = w[j];
  }
  if (positive == 0)
    return lt_error(LT_ERR_ARG, "%s: the weights%s are all zero", OP,
                    row_name(where, sizeof where, two_d, row));
  if (!replacement && positive < num_samples)
    return lt_error(LT_ERR_ARG, "%s: cannot draw %lld samples without replacement from %lld "
                    "categories with a non-zero weight%s", OP, (long long)num_samples,
                    (long long)positive, row_name(where, sizeof where, two_d, row));
  *largest = max;
  return LT_OK;
}

typedef struct keyed {
  double key;
  int64_t category;
} keyed;

static int by_key(const void *a, const void *b) {
  const keyed *x = a, *y = b;
  if (x->key != y->key) return x->key < y->key ? -1 : 1;
  return (x->category > y->category) - (x->category < y->category);
}

/* The draws of one row (weights w divided by their largest, so that no sum
 * overflows) into out[0..num_samples), 0-based. scratch holds k keyed. */
static void sample_row(const double *w, int64_t k, double largest, int64_t num_samples,
                       bool replacement, draws *g, uint64_t first_draw, keyed *scratch,
                       int64_t *out) {
  if (replacement) {
    double *cdf = (double *)scratch;
    double total = 0;
    for (int64_t j = 0; j < k; j++) cdf[j] = total += w[j] / largest;
    for (int64_t j = 0; j < k; j++) cdf[j] /= total;
    for (int64_t s = 0; s < num_samples; s++) {
      const double u = unit_open_high(draw_bits(g, first_draw + (uint64_t)s));
      int64_t lo = 0, hi = k - 1; /* the first j with cdf[j] > u; cdf[k - 1] is 1 */
      while (lo < hi) {
        const int64_t mid = lo + (hi - lo) / 2;
        if (cdf[mid] > u) hi = mid;
        else lo = mid + 1;
      }
      out[s] = lo;
    }
    return;
  }
  for (int64_t j = 0; j < k; j++) {
    const double e = -log(unit_open_low(draw_bits(g, first_draw + (uint64_t)j)));
    double key = INFINITY;
    if (w[j] > 0) {
      key = e / (w[j] / largest);
      /* a weight below 1e-308 of the largest: still ahead of the zeros */
      if (key == INFINITY) key = DBL_MAX;
    }
    scratch[j].key = key;
    scratch[j].category = j;
  }
  if (num_samples == 1) { /* the usual draw of one token: the smallest key, no sort */
    int64_t best = 0;
    for (int64_t j = 1; j < k; j++)
      if (scratch[j].key < scratch[best].key) best = j;
    out[0] = best;
    return;
  }
  qsort(scratch, (size_t)k, sizeof *scratch, by_key);
  for (int64_t s = 0; s < num_samples; s++) out[s] = scratch[s].category;
}

/* The weights as contiguous float64 on the host. */
static lt_status host_weights(const lt_tensor *probs, lt_tensor **out) {
  lt_tensor *moved = NULL, *wide = NULL;
  lt_status st = lt_to_device(probs, lt_cpu(), &moved);
  if (st == LT_OK) st = lt_to_dtype(moved, LT_FLOAT64, false, &wide);
  if (st == LT_OK) st = lt_contiguous(wide, out);
  if (moved) lt_tensor_release(moved);
  if (wide) lt_tensor_release(wide);
  return st;
}

static lt_status draw(const lt_tensor *probs, int64_t num_samples, bool replacement,
                      int64_t index_base, lt_rng_state *gen, lt_tensor **out) {
  LT_TRY(ops_check_live(OP, probs));
  if (!lt_dtype_is_floating(probs->dtype))
    return lt_error(LT_ERR_DTYPE, "%s: expected floating point weights, got %s", OP,
                    lt_dtype_name(probs->dtype));
  if (probs->ndim != 1 && probs->ndim != 2)
    return lt_error(LT_ERR_SHAPE, "%s: expected a 1-D or 2-D tensor of weights, got %d "
                    "dimensions", OP, probs->ndim);
  const bool two_d = probs->ndim == 2;
  const int64_t k = probs->shape[probs->ndim - 1], rows = two_d ? probs->shape[0] : 1;
  if (k == 0) return lt_error(LT_ERR_SHAPE, "%s: expected at least one category, got none", OP);
  if (num_samples <= 0)
    return lt_error(LT_ERR_ARG, "%s: num_samples must be positive, got %lld", OP,
                    (long long)num_samples);
  if (!replacement && num_samples > k)
    return lt_error(LT_ERR_ARG, "%s: cannot draw %lld samples without replacement from %lld "
                    "categories", OP, (long long)num_samples, (long long)k);
  const lt_device dev = probs->storage->device;
  int64_t shape[2] = {rows, num_samples};
  if (!two_d) shape[0] = num_samples;
  lt_tensor *weights = NULL, *host = NULL;
  LT_TRY(host_weights(probs, &weights));
  lt_status st = lt_empty_named(OP, shape, probs->ndim, LT_INT64, lt_cpu(), &host);
  if (st != LT_OK || lt_estimating()) { /* an estimate has the shapes; nothing to read */
    lt_tensor_release(weights);
    if (st == LT_OK && dev.type != LT_DEVICE_CPU) {
      st = lt_to_device(host, dev, out);
      lt_tensor_release(host);
    } else if (st == LT_OK) {
      *out = host;
    }
    return st;
  }
  const double *w = lt_data(weights);
  double *largest = malloc((size_t)rows * sizeof *largest);
  keyed *scratch = malloc((size_t)k * sizeof *scratch);
  if (!largest || !scratch)
    st = lt_error(LT_ERR_OOM, "%s: out of host memory for %lld categories", OP, (long long)k);
  /* Every row is checked before any draw, so a refusal leaves the generator as it was. */
  for (int64_t r = 0; r < rows && st == LT_OK; r++)
    st = check_row(w + r * k, k, two_d, r, num_samples, replacement, &largest[r]);
  if (st == LT_OK) {
    lt_rng_state state = gen ? *gen : lt_rng_get_state();
    draws g = {{(uint32_t)state.seed, (uint32_t)(state.seed >> 32)}, state.offset, 0, {0}, false};
    const uint64_t per_row = (uint64_t)(replacement ? num_samples : k);
    int64_t *idx = lt_data(host);
    for (int64_t r = 0; r < rows; r++) {
      int64_t *row = idx + r * num_samples;
      sample_row(w + r * k, k, largest[r], num_samples, replacement, &g, (uint64_t)r * per_row,
                 scratch, row);
      for (int64_t s = 0; s < num_samples; s++) row[s] += index_base;
    }
    state.offset += ((uint64_t)rows * per_row + 1) / 2;
    if (gen) *gen = state;
    else lt_rng_set_state(state);
  }
  free(largest);
  free(scratch);
  lt_tensor_release(weights);
  if (st == LT_OK) {
    lt_known_range_note(host, index_base, index_base + k - 1);
    if (dev.type == LT_DEVICE_CPU) {
      *out = host;
      return LT_OK;
    }
    st = lt_to_device(host, dev, out);
  }
  lt_tensor_release(host);
  return st;
}

lt_status lt_multinomial(const lt_tensor *probs, int64_t num_samples, bool replacement,
                         int64_t index_base, lt_rng_state *gen, lt_tensor **out) {
  *out = NULL;
  /* The weights' copies are the op's own work, not a differentiable use. */
  const bool grad_mode = lt_set_grad_enabled(false);
  lt_status st = draw(probs, num_samples, replacement, index_base, gen, out);
  lt_set_grad_enabled(grad_mode);
  return st;
}
