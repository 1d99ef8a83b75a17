/* SPDX-License-Identifier: Apache-2.0 */
/* pool.c - 2-D max / average / adaptive-average pooling, forward and backward.
 *
 * Work is split by (n, c) plane: one task computes a whole output plane (forward) or a whole
 * grad_x plane (backward, so accumulation never races and does not depend on the thread count).
 * Plane kernels are instantiated for float (f32, f16, bf16) and double (f64) and read / write
 * through the plane's strides; f16/bf16 planes are converted into per-thread f32 staging first
 * and rounded once on store. Window rules follow ATen's cpu MaxPoolKernel / AvgPoolKernel /
 * AdaptiveAvgPoolKernel. */
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cnn_util.h"
#include "kiln/kernels/conv.h"
#include "kiln/parallel.h"
#include "runtime/checked.h"

enum { POOL_MAX = 0, POOL_AVG = 1, POOL_ADAPT = 2 };

typedef struct pool_ctx {
  int kind, backward;
  int64_t C, H, W, oH, oW;  /* C: channels per image (plane index -> offset) */
  int64_t kh, kw, sh, sw, ph, pw, dh, dw;
  int count_include_pad;
  int64_t divisor;          /* 0: none */
  kiln_tensor_t x, y, ind;  /* x: input / grad_x, y: out / grad_out, ind: indices */
  int has_ind;
  float* stage;             /* per-thread f32 staging (f16/bf16 only) */
  int64_t stage_per_thread;
  atomic_int bad_index;
} pool_ctx_t;


/* Element offset of plane i of a 3-D or 4-D tensor. */
static inline int64_t plane_off(const kiln_tensor_t* t, int64_t i, int64_t C) {
  if (t->ndim == 3) return i * t->strides[0];
  return C ? (i / C) * t->strides[0] + (i % C) * t->strides[1] : 0;
}

static inline int64_t imin(int64_t a, int64_t b) { return a < b ? a : b; }
static inline int64_t imax(int64_t a, int64_t b) { return a > b ? a : b; }

/* Avg-pool window of output (o) along one axis: [*a, *b) clipped, *full = padded size. */
static inline void avg_win(int64_t o, int64_t s, int64_t p, int64_t k, int64_t n, int64_t* a,
                           int64_t* b, int64_t* full) {
  int64_t lo = o * s - p, hi = imin(lo + k, n + p);
  *full = hi - lo;
  *a = imax(lo, 0);
  *b = imin(hi, n);
}

/* full: the padded window's size, a product taken in double (huge kernels must not wrap) */
static inline double avg_div(const pool_ctx_t* c, int64_t ph0, int64_t ph1, int64_t pw0,
                             int64_t pw1, double full) {
  if (c->divisor) return (double)c->divisor;
  return c->count_include_pad ? (double)full : (double)((ph1 - ph0) * (pw1 - pw0));
}

