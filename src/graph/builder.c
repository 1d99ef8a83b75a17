/* SPDX-License-Identifier: Apache-2.0 */
/* builder.c - the public builder API: each call fills a gx_spec and hands it to gx_add. */
#include <string.h>

#include "graph/graph_internal.h"
#include "kiln/dtype.h"
#include "kiln/kernels/elementwise.h"
#include "kiln/kernels/reduce.h"
#include "runtime/checked.h"

#define BADARG(...) kiln_error(KILN_ERROR_INVALID_ARGUMENT, __VA_ARGS__)

static gx_spec spec(int op, int n_in, const int* in) {
  gx_spec s;
  memset(&s, 0, sizeof s);
  s.op = op;
  s.n_in = n_in;
  s.in = in;
  s.dtype = -1;
  s.dtype2 = -1;
  return s;
}

static kiln_status_t put_shape(gx_spec* s, int ndim, const int64_t* shape, const char* what) {
  if (ndim < 0 || ndim > KILN_MAX_DIMS) return BADARG("%s: ndim %d outside [0, 8]", what, ndim);
  if (ndim > 0 && !shape) return BADARG("%s: NULL shape", what);
  s->n_i = ndim;
  for (int i = 0; i < ndim; i++) s->i[i] = shape[i];
  return KILN_OK;
}

static kiln_status_t add1(kiln_graph_t* g, const gx_spec* s, int* out_vid, const char* what) {
  if (!g) return BADARG("%s: NULL graph", what);
  if (!out_vid) return BADARG("%s: NULL out", what);
  int outs[GX_MAX_OUT];
  KILN_RETURN_IF_ERROR(gx_add(g, s, outs));
  *out_vid = outs[0];
  return KILN_OK;
}

/* Adds a multi-output node and stores each output id through the (optional) pointers. */
static kiln_status_t addn(kiln_graph_t* g, const gx_spec* s, int* o0, int* o1, int* o2,
                          const char* what) {
  if (!g) return BADARG("%s: NULL graph", what);
  int outs[GX_MAX_OUT] = {-1, -1, -1};
  KILN_RETURN_IF_ERROR(gx_add(g, s, outs));
  if (o0) *o0 = outs[0];
  if (o1) *o1 = outs[1];
  if (o2) *o2 = outs[2];
  return KILN_OK;
}

kiln_status_t kiln_graph_input(kiln_graph_t* g, int dtype, int ndim, const int64_t* shape,
                               int* out_vid) {
  gx_spec s = spec(GX_OP_INPUT, 0, NULL);
  s.dtype = dtype;
  KILN_RETURN_IF_ERROR(put_shape(&s, ndim, shape, "kiln_graph_input"));
  return add1(g, &s, out_vid, "kiln_graph_input");
}

kiln_status_t kiln_graph_constant(kiln_graph_t* g, int dtype, int ndim, const int64_t* shape,
                                  const void* data, int* out_vid) {
  gx_spec s = spec(GX_OP_CONST, 0, NULL);
  s.dtype = dtype;
  KILN_RETURN_IF_ERROR(put_shape(&s, ndim, shape, "kiln_graph_constant"));
  if (!gx_valid_dtype(dtype)) return BADARG("kiln_graph_constant: bad dtype %d", dtype);
  int64_t nbytes;
  for (int i = 0; i < ndim; i++)
    if (shape[i] < 0) return BADARG("kiln_graph_constant: negative dim");
  if (!kiln_nbytes(shape, ndim, kiln_dtype_size((kiln_dtype_t)dtype), &nbytes))
    return BADARG("kiln_graph_constant: shape too large (limit 2^48 elements)");
  s.data = data;
  s.data_bytes = (size_t)nbytes;
  return add1(g, &s, out_vid, "kiln_graph_constant");
}

/* A double stored into an integer dtype must be a finite value within int64's range (torch:
 * "value cannot be converted to type ... without overflow"); bool and floating take anything. */
static kiln_status_t check_int_value(double v, int dtype, const char* what) {
  int64_t iv;
  if (dtype == KILN_DTYPE_BOOL || kiln_dtype_is_float((kiln_dtype_t)dtype)) return KILN_OK;
  if (kiln_f64_to_i64(v, &iv)) return KILN_OK;
  return BADARG("%s: value %g cannot be converted to %s", what, v,
                kiln_dtype_name((kiln_dtype_t)dtype));
}

static kiln_status_t scalar_common(kiln_graph_t* g, int dtype, const kiln_tensor_t* src,
                                   int* out_vid, const char* what) {
  if (!gx_valid_dtype(dtype)) return BADARG("%s: bad dtype %d", what, dtype);
  if (src->dtype == KILN_DTYPE_F64)
    KILN_RETURN_IF_ERROR(check_int_value(*(const double*)src->data, dtype, what));
  _Alignas(8) char buf[8];
  kiln_tensor_t t;
  kiln_tensor_init_contiguous(&t, buf, (kiln_dtype_t)dtype, 0, NULL);
  KILN_RETURN_IF_ERROR(kiln_kernel_copy(src, &t));
  gx_spec s = spec(GX_OP_CONST, 0, NULL);
  s.dtype = dtype;
  s.sub = 1;
  s.data = buf;
  s.data_bytes = kiln_dtype_size((kiln_dtype_t)dtype);
  return add1(g, &s, out_vid, what);
}

kiln_status_t kiln_graph_scalar(kiln_graph_t* g, double value, int dtype, int* out_vid) {
  kiln_tensor_t src;
  kiln_tensor_init_contiguous(&src, &value, KILN_DTYPE_F64, 0, NULL);
  return scalar_common(g, dtype, &src, out_vid, "kiln_graph_scalar");
}

