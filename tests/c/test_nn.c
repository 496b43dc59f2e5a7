/* The nn ops (lt/nn.h) against PyTorch 1.13: every case of
 * tests/fixtures/nn/nn_cases.txt (tests/fixtures/gen_nn_fixture.py) runs
 * forward and backward and compares every output and gradient within
 * 1e-5 relative for float32 and 1e-10 for float64, with one thread and with
 * two (which must agree within 1e-6). Then error messages, 16-bit dtypes and
 * the running-statistics update are checked on their own. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "lt/lt.h"
#include "tensor_helpers.h"
#include "lt/nn.h"

/* ---- the fixture file ---- */

#define FX_MAX_TENSORS 16
#define FX_MAX_PARAMS 16
#define FX_MAX_CASES 128

typedef struct fx_tensor {
  char label[32];
  lt_dtype dtype;
  int ndim;
  int64_t shape[LT_MAX_DIMS];
  int64_t numel;
  double *values; /* float data, or int64 values converted exactly */
  int64_t *ints;  /* int64 data */
} fx_tensor;

typedef struct fx_case {
  char name[64];
  int ntensors, nparams;
  fx_tensor tensors[FX_MAX_TENSORS];
  char param_keys[FX_MAX_PARAMS][32];
  double params[FX_MAX_PARAMS];
} fx_case;

static fx_case cases[FX_MAX_CASES];
static int ncases;

static bool parse_dtype(const char *s, lt_dtype *dt) { return lt_dtype_parse(s, dt); }

static bool load_fixture(void) {
  char path[1024];
  const char *here = __FILE__, *slash = strrchr(here, '/');
  int dir_len = slash ? (int)(slash - here) : 1;
  snprintf(path, sizeof path, "%.*s/../fixtures/nn/nn_cases.txt", dir_len, slash ? here : ".");
  FILE *f = fopen(path, "r");
  if (!f) {
    fprintf(stderr, "missing fixture %s\n", path);
    return false;
  }
  char word[64];
  fx_case *c = NULL;
  while (fscanf(f, "%63s", word) == 1) {
    if (strcmp(word, "case") == 0) {
      if (ncases == FX_MAX_CASES) break;
      c = &cases[ncases++];
      memset(c, 0, sizeof *c);
      if (fscanf(f, "%63s", c->name) != 1) break;
    } else if (strcmp(word, "param") == 0 && c && c->nparams < FX_MAX_PARAMS) {
      if (fscanf(f, "%31s %lf", c->param_keys[c->nparams], &c->params[c->nparams]) != 2) {
        /* "None" is not written; anything unreadable ends the file */
        break;
      }
      c->nparams++;
    } else if (strcmp(word, "tensor") == 0 && c && c->ntensors < FX_MAX_TENSORS) {
      fx_tensor *t = &c->tensors[c->ntensors++];
      char dt[32];
      if (fscanf(f, "%31s %31s %d", t->label, dt, &t->ndim) != 3 || !parse_dtype(dt, &t->dtype))
        break;
      t->numel = 1;
      for (int d = 0; d < t->ndim; d++) {
        long long s;
        if (fscanf(f, "%lld", &s) != 1) break;
        t->shape[d] = s;
        t->numel *= s;
      }
      t->values = calloc((size_t)(t->numel ? t->numel : 1), sizeof(double));
      t->ints = calloc((size_t)(t->numel ? t->numel : 1), sizeof(int64_t));
      for (int64_t i = 0; i < t->numel; i++) {
        if (t->dtype == LT_INT64 || t->dtype == LT_BOOL) {
          long long v;
          if (fscanf(f, "%lld", &v) != 1) break;
          t->ints[i] = v;
          t->values[i] = (double)v;
        } else if (fscanf(f, "%lf", &t->values[i]) != 1) {
          break;
        }
      }
    }
  }
  fclose(f);
  return ncases > 0;
}

static void free_fixture(void) {
  for (int i = 0; i < ncases; i++)
    for (int k = 0; k < cases[i].ntensors; k++) {
      free(cases[i].tensors[k].values);
      free(cases[i].tensors[k].ints);
    }
}

static const fx_tensor *fx_find(const fx_case *c, const char *label) {
  for (int i = 0; i < c->ntensors; i++)
    if (strcmp(c->tensors[i].label, label) == 0) return &c->tensors[i];
  return NULL;
}

static double fx_param(const fx_case *c, const char *key, double fallback) {
  for (int i = 0; i < c->nparams; i++)
    if (strcmp(c->param_keys[i], key) == 0) return c->params[i];
  return fallback;
}

/* The fixture tensor as an lt tensor of its own dtype (NULL if absent). int64
 * values are shifted by shift (class labels, indices: index_base). */
static lt_tensor *fx_make(const fx_case *c, const char *label, int64_t shift) {
  const fx_tensor *t = fx_find(c, label);
  if (!t) return NULL;
  lt_tensor *out = NULL;
  lt_status st;
  if (t->dtype == LT_INT64) {
    int64_t *v = malloc((size_t)(t->numel ? t->numel : 1) * sizeof *v);
    for (int64_t i = 0; i < t->numel; i++) v[i] = t->ints[i] + shift;
    st = lt_from_buffer(v, LT_INT64, t->shape, t->ndim, LT_INT64, lt_cpu(), &out);
    free(v);
  } else {
    st = lt_from_buffer(t->values, LT_FLOAT64, t->shape, t->ndim, t->dtype, lt_cpu(), &out);
  }
  if (st != LT_OK) fprintf(stderr, "%s: cannot make %s: %s\n", c->name, label, lt_last_error());
  return out;
}

