/* SPDX-License-Identifier: Apache-2.0 */
/* index.c - index_select, gather and index_add (see kiln/kernels/index.h).
 *
 * Each kernel checks every index first, then walks the dims other than `dim` (the "rest",
 * coalesced by kiln_idx_nd_init) in parallel; the indexed dim is resolved per index. index_add
 * splits the rest into blocks of columns and loops over the indices in order inside each block,
 * so duplicates accumulate in index order whatever the thread count. */
#include "kernels/index_internal.h"
#include "kiln/kernels/elementwise.h"

/* rest shape/strides: e without dim `dim`. */
static int drop_dim(const eff_t* e, int dim, int64_t* shape, int64_t* st) {
  int n = 0;
  for (int d = 0; d < e->nd; d++)
    if (d != dim) {
      shape[n] = e->shape[d];
      st[n++] = e->st[d];
    }
  return n;
}

static kiln_status_t check_index_1d(const kiln_tensor_t* index, const char* op) {
  KILN_RETURN_IF_ERROR(kiln_idx_check(index, op, "index"));
  KILN_RETURN_IF_ERROR(kiln_idx_check_index_dtype(index, 1, op, "index"));
  if (index->ndim > 1) {
    char b[200];
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s: index %s must be 1-d or 0-d", op,
                      kiln_idx_shape(index, b));
  }
  return KILN_OK;
}

/* ---- index_select ---------------------------------------------------------------------------- */

typedef struct sel_ctx {
  ki_nd_t w; /* rest dims: op 0 = out, op 1 = x */
  char* out;
  const char* x;
  const char* idx;
  kiln_dtype_t idt;
  int64_t ist, n, osd, xsd; /* index stride; out / x stride along dim */
  size_t es;
} sel_ctx_t;

/* Units are (i, rest row) pairs: a row of the rest copied per index. */
static void sel_slices(void* arg, int64_t u0, int64_t u1, int tid) {
  (void)tid;
  const sel_ctx_t* c = arg;
  const int64_t es = (int64_t)c->es;
  for (int64_t u = u0; u < u1; u++) {
    const int64_t i = u / c->w.rows, r = u % c->w.rows;
    const int64_t v = ki_load_index(c->idx + i * c->ist, c->idt);
    int64_t off[2];
    ki_nd_row(&c->w, r, off);
    ki_copy_n(c->out + (off[0] + i * c->osd) * es, c->w.ist[0] * es,
              c->x + (off[1] + v * c->xsd) * es, c->w.ist[1] * es, c->w.inner, c->es);
  }
}

#define SEL_LOOP(TYPE)                                                                       \
  for (int64_t i = 0; i < m; i++) {                                                          \
    TYPE v;                                                                                  \
    memcpy(&v, xb + xoff[i], sizeof v);                                                      \
    memcpy(o + i * osd, &v, sizeof v);                                                       \
  }

/* Units are rest rows; for each element of the row every index is gathered (dim is the inner
 * one in x's memory). Indices are turned into byte offsets KI_BLOCK at a time. */
static void sel_gather(void* arg, int64_t r0, int64_t r1, int tid) {
  (void)tid;
  const sel_ctx_t* c = arg;
  const int64_t es = (int64_t)c->es, osd = c->osd * es;
  int64_t xoff[KI_BLOCK];
  for (int64_t i0 = 0; i0 < c->n; i0 += KI_BLOCK) {
    const int64_t m = c->n - i0 < KI_BLOCK ? c->n - i0 : KI_BLOCK;
    for (int64_t i = 0; i < m; i++)
      xoff[i] = ki_load_index(c->idx + (i0 + i) * c->ist, c->idt) * c->xsd * es;
    for (int64_t r = r0; r < r1; r++) {
      int64_t off[2];
      ki_nd_row(&c->w, r, off);
      for (int64_t e = 0; e < c->w.inner; e++) {
        char* o = c->out + (off[0] + e * c->w.ist[0] + i0 * c->osd) * es;
        const char* xb = c->x + (off[1] + e * c->w.ist[1]) * es;
        switch (c->es) {
          case 1: SEL_LOOP(uint8_t) break;
          case 2: SEL_LOOP(uint16_t) break;
          case 4: SEL_LOOP(uint32_t) break;
          default: SEL_LOOP(uint64_t) break;
        }
      }
    }
  }
}