/* One plane of every pooling kind for compute type T. x / y strides are (rs, cs). */
#define DEFINE_POOL_PLANES(T, S)                                                                 \
  static void fwd_plane_##S(const pool_ctx_t* c, const T* x, int64_t xr, int64_t xc, T* y,       \
                            int64_t yr, int64_t yc, int64_t* ind, int64_t ir, int64_t ic) {      \
    for (int64_t oh = 0; oh < c->oH; oh++)                                                       \
      for (int64_t ow = 0; ow < c->oW; ow++) {                                                   \
        T r;                                                                                     \
        if (c->kind == POOL_MAX) {                                                               \
          int64_t h0 = oh * c->sh - c->ph, w0 = ow * c->sw - c->pw;                              \
          const int64_t h1 = imin(h0 + (c->kh - 1) * c->dh + 1, c->H);                           \
          const int64_t w1 = imin(w0 + (c->kw - 1) * c->dw + 1, c->W);                           \
          if (h0 < 0) h0 += (-h0 + c->dh - 1) / c->dh * c->dh; /* first tap inside */           \
          if (w0 < 0) w0 += (-w0 + c->dw - 1) / c->dw * c->dw;                                   \
          int64_t mi = h0 * c->W + w0;                                                           \
          T mv = -(T)INFINITY;                                                                   \
          for (int64_t h = h0; h < h1; h += c->dh)                                               \
            for (int64_t w = w0; w < w1; w += c->dw) {                                           \
              const T v = x[h * xr + w * xc];                                                    \
              if (v > mv || isnan(v)) mv = v, mi = h * c->W + w;                                 \
            }                                                                                    \
          r = mv;                                                                                \
          if (ind) ind[oh * ir + ow * ic] = mi;                                                  \
        } else {                                                                                 \
          int64_t h0, h1, w0, w1, fh, fw;                                                        \
          double div;                                                                            \
          if (c->kind == POOL_AVG) {                                                             \
            avg_win(oh, c->sh, c->ph, c->kh, c->H, &h0, &h1, &fh);                               \
            avg_win(ow, c->sw, c->pw, c->kw, c->W, &w0, &w1, &fw);                               \
            div = avg_div(c, h0, h1, w0, w1, (double)fh * (double)fw);                           \
          } else {                                                                               \
            h0 = oh * c->H / c->oH, h1 = ((oh + 1) * c->H + c->oH - 1) / c->oH;                  \
            w0 = ow * c->W / c->oW, w1 = ((ow + 1) * c->W + c->oW - 1) / c->oW;                  \
            div = (double)((h1 - h0) * (w1 - w0));                                               \
          }                                                                                      \
          T s = 0;                                                                               \
          for (int64_t h = h0; h < h1; h++)                                                      \
            for (int64_t w = w0; w < w1; w++) s += x[h * xr + w * xc];                           \
          r = (h0 >= h1 || w0 >= w1) ? (T)0 : (T)(s / (T)div);                                   \
        }                                                                                        \
        y[oh * yr + ow * yc] = r;                                                                \
      }                                                                                          \
  }                                                                                              \
  /* x: grad_x plane (zeroed here), y: grad_out plane. Returns 0 on a bad index. */              \
  static int bwd_plane_##S(const pool_ctx_t* c, T* x, int64_t xr, int64_t xc, const T* y,        \
                           int64_t yr, int64_t yc, const int64_t* ind, int64_t ir, int64_t ic) { \
    int ok = 1;                                                                                  \
    for (int64_t h = 0; h < c->H; h++)                                                           \
      for (int64_t w = 0; w < c->W; w++) x[h * xr + w * xc] = 0;                                 \
    for (int64_t oh = 0; oh < c->oH; oh++)                                                       \
      for (int64_t ow = 0; ow < c->oW; ow++) {                                                   \
        const T g = y[oh * yr + ow * yc];                                                        \
        if (c->kind == POOL_MAX) {                                                               \
          const int64_t mi = ind[oh * ir + ow * ic];                                             \
          if (mi < 0 || mi >= c->H * c->W) {                                                     \
            ok = 0;                                                                              \
            continue;                                                                            \
          }                                                                                      \
          x[(mi / c->W) * xr + (mi % c->W) * xc] += g;                                           \
          continue;                                                                              \
        }                                                                                        \
        int64_t h0, h1, w0, w1, fh, fw;                                                          \
        double div;                                                                              \
        if (c->kind == POOL_AVG) {                                                               \
          avg_win(oh, c->sh, c->ph, c->kh, c->H, &h0, &h1, &fh);                                 \
          avg_win(ow, c->sw, c->pw, c->kw, c->W, &w0, &w1, &fw);                                 \
          div = avg_div(c, h0, h1, w0, w1, (double)fh * (double)fw);                             \
        } else {                                                                                 \
          h0 = oh * c->H / c->oH, h1 = ((oh + 1) * c->H + c->oH - 1) / c->oH;                    \
          w0 = ow * c->W / c->oW, w1 = ((ow + 1) * c->W + c->oW - 1) / c->oW;                    \
          div = (double)((h1 - h0) * (w1 - w0));                                                 \
        }                                                                                        \
        const T gd = (T)(g / (T)div);                                                            \
        for (int64_t h = h0; h < h1; h++)                                                        \
          for (int64_t w = w0; w < w1; w++) x[h * xr + w * xc] += gd;                            \
      }                                                                                          \
    return ok;                                                                                   \
  }

