/* SPDX-License-Identifier: Apache-2.0 */
/* test_graph_passes.c - each compiler pass is observable in kiln_exec_stats and the dumps. */
#include "test_graph_util.h"

#define F32 KILN_DTYPE_F32

static char* dump_str(kiln_exec_t* e, int stage) {
  size_t need = 0;
  KT_OK(kiln_exec_dump(e, stage, NULL, 0, &need));
  char* buf = malloc(need);
  size_t need2 = 0;
  KT_OK(kiln_exec_dump(e, stage, buf, need, &need2));
  KT_CHECK(need2 == need && strlen(buf) + 1 == need);
  return buf;
}

KT_TEST(dce_removes_unused) {
  int64_t s[1] = {16};
  kiln_graph_t* g;
  KT_OK(kiln_graph_create(&g));
  int x, a, b, c, y;
  KT_OK(kiln_graph_input(g, F32, 1, s, &x));
  KT_OK(kiln_graph_unary(g, KILN_UNARY_EXP, x, F32, &a));  /* unused */
  KT_OK(kiln_graph_unary(g, KILN_UNARY_SIN, a, F32, &b));  /* unused */
  KT_OK(kiln_graph_unary(g, KILN_UNARY_COS, x, F32, &c));
  KT_OK(kiln_graph_unary(g, KILN_UNARY_NEG, c, F32, &y));
  KT_OK(kiln_graph_output(g, y));
  kiln_exec_t* e;
  KT_OK(kiln_graph_compile_ex(g, KILN_COMPILE_NO_FUSION, &e));
  kiln_exec_stats_t st = gt_stats(e);
  KT_CHECK(st.n_nodes_before == 4);
  KT_CHECK(st.n_dce == 2);
  KT_CHECK(st.n_nodes_after == 2);
  kiln_exec_destroy(e);
  /* with DCE off the unused nodes run too */
  KT_OK(kiln_graph_compile_ex(g, KILN_COMPILE_NO_FUSION | KILN_COMPILE_NO_DCE, &e));
  st = gt_stats(e);
  KT_CHECK(st.n_dce == 0);
  KT_CHECK(st.n_nodes_after == 4);
  float xin[16], out[16];
  for (int i = 0; i < 16; i++) xin[i] = (float)i / 8;
  void* ins[1] = {xin};
  void* outs[1] = {out};
  KT_OK(kiln_exec_run(e, 1, ins, 1, outs));
  for (int i = 0; i < 16; i++) KT_CHECK(out[i] == -cosf(xin[i]) || fabsf(out[i] + cosf(xin[i])) < 1e-6f);
  kiln_exec_destroy(e);
  kiln_graph_destroy(g);
}

KT_TEST(cse_merges_duplicates) {
  int64_t s[2] = {4, 8};
  kiln_graph_t* g;
  KT_OK(kiln_graph_create(&g));
  int x, w, a1, a2, s1, s2, c1, c2, m1, m2, y;
  KT_OK(kiln_graph_input(g, F32, 2, s, &x));
  KT_OK(kiln_graph_input(g, F32, 2, s, &w));
  KT_OK(kiln_graph_binary(g, KILN_BINARY_MUL, x, w, 1.0, F32, &a1));
  KT_OK(kiln_graph_binary(g, KILN_BINARY_MUL, x, w, 1.0, F32, &a2)); /* same as a1 */
  KT_OK(kiln_graph_scalar(g, 2.0, F32, &c1));
  KT_OK(kiln_graph_scalar(g, 2.0, F32, &c2)); /* same constant */
  KT_OK(kiln_graph_binary(g, KILN_BINARY_ADD, a1, c1, 1.0, F32, &s1));
  KT_OK(kiln_graph_binary(g, KILN_BINARY_ADD, a2, c2, 1.0, F32, &s2)); /* same after merging */
  KT_OK(kiln_graph_binary(g, KILN_BINARY_ADD, a2, c2, 0.5, F32, &m1)); /* alpha differs */
  KT_OK(kiln_graph_binary(g, KILN_BINARY_SUB, s1, s2, 1.0, F32, &m2));
  KT_OK(kiln_graph_binary(g, KILN_BINARY_ADD, m1, m2, 1.0, F32, &y));
  KT_OK(kiln_graph_output(g, y));
  kiln_exec_t* e;
  KT_OK(kiln_graph_compile_ex(g, KILN_COMPILE_NO_FUSION, &e));
  kiln_exec_stats_t st = gt_stats(e);
  KT_CHECK(st.n_cse == 2);
  KT_CHECK(st.n_nodes_after == 5);
  kiln_exec_destroy(e);
  KT_OK(kiln_graph_compile_ex(g, KILN_COMPILE_NO_FUSION | KILN_COMPILE_NO_CSE, &e));
  KT_CHECK(gt_stats(e).n_cse == 0);
  KT_CHECK(gt_stats(e).n_nodes_after == 7);
  kiln_exec_destroy(e);
  kiln_graph_destroy(g);
}

KT_TEST(constant_folding) {
  int64_t s[1] = {5};
  float cdata[5] = {1, 2, 3, 4, 5};
  kiln_graph_t* g;
  KT_OK(kiln_graph_create(&g));
  int x, c, two, c2, c3, y;
  KT_OK(kiln_graph_input(g, F32, 1, s, &x));
  KT_OK(kiln_graph_constant(g, F32, 1, s, cdata, &c));
  KT_OK(kiln_graph_scalar(g, 2.0, F32, &two));
  KT_OK(kiln_graph_binary(g, KILN_BINARY_MUL, c, two, 1.0, F32, &c2)); /* folded */
  KT_OK(kiln_graph_unary(g, KILN_UNARY_SQRT, c2, F32, &c3));           /* folded */
  KT_OK(kiln_graph_binary(g, KILN_BINARY_ADD, x, c3, 1.0, F32, &y));
  KT_OK(kiln_graph_output(g, y));
  KT_OK(kiln_graph_output(g, c3));
  kiln_exec_t* e;
  KT_OK(kiln_graph_compile(g, &e));
  kiln_exec_stats_t st = gt_stats(e);
  KT_CHECK(st.n_folded == 2);
  KT_CHECK(st.n_nodes_after == 1);
  float xin[5] = {10, 20, 30, 40, 50}, out[5], oc[5];
  void* ins[1] = {xin};
  void* outs[2] = {out, oc};
  KT_OK(kiln_exec_run(e, 1, ins, 2, outs));
  for (int i = 0; i < 5; i++) {
    KT_CHECK(oc[i] == sqrtf(2.0f * cdata[i]));
    KT_CHECK(out[i] == xin[i] + sqrtf(2.0f * cdata[i]));
  }
  kiln_exec_destroy(e);
  KT_OK(kiln_graph_compile_ex(g, KILN_COMPILE_NO_FOLD, &e));
  KT_CHECK(gt_stats(e).n_folded == 0);
  kiln_exec_destroy(e);
  kiln_graph_destroy(g);
}

