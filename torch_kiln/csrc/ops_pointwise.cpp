/* SPDX-License-Identifier: Apache-2.0 */
// ops_pointwise.cpp - native kiln kernels for elementwise aten ops (unary, binary, ternary,
// fill, masked_fill). The shim only unpacks: type promotion and output sizing follow aten, the
// computation is kiln_kernel_unary/binary/ternary (src/kernels/). Cases kiln has no descriptor
// for (complex dtypes, rank > 8) go to the counted CPU fallback.
#include <ATen/ops/abs.h>
#include <ATen/ops/acos.h>
#include <ATen/ops/add.h>
#include <ATen/ops/addcdiv.h>
#include <ATen/ops/any.h>
#include <ATen/ops/addcmul.h>
#include <ATen/ops/asin.h>
#include <ATen/ops/atan.h>
#include <ATen/ops/atan2.h>
#include <ATen/ops/bitwise_and.h>
#include <ATen/ops/bitwise_not.h>
#include <ATen/ops/bitwise_or.h>
#include <ATen/ops/bitwise_xor.h>
#include <ATen/ops/ceil.h>
#include <ATen/ops/clamp.h>
#include <ATen/ops/clamp_max.h>
#include <ATen/ops/clamp_min.h>
#include <ATen/ops/cos.h>
#include <ATen/ops/cosh.h>
#include <ATen/ops/div.h>
#include <ATen/ops/elu.h>
#include <ATen/ops/eq.h>
#include <ATen/ops/erf.h>
#include <ATen/ops/erfc.h>
#include <ATen/ops/exp.h>
#include <ATen/ops/expm1.h>
#include <ATen/ops/fill.h>
#include <ATen/ops/floor.h>
#include <ATen/ops/floor_divide.h>
#include <ATen/ops/fmod.h>
#include <ATen/ops/ge.h>
#include <ATen/ops/gelu.h>
#include <ATen/ops/gelu_backward.h>
#include <ATen/ops/gt.h>
#include <ATen/ops/hardsigmoid.h>
#include <ATen/ops/isneginf.h>
#include <ATen/ops/isposinf.h>
#include <ATen/ops/hardswish.h>
#include <ATen/ops/hardtanh.h>
#include <ATen/ops/le.h>
#include <ATen/ops/leaky_relu.h>
#include <ATen/ops/leaky_relu_backward.h>
#include <ATen/ops/lerp.h>
#include <ATen/ops/log.h>
#include <ATen/ops/log10.h>
#include <ATen/ops/log1p.h>
#include <ATen/ops/log2.h>
#include <ATen/ops/logical_and.h>
#include <ATen/ops/logical_not.h>
#include <ATen/ops/logical_or.h>
#include <ATen/ops/logical_xor.h>
#include <ATen/ops/lt.h>
#include <ATen/ops/masked_fill.h>
#include <ATen/ops/maximum.h>
#include <ATen/ops/minimum.h>
#include <ATen/ops/mish.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/ne.h>
#include <ATen/ops/neg.h>
#include <ATen/ops/pow.h>
#include <ATen/ops/reciprocal.h>
#include <ATen/ops/relu.h>
#include <ATen/ops/remainder.h>
#include <ATen/ops/round.h>
#include <ATen/ops/rsqrt.h>
#include <ATen/ops/sigmoid.h>
#include <ATen/ops/sigmoid_backward.h>
#include <ATen/ops/sign.h>
#include <ATen/ops/silu.h>
#include <ATen/ops/silu_backward.h>
#include <ATen/ops/sin.h>
#include <ATen/ops/sinh.h>
#include <ATen/ops/softplus.h>
#include <ATen/ops/sqrt.h>
#include <ATen/ops/sub.h>
#include <ATen/ops/tan.h>
#include <ATen/ops/tanh.h>
#include <ATen/ops/tanh_backward.h>
#include <ATen/ops/threshold_backward.h>
#include <ATen/ops/trunc.h>
#include <ATen/ops/where.h>
#include <ATen/ops/zero.h>
#include <ATen/native/TypeProperties.h>
#include <torch/library.h>

#include <limits>

#include "ops_common.h"

extern "C" {
#include "kiln/kernels/elementwise.h"
}

