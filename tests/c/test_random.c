/* SPDX-License-Identifier: Apache-2.0 */
/* test_random.c - Philox random kernels (kiln/kernels/random.h): known-answer vectors, values
 * against an independent serial reference of the documented counter mapping (so results cannot
 * depend on the thread count or the output's strides), statistics on 1M samples, offset rules
 * and argument checks. */
#include <stdint.h>

#include "kernels/half.h"
#include "kiln/kernels/random.h"
#include "kiln_test.h"

#define N1M (1 << 20)

/* ---- reference Philox4x32-10, written independently of src/kernels/random.c -------------- */

static void ref_philox(uint64_t seed, uint64_t offset, uint64_t group, uint32_t out[4]) {
  uint32_t x[4] = {(uint32_t)offset, (uint32_t)(offset >> 32), (uint32_t)group,
                   (uint32_t)(group >> 32)};
  uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
  for (int round = 0; round < 10; round++) {
    uint64_t a = 0xD2511F53ull * x[0], b = 0xCD9E8D57ull * x[2];
    uint32_t y[4] = {(uint32_t)(b >> 32) ^ x[1] ^ key[0], (uint32_t)b,
                     (uint32_t)(a >> 32) ^ x[3] ^ key[1], (uint32_t)a};
    memcpy(x, y, sizeof x);
    key[0] += 0x9E3779B9u;
    key[1] += 0xBB67AE85u;
  }
  memcpy(out, x, sizeof x);
}

static uint64_t ref_u64(uint64_t seed, uint64_t offset, int64_t i) { /* E = 2 lane of element i */
  uint32_t r[4];
  ref_philox(seed, offset, (uint64_t)i / 2, r);
  const int l = (int)(i % 2);
  return (uint64_t)r[2 * l] | ((uint64_t)r[2 * l + 1] << 32);
}

static uint32_t ref_u32(uint64_t seed, uint64_t offset, int64_t i) { /* E = 4 lane */
  uint32_t r[4];
  ref_philox(seed, offset, (uint64_t)i / 4, r);
  return r[i % 4];
}

static kiln_tensor_t vec(void* data, kiln_dtype_t dt, int64_t n) {
  kiln_tensor_t t;
  kiln_tensor_init_contiguous(&t, data, dt, 1, &n);
  return t;
}

static void moments_f32(const float* x, int64_t n, double* mean, double* var) {
  double s = 0, s2 = 0;
  for (int64_t i = 0; i < n; i++) s += x[i];
  *mean = s / (double)n;
  for (int64_t i = 0; i < n; i++) s2 += (x[i] - *mean) * (x[i] - *mean);
  *var = s2 / (double)n;
}

KT_TEST(philox_known_answers) {
  /* Random123 kat_vectors, philox4x32 with 10 rounds. */
  static const uint32_t ctr[3][4] = {{0, 0, 0, 0},
                                     {0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu},
                                     {0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}};
  static const uint32_t key[3][2] = {{0, 0}, {0xffffffffu, 0xffffffffu}, {0xa4093822u, 0x299f31d0u}};
  static const uint32_t want[3][4] = {{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u},
                                      {0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu},
                                      {0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}};
  for (int t = 0; t < 3; t++) {
    uint32_t out[4];
    kiln_philox4x32_10(ctr[t], key[t], out);
    for (int i = 0; i < 4; i++) KT_CHECK(out[i] == want[t][i]);
  }
  uint32_t r[4], c[4] = {7, 0, 5, 0}, k[2] = {0x1234, 0x5678}, o[4];
  ref_philox(0x0000567800001234ull, 7, 5, r);
  kiln_philox4x32_10(c, k, o);
  KT_CHECK(memcmp(r, o, sizeof r) == 0);
}

