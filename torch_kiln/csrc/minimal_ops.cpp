/* SPDX-License-Identifier: Apache-2.0 */
// minimal_ops.cpp - the ops a device must provide itself: allocation, views, resize, set_,
// cross-device copies and scalar reads. Everything else is a native kiln kernel or the fallback.
#include <ATen/EmptyTensor.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/set_native.h>
#include <ATen/ops/unfold_native.h>
#include <ATen/ops/view_native.h>
#include <ATen/ops/view_as_complex_native.h>
#include <ATen/ops/view_as_real_native.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <ATen/MemoryOverlap.h>

#include "tensor_desc.h"

extern "C" {
#include "kiln/kernels/elementwise.h"
}

namespace torch_kiln {

c10::Allocator* allocator();

namespace {

constexpr c10::DispatchKeySet kKilnKeys{c10::DispatchKey::PrivateUse1};

c10::DeviceIndex index_of(std::optional<c10::Device> d) {
  if (!d.has_value() || !d->has_index()) return current_device();
  return d->index();
}

at::Tensor empty_memory_format(c10::IntArrayRef size, std::optional<at::ScalarType> dtype,
                               std::optional<at::Layout> layout, std::optional<at::Device> dev,
                               std::optional<bool> pin_memory,
                               std::optional<at::MemoryFormat> memory_format) {
  TORCH_CHECK(!layout.has_value() || *layout == at::kStrided, "kiln: only strided tensors are supported");
  c10::DeviceIndex index = index_of(dev);
  device(index);
  c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, index));
  return at::detail::empty_generic(size, allocator(), kKilnKeys,
                                   c10::dtype_or_default(dtype), memory_format);
}

at::Tensor empty_strided(c10::IntArrayRef size, c10::IntArrayRef stride,
                         std::optional<at::ScalarType> dtype, std::optional<at::Layout> layout,
                         std::optional<at::Device> dev, std::optional<bool> pin_memory) {
  TORCH_CHECK(!layout.has_value() || *layout == at::kStrided, "kiln: only strided tensors are supported");
  c10::DeviceIndex index = index_of(dev);
  device(index);
  c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, index));
  return at::detail::empty_strided_generic(size, stride, allocator(), kKilnKeys,
                                           c10::dtype_or_default(dtype));
}

const at::Tensor& resize_(const at::Tensor& self, c10::IntArrayRef size,
                          std::optional<at::MemoryFormat> memory_format) {
  c10::DeviceGuard guard(self.device());
  synchronize(self.device().index());
  return at::native::resize_(self, size, memory_format);
}

