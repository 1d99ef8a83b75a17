/* SPDX-License-Identifier: Apache-2.0 */
/* norm.c - layer norm and RMS norm, forward and backward.
 *
 * x is viewed as M rows of N = prod(x.shape[-nd:]) elements. Forward and grad_x work row by row
 * (one thread per row, f32 rows used in place, others converted into per-thread scratch). The
 * parameter gradients are column sums over rows: fixed blocks of NORM_RB rows x NORM_CW columns
 * are summed (in f32) by one task each, then the row blocks are added in order in double, so the
 * result does not depend on the thread count. f64 inputs run the same algorithms in double. */
#include <math.h>
#include <string.h>

#include "kernels/nn_internal.h"
#include "kiln/allocator.h"
#include "kiln/kernels/nn.h"
#include "kiln/parallel.h"

#define NORM_RB 256 /* rows per parameter-gradient block */
#define NORM_CW 512 /* columns per parameter-gradient block */
#define NORM_PARAM_STACK 8192

typedef struct norm_ctx {
  kiln_nn_view_t x, o, g;    /* x, out (forward) or grad_x (backward), grad_out */
  kiln_nn_view_t mean, rstd; /* M scalars in row-major order */
  int has_mean, has_rstd, has_o;
  const float* w;  /* dense f32 weight or NULL */
  const float* b;  /* dense f32 bias or NULL */
  const double* wd; /* f64 path */
  const double* bd;
  int rms, f64;
  double eps;
  int64_t M, N;
  kiln_nn_scratch_t scratch;
  /* parameter gradients */
  int want_w, want_b;
  int64_t nrb, ncb;
  void* part; /* [nrb][2][N] floats (f32 path) or doubles (f64 path) */
} norm_ctx_t;

static inline char* scalar_ptr(const kiln_nn_view_t* v, int64_t row) {
  return v->base + kiln_nn_view_row(v, row) * v->esize;
}

/* ---- parameters ------------------------------------------------------------------------------ */

/* Parameter storage: f32 (or f64) dense copies of weight/bias unless they can be used in place. */
typedef struct params {
  _Alignas(64) char stack[NORM_PARAM_STACK];
  void* heap;
} params_t;

static kiln_status_t load_params(norm_ctx_t* c, params_t* p, const kiln_tensor_t* w,
                                 const kiln_tensor_t* b, const char* op) {
  const size_t esz = c->f64 ? sizeof(double) : sizeof(float);
  const size_t one = kiln_nn_align(esz * (size_t)c->N);
  const int nw = w != NULL, nb = b != NULL;
  p->heap = NULL;
  char* mem = p->stack;
  if ((size_t)(nw + nb) * one > NORM_PARAM_STACK) {
    p->heap = kiln_allocator_alloc(NULL, (size_t)(nw + nb) * one, 64);
    if (p->heap == NULL)
      return kiln_error(KILN_ERROR_OUT_OF_MEMORY, "%s: cannot allocate %zu bytes for parameters",
                        op, (size_t)(nw + nb) * one);
    mem = p->heap;
  }
  const kiln_tensor_t* ts[2] = {w, b};
  for (int i = 0; i < 2; i++) {
    const kiln_tensor_t* t = ts[i];
    if (t == NULL) continue;
    kiln_nn_view_t v;
    kiln_nn_view_init(&v, t, t->ndim ? (1u << t->ndim) - 1u : 0u);
    if (c->f64) {
      double* d = (double*)mem;
      kiln_nn_row_in_f64(&v, 0, d);
      if (i == 0) c->wd = d; else c->bd = d;
    } else {
      const float* f = kiln_nn_row_in(&v, 0, 0, c->N, (float*)mem);
      if (i == 0) c->w = f; else c->b = f;
    }
    mem += one;
  }
  return KILN_OK;
}

/* ---- validation ------------------------------------------------------------------------------ */