kiln_status_t kiln_graph_scalar_i64(kiln_graph_t* g, int64_t value, int dtype, int* out_vid) {
  kiln_tensor_t src;
  kiln_tensor_init_contiguous(&src, &value, KILN_DTYPE_I64, 0, NULL);
  return scalar_common(g, dtype, &src, out_vid, "kiln_graph_scalar_i64");
}

kiln_status_t kiln_graph_full(kiln_graph_t* g, int dtype, int ndim, const int64_t* shape,
                              double value, int* out_vid) {
  if (!g || !out_vid) return BADARG("kiln_graph_full: NULL argument");
  if (!gx_valid_dtype(dtype)) return BADARG("kiln_graph_full: bad dtype %d", dtype);
  gx_spec e = spec(GX_OP_EXPAND, 1, NULL);
  KILN_RETURN_IF_ERROR(put_shape(&e, ndim, shape, "kiln_graph_full"));
  for (int i = 0; i < ndim; i++)
    if (shape[i] < 0) return BADARG("kiln_graph_full: negative dim");
  KILN_RETURN_IF_ERROR(check_int_value(value, dtype, "kiln_graph_full"));
  _Alignas(8) char buf[8];
  kiln_tensor_t t, src;
  kiln_tensor_init_contiguous(&t, buf, (kiln_dtype_t)dtype, 0, NULL);
  kiln_tensor_init_contiguous(&src, &value, KILN_DTYPE_F64, 0, NULL);
  KILN_RETURN_IF_ERROR(kiln_kernel_copy(&src, &t));
  gx_spec c = spec(GX_OP_CONST, 0, NULL);
  c.dtype = dtype;
  c.data = buf;
  c.data_bytes = kiln_dtype_size((kiln_dtype_t)dtype);
  int cv;
  KILN_RETURN_IF_ERROR(add1(g, &c, &cv, "kiln_graph_full"));
  e.in = &cv;
  kiln_status_t st = add1(g, &e, out_vid, "kiln_graph_full");
  if (st != KILN_OK) gx_pop_node(g);
  return st;
}

/* ---- pointwise ------------------------------------------------------------------------------- */

kiln_status_t kiln_graph_unary_ex(kiln_graph_t* g, int op, int x, double alpha, double scale,
                                  double input_scale, double threshold, double min, double max,
                                  int has_min, int has_max, int out_dtype, int* out_vid) {
  int in[1] = {x};
  gx_spec s = spec(GX_OP_UNARY, 1, in);
  s.sub = op;
  s.dtype = out_dtype;
  s.f[0] = alpha;
  s.f[1] = scale;
  s.f[2] = input_scale;
  s.f[3] = threshold;
  s.f[4] = min;
  s.f[5] = max;
  s.i[0] = has_min != 0;
  s.i[1] = has_max != 0;
  s.n_i = 2;
  return add1(g, &s, out_vid, "kiln_graph_unary");
}

kiln_status_t kiln_graph_unary(kiln_graph_t* g, int op, int x, int out_dtype, int* out_vid) {
  if (op >= KILN_UNARY_LEAKY_RELU && op < KILN_UNARY_COUNT)
    return BADARG("kiln_graph_unary: op %d needs parameters (kiln_graph_unary_ex)", op);
  return kiln_graph_unary_ex(g, op, x, 0, 0, 0, 0, 0, 0, 0, 0, out_dtype, out_vid);
}

kiln_status_t kiln_graph_binary_ex(kiln_graph_t* g, int op, int a, int b, double alpha,
                                   int compute_dtype, int out_dtype, int* out_vid) {
  int in[2] = {a, b};
  gx_spec s = spec(GX_OP_BINARY, 2, in);
  s.sub = op;
  s.dtype = out_dtype;
  s.dtype2 = compute_dtype;
  s.f[0] = alpha;
  return add1(g, &s, out_vid, "kiln_graph_binary");
}

kiln_status_t kiln_graph_binary(kiln_graph_t* g, int op, int a, int b, double alpha,
                                int out_dtype, int* out_vid) {
  return kiln_graph_binary_ex(g, op, a, b, alpha, -1, out_dtype, out_vid);
}

kiln_status_t kiln_graph_ternary(kiln_graph_t* g, int op, int a, int b, int c, double scalar,
                                 int out_dtype, int* out_vid) {
  int in[3] = {a, b, c};
  gx_spec s = spec(GX_OP_TERNARY, 3, in);
  s.sub = op;
  s.dtype = out_dtype;
  s.f[0] = scalar;
  return add1(g, &s, out_vid, "kiln_graph_ternary");
}

kiln_status_t kiln_graph_where(kiln_graph_t* g, int cond, int a, int b, int* out_vid) {
  if (!g) return BADARG("kiln_graph_where: NULL graph");
  if (!gx_valid_vid(g, a) || !gx_valid_vid(g, b))
    return BADARG("kiln_graph_where: unknown value id");
  int ab[2] = {a, b};
  return kiln_graph_ternary(g, KILN_TERNARY_WHERE, cond, a, b, 0.0, gx_result_type(g, ab, 2),
                            out_vid);
}

kiln_status_t kiln_graph_cast(kiln_graph_t* g, int x, int dtype, int* out_vid) {
  if (!g || !out_vid) return BADARG("kiln_graph_cast: NULL argument");
  if (!gx_valid_vid(g, x)) return BADARG("kiln_graph_cast: unknown value id %d", x);
  if (!gx_valid_dtype(dtype)) return BADARG("kiln_graph_cast: bad dtype %d", dtype);
  if (g->values[x].dtype == dtype) {
    *out_vid = x;
    return KILN_OK;
  }
  int in[1] = {x};
  gx_spec s = spec(GX_OP_CAST, 1, in);
  s.dtype = dtype;
  return add1(g, &s, out_vid, "kiln_graph_cast");
}

