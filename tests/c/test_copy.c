/* SPDX-License-Identifier: Apache-2.0 */
/* test_copy.c - kiln_kernel_copy / fill vs an independent scalar reference: every dtype pair
 * (incl. NaN/inf/out-of-range float -> int, which follows x86 cvttss2si like PyTorch),
 * broadcasting, strided and transposed source and destination, rank 0, empty, the threaded
 * memcpy and vectorized f32 <-> f16/bf16 paths, and fill. All comparisons are exact. */
#include "ew_test_util.h"
#include "kernels/ew_internal.h"
#include "kiln/kernels/elementwise.h"

/* Reference conversion of one element (src at sp, dtype sd) to dtype dd, as raw bits in *out. */
static void ref_convert(const void* sp, kiln_dtype_t sd, kiln_dtype_t dd, void* out) {
  if (ht_is_float(sd)) {
    double v = ht_get_p(sp, sd);
    if (ht_is_float(dd)) {
      ht_set_p(out, dd, ht_round(dd, v));
    } else if (dd == KILN_DTYPE_BOOL) {
      *(uint8_t*)out = v != 0;
    } else if (dd == KILN_DTYPE_I64) {
      *(int64_t*)out = (v >= -0x1p63 && v < 0x1p63) ? (int64_t)v : INT64_MIN;
    } else {
      int32_t w = (v > -2147483649.0 && v < 2147483648.0) ? (int32_t)v : INT32_MIN;
      ht_set_p(out, dd, (double)ht_wrap(dd, w));
    }
  } else {
    int64_t v = ht_geti_p(sp, sd);
    if (dd == KILN_DTYPE_F64) *(double*)out = (double)v;
    else if (ht_is_float(dd)) ht_set_p(out, dd, ht_round(dd, (double)(float)v));
    else if (dd == KILN_DTYPE_I64) *(int64_t*)out = v;
    else ht_set_p(out, dd, (double)ht_wrap(dd, v));
  }
}

static const float k_specials[] = {0.0f, -0.0f, 1.5f, -1.5f, 2.5f, -2.7f, 127.9f, -128.9f,
                                   255.5f, 300.0f, -129.0f, 65536.0f + 7, 1e10f, -1e10f,
                                   3e9f, INFINITY, -INFINITY, NAN, 1e-30f, 65504.0f, 70000.0f,
                                   6e-8f, 3.0e38f};
#define NSPEC (int)(sizeof k_specials / sizeof k_specials[0])

static void fill_source(ht_t* h) {
  int64_t idx[KILN_MAX_DIMS] = {0}, k = 0;
  if (!ht_numel(&h->t)) return;
  do {
    double v = k < NSPEC ? k_specials[k] : (ht_uniform() - 0.5) * 600;
    if (!ht_is_float(h->t.dtype)) {
      double w = isfinite(v) ? fmod(v, 1e6) : 7;
      v = (double)ht_wrap(h->t.dtype, (int64_t)((uint64_t)(int64_t)w * 1234567u));
    }
    if (h->t.dtype == KILN_DTYPE_I64 && k == 3) v = -9.2e18;
    ht_set(&h->t, idx, ht_is_float(h->t.dtype) ? ht_round(h->t.dtype, v) : v);
    k++;
  } while (ht_next(idx, h->t.shape, h->t.ndim));
}

static int check_copy(const kiln_tensor_t* src, const kiln_tensor_t* dst) {
  int64_t idx[KILN_MAX_DIMS] = {0};
  int bad = 0;
  if (!ht_numel(dst)) return 0;
  do {
    int64_t sidx[KILN_MAX_DIMS] = {0};
    for (int i = 0; i < src->ndim; i++) {
      int o = dst->ndim - src->ndim + i;
      sidx[i] = src->shape[i] == 1 ? 0 : idx[o];
    }
    char want[8] = {0};
    ref_convert(ht_ptr(src, sidx), src->dtype, dst->dtype, want);
    const void* got = ht_ptr(dst, idx);
    size_t sz = kiln_dtype_size(dst->dtype);
    int same = memcmp(got, want, sz) == 0;
    if (!same && ht_is_float(dst->dtype)) /* NaN payloads may differ */
      same = isnan(ht_get_p(got, dst->dtype)) && isnan(ht_get_p(want, dst->dtype));
    if (!same && bad++ < 3) {
      fprintf(stderr, "  copy %s -> %s: src %.9g got %.9g want %.9g\n",
              kiln_dtype_name(src->dtype), kiln_dtype_name(dst->dtype),
              ht_get(src, sidx), ht_get_p(got, dst->dtype), ht_get_p(want, dst->dtype));
      kt_failed_checks++;
      kt_current_failed = 1;
    }
  } while (ht_next(idx, dst->shape, dst->ndim));
  return bad;
}

