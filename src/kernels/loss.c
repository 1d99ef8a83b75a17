/* SPDX-License-Identifier: Apache-2.0 */
/* loss.c - negative log-likelihood loss (nll_loss / nll_loss2d), forward and backward.
 *
 * log_probs [C], [N,C] or [N,C,d1..dk] is seen as P = N*d1*..*dk positions (row-major over the
 * target's shape) times C classes. Targets are all validated before anything is written. Sums
 * (MEAN / SUM) are accumulated in double over fixed chunks of positions, combined in order. */
#include <math.h>
#include <string.h>

#include "kernels/nn_internal.h"
#include "kiln/allocator.h"
#include "kiln/kernels/nn.h"
#include "kiln/parallel.h"

#define NLL_CHUNK 8192

typedef struct nll_ctx {
  kiln_nn_view_t pos;  /* log_probs without the class dim: P rows of 1 */
  int64_t cstride;     /* class stride of log_probs (elements) */
  kiln_nn_view_t tgt;  /* target: P rows of 1 */
  kiln_nn_view_t wgt;  /* weight: 1 row of C */
  int has_w;
  int64_t P, C, ignore;
  int reduction;
  kiln_nn_view_t out;  /* NONE: P rows of 1 (forward out / backward grad_out) */
  double gscale;       /* backward: grad_out value (SUM/MEAN) */
  double* part;        /* forward MEAN/SUM: [nchunks][2] */
} nll_ctx_t;

static inline int64_t target_at(const nll_ctx_t* c, int64_t p) {
  return kiln_nn_index(c->tgt.base, c->tgt.dtype, kiln_nn_view_row(&c->tgt, p));
}

static inline double weight_at(const nll_ctx_t* c, int64_t t) {
  if (!c->has_w) return 1.0;
  return kiln_nn_get(c->wgt.base + kiln_nn_view_elem(&c->wgt, t) * c->wgt.esize, c->wgt.dtype);
}

static inline char* lp_at(const nll_ctx_t* c, int64_t p, int64_t t) {
  return c->pos.base + (kiln_nn_view_row(&c->pos, p) + t * c->cstride) * c->pos.esize;
}

static void nll_fwd_none(void* arg, int64_t p0, int64_t p1, int tid) {
  (void)tid;
  const nll_ctx_t* c = arg;
  for (int64_t p = p0; p < p1; p++) {
    const int64_t t = target_at(c, p);
    double v = 0.0;
    if (t != c->ignore) v = -weight_at(c, t) * kiln_nn_get(lp_at(c, p, t), c->pos.dtype);
    kiln_nn_set(c->out.base + kiln_nn_view_row(&c->out, p) * c->out.esize, c->out.dtype, v);
  }
}

static void nll_fwd_sum(void* arg, int64_t k0, int64_t k1, int tid) {
  (void)tid;
  const nll_ctx_t* c = arg;
  for (int64_t k = k0; k < k1; k++) {
    const int64_t pA = k * NLL_CHUNK, pB = pA + NLL_CHUNK < c->P ? pA + NLL_CHUNK : c->P;
    double s = 0, w = 0;
    for (int64_t p = pA; p < pB; p++) {
      const int64_t t = target_at(c, p);
      if (t == c->ignore) continue;
      const double wt = weight_at(c, t);
      s -= wt * kiln_nn_get(lp_at(c, p, t), c->pos.dtype);
      w += wt;
    }
    c->part[2 * k] = s;
    c->part[2 * k + 1] = w;
  }
}

static void nll_bwd(void* arg, int64_t p0, int64_t p1, int tid) {
  (void)tid;
  const nll_ctx_t* c = arg;
  for (int64_t p = p0; p < p1; p++) {
    const int64_t t = target_at(c, p);
    if (t == c->ignore) continue;
    double g = c->gscale;
    if (c->reduction == KILN_REDUCTION_NONE)
      g = kiln_nn_get(c->out.base + kiln_nn_view_row(&c->out, p) * c->out.esize, c->out.dtype);
    kiln_nn_set(lp_at(c, p, t), c->pos.dtype, -weight_at(c, t) * g);
  }
}

