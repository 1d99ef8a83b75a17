/* SPDX-License-Identifier: Apache-2.0 */
/* test_index.c - index / shape / factory / sort kernels (kiln/kernels/index.h) on small
 * hand-checked cases, error paths, and larger inputs that take the parallel paths (checked
 * against naive loops). The full comparison with torch lives in
 * tests/python/test_index_kernels_vs_torch.py. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "kiln_test.h"
#include "kiln/kernels/index.h"

#define S(...) ((const int64_t[]){__VA_ARGS__})

static kiln_tensor_t T(void* data, kiln_dtype_t dt, int nd, const int64_t* shape) {
  kiln_tensor_t t;
  memset(&t, 0, sizeof t);
  KILN_ASSERT(kiln_tensor_init_contiguous(&t, data, dt, nd, shape) == KILN_OK);
  return t;
}

static kiln_tensor_t transposed(kiln_tensor_t t) { /* swap the two dims of a 2-d view */
  int64_t s = t.shape[0];
  t.shape[0] = t.shape[1];
  t.shape[1] = s;
  s = t.strides[0];
  t.strides[0] = t.strides[1];
  t.strides[1] = s;
  return t;
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return rng_state;
}

static int msg_has(const char* s) { return strstr(kiln_status_message(), s) != NULL; }

/* ---- cat ------------------------------------------------------------------------------------- */

KT_TEST(cat_dims_noncontig_and_skip) {
  float a[6] = {0, 1, 2, 3, 4, 5}; /* [2, 3] */
  float b[4] = {6, 7, 8, 9};       /* stored [2, 2], used transposed */
  float out[10];
  kiln_tensor_t ta = T(a, KILN_DTYPE_F32, 2, S(2, 3));
  kiln_tensor_t tb = transposed(T(b, KILN_DTYPE_F32, 2, S(2, 2)));
  kiln_tensor_t empty = T(NULL, KILN_DTYPE_F32, 1, S(0)), to = T(out, KILN_DTYPE_F32, 2, S(2, 5));
  const kiln_tensor_t* ins[3] = {&ta, &empty, &tb};
  KT_OK(kiln_kernel_cat(ins, 3, -1, &to));
  const float want[10] = {0, 1, 2, 6, 8, 3, 4, 5, 7, 9};
  for (int i = 0; i < 10; i++) KT_CHECK(out[i] == want[i]);
  to = T(out, KILN_DTYPE_F32, 2, S(4, 3));
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_kernel_cat(ins, 3, 0, &to));
  KT_CHECK(msg_has("[2, 2]"));
  kiln_tensor_t scalar = T(a, KILN_DTYPE_F32, 0, NULL);
  const kiln_tensor_t* bad[1] = {&scalar};
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_kernel_cat(bad, 1, 0, &to));
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_kernel_cat(ins, 0, 0, &to));
}

KT_TEST(cat_casts_to_out_dtype) {
  int32_t a[2] = {1, -2};
  double b[1] = {2.5};
  float out[3];
  kiln_tensor_t ta = T(a, KILN_DTYPE_I32, 1, S(2)), tb = T(b, KILN_DTYPE_F64, 1, S(1));
  kiln_tensor_t to = T(out, KILN_DTYPE_F32, 1, S(3));
  const kiln_tensor_t* ins[2] = {&ta, &tb};
  KT_OK(kiln_kernel_cat(ins, 2, 0, &to));
  KT_CHECK(out[0] == 1 && out[1] == -2 && out[2] == 2.5f);
}

/* ---- index_select / gather ------------------------------------------------------------------- */

