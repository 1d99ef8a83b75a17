/* SPDX-License-Identifier: Apache-2.0 */
/* ternary.c - where / lerp / addcmul / addcdiv / clamp(tensor) kernels, kiln_kernel_ternary. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("vect-cost-model=dynamic")
#endif
#include "kernels/ew_internal.h"
#include "kernels/ew_math.h"

#define KERNEL_HEAD(NAME)                                                             \
  static int NAME(int64_t n, void* out_, const void* const* in, const kiln_ew_args_t* g)

/* where: the condition is staged as bool, the values as the internal type. */
#define DEF_WHERE(S, TS)                                                              \
  KERNEL_HEAD(where_##S) {                                                            \
    (void)g;                                                                          \
    const uint8_t* c = in[0];                                                         \
    const TS* a = in[1];                                                              \
    const TS* b = in[2];                                                              \
    TS* o = out_;                                                                     \
    for (int64_t i = 0; i < n; i++) o[i] = c[i] ? a[i] : b[i];                        \
    return 0;                                                                         \
  }
KILN_DTYPES_A(DEF_WHERE)

#define DEF_F3(OP, S, TS, ...)                                                        \
  KERNEL_HEAD(ter_##OP##_##S) {                                                       \
    typedef TS T;                                                                     \
    const T s = (T)g->alpha;                                                          \
    (void)s;                                                                          \
    const T* a = in[0];                                                               \
    const T* b = in[1];                                                               \
    const T* c = in[2];                                                               \
    T* o = out_;                                                                      \
    for (int64_t i = 0; i < n; i++) {                                                 \
      const T x = a[i], y = b[i], z = c[i];                                           \
      o[i] = (T)(__VA_ARGS__);                                                        \
    }                                                                                 \
    return 0;                                                                         \
  }
#define DEF_I3(OP, S, TS, ...)                                                        \
  KERNEL_HEAD(ter_##OP##_##S) {                                                       \
    const double sd = g->alpha;                                                       \
    const int64_t s = (sd >= 9.2e18 || sd <= -9.2e18 || sd != sd) ? 0 : (int64_t)sd;  \
    (void)s;                                                                          \
    const TS* a = in[0];                                                              \
    const TS* b = in[1];                                                              \
    const TS* c = in[2];                                                              \
    TS* o = out_;                                                                     \
    for (int64_t i = 0; i < n; i++) {                                                 \
      const int64_t x = a[i], y = b[i], z = c[i];                                     \
      o[i] = (TS)(__VA_ARGS__);                                                       \
    }                                                                                 \
    return 0;                                                                         \
  }

#define FLOAT_OPS(X)                                                             \
  X(LERP, kiln_lerp(x, y, z))                                                    \
  X(ADDCMUL, x + s * y * z)                                                      \
  X(ADDCDIV, x + s * y / z)                                                      \
  X(CLAMP_TENSOR, (y != y || z != z) ? y + z : kiln_minp(kiln_maxp(x, y), z))
#define INT_OPS(X)                                                                \
  X(ADDCMUL, kiln_iwrap((uint64_t)x + (uint64_t)s * (uint64_t)y * (uint64_t)z))   \
  X(CLAMP_TENSOR, (x < y ? y : x) > z ? z : (x < y ? y : x))

#define DEF_FLOAT(OP, ...) DEF_F3(OP, F32, float, __VA_ARGS__) DEF_F3(OP, F64, double, __VA_ARGS__)
#define DEF_INT(OP, ...)                                                                  \
  DEF_I3(OP, I8, int8_t, __VA_ARGS__) DEF_I3(OP, I16, int16_t, __VA_ARGS__)               \
  DEF_I3(OP, I32, int32_t, __VA_ARGS__) DEF_I3(OP, I64, int64_t, __VA_ARGS__)             \
  DEF_I3(OP, U8, uint8_t, __VA_ARGS__)
FLOAT_OPS(DEF_FLOAT)
INT_OPS(DEF_INT)

