/* SPDX-License-Identifier: Apache-2.0 */
/* test_reliability.c - issue 23: shape arithmetic that overflows, nodes with too few inputs,
 * unbounded constant folding, compile flags in .kiln files and double -> int conversions. Each
 * case goes through the public API (builder, compile, save / load, run) and must end in a clean
 * status (or the right numbers), never a wrapped size, a crash or a sanitizer report. */
#include "kiln_file_test.h"
#include <time.h>

#include "graph/graph_internal.h"
#include "kiln/kernels/conv.h"
#include "kiln/kernels/index.h"
#include "test_graph_util.h"

#define F32 KILN_DTYPE_F32
#define I32 KILN_DTYPE_I32
#define I64 KILN_DTYPE_I64
#define BIG (INT64_C(1) << 62)

/* Under AddressSanitizer, let absurd allocations fail with NULL like malloc does. */
const char* __asan_default_options(void);
const char* __asan_default_options(void) { return "allocator_may_return_null=1"; }

/* ---- a .kiln writer (the layout of src/graph/serialize.c) --------------------------------- */

typedef struct {
  unsigned char* p;
  size_t n, cap;
} kb_t;

static void kb_put(kb_t* b, const void* src, size_t n) {
  if (b->n + n > b->cap) {
    b->cap = (b->n + n) * 2 + 256;
    b->p = realloc(b->p, b->cap);
  }
  memcpy(b->p + b->n, src, n);
  b->n += n;
}
static void kb_u32(kb_t* b, uint32_t v) {
  unsigned char x[4] = {(unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16),
                        (unsigned char)(v >> 24)};
  kb_put(b, x, 4);
}
static void kb_u64(kb_t* b, uint64_t v) {
  kb_u32(b, (uint32_t)v);
  kb_u32(b, (uint32_t)(v >> 32));
}

/* One node with attributes i[0..n_i) and f[] all zero. */
static void kb_node(kb_t* b, int op, int sub, int dtype, int n_in, const int* in, int n_i,
                    const int64_t* iv) {
  kb_u32(b, (uint32_t)op);
  kb_u32(b, (uint32_t)sub);
  kb_u32(b, (uint32_t)dtype);
  kb_u32(b, (uint32_t)-1);
  kb_u32(b, (uint32_t)n_in);
  kb_u32(b, (uint32_t)n_i);
  for (int k = 0; k < n_in; k++) kb_u32(b, (uint32_t)in[k]);
  for (int k = 0; k < n_i; k++) kb_u64(b, (uint64_t)iv[k]);
  for (int k = 0; k < GX_MAX_F; k++) kb_u64(b, 0);
}

/* Writes the header for `version` (1: checksum of the payload; 2: of header bytes [8, 24) and
 * the payload) in front of buf[32..n). */
static void kb_header(unsigned char* buf, size_t n, uint32_t version, uint32_t flags) {
  kb_t h = {NULL, 0, 0};
  kb_put(&h, "KILNGRF", 8);
  kb_u32(&h, version);
  kb_u32(&h, flags);
  kb_u64(&h, (uint64_t)(n - 32));
  kb_u64(&h, 0);
  memcpy(buf, h.p, 32);
  free(h.p);
  kft_fix_checksum(buf, n);
}

/* A payload buffer with room for the header and the three counts. */
static kb_t kb_begin(uint32_t n_nodes, uint32_t n_outputs, uint32_t n_values) {
  kb_t b = {NULL, 0, 0};
  unsigned char zero[32] = {0};
  kb_put(&b, zero, 32);
  kb_u32(&b, n_nodes);
  kb_u32(&b, n_outputs);
  kb_u32(&b, n_values);
  return b;
}

/* Outputs, a zero plan summary and the version-2 header; loads the result. */
static kiln_status_t kb_load(kb_t* b, int n_outputs, const int* outputs, kiln_exec_t** e) {
  for (int k = 0; k < n_outputs; k++) kb_u32(b, (uint32_t)outputs[k]);
  for (int k = 0; k < 4; k++) kb_u64(b, 0);
  kb_header(b->p, b->n, 2, 0);
  kiln_status_t st = kiln_exec_load_buffer(b->p, b->n, e);
  free(b->p);
  b->p = NULL;
  return st;
}

static int msg_has(const char* s) { return strstr(kiln_status_message(), s) != NULL; }

/* ---- 1. cat sizes that wrap --------------------------------------------------------------- */

