/* SPDX-License-Identifier: Apache-2.0 */
/* passes.c - graph-level passes on the working graph: topological order, DCE, CSE, constant
 * folding, view sinking, and view elimination (layouts). */
#include <math.h>
#include <string.h>

#include "graph/graph_internal.h"
#include "kiln/dtype.h"
#include "kiln/kernels/elementwise.h"
#include "runtime/checked.h"

#define FOLD_MAX_BYTES (16 << 20)
#define FOLD_MIN_BYTES (64 << 10)
/* elements a folded node may read through its (view) inputs: a reduction of full([2**40]) has a
 * tiny constant root but would read 2^40 elements at compile time; it is left to run time */
#define FOLD_MAX_READ (INT64_C(4) << 20)

/* ---- order and uses -------------------------------------------------------------------------- */

/* DFS post-order. Seeds: the output-producing nodes (all == 0), or every node in index order
 * (all == 1), or every node in index order whose `only` flag is set (all == 2). Seeding in index
 * order keeps the order in which the graph was built (for FX graphs: the program order, which
 * keeps few values alive at once) wherever dependencies allow. */
static kiln_status_t topo_ex(const kiln_graph_t* g, int all, const char* only, int** order_out,
                             int* n_out) {
  const kiln_allocator_t* a = &g->alloc;
  int N = g->n_nodes;
  int* order = gx_alloc(a, sizeof(int) * (size_t)(N + 1));
  char* state = gx_calloc(a, (size_t)(N + 1), 1);
  int* stack = gx_alloc(a, sizeof(int) * (size_t)(N + 1));
  int* next = gx_alloc(a, sizeof(int) * (size_t)(N + 1));
  if (!order || !state || !stack || !next) {
    gx_free(a, order);
    gx_free(a, state);
    gx_free(a, stack);
    gx_free(a, next);
    return kiln_error(KILN_ERROR_OUT_OF_MEMORY, "kiln graph: out of memory (topological order)");
  }
  int n = 0;
  int n_seeds = all ? N : g->n_outputs;
  for (int si = 0; si < n_seeds; si++) {
    int seed = all ? si : g->values[g->outputs[si]].node;
    if (g->nodes[seed].dead || state[seed] || (all == 2 && !only[seed])) continue;
    int sp = 0;
    stack[sp] = seed;
    next[sp] = 0;
    sp++;
    state[seed] = 1;
    while (sp > 0) {
      int nd = stack[sp - 1];
      const gx_node* node = &g->nodes[nd];
      if (next[sp - 1] < node->n_in) {
        int vid = node->in[next[sp - 1]++];
        if (vid < 0) continue;
        int p = g->values[vid].node;
        if (state[p]) continue;
        state[p] = 1;
        stack[sp] = p;
        next[sp] = 0;
        sp++;
      } else {
        state[nd] = 2;
        order[n++] = nd;
        sp--;
      }
    }
  }
  gx_free(a, state);
  gx_free(a, stack);
  gx_free(a, next);
  *order_out = order;
  *n_out = n;
  return KILN_OK;
}

static kiln_status_t topo(const kiln_graph_t* g, int all, int** order_out, int* n_out) {
  return topo_ex(g, all, NULL, order_out, n_out);
}

/* The live nodes (those reachable from the outputs) in build order, dependencies first. */
static kiln_status_t topo_build_order(const kiln_graph_t* g, int** order_out, int* n_out) {
  int* live_order;
  int n;
  KILN_RETURN_IF_ERROR(topo(g, 0, &live_order, &n));
  char* live = gx_calloc(&g->alloc, (size_t)g->n_nodes + 1, 1);
  if (!live) {
    gx_free(&g->alloc, live_order);
    return kiln_error(KILN_ERROR_OUT_OF_MEMORY, "kiln graph: out of memory (topological order)");
  }
  for (int i = 0; i < n; i++) live[live_order[i]] = 1;
  gx_free(&g->alloc, live_order);
  kiln_status_t st = topo_ex(g, 2, live, order_out, n_out);
  gx_free(&g->alloc, live);
  return st;
}

kiln_status_t gx_topo_order(const kiln_graph_t* g, int** order, int* n) {
  return topo(g, 0, order, n);
}

