/* SPDX-License-Identifier: Apache-2.0 */
/* exec.c - the compile driver, the node runner (one kernel call per node) and kiln_exec_run. */
#include <math.h>
#include <string.h>
#include <time.h>

#include "graph/graph_internal.h"
#include "kiln/dtype.h"
#include "kiln/kernels/conv.h"
#include "kiln/kernels/elementwise.h"
#include "kiln/kernels/gemm.h"
#include "kiln/kernels/index.h"
#include "kiln/kernels/nn.h"
#include "kiln/kernels/reduce.h"
#include "kiln/parallel.h"

#define BADARG(...) kiln_error(KILN_ERROR_INVALID_ARGUMENT, __VA_ARGS__)

/* ---- running one node ------------------------------------------------------------------------ */

int gx_out_optional(int op, int slot) {
  switch (op) {
    case GX_OP_LAYER_NORM: return slot >= 1;
    case GX_OP_REDUCE_INDEX: return slot == 0;
    case GX_OP_RMS_NORM:
    case GX_OP_NLL_LOSS:
    case GX_OP_SDPA:
    case GX_OP_MAX_POOL: return slot == 1;
    case GX_OP_CONV_BW:
    case GX_OP_LAYER_NORM_BW:
    case GX_OP_RMS_NORM_BW:
    case GX_OP_SDPA_BW: return 1;
    default: return 0;
  }
}

/* `out` (the result shape, reduced dims dropped or kept) as a descriptor of x's rank with the
 * reduced dims of size 1 re-inserted. */
static kiln_tensor_t keepdim_view(const kiln_tensor_t* out, int x_ndim, uint32_t mask) {
  kiln_tensor_t t = *out;
  if (out->ndim == x_ndim) return t;
  int j = 0;
  for (int i = 0; i < x_ndim; i++) {
    if (mask & (1u << i)) {
      t.shape[i] = 1;
      t.strides[i] = 0;
    } else {
      t.shape[i] = out->shape[j];
      t.strides[i] = out->strides[j];
      j++;
    }
  }
  t.ndim = x_ndim;
  return t;
}

/* GX_OP_GEMM: i[0] activation, i[1] bias axis, i[2] trans_a, i[3] trans_b, i[4] lda, i[5] ldb,
 * i[6] M, i[7] N, i[8] K, i[9] ldr, i[10] residual op (kiln_gemm_residual_op_t); f[0] alpha. Inputs a, b, bias (-1), residual (-1), then
 * optionally stacked weights W_0.. (b is -1 then: B = [W_0; W_1; ..]^T, read in place). The
 * geometry was checked against the layouts when the node was made (fusion.c). */
static kiln_status_t run_gemm(const gx_node* n, kiln_tensor_t* const* in, kiln_tensor_t* out) {
  const int64_t ldc = n->i[7] > 0 ? n->i[7] : 1;
  kiln_gemm_epilogue_t ep;
  memset(&ep, 0, sizeof ep);
  ep.activation = (int)n->i[0];
  ep.bias_axis = (int)n->i[1];
  ep.bias = in[2] ? in[2]->data : NULL;
  ep.residual = in[3] ? in[3]->data : NULL;
  ep.ldr = in[3] ? n->i[9] : 0;
  ep.residual_op = (int)n->i[10];
  if (n->n_in > 4) { /* B is the stack of weights in[4..], read in place (a [n_s, K] block each) */
    kiln_gemm_wblock_t blk[KILN_GEMM_MAX_WBLOCKS];
    const int nb = n->n_in - 4;
    for (int s = 0; s < nb; s++) {
      const kiln_tensor_t* w = in[4 + s];
      blk[s].w = w->data;
      blk[s].n = w->shape[0];
      blk[s].ld = w->shape[0] > 1 ? w->strides[0] : (n->i[8] > 1 ? n->i[8] : 1);
    }
    return kiln_sgemm_wcat((int)n->i[2], n->i[6], n->i[8], (float)n->f[0], in[0]->data, n->i[4], nb, blk,
                           0.0f, out->data, ldc, &ep);
  }
  return kiln_sgemm_ex((int)n->i[2], (int)n->i[3], n->i[6], n->i[7], n->i[8], (float)n->f[0],
                       in[0]->data, n->i[4], in[1]->data, n->i[5], 0.0f, out->data, ldc, &ep);
}

