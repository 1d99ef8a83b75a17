/* SPDX-License-Identifier: Apache-2.0 */
/* test_graph_ops.c - remaining ops vs the kernels, empty tensors, large graphs, allocators. */
#include <time.h>

#include "kiln/kernels/conv.h"
#include "kiln/kernels/index.h"
#include "test_graph_util.h"

#define F32 KILN_DTYPE_F32

KT_TEST(rms_norm_softmax_bw_embedding_bw_scan) {
  int64_t s[2] = {6, 20}, ws[1] = {20}, rs[2] = {6, 1}, is[1] = {6}, gw[2] = {9, 20};
  float* x = gt_randf(120);
  float* w = gt_randf(20);
  float* go = gt_randf(120);
  int64_t idx[6] = {0, 8, 3, 3, 8, 1};
  float r_out[120], r_rstd[6], r_gx[120], r_gw[20], r_sm[120], r_smb[120], r_eb[180], r_cs[120];
  kiln_tensor_t X = gt_t(x, F32, 2, s), W = gt_t(w, F32, 1, ws), GO = gt_t(go, F32, 2, s),
                RO = gt_t(r_out, F32, 2, s), RR = gt_t(r_rstd, F32, 2, rs),
                RGX = gt_t(r_gx, F32, 2, s), RGW = gt_t(r_gw, F32, 1, ws),
                SM = gt_t(r_sm, F32, 2, s), SMB = gt_t(r_smb, F32, 2, s),
                I = gt_t(idx, KILN_DTYPE_I64, 1, is), EB = gt_t(r_eb, F32, 2, gw),
                CS = gt_t(r_cs, F32, 2, s);
  KT_OK(kiln_kernel_rms_norm(&X, 1, &W, -1.0, &RO, &RR));
  KT_OK(kiln_kernel_rms_norm_backward(&GO, &X, &RR, &W, 1, &RGX, &RGW));
  KT_OK(kiln_kernel_softmax(&X, 1, 0, &SM));
  KT_OK(kiln_kernel_softmax_backward(&GO, &SM, 1, 0, &SMB));
  KT_OK(kiln_kernel_embedding_backward_ex(&GO, &I, 9, 3, 1, &EB));
  KT_OK(kiln_kernel_cumsum(&X, 0, F32, &CS));
  kiln_graph_t* g;
  KT_OK(kiln_graph_create(&g));
  int vx, vw, vg, vi, out, rstd, gx, gwv, sm, smb, eb, cs;
  KT_OK(kiln_graph_input(g, F32, 2, s, &vx));
  KT_OK(kiln_graph_input(g, F32, 1, ws, &vw));
  KT_OK(kiln_graph_input(g, F32, 2, s, &vg));
  KT_OK(kiln_graph_input(g, KILN_DTYPE_I64, 1, is, &vi));
  KT_OK(kiln_graph_rms_norm(g, vx, vw, 1, -1.0, &out, &rstd));
  KT_OK(kiln_graph_rms_norm_backward(g, vg, vx, rstd, vw, 1, 3, &gx, &gwv));
  KT_OK(kiln_graph_softmax(g, vx, 1, 0, -1, &sm));
  KT_OK(kiln_graph_softmax_backward(g, vg, sm, 1, 0, -1, &smb));
  KT_OK(kiln_graph_embedding_backward(g, vg, vi, 9, 3, 1, &eb));
  KT_OK(kiln_graph_scan(g, 0, vx, 0, F32, &cs));
  int outs_v[6] = {out, gx, gwv, smb, eb, cs};
  for (int k = 0; k < 6; k++) KT_OK(kiln_graph_output(g, outs_v[k]));
  kiln_exec_t* e;
  KT_OK(kiln_graph_compile(g, &e));
  float o_out[120], o_gx[120], o_gw[20], o_smb[120], o_eb[180], o_cs[120];
  void* ins[4] = {x, w, go, idx};
  void* outs[6] = {o_out, o_gx, o_gw, o_smb, o_eb, o_cs};
  KT_OK(kiln_exec_run(e, 4, ins, 6, outs));
  KT_CHECK(memcmp(o_out, r_out, sizeof r_out) == 0);
  KT_CHECK(memcmp(o_gx, r_gx, sizeof r_gx) == 0);
  KT_CHECK(memcmp(o_gw, r_gw, sizeof r_gw) == 0);
  KT_CHECK(memcmp(o_smb, r_smb, sizeof r_smb) == 0);
  KT_CHECK(memcmp(o_eb, r_eb, sizeof r_eb) == 0);
  KT_CHECK(memcmp(o_cs, r_cs, sizeof r_cs) == 0);
  kiln_exec_destroy(e);
  kiln_graph_destroy(g);
  free(x);
  free(w);
  free(go);
}

