/* SPDX-License-Identifier: Apache-2.0 */
/* kiln/graph.h - the graph compiler: build an IR of tensor ops, compile it, run it many times.
 *
 * A kiln_graph_t holds values (dtype, rank <= KILN_MAX_DIMS, static shape) and nodes (an op, its
 * int/double attributes and input value ids). Builder calls append one node, validate shapes and
 * dtypes with PyTorch's rules (broadcasting, type promotion) and return the new value's id
 * (a small int >= 0) through an out pointer; on error they return INVALID_ARGUMENT (or
 * UNIMPLEMENTED) with a message naming the shapes, and the graph is left unchanged.
 * kiln_graph_compile runs the passes (DCE, CSE, constant folding, view elimination, GEMM
 * epilogue fusion, pointwise(+reduction) fusion, in-place reuse, memory planning into one arena)
 * and returns a kiln_exec_t that kiln_exec_run executes over caller buffers, any number of times.
 *
 * Every argument is a plain int / int64_t / double / pointer so the API is easy to drive through
 * ctypes: dtypes are kiln_dtype_t values passed as int, op codes are the kernel enums
 * (kiln_unary_op_t, kiln_binary_op_t, kiln_ternary_op_t, kiln_reduce_op_t, ...) passed as int,
 * an optional value id is -1, shapes are `const int64_t*` arrays of `ndim` entries (NULL allowed
 * for ndim 0), dim lists are `const int*` arrays. See docs/GRAPH.md.
 *
 *   kiln_graph_t* g; int x, w, b, h, y;  int64_t xs[2] = {32, 64}, ws[2] = {64, 16}, bs[1] = {16};
 *   kiln_graph_create(&g);
 *   kiln_graph_input(g, KILN_DTYPE_F32, 2, xs, &x);
 *   kiln_graph_input(g, KILN_DTYPE_F32, 2, ws, &w);
 *   kiln_graph_input(g, KILN_DTYPE_F32, 1, bs, &b);
 *   kiln_graph_addmm(g, b, x, w, 1.0, 1.0, &h);
 *   kiln_graph_unary(g, KILN_UNARY_GELU, h, KILN_DTYPE_F32, &y);
 *   kiln_graph_output(g, y);
 *   kiln_exec_t* e; KILN_RETURN_IF_ERROR(kiln_graph_compile(g, &e));   // g may be destroyed now
 *   void* ins[3] = {xdata, wdata, bdata}; void* outs[1] = {ydata};
 *   KILN_RETURN_IF_ERROR(kiln_exec_run(e, 3, ins, 1, outs));
 *
 * Thread safety:
 *   - kiln_graph_t (the builder) is single-threaded: no two calls on one graph at once (reads
 *     like kiln_graph_compile / kiln_graph_dump may overlap each other, not a builder call).
 *     Different graphs are independent.
 *   - kiln_exec_t may be run from any number of threads at once: kiln_exec_run,
 *     kiln_exec_run_workspace and the queries (kiln_exec_stats, _info, _num_*, _workspace_size,
 *     kiln_exec_dump*, kiln_exec_save*) only read it; each run binds its buffers in a run
 *     context of its own, taken from the exec's free list (grown when runs overlap, so at most
 *     one context per run in flight; steady-state runs never allocate). Overlapping runs share
 *     the CPU thread pool: one of them gets the pool's workers, the others run their parallel
 *     jobs on their own thread (correct, not faster). Runs on one exec must use distinct output
 *     buffers and workspaces; inputs may be shared (they are only read).
 *   - kiln_exec_set_profiling may be called while runs are in flight (counters are atomic; a
 *     total read during runs is a snapshot).
 *   - kiln_exec_destroy must not overlap anything else on the exec: every run has returned.
 *   - The allocator passed at graph creation is called by the exec from the running threads
 *     (a new run context, a context's own arena): it must be thread-safe if runs overlap.
 */
#ifndef KILN_GRAPH_H
#define KILN_GRAPH_H

#include <stddef.h>
#include <stdint.h>

#include "kiln/allocator.h"
#include "kiln/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kiln_graph kiln_graph_t;
typedef struct kiln_exec kiln_exec_t;

/* ==== graph lifetime ======================================================================== */

/* Creates an empty graph using the system allocator. The caller owns *out (kiln_graph_destroy).
 * Errors: INVALID_ARGUMENT (NULL out), OUT_OF_MEMORY. */
kiln_status_t kiln_graph_create(kiln_graph_t** out);
/* As kiln_graph_create with a host allocator (borrowed, copied; NULL = system) used for every
 * allocation of the graph and of the execs compiled from it. */
kiln_status_t kiln_graph_create_ex(const kiln_allocator_t* allocator, kiln_graph_t** out);
/* Frees the graph and everything it owns (constant data included). NULL is a no-op. Execs
 * compiled from it stay valid. */
