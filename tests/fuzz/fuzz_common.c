/* SPDX-License-Identifier: Apache-2.0 */
/* fuzz_common.c - dumps, bounded runs and save/load round trips of a compiled program. */
#include "fuzz_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kiln/dtype.h"
#include "kiln/status.h"

/* Under AddressSanitizer let an absurd allocation fail with NULL (the library must then report
 * OUT_OF_MEMORY) instead of aborting. Unused in builds without ASan. */
const char* __asan_default_options(void);
const char* __asan_default_options(void) { return "allocator_may_return_null=1"; }

void kf_init(void) { setenv("KILN_NUM_THREADS", "1", 0); }

void kf_fail(const char* what) {
  fprintf(stderr, "kiln fuzz: property violated: %s (last status: %s)\n", what,
          kiln_status_message());
  abort();
}

static uint64_t next(uint64_t* s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* Values a real program sees: floats in [-2, 2), small non-negative integers (valid indices for
 * the small dims fuzzed programs have), booleans 0/1. */
static void fill(void* buf, int dtype, int64_t numel, uint64_t* s) {
  for (int64_t i = 0; i < numel; i++) {
    uint64_t r = next(s);
    double v = (double)(r >> 11) / 9007199254740992.0 * 4.0 - 2.0;
    int64_t k = (int64_t)(r % 4);
    switch (dtype) {
      case KILN_DTYPE_F32: ((float*)buf)[i] = (float)v; break;
      case KILN_DTYPE_F64: ((double*)buf)[i] = v; break;
      case KILN_DTYPE_F16:  /* sign, exponent 14..16, random mantissa: about +-[0.5, 4) */
        ((uint16_t*)buf)[i] = (uint16_t)((r & 0x8000) | ((14 + r % 3) << 10) | ((r >> 20) & 0x3ff));
        break;
      case KILN_DTYPE_BF16:
        ((uint16_t*)buf)[i] = (uint16_t)((r & 0x8000) | ((126 + r % 3) << 7) | ((r >> 20) & 0x7f));
        break;
      case KILN_DTYPE_I8: ((int8_t*)buf)[i] = (int8_t)k; break;
      case KILN_DTYPE_U8: ((uint8_t*)buf)[i] = (uint8_t)k; break;
      case KILN_DTYPE_I16: ((int16_t*)buf)[i] = (int16_t)k; break;
      case KILN_DTYPE_I32: ((int32_t*)buf)[i] = (int32_t)k; break;
      case KILN_DTYPE_I64: ((int64_t*)buf)[i] = k; break;
      case KILN_DTYPE_BOOL: ((uint8_t*)buf)[i] = (uint8_t)(k & 1); break;
      default: break;
    }
  }
}

typedef struct {
  int n_in, n_out;
  void** in;
  void** out;
  size_t* out_bytes;
} bufs_t;

/* Bytes and elements of input (out == 0) or output (out == 1) i of e. */
static size_t info_bytes(const kiln_exec_t* e, int out, int i, int* dtype_out, int64_t* numel) {
  int dtype = -1, ndim = -1;
  int64_t shape[8];
  kiln_status_t st = out ? kiln_exec_output_info(e, i, &dtype, &ndim, shape)
                         : kiln_exec_input_info(e, i, &dtype, &ndim, shape);
  if (st != KILN_OK) kf_fail("exec_input_info/output_info of an index in range");
  *dtype_out = dtype;
  size_t es = kiln_dtype_size((kiln_dtype_t)dtype);
  if (es == 0 || ndim < 0 || ndim > 8) kf_fail("a signature with a bad dtype or rank");
  int64_t n = 1;
  for (int d = 0; d < ndim; d++) {
    if (shape[d] < 0) kf_fail("a signature with a negative dim");
    if (shape[d] && n > (INT64_C(1) << 40) / shape[d]) n = INT64_C(1) << 40; /* saturate */
    else n *= shape[d];
  }
  *numel = n;
  return (size_t)n * es;
}

static void free_bufs(bufs_t* b) {
  for (int i = 0; i < b->n_in; i++) free(b->in[i]);
  for (int i = 0; i < b->n_out; i++) free(b->out[i]);
  free(b->in);
  free(b->out);
  free(b->out_bytes);
}

/* Allocates and fills the inputs and allocates the outputs of e; 0 when they are too big. */
static int alloc_bufs(const kiln_exec_t* e, uint64_t seed, bufs_t* b) {
  memset(b, 0, sizeof *b);
  b->n_in = kiln_exec_num_inputs(e);
  b->n_out = kiln_exec_num_outputs(e);
  if (b->n_in < 0 || b->n_out < 1) kf_fail("a compiled program with bad input/output counts");
  int dtype;
  int64_t numel;
  uint64_t total = (uint64_t)kiln_exec_workspace_size(e);
  for (int i = 0; i < b->n_in; i++) total += info_bytes(e, 0, i, &dtype, &numel);
  for (int i = 0; i < b->n_out; i++) total += info_bytes(e, 1, i, &dtype, &numel);
  if (total > KILN_FUZZ_MAX_RUN_BYTES) return 0;
  b->in = calloc((size_t)b->n_in + 1, sizeof(void*));
  b->out = calloc((size_t)b->n_out, sizeof(void*));
  b->out_bytes = calloc((size_t)b->n_out, sizeof(size_t));
  if (!b->in || !b->out || !b->out_bytes) kf_fail("host allocation for a small run");
  uint64_t s = seed;
  for (int i = 0; i < b->n_in; i++) {
    size_t n = info_bytes(e, 0, i, &dtype, &numel);
    b->in[i] = malloc(n ? n : 1);
    if (!b->in[i]) kf_fail("host allocation for a small run");
    fill(b->in[i], dtype, numel, &s);
  }
  for (int i = 0; i < b->n_out; i++) {
    size_t n = info_bytes(e, 1, i, &dtype, &numel);
    b->out[i] = malloc(n ? n : 1);
    if (!b->out[i]) kf_fail("host allocation for a small run");
    b->out_bytes[i] = n;
  }
  return 1;
}

/* Runs e with every output pre-filled with `pattern`; copies the results into `keep`. */
static kiln_status_t run_once(kiln_exec_t* e, bufs_t* b, int pattern, unsigned char** keep) {
  for (int i = 0; i < b->n_out; i++) memset(b->out[i], pattern, b->out_bytes[i]);
  kiln_status_t st = kiln_exec_run(e, b->n_in, b->in, b->n_out, b->out);
  for (int i = 0; i < b->n_out && keep; i++) {
    keep[i] = malloc(b->out_bytes[i] ? b->out_bytes[i] : 1);
    if (!keep[i]) kf_fail("host allocation for a small run");
    memcpy(keep[i], b->out[i], b->out_bytes[i]);
  }
  return st;
}

/* Compares the outputs in b with `ref`; both runs must have ended with the same status. */
static void same_results(const bufs_t* b, unsigned char** ref, kiln_status_t st_ref,
                         kiln_status_t st, const char* what) {
  if (st != st_ref) kf_fail(what);
  if (st != KILN_OK) return; /* outputs are unspecified after an error */
  for (int i = 0; i < b->n_out; i++)
    if (memcmp(b->out[i], ref[i], b->out_bytes[i]) != 0) kf_fail(what);
}

/* e and e2 take and return the same dtypes and shapes. */
static void same_signature(const kiln_exec_t* e, const kiln_exec_t* e2) {
  int n[2] = {kiln_exec_num_inputs(e), kiln_exec_num_outputs(e)};
  if (kiln_exec_num_inputs(e2) != n[0] || kiln_exec_num_outputs(e2) != n[1])
    kf_fail("a loaded program has other input / output counts");
  for (int out = 0; out < 2; out++)
    for (int i = 0; i < n[out]; i++) {
      int dt[2] = {-1, -1}, nd[2] = {-1, -1};
      int64_t sh[2][8];
      const kiln_exec_t* x[2] = {e, e2};
      for (int k = 0; k < 2; k++)
        if ((out ? kiln_exec_output_info(x[k], i, &dt[k], &nd[k], sh[k])
                 : kiln_exec_input_info(x[k], i, &dt[k], &nd[k], sh[k])) != KILN_OK)
          kf_fail("exec_input_info/output_info of an index in range");
      if (dt[0] != dt[1] || nd[0] != nd[1] ||
          memcmp(sh[0], sh[1], sizeof(int64_t) * (size_t)nd[0]) != 0)
        kf_fail("a loaded program has another input / output dtype or shape");
    }
}

static void dumps(const kiln_exec_t* e) {
  char small[64];
  for (int stage = KILN_DUMP_BEFORE; stage <= KILN_DUMP_PROFILE; stage++) {
    size_t need = 0;
    if (kiln_exec_dump(e, stage, small, sizeof small, &need) != KILN_OK) kf_fail("kiln_exec_dump");
    if (need == 0 || strlen(small) >= sizeof small) kf_fail("kiln_exec_dump sizing");
    char* buf = malloc(need);
    if (!buf) kf_fail("host allocation for a dump");
    size_t need2 = 0;
    if (kiln_exec_dump(e, stage, buf, need, &need2) != KILN_OK || need2 != need ||
        strlen(buf) + 1 != need)
      kf_fail("kiln_exec_dump into a buffer of the size it asked for");
    free(buf);
  }
  size_t need = 0;
  if (kiln_exec_dump_svg(e, NULL, 0, &need) != KILN_OK || need == 0) kf_fail("kiln_exec_dump_svg");
}

int kf_exercise(kiln_exec_t* e, uint64_t seed) {
  dumps(e);
  kiln_exec_stats_t stats;
  if (kiln_exec_stats(e, &stats) != KILN_OK) kf_fail("kiln_exec_stats");

  bufs_t b;
  int can_run = alloc_bufs(e, seed, &b);
  unsigned char** ref = NULL;
  kiln_status_t st_ref = KILN_OK;
  if (can_run) {
    ref = calloc((size_t)b.n_out, sizeof(unsigned char*));
    if (!ref) kf_fail("host allocation for a small run");
    st_ref = run_once(e, &b, 0x00, ref);
    same_results(&b, ref, st_ref, run_once(e, &b, 0xff, NULL),
                 "a second run (outputs pre-filled with other bytes) gives other results");
  }

  /* save -> load -> save: loads, and is a fixed point */
  void* s1;
  size_t n1;
  kiln_status_t st = kiln_exec_save_buffer(e, &s1, &n1);
  if (st == KILN_ERROR_OUT_OF_MEMORY) goto done;
  if (st != KILN_OK) kf_fail("kiln_exec_save_buffer of a compiled program");
  kiln_exec_t* e2 = NULL;
  st = kiln_exec_load_buffer(s1, n1, &e2);
  if (st == KILN_ERROR_OUT_OF_MEMORY) {
    kiln_exec_free_buffer(s1);
    goto done;
  }
  if (st != KILN_OK) kf_fail("a saved program does not load back");
  void* s2;
  size_t n2;
  if (kiln_exec_save_buffer(e2, &s2, &n2) != KILN_OK) kf_fail("saving a loaded program");
  if (n1 != n2 || memcmp(s1, s2, n1) != 0) kf_fail("save(load(save(e))) != save(e)");
  kiln_exec_free_buffer(s1);
  kiln_exec_free_buffer(s2);
  same_signature(e, e2);
  if (can_run)
    same_results(&b, ref, st_ref, run_once(e2, &b, 0x5a, NULL),
                 "the loaded program computes other results than the saved one");
  kiln_exec_destroy(e2);
done:
  if (can_run) {
    for (int i = 0; i < b.n_out; i++) free(ref[i]);
    free(ref);
    free_bufs(&b);
  }
  return can_run ? (int)st_ref : -1;
}