/* Convolution, pooling and their backwards as graph nodes: bitwise equal to the kernels (same
 * calls), saved/loaded artifacts too; bad shapes fail at build time. */
KT_TEST(cnn_ops_vs_kernels) {
  int64_t xs[4] = {2, 4, 9, 8}, ws[4] = {6, 2, 3, 3}, bs[1] = {6}, ys[4] = {2, 6, 5, 8};
  int64_t ps[4] = {2, 6, 3, 4}, as[4] = {2, 6, 2, 2}, ad[4] = {2, 6, 3, 2};
  const int64_t st[2] = {2, 1}, pd[2] = {1, 1}, dl[2] = {1, 1};
  const int64_t pk[2] = {2, 2}, pst[2] = {2, 2}, ppd[2] = {0, 0}, ak[2] = {2, 3}, ast[2] = {1, 2},
                apd[2] = {0, 1};
  float* x = gt_randf(2 * 4 * 9 * 8);
  float* w = gt_randf(6 * 2 * 9);
  float* b = gt_randf(6);
  float* ga = gt_randf(2 * 6 * 3 * 2);
  /* reference: y = conv(x); p, idx = maxpool(y); a = avgpool(p); d = adaptive(a, 3x2);
   * backwards from ga: gd -> ga2 -> gp -> gy -> gx, gw, gb */
  float ry[2 * 6 * 5 * 8], rp[2 * 6 * 3 * 4], ra[2 * 6 * 2 * 2], rd[2 * 6 * 3 * 2];
  float rga[2 * 6 * 2 * 2], rgp[2 * 6 * 3 * 4], rgy[2 * 6 * 5 * 8], rgx[2 * 4 * 9 * 8],
      rgw[6 * 2 * 9], rgb[6];
  int64_t ridx[2 * 6 * 3 * 4];
  kiln_tensor_t X = gt_t(x, F32, 4, xs), W = gt_t(w, F32, 4, ws), B = gt_t(b, F32, 1, bs),
                Y = gt_t(ry, F32, 4, ys), P = gt_t(rp, F32, 4, ps),
                IDX = gt_t(ridx, KILN_DTYPE_I64, 4, ps), A = gt_t(ra, F32, 4, as),
                D = gt_t(rd, F32, 4, ad), GD = gt_t(ga, F32, 4, ad), GA = gt_t(rga, F32, 4, as),
                GP = gt_t(rgp, F32, 4, ps), GY = gt_t(rgy, F32, 4, ys), GX = gt_t(rgx, F32, 4, xs),
                GW = gt_t(rgw, F32, 4, ws), GB = gt_t(rgb, F32, 1, bs);
  int64_t shape[4];
  KT_OK(kiln_conv2d_output_shape(&X, &W, &B, st, pd, dl, 2, shape));
  KT_CHECK(memcmp(shape, ys, sizeof ys) == 0);
  KT_OK(kiln_kernel_conv2d(&X, &W, &B, st, pd, dl, 2, &Y));
  KT_OK(kiln_kernel_max_pool2d(&Y, pk, pst, ppd, NULL, 1, &P, &IDX));
  KT_OK(kiln_kernel_avg_pool2d(&P, ak, ast, apd, 0, 0, 0, &A));
  KT_OK(kiln_kernel_adaptive_avg_pool2d(&A, &D));
  KT_OK(kiln_kernel_adaptive_avg_pool2d_backward(&GD, &GA));
  KT_OK(kiln_kernel_avg_pool2d_backward(&GA, ak, ast, apd, 0, 0, 0, &GP));
  KT_OK(kiln_kernel_max_pool2d_backward(&GP, &IDX, &GY));
  KT_OK(kiln_kernel_conv2d_backward(&GY, &X, &W, st, pd, dl, 2, &GX, &GW, &GB));

  kiln_graph_t* g;
  KT_OK(kiln_graph_create(&g));
  int vx, vw, vb, vg, y, p, idx, a, d, gda, gp, gy, gx, gwv, gbv, bad;
  KT_OK(kiln_graph_input(g, F32, 4, xs, &vx));
  KT_OK(kiln_graph_input(g, F32, 4, ws, &vw));
  KT_OK(kiln_graph_input(g, F32, 1, bs, &vb));
  KT_OK(kiln_graph_input(g, F32, 4, ad, &vg));
  KT_OK(kiln_graph_conv2d(g, vx, vw, vb, st, pd, dl, 2, &y));
  KT_OK(kiln_graph_max_pool2d(g, y, pk, NULL, ppd, NULL, 1, &p, &idx));
  KT_OK(kiln_graph_avg_pool2d(g, p, ak, ast, apd, 0, 0, 0, &a));
  KT_OK(kiln_graph_adaptive_avg_pool2d(g, a, 3, 2, &d));
  KT_OK(kiln_graph_adaptive_avg_pool2d_backward(g, vg, 2, 2, &gda));
  KT_OK(kiln_graph_avg_pool2d_backward(g, gda, 3, 4, ak, ast, apd, 0, 0, 0, &gp));
  KT_OK(kiln_graph_max_pool2d_backward(g, gp, idx, 5, 8, &gy));
  KT_OK(kiln_graph_conv2d_backward(g, gy, vx, vw, st, pd, dl, 2, &gx, &gwv, &gbv));
  /* bad inputs: weight channels x groups != C, grad of the wrong shape, window too large,
   * avg-pool grad that is not the pooled shape, non-i64 indices, nothing requested */
  KT_CHECK(kiln_graph_conv2d(g, vx, vw, vb, st, pd, dl, 1, &bad) == KILN_ERROR_INVALID_ARGUMENT);
  KT_CHECK(kiln_graph_conv2d_backward(g, vx, vx, vw, st, pd, dl, 2, &bad, NULL, NULL) ==
           KILN_ERROR_INVALID_ARGUMENT);
  const int64_t big[2] = {9, 9};
  KT_CHECK(kiln_graph_max_pool2d(g, d, big, NULL, ppd, NULL, 0, &bad, NULL) ==
           KILN_ERROR_INVALID_ARGUMENT);
  KT_CHECK(kiln_graph_avg_pool2d_backward(g, gda, 5, 5, ak, ast, apd, 0, 0, 0, &bad) ==
           KILN_ERROR_INVALID_ARGUMENT);
  KT_CHECK(kiln_graph_max_pool2d_backward(g, gp, p, 5, 8, &bad) == KILN_ERROR_INVALID_ARGUMENT);
  KT_CHECK(kiln_graph_conv2d_backward(g, gy, vx, vw, st, pd, dl, 2, NULL, NULL, NULL) ==
           KILN_ERROR_INVALID_ARGUMENT);
  int outv[8] = {y, p, d, gda, gp, gx, gwv, gbv};
  for (int k = 0; k < 8; k++) KT_OK(kiln_graph_output(g, outv[k]));
  kiln_exec_t* e;
  KT_OK(kiln_graph_compile(g, &e));
  void* buf = NULL;
  size_t nbuf = 0;
  KT_OK(kiln_exec_save_buffer(e, &buf, &nbuf));
  kiln_exec_t* e2;
  KT_OK(kiln_exec_load_buffer(buf, nbuf, &e2));
  kiln_exec_free_buffer(buf);
  for (int rep = 0; rep < 2; rep++) {
    float oy[2 * 6 * 5 * 8], op[2 * 6 * 3 * 4], od[2 * 6 * 3 * 2], oga[2 * 6 * 2 * 2],
        ogp[2 * 6 * 3 * 4], ogx[2 * 4 * 9 * 8], ogw[6 * 2 * 9], ogb[6];
    void* ins[4] = {x, w, b, ga};
    void* outs[8] = {oy, op, od, oga, ogp, ogx, ogw, ogb};
    KT_OK(kiln_exec_run(rep ? e2 : e, 4, ins, 8, outs));
    KT_CHECK(memcmp(oy, ry, sizeof oy) == 0);
    KT_CHECK(memcmp(op, rp, sizeof op) == 0);
    KT_CHECK(memcmp(od, rd, sizeof od) == 0);
    KT_CHECK(memcmp(oga, rga, sizeof oga) == 0);
    KT_CHECK(memcmp(ogp, rgp, sizeof ogp) == 0);
    KT_CHECK(memcmp(ogx, rgx, sizeof ogx) == 0);
    KT_CHECK(memcmp(ogw, rgw, sizeof ogw) == 0);
    KT_CHECK(memcmp(ogb, rgb, sizeof ogb) == 0);
  }
  kiln_exec_destroy(e);
  kiln_exec_destroy(e2);
  kiln_graph_destroy(g);
  free(x);
  free(w);
  free(b);
  free(ga);
}

