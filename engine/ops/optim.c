/* Optimizer steps: validation, the step's scalars and dispatch to the
 * device's optimizer kernels. Checks name the optimizer and the values (and,
 * for the multi-tensor steps, the index); every check runs before any
 * kernel, so a refused call changes nothing. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "lt/alloc.h"
#include "ops/estimate_backend.h"
#include "core/optim_backend.h"
#include "ops/ops_internal.h"

static lt_status optim_backend(const char *name, lt_device dev, const lt_optim_backend **out) {
  const lt_optim_backend *b = lt_optim_backend_for(dev);
  if (!b) {
    char dn[16];
    return lt_error(LT_ERR_DEVICE, "%s: no optimizer kernels for device %s", name,
                    lt_device_name(dev, dn));
  }
  *out = b;
  return LT_OK;
}

static bool same_shape(const lt_tensor *a, const lt_tensor *b) {
  if (a->ndim != b->ndim) return false;
  for (int d = 0; d < a->ndim; d++)
    if (a->shape[d] != b->shape[d]) return false;
  return true;
}

static lt_status check_param(const char *name, const lt_tensor *param) {
  LT_TRY(ops_check_live(name, param));
  if (param->dtype != LT_FLOAT32 && param->dtype != LT_FLOAT64 && param->dtype != LT_FLOAT16 &&
      param->dtype != LT_BFLOAT16)
    return lt_error(LT_ERR_DTYPE, "%s: parameters must be floating point, got %s", name,
                    lt_dtype_name(param->dtype));
  if (!lt_is_contiguous(param))
    return lt_error(LT_ERR_ARG, "%s: the parameter must be contiguous", name);
  return LT_OK;
}

/* A tensor that must match the parameter exactly: the gradient or a state
 * buffer (what says which in messages). */
static lt_status check_like_param(const char *name, const char *what, const lt_tensor *param,
                                  const lt_tensor *t, bool need_contiguous) {
  LT_TRY(ops_check_live(name, t));
  if (!same_shape(param, t)) {
    char a[OPS_SHAPE_BUF], b[OPS_SHAPE_BUF];
    return lt_error(LT_ERR_SHAPE, "%s: %s has shape %s but the parameter has shape %s", name, what,
                    ops_shape_str(a, t->shape, t->ndim),
                    ops_shape_str(b, param->shape, param->ndim));
  }
  if (t->dtype != param->dtype)
    return lt_error(LT_ERR_DTYPE, "%s: %s has dtype %s but the parameter has dtype %s", name,
                    what, lt_dtype_name(t->dtype), lt_dtype_name(param->dtype));
  if (!lt_device_eq(t->storage->device, param->storage->device)) {
    char a[16], b[16];
    return lt_error(LT_ERR_DEVICE, "%s: %s is on %s but the parameter is on %s", name, what,
                    lt_device_name(t->storage->device, a),
                    lt_device_name(param->storage->device, b));
  }
  if (need_contiguous && !lt_is_contiguous(t))
    return lt_error(LT_ERR_ARG, "%s: %s must be contiguous", name, what);
  return LT_OK;
}

/* The tensors of a single step, written (the first nwritten) or read: no
 * written one may share memory with another operand. NULLs are skipped. */
static lt_status check_step_operands(const char *name, const lt_tensor *const *ts,
                                     const char *const *what, int n, int nwritten) {
  for (int i = 0; i < nwritten; i++)
    for (int j = 0; j < n; j++)
      if (i != j && ts[i] && ts[j]) LT_TRY(ops_check_disjoint(name, ts[i], what[i], ts[j], what[j]));
  return LT_OK;
}

static lt_status check_lr(const char *name, double lr) {
  if (!(lr >= 0.0)) return lt_error(LT_ERR_ARG, "%s: invalid learning rate: %g", name, lr);
  return LT_OK;
}

static lt_status check_weight_decay(const char *name, double wd) {
  if (!(wd >= 0.0)) return lt_error(LT_ERR_ARG, "%s: invalid weight_decay value: %g", name, wd);
  return LT_OK;
}

static lt_status check_sgd_options(const char *name, const lt_sgd_options *o) {
  LT_TRY(check_lr(name, o->lr));
  LT_TRY(check_weight_decay(name, o->weight_decay));
  if (!(o->momentum >= 0.0))
    return lt_error(LT_ERR_ARG, "%s: invalid momentum value: %g", name, o->momentum);
  if (!isfinite(o->dampening))
    return lt_error(LT_ERR_ARG, "%s: invalid dampening value: %g", name, o->dampening);
  if (o->nesterov && (o->momentum <= 0.0 || o->dampening != 0.0))
    return lt_error(LT_ERR_ARG,
                    "%s: nesterov momentum requires a momentum and zero dampening "
                    "(got momentum %g, dampening %g)",
                    name, o->momentum, o->dampening);
  return LT_OK;
}

/* The gradient as the kernels want it: contiguous (a copy when it is not). */
static lt_status contiguous_grad(const lt_tensor *grad, lt_tensor **out) {
  return lt_contiguous(grad, out);
}