/* The elements of t as doubles (a malloc'd array of numel). */
static double *values_of(const lt_tensor *t) {
  lt_tensor *d = NULL;
  if (lt_to_dtype(t, LT_FLOAT64, true, &d) != LT_OK) return NULL;
  lt_tensor *c = NULL;
  lt_contiguous(d, &c);
  const int64_t n = lt_numel(c);
  double *v = malloc((size_t)(n ? n : 1) * sizeof *v);
  memcpy(v, lt_data(c), (size_t)n * sizeof *v);
  lt_tensor_release(c);
  lt_tensor_release(d);
  return v;
}

static bool close_enough(double a, double b, double rtol, double atol) {
  if (isnan(a) || isnan(b)) return isnan(a) && isnan(b);
  if (isinf(a) || isinf(b)) return a == b;
  return fabs(a - b) <= rtol * fabs(b) + atol;
}

/* Compares t with the fixture tensor label (shape and values). */
static void check_against(const fx_case *c, const char *label, const lt_tensor *t) {
  const fx_tensor *ref = fx_find(c, label);
  check_count++;
  if (!ref || !t) {
    check_failures++;
    fprintf(stderr, "%s: %s missing (%s)\n", c->name, label, !ref ? "fixture" : "result");
    return;
  }
  if (t->ndim != ref->ndim || memcmp(t->shape, ref->shape, (size_t)t->ndim * sizeof(int64_t))) {
    check_failures++;
    fprintf(stderr, "%s: %s has the wrong shape\n", c->name, label);
    return;
  }
  const bool f64 = strstr(c->name, "_f64") != NULL;
  const double rtol = f64 ? 1e-10 : 1e-5, atol = f64 ? 1e-12 : 1e-6;
  double *v = values_of(t);
  for (int64_t i = 0; i < ref->numel; i++) {
    if (!close_enough(v[i], ref->values[i], rtol, atol)) {
      check_failures++;
      fprintf(stderr, "%s: %s[%lld] = %.17g, PyTorch %.17g\n", c->name, label, (long long)i, v[i],
              ref->values[i]);
      break;
    }
  }
  free(v);
}

/* ---- running the ops of one case ---- */

#define MAX_RESULTS 12

typedef struct results {
  int n;
  const char *labels[MAX_RESULTS];
  lt_tensor *tensors[MAX_RESULTS];
} results;

static void keep(results *r, const char *label, lt_tensor *t) {
  if (r->n < MAX_RESULTS) {
    r->labels[r->n] = label;
    r->tensors[r->n++] = t;
  } else if (t) {
    lt_tensor_release(t);
  }
}

static void release_results(results *r) {
  for (int i = 0; i < r->n; i++)
    if (r->tensors[i]) lt_tensor_release(r->tensors[i]);
  r->n = 0;
}

static bool ok(const fx_case *c, lt_status st) {
  check_count++;
  if (st == LT_OK) return true;
  check_failures++;
  fprintf(stderr, "%s: %s\n", c->name, lt_last_error());
  return false;
}

static bool starts_with(const char *s, const char *prefix) {
  return strncmp(s, prefix, strlen(prefix)) == 0;
}

static void run_linear(const fx_case *c, results *r) {
  lt_tensor *x = fx_make(c, "x", 0), *w = fx_make(c, "w", 0), *b = fx_make(c, "b", 0);
  lt_tensor *g = fx_make(c, "grad_out", 0), *out = NULL, *gx = NULL, *gw = NULL, *gb = NULL;
  if (ok(c, lt_linear(x, w, b, &out)) &&
      ok(c, lt_linear_backward(g, x, w, true, true, b != NULL, &gx, &gw, &gb))) {
    keep(r, "out", out), keep(r, "gx", gx), keep(r, "gw", gw);
    if (b) keep(r, "gb", gb);
  }
  lt_tensor *ts[] = {x, w, b, g};
  release_all(ts, 4);
}

static lt_conv2d_opts conv_opts(const fx_case *c) {
  lt_conv2d_opts o = lt_conv2d_default_opts();
  o.stride[0] = (int64_t)fx_param(c, "stride_h", 1), o.stride[1] = (int64_t)fx_param(c, "stride_w", 1);
  o.padding[0] = (int64_t)fx_param(c, "padding_h", 0), o.padding[1] = (int64_t)fx_param(c, "padding_w", 0);
  o.dilation[0] = (int64_t)fx_param(c, "dilation_h", 1);
  o.dilation[1] = (int64_t)fx_param(c, "dilation_w", 1);
  o.groups = (int64_t)fx_param(c, "groups", 1);
  return o;
}

