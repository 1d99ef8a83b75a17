/* SPDX-License-Identifier: Apache-2.0 */
/* conformance.c - the HAL conformance suite: `hal_conformance <driver>`.
 *
 * Checks a device only through the public runtime API (kiln/device.h), so it applies to any
 * implementation of kiln/hal.h. Each test creates its own device by driver name.
 */
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "kiln/graph.h"
#include "kiln/kernels/elementwise.h"
#include "kiln_test.h"

static const char* g_driver = "ref";

#define MIB ((size_t)1 << 20)

/* ---- helpers ------------------------------------------------------------------------------ */

static kiln_device_t* open_device(uint64_t limit) {
  kiln_device_t* dev = NULL;
  kiln_status_t s = kiln_device_create_by_name(g_driver, limit, NULL, &dev);
  if (s != KILN_OK || !dev) {
    fprintf(stderr, "  cannot create device '%s': %s: %s\n", g_driver, kiln_status_code_name(s),
            kiln_status_message());
    KT_CHECK(!"device creation failed");
    return NULL;
  }
  return dev;
}

static kiln_device_props_t get_props(kiln_device_t* dev) {
  kiln_device_props_t p;
  memset(&p, 0, sizeof(p));
  p.struct_size = sizeof(p);
  KT_OK(kiln_device_props(dev, &p));
  return p;
}

static uint64_t g_rng = 0x9e3779b97f4a7c15ull;

static void fill_random(void* buf, size_t n) {
  unsigned char* b = buf;
  for (size_t i = 0; i < n; i++) {
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    b[i] = (unsigned char)(g_rng >> 24);
  }
}

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

static void host_noop_fn(void* user) { (void)user; }

static int has_stats(kiln_device_t* dev) { return KILN_HAL_HAS(dev->vtable, memory_stats); }
static int has_host_fn(kiln_device_t* dev) { return KILN_HAL_HAS(dev->vtable, launch_host_fn); }

static kiln_memory_stats_t get_stats(kiln_device_t* dev) {
  kiln_memory_stats_t s;
  memset(&s, 0, sizeof(s));
  s.struct_size = sizeof(s);
  KT_OK(kiln_device_memory_stats(dev, &s));
  return s;
}

/* h2d then d2h of `size` random bytes at the given offsets into a device and a host buffer. */
static int round_trip(kiln_device_t* dev, kiln_stream_t* stream, size_t size, size_t dev_off,
                      size_t host_off) {
  unsigned char* src = malloc(size + host_off + 1);
  unsigned char* dst = malloc(size + host_off + 1);
  void* d = NULL;
  void* d2 = NULL;
  int ok = 0;
  if (!src || !dst) goto done;
  fill_random(src, size + host_off + 1);
  memset(dst, 0xA5, size + host_off + 1);
  if (kiln_device_alloc(dev, size + dev_off, &d) != KILN_OK) goto done;
  if (kiln_device_alloc(dev, size + dev_off + 3, &d2) != KILN_OK) goto done;
  unsigned char* dp = (unsigned char*)d + dev_off;
  unsigned char* dp2 = (unsigned char*)d2 + dev_off + 3;
  if (kiln_device_copy(dev, stream, KILN_COPY_HOST_TO_DEVICE, dp, src + host_off, size)) goto done;
  if (kiln_device_copy(dev, stream, KILN_COPY_DEVICE_TO_DEVICE, dp2, dp, size)) goto done;
  if (kiln_device_copy(dev, stream, KILN_COPY_DEVICE_TO_HOST, dst + host_off, dp2, size)) goto done;
  if (kiln_stream_synchronize(dev, stream) != KILN_OK) goto done;
  ok = memcmp(dst + host_off, src + host_off, size) == 0;
  /* bytes around the destination window are untouched */
  for (size_t i = 0; i < host_off; i++) ok = ok && dst[i] == 0xA5;
  ok = ok && dst[host_off + size] == 0xA5;
done:
  kiln_device_free(dev, d);
  kiln_device_free(dev, d2);
  free(src);
  free(dst);
  return ok;
}

/* ---- vtable and props --------------------------------------------------------------------- */

KT_TEST(hal_validate_accepts_device) {
  kiln_device_t* dev = open_device(0);
  if (!dev) return;
  KT_CHECK(dev->vtable != NULL);
  KT_OK(kiln_hal_validate(dev->vtable));
  KT_CHECK(dev->vtable->struct_size >= offsetof(kiln_device_vtable_t, memory_stats));
  kiln_device_destroy(dev);
}

KT_TEST(props_basic) {
  kiln_device_t* dev = open_device(0);
  if (!dev) return;
  kiln_device_props_t p = get_props(dev);
  KT_CHECK(p.name[0] != '\0');
  KT_CHECK(memchr(p.name, '\0', sizeof(p.name)) != NULL);
  KT_CHECK(memchr(p.description, '\0', sizeof(p.description)) != NULL);
  KT_CHECK(strcmp(p.name, g_driver) == 0);
  KT_CHECK(p.alignment > 0 && (p.alignment & (p.alignment - 1)) == 0);
  KT_CHECK(p.compute_units >= 1);
  if (p.capabilities & KILN_CAP_HOST_VISIBLE) {
    void* d = NULL;
    KT_OK(kiln_device_alloc(dev, 256, &d));
    if (d) {
      unsigned char host[256];
      memset(d, 0x3C, 256); /* host-visible: the host writes device memory directly */
      KT_OK(kiln_device_copy(dev, NULL, KILN_COPY_DEVICE_TO_HOST, host, d, 256));
      KT_OK(kiln_device_synchronize(dev));
      int same = 1;
      for (int i = 0; i < 256; i++) same = same && host[i] == 0x3C;
      KT_CHECK(same);
    }
    kiln_device_free(dev, d);
  }
  kiln_device_destroy(dev);
}

KT_TEST(props_struct_size_honored) {
  kiln_device_t* dev = open_device(0);
  if (!dev) return;
  /* an "old caller" knows only the fields up to memory_limit */
  union {
    kiln_device_props_t p;
    unsigned char bytes[sizeof(kiln_device_props_t)];
  } u;
  memset(&u, 0xEE, sizeof(u));
  size_t old_size = offsetof(kiln_device_props_t, memory_limit);
  u.p.struct_size = old_size;
  KT_OK(kiln_device_props(dev, &u.p));
  KT_CHECK(u.p.name[0] != '\0' && memchr(u.p.name, '\0', sizeof(u.p.name)) != NULL);
  int untouched = 1;
  for (size_t i = old_size; i < sizeof(u); i++) untouched = untouched && u.bytes[i] == 0xEE;
  KT_CHECK(untouched);
  kiln_device_destroy(dev);
}

