/* SPDX-License-Identifier: Apache-2.0 */
/* shape_tri.c - triu / tril and repeat_interleave (see kiln/kernels/index.h).
 *
 * triu/tril walk matrix rows in parallel: the kept columns of a row are copied (skipped when out
 * aliases x), the others zeroed. repeat_interleave copies each source slice to its run of
 * destination slices; the run starts (a prefix sum of repeats) live on the stack for up to
 * RI_STACK slices. */
#include <stdio.h>

#include "kernels/index_internal.h"

/* ---- triu / tril ----------------------------------------------------------------------------- */

typedef struct tri_ctx {
  ki_nd_t w; /* batch dims: op 0 = x, op 1 = out */
  const char* x;
  char* out;
  int64_t M, N, xr, xc, orow, oc, diag;
  size_t es;
  int upper, inplace;
} tri_ctx_t;

static void zero_n(char* p, int64_t stride, int64_t n, size_t es) {
  if (n <= 0) return;
  if (stride == (int64_t)es) {
    memset(p, 0, (size_t)n * es);
    return;
  }
  for (int64_t i = 0; i < n; i++) memset(p + i * stride, 0, es);
}

static void tri_rows(void* arg, int64_t r0, int64_t r1, int tid) {
  (void)tid;
  const tri_ctx_t* c = arg;
  const int64_t es = (int64_t)c->es;
  for (int64_t r = r0; r < r1; r++) {
    const int64_t i = r % c->M, bt = r / c->M;
    int64_t off[2] = {0, 0};
    if (c->w.nd) {
      ki_nd_row(&c->w, bt / c->w.inner, off);
      off[0] += (bt % c->w.inner) * c->w.ist[0];
      off[1] += (bt % c->w.inner) * c->w.ist[1];
    }
    const char* xp = c->x + (off[0] + i * c->xr) * es;
    char* op = c->out + (off[1] + i * c->orow) * es;
    /* kept columns [lo, hi) */
    int64_t lo, hi;
    if (c->upper) {
      lo = i + c->diag;
      lo = lo < 0 ? 0 : lo > c->N ? c->N : lo;
      hi = c->N;
    } else {
      lo = 0;
      hi = i + c->diag + 1;
      hi = hi < 0 ? 0 : hi > c->N ? c->N : hi;
    }
    zero_n(op, c->oc * es, lo, c->es);
    zero_n(op + hi * c->oc * es, c->oc * es, c->N - hi, c->es);
    if (!c->inplace && hi > lo)
      ki_copy_n(op + lo * c->oc * es, c->oc * es, xp + lo * c->xc * es, c->xc * es, hi - lo,
                c->es);
  }
}

static kiln_status_t tri(const kiln_tensor_t* x, int64_t diagonal, kiln_tensor_t* out, int upper) {
  const char* op = upper ? "triu" : "tril";
  KILN_RETURN_IF_ERROR(kiln_idx_check(x, op, "x"));
  KILN_RETURN_IF_ERROR(kiln_idx_check(out, op, "out"));
  if (x->ndim < 2)
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT,
                      "%s: input tensor must have at least 2 dimensions, got %d", op,
                      (int)x->ndim);
  int ok = x->ndim == out->ndim;
  for (int d = 0; ok && d < x->ndim; d++) ok = x->shape[d] == out->shape[d];
  if (!ok) {
    char b1[200], b2[200];
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s: out %s must have x's shape %s", op,
                      kiln_idx_shape(out, b1), kiln_idx_shape(x, b2));
  }
  KILN_RETURN_IF_ERROR(kiln_idx_same_dtype(x, out, op, "x", "out"));
  if (kiln_tensor_numel(x) == 0) return KILN_OK;
  tri_ctx_t c;
  const int nb = x->ndim - 2;
  const int64_t* st[2] = {x->strides, out->strides};
  kiln_idx_nd_init(&c.w, nb, x->shape, 2, st, 1);
  c.x = x->data;
  c.out = out->data;
  c.M = x->shape[nb];
  c.N = x->shape[nb + 1];
  c.xr = x->strides[nb];
  c.xc = x->strides[nb + 1];
  c.orow = out->strides[nb];
  c.oc = out->strides[nb + 1];
  /* clamp so i + diag cannot overflow */
  const int64_t lim = c.M + c.N + 1;
  c.diag = diagonal > lim ? lim : diagonal < -lim ? -lim : diagonal;
  c.es = kiln_dtype_size(x->dtype);
  c.upper = upper;
  c.inplace = x->data == out->data;
  for (int d = 0; c.inplace && d < x->ndim; d++)
    c.inplace = x->shape[d] == 1 || x->strides[d] == out->strides[d];
  const int64_t rows = c.w.numel * c.M;
  kiln_parallel_for(rows, ki_grain(c.N), tri_rows, &c);
  return KILN_OK;
}

/* torch.triu (j - i >= diagonal kept). */
kiln_status_t kiln_kernel_triu(const kiln_tensor_t* x, int64_t diagonal, kiln_tensor_t* out) {
  return tri(x, diagonal, out, 1);
}

/* torch.tril (j - i <= diagonal kept). */
kiln_status_t kiln_kernel_tril(const kiln_tensor_t* x, int64_t diagonal, kiln_tensor_t* out) {
  return tri(x, diagonal, out, 0);
}