void gx_count_uses(const kiln_graph_t* g, const int* order, int n, int* uses) {
  memset(uses, 0, sizeof(int) * (size_t)g->n_values);
  for (int i = 0; i < n; i++) {
    const gx_node* nd = &g->nodes[order[i]];
    for (int k = 0; k < nd->n_in; k++)
      if (nd->in[k] >= 0) uses[nd->in[k]]++;
  }
  for (int k = 0; k < g->n_outputs; k++) uses[g->outputs[k]]++;
}

void gx_replace_uses(kiln_graph_t* g, int old_vid, int new_vid) {
  for (int i = 0; i < g->n_nodes; i++) {
    gx_node* nd = &g->nodes[i];
    if (nd->dead) continue;
    for (int k = 0; k < nd->n_in; k++)
      if (nd->in[k] == old_vid) nd->in[k] = new_vid;
  }
  for (int k = 0; k < g->n_outputs; k++)
    if (g->outputs[k] == old_vid) g->outputs[k] = new_vid;
}

/* Applies a forwarding table to every live node's inputs and to the outputs. */
static void apply_fwd(kiln_graph_t* g, const int* fwd) {
  for (int i = 0; i < g->n_nodes; i++) {
    gx_node* nd = &g->nodes[i];
    if (nd->dead) continue;
    for (int k = 0; k < nd->n_in; k++)
      if (nd->in[k] >= 0) nd->in[k] = fwd[nd->in[k]];
  }
  for (int k = 0; k < g->n_outputs; k++) g->outputs[k] = fwd[g->outputs[k]];
}

/* ---- DCE ------------------------------------------------------------------------------------- */

kiln_status_t gx_pass_dce(kiln_graph_t* g, int64_t* removed) {
  int* order;
  int n;
  KILN_RETURN_IF_ERROR(topo(g, 0, &order, &n));
  char* live = gx_calloc(&g->alloc, (size_t)g->n_nodes + 1, 1);
  if (!live) {
    gx_free(&g->alloc, order);
    return kiln_error(KILN_ERROR_OUT_OF_MEMORY, "kiln graph: out of memory (DCE)");
  }
  for (int i = 0; i < n; i++) live[order[i]] = 1;
  for (int i = 0; i < g->n_nodes; i++) {
    gx_node* nd = &g->nodes[i];
    if (nd->dead || live[i] || nd->op == GX_OP_INPUT) continue;
    nd->dead = 1;
    if (nd->op != GX_OP_CONST && removed) (*removed)++;
  }
  gx_free(&g->alloc, live);
  gx_free(&g->alloc, order);
  return KILN_OK;
}

/* ---- CSE ------------------------------------------------------------------------------------- */

static uint64_t mix(uint64_t h, uint64_t x) {
  h ^= x + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h * 0xff51afd7ed558ccdull;
}

static uint64_t node_hash(const kiln_graph_t* g, const gx_node* n) {
  uint64_t h = mix(0, (uint64_t)n->op);
  h = mix(h, (uint64_t)(uint32_t)n->sub);
  h = mix(h, (uint64_t)(uint32_t)n->dtype);
  h = mix(h, (uint64_t)(uint32_t)n->dtype2);
  h = mix(h, (uint64_t)n->n_in);
  for (int k = 0; k < n->n_in; k++) h = mix(h, (uint64_t)(uint32_t)n->in[k]);
  h = mix(h, (uint64_t)n->n_i);
  for (int k = 0; k < GX_MAX_I; k++) h = mix(h, (uint64_t)n->i[k]);
  for (int k = 0; k < GX_MAX_F; k++) {
    uint64_t b;
    memcpy(&b, &n->f[k], 8);
    h = mix(h, b);
  }
  for (int k = 0; k < GX_MAX_OUT; k++) h = mix(h, n->out[k] >= 0);
  if (n->op == GX_OP_CONST) {
    /* Word-wise over small constants; a large one (weights) by 64 samples of 64 bytes spread
     * over it and its last 64 bytes: equal hashes are confirmed by memcmp (node_equal), so the
     * sampling costs only collisions, and hashing 80 MB of weights byte by byte took most of a
     * model's load time. */
    const unsigned char* p = n->data;
    const size_t nb = n->data_bytes;
    h = mix(h, nb);
    if (nb <= 4096) {
      size_t i = 0;
      for (; i + 8 <= nb; i += 8) {
        uint64_t w;
        memcpy(&w, p + i, 8);
        h = mix(h, w);
      }
      for (; i < nb; i++) h = mix(h, p[i]);
    } else {
      const size_t step = (nb - 64) / 64;
      for (int s = 0; s <= 64; s++) {
        const unsigned char* q = s < 64 ? p + (size_t)s * step : p + nb - 64;
        for (int k = 0; k < 64; k += 8) {
          uint64_t w;
          memcpy(&w, q + k, 8);
          h = mix(h, w);
        }
      }
    }
  }
  (void)g;
  return h;
}

