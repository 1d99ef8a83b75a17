/* SPDX-License-Identifier: Apache-2.0 */
/* fuzz_builder.c - libFuzzer harness for the graph builder API (include/kiln/graph.h).
 *
 * The input is decoded as compile flags and a sequence of builder calls (fuzz_builder_ops.h).
 * Every call must either succeed or fail leaving the graph unchanged; the graph is then dumped,
 * compiled with the flags and, when that succeeds, run on bounded inputs and round-tripped
 * through save/load (fuzz_common.c).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_builder_ops.h"
#include "fuzz_common.h"
#include "kiln/dtype.h"

int LLVMFuzzerInitialize(int* argc, char*** argv) {
  (void)argc;
  (void)argv;
  kf_init();
  return 0;
}

typedef struct {
  const uint8_t* p;
  size_t n, pos;
  kiln_graph_t* g;
  int vals[FB_MAX_VALUES];
  int nv;
  int n_outputs;
} dec_t;

static int more(const dec_t* d) { return d->pos < d->n; }
static int u8(dec_t* d) { return d->pos < d->n ? d->p[d->pos++] : 0; }
static int i8(dec_t* d) { return (int)(int8_t)u8(d); }
static int i16(dec_t* d) {
  int lo = u8(d);
  return (int)(int16_t)(lo | u8(d) << 8);
}
static double f8(dec_t* d) { return i8(d) / 4.0; }
static int dt(dec_t* d) { return u8(d); }
static int dt_opt(dec_t* d) {
  int b = u8(d);
  return b == FB_NONE ? -1 : b;
}
static int val(dec_t* d) {
  int b = u8(d);
  if (b == FB_NONE) return -1;
  return d->nv ? d->vals[b % d->nv] : b; /* no values yet: an unknown id */
}
/* s has room for 10 dims: rank 9 (invalid) reaches the builder's rank check */
static int shape(dec_t* d, int64_t* s) {
  int nd = u8(d);
  if (nd > 8) nd %= 10;
  for (int i = 0; i < nd; i++) {
    int b = u8(d);
    s[i] = b == FB_NONE ? -1 : b % 32;
  }
  return nd;
}
static void pair(dec_t* d, int64_t* p) {
  p[0] = u8(d);
  p[1] = u8(d);
}

static void keep(dec_t* d, int vid) {
  if (vid >= 0 && d->nv < FB_MAX_VALUES) d->vals[d->nv++] = vid;
}

static int64_t numel_of(int ndim, const int64_t* s) {
  int64_t n = 1;
  for (int i = 0; i < ndim; i++) n *= s[i];
  return n;
}

/* FB_CONSTANT: data per the fill byte (see fuzz_builder_ops.h). */
static kiln_status_t constant(dec_t* d, int* out) {
  int dtype = dt(d);
  int64_t s[10];
  int nd = shape(d, s);
  int fill = u8(d);
  for (int i = 0; i < nd; i++)
    if (s[i] < 0) s[i] = 0;
  size_t es = kiln_dtype_size((kiln_dtype_t)dtype);
  int64_t n = numel_of(nd, s);
  if (n > (1 << 20)) return KILN_ERROR_INVALID_ARGUMENT; /* not tried: the graph is unchanged */
  unsigned char* data = calloc((size_t)n * (es ? es : 1) + 1, 1);
  if (!data) return KILN_ERROR_OUT_OF_MEMORY;
  uint64_t r = (uint64_t)fill * 0x9e3779b97f4a7c15ull + 1;
  for (int64_t i = 0; i < n && es; i++) {
    r = r * 6364136223846793005ull + 1442695040888963407ull;
    int mode = fill >> 6;
    double v = mode == 0 ? (double)(r >> 40) / 16777216.0 * 2.0 - 1.0
               : mode == 1 ? (double)(fill & 63) : (double)i;
    int64_t k = mode == 0 ? (int64_t)((r >> 33) % (uint64_t)((fill & 63) + 1)) : (int64_t)v;
    unsigned char* q = data + (size_t)i * es;
    if (mode == 3) {
      for (size_t b = 0; b < es; b++) q[b] = (unsigned char)u8(d);
      continue;
    }
    switch (dtype) {
      case KILN_DTYPE_F32: { float f = (float)v; memcpy(q, &f, 4); break; }
      case KILN_DTYPE_F64: memcpy(q, &v, 8); break;
      case KILN_DTYPE_F16:
      case KILN_DTYPE_BF16: { /* via f32 bits: bf16 truncation, f16 left as bf16-like bits */
        float f = (float)v;
        uint32_t u;
        memcpy(&u, &f, 4);
        uint16_t h = (uint16_t)(u >> 16);
        memcpy(q, &h, 2);
        break;
      }
      case KILN_DTYPE_I8:
      case KILN_DTYPE_U8: *q = (unsigned char)k; break;
      case KILN_DTYPE_BOOL: *q = (unsigned char)(k != 0); break;
      case KILN_DTYPE_I16: { int16_t x = (int16_t)k; memcpy(q, &x, 2); break; }
      case KILN_DTYPE_I32: { int32_t x = (int32_t)k; memcpy(q, &x, 4); break; }
      case KILN_DTYPE_I64: memcpy(q, &k, 8); break;
      default: break;
    }
  }
  kiln_status_t st = kiln_graph_constant(d->g, dtype, nd, s, data, out);
  free(data);
  return st;
}

