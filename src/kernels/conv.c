/* SPDX-License-Identifier: Apache-2.0 */
/* conv.c - 2-D (and 1-D) convolution forward and backward.
 *
 * f32/f16/bf16 with more than one input channel per group: images go in chunks of nb (scratch
 * budget ~4 MB, so columns stay in cache). Forward: im2col writes per image a [K x P] f32 matrix
 * (K = C*kH*kW rows ordered (c, kh, kw), P = oH*oW) and one batched sgemm per group multiplies
 * the [O/groups x K/groups] weight rows by it, straight into `out` when out is f32 with a
 * collapsible spatial dim (NCHW, or channels-last through the transposed product), else into f32
 * scratch that is then stored. 1x1 stride-1 unpadded convolutions read f32 x in place.
 * Backward: grad_out is gathered into [O x nb*P], im2col fills [K x nb*P]; grad_w += g @ col^T,
 * then the same buffer receives W^T @ g and col2im adds it into grad_x plane by plane.
 * f64, and depthwise-like convolutions (one input channel per group), run direct loops over
 * planes staged in per-thread scratch. Work is split by plane / channel and sgemm is thread-count
 * independent, so results do not depend on the number of threads. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cnn_util.h"
#include "kiln/kernels/conv.h"
#include "kiln/kernels/gemm.h"
#include "kiln/parallel.h"
#include "runtime/checked.h"

/* Scratch budget per image chunk in floats; KILN_CONV_CHUNK_FLOATS overrides it (tests use 1 to
 * force one image per chunk). */
static int64_t chunk_floats(void) {
  const char* e = getenv("KILN_CONV_CHUNK_FLOATS");
  long long v = e ? atoll(e) : 0;
  return v > 0 ? (int64_t)v : ((int64_t)1 << 20);
}

/* ---- small helpers ------------------------------------------------------------------------- */




/* dst[i] = src[i*step] (element step) converted to f32 (src f32, f16 or bf16). */
static void load_run(const char* src, int64_t step, kiln_dtype_t dt, int64_t n, float* dst) {
  const float* f = (const float*)src;
  const uint16_t* h = (const uint16_t*)src;
  if (dt == KILN_DTYPE_F32 && step == 1) memcpy(dst, f, (size_t)n * sizeof(float));
  else if (dt == KILN_DTYPE_F32) for (int64_t i = 0; i < n; i++) dst[i] = f[i * step];
  else if (dt == KILN_DTYPE_F16)
    for (int64_t i = 0; i < n; i++) dst[i] = kiln_f16_to_f32(h[i * step]);
  else for (int64_t i = 0; i < n; i++) dst[i] = kiln_bf16_to_f32(h[i * step]);
}

/* dst[i*step] = src[i] rounded to dt (f32, f16 or bf16). */
static void store_run(const float* src, int64_t n, kiln_dtype_t dt, char* dst, int64_t step) {
  float* f = (float*)dst;
  uint16_t* h = (uint16_t*)dst;
  if (dt == KILN_DTYPE_F32 && step == 1) memcpy(f, src, (size_t)n * sizeof(float));
  else if (dt == KILN_DTYPE_F32) for (int64_t i = 0; i < n; i++) f[i * step] = src[i];
  else if (dt == KILN_DTYPE_F16)
    for (int64_t i = 0; i < n; i++) h[i * step] = kiln_f32_to_f16(src[i]);
  else for (int64_t i = 0; i < n; i++) h[i * step] = kiln_f32_to_bf16(src[i]);
}

/* Byte address of element (n, c, h, 0) of a 4-D view. */
static inline char* at4(const kiln_tensor_t* t, int64_t n, int64_t c, int64_t h) {
  return (char*)t->data + (n * t->strides[0] + c * t->strides[1] + h * t->strides[2]) *
                              (int64_t)kiln_dtype_size(t->dtype);
}

/* Plane (n, c) of a 4-D view, R x Q, to / from dense f32 (any floating dtype but f64). */
static void plane_in_f32(const kiln_tensor_t* t, int64_t n, int64_t c, int64_t R, int64_t Q,
                         float* d) {
  for (int64_t r = 0; r < R; r++) load_run(at4(t, n, c, r), t->strides[3], t->dtype, Q, d + r * Q);
}

static void plane_out_f32(const float* s, int64_t R, int64_t Q, const kiln_tensor_t* t, int64_t n,
                          int64_t c) {
  for (int64_t r = 0; r < R; r++) store_run(s + r * Q, Q, t->dtype, at4(t, n, c, r), t->strides[3]);
}

static void plane_in_f64(const kiln_tensor_t* t, int64_t n, int64_t c, int64_t R, int64_t Q,
                         double* d) {
  for (int64_t r = 0; r < R; r++)
    for (int64_t q = 0; q < Q; q++)
      d[r * Q + q] = ((const double*)at4(t, n, c, r))[q * t->strides[3]];
}

static void plane_out_f64(const double* s, int64_t R, int64_t Q, const kiln_tensor_t* t,
                          int64_t n, int64_t c) {
  for (int64_t r = 0; r < R; r++)
    for (int64_t q = 0; q < Q; q++) ((double*)at4(t, n, c, r))[q * t->strides[3]] = s[r * Q + q];
}

/* Dense row kernels (restrict lets the compiler vectorize; dot keeps 4 partial sums). Kept out
 * of line: once inlined, gcc loses the restrict promise and emits scalar code. */