KT_TEST(fusion_groups_count) {
  /* two independent chains separated by a matmul: two groups */
  int64_t s[2] = {16, 16};
  kiln_graph_t* g;
  KT_OK(kiln_graph_create(&g));
  int x, a, b, m, c, d, y;
  KT_OK(kiln_graph_input(g, F32, 2, s, &x));
  KT_OK(kiln_graph_unary(g, KILN_UNARY_EXP, x, F32, &a));
  KT_OK(kiln_graph_unary(g, KILN_UNARY_TANH, a, F32, &b));
  KT_OK(kiln_graph_matmul(g, b, b, &m));
  KT_OK(kiln_graph_unary(g, KILN_UNARY_SIN, m, F32, &c));
  KT_OK(kiln_graph_binary(g, KILN_BINARY_MUL, c, x, 1.0, F32, &d));
  KT_OK(kiln_graph_unary(g, KILN_UNARY_ABS, d, F32, &y));
  KT_OK(kiln_graph_output(g, y));
  kiln_exec_t* e;
  KT_OK(kiln_graph_compile(g, &e));
  kiln_exec_stats_t st = gt_stats(e);
  KT_CHECK(st.n_fused_groups == 2);
  KT_CHECK(st.n_fused_nodes == 5);
  KT_CHECK(st.n_nodes_after == 3);
  KT_CHECK(st.n_kernels_per_run == 3);
  char* txt = dump_str(e, KILN_DUMP_GROUPS);
  KT_CHECK(strstr(txt, "group 0") && strstr(txt, "group 1"));
  KT_CHECK(strstr(txt, "unary.tanh"));
  free(txt);
  kiln_exec_destroy(e);
  KT_OK(kiln_graph_compile_ex(g, KILN_COMPILE_NO_FUSION, &e));
  KT_CHECK(gt_stats(e).n_fused_groups == 0);
  KT_CHECK(gt_stats(e).n_nodes_after == 6);
  kiln_exec_destroy(e);
  kiln_graph_destroy(g);
}

/* a node that reads a member of a would-be group through a transposed view must not join it;
 * results stay right. */
KT_TEST(fusion_respects_views_and_order) {
  int64_t s[2] = {40, 40};
  float* xin = gt_randf(1600);
  kiln_graph_t* g;
  KT_OK(kiln_graph_create(&g));
  int x, a, at, b, y;
  int perm[2] = {1, 0};
  KT_OK(kiln_graph_input(g, F32, 2, s, &x));
  KT_OK(kiln_graph_unary(g, KILN_UNARY_EXP, x, F32, &a));
  KT_OK(kiln_graph_permute(g, a, perm, &at));
  KT_OK(kiln_graph_binary(g, KILN_BINARY_ADD, a, at, 1.0, F32, &b)); /* a + a.T */
  KT_OK(kiln_graph_unary(g, KILN_UNARY_SQRT, b, F32, &y));
  KT_OK(kiln_graph_output(g, y));
  kiln_exec_t* e;
  KT_OK(kiln_graph_compile(g, &e));
  float out[1600];
  void* ins[1] = {xin};
  void* outs[1] = {out};
  KT_OK(kiln_exec_run(e, 1, ins, 1, outs));
  for (int i = 0; i < 40; i++)
    for (int j = 0; j < 40; j++) {
      float want = sqrtf(expf(xin[i * 40 + j]) + expf(xin[j * 40 + i]));
      KT_CHECK(fabsf(out[i * 40 + j] - want) <= 1e-6f * want);
    }
  KT_CHECK(gt_stats(e).n_fused_groups == 1); /* (add, sqrt) only */
  kiln_exec_destroy(e);
  kiln_graph_destroy(g);
  free(xin);
}

KT_TEST(epilogue_used_and_dumped) {
  int64_t xs[2] = {8, 16}, ws[2] = {16, 12}, bs[1] = {12};
  kiln_graph_t* g;
  KT_OK(kiln_graph_create(&g));
  int x, w, b, m, a, y;
  KT_OK(kiln_graph_input(g, F32, 2, xs, &x));
  KT_OK(kiln_graph_input(g, F32, 2, ws, &w));
  KT_OK(kiln_graph_input(g, F32, 1, bs, &b));
  KT_OK(kiln_graph_matmul(g, x, w, &m));
  KT_OK(kiln_graph_binary(g, KILN_BINARY_ADD, b, m, 1.0, F32, &a));
  KT_OK(kiln_graph_unary(g, KILN_UNARY_SILU, a, F32, &y));
  KT_OK(kiln_graph_output(g, y));
  kiln_exec_t* e;
  KT_OK(kiln_graph_compile(g, &e));
  kiln_exec_stats_t st = gt_stats(e);
  KT_CHECK(st.n_epilogues == 1 && st.n_epilogue_ops == 2);
  KT_CHECK(st.n_nodes_after == 1);
  char* txt = dump_str(e, KILN_DUMP_AFTER);
  KT_CHECK(strstr(txt, "gemm_epilogue") != NULL);
  KT_CHECK(strstr(txt, "act=silu") != NULL);
  free(txt);
  kiln_exec_destroy(e);
  /* f64 matmuls keep the plain kernel */
  kiln_graph_t* g2;
  KT_OK(kiln_graph_create(&g2));
  KT_OK(kiln_graph_input(g2, KILN_DTYPE_F64, 2, xs, &x));
  KT_OK(kiln_graph_input(g2, KILN_DTYPE_F64, 2, ws, &w));
  KT_OK(kiln_graph_matmul(g2, x, w, &m));
  KT_OK(kiln_graph_unary(g2, KILN_UNARY_RELU, m, KILN_DTYPE_F64, &y));
  KT_OK(kiln_graph_output(g2, y));
  KT_OK(kiln_graph_compile(g2, &e));
  KT_CHECK(gt_stats(e).n_epilogues == 0);
  kiln_exec_destroy(e);
  kiln_graph_destroy(g2);
  kiln_graph_destroy(g);
}

