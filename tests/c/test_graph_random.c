/* SPDX-License-Identifier: Apache-2.0 */
/* test_graph_random.c - differential testing: random graphs of pointwise ops, broadcasts,
 * views, reductions, matmuls and softmax, compiled with every pass vs with every optional pass
 * off (node-by-node kernels). Results must agree (bit-exact except for reductions). The fused
 * groups' direct path (contiguous tile buffers) must match the staged path bit for bit. */
#include "test_graph_util.h"

#define F32 KILN_DTYPE_F32
static int M = 12, N = 20; /* the current shape configuration */

static int pick(int n) { return (int)((gt_rand() * 0.5 + 0.5) * n) % n; }

typedef struct {
  int vid;
  int rows, cols; /* a [rows, cols] f32 value; rows/cols may be 1 (broadcastable) */
} val_t;

static kiln_graph_t* random_graph(int seed_shift, int* n_out) {
  (void)seed_shift;
  kiln_graph_t* g;
  KT_OK(kiln_graph_create(&g));
  val_t vals[64];
  int nv = 0;
  int64_t full[2] = {M, N}, row[2] = {1, N}, col[2] = {M, 1};
  KT_OK(kiln_graph_input(g, F32, 2, full, &vals[nv].vid));
  vals[nv].rows = M, vals[nv].cols = N, nv++;
  KT_OK(kiln_graph_input(g, F32, 2, full, &vals[nv].vid));
  vals[nv].rows = M, vals[nv].cols = N, nv++;
  KT_OK(kiln_graph_input(g, F32, 2, row, &vals[nv].vid));
  vals[nv].rows = 1, vals[nv].cols = N, nv++;
  KT_OK(kiln_graph_input(g, F32, 2, col, &vals[nv].vid));
  vals[nv].rows = M, vals[nv].cols = 1, nv++;
  int steps = 6 + pick(20);
  for (int s = 0; s < steps && nv < 60; s++) {
    int kind = pick(19);
    val_t a = vals[nv - 1 - pick(nv < 6 ? nv : 6)];
    val_t b = vals[pick(nv)];
    val_t r;
    int v = -1;
    if (kind <= 3) { /* binary with broadcasting */
      static const int ops[4] = {KILN_BINARY_ADD, KILN_BINARY_MUL, KILN_BINARY_SUB,
                                 KILN_BINARY_MAXIMUM};
      KT_OK(kiln_graph_binary(g, ops[kind], a.vid, b.vid, kind == 2 ? 0.5 : 1.0, F32, &v));
      r.rows = a.rows > b.rows ? a.rows : b.rows;
      r.cols = a.cols > b.cols ? a.cols : b.cols;
    } else if (kind <= 6) { /* bounded unary */
      static const int ops[3] = {KILN_UNARY_TANH, KILN_UNARY_SIGMOID, KILN_UNARY_NEG};
      KT_OK(kiln_graph_unary(g, ops[kind - 4], a.vid, F32, &v));
      r = a;
    } else if (kind == 7) { /* exp of tanh (bounded) */
      int t;
      KT_OK(kiln_graph_unary(g, KILN_UNARY_TANH, a.vid, F32, &t));
      KT_OK(kiln_graph_unary(g, KILN_UNARY_EXP, t, F32, &v));
      r = a;
    } else if (kind == 8 && a.rows == M && a.cols == N) { /* transpose round trip */
      int p, q, perm[2] = {1, 0};
      KT_OK(kiln_graph_permute(g, a.vid, perm, &p));
      KT_OK(kiln_graph_unary(g, KILN_UNARY_ABS, p, F32, &q));
      KT_OK(kiln_graph_permute(g, q, perm, &v));
      r = a;
    } else if (kind == 9 && a.cols == N) { /* reduce over the last dim, keepdim */
      int op = pick(3) == 0 ? KILN_REDUCE_AMAX : (pick(2) ? KILN_REDUCE_SUM : KILN_REDUCE_MEAN);
      KT_OK(kiln_graph_reduce(g, op, a.vid, 2, 1, 0, F32, &v));
      r.rows = a.rows;
      r.cols = 1;
    } else if (kind == 10 && a.rows == M && a.cols == N) { /* softmax or a flat reshape */
      if (pick(2)) {
        KT_OK(kiln_graph_softmax(g, a.vid, pick(2), 0, -1, &v));
      } else {
        int64_t flat[1] = {M * N}, back[2] = {M, N};
        int f, u;
        KT_OK(kiln_graph_reshape(g, a.vid, 1, flat, &f));
        KT_OK(kiln_graph_unary(g, KILN_UNARY_SIGMOID, f, F32, &u));
        KT_OK(kiln_graph_reshape(g, u, 2, back, &v));
      }
      r = a;
    } else if (kind == 11 && a.rows == M && a.cols == N) { /* matmul with a transposed self */
      int t, mm, perm[2] = {1, 0};
      int64_t sl_end = N;
      (void)sl_end;
      KT_OK(kiln_graph_permute(g, a.vid, perm, &t));
      KT_OK(kiln_graph_matmul(g, a.vid, t, &mm)); /* [M, M] */
      int sl;
      KT_OK(kiln_graph_slice(g, mm, 1, 0, 1, 1, &sl)); /* [M, 1] */
      KT_OK(kiln_graph_unary(g, KILN_UNARY_TANH, sl, F32, &v));
      r.rows = M;
      r.cols = 1;
    } else if (kind == 12) { /* half precision detour: registers of another dtype */
      int h, sc, m2;
      KT_OK(kiln_graph_cast(g, a.vid, pick(2) ? KILN_DTYPE_F16 : KILN_DTYPE_BF16, &h));
      int hdt;
      KT_OK(kiln_graph_value_info(g, h, &hdt, NULL, NULL));
      KT_OK(kiln_graph_scalar(g, 1.5, KILN_DTYPE_F64, &sc));
      KT_OK(kiln_graph_binary(g, KILN_BINARY_MUL, h, sc, 1.0, hdt, &m2));
      KT_OK(kiln_graph_cast(g, m2, F32, &v));
      r = a;
    } else if (kind == 13) { /* compare + where */
      int c;
      KT_OK(kiln_graph_binary(g, KILN_BINARY_GT, a.vid, b.vid, 1.0, KILN_DTYPE_BOOL, &c));
      KT_OK(kiln_graph_where(g, c, a.vid, b.vid, &v));
      r.rows = a.rows > b.rows ? a.rows : b.rows;
      r.cols = a.cols > b.cols ? a.cols : b.cols;
    } else if (kind == 14 && a.rows == M && a.cols == N) { /* interleave through a [.., 2] dim */
      static const unsigned char even[2] = {1, 0};
      int64_t two[1] = {2}, u3[3] = {M, N, 1}, e3[3] = {M, N, 2}, back[2] = {M, 2 * N};
      int mk, nm, ua, ub, z, w1, w2, sum, sl;
      KT_OK(kiln_graph_constant(g, KILN_DTYPE_BOOL, 1, two, even, &mk));
      KT_OK(kiln_graph_unary(g, KILN_UNARY_LOGICAL_NOT, mk, KILN_DTYPE_BOOL, &nm));
      KT_OK(kiln_graph_reshape(g, a.vid, 3, u3, &ua));
      KT_OK(kiln_graph_reshape(g, vals[0].vid, 3, u3, &ub));
      KT_OK(kiln_graph_full(g, F32, 3, e3, 0.0, &z));
      KT_OK(kiln_graph_where(g, mk, ua, z, &w1));
      KT_OK(kiln_graph_where(g, nm, ub, z, &w2));
      KT_OK(kiln_graph_binary(g, KILN_BINARY_ADD, w1, w2, 1.0, F32, &sum));
      KT_OK(kiln_graph_reshape(g, sum, 2, back, &sl));
      KT_OK(kiln_graph_slice(g, sl, 1, 1, 2 * N, 2, &v)); /* the odd lanes: vals[0] again */
      r = a;
    } else if (kind == 15 && a.rows == M && a.cols == N) { /* RoPE-style stack of two results */
      /* (a*c - b*s, a*s + b*c) with c, s row/column broadcasts, stacked on a new last dim, then
       * one lane read back: siblings sharing inputs, a cat made of their results */
      val_t c = vals[2], sn = vals[3];
      int m1, m2, m3, m4, e0, e1, u0, u1, st, fl, lane;
      int b0 = vals[pick(2)].vid;
      KT_OK(kiln_graph_binary(g, KILN_BINARY_MUL, a.vid, c.vid, 1.0, F32, &m1));
      KT_OK(kiln_graph_binary(g, KILN_BINARY_MUL, b0, sn.vid, 1.0, F32, &m2));
      KT_OK(kiln_graph_binary(g, KILN_BINARY_SUB, m1, m2, 1.0, F32, &e0));
      if (pick(3) == 0) { /* a single-node producer */
        KT_OK(kiln_graph_unary(g, KILN_UNARY_TANH, b0, F32, &e1));
      } else {
        KT_OK(kiln_graph_binary(g, KILN_BINARY_MUL, a.vid, sn.vid, 1.0, F32, &m3));
        KT_OK(kiln_graph_binary(g, KILN_BINARY_MUL, b0, c.vid, 1.0, F32, &m4));
        KT_OK(kiln_graph_binary(g, KILN_BINARY_ADD, m3, m4, 1.0, F32, &e1));
      }
      int64_t u3[3] = {M, N, 1}, back[2] = {M, 2 * N};
      KT_OK(kiln_graph_reshape(g, e0, 3, u3, &u0));
      KT_OK(kiln_graph_reshape(g, e1, 3, u3, &u1));
      int ids[2] = {u0, u1};
      KT_OK(kiln_graph_cat(g, 2, ids, 2, &st)); /* [M, N, 2] */
      KT_OK(kiln_graph_reshape(g, st, 2, back, &fl));
      if (pick(4) == 0 && kiln_graph_num_outputs(g) < 4)
        KT_OK(kiln_graph_output(g, pick(2) ? st : fl)); /* the cat itself */
      KT_OK(kiln_graph_slice(g, fl, 1, pick(2), 2 * N, 2, &lane));
      KT_OK(kiln_graph_unary(g, KILN_UNARY_NEG, lane, F32, &v));
      r = a;
    } else if (kind == 16 && a.cols == N) { /* cat along rows of two results, read back */
      int e0, e1, ct, sl;
      KT_OK(kiln_graph_unary(g, KILN_UNARY_SIGMOID, a.vid, F32, &e0));
      KT_OK(kiln_graph_binary(g, KILN_BINARY_ADD, b.vid, a.vid, 1.0, F32, &e1));
      int ids[2] = {e0, e1};
      int64_t sh1[8];
      int nd1;
      KT_OK(kiln_graph_value_info(g, e1, NULL, &nd1, sh1));
      if (nd1 != 2 || sh1[1] != N) continue;
      KT_OK(kiln_graph_cat(g, 2, ids, 0, &ct)); /* [a.rows + e1 rows, N] */
      KT_OK(kiln_graph_slice(g, ct, 0, a.rows, a.rows + sh1[0], 1, &sl)); /* e1 back */
      KT_OK(kiln_graph_unary(g, KILN_UNARY_ABS, sl, F32, &v));
      r.rows = (int)sh1[0];
      r.cols = N;
    } else if (kind == 17 && a.rows == M && a.cols == N) { /* cat along columns, halves read */
      /* the producers write row-strided windows of the [M, 2N] cat and the consumer reads its
       * column halves: operands with unit inner stride and a row stride of 2N (row mode) */
      int e0, e1, ct, s0, s1, sg;
      KT_OK(kiln_graph_unary(g, KILN_UNARY_TANH, a.vid, F32, &e0));
      KT_OK(kiln_graph_binary(g, KILN_BINARY_MUL, a.vid, b.vid, 1.0, F32, &e1));
      int64_t sh1[8];
      int nd1;
      KT_OK(kiln_graph_value_info(g, e1, NULL, &nd1, sh1));
      if (nd1 != 2 || sh1[0] != M || sh1[1] != N) continue;
      int ids[2] = {e0, e1};
      KT_OK(kiln_graph_cat(g, 2, ids, 1, &ct)); /* [M, 2N] */
      if (pick(4) == 0 && kiln_graph_num_outputs(g) < 4) KT_OK(kiln_graph_output(g, ct));
      KT_OK(kiln_graph_slice(g, ct, 1, 0, N, 1, &s0));
      KT_OK(kiln_graph_slice(g, ct, 1, N, 2 * N, 1, &s1));
      KT_OK(kiln_graph_unary(g, KILN_UNARY_SIGMOID, s0, F32, &sg)); /* silu-gate shape */
      KT_OK(kiln_graph_binary(g, KILN_BINARY_MUL, sg, s1, 1.0, F32, &v));
      r = a;
    } else if (kind == 18 && a.rows == M && a.cols == N) { /* a consumer group moved up */
      /* A = {s = sigmoid(a), t = a * s}; a column sum (not fusable) reads t; then B reads s
       * only: B cannot join A in order (the sum sits between) but can run at A's position */
      int s0, t0, cs, ab;
      KT_OK(kiln_graph_unary(g, KILN_UNARY_SIGMOID, a.vid, F32, &s0));
      KT_OK(kiln_graph_binary(g, KILN_BINARY_MUL, a.vid, s0, 1.0, F32, &t0));
      KT_OK(kiln_graph_reduce(g, KILN_REDUCE_SUM, t0, 1, 1, 0, F32, &cs)); /* [1, N] */
      if (kiln_graph_num_outputs(g) < 4) KT_OK(kiln_graph_output(g, cs));
      KT_OK(kiln_graph_binary(g, KILN_BINARY_ADD, b.vid, a.vid, 1.0, F32, &ab));
      if (pick(3) == 0) /* B also reads the sum: it must stay after it (no move) */
        KT_OK(kiln_graph_binary(g, KILN_BINARY_ADD, ab, cs, 1.0, F32, &ab));
      KT_OK(kiln_graph_binary(g, KILN_BINARY_MUL, s0, ab, 1.0, F32, &v));
      r.rows = M;
      r.cols = N;
    } else {
      continue;
    }
    r.vid = v;
    vals[nv++] = r;
  }
  /* outputs: the last value and a few random ones (after any cat results made outputs above) */
  int k = kiln_graph_num_outputs(g);
  KT_OK(kiln_graph_output(g, vals[nv - 1].vid));
  k++;
  for (int i = 0; i < 2; i++) {
    KT_OK(kiln_graph_output(g, vals[4 + pick(nv - 4)].vid));
    k++;
  }
  *n_out = k;
  return g;
}

