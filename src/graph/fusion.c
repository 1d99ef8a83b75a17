/* SPDX-License-Identifier: Apache-2.0 */
/* fusion.c - view sinking, GEMM epilogue fusion and pointwise(+reduction) fusion.
 *
 * View sinking (graph level, before layouts): unary(reshape(r)) -> reshape(unary(r)), and the
 * same for binary/ternary ops whose other operands are scalars, trailing-dim broadcasts or of
 * the reshape's shape (those get reshaped too), so pointwise chains and GEMM epilogues are
 * seen in the producer's shape (e.g. addmm [B*T, N] -> view [B, T, N] -> gelu).
 *
 * Epilogue fusion: an f32 matmul/addmm whose operands have a GEMM layout, followed by a chain
 * of single-use nodes [+ bias] [act] [+ or * residual], becomes one GX_OP_GEMM node
 * (kiln_sgemm_ex). The product form is a gated unit, silu(x W1) * (x W3): the gate GEMM
 * applies silu and multiplies by the other product while its tile is in cache.
 *
 * Pointwise fusion: nodes are visited in execution order; a pointwise node joins the groups of
 * its pointwise producers (same shape, read directly, not through a view) when no node outside
 * the union reads a member before the node's position (the group runs at its last member).
 * A reduction over the trailing dims of a member's result can end the group. Groups of two or
 * more nodes (or with a reduction) become GX_OP_FUSED nodes with a register program.
 */
#include <string.h>

#include "graph/graph_internal.h"
#include "kiln/dtype.h"
#include "kiln/kernels/elementwise.h"
#include "kiln/kernels/gemm.h"
#include "kiln/kernels/reduce.h"

#define GX_GROUP_MAX 64      /* members per group */
#define GX_REDUCE_MAX 16384  /* reduced elements per row for a fused reduction */

/* ---- view sinking ---------------------------------------------------------------------------- */

static int same_shape(const gx_value* a, const gx_value* b) {
  return a->ndim == b->ndim && !memcmp(a->shape, b->shape, sizeof(int64_t) * (size_t)a->ndim);
}

/* reshape(x, shape) as a value id (-1 on failure): x itself when the shape already matches,
 * the input of x when x is a reshape of a value of that shape, else a new reshape node. */
static int add_reshape(kiln_graph_t* g, int x, int ndim, const int64_t* shape) {
  const gx_value* xv = &g->values[x];
  if (xv->ndim == ndim && !memcmp(xv->shape, shape, sizeof(int64_t) * (size_t)ndim)) return x;
  const gx_node* p = &g->nodes[xv->node];
  if (p->op == GX_OP_RESHAPE) {
    const gx_value* yv = &g->values[p->in[0]];
    if (yv->ndim == ndim && !memcmp(yv->shape, shape, sizeof(int64_t) * (size_t)ndim))
      return p->in[0];
  }
  gx_spec s;
  memset(&s, 0, sizeof s);
  s.op = GX_OP_RESHAPE;
  s.n_in = 1;
  s.in = &x;
  s.dtype = s.dtype2 = -1;
  s.n_i = ndim;
  for (int i = 0; i < ndim; i++) s.i[i] = shape[i];
  int out[GX_MAX_OUT];
  if (gx_add(g, &s, out) != KILN_OK) return -1;
  return out[0];
}

/* Tries to rewrite pointwise node `id` whose operand k0 is reshape(r). Returns 1 on success. */
static int sink_one(kiln_graph_t* g, int id) {
  gx_node* n = &g->nodes[id];
  int vk = -1;
  for (int k = 0; k < n->n_in; k++) {
    int v = n->in[k];
    if (v < 0) continue;
    const gx_node* p = &g->nodes[g->values[v].node];
    if (p->op == GX_OP_RESHAPE && !gx_is_view(g->nodes[g->values[p->in[0]].node].op)) {
      vk = k;
      break;
    }
  }
  if (vk < 0) return 0;
  int v = n->in[vk];
  int r = g->nodes[g->values[v].node].in[0];
  gx_value vv = g->values[v], rv = g->values[r], uv = g->values[n->out[0]];
  if (!same_shape(&uv, &vv)) return 0;
  /* new operands in r's shape */
  int nin[3] = {-1, -1, -1};
  int n_in = n->n_in;
  if (n_in > 3) return 0;
  for (int k = 0; k < n_in; k++) {
    int o = n->in[k];
    if (o < 0) continue;
    if (o == v) {
      nin[k] = r;
      continue;
    }
    const gx_value* ov = &g->values[o];
    if (same_shape(ov, &vv)) {
      nin[k] = -2; /* reshape later */
      continue;
    }
    /* trailing-dims broadcast: strip leading ones, the rest must match v's and r's tails */
    int lead = 0;
    while (lead < ov->ndim && ov->shape[lead] == 1) lead++;
    int kk = ov->ndim - lead;
    if (kk > vv.ndim || kk > rv.ndim) return 0;
    for (int i = 1; i <= kk; i++)
      if (vv.shape[vv.ndim - i] != rv.shape[rv.ndim - i]) return 0;
    nin[k] = lead ? -3 : o; /* -3: reshape to the stripped shape */
  }
  /* commit */
  for (int k = 0; k < n_in; k++) {
    int o = g->nodes[id].in[k];
    if (nin[k] == -2) {
      nin[k] = add_reshape(g, o, rv.ndim, rv.shape);
    } else if (nin[k] == -3) {
      const gx_value* ov = &g->values[o];
      int lead = 0;
      while (lead < ov->ndim && ov->shape[lead] == 1) lead++;
      int64_t sh[KILN_MAX_DIMS];
      memcpy(sh, ov->shape + lead, sizeof(int64_t) * (size_t)(ov->ndim - lead));
      nin[k] = add_reshape(g, o, ov->ndim - lead, sh);
    }
    if (o >= 0 && nin[k] < 0) return 0; /* out of memory: leave the (valid) graph as is */
  }
  /* a copy of the node in r's shape */
  gx_node old = g->nodes[id];
  int nid;
  if (gx_new_node(g, old.op, n_in, nin, 1, 1u, &nid) != KILN_OK) return 0;
  gx_node* nn = &g->nodes[nid];
  nn->sub = old.sub;
  nn->dtype = old.dtype;
  nn->dtype2 = old.dtype2;
  nn->n_i = old.n_i;
  memcpy(nn->i, old.i, sizeof nn->i);
  memcpy(nn->f, old.f, sizeof nn->f);
  gx_value* nv = &g->values[nn->out[0]];
  int nvid = nn->out[0];
  nv->dtype = uv.dtype;
  nv->ndim = rv.ndim;
  memcpy(nv->shape, rv.shape, sizeof nv->shape);
  nv->numel = rv.numel;
  int back = add_reshape(g, nvid, uv.ndim, uv.shape);
  if (back < 0) {
    g->nodes[nid].dead = 1;
    return 0;
  }
  gx_replace_uses(g, old.out[0], back);
  g->nodes[id].dead = 1;
  return 1;
}

/* reduce(reshape(r)) over trailing dims -> reshape(reduce(r) over the matching trailing dims of
 * r, keepdim). Returns 1 on success. */
