/* SPDX-License-Identifier: Apache-2.0 */
/* test_model.c - kiln/model.h: model files with a signature and bounded dynamic dims, through
 * the public API (save, load from memory and from a mapped file, query, run, errors), and
 * hostile files (every truncation, bit flips, mutations with a repaired checksum). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "graph/graph_internal.h"
#include "kiln/kiln.h"
#include "kiln_file_test.h"
#include "kiln_test.h"
#include "test_graph_util.h"

#define F32 KILN_DTYPE_F32

/* y = relu(x @ W + b) + arange(N)[:, None] * 0 + ..., x: [n, 4]; a reshape to [n * 3] and back
 * ties an attribute to n * 3. Built at batch size n. */
static float W[12], B[3];

static kiln_graph_t* build_mlp(int64_t n) {
  kiln_graph_t* g;
  int x, w, b, mm, bias, r, flat, back;
  int64_t xs[2] = {n, 4}, ws[2] = {4, 3}, bs[1] = {3};
  kiln_graph_create(&g);
  kiln_graph_input(g, F32, 2, xs, &x);
  kiln_graph_constant(g, F32, 2, ws, W, &w);
  kiln_graph_constant(g, F32, 1, bs, B, &b);
  kiln_graph_matmul(g, x, w, &mm);
  kiln_graph_binary(g, KILN_BINARY_ADD, mm, b, 1.0, F32, &bias);
  kiln_graph_unary(g, KILN_UNARY_RELU, bias, F32, &r);
  int64_t fs[1] = {n * 3}, bk[2] = {n, 3};
  kiln_graph_reshape(g, r, 1, fs, &flat);
  kiln_graph_reshape(g, flat, 2, bk, &back);
  int pos, posf, out;
  kiln_graph_arange(g, F32, n, 0.0, 1.0, &pos); /* [n]: 0, 1, ... */
  int64_t ps[2] = {n, 1};
  kiln_graph_reshape(g, pos, 2, ps, &posf);
  kiln_graph_binary(g, KILN_BINARY_ADD, back, posf, 1.0, F32, &out);
  kiln_graph_output(g, out);
  return g;
}

static void ref_mlp(const float* x, int64_t n, float* y) {
  for (int64_t i = 0; i < n; i++)
    for (int j = 0; j < 3; j++) {
      float acc = B[j];
      for (int k = 0; k < 4; k++) acc += x[i * 4 + k] * W[k * 3 + j];
      y[i * 3 + j] = (acc > 0 ? acc : 0) + (float)i;
    }
}

/* candidate expressions: n, n * 3 */
static const int64_t EXPR_CODE[] = {KILN_EXPR_SYM, 0, KILN_EXPR_SYM, 0, KILN_EXPR_CONST, 3,
                                    KILN_EXPR_MUL};
static const int EXPR_LEN[] = {2, 5};

/* Saves the dynamic MLP (batch in [1, 8], samples 8, 1, 3, 5) into memory. */
static kiln_status_t save_mlp(void** data, size_t* size) {
  int64_t ns[4] = {8, 1, 3, 5};
  kiln_graph_t* gs[4];
  for (int k = 0; k < 4; k++) gs[k] = build_mlp(ns[k]);
  kiln_model_symbol_t sym = {"batch", 1, 8};
  const char* in_names[1] = {"x"};
  const char* out_names[1] = {"y"};
  kiln_model_desc_t d;
  memset(&d, 0, sizeof d);
  d.struct_size = sizeof d;
  d.n_graphs = 4;
  d.graphs = (const kiln_graph_t* const*)gs;
  d.n_symbols = 1;
  d.symbols = &sym;
  d.samples = ns;
  d.n_exprs = 2;
  d.expr_code = EXPR_CODE;
  d.expr_len = EXPR_LEN;
  d.input_names = in_names;
  d.output_names = out_names;
  kiln_status_t st = kiln_model_save_buffer(&d, data, size);
  for (int k = 0; k < 4; k++) kiln_graph_destroy(gs[k]);
  return st;
}

static void init_weights(void) {
  for (int i = 0; i < 12; i++) W[i] = (float)gt_rand();
  for (int i = 0; i < 3; i++) B[i] = (float)gt_rand();
}

