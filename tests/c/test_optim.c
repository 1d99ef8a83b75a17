/* SPDX-License-Identifier: Apache-2.0 */
/* test_optim.c - fused Adam/AdamW and SGD kernels (kiln/kernels/optim.h) against a serial
 * reference written from torch's CPU fused-kernel formulas (AVX2 build: fused multiply-adds,
 * scalar tail for the last numel % 8 f32 elements), for contiguous, strided, multi-chunk and
 * many-tensor calls; grad_scale / found_inf; half dtypes; argument checks. */
#include <stdint.h>

#include "kernels/half.h"
#include "kiln/kernels/optim.h"
#include "kiln_test.h"

typedef struct adam_cfg {
  double lr, b1, b2, wd, eps;
  int amsgrad, maximize, adamw;
  const float* scale;
} adam_cfg_t;

/* torch adam_math in f32, element i of n (tail: i >= n - n % lanes; torch's AVX2 build has 8
 * lanes for f32, 16 for f16/bf16). */
static void ref_adam_lanes(const adam_cfg_t* c, double step, int64_t n, int lanes, float* p,
                           float* g, float* m, float* v, float* vmax) {
  const double bc1 = 1 - pow(c->b1, step), bc2 = 1 - pow(c->b2, step);
  const float w = (float)(1 - c->b1);
  for (int64_t i = 0; i < n; i++) {
    const int tail = i >= n - n % lanes;
    float gi = g[i], pi = p[i];
    if (c->scale) {
      gi = gi / *c->scale;
      g[i] = gi;
    }
    if (c->maximize) gi = -gi;
    if (c->wd != 0) {
      if (c->adamw)
        pi = pi * (float)(1 - c->lr * c->wd);
      else
        gi = fmaf(pi, (float)c->wd, gi);
    }
    m[i] = fabsf(w) < 0.5f ? fmaf(w, gi - m[i], m[i]) : fmaf(w - 1.0f, gi - m[i], gi);
    const float cg = (float)(1 - c->b2) * gi;
    if (tail) {
      const float cgg = cg * gi;
      v[i] = fmaf(v[i], (float)c->b2, cgg);
    } else {
      const float vb = v[i] * (float)c->b2;
      v[i] = fmaf(cg, gi, vb);
    }
    float s = v[i];
    if (c->amsgrad) {
      s = vmax[i] > v[i] ? vmax[i] : v[i];
      vmax[i] = s;
    }
    const float den = sqrtf(s) / (float)sqrt(bc2) + (float)c->eps;
    const float upd = ((float)(-(c->lr / bc1)) * m[i]) / den;
    p[i] = pi + upd;
  }
}

static void ref_adam_f32(const adam_cfg_t* c, double step, int64_t n, float* p, float* g, float* m,
                         float* v, float* vmax) {
  ref_adam_lanes(c, step, n, 8, p, g, m, v, vmax);
}

static void fill(float* x, int64_t n, uint32_t seed, float lo, float hi) {
  uint32_t s = seed * 2654435761u + 1u;
  for (int64_t i = 0; i < n; i++) {
    s = s * 1664525u + 1013904223u;
    x[i] = lo + (hi - lo) * (float)(s >> 8) / 16777216.0f;
  }
}

typedef struct state {
  int64_t n;
  float *p, *g, *m, *v, *vm;
  kiln_tensor_t tp, tg, tm, tv, tvm;
} state_t;

static void state_init(state_t* s, int64_t n, uint32_t seed) {
  s->n = n;
  float** bufs[5] = {&s->p, &s->g, &s->m, &s->v, &s->vm};
  kiln_tensor_t* ts[5] = {&s->tp, &s->tg, &s->tm, &s->tv, &s->tvm};
  for (int k = 0; k < 5; k++) {
    *bufs[k] = malloc(sizeof(float) * (size_t)(n ? n : 1));
    kiln_tensor_init_contiguous(ts[k], *bufs[k], KILN_DTYPE_F32, 1, &n);
  }
  fill(s->p, n, seed, -1, 1);
  fill(s->g, n, seed + 1, -2, 2);
  fill(s->m, n, seed + 2, -0.1f, 0.1f);
  fill(s->v, n, seed + 3, 0, 0.01f);
  fill(s->vm, n, seed + 4, 0, 0.012f);
}

