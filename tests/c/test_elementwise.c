/* SPDX-License-Identifier: Apache-2.0 */
/* test_elementwise.c - unary / binary / ternary kernels vs scalar double references: every op
 * over representative dtypes and layouts (contiguous, threaded size, transposed, sliced with a
 * step, broadcast, rank 0, empty), in-place aliasing, integer wraparound and error paths. Each
 * case runs on the AVX2 kernels and on the generic C kernels.
 * Tolerances (relative): exact ops 0; f32 arithmetic 1 ulp; f32 transcendental 1e-6 (with
 * atol 1e-7 where the result crosses zero); f64 1e-13; f16 1e-3; bf16 8e-3. */
#include "ew_test_util.h"
#include "kernels/ew_internal.h"
#include "kiln/kernels/elementwise.h"

#define NLAYOUT 6
/* Layouts: 0 [1000], 1 [37,41] transposed, 2 [6,17] with a column step of 3, 3 rank 0,
 * 4 [0,3], 5 [70001] (split over threads). */
static void make_layout(ht_t* h, kiln_dtype_t d, int layout) {
  static const int64_t s1[2] = {37, 41}, s2[2] = {6, 17}, st2[2] = {51, 3}, s4[2] = {0, 3};
  static const int64_t s0[1] = {1000}, s5[1] = {70001};
  switch (layout) {
    case 0: ht_make(h, d, 1, s0, NULL); break;
    case 1: ht_make_t(h, d, 2, s1); break;
    case 2: ht_make(h, d, 2, s2, st2); break;
    case 3: ht_make(h, d, 0, NULL, NULL); break;
    case 4: ht_make(h, d, 2, s4, NULL); break;
    default: ht_make(h, d, 1, s5, NULL); break;
  }
}

static double tol_for(kiln_dtype_t d, int exact) {
  switch (d) {
    case KILN_DTYPE_F32: return exact ? 1.2e-7 : 1e-6;
    case KILN_DTYPE_F64: return exact ? 0 : 1e-13;
    case KILN_DTYPE_F16: return 1e-3;
    case KILN_DTYPE_BF16: return 8e-3;
    default: return 0;
  }
}

/* ---------------------------------------------------------------- unary */
static double gelu(double x) { return 0.5 * x * erfc(-x / sqrt(2.0)); }
static double clampd(double x, double lo, double hi) {
  if (isnan(x)) return x;
  return x < lo ? lo : x > hi ? hi : x;
}

