/* SPDX-License-Identifier: Apache-2.0 */
// ops_reduce.cpp - native kiln reductions: sum, mean, prod, amax/amin, any/all, var/std, vector
// norm, logsumexp, max/min with indices, argmax/argmin, cumsum/cumprod.
#include <ATen/WrapDimUtils.h>
#include <ATen/ops/all.h>
#include <ATen/ops/amax.h>
#include <ATen/ops/amin.h>
#include <ATen/ops/any.h>
#include <ATen/ops/argmax.h>
#include <ATen/ops/argmin.h>
#include <ATen/ops/cumprod.h>
#include <ATen/ops/cumsum.h>
#include <ATen/ops/linalg_vector_norm.h>
#include <ATen/ops/logsumexp.h>
#include <ATen/ops/max.h>
#include <ATen/ops/mean.h>
#include <ATen/ops/min.h>
#include <ATen/ops/ne.h>
#include <ATen/ops/prod.h>
#include <ATen/ops/std.h>
#include <ATen/ops/sum.h>
#include <ATen/ops/var.h>
#include <torch/library.h>

#include "ops_common.h"

extern "C" {
#include "kiln/kernels/reduce.h"
}

namespace torch_kiln {
namespace {

using at::Scalar;
using at::ScalarType;
using at::Tensor;

// Reduced-dims bit mask (empty or missing dim list = every dim, as aten does).
uint32_t dim_mask(const Tensor& x, at::OptionalIntArrayRef dims) {
  uint32_t mask = 0;
  if (!dims.has_value() || dims->empty()) return x.dim() == 0 ? 0u : (1u << x.dim()) - 1u;
  for (int64_t d : *dims) {
    int64_t w = at::maybe_wrap_dim(d, x.dim());
    TORCH_CHECK(!(mask & (1u << w)) || x.dim() == 0, "dim ", w, " appears multiple times in the list of dims");
    if (x.dim() > 0) mask |= 1u << w;
  }
  return mask;
}

// Output sizes for `x` reduced over `mask`.
at::DimVector reduced_shape(const Tensor& x, uint32_t mask, bool keepdim) {
  at::DimVector shape;
  for (int64_t i = 0; i < x.dim(); i++) {
    if (mask & (1u << i)) {
      if (keepdim) shape.push_back(1);
    } else {
      shape.push_back(x.size(i));
    }
  }
  return shape;
}

// A descriptor of `out` with x's rank: reduced dims reinserted with size 1 when !keepdim.
kiln_tensor_t keepdim_desc(const Tensor& x, uint32_t mask, bool keepdim, const Tensor& out) {
  kiln_tensor_t d = describe(out);
  if (keepdim || x.dim() == 0) return d;
  kiln_tensor_t k = d;
  k.ndim = static_cast<int32_t>(x.dim());
  int32_t j = 0;
  for (int64_t i = 0; i < x.dim(); i++) {
    if (mask & (1u << i)) {
      k.shape[i] = 1;
      k.strides[i] = 0;
    } else {
      k.shape[i] = d.shape[j];
      k.strides[i] = d.strides[j];
      j++;
    }
  }
  return k;
}

// Runs a kiln reduction into `out` (resized); false when kiln cannot describe the operands.
bool run_reduce(kiln_reduce_op_t op, const Tensor& x, at::OptionalIntArrayRef dims, bool keepdim,
                const kiln_reduce_params_t* p, ScalarType compute, Tensor& out) {
  if (!describable(x) || !to_kiln_dtype(compute)) return false;
  check_device(out, x);
  uint32_t mask = dim_mask(x, dims);
  at::native::resize_output(out, reduced_shape(x, mask, keepdim));
  if (!describable(out)) return false;
  at::assert_no_internal_overlap(out);
  at::assert_no_overlap(out, x);
  if (out.numel() == 0) return true;
  kiln_tensor_t dx = describe(x), dout = keepdim_desc(x, mask, keepdim, out);
  KILN_CHECK(kiln_kernel_reduce(op, &dx, mask, p, kdt(compute), &dout));
  return true;
}

// aten's out= dtype rules for reductions, checked before anything else is.
void check_castable(const Tensor& self, const Tensor& out) {
  TORCH_CHECK(at::canCast(self.scalar_type(), out.scalar_type()), "result type ", self.scalar_type(),
              " can't be cast to the desired output type ", out.scalar_type());
}

void check_out_dtype(const Tensor& out, ScalarType want) {
  TORCH_CHECK(out.scalar_type() == want, "Expected out tensor to have dtype ", want, ", but got ", out.scalar_type(),
              " instead");
}

void check_same_dtype(const Tensor& self, const Tensor& out) {
  TORCH_CHECK(self.scalar_type() == out.scalar_type(), "Expected the dtype for input and out to match, but got ",
              self.scalar_type(), " for input's dtype and ", out.scalar_type(), " for out's dtype.");
}

void check_bool_out(const char* name, const Tensor& out) {
  TORCH_CHECK(out.scalar_type() == at::kBool || out.scalar_type() == at::kByte, name,
              " only supports bool tensor for result, got: ", out.scalar_type());
}

// sum/prod accumulate integers (and bool) in int64 unless a dtype is given.
ScalarType sum_compute(const Tensor& x, std::optional<ScalarType> dtype, const Tensor& out) {
  if (dtype.has_value()) return *dtype;
  if (out.defined() && out.scalar_type() != x.scalar_type()) return out.scalar_type();
  return at::isIntegralType(x.scalar_type(), true) ? at::kLong : x.scalar_type();
}

Tensor& sum_out(const Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                std::optional<ScalarType> dtype, Tensor& out) {
  if (run_reduce(KILN_REDUCE_SUM, self, dim, keepdim, nullptr, sum_compute(self, dtype, out), out)) return out;
  return KILN_FALLBACK(sum_IntList_out, self, dim, keepdim, dtype, out);
}

Tensor& mean_out(const Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                 std::optional<ScalarType> dtype, Tensor& out) {
  ScalarType in = dtype.value_or(self.scalar_type());
  TORCH_CHECK(at::isFloatingType(in) || at::isComplexType(in), "mean(): could not infer output dtype. ",
              "Input dtype must be either a floating point or complex dtype. Got: ", in);
  if (dtype.has_value())
    check_out_dtype(out, *dtype);
  else
    check_castable(self, out);
  ScalarType compute = dtype.value_or(out.scalar_type());
  if (run_reduce(KILN_REDUCE_MEAN, self, dim, keepdim, nullptr, compute, out)) return out;
  return KILN_FALLBACK(mean_out, self, dim, keepdim, dtype, out);
}

Tensor& prod_out(const Tensor& self, int64_t dim, bool keepdim, std::optional<ScalarType> dtype, Tensor& out) {
  int64_t d = at::maybe_wrap_dim(dim, self.dim());
  std::vector<int64_t> dims = {d};
  if (self.dim() > 0 &&
      run_reduce(KILN_REDUCE_PROD, self, dims, keepdim, nullptr, sum_compute(self, dtype, out), out))
    return out;
  return KILN_FALLBACK(prod_int_out, self, dim, keepdim, dtype, out);
}

void check_nonempty(const char* name, const Tensor& x, at::IntArrayRef dims) {
  if (x.numel() != 0) return;
  TORCH_CHECK(!dims.empty() && x.dim() > 0, name,
              "(): Expected reduction dim to be specified for input.numel() == 0. Specify the reduction "
              "dim with the 'dim' argument.");
  for (int64_t d : dims) {
    int64_t w = at::maybe_wrap_dim(d, x.dim());
    TORCH_CHECK_INDEX(x.size(w) != 0, name, "(): Expected reduction dim ", w, " to have non-zero size.");
  }
}

Tensor& amax_out(const Tensor& self, at::IntArrayRef dim, bool keepdim, Tensor& out) {
  check_same_dtype(self, out);
  check_nonempty("amax", self, dim);
  if (run_reduce(KILN_REDUCE_AMAX, self, dim, keepdim, nullptr, self.scalar_type(), out)) return out;
  return KILN_FALLBACK(amax_out, self, dim, keepdim, out);
}

Tensor& amin_out(const Tensor& self, at::IntArrayRef dim, bool keepdim, Tensor& out) {
  check_same_dtype(self, out);
  check_nonempty("amin", self, dim);
  if (run_reduce(KILN_REDUCE_AMIN, self, dim, keepdim, nullptr, self.scalar_type(), out)) return out;
  return KILN_FALLBACK(amin_out, self, dim, keepdim, out);
}

// any/all over an empty dim list reduce nothing (unlike sum's legacy "all dims"): x != 0.
Tensor& any_dims_out(const Tensor& self, at::OptionalIntArrayRef dim, bool keepdim, Tensor& out) {
  check_bool_out("any", out);
  if (dim.has_value() && dim->empty()) return at::ne_outf(self, 0, out);
  if (run_reduce(KILN_REDUCE_ANY, self, dim, keepdim, nullptr, self.scalar_type(), out)) return out;
  return KILN_FALLBACK(any_dims_out, self, dim, keepdim, out);
}

Tensor& all_dims_out(const Tensor& self, at::OptionalIntArrayRef dim, bool keepdim, Tensor& out) {
  check_bool_out("all", out);
  if (dim.has_value() && dim->empty()) return at::ne_outf(self, 0, out);
  if (run_reduce(KILN_REDUCE_ALL, self, dim, keepdim, nullptr, self.scalar_type(), out)) return out;
  return KILN_FALLBACK(all_dims_out, self, dim, keepdim, out);
}

Tensor& any_dim_out(const Tensor& self, int64_t dim, bool keepdim, Tensor& out) {
  check_bool_out("any", out);
  std::vector<int64_t> dims = {dim};
  if (self.dim() > 0 && run_reduce(KILN_REDUCE_ANY, self, dims, keepdim, nullptr, self.scalar_type(), out)) return out;
  return KILN_FALLBACK(any_out, self, dim, keepdim, out);
}

Tensor& all_dim_out(const Tensor& self, int64_t dim, bool keepdim, Tensor& out) {
  check_bool_out("all", out);
  std::vector<int64_t> dims = {dim};
  if (self.dim() > 0 && run_reduce(KILN_REDUCE_ALL, self, dims, keepdim, nullptr, self.scalar_type(), out)) return out;
  return KILN_FALLBACK(all_out, self, dim, keepdim, out);
}

Tensor& any_all_out(const Tensor& self, Tensor& out) {
  check_bool_out("any", out);
  if (run_reduce(KILN_REDUCE_ANY, self, std::nullopt, false, nullptr, self.scalar_type(), out)) return out;
  return KILN_FALLBACK(any_all_out, self, out);
}

Tensor& all_all_out(const Tensor& self, Tensor& out) {
  check_bool_out("all", out);
  if (run_reduce(KILN_REDUCE_ALL, self, std::nullopt, false, nullptr, self.scalar_type(), out)) return out;
  return KILN_FALLBACK(all_all_out, self, out);
}

Tensor& var_out(const Tensor& self, at::OptionalIntArrayRef dim, const std::optional<Scalar>& correction,
                bool keepdim, Tensor& out) {
  check_castable(self, out);
  kiln_reduce_params_t p = {};
  p.correction = correction.has_value() ? correction->toDouble() : 1.0;
  p.p = 2.0;
  if (at::isFloatingType(self.scalar_type()) &&
      run_reduce(KILN_REDUCE_VAR, self, dim, keepdim, &p, self.scalar_type(), out))
    return out;
  return KILN_FALLBACK(var_correction_out, self, dim, correction, keepdim, out);
}

Tensor& std_out(const Tensor& self, at::OptionalIntArrayRef dim, const std::optional<Scalar>& correction,
                bool keepdim, Tensor& out) {
  check_castable(self, out);
  kiln_reduce_params_t p = {};
  p.correction = correction.has_value() ? correction->toDouble() : 1.0;
  p.p = 2.0;
  if (at::isFloatingType(self.scalar_type()) &&
      run_reduce(KILN_REDUCE_STD, self, dim, keepdim, &p, self.scalar_type(), out))
    return out;
  return KILN_FALLBACK(std_correction_out, self, dim, correction, keepdim, out);
}

Tensor& vector_norm_out(const Tensor& self, const Scalar& ord, at::OptionalIntArrayRef dim, bool keepdim,
                        std::optional<ScalarType> dtype, Tensor& out) {
  kiln_reduce_params_t p = {};
  p.correction = 1.0;
  p.p = ord.toDouble();
  ScalarType compute = dtype.value_or(self.scalar_type());
  if (!at::isComplexType(compute)) check_out_dtype(out, compute);
  bool empty_bad = self.numel() == 0 && (p.p < 0 || std::isinf(p.p));
  if (!empty_bad && at::isFloatingType(compute) && at::isFloatingType(self.scalar_type()) &&
      run_reduce(KILN_REDUCE_NORM, self, dim, keepdim, &p, compute, out))
    return out;
  return KILN_FALLBACK(linalg_vector_norm_out, self, ord, dim, keepdim, dtype, out);
}

Tensor& logsumexp_out(const Tensor& self, at::IntArrayRef dim, bool keepdim, Tensor& out) {
  TORCH_CHECK(at::isFloatingType(out.scalar_type()) || at::isComplexType(out.scalar_type()),
              "logsumexp(): Expected floating point type for result tensor, but got: ", out.scalar_type());
  if (at::isFloatingType(self.scalar_type()) &&
      run_reduce(KILN_REDUCE_LOGSUMEXP, self, dim, keepdim, nullptr, self.scalar_type(), out))
    return out;
  return KILN_FALLBACK(logsumexp_out, self, dim, keepdim, out);
}

// max/min along a dim with indices (torch.max(x, dim)).
bool run_index(kiln_reduce_index_op_t op, const Tensor& self, int64_t dim, bool keepdim, Tensor* values,
               Tensor& indices) {
  if (!describable(self)) return false;
  check_device(indices, self);
  int64_t d = self.dim() == 0 ? 0 : at::maybe_wrap_dim(dim, self.dim());
  TORCH_CHECK_INDEX(self.dim() == 0 || self.size(d) != 0, "max(): Expected reduction dim ", d,
                    " to have non-zero size.");
  TORCH_CHECK(self.numel() != 0 || self.dim() != 0, "max(): Expected reduction dim to be specified for input.numel() == 0.");
  uint32_t mask = self.dim() == 0 ? 0u : (1u << d);
  at::DimVector shape = reduced_shape(self, mask, keepdim);
  TORCH_CHECK(indices.scalar_type() == at::kLong, "expected indices to be int64, got ", indices.scalar_type());
  at::native::resize_output(indices, shape);
  if (values) {
    TORCH_CHECK(values->scalar_type() == self.scalar_type(), "expected values dtype ", self.scalar_type(),
                " but got ", values->scalar_type());
    at::native::resize_output(*values, shape);
    if (!describable(*values)) return false;
  }
  if (indices.numel() == 0) return true;
  kiln_tensor_t dx = describe(self), di = keepdim_desc(self, mask, keepdim, indices), dv;
  if (values) dv = keepdim_desc(self, mask, keepdim, *values);
  KILN_CHECK(kiln_kernel_reduce_index(op, &dx, self.dim() == 0 ? KILN_REDUCE_INDEX_ALL_DIMS : static_cast<int>(d),
                                      values ? &dv : nullptr, &di));
  return true;
}

std::tuple<Tensor&, Tensor&> max_dim_out(const Tensor& self, int64_t dim, bool keepdim, Tensor& max, Tensor& idx) {
  if (run_index(KILN_REDUCE_INDEX_MAX, self, dim, keepdim, &max, idx)) return {max, idx};
  return KILN_FALLBACK(max_dim_max, self, dim, keepdim, max, idx);
}

std::tuple<Tensor&, Tensor&> min_dim_out(const Tensor& self, int64_t dim, bool keepdim, Tensor& min, Tensor& idx) {
  if (run_index(KILN_REDUCE_INDEX_MIN, self, dim, keepdim, &min, idx)) return {min, idx};
  return KILN_FALLBACK(min_dim_min, self, dim, keepdim, min, idx);
}

Tensor& arg_out(kiln_reduce_index_op_t op, const Tensor& self, std::optional<int64_t> dim, bool keepdim,
                Tensor& out, bool* handled) {
  *handled = false;
  if (!describable(self) || self.scalar_type() == at::kBool) return out;  // aten raises for bool
  if (dim.has_value()) {
    *handled = run_index(op, self, *dim, keepdim, nullptr, out);
    return out;
  }
  TORCH_CHECK(self.numel() != 0, op == KILN_REDUCE_INDEX_MAX ? "argmax" : "argmin",
              "(): Expected reduction dim to be specified for input.numel() == 0.");
  check_device(out, self);
  at::DimVector shape;
  if (keepdim) shape.assign(self.dim(), 1);
  at::native::resize_output(out, shape);
  kiln_tensor_t dx = describe(self), di = describe(out);
  di.ndim = 0;
  KILN_CHECK(kiln_kernel_reduce_index(op, &dx, KILN_REDUCE_INDEX_ALL_DIMS, nullptr, &di));
  *handled = true;
  return out;
}

Tensor& argmax_out(const Tensor& self, std::optional<int64_t> dim, bool keepdim, Tensor& out) {
  bool ok;
  arg_out(KILN_REDUCE_INDEX_MAX, self, dim, keepdim, out, &ok);
  return ok ? out : KILN_FALLBACK(argmax_out, self, dim, keepdim, out);
}

Tensor& argmin_out(const Tensor& self, std::optional<int64_t> dim, bool keepdim, Tensor& out) {
  bool ok;
  arg_out(KILN_REDUCE_INDEX_MIN, self, dim, keepdim, out, &ok);
  return ok ? out : KILN_FALLBACK(argmin_out, self, dim, keepdim, out);
}

Tensor max_all(const Tensor& self) {
  TORCH_CHECK(self.numel() > 0, "max(): Expected reduction dim to be specified for input.numel() == 0. "
              "Specify the reduction dim with the 'dim' argument.");
  Tensor out = at::empty({}, self.options());
  if (run_reduce(KILN_REDUCE_AMAX, self, std::nullopt, false, nullptr, self.scalar_type(), out)) return out;
  return KILN_FALLBACK(max, self);
}

Tensor min_all(const Tensor& self) {
  TORCH_CHECK(self.numel() > 0, "min(): Expected reduction dim to be specified for input.numel() == 0. "
              "Specify the reduction dim with the 'dim' argument.");
  Tensor out = at::empty({}, self.options());
  if (run_reduce(KILN_REDUCE_AMIN, self, std::nullopt, false, nullptr, self.scalar_type(), out)) return out;
  return KILN_FALLBACK(min, self);
}

bool run_cum(bool prod, const Tensor& self, int64_t dim, ScalarType compute, Tensor& out) {
  if (!describable(self) || !to_kiln_dtype(compute)) return false;
  check_device(out, self);
  int64_t d = at::maybe_wrap_dim(dim, self.dim());
  at::native::resize_output(out, self.sizes());
  if (!describable(out)) return false;
  at::assert_no_internal_overlap(out);
  if (out.numel() == 0) return true;
  kiln_tensor_t dx = describe(self), dout = describe(out);
  int kd = self.dim() == 0 ? 0 : static_cast<int>(d);
  if (self.dim() == 0) {
    dx.ndim = dout.ndim = 1;
    dx.shape[0] = dout.shape[0] = 1;
    dx.strides[0] = dout.strides[0] = 1;
  }
  KILN_CHECK(prod ? kiln_kernel_cumprod(&dx, kd, kdt(compute), &dout) : kiln_kernel_cumsum(&dx, kd, kdt(compute), &dout));
  return true;
}

// A bool accumulation dtype has no CPU kernel either: the fallback raises aten's error.
Tensor& cumsum_out(const Tensor& self, int64_t dim, std::optional<ScalarType> dtype, Tensor& out) {
  ScalarType c = dtype.value_or(out.scalar_type());
  if (c != at::kBool && run_cum(false, self, dim, c, out)) return out;
  return KILN_FALLBACK(cumsum_out, self, dim, dtype, out);
}

Tensor& cumprod_out(const Tensor& self, int64_t dim, std::optional<ScalarType> dtype, Tensor& out) {
  ScalarType c = dtype.value_or(out.scalar_type());
  if (c != at::kBool && run_cum(true, self, dim, c, out)) return out;
  return KILN_FALLBACK(cumprod_out, self, dim, dtype, out);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("sum.IntList_out", sum_out);
  m.impl("mean.out", mean_out);
  m.impl("prod.int_out", prod_out);
  m.impl("amax.out", amax_out);
  m.impl("amin.out", amin_out);
  m.impl("any.dims_out", any_dims_out);
  m.impl("all.dims_out", all_dims_out);
  m.impl("any.all_out", any_all_out);
  m.impl("any.out", any_dim_out);
  m.impl("all.out", all_dim_out);
  m.impl("all.all_out", all_all_out);
  m.impl("var.correction_out", var_out);
  m.impl("std.correction_out", std_out);
  m.impl("linalg_vector_norm.out", vector_norm_out);
  m.impl("logsumexp.out", logsumexp_out);
  m.impl("max.dim_max", max_dim_out);
  m.impl("min.dim_min", min_dim_out);
  m.impl("argmax.out", argmax_out);
  m.impl("argmin.out", argmin_out);
  m.impl("max", max_all);
  m.impl("min", min_all);
  m.impl("cumsum.out", cumsum_out);
  m.impl("cumprod.out", cumprod_out);
}

}  // namespace torch_kiln
