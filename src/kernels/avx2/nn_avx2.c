/* SPDX-License-Identifier: Apache-2.0 */
/* nn_avx2.c - AVX2/FMA/F16C row and block primitives of the nn kernels (the contracts are in
 * kernels/nn_internal.h). Compiled with -mavx2 -mfma -mf16c; selected at run time by
 * kiln_nn_ops(). Row tails use masked loads/stores, so every element sees the same arithmetic. */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "kernels/exp_consts.h"
#include "kernels/half.h"
#include "kernels/nn_internal.h"

#define V8(c) _mm256_set1_ps((float)(c))

/* Lanes [0, r) set, r in [0, 8]. */
static inline __m256i tail_mask(int64_t r) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)r), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

static inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

static inline float hmax(__m256 v) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

/* exp(x) (Cephes polynomial after Cody-Waite reduction, ~1 ulp; 2^n applied in two halves so
 * results reach the subnormal range). -inf -> 0, NaN -> NaN, large x -> inf. */
static inline __m256 exp256(__m256 x) {
  const __m256 isnan = _mm256_cmp_ps(x, x, _CMP_UNORD_Q);
  const __m256 big = _mm256_cmp_ps(x, V8(88.72283935546875f), _CMP_GT_OQ);
  /* x <= -104 (masked scores are -inf) gives exactly 0 below: compute those lanes on 0 instead,
   * so the final scaling does not underflow (a microcode assist per vector on Intel). */
  const __m256 tiny = _mm256_cmp_ps(x, V8(-104.0f), _CMP_LE_OQ);
  __m256 xc = _mm256_min_ps(_mm256_max_ps(_mm256_andnot_ps(tiny, x), V8(-104.0f)), V8(88.7f));
  __m256 n = _mm256_round_ps(_mm256_mul_ps(xc, V8(KILN_EXP_LOG2E)),
                             _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, V8(KILN_EXP_LN2_HI), xc);
  r = _mm256_fnmadd_ps(n, V8(KILN_EXP_LN2_LO), r);
  __m256 p = V8(KILN_EXP_P0);
  p = _mm256_fmadd_ps(p, r, V8(KILN_EXP_P1));
  p = _mm256_fmadd_ps(p, r, V8(KILN_EXP_P2));
  p = _mm256_fmadd_ps(p, r, V8(KILN_EXP_P3));
  p = _mm256_fmadd_ps(p, r, V8(KILN_EXP_P4));
  p = _mm256_fmadd_ps(p, r, V8(KILN_EXP_P5));
  p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, V8(1.0f)));
  const __m256i ni = _mm256_cvtps_epi32(n);
  const __m256i n1 = _mm256_srai_epi32(ni, 1);
  const __m256i n2 = _mm256_sub_epi32(ni, n1);
  const __m256i bias = _mm256_set1_epi32(127);
  const __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, bias), 23));
  const __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, bias), 23));
  __m256 y = _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
  y = _mm256_andnot_ps(tiny, y);
  y = _mm256_blendv_ps(y, V8(INFINITY), big);
  return _mm256_blendv_ps(y, x, isnan);
}

/* ---- conversions ------------------------------------------------------------------------- */

static inline __m256 load_bf16(const uint16_t* p) {
  return _mm256_castsi256_ps(
      _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i*)p)), 16));
}

static inline __m128i pack_bf16(__m256 x) {
  const __m256i u = _mm256_castps_si256(x);
  __m256i r = _mm256_add_epi32(
      u, _mm256_add_epi32(_mm256_set1_epi32(0x7fff),
                          _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1))));
  const __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(x, x, _CMP_UNORD_Q));
  r = _mm256_blendv_epi8(r, _mm256_or_si256(u, _mm256_set1_epi32(0x400000)), nan);
  r = _mm256_srli_epi32(r, 16);
  return _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
}

