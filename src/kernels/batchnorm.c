/* SPDX-License-Identifier: Apache-2.0 */
/* batchnorm.c - aten::native_batch_norm and native_batch_norm_backward.
 *
 * x [N, C, ...] is processed channel by channel (one task per channel, so per-channel sums do not
 * depend on the thread count). For a channel, the dims other than 1 are coalesced jointly for
 * every tensor involved (x, out / grad_out, grad_x) into rows of a unit of work; rows are moved
 * through small double blocks on the stack (converted from / rounded to each tensor's dtype), and
 * statistics are accumulated in double, two-pass (mean, then squared deviations) like ATen. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "kernels/cnn_util.h"
#include "kiln/kernels/conv.h"
#include "kiln/parallel.h"

#define BN_BLK 512




/* d[i] = p[i*st] for i < n. */
static void load_blk(const char* p, int64_t st, kiln_dtype_t dt, int64_t n, double* d) {
  switch (dt) {
    case KILN_DTYPE_F32: for (int64_t i = 0; i < n; i++) d[i] = ((const float*)p)[i * st]; break;
    case KILN_DTYPE_F64: for (int64_t i = 0; i < n; i++) d[i] = ((const double*)p)[i * st]; break;
    case KILN_DTYPE_F16:
      for (int64_t i = 0; i < n; i++) d[i] = kiln_f16_to_f32(((const uint16_t*)p)[i * st]);
      break;
    default:
      for (int64_t i = 0; i < n; i++) d[i] = kiln_bf16_to_f32(((const uint16_t*)p)[i * st]);
      break;
  }
}

/* p[i*st] = s[i] rounded to dt. */
static void store_blk(const double* s, int64_t n, kiln_dtype_t dt, char* p, int64_t st) {
  switch (dt) {
    case KILN_DTYPE_F32: for (int64_t i = 0; i < n; i++) ((float*)p)[i * st] = (float)s[i]; break;
    case KILN_DTYPE_F64: for (int64_t i = 0; i < n; i++) ((double*)p)[i * st] = s[i]; break;
    case KILN_DTYPE_F16:
      for (int64_t i = 0; i < n; i++) ((uint16_t*)p)[i * st] = kiln_f32_to_f16((float)s[i]);
      break;
    default:
      for (int64_t i = 0; i < n; i++) ((uint16_t*)p)[i * st] = kiln_f32_to_bf16((float)s[i]);
      break;
  }
}

/* ---- joint iteration over the non-channel dims --------------------------------------------- */

#define BN_MAXT 3

typedef struct bn_iter {
  int nt, nd;
  const kiln_tensor_t* t[BN_MAXT];
  int64_t shape[KILN_MAX_DIMS];
  int64_t st[BN_MAXT][KILN_MAX_DIMS];
  int64_t rows, inner, count; /* count = rows * inner elements per channel */
} bn_iter_t;

/* Coalesces dims {0, 2, 3, ...} of the nt tensors (all of one shape). */
static void bn_iter_init(bn_iter_t* it, const kiln_tensor_t* const* ts, int nt) {
  memset(it, 0, sizeof *it);
  it->nt = nt;
  for (int k = 0; k < nt; k++) it->t[k] = ts[k];
  const kiln_tensor_t* r = ts[0];
  for (int d = 0; d < r->ndim; d++) {
    if (d == 1 || r->shape[d] == 1) continue;
    int merge = it->nd > 0;
    for (int k = 0; merge && k < nt; k++)
      merge = it->st[k][it->nd - 1] == ts[k]->strides[d] * r->shape[d];
    if (merge) {
      it->shape[it->nd - 1] *= r->shape[d];
      for (int k = 0; k < nt; k++) it->st[k][it->nd - 1] = ts[k]->strides[d];
    } else {
      it->shape[it->nd] = r->shape[d];
      for (int k = 0; k < nt; k++) it->st[k][it->nd] = ts[k]->strides[d];
      it->nd++;
    }
  }
  if (it->nd == 0) it->shape[0] = 1, it->nd = 1;
  for (int d = 0; d < r->ndim; d++)
    if (d != 1 && r->shape[d] == 0) it->shape[0] = 0;
  it->inner = it->shape[it->nd - 1];
  it->rows = 1;
  for (int d = 0; d < it->nd - 1; d++) it->rows *= it->shape[d];
  it->count = it->rows * it->inner;
}

