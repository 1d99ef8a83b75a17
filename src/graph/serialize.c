/* SPDX-License-Identifier: Apache-2.0 */
/* serialize.c - .kiln files: programs with their signature and weights; save, parse, rebuild.
 *
 * Version 3 (written by kiln_exec_save and kiln_model_save; all integers little-endian):
 *   header   64 bytes: "KILNGRF\0" | u32 version | u32 compile flags | u64 file bytes |
 *            u64 checksum | u64 meta offset (64) | u64 meta bytes | u64 weights offset |
 *            u64 weights bytes. The checksum (hash64 below) covers bytes [8, 24) and
 *            [32, end): everything but the magic and itself. The file size is a multiple of 64.
 *   meta     u32 n_nodes | u32 n_outputs | u32 n_values | u32 n_inputs
 *            per node: i32 op, sub, dtype, dtype2, n_in, n_i | i32 in[n_in] | i64 i[n_i] |
 *                      f64 f[8] | (CONST only) u64 offset into the weights, u64 bytes
 *            i32 outputs[n_outputs]
 *            plan at the reference sizes: i64 arena_bytes, n_kernels_per_run, n_nodes_after,
 *            n_fused_groups
 *            u32 n_symbols, per symbol: str name, i64 min, i64 max
 *            u32 n_exprs, per expression: u32 n_tokens, i64 tokens[n_tokens] (kiln/model.h)
 *            u32 n_binds, per binding: u32 node, u32 slot, u32 expr (node i[slot] = expr's
 *            value; sorted by node then slot, no repeats)
 *            u32 n_inputs, str names[n_inputs] | u32 n_outputs, str names[n_outputs]
 *            (str: u32 length <= 255, bytes without NUL)
 *   weights  64-byte aligned, each constant at a 64-byte aligned offset; zero padding. A file
 *            mapped at a page boundary is used in place.
 * Versions 1 and 2 (still read): a 32-byte header "KILNGRF\0" | u32 version | u32 flags | u64
 * payload bytes | u64 FNV-1a-64 (v1: of the payload; v2: of header bytes [8, 24) then the
 * payload); payload u32 n_nodes | n_outputs | n_values, the nodes as above but CONST data
 * inline (u64 bytes, bytes), the outputs and the plan; no symbols, no names.
 *
 * The nodes are the graph as built (before passes). Rebuilding replays them through the same
 * validation as the builder API (so a file can never produce a node the builder would reject),
 * after substituting the dynamic sizes, compiles with the saved flags and checks the plan at
 * the reference sizes. Every read is bounds-checked; anything unexpected is DATA_LOSS. Every
 * allocation of the parser is bounded by a small multiple of the file's size.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "graph/graph_internal.h"
#include "kiln/model.h"
#include "runtime/checked.h"

#define KILN_FILE_MAGIC "KILNGRF"
#define KILN_FILE_VERSION 3u
#define KILN_FILE_VERSION_V2 2u
#define KILN_FILE_VERSION_V1 1u /* checksum over the payload only */
#define HEADER_BYTES_V12 32
#define HEADER_BYTES 64
#define MAX_NAME 255
#define MAX_SYMBOLS KILN_MODEL_MAX_SYMBOLS
#define BADARG(...) kiln_error(KILN_ERROR_INVALID_ARGUMENT, __VA_ARGS__)
/* ---- writer ---------------------------------------------------------------------------------- */

typedef struct {
  unsigned char* p;
  size_t len, cap;
  int oom;
} wbuf_t;

static void put(wbuf_t* w, const void* src, size_t n) {
  if (w->oom) return;
  if (n > SIZE_MAX / 4 - w->len) { /* the doubling below must not wrap */
    w->oom = 1;
    return;
  }
  if (w->len + n > w->cap) {
    size_t nc = w->cap ? w->cap : 4096;
    while (nc < w->len + n) nc *= 2;
    unsigned char* q = kiln_allocator_alloc(NULL, nc, 64);
    if (!q) {
      w->oom = 1;
      return;
    }
    if (w->len) memcpy(q, w->p, w->len);
    kiln_allocator_free(NULL, w->p);
    w->p = q;
    w->cap = nc;
  }
  memcpy(w->p + w->len, src, n);
  w->len += n;
}

static void put_u32(wbuf_t* w, uint32_t v) {
  unsigned char b[4] = {(unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16),
                        (unsigned char)(v >> 24)};
  put(w, b, 4);
}
static void put_u64(wbuf_t* w, uint64_t v) {
  put_u32(w, (uint32_t)v);
  put_u32(w, (uint32_t)(v >> 32));
}
static void put_i32(wbuf_t* w, int32_t v) { put_u32(w, (uint32_t)v); }
static void put_i64(wbuf_t* w, int64_t v) { put_u64(w, (uint64_t)v); }
static void put_f64(wbuf_t* w, double v) {
  uint64_t b;
  memcpy(&b, &v, 8);
  put_u64(w, b);
}

#define FNV_SEED 0xcbf29ce484222325ull

static uint64_t fnv1a(uint64_t h, const unsigned char* p, size_t n) {
  for (size_t i = 0; i < n; i++) {
    h ^= p[i];
    h *= 0x100000001b3ull;
  }
  return h;
}


/* hash64: the version-3 checksum, a word-at-a-time multiply-xorshift hash (about 1 byte per
 * cycle; FNV-1a's byte loop took ~100 ms per 100 MB of weights). n must be a multiple of 8. */
static uint64_t load_le64(const unsigned char* p) {
  uint64_t v = 0;
  for (int k = 7; k >= 0; k--) v = v << 8 | p[k];
  return v;
}
static uint64_t hash64(uint64_t h, const unsigned char* p, size_t n) {
  for (size_t i = 0; i + 8 <= n; i += 8) {
    h ^= load_le64(p + i);
    h *= 0x9e3779b97f4a7c15ull;
    h ^= h >> 32;
  }
  return h;
}
static uint64_t hash64_final(uint64_t h) {
  h ^= h >> 29;
  h *= 0xbf58476d1ce4e5b9ull;
  return h ^ (h >> 32);
}
#define HASH_SEED 0x6b696c6e2d763333ull /* "kiln-v33" */

/* The version-3 checksum of a file of n bytes (n >= HEADER_BYTES, n % 8 == 0). */
static uint64_t checksum_v3(const unsigned char* file, size_t n) {
  uint64_t h = hash64(HASH_SEED, file + 8, 16);
  return hash64_final(hash64(h, file + 32, n - 32));
}

/* ---- size expressions ----------------------------------------------------------------------- */