static int run_and_check(kiln_model_t* m, int64_t n) {
  float x[8 * 4], y[8 * 3];
  for (int i = 0; i < n * 4; i++) x[i] = (float)gt_rand();
  ref_mlp(x, n, y);
  int64_t xs[2] = {n, 4};
  kiln_tensor_t in, out;
  kiln_tensor_init_contiguous(&in, x, F32, 2, xs);
  memset(&out, 0, sizeof out);
  if (kiln_model_run(m, 1, &in, 1, &out) != KILN_OK) return 0;
  int ok = out.ndim == 2 && out.shape[0] == n && out.shape[1] == 3 && out.dtype == F32;
  for (int i = 0; ok && i < n * 3; i++) ok = fabsf(((float*)out.data)[i] - y[i]) < 1e-5f;
  kiln_model_free_output(m, out.data);
  return ok;
}

KT_TEST(dynamic_batch_roundtrip) {
  setenv("KILN_DEVICES", "cpu,ref", 1); /* before the default registry is built: kiln:1 exists */
  init_weights();
  void* data;
  size_t size;
  KT_OK(save_mlp(&data, &size));
  KT_CHECK(size % 64 == 0);
  kiln_model_t* m;
  KT_OK(kiln_model_load_buffer(data, size, 0, &m));
  KT_CHECK(kiln_model_num_inputs(m) == 1 && kiln_model_num_outputs(m) == 1);
  kiln_model_io_t io;
  KT_OK(kiln_model_input_info(m, 0, &io));
  KT_CHECK(strcmp(io.name, "x") == 0 && io.dtype == F32 && io.ndim == 2);
  KT_CHECK(io.shape[0] == 8 && io.min[0] == 1 && io.shape[1] == 4 && io.min[1] == 4);
  KT_CHECK(io.dynamic_mask == 1u && io.dim_names[0] && strcmp(io.dim_names[0], "batch") == 0);
  KT_OK(kiln_model_output_info(m, 0, &io));
  KT_CHECK(strcmp(io.name, "y") == 0 && io.dynamic_mask == 1u && io.shape[0] == 8 && io.min[0] == 1);
  const char* sname;
  int64_t lo, hi;
  KT_OK(kiln_model_symbol(m, 0, &sname, &lo, &hi));
  KT_CHECK(strcmp(sname, "batch") == 0 && lo == 1 && hi == 8);
  KT_FAILS(KILN_ERROR_OUT_OF_RANGE, kiln_model_symbol(m, 1, &sname, &lo, &hi));
  KT_FAILS(KILN_ERROR_OUT_OF_RANGE, kiln_model_input_info(m, 1, &io));
  kiln_model_info_t info;
  KT_OK(kiln_model_get_info(m, &info));
  KT_CHECK(info.format_version == 3 && info.n_symbols == 1 && info.weights_in_place == 1);
  KT_CHECK(info.file_bytes == size && info.weight_bytes >= 64 && info.n_specializations == 1);
  /* every size in range, including ones no sample used, twice (the second from the cache) */
  for (int rep = 0; rep < 2; rep++)
    for (int64_t n = 1; n <= 8; n++) KT_CHECK(run_and_check(m, n));
  KT_OK(kiln_model_get_info(m, &info));
  KT_CHECK(info.n_specializations == 8);
  kiln_model_destroy(m);

  /* a mapped file, and an unaligned buffer (copied) */
  char path[] = "/tmp/kiln_test_model_XXXXXX";
  int fd = mkstemp(path);
  KT_CHECK(fd >= 0);
  KT_CHECK(write(fd, data, size) == (ssize_t)size);
  close(fd);
  KT_OK(kiln_model_load(path, 0, &m));
  KT_OK(kiln_model_get_info(m, &info));
  KT_CHECK(info.weights_in_place == 1);
  KT_CHECK(run_and_check(m, 6));
  kiln_model_destroy(m);
  KT_OK(kiln_model_load(path, 1, &m)); /* the reference device */
  KT_CHECK(run_and_check(m, 2));
  kiln_model_destroy(m);
  KT_FAILS(KILN_ERROR_NOT_FOUND, kiln_model_load(path, 99, &m));
  KT_CHECK(m == NULL);
  unlink(path);
  KT_FAILS(KILN_ERROR_NOT_FOUND, kiln_model_load(path, 0, &m));
  unsigned char* odd = malloc(size + 1);
  memcpy(odd + 1, data, size);
  KT_OK(kiln_model_load_buffer(odd + 1, size, 0, &m));
  KT_OK(kiln_model_get_info(m, &info));
  KT_CHECK(info.weights_in_place == 0);
  KT_CHECK(run_and_check(m, 3));
  kiln_model_destroy(m);
  free(odd);
  /* kiln_exec_load reads the same file at the bound */
  kiln_exec_t* e;
  KT_OK(kiln_exec_load_buffer(data, size, &e));
  int dt, nd;
  int64_t sh[8];
  KT_OK(kiln_exec_input_info(e, 0, &dt, &nd, sh));
  KT_CHECK(nd == 2 && sh[0] == 8);
  kiln_exec_destroy(e);
  kiln_exec_free_buffer(data);
}

