/* SPDX-License-Identifier: Apache-2.0 */
/* attention.c - scaled dot-product attention, flash style, forward and backward.
 *
 * Forward: one task per (batch, head, block of SDPA_BR queries). The task streams blocks of
 * SDPA_BC keys: S = Q K^T (dot-product micro-kernel), scale + mask, an online softmax that
 * rescales the running row max / row sum / output accumulator, then O += P V (broadcast-FMA
 * micro-kernel). Causal blocks above the diagonal are never visited. f32 operands whose rows are
 * unit-stride are read in place; others (f16/bf16, strided rows) are converted per block.
 *
 * Backward (FlashAttention-2): D = rowsum(dO * O) first; then one task per (batch, kv head, key
 * block) accumulates dK, dV over all query blocks (and every query head of its group), and one
 * task per (batch, head, query block) accumulates dQ over the key blocks. Each recomputes
 * P = exp(S - logsumexp) block by block, so no L x S matrix exists and every gradient element is
 * summed by one thread in a fixed order (deterministic). f64 runs a row-at-a-time double path. */
#include <math.h>
#include <string.h>

#include "kernels/nn_internal.h"
#include "kiln/allocator.h"
#include "kiln/kernels/nn.h"
#include "kiln/parallel.h"

#define SDPA_BR 64
#define SDPA_BC 64

/* A [B, H, rows, cols] operand. */
typedef struct t4 {
  char* p;
  int64_t s[4];
  int64_t esize;
  kiln_dtype_t dt;
} t4_t;

typedef struct sdpa_ctx {
  int64_t B, H, Hk, L, S, E, Ev, group;
  float scale;
  double scale_d;
  int causal;
  t4_t q, k, v, o, go, gq, gk, gv;
  int has_o, has_gq, has_gk, has_gv;
  /* mask, broadcast to [B, H, L, S] (strides 0 where broadcast) */
  const char* mp;
  kiln_dtype_t mdt;
  int64_t ms[4];
  int has_mask, mask_bool;
  /* logsumexp [B, H, L] */
  char* lp;
  kiln_dtype_t ldt;
  int64_t ls[3];
  int has_lse;
  float* D; /* backward: rowsum(dO * O), [B*H*L] */
  int64_t br, bc, nqb, nkb;
  kiln_nn_scratch_t scratch;
} sdpa_ctx_t;

static void t4_init(t4_t* t, const kiln_tensor_t* x) {
  t->p = x->data;
  for (int d = 0; d < 4; d++) t->s[d] = x->strides[d];
  t->dt = x->dtype;
  t->esize = (int64_t)kiln_dtype_size(x->dtype);
}

static inline char* t4_row(const t4_t* t, int64_t b, int64_t h, int64_t r) {
  return t->p + (b * t->s[0] + h * t->s[1] + r * t->s[2]) * t->esize;
}

/* Rows [r0, r0+nr) of t at (b, h) as f32 with leading dim *ld: in place when f32 with unit column
 * stride, else converted into buf (nr x cols, ld = cols). */
static const float* block_in(const t4_t* t, int64_t b, int64_t h, int64_t r0, int64_t nr,
                             int64_t cols, float* buf, int64_t* ld) {
  if (t->dt == KILN_DTYPE_F32 && (t->s[3] == 1 || cols <= 1)) {
    *ld = t->s[2];
    return (const float*)t4_row(t, b, h, r0);
  }
  for (int64_t r = 0; r < nr; r++)
    kiln_nn_load_strided(t4_row(t, b, h, r0 + r), t->dt, t->s[3], cols, buf + r * cols);
  *ld = cols;
  return buf;
}

/* The same rows transposed into dst (cols x nr, leading dim ldd); buf is conversion scratch. */
static const float* block_t(const kiln_nn_ops_t* ops, const t4_t* t, int64_t b, int64_t h,
                            int64_t r0, int64_t nr, int64_t cols, float* buf, float* dst,
                            int64_t ldd) {
  int64_t ld;
  const float* src = block_in(t, b, h, r0, nr, cols, buf, &ld);
  ops->transpose(nr, cols, src, ld, dst, ldd);
  return dst;
}

static void block_out(const t4_t* t, int64_t b, int64_t h, int64_t r0, int64_t nr, int64_t cols,
                      const float* src, int64_t ld) {
  for (int64_t r = 0; r < nr; r++)
    kiln_nn_store_strided(src + r * ld, cols, t->dt, t4_row(t, b, h, r0 + r), t->s[3]);
}

static inline char* lse_ptr(const sdpa_ctx_t* c, int64_t b, int64_t h, int64_t i) {
  return c->lp + (b * c->ls[0] + h * c->ls[1] + i * c->ls[2]) * (int64_t)kiln_dtype_size(c->ldt);
}

/* Applies mask and causality to the scaled scores s[0, nj) of query i against keys j0... */
static void mask_fixup(const sdpa_ctx_t* c, float* s, int64_t b, int64_t h, int64_t i,
                       int64_t j0, int64_t nj) {
  if (c->has_mask) {
    const char* m = c->mp + b * c->ms[0] + h * c->ms[1] + i * c->ms[2] + j0 * c->ms[3];
    const int64_t ms = c->ms[3];
    if (c->mask_bool) {
      for (int64_t t = 0; t < nj; t++)
        if (!m[t * ms]) s[t] = -INFINITY;
    } else if (c->mdt == KILN_DTYPE_F32 && ms == (int64_t)sizeof(float)) {
      const float* mf = (const float*)m;
      for (int64_t t = 0; t < nj; t++) s[t] += mf[t];
    } else {
      for (int64_t t = 0; t < nj; t++) s[t] += kiln_nn_getf(m + t * ms, c->mdt);
    }
  }
  if (c->causal && j0 + nj - 1 > i)
    for (int64_t t = i + 1 - j0 > 0 ? i + 1 - j0 : 0; t < nj; t++) s[t] = -INFINITY;
}

