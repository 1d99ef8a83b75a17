/* SPDX-License-Identifier: Apache-2.0 */
/* test_graph_model.c - a GPT-style transformer block as aot_autograd lowers it (views around
 * addmm, head split by slice/view/permute, SDPA, residuals, GELU MLP, a mean-square loss):
 * the fully optimized program must match node-by-node execution. */
#include "test_graph_util.h"

#define F32 KILN_DTYPE_F32
enum { B = 2, T = 16, C = 64, H = 4, D = 16 };

static int cst(kiln_graph_t* g, int ndim, const int64_t* shape, float** keep) {
  int64_t n = 1;
  for (int i = 0; i < ndim; i++) n *= shape[i];
  float* p = gt_randf(n);
  for (int64_t i = 0; i < n; i++) p[i] *= 0.2f;
  int v;
  KT_OK(kiln_graph_constant(g, F32, ndim, shape, p, &v));
  *keep = p;
  return v;
}

/* y = x W^T + b on [B, T, in] through view -> addmm -> view. */
static int linear(kiln_graph_t* g, int x, int64_t in, int64_t out, float** k1, float** k2) {
  int64_t ws[2] = {out, in}, bs[1] = {out}, x2[2] = {B * T, in}, y3[3] = {B, T, out};
  int w = cst(g, 2, ws, k1), b = cst(g, 1, bs, k2);
  int perm[2] = {1, 0};
  int xv, wt, y, yv;
  KT_OK(kiln_graph_reshape(g, x, 2, x2, &xv));
  KT_OK(kiln_graph_permute(g, w, perm, &wt));
  KT_OK(kiln_graph_addmm(g, b, xv, wt, 1.0, 1.0, &y));
  KT_OK(kiln_graph_reshape(g, y, 3, y3, &yv));
  return yv;
}

static kiln_graph_t* build_block(float** keep, int* nkeep) {
  kiln_graph_t* g;
  KT_OK(kiln_graph_create(&g));
  int64_t xs[3] = {B, T, C}, cs[1] = {C};
  int x;
  KT_OK(kiln_graph_input(g, F32, 3, xs, &x));
  int k = 0;
  int w1 = cst(g, 1, cs, &keep[k++]), b1 = cst(g, 1, cs, &keep[k++]);
  int ln1;
  KT_OK(kiln_graph_layer_norm(g, x, w1, b1, 1, 1e-5, &ln1, NULL, NULL));
  int qkv = linear(g, ln1, C, 3 * C, &keep[k], &keep[k + 1]);
  k += 2;
  int heads[3];
  for (int i = 0; i < 3; i++) {
    int sl, v4, p;
    int64_t s4[4] = {B, T, H, D};
    int perm[4] = {0, 2, 1, 3};
    KT_OK(kiln_graph_slice(g, qkv, 2, i * C, (i + 1) * C, 1, &sl));
    KT_OK(kiln_graph_reshape(g, sl, 4, s4, &v4));
    KT_OK(kiln_graph_permute(g, v4, perm, &p));
    heads[i] = p;
  }
  int att, lse;
  KT_OK(kiln_graph_sdpa(g, heads[0], heads[1], heads[2], -1, 1, NAN, &att, &lse));
  int attp, att3;
  int perm[4] = {0, 2, 1, 3};
  int64_t s3[3] = {B, T, C};
  KT_OK(kiln_graph_permute(g, att, perm, &attp));
  KT_OK(kiln_graph_reshape(g, attp, 3, s3, &att3)); /* needs a copy */
  int proj = linear(g, att3, C, C, &keep[k], &keep[k + 1]);
  k += 2;
  int x1;
  KT_OK(kiln_graph_binary(g, KILN_BINARY_ADD, x, proj, 1.0, F32, &x1));
  int w2 = cst(g, 1, cs, &keep[k++]), b2 = cst(g, 1, cs, &keep[k++]);
  int ln2;
  KT_OK(kiln_graph_layer_norm(g, x1, w2, b2, 1, 1e-5, &ln2, NULL, NULL));
  int fc = linear(g, ln2, C, 4 * C, &keep[k], &keep[k + 1]);
  k += 2;
  int ge;
  KT_OK(kiln_graph_unary(g, KILN_UNARY_GELU_TANH, fc, F32, &ge));
  int p2 = linear(g, ge, 4 * C, C, &keep[k], &keep[k + 1]);
  k += 2;
  int y;
  KT_OK(kiln_graph_binary(g, KILN_BINARY_ADD, x1, p2, 1.0, F32, &y));
  int sq, loss;
  KT_OK(kiln_graph_binary(g, KILN_BINARY_MUL, y, y, 1.0, F32, &sq));
  KT_OK(kiln_graph_reduce(g, KILN_REDUCE_MEAN, sq, 0, 0, 0, F32, &loss));
  KT_OK(kiln_graph_output(g, y));
  KT_OK(kiln_graph_output(g, loss));
  *nkeep = k;
  return g;
}

KT_TEST(transformer_block) {
  float* keep[16];
  int nkeep;
  kiln_graph_t* g = build_block(keep, &nkeep);
  int64_t n = B * T * C;
  float* x = gt_randf(n);
  float* y0 = malloc(sizeof(float) * n);
  float* y1 = malloc(sizeof(float) * n);
  float l0, l1;
  kiln_exec_t *e_ref, *e_opt;
  int off = KILN_COMPILE_NO_FUSION | KILN_COMPILE_NO_EPILOGUE | KILN_COMPILE_NO_VIEW_SINK |
            KILN_COMPILE_NO_INPLACE | KILN_COMPILE_NO_CSE | KILN_COMPILE_NO_FOLD;
  KT_OK(kiln_graph_compile_ex(g, off, &e_ref));
  KT_OK(kiln_graph_compile(g, &e_opt));
  void* ins[1] = {x};
  void* o0[2] = {y0, &l0};
  void* o1[2] = {y1, &l1};
  KT_OK(kiln_exec_run(e_ref, 1, ins, 2, o0));
  KT_OK(kiln_exec_run(e_opt, 1, ins, 2, o1));
  KT_CHECK(gt_maxrel(y1, y0, n) < 2e-5);
  KT_NEAR(l1, l0, 1e-5 * (1 + fabs(l0)));
  kiln_exec_stats_t sr = gt_stats(e_ref), so = gt_stats(e_opt);
  KT_CHECK(so.n_epilogues == 3); /* proj+residual, fc+gelu, proj2+residual (qkv has none) */
  KT_CHECK(so.n_reduce_fused == 1);        /* mean(y*y) */
  KT_CHECK(so.n_kernels_per_run < sr.n_kernels_per_run);
  KT_CHECK(so.arena_bytes <= sr.arena_bytes);
  if (getenv("KILN_TEST_DUMP")) {
    gt_dump(e_opt, KILN_DUMP_ALL);
    fprintf(stderr, "ref kernels %lld arena %lld, opt kernels %lld arena %lld\n",
            (long long)sr.n_kernels_per_run, (long long)sr.arena_bytes,
            (long long)so.n_kernels_per_run, (long long)so.arena_bytes);
  }
  /* many runs: identical */
  for (int rep = 0; rep < 5; rep++) {
    KT_OK(kiln_exec_run(e_opt, 1, ins, 2, o0));
    KT_CHECK(memcmp(y0, y1, sizeof(float) * n) == 0);
  }
  kiln_exec_destroy(e_ref);
  kiln_exec_destroy(e_opt);
  kiln_graph_destroy(g);
  for (int i = 0; i < nkeep; i++) free(keep[i]);
  free(x);
  free(y0);
  free(y1);
}

KT_MAIN()