#define N_CAT 65537 /* 65536 inputs of 2^48 and one of 4: the sum wraps to 4 in 64 bits */

KT_TEST(cat_size_overflow_builder) {
  kiln_graph_t* g;
  KT_OK(kiln_graph_create(&g));
  int64_t one = 1, big = INT64_C(1) << 48, four = 4;
  int x, e, y, out = -1;
  KT_OK(kiln_graph_input(g, F32, 1, &one, &x));
  KT_OK(kiln_graph_expand(g, x, 1, &big, &e));
  KT_OK(kiln_graph_input(g, F32, 1, &four, &y));
  int* ids = malloc(sizeof(int) * N_CAT);
  for (int k = 0; k < N_CAT - 1; k++) ids[k] = e;
  ids[N_CAT - 1] = y;
  int nv = kiln_graph_num_values(g);
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_graph_cat(g, N_CAT, ids, 0, &out));
  KT_CHECK(msg_has("cat"));
  KT_CHECK(kiln_graph_num_values(g) == nv && out == -1);
  /* two of them are 2^49 elements: over the cap without wrapping, rejected too */
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_graph_cat(g, 2, ids, 0, &out));
  /* the largest legal result is still fine */
  int64_t half = INT64_C(1) << 47;
  int h, ok;
  KT_OK(kiln_graph_expand(g, x, 1, &half, &h));
  int hh[2] = {h, h};
  KT_OK(kiln_graph_cat(g, 2, hh, 0, &ok));
  int dt, nd;
  int64_t sh[8];
  KT_OK(kiln_graph_value_info(g, ok, &dt, &nd, sh));
  KT_CHECK(nd == 1 && sh[0] == big);
  free(ids);
  kiln_graph_destroy(g);
}

KT_TEST(cat_size_overflow_loader) {
  kb_t b = kb_begin(4, 1, 4);
  int64_t one = 1, big = INT64_C(1) << 48, four = 4;
  int in0 = 0, catd = 0;
  kb_node(&b, GX_OP_INPUT, 0, F32, 0, NULL, 1, &one);
  kb_node(&b, GX_OP_EXPAND, 0, F32, 1, &in0, 1, &big);
  kb_node(&b, GX_OP_INPUT, 1, F32, 0, NULL, 1, &four);
  int* ids = malloc(sizeof(int) * N_CAT);
  for (int k = 0; k < N_CAT - 1; k++) ids[k] = 1;
  ids[N_CAT - 1] = 2;
  int64_t dim = catd;
  kb_node(&b, GX_OP_CAT, 0, F32, N_CAT, ids, 1, &dim);
  free(ids);
  int outv = 3;
  kiln_exec_t* e = NULL;
  KT_FAILS(KILN_ERROR_DATA_LOSS, kb_load(&b, 1, &outv, &e));
  KT_CHECK(e == NULL && msg_has("cat"));
}

/* ---- 2. too few (or too many) inputs: one check before inference --------------------------- */

/* The 164-byte file of the report: one INDEX node with no inputs. */
KT_TEST(loader_index_without_inputs) {
  kb_t b = kb_begin(1, 0, 1);
  kb_node(&b, GX_OP_INDEX, 0, F32, 0, NULL, 0, NULL);
  for (int k = 0; k < 4; k++) kb_u64(&b, 0);
  KT_CHECK(b.n == 164);
  kb_header(b.p, b.n, 2, 0);
  kiln_exec_t* e = NULL;
  KT_FAILS(KILN_ERROR_DATA_LOSS, kiln_exec_load_buffer(b.p, b.n, &e));
  KT_CHECK(e == NULL && msg_has("index") && msg_has("inputs"));
  free(b.p);
}

/* Every op with 0 to 12 inputs, all an existing value or all -1: the file (which has no outputs
 * and a wrong value count) is rejected without any node reading a missing input. */