void kiln_graph_destroy(kiln_graph_t* g);

/* ==== leaves ================================================================================ */

/* Declares graph input number kiln_graph_num_inputs(g) (inputs are numbered in call order): a
 * tensor of `dtype` and static `shape` (dims >= 0) passed to kiln_exec_run as a contiguous
 * buffer. Errors: INVALID_ARGUMENT (bad dtype, ndim outside [0, 8], negative dim). */
kiln_status_t kiln_graph_input(kiln_graph_t* g, int dtype, int ndim, const int64_t* shape,
                               int* out_vid);
/* A constant tensor; `data` (contiguous, numel * dtype size bytes, borrowed) is copied into the
 * graph. NULL data is allowed only for numel 0. Errors: as kiln_graph_input, OUT_OF_MEMORY. */
kiln_status_t kiln_graph_constant(kiln_graph_t* g, int dtype, int ndim, const int64_t* shape,
                                  const void* data, int* out_vid);
/* A rank-0 constant holding `value` converted to `dtype` (float -> int truncates). It is a
 * "wrapped number" for type promotion, like a Python scalar operand in torch: x_f16 + scalar
 * stays f16. Use kiln_graph_scalar_i64 for integers beyond 2^53. Errors: bad dtype. */
kiln_status_t kiln_graph_scalar(kiln_graph_t* g, double value, int dtype, int* out_vid);
/* kiln_graph_scalar with an exact 64-bit integer (wraps to narrower integer dtypes). */
kiln_status_t kiln_graph_scalar_i64(kiln_graph_t* g, int64_t value, int dtype, int* out_vid);
/* torch.full: a tensor of `shape` with every element `value` (a rank-0 constant broadcast by an
 * expand view; nothing is materialized unless needed). Errors: as kiln_graph_input. */
kiln_status_t kiln_graph_full(kiln_graph_t* g, int dtype, int ndim, const int64_t* shape,
                              double value, int* out_vid);

/* ==== pointwise ============================================================================= */
/* Inputs broadcast to a common shape (numpy rules), which is the result's shape. The op runs in
 * the "compute" dtype: out_dtype, except for ops with a boolean result (comparisons, logical
 * ops, ISNAN/ISINF/ISFINITE, LOGICAL_NOT) which compare in the promoted input dtype
 * (torch.result_type, where kiln_graph_scalar values are wrapped numbers). Semantics are those of
 * kiln/kernels/elementwise.h. Errors: INVALID_ARGUMENT for a bad op or dtype, shapes that do not
 * broadcast, or an op undefined for the compute dtype (e.g. EXP in i32, BITWISE_AND on f32). */

/* out = op(x), op a kiln_unary_op_t without parameters. */
kiln_status_t kiln_graph_unary(kiln_graph_t* g, int op, int x, int out_dtype, int* out_vid);
/* out = op(x) with the fields of kiln_unary_params_t (LEAKY_RELU, ELU, CLAMP, POW_SCALAR,
 * SOFTPLUS; also accepts the plain ops, ignoring the parameters). */
kiln_status_t kiln_graph_unary_ex(kiln_graph_t* g, int op, int x, double alpha, double scale,
                                  double input_scale, double threshold, double min, double max,
                                  int has_min, int has_max, int out_dtype, int* out_vid);
/* out = op(a, b) (kiln_binary_op_t); alpha is read by ADD/SUB (a + alpha*b) and the backward
 * helpers that document it. */
kiln_status_t kiln_graph_binary(kiln_graph_t* g, int op, int a, int b, double alpha,
                                int out_dtype, int* out_vid);
/* kiln_graph_binary with an explicit compute dtype (-1 = the default rule above). */
kiln_status_t kiln_graph_binary_ex(kiln_graph_t* g, int op, int a, int b, double alpha,
                                   int compute_dtype, int out_dtype, int* out_vid);
/* out = op(a, b, c) (kiln_ternary_op_t) with `scalar` for ADDCMUL/ADDCDIV. For CLAMP_TENSOR b or
 * c may be -1 (no bound). For WHERE a is the condition (any dtype). */
kiln_status_t kiln_graph_ternary(kiln_graph_t* g, int op, int a, int b, int c, double scalar,
                                 int out_dtype, int* out_vid);
/* torch.where(cond, a, b): the result dtype is torch.result_type(a, b). */
kiln_status_t kiln_graph_where(kiln_graph_t* g, int cond, int a, int b, int* out_vid);
/* x converted to `dtype` (a new value; same value id returned if dtype is already x's). */
kiln_status_t kiln_graph_cast(kiln_graph_t* g, int x, int dtype, int* out_vid);
/* aten.copy(self, src): src converted to self's dtype and broadcast to self's shape (self's data
 * is not read). Errors: src does not broadcast to self. */
kiln_status_t kiln_graph_copy(kiln_graph_t* g, int self, int src, int* out_vid);