kiln_status_t kiln_graph_copy(kiln_graph_t* g, int self, int src, int* out_vid) {
  if (!g || !out_vid) return BADARG("kiln_graph_copy: NULL argument");
  if (!gx_valid_vid(g, self) || !gx_valid_vid(g, src))
    return BADARG("kiln_graph_copy: unknown value id");
  const gx_value* d = &g->values[self];
  const gx_value* s = &g->values[src];
  int v = src;
  int pushed = 0;
  if (s->ndim != d->ndim || memcmp(s->shape, d->shape, sizeof(int64_t) * (size_t)d->ndim)) {
    kiln_status_t st = kiln_graph_expand(g, src, d->ndim, d->shape, &v);
    if (st != KILN_OK) return st;
    pushed = 1;
  }
  int dt = g->values[self].dtype;
  if (g->values[v].dtype == dt) {
    /* a plain copy of same dtype: materialize so the result never aliases src */
    kiln_status_t st = kiln_graph_contiguous(g, v, out_vid);
    if (st != KILN_OK && pushed) gx_pop_node(g);
    return st;
  }
  kiln_status_t st = kiln_graph_cast(g, v, dt, out_vid);
  if (st != KILN_OK && pushed) gx_pop_node(g);
  return st;
}

/* ---- reductions ------------------------------------------------------------------------------ */

kiln_status_t kiln_graph_reduce(kiln_graph_t* g, int op, int x, uint32_t dim_mask, int keepdim,
                                double param, int out_dtype, int* out_vid) {
  int in[1] = {x};
  gx_spec s = spec(GX_OP_REDUCE, 1, in);
  s.sub = op;
  s.dtype = out_dtype;
  s.i[0] = (int64_t)dim_mask;
  s.i[1] = keepdim;
  s.n_i = 2;
  s.f[0] = param;
  return add1(g, &s, out_vid, "kiln_graph_reduce");
}

kiln_status_t kiln_graph_reduce_index(kiln_graph_t* g, int op, int x, int dim, int keepdim,
                                      int* out_values, int* out_indices) {
  int in[1] = {x};
  gx_spec s = spec(GX_OP_REDUCE_INDEX, 1, in);
  s.sub = op;
  s.i[0] = dim;
  s.i[1] = keepdim;
  s.n_i = 2;
  return addn(g, &s, out_values, out_indices, NULL, "kiln_graph_reduce_index");
}

kiln_status_t kiln_graph_scan(kiln_graph_t* g, int op, int x, int dim, int out_dtype,
                              int* out_vid) {
  int in[1] = {x};
  gx_spec s = spec(GX_OP_SCAN, 1, in);
  s.sub = op;
  s.dtype = out_dtype;
  s.i[0] = dim;
  s.n_i = 1;
  return add1(g, &s, out_vid, "kiln_graph_scan");
}

/* ---- linear algebra -------------------------------------------------------------------------- */

/* Removes every node added after the graph had n0 nodes (undo of a multi-node builder). */
static void rollback(kiln_graph_t* g, int n0) {
  while (g->n_nodes > n0) gx_pop_node(g);
}

/* 1 if a and b are integer (not bool) operands of one dtype: matmul then has no GEMM kernel and
 * is built from existing kernels instead. */
static int int_operands(const kiln_graph_t* g, int a, int b) {
  if (!g || !gx_valid_vid(g, a) || !gx_valid_vid(g, b)) return 0;
  int dt = g->values[a].dtype;
  return dt == g->values[b].dtype && !kiln_dtype_is_float((kiln_dtype_t)dt) &&
         dt != KILN_DTYPE_BOOL;
}

/* Integer torch.matmul as sum(a[..., M, 1, K] * b^T[..., 1, N, K], -1) in the integer dtype
 * (wrapping like torch). The compiler fuses the product into the reduction, so the [M, N, K]
 * product is never materialized (rows up to the fused-reduction limit). */
