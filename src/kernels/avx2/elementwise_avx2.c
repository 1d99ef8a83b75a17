/* SPDX-License-Identifier: Apache-2.0 */
/* elementwise_avx2.c - AVX2/FMA/F16C fast paths for f32: arithmetic, activations with polynomial
 * exp/tanh/erfc (a few ulp), f32 <-> f16/bf16 conversion and a double-accumulated sum. Compiled
 * with -mavx2 -mfma -mf16c; only called after kiln_cpu_has_avx2(). Tails are computed on a padded
 * 8-lane copy, so every element of a tensor goes through the same arithmetic. */
#include <immintrin.h>
#include <string.h>

#include "kernels/ew_internal.h"
#include "kernels/ew_math.h"
#include "kernels/exp_consts.h"

#define V8(c) _mm256_set1_ps((float)(c))

/* exp(x): Cody-Waite reduction to r in [-ln2/2, ln2/2], Cephes polynomial, 2^n applied in two
 * halves so results down to the subnormal range are right. NaN in -> NaN out. */
static inline __m256 exp256(__m256 x) {
  const __m256 isnan = _mm256_cmp_ps(x, x, _CMP_UNORD_Q);
  /* x <= -105 gives exactly 0 below: compute those lanes on 0 so nothing underflows (an
   * underflowing multiply takes a microcode assist on Intel; masked scores are -inf) */
  const __m256 tiny = _mm256_cmp_ps(x, V8(-105.0f), _CMP_LE_OQ);
  __m256 xc = _mm256_min_ps(_mm256_max_ps(_mm256_andnot_ps(tiny, x), V8(-105.0f)), V8(88.8f));
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
  __m256i ni = _mm256_cvtps_epi32(n);
  __m256i n1 = _mm256_srai_epi32(ni, 1);
  __m256i n2 = _mm256_sub_epi32(ni, n1);
  __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, _mm256_set1_epi32(127)), 23));
  __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, _mm256_set1_epi32(127)), 23));
  __m256 y = _mm256_andnot_ps(tiny, _mm256_mul_ps(_mm256_mul_ps(p, s1), s2));
  return _mm256_blendv_ps(y, x, isnan);
}

/* tanh(x): Cephes odd polynomial for |x| < 0.625, else 1 - 2/(exp(2|x|) + 1), sign restored. */
static inline __m256 tanh256(__m256 x) {
  const __m256 sign = _mm256_and_ps(x, V8(-0.0f));
  const __m256 ax = _mm256_andnot_ps(V8(-0.0f), x);
  __m256 z = _mm256_mul_ps(x, x);
  __m256 p = V8(-5.70498872745E-3f);
  p = _mm256_fmadd_ps(p, z, V8(2.06390887954E-2f));
  p = _mm256_fmadd_ps(p, z, V8(-5.37397155531E-2f));
  p = _mm256_fmadd_ps(p, z, V8(1.33314422036E-1f));
  p = _mm256_fmadd_ps(p, z, V8(-3.33332819422E-1f));
  __m256 small = _mm256_fmadd_ps(_mm256_mul_ps(p, z), x, x);
  __m256 e = exp256(_mm256_add_ps(ax, ax));
  __m256 big = _mm256_sub_ps(V8(1.0f), _mm256_div_ps(V8(2.0f), _mm256_add_ps(e, V8(1.0f))));
  big = _mm256_or_ps(big, sign);
  return _mm256_blendv_ps(big, small, _mm256_cmp_ps(ax, V8(0.625f), _CMP_LT_OQ));
}

/* erfc(z) for z >= 0 (Numerical Recipes' Chebyshev fit, fractional error < 1.2e-7):
 * t * exp(p(t) - z*z). The exponent is carried as an exact pair (z*z = hi + lo by FMA, p - hi
 * by TwoSum) so one exp keeps the relative accuracy of the tail. */