/* gather / index_select / scatter / index / index_put nodes vs the kernels; bad shapes fail at
 * build time, an index out of range at run time (OUT_OF_RANGE, not a crash). */
KT_TEST(indexing_ops_vs_kernels) {
  int64_t xs[2] = {5, 7}, is[2] = {5, 3}, ss[1] = {4}, ps[1] = {3}, vs[2] = {3, 7};
  float* x = gt_randf(35);
  float* src = gt_randf(15);
  float* vals = gt_randf(21);
  int64_t gidx[15], sel[4] = {4, 0, 2, 2}, pidx[3] = {1, 3, 1};
  for (int i = 0; i < 15; i++) gidx[i] = (i * 5 + 3) % 7;
  float r_g[15], r_s[20], r_sc[35], r_ix[21], r_ip[35];
  kiln_tensor_t X = gt_t(x, F32, 2, xs), GI = gt_t(gidx, KILN_DTYPE_I64, 2, is),
                SRC = gt_t(src, F32, 2, is), SEL = gt_t(sel, KILN_DTYPE_I64, 1, ss),
                PI = gt_t(pidx, KILN_DTYPE_I64, 1, ps), VAL = gt_t(vals, F32, 2, vs);
  int64_t sels[2] = {5, 4};
  kiln_tensor_t RG = gt_t(r_g, F32, 2, is), RS = gt_t(r_s, F32, 2, sels),
                RSC = gt_t(r_sc, F32, 2, xs), RIX = gt_t(r_ix, F32, 2, vs),
                RIP = gt_t(r_ip, F32, 2, xs);
  KT_OK(kiln_kernel_gather(&X, 1, &GI, &RG));
  KT_OK(kiln_kernel_index_select(&X, 1, &SEL, &RS));
  KT_OK(kiln_kernel_copy(&X, &RSC));
  KT_OK(kiln_kernel_scatter(&RSC, 1, &GI, &SRC, 0.0, KILN_SCATTER_ADD, 1));
  const kiln_tensor_t* pl[1] = {&PI};
  KT_OK(kiln_kernel_index(&X, pl, 1, &RIX));
  KT_OK(kiln_kernel_copy(&X, &RIP));
  KT_OK(kiln_kernel_index_put(&RIP, pl, 1, &VAL, 1));
  kiln_graph_t* g;
  KT_OK(kiln_graph_create(&g));
  int vx, vgi, vsrc, vsel, vpi, vval, og, os, osc, oix, oip, bad;
  KT_OK(kiln_graph_input(g, F32, 2, xs, &vx));
  KT_OK(kiln_graph_input(g, KILN_DTYPE_I64, 2, is, &vgi));
  KT_OK(kiln_graph_input(g, F32, 2, is, &vsrc));
  KT_OK(kiln_graph_input(g, KILN_DTYPE_I64, 1, ss, &vsel));
  KT_OK(kiln_graph_input(g, KILN_DTYPE_I64, 1, ps, &vpi));
  KT_OK(kiln_graph_input(g, F32, 2, vs, &vval));
  KT_OK(kiln_graph_gather(g, vx, -1, vgi, &og));
  KT_OK(kiln_graph_index_select(g, vx, 1, vsel, &os));
  KT_OK(kiln_graph_scatter(g, vx, 1, vgi, vsrc, 0.0, KILN_SCATTER_ADD, 1, &osc));
  KT_OK(kiln_graph_index(g, vx, 1, &vpi, &oix));
  KT_OK(kiln_graph_index_put(g, vx, 1, &vpi, vval, 1, &oip));
  KT_CHECK(kiln_graph_gather(g, vx, 1, vsel, &bad) == KILN_ERROR_INVALID_ARGUMENT);  /* rank */
  KT_CHECK(kiln_graph_gather(g, vx, 1, vsrc, &bad) == KILN_ERROR_INVALID_ARGUMENT);  /* dtype */
  KT_CHECK(kiln_graph_index_select(g, vx, 2, vsel, &bad) == KILN_ERROR_INVALID_ARGUMENT);
  KT_CHECK(kiln_graph_index_put(g, vx, 1, &vpi, vsrc, 0, &bad) == KILN_ERROR_INVALID_ARGUMENT);
  int three[3] = {vpi, vpi, vpi};
  KT_CHECK(kiln_graph_index(g, vx, 3, three, &bad) == KILN_ERROR_INVALID_ARGUMENT);
  int outv[5] = {og, os, osc, oix, oip};
  for (int k = 0; k < 5; k++) KT_OK(kiln_graph_output(g, outv[k]));
  kiln_exec_t* e;
  KT_OK(kiln_graph_compile(g, &e));
  float o_g[15], o_s[20], o_sc[35], o_ix[21], o_ip[35];
  void* ins[6] = {x, gidx, src, sel, pidx, vals};
  void* outs[5] = {o_g, o_s, o_sc, o_ix, o_ip};
  KT_OK(kiln_exec_run(e, 6, ins, 5, outs));
  KT_CHECK(memcmp(o_g, r_g, sizeof o_g) == 0);
  KT_CHECK(memcmp(o_s, r_s, sizeof o_s) == 0);
  KT_CHECK(memcmp(o_sc, r_sc, sizeof o_sc) == 0);
  KT_CHECK(memcmp(o_ix, r_ix, sizeof o_ix) == 0);
  KT_CHECK(memcmp(o_ip, r_ip, sizeof o_ip) == 0);
  sel[1] = 7; /* out of range */
  KT_CHECK(kiln_exec_run(e, 6, ins, 5, outs) == KILN_ERROR_OUT_OF_RANGE);
  kiln_exec_destroy(e);
  kiln_graph_destroy(g);
  free(x);
  free(src);
  free(vals);
}

