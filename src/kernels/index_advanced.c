/* SPDX-License-Identifier: Apache-2.0 */
/* index_advanced.c - aten::index.Tensor and aten::index_put_ (see kiln/kernels/index.h).
 *
 * A plan splits self's dims into indexed ones (their index tensors share the shape B) and sliced
 * ones (the "rest"). The result is the rest dims with B inserted at `bpos`. kiln_kernel_index
 * runs (b, rest row) pairs in parallel. kiln_kernel_index_put runs blocks of rest columns in
 * parallel and, inside a block, every b in order, so duplicate indices resolve in B order
 * (deterministic for any thread count). */
#include <stdio.h>

#include "kernels/index_internal.h"

typedef struct adv {
  int nidx, rb, nr, bpos, rr;
  int idim[KILN_MAX_DIMS];               /* self dim of each index tensor */
  const kiln_tensor_t* it[KILN_MAX_DIMS]; /* the index tensors */
  int64_t bshape[KILN_MAX_DIMS], bnumel;
  int rdim[KILN_MAX_DIMS];               /* self dims that are sliced */
  int64_t rshape[KILN_MAX_DIMS];         /* result shape */
} adv_t;

static kiln_status_t adv_plan(const kiln_tensor_t* self, const kiln_tensor_t* const* indices,
                              int n, const char* op, adv_t* p) {
  KILN_RETURN_IF_ERROR(kiln_idx_check(self, op, "self"));
  if (n < 0 || n > self->ndim)
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT,
                      "%s: too many indices for tensor of dimension %d (got %d)", op,
                      (int)self->ndim, n);
  if (n > 0 && !indices)
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s: NULL indices array", op);
  memset(p, 0, sizeof *p);
  int first = -1, last = -1;
  for (int d = 0; d < n; d++) {
    const kiln_tensor_t* t = indices[d];
    if (!t) continue;
    char what[32];
    snprintf(what, sizeof what, "indices[%d]", d);
    KILN_RETURN_IF_ERROR(kiln_idx_check(t, op, what));
    KILN_RETURN_IF_ERROR(kiln_idx_check_index_dtype(t, 1, op, what));
    if (p->nidx > 0) {
      const kiln_tensor_t* t0 = p->it[0];
      int same = t->ndim == t0->ndim;
      for (int i = 0; same && i < t->ndim; i++) same = t->shape[i] == t0->shape[i];
      if (!same) {
        char b1[200], b2[200];
        return kiln_error(KILN_ERROR_INVALID_ARGUMENT,
                          "%s: %s %s differs from indices[%d] %s (broadcast them first)", op,
                          what, kiln_idx_shape(t, b1), p->idim[0], kiln_idx_shape(t0, b2));
      }
    }
    if (first < 0) first = d;
    last = d;
    p->idim[p->nidx] = d;
    p->it[p->nidx++] = t;
  }
  p->bnumel = 1;
  if (p->nidx) {
    p->rb = p->it[0]->ndim;
    for (int i = 0; i < p->rb; i++) p->bnumel *= (p->bshape[i] = p->it[0]->shape[i]);
  }
  int is_idx[KILN_MAX_DIMS] = {0};
  for (int k = 0; k < p->nidx; k++) is_idx[p->idim[k]] = 1;
  for (int d = 0; d < self->ndim; d++)
    if (!is_idx[d]) p->rdim[p->nr++] = d;
  const int adjacent = p->nidx == 0 || last - first + 1 == p->nidx;
  p->bpos = adjacent ? first < 0 ? 0 : first : 0;
  p->rr = p->nr + p->rb;
  if (p->rr > KILN_MAX_DIMS)
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s: the result would have rank %d > %d", op,
                      p->rr, KILN_MAX_DIMS);
  for (int j = 0; j < p->rr; j++)
    p->rshape[j] = j < p->bpos ? self->shape[p->rdim[j]]
                   : j < p->bpos + p->rb ? p->bshape[j - p->bpos]
                                         : self->shape[p->rdim[j - p->rb]];
  return KILN_OK;
}

static kiln_status_t adv_check_ranges(const kiln_tensor_t* self, const adv_t* p, const char* op) {
  for (int k = 0; k < p->nidx; k++)
    KILN_RETURN_IF_ERROR(
        kiln_idx_check_range(p->it[k], self->shape[p->idim[k]], 1, p->idim[k], op));
  return KILN_OK;
}

