/* SPDX-License-Identifier: Apache-2.0 */
/* nn_internal.h - helpers shared by the nn kernels (softmax.c, norm.c, attention.c, loss.c,
 * embedding.c): the per-ISA row/block primitives, row views of strided tensors, per-call scratch
 * and argument checks. Internal to libkiln.
 *
 * Row primitives work on dense f32 arrays; a kernel gets such arrays from a view (directly when
 * the tensor is f32 and the row is unit-stride, else converted into scratch) and writes results
 * back through the view. f64 kernels use the scalar double helpers at the bottom.
 */
#ifndef KILN_KERNELS_NN_INTERNAL_H
#define KILN_KERNELS_NN_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "kiln/dtype.h"
#include "kiln/status.h"
#include "kiln/tensor.h"

/* ---- per-ISA primitives (generic in nn_common.c, AVX2 in avx2/nn_avx2.c) ------------------- */

typedef struct kiln_nn_ops {
  /* Dense conversions between f32 and dt (f32, f16 or bf16; round to nearest even on store). */
  void (*load)(const void* src, kiln_dtype_t dt, int64_t n, float* dst);
  void (*store)(const float* src, int64_t n, kiln_dtype_t dt, void* dst);
  /* max(x) (-inf for n == 0; NaN elements may be skipped: they poison the row anyway). */
  float (*max)(const float* x, int64_t n);
  /* y = exp(x - shift), returns the sum of y. y may alias x or be NULL (sum only). */
  float (*exp_sum)(const float* x, float shift, float* y, int64_t n);
  /* y = x * s + t. y may alias x. */
  void (*affine)(const float* x, float s, float t, float* y, int64_t n);
  float (*dot)(const float* a, const float* b, int64_t n);
  /* y += x. */
  void (*add)(const float* x, float* y, int64_t n);
  float (*sum)(const float* x, int64_t n);
  /* gi = y * (g - s) (softmax) / gi = g - exp(y) * s (log_softmax). gi may alias g. */
  void (*softmax_bwd)(const float* g, const float* y, float s, float* gi, int64_t n);
  void (*log_softmax_bwd)(const float* g, const float* y, float s, float* gi, int64_t n);
  /* Two-pass mean and biased variance. */
  void (*moments)(const float* x, int64_t n, float* mean, float* var);
  float (*sumsq)(const float* x, int64_t n);
  /* y = (x - mean) * rstd * w + b; w, b may be NULL; y may alias x. */
  void (*norm_apply)(const float* x, int64_t n, float mean, float rstd, const float* w,
                     const float* b, float* y);
  /* With gw = g * w (w NULL: g) and xhat = (x - mean) * rstd: *s1 = sum(gw), *s2 = sum(gw*xhat). */
  void (*norm_bwd_sums)(const float* g, const float* x, const float* w, int64_t n, float mean,
                        float rstd, float* s1, float* s2);
  /* dx = rstd * (gw - a - xhat * b). dx may alias g. */
  void (*norm_bwd_apply)(const float* g, const float* x, const float* w, int64_t n, float mean,
                         float rstd, float a, float b, float* dx);
  /* aw += g * (x - mean) * rstd, ab += g (ab may be NULL). */
  void (*norm_wgrad_acc)(const float* g, const float* x, int64_t n, float mean, float rstd,
                         float* aw, float* ab);
  /* dst[c*ldd + r] = src[r*lds + c] for r < rows, c < cols. */
  void (*transpose)(int64_t rows, int64_t cols, const float* src, int64_t lds, float* dst,
                    int64_t ldd);
  /* C[m x n] = alpha * A B (+ C when acc != 0), A(i,p) = a[i*rs_a + p*cs_a] (any strides, e.g.
   * transposed), B(p,j) = b[p*ldb + j], C row-major with leading dim ldc. Each output element
   * sums its k products in order (no split-k), so results do not depend on blocking. */
  void (*gemm)(int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t rs_a,
               int64_t cs_a, const float* b, int64_t ldb, float* c, int64_t ldc, int acc);
} kiln_nn_ops_t;

extern const kiln_nn_ops_t kiln_nn_ops_generic;
extern const kiln_nn_ops_t kiln_nn_ops_avx2;

/* AVX-512F gemm / exp_sum / max (avx512/nn_avx512.c; same contracts and per-element results as
 * the AVX2 ones). Call only when the CPU has AVX-512F. */
void kiln_nn_avx512_gemm(int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                         int64_t rs_a, int64_t cs_a, const float* b, int64_t ldb, float* c,
                         int64_t ldc, int acc);
float kiln_nn_avx512_exp_sum(const float* x, float shift, float* y, int64_t n);
float kiln_nn_avx512_max(const float* x, int64_t n);
void kiln_nn_avx512_log_softmax_bwd(const float* g, const float* y, float s, float* gi, int64_t n);
void kiln_nn_avx512_softmax_bwd(const float* g, const float* y, float s, float* gi, int64_t n);

/* The primitives for this CPU: AVX2+FMA (with F16C) when present and KILN_DISABLE_AVX2 is unset/0,
 * with the AVX-512F gemm / exp_sum / max over them when the CPU has AVX-512F. */
const kiln_nn_ops_t* kiln_nn_ops(void);
/* Tests: 1 forces the generic primitives, 2 the AVX2 ones (no AVX-512), 0 returns to automatic
 * selection. */
void kiln_nn_force_generic(int on);

/* Tests: kiln_kernel_sdpa_backward's schedule, 0 automatic, 1 two passes, 2 fused. */
extern int kiln_nn_sdpa_bwd_schedule;

/* ---- row views ------------------------------------------------------------------------------ */

