/* SPDX-License-Identifier: Apache-2.0 */
/* test_conv.c - conv2d / pooling / batch norm kernels vs naive double-precision references.
 * Tensors are filled through their strides, so channels-last and sliced layouts are covered. */
#include <stdint.h>

#include "kernels/half.h"
#include "kiln/kernels/conv.h"
#include "kiln_test.h"

/* ---- tensors with logical fill / read ------------------------------------------------------ */

typedef struct tt {
  kiln_tensor_t t;
  void* mem;
} tt_t;

/* A tensor of `shape`; layout 0 = contiguous, 1 = channels-last (4-D), 2 = padded rows (every
 * dim's stride doubled, so nothing is dense). */
static tt_t mk(kiln_dtype_t dt, int nd, const int64_t* shape, int layout) {
  tt_t r;
  memset(&r, 0, sizeof r);
  r.t.dtype = dt, r.t.ndim = nd;
  int64_t order[KILN_MAX_DIMS];
  for (int i = 0; i < nd; i++) order[i] = i;
  if (layout == 1 && nd == 4) order[1] = 2, order[2] = 3, order[3] = 1; /* N, H, W, C */
  int64_t s = 1;
  for (int j = nd - 1; j >= 0; j--) {
    const int d = (int)order[j];
    r.t.shape[d] = shape[d];
    r.t.strides[d] = s * (layout == 2 ? 2 : 1);
    s *= (shape[d] > 0 ? shape[d] : 1) * (layout == 2 ? 2 : 1);
  }
  for (int i = 0; i < nd; i++) r.t.shape[i] = shape[i];
  r.mem = calloc((size_t)s + 1, kiln_dtype_size(dt));
  r.t.data = r.mem;
  return r;
}

static int64_t numel(const kiln_tensor_t* t) {
  int64_t n = 1;
  for (int i = 0; i < t->ndim; i++) n *= t->shape[i];
  return n;
}

static char* at(const kiln_tensor_t* t, int64_t li) {
  int64_t off = 0;
  for (int d = t->ndim - 1; d >= 0; d--) {
    off += (li % t->shape[d]) * t->strides[d];
    li /= t->shape[d];
  }
  return (char*)t->data + off * (int64_t)kiln_dtype_size(t->dtype);
}

static double get(const kiln_tensor_t* t, int64_t li) {
  const char* p = at(t, li);
  switch (t->dtype) {
    case KILN_DTYPE_F32: return *(const float*)p;
    case KILN_DTYPE_F64: return *(const double*)p;
    case KILN_DTYPE_F16: return kiln_f16_to_f32(*(const uint16_t*)p);
    case KILN_DTYPE_I64: return (double)*(const int64_t*)p;
    default: return kiln_bf16_to_f32(*(const uint16_t*)p);
  }
}

static void set(const kiln_tensor_t* t, int64_t li, double v) {
  char* p = at(t, li);
  switch (t->dtype) {
    case KILN_DTYPE_F32: *(float*)p = (float)v; break;
    case KILN_DTYPE_F64: *(double*)p = v; break;
    case KILN_DTYPE_F16: *(uint16_t*)p = kiln_f32_to_f16((float)v); break;
    case KILN_DTYPE_I64: *(int64_t*)p = (int64_t)v; break;
    default: *(uint16_t*)p = kiln_f32_to_bf16((float)v); break;
  }
}

static uint64_t g_rng = 88172645463325252ull;
static double rnd(void) { /* uniform in [-1, 1) */
  g_rng ^= g_rng << 13, g_rng ^= g_rng >> 7, g_rng ^= g_rng << 17;
  return (double)(g_rng >> 11) / 4503599627370496.0 - 1.0;
}

/* Fills t with random values (rounded to its dtype) and returns them (logical order). */
static double* fill(const kiln_tensor_t* t, double scale, double shift) {
  const int64_t n = numel(t);
  double* v = malloc((size_t)(n + 1) * sizeof(double));
  for (int64_t i = 0; i < n; i++) {
    set(t, i, rnd() * scale + shift);
    v[i] = get(t, i);
  }
  return v;
}

static void poison(const kiln_tensor_t* t) {
  for (int64_t i = 0; i < numel(t); i++) set(t, i, NAN);
}