static int sink_reduce(kiln_graph_t* g, int id) {
  gx_node* n = &g->nodes[id];
  int v = n->in[0];
  const gx_node* p = &g->nodes[g->values[v].node];
  if (p->op != GX_OP_RESHAPE || gx_is_view(g->nodes[g->values[p->in[0]].node].op)) return 0;
  int r = p->in[0];
  gx_value vv = g->values[v], rv = g->values[r], ov = g->values[n->out[0]];
  uint32_t mask = (uint32_t)n->i[0];
  int nd = vv.ndim, k = 0;
  while (k < nd && (mask & (1u << (nd - 1 - k)))) k++;
  if (k == 0 || (mask >> 0) != (((1u << nd) - 1) & ~((1u << (nd - k)) - 1))) return 0;
  int64_t red = gx_numel(vv.shape + nd - k, k);
  /* smallest j with prod(r.shape[j:]) == red */
  int j = rv.ndim;
  int64_t acc = 1;
  while (j > 0 && acc < red) acc *= rv.shape[--j];
  if (acc != red || red == 0) return 0;
  if (rv.ndim - j == 0) return 0;
  uint32_t nmask = ((1u << rv.ndim) - 1) & ~((1u << j) - 1);
  gx_node old = *n;
  int nin[1] = {r};
  int nid;
  if (gx_new_node(g, GX_OP_REDUCE, 1, nin, 1, 1u, &nid) != KILN_OK) return 0;
  gx_node* nn = &g->nodes[nid];
  nn->sub = old.sub;
  nn->dtype = old.dtype;
  nn->dtype2 = old.dtype2;
  nn->n_i = old.n_i;
  memcpy(nn->i, old.i, sizeof nn->i);
  memcpy(nn->f, old.f, sizeof nn->f);
  nn->i[0] = nmask;
  nn->i[1] = 1;
  gx_value* nv = &g->values[nn->out[0]];
  int nvid = nn->out[0];
  nv->dtype = ov.dtype;
  nv->ndim = rv.ndim;
  for (int i = 0; i < rv.ndim; i++) nv->shape[i] = i < j ? rv.shape[i] : 1;
  nv->numel = gx_numel(nv->shape, nv->ndim);
  int back = add_reshape(g, nvid, ov.ndim, ov.shape);
  if (back < 0) {
    g->nodes[nid].dead = 1;
    return 0;
  }
  gx_replace_uses(g, old.out[0], back);
  g->nodes[id].dead = 1;
  return 1;
}

kiln_status_t gx_pass_view_sink(kiln_graph_t* g, int64_t* moved) {
  /* nodes made here are not revisited (their reshaped operands would sink back); consumers of
   * a moved node are older nodes, so a chain still moves step by step */
  int n0 = g->n_nodes;
  for (int id = 0; id < n0; id++) {
    gx_node* n = &g->nodes[id];
    if (n->dead) continue;
    int done = 0;
    if (gx_is_pointwise(n->op)) done = sink_one(g, id);
    else if (n->op == GX_OP_REDUCE) done = sink_reduce(g, id);
    if (done && moved) (*moved)++;
  }
  return KILN_OK;
}

/* ---- uses over the execution order ------------------------------------------------------------ */

typedef struct {
  int* pos;       /* per node: index in e->order, -1 if absent */
  int* cnt;       /* per root value: number of (node, input) reads through any window */
  int* off;       /* CSR offsets into cons */
  int* cons;      /* consumer node ids */
  char* is_out;   /* per root value: read by a graph output */
} uses_t;

static void free_uses(kiln_exec_t* e, uses_t* u) {
  gx_free(&e->alloc, u->pos);
  gx_free(&e->alloc, u->cnt);
  gx_free(&e->alloc, u->off);
  gx_free(&e->alloc, u->cons);
  gx_free(&e->alloc, u->is_out);
  memset(u, 0, sizeof *u);
}

static const int* node_inputs(const kiln_exec_t* e, const gx_node* n, int* n_in) {
  if (n->op == GX_OP_FUSED) {
    *n_in = e->groups[n->aux].n_in;
    return e->groups[n->aux].in_vids;
  }
  *n_in = n->n_in;
  return n->in;
}

/* The value a read of x by node n is filed under: x's root, except that an elided cat reads
 * the pointwise result its input windows (that result must be stored, and written before the
 * cat's position). */
static int use_key(const kiln_graph_t* g, const gx_node* n, int x) {
  return gx_cat_elided(n) ? gx_view_source(g, x) : g->values[x].root;
}

static kiln_status_t build_uses(kiln_exec_t* e, uses_t* u) {
  const kiln_graph_t* g = e->wg;
  int NV = g->n_values, NN = g->n_nodes;
  memset(u, 0, sizeof *u);
  u->pos = gx_alloc(&e->alloc, sizeof(int) * (size_t)(NN + 1));
  u->cnt = gx_calloc(&e->alloc, (size_t)NV + 1, sizeof(int));
  u->off = gx_calloc(&e->alloc, (size_t)NV + 2, sizeof(int));
  u->is_out = gx_calloc(&e->alloc, (size_t)NV + 1, 1);
  if (!u->pos || !u->cnt || !u->off || !u->is_out) {
    free_uses(e, u);
    return kiln_error(KILN_ERROR_OUT_OF_MEMORY, "kiln graph: out of memory (uses)");
  }
  for (int i = 0; i < NN; i++) u->pos[i] = -1;
  int total = 0;
  for (int oi = 0; oi < e->n_order; oi++) {
    const gx_node* n = &g->nodes[e->order[oi]];
    u->pos[e->order[oi]] = oi;
    if (gx_is_view(n->op)) continue;
    int n_in;
    const int* in = node_inputs(e, n, &n_in);
    for (int k = 0; k < n_in; k++)
      if (in[k] >= 0) {
        u->cnt[use_key(g, n, in[k])]++;
        total++;
      }
  }
  u->cons = gx_alloc(&e->alloc, sizeof(int) * (size_t)(total + 1));
  if (!u->cons) {
    free_uses(e, u);
    return kiln_error(KILN_ERROR_OUT_OF_MEMORY, "kiln graph: out of memory (uses)");
  }
  for (int v = 0; v < NV; v++) u->off[v + 1] = u->off[v] + u->cnt[v];
  int* fill = gx_calloc(&e->alloc, (size_t)NV + 1, sizeof(int));
  if (!fill) {
    free_uses(e, u);
    return kiln_error(KILN_ERROR_OUT_OF_MEMORY, "kiln graph: out of memory (uses)");
  }
  for (int oi = 0; oi < e->n_order; oi++) {
    const gx_node* n = &g->nodes[e->order[oi]];
    if (gx_is_view(n->op)) continue;
    int n_in;
    const int* in = node_inputs(e, n, &n_in);
    for (int k = 0; k < n_in; k++)
      if (in[k] >= 0) {
        int r = use_key(g, n, in[k]);
        u->cons[u->off[r] + fill[r]++] = e->order[oi];
      }
  }
  gx_free(&e->alloc, fill);
  for (int k = 0; k < g->n_outputs; k++) u->is_out[g->values[g->outputs[k]].root] = 1;
  return KILN_OK;
}