/* Stack depth of a well-formed program: CONST and SYM take two tokens. 0 if malformed. */
static int expr_ok(const int64_t* code, int len, int n_syms) {
  if (len < 1 || len > KILN_EXPR_MAX_TOKENS) return 0;
  int depth = 0;
  for (int t = 0; t < len; t++) {
    int64_t op = code[t];
    if (op == KILN_EXPR_CONST || op == KILN_EXPR_SYM) {
      if (t + 1 >= len) return 0;
      if (op == KILN_EXPR_SYM && (code[t + 1] < 0 || code[t + 1] >= n_syms)) return 0;
      t++;
      depth++;
    } else if (op >= KILN_EXPR_ADD && op <= KILN_EXPR_MAX) {
      if (depth < 2) return 0;
      depth--;
    } else {
      return 0;
    }
  }
  return depth == 1;
}

kiln_status_t gx_expr_eval(const int64_t* code, int len, const int64_t* syms, int n_syms,
                           int64_t* out) {
  if (!expr_ok(code, len, n_syms)) return BADARG("kiln model: malformed size expression");
  int64_t st[KILN_EXPR_MAX_TOKENS];
  int d = 0;
  for (int t = 0; t < len; t++) {
    int64_t op = code[t];
    if (op == KILN_EXPR_CONST) {
      st[d++] = code[++t];
      continue;
    }
    if (op == KILN_EXPR_SYM) {
      st[d++] = syms[code[++t]];
      continue;
    }
    int64_t b = st[--d], a = st[d - 1], r = 0;
    int ok = 1;
    switch (op) {
      case KILN_EXPR_ADD: ok = kiln_add_i64(a, b, &r); break;
      case KILN_EXPR_SUB: ok = kiln_sub_i64(a, b, &r); break;
      case KILN_EXPR_MUL: ok = kiln_mul_i64(a, b, &r); break;
      case KILN_EXPR_FLOORDIV:
      case KILN_EXPR_MOD:
        if (b == 0 || (a == INT64_MIN && b == -1)) {
          ok = 0;
          break;
        }
        {
          int64_t q = a / b, m = a % b;
          if (m != 0 && ((m < 0) != (b < 0))) {
            q -= 1;
            m += b;
          }
          r = op == KILN_EXPR_FLOORDIV ? q : m;
        }
        break;
      case KILN_EXPR_MIN: r = a < b ? a : b; break;
      default: r = a > b ? a : b; break; /* MAX */
    }
    if (!ok) return BADARG("kiln model: size expression overflows or divides by zero");
    st[d - 1] = r;
  }
  *out = st[0];
  return KILN_OK;
}

/* ---- writer --------------------------------------------------------------------------------- */

static void put_str(wbuf_t* w, const char* s) {
  size_t n = strlen(s);
  put_u32(w, (uint32_t)n);
  put(w, s, n);
}

static void pad_to(wbuf_t* w, size_t align) {
  static const unsigned char zeros[64] = {0};
  while (!w->oom && w->len % align) put(w, zeros, align - w->len % align < 64 ? align - w->len % align : 64);
}

/* The attributes tied to size expressions: node i[slot] = expression expr. */
typedef struct {
  int node, slot, expr;
} bind_t;

typedef struct {
  bind_t* v;
  int n_binds, cap;
} binds_t;

static kiln_status_t bind_add(binds_t* b, int node, int slot, int expr) {
  KILN_RETURN_IF_ERROR(gx_grow(NULL, (void**)&b->v, &b->cap, b->n_binds + 1, sizeof(bind_t)));
  b->v[b->n_binds++] = (bind_t){node, slot, expr};
  return KILN_OK;
}

static int name_ok(const char* s) { return s && s[0] && strlen(s) <= MAX_NAME; }

/* Checks the description and finds, for every attribute that differs between the graphs, the
 * candidate expression that gives it at every sample. */
static kiln_status_t match_graphs(const kiln_model_desc_t* d, const int* expr_off, binds_t* b) {
  const kiln_graph_t* g0 = d->graphs[0];
  for (int gi = 1; gi < d->n_graphs; gi++) {
    const kiln_graph_t* g = d->graphs[gi];
    if (g->n_nodes != g0->n_nodes || g->n_values != g0->n_values ||
        g->n_inputs != g0->n_inputs || g->n_outputs != g0->n_outputs)
      return BADARG("kiln_model_save: graph %d has %d nodes, %d values, %d inputs, %d outputs; "
                    "graph 0 has %d, %d, %d, %d: not the same program", gi, g->n_nodes,
                    g->n_values, g->n_inputs, g->n_outputs, g0->n_nodes, g0->n_values,
                    g0->n_inputs, g0->n_outputs);
    for (int k = 0; k < g0->n_outputs; k++)
      if (g->outputs[k] != g0->outputs[k])
        return BADARG("kiln_model_save: graph %d returns other values than graph 0", gi);
  }
  for (int ni = 0; ni < g0->n_nodes; ni++) {
    const gx_node* n0 = &g0->nodes[ni];
    for (int gi = 1; gi < d->n_graphs; gi++) {
      const gx_node* n = &d->graphs[gi]->nodes[ni];
      int same = n->op == n0->op && n->sub == n0->sub && n->dtype == n0->dtype &&
                 n->dtype2 == n0->dtype2 && n->n_in == n0->n_in && n->n_i == n0->n_i &&
                 memcmp(n->f, n0->f, sizeof n->f) == 0 &&
                 (n->n_in == 0 || memcmp(n->in, n0->in, sizeof(int) * (size_t)n->n_in) == 0);
      if (!same)
        return BADARG("kiln_model_save: node %d (%s) differs between graph 0 and graph %d beyond "
                      "its sizes: the program's structure depends on the dynamic sizes", ni,
                      gx_op_name(n0->op), gi);
    }
    for (int slot = 0; slot < n0->n_i; slot++) {
      int differs = 0;
      for (int gi = 1; gi < d->n_graphs; gi++)
        differs |= d->graphs[gi]->nodes[ni].i[slot] != n0->i[slot];
      if (!differs) continue;
      int found = -1;
      for (int e = 0; e < d->n_exprs && found < 0; e++) {
        int all = 1;
        for (int gi = 0; gi < d->n_graphs && all; gi++) {
          int64_t v;
          if (gx_expr_eval(d->expr_code + expr_off[e], d->expr_len[e],
                           d->samples + (size_t)gi * (size_t)d->n_symbols, d->n_symbols,
                           &v) != KILN_OK ||
              v != d->graphs[gi]->nodes[ni].i[slot])
            all = 0;
        }
        if (all) found = e;
      }
      if (found < 0) {
        char vals[160];
        int len = 0;
        for (int gi = 0; gi < d->n_graphs && len < 120; gi++)
          len += snprintf(vals + len, sizeof vals - (size_t)len, "%s%lld", gi ? ", " : "",
                          (long long)d->graphs[gi]->nodes[ni].i[slot]);
        return BADARG("kiln_model_save: node %d (%s) attribute %d takes %s at the samples, "
                      "which no size expression gives", ni, gx_op_name(n0->op), slot, vals);
      }
      KILN_RETURN_IF_ERROR(bind_add(b, ni, slot, found));
    }
    if (n0->op == GX_OP_CONST)
      for (int gi = 1; gi < d->n_graphs; gi++) {
        const gx_node* n = &d->graphs[gi]->nodes[ni];
        if (n->data_bytes != n0->data_bytes ||
            (n->data_bytes && memcmp(n->data, n0->data, n->data_bytes) != 0))
          return BADARG("kiln_model_save: constant node %d (%s) holds other data in graph %d: a "
                        "constant that depends on the dynamic sizes cannot be exported",
                        ni, gx_op_name(n0->op), gi);
      }
  }
  return KILN_OK;
}