/* max |got - want| / (atol + rtol*|want|) over t; <= 1 passes. NaN where want is NaN is ok. */
static double err(const kiln_tensor_t* t, const double* want, double atol, double rtol) {
  double e = 0.0;
  for (int64_t i = 0; i < numel(t); i++) {
    const double g = get(t, i), w = want[i];
    if (isnan(w) && isnan(g)) continue;
    const double r = fabs(g - w) / (atol + rtol * fabs(w));
    if (!(r <= e)) e = r;
  }
  return e;
}

/* ---- convolution ---------------------------------------------------------------------------- */

typedef struct cc {
  int64_t N, C, H, W, O, kh, kw, s[2], p[2], d[2], g;
} cc_t;

static int64_t osz(int64_t n, int64_t k, int64_t s, int64_t p, int64_t d) {
  return (n + 2 * p - d * (k - 1) - 1) / s + 1;
}

/* Naive forward / backward in double on dense logical arrays. */
static void ref_conv(const cc_t* c, const double* x, const double* w, const double* b, double* y,
                     const double* gy, double* gx, double* gw, double* gb) {
  const int64_t oH = osz(c->H, c->kh, c->s[0], c->p[0], c->d[0]);
  const int64_t oW = osz(c->W, c->kw, c->s[1], c->p[1], c->d[1]);
  const int64_t Cg = c->C / c->g, Og = c->O / c->g;
  memset(gx, 0, sizeof(double) * (size_t)(c->N * c->C * c->H * c->W + 1));
  memset(gw, 0, sizeof(double) * (size_t)(c->O * Cg * c->kh * c->kw + 1));
  memset(gb, 0, sizeof(double) * (size_t)(c->O + 1));
  for (int64_t n = 0; n < c->N; n++)
    for (int64_t o = 0; o < c->O; o++)
      for (int64_t oh = 0; oh < oH; oh++)
        for (int64_t ow = 0; ow < oW; ow++) {
          const int64_t yi = ((n * c->O + o) * oH + oh) * oW + ow;
          double s = b ? b[o] : 0.0;
          gb[o] += gy[yi];
          for (int64_t ci = 0; ci < Cg; ci++)
            for (int64_t kh = 0; kh < c->kh; kh++)
              for (int64_t kw = 0; kw < c->kw; kw++) {
                const int64_t ih = oh * c->s[0] - c->p[0] + kh * c->d[0];
                const int64_t iw = ow * c->s[1] - c->p[1] + kw * c->d[1];
                if (ih < 0 || ih >= c->H || iw < 0 || iw >= c->W) continue;
                const int64_t xi = ((n * c->C + (o / Og) * Cg + ci) * c->H + ih) * c->W + iw;
                const int64_t wi = ((o * Cg + ci) * c->kh + kh) * c->kw + kw;
                s += x[xi] * w[wi];
                gx[xi] += gy[yi] * w[wi];
                gw[wi] += gy[yi] * x[xi];
              }
          y[yi] = s;
        }
}

