/* SPDX-License-Identifier: Apache-2.0 */
/* reduce.c - kiln_kernel_reduce: geometry, strategy and threading of the reductions.
 *
 * The dims of x are split into kept dims K (coalesced, with x and out strides) and reduced dims
 * R (coalesced, innermost first). Two strategies:
 *   horizontal - each output reduces its R elements, walked as rows of the innermost R dim; the
 *                R range is cut into at most 64 fixed chunks combined in order, run in parallel
 *                when there are few outputs, serially per output when there are many;
 *   vertical   - when the innermost x dim is kept (e.g. sum over dim 0 of a row-major matrix),
 *                blocks of up to 256 neighbouring outputs are reduced together so every read is
 *                a contiguous row; blocks are run in parallel.
 * The strategy depends only on shapes, so results do not depend on the thread count. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/ew_internal.h"
#include "kernels/reduce_internal.h"
#include "kiln/parallel.h"

#define RED_MAX_CHUNKS 64
#define RED_MIN_CHUNK 32768
#define RED_VBLOCK 256

typedef struct {
  kiln_red_op_t op;
  kiln_dtype_t compute, type, xdtype, odtype;
  int is_float, round_in;
  double correction;
  const char* xdata;
  char* odata;
  int nk, nr;
  int64_t kshape[KILN_MAX_DIMS], kxs[KILN_MAX_DIMS], kos[KILN_MAX_DIMS]; /* bytes */
  int64_t rshape[KILN_MAX_DIMS], rxs[KILN_MAX_DIMS];
  int64_t n_out, n_red, chunk, n_chunks;
  int fast_sum; /* f32 sum/mean of one unit-stride f32 row per output, f32 out: a tight loop */
} red_plan_t;

static int is_two_pass(kiln_reduce_op_t op) {
  return op == KILN_REDUCE_VAR || op == KILN_REDUCE_STD || op == KILN_REDUCE_LOGSUMEXP;
}

/* Feeds the R elements [r0, r1) below `base` to kiln_red_seg. */
static void visit(const red_plan_t* pl, const kiln_red_op_t* op, const char* base, int64_t r0,
                  int64_t r1, kiln_red_state_t* st) {
  const int64_t L = pl->rshape[0], s0 = pl->rxs[0];
  const int64_t esz = (int64_t)kiln_dtype_size(pl->type);
  const int direct = pl->xdtype == pl->type && s0 == esz && !pl->round_in;
  _Alignas(64) char buf[KILN_EW_BLOCK * 8];
  int64_t r = r0;
  while (r < r1) {
    int64_t inner = r % L, outer = r / L;
    const char* p = base + inner * s0;
    for (int d = 1; d < pl->nr; d++) {
      p += (outer % pl->rshape[d]) * pl->rxs[d];
      outer /= pl->rshape[d];
    }
    int64_t len = L - inner < r1 - r ? L - inner : r1 - r;
    if (direct) {
      kiln_red_seg(op, pl->type, p, len, st);
    } else {
      for (int64_t off = 0; off < len; off += KILN_EW_BLOCK) {
        int64_t m = len - off < KILN_EW_BLOCK ? len - off : KILN_EW_BLOCK;
        kiln_cvt(pl->xdtype, p + off * s0, s0, pl->type, buf, esz, m);
        if (pl->round_in) kiln_cvt_round_f32(pl->compute, (float*)buf, m);
        kiln_red_seg(op, pl->type, buf, m, st);
      }
    }
    r += len;
  }
}

/* Ends the first pass of a two-pass op on a state: sets the pivot; returns 1 if a second pass
 * is needed. */
static int close_pass0(const red_plan_t* pl, kiln_red_state_t* st) {
  if (pl->op.op == KILN_REDUCE_LOGSUMEXP) {
    st->pivot = st->a;
    if (!isfinite(st->a)) {
      st->b = 1;
      return 0;
    }
    return 1;
  }
  st->a = st->n ? st->a / (double)st->n : 0; /* VAR/STD: mean */
  st->pivot = st->a;
  return st->n > 0;
}

