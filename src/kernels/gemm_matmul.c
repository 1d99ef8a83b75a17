/* SPDX-License-Identifier: Apache-2.0 */
/* gemm_matmul.c - kiln_kernel_matmul / kiln_kernel_matmul_ex: torch.matmul / addmm / baddbmm on
 * strided descriptors, on top of the f32 driver (gemm.c) and the f64 kernel (gemm_pack.c).
 *
 * Shapes are normalized to batch dims + [M, K] / [K, N] / [M, N] with broadcast strides (0). A
 * batch that only walks the rows of a and out (b shared) is folded into M, so x[B, T, K] @ w[K, N]
 * is one GEMM. f32 results are written in place when out is unit-stride along either matrix dim
 * (a column-major out runs the transposed product); otherwise, and for f16/bf16, the product goes
 * to an f32 scratch matrix that is combined with the bias and rounded once on store.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "kernels/gemm_internal.h"
#include "kernels/half.h"
#include "kiln/allocator.h"
#include "kiln/parallel.h"
#include "runtime/checked.h"

#define MAXD (KILN_MAX_DIMS + 1)

typedef struct mat {
  char* p; /* element (0, 0) */
  int64_t rows, cols, rs, cs;
} mat_t;

typedef struct mm_job {
  kiln_dtype_t dtype;
  size_t es;
  mat_t a, b, o, bias; /* bias.p == NULL: none */
  double alpha, beta;
  int nb;
  int64_t bshape[MAXD], sa[MAXD], sb[MAXD], so[MAXD], sbias[MAXD]; /* batch strides (elements) */
  int serial;
  atomic_int status;
} mm_job_t;

static void fmt_shape(char* buf, size_t size, const kiln_tensor_t* t) {
  size_t len = (size_t)snprintf(buf, size, "[");
  for (int i = 0; i < t->ndim && len < size; i++)
    len += (size_t)snprintf(buf + len, size - len, i ? ", %lld" : "%lld", (long long)t->shape[i]);
  if (len < size) snprintf(buf + len, size - len, "]");
}

static float ld_f(const char* p, kiln_dtype_t dt) {
  uint16_t h;
  switch (dt) {
    case KILN_DTYPE_F32: { float f; memcpy(&f, p, 4); return f; }
    case KILN_DTYPE_F64: { double d; memcpy(&d, p, 8); return (float)d; }
    case KILN_DTYPE_F16: memcpy(&h, p, 2); return kiln_f16_to_f32(h);
    default: memcpy(&h, p, 2); return kiln_bf16_to_f32(h);
  }
}

static void st_f(char* p, float v, kiln_dtype_t dt) {
  uint16_t h;
  switch (dt) {
    case KILN_DTYPE_F32: memcpy(p, &v, 4); break;
    case KILN_DTYPE_F16: h = kiln_f32_to_f16(v); memcpy(p, &h, 2); break;
    default: h = kiln_f32_to_bf16(v); memcpy(p, &h, 2); break;
  }
}

static int same_view(const mat_t* x, const mat_t* y) {
  return x->p == y->p && (x->rows == 1 || x->rs == y->rs) && (x->cols == 1 || x->cs == y->cs);
}

/* o = bias (f32 / f64 strided copy; beta applied by the GEMM). */
static void copy_bias(const mat_t* o, const mat_t* bias, size_t es) {
  for (int64_t i = 0; i < o->rows; i++)
    for (int64_t j = 0; j < o->cols; j++)
      memcpy(o->p + (i * o->rs + j * o->cs) * (int64_t)es,
             bias->p + (i * bias->rs + j * bias->cs) * (int64_t)es, es);
}

static kiln_gemm_src_t src_of(const mat_t* m, kiln_dtype_t dt, int transpose) {
  kiln_gemm_src_t s = {m->p, transpose ? m->cs : m->rs, transpose ? m->rs : m->cs, dt, NULL, 0};
  return s;
}

