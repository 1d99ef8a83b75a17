/* SPDX-License-Identifier: Apache-2.0 */
/* cat.c - cat elision: producers write straight into the slices of a cat's result.
 *
 * cat(x_0, .., x_n-1) along dim d copies every x_i into a slice of its result C. When x_i is
 * (a reshape chain of) the result R_i of a pointwise node that nothing else reads, R_i can live
 * in that slice instead: R_i's layout becomes a strided window of C, the pointwise node (or the
 * fused group it joins) writes there, and the cat does nothing. RoPE's stack of the rotated
 * even/odd halves is the case that matters: two [.., hd/2] results interleaved into [.., hd/2, 2].
 *
 * The cat node stays in the graph, marked (aux = 1), so the fusion pass still sees it as the
 * reader of each R_i (R_i is stored, and no group may run after the cat while writing R_i); the
 * plan gives it no step and starts C's buffer at the first step writing into it.
 *
 * contiguous(permute(R)) is elided the same way when R's producer writes any output strides
 * (attention and its gradients, pointwise; through a reshape chain for pointwise): R becomes
 * the permuted window of the contiguous result.
 */
#include <string.h>

#include "graph/graph_internal.h"

#define CAT_MAX_IN 16   /* inputs of an elided cat */
#define CAT_MAX_CHAIN 4 /* reshapes between a producer and the cat */

/* 1 if a and b describe the same elements (dims of size 1 may differ in stride). */
static int same_window(const gx_value* a, const gx_value* b) {
  if (a->root != b->root || a->offset != b->offset || a->ndim != b->ndim) return 0;
  for (int i = 0; i < a->ndim; i++) {
    if (a->shape[i] != b->shape[i]) return 0;
    if (a->shape[i] != 1 && a->strides[i] != b->strides[i]) return 0;
  }
  return 1;
}

/* The chain x <- reshape <- .. <- R (R a pointwise result): fills chain[0..*len) with the view
 * values from x back to (excluding) R and returns R, or -1 when some link is not a single-use
 * reshape or R is not a single-use pointwise result. */
static int reshape_chain(const kiln_graph_t* g, const int* uses, int x, int* chain, int* len) {
  int n = 0;
  for (;;) {
    const gx_value* v = &g->values[x];
    const gx_node* p = &g->nodes[v->node];
    if (uses[x] != 1) return -1;
    if (p->op == GX_OP_RESHAPE) {
      if (n == CAT_MAX_CHAIN) return -1;
      chain[n++] = x;
      x = p->in[0];
      continue;
    }
    if (p->op != GX_OP_UNARY && p->op != GX_OP_BINARY && p->op != GX_OP_TERNARY &&
        p->op != GX_OP_CAST)
      return -1;
    if (p->dead || v->root != x || v->numel == 0) return -1;
    *len = n;
    return x;
  }
}

/* Makes every input of cat node `id` a window of its result, or changes nothing. */
static int elide_one(kiln_exec_t* e, const int* uses, int id) {
  kiln_graph_t* g = e->wg;
  gx_node* n = &g->nodes[id];
  if (n->n_in < 1 || n->n_in > CAT_MAX_IN) return 0;
  const int C = n->out[0];
  const gx_value* cv = &g->values[C];
  if (cv->root != C || cv->numel == 0) return 0;
  const int d = (int)n->i[0];
  int src[CAT_MAX_IN];
  for (int k = 0; k < n->n_in; k++) {
    int chain[CAT_MAX_CHAIN], len;
    const int x = n->in[k];
    if (g->values[x].dtype != cv->dtype) return 0;
    src[k] = reshape_chain(g, uses, x, chain, &len);
    if (src[k] < 0) return 0;
    for (int j = 0; j < k; j++)
      if (src[j] == src[k]) return 0;
  }
  /* the new layouts, committed only when every input works out */
  gx_value saved[CAT_MAX_IN][CAT_MAX_CHAIN + 1];
  int saved_id[CAT_MAX_IN][CAT_MAX_CHAIN + 1], n_saved[CAT_MAX_IN];
  int64_t start = 0;
  int ok = 1;
  for (int k = 0; k < n->n_in; k++) n_saved[k] = 0;
  for (int k = 0; k < n->n_in && ok; k++) {
    const int x = n->in[k];
    int chain[CAT_MAX_CHAIN], len;
    reshape_chain(g, uses, x, chain, &len);
    gx_value want = g->values[x]; /* the slice of C that input k fills */
    want.root = C;
    want.offset = start * cv->strides[d];
    memcpy(want.strides, cv->strides, sizeof want.strides);
    start += want.shape[d];
    gx_value* r = &g->values[src[k]];
    int64_t st[KILN_MAX_DIMS];
    if (!gx_view_strides(want.shape, want.strides, want.ndim, r->shape, r->ndim, st)) {
      ok = 0;
      break;
    }
    saved[k][n_saved[k]] = *r;
    saved_id[k][n_saved[k]++] = src[k];
    r->root = C;
    r->offset = want.offset;
    memcpy(r->strides, st, sizeof(int64_t) * (size_t)r->ndim);
    for (int j = len - 1; j >= 0 && ok; j--) { /* re-derive the chain from R outwards */
      saved[k][n_saved[k]] = g->values[chain[j]];
      saved_id[k][n_saved[k]++] = chain[j];
      if (!gx_layout_value(g, chain[j])) ok = 0;
    }
    if (ok && !same_window(&g->values[x], &want)) ok = 0;
  }
  if (!ok) { /* put every layout back */
    for (int q = n->n_in - 1; q >= 0; q--)
      for (int j = n_saved[q] - 1; j >= 0; j--) g->values[saved_id[q][j]] = saved[q][j];
    return 0;
  }
  n->aux = 1;
  return 1;
}

