/* SPDX-License-Identifier: Apache-2.0 */
/* interp.c - the tiled vector interpreter for fused pointwise groups.
 *
 * A group's iteration space (its members' common shape, dims collapsed where every operand is
 * contiguous across them) is cut into tiles: dims before `tile_dim` are single indices, dim
 * `tile_dim` is cut into chunks, the dims after it are whole. A tile is therefore a dense box
 * every operand can describe with its own strides, so each instruction of the register program
 * is ONE call of the regular elementwise kernel (kiln_kernel_unary_ex / binary / ternary / copy)
 * on tile-sized descriptors: internal results live in per-thread registers (tile buffers in the
 * run context's scratch, runctx.c, in the node's own dtype, so results are bit-identical to running the nodes one
 * by one), group inputs are read in place with their strides (broadcast = stride 0), and group
 * outputs are written straight into their buffers. No full-size intermediate is materialized. A
 * fused reduction covers whole reduced rows per tile and reduces the tile with
 * kiln_kernel_reduce. Tiles are spread over the shared pool with kiln_parallel_for; kernels
 * called inside a job run inline on that thread.
 *
 * Direct path (gr->direct, the default whenever every operand is already in its kernel's types,
 * i.e. no f16/bf16 compute): each instruction is one call of the element kernel itself
 * (kiln_ew_kernel_t from kiln_*_desc, the same function the staged call would reach) on n
 * contiguous tile elements. Inputs that are not dense over the tile (broadcast, strided) or need a
 * dtype conversion (a f64 / i64 scalar constant) are gathered once per tile into a slot; outputs
 * that are not dense go through a slot and are scattered after the last instruction. This skips
 * the per-instruction iterator setup and the per-row staging of the staged path, with the same
 * bits. KILN_COMPILE_NO_DIRECT_GROUPS forces the staged path (tests compare the two).
 */
#include <stdio.h>
#include <string.h>

#include "graph/graph_internal.h"
#include "kiln/dtype.h"
#include "kernels/ew_internal.h"
#include "kiln/kernels/elementwise.h"
#include "kiln/kernels/reduce.h"
#include "kiln/parallel.h"

#define GX_TILE 2048          /* target elements per tile */
#ifndef GX_TILE_GRAIN
#define GX_TILE_GRAIN 4096 /* elements per parallel chunk, at least */
#endif

static int64_t round64(int64_t x) { return (x + 63) / 64 * 64; }

void gx_group_tiling(gx_group* gr) {
  int n = gr->ndim;
  int64_t T = GX_TILE;
  int maxd = gr->has_reduce ? gr->n_outer - 1 : n - 1;
  if (gr->has_reduce) {
    int64_t R = 1;
    for (int i = gr->n_outer; i < n; i++) R *= gr->shape[i];
    if (R > T) T = R;
  }
  int d = 0;
  int64_t inner = 1;
  for (d = 0; d <= maxd; d++) {
    inner = 1;
    for (int i = d + 1; i < n; i++) inner *= gr->shape[i];
    if (inner <= T) break;
  }
  if (d > maxd) d = maxd;
  if (inner < 1) inner = 1;
  int64_t chunk = T / inner;
  if (chunk < 1) chunk = 1;
  if (chunk > gr->shape[d]) chunk = gr->shape[d] > 0 ? gr->shape[d] : 1;
  gr->tile_dim = d;
  gr->chunk = chunk;
  gr->n_chunks = gr->shape[d] > 0 ? (gr->shape[d] + chunk - 1) / chunk : 0;
  int64_t outer = 1;
  for (int i = 0; i < d; i++) outer *= gr->shape[i];
  gr->n_tiles = outer * gr->n_chunks;
  gr->reg_elems = chunk * inner;
}

typedef struct {
  gx_run* r;
  const gx_group* gr;
} job_t;

typedef struct {
  int r;                  /* tile rank */
  int64_t shape[KILN_MAX_DIMS];
  int64_t idx[KILN_MAX_DIMS]; /* indices of dims < tile_dim */
  int64_t c0;             /* first index along tile_dim */
  char* regs;
  int64_t slot;
} tile_t;

static int64_t tile_offset(const gx_group* gr, const tile_t* t, const int64_t* st) {
  int64_t off = t->c0 * st[gr->tile_dim];
  for (int i = 0; i < gr->tile_dim; i++) off += t->idx[i] * st[i];
  return off;
}