/* Decodes and applies one record. Results go to r[0..3) (-1 = none). */
static kiln_status_t step(dec_t* d, int op, int* r) {
  kiln_graph_t* g = d->g;
  int64_t s[10], a2[2], b2[2], c2[2], e2[2];
  switch (op) {
    case FB_INPUT: {
      int dtype = dt(d), nd = shape(d, s);
      return kiln_graph_input(g, dtype, nd, s, &r[0]);
    }
    case FB_CONSTANT: return constant(d, &r[0]);
    case FB_SCALAR: {
      double v = f8(d);
      return kiln_graph_scalar(g, v, dt(d), &r[0]);
    }
    case FB_SCALAR_I64: {
      int v = i16(d);
      return kiln_graph_scalar_i64(g, v, dt(d), &r[0]);
    }
    case FB_FULL: {
      int dtype = dt(d), nd = shape(d, s);
      return kiln_graph_full(g, dtype, nd, s, f8(d), &r[0]);
    }
    case FB_UNARY: {
      int o = u8(d), x = val(d);
      return kiln_graph_unary(g, o, x, dt(d), &r[0]);
    }
    case FB_UNARY_EX: {
      int o = u8(d), x = val(d);
      double p[6];
      for (int k = 0; k < 6; k++) p[k] = f8(d);
      int has = u8(d);
      return kiln_graph_unary_ex(g, o, x, p[0], p[1], p[2], p[3], p[4], p[5], has & 1,
                                 (has >> 1) & 1, dt(d), &r[0]);
    }
    case FB_BINARY: {
      int o = u8(d), a = val(d), b = val(d);
      double al = f8(d);
      return kiln_graph_binary(g, o, a, b, al, dt(d), &r[0]);
    }
    case FB_BINARY_EX: {
      int o = u8(d), a = val(d), b = val(d);
      double al = f8(d);
      int cd = dt_opt(d);
      return kiln_graph_binary_ex(g, o, a, b, al, cd, dt(d), &r[0]);
    }
    case FB_TERNARY: {
      int o = u8(d), a = val(d), b = val(d), c = val(d);
      double sc = f8(d);
      return kiln_graph_ternary(g, o, a, b, c, sc, dt(d), &r[0]);
    }
    case FB_WHERE: {
      int c = val(d), a = val(d), b = val(d);
      return kiln_graph_where(g, c, a, b, &r[0]);
    }
    case FB_CAST: {
      int x = val(d);
      return kiln_graph_cast(g, x, dt(d), &r[0]);
    }
    case FB_COPY: {
      int a = val(d), b = val(d);
      return kiln_graph_copy(g, a, b, &r[0]);
    }
    case FB_REDUCE: {
      int o = u8(d), x = val(d), mask = u8(d), kd = u8(d);
      double p = f8(d);
      return kiln_graph_reduce(g, o, x, (uint32_t)mask, kd, p, dt(d), &r[0]);
    }
    case FB_REDUCE_INDEX: {
      int o = u8(d), x = val(d), dim = i8(d), kd = u8(d);
      if (dim == -128) dim = INT32_MIN; /* KILN_REDUCE_INDEX_ALL_DIMS */
      return kiln_graph_reduce_index(g, o, x, dim, kd, &r[0], &r[1]);
    }
    case FB_SCAN: {
      int o = u8(d), x = val(d), dim = i8(d);
      return kiln_graph_scan(g, o, x, dim, dt(d), &r[0]);
    }
    case FB_MATMUL: {
      int a = val(d), b = val(d);
      return kiln_graph_matmul(g, a, b, &r[0]);
    }
    case FB_ADDMM: {
      int c = val(d), a = val(d), b = val(d);
      double be = f8(d), al = f8(d);
      return kiln_graph_addmm(g, c, a, b, be, al, &r[0]);
    }
    case FB_RESHAPE: {
      int x = val(d), nd = shape(d, s);
      return kiln_graph_reshape(g, x, nd, s, &r[0]);
    }
    case FB_PERMUTE: {
      int x = val(d), nd = 0, perm[8];
      if (kiln_graph_value_info(g, x, NULL, &nd, NULL) != KILN_OK) nd = 0;
      for (int k = 0; k < nd; k++) perm[k] = i8(d);
      return kiln_graph_permute(g, x, perm, &r[0]);
    }
    case FB_EXPAND: {
      int x = val(d), nd = shape(d, s);
      return kiln_graph_expand(g, x, nd, s, &r[0]);
    }
    case FB_SLICE: {
      int x = val(d), dim = i8(d);
      int64_t st = i8(d), en = i8(d), sp = u8(d);
      if (en == 127) en = INT64_MAX;
      return kiln_graph_slice(g, x, dim, st, en, sp, &r[0]);
    }
    case FB_SELECT: {
      int x = val(d), dim = i8(d), ix = i8(d);
      return kiln_graph_select(g, x, dim, ix, &r[0]);
    }
    case FB_CONTIGUOUS: return kiln_graph_contiguous(g, val(d), &r[0]);
    case FB_CAT: {
      int n = 1 + u8(d) % 4, ids[4];
      for (int k = 0; k < n; k++) ids[k] = val(d);
      return kiln_graph_cat(g, n, ids, i8(d), &r[0]);
    }
    case FB_SOFTMAX: {
      int x = val(d), dim = i8(d), lg = u8(d);
      return kiln_graph_softmax(g, x, dim, lg, dt_opt(d), &r[0]);
    }
    case FB_SOFTMAX_BW: {
      int go = val(d), o = val(d), dim = i8(d), lg = u8(d);
      return kiln_graph_softmax_backward(g, go, o, dim, lg, dt_opt(d), &r[0]);
    }
    case FB_LAYER_NORM: {
      int x = val(d), w = val(d), b = val(d), nn = u8(d);
      return kiln_graph_layer_norm(g, x, w, b, nn, fabs(f8(d)) / 64.0, &r[0], &r[1], &r[2]);
    }
    case FB_LAYER_NORM_BW: {
      int go = val(d), x = val(d), m = val(d), rs = val(d), w = val(d), nn = u8(d), mk = u8(d);
      return kiln_graph_layer_norm_backward(g, go, x, m, rs, w, nn, mk, &r[0], &r[1], &r[2]);
    }
    case FB_RMS_NORM: {
      int x = val(d), w = val(d), nn = u8(d);
      return kiln_graph_rms_norm(g, x, w, nn, f8(d) / 64.0, &r[0], &r[1]);
    }
    case FB_RMS_NORM_BW: {
      int go = val(d), x = val(d), rs = val(d), w = val(d), nn = u8(d), mk = u8(d);
      return kiln_graph_rms_norm_backward(g, go, x, rs, w, nn, mk, &r[0], &r[1]);
    }
    case FB_EMBEDDING: {
      int w = val(d), ix = val(d);
      return kiln_graph_embedding(g, w, ix, &r[0]);
    }
    case FB_EMBEDDING_BW: {
      int go = val(d), ix = val(d), nw = u8(d), pad = i8(d), sc = u8(d);
      return kiln_graph_embedding_backward(g, go, ix, nw, pad, sc, &r[0]);
    }
    case FB_NLL_LOSS: {
      int lp = val(d), t = val(d), w = val(d), red = u8(d), ig = i8(d);
      return kiln_graph_nll_loss(g, lp, t, w, red, ig, &r[0], &r[1]);
    }
    case FB_NLL_LOSS_BW: {
      int go = val(d), lp = val(d), t = val(d), w = val(d), red = u8(d), ig = i8(d), tw = val(d);
      return kiln_graph_nll_loss_backward(g, go, lp, t, w, red, ig, tw, &r[0]);
    }
    case FB_SDPA: {
      int q = val(d), k = val(d), v = val(d), m = val(d), c = u8(d);
      double sc = f8(d);
      return kiln_graph_sdpa(g, q, k, v, m, c, sc == 0 ? NAN : sc, &r[0], &r[1]);
    }
    case FB_SDPA_BW: {
      int go = val(d), q = val(d), k = val(d), v = val(d), o = val(d), l = val(d), m = val(d);
      int c = u8(d);
      double sc = f8(d);
      int mk = u8(d);
      return kiln_graph_sdpa_backward(g, go, q, k, v, o, l, m, c, sc == 0 ? NAN : sc,
                                      (mk & 1) ? &r[0] : NULL, (mk & 2) ? &r[1] : NULL,
                                      (mk & 4) ? &r[2] : NULL);
    }
    case FB_CONV2D: {
      int x = val(d), w = val(d), b = val(d);
      pair(d, a2);
      pair(d, b2);
      pair(d, c2);
      return kiln_graph_conv2d(g, x, w, b, a2, b2, c2, u8(d), &r[0]);
    }
    case FB_CONV2D_BW: {
      int go = val(d), x = val(d), w = val(d);
      pair(d, a2);
      pair(d, b2);
      pair(d, c2);
      int grp = u8(d), mk = u8(d);
      return kiln_graph_conv2d_backward(g, go, x, w, a2, b2, c2, grp, (mk & 1) ? &r[0] : NULL,
                                        (mk & 2) ? &r[1] : NULL, (mk & 4) ? &r[2] : NULL);
    }
    case FB_MAX_POOL: {
      int x = val(d);
      pair(d, a2);
      pair(d, b2);
      pair(d, c2);
      pair(d, e2);
      int ceil = u8(d), want = u8(d);
      return kiln_graph_max_pool2d(g, x, a2, (b2[0] | b2[1]) ? b2 : NULL, c2, e2, ceil, &r[0],
                                   (want & 1) ? &r[1] : NULL);
    }
    case FB_MAX_POOL_BW: {
      int go = val(d), ix = val(d), h = u8(d), w = u8(d);
      return kiln_graph_max_pool2d_backward(g, go, ix, h, w, &r[0]);
    }
    case FB_AVG_POOL: {
      int x = val(d);
      pair(d, a2);
      pair(d, b2);
      pair(d, c2);
      int ceil = u8(d), cp = u8(d), dv = u8(d);
      return kiln_graph_avg_pool2d(g, x, a2, (b2[0] | b2[1]) ? b2 : NULL, c2, ceil, cp, dv,
                                   &r[0]);
    }
    case FB_AVG_POOL_BW: {
      int go = val(d), h = u8(d), w = u8(d);
      pair(d, a2);
      pair(d, b2);
      pair(d, c2);
      int ceil = u8(d), cp = u8(d), dv = u8(d);
      return kiln_graph_avg_pool2d_backward(g, go, h, w, a2, (b2[0] | b2[1]) ? b2 : NULL, c2,
                                            ceil, cp, dv, &r[0]);
    }
    case FB_ADAPTIVE_POOL: {
      int x = val(d), h = u8(d), w = u8(d);
      return kiln_graph_adaptive_avg_pool2d(g, x, h, w, &r[0]);
    }
    case FB_ADAPTIVE_POOL_BW: {
      int go = val(d), h = u8(d), w = u8(d);
      return kiln_graph_adaptive_avg_pool2d_backward(g, go, h, w, &r[0]);
    }
    case FB_GATHER: {
      int x = val(d), dim = i8(d), ix = val(d);
      return kiln_graph_gather(g, x, dim, ix, &r[0]);
    }
    case FB_INDEX_SELECT: {
      int x = val(d), dim = i8(d), ix = val(d);
      return kiln_graph_index_select(g, x, dim, ix, &r[0]);
    }
    case FB_SCATTER: {
      int x = val(d), dim = i8(d), ix = val(d), src = val(d);
      double v = f8(d);
      int red = u8(d), is = u8(d);
      return kiln_graph_scatter(g, x, dim, ix, src, v, red, is, &r[0]);
    }
    case FB_INDEX: {
      int x = val(d), n = u8(d) % 5, ids[4];
      for (int k = 0; k < n; k++) ids[k] = val(d);
      return kiln_graph_index(g, x, n, ids, &r[0]);
    }
    case FB_INDEX_PUT: {
      int x = val(d), n = u8(d) % 5, ids[4];
      for (int k = 0; k < n; k++) ids[k] = val(d);
      int v = val(d), acc = u8(d);
      return kiln_graph_index_put(g, x, n, ids, v, acc, &r[0]);
    }
    case FB_OUTPUT: {
      kiln_status_t st = kiln_graph_output(g, val(d));
      if (st == KILN_OK) d->n_outputs++;
      return st;
    }
    default: return KILN_OK;
  }
}

