/* SPDX-License-Identifier: Apache-2.0 */
/* npy.c - the .npy reader and writer of npy.h: a strict header parser, sizes checked against
 * the file before any allocation, numpy-identical output. */
#include "npy.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define NPY_MAGIC "\x93NUMPY"
#define NPY_MAGIC_LEN 6
#define NPY_ALIGN 64
/* Like KILN_NUMEL_MAX: the product of the nonzero dims (zero dims counted as 1). */
#define NPY_NUMEL_MAX (INT64_C(1) << 48)
#define NPY_DESCR_MAX 32

#if defined(__GNUC__)
#define NPY_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define NPY_PRINTF(f, a)
#endif

static int npy_error(char* err, size_t errcap, int code, const char* fmt, ...) NPY_PRINTF(4, 5);

/* Formats the message into err (when there is room) and returns code. */
static int npy_error(char* err, size_t errcap, int code, const char* fmt, ...) {
  if (err && errcap > 0) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errcap, fmt, ap);
    va_end(ap);
  }
  return code;
}

/* ---- dtype table ---------------------------------------------------------------------------- */

typedef struct npy_type {
  const char* descr; /* as written */
  int dtype;
  size_t size;
} npy_type_t;

static const npy_type_t npy_types[] = {
    {"<f4", KILN_DTYPE_F32, 4}, {"<f2", KILN_DTYPE_F16, 2}, {"<V2", KILN_DTYPE_BF16, 2},
    {"<f8", KILN_DTYPE_F64, 8}, {"|i1", KILN_DTYPE_I8, 1},  {"<i2", KILN_DTYPE_I16, 2},
    {"<i4", KILN_DTYPE_I32, 4}, {"<i8", KILN_DTYPE_I64, 8}, {"|u1", KILN_DTYPE_U8, 1},
    {"|b1", KILN_DTYPE_BOOL, 1},
};
#define NPY_NTYPES (sizeof(npy_types) / sizeof(npy_types[0]))

static const npy_type_t* npy_type_of_dtype(int dtype) {
  for (size_t i = 0; i < NPY_NTYPES; i++)
    if (npy_types[i].dtype == dtype) return &npy_types[i];
  return NULL;
}

const char* kiln_npy_descr(int dtype) {
  const npy_type_t* t = npy_type_of_dtype(dtype);
  return t ? t->descr : NULL;
}

/* The type of a descr string read from a header; NULL if not accepted (*why says why). */
static const npy_type_t* npy_type_of_descr(const char* d, const char** why) {
  *why = "unsupported dtype (supported: <f4 <f2 <f8 <i8 <i4 <i2 |i1 |u1 |b1, bf16 as <V2)";
  if (strcmp(d, "bfloat16") == 0 || strcmp(d, "|V2") == 0) return npy_type_of_dtype(KILN_DTYPE_BF16);
  if (strlen(d) < 3) return NULL;
  char order = d[0];
  if (order != '<' && order != '|' && order != '=' && order != '>') return NULL;
  for (size_t i = 0; i < NPY_NTYPES; i++) {
    const npy_type_t* t = &npy_types[i];
    if (strcmp(d + 1, t->descr + 1) != 0) continue;
    if (t->size == 1) return t; /* byte order means nothing for one byte */
    if (order == '<') return t;
    /* '|' on a multi-byte number is not something numpy writes; '=' is native order, which
     * numpy never writes either: refuse both rather than guess. */
    *why = order == '>' ? "big-endian data is not supported (use arr.astype(arr.dtype.newbyteorder('<')))"
                        : "byte order must be '<'";
    return NULL;
  }
  return NULL;
}

/* ---- header parsing ------------------------------------------------------------------------- */

typedef struct npy_cursor {
  const char* p;
  const char* end;
} npy_cursor_t;

static void npy_skip_ws(npy_cursor_t* c) {
  while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r'))
    c->p++;
}

