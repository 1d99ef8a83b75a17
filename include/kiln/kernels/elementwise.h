/* SPDX-License-Identifier: Apache-2.0 */
/* kiln/kernels/elementwise.h - pointwise, copy/cast and fill kernels on host tensors.
 *
 * Every function takes borrowed kiln_tensor_t descriptors (kiln/tensor.h) and keeps nothing after
 * it returns. Semantics follow PyTorch CPU eager:
 *   - Inputs are broadcast to `out`'s shape (numpy rules: trailing dims aligned, a dim of size 1
 *     or a missing leading dim broadcasts). A shape that does not broadcast is INVALID_ARGUMENT
 *     and the message names both shapes. `out` is never resized.
 *   - Type promotion is the caller's job: it passes `compute`, the dtype the op runs in. Each
 *     input is converted to `compute` on the fly, the op runs, the result is converted to `out`'s
 *     dtype. f16/bf16 compute runs in f32 internally and rounds once to f16/bf16 (as PyTorch CPU's
 *     opmath does); an input of another dtype is first rounded to the compute dtype.
 *   - `out` may alias an input exactly (same data and strides): in-place ops are supported.
 *     Partial overlap is undefined.
 *   - Strides are arbitrary (0, negative, transposed); contiguous operands take fast paths that
 *     are vectorized (AVX2, chosen at run time) and split over the shared pool (kiln/parallel.h).
 *     Small tensors run on the calling thread with no allocation.
 *   - Integer arithmetic wraps (two's complement); integer division or modulo by zero returns
 *     INVALID_ARGUMENT "ZeroDivisionError" (out is then partially written).
 *   - Conversions: float -> int truncates toward zero; NaN/out-of-range -> int gives the x86
 *     cvttss2si result (INT32_MIN, resp. INT64_MIN, truncated to narrower types), like PyTorch on
 *     x86; -> bool is x != 0; -> f16/bf16 rounds to nearest even.
 * An op that is not defined for `compute` (e.g. EXP in an integer dtype, BITWISE_AND on floats)
 * returns INVALID_ARGUMENT. Reductions are declared in kiln/kernels/reduce.h.
 *
 * Parity details (checked against torch by tests/python/test_kernels_vs_torch.py):
 *   - Where torch's own CPU kernel rounds intermediates to f16/bf16 and that changes results,
 *     kiln does the same: DIV_TRUNC / DIV_FLOOR step by step in the 16-bit type (else integral
 *     results could differ by one), SIGMOID_BACKWARD in f16, POW_SCALAR's exponent and CLAMP's
 *     bounds rounded to the compute dtype. MUL and DIV take a one-element second operand of
 *     another dtype (a Python scalar) to f32 without rounding it to f16/bf16, as torch does.
 *   - f32 exp/tanh/sigmoid/silu/gelu run as AVX2 polynomials within ~1e-6 relative of the exact
 *     function (libm for the generic path and the other ops). GELU, GELU_TANH and
 *     GELU_TANH_BACKWARD use cancellation-free forms (erfc, sigmoid), so in the far negative tail
 *     they are closer to the exact value than torch's AVX2 kernels (which are off by up to
 *     ~4e-7 absolute there).
 *
 *   kiln_tensor_t a, b, y;   // y = a + 2*b, all f32
 *   KILN_RETURN_IF_ERROR(kiln_kernel_binary(KILN_BINARY_ADD, &a, &b, 2.0, KILN_DTYPE_F32, &y));
 */
#ifndef KILN_KERNELS_ELEMENTWISE_H
#define KILN_KERNELS_ELEMENTWISE_H

#include <stdint.h>

#include "kiln/status.h"
#include "kiln/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- copy / fill ------------------------------------------------------------------------- */

/* dst = src converted to dst's dtype (torch copy_): any dtype to any dtype, src broadcast to dst's
 * shape, arbitrary strides on both sides. Errors: INVALID_ARGUMENT for a bad descriptor or a
 * shape that does not broadcast. */
kiln_status_t kiln_kernel_copy(const kiln_tensor_t* src, kiln_tensor_t* dst);

/* Sets every element of dst to `value` converted to dst's dtype (torch fill_). For integer dtypes
 * prefer kiln_kernel_fill_i64, which is exact beyond 2^53. Errors: INVALID_ARGUMENT for a bad
 * descriptor. */