/* ---- forward (f32 compute) ----------------------------------------------------------------- */

/* Rows per strip of a block that crosses the causal diagonal (the small GEMM's row tile). */
#define SDPA_STRIP 6

/* Keys of block [j0, j0+nj) that query i may see under causality (clamped to [0, nj]). */
static inline int64_t causal_keys(int64_t i, int64_t j0, int64_t nj) {
  const int64_t n = i + 1 - j0;
  return n < 0 ? 0 : n > nj ? nj : n;
}

/* Online-softmax update of one query row: s[0, n) are its scaled scores against the block
 * (turned into P in place), m / l its running max and sum, o its output accumulator. */
static inline void fwd_row(const kiln_nn_ops_t* ops, float* s, int64_t n, float* m, float* l,
                           float* o, int64_t Ev) {
  const float mx = ops->max(s, n);
  const float mnew = mx > *m ? mx : *m;
  if (mnew == -INFINITY) { /* every key so far masked: P = 0 */
    memset(s, 0, sizeof(float) * (size_t)n);
    return;
  }
  const float alpha = expf(*m - mnew);
  *l = *l * alpha + ops->exp_sum(s, mnew, s, n);
  if (alpha != 1.0f) ops->affine(o, alpha, 0.0f, o, Ev);
  *m = mnew;
}

static void fwd_tasks(void* arg, int64_t t0, int64_t t1, int tid) {
  const sdpa_ctx_t* c = arg;
  const kiln_nn_ops_t* ops = kiln_nn_ops();
  _Alignas(64) char stack[KILN_NN_STACK_BYTES];
  char* mem = kiln_nn_scratch_get(&c->scratch, tid, stack);
  const int64_t E = c->E, Ev = c->Ev, br = c->br, bc = c->bc;
  float* qbuf = (float*)mem;
  float* kbuf = qbuf + br * E;
  float* ktbuf = kbuf + bc * E;
  float* vbuf = ktbuf + bc * E;
  float* sb = vbuf + bc * Ev;
  float* acc = sb + br * bc;
  float* mrow = acc + br * Ev;
  float* lrow = mrow + br;
  for (int64_t t = t0; t < t1; t++) {
    /* causal: the last query blocks see the most keys, so they are handed out first (the
     * threads then finish together); every task's rows are its own, results do not change */
    const int64_t nbh = c->B * c->H, qb = c->nqb - 1 - t / nbh, bh = t % nbh, b = bh / c->H, h = bh % c->H;
    const int64_t hk = h / c->group;
    const int64_t i0 = qb * br, ni = c->L - i0 < br ? c->L - i0 : br;
    int64_t ldq, ldv;
    const float* Q = block_in(&c->q, b, h, i0, ni, E, qbuf, &ldq);
    for (int64_t r = 0; r < ni; r++) {
      mrow[r] = -INFINITY;
      lrow[r] = 0.0f;
    }
    memset(acc, 0, sizeof(float) * (size_t)(ni * Ev));
    const int64_t kend = c->causal ? (c->S < i0 + ni ? c->S : i0 + ni) : c->S;
    for (int64_t j0 = 0; j0 < kend; j0 += bc) {
      const int64_t nj = kend - j0 < bc ? kend - j0 : bc;
      const float* Kt = block_t(ops, &c->k, b, hk, j0, nj, E, kbuf, ktbuf, bc);
      const float* V = block_in(&c->v, b, hk, j0, nj, Ev, vbuf, &ldv);
      /* A block that crosses the diagonal runs in strips of rows, each against only the keys
       * its last row sees (S, the softmax and P V skip the causally masked part); any other
       * block is one strip of all its rows and keys. */
      const int diag = c->causal && j0 + nj - 1 > i0;
      const int64_t strip = diag ? SDPA_STRIP : ni;
      for (int64_t r0 = 0; r0 < ni; r0 += strip) {
        const int64_t nr = ni - r0 < strip ? ni - r0 : strip;
        const int64_t nmax = diag ? causal_keys(i0 + r0 + nr - 1, j0, nj) : nj;
        if (nmax == 0) continue; /* the whole strip masked: nothing changes */
        ops->gemm(nr, nmax, E, c->scale, Q + r0 * ldq, ldq, 1, Kt, bc, sb + r0 * bc, bc, 0);
        for (int64_t r = r0; r < r0 + nr; r++) {
          float* s = sb + r * bc;
          const int64_t n = diag ? causal_keys(i0 + r, j0, nj) : nj;
          if (n > 0) {
            mask_fixup(c, s, b, h, i0 + r, j0, n);
            fwd_row(ops, s, n, mrow + r, lrow + r, acc + r * Ev, Ev);
          }
          memset(s + n, 0, sizeof(float) * (size_t)(nmax - n));
        }
        ops->gemm(nr, Ev, nmax, 1.0f, sb + r0 * bc, bc, 1, V, ldv, acc + r0 * Ev, Ev, 1);
      }
    }
    for (int64_t r = 0; r < ni; r++) {
      float* o = acc + r * Ev;
      float lse = 0.0f; /* fully masked row: out 0, logsumexp 0 (torch) */
      if (lrow[r] > 0.0f) {
        ops->affine(o, 1.0f / lrow[r], 0.0f, o, Ev);
        if (c->has_lse) lse = mrow[r] + logf(lrow[r]); /* (inference has no use for it) */
      } else if (lrow[r] == 0.0f) {
        memset(o, 0, sizeof(float) * (size_t)Ev);
      } else { /* NaN */
        ops->affine(o, lrow[r], 0.0f, o, Ev);
        lse = lrow[r];
      }
      if (c->has_lse) kiln_nn_setf(lse_ptr(c, b, h, i0 + r), c->ldt, lse);
    }
    block_out(&c->o, b, h, i0, ni, Ev, acc, Ev);
  }
}

