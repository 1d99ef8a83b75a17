/* SPDX-License-Identifier: Apache-2.0 */
/* test_exec_threads.c - one compiled program run from several threads at once.
 *
 * Every run's outputs are checked against a single-threaded reference run of the same inputs.
 * The programs cover what a run mutates: buffer bindings (inputs, outputs, arena values), the
 * interpreter scratch of fused groups and tile chains, GEMM and attention / softmax kernels with
 * their own scratch, errors raised inside parallel interpreter jobs, the own arena of
 * kiln_exec_run and caller workspaces of kiln_exec_run_workspace, and profiling switched on and
 * off while runs are in flight. */
#include <pthread.h>
#include <stdatomic.h>

#include "test_graph_util.h"

#define F32 KILN_DTYPE_F32
#define N_THREADS 4
#define N_SETS 2 /* input sets per thread */

/* A pool with workers even on a 2-core machine (the default pool reads this on first use). */
__attribute__((constructor)) static void set_num_threads(void) { setenv("KILN_NUM_THREADS", "3", 1); }

/* ---- a counting, thread-safe allocator ------------------------------------------------------- */

static atomic_long g_allocs;

static void* count_alloc(void* self, size_t size, size_t alignment) {
  (void)self;
  atomic_fetch_add(&g_allocs, 1);
  size = (size + alignment - 1) / alignment * alignment;
  return aligned_alloc(alignment, size ? size : alignment);
}

static void count_free(void* self, void* p) {
  (void)self;
  free(p);
}

static const kiln_allocator_t g_counting = {count_alloc, count_free, NULL};

/* ---- programs -------------------------------------------------------------------------------- */

typedef struct program {
  kiln_exec_t* e;
  int n_in, n_out;
  int64_t in_numel[16], out_numel[16];
  int in_dtype[16];
} program_t;

static void describe(program_t* p) {
  p->n_in = kiln_exec_num_inputs(p->e);
  p->n_out = kiln_exec_num_outputs(p->e);
  for (int i = 0; i < p->n_in; i++) {
    int dt, nd;
    int64_t sh[KILN_MAX_DIMS];
    KT_OK(kiln_exec_input_info(p->e, i, &dt, &nd, sh));
    p->in_dtype[i] = dt;
    p->in_numel[i] = 1;
    for (int d = 0; d < nd; d++) p->in_numel[i] *= sh[d];
  }
  for (int k = 0; k < p->n_out; k++) {
    int dt, nd;
    int64_t sh[KILN_MAX_DIMS];
    KT_OK(kiln_exec_output_info(p->e, k, &dt, &nd, sh));
    KT_CHECK(dt == F32 || dt == KILN_DTYPE_I32);
    p->out_numel[k] = 1;
    for (int d = 0; d < nd; d++) p->out_numel[k] *= sh[d];
  }
}

/* A transformer block: layer norm, q/k/v projections (merged GEMMs), causal attention, an output
 * projection with a residual epilogue, an RMSNorm written as pointwise ops and a reduction (a
 * tile chain), a GELU MLP, a softmax and a row-sum reduction. x [B, L, D]; every weight is an
 * input, so each thread's inputs differ everywhere. */
