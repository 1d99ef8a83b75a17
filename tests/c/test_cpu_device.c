/* SPDX-License-Identifier: Apache-2.0 */
/* test_cpu_device.c - the CPU device: props, caching allocator, async streams, events. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

#include "devices/cpu/cpu_allocator.h"
#include "kiln_test.h"

/* Under ASan/TSan, let a huge allocation return NULL instead of aborting (unused otherwise). */
const char* __asan_default_options(void) { return "allocator_may_return_null=1"; }
const char* __tsan_default_options(void) { return "allocator_may_return_null=1"; }

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

static kiln_device_t* make_device(uint64_t limit) {
  kiln_cpu_device_options_t opts = {sizeof(opts), limit};
  kiln_device_t* dev = NULL;
  KT_OK(kiln_cpu_device_create(&opts, NULL, &dev));
  return dev;
}

static kiln_memory_stats_t stats_of(kiln_device_t* dev) {
  kiln_memory_stats_t s;
  memset(&s, 0, sizeof(s));
  s.struct_size = sizeof(s);
  KT_OK(kiln_device_memory_stats(dev, &s));
  return s;
}

/* ---- device and allocator --------------------------------------------------------------- */

KT_TEST(test_props_and_vtable) {
  kiln_device_t* dev = make_device(12345);
  KT_OK(kiln_hal_validate(dev->vtable));
  const kiln_device_vtable_t* vt = dev->vtable;
  KT_CHECK(KILN_HAL_HAS(vt, memory_stats) && KILN_HAL_HAS(vt, memory_reset_peak) &&
           KILN_HAL_HAS(vt, memory_empty_cache) && KILN_HAL_HAS(vt, launch_host_fn));
  KT_CHECK(dev->index == -1);
  kiln_device_props_t p;
  memset(&p, 0, sizeof(p));
  p.struct_size = sizeof(p);
  KT_OK(kiln_device_props(dev, &p));
  KT_CHECK(strcmp(p.name, "cpu") == 0);
  KT_CHECK(strncmp(p.description, "host CPU", 8) == 0);
  KT_CHECK(p.memory_limit == 12345);
  KT_CHECK(p.alignment == 64);
  KT_CHECK(p.compute_units == (uint32_t)kiln_threadpool_size(kiln_threadpool_default()));
  KT_CHECK(p.capabilities == (KILN_CAP_HOST_VISIBLE | KILN_CAP_ASYNC_STREAMS |
                              KILN_CAP_CACHING_ALLOCATOR | KILN_CAP_MULTITHREADED));
  kiln_device_destroy(dev);
}

KT_TEST(test_size_classes) {
  KT_CHECK(kiln_cpu_allocator_round(1) == 512);
  KT_CHECK(kiln_cpu_allocator_round(512) == 512);
  KT_CHECK(kiln_cpu_allocator_round(513) == 1024);
  KT_CHECK(kiln_cpu_allocator_round(2048) == 2048);
  KT_CHECK(kiln_cpu_allocator_round(2049) == 2560);
  KT_CHECK(kiln_cpu_allocator_round(4096) == 4096);
  KT_CHECK(kiln_cpu_allocator_round(4097) == 5120);
  KT_CHECK(kiln_cpu_allocator_round((1 << 20) + 1) == (1 << 20) + (1 << 18));
  int ok = 1;
  for (size_t s = 1; s < ((size_t)1 << 24); s = s * 3 / 2 + 1) {
    size_t r = kiln_cpu_allocator_round(s);
    ok &= r >= s && r % 512 == 0 && (s <= 2048 || r - s < s / 4 + 1);
  }
  KT_CHECK(ok);
}

