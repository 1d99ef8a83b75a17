/* SPDX-License-Identifier: Apache-2.0 */
/* gemm_avx2.c - 6x16 single-precision GEMM micro-kernels for AVX2 + FMA.
 *
 * Twelve ymm accumulators hold the 6x16 tile; each k step loads two B vectors, broadcasts six A
 * values and issues twelve FMAs (two FMA pipes, 4-cycle latency: 12 independent chains keep
 * both busy). Edge tiles use masked loads/stores, so no scratch tile is needed.
 */
#include <immintrin.h>

#include "kernels/gemm_internal.h"

#define MR KILN_GEMM_MR
#define NR KILN_GEMM_NR
#define INLINE static inline __attribute__((always_inline))

/* Lane masks: lane l is on when l < n (n clamped to [0, 8]). */
INLINE __m256i lane_mask(int n) {
  const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), idx);
}

/* Stores alpha*x0|x1 (+ beta*C) into one row of up to 16 columns. */
INLINE void store_row(float* c, __m256 x0, __m256 x1, __m256 va, __m256 vb, int use_beta, int nr,
                      __m256i m0, __m256i m1) {
  x0 = _mm256_mul_ps(x0, va);
  x1 = _mm256_mul_ps(x1, va);
  if (nr == NR) {
    if (use_beta) {
      x0 = _mm256_fmadd_ps(vb, _mm256_loadu_ps(c), x0);
      x1 = _mm256_fmadd_ps(vb, _mm256_loadu_ps(c + 8), x1);
    }
    _mm256_storeu_ps(c, x0);
    _mm256_storeu_ps(c + 8, x1);
  } else {
    if (use_beta) {
      x0 = _mm256_fmadd_ps(vb, _mm256_maskload_ps(c, m0), x0);
      x1 = _mm256_fmadd_ps(vb, _mm256_maskload_ps(c + 8, m1), x1);
    }
    _mm256_maskstore_ps(c, m0, x0);
    _mm256_maskstore_ps(c + 8, m1, x1);
  }
}

#define KILN_STORE_TILE()                                                          \
  do {                                                                             \
    const __m256 va = _mm256_set1_ps(alpha), vb = _mm256_set1_ps(beta);            \
    const int use_beta = beta != 0.0f;                                             \
    const __m256i m0 = lane_mask(nr), m1 = lane_mask(nr - 8);                      \
    store_row(c, c00, c01, va, vb, use_beta, nr, m0, m1);                          \
    if (mr > 1) store_row(c + ldc, c10, c11, va, vb, use_beta, nr, m0, m1);        \
    if (mr > 2) store_row(c + 2 * ldc, c20, c21, va, vb, use_beta, nr, m0, m1);    \
    if (mr > 3) store_row(c + 3 * ldc, c30, c31, va, vb, use_beta, nr, m0, m1);    \
    if (mr > 4) store_row(c + 4 * ldc, c40, c41, va, vb, use_beta, nr, m0, m1);    \
    if (mr > 5) store_row(c + 5 * ldc, c50, c51, va, vb, use_beta, nr, m0, m1);    \
  } while (0)

/* One k step: b0/b1 already loaded; A(r) is read through the expression `AR(r)`. */
#define KILN_FMA_ROWS(AR)                                          \
  do {                                                             \
    __m256 a_;                                                     \
    a_ = _mm256_broadcast_ss(AR(0));                               \
    c00 = _mm256_fmadd_ps(a_, b0, c00);                            \
    c01 = _mm256_fmadd_ps(a_, b1, c01);                            \
    a_ = _mm256_broadcast_ss(AR(1));                               \
    c10 = _mm256_fmadd_ps(a_, b0, c10);                            \
    c11 = _mm256_fmadd_ps(a_, b1, c11);                            \
    a_ = _mm256_broadcast_ss(AR(2));                               \
    c20 = _mm256_fmadd_ps(a_, b0, c20);                            \
    c21 = _mm256_fmadd_ps(a_, b1, c21);                            \
    a_ = _mm256_broadcast_ss(AR(3));                               \
    c30 = _mm256_fmadd_ps(a_, b0, c30);                            \
    c31 = _mm256_fmadd_ps(a_, b1, c31);                            \
    a_ = _mm256_broadcast_ss(AR(4));                               \
    c40 = _mm256_fmadd_ps(a_, b0, c40);                            \
    c41 = _mm256_fmadd_ps(a_, b1, c41);                            \
    a_ = _mm256_broadcast_ss(AR(5));                               \
    c50 = _mm256_fmadd_ps(a_, b0, c50);                            \
    c51 = _mm256_fmadd_ps(a_, b1, c51);                            \
  } while (0)

