/* SPDX-License-Identifier: Apache-2.0 */
/* threadpool.c - the persistent thread pool behind kiln/parallel.h.
 *
 * Workers are started once and wait for jobs: a bounded spin on `state` (KILN_POOL_SPIN_US),
 * then a condvar. A job is published by storing a new odd `state` ((generation << 1) | open);
 * every thread then claims chunk indices from the `next_chunk` counter until the range is
 * exhausted. The owner takes part as thread 0, then closes the job (clears the open bit) and
 * waits (the same bounded spin, then a condvar) until `active`, the number of workers inside the
 * job, drops to zero: that is the completion point, and it also guarantees no
 * worker still reads the job fields when the next job overwrites them. A worker enters a job by
 * incrementing `active` and re-checking `state` (both seq_cst), so it either sees the job still
 * open, or the owner sees it active.
 */
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "kiln/parallel.h"

/* How long an idle worker, or an owner waiting for its workers to leave a job, spins before it
 * sleeps on a condvar, in microseconds (KILN_POOL_SPIN_US overrides; 0 leaves only the 256 pauses
 * before the first clock read). Waking a sleeping thread costs tens of microseconds on a VM (the
 * vCPU is halted), which the first parallel op of every call paid when the gap between calls
 * (Python, dynamo) outlasted the spin; OpenMP runtimes spin similarly. */
#define KILN_POOL_SPIN_US_DEFAULT 2000
#define KILN_POOL_MAX_THREADS 1024
#define KILN_POOL_UNITS_MAX 64 /* units of an affine job (kiln_threadpool_parallel_units) */

typedef struct kiln_pool_worker {
  pthread_t thread;
  kiln_threadpool_t* pool;
  int id;
} kiln_pool_worker_t;

struct kiln_threadpool {
  _Alignas(64) atomic_llong next_chunk; /* next chunk index to claim */
  _Alignas(64) atomic_uint state;       /* (generation << 1) | open */
  _Alignas(64) atomic_int active;       /* workers inside the current job */
  _Alignas(64) atomic_flag busy;        /* held by the thread that owns the current job */
  atomic_int stop;

  /* The current job: written by the owner only while no worker is inside. */
  kiln_range_fn_t fn;
  void* ctx;
  int64_t n;
  int64_t chunk; /* 0: an affine job (units claimed through `claimed`) */
  _Alignas(64) atomic_char claimed[KILN_POOL_UNITS_MAX];

  int size;
  int num_started;
  int64_t spin_us; /* how long a waiting thread spins before its condvar */
  kiln_pool_worker_t* workers;
  pthread_mutex_t mu;
  pthread_cond_t wake_cv; /* workers sleep here between jobs */
  pthread_cond_t idle_cv; /* the owner sleeps here until active == 0 */
  kiln_allocator_t allocator;
};

/* The pool whose job this thread is running (NULL outside jobs) and its id in that job. */
static _Thread_local kiln_threadpool_t* tls_pool;
static _Thread_local int tls_thread_id;

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* KILN_POOL_SPIN_US (microseconds, 0 to 10 s), else the default. */
static int64_t spin_us_setting(void) {
  const char* env = getenv("KILN_POOL_SPIN_US");
  if (env != NULL && *env != '\0') {
    char* end = NULL;
    long long v = strtoll(env, &end, 10);
    if (*end == '\0' && v >= 0 && v <= 10000000) return (int64_t)v;
  }
  return KILN_POOL_SPIN_US_DEFAULT;
}

/* A bounded spin: spin_more() pauses once and says whether the budget (spin_ns from the first
 * clock read, which comes after 256 pauses, so short waits never read the clock) is left. */
typedef struct spinner {
  int64_t spin_ns, deadline;
  unsigned i;
} spinner_t;

static int spin_more(spinner_t* sp) {
  cpu_relax();
  if ((++sp->i & 255u) != 0) return 1;
  const int64_t now = now_ns();
  if (sp->deadline < 0) sp->deadline = now + sp->spin_ns;
  return now < sp->deadline;
}