KT_TEST(test_alloc_alignment) {
  kiln_device_t* dev = make_device(0);
  void* ptrs[40];
  int ok = 1;
  for (int i = 0; i < 40; i++) {
    size_t size = (size_t)1 + (size_t)i * 7919 * (size_t)(i + 1);
    KT_OK(kiln_device_alloc(dev, size, &ptrs[i]));
    ok &= ptrs[i] != NULL && (uintptr_t)ptrs[i] % 64 == 0;
    if (ptrs[i]) memset(ptrs[i], 0xab, size);
  }
  KT_CHECK(ok);
  for (int i = 0; i < 40; i++) kiln_device_free(dev, ptrs[i]);
  dev->vtable->free(dev, NULL);
  kiln_device_destroy(dev);
}

KT_TEST(test_cache_hits_and_stats) {
  kiln_device_t* dev = make_device(0);
  void *a, *b, *c;
  KT_OK(kiln_device_alloc(dev, 1000, &a)); /* 1024 */
  KT_OK(kiln_device_alloc(dev, 5000, &b)); /* 5120 */
  kiln_memory_stats_t s = stats_of(dev);
  KT_CHECK(s.allocated == 6144 && s.reserved == 6144 && s.peak_allocated == 6144);
  KT_CHECK(s.num_allocs == 2 && s.num_frees == 0 && s.num_cache_hits == 0);

  kiln_device_free(dev, b);
  s = stats_of(dev);
  KT_CHECK(s.allocated == 1024 && s.reserved == 6144 && s.peak_allocated == 6144 && s.num_frees == 1);

  KT_OK(kiln_device_alloc(dev, 4500, &c)); /* same class as 5000: served from the cache */
  KT_CHECK(c == b);
  s = stats_of(dev);
  KT_CHECK(s.num_cache_hits == 1 && s.num_allocs == 3 && s.allocated == 6144 && s.reserved == 6144);
  kiln_device_free(dev, c);

  KT_OK(kiln_device_memory_reset_peak(dev));
  s = stats_of(dev);
  KT_CHECK(s.peak_allocated == 1024 && s.peak_reserved == 6144);

  KT_OK(kiln_device_memory_empty_cache(dev));
  s = stats_of(dev);
  KT_CHECK(s.reserved == 1024 && s.allocated == 1024 && s.peak_reserved == 6144);
  KT_OK(kiln_device_memory_reset_peak(dev));
  KT_CHECK(stats_of(dev).peak_reserved == 1024);

  kiln_device_free(dev, a);
  s = stats_of(dev);
  KT_CHECK(s.allocated == 0 && s.reserved == 1024 && s.num_frees == 3);
  /* cumulative counters: three allocs (1024 + 5120 + 5120 from the cache), two system blocks,
   * the 5120 one released by empty_cache */
  KT_CHECK(s.total_allocated == 11264 && s.total_freed == 11264);
  KT_CHECK(s.total_reserved == 6144 && s.total_released == 5120);
  KT_CHECK(s.num_system_allocs == 2 && s.num_system_frees == 1);
  KT_CHECK(s.num_alloc_retries == 0 && s.num_ooms == 0);
  kiln_device_destroy(dev);
}

KT_TEST(test_stats_short_struct) {
  kiln_device_t* dev = make_device(0);
  void* p;
  KT_OK(kiln_device_alloc(dev, 100, &p));
  kiln_memory_stats_t s;
  memset(&s, 0xff, sizeof(s));
  s.struct_size = offsetof(kiln_memory_stats_t, peak_allocated); /* an older caller */
  KT_OK(dev->vtable->memory_stats(dev, &s));
  KT_CHECK(s.struct_size == offsetof(kiln_memory_stats_t, peak_allocated));
  KT_CHECK(s.allocated == 512 && s.reserved == 512 && s.peak_allocated == UINT64_MAX);
  kiln_device_free(dev, p);
  kiln_device_destroy(dev);
}