#define KILN_ZERO_ACC()                                                    \
  __m256 c00 = _mm256_setzero_ps(), c01 = _mm256_setzero_ps();             \
  __m256 c10 = _mm256_setzero_ps(), c11 = _mm256_setzero_ps();             \
  __m256 c20 = _mm256_setzero_ps(), c21 = _mm256_setzero_ps();             \
  __m256 c30 = _mm256_setzero_ps(), c31 = _mm256_setzero_ps();             \
  __m256 c40 = _mm256_setzero_ps(), c41 = _mm256_setzero_ps();             \
  __m256 c50 = _mm256_setzero_ps(), c51 = _mm256_setzero_ps()

/* Packed 6x16 micro-kernel (see gemm_internal.h). */
void kiln_sgemm_ukr_avx2(int64_t kc, const float* a, const float* b, float* c, int64_t ldc,
                         float alpha, float beta, int mr, int nr) {
  KILN_ZERO_ACC();
  for (int r = 0; r < mr; r++) _mm_prefetch((const char*)(c + r * ldc), _MM_HINT_T0);
#define PACKED_A(r) (a + off + (r))
  int64_t p = 0;
  for (; p + 4 <= kc; p += 4) {
    _mm_prefetch((const char*)(a + 4 * MR * 8), _MM_HINT_T0);
    for (int u = 0; u < 4; u++) {
      const int off = u * MR;
      __m256 b0 = _mm256_load_ps(b + u * NR), b1 = _mm256_load_ps(b + u * NR + 8);
      KILN_FMA_ROWS(PACKED_A);
    }
    a += 4 * MR;
    b += 4 * NR;
  }
  for (; p < kc; p++) {
    const int off = 0;
    __m256 b0 = _mm256_load_ps(b), b1 = _mm256_load_ps(b + 8);
    KILN_FMA_ROWS(PACKED_A);
    a += MR;
    b += NR;
  }
#undef PACKED_A
  KILN_STORE_TILE();
}

/* 6x16 micro-kernel on a row-major A (row stride lda) and a packed B sliver; the same k order as
 * the packed kernel, so the same bits. */
void kiln_sgemm_ukr_adirect_avx2(int64_t kc, const float* a, int64_t lda, const float* b,
                                 float* c, int64_t ldc, float alpha, float beta, int mr, int nr) {
  KILN_ZERO_ACC();
  /* rows past mr repeat the last valid row (valid memory, results discarded) */
  const float* ar[MR];
  for (int r = 0; r < MR; r++) ar[r] = a + (int64_t)(r < mr ? r : mr - 1) * lda;
  for (int r = 0; r < mr; r++) _mm_prefetch((const char*)(c + r * ldc), _MM_HINT_T0);
#define DIRECT_A(r) (ar[r] + p)
  for (int64_t p = 0; p < kc; p++) {
    __m256 b0 = _mm256_load_ps(b), b1 = _mm256_load_ps(b + 8);
    KILN_FMA_ROWS(DIRECT_A);
    b += NR;
  }
#undef DIRECT_A
  KILN_STORE_TILE();
}

