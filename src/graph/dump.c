/* SPDX-License-Identifier: Apache-2.0 */
/* dump.c - text dumps of graphs and compiled programs, and an SVG picture of a program. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/graph_internal.h"
#include "kiln/dtype.h"
#include "kiln/kernels/gemm.h"

typedef struct {
  char* buf;
  size_t cap, len;
} sink_t;

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static void sp(sink_t* s, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char* dst = s->len < s->cap ? s->buf + s->len : NULL;
  size_t room = s->len < s->cap ? s->cap - s->len : 0;
  int n = vsnprintf(dst, room, fmt, ap);
  va_end(ap);
  if (n > 0) s->len += (size_t)n;
}

static kiln_status_t finish(sink_t* s, size_t* needed) {
  if (needed) *needed = s->len + 1;
  if (s->cap > 0) s->buf[s->len < s->cap ? s->len : s->cap - 1] = '\0';
  return KILN_OK;
}

static void type_str(sink_t* s, const gx_value* v) {
  char b[200];
  sp(s, "%s%s", kiln_dtype_name((kiln_dtype_t)v->dtype), gx_fmt_shape(b, v->shape, v->ndim));
}

static void vname(sink_t* s, int vid) {
  if (vid < 0) sp(s, "-");
  else sp(s, "%%%d", vid);
}

static const char* act_name(int a) {
  static const char* n[] = {"none", "relu", "gelu", "gelu_tanh", "silu"};
  return a >= 0 && a <= 4 ? n[a] : "?";
}

static void node_attrs(sink_t* s, const gx_node* n) {
  switch (n->op) {
    case GX_OP_INPUT: sp(s, " index=%d", n->sub); break;
    case GX_OP_CONST: sp(s, " bytes=%zu%s", n->data_bytes, n->sub ? " scalar" : ""); break;
    case GX_OP_UNARY:
      sp(s, " compute=%s", kiln_dtype_name((kiln_dtype_t)n->dtype2));
      if (n->f[0] != 0 || n->f[1] != 0 || n->i[0] || n->i[1])
        sp(s, " params=(%g, %g, %g, %g, min %s%g, max %s%g)", n->f[0], n->f[1], n->f[2], n->f[3],
           n->i[0] ? "" : "off ", n->f[4], n->i[1] ? "" : "off ", n->f[5]);
      break;
    case GX_OP_BINARY:
      sp(s, " compute=%s", kiln_dtype_name((kiln_dtype_t)n->dtype2));
      if (n->f[0] != 1.0) sp(s, " alpha=%g", n->f[0]);
      break;
    case GX_OP_TERNARY:
      sp(s, " compute=%s scalar=%g", kiln_dtype_name((kiln_dtype_t)n->dtype2), n->f[0]);
      break;
    case GX_OP_REDUCE:
      sp(s, " mask=0x%llx keepdim=%d compute=%s", (unsigned long long)n->i[0], (int)n->i[1],
         kiln_dtype_name((kiln_dtype_t)n->dtype2));
      if (n->f[0] != 0) sp(s, " param=%g", n->f[0]);
      break;
    case GX_OP_ADDMM: sp(s, " beta=%g alpha=%g", n->f[0], n->f[1]); break;
    case GX_OP_GEMM:
      sp(s, " act=%s bias_axis=%d trans=(%d,%d) m=%lld n=%lld k=%lld alpha=%g", act_name((int)n->i[0]),
         (int)n->i[1], (int)n->i[2], (int)n->i[3], (long long)n->i[6], (long long)n->i[7],
         (long long)n->i[8], n->f[0]);
      if (n->in[3] >= 0) sp(s, " residual=%s", n->i[10] == KILN_GEMM_RESIDUAL_MUL ? "mul" : "add");
      if (n->n_in > 4) sp(s, " b=stacked weights (%d, read in place)", n->n_in - 4);
      break;
    case GX_OP_FUSED: sp(s, " group=%d", n->aux); break;
    case GX_OP_LAYER_NORM:
    case GX_OP_RMS_NORM: sp(s, " normalized_ndim=%d eps=%g", (int)n->i[0], n->f[0]); break;
    case GX_OP_SDPA:
    case GX_OP_SDPA_BW: sp(s, " causal=%d scale=%g", (int)n->i[0], n->f[0]); break;
    default:
      if (n->n_i > 0) {
        sp(s, " i=[");
        for (int k = 0; k < n->n_i; k++) sp(s, "%s%lld", k ? ", " : "", (long long)n->i[k]);
        sp(s, "]");
      }
      break;
  }
}

static void node_line(sink_t* s, const kiln_graph_t* g, const kiln_exec_t* e, int id) {
  const gx_node* n = &g->nodes[id];
  sp(s, "  n%-4d ", id);
  const int* outs = n->out;
  int n_out = n->n_out;
  const int* ins = n->in;
  int n_in = n->n_in;
  if (n->op == GX_OP_FUSED && e) {
    const gx_group* gr = &e->groups[n->aux];
    outs = gr->out_vids;
    n_out = gr->n_out + gr->has_reduce;
    ins = gr->in_vids;
    n_in = gr->n_in;
  }
  for (int k = 0; k < n_out; k++) {
    if (k) sp(s, ", ");
    vname(s, outs[k]);
  }
  sp(s, " = %s", gx_op_name(n->op));
  const char* sub = gx_sub_name(n->op, n->sub);
  if (*sub) sp(s, ".%s", sub);
  sp(s, "(");
  for (int k = 0; k < n_in; k++) {
    if (k) sp(s, ", ");
    vname(s, ins[k]);
  }
  sp(s, ")");
  node_attrs(s, n);
  sp(s, " :");
  for (int k = 0; k < n_out; k++) {
    if (outs[k] < 0) continue;
    sp(s, " ");
    type_str(s, &g->values[outs[k]]);
  }
  sp(s, "\n");
}

static void dump_graph(sink_t* s, const kiln_graph_t* g) {
  int live = 0;
  for (int i = 0; i < g->n_nodes; i++) live += !g->nodes[i].dead;
  sp(s, "graph: %d inputs, %d outputs, %d nodes, %d values\n", g->n_inputs, g->n_outputs, live,
     g->n_values);
  for (int i = 0; i < g->n_nodes; i++)
    if (!g->nodes[i].dead) node_line(s, g, NULL, i);
  sp(s, "outputs:");
  for (int k = 0; k < g->n_outputs; k++) {
    sp(s, " ");
    vname(s, g->outputs[k]);
  }
  sp(s, "\n");
}

kiln_status_t kiln_graph_dump(const kiln_graph_t* g, char* buf, size_t cap, size_t* needed) {
  if (!g) return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "kiln_graph_dump: NULL graph");
  if (cap && !buf) return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "kiln_graph_dump: NULL buffer");
  sink_t s = {buf, cap, 0};
  dump_graph(&s, g);
  return finish(&s, needed);
}

static const char* storage_name(int cls) {
  static const char* n[] = {"-", "input", "output", "const", "arena"};
  return cls >= 0 && cls <= 4 ? n[cls] : "?";
}

static void value_where(sink_t* s, const kiln_exec_t* e, int v) {
  const gx_value* val = &e->wg->values[v];
  int r = val->root;
  sp(s, "%s", storage_name(e->st_cls[r]));
  if (e->st_cls[r] == GX_ST_INPUT || e->st_cls[r] == GX_ST_OUTPUT) sp(s, "[%d]", e->st_idx[r]);
  if (e->st_cls[r] == GX_ST_ARENA)
    sp(s, "+%lld", (long long)e->bufs[e->st_idx[r]].offset);
  if (r != v) {
    char b[200];
    sp(s, " view of %%%d offset %lld strides %s", r, (long long)val->offset,
       gx_fmt_shape(b, val->strides, val->ndim));
  }
}

/* One line per value of ids[0..n) that is a window of another value (where it lives). */
static void window_lines(sink_t* s, const kiln_exec_t* e, const char* label, const int* ids,
                         int n) {
  for (int k = 0; k < n; k++) {
    if (ids[k] < 0 || e->wg->values[ids[k]].root == ids[k]) continue;
    sp(s, "          %s", label);
    vname(s, ids[k]);
    sp(s, ": ");
    value_where(s, e, ids[k]);
    sp(s, "\n");
  }
}