/* Byte pointer to row `row` of tensor k in channel c. */
static inline char* bn_row(const bn_iter_t* it, int k, int64_t c, int64_t row) {
  const kiln_tensor_t* t = it->t[k];
  int64_t off = c * t->strides[1];
  for (int d = it->nd - 2; d >= 0; d--) {
    off += (row % it->shape[d]) * it->st[k][d];
    row /= it->shape[d];
  }
  return (char*)t->data + off * (int64_t)kiln_dtype_size(t->dtype);
}

static inline int64_t bn_step(const bn_iter_t* it, int k) {
  return it->st[k][it->nd - 1];
}

/* ---- forward --------------------------------------------------------------------------------- */

typedef struct bn_ctx {
  bn_iter_t it;
  const kiln_tensor_t *w, *b, *rm, *rv, *sm, *si; /* parameters / stats, may be NULL */
  kiln_tensor_t *rmo, *rvo, *smo, *sio;           /* forward outputs */
  kiln_tensor_t *gw, *gb;                         /* backward outputs */
  int training, want_gx;
  double momentum, eps;
} bn_ctx_t;

static inline double pget(const kiln_tensor_t* t, int64_t c, double dflt) {
  if (t == NULL) return dflt;
  return ld_elem((const char*)t->data + c * t->strides[0] * (int64_t)kiln_dtype_size(t->dtype),
                 t->dtype);
}

static inline void pset(kiln_tensor_t* t, int64_t c, double v) {
  if (t != NULL)
    st_elem((char*)t->data + c * t->strides[0] * (int64_t)kiln_dtype_size(t->dtype), t->dtype, v);
}

/* Sum over channel c of tensor k of (v - shift)^pw, pw 1 or 2. */
static double bn_sum(const bn_iter_t* it, int k, int64_t c, double shift, int pw) {
  double blk[BN_BLK], s = 0.0;
  const kiln_dtype_t dt = it->t[k]->dtype;
  for (int64_t r = 0; r < it->rows; r++) {
    const char* p = bn_row(it, k, c, r);
    for (int64_t j = 0; j < it->inner; j += BN_BLK) {
      const int64_t n = it->inner - j < BN_BLK ? it->inner - j : BN_BLK;
      load_blk(p + j * bn_step(it, k) * (int64_t)kiln_dtype_size(dt), bn_step(it, k), dt, n, blk);
      if (pw == 1) for (int64_t i = 0; i < n; i++) s += blk[i];
      else for (int64_t i = 0; i < n; i++) s += (blk[i] - shift) * (blk[i] - shift);
    }
  }
  return s;
}