#if defined(__GNUC__)
#define CONV_NOINLINE __attribute__((noinline))
#else
#define CONV_NOINLINE
#endif
#define DEFINE_ROW_OPS(T, S)                                                                \
  static CONV_NOINLINE void axpy_##S(T* restrict y, const T* restrict x, T w, int64_t n) {  \
    int64_t i = 0;                                                                          \
    for (; i + 4 <= n; i += 4) /* unrolled so -O2's block vectorizer packs it */            \
      y[i] += w * x[i], y[i + 1] += w * x[i + 1], y[i + 2] += w * x[i + 2],                 \
          y[i + 3] += w * x[i + 3];                                                         \
    for (; i < n; i++) y[i] += w * x[i];                                                    \
  }                                                                                         \
  static CONV_NOINLINE T dot_##S(const T* restrict a, const T* restrict b, int64_t n) {            \
    T s0 = 0, s1 = 0, s2 = 0, s3 = 0;                                                       \
    int64_t i = 0;                                                                          \
    for (; i + 4 <= n; i += 4)                                                              \
      s0 += a[i] * b[i], s1 += a[i + 1] * b[i + 1], s2 += a[i + 2] * b[i + 2],              \
          s3 += a[i + 3] * b[i + 3];                                                        \
    for (; i < n; i++) s0 += a[i] * b[i];                                                   \
    return (s0 + s1) + (s2 + s3);                                                           \
  }
DEFINE_ROW_OPS(float, f32)
DEFINE_ROW_OPS(double, f64)

/* Spatial dims 2, 3 of a 4-D view as one dim of stride *sp; 0 if they do not collapse. */
static int collapse_p(const kiln_tensor_t* t, int64_t* sp) {
  if (t->shape[2] == 1) *sp = t->strides[3];
  else if (t->shape[3] == 1) *sp = t->strides[2];
  else if (t->strides[2] == t->shape[3] * t->strides[3]) *sp = t->strides[3];
  else return 0;
  return 1;
}

static int64_t grain_for(int64_t work_per_item) {
  int64_t g = 32768 / (work_per_item > 0 ? work_per_item : 1);
  return g > 1 ? g : 1;
}

/* ---- geometry and validation --------------------------------------------------------------- */

typedef struct conv_geom {
  int64_t N, C, H, W, O, kH, kW, oH, oW, sh, sw, ph, pw, dh, dw, G, Cg, Og, Kg, K, P;
} conv_geom_t;

/* Output columns [*ow0, *ow1) read input column ow*sw + *off inside [0, W) for tap kw. */
static inline void tap_cols(const conv_geom_t* g, int64_t kw, int64_t* off, int64_t* ow0,
                            int64_t* ow1) {
  *off = kw * g->dw - g->pw;
  *ow0 = *off >= 0 ? 0 : (-*off + g->sw - 1) / g->sw;
  *ow1 = g->W - *off <= 0 ? 0 : (g->W - *off - 1) / g->sw + 1;
  if (*ow1 > g->oW) *ow1 = g->oW;
  if (*ow0 > *ow1) *ow0 = *ow1;
}

/* A 3-D [N, C, L] tensor as [N, C, 1, L]; 4-D ones are copied. */
static void as_4d(const kiln_tensor_t* t, kiln_tensor_t* v) {
  *v = *t;
  if (t->ndim == 3) {
    v->ndim = 4;
    v->shape[3] = t->shape[2];
    v->strides[3] = t->strides[2];
    v->shape[2] = 1;
    v->strides[2] = t->shape[2] * t->strides[2];
  }
}

/* Checks the convolution arguments; fills g and 4-D views of x, w and y (out or grad_out). y may
 * be NULL (with y4 NULL): only the geometry is computed (kiln_conv2d_output_shape). */
