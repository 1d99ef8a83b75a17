/* SPDX-License-Identifier: Apache-2.0 */
/* unary.c - generic (portable C) unary kernels for every internal type, kiln_kernel_unary.
 *
 * Kernels are generated from the op lists below: FLOAT_OPS for f32/f64, INT_OPS for the integer
 * types (math in 64 bits, wrapping), BOOL_OPS for bool. Inside an expression `x` is the element,
 * `T` its type and `P` the prepared parameters. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("vect-cost-model=dynamic")
#endif
#include "kernels/ew_internal.h"
#include "kernels/ew_math.h"
#include "runtime/checked.h"

/* Parameters converted once per call. */
typedef struct {
  double alpha, scale, input_scale, threshold, lo, hi;
  int has_lo, has_hi;
  int64_t ilo, ihi, iexp;
} un_params_t;

static un_params_t prep(const kiln_ew_args_t* g) {
  un_params_t p;
  p.alpha = g->up.alpha;
  p.scale = g->up.scale;
  p.input_scale = g->up.input_scale;
  p.threshold = g->up.threshold;
  p.lo = g->up.min;
  p.hi = g->up.max;
  p.has_lo = g->up.has_min;
  p.has_hi = g->up.has_max;
  /* NaN bounds are rejected for integer clamps (kiln_unary_desc); the 0 below is never used */
  p.ilo = p.has_lo ? kiln_f64_to_i64_sat(p.lo, 0) : 0;
  p.ihi = p.has_hi ? kiln_f64_to_i64_sat(p.hi, 0) : 0;
  p.iexp = p.alpha >= 0 ? kiln_f64_to_i64_sat(p.alpha, 0) : 0;
  return p;
}

#define FLOAT_OPS(X)                                                                        \
  X(NEG, -x)                                                                                \
  X(ABS, fabs(x))                                                                           \
  X(EXP, exp(x))                                                                            \
  X(EXPM1, expm1(x))                                                                        \
  X(LOG, log(x))                                                                            \
  X(LOG1P, log1p(x))                                                                        \
  X(LOG2, log2(x))                                                                          \
  X(LOG10, log10(x))                                                                        \
  X(SQRT, sqrt(x))                                                                          \
  X(RSQRT, (T)1 / sqrt(x))                                                                  \
  X(RECIPROCAL, (T)1 / x)                                                                   \
  X(SIN, sin(x))                                                                            \
  X(COS, cos(x))                                                                            \
  X(TAN, tan(x))                                                                            \
  X(ASIN, asin(x))                                                                          \
  X(ACOS, acos(x))                                                                          \
  X(ATAN, atan(x))                                                                          \
  X(SINH, sinh(x))                                                                          \
  X(COSH, cosh(x))                                                                          \
  X(TANH, tanh(x))                                                                          \
  X(SIGMOID, (T)1 / ((T)1 + exp(-x)))                                                       \
  X(RELU, x < 0 ? (T)0 : x)                                                                 \
  X(GELU, kiln_gelu(x))                                                                     \
  X(GELU_TANH, kiln_gelu_tanh(x))                                                           \
  X(SILU, x / ((T)1 + exp(-x)))                                                             \
  X(MISH, x * tanh(log1p(exp(x))))                                                          \
  X(HARDSIGMOID, kiln_minp(kiln_maxp(x + (T)3, (T)0), (T)6) / (T)6)                         \
  X(HARDSWISH, x * kiln_minp(kiln_maxp(x + (T)3, (T)0), (T)6) / (T)6)                       \
  X(ERF, erf(x))                                                                            \
  X(ERFC, erfc(x))                                                                          \
  X(FLOOR, floor(x))                                                                        \
  X(CEIL, ceil(x))                                                                          \
  X(ROUND, nearbyint(x))                                                                    \
  X(TRUNC, trunc(x))                                                                        \
  X(SIGN, (T)((0 < x) - (x < 0)))                                                           \
  X(SQUARE, x * x)                                                                          \
  X(LEAKY_RELU, x > 0 ? x : x * (T)P.alpha)                                                 \
  X(ELU, x <= 0 ? expm1(x * (T)P.input_scale) * ((T)P.alpha * (T)P.scale) : x * (T)P.scale) \
  X(CLAMP, P.has_hi ? kiln_minp(P.has_lo ? kiln_maxp(x, (T)P.lo) : x, (T)P.hi)             \
                    : P.has_lo ? kiln_maxp(x, (T)P.lo) : x)                                 \
  X(POW_SCALAR, kiln_pow_scalar(x, (T)P.alpha))                                             \
  X(SOFTPLUS, x * (T)P.alpha > (T)P.threshold ? x : log1p(exp(x * (T)P.alpha)) / (T)P.alpha)