/* torch.index_select: slices of x picked along dim (see index.h). */
kiln_status_t kiln_kernel_index_select(const kiln_tensor_t* x, int dim,
                                       const kiln_tensor_t* index, kiln_tensor_t* out) {
  const char* op = "index_select";
  KILN_RETURN_IF_ERROR(kiln_idx_check(x, op, "x"));
  KILN_RETURN_IF_ERROR(kiln_idx_check(out, op, "out"));
  KILN_RETURN_IF_ERROR(check_index_1d(index, op));
  KILN_RETURN_IF_ERROR(kiln_idx_same_dtype(x, out, op, "x", "out"));
  KILN_RETURN_IF_ERROR(kiln_idx_wrap_dim(dim, x->ndim, op, &dim));
  const int64_t n = kiln_tensor_numel(index);
  eff_t ex, eo;
  eff_init(&ex, x);
  eff_init(&eo, out);
  int ok = out->ndim == x->ndim;
  if (x->ndim == 0) ok = ok && n == 1;
  for (int d = 0; ok && d < ex.nd; d++) ok = eo.shape[d] == (d == dim ? n : ex.shape[d]);
  if (!ok) {
    char b1[200], b2[200], b3[200];
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT,
                      "%s: out %s does not match x %s with dim %d replaced by index %s", op,
                      kiln_idx_shape(out, b1), kiln_idx_shape(x, b2), dim,
                      kiln_idx_shape(index, b3));
  }
  KILN_RETURN_IF_ERROR(kiln_idx_check_range(index, ex.shape[dim], 0, dim, op));
  if (kiln_tensor_numel(out) == 0) return KILN_OK;
  sel_ctx_t c;
  int64_t rs[KILN_MAX_DIMS], ros[KILN_MAX_DIMS], rxs[KILN_MAX_DIMS];
  const int nr = drop_dim(&eo, dim, rs, ros);
  drop_dim(&ex, dim, rs, rxs);
  const int64_t* st[2] = {ros, rxs};
  kiln_idx_nd_init(&c.w, nr, rs, 2, st, 1);
  c.out = out->data;
  c.x = x->data;
  c.idx = index->data;
  c.idt = index->dtype;
  c.ist = (index->ndim ? index->strides[0] : 0) * (int64_t)kiln_dtype_size(index->dtype);
  c.n = n;
  c.osd = eo.st[dim];
  c.xsd = ex.st[dim];
  c.es = kiln_dtype_size(x->dtype);
  /* Loop over the indices innermost when dim is the faster-moving one in x's memory (e.g. the
   * last dim of a contiguous x); otherwise copy whole rows of the rest per index. */
  const int64_t rest_st = c.w.ist[1] < 0 ? -c.w.ist[1] : c.w.ist[1];
  const int64_t dim_st = c.xsd < 0 ? -c.xsd : c.xsd;
  if (c.w.nd == 0 || n < 2 || (rest_st <= dim_st && c.w.inner >= 4)) {
    kiln_parallel_for(n * c.w.rows, ki_grain(c.w.inner), sel_slices, &c);
  } else {
    kiln_parallel_for(c.w.rows, ki_grain(c.w.inner * n), sel_gather, &c);
  }
  return KILN_OK;
}

/* ---- gather ---------------------------------------------------------------------------------- */

typedef struct gat_ctx {
  ki_nd_t w; /* index dims: op 0 = out, 1 = index, 2 = x (its dim stride zeroed) */
  char* out;
  const char* idx;
  const char* x;
  int64_t xsd;
  size_t es;
} gat_ctx_t;

#define GAT_LOOP(TYPE)                                                                    \
  for (int64_t e = 0; e < n; e++) {                                                       \
    TYPE v;                                                                               \
    memcpy(&v, xb + (e * xs + ip[e * is] * xsd) * (int64_t)sizeof(TYPE), sizeof v);       \
    memcpy(o + e * os * (int64_t)sizeof(TYPE), &v, sizeof v);                             \
  }

static void gat_rows(void* arg, int64_t r0, int64_t r1, int tid) {
  (void)tid;
  const gat_ctx_t* c = arg;
  const int64_t es = (int64_t)c->es, n = c->w.inner, xsd = c->xsd;
  const int64_t os = c->w.ist[0], is = c->w.ist[1], xs = c->w.ist[2];
  for (int64_t r = r0; r < r1; r++) {
    int64_t off[3];
    ki_nd_row(&c->w, r, off);
    char* o = c->out + off[0] * es;
    const int64_t* ip = (const int64_t*)c->idx + off[1];
    const char* xb = c->x + off[2] * es;
    switch (c->es) {
      case 1: GAT_LOOP(uint8_t) break;
      case 2: GAT_LOOP(uint16_t) break;
      case 4: GAT_LOOP(uint32_t) break;
      default: GAT_LOOP(uint64_t) break;
    }
  }
}