/* Removes dead nodes from e->order and puts `id` at position `at` (which held a dead node). */
static void order_replace(kiln_exec_t* e, int at, int id) {
  e->order[at] = id;
}
static void order_compact(kiln_exec_t* e) {
  int m = 0;
  for (int i = 0; i < e->n_order; i++)
    if (!e->wg->nodes[e->order[i]].dead) e->order[m++] = e->order[i];
  e->n_order = m;
}

/* ---- GEMM epilogues ---------------------------------------------------------------------------- */

/* Geometry of a as an [M, K] GEMM operand: returns 1 and sets trans / ld / M. */
static int gemm_a(const gx_value* a, int* trans, int64_t* ld, int64_t* M) {
  int nd = a->ndim;
  if (nd < 2) return 0;
  int64_t K = a->shape[nd - 1];
  int64_t m = 1;
  for (int i = 0; i < nd - 1; i++) m *= a->shape[i];
  *M = m;
  if (m == 0 || K == 0) return 0;
  if (a->strides[nd - 1] == 1 || K == 1) {
    /* rows [.., M] must collapse into one dim of stride ld */
    int64_t ldv = -1, expect = -1;
    for (int i = nd - 2; i >= 0; i--) {
      if (a->shape[i] == 1) continue;
      if (ldv < 0) {
        ldv = a->strides[i];
        expect = ldv * a->shape[i];
      } else {
        if (a->strides[i] != expect) return 0;
        expect *= a->shape[i];
      }
    }
    if (ldv < 0) ldv = K; /* M == 1 */
    if (ldv < K) return 0;
    *trans = 0;
    *ld = ldv;
    return 1;
  }
  if (nd == 2 && (a->strides[0] == 1 || a->shape[0] == 1)) {
    int64_t ldv = a->strides[1];
    if (ldv < m) return 0;
    *trans = 1;
    *ld = ldv;
    return 1;
  }
  return 0;
}

static int gemm_b(const gx_value* b, int* trans, int64_t* ld) {
  if (b->ndim != 2) return 0;
  int64_t K = b->shape[0], N = b->shape[1];
  if (K == 0 || N == 0) return 0;
  if (b->strides[1] == 1 || N == 1) {
    int64_t ldv = K == 1 ? N : b->strides[0];
    if (ldv < N) return 0;
    *trans = 0;
    *ld = ldv;
    return 1;
  }
  if (b->strides[0] == 1 || K == 1) {
    int64_t ldv = N == 1 ? K : b->strides[1];
    if (ldv < K) return 0;
    *trans = 1;
    *ld = ldv;
    return 1;
  }
  return 0;
}

/* 1 if o can be a per-column bias of an [.., N] result: N contiguous floats. */
static int col_bias(const gx_value* o, const gx_value* c) {
  int64_t N = c->shape[c->ndim - 1];
  if (o->dtype != KILN_DTYPE_F32 || o->numel != N || o->ndim < 1 || o->ndim > c->ndim) return 0;
  if (o->shape[o->ndim - 1] != N) return 0;
  return N == 1 || o->strides[o->ndim - 1] == 1;
}

/* 1 if o can be a per-row bias of a 2-D [M, N] result: shape [M, 1], M contiguous floats. */
static int row_bias(const gx_value* o, const gx_value* c) {
  if (c->ndim != 2 || o->ndim != 2 || o->dtype != KILN_DTYPE_F32) return 0;
  if (o->shape[0] != c->shape[0] || o->shape[1] != 1) return 0;
  return o->shape[0] == 1 || o->strides[0] == 1;
}

/* 1 if o (same shape as c) is an [M, N] row-major matrix with unit column stride. */
static int residual_ok(const gx_value* o, const gx_value* c, int64_t* ldr) {
  if (o->dtype != KILN_DTYPE_F32 || !same_shape(o, c)) return 0;
  int nd = o->ndim;
  int64_t N = o->shape[nd - 1];
  if (N != 1 && o->strides[nd - 1] != 1) return 0;
  int64_t ldv = -1, expect = -1;
  for (int i = nd - 2; i >= 0; i--) {
    if (o->shape[i] == 1) continue;
    if (ldv < 0) {
      ldv = o->strides[i];
      expect = ldv * o->shape[i];
    } else {
      if (o->strides[i] != expect) return 0;
      expect *= o->shape[i];
    }
  }
  if (ldv < 0) ldv = N;
  if (ldv < N) return 0;
  *ldr = ldv;
  return 1;
}

static int act_of(int op) {
  switch (op) {
    case KILN_UNARY_RELU: return KILN_GEMM_ACT_RELU;
    case KILN_UNARY_GELU: return KILN_GEMM_ACT_GELU;
    case KILN_UNARY_GELU_TANH: return KILN_GEMM_ACT_GELU_TANH;
    case KILN_UNARY_SILU: return KILN_GEMM_ACT_SILU;
    default: return -1;
  }
}

/* The single consumer of root value v, or -1 (several, none, a graph output). */
static int single_consumer(const uses_t* u, const kiln_graph_t* g, int v) {
  if (u->is_out[v] || u->cnt[v] != 1) return -1;
  int c = u->cons[u->off[v]];
  if (g->nodes[c].dead) return -1;
  return c;
}

/* The weights of a B that hfuse stacked: b = permute(cat(W_0, .., W_n-1 along dim 0), [1, 0])
 * of 2-D f32 [n_i, K] weights with unit inner stride, the cat read by nothing else and not a
 * graph output. The GEMM then reads the W_i in place (kiln_sgemm_wcat) and the cat (a copy of
 * every weight per run) never runs. Fills w[] and the cat / permute node ids; returns the count
 * (0: not that form). */
static int stacked_weights(const kiln_graph_t* g, const uses_t* u, int b, int64_t K, int* w,
                           int* cat_node, int* perm_node) {
  const gx_node* pm = &g->nodes[g->values[b].node];
  if (pm->dead || pm->op != GX_OP_PERMUTE || pm->i[0] != 1 || pm->i[1] != 0) return 0;
  const int P = pm->in[0];
  const gx_node* cat = &g->nodes[g->values[P].node];
  if (cat->dead || cat->op != GX_OP_CAT || gx_cat_elided(cat) || cat->i[0] != 0 ||
      cat->n_in < 2 || cat->n_in > KILN_GEMM_MAX_WBLOCKS)
    return 0;
  if (g->values[P].root != P || u->is_out[P] || u->cnt[P] != 1) return 0;
  for (int k = 0; k < cat->n_in; k++) {
    const gx_value* v = &g->values[cat->in[k]];
    if (v->dtype != KILN_DTYPE_F32 || v->ndim != 2 || v->shape[1] != K || !v->has_layout) return 0;
    if (K > 1 && v->strides[1] != 1) return 0;
    if (v->shape[0] > 1 && v->strides[0] < (K > 1 ? K : 1)) return 0;
    w[k] = cat->in[k];
  }
  *cat_node = g->values[P].node;
  *perm_node = g->values[b].node;
  return cat->n_in;
}

