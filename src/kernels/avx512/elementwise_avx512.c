/* SPDX-License-Identifier: Apache-2.0 */
/* elementwise_avx512.c - AVX-512F versions of the hot f32 elementwise kernels (activations with
 * exp, arithmetic, the pointwise backward helpers). Compiled with -mavx512f -mfma; the unary /
 * binary descriptors pick them over the AVX2 ones when kiln_cpu_has_avx512() (only F, no DQ:
 * bit operations go through the integer unit).
 *
 * Every lane does exactly the arithmetic of the AVX2 kernel of the same op (elementwise_avx2.c):
 * the same operations in the same order, comparisons as masks instead of vectors, so results
 * are bit-identical on both ISAs (test_elementwise compares them). Tails use masked loads and
 * stores; masked-off lanes compute on zeros and are never stored. */
#include <immintrin.h>
#include <string.h>

#include "kernels/ew_internal.h"
#include "kernels/ew_math.h"
#include "kernels/exp_consts.h"

#define V16(c) _mm512_set1_ps((float)(c))

static inline __m512 and_ps(__m512 a, __m512 b) {
  return _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(a), _mm512_castps_si512(b)));
}
static inline __m512 or_ps(__m512 a, __m512 b) {
  return _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(a), _mm512_castps_si512(b)));
}
static inline __m512 xor_ps(__m512 a, __m512 b) {
  return _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(a), _mm512_castps_si512(b)));
}
/* ~a & b */
static inline __m512 andnot_ps(__m512 a, __m512 b) {
  return _mm512_castsi512_ps(_mm512_andnot_si512(_mm512_castps_si512(a), _mm512_castps_si512(b)));
}

/* exp256 of elementwise_avx2.c in 16 lanes. */
static inline __m512 exp512(__m512 x) {
  const __mmask16 isnan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
  const __mmask16 tiny = _mm512_cmp_ps_mask(x, V16(-105.0f), _CMP_LE_OQ);
  __m512 xc = _mm512_min_ps(_mm512_max_ps(_mm512_maskz_mov_ps((__mmask16)~tiny, x), V16(-105.0f)),
                            V16(88.8f));
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
  const __m512 y = _mm512_maskz_mov_ps((__mmask16)~tiny, _mm512_scalef_ps(p, n));
  return _mm512_mask_blend_ps(isnan, y, x);
}

/* tanh256 in 16 lanes. */
static inline __m512 tanh512(__m512 x) {
  const __m512 sign = and_ps(x, V16(-0.0f));
  const __m512 ax = andnot_ps(V16(-0.0f), x);
  __m512 z = _mm512_mul_ps(x, x);
  __m512 p = V16(-5.70498872745E-3f);
  p = _mm512_fmadd_ps(p, z, V16(2.06390887954E-2f));
  p = _mm512_fmadd_ps(p, z, V16(-5.37397155531E-2f));
  p = _mm512_fmadd_ps(p, z, V16(1.33314422036E-1f));
  p = _mm512_fmadd_ps(p, z, V16(-3.33332819422E-1f));
  __m512 small = _mm512_fmadd_ps(_mm512_mul_ps(p, z), x, x);
  __m512 e = exp512(_mm512_add_ps(ax, ax));
  __m512 big = _mm512_sub_ps(V16(1.0f), _mm512_div_ps(V16(2.0f), _mm512_add_ps(e, V16(1.0f))));
  big = or_ps(big, sign);
  return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(ax, V16(0.625f), _CMP_LT_OQ), big, small);
}

static inline __m512 sigmoid512(__m512 x) {
  return _mm512_div_ps(V16(1.0f), _mm512_add_ps(V16(1.0f), exp512(_mm512_sub_ps(V16(0.0f), x))));
}

static inline __m512 gelu_tanh512(__m512 x) {
  __m512 x3 = _mm512_mul_ps(_mm512_mul_ps(x, x), x);
  __m512 u = _mm512_mul_ps(V16(0.7978845608028654f), _mm512_fmadd_ps(V16(0.044715f), x3, x));
  __m512 e = exp512(_mm512_mul_ps(V16(-2.0f), u));
  return _mm512_div_ps(x, _mm512_add_ps(V16(1.0f), e));
}

static inline __mmask16 tail16(int64_t r) { return (__mmask16)((1u << r) - 1u); }

#define KHEAD(NAME) \
  static int NAME(int64_t n, void* out_, const void* const* in, const kiln_ew_args_t* g)