/* Runs forward + backward of case c in dtype dt and layout, checks vs the reference. */
static void conv_case(const cc_t* c, kiln_dtype_t dt, int layout, double tol) {
  const int64_t oH = osz(c->H, c->kh, c->s[0], c->p[0], c->d[0]);
  const int64_t oW = osz(c->W, c->kw, c->s[1], c->p[1], c->d[1]);
  const int64_t xs[4] = {c->N, c->C, c->H, c->W}, ws[4] = {c->O, c->C / c->g, c->kh, c->kw};
  const int64_t ys[4] = {c->N, c->O, oH, oW}, bs[1] = {c->O};
  tt_t x = mk(dt, 4, xs, layout), w = mk(dt, 4, ws, layout), b = mk(dt, 1, bs, 0);
  tt_t y = mk(dt, 4, ys, layout), gy = mk(dt, 4, ys, layout);
  tt_t gx = mk(dt, 4, xs, layout), gw = mk(dt, 4, ws, layout), gb = mk(dt, 1, bs, 0);
  double *xv = fill(&x.t, 1, 0), *wv = fill(&w.t, 1, 0), *bv = fill(&b.t, 1, 0);
  double* gyv = fill(&gy.t, 1, 0);
  double* yr = malloc(sizeof(double) * (size_t)(numel(&y.t) + 1));
  double* gxr = malloc(sizeof(double) * (size_t)(numel(&x.t) + 1));
  double* gwr = malloc(sizeof(double) * (size_t)(numel(&w.t) + 1));
  double* gbr = malloc(sizeof(double) * (size_t)(c->O + 1));
  ref_conv(c, xv, wv, bv, yr, gyv, gxr, gwr, gbr);
  poison(&y.t);
  KT_OK(kiln_kernel_conv2d(&x.t, &w.t, &b.t, c->s, c->p, c->d, c->g, &y.t));
  KT_CHECK(err(&y.t, yr, tol, tol) <= 1.0);
  poison(&gx.t), poison(&gw.t), poison(&gb.t);
  KT_OK(kiln_kernel_conv2d_backward(&gy.t, &x.t, &w.t, c->s, c->p, c->d, c->g, &gx.t, &gw.t,
                                    &gb.t));
  const double gt = tol * (1 + sqrt((double)(c->N * oH * oW)) / 4);
  KT_CHECK(err(&gx.t, gxr, gt, gt) <= 1.0);
  KT_CHECK(err(&gw.t, gwr, gt, gt) <= 1.0);
  KT_CHECK(err(&gb.t, gbr, gt, gt) <= 1.0);
  tt_t* all[] = {&x, &w, &b, &y, &gy, &gx, &gw, &gb};
  for (int i = 0; i < 8; i++) free(all[i]->mem);
  free(xv), free(wv), free(bv), free(gyv), free(yr), free(gxr), free(gwr), free(gbr);
}

static const cc_t CASES[] = {
    {2, 3, 9, 9, 4, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1},
    {2, 4, 10, 7, 6, 3, 2, {2, 1}, {1, 0}, {1, 1}, 2},
    {1, 6, 11, 11, 6, 3, 3, {2, 2}, {2, 2}, {2, 2}, 6}, /* depthwise, dilated */
    {3, 8, 5, 5, 16, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1},  /* 1x1 in place */
    {2, 8, 6, 6, 4, 1, 1, {2, 2}, {0, 0}, {1, 1}, 2},   /* 1x1 strided, grouped */
    {2, 2, 4, 4, 3, 4, 4, {1, 1}, {0, 0}, {1, 1}, 1},   /* kernel covers the input */
    {1, 5, 7, 13, 7, 5, 3, {3, 2}, {2, 1}, {1, 3}, 1},
    {2, 1, 3, 3, 2, 3, 3, {5, 5}, {1, 1}, {1, 1}, 1},   /* stride past the input */
};
#define NCASES ((int)(sizeof CASES / sizeof CASES[0]))

KT_TEST(conv2d_f32_layouts) {
  for (int i = 0; i < NCASES; i++)
    for (int layout = 0; layout < 3; layout++) conv_case(&CASES[i], KILN_DTYPE_F32, layout, 1e-4);
}

KT_TEST(conv2d_f64) {
  for (int i = 0; i < NCASES; i++) conv_case(&CASES[i], KILN_DTYPE_F64, i % 2, 1e-10);
}

KT_TEST(conv2d_half) {
  for (int i = 0; i < 4; i++) {
    conv_case(&CASES[i], KILN_DTYPE_BF16, i % 2, 3e-2);
    conv_case(&CASES[i], KILN_DTYPE_F16, 1 - i % 2, 4e-3);
  }
}

KT_TEST(conv2d_one_image_per_chunk) {
  setenv("KILN_CONV_CHUNK_FLOATS", "1", 1);
  const cc_t c = {3, 4, 6, 5, 6, 3, 3, {1, 2}, {1, 1}, {1, 1}, 2};
  conv_case(&c, KILN_DTYPE_F32, 0, 1e-4);
  conv_case(&c, KILN_DTYPE_BF16, 1, 3e-2);
  unsetenv("KILN_CONV_CHUNK_FLOATS");
}

KT_TEST(conv2d_empty_batch) {
  const cc_t c = {0, 3, 5, 5, 2, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1};
  conv_case(&c, KILN_DTYPE_F32, 0, 1e-4); /* grad_w and grad_b must come back zero */
  conv_case(&c, KILN_DTYPE_F64, 1, 1e-10);
}