static program_t build_block(const kiln_allocator_t* alloc) {
  enum { B = 2, L = 64, D = 128, H = 4, E = 32, F = 256 };
  kiln_graph_t* g;
  KT_OK(kiln_graph_create_ex(alloc, &g));
  int64_t xs[3] = {B, L, D}, dd[2] = {D, D}, d1[1] = {D}, df[2] = {D, F}, fd[2] = {F, D}, f1[1] = {F};
  int x, lnw, lnb, wq, wk, wv, wo, w1, b1, w2, rw;
  KT_OK(kiln_graph_input(g, F32, 3, xs, &x));
  KT_OK(kiln_graph_input(g, F32, 1, d1, &lnw));
  KT_OK(kiln_graph_input(g, F32, 1, d1, &lnb));
  KT_OK(kiln_graph_input(g, F32, 2, dd, &wq));
  KT_OK(kiln_graph_input(g, F32, 2, dd, &wk));
  KT_OK(kiln_graph_input(g, F32, 2, dd, &wv));
  KT_OK(kiln_graph_input(g, F32, 2, dd, &wo));
  KT_OK(kiln_graph_input(g, F32, 2, df, &w1));
  KT_OK(kiln_graph_input(g, F32, 1, f1, &b1));
  KT_OK(kiln_graph_input(g, F32, 2, fd, &w2));
  int h;
  KT_OK(kiln_graph_layer_norm(g, x, lnw, lnb, 1, 1e-5, &h, NULL, NULL));
  int heads[3], wts[3] = {wq, wk, wv};
  int64_t split[4] = {B, L, H, E};
  int perm[4] = {0, 2, 1, 3};
  for (int i = 0; i < 3; i++) {
    int p, r;
    KT_OK(kiln_graph_matmul(g, h, wts[i], &p));
    KT_OK(kiln_graph_reshape(g, p, 4, split, &r));
    KT_OK(kiln_graph_permute(g, r, perm, &heads[i]));
  }
  int att, at, ac, a2;
  KT_OK(kiln_graph_sdpa(g, heads[0], heads[1], heads[2], -1, 1, NAN, &att, NULL));
  KT_OK(kiln_graph_permute(g, att, perm, &at));
  KT_OK(kiln_graph_contiguous(g, at, &ac));
  KT_OK(kiln_graph_reshape(g, ac, 3, xs, &a2));
  int proj, res;
  KT_OK(kiln_graph_matmul(g, a2, wo, &proj));
  KT_OK(kiln_graph_binary(g, KILN_BINARY_ADD, proj, x, 1.0, F32, &res));
  /* RMSNorm as pointwise ops around a mean: a tile chain */
  int sq, ms, eps, me, rs, xn;
  KT_OK(kiln_graph_input(g, F32, 1, d1, &rw));
  KT_OK(kiln_graph_unary(g, KILN_UNARY_SQUARE, res, F32, &sq));
  KT_OK(kiln_graph_reduce(g, KILN_REDUCE_MEAN, sq, 1u << 2, 1, 0.0, F32, &ms));
  KT_OK(kiln_graph_scalar(g, 1e-5, F32, &eps));
  KT_OK(kiln_graph_binary(g, KILN_BINARY_ADD, ms, eps, 1.0, F32, &me));
  KT_OK(kiln_graph_unary(g, KILN_UNARY_RSQRT, me, F32, &rs));
  KT_OK(kiln_graph_binary(g, KILN_BINARY_MUL, res, rs, 1.0, F32, &xn));
  int r2;
  KT_OK(kiln_graph_binary(g, KILN_BINARY_MUL, xn, rw, 1.0, F32, &r2));
  int m1, m2, m3, y;
  KT_OK(kiln_graph_addmm(g, b1, r2, w1, 1.0, 1.0, &m1));
  KT_OK(kiln_graph_unary(g, KILN_UNARY_GELU, m1, F32, &m2));
  KT_OK(kiln_graph_matmul(g, m2, w2, &m3));
  KT_OK(kiln_graph_binary(g, KILN_BINARY_ADD, m3, r2, 1.0, F32, &y));
  int sm, rsum, th;
  KT_OK(kiln_graph_softmax(g, y, 2, 0, -1, &sm));
  KT_OK(kiln_graph_unary(g, KILN_UNARY_TANH, y, F32, &th));
  KT_OK(kiln_graph_reduce(g, KILN_REDUCE_SUM, th, 1u << 2, 0, 0.0, F32, &rsum));
  KT_OK(kiln_graph_output(g, y));
  KT_OK(kiln_graph_output(g, sm));
  KT_OK(kiln_graph_output(g, rsum));
  program_t p;
  memset(&p, 0, sizeof p);
  KT_OK(kiln_graph_compile(g, &p.e));
  kiln_graph_destroy(g);
  describe(&p);
  kiln_exec_stats_t st = gt_stats(p.e);
  KT_CHECK(st.n_fused_groups >= 2); /* the interpreter and its scratch take part */
  KT_CHECK(st.n_chained_steps >= 2);
  KT_CHECK(st.scratch_bytes > 0);
  KT_CHECK(st.arena_bytes > 0);
  return p;
}

/* Integer pointwise ops fused into one group with a floor division: a zero divisor raises
 * ZeroDivisionError inside the group's parallel job. y = (a * 3 + 1) // b - a. */