/* ==== reductions ============================================================================ */

/* out = op(x) over the dims whose bit is set in dim_mask (bit i = dim i; 0 = all dims; a rank-0
 * x accepts 0 or 1), op a kiln_reduce_op_t. keepdim != 0 keeps reduced dims as size 1, else they are dropped. `param`
 * is the correction of VAR/STD (torch unbiased=True: 1) or p of NORM, ignored otherwise. The op
 * computes in out_dtype (in x's dtype when out_dtype is bool: ANY/ALL). Errors: bad op, mask bit
 * >= rank, float-only op on a non-float out_dtype. */
kiln_status_t kiln_graph_reduce(kiln_graph_t* g, int op, int x, uint32_t dim_mask, int keepdim,
                                double param, int out_dtype, int* out_vid);
/* torch.max/min(x, dim) with indices (op a kiln_reduce_index_op_t): *out_values (x's dtype) and
 * *out_indices (i64). dim may be negative, or KILN_REDUCE_INDEX_ALL_DIMS (INT32_MIN) for
 * argmax() over every element. Either out pointer may be NULL if not wanted. Errors: bad dim,
 * empty reduced dim. */
kiln_status_t kiln_graph_reduce_index(kiln_graph_t* g, int op, int x, int dim, int keepdim,
                                      int* out_values, int* out_indices);
/* Cumulative sum (op 0) or product (op 1) of x along dim, computed in and returned as
 * out_dtype. */
kiln_status_t kiln_graph_scan(kiln_graph_t* g, int op, int x, int dim, int out_dtype,
                              int* out_vid);

/* ==== linear algebra ======================================================================== */

/* torch.matmul(a, b): 1-D operands are promoted and the dim dropped, batch dims broadcast.
 * a and b share a dtype. Floating dtypes run the GEMM kernels; integer dtypes (not bool) are
 * built as sum(a[.., M, 1, K] * b^T[.., 1, N, K], -1) in that dtype (wrapping like torch; the
 * product is fused into the reduction), so *out_vid may then be a reshape of a reduction.
 * Errors: INVALID_ARGUMENT (shapes, dtypes), UNIMPLEMENTED (bool, or integer rank > 7). */
kiln_status_t kiln_graph_matmul(kiln_graph_t* g, int a, int b, int* out_vid);
/* beta * bias + alpha * matmul(a, b) (torch.addmm / baddbmm); bias (-1 = none) broadcasts to
 * the product's shape and has its dtype. For integer dtypes alpha and beta are truncated to
 * integers and the result is built from pointwise nodes around the integer matmul above. */
kiln_status_t kiln_graph_addmm(kiln_graph_t* g, int bias, int a, int b, double beta, double alpha,
                               int* out_vid);

/* ==== views ================================================================================= */
/* Views are free after compilation (a strided window on their source); a reshape of a layout
 * that cannot be viewed materializes a contiguous copy. */

/* torch.reshape / view to `shape` (one entry may be -1, inferred). Errors: numel mismatch. */
kiln_status_t kiln_graph_reshape(kiln_graph_t* g, int x, int ndim, const int64_t* shape,
                                 int* out_vid);
/* torch.permute(x, perm): perm has rank(x) entries, a permutation (negative dims allowed). */
kiln_status_t kiln_graph_permute(kiln_graph_t* g, int x, const int* perm, int* out_vid);
/* torch.expand(x, shape): ndim >= rank(x); -1 keeps a dim; only size-1 dims (and new leading
 * dims) may change. */
kiln_status_t kiln_graph_expand(kiln_graph_t* g, int x, int ndim, const int64_t* shape,
                                int* out_vid);
/* x[..., start:end:step, ...] on `dim` (negative allowed) with Python semantics: negative start
 * / end count from the end and are clamped (INT64_MAX is a fine end). step >= 1. */
kiln_status_t kiln_graph_slice(kiln_graph_t* g, int x, int dim, int64_t start, int64_t end,
                               int64_t step, int* out_vid);
/* torch.select(x, dim, index): the dim is removed (slice + reshape). */
kiln_status_t kiln_graph_select(kiln_graph_t* g, int x, int dim, int64_t index, int* out_vid);
/* A contiguous copy of x (x.contiguous() / clone): never aliases x's storage. */
kiln_status_t kiln_graph_contiguous(kiln_graph_t* g, int x, int* out_vid);
/* torch.cat(ids[0..n), dim): same rank, equal sizes except on dim; the result dtype is the
 * promotion of all inputs. n >= 1. */
kiln_status_t kiln_graph_cat(kiln_graph_t* g, int n, const int* ids, int dim, int* out_vid);

/* ==== neural-network ops (kiln/kernels/nn.h semantics) ====================================== */

/* softmax (log == 0) or log_softmax (log != 0) of x along dim; out_dtype -1 = x's dtype (any
 * floating dtype: half_to_float). */