/* ---- backward (f32 compute) ---------------------------------------------------------------- */

static void bwd_delta_rows(void* arg, int64_t r0, int64_t r1, int tid) {
  (void)tid;
  const sdpa_ctx_t* c = arg;
  const kiln_nn_ops_t* ops = kiln_nn_ops();
  _Alignas(64) float a[256], bb[256];
  for (int64_t r = r0; r < r1; r++) {
    const int64_t i = r % c->L, bh = r / c->L, b = bh / c->H, h = bh % c->H;
    const char* gp = t4_row(&c->go, b, h, i);
    const char* op = t4_row(&c->o, b, h, i);
    float s = 0;
    for (int64_t e0 = 0; e0 < c->Ev; e0 += 256) {
      const int64_t n = c->Ev - e0 < 256 ? c->Ev - e0 : 256;
      kiln_nn_load_strided(gp + e0 * c->go.s[3] * c->go.esize, c->go.dt, c->go.s[3], n, a);
      kiln_nn_load_strided(op + e0 * c->o.s[3] * c->o.esize, c->o.dt, c->o.s[3], n, bb);
      s += ops->dot(a, bb, n);
    }
    c->D[r] = s;
  }
}

/* P (probabilities) and dS = P * (dP - D) for queries [i0, i0+ni) x keys [j0, j0+nj) of (b, h),
 * both ni x nj with leading dim bc; Kt / Vt are the key / value blocks transposed (ld bc). A
 * block that crosses the causal diagonal runs in strips of rows against only the keys the strip
 * sees; the causally masked rest of each row is zero. Returns 1 for such a block. */
static int bwd_block(const sdpa_ctx_t* c, const kiln_nn_ops_t* ops, int64_t b, int64_t h,
                     int64_t i0, int64_t ni, int64_t j0, int64_t nj, const float* Q, int64_t ldq,
                     const float* dO, int64_t lddo, const float* Kt, const float* Vt, float* P,
                     float* dS) {
  const int64_t bc = c->bc;
  const int diag = c->causal && j0 + nj - 1 > i0;
  const int64_t strip = diag ? SDPA_STRIP : ni;
  for (int64_t r0 = 0; r0 < ni; r0 += strip) {
    const int64_t nr = ni - r0 < strip ? ni - r0 : strip;
    const int64_t nmax = diag ? causal_keys(i0 + r0 + nr - 1, j0, nj) : nj;
    if (nmax > 0) {
      ops->gemm(nr, nmax, c->E, c->scale, Q + r0 * ldq, ldq, 1, Kt, bc, P + r0 * bc, bc, 0);
      ops->gemm(nr, nmax, c->Ev, 1.0f, dO + r0 * lddo, lddo, 1, Vt, bc, dS + r0 * bc, bc, 0);
    }
    for (int64_t r = r0; r < r0 + nr; r++) {
      float* p = P + r * bc;
      float* ds = dS + r * bc;
      const int64_t n = diag ? causal_keys(i0 + r, j0, nj) : nj;
      if (n > 0) {
        mask_fixup(c, p, b, h, i0 + r, j0, n);
        const float lse = kiln_nn_getf(lse_ptr(c, b, h, i0 + r), c->ldt);
        if (lse == -INFINITY)
          memset(p, 0, sizeof(float) * (size_t)n);
        else
          ops->exp_sum(p, lse, p, n);
        ops->softmax_bwd(ds, p, c->D[(b * c->H + h) * c->L + i0 + r], ds, n);
      }
      if (n < nj) {
        memset(p + n, 0, sizeof(float) * (size_t)(nj - n));
        memset(ds + n, 0, sizeof(float) * (size_t)(nj - n));
      }
    }
  }
  return diag;
}

/* acc (nj x ny, ld ny) += alpha * X^T Y for X = P or dS of a block (ni x nj, ld bc) and Y the
 * block's dO or Q rows (ni x ny, ld ldy): dV and dK. On a diagonal block each strip of keys
 * starts at the first query that sees it. */
static void bwd_acc_kv(const sdpa_ctx_t* c, const kiln_nn_ops_t* ops, int diag, int64_t i0,
                       int64_t ni, int64_t j0, int64_t nj, const float* X, const float* Y,
                       int64_t ldy, int64_t ny, float alpha, float* acc) {
  const int64_t bc = c->bc;
  if (!diag) {
    ops->gemm(nj, ny, ni, alpha, X, 1, bc, Y, ldy, acc, ny, 1);
    return;
  }
  for (int64_t s0 = 0; s0 < nj; s0 += SDPA_STRIP) {
    const int64_t ns = nj - s0 < SDPA_STRIP ? nj - s0 : SDPA_STRIP;
    const int64_t rmin = j0 + s0 - i0 > 0 ? j0 + s0 - i0 : 0;
    if (rmin >= ni) break;
    ops->gemm(ns, ny, ni - rmin, alpha, X + rmin * bc + s0, 1, bc, Y + rmin * ldy, ldy,
              acc + s0 * ny, ny, 1);
  }
}

/* dq (ni x E, ld E) += scale * dS K for a block (K: nj x E, ld ldk); on a diagonal block each
 * strip of queries stops at the last key it sees. */
static void bwd_acc_q(const sdpa_ctx_t* c, const kiln_nn_ops_t* ops, int diag, int64_t i0,
                      int64_t ni, int64_t j0, int64_t nj, const float* dS, const float* K,
                      int64_t ldk, float* dq) {
  const int64_t bc = c->bc, E = c->E;
  const int64_t strip = diag ? SDPA_STRIP : ni;
  for (int64_t r0 = 0; r0 < ni; r0 += strip) {
    const int64_t nr = ni - r0 < strip ? ni - r0 : strip;
    const int64_t nmax = diag ? causal_keys(i0 + r0 + nr - 1, j0, nj) : nj;
    if (nmax > 0) ops->gemm(nr, E, nmax, c->scale, dS + r0 * bc, bc, 1, K, ldk, dq + r0 * E, E, 1);
  }
}