KT_TEST(run_errors) {
  init_weights();
  void* data;
  size_t size;
  KT_OK(save_mlp(&data, &size));
  kiln_model_t* m;
  KT_OK(kiln_model_load_buffer(data, size, 0, &m));
  float x[9 * 4] = {0}, y[9 * 3];
  kiln_tensor_t in, out;
  int64_t xs[2] = {9, 4};
  memset(&out, 0, sizeof out);
  kiln_tensor_init_contiguous(&in, x, F32, 2, xs); /* above the bound */
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_model_run(m, 1, &in, 1, &out));
  KT_CHECK(strstr(kiln_status_message(), "batch") != NULL && out.data == NULL);
  xs[0] = 0; /* below */
  kiln_tensor_init_contiguous(&in, x, F32, 2, xs);
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_model_run(m, 1, &in, 1, &out));
  xs[0] = 2;
  xs[1] = 5; /* a static dim */
  kiln_tensor_init_contiguous(&in, x, F32, 2, xs);
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_model_run(m, 1, &in, 1, &out));
  xs[1] = 4;
  kiln_tensor_init_contiguous(&in, x, KILN_DTYPE_F16, 2, xs); /* dtype */
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_model_run(m, 1, &in, 1, &out));
  kiln_tensor_init_contiguous(&in, x, F32, 1, xs); /* rank */
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_model_run(m, 1, &in, 1, &out));
  kiln_tensor_init_contiguous(&in, NULL, F32, 2, xs); /* NULL data */
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_model_run(m, 1, &in, 1, &out));
  kiln_tensor_init_contiguous(&in, x, F32, 2, xs);
  in.strides[0] = 1; /* not contiguous */
  in.strides[1] = 2;
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_model_run(m, 1, &in, 1, &out));
  kiln_tensor_init_contiguous(&in, x, F32, 2, xs);
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_model_run(m, 2, &in, 1, &out));
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_model_run(m, 1, &in, 0, NULL));
  /* a caller's output buffer of the wrong shape, then the right one */
  int64_t ys[2] = {3, 3};
  kiln_tensor_init_contiguous(&out, y, F32, 2, ys);
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_model_run(m, 1, &in, 1, &out));
  ys[0] = 2;
  kiln_tensor_init_contiguous(&out, y, F32, 2, ys);
  KT_OK(kiln_model_run(m, 1, &in, 1, &out));
  KT_CHECK(out.data == y);
  /* output shapes without data */
  kiln_tensor_t shp;
  kiln_tensor_init_contiguous(&in, NULL, F32, 2, xs);
  KT_OK(kiln_model_output_shapes(m, 1, &in, 1, &shp));
  KT_CHECK(shp.data == NULL && shp.ndim == 2 && shp.shape[0] == 2 && shp.shape[1] == 3);
  kiln_model_destroy(m);
  kiln_model_destroy(NULL);
  kiln_exec_free_buffer(data);
}

