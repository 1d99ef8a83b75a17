/* SPDX-License-Identifier: Apache-2.0 */
/* kiln/kernels/index.h - indexing, shape, factory and sorting kernels on host tensors.
 *
 * Descriptors are borrowed (kiln/tensor.h) and nothing is kept after a call; outputs are
 * allocated by the caller with the shape each function names and are never resized. Semantics
 * follow PyTorch CPU eager (torch 2.13):
 *   - Data-movement kernels (cat, index_select, gather, scatter without reduction, index,
 *     index_put, masked_select, flip, roll, pad, triu/tril, sort values) move whole elements of
 *     any kiln dtype, bit for bit. Reductions (scatter/index_add/index_put accumulate) compute in
 *     the tensor's own dtype, rounding after every step as torch does (f16/bf16 via f32).
 *   - `dim` arguments may be negative (counted from the end). A 0-d tensor behaves as a 1-d
 *     tensor of one element where torch allows it (dim 0 or -1).
 *   - Index tensors are i64 (i32 also accepted where torch accepts it: index_select, index_add,
 *     index, index_put). Every index is checked before anything is written; one out of range is
 *     KILN_ERROR_OUT_OF_RANGE and the message names the index, the dim and its size. Only
 *     aten::index / aten::index_put_ wrap negative indices (like torch); elsewhere a negative
 *     index is out of range.
 *   - Bad ranks, shapes or dtypes are KILN_ERROR_INVALID_ARGUMENT, the message naming the shapes.
 *   - Work is split over the shared pool (kiln/parallel.h); small tensors run inline without
 *     allocating. Accumulating kernels give the same result for any thread count: duplicates
 *     combine in index order.
 *   - Unless stated otherwise, outputs must not overlap inputs.
 *
 *   // y = x.index_select(0, idx): x [5, 3] f32, idx [2] i64, y [2, 3] f32
 *   KILN_RETURN_IF_ERROR(kiln_kernel_index_select(&x, 0, &idx, &y));
 */
#ifndef KILN_KERNELS_INDEX_H
#define KILN_KERNELS_INDEX_H

#include <stdint.h>

#include "kiln/status.h"
#include "kiln/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- concatenation, selection -------------------------------------------------------------- */

/* torch.cat(inputs[0..n), dim, out=out). Inputs may have any strides and dtypes (each is cast to
 * out's dtype, as copy_ does); all non-skipped inputs have the same rank and agree with out in
 * every dim but `dim`, and out.shape[dim] is the sum. Legacy rule: 1-d inputs of shape [0] are
 * skipped; if all are skipped out must be empty. Errors: INVALID_ARGUMENT for n < 1, a 0-d input,
 * a rank or shape mismatch (message names the tensor and both shapes). */
kiln_status_t kiln_kernel_cat(const kiln_tensor_t* const* inputs, int n, int dim,
                              kiln_tensor_t* out);

/* torch.index_select: out = x with dim `dim` replaced by x[..., index[i], ...]. index is i32/i64,
 * 1-d or 0-d; out has x's dtype and x's shape with shape[dim] = numel(index) (0-d x: out 0-d).
 * Errors: INVALID_ARGUMENT (shapes, dtypes), OUT_OF_RANGE (index outside [0, size)). */
kiln_status_t kiln_kernel_index_select(const kiln_tensor_t* x, int dim,
                                       const kiln_tensor_t* index, kiln_tensor_t* out);

/* torch.gather: out[i][j][k] = x[index[i][j][k]][j][k] (for dim 0). index is i64 with x's rank
 * and index.shape[d] <= x.shape[d] for d != dim; out has index's shape and x's dtype. Errors:
 * INVALID_ARGUMENT, OUT_OF_RANGE. */
kiln_status_t kiln_kernel_gather(const kiln_tensor_t* x, int dim, const kiln_tensor_t* index,
                                 kiln_tensor_t* out);

/* ---- scatter family -------------------------------------------------------------------------- */