static double ref_unary(kiln_unary_op_t op, double x, const kiln_unary_params_t* p, int is_int) {
  switch (op) {
    case KILN_UNARY_NEG: return -x;
    case KILN_UNARY_ABS: return fabs(x);
    case KILN_UNARY_EXP: return exp(x);
    case KILN_UNARY_EXPM1: return expm1(x);
    case KILN_UNARY_LOG: return log(x);
    case KILN_UNARY_LOG1P: return log1p(x);
    case KILN_UNARY_LOG2: return log2(x);
    case KILN_UNARY_LOG10: return log10(x);
    case KILN_UNARY_SQRT: return sqrt(x);
    case KILN_UNARY_RSQRT: return 1 / sqrt(x);
    case KILN_UNARY_RECIPROCAL: return 1 / x;
    case KILN_UNARY_SIN: return sin(x);
    case KILN_UNARY_COS: return cos(x);
    case KILN_UNARY_TAN: return tan(x);
    case KILN_UNARY_ASIN: return asin(x);
    case KILN_UNARY_ACOS: return acos(x);
    case KILN_UNARY_ATAN: return atan(x);
    case KILN_UNARY_SINH: return sinh(x);
    case KILN_UNARY_COSH: return cosh(x);
    case KILN_UNARY_TANH: return tanh(x);
    case KILN_UNARY_SIGMOID: return 1 / (1 + exp(-x));
    case KILN_UNARY_RELU: return x < 0 ? 0 : x;
    case KILN_UNARY_GELU: return gelu(x);
    case KILN_UNARY_GELU_TANH: /* x/2 (1 + tanh u) in its cancellation-free form */
      return x / (1 + exp(-2 * sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
    case KILN_UNARY_SILU: return x / (1 + exp(-x));
    case KILN_UNARY_MISH: return x * tanh(log1p(exp(x)));
    case KILN_UNARY_HARDSIGMOID: return clampd(x / 6 + 0.5, 0, 1);
    case KILN_UNARY_HARDSWISH: return x * clampd(x / 6 + 0.5, 0, 1);
    case KILN_UNARY_ERF: return erf(x);
    case KILN_UNARY_ERFC: return erfc(x);
    case KILN_UNARY_FLOOR: return floor(x);
    case KILN_UNARY_CEIL: return ceil(x);
    case KILN_UNARY_ROUND: return nearbyint(x);
    case KILN_UNARY_TRUNC: return trunc(x);
    case KILN_UNARY_SIGN: return (x > 0) - (x < 0);
    case KILN_UNARY_SQUARE: return x * x;
    case KILN_UNARY_LOGICAL_NOT: return x == 0;
    case KILN_UNARY_BITWISE_NOT: return is_int ? (double)~(int64_t)x : (x == 0);
    case KILN_UNARY_ISNAN: return isnan(x);
    case KILN_UNARY_ISINF: return isinf(x);
    case KILN_UNARY_ISFINITE: return isfinite(x);
    case KILN_UNARY_LEAKY_RELU: return x > 0 ? x : x * p->alpha;
    case KILN_UNARY_ELU: return x > 0 ? p->scale * x : p->scale * p->alpha * expm1(p->input_scale * x);
    case KILN_UNARY_CLAMP: return clampd(x, p->min, p->max);
    case KILN_UNARY_POW_SCALAR: return pow(x, p->alpha);
    case KILN_UNARY_SOFTPLUS:
      return x * p->alpha > p->threshold ? x : log1p(exp(x * p->alpha)) / p->alpha;
    default: return NAN;
  }
}

static int unary_bool(kiln_unary_op_t op) {
  return op == KILN_UNARY_LOGICAL_NOT || op == KILN_UNARY_ISNAN || op == KILN_UNARY_ISINF ||
         op == KILN_UNARY_ISFINITE;
}
static int unary_int_ok(kiln_unary_op_t op) {
  switch (op) {
    case KILN_UNARY_NEG: case KILN_UNARY_ABS: case KILN_UNARY_RELU: case KILN_UNARY_FLOOR:
    case KILN_UNARY_CEIL: case KILN_UNARY_ROUND: case KILN_UNARY_TRUNC: case KILN_UNARY_SIGN:
    case KILN_UNARY_SQUARE: case KILN_UNARY_LOGICAL_NOT: case KILN_UNARY_BITWISE_NOT:
    case KILN_UNARY_ISNAN: case KILN_UNARY_ISINF: case KILN_UNARY_ISFINITE: case KILN_UNARY_CLAMP:
    case KILN_UNARY_POW_SCALAR: return 1;
    default: return 0;
  }
}
static int unary_exact(kiln_unary_op_t op) {
  return op == KILN_UNARY_NEG || op == KILN_UNARY_ABS || op == KILN_UNARY_RELU ||
         (op >= KILN_UNARY_FLOOR && op <= KILN_UNARY_ISFINITE) || op == KILN_UNARY_CLAMP;
}
/* Input range per op (keeps the references in their domain). */
static void unary_domain(kiln_unary_op_t op, double* lo, double* hi) {
  *lo = -6, *hi = 6;
  switch (op) {
    case KILN_UNARY_LOG: case KILN_UNARY_LOG2: case KILN_UNARY_LOG10: case KILN_UNARY_SQRT:
    case KILN_UNARY_RSQRT: *lo = 0.01; break;
    case KILN_UNARY_LOG1P: *lo = -0.9; break;
    case KILN_UNARY_ASIN: case KILN_UNARY_ACOS: *lo = -1, *hi = 1; break;
    case KILN_UNARY_TAN: *lo = -1.4, *hi = 1.4; break;
    case KILN_UNARY_EXP: *lo = -100, *hi = 88; break;
    case KILN_UNARY_TANH: case KILN_UNARY_SIGMOID: case KILN_UNARY_SILU: *lo = -20, *hi = 20; break;
    case KILN_UNARY_POW_SCALAR: *lo = 0.1, *hi = 4; break;
    default: break;
  }
}

static const kiln_dtype_t k_float_dtypes[4] = {KILN_DTYPE_F32, KILN_DTYPE_F64, KILN_DTYPE_F16,
                                               KILN_DTYPE_BF16};
static const kiln_dtype_t k_int_dtypes[4] = {KILN_DTYPE_I32, KILN_DTYPE_I8, KILN_DTYPE_U8,
                                             KILN_DTYPE_I64};

static void run_unary_case(kiln_unary_op_t op, kiln_dtype_t dt, int layout,
                           const kiln_unary_params_t* p) {
  const int is_int = !ht_is_float(dt);
  ht_t x, y;
  make_layout(&x, dt, layout);
  double lo, hi;
  unary_domain(op, &lo, &hi);
  ht_rand(&x, lo, hi);
  kiln_dtype_t od = unary_bool(op) ? KILN_DTYPE_BOOL : dt;
  ht_make(&y, od, x.t.ndim, x.t.shape, NULL);
  KT_OK(kiln_kernel_unary_ex(op, &x.t, p, dt, &y.t));
  double rtol = tol_for(dt, unary_exact(op));
  double atol = (op == KILN_UNARY_SIN || op == KILN_UNARY_TAN || op == KILN_UNARY_EXPM1 ||
                 op == KILN_UNARY_LOG1P || op == KILN_UNARY_ATAN || op == KILN_UNARY_SINH ||
                 op == KILN_UNARY_ERF || op == KILN_UNARY_COS || op == KILN_UNARY_LOG ||
                 op == KILN_UNARY_LOG2 || op == KILN_UNARY_LOG10 || op == KILN_UNARY_ASIN ||
                 op == KILN_UNARY_GELU || op == KILN_UNARY_GELU_TANH || op == KILN_UNARY_SILU ||
                 op == KILN_UNARY_MISH || op == KILN_UNARY_HARDSWISH || op == KILN_UNARY_ELU ||
                 op == KILN_UNARY_ACOS || op == KILN_UNARY_TANH) ? rtol * 0.1
                : dt == KILN_DTYPE_F32 ? 1.2e-38 /* subnormal results */ : 0;
  int64_t idx[KILN_MAX_DIMS] = {0};
  int bad = 0;
  if (ht_numel(&x.t)) do {
    double xv = ht_get(&x.t, idx);
    double want = ref_unary(op, xv, p, is_int && dt != KILN_DTYPE_BOOL);
    if (is_int && !unary_bool(op)) want = (double)ht_wrap(dt, (int64_t)want);
    want = ht_round(od, want);
    double got = ht_get(&y.t, idx);
    if (!ht_close(got, want, rtol, atol) && bad++ < 3)
      HT_CHECK_CLOSE(got, want, rtol, atol, "unary op %d dtype %s layout %d x=%.9g", (int)op,
                     kiln_dtype_name(dt), layout, xv);
  } while (ht_next(idx, x.t.shape, x.t.ndim));
  ht_free(&x);
  ht_free(&y);
}

static void unary_all(void) {
  kiln_unary_params_t none = {0};
  for (int op = 0; op < KILN_UNARY_LEAKY_RELU; op++) {
    if (op == KILN_UNARY_BITWISE_NOT) {
      for (int i = 0; i < 4; i++) run_unary_case(op, k_int_dtypes[i], 0, &none);
      run_unary_case(op, KILN_DTYPE_BOOL, 1, &none);
      continue;
    }
    for (int l = 0; l < NLAYOUT; l++) {
      for (int i = 0; i < 4; i++)
        if (l != 5 || i == 0) run_unary_case(op, k_float_dtypes[i], l, &none);
      if (unary_int_ok(op))
        for (int i = 0; i < 4; i++)
          if (l != 5 || i == 0) run_unary_case(op, k_int_dtypes[i], l, &none);
    }
  }
  const kiln_unary_params_t ps[] = {
      {.alpha = 0.01}, {.alpha = 1.0, .scale = 1.0, .input_scale = 1.0},
      {.alpha = 1.6732632423543772, .scale = 1.0507009873554805, .input_scale = 1.0},
      {.min = -1, .max = 2, .has_min = 1, .has_max = 1}, {.alpha = 2.5},
      {.alpha = 1.0, .threshold = 20.0}, {.alpha = 2.0, .threshold = 3.0}};
  const kiln_unary_op_t pops[] = {KILN_UNARY_LEAKY_RELU, KILN_UNARY_ELU, KILN_UNARY_ELU,
                                  KILN_UNARY_CLAMP, KILN_UNARY_POW_SCALAR, KILN_UNARY_SOFTPLUS,
                                  KILN_UNARY_SOFTPLUS};
  for (int c = 0; c < 7; c++)
    for (int l = 0; l < 3; l++)
      for (int i = 0; i < 2; i++) run_unary_case(pops[c], k_float_dtypes[i], l, &ps[c]);
  const kiln_unary_params_t clamp_i = {.min = -3, .max = 5, .has_min = 1, .has_max = 1};
  const kiln_unary_params_t pow_i = {.alpha = 3};
  for (int i = 0; i < 4; i++) {
    run_unary_case(KILN_UNARY_CLAMP, k_int_dtypes[i], 1, &clamp_i);
    run_unary_case(KILN_UNARY_POW_SCALAR, k_int_dtypes[i], 2, &pow_i);
  }
}

KT_TEST(unary_ops_avx2) {
  kiln_cpu_force_generic(0);
  unary_all();
}

KT_TEST(unary_ops_generic) {
  kiln_cpu_force_generic(1);
  unary_all();
  kiln_cpu_force_generic(0);
}

KT_TEST(unary_special_values) {
  const float xs[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 88.7f, 89.0f, -87.0f, -104.0f,
                      -150.0f, 1e-40f, 20.0f, -20.0f, 10.0f, -10.0f};
  const kiln_unary_op_t ops[] = {KILN_UNARY_EXP, KILN_UNARY_TANH, KILN_UNARY_SIGMOID,
                                 KILN_UNARY_GELU, KILN_UNARY_GELU_TANH, KILN_UNARY_SILU,
                                 KILN_UNARY_RELU, KILN_UNARY_SQRT};
  for (int mode = 0; mode < 2; mode++) {
    kiln_cpu_force_generic(mode);
    for (int o = 0; o < 8; o++) {
      float in[15], out[15];
      memcpy(in, xs, sizeof in);
      int64_t n = 15;
      kiln_tensor_t x, y;
      kiln_tensor_init_contiguous(&x, in, KILN_DTYPE_F32, 1, &n);
      kiln_tensor_init_contiguous(&y, out, KILN_DTYPE_F32, 1, &n);
      KT_OK(kiln_kernel_unary(ops[o], &x, KILN_DTYPE_F32, &y));
      for (int i = 0; i < 15; i++) {
        double want = (float)ref_unary(ops[o], xs[i], NULL, 0);
        if (ops[o] == KILN_UNARY_RELU && xs[i] != xs[i]) want = NAN;
        HT_CHECK_CLOSE(out[i], want, 2e-6, 1e-37, "op %d x=%g mode %d", (int)ops[o], xs[i], mode);
      }
    }
  }
  kiln_cpu_force_generic(0);
}

/* ---------------------------------------------------------------- binary */
static double fdiv_floor(double a, double b) { /* torch's div_floor_floating */
  if (b == 0) return a / b;
  double mod = fmod(a, b), div = (a - mod) / b;
  if (mod != 0 && (b < 0) != (mod < 0)) div -= 1;
  if (div == 0) return copysign(0, a / b);
  double fl = floor(div);
  return div - fl > 0.5 ? fl + 1 : fl;
}
static double fremainder(double a, double b) {
  double m = fmod(a, b);
  return (m != 0 && (b < 0) != (m < 0)) ? m + b : m;
}
static float fdiv_floor_f(float a, float b) { /* the same in f32 arithmetic */
  if (b == 0) return a / b;
  float mod = fmodf(a, b), div = (a - mod) / b;
  if (mod != 0 && (b < 0) != (mod < 0)) div -= 1;
  if (div == 0) return copysignf(0, a / b);
  float fl = floorf(div);
  return div - fl > 0.5f ? fl + 1 : fl;
}
static double maxp(double a, double b) { return (a != a || b != b) ? NAN : a > b ? a : b; }
static double minp(double a, double b) { return (a != a || b != b) ? NAN : a < b ? a : b; }

static double ref_binary_f(kiln_binary_op_t op, double x, double y, double al) {
  const double k = sqrt(2 / M_PI);
  switch (op) {
    case KILN_BINARY_ADD: return x + al * y;
    case KILN_BINARY_SUB: return x - al * y;
    case KILN_BINARY_MUL: return x * y;
    case KILN_BINARY_DIV: return x / y;
    case KILN_BINARY_DIV_TRUNC: return trunc(x / y);
    case KILN_BINARY_DIV_FLOOR: return fdiv_floor(x, y);
    case KILN_BINARY_REMAINDER: return fremainder(x, y);
    case KILN_BINARY_FMOD: return fmod(x, y);
    case KILN_BINARY_POW: return pow(x, y);
    case KILN_BINARY_MAXIMUM: return maxp(x, y);
    case KILN_BINARY_MINIMUM: return minp(x, y);
    case KILN_BINARY_ATAN2: return atan2(x, y);
    case KILN_BINARY_EQ: return x == y;
    case KILN_BINARY_NE: return x != y;
    case KILN_BINARY_LT: return x < y;
    case KILN_BINARY_LE: return x <= y;
    case KILN_BINARY_GT: return x > y;
    case KILN_BINARY_GE: return x >= y;
    case KILN_BINARY_LOGICAL_AND: return x != 0 && y != 0;
    case KILN_BINARY_LOGICAL_OR: return x != 0 || y != 0;
    case KILN_BINARY_LOGICAL_XOR: return (x != 0) != (y != 0);
    case KILN_BINARY_SIGMOID_BACKWARD: return x * (1 - y) * y;
    case KILN_BINARY_TANH_BACKWARD: return x * (1 - y * y);
    case KILN_BINARY_GELU_BACKWARD:
      return x * (0.5 * erfc(-y / sqrt(2.0)) + y * exp(-0.5 * y * y) / sqrt(2 * M_PI));
    case KILN_BINARY_GELU_TANH_BACKWARD: {
      double u = k * (y + 0.044715 * y * y * y), t = tanh(u);
      return x * (0.5 * (1 + t) + 0.5 * y * (1 - t * t) * k * (1 + 3 * 0.044715 * y * y));
    }
    case KILN_BINARY_SILU_BACKWARD: {
      double s = 1 / (1 + exp(-y));
      return x * s * (1 + y * (1 - s));
    }
    case KILN_BINARY_THRESHOLD_BACKWARD: return y <= al ? 0 : x;
    case KILN_BINARY_LEAKY_RELU_BACKWARD: return y > 0 ? x : x * al;
    default: return NAN;
  }
}

static int64_t ipow(int64_t a, int64_t b) {
  if (b < 0) return a == 1 ? 1 : a == -1 ? ((b & 1) ? -1 : 1) : 0;
  uint64_t r = 1;
  while (b--) r *= (uint64_t)a;
  return (int64_t)r;
}

static int64_t ref_binary_i(kiln_binary_op_t op, int64_t x, int64_t y, int64_t al) {
  switch (op) {
    case KILN_BINARY_ADD: return (int64_t)((uint64_t)x + (uint64_t)al * (uint64_t)y);
    case KILN_BINARY_SUB: return (int64_t)((uint64_t)x - (uint64_t)al * (uint64_t)y);
    case KILN_BINARY_MUL: return (int64_t)((uint64_t)x * (uint64_t)y);
    case KILN_BINARY_DIV_TRUNC: return x / y;
    case KILN_BINARY_DIV_FLOOR: return x / y - ((x % y != 0) && ((x < 0) != (y < 0)));
    case KILN_BINARY_REMAINDER: { int64_t r = x % y; return (r != 0 && (r < 0) != (y < 0)) ? r + y : r; }
    case KILN_BINARY_FMOD: return x % y;
    case KILN_BINARY_POW: return ipow(x, y);
    case KILN_BINARY_MAXIMUM: return x > y ? x : y;
    case KILN_BINARY_MINIMUM: return x < y ? x : y;
    case KILN_BINARY_EQ: return x == y;
    case KILN_BINARY_NE: return x != y;
    case KILN_BINARY_LT: return x < y;
    case KILN_BINARY_LE: return x <= y;
    case KILN_BINARY_GT: return x > y;
    case KILN_BINARY_GE: return x >= y;
    case KILN_BINARY_LOGICAL_AND: return x && y;
    case KILN_BINARY_LOGICAL_OR: return x || y;
    case KILN_BINARY_LOGICAL_XOR: return !x != !y;
    case KILN_BINARY_BITWISE_AND: return x & y;
    case KILN_BINARY_BITWISE_OR: return x | y;
    case KILN_BINARY_BITWISE_XOR: return x ^ y;
    case KILN_BINARY_THRESHOLD_BACKWARD: return y <= al ? 0 : x;
    default: return 0;
  }
}

static int binary_bool(kiln_binary_op_t op) {
  return op >= KILN_BINARY_EQ && op <= KILN_BINARY_LOGICAL_XOR;
}
static int binary_float_only(kiln_binary_op_t op) {
  return op == KILN_BINARY_DIV || op == KILN_BINARY_ATAN2 || op >= KILN_BINARY_SIGMOID_BACKWARD;
}
static int binary_int_only(kiln_binary_op_t op) {
  return op >= KILN_BINARY_BITWISE_AND && op <= KILN_BINARY_BITWISE_XOR;
}
static int binary_exact(kiln_binary_op_t op) {
  return op <= KILN_BINARY_FMOD || op == KILN_BINARY_MAXIMUM || op == KILN_BINARY_MINIMUM ||
         binary_bool(op) || op == KILN_BINARY_THRESHOLD_BACKWARD;
}

/* Binary layouts: (a, b) shapes, with a transposed (1) or column-stepped (2) variant. */
typedef struct { int an, bn; int64_t as[3], bs[3]; int kind; } bin_layout_t;
static const bin_layout_t k_bin_layouts[] = {
    {1, 1, {1000}, {1000}, 0}, {3, 2, {3, 1, 5}, {4, 5}, 0}, {2, 0, {16, 9}, {0}, 0},
    {0, 0, {0}, {0}, 0},        {2, 1, {0, 4}, {4}, 0},       {2, 2, {12, 10}, {12, 10}, 1},
    {2, 2, {8, 10}, {1, 10}, 2}, {1, 1, {70001}, {70001}, 0}};
#define NBIN_LAYOUT 8

static void make_bin(ht_t* h, kiln_dtype_t d, int n, const int64_t* s, int kind) {
  if (kind == 1 && n == 2) ht_make_t(h, d, n, s);
  else if (kind == 2 && n == 2 && s[0] > 1) {
    int64_t st[2] = {s[1] * 3, 3};
    ht_make(h, d, n, s, st);
  } else ht_make(h, d, n, s, NULL);
}

static void run_binary_case(kiln_binary_op_t op, kiln_dtype_t dt, int li, double alpha) {
  const bin_layout_t* L = &k_bin_layouts[li];
  const int is_int = !ht_is_float(dt);
  ht_t a, b, y;
  make_bin(&a, dt, L->an, L->as, L->kind);
  make_bin(&b, dt, L->bn, L->bs, L->kind == 1 ? 1 : 0);
  ht_rand(&a, -6, 6);
  ht_rand(&b, -6, 6);
  int64_t oshape[KILN_MAX_DIMS];
  int on = L->an > L->bn ? L->an : L->bn;
  for (int i = 0; i < on; i++) {
    int ia = i - (on - L->an), ib = i - (on - L->bn);
    int64_t sa = ia >= 0 ? L->as[ia] : 1, sb = ib >= 0 ? L->bs[ib] : 1;
    oshape[i] = sa == 1 ? sb : sa;
  }
  int64_t idx[KILN_MAX_DIMS] = {0};
  const int divlike = op >= KILN_BINARY_DIV_TRUNC && op <= KILN_BINARY_FMOD;
  if ((divlike && is_int) || op == KILN_BINARY_POW) { /* avoid /0 for ints, tame pow */
    int64_t bi[KILN_MAX_DIMS] = {0};
    if (ht_numel(&b.t)) do {
      double v = ht_get(&b.t, bi);
      if (op == KILN_BINARY_POW) v = is_int ? fmod(fabs(v), 5) : ht_round(dt, v / 2);
      else if (v == 0) v = 3;
      ht_set(&b.t, bi, v);
    } while (ht_next(bi, b.t.shape, b.t.ndim));
    if (op == KILN_BINARY_POW && !is_int) ht_rand(&a, 0.1, 3);
  }
  kiln_dtype_t od = binary_bool(op) ? KILN_DTYPE_BOOL : dt;
  ht_make(&y, od, on, oshape, NULL);
  KT_OK(kiln_kernel_binary(op, &a.t, &b.t, alpha, dt, &y.t));
  const double rtol = tol_for(dt, binary_exact(op) && op != KILN_BINARY_DIV);
  const double atol = binary_exact(op) ? 0 : rtol * 0.5;
  int bad = 0;
  if (ht_numel(&y.t)) do {
    double xa = ht_bget(&a.t, idx, on), xb = ht_bget(&b.t, idx, on), want;
    if (is_int) {
      int64_t r = ref_binary_i(op, (int64_t)xa, (int64_t)xb, (int64_t)alpha);
      want = binary_bool(op) ? (double)(r != 0) : (double)ht_wrap(dt, r);
    } else {
      double al = ht_round(dt, alpha);
      want = ht_round(od, ref_binary_f(op, xa, xb, al));
      if (dt == KILN_DTYPE_F32 && op == KILN_BINARY_DIV_TRUNC) want = truncf((float)xa / (float)xb);
      if (dt == KILN_DTYPE_F32 && op == KILN_BINARY_DIV_FLOOR) want = fdiv_floor_f((float)xa, (float)xb);
      if (dt == KILN_DTYPE_F16 || dt == KILN_DTYPE_BF16) {
        /* torch (and kiln) round intermediates of these ops in 16-bit: skip exactness there */
        if (op == KILN_BINARY_DIV_FLOOR || op == KILN_BINARY_DIV_TRUNC ||
            op == KILN_BINARY_SIGMOID_BACKWARD || op == KILN_BINARY_REMAINDER)
          continue;
      }
    }
    double got = ht_get(&y.t, idx);
    if (!ht_close(got, want, rtol, atol) && bad++ < 3)
      HT_CHECK_CLOSE(got, want, rtol, atol, "binary op %d dtype %s layout %d a=%.9g b=%.9g",
                     (int)op, kiln_dtype_name(dt), li, xa, xb);
  } while (ht_next(idx, y.t.shape, on));
  ht_free(&a);
  ht_free(&b);
  ht_free(&y);
}

static void binary_all(void) {
  for (int op = 0; op < KILN_BINARY_COUNT; op++) {
    double alpha = op == KILN_BINARY_THRESHOLD_BACKWARD ? 0.5
                   : op == KILN_BINARY_LEAKY_RELU_BACKWARD ? 0.01
                   : op <= KILN_BINARY_SUB ? 2.0 : 1.0;
    for (int l = 0; l < NBIN_LAYOUT; l++) {
      if (!binary_int_only(op))
        for (int i = 0; i < 4; i++)
          if (l != 7 || i == 0) run_binary_case(op, k_float_dtypes[i], l, alpha);
      if (!binary_float_only(op) || op == KILN_BINARY_THRESHOLD_BACKWARD)
        for (int i = 0; i < 4; i++)
          if (l != 7 || i == 0) run_binary_case(op, k_int_dtypes[i], l, op == KILN_BINARY_THRESHOLD_BACKWARD ? 0 : alpha);
    }
  }
}

KT_TEST(binary_ops_avx2) {
  kiln_cpu_force_generic(0);
  binary_all();
}

KT_TEST(binary_ops_generic) {
  kiln_cpu_force_generic(1);
  binary_all();
  kiln_cpu_force_generic(0);
}

KT_TEST(binary_bool_ops) {
  const kiln_binary_op_t ops[] = {KILN_BINARY_ADD, KILN_BINARY_MUL, KILN_BINARY_MAXIMUM,
                                  KILN_BINARY_MINIMUM, KILN_BINARY_EQ, KILN_BINARY_LT,
                                  KILN_BINARY_LOGICAL_XOR, KILN_BINARY_BITWISE_AND,
                                  KILN_BINARY_BITWISE_OR, KILN_BINARY_BITWISE_XOR};
  const uint8_t av[4] = {0, 0, 1, 1}, bv[4] = {0, 1, 0, 1};
  const uint8_t want[10][4] = {{0, 1, 1, 1}, {0, 0, 0, 1}, {0, 1, 1, 1}, {0, 0, 0, 1},
                               {1, 0, 0, 1}, {0, 1, 0, 0}, {0, 1, 1, 0}, {0, 0, 0, 1},
                               {0, 1, 1, 1}, {0, 1, 1, 0}};
  int64_t n = 4;
  uint8_t a[4], b[4], y[4];
  memcpy(a, av, 4);
  memcpy(b, bv, 4);
  kiln_tensor_t ta, tb, ty;
  kiln_tensor_init_contiguous(&ta, a, KILN_DTYPE_BOOL, 1, &n);
  kiln_tensor_init_contiguous(&tb, b, KILN_DTYPE_BOOL, 1, &n);
  kiln_tensor_init_contiguous(&ty, y, KILN_DTYPE_BOOL, 1, &n);
  for (int o = 0; o < 10; o++) {
    KT_OK(kiln_kernel_binary(ops[o], &ta, &tb, 1.0, KILN_DTYPE_BOOL, &ty));
    for (int i = 0; i < 4; i++) KT_CHECK(y[i] == want[o][i]);
  }
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_kernel_binary(KILN_BINARY_SUB, &ta, &tb, 1.0,
                                                            KILN_DTYPE_BOOL, &ty));
}

KT_TEST(binary_int_wrap_and_div_by_zero) {
  int32_t a[4] = {INT32_MAX, INT32_MIN, 100000, 7}, b[4] = {1, -1, 100000, 0}, y[4];
  int64_t n = 4;
  kiln_tensor_t ta, tb, ty;
  kiln_tensor_init_contiguous(&ta, a, KILN_DTYPE_I32, 1, &n);
  kiln_tensor_init_contiguous(&tb, b, KILN_DTYPE_I32, 1, &n);
  kiln_tensor_init_contiguous(&ty, y, KILN_DTYPE_I32, 1, &n);
  KT_OK(kiln_kernel_binary(KILN_BINARY_ADD, &ta, &tb, 1.0, KILN_DTYPE_I32, &ty));
  KT_CHECK(y[0] == INT32_MIN && y[1] == INT32_MAX && y[2] == 200000);
  KT_OK(kiln_kernel_binary(KILN_BINARY_MUL, &ta, &tb, 1.0, KILN_DTYPE_I32, &ty));
  KT_CHECK(y[1] == INT32_MIN && y[2] == 1410065408);
  for (int op = KILN_BINARY_DIV_TRUNC; op <= KILN_BINARY_FMOD; op++) {
    KT_FAILS(KILN_ERROR_INVALID_ARGUMENT,
             kiln_kernel_binary(op, &ta, &tb, 1.0, KILN_DTYPE_I32, &ty));
    KT_CHECK(strstr(kiln_status_message(), "ZeroDivisionError") != NULL);
  }
  b[3] = -1;
  int64_t la[2] = {INT64_MIN, -7}, lb[2] = {-1, 2}, ly[2];
  int64_t n2 = 2;
  kiln_tensor_t tla, tlb, tly;
  kiln_tensor_init_contiguous(&tla, la, KILN_DTYPE_I64, 1, &n2);
  kiln_tensor_init_contiguous(&tlb, lb, KILN_DTYPE_I64, 1, &n2);
  kiln_tensor_init_contiguous(&tly, ly, KILN_DTYPE_I64, 1, &n2);
  KT_OK(kiln_kernel_binary(KILN_BINARY_DIV_FLOOR, &tla, &tlb, 1.0, KILN_DTYPE_I64, &tly));
  KT_CHECK(ly[0] == INT64_MIN && ly[1] == -4);
  KT_OK(kiln_kernel_binary(KILN_BINARY_REMAINDER, &tla, &tlb, 1.0, KILN_DTYPE_I64, &tly));
  KT_CHECK(ly[0] == 0 && ly[1] == 1);
  KT_OK(kiln_kernel_binary(KILN_BINARY_FMOD, &tla, &tlb, 1.0, KILN_DTYPE_I64, &tly));
  KT_CHECK(ly[0] == 0 && ly[1] == -1);
  /* float division by zero is IEEE, not an error */
  float fa[2] = {1, -1}, fb[2] = {0, 0}, fy[2];
  kiln_tensor_t tfa, tfb, tfy;
  kiln_tensor_init_contiguous(&tfa, fa, KILN_DTYPE_F32, 1, &n2);
  kiln_tensor_init_contiguous(&tfb, fb, KILN_DTYPE_F32, 1, &n2);
  kiln_tensor_init_contiguous(&tfy, fy, KILN_DTYPE_F32, 1, &n2);
  KT_OK(kiln_kernel_binary(KILN_BINARY_DIV_FLOOR, &tfa, &tfb, 1.0, KILN_DTYPE_F32, &tfy));
  KT_CHECK(isinf(fy[0]) && fy[0] > 0 && isinf(fy[1]) && fy[1] < 0);
}

KT_TEST(inplace_mixed_dtype_and_scalars) {
  /* a += 2.5 * b in place on a transposed f32 view; b is a rank-0 f64 scalar */
  ht_t a;
  const int64_t s[2] = {33, 70};
  ht_make_t(&a, KILN_DTYPE_F32, 2, s);
  ht_rand(&a, -3, 3);
  float* copy = malloc(sizeof(float) * 33 * 70);
  memcpy(copy, a.buf, sizeof(float) * 33 * 70);
  double sc = 0.25;
  kiln_tensor_t tsc;
  kiln_tensor_init_contiguous(&tsc, &sc, KILN_DTYPE_F64, 0, NULL);
  KT_OK(kiln_kernel_binary(KILN_BINARY_ADD, &a.t, &tsc, 2.5, KILN_DTYPE_F32, &a.t));
  for (int i = 0; i < 33 * 70; i++) KT_CHECK(((float*)a.buf)[i] == copy[i] + 0.625f);
  /* in-place unary on f16 with f32 internals */
  ht_t h;
  const int64_t hn[1] = {777};
  ht_make(&h, KILN_DTYPE_F16, 1, hn, NULL);
  ht_rand(&h, -4, 4);
  uint16_t* hc = malloc(2 * 777);
  memcpy(hc, h.buf, 2 * 777);
  KT_OK(kiln_kernel_unary(KILN_UNARY_TANH, &h.t, KILN_DTYPE_F16, &h.t));
  for (int i = 0; i < 777; i++)
    HT_CHECK_CLOSE(kiln_f16_to_f32(((uint16_t*)h.buf)[i]),
                   ht_round(KILN_DTYPE_F16, tanh(kiln_f16_to_f32(hc[i]))), 1e-3, 1e-4, "i=%d", i);
  /* i8 tensor * f32 tensor with f32 compute into an f64 output */
  int8_t ia[5] = {-3, -1, 0, 2, 127};
  float fb[5] = {0.5f, 1.5f, 2.0f, -0.25f, 0.125f};
  double dy[5];
  int64_t n = 5;
  kiln_tensor_t ti, tf, td;
  kiln_tensor_init_contiguous(&ti, ia, KILN_DTYPE_I8, 1, &n);
  kiln_tensor_init_contiguous(&tf, fb, KILN_DTYPE_F32, 1, &n);
  kiln_tensor_init_contiguous(&td, dy, KILN_DTYPE_F64, 1, &n);
  KT_OK(kiln_kernel_binary(KILN_BINARY_MUL, &ti, &tf, 1.0, KILN_DTYPE_F32, &td));
  for (int i = 0; i < 5; i++) KT_CHECK(dy[i] == (double)((float)ia[i] * fb[i]));
  free(copy);
  free(hc);
  ht_free(&a);
  ht_free(&h);
}

/* where on long contiguous f32 rows (the AVX2 kernel's 8-lane body and its tail): a pure
 * selection, bit for bit, NaN / -0 / inf values included, any non-zero u8 condition true. */
KT_TEST(where_f32_long_rows_select_bits) {
  for (int mode = 0; mode < 2; mode++) {
    kiln_cpu_force_generic(mode);
    const int64_t n = 45;
    uint8_t c[45];
    float a[45], b[45], y[45];
    for (int64_t i = 0; i < n; i++) {
      c[i] = (uint8_t)((i * 7) % 3); /* 0, 1 or 2 */
      a[i] = i % 5 == 0 ? NAN : i % 5 == 1 ? -0.0f : (float)i * 0.25f;
      b[i] = i % 4 == 0 ? INFINITY : -(float)i;
    }
    kiln_tensor_t tc, ta, tb, ty;
    kiln_tensor_init_contiguous(&tc, c, KILN_DTYPE_U8, 1, &n);
    kiln_tensor_init_contiguous(&ta, a, KILN_DTYPE_F32, 1, &n);
    kiln_tensor_init_contiguous(&tb, b, KILN_DTYPE_F32, 1, &n);
    kiln_tensor_init_contiguous(&ty, y, KILN_DTYPE_F32, 1, &n);
    KT_OK(kiln_kernel_ternary(KILN_TERNARY_WHERE, &tc, &ta, &tb, 0.0, KILN_DTYPE_F32, &ty));
    int bad = 0;
    for (int64_t i = 0; i < n; i++) bad += memcmp(&y[i], c[i] ? &a[i] : &b[i], 4) != 0;
    KT_CHECK(bad == 0);
  }
  kiln_cpu_force_generic(0);
}

KT_TEST(ternary_ops) {
  for (int mode = 0; mode < 2; mode++) {
    kiln_cpu_force_generic(mode);
    const int64_t cs[3] = {6, 1, 7}, as[2] = {5, 7}, bs[3] = {6, 5, 7}, os[3] = {6, 5, 7};
    const kiln_dtype_t dts[4] = {KILN_DTYPE_F32, KILN_DTYPE_F64, KILN_DTYPE_BF16, KILN_DTYPE_I32};
    for (int di = 0; di < 4; di++) {
      kiln_dtype_t dt = dts[di];
      ht_t c, a, b, y;
      ht_make(&c, KILN_DTYPE_U8, 3, cs, NULL);
      ht_make_t(&a, dt, 2, as);
      ht_make(&b, dt, 3, bs, NULL);
      ht_make(&y, dt, 3, os, NULL);
      ht_rand(&c, 0, 2);
      ht_rand(&a, 0.5, 3);
      ht_rand(&b, 0.5, 3);
      for (int op = 0; op < KILN_TERNARY_COUNT; op++) {
        const int float_only = op == KILN_TERNARY_LERP || op == KILN_TERNARY_ADDCDIV;
        const kiln_tensor_t* t0 = op == KILN_TERNARY_WHERE ? &c.t : &a.t;
        const kiln_tensor_t* t1 = op == KILN_TERNARY_WHERE ? &a.t : &b.t;
        const kiln_tensor_t* t2 = op == KILN_TERNARY_WHERE ? &b.t : &a.t;
        kiln_status_t st = kiln_kernel_ternary(op, t0, t1, t2, -1.5, dt, &y.t);
        if (float_only && !ht_is_float(dt)) {
          KT_CHECK(st == KILN_ERROR_INVALID_ARGUMENT);
          continue;
        }
        KT_OK(st);
        int64_t idx[3] = {0};
        do {
          double x0 = ht_bget(t0, idx, 3), x1 = ht_bget(t1, idx, 3), x2 = ht_bget(t2, idx, 3);
          double s = ht_is_float(dt) ? ht_round(dt, -1.5) : -1;
          double want;
          switch (op) {
            case KILN_TERNARY_WHERE: want = x0 != 0 ? x1 : x2; break;
            case KILN_TERNARY_LERP:
              want = fabs(x2) < 0.5 ? x0 + x2 * (x1 - x0) : x1 - (x1 - x0) * (1 - x2);
              break;
            case KILN_TERNARY_ADDCMUL: want = x0 + s * x1 * x2; break;
            case KILN_TERNARY_ADDCDIV: want = x0 + s * x1 / x2; break;
            default: want = minp(maxp(x0, x1), x2); break;
          }
          want = ht_is_float(dt) ? ht_round(dt, want) : (double)ht_wrap(dt, (int64_t)want);
          HT_CHECK_CLOSE(ht_get(&y.t, idx), want, tol_for(dt, 1) * 2, 1e-6, "ternary %d %s", op,
                         kiln_dtype_name(dt));
        } while (ht_next(idx, os, 3));
      }
      ht_free(&c);
      ht_free(&a);
      ht_free(&b);
      ht_free(&y);
    }
  }
  kiln_cpu_force_generic(0);
}

KT_TEST(errors) {
  float a[12], y[12];
  int64_t s3[1] = {3}, s4[1] = {4};
  kiln_tensor_t ta, ty;
  kiln_tensor_init_contiguous(&ta, a, KILN_DTYPE_F32, 1, s3);
  kiln_tensor_init_contiguous(&ty, y, KILN_DTYPE_F32, 1, s4);
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT,
           kiln_kernel_binary(KILN_BINARY_ADD, &ta, &ta, 1.0, KILN_DTYPE_F32, &ty));
  KT_CHECK(strstr(kiln_status_message(), "[3]") && strstr(kiln_status_message(), "[4]"));
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_kernel_unary(KILN_UNARY_NEG, &ta, KILN_DTYPE_F32, &ty));
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_kernel_unary(KILN_UNARY_EXP, &ty, KILN_DTYPE_I32, &ty));
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_kernel_unary(KILN_UNARY_CLAMP, &ty, KILN_DTYPE_F32, &ty));
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_kernel_unary((kiln_unary_op_t)999, &ty, KILN_DTYPE_F32, &ty));
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT,
           kiln_kernel_binary(KILN_BINARY_BITWISE_OR, &ty, &ty, 1.0, KILN_DTYPE_F32, &ty));
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT,
           kiln_kernel_binary(KILN_BINARY_ADD, &ty, NULL, 1.0, KILN_DTYPE_F32, &ty));
  kiln_tensor_t bad = ty;
  bad.ndim = 9;
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_kernel_unary(KILN_UNARY_NEG, &bad, KILN_DTYPE_F32, &ty));
  bad = ty;
  bad.data = NULL;
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_kernel_unary(KILN_UNARY_NEG, &bad, KILN_DTYPE_F32, &ty));
  bad = ty;
  bad.dtype = (kiln_dtype_t)42;
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_kernel_unary(KILN_UNARY_NEG, &ty, KILN_DTYPE_F32, &bad));
  /* empty tensors need no data */
  int64_t z[2] = {0, 5};
  kiln_tensor_t te;
  kiln_tensor_init_contiguous(&te, NULL, KILN_DTYPE_F32, 2, z);
  KT_OK(kiln_kernel_unary(KILN_UNARY_EXP, &te, KILN_DTYPE_F32, &te));
}