namespace torch_kiln {
namespace {

using at::Scalar;
using at::ScalarType;
using at::Tensor;

// ---- generic drivers (return false when kiln cannot describe the operands) ----------------
// They call the kernel also for 0-size operands: it validates the op and dtypes first, so an op
// undefined for a dtype raises as on CPU even with no elements.

// A drivers' f32 compute for an f16/bf16 result (opmath: scalar operands keep float precision)
// is exact only when the tensor operands already have the result dtype and out has it too. CPU
// PyTorch first rounds other operands to the result dtype and rounds the result to it before
// casting to out's dtype; compute in the result dtype (the kernel's f16/bf16 compute) does that.
ScalarType exact_compute(ScalarType compute, ScalarType result, const Tensor& out,
                         std::initializer_list<const Tensor*> ins) {
  if (compute != at::kFloat || (result != at::kHalf && result != at::kBFloat16)) return compute;
  bool mixed = out.scalar_type() != result;
  for (const Tensor* t : ins)
    if (t->defined() && t->dim() > 0 && t->scalar_type() != result) mixed = true;
  return mixed ? result : compute;
}


bool run_unary(kiln_unary_op_t op, const Tensor& x, const kiln_unary_params_t* p,
               ScalarType compute, Tensor& out, std::optional<ScalarType> result = std::nullopt) {
  if (!all_describable({&x}) || !to_kiln_dtype(compute)) return false;
  check_device(out, x);
  resize_out(out, x.sizes(), {&x});
  if (!describable(out)) return false;
  check_out(out, result.value_or(compute), {&x});
  kiln_tensor_t dx = describe(x), dout = describe(out);
  KILN_CHECK(kiln_kernel_unary_ex(op, &dx, p, kdt(compute), &dout));
  return true;
}

bool run_binary(kiln_binary_op_t op, const Tensor& a, const Tensor& b, double alpha,
                ScalarType compute, ScalarType result, Tensor& out) {
  if (!all_describable({&a, &b}) || !to_kiln_dtype(compute)) return false;
  check_device(out, a);
  check_device(out, b);
  resize_out(out, at::infer_size_dimvector(a.sizes(), b.sizes()), {&a, &b});
  if (!describable(out)) return false;
  check_out(out, result, {&a, &b});
  compute = exact_compute(compute, result, out, {&a, &b});
  kiln_tensor_t da = describe(a), db = describe(b), dout = describe(out);
  KILN_CHECK(kiln_kernel_binary(op, &da, &db, alpha, kdt(compute), &dout));
  return true;
}

bool run_binary_scalar(kiln_binary_op_t op, const Tensor& a, const Scalar& b, double alpha,
                       ScalarType compute, ScalarType result, Tensor& out) {
  if (!all_describable({&a}) || !to_kiln_dtype(compute)) return false;
  check_device(out, a);
  resize_out(out, a.sizes(), {&a});
  if (!describable(out)) return false;
  check_out(out, result, {&a});
  ScalarBox sb(b, compute);
  kiln_tensor_t da = describe(a), dout = describe(out);
  KILN_CHECK(kiln_kernel_binary(op, &da, &sb.desc, alpha, kdt(compute), &dout));
  return true;
}

// a, b, c may be undefined only for CLAMP_TENSOR's bounds.
bool run_ternary(kiln_ternary_op_t op, const Tensor& a, const Tensor& b, const Tensor& c,
                 double scalar, ScalarType compute, Tensor& out,
                 std::optional<ScalarType> result = std::nullopt) {
  if (!all_describable({&a, &b, &c}) || !to_kiln_dtype(compute)) return false;
  check_device(out, a);
  check_device(out, b);
  check_device(out, c);
  at::DimVector shape(a.sizes().begin(), a.sizes().end());
  if (b.defined()) shape = at::infer_size_dimvector(shape, b.sizes());
  if (c.defined()) shape = at::infer_size_dimvector(shape, c.sizes());
  resize_out(out, shape, {&a, &b, &c});
  if (!describable(out)) return false;
  check_out(out, result.value_or(compute), {&a, &b, &c});
  compute = exact_compute(compute, result.value_or(compute), out, {&a, &b, &c});
  kiln_tensor_t da = describe(a), dout = describe(out), db, dc;
  if (b.defined()) db = describe(b);
  if (c.defined()) dc = describe(c);
  KILN_CHECK(kiln_kernel_ternary(op, &da, b.defined() ? &db : nullptr, c.defined() ? &dc : nullptr,
                                 scalar, kdt(compute), &dout));
  return true;
}

ScalarType rt(const Tensor& a, const Tensor& b) { return at::result_type(a, b); }

// aten's CPU kernels do f16/bf16 arithmetic in float ("opmath") with scalar operands (alpha,
// value, weight, wrapped numbers) kept in float; computing in f32 and rounding once on store
// gives exactly that. Comparisons keep the 16-bit compute dtype (the scalar is rounded first).
ScalarType opmath(ScalarType t) { return (t == at::kHalf || t == at::kBFloat16) ? at::kFloat : t; }
ScalarType rt(const Tensor& a, const Scalar& b) { return at::result_type(a, b); }

// ---- unary ---------------------------------------------------------------------------------

// Ops whose result keeps the input dtype (neg, abs, floor, ...).
#define KILN_UNARY_SAME(name, OPNAME, KOP)                                           \
  Tensor& name##_out(const Tensor& self, Tensor& out) {                              \
    if (run_unary(KOP, self, nullptr, self.scalar_type(), out)) return out;          \
    return KILN_FALLBACK(OPNAME, self, out);                                         \
  }
// Float ops: integer inputs compute in the default float dtype.
#define KILN_UNARY_FLOAT(name, OPNAME, KOP)                                          \
  Tensor& name##_out(const Tensor& self, Tensor& out) {                              \
    if (run_unary(KOP, self, nullptr, float_compute(self.scalar_type()), out)) return out; \
    return KILN_FALLBACK(OPNAME, self, out);                                         \
  }