kiln_status_t kiln_graph_softmax(kiln_graph_t* g, int x, int dim, int log, int out_dtype,
                                 int* out_vid);
/* aten._softmax_backward_data / _log_softmax_backward_data; out_dtype -1 = grad_out's dtype. */
kiln_status_t kiln_graph_softmax_backward(kiln_graph_t* g, int grad_out, int out_fwd, int dim,
                                          int log, int out_dtype, int* out_vid);
/* aten.native_layer_norm over the last normalized_ndim dims: *out (x's shape and dtype), *mean
 * and *rstd (x.shape[:-n] + [1]*n; f32 if x is f16/bf16 and weight is f32, else x's dtype).
 * weight / bias may be -1. mean / rstd pointers may be NULL if not wanted. */
kiln_status_t kiln_graph_layer_norm(kiln_graph_t* g, int x, int weight, int bias,
                                    int normalized_ndim, double eps, int* out, int* mean,
                                    int* rstd);
/* aten.native_layer_norm_backward: output_mask bit 0 = grad_x, 1 = grad_w, 2 = grad_b (grad_w
 * and grad_b have shape x.shape[-n:] and weight's dtype, or x's when weight is -1). Results not
 * requested are set to -1 (the pointers may then be NULL). */
kiln_status_t kiln_graph_layer_norm_backward(kiln_graph_t* g, int grad_out, int x, int mean,
                                             int rstd, int weight, int normalized_ndim,
                                             int output_mask, int* grad_x, int* grad_w,
                                             int* grad_b);
/* RMS norm (kiln_kernel_rms_norm): *out and *rstd (may be NULL); weight may be -1; eps < 0
 * selects torch's default. */
kiln_status_t kiln_graph_rms_norm(kiln_graph_t* g, int x, int weight, int normalized_ndim,
                                  double eps, int* out, int* rstd);
/* kiln_kernel_rms_norm_backward; output_mask bit 0 = grad_x, bit 1 = grad_w. */
kiln_status_t kiln_graph_rms_norm_backward(kiln_graph_t* g, int grad_out, int x, int rstd,
                                           int weight, int normalized_ndim, int output_mask,
                                           int* grad_x, int* grad_w);
/* aten.embedding(weight [V, D], indices (i32/i64)) -> indices.shape + [D]. */
kiln_status_t kiln_graph_embedding(kiln_graph_t* g, int weight, int indices, int* out_vid);
/* aten.embedding_dense_backward -> [num_weights, D] in grad_out's dtype. */
kiln_status_t kiln_graph_embedding_backward(kiln_graph_t* g, int grad_out, int indices,
                                            int64_t num_weights, int64_t padding_idx,
                                            int scale_grad_by_freq, int* out_vid);
/* aten.nll_loss_forward: reduction a kiln_reduction_t; *out, *total_weight (may be NULL). */
kiln_status_t kiln_graph_nll_loss(kiln_graph_t* g, int log_probs, int target, int weight,
                                  int reduction, int64_t ignore_index, int* out,
                                  int* total_weight);
/* aten.nll_loss_backward -> log_probs' shape and dtype. */
kiln_status_t kiln_graph_nll_loss_backward(kiln_graph_t* g, int grad_out, int log_probs,
                                           int target, int weight, int reduction,
                                           int64_t ignore_index, int total_weight,
                                           int* out_vid);
/* Scaled dot-product attention (kiln_kernel_sdpa): q [B,H,L,E], k [B,Hk,S,E], v [B,Hk,S,Ev];
 * *out [B,H,L,Ev], *logsumexp [B,H,L] (f32; f64 for f64; may be NULL). mask -1 = none; scale
 * NaN = 1/sqrt(E). */
kiln_status_t kiln_graph_sdpa(kiln_graph_t* g, int q, int k, int v, int mask, int is_causal,
                              double scale, int* out, int* logsumexp);
/* Backward of kiln_graph_sdpa: *grad_q, *grad_k, *grad_v (each pointer may be NULL = skip). */
kiln_status_t kiln_graph_sdpa_backward(kiln_graph_t* g, int grad_out, int q, int k, int v,
                                       int out, int logsumexp, int mask, int is_causal,
                                       double scale, int* grad_q, int* grad_k, int* grad_v);

/* ==== CNN ops (kiln/kernels/conv.h semantics) ============================================== */
/* Spatial parameters are int64_t[2] arrays in (H, W) order; for a 3-D (1-D conv) x only [0] is
 * read. Shapes are checked with the kernels' own rules (kiln_conv2d_output_shape,
 * kiln_pool2d_output_shape); errors are INVALID_ARGUMENT with a message naming the shapes. */

/* aten.convolution, not transposed: x [N, C, H, W] (or [N, C, L]), w [O, C/groups, kH, kW],
 * bias [O] or -1 -> [N, O, oH, oW]. One floating dtype for all. */