/* Reduces R elements [r0, r1) of one output into a closed state. */
static void reduce_chunk(const red_plan_t* pl, const char* base, int64_t r0, int64_t r1,
                         kiln_red_state_t* st) {
  kiln_red_init(&pl->op, pl->is_float, st);
  visit(pl, &pl->op, base, r0, r1, st);
  if (is_two_pass(pl->op.op) && close_pass0(pl, st)) {
    kiln_red_op_t op2 = pl->op;
    op2.pass = 1;
    int64_t n = st->n;
    visit(pl, &op2, base, r0, r1, st);
    st->n = n;
  }
}

/* Converts a closed state to the result and stores it (through the compute dtype) at `dst`. */
static void finish(const red_plan_t* pl, const kiln_red_state_t* st, char* dst) {
  char tmp[8];
  if (pl->op.op == KILN_REDUCE_ANY || pl->op.op == KILN_REDUCE_ALL) {
    kiln_store_i64(dst, pl->odtype, st->i);
    return;
  }
  if (!pl->is_float) {
    kiln_store_i64(tmp, pl->compute, st->i);
  } else {
    double v = st->a;
    switch (pl->op.op) {
      case KILN_REDUCE_MEAN: v = st->a / (double)st->n; break;
      case KILN_REDUCE_VAR:
      case KILN_REDUCE_STD: {
        double div = (double)st->n - pl->correction;
        v = st->b / (div > 0 ? div : 0);
        if (pl->op.op == KILN_REDUCE_STD) v = sqrt(v);
        break;
      }
      case KILN_REDUCE_NORM:
        if (pl->op.norm_kind == KILN_NORM_P2) v = sqrt(st->a);
        else if (pl->op.norm_kind == KILN_NORM_PGEN) v = pow(st->a, 1.0 / pl->op.p);
        break;
      case KILN_REDUCE_LOGSUMEXP: v = st->a + log(st->b); break;
      default: break;
    }
    kiln_store_f64(tmp, pl->compute, v);
  }
  kiln_cvt(pl->compute, tmp, 0, pl->odtype, dst, 0, 1);
}

/* Base pointers of output o in x and out. */
static void output_ptrs(const red_plan_t* pl, int64_t o, const char** xp, char** op) {
  const char* x = pl->xdata;
  char* y = pl->odata;
  for (int d = 0; d < pl->nk; d++) {
    int64_t i = o % pl->kshape[d];
    o /= pl->kshape[d];
    x += i * pl->kxs[d];
    y += i * pl->kos[d];
  }
  *xp = x;
  *op = y;
}

static void reduce_output(const red_plan_t* pl, int64_t o) {
  const char* x;
  char* y;
  output_ptrs(pl, o, &x, &y);
  kiln_red_state_t acc, st;
  reduce_chunk(pl, x, 0, pl->chunk < pl->n_red ? pl->chunk : pl->n_red, &acc);
  for (int64_t c = 1; c < pl->n_chunks; c++) {
    int64_t r0 = c * pl->chunk, r1 = r0 + pl->chunk < pl->n_red ? r0 + pl->chunk : pl->n_red;
    reduce_chunk(pl, x, r0, r1, &st);
    kiln_red_combine(&pl->op, pl->is_float, &acc, &st);
  }
  finish(pl, &acc, y);
}

static void outputs_job(void* ctx, int64_t begin, int64_t end, int thread_id) {
  (void)thread_id;
  const red_plan_t* pl = ctx;
  if (pl->fast_sum) { /* the arithmetic of init + one kiln_red_seg + finish, without the calls */
    for (int64_t o = begin; o < end; o++) {
      const char* x;
      char* y;
      output_ptrs(pl, o, &x, &y);
      double a = 0;
      a += kiln_avx2_sum_f32((const float*)(const void*)x, pl->n_red);
      if (pl->op.op == KILN_REDUCE_MEAN) a = a / (double)pl->n_red;
      const float f = (float)a;
      memcpy(y, &f, sizeof f);
    }
    return;
  }
  for (int64_t o = begin; o < end; o++) reduce_output(ctx, o);
}

