/* SPDX-License-Identifier: Apache-2.0 */
/* test_graph_builder.c - builder validation: shapes, dtypes, promotion, errors leave the graph
 * unchanged. */
#include "test_graph_util.h"

#define F32 KILN_DTYPE_F32
#define BAD KILN_ERROR_INVALID_ARGUMENT

KT_TEST(leaves) {
  kiln_graph_t* g;
  KT_OK(kiln_graph_create(&g));
  int v;
  int64_t s[2] = {2, 3}, neg[1] = {-1};
  KT_FAILS(BAD, kiln_graph_input(g, 99, 2, s, &v));
  KT_FAILS(BAD, kiln_graph_input(g, F32, 9, s, &v));
  KT_FAILS(BAD, kiln_graph_input(g, F32, 1, neg, &v));
  KT_FAILS(BAD, kiln_graph_input(g, F32, 2, NULL, &v));
  KT_FAILS(BAD, kiln_graph_input(NULL, F32, 2, s, &v));
  KT_FAILS(BAD, kiln_graph_constant(g, F32, 2, s, NULL, &v));
  KT_CHECK(kiln_graph_num_values(g) == 0);
  KT_OK(kiln_graph_input(g, F32, 2, s, &v));
  KT_CHECK(v == 0 && kiln_graph_num_inputs(g) == 1);
  int e0;
  int64_t zero[1] = {0};
  KT_OK(kiln_graph_constant(g, F32, 1, zero, NULL, &e0)); /* empty constant, no data */
  int f;
  KT_OK(kiln_graph_full(g, KILN_DTYPE_I32, 2, s, 7.9, &f));
  int dt, nd;
  int64_t sh[8];
  KT_OK(kiln_graph_value_info(g, f, &dt, &nd, sh));
  KT_CHECK(dt == KILN_DTYPE_I32 && nd == 2 && sh[0] == 2 && sh[1] == 3);
  KT_FAILS(BAD, kiln_graph_value_info(g, 1000, &dt, &nd, sh));
  KT_FAILS(BAD, kiln_graph_output(g, 1000));
  /* compile needs outputs */
  kiln_exec_t* e;
  KT_FAILS(BAD, kiln_graph_compile(g, &e));
  KT_OK(kiln_graph_output(g, f));
  KT_OK(kiln_graph_compile(g, &e));
  int32_t out[6];
  float xin[6] = {0};
  void* ins[1] = {xin};
  void* outs[1] = {out};
  KT_OK(kiln_exec_run(e, 1, ins, 1, outs));
  for (int i = 0; i < 6; i++) KT_CHECK(out[i] == 7);
  KT_FAILS(BAD, kiln_exec_run(e, 0, ins, 1, outs));
  KT_FAILS(BAD, kiln_exec_run(e, 1, ins, 2, outs));
  void* nul[1] = {NULL};
  KT_FAILS(BAD, kiln_exec_run(e, 1, ins, 1, nul));
  KT_CHECK(kiln_exec_num_inputs(e) == 1 && kiln_exec_num_outputs(e) == 1);
  KT_OK(kiln_exec_output_info(e, 0, &dt, &nd, sh));
  KT_CHECK(dt == KILN_DTYPE_I32 && nd == 2);
  KT_FAILS(KILN_ERROR_OUT_OF_RANGE, kiln_exec_input_info(e, 3, &dt, &nd, sh));
  kiln_exec_destroy(e);
  kiln_graph_destroy(g);
}

