/* SPDX-License-Identifier: Apache-2.0 */
/* cpu_stream.c - in-order asynchronous task queues of the CPU device, one worker thread each. */
#include "devices/cpu/cpu_stream.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "kiln/parallel.h"

#define PARALLEL_THRESHOLD ((size_t)1 << 20) /* copies/fills above this use the thread pool */
#define PARALLEL_BLOCK ((size_t)64 << 10)    /* bytes per parallel_for index (a multiple of 8) */
#define PARALLEL_GRAIN 4                     /* blocks per chunk at least */
#define INITIAL_CAPACITY 64

typedef enum task_kind { TASK_COPY, TASK_FILL, TASK_HOST_FN, TASK_WAIT, TASK_CALL } task_kind_t;

typedef struct task {
  task_kind_t kind;
  void* dst;
  const void* src;
  size_t size;
  size_t pattern_size;
  unsigned char pattern[8];
  kiln_host_fn_t fn;
  kiln_status_t (*call)(void* user);
  void* user;
  kiln_cpu_stream_t* other; /* TASK_WAIT: the stream waited on (one reference held) */
  uint64_t seq;
} task_t;

struct kiln_cpu_stream {
  _Alignas(64) atomic_ullong submitted; /* tasks enqueued */
  _Alignas(64) atomic_ullong completed; /* tasks finished, in order */
  _Alignas(64) atomic_int refs;
  atomic_int error; /* first error of async work since the last synchronize (guarded by mu) */
  char error_msg[512];
  pthread_mutex_t mu;
  pthread_cond_t work_cv; /* the worker waits for tasks */
  pthread_cond_t done_cv; /* broadcast whenever `completed` grows */
  task_t* ring;
  size_t cap, head, count; /* cap is 0 or a power of two */
  int started, stop;
  int inline_busy; /* a task runs on a submitting thread (kiln_cpu_stream_call): the worker waits */
  pthread_t thread;
  kiln_allocator_t allocator;
};

/* Creates an idle stream holding one reference for the caller. */
kiln_status_t kiln_cpu_stream_create(const kiln_allocator_t* host_allocator, kiln_cpu_stream_t** out) {
  kiln_cpu_stream_t* s = kiln_allocator_alloc(host_allocator, sizeof(*s), _Alignof(kiln_cpu_stream_t));
  if (s == NULL) return kiln_error(KILN_ERROR_OUT_OF_MEMORY, "kiln cpu: out of memory creating a stream");
  memset(s, 0, sizeof(*s));
  atomic_init(&s->submitted, 0);
  atomic_init(&s->completed, 0);
  atomic_init(&s->refs, 1);
  atomic_init(&s->error, KILN_OK);
  pthread_mutex_init(&s->mu, NULL);
  pthread_cond_init(&s->work_cv, NULL);
  pthread_cond_init(&s->done_cv, NULL);
  s->allocator = host_allocator ? *host_allocator : kiln_allocator_system();
  *out = s;
  return KILN_OK;
}

/* Adds a reference. */
void kiln_cpu_stream_retain(kiln_cpu_stream_t* s) { atomic_fetch_add(&s->refs, 1); }

/* Drops a reference, freeing the stream with the last one. */
void kiln_cpu_stream_release(kiln_cpu_stream_t* s) {
  if (atomic_fetch_sub(&s->refs, 1) != 1) return;
  pthread_cond_destroy(&s->done_cv);
  pthread_cond_destroy(&s->work_cv);
  pthread_mutex_destroy(&s->mu);
  kiln_allocator_t a = s->allocator;
  kiln_allocator_free(&a, s->ring);
  kiln_allocator_free(&a, s);
}

/* ---- running tasks ---------------------------------------------------------------------- */

static void fill_bytes(unsigned char* d, size_t n, const unsigned char* pattern, size_t pattern_size) {
  if (pattern_size == 1) {
    memset(d, pattern[0], n);
    return;
  }
  unsigned char line[64];
  for (size_t i = 0; i < sizeof(line); i += pattern_size) memcpy(line + i, pattern, pattern_size);
  for (; n >= sizeof(line); n -= sizeof(line), d += sizeof(line)) memcpy(d, line, sizeof(line));
  memcpy(d, line, n);
}

static void run_block_range(void* ctx, int64_t begin, int64_t end, int thread_id) {
  (void)thread_id;
  const task_t* t = ctx;
  size_t lo = (size_t)begin * PARALLEL_BLOCK, hi = (size_t)end * PARALLEL_BLOCK;
  if (hi > t->size) hi = t->size;
  if (t->kind == TASK_COPY)
    memcpy((char*)t->dst + lo, (const char*)t->src + lo, hi - lo);
  else
    fill_bytes((unsigned char*)t->dst + lo, hi - lo, t->pattern, t->pattern_size);
}

