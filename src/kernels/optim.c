/* SPDX-License-Identifier: Apache-2.0 */
/* optim.c - fused multi-tensor Adam/AdamW and SGD steps (torch._fused_adam(w)_, _fused_sgd_).
 *
 * Numerics follow ATen's CPU FusedAdamKernel / FusedSGDKernel as built for AVX2 (8 f32 lanes,
 * 16 for f16/bf16, 4 for f64): the same constants rounded the same way, fused multiply-adds
 * where that build contracts them, and the scalar-tail formula for the last numel % lanes
 * elements of each tensor (it differs from the vector one only in which product of exp_avg_sq /
 * the momentum buffer is fused). Contiguous
 * tensors run the AVX2 body (avx2/optim_avx2.c) or the scalar one; strided ones go element by
 * element through a cursor. All tensors of one call are cut into fixed chunks that the pool
 * shares, so small tensors do not each pay for a parallel launch. */
#include <math.h>
#include <stdlib.h>

#include "kernels/half.h"
#include "kiln/kernels/optim.h"
#include "kiln/parallel.h"
#include "runtime/checked.h"

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF /* every fused multiply-add below is an explicit fma() */
#endif

/* Constants / flags shared with avx2/optim_avx2.c (keep the two in sync).
 * Adam k[]: 0 decay (AdamW: float(1 - lr*wd); Adam: float(wd)), 1 lerp coefficient
 * (w = float(1 - beta1) if |w| < 0.5, else w - 1), 2 beta2, 3 1 - beta2, 4 sqrt(bc2), 5 eps,
 * 6 -lr/bc1, 7 grad_scale. SGD k[]: 0 wd, 1 momentum, 2 1 - dampening, 3 -lr, 4 grad_scale. */
#define OPT_MAXIMIZE 1u
#define OPT_WD 2u
#define OPT_ADAMW 4u       /* adam */
#define OPT_AMSGRAD 8u     /* adam */
#define OPT_SCALE 16u
#define OPT_LERP_SMALL 32u /* adam: m + w * (g - m), else g + (w - 1) * (g - m) */
#define OPT_MOMENTUM 4u    /* sgd */
#define OPT_FIRST 8u       /* sgd */
#define OPT_NESTEROV 32u   /* sgd */

#define OPT_CHUNK 8192 /* elements per work unit (a multiple of every lane count) */
#define OPT_BATCH 256  /* tensors per parallel launch */
#define OPT_MAX_OPS 5

void kiln_optim_adam_avx2(kiln_dtype_t dt, int64_t n, void* p, void* g, void* m, void* v,
                          void* vmax, const float* k, unsigned flags);
void kiln_optim_sgd_avx2(kiln_dtype_t dt, int64_t n, void* p, void* g, void* buf, const float* k,
                         unsigned flags);

static int use_avx2(void) {
  static int cached = -1;
  int v = __atomic_load_n(&cached, __ATOMIC_RELAXED);
  if (v < 0) {
    const char* env = getenv("KILN_DISABLE_AVX2");
    __builtin_cpu_init();
    /* every AVX2+FMA CPU also has F16C (and clang's builtin does not know "f16c") */
    v = (!env || env[0] == 0 || env[0] == '0') && __builtin_cpu_supports("avx2") &&
        __builtin_cpu_supports("fma");
    __atomic_store_n(&cached, v, __ATOMIC_RELAXED);
  }
  return v;
}

static int lanes(kiln_dtype_t dt) {
  return dt == KILN_DTYPE_F64 ? 4 : dt == KILN_DTYPE_F32 ? 8 : 16;
}

/* ---- scalar cores (values in registers; the caller loads and stores) ----------------------- */

