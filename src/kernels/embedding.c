/* SPDX-License-Identifier: Apache-2.0 */
/* embedding.c - embedding lookup and its dense backward.
 *
 * Forward copies rows (bytes, so every dtype works) after checking every index. Backward groups
 * the positions by vocabulary row with a stable counting sort (CSR: row v owns positions
 * order[start[v] .. start[v+1]) in index order), then threads take whole vocabulary rows and sum
 * their positions in that order: the result is the same for any thread count. */
#include <string.h>

#include "kernels/nn_internal.h"
#include "kiln/allocator.h"
#include "kiln/kernels/nn.h"
#include "kiln/parallel.h"

#define EMB_CSR_STACK 2048 /* int64 slots of CSR kept on the stack */

static kiln_status_t check_indices(const kiln_nn_view_t* iv, int64_t V, const char* op) {
  for (int64_t t = 0; t < iv->rows; t++) {
    const int64_t ix = kiln_nn_index(iv->base, iv->dtype, kiln_nn_view_row(iv, t));
    if (ix < 0 || ix >= V)
      return kiln_error(KILN_ERROR_OUT_OF_RANGE, "%s: index %lld out of range [0, %lld)", op,
                        (long long)ix, (long long)V);
  }
  return KILN_OK;
}

static kiln_status_t check_indices_desc(const kiln_tensor_t* indices, const char* op) {
  KILN_RETURN_IF_ERROR(kiln_nn_check(indices, op, "indices"));
  if (indices->dtype != KILN_DTYPE_I64 && indices->dtype != KILN_DTYPE_I32)
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s: indices must be i64 or i32, got %s", op,
                      kiln_dtype_name(indices->dtype));
  if (indices->ndim >= KILN_MAX_DIMS)
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s: indices rank %d leaves no room for D", op,
                      (int)indices->ndim);
  return KILN_OK;
}

/* rows_like must be indices.shape + [D]. */
static kiln_status_t check_rows_shape(const kiln_tensor_t* t, const kiln_tensor_t* indices,
                                      int64_t D, const char* op, const char* name) {
  int ok = t->ndim == indices->ndim + 1 && t->shape[indices->ndim] == D;
  for (int d = 0; ok && d < indices->ndim; d++) ok = t->shape[d] == indices->shape[d];
  if (ok) return KILN_OK;
  char st[128], si[128];
  return kiln_error(KILN_ERROR_INVALID_ARGUMENT,
                    "%s: %s %s must be indices.shape + [D] (indices %s, D = %lld)", op, name,
                    kiln_nn_shape_str(t, st, sizeof st), kiln_nn_shape_str(indices, si, sizeof si),
                    (long long)D);
}

/* ---- forward ----------------------------------------------------------------------------- */

typedef struct emb_ctx {
  kiln_nn_view_t idx, out, g; /* idx: T rows of 1; out/g: T rows of D */
  const char* w;
  int64_t ws0, ws1, D, esize;
  /* backward */
  int64_t V, padding;
  int scale_freq;
  const int64_t* start; /* V + 1 */
  const int64_t* order; /* T */
  kiln_nn_view_t gw;    /* V rows of D */
  int f64;
  kiln_nn_scratch_t scratch;
} emb_ctx_t;

static void emb_fwd_rows(void* arg, int64_t t0, int64_t t1, int tid) {
  (void)tid;
  const emb_ctx_t* c = arg;
  const int64_t es = c->esize, D = c->D;
  for (int64_t t = t0; t < t1; t++) {
    const int64_t ix = kiln_nn_index(c->idx.base, c->idx.dtype, kiln_nn_view_row(&c->idx, t));
    const char* src = c->w + ix * c->ws0 * es;
    char* dst = c->out.base + kiln_nn_view_row(&c->out, t) * es;
    if (c->ws1 == 1 && c->out.unit) {
      memcpy(dst, src, (size_t)(D * es));
    } else {
      for (int64_t j = 0; j < D; j++)
        memcpy(dst + j * c->out.step * es, src + j * c->ws1 * es, (size_t)es);
    }
  }
}