KILN_UNARY_SAME(neg, neg_out, KILN_UNARY_NEG)
KILN_UNARY_SAME(abs, abs_out, KILN_UNARY_ABS)
KILN_UNARY_SAME(floor, floor_out, KILN_UNARY_FLOOR)
KILN_UNARY_SAME(ceil, ceil_out, KILN_UNARY_CEIL)
KILN_UNARY_SAME(round, round_out, KILN_UNARY_ROUND)
KILN_UNARY_SAME(trunc, trunc_out, KILN_UNARY_TRUNC)
KILN_UNARY_SAME(sign, sign_out, KILN_UNARY_SIGN)
KILN_UNARY_SAME(bitwise_not, bitwise_not_out, KILN_UNARY_BITWISE_NOT)
KILN_UNARY_FLOAT(exp, exp_out, KILN_UNARY_EXP)
KILN_UNARY_FLOAT(expm1, expm1_out, KILN_UNARY_EXPM1)
KILN_UNARY_FLOAT(log, log_out, KILN_UNARY_LOG)
KILN_UNARY_FLOAT(log1p, log1p_out, KILN_UNARY_LOG1P)
KILN_UNARY_FLOAT(log2, log2_out, KILN_UNARY_LOG2)
KILN_UNARY_FLOAT(log10, log10_out, KILN_UNARY_LOG10)
KILN_UNARY_FLOAT(sqrt, sqrt_out, KILN_UNARY_SQRT)
KILN_UNARY_FLOAT(rsqrt, rsqrt_out, KILN_UNARY_RSQRT)
KILN_UNARY_FLOAT(reciprocal, reciprocal_out, KILN_UNARY_RECIPROCAL)
KILN_UNARY_FLOAT(sin, sin_out, KILN_UNARY_SIN)
KILN_UNARY_FLOAT(cos, cos_out, KILN_UNARY_COS)
KILN_UNARY_FLOAT(tan, tan_out, KILN_UNARY_TAN)
KILN_UNARY_FLOAT(asin, asin_out, KILN_UNARY_ASIN)
KILN_UNARY_FLOAT(acos, acos_out, KILN_UNARY_ACOS)
KILN_UNARY_FLOAT(atan, atan_out, KILN_UNARY_ATAN)
KILN_UNARY_FLOAT(sinh, sinh_out, KILN_UNARY_SINH)
KILN_UNARY_FLOAT(cosh, cosh_out, KILN_UNARY_COSH)
KILN_UNARY_FLOAT(tanh, tanh_out, KILN_UNARY_TANH)
KILN_UNARY_FLOAT(sigmoid, sigmoid_out, KILN_UNARY_SIGMOID)
KILN_UNARY_FLOAT(erf, erf_out, KILN_UNARY_ERF)
KILN_UNARY_FLOAT(erfc, erfc_out, KILN_UNARY_ERFC)
KILN_UNARY_FLOAT(silu, silu_out, KILN_UNARY_SILU)
KILN_UNARY_FLOAT(mish, mish_out, KILN_UNARY_MISH)
KILN_UNARY_FLOAT(hardsigmoid, hardsigmoid_out, KILN_UNARY_HARDSIGMOID)
KILN_UNARY_FLOAT(hardswish, hardswish_out, KILN_UNARY_HARDSWISH)

Tensor& logical_not_out(const Tensor& self, Tensor& out) {
  if (run_unary(KILN_UNARY_LOGICAL_NOT, self, nullptr, self.scalar_type(), out, at::kBool)) return out;
  return KILN_FALLBACK(logical_not_out, self, out);
}

Tensor& gelu_out(const Tensor& self, c10::string_view approximate, Tensor& out) {
  kiln_unary_op_t op = approximate == "tanh" ? KILN_UNARY_GELU_TANH : KILN_UNARY_GELU;
  TORCH_CHECK(approximate == "tanh" || approximate == "none", "approximate argument must be either none or tanh.");
  if (run_unary(op, self, nullptr, self.scalar_type(), out)) return out;
  return KILN_FALLBACK(gelu_out, self, approximate, out);
}

Tensor relu(const Tensor& self) {
  TORCH_CHECK(self.scalar_type() != at::kBool, "Boolean inputs not supported for relu");
  Tensor out = at::empty_like(self);
  if (run_unary(KILN_UNARY_RELU, self, nullptr, self.scalar_type(), out)) return out;
  return KILN_FALLBACK(relu, self);
}

Tensor& relu_(Tensor& self) {
  TORCH_CHECK(self.scalar_type() != at::kBool, "Boolean inputs not supported for relu");
  if (run_unary(KILN_UNARY_RELU, self, nullptr, self.scalar_type(), self)) return self;
  return KILN_FALLBACK(relu_, self);
}

Tensor& leaky_relu_out(const Tensor& self, const Scalar& slope, Tensor& out) {
  kiln_unary_params_t p = {};
  p.alpha = checked_double(slope, opmath(self.scalar_type()));
  if (run_unary(KILN_UNARY_LEAKY_RELU, self, &p, self.scalar_type(), out)) return out;
  return KILN_FALLBACK(leaky_relu_out, self, slope, out);
}

Tensor& elu_out(const Tensor& self, const Scalar& alpha, const Scalar& scale,
                const Scalar& input_scale, Tensor& out) {
  kiln_unary_params_t p = {};
  p.alpha = checked_double(alpha, opmath(self.scalar_type()));
  p.scale = checked_double(scale, opmath(self.scalar_type()));
  p.input_scale = checked_double(input_scale, opmath(self.scalar_type()));
  if (run_unary(KILN_UNARY_ELU, self, &p, self.scalar_type(), out)) return out;
  return KILN_FALLBACK(elu_out, self, alpha, scale, input_scale, out);
}

Tensor& softplus_out(const Tensor& self, const Scalar& beta, const Scalar& threshold, Tensor& out) {
  kiln_unary_params_t p = {};
  p.alpha = checked_double(beta, opmath(self.scalar_type()));
  p.threshold = checked_double(threshold, opmath(self.scalar_type()));
  if (run_unary(KILN_UNARY_SOFTPLUS, self, &p, self.scalar_type(), out)) return out;
  return KILN_FALLBACK(softplus_out, self, beta, threshold, out);
}

ScalarType clamp_compute(const Tensor& self, const std::optional<Scalar>& lo, const std::optional<Scalar>& hi) {
  ScalarType t = self.scalar_type();
  if (lo.has_value()) t = at::result_type(self, *lo);
  if (hi.has_value()) t = c10::promoteTypes(t, at::result_type(self, *hi));
  return t;
}