KT_TEST(vtable_versioning_old_vendor) {
  kiln_device_t* dev = open_device(0);
  if (!dev) return;
  kiln_device_vtable_t old = *dev->vtable;
  old.struct_size = offsetof(kiln_device_vtable_t, memory_stats);
  KT_CHECK(!KILN_HAL_HAS(&old, memory_stats));
  KT_CHECK(!KILN_HAL_HAS(&old, memory_reset_peak));
  KT_CHECK(!KILN_HAL_HAS(&old, memory_empty_cache));
  KT_CHECK(!KILN_HAL_HAS(&old, launch_host_fn));
  KT_CHECK(KILN_HAL_HAS(&old, synchronize));
  KT_CHECK(KILN_HAL_HAS(&old, alloc));
  KT_OK(kiln_hal_validate(&old));

  /* the runtime must not call slots beyond struct_size: run the device through the old view */
  const kiln_device_vtable_t* saved = dev->vtable;
  dev->vtable = &old;
  kiln_memory_stats_t st;
  memset(&st, 0, sizeof(st));
  st.struct_size = sizeof(st);
  KT_FAILS(KILN_ERROR_UNIMPLEMENTED, kiln_device_memory_stats(dev, &st));
  KT_FAILS(KILN_ERROR_UNIMPLEMENTED, kiln_device_memory_reset_peak(dev));
  KT_OK(kiln_device_memory_empty_cache(dev));
  KT_FAILS(KILN_ERROR_UNIMPLEMENTED, kiln_stream_launch_host_fn(dev, NULL, host_noop_fn, NULL));
  KT_CHECK(round_trip(dev, NULL, 4096, 0, 0));
  dev->vtable = saved;
  kiln_device_destroy(dev);
}

KT_TEST(vtable_missing_required_slot_rejected) {
  kiln_device_t* dev = open_device(0);
  if (!dev) return;
  const kiln_device_vtable_t* vt = dev->vtable;
  kiln_device_vtable_t bad;
  int rejected = 0, total = 0;
#define KT_DROP(field)                                                          \
  do {                                                                          \
    bad = *vt;                                                                  \
    bad.field = NULL;                                                           \
    total++;                                                                    \
    kiln_status_t s_ = kiln_hal_validate(&bad);                                 \
    if (s_ == KILN_ERROR_INVALID_ARGUMENT && kiln_status_message()[0]) {        \
      rejected++;                                                               \
    } else {                                                                    \
      fprintf(stderr, "  missing '%s' not rejected (%s)\n", #field,             \
              kiln_status_code_name(s_));                                       \
    }                                                                           \
  } while (0)
  KT_DROP(destroy);
  KT_DROP(query_props);
  KT_DROP(alloc);
  KT_DROP(free);
  KT_DROP(copy);
  KT_DROP(fill);
  KT_DROP(stream_create);
  KT_DROP(stream_destroy);
  KT_DROP(stream_synchronize);
  KT_DROP(stream_query);
  KT_DROP(event_create);
  KT_DROP(event_destroy);
  KT_DROP(event_record);
  KT_DROP(stream_wait_event);
  KT_DROP(event_synchronize);
  KT_DROP(event_query);
  KT_DROP(synchronize);
#undef KT_DROP
  KT_CHECK(rejected == total);
  /* a struct_size that cuts off required slots is also rejected */
  bad = *vt;
  bad.struct_size = offsetof(kiln_device_vtable_t, copy);
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_hal_validate(&bad));
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_hal_validate(NULL));
  /* optional slots may be NULL */
  bad = *vt;
  bad.memory_stats = NULL;
  bad.memory_reset_peak = NULL;
  bad.memory_empty_cache = NULL;
  bad.launch_host_fn = NULL;
  KT_OK(kiln_hal_validate(&bad));
  kiln_device_destroy(dev);
}

/* ---- memory ------------------------------------------------------------------------------- */

KT_TEST(alloc_alignment) {
  kiln_device_t* dev = open_device(0);
  if (!dev) return;
  kiln_device_props_t p = get_props(dev);
  static const size_t sizes[] = {1, 3, 7, 8, 63, 64, 65, 100, 4095, 4096, 4097, 65536, 1000001};
  void* ptrs[sizeof(sizes) / sizeof(sizes[0])];
  int aligned = 1;
  for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
    ptrs[i] = NULL;
    KT_OK(kiln_device_alloc(dev, sizes[i], &ptrs[i]));
    KT_CHECK(ptrs[i] != NULL);
    if (p.alignment) aligned = aligned && ((uintptr_t)ptrs[i] % p.alignment) == 0;
  }
  KT_CHECK(aligned);
  for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) kiln_device_free(dev, ptrs[i]);
  kiln_device_destroy(dev);
}

KT_TEST(alloc_zero_and_free_null) {
  kiln_device_t* dev = open_device(0);
  if (!dev) return;
  void* p = (void*)&p;
  KT_OK(kiln_device_alloc(dev, 0, &p));
  KT_CHECK(p == NULL);
  kiln_device_free(dev, NULL); /* no-op */
  kiln_device_destroy(dev);
}

KT_TEST(alloc_blocks_disjoint) {
  kiln_device_t* dev = open_device(0);
  if (!dev) return;
  enum { N = 48 };
  void* ptrs[N];
  size_t sizes[N];
  for (int i = 0; i < N; i++) {
    sizes[i] = (size_t)(i * 997 % 5000) + 1;
    ptrs[i] = NULL;
    KT_OK(kiln_device_alloc(dev, sizes[i], &ptrs[i]));
    unsigned char v = (unsigned char)(i + 1);
    if (ptrs[i]) KT_OK(kiln_device_fill(dev, NULL, ptrs[i], sizes[i], &v, 1));
  }
  KT_OK(kiln_device_synchronize(dev));
  int ok = 1;
  unsigned char* host = malloc(5000);
  for (int i = 0; i < N && host; i++) {
    if (!ptrs[i]) continue;
    KT_OK(kiln_device_copy(dev, NULL, KILN_COPY_DEVICE_TO_HOST, host, ptrs[i], sizes[i]));
    KT_OK(kiln_stream_synchronize(dev, NULL));
    for (size_t j = 0; j < sizes[i]; j++) ok = ok && host[j] == (unsigned char)(i + 1);
  }
  KT_CHECK(host != NULL && ok);
  free(host);
  for (int i = 0; i < N; i++) kiln_device_free(dev, ptrs[i]);
  kiln_device_destroy(dev);
}

KT_TEST(alloc_free_cycles) {
  kiln_device_t* dev = open_device(0);
  if (!dev) return;
  kiln_memory_stats_t before = {0};
  if (has_stats(dev)) before = get_stats(dev);
  int ok = 1;
  void* keep[8] = {0};
  for (int i = 0; i < 2000 && ok; i++) {
    size_t size = (size_t)((i * 7919) % 70000) + 1;
    void* p = NULL;
    ok = kiln_device_alloc(dev, size, &p) == KILN_OK && p != NULL;
    if (!ok) break;
    if (i % 5 == 0) {
      kiln_device_free(dev, keep[i % 8]);
      keep[i % 8] = p;
    } else {
      kiln_device_free(dev, p);
    }
  }
  KT_CHECK(ok);
  for (int i = 0; i < 8; i++) kiln_device_free(dev, keep[i]);
  if (has_stats(dev)) {
    kiln_memory_stats_t after = get_stats(dev);
    KT_CHECK(after.allocated == before.allocated);
    KT_CHECK(after.num_allocs - before.num_allocs == 2000);
    KT_CHECK(after.num_frees - before.num_frees == 2000);
    /* cumulative counters agree with the current values (all zero on a device without them) */
    KT_CHECK(after.total_allocated - before.total_allocated ==
             after.total_freed - before.total_freed);
    KT_CHECK(after.reserved == after.total_reserved - after.total_released);
    KT_CHECK(after.allocated == after.total_allocated - after.total_freed);
  }
  kiln_device_destroy(dev);
}

