/* SPDX-License-Identifier: Apache-2.0 */
/* cpu_device.c - the embedded CPU device: the HAL vtable over the caching allocator, the shared
 * thread pool and the asynchronous streams of cpu_stream.c.
 *
 * Events are (stream, sequence number) pairs: recording reads the stream's position, and the
 * event is complete once that stream's completed count reaches it. Streams and events created
 * on the device are kept in lists so synchronize and destroy can reach them all.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "devices/cpu/cpu_allocator.h"
#include "devices/cpu/cpu_stream.h"
#include "kiln/device.h"
#include "kiln/graph.h"
#include "kiln/parallel.h"

typedef struct cpu_event {
  pthread_mutex_t mu;
  kiln_cpu_stream_t* stream; /* NULL until recorded; one reference held */
  uint64_t seq;
  struct cpu_event* prev;
  struct cpu_event* next;
} cpu_event_t;

typedef struct cpu_device {
  kiln_device_t base;
  kiln_cpu_allocator_t memory;
  pthread_mutex_t mu;               /* guards the lists below */
  kiln_cpu_stream_t** streams;      /* streams[0] is the default stream */
  size_t num_streams, cap_streams;
  cpu_event_t* events;
} cpu_device_t;

static cpu_device_t* as_cpu(kiln_device_t* dev) { return (cpu_device_t*)dev; }

static kiln_cpu_stream_t* resolve(cpu_device_t* d, kiln_stream_t* stream) {
  return stream ? (kiln_cpu_stream_t*)stream : d->streams[0];
}

/* ---- props and memory ------------------------------------------------------------------- */

static void describe_cpu(char* out, size_t size, int threads) {
  char isa[64] = "";
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) strcat(isa, "+AVX512F");
  if (__builtin_cpu_supports("avx2")) strcat(isa, "+AVX2");
  if (__builtin_cpu_supports("fma")) strcat(isa, "+FMA");
  if (isa[0] == '\0') strcat(isa, "+SSE2");
#elif defined(__aarch64__)
  strcat(isa, "+NEON");
#else
  strcat(isa, "+generic");
#endif
  snprintf(out, size, "host CPU, %d thread%s, %s", threads, threads == 1 ? "" : "s", isa + 1);
}

static kiln_status_t cpu_query_props(kiln_device_t* dev, kiln_device_props_t* props) {
  cpu_device_t* d = as_cpu(dev);
  kiln_device_props_t p;
  memset(&p, 0, sizeof(p));
  int threads = kiln_threadpool_size(kiln_threadpool_default());
  snprintf(p.name, sizeof(p.name), "cpu");
  describe_cpu(p.description, sizeof(p.description), threads);
  p.memory_limit = d->memory.memory_limit;
  p.compute_units = (uint32_t)threads;
  p.alignment = KILN_CPU_ALIGNMENT;
  p.capabilities = KILN_CAP_HOST_VISIBLE | KILN_CAP_ASYNC_STREAMS | KILN_CAP_CACHING_ALLOCATOR |
                   KILN_CAP_MULTITHREADED;
  size_t n = props->struct_size == 0 || props->struct_size > sizeof(p) ? sizeof(p) : props->struct_size;
  size_t keep = props->struct_size == 0 ? sizeof(p) : props->struct_size;
  if (n > sizeof(size_t)) memcpy((char*)props + sizeof(size_t), (char*)&p + sizeof(size_t), n - sizeof(size_t));
  props->struct_size = keep;
  return KILN_OK;
}

static kiln_status_t cpu_alloc(kiln_device_t* dev, size_t size, void** out_ptr) {
  return kiln_cpu_allocator_alloc(&as_cpu(dev)->memory, size, out_ptr);
}

static void cpu_free(kiln_device_t* dev, void* ptr) { kiln_cpu_allocator_free(&as_cpu(dev)->memory, ptr); }

static kiln_status_t cpu_memory_stats(kiln_device_t* dev, kiln_memory_stats_t* stats) {
  kiln_cpu_allocator_stats(&as_cpu(dev)->memory, stats);
  return KILN_OK;
}

static kiln_status_t cpu_memory_reset_peak(kiln_device_t* dev) {
  kiln_cpu_allocator_reset_peak(&as_cpu(dev)->memory);
  return KILN_OK;
}

static kiln_status_t cpu_memory_empty_cache(kiln_device_t* dev) {
  kiln_cpu_allocator_empty_cache(&as_cpu(dev)->memory);
  return KILN_OK;
}

/* ---- work ------------------------------------------------------------------------------- */