Tensor& clamp_out(const Tensor& self, const std::optional<Scalar>& lo, const std::optional<Scalar>& hi, Tensor& out) {
  TORCH_CHECK(lo.has_value() || hi.has_value(), "torch.clamp: At least one of 'min' or 'max' must not be None");
  kiln_unary_params_t p = {};
  p.has_min = lo.has_value();
  p.has_max = hi.has_value();
  ScalarType compute = clamp_compute(self, lo, hi);
  if (p.has_min && p.has_max && (std::isnan(lo->toDouble()) || std::isnan(hi->toDouble()))) {
    resize_out(out, self.sizes(), {&self});  // aten: a NaN bound makes every element NaN, unchecked
    return out.fill_(std::numeric_limits<double>::quiet_NaN());
  }
  if (p.has_min) p.min = checked_double(*lo, compute);
  if (p.has_max) p.max = checked_double(*hi, compute);
  bool exact = (!lo.has_value() || exact_as_double(*lo)) && (!hi.has_value() || exact_as_double(*hi));
  if (exact && run_unary(KILN_UNARY_CLAMP, self, &p, compute, out)) return out;
  return KILN_FALLBACK(clamp_out, self, lo, hi, out);
}

Tensor& clamp_min_out(const Tensor& self, const Scalar& lo, Tensor& out) {
  kiln_unary_params_t p = {};
  p.has_min = 1;
  p.min = checked_double(lo, at::result_type(self, lo));
  if (exact_as_double(lo) && run_unary(KILN_UNARY_CLAMP, self, &p, at::result_type(self, lo), out)) return out;
  return KILN_FALLBACK(clamp_min_out, self, lo, out);
}

Tensor& clamp_max_out(const Tensor& self, const Scalar& hi, Tensor& out) {
  kiln_unary_params_t p = {};
  p.has_max = 1;
  p.max = checked_double(hi, at::result_type(self, hi));
  if (exact_as_double(hi) && run_unary(KILN_UNARY_CLAMP, self, &p, at::result_type(self, hi), out)) return out;
  return KILN_FALLBACK(clamp_max_out, self, hi, out);
}

Tensor& hardtanh_out(const Tensor& self, const Scalar& lo, const Scalar& hi, Tensor& out) {
  kiln_unary_params_t p = {};
  p.has_min = p.has_max = 1;
  p.min = checked_double(lo, self.scalar_type());
  p.max = checked_double(hi, self.scalar_type());
  if (run_unary(KILN_UNARY_CLAMP, self, &p, self.scalar_type(), out)) return out;
  return KILN_FALLBACK(hardtanh_out, self, lo, hi, out);
}

Tensor& pow_scalar_out(const Tensor& self, const Scalar& exponent, Tensor& out) {
  kiln_unary_params_t p = {};
  ScalarType compute = at::result_type(self, exponent);
  // aten reads the exponent as a double for f32/f64 (no range check), in the dtype otherwise.
  p.alpha = checked_double(exponent, compute == at::kFloat ? at::kDouble : compute);
  bool int_ok = !at::isIntegralType(compute, true) || (exponent.isIntegral(false) && exponent.toLong() >= 0);
  if (int_ok && run_unary(KILN_UNARY_POW_SCALAR, self, &p, compute, out)) return out;
  return KILN_FALLBACK(pow_Tensor_Scalar_out, self, exponent, out);
}

// ---- binary --------------------------------------------------------------------------------

// aten's add/sub (ufunc kernels) read a 0-dim operand after it was cast to the result dtype
// (TensorIterator's scalar_value), unlike mul/div, which keep its original value in float: an
// f16/bf16 `x + 0.1` adds half(0.1) in float and rounds once. The same rounding here.
c10::MaybeOwned<Tensor> add_operand(const Tensor& t, ScalarType r) {
  if (t.dim() != 0 || t.scalar_type() == r || (r != at::kHalf && r != at::kBFloat16))
    return c10::MaybeOwned<Tensor>::borrowed(t);
  return c10::MaybeOwned<Tensor>::owned(t.to(r));
}

// alpha as the kernels take it: the common alpha=1 without the checked conversion
double alpha_value(const Scalar& alpha, ScalarType r) {
  if (alpha.isIntegral(false) && alpha.toLong() == 1) return 1.0;
  return checked_double(alpha, r);
}

Tensor& add_out(const Tensor& self, const Tensor& other, const Scalar& alpha, Tensor& out) {
  ScalarType r = rt(self, other);
  double a = alpha_value(alpha, r);
  if (exact_as_double(alpha) && run_binary(KILN_BINARY_ADD, *add_operand(self, r),
                                           *add_operand(other, r), a, opmath(r), r, out))
    return out;
  return KILN_FALLBACK(add_out, self, other, alpha, out);
}

Tensor& sub_out(const Tensor& self, const Tensor& other, const Scalar& alpha, Tensor& out) {
  TORCH_CHECK(self.scalar_type() != at::kBool || other.scalar_type() != at::kBool,
              "Subtraction, the `-` operator, with two bool tensors is not supported. "
              "Use the `^` or `logical_xor()` operator instead.");
  ScalarType r = rt(self, other);
  double a = alpha_value(alpha, r);
  if (exact_as_double(alpha) && run_binary(KILN_BINARY_SUB, *add_operand(self, r),
                                           *add_operand(other, r), a, opmath(r), r, out))
    return out;
  return KILN_FALLBACK(sub_out, self, other, alpha, out);
}

Tensor& mul_out(const Tensor& self, const Tensor& other, Tensor& out) {
  ScalarType r = rt(self, other);
  if (run_binary(KILN_BINARY_MUL, self, other, 1.0, opmath(r), r, out)) return out;
  return KILN_FALLBACK(mul_out, self, other, out);
}

Tensor& div_out(const Tensor& self, const Tensor& other, Tensor& out) {
  ScalarType r = float_compute(rt(self, other));
  if (run_binary(KILN_BINARY_DIV, self, other, 1.0, opmath(r), r, out)) return out;
  return KILN_FALLBACK(div_out, self, other, out);
}