/* Every symbol must be exactly one dim of some input, so a run can read it. */
static kiln_status_t check_symbols_readable(const kiln_model_desc_t* d, const int* expr_off,
                                            const binds_t* b) {
  for (int k = 0; k < d->n_symbols; k++) {
    int seen = 0;
    for (int j = 0; j < b->n_binds && !seen; j++) {
      const int64_t* c = d->expr_code + expr_off[b->v[j].expr];
      seen = d->graphs[0]->nodes[b->v[j].node].op == GX_OP_INPUT && d->expr_len[b->v[j].expr] == 2 &&
             c[0] == KILN_EXPR_SYM && c[1] == k;
    }
    if (!seen)
      return BADARG("kiln_model_save: symbol %s is not a dim of any input (a run could not "
                    "tell its value)", d->symbols[k].name);
  }
  return KILN_OK;
}

static kiln_status_t check_desc(const kiln_model_desc_t* d) {
  if (!d || d->struct_size < sizeof(kiln_model_desc_t))
    return BADARG("kiln_model_save: NULL or short description (struct_size)");
  if (d->n_graphs < 1 || !d->graphs) return BADARG("kiln_model_save: no graphs");
  if (d->n_symbols < 0 || d->n_symbols > MAX_SYMBOLS)
    return BADARG("kiln_model_save: %d symbols (at most %d)", d->n_symbols, MAX_SYMBOLS);
  if (d->n_symbols && (d->n_graphs < 2 || !d->symbols || !d->samples))
    return BADARG("kiln_model_save: dynamic sizes need at least two sample graphs");
  if (d->n_exprs < 0 || (d->n_exprs && (!d->expr_code || !d->expr_len)))
    return BADARG("kiln_model_save: bad expression table");
  if (d->compile_flags & ~KILN_COMPILE_ALL_FLAGS)
    return BADARG("kiln_model_save: unknown compile flags 0x%x", (unsigned)d->compile_flags);
  for (int gi = 0; gi < d->n_graphs; gi++) {
    if (!d->graphs[gi]) return BADARG("kiln_model_save: graph %d is NULL", gi);
    if (d->graphs[gi]->n_outputs < 1) return BADARG("kiln_model_save: graph %d has no outputs", gi);
  }
  for (int k = 0; k < d->n_symbols; k++) {
    const kiln_model_symbol_t* s = &d->symbols[k];
    if (!name_ok(s->name)) return BADARG("kiln_model_save: symbol %d: empty or long name", k);
    if (s->min < 0 || s->min > s->max || s->max > (INT64_C(1) << 40))
      return BADARG("kiln_model_save: symbol %s: bounds [%lld, %lld] (need 0 <= min <= max <= "
                    "2^40)", s->name, (long long)s->min, (long long)s->max);
    for (int gi = 0; gi < d->n_graphs; gi++) {
      int64_t v = d->samples[(size_t)gi * (size_t)d->n_symbols + (size_t)k];
      if (v < s->min || v > s->max)
        return BADARG("kiln_model_save: sample %d of symbol %s is %lld, outside [%lld, %lld]", gi,
                      s->name, (long long)v, (long long)s->min, (long long)s->max);
    }
  }
  const kiln_graph_t* g0 = d->graphs[0];
  for (int i = 0; d->input_names && i < g0->n_inputs; i++)
    if (d->input_names[i] && !name_ok(d->input_names[i]))
      return BADARG("kiln_model_save: input %d: empty name or longer than %d bytes", i, MAX_NAME);
  for (int i = 0; d->output_names && i < g0->n_outputs; i++)
    if (d->output_names[i] && !name_ok(d->output_names[i]))
      return BADARG("kiln_model_save: output %d: empty name or longer than %d bytes", i, MAX_NAME);
  return KILN_OK;
}

