/* SPDX-License-Identifier: Apache-2.0 */
// ops_index.cpp - native kiln kernels for indexing and shape ops: cat, index_select, gather,
// scatter(_add), index_add, advanced indexing (index / index_put_), masked_select, nonzero,
// triu/tril, arange, sort, topk, flip.
#include <ATen/ExpandUtils.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/eye.h>
#include <ATen/ops/linspace.h>
#include <ATen/ops/roll.h>
#include <ATen/ops/scatter_reduce.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/flip.h>
#include <ATen/ops/gather.h>
#include <ATen/ops/index.h>
#include <ATen/ops/index_add.h>
#include <ATen/ops/index_select.h>
#include <ATen/ops/masked_select.h>
#include <ATen/ops/nonzero.h>
#include <ATen/ops/scatter.h>
#include <ATen/ops/scatter_add.h>
#include <ATen/ops/sort.h>
#include <ATen/ops/topk.h>
#include <ATen/ops/tril.h>
#include <ATen/ops/triu.h>
#include <ATen/ops/_index_put_impl.h>
#include <torch/library.h>

#include <sstream>

#include "ops_common.h"

extern "C" {
#include "kiln/kernels/index.h"
}

namespace torch_kiln {
namespace {

using at::Tensor;

bool index_dtype(const Tensor& t) { return t.scalar_type() == at::kLong || t.scalar_type() == at::kInt; }

Tensor& cat_out(const at::ITensorListRef& tensors, int64_t dim, Tensor& out) {
  std::vector<Tensor> ts(tensors.begin(), tensors.end());
  TORCH_CHECK(!ts.empty(), "torch.cat(): expected a non-empty list of Tensors");
  bool ok = describable(out) || out.numel() == 0;
  const Tensor* ref = nullptr;
  for (const Tensor& t : ts) {
    ok = ok && describable(t) && t.scalar_type() == out.scalar_type();
    if (!(t.dim() == 1 && t.numel() == 0) && !ref) ref = &t;
  }
  if (!ok || !ref) return KILN_FALLBACK(cat_out, tensors, dim, out);
  int64_t d = at::maybe_wrap_dim(dim, ref->dim());
  std::vector<int64_t> shape(ref->sizes().begin(), ref->sizes().end());
  int64_t total = 0;
  for (const Tensor& t : ts) {
    if (t.dim() == 1 && t.numel() == 0) continue;
    check_device(out, t);
    TORCH_CHECK(t.dim() == ref->dim(), "Tensors must have same number of dimensions: got ", ref->dim(), " and ",
                t.dim());
    for (int64_t i = 0; i < t.dim(); i++)
      TORCH_CHECK(i == d || t.size(i) == ref->size(i), "Sizes of tensors must match except in dimension ", d,
                  ". Expected size ", ref->size(i), " but got size ", t.size(i), " for tensor number in the list.");
    total += t.size(d);
  }
  shape[d] = total;
  at::native::resize_output(out, shape);
  if (!describable(out)) return KILN_FALLBACK(cat_out, tensors, dim, out);
  for (const Tensor& t : ts) at::assert_no_overlap(out, t);
  if (out.numel() == 0) return out;
  std::vector<kiln_tensor_t> descs;
  std::vector<const kiln_tensor_t*> ptrs;
  descs.reserve(ts.size());
  for (const Tensor& t : ts) descs.push_back(describe(t));
  for (auto& dsc : descs) ptrs.push_back(&dsc);
  kiln_tensor_t dout = describe(out);
  KILN_CHECK(kiln_kernel_cat(ptrs.data(), static_cast<int>(ptrs.size()), static_cast<int>(d), &dout));
  return out;
}

// Checks in aten's order: dim, index rank, scalar self, index dtype.
Tensor& index_select_out(const Tensor& self, int64_t dim, const Tensor& index, Tensor& out) {
  int64_t d = at::maybe_wrap_dim(dim, self.dim());
  TORCH_CHECK_INDEX(index.dim() <= 1, "index_select(): Index is supposed to be a vector");
  TORCH_CHECK(!(self.dim() == 0 && index.numel() != 1), "index_select(): Index to scalar can have only 1 value, got ",
              index.numel(), " value(s)");
  TORCH_CHECK(index_dtype(index), "index_select(): Expected dtype int32 or int64 for index");
  if (!all_describable({&self, &index})) return KILN_FALLBACK(index_select_out, self, dim, index, out);
  check_device(out, self);
  check_device(out, index);
  std::vector<int64_t> shape(self.sizes().begin(), self.sizes().end());
  if (self.dim() > 0) shape[d] = index.numel();
  at::native::resize_output(out, shape);
  if (!describable(out)) return KILN_FALLBACK(index_select_out, self, dim, index, out);
  at::assert_no_overlap(out, self);
  kiln_tensor_t dx = describe(self), di = describe(index), dout = describe(out);
  KILN_CHECK(kiln_kernel_index_select(&dx, static_cast<int>(d), &di, &dout));
  return out;
}

Tensor index_select(const Tensor& self, int64_t dim, const Tensor& index) {
  Tensor out = at::empty({0}, self.options());
  return index_select_out(self, dim, index, out);
}

Tensor& gather_out(const Tensor& self, int64_t dim, const Tensor& index, bool sparse_grad, Tensor& out) {
  if (!all_describable({&self, &index}) || index.scalar_type() != at::kLong) return KILN_FALLBACK(gather_out, self, dim, index, sparse_grad, out);
  check_device(out, self);
  check_device(out, index);
  at::native::resize_output(out, index.sizes());
  if (!describable(out)) return KILN_FALLBACK(gather_out, self, dim, index, sparse_grad, out);
  at::assert_no_overlap(out, self);
  if (out.numel() == 0) return out;
  int64_t d = at::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), 1));
  kiln_tensor_t dx = describe(self), di = describe(index), dout = describe(out);
  KILN_CHECK_RT(kiln_kernel_gather(&dx, static_cast<int>(d), &di, &dout));
  return out;
}