KT_TEST(uniform_f32_matches_reference_and_stats) {
  float* x = malloc(sizeof(float) * N1M);
  kiln_tensor_t t = vec(x, KILN_DTYPE_F32, N1M);
  kiln_philox_t gen = {.seed = 0x9e3779b97f4a7c15ull, .offset = 17};
  KT_OK(kiln_kernel_uniform(&t, -2.0, 3.0, &gen));
  KT_CHECK(gen.offset == 18);
  int bad = 0, out_of_range = 0;
  for (int64_t i = 0; i < N1M; i++) { /* every element: proves thread-count independence */
    const double u = (double)(ref_u32(gen.seed, 17, i) >> 8) / 16777216.0;
    const float want = (float)(-2.0 + u * 5.0);
    bad += x[i] != (want >= 3.0f ? nextafterf(3.0f, 0.0f) : want);
    out_of_range += !(x[i] >= -2.0f && x[i] < 3.0f);
  }
  KT_CHECK(bad == 0);
  KT_CHECK(out_of_range == 0);
  double mean, var;
  moments_f32(x, N1M, &mean, &var);
  KT_NEAR(mean, 0.5, 0.01);
  KT_NEAR(var, 25.0 / 12.0, 0.01);
  free(x);
}

KT_TEST(uniform_strided_equals_contiguous_by_logical_index) {
  enum { R = 37, C = 53 };
  float a[R * C], b[R * C];
  int64_t shape[2] = {R, C};
  kiln_tensor_t ta, tb;
  kiln_tensor_init_contiguous(&ta, a, KILN_DTYPE_F32, 2, shape);
  tb = ta; /* b viewed as the transpose of a [C, R] buffer */
  tb.data = b;
  tb.strides[0] = 1;
  tb.strides[1] = R;
  kiln_philox_t g1 = {5, 9}, g2 = {5, 9};
  KT_OK(kiln_kernel_uniform(&ta, 0.0, 1.0, &g1));
  KT_OK(kiln_kernel_uniform(&tb, 0.0, 1.0, &g2));
  int bad = 0;
  for (int i = 0; i < R; i++)
    for (int j = 0; j < C; j++) bad += a[i * C + j] != b[j * R + i];
  KT_CHECK(bad == 0);
  KT_CHECK(g1.offset == 10 && g2.offset == 10);
}

KT_TEST(uniform_f64_and_half_bounds) {
  enum { N = 100000 };
  double* d = malloc(sizeof(double) * N);
  kiln_tensor_t td = vec(d, KILN_DTYPE_F64, N);
  kiln_philox_t gen = {1, 0};
  KT_OK(kiln_kernel_uniform(&td, 10.0, 11.0, &gen));
  int bad = 0;
  for (int i = 0; i < N; i++) {
    const double want = 10.0 + (double)(ref_u64(1, 0, i) >> 11) / 9007199254740992.0;
    bad += d[i] != (want >= 11.0 ? nextafter(11.0, 0.0) : want);
  }
  KT_CHECK(bad == 0);
  free(d);
  /* bf16 [0, 1): draws above 1 - 2^-9 round to 1.0 and must be clamped below it */
  uint16_t h[N];
  kiln_tensor_t th = vec(h, KILN_DTYPE_BF16, N);
  KT_OK(kiln_kernel_uniform(&th, 0.0, 1.0, &gen));
  float mx = 0;
  for (int i = 0; i < N; i++) mx = fmaxf(mx, kiln_bf16_to_f32(h[i]));
  KT_CHECK(mx < 1.0f && mx > 0.99f);
  th.dtype = KILN_DTYPE_F16;
  KT_OK(kiln_kernel_uniform(&th, -1.0, 0.0, &gen));
  mx = -1;
  float mn = 1;
  for (int i = 0; i < N; i++) {
    mx = fmaxf(mx, kiln_f16_to_f32(h[i]));
    mn = fminf(mn, kiln_f16_to_f32(h[i]));
  }
  KT_CHECK(mx < 0.0f && mn >= -1.0f);
  KT_OK(kiln_kernel_uniform(&th, 2.0, 2.0, &gen)); /* empty range: all from */
  KT_CHECK(kiln_f16_to_f32(h[0]) == 2.0f && kiln_f16_to_f32(h[N - 1]) == 2.0f);
}