static void strided(kiln_tensor_t* d, const kiln_tensor_t* base, const gx_group* gr,
                    const tile_t* t, const int64_t* st) {
  d->dtype = base->dtype;
  d->ndim = t->r;
  int64_t es = (int64_t)kiln_dtype_size(base->dtype);
  d->data = (char*)base->data + tile_offset(gr, t, st) * es;
  for (int k = 0; k < t->r; k++) {
    d->shape[k] = t->shape[k];
    d->strides[k] = st[gr->tile_dim + k];
  }
}

static void operand(kiln_tensor_t* d, const gx_run* r, const gx_group* gr, const tile_t* t,
                    gx_opd o) {
  if (o.kind == GX_OPD_REG) {
    d->dtype = (kiln_dtype_t)o.dtype;
    d->ndim = t->r;
    d->data = t->regs + (int64_t)o.idx * t->slot;
    int64_t s = 1;
    for (int k = t->r - 1; k >= 0; k--) {
      d->shape[k] = t->shape[k];
      d->strides[k] = s;
      s *= t->shape[k];
    }
  } else if (o.kind == GX_OPD_IN) {
    strided(d, &r->vt[gr->in_vids[o.idx]], gr, t, gr->in_st[o.idx]);
  } else {
    strided(d, &r->vt[gr->out_vids[o.idx]], gr, t, gr->out_st[o.idx]);
  }
}

static kiln_status_t run_instr(const gx_run* r, const gx_group* gr, const tile_t* t,
                               const gx_instr* in) {
  kiln_tensor_t s[3], d;
  kiln_tensor_t* ps[3] = {NULL, NULL, NULL};
  for (int k = 0; k < 3; k++)
    if (in->src[k].kind != GX_OPD_NONE) {
      operand(&s[k], r, gr, t, in->src[k]);
      ps[k] = &s[k];
    }
  operand(&d, r, gr, t, in->dst);
  switch (in->op) {
    case GX_OP_UNARY: {
      kiln_unary_params_t p = {in->f[0], in->f[1], in->f[2], in->f[3], in->f[4], in->f[5],
                               in->has_min, in->has_max};
      return kiln_kernel_unary_ex((kiln_unary_op_t)in->sub, ps[0], &p, (kiln_dtype_t)in->compute,
                                  &d);
    }
    case GX_OP_BINARY:
      return kiln_kernel_binary((kiln_binary_op_t)in->sub, ps[0], ps[1], in->f[0],
                                (kiln_dtype_t)in->compute, &d);
    case GX_OP_TERNARY:
      return kiln_kernel_ternary((kiln_ternary_op_t)in->sub, ps[0], ps[1], ps[2], in->f[0],
                                 (kiln_dtype_t)in->compute, &d);
    case GX_OP_CAST: return kiln_kernel_copy(ps[0], &d);
    default: return kiln_error(KILN_ERROR_INTERNAL, "kiln graph: bad fused instruction");
  }
}

static kiln_status_t run_reduce(const gx_run* r, const gx_group* gr, const tile_t* t) {
  kiln_tensor_t x, o;
  operand(&x, r, gr, t, gr->red_src);
  const kiln_tensor_t* base = &r->vt[gr->red_out_vid];
  strided(&o, base, gr, t, gr->red_st);
  uint32_t mask = 0;
  for (int k = 0; k < t->r; k++)
    if (gr->tile_dim + k >= gr->n_outer) {
      mask |= 1u << k;
      o.shape[k] = 1;
    }
  kiln_reduce_params_t p = {gr->red_f[0], gr->red_f[0]};
  return kiln_kernel_reduce((kiln_reduce_op_t)gr->red_op, &x, mask, &p,
                            (kiln_dtype_t)gr->red_compute, &o);
}

/* ---- the direct path --------------------------------------------------------------------------
 * Every operand is already in its kernel's types, so an instruction is one call of the element
 * kernel on n contiguous elements. Group inputs that are dense over the tile are read in place,
 * the others (broadcast, strided) are gathered into a slot once per tile; outputs that are dense
 * are written in place, the others go through a slot and are scattered after the last
 * instruction. */

#define GX_DIRECT_MAX_IN ((int)sizeof(((gx_group*)0)->in_type))
#define GX_DIRECT_MAX_OUT 8
#define GX_GROUP_REGS_MAX 64 /* registers of a group: at most one per member */

static int opd_dtype(const kiln_graph_t* g, const gx_group* gr, gx_opd o) {
  if (o.kind == GX_OPD_REG) return o.dtype;
  if (o.kind == GX_OPD_IN) return g->values[gr->in_vids[o.idx]].dtype;
  return g->values[gr->out_vids[o.idx]].dtype;
}