KT_TEST(pointwise_validation) {
  kiln_graph_t* g;
  KT_OK(kiln_graph_create(&g));
  int a, b, c, i32, v;
  int64_t sa[2] = {4, 3}, sb[1] = {4}, sc[2] = {1, 3};
  KT_OK(kiln_graph_input(g, F32, 2, sa, &a));
  KT_OK(kiln_graph_input(g, F32, 1, sb, &b));
  KT_OK(kiln_graph_input(g, F32, 2, sc, &c));
  KT_OK(kiln_graph_input(g, KILN_DTYPE_I32, 2, sa, &i32));
  int n0 = kiln_graph_num_values(g);
  KT_FAILS(BAD, kiln_graph_binary(g, KILN_BINARY_ADD, a, b, 1.0, F32, &v)); /* [4,3] vs [4] */
  KT_CHECK(strstr(kiln_status_message(), "[4, 3]") && strstr(kiln_status_message(), "[4]"));
  KT_FAILS(BAD, kiln_graph_binary(g, 999, a, c, 1.0, F32, &v));
  KT_FAILS(BAD, kiln_graph_binary(g, KILN_BINARY_ADD, a, 77, 1.0, F32, &v));
  KT_FAILS(BAD, kiln_graph_binary(g, KILN_BINARY_BITWISE_AND, a, c, 1.0, F32, &v));
  KT_FAILS(BAD, kiln_graph_unary(g, KILN_UNARY_EXP, i32, KILN_DTYPE_I32, &v));
  KT_FAILS(BAD, kiln_graph_unary(g, KILN_UNARY_CLAMP, a, F32, &v)); /* needs _ex */
  KT_FAILS(BAD, kiln_graph_unary(g, KILN_UNARY_NEG, a, 42, &v));
  KT_FAILS(BAD, kiln_graph_ternary(g, KILN_TERNARY_WHERE, a, b, c, 0, F32, &v));
  KT_FAILS(BAD, kiln_graph_ternary(g, KILN_TERNARY_LERP, a, -1, c, 0, F32, &v));
  KT_CHECK(kiln_graph_num_values(g) == n0); /* failed calls add nothing */
  KT_OK(kiln_graph_binary(g, KILN_BINARY_ADD, a, c, 1.0, F32, &v));
  int dt, nd;
  int64_t sh[8];
  KT_OK(kiln_graph_value_info(g, v, &dt, &nd, sh));
  KT_CHECK(nd == 2 && sh[0] == 4 && sh[1] == 3);
  KT_OK(kiln_graph_unary_ex(g, KILN_UNARY_CLAMP, a, 0, 0, 0, 0, -0.5, 0.5, 1, 1, F32, &v));
  KT_OK(kiln_graph_ternary(g, KILN_TERNARY_CLAMP_TENSOR, a, -1, c, 0, F32, &v));
  /* comparisons compute in the promoted input dtype, the result is bool */
  KT_OK(kiln_graph_binary(g, KILN_BINARY_LT, i32, a, 1.0, KILN_DTYPE_BOOL, &v));
  KT_OK(kiln_graph_value_info(g, v, &dt, NULL, NULL));
  KT_CHECK(dt == KILN_DTYPE_BOOL);
  /* cast to the same dtype is the identity */
  int same;
  KT_OK(kiln_graph_cast(g, a, F32, &same));
  KT_CHECK(same == a);
  KT_OK(kiln_graph_copy(g, i32, a, &v));
  KT_OK(kiln_graph_value_info(g, v, &dt, &nd, sh));
  KT_CHECK(dt == KILN_DTYPE_I32 && nd == 2);
  KT_FAILS(BAD, kiln_graph_copy(g, b, a, &v)); /* [4,3] does not broadcast to [4] */
  kiln_graph_destroy(g);
}

