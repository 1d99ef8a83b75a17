/* SPDX-License-Identifier: Apache-2.0 */
/* test_gemm.c - GEMM kernels against a naive double-precision reference.
 *
 * Tolerances: every element is checked against |got - ref| <= tol * S + tiny, where S is the
 * reference computed on absolute values (|alpha| sum |a||b| + |beta c| + |bias| + |residual|),
 * i.e. a relative bound that does not blow up under cancellation. tol is 1e-5 * sqrt(k + 1) for
 * f32, 2e-3 for f16 and 1.6e-2 for bf16 (a couple of output ulps; inputs are exact in the low
 * precision and accumulation is f32), 1e-13 * sqrt(k + 1) for f64. Activations are compared
 * after applying them in double to the f32 result's reference (GELU/SiLU are 1-Lipschitz-ish).
 */
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/gemm_internal.h"
#include "kernels/half.h"
#include "kiln/kernels/gemm.h"
#include "kiln_test.h"

static _Thread_local uint64_t g_rng = 0x9E3779B97F4A7C15ull;
static float frand(void) { /* uniform [-1, 1) */
  g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
  return (float)((g_rng >> 40) & 0xffffff) / 8388608.0f - 1.0f;
}
static float* fvec(int64_t n) {
  float* p = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
  for (int64_t i = 0; i < n; i++) p[i] = frand();
  return p;
}

static double act_ref(double x, int act) {
  switch (act) {
    case KILN_GEMM_ACT_RELU: return x > 0 ? x : 0;
    case KILN_GEMM_ACT_GELU: return 0.5 * x * (1 + erf(x / sqrt(2.0)));
    case KILN_GEMM_ACT_GELU_TANH: return 0.5 * x * (1 + tanh(sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
    case KILN_GEMM_ACT_SILU: return x / (1 + exp(-x));
    default: return x;
  }
}

/* A problem for kiln_sgemm_run on row-major (or, with ta / tb, transposed) dense operands. */
static kiln_sgemm_problem_t problem(int ta, int tb, int64_t m, int64_t n, int64_t k, float alpha,
                                    const float* a, const float* b, float beta, float* c,
                                    int64_t ldc, const kiln_gemm_epilogue_t* ep, int serial) {
  kiln_sgemm_problem_t pr;
  memset(&pr, 0, sizeof pr);
  pr.m = m;
  pr.n = n;
  pr.k = k;
  pr.alpha = alpha;
  pr.beta = beta;
  pr.a = ta ? (kiln_gemm_src_t){a, 1, m, KILN_DTYPE_F32, NULL, 0} : (kiln_gemm_src_t){a, k, 1, KILN_DTYPE_F32, NULL, 0};
  pr.b = tb ? (kiln_gemm_src_t){b, 1, k, KILN_DTYPE_F32, NULL, 0} : (kiln_gemm_src_t){b, n, 1, KILN_DTYPE_F32, NULL, 0};
  pr.c = c;
  pr.ldc = ldc;
  pr.ep = ep;
  pr.serial = serial;
  return pr;
}

/* Runs kiln_sgemm_ex on random data and checks every element; returns the number of bad ones. */
static int check_sgemm(int ta, int tb, int64_t m, int64_t n, int64_t k, float alpha, float beta,
                       int64_t pad, const kiln_gemm_epilogue_t* ep_in, int nan_c) {
#define LD(x) ((x) > 1 ? (x) : 1)
  const int64_t lda = LD(ta ? m : k) + pad, ldb = LD(tb ? k : n) + pad, ldc = LD(n) + pad;
  float* a = fvec((ta ? k : m) * lda);
  float* b = fvec((tb ? n : k) * ldb);
  float* c = fvec(m * ldc);
  float* c0 = malloc(sizeof(float) * (size_t)(m * ldc > 0 ? m * ldc : 1));
  float* bias = fvec(m > n ? m : n);
  const int64_t ldr = n + 3;
  float* res = fvec(m * ldr);
  if (nan_c)
    for (int64_t i = 0; i < m * ldc; i++) c[i] = NAN;
  memcpy(c0, c, sizeof(float) * (size_t)(m * ldc));
  kiln_gemm_epilogue_t ep;
  if (ep_in) {
    ep = *ep_in;
    if (ep.bias) ep.bias = bias;
    if (ep.residual) { ep.residual = res; ep.ldr = ldr; }
  }
  KT_OK(kiln_sgemm_ex(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, ep_in ? &ep : NULL));
  int bad = 0;
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < n; j++) {
      double r = 0, s = 0;
      for (int64_t p = 0; p < k; p++) {
        double x = a[ta ? p * lda + i : i * lda + p], y = b[tb ? j * ldb + p : p * ldb + j];
        r += x * y;
        s += fabs(x * y);
      }
      r *= alpha;
      s *= fabs(alpha);
      if (beta != 0) { r += beta * (double)c0[i * ldc + j]; s += fabs(beta * c0[i * ldc + j]); }
      if (ep_in) {
        if (ep.bias) { double bv = ep.bias_axis ? bias[j] : bias[i]; r += bv; s += fabs(bv); }
        r = act_ref(r, ep.activation);
        if (ep.residual && ep.residual_op == KILN_GEMM_RESIDUAL_MUL) {
          r *= res[i * ldr + j];
          s = fabs(act_ref(s, ep.activation) * res[i * ldr + j]) + fabs(r);
        } else if (ep.residual) {
          r += res[i * ldr + j];
          s += fabs(res[i * ldr + j]);
        }
      }
      double got = c[i * ldc + j];
      double tol = 1e-5 * sqrt((double)k + 1) * s + 1e-30;
      if (!(fabs(got - r) <= tol)) {
        if (bad < 3)
          fprintf(stderr, "  sgemm ta=%d tb=%d %lldx%lldx%lld alpha=%g beta=%g: C[%lld,%lld]=%.9g ref %.9g\n",
                  ta, tb, (long long)m, (long long)n, (long long)k, alpha, beta, (long long)i,
                  (long long)j, got, r);
        bad++;
      }
    }
  /* Padding columns of C are never written. */
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = n; j < ldc; j++)
      if (memcmp(&c[i * ldc + j], &c0[i * ldc + j], 4) != 0) bad++;
  free(a); free(b); free(c); free(c0); free(bias); free(res);
  return bad;
}