static program_t build_divide(void) {
  kiln_graph_t* g;
  KT_OK(kiln_graph_create(&g));
  int64_t s[2] = {256, 96};
  int a, b, three, one, t0, t1, t2, y;
  KT_OK(kiln_graph_input(g, KILN_DTYPE_I32, 2, s, &a));
  KT_OK(kiln_graph_input(g, KILN_DTYPE_I32, 2, s, &b));
  KT_OK(kiln_graph_scalar_i64(g, 3, KILN_DTYPE_I32, &three));
  KT_OK(kiln_graph_scalar_i64(g, 1, KILN_DTYPE_I32, &one));
  KT_OK(kiln_graph_binary(g, KILN_BINARY_MUL, a, three, 1.0, KILN_DTYPE_I32, &t0));
  KT_OK(kiln_graph_binary(g, KILN_BINARY_ADD, t0, one, 1.0, KILN_DTYPE_I32, &t1));
  KT_OK(kiln_graph_binary(g, KILN_BINARY_DIV_FLOOR, t1, b, 1.0, KILN_DTYPE_I32, &t2));
  KT_OK(kiln_graph_binary(g, KILN_BINARY_SUB, t2, a, 1.0, KILN_DTYPE_I32, &y));
  KT_OK(kiln_graph_output(g, y));
  program_t p;
  memset(&p, 0, sizeof p);
  KT_OK(kiln_graph_compile(g, &p.e));
  kiln_graph_destroy(g);
  describe(&p);
  KT_CHECK(gt_stats(p.e).n_fused_groups == 1);
  return p;
}

/* ---- inputs, references, checks ------------------------------------------------------------- */

typedef struct io_set {
  void* in[16];
  float* ref[16]; /* single-threaded reference outputs (int32 outputs stored as their bits) */
} io_set_t;

static void fill_inputs(const program_t* p, io_set_t* s, int bad_divisor) {
  for (int i = 0; i < p->n_in; i++) {
    if (p->in_dtype[i] == F32) {
      s->in[i] = gt_randf(p->in_numel[i]);
      continue;
    }
    int32_t* v = malloc(sizeof(int32_t) * (size_t)p->in_numel[i]);
    for (int64_t j = 0; j < p->in_numel[i]; j++) {
      int32_t r = (int32_t)(gt_rand() * 1000.0);
      if (i == 1 && r == 0) r = 7; /* divisors are never 0 ... */
      v[j] = r;
    }
    if (i == 1 && bad_divisor) v[p->in_numel[i] - 5] = 0; /* ... except here */
    s->in[i] = v;
  }
}

static float** alloc_outputs(const program_t* p) {
  float** o = calloc(16, sizeof(float*));
  for (int k = 0; k < p->n_out; k++) o[k] = malloc(sizeof(float) * (size_t)p->out_numel[k]);
  return o;
}

static void free_outputs(const program_t* p, float** o) {
  for (int k = 0; k < p->n_out; k++) free(o[k]);
  free(o);
}

/* Max relative difference of a run's outputs from the reference (int32 outputs compare exactly:
 * 0 or 1e30). */
static double compare(const program_t* p, float* const* out, const io_set_t* s) {
  double worst = 0;
  for (int k = 0; k < p->n_out; k++) {
    double d = p->in_dtype[0] == F32 ? gt_maxrel(out[k], s->ref[k], p->out_numel[k])
                                     : (memcmp(out[k], s->ref[k], sizeof(float) * (size_t)p->out_numel[k]) ? 1e30 : 0);
    if (d > worst) worst = d;
  }
  return worst;
}

static void reference(const program_t* p, io_set_t* s) {
  float** o = alloc_outputs(p);
  KT_OK(kiln_exec_run(p->e, p->n_in, s->in, p->n_out, (void**)o));
  for (int k = 0; k < 16; k++) s->ref[k] = o[k];
  free(o);
}

static void free_set(const program_t* p, io_set_t* s) {
  for (int i = 0; i < p->n_in; i++) free(s->in[i]);
  for (int k = 0; k < p->n_out; k++) free(s->ref[k]);
}

/* ---- the stress runner ------------------------------------------------------------------------ */

