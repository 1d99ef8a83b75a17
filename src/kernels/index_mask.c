/* SPDX-License-Identifier: Apache-2.0 */
/* index_mask.c - masked_select and nonzero: outputs whose size depends on the data.
 *
 * Both run in two passes over the same fixed chunks of rows: count per chunk, an exclusive
 * prefix sum (in chunk order, on the caller), then each chunk writes from its offset. Output
 * order is row-major whatever the thread count; chunk counts live on the stack. */
#include <stdio.h>

#include "kernels/index_internal.h"

#define MK_MAX_CHUNKS 256

/* 1 if the element at p is non-zero (NaN is, -0.0 is not). */
static inline int nz1(const char* p, kiln_dtype_t dt) {
  switch (dt) {
    case KILN_DTYPE_F32: { float v; memcpy(&v, p, 4); return v != 0.0f; }
    case KILN_DTYPE_F64: { double v; memcpy(&v, p, 8); return v != 0.0; }
    case KILN_DTYPE_F16:
    case KILN_DTYPE_BF16: { uint16_t v; memcpy(&v, p, 2); return (v & 0x7fffu) != 0; }
    case KILN_DTYPE_I16: { uint16_t v; memcpy(&v, p, 2); return v != 0; }
    case KILN_DTYPE_I32: { uint32_t v; memcpy(&v, p, 4); return v != 0; }
    case KILN_DTYPE_I64: { uint64_t v; memcpy(&v, p, 8); return v != 0; }
    default: return *(const uint8_t*)p != 0;
  }
}

typedef struct mk_ctx {
  ki_nd_t w;           /* op 0 = tested tensor (mask or x), op 1 = x (masked_select) */
  const char* test;
  kiln_dtype_t tdt;
  const char* x;
  size_t es;
  char* out;
  int64_t ost0, ost1; /* out strides: masked_select dim 0; nonzero rows / columns */
  int nonzero, ndim;  /* nonzero: x's rank (coordinates per hit) */
  int64_t nch;
  int64_t counts[MK_MAX_CHUNKS];
  int64_t starts[MK_MAX_CHUNKS];
} mk_ctx_t;

static void mk_range(const mk_ctx_t* c, int64_t ch, int64_t* r0, int64_t* r1) {
  *r0 = c->w.rows * ch / c->nch;
  *r1 = c->w.rows * (ch + 1) / c->nch;
}

static void mk_count(void* arg, int64_t c0, int64_t c1, int tid) {
  (void)tid;
  mk_ctx_t* c = arg;
  const int64_t tes = (int64_t)kiln_dtype_size(c->tdt), ts = c->w.ist[0] * tes;
  for (int64_t ch = c0; ch < c1; ch++) {
    int64_t r0, r1, n = 0;
    mk_range(c, ch, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
      int64_t off[2];
      ki_nd_row(&c->w, r, off);
      const char* p = c->test + off[0] * tes;
      if (tes == 1 && ts == 1) {
        for (int64_t e = 0; e < c->w.inner; e++) n += p[e] != 0;
      } else {
        for (int64_t e = 0; e < c->w.inner; e++) n += nz1(p + e * ts, c->tdt);
      }
    }
    c->counts[ch] = n;
  }
}

static void mk_write(void* arg, int64_t c0, int64_t c1, int tid) {
  (void)tid;
  mk_ctx_t* c = arg;
  const int64_t tes = (int64_t)kiln_dtype_size(c->tdt), ts = c->w.ist[0] * tes;
  const int64_t es = (int64_t)c->es;
  for (int64_t ch = c0; ch < c1; ch++) {
    int64_t r0, r1, pos = c->starts[ch];
    mk_range(c, ch, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
      int64_t off[2];
      ki_nd_row(&c->w, r, off);
      const char* p = c->test + off[0] * tes;
      if (!c->nonzero) {
        const char* xp = c->x + off[1] * es;
        for (int64_t e = 0; e < c->w.inner; e++)
          if (nz1(p + e * ts, c->tdt))
            memcpy(c->out + (pos++) * c->ost0 * es, xp + e * c->w.ist[1] * es, c->es);
        continue;
      }
      int64_t coord[KILN_MAX_DIMS];
      int64_t rr = r;
      for (int d = c->ndim - 2; d >= 0; d--) {
        coord[d] = rr % c->w.shape[d];
        rr /= c->w.shape[d];
      }
      for (int64_t e = 0; e < c->w.inner; e++) {
        if (!nz1(p + e * ts, c->tdt)) continue;
        coord[c->ndim - 1] = e;
        int64_t* o = (int64_t*)c->out + (pos++) * c->ost0;
        for (int d = 0; d < c->ndim; d++) o[d * c->ost1] = coord[d];
      }
    }
  }
}

/* Counts per chunk and turns them into start offsets; returns the total. */
static int64_t mk_scan(mk_ctx_t* c) {
  const int64_t n = c->w.numel;
  c->nch = n / KI_GRAIN;
  if (c->nch < 1) c->nch = 1;
  if (c->nch > MK_MAX_CHUNKS) c->nch = MK_MAX_CHUNKS;
  if (c->nch > c->w.rows) c->nch = c->w.rows > 0 ? c->w.rows : 1;
  if (n == 0) {
    c->counts[0] = 0;
    c->starts[0] = 0;
    return 0;
  }
  kiln_parallel_for(c->nch, 1, mk_count, c);
  int64_t total = 0;
  for (int64_t ch = 0; ch < c->nch; ch++) {
    c->starts[ch] = total;
    total += c->counts[ch];
  }
  return total;
}