static int is_half(int t) { return t == KILN_DTYPE_F16 || t == KILN_DTYPE_BF16; }

/* Records that group input j is read as dtype `want`; 0 when another reader wants another. */
static int present_as(gx_group* gr, int j, int want) {
  if (gr->in_type[j] >= 0 && gr->in_type[j] != want) return 0;
  gr->in_type[j] = (signed char)want;
  return 1;
}

void gx_group_prepare(const kiln_graph_t* g, gx_group* gr) {
  gr->direct = 0;
  for (int k = 0; k < gr->n_instr; k++) {
    gr->instr[k].kfn = NULL;
    memset(&gr->instr[k].kargs, 0, sizeof gr->instr[k].kargs);
  }
  if (gr->n_in > GX_DIRECT_MAX_IN || gr->n_out > GX_DIRECT_MAX_OUT) return;
  for (int j = 0; j < gr->n_in; j++) gr->in_type[j] = -1;
  for (int k = 0; k < gr->n_instr; k++) {
    gx_instr* in = &gr->instr[k];
    kiln_ew_desc_t d;
    kiln_status_t st;
    int nsrc;
    if (in->op == GX_OP_CAST) { /* kiln_cvt: any pair of dtypes, from the input's own dtype */
      gx_opd o = in->src[0];
      if (o.kind == GX_OPD_IN && !present_as(gr, o.idx, g->values[gr->in_vids[o.idx]].dtype))
        return;
      continue;
    }
    if (is_half(in->compute)) return;  /* f16/bf16 compute rounds operands: staged path */
    if (in->op == GX_OP_UNARY) {
      kiln_unary_params_t p = {in->f[0], in->f[1], in->f[2], in->f[3], in->f[4], in->f[5],
                               in->has_min, in->has_max};
      st = kiln_unary_desc((kiln_unary_op_t)in->sub, &p, (kiln_dtype_t)in->compute, &d);
      nsrc = 1;
    } else if (in->op == GX_OP_BINARY) {
      st = kiln_binary_desc((kiln_binary_op_t)in->sub, NULL, in->f[0], (kiln_dtype_t)in->compute,
                            &d);
      nsrc = 2;
    } else if (in->op == GX_OP_TERNARY) {
      if (in->src[1].kind == GX_OPD_NONE || in->src[2].kind == GX_OPD_NONE) return;
      st = kiln_ternary_desc((kiln_ternary_op_t)in->sub, in->f[0], (kiln_dtype_t)in->compute, &d);
      nsrc = 3;
    } else {
      return;
    }
    if (st != KILN_OK || d.round_out) return;
    for (int j = 0; j < nsrc; j++) {
      gx_opd o = in->src[j];
      if (o.kind == GX_OPD_NONE) return;
      const int want = (int)d.in_type[j];
      if (o.kind == GX_OPD_IN) { /* an input (a scalar constant, say) may be converted once */
        if (!present_as(gr, o.idx, want)) return;
      } else if (opd_dtype(g, gr, o) != want) {
        return;
      }
    }
    if (opd_dtype(g, gr, in->dst) != (int)d.out_type) return;
    in->kfn = d.kernel;
    in->kargs = d.args;
  }
  for (int j = 0; j < gr->n_in; j++) /* inputs only casts or the reduction read: as they are */
    if (gr->in_type[j] < 0) gr->in_type[j] = (signed char)g->values[gr->in_vids[j]].dtype;
  gr->direct = 1;
}

int64_t gx_group_scratch(const gx_group* gr) {
  int64_t slots = gr->n_regs + (gr->direct ? gr->n_in + gr->n_out : 0);
  return slots * round64(gr->reg_elems * 8);
}

/* 1 if an operand with tile strides st (elements, tile dims) is row-major dense over the tile. */
static int dense(const tile_t* t, const int64_t* st) {
  int64_t want = 1;
  for (int k = t->r - 1; k >= 0; k--) {
    if (t->shape[k] == 1) continue;
    if (st[k] != want) return 0;
    want *= t->shape[k];
  }
  return 1;
}

/* Copies between the tile's row-major buffer `buf` and the strided operand at `base` (tile
 * strides st, elements of es bytes): gather when to_buf (kiln_cvt from dtype `from` to `to`),
 * else scatter (back from `to` to `from`). Dims are merged where the operand allows, and a tiny inner
 * dim goes outside a much longer one (like kiln_iter), so an interleave is not a call per pair. */