static inline __m256 erfc_pos256(__m256 z) {
  __m256 t = _mm256_div_ps(V8(1.0f), _mm256_fmadd_ps(V8(0.5f), z, V8(1.0f)));
  __m256 p = V8(0.17087277f);
  p = _mm256_fmadd_ps(p, t, V8(-0.82215223f));
  p = _mm256_fmadd_ps(p, t, V8(1.48851587f));
  p = _mm256_fmadd_ps(p, t, V8(-1.13520398f));
  p = _mm256_fmadd_ps(p, t, V8(0.27886807f));
  p = _mm256_fmadd_ps(p, t, V8(-0.18628806f));
  p = _mm256_fmadd_ps(p, t, V8(0.09678418f));
  p = _mm256_fmadd_ps(p, t, V8(0.37409196f));
  p = _mm256_fmadd_ps(p, t, V8(1.00002368f));
  p = _mm256_fmadd_ps(p, t, V8(-1.26551223f));
  __m256 hi = _mm256_mul_ps(z, z);
  __m256 lo = _mm256_fmsub_ps(z, z, hi);
  __m256 nhi = _mm256_xor_ps(hi, V8(-0.0f));
  __m256 y = _mm256_add_ps(p, nhi); /* TwoSum(p, -hi) = y + e exactly */
  __m256 bb = _mm256_sub_ps(y, p);
  __m256 e = _mm256_add_ps(_mm256_sub_ps(p, _mm256_sub_ps(y, bb)), _mm256_sub_ps(nhi, bb));
  __m256 corr = _mm256_sub_ps(V8(1.0f), _mm256_sub_ps(lo, e)); /* exp(e - lo) ~ 1 + e - lo */
  __m256 r = _mm256_mul_ps(_mm256_mul_ps(t, exp256(y)), corr);
  return _mm256_blendv_ps(r, V8(0.0f), _mm256_cmp_ps(z, V8(12.0f), _CMP_GT_OQ)); /* < 1e-64 */
}

static inline __m256 sigmoid256(__m256 x) {
  return _mm256_div_ps(V8(1.0f), _mm256_add_ps(V8(1.0f), exp256(_mm256_sub_ps(V8(0.0f), x))));
}