static int node_equal(const gx_node* a, const gx_node* b) {
  if (a->op != b->op || a->sub != b->sub || a->dtype != b->dtype || a->dtype2 != b->dtype2 ||
      a->n_in != b->n_in || a->n_i != b->n_i)
    return 0;
  for (int k = 0; k < a->n_in; k++)
    if (a->in[k] != b->in[k]) return 0;
  if (memcmp(a->i, b->i, sizeof a->i) || memcmp(a->f, b->f, sizeof a->f)) return 0;
  for (int k = 0; k < GX_MAX_OUT; k++)
    if ((a->out[k] >= 0) != (b->out[k] >= 0)) return 0;
  if (a->op == GX_OP_CONST &&
      (a->data_bytes != b->data_bytes ||
       (a->data_bytes && memcmp(a->data, b->data, a->data_bytes))))
    return 0;
  return 1;
}

kiln_status_t gx_pass_cse(kiln_graph_t* g, int64_t* merged) {
  int* order;
  int n;
  KILN_RETURN_IF_ERROR(topo(g, 0, &order, &n));
  const kiln_allocator_t* a = &g->alloc;
  int cap = 16;
  while (cap < 2 * n) cap *= 2;
  int* table = gx_alloc(a, sizeof(int) * (size_t)cap);
  int* fwd = gx_alloc(a, sizeof(int) * (size_t)(g->n_values + 1));
  if (!table || !fwd) {
    gx_free(a, table);
    gx_free(a, fwd);
    gx_free(a, order);
    return kiln_error(KILN_ERROR_OUT_OF_MEMORY, "kiln graph: out of memory (CSE)");
  }
  for (int i = 0; i < cap; i++) table[i] = -1;
  for (int v = 0; v < g->n_values; v++) fwd[v] = v;
  for (int oi = 0; oi < n; oi++) {
    gx_node* nd = &g->nodes[order[oi]];
    for (int k = 0; k < nd->n_in; k++)
      if (nd->in[k] >= 0) nd->in[k] = fwd[nd->in[k]];
    if (nd->op == GX_OP_INPUT) continue;
    uint64_t h = node_hash(g, nd);
    size_t slot = (size_t)(h & (uint64_t)(cap - 1));
    for (;;) {
      int other = table[slot];
      if (other < 0) {
        table[slot] = order[oi];
        break;
      }
      if (node_equal(&g->nodes[other], nd)) {
        for (int k = 0; k < GX_MAX_OUT; k++)
          if (nd->out[k] >= 0) fwd[nd->out[k]] = g->nodes[other].out[k];
        nd->dead = 1;
        if (merged && nd->op != GX_OP_CONST) (*merged)++;
        break;
      }
      slot = (slot + 1) & (size_t)(cap - 1);
    }
  }
  apply_fwd(g, fwd);
  gx_free(a, table);
  gx_free(a, fwd);
  gx_free(a, order);
  return KILN_OK;
}

/* ---- constant folding ------------------------------------------------------------------------ */

static int foldable(int op) {
  return op != GX_OP_INPUT && op != GX_OP_CONST && !gx_is_view(op) && op < GX_OP_BUILD_COUNT;
}

static kiln_tensor_t layout_tensor(const kiln_graph_t* g, const gx_value* v, char* base) {
  kiln_tensor_t t;
  t.data = base ? base + v->offset * (int64_t)kiln_dtype_size((kiln_dtype_t)v->dtype) : NULL;
  t.dtype = (kiln_dtype_t)v->dtype;
  t.ndim = v->ndim;
  for (int i = 0; i < v->ndim; i++) {
    t.shape[i] = v->shape[i];
    t.strides[i] = v->strides[i];
  }
  (void)g;
  return t;
}