static void a_load(const void* src, kiln_dtype_t dt, int64_t n, float* dst) {
  int64_t i = 0;
  if (dt == KILN_DTYPE_F32) {
    if ((const void*)dst != src) memmove(dst, src, sizeof(float) * (size_t)n);
  } else if (dt == KILN_DTYPE_F16) {
    const uint16_t* s = src;
    for (; i + 8 <= n; i += 8)
      _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)(s + i))));
    for (; i < n; i++) dst[i] = kiln_f16_to_f32(s[i]);
  } else {
    const uint16_t* s = src;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, load_bf16(s + i));
    for (; i < n; i++) dst[i] = kiln_bf16_to_f32(s[i]);
  }
}

static void a_store(const float* src, int64_t n, kiln_dtype_t dt, void* dst) {
  int64_t i = 0;
  if (dt == KILN_DTYPE_F32) {
    if ((const void*)src != dst) memmove(dst, src, sizeof(float) * (size_t)n);
  } else if (dt == KILN_DTYPE_F16) {
    uint16_t* d = dst;
    for (; i + 8 <= n; i += 8)
      _mm_storeu_si128((__m128i*)(d + i),
                       _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++) d[i] = kiln_f32_to_f16(src[i]);
  } else {
    uint16_t* d = dst;
    for (; i + 8 <= n; i += 8) _mm_storeu_si128((__m128i*)(d + i), pack_bf16(_mm256_loadu_ps(src + i)));
    for (; i < n; i++) d[i] = kiln_f32_to_bf16(src[i]);
  }
}

/* ---- row reductions and maps ------------------------------------------------------------- */

static float a_max(const float* x, int64_t n) {
  __m256 m0 = V8(-INFINITY), m1 = m0, m2 = m0, m3 = m0;
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    m0 = _mm256_max_ps(m0, _mm256_loadu_ps(x + i));
    m1 = _mm256_max_ps(m1, _mm256_loadu_ps(x + i + 8));
    m2 = _mm256_max_ps(m2, _mm256_loadu_ps(x + i + 16));
    m3 = _mm256_max_ps(m3, _mm256_loadu_ps(x + i + 24));
  }
  for (; i + 8 <= n; i += 8) m0 = _mm256_max_ps(m0, _mm256_loadu_ps(x + i));
  float m = hmax(_mm256_max_ps(_mm256_max_ps(m0, m1), _mm256_max_ps(m2, m3)));
  for (; i < n; i++) m = x[i] > m ? x[i] : m;
  return m;
}

static float a_exp_sum(const float* x, float shift, float* y, int64_t n) {
  const __m256 sh = _mm256_set1_ps(shift);
  __m256 s0 = _mm256_setzero_ps(), s1 = s0;
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256 e0 = exp256(_mm256_sub_ps(_mm256_loadu_ps(x + i), sh));
    const __m256 e1 = exp256(_mm256_sub_ps(_mm256_loadu_ps(x + i + 8), sh));
    if (y) {
      _mm256_storeu_ps(y + i, e0);
      _mm256_storeu_ps(y + i + 8, e1);
    }
    s0 = _mm256_add_ps(s0, e0);
    s1 = _mm256_add_ps(s1, e1);
  }
  for (; i < n; i += 8) {
    const __m256i m = tail_mask(n - i);
    const __m256 e = _mm256_and_ps(exp256(_mm256_sub_ps(_mm256_maskload_ps(x + i, m), sh)),
                                   _mm256_castsi256_ps(m));
    if (y) _mm256_maskstore_ps(y + i, m, e);
    s0 = _mm256_add_ps(s0, e);
  }
  return hsum(_mm256_add_ps(s0, s1));
}

static void a_affine(const float* x, float s, float t, float* y, int64_t n) {
  const __m256 vs = _mm256_set1_ps(s), vt = _mm256_set1_ps(t);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_fmadd_ps(_mm256_loadu_ps(x + i), vs, vt));
  if (i < n) {
    const __m256i m = tail_mask(n - i);
    _mm256_maskstore_ps(y + i, m, _mm256_fmadd_ps(_mm256_maskload_ps(x + i, m), vs, vt));
  }
}

