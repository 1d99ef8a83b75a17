/* SPDX-License-Identifier: Apache-2.0 */
// ops_composite.cpp - aten ops whose CPU kernels have no generic implementation, written here as
// compositions of native kiln ops (so they never reach the CPU fallback).
#include <ATen/ops/clamp.h>
#include <ATen/ops/clamp_max.h>
#include <ATen/ops/clamp_min.h>
#include <ATen/ops/count_nonzero.h>
#include <ATen/ops/hardtanh_backward.h>
#include <ATen/ops/isfinite.h>
#include <ATen/ops/all.h>
#include <ATen/ops/mean.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/native_dropout_backward.h>
#include <ATen/ops/ne.h>
#include <ATen/ops/pow.h>
#include <ATen/ops/scalar_tensor.h>
#include <ATen/ops/sgn.h>
#include <ATen/ops/sign.h>
#include <ATen/ops/std.h>
#include <ATen/ops/sum.h>
#include <ATen/ops/var.h>
#include <ATen/ops/where.h>
#include <torch/library.h>

#include "ops_common.h"

namespace torch_kiln {
namespace {

using at::Tensor;

Tensor& clamp_min_tensor_out(const Tensor& self, const Tensor& lo, Tensor& out) {
  return at::clamp_outf(self, lo, std::nullopt, out);
}

Tensor& clamp_max_tensor_out(const Tensor& self, const Tensor& hi, Tensor& out) {
  return at::clamp_outf(self, std::nullopt, hi, out);
}

Tensor& sgn_out(const Tensor& self, Tensor& out) {
  if (self.is_complex()) return KILN_FALLBACK(sgn_out, self, out);
  return at::sign_outf(self, out);  // sgn is sign for real dtypes
}

Tensor& pow_scalar_base_out(const at::Scalar& base, const Tensor& exponent, Tensor& out) {
  Tensor b = at::scalar_tensor(base, exponent.options().device(at::kCPU).dtype(
                                         base.isFloatingPoint() ? at::kDouble : base.isBoolean() ? at::kBool : at::kLong));
  b.unsafeGetTensorImpl()->set_wrapped_number(true);
  return at::pow_outf(b, exponent, out);
}

Tensor native_dropout_backward(const Tensor& grad, const Tensor& mask, double scale) {
  TORCH_CHECK(mask.scalar_type() == at::kBool, "Mask should be Bool Scalar Type", mask.scalar_type());
  return at::mul(at::mul(grad, mask), scale);
}

Tensor& hardtanh_backward_out(const Tensor& grad, const Tensor& self, const at::Scalar& lo, const at::Scalar& hi,
                              Tensor& gi) {
  Tensor keep = (self > lo).logical_and_(self < hi);
  Tensor zero = at::scalar_tensor(0, grad.options().device(at::kCPU));
  return at::where_outf(keep, grad, zero, gi);
}

// aten computes var_mean / std_mean in one Welford pass. Where the mean is finite, var + mean
// agree with it within rounding; where it is not (an infinity in the row, a sum that overflows),
// Welford has its own NaN/inf pattern (inf then a finite value gives NaN), so those calls are
// recomputed by aten's CPU kernel (counted as a fallback).
bool all_finite(const Tensor& t) { return !at::isFloatingType(t.scalar_type()) || at::isfinite(t).all().item<bool>(); }

std::tuple<Tensor, Tensor> var_mean(const Tensor& self, at::OptionalIntArrayRef dim,
                                    const std::optional<at::Scalar>& correction, bool keepdim) {
  Tensor v = at::var(self, dim, correction, keepdim), m = at::mean(self, dim, keepdim);
  if (!all_finite(m)) return KILN_FALLBACK(var_mean_correction, self, dim, correction, keepdim);
  return {v, m};
}

std::tuple<Tensor, Tensor> std_mean(const Tensor& self, at::OptionalIntArrayRef dim,
                                    const std::optional<at::Scalar>& correction, bool keepdim) {
  Tensor v = at::std(self, dim, correction, keepdim), m = at::mean(self, dim, keepdim);
  if (!all_finite(m)) return KILN_FALLBACK(std_mean_correction, self, dim, correction, keepdim);
  return {v, m};
}

Tensor count_nonzero(const Tensor& self, at::IntArrayRef dims) {
  return at::sum(at::ne(self, 0), dims, false, at::kLong);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("clamp_min.Tensor_out", clamp_min_tensor_out);
  m.impl("clamp_max.Tensor_out", clamp_max_tensor_out);
  m.impl("sgn.out", sgn_out);
  m.impl("pow.Scalar_out", pow_scalar_base_out);
  m.impl("native_dropout_backward", native_dropout_backward);
  m.impl("hardtanh_backward.grad_input", hardtanh_backward_out);
  m.impl("var_mean.correction", var_mean);
  m.impl("std_mean.correction", std_mean);
  m.impl("count_nonzero.dim_IntList", count_nonzero);
}

}  // namespace torch_kiln