static kiln_status_t check_param(const kiln_tensor_t* x, int nd, const kiln_tensor_t* p,
                                 const char* op, const char* name) {
  KILN_RETURN_IF_ERROR(kiln_nn_check_float(p, op, name));
  int ok = p->ndim == nd;
  for (int d = 0; ok && d < nd; d++) ok = p->shape[d] == x->shape[x->ndim - nd + d];
  if (!ok) {
    char sx[128], sp[128];
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT,
                      "%s: %s %s must have the normalized shape (last %d dims of x %s)", op, name,
                      kiln_nn_shape_str(p, sp, sizeof sp), nd, kiln_nn_shape_str(x, sx, sizeof sx));
  }
  return KILN_OK;
}

static kiln_status_t check_stat(const kiln_tensor_t* t, int64_t M, const kiln_tensor_t* x,
                                const char* op, const char* name) {
  KILN_RETURN_IF_ERROR(kiln_nn_check_float(t, op, name));
  if (kiln_tensor_numel(t) != M) {
    char st[128], sx[128];
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT,
                      "%s: %s %s must have %lld elements (one per row of x %s)", op, name,
                      kiln_nn_shape_str(t, st, sizeof st), (long long)M,
                      kiln_nn_shape_str(x, sx, sizeof sx));
  }
  return KILN_OK;
}

/* Checks x / normalized_ndim and fills M, N and the row views of x. */
static kiln_status_t init_common(norm_ctx_t* c, const kiln_tensor_t* x, int nd, const char* op) {
  memset(c, 0, sizeof(*c));
  KILN_RETURN_IF_ERROR(kiln_nn_check_float(x, op, "x"));
  if (nd < 1 || nd > x->ndim)
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT,
                      "%s: normalized_ndim %d must be in [1, %d] (rank of x)", op, nd,
                      (int)x->ndim);
  const uint32_t inner = ((1u << x->ndim) - 1u) & ~((1u << (x->ndim - nd)) - 1u);
  kiln_nn_view_init(&c->x, x, inner);
  c->M = c->x.rows;
  c->N = c->x.n;
  c->f64 = x->dtype == KILN_DTYPE_F64;
  return KILN_OK;
}

static uint32_t inner_mask(const kiln_tensor_t* x, int nd) {
  return ((1u << x->ndim) - 1u) & ~((1u << (x->ndim - nd)) - 1u);
}

/* ---- forward --------------------------------------------------------------------------------- */

static void norm_fwd_rows(void* arg, int64_t r0, int64_t r1, int tid) {
  const norm_ctx_t* c = arg;
  _Alignas(64) char stack[KILN_NN_STACK_BYTES];
  void* buf = kiln_nn_scratch_get(&c->scratch, tid, stack);
  const int64_t N = c->N;
  for (int64_t r = r0; r < r1; r++) {
    double mean_d = 0, rstd_d;
    if (c->f64) {
      double* x = buf;
      kiln_nn_row_in_f64(&c->x, r, x);
      double var = 0;
      if (c->rms) {
        for (int64_t i = 0; i < N; i++) var += x[i] * x[i];
        var /= (double)N;
      } else {
        for (int64_t i = 0; i < N; i++) mean_d += x[i];
        mean_d /= (double)N;
        for (int64_t i = 0; i < N; i++) var += (x[i] - mean_d) * (x[i] - mean_d);
        var /= (double)N;
      }
      rstd_d = N == 0 ? NAN : 1.0 / sqrt((var > 0 ? var : 0) + c->eps);
      if (N == 0) mean_d = 0;
      for (int64_t i = 0; i < N; i++) {
        double y = (x[i] - mean_d) * rstd_d;
        if (c->wd) y *= c->wd[i];
        if (c->bd) y += c->bd[i];
        x[i] = y;
      }
      kiln_nn_row_out_f64(&c->o, r, x);
    } else {
      const kiln_nn_ops_t* ops = kiln_nn_ops();
      const float* x = kiln_nn_row_in(&c->x, r, 0, N, buf);
      float mean = 0, var;
      if (c->rms)
        var = ops->sumsq(x, N) / (float)N;
      else
        ops->moments(x, N, &mean, &var);
      float rstd = 1.0f / sqrtf((var > 0 ? var : 0) + (float)c->eps);
      if (N == 0) { /* torch: mean 0, rstd NaN */
        mean = 0;
        rstd = NAN;
      }
      float* y = kiln_nn_row_out(&c->o, r, 0, buf);
      ops->norm_apply(x, N, mean, rstd, c->w, c->b, y);
      kiln_nn_row_commit(&c->o, r, 0, N, y);
      mean_d = mean;
      rstd_d = rstd;
    }
    if (c->has_mean) kiln_nn_set(scalar_ptr(&c->mean, r), c->mean.dtype, mean_d);
    if (c->has_rstd) kiln_nn_set(scalar_ptr(&c->rstd, r), c->rstd.dtype, rstd_d);
  }
}