lt_status lt_sgd_step_(const char *name, lt_tensor *param, const lt_tensor *grad,
                       lt_tensor *momentum_buffer, bool init_buffer, const lt_sgd_options *o) {
  if (!name) name = "SGD";
  LT_TRY(check_sgd_options(name, o));
  LT_TRY(check_param(name, param));
  LT_TRY(check_like_param(name, "the gradient", param, grad, false));
  if (o->momentum != 0.0 && !momentum_buffer)
    return lt_error(LT_ERR_ARG, "%s: momentum %g needs a momentum buffer", name, o->momentum);
  if (o->momentum == 0.0) momentum_buffer = NULL;
  if (momentum_buffer)
    LT_TRY(check_like_param(name, "the momentum buffer", param, momentum_buffer, true));
  const lt_tensor *operands[] = {param, momentum_buffer, grad};
  const char *const names[] = {"the parameter", "the momentum buffer", "the gradient"};
  LT_TRY(check_step_operands(name, operands, names, 3, 2));
  const lt_optim_backend *be = NULL;
  LT_TRY(optim_backend(name, param->storage->device, &be));
  lt_tensor *g;
  LT_TRY(contiguous_grad(grad, &g));
  lt_status st = be->sgd_many(1, &param, &g, momentum_buffer ? &momentum_buffer : NULL,
                              &init_buffer, o);
  lt_tensor_release(g);
  if (st != LT_OK) return st;
  ops_bump_version(param, "sgd_step_");
  if (momentum_buffer) ops_bump_version(momentum_buffer, "sgd_step_");
  return LT_OK;
}

static lt_status check_adam_options(const char *name, const lt_adam_options *o, int64_t step) {
  LT_TRY(check_lr(name, o->lr));
  LT_TRY(check_weight_decay(name, o->weight_decay));
  if (!(o->eps >= 0.0)) return lt_error(LT_ERR_ARG, "%s: invalid epsilon value: %g", name, o->eps);
  if (!(o->beta1 >= 0.0 && o->beta1 < 1.0))
    return lt_error(LT_ERR_ARG, "%s: invalid beta parameter at index 1: %g", name, o->beta1);
  if (!(o->beta2 >= 0.0 && o->beta2 < 1.0))
    return lt_error(LT_ERR_ARG, "%s: invalid beta parameter at index 2: %g", name, o->beta2);
  if (step < 1)
    return lt_error(LT_ERR_ARG, "%s: invalid step count %lld (steps count from 1)", name,
                    (long long)step);
  return LT_OK;
}

lt_status lt_adam_step_(const char *name, lt_tensor *param, const lt_tensor *grad,
                        lt_tensor *exp_avg, lt_tensor *exp_avg_sq, lt_tensor *max_exp_avg_sq,
                        int64_t step, const lt_adam_options *o) {
  if (!name) name = o->decoupled_weight_decay ? "AdamW" : "Adam";
  LT_TRY(check_adam_options(name, o, step));
  LT_TRY(check_param(name, param));
  LT_TRY(check_like_param(name, "the gradient", param, grad, false));
  LT_TRY(check_like_param(name, "exp_avg", param, exp_avg, true));
  LT_TRY(check_like_param(name, "exp_avg_sq", param, exp_avg_sq, true));
  if (o->amsgrad) {
    if (!max_exp_avg_sq)
      return lt_error(LT_ERR_ARG, "%s: amsgrad needs a max_exp_avg_sq buffer", name);
    LT_TRY(check_like_param(name, "max_exp_avg_sq", param, max_exp_avg_sq, true));
  } else {
    max_exp_avg_sq = NULL;
  }
  const lt_tensor *operands[] = {param, exp_avg, exp_avg_sq, max_exp_avg_sq, grad};
  const char *const names[] = {"the parameter", "exp_avg", "exp_avg_sq", "max_exp_avg_sq",
                               "the gradient"};
  LT_TRY(check_step_operands(name, operands, names, 5, 4));
  /* As torch.optim.Adam: Python floats (double) for the bias corrections. */
  lt_adam_scalars s;
  s.beta1 = o->beta1;
  s.beta2 = o->beta2;
  s.eps = o->eps;
  s.weight_decay = o->decoupled_weight_decay ? 0.0 : o->weight_decay;
  s.param_scale = o->decoupled_weight_decay ? 1.0 - o->lr * o->weight_decay : 1.0;
  s.step_size = o->lr / (1.0 - pow(o->beta1, (double)step));
  s.bias_correction2_sqrt = sqrt(1.0 - pow(o->beta2, (double)step));
  s.amsgrad = o->amsgrad;
  s.maximize = o->maximize;
  const lt_optim_backend *be = NULL;
  LT_TRY(optim_backend(name, param->storage->device, &be));
  lt_tensor *g;
  LT_TRY(contiguous_grad(grad, &g));
  lt_status st = be->adam_many(1, &param, &g, &exp_avg, &exp_avg_sq,
                               max_exp_avg_sq ? &max_exp_avg_sq : NULL, &s);
  lt_tensor_release(g);
  if (st != LT_OK) return st;
  ops_bump_version(param, "adam_step_");
  ops_bump_version(exp_avg, "adam_step_");
  ops_bump_version(exp_avg_sq, "adam_step_");
  if (max_exp_avg_sq) ops_bump_version(max_exp_avg_sq, "adam_step_");
  return LT_OK;
}

/* ---- multi-tensor steps ---- */

/* "SGD: parameter 3": the op name of index i in messages, counted from 1 as
 * Lua lists are. */
static const char *indexed(char *buf, size_t size, const char *name, const char *what,
                           int64_t i) {
  snprintf(buf, size, "%s: %s %lld", name, what, (long long)(i + 1));
  return buf;
}