typedef enum kiln_scatter_reduce {
  KILN_SCATTER_NONE = 0, /* scatter_: plain store; with duplicate indices the last one wins */
  KILN_SCATTER_ADD,      /* scatter_(reduce='add') / scatter_add_ (= SUM, include_self) */
  KILN_SCATTER_MULTIPLY, /* scatter_(reduce='multiply') (= PROD, include_self) */
  /* scatter_reduce_(reduce=...), honouring include_self: */
  KILN_SCATTER_SUM,
  KILN_SCATTER_PROD,
  KILN_SCATTER_MEAN, /* sum / count; integer dtypes use floor division; not for bool */
  KILN_SCATTER_AMAX, /* NaN propagates */
  KILN_SCATTER_AMIN, /* NaN propagates */
  KILN_SCATTER_COUNT
} kiln_scatter_reduce_t;

/* In place: self_out[..., index[i][j][k], ...] (op)= src[i][j][k] along `dim`. index is i64 with
 * self's rank; index.shape[d] <= src.shape[d] for all d and <= self.shape[d] for d != dim. src has
 * self's dtype; when src is NULL the scalar `value` (converted to self's dtype) is scattered.
 * include_self is read only for SUM..AMIN: when 0, positions that receive at least one value
 * start from the reduction's identity instead of their old value. Duplicates combine in order
 * of increasing index position along dim: results are deterministic. Errors: INVALID_ARGUMENT
 * (shapes, dtypes, reduce, MEAN on bool), OUT_OF_RANGE (index outside [0, self.shape[dim])). */
kiln_status_t kiln_kernel_scatter(kiln_tensor_t* self_out, int dim, const kiln_tensor_t* index,
                                  const kiln_tensor_t* src, double value,
                                  kiln_scatter_reduce_t reduce, int include_self);

/* In place torch.index_add_: self_out[..., index[i], ...] += alpha * source[..., i, ...] along
 * dim. index is i32/i64 1-d or 0-d; source has self's dtype and self's shape except
 * source.shape[dim] = numel(index). alpha is converted to the dtype (truncated for integers; bool
 * adds as logical or). Duplicates add in index order. Errors: INVALID_ARGUMENT, OUT_OF_RANGE. */
kiln_status_t kiln_kernel_index_add(kiln_tensor_t* self_out, int dim, const kiln_tensor_t* index,
                                    const kiln_tensor_t* source, double alpha);

/* ---- advanced indexing (aten::index.Tensor / aten::index_put_) ------------------------------
 *
 * indices[0..n_indices) line up with self's leading dims (n_indices <= self.ndim; dims after
 * them are full slices). Each entry is NULL (a full slice ':') or an i64/i32 tensor; all
 * non-NULL entries must already have one common shape B (the caller broadcasts them; stride 0 is
 * fine). Boolean masks are not accepted: convert them with kiln_kernel_nonzero first. Negative
 * indices wrap once (-size <= i < size). Result layout, as in aten/numpy:
 *   - if the non-NULL entries are adjacent, B replaces them in place:
 *       self [A, X, Y, C] with indices (NULL, i, j) -> result [A, B..., C]
 *   - otherwise B goes first, followed by the sliced dims in order:
 *       self [X, A, Y] with indices (i, NULL, j) -> result [B..., A]
 * Any number of indexed dims and any strides are accepted (no non-NULL entry: the result is self
 * itself, copied); the result rank must stay <= KILN_MAX_DIMS. */

/* Writes the result shape of self[indices] into shape[KILN_MAX_DIMS] and its rank into *ndim.
 * Errors: INVALID_ARGUMENT (too many indices, mismatched index shapes, rank overflow, an index
 * dtype other than i64/i32). */
kiln_status_t kiln_kernel_index_shape(const kiln_tensor_t* self,
                                      const kiln_tensor_t* const* indices, int n_indices,
                                      int32_t* ndim, int64_t* shape);

/* out = self[indices...] (aten::index.Tensor); out has the result shape and self's dtype.
 * Errors: as kiln_kernel_index_shape, INVALID_ARGUMENT for a wrong out, OUT_OF_RANGE. */