static void dump_after(sink_t* s, const kiln_exec_t* e) {
  const kiln_graph_t* g = e->wg;
  sp(s, "program: %d steps (%lld compute), %d fused groups\n", e->n_steps,
     (long long)e->stats.n_nodes_after, e->n_groups);
  for (int i = 0; i < e->n_steps; i++) {
    const gx_step* st = &e->steps[i];
    sp(s, "step %d:", i);
    if (st->chain > 1) sp(s, " [tile chain of %d, %lld rows per tile]", st->chain, (long long)st->chain_rows);
    if (st->chain == 0) sp(s, " [in the chain above]");
    if (st->kind == GX_STEP_COPY) {
      sp(s, "  copy ");
      vname(s, st->src);
      sp(s, " (");
      value_where(s, e, st->src);
      sp(s, ") -> output[%d]\n", st->out);
      continue;
    }
    node_line(s, g, e, st->node);
    const gx_node* n = &g->nodes[st->node];
    int n_in = n->n_in;
    const int* ins = n->in;
    if (n->op == GX_OP_FUSED) {
      n_in = e->groups[n->aux].n_in;
      ins = e->groups[n->aux].in_vids;
    }
    window_lines(s, e, "", ins, n_in);
    int n_out = n->n_out;
    const int* outs = n->out;
    if (n->op == GX_OP_FUSED) {
      n_out = e->groups[n->aux].n_out;
      outs = e->groups[n->aux].out_vids;
    }
    window_lines(s, e, "writes ", outs, n_out); /* results written into another value */
  }
  sp(s, "outputs:");
  for (int k = 0; k < g->n_outputs; k++) {
    sp(s, " ");
    vname(s, g->outputs[k]);
  }
  sp(s, "\n");
}