KT_TEST(normal_stats_and_reference) {
  float* x = malloc(sizeof(float) * N1M);
  kiln_tensor_t t = vec(x, KILN_DTYPE_F32, N1M);
  kiln_philox_t gen = {42, 3};
  KT_OK(kiln_kernel_normal(&t, 1.5, 2.0, &gen));
  KT_CHECK(gen.offset == 4);
  double mean, var;
  moments_f32(x, N1M, &mean, &var);
  KT_NEAR(mean, 1.5, 0.01);
  KT_NEAR(var, 4.0, 0.03);
  int64_t within1 = 0;
  for (int64_t i = 0; i < N1M; i++) within1 += fabs(x[i] - 1.5) < 2.0;
  KT_NEAR((double)within1 / N1M, 0.682689, 0.003);
  for (int64_t i = 0; i < 64; i += 1) { /* element i: pair (i/2 within its block) */
    uint32_t r[4];
    ref_philox(42, 3, (uint64_t)i / 4, r);
    const int q = (int)(i % 4) / 2;
    const double u1 = ((double)r[2 * q] + 1.0) / 4294967296.0, u2 = r[2 * q + 1] / 4294967296.0;
    const double z = sqrt(-2 * log(u1)) * (i % 2 ? sin(6.283185307179586 * u2)
                                                 : cos(6.283185307179586 * u2));
    KT_NEAR(x[i], 1.5 + 2.0 * z, 1e-5);
  }
  double* d = malloc(sizeof(double) * N1M);
  kiln_tensor_t td = vec(d, KILN_DTYPE_F64, N1M);
  KT_OK(kiln_kernel_normal(&td, 0.0, 1.0, &gen));
  double s = 0, s2 = 0, s4 = 0;
  for (int64_t i = 0; i < N1M; i++) {
    s += d[i];
    s2 += d[i] * d[i];
    s4 += d[i] * d[i] * d[i] * d[i];
  }
  KT_NEAR(s / N1M, 0.0, 0.005);
  KT_NEAR(s2 / N1M, 1.0, 0.01);
  KT_NEAR(s4 / N1M, 3.0, 0.05); /* kurtosis of a normal */
  free(x);
  free(d);
}

KT_TEST(exponential_stats) {
  float* x = malloc(sizeof(float) * N1M);
  kiln_tensor_t t = vec(x, KILN_DTYPE_F32, N1M);
  kiln_philox_t gen = {8, 0};
  KT_OK(kiln_kernel_exponential(&t, 4.0, &gen));
  double mean, var;
  moments_f32(x, N1M, &mean, &var);
  KT_NEAR(mean, 0.25, 0.002);
  KT_NEAR(var, 0.0625, 0.002);
  int nonpos = 0;
  for (int64_t i = 0; i < N1M; i++) nonpos += !(x[i] > 0.0f && isfinite(x[i]));
  KT_CHECK(nonpos == 0);
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_kernel_exponential(&t, 0.0, &gen));
  free(x);
}

KT_TEST(bernoulli_scalar_rates_and_dtypes) {
  uint8_t* b = malloc(N1M);
  kiln_tensor_t t = vec(b, KILN_DTYPE_BOOL, N1M);
  kiln_philox_t gen = {77, 0};
  KT_OK(kiln_kernel_bernoulli_scalar(&t, 0.3, &gen));
  int64_t ones = 0, bad = 0;
  for (int64_t i = 0; i < N1M; i++) {
    ones += b[i];
    bad += b[i] != (ref_u32(77, 0, i) / 4294967296.0 < 0.3);
  }
  KT_NEAR((double)ones / N1M, 0.3, 0.002);
  KT_CHECK(bad == 0);
  KT_OK(kiln_kernel_bernoulli_scalar(&t, 0.0, &gen));
  ones = 0;
  for (int64_t i = 0; i < N1M; i++) ones += b[i];
  KT_CHECK(ones == 0);
  KT_OK(kiln_kernel_bernoulli_scalar(&t, 1.0, &gen));
  ones = 0;
  for (int64_t i = 0; i < N1M; i++) ones += b[i];
  KT_CHECK(ones == N1M);
  float f[1000];
  kiln_tensor_t tf = vec(f, KILN_DTYPE_F32, 1000);
  KT_OK(kiln_kernel_bernoulli_scalar(&tf, 0.5, &gen));
  int other = 0;
  for (int i = 0; i < 1000; i++) other += f[i] != 0.0f && f[i] != 1.0f;
  KT_CHECK(other == 0);
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_kernel_bernoulli_scalar(&tf, 1.5, &gen));
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_kernel_bernoulli_scalar(&tf, NAN, &gen));
  free(b);
}