KT_TEST(save_errors) {
  init_weights();
  kiln_graph_t* gs[2] = {build_mlp(4), build_mlp(2)};
  int64_t ns[2] = {4, 2};
  kiln_model_symbol_t sym = {"batch", 1, 8};
  kiln_model_desc_t d;
  memset(&d, 0, sizeof d);
  d.struct_size = sizeof d;
  d.n_graphs = 2;
  d.graphs = (const kiln_graph_t* const*)gs;
  d.n_symbols = 1;
  d.symbols = &sym;
  d.samples = ns;
  d.n_exprs = 1; /* only n: the n * 3 reshape cannot be expressed */
  d.expr_code = EXPR_CODE;
  d.expr_len = EXPR_LEN;
  void* data;
  size_t size;
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_model_save_buffer(&d, &data, &size));
  KT_CHECK(strstr(kiln_status_message(), "reshape") != NULL);
  d.n_exprs = 2;
  int64_t bad_samples[2] = {4, 9}; /* outside the bounds */
  d.samples = bad_samples;
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_model_save_buffer(&d, &data, &size));
  d.samples = ns;
  d.n_graphs = 1; /* symbols need samples */
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_model_save_buffer(&d, &data, &size));
  d.n_graphs = 2;
  int64_t bad_expr[] = {KILN_EXPR_SYM, 0, KILN_EXPR_MUL};
  int bad_len[] = {3};
  d.expr_code = bad_expr;
  d.expr_len = bad_len;
  d.n_exprs = 1;
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_model_save_buffer(&d, &data, &size));
  d.expr_code = EXPR_CODE;
  d.expr_len = EXPR_LEN;
  d.n_exprs = 2;
  kiln_model_symbol_t bad_sym = {"", 1, 8};
  d.symbols = &bad_sym;
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_model_save_buffer(&d, &data, &size));
  d.symbols = &sym;
  /* a different program */
  kiln_graph_t* other;
  int x, r;
  int64_t xs[2] = {2, 4};
  kiln_graph_create(&other);
  kiln_graph_input(other, F32, 2, xs, &x);
  kiln_graph_unary(other, KILN_UNARY_EXP, x, F32, &r);
  kiln_graph_output(other, r);
  kiln_graph_t* mixed[2] = {gs[0], other};
  d.graphs = (const kiln_graph_t* const*)mixed;
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_model_save_buffer(&d, &data, &size));
  d.graphs = (const kiln_graph_t* const*)gs;
  d.struct_size = 8;
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_model_save_buffer(&d, &data, &size));
  d.struct_size = sizeof d;
  KT_OK(kiln_model_save_buffer(&d, &data, &size));
  kiln_exec_free_buffer(data);
  kiln_graph_destroy(other);
  kiln_graph_destroy(gs[0]);
  kiln_graph_destroy(gs[1]);
}

KT_TEST(expressions) {
  int64_t s[2] = {7, -3}, v;
  int64_t fd[] = {KILN_EXPR_SYM, 0, KILN_EXPR_CONST, -2, KILN_EXPR_FLOORDIV}; /* 7 // -2 = -4 */
  KT_OK(gx_expr_eval(fd, 5, s, 2, &v));
  KT_CHECK(v == -4);
  int64_t md[] = {KILN_EXPR_SYM, 1, KILN_EXPR_CONST, 2, KILN_EXPR_MOD}; /* -3 % 2 = 1 */
  KT_OK(gx_expr_eval(md, 5, s, 2, &v));
  KT_CHECK(v == 1);
  int64_t mm[] = {KILN_EXPR_SYM, 0, KILN_EXPR_SYM, 1, KILN_EXPR_MIN, KILN_EXPR_CONST, 5,
                  KILN_EXPR_MAX};
  KT_OK(gx_expr_eval(mm, 8, s, 2, &v));
  KT_CHECK(v == 5);
  int64_t dz[] = {KILN_EXPR_SYM, 0, KILN_EXPR_CONST, 0, KILN_EXPR_FLOORDIV};
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, gx_expr_eval(dz, 5, s, 2, &v));
  int64_t ov[] = {KILN_EXPR_CONST, INT64_MAX, KILN_EXPR_CONST, 2, KILN_EXPR_MUL};
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, gx_expr_eval(ov, 5, s, 2, &v));
  int64_t badsym[] = {KILN_EXPR_SYM, 2};
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, gx_expr_eval(badsym, 2, s, 2, &v));
  int64_t deep[KILN_EXPR_MAX_TOKENS + 2];
  for (int i = 0; i < KILN_EXPR_MAX_TOKENS + 2; i += 2) {
    deep[i] = KILN_EXPR_CONST;
    deep[i + 1] = 1;
  }
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, gx_expr_eval(deep, KILN_EXPR_MAX_TOKENS + 2, s, 2, &v));
}

