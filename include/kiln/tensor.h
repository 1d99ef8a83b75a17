/* SPDX-License-Identifier: Apache-2.0 */
/* kiln/tensor.h - the strided tensor descriptor that kernels take.
 *
 * A descriptor borrows its data: it never owns memory. `data` points at element [0,...,0]
 * (any storage offset already applied); strides are in elements and may be 0 (broadcast) or
 * negative. Rank 0 is a scalar. Kernels validate descriptors and return
 * KILN_ERROR_INVALID_ARGUMENT for mismatched shapes/dtypes rather than reading out of bounds.
 *
 * Threads: a descriptor is a plain value and kernels only read it, so one may be shared freely;
 * kernels hold no state between calls (their scratch is per call), so any kernel may run on
 * several threads at once, provided no call writes memory another concurrent call reads or
 * writes.
 */
#ifndef KILN_TENSOR_H
#define KILN_TENSOR_H

#include <stdint.h>

#include "kiln/dtype.h"

#ifdef __cplusplus
extern "C" {
#endif

#define KILN_MAX_DIMS 8

typedef struct kiln_tensor {
  void* data;
  kiln_dtype_t dtype;
  int32_t ndim;
  int64_t shape[KILN_MAX_DIMS];
  int64_t strides[KILN_MAX_DIMS];
} kiln_tensor_t;

/* Number of elements (product of shape; 1 for rank 0); -1 for a bad rank, a negative dim or
 * nonzero dims whose product is beyond int64. */
int64_t kiln_tensor_numel(const kiln_tensor_t* t);
/* 1 if the tensor is dense row-major (C-contiguous), ignoring strides of size-1 dims. */
int kiln_tensor_is_contiguous(const kiln_tensor_t* t);
/* Fills a contiguous descriptor. Returns INVALID_ARGUMENT if ndim is outside [0, KILN_MAX_DIMS],
 * a dim is negative or the shape holds more than 2^48 elements (zero dims counted as 1; the
 * descriptor is then still filled, with saturated strides). */
int kiln_tensor_init_contiguous(kiln_tensor_t* t, void* data, kiln_dtype_t dtype, int32_t ndim,
                                const int64_t* shape);

#ifdef __cplusplus
}
#endif
#endif /* KILN_TENSOR_H */
