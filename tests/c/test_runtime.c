/* SPDX-License-Identifier: Apache-2.0 */
/* test_runtime.c - the runtime layer through its public API: status, byte parsing, registry,
 * dtypes, tensor descriptors. The default-registry tests come first and run in forked children
 * (the default registry reads the environment once per process, and a fork is only safe before
 * this process has started any device threads). */
#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kiln_test.h"

/* ---- default registry, in forked children --------------------------------------------------- */

typedef int (*child_fn)(void);

/* Runs fn in a child with KILN_DEVICES / KILN_MEMORY_LIMIT set; returns its exit status. */
static int run_in_child(const char* devices, const char* limit, child_fn fn) {
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    if (devices) setenv("KILN_DEVICES", devices, 1); else unsetenv("KILN_DEVICES");
    if (limit) setenv("KILN_MEMORY_LIMIT", limit, 1); else unsetenv("KILN_MEMORY_LIMIT");
    setenv("KILN_NUM_THREADS", "2", 1);
    int rc = fn();
    fflush(stderr);
    _exit(rc);
  }
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) return -1;
  if (!WIFEXITED(status)) return 100 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  return WEXITSTATUS(status);
}

static int device_name_is(kiln_device_t* dev, const char* name) {
  kiln_device_props_t p;
  memset(&p, 0, sizeof(p));
  p.struct_size = sizeof(p);
  return kiln_device_props(dev, &p) == KILN_OK && strcmp(p.name, name) == 0;
}

static int child_cpu_ref(void) {
  kiln_registry_t* reg = NULL;
  if (kiln_registry_default(&reg) != KILN_OK || !reg) return 1;
  if (kiln_registry_count(reg) != 2) return 2;
  kiln_device_t *d0 = NULL, *d1 = NULL, *d2 = NULL;
  if (kiln_registry_get(reg, 0, &d0) != KILN_OK || !device_name_is(d0, "cpu")) return 3;
  if (kiln_registry_get(reg, 1, &d1) != KILN_OK || !device_name_is(d1, "ref")) return 4;
  if (d0->index != 0 || d1->index != 1) return 5;
  if (kiln_registry_get(reg, 2, &d2) != KILN_ERROR_NOT_FOUND) return 6;
  kiln_registry_t* again = NULL;
  if (kiln_registry_default(&again) != KILN_OK || again != reg) return 7; /* built once */
  return 0;
}

static int child_unknown_driver(void) {
  kiln_registry_t* reg = NULL;
  kiln_status_t s = kiln_registry_default(&reg);
  if (s == KILN_OK) return 1;
  if (kiln_status_message()[0] == '\0') return 2;
  return 0;
}

static int child_ref_limit(void) {
  kiln_registry_t* reg = NULL;
  if (kiln_registry_default(&reg) != KILN_OK || kiln_registry_count(reg) != 1) return 1;
  kiln_device_t* dev = NULL;
  if (kiln_registry_get(reg, 0, &dev) != KILN_OK || !device_name_is(dev, "ref")) return 2;
  void* p = NULL;
  if (kiln_device_alloc(dev, 2u << 20, &p) != KILN_ERROR_OUT_OF_MEMORY) return 3;
  if (kiln_device_alloc(dev, 1024, &p) != KILN_OK || !p) return 4;
  kiln_device_free(dev, p);
  return 0;
}

static int child_bad_limit(void) {
  kiln_registry_t* reg = NULL;
  if (kiln_registry_default(&reg) != KILN_ERROR_INVALID_ARGUMENT) return 1;
  /* the message names the variable and the bad value */
  const char* msg = kiln_status_message();
  if (!strstr(msg, "KILN_MEMORY_LIMIT") || !strstr(msg, "12Q")) {
    fprintf(stderr, "  message: '%s'\n", msg);
    return 2;
  }
  return 0;
}

static int child_default_is_cpu(void) {
  kiln_registry_t* reg = NULL;
  if (kiln_registry_default(&reg) != KILN_OK || kiln_registry_count(reg) != 1) return 1;
  kiln_device_t* dev = NULL;
  if (kiln_registry_get(reg, 0, &dev) != KILN_OK || !device_name_is(dev, "cpu")) return 2;
  return 0;
}

