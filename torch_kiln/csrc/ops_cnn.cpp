/* SPDX-License-Identifier: Apache-2.0 */
// ops_cnn.cpp - native kiln pooling (max/avg/adaptive avg 2-D, + backward) and batch norm
// (native_batch_norm + backward). Other cases go to the counted CPU fallback.
#include <ATen/ops/_adaptive_avg_pool2d.h>
#include <ATen/ops/_adaptive_avg_pool2d_backward.h>
#include <ATen/ops/avg_pool2d.h>
#include <ATen/ops/avg_pool2d_backward.h>
#include <ATen/ops/max_pool2d_with_indices.h>
#include <ATen/ops/max_pool2d_with_indices_backward.h>
#include <ATen/ops/native_batch_norm.h>
#include <ATen/ops/native_batch_norm_backward.h>
#include <torch/library.h>

#include "ops_common.h"

extern "C" {
#include "kiln/kernels/conv.h"
}

namespace torch_kiln {
namespace {

using at::Tensor;

bool float_desc(const Tensor& t) { return describable(t) && at::isFloatingType(t.scalar_type()); }

void pair(c10::IntArrayRef v, int64_t dflt0, int64_t dflt1, int64_t out[2]) {
  out[0] = v.empty() ? dflt0 : v[0];
  out[1] = v.empty() ? dflt1 : (v.size() > 1 ? v[1] : v[0]);
}

// aten's pooling argument checks (max_pool2d / avg_pool2d), in its order; they run before the
// output size arithmetic, which divides by the stride.
void check_pool_args(const char* op, c10::IntArrayRef kernel, c10::IntArrayRef stride, c10::IntArrayRef padding,
                     const int64_t k[2], const int64_t s[2], const int64_t p[2], const int64_t d[2]) {
  TORCH_CHECK(kernel.size() == 1 || kernel.size() == 2, op,
              ": kernel_size must either be a single int, or a tuple of two ints");
  TORCH_CHECK(stride.empty() || stride.size() == 1 || stride.size() == 2, op,
              ": stride must either be omitted, a single int, or a tuple of two ints");
  TORCH_CHECK(padding.size() == 1 || padding.size() == 2, op,
              ": padding must either be a single int, or a tuple of two ints");
  for (int i = 0; i < 2; i++) {
    TORCH_CHECK(s[i] != 0, "stride should not be zero");
    TORCH_CHECK(p[i] >= 0, "pad must be non-negative, but got pad: ", p[i]);
    TORCH_CHECK(p[i] <= ((k[i] - 1) * d[i] + 1) / 2, "pad should be at most half of effective kernel size, but got pad=",
                p[i], ", kernel_size=", k[i], " and dilation=", d[i]);
  }
  TORCH_CHECK(k[0] > 0 && k[1] > 0, "kernel size should be greater than zero, but got kH: ", k[0], " kW: ", k[1]);
  TORCH_CHECK(s[0] > 0 && s[1] > 0, "stride should be greater than zero, but got dH: ", s[0], " dW: ", s[1]);
  TORCH_CHECK(d[0] > 0 && d[1] > 0, "dilation should be greater than zero, but got dilationH: ", d[0],
              " dilationW: ", d[1]);
}

// torch's pooling output size (pooling_output_shape).
int64_t pool_out(int64_t in, int64_t k, int64_t pad, int64_t s, int64_t dil, bool ceil) {
  int64_t num = in + 2 * pad - dil * (k - 1) - 1 + (ceil ? s - 1 : 0);
  int64_t o = num / s + 1;
  if (ceil && (o - 1) * s >= in + pad) o--;
  return o;
}

std::vector<int64_t> pooled_shape(const Tensor& x, const int64_t k[2], const int64_t s[2], const int64_t p[2],
                                  const int64_t d[2], bool ceil) {
  std::vector<int64_t> shape(x.sizes().begin(), x.sizes().end() - 2);
  int64_t oh = pool_out(x.size(-2), k[0], p[0], s[0], d[0], ceil), ow = pool_out(x.size(-1), k[1], p[1], s[1], d[1], ceil);
  TORCH_CHECK(oh > 0 && ow > 0, "Given input size: (", x.sizes(), "). Calculated output size is too small");
  shape.push_back(oh);
  shape.push_back(ow);
  return shape;
}

std::tuple<Tensor, Tensor> max_pool2d_with_indices(const Tensor& self, c10::IntArrayRef kernel, c10::IntArrayRef stride,
                                                   c10::IntArrayRef padding, c10::IntArrayRef dilation, bool ceil_mode) {
  if (!float_desc(self) || (self.dim() != 3 && self.dim() != 4) || kernel.empty())
    return KILN_FALLBACK(max_pool2d_with_indices, self, kernel, stride, padding, dilation, ceil_mode);
  int64_t k[2], s[2], p[2], d[2];
  pair(kernel, 1, 1, k);
  pair(stride, k[0], k[1], s);
  pair(padding, 0, 0, p);
  pair(dilation, 1, 1, d);
  TORCH_CHECK(dilation.size() == 1 || dilation.size() == 2,
              "max_pool2d: dilation must be either a single int, or a tuple of two ints");
  check_pool_args("max_pool2d", kernel, stride, padding, k, s, p, d);
  auto shape = pooled_shape(self, k, s, p, d, ceil_mode);
  Tensor out = at::empty(shape, self.options()), idx = at::empty(shape, self.options().dtype(at::kLong));
  if (out.numel() == 0) return {out, idx};
  kiln_tensor_t dx = describe(self), dout = describe(out), di = describe(idx);
  KILN_CHECK(kiln_kernel_max_pool2d(&dx, k, s, p, d, ceil_mode ? 1 : 0, &dout, &di));
  return {out, idx};
}

Tensor max_pool2d_with_indices_backward(const Tensor& grad, const Tensor& self, c10::IntArrayRef kernel,
                                        c10::IntArrayRef stride, c10::IntArrayRef padding, c10::IntArrayRef dilation,
                                        bool ceil_mode, const Tensor& indices) {
  if (!float_desc(grad) || !describable(indices) || (self.dim() != 3 && self.dim() != 4))
    return KILN_FALLBACK(max_pool2d_with_indices_backward, grad, self, kernel, stride, padding, dilation, ceil_mode,
                         indices);
  Tensor gx = at::empty_like(self, at::MemoryFormat::Contiguous);
  kiln_tensor_t dg = describe(grad), di = describe(indices), dgx = describe(gx);
  KILN_CHECK(kiln_kernel_max_pool2d_backward(&dg, &di, &dgx));
  return gx;
}

Tensor& avg_pool2d_out(const Tensor& self, c10::IntArrayRef kernel, c10::IntArrayRef stride, c10::IntArrayRef padding,
                       bool ceil_mode, bool count_include_pad, std::optional<int64_t> divisor, Tensor& out) {
  if (!float_desc(self) || (self.dim() != 3 && self.dim() != 4) || kernel.empty())
    return KILN_FALLBACK(avg_pool2d_out, self, kernel, stride, padding, ceil_mode, count_include_pad, divisor, out);
  TORCH_CHECK(!divisor.has_value() || *divisor != 0, "divisor must be not zero");
  int64_t k[2], s[2], p[2], d[2] = {1, 1};
  pair(kernel, 1, 1, k);
  pair(stride, k[0], k[1], s);
  pair(padding, 0, 0, p);
  check_pool_args("avg_pool2d", kernel, stride, padding, k, s, p, d);
  at::native::resize_output(out, pooled_shape(self, k, s, p, d, ceil_mode));
  if (!describable(out))
    return KILN_FALLBACK(avg_pool2d_out, self, kernel, stride, padding, ceil_mode, count_include_pad, divisor, out);
  if (out.numel() == 0) return out;
  kiln_tensor_t dx = describe(self), dout = describe(out);
  KILN_CHECK(kiln_kernel_avg_pool2d(&dx, k, s, p, ceil_mode ? 1 : 0, count_include_pad ? 1 : 0, divisor.value_or(0),
                                    &dout));
  return out;
}

Tensor& avg_pool2d_backward_out(const Tensor& grad, const Tensor& self, c10::IntArrayRef kernel,
                                c10::IntArrayRef stride, c10::IntArrayRef padding, bool ceil_mode,
                                bool count_include_pad, std::optional<int64_t> divisor, Tensor& gi) {
  if (!float_desc(grad) || (self.dim() != 3 && self.dim() != 4) || kernel.empty())
    return KILN_FALLBACK(avg_pool2d_backward_grad_input, grad, self, kernel, stride, padding, ceil_mode,
                         count_include_pad, divisor, gi);
  int64_t k[2], s[2], p[2];
  pair(kernel, 1, 1, k);
  pair(stride, k[0], k[1], s);
  pair(padding, 0, 0, p);
  at::native::resize_output(gi, self.sizes());
  if (gi.numel() == 0) return gi;
  kiln_tensor_t dg = describe(grad), dgi = describe(gi);
  KILN_CHECK(kiln_kernel_avg_pool2d_backward(&dg, k, s, p, ceil_mode ? 1 : 0, count_include_pad ? 1 : 0,
                                             divisor.value_or(0), &dgi));
  return gi;
}

Tensor adaptive_avg_pool2d(const Tensor& self, c10::IntArrayRef output_size) {
  if (!float_desc(self) || (self.dim() != 3 && self.dim() != 4) || output_size.size() != 2)
    return KILN_FALLBACK(_adaptive_avg_pool2d, self, output_size);
  std::vector<int64_t> shape(self.sizes().begin(), self.sizes().end() - 2);
  shape.push_back(output_size[0]);
  shape.push_back(output_size[1]);
  Tensor out = at::empty(shape, self.options());
  if (out.numel() == 0) return out;
  kiln_tensor_t dx = describe(self), dout = describe(out);
  KILN_CHECK(kiln_kernel_adaptive_avg_pool2d(&dx, &dout));
  return out;
}

Tensor adaptive_avg_pool2d_backward(const Tensor& grad, const Tensor& self) {
  if (!float_desc(grad) || (self.dim() != 3 && self.dim() != 4))
    return KILN_FALLBACK(_adaptive_avg_pool2d_backward, grad, self);
  Tensor gx = at::empty_like(self, at::MemoryFormat::Contiguous);
  kiln_tensor_t dg = describe(grad), dgx = describe(gx);
  KILN_CHECK(kiln_kernel_adaptive_avg_pool2d_backward(&dg, &dgx));
  return gx;
}

kiln_tensor_t* opt_desc(const Tensor& t, kiln_tensor_t* storage) {
  if (!t.defined()) return nullptr;
  *storage = describe(t);
  return storage;
}

std::tuple<Tensor, Tensor, Tensor> batch_norm_fwd(const Tensor& input, const std::optional<Tensor>& weight,
                                                     const std::optional<Tensor>& bias,
                                                     const std::optional<Tensor>& running_mean,
                                                     const std::optional<Tensor>& running_var, bool training,
                                                     double momentum, double eps) {
  Tensor w = weight.value_or(Tensor()), b = bias.value_or(Tensor());
  Tensor rm = running_mean.value_or(Tensor()), rv = running_var.value_or(Tensor());
  // aten's CPU rule: the parameters share input's dtype, or are all f32 for an f16/bf16 input.
  const Tensor* first = nullptr;
  for (const Tensor* t : {&w, &b, &rm, &rv})
    if (t->defined() && !first) first = t;
  if (first) {
    bool reduced = input.scalar_type() == at::kHalf || input.scalar_type() == at::kBFloat16;
    at::ScalarType want = reduced && first->scalar_type() == at::kFloat ? at::kFloat : input.scalar_type();
    for (const Tensor* t : {&w, &b, &rm, &rv})
      TORCH_CHECK(!t->defined() || t->scalar_type() == want, "mixed dtype (CPU): all inputs must share same datatype.");
  }
  if (!float_desc(input) || input.dim() < 2 || !all_describable({&w, &b, &rm, &rv}))
    return KILN_FALLBACK(native_batch_norm, input, weight, bias, running_mean, running_var, training, momentum, eps);
  TORCH_CHECK(training || (rm.defined() && rv.defined()), "running_mean and running_var must be defined in evaluation mode");
  int64_t C = input.size(1);
  at::ScalarType st = (input.scalar_type() == at::kHalf || input.scalar_type() == at::kBFloat16) ? at::kFloat
                                                                                                 : input.scalar_type();
  if (w.defined()) st = w.scalar_type();
  Tensor out = at::empty_like(input, at::MemoryFormat::Contiguous);
  Tensor sm = at::empty({training ? C : 0}, input.options().dtype(st));
  Tensor si = at::empty({training ? C : 0}, input.options().dtype(st));
  kiln_tensor_t dx = describe(input), dout = describe(out), s1, s2, s3, s4, s5, s6;
  KILN_CHECK(kiln_kernel_batch_norm(&dx, opt_desc(w, &s1), opt_desc(b, &s2), opt_desc(rm, &s3), opt_desc(rv, &s4),
                                    training ? 1 : 0, momentum, eps, &dout, training ? opt_desc(sm, &s5) : nullptr,
                                    training ? opt_desc(si, &s6) : nullptr));
  return {out, sm, si};
}

std::tuple<Tensor, Tensor, Tensor> native_batch_norm_backward(
    const Tensor& grad, const Tensor& input, const std::optional<Tensor>& weight,
    const std::optional<Tensor>& running_mean, const std::optional<Tensor>& running_var,
    const std::optional<Tensor>& save_mean, const std::optional<Tensor>& save_invstd, bool train, double eps,
    std::array<bool, 3> mask) {
  Tensor w = weight.value_or(Tensor()), rm = running_mean.value_or(Tensor()), rv = running_var.value_or(Tensor());
  Tensor sm = save_mean.value_or(Tensor()), si = save_invstd.value_or(Tensor());
  if (!float_desc(input) || !describable(grad) || !all_describable({&w, &rm, &rv, &sm, &si}))
    return KILN_FALLBACK(native_batch_norm_backward, grad, input, weight, running_mean, running_var, save_mean,
                         save_invstd, train, eps, mask);
  int64_t C = input.size(1);
  Tensor gx, gw, gb;
  at::TensorOptions po = w.defined() ? w.options() : input.options();
  if (mask[0]) gx = at::empty_like(input, at::MemoryFormat::Contiguous);
  if (mask[1]) gw = at::empty({C}, po);
  if (mask[2]) gb = at::empty({C}, po);
  kiln_tensor_t dg = describe(grad), dx = describe(input), s1, s2, s3, s4, s5, s6, s7, s8;
  KILN_CHECK(kiln_kernel_batch_norm_backward(&dg, &dx, opt_desc(w, &s1), opt_desc(rm, &s2), opt_desc(rv, &s3),
                                             train ? opt_desc(sm, &s4) : nullptr, train ? opt_desc(si, &s5) : nullptr,
                                             train ? 1 : 0, eps,
                                             opt_desc(gx, &s6), opt_desc(gw, &s7), opt_desc(gb, &s8)));
  return {gx, gw, gb};
}

// _native_batch_norm_legit: batch norm with (mutable) running stats, the form torch.export and
// the compiler's functionalization produce; same kernel.
std::tuple<Tensor, Tensor, Tensor> batch_norm_legit(const Tensor& input, const std::optional<Tensor>& weight,
                                                    const std::optional<Tensor>& bias, Tensor& running_mean,
                                                    Tensor& running_var, bool training, double momentum,
                                                    double eps) {
  return batch_norm_fwd(input, weight, bias, running_mean, running_var, training, momentum, eps);
}

std::tuple<Tensor, Tensor, Tensor> batch_norm_legit_no_stats(const Tensor& input, const std::optional<Tensor>& weight,
                                                             const std::optional<Tensor>& bias, bool training,
                                                             double momentum, double eps) {
  return batch_norm_fwd(input, weight, bias, std::nullopt, std::nullopt, training, momentum, eps);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_native_batch_norm_legit", batch_norm_legit);
  m.impl("_native_batch_norm_legit.no_stats", batch_norm_legit_no_stats);
  m.impl("max_pool2d_with_indices", max_pool2d_with_indices);
  m.impl("max_pool2d_with_indices_backward", max_pool2d_with_indices_backward);
  m.impl("avg_pool2d.out", avg_pool2d_out);
  m.impl("avg_pool2d_backward.grad_input", avg_pool2d_backward_out);
  m.impl("_adaptive_avg_pool2d", adaptive_avg_pool2d);
  m.impl("_adaptive_avg_pool2d_backward", adaptive_avg_pool2d_backward);
  m.impl("native_batch_norm", batch_norm_fwd);
  m.impl("native_batch_norm_backward", native_batch_norm_backward);
}

}  // namespace torch_kiln
