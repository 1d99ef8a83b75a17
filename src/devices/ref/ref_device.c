/* SPDX-License-Identifier: Apache-2.0 */
/* ref_device.c - the reference device: scalar, single-threaded, synchronous, no caching.
 *
 * Every operation runs to completion inside the call that submits it, so streams are only
 * tokens and an event is complete as soon as it exists. Memory comes from the host allocator
 * with a 64-byte header in front of each block recording its size, which keeps the statistics
 * exact and lets the device enforce its memory limit.
 */
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "kiln/device.h"
#include "kiln/hal.h"

#define KILN_REF_ALIGNMENT 64u
#define KILN_REF_HEADER 64u /* one alignment unit, so the user block stays 64-aligned */
#define KILN_REF_MAGIC 0x6b696c6e72656621ull /* "kilnref!" */

typedef struct kiln_ref_block_header {
  uint64_t magic;
  uint64_t size; /* rounded size counted in the statistics */
} kiln_ref_block_header_t;

typedef struct kiln_ref_device {
  kiln_device_t base; /* must stay first */
  uint64_t memory_limit;
  pthread_mutex_t mutex; /* guards stats (the device may be called from several threads) */
  kiln_memory_stats_t stats;
} kiln_ref_device_t;

struct kiln_stream {
  kiln_ref_device_t* owner;
};

struct kiln_event {
  kiln_ref_device_t* owner;
  int recorded;
};

static kiln_ref_device_t* kiln_ref_cast(kiln_device_t* dev) { return (kiln_ref_device_t*)dev; }

static size_t kiln_ref_round(size_t size) {
  return (size + (KILN_REF_ALIGNMENT - 1)) & ~(size_t)(KILN_REF_ALIGNMENT - 1);
}

static void kiln_ref_destroy(kiln_device_t* dev) {
  if (!dev) return;
  kiln_ref_device_t* ref = kiln_ref_cast(dev);
  kiln_allocator_t host = ref->base.host_allocator;
  pthread_mutex_destroy(&ref->mutex);
  kiln_allocator_free(&host, ref);
}

static kiln_status_t kiln_ref_query_props(kiln_device_t* dev, kiln_device_props_t* props) {
  if (!props || props->struct_size < sizeof(props->struct_size)) {
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "kiln ref: query_props: bad props struct");
  }
  kiln_device_props_t full;
  memset(&full, 0, sizeof(full));
  full.struct_size = props->struct_size;
  strncpy(full.name, "ref", sizeof(full.name) - 1);
  strncpy(full.description, "reference device (scalar, single thread)",
          sizeof(full.description) - 1);
  full.memory_limit = kiln_ref_cast(dev)->memory_limit;
  full.compute_units = 1;
  full.alignment = KILN_REF_ALIGNMENT;
  full.capabilities = KILN_CAP_HOST_VISIBLE;
  size_t n = props->struct_size < sizeof(full) ? props->struct_size : sizeof(full);
  memcpy(props, &full, n);
  return KILN_OK;
}

