/* SPDX-License-Identifier: Apache-2.0 */
/* index_scatter.c - scatter_, scatter_(reduce=), scatter_add_ and scatter_reduce_.
 *
 * The target of index[..., j, ...] is self[..., index, ...]: it shares every coordinate but
 * `dim` with its index position, so positions that differ outside `dim` never collide. Work units
 * are blocks of up to KI_BLOCK positions of the other dims ("rest"); inside a unit j runs over
 * dim in increasing order, so duplicates combine in index order on any thread count (and the
 * last write wins for a plain scatter). */
#include <stdio.h>

#include "kernels/half.h"
#include "kernels/index_internal.h"
#include "kiln/kernels/elementwise.h"

#define SC_STACK_COUNTS 512 /* MEAN: per-target counters kept on the stack up to this size */

typedef struct sc_ctx {
  ki_nd_t w; /* rest dims: op 0 = self, 1 = index, 2 = src */
  char* self;
  const char* idx;
  const char* src;
  kiln_dtype_t dt;
  size_t es;
  int64_t J, ssd, isd, xsd, nblk, bw; /* bw: block width */
  ki_op_t op;
  int include_self, mean;
  _Alignas(8) char ident[8];
  int64_t* counts; /* MEAN with a large dim: size(dim) counters per thread */
  kiln_dtype_t mean_round; /* f32 shadow of f16/bf16: round the sum to it before dividing */
  int64_t size_dim;
} sc_ctx_t;

/* Byte offsets into self of the targets of column j for w rest elements. */
static inline void sc_targets(const sc_ctx_t* c, const int64_t* off, int64_t e0, int64_t w,
                              int64_t j, int64_t* doff) {
  const int64_t es = (int64_t)c->es;
  const int64_t* ip = (const int64_t*)c->idx + off[1] + e0 * c->w.ist[1] + j * c->isd;
  const int64_t sb = off[0] + e0 * c->w.ist[0];
  for (int64_t e = 0; e < w; e++)
    doff[e] = (sb + e * c->w.ist[0] + ip[e * c->w.ist[1]] * c->ssd) * es;
}

static void sc_units(void* arg, int64_t u0, int64_t u1, int tid) {
  const sc_ctx_t* c = arg;
  const int64_t es = (int64_t)c->es;
  int64_t doff[KI_BLOCK];
  int64_t stack_counts[SC_STACK_COUNTS];
  int64_t* cnt = c->counts ? c->counts + (int64_t)tid * c->size_dim : stack_counts;
  if (c->mean && !c->counts) memset(cnt, 0, sizeof(int64_t) * (size_t)c->size_dim);
  for (int64_t u = u0; u < u1; u++) {
    const int64_t r = u / c->nblk, e0 = (u % c->nblk) * c->bw;
    const int64_t w = c->w.inner - e0 < c->bw ? c->w.inner - e0 : c->bw;
    int64_t off[3];
    ki_nd_row(&c->w, r, off);
    const char* xb = c->src + (off[2] + e0 * c->w.ist[2]) * es;
    if (!c->include_self)
      for (int64_t j = 0; j < c->J; j++) {
        sc_targets(c, off, e0, w, j, doff);
        for (int64_t e = 0; e < w; e++) memcpy(c->self + doff[e], c->ident, c->es);
      }
    for (int64_t j = 0; j < c->J; j++) {
      sc_targets(c, off, e0, w, j, doff);
      kiln_idx_combine(c->dt, c->op, c->self, doff, 0, xb + j * c->xsd * es, c->w.ist[2] * es, w,
                       1.0);
    }
    if (c->mean) { /* w == 1: count the hits per target, then divide each target once */
      const int64_t* ip = (const int64_t*)c->idx + off[1] + e0 * c->w.ist[1];
      for (int64_t j = 0; j < c->J; j++) cnt[ip[j * c->isd]]++;
      const int64_t base = (off[0] + e0 * c->w.ist[0]) * es;
      for (int64_t j = 0; j < c->J; j++) {
        const int64_t v = ip[j * c->isd];
        if (cnt[v] == 0) continue;
        char* t = c->self + base + v * c->ssd * es;
        if (c->mean_round != KILN_DTYPE_COUNT) { /* c->dt is f32 here */
          float f;
          memcpy(&f, t, 4);
          f = c->mean_round == KILN_DTYPE_F16 ? kiln_f16_to_f32(kiln_f32_to_f16(f))
                                              : kiln_bf16_to_f32(kiln_f32_to_bf16(f));
          memcpy(t, &f, 4);
        }
        kiln_idx_div_count(c->dt, t, cnt[v] + c->include_self);
        cnt[v] = 0;
      }
    }
  }
}

