/* SPDX-License-Identifier: Apache-2.0 */
/* reduce_index.c - max/min with index along one dim (torch.max(x, dim), argmax, argmin).
 *
 * Lines along `dim` are independent. When `dim` is the innermost dim in memory each line is
 * scanned in converted chunks; otherwise blocks of up to 64 neighbouring lines are scanned
 * together, reading one contiguous-ish row per step. Values are compared as double (floats,
 * exact) or int64 (integers); NaN wins and stops the line, ties keep the first index. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/ew_internal.h"
#include "kiln/kernels/reduce.h"
#include "kiln/parallel.h"

#define IDX_BLOCK 64

typedef struct {
  int is_max, is_float;
  kiln_dtype_t xdtype, ctype; /* ctype: F64 or I64 */
  int64_t len, xstride;       /* along dim, bytes */
  int nk;
  int64_t kshape[KILN_MAX_DIMS], kxs[KILN_MAX_DIMS], kvs[KILN_MAX_DIMS], kis[KILN_MAX_DIMS];
  int vertical;               /* lines of K dim 0 scanned together */
  const char* x;
  kiln_tensor_t* values;      /* may be NULL */
  char* idata;
} idx_plan_t;

/* 1 if v replaces best (NaN first, then strictly better). */
static inline int better_f(int is_max, double v, double best) {
  if (best != best) return 0;
  if (v != v) return 1;
  return is_max ? v > best : v < best;
}
static inline int better_i(int is_max, int64_t v, int64_t best) {
  return is_max ? v > best : v < best;
}

static void store_result(const idx_plan_t* pl, const char* xline, int64_t best, char* vp,
                         char* ip) {
  *(int64_t*)ip = best;
  if (pl->values)
    kiln_cvt(pl->xdtype, xline + best * pl->xstride, 0, pl->values->dtype, vp, 0, 1);
}

static void line_ptrs(const idx_plan_t* pl, int64_t o, int first_dim, const char** x, char** v,
                      char** i) {
  *x = pl->x;
  *v = pl->values ? (char*)pl->values->data : NULL;
  *i = pl->idata;
  for (int d = first_dim; d < pl->nk; d++) {
    int64_t k = o % pl->kshape[d];
    o /= pl->kshape[d];
    *x += k * pl->kxs[d];
    if (*v) *v += k * pl->kvs[d];
    *i += k * pl->kis[d];
  }
}

static void horizontal_job(void* ctx, int64_t begin, int64_t end, int thread_id) {
  (void)thread_id;
  const idx_plan_t* pl = ctx;
  _Alignas(64) char buf[KILN_EW_BLOCK * 8];
  for (int64_t o = begin; o < end; o++) {
    const char* x;
    char *vp, *ip;
    line_ptrs(pl, o, 0, &x, &vp, &ip);
    int64_t best = 0;
    double bf = 0;
    int64_t bi = 0;
    for (int64_t off = 0; off < pl->len; off += KILN_EW_BLOCK) {
      int64_t m = pl->len - off < KILN_EW_BLOCK ? pl->len - off : KILN_EW_BLOCK;
      kiln_cvt(pl->xdtype, x + off * pl->xstride, pl->xstride, pl->ctype, buf, 8, m);
      if (pl->is_float) {
        const double* v = (const double*)buf;
        int64_t j = 0;
        if (off == 0) bf = v[0], j = 1;
        for (; j < m; j++)
          if (better_f(pl->is_max, v[j], bf)) bf = v[j], best = off + j;
        if (bf != bf) break;
      } else {
        const int64_t* v = (const int64_t*)buf;
        int64_t j = 0;
        if (off == 0) bi = v[0], j = 1;
        for (; j < m; j++)
          if (better_i(pl->is_max, v[j], bi)) bi = v[j], best = off + j;
      }
    }
    store_result(pl, x, best, vp, ip);
  }
}