kiln_status_t kiln_kernel_fill(kiln_tensor_t* dst, double value);
/* kiln_kernel_fill with an exact 64-bit integer value (wraps to narrower integer dtypes). */
kiln_status_t kiln_kernel_fill_i64(kiln_tensor_t* dst, int64_t value);

/* ---- unary ------------------------------------------------------------------------------- */

/* Ops marked (f) need a floating compute dtype; (b) write a boolean result (any out dtype works,
 * it gets 0/1); (i) need an integer or bool compute dtype. Others work for every dtype that
 * PyTorch allows (e.g. NEG is rejected for bool, as torch does). */
typedef enum kiln_unary_op {
  KILN_UNARY_NEG = 0,
  KILN_UNARY_ABS,
  KILN_UNARY_EXP,        /* (f) */
  KILN_UNARY_EXPM1,      /* (f) */
  KILN_UNARY_LOG,        /* (f) */
  KILN_UNARY_LOG1P,      /* (f) */
  KILN_UNARY_LOG2,       /* (f) */
  KILN_UNARY_LOG10,      /* (f) */
  KILN_UNARY_SQRT,       /* (f) */
  KILN_UNARY_RSQRT,      /* (f) 1/sqrt(x) */
  KILN_UNARY_RECIPROCAL, /* (f) 1/x */
  KILN_UNARY_SIN,        /* (f) */
  KILN_UNARY_COS,        /* (f) */
  KILN_UNARY_TAN,        /* (f) */
  KILN_UNARY_ASIN,       /* (f) */
  KILN_UNARY_ACOS,       /* (f) */
  KILN_UNARY_ATAN,       /* (f) */
  KILN_UNARY_SINH,       /* (f) */
  KILN_UNARY_COSH,       /* (f) */
  KILN_UNARY_TANH,       /* (f) */
  KILN_UNARY_SIGMOID,    /* (f) 1/(1+exp(-x)) */
  KILN_UNARY_RELU,       /* max(x, 0); NaN stays NaN */
  KILN_UNARY_GELU,       /* (f) x/2 (1 + erf(x/sqrt 2)), torch approximate='none' */
  KILN_UNARY_GELU_TANH,  /* (f) torch approximate='tanh' */
  KILN_UNARY_SILU,       /* (f) x * sigmoid(x) */
  KILN_UNARY_MISH,       /* (f) x * tanh(softplus(x)) */
  KILN_UNARY_HARDSIGMOID, /* (f) clamp(x/6 + 1/2, 0, 1) */
  KILN_UNARY_HARDSWISH,  /* (f) x * hardsigmoid(x) */
  KILN_UNARY_ERF,        /* (f) */
  KILN_UNARY_ERFC,       /* (f) */
  KILN_UNARY_FLOOR,      /* identity for integers */
  KILN_UNARY_CEIL,       /* identity for integers */
  KILN_UNARY_ROUND,      /* half to even; identity for integers */
  KILN_UNARY_TRUNC,      /* identity for integers */
  KILN_UNARY_SIGN,       /* -1, 0, 1; sign(NaN) = 0 as in torch */
  KILN_UNARY_SQUARE,     /* x*x */
  KILN_UNARY_LOGICAL_NOT, /* (b) x == 0 */
  KILN_UNARY_BITWISE_NOT, /* (i) ~x; logical not for bool */
  KILN_UNARY_ISNAN,      /* (b) */
  KILN_UNARY_ISINF,      /* (b) */
  KILN_UNARY_ISFINITE,   /* (b) */
  /* Parameterized (kiln_unary_params_t required): */
  KILN_UNARY_LEAKY_RELU, /* (f) x > 0 ? x : x * alpha */
  KILN_UNARY_ELU,        /* (f) x > 0 ? scale*x : scale*alpha*(exp(input_scale*x) - 1) (also SELU/CELU) */
  KILN_UNARY_CLAMP,      /* min(max(x, min), max), each bound optional; NaN propagates (torch.clamp) */
  KILN_UNARY_HARDTANH = KILN_UNARY_CLAMP, /* hardtanh(x, min, max) is clamp */
  KILN_UNARY_POW_SCALAR, /* x ** alpha; integer compute needs an integral alpha >= 0 */
  KILN_UNARY_SOFTPLUS,   /* (f) x*alpha > threshold ? x : log1p(exp(x*alpha))/alpha (alpha = beta) */
  KILN_UNARY_COUNT
} kiln_unary_op_t;