kiln_status_t gx_pass_epilogue(kiln_exec_t* e) {
  kiln_graph_t* g = e->wg;
  uses_t u;
  KILN_RETURN_IF_ERROR(build_uses(e, &u));
  kiln_status_t st = KILN_OK;
  int n_order = e->n_order;
  for (int oi = 0; oi < n_order; oi++) {
    int mid = e->order[oi];
    gx_node* m = &g->nodes[mid];
    if (m->dead || (m->op != GX_OP_MATMUL && m->op != GX_OP_ADDMM)) continue;
    int ia = m->op == GX_OP_ADDMM ? 1 : 0;
    const gx_value* a = &g->values[m->in[ia]];
    const gx_value* b = &g->values[m->in[ia + 1]];
    const gx_value* c = &g->values[m->out[0]];
    if (a->dtype != KILN_DTYPE_F32) continue;
    int ta, tb;
    int64_t lda, ldb, M;
    if (!gemm_a(a, &ta, &lda, &M) || !gemm_b(b, &tb, &ldb)) continue;
    int bias = -1, axis = 1, act = 0, resid = -1, resop = KILN_GEMM_RESIDUAL_ADD;
    int64_t ldr = 0;
    double alpha = 1.0;
    if (m->op == GX_OP_ADDMM) {
      alpha = m->f[1];
      if (m->in[0] >= 0) {
        const gx_value* bv = &g->values[m->in[0]];
        if (m->f[0] != 1.0) continue;
        if (col_bias(bv, c)) axis = 1;
        else if (row_bias(bv, c)) axis = 0;
        else continue;
        bias = m->in[0];
      }
    }
    /* walk the chain */
    int absorbed[4], n_abs = 0;
    int cur = m->out[0];
    for (;;) {
      int cn = single_consumer(&u, g, cur);
      if (cn < 0) break;
      const gx_node* un = &g->nodes[cn];
      if (un->dead || un->out[0] < 0) break;
      const gx_value* uo = &g->values[un->out[0]];
      if (uo->dtype != KILN_DTYPE_F32 || un->dtype2 != KILN_DTYPE_F32 || !same_shape(uo, c)) break;
      if (un->op == GX_OP_UNARY && act == 0 && resid < 0 && act_of(un->sub) > 0 &&
          un->in[0] == cur) {
        act = act_of(un->sub);
      } else if (un->op == GX_OP_BINARY && un->sub == KILN_BINARY_ADD && un->f[0] == 1.0 &&
                 (un->in[0] == cur) != (un->in[1] == cur) && resid < 0) {
        int o = un->in[0] == cur ? un->in[1] : un->in[0];
        const gx_value* ov = &g->values[o];
        if (bias < 0 && act == 0 && col_bias(ov, c)) {
          bias = o;
          axis = 1;
        } else if (bias < 0 && act == 0 && row_bias(ov, c)) {
          bias = o;
          axis = 0;
        } else if (residual_ok(ov, c, &ldr)) {
          resid = o;
        } else {
          break;
        }
      } else if (un->op == GX_OP_BINARY && un->sub == KILN_BINARY_MUL &&
                 (un->in[0] == cur) != (un->in[1] == cur) && resid < 0 &&
                 residual_ok(&g->values[un->in[0] == cur ? un->in[1] : un->in[0]], c, &ldr)) {
        resid = un->in[0] == cur ? un->in[1] : un->in[0]; /* a gated unit: act(x W) * r */
        resop = KILN_GEMM_RESIDUAL_MUL;
      } else {
        break;
      }
      absorbed[n_abs++] = cn;
      cur = un->out[0];
      if (n_abs == 4 || resid >= 0) break;
    }
    int in[4 + KILN_GEMM_MAX_WBLOCKS] = {m->in[ia], m->in[ia + 1], bias, resid};
    int cat_node = -1, perm_node = -1;
    const int nw = m->op == GX_OP_MATMUL && !ta
                       ? stacked_weights(g, &u, m->in[1], a->shape[a->ndim - 1], in + 4, &cat_node, &perm_node)
                       : 0;
    if (n_abs == 0 && nw == 0) continue;
    if (nw > 0) in[1] = -1; /* B is read from the weights in[4..] */
    int gid;
    st = gx_new_node(g, GX_OP_GEMM, 4 + nw, in, 1, 0u, &gid);
    if (st != KILN_OK) break;
    gx_node* gn = &g->nodes[gid];
    m = &g->nodes[mid];
    c = &g->values[m->out[0]];
    gn->out[0] = cur;
    gn->dtype = KILN_DTYPE_F32;
    gn->i[0] = act;
    gn->i[1] = axis;
    gn->i[2] = ta;
    gn->i[3] = tb;
    gn->i[4] = lda;
    gn->i[5] = ldb;
    gn->i[6] = M;
    gn->i[7] = c->shape[c->ndim - 1];
    gn->i[8] = a->shape[a->ndim - 1];
    gn->i[9] = ldr;
    gn->i[10] = resop;
    gn->n_i = 11;
    gn->f[0] = alpha;
    g->values[cur].node = gid;
    g->values[cur].slot = 0;
    m->dead = 1;
    for (int k = 0; k < n_abs; k++) g->nodes[absorbed[k]].dead = 1;
    if (nw > 0) {
      g->nodes[cat_node].dead = 1;
      g->nodes[perm_node].dead = 1;
      e->stats.n_weight_cats_read_in_place++;
    }
    order_replace(e, n_abs ? u.pos[absorbed[n_abs - 1]] : u.pos[mid], gid);
    e->stats.n_epilogues += n_abs > 0;
    e->stats.n_epilogue_ops += n_abs;
  }
  free_uses(e, &u);
  order_compact(e);
  return st;
}

/* ---- pointwise fusion ------------------------------------------------------------------------ */

typedef struct {
  int* grp;      /* per node: group id or -1 */
  int* head;     /* per group: representative after merges (union-find) */
  int** members; /* per group: member node ids in order */
  int* n_mem;
  int n_groups;
} groups_t;

static int find(groups_t* G, int x) {
  while (G->head[x] != x) x = G->head[x] = G->head[G->head[x]];
  return x;
}

/* 1 if every reader (outside the union of groups `ga` and `gb` and node `u`) of a member of
 * group ga comes after position pu, and no member of the union reads a member's result through
 * a view. */
static int legal_merge(const kiln_exec_t* e, const uses_t* U, groups_t* G, int ga, int gb,
                       int u, int pu) {
  const kiln_graph_t* g = e->wg;
  for (int i = 0; i < G->n_mem[ga]; i++) {
    const gx_node* m = &g->nodes[G->members[ga][i]];
    int v = m->out[0];
    for (int k = U->off[v]; k < U->off[v + 1]; k++) {
      int c = U->cons[k];
      int gc = G->grp[c] >= 0 ? find(G, G->grp[c]) : -1;
      int inside = c == u || gc == ga || gc == gb;
      if (!inside && U->pos[c] <= pu) return 0;
      if (inside) {
        /* the reader must take the value itself (same window, same shape) */
        const gx_node* cn = &g->nodes[c];
        for (int j = 0; j < cn->n_in; j++) {
          int x = cn->in[j];
          if (x >= 0 && g->values[x].root == v && x != v) return 0;
        }
      }
    }
  }
  return 1;
}