static const int64_t kShapes[][3] = {
    {1, 1, 1},   {2, 3, 4},    {17, 31, 13}, {6, 16, 8},    {7, 17, 5},    {5, 33, 70},
    {64, 64, 64}, {65, 47, 63}, {1, 200, 64}, {200, 1, 64},  {3, 100, 300}, {100, 100, 100},
    {97, 131, 257}, {130, 70, 513}, {12, 300, 40}, {150, 6, 200}, {256, 256, 256},
    {1, 5000, 300}, {2, 777, 1000}, {1, 33, 1003}, {40, 3000, 50}, /* GEMV-like; short C, wide B */
};

KT_TEST(sgemm_shapes_and_transposes) {
  int bad = 0;
  for (size_t s = 0; s < sizeof(kShapes) / sizeof(kShapes[0]); s++)
    for (int t = 0; t < 4; t++)
      bad += check_sgemm(t & 1, t >> 1, kShapes[s][0], kShapes[s][1], kShapes[s][2], 1.0f, 0.0f,
                         0, NULL, 0);
  KT_CHECK(bad == 0);
}

KT_TEST(sgemm_alpha_beta_and_padding) {
  int bad = 0;
  const float ab[][2] = {{1, 1}, {-0.5f, 2}, {2, -1}, {0.25f, 0.5f}};
  for (int v = 0; v < 4; v++)
    for (int t = 0; t < 4; t++) {
      bad += check_sgemm(t & 1, t >> 1, 19, 23, 29, ab[v][0], ab[v][1], 5, NULL, 0);
      bad += check_sgemm(t & 1, t >> 1, 70, 90, 300, ab[v][0], ab[v][1], 3, NULL, 0);
    }
  KT_CHECK(bad == 0);
}

KT_TEST(sgemm_beta0_ignores_nan_and_zero_dims) {
  int bad = 0;
  bad += check_sgemm(0, 0, 9, 20, 7, 1.0f, 0.0f, 2, NULL, 1);
  bad += check_sgemm(1, 1, 120, 80, 300, 1.5f, 0.0f, 1, NULL, 1);
  bad += check_sgemm(0, 0, 5, 5, 0, 1.0f, 0.0f, 0, NULL, 1); /* k = 0, beta = 0: zeros */
  bad += check_sgemm(0, 1, 5, 7, 0, 1.0f, 2.0f, 1, NULL, 0); /* k = 0: C = beta C */
  bad += check_sgemm(0, 0, 0, 5, 3, 1.0f, 1.0f, 0, NULL, 0);
  bad += check_sgemm(0, 0, 5, 0, 3, 1.0f, 1.0f, 0, NULL, 0);
  KT_CHECK(bad == 0);
  /* alpha = 0 does not read A or B (NaN there must not leak). */
  float a[4] = {NAN, NAN, NAN, NAN}, b[4] = {NAN, NAN, NAN, NAN}, c[4] = {1, 2, 3, 4};
  KT_OK(kiln_sgemm(0, 0, 2, 2, 2, 0.0f, a, 2, b, 2, 3.0f, c, 2));
  KT_CHECK(c[0] == 3 && c[1] == 6 && c[2] == 9 && c[3] == 12);
  KT_OK(kiln_sgemm(0, 0, 0, 0, 0, 1.0f, NULL, 1, NULL, 1, 0.0f, NULL, 1));
  KT_OK(kiln_sgemm(0, 0, 2, 2, 0, 1.0f, NULL, 1, NULL, 2, 0.0f, c, 2));
  KT_CHECK(c[0] == 0 && c[3] == 0);
}