static void run_conv2d(const fx_case *c, results *r) {
  lt_tensor *x = fx_make(c, "x", 0), *w = fx_make(c, "w", 0), *b = fx_make(c, "b", 0);
  lt_tensor *g = fx_make(c, "grad_out", 0), *out = NULL, *gx = NULL, *gw = NULL, *gb = NULL;
  const lt_conv2d_opts o = conv_opts(c);
  if (ok(c, lt_conv2d(x, w, b, &o, &out)) &&
      ok(c, lt_conv2d_backward(g, x, w, &o, true, true, b != NULL, &gx, &gw, &gb))) {
    keep(r, "out", out), keep(r, "gx", gx), keep(r, "gw", gw);
    if (b) keep(r, "gb", gb);
  }
  lt_tensor *ts[] = {x, w, b, g};
  release_all(ts, 4);
}

static lt_pool2d_opts pool_opts(const fx_case *c) {
  lt_pool2d_opts o = lt_pool2d_default_opts((int64_t)fx_param(c, "kernel_h", 1),
                                            (int64_t)fx_param(c, "kernel_w", 1));
  o.stride[0] = (int64_t)fx_param(c, "stride_h", (double)o.kernel[0]);
  o.stride[1] = (int64_t)fx_param(c, "stride_w", (double)o.kernel[1]);
  o.padding[0] = (int64_t)fx_param(c, "padding_h", 0), o.padding[1] = (int64_t)fx_param(c, "padding_w", 0);
  o.dilation[0] = o.dilation[1] = (int64_t)fx_param(c, "dilation", 1);
  o.ceil_mode = fx_param(c, "ceil_mode", 0) != 0;
  o.count_include_pad = fx_param(c, "count_include_pad", 1) != 0;
  o.divisor_override = (int64_t)fx_param(c, "divisor_override", 0);
  return o;
}

static void run_max_pool2d(const fx_case *c, results *r) {
  lt_tensor *x = fx_make(c, "x", 0), *g = fx_make(c, "grad_out", 0);
  lt_tensor *out = NULL, *idx = NULL, *gx = NULL;
  const lt_pool2d_opts o = pool_opts(c);
  if (ok(c, lt_max_pool2d(x, &o, &out, &idx)) &&
      ok(c, lt_max_pool2d_backward(g, idx, x->shape, x->ndim, &gx))) {
    keep(r, "out", out), keep(r, "indices", idx), keep(r, "gx", gx);
  }
  lt_tensor *ts[] = {x, g};
  release_all(ts, 2);
}

static void run_avg_pool2d(const fx_case *c, results *r) {
  lt_tensor *x = fx_make(c, "x", 0), *g = fx_make(c, "grad_out", 0), *out = NULL, *gx = NULL;
  const lt_pool2d_opts o = pool_opts(c);
  if (ok(c, lt_avg_pool2d(x, &o, &out)) &&
      ok(c, lt_avg_pool2d_backward(g, x->shape, x->ndim, &o, &gx))) {
    keep(r, "out", out), keep(r, "gx", gx);
  }
  lt_tensor *ts[] = {x, g};
  release_all(ts, 2);
}

static void run_batch_norm(const fx_case *c, results *r) {
  lt_tensor *x = fx_make(c, "x", 0), *rm = fx_make(c, "running_mean", 0);
  lt_tensor *rv = fx_make(c, "running_var", 0), *w = fx_make(c, "w", 0), *b = fx_make(c, "b", 0);
  lt_tensor *g = fx_make(c, "grad_out", 0);
  lt_tensor *out = NULL, *mean = NULL, *invstd = NULL, *gx = NULL, *gw = NULL, *gb = NULL;
  const bool training = fx_param(c, "training", 1) != 0;
  if (ok(c, lt_batch_norm(x, rm, rv, w, b, training, fx_param(c, "momentum", 0.1),
                          fx_param(c, "eps", 1e-5), &out, &mean, &invstd)) &&
      ok(c, lt_batch_norm_backward(g, x, w, mean, invstd, training, true, w != NULL, b != NULL,
                                   &gx, &gw, &gb))) {
    keep(r, "out", out), keep(r, "save_mean", mean), keep(r, "save_invstd", invstd);
    keep(r, "gx", gx);
    if (w) keep(r, "gw", gw), keep(r, "gb", gb);
    lt_tensor_retain(rm), lt_tensor_retain(rv);
    keep(r, "running_mean_after", rm), keep(r, "running_var_after", rv);
  }
  lt_tensor *ts[] = {x, rm, rv, w, b, g};
  release_all(ts, 6);
}

static void run_layer_norm(const fx_case *c, results *r) {
  lt_tensor *x = fx_make(c, "x", 0), *w = fx_make(c, "w", 0), *b = fx_make(c, "b", 0);
  lt_tensor *g = fx_make(c, "grad_out", 0);
  lt_tensor *out = NULL, *mean = NULL, *rstd = NULL, *gx = NULL, *gw = NULL, *gb = NULL;
  const int nd = (int)fx_param(c, "normalized_ndim", 1);
  if (ok(c, lt_layer_norm(x, x->shape + x->ndim - nd, nd, w, b, fx_param(c, "eps", 1e-5), &out,
                          &mean, &rstd)) &&
      ok(c, lt_layer_norm_backward(g, x, nd, mean, rstd, w, true, w != NULL, b != NULL, &gx, &gw,
                                   &gb))) {
    keep(r, "out", out), keep(r, "mean", mean), keep(r, "rstd", rstd), keep(r, "gx", gx);
    if (w) keep(r, "gw", gw), keep(r, "gb", gb);
  }
  lt_tensor *ts[] = {x, w, b, g};
  release_all(ts, 4);
}