/* One Adam element in float. tail selects torch's scalar-tail exp_avg_sq formula. */
static inline void adam_core_f(const float* k, unsigned fl, int tail, float* pp, float* gio,
                               float* mio, float* vio, float* mxio) {
  float g = *gio, p = *pp;
  if (fl & OPT_SCALE) {
    g = g / k[7];
    *gio = g;
  }
  if (fl & OPT_MAXIMIZE) g = -g;
  if (fl & OPT_WD) {
    if (fl & OPT_ADAMW)
      p = p * k[0];
    else
      g = fmaf(p, k[0], g);
  }
  float m = *mio;
  m = fmaf(k[1], g - m, (fl & OPT_LERP_SMALL) ? m : g);
  float v = *vio;
  const float cg = k[3] * g;
  if (tail) {
    const float cgg = cg * g;
    v = fmaf(v, k[2], cgg);
  } else {
    const float vb = v * k[2];
    v = fmaf(cg, g, vb);
  }
  float s = v;
  if (fl & OPT_AMSGRAD) {
    const float mx = *mxio;
    if (tail)
      s = mx < v ? v : mx; /* std::max */
    else
      s = (isnan(mx) || isnan(v)) ? NAN : (mx > v ? mx : v); /* Vectorized maximum */
    *mxio = s;
  }
  const float den = sqrtf(s) / k[4] + k[5];
  const float upd = (k[6] * m) / den;
  *pp = p + upd;
  *mio = m;
  *vio = v;
}

/* The same in double (f64 tensors); kd[] holds the double constants. */
static inline void adam_core_d(const double* k, unsigned fl, int tail, double* pp, double* gio,
                               double* mio, double* vio, double* mxio) {
  double g = *gio, p = *pp;
  if (fl & OPT_SCALE) {
    g = g / k[7];
    *gio = g;
  }
  if (fl & OPT_MAXIMIZE) g = -g;
  if (fl & OPT_WD) {
    if (fl & OPT_ADAMW)
      p = p * k[0];
    else
      g = fma(p, k[0], g);
  }
  double m = *mio;
  m = fma(k[1], g - m, (fl & OPT_LERP_SMALL) ? m : g);
  double v = *vio;
  const double cg = k[3] * g;
  if (tail) {
    const double cgg = cg * g;
    v = fma(v, k[2], cgg);
  } else {
    const double vb = v * k[2];
    v = fma(cg, g, vb);
  }
  double s = v;
  if (fl & OPT_AMSGRAD) {
    const double mx = *mxio;
    if (tail)
      s = mx < v ? v : mx;
    else
      s = (isnan(mx) || isnan(v)) ? NAN : (mx > v ? mx : v);
    *mxio = s;
  }
  const double den = sqrt(s) / k[4] + k[5];
  const double upd = (k[6] * m) / den;
  *pp = p + upd;
  *mio = m;
  *vio = v;
}

static inline void sgd_core_f(const float* k, unsigned fl, int tail, float* pp, float* gio,
                              float* bio) {
  float g = *gio;
  const float p = *pp;
  if (fl & OPT_SCALE) {
    g = g / k[4];
    *gio = g;
  }
  if (fl & OPT_MAXIMIZE) g = -g;
  if (fl & OPT_WD) g = fmaf(p, k[0], g);
  if (fl & OPT_MOMENTUM) {
    float b;
    if (fl & OPT_FIRST) {
      b = g;
    } else if (tail) { /* torch's scalar tail contracts the other product */
      const float gd = g * k[2];
      b = fmaf(*bio, k[1], gd);
    } else {
      const float bm = *bio * k[1];
      b = fmaf(k[2], g, bm);
    }
    *bio = b;
    g = (fl & OPT_NESTEROV) ? fmaf(b, k[1], g) : b;
  }
  *pp = fmaf(g, k[3], p);
}

static inline void sgd_core_d(const double* k, unsigned fl, int tail, double* pp, double* gio,
                              double* bio) {
  double g = *gio;
  const double p = *pp;
  if (fl & OPT_SCALE) {
    g = g / k[4];
    *gio = g;
  }
  if (fl & OPT_MAXIMIZE) g = -g;
  if (fl & OPT_WD) g = fma(p, k[0], g);
  if (fl & OPT_MOMENTUM) {
    double b;
    if (fl & OPT_FIRST) {
      b = g;
    } else if (tail) { /* torch's scalar tail contracts the other product */
      const double gd = g * k[2];
      b = fma(*bio, k[1], gd);
    } else {
      const double bm = *bio * k[1];
      b = fma(k[2], g, bm);
    }
    *bio = b;
    g = (fl & OPT_NESTEROV) ? fma(b, k[1], g) : b;
  }
  *pp = fma(g, k[3], p);
}

