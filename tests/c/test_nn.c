/* SPDX-License-Identifier: Apache-2.0 */
/* test_nn.c - nn kernels (softmax, norms, attention, NLL loss, embedding) against naive double
 * references, on both the AVX2 and the generic primitives.
 *
 * Inputs are rounded to their dtype first, so references see exactly the kernel's inputs.
 * Tolerances: |got - ref| <= atol + rtol*|ref| with, unless a test says otherwise,
 * f32: atol 1e-5, rtol 1e-4 (forward values are O(1); accumulation is f32), f64: 1e-12,
 * f16: 2e-3 rtol / 1e-3 atol, bf16: 1.6e-2 rtol / 8e-3 atol (one or two output ulps).
 * Backward passes of attention use 1e-4 (f32) on gradients of magnitude O(1).
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/half.h"
#include "kernels/nn_internal.h"
#include "kiln/kernels/nn.h"
#include "kiln_test.h"

/* ---- helpers -------------------------------------------------------------------------------- */

static uint64_t g_rng = 0x2545F4914F6CDD1Dull;
static double urand(double lo, double hi) {
  g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
  return lo + (hi - lo) * (double)((g_rng >> 11) & ((1ull << 53) - 1)) / 9007199254740992.0;
}

static double round_to(kiln_dtype_t dt, double v) {
  switch (dt) {
    case KILN_DTYPE_F32: return (float)v;
    case KILN_DTYPE_F16: return kiln_f16_to_f32(kiln_f32_to_f16((float)v));
    case KILN_DTYPE_BF16: return kiln_bf16_to_f32(kiln_f32_to_bf16((float)v));
    default: return v;
  }
}

/* A host tensor: storage with a (possibly permuted) physical layout and the logical values in
 * row-major order in `ref`. */
typedef struct ht {
  kiln_tensor_t t;
  void* mem;
  double* ref;
  int64_t n;
} ht_t;

static int64_t ht_off(const kiln_tensor_t* t, int64_t lin) {
  int64_t off = 0;
  for (int d = t->ndim - 1; d >= 0; d--) {
    off += (lin % t->shape[d]) * t->strides[d];
    lin /= t->shape[d];
  }
  return off;
}

/* perm (NULL = identity): physical dim i holds logical dim perm[i]. */
static ht_t ht_make(kiln_dtype_t dt, int nd, const int64_t* shape, const int* perm, double lo,
                    double hi, int random) {
  ht_t h;
  memset(&h, 0, sizeof h);
  h.t.dtype = dt;
  h.t.ndim = nd;
  h.n = 1;
  for (int d = 0; d < nd; d++) {
    h.t.shape[d] = shape[d];
    h.n *= shape[d];
  }
  int64_t st = 1;
  for (int i = nd - 1; i >= 0; i--) {
    const int ld = perm ? perm[i] : i;
    h.t.strides[ld] = st;
    st *= shape[ld] > 0 ? shape[ld] : 1;
  }
  const size_t es = kiln_dtype_size(dt);
  h.mem = calloc((size_t)(h.n > 0 ? h.n : 1), es);
  h.ref = calloc((size_t)(h.n > 0 ? h.n : 1), sizeof(double));
  h.t.data = h.mem;
  for (int64_t i = 0; i < h.n; i++) {
    double v = random ? round_to(dt, urand(lo, hi)) : 0.0;
    if (dt == KILN_DTYPE_BOOL || dt == KILN_DTYPE_I64 || dt == KILN_DTYPE_I32) v = 0;
    h.ref[i] = v;
    if (kiln_dtype_is_float(dt)) kiln_nn_set((char*)h.mem + ht_off(&h.t, i) * (int64_t)es, dt, v);
  }
  return h;
}

static ht_t ht_rand(kiln_dtype_t dt, int nd, const int64_t* shape, double lo, double hi) {
  return ht_make(dt, nd, shape, NULL, lo, hi, 1);
}
static ht_t ht_zeros(kiln_dtype_t dt, int nd, const int64_t* shape) {
  return ht_make(dt, nd, shape, NULL, 0, 0, 0);
}
static double ht_get(const ht_t* h, int64_t i) {
  return kiln_nn_get((const char*)h->mem + ht_off(&h->t, i) * (int64_t)kiln_dtype_size(h->t.dtype),
                     h->t.dtype);
}
static void ht_set_ref(ht_t* h, int64_t i, double v) { /* sets storage and ref (any dtype) */
  h->ref[i] = v;
  char* p = (char*)h->mem + ht_off(&h->t, i) * (int64_t)kiln_dtype_size(h->t.dtype);
  switch (h->t.dtype) {
    case KILN_DTYPE_I64: *(int64_t*)p = (int64_t)v; break;
    case KILN_DTYPE_I32: *(int32_t*)p = (int32_t)v; break;
    case KILN_DTYPE_BOOL: *(uint8_t*)p = v != 0; break;
    default: kiln_nn_set(p, h->t.dtype, v);
  }
}
static void ht_free(ht_t* h) {
  free(h->mem);
  free(h->ref);
  h->mem = NULL;
  h->ref = NULL;
}

static double tol_r(kiln_dtype_t dt) {
  return dt == KILN_DTYPE_F64 ? 1e-12 : dt == KILN_DTYPE_F16 ? 2e-3 : dt == KILN_DTYPE_BF16 ? 1.6e-2 : 1e-4;
}
static double tol_a(kiln_dtype_t dt) {
  return dt == KILN_DTYPE_F64 ? 1e-12 : dt == KILN_DTYPE_F16 ? 1e-3 : dt == KILN_DTYPE_BF16 ? 8e-3 : 1e-5;
}

/* Number of elements of `got` off from ref by more than atol + rtol*|ref| (NaN must match). */
static int64_t n_bad(const ht_t* got, const double* ref, double atol, double rtol,
                     const char* what) {
  int64_t bad = 0;
  for (int64_t i = 0; i < got->n; i++) {
    const double g = ht_get(got, i), r = ref[i];
    const int ok = (isnan(r) && isnan(g)) || (isinf(r) && g == r) ||
                   fabs(g - r) <= atol + rtol * fabs(r);
    if (!ok) {
      if (bad < 4) fprintf(stderr, "    %s[%lld]: got %.9g want %.9g\n", what, (long long)i, g, r);
      bad++;
    }
  }
  return bad;
}
#define KT_CLOSE(got, ref, atol, rtol) KT_CHECK(n_bad(&(got), (ref), (atol), (rtol), #got) == 0)

static const kiln_dtype_t kFloat[4] = {KILN_DTYPE_F32, KILN_DTYPE_F16, KILN_DTYPE_BF16, KILN_DTYPE_F64};

