/* SPDX-License-Identifier: Apache-2.0 */
/* gemm_internal.h - micro-kernels shared by gemm.c and the per-ISA files. Internal to libkiln.
 *
 * Packed layouts (BLIS style): an A sliver is MR rows x kc, stored k-major (a[p*MR + r]); a B
 * sliver is kc x NR, stored k-major (b[p*NR + j]); both zero-padded to full MR / NR and 64-byte
 * aligned. A micro-kernel computes one MR x NR tile of C (row-major, row stride ldc) and stores
 * C = alpha*acc + beta*C for its top-left mr x nr part; beta == 0 never reads C.
 */
#ifndef KILN_KERNELS_GEMM_INTERNAL_H
#define KILN_KERNELS_GEMM_INTERNAL_H

#include <stdint.h>

#include "kernels/ew_internal.h"
#include "kiln/dtype.h"
#include "kiln/kernels/gemm.h"
#include "kiln/status.h"

#define KILN_GEMM_MR 6
#define KILN_GEMM_NR 16

/* A strided matrix operand: element (i, j) is at ((T*)p)[i*rs + j*cs] with T given by dtype
 * (f32, f16 or bf16; strides in elements, any sign, 0 allowed). Packing converts it to f32. */
typedef struct kiln_gemm_src {
  const void* p;
  int64_t rs, cs;
  kiln_dtype_t dtype;
  /* nblk > 0 (B only, f32): columns are the rows of stacked weight blocks: B(i, j) =
   * blk[s].w[(j - j_s) * blk[s].ld + i] for the block s whose columns [j_s, j_s + blk[s].n)
   * hold j (p, rs, cs describe blk[0]). Only the packed path reads such a B. */
  const kiln_gemm_wblock_t* blk;
  int nblk;
} kiln_gemm_src_t;

/* One validated f32 product C = act(alpha*A*B + beta*C + bias) + residual, C row-major with
 * leading dimension ldc (unit column stride). */
typedef struct kiln_sgemm_problem {
  int64_t m, n, k;
  float alpha, beta;
  kiln_gemm_src_t a, b;
  float* c;
  int64_t ldc;
  const kiln_gemm_epilogue_t* ep; /* NULL = none */
  kiln_ew_kernel_t act;           /* ep's activation as the f32 element kernel (NULL: none) */
  kiln_ew_args_t act_args;
  kiln_ew_kernel_t join;          /* the f32 add (residual) or mul (residual) kernel */
  kiln_ew_kernel_t add;           /* the f32 add kernel (bias) */
  kiln_ew_args_t join_args;       /* alpha 1 */
  int serial;                     /* 1: run on the calling thread only */
} kiln_sgemm_problem_t;

/* Packed micro-kernel: a and b are packed slivers of depth kc. */
typedef void (*kiln_sgemm_ukr_fn)(int64_t kc, const float* a, const float* b, float* c,
                                  int64_t ldc, float alpha, float beta, int mr, int nr);

/* Unpacked micro-kernel for small products: A(i,p) = a[i*rs_a + p*cs_a] for i < mr, and
 * B(p,j) = b[p*rs_b + j] for j < nr (unit column stride); nothing outside those is read. */
typedef void (*kiln_sgemm_ukr_strided_fn)(int64_t k, const float* a, int64_t rs_a, int64_t cs_a,
                                          const float* b, int64_t rs_b, float* c, int64_t ldc,
                                          float alpha, float beta, int mr, int nr);

/* AVX2 + FMA versions (src/kernels/avx2/gemm_avx2.c); call only when the CPU has both. */
void kiln_sgemm_ukr_avx2(int64_t kc, const float* a, const float* b, float* c, int64_t ldc,
                         float alpha, float beta, int mr, int nr);
void kiln_sgemm_ukr_strided_avx2(int64_t k, const float* a, int64_t rs_a, int64_t cs_a,
                                 const float* b, int64_t rs_b, float* c, int64_t ldc, float alpha,
                                 float beta, int mr, int nr);

/* Micro-kernel on an unpacked row-major A: A(i,p) = a[i*lda + p] for i < mr (nothing past row
 * mr-1 is read), B a packed sliver; same results as the packed AVX2 kernel. Used for narrow
 * products, where packing A costs a noticeable share of the multiply (3-12% faster at N <= 256
 * on AVX2; AVX-512 has the pair kernels kiln_sgemm_ukr2_adirect*_avx512 instead). */
typedef void (*kiln_sgemm_ukr_adirect_fn)(int64_t kc, const float* a, int64_t lda, const float* b,
                                          float* c, int64_t ldc, float alpha, float beta, int mr,
                                          int nr);
void kiln_sgemm_ukr_adirect_avx2(int64_t kc, const float* a, int64_t lda, const float* b,
                                 float* c, int64_t ldc, float alpha, float beta, int mr, int nr);

/* AVX-512F version of the packed micro-kernel (src/kernels/avx512/gemm_avx512.c), same layout
 * and contract; call only when the CPU has AVX-512F. */
void kiln_sgemm_ukr_avx512(int64_t kc, const float* a, const float* b, float* c, int64_t ldc,
                           float alpha, float beta, int mr, int nr);
/* The same on two adjacent packed B slivers (b and b + NR*kc): a 6 x 2NR tile, nr in (NR, 2NR],
 * one FMA chain per output over k (no even/odd split), so its bits differ from two
 * kiln_sgemm_ukr_avx512 calls; the driver pairs slivers by position (2q, 2q+1) so a column's
 * arithmetic never depends on the thread count. Fewer loads per FMA. */