static kiln_status_t kiln_ref_alloc(kiln_device_t* dev, size_t size, void** out_ptr) {
  kiln_ref_device_t* ref = kiln_ref_cast(dev);
  if (!out_ptr) return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "kiln ref: alloc: NULL out_ptr");
  *out_ptr = NULL;
  if (size == 0) return KILN_OK;
  if (size > SIZE_MAX - 2 * KILN_REF_ALIGNMENT - KILN_REF_HEADER) {
    pthread_mutex_lock(&ref->mutex);
    ref->stats.num_ooms++;
    pthread_mutex_unlock(&ref->mutex);
    return kiln_error(KILN_ERROR_OUT_OF_MEMORY, "kiln ref: out of memory: tried to allocate %zu bytes",
                      size);
  }
  size_t rounded = kiln_ref_round(size);

  pthread_mutex_lock(&ref->mutex);
  uint64_t in_use = ref->stats.allocated;
  int over = ref->memory_limit != 0 && (rounded > ref->memory_limit ||
                                        in_use > ref->memory_limit - rounded);
  if (!over) ref->stats.allocated += rounded; /* reserve before the (unlocked) system call */
  if (over) ref->stats.num_ooms++;
  pthread_mutex_unlock(&ref->mutex);
  if (over) {
    return kiln_error(KILN_ERROR_OUT_OF_MEMORY,
                      "kiln ref: out of memory: tried to allocate %zu bytes (%llu in use, limit "
                      "%llu)",
                      size, (unsigned long long)in_use, (unsigned long long)ref->memory_limit);
  }

  unsigned char* raw =
      kiln_allocator_alloc(&ref->base.host_allocator, KILN_REF_HEADER + rounded, KILN_REF_ALIGNMENT);
  pthread_mutex_lock(&ref->mutex);
  if (!raw) {
    ref->stats.allocated -= rounded;
    ref->stats.num_ooms++;
    pthread_mutex_unlock(&ref->mutex);
    return kiln_error(KILN_ERROR_OUT_OF_MEMORY,
                      "kiln ref: out of memory: tried to allocate %zu bytes (host allocator refused)",
                      size);
  }
  ref->stats.reserved = ref->stats.allocated;
  if (ref->stats.allocated > ref->stats.peak_allocated) ref->stats.peak_allocated = ref->stats.allocated;
  if (ref->stats.reserved > ref->stats.peak_reserved) ref->stats.peak_reserved = ref->stats.reserved;
  ref->stats.num_allocs++;
  /* Every ref block comes from the system and goes back to it on free: reserved == allocated. */
  ref->stats.total_allocated += rounded;
  ref->stats.total_reserved += rounded;
  ref->stats.num_system_allocs++;
  pthread_mutex_unlock(&ref->mutex);

  kiln_ref_block_header_t hdr = {KILN_REF_MAGIC, rounded};
  memcpy(raw, &hdr, sizeof(hdr));
  *out_ptr = raw + KILN_REF_HEADER;
  return KILN_OK;
}

static void kiln_ref_free(kiln_device_t* dev, void* ptr) {
  if (!ptr) return;
  kiln_ref_device_t* ref = kiln_ref_cast(dev);
  unsigned char* raw = (unsigned char*)ptr - KILN_REF_HEADER;
  kiln_ref_block_header_t hdr;
  memcpy(&hdr, raw, sizeof(hdr));
  KILN_ASSERT(hdr.magic == KILN_REF_MAGIC); /* not a ref pointer, or freed twice */
  hdr.magic = 0;
  memcpy(raw, &hdr, sizeof(hdr));
  pthread_mutex_lock(&ref->mutex);
  ref->stats.allocated -= hdr.size;
  ref->stats.reserved = ref->stats.allocated;
  ref->stats.num_frees++;
  ref->stats.total_freed += hdr.size;
  ref->stats.total_released += hdr.size;
  ref->stats.num_system_frees++;
  pthread_mutex_unlock(&ref->mutex);
  kiln_allocator_free(&ref->base.host_allocator, raw);
}

static kiln_status_t kiln_ref_copy(kiln_device_t* dev, kiln_stream_t* stream, kiln_copy_kind_t kind,
                                   void* dst, const void* src, size_t size) {
  (void)dev;
  (void)stream;
  if (kind != KILN_COPY_HOST_TO_DEVICE && kind != KILN_COPY_DEVICE_TO_HOST &&
      kind != KILN_COPY_DEVICE_TO_DEVICE) {
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "kiln ref: copy: unknown kind %d", (int)kind);
  }
  if (size == 0) return KILN_OK;
  if (!dst || !src) return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "kiln ref: copy: NULL pointer");
  memmove(dst, src, size); /* device memory is host memory; memmove tolerates d2d overlap */
  return KILN_OK;
}