/* kiln_kernel_foreach_*: each entry equals the single-tensor kernel (computed here in double for
 * the simple formulas, exact in f32 for these values), scalar lists, in place, f16 in f32
 * (opmath), and the errors: NULL lists / entries, n < 0, the failing entry named. */
KT_TEST(foreach_lists) {
  float a0[3] = {1, 2, 3}, a1[2] = {4, -8}, b0[3] = {2, 2, 2}, b1[2] = {0.5f, 4}, c0[3] = {1, 3, 5},
        c1[2] = {2, 2}, o0[3], o1[2];
  int64_t n3 = 3, n2 = 2;
  kiln_tensor_t ta[2], tb[2], tc[2], to[2];
  kiln_tensor_init_contiguous(&ta[0], a0, KILN_DTYPE_F32, 1, &n3);
  kiln_tensor_init_contiguous(&ta[1], a1, KILN_DTYPE_F32, 1, &n2);
  kiln_tensor_init_contiguous(&tb[0], b0, KILN_DTYPE_F32, 1, &n3);
  kiln_tensor_init_contiguous(&tb[1], b1, KILN_DTYPE_F32, 1, &n2);
  kiln_tensor_init_contiguous(&tc[0], c0, KILN_DTYPE_F32, 1, &n3);
  kiln_tensor_init_contiguous(&tc[1], c1, KILN_DTYPE_F32, 1, &n2);
  kiln_tensor_init_contiguous(&to[0], o0, KILN_DTYPE_F32, 1, &n3);
  kiln_tensor_init_contiguous(&to[1], o1, KILN_DTYPE_F32, 1, &n2);
  kiln_tensor_t *A[2] = {&ta[0], &ta[1]}, *B[2] = {&tb[0], &tb[1]}, *C[2] = {&tc[0], &tc[1]},
                *O[2] = {&to[0], &to[1]};
  const double sl[2] = {10, -1};
  KT_OK(kiln_kernel_foreach_binary(KILN_BINARY_ADD, 2, A, NULL, sl, 0, 1, O));
  KT_CHECK(o0[0] == 11 && o0[2] == 13 && o1[0] == 3 && o1[1] == -9);
  KT_OK(kiln_kernel_foreach_binary(KILN_BINARY_SUB, 2, A, B, NULL, 0, 2, O)); /* a - 2b */
  KT_CHECK(o0[0] == -3 && o1[0] == 3 && o1[1] == -16);
  KT_OK(kiln_kernel_foreach_ternary(KILN_TERNARY_ADDCDIV, 2, A, B, C, NULL, 0.5, O));
  KT_CHECK(o0[1] == 2 + 0.5f * 2 / 3 && o1[1] == -8 + 0.5f * 4 / 2);
  const double wl[2] = {-1, 0.25};
  KT_OK(kiln_kernel_foreach_ternary(KILN_TERNARY_LERP, 2, A, B, NULL, wl, 0, O));
  KT_CHECK(o0[0] == 0 && o1[0] == 4 + 0.25f * -3.5f && o1[1] == -8 + 0.25f * 12); /* a + w (b - a) */
  KT_OK(kiln_kernel_foreach_unary(KILN_UNARY_SQRT, 1, B, B)); /* in place */
  KT_CHECK(fabsf(b0[0] - sqrtf(2)) == 0 && b1[0] == 0.5f);
  uint16_t h[2] = {0x3C00, 0x4000}; /* f16 1, 2 */
  kiln_tensor_t th;
  kiln_tensor_init_contiguous(&th, h, KILN_DTYPE_F16, 1, &n2);
  kiln_tensor_t* H[1] = {&th};
  KT_OK(kiln_kernel_foreach_binary(KILN_BINARY_MUL, 1, H, NULL, NULL, 3.0, 1, H));
  KT_CHECK(h[0] == 0x4200 && h[1] == 0x4600); /* 3, 6 */
  KT_OK(kiln_kernel_foreach_binary(KILN_BINARY_MUL, 0, NULL, NULL, NULL, 1, 1, NULL));
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_kernel_foreach_unary(KILN_UNARY_SQRT, -1, A, O));
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_kernel_foreach_unary(KILN_UNARY_SQRT, 2, A, NULL));
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT,
           kiln_kernel_foreach_ternary(KILN_TERNARY_ADDCMUL, 2, A, B, NULL, NULL, 1, O));
  kiln_tensor_t* Bad[2] = {&ta[0], NULL};
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT,
           kiln_kernel_foreach_binary(KILN_BINARY_MUL, 2, A, Bad, NULL, 0, 1, O));
  kiln_tensor_t* Mis[2] = {&to[1], &to[0]}; /* shapes [2] vs [3]: entry 0 fails */
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT,
           kiln_kernel_foreach_binary(KILN_BINARY_MUL, 2, A, B, NULL, 0, 1, Mis));
  KT_CHECK(strstr(kiln_status_message(), "entry 0") != NULL);
}