static kiln_status_t int_matmul(kiln_graph_t* g, int a, int b, int* out_vid) {
  const char* what = "kiln_graph_matmul";
  gx_value av = g->values[a], bv = g->values[b];
  int dt = av.dtype;
  if (av.ndim < 1 || bv.ndim < 1) return BADARG("%s: operands must have rank >= 1", what);
  int64_t sa[KILN_MAX_DIMS + 1], sb[KILN_MAX_DIMS + 1];
  int na = av.ndim, nb = bv.ndim, drop_m = 0, drop_n = 0;
  memcpy(sa, av.shape, sizeof(int64_t) * (size_t)na);
  memcpy(sb, bv.shape, sizeof(int64_t) * (size_t)nb);
  if (na == 1) {
    sa[1] = sa[0];
    sa[0] = 1;
    na = 2;
    drop_m = 1;
  }
  if (nb == 1) {
    sb[1] = 1;
    nb = 2;
    drop_n = 1;
  }
  int64_t K = sa[na - 1], M = sa[na - 2], N = sb[nb - 1];
  if (sb[nb - 2] != K) {
    char b1[200], b2[200];
    return BADARG("%s: shapes %s and %s cannot be multiplied", what,
                  gx_fmt_shape(b1, av.shape, av.ndim), gx_fmt_shape(b2, bv.shape, bv.ndim));
  }
  if (na + 1 > KILN_MAX_DIMS || nb + 1 > KILN_MAX_DIMS)
    return kiln_error(KILN_ERROR_UNIMPLEMENTED, "%s: integer matmul of rank %d is not supported",
                      what, na > nb ? na : nb);
  int n0 = g->n_nodes;
  kiln_status_t st;
  int a2 = a, b2 = b, a3, bt, b3, prod, sum, res;
  int64_t s3[KILN_MAX_DIMS];
  int perm[KILN_MAX_DIMS];
  if (av.ndim == 1 && (st = kiln_graph_reshape(g, a, 2, sa, &a2))) goto fail;
  if (bv.ndim == 1) {
    int64_t kb[2] = {K, 1};
    if ((st = kiln_graph_reshape(g, b, 2, kb, &b2))) goto fail;
  }
  memcpy(s3, sa, sizeof(int64_t) * (size_t)(na - 1));
  s3[na - 1] = 1;
  s3[na] = K;
  if ((st = kiln_graph_reshape(g, a2, na + 1, s3, &a3))) goto fail;
  for (int i = 0; i < nb; i++) perm[i] = i;
  perm[nb - 2] = nb - 1;
  perm[nb - 1] = nb - 2;
  if ((st = kiln_graph_permute(g, b2, perm, &bt))) goto fail;
  memcpy(s3, sb, sizeof(int64_t) * (size_t)(nb - 2));
  s3[nb - 2] = 1;
  s3[nb - 1] = N;
  s3[nb] = K;
  if ((st = kiln_graph_reshape(g, bt, nb + 1, s3, &b3))) goto fail;
  if ((st = kiln_graph_binary_ex(g, KILN_BINARY_MUL, a3, b3, 1.0, dt, dt, &prod))) goto fail;
  int rank = g->values[prod].ndim;
  if ((st = kiln_graph_reduce(g, KILN_REDUCE_SUM, prod, 1u << (rank - 1), 0, 0.0, dt, &sum)))
    goto fail;
  res = sum;
  if (drop_m || drop_n) {
    const gx_value* sv = &g->values[sum];
    int64_t rs[KILN_MAX_DIMS];
    int nr = sv->ndim - 2;
    memcpy(rs, sv->shape, sizeof(int64_t) * (size_t)nr);
    if (!drop_m) rs[nr++] = M;
    if (!drop_n) rs[nr++] = N;
    if ((st = kiln_graph_reshape(g, sum, nr, rs, &res))) goto fail;
  }
  *out_vid = res;
  return KILN_OK;
fail:
  rollback(g, n0);
  return st;
}

kiln_status_t kiln_graph_matmul(kiln_graph_t* g, int a, int b, int* out_vid) {
  if (out_vid && int_operands(g, a, b)) return int_matmul(g, a, b, out_vid);
  int in[2] = {a, b};
  gx_spec s = spec(GX_OP_MATMUL, 2, in);
  return add1(g, &s, out_vid, "kiln_graph_matmul");
}

kiln_status_t kiln_graph_addmm(kiln_graph_t* g, int bias, int a, int b, double beta, double alpha,
                               int* out_vid) {
  if (out_vid && int_operands(g, a, b)) {
    /* beta * bias + alpha * (a @ b) with integer scalars, as torch does for integer dtypes */
    int dt = g->values[a].dtype;
    if (bias >= 0 && (!gx_valid_vid(g, bias) || g->values[bias].dtype != dt))
      return BADARG("kiln_graph_addmm: bias must have the operands' dtype");
    int64_t ialpha, ibeta;
    if (!kiln_f64_to_i64(alpha, &ialpha) || !kiln_f64_to_i64(beta, &ibeta))
      return BADARG("kiln_graph_addmm: alpha %g / beta %g is not an int64 value for %s operands",
                    alpha, beta, kiln_dtype_name((kiln_dtype_t)dt));
    int n0 = g->n_nodes;
    int mm, sc, res;
    kiln_status_t st = int_matmul(g, a, b, &mm);
    if (st != KILN_OK) return st;
    if (alpha != 1.0) {
      if ((st = kiln_graph_scalar_i64(g, ialpha, dt, &sc)) ||
          (st = kiln_graph_binary_ex(g, KILN_BINARY_MUL, mm, sc, 1.0, dt, dt, &mm)))
        goto fail;
    }
    res = mm;
    if (bias >= 0 && beta != 0.0) {
      const gx_value* bv = &g->values[bias];
      const gx_value* mv = &g->values[mm];
      if (!gx_broadcasts_to(bv->shape, bv->ndim, mv->shape, mv->ndim)) {
        char b1[200], b2[200];
        st = BADARG("kiln_graph_addmm: bias %s does not broadcast to %s",
                    gx_fmt_shape(b1, bv->shape, bv->ndim), gx_fmt_shape(b2, mv->shape, mv->ndim));
        goto fail;
      }
      int bb = bias;
      if (beta != 1.0) {
        if ((st = kiln_graph_scalar_i64(g, ibeta, dt, &sc)) ||
            (st = kiln_graph_binary_ex(g, KILN_BINARY_MUL, bias, sc, 1.0, dt, dt, &bb)))
          goto fail;
      }
      if ((st = kiln_graph_binary_ex(g, KILN_BINARY_ADD, bb, mm, 1.0, dt, dt, &res))) goto fail;
    }
    *out_vid = res;
    return KILN_OK;
  fail:
    rollback(g, n0);
    return st;
  }
  int in[3] = {bias, a, b};
  gx_spec s = spec(GX_OP_ADDMM, 3, in);
  s.f[0] = beta;
  s.f[1] = alpha;
  return add1(g, &s, out_vid, "kiln_graph_addmm");
}