KT_TEST(default_registry_cpu_ref) {
  int rc = run_in_child("cpu,ref", NULL, child_cpu_ref);
  if (rc) fprintf(stderr, "  child exit %d\n", rc);
  KT_CHECK(rc == 0);
}

KT_TEST(default_registry_unknown_driver_fails) {
  int rc = run_in_child("gpu", NULL, child_unknown_driver);
  if (rc) fprintf(stderr, "  child exit %d\n", rc);
  KT_CHECK(rc == 0);
}

KT_TEST(default_registry_memory_limit) {
  int rc = run_in_child("ref", "1M", child_ref_limit);
  if (rc) fprintf(stderr, "  child exit %d\n", rc);
  KT_CHECK(rc == 0);
  rc = run_in_child("ref", "12Q", child_bad_limit);
  if (rc) fprintf(stderr, "  child exit %d (malformed KILN_MEMORY_LIMIT)\n", rc);
  KT_CHECK(rc == 0);
}

KT_TEST(default_registry_defaults_to_cpu) {
  int rc = run_in_child(NULL, NULL, child_default_is_cpu);
  if (rc) fprintf(stderr, "  child exit %d\n", rc);
  KT_CHECK(rc == 0);
}

/* ---- status ----------------------------------------------------------------------------------- */

KT_TEST(status_error_sets_message) {
  kiln_status_t s = kiln_error(KILN_ERROR_NOT_FOUND, "thing %d of %s", 42, "seven");
  KT_CHECK(s == KILN_ERROR_NOT_FOUND);
  KT_CHECK(strcmp(kiln_status_message(), "thing 42 of seven") == 0);
  s = kiln_error(KILN_ERROR_OUT_OF_MEMORY, "second");
  KT_CHECK(s == KILN_ERROR_OUT_OF_MEMORY);
  KT_CHECK(strcmp(kiln_status_message(), "second") == 0);
}

KT_TEST(status_message_truncated) {
  char big[1200];
  memset(big, 'x', sizeof(big) - 1);
  big[sizeof(big) - 1] = '\0';
  kiln_error(KILN_ERROR_INTERNAL, "%s", big);
  const char* m = kiln_status_message();
  size_t len = strlen(m);
  KT_CHECK(len == 511);
  KT_CHECK(strspn(m, "x") == len);
}

KT_TEST(status_code_names) {
  KT_CHECK(strcmp(kiln_status_code_name(KILN_ERROR_OUT_OF_MEMORY), "OUT_OF_MEMORY") == 0);
  KT_CHECK(strcmp(kiln_status_code_name(KILN_ERROR_INVALID_ARGUMENT), "INVALID_ARGUMENT") == 0);
  KT_CHECK(strcmp(kiln_status_code_name(KILN_ERROR_NOT_FOUND), "NOT_FOUND") == 0);
  KT_CHECK(strcmp(kiln_status_code_name(KILN_ERROR_UNIMPLEMENTED), "UNIMPLEMENTED") == 0);
  KT_CHECK(strcmp(kiln_status_code_name(KILN_ERROR_FAILED_PRECONDITION), "FAILED_PRECONDITION") == 0);
  KT_CHECK(strcmp(kiln_status_code_name(KILN_ERROR_OUT_OF_RANGE), "OUT_OF_RANGE") == 0);
  KT_CHECK(strcmp(kiln_status_code_name(KILN_ERROR_DATA_LOSS), "DATA_LOSS") == 0);
  KT_CHECK(strcmp(kiln_status_code_name(KILN_ERROR_INTERNAL), "INTERNAL") == 0);
  KT_CHECK(strcmp(kiln_status_code_name(KILN_OK), "OK") == 0);
  /* distinct names, never NULL, also for unknown codes */
  for (int a = 0; a <= KILN_ERROR_OUT_OF_RANGE; a++) {
    for (int b = a + 1; b <= KILN_ERROR_OUT_OF_RANGE; b++) {
      KT_CHECK(strcmp(kiln_status_code_name(a), kiln_status_code_name(b)) != 0);
    }
  }
  KT_CHECK(kiln_status_code_name(999) != NULL && kiln_status_code_name(999)[0] != '\0');
  KT_CHECK(kiln_status_code_name(-5) != NULL);
}

typedef struct msg_job {
  pthread_barrier_t* barrier;
  const char* text;
  int fresh_empty;
  int sees_own;
} msg_job_t;