static void run_gelu(const fx_case *c, results *r) {
  lt_tensor *x = fx_make(c, "x", 0), *g = fx_make(c, "grad_out", 0), *out = NULL, *gx = NULL;
  const lt_gelu_approx a = fx_param(c, "tanh", 0) != 0 ? LT_GELU_TANH : LT_GELU_NONE;
  if (ok(c, lt_gelu(x, a, &out)) && ok(c, lt_gelu_backward(g, x, a, &gx)))
    keep(r, "out", out), keep(r, "gx", gx);
  lt_tensor *ts[] = {x, g};
  release_all(ts, 2);
}

static void run_softmax(const fx_case *c, results *r, bool log) {
  lt_tensor *x = fx_make(c, "x", 0), *g = fx_make(c, "grad_out", 0), *out = NULL, *gx = NULL;
  const int64_t dim = (int64_t)fx_param(c, "dim", -1);
  lt_status st = log ? lt_log_softmax(x, dim, &out) : lt_softmax(x, dim, &out);
  if (ok(c, st)) {
    st = log ? lt_log_softmax_backward(g, out, dim, &gx) : lt_softmax_backward(g, out, dim, &gx);
    if (ok(c, st)) keep(r, "out", out), keep(r, "gx", gx);
  }
  lt_tensor *ts[] = {x, g};
  release_all(ts, 2);
}

/* Class losses run with index_base 1 in float64 and 0 in float32, so both
 * conventions meet PyTorch's numbers. */
static lt_class_loss_opts class_opts(const fx_case *c, int64_t base) {
  lt_class_loss_opts o = lt_class_loss_default_opts();
  o.reduction = (lt_reduction)(int)fx_param(c, "reduction", 1);
  const int64_t ignore = (int64_t)fx_param(c, "ignore_index", -100);
  o.ignore_index = ignore >= 0 ? ignore + base : ignore;
  o.label_smoothing = fx_param(c, "label_smoothing", 0.0);
  o.index_base = base;
  return o;
}

static int64_t base_of(const fx_case *c) { return strstr(c->name, "_f64") ? 1 : 0; }

static void run_class_loss(const fx_case *c, results *r, bool fused) {
  const int64_t base = base_of(c);
  lt_tensor *x = fx_make(c, "x", 0), *t = fx_make(c, "target", base);
  lt_tensor *w = fx_make(c, "weight", 0), *g = fx_make(c, "grad_out", 0);
  lt_tensor *loss = NULL, *lse = NULL, *gx = NULL;
  const lt_class_loss_opts o = class_opts(c, base);
  if (fused) {
    if (ok(c, lt_cross_entropy(x, t, w, &o, &loss, &lse)) &&
        ok(c, lt_cross_entropy_backward(g, x, t, w, lse, &o, &gx)))
      keep(r, "loss", loss), keep(r, "gx", gx);
    if (lse) lt_tensor_release(lse);
  } else if (ok(c, lt_nll_loss(x, t, w, &o, &loss)) &&
             ok(c, lt_nll_loss_backward(g, x, t, w, &o, &gx))) {
    keep(r, "loss", loss), keep(r, "gx", gx);
  }
  lt_tensor *ts[] = {x, t, w, g};
  release_all(ts, 4);
}

static void run_mse(const fx_case *c, results *r) {
  lt_tensor *a = fx_make(c, "a", 0), *b = fx_make(c, "b", 0), *g = fx_make(c, "grad_out", 0);
  lt_tensor *loss = NULL, *ga = NULL, *gb = NULL;
  const lt_reduction red = (lt_reduction)(int)fx_param(c, "reduction", 1);
  if (ok(c, lt_mse_loss(a, b, red, &loss)) &&
      ok(c, lt_mse_loss_backward(g, a, b, red, true, true, &ga, &gb)))
    keep(r, "loss", loss), keep(r, "ga", ga), keep(r, "gb", gb);
  lt_tensor *ts[] = {a, b, g};
  release_all(ts, 3);
}

static void run_embedding(const fx_case *c, results *r) {
  const int64_t base = base_of(c);
  lt_tensor *w = fx_make(c, "w", 0), *idx = fx_make(c, "indices", base);
  lt_tensor *g = fx_make(c, "grad_out", 0), *out = NULL, *gw = NULL;
  const int64_t pad = (int64_t)fx_param(c, "padding_idx", -1);
  lt_embedding_opts o = {base, pad >= 0, pad + base};
  if (ok(c, lt_embedding(w, idx, &o, &out)) &&
      ok(c, lt_embedding_backward(g, idx, w->shape[0], &o, &gw)))
    keep(r, "out", out), keep(r, "gw", gw);
  lt_tensor *ts[] = {w, idx, g};
  release_all(ts, 3);
}

