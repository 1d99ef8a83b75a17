/* SPDX-License-Identifier: Apache-2.0 */
// autocast.cpp - torch.autocast("kiln"): the AutocastPrivateUse1 dispatch key. Ops without a
// policy pass through; the rest take torch's own op lists (ATen/autocast_mode.h, the lists CUDA
// registers): matmuls, convolutions and attention run in the autocast dtype, reductions, norms,
// losses and transcendental pointwise ops in float32, multi-input ops in the widest input type.
#include <ATen/autocast_mode.h>
#include <torch/library.h>

namespace torch_kiln {
namespace {

using at::IntArrayRef;
using at::Scalar;
using at::ScalarType;
using at::Tensor;

// binary_cross_entropy is unsafe in reduced precision; as on CUDA, autocast refuses it.
Tensor binary_cross_entropy_banned(const Tensor&, const Tensor&, const std::optional<Tensor>&,
                                   int64_t) {
  TORCH_CHECK(false,
              "torch.nn.functional.binary_cross_entropy and torch.nn.BCELoss are unsafe to "
              "autocast. Combine the sigmoid and the loss in one op: use "
              "torch.nn.functional.binary_cross_entropy_with_logits or torch.nn.BCEWithLogitsLoss, "
              "which are safe to autocast.");
}

}  // namespace

TORCH_LIBRARY_IMPL(_, AutocastPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFallthrough());
}

TORCH_LIBRARY_IMPL(aten, AutocastPrivateUse1, m) {
#define KILN_AUTOCAST_LOWER(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, lower_precision_fp)
#define KILN_AUTOCAST_FP32(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32)
#define KILN_AUTOCAST_FP32_SET_OPT_DTYPE(...) \
  KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32_set_opt_dtype)
#define KILN_AUTOCAST_PROMOTE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, promote)
  AT_FORALL_LOWER_PRECISION_FP(KILN_AUTOCAST_LOWER)
  AT_FORALL_FP32(KILN_AUTOCAST_FP32)
  AT_FORALL_FP32_SET_OPT_DTYPE(KILN_AUTOCAST_FP32_SET_OPT_DTYPE)
  AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE(KERNEL_DIFFERENT_REDISPATCH_SIGNATURE_PRIVATEUSEONE)
  AT_FORALL_PROMOTE(KILN_AUTOCAST_PROMOTE)
#undef KILN_AUTOCAST_LOWER
#undef KILN_AUTOCAST_FP32
#undef KILN_AUTOCAST_FP32_SET_OPT_DTYPE
#undef KILN_AUTOCAST_PROMOTE
  m.impl(TORCH_SELECTIVE_NAME("aten::binary_cross_entropy"),
         TORCH_FN(binary_cross_entropy_banned));
}

}  // namespace torch_kiln
