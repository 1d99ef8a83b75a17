/* SPDX-License-Identifier: Apache-2.0 */
/* kiln/kernels/gemm.h - dense matrix multiplication on the host (CPU kernels).
 *
 * Matrices are row-major with a leading dimension (elements between consecutive rows). op(X) is X
 * or, when the trans flag is non-zero, X transposed; op(A) is m x k, op(B) is k x n, C is m x n:
 *   A is stored m x k (trans_a == 0, lda >= k) or k x m (trans_a != 0, lda >= m),
 *   B is stored k x n (trans_b == 0, ldb >= n) or n x k (trans_b != 0, ldb >= k), ldc >= n.
 * A leading dimension is checked against max(1, columns). Pointers are borrowed; nothing is kept
 * after a call returns. beta == 0 means C is not read (NaN/Inf in C are ignored); alpha == 0 means
 * A and B are not read. C must not overlap A, B, the bias or the residual.
 *
 * The f32 path packs A and B into 64-byte aligned panels (scratch reused across calls, not
 * allocated per call) and runs a register-blocked 6x16 AVX2/FMA micro-kernel chosen at run time,
 * with a portable scalar kernel otherwise. Work is split over the shared pool (kiln/parallel.h);
 * small products run unpacked on the calling thread. For a given shape and layout the result
 * does not depend on the thread count. Safe to call from several threads at once.
 *
 *   kiln_sgemm(0, 1, m, n, k, 1.0f, x, k, w, k, 0.0f, y, n);   // y = x @ w^T
 */
#ifndef KILN_KERNELS_GEMM_H
#define KILN_KERNELS_GEMM_H

#include <stdint.h>

#include "kiln/status.h"
#include "kiln/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Activation applied by the fused epilogue. */
typedef enum kiln_gemm_activation {
  KILN_GEMM_ACT_NONE = 0,
  KILN_GEMM_ACT_RELU = 1,      /* max(x, 0) */
  KILN_GEMM_ACT_GELU = 2,      /* 0.5 x (1 + erf(x / sqrt 2)), torch approximate='none' */
  KILN_GEMM_ACT_GELU_TANH = 3, /* torch approximate='tanh' */
  KILN_GEMM_ACT_SILU = 4,      /* x * sigmoid(x) */
} kiln_gemm_activation_t;

/* How the residual joins the result. */
typedef enum kiln_gemm_residual_op {
  KILN_GEMM_RESIDUAL_ADD = 0, /* act(...) + residual */
  KILN_GEMM_RESIDUAL_MUL = 1, /* act(...) * residual (a gated unit: silu(x W1) * (x W3)) */
} kiln_gemm_residual_op_t;

/* Work fused into the store of each C tile: C = act(alpha*op(A)op(B) + beta*C + bias) (+ or *)
 * residual. Every field is optional (NULL / 0); pointers are borrowed for the duration of the
 * call. The activation is the f32 elementwise kernel of the same op (kiln_kernel_unary), so a
 * fused product has the bits of the unfused product followed by that op.
 *   bias         m floats (bias_axis 0: one per row) or n floats (bias_axis 1: one per column).
 *   residual     m x n row-major with leading dimension ldr >= n; must not overlap C.
 *   residual_op  kiln_gemm_residual_op_t (0 = add). */
typedef struct kiln_gemm_epilogue {
  const float* bias;
  int bias_axis;  /* 0 per-row, 1 per-column */
  int activation; /* kiln_gemm_activation_t */
  const float* residual;
  int64_t ldr;
  int residual_op; /* kiln_gemm_residual_op_t */
} kiln_gemm_epilogue_t;

/* C = alpha * op(A) * op(B) + beta * C in single precision (see the top of this file for the
 * layout). m, n or k may be 0 (k == 0 gives C = beta * C). Errors: INVALID_ARGUMENT for a
 * negative dimension, a leading dimension that is too small or a NULL matrix that is read. */
kiln_status_t kiln_sgemm(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                         const float* a, int64_t lda, const float* b, int64_t ldb, float beta,
                         float* c, int64_t ldc);

/* kiln_sgemm followed by the fused epilogue `ep` (NULL = none), applied while each tile is in
 * cache. Errors: as kiln_sgemm, plus INVALID_ARGUMENT for a bad bias_axis, activation,
 * residual_op or ldr. */
kiln_status_t kiln_sgemm_ex(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k,
                            float alpha, const float* a, int64_t lda, const float* b, int64_t ldb,
                            float beta, float* c, int64_t ldc, const kiln_gemm_epilogue_t* ep);