/* Shared by gather and scatter: index rank equals self's, index.shape[d] <= lim.shape[d]. */
static kiln_status_t check_like(const eff_t* ei, const eff_t* ex, int dim, int skip_dim,
                                const kiln_tensor_t* index, const kiln_tensor_t* x,
                                const char* op, const char* xn) {
  int ok = ei->nd == ex->nd;
  for (int d = 0; ok && d < ei->nd; d++)
    if (!(skip_dim && d == dim)) ok = ei->shape[d] <= ex->shape[d];
  if (ok) return KILN_OK;
  char b1[200], b2[200];
  return kiln_error(KILN_ERROR_INVALID_ARGUMENT,
                    "%s: index %s must have the rank of %s %s and no larger size in any dim%s", op,
                    kiln_idx_shape(index, b1), xn, kiln_idx_shape(x, b2),
                    skip_dim ? " but dim" : "");
}

/* torch.gather: out[...] = x[..., index[...], ...] along dim. */
kiln_status_t kiln_kernel_gather(const kiln_tensor_t* x, int dim, const kiln_tensor_t* index,
                                 kiln_tensor_t* out) {
  const char* op = "gather";
  KILN_RETURN_IF_ERROR(kiln_idx_check(x, op, "x"));
  KILN_RETURN_IF_ERROR(kiln_idx_check(index, op, "index"));
  KILN_RETURN_IF_ERROR(kiln_idx_check(out, op, "out"));
  KILN_RETURN_IF_ERROR(kiln_idx_check_index_dtype(index, 0, op, "index"));
  KILN_RETURN_IF_ERROR(kiln_idx_same_dtype(x, out, op, "x", "out"));
  KILN_RETURN_IF_ERROR(kiln_idx_wrap_dim(dim, x->ndim, op, &dim));
  eff_t ex, ei, eo;
  eff_init(&ex, x);
  eff_init(&ei, index);
  eff_init(&eo, out);
  int same = out->ndim == index->ndim;
  for (int d = 0; same && d < index->ndim; d++) same = out->shape[d] == index->shape[d];
  if (!same) {
    char b1[200], b2[200];
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s: out %s must have index's shape %s", op,
                      kiln_idx_shape(out, b1), kiln_idx_shape(index, b2));
  }
  KILN_RETURN_IF_ERROR(check_like(&ei, &ex, dim, 1, index, x, op, "x"));
  KILN_RETURN_IF_ERROR(kiln_idx_check_range(index, ex.shape[dim], 0, dim, op));
  if (kiln_tensor_numel(index) == 0) return KILN_OK;
  gat_ctx_t c;
  int64_t xst[KILN_MAX_DIMS];
  for (int d = 0; d < ex.nd; d++) xst[d] = d == dim ? 0 : ex.st[d];
  const int64_t* st[3] = {eo.st, ei.st, xst};
  kiln_idx_nd_init(&c.w, ei.nd, ei.shape, 3, st, 1);
  c.out = out->data;
  c.idx = index->data;
  c.x = x->data;
  c.xsd = ex.st[dim];
  c.es = kiln_dtype_size(x->dtype);
  kiln_parallel_for(c.w.rows, ki_grain(c.w.inner), gat_rows, &c);
  return KILN_OK;
}

/* ---- index_add ------------------------------------------------------------------------------- */

typedef struct iadd_ctx {
  ki_nd_t w; /* rest dims: op 0 = self, op 1 = source */
  char* self;
  const char* src;
  const char* idx;
  kiln_dtype_t dt, idt;
  int64_t ist, n, ssd, xsd, nblk;
  ki_op_t op;
  double alpha;
} iadd_ctx_t;

static void iadd_units(void* arg, int64_t u0, int64_t u1, int tid) {
  (void)tid;
  const iadd_ctx_t* c = arg;
  const int64_t es = (int64_t)kiln_dtype_size(c->dt);
  for (int64_t u = u0; u < u1; u++) {
    const int64_t r = u / c->nblk, b0 = (u % c->nblk) * KI_BLOCK;
    const int64_t w = c->w.inner - b0 < KI_BLOCK ? c->w.inner - b0 : KI_BLOCK;
    int64_t off[2];
    ki_nd_row(&c->w, r, off);
    char* sb = c->self + (off[0] + b0 * c->w.ist[0]) * es;
    const char* xb = c->src + (off[1] + b0 * c->w.ist[1]) * es;
    for (int64_t i = 0; i < c->n; i++) {
      const int64_t v = ki_load_index(c->idx + i * c->ist, c->idt);
      kiln_idx_combine(c->dt, c->op, sb + v * c->ssd * es, NULL, c->w.ist[0] * es,
                       xb + i * c->xsd * es, c->w.ist[1] * es, w, c->alpha);
    }
  }
}