typedef struct {
  const red_plan_t* pl;
  const char* x;
  kiln_red_state_t* states;
} chunks_ctx_t;

static void chunks_job(void* ctx, int64_t begin, int64_t end, int thread_id) {
  (void)thread_id;
  const chunks_ctx_t* c = ctx;
  const red_plan_t* pl = c->pl;
  for (int64_t i = begin; i < end; i++) {
    int64_t r0 = i * pl->chunk, r1 = r0 + pl->chunk < pl->n_red ? r0 + pl->chunk : pl->n_red;
    reduce_chunk(pl, c->x, r0, r1, &c->states[i]);
  }
}

static void run_horizontal(const red_plan_t* pl) {
  if (pl->n_out >= 16 || pl->n_chunks == 1) {
    int64_t grain = RED_MIN_CHUNK / (pl->n_red ? pl->n_red : 1);
    if (grain < 1) grain = 1;
    if (pl->n_out <= grain) outputs_job((void*)pl, 0, pl->n_out, 0);
    else kiln_parallel_for(pl->n_out, grain, outputs_job, (void*)pl);
    return;
  }
  kiln_red_state_t states[RED_MAX_CHUNKS];
  for (int64_t o = 0; o < pl->n_out; o++) {
    chunks_ctx_t c = {pl, NULL, states};
    char* y;
    output_ptrs(pl, o, &c.x, &y);
    kiln_parallel_for(pl->n_chunks, 1, chunks_job, &c);
    for (int64_t i = 1; i < pl->n_chunks; i++)
      kiln_red_combine(&pl->op, pl->is_float, &states[0], &states[i]);
    finish(pl, &states[0], y);
  }
}

/* Steps the odometer over reduced dims d0.. (innermost first) by one; *p follows. */
static void odometer_next(const red_plan_t* pl, int64_t* idx, const char** p, int d0) {
  for (int d = d0; d < pl->nr; d++) {
    *p += pl->rxs[d];
    if (++idx[d] < pl->rshape[d]) return;
    *p -= idx[d] * pl->rxs[d];
    idx[d] = 0;
  }
}

/* Vertical: one task = up to RED_VBLOCK consecutive outputs along K dim 0 (x stride kxs[0]).
 * vert_rows feeds the reduced rows [r0, r1) (odometer order over R) into st[0..w). */
