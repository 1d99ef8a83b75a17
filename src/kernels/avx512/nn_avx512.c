/* SPDX-License-Identifier: Apache-2.0 */
/* nn_avx512.c - AVX-512F versions of the nn primitives that dominate attention: the small GEMM
 * (S = Q K^T, O += P V and the backward products), exp-and-sum and row max; and the softmax
 * backwards (the cross-entropy backward's pass over the logits). Compiled with
 * -mavx512f -mfma; kiln_nn_ops() puts them over the AVX2 table when the CPU has AVX-512F.
 *
 * Per element they do the same arithmetic as the AVX2 versions (nn_avx2.c), so results are
 * bit-identical: the GEMM sums each output's k products in order in one FMA chain and then
 * scales by alpha (and adds C); exp runs the same reduction and polynomial. Only exp_sum's
 * total and the max's lane grouping differ (sums of the same values in another order; the max
 * is order-free). */
#include <immintrin.h>
#include <math.h>

#include "kernels/exp_consts.h"
#include "kernels/nn_internal.h"

#define V16(c) _mm512_set1_ps((float)(c))

static inline __mmask16 tail16(int64_t r) {
  return r >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << r) - 1u);
}

/* exp256 of nn_avx2.c in 16 lanes: Cody-Waite reduction, Cephes polynomial, 2^n in two halves;
 * lanes <= -104 (exactly 0) are computed on 0 so nothing underflows. */
static inline __m512 exp512(__m512 x) {
  const __mmask16 isnan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
  const __mmask16 big = _mm512_cmp_ps_mask(x, V16(88.72283935546875f), _CMP_GT_OQ);
  const __mmask16 tiny = _mm512_cmp_ps_mask(x, V16(-104.0f), _CMP_LE_OQ); /* exactly 0 below */
  __m512 xc = _mm512_min_ps(_mm512_max_ps(_mm512_mask_blend_ps(tiny, x, V16(0.0f)), V16(-104.0f)),
                            V16(88.7f));
  __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(xc, V16(KILN_EXP_LOG2E)),
                                  _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, V16(KILN_EXP_LN2_HI), xc);
  r = _mm512_fnmadd_ps(n, V16(KILN_EXP_LN2_LO), r);
  __m512 p = V16(KILN_EXP_P0);
  p = _mm512_fmadd_ps(p, r, V16(KILN_EXP_P1));
  p = _mm512_fmadd_ps(p, r, V16(KILN_EXP_P2));
  p = _mm512_fmadd_ps(p, r, V16(KILN_EXP_P3));
  p = _mm512_fmadd_ps(p, r, V16(KILN_EXP_P4));
  p = _mm512_fmadd_ps(p, r, V16(KILN_EXP_P5));
  p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, V16(1.0f)));
  /* p * 2^n: the AVX2 kernel's (p * 2^(n>>1)) * 2^(n - (n>>1)) in one instruction; its first
   * product is exact (normal), so both round p * 2^n once: the same bits */
  __m512 y = _mm512_scalef_ps(p, n);
  y = _mm512_mask_blend_ps(tiny, y, V16(0.0f));
  y = _mm512_mask_blend_ps(big, y, V16(INFINITY));
  return _mm512_mask_blend_ps(isnan, y, x);
}

float kiln_nn_avx512_max(const float* x, int64_t n) {
  __m512 m0 = V16(-INFINITY), m1 = m0;
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    m0 = _mm512_max_ps(m0, _mm512_loadu_ps(x + i));
    m1 = _mm512_max_ps(m1, _mm512_loadu_ps(x + i + 16));
  }
  for (; i < n; i += 16) m0 = _mm512_max_ps(m0, _mm512_mask_loadu_ps(V16(-INFINITY), tail16(n - i), x + i));
  return _mm512_reduce_max_ps(_mm512_max_ps(m0, m1));
}

float kiln_nn_avx512_exp_sum(const float* x, float shift, float* y, int64_t n) {
  const __m512 sh = _mm512_set1_ps(shift);
  __m512 s0 = _mm512_setzero_ps(), s1 = s0;
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m512 e0 = exp512(_mm512_sub_ps(_mm512_loadu_ps(x + i), sh));
    const __m512 e1 = exp512(_mm512_sub_ps(_mm512_loadu_ps(x + i + 16), sh));
    if (y) {
      _mm512_storeu_ps(y + i, e0);
      _mm512_storeu_ps(y + i + 16, e1);
    }
    s0 = _mm512_add_ps(s0, e0);
    s1 = _mm512_add_ps(s1, e1);
  }
  for (; i < n; i += 16) {
    const __mmask16 m = tail16(n - i);
    const __m512 e = _mm512_maskz_mov_ps(m, exp512(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + i), sh)));
    if (y) _mm512_mask_storeu_ps(y + i, m, e);
    s0 = _mm512_add_ps(s0, e);
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(s0, s1));
}

/* gi = g - exp(y) * s (log_softmax's backward; the cross-entropy backward's whole [N, C] pass):
 * per element the AVX2 kernel's arithmetic (the same exp, one fnmadd), 16 lanes, full vectors
 * unmasked. gi may alias g. */
void kiln_nn_avx512_log_softmax_bwd(const float* g, const float* y, float s, float* gi, int64_t n) {
  const __m512 vs = _mm512_set1_ps(s);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(gi + i, _mm512_fnmadd_ps(exp512(_mm512_loadu_ps(y + i)), vs, _mm512_loadu_ps(g + i)));
  if (i < n) {
    const __mmask16 m = tail16(n - i);
    _mm512_mask_storeu_ps(gi + i, m, _mm512_fnmadd_ps(exp512(_mm512_maskz_loadu_ps(m, y + i)), vs,
                                                      _mm512_maskz_loadu_ps(m, g + i)));
  }
}