/* Fills c for self_out/source (already validated) and runs it. */
static void iadd_run(kiln_tensor_t* self_out, int dim, const kiln_tensor_t* index,
                     const kiln_tensor_t* source, double alpha, ki_op_t op) {
  iadd_ctx_t c;
  eff_t es_, ex;
  eff_init(&es_, self_out);
  eff_init(&ex, source);
  int64_t rs[KILN_MAX_DIMS], rss[KILN_MAX_DIMS], rxs[KILN_MAX_DIMS];
  const int nr = drop_dim(&es_, dim, rs, rss);
  drop_dim(&ex, dim, rs, rxs);
  const int64_t* st[2] = {rss, rxs};
  kiln_idx_nd_init(&c.w, nr, rs, 2, st, 1);
  c.self = self_out->data;
  c.src = source->data;
  c.idx = index->data;
  c.dt = self_out->dtype;
  c.idt = index->dtype;
  c.ist = (index->ndim ? index->strides[0] : 0) * (int64_t)kiln_dtype_size(index->dtype);
  c.n = kiln_tensor_numel(index);
  c.ssd = es_.st[dim];
  c.xsd = ex.st[dim];
  c.nblk = (c.w.inner + KI_BLOCK - 1) / KI_BLOCK;
  c.op = op;
  c.alpha = alpha;
  const int64_t unit = c.n * (c.w.inner < KI_BLOCK ? c.w.inner : KI_BLOCK);
  kiln_parallel_for(c.w.rows * c.nblk, ki_grain(unit), iadd_units, &c);
}

/* torch.index_add_: duplicates add in index order; f16/bf16 follow torch's two paths. */
kiln_status_t kiln_kernel_index_add(kiln_tensor_t* self_out, int dim, const kiln_tensor_t* index,
                                    const kiln_tensor_t* source, double alpha) {
  const char* op = "index_add";
  KILN_RETURN_IF_ERROR(kiln_idx_check(self_out, op, "self"));
  KILN_RETURN_IF_ERROR(kiln_idx_check(source, op, "source"));
  KILN_RETURN_IF_ERROR(check_index_1d(index, op));
  KILN_RETURN_IF_ERROR(kiln_idx_same_dtype(self_out, source, op, "self", "source"));
  KILN_RETURN_IF_ERROR(kiln_idx_wrap_dim(dim, self_out->ndim, op, &dim));
  const int64_t n = kiln_tensor_numel(index);
  eff_t es_, ex;
  eff_init(&es_, self_out);
  eff_init(&ex, source);
  int ok = es_.nd == ex.nd;
  for (int d = 0; ok && d < es_.nd; d++) ok = ex.shape[d] == (d == dim ? n : es_.shape[d]);
  if (!ok) {
    char b1[200], b2[200], b3[200];
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT,
                      "%s: source %s must be self %s with dim %d replaced by index %s", op,
                      kiln_idx_shape(source, b1), kiln_idx_shape(self_out, b2), dim,
                      kiln_idx_shape(index, b3));
  }
  KILN_RETURN_IF_ERROR(kiln_idx_check_range(index, es_.shape[dim], 0, dim, op));
  if (kiln_tensor_numel(source) == 0) return KILN_OK;
  const int half = self_out->dtype == KILN_DTYPE_F16 || self_out->dtype == KILN_DTYPE_BF16;
  if (half && self_out->ndim > 1 && (dim == 0 || dim == self_out->ndim - 1) && alpha == 1.0 &&
      index->dtype == KILN_DTYPE_I64) {
    /* torch takes its scatter_add path here: f32 accumulation, one rounding */
    ki_shadow_t s, x;
    s.heap = x.heap = NULL;
    kiln_status_t st = kiln_idx_shadow_init(&s, self_out, op);
    if (st == KILN_OK) st = kiln_idx_shadow_init(&x, source, op);
    if (st == KILN_OK) {
      iadd_run(&s.t, dim, index, &x.t, 1.0, KI_ADD);
      st = kiln_kernel_copy(&s.t, self_out);
    }
    kiln_idx_shadow_free(&s);
    kiln_idx_shadow_free(&x);
    return st;
  }
  /* rank <= 1: torch computes self += source * alpha in the dtype (two roundings for f16/bf16) */
  const ki_op_t o = alpha == 1.0 ? KI_ADD : self_out->ndim <= 1 ? KI_ADD_SCALED : KI_ADD_ALPHA;
  iadd_run(self_out, dim, index, source, alpha, o);
  return KILN_OK;
}