/* Scalar parameters of the parameterized unary ops; unused fields are ignored. Scalars are
 * converted to the compute dtype the way PyTorch converts them. */
typedef struct kiln_unary_params {
  double alpha;       /* LEAKY_RELU negative_slope, ELU alpha, POW_SCALAR exponent, SOFTPLUS beta */
  double scale;       /* ELU scale (1 for elu) */
  double input_scale; /* ELU input_scale (1 for elu) */
  double threshold;   /* SOFTPLUS threshold (torch default 20) */
  double min, max;    /* CLAMP bounds, used when has_min / has_max is non-zero */
  int has_min, has_max;
} kiln_unary_params_t;

/* out = op(x) computed in `compute` (see the top of this file). Errors: INVALID_ARGUMENT for a bad
 * descriptor or op, a shape that does not broadcast, an op undefined for `compute`, or a
 * parameterized op (LEAKY_RELU..SOFTPLUS), which needs kiln_kernel_unary_ex. */
kiln_status_t kiln_kernel_unary(kiln_unary_op_t op, const kiln_tensor_t* x, kiln_dtype_t compute,
                                kiln_tensor_t* out);
/* kiln_kernel_unary with scalar parameters `p` (borrowed; may be NULL for ops without any). */
kiln_status_t kiln_kernel_unary_ex(kiln_unary_op_t op, const kiln_tensor_t* x,
                                   const kiln_unary_params_t* p, kiln_dtype_t compute,
                                   kiln_tensor_t* out);

/* ---- binary ------------------------------------------------------------------------------ */

/* a is the first operand, b the second; `alpha` is only read where noted. */
typedef enum kiln_binary_op {
  KILN_BINARY_ADD = 0,    /* a + alpha*b (bool: logical or) */
  KILN_BINARY_SUB,        /* a - alpha*b (rejected for bool, as torch) */
  KILN_BINARY_MUL,        /* a * b (bool: logical and) */
  KILN_BINARY_DIV,        /* (f) true division */
  KILN_BINARY_DIV_TRUNC,  /* rounding_mode='trunc' */
  KILN_BINARY_DIV_FLOOR,  /* rounding_mode='floor' / floor_divide, Python semantics */
  KILN_BINARY_REMAINDER,  /* Python %: result has the sign of b */
  KILN_BINARY_FMOD,       /* C fmod: result has the sign of a */
  KILN_BINARY_POW,        /* a ** b (integers: exact, wraps; negative exponent as torch) */
  KILN_BINARY_MAXIMUM,    /* NaN-propagating */
  KILN_BINARY_MINIMUM,    /* NaN-propagating */
  KILN_BINARY_ATAN2,      /* (f) atan2(a, b) */
  KILN_BINARY_EQ,         /* (b) comparisons in the compute dtype */
  KILN_BINARY_NE,         /* (b) */
  KILN_BINARY_LT,         /* (b) */
  KILN_BINARY_LE,         /* (b) */
  KILN_BINARY_GT,         /* (b) */
  KILN_BINARY_GE,         /* (b) */
  KILN_BINARY_LOGICAL_AND, /* (b) */
  KILN_BINARY_LOGICAL_OR,  /* (b) */
  KILN_BINARY_LOGICAL_XOR, /* (b) */
  KILN_BINARY_BITWISE_AND, /* (i) */
  KILN_BINARY_BITWISE_OR,  /* (i) */
  KILN_BINARY_BITWISE_XOR, /* (i) */
  /* Backward helpers for autograd: a = grad_output, b = the saved tensor named below. */
  KILN_BINARY_SIGMOID_BACKWARD,   /* (f) b = y: a * (1 - y) * y */
  KILN_BINARY_TANH_BACKWARD,      /* (f) b = y: a * (1 - y*y) */
  KILN_BINARY_GELU_BACKWARD,      /* (f) b = x, approximate='none' */
  KILN_BINARY_GELU_TANH_BACKWARD, /* (f) b = x, approximate='tanh' */
  KILN_BINARY_SILU_BACKWARD,      /* (f) b = x */
  KILN_BINARY_THRESHOLD_BACKWARD, /* b = x: x <= alpha ? 0 : a (relu backward: alpha = 0) */
  KILN_BINARY_LEAKY_RELU_BACKWARD, /* (f) b = x: x > 0 ? a : a * alpha (alpha = negative_slope) */
  KILN_BINARY_COUNT
} kiln_binary_op_t;