KT_TEST(index_select_basic_and_errors) {
  int16_t x[6] = {10, 11, 12, 20, 21, 22}; /* [2, 3] */
  int32_t idx[4] = {2, 0, 2, 1};
  int16_t out[8];
  kiln_tensor_t tx = T(x, KILN_DTYPE_I16, 2, S(2, 3)), ti = T(idx, KILN_DTYPE_I32, 1, S(4));
  kiln_tensor_t to = T(out, KILN_DTYPE_I16, 2, S(2, 4));
  KT_OK(kiln_kernel_index_select(&tx, -1, &ti, &to));
  const int16_t want[8] = {12, 10, 12, 11, 22, 20, 22, 21};
  for (int i = 0; i < 8; i++) KT_CHECK(out[i] == want[i]);
  idx[1] = -1;
  memset(out, 0, sizeof out);
  KT_FAILS(KILN_ERROR_OUT_OF_RANGE, kiln_kernel_index_select(&tx, 1, &ti, &to));
  KT_CHECK(msg_has("index -1") && msg_has("size 3"));
  KT_CHECK(out[0] == 0); /* nothing written */
  idx[1] = 3;
  KT_FAILS(KILN_ERROR_OUT_OF_RANGE, kiln_kernel_index_select(&tx, 1, &ti, &to));
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_kernel_index_select(&tx, 2, &ti, &to));
  kiln_tensor_t tf = T(x, KILN_DTYPE_F32, 1, S(1));
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_kernel_index_select(&tx, 1, &tf, &to));
  kiln_tensor_t empty_i = T(NULL, KILN_DTYPE_I64, 1, S(0));
  kiln_tensor_t empty_o = T(NULL, KILN_DTYPE_I16, 2, S(2, 0));
  KT_OK(kiln_kernel_index_select(&tx, 1, &empty_i, &empty_o));
}

KT_TEST(index_select_large_parallel) {
  enum { R = 3000, C = 37, N = 5000 };
  static double x[R * C], out[N * C], out2[C * N];
  static int64_t idx[N];
  for (int i = 0; i < R * C; i++) x[i] = (double)i;
  for (int i = 0; i < N; i++) idx[i] = (int64_t)(rnd() % R);
  kiln_tensor_t tx = T(x, KILN_DTYPE_F64, 2, S(R, C)), ti = T(idx, KILN_DTYPE_I64, 1, S(N));
  kiln_tensor_t to = T(out, KILN_DTYPE_F64, 2, S(N, C));
  KT_OK(kiln_kernel_index_select(&tx, 0, &ti, &to));
  int bad = 0;
  for (int i = 0; i < N; i++)
    for (int j = 0; j < C; j++) bad += out[i * C + j] != x[idx[i] * C + j];
  KT_CHECK(bad == 0);
  /* along the last dim of the transposed view: the per-element gather path */
  for (int i = 0; i < N; i++) idx[i] = (int64_t)(rnd() % C);
  kiln_tensor_t tt = transposed(T(x, KILN_DTYPE_F64, 2, S(R, C)));       /* [C, R] */
  kiln_tensor_t ti2 = T(idx, KILN_DTYPE_I64, 1, S(N));
  for (int i = 0; i < N; i++) idx[i] = (int64_t)(rnd() % R);
  kiln_tensor_t to2 = T(out2, KILN_DTYPE_F64, 2, S(C, N));
  KT_OK(kiln_kernel_index_select(&tt, 1, &ti2, &to2));
  bad = 0;
  for (int c = 0; c < C; c++)
    for (int i = 0; i < N; i++) bad += out2[c * N + i] != x[idx[i] * C + c];
  KT_CHECK(bad == 0);
}

KT_TEST(gather_and_errors) {
  uint8_t x[6] = {1, 2, 3, 4, 5, 6}; /* [2, 3] */
  int64_t idx[4] = {2, 2, 0, 1};     /* [2, 2] */
  uint8_t out[4];
  kiln_tensor_t tx = T(x, KILN_DTYPE_U8, 2, S(2, 3)), ti = T(idx, KILN_DTYPE_I64, 2, S(2, 2));
  kiln_tensor_t to = T(out, KILN_DTYPE_U8, 2, S(2, 2));
  KT_OK(kiln_kernel_gather(&tx, 1, &ti, &to));
  KT_CHECK(out[0] == 3 && out[1] == 3 && out[2] == 4 && out[3] == 5);
  idx[3] = 3;
  KT_FAILS(KILN_ERROR_OUT_OF_RANGE, kiln_kernel_gather(&tx, 1, &ti, &to));
  KT_CHECK(msg_has("index 3") && msg_has("size 3"));
  kiln_tensor_t ti32 = T(idx, KILN_DTYPE_I32, 2, S(2, 2));
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_kernel_gather(&tx, 1, &ti32, &to));
  kiln_tensor_t big = T(idx, KILN_DTYPE_I64, 2, S(3, 1)), tob = T(out, KILN_DTYPE_U8, 2, S(3, 1));
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_kernel_gather(&tx, 1, &big, &tob));
}