// out = self (copied unless aliased), then scattered into in place.
// value (when src is null) is range checked in self's dtype once there is something to write.
bool scatter_impl(const Tensor& self, int64_t dim, const Tensor& index, const Tensor* src, const at::Scalar& value,
                  kiln_scatter_reduce_t reduce, Tensor& out, bool include_self = true) {
  if (!all_describable({&self, &index}) || (src && !describable(*src)) || index.scalar_type() != at::kLong ||
      (!src && !exact_as_double(value)))
    return false;
  if (src) TORCH_CHECK(src->scalar_type() == self.scalar_type(), "scatter(): Expected self.dtype to be equal to src.dtype");
  check_device(out, self);
  check_device(out, index);
  at::native::resize_output(out, self.sizes());
  if (!describable(out)) return false;
  if (!out.is_same(self)) out.copy_(self);
  if (index.numel() == 0) return true;
  double v = src ? 0.0 : checked_double(value, self.scalar_type());
  int64_t d = at::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), 1));
  kiln_tensor_t dout = describe(out), di = describe(index), ds;
  if (src) ds = describe(*src);
  KILN_CHECK_RT(kiln_kernel_scatter(&dout, static_cast<int>(d), &di, src ? &ds : nullptr, v, reduce,
                                 include_self ? 1 : 0));
  return true;
}

Tensor& scatter_src_out(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src, Tensor& out) {
  if (scatter_impl(self, dim, index, &src, 0.0, KILN_SCATTER_NONE, out)) return out;
  return KILN_FALLBACK(scatter_src_out, self, dim, index, src, out);
}

Tensor& scatter_value_out(const Tensor& self, int64_t dim, const Tensor& index, const at::Scalar& value, Tensor& out) {
  if (scatter_impl(self, dim, index, nullptr, value, KILN_SCATTER_NONE, out))
    return out;
  return KILN_FALLBACK(scatter_value_out, self, dim, index, value, out);
}

Tensor& scatter_add_out(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src, Tensor& out) {
  if (scatter_impl(self, dim, index, &src, 0.0, KILN_SCATTER_ADD, out)) return out;
  return KILN_FALLBACK(scatter_add_out, self, dim, index, src, out);
}