KT_TEST(conv1d) {
  const int64_t xs[3] = {2, 4, 12}, ws[3] = {6, 2, 3}, ys[3] = {2, 6, 5};
  const int64_t s[2] = {2, 99}, p[2] = {1, 99}, d[2] = {2, 99};
  tt_t x = mk(KILN_DTYPE_F32, 3, xs, 0), w = mk(KILN_DTYPE_F32, 3, ws, 0);
  tt_t y = mk(KILN_DTYPE_F32, 3, ys, 0);
  double *xv = fill(&x.t, 1, 0), *wv = fill(&w.t, 1, 0);
  KT_OK(kiln_kernel_conv2d(&x.t, &w.t, NULL, s, p, d, 2, &y.t));
  double maxe = 0;
  for (int64_t n = 0; n < 2; n++)
    for (int64_t o = 0; o < 6; o++)
      for (int64_t l = 0; l < 5; l++) {
        double r = 0;
        for (int64_t c = 0; c < 2; c++)
          for (int64_t k = 0; k < 3; k++) {
            const int64_t il = l * 2 - 1 + k * 2;
            if (il >= 0 && il < 12)
              r += xv[(n * 4 + (o / 3) * 2 + c) * 12 + il] * wv[(o * 2 + c) * 3 + k];
          }
        maxe = fmax(maxe, fabs(r - get(&y.t, (n * 6 + o) * 5 + l)));
      }
  KT_CHECK(maxe < 1e-5);
  free(x.mem), free(w.mem), free(y.mem), free(xv), free(wv);
}

KT_TEST(conv2d_errors) {
  const int64_t xs[4] = {1, 4, 5, 5}, ws[4] = {2, 4, 3, 3}, ys[4] = {1, 2, 3, 3};
  const int64_t one[2] = {1, 1}, zero[2] = {0, 0}, pad[2] = {1, 1};
  tt_t x = mk(KILN_DTYPE_F32, 4, xs, 0), w = mk(KILN_DTYPE_F32, 4, ws, 0);
  tt_t y = mk(KILN_DTYPE_F32, 4, ys, 0), wd = mk(KILN_DTYPE_F64, 4, ws, 0);
  KT_OK(kiln_kernel_conv2d(&x.t, &w.t, NULL, one, zero, one, 1, &y.t));
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT,
           kiln_kernel_conv2d(&x.t, &w.t, NULL, one, pad, one, 1, &y.t));
  KT_CHECK(strstr(kiln_status_message(), "[1, 2, 5, 5]") != NULL);
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT,
           kiln_kernel_conv2d(&x.t, &w.t, NULL, one, zero, one, 3, &y.t));
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT,
           kiln_kernel_conv2d(&x.t, &w.t, NULL, zero, zero, one, 1, &y.t));
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT,
           kiln_kernel_conv2d(&x.t, &wd.t, NULL, one, zero, one, 1, &y.t));
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT,
           kiln_kernel_conv2d(NULL, &w.t, NULL, one, zero, one, 1, &y.t));
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_kernel_conv2d_backward(&y.t, &x.t, &w.t, one, zero,
                                                                   one, 1, &y.t, NULL, NULL));
  free(x.mem), free(w.mem), free(y.mem), free(wd.mem);
}

/* ---- pooling --------------------------------------------------------------------------------- */

typedef struct pc {
  int64_t N, C, H, W, k[2], s[2], p[2], d[2];
  int ceil, cip;
  int64_t div;
} pc_t;

static int64_t pool_osz(int64_t n, int64_t k, int64_t s, int64_t p, int64_t d, int ceil) {
  int64_t o = (n + 2 * p - d * (k - 1) - 1 + (ceil ? s - 1 : 0)) / s + 1;
  if (ceil && (o - 1) * s >= n + p) o--;
  return o;
}