#define WHO_BUF 160

static lt_status check_count(const char *name, int64_t n, const void *a, const void *b) {
  if (n < 1) return lt_error(LT_ERR_ARG, "%s: expected at least one tensor, got an empty list", name);
  if (!a || !b) return lt_error(LT_ERR_ARG, "%s: expected arrays of %lld tensors, got NULL", name,
                                (long long)n);
  return LT_OK;
}

/* One call runs on one device: t (index i) must be where index 0 is. */
static lt_status check_same_device(const char *name, const char *what, const lt_tensor *first,
                                   const lt_tensor *t, int64_t i) {
  if (lt_device_eq(t->storage->device, first->storage->device)) return LT_OK;
  char a[16], b[16];
  return lt_error(LT_ERR_DEVICE, "%s: %s %lld is on %s but %s 1 is on %s (one call takes one device)",
                  name, what, (long long)(i + 1), lt_device_name(t->storage->device, a), what,
                  lt_device_name(first->storage->device, b));
}

/* A written tensor's bytes in its storage, for the overlap check. */
typedef struct written {
  const lt_storage *storage;
  int64_t lo, hi; /* byte range [lo, hi) */
  int64_t index;
  const char *what;
} written;

static written written_of(const lt_tensor *t, int64_t index, const char *what) {
  const int64_t es = (int64_t)lt_dtype_size(t->dtype);
  int64_t lo = t->offset * es, hi = lo + es;
  for (int d = 0; d < t->ndim; d++) {
    const int64_t span = (t->shape[d] - 1) * t->stride[d] * es;
    if (span < 0) lo += span; else hi += span;
  }
  written w = {t->storage, lo, hi, index, what};
  return w;
}

static int written_cmp(const void *va, const void *vb) {
  const written *a = va, *b = vb;
  if (a->storage != b->storage) return (uintptr_t)a->storage < (uintptr_t)b->storage ? -1 : 1;
  if (a->lo != b->lo) return a->lo < b->lo ? -1 : 1;
  return (a->index > b->index) - (a->index < b->index);
}

/* Adds t (written by the step) to the list unless it is empty. */
static void add_written(written *list, int64_t *count, const lt_tensor *t, int64_t index,
                        const char *what) {
  if (t && lt_numel(t) > 0) list[(*count)++] = written_of(t, index, what);
}

/* "parameter 2 (its exp_avg)", or found_inf (index -1). */
static const char *written_label(char *buf, size_t size, const char *kind, const written *w) {
  if (w->index < 0) snprintf(buf, size, "%s", w->what);
  else snprintf(buf, size, "%s %lld (%s)", kind, (long long)(w->index + 1), w->what);
  return buf;
}

/* The tensors a step writes must not share memory: the kernels of one call
 * run in any order (in parallel on CUDA), so a repeated parameter would not
 * be updated twice as two single steps would update it. Sorts list. */
static lt_status check_disjoint(const char *name, const char *kind, written *list, int64_t count) {
  qsort(list, (size_t)count, sizeof *list, written_cmp);
  const written *reach = NULL; /* the range reaching furthest in the current storage */
  for (int64_t k = 0; k < count; k++) {
    const written *w = &list[k];
    if (reach && reach->storage == w->storage && w->lo < reach->hi) {
      const bool first = reach->index < w->index;
      char a[WHO_BUF], b[WHO_BUF];
      return lt_error(LT_ERR_ARG, "%s: %s and %s share memory", name,
                      written_label(a, sizeof a, kind, first ? w : reach),
                      written_label(b, sizeof b, kind, first ? reach : w));
    }
    if (!reach || reach->storage != w->storage || w->hi > reach->hi) reach = w;
  }
  return LT_OK;
}

/* The gradients are read while the list is written: none may share memory
 * with a written tensor, or the kernel would read what it already updated
 * (p.grad a view of another parameter). list is sorted and disjoint, as
 * check_disjoint leaves it, so one binary search per gradient finds the only
 * written range that could meet it. */
static lt_status check_reads_disjoint(const char *name, const char *kind, const written *list,
                                      int64_t count, lt_tensor *const *grads, int64_t n) {
  for (int64_t i = 0; i < n; i++) {
    if (lt_numel(grads[i]) == 0) continue;
    const written g = written_of(grads[i], i, "its gradient");
    int64_t a = 0, b = count; /* the first range not wholly before g */
    while (a < b) {
      const int64_t m = a + (b - a) / 2;
      const written *w = &list[m];
      const bool before = (uintptr_t)w->storage < (uintptr_t)g.storage ||
                          (w->storage == g.storage && w->hi <= g.lo);
      if (before) a = m + 1;
      else b = m;
    }
    if (a < count && list[a].storage == g.storage && list[a].lo < g.hi) {
      char x[WHO_BUF], y[WHO_BUF];
      return lt_error(LT_ERR_ARG, "%s: %s and %s share memory", name,
                      written_label(x, sizeof x, kind, &g), written_label(y, sizeof y, kind, &list[a]));
    }
  }
  return LT_OK;
}

/* Contiguous forms of grads[0..n) (references; released by release_all). */
static lt_status contiguous_all(lt_tensor *const *grads, int64_t n, lt_tensor **out) {
  for (int64_t i = 0; i < n; i++) {
    lt_status st = lt_contiguous(grads[i], &out[i]);
    if (st != LT_OK) {
      while (i-- > 0) lt_tensor_release(out[i]);
      return st;
    }
  }
  return LT_OK;
}