kiln_status_t gx_run_node(const kiln_graph_t* g, const gx_node* n, kiln_tensor_t* const* in,
                          kiln_tensor_t* const* out) {
  (void)g;
  switch (n->op) {
    case GX_OP_INPUT:
    case GX_OP_CONST:
    case GX_OP_RESHAPE:
    case GX_OP_PERMUTE:
    case GX_OP_EXPAND:
    case GX_OP_SLICE: return KILN_OK;
    case GX_OP_UNARY: {
      kiln_unary_params_t p = {n->f[0], n->f[1], n->f[2], n->f[3], n->f[4], n->f[5],
                               (int)n->i[0], (int)n->i[1]};
      return kiln_kernel_unary_ex((kiln_unary_op_t)n->sub, in[0], &p, (kiln_dtype_t)n->dtype2,
                                  out[0]);
    }
    case GX_OP_BINARY:
      return kiln_kernel_binary((kiln_binary_op_t)n->sub, in[0], in[1], n->f[0],
                                (kiln_dtype_t)n->dtype2, out[0]);
    case GX_OP_TERNARY:
      return kiln_kernel_ternary((kiln_ternary_op_t)n->sub, in[0], in[1], in[2], n->f[0],
                                 (kiln_dtype_t)n->dtype2, out[0]);
    case GX_OP_CAST:
    case GX_OP_CONTIGUOUS: return kiln_kernel_copy(in[0], out[0]);
    case GX_OP_REDUCE: {
      uint32_t mask = (uint32_t)n->i[0];
      kiln_tensor_t o = keepdim_view(out[0], in[0]->ndim, mask);
      kiln_reduce_params_t p = {n->f[0], n->f[0]};
      return kiln_kernel_reduce((kiln_reduce_op_t)n->sub, in[0], mask, &p,
                                (kiln_dtype_t)n->dtype2, &o);
    }
    case GX_OP_REDUCE_INDEX: {
      int dim = (int)n->i[0];
      kiln_tensor_t ov, oi;
      kiln_tensor_t* pv = NULL;
      if (dim == KILN_REDUCE_INDEX_ALL_DIMS) {
        oi = *out[1];
        if (out[0]) {
          ov = *out[0];
          pv = &ov;
        }
      } else {
        uint32_t mask = in[0]->ndim ? 1u << dim : 0;
        oi = keepdim_view(out[1], in[0]->ndim, mask);
        if (out[0]) {
          ov = keepdim_view(out[0], in[0]->ndim, mask);
          pv = &ov;
        }
      }
      return kiln_kernel_reduce_index((kiln_reduce_index_op_t)n->sub, in[0], dim, pv, &oi);
    }
    case GX_OP_SCAN:
      return n->sub == 0 ? kiln_kernel_cumsum(in[0], (int)n->i[0], (kiln_dtype_t)n->dtype, out[0])
                         : kiln_kernel_cumprod(in[0], (int)n->i[0], (kiln_dtype_t)n->dtype, out[0]);
    case GX_OP_MATMUL: return kiln_kernel_matmul(in[0], in[1], out[0]);
    case GX_OP_ADDMM:
      return kiln_kernel_matmul_ex(in[1], in[2], in[0], n->f[1], in[0] ? n->f[0] : 0.0, out[0]);
    case GX_OP_CAT: {
      int d = (int)n->i[0];
      int64_t off = 0;
      size_t es = kiln_dtype_size(out[0]->dtype);
      for (int k = 0; k < n->n_in; k++) {
        kiln_tensor_t dst = *out[0];
        dst.shape[d] = in[k]->shape[d];
        if (dst.shape[d] == 0) continue;
        dst.data = (char*)out[0]->data + off * out[0]->strides[d] * (int64_t)es;
        KILN_RETURN_IF_ERROR(kiln_kernel_copy(in[k], &dst));
        off += in[k]->shape[d];
      }
      return KILN_OK;
    }
    case GX_OP_SOFTMAX: return kiln_kernel_softmax(in[0], (int)n->i[0], (int)n->i[1], out[0]);
    case GX_OP_SOFTMAX_BW:
      return kiln_kernel_softmax_backward(in[0], in[1], (int)n->i[0], (int)n->i[1], out[0]);
    case GX_OP_LAYER_NORM:
      return kiln_kernel_layer_norm(in[0], (int)n->i[0], in[1], in[2], n->f[0], out[0], out[1],
                                    out[2]);
    case GX_OP_LAYER_NORM_BW:
      return kiln_kernel_layer_norm_backward(in[0], in[1], in[2], in[3], in[4], (int)n->i[0],
                                             out[0], out[1], out[2]);
    case GX_OP_RMS_NORM:
      return kiln_kernel_rms_norm(in[0], (int)n->i[0], in[1], n->f[0], out[0], out[1]);
    case GX_OP_RMS_NORM_BW:
      return kiln_kernel_rms_norm_backward(in[0], in[1], in[2], in[3], (int)n->i[0], out[0],
                                           out[1]);
    case GX_OP_EMBEDDING: return kiln_kernel_embedding(in[0], in[1], out[0]);
    case GX_OP_EMBEDDING_BW:
      return kiln_kernel_embedding_backward_ex(in[0], in[1], n->i[0], n->i[1], (int)n->i[2],
                                               out[0]);
    case GX_OP_NLL_LOSS:
      return kiln_kernel_nll_loss(in[0], in[1], in[2], (int)n->i[0], n->i[1], out[0], out[1]);
    case GX_OP_NLL_LOSS_BW: /* i[2] = 1: fused with the log_softmax backward (peephole) */
      if (n->n_i > 2 && n->i[2])
        return kiln_kernel_nll_log_softmax_backward(in[0], in[1], in[2], in[3], (int)n->i[0], n->i[1],
                                                    in[4], out[0]);
      return kiln_kernel_nll_loss_backward(in[0], in[1], in[2], in[3], (int)n->i[0], n->i[1],
                                           in[4], out[0]);
    case GX_OP_SDPA:
      return kiln_kernel_sdpa(in[0], in[1], in[2], in[3], (int)n->i[0], n->f[0], out[0], out[1]);
    case GX_OP_SDPA_BW:
      return kiln_kernel_sdpa_backward(in[0], in[1], in[2], in[3], in[4], in[5], in[6],
                                       (int)n->i[0], n->f[0], out[0], out[1], out[2]);
    case GX_OP_CONV:
      return kiln_kernel_conv2d(in[0], in[1], in[2], n->i, n->i + 2, n->i + 4, n->i[6], out[0]);
    case GX_OP_CONV_BW:
      return kiln_kernel_conv2d_backward(in[0], in[1], in[2], n->i, n->i + 2, n->i + 4, n->i[6],
                                         out[0], out[1], out[2]);
    case GX_OP_MAX_POOL:
      return kiln_kernel_max_pool2d(in[0], n->i, n->i + 2, n->i + 4, n->i + 6, (int)n->i[8],
                                    out[0], out[1]);
    case GX_OP_MAX_POOL_BW: return kiln_kernel_max_pool2d_backward(in[0], in[1], out[0]);
    case GX_OP_AVG_POOL:
      return kiln_kernel_avg_pool2d(in[0], n->i, n->i + 2, n->i + 4, (int)n->i[6], (int)n->i[7],
                                    n->i[8], out[0]);
    case GX_OP_AVG_POOL_BW:
      return kiln_kernel_avg_pool2d_backward(in[0], n->i, n->i + 2, n->i + 4, (int)n->i[6],
                                             (int)n->i[7], n->i[8], out[0]);
    case GX_OP_ADAPTIVE_POOL: return kiln_kernel_adaptive_avg_pool2d(in[0], out[0]);
    case GX_OP_ADAPTIVE_POOL_BW: return kiln_kernel_adaptive_avg_pool2d_backward(in[0], out[0]);
    case GX_OP_GATHER: return kiln_kernel_gather(in[0], (int)n->i[0], in[1], out[0]);
    case GX_OP_INDEX_SELECT: return kiln_kernel_index_select(in[0], (int)n->i[0], in[1], out[0]);
    case GX_OP_SCATTER:
      KILN_RETURN_IF_ERROR(kiln_kernel_copy(in[0], out[0]));
      return kiln_kernel_scatter(out[0], (int)n->i[0], in[1], in[2], n->f[0],
                                 (kiln_scatter_reduce_t)n->sub, (int)n->i[1]);
    case GX_OP_INDEX:
      return kiln_kernel_index(in[0], (const kiln_tensor_t* const*)(in + 1), n->n_in - 1, out[0]);
    case GX_OP_INDEX_PUT:
      KILN_RETURN_IF_ERROR(kiln_kernel_copy(in[0], out[0]));
      return kiln_kernel_index_put(out[0], (const kiln_tensor_t* const*)(in + 2), n->n_in - 2,
                                   in[1], (int)n->i[0]);
    case GX_OP_ARANGE:
      return n->sub ? kiln_kernel_arange_i64(out[0], n->i[1], n->i[2])
                    : kiln_kernel_arange(out[0], n->f[0], n->f[1]);
    case GX_OP_GEMM: return run_gemm(n, in, out[0]);
    default:
      return kiln_error(KILN_ERROR_INTERNAL, "kiln graph: cannot run op %s", gx_op_name(n->op));
  }
}

