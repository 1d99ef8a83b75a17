/* SPDX-License-Identifier: Apache-2.0 */
/* kiln/kernels/optim.h - fused multi-tensor optimizer steps (Adam/AdamW, SGD) on host tensors.
 *
 * Each call updates a list of parameter tensors in place, like torch._fused_adam(w)_ and
 * torch._fused_sgd_ on CPU, with the same operation order (including where torch's AVX2 build
 * fuses a multiply-add), so f32 results match torch's fused CPU kernels to about one ulp.
 *
 * Conventions:
 *   - Arrays of descriptors are borrowed; entry i of every list belongs to parameter i and all
 *     of them have the same shape and the same floating dtype (f32, f16, bf16 or f64; f16/bf16
 *     state is computed in f32 and rounded on store). Any strides; when every tensor of an entry
 *     is contiguous the step runs vectorized (AVX2+FMA when the CPU has it). Tensors must not
 *     overlap one another.
 *   - grad_scale (NULL = none) is one float: grads are divided by it and the unscaled grads are
 *     written back. found_inf (NULL = none): when *found_inf == 1.0f the call returns KILN_OK
 *     and changes nothing (torch's AMP skip).
 *   - Errors: INVALID_ARGUMENT (NULL list or descriptor, dtype/shape mismatch, non-finite
 *     hyper-parameter, beta outside [0, 1)); nothing is modified on error.
 *   - Work is split over the shared pool; results do not depend on the number of threads.
 *
 *   double step = ++state_step;
 *   KILN_RETURN_IF_ERROR(kiln_kernel_fused_adamw(1, &p, &g, &m, &v, NULL, &step, 1e-3, 0.9,
 *                                                0.999, 1e-2, 1e-8, 0, 0, 1, NULL, NULL));
 */
#ifndef KILN_KERNELS_OPTIM_H
#define KILN_KERNELS_OPTIM_H

#include <stdint.h>

#include "kiln/status.h"
#include "kiln/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* torch._fused_adamw_ (adamw != 0: p *= 1 - lr*wd) or torch._fused_adam_ (adamw == 0:
 * g += wd*p), per element, with bc1 = 1 - beta1^step, bc2 = 1 - beta2^step in double:
 *   g = grad / grad_scale (stored back); g = -g if maximize
 *   m = lerp(m, g, 1 - beta1);  v = beta2 * v + (1 - beta2) * g * g
 *   vmax = max(vmax, v) if amsgrad;  denom = sqrt(amsgrad ? vmax : v) / sqrt(bc2) + eps
 *   p = p - (lr / bc1) * m / denom
 * steps[i] is parameter i's step count after the caller incremented it (torch's state_steps),
 * read as a float like torch. max_exp_avg_sqs is required iff amsgrad, else ignored (may be NULL). */
kiln_status_t kiln_kernel_fused_adamw(int n_tensors, kiln_tensor_t* const* params,
                                      kiln_tensor_t* const* grads, kiln_tensor_t* const* exp_avgs,
                                      kiln_tensor_t* const* exp_avg_sqs,
                                      kiln_tensor_t* const* max_exp_avg_sqs, const double* steps,
                                      double lr, double beta1, double beta2, double weight_decay,
                                      double eps, int amsgrad, int maximize, int adamw,
                                      const float* grad_scale, const float* found_inf);

/* torch._fused_sgd_ per element:
 *   g = grad / grad_scale (stored back); g = -g if maximize; g += wd * p
 *   if momentum != 0: buf = is_first_step ? g : momentum * buf + (1 - dampening) * g (stored);
 *                     g = nesterov ? g + momentum * buf : buf
 *   p = p - lr * g
 * momentum_buffers is required iff momentum != 0 (else ignored, may be NULL). For f16/bf16 this
 * computes the update torch intends in f32, rounded once per stored value (torch 2.13's
 * vectorized half path skips the update): it agrees with torch.optim.SGD(foreach=False) up to
 * that optimizer's rounding of each intermediate to the half dtype. */
kiln_status_t kiln_kernel_fused_sgd(int n_tensors, kiln_tensor_t* const* params,
                                    kiln_tensor_t* const* grads,
                                    kiln_tensor_t* const* momentum_buffers, double weight_decay,
                                    double momentum, double lr, double dampening, int nesterov,
                                    int maximize, int is_first_step, const float* grad_scale,
                                    const float* found_inf);

#ifdef __cplusplus
}
#endif
#endif /* KILN_KERNELS_OPTIM_H */