/* ---- element access ------------------------------------------------------------------------- */

static inline double ld(const char* p, kiln_dtype_t dt) {
  switch (dt) {
    case KILN_DTYPE_F32: return *(const float*)p;
    case KILN_DTYPE_F16: return kiln_f16_to_f32(*(const uint16_t*)p);
    case KILN_DTYPE_BF16: return kiln_bf16_to_f32(*(const uint16_t*)p);
    default: return *(const double*)p;
  }
}

static inline void st(char* p, kiln_dtype_t dt, double v) {
  switch (dt) {
    case KILN_DTYPE_F32: *(float*)p = (float)v; break;
    case KILN_DTYPE_F16: *(uint16_t*)p = kiln_f32_to_f16((float)v); break;
    case KILN_DTYPE_BF16: *(uint16_t*)p = kiln_f32_to_bf16((float)v); break;
    default: *(double*)p = v; break;
  }
}

/* ---- jobs ------------------------------------------------------------------------------------ */

typedef struct opt_job {
  int adam; /* 1 Adam/AdamW, 0 SGD */
  int nops; /* tensors per entry: p, g, (m, v, vmax) / (buf) */
  int avx2;
  kiln_tensor_t* const* lists[OPT_MAX_OPS];
  const double* steps;
  double lr, beta1, beta2, wd, eps, momentum, dampening;
  unsigned flags;
  double scale;
  int t0;                          /* first tensor of this batch */
  int64_t first_chunk[OPT_BATCH + 1]; /* prefix over the batch's tensors */
} opt_job_t;

/* Per-tensor constants in double (kd) and float (kf); returns the flags. */
static unsigned make_consts(const opt_job_t* j, int t, double kd[8], float kf[8]) {
  unsigned fl = j->flags;
  if (j->adam) {
    const double step = (double)(float)j->steps[t];
    const double bc1 = 1.0 - pow(j->beta1, step), bc2 = 1.0 - pow(j->beta2, step);
    const double w = 1.0 - j->beta1;
    const float wf = (float)w;
    kd[0] = (fl & OPT_ADAMW) ? 1.0 - j->lr * j->wd : j->wd;
    kd[2] = j->beta2;
    kd[3] = 1.0 - j->beta2;
    kd[4] = sqrt(bc2);
    kd[5] = j->eps;
    kd[6] = -(j->lr / bc1);
    kd[7] = j->scale;
    for (int i = 0; i < 8; i++) kf[i] = (float)kd[i];
    /* torch tests |w| < 0.5 in the tensor's precision and forms w - 1 in that precision */
    const int small_f = fabsf(wf) < 0.5f, small_d = fabs(w) < 0.5;
    kf[1] = small_f ? wf : wf - 1.0f;
    kd[1] = small_d ? w : w - 1.0;
    fl &= ~OPT_LERP_SMALL;
    if ((j->lists[0][t]->dtype == KILN_DTYPE_F64 ? small_d : small_f))
      fl |= OPT_LERP_SMALL;
  } else {
    kd[0] = j->wd;
    kd[1] = j->momentum;
    kd[2] = 1.0 - j->dampening;
    kd[3] = -j->lr;
    kd[4] = j->scale;
    kd[5] = kd[6] = kd[7] = 0.0;
    for (int i = 0; i < 8; i++) kf[i] = (float)kd[i];
  }
  return fl;
}