static void opd(sink_t* s, const gx_group* gr, gx_opd o) {
  switch (o.kind) {
    case GX_OPD_REG: sp(s, "r%d", o.idx); break;
    case GX_OPD_IN: sp(s, "in%d(%%%d)", o.idx, gr->in_vids[o.idx]); break;
    case GX_OPD_OUT: sp(s, "out%d(%%%d)", o.idx, gr->out_vids[o.idx]); break;
    default: sp(s, "-"); break;
  }
}

static void dump_groups(sink_t* s, const kiln_exec_t* e) {
  const kiln_graph_t* g = e->wg;
  sp(s, "fused groups: %d\n", e->n_groups);
  char b1[200], b2[200];
  for (int i = 0; i < e->n_groups; i++) {
    const gx_group* gr = &e->groups[i];
    sp(s, "group %d (n%d): %d nodes [", i, gr->node, gr->n_members);
    for (int k = 0; k < gr->n_members; k++) sp(s, "%sn%d", k ? " " : "", gr->members[k]);
    sp(s, "], iteration %s -> %s", gx_fmt_shape(b1, gr->iter_shape, gr->iter_ndim),
       gx_fmt_shape(b2, gr->shape, gr->ndim));
    if (gr->has_reduce) sp(s, " (reduced dims from %d)", gr->n_outer);
    sp(s, ", tile dim %d chunk %lld = %lld elements, %lld tiles, %d registers, %s\n",
       gr->tile_dim, (long long)gr->chunk, (long long)gr->reg_elems, (long long)gr->n_tiles,
       gr->n_regs, gr->direct ? "direct" : "staged");
    for (int k = 0; k < gr->n_instr; k++) {
      const gx_instr* in = &gr->instr[k];
      sp(s, "    ");
      opd(s, gr, in->dst);
      sp(s, " = %s", gx_op_name(in->op));
      const char* sub = gx_sub_name(in->op, in->sub);
      if (*sub) sp(s, ".%s", sub);
      sp(s, "(");
      int first = 1;
      for (int q = 0; q < 3; q++) {
        if (in->src[q].kind == GX_OPD_NONE && !(in->op == GX_OP_TERNARY)) continue;
        if (!first) sp(s, ", ");
        first = 0;
        opd(s, gr, in->src[q]);
      }
      sp(s, ") %s -> %s   (n%d)\n", kiln_dtype_name((kiln_dtype_t)in->compute),
         kiln_dtype_name((kiln_dtype_t)in->dtype), in->node);
    }
    if (gr->has_reduce) {
      sp(s, "    %%%d = reduce.%s(", gr->red_out_vid, gx_sub_name(GX_OP_REDUCE, gr->red_op));
      opd(s, gr, gr->red_src);
      sp(s, ") over dims >= %d   (n%d) : ", gr->n_outer, gr->red_node);
      type_str(s, &g->values[gr->red_out_vid]);
      sp(s, "\n");
    }
  }
}