static kiln_status_t norm_forward(norm_ctx_t* c, const kiln_tensor_t* x, int nd,
                                  const kiln_tensor_t* weight, const kiln_tensor_t* bias,
                                  kiln_tensor_t* out, kiln_tensor_t* mean_out,
                                  kiln_tensor_t* rstd_out, const char* op) {
  KILN_RETURN_IF_ERROR(kiln_nn_check_float(out, op, "out"));
  if (!kiln_nn_same_shape(x, out)) return kiln_nn_shape_error(op, "x", x, "out", out, "must match");
  if (weight) KILN_RETURN_IF_ERROR(check_param(x, nd, weight, op, "weight"));
  if (bias) KILN_RETURN_IF_ERROR(check_param(x, nd, bias, op, "bias"));
  if (mean_out) KILN_RETURN_IF_ERROR(check_stat(mean_out, c->M, x, op, "mean"));
  if (rstd_out) KILN_RETURN_IF_ERROR(check_stat(rstd_out, c->M, x, op, "rstd"));
  if (c->M == 0) return KILN_OK;
  kiln_nn_view_init(&c->o, out, inner_mask(x, nd));
  if (mean_out) kiln_nn_view_init(&c->mean, mean_out, 0);
  if (rstd_out) kiln_nn_view_init(&c->rstd, rstd_out, 0);
  c->has_mean = mean_out != NULL;
  c->has_rstd = rstd_out != NULL;
  params_t p;
  KILN_RETURN_IF_ERROR(load_params(c, &p, weight, bias, op));
  const size_t esz = c->f64 ? sizeof(double) : sizeof(float);
  kiln_status_t s = kiln_nn_scratch_init(&c->scratch, esz * (size_t)c->N, op);
  if (s == KILN_OK) {
    kiln_parallel_for(c->M, kiln_nn_grain(c->N * 2), norm_fwd_rows, c);
    kiln_nn_scratch_free(&c->scratch);
  }
  kiln_allocator_free(NULL, p.heap);
  return s;
}

kiln_status_t kiln_kernel_layer_norm(const kiln_tensor_t* x, int normalized_ndim,
                                     const kiln_tensor_t* weight, const kiln_tensor_t* bias,
                                     double eps, kiln_tensor_t* out, kiln_tensor_t* mean_out,
                                     kiln_tensor_t* rstd_out) {
  const char* op = "kiln_kernel_layer_norm";
  norm_ctx_t c;
  KILN_RETURN_IF_ERROR(init_common(&c, x, normalized_ndim, op));
  c.eps = eps;
  return norm_forward(&c, x, normalized_ndim, weight, bias, out, mean_out, rstd_out, op);
}

kiln_status_t kiln_kernel_rms_norm(const kiln_tensor_t* x, int normalized_ndim,
                                   const kiln_tensor_t* weight, double eps, kiln_tensor_t* out,
                                   kiln_tensor_t* rstd_out) {
  const char* op = "kiln_kernel_rms_norm";
  norm_ctx_t c;
  KILN_RETURN_IF_ERROR(init_common(&c, x, normalized_ndim, op));
  c.rms = 1;
  /* torch's default eps is finfo of the opmath dtype: f32's for f32/f16/bf16. */
  c.eps = (eps >= 0) ? eps : (c.f64 ? 2.220446049250313e-16 : 1.1920928955078125e-07);
  return norm_forward(&c, x, normalized_ndim, weight, NULL, out, NULL, rstd_out, op);
}