/* ---- softmax -------------------------------------------------------------------------------- */

/* Reference softmax of ht x along dim into r (row-major logical order). */
static void ref_softmax(const ht_t* x, int dim, int lg, double* r) {
  const kiln_tensor_t* t = &x->t;
  int64_t inner = 1, n = t->ndim ? t->shape[dim] : 1;
  for (int d = dim + 1; d < t->ndim; d++) inner *= t->shape[d];
  const int64_t outer = n ? x->n / (n * inner) : 0;
  for (int64_t o = 0; o < outer; o++)
    for (int64_t i = 0; i < inner; i++) {
      const double* xr = x->ref + o * n * inner + i;
      double m = -INFINITY, s = 0;
      for (int64_t j = 0; j < n; j++) m = xr[j * inner] > m ? xr[j * inner] : m;
      for (int64_t j = 0; j < n; j++) s += exp(xr[j * inner] - m);
      for (int64_t j = 0; j < n; j++)
        r[o * n * inner + i + j * inner] = lg ? xr[j * inner] - m - log(s) : exp(xr[j * inner] - m) / s;
    }
}

static void softmax_case(kiln_dtype_t dt, kiln_dtype_t odt, int nd, const int64_t* shape,
                         const int* pin, const int* pout, int dim, int lg) {
  ht_t x = ht_make(dt, nd, shape, pin, -4, 4, 1);
  ht_t y = ht_make(odt, nd, shape, pout, 0, 0, 0);
  double* r = calloc((size_t)(x.n + 1), sizeof(double));
  ref_softmax(&x, dim, lg, r);
  KT_OK(kiln_kernel_softmax(&x.t, dim - nd, lg, &y.t));
  const kiln_dtype_t lo = dt == KILN_DTYPE_F64 ? odt : (odt == KILN_DTYPE_F32 ? dt : odt);
  KT_CLOSE(y, r, tol_a(lo), tol_r(lo));
  /* backward, from the computed forward */
  ht_t g = ht_make(odt, nd, shape, pout, -1, 1, 1);
  ht_t gi = ht_make(odt, nd, shape, pin, 0, 0, 0);
  int64_t inner = 1, n = nd ? shape[dim] : 1;
  for (int d = dim + 1; d < nd; d++) inner *= shape[d];
  const int64_t outer = n ? x.n / (n * inner) : 0;
  for (int64_t o = 0; o < outer; o++)
    for (int64_t i = 0; i < inner; i++) {
      double s = 0;
      for (int64_t j = 0; j < n; j++) {
        const int64_t at = o * n * inner + i + j * inner;
        s += lg ? g.ref[at] : g.ref[at] * ht_get(&y, at);
      }
      for (int64_t j = 0; j < n; j++) {
        const int64_t at = o * n * inner + i + j * inner;
        const double yv = ht_get(&y, at);
        r[at] = lg ? g.ref[at] - exp(yv) * s : yv * (g.ref[at] - s);
      }
    }
  KT_OK(kiln_kernel_softmax_backward(&g.t, &y.t, dim, lg, &gi.t));
  KT_CLOSE(gi, r, 4 * tol_a(odt), 4 * tol_r(odt));
  ht_free(&x);
  ht_free(&y);
  ht_free(&g);
  ht_free(&gi);
  free(r);
}

static void softmax_suite(void) {
  for (int lg = 0; lg < 2; lg++) {
    const int64_t s1[2] = {3, 1000}, s2[2] = {5, 1}, s3[3] = {4, 5, 6}, s4[2] = {6, 37};
    softmax_case(KILN_DTYPE_F32, KILN_DTYPE_F32, 2, s1, NULL, NULL, 1, lg);
    softmax_case(KILN_DTYPE_F32, KILN_DTYPE_F32, 2, s2, NULL, NULL, 1, lg);
    const int64_t s5[2] = {3, 5000}; /* rows beyond the stack scratch */
    softmax_case(KILN_DTYPE_BF16, KILN_DTYPE_BF16, 2, s5, NULL, NULL, 1, lg);
    const int p1[3] = {2, 0, 1}, p2[3] = {1, 2, 0};
    for (int d = 0; d < 3; d++) softmax_case(KILN_DTYPE_F32, KILN_DTYPE_F32, 3, s3, p1, p2, d, lg);
    for (int i = 0; i < 4; i++)
      for (int d = 0; d < 2; d++) softmax_case(kFloat[i], kFloat[i], 2, s4, NULL, NULL, d, lg);
    softmax_case(KILN_DTYPE_F16, KILN_DTYPE_F32, 2, s4, NULL, NULL, 1, lg); /* half_to_float */
    softmax_case(KILN_DTYPE_F32, KILN_DTYPE_F32, 0, s1, NULL, NULL, 0, lg);  /* rank 0 */
  }
}

KT_TEST(softmax_matches_reference) { softmax_suite(); }
KT_TEST(softmax_matches_reference_generic) {
  kiln_nn_force_generic(1);
  softmax_suite();
  kiln_nn_force_generic(0);
}
KT_TEST(softmax_matches_reference_avx2) {
  kiln_nn_force_generic(2);
  softmax_suite();
  kiln_nn_force_generic(0);
}

KT_TEST(softmax_special_values_inplace_and_errors) {
  float x[8] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY, 1, 2, 3, 4};
  kiln_tensor_t t;
  const int64_t shape[2] = {2, 4};
  kiln_tensor_init_contiguous(&t, x, KILN_DTYPE_F32, 2, shape);
  KT_OK(kiln_kernel_softmax(&t, 1, 0, &t)); /* in place */
  for (int i = 0; i < 4; i++) KT_CHECK(isnan(x[i])); /* torch: all -inf -> NaN */
  double s = 0, want = exp(1) + exp(2) + exp(3) + exp(4);
  for (int i = 4; i < 8; i++) s += x[i];
  KT_NEAR(s, 1.0, 1e-6);
  KT_NEAR(x[7], exp(4) / want, 1e-6);
  float z = 3.0f, o = 0;
  kiln_tensor_t tz, to;
  kiln_tensor_init_contiguous(&tz, &z, KILN_DTYPE_F32, 0, NULL);
  kiln_tensor_init_contiguous(&to, &o, KILN_DTYPE_F32, 0, NULL);
  KT_OK(kiln_kernel_softmax(&tz, -1, 1, &to));
  KT_CHECK(o == 0.0f);
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_kernel_softmax(&t, 2, 0, &t));
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_kernel_softmax(&t, 0, 0, &to));
  KT_CHECK(strstr(kiln_status_message(), "[2, 4]") != NULL);
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_kernel_softmax(NULL, 0, 0, &to));
  const int64_t e[2] = {0, 4};
  kiln_tensor_t te;
  kiln_tensor_init_contiguous(&te, NULL, KILN_DTYPE_F32, 2, e);
  KT_OK(kiln_kernel_softmax(&te, 1, 0, &te));
}