KT_TEST(argmax_and_keepdim) {
  int64_t s[3] = {3, 4, 5};
  float* x = gt_randf(60);
  kiln_graph_t* g;
  KT_OK(kiln_graph_create(&g));
  int vx, mv, mi, am, ami;
  KT_OK(kiln_graph_input(g, F32, 3, s, &vx));
  KT_OK(kiln_graph_reduce_index(g, KILN_REDUCE_INDEX_MAX, vx, 1, 0, &mv, &mi));
  KT_OK(kiln_graph_reduce_index(g, KILN_REDUCE_INDEX_MIN, vx, KILN_REDUCE_INDEX_ALL_DIMS, 0, NULL,
                                &ami));
  (void)am;
  KT_OK(kiln_graph_output(g, mv));
  KT_OK(kiln_graph_output(g, mi));
  KT_OK(kiln_graph_output(g, ami));
  kiln_exec_t* e;
  KT_OK(kiln_graph_compile(g, &e));
  float ov[15];
  int64_t oi[15], oa;
  void* ins[1] = {x};
  void* outs[3] = {ov, oi, &oa};
  KT_OK(kiln_exec_run(e, 1, ins, 3, outs));
  int64_t best_all = 0;
  for (int i = 0; i < 60; i++)
    if (x[i] < x[best_all]) best_all = i;
  KT_CHECK(oa == best_all);
  for (int i = 0; i < 3; i++)
    for (int k = 0; k < 5; k++) {
      int bj = 0;
      for (int j = 1; j < 4; j++)
        if (x[i * 20 + j * 5 + k] > x[i * 20 + bj * 5 + k]) bj = j;
      KT_CHECK(oi[i * 5 + k] == bj);
      KT_CHECK(ov[i * 5 + k] == x[i * 20 + bj * 5 + k]);
    }
  kiln_exec_destroy(e);
  kiln_graph_destroy(g);
  free(x);
}

