/* SPDX-License-Identifier: Apache-2.0 */
/* test_graph_exec.c - compiled graphs vs calling the kernels directly on the same inputs. */
#include "test_graph_util.h"

#define F32 KILN_DTYPE_F32

/* Every test compiles with all passes and with fusion/epilogues off; both must agree with the
 * direct kernel calls. */
static const int kFlagSets[3] = {0, KILN_COMPILE_NO_FUSION | KILN_COMPILE_NO_EPILOGUE,
                                 KILN_COMPILE_NO_INPLACE | KILN_COMPILE_NO_MEMORY_REUSE};

/* y = exp(relu(x * w + b)) - 0.5 x with x [8, 33], w [33] (broadcast), b [8, 1] (broadcast). */
KT_TEST(pointwise_chain_broadcast) {
  int64_t xs[2] = {8, 33}, ws[1] = {33}, bs[2] = {8, 1};
  float* x = gt_randf(8 * 33);
  float* w = gt_randf(33);
  float* b = gt_randf(8);
  float t1[8 * 33], t2[8 * 33], ref[8 * 33];
  kiln_tensor_t tx = gt_t(x, F32, 2, xs), tw = gt_t(w, F32, 1, ws), tb = gt_t(b, F32, 2, bs),
                T1 = gt_t(t1, F32, 2, xs), T2 = gt_t(t2, F32, 2, xs), R = gt_t(ref, F32, 2, xs);
  KT_OK(kiln_kernel_binary(KILN_BINARY_MUL, &tx, &tw, 1.0, F32, &T1));
  KT_OK(kiln_kernel_binary(KILN_BINARY_ADD, &T1, &tb, 1.0, F32, &T2));
  KT_OK(kiln_kernel_unary(KILN_UNARY_RELU, &T2, F32, &T1));
  KT_OK(kiln_kernel_unary(KILN_UNARY_EXP, &T1, F32, &T2));
  KT_OK(kiln_kernel_binary(KILN_BINARY_SUB, &T2, &tx, 0.5, F32, &R));
  for (int f = 0; f < 3; f++) {
    kiln_graph_t* g;
    KT_OK(kiln_graph_create(&g));
    int vx, vw, vb, m, a, r, e2, y;
    KT_OK(kiln_graph_input(g, F32, 2, xs, &vx));
    KT_OK(kiln_graph_input(g, F32, 1, ws, &vw));
    KT_OK(kiln_graph_input(g, F32, 2, bs, &vb));
    KT_OK(kiln_graph_binary(g, KILN_BINARY_MUL, vx, vw, 1.0, F32, &m));
    KT_OK(kiln_graph_binary(g, KILN_BINARY_ADD, m, vb, 1.0, F32, &a));
    KT_OK(kiln_graph_unary(g, KILN_UNARY_RELU, a, F32, &r));
    KT_OK(kiln_graph_unary(g, KILN_UNARY_EXP, r, F32, &e2));
    KT_OK(kiln_graph_binary(g, KILN_BINARY_SUB, e2, vx, 0.5, F32, &y));
    KT_OK(kiln_graph_output(g, y));
    kiln_exec_t* e;
    KT_OK(kiln_graph_compile_ex(g, kFlagSets[f], &e));
    float out[8 * 33];
    void* ins[3] = {x, w, b};
    void* outs[1] = {out};
    KT_OK(kiln_exec_run(e, 3, ins, 1, outs));
    KT_CHECK(memcmp(out, ref, sizeof ref) == 0);
    if (f == 0) KT_CHECK(gt_stats(e).n_fused_groups == 1);
    kiln_exec_destroy(e);
    kiln_graph_destroy(g);
  }
  free(x);
  free(w);
  free(b);
}

/* A long chain over a big tensor (many tiles, several threads), a transposed input and a
 * second output taken from the middle of the chain. */
KT_TEST(pointwise_large_strided_multi_output) {
  int64_t s[2] = {300, 257}, st[2] = {257, 300};
  int64_t n = 300 * 257;
  float* x = gt_randf(n);
  float* yT = gt_randf(n); /* [257, 300], used transposed */
  float* t1 = malloc(sizeof(float) * n);
  float* t2 = malloc(sizeof(float) * n);
  float* r0 = malloc(sizeof(float) * n);
  float* r1 = malloc(sizeof(float) * n);
  float* o0 = malloc(sizeof(float) * n);
  float* o1 = malloc(sizeof(float) * n);
  kiln_tensor_t X = gt_t(x, F32, 2, s), YT = gt_t(yT, F32, 2, st), T1 = gt_t(t1, F32, 2, s),
                T2 = gt_t(t2, F32, 2, s), R0 = gt_t(r0, F32, 2, s), R1 = gt_t(r1, F32, 2, s);
  kiln_tensor_t Y = YT; /* permute(1, 0) */
  Y.shape[0] = 300;
  Y.shape[1] = 257;
  Y.strides[0] = 1;
  Y.strides[1] = 300;
  KT_OK(kiln_kernel_binary(KILN_BINARY_MUL, &X, &Y, 1.0, F32, &T1));
  KT_OK(kiln_kernel_unary(KILN_UNARY_TANH, &T1, F32, &R0));
  KT_OK(kiln_kernel_unary(KILN_UNARY_SIGMOID, &R0, F32, &T2));
  KT_OK(kiln_kernel_binary(KILN_BINARY_ADD, &T2, &X, 3.0, F32, &R1));
  for (int f = 0; f < 3; f++) {
    kiln_graph_t* g;
    KT_OK(kiln_graph_create(&g));
    int vx, vy, vyt, m, th, sg, ad;
    int perm[2] = {1, 0};
    KT_OK(kiln_graph_input(g, F32, 2, s, &vx));
    KT_OK(kiln_graph_input(g, F32, 2, st, &vyt));
    KT_OK(kiln_graph_permute(g, vyt, perm, &vy));
    KT_OK(kiln_graph_binary(g, KILN_BINARY_MUL, vx, vy, 1.0, F32, &m));
    KT_OK(kiln_graph_unary(g, KILN_UNARY_TANH, m, F32, &th));
    KT_OK(kiln_graph_unary(g, KILN_UNARY_SIGMOID, th, F32, &sg));
    KT_OK(kiln_graph_binary(g, KILN_BINARY_ADD, sg, vx, 3.0, F32, &ad));
    KT_OK(kiln_graph_output(g, th));
    KT_OK(kiln_graph_output(g, ad));
    kiln_exec_t* e;
    KT_OK(kiln_graph_compile_ex(g, kFlagSets[f], &e));
    void* ins[2] = {x, yT};
    void* outs[2] = {o0, o1};
    for (int rep = 0; rep < 3; rep++) {
      memset(o0, 0, sizeof(float) * n);
      memset(o1, 0, sizeof(float) * n);
      KT_OK(kiln_exec_run(e, 2, ins, 2, outs));
      KT_CHECK(memcmp(o0, r0, sizeof(float) * n) == 0);
      KT_CHECK(memcmp(o1, r1, sizeof(float) * n) == 0);
    }
    if (f == 0) {
      kiln_exec_stats_t stt = gt_stats(e);
      KT_CHECK(stt.n_fused_groups == 1);
      KT_CHECK(stt.n_kernels_per_run == 1);
      KT_CHECK(stt.arena_bytes == 0);
    }
    kiln_exec_destroy(e);
    kiln_graph_destroy(g);
  }
  free(x);
  free(yT);
  free(t1);
  free(t2);
  free(r0);
  free(r1);
  free(o0);
  free(o1);
}

