/* SPDX-License-Identifier: Apache-2.0 */
/* kiln/kernels/conv.h - CNN kernels on host tensors: 2-D (and 1-D) convolution, max / average /
 * adaptive-average pooling, batch normalization, and their backwards.
 *
 * Conventions shared by every function here:
 *   - Descriptors (kiln/tensor.h) and their data are borrowed; nothing is kept after a call.
 *     Strides are arbitrary (channels-last, sliced and transposed views work without copies).
 *   - Semantics follow the PyTorch CPU ATen op named in each comment. Floating dtypes: f32
 *     native, f16/bf16 computed in f32 and rounded once on store, f64 in double (a simple, slower
 *     path for convolution). Tensors of one call share a dtype unless noted.
 *   - Spatial parameters are given as int64_t[2] arrays in (H, W) order. For 1-D convolution
 *     (x [N, C, L], w [O, C/groups, kL]) only element [0] of each array is used.
 *   - Outputs must not overlap inputs. Output shapes are checked against the shapes torch
 *     computes. On error nothing is guaranteed about outputs.
 *   - Work is split over the shared pool (kiln/parallel.h); results do not depend on the number
 *     of threads. Large calls malloc one scratch block per call (im2col columns, half-precision
 *     staging), freed before returning.
 *   - Errors: INVALID_ARGUMENT (NULL descriptor, bad rank, dtype, parameter or a shape mismatch -
 *     the message names the shapes), OUT_OF_RANGE (a max-pool index outside its plane),
 *     OUT_OF_MEMORY (scratch).
 *
 *   int64_t s[2] = {1, 1}, p[2] = {1, 1}, d[2] = {1, 1};
 *   KILN_RETURN_IF_ERROR(kiln_kernel_conv2d(&x, &w, &b, s, p, d, 1, &y));   // 3x3 "same" conv
 */
#ifndef KILN_KERNELS_CONV_H
#define KILN_KERNELS_CONV_H

#include <stdint.h>

#include "kiln/status.h"
#include "kiln/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- convolution --------------------------------------------------------------------------- */

/* aten::convolution (2-D, not transposed): out[n, o] = bias[o] + sum over c in o's group, kh, kw
 * of w[o, c, kh, kw] * x[n, g*C/groups + c, oh*sh - ph + kh*dh, ow*sw - pw + kw*dw] (zero
 * padding). x [N, C, H, W], w [O, C/groups, kH, kW], bias [O] or NULL, out [N, O, oH, oW] with
 * oH = (H + 2ph - dh*(kH-1) - 1) / sh + 1 (>= 1; likewise oW). stride, dilation >= 1, padding
 * >= 0, groups >= 1 dividing C and O. A 3-D x / w pair is a 1-D convolution (conv1d). N may be
 * 0. f32/f16/bf16 run im2col + the packed sgemm (1x1 stride-1 convolutions skip im2col);
 * f64 and depthwise-like convolutions (one input channel per group) run direct loops. */
kiln_status_t kiln_kernel_conv2d(const kiln_tensor_t* x, const kiln_tensor_t* w,
                                 const kiln_tensor_t* bias, const int64_t stride[2],
                                 const int64_t padding[2], const int64_t dilation[2],
                                 int64_t groups, kiln_tensor_t* out);

/* The shape kiln_kernel_conv2d gives out for these arguments: [N, O, oH, oW] (or [N, O, oL] for
 * 3-D x, out_shape[3] untouched). Only the descriptors' shapes and dtypes are read (data may be
 * NULL). Errors: INVALID_ARGUMENT, as kiln_kernel_conv2d would for the same arguments. */
kiln_status_t kiln_conv2d_output_shape(const kiln_tensor_t* x, const kiln_tensor_t* w,
                                       const kiln_tensor_t* bias, const int64_t stride[2],
                                       const int64_t padding[2], const int64_t dilation[2],
                                       int64_t groups, int64_t out_shape[4]);

/* aten::convolution_backward for kiln_kernel_conv2d (same parameters): grad_out has out's shape.
 * Each of grad_x (x's shape), grad_w (w's shape), grad_b ([O]) may be NULL to skip it
 * (output_mask); all share x's dtype. x and w are always required (they define the shapes), but
 * x's data is only read for grad_w and w's only for grad_x. grad_x uses col2im. */
kiln_status_t kiln_kernel_conv2d_backward(const kiln_tensor_t* grad_out, const kiln_tensor_t* x,
                                          const kiln_tensor_t* w, const int64_t stride[2],
                                          const int64_t padding[2], const int64_t dilation[2],
                                          int64_t groups, kiln_tensor_t* grad_x,
                                          kiln_tensor_t* grad_w, kiln_tensor_t* grad_b);

/* ---- pooling ------------------------------------------------------------------------------- */
/* Pooling inputs are [N, C, H, W] or [C, H, W]; outputs and indices have the same rank. */

/* aten::max_pool2d_with_indices: out = max over each (dilated) window, indices_out (i64, out's
 * shape) = flat position h*W + w of the max within its H*W plane. NaN wins (the last NaN of a
 * window); windows start at -padding. kernel, stride, dilation >= 1; 0 <= padding <= kernel/2;
 * stride NULL means stride = kernel. ceil_mode rounds the output size up (a last window must
 * start inside the input or left padding). indices_out may be NULL. */