/* ---- views ----------------------------------------------------------------------------------- */

kiln_status_t kiln_graph_reshape(kiln_graph_t* g, int x, int ndim, const int64_t* shape,
                                 int* out_vid) {
  int in[1] = {x};
  gx_spec s = spec(GX_OP_RESHAPE, 1, in);
  KILN_RETURN_IF_ERROR(put_shape(&s, ndim, shape, "kiln_graph_reshape"));
  return add1(g, &s, out_vid, "kiln_graph_reshape");
}

kiln_status_t kiln_graph_permute(kiln_graph_t* g, int x, const int* perm, int* out_vid) {
  if (!g) return BADARG("kiln_graph_permute: NULL graph");
  if (!gx_valid_vid(g, x)) return BADARG("kiln_graph_permute: unknown value id %d", x);
  int in[1] = {x};
  gx_spec s = spec(GX_OP_PERMUTE, 1, in);
  int nd = g->values[x].ndim;
  if (nd > 0 && !perm) return BADARG("kiln_graph_permute: NULL perm");
  s.n_i = nd;
  for (int i = 0; i < nd; i++) s.i[i] = perm[i];
  return add1(g, &s, out_vid, "kiln_graph_permute");
}

kiln_status_t kiln_graph_expand(kiln_graph_t* g, int x, int ndim, const int64_t* shape,
                                int* out_vid) {
  int in[1] = {x};
  gx_spec s = spec(GX_OP_EXPAND, 1, in);
  KILN_RETURN_IF_ERROR(put_shape(&s, ndim, shape, "kiln_graph_expand"));
  return add1(g, &s, out_vid, "kiln_graph_expand");
}

kiln_status_t kiln_graph_slice(kiln_graph_t* g, int x, int dim, int64_t start, int64_t end,
                               int64_t step, int* out_vid) {
  int in[1] = {x};
  gx_spec s = spec(GX_OP_SLICE, 1, in);
  s.i[0] = dim;
  s.i[1] = start;
  s.i[2] = end;
  s.i[3] = step;
  s.n_i = 4;
  return add1(g, &s, out_vid, "kiln_graph_slice");
}

kiln_status_t kiln_graph_select(kiln_graph_t* g, int x, int dim, int64_t index, int* out_vid) {
  if (!g || !out_vid) return BADARG("kiln_graph_select: NULL argument");
  if (!gx_valid_vid(g, x)) return BADARG("kiln_graph_select: unknown value id %d", x);
  const gx_value* v = &g->values[x];
  int nd = v->ndim;
  if (nd == 0) return BADARG("kiln_graph_select: rank-0 value");
  if (dim < -nd || dim >= nd) return BADARG("kiln_graph_select: dim %d out of range", dim);
  if (dim < 0) dim += nd;
  int64_t n = v->shape[dim];
  if (index < -n || index >= n)
    return kiln_error(KILN_ERROR_OUT_OF_RANGE, "kiln_graph_select: index %lld out of range for size %lld",
                      (long long)index, (long long)n);
  if (index < 0) index += n;
  int64_t shape[KILN_MAX_DIMS];
  int k = 0;
  for (int i = 0; i < nd; i++)
    if (i != dim) shape[k++] = v->shape[i];
  int sl;
  KILN_RETURN_IF_ERROR(kiln_graph_slice(g, x, dim, index, index + 1, 1, &sl));
  kiln_status_t st = kiln_graph_reshape(g, sl, nd - 1, shape, out_vid);
  if (st != KILN_OK) gx_pop_node(g);
  return st;
}

kiln_status_t kiln_graph_contiguous(kiln_graph_t* g, int x, int* out_vid) {
  int in[1] = {x};
  gx_spec s = spec(GX_OP_CONTIGUOUS, 1, in);
  return add1(g, &s, out_vid, "kiln_graph_contiguous");
}

kiln_status_t kiln_graph_cat(kiln_graph_t* g, int n, const int* ids, int dim, int* out_vid) {
  if (n < 1 || !ids) return BADARG("kiln_graph_cat: needs n >= 1 ids");
  gx_spec s = spec(GX_OP_CAT, n, ids);
  s.i[0] = dim;
  s.n_i = 1;
  return add1(g, &s, out_vid, "kiln_graph_cat");
}

/* ---- nn -------------------------------------------------------------------------------------- */

kiln_status_t kiln_graph_softmax(kiln_graph_t* g, int x, int dim, int log, int out_dtype,
                                 int* out_vid) {
  int in[1] = {x};
  gx_spec s = spec(GX_OP_SOFTMAX, 1, in);
  s.i[0] = dim;
  s.i[1] = log;
  s.n_i = 2;
  s.dtype = out_dtype;
  return add1(g, &s, out_vid, "kiln_graph_softmax");
}

kiln_status_t kiln_graph_softmax_backward(kiln_graph_t* g, int grad_out, int out_fwd, int dim,
                                          int log, int out_dtype, int* out_vid) {
  int in[2] = {grad_out, out_fwd};
  gx_spec s = spec(GX_OP_SOFTMAX_BW, 2, in);
  s.i[0] = dim;
  s.i[1] = log;
  s.n_i = 2;
  s.dtype = out_dtype;
  return add1(g, &s, out_vid, "kiln_graph_softmax_backward");
}

kiln_status_t kiln_graph_layer_norm(kiln_graph_t* g, int x, int weight, int bias,
                                    int normalized_ndim, double eps, int* out, int* mean,
                                    int* rstd) {
  int in[3] = {x, weight, bias};
  gx_spec s = spec(GX_OP_LAYER_NORM, 3, in);
  s.i[0] = normalized_ndim;
  s.n_i = 1;
  s.f[0] = eps;
  if (!out) return BADARG("kiln_graph_layer_norm: NULL out");
  return addn(g, &s, out, mean, rstd, "kiln_graph_layer_norm");
}