KT_TEST(bernoulli_tensor_broadcast_and_range_check) {
  enum { R = 4, C = 50000 };
  int32_t* out = malloc(sizeof(int32_t) * R * C);
  float p[R] = {0.0f, 0.25f, 0.9f, 1.0f};
  int64_t oshape[2] = {R, C}, pshape[2] = {R, 1};
  kiln_tensor_t to, tp;
  kiln_tensor_init_contiguous(&to, out, KILN_DTYPE_I32, 2, oshape);
  kiln_tensor_init_contiguous(&tp, p, KILN_DTYPE_F32, 2, pshape);
  kiln_philox_t gen = {3, 100};
  KT_OK(kiln_kernel_bernoulli_tensor(&to, &tp, &gen));
  KT_CHECK(gen.offset == 101);
  for (int r = 0; r < R; r++) {
    int64_t ones = 0;
    for (int c = 0; c < C; c++) ones += out[r * C + c];
    KT_NEAR((double)ones / C, p[r], 0.008);
  }
  p[2] = 1.5f;
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_kernel_bernoulli_tensor(&to, &tp, &gen));
  KT_CHECK(gen.offset == 101); /* unchanged on error */
  int64_t bad_shape[2] = {3, 1};
  kiln_tensor_init_contiguous(&tp, p, KILN_DTYPE_F32, 2, bad_shape);
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_kernel_bernoulli_tensor(&to, &tp, &gen));
  free(out);
}

KT_TEST(random_int_range_coverage_and_bounds) {
  int64_t* x = malloc(sizeof(int64_t) * N1M);
  kiln_tensor_t t = vec(x, KILN_DTYPE_I64, N1M);
  kiln_philox_t gen = {2024, 1};
  KT_OK(kiln_kernel_random_int(&t, -3, 7, &gen));
  int64_t counts[10] = {0}, bad = 0, outside = 0;
  for (int64_t i = 0; i < N1M; i++) {
    if (x[i] < -3 || x[i] >= 7) {
      outside++;
      continue;
    }
    counts[x[i] + 3]++;
    const uint64_t u = ref_u64(2024, 1, i);
    bad += x[i] != -3 + (int64_t)(((unsigned __int128)u * 10u) >> 64);
  }
  KT_CHECK(outside == 0);
  KT_CHECK(bad == 0);
  for (int k = 0; k < 10; k++) KT_NEAR((double)counts[k] / N1M, 0.1, 0.002);
  KT_OK(kiln_kernel_random_int(&t, INT64_MIN, INT64_MAX, &gen)); /* 64-bit range */
  int64_t neg = 0;
  for (int64_t i = 0; i < N1M; i++) neg += x[i] < 0;
  KT_NEAR((double)neg / N1M, 0.5, 0.003);
  uint8_t u8[4096];
  kiln_tensor_t tu = vec(u8, KILN_DTYPE_U8, 4096);
  KT_OK(kiln_kernel_random_int(&tu, 0, 256, &gen));
  int seen[256] = {0}, distinct = 0;
  for (int i = 0; i < 4096; i++) seen[u8[i]] = 1;
  for (int i = 0; i < 256; i++) distinct += seen[i];
  KT_CHECK(distinct == 256);
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_kernel_random_int(&tu, 0, 257, &gen));
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_kernel_random_int(&tu, 5, 5, &gen));
  uint16_t h[1000];
  kiln_tensor_t th = vec(h, KILN_DTYPE_F16, 1000);
  KT_OK(kiln_kernel_random_int(&th, -2048, 2049, &gen));
  int nonint = 0;
  for (int i = 0; i < 1000; i++) {
    const float v = kiln_f16_to_f32(h[i]);
    nonint += v != floorf(v) || v < -2048 || v > 2048;
  }
  KT_CHECK(nonint == 0);
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_kernel_random_int(&th, 0, 2050, &gen));
  free(x);
}

static int is_perm_i64(const int64_t* x, int64_t n) {
  char* seen = calloc((size_t)n + 1, 1);
  int ok = 1;
  for (int64_t i = 0; i < n && ok; i++) {
    ok = x[i] >= 0 && x[i] < n && !seen[x[i]];
    if (ok) seen[x[i]] = 1;
  }
  free(seen);
  return ok;
}