/* The shared cases under a forced micro-kernel choice (kiln_gemm_set_isa), then back to auto. */
static int check_forced_isa(int isa) {
  kiln_gemm_set_isa(isa);
  int bad = 0;
  for (int t = 0; t < 4; t++) {
    bad += check_sgemm(t & 1, t >> 1, 17, 31, 13, 1.0f, 0.5f, 1, NULL, 0);
    bad += check_sgemm(t & 1, t >> 1, 97, 131, 257, -1.0f, 0.0f, 0, NULL, 1);
    bad += check_sgemm(t & 1, t >> 1, 300, 70, 513, 0.5f, 1.0f, 3, NULL, 0);
  }
  kiln_gemm_epilogue_t ep = {(const float*)1, 1, KILN_GEMM_ACT_GELU, (const float*)1, 0, 0};
  bad += check_sgemm(0, 1, 70, 50, 300, 1.0f, 1.0f, 0, &ep, 0);
  kiln_gemm_set_isa(0);
  return bad;
}

KT_TEST(sgemm_generic_kernel) { KT_CHECK(check_forced_isa(1) == 0); }

/* The AVX2 packed kernel where the default picks AVX-512F (on CPUs without AVX-512 this is the
 * default path again; both packed kernels share layout and driver). */
KT_TEST(sgemm_avx2_kernel_forced) { KT_CHECK(check_forced_isa(2) == 0); }

/* AVX2 narrow products read A in place (kiln_sgemm_ukr_adirect_avx2): the same bits as packing
 * A, on edge rows/columns, a split K, padding (lda > k) and an epilogue; the checks of
 * check_forced_isa(2) above cover correctness against the reference. */
KT_TEST(sgemm_avx2_unpacked_a_matches_packed) {
#if defined(__x86_64__)
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) return;
  kiln_gemm_set_isa(2);
  static const int64_t shp[][3] = {{1024, 128, 128}, {301, 70, 513}, {97, 250, 257}, {130, 17, 40}};
  int diff = 0;
  for (int s = 0; s < 4; s++) {
    const int64_t m = shp[s][0], n = shp[s][1], k = shp[s][2], lda = k + 3;
    float* a = fvec(m * lda);
    float* b = fvec(n * k);
    float* bias = fvec(n);
    float* c[2];
    for (int d = 0; d < 2; d++) {
      c[d] = fvec(m * n);
      kiln_gemm_set_adirect(d);
      kiln_gemm_epilogue_t ep = {bias, 1, KILN_GEMM_ACT_SILU, NULL, 0, 0};
      KT_OK(kiln_sgemm_ex(0, 1, m, n, k, 1.0f, a, lda, b, k, 0.0f, c[d], n, s & 1 ? &ep : NULL));
    }
    diff += memcmp(c[0], c[1], sizeof(float) * (size_t)(m * n)) != 0;
    free(a); free(b); free(bias); free(c[0]); free(c[1]);
  }
  kiln_gemm_set_adirect(1);
  kiln_gemm_set_isa(0);
  KT_CHECK(diff == 0);
#endif
}

/* AVX-512 runs pairs of B slivers through one 6x32 kernel (kiln_sgemm_ukr2_avx512): the same
 * bits as one sliver per call, on odd sliver counts, a partial last sliver (nr 17..31), split K,
 * beta != 0, several threads' staggered sweeps and an epilogue. (Correctness against the
 * reference: every check_sgemm above runs the default, paired path.) */
/* The AVX-512 path runs sliver pairs (2q, 2q+1) through the 6x32 kernel and lone slivers
 * through the 6x16 one (another summation order), so pairs are fixed by position: the result
 * must be bit for bit the same on the calling thread alone as on the pool, in both blocking modes
 * (row blocks; column ranges when rows are few), and close to the reference with pairing on or
 * off. */
