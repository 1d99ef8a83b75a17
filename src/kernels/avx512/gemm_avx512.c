/* gemm_avx512.c - the packed 6x16 single-precision GEMM micro-kernel for AVX-512F.
 *
 * Same packed layout and contract as the AVX2 kernel (gemm_internal.h), so the driver and the
 * packing are shared: one zmm holds a 16-wide row of the tile. Six rows give only six FMA
 * chains, too few to hide the 4-cycle FMA latency on two pipes, so even and odd k steps
 * accumulate into two sets of six registers that are summed at the end (twelve chains). Edge
 * tiles store through lane masks.
 */
#include <immintrin.h>

#include "kernels/gemm_internal.h"

#define MR KILN_GEMM_MR
#define NR KILN_GEMM_NR

#if MR != 6 || NR != 16
#error "gemm_avx512.c is written for a 6x16 tile"
#endif

/* One k step from a (MR values) and b (NR values) into the six accumulators x0..x5. */
#define K_STEP(a, b, x0, x1, x2, x3, x4, x5)                    \
  do {                                                          \
    const __m512 b_ = _mm512_load_ps(b);                        \
    x0 = _mm512_fmadd_ps(_mm512_set1_ps((a)[0]), b_, x0);       \
    x1 = _mm512_fmadd_ps(_mm512_set1_ps((a)[1]), b_, x1);       \
    x2 = _mm512_fmadd_ps(_mm512_set1_ps((a)[2]), b_, x2);       \
    x3 = _mm512_fmadd_ps(_mm512_set1_ps((a)[3]), b_, x3);       \
    x4 = _mm512_fmadd_ps(_mm512_set1_ps((a)[4]), b_, x4);       \
    x5 = _mm512_fmadd_ps(_mm512_set1_ps((a)[5]), b_, x5);       \
  } while (0)

/* Stores alpha*x (+ beta*C) into the first nr columns of one row (mask m). */
static inline __attribute__((always_inline)) void store_row(float* c, __m512 x, __m512 va,
                                                            __m512 vb, int use_beta, __mmask16 m) {
  x = _mm512_mul_ps(x, va);
  if (use_beta) x = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m, c), x);
  _mm512_mask_storeu_ps(c, m, x);
}

/* Packed 6x16 micro-kernel (see gemm_internal.h). */
void kiln_sgemm_ukr_avx512(int64_t kc, const float* a, const float* b, float* c, int64_t ldc,
                           float alpha, float beta, int mr, int nr) {
  __m512 e0 = _mm512_setzero_ps(), e1 = e0, e2 = e0, e3 = e0, e4 = e0, e5 = e0;
  __m512 o0 = e0, o1 = e0, o2 = e0, o3 = e0, o4 = e0, o5 = e0;
  for (int r = 0; r < mr; r++) _mm_prefetch((const char*)(c + r * ldc), _MM_HINT_T0);
  int64_t p = 0;
  for (; p + 4 <= kc; p += 4) {
    _mm_prefetch((const char*)(a + 8 * MR), _MM_HINT_T0);
    _mm_prefetch((const char*)(b + 8 * NR), _MM_HINT_T0);
    K_STEP(a, b, e0, e1, e2, e3, e4, e5);
    K_STEP(a + MR, b + NR, o0, o1, o2, o3, o4, o5);
    K_STEP(a + 2 * MR, b + 2 * NR, e0, e1, e2, e3, e4, e5);
    K_STEP(a + 3 * MR, b + 3 * NR, o0, o1, o2, o3, o4, o5);
    a += 4 * MR;
    b += 4 * NR;
  }
  for (; p < kc; p++, a += MR, b += NR) K_STEP(a, b, e0, e1, e2, e3, e4, e5);
  e0 = _mm512_add_ps(e0, o0);
  e1 = _mm512_add_ps(e1, o1);
  e2 = _mm512_add_ps(e2, o2);
  e3 = _mm512_add_ps(e3, o3);
  e4 = _mm512_add_ps(e4, o4);
  e5 = _mm512_add_ps(e5, o5);
  const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
  const int use_beta = beta != 0.0f;
  const __mmask16 m = nr >= NR ? (__mmask16)0xFFFF : (__mmask16)((1u << nr) - 1u);
  store_row(c, e0, va, vb, use_beta, m);
  if (mr > 1) store_row(c + ldc, e1, va, vb, use_beta, m);
  if (mr > 2) store_row(c + 2 * ldc, e2, va, vb, use_beta, m);
  if (mr > 3) store_row(c + 3 * ldc, e3, va, vb, use_beta, m);
  if (mr > 4) store_row(c + 4 * ldc, e4, va, vb, use_beta, m);
  if (mr > 5) store_row(c + 5 * ldc, e5, va, vb, use_beta, m);
}

/* One k step of a 6 x 32 tile: a (MR values) against b and b2 (NR values each); each
 * broadcast of a feeds both halves. */