KT_TEST(randperm_is_a_permutation_and_reproducible) {
  enum { N = 100003 };
  int64_t* a = malloc(sizeof(int64_t) * N);
  int64_t* b = malloc(sizeof(int64_t) * N);
  kiln_tensor_t ta = vec(a, KILN_DTYPE_I64, N), tb = vec(b, KILN_DTYPE_I64, N);
  kiln_philox_t g1 = {9, 4}, g2 = {9, 4};
  KT_OK(kiln_kernel_randperm(&ta, N, &g1));
  KT_OK(kiln_kernel_randperm(&tb, N, &g2));
  KT_CHECK(g1.offset == 5);
  KT_CHECK(is_perm_i64(a, N));
  KT_CHECK(memcmp(a, b, sizeof(int64_t) * N) == 0);
  int64_t fixed = 0;
  for (int64_t i = 0; i < N; i++) fixed += a[i] == i;
  KT_CHECK(fixed < 20); /* ~1 expected */
  KT_OK(kiln_kernel_randperm(&tb, N, &g2)); /* next offset: a different permutation */
  KT_CHECK(memcmp(a, b, sizeof(int64_t) * N) != 0);
  /* position of element 0 after many small shuffles is uniform */
  int64_t pos[5] = {0};
  kiln_tensor_t t5 = vec(a, KILN_DTYPE_I64, 5);
  for (int rep = 0; rep < 20000; rep++) {
    KT_OK(kiln_kernel_randperm(&t5, 5, &g1));
    for (int i = 0; i < 5; i++) pos[i] += a[i] == 0;
  }
  for (int i = 0; i < 5; i++) KT_NEAR(pos[i] / 20000.0, 0.2, 0.015);
  float f[300];
  kiln_tensor_t tf = vec(f, KILN_DTYPE_F32, 300);
  KT_OK(kiln_kernel_randperm(&tf, 300, &g1));
  double sum = 0;
  for (int i = 0; i < 300; i++) sum += f[i];
  KT_CHECK(sum == 299.0 * 300.0 / 2.0);
  int8_t s8[200];
  kiln_tensor_t t8 = vec(s8, KILN_DTYPE_I8, 200);
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_kernel_randperm(&t8, 200, &g1));
  kiln_tensor_t t0 = vec(a, KILN_DTYPE_I64, 0);
  KT_OK(kiln_kernel_randperm(&t0, 0, &g1));
  kiln_tensor_t t1 = vec(a, KILN_DTYPE_I64, 1);
  KT_OK(kiln_kernel_randperm(&t1, 1, &g1));
  KT_CHECK(a[0] == 0);
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_kernel_randperm(&t1, 2, &g1));
  free(a);
  free(b);
}