KT_TEST(test_memory_limit) {
  kiln_device_t* dev = make_device(1 << 20);
  void *a = NULL, *b = NULL;
  KT_OK(kiln_device_alloc(dev, 600 << 10, &a)); /* 640 KiB block */
  KT_FAILS(KILN_ERROR_OUT_OF_MEMORY, kiln_device_alloc(dev, 600 << 10, &b));
  KT_CHECK(b == NULL);
  const char* msg = kiln_status_message();
  KT_CHECK(strstr(msg, "kiln cpu: out of memory: tried to allocate 614400 bytes") != NULL);
  KT_CHECK(strstr(msg, "655360 allocated, 655360 reserved, limit 1048576") != NULL);
  /* A cached block of another class is released to make room. */
  kiln_device_free(dev, a);
  KT_OK(kiln_device_alloc(dev, 900 << 10, &b)); /* 1 MiB block */
  kiln_memory_stats_t s = stats_of(dev);
  KT_CHECK(s.reserved == 1 << 20 && s.allocated == 1 << 20);
  KT_FAILS(KILN_ERROR_OUT_OF_MEMORY, kiln_device_alloc(dev, 1, &a));
  s = stats_of(dev);
  /* two refusals; the limit made three allocs flush the cache and retry */
  KT_CHECK(s.num_ooms == 2 && s.num_alloc_retries == 3);
  KT_CHECK(s.num_system_allocs == 2 && s.num_system_frees == 1 && s.total_released == 640 << 10);
  kiln_device_free(dev, b);
  kiln_device_destroy(dev);
}

KT_TEST(test_system_out_of_memory) {
  kiln_device_t* dev = make_device(0);
  void* p = NULL;
  KT_FAILS(KILN_ERROR_OUT_OF_MEMORY, kiln_device_alloc(dev, SIZE_MAX / 2, &p));
  KT_CHECK(strstr(kiln_status_message(), "out of memory") != NULL);
  KT_FAILS(KILN_ERROR_OUT_OF_MEMORY, kiln_device_alloc(dev, (size_t)1 << 59, &p));
  KT_CHECK(p == NULL);
  kiln_memory_stats_t s = stats_of(dev);
  KT_CHECK(s.reserved == 0 && s.allocated == 0 && s.num_allocs == 0);
  kiln_device_destroy(dev);
}

static void* alloc_free_loop(void* arg) {
  kiln_device_t* dev = arg;
  for (int i = 0; i < 2000; i++) {
    void* p = NULL;
    if (kiln_device_alloc(dev, (size_t)(i % 17 + 1) * 700, &p) != KILN_OK) return (void*)1;
    memset(p, i, 64);
    kiln_device_free(dev, p);
  }
  return NULL;
}

KT_TEST(test_allocator_threads) {
  kiln_device_t* dev = make_device(0);
  pthread_t t[3];
  for (int i = 0; i < 3; i++) pthread_create(&t[i], NULL, alloc_free_loop, dev);
  void* rc[3];
  for (int i = 0; i < 3; i++) pthread_join(t[i], &rc[i]);
  KT_CHECK(rc[0] == NULL && rc[1] == NULL && rc[2] == NULL);
  kiln_memory_stats_t s = stats_of(dev);
  KT_CHECK(s.allocated == 0 && s.num_allocs == 6000 && s.num_frees == 6000 && s.num_cache_hits > 0);
  kiln_device_destroy(dev);
}

/* ---- copies and fills ------------------------------------------------------------------- */

KT_TEST(test_fill_validation) {
  kiln_device_t* dev = make_device(0);
  void* p;
  KT_OK(kiln_device_alloc(dev, 64, &p));
  uint64_t pat = 0;
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, dev->vtable->fill(dev, NULL, p, 12, &pat, 3));
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, dev->vtable->fill(dev, NULL, p, 12, &pat, 16));
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, dev->vtable->fill(dev, NULL, p, 10, &pat, 4));
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, dev->vtable->fill(dev, NULL, p, 16, NULL, 4));
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT,
           dev->vtable->copy(dev, NULL, (kiln_copy_kind_t)7, p, &pat, 8));
  KT_OK(kiln_device_synchronize(dev));
  kiln_device_free(dev, p);
  kiln_device_destroy(dev);
}