static void* msg_thread(void* arg) {
  msg_job_t* job = arg;
  job->fresh_empty = kiln_status_message()[0] == '\0';
  kiln_error(KILN_ERROR_INTERNAL, "%s", job->text);
  pthread_barrier_wait(job->barrier); /* both have set their message */
  pthread_barrier_wait(job->barrier);
  job->sees_own = strcmp(kiln_status_message(), job->text) == 0;
  return NULL;
}

KT_TEST(status_message_per_thread) {
  kiln_error(KILN_ERROR_INTERNAL, "main thread message");
  pthread_barrier_t barrier;
  KT_CHECK(pthread_barrier_init(&barrier, NULL, 2) == 0);
  msg_job_t a = {&barrier, "message of thread A", 0, 0};
  msg_job_t b = {&barrier, "message of thread B", 0, 0};
  pthread_t ta, tb;
  int ok_a = pthread_create(&ta, NULL, msg_thread, &a) == 0;
  int ok_b = pthread_create(&tb, NULL, msg_thread, &b) == 0;
  KT_CHECK(ok_a && ok_b);
  if (ok_a) pthread_join(ta, NULL);
  if (ok_b) pthread_join(tb, NULL);
  pthread_barrier_destroy(&barrier);
  KT_CHECK(a.fresh_empty && b.fresh_empty);
  KT_CHECK(a.sees_own && b.sees_own);
  KT_CHECK(strcmp(kiln_status_message(), "main thread message") == 0);
}

/* ---- kiln_parse_bytes ------------------------------------------------------------------------- */

KT_TEST(parse_bytes_valid) {
  uint64_t v = 1;
  KT_OK(kiln_parse_bytes("512", &v));
  KT_CHECK(v == 512);
  KT_OK(kiln_parse_bytes("0", &v));
  KT_CHECK(v == 0);
  KT_OK(kiln_parse_bytes("64K", &v));
  KT_CHECK(v == 64ull * 1024);
  KT_OK(kiln_parse_bytes("1M", &v));
  KT_CHECK(v == 1ull << 20);
  KT_OK(kiln_parse_bytes("1.5G", &v));
  KT_CHECK(v == 3ull << 29);
  KT_OK(kiln_parse_bytes("2G", &v));
  KT_CHECK(v == 2ull << 30);
}

KT_TEST(parse_bytes_invalid) {
  static const char* bad[] = {"", "abc", "-1", "12Q", "K", "1.5.5M"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    uint64_t v = 77;
    kiln_status_t s = kiln_parse_bytes(bad[i], &v);
    if (s != KILN_ERROR_INVALID_ARGUMENT) fprintf(stderr, "  '%s' accepted\n", bad[i]);
    KT_CHECK(s == KILN_ERROR_INVALID_ARGUMENT);
  }
  uint64_t v = 0;
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_parse_bytes(NULL, &v));
}

/* ---- registry --------------------------------------------------------------------------------- */

KT_TEST(registry_add_get_count) {
  kiln_registry_t* reg = NULL;
  KT_OK(kiln_registry_create(NULL, &reg));
  if (!reg) return;
  KT_CHECK(kiln_registry_count(reg) == 0);
  kiln_device_t *cpu = NULL, *ref = NULL;
  KT_OK(kiln_cpu_device_create(NULL, NULL, &cpu));
  KT_OK(kiln_ref_device_create(0, NULL, &ref));
  int32_t i0 = -7, i1 = -7;
  if (cpu) KT_OK(kiln_registry_add(reg, cpu, &i0));
  if (ref) KT_OK(kiln_registry_add(reg, ref, &i1));
  KT_CHECK(i0 == 0 && i1 == 1);
  KT_CHECK(kiln_registry_count(reg) == 2);
  kiln_device_t* got = NULL;
  KT_OK(kiln_registry_get(reg, 0, &got));
  KT_CHECK(got == cpu && got && got->index == 0 && device_name_is(got, "cpu"));
  KT_OK(kiln_registry_get(reg, 1, &got));
  KT_CHECK(got == ref && got && got->index == 1 && device_name_is(got, "ref"));
  KT_FAILS(KILN_ERROR_NOT_FOUND, kiln_registry_get(reg, 2, &got));
  KT_FAILS(KILN_ERROR_NOT_FOUND, kiln_registry_get(reg, -1, &got));
  KT_CHECK(kiln_status_message()[0] != '\0');
  kiln_registry_destroy(reg);
  kiln_registry_destroy(NULL); /* no-op */
}

