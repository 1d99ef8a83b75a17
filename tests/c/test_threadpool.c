/* SPDX-License-Identifier: Apache-2.0 */
/* test_threadpool.c - kiln/parallel.h: coverage, thread ids, nesting, concurrent callers. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

#include "kiln_test.h"

#define MAX_N 100000
#define MAX_THREADS 64

/* The default pool reads KILN_NUM_THREADS on first use; set it before any test runs. */
__attribute__((constructor)) static void set_num_threads(void) { setenv("KILN_NUM_THREADS", "3", 1); }

typedef struct coverage {
  atomic_int* counts;
  int64_t n;
  int pool_size;
  atomic_int running[MAX_THREADS]; /* 1 while a thread id is inside fn */
  atomic_int bad;                  /* bad range, bad id or an id used twice at once */
  atomic_int calls;
} coverage_t;

static void cover_fn(void* ctx, int64_t begin, int64_t end, int thread_id) {
  coverage_t* c = ctx;
  atomic_fetch_add(&c->calls, 1);
  if (begin < 0 || end > c->n || begin >= end || thread_id < 0 || thread_id >= c->pool_size) {
    atomic_store(&c->bad, 1);
    return;
  }
  if (atomic_exchange(&c->running[thread_id], 1) != 0) atomic_store(&c->bad, 1);
  for (int64_t i = begin; i < end; i++) atomic_fetch_add(&c->counts[i], 1);
  atomic_store(&c->running[thread_id], 0);
}

/* Runs one parallel_for and checks every index was visited exactly once. */
static int check_cover(kiln_threadpool_t* pool, coverage_t* c, atomic_int* counts, int64_t n, int64_t grain) {
  memset(c, 0, sizeof(*c));
  c->counts = counts;
  c->n = n;
  c->pool_size = kiln_threadpool_size(pool);
  for (int64_t i = 0; i < n; i++) atomic_store(&counts[i], 0);
  kiln_threadpool_parallel_for(pool, n, grain, cover_fn, c);
  int ok = !atomic_load(&c->bad);
  for (int64_t i = 0; i < n && ok; i++) ok = atomic_load(&counts[i]) == 1;
  if (!ok) fprintf(stderr, "  coverage failed for n=%lld grain=%lld\n", (long long)n, (long long)grain);
  return ok;
}

static atomic_int g_counts[MAX_N];
static coverage_t g_cov;

KT_TEST(test_create_size_destroy) {
  kiln_threadpool_t* pool = NULL;
  KT_OK(kiln_threadpool_create(4, NULL, &pool));
  KT_CHECK(kiln_threadpool_size(pool) == 4);
  kiln_threadpool_destroy(pool);
  KT_OK(kiln_threadpool_create(0, NULL, &pool));
  KT_CHECK(kiln_threadpool_size(pool) >= 1);
  kiln_threadpool_destroy(pool);
  kiln_threadpool_destroy(NULL);
  for (int i = 0; i < 10; i++) {
    KT_OK(kiln_threadpool_create(3, NULL, &pool));
    kiln_threadpool_destroy(pool);
  }
}

KT_TEST(test_covers_every_index_once) {
  const int64_t ns[] = {0, 1, 2, 3, 7, 64, 100, 1000, 4097, MAX_N};
  const int64_t grains[] = {-5, 0, 1, 3, 64, 1000, (int64_t)1 << 40};
  const int sizes[] = {1, 2, 4};
  for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
    kiln_threadpool_t* pool = NULL;
    KT_OK(kiln_threadpool_create(sizes[s], NULL, &pool));
    for (size_t i = 0; i < sizeof(ns) / sizeof(ns[0]); i++)
      for (size_t g = 0; g < sizeof(grains) / sizeof(grains[0]); g++)
        KT_CHECK(check_cover(pool, &g_cov, g_counts, ns[i], grains[g]));
    kiln_threadpool_destroy(pool);
  }
}

KT_TEST(test_n_zero_never_calls) {
  kiln_threadpool_t* pool = NULL;
  KT_OK(kiln_threadpool_create(2, NULL, &pool));
  check_cover(pool, &g_cov, g_counts, 0, 1);
  KT_CHECK(atomic_load(&g_cov.calls) == 0);
  kiln_threadpool_destroy(pool);
}

typedef struct inline_probe {
  pthread_t caller;
  int calls, same_thread, thread_id;
  int64_t begin, end;
} inline_probe_t;