#define FLOAT_BOOL_OPS(X) \
  X(LOGICAL_NOT, x == 0)  \
  X(ISNAN, x != x)        \
  X(ISINF, isinf(x))      \
  X(ISFINITE, isfinite(x))

/* Integer ops: x is the element widened to int64_t, the result is truncated to T. */
#define INT_OPS(X)                                                                   \
  X(NEG, kiln_iwrap(0u - (uint64_t)x))                                               \
  X(ABS, x < 0 ? kiln_iwrap(0u - (uint64_t)x) : x)                                   \
  X(RELU, x < 0 ? 0 : x)                                                             \
  X(FLOOR, x)                                                                        \
  X(CEIL, x)                                                                         \
  X(ROUND, x)                                                                        \
  X(TRUNC, x)                                                                        \
  X(SIGN, (0 < x) - (x < 0))                                                         \
  X(SQUARE, kiln_iwrap((uint64_t)x * (uint64_t)x))                                   \
  X(BITWISE_NOT, ~x)                                                                 \
  X(CLAMP, P.has_hi ? ((P.has_lo && x < P.ilo ? P.ilo : x) > P.ihi ? P.ihi            \
                                                                   : (P.has_lo && x < P.ilo ? P.ilo : x)) \
                    : (P.has_lo && x < P.ilo ? P.ilo : x))                           \
  X(POW_SCALAR, kiln_ipow(x, P.iexp))

#define INT_BOOL_OPS(X)   \
  X(LOGICAL_NOT, x == 0)  \
  X(ISNAN, 0)             \
  X(ISINF, 0)             \
  X(ISFINITE, 1)

#define BOOL_OPS(X)       \
  X(LOGICAL_NOT, !x)      \
  X(BITWISE_NOT, !x)      \
  X(SIGN, x)              \
  X(ISNAN, 0)             \
  X(ISINF, 0)             \
  X(ISFINITE, 1)

#define KERNEL_HEAD(NAME)                                                             \
  static int NAME(int64_t n, void* out_, const void* const* in, const kiln_ew_args_t* g)

#define DEF_FLOAT(OP, ...)                                                            \
  KERNEL_HEAD(un_##OP##_F32) {                                                        \
    typedef float T;                                                                  \
    const un_params_t P = prep(g);                                                    \
    (void)P;                                                                          \
    const T* a = in[0];                                                               \
    T* o = out_;                                                                      \
    for (int64_t i = 0; i < n; i++) {                                                 \
      const T x = a[i];                                                               \
      o[i] = (T)(__VA_ARGS__);                                                        \
    }                                                                                 \
    return 0;                                                                         \
  }                                                                                   \
  KERNEL_HEAD(un_##OP##_F64) {                                                        \
    typedef double T;                                                                 \
    const un_params_t P = prep(g);                                                    \
    (void)P;                                                                          \
    const T* a = in[0];                                                               \
    T* o = out_;                                                                      \
    for (int64_t i = 0; i < n; i++) {                                                 \
      const T x = a[i];                                                               \
      o[i] = (T)(__VA_ARGS__);                                                        \
    }                                                                                 \
    return 0;                                                                         \
  }

#define DEF_FLOAT_BOOL(OP, ...)                                                       \
  KERNEL_HEAD(un_##OP##_F32) {                                                        \
    (void)g;                                                                          \
    const float* a = in[0];                                                           \
    uint8_t* o = out_;                                                                \
    for (int64_t i = 0; i < n; i++) {                                                 \
      const float x = a[i];                                                           \
      o[i] = (uint8_t)(__VA_ARGS__);                                                  \
    }                                                                                 \
    return 0;                                                                         \
  }                                                                                   \
  KERNEL_HEAD(un_##OP##_F64) {                                                        \
    (void)g;                                                                          \
    const double* a = in[0];                                                          \
    uint8_t* o = out_;                                                                \
    for (int64_t i = 0; i < n; i++) {                                                 \
      const double x = a[i];                                                          \
      o[i] = (uint8_t)(__VA_ARGS__);                                                  \
    }                                                                                 \
    return 0;                                                                         \
  }