kiln_status_t kiln_kernel_max_pool2d(const kiln_tensor_t* x, const int64_t kernel[2],
                                     const int64_t stride[2], const int64_t padding[2],
                                     const int64_t dilation[2], int ceil_mode, kiln_tensor_t* out,
                                     kiln_tensor_t* indices_out);

/* The shape kiln_kernel_max_pool2d (dilation NULL = 1: also kiln_kernel_avg_pool2d) gives out
 * for x: x's leading dims then (oH, oW); out_shape has room for x's rank. Only x's shape and
 * dtype are read. Errors: INVALID_ARGUMENT as the pooling kernels. */
kiln_status_t kiln_pool2d_output_shape(const kiln_tensor_t* x, const int64_t kernel[2],
                                       const int64_t stride[2], const int64_t padding[2],
                                       const int64_t dilation[2], int ceil_mode,
                                       int64_t* out_shape);

/* aten::max_pool2d_with_indices_backward: grad_x = 0, then grad_x[plane][indices[i]] +=
 * grad_out[i] for every output position (accumulated in f32/f64). grad_out and indices share a
 * shape; grad_x has the input's shape. OUT_OF_RANGE for an index outside [0, H*W). */
kiln_status_t kiln_kernel_max_pool2d_backward(const kiln_tensor_t* grad_out,
                                              const kiln_tensor_t* indices,
                                              kiln_tensor_t* grad_x);

/* aten::avg_pool2d: mean over each window clipped to input + padding; the divisor is
 * divisor_override when non-zero, else the padded window size (count_include_pad) or the number
 * of input elements in it. A window with no input element gives 0. kernel, stride >= 1 (stride
 * NULL = kernel), 0 <= padding <= kernel/2. */
kiln_status_t kiln_kernel_avg_pool2d(const kiln_tensor_t* x, const int64_t kernel[2],
                                     const int64_t stride[2], const int64_t padding[2],
                                     int ceil_mode, int count_include_pad,
                                     int64_t divisor_override, kiln_tensor_t* out);

/* aten::avg_pool2d_backward: grad_x (the input's shape) receives grad_out / divisor over each
 * window, with kiln_kernel_avg_pool2d's parameters. */
kiln_status_t kiln_kernel_avg_pool2d_backward(const kiln_tensor_t* grad_out,
                                              const int64_t kernel[2], const int64_t stride[2],
                                              const int64_t padding[2], int ceil_mode,
                                              int count_include_pad, int64_t divisor_override,
                                              kiln_tensor_t* grad_x);

/* aten::_adaptive_avg_pool2d: out [.., oH, oW] (its shape gives the output size); cell (i, j)
 * averages rows [floor(i*H/oH), ceil((i+1)*H/oH)) and the matching columns. */
kiln_status_t kiln_kernel_adaptive_avg_pool2d(const kiln_tensor_t* x, kiln_tensor_t* out);

/* aten::_adaptive_avg_pool2d_backward: grad_x (the input's shape) receives each grad_out cell
 * divided by its window size. */
kiln_status_t kiln_kernel_adaptive_avg_pool2d_backward(const kiln_tensor_t* grad_out,
                                                       kiln_tensor_t* grad_x);

/* ---- batch normalization ------------------------------------------------------------------- */

/* aten::native_batch_norm over x [N, C, ...] (rank >= 2) per channel C. training: mean and
 * biased var over every dim but 1, save_mean = mean, save_invstd = 1/sqrt(var + eps), and the
 * running stats (if given) become (1-momentum)*running + momentum*stat, with the unbiased var
 * for running_var. Eval: normalizes with running_mean / running_var (both required) and leaves
 * save_mean / save_invstd untouched (torch returns them empty). out = (x - mean) * invstd *
 * weight + bias. weight, bias, running_*, save_* are [C] or NULL, any floating dtype (e.g. f32
 * with a bf16 x); out has x's shape and dtype. Statistics accumulate in double. */
kiln_status_t kiln_kernel_batch_norm(const kiln_tensor_t* x, const kiln_tensor_t* weight,
                                     const kiln_tensor_t* bias, kiln_tensor_t* running_mean,
                                     kiln_tensor_t* running_var, int training, double momentum,
                                     double eps, kiln_tensor_t* out, kiln_tensor_t* save_mean,
                                     kiln_tensor_t* save_invstd);

/* aten::native_batch_norm_backward. training: uses save_mean / save_invstd (required) and
 * grad_x = (g - mean(g) - xhat * mean(g * xhat)) * invstd * weight; eval: uses running_mean and
 * 1/sqrt(running_var + eps) (required) and grad_x = g * invstd * weight. grad_w = sum(g * xhat),
 * grad_b = sum(g) per channel. grad_x (x's shape), grad_w, grad_b ([C]) may each be NULL. */
kiln_status_t kiln_kernel_batch_norm_backward(const kiln_tensor_t* grad_out,
                                              const kiln_tensor_t* x, const kiln_tensor_t* weight,
                                              const kiln_tensor_t* running_mean,
                                              const kiln_tensor_t* running_var,
                                              const kiln_tensor_t* save_mean,
                                              const kiln_tensor_t* save_invstd, int training,
                                              double eps, kiln_tensor_t* grad_x,
                                              kiln_tensor_t* grad_w, kiln_tensor_t* grad_b);

#ifdef __cplusplus
}
#endif
#endif /* KILN_KERNELS_CONV_H */