/* ---- scatter family -------------------------------------------------------------------------- */

KT_TEST(scatter_modes) {
  float self[4], src[3] = {1, 2, 4};
  int64_t idx[3] = {1, 1, 3};
  kiln_tensor_t ts = T(self, KILN_DTYPE_F32, 1, S(4)), tx = T(src, KILN_DTYPE_F32, 1, S(3));
  kiln_tensor_t ti = T(idx, KILN_DTYPE_I64, 1, S(3));
  const float init[4] = {10, 10, 10, 10};
  struct { kiln_scatter_reduce_t r; int inc; float want[4]; } cases[] = {
      {KILN_SCATTER_NONE, 1, {10, 2, 10, 4}},  {KILN_SCATTER_ADD, 1, {10, 13, 10, 14}},
      {KILN_SCATTER_MULTIPLY, 1, {10, 20, 10, 40}}, {KILN_SCATTER_SUM, 0, {10, 3, 10, 4}},
      {KILN_SCATTER_PROD, 0, {10, 2, 10, 4}},  {KILN_SCATTER_MEAN, 1, {10, 13.f / 3, 10, 7}},
      {KILN_SCATTER_MEAN, 0, {10, 1.5f, 10, 4}}, {KILN_SCATTER_AMAX, 1, {10, 10, 10, 10}},
      {KILN_SCATTER_AMAX, 0, {10, 2, 10, 4}},  {KILN_SCATTER_AMIN, 1, {10, 1, 10, 4}},
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    memcpy(self, init, sizeof self);
    KT_OK(kiln_kernel_scatter(&ts, 0, &ti, &tx, 0.0, cases[c].r, cases[c].inc));
    for (int i = 0; i < 4; i++) KT_NEAR(self[i], cases[c].want[i], 1e-6);
  }
  memcpy(self, init, sizeof self);
  KT_OK(kiln_kernel_scatter(&ts, 0, &ti, NULL, -1.0, KILN_SCATTER_ADD, 1));
  KT_CHECK(self[1] == 8 && self[3] == 9 && self[0] == 10);
  src[0] = NAN;
  memcpy(self, init, sizeof self);
  KT_OK(kiln_kernel_scatter(&ts, 0, &ti, &tx, 0.0, KILN_SCATTER_AMAX, 1));
  KT_CHECK(isnan(self[1]) && self[3] == 10);
  idx[2] = 4;
  memcpy(self, init, sizeof self);
  KT_FAILS(KILN_ERROR_OUT_OF_RANGE, kiln_kernel_scatter(&ts, 0, &ti, &tx, 0, KILN_SCATTER_ADD, 1));
  KT_CHECK(msg_has("index 4") && self[1] == 10);
  idx[2] = -1;
  KT_FAILS(KILN_ERROR_OUT_OF_RANGE, kiln_kernel_scatter(&ts, 0, &ti, &tx, 0, KILN_SCATTER_ADD, 1));
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT,
           kiln_kernel_scatter(&ts, 0, &ti, &tx, 0, KILN_SCATTER_COUNT, 1));
}

KT_TEST(scatter_mean_int_floor) {
  int32_t self[2] = {0, 0}, src[3] = {3, 4, -3};
  int64_t idx[3] = {0, 0, 1};
  kiln_tensor_t ts = T(self, KILN_DTYPE_I32, 1, S(2)), tx = T(src, KILN_DTYPE_I32, 1, S(3));
  kiln_tensor_t ti = T(idx, KILN_DTYPE_I64, 1, S(3));
  KT_OK(kiln_kernel_scatter(&ts, 0, &ti, &tx, 0, KILN_SCATTER_MEAN, 1));
  KT_CHECK(self[0] == 2 && self[1] == -2); /* torch: 7/3 -> 2, -3/2 -> -2 */
}