KT_TEST(type_promotion) {
  kiln_graph_t* g;
  KT_OK(kiln_graph_create(&g));
  int h, i8, u8, i64s, f, w, dsc, z;
  int64_t s[1] = {3};
  KT_OK(kiln_graph_input(g, KILN_DTYPE_F16, 1, s, &h));
  KT_OK(kiln_graph_input(g, KILN_DTYPE_I8, 1, s, &i8));
  KT_OK(kiln_graph_input(g, KILN_DTYPE_U8, 1, s, &u8));
  KT_OK(kiln_graph_input(g, KILN_DTYPE_I64, 0, NULL, &i64s)); /* 0-dim tensor */
  KT_OK(kiln_graph_scalar(g, 2.5, KILN_DTYPE_F64, &dsc));     /* wrapped number */
  int dt;
  /* where(cond, f16 tensor, python float) stays f16 */
  KT_OK(kiln_graph_binary(g, KILN_BINARY_GT, h, dsc, 1.0, KILN_DTYPE_BOOL, &z));
  KT_OK(kiln_graph_where(g, z, h, dsc, &w));
  KT_OK(kiln_graph_value_info(g, w, &dt, NULL, NULL));
  KT_CHECK(dt == KILN_DTYPE_F16);
  /* where(cond, i8, u8) -> i16 */
  KT_OK(kiln_graph_where(g, z, i8, u8, &w));
  KT_OK(kiln_graph_value_info(g, w, &dt, NULL, NULL));
  KT_CHECK(dt == KILN_DTYPE_I16);
  /* where(cond, i8, 0-dim i64) -> i8 (dim tensors win within a category) */
  KT_OK(kiln_graph_where(g, z, i8, i64s, &w));
  KT_OK(kiln_graph_value_info(g, w, &dt, NULL, NULL));
  KT_CHECK(dt == KILN_DTYPE_I8);
  /* where(cond, i8, python float) -> f32 (default dtype) */
  KT_OK(kiln_graph_where(g, z, i8, dsc, &w));
  KT_OK(kiln_graph_value_info(g, w, &dt, NULL, NULL));
  KT_CHECK(dt == F32);
  (void)f;
  kiln_graph_destroy(g);
}

KT_TEST(reduce_matmul_validation) {
  kiln_graph_t* g;
  KT_OK(kiln_graph_create(&g));
  int a, b, c, i, e, v, vv, vi;
  int64_t sa[2] = {4, 3}, sb[2] = {5, 2}, sc[2] = {3, 2}, se[2] = {0, 3};
  KT_OK(kiln_graph_input(g, F32, 2, sa, &a));
  KT_OK(kiln_graph_input(g, F32, 2, sb, &b));
  KT_OK(kiln_graph_input(g, F32, 2, sc, &c));
  KT_OK(kiln_graph_input(g, KILN_DTYPE_I32, 2, sa, &i));
  KT_OK(kiln_graph_input(g, F32, 2, se, &e));
  KT_FAILS(BAD, kiln_graph_reduce(g, KILN_REDUCE_SUM, a, 4, 0, 0, F32, &v)); /* bit 2, rank 2 */
  KT_FAILS(BAD, kiln_graph_reduce(g, KILN_REDUCE_MEAN, i, 1, 0, 0, KILN_DTYPE_I32, &v));
  KT_FAILS(BAD, kiln_graph_reduce(g, KILN_REDUCE_AMAX, e, 1, 0, 0, F32, &v)); /* empty */
  KT_OK(kiln_graph_reduce(g, KILN_REDUCE_SUM, e, 1, 0, 0, F32, &v));           /* empty ok */
  KT_OK(kiln_graph_reduce(g, KILN_REDUCE_SUM, i, 0, 0, 0, KILN_DTYPE_I64, &v));
  KT_FAILS(BAD, kiln_graph_reduce_index(g, KILN_REDUCE_INDEX_MAX, a, 2, 0, &vv, &vi));
  KT_OK(kiln_graph_reduce_index(g, KILN_REDUCE_INDEX_MAX, a, -1, 1, &vv, &vi));
  int dt, nd;
  int64_t sh[8];
  KT_OK(kiln_graph_value_info(g, vi, &dt, &nd, sh));
  KT_CHECK(dt == KILN_DTYPE_I64 && nd == 2 && sh[0] == 4 && sh[1] == 1);
  KT_FAILS(BAD, kiln_graph_matmul(g, a, b, &v)); /* 3 vs 5 */
  KT_CHECK(strstr(kiln_status_message(), "[4, 3]") != NULL);
  KT_FAILS(BAD, kiln_graph_matmul(g, i, i, &v)); /* integer path checks shapes too */
  int bl;
  KT_OK(kiln_graph_input(g, KILN_DTYPE_BOOL, 2, sc, &bl));
  int nv0 = kiln_graph_num_values(g);
  KT_FAILS(KILN_ERROR_UNIMPLEMENTED, kiln_graph_matmul(g, bl, bl, &v));
  KT_FAILS(BAD, kiln_graph_matmul(g, a, i, &v)); /* mixed dtypes */
  KT_CHECK(kiln_graph_num_values(g) == nv0);
  int s0;
  KT_OK(kiln_graph_input(g, F32, 0, NULL, &s0));
  KT_OK(kiln_graph_reduce(g, KILN_REDUCE_SUM, s0, 1, 1, 0, F32, &v)); /* dim 0 of a scalar */
  KT_FAILS(BAD, kiln_graph_reduce(g, KILN_REDUCE_SUM, s0, 2, 1, 0, F32, &v));
  KT_OK(kiln_graph_matmul(g, a, c, &v));
  KT_OK(kiln_graph_value_info(g, v, &dt, &nd, sh));
  KT_CHECK(nd == 2 && sh[0] == 4 && sh[1] == 2);
  int bias;
  int64_t bsz[1] = {3};
  KT_OK(kiln_graph_input(g, F32, 1, bsz, &bias));
  KT_FAILS(BAD, kiln_graph_addmm(g, bias, a, c, 1, 1, &v)); /* [3] vs [4, 2] */
  kiln_graph_destroy(g);
}

