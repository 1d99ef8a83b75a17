/* SPDX-License-Identifier: Apache-2.0 */
/* iter.c - broadcasting, dim ordering/coalescing and the parallel row walk (see iter.h). */
#include "kernels/iter.h"

#include <stdio.h>

#include "kiln/parallel.h"
#include "runtime/checked.h"

kiln_status_t kiln_check_tensor(const kiln_tensor_t* t, const char* what) {
  if (!t) return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s: NULL tensor descriptor", what);
  if (t->ndim < 0 || t->ndim > KILN_MAX_DIMS)
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s: rank %d outside [0, %d]", what,
                      (int)t->ndim, KILN_MAX_DIMS);
  if ((int)t->dtype < 0 || t->dtype >= KILN_DTYPE_COUNT)
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s: invalid dtype %d", what, (int)t->dtype);
  for (int i = 0; i < t->ndim; i++) {
    if (t->shape[i] < 0)
      return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s: negative size %lld in dim %d", what,
                        (long long)t->shape[i], i);
  }
  if (!kiln_tensor_size_ok(t)) {
    char b[200];
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT,
                      "%s: tensor %s is too large (limit 2^48 elements) or strided beyond int64",
                      what, kiln_format_shape(b, t->shape, t->ndim));
  }
  const int64_t n = kiln_tensor_numel(t);
  if (n > 0 && !t->data)
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s: NULL data with %lld elements", what,
                      (long long)n);
  return KILN_OK;
}

const char* kiln_format_shape(char* buf, const int64_t* shape, int ndim) {
  int pos = 0;
  buf[pos++] = '[';
  for (int i = 0; i < ndim; i++)
    pos += snprintf(buf + pos, 24, "%s%lld", i ? ", " : "", (long long)shape[i]);
  buf[pos++] = ']';
  buf[pos] = 0;
  return buf;
}

/* Like TensorIterator: > 0 if dim a (now inner) should go outside dim b. */
static int should_swap(const kiln_iter_t* it, int a, int b) {
  for (int k = 0; k < it->nops; k++) {
    int64_t sa = it->strides[a][k], sb = it->strides[b][k];
    if (sa < 0) sa = -sa;
    if (sb < 0) sb = -sb;
    if (sa == 0 || sb == 0) continue;
    if (sa < sb) return -1;
    if (sa > sb) return 1;
    if (it->shape[a] > it->shape[b]) return 1;
  }
  return 0;
}

static void swap_dims(kiln_iter_t* it, int a, int b) {
  int64_t s = it->shape[a];
  it->shape[a] = it->shape[b];
  it->shape[b] = s;
  for (int k = 0; k < it->nops; k++) {
    int64_t t = it->strides[a][k];
    it->strides[a][k] = it->strides[b][k];
    it->strides[b][k] = t;
  }
}