static void dump_plan(sink_t* s, const kiln_exec_t* e) {
  const kiln_graph_t* g = e->wg;
  sp(s, "memory plan: arena %lld bytes for %lld bytes of intermediates in %d buffers "
     "(%lld in-place), scratch %lld bytes (%d threads)\n",
     (long long)e->arena_bytes, (long long)e->stats.intermediates_bytes, e->n_bufs,
     (long long)e->stats.n_inplace, (long long)e->stats.scratch_bytes, e->n_threads);
  for (int b = 0; b < e->n_bufs; b++) {
    const gx_buffer* bf = &e->bufs[b];
    sp(s, "  buf%-3d @%-10lld %10lld bytes  steps [%d, %d]  values", b, (long long)bf->offset,
       (long long)bf->bytes, bf->first, bf->last);
    for (int v = 0; v < g->n_values; v++)
      if (e->st_cls[v] == GX_ST_ARENA && e->st_idx[v] == b) sp(s, " %%%d", v);
    sp(s, "\n");
  }
  for (int v = 0; v < g->n_values; v++) {
    if (!e->v_used[v] || g->values[v].root != v) continue;
    int c = e->st_cls[v];
    if (c == GX_ST_INPUT || c == GX_ST_OUTPUT)
      sp(s, "  %%%d -> %s[%d]\n", v, storage_name(c), e->st_idx[v]);
    else if (c == GX_ST_CONST)
      sp(s, "  %%%d -> const (%lld bytes)\n", v,
         (long long)(g->values[v].numel * (int64_t)kiln_dtype_size((kiln_dtype_t)g->values[v].dtype)));
  }
}

static void dump_stats(sink_t* s, const kiln_exec_t* e) {
  const kiln_exec_stats_t* t = &e->stats;
  sp(s, "stats: nodes %lld -> %lld, kernels/run %lld, fused groups %lld (%lld nodes, %lld "
     "reductions), epilogues %lld (%lld ops), dce %lld, cse %lld, folded %lld, views %lld "
     "(%lld copies), in-place %lld, output copies %lld, cats elided %lld, sibling merges %lld, gemms merged %lld, "
     "groups hoisted %lld, weight cats read in place %lld, contiguous elided %lld, chained steps %lld, arena %lld / %lld bytes\n",
     (long long)t->n_nodes_before, (long long)t->n_nodes_after, (long long)t->n_kernels_per_run,
     (long long)t->n_fused_groups, (long long)t->n_fused_nodes, (long long)t->n_reduce_fused,
     (long long)t->n_epilogues, (long long)t->n_epilogue_ops, (long long)t->n_dce,
     (long long)t->n_cse, (long long)t->n_folded, (long long)t->n_views,
     (long long)t->n_view_copies, (long long)t->n_inplace, (long long)t->n_output_copies,
     (long long)t->n_cats_elided, (long long)t->n_sibling_merges, (long long)t->n_gemms_merged,
     (long long)t->n_groups_hoisted, (long long)t->n_weight_cats_read_in_place,
     (long long)t->n_contiguous_elided, (long long)t->n_chained_steps, (long long)t->arena_bytes, (long long)t->intermediates_bytes);
}

typedef struct {
  int64_t ns;
  int step;
} prof_row;

static int prof_cmp(const void* a, const void* b) {
  const prof_row *x = a, *y = b;
  if (x->ns != y->ns) return x->ns < y->ns ? 1 : -1;
  return x->step - y->step;
}