kiln_status_t kiln_graph_conv2d(kiln_graph_t* g, int x, int w, int bias, const int64_t* stride,
                                const int64_t* padding, const int64_t* dilation, int64_t groups,
                                int* out_vid);
/* aten.convolution_backward for kiln_graph_conv2d's parameters: *grad_x (x's shape), *grad_w
 * (w's shape), *grad_b ([O]); a NULL pointer skips that gradient (at least one requested). */
kiln_status_t kiln_graph_conv2d_backward(kiln_graph_t* g, int grad_out, int x, int w,
                                         const int64_t* stride, const int64_t* padding,
                                         const int64_t* dilation, int64_t groups, int* grad_x,
                                         int* grad_w, int* grad_b);
/* aten.max_pool2d_with_indices on [N, C, H, W] or [C, H, W]: *out and *indices (i64, flat
 * h*W + w in the plane; the pointer may be NULL). stride NULL = kernel, dilation NULL = 1. */
kiln_status_t kiln_graph_max_pool2d(kiln_graph_t* g, int x, const int64_t* kernel,
                                    const int64_t* stride, const int64_t* padding,
                                    const int64_t* dilation, int ceil_mode, int* out,
                                    int* indices);
/* aten.max_pool2d_with_indices_backward: grad_x [.., in_h, in_w] gets grad_out scattered to the
 * positions in `indices` (grad_out's shape, i64). An index outside the plane is OUT_OF_RANGE at
 * run time. */
kiln_status_t kiln_graph_max_pool2d_backward(kiln_graph_t* g, int grad_out, int indices,
                                             int64_t in_h, int64_t in_w, int* out_vid);
/* aten.avg_pool2d (stride NULL = kernel; divisor_override 0 = none). */
kiln_status_t kiln_graph_avg_pool2d(kiln_graph_t* g, int x, const int64_t* kernel,
                                    const int64_t* stride, const int64_t* padding, int ceil_mode,
                                    int count_include_pad, int64_t divisor_override, int* out_vid);
/* aten.avg_pool2d_backward for an input of spatial size (in_h, in_w): grad_out must have the
 * pooled shape. */
kiln_status_t kiln_graph_avg_pool2d_backward(kiln_graph_t* g, int grad_out, int64_t in_h,
                                             int64_t in_w, const int64_t* kernel,
                                             const int64_t* stride, const int64_t* padding,
                                             int ceil_mode, int count_include_pad,
                                             int64_t divisor_override, int* out_vid);
/* aten._adaptive_avg_pool2d to (out_h, out_w), both >= 1. */
kiln_status_t kiln_graph_adaptive_avg_pool2d(kiln_graph_t* g, int x, int64_t out_h,
                                             int64_t out_w, int* out_vid);
/* aten._adaptive_avg_pool2d_backward for an input of spatial size (in_h, in_w). */
kiln_status_t kiln_graph_adaptive_avg_pool2d_backward(kiln_graph_t* g, int grad_out,
                                                      int64_t in_h, int64_t in_w, int* out_vid);

/* ==== indexing (kiln/kernels/index.h semantics) ============================================ */
/* torch.arange as a length-n 1-d value: start + i * step (integer dtypes: start and step must
 * be integers, computed exactly in int64; floating dtypes: computed as kiln_kernel_arange does).
 * Errors: INVALID_ARGUMENT (n < 0, bool or bad dtype, non-integer start/step for an integer
 * dtype, a last value beyond int64, non-finite start/step). */
kiln_status_t kiln_graph_arange(kiln_graph_t* g, int dtype, int64_t n, double start, double step,
                                int* out_vid);

/* Indices outside their dim are OUT_OF_RANGE errors at run time (kiln_exec_run). */

/* torch.gather(x, dim, index): index i64 of x's rank, index.shape[d] <= x.shape[d] for d != dim;
 * the result has index's shape and x's dtype. */
kiln_status_t kiln_graph_gather(kiln_graph_t* g, int x, int dim, int index, int* out_vid);
/* torch.index_select(x, dim, index): index i32/i64 of rank 0 or 1; x's shape with shape[dim] =
 * numel(index). */
kiln_status_t kiln_graph_index_select(kiln_graph_t* g, int x, int dim, int index, int* out_vid);
/* Functional scatter: a copy of self with src (or, with src -1, the scalar `value`) scattered
 * along dim at index (i64, self's rank) with `reduce` (a kiln_scatter_reduce_t: scatter,
 * scatter_add, scatter_reduce; include_self as torch's). src has self's dtype; the index shape
 * fits src and self as kiln_kernel_scatter requires. */
kiln_status_t kiln_graph_scatter(kiln_graph_t* g, int self, int dim, int index, int src,
                                 double value, int reduce, int include_self, int* out_vid);