/* One kernel per integer type S (C type TS), output type TO (TS, or uint8_t for bool ops). */
#define DEF_INT1(OP, S, TS, TO, ...)                                                  \
  KERNEL_HEAD(un_##OP##_##S) {                                                        \
    const un_params_t P = prep(g);                                                    \
    (void)P;                                                                          \
    const TS* a = in[0];                                                              \
    TO* o = out_;                                                                     \
    for (int64_t i = 0; i < n; i++) {                                                 \
      const int64_t x = a[i];                                                         \
      (void)x;                                                                        \
      o[i] = (TO)(__VA_ARGS__);                                                       \
    }                                                                                 \
    return 0;                                                                         \
  }
#define DEF_INT(OP, ...)                                 \
  DEF_INT1(OP, I8, int8_t, int8_t, __VA_ARGS__)          \
  DEF_INT1(OP, I16, int16_t, int16_t, __VA_ARGS__)       \
  DEF_INT1(OP, I32, int32_t, int32_t, __VA_ARGS__)       \
  DEF_INT1(OP, I64, int64_t, int64_t, __VA_ARGS__)       \
  DEF_INT1(OP, U8, uint8_t, uint8_t, __VA_ARGS__)
#define DEF_INT_BOOL(OP, ...)                            \
  DEF_INT1(OP, I8, int8_t, uint8_t, __VA_ARGS__)         \
  DEF_INT1(OP, I16, int16_t, uint8_t, __VA_ARGS__)       \
  DEF_INT1(OP, I32, int32_t, uint8_t, __VA_ARGS__)       \
  DEF_INT1(OP, I64, int64_t, uint8_t, __VA_ARGS__)       \
  DEF_INT1(OP, U8, uint8_t, uint8_t, __VA_ARGS__)
#define DEF_BOOL(OP, ...) DEF_INT1(OP, BOOL, uint8_t, uint8_t, __VA_ARGS__)

FLOAT_OPS(DEF_FLOAT)
FLOAT_BOOL_OPS(DEF_FLOAT_BOOL)
INT_OPS(DEF_INT)
INT_BOOL_OPS(DEF_INT_BOOL)
BOOL_OPS(DEF_BOOL)

#define REG1(OP, S) [KILN_UNARY_##OP][KILN_DTYPE_##S] = un_##OP##_##S,
#define REG_FLOAT(OP, ...) REG1(OP, F32) REG1(OP, F64)
#define REG_INT(OP, ...) REG1(OP, I8) REG1(OP, I16) REG1(OP, I32) REG1(OP, I64) REG1(OP, U8)
#define REG_BOOL(OP, ...) REG1(OP, BOOL)

static const kiln_ew_kernel_t g_unary[KILN_UNARY_COUNT][KILN_DTYPE_COUNT] = {
    FLOAT_OPS(REG_FLOAT) FLOAT_BOOL_OPS(REG_FLOAT) INT_OPS(REG_INT) INT_BOOL_OPS(REG_INT)
        BOOL_OPS(REG_BOOL)};

kiln_ew_kernel_t kiln_unary_kernel(kiln_unary_op_t op, kiln_dtype_t type) {
  if ((int)op < 0 || op >= KILN_UNARY_COUNT || (int)type < 0 || type >= KILN_DTYPE_COUNT)
    return NULL;
  return g_unary[op][type];
}

static const char* const g_unary_names[KILN_UNARY_COUNT] = {
    "neg", "abs", "exp", "expm1", "log", "log1p", "log2", "log10", "sqrt", "rsqrt",
    "reciprocal", "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh",
    "sigmoid", "relu", "gelu", "gelu_tanh", "silu", "mish", "hardsigmoid", "hardswish", "erf",
    "erfc", "floor", "ceil", "round", "trunc", "sign", "square", "logical_not", "bitwise_not",
    "isnan", "isinf", "isfinite", "leaky_relu", "elu", "clamp", "pow_scalar", "softplus"};