KT_TEST(all_dtype_pairs) {
  for (int mode = 0; mode < 2; mode++) {
    kiln_cpu_force_generic(mode);
    for (int s = 0; s < KILN_DTYPE_COUNT; s++)
      for (int d = 0; d < KILN_DTYPE_COUNT; d++) {
        const int64_t n[1] = {300};
        ht_t a, b;
        ht_make(&a, (kiln_dtype_t)s, 1, n, NULL);
        ht_make(&b, (kiln_dtype_t)d, 1, n, NULL);
        fill_source(&a);
        KT_OK(kiln_kernel_copy(&a.t, &b.t));
        check_copy(&a.t, &b.t);
        ht_free(&a);
        ht_free(&b);
      }
  }
  kiln_cpu_force_generic(0);
}

KT_TEST(layouts) {
  const kiln_dtype_t dts[4] = {KILN_DTYPE_F32, KILN_DTYPE_BF16, KILN_DTYPE_I64, KILN_DTYPE_U8};
  for (int si = 0; si < 4; si++)
    for (int di = 0; di < 4; di++) {
      ht_t a, b;
      /* transposed source into a column-stepped destination */
      const int64_t s[2] = {37, 23}, ds[2] = {23 * 3, 3};
      ht_make_t(&a, dts[si], 2, s);
      ht_make(&b, dts[di], 2, s, ds);
      fill_source(&a);
      KT_OK(kiln_kernel_copy(&a.t, &b.t));
      check_copy(&a.t, &b.t);
      ht_free(&b);
      /* broadcast [37, 23] <- [23] and a transposed destination */
      const int64_t s1[1] = {23};
      ht_t c;
      ht_make(&c, dts[si], 1, s1, NULL);
      fill_source(&c);
      ht_make_t(&b, dts[di], 2, s);
      KT_OK(kiln_kernel_copy(&c.t, &b.t));
      check_copy(&c.t, &b.t);
      ht_free(&b);
      ht_free(&c);
      /* rank 0 into [4, 5], and rank 0 -> rank 0 */
      ht_t r, r2;
      ht_make(&r, dts[si], 0, NULL, NULL);
      fill_source(&r);
      const int64_t s2[2] = {4, 5};
      ht_make(&b, dts[di], 2, s2, NULL);
      ht_make(&r2, dts[di], 0, NULL, NULL);
      KT_OK(kiln_kernel_copy(&r.t, &b.t));
      check_copy(&r.t, &b.t);
      KT_OK(kiln_kernel_copy(&r.t, &r2.t));
      check_copy(&r.t, &r2.t);
      ht_free(&a);
      ht_free(&b);
      ht_free(&r);
      ht_free(&r2);
    }
  /* empty and bad broadcast */
  const int64_t z[2] = {0, 4}, s3[1] = {3}, s4[1] = {4};
  kiln_tensor_t e, t3, t4;
  float buf[4];
  kiln_tensor_init_contiguous(&e, NULL, KILN_DTYPE_F32, 2, z);
  KT_OK(kiln_kernel_copy(&e, &e));
  kiln_tensor_init_contiguous(&t3, buf, KILN_DTYPE_F32, 1, s3);
  kiln_tensor_init_contiguous(&t4, buf, KILN_DTYPE_F32, 1, s4);
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_kernel_copy(&t3, &t4));
  KT_CHECK(strstr(kiln_status_message(), "[3]") && strstr(kiln_status_message(), "[4]"));
  KT_OK(kiln_kernel_copy(&t4, &t4)); /* self copy is a no-op */
}