kiln_status_t kiln_graph_layer_norm_backward(kiln_graph_t* g, int grad_out, int x, int mean,
                                             int rstd, int weight, int normalized_ndim,
                                             int output_mask, int* grad_x, int* grad_w,
                                             int* grad_b) {
  int in[5] = {grad_out, x, mean, rstd, weight};
  gx_spec s = spec(GX_OP_LAYER_NORM_BW, 5, in);
  s.i[0] = normalized_ndim;
  s.i[1] = output_mask;
  s.n_i = 2;
  if ((output_mask & 7) == 0) return BADARG("kiln_graph_layer_norm_backward: empty output_mask");
  return addn(g, &s, grad_x, grad_w, grad_b, "kiln_graph_layer_norm_backward");
}

kiln_status_t kiln_graph_rms_norm(kiln_graph_t* g, int x, int weight, int normalized_ndim,
                                  double eps, int* out, int* rstd) {
  int in[2] = {x, weight};
  gx_spec s = spec(GX_OP_RMS_NORM, 2, in);
  s.i[0] = normalized_ndim;
  s.n_i = 1;
  s.f[0] = eps;
  if (!out) return BADARG("kiln_graph_rms_norm: NULL out");
  return addn(g, &s, out, rstd, NULL, "kiln_graph_rms_norm");
}

kiln_status_t kiln_graph_rms_norm_backward(kiln_graph_t* g, int grad_out, int x, int rstd,
                                           int weight, int normalized_ndim, int output_mask,
                                           int* grad_x, int* grad_w) {
  int in[4] = {grad_out, x, rstd, weight};
  gx_spec s = spec(GX_OP_RMS_NORM_BW, 4, in);
  s.i[0] = normalized_ndim;
  s.i[1] = output_mask;
  s.n_i = 2;
  if ((output_mask & 3) == 0) return BADARG("kiln_graph_rms_norm_backward: empty output_mask");
  return addn(g, &s, grad_x, grad_w, NULL, "kiln_graph_rms_norm_backward");
}

kiln_status_t kiln_graph_embedding(kiln_graph_t* g, int weight, int indices, int* out_vid) {
  int in[2] = {weight, indices};
  gx_spec s = spec(GX_OP_EMBEDDING, 2, in);
  return add1(g, &s, out_vid, "kiln_graph_embedding");
}

kiln_status_t kiln_graph_embedding_backward(kiln_graph_t* g, int grad_out, int indices,
                                            int64_t num_weights, int64_t padding_idx,
                                            int scale_grad_by_freq, int* out_vid) {
  int in[2] = {grad_out, indices};
  gx_spec s = spec(GX_OP_EMBEDDING_BW, 2, in);
  s.i[0] = num_weights;
  s.i[1] = padding_idx;
  s.i[2] = scale_grad_by_freq;
  s.n_i = 3;
  return add1(g, &s, out_vid, "kiln_graph_embedding_backward");
}

kiln_status_t kiln_graph_nll_loss(kiln_graph_t* g, int log_probs, int target, int weight,
                                  int reduction, int64_t ignore_index, int* out,
                                  int* total_weight) {
  int in[3] = {log_probs, target, weight};
  gx_spec s = spec(GX_OP_NLL_LOSS, 3, in);
  s.i[0] = reduction;
  s.i[1] = ignore_index;
  s.n_i = 2;
  if (!out) return BADARG("kiln_graph_nll_loss: NULL out");
  return addn(g, &s, out, total_weight, NULL, "kiln_graph_nll_loss");
}

kiln_status_t kiln_graph_nll_loss_backward(kiln_graph_t* g, int grad_out, int log_probs,
                                           int target, int weight, int reduction,
                                           int64_t ignore_index, int total_weight,
                                           int* out_vid) {
  int in[5] = {grad_out, log_probs, target, weight, total_weight};
  gx_spec s = spec(GX_OP_NLL_LOSS_BW, 5, in);
  s.i[0] = reduction;
  s.i[1] = ignore_index;
  s.n_i = 2;
  return add1(g, &s, out_vid, "kiln_graph_nll_loss_backward");
}

kiln_status_t kiln_graph_sdpa(kiln_graph_t* g, int q, int k, int v, int mask, int is_causal,
                              double scale, int* out, int* logsumexp) {
  int in[4] = {q, k, v, mask};
  gx_spec s = spec(GX_OP_SDPA, 4, in);
  s.i[0] = is_causal;
  s.n_i = 1;
  s.f[0] = scale;
  if (!out) return BADARG("kiln_graph_sdpa: NULL out");
  return addn(g, &s, out, logsumexp, NULL, "kiln_graph_sdpa");
}

kiln_status_t kiln_graph_sdpa_backward(kiln_graph_t* g, int grad_out, int q, int k, int v,
                                       int out, int logsumexp, int mask, int is_causal,
                                       double scale, int* grad_q, int* grad_k, int* grad_v) {
  int in[7] = {grad_out, q, k, v, out, logsumexp, mask};
  gx_spec s = spec(GX_OP_SDPA_BW, 7, in);
  s.i[0] = is_causal;
  s.i[1] = (grad_q ? 1 : 0) | (grad_k ? 2 : 0) | (grad_v ? 4 : 0);
  s.n_i = 2;
  s.f[0] = scale;
  if (!s.i[1]) return BADARG("kiln_graph_sdpa_backward: no gradient requested");
  return addn(g, &s, grad_q, grad_k, grad_v, "kiln_graph_sdpa_backward");
}