/* ---- layer norm / rms norm ------------------------------------------------------------------ */

static void norm_case(int rms, kiln_dtype_t dt, kiln_dtype_t wdt, int nd, const int64_t* shape,
                      int nn, int has_w, int has_b, const int* perm) {
  const double eps = rms ? -1.0 : 1e-5;
  ht_t x = ht_make(dt, nd, shape, perm, -2, 3, 1);
  ht_t y = ht_zeros(dt, nd, shape);
  ht_t w = ht_rand(wdt, nn, shape + nd - nn, -1.5, 1.5);
  ht_t b = ht_rand(wdt, nn, shape + nd - nn, -1, 1);
  int64_t sshape[KILN_MAX_DIMS];
  for (int d = 0; d < nd; d++) sshape[d] = d < nd - nn ? shape[d] : 1;
  const kiln_dtype_t sdt = dt == KILN_DTYPE_F64 ? KILN_DTYPE_F64 : KILN_DTYPE_F32;
  ht_t mean = ht_zeros(sdt, nd, sshape), rstd = ht_zeros(sdt, nd, sshape);
  const int64_t N = w.n, M = N ? x.n / N : 0;
  double* ry = calloc((size_t)x.n + 1, sizeof(double));
  double* rm = calloc((size_t)M + 1, sizeof(double));
  double* rr = calloc((size_t)M + 1, sizeof(double));
  const double e = eps >= 0 ? eps : (dt == KILN_DTYPE_F64 ? 2.220446049250313e-16 : 1.1920928955078125e-07);
  for (int64_t m = 0; m < M; m++) {
    const double* xr = x.ref + m * N;
    double mu = 0, var = 0;
    if (!rms) {
      for (int64_t i = 0; i < N; i++) mu += xr[i];
      mu /= (double)N;
    }
    for (int64_t i = 0; i < N; i++) var += (xr[i] - mu) * (xr[i] - mu);
    var /= (double)N;
    rm[m] = mu;
    rr[m] = 1 / sqrt(var + e);
    for (int64_t i = 0; i < N; i++)
      ry[m * N + i] = (xr[i] - mu) * rr[m] * (has_w ? w.ref[i] : 1) + (has_b && !rms ? b.ref[i] : 0);
  }
  if (rms)
    KT_OK(kiln_kernel_rms_norm(&x.t, nn, has_w ? &w.t : NULL, eps, &y.t, &rstd.t));
  else
    KT_OK(kiln_kernel_layer_norm(&x.t, nn, has_w ? &w.t : NULL, has_b ? &b.t : NULL, eps, &y.t,
                                 &mean.t, &rstd.t));
  KT_CLOSE(y, ry, 2 * tol_a(dt), 2 * tol_r(dt));
  if (!rms) KT_CLOSE(mean, rm, 1e-6, 1e-5);
  KT_CLOSE(rstd, rr, 1e-6, 1e-5);

  /* backward from the kernel's mean/rstd */
  ht_t g = ht_rand(dt, nd, shape, -1, 1);
  ht_t gx = ht_make(dt, nd, shape, perm, 0, 0, 0);
  ht_t gw = ht_zeros(wdt, nn, shape + nd - nn), gb = ht_zeros(wdt, nn, shape + nd - nn);
  double* rgx = calloc((size_t)x.n + 1, sizeof(double));
  double* rgw = calloc((size_t)N + 1, sizeof(double));
  double* rgb = calloc((size_t)N + 1, sizeof(double));
  double gmax = 0;
  for (int64_t m = 0; m < M; m++) {
    const double* xr = x.ref + m * N;
    const double* gr = g.ref + m * N;
    double s1 = 0, s2 = 0;
    for (int64_t i = 0; i < N; i++) {
      const double gwv = gr[i] * (has_w ? w.ref[i] : 1), xh = (xr[i] - rm[m]) * rr[m];
      s1 += gwv;
      s2 += gwv * xh;
      rgw[i] += gr[i] * xh;
      rgb[i] += gr[i];
    }
    for (int64_t i = 0; i < N; i++) {
      const double gwv = gr[i] * (has_w ? w.ref[i] : 1), xh = (xr[i] - rm[m]) * rr[m];
      rgx[m * N + i] = rms ? rr[m] * (gwv - xh * s2 / (double)N)
                           : rr[m] * (gwv - s1 / (double)N - xh * s2 / (double)N);
      gmax = fmax(gmax, fabs(rgx[m * N + i]));
    }
  }
  if (rms)
    KT_OK(kiln_kernel_rms_norm_backward(&g.t, &x.t, &rstd.t, has_w ? &w.t : NULL, nn, &gx.t,
                                        &gw.t));
  else
    KT_OK(kiln_kernel_layer_norm_backward(&g.t, &x.t, &mean.t, &rstd.t, has_w ? &w.t : NULL, nn,
                                          &gx.t, &gw.t, &gb.t));
  KT_CLOSE(gx, rgx, 4 * tol_a(dt) * (1 + gmax), 4 * tol_r(dt));
  const double sm = sqrt((double)M + 1);
  KT_CLOSE(gw, rgw, 4 * tol_a(wdt) * sm, 4 * tol_r(wdt));
  if (!rms) KT_CLOSE(gb, rgb, 4 * tol_a(wdt) * sm, 4 * tol_r(wdt));
  ht_t* all[] = {&x, &y, &w, &b, &mean, &rstd, &g, &gx, &gw, &gb};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) ht_free(all[i]);
  free(ry);
  free(rm);
  free(rr);
  free(rgx);
  free(rgw);
  free(rgb);
}