/* kind 0 max, 1 avg: forward and backward vs naive loops. */
static void pool_case(const pc_t* c, int kind, kiln_dtype_t dt, int layout, double tol) {
  const int64_t oH = pool_osz(c->H, c->k[0], c->s[0], c->p[0], kind ? 1 : c->d[0], c->ceil);
  const int64_t oW = pool_osz(c->W, c->k[1], c->s[1], c->p[1], kind ? 1 : c->d[1], c->ceil);
  const int64_t xs[4] = {c->N, c->C, c->H, c->W}, ys[4] = {c->N, c->C, oH, oW};
  tt_t x = mk(dt, 4, xs, layout), y = mk(dt, 4, ys, layout);
  tt_t ind = mk(KILN_DTYPE_I64, 4, ys, layout);
  tt_t gy = mk(dt, 4, ys, layout), gx = mk(dt, 4, xs, layout);
  double *xv = fill(&x.t, 2, 0), *gyv = fill(&gy.t, 1, 0);
  double* yr = calloc((size_t)(numel(&y.t) + 1), sizeof(double));
  double* ir = calloc((size_t)(numel(&y.t) + 1), sizeof(double));
  double* gxr = calloc((size_t)(numel(&x.t) + 1), sizeof(double));
  for (int64_t pl = 0; pl < c->N * c->C; pl++)
    for (int64_t oh = 0; oh < oH; oh++)
      for (int64_t ow = 0; ow < oW; ow++) {
        const int64_t yi = (pl * oH + oh) * oW + ow;
        double best = -INFINITY, sum = 0;
        int64_t bi = -1, cnt = 0, full = 0;
        for (int64_t kh = 0; kh < c->k[0]; kh++)
          for (int64_t kw = 0; kw < c->k[1]; kw++) {
            const int64_t ih = oh * c->s[0] - c->p[0] + kh * (kind ? 1 : c->d[0]);
            const int64_t iw = ow * c->s[1] - c->p[1] + kw * (kind ? 1 : c->d[1]);
            if (ih < c->H + c->p[0] && iw < c->W + c->p[1]) full++;
            if (ih < 0 || ih >= c->H || iw < 0 || iw >= c->W) continue;
            const double v = xv[pl * c->H * c->W + ih * c->W + iw];
            if (bi < 0 || v > best) best = v, bi = ih * c->W + iw;
            sum += v, cnt++;
          }
        const double dv = c->div ? (double)c->div : c->cip ? (double)full : (double)cnt;
        yr[yi] = kind ? (cnt ? sum / dv : 0.0) : best;
        ir[yi] = (double)bi;
        if (kind == 0) gxr[pl * c->H * c->W + bi] += gyv[yi];
        for (int64_t kh = 0; kind && kh < c->k[0]; kh++)
          for (int64_t kw = 0; kw < c->k[1]; kw++) {
            const int64_t ih = oh * c->s[0] - c->p[0] + kh, iw = ow * c->s[1] - c->p[1] + kw;
            if (ih >= 0 && ih < c->H && iw >= 0 && iw < c->W)
              gxr[pl * c->H * c->W + ih * c->W + iw] += gyv[yi] / dv;
          }
      }
  poison(&y.t), poison(&gx.t);
  if (kind == 0) {
    KT_OK(kiln_kernel_max_pool2d(&x.t, c->k, c->s, c->p, c->d, c->ceil, &y.t, &ind.t));
    KT_CHECK(err(&ind.t, ir, 0.5, 0) <= 1.0);
    KT_OK(kiln_kernel_max_pool2d_backward(&gy.t, &ind.t, &gx.t));
  } else {
    KT_OK(kiln_kernel_avg_pool2d(&x.t, c->k, c->s, c->p, c->ceil, c->cip, c->div, &y.t));
    KT_OK(kiln_kernel_avg_pool2d_backward(&gy.t, c->k, c->s, c->p, c->ceil, c->cip, c->div, &gx.t));
  }
  KT_CHECK(err(&y.t, yr, tol, tol) <= 1.0);
  KT_CHECK(err(&gx.t, gxr, tol, tol) <= 1.0);
  free(x.mem), free(y.mem), free(ind.mem), free(gy.mem), free(gx.mem);
  free(xv), free(gyv), free(yr), free(ir), free(gxr);
}