/* A fake driver that does nothing but count its destruction. */
static int g_fake_destroyed;

typedef struct fake_device {
  kiln_device_t base;
  int alive;
} fake_device_t;

static void fake_destroy(kiln_device_t* d) {
  fake_device_t* f = (fake_device_t*)d;
  g_fake_destroyed += f->alive;
  f->alive = 0;
}
static kiln_status_t fake_props(kiln_device_t* d, kiln_device_props_t* p) {
  (void)d;
  size_t keep = p->struct_size;
  memset(p, 0, keep < sizeof(*p) ? keep : sizeof(*p));
  p->struct_size = keep;
  strcpy(p->name, "fake");
  p->alignment = 64;
  return KILN_OK;
}
static kiln_status_t fake_alloc(kiln_device_t* d, size_t n, void** out) {
  (void)d;
  (void)n;
  *out = NULL;
  return kiln_error(KILN_ERROR_OUT_OF_MEMORY, "fake: out of memory");
}
static void fake_free(kiln_device_t* d, void* p) { (void)d; (void)p; }
static kiln_status_t fake_copy(kiln_device_t* d, kiln_stream_t* s, kiln_copy_kind_t k, void* dst,
                               const void* src, size_t n) {
  (void)d; (void)s; (void)k; (void)dst; (void)src; (void)n;
  return KILN_OK;
}
static kiln_status_t fake_fill(kiln_device_t* d, kiln_stream_t* s, void* dst, size_t n,
                               const void* p, size_t ps) {
  (void)d; (void)s; (void)dst; (void)n; (void)p; (void)ps;
  return KILN_OK;
}
static kiln_status_t fake_stream_create(kiln_device_t* d, kiln_stream_t** out) {
  (void)d;
  *out = NULL;
  return kiln_error(KILN_ERROR_UNIMPLEMENTED, "fake: no streams");
}
static void fake_stream_destroy(kiln_device_t* d, kiln_stream_t* s) { (void)d; (void)s; }
static kiln_status_t fake_stream_sync(kiln_device_t* d, kiln_stream_t* s) { (void)d; (void)s; return KILN_OK; }
static kiln_status_t fake_stream_query(kiln_device_t* d, kiln_stream_t* s, int* idle) {
  (void)d; (void)s;
  *idle = 1;
  return KILN_OK;
}
static kiln_status_t fake_event_create(kiln_device_t* d, kiln_event_t** out) {
  (void)d;
  *out = NULL;
  return kiln_error(KILN_ERROR_UNIMPLEMENTED, "fake: no events");
}
static void fake_event_destroy(kiln_device_t* d, kiln_event_t* e) { (void)d; (void)e; }
static kiln_status_t fake_event_record(kiln_device_t* d, kiln_event_t* e, kiln_stream_t* s) {
  (void)d; (void)e; (void)s;
  return KILN_OK;
}
static kiln_status_t fake_wait_event(kiln_device_t* d, kiln_stream_t* s, kiln_event_t* e) {
  (void)d; (void)e; (void)s;
  return KILN_OK;
}
static kiln_status_t fake_event_sync(kiln_device_t* d, kiln_event_t* e) { (void)d; (void)e; return KILN_OK; }
static kiln_status_t fake_event_query(kiln_device_t* d, kiln_event_t* e, int* done) {
  (void)d; (void)e;
  *done = 1;
  return KILN_OK;
}
static kiln_status_t fake_sync(kiln_device_t* d) { (void)d; return KILN_OK; }

static const kiln_device_vtable_t fake_vtable = {
    .struct_size = sizeof(kiln_device_vtable_t),
    .destroy = fake_destroy,
    .query_props = fake_props,
    .alloc = fake_alloc,
    .free = fake_free,
    .copy = fake_copy,
    .fill = fake_fill,
    .stream_create = fake_stream_create,
    .stream_destroy = fake_stream_destroy,
    .stream_synchronize = fake_stream_sync,
    .stream_query = fake_stream_query,
    .event_create = fake_event_create,
    .event_destroy = fake_event_destroy,
    .event_record = fake_event_record,
    .stream_wait_event = fake_wait_event,
    .event_synchronize = fake_event_sync,
    .event_query = fake_event_query,
    .synchronize = fake_sync,
};