static kiln_status_t cpu_copy(kiln_device_t* dev, kiln_stream_t* stream, kiln_copy_kind_t kind,
                              void* dst, const void* src, size_t size) {
  if (kind != KILN_COPY_HOST_TO_DEVICE && kind != KILN_COPY_DEVICE_TO_HOST &&
      kind != KILN_COPY_DEVICE_TO_DEVICE)
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "kiln cpu: unknown copy kind %d", (int)kind);
  if (size == 0) return KILN_OK;
  if (dst == NULL || src == NULL)
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "kiln cpu: copy with a NULL pointer");
  return kiln_cpu_stream_copy(resolve(as_cpu(dev), stream), dst, src, size);
}

static kiln_status_t cpu_fill(kiln_device_t* dev, kiln_stream_t* stream, void* dst, size_t size,
                              const void* pattern, size_t pattern_size) {
  if (pattern_size != 1 && pattern_size != 2 && pattern_size != 4 && pattern_size != 8)
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "kiln cpu: fill pattern size %zu is not 1, 2, 4 or 8",
                      pattern_size);
  if (size % pattern_size != 0)
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT,
                      "kiln cpu: fill size %zu is not a multiple of the pattern size %zu", size,
                      pattern_size);
  if (size == 0) return KILN_OK;
  if (dst == NULL || pattern == NULL)
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "kiln cpu: fill with a NULL pointer");
  return kiln_cpu_stream_fill(resolve(as_cpu(dev), stream), dst, size, pattern, pattern_size);
}

static kiln_status_t cpu_launch_host_fn(kiln_device_t* dev, kiln_stream_t* stream, kiln_host_fn_t fn,
                                        void* user) {
  if (fn == NULL) return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "kiln cpu: NULL host function");
  return kiln_cpu_stream_host_fn(resolve(as_cpu(dev), stream), fn, user);
}

/* ---- compute ---------------------------------------------------------------------------- */
/* The CPU device runs kiln's own executor: an executable is the program itself, and a run is a
 * stream task that calls kiln_exec_run_workspace on the stream's worker thread (the kernels
 * then use the shared thread pool). Device memory is host memory, so the buffers go through
 * as they are. */

struct kiln_executable {
  const kiln_exec_t* program;
};

typedef struct cpu_run {
  kiln_allocator_t allocator;
  const kiln_exec_t* program;
  int n_in, n_out;
  void* workspace;
  int64_t workspace_bytes;
  void* ptrs[]; /* inputs then outputs */
} cpu_run_t;

static kiln_status_t cpu_supports(kiln_device_t* dev, const kiln_exec_t* program, char* reason,
                                  size_t reason_cap) {
  (void)dev;
  if (reason && reason_cap) reason[0] = 0;
  if (program == NULL) return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "kiln cpu: NULL program");
  return KILN_OK; /* every op of the graph compiler has a CPU kernel */
}

static kiln_status_t cpu_prepare(kiln_device_t* dev, const kiln_exec_t* program,
                                 kiln_executable_t** out_exe) {
  if (out_exe == NULL || program == NULL)
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "kiln cpu: prepare: NULL argument");
  kiln_executable_t* x = kiln_allocator_alloc(&dev->host_allocator, sizeof(*x), _Alignof(kiln_executable_t));
  if (x == NULL) return kiln_error(KILN_ERROR_OUT_OF_MEMORY, "kiln cpu: out of memory preparing a program");
  x->program = program;
  *out_exe = x;
  return KILN_OK;
}

static void cpu_executable_destroy(kiln_device_t* dev, kiln_executable_t* exe) {
  kiln_allocator_free(&dev->host_allocator, exe);
}

static kiln_status_t cpu_run_task(void* user) {
  cpu_run_t* r = user;
  kiln_status_t st = kiln_exec_run_workspace((kiln_exec_t*)r->program, r->n_in, r->ptrs, r->n_out,
                                             r->ptrs + r->n_in, r->workspace, r->workspace_bytes);
  if (st != KILN_OK) {
    char msg[480];
    snprintf(msg, sizeof msg, "%s", kiln_status_message());
    st = kiln_error((kiln_status_code_t)st, "kiln cpu: execute: %s", msg);
  }
  kiln_allocator_t a = r->allocator;
  kiln_allocator_free(&a, r);
  return st;
}