static kiln_status_t check_conv(const char* fn, const kiln_tensor_t* x, const kiln_tensor_t* w,
                                const kiln_tensor_t* bias, const int64_t* stride,
                                const int64_t* padding, const int64_t* dilation, int64_t groups,
                                const kiln_tensor_t* y, const char* yname, conv_geom_t* g,
                                kiln_tensor_t* x4, kiln_tensor_t* w4, kiln_tensor_t* y4) {
  char b1[128], b2[128], b3[128], b4[128];
  if (x == NULL || w == NULL || stride == NULL || padding == NULL || dilation == NULL)
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s: NULL argument", fn);
  KILN_RETURN_IF_ERROR(cnn_check_size(fn, "x", x));
  KILN_RETURN_IF_ERROR(cnn_check_size(fn, "weight", w));
  if (bias) KILN_RETURN_IF_ERROR(cnn_check_size(fn, "bias", bias));
  if (y) KILN_RETURN_IF_ERROR(cnn_check_size(fn, yname, y));
  if (!kiln_dtype_is_float(x->dtype) || w->dtype != x->dtype || (y && y->dtype != x->dtype) ||
      (bias != NULL && bias->dtype != x->dtype))
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT,
                      "%s: x (%s), weight (%s)%s and %s must share one floating dtype", fn,
                      kiln_dtype_name(x->dtype), kiln_dtype_name(w->dtype),
                      bias ? ", bias" : "", yname);
  if (!((x->ndim == 4 && w->ndim == 4) || (x->ndim == 3 && w->ndim == 3)))
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT,
                      "%s: expected 4-D (or 3-D, conv1d) x and weight, got x %s, weight %s", fn,
                      shp(x, b1, sizeof b1), shp(w, b2, sizeof b2));
  const int d1 = x->ndim == 3;
  const int64_t st[2] = {d1 ? 1 : stride[0], d1 ? stride[0] : stride[1]};
  const int64_t pd[2] = {d1 ? 0 : padding[0], d1 ? padding[0] : padding[1]};
  const int64_t dl[2] = {d1 ? 1 : dilation[0], d1 ? dilation[0] : dilation[1]};
  for (int i = 0; i < 2; i++)
    if (st[i] < 1 || dl[i] < 1 || pd[i] < 0)
      return kiln_error(KILN_ERROR_INVALID_ARGUMENT,
                        "%s: stride (%lld) and dilation (%lld) must be >= 1, padding (%lld) >= 0",
                        fn, (long long)st[i], (long long)dl[i], (long long)pd[i]);
  as_4d(x, x4);
  as_4d(w, w4);
  g->N = x4->shape[0], g->C = x4->shape[1], g->H = x4->shape[2], g->W = x4->shape[3];
  g->O = w4->shape[0], g->kH = w4->shape[2], g->kW = w4->shape[3];
  g->sh = st[0], g->sw = st[1], g->ph = pd[0], g->pw = pd[1], g->dh = dl[0], g->dw = dl[1];
  g->G = groups;
  int64_t cw;
  if (groups < 1 || g->O % groups != 0 || !kiln_mul_i64(w4->shape[1], groups, &cw) || cw != g->C)
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT,
                      "%s: weight %s with groups=%lld does not fit x %s (need C = "
                      "weight.shape[1]*groups and O divisible by groups)",
                      fn, shp(w, b1, sizeof b1), (long long)groups, shp(x, b2, sizeof b2));
  if (bias != NULL && (bias->ndim != 1 || bias->shape[0] != g->O))
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s: bias %s, expected [%lld]", fn,
                      shp(bias, b1, sizeof b1), (long long)g->O);
  /* dilated kernel extent and padded input size, checked: dilation and padding come from the
   * caller unbounded */
  int64_t eh, ew, hp, wp;
  if (!kiln_muladd_i64(g->dh, g->kH - 1, 1, &eh) || !kiln_muladd_i64(g->dw, g->kW - 1, 1, &ew) ||
      !kiln_muladd_i64(2, g->ph, g->H, &hp) || !kiln_muladd_i64(2, g->pw, g->W, &wp))
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT,
                      "%s: dilation (%lld, %lld) or padding (%lld, %lld) overflows for x %s, "
                      "weight %s", fn, (long long)g->dh, (long long)g->dw, (long long)g->ph,
                      (long long)g->pw, shp(x, b1, sizeof b1), shp(w, b2, sizeof b2));
  if (g->kH < 1 || g->kW < 1 || eh > hp || ew > wp)
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT,
                      "%s: kernel %s (dilated %lldx%lld) does not fit x %s padded by (%lld, %lld)",
                      fn, shp(w, b1, sizeof b1), (long long)eh, (long long)ew,
                      shp(x, b2, sizeof b2), (long long)g->ph, (long long)g->pw);
  g->oH = (hp - eh) / g->sh + 1;
  g->oW = (wp - ew) / g->sw + 1;
  g->Cg = g->C / groups, g->Og = g->O / groups;
  const int64_t kdims[3] = {g->C, g->kH, g->kW}, pdims[2] = {g->oH, g->oW};
  const int64_t odims[2] = {g->N, g->O};
  int64_t n_out;
  if (!kiln_numel_capped(kdims, 3, KILN_NUMEL_MAX, &g->K) ||
      !kiln_numel_capped(pdims, 2, KILN_NUMEL_MAX, &g->P) ||
      !kiln_numel_capped(odims, 2, KILN_NUMEL_MAX, &n_out) ||
      !kiln_mul_i64(n_out, g->P, &n_out) || n_out > KILN_NUMEL_MAX)
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT,
                      "%s: x %s with weight %s gives an output of %lldx%lld per plane: more than "
                      "2^48 elements", fn, shp(x, b1, sizeof b1), shp(w, b2, sizeof b2),
                      (long long)g->oH, (long long)g->oW);
  g->Kg = g->Cg * g->kH * g->kW; /* <= K, checked just above */
  if (y == NULL) return KILN_OK;
  as_4d(y, y4);
  if (y->ndim != x->ndim || y4->shape[0] != g->N || y4->shape[1] != g->O ||
      y4->shape[2] != g->oH || y4->shape[3] != g->oW) {
    kiln_tensor_t e = *y;
    e.shape[0] = g->N, e.shape[1] = g->O, e.shape[e.ndim - 1] = g->oW;
    if (!d1) e.shape[2] = g->oH;
    e.ndim = x->ndim;
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s: %s %s, expected %s for x %s, weight %s",
                      fn, yname, shp(y, b3, sizeof b3), shp(&e, b1, sizeof b1),
                      shp(x, b2, sizeof b2), shp(w, b4, sizeof b4));
  }
  return KILN_OK;
}

static kiln_status_t check_like(const char* fn, const char* name, const kiln_tensor_t* t,
                                const kiln_tensor_t* ref) {
  char b1[128], b2[128];
  KILN_RETURN_IF_ERROR(cnn_check_size(fn, name, t));
  int ok = t->dtype == ref->dtype && t->ndim == ref->ndim;
  for (int i = 0; ok && i < t->ndim; i++) ok = t->shape[i] == ref->shape[i];
  if (!ok)
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s: %s %s (%s), expected %s (%s)", fn, name,
                      shp(t, b1, sizeof b1), kiln_dtype_name(t->dtype), shp(ref, b2, sizeof b2),
                      kiln_dtype_name(ref->dtype));
  return KILN_OK;
}

/* ---- parallel pieces ----------------------------------------------------------------------- */

typedef struct conv_ctx {
  conv_geom_t g;
  kiln_tensor_t x, y, gx;  /* 4-D views: input, output-like (out / grad_out), grad_x */
  int64_t n0, nb;          /* first image and image count of the chunk */
  float* col;              /* im2col matrix */
  int64_t col_ld, col_img; /* row stride and per-image offset (elements) inside col */
  float* buf;              /* [nb][O][P] (forward) or [O][nb*P] (backward gather) */
  const float* bias;       /* O floats or NULL */
  int direct;              /* forward: gemm wrote out in place (f32) */
  float* gxs;              /* backward: f32 staging for non-f32 grad_x, [nb][C][H][W] */
  double* gb;              /* grad_b sums */
} conv_ctx_t;

/* Fills the kH*kW rows of channel c of image n (index i = n_local*C + c). Rows of f32 x with
 * unit-stride rows and stride-1 windows (oW of 8 or 16 on small planes) are copied by inline
 * loops, not a memset / memcpy / memset call each (GCC's loop-to-memcpy pass is off here). */