/* sum over the last dim of x*y (fused reduction), mean over dim 0, var with keepdim, amax. */
KT_TEST(reductions) {
  int64_t s[3] = {6, 5, 70};
  int64_t n = 6 * 5 * 70;
  float* x = gt_randf(n);
  float* y = gt_randf(n);
  float* xy = malloc(sizeof(float) * n);
  float rs[30], rm[350], rv[6], ra[1];
  kiln_tensor_t X = gt_t(x, F32, 3, s), Y = gt_t(y, F32, 3, s), XY = gt_t(xy, F32, 3, s);
  KT_OK(kiln_kernel_binary(KILN_BINARY_MUL, &X, &Y, 1.0, F32, &XY));
  int64_t s_sum[3] = {6, 5, 1}, s_mean[3] = {1, 5, 70}, s_var[3] = {6, 1, 1}, s_all[3] = {1, 1, 1};
  kiln_tensor_t RS = gt_t(rs, F32, 3, s_sum), RM = gt_t(rm, F32, 3, s_mean),
                RV = gt_t(rv, F32, 3, s_var), RA = gt_t(ra, F32, 3, s_all);
  kiln_reduce_params_t p = {1.0, 2.0};
  KT_OK(kiln_kernel_reduce(KILN_REDUCE_SUM, &XY, 4, NULL, F32, &RS));
  KT_OK(kiln_kernel_reduce(KILN_REDUCE_MEAN, &X, 1, NULL, F32, &RM));
  KT_OK(kiln_kernel_reduce(KILN_REDUCE_VAR, &X, 6, &p, F32, &RV));
  KT_OK(kiln_kernel_reduce(KILN_REDUCE_AMAX, &XY, 0, NULL, F32, &RA));
  for (int f = 0; f < 3; f++) {
    kiln_graph_t* g;
    KT_OK(kiln_graph_create(&g));
    int vx, vy, m, o_sum, o_mean, o_var, o_max;
    KT_OK(kiln_graph_input(g, F32, 3, s, &vx));
    KT_OK(kiln_graph_input(g, F32, 3, s, &vy));
    KT_OK(kiln_graph_binary(g, KILN_BINARY_MUL, vx, vy, 1.0, F32, &m));
    KT_OK(kiln_graph_reduce(g, KILN_REDUCE_SUM, m, 4, 0, 0.0, F32, &o_sum));
    KT_OK(kiln_graph_reduce(g, KILN_REDUCE_MEAN, vx, 1, 0, 0.0, F32, &o_mean));
    KT_OK(kiln_graph_reduce(g, KILN_REDUCE_VAR, vx, 6, 1, 1.0, F32, &o_var));
    KT_OK(kiln_graph_reduce(g, KILN_REDUCE_AMAX, m, 0, 0, 0.0, F32, &o_max));
    int dt, nd;
    int64_t sh[8];
    KT_OK(kiln_graph_value_info(g, o_sum, &dt, &nd, sh));
    KT_CHECK(nd == 2 && sh[0] == 6 && sh[1] == 5);
    KT_OK(kiln_graph_value_info(g, o_max, &dt, &nd, sh));
    KT_CHECK(nd == 0);
    KT_OK(kiln_graph_output(g, o_sum));
    KT_OK(kiln_graph_output(g, o_mean));
    KT_OK(kiln_graph_output(g, o_var));
    KT_OK(kiln_graph_output(g, o_max));
    kiln_exec_t* e;
    KT_OK(kiln_graph_compile_ex(g, kFlagSets[f], &e));
    float os[30], om[350], ov[6], oa[1];
    void* ins[2] = {x, y};
    void* outs[4] = {os, om, ov, oa};
    KT_OK(kiln_exec_run(e, 2, ins, 4, outs));
    KT_CHECK(gt_maxrel(os, rs, 30) < 1e-6);
    KT_CHECK(memcmp(om, rm, sizeof rm) == 0);
    KT_CHECK(memcmp(ov, rv, sizeof rv) == 0);
    KT_CHECK(oa[0] == ra[0]);
    kiln_exec_destroy(e);
    kiln_graph_destroy(g);
  }
  free(x);
  free(y);
  free(xy);
}

/* gelu(x @ w + b) and relu(addmm(b, x, w)) + r (epilogue fusion with a residual) against
 * kiln_kernel_matmul + elementwise kernels; also a 3-D input through a view (linear layer). */