/* ---- backward: grad_x ------------------------------------------------------------------------ */

static void norm_bwd_rows(void* arg, int64_t r0, int64_t r1, int tid) {
  const norm_ctx_t* c = arg;
  _Alignas(64) char stack[KILN_NN_STACK_BYTES];
  char* buf = kiln_nn_scratch_get(&c->scratch, tid, stack);
  const int64_t N = c->N;
  const size_t esz = c->f64 ? sizeof(double) : sizeof(float);
  char* buf2 = buf + kiln_nn_align(esz * (size_t)N);
  for (int64_t r = r0; r < r1; r++) {
    const double mean = c->rms ? 0.0 : kiln_nn_get(scalar_ptr(&c->mean, r), c->mean.dtype);
    const double rstd = kiln_nn_get(scalar_ptr(&c->rstd, r), c->rstd.dtype);
    if (c->f64) {
      double* g = (double*)buf;
      double* x = (double*)buf2;
      kiln_nn_row_in_f64(&c->g, r, g);
      kiln_nn_row_in_f64(&c->x, r, x);
      double s1 = 0, s2 = 0;
      for (int64_t i = 0; i < N; i++) {
        const double gw = c->wd ? g[i] * c->wd[i] : g[i];
        s1 += gw;
        s2 += gw * (x[i] - mean) * rstd;
      }
      const double a = c->rms ? 0.0 : s1 / (double)N;
      const double b = s2 / (double)N;
      for (int64_t i = 0; i < N; i++) {
        const double gw = c->wd ? g[i] * c->wd[i] : g[i];
        g[i] = rstd * (gw - a - (x[i] - mean) * rstd * b);
      }
      kiln_nn_row_out_f64(&c->o, r, g);
    } else {
      const kiln_nn_ops_t* ops = kiln_nn_ops();
      const float* g = kiln_nn_row_in(&c->g, r, 0, N, (float*)buf);
      const float* x = kiln_nn_row_in(&c->x, r, 0, N, (float*)buf2);
      const float m = (float)mean, rs = (float)rstd;
      float s1, s2;
      ops->norm_bwd_sums(g, x, c->w, N, m, rs, &s1, &s2);
      const float a = c->rms ? 0.0f : s1 / (float)N;
      const float b = s2 / (float)N;
      float* dx = kiln_nn_row_out(&c->o, r, 0, (float*)buf);
      ops->norm_bwd_apply(g, x, c->w, N, m, rs, a, b, dx);
      kiln_nn_row_commit(&c->o, r, 0, N, dx);
    }
  }
}

/* ---- backward: parameter gradients ----------------------------------------------------------- */