DEFINE_POOL_PLANES(float, f32)
DEFINE_POOL_PLANES(double, f64)

/* Converts an [R x Cn] plane with strides (rs, cs) to/from dense f32. */
static void plane_load(const uint16_t* p, int64_t R, int64_t Cn, int64_t rs, int64_t cs,
                       kiln_dtype_t dt, float* d) {
  for (int64_t r = 0; r < R; r++)
    for (int64_t q = 0; q < Cn; q++) {
      const uint16_t v = p[r * rs + q * cs];
      d[r * Cn + q] = dt == KILN_DTYPE_F16 ? kiln_f16_to_f32(v) : kiln_bf16_to_f32(v);
    }
}

static void plane_store(const float* s, int64_t R, int64_t Cn, kiln_dtype_t dt, uint16_t* p,
                        int64_t rs, int64_t cs) {
  for (int64_t r = 0; r < R; r++)
    for (int64_t q = 0; q < Cn; q++) {
      const float v = s[r * Cn + q];
      p[r * rs + q * cs] = dt == KILN_DTYPE_F16 ? kiln_f32_to_f16(v) : kiln_f32_to_bf16(v);
    }
}

static void pool_range(void* vctx, int64_t begin, int64_t end, int tid) {
  pool_ctx_t* c = vctx;
  const kiln_tensor_t *x = &c->x, *y = &c->y;
  const int nd = x->ndim;
  const int64_t xr = x->strides[nd - 2], xc = x->strides[nd - 1];
  const int64_t yr = y->strides[nd - 2], yc = y->strides[nd - 1];
  const int64_t ir = c->has_ind ? c->ind.strides[nd - 2] : 0;
  const int64_t ic = c->has_ind ? c->ind.strides[nd - 1] : 0;
  const kiln_dtype_t dt = x->dtype;
  for (int64_t i = begin; i < end; i++) {
    const int64_t xo = plane_off(x, i, c->C), yo = plane_off(y, i, c->C);
    int64_t* ind = c->has_ind ? (int64_t*)c->ind.data + plane_off(&c->ind, i, c->C) : NULL;
    int ok = 1;
    if (dt == KILN_DTYPE_F32) {
      float *xp = (float*)x->data + xo, *yp = (float*)y->data + yo;
      if (c->backward) ok = bwd_plane_f32(c, xp, xr, xc, yp, yr, yc, ind, ir, ic);
      else fwd_plane_f32(c, xp, xr, xc, yp, yr, yc, ind, ir, ic);
    } else if (dt == KILN_DTYPE_F64) {
      double *xp = (double*)x->data + xo, *yp = (double*)y->data + yo;
      if (c->backward) ok = bwd_plane_f64(c, xp, xr, xc, yp, yr, yc, ind, ir, ic);
      else fwd_plane_f64(c, xp, xr, xc, yp, yr, yc, ind, ir, ic);
    } else {
      float* xs = c->stage + (int64_t)tid * c->stage_per_thread;
      float* ys = xs + c->H * c->W;
      uint16_t *xp = (uint16_t*)x->data + xo, *yp = (uint16_t*)y->data + yo;
      if (c->backward) {
        plane_load(yp, c->oH, c->oW, yr, yc, dt, ys);
        ok = bwd_plane_f32(c, xs, c->W, 1, ys, c->oW, 1, ind, ir, ic);
        plane_store(xs, c->H, c->W, dt, xp, xr, xc);
      } else {
        plane_load(xp, c->H, c->W, xr, xc, dt, xs);
        fwd_plane_f32(c, xs, c->W, 1, ys, c->oW, 1, ind, ir, ic);
        plane_store(ys, c->oH, c->oW, dt, yp, yr, yc);
      }
    }
    if (!ok) atomic_store(&c->bad_index, 1);
  }
}