/* a chain of non-fused ops: intermediates share the arena, arena < sum of intermediates */
KT_TEST(memory_plan_reuses) {
  int64_t s[2] = {32, 64};
  float* xin = gt_randf(32 * 64);
  kiln_graph_t* g;
  KT_OK(kiln_graph_create(&g));
  int x, v;
  KT_OK(kiln_graph_input(g, F32, 2, s, &x));
  v = x;
  for (int i = 0; i < 8; i++) {
    int nv;
    KT_OK(kiln_graph_softmax(g, v, i % 2, 0, -1, &nv));
    v = nv;
    if (i == 3) { /* a pointwise op in the middle can overwrite its dead input */
      KT_OK(kiln_graph_unary(g, KILN_UNARY_NEG, v, F32, &nv));
      v = nv;
    }
  }
  int y;
  KT_OK(kiln_graph_unary(g, KILN_UNARY_ABS, v, F32, &y));
  KT_OK(kiln_graph_output(g, y));
  float ref[32 * 64], out[32 * 64];
  kiln_exec_t* e;
  KT_OK(kiln_graph_compile_ex(g, KILN_COMPILE_NO_MEMORY_REUSE, &e));
  void* ins[1] = {xin};
  void* outs[1] = {ref};
  KT_OK(kiln_exec_run(e, 1, ins, 1, outs));
  kiln_exec_stats_t st0 = gt_stats(e);
  KT_CHECK(st0.arena_bytes == st0.intermediates_bytes);
  kiln_exec_destroy(e);
  KT_OK(kiln_graph_compile(g, &e));
  kiln_exec_stats_t st = gt_stats(e);
  KT_CHECK(st.intermediates_bytes == 9 * 32 * 64 * 4);
  KT_CHECK(st.arena_bytes == 2 * 32 * 64 * 4);
  KT_CHECK(st.arena_bytes < st.intermediates_bytes);
  KT_CHECK(st.n_inplace == 1); /* neg writes over the dead softmax result */
  outs[0] = out;
  KT_OK(kiln_exec_run(e, 1, ins, 1, outs));
  KT_CHECK(memcmp(out, ref, sizeof ref) == 0);
  char* txt = dump_str(e, KILN_DUMP_PLAN);
  KT_CHECK(strstr(txt, "memory plan: arena 16384 bytes") != NULL);
  free(txt);
  kiln_exec_destroy(e);
  kiln_graph_destroy(g);
  free(xin);
}

/* in-place reuse inside a fused group (the dead input of the group is overwritten). */
KT_TEST(inplace_fused) {
  int64_t s[2] = {64, 64};
  float* xin = gt_randf(64 * 64);
  kiln_graph_t* g;
  KT_OK(kiln_graph_create(&g));
  int x, sm, a, b, c, y;
  KT_OK(kiln_graph_input(g, F32, 2, s, &x));
  KT_OK(kiln_graph_softmax(g, x, 1, 0, -1, &sm));
  KT_OK(kiln_graph_unary(g, KILN_UNARY_LOG, sm, F32, &a));
  KT_OK(kiln_graph_unary(g, KILN_UNARY_NEG, a, F32, &b));
  KT_OK(kiln_graph_softmax(g, b, 0, 0, -1, &c));
  KT_OK(kiln_graph_unary(g, KILN_UNARY_EXP, c, F32, &y));
  KT_OK(kiln_graph_output(g, y));
  kiln_exec_t* e;
  float ref[64 * 64], out[64 * 64];
  void* ins[1] = {xin};
  void* outs[1] = {ref};
  KT_OK(kiln_graph_compile_ex(g, KILN_COMPILE_NO_INPLACE | KILN_COMPILE_NO_FUSION, &e));
  KT_OK(kiln_exec_run(e, 1, ins, 1, outs));
  kiln_exec_destroy(e);
  KT_OK(kiln_graph_compile(g, &e));
  kiln_exec_stats_t st = gt_stats(e);
  KT_CHECK(st.n_fused_groups == 1);
  KT_CHECK(st.n_inplace == 1);
  KT_CHECK(st.arena_bytes == 2 * 64 * 64 * 4);
  outs[0] = out;
  KT_OK(kiln_exec_run(e, 1, ins, 1, outs));
  KT_CHECK(memcmp(out, ref, sizeof ref) == 0);
  kiln_exec_destroy(e);
  kiln_graph_destroy(g);
  free(xin);
}

/* A fused group where one f64 input feeds an f32 binary (the direct path would present it
 * converted) and a cast to i64 (which must read the f64 value itself): such a group stays on the
 * staged path, and both compiles give the exact result. */
KT_TEST(direct_group_input_read_in_two_types) {
  int64_t s[2] = {16, 300};
  kiln_graph_t* g;
  KT_OK(kiln_graph_create(&g));
  int x, b, bf, a;
  KT_OK(kiln_graph_input(g, KILN_DTYPE_F64, 2, s, &x));
  KT_OK(kiln_graph_cast(g, x, KILN_DTYPE_I64, &b));
  KT_OK(kiln_graph_cast(g, b, F32, &bf));
  KT_OK(kiln_graph_binary_ex(g, KILN_BINARY_SUB, bf, x, 1.0, F32, F32, &a));
  KT_OK(kiln_graph_output(g, a));
  double* xin = malloc(sizeof(double) * 16 * 300);
  for (int i = 0; i < 16 * 300; i++) xin[i] = 16777217.5 + 4.0 * (double)(i % 7); /* not f32 */
  static float oa[2][16 * 300];
  for (int pass = 0; pass < 2; pass++) {
    kiln_exec_t* e;
    KT_OK(kiln_graph_compile_ex(g, pass ? KILN_COMPILE_NO_DIRECT_GROUPS : 0, &e));
    KT_CHECK(gt_stats(e).n_fused_groups == 1);
    void* ins[1] = {xin};
    void* outs[1] = {oa[pass]};
    KT_OK(kiln_exec_run(e, 1, ins, 1, outs));
    kiln_exec_destroy(e);
  }
  KT_CHECK(memcmp(oa[0], oa[1], sizeof oa[0]) == 0);
  /* (f32)(i64)x - (f32)x: the cast truncates the f64 value (16777217), not its f32 rounding
   * (16777218), so the result is -2, not 0 */
  for (int i = 0; i < 16 * 300; i++)
    KT_CHECK(oa[0][i] == (float)(int64_t)xin[i] - (float)xin[i] && oa[0][i] == -2.0f);
  free(xin);
  kiln_graph_destroy(g);
}

