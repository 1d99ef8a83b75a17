/* SPDX-License-Identifier: Apache-2.0 */
/* ew_math.h - scalar math shared by the generic pointwise and reduction kernels: PyTorch's
 * formulas for the float ops (type-generic over float/double via <tgmath.h> and _Generic) and
 * overflow-safe 64-bit integer helpers. Internal to libkiln. */
#ifndef KILN_KERNELS_EW_MATH_H
#define KILN_KERNELS_EW_MATH_H

#include <stdint.h>
#include <tgmath.h>

#ifndef M_SQRT1_2
#define M_SQRT1_2 0.70710678118654752440
#endif
#ifndef M_2_SQRTPI
#define M_2_SQRTPI 1.12837916709551257390
#endif
#ifndef M_SQRT2
#define M_SQRT2 1.41421356237309504880
#endif

/* NaN-propagating max/min with maxps/minps semantics for equal operands. */
#define KILN_DEF_FLOAT_HELPERS(T, SUF)                                                   \
  static inline T kiln_maxp_##SUF(T a, T b) { return a != a ? a : b != b ? b : a > b ? a : b; } \
  static inline T kiln_minp_##SUF(T a, T b) { return a != a ? a : b != b ? b : a < b ? a : b; } \
  static inline T kiln_div_floor_##SUF(T a, T b) {                                       \
    if (b == 0) return a / b;                                                            \
    T mod = fmod(a, b);                                                                  \
    T div = (a - mod) / b;                                                               \
    if (mod != 0 && (b < 0) != (mod < 0)) div -= (T)1;                                   \
    T fl;                                                                                \
    if (div != 0) {                                                                      \
      fl = floor(div);                                                                   \
      if (div - fl > (T)0.5) fl += (T)1;                                                 \
    } else {                                                                             \
      fl = copysign((T)0, a / b);                                                        \
    }                                                                                    \
    return fl;                                                                           \
  }                                                                                      \
  static inline T kiln_remainder_##SUF(T a, T b) {                                       \
    T mod = fmod(a, b);                                                                  \
    if (mod != 0 && (b < 0) != (mod < 0)) mod += b;                                      \
    return mod;                                                                          \
  }                                                                                      \
  static inline T kiln_gelu_##SUF(T x) { return (T)0.5 * x * erfc(-x * (T)M_SQRT1_2); }  \
  static inline T kiln_gelu_tanh_##SUF(T x) {                                            \
    const T beta = (T)(M_SQRT2 * M_2_SQRTPI * 0.5), kappa = (T)0.044715;                 \
    T inner = beta * (x + kappa * (x * x * x));                                          \
    /* = x/2 (1 + tanh(inner)), without the cancellation for x << 0 */                   \
    return x / ((T)1 + exp((T)-2 * inner));                                              \
  }                                                                                      \
  static inline T kiln_gelu_bw_##SUF(T dy, T x) {                                        \
    const T beta = (T)(M_2_SQRTPI * M_SQRT1_2 * 0.5);                                    \
    T cdf = (T)0.5 * erfc(-x * (T)M_SQRT1_2);                                            \
    T pdf = beta * exp(x * x * (T)-0.5);                                                 \
    return dy * (cdf + x * pdf);                                                         \
  }                                                                                      \
  /* d/dx of x/2 (1 + tanh u) written with s = sigmoid(2u): s + 2 x s (1 - s) u', which has no \
   * cancellation in the tails (torch's 1 + tanh and 1 - tanh^2 lose digits there). */     \
  static inline T kiln_gelu_tanh_bw_##SUF(T dy, T x) {                                   \
    const T beta = (T)(M_SQRT2 * M_2_SQRTPI * 0.5), kappa = (T)0.044715;                 \
    T x_sq = x * x;                                                                      \
    T u = beta * (x + kappa * x_sq * x);                                                 \
    T s = (T)1 / ((T)1 + exp((T)-2 * u)), oms = (T)1 / ((T)1 + exp((T)2 * u));           \
    T inner_d = beta * ((T)1 + (T)3 * kappa * x_sq);                                     \
    return dy * (s + (T)2 * x * s * oms * inner_d);                                      \
  }                                                                                      \
  static inline T kiln_silu_bw_##SUF(T dy, T x) {                                        \
    T s = (T)1 / ((T)1 + exp(-x));                                                       \
    return dy * s * ((T)1 + x * ((T)1 - s));                                             \
  }                                                                                      \
  static inline T kiln_lerp_##SUF(T a, T b, T w) {                                       \
    return fabs(w) < (T)0.5 ? a + w * (b - a) : b - (b - a) * ((T)1 - w);                \
  }                                                                                      \
  static inline T kiln_pow_scalar_##SUF(T x, T e) {                                      \
    if (e == (T)1) return x; /* aten: exponent 1 copies, exponent 0 fills 1 */           \
    if (e == (T)0) return (T)1;                                                          \
    if (e == (T)2) return x * x;                                                         \
    if (e == (T)3) return x * x * x;                                                     \
    if (e == (T)0.5) return sqrt(x);                                                     \
    if (e == (T)-0.5) return (T)1 / sqrt(x);                                             \
    if (e == (T)-1) return (T)1 / x;                                                     \
    if (e == (T)-2) return (T)1 / (x * x);                                               \
    return pow(x, e);                                                                    \
  }