static int overlaps(const void* a, const void* b, size_t size) {
  uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
  return x < y + size && y < x + size;
}

static kiln_status_t run_task(task_t* t) {
  switch (t->kind) {
    case TASK_COPY:
      if (overlaps(t->dst, t->src, t->size)) {
        memmove(t->dst, t->src, t->size);
        return KILN_OK;
      }
      /* fall through */
    case TASK_FILL:
      if (t->size > PARALLEL_THRESHOLD) {
        int64_t blocks = (int64_t)((t->size + PARALLEL_BLOCK - 1) / PARALLEL_BLOCK);
        kiln_threadpool_parallel_for(kiln_threadpool_default(), blocks, PARALLEL_GRAIN, run_block_range, t);
      } else {
        run_block_range(t, 0, 1 + (int64_t)(t->size / PARALLEL_BLOCK), 0);
      }
      return KILN_OK;
    case TASK_HOST_FN:
      t->fn(t->user);
      return KILN_OK;
    case TASK_CALL:
      return t->call(t->user);
    case TASK_WAIT:
      kiln_cpu_stream_wait_host(t->other, t->seq);
      kiln_cpu_stream_release(t->other);
      return KILN_OK;
  }
  return kiln_error(KILN_ERROR_INTERNAL, "kiln cpu: unknown stream task kind %d", (int)t->kind);
}

static void* stream_main(void* arg) {
  kiln_cpu_stream_t* s = arg;
  pthread_mutex_lock(&s->mu);
  for (;;) {
    while ((s->count == 0 || s->inline_busy) && !s->stop) pthread_cond_wait(&s->work_cv, &s->mu);
    while (s->inline_busy) pthread_cond_wait(&s->work_cv, &s->mu); /* stopping: let it finish */
    if (s->count == 0) break;
    task_t t = s->ring[s->head];
    s->head = (s->head + 1) & (s->cap - 1);
    s->count--;
    pthread_mutex_unlock(&s->mu);
    kiln_status_t st = run_task(&t);
    pthread_mutex_lock(&s->mu);
    if (st != KILN_OK && atomic_load(&s->error) == KILN_OK) {
      snprintf(s->error_msg, sizeof(s->error_msg), "%s", kiln_status_message());
      atomic_store(&s->error, st);
    }
    atomic_fetch_add_explicit(&s->completed, 1, memory_order_release);
    pthread_cond_broadcast(&s->done_cv);
  }
  pthread_mutex_unlock(&s->mu);
  return NULL;
}

/* ---- submitting ------------------------------------------------------------------------- */

static int grow_locked(kiln_cpu_stream_t* s) {
  size_t cap = s->cap ? s->cap * 2 : INITIAL_CAPACITY;
  task_t* ring = kiln_allocator_alloc(&s->allocator, cap * sizeof(task_t), _Alignof(task_t));
  if (ring == NULL) return 0;
  for (size_t i = 0; i < s->count; i++) ring[i] = s->ring[(s->head + i) & (s->cap - 1)];
  kiln_allocator_free(&s->allocator, s->ring);
  s->ring = ring;
  s->cap = cap;
  s->head = 0;
  return 1;
}

static kiln_status_t submit(kiln_cpu_stream_t* s, const task_t* t) {
  pthread_mutex_lock(&s->mu);
  if (!s->started) {
    int rc = pthread_create(&s->thread, NULL, stream_main, s);
    if (rc != 0) {
      pthread_mutex_unlock(&s->mu);
      return kiln_error(KILN_ERROR_INTERNAL, "kiln cpu: cannot start a stream thread (error %d)", rc);
    }
    s->started = 1;
  }
  if (s->count == s->cap && !grow_locked(s)) {
    pthread_mutex_unlock(&s->mu);
    return kiln_error(KILN_ERROR_OUT_OF_MEMORY, "kiln cpu: out of memory growing a stream queue");
  }
  s->ring[(s->head + s->count) & (s->cap - 1)] = *t;
  s->count++;
  atomic_fetch_add(&s->submitted, 1);
  pthread_cond_signal(&s->work_cv);
  pthread_mutex_unlock(&s->mu);
  return KILN_OK;
}

/* Enqueues a copy. */
kiln_status_t kiln_cpu_stream_copy(kiln_cpu_stream_t* s, void* dst, const void* src, size_t size) {
  task_t t = {.kind = TASK_COPY, .dst = dst, .src = src, .size = size};
  return submit(s, &t);
}