static float a_dot(const float* a, const float* b, int64_t n) {
  __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
    s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), s1);
    s2 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 16), _mm256_loadu_ps(b + i + 16), s2);
    s3 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 24), _mm256_loadu_ps(b + i + 24), s3);
  }
  for (; i < n; i += 8) {
    const __m256i m = tail_mask(n - i);
    s0 = _mm256_fmadd_ps(_mm256_maskload_ps(a + i, m), _mm256_maskload_ps(b + i, m), s0);
  }
  return hsum(_mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
}

static void a_add(const float* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(y + i, _mm256_add_ps(_mm256_loadu_ps(y + i), _mm256_loadu_ps(x + i)));
  for (; i < n; i++) y[i] += x[i];
}

static float a_sum(const float* x, int64_t n) {
  __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    s0 = _mm256_add_ps(s0, _mm256_loadu_ps(x + i));
    s1 = _mm256_add_ps(s1, _mm256_loadu_ps(x + i + 8));
    s2 = _mm256_add_ps(s2, _mm256_loadu_ps(x + i + 16));
    s3 = _mm256_add_ps(s3, _mm256_loadu_ps(x + i + 24));
  }
  for (; i < n; i += 8) s0 = _mm256_add_ps(s0, _mm256_maskload_ps(x + i, tail_mask(n - i)));
  return hsum(_mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
}

static void a_softmax_bwd(const float* g, const float* y, float s, float* gi, int64_t n) {
  const __m256 vs = _mm256_set1_ps(s);
  for (int64_t i = 0; i < n; i += 8) {
    const __m256i m = tail_mask(n - i);
    const __m256 r = _mm256_mul_ps(_mm256_maskload_ps(y + i, m),
                                   _mm256_sub_ps(_mm256_maskload_ps(g + i, m), vs));
    _mm256_maskstore_ps(gi + i, m, r);
  }
}

static void a_log_softmax_bwd(const float* g, const float* y, float s, float* gi, int64_t n) {
  const __m256 vs = _mm256_set1_ps(s);
  for (int64_t i = 0; i < n; i += 8) {
    const __m256i m = tail_mask(n - i);
    const __m256 r = _mm256_fnmadd_ps(exp256(_mm256_maskload_ps(y + i, m)), vs,
                                      _mm256_maskload_ps(g + i, m));
    _mm256_maskstore_ps(gi + i, m, r);
  }
}

static void a_moments(const float* x, int64_t n, float* mean, float* var) {
  const float m = a_sum(x, n) / (float)n;
  const __m256 vm = _mm256_set1_ps(m);
  __m256 q0 = _mm256_setzero_ps(), q1 = q0;
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256 d0 = _mm256_sub_ps(_mm256_loadu_ps(x + i), vm);
    const __m256 d1 = _mm256_sub_ps(_mm256_loadu_ps(x + i + 8), vm);
    q0 = _mm256_fmadd_ps(d0, d0, q0);
    q1 = _mm256_fmadd_ps(d1, d1, q1);
  }
  for (; i < n; i += 8) {
    const __m256i mk = tail_mask(n - i);
    const __m256 d = _mm256_and_ps(_mm256_sub_ps(_mm256_maskload_ps(x + i, mk), vm),
                                   _mm256_castsi256_ps(mk));
    q0 = _mm256_fmadd_ps(d, d, q0);
  }
  *mean = m;
  *var = hsum(_mm256_add_ps(q0, q1)) / (float)n;
}

static float a_sumsq(const float* x, int64_t n) { return a_dot(x, x, n); }