kiln_graph_t* fb_decode(const uint8_t* data, size_t size, int* flags, int* n_failed) {
  dec_t d;
  memset(&d, 0, sizeof d);
  d.p = data;
  d.n = size;
  *flags = i16(&d) & 0xffff;
  *n_failed = 0;
  if (kiln_graph_create(&d.g) != KILN_OK) return NULL;
  int records = 0;
  while (more(&d) && records++ < 256) {
    int op = u8(&d) % FB_COUNT;
    int r[3] = {-1, -1, -1};
    int nv0 = kiln_graph_num_values(d.g), nin0 = kiln_graph_num_inputs(d.g);
    int nout0 = kiln_graph_num_outputs(d.g);
    kiln_status_t st = step(&d, op, r);
    if (st != KILN_OK) {
      if (kiln_graph_num_values(d.g) != nv0 || kiln_graph_num_inputs(d.g) != nin0 ||
          kiln_graph_num_outputs(d.g) != nout0)
        kf_fail("a failed builder call changed the graph");
      ++*n_failed;
      continue;
    }
    for (int k = 0; k < 3; k++) {
      if (r[k] < 0) continue;
      if (kiln_graph_value_info(d.g, r[k], NULL, NULL, NULL) != KILN_OK)
        kf_fail("a builder call returned an unknown value id");
      keep(&d, r[k]);
    }
  }
  if (d.n_outputs == 0 && d.nv > 0) kiln_graph_output(d.g, d.vals[d.nv - 1]);
  return d.g;
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  int flags, n_failed;
  kiln_graph_t* g = fb_decode(data, size, &flags, &n_failed);
  if (!g) return 0;
  size_t need = 0;
  if (kiln_graph_dump(g, NULL, 0, &need) != KILN_OK || need == 0) kf_fail("kiln_graph_dump");
  kiln_exec_t* e = NULL;
  if (kiln_graph_compile_ex(g, flags, &e) == KILN_OK) {
    kiln_graph_destroy(g); /* the exec must not depend on the graph */
    g = NULL;
    kf_exercise(e, size);
    kiln_exec_destroy(e);
  }
  kiln_graph_destroy(g);
  return 0;
}
