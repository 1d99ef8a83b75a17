/* SPDX-License-Identifier: Apache-2.0 */
/* gen_corpus.c - writes the fuzz seed corpora from real programs.
 *
 *   gen_corpus <dir>   writes (creating the folders) <dir>/fuzz_builder/<name>.bin (the
 *                      program in fuzz_builder's byte encoding) and <dir>/fuzz_load/<name>.kiln
 *                      (it built, compiled, saved)
 *
 * The programs are the kind torch_kiln lowers: an MLP, a transformer block and its backward, a
 * CNN with a loss, an embedding language model, reductions, indexing, mixed dtypes. Each is
 * written with the encoder below, decoded again with fb_decode (every builder call must be
 * accepted), compiled and exercised like the harnesses do before it is written.
 * Regenerate with: build/gen_corpus tests/fuzz/corpus
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz_builder_ops.h"
#include "fuzz_common.h"
#include "kiln/dtype.h"
#include "kiln/kernels/elementwise.h"
#include "kiln/kernels/index.h"
#include "kiln/kernels/nn.h"
#include "kiln/kernels/reduce.h"

enum { F32 = KILN_DTYPE_F32, F16 = KILN_DTYPE_F16, BF16 = KILN_DTYPE_BF16, F64 = KILN_DTYPE_F64,
       I32 = KILN_DTYPE_I32, I64 = KILN_DTYPE_I64, BOOL = KILN_DTYPE_BOOL, U8 = KILN_DTYPE_U8 };
#define NONE FB_NONE

typedef struct {
  uint8_t b[4096];
  size_t n;
  int nv;
} prog_t;

static void B(prog_t* p, int x) {
  if (p->n >= sizeof p->b) {
    fprintf(stderr, "gen_corpus: program too long\n");
    exit(1);
  }
  p->b[p->n++] = (uint8_t)x;
}
static void F(prog_t* p, double v) { B(p, (int8_t)(v * 4.0)); }
static void begin(prog_t* p, int flags) {
  p->n = 0;
  p->nv = 0;
  B(p, flags & 0xff);
  B(p, flags >> 8);
}
/* Records that the last call appended k values; returns the first one's index. */
static int made(prog_t* p, int k) {
  p->nv += k;
  return p->nv - k;
}
static void shape(prog_t* p, int nd, va_list ap) {
  B(p, nd);
  for (int i = 0; i < nd; i++) {
    int d = va_arg(ap, int);
    B(p, d < 0 ? NONE : d);
  }
}
static int input(prog_t* p, int dtype, int nd, ...) {
  va_list ap;
  va_start(ap, nd);
  B(p, FB_INPUT);
  B(p, dtype);
  shape(p, nd, ap);
  va_end(ap);
  return made(p, 1);
}
/* fill: 0x00 | k random in [-1, 1) / ints in [0, k]; 0x40 | k all k; 0x80 arange */
static int constant(prog_t* p, int dtype, int fill, int nd, ...) {
  va_list ap;
  va_start(ap, nd);
  B(p, FB_CONSTANT);
  B(p, dtype);
  shape(p, nd, ap);
  B(p, fill);
  va_end(ap);
  return made(p, 1);
}
static int scalar(prog_t* p, double v, int dtype) {
  B(p, FB_SCALAR);
  F(p, v);
  B(p, dtype);
  return made(p, 1);
}
static int unary(prog_t* p, int op, int x, int dtype) {
  B(p, FB_UNARY);
  B(p, op);
  B(p, x);
  B(p, dtype);
  return made(p, 1);
}
static int binary(prog_t* p, int op, int a, int b, int dtype) {
  B(p, FB_BINARY);
  B(p, op);
  B(p, a);
  B(p, b);
  F(p, 1.0);
  B(p, dtype);
  return made(p, 1);
}
static int ternary(prog_t* p, int op, int a, int b, int c, double sc, int dtype) {
  B(p, FB_TERNARY);
  B(p, op);
  B(p, a);
  B(p, b);
  B(p, c);
  F(p, sc);
  B(p, dtype);
  return made(p, 1);
}
static int two(prog_t* p, int fb, int a, int b) {
  B(p, fb);
  B(p, a);
  B(p, b);
  return made(p, 1);
}
static int cast(prog_t* p, int x, int dtype) { return two(p, FB_CAST, x, dtype); }
static int matmul(prog_t* p, int a, int b) { return two(p, FB_MATMUL, a, b); }
static int addmm(prog_t* p, int bias, int a, int b) {
  B(p, FB_ADDMM);
  B(p, bias);
  B(p, a);
  B(p, b);
  F(p, 1.0);
  F(p, 1.0);
  return made(p, 1);
}
static int reshape(prog_t* p, int x, int nd, ...) {
  va_list ap;
  va_start(ap, nd);
  B(p, FB_RESHAPE);
  B(p, x);
  shape(p, nd, ap);
  va_end(ap);
  return made(p, 1);
}
static int expand(prog_t* p, int x, int nd, ...) {
  va_list ap;
  va_start(ap, nd);
  B(p, FB_EXPAND);
  B(p, x);
  shape(p, nd, ap);
  va_end(ap);
  return made(p, 1);
}
static int permute(prog_t* p, int x, int nd, ...) {
  va_list ap;
  va_start(ap, nd);
  B(p, FB_PERMUTE);
  B(p, x);
  for (int i = 0; i < nd; i++) B(p, va_arg(ap, int));
  va_end(ap);
  return made(p, 1);
}
static int slice(prog_t* p, int x, int dim, int start, int end, int step) {
  B(p, FB_SLICE);
  B(p, x);
  B(p, dim);
  B(p, start);
  B(p, end);
  B(p, step);
  return made(p, 1);
}
static int reduce(prog_t* p, int op, int x, int mask, int keepdim, double param, int dtype) {
  B(p, FB_REDUCE);
  B(p, op);
  B(p, x);
  B(p, mask);
  B(p, keepdim);
  F(p, param);
  B(p, dtype);
  return made(p, 1);
}
static int softmax(prog_t* p, int x, int dim, int lg) {
  B(p, FB_SOFTMAX);
  B(p, x);
  B(p, dim);
  B(p, lg);
  B(p, NONE);
  return made(p, 1);
}
static int layer_norm(prog_t* p, int x, int w, int b, int nn) {
  B(p, FB_LAYER_NORM);
  B(p, x);
  B(p, w);
  B(p, b);
  B(p, nn);
  F(p, 0.25); /* eps 0.25 / 4 / 64 ~ 1e-3 */
  return made(p, 3);
}
static int rms_norm(prog_t* p, int x, int w, int nn) {
  B(p, FB_RMS_NORM);
  B(p, x);
  B(p, w);
  B(p, nn);
  F(p, -1.0); /* torch's default eps */
  return made(p, 2);
}
static int nll_loss(prog_t* p, int lp, int t, int reduction) {
  B(p, FB_NLL_LOSS);
  B(p, lp);
  B(p, t);
  B(p, NONE);
  B(p, reduction);
  B(p, (int8_t)-100);
  return made(p, 2);
}
static void output(prog_t* p, int v) {
  B(p, FB_OUTPUT);
  B(p, v);
}

