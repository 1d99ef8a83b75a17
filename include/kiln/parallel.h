/* SPDX-License-Identifier: Apache-2.0 */
/* kiln/parallel.h - the persistent thread pool every CPU kernel runs on.
 *
 * Workers are created once and sleep between jobs; a parallel_for never creates threads. Work is
 * claimed in chunks from a cache-line aligned atomic counter, the calling thread takes part, and
 * the call returns when every chunk is done. Calls made from inside a running job, or while
 * another thread owns the pool, run inline on the caller (serially), so nesting is safe.
 *
 * Threads: any number of host threads may submit to one pool at once. One job owns the pool at
 * a time (an atomic flag taken without waiting); a caller that finds it busy runs its whole
 * range inline (as thread 0, or under its own id when nested in a job of the pool) instead of
 * queueing, so concurrent submitters never block each other or deadlock, and each call still
 * covers its range exactly once. Thread ids are unique within one job, not across concurrent
 * jobs: per-thread scratch must belong to the call (or the caller's run), never to a shared
 * object. kiln_threadpool_destroy must not overlap any use of the pool.
 */
#ifndef KILN_PARALLEL_H
#define KILN_PARALLEL_H

#include <stdint.h>

#include "kiln/allocator.h"
#include "kiln/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kiln_threadpool kiln_threadpool_t;

/* fn processes indices [begin, end); `thread_id` is in [0, pool size) and unique among the
 * threads running the same job at once (use it to index per-thread scratch). */
typedef void (*kiln_range_fn_t)(void* ctx, int64_t begin, int64_t end, int thread_id);

/* Creates a pool of `num_threads` total threads (the caller counts as one, so num_threads-1
 * workers start). num_threads <= 0 means the number of online CPUs. Errors: OUT_OF_MEMORY,
 * INTERNAL (thread creation failed). The pool is owned by the caller. Idle workers spin for
 * KILN_POOL_SPIN_US microseconds (read at creation, default 2000) before they sleep. */
kiln_status_t kiln_threadpool_create(int num_threads, const kiln_allocator_t* host_allocator,
                                     kiln_threadpool_t** out_pool);
/* Stops and joins the workers, frees the pool. NULL is a no-op. */
void kiln_threadpool_destroy(kiln_threadpool_t* pool);
/* Total threads (workers + caller). */
int kiln_threadpool_size(const kiln_threadpool_t* pool);

/* Runs fn over [0, n) split into chunks of at least `grain` indices (grain <= 0 means 1).
 * n <= grain runs inline. Never fails. */
void kiln_threadpool_parallel_for(kiln_threadpool_t* pool, int64_t n, int64_t grain,
                                  kiln_range_fn_t fn, void* ctx);

/* Runs fn(ctx, u, u + 1, id) once for every unit u in [0, n) with thread affinity: thread t of
 * a T-thread pool (the caller is thread 0) first runs units [t*n/T, (t+1)*n/T) in order, then
 * takes the units no thread has started from the others' ranges, last first. The same thread
 * thus runs the same units on every call while the threads keep pace, and their data stays in
 * its caches; a late or sleeping worker only loses units. n > 64 runs as parallel_for with
 * grain 1; nested or busy-pool calls run fn(ctx, 0, n, id) inline. Never fails. */
void kiln_threadpool_parallel_units(kiln_threadpool_t* pool, int64_t n, kiln_range_fn_t fn, void* ctx);

/* The process-wide pool shared by kernels and the CPU device, created on first use with
 * KILN_NUM_THREADS threads (default: online CPUs). Aborts only if no thread at all can run. */
kiln_threadpool_t* kiln_threadpool_default(void);

/* kiln_threadpool_parallel_for on the default pool. */
void kiln_parallel_for(int64_t n, int64_t grain, kiln_range_fn_t fn, void* ctx);

/* kiln_threadpool_parallel_units on the default pool. */
void kiln_parallel_units(int64_t n, kiln_range_fn_t fn, void* ctx);

#ifdef __cplusplus
}
#endif
#endif /* KILN_PARALLEL_H */