/* x @ W1^T, x @ W2^T and x @ W3^T (weights [N, K]; or x @ B1 with a [K, N] weight) share x:
 * with M >= 64 they become one GEMM on stacked weights, results column slices (a result that is
 * itself a graph output stays separate); the same numbers as
 * separate GEMMs up to rounding (a narrow product may take the unpacked kernel, which sums in
 * another order). Small M is left alone. Transposed weights are read in place by the GEMM (no
 * cat step): the same bits as the materialized cat (the epilogue pass off). */
KT_TEST(horizontal_gemm_fusion) {
  for (int small = 0; small < 2; small++) {
    for (int mixed = 0; mixed < 2; mixed++) {
      const int64_t M = small ? 8 : 96, K = 40, N[3] = {48, 16, 24};
      kiln_graph_t* g;
      KT_OK(kiln_graph_create(&g));
      int x, w[3], r[3], perm[2] = {1, 0};
      int64_t xs[2] = {M, K};
      KT_OK(kiln_graph_input(g, F32, 2, xs, &x));
      for (int k = 0; k < 3; k++) {
        int64_t ws[2] = {N[k], K}, bs[2] = {K, N[k]};
        int b;
        if (mixed && k == 0) { /* a [K, N] weight: the weights are stacked along dim 1 */
          KT_OK(kiln_graph_input(g, F32, 2, bs, &w[k]));
          b = w[k];
        } else {
          KT_OK(kiln_graph_input(g, F32, 2, ws, &w[k]));
          KT_OK(kiln_graph_permute(g, w[k], perm, &b));
        }
        KT_OK(kiln_graph_matmul(g, x, b, &r[k]));
      }
      int sg, prod;
      KT_OK(kiln_graph_unary(g, KILN_UNARY_SILU, r[1], F32, &sg));
      int sl;
      KT_OK(kiln_graph_slice(g, r[0], 1, 8, 24, 1, &sl));
      KT_OK(kiln_graph_binary(g, KILN_BINARY_MUL, sg, sl, 1.0, F32, &prod)); /* [M, 16] */
      KT_OK(kiln_graph_output(g, prod));
      int n0, n2;
      KT_OK(kiln_graph_unary(g, KILN_UNARY_NEG, r[0], F32, &n0));
      KT_OK(kiln_graph_output(g, n0));
      if (mixed) { /* r2 itself an output (as a training forward saves it): not merged */
        KT_OK(kiln_graph_output(g, r[2]));
      } else {
        KT_OK(kiln_graph_unary(g, KILN_UNARY_NEG, r[2], F32, &n2));
        KT_OK(kiln_graph_output(g, n2));
      }
      float* xin = gt_randf(M * K);
      float* win[3];
      for (int k = 0; k < 3; k++) win[k] = gt_randf(N[k] * K);
      float* out[3][3];
      int64_t steps[3];
      for (int pass = 0; pass < 3; pass++) { /* default, no hfuse, cat materialized */
        kiln_exec_t* e;
        KT_OK(kiln_graph_compile_ex(g, pass == 1 ? KILN_COMPILE_NO_HFUSE : pass ? KILN_COMPILE_NO_EPILOGUE : 0, &e));
        KT_CHECK(gt_stats(e).n_gemms_merged == (pass == 1 || small ? 0 : mixed ? 2 : 3));
        KT_CHECK(gt_stats(e).n_weight_cats_read_in_place == (pass == 0 && !small && !mixed));
        steps[pass] = gt_stats(e).n_kernels_per_run;
        out[pass][0] = malloc(sizeof(float) * (size_t)(M * 16));
        out[pass][1] = malloc(sizeof(float) * (size_t)(M * N[0]));
        out[pass][2] = malloc(sizeof(float) * (size_t)(M * N[2]));
        void* ins[4] = {xin, win[0], win[1], win[2]};
        KT_OK(kiln_exec_run(e, 4, ins, 3, (void**)out[pass]));
        kiln_exec_destroy(e);
      }
      if (!small && !mixed) KT_CHECK(steps[0] == steps[2] - 1); /* no cat step */
      for (int k = 0; k < 3; k++) {
        const int64_t len = M * (k == 0 ? 16 : k == 1 ? N[0] : N[2]);
        KT_CHECK(memcmp(out[0][k], out[2][k], sizeof(float) * (size_t)len) == 0);
      }
      KT_CHECK(gt_maxrel(out[0][0], out[1][0], M * 16) < 1e-5);
      KT_CHECK(gt_maxrel(out[0][1], out[1][1], M * N[0]) < 1e-5);
      KT_CHECK(gt_maxrel(out[0][2], out[1][2], M * N[2]) < 1e-5);
      /* against a direct reference for output 1 (-(x @ W1^T)) */
      double worst = 0;
      for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N[0]; j++) {
          double acc = 0;
          for (int64_t p = 0; p < K; p++)
            acc += (double)xin[i * K + p] * win[0][mixed ? p * N[0] + j : j * K + p];
          double d = fabs(acc + out[0][1][i * N[0] + j]);
          if (d > worst) worst = d;
        }
      KT_CHECK(worst < 1e-4);
      for (int pass = 0; pass < 3; pass++)
        for (int k = 0; k < 3; k++) free(out[pass][k]);
      free(xin);
      for (int k = 0; k < 3; k++) free(win[k]);
      kiln_graph_destroy(g);
    }
  }
}