/* Task t = (row block, column block): partial sums of g*xhat (and g) over the block's rows. */
static void norm_wgrad_tasks(void* arg, int64_t t0, int64_t t1, int tid) {
  (void)tid;
  const norm_ctx_t* c = arg;
  const int64_t N = c->N;
  _Alignas(64) float gb[NORM_CW], xb[NORM_CW];
  for (int64_t t = t0; t < t1; t++) {
    const int64_t rb = t / c->ncb, cb = t % c->ncb;
    const int64_t rA = rb * NORM_RB, rB = rA + NORM_RB < c->M ? rA + NORM_RB : c->M;
    const int64_t cA = cb * NORM_CW, cB = cA + NORM_CW < N ? cA + NORM_CW : N, w = cB - cA;
    if (c->f64) {
      double* aw = (double*)c->part + (size_t)rb * 2 * (size_t)N + (size_t)cA;
      double* ab = aw + N;
      for (int64_t i = 0; i < w; i++) aw[i] = ab[i] = 0;
      for (int64_t r = rA; r < rB; r++) {
        const double mean = c->rms ? 0.0 : kiln_nn_get(scalar_ptr(&c->mean, r), c->mean.dtype);
        const double rstd = kiln_nn_get(scalar_ptr(&c->rstd, r), c->rstd.dtype);
        const int64_t go = kiln_nn_view_row(&c->g, r), xo = kiln_nn_view_row(&c->x, r);
        for (int64_t i = 0; i < w; i++) {
          const int64_t e = cA + i;
          const double g = kiln_nn_get(c->g.base + (go + kiln_nn_view_elem(&c->g, e)) * c->g.esize, c->g.dtype);
          const double x = kiln_nn_get(c->x.base + (xo + kiln_nn_view_elem(&c->x, e)) * c->x.esize, c->x.dtype);
          aw[i] += g * (x - mean) * rstd;
          ab[i] += g;
        }
      }
    } else {
      const kiln_nn_ops_t* ops = kiln_nn_ops();
      float* aw = (float*)c->part + (size_t)rb * 2 * (size_t)N + (size_t)cA;
      float* ab = aw + N;
      memset(aw, 0, sizeof(float) * (size_t)w);
      memset(ab, 0, sizeof(float) * (size_t)w);
      for (int64_t r = rA; r < rB; r++) {
        const float mean = c->rms ? 0.0f : kiln_nn_getf(scalar_ptr(&c->mean, r), c->mean.dtype);
        const float rstd = kiln_nn_getf(scalar_ptr(&c->rstd, r), c->rstd.dtype);
        const float* g = kiln_nn_row_in(&c->g, r, cA, cB, gb);
        const float* x = kiln_nn_row_in(&c->x, r, cA, cB, xb);
        ops->norm_wgrad_acc(g, x, w, mean, rstd, aw, c->want_b ? ab : NULL);
      }
    }
  }
}

static void store_param_grad(const norm_ctx_t* c, kiln_tensor_t* dst, int which) {
  kiln_nn_view_t v;
  kiln_nn_view_init(&v, dst, dst->ndim ? (1u << dst->ndim) - 1u : 0u);
  const size_t N = (size_t)c->N;
  for (int64_t i = 0; i < c->N; i++) {
    double s = 0;
    for (int64_t rb = 0; rb < c->nrb; rb++) {
      const size_t at = (size_t)rb * 2 * N + (size_t)which * N + (size_t)i;
      s += c->f64 ? ((const double*)c->part)[at] : (double)((const float*)c->part)[at];
    }
    kiln_nn_set(v.base + kiln_nn_view_elem(&v, i) * v.esize, v.dtype, s);
  }
}