/* gelu(x) = x/2 * erfc(-x/sqrt 2): 0.5*x*erfc(|z|) for x < 0, x*(1 - 0.5*erfc(z)) for x >= 0. */
static inline __m256 gelu256(__m256 x) {
  __m256 z = _mm256_andnot_ps(V8(-0.0f), _mm256_mul_ps(x, V8(0.70710678118654752f)));
  __m256 e = erfc_pos256(z);
  __m256 neg = _mm256_mul_ps(_mm256_mul_ps(V8(0.5f), x), e);
  __m256 pos = _mm256_mul_ps(x, _mm256_fnmadd_ps(V8(0.5f), e, V8(1.0f)));
  __m256 r = _mm256_blendv_ps(pos, neg, _mm256_cmp_ps(x, V8(0.0f), _CMP_LT_OQ));
  return _mm256_blendv_ps(r, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}

/* gelu_tanh(x) = x/2 (1 + tanh(u)) = x / (1 + exp(-2u)), u = sqrt(2/pi) (x + 0.044715 x^3). */
static inline __m256 gelu_tanh256(__m256 x) {
  __m256 x3 = _mm256_mul_ps(_mm256_mul_ps(x, x), x);
  __m256 u = _mm256_mul_ps(V8(0.7978845608028654f), _mm256_fmadd_ps(V8(0.044715f), x3, x));
  __m256 e = exp256(_mm256_mul_ps(V8(-2.0f), u));
  return _mm256_div_ps(x, _mm256_add_ps(V8(1.0f), e));
}

#define KHEAD(NAME) \
  static int NAME(int64_t n, void* out_, const void* const* in, const kiln_ew_args_t* g)

/* Unary kernel over 8 lanes; EXPR uses `x`. */
#define DEF_U(NAME, EXPR)                                      \
  KHEAD(NAME) {                                                \
    (void)g;                                                   \
    const float* a = in[0];                                    \
    float* o = out_;                                           \
    int64_t i = 0;                                             \
    for (; i + 16 <= n; i += 16) { /* two independent chains */ \
      __m256 r0, r1;                                           \
      {                                                        \
        __m256 x = _mm256_loadu_ps(a + i);                     \
        r0 = (EXPR);                                           \
      }                                                        \
      {                                                        \
        __m256 x = _mm256_loadu_ps(a + i + 8);                 \
        r1 = (EXPR);                                           \
      }                                                        \
      _mm256_storeu_ps(o + i, r0);                             \
      _mm256_storeu_ps(o + i + 8, r1);                         \
    }                                                          \
    for (; i + 8 <= n; i += 8) {                               \
      __m256 x = _mm256_loadu_ps(a + i);                       \
      _mm256_storeu_ps(o + i, (EXPR));                         \
    }                                                          \
    if (i < n) {                                               \
      float t[8] = {0};                                        \
      memcpy(t, a + i, (size_t)(n - i) * 4);                   \
      __m256 x = _mm256_loadu_ps(t);                           \
      _mm256_storeu_ps(t, (EXPR));                             \
      memcpy(o + i, t, (size_t)(n - i) * 4);                   \
    }                                                          \
    return 0;                                                  \
  }

/* Binary kernel over 8 lanes; EXPR uses `x`, `y` and `al` (alpha broadcast). */
#define DEF_B(NAME, EXPR)                                      \
  KHEAD(NAME) {                                                \
    const __m256 al = V8(g->alpha);                            \
    (void)al;                                                  \
    const float* a = in[0];                                    \
    const float* b = in[1];                                    \
    float* o = out_;                                           \
    int64_t i = 0;                                             \
    for (; i + 8 <= n; i += 8) {                               \
      __m256 x = _mm256_loadu_ps(a + i);                       \
      __m256 y = _mm256_loadu_ps(b + i);                       \
      _mm256_storeu_ps(o + i, (EXPR));                         \
    }                                                          \
    if (i < n) {                                               \
      float ta[8] = {0}, tb[8] = {0};                          \
      memcpy(ta, a + i, (size_t)(n - i) * 4);                  \
      memcpy(tb, b + i, (size_t)(n - i) * 4);                  \
      __m256 x = _mm256_loadu_ps(ta);                          \
      __m256 y = _mm256_loadu_ps(tb);                          \
      _mm256_storeu_ps(ta, (EXPR));                            \
      memcpy(o + i, ta, (size_t)(n - i) * 4);                  \
    }                                                          \
    return 0;                                                  \
  }

DEF_U(u_neg, _mm256_xor_ps(x, V8(-0.0f)))
DEF_U(u_abs, _mm256_andnot_ps(V8(-0.0f), x))
DEF_U(u_relu, _mm256_max_ps(V8(0.0f), x))
DEF_U(u_square, _mm256_mul_ps(x, x))
DEF_U(u_sqrt, _mm256_sqrt_ps(x))
DEF_U(u_exp, exp256(x))
DEF_U(u_tanh, tanh256(x))
DEF_U(u_sigmoid, sigmoid256(x))
DEF_U(u_silu, _mm256_div_ps(x, _mm256_add_ps(V8(1.0f), exp256(_mm256_sub_ps(V8(0.0f), x)))))
DEF_U(u_gelu, gelu256(x))
DEF_U(u_gelu_tanh, gelu_tanh256(x))

DEF_U(u_cube, _mm256_mul_ps(_mm256_mul_ps(x, x), x))
DEF_U(u_rsqrt_exact, _mm256_div_ps(V8(1.0f), _mm256_sqrt_ps(x)))
DEF_U(u_recip, _mm256_div_ps(V8(1.0f), x))
DEF_U(u_recip_square, _mm256_div_ps(V8(1.0f), _mm256_mul_ps(x, x)))

/* pow(x, e) for a scalar e: the exponents kiln_pow_scalar special-cases run vectorized with the
 * same arithmetic (so the same bits); any other exponent takes kiln_pow_scalar per element. */
KHEAD(u_pow_scalar) {
  const float e = (float)g->up.alpha;
  const float* a = in[0];
  float* o = out_;
  if (e == 1.0f) {
    if (o != a) memmove(o, a, (size_t)n * sizeof(float));
    return 0;
  }
  if (e == 0.0f) {
    for (int64_t i = 0; i < n; i++) o[i] = 1.0f;
    return 0;
  }
  if (e == 2.0f) return u_square(n, out_, in, g);
  if (e == 3.0f) return u_cube(n, out_, in, g);
  if (e == 0.5f) return u_sqrt(n, out_, in, g);
  if (e == -0.5f) return u_rsqrt_exact(n, out_, in, g);
  if (e == -1.0f) return u_recip(n, out_, in, g);
  if (e == -2.0f) return u_recip_square(n, out_, in, g);
  for (int64_t i = 0; i < n; i++) o[i] = kiln_pow_scalar(a[i], e);
  return 0;
}

/* lerp(a, b, w) = |w| < 0.5 ? a + w (b - a) : b - (b - a)(1 - w), fused multiply-adds as in
 * ATen's vectorized lerp. */
static inline __m256 lerp8(__m256 a, __m256 b, __m256 w) {
  const __m256 d = _mm256_sub_ps(b, a);
  const __m256 small = _mm256_cmp_ps(_mm256_andnot_ps(V8(-0.0f), w), V8(0.5f), _CMP_LT_OQ);
  const __m256 lo = _mm256_fmadd_ps(w, d, a);
  const __m256 hi = _mm256_fnmadd_ps(d, _mm256_sub_ps(V8(1.0f), w), b);
  return _mm256_blendv_ps(hi, lo, small);
}

KHEAD(t_lerp) {
  (void)g;
  const float* a = in[0];
  const float* b = in[1];
  const float* w = in[2];
  float* o = out_;
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(o + i, lerp8(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i),
                                  _mm256_loadu_ps(w + i)));
  if (i < n) {
    float ta[8] = {0}, tb[8] = {0}, tw[8] = {0};
    memcpy(ta, a + i, (size_t)(n - i) * 4);
    memcpy(tb, b + i, (size_t)(n - i) * 4);
    memcpy(tw, w + i, (size_t)(n - i) * 4);
    _mm256_storeu_ps(ta, lerp8(_mm256_loadu_ps(ta), _mm256_loadu_ps(tb), _mm256_loadu_ps(tw)));
    memcpy(o + i, ta, (size_t)(n - i) * 4);
  }
  return 0;
}