static void probe_fn(void* ctx, int64_t begin, int64_t end, int thread_id) {
  inline_probe_t* p = ctx;
  p->calls++;
  p->same_thread = pthread_equal(p->caller, pthread_self());
  p->thread_id = thread_id;
  p->begin = begin;
  p->end = end;
}

KT_TEST(test_small_n_runs_inline) {
  kiln_threadpool_t* pool = NULL;
  KT_OK(kiln_threadpool_create(4, NULL, &pool));
  inline_probe_t p = {.caller = pthread_self()};
  kiln_threadpool_parallel_for(pool, 10, 10, probe_fn, &p);
  KT_CHECK(p.calls == 1 && p.same_thread && p.thread_id == 0 && p.begin == 0 && p.end == 10);
  memset(&p, 0, sizeof(p));
  p.caller = pthread_self();
  kiln_threadpool_parallel_for(pool, 1, 0, probe_fn, &p);
  KT_CHECK(p.calls == 1 && p.same_thread && p.end == 1);
  kiln_threadpool_destroy(pool);
}

typedef struct nested {
  kiln_threadpool_t* pool;
  atomic_int counts[16 * 100];
  atomic_int bad;
} nested_t;

typedef struct inner_ctx {
  nested_t* outer;
  int64_t row;
  int outer_thread_id;
} inner_ctx_t;

static void inner_fn(void* ctx, int64_t begin, int64_t end, int thread_id) {
  inner_ctx_t* c = ctx;
  if (thread_id != c->outer_thread_id) atomic_store(&c->outer->bad, 1);
  for (int64_t i = begin; i < end; i++) atomic_fetch_add(&c->outer->counts[c->row * 100 + i], 1);
}

static void outer_fn(void* ctx, int64_t begin, int64_t end, int thread_id) {
  nested_t* n = ctx;
  for (int64_t r = begin; r < end; r++) {
    inner_ctx_t c = {n, r, thread_id};
    kiln_threadpool_parallel_for(n->pool, 100, 1, inner_fn, &c);
  }
}

KT_TEST(test_nested_runs_inline) {
  static nested_t n;
  memset(&n, 0, sizeof(n));
  KT_OK(kiln_threadpool_create(4, NULL, &n.pool));
  kiln_threadpool_parallel_for(n.pool, 16, 1, outer_fn, &n);
  int ok = 1;
  for (int i = 0; i < 16 * 100; i++) ok &= atomic_load(&n.counts[i]) == 1;
  KT_CHECK(ok);
  KT_CHECK(atomic_load(&n.bad) == 0);
  kiln_threadpool_destroy(n.pool);
}

typedef struct concurrent_arg {
  kiln_threadpool_t* pool;
  coverage_t cov;
  atomic_int counts[5000];
  int ok;
} concurrent_arg_t;

static void* concurrent_main(void* arg) {
  concurrent_arg_t* a = arg;
  a->ok = 1;
  for (int i = 0; i < 300; i++) a->ok &= check_cover(a->pool, &a->cov, a->counts, 1000 + i * 13, 7);
  return NULL;
}

KT_TEST(test_concurrent_callers) {
  static concurrent_arg_t args[2];
  kiln_threadpool_t* pool = NULL;
  KT_OK(kiln_threadpool_create(4, NULL, &pool));
  pthread_t threads[2];
  for (int i = 0; i < 2; i++) {
    args[i].pool = pool;
    KT_CHECK(pthread_create(&threads[i], NULL, concurrent_main, &args[i]) == 0);
  }
  for (int i = 0; i < 2; i++) pthread_join(threads[i], NULL);
  KT_CHECK(args[0].ok && args[1].ok);
  kiln_threadpool_destroy(pool);
}

static void sum_fn(void* ctx, int64_t begin, int64_t end, int thread_id) {
  (void)thread_id;
  int64_t s = 0;
  for (int64_t i = begin; i < end; i++) s += i;
  atomic_fetch_add((atomic_llong*)ctx, s);
}

KT_TEST(test_many_small_jobs) {
  kiln_threadpool_t* pool = NULL;
  KT_OK(kiln_threadpool_create(4, NULL, &pool));
  int ok = 1;
  for (int j = 0; j < 3000; j++) {
    atomic_llong sum;
    atomic_init(&sum, 0);
    int64_t n = 16 + j % 50;
    kiln_threadpool_parallel_for(pool, n, 1, sum_fn, &sum);
    ok &= atomic_load(&sum) == n * (n - 1) / 2;
  }
  KT_CHECK(ok);
  kiln_threadpool_destroy(pool);
}

typedef struct rendezvous {
  atomic_int arrived;
  atomic_int ids_mask;
} rendezvous_t;