KT_TEST(matmul_bias_gelu) {
  const int64_t M = 37, K = 29, N = 43;
  int64_t xs[2] = {M, K}, ws[2] = {K, N}, bs[1] = {N}, os[2] = {M, N};
  float* x = gt_randf(M * K);
  float* w = gt_randf(K * N);
  float* b = gt_randf(N);
  float* r = gt_randf(M * N);
  float* mm = malloc(sizeof(float) * M * N);
  float* ref1 = malloc(sizeof(float) * M * N);
  float* ref2 = malloc(sizeof(float) * M * N);
  float* out1 = malloc(sizeof(float) * M * N);
  float* out2 = malloc(sizeof(float) * M * N);
  kiln_tensor_t X = gt_t(x, F32, 2, xs), W = gt_t(w, F32, 2, ws), B = gt_t(b, F32, 1, bs),
                MM = gt_t(mm, F32, 2, os), R1 = gt_t(ref1, F32, 2, os), R2 = gt_t(ref2, F32, 2, os),
                RR = gt_t(r, F32, 2, os);
  KT_OK(kiln_kernel_matmul(&X, &W, &MM));
  KT_OK(kiln_kernel_binary(KILN_BINARY_ADD, &MM, &B, 1.0, F32, &R2));
  KT_OK(kiln_kernel_unary(KILN_UNARY_GELU, &R2, F32, &R1));
  KT_OK(kiln_kernel_unary(KILN_UNARY_RELU, &R2, F32, &MM));
  KT_OK(kiln_kernel_binary(KILN_BINARY_ADD, &MM, &RR, 1.0, F32, &R2));
  for (int f = 0; f < 3; f++) {
    kiln_graph_t* g;
    KT_OK(kiln_graph_create(&g));
    int vx, vw, vb, vr, m1, a1, y1, am, re, y2;
    KT_OK(kiln_graph_input(g, F32, 2, xs, &vx));
    KT_OK(kiln_graph_input(g, F32, 2, ws, &vw));
    KT_OK(kiln_graph_input(g, F32, 1, bs, &vb));
    KT_OK(kiln_graph_input(g, F32, 2, os, &vr));
    KT_OK(kiln_graph_matmul(g, vx, vw, &m1));
    KT_OK(kiln_graph_binary(g, KILN_BINARY_ADD, m1, vb, 1.0, F32, &a1));
    KT_OK(kiln_graph_unary(g, KILN_UNARY_GELU, a1, F32, &y1));
    KT_OK(kiln_graph_addmm(g, vb, vx, vw, 1.0, 1.0, &am));
    KT_OK(kiln_graph_unary(g, KILN_UNARY_RELU, am, F32, &re));
    KT_OK(kiln_graph_binary(g, KILN_BINARY_ADD, vr, re, 1.0, F32, &y2));
    KT_OK(kiln_graph_output(g, y1));
    KT_OK(kiln_graph_output(g, y2));
    kiln_exec_t* e;
    KT_OK(kiln_graph_compile_ex(g, kFlagSets[f], &e));
    void* ins[4] = {x, w, b, r};
    void* outs[2] = {out1, out2};
    KT_OK(kiln_exec_run(e, 4, ins, 2, outs));
    KT_CHECK(gt_maxrel(out1, ref1, M * N) < 1e-5);
    KT_CHECK(gt_maxrel(out2, ref2, M * N) < 1e-5);
    kiln_exec_stats_t st = gt_stats(e);
    if (f == 0) {
      KT_CHECK(st.n_epilogues == 2);
      KT_CHECK(st.n_epilogue_ops == 4);
      KT_CHECK(st.n_kernels_per_run == 2);
    } else if (f == 1) {
      KT_CHECK(st.n_epilogues == 0);
    }
    kiln_exec_destroy(e);
    kiln_graph_destroy(g);
  }
  /* linear layer on [B, T, K]: view -> addmm -> view -> gelu */
  {
    const int64_t Bt = 3, T = 5, K2 = 16, N2 = 24;
    int64_t x3s[3] = {Bt, T, K2}, x2s[2] = {Bt * T, K2}, wts[2] = {N2, K2}, b2s[1] = {N2},
            y3s[3] = {Bt, T, N2}, y2s[2] = {Bt * T, N2};
    float* x3 = gt_randf(Bt * T * K2);
    float* wt = gt_randf(N2 * K2);
    float* b2 = gt_randf(N2);
    float ref[3 * 5 * 24], tmp[3 * 5 * 24], out[3 * 5 * 24];
    kiln_tensor_t X2 = gt_t(x3, F32, 2, x2s), WT = gt_t(wt, F32, 2, wts), B2 = gt_t(b2, F32, 1, b2s),
                  TMP = gt_t(tmp, F32, 2, y2s), REF = gt_t(ref, F32, 2, y2s);
    kiln_tensor_t W2 = WT; /* w = wt.T */
    W2.shape[0] = K2;
    W2.shape[1] = N2;
    W2.strides[0] = 1;
    W2.strides[1] = K2;
    KT_OK(kiln_kernel_matmul_ex(&X2, &W2, &B2, 1.0, 1.0, &TMP));
    KT_OK(kiln_kernel_unary(KILN_UNARY_GELU_TANH, &TMP, F32, &REF));
    kiln_graph_t* g;
    KT_OK(kiln_graph_create(&g));
    int vx, vw, vb, v2, wtv, am, v3, y;
    int perm[2] = {1, 0};
    KT_OK(kiln_graph_input(g, F32, 3, x3s, &vx));
    KT_OK(kiln_graph_input(g, F32, 2, wts, &vw));
    KT_OK(kiln_graph_input(g, F32, 1, b2s, &vb));
    KT_OK(kiln_graph_reshape(g, vx, 2, x2s, &v2));
    KT_OK(kiln_graph_permute(g, vw, perm, &wtv));
    KT_OK(kiln_graph_addmm(g, vb, v2, wtv, 1.0, 1.0, &am));
    KT_OK(kiln_graph_reshape(g, am, 3, y3s, &v3));
    KT_OK(kiln_graph_unary(g, KILN_UNARY_GELU_TANH, v3, F32, &y));
    KT_OK(kiln_graph_output(g, y));
    kiln_exec_t* e;
    KT_OK(kiln_graph_compile(g, &e));
    void* ins[3] = {x3, wt, b2};
    void* outs[1] = {out};
    KT_OK(kiln_exec_run(e, 3, ins, 1, outs));
    KT_CHECK(gt_maxrel(out, ref, Bt * T * N2) < 1e-5);
    kiln_exec_stats_t st = gt_stats(e);
    KT_CHECK(st.n_epilogues == 1);
    KT_CHECK(st.n_kernels_per_run == 1);
    KT_CHECK(st.n_output_copies == 0);
    kiln_exec_destroy(e);
    kiln_graph_destroy(g);
    free(x3);
    free(wt);
    free(b2);
  }
  free(x);
  free(w);
  free(b);
  free(r);
  free(mm);
  free(ref1);
  free(ref2);
  free(out1);
  free(out2);
}

/* batched matmul with broadcasting batch dims, matmul of vectors. */
KT_TEST(matmul_batched) {
  int64_t as[3] = {4, 6, 5}, bs[2] = {5, 7}, os[3] = {4, 6, 7}, vs[1] = {5};
  float* a = gt_randf(120);
  float* b = gt_randf(35);
  float* v = gt_randf(5);
  float ref[168], out[168], refd[1], outd[1];
  kiln_tensor_t A = gt_t(a, F32, 3, as), B = gt_t(b, F32, 2, bs), O = gt_t(ref, F32, 3, os),
                V = gt_t(v, F32, 1, vs), D = gt_t(refd, F32, 0, NULL);
  KT_OK(kiln_kernel_matmul(&A, &B, &O));
  KT_OK(kiln_kernel_matmul(&V, &V, &D));
  kiln_graph_t* g;
  KT_OK(kiln_graph_create(&g));
  int va, vb, vv, m, d;
  KT_OK(kiln_graph_input(g, F32, 3, as, &va));
  KT_OK(kiln_graph_input(g, F32, 2, bs, &vb));
  KT_OK(kiln_graph_input(g, F32, 1, vs, &vv));
  KT_OK(kiln_graph_matmul(g, va, vb, &m));
  KT_OK(kiln_graph_matmul(g, vv, vv, &d));
  int nd;
  KT_OK(kiln_graph_value_info(g, d, NULL, &nd, NULL));
  KT_CHECK(nd == 0);
  KT_OK(kiln_graph_output(g, m));
  KT_OK(kiln_graph_output(g, d));
  kiln_exec_t* e;
  KT_OK(kiln_graph_compile(g, &e));
  void* ins[3] = {a, b, v};
  void* outs[2] = {out, outd};
  KT_OK(kiln_exec_run(e, 3, ins, 2, outs));
  KT_CHECK(memcmp(out, ref, sizeof ref) == 0);
  KT_CHECK(outd[0] == refd[0]);
  kiln_exec_destroy(e);
  kiln_graph_destroy(g);
  free(a);
  free(b);
  free(v);
}

