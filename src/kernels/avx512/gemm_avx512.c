/* SPDX-License-Identifier: Apache-2.0 */
/* gemm_avx512.c - the packed 6x16 single-precision GEMM micro-kernel for AVX-512F.
 *
 * Same packed layout and contract as the AVX2 kernel (gemm_internal.h), so the driver and the
 * packing are shared: one zmm holds a 16-wide row of the tile. Six rows give only six FMA
 * chains, too few to hide the 4-cycle FMA latency on two pipes, so even and odd k steps
 * accumulate into two sets of six registers that are summed at the end (twelve chains). Edge
 * tiles store through lane masks.
 */
#include <immintrin.h>

#include "kernels/gemm_internal.h"

#define MR KILN_GEMM_MR
#define NR KILN_GEMM_NR

#if MR != 6 || NR != 16
#error "gemm_avx512.c is written for a 6x16 tile"
#endif

/* One k step from a (MR values) and b (NR values) into the six accumulators x0..x5. */
#define K_STEP(a, b, x0, x1, x2, x3, x4, x5)                    \
  do {                                                          \
    const __m512 b_ = _mm512_load_ps(b);                        \
    x0 = _mm512_fmadd_ps(_mm512_set1_ps((a)[0]), b_, x0);       \
    x1 = _mm512_fmadd_ps(_mm512_set1_ps((a)[1]), b_, x1);       \
    x2 = _mm512_fmadd_ps(_mm512_set1_ps((a)[2]), b_, x2);       \
    x3 = _mm512_fmadd_ps(_mm512_set1_ps((a)[3]), b_, x3);       \
    x4 = _mm512_fmadd_ps(_mm512_set1_ps((a)[4]), b_, x4);       \
    x5 = _mm512_fmadd_ps(_mm512_set1_ps((a)[5]), b_, x5);       \
  } while (0)

/* Stores alpha*x (+ beta*C) into the first nr columns of one row (mask m). */
static inline __attribute__((always_inline)) void store_row(float* c, __m512 x, __m512 va,
                                                            __m512 vb, int use_beta, __mmask16 m) {
  x = _mm512_mul_ps(x, va);
  if (use_beta) x = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m, c), x);
  _mm512_mask_storeu_ps(c, m, x);
}

/* Packed 6x16 micro-kernel (see gemm_internal.h). */
void kiln_sgemm_ukr_avx512(int64_t kc, const float* a, const float* b, float* c, int64_t ldc,
                           float alpha, float beta, int mr, int nr) {
  __m512 e0 = _mm512_setzero_ps(), e1 = e0, e2 = e0, e3 = e0, e4 = e0, e5 = e0;
  __m512 o0 = e0, o1 = e0, o2 = e0, o3 = e0, o4 = e0, o5 = e0;
  for (int r = 0; r < mr; r++) _mm_prefetch((const char*)(c + r * ldc), _MM_HINT_T0);
  int64_t p = 0;
  for (; p + 4 <= kc; p += 4) {
    _mm_prefetch((const char*)(a + 8 * MR), _MM_HINT_T0);
    _mm_prefetch((const char*)(b + 8 * NR), _MM_HINT_T0);
    K_STEP(a, b, e0, e1, e2, e3, e4, e5);
    K_STEP(a + MR, b + NR, o0, o1, o2, o3, o4, o5);
    K_STEP(a + 2 * MR, b + 2 * NR, e0, e1, e2, e3, e4, e5);
    K_STEP(a + 3 * MR, b + 3 * NR, o0, o1, o2, o3, o4, o5);
    a += 4 * MR;
    b += 4 * NR;
  }
  for (; p < kc; p++, a += MR, b += NR) K_STEP(a, b, e0, e1, e2, e3, e4, e5);
  e0 = _mm512_add_ps(e0, o0);
  e1 = _mm512_add_ps(e1, o1);
  e2 = _mm512_add_ps(e2, o2);
  e3 = _mm512_add_ps(e3, o3);
  e4 = _mm512_add_ps(e4, o4);
  e5 = _mm512_add_ps(e5, o5);
  const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
  const int use_beta = beta != 0.0f;
  const __mmask16 m = nr >= NR ? (__mmask16)0xFFFF : (__mmask16)((1u << nr) - 1u);
  store_row(c, e0, va, vb, use_beta, m);
  if (mr > 1) store_row(c + ldc, e1, va, vb, use_beta, m);
  if (mr > 2) store_row(c + 2 * ldc, e2, va, vb, use_beta, m);
  if (mr > 3) store_row(c + 3 * ldc, e3, va, vb, use_beta, m);
  if (mr > 4) store_row(c + 4 * ldc, e4, va, vb, use_beta, m);
  if (mr > 5) store_row(c + 5 * ldc, e5, va, vb, use_beta, m);
}