/* ---- copies and fill ---------------------------------------------------------------------- */

KT_TEST(copy_round_trip_sizes) {
  kiln_device_t* dev = open_device(0);
  if (!dev) return;
  static const size_t sizes[] = {1, 7, 4096, 3 * MIB};
  for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
    int ok = round_trip(dev, NULL, sizes[i], 0, 0);
    if (!ok) fprintf(stderr, "  round trip of %zu bytes failed\n", sizes[i]);
    KT_CHECK(ok);
  }
  kiln_device_destroy(dev);
}

KT_TEST(copy_round_trip_misaligned) {
  kiln_device_t* dev = open_device(0);
  if (!dev) return;
  static const size_t sizes[] = {1, 7, 4096, 3 * MIB};
  static const size_t offs[][2] = {{1, 0}, {0, 3}, {5, 11}, {63, 1}};
  for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
    for (size_t j = 0; j < sizeof(offs) / sizeof(offs[0]); j++) {
      int ok = round_trip(dev, NULL, sizes[i], offs[j][0], offs[j][1]);
      if (!ok) {
        fprintf(stderr, "  round trip of %zu bytes (offsets %zu/%zu) failed\n", sizes[i], offs[j][0],
                offs[j][1]);
      }
      KT_CHECK(ok);
    }
  }
  kiln_device_destroy(dev);
}

KT_TEST(copy_on_created_stream) {
  kiln_device_t* dev = open_device(0);
  if (!dev) return;
  kiln_stream_t* s = NULL;
  KT_OK(kiln_stream_create(dev, &s));
  KT_CHECK(round_trip(dev, s, 3 * MIB, 0, 0));
  KT_CHECK(round_trip(dev, s, 7, 1, 2));
  kiln_stream_destroy(dev, s);
  kiln_device_destroy(dev);
}

KT_TEST(copy_size_zero_noop) {
  kiln_device_t* dev = open_device(0);
  if (!dev) return;
  void* d = NULL;
  KT_OK(kiln_device_alloc(dev, 64, &d));
  unsigned char host[64];
  memset(host, 0x11, sizeof(host));
  KT_OK(kiln_device_fill(dev, NULL, d, 64, &(unsigned char){0x22}, 1));
  KT_OK(kiln_device_copy(dev, NULL, KILN_COPY_HOST_TO_DEVICE, d, host, 0));
  KT_OK(kiln_device_copy(dev, NULL, KILN_COPY_DEVICE_TO_HOST, host, d, 0));
  KT_OK(kiln_device_synchronize(dev));
  KT_CHECK(host[0] == 0x11 && host[63] == 0x11);
  KT_OK(kiln_device_copy(dev, NULL, KILN_COPY_DEVICE_TO_HOST, host, d, 64));
  KT_OK(kiln_device_synchronize(dev));
  KT_CHECK(host[0] == 0x22 && host[63] == 0x22);
  kiln_device_free(dev, d);
  kiln_device_destroy(dev);
}

static int check_fill(kiln_device_t* dev, size_t pattern_size, size_t size, size_t offset) {
  unsigned char pattern[8] = {0x01, 0x23, 0x45, 0x67, 0x89, 0xAB, 0xCD, 0xEF};
  unsigned char* host = malloc(size + offset + 8);
  void* d = NULL;
  int ok = 0;
  if (!host) return 0;
  if (kiln_device_alloc(dev, size + offset + 8, &d) != KILN_OK) goto done;
  unsigned char guard = 0x5A;
  if (kiln_device_fill(dev, NULL, d, size + offset + 8, &guard, 1) != KILN_OK) goto done;
  unsigned char* dp = (unsigned char*)d + offset;
  if (kiln_device_fill(dev, NULL, dp, size, pattern, pattern_size) != KILN_OK) goto done;
  pattern[0] = 0xFF; /* the pattern is copied before return */
  if (kiln_device_copy(dev, NULL, KILN_COPY_DEVICE_TO_HOST, host, d, size + offset + 8)) goto done;
  if (kiln_device_synchronize(dev) != KILN_OK) goto done;
  pattern[0] = 0x01;
  ok = 1;
  for (size_t i = 0; i < offset; i++) ok = ok && host[i] == 0x5A;
  for (size_t i = 0; i < size; i++) ok = ok && host[offset + i] == pattern[i % pattern_size];
  for (size_t i = 0; i < 8; i++) ok = ok && host[offset + size + i] == 0x5A;
done:
  kiln_device_free(dev, d);
  free(host);
  return ok;
}

KT_TEST(fill_patterns) {
  kiln_device_t* dev = open_device(0);
  if (!dev) return;
  static const size_t psizes[] = {1, 2, 4, 8};
  static const size_t sizes[] = {8, 64, 4096, 1 * MIB + 8};
  for (size_t i = 0; i < 4; i++) {
    for (size_t j = 0; j < 4; j++) {
      for (size_t off = 0; off <= 8; off += 8) {
        int ok = check_fill(dev, psizes[i], sizes[j], off);
        if (!ok) fprintf(stderr, "  fill p=%zu size=%zu off=%zu failed\n", psizes[i], sizes[j], off);
        KT_CHECK(ok);
      }
    }
  }
  /* a byte pattern at an odd offset and size */
  KT_CHECK(check_fill(dev, 1, 13, 3));
  kiln_device_destroy(dev);
}

KT_TEST(fill_rejects_bad_patterns) {
  kiln_device_t* dev = open_device(0);
  if (!dev) return;
  void* d = NULL;
  KT_OK(kiln_device_alloc(dev, 64, &d));
  unsigned char pat[16] = {0};
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_device_fill(dev, NULL, d, 64, pat, 0));
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_device_fill(dev, NULL, d, 63, pat, 3));
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_device_fill(dev, NULL, d, 64, pat, 16));
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_device_fill(dev, NULL, d, 6, pat, 4));
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_device_fill(dev, NULL, d, 12, pat, 8));
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_device_fill(dev, NULL, d, 64, NULL, 4));
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_device_fill(dev, NULL, NULL, 64, pat, 4));
  KT_CHECK(kiln_status_message()[0] != '\0');
  KT_OK(kiln_device_synchronize(dev));
  kiln_device_free(dev, d);
  kiln_device_destroy(dev);
}

/* ---- streams and ordering ----------------------------------------------------------------- */

KT_TEST(stream_lifecycle) {
  kiln_device_t* dev = open_device(0);
  if (!dev) return;
  for (int i = 0; i < 50; i++) {
    kiln_stream_t* s = NULL;
    KT_OK(kiln_stream_create(dev, &s));
    KT_CHECK(s != NULL);
    int idle = -1;
    KT_OK(kiln_stream_query(dev, s, &idle));
    KT_CHECK(idle == 0 || idle == 1);
    KT_OK(kiln_stream_synchronize(dev, s));
    idle = -1;
    KT_OK(kiln_stream_query(dev, s, &idle));
    KT_CHECK(idle == 1);
    kiln_stream_destroy(dev, s);
  }
  int idle = -1;
  KT_OK(kiln_stream_synchronize(dev, NULL));
  KT_OK(kiln_stream_query(dev, NULL, &idle));
  KT_CHECK(idle == 1);
  kiln_device_destroy(dev);
}