/* A quoted string (no escapes: no valid key or descr needs one) into buf. 0 on error. */
static int npy_parse_string(npy_cursor_t* c, char* buf, size_t cap) {
  if (c->p >= c->end || (*c->p != '\'' && *c->p != '"')) return 0;
  char q = *c->p++;
  size_t n = 0;
  while (c->p < c->end && *c->p != q) {
    if (*c->p == '\\' || n + 1 >= cap) return 0;
    buf[n++] = *c->p++;
  }
  if (c->p >= c->end) return 0;
  c->p++;
  buf[n] = '\0';
  return 1;
}

static int npy_parse_word(npy_cursor_t* c, const char* w) {
  size_t n = strlen(w);
  if ((size_t)(c->end - c->p) < n || memcmp(c->p, w, n) != 0) return 0;
  /* the word must end here ("Truex" is not True) */
  if ((size_t)(c->end - c->p) > n) {
    char next = c->p[n];
    if ((next >= 'a' && next <= 'z') || (next >= 'A' && next <= 'Z') ||
        (next >= '0' && next <= '9') || next == '_')
      return 0;
  }
  c->p += n;
  return 1;
}

/* A non-negative decimal int64 in Python syntax (no leading zeros, no sign). 0 on error, with
 * *negative set when it was a minus sign. */
static int npy_parse_dim(npy_cursor_t* c, int64_t* out, int* negative) {
  *negative = 0;
  if (c->p < c->end && *c->p == '-') {
    *negative = 1;
    return 0;
  }
  if (c->p >= c->end || *c->p < '0' || *c->p > '9') return 0;
  if (*c->p == '0' && c->p + 1 < c->end && c->p[1] >= '0' && c->p[1] <= '9') return 0;
  int64_t v = 0;
  while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
    int d = *c->p++ - '0';
    if (v > (INT64_MAX - d) / 10) return 0;
    v = v * 10 + d;
  }
  *out = v;
  return 1;
}

typedef struct npy_header {
  const npy_type_t* type;
  int ndim;
  int64_t shape[KILN_NPY_MAX_DIMS];
  size_t nbytes;
} npy_header_t;