/* One f32 / f16 / bf16 product; `tmp` holds rows x cols f32 scratch once one is needed. */
static kiln_status_t mm_one_f(const mm_job_t* j, const mat_t* a, const mat_t* b, const mat_t* o,
                              const mat_t* bias, gemm_scratch_t** tmp) {
  const int has_bias = bias->p != NULL && j->beta != 0.0;
  kiln_sgemm_problem_t pr;
  memset(&pr, 0, sizeof(pr));
  pr.m = o->rows;
  pr.n = o->cols;
  pr.k = a->cols;
  pr.alpha = (float)j->alpha;
  pr.serial = j->serial;
  pr.a = src_of(a, j->dtype, 0);
  pr.b = src_of(b, j->dtype, 0);
  if (pr.n == 1) pr.b.cs = 1;
  kiln_gemm_epilogue_t ep = {0};
  int swap = -1; /* -1: scratch, 0: row-major in place, 1: transposed in place */
  if (j->dtype == KILN_DTYPE_F32) {
    if ((o->cs == 1 || o->cols == 1) && (o->rows == 1 || o->rs >= o->cols)) swap = 0;
    else if ((o->rs == 1 || o->rows == 1) && (o->cols == 1 || o->cs >= o->rows)) swap = 1;
  }
  if (swap >= 0) {
    if (swap) { /* C^T = B^T A^T: C^T is row-major with leading dim o->cs */
      pr.m = o->cols;
      pr.n = o->rows;
      pr.a = src_of(b, j->dtype, 1);
      pr.b = src_of(a, j->dtype, 1);
      if (pr.n == 1) pr.b.cs = 1;
      pr.ldc = o->cols == 1 ? (o->rows > 1 ? o->rows : 1) : o->cs;
    } else {
      pr.ldc = o->rows == 1 ? (o->cols > 1 ? o->cols : 1) : o->rs;
    }
    pr.c = (float*)o->p;
    pr.beta = 0.0f;
    if (has_bias) {
      const int row_vec = bias->rs == 0 && (bias->cs == 1 || o->cols == 1); /* bias[j] */
      const int col_vec = bias->cs == 0 && (bias->rs == 1 || o->rows == 1); /* bias[i] */
      if (same_view(bias, o)) {
        pr.beta = (float)j->beta;
      } else if (j->beta == 1.0 && (row_vec || col_vec)) {
        ep.bias = (const float*)bias->p;
        ep.bias_axis = row_vec ? !swap : swap;
        pr.ep = &ep;
        KILN_RETURN_IF_ERROR(kiln_gemm_resolve_act(&pr));
      } else {
        copy_bias(o, bias, 4);
        pr.beta = (float)j->beta;
      }
    }
    return kiln_sgemm_run(&pr);
  }
  if (*tmp == NULL) {
    *tmp = kiln_gemm_scratch_acquire(sizeof(float) * (size_t)(o->rows * o->cols));
    if (*tmp == NULL)
      return kiln_error(KILN_ERROR_OUT_OF_MEMORY, "kiln_kernel_matmul: no memory for a %lldx%lld f32 scratch",
                        (long long)o->rows, (long long)o->cols);
  }
  float* const t0 = (*tmp)->buf;
  pr.c = t0;
  pr.ldc = o->cols;
  KILN_RETURN_IF_ERROR(kiln_sgemm_run(&pr));
  const float beta = (float)j->beta;
  for (int64_t i = 0; i < o->rows; i++) {
    const float* t = t0 + i * o->cols;
    for (int64_t c = 0; c < o->cols; c++) {
      float v = t[c];
      if (has_bias) v += beta * ld_f(bias->p + (i * bias->rs + c * bias->cs) * (int64_t)j->es, j->dtype);
      st_f(o->p + (i * o->rs + c * o->cs) * (int64_t)j->es, v, j->dtype);
    }
  }
  return KILN_OK;
}

static kiln_status_t mm_one_d(const mm_job_t* j, const mat_t* a, const mat_t* b, const mat_t* o,
                              const mat_t* bias) {
  double beta = 0.0;
  if (bias->p != NULL && j->beta != 0.0) {
    if (!same_view(bias, o)) copy_bias(o, bias, 8);
    beta = j->beta;
  }
  return kiln_dgemm_strided(o->rows, o->cols, a->cols, j->alpha, (const double*)a->p, a->rs, a->cs,
                            (const double*)b->p, b->rs, b->cs, beta, (double*)o->p, o->rs, o->cs);
}

static void mm_range(void* ctx, int64_t begin, int64_t end, int tid) {
  (void)tid;
  mm_job_t* j = ctx;
  gemm_scratch_t* tmp = NULL;
  for (int64_t idx = begin; idx < end; idx++) {
    mat_t a = j->a, b = j->b, o = j->o, bias = j->bias;
    int64_t rem = idx;
    for (int d = j->nb - 1; d >= 0; d--) {
      const int64_t i = rem % j->bshape[d];
      rem /= j->bshape[d];
      a.p += i * j->sa[d] * (int64_t)j->es;
      b.p += i * j->sb[d] * (int64_t)j->es;
      o.p += i * j->so[d] * (int64_t)j->es;
      if (bias.p) bias.p += i * j->sbias[d] * (int64_t)j->es;
    }
    kiln_status_t s = j->dtype == KILN_DTYPE_F64 ? mm_one_d(j, &a, &b, &o, &bias)
                                                 : mm_one_f(j, &a, &b, &o, &bias, &tmp);
    if (s != KILN_OK) {
      atomic_store(&j->status, s);
      break;
    }
  }
  kiln_gemm_scratch_release(tmp);
}

