/* SPDX-License-Identifier: Apache-2.0 */
/* runctx.c - run contexts: the per-run state of a compiled program.
 *
 * A run binds descriptors to the caller's buffers, keeps interpreter scratch per pool thread and
 * records the first error of its parallel jobs. None of that lives in the kiln_exec_t, which is
 * read only once compiled, so any number of threads may run one exec at once. Each run takes a
 * context from the exec's free list and gives it back when it returns; the list only grows when
 * runs overlap (one context per run in flight at the busiest moment), so a steady state, threaded
 * or not, never allocates. The list is guarded by a spinlock held for a pointer move or two: an
 * uncontended run pays one atomic exchange and one store on each end, where a pthread mutex
 * would cost about the same and a lock-free stack would need ABA tags. Bindings on the stack were
 * the other option, but a program has thousands of values and its scratch is megabytes.
 */
#include <sched.h>
#include <string.h>

#include "graph/graph_internal.h"

#define SPINS_BEFORE_YIELD 64

void gx_exec_lock(kiln_exec_t* e) {
  for (int i = 0; atomic_flag_test_and_set_explicit(&e->run_lock, memory_order_acquire); i++) {
    if (i >= SPINS_BEFORE_YIELD) { /* the holder was preempted: let it finish */
      sched_yield();
      i = 0;
    }
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
  }
}

void gx_exec_unlock(kiln_exec_t* e) { atomic_flag_clear_explicit(&e->run_lock, memory_order_release); }

static void free_run(const kiln_exec_t* e, gx_run* r) {
  gx_free(&e->alloc, r->vt);
  gx_free(&e->alloc, r->out_t);
  gx_free(&e->alloc, r->own_arena);
  gx_free(&e->alloc, r->scratch);
  gx_free(&e->alloc, r);
}

/* A fresh context: copies of the planned descriptors and this run's scratch. */
static gx_run* new_run(kiln_exec_t* e) {
  const kiln_graph_t* g = e->wg;
  gx_run* r = gx_calloc(&e->alloc, 1, sizeof(*r));
  if (!r) return NULL;
  r->e = e;
  atomic_init(&r->err, 0);
  const size_t nv = (size_t)g->n_values + 1, no = (size_t)g->n_outputs + 1;
  r->vt = gx_alloc(&e->alloc, nv * sizeof(kiln_tensor_t));
  r->out_t = gx_alloc(&e->alloc, no * sizeof(kiln_tensor_t));
  const int64_t scratch = e->scratch_per_thread * e->n_threads;
  if (scratch > 0) r->scratch = kiln_allocator_alloc(&e->alloc, (size_t)scratch, GX_ALIGN);
  if (!r->vt || !r->out_t || (scratch > 0 && !r->scratch)) {
    free_run(e, r);
    return NULL;
  }
  memcpy(r->vt, e->vt, nv * sizeof(kiln_tensor_t));
  memcpy(r->out_t, e->out_t, no * sizeof(kiln_tensor_t));
  return r;
}

gx_run* gx_run_acquire(kiln_exec_t* e) {
  gx_exec_lock(e);
  gx_run* r = e->free_runs;
  if (r) e->free_runs = r->next;
  gx_exec_unlock(e);
  if (r) return r;
  /* every context is in use by another run: make one (outside the lock; the allocator is
   * called from this thread) */
  r = new_run(e);
  if (!r)
    kiln_error(KILN_ERROR_OUT_OF_MEMORY, "kiln_exec_run: out of memory for a run context (%lld bytes of scratch)",
               (long long)(e->scratch_per_thread * e->n_threads));
  return r;
}

void gx_run_release(kiln_exec_t* e, gx_run* r) {
  gx_exec_lock(e);
  r->next = e->free_runs;
  e->free_runs = r;
  gx_exec_unlock(e);
}

void gx_run_free_all(kiln_exec_t* e) {
  gx_run* r = e->free_runs;
  e->free_runs = NULL;
  while (r) {
    gx_run* next = r->next;
    free_run(e, r);
    r = next;
  }
}