KT_TEST(loader_every_op_bad_arity) {
  for (int op = 0; op < GX_OP_BUILD_COUNT; op++) {
    for (int variant = 0; variant < 26; variant++) {
      kb_t b = kb_begin(2, 0, 0);
      int64_t two = 2;
      kb_node(&b, GX_OP_INPUT, 0, F32, 0, NULL, 1, &two);
      int ins[16];
      int n_in = variant / 2;
      for (int k = 0; k < n_in; k++) ins[k] = variant % 2 ? -1 : 0;
      int64_t attrs[GX_MAX_I] = {0};
      kb_node(&b, op, 0, F32, n_in, ins, 4, attrs);
      for (int k = 0; k < 4; k++) kb_u64(&b, 0);
      kb_header(b.p, b.n, 2, 0);
      kiln_exec_t* e = NULL;
      kiln_status_t st = kiln_exec_load_buffer(b.p, b.n, &e);
      KT_CHECK(st == KILN_ERROR_DATA_LOSS && e == NULL);
      if (st != KILN_ERROR_DATA_LOSS) fprintf(stderr, "  op %d variant %d: %d\n", op, variant, st);
      free(b.p);
    }
  }
}

KT_TEST(builder_bad_input_ids) {
  kiln_graph_t* g;
  KT_OK(kiln_graph_create(&g));
  int64_t s2 = 2;
  int x, out;
  KT_OK(kiln_graph_input(g, F32, 1, &s2, &x));
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_graph_unary(g, KILN_UNARY_EXP, 7, F32, &out));
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_graph_unary(g, KILN_UNARY_EXP, -1, F32, &out));
  int bad[2] = {x, 99};
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_graph_cat(g, 2, bad, 0, &out));
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_graph_cat(g, 0, bad, 0, &out));
  int idx[9] = {-1, -1, -1, -1, -1, -1, -1, -1, -1};
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_graph_index(g, x, 9, idx, &out));
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_graph_index(g, -1, 1, idx, &out));
  KT_CHECK(kiln_graph_num_values(g) == 1);
  kiln_graph_destroy(g);
}

/* ---- 6. constant folding is bounded by what it reads -------------------------------------- */

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static kiln_graph_t* full_sum(int64_t n, int* out) {
  kiln_graph_t* g;
  KT_OK(kiln_graph_create(&g));
  int f;
  KT_OK(kiln_graph_full(g, F32, 1, &n, 1.0, &f));
  KT_OK(kiln_graph_reduce(g, KILN_REDUCE_SUM, f, 0, 0, 0.0, F32, out));
  KT_OK(kiln_graph_output(g, *out));
  return g;
}

KT_TEST(fold_of_huge_full_is_left_to_run_time) {
  int y;
  kiln_graph_t* g = full_sum(INT64_C(1) << 40, &y);
  double t0 = now_s();
  kiln_exec_t* e = NULL;
  KT_OK(kiln_graph_compile(g, &e));
  KT_CHECK(now_s() - t0 < 5.0);
  KT_CHECK(e && gt_stats(e).n_folded == 0);
  /* the same through a .kiln file */
  void* buf = NULL;
  size_t n = 0;
  if (e) KT_OK(kiln_exec_save_buffer(e, &buf, &n));
  kiln_exec_t* e2 = NULL;
  t0 = now_s();
  if (buf) KT_OK(kiln_exec_load_buffer(buf, n, &e2));
  KT_CHECK(now_s() - t0 < 5.0);
  kiln_exec_free_buffer(buf);
  kiln_exec_destroy(e2);
  kiln_exec_destroy(e);
  kiln_graph_destroy(g);
  /* a small one still folds, and is right */
  g = full_sum(1000, &y);
  KT_OK(kiln_graph_compile(g, &e));
  KT_CHECK(gt_stats(e).n_folded >= 1);
  float r = 0;
  void* outs[1] = {&r};
  KT_OK(kiln_exec_run(e, 0, NULL, 1, outs));
  KT_CHECK(r == 1000.0f);
  kiln_exec_destroy(e);
  kiln_graph_destroy(g);
}

/* ---- 7. compile flags in .kiln files ------------------------------------------------------- */

static kiln_graph_t* small_graph(void) {
  kiln_graph_t* g;
  KT_OK(kiln_graph_create(&g));
  int64_t s[2] = {4, 8};
  int x, a, b, y;
  KT_OK(kiln_graph_input(g, F32, 2, s, &x));
  KT_OK(kiln_graph_unary(g, KILN_UNARY_EXP, x, F32, &a));
  KT_OK(kiln_graph_binary(g, KILN_BINARY_MUL, a, x, 1.0, F32, &b));
  KT_OK(kiln_graph_reduce(g, KILN_REDUCE_SUM, b, 2, 0, 0.0, F32, &y));
  KT_OK(kiln_graph_output(g, y));
  return g;
}