/* softmax and log_softmax over the last dim, softmax over dim 0, and a decomposed softmax
 * (amax, sub, exp, sum, div) that exercises the fused reduction. */
KT_TEST(softmax) {
  int64_t s[2] = {9, 130}, sr[2] = {9, 1};
  float* x = gt_randf(9 * 130);
  float r0[9 * 130], r1[9 * 130], r2[9 * 130], o0[9 * 130], o1[9 * 130], o2[9 * 130],
      o3[9 * 130];
  kiln_tensor_t X = gt_t(x, F32, 2, s), R0 = gt_t(r0, F32, 2, s), R1 = gt_t(r1, F32, 2, s),
                R2 = gt_t(r2, F32, 2, s);
  KT_OK(kiln_kernel_softmax(&X, -1, 0, &R0));
  KT_OK(kiln_kernel_softmax(&X, -1, 1, &R1));
  KT_OK(kiln_kernel_softmax(&X, 0, 0, &R2));
  for (int f = 0; f < 3; f++) {
    kiln_graph_t* g;
    KT_OK(kiln_graph_create(&g));
    int vx, y0, y1, y2, mx, sb, ex, sm, dv;
    KT_OK(kiln_graph_input(g, F32, 2, s, &vx));
    KT_OK(kiln_graph_softmax(g, vx, -1, 0, -1, &y0));
    KT_OK(kiln_graph_softmax(g, vx, -1, 1, -1, &y1));
    KT_OK(kiln_graph_softmax(g, vx, 0, 0, -1, &y2));
    KT_OK(kiln_graph_reduce(g, KILN_REDUCE_AMAX, vx, 2, 1, 0, F32, &mx));
    KT_OK(kiln_graph_binary(g, KILN_BINARY_SUB, vx, mx, 1.0, F32, &sb));
    KT_OK(kiln_graph_unary(g, KILN_UNARY_EXP, sb, F32, &ex));
    KT_OK(kiln_graph_reduce(g, KILN_REDUCE_SUM, ex, 2, 1, 0, F32, &sm));
    KT_OK(kiln_graph_binary(g, KILN_BINARY_DIV, ex, sm, 1.0, F32, &dv));
    KT_OK(kiln_graph_output(g, y0));
    KT_OK(kiln_graph_output(g, y1));
    KT_OK(kiln_graph_output(g, y2));
    KT_OK(kiln_graph_output(g, dv));
    kiln_exec_t* e;
    KT_OK(kiln_graph_compile_ex(g, kFlagSets[f], &e));
    void* ins[1] = {x};
    void* outs[4] = {o0, o1, o2, o3};
    KT_OK(kiln_exec_run(e, 1, ins, 4, outs));
    KT_CHECK(memcmp(o0, r0, sizeof r0) == 0);
    KT_CHECK(memcmp(o1, r1, sizeof r1) == 0);
    KT_CHECK(memcmp(o2, r2, sizeof r2) == 0);
    KT_CHECK(gt_maxrel(o3, r0, 9 * 130) < 1e-6);
    if (f == 0) KT_CHECK(gt_stats(e).n_reduce_fused == 1);
    kiln_exec_destroy(e);
    kiln_graph_destroy(g);
  }
  (void)sr;
  free(x);
}

/* layer norm forward (out, mean, rstd) and backward against the kernels. */
KT_TEST(layer_norm) {
  int64_t s[3] = {4, 3, 48}, ws[1] = {48}, ms[3] = {4, 3, 1};
  int64_t n = 4 * 3 * 48;
  float* x = gt_randf(n);
  float* w = gt_randf(48);
  float* b = gt_randf(48);
  float* go = gt_randf(n);
  float ro[576], rm[12], rr[12], rgx[576], rgw[48], rgb[48];
  float oo[576], om[12], orr[12], ogx[576], ogw[48], ogb[48];
  kiln_tensor_t X = gt_t(x, F32, 3, s), W = gt_t(w, F32, 1, ws), B = gt_t(b, F32, 1, ws),
                GO = gt_t(go, F32, 3, s), RO = gt_t(ro, F32, 3, s), RM = gt_t(rm, F32, 3, ms),
                RR = gt_t(rr, F32, 3, ms), RGX = gt_t(rgx, F32, 3, s), RGW = gt_t(rgw, F32, 1, ws),
                RGB = gt_t(rgb, F32, 1, ws);
  KT_OK(kiln_kernel_layer_norm(&X, 1, &W, &B, 1e-5, &RO, &RM, &RR));
  KT_OK(kiln_kernel_layer_norm_backward(&GO, &X, &RM, &RR, &W, 1, &RGX, &RGW, &RGB));
  kiln_graph_t* g;
  KT_OK(kiln_graph_create(&g));
  int vx, vw, vb, vg, y, mean, rstd, gx, gw, gb;
  KT_OK(kiln_graph_input(g, F32, 3, s, &vx));
  KT_OK(kiln_graph_input(g, F32, 1, ws, &vw));
  KT_OK(kiln_graph_input(g, F32, 1, ws, &vb));
  KT_OK(kiln_graph_input(g, F32, 3, s, &vg));
  KT_OK(kiln_graph_layer_norm(g, vx, vw, vb, 1, 1e-5, &y, &mean, &rstd));
  KT_OK(kiln_graph_layer_norm_backward(g, vg, vx, mean, rstd, vw, 1, 7, &gx, &gw, &gb));
  KT_OK(kiln_graph_output(g, y));
  KT_OK(kiln_graph_output(g, mean));
  KT_OK(kiln_graph_output(g, rstd));
  KT_OK(kiln_graph_output(g, gx));
  KT_OK(kiln_graph_output(g, gw));
  KT_OK(kiln_graph_output(g, gb));
  kiln_exec_t* e;
  KT_OK(kiln_graph_compile(g, &e));
  void* ins[4] = {x, w, b, go};
  void* outs[6] = {oo, om, orr, ogx, ogw, ogb};
  KT_OK(kiln_exec_run(e, 4, ins, 6, outs));
  KT_CHECK(memcmp(oo, ro, sizeof ro) == 0);
  KT_CHECK(memcmp(om, rm, sizeof rm) == 0);
  KT_CHECK(memcmp(orr, rr, sizeof rr) == 0);
  KT_CHECK(memcmp(ogx, rgx, sizeof rgx) == 0);
  KT_CHECK(memcmp(ogw, rgw, sizeof rgw) == 0);
  KT_CHECK(memcmp(ogb, rgb, sizeof rgb) == 0);
  kiln_exec_destroy(e);
  /* only the normalized output wanted: mean/rstd are not materialized */
  kiln_graph_t* g2;
  KT_OK(kiln_graph_create(&g2));
  KT_OK(kiln_graph_input(g2, F32, 3, s, &vx));
  KT_OK(kiln_graph_layer_norm(g2, vx, -1, -1, 2, 1e-5, &y, NULL, NULL));
  KT_OK(kiln_graph_output(g2, y));
  KT_OK(kiln_graph_compile(g2, &e));
  KT_CHECK(gt_stats(e).arena_bytes == 0);
  int64_t s2[2] = {4, 144};
  kiln_tensor_t X2 = gt_t(x, F32, 3, s), RO2 = gt_t(ro, F32, 3, s);
  (void)s2;
  KT_OK(kiln_kernel_layer_norm(&X2, 2, NULL, NULL, 1e-5, &RO2, NULL, NULL));
  void* ins2[1] = {x};
  void* outs2[1] = {oo};
  KT_OK(kiln_exec_run(e, 1, ins2, 1, outs2));
  KT_CHECK(memcmp(oo, ro, sizeof ro) == 0);
  kiln_exec_destroy(e);
  kiln_graph_destroy(g2);
  kiln_graph_destroy(g);
  free(x);
  free(w);
  free(b);
  free(go);
}