KT_TEST(dropout_mask_scale_and_modes) {
  enum { N = 200001 };
  float* x = malloc(sizeof(float) * N);
  float* y = malloc(sizeof(float) * N);
  uint8_t* mask = malloc(N);
  uint8_t* ref = malloc(N);
  for (int i = 0; i < N; i++) x[i] = (float)(i % 97) - 48.0f;
  kiln_tensor_t tx = vec(x, KILN_DTYPE_F32, N), ty = vec(y, KILN_DTYPE_F32, N);
  kiln_tensor_t tm = vec(mask, KILN_DTYPE_BOOL, N), tr = vec(ref, KILN_DTYPE_U8, N);
  kiln_philox_t gen = {31337, 12}, g2 = gen;
  KT_OK(kiln_kernel_dropout(&tx, 0.2, 1, &ty, &tm, &gen));
  KT_OK(kiln_kernel_bernoulli_scalar(&tr, 0.8, &g2));
  KT_CHECK(gen.offset == 13 && g2.offset == 13);
  KT_CHECK(memcmp(mask, ref, N) == 0);
  int64_t kept = 0, bad = 0;
  const float scale = (float)(1.0 / 0.8);
  for (int i = 0; i < N; i++) {
    kept += mask[i];
    bad += y[i] != (x[i] * (float)mask[i]) * scale;
  }
  KT_CHECK(bad == 0);
  KT_NEAR((double)kept / N, 0.8, 0.004);
  /* in place (out aliases x), no mask */
  memcpy(y, x, sizeof(float) * N);
  kiln_philox_t g3 = {31337, 12};
  KT_OK(kiln_kernel_dropout(&ty, 0.2, 1, &ty, NULL, &g3));
  bad = 0;
  for (int i = 0; i < N; i++) bad += y[i] != (x[i] * (float)mask[i]) * scale;
  KT_CHECK(bad == 0);
  /* p = 0: copy, all kept; p = 1: zeros (x * 0), none kept; eval: copy, no draw */
  KT_OK(kiln_kernel_dropout(&tx, 0.0, 1, &ty, &tm, &gen));
  KT_CHECK(memcmp(x, y, sizeof(float) * N) == 0 && mask[0] == 1 && mask[N - 1] == 1);
  KT_OK(kiln_kernel_dropout(&tx, 1.0, 1, &ty, &tm, &gen));
  bad = 0;
  for (int i = 0; i < N; i++) bad += y[i] != 0.0f || mask[i] != 0;
  KT_CHECK(bad == 0);
  const uint64_t before = gen.offset;
  KT_OK(kiln_kernel_dropout(&tx, 0.5, 0, &ty, &tm, &gen));
  KT_CHECK(gen.offset == before);
  KT_CHECK(memcmp(x, y, sizeof(float) * N) == 0 && mask[N / 2] == 1);
  /* bf16 output from f32 x */
  uint16_t* h = malloc(sizeof(uint16_t) * N);
  kiln_tensor_t th = vec(h, KILN_DTYPE_BF16, N);
  kiln_philox_t g4 = {31337, 12};
  KT_OK(kiln_kernel_dropout(&tx, 0.2, 1, &th, NULL, &g4));
  bad = 0;
  for (int i = 0; i < N; i++) bad += h[i] != kiln_f32_to_bf16((x[i] * (float)ref[i]) * scale);
  KT_CHECK(bad == 0);
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_kernel_dropout(&tx, 1.01, 1, &ty, NULL, &gen));
  kiln_tensor_t short_y = vec(y, KILN_DTYPE_F32, N - 1);
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_kernel_dropout(&tx, 0.5, 1, &short_y, NULL, &gen));
  free(x);
  free(y);
  free(mask);
  free(ref);
  free(h);
}

KT_TEST(offset_rules_and_errors) {
  float x[64], y[64];
  kiln_tensor_t t = vec(x, KILN_DTYPE_F32, 64), ty = vec(y, KILN_DTYPE_F32, 64);
  kiln_philox_t gen = {1, 0};
  KT_OK(kiln_kernel_uniform(&t, 0, 1, &gen));
  KT_OK(kiln_kernel_uniform(&ty, 0, 1, &gen));
  KT_CHECK(gen.offset == 2);
  KT_CHECK(memcmp(x, y, sizeof x) != 0); /* successive calls differ */
  kiln_philox_t again = {1, 0};
  KT_OK(kiln_kernel_uniform(&ty, 0, 1, &again));
  KT_CHECK(memcmp(x, y, sizeof x) == 0); /* same (seed, offset), same values */
  kiln_philox_t other = {2, 0};
  KT_OK(kiln_kernel_uniform(&ty, 0, 1, &other));
  KT_CHECK(memcmp(x, y, sizeof x) != 0);
  kiln_tensor_t empty = vec(x, KILN_DTYPE_F32, 0);
  KT_OK(kiln_kernel_normal(&empty, 0, 1, &gen));
  KT_CHECK(gen.offset == 3); /* numel 0 still advances by 1 */
  int32_t iv[4];
  kiln_tensor_t ti = vec(iv, KILN_DTYPE_I32, 4);
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_kernel_uniform(&ti, 0, 1, &gen));
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_kernel_normal(&ti, 0, 1, &gen));
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_kernel_uniform(&t, 1, 0, &gen));
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_kernel_uniform(&t, 0, INFINITY, &gen));
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_kernel_normal(&t, 0, -1, &gen));
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_kernel_uniform(&t, 0, 1, NULL));
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_kernel_uniform(NULL, 0, 1, &gen));
  kiln_tensor_t th = vec(x, KILN_DTYPE_F16, 8);
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_kernel_uniform(&th, 0, 1e6, &gen)); /* f16 inf */
  kiln_tensor_t nul = vec(NULL, KILN_DTYPE_F32, 4);
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_kernel_bernoulli_scalar(&nul, 0.5, &gen));
  KT_CHECK(gen.offset == 3); /* no failed call advanced it */
}

KT_MAIN()