static void vertical_job(void* ctx, int64_t begin, int64_t end, int thread_id) {
  (void)thread_id;
  const idx_plan_t* pl = ctx;
  const int64_t nb = (pl->kshape[0] + IDX_BLOCK - 1) / IDX_BLOCK;
  _Alignas(64) char buf[IDX_BLOCK * 8];
  double bf[IDX_BLOCK];
  int64_t bi[IDX_BLOCK], best[IDX_BLOCK];
  for (int64_t t = begin; t < end; t++) {
    int64_t b = t % nb;
    const char* x;
    char *vp, *ip;
    line_ptrs(pl, t / nb, 1, &x, &vp, &ip);
    x += b * IDX_BLOCK * pl->kxs[0];
    if (vp) vp += b * IDX_BLOCK * pl->kvs[0];
    ip += b * IDX_BLOCK * pl->kis[0];
    int64_t w = pl->kshape[0] - b * IDX_BLOCK;
    if (w > IDX_BLOCK) w = IDX_BLOCK;
    for (int64_t i = 0; i < pl->len; i++) {
      kiln_cvt(pl->xdtype, x + i * pl->xstride, pl->kxs[0], pl->ctype, buf, 8, w);
      if (pl->is_float) {
        const double* v = (const double*)buf;
        for (int64_t j = 0; j < w; j++)
          if (i == 0 || better_f(pl->is_max, v[j], bf[j])) bf[j] = v[j], best[j] = i;
      } else {
        const int64_t* v = (const int64_t*)buf;
        for (int64_t j = 0; j < w; j++)
          if (i == 0 || better_i(pl->is_max, v[j], bi[j])) bi[j] = v[j], best[j] = i;
      }
    }
    for (int64_t j = 0; j < w; j++)
      store_result(pl, x + j * pl->kxs[0], best[j], vp ? vp + j * pl->kvs[0] : NULL,
                   ip + j * pl->kis[0]);
  }
}

/* Flat argmax/argmin over every element in row-major order (any strides). */
static void reduce_all(const idx_plan_t* pl, const kiln_tensor_t* x, char* vp, char* ip) {
  const int64_t n = kiln_tensor_numel(x), xsz = (int64_t)kiln_dtype_size(x->dtype);
  int64_t idx[KILN_MAX_DIMS] = {0};
  const char* p = x->data;
  const char* bp = p;
  int64_t best = 0;
  double bf = 0;
  int64_t bi = 0;
  for (int64_t k = 0; k < n; k++) {
    if (pl->is_float) {
      double v = kiln_load_f64(p, x->dtype);
      if (k == 0 || better_f(pl->is_max, v, bf)) bf = v, best = k, bp = p;
      if (bf != bf) break;
    } else {
      int64_t v = kiln_load_i64(p, x->dtype);
      if (k == 0 || better_i(pl->is_max, v, bi)) bi = v, best = k, bp = p;
    }
    for (int d = x->ndim - 1; d >= 0; d--) {
      p += x->strides[d] * xsz;
      if (++idx[d] < x->shape[d]) break;
      p -= idx[d] * x->strides[d] * xsz;
      idx[d] = 0;
    }
  }
  *(int64_t*)ip = best;
  if (pl->values) kiln_cvt(x->dtype, bp, 0, pl->values->dtype, vp, 0, 1);
}

static kiln_status_t check_out(const kiln_tensor_t* x, int dim, const kiln_tensor_t* o,
                               const char* what) {
  KILN_RETURN_IF_ERROR(kiln_check_tensor(o, what));
  int ok = o->ndim == x->ndim;
  for (int d = 0; ok && d < x->ndim; d++) ok = o->shape[d] == (d == dim ? 1 : x->shape[d]);
  if (!ok && dim < 0) ok = kiln_tensor_numel(o) == 1;
  if (!ok) {
    char b1[200], b2[200];
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT,
                      "%s: output shape %s does not match input %s with dim %d of size 1", what,
                      kiln_format_shape(b1, o->shape, o->ndim), kiln_format_shape(b2, x->shape, x->ndim),
                      dim);
  }
  return KILN_OK;
}