/* Runs unit u of an affine job unless another thread has started it. */
static void run_unit(kiln_threadpool_t* pool, int64_t u, int thread_id) {
  if (atomic_load_explicit(&pool->claimed[u], memory_order_relaxed) == 0 &&
      atomic_exchange_explicit(&pool->claimed[u], 1, memory_order_relaxed) == 0)
    pool->fn(pool->ctx, u, u + 1, thread_id);
}

static void run_chunks(kiln_threadpool_t* pool, int thread_id) {
  kiln_threadpool_t* saved_pool = tls_pool;
  int saved_id = tls_thread_id;
  tls_pool = pool;
  tls_thread_id = thread_id;
  const int64_t n = pool->n, chunk = pool->chunk;
  if (chunk == 0) { /* affine: this thread's own units in order, then the others' from their ends */
    const int64_t size = pool->size;
    for (int64_t u = thread_id * n / size; u < (thread_id + 1) * n / size; u++) run_unit(pool, u, thread_id);
    for (int64_t k = 1; k < size; k++) {
      const int64_t o = (thread_id + k) % size;
      for (int64_t u = (o + 1) * n / size - 1; u >= o * n / size; u--) run_unit(pool, u, thread_id);
    }
  } else {
    const int64_t num_chunks = (n + chunk - 1) / chunk;
    for (;;) {
      int64_t i = atomic_fetch_add_explicit(&pool->next_chunk, 1, memory_order_relaxed);
      if (i >= num_chunks) break;
      int64_t begin = i * chunk;
      int64_t end = n - begin < chunk ? n : begin + chunk;
      pool->fn(pool->ctx, begin, end, thread_id);
    }
  }
  tls_pool = saved_pool;
  tls_thread_id = saved_id;
}

static int job_ready(unsigned state, unsigned seen) { return (state & 1u) && state != seen; }

/* Waits until a job other than `seen` is open or the pool stops; returns the state seen. */
static unsigned wait_for_job(kiln_threadpool_t* pool, unsigned seen) {
  spinner_t sp = {pool->spin_us * 1000, -1, 0};
  do {
    unsigned s = atomic_load_explicit(&pool->state, memory_order_acquire);
    if (job_ready(s, seen) || atomic_load_explicit(&pool->stop, memory_order_relaxed)) return s;
  } while (spin_more(&sp));
  pthread_mutex_lock(&pool->mu);
  unsigned s;
  while (!job_ready(s = atomic_load(&pool->state), seen) && !atomic_load(&pool->stop))
    pthread_cond_wait(&pool->wake_cv, &pool->mu);
  pthread_mutex_unlock(&pool->mu);
  return s;
}

static void* worker_main(void* arg) {
  kiln_pool_worker_t* w = arg;
  kiln_threadpool_t* pool = w->pool;
  unsigned seen = 0; /* the state before the first job */
  for (;;) {
    unsigned s = wait_for_job(pool, seen);
    if (atomic_load(&pool->stop)) break;
    seen = s;
    atomic_fetch_add(&pool->active, 1);
    if (atomic_load(&pool->state) == s) run_chunks(pool, w->id);
    if (atomic_fetch_sub(&pool->active, 1) == 1) {
      pthread_mutex_lock(&pool->mu);
      pthread_cond_broadcast(&pool->idle_cv);
      pthread_mutex_unlock(&pool->mu);
    }
  }
  return NULL;
}

static int online_cpus(void) {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n < 1 ? 1 : (n > KILN_POOL_MAX_THREADS ? KILN_POOL_MAX_THREADS : (int)n);
}