KT_TEST(profiling_counts_steps) {
  int64_t s[2] = {64, 300};
  kiln_graph_t* g;
  KT_OK(kiln_graph_create(&g));
  int x, a, b, y;
  KT_OK(kiln_graph_input(g, F32, 2, s, &x));
  KT_OK(kiln_graph_unary(g, KILN_UNARY_EXP, x, F32, &a));
  KT_OK(kiln_graph_softmax(g, a, 1, 0, -1, &b));
  KT_OK(kiln_graph_unary(g, KILN_UNARY_NEG, b, F32, &y));
  KT_OK(kiln_graph_output(g, y));
  kiln_exec_t* e;
  KT_OK(kiln_graph_compile(g, &e));
  char* d = dump_str(e, KILN_DUMP_PROFILE);
  KT_CHECK(strstr(d, "profile: off") != NULL);
  free(d);
  KT_CHECK(kiln_exec_set_profiling(NULL, 1) == KILN_ERROR_INVALID_ARGUMENT);
  KT_OK(kiln_exec_set_profiling(e, 1));
  float* xin = gt_randf(64 * 300);
  float* out = malloc(sizeof(float) * 64 * 300);
  void* ins[1] = {xin};
  void* outs[1] = {out};
  for (int r = 0; r < 3; r++) KT_OK(kiln_exec_run(e, 1, ins, 1, outs));
  d = dump_str(e, KILN_DUMP_PROFILE);
  KT_CHECK(strstr(d, "profile: 3 runs") != NULL);
  KT_CHECK(strstr(d, "by op kind") != NULL && strstr(d, "softmax") != NULL);
  KT_CHECK(strstr(d, "step 0:") != NULL);
  free(d);
  KT_OK(kiln_exec_set_profiling(e, 1)); /* restart: counters reset */
  d = dump_str(e, KILN_DUMP_PROFILE);
  KT_CHECK(strstr(d, "profile: 0 runs") != NULL);
  free(d);
  KT_OK(kiln_exec_set_profiling(e, 0));
  KT_OK(kiln_exec_run(e, 1, ins, 1, outs)); /* runs fine with the counters gone */
  d = dump_str(e, KILN_DUMP_PROFILE);
  KT_CHECK(strstr(d, "profile: off") != NULL);
  free(d);
  KT_CHECK(kiln_exec_dump(e, 6, NULL, 0, NULL) == KILN_ERROR_INVALID_ARGUMENT);
  free(xin);
  free(out);
  kiln_exec_destroy(e);
  kiln_graph_destroy(g);
}

KT_TEST(dumps_and_svg) {
  int64_t s[2] = {4, 4};
  kiln_graph_t* g;
  KT_OK(kiln_graph_create(&g));
  int x, a, b, r, y;
  KT_OK(kiln_graph_input(g, F32, 2, s, &x));
  KT_OK(kiln_graph_unary(g, KILN_UNARY_EXP, x, F32, &a));
  KT_OK(kiln_graph_binary(g, KILN_BINARY_MUL, a, x, 1.0, F32, &b));
  KT_OK(kiln_graph_reduce(g, KILN_REDUCE_SUM, b, 2, 0, 0, F32, &r));
  KT_OK(kiln_graph_softmax(g, r, 0, 0, -1, &y));
  KT_OK(kiln_graph_output(g, y));
  size_t need = 0;
  KT_OK(kiln_graph_dump(g, NULL, 0, &need));
  char* gb = malloc(need);
  KT_OK(kiln_graph_dump(g, gb, need, NULL));
  KT_CHECK(strstr(gb, "unary.exp") && strstr(gb, "reduce.sum"));
  /* truncation keeps a terminated prefix */
  char small[16];
  size_t need2 = 0;
  KT_OK(kiln_graph_dump(g, small, sizeof small, &need2));
  KT_CHECK(need2 == need && strlen(small) == sizeof small - 1);
  free(gb);
  kiln_exec_t* e;
  KT_OK(kiln_graph_compile(g, &e));
  KT_CHECK(gt_stats(e).n_reduce_fused == 1);
  char* all = dump_str(e, KILN_DUMP_ALL);
  KT_CHECK(strstr(all, "==== before passes") && strstr(all, "==== after passes") &&
           strstr(all, "==== fusion groups") && strstr(all, "==== memory plan"));
  KT_CHECK(strstr(all, "reduce.sum(") != NULL);
  free(all);
  KT_OK(kiln_exec_dump_svg(e, NULL, 0, &need));
  char* svg = malloc(need);
  KT_OK(kiln_exec_dump_svg(e, svg, need, NULL));
  KT_CHECK(strncmp(svg, "<svg", 4) == 0 && strstr(svg, "</svg>") && strstr(svg, "fused group"));
  free(svg);
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_exec_dump(e, 9, NULL, 0, NULL));
  kiln_exec_destroy(e);
  kiln_graph_destroy(g);
}

KT_MAIN()

/* mul(x, sigmoid(x)) (decomposed silu) becomes one silu, with the bits of the silu kernel; a
 * sigmoid that is used elsewhere stays, and so does its product. */