static void run_case(const fx_case *c, results *r) {
  const char *n = c->name;
  if (starts_with(n, "linear")) run_linear(c, r);
  else if (starts_with(n, "conv2d")) run_conv2d(c, r);
  else if (starts_with(n, "max_pool2d")) run_max_pool2d(c, r);
  else if (starts_with(n, "avg_pool2d")) run_avg_pool2d(c, r);
  else if (starts_with(n, "batch_norm")) run_batch_norm(c, r);
  else if (starts_with(n, "layer_norm")) run_layer_norm(c, r);
  else if (starts_with(n, "gelu")) run_gelu(c, r);
  else if (starts_with(n, "softmax")) run_softmax(c, r, false);
  else if (starts_with(n, "log_softmax")) run_softmax(c, r, true);
  else if (starts_with(n, "cross_entropy")) run_class_loss(c, r, true);
  else if (starts_with(n, "nll_loss")) run_class_loss(c, r, false);
  else if (starts_with(n, "mse")) run_mse(c, r);
  else if (starts_with(n, "embedding")) run_embedding(c, r);
  else {
    check_count++, check_failures++;
    fprintf(stderr, "no runner for case %s\n", n);
  }
}

/* Results with one and with two threads agree within 1e-6 relative. */
static void check_same(const fx_case *c, const results *a, const results *b) {
  CHECK_EQ_INT(a->n, b->n);
  for (int i = 0; i < a->n && i < b->n; i++) {
    double *va = values_of(a->tensors[i]), *vb = values_of(b->tensors[i]);
    const int64_t n = lt_numel(a->tensors[i]);
    check_count++;
    for (int64_t k = 0; k < n; k++)
      if (!close_enough(va[k], vb[k], 1e-6, 1e-7)) {
        check_failures++;
        fprintf(stderr, "%s: %s[%lld] differs with the thread count: %.17g vs %.17g\n", c->name,
                a->labels[i], (long long)k, va[k], vb[k]);
        break;
      }
    free(va);
    free(vb);
  }
}

static void test_fixture_cases(void) {
  CHECK(load_fixture());
  for (int i = 0; i < ncases; i++) {
    const fx_case *c = &cases[i];
    results one = {0}, two = {0};
    lt_set_num_threads(1);
    run_case(c, &one);
    for (int k = 0; k < one.n; k++) check_against(c, one.labels[k], one.tensors[k]);
    lt_set_num_threads(2);
    run_case(c, &two);
    check_same(c, &one, &two);
    release_results(&one);
    release_results(&two);
  }
  printf("test_nn: %d PyTorch cases\n", ncases);
}

/* ---- errors ---- */

static lt_tensor *zeros(lt_dtype dt, int ndim, ...) {
  int64_t shape[LT_MAX_DIMS];
  va_list ap;
  va_start(ap, ndim);
  for (int d = 0; d < ndim; d++) shape[d] = va_arg(ap, int64_t);
  va_end(ap);
  lt_tensor *t = NULL;
  lt_zeros(shape, ndim, dt, lt_cpu(), &t);
  return t;
}

#define CHECK_ERROR(call, text)                                                        \
  do {                                                                                 \
    lt_status check_st_ = (call);                                                      \
    CHECK(check_st_ != LT_OK);                                                         \
    if (check_st_ != LT_OK && !strstr(lt_last_error(), (text))) {                      \
      check_failures++;                                                                \
      fprintf(stderr, "%s:%d: error \"%s\" lacks \"%s\"\n", __FILE__, __LINE__,        \
              lt_last_error(), (text));                                                \
    }                                                                                  \
  } while (0)

