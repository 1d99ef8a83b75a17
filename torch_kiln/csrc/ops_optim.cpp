/* SPDX-License-Identifier: Apache-2.0 */
// ops_optim.cpp - fused optimizers on kiln: torch.optim.Adam/AdamW(fused=True) call
// _fused_adam(w)_, which runs kiln_kernel_fused_adamw over every parameter in one pass.
#include <ATen/ops/_fused_adam.h>
#include <ATen/ops/_fused_adamw.h>
#include <torch/library.h>

#include "ops_common.h"

extern "C" {
#include "kiln/kernels/optim.h"
}

namespace torch_kiln {
namespace {

using at::Tensor;

// Reads a one-element float tensor (host-visible memory) as float; NULL-able.
std::optional<float> read_scalar(const std::optional<Tensor>& t) {
  if (!t.has_value() || !t->defined()) return std::nullopt;
  if (t->is_privateuseone()) synchronize(t->device().index());
  return t->item<float>();
}

void fused_adam_impl(bool adamw, at::TensorList params, at::TensorList grads, at::TensorList exp_avgs,
                     at::TensorList exp_avg_sqs, at::TensorList max_exp_avg_sqs, at::TensorList steps, double lr,
                     double beta1, double beta2, double weight_decay, double eps, bool amsgrad, bool maximize,
                     const std::optional<Tensor>& grad_scale, const std::optional<Tensor>& found_inf) {
  size_t n = params.size();
  TORCH_CHECK(grads.size() == n && exp_avgs.size() == n && exp_avg_sqs.size() == n && steps.size() == n &&
                  (!amsgrad || max_exp_avg_sqs.size() == n),
              "_fused_adam(w)_: tensor lists must have the same length");
  std::vector<kiln_tensor_t> d(5 * n);
  std::vector<kiln_tensor_t*> p(n), g(n), m(n), v(n), mx(amsgrad ? n : 0);
  std::vector<double> st(n);
  for (size_t i = 0; i < n; i++) {
    for (const Tensor* t : {&params[i], &grads[i], &exp_avgs[i], &exp_avg_sqs[i]}) {
      TORCH_CHECK(describable(*t) && t->device() == params[i].device(), "_fused_adam(w)_: tensor ", i,
                  " is not a kiln tensor kiln can describe");
    }
    d[5 * i] = describe(params[i]);
    d[5 * i + 1] = describe(grads[i]);
    d[5 * i + 2] = describe(exp_avgs[i]);
    d[5 * i + 3] = describe(exp_avg_sqs[i]);
    p[i] = &d[5 * i];
    g[i] = &d[5 * i + 1];
    m[i] = &d[5 * i + 2];
    v[i] = &d[5 * i + 3];
    if (amsgrad) {
      d[5 * i + 4] = describe(max_exp_avg_sqs[i]);
      mx[i] = &d[5 * i + 4];
    }
    TORCH_CHECK(steps[i].numel() == 1, "_fused_adam(w)_: state_steps must hold one element each");
    st[i] = steps[i].is_privateuseone() || steps[i].is_cpu() ? host_alias(steps[i]).item<double>() : 0.0;
  }
  std::optional<float> gs = read_scalar(grad_scale), fi = read_scalar(found_inf);
  float gsv = gs.value_or(1.f), fiv = fi.value_or(0.f);
  if (n == 0) return;
  synchronize(params[0].device().index());
  KILN_CHECK(kiln_kernel_fused_adamw(static_cast<int>(n), p.data(), g.data(), m.data(), v.data(),
                                     amsgrad ? mx.data() : nullptr, st.data(), lr, beta1, beta2, weight_decay, eps,
                                     amsgrad ? 1 : 0, maximize ? 1 : 0, adamw ? 1 : 0, gs ? &gsv : nullptr,
                                     fi ? &fiv : nullptr));
}

void fused_adamw(at::TensorList params, at::TensorList grads, at::TensorList exp_avgs, at::TensorList exp_avg_sqs,
                 at::TensorList max_exp_avg_sqs, at::TensorList steps, double lr, double beta1, double beta2,
                 double weight_decay, double eps, bool amsgrad, bool maximize,
                 const std::optional<Tensor>& grad_scale, const std::optional<Tensor>& found_inf) {
  fused_adam_impl(true, params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps, lr, beta1, beta2, weight_decay,
                  eps, amsgrad, maximize, grad_scale, found_inf);
}

void fused_adam(at::TensorList params, at::TensorList grads, at::TensorList exp_avgs, at::TensorList exp_avg_sqs,
                at::TensorList max_exp_avg_sqs, at::TensorList steps, double lr, double beta1, double beta2,
                double weight_decay, double eps, bool amsgrad, bool maximize,
                const std::optional<Tensor>& grad_scale, const std::optional<Tensor>& found_inf) {
  fused_adam_impl(false, params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps, lr, beta1, beta2, weight_decay,
                  eps, amsgrad, maximize, grad_scale, found_inf);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_fused_adamw_", fused_adamw);
  m.impl("_fused_adam_", fused_adam);
}

}  // namespace torch_kiln