KT_TEST(scatter_add_large_matches_serial) {
  enum { R = 50, C = 300, J = 2000 };
  static float self[R * C], ref[R * C], src[J * C];
  static int64_t idx[J * C];
  for (int i = 0; i < R * C; i++) self[i] = ref[i] = (float)(rnd() % 100) / 7.f;
  for (int i = 0; i < J * C; i++) {
    src[i] = (float)(rnd() % 1000) / 13.f - 30.f;
    idx[i] = (int64_t)(rnd() % R);
  }
  for (int j = 0; j < J; j++)
    for (int c = 0; c < C; c++) ref[idx[j * C + c] * C + c] += src[j * C + c];
  kiln_tensor_t ts = T(self, KILN_DTYPE_F32, 2, S(R, C)), tx = T(src, KILN_DTYPE_F32, 2, S(J, C));
  kiln_tensor_t ti = T(idx, KILN_DTYPE_I64, 2, S(J, C));
  KT_OK(kiln_kernel_scatter(&ts, 0, &ti, &tx, 0, KILN_SCATTER_ADD, 1));
  KT_CHECK(memcmp(self, ref, sizeof self) == 0); /* bit-exact: same order of additions */
}

KT_TEST(index_add_dups_alpha_bool) {
  double self[3 * 2] = {0}, src[4 * 2] = {1, 2, 3, 4, 5, 6, 7, 8};
  int64_t idx[4] = {2, 0, 2, 2};
  kiln_tensor_t ts = T(self, KILN_DTYPE_F64, 2, S(3, 2)), tx = T(src, KILN_DTYPE_F64, 2, S(4, 2));
  kiln_tensor_t ti = T(idx, KILN_DTYPE_I64, 1, S(4));
  KT_OK(kiln_kernel_index_add(&ts, 0, &ti, &tx, 0.5));
  KT_CHECK(self[0] == 1.5 && self[1] == 2 && self[2] == 0 && self[4] == 6.5 && self[5] == 8);
  idx[0] = 3;
  KT_FAILS(KILN_ERROR_OUT_OF_RANGE, kiln_kernel_index_add(&ts, 0, &ti, &tx, 1.0));
  kiln_tensor_t bad = T(src, KILN_DTYPE_F64, 2, S(4, 1));
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_kernel_index_add(&ts, 0, &ti, &bad, 1.0));
  uint8_t b[2] = {0, 1}, bs[2] = {1, 1};
  int64_t bi[2] = {0, 1};
  kiln_tensor_t tb = T(b, KILN_DTYPE_BOOL, 1, S(2)), tbs = T(bs, KILN_DTYPE_BOOL, 1, S(2));
  kiln_tensor_t tbi = T(bi, KILN_DTYPE_I64, 1, S(2));
  KT_OK(kiln_kernel_index_add(&tb, 0, &tbi, &tbs, 1.0));
  KT_CHECK(b[0] == 1 && b[1] == 1);
}

/* ---- advanced indexing ----------------------------------------------------------------------- */