static void vert_rows(const red_plan_t* pl, const kiln_red_op_t* op, const char* x, int64_t w,
                      kiln_red_state_t* st, int64_t r0, int64_t r1) {
  const int64_t esz = (int64_t)kiln_dtype_size(pl->type), sk = pl->kxs[0];
  const int direct = pl->xdtype == pl->type && sk == esz && !pl->round_in;
  _Alignas(64) char buf[RED_VBLOCK * 8];
  int64_t idx[KILN_MAX_DIMS] = {0};
  const char* p = x;
  int64_t rem = r0;
  for (int d = 0; d < pl->nr; d++) {
    idx[d] = rem % pl->rshape[d];
    rem /= pl->rshape[d];
    p += idx[d] * pl->rxs[d];
  }
  /* f32 sums (and the first pass of var/std): the states' double accumulators in a contiguous
   * array that whole runs of rows (AVX2) or single rows add into; same per-column order and
   * arithmetic as kiln_red_vert. */
  const int dense_sum = pl->type == KILN_DTYPE_F32 &&
                        (op->op == KILN_REDUCE_SUM || op->op == KILN_REDUCE_MEAN ||
                         ((op->op == KILN_REDUCE_VAR || op->op == KILN_REDUCE_STD) && op->pass == 0));
  double acc[RED_VBLOCK];
  if (dense_sum)
    for (int64_t j = 0; j < w; j++) acc[j] = st[j].a;
  if (dense_sum && direct && pl->nr > 0 && kiln_cpu_has_avx2()) {
    /* whole runs along the innermost reduced dim, the accumulators in registers (same bits) */
    for (int64_t r = r0; r < r1;) {
      int64_t run = pl->rshape[0] - idx[0];
      if (run > r1 - r) run = r1 - r;
      kiln_avx2_acc_rows_f32((const float*)(const void*)p, pl->rxs[0] / esz, run, acc, w);
      r += run;
      idx[0] += run;
      p += run * pl->rxs[0];
      if (idx[0] < pl->rshape[0]) break; /* r == r1 */
      p -= idx[0] * pl->rxs[0];
      idx[0] = 0;
      odometer_next(pl, idx, &p, 1); /* the outer reduced dims */
    }
  } else {
    for (int64_t r = r0; r < r1; r++) {
      const char* row = p;
      if (!direct) {
        kiln_cvt(pl->xdtype, p, sk, pl->type, buf, esz, w);
        if (pl->round_in) kiln_cvt_round_f32(pl->compute, (float*)buf, w);
        row = buf;
      }
      if (dense_sum) {
        const float* f = (const float*)(const void*)row;
        for (int64_t j = 0; j < w; j++) acc[j] += (double)f[j];
      } else {
        kiln_red_vert(op, pl->type, row, w, st);
      }
      odometer_next(pl, idx, &p, 0);
    }
  }
  if (dense_sum)
    for (int64_t j = 0; j < w; j++) {
      st[j].a = acc[j];
      st[j].n += r1 - r0;
    }
}

static void vert_pass(const red_plan_t* pl, const kiln_red_op_t* op, const char* x, int64_t w,
                      kiln_red_state_t* st) {
  vert_rows(pl, op, x, w, st, 0, pl->n_red);
}

/* The inputs and outputs of vertical task t (a block of <= RED_VBLOCK outputs). */
static void vert_task(const red_plan_t* pl, int64_t t, const char** xp, char** yp, int64_t* wp) {
  const int64_t nb = (pl->kshape[0] + RED_VBLOCK - 1) / RED_VBLOCK;
  int64_t b = t % nb, rest = t / nb;
  const char* x = pl->xdata + b * RED_VBLOCK * pl->kxs[0];
  char* y = pl->odata + b * RED_VBLOCK * pl->kos[0];
  for (int d = 1; d < pl->nk; d++) {
    int64_t i = rest % pl->kshape[d];
    rest /= pl->kshape[d];
    x += i * pl->kxs[d];
    y += i * pl->kos[d];
  }
  int64_t w = pl->kshape[0] - b * RED_VBLOCK;
  *wp = w > RED_VBLOCK ? RED_VBLOCK : w;
  *xp = x;
  *yp = y;
}

/* Few vertical tasks over many rows (a norm's weight gradient: [8, 128, 128] summed to [128]):
 * rows are cut into chunks fixed by the shape alone (so results do not depend on the thread
 * count), each (task, chunk) sums its rows, and the partial states are combined in chunk order. */
typedef struct {
  const red_plan_t* pl;
  int64_t n_chunks, rows;
  kiln_red_state_t* part; /* [task][chunk][RED_VBLOCK] */
} vsplit_t;

static void vsplit_job(void* ctx, int64_t begin, int64_t end, int thread_id) {
  (void)thread_id;
  const vsplit_t* v = ctx;
  for (int64_t u = begin; u < end; u++) {
    const int64_t t = u / v->n_chunks, c = u % v->n_chunks;
    const char* x;
    char* y;
    int64_t w;
    vert_task(v->pl, t, &x, &y, &w);
    kiln_red_state_t* st = v->part + u * RED_VBLOCK;
    for (int64_t j = 0; j < w; j++) kiln_red_init(&v->pl->op, v->pl->is_float, &st[j]);
    const int64_t r0 = c * v->rows, r1 = r0 + v->rows < v->pl->n_red ? r0 + v->rows : v->pl->n_red;
    vert_rows(v->pl, &v->pl->op, x, w, st, r0, r1);
  }
}