/* Elements [e0, e1) of entry t; element e is a tail element when e >= vec_end. */
static void run_range(const opt_job_t* j, int t, int64_t e0, int64_t e1) {
  kiln_tensor_t* ts[OPT_MAX_OPS];
  int contig = 1;
  for (int k = 0; k < j->nops; k++) {
    ts[k] = j->lists[k][t];
    contig = contig && kiln_tensor_is_contiguous(ts[k]);
  }
  const kiln_dtype_t dt = ts[0]->dtype;
  const int64_t n = kiln_tensor_numel(ts[0]);
  const int64_t vec_end = n - n % lanes(dt);
  double kd[8];
  float kf[8];
  const unsigned fl = make_consts(j, t, kd, kf);
  const int64_t es = (int64_t)kiln_dtype_size(dt);
  char* base[OPT_MAX_OPS] = {0};
  for (int k = 0; k < j->nops; k++) base[k] = ts[k]->data;
  int64_t e = e0;
  if (contig && j->avx2 && dt != KILN_DTYPE_F64 && e < vec_end) {
    const int64_t stop = e1 < vec_end ? e1 : vec_end;
    char* q[OPT_MAX_OPS] = {0};
    for (int k = 0; k < j->nops; k++) q[k] = base[k] + e * es;
    if (j->adam)
      kiln_optim_adam_avx2(dt, stop - e, q[0], q[1], q[2], q[3], q[4], kf, fl);
    else
      kiln_optim_sgd_avx2(dt, stop - e, q[0], q[1], q[2], kf, fl);
    e = stop;
  }
  if (e >= e1) return;
  /* Scalar path: a cursor walks every operand in logical order. */
  const int nd = ts[0]->ndim;
  int64_t idx[KILN_MAX_DIMS], off[OPT_MAX_OPS] = {0};
  int64_t rem = e;
  for (int d = nd - 1; d >= 0; d--) {
    const int64_t s = ts[0]->shape[d];
    idx[d] = rem % s;
    rem /= s;
    for (int k = 0; k < j->nops; k++) off[k] += idx[d] * ts[k]->strides[d];
  }
  for (; e < e1; e++) {
    char* q[OPT_MAX_OPS] = {0};
    for (int k = 0; k < j->nops; k++) q[k] = base[k] + (contig ? e : off[k]) * es;
    const int tail = e >= vec_end;
    if (dt == KILN_DTYPE_F64) {
      double* z = (double*)q[2];
      if (j->adam)
        adam_core_d(kd, fl, tail, (double*)q[0], (double*)q[1], z, (double*)q[3], (double*)q[4]);
      else
        sgd_core_d(kd, fl, tail, (double*)q[0], (double*)q[1], z);
    } else if (dt == KILN_DTYPE_F32) {
      float* z = (float*)q[2];
      if (j->adam)
        adam_core_f(kf, fl, tail, (float*)q[0], (float*)q[1], z, (float*)q[3], (float*)q[4]);
      else
        sgd_core_f(kf, fl, tail, (float*)q[0], (float*)q[1], z);
    } else {
      float x[OPT_MAX_OPS] = {0};
      for (int k = 0; k < j->nops; k++) x[k] = (float)ld(q[k], dt);
      if (j->adam)
        adam_core_f(kf, fl, tail, &x[0], &x[1], &x[2], &x[3], &x[4]);
      else
        sgd_core_f(kf, fl, tail, &x[0], &x[1], &x[2]);
      for (int k = 0; k < j->nops; k++)
        if (k != 1 || (fl & OPT_SCALE)) st(q[k], dt, x[k]);
    }
    if (!contig) {
      for (int d = nd - 1; d >= 0; d--) {
        for (int k = 0; k < j->nops; k++) off[k] += ts[k]->strides[d];
        if (++idx[d] < ts[0]->shape[d]) break;
        for (int k = 0; k < j->nops; k++) off[k] -= ts[k]->strides[d] * ts[0]->shape[d];
        idx[d] = 0;
      }
    }
  }
}

static void opt_worker(void* ctx, int64_t c0, int64_t c1, int tid) {
  (void)tid;
  const opt_job_t* j = ctx;
  int b = 0;
  for (int64_t c = c0; c < c1; c++) {
    while (j->first_chunk[b + 1] <= c) b++;
    const int t = j->t0 + b;
    const int64_t n = kiln_tensor_numel(j->lists[0][t]);
    const int64_t e0 = (c - j->first_chunk[b]) * OPT_CHUNK;
    run_range(j, t, e0, e0 + OPT_CHUNK < n ? e0 + OPT_CHUNK : n);
  }
}

static void opt_run(opt_job_t* j, int n_tensors) {
  j->avx2 = use_avx2();
  for (int t0 = 0; t0 < n_tensors; t0 += OPT_BATCH) {
    const int nb = n_tensors - t0 < OPT_BATCH ? n_tensors - t0 : OPT_BATCH;
    j->t0 = t0;
    j->first_chunk[0] = 0;
    for (int b = 0; b < nb; b++) {
      const int64_t n = kiln_tensor_numel(j->lists[0][t0 + b]);
      j->first_chunk[b + 1] = j->first_chunk[b] + (n + OPT_CHUNK - 1) / OPT_CHUNK;
    }
    if (j->first_chunk[nb] > 0) kiln_parallel_for(j->first_chunk[nb], 2, opt_worker, j);
  }
}