static void rendezvous_fn(void* ctx, int64_t begin, int64_t end, int thread_id) {
  (void)begin;
  (void)end;
  rendezvous_t* r = ctx;
  atomic_fetch_or(&r->ids_mask, 1 << thread_id);
  atomic_fetch_add(&r->arrived, 1);
  for (int i = 0; i < 2000 && atomic_load(&r->arrived) < 2; i++) {
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
  }
}

KT_TEST(test_workers_take_part) {
  kiln_threadpool_t* pool = NULL;
  KT_OK(kiln_threadpool_create(2, NULL, &pool));
  rendezvous_t r;
  atomic_init(&r.arrived, 0);
  atomic_init(&r.ids_mask, 0);
  kiln_threadpool_parallel_for(pool, 2, 1, rendezvous_fn, &r);
  KT_CHECK(atomic_load(&r.arrived) == 2);
  KT_CHECK(atomic_load(&r.ids_mask) == 3);
  kiln_threadpool_destroy(pool);
}

/* parallel_units: every unit exactly once as a one-unit range (past 64 units, as parallel_for
 * ranges), valid and never doubly-used thread ids, for pool sizes 1-4 and unit counts 0-200. */
static int check_units(kiln_threadpool_t* pool, coverage_t* c, atomic_int* counts, int64_t n, int* ranges_of_one) {
  memset(c, 0, sizeof(*c));
  c->counts = counts;
  c->n = n;
  c->pool_size = kiln_threadpool_size(pool);
  for (int64_t i = 0; i < n; i++) atomic_store(&counts[i], 0);
  kiln_threadpool_parallel_units(pool, n, cover_fn, c);
  int ok = !atomic_load(&c->bad);
  for (int64_t i = 0; i < n && ok; i++) ok = atomic_load(&counts[i]) == 1;
  *ranges_of_one = atomic_load(&c->calls) == n;
  if (!ok) fprintf(stderr, "  unit coverage failed for n=%lld\n", (long long)n);
  return ok;
}

/* Four host threads submitting to one pool at once, each mixing parallel_for, parallel_units
 * and nested calls: whichever gets the pool runs with its workers, the others run inline; every
 * index is covered once, thread ids are valid and never doubly used within a job, and nobody
 * deadlocks. A nested call from an inline (busy-pool) run may take the pool itself once it is
 * free, so inner jobs check their own coverage and ids, not the outer id. */
#define MIX_ROWS 8
typedef struct mixed_arg {
  kiln_threadpool_t* pool;
  coverage_t cov;
  atomic_int counts[3000];
  coverage_t rows[MIX_ROWS];
  atomic_int row_counts[MIX_ROWS][200];
  atomic_int bad;
  int ok;
} mixed_arg_t;

static void mixed_outer_fn(void* ctx, int64_t begin, int64_t end, int thread_id) {
  mixed_arg_t* a = ctx;
  (void)thread_id;
  for (int64_t r = begin; r < end; r++) {
    coverage_t* c = &a->rows[r];
    kiln_threadpool_parallel_for(a->pool, c->n, 3, cover_fn, c);
  }
}

static void* mixed_main(void* arg) {
  mixed_arg_t* a = arg;
  a->ok = 1;
  for (int i = 0; i < 150; i++) {
    int one;
    a->ok &= check_cover(a->pool, &a->cov, a->counts, 500 + (i * 37) % 2500, 1 + i % 5);
    a->ok &= check_units(a->pool, &a->cov, a->counts, 1 + i % 70, &one);
    for (int r = 0; r < MIX_ROWS; r++) {
      memset(&a->rows[r], 0, sizeof a->rows[r]);
      a->rows[r].counts = a->row_counts[r];
      a->rows[r].n = 50 + (r * 19 + i) % 150;
      a->rows[r].pool_size = kiln_threadpool_size(a->pool);
      for (int k = 0; k < 200; k++) atomic_store(&a->row_counts[r][k], 0);
    }
    kiln_threadpool_parallel_for(a->pool, MIX_ROWS, 1, mixed_outer_fn, a);
    for (int r = 0; r < MIX_ROWS; r++) {
      a->ok &= !atomic_load(&a->rows[r].bad);
      for (int64_t k = 0; k < a->rows[r].n; k++) a->ok &= atomic_load(&a->row_counts[r][k]) == 1;
    }
  }
  return NULL;
}