/* aten.index.Tensor: self[indices] with n_indices (<= self's rank) entries lined up with self's
 * leading dims, each -1 (a full slice) or an i32/i64 value; the non-absent ones must share one
 * shape (broadcast them first, e.g. with kiln_graph_expand). Result shape as kiln_kernel_index. */
kiln_status_t kiln_graph_index(kiln_graph_t* g, int self, int n_indices, const int* indices,
                               int* out_vid);
/* aten.index_put (functional): a copy of self with values (self's dtype, broadcast to the
 * indexed shape) stored (accumulate 0) or added (accumulate != 0) at self[indices]. */
kiln_status_t kiln_graph_index_put(kiln_graph_t* g, int self, int n_indices, const int* indices,
                                   int values, int accumulate, int* out_vid);

/* ==== outputs and queries =================================================================== */

/* Appends `vid` to the graph's outputs (output k = k-th call; a value may be output twice).
 * Errors: unknown vid. */
kiln_status_t kiln_graph_output(kiln_graph_t* g, int vid);
/* Counts. */
int kiln_graph_num_values(const kiln_graph_t* g);
int kiln_graph_num_inputs(const kiln_graph_t* g);
int kiln_graph_num_outputs(const kiln_graph_t* g);
/* The dtype, rank and shape (shape needs room for KILN_MAX_DIMS = 8 entries; any out pointer
 * may be NULL) of value `vid`. Errors: unknown vid. */
kiln_status_t kiln_graph_value_info(const kiln_graph_t* g, int vid, int* dtype, int* ndim,
                                    int64_t* shape);

/* ==== compile and run ======================================================================= */

/* Flags for kiln_graph_compile_ex: each disables one pass (for debugging and tests). A new flag
 * takes the next bit and goes just above KILN_COMPILE_FLAGS_END_, so KILN_COMPILE_ALL_FLAGS (every
 * defined flag: what kiln_graph_compile_ex and the .kiln loader accept) follows by itself. */
enum {
  KILN_COMPILE_NO_CSE = 1 << 0,
  KILN_COMPILE_NO_FOLD = 1 << 1,           /* constant folding */
  KILN_COMPILE_NO_FUSION = 1 << 2,         /* pointwise (+reduction) fusion */
  KILN_COMPILE_NO_EPILOGUE = 1 << 3,       /* GEMM epilogue fusion */
  KILN_COMPILE_NO_INPLACE = 1 << 4,        /* in-place buffer reuse */
  KILN_COMPILE_NO_MEMORY_REUSE = 1 << 5,   /* every intermediate its own range (no in-place) */
  KILN_COMPILE_NO_REDUCE_FUSION = 1 << 6,  /* pointwise producers into reductions */
  KILN_COMPILE_NO_VIEW_SINK = 1 << 7,      /* moving reshapes past pointwise consumers */
  KILN_COMPILE_NO_DCE = 1 << 8,            /* keep unused nodes (they still run) */
  KILN_COMPILE_NO_DIRECT_GROUPS = 1 << 9,  /* fused groups: one strided kernel call per op */
  KILN_COMPILE_NO_CAT_ELISION = 1 << 10,   /* cat inputs computed in place in the result */
  KILN_COMPILE_NO_SIBLING_FUSION = 1 << 11, /* groups sharing an input run as one */
  KILN_COMPILE_NO_HFUSE = 1 << 12,          /* matmuls sharing A merged into one wider GEMM */
  KILN_COMPILE_NO_HOIST = 1 << 13,          /* consumer groups moved up into their producer's */
  KILN_COMPILE_NO_PEEPHOLE = 1 << 14,       /* mul(x, sigmoid(x)) rewritten as silu(x) */
  KILN_COMPILE_NO_CHAIN = 1 << 15,          /* consecutive row-tiled groups run tile by tile */
  KILN_COMPILE_FLAGS_END_,                  /* the last flag + 1: keep it last, not a flag */
  KILN_COMPILE_ALL_FLAGS = ((KILN_COMPILE_FLAGS_END_ - 1) << 1) - 1,
};

/* Compiles g (read only; it may be destroyed or extended afterwards) into an executable: runs
 * the passes, plans memory (one arena for all intermediates) and allocates the first run
 * context (interpreter scratch; runs that overlap it get more); the arena itself is bound per
 * run (kiln_exec_run_workspace). The graph must have at
 * least one output. The caller owns *out (kiln_exec_destroy). Errors: INVALID_ARGUMENT (no
 * outputs, NULL argument), OUT_OF_MEMORY. */
kiln_status_t kiln_graph_compile(const kiln_graph_t* g, kiln_exec_t** out);
/* kiln_graph_compile with KILN_COMPILE_* flags (0 = everything on). Errors: kiln_graph_compile's,
 * INVALID_ARGUMENT for a bit outside KILN_COMPILE_ALL_FLAGS. */