/* Result shape of self[indices] (aten::index layout rules). */
kiln_status_t kiln_kernel_index_shape(const kiln_tensor_t* self,
                                      const kiln_tensor_t* const* indices, int n_indices,
                                      int32_t* ndim, int64_t* shape) {
  adv_t p;
  KILN_RETURN_IF_ERROR(adv_plan(self, indices, n_indices, "index", &p));
  *ndim = p.rr;
  for (int j = 0; j < p.rr; j++) shape[j] = p.rshape[j];
  return KILN_OK;
}

typedef struct adv_ctx {
  const adv_t* p;
  ki_nd_t w;                 /* rest dims: op 0 = self, op 1 = out / values */
  char* self;
  char* other;               /* out (index) or values (index_put) */
  int64_t obst[KILN_MAX_DIMS]; /* out / values strides over B's dims */
  int64_t ist[KILN_MAX_DIMS][KILN_MAX_DIMS];
  int64_t size[KILN_MAX_DIMS], sst[KILN_MAX_DIMS]; /* self size / stride of each indexed dim */
  kiln_dtype_t dt;
  size_t es;
  int64_t nblk;
  ki_op_t op;
} adv_ctx_t;

/* Element offsets of position b of B into self (so) and into out / values (oo). */
static inline void adv_b(const adv_ctx_t* c, int64_t b, int64_t* so, int64_t* oo) {
  const adv_t* p = c->p;
  int64_t ioff[KILN_MAX_DIMS] = {0}, o = 0;
  for (int d = p->rb - 1; d >= 0 && b; d--) {
    const int64_t cd = b % p->bshape[d];
    b /= p->bshape[d];
    o += cd * c->obst[d];
    for (int k = 0; k < p->nidx; k++) ioff[k] += cd * c->ist[k][d];
  }
  int64_t s = 0;
  for (int k = 0; k < p->nidx; k++) {
    const kiln_tensor_t* t = p->it[k];
    int64_t v = ki_load_index((const char*)t->data + ioff[k] * (int64_t)kiln_dtype_size(t->dtype),
                              t->dtype);
    if (v < 0) v += c->size[k];
    s += v * c->sst[k];
  }
  *so = s;
  *oo = o;
}

static void adv_gather_units(void* arg, int64_t u0, int64_t u1, int tid) {
  (void)tid;
  const adv_ctx_t* c = arg;
  const int64_t es = (int64_t)c->es;
  for (int64_t u = u0; u < u1; u++) {
    const int64_t b = u / c->w.rows, r = u % c->w.rows;
    int64_t so, oo, off[2];
    adv_b(c, b, &so, &oo);
    ki_nd_row(&c->w, r, off);
    ki_copy_n(c->other + (off[1] + oo) * es, c->w.ist[1] * es, c->self + (off[0] + so) * es,
              c->w.ist[0] * es, c->w.inner, c->es);
  }
}

static void adv_put_units(void* arg, int64_t u0, int64_t u1, int tid) {
  (void)tid;
  const adv_ctx_t* c = arg;
  const int64_t es = (int64_t)c->es;
  for (int64_t u = u0; u < u1; u++) {
    const int64_t r = u / c->nblk, e0 = (u % c->nblk) * KI_BLOCK;
    const int64_t w = c->w.inner - e0 < KI_BLOCK ? c->w.inner - e0 : KI_BLOCK;
    int64_t off[2];
    ki_nd_row(&c->w, r, off);
    char* sb = c->self + (off[0] + e0 * c->w.ist[0]) * es;
    const char* vb = c->other + (off[1] + e0 * c->w.ist[1]) * es;
    for (int64_t b = 0; b < c->p->bnumel; b++) {
      int64_t so, oo;
      adv_b(c, b, &so, &oo);
      kiln_idx_combine(c->dt, c->op, sb + so * es, NULL, c->w.ist[0] * es, vb + oo * es,
                       c->w.ist[1] * es, w, 1.0);
    }
  }
}