Tensor& div_mode_out(const Tensor& self, const Tensor& other, std::optional<c10::string_view> mode, Tensor& out) {
  if (!mode.has_value()) return div_out(self, other, out);
  TORCH_CHECK(*mode == "trunc" || *mode == "floor",
              "div expected rounding_mode to be one of None, 'trunc', or 'floor' but found '", *mode, "'");
  ScalarType r = rt(self, other);
  kiln_binary_op_t op = *mode == "trunc" ? KILN_BINARY_DIV_TRUNC : KILN_BINARY_DIV_FLOOR;
  if (run_binary(op, self, other, 1.0, r, r, out)) return out;
  return KILN_FALLBACK(div_out_mode, self, other, mode, out);
}

#define KILN_BINARY_SIMPLE(name, OPNAME, KOP)                                        \
  Tensor& name(const Tensor& self, const Tensor& other, Tensor& out) {               \
    ScalarType r = rt(self, other);                                                  \
    if (run_binary(KOP, self, other, 1.0, r, r, out)) return out;                    \
    return KILN_FALLBACK(OPNAME, self, other, out);                                  \
  }

KILN_BINARY_SIMPLE(remainder_out, remainder_Tensor_out, KILN_BINARY_REMAINDER)
KILN_BINARY_SIMPLE(fmod_out, fmod_Tensor_out, KILN_BINARY_FMOD)
KILN_BINARY_SIMPLE(floor_divide_out, floor_divide_out, KILN_BINARY_DIV_FLOOR)
KILN_BINARY_SIMPLE(pow_tensor_out, pow_Tensor_Tensor_out, KILN_BINARY_POW)
KILN_BINARY_SIMPLE(maximum_out, maximum_out, KILN_BINARY_MAXIMUM)
KILN_BINARY_SIMPLE(minimum_out, minimum_out, KILN_BINARY_MINIMUM)
KILN_BINARY_SIMPLE(bitwise_and_out, bitwise_and_Tensor_out, KILN_BINARY_BITWISE_AND)
KILN_BINARY_SIMPLE(bitwise_or_out, bitwise_or_Tensor_out, KILN_BINARY_BITWISE_OR)
KILN_BINARY_SIMPLE(bitwise_xor_out, bitwise_xor_Tensor_out, KILN_BINARY_BITWISE_XOR)

Tensor& atan2_out(const Tensor& self, const Tensor& other, Tensor& out) {
  ScalarType r = float_compute(rt(self, other));
  if (run_binary(KILN_BINARY_ATAN2, self, other, 1.0, r, r, out)) return out;
  return KILN_FALLBACK(atan2_out, self, other, out);
}

// Comparisons and logical ops: compute in the promoted dtype, write bool (or out's dtype).
#define KILN_COMPARE(name, OPT, OPS, KOP)                                             \
  Tensor& name##_tensor_out(const Tensor& self, const Tensor& other, Tensor& out) {   \
    if (run_binary(KOP, self, other, 1.0, rt(self, other), at::kBool, out)) return out; \
    return KILN_FALLBACK(OPT, self, other, out);                                      \
  }                                                                                   \
  Tensor& name##_scalar_out(const Tensor& self, const Scalar& other, Tensor& out) {   \
    if (run_binary_scalar(KOP, self, other, 1.0, rt(self, other), at::kBool, out)) return out; \
    return KILN_FALLBACK(OPS, self, other, out);                                      \
  }

KILN_COMPARE(eq, eq_Tensor_out, eq_Scalar_out, KILN_BINARY_EQ)
KILN_COMPARE(ne, ne_Tensor_out, ne_Scalar_out, KILN_BINARY_NE)
KILN_COMPARE(lt, lt_Tensor_out, lt_Scalar_out, KILN_BINARY_LT)
KILN_COMPARE(le, le_Tensor_out, le_Scalar_out, KILN_BINARY_LE)
KILN_COMPARE(gt, gt_Tensor_out, gt_Scalar_out, KILN_BINARY_GT)
KILN_COMPARE(ge, ge_Tensor_out, ge_Scalar_out, KILN_BINARY_GE)

#define KILN_LOGICAL(name, KOP)                                                       \
  Tensor& name##_out(const Tensor& self, const Tensor& other, Tensor& out) {          \
    if (run_binary(KOP, self, other, 1.0, rt(self, other), at::kBool, out)) return out; \
    return KILN_FALLBACK(name##_out, self, other, out);                               \
  }

KILN_LOGICAL(logical_and, KILN_BINARY_LOGICAL_AND)
KILN_LOGICAL(logical_or, KILN_BINARY_LOGICAL_OR)
KILN_LOGICAL(logical_xor, KILN_BINARY_LOGICAL_XOR)

// isposinf / isneginf: x == +-inf for floats; never true for integers.
Tensor& isinf_sign_out(bool neg, const Tensor& self, Tensor& out) {
  TORCH_CHECK(out.scalar_type() == at::kBool, "isposinf/isneginf does not support non-boolean outputs.");
  if (!at::isFloatingType(self.scalar_type())) {
    at::native::resize_output(out, self.sizes());
    return out.fill_(false);
  }
  double inf = std::numeric_limits<double>::infinity();
  if (run_binary_scalar(KILN_BINARY_EQ, self, neg ? -inf : inf, 1.0, self.scalar_type(), at::kBool, out)) return out;
  return neg ? KILN_FALLBACK(isneginf_out, self, out) : KILN_FALLBACK(isposinf_out, self, out);
}

Tensor& isneginf_out(const Tensor& self, Tensor& out) { return isinf_sign_out(true, self, out); }
Tensor& isposinf_out(const Tensor& self, Tensor& out) { return isinf_sign_out(false, self, out); }

