/* SPDX-License-Identifier: Apache-2.0 */
/* softmax.c - softmax / log_softmax and their backwards along any dim of a strided tensor.
 *
 * A tensor is viewed as rows along `dim` (kernels/nn_internal.h); each thread takes whole rows.
 * A row that is f32 and unit-stride is used in place, any other is converted into per-thread
 * scratch, computed in f32 (f64 for f64 inputs) and converted back. */
#include <math.h>

#include "kernels/nn_internal.h"
#include "kiln/kernels/nn.h"
#include "kiln/parallel.h"

typedef struct softmax_ctx {
  kiln_nn_view_t a, b, o; /* forward: a = x; backward: a = grad_out, b = out_fwd; o = result */
  int log, f64;
  kiln_nn_scratch_t scratch;
} softmax_ctx_t;

static void softmax_fwd_rows(void* arg, int64_t r0, int64_t r1, int tid) {
  const softmax_ctx_t* c = arg;
  _Alignas(64) char stack[KILN_NN_STACK_BYTES];
  void* buf = kiln_nn_scratch_get(&c->scratch, tid, stack);
  const int64_t n = c->a.n;
  if (c->f64) {
    double* x = buf;
    for (int64_t r = r0; r < r1; r++) {
      kiln_nn_row_in_f64(&c->a, r, x);
      double m = -INFINITY;
      for (int64_t i = 0; i < n; i++) m = x[i] > m ? x[i] : m;
      double s = 0;
      for (int64_t i = 0; i < n; i++) s += exp(x[i] - m);
      if (c->log) {
        const double ls = log(s);
        for (int64_t i = 0; i < n; i++) x[i] = x[i] - m - ls;
      } else {
        for (int64_t i = 0; i < n; i++) x[i] = exp(x[i] - m) / s;
      }
      kiln_nn_row_out_f64(&c->o, r, x);
    }
    return;
  }
  const kiln_nn_ops_t* ops = kiln_nn_ops();
  for (int64_t r = r0; r < r1; r++) {
    const float* x = kiln_nn_row_in(&c->a, r, 0, n, buf);
    float* y = kiln_nn_row_out(&c->o, r, 0, buf);
    const float m = ops->max(x, n);
    if (c->log) {
      /* (x - m) - log(s), in that order as torch does: folding m + log(s) first loses log(s)
       * against a large |m| (a row of 1e5s gave -1.789 for -log 6, a row of -1e38s gave 0). */
      const float s = ops->exp_sum(x, m, NULL, n);
      ops->affine(x, 1.0f, -m, y, n);
      ops->affine(y, 1.0f, -logf(s), y, n);
    } else {
      const float s = ops->exp_sum(x, m, y, n);
      ops->affine(y, 1.0f / s, 0.0f, y, n);
    }
    kiln_nn_row_commit(&c->o, r, 0, n, y);
  }
}

static void softmax_bwd_rows(void* arg, int64_t r0, int64_t r1, int tid) {
  const softmax_ctx_t* c = arg;
  _Alignas(64) char stack[KILN_NN_STACK_BYTES];
  char* buf = kiln_nn_scratch_get(&c->scratch, tid, stack);
  const int64_t n = c->a.n;
  if (c->f64) {
    double* g = (double*)buf;
    double* y = (double*)(buf + kiln_nn_align(sizeof(double) * (size_t)n));
    for (int64_t r = r0; r < r1; r++) {
      kiln_nn_row_in_f64(&c->a, r, g);
      kiln_nn_row_in_f64(&c->b, r, y);
      double s = 0;
      if (c->log) {
        for (int64_t i = 0; i < n; i++) s += g[i];
        for (int64_t i = 0; i < n; i++) g[i] = g[i] - exp(y[i]) * s;
      } else {
        for (int64_t i = 0; i < n; i++) s += g[i] * y[i];
        for (int64_t i = 0; i < n; i++) g[i] = y[i] * (g[i] - s);
      }
      kiln_nn_row_out_f64(&c->o, r, g);
    }
    return;
  }
  const kiln_nn_ops_t* ops = kiln_nn_ops();
  float* gb = (float*)buf;
  float* yb = (float*)(buf + kiln_nn_align(sizeof(float) * (size_t)n));
  for (int64_t r = r0; r < r1; r++) {
    const float* g = kiln_nn_row_in(&c->a, r, 0, n, gb);
    const float* y = kiln_nn_row_in(&c->b, r, 0, n, yb);
    /* The result goes to grad_in directly, or over the grad_out copy (gb). */
    float* gi = kiln_nn_row_out(&c->o, r, 0, gb);
    if (c->log)
      ops->log_softmax_bwd(g, y, ops->sum(g, n), gi, n);
    else
      ops->softmax_bwd(g, y, ops->dot(g, y, n), gi, n);
    kiln_nn_row_commit(&c->o, r, 0, n, gi);
  }
}