KT_TEST(silu_peephole) {
  int64_t sh[2] = {33, 20};
  const int64_t n = 33 * 20;
  kiln_graph_t* g;
  KT_OK(kiln_graph_create(&g));
  int x, x2, s, m, s2, m2;
  KT_OK(kiln_graph_input(g, F32, 2, sh, &x));
  KT_OK(kiln_graph_input(g, F32, 2, sh, &x2));
  KT_OK(kiln_graph_unary(g, KILN_UNARY_SIGMOID, x, F32, &s));
  KT_OK(kiln_graph_binary(g, KILN_BINARY_MUL, x, s, 1.0, F32, &m));
  KT_OK(kiln_graph_unary(g, KILN_UNARY_SIGMOID, x2, F32, &s2));
  KT_OK(kiln_graph_binary(g, KILN_BINARY_MUL, s2, x2, 1.0, F32, &m2));
  KT_OK(kiln_graph_output(g, m));
  KT_OK(kiln_graph_output(g, m2));
  KT_OK(kiln_graph_output(g, s2));
  float* xv = gt_randf(n);
  float* x2v = gt_randf(n);
  for (int64_t i = 0; i < n; i++) xv[i] *= 30.0f; /* the exp clamps and tails too */
  float *o1 = malloc(sizeof(float) * n), *o2 = malloc(sizeof(float) * n),
        *o3 = malloc(sizeof(float) * n), *w1 = malloc(sizeof(float) * n),
        *w2 = malloc(sizeof(float) * n), *w3 = malloc(sizeof(float) * n);
  for (int flags = 0; flags < 2; flags++) {
    kiln_exec_t* e;
    KT_OK(kiln_graph_compile_ex(g, flags ? KILN_COMPILE_NO_PEEPHOLE : 0, &e));
    void* ins[2] = {xv, x2v};
    void* outs[3] = {o1, o2, o3};
    KT_OK(kiln_exec_run(e, 2, ins, 3, outs));
    char* txt = dump_str(e, KILN_DUMP_ALL);
    const char* silu = strstr(txt, "unary.silu");
    KT_CHECK((silu != NULL) == !flags);
    if (silu) KT_CHECK(strstr(silu + 1, "unary.silu") == NULL); /* only the first product */
    KT_CHECK(strstr(txt, "sigmoid") != NULL);
    free(txt);
    kiln_exec_destroy(e);
    /* the eager ops on the same data */
    kiln_tensor_t tx = gt_t(xv, F32, 2, sh), tx2 = gt_t(x2v, F32, 2, sh);
    kiln_tensor_t t1 = gt_t(w1, F32, 2, sh), t2 = gt_t(w2, F32, 2, sh), t3 = gt_t(w3, F32, 2, sh);
    if (flags) {
      kiln_tensor_t ts = gt_t(w3, F32, 2, sh);
      KT_OK(kiln_kernel_unary(KILN_UNARY_SIGMOID, &tx, F32, &ts));
      KT_OK(kiln_kernel_binary(KILN_BINARY_MUL, &tx, &ts, 1.0, F32, &t1));
    } else {
      KT_OK(kiln_kernel_unary(KILN_UNARY_SILU, &tx, F32, &t1));
    }
    KT_OK(kiln_kernel_unary(KILN_UNARY_SIGMOID, &tx2, F32, &t3));
    KT_OK(kiln_kernel_binary(KILN_BINARY_MUL, &t3, &tx2, 1.0, F32, &t2));
    KT_CHECK(memcmp(o1, w1, sizeof(float) * n) == 0);
    KT_CHECK(memcmp(o2, w2, sizeof(float) * n) == 0);
    KT_CHECK(memcmp(o3, w3, sizeof(float) * n) == 0);
  }
  free(xv); free(x2v); free(o1); free(o2); free(o3); free(w1); free(w2); free(w3);
  kiln_graph_destroy(g);
}

/* The cross-entropy backward, log_softmax_bw(nll_loss_bw(g, y), y): the peephole runs it as one
 * node (no softmax_bw step, no [N, C] intermediate), with the bits of the two nodes (peephole
 * off), for each reduction, with weights and ignored targets; a second reader of the nll
 * gradient keeps the two nodes. */
KT_TEST(nll_log_softmax_backward_fused) {
  int64_t xs[2] = {40, 13}, ts[1] = {40}, cs[1] = {13};
  float* x = gt_randf(40 * 13);
  float* w = gt_randf(13);
  for (int i = 0; i < 13; i++) w[i] = 0.5f + w[i] * w[i];
  int64_t tgt[40];
  for (int i = 0; i < 40; i++) tgt[i] = i % 7 == 3 ? -100 : (i * 5) % 13;
  for (int c = 0; c < 4; c++) { /* reduction 0/1/2, and 3: mean with the gradient read twice */
    const int red = c == 3 ? KILN_REDUCTION_MEAN : c;
    kiln_graph_t* g;
    KT_OK(kiln_graph_create(&g));
    int vx, vt, vw, ls, loss, tw, go, gl, gx;
    KT_OK(kiln_graph_input(g, F32, 2, xs, &vx));
    KT_OK(kiln_graph_input(g, KILN_DTYPE_I64, 1, ts, &vt));
    KT_OK(kiln_graph_input(g, F32, 1, cs, &vw));
    KT_OK(kiln_graph_softmax(g, vx, 1, 1, -1, &ls));
    KT_OK(kiln_graph_nll_loss(g, ls, vt, vw, red, -100, &loss, &tw));
    if (red == KILN_REDUCTION_NONE) KT_OK(kiln_graph_unary(g, KILN_UNARY_NEG, loss, F32, &go));
    else KT_OK(kiln_graph_scalar(g, 0.75, F32, &go));
    KT_OK(kiln_graph_nll_loss_backward(g, go, ls, vt, vw, red, -100, tw, &gl));
    KT_OK(kiln_graph_softmax_backward(g, gl, ls, 1, 1, -1, &gx));
    KT_OK(kiln_graph_output(g, gx));
    if (c == 3) KT_OK(kiln_graph_output(g, gl));
    float out[2][2][40 * 13];
    for (int pass = 0; pass < 2; pass++) {
      kiln_exec_t* e;
      KT_OK(kiln_graph_compile_ex(g, pass ? KILN_COMPILE_NO_PEEPHOLE : 0, &e));
      char* txt = dump_str(e, KILN_DUMP_ALL);
      const char* after = strstr(txt, "after passes");
      KT_CHECK(after != NULL && (strstr(after, "softmax_bw") == NULL) == (pass == 0 && c != 3));
      free(txt);
      void* ins[3] = {x, tgt, w};
      void* outs[2] = {out[pass][0], out[pass][1]};
      KT_OK(kiln_exec_run(e, 3, ins, c == 3 ? 2 : 1, outs));
      kiln_exec_destroy(e);
    }
    KT_CHECK(memcmp(out[0][0], out[1][0], sizeof out[0][0]) == 0);
    if (c == 3) KT_CHECK(memcmp(out[0][1], out[1][1], sizeof out[0][1]) == 0);
    kiln_graph_destroy(g);
  }
  free(x);
  free(w);
}

/* contiguous(permute(R)) with R attention's output, a pointwise result, a reshape of a
 * pointwise result or one of attention's gradients (an optional output, otherwise unread), read
 * by nothing else: R is written straight into the contiguous result (no copy step), with the
 * bits of the copy (cat elision off); R with a second reader keeps the copy. */
