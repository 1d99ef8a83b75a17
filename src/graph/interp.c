/* interp.c - the tiled vector interpreter for fused pointwise groups.
 *
 * A group's iteration space (its members' common shape, dims collapsed where every operand is
 * contiguous across them) is cut into tiles: dims before `tile_dim` are single indices, dim
 * `tile_dim` is cut into chunks, the dims after it are whole. A tile is therefore a dense box
 * every operand can describe with its own strides, so each instruction of the register program
 * is ONE call of the regular elementwise kernel (kiln_kernel_unary_ex / binary / ternary / copy)
 * on tile-sized descriptors: internal results live in per-thread registers (tile buffers in the
 * exec's scratch, in the node's own dtype, so results are bit-identical to running the nodes one
 * by one), group inputs are read in place with their strides (broadcast = stride 0), and group
 * outputs are written straight into their buffers. No full-size intermediate is materialized. A
 * fused reduction covers whole reduced rows per tile and reduces the tile with
 * kiln_kernel_reduce. Tiles are spread over the shared pool with kiln_parallel_for; kernels
 * called inside a job run inline on that thread.
 */
#include <stdio.h>
#include <string.h>

#include "graph/graph_internal.h"
#include "kiln/dtype.h"
#include "kiln/kernels/elementwise.h"
#include "kiln/kernels/reduce.h"
#include "kiln/parallel.h"

#define GX_TILE 2048          /* target elements per tile */
#define GX_TILE_GRAIN 32768   /* elements per parallel chunk, at least */

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
  kiln_exec_t* e;
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

static void operand(kiln_tensor_t* d, const kiln_exec_t* e, const gx_group* gr, const tile_t* t,
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
    strided(d, &e->vt[gr->in_vids[o.idx]], gr, t, gr->in_st[o.idx]);
  } else {
    strided(d, &e->vt[gr->out_vids[o.idx]], gr, t, gr->out_st[o.idx]);
  }
}

static kiln_status_t run_instr(const kiln_exec_t* e, const gx_group* gr, const tile_t* t,
                               const gx_instr* in) {
  kiln_tensor_t s[3], d;
  kiln_tensor_t* ps[3] = {NULL, NULL, NULL};
  for (int k = 0; k < 3; k++)
    if (in->src[k].kind != GX_OPD_NONE) {
      operand(&s[k], e, gr, t, in->src[k]);
      ps[k] = &s[k];
    }
  operand(&d, e, gr, t, in->dst);
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

static kiln_status_t run_reduce(const kiln_exec_t* e, const gx_group* gr, const tile_t* t) {
  kiln_tensor_t x, o;
  operand(&x, e, gr, t, gr->red_src);
  const kiln_tensor_t* base = &e->vt[gr->red_out_vid];
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

static void fail(kiln_exec_t* e, kiln_status_t st) {
  int expected = 0;
  if (atomic_compare_exchange_strong(&e->err, &expected, st))
    snprintf(e->err_msg, sizeof e->err_msg, "%s", kiln_status_message());
}

static void tile_fn(void* ctx, int64_t begin, int64_t end, int tid) {
  job_t* j = ctx;
  kiln_exec_t* e = j->e;
  const gx_group* gr = j->gr;
  if (tid < 0 || tid >= e->n_threads) {
    fail(e, kiln_error(KILN_ERROR_INTERNAL, "kiln graph: thread id %d beyond the scratch", tid));
    return;
  }
  tile_t t;
  t.regs = e->scratch ? e->scratch + (int64_t)tid * e->scratch_per_thread : NULL;
  t.slot = round64(gr->reg_elems * 8);
  t.r = gr->ndim - gr->tile_dim;
  for (int k = 1; k < t.r; k++) t.shape[k] = gr->shape[gr->tile_dim + k];
  for (int64_t ti = begin; ti < end; ti++) {
    if (atomic_load_explicit(&e->err, memory_order_relaxed)) return;
    int64_t c = ti % gr->n_chunks, o = ti / gr->n_chunks;
    for (int i = gr->tile_dim - 1; i >= 0; i--) {
      t.idx[i] = o % gr->shape[i];
      o /= gr->shape[i];
    }
    t.c0 = c * gr->chunk;
    int64_t len = gr->shape[gr->tile_dim] - t.c0;
    t.shape[0] = len < gr->chunk ? len : gr->chunk;
    for (int k = 0; k < gr->n_instr; k++) {
      kiln_status_t st = run_instr(e, gr, &t, &gr->instr[k]);
      if (st != KILN_OK) {
        fail(e, st);
        return;
      }
    }
    if (gr->has_reduce) {
      kiln_status_t st = run_reduce(e, gr, &t);
      if (st != KILN_OK) {
        fail(e, st);
        return;
      }
    }
  }
}

kiln_status_t gx_run_group(kiln_exec_t* e, const gx_group* gr) {
  if (gr->n_tiles <= 0) return KILN_OK;
  job_t j = {e, gr};
  int64_t grain = GX_TILE_GRAIN / (gr->reg_elems > 0 ? gr->reg_elems : 1);
  if (grain < 1) grain = 1;
  atomic_store(&e->err, 0);
  kiln_parallel_for(gr->n_tiles, grain, tile_fn, &j);
  int st = atomic_load(&e->err);
  if (st != 0) {
    atomic_store(&e->err, 0);
    return kiln_error((kiln_status_code_t)st, "%s", e->err_msg);
  }
  return KILN_OK;
}