static void release_all(lt_tensor **ts, int64_t n) {
  for (int64_t i = 0; i < n; i++) lt_tensor_release(ts[i]);
}

static lt_status no_memory(const char *name) {
  return lt_error(LT_ERR_OOM, "%s: out of host memory for the step's tensor lists", name);
}

/* A call whose checks passed and whose temporaries exist: what its kernel
 * needs (see lt_sgd_step_calls_). */
typedef struct prepared {
  const lt_optim_backend *be;
  lt_tensor **g;       /* contiguous gradients (references) */
  bool *init;          /* SGD: which momentum buffers are new */
  lt_adam_scalars *s;  /* Adam: each parameter's scalars */
  double *clr;         /* Adagrad: each parameter's decayed learning rate */
} prepared;

static void prepared_free(prepared *p, int64_t n) {
  if (p->g) release_all(p->g, n);
  free(p->g);
  free(p->init);
  free(p->s);
  free(p->clr);
  p->g = NULL;
  p->init = NULL;
  p->s = NULL;
  p->clr = NULL;
}

/* Checks one SGD call and makes its temporaries; on an error nothing is kept. */
static lt_status sgd_prepare(const char *name, const lt_sgd_call *c, prepared *out) {
  const lt_sgd_options *o = &c->options;
  const int64_t n = c->n;
  LT_TRY(check_sgd_options(name, o));
  LT_TRY(check_count(name, n, c->params, c->grads));
  const bool momentum = o->momentum != 0.0;
  if (momentum && !c->momentum_buffers)
    return lt_error(LT_ERR_ARG, "%s: momentum %g needs momentum buffers", name, o->momentum);
  char who[WHO_BUF];
  for (int64_t i = 0; i < n; i++) {
    indexed(who, sizeof who, name, "parameter", i);
    LT_TRY(check_param(who, c->params[i]));
    LT_TRY(check_same_device(name, "parameter", c->params[0], c->params[i], i));
    LT_TRY(check_like_param(who, "the gradient", c->params[i], c->grads[i], false));
    if (!momentum) continue;
    if (!c->momentum_buffers[i])
      return lt_error(LT_ERR_ARG, "%s: momentum %g needs a momentum buffer", who, o->momentum);
    LT_TRY(check_like_param(who, "the momentum buffer", c->params[i], c->momentum_buffers[i],
                            true));
  }
  LT_TRY(optim_backend(name, c->params[0]->storage->device, &out->be));
  written *w = malloc((size_t)n * 2 * sizeof *w);
  lt_tensor **g = malloc((size_t)n * sizeof *g);
  bool *init = malloc((size_t)n * sizeof *init);
  lt_status st = w && g && init ? LT_OK : no_memory(name);
  if (st == LT_OK) {
    int64_t count = 0;
    for (int64_t i = 0; i < n; i++) {
      add_written(w, &count, c->params[i], i, "the parameter");
      if (momentum) add_written(w, &count, c->momentum_buffers[i], i, "its momentum buffer");
      init[i] = momentum && c->init_buffers && c->init_buffers[i];
    }
    st = check_disjoint(name, "parameter", w, count);
    if (st == LT_OK) st = check_reads_disjoint(name, "parameter", w, count, c->grads, n);
  }
  if (st == LT_OK) st = contiguous_all(c->grads, n, g);
  free(w);
  if (st != LT_OK) {
    free(g);
    free(init);
    return st;
  }
  out->g = g;
  out->init = init;
  return LT_OK;
}

