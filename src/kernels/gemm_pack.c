/* SPDX-License-Identifier: Apache-2.0 */
/* gemm_pack.c - GEMM packing from strided f32/f16/bf16 operands, the portable scalar
 * micro-kernels, the fused epilogue and the simple blocked f64 GEMM. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/gemm_internal.h"
#include "kernels/half.h"
#include "kiln/allocator.h"

#define MR KILN_GEMM_MR
#define NR KILN_GEMM_NR

/* d[i*ds] = (float)s[i*ss] for i < n, converting from `dtype`. */
static void gather(float* d, int64_t ds, const void* s, int64_t ss, int64_t n, kiln_dtype_t dtype) {
  if (dtype == KILN_DTYPE_F32) {
    const float* f = s;
    if (ds == 1 && ss == 1) {
      memcpy(d, f, (size_t)n * sizeof(float));
    } else if (ds == 1) {
      for (int64_t i = 0; i < n; i++) d[i] = f[i * ss];
    } else {
      for (int64_t i = 0; i < n; i++) d[i * ds] = f[i * ss];
    }
  } else if (dtype == KILN_DTYPE_F16) {
    const uint16_t* h = s;
    for (int64_t i = 0; i < n; i++) d[i * ds] = kiln_f16_to_f32(h[i * ss]);
  } else {
    const uint16_t* h = s;
    for (int64_t i = 0; i < n; i++) d[i * ds] = kiln_bf16_to_f32(h[i * ss]);
  }
}

/* Address of element (i, j) of a source. */
static const void* src_at(const kiln_gemm_src_t* s, int64_t i, int64_t j) {
  size_t es = s->dtype == KILN_DTYPE_F32 ? 4 : 2;
  return (const char*)s->p + (i * s->rs + j * s->cs) * (int64_t)es;
}

static int64_t abs64(int64_t x) { return x < 0 ? -x : x; }

/* Packs A rows [i0, i0+mc) x [p0, p0+kc) into MR-row slivers (see gemm_internal.h). */
void kiln_gemm_pack_a(float* dst, const kiln_gemm_src_t* a, int64_t i0, int64_t p0, int64_t mc,
                      int64_t kc) {
  const int f32 = a->dtype == KILN_DTYPE_F32;
  if (f32 && a->rs == 1) {
    /* Transposed (A^T row-major): k steps are contiguous runs over the block's rows; walk 16
     * of them per sliver so the source lines are reused from L1. A last partial sliver is
     * padded with zeros. */
    for (int64_t pb = 0; pb < kc; pb += 16) {
      const int64_t pe = pb + 16 < kc ? pb + 16 : kc;
      for (int64_t s = 0; s < mc; s += MR) {
        float* d = dst + s * kc + pb * MR;
        const float* col = src_at(a, i0 + s, p0 + pb);
        if (mc - s >= MR) {
          for (int64_t p = pb; p < pe; p++, col += a->cs, d += MR)
            memcpy(d, col, MR * sizeof(float)); /* fixed size: inlined as two moves */
        } else {
          const int mr = (int)(mc - s);
          for (int64_t p = pb; p < pe; p++, col += a->cs, d += MR)
            for (int r = 0; r < MR; r++) d[r] = r < mr ? col[r] : 0.0f;
        }
      }
    }
    return;
  }
  for (int64_t s = 0; s < mc; s += MR) {
    const int mr = (int)(mc - s < MR ? mc - s : MR);
    float* d = dst + s * kc;
    if (f32 && a->cs == 1 && mr == MR) { /* row-major: six read streams, one write stream */
      const float* r0 = src_at(a, i0 + s, p0);
      const int64_t rs = a->rs;
      for (int64_t p = 0; p < kc; p++, d += MR) {
        d[0] = r0[p];
        d[1] = r0[rs + p];
        d[2] = r0[2 * rs + p];
        d[3] = r0[3 * rs + p];
        d[4] = r0[4 * rs + p];
        d[5] = r0[5 * rs + p];
      }
      continue;
    }
    if (abs64(a->rs) < abs64(a->cs)) { /* column-major-ish: one k step (MR values) at a time */
      for (int64_t p = 0; p < kc; p++) {
        gather(d + p * MR, 1, src_at(a, i0 + s, p0 + p), a->rs, mr, a->dtype);
        for (int r = mr; r < MR; r++) d[p * MR + r] = 0.0f;
      }
    } else {
      for (int r = 0; r < mr; r++) gather(d + r, MR, src_at(a, i0 + s + r, p0), a->cs, kc, a->dtype);
      for (int r = mr; r < MR; r++)
        for (int64_t p = 0; p < kc; p++) d[p * MR + r] = 0.0f;
    }
  }
}