/* Scratch layout shared by both backward passes. */
typedef struct bwd_mem {
  float *qbuf, *dobuf, *kbuf, *ktbuf, *vbuf, *vtbuf, *P, *dS, *acc1, *acc2;
} bwd_mem_t;

static bwd_mem_t bwd_layout(const sdpa_ctx_t* c, char* mem) {
  bwd_mem_t m;
  const int64_t E = c->E, Ev = c->Ev, br = c->br, bc = c->bc;
  m.qbuf = (float*)mem;
  m.dobuf = m.qbuf + br * E;
  m.kbuf = m.dobuf + br * Ev;
  m.ktbuf = m.kbuf + bc * E;
  m.vbuf = m.ktbuf + bc * E;
  m.vtbuf = m.vbuf + bc * Ev;
  m.P = m.vtbuf + bc * Ev;
  m.dS = m.P + br * bc;
  m.acc1 = m.dS + br * bc; /* dK (bc x E) or dQ (br x E) */
  m.acc2 = m.acc1 + (br > bc ? br : bc) * E; /* dV (bc x Ev) */
  return m;
}

static size_t bwd_bytes(const sdpa_ctx_t* c) {
  const int64_t E = c->E, Ev = c->Ev, br = c->br, bc = c->bc, mx = br > bc ? br : bc;
  return sizeof(float) * (size_t)(br * E + br * Ev + 2 * bc * E + 2 * bc * Ev + 2 * br * bc +
                                  mx * E + bc * Ev);
}

static void bwd_kv_tasks(void* arg, int64_t t0, int64_t t1, int tid) {
  const sdpa_ctx_t* c = arg;
  const kiln_nn_ops_t* ops = kiln_nn_ops();
  _Alignas(64) char stack[KILN_NN_STACK_BYTES];
  const bwd_mem_t m = bwd_layout(c, kiln_nn_scratch_get(&c->scratch, tid, stack));
  const int64_t E = c->E, Ev = c->Ev, br = c->br, bc = c->bc;
  for (int64_t t = t0; t < t1; t++) {
    /* causal: the first key blocks are seen by the most queries: handed out first */
    const int64_t nbh = c->B * c->Hk, kb = t / nbh, bh = t % nbh, b = bh / c->Hk, hk = bh % c->Hk;
    const int64_t j0 = kb * bc, nj = c->S - j0 < bc ? c->S - j0 : bc;
    int64_t ldq, lddo;
    const float* Kt = block_t(ops, &c->k, b, hk, j0, nj, E, m.kbuf, m.ktbuf, bc);
    const float* Vt = block_t(ops, &c->v, b, hk, j0, nj, Ev, m.vbuf, m.vtbuf, bc);
    memset(m.acc1, 0, sizeof(float) * (size_t)(nj * E));
    memset(m.acc2, 0, sizeof(float) * (size_t)(nj * Ev));
    for (int64_t g = 0; g < c->group; g++) {
      const int64_t h = hk * c->group + g;
      for (int64_t i0 = c->causal ? (j0 / br) * br : 0; i0 < c->L; i0 += br) {
        const int64_t ni = c->L - i0 < br ? c->L - i0 : br;
        const float* Q = block_in(&c->q, b, h, i0, ni, E, m.qbuf, &ldq);
        const float* dO = block_in(&c->go, b, h, i0, ni, Ev, m.dobuf, &lddo);
        const int diag = bwd_block(c, ops, b, h, i0, ni, j0, nj, Q, ldq, dO, lddo, Kt, Vt, m.P, m.dS);
        if (c->has_gv) bwd_acc_kv(c, ops, diag, i0, ni, j0, nj, m.P, dO, lddo, Ev, 1.0f, m.acc2);
        if (c->has_gk) bwd_acc_kv(c, ops, diag, i0, ni, j0, nj, m.dS, Q, ldq, E, c->scale, m.acc1);
      }
    }
    if (c->has_gk) block_out(&c->gk, b, hk, j0, nj, E, m.acc1, E);
    if (c->has_gv) block_out(&c->gv, b, hk, j0, nj, Ev, m.acc2, Ev);
  }
}

static void bwd_q_tasks(void* arg, int64_t t0, int64_t t1, int tid) {
  const sdpa_ctx_t* c = arg;
  const kiln_nn_ops_t* ops = kiln_nn_ops();
  _Alignas(64) char stack[KILN_NN_STACK_BYTES];
  const bwd_mem_t m = bwd_layout(c, kiln_nn_scratch_get(&c->scratch, tid, stack));
  const int64_t E = c->E, Ev = c->Ev, br = c->br, bc = c->bc;
  for (int64_t t = t0; t < t1; t++) {
    const int64_t nbh = c->B * c->H, qb = c->nqb - 1 - t / nbh, bh = t % nbh, b = bh / c->H, h = bh % c->H;
    const int64_t hk = h / c->group;
    const int64_t i0 = qb * br, ni = c->L - i0 < br ? c->L - i0 : br;
    int64_t ldk, ldq, lddo;
    const float* Q = block_in(&c->q, b, h, i0, ni, E, m.qbuf, &ldq);
    const float* dO = block_in(&c->go, b, h, i0, ni, Ev, m.dobuf, &lddo);
    memset(m.acc1, 0, sizeof(float) * (size_t)(ni * E));
    const int64_t kend = c->causal ? (c->S < i0 + ni ? c->S : i0 + ni) : c->S;
    for (int64_t j0 = 0; j0 < kend; j0 += bc) {
      const int64_t nj = kend - j0 < bc ? kend - j0 : bc;
      const float* K = block_in(&c->k, b, hk, j0, nj, E, m.kbuf, &ldk);
      ops->transpose(nj, E, K, ldk, m.ktbuf, bc);
      const float* Vt = block_t(ops, &c->v, b, hk, j0, nj, Ev, m.vbuf, m.vtbuf, bc);
      const int diag = bwd_block(c, ops, b, h, i0, ni, j0, nj, Q, ldq, dO, lddo, m.ktbuf, Vt, m.P, m.dS);
      bwd_acc_q(c, ops, diag, i0, ni, j0, nj, m.dS, K, ldk, m.acc1);
    }
    block_out(&c->gq, b, h, i0, ni, E, m.acc1, E);
  }
}