static void a_norm_apply(const float* x, int64_t n, float mean, float rstd, const float* w,
                         const float* b, float* y) {
  /* (x - mean) * rstd as x*rstd + (-mean*rstd) would round differently; keep torch's order. */
  const __m256 vm = _mm256_set1_ps(mean), vr = _mm256_set1_ps(rstd);
  for (int64_t i = 0; i < n; i += 8) {
    const __m256i m = tail_mask(n - i);
    __m256 v = _mm256_mul_ps(_mm256_sub_ps(_mm256_maskload_ps(x + i, m), vm), vr);
    if (w && b)
      v = _mm256_fmadd_ps(v, _mm256_maskload_ps(w + i, m), _mm256_maskload_ps(b + i, m));
    else if (w)
      v = _mm256_mul_ps(v, _mm256_maskload_ps(w + i, m));
    else if (b)
      v = _mm256_add_ps(v, _mm256_maskload_ps(b + i, m));
    _mm256_maskstore_ps(y + i, m, v);
  }
}

static void a_norm_bwd_sums(const float* g, const float* x, const float* w, int64_t n, float mean,
                            float rstd, float* s1, float* s2) {
  const __m256 vm = _mm256_set1_ps(mean), vr = _mm256_set1_ps(rstd);
  __m256 a = _mm256_setzero_ps(), b = a;
  for (int64_t i = 0; i < n; i += 8) {
    const __m256i m = tail_mask(n - i);
    __m256 gw = _mm256_maskload_ps(g + i, m);
    if (w) gw = _mm256_mul_ps(gw, _mm256_maskload_ps(w + i, m));
    const __m256 xh = _mm256_mul_ps(_mm256_sub_ps(_mm256_maskload_ps(x + i, m), vm), vr);
    a = _mm256_add_ps(a, gw);
    b = _mm256_fmadd_ps(gw, xh, b); /* masked lanes: gw = 0 */
  }
  *s1 = hsum(a);
  *s2 = hsum(b);
}

static void a_norm_bwd_apply(const float* g, const float* x, const float* w, int64_t n,
                             float mean, float rstd, float a, float b, float* dx) {
  const __m256 vm = _mm256_set1_ps(mean), vr = _mm256_set1_ps(rstd);
  const __m256 va = _mm256_set1_ps(a), vb = _mm256_set1_ps(b);
  for (int64_t i = 0; i < n; i += 8) {
    const __m256i m = tail_mask(n - i);
    __m256 gw = _mm256_maskload_ps(g + i, m);
    if (w) gw = _mm256_mul_ps(gw, _mm256_maskload_ps(w + i, m));
    const __m256 xh = _mm256_mul_ps(_mm256_sub_ps(_mm256_maskload_ps(x + i, m), vm), vr);
    const __m256 r = _mm256_mul_ps(vr, _mm256_fnmadd_ps(xh, vb, _mm256_sub_ps(gw, va)));
    _mm256_maskstore_ps(dx + i, m, r);
  }
}

static void a_norm_wgrad_acc(const float* g, const float* x, int64_t n, float mean, float rstd,
                             float* aw, float* ab) {
  const __m256 vm = _mm256_set1_ps(mean), vr = _mm256_set1_ps(rstd);
  for (int64_t i = 0; i < n; i += 8) {
    const __m256i m = tail_mask(n - i);
    const __m256 gv = _mm256_maskload_ps(g + i, m);
    const __m256 xh = _mm256_mul_ps(_mm256_sub_ps(_mm256_maskload_ps(x + i, m), vm), vr);
    _mm256_maskstore_ps(aw + i, m, _mm256_fmadd_ps(gv, xh, _mm256_maskload_ps(aw + i, m)));
    if (ab) _mm256_maskstore_ps(ab + i, m, _mm256_add_ps(gv, _mm256_maskload_ps(ab + i, m)));
  }
}

/* ---- block products ---------------------------------------------------------------------- */