/* Creates a pool of num_threads threads (caller included). */
kiln_status_t kiln_threadpool_create(int num_threads, const kiln_allocator_t* host_allocator,
                                     kiln_threadpool_t** out_pool) {
  if (out_pool == NULL) return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "kiln threadpool: NULL out_pool");
  *out_pool = NULL;
  if (num_threads <= 0) num_threads = online_cpus();
  if (num_threads > KILN_POOL_MAX_THREADS) num_threads = KILN_POOL_MAX_THREADS;
  kiln_allocator_t a = host_allocator ? *host_allocator : kiln_allocator_system();
  kiln_threadpool_t* pool = kiln_allocator_alloc(&a, sizeof(*pool), _Alignof(kiln_threadpool_t));
  kiln_pool_worker_t* workers = NULL;
  if (num_threads > 1) workers = kiln_allocator_alloc(&a, sizeof(*workers) * (size_t)(num_threads - 1), 64);
  if (pool == NULL || (num_threads > 1 && workers == NULL)) {
    kiln_allocator_free(&a, pool);
    kiln_allocator_free(&a, workers);
    return kiln_error(KILN_ERROR_OUT_OF_MEMORY, "kiln threadpool: out of memory creating a pool");
  }
  atomic_init(&pool->next_chunk, 0);
  atomic_init(&pool->state, 0);
  atomic_init(&pool->active, 0);
  atomic_flag_clear(&pool->busy);
  atomic_init(&pool->stop, 0);
  pool->fn = NULL;
  pool->ctx = NULL;
  pool->n = pool->chunk = 0;
  pool->size = num_threads;
  pool->num_started = 0;
  pool->spin_us = spin_us_setting();
  pool->workers = workers;
  pool->allocator = a;
  pthread_mutex_init(&pool->mu, NULL);
  pthread_cond_init(&pool->wake_cv, NULL);
  pthread_cond_init(&pool->idle_cv, NULL);
  for (int i = 0; i < num_threads - 1; i++) {
    workers[i].pool = pool;
    workers[i].id = i + 1;
    int rc = pthread_create(&workers[i].thread, NULL, worker_main, &workers[i]);
    if (rc != 0) {
      kiln_threadpool_destroy(pool);
      return kiln_error(KILN_ERROR_INTERNAL, "kiln threadpool: cannot start worker %d of %d (error %d)",
                        i + 1, num_threads - 1, rc);
    }
    pool->num_started++;
  }
  *out_pool = pool;
  return KILN_OK;
}

/* Stops and joins the workers and frees the pool. */
void kiln_threadpool_destroy(kiln_threadpool_t* pool) {
  if (pool == NULL) return;
  pthread_mutex_lock(&pool->mu);
  atomic_store(&pool->stop, 1);
  pthread_cond_broadcast(&pool->wake_cv);
  pthread_mutex_unlock(&pool->mu);
  for (int i = 0; i < pool->num_started; i++) pthread_join(pool->workers[i].thread, NULL);
  pthread_cond_destroy(&pool->idle_cv);
  pthread_cond_destroy(&pool->wake_cv);
  pthread_mutex_destroy(&pool->mu);
  kiln_allocator_t a = pool->allocator;
  kiln_allocator_free(&a, pool->workers);
  kiln_allocator_free(&a, pool);
}

/* Total number of threads, the caller included. */
int kiln_threadpool_size(const kiln_threadpool_t* pool) { return pool ? pool->size : 1; }

static void run_inline(kiln_threadpool_t* pool, int64_t n, kiln_range_fn_t fn, void* ctx) {
  int id = (tls_pool == pool) ? tls_thread_id : 0;
  fn(ctx, 0, n, id);
}

static void run_job(kiln_threadpool_t* pool, int64_t n, int64_t chunk, kiln_range_fn_t fn, void* ctx);

/* Runs fn over [0, n) in chunks of at least grain indices on the pool's threads. */
void kiln_threadpool_parallel_for(kiln_threadpool_t* pool, int64_t n, int64_t grain,
                                  kiln_range_fn_t fn, void* ctx) {
  if (n <= 0 || fn == NULL) return;
  if (grain <= 0) grain = 1;
  if (n <= grain || pool == NULL || pool->size <= 1 || tls_pool != NULL) {
    run_inline(pool, n, fn, ctx);
    return;
  }
  if (atomic_flag_test_and_set_explicit(&pool->busy, memory_order_acquire)) {
    run_inline(pool, n, fn, ctx);
    return;
  }
  int64_t chunk = n / ((int64_t)pool->size * 4);
  if (chunk < grain) {
    /* The grain limits the chunk count: make it a multiple of the pool size (chunks stay >=
     * grain), else 3 chunks on 2 threads leave one thread a third of the time idle. */
    const int64_t most = n / grain, size = pool->size;
    chunk = most >= size ? (n + most / size * size - 1) / (most / size * size) : grain;
  }
  run_job(pool, n, chunk, fn, ctx);
}