static void move_tile(char* buf, char* base, const tile_t* t, const int64_t* st, int64_t es,
                      int to_buf, kiln_dtype_t from, kiln_dtype_t to) {
  int64_t sh[KILN_MAX_DIMS], ss[KILN_MAX_DIMS], bst[KILN_MAX_DIMS], idx[KILN_MAX_DIMS];
  const int64_t bs = (int64_t)kiln_dtype_size(to);
  int nd = 0;
  int64_t run = 1; /* buffer elements per step of the dim being added */
  for (int k = t->r - 1; k >= 0; k--) { /* innermost first, size-1 dims dropped, merged */
    if (t->shape[k] == 1) continue;
    if (nd > 0 && st[k] == ss[nd - 1] * sh[nd - 1]) {
      sh[nd - 1] *= t->shape[k];
      run *= t->shape[k];
      continue;
    }
    sh[nd] = t->shape[k];
    ss[nd] = st[k];
    bst[nd] = run;
    run *= t->shape[k];
    nd++;
  }
  if (nd == 0) {
    sh[0] = 1;
    ss[0] = bst[0] = 0;
    nd = 1;
  }
  if (to_buf && nd == 2 && ss[1] == 0) { /* a dense-able block repeated (a broadcast row or a
                                            * [.., k] pattern): convert it once, then double */
    kiln_cvt(from, base, ss[0] * es, to, buf, bs, sh[0]);
    const int64_t total = sh[0] * sh[1] * bs;
    for (int64_t have = sh[0] * bs; have < total;) {
      const int64_t c = have < total - have ? have : total - have;
      memcpy(buf + have, buf, (size_t)c);
      have += c;
    }
    return;
  }
  if (nd >= 2 && sh[0] < 16 && sh[1] >= 4 * sh[0]) {
    int64_t a = sh[0], b = ss[0], c = bst[0];
    sh[0] = sh[1], ss[0] = ss[1], bst[0] = bst[1];
    sh[1] = a, ss[1] = b, bst[1] = c;
  }
  int64_t rows = 1;
  for (int d = 1; d < nd; d++) {
    rows *= sh[d];
    idx[d] = 0;
  }
  const int64_t L = sh[0], s0 = ss[0] * es, b0 = bst[0] * bs;
  char* p = base;
  char* b = buf;
  /* same-dtype 4-byte rows with a strided side (interleaves, broadcasts): a plain loop or fill,
   * not a call per row */
  const int plain = from == to && es == 4 && (ss[0] != 1 || bst[0] != 1);
  for (int64_t row = 0; row < rows; row++) {
    if (plain) {
      const int64_t ps = s0, bsd = b0;
      if (bsd == 4 && ps == 8 && kiln_cpu_has_avx2()) { /* stride 2: (de)interleave */
        if (to_buf) kiln_avx2_gather2_32(p, b, L);
        else kiln_avx2_scatter2_32(b, p, L);
      } else if (bsd == 8 && ps == 4 && kiln_cpu_has_avx2()) { /* a tile lane of a pair dim */
        if (to_buf) kiln_avx2_scatter2_32(p, b, L);
        else kiln_avx2_gather2_32(b, p, L);
      } else if (to_buf && ps == 0 && bsd == 4) { /* a broadcast along the run */
        kiln_fill_dense(b, p, 4, L);
      } else if (to_buf)
        for (int64_t i = 0; i < L; i++) memcpy(b + i * bsd, p + i * ps, 4);
      else
        for (int64_t i = 0; i < L; i++) memcpy(p + i * ps, b + i * bsd, 4);
    } else if (to_buf) {
      kiln_cvt(from, p, s0, to, b, b0, L);
    } else {
      kiln_cvt(to, b, b0, from, p, s0, L);
    }
    for (int d = 1; d < nd; d++) {
      p += ss[d] * es;
      b += bst[d] * bs;
      if (++idx[d] < sh[d]) break;
      p -= sh[d] * ss[d] * es;
      b -= sh[d] * bst[d] * bs;
      idx[d] = 0;
    }
  }
}

/* Two f32 operands that are the even and odd lanes of one buffer (x[..., 0::2] and x[..., 1::2]:
 * the same tile strides, stride 2 along the tile's last dim, addresses one element apart), moved
 * between their slots and the buffer in one pass per row ((de)interleaving whole vectors)
 * instead of a masked every-other-lane copy per operand. RoPE's halves are the case. */
static int is_pair(const tile_t* t, const int64_t* st_a, const int64_t* st_b, const char* a,
                   const char* b) {
  if (t->r < 1 || st_a[t->r - 1] != 2 || b != a + 4 || !kiln_cpu_has_avx2()) return 0;
  for (int k = 0; k < t->r; k++)
    if (st_a[k] != st_b[k]) return 0;
  return 1;
}