static void bn_fwd_range(void* vctx, int64_t begin, int64_t end, int tid) {
  (void)tid;
  const bn_ctx_t* cx = vctx;
  const bn_iter_t* it = &cx->it;
  double blk[BN_BLK];
  for (int64_t c = begin; c < end; c++) {
    double mean, invstd;
    if (cx->training) {
      const double n = (double)it->count;
      mean = bn_sum(it, 0, c, 0.0, 1) / n;
      const double vs = bn_sum(it, 0, c, mean, 2);
      invstd = 1.0 / sqrt(vs / n + cx->eps);
      pset(cx->smo, c, mean);
      pset(cx->sio, c, invstd);
      const double m = cx->momentum;
      if (cx->rmo) pset(cx->rmo, c, m * mean + (1.0 - m) * pget(cx->rmo, c, 0));
      if (cx->rvo) pset(cx->rvo, c, m * (vs / (n - 1.0)) + (1.0 - m) * pget(cx->rvo, c, 0));
    } else {
      mean = pget(cx->rm, c, 0.0);
      invstd = 1.0 / sqrt(pget(cx->rv, c, 1.0) + cx->eps);
    }
    const double alpha = invstd * pget(cx->w, c, 1.0);
    const double beta = pget(cx->b, c, 0.0) - mean * alpha;
    const kiln_dtype_t xd = it->t[0]->dtype, od = it->t[1]->dtype;
    const int64_t xes = (int64_t)kiln_dtype_size(xd), oes = (int64_t)kiln_dtype_size(od);
    for (int64_t r = 0; r < it->rows; r++) {
      const char* xp = bn_row(it, 0, c, r);
      char* op = bn_row(it, 1, c, r);
      for (int64_t j = 0; j < it->inner; j += BN_BLK) {
        const int64_t n = it->inner - j < BN_BLK ? it->inner - j : BN_BLK;
        load_blk(xp + j * bn_step(it, 0) * xes, bn_step(it, 0), xd, n, blk);
        for (int64_t i = 0; i < n; i++) blk[i] = blk[i] * alpha + beta;
        store_blk(blk, n, od, op + j * bn_step(it, 1) * oes, bn_step(it, 1));
      }
    }
  }
}

/* ---- backward -------------------------------------------------------------------------------- */

/* Tensors in it: 0 grad_out, 1 x, 2 grad_x (when wanted). */
static void bn_bwd_range(void* vctx, int64_t begin, int64_t end, int tid) {
  (void)tid;
  const bn_ctx_t* cx = vctx;
  const bn_iter_t* it = &cx->it;
  double gb[BN_BLK], xb[BN_BLK];
  const kiln_dtype_t gd = it->t[0]->dtype, xd = it->t[1]->dtype;
  const size_t ges = kiln_dtype_size(gd), xes = kiln_dtype_size(xd);
  for (int64_t c = begin; c < end; c++) {
    double mean, invstd;
    if (cx->training) {
      mean = pget(cx->sm, c, 0.0), invstd = pget(cx->si, c, 0.0);
    } else {
      mean = pget(cx->rm, c, 0.0), invstd = 1.0 / sqrt(pget(cx->rv, c, 1.0) + cx->eps);
    }
    double sum = 0.0, dot = 0.0;
    const int need_sums = cx->gw || cx->gb || (cx->want_gx && cx->training);
    for (int64_t r = 0; need_sums && r < it->rows; r++) {
      const char *gp = bn_row(it, 0, c, r), *xp = bn_row(it, 1, c, r);
      for (int64_t j = 0; j < it->inner; j += BN_BLK) {
        const int64_t n = it->inner - j < BN_BLK ? it->inner - j : BN_BLK;
        load_blk(gp + j * bn_step(it, 0) * (int64_t)ges, bn_step(it, 0), gd, n, gb);
        load_blk(xp + j * bn_step(it, 1) * (int64_t)xes, bn_step(it, 1), xd, n, xb);
        for (int64_t i = 0; i < n; i++) {
          sum += gb[i];
          dot += (xb[i] - mean) * gb[i];
        }
      }
    }
    pset(cx->gw, c, dot * invstd);
    pset(cx->gb, c, sum);
    if (!cx->want_gx) continue;
    const double w = pget(cx->w, c, 1.0), n_all = (double)it->count;
    const double k = cx->training ? dot * invstd * invstd / n_all : 0.0;
    const double gmean = cx->training ? sum / n_all : 0.0;
    const kiln_dtype_t od = it->t[2]->dtype;
    const size_t oes = kiln_dtype_size(od);
    for (int64_t r = 0; r < it->rows; r++) {
      const char *gp = bn_row(it, 0, c, r), *xp = bn_row(it, 1, c, r);
      char* op = bn_row(it, 2, c, r);
      for (int64_t j = 0; j < it->inner; j += BN_BLK) {
        const int64_t n = it->inner - j < BN_BLK ? it->inner - j : BN_BLK;
        load_blk(gp + j * bn_step(it, 0) * (int64_t)ges, bn_step(it, 0), gd, n, gb);
        if (cx->training) {
          load_blk(xp + j * bn_step(it, 1) * (int64_t)xes, bn_step(it, 1), xd, n, xb);
          for (int64_t i = 0; i < n; i++) gb[i] = (gb[i] - (xb[i] - mean) * k - gmean) * invstd * w;
        } else {
          for (int64_t i = 0; i < n; i++) gb[i] = gb[i] * invstd * w;
        }
        store_blk(gb, n, od, op + j * bn_step(it, 2) * (int64_t)oes, bn_step(it, 2));
      }
    }
  }
}