/* Fused single pass, one task per (batch, kv head): dK, dV per key block as above, and dQ for
 * every query of the group accumulated in scratch (group*L*E floats) in the same key-block order
 * as bwd_q_tasks, so both schedules give bitwise identical results. */
static void bwd_fused_tasks(void* arg, int64_t t0, int64_t t1, int tid) {
  const sdpa_ctx_t* c = arg;
  const kiln_nn_ops_t* ops = kiln_nn_ops();
  _Alignas(64) char stack[KILN_NN_STACK_BYTES];
  char* mem = kiln_nn_scratch_get(&c->scratch, tid, stack);
  const bwd_mem_t m = bwd_layout(c, mem);
  float* dq = (float*)(mem + kiln_nn_align(bwd_bytes(c)));
  const int64_t E = c->E, Ev = c->Ev, L = c->L, br = c->br, bc = c->bc;
  for (int64_t t = t0; t < t1; t++) {
    const int64_t b = t / c->Hk, hk = t % c->Hk;
    if (c->has_gq) memset(dq, 0, sizeof(float) * (size_t)(c->group * L * E));
    for (int64_t kb = 0; kb < c->nkb; kb++) {
      const int64_t j0 = kb * bc, nj = c->S - j0 < bc ? c->S - j0 : bc;
      int64_t ldk, ldq, lddo;
      const float* K = block_in(&c->k, b, hk, j0, nj, E, m.kbuf, &ldk);
      ops->transpose(nj, E, K, ldk, m.ktbuf, bc);
      const float* Vt = block_t(ops, &c->v, b, hk, j0, nj, Ev, m.vbuf, m.vtbuf, bc);
      memset(m.acc1, 0, sizeof(float) * (size_t)(nj * E));
      memset(m.acc2, 0, sizeof(float) * (size_t)(nj * Ev));
      for (int64_t g = 0; g < c->group; g++) {
        const int64_t h = hk * c->group + g;
        for (int64_t i0 = c->causal ? (j0 / br) * br : 0; i0 < L; i0 += br) {
          const int64_t ni = L - i0 < br ? L - i0 : br;
          const float* Q = block_in(&c->q, b, h, i0, ni, E, m.qbuf, &ldq);
          const float* dO = block_in(&c->go, b, h, i0, ni, Ev, m.dobuf, &lddo);
          const int diag =
              bwd_block(c, ops, b, h, i0, ni, j0, nj, Q, ldq, dO, lddo, m.ktbuf, Vt, m.P, m.dS);
          if (c->has_gv) bwd_acc_kv(c, ops, diag, i0, ni, j0, nj, m.P, dO, lddo, Ev, 1.0f, m.acc2);
          if (c->has_gk) bwd_acc_kv(c, ops, diag, i0, ni, j0, nj, m.dS, Q, ldq, E, c->scale, m.acc1);
          if (c->has_gq) bwd_acc_q(c, ops, diag, i0, ni, j0, nj, m.dS, K, ldk, dq + (g * L + i0) * E);
        }
      }
      if (c->has_gk) block_out(&c->gk, b, hk, j0, nj, E, m.acc1, E);
      if (c->has_gv) block_out(&c->gv, b, hk, j0, nj, Ev, m.acc2, Ev);
    }
    if (c->has_gq)
      for (int64_t g = 0; g < c->group; g++)
        block_out(&c->gq, b, hk * c->group + g, 0, L, E, dq + g * L * E, E);
  }
}

int kiln_nn_sdpa_bwd_schedule;

/* ---- f64 path ------------------------------------------------------------------------------ */

static inline double t4_get(const t4_t* t, int64_t b, int64_t h, int64_t r, int64_t col) {
  return *(const double*)(t4_row(t, b, h, r) + col * t->s[3] * t->esize);
}
static inline double* t4_at(const t4_t* t, int64_t b, int64_t h, int64_t r, int64_t col) {
  return (double*)(t4_row(t, b, h, r) + col * t->s[3] * t->esize);
}

/* Scores of query row i against all keys (masked: -inf) into s[S]; returns the row max. */
static double scores_f64(const sdpa_ctx_t* c, int64_t b, int64_t h, int64_t i, double* s) {
  const int64_t hk = h / c->group;
  double mx = -INFINITY;
  for (int64_t j = 0; j < c->S; j++) {
    double v = -INFINITY;
    if (!c->causal || j <= i) {
      double d = 0;
      for (int64_t e = 0; e < c->E; e++) d += t4_get(&c->q, b, h, i, e) * t4_get(&c->k, b, hk, j, e);
      v = d * c->scale_d;
      if (c->has_mask) {
        const char* m = c->mp + b * c->ms[0] + h * c->ms[1] + i * c->ms[2] + j * c->ms[3];
        if (c->mask_bool)
          v = *m ? v : -INFINITY;
        else
          v += kiln_nn_get(m, c->mdt);
      }
    }
    s[j] = v;
    mx = v > mx ? v : mx;
  }
  return mx;
}