kiln_status_t kiln_graph_compile_ex(const kiln_graph_t* g, int flags, kiln_exec_t** out);
/* Frees an exec (run contexts with their arenas and scratch, constants). NULL is a no-op. No
 * run of e may be in flight. */
void kiln_exec_destroy(kiln_exec_t* e);

/* Runs the program. inputs[i] is a contiguous host buffer of input i's declared shape and dtype
 * (borrowed, only read); outputs[k] a caller-allocated contiguous buffer for output k, fully
 * written (also when the output is a view of an input or a constant). Buffers must not overlap
 * each other, nor those of a concurrent run of e. Safe to call from several threads at once
 * (see "Thread safety" above). The intermediates go to the arena of the run context the call
 * takes (kiln_exec_workspace_size bytes, allocated by the first kiln_exec_run on that context,
 * kept until kiln_exec_destroy); after that no allocation, and no locking beyond a spinlock held
 * for the context's pop and push and what the kernels do themselves. Errors: INVALID_ARGUMENT
 * (wrong counts, NULL buffer with elements), OUT_OF_MEMORY (a new context or its arena), then
 * the first kernel
 * error (e.g. OUT_OF_RANGE for an embedding index) with its message; outputs are then
 * unspecified. */
kiln_status_t kiln_exec_run(kiln_exec_t* e, int n_in, void* const* inputs, int n_out,
                            void* const* outputs);

/* Bytes of workspace one run needs for its intermediates (the planned arena; 0 when every value
 * lives in inputs, outputs or constants). 0 for NULL. */
int64_t kiln_exec_workspace_size(const kiln_exec_t* e);

/* kiln_exec_run with the intermediates placed in a caller-owned workspace of at least
 * kiln_exec_workspace_size(e) bytes, 64-byte aligned (borrowed for the call; contents on entry
 * do not matter and are garbage afterwards). A framework allocates it from its device allocator
 * per call, so a program holds no memory between runs and the allocator's statistics see the
 * intermediates. An exec only ever run this way never allocates its own arena. Workspace may be
 * NULL when the size is 0. Concurrent runs of one exec need distinct workspaces; a workspace
 * may be reused (or freed) as soon as the call returns. Errors: kiln_exec_run's, and
 * INVALID_ARGUMENT for a missing, small or misaligned workspace. */
kiln_status_t kiln_exec_run_workspace(kiln_exec_t* e, int n_in, void* const* inputs, int n_out,
                                      void* const* outputs, void* workspace,
                                      int64_t workspace_bytes);

/* Counters describing what the compiler did. All fields are int64_t; fields are only appended. */
typedef struct kiln_exec_stats {
  int64_t arena_bytes;         /* size of the one arena holding every intermediate */
  int64_t intermediates_bytes; /* sum of the (64-byte rounded) intermediate buffer sizes */
  int64_t n_nodes_before;      /* compute nodes in the graph as built (not inputs/constants) */
  int64_t n_nodes_after;       /* compute nodes after passes (a fused group counts 1, views 0) */
  int64_t n_fused_groups;      /* pointwise groups of >= 2 nodes (or with a fused reduction) */
  int64_t n_kernels_per_run;   /* steps launched per run (a fused group counts 1, copies too) */
  int64_t n_dce;               /* nodes removed as unused */
  int64_t n_cse;               /* nodes merged into an identical one */
  int64_t n_folded;            /* nodes evaluated at compile time */
  int64_t n_views;             /* view nodes turned into strided windows */
  int64_t n_view_copies;       /* reshapes that had to materialize a copy */
  int64_t n_epilogues;         /* GEMMs with a fused epilogue (bias / activation / residual) */
  int64_t n_epilogue_ops;      /* pointwise nodes absorbed by GEMM epilogues */
  int64_t n_fused_nodes;       /* pointwise nodes inside fused groups */
  int64_t n_reduce_fused;      /* reductions fused with their pointwise producers */
  int64_t n_inplace;           /* results written into a dead input's buffer */
  int64_t n_output_copies;     /* outputs that need a copy (views, inputs, constants) */
  int64_t constant_bytes;      /* constant data held by the exec */
  int64_t scratch_bytes;       /* interpreter scratch of one run (all pool threads); one such
                                * block per run context, i.e. per run in flight */
  int64_t n_cats_elided;       /* cats whose inputs were computed straight into the result */
  int64_t n_sibling_merges;    /* independent groups sharing an input merged into one */
  int64_t n_gemms_merged;      /* matmuls merged into wider ones (horizontal fusion) */
  int64_t n_groups_hoisted;    /* consumer groups moved up into their producer's group */
  int64_t n_weight_cats_read_in_place; /* stacked weights a GEMM reads in place (no cat runs) */
  int64_t n_contiguous_elided; /* contiguous(permute(r)) whose producer writes the result directly */
  int64_t n_chained_steps;     /* fused-group steps run in tile chains (one parallel job each) */
  int64_t reserved[6];
} kiln_exec_stats_t;