static void test_errors(void) {
  lt_tensor *out = NULL, *idx = NULL, *lse = NULL;
  /* conv2d */
  lt_tensor *x3 = zeros(LT_FLOAT32, 3, (int64_t)3, (int64_t)28, (int64_t)28);
  lt_tensor *x4 = zeros(LT_FLOAT32, 4, (int64_t)2, (int64_t)3, (int64_t)28, (int64_t)28);
  lt_tensor *w1 = zeros(LT_FLOAT32, 4, (int64_t)8, (int64_t)1, (int64_t)3, (int64_t)3);
  lt_tensor *w64 = zeros(LT_FLOAT64, 4, (int64_t)8, (int64_t)3, (int64_t)3, (int64_t)3);
  lt_tensor *wbig = zeros(LT_FLOAT32, 4, (int64_t)8, (int64_t)3, (int64_t)30, (int64_t)3);
  lt_conv2d_opts o = lt_conv2d_default_opts();
  CHECK_ERROR(lt_conv2d(x3, w1, NULL, &o, &out),
              "conv2d: expected input with 4 dimensions [N, C, H, W], got [3, 28, 28]");
  CHECK_ERROR(lt_conv2d(x4, w1, NULL, &o, &out),
              "conv2d: input [2, 3, 28, 28] has 3 channels but weight [8, 1, 3, 3] expects 1 "
              "(groups 1)");
  CHECK_ERROR(lt_conv2d(x4, w64, NULL, &o, &out), "float64");
  CHECK_ERROR(lt_conv2d(x4, wbig, NULL, &o, &out), "smaller than the kernel 30 x 3");
  o.stride[0] = 0;
  CHECK_ERROR(lt_conv2d(x4, w1, NULL, &o, &out), "stride must be positive");
  CHECK(out == NULL);

  /* linear */
  lt_tensor *a = zeros(LT_FLOAT32, 2, (int64_t)2, (int64_t)5);
  lt_tensor *lw = zeros(LT_FLOAT32, 2, (int64_t)3, (int64_t)4);
  CHECK_ERROR(lt_linear(a, lw, NULL, &out), "linear: input [2, 5] has 5 features but weight [3, 4] expects 4");

  /* pooling */
  lt_pool2d_opts po = lt_pool2d_default_opts(3, 3);
  po.padding[0] = 2;
  CHECK_ERROR(lt_max_pool2d(x4, &po, &out, &idx), "padding should be between 0 and half");
  lt_tensor *tiny = zeros(LT_FLOAT32, 4, (int64_t)1, (int64_t)1, (int64_t)2, (int64_t)2);
  po = lt_pool2d_default_opts(3, 3);
  CHECK_ERROR(lt_avg_pool2d(tiny, &po, &out), "too small");
  CHECK_ERROR(lt_max_pool2d(a, &po, &out, &idx), "expected input with 3 or 4 dimensions");

  /* cross_entropy: 1-based labels */
  lt_tensor *logits = zeros(LT_FLOAT32, 2, (int64_t)3, (int64_t)10);
  const int64_t labels[3] = {1, 11, 10}, shape3 = 3;
  lt_tensor *target = NULL;
  lt_from_buffer(labels, LT_INT64, &shape3, 1, LT_INT64, lt_cpu(), &target);
  lt_class_loss_opts co = lt_class_loss_default_opts();
  co.index_base = 1;
  CHECK_ERROR(lt_cross_entropy(logits, target, NULL, &co, &out, &lse),
              "cross_entropy: target 11 is out of bounds for 10 classes (labels are 1 to 10)");
  co.index_base = 0;
  CHECK_ERROR(lt_nll_loss(logits, target, NULL, &co, &out),
              "nll_loss: target 11 is out of bounds for 10 classes (labels are 0 to 9)");
  lt_tensor *ftarget = zeros(LT_FLOAT32, 1, (int64_t)3);
  CHECK_ERROR(lt_cross_entropy(logits, ftarget, NULL, &co, &out, &lse), "int64");
  lt_tensor *short_target = zeros(LT_INT64, 1, (int64_t)2);
  CHECK_ERROR(lt_cross_entropy(logits, short_target, NULL, &co, &out, &lse),
              "expected target of shape [3] for input [3, 10], got [2]");
  co.label_smoothing = 1.5;
  CHECK_ERROR(lt_cross_entropy(logits, short_target, NULL, &co, &out, &lse), "label_smoothing");

  /* embedding: the index and n */
  lt_tensor *ew = zeros(LT_FLOAT32, 2, (int64_t)5, (int64_t)2);
  const int64_t bad[2] = {0, 5}, two = 2;
  lt_tensor *bad_idx = NULL;
  lt_from_buffer(bad, LT_INT64, &two, 1, LT_INT64, lt_cpu(), &bad_idx);
  lt_embedding_opts eo = {1, false, 0};
  CHECK_ERROR(lt_embedding(ew, bad_idx, &eo, &out), "index 0 is out of range for 5 embeddings");
  eo.index_base = 0;
  CHECK_ERROR(lt_embedding(ew, bad_idx, &eo, &out), "index 5 is out of range for 5 embeddings");

  /* batch_norm */
  lt_tensor *one = zeros(LT_FLOAT32, 2, (int64_t)1, (int64_t)3), *m = NULL, *s = NULL;
  CHECK_ERROR(lt_batch_norm(one, NULL, NULL, NULL, NULL, true, 0.1, 1e-5, &out, &m, &s),
              "expected more than 1 value per channel when training");
  CHECK_ERROR(lt_batch_norm(x4, NULL, NULL, NULL, NULL, false, 0.1, 1e-5, &out, &m, &s),
              "running_mean and running_var must be given");
  lt_tensor *rm4 = zeros(LT_FLOAT32, 1, (int64_t)4);
  CHECK_ERROR(lt_batch_norm(x4, rm4, NULL, NULL, NULL, true, 0.1, 1e-5, &out, &m, &s),
              "expected running_mean of shape [3], got [4]");

  /* layer_norm, softmax, mse, dropout */
  lt_tensor *lx = zeros(LT_FLOAT32, 3, (int64_t)2, (int64_t)3, (int64_t)5);
  const int64_t ns[1] = {4};
  CHECK_ERROR(lt_layer_norm(lx, ns, 1, NULL, NULL, 1e-5, &out, &m, &s),
              "layer_norm: input [2, 3, 5] does not end with normalized_shape [4]");
  CHECK_ERROR(lt_softmax(lx, 3, &out), "softmax");
  lt_tensor *mb = zeros(LT_FLOAT32, 1, (int64_t)4);
  CHECK_ERROR(lt_mse_loss(lx, mb, LT_REDUCTION_MEAN, &out), "mse_loss");
  CHECK_ERROR(lt_dropout(lx, 1.5, true, &out, &m), "between 0 and 1");
  lt_tensor *ints = zeros(LT_INT64, 1, (int64_t)4);
  CHECK_ERROR(lt_gelu(ints, LT_GELU_NONE, &out), "gelu: expected a floating point input, got int64");

  lt_tensor *all[] = {x3,     x4,     w1,       w64,          wbig, a,     lw,  tiny, logits,
                      target, ftarget, short_target, ew, bad_idx, one, rm4, lx,   mb,    ints};
  release_all(all, (int)(sizeof all / sizeof all[0]));
}