/* Strided body; `full` (compile-time) selects plain B loads instead of masked ones. */
INLINE void strided_body(int64_t k, const float* a, int64_t rs_a, int64_t cs_a, const float* b,
                         int64_t rs_b, float* c, int64_t ldc, float alpha, float beta, int mr,
                         int nr, int full) {
  KILN_ZERO_ACC();
  /* Rows past mr repeat the last valid row (valid memory, results discarded). */
  const float* ar[MR];
  for (int r = 0; r < MR; r++) ar[r] = a + (int64_t)(r < mr ? r : mr - 1) * rs_a;
  const __m256i m0 = lane_mask(nr), m1 = lane_mask(nr - 8);
#define STRIDED_A(r) (ar[r] + off)
  for (int64_t p = 0; p < k; p++) {
    const int64_t off = p * cs_a;
    __m256 b0, b1;
    if (full) {
      b0 = _mm256_loadu_ps(b);
      b1 = _mm256_loadu_ps(b + 8);
    } else {
      b0 = _mm256_maskload_ps(b, m0);
      b1 = _mm256_maskload_ps(b + 8, m1);
    }
    KILN_FMA_ROWS(STRIDED_A);
    b += rs_b;
  }
#undef STRIDED_A
  KILN_STORE_TILE();
}

/* Unpacked 6x16 micro-kernel for small products (see gemm_internal.h). */
void kiln_sgemm_ukr_strided_avx2(int64_t k, const float* a, int64_t rs_a, int64_t cs_a,
                                 const float* b, int64_t rs_b, float* c, int64_t ldc, float alpha,
                                 float beta, int mr, int nr) {
  if (nr == NR)
    strided_body(k, a, rs_a, cs_a, b, rs_b, c, ldc, alpha, beta, mr, nr, 1);
  else
    strided_body(k, a, rs_a, cs_a, b, rs_b, c, ldc, alpha, beta, mr, nr, 0);
}

/* 8x8 transpose of r[0..7] in registers. */
INLINE void transpose8(__m256 r[8]) {
  const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
  const __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
  const __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
  const __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
  const __m256 s0 = _mm256_shuffle_ps(t0, t2, 0x44), s1 = _mm256_shuffle_ps(t0, t2, 0xEE);
  const __m256 s2 = _mm256_shuffle_ps(t1, t3, 0x44), s3 = _mm256_shuffle_ps(t1, t3, 0xEE);
  const __m256 s4 = _mm256_shuffle_ps(t4, t6, 0x44), s5 = _mm256_shuffle_ps(t4, t6, 0xEE);
  const __m256 s6 = _mm256_shuffle_ps(t5, t7, 0x44), s7 = _mm256_shuffle_ps(t5, t7, 0xEE);
  r[0] = _mm256_permute2f128_ps(s0, s4, 0x20);
  r[1] = _mm256_permute2f128_ps(s1, s5, 0x20);
  r[2] = _mm256_permute2f128_ps(s2, s6, 0x20);
  r[3] = _mm256_permute2f128_ps(s3, s7, 0x20);
  r[4] = _mm256_permute2f128_ps(s0, s4, 0x31);
  r[5] = _mm256_permute2f128_ps(s1, s5, 0x31);
  r[6] = _mm256_permute2f128_ps(s2, s6, 0x31);
  r[7] = _mm256_permute2f128_ps(s3, s7, 0x31);
}

/* One full B sliver from a transposed source (see gemm_internal.h). */
void kiln_gemm_pack_b_trans_avx2(float* dst, const float* bt, int64_t ld, int64_t kc) {
  int64_t p = 0;
  for (; p + 8 <= kc; p += 8) {
    for (int h = 0; h < 2; h++) {
      __m256 r[8];
      for (int j = 0; j < 8; j++) r[j] = _mm256_loadu_ps(bt + (h * 8 + j) * ld + p);
      transpose8(r);
      for (int q = 0; q < 8; q++) _mm256_store_ps(dst + (p + q) * NR + h * 8, r[q]);
    }
  }
  for (; p < kc; p++)
    for (int j = 0; j < NR; j++) dst[p * NR + j] = bt[j * ld + p];
}

