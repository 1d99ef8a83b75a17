/* SPDX-License-Identifier: Apache-2.0 */
/* plan.c - steps, storage classes, liveness, in-place reuse and the arena plan.
 *
 * Every value lives in the storage of its root (a non-view value). A root is an input (the
 * caller's buffer), a constant, a graph output written straight into the caller's output buffer
 * (when the output is the whole root in contiguous order), or an arena buffer. Buffers get a
 * lifetime [first step writing, last step reading]; a pointwise step may write its result into
 * the buffer of an input that dies at that step (in-place). Buffers are then placed greedily,
 * largest first, into the lowest best-fitting gap among the buffers whose lifetimes overlap,
 * 64-byte aligned; the arena is the highest end.
 */
#include <string.h>

#include "graph/graph_internal.h"
#include "kiln/dtype.h"
#include "kiln/kernels/elementwise.h"
#include "kiln/parallel.h"
#include "runtime/checked.h"

/* The largest arena a plan may need: offsets and ends stay far from int64's range (each buffer
 * is at most 2^51 bytes). A program that needs more can never run. */
#define GX_ARENA_MAX (INT64_C(1) << 62)

static int64_t round_up(int64_t x) { return (x + GX_ALIGN - 1) / GX_ALIGN * GX_ALIGN; }

static int64_t value_bytes(const gx_value* v) {
  return v->numel * (int64_t)kiln_dtype_size((kiln_dtype_t)v->dtype);
}

/* Output value ids written by a step's node (fused groups have their own list). */
static int step_outputs(const kiln_exec_t* e, const gx_node* n, const int** outs) {
  if (n->op == GX_OP_FUSED) {
    const gx_group* gr = &e->groups[n->aux];
    *outs = gr->out_vids;
    return gr->n_out + gr->has_reduce; /* the reduction's result is listed last */
  }
  *outs = n->out;
  return n->n_out;
}

static int is_compute(int op) { return op != GX_OP_INPUT && op != GX_OP_CONST && !gx_is_view(op); }

/* ---- tile chains ------------------------------------------------------------------------------
 * Consecutive fused-group steps tiled along the same rows (tile_dim 0, equal extents), where a
 * member reads what earlier members wrote only in its own rows, run row tile by row tile in one
 * parallel job (gx_run_chain): an RMSNorm's sum of squares, rsqrt and scaling groups become one
 * job, a row tile's x stays in one core's cache for both passes, and two dispatches go. Values a
 * chain writes or reads live over the whole chain (no buffer shared inside it, no in-place), and
 * members with a reduction keep their tile height, so results do not change. */

static const gx_group* step_group(const kiln_exec_t* e, const gx_step* s) {
  if (s->kind != GX_STEP_NODE) return NULL;
  const gx_node* n = &e->wg->nodes[s->node];
  return n->op == GX_OP_FUSED ? &e->groups[n->aux] : NULL;
}

static int chainable(const gx_group* gr) {
  return gr != NULL && gr->tile_dim == 0 && gr->ndim >= 1 && gr->shape[0] > 1 && gr->chunk >= 1;
}

/* The row (dim 0) stride with which gr writes value v; -1 when gr does not write v. */
static int64_t write_stride(const gx_group* gr, int v) {
  for (int j = 0; j < gr->n_out; j++)
    if (gr->out_vids[j] == v) return gr->out_st[j][0];
  if (gr->has_reduce && gr->red_out_vid == v) return gr->red_st[0];
  return -1;
}

static int writes_root(const kiln_graph_t* g, const gx_group* gr, int root) {
  for (int j = 0; j < gr->n_out; j++)
    if (g->values[gr->out_vids[j]].root == root) return 1;
  return gr->has_reduce && g->values[gr->red_out_vid].root == root;
}

static int reads_root(const kiln_graph_t* g, const gx_group* gr, int root) {
  for (int j = 0; j < gr->n_in; j++)
    if (g->values[gr->in_vids[j]].root == root) return 1;
  return 0;
}