/* Runs fn once per unit of [0, n), thread t preferring units [t*n/T, (t+1)*n/T). */
void kiln_threadpool_parallel_units(kiln_threadpool_t* pool, int64_t n, kiln_range_fn_t fn, void* ctx) {
  if (n <= 0 || fn == NULL) return;
  if (n > KILN_POOL_UNITS_MAX) {
    kiln_threadpool_parallel_for(pool, n, 1, fn, ctx);
    return;
  }
  if (n == 1 || pool == NULL || pool->size <= 1 || tls_pool != NULL ||
      atomic_flag_test_and_set_explicit(&pool->busy, memory_order_acquire)) {
    run_inline(pool, n, fn, ctx);
    return;
  }
  for (int64_t u = 0; u < n; u++) atomic_store_explicit(&pool->claimed[u], 0, memory_order_relaxed);
  run_job(pool, n, 0, fn, ctx);
}

/* Publishes a job (the caller holds `busy`), runs it as thread 0, waits for the workers. */
static void run_job(kiln_threadpool_t* pool, int64_t n, int64_t chunk, kiln_range_fn_t fn, void* ctx) {
  pool->fn = fn;
  pool->ctx = ctx;
  pool->n = n;
  pool->chunk = chunk;
  atomic_store_explicit(&pool->next_chunk, 0, memory_order_relaxed);

  pthread_mutex_lock(&pool->mu);
  unsigned open = ((atomic_load(&pool->state) >> 1) + 1) << 1 | 1u;
  atomic_store(&pool->state, open);
  pthread_cond_broadcast(&pool->wake_cv);
  pthread_mutex_unlock(&pool->mu);

  run_chunks(pool, 0);

  atomic_store(&pool->state, open & ~1u);
  spinner_t sp = {pool->spin_us * 1000, -1, 0};
  int idle;
  while (!(idle = atomic_load(&pool->active) == 0) && spin_more(&sp)) {
  }
  if (!idle) {
    pthread_mutex_lock(&pool->mu);
    while (atomic_load(&pool->active) != 0) pthread_cond_wait(&pool->idle_cv, &pool->mu);
    pthread_mutex_unlock(&pool->mu);
  }
  atomic_flag_clear_explicit(&pool->busy, memory_order_release);
}

static kiln_threadpool_t* g_default_pool; /* reachable for the process lifetime, never freed */
static pthread_once_t g_default_once = PTHREAD_ONCE_INIT;

static void create_default_pool(void) {
  int n = 0;
  const char* env = getenv("KILN_NUM_THREADS");
  if (env != NULL && *env != '\0') {
    char* end = NULL;
    long v = strtol(env, &end, 10);
    if (*end == '\0' && v > 0 && v <= INT_MAX) n = (int)v;
  }
  if (kiln_threadpool_create(n, NULL, &g_default_pool) == KILN_OK) return;
  if (kiln_threadpool_create(1, NULL, &g_default_pool) == KILN_OK) return;
  fprintf(stderr, "kiln: cannot create the default thread pool: %s\n", kiln_status_message());
  abort();
}

/* The process-wide pool, created on first use from KILN_NUM_THREADS. */
kiln_threadpool_t* kiln_threadpool_default(void) {
  pthread_once(&g_default_once, create_default_pool);
  return g_default_pool;
}

/* kiln_threadpool_parallel_for on the default pool. */
void kiln_parallel_for(int64_t n, int64_t grain, kiln_range_fn_t fn, void* ctx) {
  kiln_threadpool_parallel_for(kiln_threadpool_default(), n, grain, fn, ctx);
}

/* kiln_threadpool_parallel_units on the default pool. */
void kiln_parallel_units(int64_t n, kiln_range_fn_t fn, void* ctx) {
  kiln_threadpool_parallel_units(kiln_threadpool_default(), n, fn, ctx);
}