KT_TEST(stream_destroy_waits_for_work) {
  kiln_device_t* dev = open_device(0);
  if (!dev) return;
  size_t n = 2 * MIB;
  unsigned char* src = malloc(n);
  unsigned char* dst = calloc(1, n);
  void* d = NULL;
  KT_OK(kiln_device_alloc(dev, n, &d));
  if (src && dst && d) {
    fill_random(src, n);
    kiln_stream_t* s = NULL;
    KT_OK(kiln_stream_create(dev, &s));
    KT_OK(kiln_device_copy(dev, s, KILN_COPY_HOST_TO_DEVICE, d, src, n));
    KT_OK(kiln_device_copy(dev, s, KILN_COPY_DEVICE_TO_HOST, dst, d, n));
    kiln_stream_destroy(dev, s); /* waits for the copies */
    KT_CHECK(memcmp(src, dst, n) == 0);
  } else {
    KT_CHECK(!"allocation failed");
  }
  kiln_device_free(dev, d);
  free(src);
  free(dst);
  kiln_device_destroy(dev);
}

KT_TEST(stream_ordering_dependent_copies) {
  kiln_device_t* dev = open_device(0);
  if (!dev) return;
  enum { NBUF = 8, ROUNDS = 40 };
  size_t n = 256 * 1024;
  void* bufs[NBUF] = {0};
  unsigned char* src = malloc(n);
  unsigned char* dst = malloc(n);
  int ok = src && dst;
  for (int i = 0; i < NBUF && ok; i++) ok = kiln_device_alloc(dev, n, &bufs[i]) == KILN_OK;
  KT_CHECK(ok);
  kiln_stream_t* s = NULL;
  KT_OK(kiln_stream_create(dev, &s));
  if (ok && s) {
    fill_random(src, n);
    for (int i = 0; i < NBUF; i++) KT_OK(kiln_device_fill(dev, s, bufs[i], n, &(uint32_t){0}, 4));
    KT_OK(kiln_device_copy(dev, s, KILN_COPY_HOST_TO_DEVICE, bufs[0], src, n));
    /* a chain: each copy reads what the previous one wrote */
    for (int r = 0; r < ROUNDS; r++) {
      int a = r % NBUF, b = (r + 1) % NBUF;
      KT_OK(kiln_device_copy(dev, s, KILN_COPY_DEVICE_TO_DEVICE, bufs[b], bufs[a], n));
      /* then clobber the source so a reordered copy would pick up zeros */
      KT_OK(kiln_device_fill(dev, s, bufs[a], n, &(uint64_t){0}, 8));
    }
    KT_OK(kiln_device_copy(dev, s, KILN_COPY_DEVICE_TO_HOST, dst, bufs[ROUNDS % NBUF], n));
    KT_OK(kiln_stream_synchronize(dev, s));
    KT_CHECK(memcmp(src, dst, n) == 0);
    /* overlapping fills: the last one wins */
    KT_OK(kiln_device_fill(dev, s, bufs[0], n, &(uint8_t){1}, 1));
    KT_OK(kiln_device_fill(dev, s, bufs[0], n / 2, &(uint16_t){0x0202}, 2));
    KT_OK(kiln_device_copy(dev, s, KILN_COPY_DEVICE_TO_HOST, dst, bufs[0], n));
    KT_OK(kiln_stream_synchronize(dev, s));
    KT_CHECK(dst[0] == 2 && dst[n / 2 - 1] == 2 && dst[n / 2] == 1 && dst[n - 1] == 1);
  }
  kiln_stream_destroy(dev, s);
  for (int i = 0; i < NBUF; i++) kiln_device_free(dev, bufs[i]);
  free(src);
  free(dst);
  kiln_device_destroy(dev);
}

typedef struct host_log {
  int order[64];
  int count;
  const unsigned char* watch; /* host buffer a d2h copy fills before the callback runs */
  unsigned char expect;
  int saw_data;
} host_log_t;

typedef struct host_step {
  host_log_t* log;
  int id;
} host_step_t;

static void host_step_fn(void* user) {
  host_step_t* st = user;
  if (st->log->count < 64) st->log->order[st->log->count++] = st->id;
}

static void host_check_fn(void* user) {
  host_log_t* log = user;
  log->saw_data = log->watch[0] == log->expect && log->watch[4095] == log->expect;
}

static void host_slow_fn(void* user) {
  (void)user;
  sleep_ms(30);
}

KT_TEST(host_fn_ordering) {
  kiln_device_t* dev = open_device(0);
  if (!dev) return;
  if (!has_host_fn(dev)) {
    KT_FAILS(KILN_ERROR_UNIMPLEMENTED, kiln_stream_launch_host_fn(dev, NULL, host_slow_fn, NULL));
    kiln_device_destroy(dev);
    return;
  }
  kiln_stream_t* s = NULL;
  KT_OK(kiln_stream_create(dev, &s));
  host_log_t log;
  memset(&log, 0, sizeof(log));
  host_step_t steps[32];
  for (int i = 0; i < 32; i++) {
    steps[i].log = &log;
    steps[i].id = i;
    if (i == 3) KT_OK(kiln_stream_launch_host_fn(dev, s, host_slow_fn, NULL));
    KT_OK(kiln_stream_launch_host_fn(dev, s, host_step_fn, &steps[i]));
  }
  KT_OK(kiln_stream_synchronize(dev, s));
  KT_CHECK(log.count == 32);
  int in_order = 1;
  for (int i = 0; i < log.count; i++) in_order = in_order && log.order[i] == i;
  KT_CHECK(in_order);

  /* a host fn runs after the copy submitted before it */
  unsigned char* host = calloc(1, 4096);
  void* d = NULL;
  KT_OK(kiln_device_alloc(dev, 4096, &d));
  if (host && d) {
    log.watch = host;
    log.expect = 0x77;
    KT_OK(kiln_stream_launch_host_fn(dev, s, host_slow_fn, NULL));
    KT_OK(kiln_device_fill(dev, s, d, 4096, &(unsigned char){0x77}, 1));
    KT_OK(kiln_device_copy(dev, s, KILN_COPY_DEVICE_TO_HOST, host, d, 4096));
    KT_OK(kiln_stream_launch_host_fn(dev, s, host_check_fn, &log));
    KT_OK(kiln_stream_synchronize(dev, s));
    KT_CHECK(log.saw_data == 1);
  }
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_stream_launch_host_fn(dev, s, NULL, NULL));
  kiln_device_free(dev, d);
  free(host);
  kiln_stream_destroy(dev, s);
  kiln_device_destroy(dev);
}

/* ---- events ------------------------------------------------------------------------------- */