static void norm_suite(void) {
  for (int rms = 0; rms < 2; rms++) {
    const int64_t a[2] = {7, 33}, b[4] = {2, 3, 4, 5}, c[2] = {600, 700}, d[2] = {3, 1},
                  e[2] = {0, 8};
    const int tr[2] = {1, 0};
    norm_case(rms, KILN_DTYPE_F32, KILN_DTYPE_F32, 2, a, 1, 1, 1, NULL);
    norm_case(rms, KILN_DTYPE_F32, KILN_DTYPE_F32, 2, a, 1, 0, 0, NULL);
    norm_case(rms, KILN_DTYPE_F32, KILN_DTYPE_F32, 4, b, 2, 1, 0, NULL);
    norm_case(rms, KILN_DTYPE_F32, KILN_DTYPE_F32, 2, c, 1, 1, 1, NULL);
    norm_case(rms, KILN_DTYPE_F32, KILN_DTYPE_F32, 2, d, 1, 1, 1, NULL);
    const int64_t big[2] = {3, 5000}; /* heap scratch and parameter copies */
    norm_case(rms, KILN_DTYPE_F16, KILN_DTYPE_F32, 2, big, 1, 1, 1, NULL);
    norm_case(rms, KILN_DTYPE_F32, KILN_DTYPE_F32, 2, e, 1, 1, 1, NULL);
    norm_case(rms, KILN_DTYPE_F32, KILN_DTYPE_F32, 2, a, 1, 1, 1, tr); /* transposed x */
    norm_case(rms, KILN_DTYPE_F64, KILN_DTYPE_F64, 2, a, 1, 1, 1, NULL);
    norm_case(rms, KILN_DTYPE_F16, KILN_DTYPE_F16, 2, a, 1, 1, 1, NULL);
    norm_case(rms, KILN_DTYPE_BF16, KILN_DTYPE_F32, 2, a, 1, 1, 1, NULL); /* mixed */
  }
}

KT_TEST(norms_match_reference) { norm_suite(); }
KT_TEST(norms_match_reference_generic) {
  kiln_nn_force_generic(1);
  norm_suite();
  kiln_nn_force_generic(0);
}

KT_TEST(norm_errors) {
  const int64_t s[2] = {4, 6}, w5[1] = {5}, m3[1] = {3};
  ht_t x = ht_rand(KILN_DTYPE_F32, 2, s, -1, 1), y = ht_zeros(KILN_DTYPE_F32, 2, s);
  ht_t w = ht_rand(KILN_DTYPE_F32, 1, w5, -1, 1), m = ht_zeros(KILN_DTYPE_F32, 1, m3);
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_kernel_layer_norm(&x.t, 1, &w.t, NULL, 1e-5, &y.t, NULL, NULL));
  KT_CHECK(strstr(kiln_status_message(), "[5]") != NULL && strstr(kiln_status_message(), "[4, 6]") != NULL);
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_kernel_layer_norm(&x.t, 3, NULL, NULL, 1e-5, &y.t, NULL, NULL));
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_kernel_layer_norm(&x.t, 1, NULL, NULL, 1e-5, &y.t, &m.t, NULL));
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_kernel_rms_norm(&x.t, 0, NULL, -1, &y.t, NULL));
  KT_OK(kiln_kernel_rms_norm(&x.t, 2, NULL, -1, &y.t, NULL));
  ht_free(&x);
  ht_free(&y);
  ht_free(&w);
  ht_free(&m);
}

/* ---- embedding ------------------------------------------------------------------------------ */

KT_TEST(embedding_forward) {
  const int64_t ws[2] = {10, 7}, is[2] = {3, 4}, os[3] = {3, 4, 7};
  const int tr[2] = {1, 0};
  for (int v = 0; v < 3; v++) {
    const kiln_dtype_t wdt = v == 2 ? KILN_DTYPE_F16 : KILN_DTYPE_F32;
    ht_t w = ht_make(wdt, 2, ws, v == 1 ? tr : NULL, -1, 1, 1);
    ht_t ix = ht_zeros(v ? KILN_DTYPE_I32 : KILN_DTYPE_I64, 2, is);
    for (int64_t i = 0; i < ix.n; i++) ht_set_ref(&ix, i, (double)((i * 7 + 3) % 10));
    ht_t out = ht_zeros(wdt, 3, os);
    KT_OK(kiln_kernel_embedding(&w.t, &ix.t, &out.t));
    double* r = malloc(sizeof(double) * (size_t)out.n);
    for (int64_t i = 0; i < ix.n; i++)
      for (int64_t j = 0; j < 7; j++) r[i * 7 + j] = w.ref[(int64_t)ix.ref[i] * 7 + j];
    KT_CLOSE(out, r, 0, 0);
    ht_set_ref(&ix, 5, 10);
    KT_FAILS(KILN_ERROR_OUT_OF_RANGE, kiln_kernel_embedding(&w.t, &ix.t, &out.t));
    ht_set_ref(&ix, 5, -1);
    KT_FAILS(KILN_ERROR_OUT_OF_RANGE, kiln_kernel_embedding(&w.t, &ix.t, &out.t));
    KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_kernel_embedding(&w.t, &w.t, &out.t));
    free(r);
    ht_free(&w);
    ht_free(&ix);
    ht_free(&out);
  }
}

/* Backward against a float accumulation in index order: bitwise equal for f32 (deterministic). */
static void emb_bwd_case(kiln_dtype_t dt, int64_t T, int64_t V, int64_t D, int64_t pad, int freq) {
  const int64_t is[1] = {T}, gs[2] = {T, D}, ws[2] = {V, D};
  ht_t ix = ht_zeros(KILN_DTYPE_I64, 1, is);
  for (int64_t i = 0; i < T; i++) ht_set_ref(&ix, i, (double)((i * i * 31 + i * 7) % V));
  ht_t g = ht_rand(dt, 2, gs, -1, 1);
  ht_t gw = ht_rand(dt, 2, ws, -5, 5); /* garbage: must be overwritten */
  float* acc = calloc((size_t)(V * D), sizeof(float));
  double* cnt = calloc((size_t)V, sizeof(double));
  for (int64_t t = 0; t < T; t++) {
    const int64_t v = (int64_t)ix.ref[t];
    cnt[v] += 1;
    if (v == pad) continue;
    for (int64_t j = 0; j < D; j++) acc[v * D + j] += (float)g.ref[t * D + j];
  }
  double* r = malloc(sizeof(double) * (size_t)(V * D));
  for (int64_t i = 0; i < V * D; i++)
    r[i] = round_to(dt, freq && cnt[i / D] > 0 ? acc[i] / (float)cnt[i / D] : acc[i]);
  KT_OK(kiln_kernel_embedding_backward_ex(&g.t, &ix.t, V, pad, freq, &gw.t));
  KT_CLOSE(gw, r, freq ? 1e-6 : 0, freq ? 1e-6 : 0);
  ht_free(&ix);
  ht_free(&g);
  ht_free(&gw);
  free(acc);
  free(cnt);
  free(r);
}