kiln_scatter_reduce_t reduce_mode(c10::string_view r, bool two) {
  if (two) {
    if (r == "sum") return KILN_SCATTER_SUM;
    if (r == "prod") return KILN_SCATTER_PROD;
    if (r == "mean") return KILN_SCATTER_MEAN;
    if (r == "amax") return KILN_SCATTER_AMAX;
    if (r == "amin") return KILN_SCATTER_AMIN;
    TORCH_CHECK(false, "reduce argument must be either sum, prod, mean, amax or amin, got ", r);
  }
  if (r == "add") return KILN_SCATTER_ADD;
  if (r == "multiply") return KILN_SCATTER_MULTIPLY;
  TORCH_CHECK(false, "reduce argument must be either add or multiply, got ", r);
}

Tensor& scatter_reduce_two_out(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src,
                               c10::string_view reduce, bool include_self, Tensor& out) {
  if (scatter_impl(self, dim, index, &src, 0.0, reduce_mode(reduce, true), out, include_self)) return out;
  return KILN_FALLBACK(scatter_reduce_two_out, self, dim, index, src, reduce, include_self, out);
}

Tensor& scatter_reduce_out(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src,
                           c10::string_view reduce, Tensor& out) {
  if (scatter_impl(self, dim, index, &src, 0.0, reduce_mode(reduce, false), out)) return out;
  return KILN_FALLBACK(scatter_reduce_out, self, dim, index, src, reduce, out);
}

Tensor& scatter_value_reduce_out(const Tensor& self, int64_t dim, const Tensor& index, const at::Scalar& value,
                                 c10::string_view reduce, Tensor& out) {
  if (scatter_impl(self, dim, index, nullptr, value, reduce_mode(reduce, false),
                   out))
    return out;
  return KILN_FALLBACK(scatter_value_reduce_out, self, dim, index, value, reduce, out);
}

Tensor& eye_m_out(int64_t n, int64_t m, Tensor& out) {
  TORCH_CHECK(n >= 0, "n must be greater or equal to 0, got ", n);
  TORCH_CHECK(m >= 0, "m must be greater or equal to 0, got ", m);
  if (!describable(out)) return KILN_FALLBACK(eye_m_out, n, m, out);
  out.resize_({n, m});
  if (out.numel() == 0) return out;
  kiln_tensor_t d = describe(out);
  KILN_CHECK(kiln_kernel_eye(&d));
  return out;
}

Tensor& eye_out(int64_t n, Tensor& out) { return eye_m_out(n, n, out); }

Tensor& linspace_out(const at::Scalar& start, const at::Scalar& end, int64_t steps, Tensor& out) {
  TORCH_CHECK(steps >= 0, "number of steps must be non-negative");
  if (!describable(out)) return KILN_FALLBACK(linspace_out, start, end, steps, out);
  if (out.numel() != steps) out.resize_({steps});
  if (steps == 0) return out;
  kiln_tensor_t d = describe(out);
  // As aten: one step is just start (end is not read, so not range checked).
  double s = checked_double(start, out.scalar_type());
  KILN_CHECK(kiln_kernel_linspace(&d, s, steps == 1 ? s : checked_double(end, out.scalar_type())));
  return out;
}

Tensor roll(const Tensor& self, at::IntArrayRef shifts, at::IntArrayRef dims) {
  TORCH_CHECK(!shifts.empty(), "`shifts` required");
  TORCH_CHECK(dims.empty() || shifts.size() == dims.size(), "shifts and dimensions must align. shifts: ",
              shifts.size(), ", dims:", dims.size());
  if (!describable(self)) return KILN_FALLBACK(roll, self, shifts, dims);
  Tensor out = at::empty_like(self, at::MemoryFormat::Contiguous);
  if (out.numel() == 0) return out;
  std::vector<int> d;
  for (int64_t x : dims) d.push_back(static_cast<int>(at::maybe_wrap_dim(x, self.dim(), /*wrap_scalar=*/false)));
  kiln_tensor_t dx = describe(self), dout = describe(out);
  KILN_CHECK(kiln_kernel_roll(&dx, shifts.data(), dims.empty() ? nullptr : d.data(), static_cast<int>(shifts.size()),
                              &dout));
  return out;
}