/* Writes the file for a checked description; summary: the plan at the reference. */
static kiln_status_t write_file(const kiln_model_desc_t* d, const int* expr_off, const binds_t* b,
                                const int64_t summary[4], void** out_data, size_t* out_size) {
  const kiln_graph_t* g = d->graphs[0];
  wbuf_t w = {NULL, 0, 0, 0};
  unsigned char zero[HEADER_BYTES] = {0};
  put(&w, zero, HEADER_BYTES);
  put_u32(&w, (uint32_t)g->n_nodes);
  put_u32(&w, (uint32_t)g->n_outputs);
  put_u32(&w, (uint32_t)g->n_values);
  put_u32(&w, (uint32_t)g->n_inputs);
  uint64_t woff = 0;
  for (int i = 0; i < g->n_nodes; i++) {
    const gx_node* n = &g->nodes[i];
    put_i32(&w, n->op);
    put_i32(&w, n->sub);
    put_i32(&w, n->dtype);
    put_i32(&w, n->dtype2);
    put_i32(&w, n->n_in);
    put_i32(&w, n->n_i);
    for (int k = 0; k < n->n_in; k++) put_i32(&w, n->in[k]);
    for (int k = 0; k < n->n_i; k++) put_i64(&w, n->i[k]);
    for (int k = 0; k < GX_MAX_F; k++) put_f64(&w, n->f[k]);
    if (n->op == GX_OP_CONST) {
      put_u64(&w, woff);
      put_u64(&w, (uint64_t)n->data_bytes);
      woff += ((uint64_t)n->data_bytes + GX_ALIGN - 1) / GX_ALIGN * GX_ALIGN;
    }
  }
  for (int k = 0; k < g->n_outputs; k++) put_i32(&w, g->outputs[k]);
  for (int k = 0; k < 4; k++) put_i64(&w, summary[k]);
  put_u32(&w, (uint32_t)d->n_symbols);
  for (int k = 0; k < d->n_symbols; k++) {
    put_str(&w, d->symbols[k].name);
    put_i64(&w, d->symbols[k].min);
    put_i64(&w, d->symbols[k].max);
  }
  /* only the expressions bindings use, renumbered */
  int* used = kiln_allocator_alloc(NULL, sizeof(int) * (size_t)(d->n_exprs + 1), 64);
  if (!used) {
    kiln_allocator_free(NULL, w.p);
    return kiln_error(KILN_ERROR_OUT_OF_MEMORY, "kiln_model_save: out of memory");
  }
  for (int e = 0; e < d->n_exprs; e++) used[e] = -1;
  int n_used = 0;
  for (int j = 0; j < b->n_binds; j++)
    if (used[b->v[j].expr] < 0) used[b->v[j].expr] = n_used++;
  put_u32(&w, (uint32_t)n_used);
  for (int r = 0; r < n_used; r++)
    for (int e = 0; e < d->n_exprs; e++)
      if (used[e] == r) {
        put_u32(&w, (uint32_t)d->expr_len[e]);
        for (int t = 0; t < d->expr_len[e]; t++) put_i64(&w, d->expr_code[expr_off[e] + t]);
      }
  put_u32(&w, (uint32_t)b->n_binds);
  for (int j = 0; j < b->n_binds; j++) {
    put_u32(&w, (uint32_t)b->v[j].node);
    put_u32(&w, (uint32_t)b->v[j].slot);
    put_u32(&w, (uint32_t)used[b->v[j].expr]);
  }
  kiln_allocator_free(NULL, used);
  char def[32];
  put_u32(&w, (uint32_t)g->n_inputs);
  for (int i = 0; i < g->n_inputs; i++) {
    snprintf(def, sizeof def, "input%d", i);
    put_str(&w, d->input_names && d->input_names[i] ? d->input_names[i] : def);
  }
  put_u32(&w, (uint32_t)g->n_outputs);
  for (int i = 0; i < g->n_outputs; i++) {
    snprintf(def, sizeof def, "output%d", i);
    put_str(&w, d->output_names && d->output_names[i] ? d->output_names[i] : def);
  }
  size_t meta_bytes = w.len - HEADER_BYTES;
  pad_to(&w, GX_ALIGN);
  size_t weights_off = w.len;
  for (int i = 0; i < g->n_nodes; i++) {
    const gx_node* n = &g->nodes[i];
    if (n->op != GX_OP_CONST) continue;
    if (n->data_bytes) put(&w, n->data, n->data_bytes);
    pad_to(&w, GX_ALIGN);
  }
  if (w.oom) {
    kiln_allocator_free(NULL, w.p);
    return kiln_error(KILN_ERROR_OUT_OF_MEMORY, "kiln_model_save: out of memory");
  }
  if (w.len - weights_off != woff) {
    kiln_allocator_free(NULL, w.p);
    return kiln_error(KILN_ERROR_INTERNAL, "kiln_model_save: weights layout mismatch");
  }
  wbuf_t h = {NULL, 0, 0, 0};
  put(&h, KILN_FILE_MAGIC, 8);
  put_u32(&h, KILN_FILE_VERSION);
  put_u32(&h, (uint32_t)d->compile_flags);
  put_u64(&h, (uint64_t)w.len);
  put_u64(&h, 0);
  put_u64(&h, HEADER_BYTES);
  put_u64(&h, (uint64_t)meta_bytes);
  put_u64(&h, (uint64_t)weights_off);
  put_u64(&h, (uint64_t)(w.len - weights_off));
  if (h.oom) {
    kiln_allocator_free(NULL, w.p);
    kiln_allocator_free(NULL, h.p);
    return kiln_error(KILN_ERROR_OUT_OF_MEMORY, "kiln_model_save: out of memory");
  }
  memcpy(w.p, h.p, HEADER_BYTES);
  kiln_allocator_free(NULL, h.p);
  uint64_t sum = checksum_v3(w.p, w.len);
  for (int k = 0; k < 8; k++) w.p[24 + k] = (unsigned char)(sum >> (8 * k));
  *out_data = w.p;
  *out_size = w.len;
  return KILN_OK;
}

static kiln_status_t save_common(const kiln_model_desc_t* d, const int64_t* summary_in,
                                 void** out_data, size_t* out_size) {
  if (!out_data || !out_size) return BADARG("kiln_model_save: NULL out");
  *out_data = NULL;
  *out_size = 0;
  KILN_RETURN_IF_ERROR(check_desc(d));
  int* expr_off = kiln_allocator_alloc(NULL, sizeof(int) * (size_t)(d->n_exprs + 1), 64);
  if (!expr_off) return kiln_error(KILN_ERROR_OUT_OF_MEMORY, "kiln_model_save: out of memory");
  int off = 0;
  kiln_status_t st = KILN_OK;
  for (int e = 0; e < d->n_exprs && st == KILN_OK; e++) {
    expr_off[e] = off;
    if (!expr_ok(d->expr_code + off, d->expr_len[e], d->n_symbols))
      st = BADARG("kiln_model_save: size expression %d is malformed", e);
    off += d->expr_len[e] > 0 ? d->expr_len[e] : 0;
  }
  binds_t b = {NULL, 0, 0};
  if (st == KILN_OK) st = match_graphs(d, expr_off, &b);
  if (st == KILN_OK) st = check_symbols_readable(d, expr_off, &b);
  int64_t summary[4];
  if (st == KILN_OK && summary_in) {
    memcpy(summary, summary_in, sizeof summary);
  } else if (st == KILN_OK) {
    kiln_exec_t* e = NULL;
    st = gx_compile(d->graphs[0], d->compile_flags, 1, &e);
    if (st == KILN_OK) {
      summary[0] = e->stats.arena_bytes;
      summary[1] = e->stats.n_kernels_per_run;
      summary[2] = e->stats.n_nodes_after;
      summary[3] = e->stats.n_fused_groups;
      kiln_exec_destroy(e);
    }
  }
  if (st == KILN_OK) st = write_file(d, expr_off, &b, summary, out_data, out_size);
  gx_free(NULL, b.v);
  kiln_allocator_free(NULL, expr_off);
  return st;
}

