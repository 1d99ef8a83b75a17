/* SPDX-License-Identifier: Apache-2.0 */
/* test_gemm_matmul.c - kiln_kernel_matmul / _ex on descriptors against a double reference.
 *
 * Covers broadcast batch dims (size 1 and stride 0), transposed and gathered (non-unit,
 * negative) strides, column-major and strided outputs, 1-D operands, the folded x[B,T,K] @ w
 * path, bias broadcasting / in-place / NaN with beta 0, and f64 / f16 / bf16. Tolerance per
 * element: tol * S with S the reference on absolute values; tol = 1e-5 sqrt(k+1) (f32),
 * 1e-13 sqrt(k+1) (f64), 2e-3 (f16: one output rounding + f32 accumulation), 1.6e-2 (bf16).
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/half.h"
#include "kiln/kernels/gemm.h"
#include "kiln_test.h"

static uint64_t g_rng = 0x2545F4914F6CDD1Dull;
static double drand_pm1(void) {
  g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
  return (double)((g_rng >> 40) & 0xffffff) / 8388608.0 - 1.0;
}

typedef struct tens {
  kiln_tensor_t t;
  void* base;
} tens_t;

static size_t esize(kiln_dtype_t dt) { return dt == KILN_DTYPE_F64 ? 8 : dt == KILN_DTYPE_F32 ? 4 : 2; }

static double get(const kiln_tensor_t* t, int64_t off) {
  const char* p = (const char*)t->data + off * (int64_t)esize(t->dtype);
  uint16_t h;
  switch (t->dtype) {
    case KILN_DTYPE_F64: { double d; memcpy(&d, p, 8); return d; }
    case KILN_DTYPE_F32: { float f; memcpy(&f, p, 4); return f; }
    case KILN_DTYPE_F16: memcpy(&h, p, 2); return kiln_f16_to_f32(h);
    default: memcpy(&h, p, 2); return kiln_bf16_to_f32(h);
  }
}

static void put(const kiln_tensor_t* t, int64_t off, double v) {
  char* p = (char*)t->data + off * (int64_t)esize(t->dtype);
  float f = (float)v;
  uint16_t h;
  switch (t->dtype) {
    case KILN_DTYPE_F64: memcpy(p, &v, 8); break;
    case KILN_DTYPE_F32: memcpy(p, &f, 4); break;
    case KILN_DTYPE_F16: h = kiln_f32_to_f16(f); memcpy(p, &h, 2); break;
    default: h = kiln_f32_to_bf16(f); memcpy(p, &h, 2); break;
  }
}

/* A random tensor; strides NULL = contiguous; negative strides allowed. */
static tens_t mk(kiln_dtype_t dt, int nd, const int64_t* shape, const int64_t* strides) {
  tens_t r;
  memset(&r, 0, sizeof(r));
  r.t.dtype = dt;
  r.t.ndim = nd;
  int64_t st = 1, lo = 0, hi = 0;
  for (int d = nd - 1; d >= 0; d--) {
    r.t.shape[d] = shape[d];
    r.t.strides[d] = strides ? strides[d] : st;
    st *= shape[d];
  }
  for (int d = 0; d < nd; d++) {
    int64_t ext = (shape[d] - 1) * r.t.strides[d];
    if (shape[d] == 0) ext = 0;
    if (ext < 0) lo += ext; else hi += ext;
  }
  const int64_t span = hi - lo + 1;
  r.base = malloc(esize(dt) * (size_t)span);
  r.t.data = (char*)r.base - lo * (int64_t)esize(dt);
  for (int64_t i = lo; i <= hi; i++) put(&r.t, i, drand_pm1());
  return r;
}

static int64_t numel(const kiln_tensor_t* t) {
  int64_t n = 1;
  for (int d = 0; d < t->ndim; d++) n *= t->shape[d];
  return n;
}

/* Offset of `t` (broadcast right-aligned to an index space of rank nd) at index idx. */
static int64_t bcast_off(const kiln_tensor_t* t, int nd, const int64_t* idx) {
  int64_t off = 0;
  for (int d = 0; d < t->ndim; d++) {
    const int od = d + nd - t->ndim;
    if (t->shape[d] != 1) off += idx[od] * t->strides[d];
  }
  return off;
}