/* 1 if group c may follow the chain members m[0..n). */
static int joins(const kiln_graph_t* g, const gx_group* const* m, int n, const gx_group* c) {
  if (!chainable(c) || c->shape[0] != m[0]->shape[0]) return 0;
  for (int j = 0; j < c->n_in; j++) { /* what members wrote: the same value, row for row */
    const int v = c->in_vids[j], r = g->values[v].root;
    for (int k = 0; k < n; k++) {
      if (!writes_root(g, m[k], r)) continue;
      const int64_t ws = write_stride(m[k], v), rs = c->in_st[j][0];
      if (ws <= 0 || rs != ws) return 0;
      int64_t span = 0; /* what one row of c reads stays inside that row */
      for (int d = 1; d < c->ndim; d++)
        span += (c->shape[d] - 1) * (c->in_st[j][d] < 0 ? -c->in_st[j][d] : c->in_st[j][d]);
      if (span >= rs) return 0;
    }
  }
  for (int k = 0; k < n; k++) { /* c writes nothing a member reads or writes */
    for (int j = 0; j < c->n_out; j++) {
      const int r = g->values[c->out_vids[j]].root;
      if (reads_root(g, m[k], r) || writes_root(g, m[k], r)) return 0;
    }
    if (c->has_reduce) {
      const int r = g->values[c->red_out_vid].root;
      if (reads_root(g, m[k], r) || writes_root(g, m[k], r)) return 0;
    }
  }
  return 1;
}

static void plan_chains(kiln_exec_t* e, int ns) {
  for (int s = 0; s < ns; s++) {
    e->steps[s].chain = 1;
    e->steps[s].chain_rows = 0;
  }
  if (e->flags & KILN_COMPILE_NO_CHAIN) return;
  for (int s = 0; s < ns;) {
    const gx_group* m[GX_CHAIN_MAX];
    int n = 0;
    int64_t rows = 0;
    if (chainable(step_group(e, &e->steps[s]))) {
      m[n++] = step_group(e, &e->steps[s]);
      rows = m[0]->chunk;
      while (s + n < ns && n < GX_CHAIN_MAX) {
        const gx_group* c = step_group(e, &e->steps[s + n]);
        if (c == NULL || !joins(e->wg, m, n, c)) break;
        const int64_t r2 = c->chunk < rows ? c->chunk : rows;
        int ok = !c->has_reduce || c->chunk == r2; /* reductions keep their tile height */
        for (int k = 0; k < n; k++)
          if (m[k]->has_reduce && m[k]->chunk != r2) ok = 0;
        if (!ok) break;
        rows = r2;
        m[n++] = c;
      }
    }
    if (n > 1) {
      e->steps[s].chain = n;
      e->steps[s].chain_rows = rows;
      for (int k = 1; k < n; k++) e->steps[s + k].chain = 0;
      e->stats.n_chained_steps += n;
      s += n;
    } else {
      s++;
    }
  }
}

/* First and last step of the chain step s belongs to (s itself when alone). */
static int chain_start(const kiln_exec_t* e, int s) {
  while (s > 0 && e->steps[s].chain == 0) s--;
  return s;
}
static int chain_end(const kiln_exec_t* e, int s) {
  const int h = chain_start(e, s);
  return h + (e->steps[h].chain > 1 ? e->steps[h].chain : 1) - 1;
}

/* ---- in-place -------------------------------------------------------------------------------- */

/* 1 if, inside group `gr`, every read of external input j happens no later than the
 * instruction writing output o. */
static int group_reads_before(const gx_group* gr, int j, int o) {
  int w = -1;
  for (int t = 0; t < gr->n_instr; t++)
    if (gr->instr[t].dst.kind == GX_OPD_OUT && gr->instr[t].dst.idx == o) w = t;
  if (w < 0) return 0;
  for (int t = 0; t < gr->n_instr; t++)
    for (int k = 0; k < 3; k++)
      if (gr->instr[t].src[k].kind == GX_OPD_IN && gr->instr[t].src[k].idx == j && t > w) return 0;
  if (gr->has_reduce && gr->red_src.kind == GX_OPD_IN && gr->red_src.idx == j) return 0;
  return 1;
}