/* Fused groups of e that take the direct path (from the groups dump). */
static int gt_count_direct(kiln_exec_t* e) {
  size_t need = 0;
  KT_OK(kiln_exec_dump(e, KILN_DUMP_GROUPS, NULL, 0, &need));
  char* b = malloc(need);
  KT_OK(kiln_exec_dump(e, KILN_DUMP_GROUPS, b, need, NULL));
  int n = 0;
  for (const char* p = b; (p = strstr(p, "registers, direct")) != NULL; p++) n++;
  free(b);
  return n;
}

static int64_t out_numel(kiln_exec_t* e, int k) {
  int nd;
  int64_t sh[8], n = 1;
  kiln_exec_output_info(e, k, NULL, &nd, sh);
  for (int i = 0; i < nd; i++) n *= sh[i];
  return n;
}

static void run_config(int m, int n, int count);

KT_TEST(random_graphs_match_reference) {
  run_config(12, 20, 240);  /* one tile */
  run_config(70, 300, 40);  /* many tiles, partial last chunk, several threads */
  run_config(5, 3000, 40);  /* rows longer than a tile; fused reductions over long rows */
  run_config(1, 7, 60);     /* degenerate broadcasts */
}

static void run_config(int m, int n, int count) {
  M = m;
  N = n;
  float* in[4];
  in[0] = gt_randf(M * N);
  in[1] = gt_randf(M * N);
  in[2] = gt_randf(N);
  in[3] = gt_randf(M);
  int off = KILN_COMPILE_NO_FUSION | KILN_COMPILE_NO_EPILOGUE | KILN_COMPILE_NO_VIEW_SINK |
            KILN_COMPILE_NO_INPLACE | KILN_COMPILE_NO_CSE | KILN_COMPILE_NO_FOLD |
            KILN_COMPILE_NO_MEMORY_REUSE | KILN_COMPILE_NO_CAT_ELISION |
            KILN_COMPILE_NO_SIBLING_FUSION;
  int bad = 0, bad_direct = 0, fused = 0, direct = 0, elided = 0, siblings = 0, hoisted = 0;
  for (int t = 0; t < count; t++) {
    int n_out;
    kiln_graph_t* g = random_graph(t, &n_out);
    kiln_exec_t *er, *eo, *es;
    KT_OK(kiln_graph_compile_ex(g, off, &er));
    const int fl = t % 7 == 0 ? KILN_COMPILE_NO_REDUCE_FUSION : 0;
    KT_OK(kiln_graph_compile_ex(g, fl, &eo));
    KT_OK(kiln_graph_compile_ex(g, fl | KILN_COMPILE_NO_DIRECT_GROUPS, &es));
    fused += gt_stats(eo).n_fused_groups > 0;
    direct += gt_count_direct(eo);
    elided += gt_stats(eo).n_cats_elided > 0;
    siblings += gt_stats(eo).n_sibling_merges > 0;
    hoisted += gt_stats(eo).n_groups_hoisted > 0;
    float* ro[8];
    float* oo[8];
    float* so[8];
    for (int k = 0; k < n_out; k++) {
      ro[k] = malloc(sizeof(float) * (size_t)out_numel(er, k));
      oo[k] = malloc(sizeof(float) * (size_t)out_numel(er, k));
      so[k] = malloc(sizeof(float) * (size_t)out_numel(er, k));
    }
    void* ins[4] = {in[0], in[1], in[2], in[3]};
    KT_OK(kiln_exec_run(er, 4, ins, n_out, (void**)ro));
    KT_OK(kiln_exec_run(es, 4, ins, n_out, (void**)so));
    for (int rep = 0; rep < 2; rep++) {
      KT_OK(kiln_exec_run(eo, 4, ins, n_out, (void**)oo));
      for (int k = 0; k < n_out; k++)
        if (gt_maxrel(oo[k], ro[k], out_numel(er, k)) > 1e-5) {
          if (!bad && getenv("KILN_TEST_DUMP")) {
            size_t need;
            kiln_exec_dump(eo, KILN_DUMP_ALL, NULL, 0, &need);
            char* b = malloc(need);
            kiln_exec_dump(eo, KILN_DUMP_ALL, b, need, NULL);
            fprintf(stderr, "graph %d output %d differs\n%s", t, k, b);
            free(b);
          }
          bad++;
        }
    }
    for (int k = 0; k < n_out; k++) /* direct and staged groups: same kernels, same bits */
      if (memcmp(oo[k], so[k], sizeof(float) * (size_t)out_numel(er, k)) != 0) bad_direct++;
    for (int k = 0; k < n_out; k++) {
      free(ro[k]);
      free(oo[k]);
      free(so[k]);
    }
    kiln_exec_destroy(er);
    kiln_exec_destroy(eo);
    kiln_exec_destroy(es);
    kiln_graph_destroy(g);
  }
  KT_CHECK(bad == 0);
  KT_CHECK(bad_direct == 0);
  KT_CHECK(fused > count / 3);
  KT_CHECK(direct > count / 4);
  KT_CHECK(elided > count / 10);
  KT_CHECK(siblings > count / 10);
  if (M > 1 && N > 1) KT_CHECK(hoisted > count / 20);
  for (int i = 0; i < 4; i++) free(in[i]);
}

KT_MAIN()