/* ---- validation ------------------------------------------------------------------------------ */

static kiln_status_t check_entry(const char* op, const char* const* names, int nops,
                                 kiln_tensor_t* const* const* lists, int t) {
  const kiln_tensor_t* p = lists[0][t];
  for (int k = 0; k < nops; k++) {
    const kiln_tensor_t* x = lists[k][t];
    if (!x) return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s: %s[%d] is NULL", op, names[k], t);
    if (x->ndim < 0 || x->ndim > KILN_MAX_DIMS)
      return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s: %s[%d] has rank %d (max %d)", op,
                        names[k], t, (int)x->ndim, KILN_MAX_DIMS);
    if (x->dtype != KILN_DTYPE_F32 && x->dtype != KILN_DTYPE_F16 && x->dtype != KILN_DTYPE_BF16 &&
        x->dtype != KILN_DTYPE_F64)
      return kiln_error(KILN_ERROR_INVALID_ARGUMENT,
                        "%s: %s[%d] must be f32, f16, bf16 or f64, got %s", op, names[k], t,
                        kiln_dtype_name(x->dtype));
    if (x->dtype != p->dtype)
      return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s: %s[%d] is %s but params[%d] is %s", op,
                        names[k], t, kiln_dtype_name(x->dtype), t, kiln_dtype_name(p->dtype));
    int same = x->ndim == p->ndim;
    for (int d = 0; same && d < p->ndim; d++) same = x->shape[d] == p->shape[d];
    if (!same)
      return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s: %s[%d] shape differs from params[%d]",
                        op, names[k], t, t);
    for (int d = 0; d < x->ndim; d++)
      if (x->shape[d] < 0)
        return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s: %s[%d] has a negative size", op,
                          names[k], t);
    if (!kiln_tensor_size_ok(x))
      return kiln_error(KILN_ERROR_INVALID_ARGUMENT,
                        "%s: %s[%d] is too large (limit 2^48 elements) or strided beyond int64", op,
                        names[k], t);
    if (!x->data && kiln_tensor_numel(x) > 0)
      return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s: %s[%d] has NULL data", op, names[k], t);
  }
  return KILN_OK;
}

static kiln_status_t check_lists(const char* op, int n_tensors, const char* const* names,
                                 int nops, kiln_tensor_t* const* const* lists) {
  if (n_tensors < 0)
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s: n_tensors = %d < 0", op, n_tensors);
  if (n_tensors == 0) return KILN_OK;
  for (int k = 0; k < nops; k++)
    if (!lists[k])
      return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s: %s list is NULL", op, names[k]);
  for (int t = 0; t < n_tensors; t++) KILN_RETURN_IF_ERROR(check_entry(op, names, nops, lists, t));
  return KILN_OK;
}

static kiln_status_t check_finite(const char* op, const char* name, double v) {
  if (isfinite(v)) return KILN_OK;
  return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s: %s must be finite, got %g", op, name, v);
}

/* ---- entry points ---------------------------------------------------------------------------- */

