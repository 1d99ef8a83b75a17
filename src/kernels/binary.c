/* SPDX-License-Identifier: Apache-2.0 */
/* binary.c - generic (portable C) binary kernels for every internal type, kiln_kernel_binary.
 *
 * Generated from the op lists below; in an expression `x` and `y` are the operands, `T` the type,
 * `al` alpha converted to T (floats) or int64 (integers). Integer math is done in 64 bits and
 * truncated, which gives wraparound for every narrower type; division helpers set `err`. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("vect-cost-model=dynamic")
#endif
#include "kernels/ew_internal.h"
#include "kernels/ew_math.h"
#include "kernels/half.h"
#include "runtime/checked.h"

#define FLOAT_OPS(X)                                    \
  X(ADD, x + al * y)                                    \
  X(SUB, x - al * y)                                    \
  X(MUL, x * y)                                         \
  X(DIV, x / y)                                         \
  X(DIV_TRUNC, trunc(x / y))                            \
  X(DIV_FLOOR, kiln_div_floor(x, y))                    \
  X(REMAINDER, kiln_remainder(x, y))                    \
  X(FMOD, fmod(x, y))                                   \
  X(POW, pow(x, y))                                     \
  X(MAXIMUM, kiln_maxp(x, y))                           \
  X(MINIMUM, kiln_minp(x, y))                           \
  X(ATAN2, atan2(x, y))                                 \
  X(SIGMOID_BACKWARD, x * ((T)1 - y) * y)               \
  X(TANH_BACKWARD, x * ((T)1 - y * y))                  \
  X(GELU_BACKWARD, kiln_gelu_bw(x, y))                  \
  X(GELU_TANH_BACKWARD, kiln_gelu_tanh_bw(x, y))        \
  X(SILU_BACKWARD, kiln_silu_bw(x, y))                  \
  X(THRESHOLD_BACKWARD, y <= al ? (T)0 : x)             \
  X(LEAKY_RELU_BACKWARD, y > 0 ? x : x * al)

#define CMP_OPS(X)                            \
  X(EQ, x == y)                               \
  X(NE, x != y)                               \
  X(LT, x < y)                                \
  X(LE, x <= y)                               \
  X(GT, x > y)                                \
  X(GE, x >= y)                               \
  X(LOGICAL_AND, (x != 0) && (y != 0))        \
  X(LOGICAL_OR, (x != 0) || (y != 0))         \
  X(LOGICAL_XOR, (x != 0) != (y != 0))

#define INT_OPS(X)                                                           \
  X(ADD, kiln_iwrap((uint64_t)x + (uint64_t)al * (uint64_t)y))               \
  X(SUB, kiln_iwrap((uint64_t)x - (uint64_t)al * (uint64_t)y))               \
  X(MUL, kiln_iwrap((uint64_t)x * (uint64_t)y))                              \
  X(DIV_TRUNC, kiln_idiv_trunc(x, y, &err))                                  \
  X(DIV_FLOOR, kiln_idiv_floor(x, y, &err))                                  \
  X(REMAINDER, kiln_iremainder(x, y, &err))                                  \
  X(FMOD, kiln_ifmod(x, y, &err))                                            \
  X(POW, kiln_ipow(x, y))                                                    \
  X(MAXIMUM, x > y ? x : y)                                                  \
  X(MINIMUM, x < y ? x : y)                                                  \
  X(BITWISE_AND, x & y)                                                      \
  X(BITWISE_OR, x | y)                                                       \
  X(BITWISE_XOR, x ^ y)                                                      \
  X(THRESHOLD_BACKWARD, y <= al ? 0 : x)

#define BOOL_OPS(X)                 \
  X(ADD, x | (al != 0 && y))        \
  X(MUL, x & y)                     \
  X(MAXIMUM, x | y)                 \
  X(MINIMUM, x & y)                 \
  X(BITWISE_AND, x & y)             \
  X(BITWISE_OR, x | y)              \
  X(BITWISE_XOR, x ^ y)

#define KERNEL_HEAD(NAME)                                                             \
  static int NAME(int64_t n, void* out_, const void* const* in, const kiln_ew_args_t* g)

/* Float kernel: operands TS, result TO (TS or uint8_t for comparisons). */
#define DEF_F1(OP, S, TS, TO, ...)                                                    \
  KERNEL_HEAD(bin_##OP##_##S) {                                                       \
    typedef TS T;                                                                     \
    const T al = (T)g->alpha;                                                         \
    (void)al;                                                                         \
    const T* a = in[0];                                                               \
    const T* b = in[1];                                                               \
    TO* o = out_;                                                                     \
    for (int64_t i = 0; i < n; i++) {                                                 \
      const T x = a[i], y = b[i];                                                     \
      o[i] = (TO)(__VA_ARGS__);                                                       \
    }                                                                                 \
    return 0;                                                                         \
  }