static kiln_status_t merge(kiln_exec_t* e, groups_t* G, int into, int from) {
  int n = G->n_mem[into] + G->n_mem[from];
  int* arr = gx_alloc(&e->alloc, sizeof(int) * (size_t)n);
  if (!arr) return kiln_error(KILN_ERROR_OUT_OF_MEMORY, "kiln graph: out of memory (fusion)");
  memcpy(arr, G->members[into], sizeof(int) * (size_t)G->n_mem[into]);
  memcpy(arr + G->n_mem[into], G->members[from], sizeof(int) * (size_t)G->n_mem[from]);
  gx_free(&e->alloc, G->members[into]);
  gx_free(&e->alloc, G->members[from]);
  G->members[into] = arr;
  G->members[from] = NULL;
  G->n_mem[into] = n;
  G->n_mem[from] = 0;
  G->head[from] = into;
  return KILN_OK;
}

static void sort_by_pos(const uses_t* U, int* a, int n) {
  for (int i = 1; i < n; i++) {
    int x = a[i], j = i - 1;
    while (j >= 0 && U->pos[a[j]] > U->pos[x]) {
      a[j + 1] = a[j];
      j--;
    }
    a[j + 1] = x;
  }
}

/* Iteration-space strides of value v (a window) broadcast to shape S[n]. */
static void bcast_strides(const gx_value* v, const int64_t* S, int n, int64_t* out) {
  for (int i = 0; i < n; i++) {
    int j = i - (n - v->ndim);
    if (j < 0 || (v->shape[j] == 1 && S[i] != 1)) out[i] = 0;
    else out[i] = v->strides[j];
  }
}