Tensor& index_add_out(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source,
                      const at::Scalar& alpha, Tensor& out) {
  TORCH_CHECK(index_dtype(index), "index_add_(): Expected dtype int32/int64 for index");
  if (!all_describable({&self, &index, &source})) return KILN_FALLBACK(index_add_out, self, dim, index, source, alpha, out);
  TORCH_CHECK(source.scalar_type() == self.scalar_type(), "index_add_(): self (", self.scalar_type(),
              ") and source (", source.scalar_type(), ") must have the same scalar type");
  check_device(out, self);
  check_device(out, index);
  check_device(out, source);
  at::native::resize_output(out, self.sizes());
  if (!out.is_same(self)) out.copy_(self);
  if (index.numel() == 0) return out;
  int64_t d = at::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), 1));
  kiln_tensor_t dout = describe(out), di = describe(index), ds = describe(source);
  KILN_CHECK(kiln_kernel_index_add(&dout, static_cast<int>(d), &di, &ds, checked_double(alpha, self.scalar_type())));
  return out;
}

// The advanced-index list as aten builds it (expandTensors, make_info): a bool/uint8 mask must
// have the sizes of the dims it indexes (IndexError otherwise) and becomes long indices
// (nonzero); all indices broadcast to one shape (IndexError "shape mismatch" otherwise); an index
// on another device (a CPU index tensor for a kiln self, as CUDA allows) moves to self's device.
// Returns false (the caller falls back) for index dtypes kiln has no kernel for.
bool expand_indices(const Tensor& self, const c10::List<std::optional<Tensor>>& indices, std::vector<Tensor>& out) {
  TORCH_CHECK_INDEX(static_cast<int64_t>(indices.size()) <= self.dim(), "too many indices for tensor of dimension ",
                    self.dim(), " (got ", indices.size(), ")");
  std::vector<Tensor> idx;
  for (size_t i = 0; i < indices.size(); i++) {
    std::optional<Tensor> o = indices.get(i);
    if (!o.has_value() || !o->defined()) {
      idx.emplace_back();
      continue;
    }
    const Tensor& t = *o;
    if (t.scalar_type() == at::kBool || t.scalar_type() == at::kByte) {
      if (t.scalar_type() == at::kByte)
        TORCH_WARN("indexing with dtype torch.uint8 is now deprecated, please use a dtype torch.bool instead.");
      for (int64_t j = 0; j < t.dim(); j++) {
        int64_t src = static_cast<int64_t>(idx.size()) + j;
        TORCH_CHECK_INDEX(t.size(j) == self.size(src), "The shape of the mask ", t.sizes(), " at index ", j,
                          " does not match the shape of the indexed tensor ", self.sizes(), " at index ", src);
      }
      Tensor nz = at::nonzero(t.to(at::kBool));
      for (int64_t j = 0; j < t.dim(); j++) idx.push_back(nz.select(1, j));
    } else {
      if (!index_dtype(t)) return false;
      idx.push_back(t);
    }
  }
  TORCH_CHECK_INDEX(static_cast<int64_t>(idx.size()) <= self.dim(), "too many indices for tensor of dimension ",
                    self.dim(), " (got ", idx.size(), ")");
  std::vector<Tensor> defined;
  for (auto& t : idx)
    if (t.defined()) defined.push_back(t);
  if (defined.empty()) return false;
  std::vector<Tensor> expanded;
  try {
    expanded = at::expand_outplace(defined);
  } catch (const c10::Error&) {
    std::ostringstream shapes;
    for (size_t k = 0; k < defined.size(); k++) shapes << (k ? ", " : "") << defined[k].sizes();
    TORCH_CHECK_INDEX(false, "shape mismatch: indexing tensors could not be broadcast together with shapes ",
                      shapes.str());
  }
  size_t k = 0;
  for (auto& t : idx) {
    if (!t.defined()) continue;
    t = expanded[k++];
    if (t.device() != self.device()) t = t.to(self.device());
    if (!describable(t)) return false;
  }
  out = std::move(idx);
  return true;
}