static void state_copy(state_t* d, const state_t* s) {
  state_init(d, s->n, 0);
  const size_t b = sizeof(float) * (size_t)s->n;
  memcpy(d->p, s->p, b);
  memcpy(d->g, s->g, b);
  memcpy(d->m, s->m, b);
  memcpy(d->v, s->v, b);
  memcpy(d->vm, s->vm, b);
}

static void state_free(state_t* s) {
  free(s->p);
  free(s->g);
  free(s->m);
  free(s->v);
  free(s->vm);
}

static int64_t count_diff(const float* a, const float* b, int64_t n) {
  int64_t d = 0;
  for (int64_t i = 0; i < n; i++) d += memcmp(&a[i], &b[i], 4) != 0;
  return d;
}

static kiln_status_t run_adam(state_t* s, const adam_cfg_t* c, double step) {
  kiln_tensor_t *p = &s->tp, *g = &s->tg, *m = &s->tm, *v = &s->tv, *vm = &s->tvm;
  return kiln_kernel_fused_adamw(1, &p, &g, &m, &v, c->amsgrad ? &vm : NULL, &step, c->lr, c->b1,
                                 c->b2, c->wd, c->eps, c->amsgrad, c->maximize, c->adamw,
                                 c->scale, NULL);
}

KT_TEST(adam_matches_reference_bitwise) {
  static const int64_t sizes[] = {1, 7, 8, 9, 31, 1000, 100003};
  const float scale = 64.0f;
  const adam_cfg_t cfgs[] = {
      {1e-3, 0.9, 0.999, 0.0, 1e-8, 0, 0, 1, NULL},  {1e-2, 0.9, 0.999, 0.01, 1e-8, 0, 0, 1, NULL},
      {1e-2, 0.8, 0.99, 0.05, 1e-6, 0, 0, 0, NULL},  {3e-3, 0.9, 0.999, 0.1, 1e-8, 1, 1, 1, NULL},
      {1e-3, 0.3, 0.95, 0.0, 1e-8, 1, 0, 0, &scale}, /* beta1 < 0.5: the other lerp form */
  };
  for (size_t ci = 0; ci < sizeof cfgs / sizeof cfgs[0]; ci++) {
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
      state_t a, r;
      state_init(&a, sizes[si], (uint32_t)(ci * 31 + si));
      state_copy(&r, &a);
      for (int step = 1; step <= 3; step++) {
        KT_OK(run_adam(&a, &cfgs[ci], step));
        ref_adam_f32(&cfgs[ci], step, r.n, r.p, r.g, r.m, r.v, r.vm);
      }
      const int64_t n = a.n;
      const int64_t d = count_diff(a.p, r.p, n) + count_diff(a.g, r.g, n) +
                        count_diff(a.m, r.m, n) + count_diff(a.v, r.v, n) +
                        count_diff(a.vm, r.vm, n);
      if (d) fprintf(stderr, "  cfg %zu n %lld: %lld values differ\n", ci, (long long)n, (long long)d);
      KT_CHECK(d == 0);
      state_free(&a);
      state_free(&r);
    }
  }
}

KT_TEST(adam_strided_equals_contiguous) {
  enum { R = 45, C = 37 }; /* numel % 8 != 0: the tail is by logical index */
  state_t a, t;
  state_init(&a, R * C, 5);
  state_copy(&t, &a);
  /* t's buffers hold the transposes; its descriptors view them as [R, C] */
  float* bufs[5] = {t.p, t.g, t.m, t.v, t.vm};
  const float* src[5] = {a.p, a.g, a.m, a.v, a.vm};
  kiln_tensor_t* ts[5] = {&t.tp, &t.tg, &t.tm, &t.tv, &t.tvm};
  kiln_tensor_t* as[5] = {&a.tp, &a.tg, &a.tm, &a.tv, &a.tvm};
  int64_t shape[2] = {R, C};
  for (int k = 0; k < 5; k++) {
    for (int i = 0; i < R; i++)
      for (int j = 0; j < C; j++) bufs[k][j * R + i] = src[k][i * C + j];
    kiln_tensor_init_contiguous(ts[k], bufs[k], KILN_DTYPE_F32, 2, shape);
    ts[k]->strides[0] = 1;
    ts[k]->strides[1] = R;
    kiln_tensor_init_contiguous(as[k], (void*)src[k], KILN_DTYPE_F32, 2, shape);
  }
  const adam_cfg_t c = {1e-2, 0.9, 0.999, 0.01, 1e-8, 1, 0, 1, NULL};
  for (int step = 1; step <= 2; step++) {
    KT_OK(run_adam(&a, &c, step));
    KT_OK(run_adam(&t, &c, step));
  }
  int64_t bad = 0;
  for (int k = 0; k < 5; k++)
    for (int i = 0; i < R; i++)
      for (int j = 0; j < C; j++) bad += bufs[k][j * R + i] != src[k][i * C + j];
  KT_CHECK(bad == 0);
  state_free(&a);
  state_free(&t);
}