/* Per-step times, slowest first, and totals per op kind. */
static kiln_status_t dump_profile(sink_t* s, const kiln_exec_t* e) {
  if (!atomic_load(&e->prof_on) || !e->prof_ns) {
    sp(s, "profile: off (kiln_exec_set_profiling)\n");
    return KILN_OK;
  }
  const kiln_graph_t* g = e->wg;
  /* runs in flight may be adding to the counters: the totals are a snapshot, not atomic as a whole */
  const int64_t n_runs = atomic_load_explicit(&e->prof_runs, memory_order_relaxed);
  int64_t runs = n_runs > 0 ? n_runs : 1, total = 0;
  prof_row* rows = kiln_allocator_alloc(&e->alloc, (size_t)e->n_steps * sizeof(prof_row), 64);
  if (!rows) return kiln_error(KILN_ERROR_OUT_OF_MEMORY, "kiln_exec_dump: out of memory");
  enum { MAX_KINDS = 96 };
  char kind[MAX_KINDS][48];
  int64_t kind_ns[MAX_KINDS], kind_n[MAX_KINDS];
  int n_kinds = 0;
  for (int i = 0; i < e->n_steps; i++) {
    rows[i].ns = atomic_load_explicit(&e->prof_ns[i], memory_order_relaxed);
    rows[i].step = i;
    total += rows[i].ns;
    char k[48];
    const gx_step* st = &e->steps[i];
    if (st->kind == GX_STEP_COPY) {
      snprintf(k, sizeof k, "output copy");
    } else {
      const gx_node* n = &g->nodes[st->node];
      const char* sub = gx_sub_name(n->op, n->sub);
      snprintf(k, sizeof k, "%s%s%s", gx_op_name(n->op), *sub ? "." : "", sub);
    }
    int j = 0;
    while (j < n_kinds && strcmp(kind[j], k) != 0) j++;
    if (j == n_kinds) {
      if (n_kinds == MAX_KINDS) j = MAX_KINDS - 1; /* the last row collects the rest */
      else {
        n_kinds++;
        snprintf(kind[j], sizeof kind[j], "%s", k);
        kind_ns[j] = kind_n[j] = 0;
      }
    }
    kind_ns[j] += rows[i].ns;
    kind_n[j]++;
  }
  double tot = total > 0 ? (double)total : 1.0;
  sp(s, "profile: %lld runs, %.3f ms per run in %d steps\n", (long long)n_runs,
     (double)total / (double)runs * 1e-6, e->n_steps);
  sp(s, "by op kind (ms per run, share, steps):\n");
  prof_row* kr = kiln_allocator_alloc(&e->alloc, (size_t)(n_kinds ? n_kinds : 1) * sizeof(prof_row),
                                      64);
  if (!kr) {
    kiln_allocator_free(&e->alloc, rows);
    return kiln_error(KILN_ERROR_OUT_OF_MEMORY, "kiln_exec_dump: out of memory");
  }
  for (int j = 0; j < n_kinds; j++) {
    kr[j].ns = kind_ns[j];
    kr[j].step = j;
  }
  qsort(kr, (size_t)n_kinds, sizeof(prof_row), prof_cmp);
  for (int j = 0; j < n_kinds; j++) {
    int k = kr[j].step;
    sp(s, "  %9.3f  %5.1f%%  %4lld  %s\n", (double)kind_ns[k] / (double)runs * 1e-6,
       100.0 * (double)kind_ns[k] / tot, (long long)kind_n[k], kind[k]);
  }
  qsort(rows, (size_t)e->n_steps, sizeof(prof_row), prof_cmp);
  sp(s, "by step, slowest first (ms per run, share):\n");
  for (int r = 0; r < e->n_steps; r++) {
    int i = rows[r].step;
    sp(s, "  %9.3f  %5.1f%%  step %d:", (double)rows[r].ns / (double)runs * 1e-6,
       100.0 * (double)rows[r].ns / tot, i);
    const gx_step* st = &e->steps[i];
    if (st->chain > 1) sp(s, " [chain of steps %d-%d]", i, i + st->chain - 1);
    if (st->chain == 0) sp(s, " [timed with its chain]");
    if (st->kind == GX_STEP_COPY) sp(s, "  copy %%%d -> output[%d]\n", st->src, st->out);
    else node_line(s, g, e, st->node);
  }
  kiln_allocator_free(&e->alloc, kr);
  kiln_allocator_free(&e->alloc, rows);
  return KILN_OK;
}