#define PACK_B_GROUP 16 /* slivers per row sweep: 1 KB contiguous reads, 16 write streams */

/* kiln_gemm_pack_b of a B stacked from weight blocks (b->nblk > 0): runs of whole slivers inside
 * one block are packed from that block as a transposed source; a sliver that straddles blocks
 * is gathered column by column. Same packed values as packing the concatenated weight. */
static void pack_b_blocks(float* dst, const kiln_gemm_src_t* b, int64_t p0, int64_t j0, int64_t kc,
                          int64_t nc, int avx2) {
  int s = 0;
  int64_t lo = 0; /* block s holds columns [lo, lo + blk[s].n) of B */
  for (int64_t j = 0; j < nc;) {
    while (j0 + j >= lo + b->blk[s].n) lo += b->blk[s++].n;
    const int64_t end = lo + b->blk[s].n - j0; /* relative column where block s ends */
    int64_t run = (end < nc ? end : nc) - j;
    if (run >= NR || j + run == nc) {
      if (j + run < nc) run = run / NR * NR; /* stop at the last whole sliver in the block */
      const kiln_gemm_src_t one = {b->blk[s].w, 1, b->blk[s].ld, KILN_DTYPE_F32, NULL, 0};
      kiln_gemm_pack_b(dst + j * kc, &one, p0, j0 + j - lo, kc, run, avx2);
      j += run;
      continue;
    }
    const int64_t nr = nc - j < NR ? nc - j : NR;
    float* d = dst + j * kc;
    int t = s;
    int64_t tlo = lo;
    for (int64_t q = 0; q < NR; q++) {
      if (q >= nr) {
        for (int64_t p = 0; p < kc; p++) d[p * NR + q] = 0.0f;
        continue;
      }
      while (j0 + j + q >= tlo + b->blk[t].n) tlo += b->blk[t++].n;
      const float* col = b->blk[t].w + (j0 + j + q - tlo) * b->blk[t].ld + p0;
      for (int64_t p = 0; p < kc; p++) d[p * NR + q] = col[p];
    }
    j += nr;
  }
}

/* Packs B rows [p0, p0+kc) x cols [j0, j0+nc) into NR-column slivers. */
void kiln_gemm_pack_b(float* dst, const kiln_gemm_src_t* b, int64_t p0, int64_t j0, int64_t kc,
                      int64_t nc, int avx2) {
  if (b->nblk > 0) {
    pack_b_blocks(dst, b, p0, j0, kc, nc, avx2);
    return;
  }
  int64_t s0 = 0;
  if (b->dtype == KILN_DTYPE_F32 && b->rs == 1 && b->cs != 1) {
    /* Transposed (B^T row-major): full slivers by 8x8 register transposes, or 16-deep blocks
     * of the 16 source rows so each source line is used while in L1. */
    const int64_t full = nc / NR * NR;
    for (; s0 < full; s0 += NR) {
      const float* bt = src_at(b, p0, j0 + s0);
      float* d = dst + s0 * kc;
      if (avx2) {
        if (kiln_cpu_has_avx512()) kiln_gemm_pack_b_trans_avx512(d, bt, b->cs, kc);
        else kiln_gemm_pack_b_trans_avx2(d, bt, b->cs, kc);
        continue;
      }
      for (int64_t pb = 0; pb < kc; pb += 16) {
        const int64_t pe = pb + 16 < kc ? pb + 16 : kc;
        for (int j = 0; j < NR; j++) {
          const float* col = bt + j * b->cs;
          for (int64_t p = pb; p < pe; p++) d[p * NR + j] = col[p];
        }
      }
    }
  } else if (b->dtype == KILN_DTYPE_F32 && b->cs == 1) {
    /* Row-major: sweep rows over a group of full slivers so reads stay sequential. */
    const int64_t full = nc / NR * NR;
    for (; s0 < full; s0 += PACK_B_GROUP * NR) {
      const int64_t s1 = s0 + PACK_B_GROUP * NR < full ? s0 + PACK_B_GROUP * NR : full;
      const float* row = src_at(b, p0, j0 + s0);
      for (int64_t p = 0; p < kc; p++, row += b->rs) {
        float* d = dst + s0 * kc + p * NR;
        for (int64_t s = s0; s < s1; s += NR, d += NR * kc) memcpy(d, row + (s - s0), NR * sizeof(float));
      }
    }
    s0 = full;
  }
  for (int64_t s = s0; s < nc; s += NR) {
    const int nr = (int)(nc - s < NR ? nc - s : NR);
    float* d = dst + s * kc;
    if (abs64(b->cs) <= abs64(b->rs)) { /* row-major-ish: copy NR contiguous values per k */
      for (int64_t p = 0; p < kc; p++) {
        gather(d + p * NR, 1, src_at(b, p0 + p, j0 + s), b->cs, nr, b->dtype);
        for (int j = nr; j < NR; j++) d[p * NR + j] = 0.0f;
      }
    } else { /* transposed: walk each column along k */
      for (int j = 0; j < nr; j++) gather(d + j, NR, src_at(b, p0, j0 + s + j), b->rs, kc, b->dtype);
      for (int j = nr; j < NR; j++)
        for (int64_t p = 0; p < kc; p++) d[p * NR + j] = 0.0f;
    }
  }
}