/* Runs the planes of c (x, y, ind set up); allocates staging for half dtypes. */
static kiln_status_t pool_run(pool_ctx_t* c, const char* fn) {
  const int nd = c->x.ndim;
  int64_t planes = c->x.shape[0] * (nd == 4 ? c->x.shape[1] : 1);
  c->C = nd == 4 ? c->x.shape[1] : 0;
  atomic_init(&c->bad_index, 0);
  if (planes == 0) return KILN_OK;
  /* an empty (grad) output plane has no window to visit: without this its other dim, which
   * may be huge (up to 2^48 when the tensor is empty), would still be looped over */
  if (c->oH == 0 || c->oW == 0) c->oH = c->oW = 0;
  c->stage = NULL;
  if (c->x.dtype == KILN_DTYPE_F16 || c->x.dtype == KILN_DTYPE_BF16) {
    const int nt = kiln_threadpool_size(kiln_threadpool_default());
    c->stage_per_thread = c->H * c->W + c->oH * c->oW;
    c->stage = malloc((size_t)(nt * c->stage_per_thread + 1) * sizeof(float));
    if (c->stage == NULL)
      return kiln_error(KILN_ERROR_OUT_OF_MEMORY, "%s: cannot allocate staging", fn);
  }
  /* a cost estimate only: saturates (kernel sizes are bounded by the padded input, not int64) */
  int64_t work;
  if (!kiln_mul_i64(c->oH * c->oW, c->kind == POOL_ADAPT ? 1 : c->kh, &work) ||
      !kiln_mul_i64(work, c->kind == POOL_ADAPT ? 1 : c->kw, &work) ||
      !kiln_add_i64(work, c->H * c->W, &work))
    work = INT64_MAX;
  int64_t grain = 32768 / (work > 0 ? work : 1);
  kiln_parallel_for(planes, grain > 1 ? grain : 1, pool_range, c);
  free(c->stage);
  if (atomic_load(&c->bad_index))
    return kiln_error(KILN_ERROR_OUT_OF_RANGE, "%s: an index is outside [0, %lld)", fn,
                      (long long)(c->H * c->W));
  return KILN_OK;
}

/* ---- validation ---------------------------------------------------------------------------- */

static kiln_status_t check_input(const char* fn, const char* name, const kiln_tensor_t* t) {
  char b[128];
  if (t == NULL) return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s: %s is NULL", fn, name);
  if (!kiln_dtype_is_float(t->dtype))
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s: %s dtype %s is not floating", fn, name,
                      kiln_dtype_name(t->dtype));
  if (t->ndim != 3 && t->ndim != 4)
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s: %s %s, expected [N, C, H, W] or [C, H, W]",
                      fn, name, shp(t, b, sizeof b));
  return cnn_check_size(fn, name, t);
}

/* t must have ref's rank and leading dims, spatial (h, w) and dtype dt. */
static kiln_status_t check_out(const char* fn, const char* name, const kiln_tensor_t* t,
                               const kiln_tensor_t* ref, int64_t h, int64_t w, kiln_dtype_t dt) {
  char b1[128], b2[128], b3[128];
  kiln_tensor_t e = *ref;
  e.shape[ref->ndim - 2] = h, e.shape[ref->ndim - 1] = w;
  int ok = t != NULL && t->ndim == ref->ndim && t->dtype == dt;
  for (int i = 0; ok && i < t->ndim; i++) ok = t->shape[i] == e.shape[i];
  if (t == NULL) return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s: %s is NULL", fn, name);
  if (!ok)
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s: %s %s (%s), expected %s (%s) for %s", fn,
                      name, shp(t, b1, sizeof b1), kiln_dtype_name(t->dtype),
                      shp(&e, b2, sizeof b2), kiln_dtype_name(dt), shp(ref, b3, sizeof b3));
  return cnn_check_size(fn, name, t);
}