KT_TEST(index_layouts) {
  int32_t x[2 * 3 * 4]; /* [2, 3, 4], x[a][b][c] = 100a + 10b + c */
  for (int a = 0; a < 2; a++)
    for (int b = 0; b < 3; b++)
      for (int c = 0; c < 4; c++) x[(a * 3 + b) * 4 + c] = 100 * a + 10 * b + c;
  kiln_tensor_t tx = T(x, KILN_DTYPE_I32, 3, S(2, 3, 4));
  int64_t i1[2] = {-1, 0}, i2[2] = {3, 1};
  kiln_tensor_t t1 = T(i1, KILN_DTYPE_I64, 1, S(2)), t2 = T(i2, KILN_DTYPE_I64, 1, S(2));
  int32_t nd;
  int64_t shape[KILN_MAX_DIMS];
  int32_t out[16];
  /* adjacent (NULL, i1, i2): [2, B=2] */
  const kiln_tensor_t* adj[3] = {NULL, &t1, &t2};
  KT_OK(kiln_kernel_index_shape(&tx, adj, 3, &nd, shape));
  KT_CHECK(nd == 2 && shape[0] == 2 && shape[1] == 2);
  kiln_tensor_t to = T(out, KILN_DTYPE_I32, 2, S(2, 2));
  KT_OK(kiln_kernel_index(&tx, adj, 3, &to));
  KT_CHECK(out[0] == 23 && out[1] == 1 && out[2] == 123 && out[3] == 101);
  /* separated (i1, NULL, i2): B first -> [2, 3] */
  const kiln_tensor_t* sep[3] = {&t1, NULL, &t2};
  KT_OK(kiln_kernel_index_shape(&tx, sep, 3, &nd, shape));
  KT_CHECK(nd == 2 && shape[0] == 2 && shape[1] == 3);
  to = T(out, KILN_DTYPE_I32, 2, S(2, 3));
  KT_OK(kiln_kernel_index(&tx, sep, 3, &to));
  KT_CHECK(out[0] == 103 && out[1] == 113 && out[2] == 123 && out[3] == 1 && out[5] == 21);
  /* single leading index: [2, 3, 4] rows */
  kiln_tensor_t tz = T(out, KILN_DTYPE_I32, 3, S(2, 1, 4));
  kiln_tensor_t xs = tx;
  xs.shape[1] = 1; /* x[:, :1, :] */
  const kiln_tensor_t* lead[1] = {&t1};
  KT_OK(kiln_kernel_index(&xs, lead, 1, &tz));
  KT_CHECK(out[0] == 100 && out[3] == 103 && out[4] == 0);
  i2[0] = 4;
  to = T(out, KILN_DTYPE_I32, 2, S(2, 2));
  KT_FAILS(KILN_ERROR_OUT_OF_RANGE, kiln_kernel_index(&tx, adj, 3, &to));
  KT_CHECK(msg_has("index 4") && msg_has("dimension 2") && msg_has("size 4"));
  i2[0] = -5;
  KT_FAILS(KILN_ERROR_OUT_OF_RANGE, kiln_kernel_index(&tx, adj, 3, &to));
  const kiln_tensor_t* many[4] = {&t1, &t1, &t1, &t1};
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_kernel_index(&tx, many, 4, &to));
  kiln_tensor_t t3 = T(i1, KILN_DTYPE_I64, 1, S(1));
  const kiln_tensor_t* mism[2] = {&t1, &t3};
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_kernel_index(&tx, mism, 2, &to));
}

KT_TEST(index_put_accumulate_broadcast) {
  float x[3 * 2] = {0};
  int64_t i[4] = {2, 0, 2, -1};
  float v[2] = {1, 10};
  kiln_tensor_t tx = T(x, KILN_DTYPE_F32, 2, S(3, 2)), ti = T(i, KILN_DTYPE_I64, 1, S(4));
  kiln_tensor_t tv = T(v, KILN_DTYPE_F32, 1, S(2)); /* broadcast over B */
  const kiln_tensor_t* ind[1] = {&ti};
  KT_OK(kiln_kernel_index_put(&tx, ind, 1, &tv, 1));
  KT_CHECK(x[0] == 1 && x[1] == 10 && x[2] == 0 && x[4] == 3 && x[5] == 30);
  KT_OK(kiln_kernel_index_put(&tx, ind, 1, &tv, 0));
  KT_CHECK(x[4] == 1 && x[5] == 10);
  kiln_tensor_t bad = T(v, KILN_DTYPE_F32, 2, S(2, 1));
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_kernel_index_put(&tx, ind, 1, &bad, 0));
  KT_CHECK(msg_has("shape mismatch"));
  i[1] = 3;
  x[0] = 5;
  KT_FAILS(KILN_ERROR_OUT_OF_RANGE, kiln_kernel_index_put(&tx, ind, 1, &tv, 1));
  KT_CHECK(x[0] == 5 && x[4] == 1);
}

/* ---- data-dependent sizes -------------------------------------------------------------------- */

