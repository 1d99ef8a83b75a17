/* SPDX-License-Identifier: Apache-2.0 */
// amp.cpp - the two ops behind torch.amp.GradScaler, on the device: each is a composition of
// native kiln ops (no host round trip, no sync), with the checks and semantics of torch's CUDA
// kernels.
//   _amp_foreach_non_finite_check_and_unscale_: found_inf = 1 if any grad holds inf/NaN; every
//     grad is multiplied by inv_scale.
//   _amp_update_scale_: backoff on found_inf, growth after growth_interval clean steps (kept only
//     when the grown scale is finite).
#include <torch/library.h>

#include "kiln_torch.h"

namespace torch_kiln {
namespace {

void check_scalar_float(const at::Tensor& t, const char* what, const at::Device& dev) {
  TORCH_CHECK(t.numel() == 1, what, " must be a 1-element tensor, got ", t.numel(), " elements");
  TORCH_CHECK(t.scalar_type() == at::kFloat, what, " must be a float tensor, got ",
              t.scalar_type());
  TORCH_CHECK(t.device() == dev, what, " must be on ", dev, ", got ", t.device());
}

void non_finite_check_and_unscale(at::TensorList grads, at::Tensor& found_inf,
                                  const at::Tensor& inv_scale) {
  const at::Device dev = found_inf.device();
  check_scalar_float(inv_scale, "inv_scale", dev);
  check_scalar_float(found_inf, "found_inf", dev);
  for (const at::Tensor& g : grads) {
    TORCH_CHECK(g.device() == dev, "_amp_foreach_non_finite_check_and_unscale_: every grad must "
                "be on ", dev, ", got one on ", g.device());
    TORCH_CHECK(at::isFloatingType(g.scalar_type()), "_amp_foreach_non_finite_check_and_unscale_:"
                " grads must be floating point, got ", g.scalar_type());
    TORCH_CHECK(g.layout() == at::kStrided, "_amp_foreach_non_finite_check_and_unscale_: grads "
                "must be strided");
  }
  if (grads.empty()) return;
  // One flag per grad, reduced once: found_inf = max(found_inf, any non-finite).
  std::vector<at::Tensor> flags;
  flags.reserve(grads.size());
  for (const at::Tensor& g : grads) {
    if (g.numel() == 0) continue;
    flags.push_back(at::isfinite(g).logical_not().any());
  }
  if (!flags.empty()) {
    at::Tensor any = flags.size() == 1 ? flags[0] : at::stack(flags).any();
    found_inf.copy_(at::maximum(found_inf, any.to(at::kFloat).reshape(found_inf.sizes())));
  }
  for (const at::Tensor& g : grads) {
    if (g.numel() == 0) continue;
    // A 0-dim float multiplier: half/bf16 grads are scaled in float and keep their dtype.
    at::Tensor out = g;  // shares g's storage: mul_ writes the grad in place
    out.mul_(inv_scale.reshape({}));
  }
}

at::Tensor& update_scale(at::Tensor& scale, at::Tensor& growth_tracker,
                         const at::Tensor& found_inf, double growth_factor, double backoff_factor,
                         int64_t growth_interval) {
  const at::Device dev = scale.device();
  check_scalar_float(scale, "current_scale", dev);
  check_scalar_float(found_inf, "found_inf", dev);
  TORCH_CHECK(growth_tracker.numel() == 1 && growth_tracker.scalar_type() == at::kInt &&
                  growth_tracker.device() == dev,
              "growth_tracker must be a 1-element int32 tensor on ", dev);
  at::Tensor found = found_inf.ne(0);
  at::Tensor succeeded = growth_tracker.add(1);
  at::Tensor grow = succeeded.eq(growth_interval);
  at::Tensor grown = scale.mul(growth_factor);
  // Growth is kept only when finite; the counter restarts on growth, on backoff and on a grown
  // scale that overflowed.
  at::Tensor not_backoff = at::where(at::logical_and(grow, at::isfinite(grown)), grown, scale);
  at::Tensor new_scale = at::where(found, scale.mul(backoff_factor), not_backoff);
  at::Tensor zero = at::zeros_like(growth_tracker);
  at::Tensor new_tracker = at::where(at::logical_or(found, grow), zero, succeeded);
  scale.copy_(new_scale);
  growth_tracker.copy_(new_tracker);
  return scale;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_amp_foreach_non_finite_check_and_unscale_", non_finite_check_and_unscale);
  m.impl("_amp_update_scale_", update_scale);
}

}  // namespace torch_kiln