/* views: permute + reshape (not viewable -> a copy), slice with a step, select, expand;
 * outputs that are views of inputs are copied into the caller's buffers. */
KT_TEST(views) {
  int64_t s[3] = {2, 3, 4};
  float x[24];
  for (int i = 0; i < 24; i++) x[i] = (float)i;
  kiln_graph_t* g;
  KT_OK(kiln_graph_create(&g));
  int vx, p, r, sl, sel, ex, rs2, neg;
  int perm[3] = {1, 0, 2};
  int64_t rshape[2] = {3, 8}, r2[1] = {-1};
  KT_OK(kiln_graph_input(g, F32, 3, s, &vx));
  KT_OK(kiln_graph_permute(g, vx, perm, &p));        /* [3, 2, 4] */
  KT_OK(kiln_graph_reshape(g, p, 2, rshape, &r));    /* [3, 8] needs a copy */
  KT_OK(kiln_graph_slice(g, vx, 2, 1, INT64_MAX, 2, &sl)); /* [2, 3, 2]: cols 1, 3 */
  KT_OK(kiln_graph_select(g, vx, 1, -1, &sel));      /* [2, 4]: row 2 */
  int64_t s1[3] = {2, 1, 4};
  int sel1;
  KT_OK(kiln_graph_reshape(g, sel, 3, s1, &sel1));
  KT_OK(kiln_graph_expand(g, sel1, 3, (int64_t[]){-1, 3, -1}, &ex)); /* [2, 3, 4] */
  KT_OK(kiln_graph_reshape(g, vx, 1, r2, &rs2));     /* [24], output aliasing the input */
  KT_OK(kiln_graph_unary(g, KILN_UNARY_NEG, ex, F32, &neg));
  KT_OK(kiln_graph_output(g, r));
  KT_OK(kiln_graph_output(g, sl));
  KT_OK(kiln_graph_output(g, sel));
  KT_OK(kiln_graph_output(g, neg));
  KT_OK(kiln_graph_output(g, rs2));
  kiln_exec_t* e;
  KT_OK(kiln_graph_compile(g, &e));
  float o_r[24], o_sl[12], o_sel[8], o_neg[24], o_rs[24];
  void* ins[1] = {x};
  void* outs[5] = {o_r, o_sl, o_sel, o_neg, o_rs};
  KT_OK(kiln_exec_run(e, 1, ins, 5, outs));
  /* reference by index arithmetic */
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 2; j++)
      for (int k = 0; k < 4; k++) KT_CHECK(o_r[i * 8 + j * 4 + k] == x[j * 12 + i * 4 + k]);
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 3; j++)
      for (int k = 0; k < 2; k++) KT_CHECK(o_sl[i * 6 + j * 2 + k] == x[i * 12 + j * 4 + 1 + 2 * k]);
  for (int i = 0; i < 2; i++)
    for (int k = 0; k < 4; k++) KT_CHECK(o_sel[i * 4 + k] == x[i * 12 + 8 + k]);
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 3; j++)
      for (int k = 0; k < 4; k++) KT_CHECK(o_neg[i * 12 + j * 4 + k] == -x[i * 12 + 8 + k]);
  KT_CHECK(memcmp(o_rs, x, sizeof x) == 0);
  kiln_exec_stats_t st = gt_stats(e);
  KT_CHECK(st.n_view_copies == 1);
  KT_CHECK(st.n_output_copies == 3); /* the copied reshape is written straight to output 0 */
  if (getenv("KILN_TEST_DUMP")) gt_dump(e, KILN_DUMP_ALL);
  kiln_exec_destroy(e);
  kiln_graph_destroy(g);
}