static const pc_t PCASES[] = {
    {2, 3, 8, 8, {2, 2}, {2, 2}, {0, 0}, {1, 1}, 0, 1, 0},
    {2, 3, 9, 7, {3, 3}, {2, 2}, {1, 1}, {1, 1}, 0, 1, 0},
    {1, 2, 9, 7, {3, 3}, {2, 2}, {1, 1}, {1, 1}, 1, 0, 0},
    {2, 2, 10, 11, {3, 2}, {2, 3}, {1, 1}, {2, 1}, 1, 1, 0},
    {1, 2, 10, 11, {3, 2}, {2, 3}, {1, 1}, {1, 1}, 1, 0, 5},
    {0, 3, 5, 5, {2, 2}, {2, 2}, {0, 0}, {1, 1}, 0, 1, 0},
    {1, 1, 5, 5, {4, 4}, {3, 3}, {2, 2}, {1, 1}, 1, 1, 0},
};

KT_TEST(pool_max_avg) {
  for (int i = 0; i < (int)(sizeof PCASES / sizeof PCASES[0]); i++)
    for (int kind = 0; kind < 2; kind++) {
      if (kind == 1 && PCASES[i].d[0] != 1) continue;
      for (int layout = 0; layout < 3; layout++)
        pool_case(&PCASES[i], kind, KILN_DTYPE_F32, layout, 1e-6);
      pool_case(&PCASES[i], kind, KILN_DTYPE_F64, 1, 1e-12);
      pool_case(&PCASES[i], kind, KILN_DTYPE_BF16, i % 2, 2e-2);
    }
}

KT_TEST(pool_max_nan_and_errors) {
  const int64_t xs[4] = {1, 1, 2, 4}, ys[4] = {1, 1, 1, 2}, k[2] = {2, 2};
  tt_t x = mk(KILN_DTYPE_F32, 4, xs, 0), y = mk(KILN_DTYPE_F32, 4, ys, 0);
  tt_t ind = mk(KILN_DTYPE_I64, 4, ys, 0), gx = mk(KILN_DTYPE_F32, 4, xs, 0);
  const double v[8] = {1, NAN, 3, -INFINITY, NAN, 0, -INFINITY, -INFINITY};
  for (int i = 0; i < 8; i++) set(&x.t, i, v[i]);
  KT_OK(kiln_kernel_max_pool2d(&x.t, k, NULL, (const int64_t[2]){0, 0}, NULL, 0, &y.t, &ind.t));
  KT_CHECK(isnan(get(&y.t, 0)) && get(&ind.t, 0) == 4); /* the last NaN wins */
  KT_CHECK(get(&y.t, 1) == 3 && get(&ind.t, 1) == 2);
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT,
           kiln_kernel_max_pool2d(&x.t, k, NULL, (const int64_t[2]){2, 0}, NULL, 0, &y.t, NULL));
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT,
           kiln_kernel_max_pool2d(&x.t, k, NULL, (const int64_t[2]){0, 0}, NULL, 0, &gx.t, NULL));
  set(&ind.t, 1, 8);
  KT_FAILS(KILN_ERROR_OUT_OF_RANGE, kiln_kernel_max_pool2d_backward(&y.t, &ind.t, &gx.t));
  free(x.mem), free(y.mem), free(ind.mem), free(gx.mem);
}

KT_TEST(pool_adaptive) {
  const int64_t xs[4] = {2, 3, 9, 7}, ys[4] = {2, 3, 4, 3};
  for (int layout = 0; layout < 2; layout++) {
    tt_t x = mk(KILN_DTYPE_F32, 4, xs, layout), y = mk(KILN_DTYPE_F32, 4, ys, layout);
    tt_t gy = mk(KILN_DTYPE_F32, 4, ys, layout), gx = mk(KILN_DTYPE_F32, 4, xs, layout);
    double *xv = fill(&x.t, 1, 0), *gyv = fill(&gy.t, 1, 0);
    double yr[72], gxr[378] = {0};
    for (int64_t pl = 0; pl < 6; pl++)
      for (int64_t i = 0; i < 4; i++)
        for (int64_t j = 0; j < 3; j++) {
          const int64_t h0 = i * 9 / 4, h1 = ((i + 1) * 9 + 3) / 4;
          const int64_t w0 = j * 7 / 3, w1 = ((j + 1) * 7 + 2) / 3;
          double s = 0;
          for (int64_t h = h0; h < h1; h++)
            for (int64_t w = w0; w < w1; w++) s += xv[pl * 63 + h * 7 + w];
          const double n = (double)((h1 - h0) * (w1 - w0));
          yr[(pl * 4 + i) * 3 + j] = s / n;
          for (int64_t h = h0; h < h1; h++)
            for (int64_t w = w0; w < w1; w++)
              gxr[pl * 63 + h * 7 + w] += gyv[(pl * 4 + i) * 3 + j] / n;
        }
    KT_OK(kiln_kernel_adaptive_avg_pool2d(&x.t, &y.t));
    KT_OK(kiln_kernel_adaptive_avg_pool2d_backward(&gy.t, &gx.t));
    KT_CHECK(err(&y.t, yr, 1e-6, 1e-6) <= 1.0);
    KT_CHECK(err(&gx.t, gxr, 1e-6, 1e-6) <= 1.0);
    free(x.mem), free(y.mem), free(gy.mem), free(gx.mem), free(xv), free(gyv);
  }
}

