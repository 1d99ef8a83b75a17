/* SPDX-License-Identifier: Apache-2.0 */
// ops_common.h - shared checks and helpers for native kiln op registrations.
#pragma once

#include <ATen/MemoryOverlap.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/native/Resize.h>

#include "scalar_convert.h"
#include "tensor_desc.h"

namespace torch_kiln {

// Routes the current call to the counted CPU fallback.
#define KILN_FALLBACK(OP, ...) \
  at::native::call_fallback_fn<&::torch_kiln::boxed_fallback, at::_ops::OP>::call(__VA_ARGS__)

// Default floating dtype (torch.get_default_dtype()).
inline at::ScalarType default_float() { return c10::typeMetaToScalarType(c10::get_default_dtype()); }

// Integral (incl. bool) inputs of float-only ops compute in the default float dtype.
inline at::ScalarType float_compute(at::ScalarType t) {
  return at::isFloatingType(t) ? t : default_float();
}

// Tensors an op reads must be on `out`'s kiln device, except 0-dim CPU tensors (host scalars).
inline void check_device(const at::Tensor& out, const at::Tensor& t) {
  if (!t.defined()) return;
  if (t.is_cpu() && t.dim() == 0) return;
  TORCH_CHECK(t.device() == out.device(),
              "Expected all tensors to be on the same device, but found at least two devices, ",
              out.device(), " and ", t.device(), "!");
}

// Validates `out` before a kernel writes it: castable result, no self-overlap, no partial
// overlap with an input (exact aliasing, i.e. in-place, is allowed).
inline void check_out(const at::Tensor& out, at::ScalarType result, std::initializer_list<const at::Tensor*> ins) {
  TORCH_CHECK(at::canCast(result, out.scalar_type()), "result type ", result,
              " can't be cast to the desired output type ", out.scalar_type());
  at::assert_no_internal_overlap(out);
  for (const at::Tensor* t : ins) {
    if (t->defined() && !(t->is_cpu() && !out.is_cpu())) at::assert_no_partial_overlap(out, *t);
  }
}

// resize_output(out, shape), except that an `out` which is also one of `ins` (an in-place op,
// or out= naming an input) cannot be resized: like aten's TensorIterator, a shape other than the
// broadcast shape is an error there.
inline void resize_out(at::Tensor& out, at::IntArrayRef shape, std::initializer_list<const at::Tensor*> ins) {
  if (!out.sizes().equals(shape)) {
    for (const at::Tensor* t : ins)
      TORCH_CHECK(!(t->defined() && out.is_same(*t)), "output with shape ", out.sizes(),
                  " doesn't match the broadcast shape ", shape);
  }
  at::native::resize_output(out, shape);
}

// `t` with every stride-0 dim (an expanded dim) narrowed to size 1: a view that reaches each
// memory location of `t` once. Writing one value through it is writing it through `t`.
inline at::Tensor collapse_broadcast(const at::Tensor& t) {
  at::DimVector sizes(t.sizes().begin(), t.sizes().end());
  bool any = false;
  for (int64_t i = 0; i < t.dim(); i++) {
    if (t.stride(i) == 0 && sizes[i] > 1) {
      sizes[i] = 1;
      any = true;
    }
  }
  return any ? t.as_strided(sizes, t.strides(), t.storage_offset()) : t;
}

inline bool all_describable(std::initializer_list<const at::Tensor*> ts) {
  for (const at::Tensor* t : ts)
    if (t->defined() && !describable(*t)) return false;
  return true;
}

inline kiln_dtype_t kdt(at::ScalarType t) { return *to_kiln_dtype(t); }

}  // namespace torch_kiln