static void fake_init(fake_device_t* f, const kiln_device_vtable_t* vt) {
  memset(f, 0, sizeof(*f));
  f->base.vtable = vt;
  f->base.host_allocator = kiln_allocator_system();
  f->base.index = -1;
  f->alive = 1;
}

KT_TEST(registry_rejects_invalid_vtable) {
  kiln_registry_t* reg = NULL;
  KT_OK(kiln_registry_create(NULL, &reg));
  if (!reg) return;
  kiln_device_vtable_t broken = fake_vtable;
  broken.alloc = NULL;
  fake_device_t bad;
  fake_init(&bad, &broken);
  g_fake_destroyed = 0;
  int32_t idx = -7;
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_registry_add(reg, &bad.base, &idx));
  KT_CHECK(kiln_status_message()[0] != '\0');
  KT_CHECK(kiln_registry_count(reg) == 0);
  KT_CHECK(bad.base.index == -1);
  /* a valid device still goes in at index 0 */
  fake_device_t good;
  fake_init(&good, &fake_vtable);
  KT_OK(kiln_registry_add(reg, &good.base, &idx));
  KT_CHECK(idx == 0 && good.base.index == 0 && kiln_registry_count(reg) == 1);
  kiln_registry_destroy(reg);
  KT_CHECK(g_fake_destroyed == 1); /* only the device that was taken */
  KT_CHECK(good.alive == 0 && bad.alive == 1);
}

KT_TEST(registry_full) {
  kiln_registry_t* reg = NULL;
  KT_OK(kiln_registry_create(NULL, &reg));
  if (!reg) return;
  static fake_device_t devs[KILN_MAX_DEVICES + 1];
  g_fake_destroyed = 0;
  for (int i = 0; i < KILN_MAX_DEVICES; i++) {
    fake_init(&devs[i], &fake_vtable);
    int32_t idx = -7;
    KT_OK(kiln_registry_add(reg, &devs[i].base, &idx));
    KT_CHECK(idx == i);
  }
  KT_CHECK(kiln_registry_count(reg) == KILN_MAX_DEVICES);
  fake_init(&devs[KILN_MAX_DEVICES], &fake_vtable);
  int32_t idx = -7;
  KT_FAILS(KILN_ERROR_FAILED_PRECONDITION, kiln_registry_add(reg, &devs[KILN_MAX_DEVICES].base, &idx));
  KT_CHECK(kiln_registry_count(reg) == KILN_MAX_DEVICES);
  kiln_device_t* got = NULL;
  KT_OK(kiln_registry_get(reg, KILN_MAX_DEVICES - 1, &got));
  KT_CHECK(got == &devs[KILN_MAX_DEVICES - 1].base);
  kiln_registry_destroy(reg);
  KT_CHECK(g_fake_destroyed == KILN_MAX_DEVICES);
  KT_CHECK(devs[KILN_MAX_DEVICES].alive == 1); /* the refused one is still ours */

  /* real devices too: a registry full of ref devices */
  KT_OK(kiln_registry_create(NULL, &reg));
  if (!reg) return;
  for (int i = 0; i < KILN_MAX_DEVICES; i++) {
    kiln_device_t* d = NULL;
    KT_OK(kiln_ref_device_create(0, NULL, &d));
    int32_t ix = -1;
    if (d) KT_OK(kiln_registry_add(reg, d, &ix));
    KT_CHECK(ix == i);
  }
  kiln_device_t* extra = NULL;
  KT_OK(kiln_ref_device_create(0, NULL, &extra));
  if (extra) {
    int32_t ix = -1;
    KT_FAILS(KILN_ERROR_FAILED_PRECONDITION, kiln_registry_add(reg, extra, &ix));
    kiln_device_destroy(extra);
  }
  kiln_registry_destroy(reg);
}

KT_TEST(device_create_by_name) {
  kiln_device_t* dev = NULL;
  KT_OK(kiln_device_create_by_name("ref", 0, NULL, &dev));
  KT_CHECK(dev && dev->index == -1 && device_name_is(dev, "ref"));
  kiln_device_destroy(dev);
  dev = NULL;
  KT_OK(kiln_device_create_by_name("cpu", 0, NULL, &dev));
  KT_CHECK(dev && dev->index == -1 && device_name_is(dev, "cpu"));
  kiln_device_destroy(dev);
  KT_FAILS(KILN_ERROR_NOT_FOUND, kiln_device_create_by_name("gpu", 0, NULL, &dev));
  kiln_device_destroy(NULL); /* no-op */
}