kiln_status_t kiln_kernel_reduce_index(kiln_reduce_index_op_t op, const kiln_tensor_t* x, int dim,
                                       kiln_tensor_t* out_values, kiln_tensor_t* out_indices) {
  const char* name = op == KILN_REDUCE_INDEX_MIN ? "min(dim)" : "max(dim)";
  if (op != KILN_REDUCE_INDEX_MAX && op != KILN_REDUCE_INDEX_MIN)
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "reduce_index: invalid op %d", (int)op);
  KILN_RETURN_IF_ERROR(kiln_check_tensor(x, name));
  if (!out_indices || out_indices->dtype != KILN_DTYPE_I64)
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s: out_indices must be an i64 tensor", name);
  const int all = dim == KILN_REDUCE_INDEX_ALL_DIMS;
  if (!all) {
    int nd = x->ndim ? x->ndim : 1;
    if (dim < -nd || dim >= nd)
      return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s: dim %d out of range for rank %d", name,
                        dim, (int)x->ndim);
    if (dim < 0) dim += nd;
    if (x->ndim == 0) dim = -1; /* a scalar: the single element */
  } else {
    dim = -1;
  }
  KILN_RETURN_IF_ERROR(check_out(x, dim, out_indices, name));
  if (out_values) KILN_RETURN_IF_ERROR(check_out(x, dim, out_values, name));
  const int64_t len = all || dim < 0 ? kiln_tensor_numel(x) : x->shape[dim];
  if (len == 0 || kiln_tensor_numel(x) == 0)
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT,
                      "%s: Expected reduction dim to have non-zero size (empty input)", name);
  idx_plan_t pl;
  memset(&pl, 0, sizeof pl);
  pl.is_max = op == KILN_REDUCE_INDEX_MAX;
  pl.is_float = kiln_dtype_is_float(x->dtype);
  pl.xdtype = x->dtype;
  pl.ctype = pl.is_float ? KILN_DTYPE_F64 : KILN_DTYPE_I64;
  pl.x = x->data;
  pl.values = out_values;
  pl.idata = out_indices->data;
  if (dim < 0) {
    reduce_all(&pl, x, out_values ? out_values->data : NULL, out_indices->data);
    return KILN_OK;
  }
  const int64_t xsz = (int64_t)kiln_dtype_size(x->dtype);
  const int64_t vsz = out_values ? (int64_t)kiln_dtype_size(out_values->dtype) : 0;
  pl.len = len;
  pl.xstride = x->strides[dim] * xsz;
  int64_t n_lines = 1;
  for (int d = x->ndim - 1; d >= 0; d--) {
    if (d == dim || x->shape[d] == 1) continue;
    pl.kshape[pl.nk] = x->shape[d];
    pl.kxs[pl.nk] = x->strides[d] * xsz;
    pl.kvs[pl.nk] = out_values ? out_values->strides[d] * vsz : 0;
    pl.kis[pl.nk++] = out_indices->strides[d] * 8;
    n_lines *= x->shape[d];
  }
  if (n_lines == 0) return KILN_OK;
  /* Move the kept dim with the smallest x stride to the front. */
  int best = 0;
  for (int d = 1; d < pl.nk; d++)
    if (llabs(pl.kxs[d]) < llabs(pl.kxs[best])) best = d;
  if (best) {
    int64_t t;
    t = pl.kshape[0]; pl.kshape[0] = pl.kshape[best]; pl.kshape[best] = t;
    t = pl.kxs[0]; pl.kxs[0] = pl.kxs[best]; pl.kxs[best] = t;
    t = pl.kvs[0]; pl.kvs[0] = pl.kvs[best]; pl.kvs[best] = t;
    t = pl.kis[0]; pl.kis[0] = pl.kis[best]; pl.kis[best] = t;
  }
  pl.vertical = pl.nk > 0 && pl.kshape[0] >= 8 && llabs(pl.kxs[0]) < llabs(pl.xstride);
  if (pl.vertical) {
    int64_t tasks = (pl.kshape[0] + IDX_BLOCK - 1) / IDX_BLOCK * (n_lines / pl.kshape[0]);
    int64_t grain = 32768 / (IDX_BLOCK * len);
    if (grain < 1) grain = 1;
    if (tasks <= grain) vertical_job(&pl, 0, tasks, 0);
    else kiln_parallel_for(tasks, grain, vertical_job, &pl);
  } else {
    int64_t grain = 32768 / len;
    if (grain < 1) grain = 1;
    if (n_lines <= grain) horizontal_job(&pl, 0, n_lines, 0);
    else kiln_parallel_for(n_lines, grain, horizontal_job, &pl);
  }
  return KILN_OK;
}