typedef struct {
  int* buf_of;  /* per value: buffer index of an arena root, -1 otherwise */
  int* first;   /* per value (roots): step writing it */
  int* last;    /* per value (roots): last step reading it */
} live_t;

static void try_inplace(kiln_exec_t* e, live_t* L, int s_idx, const gx_node* n) {
  const kiln_graph_t* g = e->wg;
  const int* ins;
  int n_in;
  const int* outs;
  int n_out = step_outputs(e, n, &outs);
  const gx_group* gr = NULL;
  if (n->op == GX_OP_FUSED) {
    gr = &e->groups[n->aux];
    ins = gr->in_vids;
    n_in = gr->n_in;
  } else if (gx_is_pointwise(n->op)) {
    ins = n->in;
    n_in = n->n_in;
  } else {
    return;
  }
  for (int o = 0; o < n_out; o++) {
    int ov = outs[o];
    if (ov < 0 || !e->v_used[ov]) continue;
    const gx_value* vo = &g->values[ov];
    if (e->st_cls[ov] != GX_ST_ARENA || vo->root != ov) continue;
    for (int j = 0; j < n_in; j++) {
      int xv = ins[j];
      if (xv < 0) continue;
      const gx_value* vx = &g->values[xv];
      int r = vx->root;
      if (e->st_cls[r] != GX_ST_ARENA) continue;
      int b = L->buf_of[r];
      if (b < 0 || e->bufs[b].last != s_idx || e->bufs[b].first >= s_idx) continue;
      int taken = 0; /* already given to another result of this step */
      for (int q = 0; q < o; q++)
        if (outs[q] >= 0 && L->buf_of[outs[q]] == b) taken = 1;
      if (taken) continue;
      if (vx->ndim != vo->ndim || memcmp(vx->shape, vo->shape, sizeof(int64_t) * (size_t)vo->ndim))
        continue;
      if (kiln_dtype_size((kiln_dtype_t)vx->dtype) != kiln_dtype_size((kiln_dtype_t)vo->dtype))
        continue;
      const gx_value* vr = &g->values[r];
      gx_value tmp = *vx;
      tmp.dtype = vr->dtype;
      if (!gx_is_identity(&tmp, vr) || vr->numel != vo->numel) continue;
      /* no other operand may read the same storage through another window */
      int clash = 0;
      for (int k = 0; k < n_in && !clash; k++) {
        if (k == j || ins[k] < 0) continue;
        const gx_value* vk = &g->values[ins[k]];
        if (vk->root == r && ins[k] != xv) clash = 1;
      }
      if (clash) continue;
      if (gr) {
        int ok = 1;
        for (int k = 0; k < n_in && ok; k++)
          if (ins[k] == xv) ok = group_reads_before(gr, k, o);
        if (!ok) continue;
      }
      /* reuse: o lives in b from now on */
      L->buf_of[ov] = b;
      int lo = L->last[ov] > s_idx ? L->last[ov] : s_idx;
      e->bufs[b].last = lo;
      e->bufs[b].n_shared++;
      e->stats.n_inplace++;
      break;
    }
  }
}

/* ---- placement ------------------------------------------------------------------------------- */