/* Tries to evaluate node `id`; returns 1 when it was replaced by constants. */
static int try_fold(kiln_graph_t* g, int id, int* fwd) {
  gx_node* nd = &g->nodes[id];
  int64_t in_bytes = 0, out_bytes = 0, read = 0, b;
  /* every value holds <= 2^48 elements of <= 8 bytes; the sums are checked all the same */
  for (int k = 0; k < nd->n_in; k++) {
    if (nd->in[k] < 0) continue;
    const gx_value* v = &g->values[nd->in[k]];
    if (!v->has_layout) return 0;
    const gx_value* r = &g->values[v->root];
    if (g->nodes[r->node].op != GX_OP_CONST) return 0;
    if (!kiln_mul_i64(r->numel, (int64_t)kiln_dtype_size((kiln_dtype_t)r->dtype), &b) ||
        !kiln_add_i64(in_bytes, b, &in_bytes) || !kiln_add_i64(read, v->numel, &read) ||
        read > FOLD_MAX_READ)
      return 0;
  }
  for (int k = 0; k < nd->n_out; k++) {
    if (nd->out[k] < 0) continue;
    const gx_value* v = &g->values[nd->out[k]];
    if (!kiln_mul_i64(v->numel, (int64_t)kiln_dtype_size((kiln_dtype_t)v->dtype), &b) ||
        !kiln_add_i64(out_bytes, b, &out_bytes) || out_bytes > FOLD_MAX_BYTES)
      return 0;
  }
  int64_t limit = in_bytes > FOLD_MIN_BYTES / 4 ? 4 * in_bytes : FOLD_MIN_BYTES;
  if (out_bytes > limit) return 0;

  kiln_tensor_t tin[64], tout[GX_MAX_OUT];
  kiln_tensor_t* pin[64];
  kiln_tensor_t* pout[GX_MAX_OUT] = {NULL, NULL, NULL};
  void* bufs[GX_MAX_OUT] = {NULL, NULL, NULL};
  if (nd->n_in > 64) return 0;
  for (int k = 0; k < nd->n_in; k++) {
    pin[k] = NULL;
    if (nd->in[k] < 0) continue;
    const gx_value* v = &g->values[nd->in[k]];
    const gx_node* c = &g->nodes[g->values[v->root].node];
    tin[k] = layout_tensor(g, v, c->data);
    pin[k] = &tin[k];
  }
  int ok = 1;
  for (int k = 0; k < nd->n_out && ok; k++) {
    if (nd->out[k] < 0) continue;
    const gx_value* v = &g->values[nd->out[k]];
    size_t bytes = (size_t)v->numel * kiln_dtype_size((kiln_dtype_t)v->dtype);
    bufs[k] = gx_alloc(&g->alloc, bytes);
    if (!bufs[k]) {
      ok = 0;
      break;
    }
    kiln_tensor_init_contiguous(&tout[k], bufs[k], (kiln_dtype_t)v->dtype, v->ndim, v->shape);
    pout[k] = &tout[k];
  }
  if (ok) ok = gx_run_node(g, nd, pin, pout) == KILN_OK;
  /* replace each output by a new constant node */
  int n_out = nd->n_out;
  int outs[GX_MAX_OUT];
  memcpy(outs, nd->out, sizeof outs);
  int made[GX_MAX_OUT] = {-1, -1, -1};
  for (int k = 0; k < n_out && ok; k++) {
    if (outs[k] < 0) continue;
    int cid;
    if (gx_new_node(g, GX_OP_CONST, 0, NULL, 1, 1u, &cid) != KILN_OK) {
      ok = 0;
      break;
    }
    gx_node* c = &g->nodes[cid];
    const gx_value* ov = &g->values[outs[k]];
    gx_value* cv = &g->values[c->out[0]];
    c->dtype = ov->dtype;
    c->n_i = ov->ndim;
    for (int i = 0; i < ov->ndim; i++) c->i[i] = ov->shape[i];
    c->data = bufs[k];
    c->data_bytes = (size_t)ov->numel * kiln_dtype_size((kiln_dtype_t)ov->dtype);
    c->owns_data = 1;
    bufs[k] = NULL;
    int nv = c->out[0];
    *cv = *ov;
    cv->node = cid;
    cv->slot = 0;
    cv->wrapped = 0;
    cv->root = nv;
    cv->offset = 0;
    gx_contig_strides(cv->shape, cv->ndim, cv->strides);
    cv->has_layout = 1;
    made[k] = nv;
  }
  for (int k = 0; k < GX_MAX_OUT; k++) gx_free(&g->alloc, bufs[k]);
  if (!ok) {
    /* keep the node; any constant already made stays unused (removed by DCE) */
    return 0;
  }
  for (int k = 0; k < n_out; k++)
    if (outs[k] >= 0) fwd[outs[k]] = made[k];
  g->nodes[id].dead = 1;
  return 1;
}