/* cat along a middle dim, with a dtype promotion and a view input. */
KT_TEST(cat) {
  int64_t as[2] = {3, 2}, bs[2] = {3, 4}, os[2] = {3, 9}, cs[2] = {3, 3};
  float a[6], b[12];
  int32_t c[9];
  for (int i = 0; i < 6; i++) a[i] = (float)i;
  for (int i = 0; i < 12; i++) b[i] = 100.0f + (float)i;
  for (int i = 0; i < 9; i++) c[i] = 1000 + i;
  kiln_graph_t* g;
  KT_OK(kiln_graph_create(&g));
  int va, vb, vc, vbt, ids[3], y;
  KT_OK(kiln_graph_input(g, F32, 2, as, &va));
  KT_OK(kiln_graph_input(g, F32, 2, bs, &vb));
  KT_OK(kiln_graph_input(g, KILN_DTYPE_I32, 2, cs, &vc));
  KT_OK(kiln_graph_slice(g, vb, 1, 0, 4, 1, &vbt));
  ids[0] = va;
  ids[1] = vbt;
  ids[2] = vc;
  KT_OK(kiln_graph_cat(g, 3, ids, 1, &y));
  int dt, nd;
  int64_t sh[8];
  KT_OK(kiln_graph_value_info(g, y, &dt, &nd, sh));
  KT_CHECK(dt == F32 && nd == 2 && sh[1] == 9);
  KT_OK(kiln_graph_output(g, y));
  kiln_exec_t* e;
  KT_OK(kiln_graph_compile(g, &e));
  float out[27];
  void* ins[3] = {a, b, c};
  void* outs[1] = {out};
  KT_OK(kiln_exec_run(e, 3, ins, 1, outs));
  for (int i = 0; i < 3; i++) {
    for (int j = 0; j < 2; j++) KT_CHECK(out[i * 9 + j] == a[i * 2 + j]);
    for (int j = 0; j < 4; j++) KT_CHECK(out[i * 9 + 2 + j] == b[i * 4 + j]);
    for (int j = 0; j < 3; j++) KT_CHECK(out[i * 9 + 6 + j] == (float)c[i * 3 + j]);
  }
  (void)os;
  kiln_exec_destroy(e);
  kiln_graph_destroy(g);
  /* many inputs (torch.stack of 100 rows) */
  KT_OK(kiln_graph_create(&g));
  int many[100];
  int64_t one[2] = {1, 3};
  float rows[300];
  void* rin[100];
  for (int i = 0; i < 100; i++) {
    KT_OK(kiln_graph_input(g, F32, 2, one, &many[i]));
    for (int j = 0; j < 3; j++) rows[i * 3 + j] = (float)(i * 3 + j);
    rin[i] = &rows[i * 3];
  }
  KT_OK(kiln_graph_cat(g, 100, many, 0, &y));
  KT_OK(kiln_graph_output(g, y));
  KT_OK(kiln_graph_compile(g, &e));
  float big[300];
  void* bout[1] = {big};
  KT_OK(kiln_exec_run(e, 100, rin, 1, bout));
  KT_CHECK(memcmp(big, rows, sizeof rows) == 0);
  kiln_exec_destroy(e);
  kiln_graph_destroy(g);
}

/* embedding + nll_loss(log_softmax) forward and backward, errors from kernels at run time. */
KT_TEST(embedding_nll) {
  int64_t ws[2] = {10, 6}, is[1] = {5}, es[2] = {5, 6};
  float* w = gt_randf(60);
  int64_t idx[5] = {3, 1, 9, 3, 0};
  int64_t tgt[5] = {2, 5, 0, 1, 4};
  kiln_graph_t* g;
  KT_OK(kiln_graph_create(&g));
  int vw, vi, vt, em, ls, loss, tw, gl, one;
  KT_OK(kiln_graph_input(g, F32, 2, ws, &vw));
  KT_OK(kiln_graph_input(g, KILN_DTYPE_I64, 1, is, &vi));
  KT_OK(kiln_graph_input(g, KILN_DTYPE_I64, 1, is, &vt));
  KT_OK(kiln_graph_embedding(g, vw, vi, &em));
  KT_OK(kiln_graph_softmax(g, em, 1, 1, -1, &ls));
  KT_OK(kiln_graph_nll_loss(g, ls, vt, -1, KILN_REDUCTION_MEAN, -100, &loss, &tw));
  KT_OK(kiln_graph_scalar(g, 1.0, F32, &one));
  KT_OK(kiln_graph_nll_loss_backward(g, one, ls, vt, -1, KILN_REDUCTION_MEAN, -100, tw, &gl));
  KT_OK(kiln_graph_output(g, loss));
  KT_OK(kiln_graph_output(g, gl));
  kiln_exec_t* e;
  KT_OK(kiln_graph_compile(g, &e));
  float o_loss[1], o_g[30];
  void* ins[3] = {w, idx, tgt};
  void* outs[2] = {o_loss, o_g};
  KT_OK(kiln_exec_run(e, 3, ins, 2, outs));
  /* reference */
  float em_r[30], ls_r[30], loss_r[1], tw_r[1], g_r[30], one_r = 1.0f;
  kiln_tensor_t W = gt_t(w, F32, 2, ws), I = gt_t(idx, KILN_DTYPE_I64, 1, is),
                T = gt_t(tgt, KILN_DTYPE_I64, 1, is), EM = gt_t(em_r, F32, 2, es),
                LS = gt_t(ls_r, F32, 2, es), L = gt_t(loss_r, F32, 0, NULL),
                TW = gt_t(tw_r, F32, 0, NULL), G = gt_t(g_r, F32, 2, es),
                ONE = gt_t(&one_r, F32, 0, NULL);
  KT_OK(kiln_kernel_embedding(&W, &I, &EM));
  KT_OK(kiln_kernel_softmax(&EM, 1, 1, &LS));
  KT_OK(kiln_kernel_nll_loss(&LS, &T, NULL, KILN_REDUCTION_MEAN, -100, &L, &TW));
  KT_OK(kiln_kernel_nll_loss_backward(&ONE, &LS, &T, NULL, KILN_REDUCTION_MEAN, -100, &TW, &G));
  KT_CHECK(o_loss[0] == loss_r[0]);
  KT_CHECK(memcmp(o_g, g_r, sizeof g_r) == 0);
  /* an index out of range is reported by the embedding kernel */
  idx[2] = 10;
  KT_FAILS(KILN_ERROR_OUT_OF_RANGE, kiln_exec_run(e, 3, ins, 2, outs));
  kiln_exec_destroy(e);
  kiln_graph_destroy(g);
  free(w);
}