static kiln_status_t kiln_ref_fill(kiln_device_t* dev, kiln_stream_t* stream, void* dst, size_t size,
                                   const void* pattern, size_t pattern_size) {
  (void)dev;
  (void)stream;
  if (pattern_size != 1 && pattern_size != 2 && pattern_size != 4 && pattern_size != 8) {
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT,
                      "kiln ref: fill: pattern_size %zu not in {1, 2, 4, 8}", pattern_size);
  }
  if (size % pattern_size != 0) {
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT,
                      "kiln ref: fill: size %zu is not a multiple of pattern_size %zu", size,
                      pattern_size);
  }
  if (size == 0) return KILN_OK;
  if (!dst || !pattern) return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "kiln ref: fill: NULL pointer");
  unsigned char* d = dst;
  const unsigned char* p = pattern;
  for (size_t i = 0; i < size; i++) d[i] = p[i % pattern_size];
  return KILN_OK;
}

static kiln_status_t kiln_ref_stream_create(kiln_device_t* dev, kiln_stream_t** out_stream) {
  if (!out_stream) return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "kiln ref: stream_create: NULL out");
  *out_stream = NULL;
  kiln_stream_t* s = kiln_allocator_alloc(&dev->host_allocator, sizeof(*s), sizeof(void*));
  if (!s) return kiln_error(KILN_ERROR_OUT_OF_MEMORY, "kiln ref: out of memory: stream object");
  s->owner = kiln_ref_cast(dev);
  *out_stream = s;
  return KILN_OK;
}

static void kiln_ref_stream_destroy(kiln_device_t* dev, kiln_stream_t* stream) {
  kiln_allocator_free(&dev->host_allocator, stream); /* nothing can be pending */
}

static kiln_status_t kiln_ref_stream_synchronize(kiln_device_t* dev, kiln_stream_t* stream) {
  (void)dev;
  (void)stream;
  return KILN_OK;
}

static kiln_status_t kiln_ref_stream_query(kiln_device_t* dev, kiln_stream_t* stream, int* out_idle) {
  (void)dev;
  (void)stream;
  if (!out_idle) return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "kiln ref: stream_query: NULL out");
  *out_idle = 1;
  return KILN_OK;
}

static kiln_status_t kiln_ref_event_create(kiln_device_t* dev, kiln_event_t** out_event) {
  if (!out_event) return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "kiln ref: event_create: NULL out");
  *out_event = NULL;
  kiln_event_t* e = kiln_allocator_alloc(&dev->host_allocator, sizeof(*e), sizeof(void*));
  if (!e) return kiln_error(KILN_ERROR_OUT_OF_MEMORY, "kiln ref: out of memory: event object");
  e->owner = kiln_ref_cast(dev);
  e->recorded = 0;
  *out_event = e;
  return KILN_OK;
}

static void kiln_ref_event_destroy(kiln_device_t* dev, kiln_event_t* event) {
  kiln_allocator_free(&dev->host_allocator, event);
}

static kiln_status_t kiln_ref_event_record(kiln_device_t* dev, kiln_event_t* event,
                                           kiln_stream_t* stream) {
  (void)dev;
  (void)stream;
  if (!event) return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "kiln ref: event_record: NULL event");
  event->recorded = 1; /* all prior work has already run */
  return KILN_OK;
}

static kiln_status_t kiln_ref_stream_wait_event(kiln_device_t* dev, kiln_stream_t* stream,
                                                kiln_event_t* event) {
  (void)dev;
  (void)stream;
  if (!event) return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "kiln ref: stream_wait_event: NULL event");
  return KILN_OK;
}

static kiln_status_t kiln_ref_event_synchronize(kiln_device_t* dev, kiln_event_t* event) {
  (void)dev;
  if (!event) return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "kiln ref: event_synchronize: NULL event");
  return KILN_OK;
}

static kiln_status_t kiln_ref_event_query(kiln_device_t* dev, kiln_event_t* event, int* out_done) {
  (void)dev;
  if (!event || !out_done) {
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "kiln ref: event_query: NULL argument");
  }
  *out_done = 1;
  return KILN_OK;
}

static kiln_status_t kiln_ref_synchronize(kiln_device_t* dev) {
  (void)dev;
  return KILN_OK;
}