/* ---- indexing ------------------------------------------------------------------------------ */

kiln_status_t kiln_graph_arange(kiln_graph_t* g, int dtype, int64_t n, double start, double step,
                                int* out_vid) {
  gx_spec s = spec(GX_OP_ARANGE, 0, NULL);
  s.dtype = dtype;
  s.n_i = 3;
  s.i[0] = n;
  if (gx_valid_dtype(dtype) && !kiln_dtype_is_float((kiln_dtype_t)dtype)) {
    s.sub = 1;
    if (!kiln_f64_to_i64(start, &s.i[1]) || !kiln_f64_to_i64(step, &s.i[2]) ||
        (double)s.i[1] != start || (double)s.i[2] != step)
      return BADARG("kiln_graph_arange: start %g and step %g must be integers for %s", start, step,
                    kiln_dtype_name((kiln_dtype_t)dtype));
  } else {
    s.f[0] = start;
    s.f[1] = step;
  }
  return add1(g, &s, out_vid, "kiln_graph_arange");
}

kiln_status_t kiln_graph_gather(kiln_graph_t* g, int x, int dim, int index, int* out_vid) {
  int in[2] = {x, index};
  gx_spec s = spec(GX_OP_GATHER, 2, in);
  s.i[0] = dim;
  s.n_i = 1;
  return add1(g, &s, out_vid, "kiln_graph_gather");
}

kiln_status_t kiln_graph_index_select(kiln_graph_t* g, int x, int dim, int index, int* out_vid) {
  int in[2] = {x, index};
  gx_spec s = spec(GX_OP_INDEX_SELECT, 2, in);
  s.i[0] = dim;
  s.n_i = 1;
  return add1(g, &s, out_vid, "kiln_graph_index_select");
}

kiln_status_t kiln_graph_scatter(kiln_graph_t* g, int self, int dim, int index, int src,
                                 double value, int reduce, int include_self, int* out_vid) {
  int in[3] = {self, index, src};
  gx_spec s = spec(GX_OP_SCATTER, 3, in);
  s.sub = reduce;
  s.i[0] = dim;
  s.i[1] = include_self != 0;
  s.n_i = 2;
  s.f[0] = value;
  return add1(g, &s, out_vid, "kiln_graph_scatter");
}

static kiln_status_t index_common(kiln_graph_t* g, int op, int self, int n_indices,
                                  const int* indices, int values, int accumulate, int* out_vid,
                                  const char* what) {
  if (n_indices < 0 || n_indices > KILN_MAX_DIMS)
    return BADARG("%s: %d indices (at most %d)", what, n_indices, KILN_MAX_DIMS);
  if (n_indices > 0 && !indices) return BADARG("%s: NULL indices", what);
  const int put = op == GX_OP_INDEX_PUT;
  int in[2 + KILN_MAX_DIMS];
  in[0] = self;
  if (put) in[1] = values;
  for (int k = 0; k < n_indices; k++) in[1 + put + k] = indices[k];
  gx_spec s = spec(op, 1 + put + n_indices, in);
  s.i[0] = accumulate != 0;
  s.n_i = put;
  return add1(g, &s, out_vid, what);
}

kiln_status_t kiln_graph_index(kiln_graph_t* g, int self, int n_indices, const int* indices,
                               int* out_vid) {
  return index_common(g, GX_OP_INDEX, self, n_indices, indices, -1, 0, out_vid,
                      "kiln_graph_index");
}

kiln_status_t kiln_graph_index_put(kiln_graph_t* g, int self, int n_indices, const int* indices,
                                   int values, int accumulate, int* out_vid) {
  return index_common(g, GX_OP_INDEX_PUT, self, n_indices, indices, values, accumulate, out_vid,
                      "kiln_graph_index_put");
}

/* ---- CNN ops ------------------------------------------------------------------------------- */

static kiln_status_t put_pairs(gx_spec* s, int at, const int64_t* a, int64_t dflt0, int64_t dflt1,
                               const char* what, const char* name) {
  if (!a && dflt0 < 0) return BADARG("%s: NULL %s", what, name);
  s->i[at] = a ? a[0] : dflt0;
  s->i[at + 1] = a ? a[1] : dflt1;
  return KILN_OK;
}

static kiln_status_t put_conv(gx_spec* s, const int64_t* stride, const int64_t* padding,
                              const int64_t* dilation, int64_t groups, const char* what) {
  KILN_RETURN_IF_ERROR(put_pairs(s, 0, stride, -1, -1, what, "stride"));
  KILN_RETURN_IF_ERROR(put_pairs(s, 2, padding, -1, -1, what, "padding"));
  KILN_RETURN_IF_ERROR(put_pairs(s, 4, dilation, -1, -1, what, "dilation"));
  s->i[6] = groups;
  return KILN_OK;
}

kiln_status_t kiln_graph_conv2d(kiln_graph_t* g, int x, int w, int bias, const int64_t* stride,
                                const int64_t* padding, const int64_t* dilation, int64_t groups,
                                int* out_vid) {
  static const char* what = "kiln_graph_conv2d";
  int in[3] = {x, w, bias};
  gx_spec s = spec(GX_OP_CONV, 3, in);
  KILN_RETURN_IF_ERROR(put_conv(&s, stride, padding, dilation, groups, what));
  s.n_i = 7;
  return add1(g, &s, out_vid, what);
}