// ---- activation backward -----------------------------------------------------------------

Tensor& sigmoid_backward_out(const Tensor& grad, const Tensor& y, Tensor& out) {
  ScalarType r = rt(grad, y);
  if (run_binary(KILN_BINARY_SIGMOID_BACKWARD, grad, y, 1.0, r, r, out)) return out;
  return KILN_FALLBACK(sigmoid_backward_grad_input, grad, y, out);
}

Tensor& tanh_backward_out(const Tensor& grad, const Tensor& y, Tensor& out) {
  ScalarType r = rt(grad, y);
  if (run_binary(KILN_BINARY_TANH_BACKWARD, grad, y, 1.0, r, r, out)) return out;
  return KILN_FALLBACK(tanh_backward_grad_input, grad, y, out);
}

Tensor& gelu_backward_out(const Tensor& grad, const Tensor& x, c10::string_view approximate, Tensor& out) {
  kiln_binary_op_t op = approximate == "tanh" ? KILN_BINARY_GELU_TANH_BACKWARD : KILN_BINARY_GELU_BACKWARD;
  ScalarType r = rt(grad, x);
  if (run_binary(op, grad, x, 1.0, r, r, out)) return out;
  return KILN_FALLBACK(gelu_backward_grad_input, grad, x, approximate, out);
}

Tensor& silu_backward_out(const Tensor& grad, const Tensor& x, Tensor& out) {
  ScalarType r = rt(grad, x);
  if (run_binary(KILN_BINARY_SILU_BACKWARD, grad, x, 1.0, r, r, out)) return out;
  return KILN_FALLBACK(silu_backward_grad_input, grad, x, out);
}

Tensor& threshold_backward_out(const Tensor& grad, const Tensor& x, const Scalar& threshold, Tensor& out) {
  ScalarType r = rt(grad, x);
  if (run_binary(KILN_BINARY_THRESHOLD_BACKWARD, grad, x, checked_double(threshold, opmath(r)), r, r, out)) return out;
  return KILN_FALLBACK(threshold_backward_grad_input, grad, x, threshold, out);
}

Tensor& leaky_relu_backward_out(const Tensor& grad, const Tensor& x, const Scalar& slope,
                                bool self_is_result, Tensor& out) {
  TORCH_CHECK(!self_is_result || slope.toDouble() >= 0.0,
              "In-place leakyReLu backward calculation is triggered with a negative slope which is not supported.");
  ScalarType r = rt(grad, x);
  if (run_binary(KILN_BINARY_LEAKY_RELU_BACKWARD, grad, x, slope.toDouble(), r, r, out)) return out;
  return KILN_FALLBACK(leaky_relu_backward_grad_input, grad, x, slope, self_is_result, out);
}

// ---- ternary -------------------------------------------------------------------------------

Tensor& where_out(const Tensor& cond, const Tensor& self, const Tensor& other, Tensor& out) {
  TORCH_CHECK(cond.scalar_type() == at::kBool || cond.scalar_type() == at::kByte,
              "where expected condition to be a boolean tensor, but got a tensor with dtype ", cond.scalar_type());
  ScalarType r = rt(self, other);
  if (run_ternary(KILN_TERNARY_WHERE, cond, self, other, 0.0, r, out)) return out;
  return KILN_FALLBACK(where_self_out, cond, self, other, out);
}

Tensor where_self(const Tensor& cond, const Tensor& self, const Tensor& other) {
  ScalarType r = rt(self, other);
  at::Device dev = self.is_privateuseone() ? self.device() : other.is_privateuseone() ? other.device() : cond.device();
  Tensor out = at::empty({0}, self.options().dtype(r).device(dev));
  return where_out(cond, self, other, out);
}

Tensor& lerp_scalar_out(const Tensor& self, const Tensor& end, const Scalar& weight, Tensor& out) {
  TORCH_CHECK(self.scalar_type() == end.scalar_type(), "expected dtype ", self.scalar_type(),
              " for `end` but got dtype ", end.scalar_type());
  ScalarBox w(checked_scalar(weight, opmath(self.scalar_type())), self.scalar_type());
  Tensor wt = at::from_blob(&w.v, {}, at::TensorOptions().dtype(at::isFloatingType(self.scalar_type()) ? at::kDouble : at::kLong));
  if (run_ternary(KILN_TERNARY_LERP, self, end, wt, 0.0, opmath(self.scalar_type()), out, self.scalar_type()))
    return out;
  return KILN_FALLBACK(lerp_Scalar_out, self, end, weight, out);
}

ScalarType rt3(const Tensor& a, const Tensor& b, const Tensor& c) {
  at::native::ResultTypeState st = {};
  st = at::native::update_result_type_state(a, st);
  st = at::native::update_result_type_state(b, st);
  st = at::native::update_result_type_state(c, st);
  return at::native::result_type(st);
}

// As aten: end has self's dtype; a 0-dim weight may have another, and all three promote (an int
// self with an f16 0-dim weight lerps in f16).
Tensor& lerp_tensor_out(const Tensor& self, const Tensor& end, const Tensor& weight, Tensor& out) {
  TORCH_CHECK(self.scalar_type() == end.scalar_type(), "expected dtype ", self.scalar_type(),
              " for `end` but got dtype ", end.scalar_type());
  TORCH_CHECK(weight.dim() == 0 || self.scalar_type() == weight.scalar_type(), "expected dtype ",
              self.scalar_type(), " for `weight` but got dtype ", weight.scalar_type());
  ScalarType r = rt3(self, end, weight);
  if (run_ternary(KILN_TERNARY_LERP, self, end, weight, 0.0, opmath(r), out, r)) return out;
  return KILN_FALLBACK(lerp_Tensor_out, self, end, weight, out);
}

