// ops_conv.cpp - convolution on kiln. Devices other than CPU/CUDA reach aten through
// convolution_overrideable / convolution_backward_overrideable, whose default kernels throw;
// until kiln has a native conv kernel these run PyTorch's CPU convolution on host views of the
// kiln memory (zero-copy: kiln memory is host-visible) and are counted in the fallback report.
#include <ATen/ops/convolution.h>
#include <ATen/ops/convolution_backward.h>
#include <torch/library.h>

#include "kiln_torch.h"

namespace torch_kiln {
namespace {

using at::Tensor;

Tensor to_kiln(const Tensor& host, const at::Device& device) {
  return host.defined() ? host.to(device) : host;
}

Tensor convolution_overrideable(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias,
                                c10::IntArrayRef stride, c10::IntArrayRef padding, c10::IntArrayRef dilation,
                                bool transposed, c10::IntArrayRef output_padding, int64_t groups) {
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
