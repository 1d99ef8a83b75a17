/* SPDX-License-Identifier: Apache-2.0 */
/* hfuse.c - horizontal GEMM fusion: matmuls sharing their left operand become one wider GEMM.
 *
 * x @ Wq^T, x @ Wk^T, x @ Wv^T (attention projections) and x @ W1^T, x @ W3^T (a gated MLP)
 * read the same A. As separate GEMMs each packs A again and runs a narrow product; as one GEMM
 * against the weights stacked along N, A is packed once and the product is wide enough to keep
 * every thread busy. The weights are stacked by a cat (a copy of K x sum(N) elements per run,
 * 1/M of the GEMM's work, so only done when M >= HF_MIN_M) and every original product becomes a
 * column slice (a view) of the wide result. Only weights that are graph inputs or constants
 * (through views) are stacked, so no member can depend on another; results that are graph
 * outputs are not merged (they would need a copy). Graph level, before layouts.
 */
#include <string.h>

#include "graph/graph_internal.h"
#include "runtime/checked.h"

#define HF_MIN_M 64   /* rows of A from which stacking the weights pays for itself */
#define HF_MAX_MEMBERS 8

/* 1 if v is (views of) a graph input or a constant. */
static int is_weight(const kiln_graph_t* g, int v) {
  int op = g->nodes[g->values[gx_view_source(g, v)].node].op;
  return op == GX_OP_INPUT || op == GX_OP_CONST;
}

/* 1 if matmul node n is a candidate: f32 [M, K] @ [K, N] with a weight B and M >= HF_MIN_M. */
static int candidate(const kiln_graph_t* g, const gx_node* n) {
  if (n->dead || n->op != GX_OP_MATMUL || n->out[0] < 0) return 0;
  const gx_value* a = &g->values[n->in[0]];
  const gx_value* b = &g->values[n->in[1]];
  return a->dtype == KILN_DTYPE_F32 && b->dtype == KILN_DTYPE_F32 && a->ndim == 2 &&
         b->ndim == 2 && a->shape[0] >= HF_MIN_M && a->shape[1] > 0 && b->shape[1] > 0 &&
         is_weight(g, n->in[1]);
}

/* W when v is permute(W, [1, 0]) of a 2-D W, else -1. */
static int transposed_of(const kiln_graph_t* g, int v) {
  const gx_node* p = &g->nodes[g->values[v].node];
  if (p->op != GX_OP_PERMUTE || p->i[0] != 1 || g->values[p->in[0]].ndim != 2) return -1;
  return p->in[0];
}

static kiln_status_t add(kiln_graph_t* g, int op, int n_in, const int* in, int n_i,
                         const int64_t* iv, int* out) {
  gx_spec s;
  memset(&s, 0, sizeof s);
  s.op = op;
  s.dtype = s.dtype2 = -1;
  s.n_in = n_in;
  s.in = in;
  s.n_i = n_i;
  for (int k = 0; k < n_i; k++) s.i[k] = iv[k];
  int outs[GX_MAX_OUT];
  KILN_RETURN_IF_ERROR(gx_add(g, &s, outs));
  *out = outs[0];
  return KILN_OK;
}

/* 1 if the stacked weights [K, sum N] and the wide result [M, sum N] stay within the value cap
 * (every member is legal on its own; their sum need not be). */
static int stack_fits(const kiln_graph_t* g, const int* mem, int nm) {
  const gx_value* a = &g->values[g->nodes[mem[0]].in[0]];
  int64_t n = 0, kn, mn;
  for (int k = 0; k < nm; k++)
    if (!kiln_add_i64(n, g->values[g->nodes[mem[k]].out[0]].shape[1], &n)) return 0;
  return kiln_mul_i64(a->shape[1], n, &kn) && kn <= KILN_NUMEL_MAX &&
         kiln_mul_i64(a->shape[0], n, &mn) && mn <= KILN_NUMEL_MAX;
}

/* Fuses the members (matmul node ids sharing A). */
static kiln_status_t fuse(kiln_graph_t* g, const int* mem, int nm) {
  int a = g->nodes[mem[0]].in[0];
  int srcs[HF_MAX_MEMBERS], all_t = 1;
  for (int k = 0; k < nm; k++) {
    srcs[k] = transposed_of(g, g->nodes[mem[k]].in[1]);
    if (srcs[k] < 0) all_t = 0;
  }
  int b;
  if (all_t) { /* x @ W^T: stack the W along rows (a plain copy), view it transposed */
    int64_t dim0 = 0, perm[2] = {1, 0};
    int wcat;
    KILN_RETURN_IF_ERROR(add(g, GX_OP_CAT, nm, srcs, 1, &dim0, &wcat));
    KILN_RETURN_IF_ERROR(add(g, GX_OP_PERMUTE, 1, &wcat, 2, perm, &b));
  } else {
    int64_t dim1 = 1;
    for (int k = 0; k < nm; k++) srcs[k] = g->nodes[mem[k]].in[1];
    KILN_RETURN_IF_ERROR(add(g, GX_OP_CAT, nm, srcs, 1, &dim1, &b));
  }
  int ab[2] = {a, b}, c;
  KILN_RETURN_IF_ERROR(add(g, GX_OP_MATMUL, 2, ab, 0, NULL, &c));
  int64_t off = 0;
  for (int k = 0; k < nm; k++) {
    const int old = g->nodes[mem[k]].out[0];
    const int64_t n = g->values[old].shape[1];
    int64_t sl[4] = {1, off, off + n, 1};
    int v;
    KILN_RETURN_IF_ERROR(add(g, GX_OP_SLICE, 1, &c, 4, sl, &v));
    off += n;
    g->nodes[mem[k]].dead = 1;
    gx_replace_uses(g, old, v);
  }
  return KILN_OK;
}

/* Results that are graph outputs (or viewed by one) are left alone: as column slices they
 * would need a copy each run (a training forward saves such results for the backward). */
kiln_status_t gx_pass_hfuse(kiln_graph_t* g, int64_t* merged) {
  const int n0 = g->n_nodes;
  char* out_src = gx_calloc(&g->alloc, (size_t)g->n_values + 1, 1);
  if (!out_src) return kiln_error(KILN_ERROR_OUT_OF_MEMORY, "kiln graph: out of memory (hfuse)");
  for (int k = 0; k < g->n_outputs; k++) out_src[gx_view_source(g, g->outputs[k])] = 1;
  kiln_status_t st = KILN_OK;
  for (int i = 0; i < n0 && st == KILN_OK; i++) {
    if (!candidate(g, &g->nodes[i]) || out_src[g->nodes[i].out[0]]) continue;
    int mem[HF_MAX_MEMBERS], nm = 1;
    mem[0] = i;
    const int a = g->nodes[i].in[0];
    for (int j = i + 1; j < n0 && nm < HF_MAX_MEMBERS; j++)
      if (g->nodes[j].in[0] == a && candidate(g, &g->nodes[j]) && !out_src[g->nodes[j].out[0]])
        mem[nm++] = j;
    if (nm < 2 || !stack_fits(g, mem, nm)) continue;
    st = fuse(g, mem, nm);
    if (st == KILN_OK && merged) *merged += nm;
  }
  gx_free(&g->alloc, out_src);
  return st;
}