static kiln_status_t place(kiln_exec_t* e) {
  int nb = e->n_bufs;
  if (nb == 0) {
    e->arena_bytes = 0;
    return KILN_OK;
  }
  int* idx = gx_alloc(&e->alloc, sizeof(int) * (size_t)nb);
  int* placed = gx_alloc(&e->alloc, sizeof(int) * (size_t)nb);
  int* live = gx_alloc(&e->alloc, sizeof(int) * (size_t)nb);
  if (!idx || !placed || !live) {
    gx_free(&e->alloc, idx);
    gx_free(&e->alloc, placed);
    gx_free(&e->alloc, live);
    return kiln_error(KILN_ERROR_OUT_OF_MEMORY, "kiln graph: out of memory (memory plan)");
  }
  for (int i = 0; i < nb; i++) idx[i] = i;
  int64_t arena = 0;
  int too_big = 0;
  if (e->flags & KILN_COMPILE_NO_MEMORY_REUSE) {
    for (int i = 0; i < nb && !too_big; i++) {
      e->bufs[i].offset = arena;
      too_big = !kiln_add_i64(arena, e->bufs[i].bytes, &arena) || arena > GX_ARENA_MAX;
    }
  } else {
    /* largest first (ties: earliest first); insertion sort keeps this thread-safe and stable */
    for (int i = 1; i < nb; i++) {
      int x = idx[i], j = i - 1;
      const gx_buffer* bx = &e->bufs[x];
      while (j >= 0) {
        const gx_buffer* by = &e->bufs[idx[j]];
        int before = bx->bytes > by->bytes || (bx->bytes == by->bytes && bx->first < by->first);
        if (!before) break;
        idx[j + 1] = idx[j];
        j--;
      }
      idx[j + 1] = x;
    }
    int n_placed = 0;
    for (int ii = 0; ii < nb && !too_big; ii++) {
      gx_buffer* b = &e->bufs[idx[ii]];
      int nl = 0;
      for (int k = 0; k < n_placed; k++) {
        const gx_buffer* o = &e->bufs[placed[k]];
        if (o->first <= b->last && b->first <= o->last && o->bytes > 0) live[nl++] = placed[k];
      }
      /* sort overlapping buffers by offset (insertion sort, nl is small in practice) */
      for (int i = 1; i < nl; i++) {
        int x = live[i], j = i - 1;
        while (j >= 0 && e->bufs[live[j]].offset > e->bufs[x].offset) {
          live[j + 1] = live[j];
          j--;
        }
        live[j + 1] = x;
      }
      int64_t best = -1, best_gap = INT64_MAX, cur = 0;
      for (int k = 0; k <= nl; k++) {
        int64_t end = k < nl ? e->bufs[live[k]].offset : INT64_MAX;
        if (end - cur >= b->bytes && end != INT64_MAX) {
          int64_t gap = end - cur;
          if (gap < best_gap) {
            best_gap = gap;
            best = cur;
          }
        }
        if (k < nl) {
          int64_t oe = e->bufs[live[k]].offset + e->bufs[live[k]].bytes;
          if (oe > cur) cur = oe;
        }
      }
      b->offset = best >= 0 ? best : cur;
      /* offsets <= arena <= GX_ARENA_MAX and bytes <= 2^51: no sum here overflows */
      if (b->offset + b->bytes > arena) arena = b->offset + b->bytes;
      too_big = arena > GX_ARENA_MAX;
      placed[n_placed++] = idx[ii];
    }
  }
  e->arena_bytes = arena;
  gx_free(&e->alloc, idx);
  gx_free(&e->alloc, placed);
  gx_free(&e->alloc, live);
  if (too_big)
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT,
                      "kiln_graph_compile: the intermediates need more than 2^62 bytes at once "
                      "(%d buffers)", nb);
  return KILN_OK;
}

/* ---- the plan -------------------------------------------------------------------------------- */

static kiln_tensor_t value_tensor(const gx_value* v) {
  kiln_tensor_t t;
  memset(&t, 0, sizeof t);
  t.dtype = (kiln_dtype_t)v->dtype;
  t.ndim = v->ndim;
  for (int i = 0; i < v->ndim; i++) {
    t.shape[i] = v->shape[i];
    t.strides[i] = v->strides[i];
  }
  return t;
}

static _Alignas(64) char g_empty[64]; /* data of zero-size buffers when there is no arena */

