/* SPDX-License-Identifier: Apache-2.0 */
/* serialize.c - .kiln artifacts: save a compiled program, load and re-validate it.
 *
 * Layout (all integers little-endian):
 *   header   "KILNGRF\0" | u32 version | u32 compile flags | u64 payload bytes | u64 FNV-1a-64
 *            checksum of header bytes [8, 24) (version, flags, payload bytes) then the payload
 *            (version 1, still read: of the payload only, so its flags were not covered)
 *   payload  u32 n_nodes | u32 n_outputs | u32 n_values
 *            per node: i32 op, sub, dtype, dtype2, n_in, n_i | i32 in[n_in] | i64 i[n_i] |
 *                      f64 f[8] | (CONST only) u64 n bytes, bytes
 *            i32 outputs[n_outputs]
 *            plan summary: i64 arena_bytes, n_kernels_per_run, n_nodes_after, n_fused_groups
 * The nodes are the graph as built (before passes). Loading replays them through the same
 * validation as the builder API (so a file can never produce a node the builder would reject),
 * compiles with the saved flags and checks the plan summary. Every read is bounds-checked;
 * anything unexpected is DATA_LOSS.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "graph/graph_internal.h"

#define KILN_FILE_MAGIC "KILNGRF"
#define KILN_FILE_VERSION 2u
#define KILN_FILE_VERSION_V1 1u /* checksum over the payload only */
#define HEADER_BYTES 32

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

kiln_status_t kiln_exec_save_buffer(const kiln_exec_t* e, void** out_data, size_t* out_size) {
  if (!e || !out_data || !out_size)
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "kiln_exec_save: NULL argument");
  *out_data = NULL;
  *out_size = 0;
  const kiln_graph_t* g = e->src;
  wbuf_t w = {NULL, 0, 0, 0};
  unsigned char zero[HEADER_BYTES] = {0};
  put(&w, zero, HEADER_BYTES);
  put_u32(&w, (uint32_t)g->n_nodes);
  put_u32(&w, (uint32_t)g->n_outputs);
  put_u32(&w, (uint32_t)g->n_values);
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
      put_u64(&w, (uint64_t)n->data_bytes);
      if (n->data_bytes) put(&w, n->data, n->data_bytes);
    }
  }
  for (int k = 0; k < g->n_outputs; k++) put_i32(&w, g->outputs[k]);
  put_i64(&w, e->stats.arena_bytes);
  put_i64(&w, e->stats.n_kernels_per_run);
  put_i64(&w, e->stats.n_nodes_after);
  put_i64(&w, e->stats.n_fused_groups);
  if (w.oom) {
    kiln_allocator_free(NULL, w.p);
    return kiln_error(KILN_ERROR_OUT_OF_MEMORY, "kiln_exec_save: out of memory");
  }
  /* header */
  wbuf_t h = {NULL, 0, 0, 0};
  put(&h, KILN_FILE_MAGIC, 8);
  put_u32(&h, KILN_FILE_VERSION);
  put_u32(&h, (uint32_t)e->flags);
  put_u64(&h, (uint64_t)(w.len - HEADER_BYTES));
  if (!h.oom) {
    uint64_t sum = fnv1a(FNV_SEED, h.p + 8, 16);
    put_u64(&h, fnv1a(sum, w.p + HEADER_BYTES, w.len - HEADER_BYTES));
  }
  if (h.oom) {
    kiln_allocator_free(NULL, w.p);
    return kiln_error(KILN_ERROR_OUT_OF_MEMORY, "kiln_exec_save: out of memory");
  }
  memcpy(w.p, h.p, HEADER_BYTES);
  kiln_allocator_free(NULL, h.p);
  *out_data = w.p;
  *out_size = w.len;
  return KILN_OK;
}

void kiln_exec_free_buffer(void* data) { kiln_allocator_free(NULL, data); }