KT_TEST(every_compile_flag_saves_and_loads) {
  KT_CHECK(KILN_COMPILE_ALL_FLAGS == 0xffff);
  KT_CHECK((KILN_COMPILE_ALL_FLAGS & KILN_COMPILE_NO_CHAIN) != 0);
  kiln_graph_t* g = small_graph();
  float x[32], r0[4], r1[4];
  for (int i = 0; i < 32; i++) x[i] = (float)(i % 7) * 0.25f - 0.5f;
  void* ins[1] = {x};
  for (int bit = -1; bit < 31; bit++) {
    int flags = bit < 0 ? KILN_COMPILE_ALL_FLAGS : 1 << bit;
    kiln_exec_t* e = NULL;
    if (!(flags & KILN_COMPILE_ALL_FLAGS)) {
      KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_graph_compile_ex(g, flags, &e));
      KT_CHECK(e == NULL);
      continue;
    }
    KT_OK(kiln_graph_compile_ex(g, flags, &e));
    void* buf = NULL;
    size_t n = 0;
    KT_OK(kiln_exec_save_buffer(e, &buf, &n));
    kiln_exec_t* e2 = NULL;
    kiln_status_t st = kiln_exec_load_buffer(buf, n, &e2);
    KT_CHECK(st == KILN_OK);
    if (st != KILN_OK) fprintf(stderr, "  flags 0x%x: %s\n", flags, kiln_status_message());
    if (e2) {
      void* o0[1] = {r0};
      void* o1[1] = {r1};
      KT_OK(kiln_exec_run(e, 1, ins, 1, o0));
      KT_OK(kiln_exec_run(e2, 1, ins, 1, o1));
      KT_CHECK(memcmp(r0, r1, sizeof r0) == 0);
    }
    kiln_exec_destroy(e2);
    kiln_exec_free_buffer(buf);
    kiln_exec_destroy(e);
  }
  kiln_graph_destroy(g);
}

static uint64_t rd_u64(const unsigned char* p) {
  uint64_t v = 0;
  for (int k = 7; k >= 0; k--) v = v << 8 | p[k];
  return v;
}
static uint32_t rd_u32(const unsigned char* p) { return (uint32_t)rd_u64(p) & 0xffffffffu; }

/* The same program as a version-1 or -2 file (constants inline, no signature): the layout
 * older libraries wrote, which must keep loading. */
static kb_t v3_to_v12(const unsigned char* f, uint32_t version, uint32_t flags) {
  const unsigned char* m = f + rd_u64(f + 32);
  const unsigned char* w = f + rd_u64(f + 48);
  uint32_t n_nodes = rd_u32(m), n_outputs = rd_u32(m + 4), n_values = rd_u32(m + 8);
  kb_t b = kb_begin(n_nodes, n_outputs, n_values);
  const unsigned char* p = m + 16;
  for (uint32_t i = 0; i < n_nodes; i++) {
    int op = (int)rd_u32(p), n_in = (int)rd_u32(p + 16), n_i = (int)rd_u32(p + 20);
    size_t len = 24 + 4 * (size_t)n_in + 8 * (size_t)n_i + 8 * GX_MAX_F;
    kb_put(&b, p, len);
    p += len;
    if (op == GX_OP_CONST) {
      uint64_t off = rd_u64(p), nb = rd_u64(p + 8);
      kb_u64(&b, nb);
      kb_put(&b, w + off, (size_t)nb);
      p += 16;
    }
  }
  kb_put(&b, p, 4 * (size_t)n_outputs + 32); /* outputs and the plan summary */
  kb_header(b.p, b.n, version, flags);
  return b;
}