void kiln_sgemm_ukr2_avx512(int64_t kc, const float* a, const float* b, float* c, int64_t ldc,
                            float alpha, float beta, int mr, int nr);
/* kiln_sgemm_ukr2_avx512 on eight full rows of a row-major f32 A read in place (A(r, p) =
 * a[r*lda + p], r < 8): sixteen accumulators, the same bits per output as packing them first. */
void kiln_sgemm_ukr2_adirect8_avx512(int64_t kc, const float* a, int64_t lda, const float* b,
                                     float* c, int64_t ldc, float alpha, float beta, int nr);

/* One full B sliver from a transposed f32 source: dst[p*NR + j] = bt[j*ld + p], p < kc. */
void kiln_gemm_pack_b_trans_avx2(float* dst, const float* bt, int64_t ld, int64_t kc);
/* The same with AVX-512F (16x16 transposes); the same output. Call only on AVX-512F CPUs. */
void kiln_gemm_pack_b_trans_avx512(float* dst, const float* bt, int64_t ld, int64_t kc);

/* GEMV against a transposed B: y[j] = alpha * sum_p x[p]*bt[j*ldb + p] + beta*y[j], j < n
 * (beta == 0 does not read y). */
void kiln_sgemv_t_avx2(int64_t k, const float* x, const float* bt, int64_t ldb, int64_t n,
                       float* y, float alpha, float beta);

/* Portable scalar versions (gemm_pack.c), same contracts. */
void kiln_sgemm_ukr_generic(int64_t kc, const float* a, const float* b, float* c, int64_t ldc,
                            float alpha, float beta, int mr, int nr);
void kiln_sgemm_ukr_strided_generic(int64_t k, const float* a, int64_t rs_a, int64_t cs_a,
                                    const float* b, int64_t rs_b, float* c, int64_t ldc,
                                    float alpha, float beta, int mr, int nr);

/* Packs rows [i0, i0+mc) x cols [p0, p0+kc) of `a` into ceil(mc/MR) slivers (each MR*kc). */
void kiln_gemm_pack_a(float* dst, const kiln_gemm_src_t* a, int64_t i0, int64_t p0, int64_t mc,
                      int64_t kc);
/* Packs rows [p0, p0+kc) x cols [j0, j0+nc) of `b` into ceil(nc/NR) slivers (each kc*NR);
 * avx2 != 0 allows the AVX2 transposing path. */
void kiln_gemm_pack_b(float* dst, const kiln_gemm_src_t* b, int64_t p0, int64_t j0, int64_t kc,
                      int64_t nc, int avx2);
/* Applies pr's epilogue to the mr x nr tile at c (leading dim pr->ldc) whose top-left element
 * is (i0, j0) of the full C. */
void kiln_gemm_epilogue_tile(const kiln_sgemm_problem_t* pr, float* c, int64_t i0, int64_t j0,
                             int64_t mr, int64_t nr);
/* Resolves the element kernels pr's epilogue runs (pr->act / act_args for its activation, the
 * add / join kernels); required before kiln_sgemm_run of a problem with an epilogue. Errors:
 * INVALID_ARGUMENT for an unknown activation. */
kiln_status_t kiln_gemm_resolve_act(kiln_sgemm_problem_t* pr);

/* Scratch blocks reused across calls (a mutex-guarded free list; blocks are always in use or
 * listed, so nothing leaks). Acquire returns NULL when out of memory. */
typedef struct gemm_scratch {
  struct gemm_scratch* next;
  size_t cap;
  float* buf; /* cap bytes, 64-byte aligned */
} gemm_scratch_t;
gemm_scratch_t* kiln_gemm_scratch_acquire(size_t bytes);
void kiln_gemm_scratch_release(gemm_scratch_t* s);

/* Runs a problem whose arguments were already validated (gemm.c). Errors: OUT_OF_MEMORY. */
kiln_status_t kiln_sgemm_run(const kiln_sgemm_problem_t* p);

/* C = alpha*A*B + beta*C in f64 on fully strided operands (rs/cs in elements); beta == 0 does not
 * read C. Validated arguments. Errors: OUT_OF_MEMORY. */
kiln_status_t kiln_dgemm_strided(int64_t m, int64_t n, int64_t k, double alpha, const double* a,
                                 int64_t rs_a, int64_t cs_a, const double* b, int64_t rs_b,
                                 int64_t cs_b, double beta, double* c, int64_t rs_c, int64_t cs_c);

/* Selects the micro-kernels: 0 = best the CPU supports (default), 1 = portable scalar kernels,
 * 2 = AVX2 + FMA even where AVX-512F exists (the CPU must have AVX2 + FMA; else generic).
 * For tests and benchmarks; not thread-safe against concurrent GEMMs. */
void kiln_gemm_set_isa(int isa);
/* 1 (default): narrow products read a row-major A in place; 0: always pack A. Same results
 * either way. For tests and benchmarks; not thread-safe against concurrent GEMMs. */
void kiln_gemm_set_adirect(int on);
/* 1 (default): on AVX-512, pairs of B slivers run through kiln_sgemm_ukr2_avx512; 0: one
 * sliver per call (other rounding, same accuracy). For tests and benchmarks, not thread-safe. */
void kiln_gemm_set_pair(int on);
/* K-parallel mode for short deep products (gemm.c): 0 automatic (default), 1 whenever the
 * problem is eligible (more than one KC slice, one column panel, partials within 8 MB), 2 never.
 * Tests and benchmarks; not thread-safe against running GEMMs. */
void kiln_gemm_set_kpar(int mode);

#endif /* KILN_KERNELS_GEMM_INTERNAL_H */