kiln_status_t kiln_model_save_buffer(const kiln_model_desc_t* desc, void** out_data,
                                     size_t* out_size) {
  return save_common(desc, NULL, out_data, out_size);
}

static kiln_status_t write_path(const void* data, size_t size, const char* path,
                                const char* what) {
  FILE* f = fopen(path, "wb");
  if (!f) return kiln_error(KILN_ERROR_INTERNAL, "%s: cannot open %s for writing", what, path);
  size_t wr = fwrite(data, 1, size, f);
  int rc = fclose(f);
  if (wr != size || rc != 0) return kiln_error(KILN_ERROR_INTERNAL, "%s: write to %s failed", what, path);
  return KILN_OK;
}

kiln_status_t kiln_model_save(const kiln_model_desc_t* desc, const char* path) {
  if (!path) return BADARG("kiln_model_save: NULL path");
  void* data;
  size_t size;
  KILN_RETURN_IF_ERROR(kiln_model_save_buffer(desc, &data, &size));
  kiln_status_t st = write_path(data, size, path, "kiln_model_save");
  kiln_exec_free_buffer(data);
  return st;
}

kiln_status_t kiln_exec_save_buffer(const kiln_exec_t* e, void** out_data, size_t* out_size) {
  if (!e || !out_data || !out_size)
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "kiln_exec_save: NULL argument");
  const kiln_graph_t* graphs[1] = {e->src};
  kiln_model_desc_t d;
  memset(&d, 0, sizeof d);
  d.struct_size = sizeof d;
  d.n_graphs = 1;
  d.graphs = graphs;
  d.compile_flags = e->flags;
  int64_t summary[4] = {e->stats.arena_bytes, e->stats.n_kernels_per_run, e->stats.n_nodes_after,
                        e->stats.n_fused_groups};
  return save_common(&d, summary, out_data, out_size);
}

void kiln_exec_free_buffer(void* data) { kiln_allocator_free(NULL, data); }

kiln_status_t kiln_exec_save(const kiln_exec_t* e, const char* path) {
  if (!e || !path) return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "kiln_exec_save: NULL argument");
  void* data;
  size_t size;
  KILN_RETURN_IF_ERROR(kiln_exec_save_buffer(e, &data, &size));
  kiln_status_t st = write_path(data, size, path, "kiln_exec_save");
  kiln_exec_free_buffer(data);
  return st;
}
/* ---- reader ---------------------------------------------------------------------------------- */

typedef struct {
  const unsigned char* p;
  size_t len, pos;
  int bad;
} rbuf_t;

static const unsigned char* take(rbuf_t* r, size_t n) {
  if (r->bad || n > r->len - r->pos) {
    r->bad = 1;
    return NULL;
  }
  const unsigned char* q = r->p + r->pos;
  r->pos += n;
  return q;
}
static uint32_t get_u32(rbuf_t* r) {
  const unsigned char* b = take(r, 4);
  if (!b) return 0;
  return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}
static uint64_t get_u64(rbuf_t* r) {
  uint64_t lo = get_u32(r);
  uint64_t hi = get_u32(r);
  return lo | hi << 32;
}
static int32_t get_i32(rbuf_t* r) { return (int32_t)get_u32(r); }
static int64_t get_i64(rbuf_t* r) { return (int64_t)get_u64(r); }
static double get_f64(rbuf_t* r) {
  uint64_t b = get_u64(r);
  double v;
  memcpy(&v, &b, 8);
  return v;
}


#define LOSS(...) kiln_error(KILN_ERROR_DATA_LOSS, __VA_ARGS__)

void gx_file_free(gx_file* f) {
  if (!f) return;
  void* arrays[] = {f->nodes, f->ins, f->outputs, f->sym_names, f->sym_min, f->sym_max,
                    f->sym_input, f->sym_dim, f->expr_code, f->expr_off, f->expr_len,
                    f->bind_slot, f->bind_expr, f->input_names, f->output_names, f->names};
  for (size_t k = 0; k < sizeof arrays / sizeof arrays[0]; k++) kiln_allocator_free(NULL, arrays[k]);
  kiln_allocator_free(NULL, f);
}

/* A name: u32 length (1..255), bytes without NUL, copied to *pool. */
static int get_str(rbuf_t* r, char** pool, char** out) {
  uint32_t n = get_u32(r);
  if (r->bad || n == 0 || n > MAX_NAME) return 0;
  const unsigned char* s = take(r, n);
  if (!s || memchr(s, 0, n)) return 0;
  memcpy(*pool, s, n);
  (*pool)[n] = 0;
  *out = *pool;
  *pool += n + 1;
  return 1;
}

/* The nodes (v1/v2 inline constants, v3 offsets into the weights at wbase, wbytes). */
static kiln_status_t read_nodes(rbuf_t* r, gx_file* f, uint32_t version, const unsigned char* wbase,
                                uint64_t wbytes) {
  size_t n_ins = 0, ins_cap = r->len / 4 + 1; /* every input id takes 4 bytes of the file */
  f->ins = gx_calloc(NULL, ins_cap, sizeof(int));
  if (!f->ins) return kiln_error(KILN_ERROR_OUT_OF_MEMORY, "kiln_exec_load: out of memory");
  for (int i = 0; i < f->n_nodes; i++) {
    gx_fnode* n = &f->nodes[i];
    n->op = get_i32(r);
    n->sub = get_i32(r);
    n->dtype = get_i32(r);
    n->dtype2 = get_i32(r);
    n->n_in = get_i32(r);
    n->n_i = get_i32(r);
    if (r->bad) return LOSS("kiln_exec_load: truncated at node %d", i);
    if (n->n_in < 0 || (size_t)n->n_in > (r->len - r->pos) / 4 || n->n_i < 0 || n->n_i > GX_MAX_I)
      return LOSS("kiln_exec_load: node %d: bad counts", i);
    n->in = f->ins + n_ins;
    for (int k = 0; k < n->n_in; k++) f->ins[n_ins++] = get_i32(r);
    for (int k = 0; k < n->n_i; k++) n->i[k] = get_i64(r);
    for (int k = 0; k < GX_MAX_F; k++) n->f[k] = get_f64(r);
    if (n->op == GX_OP_CONST) {
      if (version < KILN_FILE_VERSION) {
        uint64_t nb = get_u64(r);
        if (r->bad || nb > r->len - r->pos) return LOSS("kiln_exec_load: node %d: constant data truncated", i);
        n->data_bytes = (size_t)nb;
        n->data = take(r, (size_t)nb);
      } else {
        uint64_t off = get_u64(r), nb = get_u64(r);
        if (r->bad || off % GX_ALIGN || off > wbytes || nb > wbytes - off)
          return LOSS("kiln_exec_load: node %d: constant outside the weights section", i);
        n->data_bytes = (size_t)nb;
        n->data = wbase + off;
      }
    }
    if (r->bad) return LOSS("kiln_exec_load: truncated at node %d", i);
    if (n->op == GX_OP_INPUT) f->n_inputs++;
  }
  return KILN_OK;
}