/* to_buf: even/odd slots (dense tiles) from the interleaved rows at base; else the reverse. The
 * rows along the tile's second-to-last dim go in one call. */
static void move_pair(char* even, char* odd, char* base, const tile_t* t, const int64_t* st, int to_buf) {
  const int64_t L = t->shape[t->r - 1];
  const int64_t R = t->r >= 2 ? t->shape[t->r - 2] : 1, ld = t->r >= 2 ? st[t->r - 2] : 0;
  int64_t blocks = 1, idx[KILN_MAX_DIMS] = {0};
  for (int k = 0; k < t->r - 2; k++) blocks *= t->shape[k];
  for (int64_t bk = 0; bk < blocks; bk++) {
    int64_t off = 0;
    for (int k = 0; k < t->r - 2; k++) off += idx[k] * st[k];
    char* p = base + off * 4;
    const int64_t at = bk * R * L * 4;
    if (to_buf) kiln_avx2_deinterleave2_32(p, ld, even + at, odd + at, L, R);
    else kiln_avx2_interleave2_32(even + at, odd + at, p, ld, L, R);
    for (int k = t->r - 3; k >= 0; k--)
      if (++idx[k] < t->shape[k]) break;
      else idx[k] = 0;
  }
}

/* Operand classes of the direct path, per tile: read / written in place as n dense elements,
 * in place row by row (unit stride along the tile's last dim, any strides outside it: a column
 * slice, a broadcast weight row), or through a slot (gathered / scattered whole). */
enum { OPD_DENSE, OPD_ROWS, OPD_SLOT };

/* Row mode pays one kernel call per instruction per tile row instead of a copy of each strided
 * operand; worth it once rows are this long. */
#define GX_ROW_MODE_MIN 64

static int classify(const tile_t* t, const int64_t* tst, int same_type) {
  if (!same_type) return OPD_SLOT;
  if (dense(t, tst)) return OPD_DENSE;
  return t->r >= 2 && tst[t->r - 1] == 1 ? OPD_ROWS : OPD_SLOT;
}