/* ---- batch norm ------------------------------------------------------------------------------ */

static void bn_case(kiln_dtype_t dt, int layout, int training) {
  const int64_t xs[4] = {3, 4, 5, 6}, cs[1] = {4}, C = 4, M = 30, n = 90;
  tt_t x = mk(dt, 4, xs, layout), y = mk(dt, 4, xs, layout), gy = mk(dt, 4, xs, layout);
  tt_t gx = mk(dt, 4, xs, layout);
  tt_t w = mk(KILN_DTYPE_F32, 1, cs, 0), b = mk(KILN_DTYPE_F32, 1, cs, 0);
  tt_t rm = mk(KILN_DTYPE_F32, 1, cs, 0), rv = mk(KILN_DTYPE_F32, 1, cs, 0);
  tt_t sm = mk(KILN_DTYPE_F32, 1, cs, 0), si = mk(KILN_DTYPE_F32, 1, cs, 0);
  tt_t gw = mk(KILN_DTYPE_F32, 1, cs, 0), gb = mk(KILN_DTYPE_F32, 1, cs, 0);
  double *xv = fill(&x.t, 2, 0.5), *gyv = fill(&gy.t, 1, 0), *wv = fill(&w.t, 1, 0);
  double *bv = fill(&b.t, 1, 0), *rmv = fill(&rm.t, 1, 0), *rvv = fill(&rv.t, 0.4, 1);
  double yr[360], gxr[360], gwr[4], gbr[4], rmr[4], rvr[4], mr[4], ir[4];
  for (int64_t c = 0; c < C; c++) {
    double mean = 0, var = 0, sg = 0, dot = 0;
    for (int64_t i = 0; i < n; i++) mean += xv[(i / M * C + c) * M + i % M] / (double)n;
    for (int64_t i = 0; i < n; i++) var += pow(xv[(i / M * C + c) * M + i % M] - mean, 2);
    rmr[c] = training ? 0.9 * rmv[c] + 0.1 * mean : rmv[c];
    rvr[c] = training ? 0.9 * rvv[c] + 0.1 * var / (double)(n - 1) : rvv[c];
    mr[c] = mean, ir[c] = 1.0 / sqrt(var / (double)n + 1e-5);
    const double mu = training ? mean : rmv[c];
    const double is = training ? ir[c] : 1.0 / sqrt(rvv[c] + 1e-5);
    for (int64_t i = 0; i < n; i++) {
      const int64_t li = (i / M * C + c) * M + i % M;
      yr[li] = (xv[li] - mu) * is * wv[c] + bv[c];
      sg += gyv[li], dot += gyv[li] * (xv[li] - mu);
    }
    gwr[c] = dot * is, gbr[c] = sg;
    for (int64_t i = 0; i < n; i++) {
      const int64_t li = (i / M * C + c) * M + i % M;
      const double k = training ? is * is * dot / (double)n : 0.0;
      const double gm = training ? sg / (double)n : 0.0;
      gxr[li] = (gyv[li] - gm - (xv[li] - mu) * k) * is * wv[c];
    }
  }
  const double tol = dt == KILN_DTYPE_F32 ? 1e-5 : dt == KILN_DTYPE_F64 ? 1e-6 : 2e-2;
  poison(&y.t), poison(&sm.t), poison(&si.t);
  KT_OK(kiln_kernel_batch_norm(&x.t, &w.t, &b.t, &rm.t, &rv.t, training, 0.1, 1e-5, &y.t, &sm.t,
                               &si.t));
  KT_CHECK(err(&y.t, yr, tol, tol) <= 1.0);
  KT_CHECK(err(&rm.t, rmr, 1e-6, 1e-6) <= 1.0 && err(&rv.t, rvr, 1e-6, 1e-6) <= 1.0);
  if (training) KT_CHECK(err(&sm.t, mr, 1e-6, 1e-6) <= 1.0 && err(&si.t, ir, 1e-6, 1e-6) <= 1.0);
  else KT_CHECK(isnan(get(&sm.t, 0))); /* untouched in eval mode */
  if (training) { /* the saved stats of the update above feed the backward */
    for (int64_t c = 0; c < C; c++) set(&rm.t, c, rmv[c]), set(&rv.t, c, rvv[c]);
  }
  poison(&gx.t), poison(&gw.t), poison(&gb.t);
  KT_OK(kiln_kernel_batch_norm_backward(&gy.t, &x.t, &w.t, &rm.t, &rv.t, training ? &sm.t : NULL,
                                        training ? &si.t : NULL, training, 1e-5, &gx.t, &gw.t,
                                        &gb.t));
  const double gtol = dt == KILN_DTYPE_F32 ? 1e-4 : tol;
  KT_CHECK(err(&gx.t, gxr, gtol, gtol) <= 1.0);
  KT_CHECK(err(&gw.t, gwr, 1e-4, 1e-4) <= 1.0);
  KT_CHECK(err(&gb.t, gbr, 1e-4, 1e-4) <= 1.0);
  poison(&gw.t);
  KT_OK(kiln_kernel_batch_norm_backward(&gy.t, &x.t, NULL, &rm.t, &rv.t, &sm.t, &si.t, training,
                                        1e-5, NULL, &gw.t, NULL));
  KT_CHECK(!isnan(get(&gw.t, 0)));
  tt_t* all[] = {&x, &y, &gy, &gx, &w, &b, &rm, &rv, &sm, &si, &gw, &gb};
  for (int i = 0; i < 12; i++) free(all[i]->mem);
  free(xv), free(gyv), free(wv), free(bv), free(rmv), free(rvv);
}

