/* SPDX-License-Identifier: Apache-2.0 */
/* kiln/kernels/reduce.h - reductions, arg-reductions and scans on host tensors.
 *
 * Descriptors are borrowed (kiln/tensor.h) and nothing is kept after a call. `compute` is the
 * dtype the op runs in, chosen by the caller (e.g. torch.sum of an i32 tensor runs in i64; sum(x,
 * dtype=...) passes that dtype); inputs are converted to it on the fly and the result is converted
 * to out's dtype. Floating accumulation is in double (f32/f16/bf16/f64 inputs; f32 SUM/MEAN sum
 * blocks of 8 per lane in f32 first, still within a few ulps at any length), integer
 * accumulation in 64 bits with wraparound. torch accumulates f32 in a cascade of f32 sums and
 * multiplies f16/bf16 PROD in the 16-bit type, so kiln agrees with it to torch's own rounding.
 *
 * Output shape: `out` has x's rank, with every reduced dim of size 1 (torch keepdim=True). For
 * keepdim=False the caller passes a view of its result with the size-1 dims re-inserted (same
 * data, any stride for those dims). A full reduction (dim_mask 0) also accepts any `out` with
 * one element (e.g. rank 0). Work is split over the shared pool: over outputs when there are
 * many, over the reduced elements in fixed-size chunks (combined in a fixed order) when there
 * are few, so results do not depend on the thread count.
 *
 *   // mean over the last dim of x[4, 8] into y[4, 1]
 *   kiln_kernel_reduce(KILN_REDUCE_MEAN, &x, 1u << 1, NULL, KILN_DTYPE_F32, &y);
 */
#ifndef KILN_KERNELS_REDUCE_H
#define KILN_KERNELS_REDUCE_H

#include <stdint.h>

#include "kiln/status.h"
#include "kiln/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum kiln_reduce_op {
  KILN_REDUCE_SUM = 0,   /* empty: 0 */
  KILN_REDUCE_MEAN,      /* (f) empty: NaN */
  KILN_REDUCE_PROD,      /* empty: 1 */
  KILN_REDUCE_AMAX,      /* NaN propagates; empty: INVALID_ARGUMENT */
  KILN_REDUCE_AMIN,      /* NaN propagates; empty: INVALID_ARGUMENT */
  KILN_REDUCE_ANY,       /* x != 0 for some element (result 0/1); empty: 0 */
  KILN_REDUCE_ALL,       /* x != 0 for every element (result 0/1); empty: 1 */
  KILN_REDUCE_VAR,       /* (f) sum((x-mean)^2) / max(0, N - correction); N - correction <= 0
                            gives NaN (inf for nonzero numerator), like torch */
  KILN_REDUCE_STD,       /* (f) sqrt(VAR) */
  KILN_REDUCE_NORM,      /* (f) vector p-norm: p = 0 (count of nonzeros), 1, 2, inf (max |x|),
                            -inf (min |x|), other p: (sum |x|^p)^(1/p) */
  KILN_REDUCE_LOGSUMEXP, /* (f) log(sum(exp(x))), computed stably; empty: -inf */
  KILN_REDUCE_COUNT
} kiln_reduce_op_t;

/* Parameters of VAR/STD and NORM; NULL means correction = 1, p = 2. */
typedef struct kiln_reduce_params {
  double correction; /* VAR/STD: divisor N - correction (torch unbiased=True: 1) */
  double p;          /* NORM order */
} kiln_reduce_params_t;

/* out = op over the dims of x whose bit is set in dim_mask (bit i = dim i; 0 = every dim), see
 * the top of this file for out's shape. Errors: INVALID_ARGUMENT for a bad descriptor, op or
 * mask (a bit at or above x's rank), an out shape that does not match, an op undefined for
 * `compute` ((f) ops need a floating compute dtype), or AMAX/AMIN over an empty set. */
kiln_status_t kiln_kernel_reduce(kiln_reduce_op_t op, const kiln_tensor_t* x, uint32_t dim_mask,
                                 const kiln_reduce_params_t* p, kiln_dtype_t compute,
                                 kiln_tensor_t* out);

typedef enum kiln_reduce_index_op {
  KILN_REDUCE_INDEX_MAX = 0, /* torch.max(x, dim) / argmax */
  KILN_REDUCE_INDEX_MIN,     /* torch.min(x, dim) / argmin */
} kiln_reduce_index_op_t;

/* Pass as `dim` to reduce over every element in row-major order (argmax() without dim). */
#define KILN_REDUCE_INDEX_ALL_DIMS INT32_MIN

/* Max/min of x along `dim` (negative counts from the end) with the index of the first extreme;
 * a NaN counts as the extreme (its first index is returned, its value propagates), like torch.
 * out_values (x's dtype or any other, converted; may be NULL for argmax/argmin) and out_indices
 * (i64) have x's shape with dim of size 1 (or one element for KILN_REDUCE_INDEX_ALL_DIMS).
 * Errors: INVALID_ARGUMENT for a bad descriptor, dim or out shape, an empty reduced dim, or
 * out_indices not i64. */
kiln_status_t kiln_kernel_reduce_index(kiln_reduce_index_op_t op, const kiln_tensor_t* x, int dim,
                                       kiln_tensor_t* out_values, kiln_tensor_t* out_indices);

/* out = cumulative sum of x along `dim` (negative counts from the end) accumulated in `compute`
 * (floating compute accumulates in double, integers in i64 with wraparound), out has x's shape
 * and may alias x. Errors: INVALID_ARGUMENT for a bad descriptor, dim, or out shape. */
kiln_status_t kiln_kernel_cumsum(const kiln_tensor_t* x, int dim, kiln_dtype_t compute,
                                 kiln_tensor_t* out);
/* Cumulative product; as kiln_kernel_cumsum. */
kiln_status_t kiln_kernel_cumprod(const kiln_tensor_t* x, int dim, kiln_dtype_t compute,
                                  kiln_tensor_t* out);

#ifdef __cplusplus
}
#endif
#endif /* KILN_KERNELS_REDUCE_H */