/* Stores alpha*acc + beta*C for the valid part of a tile. */
static void store_tile(float acc[MR][NR], float* c, int64_t ldc, float alpha, float beta, int mr,
                       int nr) {
  for (int r = 0; r < mr; r++) {
    float* row = c + r * ldc;
    if (beta == 0.0f) {
      for (int j = 0; j < nr; j++) row[j] = alpha * acc[r][j];
    } else {
      for (int j = 0; j < nr; j++) row[j] = alpha * acc[r][j] + beta * row[j];
    }
  }
}

/* Portable packed micro-kernel. */
void kiln_sgemm_ukr_generic(int64_t kc, const float* a, const float* b, float* c, int64_t ldc,
                            float alpha, float beta, int mr, int nr) {
  float acc[MR][NR];
  memset(acc, 0, sizeof(acc));
  for (int64_t p = 0; p < kc; p++, a += MR, b += NR) {
    for (int r = 0; r < MR; r++) {
      const float ar = a[r];
      for (int j = 0; j < NR; j++) acc[r][j] += ar * b[j];
    }
  }
  store_tile(acc, c, ldc, alpha, beta, mr, nr);
}

/* Portable unpacked micro-kernel. */
void kiln_sgemm_ukr_strided_generic(int64_t k, const float* a, int64_t rs_a, int64_t cs_a,
                                    const float* b, int64_t rs_b, float* c, int64_t ldc,
                                    float alpha, float beta, int mr, int nr) {
  float acc[MR][NR];
  memset(acc, 0, sizeof(acc));
  for (int64_t p = 0; p < k; p++, b += rs_b) {
    for (int r = 0; r < mr; r++) {
      const float ar = a[r * rs_a + p * cs_a];
      for (int j = 0; j < nr; j++) acc[r][j] += ar * b[j];
    }
  }
  store_tile(acc, c, ldc, alpha, beta, mr, nr);
}

static int act_unary_op(int activation) {
  switch (activation) {
    case KILN_GEMM_ACT_RELU: return KILN_UNARY_RELU;
    case KILN_GEMM_ACT_GELU: return KILN_UNARY_GELU;
    case KILN_GEMM_ACT_GELU_TANH: return KILN_UNARY_GELU_TANH;
    case KILN_GEMM_ACT_SILU: return KILN_UNARY_SILU;
    default: return -1;
  }
}

kiln_status_t kiln_gemm_resolve_act(kiln_sgemm_problem_t* pr) {
  pr->act = NULL;
  memset(&pr->act_args, 0, sizeof pr->act_args);
  if (pr->ep == NULL) return KILN_OK;
  /* the kernels eager add / mul run (ISA-specific), alpha 1 */
  kiln_ew_desc_t d;
  KILN_RETURN_IF_ERROR(kiln_binary_desc(KILN_BINARY_ADD, NULL, 1.0, KILN_DTYPE_F32, &d));
  pr->add = pr->join = d.kernel;
  pr->join_args = d.args;
  if (pr->ep->residual_op == KILN_GEMM_RESIDUAL_MUL) {
    KILN_RETURN_IF_ERROR(kiln_binary_desc(KILN_BINARY_MUL, NULL, 1.0, KILN_DTYPE_F32, &d));
    pr->join = d.kernel;
  }
  if (pr->ep->activation == KILN_GEMM_ACT_NONE) return KILN_OK;
  const int op = act_unary_op(pr->ep->activation);
  if (op < 0)
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "kiln_sgemm_ex: unknown activation %d",
                      pr->ep->activation);
  KILN_RETURN_IF_ERROR(kiln_unary_desc((kiln_unary_op_t)op, NULL, KILN_DTYPE_F32, &d));
  pr->act = d.kernel;
  pr->act_args = d.args;
  return KILN_OK;
}