KILN_DEF_FLOAT_HELPERS(float, f)
KILN_DEF_FLOAT_HELPERS(double, d)

#define KILN_FGEN(name, x) _Generic((x), float: kiln_##name##_f, double: kiln_##name##_d)
#define kiln_maxp(a, b) KILN_FGEN(maxp, a)(a, b)
#define kiln_minp(a, b) KILN_FGEN(minp, a)(a, b)
#define kiln_div_floor(a, b) KILN_FGEN(div_floor, a)(a, b)
#define kiln_remainder(a, b) KILN_FGEN(remainder, a)(a, b)
#define kiln_gelu(x) KILN_FGEN(gelu, x)(x)
#define kiln_gelu_tanh(x) KILN_FGEN(gelu_tanh, x)(x)
#define kiln_gelu_bw(dy, x) KILN_FGEN(gelu_bw, x)(dy, x)
#define kiln_gelu_tanh_bw(dy, x) KILN_FGEN(gelu_tanh_bw, x)(dy, x)
#define kiln_silu_bw(dy, x) KILN_FGEN(silu_bw, x)(dy, x)
#define kiln_lerp(a, b, w) KILN_FGEN(lerp, a)(a, b, w)
#define kiln_pow_scalar(x, e) KILN_FGEN(pow_scalar, x)(x, e)

/* ---- 64-bit integer helpers: wrap instead of overflowing; *err set on division by zero ---- */
static inline int64_t kiln_iwrap(uint64_t v) {
  int64_t r;
  __builtin_memcpy(&r, &v, 8);
  return r;
}
static inline int64_t kiln_idiv_trunc(int64_t a, int64_t b, int* err) {
  if (b == 0) { *err = 1; return 0; }
  if (b == -1) return kiln_iwrap(0u - (uint64_t)a);
  return a / b;
}
static inline int64_t kiln_idiv_floor(int64_t a, int64_t b, int* err) {
  if (b == 0) { *err = 1; return 0; }
  if (b == -1) return kiln_iwrap(0u - (uint64_t)a);
  int64_t q = a / b, r = a % b;
  return (r != 0 && ((r < 0) != (b < 0))) ? q - 1 : q;
}
static inline int64_t kiln_iremainder(int64_t a, int64_t b, int* err) {
  if (b == 0) { *err = 1; return 0; }
  if (b == -1) return 0;
  int64_t r = a % b;
  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}
static inline int64_t kiln_ifmod(int64_t a, int64_t b, int* err) {
  if (b == 0) { *err = 1; return 0; }
  if (b == -1) return 0;
  return a % b;
}
/* a ** b with wraparound; negative exponents as torch (1, +-1 for a = -1, else 0). */
static inline int64_t kiln_ipow(int64_t a, int64_t b) {
  if (b < 0) {
    if (a == 1) return 1;
    if (a == -1) return (b & 1) ? -1 : 1;
    return 0;
  }
  uint64_t r = 1, base = (uint64_t)a;
  uint64_t e = (uint64_t)b;
  while (e) {
    if (e & 1u) r *= base;
    base *= base;
    e >>= 1;
  }
  return kiln_iwrap(r);
}

#endif /* KILN_KERNELS_EW_MATH_H */