KT_TEST(adam_many_tensors_and_found_inf) {
  enum { T = 300 }; /* more than one batch of tensors */
  state_t a[T], r[T];
  kiln_tensor_t *p[T], *g[T], *m[T], *v[T];
  double steps[T];
  const adam_cfg_t c = {1e-3, 0.9, 0.999, 0.01, 1e-8, 0, 0, 1, NULL};
  for (int t = 0; t < T; t++) {
    state_init(&a[t], (t * 37) % 301, (uint32_t)t); /* includes empty tensors */
    state_copy(&r[t], &a[t]);
    p[t] = &a[t].tp;
    g[t] = &a[t].tg;
    m[t] = &a[t].tm;
    v[t] = &a[t].tv;
    steps[t] = 1 + t % 5;
  }
  const float inf1 = 1.0f, inf0 = 0.0f;
  KT_OK(kiln_kernel_fused_adamw(T, p, g, m, v, NULL, steps, c.lr, c.b1, c.b2, c.wd, c.eps, 0, 0,
                                1, NULL, &inf1));
  int64_t changed = 0;
  for (int t = 0; t < T; t++) changed += count_diff(a[t].p, r[t].p, a[t].n);
  KT_CHECK(changed == 0);
  KT_OK(kiln_kernel_fused_adamw(T, p, g, m, v, NULL, steps, c.lr, c.b1, c.b2, c.wd, c.eps, 0, 0,
                                1, NULL, &inf0));
  int64_t bad = 0;
  for (int t = 0; t < T; t++) {
    ref_adam_f32(&c, steps[t], r[t].n, r[t].p, r[t].g, r[t].m, r[t].v, r[t].vm);
    bad += count_diff(a[t].p, r[t].p, a[t].n) + count_diff(a[t].v, r[t].v, a[t].n);
  }
  KT_CHECK(bad == 0);
  for (int t = 0; t < T; t++) {
    state_free(&a[t]);
    state_free(&r[t]);
  }
}

KT_TEST(adam_bf16_f16_compute_in_f32) {
  enum { N = 1037 };
  for (int di = 0; di < 2; di++) {
    const kiln_dtype_t dt = di ? KILN_DTYPE_F16 : KILN_DTYPE_BF16;
    uint16_t h[4][N];
    float f[4][N];
    for (int k = 0; k < 4; k++) {
      fill(f[k], N, (uint32_t)(k + 10 * di), k == 3 ? 0.0f : -1.0f, k == 3 ? 0.01f : 1.0f);
      for (int i = 0; i < N; i++) {
        h[k][i] = di ? kiln_f32_to_f16(f[k][i]) : kiln_f32_to_bf16(f[k][i]);
        f[k][i] = di ? kiln_f16_to_f32(h[k][i]) : kiln_bf16_to_f32(h[k][i]);
      }
    }
    kiln_tensor_t t[4];
    kiln_tensor_t* tp[4];
    int64_t n = N;
    for (int k = 0; k < 4; k++) {
      kiln_tensor_init_contiguous(&t[k], h[k], dt, 1, &n);
      tp[k] = &t[k];
    }
    const double step = 2;
    const adam_cfg_t c = {1e-2, 0.9, 0.999, 0.01, 1e-8, 0, 0, 1, NULL};
    KT_OK(kiln_kernel_fused_adamw(1, &tp[0], &tp[1], &tp[2], &tp[3], NULL, &step, c.lr, c.b1,
                                  c.b2, c.wd, c.eps, 0, 0, 1, NULL, NULL));
    /* reference: f32 math on the widened values with the 16-lane tail, rounded once */
    float vm[N] = {0};
    float p2[N], g2[N], m2[N], v2[N];
    memcpy(p2, f[0], sizeof p2);
    memcpy(g2, f[1], sizeof g2);
    memcpy(m2, f[2], sizeof m2);
    memcpy(v2, f[3], sizeof v2);
    ref_adam_lanes(&c, step, N, 16, p2, g2, m2, v2, vm);
    int64_t bad = 0;
    for (int i = 0; i < N; i++) {
      const uint16_t wp = di ? kiln_f32_to_f16(p2[i]) : kiln_f32_to_bf16(p2[i]);
      const uint16_t wm = di ? kiln_f32_to_f16(m2[i]) : kiln_f32_to_bf16(m2[i]);
      const uint16_t wv = di ? kiln_f32_to_f16(v2[i]) : kiln_f32_to_bf16(v2[i]);
      bad += wp != h[0][i] || wm != h[2][i] || wv != h[3][i];
    }
    KT_CHECK(bad == 0);
  }
}