/* The dict literal of hlen bytes at h. */
static int npy_parse_header(const char* h, size_t hlen, npy_header_t* hd, char* err,
                            size_t errcap) {
  npy_cursor_t c = {h, h + hlen};
  int have_descr = 0, have_fortran = 0, have_shape = 0, fortran = 0;
  char descr[NPY_DESCR_MAX] = "";
  for (size_t i = 0; i < hlen; i++) {
    unsigned char b = (unsigned char)h[i];
    if (b >= 0x7f || (b < 0x20 && b != '\t' && b != '\n' && b != '\r'))
      return npy_error(err, errcap, KILN_ERROR_DATA_LOSS,
                       "header byte %zu (0x%02x) is not printable ASCII", i, b);
  }
  npy_skip_ws(&c);
  if (c.p >= c.end || *c.p != '{')
    return npy_error(err, errcap, KILN_ERROR_DATA_LOSS, "header is not a dict literal");
  c.p++;
  for (;;) {
    char key[32];
    npy_skip_ws(&c);
    if (c.p < c.end && *c.p == '}') break;
    if (!npy_parse_string(&c, key, sizeof key))
      return npy_error(err, errcap, KILN_ERROR_DATA_LOSS,
                       "header: expected a quoted key at offset %td", c.p - h);
    npy_skip_ws(&c);
    if (c.p >= c.end || *c.p != ':')
      return npy_error(err, errcap, KILN_ERROR_DATA_LOSS, "header: expected ':' after '%s'", key);
    c.p++;
    npy_skip_ws(&c);
    if (strcmp(key, "descr") == 0) {
      if (have_descr++)
        return npy_error(err, errcap, KILN_ERROR_DATA_LOSS, "header: duplicate key 'descr'");
      if (c.p < c.end && *c.p == '[')
        return npy_error(err, errcap, KILN_ERROR_UNIMPLEMENTED,
                         "structured dtypes are not supported");
      if (!npy_parse_string(&c, descr, sizeof descr))
        return npy_error(err, errcap, KILN_ERROR_DATA_LOSS,
                         "header: 'descr' is not a short quoted string");
    } else if (strcmp(key, "fortran_order") == 0) {
      if (have_fortran++)
        return npy_error(err, errcap, KILN_ERROR_DATA_LOSS,
                         "header: duplicate key 'fortran_order'");
      if (npy_parse_word(&c, "True")) fortran = 1;
      else if (npy_parse_word(&c, "False")) fortran = 0;
      else
        return npy_error(err, errcap, KILN_ERROR_DATA_LOSS,
                         "header: 'fortran_order' is not True or False");
    } else if (strcmp(key, "shape") == 0) {
      if (have_shape++)
        return npy_error(err, errcap, KILN_ERROR_DATA_LOSS, "header: duplicate key 'shape'");
      if (c.p >= c.end || *c.p != '(')
        return npy_error(err, errcap, KILN_ERROR_DATA_LOSS, "header: 'shape' is not a tuple");
      c.p++;
      int n = 0, comma = 0;
      for (;;) {
        npy_skip_ws(&c);
        if (c.p < c.end && *c.p == ')') break;
        if (n > 0 && !comma)
          return npy_error(err, errcap, KILN_ERROR_DATA_LOSS, "header: malformed 'shape'");
        if (n == KILN_NPY_MAX_DIMS)
          return npy_error(err, errcap, KILN_ERROR_UNIMPLEMENTED,
                           "more than %d dims are not supported", KILN_NPY_MAX_DIMS);
        int negative;
        if (!npy_parse_dim(&c, &hd->shape[n], &negative))
          return npy_error(err, errcap, KILN_ERROR_DATA_LOSS,
                           "header: dim %d of 'shape' is %s", n,
                           negative ? "negative" : "not a non-negative int64 literal");
        n++;
        npy_skip_ws(&c);
        comma = c.p < c.end && *c.p == ',';
        if (comma) c.p++;
      }
      if (n == 1 && !comma)
        return npy_error(err, errcap, KILN_ERROR_DATA_LOSS,
                         "header: 'shape' (%lld) is not a tuple (no comma)",
                         (long long)hd->shape[0]);
      c.p++; /* ')' */
      hd->ndim = n;
    } else {
      return npy_error(err, errcap, KILN_ERROR_DATA_LOSS, "header: unexpected key '%s'", key);
    }
    npy_skip_ws(&c);
    if (c.p < c.end && *c.p == ',') {
      c.p++;
      continue;
    }
    if (c.p < c.end && *c.p == '}') break;
    return npy_error(err, errcap, KILN_ERROR_DATA_LOSS, "header: expected ',' or '}' at offset %td",
                     c.p - h);
  }
  c.p++; /* '}' */
  npy_skip_ws(&c);
  if (c.p != c.end)
    return npy_error(err, errcap, KILN_ERROR_DATA_LOSS, "header: text after the dict");
  if (!have_descr || !have_fortran || !have_shape)
    return npy_error(err, errcap, KILN_ERROR_DATA_LOSS, "header: missing key '%s'",
                     !have_descr ? "descr" : !have_fortran ? "fortran_order" : "shape");

  const char* why;
  hd->type = npy_type_of_descr(descr, &why);
  if (!hd->type)
    return npy_error(err, errcap, KILN_ERROR_UNIMPLEMENTED, "descr '%s': %s", descr, why);
  if (fortran)
    return npy_error(err, errcap, KILN_ERROR_UNIMPLEMENTED,
                     "fortran_order True is not supported (save np.ascontiguousarray(a))");
  int64_t numel = 1, nonzero = 1;
  for (int d = 0; d < hd->ndim; d++) {
    if (hd->shape[d] == 0) numel = 0;
    else if (__builtin_mul_overflow(nonzero, hd->shape[d], &nonzero) || nonzero > NPY_NUMEL_MAX)
      return npy_error(err, errcap, KILN_ERROR_DATA_LOSS,
                       "shape too large (more than 2^48 elements, zero dims counted as 1)");
  }
  if (numel) numel = nonzero;
  hd->nbytes = (size_t)numel * hd->type->size; /* <= 2^51: no overflow */
  return KILN_OK;
}

/* The fixed prefix: magic, version, header length. Needs at least 12 bytes (or all of a
 * shorter file) at p. Sets *data_off (where the data starts) and the header span. */
