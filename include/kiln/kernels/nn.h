/* SPDX-License-Identifier: Apache-2.0 */
/* kiln/kernels/nn.h - neural-network kernels on host tensors: softmax, layer/RMS norm,
 * scaled-dot-product attention, NLL loss, embedding, and their backwards.
 *
 * Conventions shared by every function here:
 *   - Descriptors (kiln/tensor.h) and their data are borrowed; nothing is kept after a call.
 *     Strides are arbitrary (transposed / sliced views work without copies); dense operands take
 *     vectorized fast paths (AVX2+FMA, chosen at run time, generic C otherwise) and work is split
 *     over the shared pool (kiln/parallel.h); small inputs run on the caller with no allocation.
 *   - Semantics follow the PyTorch CPU ATen op named in each comment. Floating dtypes: f32
 *     native, f16/bf16 computed in f32 and rounded once on store, f64 in double. Unless said
 *     otherwise, different floating operands may have different dtypes (e.g. bf16 x with f32
 *     weight); the compute precision is double if the main input is f64, else float.
 *   - Outputs must not overlap inputs unless noted. On error nothing is guaranteed about outputs.
 *   - Errors: INVALID_ARGUMENT (NULL descriptor, bad dim, dtype, or a shape mismatch - the
 *     message names the shapes), OUT_OF_RANGE (an index/target outside its range), OUT_OF_MEMORY
 *     (scratch for large inputs).
 *   - Results do not depend on the number of threads.
 *
 *   // y = softmax(x, -1); then attention with a causal mask
 *   KILN_RETURN_IF_ERROR(kiln_kernel_softmax(&x, -1, 0, &y));
 *   KILN_RETURN_IF_ERROR(kiln_kernel_sdpa(&q, &k, &v, NULL, 1, NAN, &o, &lse));
 */
#ifndef KILN_KERNELS_NN_H
#define KILN_KERNELS_NN_H

#include <stdint.h>

#include "kiln/status.h"
#include "kiln/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- softmax ------------------------------------------------------------------------------ */

/* out = softmax(x, dim) (log == 0) or log_softmax(x, dim) (log != 0): aten::_softmax /
 * _log_softmax. dim may be negative; a rank-0 x accepts dim 0 / -1. out has x's shape, any
 * floating dtype (half_to_float: f16 x, f32 out). Numerically stable (max subtraction); a row of
 * all -inf, or holding +inf or NaN, gives NaN like torch. out may alias x exactly. */
kiln_status_t kiln_kernel_softmax(const kiln_tensor_t* x, int dim, int log, kiln_tensor_t* out);

/* aten::_softmax_backward_data / _log_softmax_backward_data: given grad_out and the forward
 * result out_fwd (same shape), grad_in = out*(g - sum(g*out)) (softmax) or
 * g - exp(out)*sum(g) (log_softmax), sums along dim. All three share a shape; dtypes are any
 * floating ones. grad_in may alias grad_out exactly. */
kiln_status_t kiln_kernel_softmax_backward(const kiln_tensor_t* grad_out,
                                           const kiln_tensor_t* out_fwd, int dim, int log,
                                           kiln_tensor_t* grad_in);

/* ---- normalization ------------------------------------------------------------------------ */

/* aten::native_layer_norm over the last `normalized_ndim` dims of x (1..x.ndim):
 * out = (x - mean) * rstd * weight + bias, rstd = 1/sqrt(var + eps), biased variance.
 * weight/bias (NULL = none) have shape x.shape[-normalized_ndim:]. mean_out / rstd_out (each may
 * be NULL) have shape x.shape[:-normalized_ndim] + [1]*normalized_ndim (or the same number of
 * elements as a dense [M] vector) and any floating dtype (torch: f32 when weight is f32 and x is
 * f16/bf16, else x's dtype). out has x's shape. */
kiln_status_t kiln_kernel_layer_norm(const kiln_tensor_t* x, int normalized_ndim,
                                     const kiln_tensor_t* weight, const kiln_tensor_t* bias,
                                     double eps, kiln_tensor_t* out, kiln_tensor_t* mean_out,
                                     kiln_tensor_t* rstd_out);

/* aten::native_layer_norm_backward with mean/rstd from kiln_kernel_layer_norm (shapes as there).
 * Any of grad_x (x's shape), grad_w, grad_b (weight's shape) may be NULL to skip it (output_mask);
 * grad_w/grad_b need no weight. grad_w = sum over rows of g*xhat, grad_b = sum of g. */
kiln_status_t kiln_kernel_layer_norm_backward(const kiln_tensor_t* grad_out,
                                              const kiln_tensor_t* x, const kiln_tensor_t* mean,
                                              const kiln_tensor_t* rstd,
                                              const kiln_tensor_t* weight, int normalized_ndim,
                                              kiln_tensor_t* grad_x, kiln_tensor_t* grad_w,
                                              kiln_tensor_t* grad_b);