static kiln_status_t run_tile_direct(const gx_run* r, const gx_group* gr, const tile_t* t) {
  int64_t n = 1;
  for (int k = 0; k < t->r; k++) n *= t->shape[k];
  const int64_t L = t->r >= 1 ? t->shape[t->r - 1] : 1;
  char* inp[GX_DIRECT_MAX_IN];
  char* outp[GX_DIRECT_MAX_OUT];
  int in_cls[GX_DIRECT_MAX_IN], out_cls[GX_DIRECT_MAX_OUT];
  int64_t in_tst[GX_DIRECT_MAX_IN][KILN_MAX_DIMS], out_tst[GX_DIRECT_MAX_OUT][KILN_MAX_DIMS];
  int any_rows = 0;
  for (int j = 0; j < gr->n_in; j++) {
    const kiln_tensor_t* v = &r->vt[gr->in_vids[j]];
    const int64_t es = (int64_t)kiln_dtype_size(v->dtype);
    inp[j] = (char*)v->data + tile_offset(gr, t, gr->in_st[j]) * es;
    for (int k = 0; k < t->r; k++) in_tst[j][k] = gr->in_st[j][gr->tile_dim + k];
    in_cls[j] = classify(t, in_tst[j], gr->in_type[j] == (int)v->dtype);
    any_rows |= in_cls[j] == OPD_ROWS;
  }
  for (int j = 0; j < gr->n_out; j++) {
    const kiln_tensor_t* v = &r->vt[gr->out_vids[j]];
    const int64_t es = (int64_t)kiln_dtype_size(v->dtype);
    outp[j] = (char*)v->data + tile_offset(gr, t, gr->out_st[j]) * es;
    for (int k = 0; k < t->r; k++) out_tst[j][k] = gr->out_st[j][gr->tile_dim + k];
    out_cls[j] = classify(t, out_tst[j], 1);
    any_rows |= out_cls[j] == OPD_ROWS;
  }
  /* Not with a fused reduction reading a register: run_reduce reads that register as the whole
   * dense tile after the row loop, and an earlier value of a smaller dtype in the same register
   * (registers are reused across dtypes) has rows that land inside its finished rows. */
  const int red_in_reg = gr->has_reduce && gr->red_src.kind == GX_OPD_REG;
  const int row_mode = any_rows && L >= GX_ROW_MODE_MIN && !red_in_reg;
  for (int j = 0; j < gr->n_in; j++)
    if (!(in_cls[j] == OPD_DENSE || (row_mode && in_cls[j] == OPD_ROWS))) in_cls[j] = OPD_SLOT;
  /* f32 slot inputs that are one buffer's even/odd lanes: one deinterleaving pass for both */
  int moved[GX_DIRECT_MAX_IN] = {0};
  for (int j = 0; j < gr->n_in; j++) {
    if (in_cls[j] != OPD_SLOT || moved[j] || r->vt[gr->in_vids[j]].dtype != KILN_DTYPE_F32 ||
        gr->in_type[j] != KILN_DTYPE_F32)
      continue;
    for (int j2 = 0; j2 < gr->n_in; j2++)
      if (j2 != j && !moved[j2] && in_cls[j2] == OPD_SLOT && gr->in_type[j2] == KILN_DTYPE_F32 &&
          r->vt[gr->in_vids[j2]].dtype == KILN_DTYPE_F32 && is_pair(t, in_tst[j], in_tst[j2], inp[j], inp[j2])) {
        char* s0 = t->regs + (int64_t)(gr->n_regs + j) * t->slot;
        char* s1 = t->regs + (int64_t)(gr->n_regs + j2) * t->slot;
        move_pair(s0, s1, inp[j], t, in_tst[j], 1);
        inp[j] = s0;
        inp[j2] = s1;
        moved[j] = moved[j2] = 1;
        break;
      }
  }
  for (int j = 0; j < gr->n_in; j++) {
    if (in_cls[j] != OPD_SLOT || moved[j]) continue;
    const kiln_tensor_t* v = &r->vt[gr->in_vids[j]];
    char* slot = t->regs + (int64_t)(gr->n_regs + j) * t->slot;
    move_tile(slot, inp[j], t, in_tst[j], (int64_t)kiln_dtype_size(v->dtype), 1, v->dtype,
              (kiln_dtype_t)gr->in_type[j]);
    inp[j] = slot;
  }
  char* out_base[GX_DIRECT_MAX_OUT];
  for (int j = 0; j < gr->n_out; j++) {
    out_base[j] = outp[j];
    if (out_cls[j] == OPD_DENSE || (row_mode && out_cls[j] == OPD_ROWS)) continue;
    out_cls[j] = OPD_SLOT;
    outp[j] = t->regs + (int64_t)(gr->n_regs + gr->n_in + j) * t->slot;
  }
  /* One pass over the program per row in row mode (rows of L elements; dense operands, slots and
   * registers advance by L per row, row-strided operands by their own strides), else one pass
   * over all n elements. Operand table: registers, then inputs, then outputs. */
  const int64_t rows = row_mode ? n / L : 1, len = row_mode ? L : n;
  const int nr = gr->n_regs, nq = nr + gr->n_in + gr->n_out;
  char* base[GX_DIRECT_MAX_IN + GX_DIRECT_MAX_OUT + GX_GROUP_REGS_MAX];
  char* cur[GX_DIRECT_MAX_IN + GX_DIRECT_MAX_OUT + GX_GROUP_REGS_MAX];
  int64_t step[GX_DIRECT_MAX_IN + GX_DIRECT_MAX_OUT + GX_GROUP_REGS_MAX]; /* bytes per row */
  const int64_t* rst[GX_DIRECT_MAX_IN + GX_DIRECT_MAX_OUT + GX_GROUP_REGS_MAX]; /* ROWS: strides */
  if (nq > (int)(sizeof base / sizeof base[0]))
    return kiln_error(KILN_ERROR_INTERNAL, "kiln graph: %d operands in a fused group", nq);
  /* A register may be reused for another dtype (after its last read): its row r sits at
   * r * len elements of the dtype the instruction at hand reads or writes, so registers are
   * addressed per access (esz) rather than advanced in the table. Within one row pass a value
   * is written and read before the next row's values, so the differing spacings never clash;
   * only a reduction's source must outlive the loop, and row mode is off for those groups. */
  int64_t esz[KILN_DTYPE_COUNT];
  for (int d = 0; d < KILN_DTYPE_COUNT; d++) esz[d] = (int64_t)kiln_dtype_size((kiln_dtype_t)d);
  for (int q = 0; q < nq; q++) {
    int64_t es;
    rst[q] = NULL;
    if (q < nr) {
      base[q] = t->regs + (int64_t)q * t->slot;
      es = 0; /* addressed per access */
    } else if (q < nr + gr->n_in) {
      const int j = q - nr;
      base[q] = inp[j];
      es = (int64_t)kiln_dtype_size((kiln_dtype_t)gr->in_type[j]);
      if (in_cls[j] == OPD_ROWS) rst[q] = in_tst[j];
    } else {
      const int j = q - nr - gr->n_in;
      base[q] = outp[j];
      es = (int64_t)kiln_dtype_size(r->vt[gr->out_vids[j]].dtype);
      if (out_cls[j] == OPD_ROWS) rst[q] = out_tst[j];
    }
    step[q] = rst[q] ? es : len * es; /* ROWS: element size, scaled by the row's offset */
    cur[q] = base[q];
  }
  int64_t ridx[KILN_MAX_DIMS] = {0};
  int err = 0;
  for (int64_t rw = 0; rw < rows; rw++) {
    if (rw > 0) {
      for (int k = t->r - 2; k >= 0; k--) /* next row: the tile's dims before the last */
        if (++ridx[k] < t->shape[k]) break;
        else ridx[k] = 0;
      for (int q = 0; q < nq; q++) {
        if (!rst[q]) {
          cur[q] += step[q];
          continue;
        }
        int64_t off = 0;
        for (int k = 0; k < t->r - 1; k++) off += ridx[k] * rst[q][k];
        cur[q] = base[q] + off * step[q];
      }
    }
    for (int k = 0; k < gr->n_instr; k++) {
      const gx_instr* in = &gr->instr[k];
      const void* src[3] = {NULL, NULL, NULL};
      for (int j = 0; j < 3; j++) {
        gx_opd o = in->src[j];
        if (o.kind == GX_OPD_REG) src[j] = base[o.idx] + rw * len * esz[o.dtype];
        else if (o.kind == GX_OPD_IN) src[j] = cur[nr + o.idx];
        else if (o.kind == GX_OPD_OUT) src[j] = cur[nr + gr->n_in + o.idx];
      }
      void* dst = in->dst.kind == GX_OPD_REG ? base[in->dst.idx] + rw * len * esz[in->dst.dtype]
                                             : cur[nr + gr->n_in + in->dst.idx];
      if (in->op == GX_OP_CAST) {
        kiln_dtype_t from = in->src[0].kind == GX_OPD_IN
                                ? (kiln_dtype_t)gr->in_type[in->src[0].idx]
                                : (kiln_dtype_t)opd_dtype(r->e->wg, gr, in->src[0]);
        kiln_dtype_t to = (kiln_dtype_t)in->dtype;
        kiln_cvt(from, src[0], (int64_t)kiln_dtype_size(from), to, dst,
                 (int64_t)kiln_dtype_size(to), len);
      } else {
        err |= in->kfn(len, dst, src, &in->kargs);
      }
    }
  }
  int done[GX_DIRECT_MAX_OUT] = {0};
  for (int j = 0; j < gr->n_out; j++) { /* even/odd output pairs: one interleaving pass */
    if (out_cls[j] != OPD_SLOT || r->vt[gr->out_vids[j]].dtype != KILN_DTYPE_F32) continue;
    for (int j2 = 0; j2 < gr->n_out; j2++)
      if (j2 != j && !done[j2] && out_cls[j2] == OPD_SLOT && r->vt[gr->out_vids[j2]].dtype == KILN_DTYPE_F32 &&
          is_pair(t, out_tst[j], out_tst[j2], out_base[j], out_base[j2])) {
        move_pair(outp[j], outp[j2], out_base[j], t, out_tst[j], 0);
        done[j] = done[j2] = 1;
        break;
      }
  }
  for (int j = 0; j < gr->n_out; j++) {
    if (out_cls[j] != OPD_SLOT || done[j]) continue;
    const kiln_tensor_t* v = &r->vt[gr->out_vids[j]];
    move_tile(outp[j], out_base[j], t, out_tst[j], (int64_t)kiln_dtype_size(v->dtype), 0,
              v->dtype, v->dtype);
  }
  if (err) return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "ZeroDivisionError");
  return KILN_OK;
}