/* Sum of the 8 lanes. */
INLINE float hsum(__m256 v) {
  __m128 x = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  x = _mm_add_ps(x, _mm_movehl_ps(x, x));
  x = _mm_add_ss(x, _mm_movehdup_ps(x));
  return _mm_cvtss_f32(x);
}

/* y[j] = alpha * dot(x, bt + j*ldb) + beta*y[j] for j < n (see gemm_internal.h). */
void kiln_sgemv_t_avx2(int64_t k, const float* x, const float* bt, int64_t ldb, int64_t n,
                       float* y, float alpha, float beta) {
  const __m256i tail = lane_mask((int)(k & 7));
  int64_t j = 0;
  for (; j < n; j += 4) {
    const int nj = n - j < 4 ? (int)(n - j) : 4;
    const float* b0 = bt + j * ldb;
    /* Columns past n repeat the last one (valid memory, results dropped). */
    const float* b1 = bt + (j + (nj > 1 ? 1 : 0)) * ldb;
    const float* b2 = bt + (j + (nj > 2 ? 2 : nj - 1)) * ldb;
    const float* b3 = bt + (j + (nj > 3 ? 3 : nj - 1)) * ldb;
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps(), s2 = _mm256_setzero_ps();
    __m256 s3 = _mm256_setzero_ps(), t0 = _mm256_setzero_ps(), t1 = _mm256_setzero_ps();
    __m256 t2 = _mm256_setzero_ps(), t3 = _mm256_setzero_ps();
    int64_t p = 0;
    for (; p + 16 <= k; p += 16) {
      const __m256 x0 = _mm256_loadu_ps(x + p), x1 = _mm256_loadu_ps(x + p + 8);
      s0 = _mm256_fmadd_ps(_mm256_loadu_ps(b0 + p), x0, s0);
      t0 = _mm256_fmadd_ps(_mm256_loadu_ps(b0 + p + 8), x1, t0);
      s1 = _mm256_fmadd_ps(_mm256_loadu_ps(b1 + p), x0, s1);
      t1 = _mm256_fmadd_ps(_mm256_loadu_ps(b1 + p + 8), x1, t1);
      s2 = _mm256_fmadd_ps(_mm256_loadu_ps(b2 + p), x0, s2);
      t2 = _mm256_fmadd_ps(_mm256_loadu_ps(b2 + p + 8), x1, t2);
      s3 = _mm256_fmadd_ps(_mm256_loadu_ps(b3 + p), x0, s3);
      t3 = _mm256_fmadd_ps(_mm256_loadu_ps(b3 + p + 8), x1, t3);
    }
    for (; p + 8 <= k; p += 8) {
      const __m256 x0 = _mm256_loadu_ps(x + p);
      s0 = _mm256_fmadd_ps(_mm256_loadu_ps(b0 + p), x0, s0);
      s1 = _mm256_fmadd_ps(_mm256_loadu_ps(b1 + p), x0, s1);
      s2 = _mm256_fmadd_ps(_mm256_loadu_ps(b2 + p), x0, s2);
      s3 = _mm256_fmadd_ps(_mm256_loadu_ps(b3 + p), x0, s3);
    }
    if (p < k) {
      const __m256 x0 = _mm256_maskload_ps(x + p, tail);
      t0 = _mm256_fmadd_ps(_mm256_maskload_ps(b0 + p, tail), x0, t0);
      t1 = _mm256_fmadd_ps(_mm256_maskload_ps(b1 + p, tail), x0, t1);
      t2 = _mm256_fmadd_ps(_mm256_maskload_ps(b2 + p, tail), x0, t2);
      t3 = _mm256_fmadd_ps(_mm256_maskload_ps(b3 + p, tail), x0, t3);
    }
    const float d[4] = {hsum(_mm256_add_ps(s0, t0)), hsum(_mm256_add_ps(s1, t1)),
                        hsum(_mm256_add_ps(s2, t2)), hsum(_mm256_add_ps(s3, t3))};
    for (int q = 0; q < nj; q++) y[j + q] = alpha * d[q] + (beta != 0.0f ? beta * y[j + q] : 0.0f);
  }
}