/* ---- behaviour beyond the fixture ---- */

/* float16/bfloat16 inputs compute in float32 and round once. */
static void test_half_precision(void) {
  lt_tensor *x = zeros(LT_FLOAT32, 4, (int64_t)2, (int64_t)3, (int64_t)6, (int64_t)6);
  lt_tensor *w = zeros(LT_FLOAT32, 4, (int64_t)4, (int64_t)3, (int64_t)3, (int64_t)3);
  lt_uniform_(x, -1, 1);
  lt_uniform_(w, -1, 1);
  const lt_dtype dts[2] = {LT_FLOAT16, LT_BFLOAT16};
  for (int i = 0; i < 2; i++) {
    lt_tensor *xh = NULL, *wh = NULL, *xr = NULL, *wr = NULL, *ref = NULL, *yh = NULL, *yr = NULL;
    lt_to_dtype(x, dts[i], false, &xh);
    lt_to_dtype(w, dts[i], false, &wh);
    lt_to_dtype(xh, LT_FLOAT32, false, &xr); /* the rounded inputs in float32 */
    lt_to_dtype(wh, LT_FLOAT32, false, &wr);
    lt_conv2d_opts o = lt_conv2d_default_opts();
    CHECK(lt_conv2d(xr, wr, NULL, &o, &ref) == LT_OK);
    CHECK(lt_conv2d(xh, wh, NULL, &o, &yh) == LT_OK);
    CHECK(yh && yh->dtype == dts[i]);
    lt_to_dtype(ref, dts[i], false, &yr); /* rounded once: bit-equal */
    double *a = values_of(yh), *b = values_of(yr);
    bool same = true;
    for (int64_t k = 0; k < lt_numel(yh); k++) same = same && a[k] == b[k];
    CHECK(same);
    free(a), free(b);
    lt_tensor *g = NULL, *ls = NULL;
    CHECK(lt_log_softmax(xh, 1, &ls) == LT_OK && ls->dtype == dts[i]);
    CHECK(lt_gelu(xh, LT_GELU_TANH, &g) == LT_OK && g->dtype == dts[i]);
    lt_tensor *ts[] = {xh, wh, xr, wr, ref, yh, yr, g, ls};
    release_all(ts, 9);
  }
  lt_tensor_release(x);
  lt_tensor_release(w);

  /* batch_norm on a float16 input updates float32 or float16 running
   * statistics in place (the latter through a float32 copy written back). */
  lt_tensor *bx = zeros(LT_FLOAT32, 2, (int64_t)6, (int64_t)2), *bh = NULL;
  lt_uniform_(bx, 1, 2);
  lt_to_dtype(bx, LT_FLOAT16, false, &bh);
  for (int k = 0; k < 2; k++) {
    const lt_dtype sdt = k == 0 ? LT_FLOAT32 : LT_FLOAT16;
    lt_tensor *rm = zeros(sdt, 1, (int64_t)2), *rv = zeros(sdt, 1, (int64_t)2);
    lt_tensor *out = NULL, *mean = NULL, *invstd = NULL, *gx = NULL;
    const uint64_t version = rm->storage->version;
    CHECK(lt_batch_norm(bh, rm, rv, NULL, NULL, true, 0.5, 1e-5, &out, &mean, &invstd) == LT_OK);
    CHECK(out && out->dtype == LT_FLOAT16 && mean && mean->dtype == LT_FLOAT32);
    CHECK(rm->storage->version > version);
    double *m = values_of(rm), *bm = values_of(mean);
    CHECK(m && bm && fabs(m[0] - 0.5 * bm[0]) < 1e-2 && m[0] > 0.4);
    free(m), free(bm);
    CHECK(lt_batch_norm_backward(out, bh, NULL, mean, invstd, true, true, false, false, &gx, NULL,
                                 NULL) == LT_OK);
    CHECK(gx && gx->dtype == LT_FLOAT16);
    lt_tensor *ts[] = {rm, rv, out, mean, invstd, gx};
    release_all(ts, 6);
  }
  lt_tensor_release(bx);
  lt_tensor_release(bh);
}

/* Dropout keeps about 1 - p of the elements, scales them by 1 / (1 - p), and
 * backward applies the same mask; eval passes the input through. */
static void test_dropout(void) {
  lt_tensor *x = NULL;
  const int64_t n = 10000;
  lt_full(&n, 1, 2.0, LT_FLOAT32, lt_cpu(), &x);
  lt_manual_seed(7);
  lt_tensor *out = NULL, *mask = NULL, *gx = NULL;
  CHECK(lt_dropout(x, 0.25, true, &out, &mask) == LT_OK);
  CHECK(mask && mask->dtype == LT_BOOL);
  CHECK(lt_dropout_backward(x, mask, 0.25, &gx) == LT_OK);
  double *v = values_of(out), *g = values_of(gx), *m = values_of(mask);
  int64_t kept = 0;
  bool consistent = true;
  for (int64_t i = 0; i < n; i++) {
    kept += m[i] != 0;
    const double expect = m[i] != 0 ? 2.0 / 0.75 : 0.0;
    consistent = consistent && fabs(v[i] - expect) < 1e-6 && fabs(g[i] - expect) < 1e-6;
  }
  CHECK(consistent);
  CHECK(kept > 7200 && kept < 7800);
  free(v), free(g), free(m);
  lt_tensor *same = NULL, *none = NULL;
  CHECK(lt_dropout(x, 0.25, false, &same, &none) == LT_OK);
  CHECK(none == NULL && same && same->storage == x->storage);
  lt_tensor *ts[] = {x, out, mask, gx, same};
  release_all(ts, 5);
}