/* ---- the programs ------------------------------------------------------------------------
 * A value used by a record of raw B() calls is made before the record starts. */

/* y = softmax(gelu(x @ W1 + b1) @ W2 + 0.5), and the hidden activation */
static void mlp(prog_t* p, int flags) {
  begin(p, flags);
  int x = input(p, F32, 2, 6, 10);
  int w1 = constant(p, F32, 0, 2, 10, 16), b1 = constant(p, F32, 1, 1, 16);
  int w2 = constant(p, F32, 2, 2, 16, 4);
  int h = addmm(p, b1, x, w1);
  int a = unary(p, KILN_UNARY_GELU, h, F32);
  int y = matmul(p, a, w2);
  int z = binary(p, KILN_BINARY_ADD, y, scalar(p, 0.5, F32), F32);
  output(p, softmax(p, z, 1, 0));
  output(p, a);
}

/* pre-norm attention block: x + Wo(sdpa(q, k, v)), then an MLP with SiLU and a residual */
static void transformer_block(prog_t* p) {
  begin(p, 0);
  int x = input(p, F32, 3, 2, 8, 16);
  int lw = constant(p, F32, 0x41, 1, 16), lb = constant(p, F32, 0x40, 1, 16);
  int h = layer_norm(p, x, lw, lb, 1);
  int wq = constant(p, F32, 3, 2, 16, 16), wk = constant(p, F32, 4, 2, 16, 16);
  int wv = constant(p, F32, 5, 2, 16, 16), wo = constant(p, F32, 6, 2, 16, 16);
  int heads[3], ws[3] = {wq, wk, wv};
  for (int i = 0; i < 3; i++)
    heads[i] = permute(p, reshape(p, matmul(p, h, ws[i]), 4, 2, 8, 2, 8), 4, 0, 2, 1, 3);
  B(p, FB_SDPA);
  B(p, heads[0]);
  B(p, heads[1]);
  B(p, heads[2]);
  B(p, NONE);
  B(p, 1); /* causal */
  F(p, 0);
  int att = made(p, 2);
  int ctx = reshape(p, permute(p, att, 4, 0, 2, 1, 3), 3, 2, 8, 16);
  int r1 = binary(p, KILN_BINARY_ADD, x, matmul(p, ctx, wo), F32);
  int w1 = constant(p, F32, 7, 2, 16, 24), w2 = constant(p, F32, 8, 2, 24, 16);
  int g = unary(p, KILN_UNARY_SILU, matmul(p, rms_norm(p, r1, NONE, 1), w1), F32);
  output(p, binary(p, KILN_BINARY_ADD, r1, matmul(p, g, w2), F32));
}