#if defined(__GNUC__) && !defined(__clang__)
__attribute__((optimize("no-tree-loop-distribute-patterns")))
#endif
static void im2col_range(void* vctx, int64_t begin, int64_t end, int tid) {
  (void)tid;
  const conv_ctx_t* cx = vctx;
  const conv_geom_t* g = &cx->g;
  const int64_t es = (int64_t)kiln_dtype_size(cx->x.dtype), s3 = cx->x.strides[3];
  const int fast = cx->x.dtype == KILN_DTYPE_F32 && s3 == 1 && g->sw == 1;
  for (int64_t i = begin; i < end; i++) {
    const int64_t n = i / g->C, c = i % g->C;
    for (int64_t kh = 0; kh < g->kH; kh++)
      for (int64_t kw = 0; kw < g->kW; kw++) {
        float* row = cx->col + ((c * g->kH + kh) * g->kW + kw) * cx->col_ld + n * cx->col_img;
        int64_t off, ow0, ow1;
        tap_cols(g, kw, &off, &ow0, &ow1);
        for (int64_t oh = 0; oh < g->oH; oh++) {
          float* r = row + oh * g->oW;
          const int64_t ih = oh * g->sh - g->ph + kh * g->dh;
          if (ih < 0 || ih >= g->H || ow0 == ow1) {
            memset(r, 0, (size_t)g->oW * sizeof(float));
            continue;
          }
          const char* src = at4(&cx->x, cx->n0 + n, c, ih) + (ow0 * g->sw + off) * s3 * es;
          if (fast) {
            const float* sp = (const float*)(const void*)src; /* column ow0 */
            int64_t ow = 0;
            for (; ow < ow0; ow++) r[ow] = 0.0f;
            for (; ow < ow1; ow++) r[ow] = sp[ow - ow0];
            for (; ow < g->oW; ow++) r[ow] = 0.0f;
            continue;
          }
          memset(r, 0, (size_t)ow0 * sizeof(float));
          load_run(src, g->sw * s3, cx->x.dtype, ow1 - ow0, r + ow0);
          memset(r + ow1, 0, (size_t)(g->oW - ow1) * sizeof(float));
        }
      }
  }
}

/* Accumulates the col rows of channel c of image n into the grad_x plane (i = n_local*C + c). */
static void col2im_range(void* vctx, int64_t begin, int64_t end, int tid) {
  (void)tid;
  const conv_ctx_t* cx = vctx;
  const conv_geom_t* g = &cx->g;
  for (int64_t i = begin; i < end; i++) {
    const int64_t n = i / g->C, c = i % g->C;
    float* gp = cx->gxs ? cx->gxs + i * g->H * g->W : (float*)at4(&cx->gx, cx->n0 + n, c, 0);
    const int64_t rs = cx->gxs ? g->W : cx->gx.strides[2], cs = cx->gxs ? 1 : cx->gx.strides[3];
    for (int64_t h = 0; h < g->H; h++)
      for (int64_t w = 0; w < g->W; w++) gp[h * rs + w * cs] = 0.0f;
    for (int64_t kh = 0; kh < g->kH; kh++)
      for (int64_t kw = 0; kw < g->kW; kw++) {
        const float* row =
            cx->col + ((c * g->kH + kh) * g->kW + kw) * cx->col_ld + n * cx->col_img;
        int64_t off, ow0, ow1;
        tap_cols(g, kw, &off, &ow0, &ow1);
        for (int64_t oh = 0; oh < g->oH; oh++) {
          const int64_t ih = oh * g->sh - g->ph + kh * g->dh;
          if (ih < 0 || ih >= g->H) continue;
          const float* r = row + oh * g->oW;
          if (cs == 1 && g->sw == 1) { /* inline: rows are short on small planes */
            float* d = gp + ih * rs + off;
            for (int64_t ow = ow0; ow < ow1; ow++) d[ow] += r[ow];
          }
          else
            for (int64_t ow = ow0; ow < ow1; ow++) gp[ih * rs + (ow * g->sw + off) * cs] += r[ow];
        }
      }
    if (cx->gxs) plane_out_f32(gp, g->H, g->W, &cx->gx, cx->n0 + n, c);
  }
}

/* Forward epilogue for plane i = n_local*O + o: bias add in place, or store buf (+ bias). */
static void out_range(void* vctx, int64_t begin, int64_t end, int tid) {
  (void)tid;
  const conv_ctx_t* cx = vctx;
  const conv_geom_t* g = &cx->g;
  const kiln_tensor_t* y = &cx->y;
  for (int64_t i = begin; i < end; i++) {
    const int64_t n = i / g->O, o = i % g->O;
    const float b = cx->bias ? cx->bias[o] : 0.0f;
    if (cx->direct) {
      float* d = (float*)at4(y, cx->n0 + n, o, 0);
      for (int64_t h = 0; h < g->oH; h++)
        for (int64_t w = 0; w < g->oW; w++) d[h * y->strides[2] + w * y->strides[3]] += b;
      continue;
    }
    float* src = cx->buf + i * g->P;
    for (int64_t p = 0; p < g->P && b != 0.0f; p++) src[p] += b;
    plane_out_f32(src, g->oH, g->oW, y, cx->n0 + n, o);
  }
}

/* Backward: gathers grad_out plane (n_local, o) into buf[o][n*P ...] as f32 (i = o*nb + n). */
static void gather_range(void* vctx, int64_t begin, int64_t end, int tid) {
  (void)tid;
  const conv_ctx_t* cx = vctx;
  for (int64_t i = begin; i < end; i++) {
    const int64_t o = i / cx->nb, n = i % cx->nb;
    plane_in_f32(&cx->y, cx->n0 + n, o, cx->g.oH, cx->g.oW, cx->buf + o * cx->col_ld + n * cx->g.P);
  }
}