static int npy_parse_prefix(const unsigned char* p, size_t avail, uint64_t file_size,
                            size_t* hoff, size_t* hlen, char* err, size_t errcap) {
  if (avail < NPY_MAGIC_LEN + 2 || memcmp(p, NPY_MAGIC, NPY_MAGIC_LEN) != 0)
    return npy_error(err, errcap, KILN_ERROR_DATA_LOSS, "not a .npy file (no \\x93NUMPY magic)");
  unsigned major = p[6], minor = p[7];
  if (minor != 0 || major < 1 || major > 3)
    return npy_error(err, errcap, KILN_ERROR_DATA_LOSS, "unsupported .npy format version %u.%u",
                     major, minor);
  size_t lenbytes = major == 1 ? 2 : 4;
  if (avail < 8 + lenbytes)
    return npy_error(err, errcap, KILN_ERROR_DATA_LOSS, "truncated .npy prefix");
  uint64_t n = (uint64_t)p[8] | (uint64_t)p[9] << 8;
  if (lenbytes == 4) n |= (uint64_t)p[10] << 16 | (uint64_t)p[11] << 24;
  *hoff = 8 + lenbytes;
  if (n > KILN_NPY_MAX_HEADER)
    return npy_error(err, errcap, KILN_ERROR_DATA_LOSS, "header length %llu exceeds the limit %d",
                     (unsigned long long)n, KILN_NPY_MAX_HEADER);
  if (n > file_size - *hoff)
    return npy_error(err, errcap, KILN_ERROR_DATA_LOSS,
                     "header length %llu runs past the end of the file (%llu bytes)",
                     (unsigned long long)n, (unsigned long long)file_size);
  *hlen = (size_t)n;
  return KILN_OK;
}

static int npy_check_size(const npy_header_t* hd, uint64_t avail, char* err, size_t errcap) {
  if (hd->nbytes > avail)
    return npy_error(err, errcap, KILN_ERROR_DATA_LOSS,
                     "truncated: the shape needs %zu data bytes, the file has %llu", hd->nbytes,
                     (unsigned long long)avail);
  if (hd->nbytes < avail)
    return npy_error(err, errcap, KILN_ERROR_DATA_LOSS,
                     "%llu trailing bytes after the %zu data bytes of the shape",
                     (unsigned long long)(avail - hd->nbytes), hd->nbytes);
  return KILN_OK;
}

/* Moves the parsed header into *out and allocates the data (at least 1 byte). */
static int npy_alloc(const npy_header_t* hd, kiln_npy_t* out, char* err, size_t errcap) {
  out->dtype = hd->type->dtype;
  out->ndim = hd->ndim;
  memcpy(out->shape, hd->shape, sizeof(int64_t) * (size_t)hd->ndim);
  out->nbytes = hd->nbytes;
  out->data = malloc(hd->nbytes ? hd->nbytes : 1);
  if (!out->data)
    return npy_error(err, errcap, KILN_ERROR_OUT_OF_MEMORY, "cannot allocate %zu bytes",
                     hd->nbytes);
  return KILN_OK;
}

static void npy_fix_bools(kiln_npy_t* a) {
  if (a->dtype != KILN_DTYPE_BOOL) return;
  unsigned char* b = a->data;
  for (size_t i = 0; i < a->nbytes; i++) b[i] = b[i] != 0;
}

/* ---- reading -------------------------------------------------------------------------------- */

int kiln_npy_read_buffer(const void* data, size_t size, kiln_npy_t* out, char* err,
                         size_t errcap) {
  if (!out) return npy_error(err, errcap, KILN_ERROR_INVALID_ARGUMENT, "NULL out");
  memset(out, 0, sizeof(*out));
  if (!data && size)
    return npy_error(err, errcap, KILN_ERROR_INVALID_ARGUMENT, "NULL data");
  const unsigned char* p = data;
  size_t hoff, hlen;
  npy_header_t hd;
  memset(&hd, 0, sizeof(hd));
  int s = npy_parse_prefix(p, size, size, &hoff, &hlen, err, errcap);
  if (s == KILN_OK) s = npy_parse_header((const char*)p + hoff, hlen, &hd, err, errcap);
  if (s == KILN_OK) s = npy_check_size(&hd, size - hoff - hlen, err, errcap);
  if (s == KILN_OK) s = npy_alloc(&hd, out, err, errcap);
  if (s != KILN_OK) {
    kiln_npy_free(out);
    return s;
  }
  if (hd.nbytes) memcpy(out->data, p + hoff + hlen, hd.nbytes);
  npy_fix_bools(out);
  return KILN_OK;
}