KT_TEST(sgemm_avx512_pairs_do_not_depend_on_threads) {
#if defined(__x86_64__)
  if (!__builtin_cpu_supports("avx512f")) return;
  static const int64_t shp[][3] = {{1024, 768, 128}, {301, 70, 513}, {97, 250, 257}, {130, 48, 40},
                                   {64, 29, 300}, {24, 1000, 200}, {30, 530, 64},
                                   {300, 144, 64}, {128, 384, 128}, {144, 200, 70}};
  int diff = 0, bad = 0;
  for (int s = 0; s < 10; s++) {
    const int64_t m = shp[s][0], n = shp[s][1], k = shp[s][2];
    const int ta = s & 1, tb = s == 2;
    float* a = fvec(m * k);
    float* b = fvec(n * k);
    float* bias = fvec(n);
    float* c0 = fvec(m * n);
    float* c[3];
    kiln_gemm_epilogue_t ep = {bias, 1, KILN_GEMM_ACT_GELU, NULL, 0, 0};
    const float beta = s == 3 ? 0.5f : 0.0f;
    for (int d = 0; d < 3; d++) {
      c[d] = malloc(sizeof(float) * (size_t)(m * n));
      memcpy(c[d], c0, sizeof(float) * (size_t)(m * n));
      kiln_gemm_set_pair(d != 2);
      kiln_sgemm_problem_t pr = problem(ta, tb, m, n, k, 1.0f, a, b, beta, c[d], n, s & 1 ? &ep : NULL, d == 1);
      KT_OK(kiln_gemm_resolve_act(&pr));
      KT_OK(kiln_sgemm_run(&pr)); /* d = 0 pool, 1 serial, 2 pool without pairs */
    }
    diff += memcmp(c[0], c[1], sizeof(float) * (size_t)(m * n)) != 0;
    for (int64_t i = 0; i < m * n; i++) {
      const float x = c[0][i], y = c[2][i];
      if (!(fabsf(x - y) <= 1e-4f * (1.0f + fabsf(y)))) bad++;
    }
    free(a); free(b); free(bias); free(c0); free(c[0]); free(c[1]); free(c[2]);
  }
  kiln_gemm_set_pair(1);
  KT_CHECK(diff == 0);
  KT_CHECK(bad == 0);
#endif
}

KT_TEST(sgemm_epilogues) {
  int bad = 0;
  const int64_t sh[][3] = {{7, 19, 5}, {61, 45, 33}, {130, 150, 300}};
  for (int s = 0; s < 3; s++)
    for (int act = 0; act <= KILN_GEMM_ACT_SILU; act++)
      for (int axis = 0; axis < 2; axis++) {
        kiln_gemm_epilogue_t ep = {(const float*)1, axis, act, NULL, 0, 0};
        bad += check_sgemm(act & 1, 0, sh[s][0], sh[s][1], sh[s][2], 1.0f, 0.0f, 1, &ep, 0);
        kiln_gemm_epilogue_t ep2 = {axis ? (const float*)1 : NULL, 1, act, (const float*)1, 0, 0};
        bad += check_sgemm(0, axis, sh[s][0], sh[s][1], sh[s][2], 0.5f, 1.0f, 0, &ep2, 0);
        /* a gated unit: act(x W1) * residual */
        kiln_gemm_epilogue_t ep3 = {NULL, 0, act, (const float*)1, 0, KILN_GEMM_RESIDUAL_MUL};
        bad += check_sgemm(axis, 1, sh[s][0], sh[s][1], sh[s][2], 1.0f, 0.0f, 0, &ep3, 0);
      }
  kiln_gemm_epilogue_t ep = {(const float*)1, 1, KILN_GEMM_ACT_RELU, (const float*)1, 0, 0};
  bad += check_sgemm(0, 0, 4, 9, 0, 1.0f, 0.0f, 0, &ep, 1); /* k = 0: act(bias) + residual */
  kiln_gemm_epilogue_t em = {NULL, 0, KILN_GEMM_ACT_SILU, (const float*)1, 0, KILN_GEMM_RESIDUAL_MUL};
  bad += check_sgemm(0, 0, 4, 9, 0, 1.0f, 0.5f, 0, &em, 0); /* k = 0: silu(beta C) * residual */
  bad += check_sgemm(0, 1, 2, 300, 37, 1.0f, 0.0f, 2, &em, 0); /* GEMV path */
  bad += check_sgemm(0, 0, 3, 300, 37, 1.0f, 0.0f, 2, &em, 0); /* unpacked path */
  bad += check_sgemm(0, 1, 1024, 384, 128, 1.0f, 0.0f, 0, &em, 0); /* the Llama MLP's gate */
  bad += check_sgemm(0, 1, 2, 300, 37, 1.0f, 0.5f, 2, &ep, 0); /* GEMV path */
  bad += check_sgemm(0, 0, 3, 300, 37, 1.0f, 0.5f, 2, &ep, 0); /* few rows, unpacked path */
  KT_CHECK(bad == 0);
}