static int check_pattern(const unsigned char* d, size_t size, const unsigned char* pat, size_t ps) {
  for (size_t i = 0; i < size; i++)
    if (d[i] != pat[i % ps]) return 0;
  return 1;
}

KT_TEST(test_fill_patterns_small_and_large) {
  kiln_device_t* dev = make_device(0);
  const size_t sizes[] = {8, 64, 1000, 4104, (3u << 20) + 8};
  const uint64_t pattern = 0x0807060504030201ull;
  unsigned char* p;
  KT_OK(kiln_device_alloc(dev, (4u << 20) + 64, (void**)&p));
  int ok = 1;
  for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
    for (size_t ps = 1; ps <= 8; ps *= 2) {
      size_t size = sizes[i] / ps * ps;
      memset(p, 0xee, size + 64);
      KT_OK(kiln_device_fill(dev, NULL, p + 8, size, &pattern, ps));
      KT_OK(kiln_device_synchronize(dev));
      ok &= p[7] == 0xee && p[size + 8] == 0xee;
      ok &= check_pattern(p + 8, size, (const unsigned char*)&pattern, ps);
    }
  }
  KT_CHECK(ok);
  kiln_device_free(dev, p);
  kiln_device_destroy(dev);
}

KT_TEST(test_async_ordering_on_stream) {
  kiln_device_t* dev = make_device(0);
  kiln_stream_t* s;
  KT_OK(kiln_stream_create(dev, &s));
  enum { N = 200, SZ = 4096 };
  unsigned char *buf, *outs;
  KT_OK(kiln_device_alloc(dev, SZ, (void**)&buf));
  KT_OK(kiln_device_alloc(dev, (size_t)N * SZ, (void**)&outs));
  /* Each step fills buf with i, then copies it out: only in-order execution gives out[i] == i. */
  for (int i = 0; i < N; i++) {
    uint8_t v = (uint8_t)i;
    KT_OK(kiln_device_fill(dev, s, buf, SZ, &v, 1));
    KT_OK(kiln_device_copy(dev, s, KILN_COPY_DEVICE_TO_DEVICE, outs + (size_t)i * SZ, buf, SZ));
  }
  KT_OK(kiln_stream_synchronize(dev, s));
  int ok = 1;
  for (int i = 0; i < N; i++) ok &= outs[(size_t)i * SZ] == (uint8_t)i && outs[(size_t)i * SZ + SZ - 1] == (uint8_t)i;
  KT_CHECK(ok);
  int idle = 0;
  KT_OK(kiln_stream_query(dev, s, &idle));
  KT_CHECK(idle == 1);
  kiln_device_free(dev, outs);
  kiln_device_free(dev, buf);
  kiln_stream_destroy(dev, s);
  kiln_device_destroy(dev);
}

KT_TEST(test_large_copies) {
  kiln_device_t* dev = make_device(0);
  const size_t size = (5u << 20) + 13;
  unsigned char* host = malloc(size);
  unsigned char* back = malloc(size);
  for (size_t i = 0; i < size; i++) host[i] = (unsigned char)(i * 31 + 7);
  unsigned char *d1, *d2;
  KT_OK(kiln_device_alloc(dev, size, (void**)&d1));
  KT_OK(kiln_device_alloc(dev, size, (void**)&d2));
  KT_OK(kiln_device_copy(dev, NULL, KILN_COPY_HOST_TO_DEVICE, d1, host, size));
  KT_OK(kiln_device_copy(dev, NULL, KILN_COPY_DEVICE_TO_DEVICE, d2, d1, size));
  KT_OK(kiln_device_copy(dev, NULL, KILN_COPY_DEVICE_TO_HOST, back, d2, size));
  KT_OK(kiln_device_synchronize(dev));
  KT_CHECK(memcmp(host, back, size) == 0);
  /* Overlapping device-to-device copy behaves like memmove. */
  KT_OK(kiln_device_copy(dev, NULL, KILN_COPY_DEVICE_TO_DEVICE, d1 + 100, d1, 4000));
  KT_OK(kiln_device_synchronize(dev));
  KT_CHECK(memcmp(d1 + 100, host, 4000) == 0);
  kiln_device_free(dev, d1);
  kiln_device_free(dev, d2);
  free(host);
  free(back);
  kiln_device_destroy(dev);
}