/* ---- compile --------------------------------------------------------------------------------- */

static void free_groups(kiln_exec_t* e) {
  for (int i = 0; i < e->n_groups; i++) {
    gx_group* gr = &e->groups[i];
    gx_free(&e->alloc, gr->instr);
    gx_free(&e->alloc, gr->reg_dtype);
    gx_free(&e->alloc, gr->in_vids);
    gx_free(&e->alloc, gr->out_vids);
    gx_free(&e->alloc, gr->members);
    gx_free(&e->alloc, gr->in_st);
    gx_free(&e->alloc, gr->out_st);
  }
  gx_free(&e->alloc, e->groups);
  e->groups = NULL;
  e->n_groups = 0;
}

void kiln_exec_destroy(kiln_exec_t* e) {
  if (!e) return;
  kiln_allocator_t a = e->alloc;
  free_groups(e);
  kiln_graph_destroy(e->wg);
  kiln_graph_destroy(e->src);
  gx_free(&a, e->order);
  gx_free(&a, e->steps);
  gx_free(&a, e->st_cls);
  gx_free(&a, e->st_idx);
  gx_free(&a, e->v_used);
  gx_run_free_all(e);
  gx_free(&a, e->vt);
  gx_free(&a, e->out_t);
  gx_free(&a, e->bufs);
  gx_free(&a, e->arena_off);
  gx_free(&a, e->prof_ns);
  gx_free(&a, e);
}