kiln_status_t kiln_kernel_index(const kiln_tensor_t* self, const kiln_tensor_t* const* indices,
                                int n_indices, kiln_tensor_t* out);

/* In place self_out[indices...] = values (accumulate 0) or += values (accumulate != 0), values
 * (self's dtype) broadcast to the result shape (its rank may not exceed the result's, as in
 * aten). Duplicate indices are applied in order of their position in B: the last write wins, or
 * all accumulate in that order (deterministic for any thread count). Errors: as kiln_kernel_index,
 * INVALID_ARGUMENT when values does not broadcast ("shape mismatch"). */
kiln_status_t kiln_kernel_index_put(kiln_tensor_t* self_out, const kiln_tensor_t* const* indices,
                                    int n_indices, const kiln_tensor_t* values, int accumulate);

/* ---- data-dependent sizes (two phases: count, then fill an output of that size) -------------- */

/* *count = number of true elements of mask broadcast with x (the length of masked_select's
 * output). mask is bool. Errors: INVALID_ARGUMENT (dtype, shapes that do not broadcast). */
kiln_status_t kiln_kernel_masked_select_count(const kiln_tensor_t* x, const kiln_tensor_t* mask,
                                              int64_t* count);
/* torch.masked_select: out (1-d, x's dtype, length = the count above) gets the elements of x
 * where mask (broadcast together with x) is true, in row-major order. Errors: INVALID_ARGUMENT,
 * including an out whose length is not the count. */
kiln_status_t kiln_kernel_masked_select(const kiln_tensor_t* x, const kiln_tensor_t* mask,
                                        kiln_tensor_t* out);

/* *count = number of non-zero elements of x (any dtype; NaN counts, -0.0 does not). */
kiln_status_t kiln_kernel_nonzero_count(const kiln_tensor_t* x, int64_t* count);
/* torch.nonzero: out [count, x.ndim] i64 gets the coordinates of x's non-zero elements in
 * row-major order. Errors: INVALID_ARGUMENT, including an out shape that does not match. */
kiln_status_t kiln_kernel_nonzero(const kiln_tensor_t* x, kiln_tensor_t* out);

/* ---- triangles, factories -------------------------------------------------------------------- */

/* torch.triu: out = x with elements below diagonal `diagonal` zeroed (j - i < diagonal), over
 * the last two dims, batched over the leading ones. x has rank >= 2; out has x's shape and dtype
 * and may alias x exactly (in place). Errors: INVALID_ARGUMENT. */
kiln_status_t kiln_kernel_triu(const kiln_tensor_t* x, int64_t diagonal, kiln_tensor_t* out);
/* torch.tril: keeps j - i <= diagonal; as kiln_kernel_triu. */
kiln_status_t kiln_kernel_tril(const kiln_tensor_t* x, int64_t diagonal, kiln_tensor_t* out);

/* torch.arange into a 1-d out of any non-bool dtype: out[i] = start + i*step, computed in double
 * for f32/f64 and in f32 for f16/bf16 (torch's accumulate types), then rounded once. For integer
 * dtypes start and step are truncated to int64 and the values are exact (wrapping). The caller
 * sizes out (ceil((end - start) / step)). torch's vectorized loop rounds each vector's first
 * value before adding k*step, so a float result may differ from torch's by an ulp. Errors:
 * INVALID_ARGUMENT (rank, bool). */
kiln_status_t kiln_kernel_arange(kiln_tensor_t* out, double start, double step);
/* kiln_kernel_arange with exact 64-bit integer start/step (any non-bool dtype). */
kiln_status_t kiln_kernel_arange_i64(kiln_tensor_t* out, int64_t start, int64_t step);

/* torch.linspace(start, end, steps = numel(out)) into a 1-d out of any non-bool dtype, with
 * torch's scalar formula: step = (end - start) / (steps - 1) in the out dtype (double for integer
 * dtypes); the first half counts up from start, the second half down from end (integers: exact
 * match; floats: within an ulp of torch's vectorized loop, as for arange). Errors:
 * INVALID_ARGUMENT (rank, bool). */
kiln_status_t kiln_kernel_linspace(kiln_tensor_t* out, double start, double end);