/* integer matmul / addmm / bmm (built from mul + sum) against a naive loop, with wraparound */
KT_TEST(integer_matmul) {
  int64_t as[3] = {2, 3, 5}, bs[2] = {5, 4}, cs[2] = {3, 4}, vs[1] = {5};
  int64_t a[30], b[20], c[12], v[5];
  for (int i = 0; i < 30; i++) a[i] = (i * 7919) % 23 - 11;
  for (int i = 0; i < 20; i++) b[i] = (i * 104729) % 19 - 9;
  for (int i = 0; i < 12; i++) c[i] = i - 6;
  for (int i = 0; i < 5; i++) v[i] = INT64_MAX / 3 + i; /* overflows: wraps like torch */
  a[0] = INT64_MAX;
  kiln_graph_t* g;
  KT_OK(kiln_graph_create(&g));
  int va, vb, vc, vv, mm, am, mv, vm;
  KT_OK(kiln_graph_input(g, KILN_DTYPE_I64, 3, as, &va));
  KT_OK(kiln_graph_input(g, KILN_DTYPE_I64, 2, bs, &vb));
  KT_OK(kiln_graph_input(g, KILN_DTYPE_I64, 2, cs, &vc));
  KT_OK(kiln_graph_input(g, KILN_DTYPE_I64, 1, vs, &vv));
  KT_OK(kiln_graph_matmul(g, va, vb, &mm));             /* [2, 3, 4] */
  KT_OK(kiln_graph_addmm(g, vc, va, vb, 3.0, 2.0, &am)); /* 3c + 2 (a @ b) */
  KT_OK(kiln_graph_matmul(g, va, vv, &mv));             /* [2, 3] */
  KT_OK(kiln_graph_matmul(g, vv, vb, &vm));             /* [4] */
  int dt, nd;
  int64_t sh[8];
  KT_OK(kiln_graph_value_info(g, mm, &dt, &nd, sh));
  KT_CHECK(dt == KILN_DTYPE_I64 && nd == 3 && sh[0] == 2 && sh[1] == 3 && sh[2] == 4);
  KT_OK(kiln_graph_value_info(g, vm, &dt, &nd, sh));
  KT_CHECK(nd == 1 && sh[0] == 4);
  KT_OK(kiln_graph_output(g, mm));
  KT_OK(kiln_graph_output(g, am));
  KT_OK(kiln_graph_output(g, mv));
  KT_OK(kiln_graph_output(g, vm));
  kiln_exec_t* e;
  KT_OK(kiln_graph_compile(g, &e));
  KT_CHECK(gt_stats(e).n_reduce_fused >= 3);
  int64_t omm[24], oam[24], omv[6], ovm[4];
  void* ins[4] = {a, b, c, v};
  void* outs[4] = {omm, oam, omv, ovm};
  KT_OK(kiln_exec_run(e, 4, ins, 4, outs));
  for (int p = 0; p < 2; p++)
    for (int i = 0; i < 3; i++) {
      uint64_t accv = 0;
      for (int k = 0; k < 5; k++) accv += (uint64_t)a[p * 15 + i * 5 + k] * (uint64_t)v[k];
      KT_CHECK(omv[p * 3 + i] == (int64_t)accv);
      for (int j = 0; j < 4; j++) {
        uint64_t acc = 0;
        for (int k = 0; k < 5; k++) acc += (uint64_t)a[p * 15 + i * 5 + k] * (uint64_t)b[k * 4 + j];
        KT_CHECK(omm[p * 12 + i * 4 + j] == (int64_t)acc);
        KT_CHECK(oam[p * 12 + i * 4 + j] == (int64_t)(3 * (uint64_t)c[i * 4 + j] + 2 * acc));
      }
    }
  for (int j = 0; j < 4; j++) {
    uint64_t acc = 0;
    for (int k = 0; k < 5; k++) acc += (uint64_t)v[k] * (uint64_t)b[k * 4 + j];
    KT_CHECK(ovm[j] == (int64_t)acc);
  }
  kiln_exec_destroy(e);
  kiln_graph_destroy(g);
}