kiln_status_t kiln_graph_compile_ex(const kiln_graph_t* g, int flags, kiln_exec_t** out) {
  return gx_compile(g, flags, 0, out);
}

kiln_status_t gx_compile(const kiln_graph_t* g, int flags, int share_constants, kiln_exec_t** out) {
  if (!out) return BADARG("kiln_graph_compile: NULL out");
  *out = NULL;
  if (!g) return BADARG("kiln_graph_compile: NULL graph");
  if (g->n_outputs < 1) return BADARG("kiln_graph_compile: the graph has no outputs");
  if (flags & ~KILN_COMPILE_ALL_FLAGS)
    return BADARG("kiln_graph_compile: unknown flags 0x%x (defined: 0x%x)",
                  (unsigned)flags & ~(unsigned)KILN_COMPILE_ALL_FLAGS,
                  (unsigned)KILN_COMPILE_ALL_FLAGS);
  kiln_exec_t* e = kiln_allocator_alloc(&g->alloc, sizeof(*e), GX_ALIGN);
  if (!e) return kiln_error(KILN_ERROR_OUT_OF_MEMORY, "kiln_graph_compile: out of memory");
  memset(e, 0, sizeof(*e));
  e->alloc = g->alloc;
  e->flags = flags;
  atomic_flag_clear(&e->run_lock);
  atomic_init(&e->prof_runs, 0);
  atomic_init(&e->prof_on, 0);
  kiln_status_t st = gx_graph_copy(g, share_constants, &e->src);
  if (st == KILN_OK) st = gx_graph_copy(e->src, 1, &e->wg);
  if (st != KILN_OK) {
    kiln_exec_destroy(e);
    return st;
  }
  for (int i = 0; i < g->n_nodes; i++)
    if (g->nodes[i].op != GX_OP_INPUT && g->nodes[i].op != GX_OP_CONST) e->stats.n_nodes_before++;
  kiln_graph_t* w = e->wg;
  if (!(flags & KILN_COMPILE_NO_DCE)) st = gx_pass_dce(w, &e->stats.n_dce);
  if (st == KILN_OK && !(flags & KILN_COMPILE_NO_CSE)) st = gx_pass_cse(w, &e->stats.n_cse);
  if (st == KILN_OK && !(flags & KILN_COMPILE_NO_FOLD)) {
    st = gx_pass_fold(w, &e->stats.n_folded);
    if (st == KILN_OK && !(flags & KILN_COMPILE_NO_CSE)) st = gx_pass_cse(w, &e->stats.n_cse);
  }
  if (st == KILN_OK && !(flags & KILN_COMPILE_NO_PEEPHOLE)) st = gx_pass_peephole(w, NULL);
  if (st == KILN_OK && !(flags & KILN_COMPILE_NO_VIEW_SINK)) st = gx_pass_view_sink(w, NULL);
  if (st == KILN_OK && !(flags & KILN_COMPILE_NO_DCE)) st = gx_pass_dce(w, NULL);
  if (st == KILN_OK && !(flags & KILN_COMPILE_NO_HFUSE)) {
    st = gx_pass_hfuse(w, &e->stats.n_gemms_merged);
    if (st == KILN_OK && !(flags & KILN_COMPILE_NO_DCE)) st = gx_pass_dce(w, NULL);
  }
  if (st == KILN_OK) st = gx_pass_views(e);
  if (st == KILN_OK && !(flags & KILN_COMPILE_NO_EPILOGUE)) st = gx_pass_epilogue(e);
  if (st == KILN_OK && !(flags & KILN_COMPILE_NO_CAT_ELISION)) st = gx_pass_cat(e);
  if (st == KILN_OK && !(flags & KILN_COMPILE_NO_FUSION)) st = gx_pass_fusion(e);
  if (st == KILN_OK) st = gx_plan(e);
  if (st == KILN_OK) { /* the first run context: a single-threaded caller never makes another */
    gx_run* r = gx_run_acquire(e);
    if (r) gx_run_release(e, r);
    else st = KILN_ERROR_OUT_OF_MEMORY;
  }
  if (st != KILN_OK) {
    kiln_exec_destroy(e);
    return st;
  }
  *out = e;
  return KILN_OK;
}