/* Checks out against beta*bias + alpha*(a@b) for a, b of rank >= 2; returns bad elements. */
static int verify(const tens_t* a, const tens_t* b, const tens_t* bias, double alpha, double beta,
                  const tens_t* out, const kiln_tensor_t* out_before) {
  const kiln_tensor_t* o = &out->t;
  const int nd = o->ndim;
  const int64_t k = a->t.shape[a->t.ndim - 1];
  double tol = 1e-5 * sqrt(k + 1.0);
  if (o->dtype == KILN_DTYPE_F64) tol = 1e-13 * sqrt(k + 1.0);
  if (o->dtype == KILN_DTYPE_F16) tol = 2e-3;
  if (o->dtype == KILN_DTYPE_BF16) tol = 1.6e-2;
  int64_t idx[KILN_MAX_DIMS] = {0};
  int bad = 0;
  for (int64_t flat = 0; flat < numel(o); flat++) {
    int64_t rem = flat;
    for (int d = nd - 1; d >= 0; d--) { idx[d] = rem % o->shape[d]; rem /= o->shape[d]; }
    /* a's index: batch right-aligned over out's batch, then (i, p); b's: batch, (p, j). */
    int64_t ia[KILN_MAX_DIMS], ib[KILN_MAX_DIMS];
    memcpy(ia, idx, sizeof(ia));
    memcpy(ib, idx, sizeof(ib));
    double r = 0, s = 0;
    for (int64_t p = 0; p < k; p++) {
      ia[nd - 1] = p;
      ib[nd - 2] = p;
      const double x = get(&a->t, bcast_off(&a->t, nd, ia)) * get(&b->t, bcast_off(&b->t, nd, ib));
      r += x;
      s += fabs(x);
    }
    r *= alpha;
    s *= fabs(alpha);
    if (bias && beta != 0) {
      const kiln_tensor_t* bt = out_before ? out_before : &bias->t;
      const double bv = beta * get(bt, bcast_off(bt, nd, idx));
      r += bv;
      s += fabs(bv);
    }
    const double got = get(o, bcast_off(o, nd, idx));
    if (!(fabs(got - r) <= tol * s + 1e-30)) {
      if (bad < 3) fprintf(stderr, "  matmul %s: flat %lld got %.9g ref %.9g\n", kiln_dtype_name(o->dtype), (long long)flat, got, r);
      bad++;
    }
  }
  return bad;
}

static void drop(tens_t* t) { free(t->base); }

/* One case: shapes and optional strides for a, b, out (out shape derived by the caller). */
static int run_case(kiln_dtype_t dt, int na, const int64_t* sha, const int64_t* sta, int nb,
                    const int64_t* shb, const int64_t* stb, int no, const int64_t* sho,
                    const int64_t* sto) {
  tens_t a = mk(dt, na, sha, sta), b = mk(dt, nb, shb, stb), o = mk(dt, no, sho, sto);
  int64_t idx[KILN_MAX_DIMS];
  for (int64_t flat = 0; flat < numel(&o.t); flat++) { /* beta = 0: NaN in out must not leak */
    int64_t rem = flat;
    for (int d = no - 1; d >= 0; d--) { idx[d] = rem % sho[d]; rem /= sho[d]; }
    put(&o.t, bcast_off(&o.t, no, idx), NAN);
  }
  KT_OK(kiln_kernel_matmul(&a.t, &b.t, &o.t));
  int bad = verify(&a, &b, NULL, 1.0, 0.0, &o, NULL);
  drop(&a); drop(&b); drop(&o);
  return bad;
}

#define S(...) ((const int64_t[]){__VA_ARGS__})