static int run_vertical_split(const red_plan_t* pl, int64_t tasks) {
  const kiln_reduce_op_t o = pl->op.op;
  if (!pl->is_float || (o != KILN_REDUCE_SUM && o != KILN_REDUCE_MEAN)) return 0;
  const int64_t w = pl->kshape[0] < RED_VBLOCK ? pl->kshape[0] : RED_VBLOCK;
  int64_t rows = (RED_MIN_CHUNK + w - 1) / w; /* >= RED_MIN_CHUNK elements per chunk */
  const int64_t min_rows = (pl->n_red + 15) / 16; /* at most 16 chunks */
  if (rows < min_rows) rows = min_rows;
  const int64_t n_chunks = (pl->n_red + rows - 1) / rows;
  if (n_chunks < 2) return 0;
  vsplit_t v = {pl, n_chunks, rows, NULL};
  v.part = malloc(sizeof(kiln_red_state_t) * (size_t)(tasks * n_chunks * RED_VBLOCK));
  if (!v.part) return 0; /* the unsplit path needs no memory */
  kiln_parallel_for(tasks * n_chunks, 1, vsplit_job, &v);
  for (int64_t t = 0; t < tasks; t++) {
    const char* x;
    char* y;
    int64_t wt;
    vert_task(pl, t, &x, &y, &wt);
    kiln_red_state_t* st = v.part + t * n_chunks * RED_VBLOCK;
    for (int64_t c = 1; c < n_chunks; c++)
      for (int64_t j = 0; j < wt; j++)
        kiln_red_combine(&pl->op, pl->is_float, &st[j], &st[c * RED_VBLOCK + j]);
    for (int64_t j = 0; j < wt; j++) finish(pl, &st[j], y + j * pl->kos[0]);
  }
  free(v.part);
  return 1;
}

static void vertical_job(void* ctx, int64_t begin, int64_t end, int thread_id) {
  (void)thread_id;
  const red_plan_t* pl = ctx;
  kiln_red_state_t st[RED_VBLOCK];
  for (int64_t t = begin; t < end; t++) {
    const char* x;
    char* y;
    int64_t w;
    vert_task(pl, t, &x, &y, &w);
    for (int64_t j = 0; j < w; j++) kiln_red_init(&pl->op, pl->is_float, &st[j]);
    vert_pass(pl, &pl->op, x, w, st);
    if (is_two_pass(pl->op.op)) {
      int again = 0;
      for (int64_t j = 0; j < w; j++) again |= close_pass0(pl, &st[j]);
      if (again) {
        kiln_red_op_t op2 = pl->op;
        op2.pass = 1;
        kiln_red_state_t st2[RED_VBLOCK];
        for (int64_t j = 0; j < w; j++) {
          st2[j] = st[j];
          st2[j].b = 0;
        }
        vert_pass(pl, &op2, x, w, st2);
        for (int64_t j = 0; j < w; j++)
          if (!(pl->op.op == KILN_REDUCE_LOGSUMEXP && !isfinite(st[j].pivot))) st[j].b = st2[j].b;
      }
    }
    for (int64_t j = 0; j < w; j++) finish(pl, &st[j], y + j * pl->kos[0]);
  }
}

static void run_vertical(red_plan_t* pl) {
  const int64_t nb = (pl->kshape[0] + RED_VBLOCK - 1) / RED_VBLOCK;
  const int64_t tasks = nb * (pl->n_out / pl->kshape[0]);
  const int64_t per_task = (pl->kshape[0] < RED_VBLOCK ? pl->kshape[0] : RED_VBLOCK) * pl->n_red;
  int64_t grain = RED_MIN_CHUNK / (per_task ? per_task : 1);
  if (grain < 1) grain = 1;
  if (tasks < 4 && tasks * per_task >= 4 * RED_MIN_CHUNK && run_vertical_split(pl, tasks)) return;
  if (tasks <= grain) vertical_job(pl, 0, tasks, 0);
  else kiln_parallel_for(tasks, grain, vertical_job, pl);
}

