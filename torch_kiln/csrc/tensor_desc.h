/* SPDX-License-Identifier: Apache-2.0 */
// tensor_desc.h - unpacking at::Tensor / at::Scalar into kiln_tensor_t descriptors for the C
// kernels, and dtype mapping. Header-only; used by every op registration file.
#pragma once

#include <ATen/ATen.h>

#include <optional>

#include "kiln_torch.h"

namespace torch_kiln {

// The kiln dtype for a torch dtype, or std::nullopt if kiln has none (complex, fp8, uint16...).
inline std::optional<kiln_dtype_t> to_kiln_dtype(at::ScalarType t) {
  switch (t) {
    case at::kFloat: return KILN_DTYPE_F32;
    case at::kHalf: return KILN_DTYPE_F16;
    case at::kBFloat16: return KILN_DTYPE_BF16;
    case at::kDouble: return KILN_DTYPE_F64;
    case at::kChar: return KILN_DTYPE_I8;
    case at::kShort: return KILN_DTYPE_I16;
    case at::kInt: return KILN_DTYPE_I32;
    case at::kLong: return KILN_DTYPE_I64;
    case at::kByte: return KILN_DTYPE_U8;
    case at::kBool: return KILN_DTYPE_BOOL;
    default: return std::nullopt;
  }
}

// The torch dtype for a kiln dtype (the inverse of to_kiln_dtype); raises for an unknown one.
inline at::ScalarType to_scalar_type(int kiln_dtype) {
  switch (kiln_dtype) {
    case KILN_DTYPE_F32: return at::kFloat;
    case KILN_DTYPE_F16: return at::kHalf;
    case KILN_DTYPE_BF16: return at::kBFloat16;
    case KILN_DTYPE_F64: return at::kDouble;
    case KILN_DTYPE_I8: return at::kChar;
    case KILN_DTYPE_I16: return at::kShort;
    case KILN_DTYPE_I32: return at::kInt;
    case KILN_DTYPE_I64: return at::kLong;
    case KILN_DTYPE_U8: return at::kByte;
    case KILN_DTYPE_BOOL: return at::kBool;
    default: TORCH_CHECK(false, "kiln: unknown kiln dtype ", kiln_dtype);
  }
}

// True if every tensor has a kiln dtype, rank <= KILN_MAX_DIMS and no conj/neg bits.
inline bool describable(const at::Tensor& t) {
  return t.defined() && to_kiln_dtype(t.scalar_type()).has_value() && t.dim() <= KILN_MAX_DIMS &&
         !t.is_conj() && !t.is_neg() && t.layout() == at::kStrided;
}

// A borrowed descriptor of `t` (data pointer with the storage offset applied).
inline kiln_tensor_t describe(const at::Tensor& t) {
  TORCH_CHECK(describable(t), "kiln: tensor of dtype ", t.scalar_type(), " and rank ", t.dim(),
              " has no kiln descriptor");
  kiln_tensor_t d;
  d.data = t.numel() ? t.data_ptr() : nullptr;
  d.dtype = *to_kiln_dtype(t.scalar_type());
  d.ndim = static_cast<int32_t>(t.dim());
  for (int64_t i = 0; i < t.dim(); i++) {
    d.shape[i] = t.size(i);
    d.strides[i] = t.stride(i);
  }
  return d;
}

// A rank-0 host descriptor holding a scalar (storage lives in the ScalarBox).
struct ScalarBox {
  union {
    double f;
    int64_t i;
    uint8_t b;
  } v;
  kiln_tensor_t desc;
  ScalarBox(const at::Scalar& s, at::ScalarType as) {
    desc.ndim = 0;
    desc.data = &v;
    if (at::isFloatingType(as)) {
      v.f = s.toDouble();
      desc.dtype = KILN_DTYPE_F64;
    } else if (as == at::kBool) {
      v.b = s.toBool() ? 1 : 0;
      desc.dtype = KILN_DTYPE_BOOL;
    } else {
      v.i = s.toLong();
      desc.dtype = KILN_DTYPE_I64;
    }
  }
};

}  // namespace torch_kiln