static int all_layouts(kiln_dtype_t dt) {
  int bad = 0;
  /* contiguous batched */
  bad += run_case(dt, 3, S(3, 17, 31), NULL, 3, S(3, 31, 13), NULL, 3, S(3, 17, 13), NULL);
  /* broadcast: [2,1,9,20] @ [3,20,11] -> [2,3,9,11] */
  bad += run_case(dt, 4, S(2, 1, 9, 20), NULL, 3, S(3, 20, 11), NULL, 4, S(2, 3, 9, 11), NULL);
  /* b expanded over the batch (stride 0), a transposed view (strides [.., 1, M]) */
  bad += run_case(dt, 3, S(4, 9, 20), S(180, 1, 9), 3, S(4, 20, 11), S(0, 11, 1), 3, S(4, 9, 11), NULL);
  /* b transposed view, out column-major */
  bad += run_case(dt, 2, S(33, 40), NULL, 2, S(40, 70), S(1, 40), 2, S(33, 70), S(1, 33));
  /* gathered: every other element, negative column stride on b, strided out */
  bad += run_case(dt, 2, S(21, 30), S(120, 2), 2, S(30, 19), S(19, -1), 2, S(21, 19), S(50, 2));
  /* folded batch: x[4,5,K] @ w[K,N] (also w as a transposed view) */
  bad += run_case(dt, 3, S(4, 5, 24), NULL, 2, S(24, 18), NULL, 3, S(4, 5, 18), NULL);
  bad += run_case(dt, 3, S(4, 5, 24), NULL, 2, S(24, 18), S(1, 24), 3, S(4, 5, 18), S(90, 18, 1));
  return bad;
}

KT_TEST(matmul_f32_layouts) { KT_CHECK(all_layouts(KILN_DTYPE_F32) == 0); }
KT_TEST(matmul_f64_layouts) { KT_CHECK(all_layouts(KILN_DTYPE_F64) == 0); }
KT_TEST(matmul_f16_layouts) { KT_CHECK(all_layouts(KILN_DTYPE_F16) == 0); }
KT_TEST(matmul_bf16_layouts) { KT_CHECK(all_layouts(KILN_DTYPE_BF16) == 0); }

KT_TEST(matmul_large_threaded) {
  int bad = 0;
  bad += run_case(KILN_DTYPE_F32, 3, S(2, 130, 300), NULL, 2, S(300, 150), NULL, 3, S(2, 130, 150), NULL);
  bad += run_case(KILN_DTYPE_F32, 3, S(2, 100, 280), NULL, 3, S(2, 280, 90), S(25200, 1, 280), 3, S(2, 100, 90), NULL);
  bad += run_case(KILN_DTYPE_BF16, 2, S(120, 260), NULL, 2, S(260, 100), NULL, 2, S(120, 100), NULL);
  /* many small products: spread over threads */
  bad += run_case(KILN_DTYPE_F32, 3, S(24, 16, 16), NULL, 3, S(24, 16, 20), NULL, 3, S(24, 16, 20), NULL);
  KT_CHECK(bad == 0);
}

KT_TEST(matmul_1d_operands) {
  tens_t a = mk(KILN_DTYPE_F32, 1, S(7), NULL), m = mk(KILN_DTYPE_F32, 2, S(7, 5), NULL);
  tens_t w = mk(KILN_DTYPE_F32, 2, S(4, 7), NULL), bb = mk(KILN_DTYPE_F32, 3, S(3, 7, 5), NULL);
  tens_t o1 = mk(KILN_DTYPE_F32, 1, S(5), NULL), o2 = mk(KILN_DTYPE_F32, 1, S(4), NULL);
  tens_t o0 = mk(KILN_DTYPE_F32, 0, NULL, NULL), o3 = mk(KILN_DTYPE_F32, 2, S(3, 5), NULL);
  KT_OK(kiln_kernel_matmul(&a.t, &m.t, &o1.t)); /* [7] @ [7,5] -> [5] */
  KT_OK(kiln_kernel_matmul(&w.t, &a.t, &o2.t)); /* [4,7] @ [7] -> [4] */
  KT_OK(kiln_kernel_matmul(&a.t, &a.t, &o0.t)); /* [7] @ [7] -> [] */
  KT_OK(kiln_kernel_matmul(&a.t, &bb.t, &o3.t)); /* [7] @ [3,7,5] -> [3,5] */
  const float* av = a.t.data;
  double dot = 0;
  for (int p = 0; p < 7; p++) dot += (double)av[p] * av[p];
  KT_NEAR(*(float*)o0.t.data, dot, 1e-5);
  for (int j = 0; j < 5; j++) {
    double r = 0;
    for (int p = 0; p < 7; p++) r += (double)av[p] * ((float*)m.t.data)[p * 5 + j];
    KT_NEAR(((float*)o1.t.data)[j], r, 1e-5);
    for (int q = 0; q < 3; q++) {
      r = 0;
      for (int p = 0; p < 7; p++) r += (double)av[p] * ((float*)bb.t.data)[q * 35 + p * 5 + j];
      KT_NEAR(((float*)o3.t.data)[q * 5 + j], r, 1e-5);
    }
  }
  for (int i = 0; i < 4; i++) {
    double r = 0;
    for (int p = 0; p < 7; p++) r += (double)((float*)w.t.data)[i * 7 + p] * av[p];
    KT_NEAR(((float*)o2.t.data)[i], r, 1e-5);
  }
  drop(&a); drop(&m); drop(&w); drop(&bb); drop(&o1); drop(&o2); drop(&o0); drop(&o3);
}