/* zero-size dims through fused groups, reductions, matmul and cat */
KT_TEST(empty_tensors) {
  int64_t s[2] = {0, 7}, ms[2] = {7, 3};
  kiln_graph_t* g;
  KT_OK(kiln_graph_create(&g));
  int x, w, a, b, m, r, c, ids[2];
  KT_OK(kiln_graph_input(g, F32, 2, s, &x));
  KT_OK(kiln_graph_input(g, F32, 2, ms, &w));
  KT_OK(kiln_graph_unary(g, KILN_UNARY_EXP, x, F32, &a));
  KT_OK(kiln_graph_binary(g, KILN_BINARY_MUL, a, x, 1.0, F32, &b));
  KT_OK(kiln_graph_matmul(g, b, w, &m));
  KT_OK(kiln_graph_reduce(g, KILN_REDUCE_SUM, b, 1, 0, 0, F32, &r)); /* sum over dim 0: [7] */
  ids[0] = b;
  ids[1] = x;
  KT_OK(kiln_graph_cat(g, 2, ids, 0, &c));
  KT_OK(kiln_graph_output(g, m));
  KT_OK(kiln_graph_output(g, r));
  KT_OK(kiln_graph_output(g, c));
  kiln_exec_t* e;
  KT_OK(kiln_graph_compile(g, &e));
  float wd[21] = {0}, osum[7];
  for (int i = 0; i < 7; i++) osum[i] = 99;
  void* ins[2] = {NULL, wd};
  void* outs[3] = {NULL, osum, NULL};
  KT_OK(kiln_exec_run(e, 2, ins, 3, outs));
  for (int i = 0; i < 7; i++) KT_CHECK(osum[i] == 0.0f);
  kiln_exec_destroy(e);
  kiln_graph_destroy(g);
}