/* Loads and, when it loads, runs on zero inputs at the smallest sizes; any status is fine but a
 * crash (ASan) or a non-error code with a NULL model is not. */
static kiln_status_t hostile(const unsigned char* p, size_t n) {
  kiln_model_t* m = (kiln_model_t*)1;
  kiln_status_t st = kiln_model_load_buffer(p, n, 0, &m);
  if (st != KILN_OK) return m == NULL ? st : KILN_ERROR_INTERNAL;
  int ni = kiln_model_num_inputs(m);
  kiln_tensor_t ins[8], outs[8];
  void* bufs[8] = {NULL};
  int ok = ni <= 8 && kiln_model_num_outputs(m) <= 8;
  for (int i = 0; ok && i < ni; i++) {
    kiln_model_io_t io;
    kiln_model_input_info(m, i, &io);
    int64_t nb = (int64_t)kiln_dtype_size((kiln_dtype_t)io.dtype);
    for (int d = 0; d < io.ndim; d++) nb *= io.min[d];
    ok = nb <= (1 << 20);
    if (ok) bufs[i] = calloc(1, (size_t)nb + 8);
    kiln_tensor_init_contiguous(&ins[i], bufs[i], (kiln_dtype_t)io.dtype, io.ndim, io.min);
  }
  memset(outs, 0, sizeof outs);
  if (ok && kiln_model_run(m, ni, ins, kiln_model_num_outputs(m), outs) == KILN_OK)
    for (int k = 0; k < kiln_model_num_outputs(m); k++) kiln_model_free_output(m, outs[k].data);
  for (int i = 0; i < 8; i++) free(bufs[i]);
  kiln_model_destroy(m);
  return KILN_OK;
}

KT_TEST(hostile_files) {
  init_weights();
  void* data;
  size_t size;
  KT_OK(save_mlp(&data, &size));
  unsigned char* copy = kiln_allocator_alloc(NULL, size + 64, 64);
  /* every truncation */
  for (size_t len = 0; len < size; len++) {
    memcpy(copy, data, len);
    KT_CHECK(hostile(copy, len) == KILN_ERROR_DATA_LOSS);
  }
  /* bit flips anywhere */
  for (size_t pos = 0; pos < size; pos += 3) {
    memcpy(copy, data, size);
    copy[pos] ^= (unsigned char)(1u << (pos % 8));
    KT_CHECK(hostile(copy, size) == KILN_ERROR_DATA_LOSS);
  }
  /* mutations behind a repaired checksum reach the parser and the builder */
  int loaded = 0, rejected = 0;
  for (int t = 0; t < 3000; t++) {
    memcpy(copy, data, size);
    for (int k = 0; k < 1 + t % 4; k++) {
      size_t pos = 32 + (size_t)((gt_rand() * 0.5 + 0.5) * (double)(size - 32)) % (size - 32);
      copy[pos] = (t % 3 == 0) ? (unsigned char)(gt_rand() * 256) : (unsigned char)(copy[pos] ^ (1u << (t % 8)));
    }
    kft_repair(copy, size);
    kiln_status_t st = hostile(copy, size);
    KT_CHECK(st != KILN_ERROR_INTERNAL);
    if (st == KILN_OK) loaded++;
    else rejected++;
  }
  KT_CHECK(loaded > 100 && rejected > 100);
  if (getenv("KILN_TEST_DUMP")) fprintf(stderr, "hostile: %d loaded, %d rejected\n", loaded, rejected);
  /* huge counts with a valid checksum: no allocation beyond the file */
  memcpy(copy, data, size);
  for (int k = 0; k < 4; k++) copy[64 + k] = 0xff; /* n_nodes */
  kft_repair(copy, size);
  KT_FAILS(KILN_ERROR_DATA_LOSS, kiln_model_load_buffer(copy, size, 0, &(kiln_model_t*){NULL}));
  kiln_allocator_free(NULL, copy);
  kiln_exec_free_buffer(data);
}

KT_MAIN()