/* ---- host functions, events, synchronization -------------------------------------------- */

typedef struct order_log {
  atomic_int next;
  int order[1000];
  const unsigned char* watched; /* a byte a host fn reads to check a previous copy landed */
  int watched_ok;
} order_log_t;

typedef struct order_item {
  order_log_t* log;
  int index;
} order_item_t;

static void log_fn(void* user) {
  order_item_t* it = user;
  it->log->order[atomic_fetch_add(&it->log->next, 1)] = it->index;
  if (it->log->watched && it->index == 500) it->log->watched_ok = *it->log->watched == 0x5a;
}

KT_TEST(test_host_fn_ordering) {
  kiln_device_t* dev = make_device(0);
  static order_log_t log;
  static order_item_t items[1000];
  memset(&log, 0, sizeof(log));
  unsigned char* p;
  KT_OK(kiln_device_alloc(dev, 64, (void**)&p));
  memset(p, 0, 64);
  log.watched = p;
  for (int i = 0; i < 1000; i++) {
    items[i].log = &log;
    items[i].index = i;
    if (i == 500) {
      uint8_t v = 0x5a;
      KT_OK(kiln_device_fill(dev, NULL, p, 64, &v, 1));
    }
    KT_OK(kiln_stream_launch_host_fn(dev, NULL, log_fn, &items[i]));
  }
  KT_OK(kiln_stream_synchronize(dev, NULL));
  int ok = atomic_load(&log.next) == 1000;
  for (int i = 0; i < 1000; i++) ok &= log.order[i] == i;
  KT_CHECK(ok);
  KT_CHECK(log.watched_ok);
  kiln_device_free(dev, p);
  kiln_device_destroy(dev);
}

typedef struct gate {
  atomic_int open;
  atomic_int flag;
  atomic_int b_ran;
  atomic_int b_saw_flag;
} gate_t;

static void gated_fn(void* user) {
  gate_t* g = user;
  while (!atomic_load(&g->open)) sleep_ms(1);
  sleep_ms(5);
  atomic_store(&g->flag, 1);
}

static void after_fn(void* user) {
  gate_t* g = user;
  atomic_store(&g->b_saw_flag, atomic_load(&g->flag));
  atomic_store(&g->b_ran, 1);
}

KT_TEST(test_events_across_streams) {
  kiln_device_t* dev = make_device(0);
  kiln_stream_t *a, *b;
  kiln_event_t* ev;
  KT_OK(kiln_stream_create(dev, &a));
  KT_OK(kiln_stream_create(dev, &b));
  KT_OK(kiln_event_create(dev, &ev));
  static gate_t g;
  memset(&g, 0, sizeof(g));
  KT_OK(kiln_stream_launch_host_fn(dev, a, gated_fn, &g));
  KT_OK(kiln_event_record(dev, ev, a));
  KT_OK(kiln_stream_wait_event(dev, b, ev));
  KT_OK(kiln_stream_launch_host_fn(dev, b, after_fn, &g));

  int done = 1, idle = 1;
  KT_OK(kiln_event_query(dev, ev, &done));
  KT_CHECK(done == 0);
  KT_OK(kiln_stream_query(dev, a, &idle));
  KT_CHECK(idle == 0);
  sleep_ms(20);
  KT_CHECK(atomic_load(&g.b_ran) == 0); /* b is held back by the event */
  KT_OK(kiln_stream_query(dev, b, &idle));
  KT_CHECK(idle == 0);

  atomic_store(&g.open, 1);
  KT_OK(kiln_event_synchronize(dev, ev));
  KT_CHECK(atomic_load(&g.flag) == 1);
  KT_OK(kiln_event_query(dev, ev, &done));
  KT_CHECK(done == 1);
  KT_OK(kiln_stream_synchronize(dev, b));
  KT_CHECK(atomic_load(&g.b_ran) == 1 && atomic_load(&g.b_saw_flag) == 1);

  /* The event keeps its stream readable after the stream is gone; re-recording replaces it. */
  kiln_stream_destroy(dev, a);
  KT_OK(kiln_event_query(dev, ev, &done));
  KT_CHECK(done == 1);
  KT_OK(kiln_event_record(dev, ev, NULL));
  KT_OK(kiln_event_synchronize(dev, ev));
  kiln_event_destroy(dev, ev);
  kiln_stream_destroy(dev, b);
  kiln_device_destroy(dev);
}

