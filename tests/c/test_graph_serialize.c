/* SPDX-License-Identifier: Apache-2.0 */
/* test_graph_serialize.c - .kiln save/load round trips and corrupted-file rejection. */
#include "kiln_file_test.h"
#include <unistd.h>

#include "test_graph_util.h"

#define F32 KILN_DTYPE_F32

/* Under AddressSanitizer, let absurd allocations (a fuzzed shape asking for terabytes) fail with
 * NULL like malloc does, instead of aborting. Unused in normal builds. */
const char* __asan_default_options(void);
const char* __asan_default_options(void) { return "allocator_may_return_null=1"; }

/* A small MLP with constants: y = softmax(gelu(x @ W1 + b1) @ W2 + 0.5). */
static kiln_graph_t* build(float* w1, float* b1, float* w2) {
  kiln_graph_t* g;
  KT_OK(kiln_graph_create(&g));
  int64_t xs[2] = {6, 10}, w1s[2] = {10, 16}, b1s[1] = {16}, w2s[2] = {16, 4};
  int x, W1, B1, W2, h, a, y, half, z, sm;
  KT_OK(kiln_graph_input(g, F32, 2, xs, &x));
  KT_OK(kiln_graph_constant(g, F32, 2, w1s, w1, &W1));
  KT_OK(kiln_graph_constant(g, F32, 1, b1s, b1, &B1));
  KT_OK(kiln_graph_constant(g, F32, 2, w2s, w2, &W2));
  KT_OK(kiln_graph_addmm(g, B1, x, W1, 1.0, 1.0, &h));
  KT_OK(kiln_graph_unary(g, KILN_UNARY_GELU, h, F32, &a));
  KT_OK(kiln_graph_matmul(g, a, W2, &y));
  KT_OK(kiln_graph_scalar(g, 0.5, F32, &half));
  KT_OK(kiln_graph_binary(g, KILN_BINARY_ADD, y, half, 1.0, F32, &z));
  KT_OK(kiln_graph_softmax(g, z, 1, 0, -1, &sm));
  KT_OK(kiln_graph_output(g, sm));
  KT_OK(kiln_graph_output(g, a));
  return g;
}

KT_TEST(round_trip_file_and_buffer) {
  float* w1 = gt_randf(160);
  float* b1 = gt_randf(16);
  float* w2 = gt_randf(64);
  float* x = gt_randf(60);
  kiln_graph_t* g = build(w1, b1, w2);
  kiln_exec_t* e;
  KT_OK(kiln_graph_compile(g, &e));
  kiln_graph_destroy(g);
  float r0[24], r1[96], o0[24], o1[96];
  void* ins[1] = {x};
  void* outs[2] = {r0, r1};
  KT_OK(kiln_exec_run(e, 1, ins, 2, outs));
  char path[] = "/tmp/kiln_graph_test_XXXXXX";
  int fd = mkstemp(path);
  KT_CHECK(fd >= 0);
  close(fd);
  KT_OK(kiln_exec_save(e, path));
  kiln_exec_t* e2;
  KT_OK(kiln_exec_load(path, &e2));
  kiln_exec_stats_t s1 = gt_stats(e), s2 = gt_stats(e2);
  KT_CHECK(s1.arena_bytes == s2.arena_bytes && s1.n_kernels_per_run == s2.n_kernels_per_run);
  KT_CHECK(kiln_exec_num_inputs(e2) == 1 && kiln_exec_num_outputs(e2) == 2);
  outs[0] = o0;
  outs[1] = o1;
  KT_OK(kiln_exec_run(e2, 1, ins, 2, outs));
  KT_CHECK(memcmp(o0, r0, sizeof r0) == 0);
  KT_CHECK(memcmp(o1, r1, sizeof r1) == 0);
  /* the loaded program saves to the same bytes */
  void *b1buf, *b2buf;
  size_t n1, n2;
  KT_OK(kiln_exec_save_buffer(e, &b1buf, &n1));
  KT_OK(kiln_exec_save_buffer(e2, &b2buf, &n2));
  KT_CHECK(n1 == n2 && memcmp(b1buf, b2buf, n1) == 0);
  kiln_exec_t* e3;
  KT_OK(kiln_exec_load_buffer(b1buf, n1, &e3));
  kiln_exec_destroy(e3);
  kiln_exec_free_buffer(b1buf);
  kiln_exec_free_buffer(b2buf);
  remove(path);
  KT_FAILS(KILN_ERROR_NOT_FOUND, kiln_exec_load("/nonexistent/dir/x.kiln", &e3));
  KT_CHECK(e3 == NULL);
  kiln_exec_destroy(e);
  kiln_exec_destroy(e2);
  free(w1);
  free(b1);
  free(w2);
  free(x);
}