kiln_status_t gx_pass_fold(kiln_graph_t* g, int64_t* folded) {
  int* order;
  int n;
  KILN_RETURN_IF_ERROR(topo(g, 0, &order, &n));
  /* fwd must cover values appended while folding: size it for the worst case */
  int max_new = 0;
  for (int i = 0; i < n; i++) max_new += g->nodes[order[i]].n_out;
  int* fwd = gx_alloc(&g->alloc, sizeof(int) * (size_t)(g->n_values + max_new + 1));
  if (!fwd) {
    gx_free(&g->alloc, order);
    return kiln_error(KILN_ERROR_OUT_OF_MEMORY, "kiln graph: out of memory (folding)");
  }
  for (int v = 0; v < g->n_values + max_new + 1; v++) fwd[v] = v;
  for (int oi = 0; oi < n; oi++) {
    int id = order[oi];
    gx_node* nd = &g->nodes[id];
    for (int k = 0; k < nd->n_in; k++)
      if (nd->in[k] >= 0) nd->in[k] = fwd[nd->in[k]];
    if (foldable(nd->op) && try_fold(g, id, fwd)) {
      if (folded) (*folded)++;
      continue;
    }
    nd = &g->nodes[id];
    for (int k = 0; k < nd->n_out; k++)
      if (nd->out[k] >= 0) gx_layout_value(g, nd->out[k]);
  }
  apply_fwd(g, fwd);
  gx_free(&g->alloc, fwd);
  gx_free(&g->alloc, order);
  return KILN_OK;
}

/* ---- view elimination ------------------------------------------------------------------------ */

kiln_status_t gx_pass_views(kiln_exec_t* e) {
  kiln_graph_t* g = e->wg;
  int* order;
  int n;
  if (e->flags & KILN_COMPILE_NO_DCE)
    KILN_RETURN_IF_ERROR(topo(g, 1, &order, &n));
  else
    KILN_RETURN_IF_ERROR(topo_build_order(g, &order, &n));
  /* room for one inserted copy per node */
  int* out = gx_alloc(&g->alloc, sizeof(int) * (size_t)(2 * n + 1));
  if (!out) {
    gx_free(&g->alloc, order);
    return kiln_error(KILN_ERROR_OUT_OF_MEMORY, "kiln graph: out of memory (views)");
  }
  int m = 0;
  kiln_status_t st = KILN_OK;
  for (int oi = 0; oi < n && st == KILN_OK; oi++) {
    int id = order[oi];
    if (gx_is_view(g->nodes[id].op)) e->stats.n_views++;
    int ok = 1;
    for (int k = 0; k < g->nodes[id].n_out; k++)
      if (g->nodes[id].out[k] >= 0 && !gx_layout_value(g, g->nodes[id].out[k])) ok = 0;
    if (!ok) {
      /* a reshape of a layout that cannot be viewed: copy its input first */
      int x = g->nodes[id].in[0];
      int cid;
      st = gx_new_node(g, GX_OP_CONTIGUOUS, 1, &x, 1, 1u, &cid);
      if (st != KILN_OK) break;
      gx_node* c = &g->nodes[cid];
      gx_value* cv = &g->values[c->out[0]];
      const gx_value* xv = &g->values[x];
      c->dtype = xv->dtype;
      cv->dtype = xv->dtype;
      cv->ndim = xv->ndim;
      memcpy(cv->shape, xv->shape, sizeof cv->shape);
      cv->numel = xv->numel;
      gx_layout_value(g, c->out[0]);
      g->nodes[id].in[0] = c->out[0];
      gx_layout_value(g, g->nodes[id].out[0]);
      out[m++] = cid;
      e->stats.n_view_copies++;
    }
    out[m++] = id;
  }
  gx_free(&g->alloc, order);
  if (st != KILN_OK) {
    gx_free(&g->alloc, out);
    return st;
  }
  gx_free(&e->alloc, e->order);
  e->order = out;
  e->n_order = m;
  return KILN_OK;
}

