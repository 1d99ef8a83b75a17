/* SPDX-License-Identifier: Apache-2.0 */
/* test_npy.c - the .npy module (tools/npy.c) on its own: write -> read round trips for every
 * dtype and rank 0..3 (zero-size dims included), then hostile files, each of which must give an
 * error with a message, never a crash (run it under ASan/UBSan too). Needs no libkiln:
 *   cc -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -Iinclude tools/npy.c tools/test_npy.c
 * Prints a summary; exit status 1 on any failure. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "npy.h"

static int failures, checks;
static char tmpdir[] = "/tmp/test_npy.XXXXXX";

#define CHECK(cond, ...)                                    \
  do {                                                      \
    checks++;                                               \
    if (!(cond)) {                                          \
      failures++;                                           \
      fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
      fprintf(stderr, __VA_ARGS__);                         \
      fputc('\n', stderr);                                  \
    }                                                       \
  } while (0)

static size_t dtype_size(int dtype) {
  switch (dtype) {
    case KILN_DTYPE_F64: case KILN_DTYPE_I64: return 8;
    case KILN_DTYPE_F32: case KILN_DTYPE_I32: return 4;
    case KILN_DTYPE_F16: case KILN_DTYPE_BF16: case KILN_DTYPE_I16: return 2;
    default: return 1;
  }
}

static void tmp_path(char* buf, size_t cap, const char* name) {
  snprintf(buf, cap, "%s/%s", tmpdir, name);
}

static int write_bytes(const char* path, const void* data, size_t n) {
  FILE* f = fopen(path, "wb");
  if (!f) return 0;
  int ok = fwrite(data, 1, n, f) == n;
  return fclose(f) == 0 && ok;
}

static unsigned char* read_bytes(const char* path, size_t* n) {
  FILE* f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long len = ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char* b = malloc(len > 0 ? (size_t)len : 1);
  *n = fread(b, 1, (size_t)len, f);
  fclose(f);
  return b;
}

/* ---- round trips ------------------------------------------------------------------------- */

static void round_trip(int dtype, int ndim, const int64_t* shape) {
  char path[256], err[256] = "";
  size_t numel = 1;
  for (int d = 0; d < ndim; d++) numel *= (size_t)shape[d];
  size_t nbytes = numel * dtype_size(dtype);
  unsigned char* data = malloc(nbytes ? nbytes : 1);
  for (size_t i = 0; i < nbytes; i++)
    data[i] = dtype == KILN_DTYPE_BOOL ? (unsigned char)(i % 3 == 0) : (unsigned char)(i * 37 + 11);
  tmp_path(path, sizeof path, "rt.npy");
  int s = kiln_npy_write(path, dtype, ndim, shape, nbytes ? data : NULL, err, sizeof err);
  CHECK(s == KILN_OK, "write dtype %d ndim %d: %s", dtype, ndim, err);

  kiln_npy_t a;
  s = kiln_npy_read(path, &a, err, sizeof err);
  CHECK(s == KILN_OK, "read dtype %d ndim %d: %s", dtype, ndim, err);
  if (s == KILN_OK) {
    CHECK(a.dtype == dtype && a.ndim == ndim && a.nbytes == nbytes && a.data != NULL,
          "dtype %d/%d ndim %d/%d nbytes %zu/%zu", a.dtype, dtype, a.ndim, ndim, a.nbytes, nbytes);
    for (int d = 0; d < ndim && d < a.ndim; d++)
      CHECK(a.shape[d] == shape[d], "dim %d: %lld vs %lld", d, (long long)a.shape[d],
            (long long)shape[d]);
    CHECK(a.nbytes != nbytes || memcmp(a.data, data, nbytes) == 0, "data differs (dtype %d)",
          dtype);
  }
  kiln_npy_free(&a);
  CHECK(a.data == NULL && a.nbytes == 0, "free did not zero");

  /* the layout numpy writes: version 1.0, data at a multiple of 64, header ends with '\n' */
  size_t n;
  unsigned char* file = read_bytes(path, &n);
  CHECK(file && n >= 10, "cannot reread %s", path);
  if (file && n >= 10) {
    size_t off = 10 + (size_t)(file[8] | file[9] << 8);
    CHECK(file[6] == 1 && file[7] == 0 && off % 64 == 0 && off + nbytes == n &&
              file[off - 1] == '\n',
          "layout: version %u.%u data offset %zu size %zu", file[6], file[7], off, n);
    s = kiln_npy_read_buffer(file, n, &a, err, sizeof err);
    CHECK(s == KILN_OK && a.nbytes == nbytes && memcmp(a.data, data, nbytes) == 0,
          "read_buffer: %s", err);
    kiln_npy_free(&a);
  }
  free(file);
  free(data);
}