static kiln_status_t kiln_ref_memory_stats(kiln_device_t* dev, kiln_memory_stats_t* stats) {
  if (!stats || stats->struct_size < sizeof(stats->struct_size)) {
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "kiln ref: memory_stats: bad stats struct");
  }
  kiln_ref_device_t* ref = kiln_ref_cast(dev);
  pthread_mutex_lock(&ref->mutex);
  kiln_memory_stats_t full = ref->stats;
  pthread_mutex_unlock(&ref->mutex);
  full.struct_size = stats->struct_size;
  full.num_cache_hits = 0;
  size_t n = stats->struct_size < sizeof(full) ? stats->struct_size : sizeof(full);
  memcpy(stats, &full, n);
  return KILN_OK;
}

static kiln_status_t kiln_ref_memory_reset_peak(kiln_device_t* dev) {
  kiln_ref_device_t* ref = kiln_ref_cast(dev);
  pthread_mutex_lock(&ref->mutex);
  ref->stats.peak_allocated = ref->stats.allocated;
  ref->stats.peak_reserved = ref->stats.reserved;
  pthread_mutex_unlock(&ref->mutex);
  return KILN_OK;
}

static kiln_status_t kiln_ref_memory_empty_cache(kiln_device_t* dev) {
  (void)dev; /* no cache */
  return KILN_OK;
}

static kiln_status_t kiln_ref_launch_host_fn(kiln_device_t* dev, kiln_stream_t* stream,
                                             kiln_host_fn_t fn, void* user) {
  (void)dev;
  (void)stream;
  if (!fn) return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "kiln ref: launch_host_fn: NULL fn");
  fn(user);
  return KILN_OK;
}

static const kiln_device_vtable_t kiln_ref_vtable = {
    .struct_size = sizeof(kiln_device_vtable_t),
    .destroy = kiln_ref_destroy,
    .query_props = kiln_ref_query_props,
    .alloc = kiln_ref_alloc,
    .free = kiln_ref_free,
    .copy = kiln_ref_copy,
    .fill = kiln_ref_fill,
    .stream_create = kiln_ref_stream_create,
    .stream_destroy = kiln_ref_stream_destroy,
    .stream_synchronize = kiln_ref_stream_synchronize,
    .stream_query = kiln_ref_stream_query,
    .event_create = kiln_ref_event_create,
    .event_destroy = kiln_ref_event_destroy,
    .event_record = kiln_ref_event_record,
    .stream_wait_event = kiln_ref_stream_wait_event,
    .event_synchronize = kiln_ref_event_synchronize,
    .event_query = kiln_ref_event_query,
    .synchronize = kiln_ref_synchronize,
    .memory_stats = kiln_ref_memory_stats,
    .memory_reset_peak = kiln_ref_memory_reset_peak,
    .memory_empty_cache = kiln_ref_memory_empty_cache,
    .launch_host_fn = kiln_ref_launch_host_fn,
};

/* Creates the reference device (see kiln/device.h). */
kiln_status_t kiln_ref_device_create(uint64_t memory_limit, const kiln_allocator_t* host_allocator,
                                     kiln_device_t** out_device) {
  if (!out_device) return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "kiln ref: create: NULL out_device");
  *out_device = NULL;
  kiln_allocator_t host = host_allocator ? *host_allocator : kiln_allocator_system();
  kiln_ref_device_t* ref = kiln_allocator_alloc(&host, sizeof(*ref), KILN_REF_ALIGNMENT);
  if (!ref) return kiln_error(KILN_ERROR_OUT_OF_MEMORY, "kiln ref: out of memory: device object");
  memset(ref, 0, sizeof(*ref));
  if (pthread_mutex_init(&ref->mutex, NULL) != 0) {
    kiln_allocator_free(&host, ref);
    return kiln_error(KILN_ERROR_INTERNAL, "kiln ref: create: pthread_mutex_init failed");
  }
  ref->base.vtable = &kiln_ref_vtable;
  ref->base.host_allocator = host;
  ref->base.index = -1;
  ref->memory_limit = memory_limit;
  ref->stats.struct_size = sizeof(ref->stats);
  *out_device = &ref->base;
  return KILN_OK;
}