/* One k step of a 6 x 32 tile: a (MR values) against b and b2 (NR values each); each
 * broadcast of a feeds both halves. */
#define K_STEP2(a, b, b2, x0, x1, x2, x3, x4, x5, y0, y1, y2, y3, y4, y5) \
  do {                                                                     \
    const __m512 b_ = _mm512_load_ps(b), c_ = _mm512_load_ps(b2);         \
    __m512 s_ = _mm512_set1_ps((a)[0]);                                    \
    x0 = _mm512_fmadd_ps(s_, b_, x0);                                      \
    y0 = _mm512_fmadd_ps(s_, c_, y0);                                      \
    s_ = _mm512_set1_ps((a)[1]);                                           \
    x1 = _mm512_fmadd_ps(s_, b_, x1);                                      \
    y1 = _mm512_fmadd_ps(s_, c_, y1);                                      \
    s_ = _mm512_set1_ps((a)[2]);                                           \
    x2 = _mm512_fmadd_ps(s_, b_, x2);                                      \
    y2 = _mm512_fmadd_ps(s_, c_, y2);                                      \
    s_ = _mm512_set1_ps((a)[3]);                                           \
    x3 = _mm512_fmadd_ps(s_, b_, x3);                                      \
    y3 = _mm512_fmadd_ps(s_, c_, y3);                                      \
    s_ = _mm512_set1_ps((a)[4]);                                           \
    x4 = _mm512_fmadd_ps(s_, b_, x4);                                      \
    y4 = _mm512_fmadd_ps(s_, c_, y4);                                      \
    s_ = _mm512_set1_ps((a)[5]);                                           \
    x5 = _mm512_fmadd_ps(s_, b_, x5);                                      \
    y5 = _mm512_fmadd_ps(s_, c_, y5);                                      \
  } while (0)

/* The pair kernels' accumulators: zmm0-11 zeroed before the k loop, spilled to `acc` after. */
#define ACC12_ZERO                                                                           \
  "vpxord %%zmm0, %%zmm0, %%zmm0\n\t"                                                       \
  "vmovaps %%zmm0, %%zmm1\n\t" "vmovaps %%zmm0, %%zmm2\n\t" "vmovaps %%zmm0, %%zmm3\n\t"   \
  "vmovaps %%zmm0, %%zmm4\n\t" "vmovaps %%zmm0, %%zmm5\n\t" "vmovaps %%zmm0, %%zmm6\n\t"   \
  "vmovaps %%zmm0, %%zmm7\n\t" "vmovaps %%zmm0, %%zmm8\n\t" "vmovaps %%zmm0, %%zmm9\n\t"   \
  "vmovaps %%zmm0, %%zmm10\n\t" "vmovaps %%zmm0, %%zmm11\n\t"
#define ACC12_SPILL                                                                          \
  "vmovaps %%zmm0, 0*64(%[acc])\n\t" "vmovaps %%zmm1, 1*64(%[acc])\n\t"                    \
  "vmovaps %%zmm2, 2*64(%[acc])\n\t" "vmovaps %%zmm3, 3*64(%[acc])\n\t"                    \
  "vmovaps %%zmm4, 4*64(%[acc])\n\t" "vmovaps %%zmm5, 5*64(%[acc])\n\t"                    \
  "vmovaps %%zmm6, 6*64(%[acc])\n\t" "vmovaps %%zmm7, 7*64(%[acc])\n\t"                    \
  "vmovaps %%zmm8, 8*64(%[acc])\n\t" "vmovaps %%zmm9, 9*64(%[acc])\n\t"                    \
  "vmovaps %%zmm10, 10*64(%[acc])\n\t" "vmovaps %%zmm11, 11*64(%[acc])\n\t"