KT_TEST(view_validation) {
  kiln_graph_t* g;
  KT_OK(kiln_graph_create(&g));
  int x, v;
  int64_t s[3] = {2, 3, 4};
  KT_OK(kiln_graph_input(g, F32, 3, s, &x));
  int64_t r1[2] = {5, 5}, r2[2] = {-1, -1}, r3[2] = {-1, 6};
  KT_FAILS(BAD, kiln_graph_reshape(g, x, 2, r1, &v));
  KT_FAILS(BAD, kiln_graph_reshape(g, x, 2, r2, &v));
  KT_OK(kiln_graph_reshape(g, x, 2, r3, &v));
  int64_t sh[8];
  int nd;
  KT_OK(kiln_graph_value_info(g, v, NULL, &nd, sh));
  KT_CHECK(nd == 2 && sh[0] == 4 && sh[1] == 6);
  int p_bad[3] = {0, 0, 1}, p_ok[3] = {-1, 0, 1};
  KT_FAILS(BAD, kiln_graph_permute(g, x, p_bad, &v));
  KT_OK(kiln_graph_permute(g, x, p_ok, &v));
  KT_OK(kiln_graph_value_info(g, v, NULL, &nd, sh));
  KT_CHECK(sh[0] == 4 && sh[1] == 2 && sh[2] == 3);
  int64_t e_bad[3] = {2, 5, 4}, e_ok[4] = {7, -1, 3, 4};
  KT_FAILS(BAD, kiln_graph_expand(g, x, 3, e_bad, &v));
  KT_FAILS(BAD, kiln_graph_expand(g, x, 2, e_bad, &v));
  KT_OK(kiln_graph_expand(g, x, 4, e_ok, &v));
  KT_FAILS(BAD, kiln_graph_slice(g, x, 3, 0, 1, 1, &v));
  KT_FAILS(BAD, kiln_graph_slice(g, x, 0, 0, 1, 0, &v));
  KT_OK(kiln_graph_slice(g, x, -1, -3, 100, 2, &v)); /* [1, 3) step 2 -> 2 */
  KT_OK(kiln_graph_value_info(g, v, NULL, &nd, sh));
  KT_CHECK(sh[2] == 2);
  KT_OK(kiln_graph_slice(g, x, 1, 5, 2, 1, &v)); /* empty */
  KT_OK(kiln_graph_value_info(g, v, NULL, &nd, sh));
  KT_CHECK(sh[1] == 0);
  KT_FAILS(KILN_ERROR_OUT_OF_RANGE, kiln_graph_select(g, x, 1, 3, &v));
  KT_OK(kiln_graph_select(g, x, 1, -3, &v));
  KT_OK(kiln_graph_value_info(g, v, NULL, &nd, sh));
  KT_CHECK(nd == 2 && sh[0] == 2 && sh[1] == 4);
  int y, ids[2];
  int64_t ys[3] = {2, 5, 4};
  KT_OK(kiln_graph_input(g, F32, 3, ys, &y));
  ids[0] = x;
  ids[1] = y;
  KT_FAILS(BAD, kiln_graph_cat(g, 2, ids, 0, &v));
  KT_OK(kiln_graph_cat(g, 2, ids, -2, &v));
  KT_OK(kiln_graph_value_info(g, v, NULL, &nd, sh));
  KT_CHECK(sh[1] == 8);
  KT_FAILS(BAD, kiln_graph_cat(g, 0, ids, 0, &v));
  kiln_graph_destroy(g);
}