/* grad_b[o] = sum of grad_out over images and positions (in double). */
static void gradb_range(void* vctx, int64_t begin, int64_t end, int tid) {
  (void)tid;
  const conv_ctx_t* cx = vctx;
  const conv_geom_t* g = &cx->g;
  const kiln_tensor_t* y = &cx->y;
  const int64_t es = (int64_t)kiln_dtype_size(y->dtype);
  const int f32 = y->dtype == KILN_DTYPE_F32 && y->strides[3] == 1;
  for (int64_t o = begin; o < end; o++) {
    double s = 0.0;
    for (int64_t n = 0; n < g->N; n++)
      for (int64_t h = 0; h < g->oH; h++) {
        const char* row = at4(y, n, o, h);
        if (f32) { /* the same sums in the same order, without a dtype switch per element */
          const float* f = (const float*)(const void*)row;
          for (int64_t w = 0; w < g->oW; w++) s += f[w];
        } else {
          for (int64_t w = 0; w < g->oW; w++) s += ld_elem(row + w * y->strides[3] * es, y->dtype);
        }
      }
    cx->gb[o] = s;
  }
}

/* ---- weights as an f32 [O x Kg] matrix ----------------------------------------------------- */

/* Uses w in place when it is f32 with unit-stride rows, else converts it into *owned. */
static kiln_status_t weight_matrix(const char* fn, const kiln_tensor_t* w4, const conv_geom_t* g,
                                   const float** wm, int64_t* ldw, float** owned) {
  *owned = NULL;
  const int64_t* s = w4->strides;
  int unit = 1;
  int64_t expect = 1;
  for (int i = 3; i >= 1; expect *= w4->shape[i], i--)
    if (w4->shape[i] != 1 && s[i] != expect) unit = 0;
  if (w4->dtype == KILN_DTYPE_F32 && unit && (g->O == 1 || s[0] >= g->Kg)) {
    *wm = (const float*)w4->data;
    *ldw = g->O == 1 || s[0] < 1 ? (g->Kg > 0 ? g->Kg : 1) : s[0];
    return KILN_OK;
  }
  float* m = malloc((size_t)(g->O * g->Kg > 0 ? g->O * g->Kg : 1) * sizeof(float));
  if (m == NULL) return kiln_error(KILN_ERROR_OUT_OF_MEMORY, "%s: weight scratch", fn);
  for (int64_t o = 0; o < g->O; o++)
    for (int64_t c = 0; c < g->Cg; c++)
      plane_in_f32(w4, o, c, g->kH, g->kW, m + o * g->Kg + c * g->kH * g->kW);
  *wm = *owned = m;
  *ldw = g->Kg > 0 ? g->Kg : 1;
  return KILN_OK;
}

/* ---- direct loops: f64 always, f32/f16/bf16 when each group has one input channel ---------- */

typedef struct direct_ctx {
  conv_geom_t g;
  kiln_tensor_t x, w, y, gx, gw; /* 4-D views (y: out or grad_out) */
  const kiln_tensor_t* b;
  char* scratch; /* per thread: a = H*W values, z = P values, then kH*kW doubles */
  size_t per_thread;
} direct_ctx_t;

static inline double w_at(const kiln_tensor_t* w, int64_t o, int64_t c, int64_t kh, int64_t kw) {
  return ld_elem(at4(w, o, c, kh) + kw * w->strides[3] * (int64_t)kiln_dtype_size(w->dtype),
                 w->dtype);
}


/* For tap (kh, kw) and every valid output row: RUN(y offset, x offset, count) when sw == 1,
 * else BODY(y index, x index) per valid output position. */
#define DIRECT_TAP(g, kh, kw, RUN, BODY)                                               \
  do {                                                                                 \
    int64_t off_, ow0_, ow1_;                                                          \
    tap_cols(g, kw, &off_, &ow0_, &ow1_);                                              \
    for (int64_t oh = 0; oh < (g)->oH; oh++) {                                         \
      const int64_t ih_ = oh * (g)->sh - (g)->ph + (kh) * (g)->dh;                     \
      if (ih_ < 0 || ih_ >= (g)->H || ow0_ == ow1_) continue;                          \
      const int64_t yb_ = oh * (g)->oW, xb_ = ih_ * (g)->W + off_;                     \
      if ((g)->sw == 1)                                                                \
        RUN(yb_ + ow0_, xb_ + ow0_, ow1_ - ow0_);                                      \
      else                                                                             \
        for (int64_t ow = ow0_; ow < ow1_; ow++) BODY(yb_ + ow, xb_ + ow * (g)->sw);   \
    }                                                                                  \
  } while (0)