/* A conv big enough to use several tasks and weight-gradient blocks gives
 * the same gradients with 1 and 2 threads. */
static void test_conv_threads(void) {
  lt_tensor *x = zeros(LT_FLOAT32, 4, (int64_t)9, (int64_t)4, (int64_t)12, (int64_t)12);
  lt_tensor *w = zeros(LT_FLOAT32, 4, (int64_t)6, (int64_t)4, (int64_t)3, (int64_t)3);
  lt_tensor *g = zeros(LT_FLOAT32, 4, (int64_t)9, (int64_t)6, (int64_t)12, (int64_t)12);
  lt_manual_seed(3);
  lt_normal_(x, 0, 1), lt_normal_(w, 0, 1), lt_normal_(g, 0, 1);
  lt_conv2d_opts o = lt_conv2d_default_opts();
  o.padding[0] = o.padding[1] = 1;
  results r[2] = {{0}, {0}};
  for (int t = 0; t < 2; t++) {
    lt_set_num_threads(t + 1);
    lt_tensor *out = NULL, *gx = NULL, *gw = NULL, *gb = NULL;
    CHECK(lt_conv2d(x, w, NULL, &o, &out) == LT_OK);
    CHECK(lt_conv2d_backward(g, x, w, &o, true, true, true, &gx, &gw, &gb) == LT_OK);
    keep(&r[t], "out", out), keep(&r[t], "gx", gx), keep(&r[t], "gw", gw), keep(&r[t], "gb", gb);
  }
  fx_case c = {.name = "conv_threads"};
  check_same(&c, &r[0], &r[1]);
  release_results(&r[0]);
  release_results(&r[1]);
  lt_tensor *ts[] = {x, w, g};
  release_all(ts, 3);
}

/* Empty batches give empty results (or PyTorch's NaN for an empty mean)
 * without touching memory they do not own. */
static void test_empty_inputs(void) {
  lt_tensor *x = zeros(LT_FLOAT32, 2, (int64_t)0, (int64_t)5);
  lt_tensor *w = zeros(LT_FLOAT32, 2, (int64_t)3, (int64_t)5), *b = zeros(LT_FLOAT32, 1, (int64_t)3);
  lt_tensor *out = NULL, *gx = NULL, *gw = NULL, *gb = NULL;
  CHECK(lt_linear(x, w, b, &out) == LT_OK && out->shape[0] == 0 && out->shape[1] == 3);
  CHECK(lt_linear_backward(out, x, w, true, true, true, &gx, &gw, &gb) == LT_OK);
  double *v = gw ? values_of(gw) : NULL;
  CHECK(v && v[0] == 0.0 && v[14] == 0.0);
  free(v);
  lt_tensor *ts[] = {out, gx, gw, gb};
  release_all(ts, 4);

  lt_tensor *img = zeros(LT_FLOAT32, 4, (int64_t)0, (int64_t)2, (int64_t)5, (int64_t)5);
  lt_tensor *cw = zeros(LT_FLOAT32, 4, (int64_t)3, (int64_t)2, (int64_t)3, (int64_t)3);
  lt_conv2d_opts o = lt_conv2d_default_opts();
  CHECK(lt_conv2d(img, cw, NULL, &o, &out) == LT_OK && out->shape[0] == 0 && out->shape[2] == 3);
  CHECK(lt_conv2d_backward(out, img, cw, &o, true, true, true, &gx, &gw, &gb) == LT_OK);
  lt_tensor *ts2[] = {out, gx, gw, gb};
  release_all(ts2, 4);

  lt_tensor *logits = zeros(LT_FLOAT32, 2, (int64_t)0, (int64_t)4);
  lt_tensor *target = zeros(LT_INT64, 1, (int64_t)0), *lse = NULL;
  lt_class_loss_opts co = lt_class_loss_default_opts();
  CHECK(lt_cross_entropy(logits, target, NULL, &co, &out, &lse) == LT_OK);
  double loss = 0;
  CHECK(out && lt_item(out, &loss) == LT_OK && isnan(loss));
  lt_tensor *sm = NULL;
  CHECK(lt_softmax(logits, 1, &sm) == LT_OK && lt_numel(sm) == 0);
  lt_tensor *ts3[] = {x, w, b, img, cw, logits, target, lse, out, sm};
  release_all(ts3, 10);
}

int main(void) {
  test_fixture_cases();
  test_errors();
  test_half_precision();
  test_dropout();
  test_conv_threads();
  test_empty_inputs();
  free_fixture();
  return check_summary("test_nn");
}