/* Checks one Adam call and makes its temporaries; on an error nothing is kept. */
static lt_status adam_prepare(const char *name, const lt_adam_call *c, prepared *out) {
  const lt_adam_options *o = &c->options;
  const int64_t n = c->n;
  LT_TRY(check_adam_options(name, o, 1));
  LT_TRY(check_count(name, n, c->params, c->grads));
  if (!c->exp_avgs || !c->exp_avg_sqs || !c->steps)
    return lt_error(LT_ERR_ARG, "%s: expected exp_avg, exp_avg_sq and step lists, got NULL", name);
  if (o->amsgrad && !c->max_exp_avg_sqs)
    return lt_error(LT_ERR_ARG, "%s: amsgrad needs max_exp_avg_sq buffers", name);
  char who[WHO_BUF];
  for (int64_t i = 0; i < n; i++) {
    indexed(who, sizeof who, name, "parameter", i);
    if (c->steps[i] < 1)
      return lt_error(LT_ERR_ARG, "%s: invalid step count %lld (steps count from 1)", who,
                      (long long)c->steps[i]);
    LT_TRY(check_param(who, c->params[i]));
    LT_TRY(check_same_device(name, "parameter", c->params[0], c->params[i], i));
    LT_TRY(check_like_param(who, "the gradient", c->params[i], c->grads[i], false));
    LT_TRY(check_like_param(who, "exp_avg", c->params[i], c->exp_avgs[i], true));
    LT_TRY(check_like_param(who, "exp_avg_sq", c->params[i], c->exp_avg_sqs[i], true));
    if (!o->amsgrad) continue;
    if (!c->max_exp_avg_sqs[i])
      return lt_error(LT_ERR_ARG, "%s: amsgrad needs a max_exp_avg_sq buffer", who);
    LT_TRY(check_like_param(who, "max_exp_avg_sq", c->params[i], c->max_exp_avg_sqs[i], true));
  }
  LT_TRY(optim_backend(name, c->params[0]->storage->device, &out->be));
  written *w = malloc((size_t)n * 4 * sizeof *w);
  lt_tensor **g = malloc((size_t)n * sizeof *g);
  lt_adam_scalars *s = malloc((size_t)n * sizeof *s);
  lt_status st = w && g && s ? LT_OK : no_memory(name);
  if (st == LT_OK) {
    int64_t count = 0;
    for (int64_t i = 0; i < n; i++) {
      add_written(w, &count, c->params[i], i, "the parameter");
      add_written(w, &count, c->exp_avgs[i], i, "its exp_avg");
      add_written(w, &count, c->exp_avg_sqs[i], i, "its exp_avg_sq");
      if (o->amsgrad) add_written(w, &count, c->max_exp_avg_sqs[i], i, "its max_exp_avg_sq");
      /* The same double arithmetic as lt_adam_step_, per parameter. */
      const double step = (double)c->steps[i];
      s[i].beta1 = o->beta1;
      s[i].beta2 = o->beta2;
      s[i].eps = o->eps;
      s[i].weight_decay = o->decoupled_weight_decay ? 0.0 : o->weight_decay;
      s[i].param_scale = o->decoupled_weight_decay ? 1.0 - o->lr * o->weight_decay : 1.0;
      s[i].step_size = o->lr / (1.0 - pow(o->beta1, step));
      s[i].bias_correction2_sqrt = sqrt(1.0 - pow(o->beta2, step));
      s[i].amsgrad = o->amsgrad;
      s[i].maximize = o->maximize;
    }
    st = check_disjoint(name, "parameter", w, count);
    if (st == LT_OK) st = check_reads_disjoint(name, "parameter", w, count, c->grads, n);
  }
  if (st == LT_OK) st = contiguous_all(c->grads, n, g);
  free(w);
  if (st != LT_OK) {
    free(g);
    free(s);
    return st;
  }
  out->g = g;
  out->s = s;
  return LT_OK;
}

static lt_status check_calls(const char *name, int64_t ncalls, const void *calls) {
  if (ncalls < 1 || !calls)
    return lt_error(LT_ERR_ARG, "%s: expected at least one list of parameters, got %lld", name,
                    (long long)(calls ? ncalls : 0));
  return LT_OK;
}

/* What one kind of step brings to run_calls: how to prepare a call (every
 * check and temporary, no write) and how to run its kernel and bump the
 * versions of what it wrote. ctx is the step's own extra argument. */
typedef struct step_kind {
  size_t call_size;
  int64_t (*count)(const void *call); /* the call's tensors, for prepared_free */
  lt_status (*prepare)(const char *name, const void *call, prepared *out);
  lt_status (*run)(const void *call, const prepared *pre, const void *ctx);
} step_kind;

/* Every call is prepared before the first kernel runs: a check or an
 * allocation that fails in a later call leaves the earlier ones unstepped.
 * Only a kernel's own failure (a device error) can come after a write. */
static lt_status run_calls(const char *name, int64_t ncalls, const void *calls, const step_kind *kind,
                           const void *ctx) {
  LT_TRY(check_calls(name, ncalls, calls));
  prepared *pre = calloc((size_t)ncalls, sizeof *pre);
  if (!pre) return no_memory(name);
  const char *call = calls;
  int64_t ready = 0;
  lt_status st = LT_OK;
  while (ready < ncalls &&
         (st = kind->prepare(name, call + ready * kind->call_size, &pre[ready])) == LT_OK)
    ready++;
  for (int64_t k = 0; k < ncalls && st == LT_OK; k++)
    st = kind->run(call + k * kind->call_size, &pre[k], ctx);
  for (int64_t k = 0; k < ready; k++) prepared_free(&pre[k], kind->count(call + k * kind->call_size));
  free(pre);
  return st;
}

static int64_t sgd_count(const void *call) { return ((const lt_sgd_call *)call)->n; }
static lt_status sgd_prepare_any(const char *name, const void *call, prepared *out) {
  return sgd_prepare(name, call, out);
}
static lt_status sgd_run(const void *call, const prepared *pre, const void *ctx) {
  (void)ctx;
  const lt_sgd_call *c = call;
  const bool momentum = c->options.momentum != 0.0;
  LT_TRY(pre->be->sgd_many(c->n, c->params, pre->g, momentum ? c->momentum_buffers : NULL,
                           pre->init, &c->options));
  for (int64_t i = 0; i < c->n; i++) {
    ops_bump_version(c->params[i], "sgd_step_");
    if (momentum) ops_bump_version(c->momentum_buffers[i], "sgd_step_");
  }
  return LT_OK;
}
static const step_kind sgd_kind = {sizeof(lt_sgd_call), sgd_count, sgd_prepare_any, sgd_run};

lt_status lt_sgd_step_calls_(const char *name, int64_t ncalls, const lt_sgd_call *calls) {
  return run_calls(name ? name : "SGD", ncalls, calls, &sgd_kind, NULL);
}