KT_MAIN()

/* The AVX-512 kernels do the AVX2 kernels' arithmetic lane for lane: the same bits on every
 * input (special values, the exp clamps, subnormals, every tail length), so results do not
 * depend on which of the two a CPU runs. */
KT_TEST(avx512_kernels_match_avx2_bits) {
  if (!kiln_cpu_has_avx512()) return; /* nothing to compare on this CPU */
  enum { N = 1100 };
  static float x[N], y[N], o1[N], o2[N];
  const float sp[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 88.7f, 88.8f, 89.0f, -87.0f,
                      -104.0f, -105.0f, -106.0f, -150.0f, 1e-40f, -1e-40f, 0.625f, -0.625f,
                      0.5f, 20.0f, -20.0f, 1e30f, -1e30f, 3.0f, 2.0f};
  const int nsp = (int)(sizeof sp / sizeof sp[0]);
  uint64_t s = 12345;
  for (int i = 0; i < N; i++) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    const double u = (double)(s >> 11) / 9007199254740992.0;
    x[i] = i < nsp ? sp[i] : (float)((u - 0.5) * (i % 3 == 0 ? 240.0 : i % 3 == 1 ? 12.0 : 0.02));
    y[i] = i < nsp ? sp[(i * 7 + 3) % nsp] : (float)((0.5 - u) * (i % 2 ? 4.0 : 300.0));
  }
  const int64_t lens[] = {0, 1, 7, 15, 16, 17, 31, 32, 33, 47, 63, 64, 65, N};
  int checked = 0, diff = 0;
  kiln_ew_args_t args;
  memset(&args, 0, sizeof args);
  for (int op = 0; op < KILN_UNARY_COUNT; op++) {
    kiln_ew_kernel_t k5 = kiln_avx512_unary_f32((kiln_unary_op_t)op);
    kiln_ew_kernel_t k2 = kiln_avx2_unary_f32((kiln_unary_op_t)op);
    if (!k5) continue;
    KT_CHECK(k2 != NULL);
    const double alphas[] = {2.0, 3.0, 0.5, -0.5, -1.0, -2.0, 1.0, 0.0, 1.7};
    const int na = op == KILN_UNARY_POW_SCALAR ? 9 : 1;
    for (int a = 0; a < na; a++) {
      args.up.alpha = alphas[a];
      for (size_t l = 0; l < sizeof lens / sizeof lens[0]; l++) {
        const void* in[1] = {x};
        memset(o1, 0x5a, sizeof o1);
        memcpy(o2, o1, sizeof o2);
        k5(lens[l], o1, in, &args);
        k2(lens[l], o2, in, &args);
        if (memcmp(o1, o2, sizeof o1) != 0 && diff++ < 3)
          fprintf(stderr, "  unary op %d len %lld: AVX-512 and AVX2 bits differ\n", op,
                  (long long)lens[l]);
        checked++;
      }
    }
  }
  for (int op = 0; op < KILN_BINARY_COUNT; op++) {
    kiln_ew_kernel_t k5 = kiln_avx512_binary_f32((kiln_binary_op_t)op);
    kiln_ew_kernel_t k2 = kiln_avx2_binary_f32((kiln_binary_op_t)op);
    if (!k5) continue;
    KT_CHECK(k2 != NULL);
    const double alphas[] = {1.0, -2.5, 0.0};
    for (int a = 0; a < 3; a++) {
      args.alpha = alphas[a];
      for (size_t l = 0; l < sizeof lens / sizeof lens[0]; l++) {
        const void* in[2] = {x, y};
        memset(o1, 0x5a, sizeof o1);
        memcpy(o2, o1, sizeof o2);
        k5(lens[l], o1, in, &args);
        k2(lens[l], o2, in, &args);
        if (memcmp(o1, o2, sizeof o1) != 0 && diff++ < 3)
          fprintf(stderr, "  binary op %d len %lld alpha %g: AVX-512 and AVX2 bits differ\n",
                  op, (long long)lens[l], alphas[a]);
        checked++;
      }
    }
  }
  KT_CHECK(checked > 100);
  KT_CHECK(diff == 0);
}