/* Broadcasts x and mask; fills the walk (op 0 = mask, op 1 = x). */
static kiln_status_t ms_setup(const kiln_tensor_t* x, const kiln_tensor_t* mask, mk_ctx_t* c) {
  const char* op = "masked_select";
  KILN_RETURN_IF_ERROR(kiln_idx_check(x, op, "x"));
  KILN_RETURN_IF_ERROR(kiln_idx_check(mask, op, "mask"));
  if (mask->dtype != KILN_DTYPE_BOOL)
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s: expected a bool mask, got %s", op,
                      kiln_dtype_name(mask->dtype));
  const int nd = x->ndim > mask->ndim ? x->ndim : mask->ndim;
  int64_t shape[KILN_MAX_DIMS], ms[KILN_MAX_DIMS], xs[KILN_MAX_DIMS];
  for (int d = 0; d < nd; d++) {
    const int dx = d - (nd - x->ndim), dm = d - (nd - mask->ndim);
    const int64_t sx = dx < 0 ? 1 : x->shape[dx], sm = dm < 0 ? 1 : mask->shape[dm];
    if (sx != sm && sx != 1 && sm != 1) {
      char b1[200], b2[200];
      return kiln_error(KILN_ERROR_INVALID_ARGUMENT,
                        "%s: mask %s does not broadcast with x %s", op, kiln_idx_shape(mask, b1),
                        kiln_idx_shape(x, b2));
    }
    shape[d] = sx > sm ? sx : sm;
    if (sx == 0 || sm == 0) shape[d] = 0;
    xs[d] = dx < 0 || sx == 1 ? 0 : x->strides[dx];
    ms[d] = dm < 0 || sm == 1 ? 0 : mask->strides[dm];
  }
  const int64_t* st[2] = {ms, xs};
  memset(c, 0, sizeof *c);
  kiln_idx_nd_init(&c->w, nd, shape, 2, st, 1);
  c->test = mask->data;
  c->tdt = mask->dtype;
  c->x = x->data;
  c->es = kiln_dtype_size(x->dtype);
  return KILN_OK;
}

/* Phase 1 of masked_select: the number of selected elements. */
kiln_status_t kiln_kernel_masked_select_count(const kiln_tensor_t* x, const kiln_tensor_t* mask,
                                              int64_t* count) {
  mk_ctx_t c;
  KILN_RETURN_IF_ERROR(ms_setup(x, mask, &c));
  *count = mk_scan(&c);
  return KILN_OK;
}

/* Phase 2 of masked_select: writes the selected elements in row-major order. */
kiln_status_t kiln_kernel_masked_select(const kiln_tensor_t* x, const kiln_tensor_t* mask,
                                        kiln_tensor_t* out) {
  const char* op = "masked_select";
  mk_ctx_t c;
  KILN_RETURN_IF_ERROR(ms_setup(x, mask, &c));
  KILN_RETURN_IF_ERROR(kiln_idx_check(out, op, "out"));
  KILN_RETURN_IF_ERROR(kiln_idx_same_dtype(x, out, op, "x", "out"));
  const int64_t total = mk_scan(&c);
  if (out->ndim != 1 || out->shape[0] != total) {
    char b[200];
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s: out %s must be [%lld]", op,
                      kiln_idx_shape(out, b), (long long)total);
  }
  if (total == 0) return KILN_OK;
  c.out = out->data;
  c.ost0 = out->strides[0];
  kiln_parallel_for(c.nch, 1, mk_write, &c);
  return KILN_OK;
}

static kiln_status_t nz_setup(const kiln_tensor_t* x, mk_ctx_t* c) {
  KILN_RETURN_IF_ERROR(kiln_idx_check(x, "nonzero", "x"));
  memset(c, 0, sizeof *c);
  const int64_t* st[1] = {x->strides};
  kiln_idx_nd_init(&c->w, x->ndim, x->shape, 1, st, 0); /* unmerged: coordinates needed */
  c->test = x->data;
  c->tdt = x->dtype;
  c->nonzero = 1;
  c->ndim = x->ndim;
  return KILN_OK;
}

/* Phase 1 of nonzero: the number of non-zero elements. */
kiln_status_t kiln_kernel_nonzero_count(const kiln_tensor_t* x, int64_t* count) {
  mk_ctx_t c;
  KILN_RETURN_IF_ERROR(nz_setup(x, &c));
  *count = mk_scan(&c);
  return KILN_OK;
}

/* Phase 2 of nonzero: writes their coordinates in row-major order. */
kiln_status_t kiln_kernel_nonzero(const kiln_tensor_t* x, kiln_tensor_t* out) {
  const char* op = "nonzero";
  mk_ctx_t c;
  KILN_RETURN_IF_ERROR(nz_setup(x, &c));
  KILN_RETURN_IF_ERROR(kiln_idx_check(out, op, "out"));
  if (out->dtype != KILN_DTYPE_I64)
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s: out must be i64, got %s", op,
                      kiln_dtype_name(out->dtype));
  const int64_t total = mk_scan(&c);
  if (out->ndim != 2 || out->shape[0] != total || out->shape[1] != x->ndim) {
    char b[200];
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s: out %s must be [%lld, %d]", op,
                      kiln_idx_shape(out, b), (long long)total, (int)x->ndim);
  }
  if (total == 0 || x->ndim == 0) return KILN_OK;
  c.out = out->data;
  c.ost0 = out->strides[0];
  c.ost1 = out->strides[1];
  kiln_parallel_for(c.nch, 1, mk_write, &c);
  return KILN_OK;
}