KT_TEST(flags_are_under_the_checksum) {
  kiln_graph_t* g = small_graph();
  kiln_exec_t* e;
  KT_OK(kiln_graph_compile_ex(g, KILN_COMPILE_NO_CHAIN, &e));
  void* buf;
  size_t n;
  KT_OK(kiln_exec_save_buffer(e, &buf, &n));
  unsigned char* p = buf;
  KT_CHECK(rd_u32(p + 8) == 3);
  kiln_exec_t* e2 = NULL;
  /* any flipped flag bit (a defined one or not) is a checksum mismatch */
  for (int bit = 0; bit < 32; bit++) {
    p[12 + bit / 8] ^= (unsigned char)(1u << (bit % 8));
    KT_FAILS(KILN_ERROR_DATA_LOSS, kiln_exec_load_buffer(buf, n, &e2));
    KT_CHECK(e2 == NULL && msg_has("checksum"));
    p[12 + bit / 8] ^= (unsigned char)(1u << (bit % 8));
  }
  /* an unknown flag with a matching checksum: a clear message */
  uint32_t bad_flags = (uint32_t)KILN_COMPILE_NO_CHAIN | (1u << 30);
  for (int k = 0; k < 4; k++) p[12 + k] = (unsigned char)(bad_flags >> (8 * k));
  kft_fix_checksum(p, n);
  KT_FAILS(KILN_ERROR_DATA_LOSS, kiln_exec_load_buffer(buf, n, &e2));
  KT_CHECK(msg_has("unknown compile flags"));
  for (int k = 0; k < 4; k++) p[12 + k] = (unsigned char)((uint32_t)KILN_COMPILE_NO_CHAIN >> (8 * k));
  kft_fix_checksum(p, n);
  KT_OK(kiln_exec_load_buffer(buf, n, &e2));
  kiln_exec_destroy(e2);
  e2 = NULL;
  /* the same program as version 2 and version 1 files still loads (v1 with a flag above bit
   * 8, which its checksum did not cover) */
  for (uint32_t v = 1; v <= 2; v++) {
    kb_t old = v3_to_v12(p, v, (uint32_t)KILN_COMPILE_NO_CHAIN);
    KT_OK(kiln_exec_load_buffer(old.p, old.n, &e2));
    kiln_exec_destroy(e2);
    e2 = NULL;
    free(old.p);
  }
  /* versions other than 1 to 3 are refused by name */
  p[8] = 4;
  kft_fix_checksum(p, n);
  KT_FAILS(KILN_ERROR_DATA_LOSS, kiln_exec_load_buffer(buf, n, &e2));
  KT_CHECK(msg_has("unsupported version 4"));
  kiln_exec_free_buffer(buf);
  kiln_exec_destroy(e);
  kiln_graph_destroy(g);
}

/* ---- 8. undefined behaviour in shape formulas ---------------------------------------------- */

KT_TEST(reshape_product_overflow) {
  kiln_graph_t* g;
  KT_OK(kiln_graph_create(&g));
  int64_t s4 = 4;
  int x, out;
  KT_OK(kiln_graph_input(g, F32, 1, &s4, &x));
  int64_t a[2] = {BIG, 4}, b[3] = {-1, BIG, BIG}, c[3] = {INT64_C(1) << 32, INT64_C(1) << 32, 0};
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_graph_reshape(g, x, 2, a, &out));
  KT_CHECK(msg_has("reshape"));
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_graph_reshape(g, x, 3, b, &out));
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_graph_reshape(g, x, 3, c, &out));
  /* a zero-sized value cannot hide huge dims either */
  int64_t z[3] = {0, INT64_C(1) << 40, INT64_C(1) << 40};
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_graph_input(g, F32, 3, z, &out));
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_graph_full(g, F32, 3, z, 0.0, &out));
  kiln_graph_destroy(g);
}

KT_TEST(conv_dilation_and_padding_overflow) {
  kiln_graph_t* g;
  KT_OK(kiln_graph_create(&g));
  int64_t xs[4] = {1, 1, 8, 8}, ws[4] = {1, 1, 3, 3};
  int x, w, out;
  KT_OK(kiln_graph_input(g, F32, 4, xs, &x));
  KT_OK(kiln_graph_input(g, F32, 4, ws, &w));
  int64_t one[2] = {1, 1}, zero[2] = {0, 0}, bigd[2] = {BIG, 1}, bigp[2] = {BIG, 0};
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_graph_conv2d(g, x, w, -1, one, zero, bigd, 1, &out));
  KT_CHECK(msg_has("conv"));
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_graph_conv2d(g, x, w, -1, one, bigp, one, 1, &out));
  /* padding that fits int64 but makes a plane of more than 2^48 elements */
  int64_t p40[2] = {INT64_C(1) << 40, INT64_C(1) << 40};
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_graph_conv2d(g, x, w, -1, one, p40, one, 1, &out));
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_graph_conv2d(g, x, w, -1, one, zero, one, BIG, &out));
  /* the kernel's own shape query */
  float d[64];
  kiln_tensor_t tx = gt_t(d, F32, 4, xs), tw = gt_t(d, F32, 4, ws);
  int64_t os[4];
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT,
           kiln_conv2d_output_shape(&tx, &tw, NULL, one, zero, bigd, 1, os));
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT,
           kiln_conv2d_output_shape(&tx, &tw, NULL, one, bigp, one, 1, os));
  kiln_graph_destroy(g);
}

