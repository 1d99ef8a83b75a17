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