/* ---- peephole: mul(x, sigmoid(x)) -> silu(x); log_softmax_bw(nll_loss_bw) -> one node ---------
 * mul(x, sigmoid(x)) is the core-ATen decomposition of silu. As one op it is one element kernel
 * (the same one eager silu runs, so compiled and eager agree bit for bit) and a GEMM epilogue
 * activation. Only f32 with f32 compute, same shapes (no broadcast), and a sigmoid used by
 * nothing else.
 * The cross-entropy backward, log_softmax_backward(nll_loss_backward(g, y, ..), y) over the
 * classes, becomes the nll_loss_bw node with i[2] = 1 (kiln_kernel_nll_log_softmax_backward:
 * the same bits without writing and re-reading the one-hot [N, C] gradient). Only f32, rank 1 or
 * 2, and an nll gradient read by nothing else. */

/* Fuses softmax_bw node `s` into the nll_loss_bw node producing its gradient; 1 if it did. */
static int fuse_nll_lsm(kiln_graph_t* g, const int* uses, gx_node* s) {
  if (s->dead || s->op != GX_OP_SOFTMAX_BW || s->n_in != 2 || s->i[1] == 0) return 0;
  const int gv = s->in[0], y = s->in[1];
  if (gv < 0 || y < 0 || uses[gv] != 1) return 0;
  gx_node* nb = &g->nodes[g->values[gv].node];
  if (nb->dead || nb->op != GX_OP_NLL_LOSS_BW || nb->in[1] != y || (nb->n_i > 2 && nb->i[2]) ||
      g->values[gv].root != gv)
    return 0;
  const gx_value* yv = &g->values[y];
  const gx_value* ov = &g->values[s->out[0]];
  int64_t dim = s->i[0] < 0 ? s->i[0] + yv->ndim : s->i[0];
  if (yv->ndim < 1 || yv->ndim > 2 || dim != yv->ndim - 1 || yv->dtype != KILN_DTYPE_F32 ||
      g->values[gv].dtype != KILN_DTYPE_F32 || ov->dtype != KILN_DTYPE_F32)
    return 0;
  nb->i[2] = 1;
  nb->n_i = 3;
  gx_replace_uses(g, s->out[0], gv);
  s->dead = 1;
  return 1;
}

kiln_status_t gx_pass_peephole(kiln_graph_t* g, int64_t* rewritten) {
  int* order;
  int n;
  KILN_RETURN_IF_ERROR(gx_topo_order(g, &order, &n));
  int* uses = gx_calloc(&g->alloc, (size_t)g->n_values + 1, sizeof(int));
  if (!uses) {
    gx_free(&g->alloc, order);
    return kiln_error(KILN_ERROR_OUT_OF_MEMORY, "kiln graph: out of memory (peephole)");
  }
  gx_count_uses(g, order, n, uses);
  for (int oi = 0; oi < n; oi++) {
    gx_node* m = &g->nodes[order[oi]];
    if (fuse_nll_lsm(g, uses, m)) {
      if (rewritten) (*rewritten)++;
      continue;
    }
    if (m->dead || m->op != GX_OP_BINARY || m->sub != KILN_BINARY_MUL || m->n_in != 2) continue;
    if (m->dtype != KILN_DTYPE_F32 || m->dtype2 != KILN_DTYPE_F32) continue;
    for (int side = 0; side < 2; side++) {
      const int x = m->in[1 - side], s = m->in[side];
      if (x < 0 || s < 0 || uses[s] != 1) continue;
      const gx_node* sg = &g->nodes[g->values[s].node];
      if (sg->dead || sg->op != GX_OP_UNARY || sg->sub != KILN_UNARY_SIGMOID || sg->in[0] != x ||
          sg->dtype2 != KILN_DTYPE_F32)
        continue;
      const gx_value* xv = &g->values[x];
      const gx_value* ov = &g->values[m->out[0]];
      if (xv->dtype != KILN_DTYPE_F32 || g->values[s].dtype != KILN_DTYPE_F32 ||
          xv->ndim != ov->ndim || memcmp(xv->shape, ov->shape, sizeof(int64_t) * (size_t)xv->ndim))
        continue;
      m->op = GX_OP_UNARY;
      m->sub = KILN_UNARY_SILU;
      m->n_in = 1;
      m->in[0] = x;
      memset(m->i, 0, sizeof m->i);
      memset(m->f, 0, sizeof m->f);
      m->n_i = 2; /* has_min, has_max (as kiln_graph_unary_ex) */
      uses[s]--;
      if (rewritten) (*rewritten)++;
      break;
    }
  }
  gx_free(&g->alloc, uses);
  gx_free(&g->alloc, order);
  return KILN_OK;
}