static kiln_status_t run_rows(softmax_ctx_t* c, int nbufs, kiln_range_fn_t fn, const char* op) {
  const size_t esz = c->f64 ? sizeof(double) : sizeof(float);
  KILN_RETURN_IF_ERROR(
      kiln_nn_scratch_init(&c->scratch, (size_t)nbufs * kiln_nn_align(esz * (size_t)c->a.n), op));
  kiln_parallel_for(c->a.rows, kiln_nn_grain(c->a.n * 4), fn, c);
  kiln_nn_scratch_free(&c->scratch);
  return KILN_OK;
}

kiln_status_t kiln_kernel_softmax(const kiln_tensor_t* x, int dim, int log, kiln_tensor_t* out) {
  const char* op = log ? "kiln_kernel_softmax(log)" : "kiln_kernel_softmax";
  KILN_RETURN_IF_ERROR(kiln_nn_check_float(x, op, "x"));
  KILN_RETURN_IF_ERROR(kiln_nn_check_float(out, op, "out"));
  if (!kiln_nn_same_shape(x, out)) return kiln_nn_shape_error(op, "x", x, "out", out, "must match");
  const int d = kiln_nn_dim(dim, x->ndim);
  if (d < 0)
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s: dim %d out of range for rank %d", op, dim,
                      (int)x->ndim);
  if (kiln_tensor_numel(x) == 0) return KILN_OK;
  softmax_ctx_t c;
  const uint32_t mask = x->ndim ? 1u << d : 0u;
  kiln_nn_view_init(&c.a, x, mask);
  kiln_nn_view_init(&c.o, out, mask);
  c.log = log != 0;
  c.f64 = x->dtype == KILN_DTYPE_F64;
  return run_rows(&c, 1, softmax_fwd_rows, op);
}

kiln_status_t kiln_kernel_softmax_backward(const kiln_tensor_t* grad_out,
                                           const kiln_tensor_t* out_fwd, int dim, int log,
                                           kiln_tensor_t* grad_in) {
  const char* op = log ? "kiln_kernel_softmax_backward(log)" : "kiln_kernel_softmax_backward";
  KILN_RETURN_IF_ERROR(kiln_nn_check_float(grad_out, op, "grad_out"));
  KILN_RETURN_IF_ERROR(kiln_nn_check_float(out_fwd, op, "out_fwd"));
  KILN_RETURN_IF_ERROR(kiln_nn_check_float(grad_in, op, "grad_in"));
  if (!kiln_nn_same_shape(grad_out, out_fwd))
    return kiln_nn_shape_error(op, "grad_out", grad_out, "out_fwd", out_fwd, "must match");
  if (!kiln_nn_same_shape(grad_out, grad_in))
    return kiln_nn_shape_error(op, "grad_out", grad_out, "grad_in", grad_in, "must match");
  const int d = kiln_nn_dim(dim, grad_out->ndim);
  if (d < 0)
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s: dim %d out of range for rank %d", op, dim,
                      (int)grad_out->ndim);
  if (kiln_tensor_numel(grad_out) == 0) return KILN_OK;
  softmax_ctx_t c;
  const uint32_t mask = grad_out->ndim ? 1u << d : 0u;
  kiln_nn_view_init(&c.a, grad_out, mask);
  kiln_nn_view_init(&c.b, out_fwd, mask);
  kiln_nn_view_init(&c.o, grad_in, mask);
  c.log = log != 0;
  c.f64 = grad_out->dtype == KILN_DTYPE_F64 || out_fwd->dtype == KILN_DTYPE_F64;
  return run_rows(&c, 2, softmax_bwd_rows, op);
}