/* contiguous(permute(V)) where V is the single-use result R of a node that writes any output
 * strides (attention's output, attention's gradients, a pointwise op), or a single-use reshape
 * chain of a pointwise R: R is laid out so that V is the permuted window of the contiguous
 * result C, its producer writes C directly and the copy does nothing. Attention's
 * o.transpose(1, 2).contiguous() before the output projection, and in a backward the
 * same of dq / dk / dv (or of RoPE's backward, a reshape of the pointwise result) before the
 * weight-gradient GEMMs, are the cases that matter. */
static int elide_contiguous(kiln_exec_t* e, const int* uses, int id) {
  kiln_graph_t* g = e->wg;
  gx_node* n = &g->nodes[id];
  const int C = n->out[0], x = n->in[0];
  const gx_value* cv = &g->values[C];
  if (C < 0 || cv->root != C || cv->numel == 0) return 0;
  const gx_node* pm = &g->nodes[g->values[x].node];
  if (pm->op != GX_OP_PERMUTE || pm->dead || uses[x] != 1) return 0;
  const int V = pm->in[0];
  int chain[CAT_MAX_CHAIN], len = 0, R = V;
  if (g->nodes[g->values[V].node].op == GX_OP_RESHAPE && (R = reshape_chain(g, uses, V, chain, &len)) < 0)
    return 0;
  gx_value* r = &g->values[R];
  const gx_node* p = &g->nodes[r->node];
  const int writes_any_strides =
      (p->op == GX_OP_SDPA && r->slot == 0) || p->op == GX_OP_SDPA_BW || p->op == GX_OP_UNARY ||
      p->op == GX_OP_BINARY || p->op == GX_OP_TERNARY || p->op == GX_OP_CAST;
  if (!writes_any_strides || p->dead || r->root != R || uses[R] != 1 || r->dtype != cv->dtype ||
      r->numel == 0 || g->values[V].ndim != cv->ndim)
    return 0;
  for (int k = 0; k < g->n_outputs; k++)
    if (g->values[g->outputs[k]].root == R) return 0;
  /* x = permute(V, perm): x dim d is V dim perm[d], and x must be C's identity window */
  int64_t vst[KILN_MAX_DIMS], st[KILN_MAX_DIMS];
  const gx_value* vv = &g->values[V];
  for (int d = 0; d < cv->ndim; d++) vst[pm->i[d]] = cv->strides[d];
  if (len == 0) memcpy(st, vst, sizeof(int64_t) * (size_t)r->ndim);
  else if (!gx_view_strides(vv->shape, vst, vv->ndim, r->shape, r->ndim, st)) return 0;
  gx_value saved[CAT_MAX_CHAIN + 2];
  int saved_id[CAT_MAX_CHAIN + 2], n_saved = 0;
  saved[n_saved] = *r;
  saved_id[n_saved++] = R;
  r->root = C;
  r->offset = 0;
  memcpy(r->strides, st, sizeof(int64_t) * (size_t)r->ndim);
  int ok = 1;
  for (int j = len - 1; j >= 0 && ok; j--) { /* re-derive the chain from R outwards */
    saved[n_saved] = g->values[chain[j]];
    saved_id[n_saved++] = chain[j];
    ok = gx_layout_value(g, chain[j]);
  }
  saved[n_saved] = g->values[x];
  saved_id[n_saved++] = x;
  if (!ok || !gx_layout_value(g, x) || !same_window(&g->values[x], cv)) {
    for (int j = n_saved - 1; j >= 0; j--) g->values[saved_id[j]] = saved[j];
    return 0;
  }
  n->aux = 1;
  return 1;
}

kiln_status_t gx_pass_cat(kiln_exec_t* e) {
  kiln_graph_t* g = e->wg;
  int* uses = gx_alloc(&e->alloc, sizeof(int) * (size_t)(g->n_values + 1));
  if (!uses) return kiln_error(KILN_ERROR_OUT_OF_MEMORY, "kiln graph: out of memory (cat)");
  gx_count_uses(g, e->order, e->n_order, uses);
  for (int oi = 0; oi < e->n_order; oi++) {
    int id = e->order[oi];
    if (g->nodes[id].dead) continue;
    if (g->nodes[id].op == GX_OP_CAT && elide_one(e, uses, id)) e->stats.n_cats_elided++;
    if (g->nodes[id].op == GX_OP_CONTIGUOUS && elide_contiguous(e, uses, id))
      e->stats.n_contiguous_elided++;
  }
  gx_free(&e->alloc, uses);
  return KILN_OK;
}

int gx_cat_elided(const gx_node* n) {
  return (n->op == GX_OP_CAT || n->op == GX_OP_CONTIGUOUS) && n->aux == 1;
}

int gx_view_source(const kiln_graph_t* g, int x) {
  while (gx_is_view(g->nodes[g->values[x].node].op)) x = g->nodes[g->values[x].node].in[0];
  return x;
}