/* mode 0: out planes i = n*O + o; 1: grad_x planes i = n*C + c; 2: grad_w rows i = o*Cg + c. */
#define DEFINE_DIRECT(T, S)                                                                  \
  static void direct_##S(const direct_ctx_t* cx, int mode, int64_t begin, int64_t end,      \
                         int tid) {                                                         \
    const conv_geom_t* g = &cx->g;                                                          \
    T* a = (T*)(cx->scratch + (size_t)tid * cx->per_thread);                                \
    T* z = a + g->H * g->W;                                                                 \
    double* sums = (double*)(cx->scratch + (size_t)tid * cx->per_thread +                   \
                             (size_t)(g->H * g->W + g->P) * sizeof(double));                \
    const int64_t HW = g->H * g->W;                                                         \
    for (int64_t i = begin; i < end; i++) {                                                 \
      if (mode == 0) {                                                                      \
        const int64_t n = i / g->O, o = i % g->O, c0 = (o / g->Og) * g->Cg;                  \
        const T b = cx->b ? (T)ld_elem(at4(cx->b, 0, 0, 0) + o * cx->b->strides[0] *        \
                                       (int64_t)kiln_dtype_size(cx->b->dtype), cx->b->dtype) \
                          : (T)0;                                                           \
        for (int64_t p = 0; p < g->P; p++) z[p] = 0;                                        \
        for (int64_t c = 0; c < g->Cg; c++) {                                               \
          plane_in_##S(&cx->x, n, c0 + c, g->H, g->W, a);                                   \
          for (int64_t kh = 0; kh < g->kH; kh++)                                            \
            for (int64_t kw = 0; kw < g->kW; kw++) {                                        \
              const T wv = (T)w_at(&cx->w, o, c, kh, kw);                                   \
              DIRECT_TAP(g, kh, kw, DFWD_RUN, DFWD_BODY);  \
            }                                                                               \
        }                                                                                   \
        for (int64_t p = 0; p < g->P; p++) z[p] += b;                                       \
        plane_out_##S(z, g->oH, g->oW, &cx->y, n, o);                                       \
      } else if (mode == 1) {                                                               \
        const int64_t n = i / g->C, cc = i % g->C, grp = cc / g->Cg, c = cc % g->Cg;         \
        for (int64_t p = 0; p < HW; p++) a[p] = 0;                                          \
        for (int64_t o = grp * g->Og; o < (grp + 1) * g->Og; o++) {                         \
          plane_in_##S(&cx->y, n, o, g->oH, g->oW, z);                                      \
          for (int64_t kh = 0; kh < g->kH; kh++)                                            \
            for (int64_t kw = 0; kw < g->kW; kw++) {                                        \
              const T wv = (T)w_at(&cx->w, o, c, kh, kw);                                   \
              DIRECT_TAP(g, kh, kw, DGX_RUN, DGX_BODY);  \
            }                                                                               \
        }                                                                                   \
        plane_out_##S(a, g->H, g->W, &cx->gx, n, cc);                                       \
      } else {                                                                              \
        const int64_t o = i / g->Cg, c = i % g->Cg, cc = (o / g->Og) * g->Cg + c;            \
        for (int64_t k = 0; k < g->kH * g->kW; k++) sums[k] = 0.0;                          \
        for (int64_t n = 0; n < g->N; n++) {                                                \
          plane_in_##S(&cx->x, n, cc, g->H, g->W, a);                                       \
          plane_in_##S(&cx->y, n, o, g->oH, g->oW, z);                                      \
          for (int64_t kh = 0; kh < g->kH; kh++)                                            \
            for (int64_t kw = 0; kw < g->kW; kw++) {                                        \
              T s = 0;                                                                      \
              DIRECT_TAP(g, kh, kw, DGW_RUN, DGW_BODY);  \
              sums[kh * g->kW + kw] += (double)s;                                           \
            }                                                                               \
        }                                                                                   \
        const int64_t es = (int64_t)kiln_dtype_size(cx->gw.dtype);                          \
        for (int64_t kh = 0; kh < g->kH; kh++)                                              \
          for (int64_t kw = 0; kw < g->kW; kw++)                                            \
            st_elem(at4(&cx->gw, o, c, kh) + kw * cx->gw.strides[3] * es, cx->gw.dtype,     \
                    sums[kh * g->kW + kw]);                                                 \
      }                                                                                     \
    }                                                                                       \
  }

#define DFWD_BODY(yo, xo) z[yo] += wv * a[xo]
#define DGX_BODY(yo, xo) a[xo] += wv * z[yo]
#define DGW_BODY(yo, xo) s += z[yo] * a[xo]
#define DFWD_RUN(yo, xo, n) AXPY(z + (yo), a + (xo), wv, n)
#define DGX_RUN(yo, xo, n) AXPY(a + (xo), z + (yo), wv, n)
#define DGW_RUN(yo, xo, n) s += DOT(z + (yo), a + (xo), n)
#define AXPY axpy_f32
#define DOT dot_f32
DEFINE_DIRECT(float, f32)
#undef AXPY
#undef DOT
#define AXPY axpy_f64
#define DOT dot_f64
DEFINE_DIRECT(double, f64)

typedef struct direct_job {
  const direct_ctx_t* cx;
  int mode;
} direct_job_t;

static void direct_range(void* vjob, int64_t begin, int64_t end, int tid) {
  const direct_job_t* j = vjob;
  if (j->cx->x.dtype == KILN_DTYPE_F64) direct_f64(j->cx, j->mode, begin, end, tid);
  else direct_f32(j->cx, j->mode, begin, end, tid);
}

/* Runs the direct forward (fwd) or the wanted backward pieces. */
static kiln_status_t direct_run(direct_ctx_t* cx, int fwd, int want_gx, int want_gw,
                                const char* fn) {
  const conv_geom_t* g = &cx->g;
  const int nt = kiln_threadpool_size(kiln_threadpool_default());
  const int64_t kk = g->kH * g->kW;
  cx->per_thread = ((size_t)(g->H * g->W + g->P + kk) * sizeof(double) + 63) & ~(size_t)63;
  cx->scratch = malloc((size_t)nt * cx->per_thread);
  if (cx->scratch == NULL) return kiln_error(KILN_ERROR_OUT_OF_MEMORY, "%s: direct scratch", fn);
  direct_job_t j = {cx, 0};
  if (fwd) kiln_parallel_for(g->N * g->O, grain_for(g->P * g->Cg * kk), direct_range, &j);
  j.mode = 1;
  if (want_gx) kiln_parallel_for(g->N * g->C, grain_for(g->P * g->Og * kk), direct_range, &j);
  j.mode = 2;
  if (want_gw) kiln_parallel_for(g->O * g->Cg, grain_for(g->N * g->P * kk), direct_range, &j);
  free(cx->scratch);
  return KILN_OK;
}

/* ---- entry points -------------------------------------------------------------------------- */

/* Scratch of nb images of per_img floats plus `extra`, nb in [1, N] from the chunk budget. */
static float* chunk_alloc(const char* fn, int64_t N, int64_t per_img, int64_t extra,
                          int64_t* nb) {
  int64_t b = per_img > 0 ? chunk_floats() / per_img : N;
  *nb = b < 1 ? 1 : b > N ? N : b;
  float* p = malloc((size_t)(*nb * per_img + extra + 1) * sizeof(float));
  if (p == NULL)
    kiln_error(KILN_ERROR_OUT_OF_MEMORY, "%s: cannot allocate %lld bytes of scratch", fn,
               (long long)((*nb * per_img + extra) * 4));
  return p;
}