static int check_batched(int ta, int tb, int64_t m, int64_t n, int64_t k, int64_t batch, int share_b) {
  const int64_t lda = ta ? m : k, ldb = tb ? k : n, ldc = n;
  const int64_t sa = m * k + 3, sb = share_b ? 0 : k * n + 1, sc = m * n + 2;
  float* a = fvec(sa * batch);
  float* b = fvec(share_b ? k * n : sb * batch);
  float* c = fvec(sc * batch);
  float* c0 = malloc(sizeof(float) * (size_t)(sc * batch));
  memcpy(c0, c, sizeof(float) * (size_t)(sc * batch));
  KT_OK(kiln_sgemm_batched(ta, tb, m, n, k, 1.0f, a, lda, sa, b, ldb, sb, 0.5f, c, ldc, sc, batch));
  int bad = 0;
  for (int64_t q = 0; q < batch; q++)
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < n; j++) {
        const float* A = a + q * sa;
        const float* B = b + q * sb;
        double r = 0.5 * c0[q * sc + i * ldc + j], s = fabs(r);
        for (int64_t p = 0; p < k; p++) {
          double x = A[ta ? p * lda + i : i * lda + p] * (double)B[tb ? j * ldb + p : p * ldb + j];
          r += x;
          s += fabs(x);
        }
        if (!(fabs(c[q * sc + i * ldc + j] - r) <= 1e-5 * sqrt(k + 1.0) * s + 1e-30)) bad++;
      }
  free(a); free(b); free(c); free(c0);
  return bad;
}

KT_TEST(sgemm_batched) {
  int bad = 0;
  bad += check_batched(0, 0, 17, 31, 13, 7, 0);
  bad += check_batched(1, 1, 64, 64, 64, 6, 1);
  bad += check_batched(0, 1, 150, 140, 270, 2, 0); /* large items: threaded one by one */
  bad += check_batched(0, 0, 5, 5, 5, 0, 0);
  KT_CHECK(bad == 0);
}

KT_TEST(sgemm_invalid_arguments) {
  float x[64] = {0};
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_sgemm(0, 0, -1, 2, 2, 1, x, 2, x, 2, 0, x, 2));
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_sgemm(0, 0, 2, 2, -3, 1, x, 2, x, 2, 0, x, 2));
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_sgemm(0, 0, 2, 3, 4, 1, x, 3, x, 3, 0, x, 3)); /* lda < k */
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_sgemm(1, 0, 5, 3, 4, 1, x, 4, x, 3, 0, x, 3)); /* lda < m */
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_sgemm(0, 0, 2, 3, 4, 1, x, 4, x, 2, 0, x, 3)); /* ldb < n */
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_sgemm(0, 1, 2, 3, 4, 1, x, 4, x, 3, 0, x, 3)); /* ldb < k */
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_sgemm(0, 0, 2, 3, 4, 1, x, 4, x, 3, 0, x, 2)); /* ldc < n */
  KT_CHECK(strstr(kiln_status_message(), "ldc") != NULL);
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_sgemm(0, 0, 2, 3, 4, 1, NULL, 4, x, 3, 0, x, 3));
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_sgemm(0, 0, 2, 3, 4, 1, x, 4, x, 3, 0, NULL, 3));
  kiln_gemm_epilogue_t ep = {x, 2, 0, NULL, 0, 0};
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_sgemm_ex(0, 0, 2, 2, 2, 1, x, 2, x, 2, 0, x, 2, &ep));
  ep = (kiln_gemm_epilogue_t){NULL, 0, 99, NULL, 0, 0};
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_sgemm_ex(0, 0, 2, 2, 2, 1, x, 2, x, 2, 0, x, 2, &ep));
  ep = (kiln_gemm_epilogue_t){NULL, 0, 0, x, 1, 0};
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_sgemm_ex(0, 0, 2, 2, 2, 1, x, 2, x, 2, 0, x, 2, &ep));
  ep = (kiln_gemm_epilogue_t){NULL, 0, 0, x, 2, 7};
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_sgemm_ex(0, 0, 2, 2, 2, 1, x, 2, x, 2, 0, x, 2, &ep));
  KT_CHECK(strstr(kiln_status_message(), "residual_op") != NULL);
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_sgemm_batched(0, 0, 2, 2, 2, 1, x, 2, 4, x, 2, 4, 0, x, 2, 4, -1));
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_sgemm_batched(0, 0, 2, 2, 2, 1, x, 2, -4, x, 2, 4, 0, x, 2, 4, 2));
  double d[16] = {0};
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_dgemm(0, 0, 2, 2, 2, 1, d, 1, d, 2, 0, d, 2));
}