typedef struct worker {
  const program_t* p;
  io_set_t* sets; /* N_SETS of this thread */
  int iters;
  int expect_error_set; /* the set whose runs must fail (-1: none) */
  pthread_barrier_t* start;
  /* results */
  int runs, mismatches, wrong_status;
  double worst;
} worker_t;

static void* worker_main(void* arg) {
  worker_t* w = arg;
  const program_t* p = w->p;
  const int64_t ws_bytes = kiln_exec_workspace_size(p->e);
  void* ws[2] = {NULL, NULL};
  for (int k = 0; k < 2; k++)
    if (ws_bytes > 0) ws[k] = aligned_alloc(64, (size_t)(ws_bytes + 63) / 64 * 64);
  float** out = alloc_outputs(p);
  pthread_barrier_wait(w->start);
  for (int it = 0; it < w->iters; it++) {
    const int si = it % N_SETS, mode = (it / N_SETS) % 3;
    io_set_t* s = &w->sets[si];
    for (int k = 0; k < p->n_out; k++) memset(out[k], 0xff, sizeof(float) * (size_t)p->out_numel[k]);
    kiln_status_t st = mode == 0 ? kiln_exec_run(p->e, p->n_in, s->in, p->n_out, (void**)out)
                                 : kiln_exec_run_workspace(p->e, p->n_in, s->in, p->n_out, (void**)out,
                                                           ws[mode - 1], ws_bytes);
    w->runs++;
    if (si == w->expect_error_set) {
      if (st != KILN_ERROR_INVALID_ARGUMENT || !strstr(kiln_status_message(), "ZeroDivisionError"))
        w->wrong_status++;
      continue;
    }
    if (st != KILN_OK) {
      fprintf(stderr, "  run failed: %s\n", kiln_status_message());
      w->wrong_status++;
      continue;
    }
    double d = compare(p, out, s);
    if (d > w->worst) w->worst = d;
    if (d > 1e-5) w->mismatches++;
  }
  free_outputs(p, out);
  free(ws[0]);
  free(ws[1]);
  return NULL;
}

/* Runs p from N_THREADS threads, iters runs each, every thread with its own N_SETS input sets
 * (set 1 of thread 0 failing with a zero divisor when with_error). */
static void stress(const program_t* p, int iters, int with_error) {
  io_set_t sets[N_THREADS][N_SETS];
  for (int t = 0; t < N_THREADS; t++)
    for (int k = 0; k < N_SETS; k++) {
      const int bad = with_error && t == 0 && k == 1;
      fill_inputs(p, &sets[t][k], bad);
      if (bad) {
        float** o = alloc_outputs(p);
        KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_exec_run(p->e, p->n_in, sets[t][k].in, p->n_out, (void**)o));
        for (int j = 0; j < 16; j++) sets[t][k].ref[j] = o[j];
        free(o);
      } else {
        reference(p, &sets[t][k]);
      }
    }
  pthread_barrier_t start;
  pthread_barrier_init(&start, NULL, N_THREADS);
  worker_t w[N_THREADS];
  pthread_t th[N_THREADS];
  for (int t = 0; t < N_THREADS; t++) {
    memset(&w[t], 0, sizeof w[t]);
    w[t].p = p;
    w[t].sets = sets[t];
    w[t].iters = iters;
    w[t].expect_error_set = with_error && t == 0 ? 1 : -1;
    w[t].start = &start;
    KT_CHECK(pthread_create(&th[t], NULL, worker_main, &w[t]) == 0);
  }
  int runs = 0, bad = 0, wrong = 0;
  double worst = 0;
  for (int t = 0; t < N_THREADS; t++) {
    pthread_join(th[t], NULL);
    runs += w[t].runs;
    bad += w[t].mismatches;
    wrong += w[t].wrong_status;
    if (w[t].worst > worst) worst = w[t].worst;
  }
  pthread_barrier_destroy(&start);
  if (bad || wrong)
    fprintf(stderr, "  %d of %d runs wrong (max rel diff %g), %d with a wrong status\n", bad, runs, worst, wrong);
  KT_CHECK(runs == N_THREADS * iters);
  KT_CHECK(bad == 0);
  KT_CHECK(wrong == 0);
  for (int t = 0; t < N_THREADS; t++)
    for (int k = 0; k < N_SETS; k++) free_set(p, &sets[t][k]);
}