KT_TEST(event_record_query_synchronize) {
  kiln_device_t* dev = open_device(0);
  if (!dev) return;
  kiln_event_t* ev = NULL;
  KT_OK(kiln_event_create(dev, &ev));
  KT_CHECK(ev != NULL);
  int done = -1;
  KT_OK(kiln_event_query(dev, ev, &done));
  KT_CHECK(done == 1); /* never recorded: complete */
  KT_OK(kiln_event_synchronize(dev, ev));

  kiln_stream_t* s = NULL;
  KT_OK(kiln_stream_create(dev, &s));
  size_t n = 3 * MIB;
  unsigned char* src = malloc(n);
  unsigned char* dst = malloc(n);
  void* d = NULL;
  KT_OK(kiln_device_alloc(dev, n, &d));
  if (src && dst && d) {
    fill_random(src, n);
    for (int round = 0; round < 3; round++) { /* re-recording replaces the captured point */
      src[0] = (unsigned char)round;
      KT_OK(kiln_device_copy(dev, s, KILN_COPY_HOST_TO_DEVICE, d, src, n));
      KT_OK(kiln_device_copy(dev, s, KILN_COPY_DEVICE_TO_HOST, dst, d, n));
      KT_OK(kiln_event_record(dev, ev, s));
      done = -1;
      KT_OK(kiln_event_query(dev, ev, &done));
      KT_CHECK(done == 0 || done == 1);
      KT_OK(kiln_event_synchronize(dev, ev));
      done = -1;
      KT_OK(kiln_event_query(dev, ev, &done));
      KT_CHECK(done == 1);
      KT_CHECK(memcmp(src, dst, n) == 0); /* the event covered both copies */
    }
    /* record on the default stream too */
    KT_OK(kiln_device_fill(dev, NULL, d, n, &(unsigned char){9}, 1));
    KT_OK(kiln_device_copy(dev, NULL, KILN_COPY_DEVICE_TO_HOST, dst, d, n));
    KT_OK(kiln_event_record(dev, ev, NULL));
    KT_OK(kiln_event_synchronize(dev, ev));
    KT_CHECK(dst[0] == 9 && dst[n - 1] == 9);
  } else {
    KT_CHECK(!"allocation failed");
  }
  kiln_device_free(dev, d);
  free(src);
  free(dst);
  kiln_stream_destroy(dev, s);
  kiln_event_destroy(dev, ev);
  kiln_device_destroy(dev);
}

KT_TEST(event_cross_stream_wait) {
  kiln_device_t* dev = open_device(0);
  if (!dev) return;
  size_t n = 3 * MIB;
  unsigned char* src = malloc(n);
  unsigned char* out = malloc(n);
  void *x = NULL, *y = NULL, *z = NULL;
  KT_OK(kiln_device_alloc(dev, n, &x));
  KT_OK(kiln_device_alloc(dev, n, &y));
  KT_OK(kiln_device_alloc(dev, n, &z));
  kiln_stream_t *a = NULL, *b = NULL;
  KT_OK(kiln_stream_create(dev, &a));
  KT_OK(kiln_stream_create(dev, &b));
  kiln_event_t* ev = NULL;
  KT_OK(kiln_event_create(dev, &ev));
  if (src && out && x && y && z && a && b && ev) {
    for (int round = 0; round < 3; round++) {
      fill_random(src, n);
      memset(out, 0, n);
      KT_OK(kiln_device_fill(dev, NULL, y, n, &(unsigned char){0}, 1));
      KT_OK(kiln_device_synchronize(dev));
      /* stream A: slow start, then produce y from src via x */
      if (has_host_fn(dev)) KT_OK(kiln_stream_launch_host_fn(dev, a, host_slow_fn, NULL));
      KT_OK(kiln_device_copy(dev, a, KILN_COPY_HOST_TO_DEVICE, x, src, n));
      KT_OK(kiln_device_copy(dev, a, KILN_COPY_DEVICE_TO_DEVICE, y, x, n));
      KT_OK(kiln_event_record(dev, ev, a));
      /* stream B: consume y once A's event completes */
      KT_OK(kiln_stream_wait_event(dev, b, ev));
      KT_OK(kiln_device_copy(dev, b, KILN_COPY_DEVICE_TO_DEVICE, z, y, n));
      KT_OK(kiln_device_copy(dev, b, KILN_COPY_DEVICE_TO_HOST, out, z, n));
      KT_OK(kiln_stream_synchronize(dev, b)); /* only B: the event must have carried the order */
      KT_CHECK(memcmp(src, out, n) == 0);
      int done = -1;
      KT_OK(kiln_event_query(dev, ev, &done));
      KT_CHECK(done == 1);
      KT_OK(kiln_stream_synchronize(dev, a));
    }
    /* waiting on a never-recorded event does not block */
    kiln_event_t* fresh = NULL;
    KT_OK(kiln_event_create(dev, &fresh));
    KT_OK(kiln_stream_wait_event(dev, b, fresh));
    KT_OK(kiln_device_fill(dev, b, z, 64, &(uint16_t){0x4242}, 2));
    KT_OK(kiln_device_copy(dev, b, KILN_COPY_DEVICE_TO_HOST, out, z, 64));
    KT_OK(kiln_stream_synchronize(dev, b));
    KT_CHECK(out[0] == 0x42 && out[63] == 0x42);
    kiln_event_destroy(dev, fresh);
  } else {
    KT_CHECK(!"setup failed");
  }
  kiln_event_destroy(dev, ev);
  kiln_stream_destroy(dev, a);
  kiln_stream_destroy(dev, b);
  kiln_device_free(dev, x);
  kiln_device_free(dev, y);
  kiln_device_free(dev, z);
  free(src);
  free(out);
  kiln_device_destroy(dev);
}

KT_TEST(device_synchronize_all_streams) {
  kiln_device_t* dev = open_device(0);
  if (!dev) return;
  enum { NS = 4 };
  size_t n = 1 * MIB;
  kiln_stream_t* s[NS] = {0};
  void* d[NS] = {0};
  unsigned char* src[NS] = {0};
  unsigned char* dst[NS] = {0};
  int ok = 1;
  for (int i = 0; i < NS && ok; i++) {
    ok = kiln_stream_create(dev, &s[i]) == KILN_OK && kiln_device_alloc(dev, n, &d[i]) == KILN_OK;
    src[i] = malloc(n);
    dst[i] = calloc(1, n);
    ok = ok && src[i] && dst[i];
  }
  KT_CHECK(ok);
  if (ok) {
    for (int i = 0; i < NS; i++) {
      fill_random(src[i], n);
      if (has_host_fn(dev) && i == 0) KT_OK(kiln_stream_launch_host_fn(dev, s[i], host_slow_fn, NULL));
      KT_OK(kiln_device_copy(dev, s[i], KILN_COPY_HOST_TO_DEVICE, d[i], src[i], n));
      KT_OK(kiln_device_copy(dev, s[i], KILN_COPY_DEVICE_TO_HOST, dst[i], d[i], n));
    }
    KT_OK(kiln_device_synchronize(dev));
    for (int i = 0; i < NS; i++) {
      int idle = -1;
      KT_OK(kiln_stream_query(dev, s[i], &idle));
      KT_CHECK(idle == 1);
      KT_CHECK(memcmp(src[i], dst[i], n) == 0);
    }
  }
  for (int i = 0; i < NS; i++) {
    if (s[i]) kiln_stream_destroy(dev, s[i]);
    kiln_device_free(dev, d[i]);
    free(src[i]);
    free(dst[i]);
  }
  kiln_device_destroy(dev);
}

typedef struct thread_job {
  kiln_device_t* dev;
  int ok;
} thread_job_t;