static const char* const g_reduce_names[KILN_REDUCE_COUNT] = {
    "sum", "mean", "prod", "amax", "amin", "any", "all", "var", "std", "norm", "logsumexp"};

/* Sorts dims (shape, x stride, optional out stride) innermost first by |x stride| and merges
 * dims that are contiguous for x (and out). Returns the new count. */
static int order_dims(int n, int64_t* shape, int64_t* xs, int64_t* os) {
  for (int i = 1; i < n; i++)
    for (int j = i; j > 0 && llabs(xs[j]) < llabs(xs[j - 1]); j--) {
      int64_t t = shape[j]; shape[j] = shape[j - 1]; shape[j - 1] = t;
      t = xs[j]; xs[j] = xs[j - 1]; xs[j - 1] = t;
      if (os) { t = os[j]; os[j] = os[j - 1]; os[j - 1] = t; }
    }
  int m = 0;
  for (int i = 1; i < n; i++) {
    if (xs[i] == xs[m] * shape[m] && (!os || os[i] == os[m] * shape[m])) {
      shape[m] *= shape[i];
    } else {
      m++;
      shape[m] = shape[i];
      xs[m] = xs[i];
      if (os) os[m] = os[i];
    }
  }
  return n ? m + 1 : 0;
}

kiln_status_t kiln_kernel_reduce(kiln_reduce_op_t op, const kiln_tensor_t* x, uint32_t dim_mask,
                                 const kiln_reduce_params_t* p, kiln_dtype_t compute,
                                 kiln_tensor_t* out) {
  if ((int)op < 0 || op >= KILN_REDUCE_COUNT)
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "reduce: invalid op %d", (int)op);
  const char* name = g_reduce_names[op];
  KILN_RETURN_IF_ERROR(kiln_check_tensor(x, name));
  KILN_RETURN_IF_ERROR(kiln_check_tensor(out, name));
  if ((int)compute < 0 || compute >= KILN_DTYPE_COUNT)
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s: invalid compute dtype %d", name,
                      (int)compute);
  const int nd = x->ndim;
  const uint32_t all = nd ? (uint32_t)((1ull << nd) - 1) : 0;
  if (dim_mask & ~all)
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s: dim mask 0x%x out of range for rank %d",
                      name, (unsigned)dim_mask, nd);
  const int full = dim_mask == 0 || dim_mask == all;
  if (dim_mask == 0) dim_mask = all;
  const int is_float = kiln_dtype_is_float(compute);
  if (!is_float && (op == KILN_REDUCE_MEAN || op == KILN_REDUCE_VAR || op == KILN_REDUCE_STD ||
                    op == KILN_REDUCE_NORM || op == KILN_REDUCE_LOGSUMEXP))
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s: needs a floating compute dtype, got %s",
                      name, kiln_dtype_name(compute));
  /* Output shape: x's with reduced dims 1, or one element for a full reduction. */
  int out_full_scalar = 0;
  if (out->ndim == nd) {
    for (int d = 0; d < nd; d++) {
      int64_t want = (dim_mask >> d) & 1u ? 1 : x->shape[d];
      if (out->shape[d] != want) {
        out_full_scalar = -1;
        break;
      }
    }
  } else {
    out_full_scalar = -1;
  }
  if (out_full_scalar < 0) {
    if (full && kiln_tensor_numel(out) == 1) {
      out_full_scalar = 1;
    } else {
      char b1[200], b2[200];
      return kiln_error(KILN_ERROR_INVALID_ARGUMENT,
                        "%s: output shape %s does not match input %s reduced over mask 0x%x "
                        "(keep reduced dims as size 1)",
                        name, kiln_format_shape(b1, out->shape, out->ndim),
                        kiln_format_shape(b2, x->shape, nd), (unsigned)dim_mask);
    }
  }
  red_plan_t pl;
  memset(&pl, 0, sizeof pl);
  pl.op.op = op;
  pl.op.p = p ? p->p : 2.0;
  pl.correction = p ? p->correction : 1.0;
  if (op == KILN_REDUCE_NORM) {
    double q = pl.op.p;
    pl.op.norm_kind = q == 0 ? KILN_NORM_P0 : q == 1 ? KILN_NORM_P1 : q == 2 ? KILN_NORM_P2
                      : q == INFINITY ? KILN_NORM_INF : q == -INFINITY ? KILN_NORM_NINF
                                      : KILN_NORM_PGEN;
  }
  pl.compute = compute;
  pl.type = kiln_ew_internal(compute);
  pl.xdtype = x->dtype;
  pl.odtype = out->dtype;
  pl.is_float = is_float;
  pl.round_in = pl.type != compute && x->dtype != compute;
  pl.xdata = x->data;
  pl.odata = out->data;
  const int64_t xsz = (int64_t)kiln_dtype_size(x->dtype), osz = (int64_t)kiln_dtype_size(out->dtype);
  pl.n_out = 1;
  pl.n_red = 1;
  for (int d = 0; d < nd; d++) {
    if ((dim_mask >> d) & 1u) pl.n_red *= x->shape[d];
    else pl.n_out *= x->shape[d];
  }
  if (pl.n_red == 0 && (op == KILN_REDUCE_AMAX || op == KILN_REDUCE_AMIN ||
                        (op == KILN_REDUCE_NORM && (pl.op.norm_kind == KILN_NORM_INF ||
                                                    pl.op.norm_kind == KILN_NORM_NINF))))
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT,
                      "%s: Expected reduction dim to have non-zero size (empty input)", name);
  if (pl.n_out == 0) return KILN_OK;
  for (int d = nd - 1; d >= 0; d--) {
    if (x->shape[d] == 1) continue;
    if ((dim_mask >> d) & 1u) {
      pl.rshape[pl.nr] = x->shape[d];
      pl.rxs[pl.nr++] = x->strides[d] * xsz;
    } else {
      pl.kshape[pl.nk] = x->shape[d];
      pl.kxs[pl.nk] = x->strides[d] * xsz;
      pl.kos[pl.nk++] = out_full_scalar > 0 ? 0 : out->strides[d] * osz;
    }
  }
  pl.nr = order_dims(pl.nr, pl.rshape, pl.rxs, NULL);
  pl.nk = order_dims(pl.nk, pl.kshape, pl.kxs, pl.kos);
  if (pl.nr == 0) { /* only size-1 dims reduced: one element per output */
    pl.nr = 1;
    pl.rshape[0] = 1;
    pl.rxs[0] = 0;
  }
  pl.chunk = (pl.n_red + RED_MAX_CHUNKS - 1) / RED_MAX_CHUNKS;
  if (pl.chunk < RED_MIN_CHUNK) pl.chunk = RED_MIN_CHUNK;
  pl.n_chunks = pl.n_red ? (pl.n_red + pl.chunk - 1) / pl.chunk : 1;
  pl.fast_sum = (op == KILN_REDUCE_SUM || op == KILN_REDUCE_MEAN) && compute == KILN_DTYPE_F32 &&
                pl.type == KILN_DTYPE_F32 && x->dtype == KILN_DTYPE_F32 && !pl.round_in &&
                out->dtype == KILN_DTYPE_F32 && pl.nr == 1 && pl.rxs[0] == 4 &&
                pl.n_chunks == 1 && pl.n_red > 0 && kiln_cpu_has_avx2();
  const int vertical = pl.nk > 0 && pl.n_red > 0 && pl.kshape[0] >= 8 &&
                       llabs(pl.kxs[0]) < llabs(pl.rxs[0]);
  if (vertical) run_vertical(&pl);
  else run_horizontal(&pl);
  return KILN_OK;
}
