/* SPDX-License-Identifier: Apache-2.0 */
// ops_conv.cpp - convolution on kiln. Devices other than CPU/CUDA reach aten through
// convolution_overrideable / convolution_backward_overrideable. 1-D and 2-D non-transposed
// convolutions run kiln_kernel_conv2d(_backward); other cases (transposed, 3-D, dtypes kiln
// lacks) run PyTorch's CPU convolution on host views of the kiln memory (zero-copy: kiln
// memory is host-visible) and are counted in the fallback report.
#include <ATen/ops/convolution.h>
#include <ATen/ops/convolution_backward.h>
#include <torch/library.h>

#include "ops_common.h"

extern "C" {
#include "kiln/kernels/conv.h"
}

namespace torch_kiln {
namespace {

using at::Tensor;

Tensor to_kiln(const Tensor& host, const at::Device& device) {
  return host.defined() ? host.to(device) : host;
}

bool native_conv(const Tensor& input, const Tensor& weight, bool transposed, c10::IntArrayRef stride,
                 c10::IntArrayRef padding, c10::IntArrayRef dilation) {
  bool fl = input.scalar_type() == at::kFloat || input.scalar_type() == at::kDouble ||
            input.scalar_type() == at::kHalf || input.scalar_type() == at::kBFloat16;
  return !transposed && fl && (input.dim() == 4 || input.dim() == 3) && weight.dim() == input.dim() &&
         weight.scalar_type() == input.scalar_type() && stride.size() + 2 == (size_t)input.dim() &&
         padding.size() == stride.size() && dilation.size() == stride.size() && describable(input) &&
         describable(weight);
}

void conv_params(c10::IntArrayRef v, int64_t out[2]) {
  out[0] = v[0];
  out[1] = v.size() > 1 ? v[1] : 1;
}

std::vector<int64_t> conv_out_shape(const Tensor& x, const Tensor& w, const int64_t s[2], const int64_t p[2],
                                    const int64_t d[2]) {
  std::vector<int64_t> shape = {x.size(0), w.size(0)};
  for (int64_t i = 2; i < x.dim(); i++) {
    int64_t k = i - 2;
    int64_t o = (x.size(i) + 2 * p[k] - d[k] * (w.size(i) - 1) - 1) / s[k] + 1;
    TORCH_CHECK(o > 0, "Calculated output size is too small for input of shape ", x.sizes(), " and weight ",
                w.sizes());
    shape.push_back(o);
  }
  return shape;
}

Tensor convolution_overrideable(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias,
                                c10::IntArrayRef stride, c10::IntArrayRef padding, c10::IntArrayRef dilation,
                                bool transposed, c10::IntArrayRef output_padding, int64_t groups) {
  Tensor bt = bias.has_value() ? *bias : Tensor();
  if (native_conv(input, weight, transposed, stride, padding, dilation) && (!bt.defined() || describable(bt))) {
    check_device(input, weight);
    check_device(input, bt);
    int64_t s[2], p[2], d[2];
    conv_params(stride, s);
    conv_params(padding, p);
    conv_params(dilation, d);
    Tensor out = at::empty(conv_out_shape(input, weight, s, p, d), input.options());
    if (out.numel() == 0) return out;
    kiln_tensor_t dx = describe(input), dw = describe(weight), dout = describe(out), db;
    if (bt.defined()) db = describe(bt);
    KILN_CHECK(kiln_kernel_conv2d(&dx, &dw, bt.defined() ? &db : nullptr, s, p, d, groups, &dout));
    return out;
  }
  record_fallback("aten::convolution_overrideable");
  synchronize(input.device().index());
  std::optional<Tensor> b;
  if (bias.has_value() && bias->defined()) b = host_alias(*bias);
  Tensor out = at::convolution(host_alias(input), host_alias(weight), b, stride, padding, dilation, transposed,
                               output_padding, groups);
  return to_kiln(out, input.device());
}

std::tuple<Tensor, Tensor, Tensor> convolution_backward_overrideable(
    const Tensor& grad_output, const Tensor& input, const Tensor& weight, c10::IntArrayRef stride,
    c10::IntArrayRef padding, c10::IntArrayRef dilation, bool transposed, c10::IntArrayRef output_padding,
    int64_t groups, std::array<bool, 3> mask) {
  if (native_conv(input, weight, transposed, stride, padding, dilation) && describable(grad_output)) {
    int64_t s[2], p[2], d[2];
    conv_params(stride, s);
    conv_params(padding, p);
    conv_params(dilation, d);
    Tensor gi, gw, gb;
    if (mask[0]) gi = at::empty_like(input, at::MemoryFormat::Contiguous);
    if (mask[1]) gw = at::empty_like(weight, at::MemoryFormat::Contiguous);
    if (mask[2]) gb = at::empty({weight.size(0)}, weight.options());
    kiln_tensor_t dg = describe(grad_output), dx = describe(input), dw = describe(weight), dgi, dgw, dgb;
    if (gi.defined()) dgi = describe(gi);
    if (gw.defined()) dgw = describe(gw);
    if (gb.defined()) dgb = describe(gb);
    KILN_CHECK(kiln_kernel_conv2d_backward(&dg, &dx, &dw, s, p, d, groups, gi.defined() ? &dgi : nullptr,
                                           gw.defined() ? &dgw : nullptr, gb.defined() ? &dgb : nullptr));
    return {gi, gw, gb};
  }
  record_fallback("aten::convolution_backward_overrideable");
  synchronize(input.device().index());
  std::optional<std::vector<int64_t>> bias_sizes;
  if (mask[2]) bias_sizes = std::vector<int64_t>{transposed ? weight.size(1) * groups : weight.size(0)};
  std::optional<c10::IntArrayRef> bs;
  if (bias_sizes) bs = c10::IntArrayRef(*bias_sizes);
  auto [gi, gw, gb] = at::convolution_backward(host_alias(grad_output), host_alias(input), host_alias(weight), bs,
                                               stride, padding, dilation, transposed, output_padding, groups, mask);
  return {to_kiln(gi, input.device()), to_kiln(gw, input.device()), to_kiln(gb, input.device())};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("convolution_overrideable", convolution_overrideable);
  m.impl("convolution_backward_overrideable", convolution_backward_overrideable);
}

}  // namespace torch_kiln