KT_TEST(masked_select_and_nonzero) {
  float x[6] = {1, -0.0f, 3, NAN, 0, 6}; /* [2, 3] */
  uint8_t m[3] = {1, 0, 1};               /* broadcast rows */
  kiln_tensor_t tx = T(x, KILN_DTYPE_F32, 2, S(2, 3)), tm = T(m, KILN_DTYPE_BOOL, 1, S(3));
  int64_t n = -1;
  KT_OK(kiln_kernel_masked_select_count(&tx, &tm, &n));
  KT_CHECK(n == 4);
  float out[4];
  kiln_tensor_t to = T(out, KILN_DTYPE_F32, 1, S(4));
  KT_OK(kiln_kernel_masked_select(&tx, &tm, &to));
  KT_CHECK(out[0] == 1 && out[1] == 3 && isnan(out[2]) && out[3] == 6);
  to.shape[0] = 3;
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_kernel_masked_select(&tx, &tm, &to));
  kiln_tensor_t tm8 = T(m, KILN_DTYPE_U8, 1, S(3));
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_kernel_masked_select_count(&tx, &tm8, &n));
  KT_OK(kiln_kernel_nonzero_count(&tx, &n));
  KT_CHECK(n == 4); /* -0.0 and 0 are zero, NaN is not */
  int64_t nz[8];
  kiln_tensor_t tn = T(nz, KILN_DTYPE_I64, 2, S(4, 2));
  KT_OK(kiln_kernel_nonzero(&tx, &tn));
  const int64_t want[8] = {0, 0, 0, 2, 1, 0, 1, 2};
  for (int i = 0; i < 8; i++) KT_CHECK(nz[i] == want[i]);
  kiln_tensor_t s0 = T(x, KILN_DTYPE_F32, 0, NULL), tn0 = T(nz, KILN_DTYPE_I64, 2, S(1, 0));
  KT_OK(kiln_kernel_nonzero(&s0, &tn0));
}

KT_TEST(nonzero_large_multichunk) {
  enum { N = 1 << 20 };
  static uint8_t x[N];
  static int64_t out[N];
  int64_t want = 0;
  for (int i = 0; i < N; i++) want += (x[i] = (rnd() % 3) == 0);
  kiln_tensor_t tx = T(x, KILN_DTYPE_U8, 2, S(1024, 1024));
  int64_t n;
  KT_OK(kiln_kernel_nonzero_count(&tx, &n));
  KT_CHECK(n == want);
  kiln_tensor_t to = T(out, KILN_DTYPE_I64, 2, S(n, 2));
  KT_OK(kiln_kernel_nonzero(&tx, &to));
  int bad = 0;
  for (int64_t k = 0; k < n; k++) {
    const int64_t f = out[2 * k] * 1024 + out[2 * k + 1];
    bad += !x[f] || (k && f <= out[2 * (k - 1)] * 1024 + out[2 * k - 1]);
  }
  KT_CHECK(bad == 0);
}

/* ---- triangles, factories -------------------------------------------------------------------- */

KT_TEST(triu_tril_inplace_and_batched) {
  int8_t x[2 * 3 * 3];
  for (int i = 0; i < 18; i++) x[i] = (int8_t)(i + 1);
  int8_t out[18];
  kiln_tensor_t tx = T(x, KILN_DTYPE_I8, 3, S(2, 3, 3)), to = T(out, KILN_DTYPE_I8, 3, S(2, 3, 3));
  KT_OK(kiln_kernel_triu(&tx, 1, &to));
  const int8_t up[9] = {0, 2, 3, 0, 0, 6, 0, 0, 0};
  for (int i = 0; i < 9; i++) KT_CHECK(out[i] == up[i] && out[9 + i] == (up[i] ? up[i] + 9 : 0));
  KT_OK(kiln_kernel_tril(&tx, -1, &tx)); /* in place */
  const int8_t lo[9] = {0, 0, 0, 4, 0, 0, 7, 8, 0};
  for (int i = 0; i < 9; i++) KT_CHECK(x[i] == lo[i]);
  kiln_tensor_t v = T(x, KILN_DTYPE_I8, 1, S(3));
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_kernel_triu(&v, 0, &v));
}