KT_TEST(embedding_backward) {
  emb_bwd_case(KILN_DTYPE_F32, 12, 10, 7, -1, 0);
  emb_bwd_case(KILN_DTYPE_F32, 12, 10, 7, 3, 0);
  emb_bwd_case(KILN_DTYPE_F32, 5000, 50, 33, -1, 0); /* heap CSR, many rows per vocab entry */
  emb_bwd_case(KILN_DTYPE_F32, 300, 1000, 5, 0, 1);  /* unused rows, scale_grad_by_freq */
  emb_bwd_case(KILN_DTYPE_BF16, 400, 20, 9, -1, 0);
  const int64_t is[1] = {2}, gs[2] = {2, 3}, ws[2] = {4, 3};
  ht_t ix = ht_zeros(KILN_DTYPE_I64, 1, is), g = ht_rand(KILN_DTYPE_F32, 2, gs, -1, 1);
  ht_t gw = ht_zeros(KILN_DTYPE_F32, 2, ws);
  ht_set_ref(&ix, 1, 4);
  KT_FAILS(KILN_ERROR_OUT_OF_RANGE, kiln_kernel_embedding_backward(&g.t, &ix.t, 4, -1, &gw.t));
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_kernel_embedding_backward(&g.t, &ix.t, 5, -1, &gw.t));
  ht_free(&ix);
  ht_free(&g);
  ht_free(&gw);
}

/* ---- nll loss ------------------------------------------------------------------------------- */

static void nll_case(kiln_dtype_t dt, int nd, const int64_t* shape, int has_w, int64_t ignore) {
  const int cdim = nd == 1 ? 0 : 1;
  const int64_t C = shape[cdim];
  int64_t tshape[KILN_MAX_DIMS];
  int tnd = 0;
  for (int d = 0; d < nd; d++)
    if (d != cdim) tshape[tnd++] = shape[d];
  ht_t lp = ht_rand(dt, nd, shape, -5, 0);
  ht_t tg = ht_zeros(KILN_DTYPE_I64, tnd, tshape);
  for (int64_t i = 0; i < tg.n; i++) ht_set_ref(&tg, i, (i % 4 == 3) ? (double)ignore : (double)((i * 5 + 1) % C));
  const int64_t cs[1] = {C};
  ht_t w = ht_rand(dt, 1, cs, 0.2, 2);
  const int64_t P = tg.n;
  /* position p = (n, sp): lp index n*C*inner + t*inner + sp */
  const int64_t inner = nd <= 2 ? 1 : P / shape[0];
  double* lv = malloc(sizeof(double) * (size_t)(P + 1));
  double* wt = malloc(sizeof(double) * (size_t)(P + 1));
  double sum = 0, wsum = 0;
  for (int64_t p = 0; p < P; p++) {
    const int64_t t = (int64_t)tg.ref[p];
    const int64_t n = p / inner, sp = p % inner;
    if (t == ignore) {
      lv[p] = wt[p] = 0;
      continue;
    }
    wt[p] = has_w ? w.ref[t] : 1;
    lv[p] = -wt[p] * lp.ref[n * C * inner + t * inner + sp];
    sum += lv[p];
    wsum += wt[p];
  }
  for (int red = 0; red < 3; red++) {
    ht_t out = red ? ht_zeros(dt, 0, NULL) : ht_zeros(dt, tnd, tshape);
    ht_t tw = ht_zeros(dt, 0, NULL);
    KT_OK(kiln_kernel_nll_loss(&lp.t, &tg.t, has_w ? &w.t : NULL, red, ignore, &out.t, &tw.t));
    double rtw = red ? wsum : (nd == 1 ? wt[0] : 0);
    double ro = red == 1 ? sum / wsum : sum;
    if (red == 0)
      KT_CLOSE(out, lv, tol_a(dt), tol_r(dt));
    else
      KT_CLOSE(out, &ro, tol_a(dt), tol_r(dt));
    KT_CLOSE(tw, &rtw, tol_a(dt), tol_r(dt));
    /* backward */
    ht_t go = red ? ht_rand(dt, 0, NULL, 0.5, 1.5) : ht_rand(dt, tnd, tshape, -1, 1);
    ht_t gi = ht_rand(dt, nd, shape, -9, 9);
    double* rg = calloc((size_t)lp.n + 1, sizeof(double));
    for (int64_t p = 0; p < P; p++) {
      const int64_t t = (int64_t)tg.ref[p];
      if (t == ignore) continue;
      const double gv = red ? go.ref[0] / (red == 1 ? ht_get(&tw, 0) : 1) : go.ref[p];
      rg[(p / inner) * C * inner + t * inner + p % inner] = -wt[p] * gv;
    }
    KT_OK(kiln_kernel_nll_loss_backward(&go.t, &lp.t, &tg.t, has_w ? &w.t : NULL, red, ignore,
                                        &tw.t, &gi.t));
    KT_CLOSE(gi, rg, tol_a(dt), tol_r(dt));
    /* fused with the log_softmax backward over the classes: the bits of the two kernels in
     * sequence (f32, rank 1 or 2); anything else is refused */
    ht_t fz = ht_rand(dt, nd, shape, -9, 9), two = ht_rand(dt, nd, shape, -9, 9);
    const kiln_status_t fst = kiln_kernel_nll_log_softmax_backward(
        &go.t, &lp.t, &tg.t, has_w ? &w.t : NULL, red, ignore, &tw.t, &fz.t);
    if (dt == KILN_DTYPE_F32 && nd <= 2) {
      KT_OK(fst);
      KT_OK(kiln_kernel_softmax_backward(&gi.t, &lp.t, nd - 1, 1, &two.t));
      KT_CHECK(memcmp(fz.t.data, two.t.data, sizeof(float) * (size_t)fz.n) == 0);
    } else {
      KT_CHECK(fst == KILN_ERROR_INVALID_ARGUMENT);
    }
    ht_free(&fz);
    ht_free(&two);
    ht_free(&out);
    ht_free(&tw);
    ht_free(&go);
    ht_free(&gi);
    free(rg);
  }
  ht_free(&lp);
  ht_free(&tg);
  ht_free(&w);
  free(lv);
  free(wt);
}

KT_TEST(nll_loss_matches_reference) {
  const int64_t a[2] = {6, 5}, b[1] = {5}, c[4] = {2, 3, 4, 5}, d[2] = {20000, 3}, e[2] = {0, 4};
  for (int i = 0; i < 4; i++) nll_case(kFloat[i], 2, a, 1, -100);
  nll_case(KILN_DTYPE_F32, 2, a, 0, 2); /* ignore_index inside [0, C) */
  nll_case(KILN_DTYPE_F32, 1, b, 1, -100);
  nll_case(KILN_DTYPE_F32, 4, c, 1, -100);
  nll_case(KILN_DTYPE_F32, 2, d, 1, -100); /* several sum chunks */
  nll_case(KILN_DTYPE_F32, 2, e, 1, -100); /* empty: mean is NaN */
  const int64_t f[2] = {300, 37};
  nll_case(KILN_DTYPE_F32, 2, f, 0, -100); /* rows on several threads */
}