static void fwd_f64_rows(void* arg, int64_t r0, int64_t r1, int tid) {
  const sdpa_ctx_t* c = arg;
  _Alignas(64) char stack[KILN_NN_STACK_BYTES];
  double* s = kiln_nn_scratch_get(&c->scratch, tid, stack);
  for (int64_t r = r0; r < r1; r++) {
    const int64_t i = r % c->L, bh = r / c->L, b = bh / c->H, h = bh % c->H, hk = h / c->group;
    const double mx = scores_f64(c, b, h, i, s);
    double l = 0;
    if (mx != -INFINITY)
      for (int64_t j = 0; j < c->S; j++) l += (s[j] = exp(s[j] - mx));
    for (int64_t e = 0; e < c->Ev; e++) {
      double a = 0;
      if (l > 0)
        for (int64_t j = 0; j < c->S; j++) a += s[j] * t4_get(&c->v, b, hk, j, e);
      *t4_at(&c->o, b, h, i, e) = l > 0 ? a / l : (l == 0 ? 0.0 : l);
    }
    if (c->has_lse)
      kiln_nn_set(lse_ptr(c, b, h, i), c->ldt, l > 0 ? mx + log(l) : (l == 0 ? 0.0 : l));
  }
}

static void bwd_f64_tasks(void* arg, int64_t t0, int64_t t1, int tid) {
  const sdpa_ctx_t* c = arg;
  _Alignas(64) char stack[KILN_NN_STACK_BYTES];
  double* p = kiln_nn_scratch_get(&c->scratch, tid, stack);
  double* ds = p + c->S;
  for (int64_t t = t0; t < t1; t++) {
    const int64_t b = t / c->Hk, hk = t % c->Hk;
    for (int64_t j = 0; j < c->S; j++) {
      if (c->has_gk)
        for (int64_t e = 0; e < c->E; e++) *t4_at(&c->gk, b, hk, j, e) = 0;
      if (c->has_gv)
        for (int64_t e = 0; e < c->Ev; e++) *t4_at(&c->gv, b, hk, j, e) = 0;
    }
    for (int64_t g = 0; g < c->group; g++) {
      const int64_t h = hk * c->group + g;
      for (int64_t i = 0; i < c->L; i++) {
        scores_f64(c, b, h, i, p);
        const double lse = kiln_nn_get(lse_ptr(c, b, h, i), c->ldt);
        double D = 0;
        for (int64_t e = 0; e < c->Ev; e++)
          D += t4_get(&c->go, b, h, i, e) * t4_get(&c->o, b, h, i, e);
        for (int64_t j = 0; j < c->S; j++) {
          p[j] = lse == -INFINITY ? 0.0 : exp(p[j] - lse);
          double dp = 0;
          for (int64_t e = 0; e < c->Ev; e++)
            dp += t4_get(&c->go, b, h, i, e) * t4_get(&c->v, b, hk, j, e);
          ds[j] = p[j] * (dp - D);
        }
        if (c->has_gq)
          for (int64_t e = 0; e < c->E; e++) {
            double a = 0;
            for (int64_t j = 0; j < c->S; j++) a += ds[j] * t4_get(&c->k, b, hk, j, e);
            *t4_at(&c->gq, b, h, i, e) = a * c->scale_d;
          }
        for (int64_t j = 0; j < c->S; j++) {
          if (c->has_gk)
            for (int64_t e = 0; e < c->E; e++)
              *t4_at(&c->gk, b, hk, j, e) += c->scale_d * ds[j] * t4_get(&c->q, b, h, i, e);
          if (c->has_gv)
            for (int64_t e = 0; e < c->Ev; e++)
              *t4_at(&c->gv, b, hk, j, e) += p[j] * t4_get(&c->go, b, h, i, e);
        }
      }
    }
  }
}

/* ---- validation ---------------------------------------------------------------------------- */

static kiln_status_t check4(const kiln_tensor_t* t, const char* op, const char* name,
                            kiln_dtype_t dt) {
  KILN_RETURN_IF_ERROR(kiln_nn_check_float(t, op, name));
  char st[128];
  if (t->ndim != 4)
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s: %s %s must be 4-D [B, H, len, dim]", op,
                      name, kiln_nn_shape_str(t, st, sizeof st));
  if (t->dtype != dt)
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s: %s is %s but q is %s", op, name,
                      kiln_dtype_name(t->dtype), kiln_dtype_name(dt));
  return KILN_OK;
}

static kiln_status_t expect_shape(const kiln_tensor_t* t, const int64_t* shape, int nd,
                                  const char* op, const char* name, const char* what) {
  int ok = t->ndim == nd;
  for (int d = 0; ok && d < nd; d++) ok = t->shape[d] == shape[d];
  if (ok) return KILN_OK;
  kiln_tensor_t want;
  memset(&want, 0, sizeof want);
  want.ndim = nd;
  for (int d = 0; d < nd; d++) want.shape[d] = shape[d];
  char st[128], sw[128];
  return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s: %s %s must be %s (%s)", op, name,
                    kiln_nn_shape_str(t, st, sizeof st), kiln_nn_shape_str(&want, sw, sizeof sw),
                    what);
}