/* where(c, a, b) on f32: a pure selection (c bool bytes, 0 or not), 8 lanes per step. */
KHEAD(t_where) {
  (void)g;
  const uint8_t* c = in[0];
  const float* a = in[1];
  const float* b = in[2];
  float* o = out_;
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i cv = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i*)(const void*)(c + i)));
    const __m256 zero = _mm256_castsi256_ps(_mm256_cmpeq_epi32(cv, _mm256_setzero_si256()));
    _mm256_storeu_ps(o + i, _mm256_blendv_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), zero));
  }
  for (; i < n; i++) o[i] = c[i] ? a[i] : b[i];
  return 0;
}

kiln_ew_kernel_t kiln_avx2_ternary_f32(kiln_ternary_op_t op) {
  return op == KILN_TERNARY_LERP ? t_lerp : op == KILN_TERNARY_WHERE ? t_where : NULL;
}

DEF_B(b_add, _mm256_fmadd_ps(y, al, x))
DEF_B(b_sub, _mm256_fnmadd_ps(y, al, x))
DEF_B(b_mul, _mm256_mul_ps(x, y))
DEF_B(b_div, _mm256_div_ps(x, y))
DEF_B(b_max, _mm256_blendv_ps(_mm256_max_ps(x, y), _mm256_add_ps(x, y), _mm256_cmp_ps(x, y, _CMP_UNORD_Q)))
DEF_B(b_min, _mm256_blendv_ps(_mm256_min_ps(x, y), _mm256_add_ps(x, y), _mm256_cmp_ps(x, y, _CMP_UNORD_Q)))
DEF_B(b_sigmoid_bw, _mm256_mul_ps(_mm256_mul_ps(x, _mm256_sub_ps(V8(1.0f), y)), y))
DEF_B(b_tanh_bw, _mm256_mul_ps(x, _mm256_fnmadd_ps(y, y, V8(1.0f))))
DEF_B(b_threshold_bw, _mm256_blendv_ps(x, V8(0.0f), _mm256_cmp_ps(y, al, _CMP_LE_OQ)))