KT_TEST(batch_norm_train_eval) {
  for (int training = 0; training < 2; training++)
    for (int layout = 0; layout < 3; layout++) bn_case(KILN_DTYPE_F32, layout, training);
  bn_case(KILN_DTYPE_F64, 1, 1);
  bn_case(KILN_DTYPE_BF16, 0, 1);
  bn_case(KILN_DTYPE_F16, 1, 0);
}

KT_TEST(batch_norm_errors) {
  const int64_t xs[3] = {2, 3, 4}, c3[1] = {3}, c4[1] = {4}, e[3] = {0, 3, 4};
  tt_t x = mk(KILN_DTYPE_F32, 3, xs, 0), y = mk(KILN_DTYPE_F32, 3, xs, 0);
  tt_t w4 = mk(KILN_DTYPE_F32, 1, c4, 0), r = mk(KILN_DTYPE_F32, 1, c3, 0);
  tt_t ex = mk(KILN_DTYPE_F32, 3, e, 0);
  free(fill(&x.t, 1, 0));
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT,
           kiln_kernel_batch_norm(&x.t, &w4.t, NULL, NULL, NULL, 1, 0.1, 1e-5, &y.t, NULL, NULL));
  KT_CHECK(strstr(kiln_status_message(), "[4]") != NULL);
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT,
           kiln_kernel_batch_norm(&x.t, NULL, NULL, &r.t, NULL, 0, 0.1, 1e-5, &y.t, NULL, NULL));
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT,
           kiln_kernel_batch_norm(&ex.t, NULL, NULL, NULL, NULL, 1, 0.1, 1e-5, &ex.t, NULL, NULL));
  KT_OK(kiln_kernel_batch_norm(&ex.t, NULL, NULL, &r.t, &r.t, 0, 0.1, 1e-5, &ex.t, NULL, NULL));
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT,
           kiln_kernel_batch_norm_backward(&y.t, &x.t, NULL, NULL, NULL, NULL, NULL, 1, 1e-5,
                                           &y.t, NULL, NULL));
  free(x.mem), free(y.mem), free(w4.mem), free(r.mem), free(ex.mem);
}

KT_MAIN()