KT_TEST(factories) {
  float f[5];
  kiln_tensor_t tf = T(f, KILN_DTYPE_F32, 1, S(5));
  KT_OK(kiln_kernel_arange(&tf, 1.0, 0.5));
  KT_CHECK(f[0] == 1 && f[4] == 3);
  int8_t i8[3];
  kiln_tensor_t t8 = T(i8, KILN_DTYPE_I8, 1, S(3));
  KT_OK(kiln_kernel_arange_i64(&t8, 126, 1));
  KT_CHECK(i8[0] == 126 && i8[1] == 127 && i8[2] == -128); /* wraps */
  int64_t l[5];
  kiln_tensor_t tl = T(l, KILN_DTYPE_I64, 1, S(5));
  KT_OK(kiln_kernel_linspace(&tl, 0, 10));
  KT_CHECK(l[0] == 0 && l[1] == 2 && l[2] == 5 && l[3] == 7 && l[4] == 10);
  KT_OK(kiln_kernel_linspace(&tf, -1, 1));
  KT_CHECK(f[0] == -1 && f[2] == 0 && f[4] == 1);
  uint8_t e[6];
  kiln_tensor_t te = T(e, KILN_DTYPE_BOOL, 2, S(2, 3));
  KT_OK(kiln_kernel_eye(&te));
  KT_CHECK(e[0] == 1 && e[1] == 0 && e[4] == 1 && e[5] == 0);
  kiln_tensor_t tb = T(e, KILN_DTYPE_BOOL, 1, S(3));
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_kernel_arange(&tb, 0, 1));
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_kernel_linspace(&te, 0, 1));
}

/* ---- sorting --------------------------------------------------------------------------------- */

KT_TEST(sort_nan_stable_descending) {
  float x[6] = {2, NAN, -0.0f, 1, 0, 2};
  float v[6];
  int64_t i[6];
  kiln_tensor_t tx = T(x, KILN_DTYPE_F32, 1, S(6)), tv = T(v, KILN_DTYPE_F32, 1, S(6));
  kiln_tensor_t ti = T(i, KILN_DTYPE_I64, 1, S(6));
  KT_OK(kiln_kernel_sort(&tx, 0, 0, 1, &tv, &ti));
  const int64_t asc[6] = {2, 4, 3, 0, 5, 1};
  for (int k = 0; k < 6; k++) KT_CHECK(i[k] == asc[k]);
  KT_CHECK(signbit(v[0]) && isnan(v[5]));
  KT_OK(kiln_kernel_sort(&tx, -1, 1, 1, &tv, &ti));
  const int64_t desc[6] = {1, 0, 5, 3, 2, 4};
  for (int k = 0; k < 6; k++) KT_CHECK(i[k] == desc[k]);
  KT_OK(kiln_kernel_argsort(&tx, 0, 0, 0, &ti));
  KT_CHECK(i[0] == 2 && i[5] == 1);
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_kernel_sort(&tx, 0, 0, 1, NULL, NULL));
}

KT_TEST(sort_large_stable) {
  enum { N = 100000 };
  static int16_t x[N], v[N];
  static int64_t idx[N];
  for (int k = 0; k < N; k++) x[k] = (int16_t)(rnd() % 200) - 100;
  kiln_tensor_t tx = T(x, KILN_DTYPE_I16, 1, S(N)), tv = T(v, KILN_DTYPE_I16, 1, S(N));
  kiln_tensor_t ti = T(idx, KILN_DTYPE_I64, 1, S(N));
  KT_OK(kiln_kernel_sort(&tx, 0, 0, 1, &tv, &ti));
  int bad = 0;
  for (int k = 0; k < N; k++) {
    bad += v[k] != x[idx[k]];
    if (k) bad += v[k] < v[k - 1] || (v[k] == v[k - 1] && idx[k] <= idx[k - 1]);
  }
  KT_CHECK(bad == 0);
}