/* Output shape of a convolution, from the same checks as the kernel. */
kiln_status_t kiln_conv2d_output_shape(const kiln_tensor_t* x, const kiln_tensor_t* w,
                                       const kiln_tensor_t* bias, const int64_t stride[2],
                                       const int64_t padding[2], const int64_t dilation[2],
                                       int64_t groups, int64_t out_shape[4]) {
  conv_geom_t g;
  kiln_tensor_t x4, w4;
  if (out_shape == NULL)
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "kiln_conv2d_output_shape: NULL out_shape");
  KILN_RETURN_IF_ERROR(check_conv("kiln_conv2d_output_shape", x, w, bias, stride, padding,
                                  dilation, groups, NULL, "out", &g, &x4, &w4, NULL));
  out_shape[0] = g.N;
  out_shape[1] = g.O;
  if (x->ndim == 3) {
    out_shape[2] = g.oW;
  } else {
    out_shape[2] = g.oH;
    out_shape[3] = g.oW;
  }
  return KILN_OK;
}

/* Convolution forward: im2col + batched sgemm, or direct loops (f64, one channel per group). */
kiln_status_t kiln_kernel_conv2d(const kiln_tensor_t* x, const kiln_tensor_t* w,
                                 const kiln_tensor_t* bias, const int64_t stride[2],
                                 const int64_t padding[2], const int64_t dilation[2],
                                 int64_t groups, kiln_tensor_t* out) {
  static const char* fn = "kiln_kernel_conv2d";
  conv_ctx_t cx;
  memset(&cx, 0, sizeof cx);
  kiln_tensor_t w4;
  KILN_RETURN_IF_ERROR(check_conv(fn, x, w, bias, stride, padding, dilation, groups, out, "out",
                                  &cx.g, &cx.x, &w4, &cx.y));
  const conv_geom_t* g = &cx.g;
  if (g->N == 0 || g->O == 0) return KILN_OK;
  if (x->dtype == KILN_DTYPE_F64 || g->Cg <= 1) {
    direct_ctx_t d = {.g = *g, .x = cx.x, .w = w4, .y = cx.y, .b = bias};
    return direct_run(&d, 1, 0, 0, fn);
  }
  /* Output written by the gemm: 1 = [O x P] rows (p unit-stride), 2 = transposed (channels-last).
   * Input read in place (1x1): 1 = [C x P] rows, 2 = [P x C] rows. */
  int64_t ysp = 0, xsp = 0;
  int ylay = 0, xlay = 0;
  if (out->dtype == KILN_DTYPE_F32 && collapse_p(&cx.y, &ysp) && cx.y.strides[0] >= 0) {
    if (ysp == 1 && cx.y.strides[1] >= g->P) ylay = 1;
    else if (cx.y.strides[1] == 1 && ysp >= g->O) ylay = 2;
  }
  if (g->kH == 1 && g->kW == 1 && g->sh == 1 && g->sw == 1 && g->ph == 0 && g->pw == 0 &&
      x->dtype == KILN_DTYPE_F32 && collapse_p(&cx.x, &xsp) && cx.x.strides[0] >= 0) {
    if (xsp == 1 && cx.x.strides[1] >= g->P) xlay = 1;
    else if (cx.x.strides[1] == 1 && xsp >= g->C) xlay = 2;
  }
  cx.direct = ylay != 0;
  const float* wm;
  int64_t ldw, nb;
  float* wown;
  KILN_RETURN_IF_ERROR(weight_matrix(fn, &w4, g, &wm, &ldw, &wown));
  const int64_t per_img = (xlay ? 0 : g->K * g->P) + (cx.direct ? 0 : g->O * g->P);
  float* scratch = chunk_alloc(fn, g->N, per_img, g->O, &nb);
  if (scratch == NULL) {
    free(wown);
    return KILN_ERROR_OUT_OF_MEMORY;
  }
  float* bf = scratch + nb * per_img;
  for (int64_t o = 0; bias && o < g->O; o++)
    bf[o] = (float)ld_elem(at4(bias, 0, 0, 0) + o * bias->strides[0] * (int64_t)kiln_dtype_size(
                                                    bias->dtype), bias->dtype);
  cx.bias = bias ? bf : NULL;
  cx.col = scratch, cx.buf = scratch + (xlay ? 0 : nb * g->K * g->P);
  cx.col_ld = g->P, cx.col_img = g->K * g->P;
  kiln_status_t st = KILN_OK;
  for (cx.n0 = 0; cx.n0 < g->N && st == KILN_OK; cx.n0 += nb) {
    const int64_t cnt = g->N - cx.n0 < nb ? g->N - cx.n0 : nb;
    if (!xlay) kiln_parallel_for(cnt * g->C, grain_for(g->kH * g->kW * g->P), im2col_range, &cx);
    for (int64_t gi = 0; gi < g->G && st == KILN_OK; gi++) {
      /* B operand (Kg x P per image): col rows, or x itself for 1x1 convolutions. */
      const float* bp = cx.col + gi * g->Kg * g->P;
      int64_t ldb = g->P, sb = g->K * g->P;
      const int tb = xlay == 2;
      if (xlay) {
        bp = (const float*)x->data + cx.n0 * cx.x.strides[0] + gi * g->Cg * cx.x.strides[1];
        ldb = xlay == 1 ? cx.x.strides[1] : xsp, sb = cx.x.strides[0];
      }
      const float* ap = wm + gi * g->Og * ldw;
      float* yo = (float*)out->data + cx.n0 * cx.y.strides[0];
      if (ylay == 2) /* out^T [P x Og] = B^T W_g^T */
        st = kiln_sgemm_batched(!tb, 1, g->P, g->Og, g->Kg, 1.0f, bp, ldb, sb, ap, ldw, 0, 0.0f,
                                yo + gi * g->Og, ysp, cx.y.strides[0], cnt);
      else /* into out ([O x P] rows) or into buf */
        st = kiln_sgemm_batched(0, tb, g->Og, g->P, g->Kg, 1.0f, ap, ldw, 0, bp, ldb, sb, 0.0f,
                                ylay ? yo + gi * g->Og * cx.y.strides[1]
                                     : cx.buf + gi * g->Og * g->P,
                                ylay ? cx.y.strides[1] : g->P,
                                ylay ? cx.y.strides[0] : g->O * g->P, cnt);
    }
    if (st == KILN_OK && (!cx.direct || cx.bias != NULL))
      kiln_parallel_for(cnt * g->O, grain_for(g->P), out_range, &cx);
  }
  free(scratch);
  free(wown);
  return st;
}