/* torch.nn.functional.rms_norm / aten::_fused_rms_norm over the last normalized_ndim dims:
 * out = x * rstd * weight with rstd = 1/sqrt(mean(x^2) + eps), the product rounded once.
 * eps < 0 (or NaN) selects torch's default, finfo(compute dtype).eps: 2^-23 for f32/f16/bf16
 * (torch uses the f32 eps for half inputs too), 2^-52 for f64. weight may be NULL. rstd_out
 * (NULL = not needed) is shaped like layer_norm's rstd (torch: f32 for f16/bf16 x). */
kiln_status_t kiln_kernel_rms_norm(const kiln_tensor_t* x, int normalized_ndim,
                                   const kiln_tensor_t* weight, double eps, kiln_tensor_t* out,
                                   kiln_tensor_t* rstd_out);

/* aten::_fused_rms_norm_backward: grad_x = rstd*(g*w - x*rstd^2*mean(g*w*x)),
 * grad_w = sum over rows of g*x*rstd. grad_x and grad_w may each be NULL. */
kiln_status_t kiln_kernel_rms_norm_backward(const kiln_tensor_t* grad_out,
                                            const kiln_tensor_t* x, const kiln_tensor_t* rstd,
                                            const kiln_tensor_t* weight, int normalized_ndim,
                                            kiln_tensor_t* grad_x, kiln_tensor_t* grad_w);

/* ---- attention ---------------------------------------------------------------------------- */

/* Scaled dot-product attention (aten::_scaled_dot_product_flash_attention_for_cpu semantics):
 *   out = softmax(scale * q @ k^T + mask) @ v
 * q [B,H,L,E], k [B,Hk,S,E], v [B,Hk,S,Ev], out [B,H,L,Ev]; H must be a multiple of Hk (grouped
 * query attention: head h uses kv head h / (H/Hk)). q, k, v, out share one floating dtype; any
 * strides (e.g. q = x[B,L,H,E].transpose(1,2)). attn_mask (NULL = none) broadcasts to [B,H,L,S]
 * (trailing dims aligned, size-1 or missing dims broadcast): bool or u8 (non-zero = attend) or
 * floating of any dtype (added to the scaled scores). is_causal keeps key j for query i iff j <= i (top-left aligned,
 * as torch's tril) and combines with a mask if both are given. scale NaN means 1/sqrt(E).
 * A query row whose keys are all masked (or S == 0) gives out = 0 and logsumexp = 0, as torch
 * 2.13 on CPU. logsumexp_out (NULL = not needed) is [B,H,L], any floating dtype (torch: f32),
 * holding log(sum(exp(scores))) per row, what kiln_kernel_sdpa_backward consumes.
 * Flash-style: blocks of 64 queries against blocks of 64 keys with an online softmax; the L x S
 * score matrix is never built and fully masked causal blocks are skipped. f32/f16/bf16 compute in
 * f32; f64 runs a (slow) row-at-a-time double path. Scratch beyond 16 KB per thread comes from a
 * cache of blocks reused across calls. */
kiln_status_t kiln_kernel_sdpa(const kiln_tensor_t* q, const kiln_tensor_t* k,
                               const kiln_tensor_t* v, const kiln_tensor_t* attn_mask,
                               int is_causal, double scale, kiln_tensor_t* out,
                               kiln_tensor_t* logsumexp_out);

/* Backward of kiln_kernel_sdpa (aten::_scaled_dot_product_flash_attention_for_cpu_backward):
 * recomputes the probabilities block by block from logsumexp (the forward's) and out. grad_out
 * and out are [B,H,L,Ev]; the same q, k, v, attn_mask, is_causal and scale as the forward.
 * grad_q / grad_k / grad_v have q / k / v's shapes and dtype, any strides, and each may be NULL
 * to skip it. No gradient flows to the mask. Schedule: one fused pass per (batch, kv head) when
 * there are >= 2 per thread, else a dK/dV pass per key block and a dQ pass per query block; both
 * sum every gradient element on one thread in the same order, so results are bitwise identical
 * for any thread count. Errors: as kiln_kernel_sdpa, plus mismatched grad/out shapes. */
kiln_status_t kiln_kernel_sdpa_backward(const kiln_tensor_t* grad_out, const kiln_tensor_t* q,
                                        const kiln_tensor_t* k, const kiln_tensor_t* v,
                                        const kiln_tensor_t* out, const kiln_tensor_t* logsumexp,
                                        const kiln_tensor_t* attn_mask, int is_causal,
                                        double scale, kiln_tensor_t* grad_q,
                                        kiln_tensor_t* grad_k, kiln_tensor_t* grad_v);

/* ---- losses ------------------------------------------------------------------------------- */