/* Folds all batch dims into the row dim of `m` (rows stride rs) when they walk rows evenly. */
static int fold_rows(int nb, const int64_t* shape, const int64_t* st, const mat_t* m,
                     int64_t* rs_out) {
  int64_t size = m->rows, stride = m->rs;
  for (int d = nb - 1; d >= 0; d--) {
    if (shape[d] == 1) continue;
    if (size == 1) stride = st[d];
    else if (st[d] != stride * size) return 0;
    size *= shape[d];
  }
  *rs_out = size == 1 ? m->rs : stride;
  return 1;
}

/* out = beta*bias + alpha*(a @ b). */
kiln_status_t kiln_kernel_matmul_ex(const kiln_tensor_t* a, const kiln_tensor_t* b,
                                    const kiln_tensor_t* bias, double alpha, double beta,
                                    kiln_tensor_t* out) {
  if (a == NULL || b == NULL || out == NULL)
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "kiln_kernel_matmul: NULL tensor descriptor");
  char sa[160], sb[160], so[160];
  fmt_shape(sa, sizeof(sa), a);
  fmt_shape(sb, sizeof(sb), b);
  fmt_shape(so, sizeof(so), out);
  if (a->ndim < 1 || b->ndim < 1 || a->ndim > KILN_MAX_DIMS || b->ndim > KILN_MAX_DIMS ||
      out->ndim < 0 || out->ndim > KILN_MAX_DIMS)
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT,
                      "kiln_kernel_matmul: a %s and b %s need at least 1 dim each (out %s)", sa, sb, so);
  if (!kiln_tensor_size_ok(a) || !kiln_tensor_size_ok(b) || !kiln_tensor_size_ok(out) ||
      (bias && (bias->ndim < 0 || bias->ndim > KILN_MAX_DIMS || !kiln_tensor_size_ok(bias))))
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT,
                      "kiln_kernel_matmul: a %s, b %s or out %s (or bias) is too large (limit 2^48 "
                      "elements) or strided beyond int64", sa, sb, so);
  if (a->dtype != b->dtype || a->dtype != out->dtype || (bias && bias->dtype != out->dtype))
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT,
                      "kiln_kernel_matmul: dtypes differ: a %s %s, b %s %s, out %s %s%s%s",
                      kiln_dtype_name(a->dtype), sa, kiln_dtype_name(b->dtype), sb,
                      kiln_dtype_name(out->dtype), so, bias ? ", bias " : "",
                      bias ? kiln_dtype_name(bias->dtype) : "");
  if (!kiln_dtype_is_float(a->dtype))
    return kiln_error(KILN_ERROR_UNIMPLEMENTED, "kiln_kernel_matmul: dtype %s is not supported",
                      kiln_dtype_name(a->dtype));
  mm_job_t j;
  memset(&j, 0, sizeof(j));
  j.dtype = a->dtype;
  j.es = kiln_dtype_size(a->dtype);
  j.alpha = alpha;
  j.beta = beta;
  const int a1 = a->ndim == 1, b1 = b->ndim == 1;
  const int an = a->ndim, bn = b->ndim;
  j.a = (mat_t){a->data, a1 ? 1 : a->shape[an - 2], a->shape[an - 1], a1 ? 0 : a->strides[an - 2],
                a->strides[an - 1]};
  j.b = b1 ? (mat_t){b->data, b->shape[0], 1, b->strides[0], 0}
           : (mat_t){b->data, b->shape[bn - 2], b->shape[bn - 1], b->strides[bn - 2], b->strides[bn - 1]};
  if (j.a.cols != j.b.rows)
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT,
                      "kiln_kernel_matmul: a %s and b %s: inner dims %lld and %lld differ", sa, sb,
                      (long long)j.a.cols, (long long)j.b.rows);
  const int nba = a1 ? 0 : an - 2, nbb = b1 ? 0 : bn - 2;
  j.nb = nba > nbb ? nba : nbb;
  int64_t numel = 1, a_numel = j.a.rows * j.a.cols, b_numel = j.b.rows * j.b.cols;
  for (int d = 0; d < j.nb; d++) {
    const int da = d - (j.nb - nba), db = d - (j.nb - nbb);
    const int64_t xa = da >= 0 ? a->shape[da] : 1, xb = db >= 0 ? b->shape[db] : 1;
    if (xa != xb && xa != 1 && xb != 1)
      return kiln_error(KILN_ERROR_INVALID_ARGUMENT,
                        "kiln_kernel_matmul: batch dims of a %s and b %s do not broadcast", sa, sb);
    j.bshape[d] = xa == 1 ? xb : xa;
    j.sa[d] = xa == 1 ? 0 : a->strides[da];
    j.sb[d] = xb == 1 ? 0 : b->strides[db];
    numel *= j.bshape[d];
    a_numel *= xa;
    b_numel *= xb;
  }
  /* Expected out shape: batch, then M unless a is 1-D, then N unless b is 1-D. */
  int64_t want[MAXD + 2];
  int wn = 0;
  for (int d = 0; d < j.nb; d++) want[wn++] = j.bshape[d];
  if (!a1) want[wn++] = j.a.rows;
  if (!b1) want[wn++] = j.b.cols;
  int ok = out->ndim == wn;
  for (int d = 0; ok && d < wn; d++) ok = out->shape[d] == want[d];
  if (!ok)
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT,
                      "kiln_kernel_matmul: a %s @ b %s does not give out %s", sa, sb, so);
  for (int d = 0; d < j.nb; d++) j.so[d] = out->strides[d];
  j.o = (mat_t){out->data, j.a.rows, j.b.cols, a1 ? 0 : out->strides[j.nb], b1 ? 0 : out->strides[wn - 1]};
  if (bias != NULL && beta != 0.0) {
    char sbias[160];
    fmt_shape(sbias, sizeof(sbias), bias);
    int64_t bst[MAXD + 2] = {0};
    if (bias->ndim < 0 || bias->ndim > wn)
      return kiln_error(KILN_ERROR_INVALID_ARGUMENT,
                        "kiln_kernel_matmul_ex: bias %s does not broadcast to out %s", sbias, so);
    for (int d = 0; d < bias->ndim; d++) {
      const int od = d + wn - bias->ndim;
      if (bias->shape[d] != 1 && bias->shape[d] != want[od])
        return kiln_error(KILN_ERROR_INVALID_ARGUMENT,
                          "kiln_kernel_matmul_ex: bias %s does not broadcast to out %s", sbias, so);
      bst[od] = bias->shape[d] == 1 ? 0 : bias->strides[d];
    }
    for (int d = 0; d < j.nb; d++) j.sbias[d] = bst[d];
    j.bias = (mat_t){bias->data, j.o.rows, j.o.cols, a1 ? 0 : bst[j.nb], b1 ? 0 : bst[wn - 1]};
    if (bias->data == NULL && numel * j.o.rows * j.o.cols > 0)
      return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "kiln_kernel_matmul_ex: bias data is NULL");
  }
  if (numel * j.o.rows * j.o.cols == 0) return KILN_OK;
  if (out->data == NULL || (alpha != 0.0 && ((a_numel > 0 && a->data == NULL) || (b_numel > 0 && b->data == NULL))))
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "kiln_kernel_matmul: NULL data pointer");

  /* b shared by the whole batch and rows of a / out / bias evenly spaced: one tall GEMM. */
  int shared_b = 1;
  for (int d = 0; d < j.nb; d++) shared_b &= j.bshape[d] == 1 || j.sb[d] == 0;
  int64_t rs_a, rs_o, rs_bias = 0;
  if (j.nb > 0 && numel > 1 && shared_b && fold_rows(j.nb, j.bshape, j.sa, &j.a, &rs_a) &&
      fold_rows(j.nb, j.bshape, j.so, &j.o, &rs_o) &&
      (j.bias.p == NULL || fold_rows(j.nb, j.bshape, j.sbias, &j.bias, &rs_bias))) {
    j.a.rows *= numel;
    j.a.rs = rs_a;
    j.o.rows *= numel;
    j.o.rs = rs_o;
    j.bias.rows *= numel;
    j.bias.rs = rs_bias;
    j.nb = 0;
    numel = 1;
  }
  atomic_init(&j.status, KILN_OK);
  const double mnk = (double)j.o.rows * (double)j.o.cols * (double)j.a.cols;
  if (numel > 1 && mnk < 4.0 * 128 * 128 * 128) {
    j.serial = 1; /* many small products: one per thread at a time */
    kiln_parallel_for(numel, 1, mm_range, &j);
  } else {
    mm_range(&j, 0, numel, 0);
  }
  kiln_status_t s = atomic_load(&j.status);
  if (s != KILN_OK && j.serial)
    return kiln_error(s, "kiln_kernel_matmul: out of memory in a batched product");
  return s;
}

/* out = a @ b. */
kiln_status_t kiln_kernel_matmul(const kiln_tensor_t* a, const kiln_tensor_t* b,
                                 kiln_tensor_t* out) {
  return kiln_kernel_matmul_ex(a, b, NULL, 1.0, 0.0, out);
}