/* dst[c*ldd + r] = src[r*lds + c]: 8 x 8 register transposes, scalar edges. */
static void a_transpose(int64_t rows, int64_t cols, const float* src, int64_t lds, float* dst,
                        int64_t ldd) {
  int64_t r = 0;
  for (; r + 8 <= rows; r += 8) {
    int64_t c = 0;
    for (; c + 8 <= cols; c += 8) {
      const float* s = src + r * lds + c;
      const __m256 r0 = _mm256_loadu_ps(s), r1 = _mm256_loadu_ps(s + lds);
      const __m256 r2 = _mm256_loadu_ps(s + 2 * lds), r3 = _mm256_loadu_ps(s + 3 * lds);
      const __m256 r4 = _mm256_loadu_ps(s + 4 * lds), r5 = _mm256_loadu_ps(s + 5 * lds);
      const __m256 r6 = _mm256_loadu_ps(s + 6 * lds), r7 = _mm256_loadu_ps(s + 7 * lds);
      const __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1);
      const __m256 t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3);
      const __m256 t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5);
      const __m256 t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
      const __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
      const __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
      const __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE);
      const __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
      float* d = dst + c * ldd + r;
      _mm256_storeu_ps(d, _mm256_permute2f128_ps(u0, u4, 0x20));
      _mm256_storeu_ps(d + ldd, _mm256_permute2f128_ps(u1, u5, 0x20));
      _mm256_storeu_ps(d + 2 * ldd, _mm256_permute2f128_ps(u2, u6, 0x20));
      _mm256_storeu_ps(d + 3 * ldd, _mm256_permute2f128_ps(u3, u7, 0x20));
      _mm256_storeu_ps(d + 4 * ldd, _mm256_permute2f128_ps(u0, u4, 0x31));
      _mm256_storeu_ps(d + 5 * ldd, _mm256_permute2f128_ps(u1, u5, 0x31));
      _mm256_storeu_ps(d + 6 * ldd, _mm256_permute2f128_ps(u2, u6, 0x31));
      _mm256_storeu_ps(d + 7 * ldd, _mm256_permute2f128_ps(u3, u7, 0x31));
    }
    for (; c < cols; c++)
      for (int64_t i = 0; i < 8; i++) dst[c * ldd + r + i] = src[(r + i) * lds + c];
  }
  for (; r < rows; r++)
    for (int64_t c = 0; c < cols; c++) dst[c * ldd + r] = src[r * lds + c];
}

/* One 6 x 16 tile: C = alpha * A B (+ C when acc). Columns [j, j+16) are masked by m0/m1 when
 * `masked`; rows past mr point at a valid row and are not stored. */