typedef enum kiln_reduction {
  KILN_REDUCTION_NONE = 0,
  KILN_REDUCTION_MEAN = 1,
  KILN_REDUCTION_SUM = 2,
} kiln_reduction_t;

/* aten::nll_loss_forward / nll_loss2d_forward. log_probs is [C], [N,C] or [N,C,d1..dk] (floating);
 * target (i64 or i32) is [], [N] or [N,d1..dk]; weight (NULL = all ones) is [C]. A target equal
 * to ignore_index contributes 0 with weight 0; any other target outside [0,C) is OUT_OF_RANGE
 * (checked before anything is written). loss = -weight[t] * log_probs[.., t, ..].
 * out: reduction NONE -> target's shape (rank 0 for a [C] input), MEAN -> one element,
 * sum(loss) / sum(weight[t]) (NaN when that is 0), SUM -> one element. total_weight (NULL = not
 * needed, one element): sum of weight[t] for MEAN/SUM; for NONE weight[t] for a [C] input and 0
 * otherwise, as torch. Sums are accumulated in double in a fixed order. */
kiln_status_t kiln_kernel_nll_loss(const kiln_tensor_t* log_probs, const kiln_tensor_t* target,
                                   const kiln_tensor_t* weight, int reduction,
                                   int64_t ignore_index, kiln_tensor_t* out,
                                   kiln_tensor_t* total_weight);

/* aten::nll_loss_backward / nll_loss2d_backward: grad_in (log_probs' shape) is zeroed, then
 * grad_in[.., t, ..] = -weight[t] * g, with g = grad_out[pos] (NONE, target's shape) or the single
 * grad_out value (SUM), divided by total_weight (MEAN; one element, from the forward). */
kiln_status_t kiln_kernel_nll_loss_backward(const kiln_tensor_t* grad_out,
                                            const kiln_tensor_t* log_probs,
                                            const kiln_tensor_t* target,
                                            const kiln_tensor_t* weight, int reduction,
                                            int64_t ignore_index,
                                            const kiln_tensor_t* total_weight,
                                            kiln_tensor_t* grad_in);

/* kiln_kernel_softmax_backward(log, class dim) of kiln_kernel_nll_loss_backward's grad_in, in one
 * pass: with g the row nll_loss_backward would write (zeros, -weight[t] * grad at the target),
 * grad_in = g - exp(log_probs) * sum(g), the bits of the two kernels in sequence, without the
 * [N, C] intermediate. log_probs is the log_softmax output, [C] or [N, C] (classes last), f32;
 * grad_in likewise. Errors: as kiln_kernel_nll_loss_backward, plus INVALID_ARGUMENT for another
 * rank or dtype. */
kiln_status_t kiln_kernel_nll_log_softmax_backward(const kiln_tensor_t* grad_out,
                                                   const kiln_tensor_t* log_probs,
                                                   const kiln_tensor_t* target,
                                                   const kiln_tensor_t* weight, int reduction,
                                                   int64_t ignore_index,
                                                   const kiln_tensor_t* total_weight,
                                                   kiln_tensor_t* grad_in);

/* ---- embedding ---------------------------------------------------------------------------- */

/* aten::embedding: out[..., :] = weight[indices[...], :]. weight is [V, D] of any dtype, indices
 * i32/i64 of any shape (rank <= 7), out is indices.shape + [D] with weight's dtype. Every index is checked
 * first: one outside [0, V) is OUT_OF_RANGE and nothing is read out of bounds. */
kiln_status_t kiln_kernel_embedding(const kiln_tensor_t* weight, const kiln_tensor_t* indices,
                                    kiln_tensor_t* out);

/* aten::embedding_dense_backward (scale_grad_by_freq = false): grad_weight [num_weights, D]
 * (floating) is overwritten with sum over positions p with indices[p] == v of grad_out[p, :];
 * rows never indexed and the row padding_idx (negative = none) are zero. grad_out is
 * indices.shape + [D]. An index outside [0, num_weights) is OUT_OF_RANGE (torch silently drops
 * it). Deterministic: each row is summed in index order in f32 (f64 for f64), rounded once. */
kiln_status_t kiln_kernel_embedding_backward(const kiln_tensor_t* grad_out,
                                             const kiln_tensor_t* indices, int64_t num_weights,
                                             int64_t padding_idx, kiln_tensor_t* grad_weight);

/* kiln_kernel_embedding_backward with scale_grad_by_freq: when non-zero, row v's sum is divided
 * by the number of times v occurs in indices (torch's scale_grad_by_freq=True). */
kiln_status_t kiln_kernel_embedding_backward_ex(const kiln_tensor_t* grad_out,
                                                const kiln_tensor_t* indices,
                                                int64_t num_weights, int64_t padding_idx,
                                                int scale_grad_by_freq,
                                                kiln_tensor_t* grad_weight);

#ifdef __cplusplus
}
#endif
#endif /* KILN_KERNELS_NN_H */