/* Builds the register program of a group. */
static kiln_status_t build_program(kiln_exec_t* e, const uses_t* U, groups_t* G, int gi,
                                   int red, gx_group* gr) {
  kiln_graph_t* g = e->wg;
  const kiln_allocator_t* a = &e->alloc;
  int nm = G->n_mem[gi];
  int* mem = G->members[gi];
  memset(gr, 0, sizeof *gr);
  gr->node = -1;
  gr->n_members = nm + (red >= 0);
  gr->members = gx_alloc(a, sizeof(int) * (size_t)(nm + 1));
  gr->instr = gx_calloc(a, (size_t)nm, sizeof(gx_instr));
  gr->reg_dtype = gx_alloc(a, sizeof(int) * (size_t)(nm + 1));
  gr->in_vids = gx_alloc(a, sizeof(int) * (size_t)(3 * nm + 1));
  gr->out_vids = gx_alloc(a, sizeof(int) * (size_t)(nm + 1));
  int* dst_of = gx_alloc(a, sizeof(int) * (size_t)(nm + 1)); /* per member: opd packed */
  int* last_use = gx_alloc(a, sizeof(int) * (size_t)(nm + 1));
  int* reg_free = gx_alloc(a, sizeof(int) * (size_t)(nm + 1));
  if (!gr->members || !gr->instr || !gr->reg_dtype || !gr->in_vids || !gr->out_vids || !dst_of ||
      !last_use || !reg_free) {
    gx_free(a, dst_of);
    gx_free(a, last_use);
    gx_free(a, reg_free);
    return kiln_error(KILN_ERROR_OUT_OF_MEMORY, "kiln graph: out of memory (fusion)");
  }
  memcpy(gr->members, mem, sizeof(int) * (size_t)nm);
  if (red >= 0) gr->members[nm] = red;
  const gx_value* sv = &g->values[g->nodes[mem[0]].out[0]];
  gr->iter_ndim = sv->ndim;
  memcpy(gr->iter_shape, sv->shape, sizeof gr->iter_shape);
  int red_src_member = -1;
  if (red >= 0) {
    int x = g->nodes[red].in[0];
    for (int i = 0; i < nm; i++)
      if (g->nodes[mem[i]].out[0] == x) red_src_member = i;
  }
  /* last in-group use of each member result, and whether it must be stored */
  for (int i = 0; i < nm; i++) {
    int v = g->nodes[mem[i]].out[0];
    last_use[i] = -1;
    int ext = U->is_out[v];
    for (int k = U->off[v]; k < U->off[v + 1]; k++) {
      int c = U->cons[k];
      int ci = -1;
      for (int j = 0; j < nm; j++)
        if (mem[j] == c) ci = j;
      if (ci >= 0) {
        if (ci > last_use[i]) last_use[i] = ci;
      } else if (c != red) {
        ext = 1;
      }
    }
    if (i == red_src_member) last_use[i] = nm; /* read by the reduction after the program */
    dst_of[i] = ext ? 1 : 0;
  }
  int n_regs = 0, n_free = 0;
  for (int i = 0; i < nm; i++) {
    const gx_node* n = &g->nodes[mem[i]];
    gx_instr* in = &gr->instr[i];
    in->op = n->op;
    in->sub = n->sub;
    in->compute = n->op == GX_OP_CAST ? n->dtype : n->dtype2;
    in->node = mem[i];
    memcpy(in->f, n->f, sizeof in->f);
    in->has_min = (int)n->i[0];
    in->has_max = (int)n->i[1];
    const gx_value* ov = &g->values[n->out[0]];
    in->dtype = ov->dtype;
    for (int k = 0; k < 3; k++) in->src[k].kind = GX_OPD_NONE;
    for (int k = 0; k < n->n_in && k < 3; k++) {
      int x = n->in[k];
      if (x < 0) continue;
      int pm = -1;
      for (int j = 0; j < i; j++)
        if (g->nodes[mem[j]].out[0] == x) pm = j;
      if (pm >= 0) {
        in->src[k] = gr->instr[pm].dst;
        continue;
      }
      int found = -1;
      for (int j = 0; j < gr->n_in; j++)
        if (gr->in_vids[j] == x) found = j;
      if (found < 0) {
        found = gr->n_in;
        gr->in_vids[gr->n_in++] = x;
      }
      in->src[k].kind = GX_OPD_IN;
      in->src[k].idx = found;
    }
    /* free registers whose last use is this instruction (they may be reused as dst) */
    for (int j = 0; j < i; j++)
      if (last_use[j] == i && gr->instr[j].dst.kind == GX_OPD_REG)
        reg_free[n_free++] = gr->instr[j].dst.idx;
    if (dst_of[i]) {
      in->dst.kind = GX_OPD_OUT;
      in->dst.idx = gr->n_out;
      gr->out_vids[gr->n_out++] = n->out[0];
    } else {
      in->dst.kind = GX_OPD_REG;
      /* reuse a freed register; when it is also a source of this instruction (exact aliasing,
       * which the kernels support) only with the same dtype */
      int r = -1;
      for (int f = 0; f < n_free; f++) {
        int cand = reg_free[f];
        int is_src = 0;
        for (int k = 0; k < 3; k++)
          if (in->src[k].kind == GX_OPD_REG && in->src[k].idx == cand) is_src = 1;
        if (!is_src || gr->reg_dtype[cand] == ov->dtype) {
          r = cand;
          reg_free[f] = reg_free[--n_free];
          break;
        }
      }
      if (r < 0) r = n_regs++;
      gr->reg_dtype[r] = ov->dtype;
      in->dst.idx = r;
      in->dst.dtype = ov->dtype;
    }
  }
  gr->n_instr = nm;
  gr->n_regs = n_regs;
  if (red >= 0) {
    const gx_node* rn = &g->nodes[red];
    gr->has_reduce = 1;
    gr->red_op = rn->sub;
    gr->red_compute = rn->dtype2;
    gr->red_node = red;
    gr->red_out_vid = rn->out[0];
    gr->red_f[0] = rn->f[0];
    gr->red_src = gr->instr[red_src_member].dst;
    gr->out_vids[gr->n_out] = gr->red_out_vid; /* listed after the pointwise outputs */
  }
  gx_free(a, dst_of);
  gx_free(a, last_use);
  gx_free(a, reg_free);

  /* strides in the iteration space, then collapse dims */
  int n = sv->ndim;
  int64_t S[KILN_MAX_DIMS];
  memcpy(S, sv->shape, sizeof S);
  int n_ops = gr->n_in + gr->n_out + (red >= 0);
  int64_t st[KILN_MAX_DIMS * 3 + 8][KILN_MAX_DIMS];
  int64_t (*stp)[KILN_MAX_DIMS] = st;
  int64_t (*heap)[KILN_MAX_DIMS] = NULL;
  if (n_ops > (int)(sizeof st / sizeof st[0])) {
    heap = gx_alloc(a, sizeof(int64_t) * KILN_MAX_DIMS * (size_t)n_ops);
    if (!heap) return kiln_error(KILN_ERROR_OUT_OF_MEMORY, "kiln graph: out of memory (fusion)");
    stp = heap;
  }
  for (int j = 0; j < gr->n_in; j++) bcast_strides(&g->values[gr->in_vids[j]], S, n, stp[j]);
  /* outputs are roots (contiguous) or windows of an elided cat's result */
  for (int j = 0; j < gr->n_out; j++) bcast_strides(&g->values[gr->out_vids[j]], S, n, stp[gr->n_in + j]);
  uint32_t mask = 0;
  if (red >= 0) {
    mask = (uint32_t)g->nodes[red].i[0];
    int64_t ks[KILN_MAX_DIMS];
    for (int i = 0; i < n; i++) ks[i] = (mask & (1u << i)) ? 1 : S[i];
    gx_contig_strides(ks, n, stp[n_ops - 1]);
    for (int i = 0; i < n; i++)
      if (mask & (1u << i)) stp[n_ops - 1][i] = 0;
  }
  /* drop size-1 dims, merge neighbours (never across the outer/reduced boundary) */
  int nd = 0, n_outer = 0;
  int64_t CS[KILN_MAX_DIMS];
  int side[KILN_MAX_DIMS];
  for (int i = 0; i < n; i++) {
    if (S[i] == 1) continue;
    int sd = (mask & (1u << i)) ? 1 : 0;
    int can = nd > 0 && side[nd - 1] == sd;
    for (int o = 0; o < n_ops && can; o++)
      if (stp[o][nd - 1] != stp[o][i] * S[i]) can = 0;
    if (can) {
      CS[nd - 1] *= S[i];
      for (int o = 0; o < n_ops; o++) stp[o][nd - 1] = stp[o][i];
    } else {
      CS[nd] = S[i];
      side[nd] = sd;
      for (int o = 0; o < n_ops; o++) stp[o][nd] = stp[o][i];
      nd++;
    }
  }
  for (int i = 0; i < nd; i++)
    if (!side[i]) n_outer++;
  if (red >= 0 && n_outer == 0) { /* full reduction: a leading outer dim of size 1 */
    for (int i = nd; i > 0; i--) {
      CS[i] = CS[i - 1];
      for (int o = 0; o < n_ops; o++) stp[o][i] = stp[o][i - 1];
    }
    CS[0] = 1;
    for (int o = 0; o < n_ops; o++) stp[o][0] = 0;
    nd++;
    n_outer = 1;
  }
  if (nd == 0) { /* a single element */
    CS[0] = 1;
    for (int o = 0; o < n_ops; o++) stp[o][0] = 0;
    nd = 1;
    n_outer = 1;
  }
  gr->ndim = nd;
  gr->n_outer = red >= 0 ? n_outer : nd;
  memcpy(gr->shape, CS, sizeof CS);
  gr->in_st = gx_alloc(a, sizeof(int64_t) * KILN_MAX_DIMS * (size_t)(gr->n_in + 1));
  gr->out_st = gx_alloc(a, sizeof(int64_t) * KILN_MAX_DIMS * (size_t)(gr->n_out + 1));
  if (!gr->in_st || !gr->out_st) {
    gx_free(a, heap);
    return kiln_error(KILN_ERROR_OUT_OF_MEMORY, "kiln graph: out of memory (fusion)");
  }
  for (int j = 0; j < gr->n_in; j++) memcpy(gr->in_st[j], stp[j], sizeof gr->in_st[j]);
  for (int j = 0; j < gr->n_out; j++) memcpy(gr->out_st[j], stp[gr->n_in + j], sizeof gr->out_st[j]);
  if (red >= 0) memcpy(gr->red_st, stp[n_ops - 1], sizeof gr->red_st);
  gx_free(a, heap);
  gx_group_tiling(gr);
  if (!(e->flags & KILN_COMPILE_NO_DIRECT_GROUPS)) gx_group_prepare(g, gr);
  else gr->direct = 0;
  return KILN_OK;
}

/* A reduction that can end group gi: returns its node id or -1. */
static int find_reduction(const kiln_exec_t* e, const uses_t* U, groups_t* G, int gi) {
  const kiln_graph_t* g = e->wg;
  if (e->flags & KILN_COMPILE_NO_REDUCE_FUSION) return -1;
  int last_pos = -1;
  for (int i = 0; i < G->n_mem[gi]; i++) {
    int p = U->pos[G->members[gi][i]];
    if (p > last_pos) last_pos = p;
  }
  for (int i = 0; i < G->n_mem[gi]; i++) {
    int v = g->nodes[G->members[gi][i]].out[0];
    for (int k = U->off[v]; k < U->off[v + 1]; k++) {
      int r = U->cons[k];
      const gx_node* rn = &g->nodes[r];
      if (rn->dead || rn->op != GX_OP_REDUCE || rn->in[0] != v) continue;
      const gx_value* x = &g->values[v];
      uint32_t mask = (uint32_t)rn->i[0];
      int n = x->ndim;
      /* the reduced dims must be trailing (ignoring size-1 dims) */
      int seen_red = 0, ok = n > 0;
      int64_t R = 1;
      for (int d = 0; d < n && ok; d++) {
        if (x->shape[d] == 1) continue;
        if (mask & (1u << d)) {
          seen_red = 1;
          R *= x->shape[d];
        } else if (seen_red) {
          ok = 0;
        }
      }
      if (!ok || !seen_red || R > GX_REDUCE_MAX || R == 0) continue;
      /* every other reader of the group must come after the reduction */
      int pr = U->pos[r];
      int legal = pr > last_pos;
      for (int j = 0; j < G->n_mem[gi] && legal; j++) {
        int w = g->nodes[G->members[gi][j]].out[0];
        for (int q = U->off[w]; q < U->off[w + 1] && legal; q++) {
          int c = U->cons[q];
          if (c == r) continue;
          int gc = G->grp[c] >= 0 ? find(G, G->grp[c]) : -1;
          if (gc == gi) continue;
          if (U->pos[c] <= pr) legal = 0;
        }
      }
      /* a reduction reading the same value twice is fine; reading it through a view is not */
      if (legal) return r;
    }
  }
  return -1;
}

