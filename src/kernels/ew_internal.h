/* SPDX-License-Identifier: Apache-2.0 */
/* ew_internal.h - shared machinery of the pointwise kernels: dtype X-macros, conversions, the
 * staged elementwise driver and the AVX2 entry points. Internal to libkiln. */
#ifndef KILN_KERNELS_EW_INTERNAL_H
#define KILN_KERNELS_EW_INTERNAL_H

#include <stdint.h>
#include <string.h>

#include "kernels/iter.h"
#include "kiln/kernels/elementwise.h"

/* X(NAME, storage C type) for every kiln dtype; two copies so that they can be nested. */
#define KILN_DTYPES_A(X) \
  X(F32, float) X(F16, uint16_t) X(BF16, uint16_t) X(F64, double) X(I8, int8_t) \
  X(I16, int16_t) X(I32, int32_t) X(I64, int64_t) X(U8, uint8_t) X(BOOL, uint8_t)
#define KILN_DTYPES_B(X) \
  X(F32, float) X(F16, uint16_t) X(BF16, uint16_t) X(F64, double) X(I8, int8_t) \
  X(I16, int16_t) X(I32, int32_t) X(I64, int64_t) X(U8, uint8_t) X(BOOL, uint8_t)
/* X(A, NAME, storage C type): the same list with an extra leading argument passed through. */
#define KILN_DTYPES_WITH(X, A) \
  X(A, F32, float) X(A, F16, uint16_t) X(A, BF16, uint16_t) X(A, F64, double) X(A, I8, int8_t) \
  X(A, I16, int16_t) X(A, I32, int32_t) X(A, I64, int64_t) X(A, U8, uint8_t) X(A, BOOL, uint8_t)

/* Elements staged per chunk when an operand needs conversion or is strided. */
#define KILN_EW_BLOCK 256

/* ---- conversions (convert.c) ---- */
/* Converts n elements, strides in bytes; contiguous f32<->f16/bf16 and same-dtype copies take
 * vector / memcpy paths. Semantics: see kiln/kernels/elementwise.h. */
void kiln_cvt(kiln_dtype_t from, const void* src, int64_t src_stride, kiln_dtype_t to, void* dst,
              int64_t dst_stride, int64_t n);
/* Rounds f32 values through f16 or bf16 (to = KILN_DTYPE_F16 / BF16), in place. */
void kiln_cvt_round_f32(kiln_dtype_t to, float* buf, int64_t n);
/* The dtype an op computing in `compute` runs in: f32 for f16/bf16, else compute itself. */
kiln_dtype_t kiln_ew_internal(kiln_dtype_t compute);
/* One element of dtype `d` at p as a double / as an int64 (floats truncate like copy_). */
double kiln_load_f64(const void* p, kiln_dtype_t d);
int64_t kiln_load_i64(const void* p, kiln_dtype_t d);
/* Stores a double / an int64 as dtype `d` at p with copy_ semantics. */
void kiln_store_f64(void* p, kiln_dtype_t d, double v);
void kiln_store_i64(void* p, kiln_dtype_t d, int64_t v);

/* ---- the staged driver (ew_driver.c) ---- */
typedef struct kiln_ew_args {
  double alpha;              /* binary alpha / ternary scalar / unary params->alpha */
  kiln_unary_params_t up;    /* unary parameters (zero when unused) */
  kiln_dtype_t half;         /* KILN_DTYPE_F16/BF16 when the compute dtype is one, else F32 */
} kiln_ew_args_t;

/* Processes n contiguous elements of the internal types; `out` may equal an input. Returns
 * non-zero after an integer division by zero (the element gets 0). */
typedef int (*kiln_ew_kernel_t)(int64_t n, void* out, const void* const* in,
                                const kiln_ew_args_t* args);

typedef struct kiln_ew_desc {
  const char* name;
  kiln_ew_kernel_t kernel;
  kiln_dtype_t compute;        /* as passed by the caller */
  kiln_dtype_t in_type[3];     /* internal type each input is converted to */
  kiln_dtype_t out_type;       /* internal type the kernel writes */
  int round_out;               /* round an f32 result through `compute` before the store */
  int no_round[3];             /* input k goes to f32 without rounding through `compute` */
  kiln_ew_args_t args;
} kiln_ew_desc_t;

/* Runs desc->kernel over out = f(ins[0..nin)) with broadcasting, staging and threading. */
kiln_status_t kiln_ew_run(const kiln_ew_desc_t* desc, kiln_tensor_t* out,
                          const kiln_tensor_t* const* ins, int nin);

/* The descriptor kiln_kernel_unary_ex / binary / ternary run (same arguments; binary's b is only
 * read for its dtype and size, and may be NULL). For callers that run the kernel on their own
 * contiguous buffers (the fused-group interpreter). Errors: those of the kernel call. */
kiln_status_t kiln_unary_desc(kiln_unary_op_t op, const kiln_unary_params_t* p,
                              kiln_dtype_t compute, kiln_ew_desc_t* desc);