KT_TEST(dgemm_blas) {
  const int64_t m = 70, n = 530, k = 300; /* > one 64 x 256 x 512 block each way */
  double* a = malloc(sizeof(double) * m * k);
  double* b = malloc(sizeof(double) * k * n);
  double* c = malloc(sizeof(double) * m * n);
  for (int64_t i = 0; i < m * k; i++) a[i] = frand();
  for (int64_t i = 0; i < k * n; i++) b[i] = frand();
  for (int64_t i = 0; i < m * n; i++) c[i] = NAN;
  KT_OK(kiln_dgemm(0, 1, m, n, k, 2.0, a, k, b, k, 0.0, c, n)); /* b read as its transpose */
  int bad = 0;
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < n; j++) {
      double r = 0, s = 0;
      for (int64_t p = 0; p < k; p++) { r += a[i * k + p] * b[j * k + p]; s += fabs(a[i * k + p] * b[j * k + p]); }
      if (!(fabs(c[i * n + j] - 2 * r) <= 1e-13 * sqrt(k + 1.0) * 2 * s)) bad++;
    }
  KT_CHECK(bad == 0);
  free(a); free(b); free(c);
}

/* Several user threads calling at once: the pool runs one inline, scratch is per call. */
static void* concurrent_worker(void* arg) {
  int* bad = arg;
  for (int r = 0; r < 3; r++) *bad += check_sgemm(r & 1, 0, 150, 170, 260, 1.0f, 0.5f, 0, NULL, 0);
  return NULL;
}

KT_TEST(sgemm_concurrent_callers) {
  pthread_t th[3];
  int bad[3] = {0, 0, 0};
  for (int i = 0; i < 3; i++) KT_CHECK(pthread_create(&th[i], NULL, concurrent_worker, &bad[i]) == 0);
  for (int i = 0; i < 3; i++) pthread_join(th[i], NULL);
  KT_CHECK(bad[0] + bad[1] + bad[2] == 0);
}

KT_MAIN()

/* K-parallel mode (slices as work units, later slices into partials added in slice order) gives
 * the bits of the serial loop and of the slice-by-slice threaded path: partial slivers, split
 * slices of uneven depth, beta != 0, transposes, padded ldc and every epilogue form. */
KT_TEST(sgemm_kparallel_matches_serial) {
  static const int64_t shp[][3] = {{128, 128, 1024}, {96, 1000, 1024}, {17, 33, 3000},
                                   {200, 130, 900},  {7, 5, 600},     {64, 64, 4096},
                                   {130, 77, 513}};
  int diff = 0, bad = 0;
  for (int s = 0; s < 7; s++) {
    const int64_t m = shp[s][0], n = shp[s][1], k = shp[s][2], ldc = n + 3;
    for (int v = 0; v < 4; v++) {
      const int ta = v & 1, tb = v >> 1;
      float* a = fvec(m * k);
      float* b = fvec(k * n);
      float* bias = fvec(n);
      float* res = fvec(m * n);
      float* c0 = fvec(m * ldc);
      const float beta = v == 3 ? 0.5f : 0.0f;
      kiln_gemm_epilogue_t eps[3] = {{bias, 1, KILN_GEMM_ACT_SILU, res, n, 0},
                                     {NULL, 0, KILN_GEMM_ACT_SILU, res, n, KILN_GEMM_RESIDUAL_MUL},
                                     {0}};
      const kiln_gemm_epilogue_t* ep = v < 2 ? &eps[v] : NULL;
      float* c[3];
      for (int d = 0; d < 3; d++) { /* 0 serial, 1 K-parallel, 2 slice by slice */
        c[d] = malloc(sizeof(float) * (size_t)(m * ldc));
        memcpy(c[d], c0, sizeof(float) * (size_t)(m * ldc));
        kiln_sgemm_problem_t pr = problem(ta, tb, m, n, k, 0.75f, a, b, beta, c[d], ldc, ep, d == 0);
        KT_OK(kiln_gemm_resolve_act(&pr));
        kiln_gemm_set_kpar(d == 1 ? 1 : 2);
        KT_OK(kiln_sgemm_run(&pr));
      }
      kiln_gemm_set_kpar(0);
      for (int d = 1; d < 3; d++)
        if (memcmp(c[0], c[d], sizeof(float) * (size_t)(m * ldc)) != 0 && diff++ < 3)
          fprintf(stderr, "  %lldx%lldx%lld ta=%d tb=%d: path %d differs from serial\n",
                  (long long)m, (long long)n, (long long)k, ta, tb, d);
      free(a); free(b); free(bias); free(res); free(c0); free(c[0]); free(c[1]); free(c[2]);
    }
  }
  /* and against the double reference, K-parallel forced */
  kiln_gemm_set_kpar(1);
  bad += check_sgemm(1, 0, 128, 128, 1024, 1.0f, 0.0f, 0, NULL, 0);
  bad += check_sgemm(0, 1, 33, 70, 700, -1.0f, 0.5f, 2, NULL, 0);
  kiln_gemm_epilogue_t ep = {(const float*)1, 1, KILN_GEMM_ACT_GELU, (const float*)1, 0, 0};
  bad += check_sgemm(1, 1, 40, 50, 600, 1.0f, 1.0f, 1, &ep, 0);
  kiln_gemm_set_kpar(0);
  KT_CHECK(diff == 0);
  KT_CHECK(bad == 0);
}