KT_TEST(test_unrecorded_event_and_idle_stream) {
  kiln_device_t* dev = make_device(0);
  kiln_event_t* ev;
  kiln_stream_t* s;
  KT_OK(kiln_event_create(dev, &ev));
  KT_OK(kiln_stream_create(dev, &s));
  int done = 0, idle = 0;
  KT_OK(kiln_event_query(dev, ev, &done));
  KT_CHECK(done == 1);
  KT_OK(kiln_event_synchronize(dev, ev));
  KT_OK(kiln_stream_wait_event(dev, s, ev));
  KT_OK(kiln_stream_query(dev, s, &idle));
  KT_CHECK(idle == 1);
  for (int i = 0; i < 1000; i++) KT_OK(kiln_stream_synchronize(dev, s));
  KT_OK(kiln_event_record(dev, ev, s)); /* nothing submitted: complete at once */
  KT_OK(kiln_event_query(dev, ev, &done));
  KT_CHECK(done == 1);
  kiln_event_destroy(dev, ev);
  kiln_stream_destroy(dev, s);
  kiln_device_destroy(dev);
}

static void slow_count_fn(void* user) {
  sleep_ms(10);
  atomic_fetch_add((atomic_int*)user, 1);
}

KT_TEST(test_device_synchronize_and_destroy) {
  kiln_device_t* dev = make_device(0);
  static atomic_int count;
  atomic_init(&count, 0);
  kiln_stream_t* s[3];
  for (int i = 0; i < 3; i++) KT_OK(kiln_stream_create(dev, &s[i]));
  for (int i = 0; i < 3; i++) {
    KT_OK(kiln_stream_launch_host_fn(dev, s[i], slow_count_fn, &count));
    KT_OK(kiln_stream_launch_host_fn(dev, s[i], slow_count_fn, &count));
  }
  KT_OK(kiln_stream_launch_host_fn(dev, NULL, slow_count_fn, &count));
  KT_OK(kiln_device_synchronize(dev));
  KT_CHECK(atomic_load(&count) == 7);

  /* stream_destroy waits for its work. */
  KT_OK(kiln_stream_launch_host_fn(dev, s[0], slow_count_fn, &count));
  kiln_stream_destroy(dev, s[0]);
  KT_CHECK(atomic_load(&count) == 8);

  /* Device destroy waits for pending work and frees leftover streams and events. */
  kiln_event_t* ev;
  KT_OK(kiln_event_create(dev, &ev));
  KT_OK(kiln_stream_launch_host_fn(dev, s[1], slow_count_fn, &count));
  KT_OK(kiln_event_record(dev, ev, s[1]));
  KT_OK(kiln_stream_wait_event(dev, s[2], ev));
  KT_OK(kiln_stream_launch_host_fn(dev, s[2], slow_count_fn, &count));
  void* leak_free;
  KT_OK(kiln_device_alloc(dev, 100, &leak_free));
  kiln_device_free(dev, leak_free); /* cached: released by destroy */
  kiln_device_destroy(dev);
  KT_CHECK(atomic_load(&count) == 10);
}

KT_MAIN()
