/* SPDX-License-Identifier: Apache-2.0 */
/* iter.h - the N-d strided iterator shared by the elementwise, copy and reduction kernels.
 *
 * kiln_iter_init broadcasts up to three inputs to the output's shape and rewrites the problem as
 * an innermost-first list of dims with byte strides per operand: size-1 dims are dropped, dims
 * are ordered by the output's strides (so a transposed output is still walked in memory order)
 * and adjacent dims that are contiguous for every operand are merged; a tiny innermost dim is then
 * swapped with a much longer dim 1 (fewer, strided rows). kiln_iter_run then calls a
 * 1-d loop over rows of the innermost dim, splitting the flat index space over the shared pool.
 * All state lives in the caller's kiln_iter_t (no allocation). Internal to libkiln.
 */
#ifndef KILN_KERNELS_ITER_H
#define KILN_KERNELS_ITER_H

#include <stdint.h>

#include "kiln/status.h"
#include "kiln/tensor.h"

#define KILN_ITER_MAX_OPS 4
#define KILN_ITER_GRAIN 16384 /* elements per parallel chunk, at least */
#define KILN_ITER_SHORT_ROW 16 /* innermost dims shorter than this go outside a 4x longer dim 1 */

typedef struct kiln_iter {
  int nops; /* operand 0 is the output */
  int ndim; /* dims after coalescing; 0 only when numel == 0 */
  int64_t numel;
  int64_t shape[KILN_MAX_DIMS];                      /* dim 0 is the innermost */
  int64_t strides[KILN_MAX_DIMS][KILN_ITER_MAX_OPS]; /* bytes */
  char* data[KILN_ITER_MAX_OPS];
  kiln_dtype_t dtype[KILN_ITER_MAX_OPS];
} kiln_iter_t;

/* A 1-d loop over n elements: ptrs[k] is operand k's first element, strides[k] its byte step. */
typedef void (*kiln_iter_loop_t)(void* ctx, char** ptrs, const int64_t* strides, int64_t n);

/* Validates a descriptor (rank, dtype, sizes, NULL data with elements); `what` names it in the
 * error message. */
kiln_status_t kiln_check_tensor(const kiln_tensor_t* t, const char* what);
/* Writes "[2, 3]" into buf (size >= 8 * 22). Returns buf. */
const char* kiln_format_shape(char* buf, const int64_t* shape, int ndim);
/* Sets up `it` for out = f(ins[0..nin)); inputs broadcast to out. `op` names the kernel in error
 * messages. Errors: INVALID_ARGUMENT (bad descriptor, shapes that do not broadcast). */
kiln_status_t kiln_iter_init(kiln_iter_t* it, const kiln_tensor_t* out,
                             const kiln_tensor_t* const* ins, int nin, const char* op);
/* Runs `loop` over every element of `it`, in parallel chunks of >= grain elements (inline when
 * numel <= grain). */
void kiln_iter_run(const kiln_iter_t* it, int64_t grain, kiln_iter_loop_t loop, void* ctx);
/* Runs `loop` over the flat element range [begin, end) of `it` on the calling thread. */
void kiln_iter_run_range(const kiln_iter_t* it, int64_t begin, int64_t end, kiln_iter_loop_t loop,
                         void* ctx);

#endif /* KILN_KERNELS_ITER_H */