/* out = op(a, b) computed in `compute`, a and b broadcast to out's shape. A Python scalar operand
 * is passed as a rank-0 tensor (host memory). Errors: INVALID_ARGUMENT for a bad descriptor or op,
 * a shape that does not broadcast, an op undefined for `compute`, and "ZeroDivisionError" for an
 * integer DIV_TRUNC/DIV_FLOOR/REMAINDER/FMOD by zero. */
kiln_status_t kiln_kernel_binary(kiln_binary_op_t op, const kiln_tensor_t* a,
                                 const kiln_tensor_t* b, double alpha, kiln_dtype_t compute,
                                 kiln_tensor_t* out);

/* ---- ternary ----------------------------------------------------------------------------- */

typedef enum kiln_ternary_op {
  KILN_TERNARY_WHERE = 0,    /* a = condition (any dtype, != 0): cond ? b : c */
  KILN_TERNARY_LERP,         /* (f) a + c*(b - a) (c = weight), torch's two-sided formula */
  KILN_TERNARY_ADDCMUL,      /* a + scalar*b*c */
  KILN_TERNARY_ADDCDIV,      /* (f) a + scalar*b/c */
  KILN_TERNARY_CLAMP_TENSOR, /* clamp(a, min=b, max=c); b or c may be NULL (no bound); NaN
                                propagates; a NaN bound gives NaN */
  KILN_TERNARY_COUNT
} kiln_ternary_op_t;

/* out = op(a, b, c) computed in `compute`, all broadcast to out's shape. For WHERE the condition
 * `a` is read in its own dtype and `compute` is the dtype of b and c. Errors: as
 * kiln_kernel_binary. */
kiln_status_t kiln_kernel_ternary(kiln_ternary_op_t op, const kiln_tensor_t* a,
                                  const kiln_tensor_t* b, const kiln_tensor_t* c, double scalar,
                                  kiln_dtype_t compute, kiln_tensor_t* out);

/* ---- foreach (torch._foreach_*) ---------------------------------------------------------- */

/* The kernels above over lists of n entries (arrays borrowed, entry i of each list belongs
 * together): each entry is one call of the single-tensor kernel, computing in out[i]'s dtype
 * (f16/bf16 in f32, as torch's opmath), so results equal the eager ops'. out[i] may be the first
 * operand (in place). Errors: INVALID_ARGUMENT for n < 0 or a NULL list/entry, else the first
 * failing entry's error with its index; entries before it have been written. */

/* out[i] = op(x[i]). */
kiln_status_t kiln_kernel_foreach_unary(kiln_unary_op_t op, int n, kiln_tensor_t* const* x,
                                        kiln_tensor_t* const* out);
/* out[i] = op(a[i], y_i): y_i is b[i] when b != NULL, else the number scalars[i] (scalars !=
 * NULL) or `scalar`; alpha as in kiln_kernel_binary (ADD/SUB). */
kiln_status_t kiln_kernel_foreach_binary(kiln_binary_op_t op, int n, kiln_tensor_t* const* a,
                                         kiln_tensor_t* const* b, const double* scalars,
                                         double scalar, double alpha, kiln_tensor_t* const* out);
/* out[i] = op(a[i], b[i], c[i]) with the number scalars[i] (scalars != NULL) or `scalar` as
 * ADDCMUL/ADDCDIV's value; for LERP, c == NULL makes that number the weight. */
kiln_status_t kiln_kernel_foreach_ternary(kiln_ternary_op_t op, int n, kiln_tensor_t* const* a,
                                          kiln_tensor_t* const* b, kiln_tensor_t* const* c,
                                          const double* scalars, double scalar,
                                          kiln_tensor_t* const* out);

#ifdef __cplusplus
}
#endif
#endif /* KILN_KERNELS_ELEMENTWISE_H */