kiln_status_t kiln_graph_conv2d_backward(kiln_graph_t* g, int grad_out, int x, int w,
                                         const int64_t* stride, const int64_t* padding,
                                         const int64_t* dilation, int64_t groups, int* grad_x,
                                         int* grad_w, int* grad_b) {
  static const char* what = "kiln_graph_conv2d_backward";
  int in[3] = {grad_out, x, w};
  gx_spec s = spec(GX_OP_CONV_BW, 3, in);
  KILN_RETURN_IF_ERROR(put_conv(&s, stride, padding, dilation, groups, what));
  s.i[7] = (grad_x ? 1 : 0) | (grad_w ? 2 : 0) | (grad_b ? 4 : 0);
  s.n_i = 8;
  if (!s.i[7]) return BADARG("%s: no gradient requested", what);
  return addn(g, &s, grad_x, grad_w, grad_b, what);
}

kiln_status_t kiln_graph_max_pool2d(kiln_graph_t* g, int x, const int64_t* kernel,
                                    const int64_t* stride, const int64_t* padding,
                                    const int64_t* dilation, int ceil_mode, int* out,
                                    int* indices) {
  static const char* what = "kiln_graph_max_pool2d";
  int in[1] = {x};
  gx_spec s = spec(GX_OP_MAX_POOL, 1, in);
  KILN_RETURN_IF_ERROR(put_pairs(&s, 0, kernel, -1, -1, what, "kernel"));
  KILN_RETURN_IF_ERROR(put_pairs(&s, 2, stride, s.i[0], s.i[1], what, "stride"));
  KILN_RETURN_IF_ERROR(put_pairs(&s, 4, padding, -1, -1, what, "padding"));
  KILN_RETURN_IF_ERROR(put_pairs(&s, 6, dilation, 1, 1, what, "dilation"));
  s.i[8] = ceil_mode != 0;
  s.n_i = 9;
  if (!out) return BADARG("%s: NULL out", what);
  return addn(g, &s, out, indices, NULL, what);
}

kiln_status_t kiln_graph_max_pool2d_backward(kiln_graph_t* g, int grad_out, int indices,
                                             int64_t in_h, int64_t in_w, int* out_vid) {
  int in[2] = {grad_out, indices};
  gx_spec s = spec(GX_OP_MAX_POOL_BW, 2, in);
  s.i[0] = in_h;
  s.i[1] = in_w;
  s.n_i = 2;
  return add1(g, &s, out_vid, "kiln_graph_max_pool2d_backward");
}

static kiln_status_t put_avg(gx_spec* s, const int64_t* kernel, const int64_t* stride,
                             const int64_t* padding, int ceil_mode, int count_include_pad,
                             int64_t divisor_override, const char* what) {
  KILN_RETURN_IF_ERROR(put_pairs(s, 0, kernel, -1, -1, what, "kernel"));
  KILN_RETURN_IF_ERROR(put_pairs(s, 2, stride, s->i[0], s->i[1], what, "stride"));
  KILN_RETURN_IF_ERROR(put_pairs(s, 4, padding, -1, -1, what, "padding"));
  s->i[6] = ceil_mode != 0;
  s->i[7] = count_include_pad != 0;
  s->i[8] = divisor_override;
  return KILN_OK;
}

kiln_status_t kiln_graph_avg_pool2d(kiln_graph_t* g, int x, const int64_t* kernel,
                                    const int64_t* stride, const int64_t* padding, int ceil_mode,
                                    int count_include_pad, int64_t divisor_override,
                                    int* out_vid) {
  static const char* what = "kiln_graph_avg_pool2d";
  int in[1] = {x};
  gx_spec s = spec(GX_OP_AVG_POOL, 1, in);
  KILN_RETURN_IF_ERROR(put_avg(&s, kernel, stride, padding, ceil_mode, count_include_pad,
                               divisor_override, what));
  s.n_i = 9;
  return add1(g, &s, out_vid, what);
}

kiln_status_t kiln_graph_avg_pool2d_backward(kiln_graph_t* g, int grad_out, int64_t in_h,
                                             int64_t in_w, const int64_t* kernel,
                                             const int64_t* stride, const int64_t* padding,
                                             int ceil_mode, int count_include_pad,
                                             int64_t divisor_override, int* out_vid) {
  static const char* what = "kiln_graph_avg_pool2d_backward";
  int in[1] = {grad_out};
  gx_spec s = spec(GX_OP_AVG_POOL_BW, 1, in);
  KILN_RETURN_IF_ERROR(put_avg(&s, kernel, stride, padding, ceil_mode, count_include_pad,
                               divisor_override, what));
  s.i[9] = in_h;
  s.i[10] = in_w;
  s.n_i = 11;
  return add1(g, &s, out_vid, what);
}

kiln_status_t kiln_graph_adaptive_avg_pool2d(kiln_graph_t* g, int x, int64_t out_h,
                                             int64_t out_w, int* out_vid) {
  int in[1] = {x};
  gx_spec s = spec(GX_OP_ADAPTIVE_POOL, 1, in);
  s.i[0] = out_h;
  s.i[1] = out_w;
  s.n_i = 2;
  return add1(g, &s, out_vid, "kiln_graph_adaptive_avg_pool2d");
}

kiln_status_t kiln_graph_adaptive_avg_pool2d_backward(kiln_graph_t* g, int grad_out,
                                                      int64_t in_h, int64_t in_w, int* out_vid) {
  int in[1] = {grad_out};
  gx_spec s = spec(GX_OP_ADAPTIVE_POOL_BW, 1, in);
  s.i[0] = in_h;
  s.i[1] = in_w;
  s.n_i = 2;
  return add1(g, &s, out_vid, "kiln_graph_adaptive_avg_pool2d_backward");
}