#define REG1(OP, S) [KILN_TERNARY_##OP][KILN_DTYPE_##S] = ter_##OP##_##S,
#define REG_FLOAT(OP, ...) REG1(OP, F32) REG1(OP, F64)
#define REG_INT(OP, ...) REG1(OP, I8) REG1(OP, I16) REG1(OP, I32) REG1(OP, I64) REG1(OP, U8)
#define REG_WHERE(S, TS) [KILN_TERNARY_WHERE][KILN_DTYPE_##S] = where_##S,

static const kiln_ew_kernel_t g_ternary[KILN_TERNARY_COUNT][KILN_DTYPE_COUNT] = {
    KILN_DTYPES_A(REG_WHERE) FLOAT_OPS(REG_FLOAT) INT_OPS(REG_INT)};

kiln_ew_kernel_t kiln_ternary_kernel(kiln_ternary_op_t op, kiln_dtype_t type) {
  if ((int)op < 0 || op >= KILN_TERNARY_COUNT || (int)type < 0 || type >= KILN_DTYPE_COUNT)
    return NULL;
  return g_ternary[op][type];
}

static const char* const g_ternary_names[KILN_TERNARY_COUNT] = {"where", "lerp", "addcmul",
                                                                "addcdiv", "clamp"};

kiln_status_t kiln_kernel_ternary(kiln_ternary_op_t op, const kiln_tensor_t* a,
                                  const kiln_tensor_t* b, const kiln_tensor_t* c, double scalar,
                                  kiln_dtype_t compute, kiln_tensor_t* out) {
  if ((int)op < 0 || op >= KILN_TERNARY_COUNT)
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "ternary: invalid op %d", (int)op);
  if ((int)compute < 0 || compute >= KILN_DTYPE_COUNT)
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "ternary %s: invalid compute dtype %d",
                      g_ternary_names[op], (int)compute);
  if (op == KILN_TERNARY_CLAMP_TENSOR && (!b || !c)) { /* one-sided clamp = maximum / minimum */
    if (!b && !c) return kiln_kernel_binary(KILN_BINARY_MAXIMUM, a, a, 1.0, compute, out);
    return kiln_kernel_binary(b ? KILN_BINARY_MAXIMUM : KILN_BINARY_MINIMUM, a, b ? b : c, 1.0,
                              compute, out);
  }
  kiln_ew_desc_t d;
  KILN_RETURN_IF_ERROR(kiln_ternary_desc(op, scalar, compute, &d));
  const kiln_tensor_t* ins[3] = {a, b, c};
  return kiln_ew_run(&d, out, ins, 3);
}

kiln_status_t kiln_ternary_desc(kiln_ternary_op_t op, double scalar, kiln_dtype_t compute,
                                kiln_ew_desc_t* desc) {
  if ((int)op < 0 || op >= KILN_TERNARY_COUNT)
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "ternary: invalid op %d", (int)op);
  if ((int)compute < 0 || compute >= KILN_DTYPE_COUNT)
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "ternary %s: invalid compute dtype %d",
                      g_ternary_names[op], (int)compute);
  /* where only moves values: it runs in the compute dtype itself, f16/bf16 included. */
  const kiln_dtype_t it = op == KILN_TERNARY_WHERE ? compute : kiln_ew_internal(compute);
  kiln_ew_desc_t d = {0};
  d.name = g_ternary_names[op];
  d.compute = compute;
  d.in_type[0] = op == KILN_TERNARY_WHERE ? KILN_DTYPE_BOOL : it;
  d.in_type[1] = d.in_type[2] = it;
  d.out_type = it;
  d.round_out = it != compute;
  d.args.alpha = scalar;
  if (compute == KILN_DTYPE_F16 || compute == KILN_DTYPE_BF16) {
    char tmp[8];
    kiln_store_f64(tmp, compute, scalar);
    d.args.alpha = kiln_load_f64(tmp, compute);
  }
  d.kernel = (it == KILN_DTYPE_F32 && kiln_cpu_has_avx2()) ? kiln_avx2_ternary_f32(op) : NULL;
  if (!d.kernel) d.kernel = g_ternary[op][it];
  if (!d.kernel)
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "ternary %s: not supported for dtype %s",
                      d.name, kiln_dtype_name(compute));
  *desc = d;
  return KILN_OK;
}