/* ---- sibling fusion ---------------------------------------------------------------------------
 * Two groups with no data flow between them, over the same iteration shape, that read the same
 * full-size input (RoPE's even and odd halves both read x[..., 0::2], x[..., 1::2], cos, sin)
 * run as one group at the later one's position: the shared input is read once per tile and one
 * step replaces two. Legal when every outside reader of the earlier group comes after that
 * position (which also rules out a path from one group to the other). The merged group's
 * stored results stay few enough for the direct path. */

#define GX_SIBLING_MAX_OUT 8 /* = the direct path's output limit */

static int group_last_pos(const uses_t* U, const groups_t* G, int gi) {
  int p = -1;
  for (int i = 0; i < G->n_mem[gi]; i++)
    if (U->pos[G->members[gi][i]] > p) p = U->pos[G->members[gi][i]];
  return p;
}

/* Results of the union of groups a and b read outside it (or graph outputs). */
static int union_outputs(const kiln_graph_t* g, const uses_t* U, groups_t* G, int a, int b) {
  int n = 0;
  for (int s = 0; s < 2; s++) {
    int gi = s ? b : a;
    for (int i = 0; i < G->n_mem[gi]; i++) {
      int v = g->nodes[G->members[gi][i]].out[0];
      int ext = U->is_out[v];
      for (int k = U->off[v]; k < U->off[v + 1] && !ext; k++) {
        int c = U->cons[k];
        int gc = G->grp[c] >= 0 ? find(G, G->grp[c]) : -1;
        if (gc != a && gc != b) ext = 1;
      }
      n += ext;
    }
  }
  return n;
}

/* 1 if value x is read as a full-size operand of iteration shape S (no broadcast). */
static int full_size(const gx_value* x, const gx_value* S) {
  return same_shape(x, S) && x->numel > 1;
}

static kiln_status_t merge_siblings(kiln_exec_t* e, const uses_t* U, groups_t* G) {
  const kiln_graph_t* g = e->wg;
  for (int gi = 0; gi < G->n_groups; gi++) {
    if (G->head[gi] != gi || G->n_mem[gi] == 0) continue;
    int again = 1;
    while (again) {
      again = 0;
      const gx_value* S = &g->values[g->nodes[G->members[gi][0]].out[0]];
      for (int i = 0; i < G->n_mem[gi] && !again; i++) {
        const gx_node* m = &g->nodes[G->members[gi][i]];
        for (int k = 0; k < m->n_in && !again; k++) {
          int x = m->in[k];
          if (x < 0 || !full_size(&g->values[x], S)) continue;
          int r = g->values[x].root;
          for (int q = U->off[r]; q < U->off[r + 1] && !again; q++) {
            int c = U->cons[q];
            if (G->grp[c] < 0) continue;
            int gj = find(G, G->grp[c]);
            if (gj == gi || G->n_mem[gj] == 0) continue;
            const gx_node* cn = &g->nodes[c];
            int reads = 0;
            for (int j = 0; j < cn->n_in; j++) reads |= cn->in[j] == x;
            if (!reads || !same_shape(&g->values[cn->out[0]], S)) continue;
            if (G->n_mem[gi] + G->n_mem[gj] > GX_GROUP_MAX) continue;
            int pi = group_last_pos(U, G, gi), pj = group_last_pos(U, G, gj);
            int early = pi < pj ? gi : gj, late = pi < pj ? gj : gi, at = pi > pj ? pi : pj;
            if (!legal_merge(e, U, G, early, late, -1, at) ||
                !legal_merge(e, U, G, late, early, -1, at))
              continue;
            if (union_outputs(g, U, G, gi, gj) > GX_SIBLING_MAX_OUT) continue;
            KILN_RETURN_IF_ERROR(merge(e, G, gi, gj));
            e->stats.n_sibling_merges++;
            again = 1;
          }
        }
      }
    }
  }
  return KILN_OK;
}

/* ---- hoisting ---------------------------------------------------------------------------------
 * A group B over the same space as an earlier group A that reads A's results, but could not join
 * A in step 1 because some node between them reads a result of A (the silu backward: A stores
 * sigmoid(a) and g*silu'..., a matmul reads one, B reads the other), joins A and runs at A's
 * position when everything else B reads is ready there. B's members take A's position (the
 * later ones move up; their readers all come later anyway); legal_merge checks that no outside
 * reader of either group comes before it. */

/* Position at which the value under x (its root: views are windows, no steps) has been
 * computed; -1 for inputs and constants. */
static int ready_pos(const kiln_exec_t* e, const uses_t* U, groups_t* G, int x) {
  const kiln_graph_t* g = e->wg;
  const int nd = g->values[g->values[x].root].node;
  if (nd < 0 || g->nodes[nd].op == GX_OP_INPUT || g->nodes[nd].op == GX_OP_CONST) return -1;
  if (G->grp[nd] >= 0) return group_last_pos(U, G, find(G, G->grp[nd]));
  return U->pos[nd];
}

static int can_hoist(const kiln_exec_t* e, const uses_t* U, groups_t* G, int ga, int gb) {
  const kiln_graph_t* g = e->wg;
  if (G->n_mem[ga] + G->n_mem[gb] > GX_GROUP_MAX) return 0;
  if (!same_shape(&g->values[g->nodes[G->members[ga][0]].out[0]],
                  &g->values[g->nodes[G->members[gb][0]].out[0]]))
    return 0;
  const int at = group_last_pos(U, G, ga);
  for (int i = 0; i < G->n_mem[gb]; i++) {
    const gx_node* m = &g->nodes[G->members[gb][i]];
    for (int k = 0; k < m->n_in; k++) {
      const int x = m->in[k];
      if (x < 0) continue;
      const int pr = g->values[g->values[x].root].node;
      const int gp = pr >= 0 && G->grp[pr] >= 0 ? find(G, G->grp[pr]) : -1;
      if (gp == ga || gp == gb) continue; /* inside: legal_merge checks how it is read */
      if (ready_pos(e, U, G, x) >= at) return 0;
    }
  }
  if (union_outputs(g, U, G, ga, gb) > GX_SIBLING_MAX_OUT) return 0;
  return legal_merge(e, U, G, ga, gb, -1, at) && legal_merge(e, U, G, gb, ga, -1, at);
}