static kiln_status_t cpu_execute(kiln_device_t* dev, kiln_stream_t* stream, kiln_executable_t* exe,
                                 const kiln_execute_args_t* args) {
  if (exe == NULL || args == NULL ||
      args->struct_size < offsetof(kiln_execute_args_t, workspace_bytes) + sizeof(args->workspace_bytes))
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "kiln cpu: execute: NULL or short arguments");
  const kiln_exec_t* p = exe->program;
  const int n_in = kiln_exec_num_inputs(p), n_out = kiln_exec_num_outputs(p);
  if (args->n_inputs != n_in || args->n_outputs != n_out)
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT,
                      "kiln cpu: execute: %d inputs and %d outputs given, the program has %d and %d",
                      args->n_inputs, args->n_outputs, n_in, n_out);
  if ((n_in && args->inputs == NULL) || (n_out && args->outputs == NULL))
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "kiln cpu: execute: NULL buffer list");
  const int64_t need = kiln_exec_workspace_size(p);
  if (need > 0 && (args->workspace == NULL || args->workspace_bytes < (uint64_t)need))
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT,
                      "kiln cpu: execute: the program needs a workspace of %lld bytes, %llu given",
                      (long long)need, (unsigned long long)args->workspace_bytes);
  cpu_run_t* r = kiln_allocator_alloc(&dev->host_allocator,
                                      sizeof(*r) + sizeof(void*) * (size_t)(n_in + n_out + 1),
                                      _Alignof(cpu_run_t));
  if (r == NULL) return kiln_error(KILN_ERROR_OUT_OF_MEMORY, "kiln cpu: out of memory queueing a run");
  r->allocator = dev->host_allocator;
  r->program = p;
  r->n_in = n_in;
  r->n_out = n_out;
  r->workspace = need > 0 ? args->workspace : NULL;
  r->workspace_bytes = need > 0 ? (int64_t)args->workspace_bytes : 0;
  for (int i = 0; i < n_in; i++) r->ptrs[i] = (void*)args->inputs[i];
  for (int k = 0; k < n_out; k++) r->ptrs[n_in + k] = args->outputs[k];
  const int wait = args->struct_size >= offsetof(kiln_execute_args_t, flags) + sizeof(args->flags) &&
                   (args->flags & KILN_EXECUTE_WAIT);
  kiln_status_t st = kiln_cpu_stream_call(resolve(as_cpu(dev), stream), cpu_run_task, r, wait);
  if (st != KILN_OK) kiln_allocator_free(&dev->host_allocator, r);
  return st;
}

/* ---- streams ---------------------------------------------------------------------------- */

static kiln_status_t add_stream(cpu_device_t* d, kiln_cpu_stream_t* s) {
  pthread_mutex_lock(&d->mu);
  if (d->num_streams == d->cap_streams) {
    size_t cap = d->cap_streams ? d->cap_streams * 2 : 8;
    kiln_cpu_stream_t** a = kiln_allocator_alloc(&d->base.host_allocator, cap * sizeof(*a), _Alignof(void*));
    if (a == NULL) {
      pthread_mutex_unlock(&d->mu);
      return kiln_error(KILN_ERROR_OUT_OF_MEMORY, "kiln cpu: out of memory creating a stream");
    }
    if (d->num_streams) memcpy(a, d->streams, d->num_streams * sizeof(*a));
    kiln_allocator_free(&d->base.host_allocator, d->streams);
    d->streams = a;
    d->cap_streams = cap;
  }
  d->streams[d->num_streams++] = s;
  pthread_mutex_unlock(&d->mu);
  return KILN_OK;
}

static kiln_status_t cpu_stream_create(kiln_device_t* dev, kiln_stream_t** out_stream) {
  cpu_device_t* d = as_cpu(dev);
  kiln_cpu_stream_t* s;
  KILN_RETURN_IF_ERROR(kiln_cpu_stream_create(&dev->host_allocator, &s));
  kiln_status_t st = add_stream(d, s);
  if (st != KILN_OK) {
    kiln_cpu_stream_release(s);
    return st;
  }
  *out_stream = (kiln_stream_t*)s;
  return KILN_OK;
}

static void cpu_stream_destroy(kiln_device_t* dev, kiln_stream_t* stream) {
  cpu_device_t* d = as_cpu(dev);
  kiln_cpu_stream_t* s = (kiln_cpu_stream_t*)stream;
  if (s == NULL || s == d->streams[0]) return; /* the default stream lives as long as the device */
  pthread_mutex_lock(&d->mu);
  for (size_t i = 1; i < d->num_streams; i++) {
    if (d->streams[i] == s) {
      memmove(&d->streams[i], &d->streams[i + 1], (d->num_streams - i - 1) * sizeof(*d->streams));
      d->num_streams--;
      break;
    }
  }
  pthread_mutex_unlock(&d->mu);
  kiln_cpu_stream_shutdown(s);
  kiln_cpu_stream_release(s);
}