KT_TEST(pool_output_size_overflow) {
  kiln_graph_t* g;
  KT_OK(kiln_graph_create(&g));
  int64_t xs[4] = {1, 1, 4, 4};
  int x, out, ind;
  KT_OK(kiln_graph_input(g, F32, 4, xs, &x));
  int64_t k3[2] = {3, 3}, one[2] = {1, 1}, zero[2] = {0, 0}, bigd[2] = {BIG, 1};
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT,
           kiln_graph_max_pool2d(g, x, k3, one, zero, bigd, 0, &out, &ind));
  KT_CHECK(msg_has("max_pool"));
  /* n + 2 * padding wraps (padding <= kernel / 2 holds) */
  int64_t kmax[2] = {INT64_MAX, 1}, pmax[2] = {INT64_MAX / 2, 0};
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT,
           kiln_graph_max_pool2d(g, x, kmax, one, pmax, one, 0, &out, &ind));
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT,
           kiln_graph_avg_pool2d(g, x, kmax, one, pmax, 1, 1, 0, &out));
  /* a kernel of 2^62 rows padded by 2^61 is legal (one window covering the input): the window
   * arithmetic must neither wrap nor walk the padding one row at a time */
  int64_t kbig[2] = {BIG, 1}, pbig[2] = {BIG / 2, 0};
  int mp, ap;
  KT_OK(kiln_graph_max_pool2d(g, x, kbig, one, pbig, one, 0, &mp, NULL));
  KT_OK(kiln_graph_avg_pool2d(g, x, kbig, one, pbig, 0, 0, 0, &ap));
  KT_OK(kiln_graph_output(g, mp));
  KT_OK(kiln_graph_output(g, ap));
  int dt, nd;
  int64_t sh[8];
  KT_OK(kiln_graph_value_info(g, mp, &dt, &nd, sh));
  KT_CHECK(nd == 4 && sh[2] == 5 && sh[3] == 4); /* (4 + 2^62 - (2^62 - 1) - 1) / 1 + 1 */
  kiln_exec_t* e;
  KT_OK(kiln_graph_compile(g, &e));
  float xin[16], rmax[20], ravg[20];
  for (int i = 0; i < 16; i++) xin[i] = (float)i;
  void* ins[1] = {xin};
  void* outs[2] = {rmax, ravg};
  KT_OK(kiln_exec_run(e, 1, ins, 2, outs));
  for (int i = 0; i < 20; i++) { /* every window covers the whole column */
    KT_CHECK(rmax[i] == (float)(12 + i % 4));
    KT_CHECK(fabsf(ravg[i] - (float)(6 + i % 4)) < 1e-5f); /* count_include_pad = 0 */
  }
  kiln_exec_destroy(e);
  kiln_graph_destroy(g);
}

/* adaptive windows multiply output and input sizes: 2^40 x 2^40 would wrap */
KT_TEST(adaptive_pool_window_overflow) {
  kiln_graph_t* g;
  KT_OK(kiln_graph_create(&g));
  int64_t xs[3] = {1, 1, INT64_C(1) << 40}, gs[3] = {1, 1, INT64_C(1) << 40};
  int x, gr, out;
  KT_OK(kiln_graph_input(g, F32, 3, xs, &x));
  KT_OK(kiln_graph_input(g, F32, 3, gs, &gr));
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT,
           kiln_graph_adaptive_avg_pool2d(g, x, 1, INT64_C(1) << 40, &out));
  KT_CHECK(msg_has("adaptive"));
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT,
           kiln_graph_adaptive_avg_pool2d_backward(g, gr, 1, INT64_C(1) << 40, &out));
  KT_OK(kiln_graph_adaptive_avg_pool2d(g, x, 1, 1 << 20, &out));
  kiln_graph_destroy(g);
}