/* Output size along one axis as ATen's pooling_output_shape; -1 if a parameter is bad or the
 * formula overflows (huge dilation, stride or input size: no valid output either way). */
static int64_t out_size(int64_t n, int64_t k, int64_t s, int64_t p, int64_t d, int ceil_mode) {
  if (k < 1 || s < 1 || d < 1 || p < 0 || p > k / 2) return -1;
  int64_t num, ext, o, last;
  /* num = n + 2p - d(k-1) - 1 (+ s-1 in ceil mode) */
  if (!kiln_muladd_i64(2, p, n, &num) || !kiln_muladd_i64(d, k - 1, 1, &ext) ||
      !kiln_sub_i64(num, ext, &num) || !kiln_add_i64(num, ceil_mode ? s - 1 : 0, &num))
    return -1;
  o = num / s - (num % s != 0 && num < 0) + 1; /* floor(num / s) + 1, no -num to overflow */
  if (ceil_mode && (!kiln_mul_i64(o - 1, s, &last) || last >= n + p)) o--;
  return o;
}

/* Checks a window pooling call and fills c's geometry. x is the input, t the output-like. */
static kiln_status_t setup_window(const char* fn, pool_ctx_t* c, int kind,
                                  const kiln_tensor_t* x, const int64_t* kernel,
                                  const int64_t* stride, const int64_t* padding,
                                  const int64_t* dilation, int ceil_mode) {
  char b[128];
  if (kernel == NULL || padding == NULL)
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s: NULL kernel or padding", fn);
  c->kind = kind;
  c->kh = kernel[0], c->kw = kernel[1];
  c->sh = stride ? stride[0] : kernel[0], c->sw = stride ? stride[1] : kernel[1];
  c->ph = padding[0], c->pw = padding[1];
  c->dh = dilation ? dilation[0] : 1, c->dw = dilation ? dilation[1] : 1;
  c->H = x->shape[x->ndim - 2], c->W = x->shape[x->ndim - 1];
  c->oH = out_size(c->H, c->kh, c->sh, c->ph, c->dh, ceil_mode);
  c->oW = out_size(c->W, c->kw, c->sw, c->pw, c->dw, ceil_mode);
  if (c->kh < 1 || c->kw < 1 || c->sh < 1 || c->sw < 1 || c->dh < 1 || c->dw < 1 || c->ph < 0 ||
      c->pw < 0 || c->ph > c->kh / 2 || c->pw > c->kw / 2)
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT,
                      "%s: kernel (%lld, %lld), stride (%lld, %lld), dilation (%lld, %lld) must be "
                      ">= 1 and padding (%lld, %lld) in [0, kernel/2]", fn, (long long)c->kh,
                      (long long)c->kw, (long long)c->sh, (long long)c->sw, (long long)c->dh,
                      (long long)c->dw, (long long)c->ph, (long long)c->pw);
  if (c->H < 1 || c->W < 1 || c->oH < 1 || c->oW < 1)
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT,
                      "%s: input %s gives output size %lldx%lld, which is too small", fn,
                      shp(x, b, sizeof b), (long long)c->oH, (long long)c->oW);
  return KILN_OK;
}

/* Adaptive windows are [o * n / on, ((o + 1) * n + on - 1) / on): those products must fit. */
static kiln_status_t check_adaptive(const char* fn, const pool_ctx_t* c) {
  int64_t t;
  if (!kiln_muladd_i64(c->oH, c->H, c->oH, &t) || !kiln_muladd_i64(c->oW, c->W, c->oW, &t))
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT,
                      "%s: output %lldx%lld times input %lldx%lld overflows int64", fn,
                      (long long)c->oH, (long long)c->oW, (long long)c->H, (long long)c->W);
  return KILN_OK;
}

/* ---- entry points -------------------------------------------------------------------------- */