static kiln_status_t cpu_stream_synchronize(kiln_device_t* dev, kiln_stream_t* stream) {
  return kiln_cpu_stream_synchronize(resolve(as_cpu(dev), stream));
}

static kiln_status_t cpu_stream_query(kiln_device_t* dev, kiln_stream_t* stream, int* out_idle) {
  kiln_cpu_stream_t* s = resolve(as_cpu(dev), stream);
  *out_idle = kiln_cpu_stream_reached(s, kiln_cpu_stream_position(s));
  return KILN_OK;
}

/* Synchronizes every stream; the list lock is held, so host functions must not create or
 * destroy streams or events of this device while a device synchronize runs. */
static kiln_status_t cpu_synchronize(kiln_device_t* dev) {
  cpu_device_t* d = as_cpu(dev);
  kiln_status_t first = KILN_OK;
  pthread_mutex_lock(&d->mu);
  for (size_t i = 0; i < d->num_streams; i++) {
    kiln_status_t st = kiln_cpu_stream_synchronize(d->streams[i]);
    if (first == KILN_OK) first = st;
  }
  pthread_mutex_unlock(&d->mu);
  return first;
}

/* ---- events ----------------------------------------------------------------------------- */

static kiln_status_t cpu_event_create(kiln_device_t* dev, kiln_event_t** out_event) {
  cpu_device_t* d = as_cpu(dev);
  cpu_event_t* e = kiln_allocator_alloc(&dev->host_allocator, sizeof(*e), _Alignof(cpu_event_t));
  if (e == NULL) return kiln_error(KILN_ERROR_OUT_OF_MEMORY, "kiln cpu: out of memory creating an event");
  pthread_mutex_init(&e->mu, NULL);
  e->stream = NULL;
  e->seq = 0;
  pthread_mutex_lock(&d->mu);
  e->prev = NULL;
  e->next = d->events;
  if (d->events) d->events->prev = e;
  d->events = e;
  pthread_mutex_unlock(&d->mu);
  *out_event = (kiln_event_t*)e;
  return KILN_OK;
}

static void free_event(cpu_device_t* d, cpu_event_t* e) {
  if (e->stream) kiln_cpu_stream_release(e->stream);
  pthread_mutex_destroy(&e->mu);
  kiln_allocator_free(&d->base.host_allocator, e);
}

static void cpu_event_destroy(kiln_device_t* dev, kiln_event_t* event) {
  cpu_device_t* d = as_cpu(dev);
  cpu_event_t* e = (cpu_event_t*)event;
  if (e == NULL) return;
  pthread_mutex_lock(&d->mu);
  if (e->prev) e->prev->next = e->next; else d->events = e->next;
  if (e->next) e->next->prev = e->prev;
  pthread_mutex_unlock(&d->mu);
  free_event(d, e);
}

static kiln_status_t cpu_event_record(kiln_device_t* dev, kiln_event_t* event, kiln_stream_t* stream) {
  cpu_event_t* e = (cpu_event_t*)event;
  kiln_cpu_stream_t* s = resolve(as_cpu(dev), stream);
  kiln_cpu_stream_retain(s);
  pthread_mutex_lock(&e->mu);
  kiln_cpu_stream_t* old = e->stream;
  e->stream = s;
  e->seq = kiln_cpu_stream_position(s);
  pthread_mutex_unlock(&e->mu);
  if (old) kiln_cpu_stream_release(old);
  return KILN_OK;
}

/* The recorded point of `e`, with a reference to its stream (NULL if never recorded). */
static kiln_cpu_stream_t* event_point(cpu_event_t* e, uint64_t* out_seq) {
  pthread_mutex_lock(&e->mu);
  kiln_cpu_stream_t* s = e->stream;
  *out_seq = e->seq;
  if (s) kiln_cpu_stream_retain(s);
  pthread_mutex_unlock(&e->mu);
  return s;
}

static kiln_status_t cpu_stream_wait_event(kiln_device_t* dev, kiln_stream_t* stream, kiln_event_t* event) {
  uint64_t seq;
  kiln_cpu_stream_t* src = event_point((cpu_event_t*)event, &seq);
  if (src == NULL) return KILN_OK;
  return kiln_cpu_stream_wait(resolve(as_cpu(dev), stream), src, seq);
}