/* Integer kernel: operands widened to int64_t. */
#define DEF_I1(OP, S, TS, TO, ...)                                                    \
  KERNEL_HEAD(bin_##OP##_##S) {                                                       \
    const double ad = g->alpha;                                                       \
    const int64_t al = kiln_f64_to_i64_sat(ad, 0); /* finite: kiln_binary_desc */  \
    (void)al;                                                                         \
    int err = 0;                                                                      \
    const TS* a = in[0];                                                              \
    const TS* b = in[1];                                                              \
    TO* o = out_;                                                                     \
    for (int64_t i = 0; i < n; i++) {                                                 \
      const int64_t x = a[i], y = b[i];                                               \
      o[i] = (TO)(__VA_ARGS__);                                                       \
    }                                                                                 \
    return err;                                                                       \
  }
#define DEF_FLOAT(OP, ...)                           \
  DEF_F1(OP, F32, float, float, __VA_ARGS__)         \
  DEF_F1(OP, F64, double, double, __VA_ARGS__)
#define DEF_CMP(OP, ...)                             \
  DEF_F1(OP, F32, float, uint8_t, __VA_ARGS__)       \
  DEF_F1(OP, F64, double, uint8_t, __VA_ARGS__)      \
  DEF_I1(OP, I8, int8_t, uint8_t, __VA_ARGS__)       \
  DEF_I1(OP, I16, int16_t, uint8_t, __VA_ARGS__)     \
  DEF_I1(OP, I32, int32_t, uint8_t, __VA_ARGS__)     \
  DEF_I1(OP, I64, int64_t, uint8_t, __VA_ARGS__)     \
  DEF_I1(OP, U8, uint8_t, uint8_t, __VA_ARGS__)      \
  DEF_I1(OP, BOOL, uint8_t, uint8_t, __VA_ARGS__)
#define DEF_INT(OP, ...)                             \
  DEF_I1(OP, I8, int8_t, int8_t, __VA_ARGS__)        \
  DEF_I1(OP, I16, int16_t, int16_t, __VA_ARGS__)     \
  DEF_I1(OP, I32, int32_t, int32_t, __VA_ARGS__)     \
  DEF_I1(OP, I64, int64_t, int64_t, __VA_ARGS__)     \
  DEF_I1(OP, U8, uint8_t, uint8_t, __VA_ARGS__)
#define DEF_BOOL(OP, ...) DEF_I1(OP, BOOL, uint8_t, uint8_t, __VA_ARGS__)

FLOAT_OPS(DEF_FLOAT)
CMP_OPS(DEF_CMP)
INT_OPS(DEF_INT)
BOOL_OPS(DEF_BOOL)

#define REG1(OP, S) [KILN_BINARY_##OP][KILN_DTYPE_##S] = bin_##OP##_##S,
#define REG_FLOAT(OP, ...) REG1(OP, F32) REG1(OP, F64)
#define REG_INT(OP, ...) REG1(OP, I8) REG1(OP, I16) REG1(OP, I32) REG1(OP, I64) REG1(OP, U8)
#define REG_CMP(OP, ...) REG_FLOAT(OP) REG_INT(OP) REG1(OP, BOOL)
#define REG_BOOL(OP, ...) REG1(OP, BOOL)

static const kiln_ew_kernel_t g_binary[KILN_BINARY_COUNT][KILN_DTYPE_COUNT] = {
    FLOAT_OPS(REG_FLOAT) CMP_OPS(REG_CMP) INT_OPS(REG_INT) BOOL_OPS(REG_BOOL)};

kiln_ew_kernel_t kiln_binary_kernel(kiln_binary_op_t op, kiln_dtype_t type) {
  if ((int)op < 0 || op >= KILN_BINARY_COUNT || (int)type < 0 || type >= KILN_DTYPE_COUNT)
    return NULL;
  return g_binary[op][type];
}

/* f16/bf16 compute: torch runs div_trunc / div_floor with Vectorized<Half> arithmetic, which
 * rounds after every operation; these kernels reproduce that (integer results would otherwise
 * differ by one). */
static inline float rh(float v, kiln_dtype_t h) {
  return h == KILN_DTYPE_F16 ? kiln_f16_to_f32(kiln_f32_to_f16(v))
                             : kiln_bf16_to_f32(kiln_f32_to_bf16(v));
}

static int bin_div_trunc_half(int64_t n, void* out_, const void* const* in,
                              const kiln_ew_args_t* g) {
  const float* a = in[0];
  const float* b = in[1];
  float* o = out_;
  for (int64_t i = 0; i < n; i++) o[i] = truncf(rh(a[i] / b[i], g->half));
  return 0;
}

static int bin_div_floor_half(int64_t n, void* out_, const void* const* in,
                              const kiln_ew_args_t* g) {
  const float* a = in[0];
  const float* b = in[1];
  float* o = out_;
  const kiln_dtype_t h = g->half;
  for (int64_t i = 0; i < n; i++) {
    const float x = a[i], y = b[i];
    const float basic = rh(x / y, h), mod = rh(fmodf(x, y), h);
    float fl = (isinf(basic) && !isinf(x)) ? x : rh(x - mod, h);
    float div = rh(fl / y, h);
    if (mod != 0 && ((y < 0) != (mod < 0))) div = rh(div - 1.0f, h);
    float r = floorf(div);
    if (rh(div - r, h) > 0.5f) r = rh(r + 1.0f, h);
    if (div == 0) r = copysignf(0.0f, basic);
    if (y == 0) r = basic;
    o[i] = r;
  }
  return 0;
}