kiln_status_t kiln_exec_dump(const kiln_exec_t* e, int stage, char* buf, size_t cap,
                             size_t* needed) {
  if (!e) return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "kiln_exec_dump: NULL exec");
  if (cap && !buf) return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "kiln_exec_dump: NULL buffer");
  if (stage < KILN_DUMP_BEFORE || stage > KILN_DUMP_PROFILE)
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "kiln_exec_dump: bad stage %d", stage);
  sink_t s = {buf, cap, 0};
  if (stage == KILN_DUMP_PROFILE) {
    KILN_RETURN_IF_ERROR(dump_profile(&s, e));
    return finish(&s, needed);
  }
  if (stage == KILN_DUMP_BEFORE || stage == KILN_DUMP_ALL) {
    sp(&s, "==== before passes\n");
    dump_graph(&s, e->src);
  }
  if (stage == KILN_DUMP_AFTER || stage == KILN_DUMP_ALL) {
    sp(&s, "==== after passes\n");
    dump_stats(&s, e);
    dump_after(&s, e);
  }
  if (stage == KILN_DUMP_GROUPS || stage == KILN_DUMP_ALL) {
    sp(&s, "==== fusion groups\n");
    dump_groups(&s, e);
  }
  if (stage == KILN_DUMP_PLAN || stage == KILN_DUMP_ALL) {
    sp(&s, "==== memory plan\n");
    dump_plan(&s, e);
  }
  return finish(&s, needed);
}

/* ---- SVG ------------------------------------------------------------------------------------- */

static void xml_text(sink_t* s, const char* t) {
  for (; *t; t++) {
    switch (*t) {
      case '<': sp(s, "&lt;"); break;
      case '>': sp(s, "&gt;"); break;
      case '&': sp(s, "&amp;"); break;
      case '"': sp(s, "&quot;"); break;
      default: sp(s, "%c", *t); break;
    }
  }
}

#define SVG_W 560
#define SVG_H 38
#define SVG_GAP 22
#define SVG_X 30