KT_TEST(slice_step_overflow) {
  kiln_graph_t* g;
  KT_OK(kiln_graph_create(&g));
  int64_t xs[2] = {10, 10};
  int x, s, t;
  KT_OK(kiln_graph_input(g, F32, 2, xs, &x));
  /* one row: stride 10 * step 2^62 would wrap */
  KT_OK(kiln_graph_slice(g, x, 0, 3, INT64_MAX, BIG, &s));
  KT_OK(kiln_graph_slice(g, s, 1, 1, INT64_MAX, INT64_MAX, &t));
  KT_OK(kiln_graph_output(g, s));
  KT_OK(kiln_graph_output(g, t));
  kiln_exec_t* e;
  KT_OK(kiln_graph_compile(g, &e));
  float xin[100], r[10], r2[1];
  for (int i = 0; i < 100; i++) xin[i] = (float)i;
  void* ins[1] = {xin};
  void* outs[2] = {r, r2};
  KT_OK(kiln_exec_run(e, 1, ins, 2, outs));
  for (int i = 0; i < 10; i++) KT_CHECK(r[i] == (float)(30 + i));
  KT_CHECK(r2[0] == 31.0f);
  kiln_exec_destroy(e);
  kiln_graph_destroy(g);
}

KT_TEST(double_to_int_conversions) {
  kiln_graph_t* g;
  KT_OK(kiln_graph_create(&g));
  int64_t s4 = 4;
  int x, out, xf;
  KT_OK(kiln_graph_input(g, I32, 1, &s4, &x));
  KT_OK(kiln_graph_input(g, F32, 1, &s4, &xf));
  /* clamp of an integer tensor with a NaN bound */
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT,
           kiln_graph_unary_ex(g, KILN_UNARY_CLAMP, x, 0, 0, 0, 0, NAN, 3, 1, 1, I32, &out));
  KT_CHECK(msg_has("NaN"));
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT,
           kiln_graph_unary_ex(g, KILN_UNARY_CLAMP, x, 0, 0, 0, 0, 0, NAN, 0, 1, I32, &out));
  /* infinite bounds saturate; a float clamp takes NaN */
  int c1, c2;
  KT_OK(kiln_graph_unary_ex(g, KILN_UNARY_CLAMP, x, 0, 0, 0, 0, -INFINITY, 1e300, 1, 1, I32, &c1));
  KT_OK(kiln_graph_unary_ex(g, KILN_UNARY_CLAMP, xf, 0, 0, 0, 0, NAN, 1, 1, 1, F32, &c2));
  /* an integer add's alpha */
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_graph_binary(g, KILN_BINARY_ADD, x, x, NAN, I32, &out));
  KT_CHECK(msg_has("alpha"));
  /* NaN / inf / out-of-range fill values for integer results */
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_graph_full(g, I64, 1, &s4, NAN, &out));
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_graph_full(g, I32, 1, &s4, INFINITY, &out));
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_graph_scalar(g, 1e30, I64, &out));
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_graph_scalar(g, NAN, I32, &out));
  KT_OK(kiln_graph_scalar(g, NAN, KILN_DTYPE_BOOL, &out));
  KT_OK(kiln_graph_scalar(g, NAN, F32, &out));
  /* integer addmm scalars */
  int64_t ms[2] = {2, 2};
  int a, b;
  KT_OK(kiln_graph_input(g, I64, 2, ms, &a));
  KT_OK(kiln_graph_input(g, I64, 2, ms, &b));
  int nv = kiln_graph_num_values(g);
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_graph_addmm(g, -1, a, b, 1.0, NAN, &out));
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_graph_addmm(g, a, a, b, INFINITY, 1.0, &out));
  KT_CHECK(kiln_graph_num_values(g) == nv);
  /* the saturating clamp runs right */
  KT_OK(kiln_graph_output(g, c1));
  kiln_exec_t* e;
  KT_OK(kiln_graph_compile(g, &e));
  int32_t xi[4] = {-5, 0, 7, INT32_MAX}, r[4];
  float xfl[4] = {0};
  void* ins[4] = {xi, xfl, NULL, NULL};
  int64_t am[4] = {0}, bm[4] = {0};
  ins[2] = am;
  ins[3] = bm;
  void* outs[1] = {r};
  KT_OK(kiln_exec_run(e, 4, ins, 1, outs));
  KT_CHECK(r[0] == -5 && r[1] == 0 && r[2] == 7 && r[3] == INT32_MAX);
  kiln_exec_destroy(e);
  kiln_graph_destroy(g);
  /* arange / linspace kernels into integer tensors */
  int64_t buf[4];
  kiln_tensor_t t = gt_t(buf, I64, 1, &s4);
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_kernel_arange(&t, NAN, 1.0));
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_kernel_arange(&t, 0.0, INFINITY));
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_kernel_linspace(&t, 0.0, 1e300));
  KT_OK(kiln_kernel_arange(&t, 2.0, 3.0));
  KT_CHECK(buf[0] == 2 && buf[3] == 11);
}