/* The version-3 tail: symbols, expressions, bindings, names. */
static kiln_status_t read_signature(rbuf_t* r, gx_file* f) {
  f->n_symbols = (int)get_u32(r);
  if (r->bad || f->n_symbols < 0 || f->n_symbols > MAX_SYMBOLS)
    return LOSS("kiln_exec_load: bad symbol count");
  /* names: every name's bytes are in the file, so the pool is at most the file's meta plus one
   * terminator per name */
  f->names = gx_calloc(NULL, r->len + 1, 1);
  f->sym_names = gx_calloc(NULL, (size_t)f->n_symbols, sizeof(char*));
  f->sym_min = gx_calloc(NULL, (size_t)f->n_symbols, sizeof(int64_t));
  f->sym_max = gx_calloc(NULL, (size_t)f->n_symbols, sizeof(int64_t));
  f->sym_input = gx_calloc(NULL, (size_t)f->n_symbols, sizeof(int));
  f->sym_dim = gx_calloc(NULL, (size_t)f->n_symbols, sizeof(int));
  if (!f->names || !f->sym_names || !f->sym_min || !f->sym_max || !f->sym_input || !f->sym_dim)
    return kiln_error(KILN_ERROR_OUT_OF_MEMORY, "kiln_exec_load: out of memory");
  char* pool = f->names;
  for (int k = 0; k < f->n_symbols; k++) {
    if (!get_str(r, &pool, &f->sym_names[k])) return LOSS("kiln_exec_load: bad symbol name");
    f->sym_min[k] = get_i64(r);
    f->sym_max[k] = get_i64(r);
    if (r->bad || f->sym_min[k] < 0 || f->sym_min[k] > f->sym_max[k] ||
        f->sym_max[k] > (INT64_C(1) << 40))
      return LOSS("kiln_exec_load: symbol %d: bad bounds", k);
    f->sym_input[k] = -1;
  }
  uint32_t ne = get_u32(r);
  if (r->bad || ne > (r->len - r->pos) / 12) return LOSS("kiln_exec_load: bad expression count");
  f->n_exprs = (int)ne;
  f->expr_off = gx_calloc(NULL, ne, sizeof(int));
  f->expr_len = gx_calloc(NULL, ne, sizeof(int));
  f->expr_code = gx_calloc(NULL, (r->len - r->pos) / 8 + 1, sizeof(int64_t));
  if (!f->expr_off || !f->expr_len || !f->expr_code)
    return kiln_error(KILN_ERROR_OUT_OF_MEMORY, "kiln_exec_load: out of memory");
  int off = 0;
  for (uint32_t e = 0; e < ne; e++) {
    uint32_t len = get_u32(r);
    if (r->bad || len < 1 || len > KILN_EXPR_MAX_TOKENS || len > (r->len - r->pos) / 8)
      return LOSS("kiln_exec_load: expression %u: bad length", e);
    f->expr_off[e] = off;
    f->expr_len[e] = (int)len;
    for (uint32_t t = 0; t < len; t++) f->expr_code[off + (int)t] = get_i64(r);
    if (!expr_ok(f->expr_code + off, (int)len, f->n_symbols))
      return LOSS("kiln_exec_load: expression %u is malformed", e);
    off += (int)len;
  }
  uint32_t nb = get_u32(r);
  if (r->bad || nb > (r->len - r->pos) / 12) return LOSS("kiln_exec_load: bad binding count");
  f->n_binds = (int)nb;
  f->bind_slot = gx_calloc(NULL, nb, sizeof(int));
  f->bind_expr = gx_calloc(NULL, nb, sizeof(int));
  if (!f->bind_slot || !f->bind_expr)
    return kiln_error(KILN_ERROR_OUT_OF_MEMORY, "kiln_exec_load: out of memory");
  int64_t last = -1;
  int input_idx = 0, node_cursor = 0;
  for (uint32_t j = 0; j < nb; j++) {
    uint32_t node = get_u32(r), slot = get_u32(r), expr = get_u32(r);
    if (r->bad) return LOSS("kiln_exec_load: truncated bindings");
    int64_t key = (int64_t)node * GX_MAX_I + slot;
    if (node >= (uint32_t)f->n_nodes || slot >= (uint32_t)f->nodes[node].n_i || expr >= ne || key <= last)
      return LOSS("kiln_exec_load: binding %u is invalid", j);
    last = key;
    gx_fnode* n = &f->nodes[node];
    if (n->n_bind == 0) n->first_bind = (int)j;
    n->n_bind++;
    f->bind_slot[j] = (int)slot;
    f->bind_expr[j] = (int)expr;
    /* an input dim that is exactly a symbol: where runs read the symbol */
    const int64_t* c = f->expr_code + f->expr_off[expr];
    if (n->op == GX_OP_INPUT && f->expr_len[expr] == 2 && c[0] == KILN_EXPR_SYM) {
      for (; node_cursor < (int)node; node_cursor++)
        if (f->nodes[node_cursor].op == GX_OP_INPUT) input_idx++;
      if (f->sym_input[c[1]] < 0) {
        f->sym_input[c[1]] = input_idx;
        f->sym_dim[c[1]] = (int)slot; /* INPUT: i[d] is dim d */
      }
    }
  }
  for (int k = 0; k < f->n_symbols; k++)
    if (f->sym_input[k] < 0) return LOSS("kiln_exec_load: symbol %s is no input's dim", f->sym_names[k]);
  uint32_t nin = get_u32(r);
  if (r->bad || nin != (uint32_t)f->n_inputs) return LOSS("kiln_exec_load: bad input name count");
  f->input_names = gx_calloc(NULL, nin, sizeof(char*));
  uint32_t nout = 0;
  if (!f->input_names) return kiln_error(KILN_ERROR_OUT_OF_MEMORY, "kiln_exec_load: out of memory");
  for (uint32_t i = 0; i < nin; i++)
    if (!get_str(r, &pool, &f->input_names[i])) return LOSS("kiln_exec_load: bad input name");
  nout = get_u32(r);
  if (r->bad || nout != (uint32_t)f->n_outputs) return LOSS("kiln_exec_load: bad output name count");
  f->output_names = gx_calloc(NULL, nout, sizeof(char*));
  if (!f->output_names) return kiln_error(KILN_ERROR_OUT_OF_MEMORY, "kiln_exec_load: out of memory");
  for (uint32_t i = 0; i < nout; i++)
    if (!get_str(r, &pool, &f->output_names[i])) return LOSS("kiln_exec_load: bad output name");
  return KILN_OK;
}