static kiln_status_t sc_shapes(const eff_t* es_, const eff_t* ei, const eff_t* ex, int dim,
                               const kiln_tensor_t* self, const kiln_tensor_t* index,
                               const kiln_tensor_t* src, const char* op) {
  int ok = ei->nd == es_->nd && (!ex || ex->nd == es_->nd);
  for (int d = 0; ok && d < ei->nd; d++) {
    if (d != dim && ei->shape[d] > es_->shape[d]) ok = 0;
    if (ex && ei->shape[d] > ex->shape[d]) ok = 0;
  }
  if (ok) return KILN_OK;
  char b1[200], b2[200], b3[200];
  return kiln_error(KILN_ERROR_INVALID_ARGUMENT,
                    "%s: index %s must have self's rank with size <= self %s (except in dim %d) "
                    "and <= src %s in every dim", op, kiln_idx_shape(index, b1),
                    kiln_idx_shape(self, b2), dim, src ? kiln_idx_shape(src, b3) : "(scalar)");
}

/* Runs a validated scatter (dim wrapped); scalar holds the value's bytes in self's dtype when src
 * is NULL. mean_round: the dtype a MEAN sum is rounded to before dividing (COUNT: none). */
static void sc_run(kiln_tensor_t* self_out, int dim, const kiln_tensor_t* index,
                   const kiln_tensor_t* src, const char* scalar, kiln_scatter_reduce_t reduce,
                   int include_self, kiln_dtype_t mean_round, int64_t* counts) {
  sc_ctx_t c;
  memset(&c, 0, sizeof c);
  eff_t es_, ei, ex;
  eff_init(&es_, self_out);
  eff_init(&ei, index);
  if (src) eff_init(&ex, src);
  int64_t zeros[KILN_MAX_DIMS] = {0};
  int64_t rs[KILN_MAX_DIMS], rss[KILN_MAX_DIMS], ris[KILN_MAX_DIMS], rxs[KILN_MAX_DIMS];
  int nr = 0;
  for (int d = 0; d < ei.nd; d++) {
    if (d == dim) continue;
    rs[nr] = ei.shape[d];
    rss[nr] = es_.st[d];
    ris[nr] = ei.st[d];
    rxs[nr++] = src ? ex.st[d] : 0;
  }
  const int64_t* st[3] = {rss, ris, src ? rxs : zeros};
  kiln_idx_nd_init(&c.w, nr, rs, 3, st, 1);
  c.self = self_out->data;
  c.idx = index->data;
  c.src = src ? (const char*)src->data : scalar;
  c.dt = self_out->dtype;
  c.es = kiln_dtype_size(c.dt);
  c.J = ei.shape[dim];
  c.ssd = es_.st[dim];
  c.isd = ei.st[dim];
  c.xsd = src ? ex.st[dim] : 0;
  c.include_self = reduce < KILN_SCATTER_SUM || include_self != 0;
  c.mean = reduce == KILN_SCATTER_MEAN;
  c.mean_round = mean_round;
  switch (reduce) {
    case KILN_SCATTER_NONE: c.op = KI_SET; break;
    case KILN_SCATTER_ADD: case KILN_SCATTER_SUM: case KILN_SCATTER_MEAN: c.op = KI_ADD; break;
    case KILN_SCATTER_MULTIPLY: case KILN_SCATTER_PROD: c.op = KI_MUL; break;
    case KILN_SCATTER_AMAX: c.op = KI_MAX; break;
    default: c.op = KI_MIN; break;
  }
  kiln_idx_identity(c.dt, c.op, c.ident);
  c.bw = c.mean ? 1 : KI_BLOCK;
  c.nblk = (c.w.inner + c.bw - 1) / c.bw;
  c.size_dim = es_.shape[dim];
  c.counts = c.mean && c.size_dim > SC_STACK_COUNTS ? counts : NULL;
  const int64_t unit = c.J * (c.w.inner < c.bw ? c.w.inner : c.bw);
  kiln_parallel_for(c.w.rows * c.nblk, ki_grain(unit), sc_units, &c);
}