/* Validates log_probs / target / weight / reduction and fills the views. */
static kiln_status_t nll_setup(nll_ctx_t* c, const kiln_tensor_t* lp, const kiln_tensor_t* target,
                               const kiln_tensor_t* weight, int reduction, int64_t ignore_index,
                               const char* op) {
  memset(c, 0, sizeof(*c));
  KILN_RETURN_IF_ERROR(kiln_nn_check_float(lp, op, "log_probs"));
  KILN_RETURN_IF_ERROR(kiln_nn_check(target, op, "target"));
  if (target->dtype != KILN_DTYPE_I64 && target->dtype != KILN_DTYPE_I32)
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s: target must be i64 or i32, got %s", op,
                      kiln_dtype_name(target->dtype));
  if (reduction < KILN_REDUCTION_NONE || reduction > KILN_REDUCTION_SUM)
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s: reduction %d (0 none, 1 mean, 2 sum)", op,
                      reduction);
  if (lp->ndim < 1)
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s: log_probs must be [C], [N, C] or "
                      "[N, C, d1, ...], got rank 0", op);
  const int cdim = lp->ndim == 1 ? 0 : 1;
  /* log_probs without the class dim must equal target's shape. */
  kiln_tensor_t pos = *lp;
  for (int d = cdim; d + 1 < lp->ndim; d++) {
    pos.shape[d] = lp->shape[d + 1];
    pos.strides[d] = lp->strides[d + 1];
  }
  pos.ndim = lp->ndim - 1;
  if (!kiln_nn_same_shape(&pos, target))
    return kiln_nn_shape_error(op, "log_probs", lp, "target", target,
                               "do not match ([C] / [N, C, d...] needs target [] / [N, d...])");
  c->C = lp->shape[cdim];
  c->cstride = lp->strides[cdim];
  kiln_nn_view_init(&c->pos, &pos, 0);
  kiln_nn_view_init(&c->tgt, target, 0);
  c->P = kiln_tensor_numel(target);
  c->ignore = ignore_index;
  c->reduction = reduction;
  if (weight) {
    KILN_RETURN_IF_ERROR(kiln_nn_check_float(weight, op, "weight"));
    if (weight->ndim != 1 || weight->shape[0] != c->C)
      return kiln_nn_shape_error(op, "weight", weight, "log_probs", lp,
                                 "do not match (weight must be [C])");
    kiln_nn_view_init(&c->wgt, weight, 1u);
    c->has_w = 1;
  }
  for (int64_t p = 0; p < c->P; p++) {
    const int64_t t = target_at(c, p);
    if (t != ignore_index && (t < 0 || t >= c->C))
      return kiln_error(KILN_ERROR_OUT_OF_RANGE, "%s: Target %lld is out of bounds (C = %lld)", op,
                        (long long)t, (long long)c->C);
  }
  return KILN_OK;
}

static kiln_status_t check_scalar(const kiln_tensor_t* t, const char* op, const char* name) {
  KILN_RETURN_IF_ERROR(kiln_nn_check_float(t, op, name));
  if (kiln_tensor_numel(t) != 1) {
    char s[128];
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s: %s %s must have one element", op, name,
                      kiln_nn_shape_str(t, s, sizeof s));
  }
  return KILN_OK;
}

/* NONE-reduction per-position tensor: target's shape (any 1-element tensor for a rank-0 target). */
static kiln_status_t check_per_pos(const kiln_tensor_t* t, const kiln_tensor_t* target,
                                   const char* op, const char* name) {
  KILN_RETURN_IF_ERROR(kiln_nn_check_float(t, op, name));
  if (kiln_nn_same_shape(t, target) || (target->ndim == 0 && kiln_tensor_numel(t) == 1))
    return KILN_OK;
  return kiln_nn_shape_error(op, name, t, "target", target, "must have the same shape");
}