/* Applies bias, activation and residual to one tile of C, each as the f32 element kernel of
 * the op on a row (in place: vectorized, and the bits of the standalone ops). */
void kiln_gemm_epilogue_tile(const kiln_sgemm_problem_t* pr, float* c, int64_t i0, int64_t j0,
                             int64_t mr, int64_t nr) {
  const kiln_gemm_epilogue_t* ep = pr->ep;
  for (int64_t r = 0; r < mr; r++) {
    float* row = c + r * pr->ldc;
    if (ep->bias != NULL) {
      if (ep->bias_axis == 0) {
        const float bv = ep->bias[i0 + r];
        for (int64_t j = 0; j < nr; j++) row[j] += bv;
      } else {
        const void* src[2] = {row, ep->bias + j0};
        (void)pr->add(nr, row, src, &pr->join_args);
      }
    }
    if (pr->act != NULL) {
      const void* src[1] = {row};
      (void)pr->act(nr, row, src, &pr->act_args);
    }
    if (ep->residual != NULL) {
      const void* src[2] = {row, ep->residual + (i0 + r) * ep->ldr + j0};
      (void)pr->join(nr, row, src, &pr->join_args);
    }
  }
}

/* ---- f64: pack blocks contiguously, then a plain i-p-j loop the compiler vectorizes -------- */

#define DMB 64
#define DKB 256
#define DNB 512

/* C = alpha*A*B + beta*C in f64 on strided operands. */
kiln_status_t kiln_dgemm_strided(int64_t m, int64_t n, int64_t k, double alpha, const double* a,
                                 int64_t rs_a, int64_t cs_a, const double* b, int64_t rs_b,
                                 int64_t cs_b, double beta, double* c, int64_t rs_c, int64_t cs_c) {
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < n; j++) {
      double* cij = c + i * rs_c + j * cs_c;
      *cij = beta == 0.0 ? 0.0 : beta * *cij;
    }
  if (k == 0 || alpha == 0.0 || m == 0 || n == 0) return KILN_OK;
  double* ablk = kiln_allocator_alloc(NULL, sizeof(double) * (DMB * DKB + DKB * DNB + DNB), 64);
  if (ablk == NULL) return kiln_error(KILN_ERROR_OUT_OF_MEMORY, "kiln_dgemm: out of memory");
  double* bblk = ablk + DMB * DKB;
  double* acc = bblk + DKB * DNB;
  for (int64_t j0 = 0; j0 < n; j0 += DNB) {
    const int64_t nb = n - j0 < DNB ? n - j0 : DNB;
    for (int64_t p0 = 0; p0 < k; p0 += DKB) {
      const int64_t kb = k - p0 < DKB ? k - p0 : DKB;
      for (int64_t p = 0; p < kb; p++)
        for (int64_t j = 0; j < nb; j++) bblk[p * nb + j] = b[(p0 + p) * rs_b + (j0 + j) * cs_b];
      for (int64_t i0 = 0; i0 < m; i0 += DMB) {
        const int64_t mb = m - i0 < DMB ? m - i0 : DMB;
        for (int64_t i = 0; i < mb; i++)
          for (int64_t p = 0; p < kb; p++) ablk[i * kb + p] = a[(i0 + i) * rs_a + (p0 + p) * cs_a];
        for (int64_t i = 0; i < mb; i++) {
          for (int64_t j = 0; j < nb; j++) acc[j] = 0.0;
          for (int64_t p = 0; p < kb; p++) {
            const double av = ablk[i * kb + p];
            const double* brow = bblk + p * nb;
            for (int64_t j = 0; j < nb; j++) acc[j] += av * brow[j];
          }
          double* crow = c + (i0 + i) * rs_c + j0 * cs_c;
          for (int64_t j = 0; j < nb; j++) crow[j * cs_c] += alpha * acc[j];
        }
      }
    }
  }
  kiln_allocator_free(NULL, ablk);
  return KILN_OK;
}