KT_TEST(topk_basic_and_errors) {
  int32_t x[8] = {5, 1, 5, 3, 9, 1, 9, 0};
  int32_t v[3];
  int64_t i[3];
  kiln_tensor_t tx = T(x, KILN_DTYPE_I32, 1, S(8)), tv = T(v, KILN_DTYPE_I32, 1, S(3));
  kiln_tensor_t ti = T(i, KILN_DTYPE_I64, 1, S(3));
  KT_OK(kiln_kernel_topk(&tx, 3, 0, 1, 1, &tv, &ti));
  KT_CHECK(v[0] == 9 && v[1] == 9 && v[2] == 5);
  for (int k = 0; k < 3; k++) KT_CHECK(x[i[k]] == v[k]);
  KT_OK(kiln_kernel_topk(&tx, 3, 0, 0, 1, &tv, &ti));
  KT_CHECK(v[0] == 0 && v[1] == 1 && v[2] == 1);
  kiln_tensor_t tv9 = T(v, KILN_DTYPE_I32, 1, S(9));
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_kernel_topk(&tx, 9, 0, 1, 1, &tv9, NULL));
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_kernel_topk(&tx, 3, 0, 1, 1, &tv9, NULL));
}

/* ---- flip / roll / pad / repeat -------------------------------------------------------------- */

KT_TEST(flip_roll) {
  uint16_t x[6] = {1, 2, 3, 4, 5, 6}, out[6]; /* [2, 3] */
  kiln_tensor_t tx = T(x, KILN_DTYPE_BF16, 2, S(2, 3)), to = T(out, KILN_DTYPE_BF16, 2, S(2, 3));
  KT_OK(kiln_kernel_flip(&tx, 3u, &to));
  for (int k = 0; k < 6; k++) KT_CHECK(out[k] == 6 - k);
  int64_t sh[2] = {1, -1};
  int dims[2] = {0, 1};
  KT_OK(kiln_kernel_roll(&tx, sh, dims, 2, &to));
  const uint16_t want[6] = {5, 6, 4, 2, 3, 1};
  for (int k = 0; k < 6; k++) KT_CHECK(out[k] == want[k]);
  int64_t s1 = 8;
  kiln_tensor_t tt = transposed(tx); /* flattened roll of a non-contiguous view */
  kiln_tensor_t to2 = T(out, KILN_DTYPE_BF16, 2, S(3, 2));
  KT_OK(kiln_kernel_roll(&tt, &s1, NULL, 1, &to2));
  const uint16_t want2[6] = {3, 6, 1, 4, 2, 5}; /* flat t = 1 4 2 5 3 6 rolled by 2 */
  for (int k = 0; k < 6; k++) KT_CHECK(out[k] == want2[k]);
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_kernel_flip(&tx, 4u, &to));
}

KT_TEST(constant_pad_crop) {
  int64_t x[6] = {1, 2, 3, 4, 5, 6}, out[2 * 5]; /* [2, 3] */
  kiln_tensor_t tx = T(x, KILN_DTYPE_I64, 2, S(2, 3)), to = T(out, KILN_DTYPE_I64, 2, S(2, 5));
  const int64_t pad[4] = {-1, 3, 0, 0}; /* crop one on the left, add 3 on the right */
  KT_OK(kiln_kernel_constant_pad(&tx, pad, 4, 7.0, &to));
  const int64_t want[10] = {2, 3, 7, 7, 7, 5, 6, 7, 7, 7};
  for (int k = 0; k < 10; k++) KT_CHECK(out[k] == want[k]);
  const int64_t bad[2] = {-2, -2};
  kiln_tensor_t t0 = T(out, KILN_DTYPE_I64, 2, S(2, 0));
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_kernel_constant_pad(&tx, bad, 2, 0, &t0));
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_kernel_constant_pad(&tx, pad, 3, 0, &to));
}

KT_TEST(repeat_interleave_dim1) {
  float x[4] = {1, 2, 3, 4}, out[10]; /* [2, 2] */
  int64_t r[2] = {3, 2};
  kiln_tensor_t tx = T(x, KILN_DTYPE_F32, 2, S(2, 2)), tr = T(r, KILN_DTYPE_I64, 1, S(2));
  kiln_tensor_t to = T(out, KILN_DTYPE_F32, 2, S(2, 5));
  KT_OK(kiln_kernel_repeat_interleave(&tx, &tr, 1, &to));
  const float want[10] = {1, 1, 1, 2, 2, 3, 3, 3, 4, 4};
  for (int k = 0; k < 10; k++) KT_CHECK(out[k] == want[k]);
  r[1] = -1;
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_kernel_repeat_interleave(&tx, &tr, 1, &to));
}

KT_MAIN()