/* Two adjacent packed B slivers (b, then b + NR*kc) against one A sliver: a 6 x 32 tile in
 * twelve accumulators, one FMA chain per output vector over all of k (twelve independent chains
 * already cover the FMA latency on two pipes, so there is no even/odd split: that split's 24
 * accumulators plus operands overflowed the 32 registers and the compiler spilled in the loop).
 * Two B rows and six broadcasts feed twelve FMAs per k step. */
void kiln_sgemm_ukr2_avx512(int64_t kc, const float* a, const float* b, float* c, int64_t ldc,
                            float alpha, float beta, int mr, int nr) {
  __m512 e0 = _mm512_setzero_ps(), e1 = e0, e2 = e0, e3 = e0, e4 = e0, e5 = e0;
  __m512 f0 = e0, f1 = e0, f2 = e0, f3 = e0, f4 = e0, f5 = e0;
  const float* b2 = b + NR * kc;
  for (int r = 0; r < mr; r++) {
    _mm_prefetch((const char*)(c + r * ldc), _MM_HINT_T0);
    _mm_prefetch((const char*)(c + r * ldc + 16), _MM_HINT_T0);
  }
  int64_t p = 0;
#if defined(__x86_64__)
  /* The k loop in assembly: compiled from the intrinsics, gcc rotated the accumulators through
   * extra registers (a vmovaps per FMA or two), which cost front-end slots the FMAs need. Here
   * the twelve accumulators stay in zmm0-11 (B rows in zmm12/13, broadcasts in zmm14/15), four
   * k steps per iteration then single steps, and are spilled once to `acc` at the end. */
  {
    float acc[12 * 16] __attribute__((aligned(64)));
    int64_t n4 = kc / 4, n1 = kc % 4;
    const int64_t off = (int64_t)sizeof(float) * NR * kc; /* b2 - b in bytes */
#define KS_ROW(ao, x, y, s) \
  "vbroadcastss " #ao "(%[a]), %%zmm" #s "\n\t" \
  "vfmadd231ps %%zmm12, %%zmm" #s ", %%zmm" #x "\n\t" \
  "vfmadd231ps %%zmm13, %%zmm" #s ", %%zmm" #y "\n\t"
#define KS(k)                                                                        \
  "vmovaps " #k "*64(%[b]), %%zmm12\n\t"                                              \
  "vmovaps " #k "*64(%[b],%[off]), %%zmm13\n\t"                                       \
  KS_ROW(k*24+0, 0, 1, 14) KS_ROW(k*24+4, 2, 3, 15) KS_ROW(k*24+8, 4, 5, 14)          \
  KS_ROW(k*24+12, 6, 7, 15) KS_ROW(k*24+16, 8, 9, 14) KS_ROW(k*24+20, 10, 11, 15)
    __asm__ volatile(
        ACC12_ZERO
        "test %[n4], %[n4]\n\t"
        "jz 2f\n\t"
        "1:\n\t"
        "prefetcht0 192(%[a])\n\t"
        "prefetcht0 512(%[b])\n\t"
        "prefetcht0 512(%[b],%[off])\n\t"
        KS(0) KS(1) KS(2) KS(3)
        "add $96, %[a]\n\t"
        "add $256, %[b]\n\t"
        "dec %[n4]\n\t"
        "jnz 1b\n\t"
        "2:\n\t"
        "test %[n1], %[n1]\n\t"
        "jz 4f\n\t"
        "3:\n\t"
        KS(0)
        "add $24, %[a]\n\t"
        "add $64, %[b]\n\t"
        "dec %[n1]\n\t"
        "jnz 3b\n\t"
        "4:\n\t"
        ACC12_SPILL
        : [a] "+r"(a), [b] "+r"(b), [n4] "+r"(n4), [n1] "+r"(n1)
        : [off] "r"(off), [acc] "r"(acc)
        : "memory", "cc", "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8",
          "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15");
#undef KS
#undef KS_ROW
    e0 = _mm512_load_ps(acc + 0 * 16);
    f0 = _mm512_load_ps(acc + 1 * 16);
    e1 = _mm512_load_ps(acc + 2 * 16);
    f1 = _mm512_load_ps(acc + 3 * 16);
    e2 = _mm512_load_ps(acc + 4 * 16);
    f2 = _mm512_load_ps(acc + 5 * 16);
    e3 = _mm512_load_ps(acc + 6 * 16);
    f3 = _mm512_load_ps(acc + 7 * 16);
    e4 = _mm512_load_ps(acc + 8 * 16);
    f4 = _mm512_load_ps(acc + 9 * 16);
    e5 = _mm512_load_ps(acc + 10 * 16);
    f5 = _mm512_load_ps(acc + 11 * 16);
    p = kc;
    (void)b2;
  }
#else
  for (; p + 4 <= kc; p += 4) {
    K_STEP2(a, b, b2, e0, e1, e2, e3, e4, e5, f0, f1, f2, f3, f4, f5);
    K_STEP2(a + MR, b + NR, b2 + NR, e0, e1, e2, e3, e4, e5, f0, f1, f2, f3, f4, f5);
    K_STEP2(a + 2 * MR, b + 2 * NR, b2 + 2 * NR, e0, e1, e2, e3, e4, e5, f0, f1, f2, f3, f4, f5);
    K_STEP2(a + 3 * MR, b + 3 * NR, b2 + 3 * NR, e0, e1, e2, e3, e4, e5, f0, f1, f2, f3, f4, f5);
    a += 4 * MR;
    b += 4 * NR;
    b2 += 4 * NR;
  }
#endif
  for (; p < kc; p++, a += MR, b += NR, b2 += NR) {
    K_STEP2(a, b, b2, e0, e1, e2, e3, e4, e5, f0, f1, f2, f3, f4, f5);
  }
  const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
  const int use_beta = beta != 0.0f;
  const int n2 = nr - NR; /* columns in the second sliver, 1..16 */
  const __mmask16 m = (__mmask16)0xFFFF;
  const __mmask16 m2 = n2 >= NR ? (__mmask16)0xFFFF : (__mmask16)((1u << n2) - 1u);
  store_row(c, e0, va, vb, use_beta, m);
  store_row(c + NR, f0, va, vb, use_beta, m2);
  if (mr > 1) {
    store_row(c + ldc, e1, va, vb, use_beta, m);
    store_row(c + ldc + NR, f1, va, vb, use_beta, m2);
  }
  if (mr > 2) {
    store_row(c + 2 * ldc, e2, va, vb, use_beta, m);
    store_row(c + 2 * ldc + NR, f2, va, vb, use_beta, m2);
  }
  if (mr > 3) {
    store_row(c + 3 * ldc, e3, va, vb, use_beta, m);
    store_row(c + 3 * ldc + NR, f3, va, vb, use_beta, m2);
  }
  if (mr > 4) {
    store_row(c + 4 * ldc, e4, va, vb, use_beta, m);
    store_row(c + 4 * ldc + NR, f4, va, vb, use_beta, m2);
  }
  if (mr > 5) {
    store_row(c + 5 * ldc, e5, va, vb, use_beta, m);
    store_row(c + 5 * ldc + NR, f5, va, vb, use_beta, m2);
  }
}