kiln_status_t kiln_binary_desc(kiln_binary_op_t op, const kiln_tensor_t* b, double alpha,
                               kiln_dtype_t compute, kiln_ew_desc_t* desc);
kiln_status_t kiln_ternary_desc(kiln_ternary_op_t op, double scalar, kiln_dtype_t compute,
                                kiln_ew_desc_t* desc);

/* Kernel lookups (unary.c, binary.c, ternary.c); NULL when op is undefined for `type`. */
kiln_ew_kernel_t kiln_unary_kernel(kiln_unary_op_t op, kiln_dtype_t type);
kiln_ew_kernel_t kiln_binary_kernel(kiln_binary_op_t op, kiln_dtype_t type);
kiln_ew_kernel_t kiln_ternary_kernel(kiln_ternary_op_t op, kiln_dtype_t type);

/* Fills n elements of es bytes (1, 2, 4 or 8) at dst with the value at one, in 32-byte stores
 * (a plain element loop is not vectorized at -O2). */
static inline void kiln_fill_dense(void* dst, const void* one, int64_t es, int64_t n) {
  char blk[32], *d = (char*)dst;
  for (int64_t b = 0; b < 32; b += es) memcpy(blk + b, one, (size_t)es);
  const int64_t bytes = n * es;
  int64_t i = 0;
  for (; i + 32 <= bytes; i += 32) memcpy(d + i, blk, 32);
  if (i < bytes) memcpy(d + i, blk, (size_t)(bytes - i));
}

/* ---- AVX2 (avx2/elementwise_avx2.c); call only when kiln_cpu_has_avx2() ---- */
/* 1 if the CPU has AVX2 and FMA (cached; KILN_DISABLE_AVX2=1 in the environment forces 0). */
int kiln_cpu_has_avx2(void);
/* Test hook: on != 0 forces the generic kernels, 0 re-detects the CPU. Not thread-safe against
 * running kernels. */
void kiln_cpu_force_generic(int on);
/* f32 kernels replacing the generic ones; NULL where there is none. */
kiln_ew_kernel_t kiln_avx2_unary_f32(kiln_unary_op_t op);
kiln_ew_kernel_t kiln_avx2_binary_f32(kiln_binary_op_t op);
kiln_ew_kernel_t kiln_avx2_ternary_f32(kiln_ternary_op_t op);
void kiln_avx2_f32_to_f16(const float* src, uint16_t* dst, int64_t n);
void kiln_avx2_f16_to_f32(const uint16_t* src, float* dst, int64_t n);
void kiln_avx2_f32_to_bf16(const float* src, uint16_t* dst, int64_t n);
void kiln_avx2_bf16_to_f32(const uint16_t* src, float* dst, int64_t n);
/* Sum of n contiguous f32 values, accumulated in double. */
double kiln_avx2_sum_f32(const float* x, int64_t n);
/* Column sums of `rows` f32 rows of w values (row r at x + r*ld floats) into double
 * accumulators: acc[j] += (double)row[j], row by row. The bits of that scalar loop (each column
 * adds its rows in order); acc stays in registers across the rows, 16 columns at a time. */
void kiln_avx2_acc_rows_f32(const float* x, int64_t ld, int64_t rows, double* acc, int64_t w);
/* ---- AVX-512F (avx512/elementwise_avx512.c); call only when kiln_cpu_has_avx512() ---- */
/* 1 if kiln_cpu_has_avx2() and the CPU has AVX-512F (cached; KILN_DISABLE_AVX512=1 forces 0). */
int kiln_cpu_has_avx512(void);
/* f32 kernels with the bits of the AVX2 ones, 16 lanes at a time; NULL where there is none
 * (the AVX2 kernel applies). */
kiln_ew_kernel_t kiln_avx512_unary_f32(kiln_unary_op_t op);
kiln_ew_kernel_t kiln_avx512_binary_f32(kiln_binary_op_t op);
/* dst[i] = src[2*i] for i < n (a deinterleave); reads nothing past src[2*(n-1)]. */
void kiln_avx2_gather2_32(const void* src, void* dst, int64_t n);
/* dst[2*i] = src[i] for i < n (an interleave); the odd lanes of dst are neither read nor
 * written. */
void kiln_avx2_scatter2_32(const void* src, void* dst, int64_t n);
/* For each of `rows` rows r (src row r at src + r*ld elements, even/odd rows dense, n apart):
 * even[i] = src[2*i], odd[i] = src[2*i + 1] for i < n; reads src[0 .. 2n) of each row only. */
void kiln_avx2_deinterleave2_32(const void* src, int64_t ld, void* even, void* odd, int64_t n,
                                int64_t rows);
/* The reverse: dst[2*i] = even[i], dst[2*i + 1] = odd[i]; writes dst[0 .. 2n) of each row only. */
void kiln_avx2_interleave2_32(const void* even, const void* odd, void* dst, int64_t ld, int64_t n,
                              int64_t rows);

#endif /* KILN_KERNELS_EW_INTERNAL_H */