kiln_status_t kiln_kernel_embedding(const kiln_tensor_t* weight, const kiln_tensor_t* indices,
                                    kiln_tensor_t* out) {
  const char* op = "kiln_kernel_embedding";
  KILN_RETURN_IF_ERROR(kiln_nn_check(weight, op, "weight"));
  KILN_RETURN_IF_ERROR(check_indices_desc(indices, op));
  KILN_RETURN_IF_ERROR(kiln_nn_check(out, op, "out"));
  if (weight->ndim != 2) {
    char s[128];
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s: weight %s must be 2-D [V, D]", op,
                      kiln_nn_shape_str(weight, s, sizeof s));
  }
  if (out->dtype != weight->dtype)
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s: out is %s but weight is %s", op,
                      kiln_dtype_name(out->dtype), kiln_dtype_name(weight->dtype));
  const int64_t V = weight->shape[0], D = weight->shape[1];
  KILN_RETURN_IF_ERROR(check_rows_shape(out, indices, D, op, "out"));
  emb_ctx_t c;
  memset(&c, 0, sizeof c);
  kiln_nn_view_init(&c.idx, indices, 0);
  KILN_RETURN_IF_ERROR(check_indices(&c.idx, V, op));
  if (kiln_tensor_numel(out) == 0) return KILN_OK;
  kiln_nn_view_init(&c.out, out, 1u << indices->ndim);
  c.w = weight->data;
  c.ws0 = weight->strides[0];
  c.ws1 = weight->strides[1];
  c.D = D;
  c.esize = (int64_t)kiln_dtype_size(weight->dtype);
  kiln_parallel_for(c.idx.rows, kiln_nn_grain(D), emb_fwd_rows, &c);
  return KILN_OK;
}

/* ---- backward ---------------------------------------------------------------------------- */

static void emb_bwd_rows(void* arg, int64_t v0, int64_t v1, int tid) {
  const emb_ctx_t* c = arg;
  const kiln_nn_ops_t* ops = kiln_nn_ops();
  _Alignas(64) char stack[KILN_NN_STACK_BYTES];
  char* mem = kiln_nn_scratch_get(&c->scratch, tid, stack);
  const int64_t D = c->D;
  const size_t esz = c->f64 ? sizeof(double) : sizeof(float);
  char* gbuf = mem + kiln_nn_align(esz * (size_t)D);
  for (int64_t v = v0; v < v1; v++) {
    const int64_t b = c->start[v], e = v == c->padding ? b : c->start[v + 1];
    if (c->f64) {
      double* acc = (double*)mem;
      double* g = (double*)gbuf;
      for (int64_t j = 0; j < D; j++) acc[j] = 0;
      for (int64_t p = b; p < e; p++) {
        kiln_nn_row_in_f64(&c->g, c->order[p], g);
        for (int64_t j = 0; j < D; j++) acc[j] += g[j];
      }
      if (c->scale_freq && e > b)
        for (int64_t j = 0; j < D; j++) acc[j] /= (double)(c->start[v + 1] - c->start[v]);
      kiln_nn_row_out_f64(&c->gw, v, acc);
    } else {
      float* acc = kiln_nn_row_out(&c->gw, v, 0, (float*)mem);
      memset(acc, 0, sizeof(float) * (size_t)D);
      for (int64_t p = b; p < e; p++)
        ops->add(kiln_nn_row_in(&c->g, c->order[p], 0, D, (float*)gbuf), acc, D);
      if (c->scale_freq && e > b)
        ops->affine(acc, 1.0f / (float)(c->start[v + 1] - c->start[v]), 0.0f, acc, D);
      kiln_nn_row_commit(&c->gw, v, 0, D, acc);
    }
  }
}