static inline __attribute__((always_inline)) void nn_tile(
    int64_t k, const float* const* ar, int64_t cs_a, const float* b, int64_t ldb,
    float* const* cr, int mr, float alpha, int acc, int masked, __m256i m0, __m256i m1) {
#define LD0(p) (masked ? _mm256_maskload_ps((p), m0) : _mm256_loadu_ps(p))
#define LD1(p) (masked ? _mm256_maskload_ps((p), m1) : _mm256_loadu_ps(p))
  __m256 x00 = _mm256_setzero_ps(), x01 = x00, x10 = x00, x11 = x00, x20 = x00, x21 = x00;
  __m256 x30 = x00, x31 = x00, x40 = x00, x41 = x00, x50 = x00, x51 = x00;
  const float *a0 = ar[0], *a1 = ar[1], *a2 = ar[2], *a3 = ar[3], *a4 = ar[4], *a5 = ar[5];
  for (int64_t p = 0; p < k; p++) {
    const float* bp = b + p * ldb;
    const __m256 y0 = LD0(bp), y1 = LD1(bp + 8);
    const int64_t o = p * cs_a;
    __m256 s = _mm256_broadcast_ss(a0 + o);
    x00 = _mm256_fmadd_ps(s, y0, x00);
    x01 = _mm256_fmadd_ps(s, y1, x01);
    s = _mm256_broadcast_ss(a1 + o);
    x10 = _mm256_fmadd_ps(s, y0, x10);
    x11 = _mm256_fmadd_ps(s, y1, x11);
    s = _mm256_broadcast_ss(a2 + o);
    x20 = _mm256_fmadd_ps(s, y0, x20);
    x21 = _mm256_fmadd_ps(s, y1, x21);
    s = _mm256_broadcast_ss(a3 + o);
    x30 = _mm256_fmadd_ps(s, y0, x30);
    x31 = _mm256_fmadd_ps(s, y1, x31);
    s = _mm256_broadcast_ss(a4 + o);
    x40 = _mm256_fmadd_ps(s, y0, x40);
    x41 = _mm256_fmadd_ps(s, y1, x41);
    s = _mm256_broadcast_ss(a5 + o);
    x50 = _mm256_fmadd_ps(s, y0, x50);
    x51 = _mm256_fmadd_ps(s, y1, x51);
  }
  const __m256 va = _mm256_set1_ps(alpha);
#define ST(row, v0, v1)                                                                  \
  do {                                                                                   \
    float* c_ = cr[row];                                                                 \
    __m256 r0_ = _mm256_mul_ps(va, v0), r1_ = _mm256_mul_ps(va, v1);                     \
    if (acc) {                                                                           \
      r0_ = _mm256_add_ps(r0_, LD0(c_));                                                 \
      r1_ = _mm256_add_ps(r1_, LD1(c_ + 8));                                             \
    }                                                                                    \
    if (masked) {                                                                        \
      _mm256_maskstore_ps(c_, m0, r0_);                                                  \
      _mm256_maskstore_ps(c_ + 8, m1, r1_);                                              \
    } else {                                                                             \
      _mm256_storeu_ps(c_, r0_);                                                         \
      _mm256_storeu_ps(c_ + 8, r1_);                                                     \
    }                                                                                    \
  } while (0)
  ST(0, x00, x01);
  if (mr > 1) ST(1, x10, x11);
  if (mr > 2) ST(2, x20, x21);
  if (mr > 3) ST(3, x30, x31);
  if (mr > 4) ST(4, x40, x41);
  if (mr > 5) ST(5, x50, x51);
#undef ST
#undef LD0
#undef LD1
}

static void a_gemm(int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t rs_a,
                   int64_t cs_a, const float* b, int64_t ldb, float* c, int64_t ldc, int acc) {
  for (int64_t j = 0; j < n; j += 16) {
    const int64_t nr = n - j < 16 ? n - j : 16;
    const __m256i m0 = tail_mask(nr < 8 ? nr : 8), m1 = tail_mask(nr > 8 ? nr - 8 : 0);
    for (int64_t i = 0; i < m; i += 6) {
      const int mr = (int)(m - i < 6 ? m - i : 6);
      const float* ar[6];
      float* cr[6];
      for (int r = 0; r < 6; r++) {
        const int64_t ii = i + (r < mr ? r : mr - 1);
        ar[r] = a + ii * rs_a;
        cr[r] = c + ii * ldc + j;
      }
      if (nr == 16) {
        if (acc)
          nn_tile(k, ar, cs_a, b + j, ldb, cr, mr, alpha, 1, 0, m0, m1);
        else
          nn_tile(k, ar, cs_a, b + j, ldb, cr, mr, alpha, 0, 0, m0, m1);
      } else {
        nn_tile(k, ar, cs_a, b + j, ldb, cr, mr, alpha, acc, 1, m0, m1);
      }
    }
  }
}

const kiln_nn_ops_t kiln_nn_ops_avx2 = {
    .load = a_load,
    .store = a_store,
    .max = a_max,
    .exp_sum = a_exp_sum,
    .affine = a_affine,
    .dot = a_dot,
    .add = a_add,
    .sum = a_sum,
    .softmax_bwd = a_softmax_bwd,
    .log_softmax_bwd = a_log_softmax_bwd,
    .moments = a_moments,
    .sumsq = a_sumsq,
    .norm_apply = a_norm_apply,
    .norm_bwd_sums = a_norm_bwd_sums,
    .norm_bwd_apply = a_norm_bwd_apply,
    .norm_wgrad_acc = a_norm_wgrad_acc,
    .transpose = a_transpose,
    .gemm = a_gemm,
};