/* torch.eye: a 2-d out [n, m] of any dtype gets ones on its main diagonal, zeros elsewhere.
 * Errors: INVALID_ARGUMENT (rank). */
kiln_status_t kiln_kernel_eye(kiln_tensor_t* out);

/* ---- sorting --------------------------------------------------------------------------------- */

/* torch.sort along dim: values_out (x's shape and dtype) and indices_out (x's shape, i64) get
 * each slice in ascending (descending != 0: descending) order. NaN sorts as the largest value;
 * -0.0 and 0.0 are equal. The sort is always stable (equal elements keep their order), which
 * satisfies stable = 0 as well. Either output may be NULL (not both). Errors: INVALID_ARGUMENT. */
kiln_status_t kiln_kernel_sort(const kiln_tensor_t* x, int dim, int descending, int stable,
                               kiln_tensor_t* values_out, kiln_tensor_t* indices_out);
/* torch.argsort: kiln_kernel_sort without the values. */
kiln_status_t kiln_kernel_argsort(const kiln_tensor_t* x, int dim, int descending, int stable,
                                  kiln_tensor_t* indices_out);

/* torch.topk: the k largest (largest != 0) or smallest elements of each slice along dim into
 * values_out (x's dtype) and indices_out (i64), both x's shape with shape[dim] = k. NaN is the
 * largest value. Ties are resolved exactly as torch CPU does (the same selection algorithm);
 * sorted = 0 may leave the k elements in any order (torch's order is reproduced too). Either
 * output may be NULL (not both). Errors: INVALID_ARGUMENT (k outside [0, size], shapes). */
kiln_status_t kiln_kernel_topk(const kiln_tensor_t* x, int64_t k, int dim, int largest,
                               int sorted, kiln_tensor_t* values_out, kiln_tensor_t* indices_out);

/* ---- reordering, padding --------------------------------------------------------------------- */

/* torch.flip: out (x's shape and dtype) = x reversed along every dim whose bit is set in
 * dim_mask (bit i = dim i). Errors: INVALID_ARGUMENT (a bit at or above x's rank, shapes). */
kiln_status_t kiln_kernel_flip(const kiln_tensor_t* x, uint32_t dim_mask, kiln_tensor_t* out);

/* torch.roll: out (x's shape and dtype) = x rolled by shifts[i] along dims[i] for i < n (a dim
 * may repeat; shifts add up). dims == NULL means torch's flattened roll: n must be 1 and x is
 * rolled as if flattened in row-major order. Errors: INVALID_ARGUMENT. */
kiln_status_t kiln_kernel_roll(const kiln_tensor_t* x, const int64_t* shifts, const int* dims,
                               int n, kiln_tensor_t* out);

/* F.pad(x, pad, mode='constant', value): pad[2i], pad[2i+1] are the (low, high) amounts for dim
 * ndim-1-i (last dim first), n_pad even and n_pad/2 <= ndim. Negative amounts crop. out has x's
 * dtype and shape[d] = x.shape[d] + low + high; the padding gets `value` converted to the dtype.
 * Errors: INVALID_ARGUMENT (odd or too long pad, a negative resulting size, out shape). */
kiln_status_t kiln_kernel_constant_pad(const kiln_tensor_t* x, const int64_t* pad, int n_pad,
                                       double value, kiln_tensor_t* out);

/* torch.repeat_interleave(x, repeats, dim): out (x's dtype) = x with slice i along dim repeated
 * repeats[i] times. repeats is i64/i32, 1-d with x.shape[dim] entries or one entry (broadcast),
 * each >= 0; out.shape[dim] is their sum. dim < 0 counts from the end (flatten first for torch's
 * dim=None). Errors: INVALID_ARGUMENT (shapes, negative repeats). */
kiln_status_t kiln_kernel_repeat_interleave(const kiln_tensor_t* x, const kiln_tensor_t* repeats,
                                            int dim, kiln_tensor_t* out);

#ifdef __cplusplus
}
#endif
#endif /* KILN_KERNELS_INDEX_H */