/* Prefixes the message already in err with "path: ". */
static int npy_with_path(const char* path, int code, char* err, size_t errcap) {
  if (code == KILN_OK || !err || errcap == 0) return code;
  char tmp[512];
  snprintf(tmp, sizeof tmp, "%s", err);
  snprintf(err, errcap, "%s: %s", path, tmp);
  return code;
}

static int npy_read_file(FILE* f, kiln_npy_t* out, char* err, size_t errcap) {
  struct stat st;
  if (fstat(fileno(f), &st) != 0)
    return npy_error(err, errcap, KILN_ERROR_INTERNAL, "fstat: %s", strerror(errno));
  if (!S_ISREG(st.st_mode))
    return npy_error(err, errcap, KILN_ERROR_DATA_LOSS, "not a regular file");
  uint64_t file_size = (uint64_t)st.st_size;
  unsigned char prefix[12];
  size_t got = fread(prefix, 1, sizeof prefix, f);
  size_t hoff, hlen;
  int s = npy_parse_prefix(prefix, got, file_size, &hoff, &hlen, err, errcap);
  if (s != KILN_OK) return s;
  /* the header (<= KILN_NPY_MAX_HEADER, and within the file: checked above) */
  char* h = malloc(hlen ? hlen : 1);
  if (!h) return npy_error(err, errcap, KILN_ERROR_OUT_OF_MEMORY, "cannot allocate the header");
  size_t have = got - hoff; /* header bytes already in prefix (0..2) */
  if (have > hlen) have = hlen;
  memcpy(h, prefix + hoff, have);
  npy_header_t hd;
  memset(&hd, 0, sizeof(hd));
  if (fread(h + have, 1, hlen - have, f) != hlen - have)
    s = npy_error(err, errcap, KILN_ERROR_DATA_LOSS, "truncated header (short read)");
  if (s == KILN_OK) s = npy_parse_header(h, hlen, &hd, err, errcap);
  free(h);
  if (s == KILN_OK) s = npy_check_size(&hd, file_size - hoff - hlen, err, errcap);
  if (s == KILN_OK) s = npy_alloc(&hd, out, err, errcap);
  if (s != KILN_OK) return s;
  /* data bytes already read into prefix (a header shorter than the prefix's 2 spare bytes) */
  size_t pre = got - hoff - have;
  if (pre > hd.nbytes) pre = hd.nbytes;
  memcpy(out->data, prefix + hoff + have, pre);
  if (fread((char*)out->data + pre, 1, hd.nbytes - pre, f) != hd.nbytes - pre)
    return npy_error(err, errcap, ferror(f) ? KILN_ERROR_INTERNAL : KILN_ERROR_DATA_LOSS,
                     "short read of the data (the file changed?)");
  npy_fix_bools(out);
  return KILN_OK;
}

int kiln_npy_read(const char* path, kiln_npy_t* out, char* err, size_t errcap) {
  if (!out) return npy_error(err, errcap, KILN_ERROR_INVALID_ARGUMENT, "NULL out");
  memset(out, 0, sizeof(*out));
  if (!path) return npy_error(err, errcap, KILN_ERROR_INVALID_ARGUMENT, "NULL path");
  FILE* f = fopen(path, "rb");
  if (!f)
    return npy_with_path(path,
                         npy_error(err, errcap, KILN_ERROR_NOT_FOUND, "cannot open: %s",
                                   strerror(errno)),
                         err, errcap);
  int s = npy_read_file(f, out, err, errcap);
  fclose(f);
  if (s != KILN_OK) kiln_npy_free(out);
  return npy_with_path(path, s, err, errcap);
}