/* Fills *out. Errors: INVALID_ARGUMENT (NULL). */
kiln_status_t kiln_exec_stats(const kiln_exec_t* e, kiln_exec_stats_t* out);
/* Counts and signatures of a compiled program (useful after kiln_exec_load). */
int kiln_exec_num_inputs(const kiln_exec_t* e);
int kiln_exec_num_outputs(const kiln_exec_t* e);
/* dtype / rank / shape (room for 8) of input i or output i; any out pointer may be NULL.
 * Errors: index out of range (OUT_OF_RANGE). */
kiln_status_t kiln_exec_input_info(const kiln_exec_t* e, int i, int* dtype, int* ndim,
                                   int64_t* shape);
kiln_status_t kiln_exec_output_info(const kiln_exec_t* e, int i, int* dtype, int* ndim,
                                    int64_t* shape);

/* ==== dumps ================================================================================= */
/* Text is written into buf (cap bytes, always NUL-terminated when cap > 0, truncated if short);
 * *needed (may be NULL) receives the full length + 1, so a call with buf NULL / cap 0 sizes the
 * buffer. */

/* Stages for kiln_exec_dump. */
enum {
  KILN_DUMP_BEFORE = 0, /* the graph as given to the compiler */
  KILN_DUMP_AFTER = 1,  /* the optimized IR in execution order, with layouts */
  KILN_DUMP_GROUPS = 2, /* fused groups: register programs, tiles */
  KILN_DUMP_PLAN = 3,   /* memory plan: buffers, lifetimes, arena offsets */
  KILN_DUMP_ALL = 4,    /* everything above */
  KILN_DUMP_PROFILE = 5, /* per-step and per-op-kind run times (kiln_exec_set_profiling) */
};

/* The graph's IR as text. Errors: INVALID_ARGUMENT (NULL g). */
kiln_status_t kiln_graph_dump(const kiln_graph_t* g, char* buf, size_t cap, size_t* needed);
/* One stage of a compiled program as text. Errors: INVALID_ARGUMENT (NULL e, bad stage). */
kiln_status_t kiln_exec_dump(const kiln_exec_t* e, int stage, char* buf, size_t cap,
                             size_t* needed);
/* A standalone SVG picture of the optimized program: one box per step in execution order,
 * fused groups colored, edges between steps. Same buffer convention. */
kiln_status_t kiln_exec_dump_svg(const kiln_exec_t* e, char* buf, size_t cap, size_t* needed);

/* Per-step timing. on != 0 zeroes the counters and starts counting (the first call allocates
 * them; they stay with the exec until kiln_exec_destroy); on == 0 stops counting. While on,
 * every run adds each step's wall time (ns) and counts the run (atomically: concurrent runs
 * each add their own times, so a step's total is summed thread time, not wall time);
 * kiln_exec_dump(e, KILN_DUMP_PROFILE, ...) prints the totals per op kind and per step, slowest
 * first. Costs two clock reads per step. May be called while runs are in flight: a run counts
 * all its steps or none, as profiling was on or off when it started. Errors: INVALID_ARGUMENT
 * (NULL e), OUT_OF_MEMORY. */
kiln_status_t kiln_exec_set_profiling(kiln_exec_t* e, int on);

/* ==== serialization (.kiln artifacts) ======================================================= */

/* Writes the program (graph, constants, compile flags and a summary of the plan; a checksum
 * covers all of it but the magic) to `path`. Errors: INVALID_ARGUMENT, INTERNAL (I/O failure,
 * message says why). */
kiln_status_t kiln_exec_save(const kiln_exec_t* e, const char* path);
/* Loads a .kiln artifact written by kiln_exec_save and compiles it (every node is validated
 * again and the plan is checked against the saved one). Files of format version 1 (whose
 * checksum did not cover the flags) still load. The caller owns *out. Errors:
 * NOT_FOUND (cannot open), DATA_LOSS (bad magic, version, checksum, truncated or inconsistent
 * content), OUT_OF_MEMORY. Never crashes on a corrupt file. */
kiln_status_t kiln_exec_load(const char* path, kiln_exec_t** out);
/* kiln_exec_save into memory: *out_data (owned by the caller, free with kiln_exec_free_buffer)
 * and *out_size. */
kiln_status_t kiln_exec_save_buffer(const kiln_exec_t* e, void** out_data, size_t* out_size);
/* kiln_exec_load from `size` bytes at `data` (borrowed). Errors: as kiln_exec_load. */
kiln_status_t kiln_exec_load_buffer(const void* data, size_t size, kiln_exec_t** out);
/* Frees a buffer returned by kiln_exec_save_buffer. NULL is a no-op. */
void kiln_exec_free_buffer(void* data);

#ifdef __cplusplus
}
#endif
#endif /* KILN_GRAPH_H */