/* The AVX2 (de)interleave helpers of the fused-group interpreter on every length up to 40
 * (full 8-lane steps, the masked last step), sources exactly as long as read. */
KT_TEST(avx2_gather2_scatter2_lengths) {
  if (!kiln_cpu_has_avx2()) return;
  int bad = 0;
  for (int64_t n = 0; n <= 40; n++) {
    float* src = malloc(sizeof(float) * (size_t)(2 * n + 1));
    float* dst = malloc(sizeof(float) * (size_t)(n + 1));
    for (int64_t i = 0; i < 2 * n; i++) src[i] = (float)i + 0.5f;
    memset(dst, 0, sizeof(float) * (size_t)(n + 1));
    dst[n] = -7.0f;
    kiln_avx2_gather2_32(src, dst, n);
    for (int64_t i = 0; i < n; i++) bad += dst[i] != src[2 * i];
    bad += dst[n] != -7.0f; /* nothing past n written */
    for (int64_t i = 0; i < n; i++) dst[i] = -(float)i;
    kiln_avx2_scatter2_32(dst, src, n);
    for (int64_t i = 0; i < n; i++) bad += src[2 * i] != dst[i] || src[2 * i + 1] != (float)(2 * i + 1) + 0.5f;
    free(src);
    free(dst);
  }
  KT_CHECK(bad == 0);
}