/* SDPA forward + backward against the kernels (causal). */
KT_TEST(sdpa) {
  int64_t qs[4] = {2, 4, 7, 8}, ks[4] = {2, 2, 7, 8}, ls[3] = {2, 4, 7};
  int64_t nq = 2 * 4 * 7 * 8, nk = 2 * 2 * 7 * 8;
  float* q = gt_randf(nq);
  float* k = gt_randf(nk);
  float* v = gt_randf(nk);
  float* go = gt_randf(nq);
  float* ro = malloc(sizeof(float) * nq);
  float* rl = malloc(sizeof(float) * 56);
  float* rgq = malloc(sizeof(float) * nq);
  float* rgk = malloc(sizeof(float) * nk);
  float* rgv = malloc(sizeof(float) * nk);
  float* oo = malloc(sizeof(float) * nq);
  float* ogq = malloc(sizeof(float) * nq);
  float* ogk = malloc(sizeof(float) * nk);
  float* ogv = malloc(sizeof(float) * nk);
  kiln_tensor_t Q = gt_t(q, F32, 4, qs), K = gt_t(k, F32, 4, ks), V = gt_t(v, F32, 4, ks),
                GO = gt_t(go, F32, 4, qs), RO = gt_t(ro, F32, 4, qs), RL = gt_t(rl, F32, 3, ls),
                RGQ = gt_t(rgq, F32, 4, qs), RGK = gt_t(rgk, F32, 4, ks), RGV = gt_t(rgv, F32, 4, ks);
  KT_OK(kiln_kernel_sdpa(&Q, &K, &V, NULL, 1, NAN, &RO, &RL));
  KT_OK(kiln_kernel_sdpa_backward(&GO, &Q, &K, &V, &RO, &RL, NULL, 1, NAN, &RGQ, &RGK, &RGV));
  kiln_graph_t* g;
  KT_OK(kiln_graph_create(&g));
  int vq, vk, vv, vg, o, lse, gq, gk, gv;
  KT_OK(kiln_graph_input(g, F32, 4, qs, &vq));
  KT_OK(kiln_graph_input(g, F32, 4, ks, &vk));
  KT_OK(kiln_graph_input(g, F32, 4, ks, &vv));
  KT_OK(kiln_graph_input(g, F32, 4, qs, &vg));
  KT_OK(kiln_graph_sdpa(g, vq, vk, vv, -1, 1, NAN, &o, &lse));
  KT_OK(kiln_graph_sdpa_backward(g, vg, vq, vk, vv, o, lse, -1, 1, NAN, &gq, &gk, &gv));
  KT_OK(kiln_graph_output(g, o));
  KT_OK(kiln_graph_output(g, gq));
  KT_OK(kiln_graph_output(g, gk));
  KT_OK(kiln_graph_output(g, gv));
  kiln_exec_t* e;
  KT_OK(kiln_graph_compile(g, &e));
  void* ins[4] = {q, k, v, go};
  void* outs[4] = {oo, ogq, ogk, ogv};
  KT_OK(kiln_exec_run(e, 4, ins, 4, outs));
  KT_CHECK(memcmp(oo, ro, sizeof(float) * nq) == 0);
  KT_CHECK(memcmp(ogq, rgq, sizeof(float) * nq) == 0);
  KT_CHECK(memcmp(ogk, rgk, sizeof(float) * nk) == 0);
  KT_CHECK(memcmp(ogv, rgv, sizeof(float) * nk) == 0);
  kiln_exec_destroy(e);
  kiln_graph_destroy(g);
  free(q);
  free(k);
  free(v);
  free(go);
  free(ro);
  free(rl);
  free(rgq);
  free(rgk);
  free(rgv);
  free(oo);
  free(ogq);
  free(ogk);
  free(ogv);
}

/* f64 and integer graphs, comparisons + where, scalars keep the tensor dtype. */
KT_TEST(dtypes_and_where) {
  int64_t s[1] = {50};
  double xd[50];
  int32_t xi[50];
  uint16_t xh[50];
  for (int i = 0; i < 50; i++) {
    xd[i] = gt_rand() * 4;
    xi[i] = i * 7 - 100;
  }
  kiln_tensor_t XD = gt_t(xd, KILN_DTYPE_F64, 1, s), XH = gt_t(xh, KILN_DTYPE_F16, 1, s);
  KT_OK(kiln_kernel_copy(&XD, &XH));
  kiln_graph_t* g;
  KT_OK(kiln_graph_create(&g));
  int vd, vi, vh, two, m, ex, cmp, w, idiv, half, hs;
  KT_OK(kiln_graph_input(g, KILN_DTYPE_F64, 1, s, &vd));
  KT_OK(kiln_graph_input(g, KILN_DTYPE_I32, 1, s, &vi));
  KT_OK(kiln_graph_input(g, KILN_DTYPE_F16, 1, s, &vh));
  KT_OK(kiln_graph_scalar(g, 2.0, KILN_DTYPE_F64, &two));
  KT_OK(kiln_graph_binary(g, KILN_BINARY_MUL, vd, two, 1.0, KILN_DTYPE_F64, &m));
  KT_OK(kiln_graph_unary(g, KILN_UNARY_EXP, m, KILN_DTYPE_F64, &ex));
  KT_OK(kiln_graph_binary(g, KILN_BINARY_GT, vd, two, 1.0, KILN_DTYPE_BOOL, &cmp));
  KT_OK(kiln_graph_where(g, cmp, ex, vd, &w));
  int three;
  KT_OK(kiln_graph_scalar(g, 3, KILN_DTYPE_I64, &three));
  KT_OK(kiln_graph_binary(g, KILN_BINARY_DIV_FLOOR, vi, three, 1.0, KILN_DTYPE_I32, &idiv));
  KT_OK(kiln_graph_scalar(g, 0.5, KILN_DTYPE_F64, &half));
  KT_OK(kiln_graph_binary(g, KILN_BINARY_MUL, vh, half, 1.0, KILN_DTYPE_F16, &hs));
  int dt;
  KT_OK(kiln_graph_value_info(g, w, &dt, NULL, NULL));
  KT_CHECK(dt == KILN_DTYPE_F64);
  KT_OK(kiln_graph_output(g, w));
  KT_OK(kiln_graph_output(g, idiv));
  KT_OK(kiln_graph_output(g, hs));
  kiln_exec_t* e;
  KT_OK(kiln_graph_compile(g, &e));
  double ow[50];
  int32_t oi[50];
  uint16_t oh[50], rh[50];
  void* ins[3] = {xd, xi, xh};
  void* outs[3] = {ow, oi, oh};
  KT_OK(kiln_exec_run(e, 3, ins, 3, outs));
  double hv = 0.5;
  kiln_tensor_t HV = gt_t(&hv, KILN_DTYPE_F64, 0, NULL), RH = gt_t(rh, KILN_DTYPE_F16, 1, s);
  KT_OK(kiln_kernel_binary(KILN_BINARY_MUL, &XH, &HV, 1.0, KILN_DTYPE_F16, &RH));
  for (int i = 0; i < 50; i++) {
    double want = xd[i] > 2.0 ? exp(2.0 * xd[i]) : xd[i];
    KT_CHECK(fabs(ow[i] - want) <= 1e-12 * (1 + fabs(want)));
    int32_t q = xi[i] / 3;
    if ((xi[i] % 3 != 0) && (xi[i] < 0)) q -= 1;
    KT_CHECK(oi[i] == q);
    KT_CHECK(oh[i] == rh[i]);
  }
  kiln_exec_destroy(e);
  kiln_graph_destroy(g);
}