static void ref_sgd_f32(int64_t n, float* p, float* g, float* b, double wd, double mom, double lr,
                        double damp, int nesterov, int first) {
  for (int64_t i = 0; i < n; i++) {
    float gi = fmaf(p[i], (float)wd, g[i]);
    if (mom != 0) {
      if (first) {
        b[i] = gi;
      } else if (i >= n - n % 8) { /* scalar tail */
        const float gd = gi * (float)(1 - damp);
        b[i] = fmaf(b[i], (float)mom, gd);
      } else {
        const float bm = b[i] * (float)mom;
        b[i] = fmaf((float)(1 - damp), gi, bm);
      }
      gi = nesterov ? fmaf(b[i], (float)mom, gi) : b[i];
    }
    p[i] = fmaf(gi, (float)-lr, p[i]);
  }
}

KT_TEST(sgd_matches_reference) {
  static const int64_t sizes[] = {3, 64, 70001};
  for (int mode = 0; mode < 3; mode++) {
    for (size_t si = 0; si < 3; si++) {
      state_t a, r;
      state_init(&a, sizes[si], (uint32_t)(mode * 7 + si));
      state_copy(&r, &a);
      const double mom = mode ? 0.9 : 0.0, damp = mode == 1 ? 0.1 : 0.0;
      const int nest = mode == 2;
      kiln_tensor_t *p = &a.tp, *g = &a.tg, *b = &a.tm;
      for (int step = 0; step < 3; step++) {
        KT_OK(kiln_kernel_fused_sgd(1, &p, &g, mode ? &b : NULL, 0.01, mom, 0.1, damp, nest, 0,
                                    step == 0, NULL, NULL));
        ref_sgd_f32(r.n, r.p, r.g, r.m, 0.01, mom, 0.1, damp, nest, step == 0);
      }
      KT_CHECK(count_diff(a.p, r.p, a.n) == 0);
      KT_CHECK(count_diff(a.m, r.m, a.n) == 0);
      state_free(&a);
      state_free(&r);
    }
  }
  /* grad_scale unscales and stores the grads; maximize flips the step */
  float p[2] = {1, 1}, g[2] = {8, -8};
  int64_t n = 2;
  kiln_tensor_t tp, tg, *pp = &tp, *pg = &tg;
  kiln_tensor_init_contiguous(&tp, p, KILN_DTYPE_F32, 1, &n);
  kiln_tensor_init_contiguous(&tg, g, KILN_DTYPE_F32, 1, &n);
  const float scale = 4.0f;
  KT_OK(kiln_kernel_fused_sgd(1, &pp, &pg, NULL, 0, 0, 0.5, 0, 0, 1, 0, &scale, NULL));
  KT_CHECK(g[0] == 2.0f && g[1] == -2.0f && p[0] == 2.0f && p[1] == 0.0f);
}

KT_TEST(adam_converges_on_quadratic) {
  float p[16], g[16], m[16] = {0}, v[16] = {0};
  int64_t n = 16;
  kiln_tensor_t tp, tg, tm, tv, *pp = &tp, *pg = &tg, *pm = &tm, *pv = &tv;
  kiln_tensor_init_contiguous(&tp, p, KILN_DTYPE_F32, 1, &n);
  kiln_tensor_init_contiguous(&tg, g, KILN_DTYPE_F32, 1, &n);
  kiln_tensor_init_contiguous(&tm, m, KILN_DTYPE_F32, 1, &n);
  kiln_tensor_init_contiguous(&tv, v, KILN_DTYPE_F32, 1, &n);
  for (int i = 0; i < 16; i++) p[i] = (float)i - 8.0f;
  for (int step = 1; step <= 2000; step++) {
    for (int i = 0; i < 16; i++) g[i] = 2.0f * (p[i] - 3.0f);
    const double s = step;
    KT_OK(kiln_kernel_fused_adamw(1, &pp, &pg, &pm, &pv, NULL, &s, 0.05, 0.9, 0.999, 0.0, 1e-8,
                                  0, 0, 1, NULL, NULL));
  }
  for (int i = 0; i < 16; i++) KT_NEAR(p[i], 3.0, 1e-2);
}