KT_TEST(nll_loss_errors) {
  const int64_t a[2] = {3, 4}, t3[1] = {3}, t2[1] = {2};
  ht_t lp = ht_rand(KILN_DTYPE_F32, 2, a, -3, 0), tg = ht_zeros(KILN_DTYPE_I64, 1, t3);
  ht_t out = ht_zeros(KILN_DTYPE_F32, 0, NULL), bad = ht_zeros(KILN_DTYPE_I64, 1, t2);
  ht_set_ref(&tg, 1, 4);
  KT_FAILS(KILN_ERROR_OUT_OF_RANGE, kiln_kernel_nll_loss(&lp.t, &tg.t, NULL, 1, -100, &out.t, NULL));
  ht_set_ref(&tg, 1, -1);
  KT_FAILS(KILN_ERROR_OUT_OF_RANGE, kiln_kernel_nll_loss(&lp.t, &tg.t, NULL, 1, -100, &out.t, NULL));
  KT_OK(kiln_kernel_nll_loss(&lp.t, &tg.t, NULL, 1, -1, &out.t, NULL));
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_kernel_nll_loss(&lp.t, &bad.t, NULL, 1, -100, &out.t, NULL));
  KT_CHECK(strstr(kiln_status_message(), "[3, 4]") != NULL);
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_kernel_nll_loss(&lp.t, &tg.t, NULL, 3, -100, &out.t, NULL));
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_kernel_nll_loss(&lp.t, &tg.t, NULL, 0, -1, &out.t, NULL));
  ht_free(&lp);
  ht_free(&tg);
  ht_free(&out);
  ht_free(&bad);
}

/* ---- attention ------------------------------------------------------------------------------ */

typedef struct sdpa_case {
  kiln_dtype_t dt;
  int64_t B, H, Hk, L, S, E, Ev;
  int causal, mask; /* mask: 0 none, 1 bool [L,S] (row 0 fully masked), 2 float [B,1,L,S] */
  int transposed;   /* q / out / grad_q as [B,L,H,E].transpose(1,2) */
  double scale;     /* NaN = default */
  int backward;
} sdpa_case_t;

static double mask_add(const sdpa_case_t* c, const ht_t* m, int64_t b, int64_t i, int64_t j) {
  if (c->mask == 1) return m->ref[i * c->S + j] != 0 ? 0.0 : -INFINITY;
  if (c->mask == 2) return m->ref[(b * c->L + i) * c->S + j];
  return 0.0;
}

static void sdpa_run(const sdpa_case_t* c) {
  const kiln_dtype_t dt = c->dt;
  const int64_t qs[4] = {c->B, c->H, c->L, c->E}, ks[4] = {c->B, c->Hk, c->S, c->E},
                vs[4] = {c->B, c->Hk, c->S, c->Ev}, os[4] = {c->B, c->H, c->L, c->Ev},
                ls[3] = {c->B, c->H, c->L}, ms1[2] = {c->L, c->S}, ms2[4] = {c->B, 1, c->L, c->S};
  const int tp[4] = {0, 2, 1, 3};
  const int* perm = c->transposed ? tp : NULL;
  ht_t q = ht_make(dt, 4, qs, perm, -1, 1, 1), k = ht_rand(dt, 4, ks, -1, 1);
  ht_t v = ht_rand(dt, 4, vs, -1, 1), o = ht_make(dt, 4, os, perm, 0, 0, 0);
  ht_t lse = ht_zeros(dt == KILN_DTYPE_F64 ? KILN_DTYPE_F64 : KILN_DTYPE_F32, 3, ls);
  ht_t m;
  memset(&m, 0, sizeof m);
  if (c->mask == 1) {
    m = ht_zeros(KILN_DTYPE_BOOL, 2, ms1);
    for (int64_t i = 0; i < m.n; i++) ht_set_ref(&m, i, (i / c->S) != 0 && urand(0, 1) < 0.7);
  } else if (c->mask == 2) {
    m = ht_rand(KILN_DTYPE_F32, 4, ms2, -2, 1);
  }
  const double sc = isnan(c->scale) ? 1 / sqrt((double)c->E) : c->scale;
  const int64_t g = c->H / c->Hk;
  double* ro = calloc((size_t)o.n + 1, sizeof(double));
  double* rl = calloc((size_t)lse.n + 1, sizeof(double));
  double* P = calloc((size_t)(c->B * c->H * c->L * c->S) + 1, sizeof(double));
  for (int64_t b = 0; b < c->B; b++)
    for (int64_t h = 0; h < c->H; h++)
      for (int64_t i = 0; i < c->L; i++) {
        double* p = P + ((b * c->H + h) * c->L + i) * c->S;
        double mx = -INFINITY, l = 0;
        for (int64_t j = 0; j < c->S; j++) {
          double d = 0;
          for (int64_t e = 0; e < c->E; e++)
            d += q.ref[((b * c->H + h) * c->L + i) * c->E + e] *
                 k.ref[((b * c->Hk + h / g) * c->S + j) * c->E + e];
          p[j] = d * sc + mask_add(c, &m, b, i, j);
          if (c->causal && j > i) p[j] = -INFINITY;
          mx = fmax(mx, p[j]);
        }
        for (int64_t j = 0; j < c->S; j++) l += (p[j] = mx == -INFINITY ? 0 : exp(p[j] - mx));
        for (int64_t j = 0; j < c->S; j++) p[j] = l > 0 ? p[j] / l : 0;
        rl[(b * c->H + h) * c->L + i] = l > 0 ? mx + log(l) : 0;
        for (int64_t e = 0; e < c->Ev; e++) {
          double a = 0;
          for (int64_t j = 0; j < c->S; j++) a += p[j] * v.ref[((b * c->Hk + h / g) * c->S + j) * c->Ev + e];
          ro[((b * c->H + h) * c->L + i) * c->Ev + e] = a;
        }
      }
  KT_OK(kiln_kernel_sdpa(&q.t, &k.t, &v.t, c->mask ? &m.t : NULL, c->causal, c->scale, &o.t, &lse.t));
  KT_CLOSE(o, ro, 2 * tol_a(dt), 2 * tol_r(dt));
  KT_CLOSE(lse, rl, dt == KILN_DTYPE_F64 ? 1e-6 : 10 * tol_a(dt), tol_r(dt));
  if (c->backward) {
    ht_t go = ht_rand(dt, 4, os, -1, 1);
    ht_t gq = ht_make(dt, 4, qs, perm, 0, 0, 0), gk = ht_rand(dt, 4, ks, 5, 6), gv = ht_rand(dt, 4, vs, 5, 6);
    double* rq = calloc((size_t)q.n + 1, sizeof(double));
    double* rk = calloc((size_t)k.n + 1, sizeof(double));
    double* rv = calloc((size_t)v.n + 1, sizeof(double));
    double* ds = calloc((size_t)c->S + 1, sizeof(double));
    double gmax = 0;
    for (int64_t b = 0; b < c->B; b++)
      for (int64_t h = 0; h < c->H; h++)
        for (int64_t i = 0; i < c->L; i++) {
          const int64_t row = (b * c->H + h) * c->L + i, kv = b * c->Hk + h / g;
          const double* p = P + row * c->S;
          double D = 0;
          for (int64_t e = 0; e < c->Ev; e++) D += go.ref[row * c->Ev + e] * ro[row * c->Ev + e];
          for (int64_t j = 0; j < c->S; j++) {
            double dp = 0;
            for (int64_t e = 0; e < c->Ev; e++) dp += go.ref[row * c->Ev + e] * v.ref[(kv * c->S + j) * c->Ev + e];
            ds[j] = p[j] * (dp - D);
            for (int64_t e = 0; e < c->Ev; e++) rv[(kv * c->S + j) * c->Ev + e] += p[j] * go.ref[row * c->Ev + e];
            for (int64_t e = 0; e < c->E; e++) {
              rq[row * c->E + e] += sc * ds[j] * k.ref[(kv * c->S + j) * c->E + e];
              rk[(kv * c->S + j) * c->E + e] += sc * ds[j] * q.ref[row * c->E + e];
            }
          }
        }
    for (int64_t i = 0; i < q.n; i++) gmax = fmax(gmax, fabs(rq[i]));
    for (int64_t i = 0; i < k.n; i++) gmax = fmax(gmax, fabs(rk[i]));
    for (int64_t i = 0; i < v.n; i++) gmax = fmax(gmax, fabs(rv[i]));
    KT_OK(kiln_kernel_sdpa_backward(&go.t, &q.t, &k.t, &v.t, &o.t, &lse.t, c->mask ? &m.t : NULL,
                                    c->causal, c->scale, &gq.t, &gk.t, &gv.t));
    const double at = (dt == KILN_DTYPE_F32 ? 2e-5 : 4 * tol_a(dt)) * (1 + gmax);
    const double rt = dt == KILN_DTYPE_F32 ? 1e-4 : 4 * tol_r(dt);
    KT_CLOSE(gq, rq, at, rt);
    KT_CLOSE(gk, rk, at, rt);
    KT_CLOSE(gv, rv, at, rt);
    if (dt != KILN_DTYPE_F64) { /* both schedules (two-pass, fused) give identical bits */
      for (int sched = 1; sched <= 2; sched++) {
        ht_t q2 = ht_make(dt, 4, qs, perm, 0, 0, 0), k2 = ht_zeros(dt, 4, ks), v2 = ht_zeros(dt, 4, vs);
        kiln_nn_sdpa_bwd_schedule = sched;
        KT_OK(kiln_kernel_sdpa_backward(&go.t, &q.t, &k.t, &v.t, &o.t, &lse.t,
                                        c->mask ? &m.t : NULL, c->causal, c->scale, &q2.t, &k2.t,
                                        &v2.t));
        kiln_nn_sdpa_bwd_schedule = 0;
        const size_t es = kiln_dtype_size(dt);
        KT_CHECK(memcmp(q2.mem, gq.mem, es * (size_t)q.n) == 0);
        KT_CHECK(memcmp(k2.mem, gk.mem, es * (size_t)k.n) == 0);
        KT_CHECK(memcmp(v2.mem, gv.mem, es * (size_t)v.n) == 0);
        ht_free(&q2);
        ht_free(&k2);
        ht_free(&v2);
      }
    }
    ht_free(&go);
    ht_free(&gq);
    ht_free(&gk);
    ht_free(&gv);
    free(rq);
    free(rk);
    free(rv);
    free(ds);
  }
  ht_free(&q);
  ht_free(&k);
  ht_free(&v);
  ht_free(&o);
  ht_free(&lse);
  if (m.mem) ht_free(&m);
  free(ro);
  free(rl);
  free(P);
}