/* A tensor seen as `rows` rows of `n` elements: the dims in inner_mask form a row (row-major
 * over them), the others index rows (row-major). `linear` when a row's elements are equally
 * spaced (element t at offset t*step); unit == (linear && step == 1). Offsets are in elements. */
typedef struct kiln_nn_view {
  char* base;
  kiln_dtype_t dtype;
  int64_t esize;
  int ond, ind;
  int64_t oshape[KILN_MAX_DIMS], ostride[KILN_MAX_DIMS];
  int64_t ishape[KILN_MAX_DIMS], istride[KILN_MAX_DIMS];
  int64_t rows, n, step;
  int linear, unit;
} kiln_nn_view_t;

void kiln_nn_view_init(kiln_nn_view_t* v, const kiln_tensor_t* t, uint32_t inner_mask);
/* Element offset of the start of a row / of element t of a row from the row start. */
int64_t kiln_nn_view_row(const kiln_nn_view_t* v, int64_t row);
int64_t kiln_nn_view_elem(const kiln_nn_view_t* v, int64_t t);

/* Elements [c0, c1) of a row as f32: a direct pointer when f32 and unit, else converted into buf
 * (c1 - c0 floats). */
const float* kiln_nn_row_in(const kiln_nn_view_t* v, int64_t row, int64_t c0, int64_t c1,
                            float* buf);
/* Where to compute a row's elements [c0, c1): the direct pointer when f32 and unit, else buf. */
float* kiln_nn_row_out(const kiln_nn_view_t* v, int64_t row, int64_t c0, float* buf);
/* Stores p (from kiln_nn_row_out) into the row unless it already is the direct pointer. */
void kiln_nn_row_commit(const kiln_nn_view_t* v, int64_t row, int64_t c0, int64_t c1,
                        const float* p);
/* Double versions (any floating dtype). */
void kiln_nn_row_in_f64(const kiln_nn_view_t* v, int64_t row, double* dst);
void kiln_nn_row_out_f64(const kiln_nn_view_t* v, int64_t row, const double* src);

/* Sets every element of a floating tensor to 0 (any strides). */
void kiln_nn_zero(kiln_tensor_t* t);

/* Strided conversions of n elements (strides in elements). */
void kiln_nn_load_strided(const void* src, kiln_dtype_t dt, int64_t stride, int64_t n,
                          float* dst);
void kiln_nn_store_strided(const float* src, int64_t n, kiln_dtype_t dt, void* dst,
                           int64_t stride);

/* Scalar element access (floating dtypes; get also reads integer dtypes and bool). */
double kiln_nn_get(const void* p, kiln_dtype_t dt);
void kiln_nn_set(void* p, kiln_dtype_t dt, double v);
float kiln_nn_getf(const void* p, kiln_dtype_t dt);
void kiln_nn_setf(void* p, kiln_dtype_t dt, float v);
/* Reads an integer index (i32 / i64). */
static inline int64_t kiln_nn_index(const void* base, kiln_dtype_t dt, int64_t off) {
  return dt == KILN_DTYPE_I64 ? ((const int64_t*)base)[off] : (int64_t)((const int32_t*)base)[off];
}

/* ---- scratch -------------------------------------------------------------------------------- */

#define KILN_NN_STACK_BYTES 16384

/* Per-thread scratch for one call: when per_thread fits in KILN_NN_STACK_BYTES each range
 * function uses its own stack buffer, else init takes one block of pool-size * per_thread bytes
 * from a small process-wide cache of blocks (allocating only when none fits) and free returns
 * it, so repeated calls do not allocate. */
typedef struct kiln_nn_scratch {
  char* heap;
  size_t per_thread, cap;
  int nthreads;
} kiln_nn_scratch_t;

kiln_status_t kiln_nn_scratch_init(kiln_nn_scratch_t* s, size_t per_thread, const char* op);
/* The block of thread `tid` (64-byte aligned): heap slice or `stack` (KILN_NN_STACK_BYTES). */
void* kiln_nn_scratch_get(const kiln_nn_scratch_t* s, int tid, void* stack);
void kiln_nn_scratch_free(kiln_nn_scratch_t* s);
/* Rounds a byte count up to a multiple of 64. */
static inline size_t kiln_nn_align(size_t bytes) { return (bytes + 63) & ~(size_t)63; }

/* Items per parallel chunk so that a chunk holds >= ~32K elements of work. */
int64_t kiln_nn_grain(int64_t work_per_item);

/* ---- argument checks ------------------------------------------------------------------------ */

/* Formats t's shape as "[2, 3]" into buf (static-size, returns buf). */
const char* kiln_nn_shape_str(const kiln_tensor_t* t, char* buf, size_t size);
/* A valid descriptor: non-NULL, rank in [0, 8], sizes >= 0, known dtype, data set if non-empty. */
kiln_status_t kiln_nn_check(const kiln_tensor_t* t, const char* op, const char* name);
/* kiln_nn_check plus a floating dtype. */
kiln_status_t kiln_nn_check_float(const kiln_tensor_t* t, const char* op, const char* name);
/* Same rank and sizes. */
int kiln_nn_same_shape(const kiln_tensor_t* a, const kiln_tensor_t* b);
/* INVALID_ARGUMENT "<op>: <an> <shape> and <bn> <shape> must have the same shape". */
kiln_status_t kiln_nn_shape_error(const char* op, const char* an, const kiln_tensor_t* a,
                                  const char* bn, const kiln_tensor_t* b, const char* what);
/* Normalizes dim into [0, ndim) (rank 0 accepts 0 / -1 -> 0); -1 if out of range. */
int kiln_nn_dim(int dim, int ndim);

#endif /* KILN_KERNELS_NN_INTERNAL_H */