static int64_t adam_count(const void *call) { return ((const lt_adam_call *)call)->n; }
static lt_status adam_prepare_any(const char *name, const void *call, prepared *out) {
  return adam_prepare(name, call, out);
}
static lt_status adam_run(const void *call, const prepared *pre, const void *ctx) {
  (void)ctx;
  const lt_adam_call *c = call;
  const bool amsgrad = c->options.amsgrad;
  LT_TRY(pre->be->adam_many(c->n, c->params, pre->g, c->exp_avgs, c->exp_avg_sqs,
                            amsgrad ? c->max_exp_avg_sqs : NULL, pre->s));
  for (int64_t i = 0; i < c->n; i++) {
    ops_bump_version(c->params[i], "adam_step_");
    ops_bump_version(c->exp_avgs[i], "adam_step_");
    ops_bump_version(c->exp_avg_sqs[i], "adam_step_");
    if (amsgrad) ops_bump_version(c->max_exp_avg_sqs[i], "adam_step_");
  }
  return LT_OK;
}
static const step_kind adam_kind = {sizeof(lt_adam_call), adam_count, adam_prepare_any, adam_run};

lt_status lt_adam_step_calls_(const char *name, int64_t ncalls, const lt_adam_call *calls) {
  if (!name) name = calls && ncalls > 0 && calls[0].options.decoupled_weight_decay ? "AdamW" : "Adam";
  return run_calls(name, ncalls, calls, &adam_kind, NULL);
}

lt_status lt_sgd_step_many_(const char *name, int64_t n, lt_tensor *const *params,
                            lt_tensor *const *grads, lt_tensor *const *momentum_buffers,
                            const bool *init_buffers, const lt_sgd_options *o) {
  lt_sgd_call c = {n, params, grads, momentum_buffers, init_buffers, *o};
  return lt_sgd_step_calls_(name, 1, &c);
}

lt_status lt_adam_step_many_(const char *name, int64_t n, lt_tensor *const *params,
                             lt_tensor *const *grads, lt_tensor *const *exp_avgs,
                             lt_tensor *const *exp_avg_sqs, lt_tensor *const *max_exp_avg_sqs,
                             const int64_t *steps, const lt_adam_options *o) {
  lt_adam_call c = {n, params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps, *o};
  return lt_adam_step_calls_(name, 1, &c);
}

/* ---- RMSprop and Adagrad ---- */

static lt_status check_eps(const char *name, double eps) {
  if (!(eps >= 0.0)) return lt_error(LT_ERR_ARG, "%s: invalid epsilon value: %g", name, eps);
  return LT_OK;
}

static lt_status check_rmsprop_options(const char *name, const lt_rmsprop_options *o) {
  LT_TRY(check_lr(name, o->lr));
  LT_TRY(check_eps(name, o->eps));
  if (!(o->momentum >= 0.0))
    return lt_error(LT_ERR_ARG, "%s: invalid momentum value: %g", name, o->momentum);
  LT_TRY(check_weight_decay(name, o->weight_decay));
  /* PyTorch only refuses alpha < 0; above 1 the average's weights change
   * sign, which is never meant, so lt refuses it too. */
  if (!(o->alpha >= 0.0 && o->alpha <= 1.0))
    return lt_error(LT_ERR_ARG, "%s: invalid alpha value: %g (expected a number in [0, 1])", name,
                    o->alpha);
  return LT_OK;
}

/* A state buffer of parameter i that must be there (the list and its entry),
 * checked like the parameter. */
static lt_status check_state(const char *name, const char *who, const char *what,
                             lt_tensor *const *list, int64_t i, const lt_tensor *param) {
  if (!list || !list[i])
    return lt_error(LT_ERR_ARG, "%s: expected a %s buffer, got NULL", list ? who : name, what);
  return check_like_param(who, what, param, list[i], true);
}

/* Checks one RMSprop call and makes its temporaries; on an error nothing is kept. */
static lt_status rmsprop_prepare(const char *name, const lt_rmsprop_call *c, prepared *out) {
  const lt_rmsprop_options *o = &c->options;
  const int64_t n = c->n;
  LT_TRY(check_rmsprop_options(name, o));
  LT_TRY(check_count(name, n, c->params, c->grads));
  const bool momentum = o->momentum != 0.0, centered = o->centered;
  char who[WHO_BUF];
  for (int64_t i = 0; i < n; i++) {
    indexed(who, sizeof who, name, "parameter", i);
    LT_TRY(check_param(who, c->params[i]));
    LT_TRY(check_same_device(name, "parameter", c->params[0], c->params[i], i));
    LT_TRY(check_like_param(who, "the gradient", c->params[i], c->grads[i], false));
    LT_TRY(check_state(name, who, "square_avg", c->square_avgs, i, c->params[i]));
    if (momentum)
      LT_TRY(check_state(name, who, "momentum_buffer", c->momentum_buffers, i, c->params[i]));
    if (centered) LT_TRY(check_state(name, who, "grad_avg", c->grad_avgs, i, c->params[i]));
  }
  LT_TRY(optim_backend(name, c->params[0]->storage->device, &out->be));
  written *w = malloc((size_t)n * 4 * sizeof *w);
  lt_tensor **g = malloc((size_t)n * sizeof *g);
  lt_status st = w && g ? LT_OK : no_memory(name);
  if (st == LT_OK) {
    int64_t count = 0;
    for (int64_t i = 0; i < n; i++) {
      add_written(w, &count, c->params[i], i, "the parameter");
      add_written(w, &count, c->square_avgs[i], i, "its square_avg");
      if (momentum) add_written(w, &count, c->momentum_buffers[i], i, "its momentum_buffer");
      if (centered) add_written(w, &count, c->grad_avgs[i], i, "its grad_avg");
    }
    st = check_disjoint(name, "parameter", w, count);
    if (st == LT_OK) st = check_reads_disjoint(name, "parameter", w, count, c->grads, n);
  }
  if (st == LT_OK) st = contiguous_all(c->grads, n, g);
  free(w);
  if (st != LT_OK) {
    free(g);
    return st;
  }
  out->g = g;
  return LT_OK;
}