/* kiln_sgemm_wcat reads B as the row-wise stack of weight blocks in place: every shape (straddling
 * and empty blocks, padded ld, a few rows for the GEMV path, K-slices, epilogues, transposed A)
 * gives the bits of kiln_sgemm_ex on the concatenated weight; bad blocks are rejected. */
KT_TEST(sgemm_wcat_matches_concatenated_weights) {
  static const int64_t blocks[][5] = {{128, 128, 128, 0, 0}, {16, 5, 40, 3, 0}, {0, 33, 0, 17, 0},
                                      {384, 384, 0, 0, 0},   {1, 1, 1, 1, 1},  {70, 0, 0, 0, 0}};
  static const int nblocks[] = {3, 4, 4, 2, 5, 1};
  static const int64_t ms[] = {1, 2, 5, 64, 128, 300};
  static const int64_t ks[] = {1, 7, 128, 300};
  int diff = 0;
  for (int bi = 0; bi < 6; bi++)
    for (int mi = 0; mi < 6; mi++)
      for (int ki = 0; ki < 4; ki++) {
        const int64_t m = ms[mi], k = ks[ki];
        const int ta = (bi + mi) & 1, variant = (bi + mi + ki) % 3;
        kiln_gemm_wblock_t blk[5];
        int nblk = 0;
        int64_t n = 0;
        for (int s = 0; s < nblocks[bi]; s++) {
          blk[nblk].n = blocks[bi][s];
          blk[nblk].ld = k + (s & 1) * 3; /* padded rows in odd blocks */
          blk[nblk].w = fvec(blk[nblk].n * blk[nblk].ld + 1);
          n += blk[nblk++].n;
        }
        float* wcat = fvec(n * k + 1); /* the concatenation, ld = k */
        int64_t row = 0;
        for (int s = 0; s < nblk; s++)
          for (int64_t r = 0; r < blk[s].n; r++, row++)
            memcpy(wcat + row * k, blk[s].w + r * blk[s].ld, sizeof(float) * (size_t)k);
        float* a = fvec(m * k);
        float* bias = fvec(n + 1);
        float* res = fvec(m * n + 1);
        float* c0 = fvec(m * n + 1);
        float* c1 = malloc(sizeof(float) * (size_t)(m * n + 1));
        memcpy(c1, c0, sizeof(float) * (size_t)(m * n + 1));
        kiln_gemm_epilogue_t ep = {bias, 1, KILN_GEMM_ACT_SILU, res, n, variant == 2};
        const kiln_gemm_epilogue_t* e = variant ? &ep : NULL;
        const float beta = variant == 1 ? 0.5f : 0.0f;
        const int64_t lda = ta ? m : k;
        KT_OK(kiln_sgemm_ex(ta, 1, m, n, k, 0.75f, a, lda, wcat, k, beta, c0, n > 0 ? n : 1, e));
        KT_OK(kiln_sgemm_wcat(ta, m, k, 0.75f, a, lda, nblk, blk, beta, c1, n > 0 ? n : 1, e));
        if (memcmp(c0, c1, sizeof(float) * (size_t)(m * n)) != 0 && diff++ < 3)
          fprintf(stderr, "  wcat m=%lld n=%lld k=%lld blocks %d: differs\n", (long long)m, (long long)n,
                  (long long)k, bi);
        for (int s = 0; s < nblk; s++) free((void*)blk[s].w);
        free(wcat); free(a); free(bias); free(res); free(c0); free(c1);
      }
  KT_CHECK(diff == 0);

  float x[8] = {0}, y[8] = {0};
  kiln_gemm_wblock_t good[2] = {{x, 2, 2}, {x, 2, 2}}, bad_ld[2] = {{x, 2, 2}, {x, 2, 1}};
  kiln_gemm_wblock_t null_w[2] = {{x, 2, 2}, {NULL, 2, 2}}, neg[1] = {{x, -1, 2}};
  KT_CHECK(kiln_sgemm_wcat(0, 2, 2, 1.0f, x, 2, 0, good, 0.0f, y, 4, NULL) == KILN_ERROR_INVALID_ARGUMENT);
  KT_CHECK(kiln_sgemm_wcat(0, 2, 2, 1.0f, x, 2, KILN_GEMM_MAX_WBLOCKS + 1, good, 0.0f, y, 4, NULL) ==
           KILN_ERROR_INVALID_ARGUMENT);
  KT_CHECK(kiln_sgemm_wcat(0, 2, 2, 1.0f, x, 2, 2, NULL, 0.0f, y, 4, NULL) == KILN_ERROR_INVALID_ARGUMENT);
  KT_CHECK(kiln_sgemm_wcat(0, 2, 2, 1.0f, x, 2, 2, bad_ld, 0.0f, y, 4, NULL) == KILN_ERROR_INVALID_ARGUMENT);
  KT_CHECK(kiln_sgemm_wcat(0, 2, 2, 1.0f, x, 2, 2, null_w, 0.0f, y, 4, NULL) == KILN_ERROR_INVALID_ARGUMENT);
  KT_CHECK(kiln_sgemm_wcat(0, 2, 2, 1.0f, x, 2, 1, neg, 0.0f, y, 4, NULL) == KILN_ERROR_INVALID_ARGUMENT);
  KT_CHECK(kiln_sgemm_wcat(0, 2, 2, 1.0f, x, 2, 2, good, 0.0f, y, 3, NULL) == KILN_ERROR_INVALID_ARGUMENT);
  KT_OK(kiln_sgemm_wcat(0, 2, 2, 1.0f, x, 2, 2, good, 0.0f, y, 4, NULL));
}