kiln_status_t kiln_kernel_nll_loss(const kiln_tensor_t* log_probs, const kiln_tensor_t* target,
                                   const kiln_tensor_t* weight, int reduction,
                                   int64_t ignore_index, kiln_tensor_t* out,
                                   kiln_tensor_t* total_weight) {
  const char* op = "kiln_kernel_nll_loss";
  nll_ctx_t c;
  if (reduction == KILN_REDUCTION_NONE)
    KILN_RETURN_IF_ERROR(check_per_pos(out, target, op, "out"));
  else
    KILN_RETURN_IF_ERROR(check_scalar(out, op, "out"));
  if (total_weight) KILN_RETURN_IF_ERROR(check_scalar(total_weight, op, "total_weight"));
  KILN_RETURN_IF_ERROR(nll_setup(&c, log_probs, target, weight, reduction, ignore_index, op));
  if (reduction == KILN_REDUCTION_NONE) {
    kiln_nn_view_init(&c.out, out, 0);
    kiln_parallel_for(c.P, kiln_nn_grain(16), nll_fwd_none, &c);
    if (total_weight) {
      double tw = 0; /* torch: the target's weight for a [C] input, else 0 */
      if (log_probs->ndim == 1 && c.P == 1) {
        const int64_t t = target_at(&c, 0);
        tw = t == ignore_index ? 0.0 : weight_at(&c, t);
      }
      kiln_nn_set(total_weight->data, total_weight->dtype, tw);
    }
    return KILN_OK;
  }
  const int64_t nchunks = (c.P + NLL_CHUNK - 1) / NLL_CHUNK;
  double stack[2 * 64];
  double* heap = NULL;
  c.part = stack;
  if (nchunks > 64) {
    heap = kiln_allocator_alloc(NULL, sizeof(double) * 2 * (size_t)nchunks, 64);
    if (heap == NULL)
      return kiln_error(KILN_ERROR_OUT_OF_MEMORY, "%s: cannot allocate scratch", op);
    c.part = heap;
  }
  kiln_parallel_for(nchunks, 1, nll_fwd_sum, &c);
  double s = 0, w = 0;
  for (int64_t k = 0; k < nchunks; k++) {
    s += c.part[2 * k];
    w += c.part[2 * k + 1];
  }
  kiln_allocator_free(NULL, heap);
  kiln_nn_set(out->data, out->dtype, reduction == KILN_REDUCTION_MEAN ? s / w : s);
  if (total_weight) kiln_nn_set(total_weight->data, total_weight->dtype, w);
  return KILN_OK;
}

/* The checks and setup shared by the two backwards: grad_in takes log_probs' shape (the views
 * are grad_in's, which the plain backward writes). */
static kiln_status_t nll_bwd_setup(nll_ctx_t* c, const kiln_tensor_t* grad_out,
                                   const kiln_tensor_t* log_probs, const kiln_tensor_t* target,
                                   const kiln_tensor_t* weight, int reduction,
                                   int64_t ignore_index, const kiln_tensor_t* total_weight,
                                   kiln_tensor_t* grad_in, const char* op) {
  KILN_RETURN_IF_ERROR(kiln_nn_check_float(grad_in, op, "grad_in"));
  KILN_RETURN_IF_ERROR(kiln_nn_check(log_probs, op, "log_probs"));
  if (!kiln_nn_same_shape(grad_in, log_probs))
    return kiln_nn_shape_error(op, "grad_in", grad_in, "log_probs", log_probs, "must match");
  if (reduction == KILN_REDUCTION_NONE)
    KILN_RETURN_IF_ERROR(check_per_pos(grad_out, target, op, "grad_out"));
  else
    KILN_RETURN_IF_ERROR(check_scalar(grad_out, op, "grad_out"));
  if (reduction == KILN_REDUCTION_MEAN) {
    if (total_weight == NULL)
      return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s: reduction mean needs total_weight", op);
    KILN_RETURN_IF_ERROR(check_scalar(total_weight, op, "total_weight"));
  }
  KILN_RETURN_IF_ERROR(nll_setup(c, grad_in, target, weight, reduction, ignore_index, op));
  if (reduction == KILN_REDUCTION_NONE) {
    kiln_nn_view_init(&c->out, grad_out, 0);
  } else {
    c->gscale = kiln_nn_get(grad_out->data, grad_out->dtype);
    if (reduction == KILN_REDUCTION_MEAN)
      c->gscale /= kiln_nn_get(total_weight->data, total_weight->dtype);
  }
  return KILN_OK;
}