/* a CNN classifier with its loss: conv-relu-pool, grouped conv, global pool, linear, NLL */
static void cnn(prog_t* p) {
  begin(p, 0);
  int x = input(p, F32, 4, 2, 3, 12, 12);
  int w1 = constant(p, F32, 9, 4, 8, 3, 3, 3), b1 = constant(p, F32, 10, 1, 8);
  B(p, FB_CONV2D);
  B(p, x);
  B(p, w1);
  B(p, b1);
  B(p, 1), B(p, 1), B(p, 1), B(p, 1), B(p, 1), B(p, 1), B(p, 1); /* stride, pad, dil, groups */
  int c1 = unary(p, KILN_UNARY_RELU, made(p, 1), F32);
  B(p, FB_MAX_POOL);
  B(p, c1);
  B(p, 2), B(p, 2), B(p, 0), B(p, 0), B(p, 0), B(p, 0), B(p, 1), B(p, 1), B(p, 0), B(p, 0);
  int pooled = made(p, 1);
  int w2 = constant(p, F32, 11, 4, 8, 4, 3, 3);
  B(p, FB_CONV2D);
  B(p, pooled);
  B(p, w2);
  B(p, NONE);
  B(p, 1), B(p, 1), B(p, 0), B(p, 0), B(p, 1), B(p, 1), B(p, 2);
  int c2 = unary(p, KILN_UNARY_HARDSWISH, made(p, 1), F32);
  B(p, FB_ADAPTIVE_POOL);
  B(p, c2);
  B(p, 1), B(p, 1);
  int feat = reshape(p, made(p, 1), 2, 2, -1);
  int wl = constant(p, F32, 12, 2, 8, 10), bl = constant(p, F32, 0x40, 1, 10);
  int lp = softmax(p, addmm(p, bl, feat, wl), 1, 1);
  int t = input(p, I64, 1, 2);
  output(p, nll_loss(p, lp, t, KILN_REDUCTION_MEAN));
  output(p, lp);
}