/* Output shape of a window pooling, from the same checks as the kernels. */
kiln_status_t kiln_pool2d_output_shape(const kiln_tensor_t* x, const int64_t kernel[2],
                                       const int64_t stride[2], const int64_t padding[2],
                                       const int64_t dilation[2], int ceil_mode,
                                       int64_t* out_shape) {
  static const char* fn = "kiln_pool2d_output_shape";
  pool_ctx_t c;
  memset(&c, 0, sizeof c);
  if (out_shape == NULL) return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s: NULL out_shape", fn);
  KILN_RETURN_IF_ERROR(check_input(fn, "x", x));
  KILN_RETURN_IF_ERROR(setup_window(fn, &c, POOL_MAX, x, kernel, stride, padding, dilation,
                                    ceil_mode));
  for (int i = 0; i < x->ndim - 2; i++) out_shape[i] = x->shape[i];
  out_shape[x->ndim - 2] = c.oH;
  out_shape[x->ndim - 1] = c.oW;
  return KILN_OK;
}



/* Max pooling with flat per-plane indices. */
kiln_status_t kiln_kernel_max_pool2d(const kiln_tensor_t* x, const int64_t kernel[2],
                                     const int64_t stride[2], const int64_t padding[2],
                                     const int64_t dilation[2], int ceil_mode, kiln_tensor_t* out,
                                     kiln_tensor_t* indices_out) {
  static const char* fn = "kiln_kernel_max_pool2d";
  pool_ctx_t c;
  memset(&c, 0, sizeof c);
  KILN_RETURN_IF_ERROR(check_input(fn, "x", x));
  KILN_RETURN_IF_ERROR(setup_window(fn, &c, POOL_MAX, x, kernel, stride, padding, dilation,
                                    ceil_mode));
  KILN_RETURN_IF_ERROR(check_out(fn, "out", out, x, c.oH, c.oW, x->dtype));
  if (indices_out)
    KILN_RETURN_IF_ERROR(check_out(fn, "indices_out", indices_out, x, c.oH, c.oW, KILN_DTYPE_I64));
  c.x = *x, c.y = *out;
  if (indices_out) c.ind = *indices_out, c.has_ind = 1;
  return pool_run(&c, fn);
}

/* Scatter-add of grad_out to the recorded max positions. */
kiln_status_t kiln_kernel_max_pool2d_backward(const kiln_tensor_t* grad_out,
                                              const kiln_tensor_t* indices,
                                              kiln_tensor_t* grad_x) {
  static const char* fn = "kiln_kernel_max_pool2d_backward";
  pool_ctx_t c;
  memset(&c, 0, sizeof c);
  KILN_RETURN_IF_ERROR(check_input(fn, "grad_out", grad_out));
  KILN_RETURN_IF_ERROR(check_input(fn, "grad_x", grad_x));
  const int nd = grad_out->ndim;
  KILN_RETURN_IF_ERROR(check_out(fn, "grad_x", grad_x, grad_out, grad_x->shape[nd - 2],
                                 grad_x->shape[nd - 1], grad_out->dtype));
  KILN_RETURN_IF_ERROR(check_out(fn, "indices", indices, grad_out, grad_out->shape[nd - 2],
                                 grad_out->shape[nd - 1], KILN_DTYPE_I64));
  c.kind = POOL_MAX, c.backward = 1;
  c.H = grad_x->shape[nd - 2], c.W = grad_x->shape[nd - 1];
  c.oH = grad_out->shape[nd - 2], c.oW = grad_out->shape[nd - 1];
  c.kh = c.kw = 1;
  c.x = *grad_x, c.y = *grad_out, c.ind = *indices, c.has_ind = 1;
  return pool_run(&c, fn);
}

/* Average pooling (ATen avg_pool2d). */
kiln_status_t kiln_kernel_avg_pool2d(const kiln_tensor_t* x, const int64_t kernel[2],
                                     const int64_t stride[2], const int64_t padding[2],
                                     int ceil_mode, int count_include_pad,
                                     int64_t divisor_override, kiln_tensor_t* out) {
  static const char* fn = "kiln_kernel_avg_pool2d";
  pool_ctx_t c;
  memset(&c, 0, sizeof c);
  KILN_RETURN_IF_ERROR(check_input(fn, "x", x));
  KILN_RETURN_IF_ERROR(setup_window(fn, &c, POOL_AVG, x, kernel, stride, padding, NULL,
                                    ceil_mode));
  KILN_RETURN_IF_ERROR(check_out(fn, "out", out, x, c.oH, c.oW, x->dtype));
  c.count_include_pad = count_include_pad != 0, c.divisor = divisor_override;
  c.x = *x, c.y = *out;
  return pool_run(&c, fn);
}