kiln_ew_kernel_t kiln_avx2_unary_f32(kiln_unary_op_t op) {
  switch (op) {
    case KILN_UNARY_NEG: return u_neg;
    case KILN_UNARY_ABS: return u_abs;
    case KILN_UNARY_RELU: return u_relu;
    case KILN_UNARY_SQUARE: return u_square;
    case KILN_UNARY_SQRT: return u_sqrt;
    case KILN_UNARY_EXP: return u_exp;
    case KILN_UNARY_TANH: return u_tanh;
    case KILN_UNARY_SIGMOID: return u_sigmoid;
    case KILN_UNARY_SILU: return u_silu;
    case KILN_UNARY_GELU: return u_gelu;
    case KILN_UNARY_GELU_TANH: return u_gelu_tanh;
    case KILN_UNARY_POW_SCALAR: return u_pow_scalar;
    default: return NULL;
  }
}

kiln_ew_kernel_t kiln_avx2_binary_f32(kiln_binary_op_t op) {
  switch (op) {
    case KILN_BINARY_ADD: return b_add;
    case KILN_BINARY_SUB: return b_sub;
    case KILN_BINARY_MUL: return b_mul;
    case KILN_BINARY_DIV: return b_div;
    case KILN_BINARY_MAXIMUM: return b_max;
    case KILN_BINARY_MINIMUM: return b_min;
    case KILN_BINARY_SIGMOID_BACKWARD: return b_sigmoid_bw;
    case KILN_BINARY_TANH_BACKWARD: return b_tanh_bw;
    case KILN_BINARY_THRESHOLD_BACKWARD: return b_threshold_bw;
    default: return NULL;
  }
}

/* ---- conversions ---- */
void kiln_avx2_f32_to_f16(const float* src, uint16_t* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128((__m128i*)(dst + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
  if (i < n) {
    float t[8] = {0};
    uint16_t h[8];
    memcpy(t, src + i, (size_t)(n - i) * 4);
    _mm_storeu_si128((__m128i*)h, _mm256_cvtps_ph(_mm256_loadu_ps(t), _MM_FROUND_TO_NEAREST_INT));
    memcpy(dst + i, h, (size_t)(n - i) * 2);
  }
}

void kiln_avx2_f16_to_f32(const uint16_t* src, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)(src + i))));
  if (i < n) {
    uint16_t h[8] = {0};
    float t[8];
    memcpy(h, src + i, (size_t)(n - i) * 2);
    _mm256_storeu_ps(t, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)h)));
    memcpy(dst + i, t, (size_t)(n - i) * 4);
  }
}

/* Round-to-nearest-even bf16 bits (in the low half of each lane); NaN keeps its sign, quiet. */
static inline __m256i bf16_bits(__m256 x) {
  __m256i u = _mm256_castps_si256(x);
  __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
  __m256i r = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7fff)), lsb), 16);
  __m256i q = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x40));
  __m256 isnan = _mm256_cmp_ps(x, x, _CMP_UNORD_Q);
  return _mm256_castps_si256(_mm256_blendv_ps(_mm256_castsi256_ps(r), _mm256_castsi256_ps(q), isnan));
}

void kiln_avx2_f32_to_bf16(const float* src, uint16_t* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m256i lo = bf16_bits(_mm256_loadu_ps(src + i));
    __m256i hi = bf16_bits(_mm256_loadu_ps(src + i + 8));
    __m256i p = _mm256_permute4x64_epi64(_mm256_packus_epi32(lo, hi), 0xD8);
    _mm256_storeu_si256((__m256i*)(dst + i), p);
  }
  if (i < n) {
    float t[16] = {0};
    uint16_t h[16];
    memcpy(t, src + i, (size_t)(n - i) * 4);
    __m256i lo = bf16_bits(_mm256_loadu_ps(t));
    __m256i hi = bf16_bits(_mm256_loadu_ps(t + 8));
    _mm256_storeu_si256((__m256i*)h, _mm256_permute4x64_epi64(_mm256_packus_epi32(lo, hi), 0xD8));
    memcpy(dst + i, h, (size_t)(n - i) * 2);
  }
}