kiln_status_t kiln_kernel_nll_loss_backward(const kiln_tensor_t* grad_out,
                                            const kiln_tensor_t* log_probs,
                                            const kiln_tensor_t* target,
                                            const kiln_tensor_t* weight, int reduction,
                                            int64_t ignore_index,
                                            const kiln_tensor_t* total_weight,
                                            kiln_tensor_t* grad_in) {
  nll_ctx_t c;
  KILN_RETURN_IF_ERROR(nll_bwd_setup(&c, grad_out, log_probs, target, weight, reduction, ignore_index,
                                     total_weight, grad_in, "kiln_kernel_nll_loss_backward"));
  kiln_nn_zero(grad_in);
  kiln_parallel_for(c.P, kiln_nn_grain(16), nll_bwd, &c);
  return KILN_OK;
}

/* Fused with the log_softmax backward: one row per position. */
typedef struct nll_lsm_ctx {
  const nll_ctx_t* nll;
  kiln_nn_view_t y, gi; /* log_probs and grad_in as rows of C */
  kiln_nn_scratch_t scratch;
} nll_lsm_ctx_t;

static void nll_lsm_rows(void* arg, int64_t p0, int64_t p1, int tid) {
  const nll_lsm_ctx_t* f = arg;
  const nll_ctx_t* c = f->nll;
  const kiln_nn_ops_t* ops = kiln_nn_ops();
  _Alignas(64) char stack[KILN_NN_STACK_BYTES];
  char* buf = kiln_nn_scratch_get(&f->scratch, tid, stack);
  const int64_t n = c->C;
  float* g = (float*)buf;
  float* yb = (float*)(buf + kiln_nn_align(sizeof(float) * (size_t)n));
  for (int64_t p = p0; p < p1; p++) {
    /* the row nll_loss_backward writes (a float store of the double product), then
     * kiln_kernel_softmax_backward's log arithmetic on it */
    memset(g, 0, sizeof(float) * (size_t)n);
    const int64_t t = target_at(c, p);
    if (t != c->ignore) {
      double gs = c->gscale;
      if (c->reduction == KILN_REDUCTION_NONE)
        gs = kiln_nn_get(c->out.base + kiln_nn_view_row(&c->out, p) * c->out.esize, c->out.dtype);
      g[t] = (float)(-weight_at(c, t) * gs);
    }
    const float* y = kiln_nn_row_in(&f->y, p, 0, n, yb);
    float* gi = kiln_nn_row_out(&f->gi, p, 0, g);
    ops->log_softmax_bwd(g, y, ops->sum(g, n), gi, n);
    kiln_nn_row_commit(&f->gi, p, 0, n, gi);
  }
}

kiln_status_t kiln_kernel_nll_log_softmax_backward(const kiln_tensor_t* grad_out,
                                                   const kiln_tensor_t* log_probs,
                                                   const kiln_tensor_t* target,
                                                   const kiln_tensor_t* weight, int reduction,
                                                   int64_t ignore_index,
                                                   const kiln_tensor_t* total_weight,
                                                   kiln_tensor_t* grad_in) {
  const char* op = "kiln_kernel_nll_log_softmax_backward";
  if (log_probs == NULL || grad_in == NULL)
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s: NULL log_probs or grad_in", op);
  if (log_probs->ndim < 1 || log_probs->ndim > 2 || log_probs->dtype != KILN_DTYPE_F32 ||
      grad_in->dtype != KILN_DTYPE_F32)
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT,
                      "%s: needs f32 log_probs and grad_in of rank 1 or 2 (classes last), got %s "
                      "rank %d and %s", op, kiln_dtype_name(log_probs->dtype), (int)log_probs->ndim,
                      kiln_dtype_name(grad_in->dtype));
  nll_ctx_t c;
  KILN_RETURN_IF_ERROR(nll_bwd_setup(&c, grad_out, log_probs, target, weight, reduction, ignore_index,
                                     total_weight, grad_in, op));
  if (kiln_tensor_numel(grad_in) == 0) return KILN_OK;
  nll_lsm_ctx_t f;
  f.nll = &c;
  const uint32_t mask = 1u << (log_probs->ndim - 1);
  kiln_nn_view_init(&f.y, log_probs, mask);
  kiln_nn_view_init(&f.gi, grad_in, mask);
  KILN_RETURN_IF_ERROR(kiln_nn_scratch_init(&f.scratch, 2 * kiln_nn_align(sizeof(float) * (size_t)c.C), op));
  kiln_parallel_for(c.P, kiln_nn_grain(c.C * 4), nll_lsm_rows, &f);
  kiln_nn_scratch_free(&f.scratch);
  return KILN_OK;
}