/* ---- tests ------------------------------------------------------------------------------------ */

KT_TEST(block_from_threads_matches_single_threaded) {
  program_t p = build_block(NULL);
  stress(&p, 24, 0);
  kiln_exec_destroy(p.e);
}

/* An error inside one run's parallel job is that run's only: concurrent runs of the same
 * program succeed with the right values, and the failing run reports its own error. */
KT_TEST(errors_stay_with_their_run) {
  program_t p = build_divide();
  stress(&p, 60, 1);
  kiln_exec_destroy(p.e);
}

/* Single-threaded runs allocate nothing after compile (kiln_exec_run_workspace) or after the
 * first call (kiln_exec_run's arena); overlapping runs add at most a context (and its arena)
 * per extra thread, however many runs they make. */
KT_TEST(steady_state_runs_do_not_allocate) {
  program_t p = build_block(&g_counting);
  io_set_t s;
  fill_inputs(&p, &s, 0);
  reference(&p, &s); /* the first kiln_exec_run: allocates the context's arena */
  float** out = alloc_outputs(&p);
  const int64_t wsb = kiln_exec_workspace_size(p.e);
  void* ws = aligned_alloc(64, (size_t)(wsb + 63) / 64 * 64);
  long before = atomic_load(&g_allocs);
  for (int i = 0; i < 5; i++) {
    KT_OK(kiln_exec_run(p.e, p.n_in, s.in, p.n_out, (void**)out));
    KT_OK(kiln_exec_run_workspace(p.e, p.n_in, s.in, p.n_out, (void**)out, ws, wsb));
  }
  KT_CHECK(atomic_load(&g_allocs) == before);
  KT_CHECK(compare(&p, out, &s) == 0);
  /* 2 x 4 x 8 overlapping runs: at most N_THREADS contexts (one exists), each made once with
   * its vt, out_t and scratch, and its arena on its first kiln_exec_run */
  stress(&p, 8, 0);
  stress(&p, 8, 0);
  KT_CHECK(atomic_load(&g_allocs) - before <= (N_THREADS - 1) * 5);
  free(ws);
  free_outputs(&p, out);
  free_set(&p, &s);
  kiln_exec_destroy(p.e);
}

typedef struct toggler {
  kiln_exec_t* e;
  atomic_int* stop;
  int toggles;
} toggler_t;

static void* toggle_main(void* arg) {
  toggler_t* t = arg;
  char buf[256];
  while (!atomic_load(t->stop)) {
    KT_OK(kiln_exec_set_profiling(t->e, t->toggles % 2 == 0));
    KT_OK(kiln_exec_dump(t->e, KILN_DUMP_PROFILE, buf, sizeof buf, NULL));
    t->toggles++;
  }
  return NULL;
}

/* Profiling switched on and off and dumped while runs are in flight: the runs stay correct and
 * nothing is freed under them (ASan). */
KT_TEST(profiling_toggles_during_runs) {
  program_t p = build_block(NULL);
  atomic_int stop = 0;
  toggler_t tg = {p.e, &stop, 0};
  pthread_t th;
  KT_CHECK(pthread_create(&th, NULL, toggle_main, &tg) == 0);
  stress(&p, 9, 0);
  atomic_store(&stop, 1);
  pthread_join(th, NULL);
  KT_CHECK(tg.toggles > 0);
  /* counting on: every run is counted, the concurrent ones too */
  KT_OK(kiln_exec_set_profiling(p.e, 1));
  stress(&p, 3, 0);
  size_t need = 0;
  KT_OK(kiln_exec_dump(p.e, KILN_DUMP_PROFILE, NULL, 0, &need));
  char* text = malloc(need);
  KT_OK(kiln_exec_dump(p.e, KILN_DUMP_PROFILE, text, need, NULL));
  char want[64];
  snprintf(want, sizeof want, "profile: %d runs", N_THREADS * (N_SETS + 3)); /* + the references */
  KT_CHECK(strstr(text, want) != NULL);
  free(text);
  kiln_exec_destroy(p.e);
}

KT_MAIN()