Tensor index(const Tensor& self, const c10::List<std::optional<Tensor>>& indices) {
  std::vector<Tensor> idx;
  if (!describable(self) || !expand_indices(self, indices, idx)) return KILN_FALLBACK(index_Tensor, self, indices);
  std::vector<kiln_tensor_t> descs(idx.size());
  std::vector<const kiln_tensor_t*> ptrs(idx.size());
  for (size_t i = 0; i < idx.size(); i++) {
    if (idx[i].defined()) {
      descs[i] = describe(idx[i]);
      ptrs[i] = &descs[i];
    } else {
      ptrs[i] = nullptr;
    }
  }
  kiln_tensor_t dx = describe(self);
  int32_t nd = 0;
  int64_t shape[KILN_MAX_DIMS];
  KILN_CHECK(kiln_kernel_index_shape(&dx, ptrs.data(), static_cast<int>(ptrs.size()), &nd, shape));
  Tensor out = at::empty(c10::IntArrayRef(shape, nd), self.options());
  if (out.numel() == 0) return out;
  kiln_tensor_t dout = describe(out);
  KILN_CHECK(kiln_kernel_index(&dx, ptrs.data(), static_cast<int>(ptrs.size()), &dout));
  return out;
}

// An expanded (self-overlapping) self is allowed with a warning, as on CPU, where the writes go
// through the overlapping elements in index order: aten's CPU kernel does exactly that on a host
// alias of kiln memory (counted as a fallback; the fallback proper cannot write back into an
// overlapping tensor).
Tensor& index_put_overlapping(Tensor& self, const c10::List<std::optional<Tensor>>& indices, const Tensor& values,
                              bool accumulate, bool unsafe) {
  record_fallback("aten::_index_put_impl_[expanded self]");
  for (c10::DeviceIndex i = 0; i < device_count(); i++) synchronize(i);
  c10::List<std::optional<Tensor>> host;
  for (size_t i = 0; i < indices.size(); i++) {
    std::optional<Tensor> o = indices.get(i);
    host.push_back(o.has_value() && o->defined() ? std::optional<Tensor>(host_alias(*o)) : std::nullopt);
  }
  Tensor h = host_alias(self);
  at::_index_put_impl_(h, host, host_alias(values), accumulate, unsafe);
  return self;
}

Tensor& index_put_impl(Tensor& self, const c10::List<std::optional<Tensor>>& indices, const Tensor& values,
                       bool accumulate, bool unsafe) {
  if (at::has_internal_overlap(self) == at::MemOverlap::Yes)
    return index_put_overlapping(self, indices, values, accumulate, unsafe);
  std::vector<Tensor> idx;
  if (!all_describable({&self, &values}) || values.scalar_type() != self.scalar_type() ||
      !expand_indices(self, indices, idx))
    return KILN_FALLBACK(_index_put_impl_, self, indices, values, accumulate, unsafe);
  check_device(self, values);
  std::vector<kiln_tensor_t> descs(idx.size());
  std::vector<const kiln_tensor_t*> ptrs(idx.size());
  for (size_t i = 0; i < idx.size(); i++) {
    if (idx[i].defined()) {
      descs[i] = describe(idx[i]);
      ptrs[i] = &descs[i];
    } else {
      ptrs[i] = nullptr;
    }
  }
  kiln_tensor_t ds = describe(self), dv = describe(values);
  KILN_CHECK(kiln_kernel_index_put(&ds, ptrs.data(), static_cast<int>(ptrs.size()), &dv, accumulate ? 1 : 0));
  return self;
}