/* scatter_ / scatter_add_ / scatter_reduce_; f16/bf16 reductions run on f32 copies. */
kiln_status_t kiln_kernel_scatter(kiln_tensor_t* self_out, int dim, const kiln_tensor_t* index,
                                  const kiln_tensor_t* src, double value,
                                  kiln_scatter_reduce_t reduce, int include_self) {
  const char* op = "scatter";
  KILN_RETURN_IF_ERROR(kiln_idx_check(self_out, op, "self"));
  KILN_RETURN_IF_ERROR(kiln_idx_check(index, op, "index"));
  KILN_RETURN_IF_ERROR(kiln_idx_check_index_dtype(index, 0, op, "index"));
  if (src) {
    KILN_RETURN_IF_ERROR(kiln_idx_check(src, op, "src"));
    KILN_RETURN_IF_ERROR(kiln_idx_same_dtype(self_out, src, op, "self", "src"));
  }
  if ((int)reduce < 0 || reduce >= KILN_SCATTER_COUNT)
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s: invalid reduce %d", op, (int)reduce);
  if (reduce == KILN_SCATTER_MEAN && self_out->dtype == KILN_DTYPE_BOOL)
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s: reduce 'mean' is not implemented for bool",
                      op);
  KILN_RETURN_IF_ERROR(kiln_idx_wrap_dim(dim, self_out->ndim, op, &dim));
  eff_t es_, ei, ex;
  eff_init(&es_, self_out);
  eff_init(&ei, index);
  if (src) eff_init(&ex, src);
  KILN_RETURN_IF_ERROR(sc_shapes(&es_, &ei, src ? &ex : NULL, dim, self_out, index, src, op));
  KILN_RETURN_IF_ERROR(kiln_idx_check_range(index, es_.shape[dim], 0, dim, op));
  if (kiln_tensor_numel(index) == 0) return KILN_OK;
  _Alignas(8) char scalar[8];
  kiln_idx_scalar_bytes(self_out->dtype, value, scalar);
  void* counts = NULL;
  if (reduce == KILN_SCATTER_MEAN && es_.shape[dim] > SC_STACK_COUNTS) {
    const size_t nt = (size_t)kiln_threadpool_size(kiln_threadpool_default());
    const size_t n = (size_t)es_.shape[dim] * nt;
    counts = kiln_allocator_alloc(NULL, sizeof(int64_t) * n, 64);
    if (!counts)
      return kiln_error(KILN_ERROR_OUT_OF_MEMORY, "%s: cannot allocate %zu mean counters", op, n);
    memset(counts, 0, sizeof(int64_t) * n);
  }
  kiln_status_t st = KILN_OK;
  const int half = self_out->dtype == KILN_DTYPE_F16 || self_out->dtype == KILN_DTYPE_BF16;
  if (half && reduce != KILN_SCATTER_NONE && reduce != KILN_SCATTER_AMAX &&
      reduce != KILN_SCATTER_AMIN) {
    /* torch reduces f16/bf16 in f32 and rounds once (a MEAN sum before its division) */
    ki_shadow_t s, x;
    s.heap = x.heap = NULL;
    st = kiln_idx_shadow_init(&s, self_out, op);
    if (st == KILN_OK) st = kiln_idx_shadow_init(&x, src, op);
    if (st == KILN_OK) {
      _Alignas(8) char fscalar[8];
      kiln_tensor_t hv, fv;
      memset(&hv, 0, sizeof hv);
      hv.data = scalar;
      hv.dtype = self_out->dtype;
      fv = hv;
      fv.data = fscalar;
      fv.dtype = KILN_DTYPE_F32;
      st = kiln_kernel_copy(&hv, &fv);
      if (st == KILN_OK) {
        sc_run(&s.t, dim, index, src ? &x.t : NULL, fscalar, reduce, include_self,
               self_out->dtype, counts);
        st = kiln_kernel_copy(&s.t, self_out);
      }
    }
    kiln_idx_shadow_free(&s);
    kiln_idx_shadow_free(&x);
  } else {
    sc_run(self_out, dim, index, src, scalar, reduce, include_self, KILN_DTYPE_COUNT, counts);
  }
  kiln_allocator_free(NULL, counts);
  return st;
}