KT_TEST(optim_argument_checks) {
  float a[8] = {0}, b[8] = {0}, c[8] = {0}, d[8] = {0};
  double dd[8] = {0};
  int64_t n8 = 8, n7 = 7;
  kiln_tensor_t tp, tg, tm, tv, tbad;
  kiln_tensor_init_contiguous(&tp, a, KILN_DTYPE_F32, 1, &n8);
  kiln_tensor_init_contiguous(&tg, b, KILN_DTYPE_F32, 1, &n8);
  kiln_tensor_init_contiguous(&tm, c, KILN_DTYPE_F32, 1, &n8);
  kiln_tensor_init_contiguous(&tv, d, KILN_DTYPE_F32, 1, &n8);
  kiln_tensor_t *p = &tp, *g = &tg, *m = &tm, *v = &tv, *bad = &tbad;
  const double step = 1;
  for (int i = 0; i < 8; i++) b[i] = 1.0f;
  kiln_tensor_init_contiguous(&tbad, dd, KILN_DTYPE_F64, 1, &n8);
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_kernel_fused_adamw(1, &p, &g, &bad, &v, NULL, &step,
                                                                1e-3, 0.9, 0.999, 0, 1e-8, 0, 0,
                                                                1, NULL, NULL));
  KT_CHECK(strstr(kiln_status_message(), "exp_avgs[0]") != NULL);
  kiln_tensor_init_contiguous(&tbad, d, KILN_DTYPE_F32, 1, &n7);
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_kernel_fused_adamw(1, &p, &g, &m, &bad, NULL, &step,
                                                                1e-3, 0.9, 0.999, 0, 1e-8, 0, 0,
                                                                1, NULL, NULL));
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_kernel_fused_adamw(1, &p, &g, &m, &v, NULL, &step,
                                                                1e-3, 0.9, 0.999, 0, 1e-8, 1, 0,
                                                                1, NULL, NULL));
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_kernel_fused_adamw(1, &p, &g, &m, &v, NULL, &step,
                                                                NAN, 0.9, 0.999, 0, 1e-8, 0, 0, 1,
                                                                NULL, NULL));
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_kernel_fused_adamw(1, &p, &g, &m, &v, NULL, &step,
                                                                1e-3, 1.0, 0.999, 0, 1e-8, 0, 0,
                                                                1, NULL, NULL));
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_kernel_fused_adamw(1, &p, &g, &m, &v, NULL, NULL,
                                                                1e-3, 0.9, 0.999, 0, 1e-8, 0, 0,
                                                                1, NULL, NULL));
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_kernel_fused_adamw(1, NULL, &g, &m, &v, NULL, &step,
                                                                1e-3, 0.9, 0.999, 0, 1e-8, 0, 0,
                                                                1, NULL, NULL));
  int untouched = 1;
  for (int i = 0; i < 8; i++) untouched = untouched && a[i] == 0 && c[i] == 0 && d[i] == 0;
  KT_CHECK(untouched); /* nothing modified on error */
  KT_OK(kiln_kernel_fused_adamw(0, NULL, NULL, NULL, NULL, NULL, NULL, 1e-3, 0.9, 0.999, 0, 1e-8,
                                0, 0, 1, NULL, NULL));
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_kernel_fused_sgd(1, &p, &g, NULL, 0, 0.9, 0.1, 0, 0,
                                                              0, 0, NULL, NULL));
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_kernel_fused_sgd(1, &p, &g, &m, 0, 0.9, 0.1, 0.5, 1,
                                                              0, 0, NULL, NULL));
  int32_t iv[8];
  kiln_tensor_init_contiguous(&tbad, iv, KILN_DTYPE_I32, 1, &n8);
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_kernel_fused_sgd(1, &bad, &bad, NULL, 0, 0, 0.1, 0,
                                                              0, 0, 0, NULL, NULL));
}

KT_MAIN()