void kiln_avx2_bf16_to_f32(const uint16_t* src, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i*)(src + i)));
    _mm256_storeu_ps(dst + i, _mm256_castsi256_ps(_mm256_slli_epi32(w, 16)));
  }
  for (; i < n; i++) {
    uint32_t u = (uint32_t)src[i] << 16;
    memcpy(dst + i, &u, 4);
  }
}

/* ---- reductions ---- */
double kiln_avx2_sum_f32(const float* x, int64_t n) {
  /* Blocks of 64 are summed in f32 (8 terms per lane, two chains), then folded into double
   * accumulators: the f32 rounding only touches partial sums of 8 values, so the result is
   * within a few f32 ulps of the exact sum at any length, at the speed of a plain f32 sum. */
  __m256d d0 = _mm256_setzero_pd(), d1 = d0;
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    const float* p = x + i;
    __m256 a = _mm256_add_ps(_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8));
    __m256 b = _mm256_add_ps(_mm256_loadu_ps(p + 16), _mm256_loadu_ps(p + 24));
    a = _mm256_add_ps(a, _mm256_add_ps(_mm256_loadu_ps(p + 32), _mm256_loadu_ps(p + 40)));
    b = _mm256_add_ps(b, _mm256_add_ps(_mm256_loadu_ps(p + 48), _mm256_loadu_ps(p + 56)));
    a = _mm256_add_ps(a, b);
    d0 = _mm256_add_pd(d0, _mm256_cvtps_pd(_mm256_castps256_ps128(a)));
    d1 = _mm256_add_pd(d1, _mm256_cvtps_pd(_mm256_extractf128_ps(a, 1)));
  }
  double t[4];
  _mm256_storeu_pd(t, _mm256_add_pd(d0, d1));
  double r = (t[0] + t[1]) + (t[2] + t[3]);
  for (; i < n; i++) r += (double)x[i];
  return r;
}

void kiln_avx2_acc_rows_f32(const float* x, int64_t ld, int64_t rows, double* acc, int64_t w) {
  int64_t j = 0;
  for (; j + 16 <= w; j += 16) {
    __m256d a0 = _mm256_loadu_pd(acc + j), a1 = _mm256_loadu_pd(acc + j + 4);
    __m256d a2 = _mm256_loadu_pd(acc + j + 8), a3 = _mm256_loadu_pd(acc + j + 12);
    const float* p = x + j;
    for (int64_t r = 0; r < rows; r++, p += ld) {
      a0 = _mm256_add_pd(a0, _mm256_cvtps_pd(_mm_loadu_ps(p)));
      a1 = _mm256_add_pd(a1, _mm256_cvtps_pd(_mm_loadu_ps(p + 4)));
      a2 = _mm256_add_pd(a2, _mm256_cvtps_pd(_mm_loadu_ps(p + 8)));
      a3 = _mm256_add_pd(a3, _mm256_cvtps_pd(_mm_loadu_ps(p + 12)));
    }
    _mm256_storeu_pd(acc + j, a0);
    _mm256_storeu_pd(acc + j + 4, a1);
    _mm256_storeu_pd(acc + j + 8, a2);
    _mm256_storeu_pd(acc + j + 12, a3);
  }
  for (; j + 4 <= w; j += 4) {
    __m256d a = _mm256_loadu_pd(acc + j);
    const float* p = x + j;
    for (int64_t r = 0; r < rows; r++, p += ld) a = _mm256_add_pd(a, _mm256_cvtps_pd(_mm_loadu_ps(p)));
    _mm256_storeu_pd(acc + j, a);
  }
  for (; j < w; j++) {
    double a = acc[j];
    const float* p = x + j;
    for (int64_t r = 0; r < rows; r++, p += ld) a += (double)*p;
    acc[j] = a;
  }
}