/* Enqueues a fill with a 1, 2, 4 or 8 byte pattern (copied now). */
kiln_status_t kiln_cpu_stream_fill(kiln_cpu_stream_t* s, void* dst, size_t size, const void* pattern,
                                   size_t pattern_size) {
  task_t t = {.kind = TASK_FILL, .dst = dst, .size = size, .pattern_size = pattern_size};
  memcpy(t.pattern, pattern, pattern_size);
  return submit(s, &t);
}

/* Enqueues a host callback. */
kiln_status_t kiln_cpu_stream_host_fn(kiln_cpu_stream_t* s, kiln_host_fn_t fn, void* user) {
  task_t t = {.kind = TASK_HOST_FN, .fn = fn, .user = user};
  return submit(s, &t);
}

/* Enqueues a call whose failure becomes the stream's error (or runs it now when asked and idle). */
kiln_status_t kiln_cpu_stream_call(kiln_cpu_stream_t* s, kiln_status_t (*fn)(void* user), void* user,
                                   int inline_if_idle) {
  if (inline_if_idle) {
    pthread_mutex_lock(&s->mu);
    if (s->count == 0 && !s->inline_busy && atomic_load(&s->completed) == atomic_load(&s->submitted)) {
      s->inline_busy = 1;
      atomic_fetch_add(&s->submitted, 1); /* the task's place in the stream */
      pthread_mutex_unlock(&s->mu);
      kiln_status_t st = fn(user);
      pthread_mutex_lock(&s->mu);
      if (st != KILN_OK && atomic_load(&s->error) == KILN_OK) {
        snprintf(s->error_msg, sizeof(s->error_msg), "%s", kiln_status_message());
        atomic_store(&s->error, st);
      }
      s->inline_busy = 0;
      atomic_fetch_add_explicit(&s->completed, 1, memory_order_release);
      pthread_cond_broadcast(&s->done_cv);
      pthread_cond_signal(&s->work_cv); /* work queued meanwhile may run now */
      pthread_mutex_unlock(&s->mu);
      return KILN_OK;
    }
    pthread_mutex_unlock(&s->mu);
  }
  task_t t = {.kind = TASK_CALL, .call = fn, .user = user};
  return submit(s, &t);
}

/* Enqueues a wait for `other` to reach `seq`; consumes one reference to `other`. */
kiln_status_t kiln_cpu_stream_wait(kiln_cpu_stream_t* s, kiln_cpu_stream_t* other, uint64_t seq) {
  if (other == s || kiln_cpu_stream_reached(other, seq)) {
    kiln_cpu_stream_release(other);
    return KILN_OK;
  }
  task_t t = {.kind = TASK_WAIT, .other = other, .seq = seq};
  kiln_status_t st = submit(s, &t);
  if (st != KILN_OK) kiln_cpu_stream_release(other);
  return st;
}

/* ---- waiting ---------------------------------------------------------------------------- */

/* The sequence number after all work submitted so far. */
uint64_t kiln_cpu_stream_position(kiln_cpu_stream_t* s) { return atomic_load(&s->submitted); }

/* 1 once all work up to `seq` has finished. */
int kiln_cpu_stream_reached(kiln_cpu_stream_t* s, uint64_t seq) {
  return atomic_load_explicit(&s->completed, memory_order_acquire) >= seq;
}

/* Blocks until all work up to `seq` has finished. */
void kiln_cpu_stream_wait_host(kiln_cpu_stream_t* s, uint64_t seq) {
  if (kiln_cpu_stream_reached(s, seq)) return;
  pthread_mutex_lock(&s->mu);
  while (atomic_load(&s->completed) < seq) pthread_cond_wait(&s->done_cv, &s->mu);
  pthread_mutex_unlock(&s->mu);
}

/* Waits for the submitted work; returns and clears the first error it raised. */
kiln_status_t kiln_cpu_stream_synchronize(kiln_cpu_stream_t* s) {
  kiln_cpu_stream_wait_host(s, kiln_cpu_stream_position(s));
  if (atomic_load(&s->error) == KILN_OK) return KILN_OK;
  char msg[sizeof(s->error_msg)];
  pthread_mutex_lock(&s->mu);
  kiln_status_t st = atomic_exchange(&s->error, KILN_OK);
  memcpy(msg, s->error_msg, sizeof(msg));
  pthread_mutex_unlock(&s->mu);
  return st == KILN_OK ? KILN_OK : kiln_error((kiln_status_code_t)st, "%s", msg);
}

/* Drains the queue, then stops and joins the worker. */
void kiln_cpu_stream_shutdown(kiln_cpu_stream_t* s) {
  pthread_mutex_lock(&s->mu);
  s->stop = 1;
  int started = s->started;
  pthread_cond_signal(&s->work_cv);
  pthread_mutex_unlock(&s->mu);
  if (started) pthread_join(s->thread, NULL);
}