static void fail(gx_run* r, kiln_status_t st) {
  int expected = 0;
  if (atomic_compare_exchange_strong(&r->err, &expected, st))
    snprintf(r->err_msg, sizeof r->err_msg, "%s", kiln_status_message());
}

/* Runs the part of group gr whose tile_dim index is in [c0, c0 + len) (len <= gr->chunk) at the
 * outer indices idx, on thread tid's scratch; 0 after recording an error. */
static int run_tile(gx_run* r, const gx_group* gr, int tid, const int64_t* idx, int64_t c0,
                    int64_t len) {
  tile_t t;
  t.regs = r->scratch ? r->scratch + (int64_t)tid * r->e->scratch_per_thread : NULL;
  t.slot = round64(gr->reg_elems * 8);
  t.r = gr->ndim - gr->tile_dim;
  for (int k = 1; k < t.r; k++) t.shape[k] = gr->shape[gr->tile_dim + k];
  for (int i = 0; i < gr->tile_dim; i++) t.idx[i] = idx[i];
  t.c0 = c0;
  t.shape[0] = len;
  kiln_status_t st = KILN_OK;
  if (gr->direct) st = run_tile_direct(r, gr, &t);
  for (int k = 0; st == KILN_OK && !gr->direct && k < gr->n_instr; k++) st = run_instr(r, gr, &t, &gr->instr[k]);
  if (st == KILN_OK && gr->has_reduce) st = run_reduce(r, gr, &t);
  if (st != KILN_OK) {
    fail(r, st);
    return 0;
  }
  return 1;
}