static lt_status check_adagrad_options(const char *name, const lt_adagrad_options *o) {
  LT_TRY(check_lr(name, o->lr));
  if (!(o->lr_decay >= 0.0))
    return lt_error(LT_ERR_ARG, "%s: invalid lr_decay value: %g", name, o->lr_decay);
  LT_TRY(check_weight_decay(name, o->weight_decay));
  LT_TRY(check_eps(name, o->eps));
  return LT_OK;
}

/* Checks one Adagrad call and makes its temporaries; on an error nothing is kept. */
static lt_status adagrad_prepare(const char *name, const lt_adagrad_call *c, prepared *out) {
  const lt_adagrad_options *o = &c->options;
  const int64_t n = c->n;
  LT_TRY(check_adagrad_options(name, o));
  LT_TRY(check_count(name, n, c->params, c->grads));
  if (!c->sums || !c->steps)
    return lt_error(LT_ERR_ARG, "%s: expected sum and step lists, got NULL", name);
  char who[WHO_BUF];
  for (int64_t i = 0; i < n; i++) {
    indexed(who, sizeof who, name, "parameter", i);
    if (c->steps[i] < 1)
      return lt_error(LT_ERR_ARG, "%s: invalid step count %lld (steps count from 1)", who,
                      (long long)c->steps[i]);
    LT_TRY(check_param(who, c->params[i]));
    LT_TRY(check_same_device(name, "parameter", c->params[0], c->params[i], i));
    LT_TRY(check_like_param(who, "the gradient", c->params[i], c->grads[i], false));
    LT_TRY(check_state(name, who, "sum", c->sums, i, c->params[i]));
  }
  LT_TRY(optim_backend(name, c->params[0]->storage->device, &out->be));
  written *w = malloc((size_t)n * 2 * sizeof *w);
  lt_tensor **g = malloc((size_t)n * sizeof *g);
  double *clr = malloc((size_t)n * sizeof *clr);
  lt_status st = w && g && clr ? LT_OK : no_memory(name);
  if (st == LT_OK) {
    int64_t count = 0;
    for (int64_t i = 0; i < n; i++) {
      add_written(w, &count, c->params[i], i, "the parameter");
      add_written(w, &count, c->sums[i], i, "its sum");
      /* torch.optim.Adagrad's clr, in Python floats. */
      clr[i] = o->lr / (1.0 + (double)(c->steps[i] - 1) * o->lr_decay);
    }
    st = check_disjoint(name, "parameter", w, count);
    if (st == LT_OK) st = check_reads_disjoint(name, "parameter", w, count, c->grads, n);
  }
  if (st == LT_OK) st = contiguous_all(c->grads, n, g);
  free(w);
  if (st != LT_OK) {
    free(g);
    free(clr);
    return st;
  }
  out->g = g;
  out->clr = clr;
  return LT_OK;
}

static int64_t rmsprop_count(const void *call) { return ((const lt_rmsprop_call *)call)->n; }
static lt_status rmsprop_prepare_any(const char *name, const void *call, prepared *out) {
  return rmsprop_prepare(name, call, out);
}
static lt_status rmsprop_run(const void *call, const prepared *pre, const void *ctx) {
  (void)ctx;
  const lt_rmsprop_call *c = call;
  const bool momentum = c->options.momentum != 0.0, centered = c->options.centered;
  LT_TRY(pre->be->rmsprop_many(c->n, c->params, pre->g, c->square_avgs,
                               momentum ? c->momentum_buffers : NULL,
                               centered ? c->grad_avgs : NULL, &c->options));
  for (int64_t i = 0; i < c->n; i++) {
    ops_bump_version(c->params[i], "rmsprop_step_");
    ops_bump_version(c->square_avgs[i], "rmsprop_step_");
    if (momentum) ops_bump_version(c->momentum_buffers[i], "rmsprop_step_");
    if (centered) ops_bump_version(c->grad_avgs[i], "rmsprop_step_");
  }
  return LT_OK;
}
static const step_kind rmsprop_kind = {sizeof(lt_rmsprop_call), rmsprop_count, rmsprop_prepare_any,
                                       rmsprop_run};

lt_status lt_rmsprop_step_calls_(const char *name, int64_t ncalls, const lt_rmsprop_call *calls) {
  return run_calls(name ? name : "RMSprop", ncalls, calls, &rmsprop_kind, NULL);
}