#define K_STEP2(a, b, b2, x0, x1, x2, x3, x4, x5, y0, y1, y2, y3, y4, y5) \
  do {                                                                     \
    const __m512 b_ = _mm512_load_ps(b), c_ = _mm512_load_ps(b2);         \
    __m512 s_ = _mm512_set1_ps((a)[0]);                                    \
    x0 = _mm512_fmadd_ps(s_, b_, x0);                                      \
    y0 = _mm512_fmadd_ps(s_, c_, y0);                                      \
    s_ = _mm512_set1_ps((a)[1]);                                           \
    x1 = _mm512_fmadd_ps(s_, b_, x1);                                      \
    y1 = _mm512_fmadd_ps(s_, c_, y1);                                      \
    s_ = _mm512_set1_ps((a)[2]);                                           \
    x2 = _mm512_fmadd_ps(s_, b_, x2);                                      \
    y2 = _mm512_fmadd_ps(s_, c_, y2);                                      \
    s_ = _mm512_set1_ps((a)[3]);                                           \
    x3 = _mm512_fmadd_ps(s_, b_, x3);                                      \
    y3 = _mm512_fmadd_ps(s_, c_, y3);                                      \
    s_ = _mm512_set1_ps((a)[4]);                                           \
    x4 = _mm512_fmadd_ps(s_, b_, x4);                                      \
    y4 = _mm512_fmadd_ps(s_, c_, y4);                                      \
    s_ = _mm512_set1_ps((a)[5]);                                           \
    x5 = _mm512_fmadd_ps(s_, b_, x5);                                      \
    y5 = _mm512_fmadd_ps(s_, c_, y5);                                      \
  } while (0)

/* Two adjacent packed B slivers (b, then b + NR*kc) against one A sliver: a 6 x 32 tile in
 * twelve accumulators, one FMA chain per output vector over all of k (twelve independent chains
 * already cover the FMA latency on two pipes, so there is no even/odd split: that split's 24
 * accumulators plus operands overflowed the 32 registers and the compiler spilled in the loop).
 * Two B rows and six broadcasts feed twelve FMAs per k step. */
void kiln_sgemm_ukr2_avx512(int64_t kc, const float* a, const float* b, float* c, int64_t ldc,
                            float alpha, float beta, int mr, int nr) {
  __m512 e0 = _mm512_setzero_ps(), e1 = e0, e2 = e0, e3 = e0, e4 = e0, e5 = e0;
  __m512 f0 = e0, f1 = e0, f2 = e0, f3 = e0, f4 = e0, f5 = e0;
  const float* b2 = b + NR * kc;
  for (int r = 0; r < mr; r++) {
    _mm_prefetch((const char*)(c + r * ldc), _MM_HINT_T0);
    _mm_prefetch((const char*)(c + r * ldc + 16), _MM_HINT_T0);
  }
  int64_t p = 0;
  for (; p + 4 <= kc; p += 4) {
    _mm_prefetch((const char*)(a + 8 * MR), _MM_HINT_T0);
    _mm_prefetch((const char*)(b + 8 * NR), _MM_HINT_T0);
    _mm_prefetch((const char*)(b2 + 8 * NR), _MM_HINT_T0);
    K_STEP2(a, b, b2, e0, e1, e2, e3, e4, e5, f0, f1, f2, f3, f4, f5);
    K_STEP2(a + MR, b + NR, b2 + NR, e0, e1, e2, e3, e4, e5, f0, f1, f2, f3, f4, f5);
    K_STEP2(a + 2 * MR, b + 2 * NR, b2 + 2 * NR, e0, e1, e2, e3, e4, e5, f0, f1, f2, f3, f4, f5);
    K_STEP2(a + 3 * MR, b + 3 * NR, b2 + 3 * NR, e0, e1, e2, e3, e4, e5, f0, f1, f2, f3, f4, f5);
    a += 4 * MR;
    b += 4 * NR;
    b2 += 4 * NR;
  }
  for (; p < kc; p++, a += MR, b += NR, b2 += NR) {
    K_STEP2(a, b, b2, e0, e1, e2, e3, e4, e5, f0, f1, f2, f3, f4, f5);
  }
  const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
  const int use_beta = beta != 0.0f;
  const int n2 = nr - NR; /* columns in the second sliver, 1..16 */
  const __mmask16 m = (__mmask16)0xFFFF;
  const __mmask16 m2 = n2 >= NR ? (__mmask16)0xFFFF : (__mmask16)((1u << n2) - 1u);
  store_row(c, e0, va, vb, use_beta, m);
  store_row(c + NR, f0, va, vb, use_beta, m2);
  if (mr > 1) {
    store_row(c + ldc, e1, va, vb, use_beta, m);
    store_row(c + ldc + NR, f1, va, vb, use_beta, m2);
  }
  if (mr > 2) {
    store_row(c + 2 * ldc, e2, va, vb, use_beta, m);
    store_row(c + 2 * ldc + NR, f2, va, vb, use_beta, m2);
  }
  if (mr > 3) {
    store_row(c + 3 * ldc, e3, va, vb, use_beta, m);
    store_row(c + 3 * ldc + NR, f3, va, vb, use_beta, m2);
  }
  if (mr > 4) {
    store_row(c + 4 * ldc, e4, va, vb, use_beta, m);
    store_row(c + 4 * ldc + NR, f4, va, vb, use_beta, m2);
  }
  if (mr > 5) {
    store_row(c + 5 * ldc, e5, va, vb, use_beta, m);
    store_row(c + 5 * ldc + NR, f5, va, vb, use_beta, m2);
  }
}