/* Unary kernel over 16 lanes; EXPR uses `x`. */
#define DEF_U(NAME, EXPR)                                     \
  KHEAD(NAME) {                                               \
    (void)g;                                                  \
    const float* a = in[0];                                   \
    float* o = out_;                                          \
    int64_t i = 0;                                            \
    for (; i + 32 <= n; i += 32) { /* two independent chains */ \
      __m512 r0, r1;                                          \
      {                                                       \
        __m512 x = _mm512_loadu_ps(a + i);                    \
        r0 = (EXPR);                                          \
      }                                                       \
      {                                                       \
        __m512 x = _mm512_loadu_ps(a + i + 16);               \
        r1 = (EXPR);                                          \
      }                                                       \
      _mm512_storeu_ps(o + i, r0);                            \
      _mm512_storeu_ps(o + i + 16, r1);                       \
    }                                                         \
    for (; i + 16 <= n; i += 16) {                            \
      __m512 x = _mm512_loadu_ps(a + i);                      \
      _mm512_storeu_ps(o + i, (EXPR));                        \
    }                                                         \
    if (i < n) {                                              \
      const __mmask16 m = tail16(n - i);                      \
      __m512 x = _mm512_maskz_loadu_ps(m, a + i);             \
      _mm512_mask_storeu_ps(o + i, m, (EXPR));                \
    }                                                         \
    return 0;                                                 \
  }

/* Binary kernel over 16 lanes; EXPR uses `x`, `y` and `al` (alpha broadcast). */
#define DEF_B(NAME, EXPR)                                     \
  KHEAD(NAME) {                                               \
    const __m512 al = V16(g->alpha);                          \
    (void)al;                                                 \
    const float* a = in[0];                                   \
    const float* b = in[1];                                   \
    float* o = out_;                                          \
    int64_t i = 0;                                            \
    for (; i + 16 <= n; i += 16) {                            \
      __m512 x = _mm512_loadu_ps(a + i);                      \
      __m512 y = _mm512_loadu_ps(b + i);                      \
      _mm512_storeu_ps(o + i, (EXPR));                        \
    }                                                         \
    if (i < n) {                                              \
      const __mmask16 m = tail16(n - i);                      \
      __m512 x = _mm512_maskz_loadu_ps(m, a + i);             \
      __m512 y = _mm512_maskz_loadu_ps(m, b + i);             \
      _mm512_mask_storeu_ps(o + i, m, (EXPR));                \
    }                                                         \
    return 0;                                                 \
  }

DEF_U(u_neg, xor_ps(x, V16(-0.0f)))
DEF_U(u_abs, andnot_ps(V16(-0.0f), x))
DEF_U(u_relu, _mm512_max_ps(V16(0.0f), x))
DEF_U(u_square, _mm512_mul_ps(x, x))
DEF_U(u_sqrt, _mm512_sqrt_ps(x))
DEF_U(u_exp, exp512(x))
DEF_U(u_tanh, tanh512(x))
DEF_U(u_sigmoid, sigmoid512(x))
DEF_U(u_silu, _mm512_div_ps(x, _mm512_add_ps(V16(1.0f), exp512(_mm512_sub_ps(V16(0.0f), x)))))
DEF_U(u_gelu_tanh, gelu_tanh512(x))
DEF_U(u_cube, _mm512_mul_ps(_mm512_mul_ps(x, x), x))
DEF_U(u_rsqrt_exact, _mm512_div_ps(V16(1.0f), _mm512_sqrt_ps(x)))
DEF_U(u_recip, _mm512_div_ps(V16(1.0f), x))
DEF_U(u_recip_square, _mm512_div_ps(V16(1.0f), _mm512_mul_ps(x, x)))

/* pow(x, e) for a scalar e: the exponents of the AVX2 kernel, the rest per element. */
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

DEF_B(b_add, _mm512_fmadd_ps(y, al, x))
DEF_B(b_sub, _mm512_fnmadd_ps(y, al, x))
DEF_B(b_mul, _mm512_mul_ps(x, y))
DEF_B(b_div, _mm512_div_ps(x, y))
DEF_B(b_max, _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, y, _CMP_UNORD_Q), _mm512_max_ps(x, y),
                                  _mm512_add_ps(x, y)))
DEF_B(b_min, _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, y, _CMP_UNORD_Q), _mm512_min_ps(x, y),
                                  _mm512_add_ps(x, y)))
DEF_B(b_sigmoid_bw, _mm512_mul_ps(_mm512_mul_ps(x, _mm512_sub_ps(V16(1.0f), y)), y))
DEF_B(b_tanh_bw, _mm512_mul_ps(x, _mm512_fnmadd_ps(y, y, V16(1.0f))))
DEF_B(b_threshold_bw, _mm512_mask_blend_ps(_mm512_cmp_ps_mask(y, al, _CMP_LE_OQ), x, V16(0.0f)))

kiln_ew_kernel_t kiln_avx512_unary_f32(kiln_unary_op_t op) {
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
    case KILN_UNARY_GELU_TANH: return u_gelu_tanh;
    case KILN_UNARY_POW_SCALAR: return u_pow_scalar;
    default: return NULL;
  }
}

kiln_ew_kernel_t kiln_avx512_binary_f32(kiln_binary_op_t op) {
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
