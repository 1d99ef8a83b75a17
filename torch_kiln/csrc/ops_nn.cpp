/* SPDX-License-Identifier: Apache-2.0 */
// ops_nn.cpp - native kiln kernels for softmax/log_softmax (+ backward), layer_norm
// (+ backward), nll_loss (+ backward) and embedding (+ dense backward).
#include <ATen/WrapDimUtils.h>
#include <ATen/ops/_log_softmax.h>
#include <ATen/ops/_log_softmax_backward_data.h>
#include <ATen/ops/_softmax.h>
#include <ATen/ops/_softmax_backward_data.h>
#include <ATen/ops/embedding.h>
#include <ATen/ops/embedding_dense_backward.h>
#include <ATen/ops/native_layer_norm.h>
#include <ATen/ops/native_layer_norm_backward.h>
#include <ATen/ops/nll_loss_backward.h>
#include <ATen/ops/nll_loss_forward.h>
#include <torch/library.h>

#include "ops_common.h"

extern "C" {
#include "kiln/kernels/nn.h"
}

namespace torch_kiln {
namespace {

using at::Tensor;

bool is_float(const Tensor& t) { return at::isFloatingType(t.scalar_type()); }

Tensor& softmax_out_impl(bool log, const Tensor& self, int64_t dim, bool half_to_float, Tensor& out) {
  TORCH_CHECK(!half_to_float || self.scalar_type() == at::kHalf,
              "conversion is supported for Half type only");
  at::ScalarType dt = half_to_float ? at::kFloat : self.scalar_type();
  at::native::resize_output(out, self.sizes());
  if (!is_float(self) || !all_describable({&self, &out}) || out.scalar_type() != dt) {
    return log ? KILN_FALLBACK(_log_softmax_out, self, dim, half_to_float, out)
               : KILN_FALLBACK(_softmax_out, self, dim, half_to_float, out);
  }
  check_device(out, self);
  if (out.numel() == 0) return out;
  int64_t d = at::maybe_wrap_dim(dim, self.dim());
  kiln_tensor_t dx = describe(self), dout = describe(out);
  KILN_CHECK(kiln_kernel_softmax(&dx, static_cast<int>(d), log ? 1 : 0, &dout));
  return out;
}

Tensor& softmax_out(const Tensor& self, int64_t dim, bool half_to_float, Tensor& out) {
  return softmax_out_impl(false, self, dim, half_to_float, out);
}

Tensor& log_softmax_out(const Tensor& self, int64_t dim, bool half_to_float, Tensor& out) {
  return softmax_out_impl(true, self, dim, half_to_float, out);
}

Tensor& softmax_backward_impl(bool log, const Tensor& grad, const Tensor& output, int64_t dim,
                              at::ScalarType input_dtype, Tensor& grad_input) {
  at::native::resize_output(grad_input, grad.sizes());
  if (!is_float(grad) || !all_describable({&grad, &output, &grad_input}) || !grad.sizes().equals(output.sizes())) {
    return log ? KILN_FALLBACK(_log_softmax_backward_data_out, grad, output, dim, input_dtype, grad_input)
               : KILN_FALLBACK(_softmax_backward_data_out, grad, output, dim, input_dtype, grad_input);
  }
  check_device(grad_input, grad);
  check_device(grad_input, output);
  if (grad_input.numel() == 0) return grad_input;
  int64_t d = at::maybe_wrap_dim(dim, grad.dim());
  kiln_tensor_t dg = describe(grad), dy = describe(output), dgi = describe(grad_input);
  KILN_CHECK(kiln_kernel_softmax_backward(&dg, &dy, static_cast<int>(d), log ? 1 : 0, &dgi));
  return grad_input;
}

Tensor& softmax_backward_out(const Tensor& grad, const Tensor& output, int64_t dim, at::ScalarType dt, Tensor& gi) {
  return softmax_backward_impl(false, grad, output, dim, dt, gi);
}

Tensor& log_softmax_backward_out(const Tensor& grad, const Tensor& output, int64_t dim, at::ScalarType dt, Tensor& gi) {
  return softmax_backward_impl(true, grad, output, dim, dt, gi);
}

// mean/rstd have the input's dtype, as aten's CPU kernel returns them.
at::ScalarType stat_dtype(const Tensor& x) { return x.scalar_type(); }

void check_layer_norm(const Tensor& input, c10::IntArrayRef shape, const Tensor& w, const Tensor& b) {
  int64_t n = static_cast<int64_t>(shape.size());
  TORCH_CHECK(n >= 1, "Expected normalized_shape to be at least 1-dimensional, i.e., containing at least one "
              "element, but got normalized_shape = ", shape);
  TORCH_CHECK(!w.defined() || w.sizes().equals(shape), "Expected weight to be of same shape as normalized_shape, but "
              "got weight of shape ", w.sizes(), " and normalized_shape = ", shape);
  TORCH_CHECK(!b.defined() || b.sizes().equals(shape), "Expected bias to be of same shape as normalized_shape, but "
              "got bias of shape ", b.sizes(), " and normalized_shape = ", shape);
  bool ok = input.dim() >= n;
  for (int64_t i = 0; ok && i < n; i++) ok = input.size(input.dim() - n + i) == shape[i];
  TORCH_CHECK(ok, "Given normalized_shape=", shape, ", expected input with shape [*, ",
              c10::IntArrayRef(shape), "], but got input of size", input.sizes());
}

std::vector<int64_t> stat_shape(const Tensor& x, int64_t n) {
  std::vector<int64_t> s(x.sizes().begin(), x.sizes().end() - n);
  for (int64_t i = 0; i < n; i++) s.push_back(1);
  return s;
}

std::tuple<Tensor, Tensor, Tensor> native_layer_norm(const Tensor& input, c10::IntArrayRef shape,
                                                     const std::optional<Tensor>& weight,
                                                     const std::optional<Tensor>& bias, double eps) {
  Tensor w = weight.has_value() ? *weight : Tensor(), b = bias.has_value() ? *bias : Tensor();
  check_layer_norm(input, shape, w, b);
  if (!is_float(input) || !all_describable({&input, &w, &b}))
    return KILN_FALLBACK(native_layer_norm, input, shape, weight, bias, eps);
  check_device(input, w);
  check_device(input, b);
  int64_t n = static_cast<int64_t>(shape.size());
  Tensor out = at::empty_like(input, at::MemoryFormat::Contiguous);
  Tensor mean = at::empty(stat_shape(input, n), input.options().dtype(stat_dtype(input)));
  Tensor rstd = at::empty(stat_shape(input, n), input.options().dtype(stat_dtype(input)));
  if (input.numel() == 0) return {out, mean, rstd};
  kiln_tensor_t dx = describe(input), dout = describe(out), dm = describe(mean), dr = describe(rstd), dw, db;
  if (w.defined()) dw = describe(w);
  if (b.defined()) db = describe(b);
  KILN_CHECK(kiln_kernel_layer_norm(&dx, static_cast<int>(n), w.defined() ? &dw : nullptr,
                                    b.defined() ? &db : nullptr, eps, &dout, &dm, &dr));
  return {out, mean, rstd};
}

std::tuple<Tensor, Tensor, Tensor> native_layer_norm_backward(
    const Tensor& grad, const Tensor& input, c10::IntArrayRef shape, const Tensor& mean, const Tensor& rstd,
    const std::optional<Tensor>& weight, const std::optional<Tensor>& bias, std::array<bool, 3> mask) {
  Tensor w = weight.has_value() ? *weight : Tensor(), b = bias.has_value() ? *bias : Tensor();
  if (!is_float(input) || !all_describable({&grad, &input, &mean, &rstd, &w}))
    return KILN_FALLBACK(native_layer_norm_backward, grad, input, shape, mean, rstd, weight, bias, mask);
  int64_t n = static_cast<int64_t>(shape.size());
  Tensor gx, gw, gb;
  if (mask[0]) gx = at::empty_like(input, at::MemoryFormat::Contiguous);
  if (mask[1] && w.defined()) gw = at::empty_like(w, at::MemoryFormat::Contiguous);
  if (mask[2] && b.defined()) gb = at::empty_like(b, at::MemoryFormat::Contiguous);
  if (input.numel() == 0) {
    if (gw.defined()) gw.zero_();
    if (gb.defined()) gb.zero_();
    return {gx, gw, gb};
  }
  kiln_tensor_t dg = describe(grad), dx = describe(input), dm = describe(mean), dr = describe(rstd);
  kiln_tensor_t dw, dgx, dgw, dgb;
  if (w.defined()) dw = describe(w);
  if (gx.defined()) dgx = describe(gx);
  if (gw.defined()) dgw = describe(gw);
  if (gb.defined()) dgb = describe(gb);
  KILN_CHECK(kiln_kernel_layer_norm_backward(&dg, &dx, &dm, &dr, w.defined() ? &dw : nullptr, static_cast<int>(n),
                                             gx.defined() ? &dgx : nullptr, gw.defined() ? &dgw : nullptr,
                                             gb.defined() ? &dgb : nullptr));
  return {gx, gw, gb};
}

void check_nll(const Tensor& self, const Tensor& target, const Tensor& w) {
  TORCH_CHECK(self.dim() > 0 && self.dim() <= 2, "input tensor should be 1D or 2D");
  TORCH_CHECK(target.dim() <= 1, "0D or 1D target tensor expected, multi-target not supported");
  int64_t batch = self.dim() == 1 ? 1 : self.size(0);
  TORCH_CHECK(self.dim() == 1 ? target.numel() == 1 : target.size(0) == batch, "size mismatch (got input: ",
              self.sizes(), ", target: ", target.sizes(), ")");
  int64_t c = self.size(-1);
  TORCH_CHECK(!w.defined() || w.numel() == c, "weight tensor should be defined either for all ", c,
              " classes or no classes but got weight tensor of shape: ", w.sizes());
}

std::tuple<Tensor&, Tensor&> nll_loss_forward_out(const Tensor& self, const Tensor& target,
                                                   const std::optional<Tensor>& weight, int64_t reduction,
                                                   int64_t ignore_index, Tensor& output, Tensor& total_weight) {
  Tensor w = weight.has_value() ? *weight : Tensor();
  check_nll(self, target, w);
  if (!is_float(self) || !all_describable({&self, &target, &w}))
    return KILN_FALLBACK(nll_loss_forward_output, self, target, weight, reduction, ignore_index, output, total_weight);
  check_device(output, self);
  check_device(output, target);
  check_device(output, w);
  if (reduction == 0 && self.dim() == 2)
    at::native::resize_output(output, {self.size(0)});
  else
    at::native::resize_output(output, {});
  at::native::resize_output(total_weight, {});
  kiln_tensor_t dx = describe(self), dt = describe(target), dout = describe(output), dtw = describe(total_weight), dw;
  if (w.defined()) dw = describe(w);
  KILN_CHECK(kiln_kernel_nll_loss(&dx, &dt, w.defined() ? &dw : nullptr, static_cast<int>(reduction), ignore_index,
                                  &dout, &dtw));
  return {output, total_weight};
}

Tensor& nll_loss_backward_out(const Tensor& grad, const Tensor& self, const Tensor& target,
                              const std::optional<Tensor>& weight, int64_t reduction, int64_t ignore_index,
                              const Tensor& total_weight, Tensor& grad_input) {
  Tensor w = weight.has_value() ? *weight : Tensor();
  check_nll(self, target, w);
  at::native::resize_output(grad_input, self.sizes());
  if (!is_float(self) || !all_describable({&grad, &self, &target, &w, &total_weight, &grad_input}))
    return KILN_FALLBACK(nll_loss_backward_grad_input, grad, self, target, weight, reduction, ignore_index,
                         total_weight, grad_input);
  if (grad_input.numel() == 0) return grad_input;
  kiln_tensor_t dg = describe(grad), dx = describe(self), dt = describe(target), dtw = describe(total_weight);
  kiln_tensor_t dgi = describe(grad_input), dw;
  if (w.defined()) dw = describe(w);
  KILN_CHECK(kiln_kernel_nll_loss_backward(&dg, &dx, &dt, w.defined() ? &dw : nullptr, static_cast<int>(reduction),
                                           ignore_index, &dtw, &dgi));
  return grad_input;
}

Tensor embedding(const Tensor& weight, const Tensor& indices, int64_t padding_idx, bool scale_grad_by_freq,
                 bool sparse) {
  TORCH_CHECK(weight.dim() == 2, "'weight' must be 2-D");
  TORCH_CHECK(indices.scalar_type() == at::kLong || indices.scalar_type() == at::kInt,
              "Expected tensor for argument #1 'indices' to have one of the following scalar types: Long, Int; "
              "but got ", indices.scalar_type(), " instead (while checking arguments for embedding)");
  if (!all_describable({&weight, &indices}) || indices.dim() + 1 > KILN_MAX_DIMS)
    return KILN_FALLBACK(embedding, weight, indices, padding_idx, scale_grad_by_freq, sparse);
  check_device(weight, indices);
  std::vector<int64_t> shape(indices.sizes().begin(), indices.sizes().end());
  shape.push_back(weight.size(1));
  Tensor out = at::empty(shape, weight.options());
  if (out.numel() == 0 && indices.numel() == 0) return out;
  kiln_tensor_t dw = describe(weight), di = describe(indices), dout = describe(out);
  KILN_CHECK(kiln_kernel_embedding(&dw, &di, &dout));
  return out;
}

Tensor embedding_dense_backward(const Tensor& grad, const Tensor& indices, int64_t num_weights, int64_t padding_idx,
                                bool scale_grad_by_freq) {
  if (!is_float(grad) || !all_describable({&grad, &indices}))
    return KILN_FALLBACK(embedding_dense_backward, grad, indices, num_weights, padding_idx, scale_grad_by_freq);
  Tensor gw = at::empty({num_weights, grad.size(-1)}, grad.options());
  kiln_tensor_t dg = describe(grad), di = describe(indices), dgw = describe(gw);
  KILN_CHECK(kiln_kernel_embedding_backward_ex(&dg, &di, num_weights, padding_idx, scale_grad_by_freq ? 1 : 0, &dgw));
  return gw;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_softmax.out", softmax_out);
  m.impl("_log_softmax.out", log_softmax_out);
  m.impl("_softmax_backward_data.out", softmax_backward_out);
  m.impl("_log_softmax_backward_data.out", log_softmax_backward_out);
  m.impl("native_layer_norm", native_layer_norm);
  m.impl("native_layer_norm_backward", native_layer_norm_backward);
  m.impl("nll_loss_forward.output", nll_loss_forward_out);
  m.impl("nll_loss_backward.grad_input", nll_loss_backward_out);
  m.impl("embedding", embedding);
  m.impl("embedding_dense_backward", embedding_dense_backward);
}

}  // namespace torch_kiln