/* The row-wise (de)interleave pair helpers (RoPE's even/odd halves): every length up to 40, a
 * padded source row stride, nothing outside the rows touched. */
KT_TEST(avx2_deinterleave_interleave_rows) {
  if (!kiln_cpu_has_avx2()) return;
  int bad = 0;
  for (int64_t n = 0; n <= 40; n++) {
    const int64_t rows = 3, ld = 2 * n + 5;
    float* src = malloc(sizeof(float) * (size_t)(rows * ld + 1));
    float* ev = malloc(sizeof(float) * (size_t)(rows * n + 1));
    float* od = malloc(sizeof(float) * (size_t)(rows * n + 1));
    for (int64_t i = 0; i < rows * ld; i++) src[i] = (float)i + 0.25f;
    ev[rows * n] = od[rows * n] = -7.0f;
    kiln_avx2_deinterleave2_32(src, ld, ev, od, n, rows);
    for (int64_t r = 0; r < rows; r++)
      for (int64_t i = 0; i < n; i++)
        bad += ev[r * n + i] != src[r * ld + 2 * i] || od[r * n + i] != src[r * ld + 2 * i + 1];
    bad += ev[rows * n] != -7.0f || od[rows * n] != -7.0f;
    for (int64_t i = 0; i < rows * n; i++) {
      ev[i] = -(float)i;
      od[i] = (float)i * 3.0f;
    }
    kiln_avx2_interleave2_32(ev, od, src, ld, n, rows);
    for (int64_t r = 0; r < rows; r++) {
      for (int64_t i = 0; i < n; i++)
        bad += src[r * ld + 2 * i] != ev[r * n + i] || src[r * ld + 2 * i + 1] != od[r * n + i];
      for (int64_t i = 2 * n; i < ld; i++) bad += src[r * ld + i] != (float)(r * ld + i) + 0.25f;
    }
    free(src);
    free(ev);
    free(od);
  }
  KT_CHECK(bad == 0);
}