/* an embedding language model step: embed, RMS norm, project, log_softmax, token NLL */
static void embedding_lm(prog_t* p) {
  begin(p, 0);
  int idx = input(p, I64, 2, 2, 6);
  int emb = constant(p, F32, 13, 2, 16, 8);
  int e = two(p, FB_EMBEDDING, emb, idx);
  int w = constant(p, F32, 0x41, 1, 8);
  int h = rms_norm(p, e, w, 1);
  int logits = matmul(p, h, constant(p, F32, 14, 2, 8, 16));
  int lp = reshape(p, softmax(p, logits, -1, 1), 2, 12, 16);
  int t = input(p, I64, 1, 12);
  output(p, nll_loss(p, lp, t, KILN_REDUCTION_MEAN));
}

/* the backward of y = tanh(x @ w + b): grad_x, grad_w, grad_b */
static void mlp_backward(prog_t* p) {
  begin(p, 0);
  int x = input(p, F32, 2, 4, 8), w = input(p, F32, 2, 8, 6), b = input(p, F32, 1, 6);
  int y = unary(p, KILN_UNARY_TANH, addmm(p, b, x, w), F32);
  int gy = input(p, F32, 2, 4, 6);
  int gh = binary(p, KILN_BINARY_TANH_BACKWARD, gy, y, F32);
  output(p, matmul(p, permute(p, x, 2, 1, 0), gh));
  output(p, matmul(p, gh, permute(p, w, 2, 1, 0)));
  output(p, reduce(p, KILN_REDUCE_SUM, gh, 1, 0, 0, F32));
  output(p, y);
}

/* the backwards of a transformer's pieces: layer norm, softmax, attention, RMS norm */
static void transformer_backward(prog_t* p) {
  begin(p, 0);
  int x = input(p, F32, 3, 2, 4, 8), go = input(p, F32, 3, 2, 4, 8);
  int w = constant(p, F32, 0x41, 1, 8), b = constant(p, F32, 15, 1, 8);
  int ln = layer_norm(p, x, w, b, 1);
  B(p, FB_LAYER_NORM_BW);
  B(p, go), B(p, x), B(p, ln + 1), B(p, ln + 2), B(p, w), B(p, 1), B(p, 7);
  int lnb = made(p, 3);
  int s = softmax(p, x, -1, 0);
  B(p, FB_SOFTMAX_BW);
  B(p, go), B(p, s), B(p, (int8_t)-1), B(p, 0), B(p, NONE);
  int sb = made(p, 1);
  int q = reshape(p, x, 4, 2, 1, 4, 8), g4 = reshape(p, go, 4, 2, 1, 4, 8);
  B(p, FB_SDPA);
  B(p, q), B(p, q), B(p, q), B(p, NONE), B(p, 0);
  F(p, 0);
  int at = made(p, 2);
  B(p, FB_SDPA_BW);
  B(p, g4), B(p, q), B(p, q), B(p, q), B(p, at), B(p, at + 1), B(p, NONE), B(p, 0);
  F(p, 0);
  B(p, 7);
  int ab = made(p, 3);
  int rn = rms_norm(p, x, w, 1);
  B(p, FB_RMS_NORM_BW);
  B(p, go), B(p, x), B(p, rn + 1), B(p, w), B(p, 1), B(p, 3);
  int rb = made(p, 2);
  output(p, lnb), output(p, lnb + 1), output(p, lnb + 2), output(p, sb);
  output(p, ab), output(p, ab + 2), output(p, rb), output(p, rb + 1);
}