KT_TEST(contiguous_elision) {
  /* 0 attention, 1 pointwise, 2 attention read twice, 3 reshape of a pointwise result,
   * 4 attention's dv, 5 attention's dq */
  for (int c = 0; c < 6; c++) {
    kiln_graph_t* g;
    KT_OK(kiln_graph_create(&g));
    int64_t qs[4] = {2, 4, 24, 16}, q5[5] = {2, 4, 24, 8, 2};
    int q, k, v, r, pr, ct, w, y, perm[4] = {0, 2, 1, 3};
    KT_OK(kiln_graph_input(g, F32, 4, qs, &q));
    KT_OK(kiln_graph_input(g, F32, 4, qs, &k));
    KT_OK(kiln_graph_input(g, F32, 4, qs, &v));
    if (c == 1) {
      KT_OK(kiln_graph_binary(g, KILN_BINARY_MUL, q, k, 1.0, F32, &r));
    } else if (c == 3) {
      int qq, kk, r5;
      KT_OK(kiln_graph_reshape(g, q, 5, q5, &qq));
      KT_OK(kiln_graph_reshape(g, k, 5, q5, &kk));
      KT_OK(kiln_graph_binary(g, KILN_BINARY_SUB, qq, kk, 1.0, F32, &r5));
      KT_OK(kiln_graph_reshape(g, r5, 4, qs, &r));
    } else if (c >= 4) {
      int o, lse;
      KT_OK(kiln_graph_sdpa(g, q, k, v, -1, 1, NAN, &o, &lse));
      KT_OK(kiln_graph_sdpa_backward(g, v, q, k, v, o, lse, -1, 1, NAN, c == 5 ? &r : NULL, NULL,
                                     c == 4 ? &r : NULL));
    } else {
      KT_OK(kiln_graph_sdpa(g, q, k, v, -1, 1, NAN, &r, NULL));
    }
    KT_OK(kiln_graph_permute(g, r, perm, &pr)); /* [2, 24, 4, 16] */
    KT_OK(kiln_graph_contiguous(g, pr, &ct));
    int64_t ws[2] = {64, 8}, rs[2] = {48, 64};
    KT_OK(kiln_graph_input(g, F32, 2, ws, &w));
    int flat;
    KT_OK(kiln_graph_reshape(g, ct, 2, rs, &flat));
    KT_OK(kiln_graph_matmul(g, flat, w, &y));
    KT_OK(kiln_graph_output(g, y));
    if (c == 2) {
      int neg;
      KT_OK(kiln_graph_unary(g, KILN_UNARY_NEG, r, F32, &neg));
      KT_OK(kiln_graph_output(g, neg));
    }
    float* in[4] = {gt_randf(2 * 4 * 24 * 16), gt_randf(2 * 4 * 24 * 16), gt_randf(2 * 4 * 24 * 16),
                    gt_randf(64 * 8)};
    float* out[2][2];
    for (int pass = 0; pass < 2; pass++) {
      kiln_exec_t* e;
      KT_OK(kiln_graph_compile_ex(g, pass ? KILN_COMPILE_NO_CAT_ELISION : 0, &e));
      KT_CHECK(gt_stats(e).n_contiguous_elided == (pass == 0 && c != 2));
      out[pass][0] = malloc(sizeof(float) * 48 * 8);
      out[pass][1] = malloc(sizeof(float) * 2 * 4 * 24 * 16);
      KT_OK(kiln_exec_run(e, 4, (void**)in, c == 2 ? 2 : 1, (void**)out[pass]));
      kiln_exec_destroy(e);
    }
    KT_CHECK(memcmp(out[0][0], out[1][0], sizeof(float) * 48 * 8) == 0);
    if (c == 2) KT_CHECK(memcmp(out[0][1], out[1][1], sizeof(float) * 2 * 4 * 24 * 16) == 0);
    for (int pass = 0; pass < 2; pass++) {
      free(out[pass][0]);
      free(out[pass][1]);
    }
    for (int j = 0; j < 4; j++) free(in[j]);
    kiln_graph_destroy(g);
  }
}

/* RoPE: x1 = x[..., 0::2], x2 = x[..., 1::2] of one buffer, (x1 c - x2 s, x1 s + x2 c) stacked
 * back into interleaved lanes. The fused group moves the even/odd halves as pairs (one
 * (de)interleaving pass each way): the same bits as the unfused ops, every half length (vector
 * steps and tails), and the right values against a direct loop. */
KT_TEST(rope_pairs_match_unfused) {
  static const int64_t halves[] = {1, 3, 8, 16, 19};
  for (int hi = 0; hi < 5; hi++) {
    const int64_t B = 2, H = 3, T = 5, L = halves[hi], D = 2 * L;
    if (L < 1 || L > 64) continue; /* (bounds for the compiler's size analysis) */
    kiln_graph_t* g;
    KT_OK(kiln_graph_create(&g));
    int64_t xs[4] = {B, T, H, D}, cs[2] = {T, L};
    int x, c, s, xp, x1, x2, m1, m2, m3, m4, a, b, ua, ub, st, out;
    int perm[4] = {0, 2, 1, 3};
    KT_OK(kiln_graph_input(g, F32, 4, xs, &x));
    KT_OK(kiln_graph_input(g, F32, 2, cs, &c));
    KT_OK(kiln_graph_input(g, F32, 2, cs, &s));
    KT_OK(kiln_graph_permute(g, x, perm, &xp)); /* [B, H, T, D], as q.transpose(1, 2) */
    KT_OK(kiln_graph_slice(g, xp, 3, 0, D, 2, &x1));
    KT_OK(kiln_graph_slice(g, xp, 3, 1, D, 2, &x2));
    KT_OK(kiln_graph_binary(g, KILN_BINARY_MUL, x1, c, 1.0, F32, &m1));
    KT_OK(kiln_graph_binary(g, KILN_BINARY_MUL, x2, s, 1.0, F32, &m2));
    KT_OK(kiln_graph_binary(g, KILN_BINARY_SUB, m1, m2, 1.0, F32, &a));
    KT_OK(kiln_graph_binary(g, KILN_BINARY_MUL, x1, s, 1.0, F32, &m3));
    KT_OK(kiln_graph_binary(g, KILN_BINARY_MUL, x2, c, 1.0, F32, &m4));
    KT_OK(kiln_graph_binary(g, KILN_BINARY_ADD, m3, m4, 1.0, F32, &b));
    int64_t u5[5] = {B, H, T, L, 1}, o4[4] = {B, H, T, D};
    KT_OK(kiln_graph_reshape(g, a, 5, u5, &ua));
    KT_OK(kiln_graph_reshape(g, b, 5, u5, &ub));
    int pair[2] = {ua, ub};
    KT_OK(kiln_graph_cat(g, 2, pair, 4, &st));
    KT_OK(kiln_graph_reshape(g, st, 4, o4, &out));
    KT_OK(kiln_graph_output(g, out));
    const int64_t nx = B * T * H * D, no = B * H * T * D;
    float* in[3] = {gt_randf(nx), gt_randf(T * L), gt_randf(T * L)};
    float* o[2];
    for (int pass = 0; pass < 2; pass++) {
      kiln_exec_t* e;
      KT_OK(kiln_graph_compile_ex(g, pass ? KILN_COMPILE_NO_FUSION : 0, &e));
      if (pass == 0) KT_CHECK(gt_stats(e).n_cats_elided == 1);
      o[pass] = malloc(sizeof(float) * (size_t)no);
      KT_OK(kiln_exec_run(e, 3, (void**)in, 1, (void**)&o[pass]));
      kiln_exec_destroy(e);
    }
    KT_CHECK(memcmp(o[0], o[1], sizeof(float) * (size_t)no) == 0);
    int bad = 0;
    for (int64_t bb = 0; bb < B; bb++)
      for (int64_t h = 0; h < H; h++)
        for (int64_t t = 0; t < T; t++)
          for (int64_t i = 0; i < L; i++) {
            const float* xr = in[0] + ((bb * T + t) * H + h) * D;
            const float cv = in[1][t * L + i], sv = in[2][t * L + i];
            const float* orow = o[0] + ((bb * H + h) * T + t) * D;
            bad += orow[2 * i] != xr[2 * i] * cv - xr[2 * i + 1] * sv;
            bad += orow[2 * i + 1] != xr[2 * i] * sv + xr[2 * i + 1] * cv;
          }
    KT_CHECK(bad == 0);
    for (int j = 0; j < 3; j++) free(in[j]);
    free(o[0]);
    free(o[1]);
    kiln_graph_destroy(g);
  }
}