/* On AVX-512 a row-major A is read in place, 8 rows per call (kiln_sgemm_ukr2_adirect8_avx512),
 * then a packed edge of 1-7 rows: the bits of packing A,
 * with padded leading dimensions, remainders of 2, 4, 6 and 7 rows, column ranges, row blocks,
 * K slices and K-parallel partials, a partial last sliver pair, beta and an epilogue; odd
 * sliver counts and a transposed A (A^T B, a weight gradient's layout) keep packing. */
KT_TEST(sgemm_avx512_adirect_pairs_match_packed) {
#if defined(__x86_64__)
  if (!__builtin_cpu_supports("avx512f")) return;
  static const int64_t shp[][3] = {{128, 384, 128}, {128, 768, 128}, {130, 256, 64}, {95, 64, 300},
                                   {102, 120, 33},  {300, 96, 513},  {1000, 64, 100}, {140, 200, 513},
                                   {96, 48, 128},   {6, 64, 7}};
  int diff = 0;
  for (int v = 0; v < 20; v++) {
    const int s = v % 10, ta = v >= 10, tb = !ta; /* A^T x B: a weight gradient's layout */
    const int64_t m = shp[s][0], n = shp[s][1], k = shp[s][2];
    const int64_t lda = (ta ? m : k) + (s & 1) * 5;
    float* a = fvec((ta ? k : m) * lda);
    float* b = fvec(n * k);
    float* bias = fvec(n);
    float* c0 = fvec(m * n);
    float* c[2];
    for (int d = 0; d < 2; d++) {
      c[d] = malloc(sizeof(float) * (size_t)(m * n));
      memcpy(c[d], c0, sizeof(float) * (size_t)(m * n));
      kiln_gemm_set_adirect(d);
      kiln_gemm_epilogue_t ep = {bias, 1, KILN_GEMM_ACT_SILU, NULL, 0, 0};
      KT_OK(kiln_sgemm_ex(ta, tb, m, n, k, 0.75f, a, lda, b, tb ? k : n, s == 4 ? 0.5f : 0.0f, c[d], n,
                          s & 2 ? &ep : NULL));
    }
    diff += memcmp(c[0], c[1], sizeof(float) * (size_t)(m * n)) != 0;
    free(a); free(b); free(bias); free(c0); free(c[0]); free(c[1]);
  }
  kiln_gemm_set_adirect(1);
  KT_CHECK(diff == 0);
#endif
}

/* The AVX-512 transposing B packer writes exactly what the AVX2 one does: every depth up to 40
 * (16-step blocks, the 8-step and scalar tails), deeper slivers and a padded source row. */
KT_TEST(pack_b_trans_avx512_matches_avx2) {
#if defined(__x86_64__)
  if (!__builtin_cpu_supports("avx512f")) return;
  int bad = 0;
  for (int64_t kc = 0; kc <= 300; kc += kc < 40 ? 1 : 53) {
    const int64_t ld = kc + 7;
    float* src = fvec(16 * ld + 1);
    float* d0 = aligned_alloc(64, sizeof(float) * (size_t)(16 * kc + 16));
    float* d1 = aligned_alloc(64, sizeof(float) * (size_t)(16 * kc + 16));
    memset(d0, 0, sizeof(float) * (size_t)(16 * kc + 16));
    memset(d1, 0, sizeof(float) * (size_t)(16 * kc + 16));
    kiln_gemm_pack_b_trans_avx2(d0, src, ld, kc);
    kiln_gemm_pack_b_trans_avx512(d1, src, ld, kc);
    bad += memcmp(d0, d1, sizeof(float) * (size_t)(16 * kc + 16)) != 0;
    for (int64_t p = 0; p < kc; p++)
      for (int j = 0; j < 16; j++) bad += d1[p * 16 + j] != src[j * ld + p];
    free(src);
    free(d0);
    free(d1);
  }
  KT_CHECK(bad == 0);
#endif
}