/* Default names for files without a signature (versions 1 and 2). */
static kiln_status_t default_names(gx_file* f) {
  size_t per = 24;
  f->names = gx_calloc(NULL, (size_t)(f->n_inputs + f->n_outputs) * per + 1, 1);
  f->input_names = gx_calloc(NULL, (size_t)f->n_inputs, sizeof(char*));
  f->output_names = gx_calloc(NULL, (size_t)f->n_outputs, sizeof(char*));
  if (!f->names || !f->input_names || !f->output_names)
    return kiln_error(KILN_ERROR_OUT_OF_MEMORY, "kiln_exec_load: out of memory");
  char* p = f->names;
  for (int i = 0; i < f->n_inputs; i++, p += per) {
    snprintf(p, per, "input%d", i);
    f->input_names[i] = p;
  }
  for (int i = 0; i < f->n_outputs; i++, p += per) {
    snprintf(p, per, "output%d", i);
    f->output_names[i] = p;
  }
  return KILN_OK;
}

kiln_status_t gx_file_parse(const unsigned char* data, size_t size, gx_file** out) {
  *out = NULL;
  if (size < HEADER_BYTES_V12) return LOSS("kiln_exec_load: truncated header (%zu bytes)", size);
  if (memcmp(data, KILN_FILE_MAGIC, 8) != 0) return LOSS("kiln_exec_load: not a .kiln file");
  rbuf_t h = {data, size < HEADER_BYTES ? HEADER_BYTES_V12 : HEADER_BYTES, 8, 0};
  uint32_t version = get_u32(&h);
  uint32_t fl = get_u32(&h);
  rbuf_t r;
  const unsigned char* wbase = NULL;
  uint64_t wbytes = 0;
  if (version == KILN_FILE_VERSION) {
    if (size < HEADER_BYTES) return LOSS("kiln_exec_load: truncated header (%zu bytes)", size);
    uint64_t fbytes = get_u64(&h), sum = get_u64(&h), moff = get_u64(&h), mbytes = get_u64(&h);
    uint64_t woff = get_u64(&h);
    wbytes = get_u64(&h);
    if (fbytes != size) return LOSS("kiln_exec_load: file is %zu bytes, header says %llu", size,
                                    (unsigned long long)fbytes);
    if (size % 8) return LOSS("kiln_exec_load: file size %zu is not a multiple of 8", size);
    if (checksum_v3(data, size) != sum) return LOSS("kiln_exec_load: checksum mismatch");
    if (moff != HEADER_BYTES || mbytes > size - HEADER_BYTES || woff % GX_ALIGN ||
        woff < HEADER_BYTES + mbytes || woff > size || wbytes != size - woff)
      return LOSS("kiln_exec_load: bad section offsets");
    r = (rbuf_t){data + HEADER_BYTES, (size_t)mbytes, 0, 0};
    wbase = data + woff;
  } else if (version == KILN_FILE_VERSION_V2 || version == KILN_FILE_VERSION_V1) {
    h.len = HEADER_BYTES_V12;
    uint64_t plen = get_u64(&h), sum = get_u64(&h);
    if (plen != size - HEADER_BYTES_V12)
      return LOSS("kiln_exec_load: payload is %zu bytes, header says %llu", size - HEADER_BYTES_V12,
                  (unsigned long long)plen);
    uint64_t h0 = version == KILN_FILE_VERSION_V1 ? FNV_SEED : fnv1a(FNV_SEED, data + 8, 16);
    if (fnv1a(h0, data + HEADER_BYTES_V12, (size_t)plen) != sum)
      return LOSS("kiln_exec_load: checksum mismatch");
    r = (rbuf_t){data + HEADER_BYTES_V12, (size_t)plen, 0, 0};
  } else {
    return LOSS("kiln_exec_load: unsupported version %u (this library reads 1 to %u)", version,
                KILN_FILE_VERSION);
  }
  if (fl & ~(uint32_t)KILN_COMPILE_ALL_FLAGS)
    return LOSS("kiln_exec_load: unknown compile flags 0x%x (this library defines 0x%x)",
                fl & ~(uint32_t)KILN_COMPILE_ALL_FLAGS, (unsigned)KILN_COMPILE_ALL_FLAGS);
  uint32_t n_nodes = get_u32(&r), n_outputs = get_u32(&r), n_values = get_u32(&r);
  uint32_t n_inputs = version == KILN_FILE_VERSION ? get_u32(&r) : 0;
  /* every node takes at least 88 bytes, every output 4 */
  if (r.bad || n_nodes > r.len / 88 || n_outputs > r.len / 4 || n_values > 3 * (uint64_t)n_nodes)
    return LOSS("kiln_exec_load: implausible counts (%u nodes, %u outputs)", n_nodes, n_outputs);
  gx_file* f = gx_calloc(NULL, 1, sizeof(gx_file));
  if (!f) return kiln_error(KILN_ERROR_OUT_OF_MEMORY, "kiln_exec_load: out of memory");
  f->version = version;
  f->flags = (int)fl;
  f->n_nodes = (int)n_nodes;
  f->n_outputs = (int)n_outputs;
  f->n_values = n_values;
  f->file_bytes = size;
  f->weight_bytes = wbytes;
  f->nodes = gx_calloc(NULL, n_nodes, sizeof(gx_fnode));
  f->outputs = gx_calloc(NULL, n_outputs, sizeof(int));
  kiln_status_t st = (!f->nodes || !f->outputs)
                         ? kiln_error(KILN_ERROR_OUT_OF_MEMORY, "kiln_exec_load: out of memory")
                         : read_nodes(&r, f, version, wbase, wbytes);
  if (st == KILN_OK && version == KILN_FILE_VERSION && (uint32_t)f->n_inputs != n_inputs)
    st = LOSS("kiln_exec_load: %d input nodes, header says %u", f->n_inputs, n_inputs);
  for (int k = 0; k < f->n_outputs && st == KILN_OK; k++) {
    f->outputs[k] = get_i32(&r);
    if (r.bad || f->outputs[k] < 0 || (uint32_t)f->outputs[k] >= n_values)
      st = LOSS("kiln_exec_load: bad output %d", k);
  }
  for (int k = 0; k < 4 && st == KILN_OK; k++) f->summary[k] = get_i64(&r);
  if (st == KILN_OK && r.bad) st = LOSS("kiln_exec_load: truncated plan summary");
  if (st == KILN_OK) st = version == KILN_FILE_VERSION ? read_signature(&r, f) : default_names(f);
  if (st == KILN_OK && (r.bad || r.pos != r.len))
    st = LOSS("kiln_exec_load: %s", r.bad ? "truncated signature" : "trailing bytes");
  if (st != KILN_OK) {
    gx_file_free(f);
    return st;
  }
  *out = f;
  return KILN_OK;
}