/* 32-bit lanes are moved as floats (bit patterns pass through shuffles and masked stores). */
void kiln_avx2_gather2_32(const void* src_, void* dst_, int64_t n) {
  const float* src = src_;
  float* dst = dst_;
  int64_t i = 0;
  for (; i + 8 < n; i += 8) { /* i + 8 < n: the 16-lane read ends before src[2*(n-1)] */
    const __m256 lo = _mm256_loadu_ps(src + 2 * i), hi = _mm256_loadu_ps(src + 2 * i + 8);
    const __m256 ev = _mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0)); /* l0 l2 h0 h2 | l4 l6 h4 h6 */
    _mm256_storeu_ps(dst + i, _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(ev), 0xD8)));
  }
  if (i < n) { /* the last 1..8: masked reads up to src[2*(n-1)] (short rows are common: RoPE's
                * 16 pairs of a head) */
    const int64_t last = 2 * (n - i) - 1; /* source lanes needed from src + 2*i */
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256i mlo = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(last < 8 ? last : 8)), lane);
    const __m256i mhi = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(last > 8 ? last - 8 : 0)), lane);
    const __m256 lo = _mm256_maskload_ps(src + 2 * i, mlo), hi = _mm256_maskload_ps(src + 2 * i + 8, mhi);
    const __m256 ev = _mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0));
    const __m256i mout = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(n - i)), lane);
    _mm256_maskstore_ps(dst + i, mout, _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(ev), 0xD8)));
  }
}

void kiln_avx2_deinterleave2_32(const void* src_, int64_t ld, void* even_, void* odd_, int64_t n,
                                int64_t rows) {
  for (int64_t r = 0; r < rows; r++) {
    const float* src = (const float*)src_ + r * ld;
    float* even = (float*)even_ + r * n;
    float* odd = (float*)odd_ + r * n;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
      const __m256 lo = _mm256_loadu_ps(src + 2 * i), hi = _mm256_loadu_ps(src + 2 * i + 8);
      const __m256 ev = _mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0)); /* l0 l2 h0 h2 | l4 l6 h4 h6 */
      const __m256 od = _mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(3, 1, 3, 1));
      _mm256_storeu_ps(even + i, _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(ev), 0xD8)));
      _mm256_storeu_ps(odd + i, _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(od), 0xD8)));
    }
    for (; i < n; i++) {
      even[i] = src[2 * i];
      odd[i] = src[2 * i + 1];
    }
  }
}

void kiln_avx2_interleave2_32(const void* even_, const void* odd_, void* dst_, int64_t ld, int64_t n,
                              int64_t rows) {
  for (int64_t r = 0; r < rows; r++) {
    const float* even = (const float*)even_ + r * n;
    const float* odd = (const float*)odd_ + r * n;
    float* dst = (float*)dst_ + r * ld;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
      const __m256 e = _mm256_loadu_ps(even + i), o = _mm256_loadu_ps(odd + i);
      const __m256 a = _mm256_unpacklo_ps(e, o), b = _mm256_unpackhi_ps(e, o); /* e0 o0 e1 o1 | e4 o4 .. */
      _mm256_storeu_ps(dst + 2 * i, _mm256_permute2f128_ps(a, b, 0x20));
      _mm256_storeu_ps(dst + 2 * i + 8, _mm256_permute2f128_ps(a, b, 0x31));
    }
    for (; i < n; i++) {
      dst[2 * i] = even[i];
      dst[2 * i + 1] = odd[i];
    }
  }
}

void kiln_avx2_scatter2_32(const void* src_, void* dst_, int64_t n) {
  const float* src = src_;
  float* dst = dst_;
  const __m256i even = _mm256_setr_epi32(-1, 0, -1, 0, -1, 0, -1, 0);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(src + i);
    const __m256 a = _mm256_unpacklo_ps(v, v), b = _mm256_unpackhi_ps(v, v); /* v0 v0 v1 v1 | v4 .. */
    _mm256_maskstore_ps(dst + 2 * i, even, _mm256_permute2f128_ps(a, b, 0x20));
    _mm256_maskstore_ps(dst + 2 * i + 8, even, _mm256_permute2f128_ps(a, b, 0x31));
  }
  for (; i < n; i++) memcpy(dst + 2 * i, src + i, 4);
}