/* ---- sizes in the memory plan and in kernel descriptors ------------------------------------ */

/* 4096 intermediates of 2^51 bytes each, all in their own range: 2^63 bytes of arena would wrap */
KT_TEST(arena_size_overflow) {
  kiln_graph_t* g;
  KT_OK(kiln_graph_create(&g));
  int64_t one = 1, big = INT64_C(1) << 48;
  int x, e, acc = -1;
  KT_OK(kiln_graph_input(g, KILN_DTYPE_F64, 1, &one, &x));
  KT_OK(kiln_graph_expand(g, x, 1, &big, &e));
  for (int i = 0; i < 4096; i++) {
    int c, y, r;
    KT_OK(kiln_graph_scalar(g, (double)i, KILN_DTYPE_F64, &c));
    KT_OK(kiln_graph_binary(g, KILN_BINARY_ADD, e, c, 1.0, KILN_DTYPE_F64, &y));
    KT_OK(kiln_graph_reduce(g, KILN_REDUCE_SUM, y, 0, 0, 0.0, KILN_DTYPE_F64, &r));
    if (acc < 0) acc = r;
    else KT_OK(kiln_graph_binary(g, KILN_BINARY_ADD, acc, r, 1.0, KILN_DTYPE_F64, &acc));
  }
  KT_OK(kiln_graph_output(g, acc));
  kiln_exec_t* ex = NULL;
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT,
           kiln_graph_compile_ex(g, KILN_COMPILE_NO_FUSION | KILN_COMPILE_NO_MEMORY_REUSE, &ex));
  KT_CHECK(ex == NULL && msg_has("2^62"));
  /* with reuse, one 2^51-byte range serves them all in turn */
  KT_OK(kiln_graph_compile_ex(g, KILN_COMPILE_NO_FUSION, &ex));
  int64_t ws = kiln_exec_workspace_size(ex); /* plus the small sums' buffers */
  KT_CHECK(ex && ws >= INT64_C(1) << 51 && ws < (INT64_C(1) << 51) + 4096);
  kiln_exec_destroy(ex);
  kiln_graph_destroy(g);
}

/* Kernels called directly with descriptors whose sizes overflow: a clean error from the one
 * descriptor check every kernel runs. */
KT_TEST(kernel_descriptor_sizes) {
  float d[16] = {0};
  int64_t huge[2] = {INT64_C(1) << 40, INT64_C(1) << 40}, s4[4] = {1, 1, 4, 4};
  kiln_tensor_t t;
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_tensor_init_contiguous(&t, d, F32, 2, huge));
  KT_CHECK(kiln_tensor_numel(&t) == -1); /* 2^80 */
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_kernel_fill(&t, 1.0));
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_kernel_unary(KILN_UNARY_EXP, &t, F32, &t));
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_kernel_reduce(KILN_REDUCE_SUM, &t, 0, NULL, F32, &t));
  /* a small shape with a stride that puts its last element beyond int64 */
  kiln_tensor_t w = gt_t(d, F32, 4, s4);
  w.strides[2] = INT64_MAX / 2;
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_kernel_fill(&w, 1.0));
  kiln_tensor_t x = gt_t(d, F32, 4, s4), y = gt_t(d, F32, 4, s4);
  int64_t k2[2] = {2, 2}, z2[2] = {0, 0}, o2[2] = {1, 1};
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT,
           kiln_kernel_max_pool2d(&w, k2, NULL, z2, NULL, 0, &y, NULL));
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_kernel_conv2d(&x, &w, NULL, o2, z2, o2, 1, &y));
  x.shape[2] = -4;
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_kernel_conv2d(&x, &y, NULL, o2, z2, o2, 1, &y));
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_kernel_softmax(&w, 3, 0, &y));
  kiln_tensor_t m = gt_t(d, F32, 2, s4 + 2);
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_kernel_matmul(&m, &w, &y));
  /* BLAS-style sizes: rows * ld beyond int64 */
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT,
           kiln_sgemm(0, 0, INT64_C(1) << 40, 1, 1, 1.0f, d, INT64_C(1) << 40, d, 1, 0.0f, d, 1));
}

KT_MAIN()