KT_TEST(nn_validation) {
  kiln_graph_t* g;
  KT_OK(kiln_graph_create(&g));
  int x, w, wbad, idx, q, k, kbad, v, o, m, r;
  int64_t xs[2] = {4, 8}, ws[1] = {8}, wb[1] = {7}, is[1] = {3};
  int64_t qs[4] = {1, 4, 5, 8}, ks[4] = {1, 2, 6, 8}, kb[4] = {1, 3, 6, 8};
  KT_OK(kiln_graph_input(g, F32, 2, xs, &x));
  KT_OK(kiln_graph_input(g, F32, 1, ws, &w));
  KT_OK(kiln_graph_input(g, F32, 1, wb, &wbad));
  KT_OK(kiln_graph_input(g, KILN_DTYPE_I64, 1, is, &idx));
  KT_OK(kiln_graph_input(g, F32, 4, qs, &q));
  KT_OK(kiln_graph_input(g, F32, 4, ks, &k));
  KT_OK(kiln_graph_input(g, F32, 4, kb, &kbad));
  KT_FAILS(BAD, kiln_graph_softmax(g, x, 2, 0, -1, &v));
  KT_FAILS(BAD, kiln_graph_softmax(g, idx, 0, 0, -1, &v));
  KT_FAILS(BAD, kiln_graph_layer_norm(g, x, wbad, -1, 1, 1e-5, &o, &m, &r));
  KT_FAILS(BAD, kiln_graph_layer_norm(g, x, w, -1, 3, 1e-5, &o, &m, &r));
  KT_OK(kiln_graph_layer_norm(g, x, w, w, 1, 1e-5, &o, &m, &r));
  int64_t sh[8];
  int nd;
  KT_OK(kiln_graph_value_info(g, m, NULL, &nd, sh));
  KT_CHECK(nd == 2 && sh[0] == 4 && sh[1] == 1);
  KT_FAILS(BAD, kiln_graph_embedding(g, x, x, &v)); /* float indices */
  KT_OK(kiln_graph_embedding(g, x, idx, &v));
  KT_OK(kiln_graph_value_info(g, v, NULL, &nd, sh));
  KT_CHECK(nd == 2 && sh[0] == 3 && sh[1] == 8);
  KT_FAILS(BAD, kiln_graph_nll_loss(g, x, x, -1, 1, -100, &v, NULL));
  int tgt;
  int64_t ts[1] = {4};
  KT_OK(kiln_graph_input(g, KILN_DTYPE_I64, 1, ts, &tgt));
  KT_FAILS(BAD, kiln_graph_nll_loss(g, x, tgt, -1, 5, -100, &v, NULL));
  KT_OK(kiln_graph_nll_loss(g, x, tgt, w, KILN_REDUCTION_NONE, -100, &v, NULL));
  KT_OK(kiln_graph_value_info(g, v, NULL, &nd, sh));
  KT_CHECK(nd == 1 && sh[0] == 4);
  KT_FAILS(BAD, kiln_graph_sdpa(g, q, kbad, kbad, -1, 0, NAN, &v, NULL)); /* 4 % 3 */
  KT_FAILS(BAD, kiln_graph_sdpa(g, x, k, k, -1, 0, NAN, &v, NULL));
  int lse;
  KT_OK(kiln_graph_sdpa(g, q, k, k, -1, 1, NAN, &v, &lse));
  KT_OK(kiln_graph_value_info(g, lse, NULL, &nd, sh));
  KT_CHECK(nd == 3 && sh[2] == 5);
  kiln_graph_destroy(g);
}

KT_MAIN()