/* torch._fused_adam(w)_; see optim.h. */
kiln_status_t kiln_kernel_fused_adamw(int n_tensors, kiln_tensor_t* const* params,
                                      kiln_tensor_t* const* grads, kiln_tensor_t* const* exp_avgs,
                                      kiln_tensor_t* const* exp_avg_sqs,
                                      kiln_tensor_t* const* max_exp_avg_sqs, const double* steps,
                                      double lr, double beta1, double beta2, double weight_decay,
                                      double eps, int amsgrad, int maximize, int adamw,
                                      const float* grad_scale, const float* found_inf) {
  const char* op = adamw ? "fused_adamw" : "fused_adam";
  static const char* const names[] = {"params", "grads", "exp_avgs", "exp_avg_sqs",
                                      "max_exp_avg_sqs"};
  opt_job_t j = {0};
  j.adam = 1;
  j.nops = amsgrad ? 5 : 4;
  j.lists[0] = params;
  j.lists[1] = grads;
  j.lists[2] = exp_avgs;
  j.lists[3] = exp_avg_sqs;
  j.lists[4] = amsgrad ? max_exp_avg_sqs : NULL;
  KILN_RETURN_IF_ERROR(check_lists(op, n_tensors, names, j.nops, j.lists));
  if (n_tensors > 0 && !steps)
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s: steps is NULL", op);
  KILN_RETURN_IF_ERROR(check_finite(op, "lr", lr));
  KILN_RETURN_IF_ERROR(check_finite(op, "weight_decay", weight_decay));
  KILN_RETURN_IF_ERROR(check_finite(op, "eps", eps));
  if (!(beta1 >= 0.0 && beta1 < 1.0) || !(beta2 >= 0.0 && beta2 < 1.0))
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT,
                      "%s: betas must be in [0, 1), got (%g, %g)", op, beta1, beta2);
  for (int t = 0; t < n_tensors; t++)
    if (!isfinite(steps[t]))
      return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s: steps[%d] = %g is not finite", op, t,
                        steps[t]);
  if (found_inf && *found_inf == 1.0f) return KILN_OK;
  if (n_tensors == 0) return KILN_OK;
  j.steps = steps;
  j.lr = lr;
  j.beta1 = beta1;
  j.beta2 = beta2;
  j.wd = weight_decay;
  j.eps = eps;
  j.flags = (maximize ? OPT_MAXIMIZE : 0u) | (weight_decay != 0.0 ? OPT_WD : 0u) |
            (adamw ? OPT_ADAMW : 0u) | (amsgrad ? OPT_AMSGRAD : 0u) |
            (grad_scale ? OPT_SCALE : 0u);
  j.scale = grad_scale ? (double)*grad_scale : 1.0;
  opt_run(&j, n_tensors);
  return KILN_OK;
}

/* torch._fused_sgd_; see optim.h. */
kiln_status_t kiln_kernel_fused_sgd(int n_tensors, kiln_tensor_t* const* params,
                                    kiln_tensor_t* const* grads,
                                    kiln_tensor_t* const* momentum_buffers, double weight_decay,
                                    double momentum, double lr, double dampening, int nesterov,
                                    int maximize, int is_first_step, const float* grad_scale,
                                    const float* found_inf) {
  static const char* op = "fused_sgd";
  static const char* const names[] = {"params", "grads", "momentum_buffers"};
  opt_job_t j = {0};
  j.nops = momentum != 0.0 ? 3 : 2;
  j.lists[0] = params;
  j.lists[1] = grads;
  j.lists[2] = momentum != 0.0 ? momentum_buffers : NULL;
  KILN_RETURN_IF_ERROR(check_lists(op, n_tensors, names, j.nops, j.lists));
  KILN_RETURN_IF_ERROR(check_finite(op, "lr", lr));
  KILN_RETURN_IF_ERROR(check_finite(op, "weight_decay", weight_decay));
  KILN_RETURN_IF_ERROR(check_finite(op, "momentum", momentum));
  KILN_RETURN_IF_ERROR(check_finite(op, "dampening", dampening));
  if (nesterov && (momentum <= 0.0 || dampening != 0.0))
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT,
                      "%s: nesterov requires momentum > 0 and zero dampening", op);
  if (found_inf && *found_inf == 1.0f) return KILN_OK;
  if (n_tensors == 0) return KILN_OK;
  j.lr = lr;
  j.wd = weight_decay;
  j.momentum = momentum;
  j.dampening = dampening;
  j.flags = (maximize ? OPT_MAXIMIZE : 0u) | (weight_decay != 0.0 ? OPT_WD : 0u) |
            (momentum != 0.0 ? OPT_MOMENTUM : 0u) | (is_first_step ? OPT_FIRST : 0u) |
            (nesterov && momentum != 0.0 ? OPT_NESTEROV : 0u) | (grad_scale ? OPT_SCALE : 0u);
  j.scale = grad_scale ? (double)*grad_scale : 1.0;
  opt_run(&j, n_tensors);
  return KILN_OK;
}