static void test_round_trips(void) {
  static const int64_t shapes[][3] = {{0}, {5}, {0}, {1}, {2, 3}, {0, 3}, {3, 0},
                                      {2, 3, 4}, {2, 0, 4}, {1, 1, 1}};
  static const int ranks[] = {0, 1, 1, 1, 2, 2, 2, 3, 3, 3};
  for (int dtype = 0; dtype < KILN_DTYPE_COUNT; dtype++) {
    for (size_t k = 0; k < sizeof ranks / sizeof ranks[0]; k++)
      round_trip(dtype, ranks[k], shapes[k]);
    CHECK(kiln_npy_descr(dtype) != NULL, "no descr for dtype %d", dtype);
  }
  /* 8 dims and a long dim */
  int64_t eight[8] = {1, 2, 1, 2, 1, 2, 1, 2};
  round_trip(KILN_DTYPE_F32, 8, eight);
  int64_t big[2] = {1000003, 3};
  round_trip(KILN_DTYPE_U8, 2, big);
  CHECK(kiln_npy_descr(KILN_DTYPE_COUNT) == NULL && kiln_npy_descr(-1) == NULL, "bad descr");
}

/* ---- hostile and unusual files ----------------------------------------------------------- */

/* A .npy in buf: magic, version major.0, the header text (padded to 64 with a final '\n' when
 * pad), then ndata bytes of data. Returns the size. */
static size_t make_npy(unsigned char* buf, int major, const char* header, int pad,
                       const void* data, size_t ndata) {
  size_t lenbytes = major == 1 ? 2 : 4, hoff = 8 + lenbytes, n = strlen(header);
  memcpy(buf, "\x93NUMPY", 6);
  buf[6] = (unsigned char)major;
  buf[7] = 0;
  memcpy(buf + hoff, header, n);
  if (pad) {
    while ((hoff + n + 1) % 64) buf[hoff + n++] = ' ';
    buf[hoff + n++] = '\n';
  }
  for (size_t i = 0; i < lenbytes; i++) buf[8 + i] = (unsigned char)(n >> (8 * i));
  if (ndata) memcpy(buf + hoff + n, data, ndata);
  return hoff + n + ndata;
}

/* Expects an error with code `code` (0: any error) from both the buffer and the file reader. */
static void expect_error(const char* what, const unsigned char* buf, size_t n, int code) {
  char err[256] = "", path[256];
  kiln_npy_t a;
  int s = kiln_npy_read_buffer(buf, n, &a, err, sizeof err);
  CHECK(s != KILN_OK && (code == 0 || s == code) && err[0] != '\0' && a.data == NULL,
        "%s (buffer): status %d, err '%s'", what, s, err);
  if (s == KILN_OK) kiln_npy_free(&a);
  if (getenv("TEST_NPY_VERBOSE")) printf("  %-34s -> %s\n", what, err);
  tmp_path(path, sizeof path, "bad.npy");
  CHECK(write_bytes(path, buf, n), "cannot write %s", path);
  err[0] = '\0';
  s = kiln_npy_read(path, &a, err, sizeof err);
  CHECK(s != KILN_OK && (code == 0 || s == code) && strstr(err, path) == err && a.data == NULL,
        "%s (file): status %d, err '%s'", what, s, err);
  if (s == KILN_OK) kiln_npy_free(&a);
}