/* reductions and scans over a [3, 5, 7] tensor */
static void reductions(prog_t* p) {
  begin(p, 0);
  int x = input(p, F32, 3, 3, 5, 7);
  output(p, reduce(p, KILN_REDUCE_VAR, x, 4, 0, 1, F32));
  output(p, reduce(p, KILN_REDUCE_AMAX, x, 3, 1, 0, F32));
  B(p, FB_REDUCE_INDEX);
  B(p, KILN_REDUCE_INDEX_MAX), B(p, x), B(p, 1), B(p, 0);
  int ri = made(p, 2);
  output(p, ri), output(p, ri + 1);
  B(p, FB_SCAN);
  B(p, 0), B(p, x), B(p, 2), B(p, F32);
  output(p, made(p, 1));
  output(p, reduce(p, KILN_REDUCE_LOGSUMEXP, x, 4, 0, 0, F32));
  output(p, reduce(p, KILN_REDUCE_NORM, x, 0, 0, 2, F32));
  int pos = binary(p, KILN_BINARY_GT, x, scalar(p, 0, F32), BOOL);
  output(p, reduce(p, KILN_REDUCE_ANY, pos, 6, 0, 0, BOOL));
  int pos64 = cast(p, pos, I64);
  B(p, FB_SCAN);
  B(p, 1), B(p, pos64), B(p, 1), B(p, I64);
  output(p, made(p, 1));
  output(p, reduce(p, KILN_REDUCE_MEAN, unary(p, KILN_UNARY_SQUARE, x, F32), 6, 1, 0, F32));
}

/* indexing: gather, index_select, scatter_add, index, index_put, cat, slices, where */
static void indexing(prog_t* p) {
  begin(p, 0);
  int x = input(p, F32, 2, 4, 6), idx = input(p, I64, 2, 4, 6), idx1 = input(p, I64, 1, 3);
  B(p, FB_GATHER);
  B(p, x), B(p, 1), B(p, idx);
  int ga = made(p, 1);
  B(p, FB_INDEX_SELECT);
  B(p, x), B(p, 0), B(p, idx1);
  output(p, made(p, 1));
  B(p, FB_SCATTER);
  B(p, x), B(p, 0), B(p, idx), B(p, x);
  F(p, 0);
  B(p, KILN_SCATTER_ADD), B(p, 1);
  output(p, made(p, 1));
  B(p, FB_INDEX);
  B(p, x), B(p, 1), B(p, idx1);
  output(p, made(p, 1));
  int vals = constant(p, F32, 0x80, 1, 6);
  B(p, FB_INDEX_PUT);
  B(p, x), B(p, 1), B(p, idx1), B(p, vals), B(p, 1);
  output(p, made(p, 1));
  B(p, FB_CAT);
  B(p, 1), B(p, x), B(p, ga), B(p, 0);
  output(p, made(p, 1));
  output(p, slice(p, x, 1, 1, 5, 2));
  B(p, FB_SELECT);
  B(p, x), B(p, 0), B(p, (int8_t)-1);
  int row = made(p, 1);
  output(p, binary(p, KILN_BINARY_MUL, expand(p, reshape(p, row, 2, 1, 6), 2, 4, 6), x, F32));
  int cond = binary(p, KILN_BINARY_GT, x, scalar(p, 0, F32), BOOL), zero = scalar(p, 0, F32);
  B(p, FB_WHERE);
  B(p, cond), B(p, x), B(p, zero);
  output(p, made(p, 1));
}

/* mixed dtypes: f16 / bf16 GEMMs, f64 math, integer matmul and bit ops, bool logic */
static void dtypes(prog_t* p) {
  begin(p, 0);
  int a = input(p, F16, 2, 4, 8), b = input(p, F16, 2, 8, 4);
  output(p, cast(p, matmul(p, a, b), F32));
  int c = input(p, BF16, 2, 4, 4);
  output(p, unary(p, KILN_UNARY_SIGMOID, binary(p, KILN_BINARY_ADD, c, c, BF16), BF16));
  int d = input(p, F64, 1, 9);
  output(p, unary(p, KILN_UNARY_EXP, d, F64));
  int i = input(p, I32, 2, 3, 4), j = input(p, I32, 2, 4, 5);
  int m = matmul(p, i, j);
  output(p, binary(p, KILN_BINARY_BITWISE_AND, m, constant(p, I32, 7, 2, 3, 5), I32));
  int u = input(p, U8, 1, 6);
  int l = binary(p, KILN_BINARY_LOGICAL_XOR, u, cast(p, u, BOOL), BOOL);
  output(p, l);
  output(p, ternary(p, KILN_TERNARY_ADDCMUL, d, d, d, 0.5, F64));
  output(p, ternary(p, KILN_TERNARY_CLAMP_TENSOR, c, NONE, c, 0, BF16));
  B(p, FB_UNARY_EX);
  B(p, KILN_UNARY_POW_SCALAR), B(p, d);
  F(p, 2), F(p, 0), F(p, 0), F(p, 0), F(p, 0), F(p, 0);
  B(p, 0), B(p, F64);
  output(p, made(p, 1));
}