static kiln_status_t sdpa_setup(sdpa_ctx_t* c, const kiln_tensor_t* q, const kiln_tensor_t* k,
                                const kiln_tensor_t* v, const kiln_tensor_t* mask, int is_causal,
                                double scale, const char* op) {
  memset(c, 0, sizeof(*c));
  KILN_RETURN_IF_ERROR(kiln_nn_check_float(q, op, "q"));
  char sq[128], sk[128], sv[128];
  if (q->ndim != 4)
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s: q %s must be 4-D [B, H, L, E]", op,
                      kiln_nn_shape_str(q, sq, sizeof sq));
  KILN_RETURN_IF_ERROR(check4(k, op, "k", q->dtype));
  KILN_RETURN_IF_ERROR(check4(v, op, "v", q->dtype));
  c->B = q->shape[0];
  c->H = q->shape[1];
  c->L = q->shape[2];
  c->E = q->shape[3];
  c->Hk = k->shape[1];
  c->S = k->shape[2];
  c->Ev = v->shape[3];
  if (k->shape[0] != c->B || k->shape[3] != c->E || v->shape[0] != c->B || v->shape[1] != c->Hk ||
      v->shape[2] != c->S || (c->Hk == 0 ? c->H != 0 : c->H % c->Hk != 0))
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT,
                      "%s: q %s, k %s, v %s must be [B,H,L,E], [B,Hk,S,E], [B,Hk,S,Ev] with H a "
                      "multiple of Hk",
                      op, kiln_nn_shape_str(q, sq, sizeof sq), kiln_nn_shape_str(k, sk, sizeof sk),
                      kiln_nn_shape_str(v, sv, sizeof sv));
  c->group = c->Hk ? c->H / c->Hk : 1;
  c->causal = is_causal != 0;
  c->scale_d = isnan(scale) ? 1.0 / sqrt((double)c->E) : scale;
  c->scale = (float)c->scale_d;
  t4_init(&c->q, q);
  t4_init(&c->k, k);
  t4_init(&c->v, v);
  if (mask) {
    KILN_RETURN_IF_ERROR(kiln_nn_check(mask, op, "attn_mask"));
    const int64_t full[4] = {c->B, c->H, c->L, c->S};
    int ok = mask->ndim <= 4;
    for (int d = 0; ok && d < mask->ndim; d++) {
      const int64_t want = full[4 - mask->ndim + d];
      ok = mask->shape[d] == want || mask->shape[d] == 1;
    }
    if (!ok) {
      char sm[128];
      return kiln_error(KILN_ERROR_INVALID_ARGUMENT,
                        "%s: attn_mask %s does not broadcast to [B, H, L, S] = [%lld, %lld, %lld, "
                        "%lld]",
                        op, kiln_nn_shape_str(mask, sm, sizeof sm), (long long)c->B,
                        (long long)c->H, (long long)c->L, (long long)c->S);
    }
    if (!(mask->dtype == KILN_DTYPE_BOOL || mask->dtype == KILN_DTYPE_U8 ||
          kiln_dtype_is_float(mask->dtype)))
      return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s: attn_mask must be bool or floating, got %s",
                        op, kiln_dtype_name(mask->dtype));
    const int64_t es = (int64_t)kiln_dtype_size(mask->dtype);
    for (int d = 0; d < 4; d++) {
      const int md = d - (4 - mask->ndim);
      c->ms[d] = (md < 0 || mask->shape[md] == 1) ? 0 : mask->strides[md] * es; /* bytes */
    }
    c->mp = mask->data;
    c->mdt = mask->dtype;
    c->has_mask = 1;
    c->mask_bool = !kiln_dtype_is_float(mask->dtype);
  }
  c->br = c->L < SDPA_BR ? (c->L > 0 ? c->L : 1) : SDPA_BR;
  c->bc = c->S < SDPA_BC ? (c->S > 0 ? c->S : 1) : SDPA_BC;
  c->nqb = (c->L + c->br - 1) / c->br;
  c->nkb = (c->S + c->bc - 1) / c->bc;
  return KILN_OK;
}

static kiln_status_t set_lse(sdpa_ctx_t* c, const kiln_tensor_t* lse, const char* op) {
  KILN_RETURN_IF_ERROR(kiln_nn_check_float(lse, op, "logsumexp"));
  const int64_t shape[3] = {c->B, c->H, c->L};
  KILN_RETURN_IF_ERROR(expect_shape(lse, shape, 3, op, "logsumexp", "[B, H, L]"));
  c->lp = lse->data;
  c->ldt = lse->dtype;
  for (int d = 0; d < 3; d++) c->ls[d] = lse->strides[d];
  c->has_lse = 1;
  return KILN_OK;
}

/* ---- entry points -------------------------------------------------------------------------- */

kiln_status_t kiln_kernel_sdpa(const kiln_tensor_t* q, const kiln_tensor_t* k,
                               const kiln_tensor_t* v, const kiln_tensor_t* attn_mask,
                               int is_causal, double scale, kiln_tensor_t* out,
                               kiln_tensor_t* logsumexp_out) {
  const char* op = "kiln_kernel_sdpa";
  sdpa_ctx_t c;
  KILN_RETURN_IF_ERROR(sdpa_setup(&c, q, k, v, attn_mask, is_causal, scale, op));
  KILN_RETURN_IF_ERROR(check4(out, op, "out", q->dtype));
  const int64_t oshape[4] = {c.B, c.H, c.L, c.Ev};
  KILN_RETURN_IF_ERROR(expect_shape(out, oshape, 4, op, "out", "[B, H, L, Ev]"));
  if (logsumexp_out) KILN_RETURN_IF_ERROR(set_lse(&c, logsumexp_out, op));
  t4_init(&c.o, out);
  const int64_t rows = c.B * c.H * c.L;
  if (rows == 0) return KILN_OK;
  if (q->dtype == KILN_DTYPE_F64) {
    KILN_RETURN_IF_ERROR(kiln_nn_scratch_init(&c.scratch, sizeof(double) * (size_t)c.S, op));
    kiln_parallel_for(rows, kiln_nn_grain(c.S * (c.E + c.Ev)), fwd_f64_rows, &c);
    kiln_nn_scratch_free(&c.scratch);
    return KILN_OK;
  }
  const int64_t br = c.br, bc = c.bc;
  const size_t bytes = sizeof(float) * (size_t)(br * c.E + 2 * bc * c.E + bc * c.Ev + br * bc +
                                                br * c.Ev + 2 * br);
  KILN_RETURN_IF_ERROR(kiln_nn_scratch_init(&c.scratch, bytes, op));
  const int64_t work = br * (c.causal ? (c.S + 1) / 2 : c.S) * (c.E + c.Ev);
  kiln_parallel_for(c.B * c.H * c.nqb, kiln_nn_grain(work), fwd_tasks, &c);
  kiln_nn_scratch_free(&c.scratch);
  return KILN_OK;
}