/* One block of a stacked, transposed B for kiln_sgemm_wcat: n rows of a row-major f32 weight
 * (row r at w + r*ld, k floats used per row, ld >= max(1, k)). Borrowed. */
typedef struct kiln_gemm_wblock {
  const float* w;
  int64_t n, ld;
} kiln_gemm_wblock_t;

#define KILN_GEMM_MAX_WBLOCKS 16

/* kiln_sgemm_ex with B = [W_0; W_1; ...; W_{nblk-1}]^T, the row-wise stack of nblk weights read
 * in place: y = x @ cat(Wq, Wk, Wv)^T without building the cat. n = sum of the blocks' rows;
 * op(A) is m x k as in kiln_sgemm; C is m x n. The result has the bits of kiln_sgemm_ex on the
 * concatenated weight. Errors: as kiln_sgemm_ex, plus INVALID_ARGUMENT for nblk outside
 * [1, KILN_GEMM_MAX_WBLOCKS], a NULL blk, a block with n < 0 or ld < max(1, k), or a NULL w
 * that is read. */
kiln_status_t kiln_sgemm_wcat(int trans_a, int64_t m, int64_t k, float alpha, const float* a,
                              int64_t lda, int nblk, const kiln_gemm_wblock_t* blk, float beta,
                              float* c, int64_t ldc, const kiln_gemm_epilogue_t* ep);

/* `batch` independent products C_i = alpha*op(A_i)op(B_i) + beta*C_i where X_i = x + i*stride_x
 * (strides in elements; a stride of 0 reuses the same A or B for every item; the C_i must not
 * overlap). Small items are spread over threads, large ones are threaded one by one. Errors: as
 * kiln_sgemm, plus INVALID_ARGUMENT for batch < 0 or a negative stride. */
kiln_status_t kiln_sgemm_batched(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k,
                                 float alpha, const float* a, int64_t lda, int64_t stride_a,
                                 const float* b, int64_t ldb, int64_t stride_b, float beta,
                                 float* c, int64_t ldc, int64_t stride_c, int64_t batch);

/* C = alpha * op(A) * op(B) + beta * C in double precision (simple cache-blocked kernel; same
 * layout, conventions and errors as kiln_sgemm). */
kiln_status_t kiln_dgemm(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, double alpha,
                         const double* a, int64_t lda, const double* b, int64_t ldb, double beta,
                         double* c, int64_t ldc);

/* out = a @ b with torch.matmul semantics on strided descriptors: a is [..., M, K], b is
 * [..., K, N], out is [..., M, N]; the batch dims broadcast (numpy rules; a or b may have
 * stride 0 there) and must equal out's. A 1-D a ([K]) or b ([K]) is treated as [1, K] / [K, 1]
 * with that dim dropped from out, as torch does. Any strides work: a matrix that is unit-stride
 * in either of its last two dims is read in place (transposed views are not copied), others are
 * gathered while packing. All three dtypes must match: f32 (native), f64, f16 or bf16 (converted
 * to f32 while packing, accumulated in f32, rounded once on store). out must not overlap a or b.
 * Descriptors and data are borrowed. Errors: INVALID_ARGUMENT (NULL descriptor, mismatched
 * shapes or dtypes, with a message naming the shapes), UNIMPLEMENTED (integer dtypes),
 * OUT_OF_MEMORY (scratch for non-f32 or fully strided outputs). */
kiln_status_t kiln_kernel_matmul(const kiln_tensor_t* a, const kiln_tensor_t* b,
                                 kiln_tensor_t* out);

/* out = beta * bias + alpha * (a @ b): torch.addmm / baddbmm semantics, with kiln_kernel_matmul's
 * shape rules. `bias` (may be NULL = none) must broadcast to out's shape and
 * have out's dtype; beta == 0 ignores it entirely (NaNs in bias are not propagated). bias may be
 * out itself (same data and strides, the in-place addmm_) but must not otherwise overlap out.
 * Errors: as kiln_kernel_matmul, plus INVALID_ARGUMENT when bias does not broadcast to out. */
kiln_status_t kiln_kernel_matmul_ex(const kiln_tensor_t* a, const kiln_tensor_t* b,
                                    const kiln_tensor_t* bias, double alpha, double beta,
                                    kiln_tensor_t* out);

#ifdef __cplusplus
}
#endif
#endif /* KILN_KERNELS_GEMM_H */