/* addmm / baddbmm: out = beta*bias + alpha*(a@b). */
static int run_ex(kiln_dtype_t dt, int nd, const int64_t* sha, const int64_t* shb,
                  const int64_t* sho, const int64_t* sto, int nbias, const int64_t* shbias,
                  const int64_t* stbias, double alpha, double beta, int nan_bias) {
  tens_t a = mk(dt, nd, sha, NULL), b = mk(dt, nd, shb, NULL), o = mk(dt, nd, sho, sto);
  tens_t bias = mk(dt, nbias, shbias, stbias);
  if (nan_bias)
    for (int64_t i = 0; i < numel(&bias.t); i++) ((float*)bias.base)[i] = NAN;
  KT_OK(kiln_kernel_matmul_ex(&a.t, &b.t, &bias.t, alpha, beta, &o.t));
  int bad = verify(&a, &b, &bias, alpha, beta, &o, NULL);
  drop(&a); drop(&b); drop(&o); drop(&bias);
  return bad;
}

KT_TEST(matmul_ex_bias) {
  const kiln_dtype_t dts[] = {KILN_DTYPE_F32, KILN_DTYPE_F64, KILN_DTYPE_F16, KILN_DTYPE_BF16};
  int bad = 0;
  for (int t = 0; t < 4; t++) {
    const kiln_dtype_t dt = dts[t];
    bad += run_ex(dt, 2, S(13, 29), S(29, 40), S(13, 40), NULL, 1, S(40), NULL, 1.0, 1.0, 0); /* addmm bias [N] */
    bad += run_ex(dt, 2, S(13, 29), S(29, 40), S(13, 40), NULL, 2, S(13, 1), NULL, 1.0, 1.0, 0); /* [M,1] */
    bad += run_ex(dt, 2, S(13, 29), S(29, 40), S(13, 40), S(1, 13), 1, S(40), NULL, 1.0, 1.0, 0); /* col-major out */
    bad += run_ex(dt, 3, S(3, 9, 20), S(3, 20, 11), S(3, 9, 11), NULL, 3, S(3, 9, 11), NULL, 2.0, 0.5, 0);
    bad += run_ex(dt, 3, S(3, 9, 20), S(3, 20, 11), S(3, 9, 11), S(99, 1, 9), 2, S(9, 11), S(1, 9), -1.0, 2.0, 0);
    bad += run_ex(dt, 2, S(7, 8), S(8, 9), S(7, 9), NULL, 0, NULL, NULL, 1.0, 3.0, 0); /* scalar bias */
    bad += run_ex(dt, 2, S(70, 300), S(300, 90), S(70, 90), NULL, 1, S(90), NULL, 0.5, 1.0, 0);
  }
  /* beta = 0: bias (NaN) is ignored */
  bad += run_ex(KILN_DTYPE_F32, 2, S(13, 29), S(29, 40), S(13, 40), NULL, 1, S(40), NULL, 1.0, 0.0, 1);
  KT_CHECK(bad == 0);
}

KT_TEST(matmul_ex_inplace_bias) {
  tens_t a = mk(KILN_DTYPE_F32, 2, S(20, 30), NULL), b = mk(KILN_DTYPE_F32, 2, S(30, 25), NULL);
  tens_t o = mk(KILN_DTYPE_F32, 2, S(20, 25), NULL), before = mk(KILN_DTYPE_F32, 2, S(20, 25), NULL);
  memcpy(before.base, o.base, sizeof(float) * 500);
  KT_OK(kiln_kernel_matmul_ex(&a.t, &b.t, &o.t, 1.5, 0.25, &o.t)); /* addmm_ */
  KT_CHECK(verify(&a, &b, &before, 1.5, 0.25, &o, &before.t) == 0);
  drop(&a); drop(&b); drop(&o); drop(&before);
}