/* gi = y * (g - s) (softmax's backward), the AVX2 kernel's arithmetic in 16 lanes. */
void kiln_nn_avx512_softmax_bwd(const float* g, const float* y, float s, float* gi, int64_t n) {
  const __m512 vs = _mm512_set1_ps(s);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(gi + i, _mm512_mul_ps(_mm512_loadu_ps(y + i), _mm512_sub_ps(_mm512_loadu_ps(g + i), vs)));
  if (i < n) {
    const __mmask16 m = tail16(n - i);
    _mm512_mask_storeu_ps(gi + i, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, y + i),
                                                   _mm512_sub_ps(_mm512_maskz_loadu_ps(m, g + i), vs)));
  }
}

/* A 6 x 32 tile (rows ar[0..mr), columns masked by m0 / m1): twelve FMA chains over k. */
static inline __attribute__((always_inline)) void tile6x32(int64_t k, const float* const* ar,
                                                           int64_t cs_a, const float* b,
                                                           int64_t ldb, float* const* cr, int mr,
                                                           float alpha, int acc, __mmask16 m0,
                                                           __mmask16 m1) {
  __m512 x00 = _mm512_setzero_ps(), x01 = x00, x10 = x00, x11 = x00, x20 = x00, x21 = x00;
  __m512 x30 = x00, x31 = x00, x40 = x00, x41 = x00, x50 = x00, x51 = x00;
  const float *a0 = ar[0], *a1 = ar[1], *a2 = ar[2], *a3 = ar[3], *a4 = ar[4], *a5 = ar[5];
  for (int64_t p = 0; p < k; p++) {
    const float* bp = b + p * ldb;
    const __m512 y0 = _mm512_maskz_loadu_ps(m0, bp), y1 = _mm512_maskz_loadu_ps(m1, bp + 16);
    const int64_t o = p * cs_a;
    __m512 s = _mm512_set1_ps(a0[o]);
    x00 = _mm512_fmadd_ps(s, y0, x00);
    x01 = _mm512_fmadd_ps(s, y1, x01);
    s = _mm512_set1_ps(a1[o]);
    x10 = _mm512_fmadd_ps(s, y0, x10);
    x11 = _mm512_fmadd_ps(s, y1, x11);
    s = _mm512_set1_ps(a2[o]);
    x20 = _mm512_fmadd_ps(s, y0, x20);
    x21 = _mm512_fmadd_ps(s, y1, x21);
    s = _mm512_set1_ps(a3[o]);
    x30 = _mm512_fmadd_ps(s, y0, x30);
    x31 = _mm512_fmadd_ps(s, y1, x31);
    s = _mm512_set1_ps(a4[o]);
    x40 = _mm512_fmadd_ps(s, y0, x40);
    x41 = _mm512_fmadd_ps(s, y1, x41);
    s = _mm512_set1_ps(a5[o]);
    x50 = _mm512_fmadd_ps(s, y0, x50);
    x51 = _mm512_fmadd_ps(s, y1, x51);
  }
  const __m512 va = _mm512_set1_ps(alpha);
#define ST(row, v0, v1)                                                     \
  do {                                                                      \
    float* c_ = cr[row];                                                    \
    __m512 r0_ = _mm512_mul_ps(va, v0), r1_ = _mm512_mul_ps(va, v1);        \
    if (acc) {                                                              \
      r0_ = _mm512_add_ps(r0_, _mm512_maskz_loadu_ps(m0, c_));              \
      r1_ = _mm512_add_ps(r1_, _mm512_maskz_loadu_ps(m1, c_ + 16));         \
    }                                                                       \
    _mm512_mask_storeu_ps(c_, m0, r0_);                                     \
    _mm512_mask_storeu_ps(c_ + 16, m1, r1_);                                \
  } while (0)
  ST(0, x00, x01);
  if (mr > 1) ST(1, x10, x11);
  if (mr > 2) ST(2, x20, x21);
  if (mr > 3) ST(3, x30, x31);
  if (mr > 4) ST(4, x40, x41);
  if (mr > 5) ST(5, x50, x51);
#undef ST
}

void kiln_nn_avx512_gemm(int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                         int64_t rs_a, int64_t cs_a, const float* b, int64_t ldb, float* c,
                         int64_t ldc, int acc) {
  for (int64_t j = 0; j < n; j += 32) {
    const int64_t nr = n - j < 32 ? n - j : 32;
    const __mmask16 m0 = tail16(nr), m1 = tail16(nr > 16 ? nr - 16 : 0);
    for (int64_t i = 0; i < m; i += 6) {
      const int mr = (int)(m - i < 6 ? m - i : 6);
      const float* ar[6];
      float* cr[6];
      for (int r = 0; r < 6; r++) {
        const int64_t ii = i + (r < mr ? r : mr - 1);
        ar[r] = a + ii * rs_a;
        cr[r] = c + ii * ldc + j;
      }
      if (acc) tile6x32(k, ar, cs_a, b + j, ldb, cr, mr, alpha, 1, m0, m1);
      else tile6x32(k, ar, cs_a, b + j, ldb, cr, mr, alpha, 0, m0, m1);
    }
  }
}