static void* thread_round_trips(void* arg) {
  thread_job_t* job = arg;
  kiln_stream_t* s = NULL;
  job->ok = kiln_stream_create(job->dev, &s) == KILN_OK;
  unsigned char src[1000], dst[1000];
  for (int i = 0; i < 1000; i++) src[i] = (unsigned char)(i * 31 + (int)(uintptr_t)arg);
  for (int it = 0; it < 50 && job->ok; it++) {
    void* d = NULL;
    job->ok = kiln_device_alloc(job->dev, sizeof(src), &d) == KILN_OK &&
              kiln_device_copy(job->dev, s, KILN_COPY_HOST_TO_DEVICE, d, src, sizeof(src)) == KILN_OK &&
              kiln_device_copy(job->dev, s, KILN_COPY_DEVICE_TO_HOST, dst, d, sizeof(src)) == KILN_OK &&
              kiln_stream_synchronize(job->dev, s) == KILN_OK && memcmp(src, dst, sizeof(src)) == 0;
    kiln_device_free(job->dev, d);
  }
  if (s) kiln_stream_destroy(job->dev, s);
  return NULL;
}

KT_TEST(streams_from_several_host_threads) {
  kiln_device_t* dev = open_device(0);
  if (!dev) return;
  enum { NT = 4 };
  pthread_t th[NT];
  thread_job_t jobs[NT];
  int started[NT];
  for (int i = 0; i < NT; i++) {
    jobs[i].dev = dev;
    jobs[i].ok = 0;
    started[i] = pthread_create(&th[i], NULL, thread_round_trips, &jobs[i]) == 0;
  }
  for (int i = 0; i < NT; i++) {
    if (started[i]) pthread_join(th[i], NULL);
    KT_CHECK(started[i] && jobs[i].ok);
  }
  if (has_stats(dev)) KT_CHECK(get_stats(dev).allocated == 0);
  kiln_device_destroy(dev);
}

/* ---- memory statistics and limits --------------------------------------------------------- */

KT_TEST(memory_stats_consistency) {
  kiln_device_t* dev = open_device(0);
  if (!dev) return;
  if (!has_stats(dev)) {
    kiln_memory_stats_t st;
    memset(&st, 0, sizeof(st));
    st.struct_size = sizeof(st);
    KT_FAILS(KILN_ERROR_UNIMPLEMENTED, kiln_device_memory_stats(dev, &st));
    kiln_device_destroy(dev);
    return;
  }
  kiln_memory_stats_t s0 = get_stats(dev);
  KT_CHECK(s0.reserved >= s0.allocated);
  KT_CHECK(s0.peak_allocated >= s0.allocated && s0.peak_reserved >= s0.reserved);
  void *p = NULL, *q = NULL;
  KT_OK(kiln_device_alloc(dev, MIB, &p));
  kiln_memory_stats_t s1 = get_stats(dev);
  KT_CHECK(s1.allocated >= s0.allocated + MIB);
  KT_CHECK(s1.reserved >= s1.allocated);
  KT_CHECK(s1.peak_allocated >= s1.allocated && s1.peak_reserved >= s1.reserved);
  KT_CHECK(s1.num_allocs == s0.num_allocs + 1);
  KT_OK(kiln_device_alloc(dev, 2 * MIB, &q));
  kiln_memory_stats_t s2 = get_stats(dev);
  KT_CHECK(s2.allocated >= s1.allocated + 2 * MIB);
  KT_CHECK(s2.peak_allocated >= s2.allocated);
  kiln_device_free(dev, q);
  kiln_memory_stats_t s3 = get_stats(dev);
  KT_CHECK(s3.allocated == s1.allocated);
  KT_CHECK(s3.num_frees == s0.num_frees + 1);
  KT_CHECK(s3.peak_allocated >= s2.allocated); /* the peak remembers */
  KT_CHECK(s3.reserved >= s3.allocated);
  KT_OK(kiln_device_memory_reset_peak(dev));
  kiln_memory_stats_t s4 = get_stats(dev);
  KT_CHECK(s4.peak_allocated == s4.allocated);
  KT_CHECK(s4.peak_reserved == s4.reserved);
  kiln_device_free(dev, p);
  kiln_memory_stats_t s5 = get_stats(dev);
  KT_CHECK(s5.allocated == s0.allocated);
  KT_CHECK(s5.num_allocs == s0.num_allocs + 2 && s5.num_frees == s0.num_frees + 2);
  KT_CHECK(s5.num_cache_hits <= s5.num_allocs);
  KT_OK(kiln_device_memory_empty_cache(dev));
  kiln_memory_stats_t s6 = get_stats(dev);
  KT_CHECK(s6.allocated == s0.allocated && s6.reserved >= s6.allocated);
  KT_CHECK(s6.reserved <= s5.reserved);
  /* struct_size honored: an old caller's smaller struct is not overrun */
  union {
    kiln_memory_stats_t s;
    unsigned char bytes[sizeof(kiln_memory_stats_t)];
  } u;
  memset(&u, 0xEE, sizeof(u));
  size_t old_size = offsetof(kiln_memory_stats_t, peak_allocated);
  u.s.struct_size = old_size;
  KT_OK(kiln_device_memory_stats(dev, &u.s));
  int untouched = 1;
  for (size_t i = old_size; i < sizeof(u); i++) untouched = untouched && u.bytes[i] == 0xEE;
  KT_CHECK(untouched);
  KT_CHECK(u.s.allocated == s0.allocated);
  kiln_device_destroy(dev);
}

KT_TEST(memory_limit_enforced) {
  kiln_device_t* dev = open_device(MIB);
  if (!dev) return;
  kiln_device_props_t p = get_props(dev);
  KT_CHECK(p.memory_limit != 0 && p.memory_limit <= MIB);
  void* big = (void*)&big;
  kiln_error(KILN_ERROR_INTERNAL, "%s", ""); /* clear this thread's message */
  KT_FAILS(KILN_ERROR_OUT_OF_MEMORY, kiln_device_alloc(dev, 2 * MIB, &big));
  KT_CHECK(kiln_status_message()[0] != '\0');
  KT_CHECK(big == NULL);
  KT_FAILS(KILN_ERROR_OUT_OF_MEMORY, kiln_device_alloc(dev, SIZE_MAX / 2, &big));
  /* the device still works: allocate, copy, free, repeatedly, within the limit */
  int ok = 1;
  for (int i = 0; i < 100 && ok; i++) {
    void* d = NULL;
    ok = kiln_device_alloc(dev, 256 * 1024, &d) == KILN_OK && d != NULL;
    kiln_device_free(dev, d);
  }
  KT_CHECK(ok);
  KT_CHECK(round_trip(dev, NULL, 64 * 1024, 0, 0));
  /* memory held counts against the limit */
  void* half = NULL;
  KT_OK(kiln_device_alloc(dev, 600 * 1024, &half));
  void* more = NULL;
  KT_FAILS(KILN_ERROR_OUT_OF_MEMORY, kiln_device_alloc(dev, 600 * 1024, &more));
  kiln_device_free(dev, half);
  KT_OK(kiln_device_alloc(dev, 600 * 1024, &more));
  kiln_device_free(dev, more);
  if (has_stats(dev)) KT_CHECK(get_stats(dev).allocated == 0);
  kiln_device_destroy(dev);
}

/* ---- invalid arguments -------------------------------------------------------------------- */