static int is_bool_result(kiln_unary_op_t op) {
  return op == KILN_UNARY_LOGICAL_NOT || op == KILN_UNARY_ISNAN || op == KILN_UNARY_ISINF ||
         op == KILN_UNARY_ISFINITE;
}

/* Rounds v through dtype t the way Scalar::to<scalar_t>() does. */
static double round_to(double v, kiln_dtype_t t) {
  if (!kiln_dtype_is_float(t)) return v;
  char tmp[8];
  kiln_store_f64(tmp, t, v);
  return kiln_load_f64(tmp, t);
}

kiln_status_t kiln_unary_desc(kiln_unary_op_t op, const kiln_unary_params_t* p,
                              kiln_dtype_t compute, kiln_ew_desc_t* desc) {
  if ((int)op < 0 || op >= KILN_UNARY_COUNT)
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "unary: invalid op %d", (int)op);
  if ((int)compute < 0 || compute >= KILN_DTYPE_COUNT)
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "unary %s: invalid compute dtype %d",
                      g_unary_names[op], (int)compute);
  const int needs_params = op >= KILN_UNARY_LEAKY_RELU;
  if (needs_params && !p)
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "unary %s: needs kiln_unary_params_t",
                      g_unary_names[op]);
  const kiln_dtype_t it = kiln_ew_internal(compute);
  kiln_ew_desc_t d = {0};
  d.name = g_unary_names[op];
  d.compute = compute;
  d.in_type[0] = it;
  d.out_type = is_bool_result(op) ? KILN_DTYPE_BOOL : it;
  d.round_out = d.out_type == KILN_DTYPE_F32 && it != compute;
  if (needs_params) d.args.up = *p;
  if (op == KILN_UNARY_CLAMP) {
    const int nan_bound = (p->has_min && isnan(p->min)) || (p->has_max && isnan(p->max));
    if (nan_bound && !kiln_dtype_is_float(compute))
      return kiln_error(KILN_ERROR_INVALID_ARGUMENT,
                        "clamp: a NaN bound (min %g, max %g) has no %s value", p->min, p->max,
                        kiln_dtype_name(compute));
    d.args.up.min = round_to(p->min, compute);
    d.args.up.max = round_to(p->max, compute);
  }
  if (op == KILN_UNARY_POW_SCALAR && kiln_dtype_is_float(compute))
    d.args.up.alpha = round_to(p->alpha, compute); /* exp_scalar.to<scalar_t>() */
  if (op == KILN_UNARY_POW_SCALAR && !kiln_dtype_is_float(compute)) {
    if (p->alpha < 0)
      return kiln_error(KILN_ERROR_INVALID_ARGUMENT,
                        "pow: Integers to negative integer powers are not allowed.");
    if (p->alpha != floor(p->alpha))
      return kiln_error(KILN_ERROR_INVALID_ARGUMENT,
                        "pow: non-integral exponent %g needs a floating compute dtype", p->alpha);
  }
  d.args.alpha = d.args.up.alpha;
  d.kernel = (it == KILN_DTYPE_F32 && kiln_cpu_has_avx512()) ? kiln_avx512_unary_f32(op) : NULL;
  if (!d.kernel && it == KILN_DTYPE_F32 && kiln_cpu_has_avx2()) d.kernel = kiln_avx2_unary_f32(op);
  if (!d.kernel) d.kernel = g_unary[op][it];

  if (!d.kernel)
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "unary %s: not supported for dtype %s",
                      d.name, kiln_dtype_name(compute));
  *desc = d;
  return KILN_OK;
}

kiln_status_t kiln_kernel_unary_ex(kiln_unary_op_t op, const kiln_tensor_t* x,
                                   const kiln_unary_params_t* p, kiln_dtype_t compute,
                                   kiln_tensor_t* out) {
  kiln_ew_desc_t d;
  KILN_RETURN_IF_ERROR(kiln_unary_desc(op, p, compute, &d));
  const kiln_tensor_t* ins[1] = {x};
  return kiln_ew_run(&d, out, ins, 1);
}

kiln_status_t kiln_kernel_unary(kiln_unary_op_t op, const kiln_tensor_t* x, kiln_dtype_t compute,
                                kiln_tensor_t* out) {
  return kiln_kernel_unary_ex(op, x, NULL, compute, out);
}