KT_TEST(test_concurrent_callers_mixed) {
  static mixed_arg_t args[4];
  kiln_threadpool_t* pool = NULL;
  KT_OK(kiln_threadpool_create(3, NULL, &pool));
  pthread_t threads[4];
  for (int i = 0; i < 4; i++) {
    memset(&args[i], 0, sizeof args[i]);
    args[i].pool = pool;
    KT_CHECK(pthread_create(&threads[i], NULL, mixed_main, &args[i]) == 0);
  }
  for (int i = 0; i < 4; i++) {
    pthread_join(threads[i], NULL);
    KT_CHECK(args[i].ok);
  }
  kiln_threadpool_destroy(pool);
}

KT_TEST(test_units_cover_each_once) {
  const int64_t ns[] = {0, 1, 2, 3, 4, 5, 17, 63, 64, 65, 200};
  for (int size = 1; size <= 4; size++) {
    kiln_threadpool_t* pool = NULL;
    KT_OK(kiln_threadpool_create(size, NULL, &pool));
    for (int rep = 0; rep < 50; rep++)
      for (size_t i = 0; i < sizeof(ns) / sizeof(ns[0]); i++) {
        int one;
        KT_CHECK(check_units(pool, &g_cov, g_counts, ns[i], &one));
        /* a pool of one, or one unit, runs inline as one call over [0, n) */
        if (size > 1 && ns[i] > 1 && ns[i] <= 64) KT_CHECK(one);
      }
    kiln_threadpool_destroy(pool);
  }
  atomic_llong sum;
  atomic_init(&sum, 0);
  kiln_parallel_units(40, sum_fn, &sum);
  KT_CHECK(atomic_load(&sum) == 40LL * 39 / 2);
}

/* With the threads in step, thread t runs its own units [t*n/T, (t+1)*n/T): each of two
 * rendezvousing threads takes its own half first. */
typedef struct unit_owner {
  rendezvous_t r;
  atomic_int owner[4];
} unit_owner_t;

static void owner_fn(void* ctx, int64_t begin, int64_t end, int thread_id) {
  unit_owner_t* u = ctx;
  (void)end;
  atomic_store(&u->owner[begin], thread_id + 1);
  if (begin == 0 || begin == 2) rendezvous_fn(&u->r, begin, end, thread_id); /* first units wait */
}

KT_TEST(test_units_prefer_own_range) {
  kiln_threadpool_t* pool = NULL;
  KT_OK(kiln_threadpool_create(2, NULL, &pool));
  unit_owner_t u;
  memset(&u, 0, sizeof(u));
  kiln_threadpool_parallel_units(pool, 4, owner_fn, &u);
  KT_CHECK(atomic_load(&u.r.arrived) == 2);
  /* units 0 and 2 ran at once, so on different threads: 0 on the caller, 2 on the worker */
  KT_CHECK(atomic_load(&u.owner[0]) == 1 && atomic_load(&u.owner[2]) == 2);
  kiln_threadpool_destroy(pool);
}

/* Nested in a running job, parallel_units runs inline on the outer thread. */
static void units_inner_outer(void* ctx, int64_t begin, int64_t end, int thread_id) {
  nested_t* n = ctx;
  for (int64_t r = begin; r < end; r++) {
    inner_ctx_t c = {n, r, thread_id};
    kiln_threadpool_parallel_units(n->pool, 30, inner_fn, &c);
  }
}

KT_TEST(test_units_nested_inline) {
  static nested_t n;
  memset(&n, 0, sizeof(n));
  KT_OK(kiln_threadpool_create(3, NULL, &n.pool));
  kiln_threadpool_parallel_units(n.pool, 16, units_inner_outer, &n);
  int ok = 1;
  for (int r = 0; r < 16; r++)
    for (int i = 0; i < 100; i++) ok &= atomic_load(&n.counts[r * 100 + i]) == (i < 30);
  KT_CHECK(ok);
  KT_CHECK(atomic_load(&n.bad) == 0);
  kiln_threadpool_destroy(n.pool);
}

KT_TEST(test_default_pool) {
  kiln_threadpool_t* pool = kiln_threadpool_default();
  KT_CHECK(pool != NULL);
  KT_CHECK(pool == kiln_threadpool_default());
  KT_CHECK(kiln_threadpool_size(pool) == 3);
  KT_CHECK(check_cover(pool, &g_cov, g_counts, MAX_N, 100));
  atomic_llong sum;
  atomic_init(&sum, 0);
  kiln_parallel_for(10000, 10, sum_fn, &sum);
  KT_CHECK(atomic_load(&sum) == 10000LL * 9999 / 2);
}

KT_MAIN()