/* Counting host allocator: the ref device must route its own objects through it. */
typedef struct counting_alloc {
  int live;
  int total;
} counting_alloc_t;

static void* counting_alloc_fn(void* self, size_t size, size_t alignment) {
  counting_alloc_t* c = self;
  kiln_allocator_t sys = kiln_allocator_system();
  void* p = sys.alloc(sys.self, size, alignment);
  if (p) {
    c->live++;
    c->total++;
  }
  return p;
}

static void counting_free_fn(void* self, void* ptr) {
  counting_alloc_t* c = self;
  if (!ptr) return;
  c->live--;
  kiln_allocator_t sys = kiln_allocator_system();
  sys.free(sys.self, ptr);
}

KT_TEST(ref_device_uses_host_allocator) {
  counting_alloc_t counts = {0, 0};
  kiln_allocator_t a = {counting_alloc_fn, counting_free_fn, &counts};
  kiln_device_t* dev = NULL;
  KT_OK(kiln_ref_device_create(0, &a, &dev));
  if (!dev) return;
  KT_CHECK(dev->host_allocator.self == &counts);
  KT_CHECK(counts.live >= 1);
  void* p = NULL;
  KT_OK(kiln_device_alloc(dev, 100, &p));
  KT_CHECK(p != NULL && ((uintptr_t)p % 64) == 0);
  kiln_stream_t* s = NULL;
  KT_OK(kiln_stream_create(dev, &s));
  kiln_stream_destroy(dev, s);
  kiln_device_free(dev, p);
  kiln_device_destroy(dev);
  KT_CHECK(counts.live == 0);
  KT_CHECK(counts.total >= 2);
}

/* ---- dtypes ----------------------------------------------------------------------------------- */

KT_TEST(dtype_properties) {
  static const struct { kiln_dtype_t t; size_t size; int is_float; } table[] = {
      {KILN_DTYPE_F32, 4, 1}, {KILN_DTYPE_F16, 2, 1}, {KILN_DTYPE_BF16, 2, 1},
      {KILN_DTYPE_F64, 8, 1}, {KILN_DTYPE_I8, 1, 0},  {KILN_DTYPE_I16, 2, 0},
      {KILN_DTYPE_I32, 4, 0}, {KILN_DTYPE_I64, 8, 0}, {KILN_DTYPE_U8, 1, 0},
      {KILN_DTYPE_BOOL, 1, 0},
  };
  KT_CHECK(sizeof(table) / sizeof(table[0]) == KILN_DTYPE_COUNT);
  for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
    KT_CHECK(kiln_dtype_size(table[i].t) == table[i].size);
    KT_CHECK(kiln_dtype_is_float(table[i].t) == table[i].is_float);
    const char* name = kiln_dtype_name(table[i].t);
    KT_CHECK(name && name[0] && strcmp(name, "invalid") != 0);
    for (size_t j = 0; j < i && name; j++) KT_CHECK(strcmp(name, kiln_dtype_name(table[j].t)) != 0);
  }
  KT_CHECK(strcmp(kiln_dtype_name(KILN_DTYPE_F32), "f32") == 0);
  KT_CHECK(strcmp(kiln_dtype_name(KILN_DTYPE_BF16), "bf16") == 0);
  KT_CHECK(strcmp(kiln_dtype_name(KILN_DTYPE_F16), "f16") == 0);
  KT_CHECK(strcmp(kiln_dtype_name(KILN_DTYPE_I64), "i64") == 0);
  /* invalid dtypes */
  KT_CHECK(kiln_dtype_size(KILN_DTYPE_COUNT) == 0);
  KT_CHECK(kiln_dtype_size((kiln_dtype_t)-1) == 0);
  KT_CHECK(strcmp(kiln_dtype_name(KILN_DTYPE_COUNT), "invalid") == 0);
  KT_CHECK(strcmp(kiln_dtype_name((kiln_dtype_t)-1), "invalid") == 0);
  KT_CHECK(kiln_dtype_is_float(KILN_DTYPE_COUNT) == 0);
  KT_CHECK(kiln_dtype_is_float((kiln_dtype_t)1000) == 0);
}