static kiln_status_t norm_backward(norm_ctx_t* c, const kiln_tensor_t* grad_out,
                                   const kiln_tensor_t* x, const kiln_tensor_t* mean,
                                   const kiln_tensor_t* rstd, const kiln_tensor_t* weight, int nd,
                                   kiln_tensor_t* grad_x, kiln_tensor_t* grad_w,
                                   kiln_tensor_t* grad_b, const char* op) {
  KILN_RETURN_IF_ERROR(kiln_nn_check_float(grad_out, op, "grad_out"));
  if (!kiln_nn_same_shape(grad_out, x))
    return kiln_nn_shape_error(op, "grad_out", grad_out, "x", x, "must match");
  if (!c->rms) KILN_RETURN_IF_ERROR(check_stat(mean, c->M, x, op, "mean"));
  KILN_RETURN_IF_ERROR(check_stat(rstd, c->M, x, op, "rstd"));
  if (weight) KILN_RETURN_IF_ERROR(check_param(x, nd, weight, op, "weight"));
  if (grad_w) KILN_RETURN_IF_ERROR(check_param(x, nd, grad_w, op, "grad_w"));
  if (grad_b) KILN_RETURN_IF_ERROR(check_param(x, nd, grad_b, op, "grad_b"));
  if (grad_x) {
    KILN_RETURN_IF_ERROR(kiln_nn_check_float(grad_x, op, "grad_x"));
    if (!kiln_nn_same_shape(grad_x, x))
      return kiln_nn_shape_error(op, "grad_x", grad_x, "x", x, "must match");
  }
  const uint32_t inner = inner_mask(x, nd);
  kiln_nn_view_init(&c->g, grad_out, inner);
  if (!c->rms) kiln_nn_view_init(&c->mean, mean, 0);
  kiln_nn_view_init(&c->rstd, rstd, 0);
  c->want_w = grad_w != NULL;
  c->want_b = grad_b != NULL;
  const int64_t N = c->N;
  kiln_status_t s = KILN_OK;
  if (grad_x && c->M > 0 && N > 0) {
    kiln_nn_view_init(&c->o, grad_x, inner);
    params_t p;
    KILN_RETURN_IF_ERROR(load_params(c, &p, weight, NULL, op));
    const size_t esz = c->f64 ? sizeof(double) : sizeof(float);
    s = kiln_nn_scratch_init(&c->scratch, 2 * kiln_nn_align(esz * (size_t)N), op);
    if (s == KILN_OK) {
      kiln_parallel_for(c->M, kiln_nn_grain(N * 4), norm_bwd_rows, c);
      kiln_nn_scratch_free(&c->scratch);
    }
    kiln_allocator_free(NULL, p.heap);
    KILN_RETURN_IF_ERROR(s);
  }
  if ((grad_w || grad_b) && N > 0) {
    c->nrb = (c->M + NORM_RB - 1) / NORM_RB;
    c->ncb = (N + NORM_CW - 1) / NORM_CW;
    if (c->nrb == 0) c->nrb = 1; /* M == 0: one empty block of zeros */
    const size_t esz = c->f64 ? sizeof(double) : sizeof(float);
    const size_t bytes = (size_t)c->nrb * 2 * (size_t)N * esz;
    _Alignas(64) char stack[KILN_NN_STACK_BYTES];
    void* heap = NULL;
    c->part = stack;
    if (bytes > sizeof stack) {
      heap = kiln_allocator_alloc(NULL, bytes, 64);
      if (heap == NULL)
        return kiln_error(KILN_ERROR_OUT_OF_MEMORY, "%s: cannot allocate %zu bytes of scratch",
                          op, bytes);
      c->part = heap;
    }
    if (c->M == 0) {
      memset(c->part, 0, bytes);
    } else {
      const int64_t per = (c->M < NORM_RB ? c->M : NORM_RB) * (N < NORM_CW ? N : NORM_CW);
      kiln_parallel_for(c->nrb * c->ncb, kiln_nn_grain(per), norm_wgrad_tasks, c);
    }
    if (grad_w) store_param_grad(c, grad_w, 0);
    if (grad_b) store_param_grad(c, grad_b, 1);
    kiln_allocator_free(NULL, heap);
  }
  return KILN_OK;
}

kiln_status_t kiln_kernel_layer_norm_backward(const kiln_tensor_t* grad_out,
                                              const kiln_tensor_t* x, const kiln_tensor_t* mean,
                                              const kiln_tensor_t* rstd,
                                              const kiln_tensor_t* weight, int normalized_ndim,
                                              kiln_tensor_t* grad_x, kiln_tensor_t* grad_w,
                                              kiln_tensor_t* grad_b) {
  const char* op = "kiln_kernel_layer_norm_backward";
  norm_ctx_t c;
  KILN_RETURN_IF_ERROR(init_common(&c, x, normalized_ndim, op));
  return norm_backward(&c, grad_out, x, mean, rstd, weight, normalized_ndim, grad_x, grad_w,
                       grad_b, op);
}

kiln_status_t kiln_kernel_rms_norm_backward(const kiln_tensor_t* grad_out,
                                            const kiln_tensor_t* x, const kiln_tensor_t* rstd,
                                            const kiln_tensor_t* weight, int normalized_ndim,
                                            kiln_tensor_t* grad_x, kiln_tensor_t* grad_w) {
  const char* op = "kiln_kernel_rms_norm_backward";
  norm_ctx_t c;
  KILN_RETURN_IF_ERROR(init_common(&c, x, normalized_ndim, op));
  c.rms = 1;
  return norm_backward(&c, grad_out, x, NULL, rstd, weight, normalized_ndim, grad_x, grad_w, NULL,
                       op);
}