/* Convolution backward: im2col + sgemm for grad_w, sgemm + col2im for grad_x, sums for grad_b. */
kiln_status_t kiln_kernel_conv2d_backward(const kiln_tensor_t* grad_out, const kiln_tensor_t* x,
                                          const kiln_tensor_t* w, const int64_t stride[2],
                                          const int64_t padding[2], const int64_t dilation[2],
                                          int64_t groups, kiln_tensor_t* grad_x,
                                          kiln_tensor_t* grad_w, kiln_tensor_t* grad_b) {
  static const char* fn = "kiln_kernel_conv2d_backward";
  conv_ctx_t cx;
  memset(&cx, 0, sizeof cx);
  kiln_tensor_t w4, gw4;
  KILN_RETURN_IF_ERROR(check_conv(fn, x, w, NULL, stride, padding, dilation, groups, grad_out,
                                  "grad_out", &cx.g, &cx.x, &w4, &cx.y));
  if (grad_x) KILN_RETURN_IF_ERROR(check_like(fn, "grad_x", grad_x, x));
  if (grad_w) KILN_RETURN_IF_ERROR(check_like(fn, "grad_w", grad_w, w));
  if (grad_b) {
    kiln_tensor_t bref = *w;
    bref.ndim = 1;
    KILN_RETURN_IF_ERROR(check_like(fn, "grad_b", grad_b, &bref));
  }
  const conv_geom_t* g = &cx.g;
  if (grad_x) as_4d(grad_x, &cx.gx);
  if (grad_w) as_4d(grad_w, &gw4);
  if (grad_b) {
    double* gb = malloc((size_t)(g->O + 1) * sizeof(double));
    if (gb == NULL) return kiln_error(KILN_ERROR_OUT_OF_MEMORY, "%s: grad_b scratch", fn);
    cx.gb = gb;
    kiln_parallel_for(g->O, grain_for(g->N * g->P), gradb_range, &cx);
    for (int64_t o = 0; o < g->O; o++)
      st_elem(at4(grad_b, 0, 0, 0) + o * grad_b->strides[0] * (int64_t)kiln_dtype_size(
                                         grad_b->dtype), grad_b->dtype, gb[o]);
    free(gb);
  }
  if (x->dtype == KILN_DTYPE_F64 || g->Cg <= 1 || g->N == 0) { /* N == 0: zero grad_w */
    direct_ctx_t d = {.g = *g, .x = cx.x, .w = w4, .y = cx.y, .gx = cx.gx, .gw = gw4};
    return direct_run(&d, 0, grad_x != NULL, grad_w != NULL, fn);
  }
  if (grad_x == NULL && grad_w == NULL) return KILN_OK;
  const float* wm = NULL;
  int64_t ldw = 1, nb;
  float* wown = NULL;
  if (grad_x) KILN_RETURN_IF_ERROR(weight_matrix(fn, &w4, g, &wm, &ldw, &wown));
  const int stage = grad_x != NULL && grad_x->dtype != KILN_DTYPE_F32;
  const int64_t per_img = g->K * g->P + g->O * g->P + (stage ? g->C * g->H * g->W : 0);
  const int64_t gwn = grad_w ? g->O * g->Kg : 0;
  float* scratch = chunk_alloc(fn, g->N, per_img, gwn, &nb);
  if (scratch == NULL) {
    free(wown);
    return KILN_ERROR_OUT_OF_MEMORY;
  }
  float* gw = scratch;
  cx.col = scratch + gwn;
  cx.buf = cx.col + nb * g->K * g->P;
  cx.gxs = stage ? cx.buf + nb * g->O * g->P : NULL;
  kiln_status_t st = KILN_OK;
  for (cx.n0 = 0; cx.n0 < g->N && st == KILN_OK; cx.n0 += nb) {
    const int64_t cnt = g->N - cx.n0 < nb ? g->N - cx.n0 : nb, L = cnt * g->P;
    cx.col_ld = L, cx.col_img = g->P, cx.nb = cnt;
    kiln_parallel_for(g->O * cnt, grain_for(g->P), gather_range, &cx);
    if (grad_w) {
      kiln_parallel_for(cnt * g->C, grain_for(g->kH * g->kW * g->P), im2col_range, &cx);
      for (int64_t gi = 0; gi < g->G && st == KILN_OK; gi++)
        st = kiln_sgemm(0, 1, g->Og, g->Kg, L, 1.0f, cx.buf + gi * g->Og * L, L,
                        cx.col + gi * g->Kg * L, L, cx.n0 ? 1.0f : 0.0f, gw + gi * g->Og * g->Kg,
                        g->Kg);
    }
    for (int64_t gi = 0; grad_x && gi < g->G && st == KILN_OK; gi++)
      st = kiln_sgemm(1, 0, g->Kg, L, g->Og, 1.0f, wm + gi * g->Og * ldw, ldw,
                      cx.buf + gi * g->Og * L, L, 0.0f, cx.col + gi * g->Kg * L, L);
    if (grad_x && st == KILN_OK)
      kiln_parallel_for(cnt * g->C, grain_for(g->kH * g->kW * g->P), col2im_range, &cx);
  }
  for (int64_t o = 0; grad_w && st == KILN_OK && o < g->O; o++)
    for (int64_t c = 0; c < g->Cg; c++)
      for (int64_t kh = 0; kh < g->kH; kh++)
        store_run(gw + o * g->Kg + (c * g->kH + kh) * g->kW, g->kW, gw4.dtype, at4(&gw4, o, c, kh),
                  gw4.strides[3]);
  free(scratch);
  free(wown);
  return st;
}
