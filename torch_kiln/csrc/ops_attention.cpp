/* SPDX-License-Identifier: Apache-2.0 */
// ops_attention.cpp - F.scaled_dot_product_attention on kiln: _fused_sdp_choice picks the
// "overrideable" backend (kiln_kernel_sdpa, flash-style) when it applies, else the math
// decomposition (which itself runs on native kiln kernels).
#include <ATen/SDPBackend.h>
#include <ATen/ops/_fused_sdp_choice.h>
#include <ATen/ops/_scaled_dot_product_fused_attention_overrideable.h>
#include <ATen/ops/_scaled_dot_product_fused_attention_overrideable_backward.h>
#include <ATen/native/transformers/attention.h>
#include <torch/library.h>

#include <cmath>

#include "ops_common.h"

extern "C" {
#include "kiln/kernels/nn.h"
}

namespace torch_kiln {
namespace {

using at::Tensor;

bool sdpa_dtype(const Tensor& t) {
  return t.scalar_type() == at::kFloat || t.scalar_type() == at::kHalf || t.scalar_type() == at::kBFloat16 ||
         t.scalar_type() == at::kDouble;
}

int64_t fused_sdp_choice(const Tensor& q, const Tensor& k, const Tensor& v, const std::optional<Tensor>& mask,
                         double dropout_p, bool is_causal, std::optional<double> scale, bool enable_gqa) {
  // sym_size: this also runs on fake (traced) tensors, whose sizes may be symbolic
  bool ok = q.dim() == 4 && k.dim() == 4 && v.dim() == 4 && dropout_p == 0.0 && sdpa_dtype(q) &&
            q.scalar_type() == k.scalar_type() && q.scalar_type() == v.scalar_type() &&
            q.sym_size(0) == k.sym_size(0) && k.sym_size(0) == v.sym_size(0) && q.sym_size(1) == k.sym_size(1) &&
            k.sym_size(1) == v.sym_size(1) && q.sym_size(3) == k.sym_size(3) && k.sym_size(2) == v.sym_size(2) &&
            all_describable({&q, &k, &v});
  if (ok && mask.has_value() && mask->defined()) {
    const Tensor& m = *mask;
    ok = !m.requires_grad() && describable(m) && (m.scalar_type() == at::kBool || m.scalar_type() == q.scalar_type()) &&
         m.dim() <= 4;
  }
  (void)scale;
  (void)is_causal;
  (void)enable_gqa;
  return static_cast<int64_t>(ok ? at::SDPBackend::overrideable : at::SDPBackend::math);
}

double scale_or_nan(std::optional<double> scale) { return scale.has_value() ? *scale : std::nan(""); }

std::tuple<Tensor, Tensor, Tensor, Tensor, c10::SymInt, c10::SymInt, Tensor, Tensor, Tensor> sdpa_fwd(
    const Tensor& q, const Tensor& k, const Tensor& v, const std::optional<Tensor>& bias, double dropout_p,
    bool is_causal, bool return_debug_mask, std::optional<double> scale) {
  TORCH_CHECK(dropout_p == 0.0, "kiln: fused attention does not implement dropout");
  TORCH_CHECK(!return_debug_mask, "kiln: fused attention has no debug mask");
  check_device(q, k);
  check_device(q, v);
  int64_t B = q.size(0), H = q.size(1), L = q.size(2), Ev = v.size(3);
  Tensor out = at::empty({B, H, L, Ev}, q.options());
  Tensor lse = at::empty({B, H, L}, q.options().dtype(at::kFloat));
  Tensor m = bias.has_value() ? *bias : Tensor();
  if (m.defined()) check_device(q, m);
  kiln_tensor_t dq = describe(q), dk = describe(k), dv = describe(v), dout = describe(out), dl = describe(lse), dm;
  if (m.defined()) dm = describe(m);
  if (out.numel() > 0)
    KILN_CHECK(kiln_kernel_sdpa(&dq, &dk, &dv, m.defined() ? &dm : nullptr, is_causal ? 1 : 0,
                                scale_or_nan(scale), &dout, &dl));
  Tensor empty = at::empty({0}, q.options().dtype(at::kLong));
  return {out, lse, empty, empty, c10::SymInt(L), c10::SymInt(k.size(2)), empty, empty, Tensor()};
}

std::tuple<Tensor, Tensor, Tensor, Tensor> sdpa_bwd(
    const Tensor& grad_out, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& bias,
    std::array<bool, 4> mask, const Tensor& out, const Tensor& lse, const Tensor&, const Tensor&, c10::SymInt,
    c10::SymInt, double dropout_p, bool is_causal, const Tensor&, const Tensor&, std::optional<double> scale) {
  TORCH_CHECK(dropout_p == 0.0, "kiln: fused attention does not implement dropout");
  Tensor gq, gk, gv;
  if (mask[0]) gq = at::empty_like(q);
  if (mask[1]) gk = at::empty_like(k);
  if (mask[2]) gv = at::empty_like(v);
  Tensor go = grad_out;
  if (!describable(go)) go = go.contiguous();
  kiln_tensor_t dgo = describe(go), dq = describe(q), dk = describe(k), dv = describe(v), dout = describe(out);
  kiln_tensor_t dl = describe(lse), dm, dgq, dgk, dgv;
  if (bias.defined()) dm = describe(bias);
  if (gq.defined()) dgq = describe(gq);
  if (gk.defined()) dgk = describe(gk);
  if (gv.defined()) dgv = describe(gv);
  bool any = (gq.defined() && gq.numel()) || (gk.defined() && gk.numel()) || (gv.defined() && gv.numel());
  if (any)
    KILN_CHECK(kiln_kernel_sdpa_backward(&dgo, &dq, &dk, &dv, &dout, &dl, bias.defined() ? &dm : nullptr,
                                         is_causal ? 1 : 0, scale_or_nan(scale), gq.defined() ? &dgq : nullptr,
                                         gk.defined() ? &dgk : nullptr, gv.defined() ? &dgv : nullptr));
  return {gq, gk, gv, Tensor()};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_fused_sdp_choice", fused_sdp_choice);
  m.impl("_scaled_dot_product_fused_attention_overrideable", sdpa_fwd);
  m.impl("_scaled_dot_product_fused_attention_overrideable_backward", sdpa_bwd);
}

}  // namespace torch_kiln

// F.scaled_dot_product_attention (CompositeImplicit) asks the device's _fused_sdp_choice_stub, not
// the dispatcher op, which backend to run: without this, kiln (eager and traced) always got "math".
namespace at::native {
REGISTER_PRIVATEUSE1_DISPATCH(_fused_sdp_choice_stub, &torch_kiln::fused_sdp_choice)
}  // namespace at::native