/* ---- repeat_interleave ----------------------------------------------------------------------- */

#define RI_STACK 1024

typedef struct ri_ctx {
  ki_nd_t w; /* rest dims: op 0 = x, op 1 = out */
  const char* x;
  char* out;
  const int64_t* start; /* S + 1 run starts */
  int64_t S, xsd, osd;
  size_t es;
} ri_ctx_t;

static void ri_units(void* arg, int64_t u0, int64_t u1, int tid) {
  (void)tid;
  const ri_ctx_t* c = arg;
  const int64_t es = (int64_t)c->es;
  for (int64_t u = u0; u < u1; u++) {
    const int64_t i = u / c->w.rows, r = u % c->w.rows;
    int64_t off[2];
    ki_nd_row(&c->w, r, off);
    const char* xp = c->x + (off[0] + i * c->xsd) * es;
    for (int64_t p = c->start[i]; p < c->start[i + 1]; p++)
      ki_copy_n(c->out + (off[1] + p * c->osd) * es, c->w.ist[1] * es, xp, c->w.ist[0] * es,
                c->w.inner, c->es);
  }
}

/* torch.repeat_interleave with a tensor of repeats along dim. */
kiln_status_t kiln_kernel_repeat_interleave(const kiln_tensor_t* x, const kiln_tensor_t* repeats,
                                            int dim, kiln_tensor_t* out) {
  const char* op = "repeat_interleave";
  KILN_RETURN_IF_ERROR(kiln_idx_check(x, op, "x"));
  KILN_RETURN_IF_ERROR(kiln_idx_check(repeats, op, "repeats"));
  KILN_RETURN_IF_ERROR(kiln_idx_check(out, op, "out"));
  KILN_RETURN_IF_ERROR(kiln_idx_check_index_dtype(repeats, 1, op, "repeats"));
  KILN_RETURN_IF_ERROR(kiln_idx_same_dtype(x, out, op, "x", "out"));
  if (x->ndim == 0)
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s: x must have rank >= 1 (flatten a 0-d x)",
                      op);
  KILN_RETURN_IF_ERROR(kiln_idx_wrap_dim(dim, x->ndim, op, &dim));
  const int64_t S = x->shape[dim], nrep = kiln_tensor_numel(repeats);
  char b1[200], b2[200];
  if (repeats->ndim > 1 || (nrep != S && nrep != 1))
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT,
                      "%s: repeats %s must be 1-d with one entry or x.shape[%d] = %lld entries",
                      op, kiln_idx_shape(repeats, b1), dim, (long long)S);
  int64_t stack[RI_STACK + 1];
  int64_t* start = stack;
  void* heap = NULL;
  if (S > RI_STACK) {
    heap = kiln_allocator_alloc(NULL, sizeof(int64_t) * (size_t)(S + 1), 64);
    if (!heap)
      return kiln_error(KILN_ERROR_OUT_OF_MEMORY, "%s: cannot allocate %lld run starts", op,
                        (long long)S);
    start = heap;
  }
  const int64_t rst = (repeats->ndim ? repeats->strides[0] : 0) *
                      (int64_t)kiln_dtype_size(repeats->dtype);
  start[0] = 0;
  kiln_status_t s = KILN_OK;
  for (int64_t i = 0; i < S && s == KILN_OK; i++) {
    const int64_t r = ki_load_index((const char*)repeats->data + (nrep == 1 ? 0 : i * rst),
                                    repeats->dtype);
    if (r < 0)
      s = kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s: repeats can not be negative, got %lld",
                     op, (long long)r);
    start[i + 1] = start[i] + r;
  }
  int ok = s == KILN_OK && out->ndim == x->ndim;
  for (int d = 0; ok && d < x->ndim; d++)
    ok = out->shape[d] == (d == dim ? start[S] : x->shape[d]);
  if (s == KILN_OK && !ok)
    s = kiln_error(KILN_ERROR_INVALID_ARGUMENT,
                   "%s: out %s must be x %s with dim %d of size %lld", op,
                   kiln_idx_shape(out, b1), kiln_idx_shape(x, b2), dim, (long long)start[S]);
  if (s == KILN_OK && kiln_tensor_numel(out) > 0) {
    ri_ctx_t c;
    int64_t rs[KILN_MAX_DIMS], rx[KILN_MAX_DIMS], ro[KILN_MAX_DIMS];
    int nr = 0;
    for (int d = 0; d < x->ndim; d++)
      if (d != dim) {
        rs[nr] = x->shape[d];
        rx[nr] = x->strides[d];
        ro[nr++] = out->strides[d];
      }
    const int64_t* st[2] = {rx, ro};
    kiln_idx_nd_init(&c.w, nr, rs, 2, st, 1);
    c.x = x->data;
    c.out = out->data;
    c.start = start;
    c.S = S;
    c.xsd = x->strides[dim];
    c.osd = out->strides[dim];
    c.es = kiln_dtype_size(x->dtype);
    const int64_t avg = S ? start[S] / S + 1 : 1;
    kiln_parallel_for(S * c.w.rows, ki_grain(c.w.inner * avg), ri_units, &c);
  }
  kiln_allocator_free(NULL, heap);
  return s;
}