Tensor masked_select(const Tensor& self, const Tensor& mask) {
  TORCH_CHECK(mask.scalar_type() == at::kBool, "masked_select: expected BoolTensor for mask");
  if (!all_describable({&self, &mask})) return KILN_FALLBACK(masked_select, self, mask);
  check_device(self, mask);
  kiln_tensor_t dx = describe(self), dm = describe(mask);
  int64_t n = 0;
  KILN_CHECK(kiln_kernel_masked_select_count(&dx, &dm, &n));
  Tensor out = at::empty({n}, self.options());
  if (n == 0) return out;
  kiln_tensor_t dout = describe(out);
  KILN_CHECK(kiln_kernel_masked_select(&dx, &dm, &dout));
  return out;
}

Tensor nonzero(const Tensor& self) {
  if (!describable(self)) return KILN_FALLBACK(nonzero, self);
  kiln_tensor_t dx = describe(self);
  int64_t n = 0;
  KILN_CHECK(kiln_kernel_nonzero_count(&dx, &n));
  Tensor out = at::empty({n, self.dim()}, self.options().dtype(at::kLong));
  if (out.numel() == 0) return out;
  kiln_tensor_t dout = describe(out);
  KILN_CHECK(kiln_kernel_nonzero(&dx, &dout));
  return out;
}

Tensor& tri_out(bool upper, const Tensor& self, int64_t diagonal, Tensor& out) {
  TORCH_CHECK(self.dim() >= 2, upper ? "triu" : "tril", ": input tensor must have at least 2 dimensions");
  if (!describable(self))
    return upper ? KILN_FALLBACK(triu_out, self, diagonal, out) : KILN_FALLBACK(tril_out, self, diagonal, out);
  check_device(out, self);
  at::native::resize_output(out, self.sizes());
  if (!out.is_same(self)) at::assert_no_overlap(out, self);
  if (out.numel() == 0) return out;
  kiln_tensor_t dx = describe(self), dout = describe(out);
  KILN_CHECK(upper ? kiln_kernel_triu(&dx, diagonal, &dout) : kiln_kernel_tril(&dx, diagonal, &dout));
  return out;
}

Tensor& triu_out(const Tensor& self, int64_t diagonal, Tensor& out) { return tri_out(true, self, diagonal, out); }
Tensor& tril_out(const Tensor& self, int64_t diagonal, Tensor& out) { return tri_out(false, self, diagonal, out); }

Tensor& arange_out(const at::Scalar& start, const at::Scalar& end, const at::Scalar& step, Tensor& out) {
  double s = start.toDouble(), e = end.toDouble(), st = step.toDouble();
  TORCH_CHECK(st != 0, "step must be nonzero");
  TORCH_CHECK(std::isfinite(s) && std::isfinite(e), "unsupported range: ", s, " -> ", e);
  TORCH_CHECK((st > 0 && e >= s) || (st < 0 && e <= s), "upper bound and larger bound inconsistent with step sign");
  bool integral = at::isIntegralType(out.scalar_type(), true);
  int64_t n = integral && start.isIntegral(false) && end.isIntegral(false) && step.isIntegral(false)
                  ? (end.toLong() - start.toLong() + step.toLong() - (step.toLong() > 0 ? 1 : -1)) / step.toLong()
                  : static_cast<int64_t>(std::ceil((e - s) / st));
  if (!describable(out)) return KILN_FALLBACK(arange_start_out, start, end, step, out);
  if (out.numel() != n) out.resize_({n});
  if (n == 0) return out;
  kiln_tensor_t d = describe(out);
  if (integral && start.isIntegral(false) && step.isIntegral(false))
    KILN_CHECK(kiln_kernel_arange_i64(&d, start.toLong(), step.toLong()));
  else
    KILN_CHECK(kiln_kernel_arange(&d, s, st));
  return out;
}