kiln_status_t kiln_kernel_sdpa_backward(const kiln_tensor_t* grad_out, const kiln_tensor_t* q,
                                        const kiln_tensor_t* k, const kiln_tensor_t* v,
                                        const kiln_tensor_t* out, const kiln_tensor_t* logsumexp,
                                        const kiln_tensor_t* attn_mask, int is_causal,
                                        double scale, kiln_tensor_t* grad_q,
                                        kiln_tensor_t* grad_k, kiln_tensor_t* grad_v) {
  const char* op = "kiln_kernel_sdpa_backward";
  sdpa_ctx_t c;
  KILN_RETURN_IF_ERROR(sdpa_setup(&c, q, k, v, attn_mask, is_causal, scale, op));
  const int64_t oshape[4] = {c.B, c.H, c.L, c.Ev};
  KILN_RETURN_IF_ERROR(check4(out, op, "out", q->dtype));
  KILN_RETURN_IF_ERROR(expect_shape(out, oshape, 4, op, "out", "[B, H, L, Ev]"));
  KILN_RETURN_IF_ERROR(check4(grad_out, op, "grad_out", q->dtype));
  KILN_RETURN_IF_ERROR(expect_shape(grad_out, oshape, 4, op, "grad_out", "[B, H, L, Ev]"));
  KILN_RETURN_IF_ERROR(set_lse(&c, logsumexp, op));
  t4_init(&c.o, out);
  t4_init(&c.go, grad_out);
  const kiln_tensor_t* gs[3] = {grad_q, grad_k, grad_v};
  const kiln_tensor_t* like[3] = {q, k, v};
  const char* names[3] = {"grad_q", "grad_k", "grad_v"};
  t4_t* dst[3] = {&c.gq, &c.gk, &c.gv};
  int* has[3] = {&c.has_gq, &c.has_gk, &c.has_gv};
  for (int i = 0; i < 3; i++) {
    if (gs[i] == NULL) continue;
    KILN_RETURN_IF_ERROR(check4(gs[i], op, names[i], q->dtype));
    KILN_RETURN_IF_ERROR(expect_shape(gs[i], like[i]->shape, 4, op, names[i], "its input's shape"));
    t4_init(dst[i], gs[i]);
    *has[i] = 1;
  }
  /* Keys nobody attends to (L == 0, or H == 0) still get zero gradients. */
  if (c.B * c.H * c.L == 0) {
    if (grad_k) kiln_nn_zero(grad_k);
    if (grad_v) kiln_nn_zero(grad_v);
    return KILN_OK;
  }
  if (q->dtype == KILN_DTYPE_F64) {
    KILN_RETURN_IF_ERROR(kiln_nn_scratch_init(&c.scratch, 2 * sizeof(double) * (size_t)c.S, op));
    kiln_parallel_for(c.B * c.Hk, 1, bwd_f64_tasks, &c);
    kiln_nn_scratch_free(&c.scratch);
    return KILN_OK;
  }
  const int64_t rows = c.B * c.H * c.L;
  _Alignas(64) float dstack[1024];
  float* dheap = NULL;
  c.D = dstack;
  if (rows > 1024) {
    dheap = kiln_allocator_alloc(NULL, sizeof(float) * (size_t)rows, 64);
    if (dheap == NULL)
      return kiln_error(KILN_ERROR_OUT_OF_MEMORY, "%s: cannot allocate %lld floats", op,
                        (long long)rows);
    c.D = dheap;
  }
  /* Fused when there are enough (batch, kv head) tasks to keep the pool busy (or one thread) and
   * the per-thread dQ accumulator stays small; else two passes with more parallelism. */
  const int nthreads = kiln_threadpool_size(kiln_threadpool_default());
  const size_t dq_bytes = sizeof(float) * (size_t)(c.group * c.L * c.E);
  int fused = c.has_gq && (c.has_gk || c.has_gv) && dq_bytes <= ((size_t)4 << 20) &&
              (nthreads == 1 || c.B * c.Hk >= 2 * (int64_t)nthreads);
  if (kiln_nn_sdpa_bwd_schedule) fused = kiln_nn_sdpa_bwd_schedule == 2;
  const size_t bytes = fused ? kiln_nn_align(bwd_bytes(&c)) + dq_bytes : bwd_bytes(&c);
  kiln_status_t s = kiln_nn_scratch_init(&c.scratch, bytes, op);
  if (s == KILN_OK) {
    kiln_parallel_for(rows, kiln_nn_grain(2 * c.Ev), bwd_delta_rows, &c);
    if (fused) {
      kiln_parallel_for(c.B * c.Hk, 1, bwd_fused_tasks, &c);
    } else {
      const int64_t wkv = c.bc * (c.causal ? (c.L + 1) / 2 : c.L) * c.group * (2 * c.E + 2 * c.Ev);
      if (c.has_gk || c.has_gv)
        kiln_parallel_for(c.B * c.Hk * c.nkb, kiln_nn_grain(wkv), bwd_kv_tasks, &c);
      const int64_t wq = c.br * (c.causal ? (c.S + 1) / 2 : c.S) * (2 * c.E + c.Ev);
      if (c.has_gq) kiln_parallel_for(c.B * c.H * c.nqb, kiln_nn_grain(wq), bwd_q_tasks, &c);
    }
    kiln_nn_scratch_free(&c.scratch);
  }
  kiln_allocator_free(NULL, dheap);
  return s;
}