static void expect_ok(const char* what, const unsigned char* buf, size_t n, int dtype, int ndim,
                      int64_t dim0) {
  char err[256] = "";
  kiln_npy_t a;
  int s = kiln_npy_read_buffer(buf, n, &a, err, sizeof err);
  CHECK(s == KILN_OK && a.dtype == dtype && a.ndim == ndim && (ndim == 0 || a.shape[0] == dim0),
        "%s: status %d err '%s' dtype %d ndim %d", what, s, err, a.dtype, a.ndim);
  kiln_npy_free(&a);
}

#define HDR(descr, fortran, shape) \
  "{'descr': '" descr "', 'fortran_order': " fortran ", 'shape': " shape ", }"

static void test_hostile(void) {
  static unsigned char buf[1 << 17];
  unsigned char data[64] = {0};
  size_t n;

  /* accepted variants */
  n = make_npy(buf, 1, HDR("<f4", "False", "(3,)"), 1, data, 12);
  expect_ok("plain", buf, n, KILN_DTYPE_F32, 1, 3);
  n = make_npy(buf, 2, HDR("<i8", "False", "(2, 1)"), 1, data, 16);
  expect_ok("version 2.0", buf, n, KILN_DTYPE_I64, 2, 2);
  n = make_npy(buf, 3, HDR("<f2", "False", "()"), 1, data, 2);
  expect_ok("version 3.0 scalar", buf, n, KILN_DTYPE_F16, 0, 0);
  n = make_npy(buf, 1, "{\"shape\":(4,),\"descr\":\"|V2\",\"fortran_order\":False}", 0, data, 8);
  expect_ok("double quotes, any order, |V2", buf, n, KILN_DTYPE_BF16, 1, 4);
  n = make_npy(buf, 1, HDR("bfloat16", "False", "(4,)"), 1, data, 8);
  expect_ok("descr bfloat16", buf, n, KILN_DTYPE_BF16, 1, 4);
  n = make_npy(buf, 1, HDR("<V2", "False", "(4,)"), 1, data, 8);
  expect_ok("descr <V2", buf, n, KILN_DTYPE_BF16, 1, 4);
  n = make_npy(buf, 1, HDR("<u1", "False", "(4,)"), 1, data, 4);
  expect_ok("descr <u1", buf, n, KILN_DTYPE_U8, 1, 4);
  n = make_npy(buf, 1, HDR("<f8", "False", "(0, 1000000000000)"), 1, data, 0);
  expect_ok("zero dim with a big dim", buf, n, KILN_DTYPE_F64, 2, 0);
  n = make_npy(buf, 1, "{'descr':'<i4','fortran_order':False,'shape':(1,)}", 0, data, 4);
  expect_ok("no padding, no trailing comma", buf, n, KILN_DTYPE_I32, 1, 1);
  {
    unsigned char bools[3] = {0, 2, 255};
    kiln_npy_t a;
    char err[256];
    n = make_npy(buf, 1, HDR("|b1", "False", "(3,)"), 1, bools, 3);
    int s = kiln_npy_read_buffer(buf, n, &a, err, sizeof err);
    CHECK(s == KILN_OK && ((unsigned char*)a.data)[0] == 0 && ((unsigned char*)a.data)[1] == 1 &&
              ((unsigned char*)a.data)[2] == 1,
          "bool normalization: %s", err);
    kiln_npy_free(&a);
  }

  /* prefix */
  expect_error("empty file", buf, 0, KILN_ERROR_DATA_LOSS);
  expect_error("3 bytes", (const unsigned char*)"\x93NU", 3, KILN_ERROR_DATA_LOSS);
  expect_error("bad magic", (const unsigned char*)"\x93NUMPZ\x01\x00\x00\x00", 10, KILN_ERROR_DATA_LOSS);
  expect_error("prefix cut in the length", (const unsigned char*)"\x93NUMPY\x02\x00\x10\x00", 10,
               KILN_ERROR_DATA_LOSS);
  n = make_npy(buf, 1, HDR("<f4", "False", "(3,)"), 1, data, 12);
  buf[6] = 4;
  expect_error("version 4.0", buf, n, KILN_ERROR_DATA_LOSS);
  buf[6] = 1, buf[7] = 1;
  expect_error("version 1.1", buf, n, KILN_ERROR_DATA_LOSS);
  buf[6] = 0, buf[7] = 0;
  expect_error("version 0.0", buf, n, KILN_ERROR_DATA_LOSS);
  n = make_npy(buf, 1, HDR("<f4", "False", "(3,)"), 1, data, 12);
  buf[8] = 0xff, buf[9] = 0x7f;
  expect_error("header length beyond the file", buf, n, KILN_ERROR_DATA_LOSS);
  n = make_npy(buf, 2, HDR("<f4", "False", "(3,)"), 1, data, 12);
  buf[8] = buf[9] = buf[10] = buf[11] = 0xff;
  expect_error("header length 4 GiB", buf, n, KILN_ERROR_DATA_LOSS);

  /* sizes */
  n = make_npy(buf, 1, HDR("<f4", "False", "(3,)"), 1, data, 11);
  expect_error("truncated data", buf, n, KILN_ERROR_DATA_LOSS);
  n = make_npy(buf, 1, HDR("<f4", "False", "(3,)"), 1, data, 13);
  expect_error("trailing byte", buf, n, KILN_ERROR_DATA_LOSS);
  n = make_npy(buf, 1, HDR("<f4", "False", "(1099511627776, 1099511627776)"), 1, data, 12);
  expect_error("shape product overflow", buf, n, KILN_ERROR_DATA_LOSS);
  n = make_npy(buf, 1, HDR("<f8", "False", "(4611686018427387904,)"), 1, data, 12);
  expect_error("huge shape (2^62)", buf, n, KILN_ERROR_DATA_LOSS);
  n = make_npy(buf, 1, HDR("<f8", "False", "(281474976710656,)"), 1, data, 12);
  expect_error("2^48 f8 elements, 12 bytes", buf, n, KILN_ERROR_DATA_LOSS);
  n = make_npy(buf, 1, HDR("<f4", "False", "(0, 281474976710657)"), 1, data, 0);
  expect_error("zero dim, nonzero dims over 2^48", buf, n, KILN_ERROR_DATA_LOSS);
  n = make_npy(buf, 1, HDR("<f4", "False", "(99999999999999999999,)"), 1, data, 12);
  expect_error("dim beyond int64", buf, n, KILN_ERROR_DATA_LOSS);
  n = make_npy(buf, 1, HDR("<f4", "False", "(-3,)"), 1, data, 12);
  expect_error("negative dim", buf, n, KILN_ERROR_DATA_LOSS);
  n = make_npy(buf, 1, HDR("<f4", "False", "(1, 1, 1, 1, 1, 1, 1, 1, 1)"), 1, data, 4);
  expect_error("9 dims", buf, n, KILN_ERROR_UNIMPLEMENTED);

  /* header syntax */
  n = make_npy(buf, 1, "{'fortran_order': False, 'shape': (3,), }", 1, data, 12);
  expect_error("missing descr", buf, n, KILN_ERROR_DATA_LOSS);
  n = make_npy(buf, 1, "{'descr': '<f4', 'shape': (3,), }", 1, data, 12);
  expect_error("missing fortran_order", buf, n, KILN_ERROR_DATA_LOSS);
  n = make_npy(buf, 1, "{'descr': '<f4', 'fortran_order': False, }", 1, data, 12);
  expect_error("missing shape", buf, n, KILN_ERROR_DATA_LOSS);
  n = make_npy(buf, 1, "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (3,)}",
               1, data, 12);
  expect_error("duplicate key", buf, n, KILN_ERROR_DATA_LOSS);
  n = make_npy(buf, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), 'x': 1}", 1,
               data, 12);
  expect_error("extra key", buf, n, KILN_ERROR_DATA_LOSS);
  n = make_npy(buf, 1, "['descr', '<f4']", 1, data, 12);
  expect_error("not a dict", buf, n, KILN_ERROR_DATA_LOSS);
  n = make_npy(buf, 1, HDR("<f4", "False", "(3,)") " x", 1, data, 12);
  expect_error("text after the dict", buf, n, KILN_ERROR_DATA_LOSS);
  n = make_npy(buf, 1, "{'descr': '<f4, 'fortran_order': False, 'shape': (3,)}", 1, data, 12);
  expect_error("unterminated string", buf, n, KILN_ERROR_DATA_LOSS);
  n = make_npy(buf, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,)", 1, data, 12);
  expect_error("unclosed dict", buf, n, KILN_ERROR_DATA_LOSS);
  n = make_npy(buf, 1, HDR("<f4", "False", "(3)"), 1, data, 12);
  expect_error("shape (3) without a comma", buf, n, KILN_ERROR_DATA_LOSS);
  n = make_npy(buf, 1, HDR("<f4", "False", "[3]"), 1, data, 12);
  expect_error("shape as a list", buf, n, KILN_ERROR_DATA_LOSS);
  n = make_npy(buf, 1, HDR("<f4", "False", "(3 4)"), 1, data, 48);
  expect_error("shape without commas", buf, n, KILN_ERROR_DATA_LOSS);
  n = make_npy(buf, 1, HDR("<f4", "False", "(03,)"), 1, data, 12);
  expect_error("leading zero", buf, n, KILN_ERROR_DATA_LOSS);
  n = make_npy(buf, 1, HDR("<f4", "0", "(3,)"), 1, data, 12);
  expect_error("fortran_order 0", buf, n, KILN_ERROR_DATA_LOSS);
  n = make_npy(buf, 1, HDR("<f4", "Falsey", "(3,)"), 1, data, 12);
  expect_error("fortran_order Falsey", buf, n, KILN_ERROR_DATA_LOSS);
  n = make_npy(buf, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }\xc3\xa9", 1,
               data, 12);
  expect_error("non-ASCII header byte", buf, n, KILN_ERROR_DATA_LOSS);
  n = make_npy(buf, 1, HDR("<f4", "False", "(3,)"), 1, data, 12);
  buf[10 + 30] = '\0';
  expect_error("NUL in the header", buf, n, KILN_ERROR_DATA_LOSS);
  n = make_npy(buf, 1, HDR("<f4", "False", "(3,)"), 1, data, 12);
  buf[10 + 30] = '\x01';
  expect_error("control byte in the header", buf, n, KILN_ERROR_DATA_LOSS);

  /* types */
  n = make_npy(buf, 1, HDR("<f4", "True", "(3,)"), 1, data, 12);
  expect_error("fortran_order True", buf, n, KILN_ERROR_UNIMPLEMENTED);
  n = make_npy(buf, 1, HDR(">f4", "False", "(3,)"), 1, data, 12);
  expect_error("big-endian >f4", buf, n, KILN_ERROR_UNIMPLEMENTED);
  n = make_npy(buf, 1, HDR(">i8", "False", "(3,)"), 1, data, 24);
  expect_error("big-endian >i8", buf, n, KILN_ERROR_UNIMPLEMENTED);
  n = make_npy(buf, 1, HDR("=f4", "False", "(3,)"), 1, data, 12);
  expect_error("native order =f4", buf, n, KILN_ERROR_UNIMPLEMENTED);
  n = make_npy(buf, 1, HDR("<c8", "False", "(3,)"), 1, data, 24);
  expect_error("complex", buf, n, KILN_ERROR_UNIMPLEMENTED);
  n = make_npy(buf, 1, HDR("<u2", "False", "(3,)"), 1, data, 6);
  expect_error("uint16", buf, n, KILN_ERROR_UNIMPLEMENTED);
  n = make_npy(buf, 1, HDR("<U3", "False", "(3,)"), 1, data, 36);
  expect_error("unicode", buf, n, KILN_ERROR_UNIMPLEMENTED);
  n = make_npy(buf, 1, HDR("|O", "False", "(3,)"), 1, data, 24);
  expect_error("object", buf, n, KILN_ERROR_UNIMPLEMENTED);
  n = make_npy(buf, 1, HDR("", "False", "(3,)"), 1, data, 12);
  expect_error("empty descr", buf, n, KILN_ERROR_UNIMPLEMENTED);
  n = make_npy(buf, 1, HDR("<f4xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx", "False", "(3,)"), 1,
               data, 12);
  expect_error("descr too long", buf, n, KILN_ERROR_DATA_LOSS);
  n = make_npy(buf, 1, "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (3,), }", 1,
               data, 12);
  expect_error("structured dtype", buf, n, KILN_ERROR_UNIMPLEMENTED);

  /* a header at the length limit is still parsed; one byte more is refused */
  {
    char* h = malloc(KILN_NPY_MAX_HEADER + 2);
    const char* base = HDR("<f4", "False", "(3,)");
    size_t bl = strlen(base);
    memcpy(h, base, bl);
    memset(h + bl, ' ', KILN_NPY_MAX_HEADER - bl - 1);
    h[KILN_NPY_MAX_HEADER - 1] = '\n';
    h[KILN_NPY_MAX_HEADER] = '\0';
    n = make_npy(buf, 2, h, 0, data, 12);
    expect_ok("header of the maximum length", buf, n, KILN_DTYPE_F32, 1, 3);
    h[KILN_NPY_MAX_HEADER] = '\n';
    h[KILN_NPY_MAX_HEADER + 1] = '\0';
    n = make_npy(buf, 2, h, 0, data, 12);
    expect_error("header over the maximum length", buf, n, KILN_ERROR_DATA_LOSS);
    free(h);
  }

  /* every truncation of a valid file, and byte mutations of it: errors or success, no crash */
  {
    char err[256];
    kiln_npy_t a;
    static unsigned char mut[256];
    size_t full = make_npy(buf, 1, HDR("<i8", "False", "(2, 3)"), 1, data, 48);
    for (size_t len = 0; len < full; len++) {
      int s = kiln_npy_read_buffer(buf, len, &a, err, sizeof err);
      CHECK(s != KILN_OK && a.data == NULL, "truncation to %zu accepted", len);
    }
    uint32_t x = 12345;
    int accepted = 0;
    for (int iter = 0; iter < 20000; iter++) {
      memcpy(mut, buf, full);
      int nm = 1 + iter % 4;
      for (int k = 0; k < nm; k++) {
        x = x * 1103515245u + 12345u;
        size_t at = (x >> 8) % 80; /* the prefix and header */
        x = x * 1103515245u + 12345u;
        mut[at] = (unsigned char)(x >> 16);
      }
      int s = kiln_npy_read_buffer(mut, full, &a, err, sizeof err);
      if (s == KILN_OK) {
        accepted++;
        CHECK(a.data && a.nbytes <= full, "mutation accepted with %zu bytes", a.nbytes);
      } else {
        CHECK(err[0] != '\0' && a.data == NULL, "mutation: error %d without a message", s);
      }
      kiln_npy_free(&a);
    }
    if (getenv("TEST_NPY_VERBOSE")) printf("  mutations accepted: %d of 20000\n", accepted);
  }

  /* paths */
  {
    char err[256] = "";
    kiln_npy_t a;
    int s = kiln_npy_read(tmpdir, &a, err, sizeof err);
    CHECK(s == KILN_ERROR_DATA_LOSS, "directory: %d %s", s, err);
    s = kiln_npy_read("/nonexistent/x.npy", &a, err, sizeof err);
    CHECK(s == KILN_ERROR_NOT_FOUND && strstr(err, "/nonexistent/x.npy"), "missing: %d %s", s,
          err);
    s = kiln_npy_read(NULL, &a, err, sizeof err);
    CHECK(s == KILN_ERROR_INVALID_ARGUMENT, "NULL path: %d", s);
    s = kiln_npy_read("/nonexistent/x.npy", &a, NULL, 0);
    CHECK(s == KILN_ERROR_NOT_FOUND, "err NULL: %d", s);
    s = kiln_npy_read_buffer(NULL, 10, &a, err, sizeof err);
    CHECK(s == KILN_ERROR_INVALID_ARGUMENT, "NULL buffer: %d", s);
    char tiny[8];
    s = kiln_npy_read("/nonexistent/x.npy", &a, tiny, sizeof tiny);
    CHECK(s == KILN_ERROR_NOT_FOUND && strlen(tiny) == sizeof tiny - 1, "truncated err '%s'", tiny);
  }

  /* writer arguments */
  {
    char err[256] = "", path[256];
    int64_t shape[9] = {2, 2, 1, 1, 1, 1, 1, 1, 1}, neg[1] = {-1};
    int64_t huge[2] = {INT64_C(1) << 40, INT64_C(1) << 40};
    tmp_path(path, sizeof path, "w.npy");
    CHECK(kiln_npy_write(path, KILN_DTYPE_COUNT, 1, shape, data, err, sizeof err) ==
              KILN_ERROR_INVALID_ARGUMENT, "bad dtype");
    CHECK(kiln_npy_write(path, -1, 1, shape, data, err, sizeof err) ==
              KILN_ERROR_INVALID_ARGUMENT, "dtype -1");
    CHECK(kiln_npy_write(path, KILN_DTYPE_F32, 9, shape, data, err, sizeof err) ==
              KILN_ERROR_INVALID_ARGUMENT, "9 dims");
    CHECK(kiln_npy_write(path, KILN_DTYPE_F32, -1, shape, data, err, sizeof err) ==
              KILN_ERROR_INVALID_ARGUMENT, "ndim -1");
    CHECK(kiln_npy_write(path, KILN_DTYPE_F32, 1, neg, data, err, sizeof err) ==
              KILN_ERROR_INVALID_ARGUMENT, "negative dim");
    CHECK(kiln_npy_write(path, KILN_DTYPE_F32, 2, huge, data, err, sizeof err) ==
              KILN_ERROR_INVALID_ARGUMENT, "huge");
    CHECK(kiln_npy_write(path, KILN_DTYPE_F32, 1, shape, NULL, err, sizeof err) ==
              KILN_ERROR_INVALID_ARGUMENT, "NULL data");
    CHECK(kiln_npy_write(path, KILN_DTYPE_F32, 1, NULL, data, err, sizeof err) ==
              KILN_ERROR_INVALID_ARGUMENT, "NULL shape");
    CHECK(kiln_npy_write("/nonexistent/dir/w.npy", KILN_DTYPE_F32, 1, shape, data, err,
                         sizeof err) == KILN_ERROR_INTERNAL && strstr(err, "/nonexistent"),
          "unwritable: %s", err);
  }
}

