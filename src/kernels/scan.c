/* SPDX-License-Identifier: Apache-2.0 */
/* scan.c - cumulative sum / product along one dim (torch.cumsum, torch.cumprod).
 *
 * Floating compute accumulates in double, integer compute in 64 bits with wraparound; each
 * output is rounded through the compute dtype, then converted to out's dtype. Lines along `dim`
 * are independent: scanned one by one in converted chunks when `dim` is innermost in memory,
 * otherwise in blocks of up to 64 neighbouring lines. A chunk of x is read before the same
 * chunk of out is written, so out may alias x. */
#include <stdlib.h>
#include <string.h>

#include "kernels/ew_internal.h"
#include "kiln/kernels/reduce.h"
#include "kiln/parallel.h"

#define SCAN_BLOCK 64

typedef struct {
  int is_prod, is_float;
  kiln_dtype_t xdtype, odtype, compute, atype; /* atype: F64 or I64 */
  int64_t len, xstride, ostride;               /* along dim, bytes */
  int nk;
  int64_t kshape[KILN_MAX_DIMS], kxs[KILN_MAX_DIMS], kos[KILN_MAX_DIMS];
  const char* x;
  char* out;
} scan_plan_t;

/* Loads m elements (stride s) of x as the accumulation type, rounded through compute. */
static void load(const scan_plan_t* pl, const char* p, int64_t s, int64_t m, void* dst) {
  if (pl->xdtype == pl->compute) {
    kiln_cvt(pl->xdtype, p, s, pl->atype, dst, 8, m);
  } else {
    _Alignas(64) char tmp[KILN_EW_BLOCK * 8];
    const int64_t csz = (int64_t)kiln_dtype_size(pl->compute);
    kiln_cvt(pl->xdtype, p, s, pl->compute, tmp, csz, m);
    kiln_cvt(pl->compute, tmp, csz, pl->atype, dst, 8, m);
  }
}

static void store(const scan_plan_t* pl, const void* src, int64_t m, char* p, int64_t s) {
  _Alignas(64) char tmp[KILN_EW_BLOCK * 8];
  const int64_t csz = (int64_t)kiln_dtype_size(pl->compute);
  kiln_cvt(pl->atype, src, 8, pl->compute, tmp, csz, m);
  kiln_cvt(pl->compute, tmp, csz, pl->odtype, p, s, m);
}

static inline void step_f(int is_prod, double* acc, double v) {
  *acc = is_prod ? *acc * v : *acc + v;
}
static inline void step_i(int is_prod, int64_t* acc, int64_t v) {
  uint64_t a = (uint64_t)*acc, b = (uint64_t)v;
  uint64_t r = is_prod ? a * b : a + b;
  memcpy(acc, &r, 8);
}

static void line_ptrs(const scan_plan_t* pl, int64_t o, int first, const char** x, char** y) {
  *x = pl->x;
  *y = pl->out;
  for (int d = first; d < pl->nk; d++) {
    int64_t k = o % pl->kshape[d];
    o /= pl->kshape[d];
    *x += k * pl->kxs[d];
    *y += k * pl->kos[d];
  }
}

static void horizontal_job(void* ctx, int64_t begin, int64_t end, int thread_id) {
  (void)thread_id;
  const scan_plan_t* pl = ctx;
  _Alignas(64) char buf[KILN_EW_BLOCK * 8];
  for (int64_t o = begin; o < end; o++) {
    const char* x;
    char* y;
    line_ptrs(pl, o, 0, &x, &y);
    double af = pl->is_prod ? 1.0 : 0.0;
    int64_t ai = pl->is_prod ? 1 : 0;
    for (int64_t off = 0; off < pl->len; off += KILN_EW_BLOCK) {
      int64_t m = pl->len - off < KILN_EW_BLOCK ? pl->len - off : KILN_EW_BLOCK;
      load(pl, x + off * pl->xstride, pl->xstride, m, buf);
      if (pl->is_float) {
        double* v = (double*)buf;
        for (int64_t j = 0; j < m; j++) step_f(pl->is_prod, &af, v[j]), v[j] = af;
      } else {
        int64_t* v = (int64_t*)buf;
        for (int64_t j = 0; j < m; j++) step_i(pl->is_prod, &ai, v[j]), v[j] = ai;
      }
      store(pl, buf, m, y + off * pl->ostride, pl->ostride);
    }
  }
}