/* CNN backwards: convolution, max / avg / adaptive pooling */
static void cnn_backward(prog_t* p) {
  begin(p, 0);
  int x = input(p, F32, 4, 1, 2, 6, 6), w = input(p, F32, 4, 3, 2, 3, 3);
  int go = input(p, F32, 4, 1, 3, 6, 6);
  B(p, FB_CONV2D_BW);
  B(p, go), B(p, x), B(p, w);
  B(p, 1), B(p, 1), B(p, 1), B(p, 1), B(p, 1), B(p, 1), B(p, 1), B(p, 7);
  int cb = made(p, 3);
  output(p, cb), output(p, cb + 1), output(p, cb + 2);
  B(p, FB_MAX_POOL);
  B(p, x);
  B(p, 2), B(p, 2), B(p, 0), B(p, 0), B(p, 0), B(p, 0), B(p, 1), B(p, 1), B(p, 0), B(p, 1);
  int mp = made(p, 2);
  int gp = input(p, F32, 4, 1, 2, 3, 3);
  B(p, FB_MAX_POOL_BW);
  B(p, gp), B(p, mp + 1), B(p, 6), B(p, 6);
  output(p, made(p, 1));
  B(p, FB_AVG_POOL);
  B(p, x);
  B(p, 3), B(p, 3), B(p, 1), B(p, 1), B(p, 1), B(p, 1), B(p, 0), B(p, 1), B(p, 0);
  output(p, made(p, 1));
  int ga = input(p, F32, 4, 1, 2, 6, 6);
  B(p, FB_AVG_POOL_BW);
  B(p, ga), B(p, 6), B(p, 6);
  B(p, 3), B(p, 3), B(p, 1), B(p, 1), B(p, 1), B(p, 1), B(p, 0), B(p, 1), B(p, 0);
  output(p, made(p, 1));
  int gd = input(p, F32, 4, 1, 2, 2, 3);
  B(p, FB_ADAPTIVE_POOL_BW);
  B(p, gd), B(p, 6), B(p, 6);
  output(p, made(p, 1));
}

/* embedding and NLL backwards, attention with a boolean mask and grouped KV heads */
static void losses_attention(prog_t* p) {
  begin(p, 0);
  int idx = input(p, I64, 1, 5), go = input(p, F32, 2, 5, 4);
  B(p, FB_EMBEDDING_BW);
  B(p, go), B(p, idx), B(p, 10), B(p, (int8_t)-1), B(p, 0);
  output(p, made(p, 1));
  int lp = softmax(p, input(p, F32, 2, 5, 7), 1, 1);
  int t = input(p, I64, 1, 5);
  int nl = nll_loss(p, lp, t, KILN_REDUCTION_MEAN);
  int gl = input(p, F32, 0);
  B(p, FB_NLL_LOSS_BW);
  B(p, gl), B(p, lp), B(p, t), B(p, NONE), B(p, KILN_REDUCTION_MEAN), B(p, (int8_t)-100);
  B(p, nl + 1);
  output(p, made(p, 1));
  int q = input(p, F32, 4, 1, 4, 3, 8), k = input(p, F32, 4, 1, 2, 5, 8);
  int v = input(p, F32, 4, 1, 2, 5, 8), mask = input(p, BOOL, 2, 3, 5);
  B(p, FB_SDPA);
  B(p, q), B(p, k), B(p, v), B(p, mask), B(p, 0);
  F(p, 0.5);
  output(p, made(p, 2));
}