void kiln_npy_free(kiln_npy_t* a) {
  if (!a) return;
  free(a->data);
  memset(a, 0, sizeof(*a));
}

/* ---- writing -------------------------------------------------------------------------------- */

int kiln_npy_write(const char* path, int dtype, int ndim, const int64_t* shape, const void* data,
                   char* err, size_t errcap) {
  const npy_type_t* t = npy_type_of_dtype(dtype);
  if (!path) return npy_error(err, errcap, KILN_ERROR_INVALID_ARGUMENT, "NULL path");
  if (!t)
    return npy_error(err, errcap, KILN_ERROR_INVALID_ARGUMENT, "%s: invalid dtype %d", path,
                     dtype);
  if (ndim < 0 || ndim > KILN_NPY_MAX_DIMS || (ndim > 0 && !shape))
    return npy_error(err, errcap, KILN_ERROR_INVALID_ARGUMENT, "%s: bad rank %d", path, ndim);
  int64_t numel = 1, nonzero = 1;
  for (int d = 0; d < ndim; d++) {
    if (shape[d] < 0)
      return npy_error(err, errcap, KILN_ERROR_INVALID_ARGUMENT, "%s: negative dim %lld", path,
                       (long long)shape[d]);
    if (shape[d] == 0) numel = 0;
    else if (__builtin_mul_overflow(nonzero, shape[d], &nonzero) || nonzero > NPY_NUMEL_MAX)
      return npy_error(err, errcap, KILN_ERROR_INVALID_ARGUMENT, "%s: shape too large", path);
  }
  size_t nbytes = numel ? (size_t)nonzero * t->size : 0;
  if (nbytes && !data)
    return npy_error(err, errcap, KILN_ERROR_INVALID_ARGUMENT, "%s: NULL data", path);

  /* numpy 2's np.save header: sorted keys, repr(shape), growth spaces, padding, '\n' */
  char h[512];
  int n = snprintf(h, sizeof h, "{'descr': '%s', 'fortran_order': False, 'shape': (", t->descr);
  for (int d = 0; d < ndim; d++)
    n += snprintf(h + n, sizeof h - (size_t)n, "%s%lld", d ? ", " : "", (long long)shape[d]);
  n += snprintf(h + n, sizeof h - (size_t)n, "%s), }", ndim == 1 ? "," : "");
  if (ndim > 0) {
    int digits = snprintf(NULL, 0, "%lld", (long long)shape[0]);
    for (int i = digits; i < 21; i++) h[n++] = ' ';
  }
  int hlen = n + 1; /* with the '\n' */
  int pad = NPY_ALIGN - (NPY_MAGIC_LEN + 2 + 2 + hlen) % NPY_ALIGN;
  int total = hlen + pad; /* < 512 + 64: version 1.0 always fits */
  unsigned char prefix[10];
  memcpy(prefix, NPY_MAGIC, NPY_MAGIC_LEN);
  prefix[6] = 1;
  prefix[7] = 0;
  prefix[8] = (unsigned char)(total & 0xff);
  prefix[9] = (unsigned char)(total >> 8);

  FILE* f = fopen(path, "wb");
  if (!f)
    return npy_error(err, errcap, KILN_ERROR_INTERNAL, "%s: cannot create: %s", path,
                     strerror(errno));
  int ok = fwrite(prefix, 1, sizeof prefix, f) == sizeof prefix &&
           fwrite(h, 1, (size_t)n, f) == (size_t)n;
  for (int i = 0; ok && i < pad; i++) ok = fputc(' ', f) != EOF;
  ok = ok && fputc('\n', f) != EOF;
  ok = ok && (nbytes == 0 || fwrite(data, 1, nbytes, f) == nbytes);
  int saved = errno;
  if (fclose(f) != 0 && ok) {
    ok = 0;
    saved = errno;
  }
  if (!ok) {
    struct stat st; /* a partial regular file goes; never a device such as /dev/stdout */
    if (stat(path, &st) == 0 && S_ISREG(st.st_mode)) remove(path);
    return npy_error(err, errcap, KILN_ERROR_INTERNAL, "%s: write failed: %s", path,
                     strerror(saved));
  }
  return KILN_OK;
}