static void vertical_job(void* ctx, int64_t begin, int64_t end, int thread_id) {
  (void)thread_id;
  const scan_plan_t* pl = ctx;
  const int64_t nb = (pl->kshape[0] + SCAN_BLOCK - 1) / SCAN_BLOCK;
  _Alignas(64) char buf[SCAN_BLOCK * 8];
  double af[SCAN_BLOCK];
  int64_t ai[SCAN_BLOCK];
  for (int64_t t = begin; t < end; t++) {
    int64_t b = t % nb;
    const char* x;
    char* y;
    line_ptrs(pl, t / nb, 1, &x, &y);
    x += b * SCAN_BLOCK * pl->kxs[0];
    y += b * SCAN_BLOCK * pl->kos[0];
    int64_t w = pl->kshape[0] - b * SCAN_BLOCK;
    if (w > SCAN_BLOCK) w = SCAN_BLOCK;
    for (int64_t j = 0; j < w; j++) af[j] = pl->is_prod ? 1.0 : 0.0, ai[j] = pl->is_prod;
    for (int64_t i = 0; i < pl->len; i++) {
      load(pl, x + i * pl->xstride, pl->kxs[0], w, buf);
      if (pl->is_float) {
        double* v = (double*)buf;
        for (int64_t j = 0; j < w; j++) step_f(pl->is_prod, &af[j], v[j]), v[j] = af[j];
      } else {
        int64_t* v = (int64_t*)buf;
        for (int64_t j = 0; j < w; j++) step_i(pl->is_prod, &ai[j], v[j]), v[j] = ai[j];
      }
      store(pl, buf, w, y + i * pl->ostride, pl->kos[0]);
    }
  }
}

static kiln_status_t scan(int is_prod, const kiln_tensor_t* x, int dim, kiln_dtype_t compute,
                          kiln_tensor_t* out) {
  const char* name = is_prod ? "cumprod" : "cumsum";
  KILN_RETURN_IF_ERROR(kiln_check_tensor(x, name));
  KILN_RETURN_IF_ERROR(kiln_check_tensor(out, name));
  if ((int)compute < 0 || compute >= KILN_DTYPE_COUNT)
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s: invalid compute dtype %d", name,
                      (int)compute);
  int nd = x->ndim ? x->ndim : 1;
  if (dim < -nd || dim >= nd)
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s: dim %d out of range for rank %d", name,
                      dim, (int)x->ndim);
  if (dim < 0) dim += nd;
  int ok = out->ndim == x->ndim;
  for (int d = 0; ok && d < x->ndim; d++) ok = out->shape[d] == x->shape[d];
  if (!ok) {
    char b1[200], b2[200];
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s: output shape %s differs from input %s",
                      name, kiln_format_shape(b1, out->shape, out->ndim),
                      kiln_format_shape(b2, x->shape, x->ndim));
  }
  if (kiln_tensor_numel(x) == 0) return KILN_OK;
  scan_plan_t pl;
  memset(&pl, 0, sizeof pl);
  pl.is_prod = is_prod;
  pl.is_float = kiln_dtype_is_float(compute);
  pl.xdtype = x->dtype;
  pl.odtype = out->dtype;
  pl.compute = compute;
  pl.atype = pl.is_float ? KILN_DTYPE_F64 : KILN_DTYPE_I64;
  pl.x = x->data;
  pl.out = out->data;
  const int64_t xsz = (int64_t)kiln_dtype_size(x->dtype), osz = (int64_t)kiln_dtype_size(out->dtype);
  pl.len = x->ndim ? x->shape[dim] : 1;
  pl.xstride = x->ndim ? x->strides[dim] * xsz : 0;
  pl.ostride = x->ndim ? out->strides[dim] * osz : 0;
  int64_t n_lines = 1;
  for (int d = x->ndim - 1; d >= 0; d--) {
    if (d == dim || x->shape[d] == 1) continue;
    pl.kshape[pl.nk] = x->shape[d];
    pl.kxs[pl.nk] = x->strides[d] * xsz;
    pl.kos[pl.nk++] = out->strides[d] * osz;
    n_lines *= x->shape[d];
  }
  int best = 0;
  for (int d = 1; d < pl.nk; d++)
    if (llabs(pl.kxs[d]) < llabs(pl.kxs[best])) best = d;
  if (best) {
    int64_t t;
    t = pl.kshape[0]; pl.kshape[0] = pl.kshape[best]; pl.kshape[best] = t;
    t = pl.kxs[0]; pl.kxs[0] = pl.kxs[best]; pl.kxs[best] = t;
    t = pl.kos[0]; pl.kos[0] = pl.kos[best]; pl.kos[best] = t;
  }
  if (pl.nk > 0 && pl.kshape[0] >= 8 && llabs(pl.kxs[0]) < llabs(pl.xstride)) {
    int64_t tasks = (pl.kshape[0] + SCAN_BLOCK - 1) / SCAN_BLOCK * (n_lines / pl.kshape[0]);
    int64_t grain = 32768 / (SCAN_BLOCK * pl.len);
    if (grain < 1) grain = 1;
    if (tasks <= grain) vertical_job(&pl, 0, tasks, 0);
    else kiln_parallel_for(tasks, grain, vertical_job, &pl);
  } else {
    int64_t grain = 32768 / pl.len;
    if (grain < 1) grain = 1;
    if (n_lines <= grain) horizontal_job(&pl, 0, n_lines, 0);
    else kiln_parallel_for(n_lines, grain, horizontal_job, &pl);
  }
  return KILN_OK;
}

kiln_status_t kiln_kernel_cumsum(const kiln_tensor_t* x, int dim, kiln_dtype_t compute,
                                 kiln_tensor_t* out) {
  return scan(0, x, dim, compute, out);
}

kiln_status_t kiln_kernel_cumprod(const kiln_tensor_t* x, int dim, kiln_dtype_t compute,
                                  kiln_tensor_t* out) {
  return scan(1, x, dim, compute, out);
}