kiln_status_t kiln_kernel_embedding_backward_ex(const kiln_tensor_t* grad_out,
                                                const kiln_tensor_t* indices,
                                                int64_t num_weights, int64_t padding_idx,
                                                int scale_grad_by_freq,
                                                kiln_tensor_t* grad_weight) {
  const char* op = "kiln_kernel_embedding_backward";
  KILN_RETURN_IF_ERROR(kiln_nn_check_float(grad_out, op, "grad_out"));
  KILN_RETURN_IF_ERROR(check_indices_desc(indices, op));
  KILN_RETURN_IF_ERROR(kiln_nn_check_float(grad_weight, op, "grad_weight"));
  if (grad_weight->ndim != 2 || grad_weight->shape[0] != num_weights) {
    char s[128];
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT,
                      "%s: grad_weight %s must be [num_weights = %lld, D]", op,
                      kiln_nn_shape_str(grad_weight, s, sizeof s), (long long)num_weights);
  }
  const int64_t V = num_weights, D = grad_weight->shape[1];
  KILN_RETURN_IF_ERROR(check_rows_shape(grad_out, indices, D, op, "grad_out"));
  emb_ctx_t c;
  memset(&c, 0, sizeof c);
  kiln_nn_view_init(&c.idx, indices, 0);
  KILN_RETURN_IF_ERROR(check_indices(&c.idx, V, op));
  if (V == 0 || D == 0) return KILN_OK;
  const int64_t T = c.idx.rows;
  kiln_nn_view_init(&c.g, grad_out, 1u << indices->ndim);
  kiln_nn_view_init(&c.gw, grad_weight, 2u);
  c.D = D;
  c.V = V;
  c.padding = padding_idx < 0 ? -1 : padding_idx;
  c.scale_freq = scale_grad_by_freq != 0;
  c.f64 = grad_weight->dtype == KILN_DTYPE_F64 || grad_out->dtype == KILN_DTYPE_F64;

  /* CSR by vocabulary row (stable: positions stay in index order). */
  int64_t stack[EMB_CSR_STACK];
  int64_t* heap = NULL;
  int64_t* csr = stack;
  const int64_t slots = V + 1 + T;
  if (slots > EMB_CSR_STACK) {
    heap = kiln_allocator_alloc(NULL, sizeof(int64_t) * (size_t)slots, 64);
    if (heap == NULL)
      return kiln_error(KILN_ERROR_OUT_OF_MEMORY, "%s: cannot allocate %lld index slots", op,
                        (long long)slots);
    csr = heap;
  }
  int64_t* start = csr;
  int64_t* order = csr + V + 1;
  memset(start, 0, sizeof(int64_t) * (size_t)(V + 1));
  for (int64_t t = 0; t < T; t++)
    start[kiln_nn_index(c.idx.base, c.idx.dtype, kiln_nn_view_row(&c.idx, t)) + 1]++;
  for (int64_t v = 0; v < V; v++) start[v + 1] += start[v];
  /* Fill using start[v] as a cursor, then shift back. */
  for (int64_t t = 0; t < T; t++)
    order[start[kiln_nn_index(c.idx.base, c.idx.dtype, kiln_nn_view_row(&c.idx, t))]++] = t;
  for (int64_t v = V; v > 0; v--) start[v] = start[v - 1];
  start[0] = 0;
  c.start = start;
  c.order = order;

  const size_t esz = c.f64 ? sizeof(double) : sizeof(float);
  kiln_status_t s = kiln_nn_scratch_init(&c.scratch, 2 * kiln_nn_align(esz * (size_t)D), op);
  if (s == KILN_OK) {
    kiln_parallel_for(V, kiln_nn_grain(D * (1 + T / V)), emb_bwd_rows, &c);
    kiln_nn_scratch_free(&c.scratch);
  }
  kiln_allocator_free(NULL, heap);
  return s;
}

kiln_status_t kiln_kernel_embedding_backward(const kiln_tensor_t* grad_out,
                                             const kiln_tensor_t* indices, int64_t num_weights,
                                             int64_t padding_idx, kiln_tensor_t* grad_weight) {
  return kiln_kernel_embedding_backward_ex(grad_out, indices, num_weights, padding_idx, 0,
                                           grad_weight);
}