KT_TEST(invalid_arguments) {
  kiln_device_t* dev = open_device(0);
  if (!dev) return;
  void* d = NULL;
  KT_OK(kiln_device_alloc(dev, 64, &d));
  unsigned char host[64] = {0};
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_device_copy(dev, NULL, KILN_COPY_HOST_TO_DEVICE, NULL, host, 64));
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_device_copy(dev, NULL, KILN_COPY_HOST_TO_DEVICE, d, NULL, 64));
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_device_copy(dev, NULL, KILN_COPY_DEVICE_TO_HOST, NULL, d, 64));
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT,
           kiln_device_copy(dev, NULL, (kiln_copy_kind_t)7, d, host, 64));
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT,
           kiln_device_copy(dev, NULL, (kiln_copy_kind_t)-1, d, host, 64));
  KT_CHECK(kiln_status_message()[0] != '\0');
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_device_alloc(dev, 64, NULL));
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_device_props(dev, NULL));
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_stream_create(dev, NULL));
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_stream_query(dev, NULL, NULL));
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_event_create(dev, NULL));
  void* other = NULL;
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_device_alloc(NULL, 64, &other));
  KT_CHECK(other == NULL);
  /* the device is intact after the rejected calls */
  KT_OK(kiln_device_copy(dev, NULL, KILN_COPY_HOST_TO_DEVICE, d, host, 64));
  KT_OK(kiln_device_synchronize(dev));
  kiln_device_free(dev, d);
  kiln_device_destroy(dev);
}

/* ---- compute slots ------------------------------------------------------------------------ */

static int has_compute(kiln_device_t* dev) { return KILN_HAL_HAS(dev->vtable, prepare); }

static void sleep_20ms_fn(void* user) {
  (void)user;
  sleep_ms(20);
}

/* y = gather(x * 2 + 1, 0, idx): x f32 [n], idx i64 [m]. */
static kiln_exec_t* small_program(int64_t n, int64_t m) {
  kiln_graph_t* g;
  int x, idx, two, one, t, y, z;
  int64_t xs[1] = {n}, is[1] = {m};
  kiln_exec_t* e = NULL;
  if (kiln_graph_create(&g) != KILN_OK) return NULL;
  kiln_graph_input(g, KILN_DTYPE_F32, 1, xs, &x);
  kiln_graph_input(g, KILN_DTYPE_I64, 1, is, &idx);
  kiln_graph_scalar(g, 2.0, KILN_DTYPE_F32, &two);
  kiln_graph_scalar(g, 1.0, KILN_DTYPE_F32, &one);
  kiln_graph_binary(g, KILN_BINARY_MUL, x, two, 1.0, KILN_DTYPE_F32, &t);
  kiln_graph_binary(g, KILN_BINARY_ADD, t, one, 1.0, KILN_DTYPE_F32, &y);
  kiln_graph_gather(g, y, 0, idx, &z);
  kiln_graph_output(g, z);
  kiln_graph_output(g, y);
  KT_OK(kiln_graph_compile(g, &e));
  kiln_graph_destroy(g);
  return e;
}

static kiln_status_t dummy_prepare(kiln_device_t* dev, const kiln_exec_t* program,
                                   kiln_executable_t** out) {
  (void)dev;
  (void)program;
  *out = NULL;
  return KILN_ERROR_UNIMPLEMENTED;
}

KT_TEST(compute_slots_all_or_none) {
  kiln_device_t* dev = open_device(0);
  if (!dev) return;
  kiln_device_vtable_t vt = *dev->vtable;
  if (has_compute(dev)) {
    vt.supports = NULL; /* three of four */
    KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_hal_validate(&vt));
  } else {
    KT_OK(kiln_hal_validate(&vt)); /* none of four */
    vt.struct_size = sizeof vt;
    vt.prepare = dummy_prepare; /* one of four */
    KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_hal_validate(&vt));
  }
  vt = *dev->vtable;
  KT_OK(kiln_hal_validate(&vt));
  kiln_device_destroy(dev);
}