kiln_status_t kiln_exec_dump_svg(const kiln_exec_t* e, char* buf, size_t cap, size_t* needed) {
  if (!e) return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "kiln_exec_dump_svg: NULL exec");
  if (cap && !buf) return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "kiln_exec_dump_svg: NULL buffer");
  const kiln_graph_t* g = e->wg;
  sink_t s = {buf, cap, 0};
  int n = e->n_steps;
  int height = 60 + n * (SVG_H + SVG_GAP);
  sp(&s, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
     "font-family=\"monospace\" font-size=\"11\">\n", SVG_X + SVG_W + 260, height);
  sp(&s, "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n");
  sp(&s, "<text x=\"%d\" y=\"20\" font-size=\"13\">kiln program: %d steps, %d fused groups, "
     "arena %lld bytes</text>\n", SVG_X, n, e->n_groups, (long long)e->arena_bytes);
  /* which step writes each root value */
  for (int i = 0; i < n; i++) {
    const gx_step* st = &e->steps[i];
    int y = 40 + i * (SVG_H + SVG_GAP);
    const char* fill = "#e8f5e9";
    char label[400], sub[400];
    if (st->kind == GX_STEP_COPY) {
      fill = "#eeeeee";
      snprintf(label, sizeof label, "copy %%%d -> output[%d]", st->src, st->out);
      sub[0] = '\0';
    } else {
      const gx_node* nd = &g->nodes[st->node];
      const char* sn = gx_sub_name(nd->op, nd->sub);
      if (nd->op == GX_OP_FUSED) {
        const gx_group* gr = &e->groups[nd->aux];
        fill = gr->has_reduce ? "#ffc48a" : "#ffe08a";
        size_t o = (size_t)snprintf(label, sizeof label, "fused group %d:", nd->aux);
        for (int k = 0; k < gr->n_instr && o < sizeof label - 40; k++)
          o += (size_t)snprintf(label + o, sizeof label - o, " %s",
                                *gx_sub_name(gr->instr[k].op, gr->instr[k].sub)
                                    ? gx_sub_name(gr->instr[k].op, gr->instr[k].sub)
                                    : gx_op_name(gr->instr[k].op));
        if (gr->has_reduce && o < sizeof label - 40)
          snprintf(label + o, sizeof label - o, " -> %s", gx_sub_name(GX_OP_REDUCE, gr->red_op));
        snprintf(sub, sizeof sub, "%lld tiles of %lld, %d registers", (long long)gr->n_tiles,
                 (long long)gr->reg_elems, gr->n_regs);
      } else {
        if (nd->op == GX_OP_GEMM) fill = "#9fd3ff";
        snprintf(label, sizeof label, "n%d %s%s%s", st->node, gx_op_name(nd->op), *sn ? "." : "",
                 sn);
        sub[0] = '\0';
        if (nd->out[0] >= 0) {
          char b[200];
          const gx_value* v = &g->values[nd->out[0]];
          snprintf(sub, sizeof sub, "%%%d %s%s", nd->out[0], kiln_dtype_name((kiln_dtype_t)v->dtype),
                   gx_fmt_shape(b, v->shape, v->ndim));
        }
      }
    }
    sp(&s, "<g><rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" rx=\"6\" fill=\"%s\" "
       "stroke=\"#555\"/>\n", SVG_X, y, SVG_W, SVG_H, fill);
    sp(&s, "<text x=\"%d\" y=\"%d\">", SVG_X + 8, y + 15);
    xml_text(&s, label);
    sp(&s, "</text>\n<text x=\"%d\" y=\"%d\" fill=\"#444\">", SVG_X + 8, y + 30);
    xml_text(&s, sub);
    sp(&s, "</text></g>\n");
  }
  /* edges: from the step writing a root to each later step reading it */
  for (int i = 0; i < n; i++) {
    const gx_step* st = &e->steps[i];
    int n_in = 0;
    const int* ins = NULL;
    int one;
    if (st->kind == GX_STEP_COPY) {
      one = st->src;
      ins = &one;
      n_in = 1;
    } else {
      const gx_node* nd = &g->nodes[st->node];
      ins = nd->in;
      n_in = nd->n_in;
      if (nd->op == GX_OP_FUSED) {
        ins = e->groups[nd->aux].in_vids;
        n_in = e->groups[nd->aux].n_in;
      }
    }
    for (int k = 0; k < n_in; k++) {
      if (ins[k] < 0) continue;
      int r = g->values[ins[k]].root;
      for (int j = i - 1; j >= 0; j--) {
        const gx_step* p = &e->steps[j];
        if (p->kind != GX_STEP_NODE) continue;
        const gx_node* pn = &g->nodes[p->node];
        int hit = 0;
        if (pn->op == GX_OP_FUSED) {
          const gx_group* gr = &e->groups[pn->aux];
          for (int q = 0; q < gr->n_out + gr->has_reduce; q++) hit |= gr->out_vids[q] == r;
        } else {
          for (int q = 0; q < pn->n_out; q++) hit |= pn->out[q] == r;
        }
        if (!hit) continue;
        int y0 = 40 + j * (SVG_H + SVG_GAP) + SVG_H / 2;
        int y1 = 40 + i * (SVG_H + SVG_GAP) + SVG_H / 2;
        int bulge = SVG_X + SVG_W + 20 + (i - j) * 8;
        if (bulge > SVG_X + SVG_W + 240) bulge = SVG_X + SVG_W + 240;
        sp(&s, "<path d=\"M %d %d C %d %d, %d %d, %d %d\" fill=\"none\" stroke=\"#888\" "
           "marker-end=\"url(#a)\"/>\n", SVG_X + SVG_W, y0, bulge, y0, bulge, y1, SVG_X + SVG_W,
           y1);
        break;
      }
    }
  }
  sp(&s, "<defs><marker id=\"a\" markerWidth=\"8\" markerHeight=\"8\" refX=\"8\" refY=\"4\" "
     "orient=\"auto\"><path d=\"M0,0 L8,4 L0,8 z\" fill=\"#888\"/></marker></defs>\n</svg>\n");
  return finish(&s, needed);
}