std::tuple<Tensor&, Tensor&> sort_out(const Tensor& self, std::optional<bool> stable, int64_t dim, bool descending,
                                      Tensor& values, Tensor& indices) {
  // kiln's sort is stable. aten's unstable 16-bit CPU sort orders ties differently; an unstable
  // f16/bf16 sort runs aten's so indices match PyTorch exactly (counted as a fallback).
  bool half = self.scalar_type() == at::kHalf || self.scalar_type() == at::kBFloat16;
  if (!describable(self) || self.scalar_type() == at::kBool || (half && !stable.value_or(false)))
    return KILN_FALLBACK(sort_values_stable, self, stable, dim, descending, values, indices);
  check_device(values, self);
  at::native::resize_output(values, self.sizes());
  at::native::resize_output(indices, self.sizes());
  if (self.numel() == 0) return {values, indices};
  int64_t d = at::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), 1));
  Tensor src = values.is_same(self) ? self.clone() : self;
  kiln_tensor_t dx = describe(src), dv = describe(values), di = describe(indices);
  if (self.dim() == 0) {
    dx.ndim = dv.ndim = di.ndim = 1;
    dx.shape[0] = dv.shape[0] = di.shape[0] = 1;
    dx.strides[0] = dv.strides[0] = di.strides[0] = 1;
  }
  KILN_CHECK(kiln_kernel_sort(&dx, static_cast<int>(d), descending ? 1 : 0, 1, &dv, &di));
  return {values, indices};
}

std::tuple<Tensor&, Tensor&> topk_out(const Tensor& self, int64_t k, int64_t dim, bool largest, bool sorted,
                                      Tensor& values, Tensor& indices) {
  int64_t d = at::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), 1));
  int64_t size = self.dim() == 0 ? 1 : self.size(d);
  TORCH_CHECK(k >= 0 && k <= size, "selected index k out of range");
  if (!describable(self) || self.scalar_type() == at::kBool)
    return KILN_FALLBACK(topk_values, self, k, dim, largest, sorted, values, indices);
  check_device(values, self);
  std::vector<int64_t> shape(self.sizes().begin(), self.sizes().end());
  if (self.dim() > 0) shape[d] = k;
  at::native::resize_output(values, shape);
  at::native::resize_output(indices, shape);
  if (values.numel() == 0 && self.dim() > 0) return {values, indices};
  kiln_tensor_t dx = describe(self), dv = describe(values), di = describe(indices);
  KILN_CHECK(kiln_kernel_topk(&dx, k, static_cast<int>(d), largest ? 1 : 0, sorted ? 1 : 0, &dv, &di));
  return {values, indices};
}

Tensor flip(const Tensor& self, at::IntArrayRef dims) {
  if (!describable(self)) return KILN_FALLBACK(flip, self, dims);
  uint32_t mask = 0;
  for (int64_t dd : dims) {
    int64_t w = at::maybe_wrap_dim(dd, self.dim());
    TORCH_CHECK(!(mask & (1u << w)), "dims has duplicates, original flip dims size=", dims.size());
    mask |= 1u << w;
  }
  Tensor out = at::empty_like(self, at::MemoryFormat::Contiguous);
  if (out.numel() == 0) return out;
  kiln_tensor_t dx = describe(self), dout = describe(out);
  KILN_CHECK(kiln_kernel_flip(&dx, mask, &dout));
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("cat.out", cat_out);
  m.impl("index_select.out", index_select_out);
  m.impl("index_select", index_select);
  m.impl("gather.out", gather_out);
  m.impl("scatter.src_out", scatter_src_out);
  m.impl("scatter.value_out", scatter_value_out);
  m.impl("scatter_add.out", scatter_add_out);
  m.impl("scatter_reduce.two_out", scatter_reduce_two_out);
  m.impl("scatter.reduce_out", scatter_reduce_out);
  m.impl("scatter.value_reduce_out", scatter_value_reduce_out);
  m.impl("eye.out", eye_out);
  m.impl("eye.m_out", eye_m_out);
  m.impl("linspace.out", linspace_out);
  m.impl("roll", roll);
  m.impl("index_add.out", index_add_out);
  m.impl("index.Tensor", index);
  m.impl("_index_put_impl_", index_put_impl);
  m.impl("masked_select", masked_select);
  m.impl("nonzero", nonzero);
  m.impl("triu.out", triu_out);
  m.impl("tril.out", tril_out);
  m.impl("arange.start_out", arange_out);
  m.impl("sort.values_stable", sort_out);
  m.impl("topk.values", topk_out);
  m.impl("flip", flip);
}

}  // namespace torch_kiln