/* `test_npy copy IN OUT`: reads IN and writes it back as OUT (tools/test_npy_numpy.sh checks
 * the result against numpy). */
static int copy_main(const char* in, const char* out) {
  kiln_npy_t a;
  char err[512];
  if (kiln_npy_read(in, &a, err, sizeof err) != KILN_OK ||
      kiln_npy_write(out, a.dtype, a.ndim, a.shape, a.data, err, sizeof err) != KILN_OK) {
    fprintf(stderr, "test_npy copy: %s\n", err);
    kiln_npy_free(&a);
    return 1;
  }
  kiln_npy_free(&a);
  return 0;
}

int main(int argc, char** argv) {
  if (argc == 4 && strcmp(argv[1], "copy") == 0) return copy_main(argv[2], argv[3]);
  if (argc != 1) {
    fprintf(stderr, "usage: test_npy [copy IN.npy OUT.npy]\n");
    return 2;
  }
  if (!mkdtemp(tmpdir)) {
    perror("mkdtemp");
    return 1;
  }
  test_round_trips();
  test_hostile();
  char path[256];
  const char* names[] = {"rt.npy", "bad.npy", "w.npy"};
  for (size_t i = 0; i < 3; i++) {
    tmp_path(path, sizeof path, names[i]);
    unlink(path);
  }
  rmdir(tmpdir);
  printf("test_npy: %d checks, %d failures\n", checks, failures);
  return failures ? 1 : 0;
}