/* ---- validation ------------------------------------------------------------------------------ */

static kiln_status_t check_param(const char* fn, const char* name, const kiln_tensor_t* t,
                                 int64_t C) {
  char b[128];
  if (t == NULL) return KILN_OK;
  if (!kiln_dtype_is_float(t->dtype) || t->ndim != 1 || t->shape[0] != C)
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s: %s %s (%s), expected [%lld] floating", fn,
                      name, shp(t, b, sizeof b), kiln_dtype_name(t->dtype), (long long)C);
  return cnn_check_size(fn, name, t);
}

static kiln_status_t check_same(const char* fn, const char* name, const kiln_tensor_t* t,
                                const kiln_tensor_t* x) {
  char b1[128], b2[128];
  int ok = t != NULL && kiln_dtype_is_float(t->dtype) && t->ndim == x->ndim;
  for (int i = 0; ok && i < x->ndim; i++) ok = t->shape[i] == x->shape[i];
  if (!ok)
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s: %s %s, expected floating %s like x", fn,
                      name, t ? shp(t, b1, sizeof b1) : "NULL", shp(x, b2, sizeof b2));
  return cnn_check_size(fn, name, t);
}

static kiln_status_t check_x(const char* fn, const kiln_tensor_t* x) {
  char b[128];
  if (x == NULL) return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s: x is NULL", fn);
  if (!kiln_dtype_is_float(x->dtype) || x->ndim < 2)
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT,
                      "%s: x %s (%s), expected a floating [N, C, ...] tensor", fn,
                      shp(x, b, sizeof b), kiln_dtype_name(x->dtype));
  return cnn_check_size(fn, "x", x);
}

static int64_t grain_for(int64_t per_channel) {
  int64_t g = 32768 / (per_channel > 0 ? per_channel : 1);
  return g > 1 ? g : 1;
}

/* ---- entry points ---------------------------------------------------------------------------- */