kiln_status_t kiln_exec_save(const kiln_exec_t* e, const char* path) {
  if (!e || !path) return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "kiln_exec_save: NULL argument");
  void* data;
  size_t size;
  KILN_RETURN_IF_ERROR(kiln_exec_save_buffer(e, &data, &size));
  FILE* f = fopen(path, "wb");
  if (!f) {
    kiln_exec_free_buffer(data);
    return kiln_error(KILN_ERROR_INTERNAL, "kiln_exec_save: cannot open %s for writing", path);
  }
  size_t wr = fwrite(data, 1, size, f);
  int rc = fclose(f);
  kiln_exec_free_buffer(data);
  if (wr != size || rc != 0)
    return kiln_error(KILN_ERROR_INTERNAL, "kiln_exec_save: write to %s failed", path);
  return KILN_OK;
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

static kiln_status_t parse(const unsigned char* data, size_t size, int* flags, kiln_graph_t** out,
                           int64_t summary[4]) {
  if (size < HEADER_BYTES) return LOSS("kiln_exec_load: truncated header (%zu bytes)", size);
  if (memcmp(data, KILN_FILE_MAGIC, 8) != 0) return LOSS("kiln_exec_load: not a .kiln file");
  rbuf_t h = {data, HEADER_BYTES, 8, 0};
  uint32_t version = get_u32(&h);
  uint32_t fl = get_u32(&h);
  uint64_t plen = get_u64(&h);
  uint64_t sum = get_u64(&h);
  if (version != KILN_FILE_VERSION && version != KILN_FILE_VERSION_V1)
    return LOSS("kiln_exec_load: unsupported version %u (this library reads %u and %u)", version,
                KILN_FILE_VERSION_V1, KILN_FILE_VERSION);
  if (plen != size - HEADER_BYTES)
    return LOSS("kiln_exec_load: payload is %zu bytes, header says %llu", size - HEADER_BYTES,
                (unsigned long long)plen);
  uint64_t h0 = version == KILN_FILE_VERSION_V1 ? FNV_SEED : fnv1a(FNV_SEED, data + 8, 16);
  if (fnv1a(h0, data + HEADER_BYTES, (size_t)plen) != sum)
    return LOSS("kiln_exec_load: checksum mismatch");
  if (fl & ~(uint32_t)KILN_COMPILE_ALL_FLAGS)
    return LOSS("kiln_exec_load: unknown compile flags 0x%x (this library defines 0x%x)",
                fl & ~(uint32_t)KILN_COMPILE_ALL_FLAGS, (unsigned)KILN_COMPILE_ALL_FLAGS);
  *flags = (int)fl;

  rbuf_t r = {data + HEADER_BYTES, (size_t)plen, 0, 0};
  uint32_t n_nodes = get_u32(&r), n_outputs = get_u32(&r), n_values = get_u32(&r);
  /* every node takes at least 88 bytes, every output 4 */
  if (r.bad || n_nodes > plen / 88 || n_outputs > plen / 4 || n_values > 3 * (uint64_t)n_nodes)
    return LOSS("kiln_exec_load: implausible counts (%u nodes, %u outputs)", n_nodes, n_outputs);
  kiln_graph_t* g;
  KILN_RETURN_IF_ERROR(gx_graph_new(NULL, &g));
  int* ins = NULL;
  int ins_cap = 0;
  kiln_status_t st = KILN_OK;
  for (uint32_t i = 0; i < n_nodes && st == KILN_OK; i++) {
    gx_spec s;
    memset(&s, 0, sizeof s);
    s.op = get_i32(&r);
    s.sub = get_i32(&r);
    s.dtype = get_i32(&r);
    s.dtype2 = get_i32(&r);
    s.n_in = get_i32(&r);
    s.n_i = get_i32(&r);
    if (r.bad) {
      st = LOSS("kiln_exec_load: truncated at node %u", i);
      break;
    }
    if (s.n_in < 0 || (size_t)s.n_in > (r.len - r.pos) / 4 || s.n_i < 0 || s.n_i > GX_MAX_I) {
      st = LOSS("kiln_exec_load: node %u: bad counts", i);
      break;
    }
    if (s.n_in > ins_cap) {
      st = gx_grow(&g->alloc, (void**)&ins, &ins_cap, s.n_in, sizeof(int));
      if (st != KILN_OK) break;
    }
    for (int k = 0; k < s.n_in; k++) ins[k] = get_i32(&r);
    s.in = ins;
    for (int k = 0; k < s.n_i; k++) s.i[k] = get_i64(&r);
    for (int k = 0; k < GX_MAX_F; k++) s.f[k] = get_f64(&r);
    if (s.op == GX_OP_CONST) {
      uint64_t nb = get_u64(&r);
      if (nb > r.len - r.pos) {
        st = LOSS("kiln_exec_load: node %u: constant data truncated", i);
        break;
      }
      s.data_bytes = (size_t)nb;
      s.data = take(&r, (size_t)nb);
    }
    if (r.bad) {
      st = LOSS("kiln_exec_load: truncated at node %u", i);
      break;
    }
    int outs[GX_MAX_OUT];
    st = gx_add(g, &s, outs);
    if (st == KILN_ERROR_OUT_OF_MEMORY) break;
    if (st != KILN_OK) {
      char msg[400];
      snprintf(msg, sizeof msg, "%s", kiln_status_message());
      st = LOSS("kiln_exec_load: node %u is invalid: %s", i, msg);
    }
  }
  gx_free(&g->alloc, ins);
  if (st == KILN_OK && (uint32_t)g->n_values != n_values)
    st = LOSS("kiln_exec_load: %d values rebuilt, file says %u", g->n_values, n_values);
  for (uint32_t k = 0; k < n_outputs && st == KILN_OK; k++) {
    int32_t v = get_i32(&r);
    if (r.bad || !gx_valid_vid(g, v)) st = LOSS("kiln_exec_load: bad output %u", k);
    else st = kiln_graph_output(g, v);
  }
  for (int k = 0; k < 4 && st == KILN_OK; k++) summary[k] = get_i64(&r);
  if (st == KILN_OK && (r.bad || r.pos != r.len))
    st = LOSS("kiln_exec_load: %s", r.bad ? "truncated plan summary" : "trailing bytes");
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
  int flags = 0;
  kiln_graph_t* g = NULL;
  int64_t summary[4];
  KILN_RETURN_IF_ERROR(parse(data, size, &flags, &g, summary));
  kiln_exec_t* e = NULL;
  kiln_status_t st = kiln_graph_compile_ex(g, flags, &e);
  kiln_graph_destroy(g);
  if (st != KILN_OK) {
    if (st == KILN_ERROR_OUT_OF_MEMORY) return st;
    char msg[400];
    snprintf(msg, sizeof msg, "%s", kiln_status_message());
    return LOSS("kiln_exec_load: the program does not compile: %s", msg);
  }
  if (e->stats.arena_bytes != summary[0] || e->stats.n_kernels_per_run != summary[1] ||
      e->stats.n_nodes_after != summary[2] || e->stats.n_fused_groups != summary[3]) {
    kiln_exec_destroy(e);
    return LOSS("kiln_exec_load: the rebuilt plan differs from the saved one");
  }
  *out = e;
  return KILN_OK;
}

kiln_status_t kiln_exec_load(const char* path, kiln_exec_t** out) {
  if (!path || !out) return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "kiln_exec_load: NULL argument");
  *out = NULL;
  FILE* f = fopen(path, "rb");
  if (!f) return kiln_error(KILN_ERROR_NOT_FOUND, "kiln_exec_load: cannot open %s", path);
  unsigned char* data = NULL;
  size_t len = 0, cap = 0;
  for (;;) {
    if (len == cap) {
      size_t nc = cap ? cap * 2 : 65536;
      unsigned char* q = kiln_allocator_alloc(NULL, nc, 64);
      if (!q) {
        kiln_allocator_free(NULL, data);
        fclose(f);
        return kiln_error(KILN_ERROR_OUT_OF_MEMORY, "kiln_exec_load: out of memory reading %s", path);
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
    return kiln_error(KILN_ERROR_INTERNAL, "kiln_exec_load: read error on %s", path);
  }
  kiln_status_t st = kiln_exec_load_buffer(data, len, out);
  kiln_allocator_free(NULL, data);
  return st;
}