KT_TEST(negative_strides) {
  /* descriptors may carry negative strides (data points at element [0...]) */
  float src[6] = {0, 1, 2, 3, 4, 5};
  double dst[6];
  int64_t n = 6;
  kiln_tensor_t s, d;
  kiln_tensor_init_contiguous(&s, src + 5, KILN_DTYPE_F32, 1, &n);
  s.strides[0] = -1;
  kiln_tensor_init_contiguous(&d, dst, KILN_DTYPE_F64, 1, &n);
  KT_OK(kiln_kernel_copy(&s, &d));
  for (int i = 0; i < 6; i++) KT_CHECK(dst[i] == 5 - i);
  float y[6];
  kiln_tensor_t ty;
  kiln_tensor_init_contiguous(&ty, y, KILN_DTYPE_F32, 1, &n);
  KT_OK(kiln_kernel_binary(KILN_BINARY_SUB, &s, &s, 0.5, KILN_DTYPE_F32, &ty));
  for (int i = 0; i < 6; i++) KT_CHECK(y[i] == 0.5f * (float)(5 - i));
}

KT_TEST(large_threaded_and_vector_paths) {
  const int64_t n[1] = {(1 << 20) + 13};
  const kiln_dtype_t dts[5] = {KILN_DTYPE_F32, KILN_DTYPE_F16, KILN_DTYPE_BF16, KILN_DTYPE_F64,
                               KILN_DTYPE_I32};
  for (int mode = 0; mode < 2; mode++) {
    kiln_cpu_force_generic(mode);
    for (int s = 0; s < 5; s++)
      for (int d = 0; d < 3; d++) {
        ht_t a, b;
        ht_make(&a, dts[s], 1, n, NULL);
        ht_make(&b, dts[d], 1, n, NULL);
        fill_source(&a);
        KT_OK(kiln_kernel_copy(&a.t, &b.t));
        check_copy(&a.t, &b.t);
        ht_free(&a);
        ht_free(&b);
      }
  }
  kiln_cpu_force_generic(0);
}

KT_TEST(fill) {
  const double vals[] = {0.0, -3.7, 1e10, 70000.0, NAN, -INFINITY, 255.0, 1.0};
  for (int d = 0; d < KILN_DTYPE_COUNT; d++)
    for (int v = 0; v < 8; v++) {
      ht_t a;
      const int64_t s[2] = {33, 5};
      ht_make_t(&a, (kiln_dtype_t)d, 2, s);
      KT_OK(kiln_kernel_fill(&a.t, vals[v]));
      char want[8] = {0};
      ref_convert(&vals[v], KILN_DTYPE_F64, (kiln_dtype_t)d, want);
      int64_t idx[2] = {0};
      do {
        const void* got = ht_ptr(&a.t, idx);
        KT_CHECK(memcmp(got, want, kiln_dtype_size(a.t.dtype)) == 0 ||
                 (isnan(vals[v]) && ht_is_float(a.t.dtype) && isnan(ht_get_p(got, a.t.dtype))));
      } while (ht_next(idx, s, 2));
      ht_free(&a);
    }
  int64_t big[70001];
  const int64_t n[1] = {70001};
  kiln_tensor_t t;
  kiln_tensor_init_contiguous(&t, big, KILN_DTYPE_I64, 1, n);
  KT_OK(kiln_kernel_fill_i64(&t, (1ll << 62) + 1));
  int ok = 1;
  for (int i = 0; i < 70001; i++) ok &= big[i] == (1ll << 62) + 1;
  KT_CHECK(ok);
  int8_t small[3];
  const int64_t n3[1] = {3};
  kiln_tensor_init_contiguous(&t, small, KILN_DTYPE_I8, 1, n3);
  KT_OK(kiln_kernel_fill_i64(&t, 300));
  KT_CHECK(small[0] == 44 && small[2] == 44);
  kiln_tensor_t rank0;
  float one;
  kiln_tensor_init_contiguous(&rank0, &one, KILN_DTYPE_F32, 0, NULL);
  KT_OK(kiln_kernel_fill(&rank0, 2.5));
  KT_CHECK(one == 2.5f);
}

KT_MAIN()