KT_TEST(matmul_zero_sizes) {
  tens_t a = mk(KILN_DTYPE_F32, 2, S(4, 0), NULL), b = mk(KILN_DTYPE_F32, 2, S(0, 3), NULL);
  tens_t o = mk(KILN_DTYPE_F32, 2, S(4, 3), NULL), bias = mk(KILN_DTYPE_F32, 1, S(3), NULL);
  KT_OK(kiln_kernel_matmul(&a.t, &b.t, &o.t)); /* k = 0 -> zeros */
  int zero = 1;
  for (int i = 0; i < 12; i++) zero &= ((float*)o.t.data)[i] == 0.0f;
  KT_CHECK(zero);
  KT_OK(kiln_kernel_matmul_ex(&a.t, &b.t, &bias.t, 1.0, 2.0, &o.t));
  KT_NEAR(((float*)o.t.data)[5], 2.0 * ((float*)bias.t.data)[2], 1e-6);
  tens_t e = mk(KILN_DTYPE_F32, 3, S(0, 4, 5), NULL), f = mk(KILN_DTYPE_F32, 2, S(5, 2), NULL);
  tens_t eo = mk(KILN_DTYPE_F32, 3, S(0, 4, 2), NULL);
  KT_OK(kiln_kernel_matmul(&e.t, &f.t, &eo.t));
  drop(&a); drop(&b); drop(&o); drop(&bias); drop(&e); drop(&f); drop(&eo);
}

KT_TEST(matmul_invalid) {
  tens_t a = mk(KILN_DTYPE_F32, 2, S(2, 3), NULL), b = mk(KILN_DTYPE_F32, 2, S(4, 5), NULL);
  tens_t o = mk(KILN_DTYPE_F32, 2, S(2, 5), NULL), bd = mk(KILN_DTYPE_F64, 2, S(3, 5), NULL);
  tens_t b3 = mk(KILN_DTYPE_F32, 2, S(3, 5), NULL), o_bad = mk(KILN_DTYPE_F32, 2, S(2, 4), NULL);
  tens_t bias = mk(KILN_DTYPE_F32, 1, S(3), NULL);
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_kernel_matmul(&a.t, &b.t, &o.t));
  KT_CHECK(strstr(kiln_status_message(), "[2, 3]") && strstr(kiln_status_message(), "[4, 5]"));
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_kernel_matmul(&a.t, &bd.t, &o.t));
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_kernel_matmul(&a.t, &b3.t, &o_bad.t));
  KT_CHECK(strstr(kiln_status_message(), "[2, 4]") != NULL);
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_kernel_matmul_ex(&a.t, &b3.t, &bias.t, 1, 1, &o.t));
  KT_OK(kiln_kernel_matmul_ex(&a.t, &b3.t, &bias.t, 1, 0, &o.t)); /* beta 0: bias unused */
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_kernel_matmul(NULL, &b3.t, &o.t));
  tens_t x = mk(KILN_DTYPE_F32, 3, S(2, 2, 3), NULL), y = mk(KILN_DTYPE_F32, 3, S(3, 3, 5), NULL);
  tens_t xy = mk(KILN_DTYPE_F32, 3, S(3, 2, 5), NULL);
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_kernel_matmul(&x.t, &y.t, &xy.t)); /* 2 vs 3 batch */
  int32_t iv[6] = {0};
  kiln_tensor_t ia = a.t, ib = b3.t, io = o.t;
  ia.dtype = ib.dtype = io.dtype = KILN_DTYPE_I32;
  ia.data = ib.data = io.data = iv;
  KT_FAILS(KILN_ERROR_UNIMPLEMENTED, kiln_kernel_matmul(&ia, &ib, &io));
  drop(&a); drop(&b); drop(&o); drop(&bd); drop(&b3); drop(&o_bad); drop(&bias);
  drop(&x); drop(&y); drop(&xy);
}

KT_MAIN()