/* Stores an 8 x 32 tile from acc (row r in acc[32r .. 32r+31]): alpha*acc (+ beta*C), the
 * second 16 columns masked to nr - 16. */
static void store8x32(const float* acc, float* c, int64_t ldc, float alpha, float beta, int nr) {
  const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
  const int use_beta = beta != 0.0f;
  const int n2 = nr - NR; /* columns in the second sliver, 1..16 */
  const __mmask16 m2 = n2 >= NR ? (__mmask16)0xFFFF : (__mmask16)((1u << n2) - 1u);
  for (int r = 0; r < 8; r++) {
    store_row(c + r * ldc, _mm512_load_ps(acc + (2 * r) * 16), va, vb, use_beta, (__mmask16)0xFFFF);
    store_row(c + r * ldc + NR, _mm512_load_ps(acc + (2 * r + 1) * 16), va, vb, use_beta, m2);
  }
}

/* The 8-row pair kernels' accumulators: zmm0-15 zeroed before the k loop, spilled after. */
#define ACC16_ZERO \
  ACC12_ZERO "vmovaps %%zmm0, %%zmm12\n\t" "vmovaps %%zmm0, %%zmm13\n\t" \
  "vmovaps %%zmm0, %%zmm14\n\t" "vmovaps %%zmm0, %%zmm15\n\t"
