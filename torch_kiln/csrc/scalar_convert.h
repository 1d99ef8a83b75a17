/* SPDX-License-Identifier: Apache-2.0 */
// scalar_convert.h - the one place where the shim turns a Python scalar (c10::Scalar) into a
// value of a tensor dtype, with the range checks of aten's CPU kernels.
//
// aten's CPU kernels read a Scalar argument as a value of their dtype with Scalar::to<T>()
// (c10::checked_convert), which raises "value cannot be converted to type int8_t without
// overflow" for a value outside the dtype's range: NaN/inf or 1000 into int8, 2**40 into int32,
// 1e39 into float, 1e6 into f16 (an infinity fits any floating dtype; a negative integer down to
// -max wraps into an unsigned dtype; anything converts to bool). Every native op that hands a
// Scalar to a kernel as a value of a tensor dtype goes through checked_scalar with the dtype the
// CPU kernel converts to: the tensor's dtype (fill, masked_fill, scatter value, clamp bounds,
// alpha) or the opmath dtype, float for f16/bf16 (addcmul value, lerp weight, activation
// parameters, addmm alpha/beta).
//
// Operands that aten wraps into 0-dim tensors instead (add/mul/eq/... with a Python number) are
// cast by TensorIterator without a range check (add(int8, 1000) adds -24) and must NOT come here.
#pragma once

#include <ATen/ATen.h>

#include <cmath>
#include <limits>

namespace torch_kiln {

namespace detail {

// f16/bf16: aten's kernels reject a finite value beyond the format's range (65504 for f16) and
// a complex value with an imaginary part; the value is rounded through float, as c10 does.
template <typename T>
double checked_reduced_float(const at::Scalar& s, const char* name) {
  TORCH_CHECK(!s.isComplex() || s.toComplexDouble().imag() == 0, "value cannot be converted to type ", name,
              " without overflow");
  double v = s.isComplex() ? s.toComplexDouble().real() : s.toDouble();
  TORCH_CHECK(!std::isfinite(v) || (v >= static_cast<double>(std::numeric_limits<T>::lowest()) &&
                                    v <= static_cast<double>(std::numeric_limits<T>::max())),
              "value cannot be converted to type ", name, " without overflow");
  return static_cast<double>(static_cast<float>(T(static_cast<float>(v))));
}

}  // namespace detail

// `s` converted to dtype `t` with the CPU kernels' range check (raises c10::Error, a Python
// RuntimeError, with aten's message). The result holds the converted value: a double exactly
// representable in `t` for floating `t`, an int64 for integral `t` (an unsigned dtype's wrapped
// value), a bool for kBool. Dtypes kiln has no kernels for come back unchanged (those ops run on
// the CPU fallback, which checks).
inline at::Scalar checked_scalar(const at::Scalar& s, at::ScalarType t) {
  switch (t) {
    case at::kBool: return at::Scalar(s.to<bool>());
    case at::kHalf: return at::Scalar(detail::checked_reduced_float<at::Half>(s, "c10::Half"));
    case at::kBFloat16: return at::Scalar(detail::checked_reduced_float<at::BFloat16>(s, "c10::BFloat16"));
    case at::kFloat: return at::Scalar(static_cast<double>(s.to<float>()));
    case at::kDouble: return at::Scalar(s.to<double>());
    case at::kByte: return at::Scalar(static_cast<int64_t>(s.to<uint8_t>()));
    case at::kChar: return at::Scalar(static_cast<int64_t>(s.to<int8_t>()));
    case at::kShort: return at::Scalar(static_cast<int64_t>(s.to<int16_t>()));
    case at::kInt: return at::Scalar(static_cast<int64_t>(s.to<int32_t>()));
    case at::kLong: return at::Scalar(s.to<int64_t>());
    default: return s;
  }
}

// True if `s` survives the trip through a double exactly (kiln's kernel parameters are doubles):
// false for an integer beyond 2**53, which the caller hands to aten's kernel instead.
inline bool exact_as_double(const at::Scalar& s) {
  if (!s.isIntegral(false)) return true;
  int64_t v = s.toLong();
  return v >= -(int64_t{1} << 53) && v <= (int64_t{1} << 53);
}

// checked_scalar(s, t) as a double (the value kiln's kernel parameters carry).
inline double checked_double(const at::Scalar& s, at::ScalarType t) { return checked_scalar(s, t).toDouble(); }

// The conversion of aten's one-element fill (fill_ of a tensor with one element, and so
// scalar_tensor, torch.where's scalar operands and `x[i] = v`): the same as checked_scalar except
// that f16/bf16 take any real value, rounding to +-inf beyond their range, as CPU PyTorch does.
inline at::Scalar single_fill_scalar(const at::Scalar& s, at::ScalarType t) {
  if (t != at::kHalf && t != at::kBFloat16) return checked_scalar(s, t);
  double v = s.toDouble();  // a complex value with an imaginary part raises, as on CPU
  float f = static_cast<float>(v);
  return at::Scalar(t == at::kHalf ? static_cast<double>(static_cast<float>(at::Half(f)))
                                   : static_cast<double>(static_cast<float>(at::BFloat16(f))));
}

}  // namespace torch_kiln