/* Average pooling backward (ATen avg_pool2d_backward). */
kiln_status_t kiln_kernel_avg_pool2d_backward(const kiln_tensor_t* grad_out,
                                              const int64_t kernel[2], const int64_t stride[2],
                                              const int64_t padding[2], int ceil_mode,
                                              int count_include_pad, int64_t divisor_override,
                                              kiln_tensor_t* grad_x) {
  static const char* fn = "kiln_kernel_avg_pool2d_backward";
  pool_ctx_t c;
  memset(&c, 0, sizeof c);
  KILN_RETURN_IF_ERROR(check_input(fn, "grad_out", grad_out));
  KILN_RETURN_IF_ERROR(check_input(fn, "grad_x", grad_x));
  KILN_RETURN_IF_ERROR(setup_window(fn, &c, POOL_AVG, grad_x, kernel, stride, padding, NULL,
                                    ceil_mode));
  KILN_RETURN_IF_ERROR(check_out(fn, "grad_out", grad_out, grad_x, c.oH, c.oW, grad_x->dtype));
  c.count_include_pad = count_include_pad != 0, c.divisor = divisor_override, c.backward = 1;
  c.x = *grad_x, c.y = *grad_out;
  return pool_run(&c, fn);
}

/* Adaptive average pooling to out's spatial size. */
kiln_status_t kiln_kernel_adaptive_avg_pool2d(const kiln_tensor_t* x, kiln_tensor_t* out) {
  static const char* fn = "kiln_kernel_adaptive_avg_pool2d";
  pool_ctx_t c;
  memset(&c, 0, sizeof c);
  KILN_RETURN_IF_ERROR(check_input(fn, "x", x));
  KILN_RETURN_IF_ERROR(check_input(fn, "out", out));
  const int nd = x->ndim;
  KILN_RETURN_IF_ERROR(check_out(fn, "out", out, x, out->shape[nd - 2], out->shape[nd - 1],
                                 x->dtype));
  c.kind = POOL_ADAPT;
  c.H = x->shape[nd - 2], c.W = x->shape[nd - 1];
  c.oH = out->shape[nd - 2], c.oW = out->shape[nd - 1];
  KILN_RETURN_IF_ERROR(check_adaptive(fn, &c));
  c.x = *x, c.y = *out;
  return pool_run(&c, fn);
}

/* Adaptive average pooling backward. */
kiln_status_t kiln_kernel_adaptive_avg_pool2d_backward(const kiln_tensor_t* grad_out,
                                                       kiln_tensor_t* grad_x) {
  static const char* fn = "kiln_kernel_adaptive_avg_pool2d_backward";
  pool_ctx_t c;
  memset(&c, 0, sizeof c);
  KILN_RETURN_IF_ERROR(check_input(fn, "grad_out", grad_out));
  KILN_RETURN_IF_ERROR(check_input(fn, "grad_x", grad_x));
  const int nd = grad_out->ndim;
  KILN_RETURN_IF_ERROR(check_out(fn, "grad_out", grad_out, grad_x, grad_out->shape[nd - 2],
                                 grad_out->shape[nd - 1], grad_x->dtype));
  c.kind = POOL_ADAPT, c.backward = 1;
  c.H = grad_x->shape[nd - 2], c.W = grad_x->shape[nd - 1];
  c.oH = grad_out->shape[nd - 2], c.oW = grad_out->shape[nd - 1];
  KILN_RETURN_IF_ERROR(check_adaptive(fn, &c));
  c.x = *grad_x, c.y = *grad_out;
  return pool_run(&c, fn);
}