/* Batch normalization forward (aten::native_batch_norm). */
kiln_status_t kiln_kernel_batch_norm(const kiln_tensor_t* x, const kiln_tensor_t* weight,
                                     const kiln_tensor_t* bias, kiln_tensor_t* running_mean,
                                     kiln_tensor_t* running_var, int training, double momentum,
                                     double eps, kiln_tensor_t* out, kiln_tensor_t* save_mean,
                                     kiln_tensor_t* save_invstd) {
  static const char* fn = "kiln_kernel_batch_norm";
  char b[128];
  KILN_RETURN_IF_ERROR(check_x(fn, x));
  const int64_t C = x->shape[1];
  KILN_RETURN_IF_ERROR(check_same(fn, "out", out, x));
  if (out->dtype != x->dtype)
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s: out dtype %s, expected x's %s", fn,
                      kiln_dtype_name(out->dtype), kiln_dtype_name(x->dtype));
  KILN_RETURN_IF_ERROR(check_param(fn, "weight", weight, C));
  KILN_RETURN_IF_ERROR(check_param(fn, "bias", bias, C));
  KILN_RETURN_IF_ERROR(check_param(fn, "running_mean", running_mean, C));
  KILN_RETURN_IF_ERROR(check_param(fn, "running_var", running_var, C));
  KILN_RETURN_IF_ERROR(check_param(fn, "save_mean", save_mean, C));
  KILN_RETURN_IF_ERROR(check_param(fn, "save_invstd", save_invstd, C));
  if (!training && (running_mean == NULL || running_var == NULL))
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT,
                      "%s: running_mean and running_var are required when not training", fn);
  bn_ctx_t cx;
  memset(&cx, 0, sizeof cx);
  const kiln_tensor_t* ts[2] = {x, out};
  bn_iter_init(&cx.it, ts, 2);
  if (training && (cx.it.count == 0 || C == 0))
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT,
                      "%s: input tensor must have at least one element, got %s", fn,
                      shp(x, b, sizeof b));
  cx.w = weight, cx.b = bias, cx.rm = running_mean, cx.rv = running_var;
  cx.rmo = training ? running_mean : NULL, cx.rvo = training ? running_var : NULL;
  cx.smo = training ? save_mean : NULL, cx.sio = training ? save_invstd : NULL;
  cx.training = training != 0, cx.momentum = momentum, cx.eps = eps;
  if (cx.it.count == 0) return KILN_OK;
  kiln_parallel_for(C, grain_for(cx.it.count * (training ? 3 : 1)), bn_fwd_range, &cx);
  return KILN_OK;
}

/* Batch normalization backward (aten::native_batch_norm_backward). */
kiln_status_t kiln_kernel_batch_norm_backward(const kiln_tensor_t* grad_out,
                                              const kiln_tensor_t* x, const kiln_tensor_t* weight,
                                              const kiln_tensor_t* running_mean,
                                              const kiln_tensor_t* running_var,
                                              const kiln_tensor_t* save_mean,
                                              const kiln_tensor_t* save_invstd, int training,
                                              double eps, kiln_tensor_t* grad_x,
                                              kiln_tensor_t* grad_w, kiln_tensor_t* grad_b) {
  static const char* fn = "kiln_kernel_batch_norm_backward";
  KILN_RETURN_IF_ERROR(check_x(fn, x));
  const int64_t C = x->shape[1];
  KILN_RETURN_IF_ERROR(check_same(fn, "grad_out", grad_out, x));
  if (grad_x) KILN_RETURN_IF_ERROR(check_same(fn, "grad_x", grad_x, x));
  KILN_RETURN_IF_ERROR(check_param(fn, "weight", weight, C));
  KILN_RETURN_IF_ERROR(check_param(fn, "running_mean", running_mean, C));
  KILN_RETURN_IF_ERROR(check_param(fn, "running_var", running_var, C));
  KILN_RETURN_IF_ERROR(check_param(fn, "save_mean", save_mean, C));
  KILN_RETURN_IF_ERROR(check_param(fn, "save_invstd", save_invstd, C));
  KILN_RETURN_IF_ERROR(check_param(fn, "grad_w", grad_w, C));
  KILN_RETURN_IF_ERROR(check_param(fn, "grad_b", grad_b, C));
  if (training && (save_mean == NULL || save_invstd == NULL))
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT,
                      "%s: save_mean and save_invstd are required when training", fn);
  if (!training && (running_mean == NULL || running_var == NULL))
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT,
                      "%s: running_mean and running_var are required when not training", fn);
  bn_ctx_t cx;
  memset(&cx, 0, sizeof cx);
  const kiln_tensor_t* ts[3] = {grad_out, x, grad_x};
  bn_iter_init(&cx.it, ts, grad_x ? 3 : 2);
  cx.w = weight, cx.rm = running_mean, cx.rv = running_var, cx.sm = save_mean,
  cx.si = save_invstd;
  cx.gw = grad_w, cx.gb = grad_b;
  cx.training = training != 0, cx.want_gx = grad_x != NULL, cx.eps = eps;
  kiln_parallel_for(C, grain_for(cx.it.count * 2), bn_bwd_range, &cx);
  return KILN_OK;
}