Tensor& addcmul_out(const Tensor& self, const Tensor& t1, const Tensor& t2, const Scalar& value, Tensor& out) {
  ScalarType r = rt3(self, t1, t2);
  if (run_ternary(KILN_TERNARY_ADDCMUL, self, t1, t2, checked_double(value, opmath(r)), opmath(r), out, r))
    return out;
  return KILN_FALLBACK(addcmul_out, self, t1, t2, value, out);
}

Tensor& addcdiv_out(const Tensor& self, const Tensor& t1, const Tensor& t2, const Scalar& value, Tensor& out) {
  TORCH_CHECK(!(at::isIntegralType(t1.scalar_type(), true) && at::isIntegralType(t2.scalar_type(), true)),
              "Integer division with addcdiv is no longer supported, and in a future release addcdiv will "
              "perform a true division of tensor1 and tensor2. The historic addcdiv behavior can be "
              "implemented as (input + value * torch.trunc(tensor1 / tensor2)).to(input.dtype) for integer "
              "inputs and as (input + value * tensor1 / tensor2) for float inputs. The future addcdiv "
              "behavior is just the latter implementation: (input + value * tensor1 / tensor2), for all "
              "dtypes.");
  ScalarType r = rt3(self, t1, t2);
  if (run_ternary(KILN_TERNARY_ADDCDIV, self, t1, t2, checked_double(value, opmath(r)), opmath(r), out, r))
    return out;
  return KILN_FALLBACK(addcdiv_out, self, t1, t2, value, out);
}

Tensor& clamp_tensor_out(const Tensor& self, const std::optional<Tensor>& lo,
                         const std::optional<Tensor>& hi, Tensor& out) {
  Tensor l = lo.has_value() ? *lo : Tensor(), h = hi.has_value() ? *hi : Tensor();
  TORCH_CHECK(l.defined() || h.defined(), "torch.clamp: At least one of 'min' or 'max' must not be None");
  ScalarType r = self.scalar_type();
  if (l.defined()) r = c10::promoteTypes(r, at::result_type(self, l));
  if (h.defined()) r = c10::promoteTypes(r, at::result_type(self, h));
  if (run_ternary(KILN_TERNARY_CLAMP_TENSOR, self, l, h, 0.0, r, out)) return out;
  return KILN_FALLBACK(clamp_Tensor_out, self, lo, hi, out);
}

// ---- fill / masked_fill ------------------------------------------------------------------

// fill_ writes one value, so an expanded (self-overlapping) self is fine, as on CPU: the
// kernel writes each memory location once through collapse_broadcast. The value is range
// checked in self's dtype; CPU's one-element fast path admits any real value into f16/bf16.
Tensor& fill_scalar(Tensor& self, const Scalar& value) {
  if (!describable(self)) return KILN_FALLBACK(fill__Scalar, self, value);
  Scalar v = self.numel() == 1 ? single_fill_scalar(value, self.scalar_type())
                               : checked_scalar(value, self.scalar_type());
  if (self.numel() == 0) return self;
  kiln_tensor_t d = describe(collapse_broadcast(self));
  if (v.isIntegral(false))
    KILN_CHECK(kiln_kernel_fill_i64(&d, v.toLong()));
  else
    KILN_CHECK(kiln_kernel_fill(&d, v.toDouble()));
  return self;
}

// As aten on CPU: the value is copied in (a cast, no range check). A CPU 0-dim value is a host
// scalar moved to the device, so it is copied too; another kiln device's value is read as a
// Scalar (aten's path for mismatched devices), with the range check.
Tensor& fill_tensor(Tensor& self, const Tensor& value) {
  TORCH_CHECK(value.dim() == 0, "fill_ only supports 0-dimension value tensor but got tensor with ",
              value.dim(), " dimensions.");
  if (value.device() != self.device() && !value.is_cpu()) return fill_scalar(self, value.item());
  self.copy_(self.is_alias_of(value) ? value.clone() : value);
  return self;
}

Tensor& zero_(Tensor& self) { return fill_scalar(self, 0); }

Tensor& masked_fill_scalar(Tensor& self, const Tensor& mask, const Scalar& value) {
  TORCH_CHECK(mask.scalar_type() == at::kBool, "masked_fill_ only supports boolean masks, but got mask with dtype ",
              mask.scalar_type());
  TORCH_CHECK(at::is_expandable_to(mask.sizes(), self.sizes()), "masked_fill_: mask of shape ", mask.sizes(),
              " cannot be broadcast to ", self.sizes());
  if (!all_describable({&self, &mask})) return KILN_FALLBACK(masked_fill__Scalar, self, mask, value);
  check_device(self, mask);
  ScalarBox sb(checked_scalar(value, self.scalar_type()), self.scalar_type());
  if (self.numel() == 0) return self;
  Tensor target = self, m = mask;
  if (at::has_internal_overlap(self) == at::MemOverlap::Yes) {
    TORCH_WARN("Use of masked_fill_ on expanded tensors is deprecated. Please clone() the tensor before performing "
               "this operation. This also applies to advanced indexing e.g. tensor[mask] = scalar");
    // Each memory location once: it takes the value where any element aliasing it is masked.
    target = collapse_broadcast(self);
    std::vector<int64_t> dims;
    for (int64_t i = 0; i < self.dim(); i++)
      if (target.size(i) != self.size(i)) dims.push_back(i);
    m = at::any(mask.expand(self.sizes()), dims, /*keepdim=*/true);
  }
  at::assert_no_partial_overlap(target, m);
  kiln_tensor_t dm = describe(m), ds = describe(target);
  KILN_CHECK(kiln_kernel_ternary(KILN_TERNARY_WHERE, &dm, &sb.desc, &ds, 0.0, kdt(self.scalar_type()), &ds));
  return self;
}