/* torch evaluates sigmoid_backward for f16 (not bf16) as a * (1 - y) * y in f16 arithmetic. */
static int bin_sigmoid_bw_half(int64_t n, void* out_, const void* const* in,
                               const kiln_ew_args_t* g) {
  const float* a = in[0];
  const float* b = in[1];
  float* o = out_;
  for (int64_t i = 0; i < n; i++) o[i] = rh(a[i] * rh(1.0f - b[i], g->half), g->half) * b[i];
  return 0;
}

static const char* const g_binary_names[KILN_BINARY_COUNT] = {
    "add", "sub", "mul", "div", "div_trunc", "div_floor", "remainder", "fmod", "pow", "maximum",
    "minimum", "atan2", "eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or",
    "logical_xor", "bitwise_and", "bitwise_or", "bitwise_xor", "sigmoid_backward",
    "tanh_backward", "gelu_backward", "gelu_tanh_backward", "silu_backward",
    "threshold_backward", "leaky_relu_backward"};

kiln_status_t kiln_binary_desc(kiln_binary_op_t op, const kiln_tensor_t* b, double alpha,
                               kiln_dtype_t compute, kiln_ew_desc_t* desc) {
  if ((int)op < 0 || op >= KILN_BINARY_COUNT)
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "binary: invalid op %d", (int)op);
  if ((int)compute < 0 || compute >= KILN_DTYPE_COUNT)
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "binary %s: invalid compute dtype %d",
                      g_binary_names[op], (int)compute);
  int64_t ialpha;
  const int int_compute = !kiln_dtype_is_float(compute) && compute != KILN_DTYPE_BOOL;
  if (int_compute && !kiln_f64_to_i64(alpha, &ialpha))
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "binary %s: alpha %g has no %s value",
                      g_binary_names[op], alpha, kiln_dtype_name(compute));
  const kiln_dtype_t it = kiln_ew_internal(compute);
  kiln_ew_desc_t d = {0};
  d.name = g_binary_names[op];
  d.compute = compute;
  d.in_type[0] = d.in_type[1] = it;
  d.out_type = (op >= KILN_BINARY_EQ && op <= KILN_BINARY_LOGICAL_XOR) ? KILN_DTYPE_BOOL : it;
  d.round_out = d.out_type == KILN_DTYPE_F32 && it != compute;
  /* alpha is a Scalar converted to the compute dtype (Scalar::to<scalar_t>). */
  d.args.alpha = alpha;
  if (compute == KILN_DTYPE_F16 || compute == KILN_DTYPE_BF16) {
    char tmp[8];
    kiln_store_f64(tmp, compute, alpha);
    d.args.alpha = kiln_load_f64(tmp, compute);
  }
  d.args.half = it != compute ? compute : KILN_DTYPE_F32;
  /* torch's mul/div take a one-element second operand of another dtype (a Python scalar) to
   * f32 directly, without rounding it to f16/bf16 first. */
  if ((op == KILN_BINARY_MUL || op == KILN_BINARY_DIV) && it != compute && b &&
      b->dtype != compute && b->ndim >= 0 && b->ndim <= KILN_MAX_DIMS && kiln_tensor_numel(b) == 1)
    d.no_round[1] = 1;
  d.kernel = (it == KILN_DTYPE_F32 && kiln_cpu_has_avx512()) ? kiln_avx512_binary_f32(op) : NULL;
  if (!d.kernel && it == KILN_DTYPE_F32 && kiln_cpu_has_avx2()) d.kernel = kiln_avx2_binary_f32(op);
  if (!d.kernel) d.kernel = g_binary[op][it];
  if (it != compute && op == KILN_BINARY_DIV_TRUNC) d.kernel = bin_div_trunc_half;
  if (it != compute && op == KILN_BINARY_DIV_FLOOR) d.kernel = bin_div_floor_half;
  if (compute == KILN_DTYPE_F16 && op == KILN_BINARY_SIGMOID_BACKWARD) d.kernel = bin_sigmoid_bw_half;
  if (!d.kernel)
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "binary %s: not supported for dtype %s",
                      d.name, kiln_dtype_name(compute));
  *desc = d;
  return KILN_OK;
}

kiln_status_t kiln_kernel_binary(kiln_binary_op_t op, const kiln_tensor_t* a,
                                 const kiln_tensor_t* b, double alpha, kiln_dtype_t compute,
                                 kiln_tensor_t* out) {
  kiln_ew_desc_t d;
  KILN_RETURN_IF_ERROR(kiln_binary_desc(op, b, alpha, compute, &d));
  const kiln_tensor_t* ins[2] = {a, b};
  return kiln_ew_run(&d, out, ins, 2);
}