static void* counting_alloc(void* self, size_t size, size_t alignment) {
  (*(int*)self)++;
  void* p = NULL;
  if (posix_memalign(&p, alignment < sizeof(void*) ? sizeof(void*) : alignment, size) != 0)
    return NULL;
  return p;
}
static void counting_free(void* self, void* p) {
  if (p) (*(int*)self)--;
  free(p);
}

/* a custom allocator sees every allocation of the graph and its exec; a deep chain of nodes
 * compiles quickly. */
KT_TEST(allocator_and_large_graph) {
  int live = 0;
  kiln_allocator_t a = {counting_alloc, counting_free, &live};
  kiln_graph_t* g;
  KT_OK(kiln_graph_create_ex(&a, &g));
  int64_t s[2] = {8, 8};
  int x, v;
  KT_OK(kiln_graph_input(g, F32, 2, s, &x));
  v = x;
  clock_t t0 = clock();
  for (int i = 0; i < 3000; i++) {
    int nv;
    if (i % 3 == 0) KT_OK(kiln_graph_unary(g, KILN_UNARY_TANH, v, F32, &nv));
    else if (i % 3 == 1) KT_OK(kiln_graph_binary(g, KILN_BINARY_ADD, v, x, 0.5, F32, &nv));
    else KT_OK(kiln_graph_softmax(g, v, i % 2, 0, -1, &nv));
    v = nv;
  }
  KT_OK(kiln_graph_output(g, v));
  kiln_exec_t* e;
  KT_OK(kiln_graph_compile(g, &e));
  double secs = (double)(clock() - t0) / CLOCKS_PER_SEC;
  KT_CHECK(secs < 5.0);
  KT_CHECK(live > 0);
  kiln_exec_stats_t st = gt_stats(e);
  KT_CHECK(st.n_fused_groups == 1000);
  KT_CHECK(st.arena_bytes <= 2 * 256);
  float xin[64], out[64];
  for (int i = 0; i < 64; i++) xin[i] = (float)gt_rand();
  void* ins[1] = {xin};
  void* outs[1] = {out};
  KT_OK(kiln_exec_run(e, 1, ins, 1, outs));
  for (int i = 0; i < 64; i++) KT_CHECK(out[i] >= 0.0f && out[i] <= 1.0f);
  kiln_graph_destroy(g);
  kiln_exec_destroy(e);
  KT_CHECK(live == 0);
}

KT_MAIN()