/* ostride: strides of out / values over the result dims (rr entries). */
static void adv_ctx_init(adv_ctx_t* c, const adv_t* p, const kiln_tensor_t* self, char* other,
                         const int64_t* ostride) {
  c->p = p;
  c->self = self->data;
  c->other = other;
  c->dt = self->dtype;
  c->es = kiln_dtype_size(self->dtype);
  int64_t rs[KILN_MAX_DIMS], rss[KILN_MAX_DIMS], ros[KILN_MAX_DIMS];
  for (int j = 0; j < p->nr; j++) {
    rs[j] = self->shape[p->rdim[j]];
    rss[j] = self->strides[p->rdim[j]];
    ros[j] = ostride[j < p->bpos ? j : j + p->rb];
  }
  const int64_t* st[2] = {rss, ros};
  kiln_idx_nd_init(&c->w, p->nr, rs, 2, st, 1);
  for (int d = 0; d < p->rb; d++) c->obst[d] = ostride[p->bpos + d];
  for (int k = 0; k < p->nidx; k++) {
    for (int d = 0; d < p->rb; d++) c->ist[k][d] = p->it[k]->strides[d];
    c->size[k] = self->shape[p->idim[k]];
    c->sst[k] = self->strides[p->idim[k]];
  }
  c->nblk = (c->w.inner + KI_BLOCK - 1) / KI_BLOCK;
}

/* aten::index.Tensor: gathers (b, rest row) pairs in parallel. */
kiln_status_t kiln_kernel_index(const kiln_tensor_t* self, const kiln_tensor_t* const* indices,
                                int n_indices, kiln_tensor_t* out) {
  const char* op = "index";
  adv_t p;
  KILN_RETURN_IF_ERROR(adv_plan(self, indices, n_indices, op, &p));
  KILN_RETURN_IF_ERROR(kiln_idx_check(out, op, "out"));
  KILN_RETURN_IF_ERROR(kiln_idx_same_dtype(self, out, op, "self", "out"));
  int ok = out->ndim == p.rr;
  for (int j = 0; ok && j < p.rr; j++) ok = out->shape[j] == p.rshape[j];
  if (!ok) {
    char b1[200], b2[200];
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s: out %s must have the result shape %s",
                      op, kiln_idx_shape(out, b1), kiln_format_shape(b2, p.rshape, p.rr));
  }
  KILN_RETURN_IF_ERROR(adv_check_ranges(self, &p, op));
  if (kiln_tensor_numel(out) == 0) return KILN_OK;
  adv_ctx_t c;
  adv_ctx_init(&c, &p, self, out->data, out->strides);
  kiln_parallel_for(p.bnumel * c.w.rows, ki_grain(c.w.inner), adv_gather_units, &c);
  return KILN_OK;
}

/* aten::index_put_: blocks of rest columns in parallel, B in order inside a block. */
kiln_status_t kiln_kernel_index_put(kiln_tensor_t* self_out, const kiln_tensor_t* const* indices,
                                    int n_indices, const kiln_tensor_t* values, int accumulate) {
  const char* op = "index_put";
  adv_t p;
  KILN_RETURN_IF_ERROR(adv_plan(self_out, indices, n_indices, op, &p));
  KILN_RETURN_IF_ERROR(kiln_idx_check(values, op, "values"));
  KILN_RETURN_IF_ERROR(kiln_idx_same_dtype(self_out, values, op, "self", "values"));
  /* values broadcast to the result shape (right-aligned, no extra leading dims). */
  int64_t vst[KILN_MAX_DIMS];
  int ok = values->ndim <= p.rr;
  for (int j = 0; ok && j < p.rr; j++) {
    const int vd = j - (p.rr - values->ndim);
    if (vd < 0) {
      vst[j] = 0;
    } else if (values->shape[vd] == p.rshape[j]) {
      vst[j] = p.rshape[j] == 1 ? 0 : values->strides[vd];
    } else if (values->shape[vd] == 1) {
      vst[j] = 0;
    } else {
      ok = 0;
    }
  }
  if (!ok) {
    char b1[200], b2[200];
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT,
                      "%s: shape mismatch: value tensor of shape %s cannot be broadcast to "
                      "indexing result of shape %s", op, kiln_idx_shape(values, b1),
                      kiln_format_shape(b2, p.rshape, p.rr));
  }
  KILN_RETURN_IF_ERROR(adv_check_ranges(self_out, &p, op));
  int64_t n = p.bnumel;
  for (int j = 0; j < p.nr; j++) n *= self_out->shape[p.rdim[j]];
  if (n == 0) return KILN_OK;
  adv_ctx_t c;
  adv_ctx_init(&c, &p, self_out, values->data, vst);
  c.op = accumulate ? KI_ADD : KI_SET;
  const int64_t unit = p.bnumel * (c.w.inner < KI_BLOCK ? c.w.inner : KI_BLOCK);
  kiln_parallel_for(c.w.rows * c.nblk, ki_grain(unit), adv_put_units, &c);
  return KILN_OK;
}