/* the same exec run many times gives identical results; outputs are fully written. */
KT_TEST(repeat_runs_identical) {
  int64_t s[2] = {64, 96}, ws[2] = {96, 32}, os[2] = {64, 32};
  float* x = gt_randf(64 * 96);
  float* w = gt_randf(96 * 32);
  kiln_graph_t* g;
  KT_OK(kiln_graph_create(&g));
  int vx, vw, m, sm, ln, y;
  KT_OK(kiln_graph_input(g, F32, 2, s, &vx));
  KT_OK(kiln_graph_input(g, F32, 2, ws, &vw));
  KT_OK(kiln_graph_matmul(g, vx, vw, &m));
  KT_OK(kiln_graph_softmax(g, m, 1, 0, -1, &sm));
  KT_OK(kiln_graph_layer_norm(g, sm, -1, -1, 1, 1e-5, &ln, NULL, NULL));
  KT_OK(kiln_graph_unary(g, KILN_UNARY_SILU, ln, F32, &y));
  KT_OK(kiln_graph_output(g, y));
  kiln_exec_t* e;
  KT_OK(kiln_graph_compile(g, &e));
  float first[64 * 32], out[64 * 32];
  void* ins[2] = {x, w};
  void* outs[1] = {first};
  KT_OK(kiln_exec_run(e, 2, ins, 1, outs));
  outs[0] = out;
  for (int rep = 0; rep < 50; rep++) {
    memset(out, 0xff, sizeof out);
    KT_OK(kiln_exec_run(e, 2, ins, 1, outs));
    KT_CHECK(memcmp(out, first, sizeof out) == 0);
  }
  (void)os;
  kiln_exec_destroy(e);
  kiln_graph_destroy(g);
  free(x);
  free(w);
}

/* caller workspaces: same results as the exec's own arena, moving between runs, and a missing,
 * short or misaligned workspace is an error (not a crash, not a write outside it). */
KT_TEST(run_with_workspace) {
  int64_t s[2] = {48, 80}, ws[2] = {80, 40};
  float* x = gt_randf(48 * 80);
  float* w = gt_randf(80 * 40);
  kiln_graph_t* g;
  KT_OK(kiln_graph_create(&g));
  int vx, vw, m, sm, y, r;
  KT_OK(kiln_graph_input(g, F32, 2, s, &vx));
  KT_OK(kiln_graph_input(g, F32, 2, ws, &vw));
  KT_OK(kiln_graph_matmul(g, vx, vw, &m));
  KT_OK(kiln_graph_softmax(g, m, 1, 0, -1, &sm));
  KT_OK(kiln_graph_unary(g, KILN_UNARY_SILU, sm, F32, &y));
  KT_OK(kiln_graph_reduce(g, KILN_REDUCE_SUM, y, 2u, 0, 0.0, F32, &r));
  KT_OK(kiln_graph_output(g, y));
  KT_OK(kiln_graph_output(g, r));
  kiln_exec_t* e;
  KT_OK(kiln_graph_compile(g, &e));
  int64_t need = kiln_exec_workspace_size(e);
  KT_CHECK(need > 0);
  KT_CHECK(need == gt_stats(e).arena_bytes);
  KT_CHECK(kiln_exec_workspace_size(NULL) == 0);
  float ref_y[48 * 40], ref_r[48], out_y[48 * 40], out_r[48];
  void* ins[2] = {x, w};
  void* outs[2] = {ref_y, ref_r};
  KT_OK(kiln_exec_run(e, 2, ins, 2, outs));
  outs[0] = out_y;
  outs[1] = out_r;
  char* block = aligned_alloc(64, (size_t)(need + 192));
  for (int rep = 0; rep < 4; rep++) {
    char* wsp = block + 64 * (rep % 3); /* a different (aligned) workspace each run */
    memset(wsp, rep * 37, (size_t)need);
    memset(out_y, 0xff, sizeof out_y);
    KT_OK(kiln_exec_run_workspace(e, 2, ins, 2, outs, wsp, need));
    KT_CHECK(memcmp(out_y, ref_y, sizeof out_y) == 0);
    KT_CHECK(memcmp(out_r, ref_r, sizeof out_r) == 0);
  }
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_exec_run_workspace(e, 2, ins, 2, outs, NULL, 0));
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_exec_run_workspace(e, 2, ins, 2, outs, block, need - 1));
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_exec_run_workspace(e, 2, ins, 2, outs, block + 8, need));
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_exec_run_workspace(NULL, 2, ins, 2, outs, block, need));
  /* the exec's own arena still works after caller workspaces */
  KT_OK(kiln_exec_run(e, 2, ins, 2, outs));
  KT_CHECK(memcmp(out_y, ref_y, sizeof out_y) == 0);
  free(block);
  kiln_exec_destroy(e);
  kiln_graph_destroy(g);
  free(x);
  free(w);
}

/* A fused reduction whose source register earlier held a smaller dtype (bool mask -> f32),
 * over a column slice (row mode's case): the reduction must read its source intact. Before the
 * fix, row mode let the bool value's later rows overwrite the finished f32 rows (error ~467). */
KT_TEST(row_slice_reduction_after_register_reuse) {
  const int64_t R = 8, W = 256, C = 128;
  for (int fl = 0; fl < 2; fl++) {
    kiln_graph_t* g;
    KT_OK(kiln_graph_create(&g));
    int64_t xs[2] = {R, W};
    int x, xs1, zero, two, m, w, z, sm;
    KT_OK(kiln_graph_input(g, KILN_DTYPE_F32, 2, xs, &x));
    KT_OK(kiln_graph_slice(g, x, 1, 0, C, 1, &xs1));
    KT_OK(kiln_graph_scalar(g, 0.0, KILN_DTYPE_F32, &zero));
    KT_OK(kiln_graph_scalar(g, 2.0, KILN_DTYPE_F32, &two));
    KT_OK(kiln_graph_binary(g, KILN_BINARY_GT, xs1, zero, 1.0, KILN_DTYPE_BOOL, &m));
    KT_OK(kiln_graph_where(g, m, xs1, zero, &w));
    KT_OK(kiln_graph_binary(g, KILN_BINARY_MUL, w, two, 1.0, KILN_DTYPE_F32, &z));
    KT_OK(kiln_graph_reduce(g, KILN_REDUCE_SUM, z, 2u, 1, 0, KILN_DTYPE_F32, &sm));
    KT_OK(kiln_graph_output(g, sm));
    kiln_exec_t* e;
    KT_OK(kiln_graph_compile_ex(g, fl ? KILN_COMPILE_NO_DIRECT_GROUPS : 0, &e));
    KT_CHECK(gt_stats(e).n_reduce_fused == 1);
    float* xd = malloc(sizeof(float) * (size_t)(R * W));
    float out[8];
    for (int64_t i = 0; i < R * W; i++) xd[i] = (float)((i * 37 % 101) - 50) / 7.0f;
    void* ins[1] = {xd};
    void* outs[1] = {out};
    KT_OK(kiln_exec_run(e, 1, ins, 1, outs));
    double maxerr = 0;
    for (int64_t r = 0; r < R; r++) {
      double ref = 0;
      for (int64_t c = 0; c < C; c++) ref += xd[r * W + c] > 0 ? 2.0 * xd[r * W + c] : 0.0;
      if (fabs(ref - out[r]) > maxerr) maxerr = fabs(ref - out[r]);
    }
    KT_CHECK(maxerr < 1e-3);
    free(xd);
    kiln_exec_destroy(e);
    kiln_graph_destroy(g);
  }
}

KT_MAIN()