// Copies between kiln and CPU or kiln and kiln, any dtype, any strides, with broadcasting.
at::Tensor copy_from(const at::Tensor& self, const at::Tensor& dst, bool non_blocking) {
  const at::Tensor& src = self;
  TORCH_CHECK(src.is_privateuseone() || src.is_cpu(), "kiln: cannot copy from ", src.device());
  TORCH_CHECK(dst.is_privateuseone() || dst.is_cpu(), "kiln: cannot copy to ", dst.device());
  TORCH_CHECK(at::is_expandable_to(src.sizes(), dst.sizes()), "kiln: copy_: source of shape ",
              src.sizes(), " cannot be broadcast to destination of shape ", dst.sizes());
  if (dst.numel() == 0) return dst;
  if (src.is_privateuseone()) synchronize(src.device().index());
  if (dst.is_privateuseone() && !(src.is_privateuseone() && src.device() == dst.device()))
    synchronize(dst.device().index());

  bool same_layout = src.dtype() == dst.dtype() && src.sizes().equals(dst.sizes()) &&
                     src.is_contiguous() && dst.is_contiguous() && !src.is_neg() &&
                     !dst.is_neg() && !src.is_conj() && !dst.is_conj();
  if (same_layout) {
    kiln_copy_kind_t kind = src.is_cpu() ? KILN_COPY_HOST_TO_DEVICE
                            : dst.is_cpu() ? KILN_COPY_DEVICE_TO_HOST
                                           : KILN_COPY_DEVICE_TO_DEVICE;
    c10::DeviceIndex index = dst.is_privateuseone() ? dst.device().index() : src.device().index();
    if (kind == KILN_COPY_DEVICE_TO_DEVICE && src.device() != dst.device()) {
      kind = KILN_COPY_DEVICE_TO_HOST;  // host-visible memory: the source device reads into dst
      index = src.device().index();
    }
    kiln_device_t* dev = device(index);
    KILN_CHECK(kiln_device_copy(dev, nullptr, kind, dst.data_ptr(), src.data_ptr(), dst.nbytes()));
    KILN_CHECK(kiln_device_synchronize(dev));
    return dst;
  }
  // General case (cast, strides, broadcast): kiln memory is host-visible, so the kiln copy
  // kernel reads and writes both sides in place.
  if (describable(src) && describable(dst)) {
    at::assert_no_internal_overlap(dst);
    kiln_tensor_t s = describe(src), d = describe(dst);
    KILN_CHECK(kiln_kernel_copy(&s, &d));
    return dst;
  }
  // Dtypes kiln has no kernel for (complex, ...) or conj/neg views: the host copies, on host
  // aliases that carry the same conj/neg bits, so nothing re-enters this function.
  record_fallback("aten::_copy_from[" + std::string(c10::toString(src.scalar_type())) + "]");
  at::Tensor s = host_alias(src);
  at::Tensor d = host_alias(dst);
  if (src.is_conj()) s = at::_conj(s);
  if (src.is_neg()) s = at::_neg_view(s);
  if (dst.is_conj()) d = at::_conj(d);
  if (dst.is_neg()) d = at::_neg_view(d);
  d.copy_(s);
  return dst;
}

at::Tensor copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst) {
  if (!dst.sizes().equals(self.sizes())) {
    TORCH_CHECK(dst.is_privateuseone() || dst.is_cpu(), "kiln: cannot copy to ", dst.device());
    dst.resize_(self.sizes());
  }
  return copy_from(self, dst, false);
}

at::Scalar local_scalar_dense(const at::Tensor& self) {
  TORCH_CHECK(self.numel() == 1, "a Tensor with ", self.numel(),
              " elements cannot be converted to Scalar");
  synchronize(self.device().index());
  return host_alias(self).item();
}

at::Tensor& set_source_storage(at::Tensor& self, at::Storage source) {
  int64_t n = static_cast<int64_t>(source.nbytes() / self.dtype().itemsize());
  return at::native::set_storage_cpu_(self, std::move(source), 0, {n}, {});
}

at::Tensor& set_source_storage_offset(at::Tensor& self, at::Storage source, int64_t offset,
                                      c10::IntArrayRef size, c10::IntArrayRef stride) {
  return at::native::set_storage_cpu_(self, std::move(source), offset, size, stride);
}

at::Tensor& set_empty(at::Tensor& self) {
  at::Storage storage(at::Storage::use_byte_size_t(), 0, allocator(), true);
  return at::native::set_storage_cpu_(self, std::move(storage), 0, {0}, {});
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("empty.memory_format", empty_memory_format);
  m.impl("empty_strided", empty_strided);
  m.impl("as_strided", at::native::as_strided_tensorimpl);
  m.impl("view", at::native::view);
  m.impl("_reshape_alias", at::native::_reshape_alias);
  m.impl("unfold", at::native::unfold);
  m.impl("view_as_real", at::native::view_as_real);
  m.impl("view_as_complex", at::native::view_as_complex);
  m.impl("resize_", resize_);
  m.impl("_copy_from", copy_from);
  m.impl("_copy_from_and_resize", copy_from_and_resize);
  m.impl("_local_scalar_dense", local_scalar_dense);
  m.impl("set_.source_Storage", set_source_storage);
  m.impl("set_.source_Storage_storage_offset", set_source_storage_offset);
  m.impl("set_.source_Tensor", at::native::set_tensor_);
  m.impl("set_", set_empty);
}

}  // namespace torch_kiln