kiln_status_t kiln_graph_compile(const kiln_graph_t* g, kiln_exec_t** out) {
  return kiln_graph_compile_ex(g, 0, out);
}

/* ---- run ------------------------------------------------------------------------------------- */

static int64_t now_ns(void) {
  struct timespec ts;
  timespec_get(&ts, TIME_UTC);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static kiln_status_t run_step(gx_run* r, const gx_step* s) {
  const kiln_exec_t* e = r->e;
  const kiln_graph_t* g = e->wg;
  if (s->kind == GX_STEP_COPY) return kiln_kernel_copy(&r->vt[s->src], &r->out_t[s->out]);
  const gx_node* n = &g->nodes[s->node];
  if (n->op == GX_OP_FUSED) return gx_run_group(r, &e->groups[n->aux]);
  kiln_tensor_t* in[64];
  kiln_tensor_t* out[GX_MAX_OUT] = {NULL, NULL, NULL};
  int n_in = n->n_in;
  if (n_in > 64) { /* only cat takes this many inputs: copy each into its slice */
    const kiln_tensor_t* o = &r->vt[n->out[0]];
    int d = (int)n->i[0];
    int64_t off = 0, es = (int64_t)kiln_dtype_size(o->dtype);
    for (int k = 0; k < n_in; k++) {
      const kiln_tensor_t* src = &r->vt[n->in[k]];
      kiln_tensor_t dst = *o;
      dst.shape[d] = src->shape[d];
      if (dst.shape[d] == 0) continue;
      dst.data = (char*)o->data + off * o->strides[d] * es;
      KILN_RETURN_IF_ERROR(kiln_kernel_copy(src, &dst));
      off += src->shape[d];
    }
    return KILN_OK;
  }
  for (int k = 0; k < n_in; k++) in[k] = n->in[k] >= 0 ? &r->vt[n->in[k]] : NULL;
  for (int k = 0; k < n->n_out; k++)
    out[k] = n->out[k] >= 0 && e->v_used[n->out[k]] ? &r->vt[n->out[k]] : NULL;
  return gx_run_node(g, n, in, out);
}

/* Step i, or the tile chain it heads. */
static kiln_status_t run_steps(gx_run* r, int i) {
  const kiln_exec_t* e = r->e;
  const gx_step* s = &e->steps[i];
  if (s->chain <= 1) return run_step(r, s);
  const gx_group* grs[GX_CHAIN_MAX];
  for (int k = 0; k < s->chain; k++) grs[k] = &e->groups[e->wg->nodes[e->steps[i + k].node].aux];
  return gx_run_chain(r, grs, s->chain, s->chain_rows);
}

int64_t kiln_exec_workspace_size(const kiln_exec_t* e) { return e ? e->arena_bytes : 0; }

/* The checks of a run's arguments: they read only the exec. */
static kiln_status_t check_args(const kiln_exec_t* e, int n_in, void* const* inputs, int n_out,
                                void* const* outputs) {
  const kiln_graph_t* g = e->wg;
  if (n_in != g->n_inputs)
    return BADARG("kiln_exec_run: %d inputs given, the program takes %d", n_in, g->n_inputs);
  if (n_out != g->n_outputs)
    return BADARG("kiln_exec_run: %d outputs given, the program has %d", n_out, g->n_outputs);
  if ((n_in && !inputs) || (n_out && !outputs)) return BADARG("kiln_exec_run: NULL buffer list");
  for (int i = 0; i < n_in; i++)
    if (!inputs[i] && g->values[g->inputs[i]].numel > 0)
      return BADARG("kiln_exec_run: input %d is NULL", i);
  for (int k = 0; k < n_out; k++)
    if (!outputs[k] && g->values[g->outputs[k]].numel > 0)
      return BADARG("kiln_exec_run: output %d is NULL", k);
  return KILN_OK;
}

/* Binds r's descriptors to this run's buffers and runs every step. */
static kiln_status_t run_on(kiln_exec_t* e, gx_run* r, void* const* inputs, void* const* outputs,
                            char* workspace) {
  const kiln_graph_t* g = e->wg;
  for (int k = 0; k < g->n_outputs; k++) r->out_t[k].data = outputs[k];
  /* values living in inputs / outputs, and arena values when the workspace moved since this
   * context's last run */
  char* arena = e->arena_bytes > 0 ? workspace : NULL;
  int rebind = arena != r->bound_arena;
  r->bound_arena = arena;
  for (int v = 0; v < g->n_values; v++) {
    if (!e->v_used[v]) continue;
    const gx_value* val = &g->values[v];
    int root = val->root;
    int cls = e->st_cls[root];
    if (cls == GX_ST_ARENA) {
      if (rebind && arena) r->vt[v].data = arena + e->arena_off[v];
      continue;
    }
    if (cls != GX_ST_INPUT && cls != GX_ST_OUTPUT) continue;
    char* base = cls == GX_ST_INPUT ? (char*)inputs[e->st_idx[root]] : (char*)outputs[e->st_idx[root]];
    r->vt[v].data = base ? base + val->offset * (int64_t)kiln_dtype_size((kiln_dtype_t)val->dtype)
                         : NULL;
  }
  /* read once: a run started while profiling is on counts all its steps */
  atomic_llong* prof = atomic_load_explicit(&e->prof_on, memory_order_acquire) ? e->prof_ns : NULL;
  if (!prof) {
    for (int i = 0; i < e->n_steps; i++)
      if (e->steps[i].chain) KILN_RETURN_IF_ERROR(run_steps(r, i));
    return KILN_OK;
  }
  for (int i = 0; i < e->n_steps; i++) {
    if (!e->steps[i].chain) continue;
    int64_t t0 = now_ns();
    KILN_RETURN_IF_ERROR(run_steps(r, i));
    /* a chain's time goes to its first step */
    atomic_fetch_add_explicit(&prof[i], now_ns() - t0, memory_order_relaxed);
  }
  atomic_fetch_add_explicit(&e->prof_runs, 1, memory_order_relaxed);
  return KILN_OK;
}

kiln_status_t kiln_exec_run(kiln_exec_t* e, int n_in, void* const* inputs, int n_out,
                            void* const* outputs) {
  if (!e) return BADARG("kiln_exec_run: NULL exec");
  KILN_RETURN_IF_ERROR(check_args(e, n_in, inputs, n_out, outputs));
  gx_run* r = gx_run_acquire(e);
  if (!r) return KILN_ERROR_OUT_OF_MEMORY;
  if (e->arena_bytes > 0 && !r->own_arena) { /* this context's own arena, kept with it */
    r->own_arena = kiln_allocator_alloc(&e->alloc, (size_t)e->arena_bytes, GX_ALIGN);
    if (!r->own_arena) {
      gx_run_release(e, r);
      return kiln_error(KILN_ERROR_OUT_OF_MEMORY, "kiln_exec_run: cannot allocate a %lld-byte arena",
                        (long long)e->arena_bytes);
    }
  }
  kiln_status_t st = run_on(e, r, inputs, outputs, r->own_arena);
  gx_run_release(e, r);
  return st;
}

kiln_status_t kiln_exec_run_workspace(kiln_exec_t* e, int n_in, void* const* inputs, int n_out,
                                      void* const* outputs, void* workspace,
                                      int64_t workspace_bytes) {
  if (!e) return BADARG("kiln_exec_run: NULL exec");
  if (e->arena_bytes > 0) {
    if (!workspace || workspace_bytes < e->arena_bytes)
      return BADARG("kiln_exec_run: the workspace has %lld bytes, the program needs %lld",
                    workspace ? (long long)workspace_bytes : 0LL, (long long)e->arena_bytes);
    if (((uintptr_t)workspace & (GX_ALIGN - 1)) != 0)
      return BADARG("kiln_exec_run: the workspace is not %d-byte aligned", GX_ALIGN);
  }
  KILN_RETURN_IF_ERROR(check_args(e, n_in, inputs, n_out, outputs));
  gx_run* r = gx_run_acquire(e);
  if (!r) return KILN_ERROR_OUT_OF_MEMORY;
  kiln_status_t st = run_on(e, r, inputs, outputs, (char*)workspace);
  gx_run_release(e, r);
  return st;
}

kiln_status_t kiln_exec_set_profiling(kiln_exec_t* e, int on) {
  if (!e) return BADARG("kiln_exec_set_profiling: NULL exec");
  if (!on || e->n_steps == 0) {
    atomic_store_explicit(&e->prof_on, 0, memory_order_release);
    return KILN_OK;
  }
  /* the counters are allocated once and kept (a run in flight may still add to them) */
  gx_exec_lock(e);
  if (!e->prof_ns) {
    atomic_llong* p = kiln_allocator_alloc(&e->alloc, (size_t)e->n_steps * sizeof(atomic_llong), GX_ALIGN);
    if (!p) {
      gx_exec_unlock(e);
      return kiln_error(KILN_ERROR_OUT_OF_MEMORY, "kiln_exec_set_profiling: out of memory");
    }
    for (int i = 0; i < e->n_steps; i++) atomic_init(&p[i], 0);
    e->prof_ns = p;
  }
  for (int i = 0; i < e->n_steps; i++) atomic_store_explicit(&e->prof_ns[i], 0, memory_order_relaxed);
  atomic_store_explicit(&e->prof_runs, 0, memory_order_relaxed);
  atomic_store_explicit(&e->prof_on, 1, memory_order_release);
  gx_exec_unlock(e);
  return KILN_OK;
}

/* ---- queries --------------------------------------------------------------------------------- */

kiln_status_t kiln_exec_stats(const kiln_exec_t* e, kiln_exec_stats_t* out) {
  if (!e || !out) return BADARG("kiln_exec_stats: NULL argument");
  *out = e->stats;
  return KILN_OK;
}

int kiln_exec_num_inputs(const kiln_exec_t* e) { return e ? e->src->n_inputs : 0; }
int kiln_exec_num_outputs(const kiln_exec_t* e) { return e ? e->src->n_outputs : 0; }

static kiln_status_t info(const kiln_graph_t* g, int vid, int* dtype, int* ndim, int64_t* shape) {
  const gx_value* v = &g->values[vid];
  if (dtype) *dtype = v->dtype;
  if (ndim) *ndim = v->ndim;
  if (shape)
    for (int i = 0; i < v->ndim; i++) shape[i] = v->shape[i];
  return KILN_OK;
}

kiln_status_t kiln_exec_input_info(const kiln_exec_t* e, int i, int* dtype, int* ndim,
                                   int64_t* shape) {
  if (!e) return BADARG("kiln_exec_input_info: NULL exec");
  if (i < 0 || i >= e->src->n_inputs)
    return kiln_error(KILN_ERROR_OUT_OF_RANGE, "kiln_exec_input_info: no input %d", i);
  return info(e->src, e->src->inputs[i], dtype, ndim, shape);
}

kiln_status_t kiln_exec_output_info(const kiln_exec_t* e, int i, int* dtype, int* ndim,
                                    int64_t* shape) {
  if (!e) return BADARG("kiln_exec_output_info: NULL exec");
  if (i < 0 || i >= e->src->n_outputs)
    return kiln_error(KILN_ERROR_OUT_OF_RANGE, "kiln_exec_output_info: no output %d", i);
  return info(e->src, e->src->outputs[i], dtype, ndim, shape);
}