kiln_status_t gx_file_instantiate(const gx_file* f, const int64_t* syms, int borrow, int from_file,
                                  kiln_graph_t** out) {
  *out = NULL;
  kiln_graph_t* g;
  KILN_RETURN_IF_ERROR(gx_graph_new(NULL, &g));
  kiln_status_t st = KILN_OK;
  for (int i = 0; i < f->n_nodes && st == KILN_OK; i++) {
    const gx_fnode* n = &f->nodes[i];
    gx_spec s;
    memset(&s, 0, sizeof s);
    s.op = n->op;
    s.sub = n->sub;
    s.dtype = n->dtype;
    s.dtype2 = n->dtype2;
    s.n_in = n->n_in;
    s.in = n->in;
    s.n_i = n->n_i;
    memcpy(s.i, n->i, sizeof s.i);
    memcpy(s.f, n->f, sizeof s.f);
    s.data = n->data;
    s.data_bytes = n->data_bytes;
    s.borrow = borrow;
    for (int j = n->first_bind; j < n->first_bind + n->n_bind && st == KILN_OK; j++) {
      int e = f->bind_expr[j];
      st = gx_expr_eval(f->expr_code + f->expr_off[e], f->expr_len[e], syms, f->n_symbols,
                        &s.i[f->bind_slot[j]]);
    }
    if (st != KILN_OK) break;
    int outs[GX_MAX_OUT];
    st = gx_add(g, &s, outs);
    if (st == KILN_ERROR_OUT_OF_MEMORY) break;
    if (st != KILN_OK) {
      char msg[400];
      snprintf(msg, sizeof msg, "%s", kiln_status_message());
      st = from_file ? LOSS("kiln_exec_load: node %d is invalid: %s", i, msg)
                     : BADARG("kiln model: the program does not build at these sizes: node %d: %s",
                              i, msg);
    }
  }
  if (st == KILN_OK && (uint32_t)g->n_values != f->n_values)
    st = LOSS("kiln_exec_load: %d values rebuilt, file says %u", g->n_values, f->n_values);
  for (int k = 0; k < f->n_outputs && st == KILN_OK; k++) {
    if (!gx_valid_vid(g, f->outputs[k])) st = LOSS("kiln_exec_load: bad output %d", k);
    else st = kiln_graph_output(g, f->outputs[k]);
  }
  if (st != KILN_OK) {
    kiln_graph_destroy(g);
    return st;
  }
  *out = g;
  return KILN_OK;
}

kiln_status_t kiln_exec_load_buffer(const void* data, size_t size, kiln_exec_t** out) {
  if (!out) return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "kiln_exec_load: NULL out");
  *out = NULL;
  if (!data && size) return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "kiln_exec_load: NULL data");
  if (!data) return LOSS("kiln_exec_load: truncated header (0 bytes)");
  gx_file* f = NULL;
  KILN_RETURN_IF_ERROR(gx_file_parse(data, size, &f));
  /* the reference sizes: every symbol at its bound */
  int64_t syms[MAX_SYMBOLS];
  for (int k = 0; k < f->n_symbols; k++) syms[k] = f->sym_max[k];
  kiln_graph_t* g = NULL;
  kiln_status_t st = gx_file_instantiate(f, syms, 0, 1, &g);
  kiln_exec_t* e = NULL;
  if (st == KILN_OK) {
    st = kiln_graph_compile_ex(g, f->flags, &e);
    kiln_graph_destroy(g);
    if (st != KILN_OK && st != KILN_ERROR_OUT_OF_MEMORY) {
      char msg[400];
      snprintf(msg, sizeof msg, "%s", kiln_status_message());
      st = LOSS("kiln_exec_load: the program does not compile: %s", msg);
    }
  }
  if (st == KILN_OK &&
      (e->stats.arena_bytes != f->summary[0] || e->stats.n_kernels_per_run != f->summary[1] ||
       e->stats.n_nodes_after != f->summary[2] || e->stats.n_fused_groups != f->summary[3])) {
    kiln_exec_destroy(e);
    e = NULL;
    st = LOSS("kiln_exec_load: the rebuilt plan differs from the saved one");
  }
  gx_file_free(f);
  if (st == KILN_OK) *out = e;
  return st;
}

kiln_status_t gx_read_file(const char* path, unsigned char** out_data, size_t* out_len,
                           const char* what) {
  *out_data = NULL;
  *out_len = 0;
  FILE* f = fopen(path, "rb");
  if (!f) return kiln_error(KILN_ERROR_NOT_FOUND, "%s: cannot open %s", what, path);
  unsigned char* data = NULL;
  size_t len = 0, cap = 0;
  for (;;) {
    if (len == cap) {
      size_t nc = cap ? cap * 2 : 65536;
      unsigned char* q = kiln_allocator_alloc(NULL, nc, 64);
      if (!q) {
        kiln_allocator_free(NULL, data);
        fclose(f);
        return kiln_error(KILN_ERROR_OUT_OF_MEMORY, "%s: out of memory reading %s", what, path);
      }
      if (len) memcpy(q, data, len);
      kiln_allocator_free(NULL, data);
      data = q;
      cap = nc;
    }
    size_t got = fread(data + len, 1, cap - len, f);
    len += got;
    if (got == 0) break;
  }
  int err = ferror(f);
  fclose(f);
  if (err) {
    kiln_allocator_free(NULL, data);
    return kiln_error(KILN_ERROR_INTERNAL, "%s: read error on %s", what, path);
  }
  *out_data = data;
  *out_len = len;
  return KILN_OK;
}

kiln_status_t kiln_exec_load(const char* path, kiln_exec_t** out) {
  if (!path || !out) return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "kiln_exec_load: NULL argument");
  *out = NULL;
  unsigned char* data;
  size_t len;
  KILN_RETURN_IF_ERROR(gx_read_file(path, &data, &len, "kiln_exec_load"));
  kiln_status_t st = kiln_exec_load_buffer(data, len, out);
  kiln_allocator_free(NULL, data);
  return st;
}