static int64_t adagrad_count(const void *call) { return ((const lt_adagrad_call *)call)->n; }
static lt_status adagrad_prepare_any(const char *name, const void *call, prepared *out) {
  return adagrad_prepare(name, call, out);
}
static lt_status adagrad_run(const void *call, const prepared *pre, const void *ctx) {
  (void)ctx;
  const lt_adagrad_call *c = call;
  LT_TRY(pre->be->adagrad_many(c->n, c->params, pre->g, c->sums, pre->clr, &c->options));
  for (int64_t i = 0; i < c->n; i++) {
    ops_bump_version(c->params[i], "adagrad_step_");
    ops_bump_version(c->sums[i], "adagrad_step_");
  }
  return LT_OK;
}
static const step_kind adagrad_kind = {sizeof(lt_adagrad_call), adagrad_count, adagrad_prepare_any,
                                       adagrad_run};

lt_status lt_adagrad_step_calls_(const char *name, int64_t ncalls, const lt_adagrad_call *calls) {
  return run_calls(name ? name : "Adagrad", ncalls, calls, &adagrad_kind, NULL);
}

#define UNSCALE "unscale_many"

static bool is_float_dtype(lt_dtype dt) {
  return dt == LT_FLOAT32 || dt == LT_FLOAT64 || dt == LT_FLOAT16 || dt == LT_BFLOAT16;
}

/* Checks one unscale call and makes its contiguous gradients. */
static lt_status unscale_prepare(const lt_unscale_call *c, prepared *out) {
  const int64_t n = c->n;
  lt_tensor *const *grads = c->grads, *found_inf = c->found_inf;
  LT_TRY(check_count(UNSCALE, n, grads, grads));
  LT_TRY(ops_check_live(UNSCALE, found_inf));
  char who[WHO_BUF], dn[16];
  if (found_inf->dtype != LT_FLOAT32 || lt_numel(found_inf) != 1)
    return lt_error(LT_ERR_ARG,
                    UNSCALE ": found_inf must be a one-element float32 tensor, got %lld element%s "
                            "of %s",
                    (long long)lt_numel(found_inf), lt_numel(found_inf) == 1 ? "" : "s",
                    lt_dtype_name(found_inf->dtype));
  for (int64_t i = 0; i < n; i++) {
    indexed(who, sizeof who, UNSCALE, "gradient", i);
    LT_TRY(ops_check_live(who, grads[i]));
    if (!is_float_dtype(grads[i]->dtype))
      return lt_error(LT_ERR_DTYPE, "%s: gradients must be floating point, got %s", who,
                      lt_dtype_name(grads[i]->dtype));
    LT_TRY(check_same_device(UNSCALE, "gradient", grads[0], grads[i], i));
    LT_TRY(ops_check_writable(who, grads[i]));
  }
  if (!lt_device_eq(found_inf->storage->device, grads[0]->storage->device)) {
    char db[16];
    return lt_error(LT_ERR_DEVICE, UNSCALE ": found_inf is on %s but the gradients are on %s",
                    lt_device_name(found_inf->storage->device, dn),
                    lt_device_name(grads[0]->storage->device, db));
  }
  LT_TRY(optim_backend(UNSCALE, grads[0]->storage->device, &out->be));
  written *w = malloc((size_t)(n + 1) * sizeof *w);
  lt_tensor **g = malloc((size_t)n * sizeof *g);
  lt_status st = w && g ? LT_OK : no_memory(UNSCALE);
  if (st == LT_OK) {
    int64_t count = 0;
    for (int64_t i = 0; i < n; i++) add_written(w, &count, grads[i], i, "a gradient");
    add_written(w, &count, found_inf, -1, "found_inf");
    st = check_disjoint(UNSCALE, "gradient", w, count);
  }
  /* A strided gradient is unscaled in a contiguous copy that is copied back:
   * the kernels see contiguous tensors only. */
  if (st == LT_OK) st = contiguous_all(grads, n, g);
  free(w);
  if (st != LT_OK) {
    free(g);
    return st;
  }
  out->g = g;
  return LT_OK;
}

/* As the optimizer steps: every call is checked and its copies made before
 * the first gradient is written, so a failure leaves every gradient as it
 * was (none half unscaled). */
static int64_t unscale_count(const void *call) { return ((const lt_unscale_call *)call)->n; }
static lt_status unscale_prepare_any(const char *name, const void *call, prepared *out) {
  (void)name;
  return unscale_prepare(call, out);
}
static lt_status unscale_run(const void *call, const prepared *pre, const void *ctx) {
  const lt_unscale_call *c = call;
  LT_TRY(pre->be->unscale_many(c->n, pre->g, *(const float *)ctx, c->found_inf));
  for (int64_t i = 0; i < c->n; i++)
    if (pre->g[i] != c->grads[i]) LT_TRY(lt_copy_(c->grads[i], pre->g[i]));
  for (int64_t i = 0; i < c->n; i++) ops_bump_version(c->grads[i], "unscale_");
  ops_bump_version(c->found_inf, "unscale_");
  return LT_OK;
}
static const step_kind unscale_kind = {sizeof(lt_unscale_call), unscale_count, unscale_prepare_any,
                                       unscale_run};

lt_status lt_amp_unscale_calls_(int64_t ncalls, const lt_unscale_call *calls, float inv_scale) {
  return run_calls(UNSCALE, ncalls, calls, &unscale_kind, &inv_scale);
}

lt_status lt_amp_unscale_many_(int64_t n, lt_tensor *const *grads, lt_tensor *found_inf,
                               float inv_scale) {
  lt_unscale_call c = {n, grads, found_inf};
  return lt_amp_unscale_calls_(1, &c, inv_scale);
}