static void tile_fn(void* ctx, int64_t begin, int64_t end, int tid) {
  job_t* j = ctx;
  gx_run* r = j->r;
  const gx_group* gr = j->gr;
  if (tid < 0 || tid >= r->e->n_threads) {
    fail(r, kiln_error(KILN_ERROR_INTERNAL, "kiln graph: thread id %d beyond the scratch", tid));
    return;
  }
  int64_t idx[KILN_MAX_DIMS];
  for (int64_t ti = begin; ti < end; ti++) {
    if (atomic_load_explicit(&r->err, memory_order_relaxed)) return;
    int64_t c = ti % gr->n_chunks, o = ti / gr->n_chunks;
    for (int i = gr->tile_dim - 1; i >= 0; i--) {
      idx[i] = o % gr->shape[i];
      o /= gr->shape[i];
    }
    const int64_t c0 = c * gr->chunk, len = gr->shape[gr->tile_dim] - c0;
    if (!run_tile(r, gr, tid, idx, c0, len < gr->chunk ? len : gr->chunk)) return;
  }
}

static kiln_status_t take_error(gx_run* r) {
  int st = atomic_load(&r->err);
  if (st == 0) return KILN_OK;
  atomic_store(&r->err, 0);
  return kiln_error((kiln_status_code_t)st, "%s", r->err_msg);
}

typedef struct {
  gx_run* r;
  const gx_group* const* grs;
  int n;
  int64_t rows;
} chain_job_t;

static void chain_fn(void* ctx, int64_t begin, int64_t end, int tid) {
  const chain_job_t* j = ctx;
  if (tid < 0 || tid >= j->r->e->n_threads) {
    fail(j->r, kiln_error(KILN_ERROR_INTERNAL, "kiln graph: thread id %d beyond the scratch", tid));
    return;
  }
  const int64_t R = j->grs[0]->shape[0];
  for (int64_t ti = begin; ti < end; ti++) {
    const int64_t c0 = ti * j->rows, len = R - c0 < j->rows ? R - c0 : j->rows;
    for (int k = 0; k < j->n; k++) {
      if (atomic_load_explicit(&j->r->err, memory_order_relaxed)) return;
      if (!run_tile(j->r, j->grs[k], tid, NULL, c0, len)) return;
    }
  }
}

kiln_status_t gx_run_chain(gx_run* r, const gx_group* const* grs, int n, int64_t rows) {
  const int64_t R = grs[0]->shape[0], n_tiles = (R + rows - 1) / rows;
  int64_t per_tile = 0; /* elements of all members per row tile */
  for (int k = 0; k < n; k++) per_tile += grs[k]->reg_elems / grs[k]->chunk * rows;
  int64_t grain = GX_TILE_GRAIN / (per_tile > 0 ? per_tile : 1);
  if (grain < 1) grain = 1;
  chain_job_t j = {r, grs, n, rows};
  atomic_store(&r->err, 0);
  kiln_parallel_for(n_tiles, grain, chain_fn, &j);
  return take_error(r);
}

kiln_status_t gx_run_group(gx_run* r, const gx_group* gr) {
  if (gr->n_tiles <= 0) return KILN_OK;
  job_t j = {r, gr};
  int64_t grain = GX_TILE_GRAIN / (gr->reg_elems > 0 ? gr->reg_elems : 1);
  if (grain < 1) grain = 1;
  atomic_store(&r->err, 0);
  kiln_parallel_for(gr->n_tiles, grain, tile_fn, &j);
  return take_error(r);
}