static void sdpa_suite(void) {
  const sdpa_case_t cases[] = {
      {KILN_DTYPE_F32, 2, 3, 3, 67, 67, 16, 24, 0, 0, 0, NAN, 1},
      {KILN_DTYPE_F32, 2, 3, 3, 67, 67, 16, 24, 1, 0, 0, NAN, 1},
      {KILN_DTYPE_F32, 1, 2, 2, 130, 130, 64, 64, 1, 0, 1, NAN, 1},
      {KILN_DTYPE_F32, 1, 2, 2, 5, 130, 8, 8, 1, 0, 0, NAN, 1},
      {KILN_DTYPE_F32, 1, 2, 2, 130, 5, 8, 12, 1, 0, 0, NAN, 1},
      {KILN_DTYPE_F32, 2, 2, 2, 1, 1, 4, 4, 0, 0, 0, NAN, 1},
      {KILN_DTYPE_F32, 1, 1, 1, 1, 70, 33, 7, 0, 0, 0, 0.3, 1},
      {KILN_DTYPE_F32, 0, 2, 2, 8, 8, 4, 4, 0, 0, 0, NAN, 1},
      {KILN_DTYPE_F32, 2, 2, 2, 40, 70, 16, 16, 0, 1, 0, NAN, 1},
      {KILN_DTYPE_F32, 2, 2, 2, 70, 40, 16, 16, 0, 2, 1, NAN, 1},
      {KILN_DTYPE_F32, 2, 2, 2, 70, 70, 16, 16, 1, 1, 0, NAN, 1},
      {KILN_DTYPE_F32, 1, 4, 2, 67, 67, 16, 16, 1, 0, 0, NAN, 1},
      {KILN_DTYPE_F32, 1, 4, 1, 33, 20, 8, 8, 0, 2, 0, NAN, 1},
      {KILN_DTYPE_F16, 1, 2, 2, 67, 67, 32, 32, 1, 0, 1, NAN, 1},
      {KILN_DTYPE_BF16, 1, 2, 2, 67, 67, 32, 32, 0, 1, 0, NAN, 1},
      {KILN_DTYPE_F64, 1, 2, 1, 30, 40, 8, 8, 1, 2, 1, NAN, 1},
      {KILN_DTYPE_F64, 1, 2, 2, 30, 40, 8, 8, 0, 1, 0, NAN, 1},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) sdpa_run(&cases[i]);
}

KT_TEST(sdpa_matches_reference) { sdpa_suite(); }
KT_TEST(sdpa_matches_reference_generic) {
  kiln_nn_force_generic(1);
  sdpa_suite();
  kiln_nn_force_generic(0);
}
/* The automatic primitives (AVX-512 where the CPU has it) give the AVX2 results bit for bit:
 * gemm over edge tiles, strided / transposed A and accumulation; exp_sum's values and max; the
 * softmax and log_softmax backwards. */