kiln_status_t kiln_iter_init(kiln_iter_t* it, const kiln_tensor_t* out,
                             const kiln_tensor_t* const* ins, int nin, const char* op) {
  KILN_RETURN_IF_ERROR(kiln_check_tensor(out, op));
  it->nops = nin + 1;
  it->data[0] = (char*)out->data;
  it->dtype[0] = out->dtype;
  for (int k = 0; k < nin; k++) {
    const kiln_tensor_t* in = ins[k];
    KILN_RETURN_IF_ERROR(kiln_check_tensor(in, op));
    int ok = 1;
    for (int i = 0; i < in->ndim; i++) {
      int od = out->ndim - in->ndim + i;
      int64_t want = od >= 0 ? out->shape[od] : 1;
      if (in->shape[i] != want && in->shape[i] != 1) ok = 0;
    }
    if (!ok) {
      char b1[200], b2[200];
      return kiln_error(KILN_ERROR_INVALID_ARGUMENT,
                        "%s: input %d of shape %s does not broadcast to output shape %s", op, k,
                        kiln_format_shape(b1, in->shape, in->ndim),
                        kiln_format_shape(b2, out->shape, out->ndim));
    }
    it->data[k + 1] = (char*)in->data;
    it->dtype[k + 1] = in->dtype;
  }
  it->numel = kiln_tensor_numel(out);
  it->ndim = 0;
  if (it->numel == 0) return KILN_OK;
  /* Innermost first, size-1 dims dropped. */
  for (int d = out->ndim - 1; d >= 0; d--) {
    if (out->shape[d] == 1) continue;
    int j = it->ndim++;
    it->shape[j] = out->shape[d];
    it->strides[j][0] = out->strides[d] * (int64_t)kiln_dtype_size(out->dtype);
    for (int k = 0; k < nin; k++) {
      const kiln_tensor_t* in = ins[k];
      int id = d - (out->ndim - in->ndim);
      int64_t s = (id < 0 || in->shape[id] == 1) ? 0 : in->strides[id];
      it->strides[j][k + 1] = s * (int64_t)kiln_dtype_size(in->dtype);
    }
  }
  if (it->ndim == 0) { /* one element */
    it->ndim = 1;
    it->shape[0] = 1;
    for (int k = 0; k < it->nops; k++) it->strides[0][k] = 0;
    return KILN_OK;
  }
  /* Insertion sort into memory order (stable: ties keep the logical order). */
  for (int i = 1; i < it->ndim; i++)
    for (int j = i; j > 0; j--) {
      int c = should_swap(it, j - 1, j);
      if (c > 0) swap_dims(it, j - 1, j);
      else if (c < 0) break;
    }
  /* Merge dim i+1 into i when every operand is contiguous across them. */
  int n = 0;
  for (int i = 1; i < it->ndim; i++) {
    int merge = 1;
    for (int k = 0; k < it->nops; k++)
      if (it->strides[i][k] != it->strides[n][k] * it->shape[n]) merge = 0;
    if (merge) {
      it->shape[n] *= it->shape[i];
    } else {
      n++;
      it->shape[n] = it->shape[i];
      for (int k = 0; k < it->nops; k++) it->strides[n][k] = it->strides[i][k];
    }
  }
  it->ndim = n + 1;
  /* A tiny innermost dim (an interleave such as [N, 2]) would make every row a loop call of a
   * few elements: walk the next, longer dim innermost instead (strided rows, far fewer calls). */
  if (it->ndim >= 2 && it->shape[0] < KILN_ITER_SHORT_ROW && it->shape[1] >= 4 * it->shape[0])
    swap_dims(it, 0, 1);
  return KILN_OK;
}

void kiln_iter_run_range(const kiln_iter_t* it, int64_t begin, int64_t end, kiln_iter_loop_t loop,
                         void* ctx) {
  if (begin >= end) return;
  int64_t idx[KILN_MAX_DIMS];
  char* ptrs[KILN_ITER_MAX_OPS];
  const int nops = it->nops, ndim = it->ndim;
  for (int k = 0; k < nops; k++) ptrs[k] = it->data[k];
  int64_t rem = begin;
  for (int d = 0; d < ndim; d++) {
    idx[d] = rem % it->shape[d];
    rem /= it->shape[d];
    for (int k = 0; k < nops; k++) ptrs[k] += idx[d] * it->strides[d][k];
  }
  const int64_t* s0 = it->strides[0];
  while (begin < end) {
    int64_t n = it->shape[0] - idx[0];
    if (n > end - begin) n = end - begin;
    loop(ctx, ptrs, s0, n);
    begin += n;
    if (begin >= end) break;
    idx[0] += n;
    for (int k = 0; k < nops; k++) ptrs[k] += n * s0[k];
    for (int d = 0; d + 1 < ndim && idx[d] == it->shape[d]; d++) {
      idx[d] = 0;
      idx[d + 1]++;
      for (int k = 0; k < nops; k++)
        ptrs[k] += it->strides[d + 1][k] - it->shape[d] * it->strides[d][k];
    }
  }
}

typedef struct {
  const kiln_iter_t* it;
  kiln_iter_loop_t loop;
  void* ctx;
} iter_job_t;

static void iter_job(void* ctx, int64_t begin, int64_t end, int thread_id) {
  (void)thread_id;
  const iter_job_t* job = ctx;
  kiln_iter_run_range(job->it, begin, end, job->loop, job->ctx);
}

void kiln_iter_run(const kiln_iter_t* it, int64_t grain, kiln_iter_loop_t loop, void* ctx) {
  if (it->numel <= 0) return;
  if (it->numel <= grain) {
    kiln_iter_run_range(it, 0, it->numel, loop, ctx);
    return;
  }
  iter_job_t job = {it, loop, ctx};
  kiln_parallel_for(it->numel, grain, iter_job, &job);
}