/* ---- tensor descriptors ----------------------------------------------------------------------- */

KT_TEST(tensor_init_contiguous) {
  float buf[24];
  kiln_tensor_t t;
  const int64_t shape[3] = {2, 3, 4};
  KT_OK(kiln_tensor_init_contiguous(&t, buf, KILN_DTYPE_F32, 3, shape));
  KT_CHECK(t.data == buf && t.dtype == KILN_DTYPE_F32 && t.ndim == 3);
  KT_CHECK(t.shape[0] == 2 && t.shape[1] == 3 && t.shape[2] == 4);
  KT_CHECK(t.strides[0] == 12 && t.strides[1] == 4 && t.strides[2] == 1);
  KT_CHECK(kiln_tensor_numel(&t) == 24);
  KT_CHECK(kiln_tensor_is_contiguous(&t) == 1);

  /* rank 0: a scalar */
  KT_OK(kiln_tensor_init_contiguous(&t, buf, KILN_DTYPE_I64, 0, NULL));
  KT_CHECK(t.ndim == 0 && kiln_tensor_numel(&t) == 1 && kiln_tensor_is_contiguous(&t) == 1);

  /* a zero-size dim */
  const int64_t empty[2] = {5, 0};
  KT_OK(kiln_tensor_init_contiguous(&t, buf, KILN_DTYPE_U8, 2, empty));
  KT_CHECK(kiln_tensor_numel(&t) == 0);

  /* full rank */
  const int64_t eight[KILN_MAX_DIMS] = {1, 2, 1, 2, 1, 2, 1, 3};
  KT_OK(kiln_tensor_init_contiguous(&t, buf, KILN_DTYPE_BF16, KILN_MAX_DIMS, eight));
  KT_CHECK(kiln_tensor_numel(&t) == 24 && t.strides[KILN_MAX_DIMS - 1] == 1 && t.strides[6] == 3);
  KT_CHECK(kiln_tensor_is_contiguous(&t) == 1);

  /* invalid arguments */
  const int64_t nine[KILN_MAX_DIMS + 1] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT,
           kiln_tensor_init_contiguous(&t, buf, KILN_DTYPE_F32, KILN_MAX_DIMS + 1, nine));
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_tensor_init_contiguous(&t, buf, KILN_DTYPE_F32, -1, shape));
  const int64_t neg[2] = {2, -3};
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_tensor_init_contiguous(&t, buf, KILN_DTYPE_F32, 2, neg));
}

KT_TEST(tensor_is_contiguous_strides) {
  float buf[24];
  kiln_tensor_t t;
  const int64_t shape[3] = {2, 3, 4};
  KT_OK(kiln_tensor_init_contiguous(&t, buf, KILN_DTYPE_F32, 3, shape));
  /* transposed last two dims */
  kiln_tensor_t tr = t;
  tr.shape[1] = 4;
  tr.shape[2] = 3;
  tr.strides[1] = 1;
  tr.strides[2] = 4;
  KT_CHECK(kiln_tensor_is_contiguous(&tr) == 0);
  KT_CHECK(kiln_tensor_numel(&tr) == 24);
  /* broadcast (stride 0) over a dim of size > 1 */
  kiln_tensor_t bc = t;
  bc.strides[0] = 0;
  KT_CHECK(kiln_tensor_is_contiguous(&bc) == 0);
  /* size-1 dims may carry any stride */
  const int64_t ones[4] = {1, 3, 1, 4};
  kiln_tensor_t u;
  KT_OK(kiln_tensor_init_contiguous(&u, buf, KILN_DTYPE_F32, 4, ones));
  u.strides[0] = 999;
  u.strides[2] = -5;
  KT_CHECK(kiln_tensor_is_contiguous(&u) == 1);
  /* a sliced (gapped) tensor */
  kiln_tensor_t sl = t;
  sl.strides[0] = 24;
  KT_CHECK(kiln_tensor_is_contiguous(&sl) == 0);
  /* negative stride */
  kiln_tensor_t ng = t;
  ng.strides[2] = -1;
  KT_CHECK(kiln_tensor_is_contiguous(&ng) == 0);
}

KT_MAIN()