KT_TEST(nn_primitives_match_avx2) {
  kiln_nn_force_generic(2);
  const kiln_nn_ops_t* ref = kiln_nn_ops();
  kiln_nn_force_generic(0);
  const kiln_nn_ops_t* got = kiln_nn_ops();
  const int64_t dims[][3] = {{1, 1, 1}, {6, 32, 8}, {7, 33, 5}, {13, 64, 32}, {5, 17, 64},
                             {64, 64, 32}, {3, 40, 1}, {12, 31, 70}};
  for (size_t t = 0; t < sizeof dims / sizeof dims[0]; t++) {
    const int64_t m = dims[t][0], n = dims[t][1], k = dims[t][2];
    float* a = malloc(sizeof(float) * (size_t)(m * k * 2));
    float* b = malloc(sizeof(float) * (size_t)(k * (n + 3)));
    float* c0 = malloc(sizeof(float) * (size_t)(m * (n + 5)));
    float* c1 = malloc(sizeof(float) * (size_t)(m * (n + 5)));
    for (int64_t i = 0; i < m * k * 2; i++) a[i] = (float)((i * 37 % 101) - 50) / 17.0f;
    for (int64_t i = 0; i < k * (n + 3); i++) b[i] = (float)((i * 53 % 89) - 44) / 13.0f;
    for (int tr = 0; tr < 2; tr++)
      for (int acc = 0; acc < 2; acc++) {
        for (int64_t i = 0; i < m * (n + 5); i++) c0[i] = c1[i] = (float)(i % 7) - 3.0f;
        /* tr: A read transposed (rs 1, cs 2m) from a 2m x k buffer, else row-major, rs 2k */
        const int64_t rs = tr ? 1 : 2 * k, cs = tr ? 2 * m : 1;
        ref->gemm(m, n, k, 0.75f, a, rs, cs, b, n + 3, c0, n + 5, acc);
        got->gemm(m, n, k, 0.75f, a, rs, cs, b, n + 3, c1, n + 5, acc);
        KT_CHECK(memcmp(c0, c1, sizeof(float) * (size_t)(m * (n + 5))) == 0);
      }
    free(a);
    free(b);
    free(c0);
    free(c1);
  }
  float x[200], y0[200], y1[200];
  for (int i = 0; i < 200; i++) x[i] = (float)((i * 29 % 61) - 30) / 3.0f;
  x[3] = -INFINITY;
  x[9] = NAN;
  x[11] = 100.0f;
  for (int n = 0; n <= 200; n += 1 + n / 7) {
    memset(y0, 0, sizeof y0);
    memset(y1, 0, sizeof y1);
    const float s0 = ref->exp_sum(x, 2.0f, y0, n), s1 = got->exp_sum(x, 2.0f, y1, n);
    KT_CHECK(memcmp(y0, y1, sizeof y0) == 0);
    KT_CHECK((isnan(s0) && isnan(s1)) || s0 == s1 || fabsf(s0 - s1) <= 1e-5f * fabsf(s0));
    const float m0 = n > 9 ? ref->max(x + 10, n - 10) : 0, m1 = n > 9 ? got->max(x + 10, n - 10) : 0;
    KT_CHECK(m0 == m1);
    /* the softmax backwards, every tail length, y over exp's whole range (x) */
    float g[200];
    for (int i = 0; i < 200; i++) g[i] = (float)((i * 13 % 17) - 8) / 5.0f;
    memset(y0, 0, sizeof y0);
    memset(y1, 0, sizeof y1);
    ref->log_softmax_bwd(g, x, 0.75f, y0, n);
    got->log_softmax_bwd(g, x, 0.75f, y1, n);
    KT_CHECK(memcmp(y0, y1, sizeof y0) == 0);
    ref->softmax_bwd(g, x, -1.25f, y0, n);
    got->softmax_bwd(g, x, -1.25f, y1, n);
    KT_CHECK(memcmp(y0, y1, sizeof y0) == 0);
  }
  /* exp over its whole range: subnormal results (-104 < x < -87.3), the clamps, overflow */
  enum { NS = 4096 };
  float* xs = malloc(sizeof(float) * NS);
  float* e0 = malloc(sizeof(float) * NS);
  float* e1 = malloc(sizeof(float) * NS);
  for (int i = 0; i < NS; i++) xs[i] = -110.0f + 205.0f * (float)i / (float)NS + (float)(i % 7) * 1e-3f;
  ref->exp_sum(xs, 0.0f, e0, NS);
  got->exp_sum(xs, 0.0f, e1, NS);
  KT_CHECK(memcmp(e0, e1, sizeof(float) * NS) == 0);
  free(xs);
  free(e0);
  free(e1);
}

/* On an AVX-512 CPU the default run above uses the AVX-512 primitives: cover AVX2 as well. */
KT_TEST(sdpa_matches_reference_avx2) {
  kiln_nn_force_generic(2);
  sdpa_suite();
  kiln_nn_force_generic(0);
}

KT_TEST(sdpa_errors) {
  const int64_t qs[4] = {1, 2, 4, 8}, ks[4] = {1, 2, 5, 8}, bad[4] = {1, 2, 5, 7}, ms[2] = {4, 3};
  ht_t q = ht_rand(KILN_DTYPE_F32, 4, qs, -1, 1), k = ht_rand(KILN_DTYPE_F32, 4, ks, -1, 1);
  ht_t kb = ht_rand(KILN_DTYPE_F32, 4, bad, -1, 1), o = ht_zeros(KILN_DTYPE_F32, 4, qs);
  ht_t m = ht_zeros(KILN_DTYPE_BOOL, 2, ms), kh = ht_rand(KILN_DTYPE_F16, 4, ks, -1, 1);
  KT_OK(kiln_kernel_sdpa(&q.t, &k.t, &k.t, NULL, 0, NAN, &o.t, NULL));
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_kernel_sdpa(&q.t, &kb.t, &k.t, NULL, 0, NAN, &o.t, NULL));
  KT_CHECK(strstr(kiln_status_message(), "[1, 2, 5, 7]") != NULL);
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_kernel_sdpa(&q.t, &k.t, &k.t, &m.t, 0, NAN, &o.t, NULL));
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_kernel_sdpa(&q.t, &kh.t, &kh.t, NULL, 0, NAN, &o.t, NULL));
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_kernel_sdpa(&q.t, &k.t, &k.t, NULL, 0, NAN, &k.t, NULL));
  ht_free(&q);
  ht_free(&k);
  ht_free(&kb);
  ht_free(&o);
  ht_free(&m);
  ht_free(&kh);
}

KT_MAIN()