KT_TEST(corrupt_files_rejected) {
  float* w1 = gt_randf(160);
  float* b1 = gt_randf(16);
  float* w2 = gt_randf(64);
  kiln_graph_t* g = build(w1, b1, w2);
  kiln_exec_t* e;
  KT_OK(kiln_graph_compile(g, &e));
  kiln_graph_destroy(g);
  void* buf;
  size_t n;
  KT_OK(kiln_exec_save_buffer(e, &buf, &n));
  unsigned char* copy = malloc(n);
  kiln_exec_t* bad = NULL;
  /* every truncation */
  int fails = 0;
  for (size_t len = 0; len < n; len++) {
    memcpy(copy, buf, len);
    if (kiln_exec_load_buffer(copy, len, &bad) != KILN_ERROR_DATA_LOSS) fails++;
    if (bad) kiln_exec_destroy(bad);
  }
  KT_CHECK(fails == 0);
  /* bit flips anywhere (the checksum catches payload flips) */
  fails = 0;
  for (size_t pos = 0; pos < n; pos += 7) {
    memcpy(copy, buf, n);
    copy[pos] ^= (unsigned char)(1u << (pos % 8));
    kiln_status_t st = kiln_exec_load_buffer(copy, n, &bad);
    if (st != KILN_ERROR_DATA_LOSS) fails++;
    if (bad) kiln_exec_destroy(bad);
  }
  KT_CHECK(fails == 0);
  /* a payload with a valid checksum but a broken node is still rejected: patch the first
   * node's op code and fix up the checksum */
  memcpy(copy, buf, n);
  copy[KFT_HEADER_BYTES_V3 + 16] = 77; /* node 0 op (after the four counts) */
  kft_fix_checksum(copy, n);
  KT_FAILS(KILN_ERROR_DATA_LOSS, kiln_exec_load_buffer(copy, n, &bad));
  KT_CHECK(bad == NULL);
  /* trailing garbage */
  unsigned char* longer = malloc(n + 4);
  memcpy(longer, buf, n);
  memset(longer + n, 0, 4);
  KT_FAILS(KILN_ERROR_DATA_LOSS, kiln_exec_load_buffer(longer, n + 4, &bad));
  /* random garbage with a valid magic */
  for (int t = 0; t < 200; t++) {
    for (size_t i = 0; i < n; i++) copy[i] = (unsigned char)(gt_rand() * 256);
    memcpy(copy, "KILNGRF", 8);
    kiln_status_t st = kiln_exec_load_buffer(copy, n, &bad);
    KT_CHECK(st == KILN_ERROR_DATA_LOSS);
    if (bad) kiln_exec_destroy(bad);
  }
  free(longer);
  free(copy);
  kiln_exec_free_buffer(buf);
  kiln_exec_destroy(e);
  free(w1);
  free(b1);
  free(w2);
}

static int64_t info_bytes(kiln_exec_t* e, int out, int i) {
  int dt, nd;
  int64_t sh[8];
  if (out) kiln_exec_output_info(e, i, &dt, &nd, sh);
  else kiln_exec_input_info(e, i, &dt, &nd, sh);
  int64_t n = 1;
  for (int k = 0; k < nd; k++) n *= sh[k];
  return n * (int64_t)kiln_dtype_size((kiln_dtype_t)dt);
}

/* structure-aware fuzzing: mutate payload bytes and repair the checksum, so the loader's own
 * validation is what stands between the file and the executor. Whatever loads must also run
 * (kernel errors are fine) without any memory error. */
KT_TEST(fuzz_with_valid_checksum) {
  float* w1 = gt_randf(160);
  float* b1 = gt_randf(16);
  float* w2 = gt_randf(64);
  kiln_graph_t* g = build(w1, b1, w2);
  kiln_exec_t* e;
  KT_OK(kiln_graph_compile(g, &e));
  kiln_graph_destroy(g);
  void* buf;
  size_t n;
  KT_OK(kiln_exec_save_buffer(e, &buf, &n));
  kiln_exec_destroy(e);
  unsigned char* copy = malloc(n);
  int loaded = 0, rejected = 0, other = 0;
  for (int t = 0; t < 1500; t++) {
    memcpy(copy, buf, n);
    int nmut = 1 + t % 3;
    for (int m = 0; m < nmut; m++) {
      /* mostly the node table (the first ~700 bytes), sometimes anywhere */
      size_t span = (t % 4) ? (n - 64 < 700 ? n - 64 : 700) : n - 64;
      size_t pos = 64 + (size_t)((gt_rand() * 0.5 + 0.5) * (double)span) % span;
      copy[pos] = (t % 5 == 0) ? (unsigned char)(gt_rand() * 256) : (unsigned char)(copy[pos] ^ (1u << (t % 8)));
    }
    kft_fix_checksum(copy, n);
    kiln_exec_t* x = NULL;
    kiln_status_t st = kiln_exec_load_buffer(copy, n, &x);
    if (st == KILN_OK && gt_stats(x).arena_bytes > (64 << 20)) {
      loaded++; /* legal but too big to run here */
      kiln_exec_destroy(x);
    } else if (st == KILN_OK) {
      loaded++;
      int ni = kiln_exec_num_inputs(x), no = kiln_exec_num_outputs(x);
      void* ins[8] = {NULL};
      void* outs[8] = {NULL};
      int ok = ni <= 8 && no <= 8;
      for (int i = 0; ok && i < ni; i++) {
        int64_t b = info_bytes(x, 0, i);
        ok = b <= (1 << 24);
        if (ok) ins[i] = calloc(1, (size_t)b + 1);
      }
      for (int i = 0; ok && i < no; i++) {
        int64_t b = info_bytes(x, 1, i);
        ok = b <= (1 << 24);
        if (ok) outs[i] = calloc(1, (size_t)b + 1);
      }
      if (ok) (void)kiln_exec_run(x, ni, ins, no, outs);
      for (int i = 0; i < 8; i++) {
        free(ins[i]);
        free(outs[i]);
      }
      kiln_exec_destroy(x);
    } else if (st == KILN_ERROR_DATA_LOSS) {
      rejected++;
      KT_CHECK(x == NULL);
    } else {
      other++;
      KT_CHECK(st == KILN_ERROR_OUT_OF_MEMORY);
    }
  }
  KT_CHECK(rejected > 100);
  KT_CHECK(loaded > 100); /* the repaired checksum is the loader's (format version 3) */
  if (getenv("KILN_TEST_DUMP"))
    fprintf(stderr, "fuzz: %d loaded, %d rejected, %d other\n", loaded, rejected, other);
  free(copy);
  kiln_exec_free_buffer(buf);
  free(w1);
  free(b1);
  free(w2);
}

KT_MAIN()