Tensor& masked_fill_tensor(Tensor& self, const Tensor& mask, const Tensor& value) {
  TORCH_CHECK(value.dim() == 0, "masked_fill_ only supports a 0-dimensional value tensor, but got tensor with ",
              value.dim(), " dimension(s).");
  return masked_fill_scalar(self, mask, value.item());
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("neg.out", neg_out);
  m.impl("abs.out", abs_out);
  m.impl("floor.out", floor_out);
  m.impl("ceil.out", ceil_out);
  m.impl("round.out", round_out);
  m.impl("trunc.out", trunc_out);
  m.impl("sign.out", sign_out);
  m.impl("bitwise_not.out", bitwise_not_out);
  m.impl("logical_not.out", logical_not_out);
  m.impl("exp.out", exp_out);
  m.impl("expm1.out", expm1_out);
  m.impl("log.out", log_out);
  m.impl("log1p.out", log1p_out);
  m.impl("log2.out", log2_out);
  m.impl("log10.out", log10_out);
  m.impl("sqrt.out", sqrt_out);
  m.impl("rsqrt.out", rsqrt_out);
  m.impl("reciprocal.out", reciprocal_out);
  m.impl("sin.out", sin_out);
  m.impl("cos.out", cos_out);
  m.impl("tan.out", tan_out);
  m.impl("asin.out", asin_out);
  m.impl("acos.out", acos_out);
  m.impl("atan.out", atan_out);
  m.impl("sinh.out", sinh_out);
  m.impl("cosh.out", cosh_out);
  m.impl("tanh.out", tanh_out);
  m.impl("sigmoid.out", sigmoid_out);
  m.impl("erf.out", erf_out);
  m.impl("erfc.out", erfc_out);
  m.impl("silu.out", silu_out);
  m.impl("mish.out", mish_out);
  m.impl("hardsigmoid.out", hardsigmoid_out);
  m.impl("hardswish.out", hardswish_out);
  m.impl("gelu.out", gelu_out);
  m.impl("relu", relu);
  m.impl("relu_", relu_);
  m.impl("leaky_relu.out", leaky_relu_out);
  m.impl("elu.out", elu_out);
  m.impl("softplus.out", softplus_out);
  m.impl("clamp.out", clamp_out);
  m.impl("clamp_min.out", clamp_min_out);
  m.impl("clamp_max.out", clamp_max_out);
  m.impl("hardtanh.out", hardtanh_out);
  m.impl("pow.Tensor_Scalar_out", pow_scalar_out);
  m.impl("add.out", add_out);
  m.impl("sub.out", sub_out);
  m.impl("mul.out", mul_out);
  m.impl("div.out", div_out);
  m.impl("div.out_mode", div_mode_out);
  m.impl("remainder.Tensor_out", remainder_out);
  m.impl("fmod.Tensor_out", fmod_out);
  m.impl("floor_divide.out", floor_divide_out);
  m.impl("pow.Tensor_Tensor_out", pow_tensor_out);
  m.impl("maximum.out", maximum_out);
  m.impl("minimum.out", minimum_out);
  m.impl("atan2.out", atan2_out);
  m.impl("bitwise_and.Tensor_out", bitwise_and_out);
  m.impl("bitwise_or.Tensor_out", bitwise_or_out);
  m.impl("bitwise_xor.Tensor_out", bitwise_xor_out);
  m.impl("eq.Tensor_out", eq_tensor_out);
  m.impl("eq.Scalar_out", eq_scalar_out);
  m.impl("ne.Tensor_out", ne_tensor_out);
  m.impl("ne.Scalar_out", ne_scalar_out);
  m.impl("lt.Tensor_out", lt_tensor_out);
  m.impl("lt.Scalar_out", lt_scalar_out);
  m.impl("le.Tensor_out", le_tensor_out);
  m.impl("le.Scalar_out", le_scalar_out);
  m.impl("gt.Tensor_out", gt_tensor_out);
  m.impl("gt.Scalar_out", gt_scalar_out);
  m.impl("ge.Tensor_out", ge_tensor_out);
  m.impl("ge.Scalar_out", ge_scalar_out);
  m.impl("logical_and.out", logical_and_out);
  m.impl("isneginf.out", isneginf_out);
  m.impl("isposinf.out", isposinf_out);
  m.impl("logical_or.out", logical_or_out);
  m.impl("logical_xor.out", logical_xor_out);
  m.impl("sigmoid_backward.grad_input", sigmoid_backward_out);
  m.impl("tanh_backward.grad_input", tanh_backward_out);
  m.impl("gelu_backward.grad_input", gelu_backward_out);
  m.impl("silu_backward.grad_input", silu_backward_out);
  m.impl("threshold_backward.grad_input", threshold_backward_out);
  m.impl("leaky_relu_backward.grad_input", leaky_relu_backward_out);
  m.impl("where.self_out", where_out);
  m.impl("where.self", where_self);
  m.impl("lerp.Scalar_out", lerp_scalar_out);
  m.impl("lerp.Tensor_out", lerp_tensor_out);
  m.impl("addcmul.out", addcmul_out);
  m.impl("addcdiv.out", addcdiv_out);
  m.impl("clamp.Tensor_out", clamp_tensor_out);
  m.impl("fill_.Scalar", fill_scalar);
  m.impl("fill_.Tensor", fill_tensor);
  m.impl("zero_", zero_);
  m.impl("masked_fill_.Scalar", masked_fill_scalar);
  m.impl("masked_fill_.Tensor", masked_fill_tensor);
}

}  // namespace torch_kiln