static kiln_status_t cpu_event_synchronize(kiln_device_t* dev, kiln_event_t* event) {
  (void)dev;
  uint64_t seq;
  kiln_cpu_stream_t* src = event_point((cpu_event_t*)event, &seq);
  if (src == NULL) return KILN_OK;
  kiln_cpu_stream_wait_host(src, seq);
  kiln_cpu_stream_release(src);
  return KILN_OK;
}

static kiln_status_t cpu_event_query(kiln_device_t* dev, kiln_event_t* event, int* out_done) {
  (void)dev;
  cpu_event_t* e = (cpu_event_t*)event;
  pthread_mutex_lock(&e->mu);
  *out_done = e->stream == NULL || kiln_cpu_stream_reached(e->stream, e->seq);
  pthread_mutex_unlock(&e->mu);
  return KILN_OK;
}

/* ---- lifetime --------------------------------------------------------------------------- */

static void cpu_destroy(kiln_device_t* dev) {
  cpu_device_t* d = as_cpu(dev);
  if (d == NULL) return;
  (void)cpu_synchronize(dev);
  while (d->events) {
    cpu_event_t* e = d->events;
    d->events = e->next;
    free_event(d, e);
  }
  for (size_t i = d->num_streams; i-- > 0;) {
    kiln_cpu_stream_shutdown(d->streams[i]);
    kiln_cpu_stream_release(d->streams[i]);
  }
  kiln_allocator_t a = dev->host_allocator;
  kiln_allocator_free(&a, d->streams);
  kiln_cpu_allocator_deinit(&d->memory);
  pthread_mutex_destroy(&d->mu);
  kiln_allocator_free(&a, d);
}

static const kiln_device_vtable_t cpu_vtable = {
    .struct_size = sizeof(kiln_device_vtable_t),
    .destroy = cpu_destroy,
    .query_props = cpu_query_props,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .copy = cpu_copy,
    .fill = cpu_fill,
    .stream_create = cpu_stream_create,
    .stream_destroy = cpu_stream_destroy,
    .stream_synchronize = cpu_stream_synchronize,
    .stream_query = cpu_stream_query,
    .event_create = cpu_event_create,
    .event_destroy = cpu_event_destroy,
    .event_record = cpu_event_record,
    .stream_wait_event = cpu_stream_wait_event,
    .event_synchronize = cpu_event_synchronize,
    .event_query = cpu_event_query,
    .synchronize = cpu_synchronize,
    .memory_stats = cpu_memory_stats,
    .memory_reset_peak = cpu_memory_reset_peak,
    .memory_empty_cache = cpu_memory_empty_cache,
    .launch_host_fn = cpu_launch_host_fn,
    .supports = cpu_supports,
    .prepare = cpu_prepare,
    .execute = cpu_execute,
    .executable_destroy = cpu_executable_destroy,
};

/* Creates the CPU device: caching allocator, lazily started streams, the shared thread pool. */
kiln_status_t kiln_cpu_device_create(const kiln_cpu_device_options_t* options,
                                     const kiln_allocator_t* host_allocator,
                                     kiln_device_t** out_device) {
  if (out_device == NULL) return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "kiln cpu: NULL out_device");
  *out_device = NULL;
  uint64_t limit = 0;
  if (options != NULL && options->struct_size >= offsetof(kiln_cpu_device_options_t, memory_limit) +
                                                     sizeof(options->memory_limit))
    limit = options->memory_limit;
  kiln_allocator_t a = host_allocator ? *host_allocator : kiln_allocator_system();
  cpu_device_t* d = kiln_allocator_alloc(&a, sizeof(*d), _Alignof(cpu_device_t));
  if (d == NULL) return kiln_error(KILN_ERROR_OUT_OF_MEMORY, "kiln cpu: out of memory creating a device");
  memset(d, 0, sizeof(*d));
  d->base.vtable = &cpu_vtable;
  d->base.host_allocator = a;
  d->base.index = -1;
  kiln_cpu_allocator_init(&d->memory, limit);
  pthread_mutex_init(&d->mu, NULL);
  kiln_cpu_stream_t* def = NULL;
  kiln_status_t st = kiln_cpu_stream_create(&a, &def);
  if (st == KILN_OK) st = add_stream(d, def);
  if (st != KILN_OK) {
    if (def) {
      kiln_cpu_stream_release(def);
      d->num_streams = 0;
    }
    kiln_allocator_free(&a, d->streams);
    kiln_cpu_allocator_deinit(&d->memory);
    pthread_mutex_destroy(&d->mu);
    kiln_allocator_free(&a, d);
    return st;
  }
  *out_device = &d->base;
  return KILN_OK;
}