typedef struct {
  const char* name;
  void (*build)(prog_t*);
} entry_t;

static void mlp0(prog_t* p) { mlp(p, 0); }
static void mlp_nofuse(prog_t* p) { mlp(p, KILN_COMPILE_NO_FUSION | KILN_COMPILE_NO_EPILOGUE); }
static void mlp_noreuse(prog_t* p) {
  mlp(p, KILN_COMPILE_NO_CSE | KILN_COMPILE_NO_FOLD | KILN_COMPILE_NO_MEMORY_REUSE);
}
static void mlp_nodce(prog_t* p) { mlp(p, KILN_COMPILE_NO_DCE | KILN_COMPILE_NO_VIEW_SINK); }

static const entry_t programs[] = {
    {"mlp", mlp0},
    {"mlp_nofuse", mlp_nofuse},
    {"mlp_noreuse", mlp_noreuse},
    {"mlp_nodce", mlp_nodce},
    {"transformer_block", transformer_block},
    {"transformer_backward", transformer_backward},
    {"cnn", cnn},
    {"cnn_backward", cnn_backward},
    {"embedding_lm", embedding_lm},
    {"mlp_backward", mlp_backward},
    {"reductions", reductions},
    {"indexing", indexing},
    {"dtypes", dtypes},
    {"losses_attention", losses_attention},
};

static int write_file(const char* path, const void* data, size_t n) {
  FILE* f = fopen(path, "wb");
  if (!f) return 0;
  size_t w = fwrite(data, 1, n, f);
  return (fclose(f) == 0) & (w == n);
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: gen_corpus <corpus dir> (with fuzz_builder/ and fuzz_load/ in it)\n");
    return 2;
  }
  kf_init();
  char path[1024];
  const char* subs[3] = {"", "/fuzz_builder", "/fuzz_load"};
  for (int k = 0; k < 3; k++) {
    snprintf(path, sizeof path, "%s%s", argv[1], subs[k]);
    mkdir(path, 0777); /* an existing directory is fine; a write below reports real failures */
  }
  int bad = 0;
  for (size_t i = 0; i < sizeof programs / sizeof programs[0]; i++) {
    prog_t p;
    programs[i].build(&p);
    int flags, n_failed;
    kiln_graph_t* g = fb_decode(p.b, p.n, &flags, &n_failed);
    kiln_exec_t* e = NULL;
    if (!g || n_failed) {
      fprintf(stderr, "gen_corpus: %s: %d builder call(s) rejected (last: %s)\n", programs[i].name,
              n_failed, kiln_status_message());
      bad = 1;
    } else if (kiln_graph_compile_ex(g, flags, &e) != KILN_OK) {
      fprintf(stderr, "gen_corpus: %s does not compile: %s\n", programs[i].name,
              kiln_status_message());
      bad = 1;
    }
    kiln_graph_destroy(g);
    if (!e) continue;
    int ran = kf_exercise(e, 1);
    if (ran != KILN_OK) {
      fprintf(stderr, "gen_corpus: %s does not run: %s\n", programs[i].name,
              ran < 0 ? "too big" : kiln_status_message());
      bad = 1;
    }
    snprintf(path, sizeof path, "%s/fuzz_builder/%s.bin", argv[1], programs[i].name);
    if (!write_file(path, p.b, p.n)) {
      fprintf(stderr, "gen_corpus: cannot write %s\n", path);
      bad = 1;
    }
    snprintf(path, sizeof path, "%s/fuzz_load/%s.kiln", argv[1], programs[i].name);
    if (kiln_exec_save(e, path) != KILN_OK) {
      fprintf(stderr, "gen_corpus: %s\n", kiln_status_message());
      bad = 1;
    }
    printf("gen_corpus: %-22s %4zu bytes of builder calls\n", programs[i].name, p.n);
    kiln_exec_destroy(e);
  }
  return bad;
}