#define ACC16_SPILL \
  ACC12_SPILL "vmovaps %%zmm12, 12*64(%[acc])\n\t" "vmovaps %%zmm13, 13*64(%[acc])\n\t" \
  "vmovaps %%zmm14, 14*64(%[acc])\n\t" "vmovaps %%zmm15, 15*64(%[acc])\n\t"
/* One row of one k step: broadcast A(r, p) from `ad` into zmm`s`, FMA it with the two B rows
 * (zmm16/17) into accumulators x and y. */
#define KS8_ROW(ad, x, y, s) \
  "vbroadcastss " ad ", %%zmm" #s "\n\t" \
  "vfmadd231ps %%zmm16, %%zmm" #s ", %%zmm" #x "\n\t" \
  "vfmadd231ps %%zmm17, %%zmm" #s ", %%zmm" #y "\n\t"
#define KS8_B(k) "vmovaps " #k "*64(%[b]), %%zmm16\n\t" "vmovaps " #k "*64(%[b],%[off]), %%zmm17\n\t"
#define A8_CLOBBERS                                                                         \
  "memory", "cc", "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8",   \
      "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15", "xmm16", "xmm17", "xmm18", \
      "xmm19", "xmm20", "xmm21"

void kiln_sgemm_ukr2_adirect8_avx512(int64_t kc, const float* a, int64_t lda, const float* b,
                                     float* c, int64_t ldc, float alpha, float beta, int nr) {
  for (int r = 0; r < 8; r++) {
    _mm_prefetch((const char*)(c + r * ldc), _MM_HINT_T0);
    _mm_prefetch((const char*)(c + r * ldc + 16), _MM_HINT_T0);
  }
  float acc[16 * 16] __attribute__((aligned(64)));
#if defined(__x86_64__)
  int64_t n4 = kc / 4, n1 = kc % 4;
  const int64_t off = (int64_t)sizeof(float) * NR * kc; /* b2 - b in bytes */
  const int64_t rs = (int64_t)sizeof(float) * lda, rs3 = 3 * rs;
  const float* a4 = a + 4 * lda;
#define KS(k)                                                                          \
  KS8_B(k)                                                                              \
  KS8_ROW(#k "*4(%[a])", 0, 1, 18) KS8_ROW(#k "*4(%[a],%[rs])", 2, 3, 19)              \
  KS8_ROW(#k "*4(%[a],%[rs],2)", 4, 5, 20) KS8_ROW(#k "*4(%[a],%[rs3])", 6, 7, 21)     \
  KS8_ROW(#k "*4(%[a4])", 8, 9, 18) KS8_ROW(#k "*4(%[a4],%[rs])", 10, 11, 19)          \
  KS8_ROW(#k "*4(%[a4],%[rs],2)", 12, 13, 20) KS8_ROW(#k "*4(%[a4],%[rs3])", 14, 15, 21)
  __asm__ volatile(
      ACC16_ZERO
      "test %[n4], %[n4]\n\t"
      "jz 2f\n\t"
      "1:\n\t"
      "prefetcht0 512(%[b])\n\t"
      "prefetcht0 512(%[b],%[off])\n\t"
      KS(0) KS(1) KS(2) KS(3)
      "add $16, %[a]\n\t"
      "add $16, %[a4]\n\t"
      "add $256, %[b]\n\t"
      "dec %[n4]\n\t"
      "jnz 1b\n\t"
      "2:\n\t"
      "test %[n1], %[n1]\n\t"
      "jz 4f\n\t"
      "3:\n\t"
      KS(0)
      "add $4, %[a]\n\t"
      "add $4, %[a4]\n\t"
      "add $64, %[b]\n\t"
      "dec %[n1]\n\t"
      "jnz 3b\n\t"
      "4:\n\t"
      ACC16_SPILL
      : [a] "+r"(a), [a4] "+r"(a4), [b] "+r"(b), [n4] "+r"(n4), [n1] "+r"(n1)
      : [off] "r"(off), [acc] "r"(acc), [rs] "r"(rs), [rs3] "r"(rs3)
      : A8_CLOBBERS);
#undef KS
#else
  const float* b2 = b + NR * kc;
  __m512 e[8], f[8];
  for (int r = 0; r < 8; r++) e[r] = f[r] = _mm512_setzero_ps();
  for (int64_t p = 0; p < kc; p++) {
    const __m512 b_ = _mm512_load_ps(b + p * NR), c_ = _mm512_load_ps(b2 + p * NR);
    for (int r = 0; r < 8; r++) {
      const __m512 s_ = _mm512_set1_ps(a[r * lda + p]);
      e[r] = _mm512_fmadd_ps(s_, b_, e[r]);
      f[r] = _mm512_fmadd_ps(s_, c_, f[r]);
    }
  }
  for (int r = 0; r < 8; r++) {
    _mm512_store_ps(acc + (2 * r) * 16, e[r]);
    _mm512_store_ps(acc + (2 * r + 1) * 16, f[r]);
  }
#endif
  store8x32(acc, c, ldc, alpha, beta, nr);
}

/* One full B sliver from a transposed source (kiln_gemm_pack_b_trans_avx2's contract): 16 rows
 * x 16 k steps per 16x16 register transpose, each result a whole 64-byte row of the sliver; the
 * next block of every source row is prefetched (the weights come from L3 on most calls). The
 * last kc % 16 steps go through the AVX2 packer's 8x8 path and scalar tail. */
void kiln_gemm_pack_b_trans_avx512(float* dst, const float* bt, int64_t ld, int64_t kc) {
  int64_t p = 0;
  for (; p + 16 <= kc; p += 16) {
    __m512 r[16], t[16];
    for (int j = 0; j < 16; j++) {
      const float* src = bt + j * ld + p;
      _mm_prefetch((const char*)(src + 32), _MM_HINT_T0);
      _mm_prefetch((const char*)(src + 16 * ld), _MM_HINT_T1); /* the next sliver's rows */
      r[j] = _mm512_loadu_ps(src);
    }
    for (int j = 0; j < 16; j += 2) { /* 2x2 blocks of single floats */
      t[j] = _mm512_unpacklo_ps(r[j], r[j + 1]);
      t[j + 1] = _mm512_unpackhi_ps(r[j], r[j + 1]);
    }
    for (int j = 0; j < 16; j += 4) { /* 4x4 blocks */
      r[j] = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t[j]), _mm512_castps_pd(t[j + 2])));
      r[j + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t[j]), _mm512_castps_pd(t[j + 2])));
      r[j + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t[j + 1]), _mm512_castps_pd(t[j + 3])));
      r[j + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t[j + 1]), _mm512_castps_pd(t[j + 3])));
    }
    /* r[4g + q] holds, in each 128-bit lane L, k step 4L + q's values of rows 4g..4g+3 */
    for (int q = 0; q < 4; q++) { /* gather the four row groups' lanes */
      const __m512 a01 = _mm512_shuffle_f32x4(r[q], r[4 + q], 0x44);       /* lanes 0,1 of g0 | g1 */
      const __m512 a23 = _mm512_shuffle_f32x4(r[8 + q], r[12 + q], 0x44);  /* lanes 0,1 of g2 | g3 */
      const __m512 b01 = _mm512_shuffle_f32x4(r[q], r[4 + q], 0xEE);       /* lanes 2,3 of g0 | g1 */
      const __m512 b23 = _mm512_shuffle_f32x4(r[8 + q], r[12 + q], 0xEE);  /* lanes 2,3 of g2 | g3 */
      /* k = q: lane 0 of each group; k = 4 + q: lane 1; k = 8 + q: lane 2; k = 12 + q: lane 3 */
      _mm512_store_ps(dst + (p + q) * NR, _mm512_shuffle_f32x4(a01, a23, 0x88));
      _mm512_store_ps(dst + (p + 4 + q) * NR, _mm512_shuffle_f32x4(a01, a23, 0xDD));
      _mm512_store_ps(dst + (p + 8 + q) * NR, _mm512_shuffle_f32x4(b01, b23, 0x88));
      _mm512_store_ps(dst + (p + 12 + q) * NR, _mm512_shuffle_f32x4(b01, b23, 0xDD));
    }
  }
  if (p < kc) kiln_gemm_pack_b_trans_avx2(dst + p * NR, bt + p, ld, kc - p);
}