static kiln_status_t hoist_consumers(kiln_exec_t* e, uses_t* U, groups_t* G) {
  const kiln_graph_t* g = e->wg;
  int again = 1;
  while (again) {
    again = 0;
    for (int gb = 0; gb < G->n_groups && !again; gb++) {
      if (G->head[gb] != gb || G->n_mem[gb] == 0) continue;
      for (int i = 0; i < G->n_mem[gb] && !again; i++) {
        const gx_node* m = &g->nodes[G->members[gb][i]];
        for (int k = 0; k < m->n_in && !again; k++) {
          const int x = m->in[k];
          if (x < 0) continue;
          const int pr = g->values[g->values[x].root].node;
          if (pr < 0 || G->grp[pr] < 0) continue;
          const int ga = find(G, G->grp[pr]);
          if (ga == gb || G->n_mem[ga] == 0 || !can_hoist(e, U, G, ga, gb)) continue;
          const int at = group_last_pos(U, G, ga);
          /* B's members in execution order first: they all take A's position, and the merged
           * list (A's, then B's) must stay a valid order under the stable sort of step 2 */
          sort_by_pos(U, G->members[gb], G->n_mem[gb]);
          for (int j = 0; j < G->n_mem[gb]; j++) U->pos[G->members[gb][j]] = at;
          KILN_RETURN_IF_ERROR(merge(e, G, ga, gb));
          e->stats.n_groups_hoisted++;
          again = 1;
        }
      }
    }
  }
  return KILN_OK;
}

kiln_status_t gx_pass_fusion(kiln_exec_t* e) {
  kiln_graph_t* g = e->wg;
  const kiln_allocator_t* a = &e->alloc;
  uses_t U;
  KILN_RETURN_IF_ERROR(build_uses(e, &U));
  int NN = g->n_nodes;
  groups_t G;
  memset(&G, 0, sizeof G);
  G.grp = gx_alloc(a, sizeof(int) * (size_t)(NN + 1));
  G.head = gx_alloc(a, sizeof(int) * (size_t)(NN + 1));
  G.members = gx_calloc(a, (size_t)NN + 1, sizeof(int*));
  G.n_mem = gx_calloc(a, (size_t)NN + 1, sizeof(int));
  kiln_status_t st = KILN_OK;
  if (!G.grp || !G.head || !G.members || !G.n_mem) {
    st = kiln_error(KILN_ERROR_OUT_OF_MEMORY, "kiln graph: out of memory (fusion)");
    goto done;
  }
  for (int i = 0; i < NN; i++) G.grp[i] = -1;

  /* 1. grow groups in order */
  for (int oi = 0; oi < e->n_order; oi++) {
    int id = e->order[oi];
    const gx_node* n = &g->nodes[id];
    if (n->dead || !gx_is_pointwise(n->op) || n->out[0] < 0) continue;
    const gx_value* uv = &g->values[n->out[0]];
    int gid = G.n_groups++;
    G.head[gid] = gid;
    G.members[gid] = gx_alloc(a, sizeof(int));
    if (!G.members[gid]) {
      st = kiln_error(KILN_ERROR_OUT_OF_MEMORY, "kiln graph: out of memory (fusion)");
      goto done;
    }
    G.members[gid][0] = id;
    G.n_mem[gid] = 1;
    G.grp[id] = gid;
    /* reading a member's result through a view would read other tiles: never fuse those */
    for (int k = 0; k < n->n_in; k++) {
      int x = n->in[k];
      if (x < 0) continue;
      const gx_value* xv = &g->values[x];
      if (xv->root != x || !same_shape(xv, uv)) continue;
      int p = xv->node;
      if (G.grp[p] < 0 || g->nodes[p].dead) continue;
      int pg = find(&G, G.grp[p]);
      int cg = find(&G, G.grp[id]);
      if (pg == cg) continue;
      if (G.n_mem[pg] + G.n_mem[cg] > GX_GROUP_MAX) continue;
      /* u itself must not read a member of pg through a view */
      int bad = 0;
      for (int j = 0; j < n->n_in && !bad; j++) {
        int y = n->in[j];
        if (y < 0 || g->values[y].root == y) continue;
        int ry = g->values[y].root;
        int gy = G.grp[g->values[ry].node] >= 0 ? find(&G, G.grp[g->values[ry].node]) : -1;
        if (gy == pg || gy == cg) bad = 1;
      }
      if (bad || !legal_merge(e, &U, &G, pg, cg, id, oi) ||
          !legal_merge(e, &U, &G, cg, pg, id, oi))
        continue;
      st = merge(e, &G, pg, cg);
      if (st != KILN_OK) goto done;
    }
  }

  /* 1b. siblings: independent groups over the same space reading the same full-size input */
  if (!(e->flags & KILN_COMPILE_NO_SIBLING_FUSION)) {
    st = merge_siblings(e, &U, &G);
    if (st != KILN_OK) goto done;
  }

  /* 1c. consumers moved up into their producers' groups */
  if (!(e->flags & KILN_COMPILE_NO_HOIST)) {
    st = hoist_consumers(e, &U, &G);
    if (st != KILN_OK) goto done;
  }

  /* 2. turn groups into fused nodes */
  for (int gi = 0; gi < G.n_groups; gi++) {
    if (G.head[gi] != gi || G.n_mem[gi] == 0) continue;
    sort_by_pos(&U, G.members[gi], G.n_mem[gi]);
    int red = find_reduction(e, &U, &G, gi);
    if (G.n_mem[gi] < 2 && red < 0) continue;
    st = gx_grow(a, (void**)&e->groups, &e->cap_groups, e->n_groups + 1, sizeof(gx_group));
    if (st != KILN_OK) goto done;
    gx_group* gr = &e->groups[e->n_groups];
    st = build_program(e, &U, &G, gi, red, gr);
    e->n_groups++;
    if (st != KILN_OK) goto done;
    int fid;
    st = gx_new_node(g, GX_OP_FUSED, 0, NULL, 0, 0u, &fid);
    if (st != KILN_OK) goto done;
    gx_node* fn = &g->nodes[fid];
    fn->aux = e->n_groups - 1;
    gr->node = fid;
    int last_pos = -1;
    for (int i = 0; i < G.n_mem[gi]; i++) {
      int m = G.members[gi][i];
      if (U.pos[m] > last_pos) last_pos = U.pos[m];
      g->nodes[m].dead = 1;
    }
    for (int j = 0; j < gr->n_out; j++) {
      g->values[gr->out_vids[j]].node = fid;
      g->values[gr->out_vids[j]].slot = j;
    }
    if (red >= 0) {
      g->nodes[red].dead = 1;
      g->values[gr->red_out_vid].node = fid;
      g->values[gr->red_out_vid].slot = gr->n_out;
      last_pos = U.pos[red];
      e->stats.n_reduce_fused++;
    }
    order_replace(e, last_pos, fid);
    g->nodes[fid].dead = 0;
    e->stats.n_fused_groups++;
    e->stats.n_fused_nodes += G.n_mem[gi];
  }
  order_compact(e);

done:
  if (G.members)
    for (int i = 0; i < G.n_groups; i++) gx_free(a, G.members[i]);
  gx_free(a, G.grp);
  gx_free(a, G.head);
  gx_free(a, G.members);
  gx_free(a, G.n_mem);
  free_uses(e, &U);
  return st;
}