kiln_status_t gx_plan(kiln_exec_t* e) {
  kiln_graph_t* g = e->wg;
  const kiln_allocator_t* a = &e->alloc;
  int NV = g->n_values;
  int n_steps_max = e->n_order + g->n_outputs + 1;
  e->steps = gx_alloc(a, sizeof(gx_step) * (size_t)n_steps_max);
  e->st_cls = gx_calloc(a, (size_t)NV + 1, sizeof(int));
  e->st_idx = gx_calloc(a, (size_t)NV + 1, sizeof(int));
  e->v_used = gx_calloc(a, (size_t)NV + 1, sizeof(int));
  e->vt = gx_calloc(a, (size_t)NV + 1, sizeof(kiln_tensor_t));
  e->out_t = gx_calloc(a, (size_t)g->n_outputs + 1, sizeof(kiln_tensor_t));
  e->bufs = gx_calloc(a, (size_t)NV + 1, sizeof(gx_buffer));
  e->arena_off = gx_calloc(a, (size_t)NV + 1, sizeof(int64_t));
  live_t L;
  L.buf_of = gx_alloc(a, sizeof(int) * (size_t)(NV + 1));
  L.first = gx_alloc(a, sizeof(int) * (size_t)(NV + 1));
  L.last = gx_alloc(a, sizeof(int) * (size_t)(NV + 1));
  int* out_copy = gx_calloc(a, (size_t)g->n_outputs + 1, sizeof(int));
  kiln_status_t st = KILN_OK;
  if (!e->steps || !e->st_cls || !e->st_idx || !e->v_used || !e->vt || !e->out_t || !e->bufs || !e->arena_off ||
      !L.buf_of || !L.first || !L.last || !out_copy) {
    st = kiln_error(KILN_ERROR_OUT_OF_MEMORY, "kiln graph: out of memory (plan)");
    goto done;
  }

  /* 1. which values are touched: inputs of compute nodes, their outputs, graph outputs */
  for (int oi = 0; oi < e->n_order; oi++) {
    const gx_node* n = &g->nodes[e->order[oi]];
    if (!is_compute(n->op)) continue;
    const int* ins = n->in;
    int n_in = n->n_in;
    if (n->op == GX_OP_FUSED) {
      ins = e->groups[n->aux].in_vids;
      n_in = e->groups[n->aux].n_in;
    }
    for (int k = 0; k < n_in; k++)
      if (ins[k] >= 0) e->v_used[ins[k]] = 1;
  }
  for (int k = 0; k < g->n_outputs; k++) e->v_used[g->outputs[k]] = 1;
  for (int oi = 0; oi < e->n_order; oi++) {
    const gx_node* n = &g->nodes[e->order[oi]];
    if (!is_compute(n->op)) continue;
    const int* outs;
    int n_out = step_outputs(e, n, &outs);
    for (int k = 0; k < n_out; k++) {
      if (outs[k] < 0) continue;
      if (!e->v_used[outs[k]] && !(n->op != GX_OP_FUSED && gx_out_optional(n->op, k)))
        e->v_used[outs[k]] = 1;
    }
  }
  /* roots of used values are used too */
  for (int v = 0; v < NV; v++)
    if (e->v_used[v]) e->v_used[g->values[v].root] = 1;
  /* an output that is a window of a used result (an elided cat's or contiguous's input) must be
   * written, optional or not: the result's reader sees it only through that result */
  for (int oi = 0; oi < e->n_order; oi++) {
    const gx_node* n = &g->nodes[e->order[oi]];
    if (!is_compute(n->op)) continue;
    const int* outs;
    int n_out = step_outputs(e, n, &outs);
    for (int k = 0; k < n_out; k++)
      if (outs[k] >= 0 && g->values[outs[k]].root != outs[k] && e->v_used[g->values[outs[k]].root])
        e->v_used[outs[k]] = 1;
  }

  /* 2. storage classes of roots */
  for (int v = 0; v < NV; v++) {
    e->st_cls[v] = GX_ST_NONE;
    e->st_idx[v] = -1;
    L.buf_of[v] = -1;
    L.first[v] = -1;
    L.last[v] = -1;
    if (!e->v_used[v] || g->values[v].root != v) continue;
    const gx_node* p = &g->nodes[g->values[v].node];
    if (p->op == GX_OP_INPUT) {
      e->st_cls[v] = GX_ST_INPUT;
      e->st_idx[v] = p->sub;
    } else if (p->op == GX_OP_CONST) {
      e->st_cls[v] = GX_ST_CONST;
    } else {
      e->st_cls[v] = GX_ST_ARENA;
    }
  }
  for (int k = 0; k < g->n_outputs; k++) {
    const gx_value* v = &g->values[g->outputs[k]];
    int r = v->root;
    out_copy[k] = 1;
    if (e->st_cls[r] == GX_ST_ARENA && gx_is_identity(v, &g->values[r])) {
      e->st_cls[r] = GX_ST_OUTPUT;
      e->st_idx[r] = k;
      out_copy[k] = 0;
    }
  }

  /* 3. steps: node steps in order, output copies right after the step writing their root */
  int ns = 0;
  for (int k = 0; k < g->n_outputs; k++) {
    int r = g->values[g->outputs[k]].root;
    if (out_copy[k] && (e->st_cls[r] == GX_ST_INPUT || e->st_cls[r] == GX_ST_CONST)) {
      gx_step s = {GX_STEP_COPY, -1, g->outputs[k], k, 1, 0};
      e->steps[ns++] = s;
    }
  }
  /* the last step writing into each root (several for the windows of an elided cat) */
  for (int oi = 0; oi < e->n_order; oi++) {
    const gx_node* n = &g->nodes[e->order[oi]];
    if (!is_compute(n->op) || gx_cat_elided(n)) continue;
    const int* outs;
    int n_out = step_outputs(e, n, &outs);
    for (int j = 0; j < n_out; j++)
      if (outs[j] >= 0) L.last[g->values[outs[j]].root] = oi;
  }
  for (int oi = 0; oi < e->n_order; oi++) {
    int id = e->order[oi];
    const gx_node* n = &g->nodes[id];
    if (!is_compute(n->op) || gx_cat_elided(n)) continue;
    gx_step s = {GX_STEP_NODE, id, -1, -1, 1, 0};
    e->steps[ns++] = s;
    for (int k = 0; k < g->n_outputs; k++) {
      int r = g->values[g->outputs[k]].root;
      if (out_copy[k] && e->st_cls[r] != GX_ST_INPUT && e->st_cls[r] != GX_ST_CONST &&
          L.last[r] == oi) {
        gx_step c = {GX_STEP_COPY, -1, g->outputs[k], k, 1, 0};
        e->steps[ns++] = c;
      }
    }
  }
  for (int v = 0; v < NV; v++) L.last[v] = -1;
  e->n_steps = ns;
  plan_chains(e, ns);

  /* 4. liveness per root (a tile chain's values are live over the whole chain: its members run
   * interleaved tile by tile) */
  for (int s = 0; s < ns; s++) {
    const gx_step* sp = &e->steps[s];
    const int hi = chain_end(e, s);
    if (sp->kind == GX_STEP_COPY) {
      int r = g->values[sp->src].root;
      L.last[r] = s;
      e->stats.n_output_copies++;
      continue;
    }
    const gx_node* n = &g->nodes[sp->node];
    const int* ins = n->in;
    int n_in = n->n_in;
    if (n->op == GX_OP_FUSED) {
      ins = e->groups[n->aux].in_vids;
      n_in = e->groups[n->aux].n_in;
    }
    for (int k = 0; k < n_in; k++)
      if (ins[k] >= 0) L.last[g->values[ins[k]].root] = hi;
    const int* outs;
    int n_out = step_outputs(e, n, &outs);
    for (int k = 0; k < n_out; k++) {
      if (outs[k] < 0 || !e->v_used[outs[k]]) continue;
      int r = g->values[outs[k]].root; /* itself, or the value it is a window of */
      if (L.first[r] < 0) L.first[r] = chain_start(e, s);
      if (hi > s && L.last[r] < hi) L.last[r] = hi; /* written inside a chain: live to its end */
    }
  }

  /* 5. buffers (with in-place reuse) in step order */
  e->n_bufs = 0;
  for (int s = 0; s < ns; s++) {
    const gx_step* sp = &e->steps[s];
    if (sp->kind != GX_STEP_NODE) continue;
    const gx_node* n = &g->nodes[sp->node];
    if (!(e->flags & (KILN_COMPILE_NO_INPLACE | KILN_COMPILE_NO_MEMORY_REUSE)) && sp->chain == 1)
      try_inplace(e, &L, s, n);
    const int* outs;
    int n_out = step_outputs(e, n, &outs);
    for (int k = 0; k < n_out; k++) {
      int v = outs[k];
      if (v < 0 || !e->v_used[v]) continue;
      v = g->values[v].root; /* a window's buffer starts at its first writer */
      if (e->st_cls[v] != GX_ST_ARENA || L.buf_of[v] >= 0) continue;
      gx_buffer* b = &e->bufs[e->n_bufs];
      b->root = v;
      b->bytes = round_up(value_bytes(&g->values[v]));
      b->first = chain_start(e, s);
      b->last = L.last[v] > s ? L.last[v] : s; /* (values written in a chain: L.last >= its end) */
      b->offset = 0;
      b->n_shared = 1;
      L.buf_of[v] = e->n_bufs++;
    }
  }
  for (int v = 0; v < NV; v++) {
    if (e->st_cls[v] == GX_ST_ARENA) {
      if (L.buf_of[v] < 0) {
        st = kiln_error(KILN_ERROR_INTERNAL, "kiln graph: value %d has no buffer", v);
        goto done;
      }
      e->st_idx[v] = L.buf_of[v];
      if (!kiln_add_i64(e->stats.intermediates_bytes, round_up(value_bytes(&g->values[v])),
                        &e->stats.intermediates_bytes))
        e->stats.intermediates_bytes = INT64_MAX; /* a statistic: saturates */
    }
  }
  st = place(e);
  if (st != KILN_OK) goto done;

  /* 6. memory: the arena is bound per run (kiln_exec_run_workspace, or a run context's own
   * arena, allocated by its first kiln_exec_run); the interpreter scratch belongs to the run
   * contexts (runctx.c), sized here. */
  e->n_threads = kiln_threadpool_size(kiln_threadpool_default());
  if (e->n_threads < 1) e->n_threads = 1;
  int64_t per = 0;
  for (int i = 0; i < e->n_groups; i++) {
    const gx_group* gr = &e->groups[i];
    int64_t need = gx_group_scratch(gr);
    if (need > per) per = need;
  }
  e->scratch_per_thread = per;
  int64_t scratch_all; /* allocated per run context (runctx.c); checked here once */
  if (!kiln_mul_i64(per, e->n_threads, &scratch_all)) {
    st = kiln_error(KILN_ERROR_OUT_OF_MEMORY, "kiln graph: scratch of %lld bytes per thread",
                    (long long)per);
    goto done;
  }

  /* 7. descriptors */
  for (int v = 0; v < NV; v++) {
    if (!e->v_used[v]) continue;
    const gx_value* val = &g->values[v];
    e->vt[v] = value_tensor(val);
    int r = val->root;
    int64_t off = val->offset * (int64_t)kiln_dtype_size((kiln_dtype_t)val->dtype);
    if (e->st_cls[r] == GX_ST_CONST) {
      char* base = g->nodes[g->values[r].node].data;
      e->vt[v].data = base ? base + off : g_empty;
    } else if (e->st_cls[r] == GX_ST_ARENA) {
      e->arena_off[v] = e->bufs[e->st_idx[r]].offset + off;
      e->vt[v].data = g_empty; /* rebound to the run's arena when it has bytes */
    }
  }
  for (int k = 0; k < g->n_outputs; k++) {
    const gx_value* v = &g->values[g->outputs[k]];
    kiln_tensor_init_contiguous(&e->out_t[k], NULL, (kiln_dtype_t)v->dtype, v->ndim, v->shape);
  }

  /* 8. stats */
  for (int s = 0; s < ns; s++)
    if (e->steps[s].kind == GX_STEP_NODE) e->stats.n_nodes_after++;
  e->stats.n_kernels_per_run = ns;
  e->stats.arena_bytes = e->arena_bytes;
  e->stats.scratch_bytes = per * e->n_threads;
  for (int v = 0; v < NV; v++)
    if (e->st_cls[v] == GX_ST_CONST && !kiln_add_i64(e->stats.constant_bytes,
                                                     value_bytes(&g->values[v]),
                                                     &e->stats.constant_bytes))
      e->stats.constant_bytes = INT64_MAX;

done:
  gx_free(a, L.buf_of);
  gx_free(a, L.first);
  gx_free(a, L.last);
  gx_free(a, out_copy);
  return st;
}