KT_TEST(compute_execute_async_in_order) {
  kiln_device_t* dev = open_device(0);
  if (!dev) return;
  enum { N = 4096, M = 64, RUNS = 40 };
  kiln_exec_t* e = small_program(N, M);
  KT_CHECK(e != NULL);
  if (!has_compute(dev)) { /* a device without compute says so */
    kiln_executable_t* x = (kiln_executable_t*)1;
    KT_FAILS(KILN_ERROR_UNIMPLEMENTED, kiln_device_prepare(dev, e, &x));
    KT_CHECK(x == NULL);
    char why[128];
    KT_FAILS(KILN_ERROR_UNIMPLEMENTED, kiln_device_supports(dev, e, why, sizeof why));
    KT_CHECK(why[0] != 0);
    kiln_exec_destroy(e);
    kiln_device_destroy(dev);
    return;
  }
  char why[128] = "x";
  KT_OK(kiln_device_supports(dev, e, why, sizeof why));
  kiln_executable_t* exe = NULL;
  KT_OK(kiln_device_prepare(dev, e, &exe));
  float* hx = malloc(sizeof(float) * N);
  int64_t* hi = malloc(sizeof(int64_t) * M);
  float* hz = malloc(sizeof(float) * M * RUNS);
  float* hy = malloc(sizeof(float) * N);
  for (int i = 0; i < N; i++) hx[i] = (float)i * 0.25f;
  for (int i = 0; i < M; i++) hi[i] = (i * 37) % N;
  void *dx, *di, *dy, *dz, *ws = NULL;
  KT_OK(kiln_device_alloc(dev, sizeof(float) * N, &dx));
  KT_OK(kiln_device_alloc(dev, sizeof(int64_t) * M, &di));
  KT_OK(kiln_device_alloc(dev, sizeof(float) * N, &dy));
  KT_OK(kiln_device_alloc(dev, sizeof(float) * M * RUNS, &dz));
  int64_t wsb = kiln_exec_workspace_size(e);
  if (wsb > 0) KT_OK(kiln_device_alloc(dev, (size_t)wsb, &ws));
  kiln_stream_t* s;
  KT_OK(kiln_stream_create(dev, &s));
  KT_OK(kiln_device_copy(dev, s, KILN_COPY_HOST_TO_DEVICE, dx, hx, sizeof(float) * N));
  KT_OK(kiln_device_copy(dev, s, KILN_COPY_HOST_TO_DEVICE, di, hi, sizeof(int64_t) * M));
  /* RUNS executions queued back to back, each into its own slice of dz, before one wait */
  for (int r = 0; r < RUNS; r++) {
    const void* ins[2] = {dx, di};
    void* outs[2] = {(char*)dz + sizeof(float) * M * (size_t)r, dy};
    kiln_execute_args_t a = {sizeof a, 2, ins, 2, outs, ws, (uint64_t)(wsb > 0 ? wsb : 0), 0};
    KT_OK(kiln_device_execute(dev, s, exe, &a));
  }
  KT_OK(kiln_device_copy(dev, s, KILN_COPY_DEVICE_TO_HOST, hz, dz, sizeof(float) * M * RUNS));
  KT_OK(kiln_device_copy(dev, s, KILN_COPY_DEVICE_TO_HOST, hy, dy, sizeof(float) * N));
  KT_OK(kiln_stream_synchronize(dev, s));
  int bad = 0;
  for (int r = 0; r < RUNS; r++)
    for (int i = 0; i < M; i++) bad += hz[r * M + i] != hx[hi[i]] * 2.0f + 1.0f;
  for (int i = 0; i < N; i++) bad += hy[i] != hx[i] * 2.0f + 1.0f;
  KT_CHECK(bad == 0);
  /* KILN_EXECUTE_WAIT behind queued work still runs in stream order: a slow host function,
   * then new inputs, then the execute (which must see them) */
  if (has_host_fn(dev)) {
    for (int i = 0; i < N; i++) hx[i] = (float)(N - i);
    KT_OK(kiln_stream_launch_host_fn(dev, s, sleep_20ms_fn, NULL));
    KT_OK(kiln_device_copy(dev, s, KILN_COPY_HOST_TO_DEVICE, dx, hx, sizeof(float) * N));
    const void* wins[2] = {dx, di};
    void* wouts[2] = {dz, dy};
    kiln_execute_args_t w = {sizeof w, 2, wins, 2, wouts, ws, (uint64_t)(wsb > 0 ? wsb : 0),
                             KILN_EXECUTE_WAIT};
    KT_OK(kiln_device_execute(dev, s, exe, &w));
    KT_OK(kiln_device_copy(dev, s, KILN_COPY_DEVICE_TO_HOST, hy, dy, sizeof(float) * N));
    KT_OK(kiln_stream_synchronize(dev, s));
    bad = 0;
    for (int i = 0; i < N; i++) bad += hy[i] != hx[i] * 2.0f + 1.0f;
    KT_CHECK(bad == 0);
    /* on an idle stream too (a device may run it on this thread) */
    for (int i = 0; i < N; i++) hx[i] = (float)i;
    KT_OK(kiln_device_copy(dev, s, KILN_COPY_HOST_TO_DEVICE, dx, hx, sizeof(float) * N));
    KT_OK(kiln_stream_synchronize(dev, s));
    KT_OK(kiln_device_execute(dev, s, exe, &w));
    KT_OK(kiln_stream_synchronize(dev, s));
    KT_OK(kiln_device_copy(dev, s, KILN_COPY_DEVICE_TO_HOST, hy, dy, sizeof(float) * N));
    KT_OK(kiln_stream_synchronize(dev, s));
    bad = 0;
    for (int i = 0; i < N; i++) bad += hy[i] != hx[i] * 2.0f + 1.0f;
    KT_CHECK(bad == 0);
  }
  /* arguments that do not fit: refused at once */
  const void* ins[2] = {dx, di};
  void* outs[2] = {dz, dy};
  kiln_execute_args_t a = {sizeof a, 1, ins, 2, outs, ws, (uint64_t)(wsb > 0 ? wsb : 0), 0};
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_device_execute(dev, s, exe, &a));
  a.n_inputs = 2;
  a.outputs = NULL;
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_device_execute(dev, s, exe, &a));
  a.outputs = outs;
  a.struct_size = 8;
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_device_execute(dev, s, exe, &a));
  kiln_stream_destroy(dev, s);
  kiln_executable_destroy(dev, exe);
  kiln_device_free(dev, dx);
  kiln_device_free(dev, di);
  kiln_device_free(dev, dy);
  kiln_device_free(dev, dz);
  if (ws) kiln_device_free(dev, ws);
  free(hx);
  free(hi);
  free(hz);
  free(hy);
  kiln_exec_destroy(e);
  kiln_device_destroy(dev);
}

KT_TEST(compute_errors_surface_at_synchronize) {
  kiln_device_t* dev = open_device(0);
  if (!dev) return;
  if (!has_compute(dev)) {
    kiln_device_destroy(dev);
    return; /* compute_execute_async_in_order checked the UNIMPLEMENTED answer */
  }
  kiln_exec_t* e = small_program(8, 2);
  kiln_executable_t* exe;
  KT_OK(kiln_device_prepare(dev, e, &exe));
  float hx[8] = {0};
  int64_t hi[2] = {1, 99}; /* 99 is outside dim 0 */
  void *dx, *di, *dy, *dz, *ws = NULL;
  KT_OK(kiln_device_alloc(dev, sizeof hx, &dx));
  KT_OK(kiln_device_alloc(dev, sizeof hi, &di));
  KT_OK(kiln_device_alloc(dev, sizeof hx, &dy));
  KT_OK(kiln_device_alloc(dev, 2 * sizeof(float), &dz));
  int64_t wsb = kiln_exec_workspace_size(e);
  if (wsb > 0) KT_OK(kiln_device_alloc(dev, (size_t)wsb, &ws));
  KT_OK(kiln_device_copy(dev, NULL, KILN_COPY_HOST_TO_DEVICE, dx, hx, sizeof hx));
  KT_OK(kiln_device_copy(dev, NULL, KILN_COPY_HOST_TO_DEVICE, di, hi, sizeof hi));
  const void* ins[2] = {dx, di};
  void* outs[2] = {dz, dy};
  kiln_execute_args_t a = {sizeof a, 2, ins, 2, outs, ws, (uint64_t)(wsb > 0 ? wsb : 0), 0};
  KT_OK(kiln_device_execute(dev, NULL, exe, &a)); /* queued: the error is the run's */
  KT_FAILS(KILN_ERROR_OUT_OF_RANGE, kiln_device_synchronize(dev));
  KT_CHECK(strstr(kiln_status_message(), "gather") != NULL);
  KT_OK(kiln_device_synchronize(dev)); /* reported once */
  a.flags = KILN_EXECUTE_WAIT; /* the same when the device runs it on this thread */
  KT_OK(kiln_device_execute(dev, NULL, exe, &a));
  KT_FAILS(KILN_ERROR_OUT_OF_RANGE, kiln_stream_synchronize(dev, NULL));
  KT_CHECK(strstr(kiln_status_message(), "gather") != NULL);
  KT_OK(kiln_stream_synchronize(dev, NULL));
  a.flags = 0;
  hi[1] = 0;
  KT_OK(kiln_device_copy(dev, NULL, KILN_COPY_HOST_TO_DEVICE, di, hi, sizeof hi));
  KT_OK(kiln_device_execute(dev, NULL, exe, &a));
  KT_OK(kiln_stream_synchronize(dev, NULL));
  kiln_executable_destroy(dev, exe);
  kiln_device_free(dev, dx);
  kiln_device_free(dev, di);
  kiln_device_free(dev, dy);
  kiln_device_free(dev, dz);
  if (ws) kiln_device_free(dev, ws);
  kiln_exec_destroy(e);
  kiln_device_destroy(dev);
}

KT_TEST(unknown_driver_not_found) {
  kiln_device_t* dev = NULL;
  KT_FAILS(KILN_ERROR_NOT_FOUND, kiln_device_create_by_name("no-such-driver", 0, NULL, &dev));
  KT_CHECK(kiln_status_message()[0] != '\0');
}

/* Usage: hal_conformance <driver>. */
int main(int argc, char** argv) {
  if (argc < 2 || !argv[1][0]) {
    fprintf(stderr, "usage: %s <driver>   (e.g. cpu, ref)\n", argv[0]);
    return 2;
  }
  g_driver = argv[1];
  char title[128];
  snprintf(title, sizeof(title), "hal_conformance[%s]", g_driver);
  return kt_run_all(title);
}