/* Tile chains: RMSNorm's three groups (sum of squares, rsqrt, scaling) run row tile by row tile
 * in one job, with the bits of the unchained program; a consumer that reads a member's result
 * across rows (transposed) or with a broadcast over rows is not chained in, and gives the same
 * values too. */
KT_TEST(tile_chains_match_unchained) {
  for (int c = 0; c < 3; c++) { /* 0 RMSNorm, 1 + a transposed reader, 2 + a row-broadcast reader */
    const int64_t M = 96, N = 80;
    kiln_graph_t* g;
    KT_OK(kiln_graph_create(&g));
    int64_t xs[2] = {M, N}, ws[1] = {N};
    int x, w, sq, ms, me, rs, xn, y;
    KT_OK(kiln_graph_input(g, F32, 2, xs, &x));
    KT_OK(kiln_graph_input(g, F32, 1, ws, &w));
    KT_OK(kiln_graph_unary(g, KILN_UNARY_SQUARE, x, F32, &sq));
    KT_OK(kiln_graph_reduce(g, KILN_REDUCE_MEAN, sq, 1u << 1, 1, 0.0, F32, &ms)); /* [M, 1] */
    int eps;
    KT_OK(kiln_graph_scalar(g, 1e-5, F32, &eps));
    KT_OK(kiln_graph_binary(g, KILN_BINARY_ADD, ms, eps, 1.0, F32, &me));
    KT_OK(kiln_graph_unary(g, KILN_UNARY_RSQRT, me, F32, &rs));
    KT_OK(kiln_graph_binary(g, KILN_BINARY_MUL, x, rs, 1.0, F32, &xn));
    KT_OK(kiln_graph_binary(g, KILN_BINARY_MUL, xn, w, 1.0, F32, &y));
    int out = y;
    if (c == 1) { /* y's rows read as columns: crosses row tiles */
      int perm[2] = {1, 0}, yt, yt2, back;
      int64_t sq2[2] = {N, M};
      KT_OK(kiln_graph_permute(g, y, perm, &yt));
      KT_OK(kiln_graph_unary(g, KILN_UNARY_TANH, yt, F32, &yt2)); /* [N, M] */
      (void)sq2;
      KT_OK(kiln_graph_permute(g, yt2, perm, &back));
      KT_OK(kiln_graph_binary(g, KILN_BINARY_ADD, back, y, 1.0, F32, &out));
    } else if (c == 2) { /* row 0 of rs broadcast to every row */
      int r0, sum;
      KT_OK(kiln_graph_slice(g, rs, 0, 0, 1, 1, &r0)); /* [1, 1] */
      KT_OK(kiln_graph_binary(g, KILN_BINARY_MUL, y, r0, 1.0, F32, &sum));
      out = sum;
    }
    KT_OK(kiln_graph_output(g, out));
    float* in[2] = {gt_randf(M * N), gt_randf(N)};
    float* o[2];
    int64_t chained[2];
    for (int pass = 0; pass < 2; pass++) {
      kiln_exec_t* e;
      KT_OK(kiln_graph_compile_ex(g, pass ? KILN_COMPILE_NO_CHAIN : 0, &e));
      chained[pass] = gt_stats(e).n_chained_steps;
      o[pass] = malloc(sizeof(float) * (size_t)(M * N));
      KT_OK(kiln_exec_run(e, 2, (void**)in, 1, (void**)&o[pass]));
      kiln_exec_destroy(e);
    }
    KT_CHECK(chained[1] == 0);
    if (c == 0) KT_CHECK(chained[0] >= 2);
    KT_CHECK(memcmp(o[0], o[1], sizeof(float) * (size_t)(M * N)) == 0);
    double worst = 0; /* y against a direct computation (row 0), within rounding */
    double s = 0;
    for (int64_t j = 0; j < N; j++) s += (double)in[0][j] * in[0][j];
    const double r = 1.0 / sqrt(s / (double)N + 1e-5);
    if (c == 0)
      for (int64_t j = 0; j < N; j++) {
        double d = fabs(o[0][j] - in[0][j] * r * in[1][j]);
        if (d > worst) worst = d;
      }
    KT_CHECK(worst < 1e-5);
    free(in[0]);
    free(in[1]);
    free(o[0]);
    free(o[1]);
    kiln_graph_destroy(g);
  }
}
