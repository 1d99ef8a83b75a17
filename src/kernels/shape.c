/* SPDX-License-Identifier: Apache-2.0 */
/* shape.c - cat, flip, roll and constant pad (see kiln/kernels/index.h).
 *
 * These are rewritten as a few strided copies between views of the operands and handed to
 * kiln_kernel_copy (which casts, walks memory order and splits work over the pool) or
 * kiln_kernel_fill. Views are descriptors on the stack: nothing is allocated. */
#include <stdio.h>

#include "kernels/index_internal.h"
#include "kiln/kernels/elementwise.h"

/* t narrowed to [start, start + len) along dim d (in place). */
static void narrow(kiln_tensor_t* t, int d, int64_t start, int64_t len) {
  t->data = (char*)t->data + start * t->strides[d] * (int64_t)kiln_dtype_size(t->dtype);
  t->shape[d] = len;
}

static kiln_status_t same_shape(const kiln_tensor_t* x, const kiln_tensor_t* out, const char* op) {
  int ok = x->ndim == out->ndim;
  for (int d = 0; ok && d < x->ndim; d++) ok = x->shape[d] == out->shape[d];
  if (ok) return kiln_idx_same_dtype(x, out, op, "x", "out");
  char b1[200], b2[200];
  return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s: out %s must have x's shape %s", op,
                    kiln_idx_shape(out, b1), kiln_idx_shape(x, b2));
}

/* ---- cat ------------------------------------------------------------------------------------- */

static int cat_skipped(const kiln_tensor_t* t) { return t->ndim == 1 && t->shape[0] == 0; }

/* torch.cat: one kiln_kernel_copy per input into a narrowed view of out. */
kiln_status_t kiln_kernel_cat(const kiln_tensor_t* const* inputs, int n, int dim,
                              kiln_tensor_t* out) {
  const char* op = "cat";
  KILN_RETURN_IF_ERROR(kiln_idx_check(out, op, "out"));
  if (n < 1 || !inputs)
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s: expected a non-empty list of tensors", op);
  const kiln_tensor_t* ref = NULL;
  for (int i = 0; i < n; i++) {
    char what[32];
    snprintf(what, sizeof what, "inputs[%d]", i);
    KILN_RETURN_IF_ERROR(kiln_idx_check(inputs[i], op, what));
    if (inputs[i]->ndim == 0)
      return kiln_error(KILN_ERROR_INVALID_ARGUMENT,
                        "%s: zero-dimensional tensor (at position %d) cannot be concatenated", op,
                        i);
    if (!ref && !cat_skipped(inputs[i])) ref = inputs[i];
  }
  if (!ref) {
    if (kiln_tensor_numel(out) != 0) {
      char b[200];
      return kiln_error(KILN_ERROR_INVALID_ARGUMENT,
                        "%s: every input is empty [0] but out %s is not empty", op,
                        kiln_idx_shape(out, b));
    }
    return KILN_OK;
  }
  KILN_RETURN_IF_ERROR(kiln_idx_wrap_dim(dim, ref->ndim, op, &dim));
  char b1[200], b2[200];
  if (out->ndim != ref->ndim)
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s: out %s must have rank %d like input %s",
                      op, kiln_idx_shape(out, b1), (int)ref->ndim, kiln_idx_shape(ref, b2));
  int64_t total = 0;
  for (int i = 0; i < n; i++) {
    const kiln_tensor_t* t = inputs[i];
    if (cat_skipped(t)) continue;
    int ok = t->ndim == out->ndim;
    for (int d = 0; ok && d < t->ndim; d++) ok = d == dim || t->shape[d] == out->shape[d];
    if (!ok)
      return kiln_error(KILN_ERROR_INVALID_ARGUMENT,
                        "%s: sizes of tensors must match except in dimension %d: tensor %d has "
                        "shape %s, out has %s", op, dim, i, kiln_idx_shape(t, b1),
                        kiln_idx_shape(out, b2));
    total += t->shape[dim];
  }
  if (total != out->shape[dim])
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT,
                      "%s: inputs add up to %lld along dim %d but out %s has %lld", op,
                      (long long)total, dim, kiln_idx_shape(out, b1), (long long)out->shape[dim]);
  int64_t pos = 0;
  for (int i = 0; i < n; i++) {
    const kiln_tensor_t* t = inputs[i];
    if (cat_skipped(t) || t->shape[dim] == 0) continue;
    kiln_tensor_t view = *out;
    narrow(&view, dim, pos, t->shape[dim]);
    KILN_RETURN_IF_ERROR(kiln_kernel_copy(t, &view));
    pos += t->shape[dim];
  }
  return KILN_OK;
}

/* ---- flip ---------------------------------------------------------------------------------- */

/* torch.flip: a copy from a negatively strided view of x. */
kiln_status_t kiln_kernel_flip(const kiln_tensor_t* x, uint32_t dim_mask, kiln_tensor_t* out) {
  const char* op = "flip";
  KILN_RETURN_IF_ERROR(kiln_idx_check(x, op, "x"));
  KILN_RETURN_IF_ERROR(kiln_idx_check(out, op, "out"));
  KILN_RETURN_IF_ERROR(same_shape(x, out, op));
  const int nd = x->ndim ? x->ndim : 1;
  if (nd < 32 && (dim_mask >> nd) != 0)
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT,
                      "%s: dim mask 0x%x has a bit at or above rank %d", op, (unsigned)dim_mask,
                      (int)x->ndim);
  if (kiln_tensor_numel(x) == 0) return KILN_OK;
  kiln_tensor_t v = *x;
  for (int d = 0; d < x->ndim; d++)
    if (dim_mask & (1u << d)) {
      narrow(&v, d, v.shape[d] - 1, v.shape[d]);
      v.strides[d] = -v.strides[d];
    }
  return kiln_kernel_copy(&v, out);
}

/* ---- roll ---------------------------------------------------------------------------------- */

typedef struct roll_ctx {
  const kiln_tensor_t* x;
  kiln_tensor_t* out;
  int64_t numel, shift;
  size_t es;
} roll_ctx_t;

static int64_t flat_offset(const kiln_tensor_t* t, int64_t f) {
  int64_t off = 0;
  for (int d = t->ndim - 1; d >= 0; d--) {
    off += (f % t->shape[d]) * t->strides[d];
    f /= t->shape[d];
  }
  return off;
}

static void roll_flat(void* arg, int64_t f0, int64_t f1, int tid) {
  (void)tid;
  const roll_ctx_t* c = arg;
  const int64_t es = (int64_t)c->es;
  for (int64_t f = f0; f < f1; f++) {
    int64_t s = f - c->shift;
    if (s < 0) s += c->numel;
    memcpy((char*)c->out->data + flat_offset(c->out, f) * es,
           (const char*)c->x->data + flat_offset(c->x, s) * es, c->es);
  }
}

static kiln_status_t roll_flattened(const kiln_tensor_t* x, int64_t shift, kiln_tensor_t* out) {
  const int64_t n = kiln_tensor_numel(x);
  if (n == 0) return KILN_OK;
  shift %= n;
  if (shift < 0) shift += n;
  if (kiln_tensor_is_contiguous(x) && kiln_tensor_is_contiguous(out)) {
    kiln_tensor_t xv, ov;
    KILN_RETURN_IF_ERROR(kiln_tensor_init_contiguous(&xv, x->data, x->dtype, 1, &n));
    KILN_RETURN_IF_ERROR(kiln_tensor_init_contiguous(&ov, out->data, out->dtype, 1, &n));
    kiln_tensor_t a = xv, b = ov;
    narrow(&a, 0, 0, n - shift);
    narrow(&b, 0, shift, n - shift);
    KILN_RETURN_IF_ERROR(kiln_kernel_copy(&a, &b));
    if (shift == 0) return KILN_OK;
    a = xv;
    b = ov;
    narrow(&a, 0, n - shift, shift);
    narrow(&b, 0, 0, shift);
    return kiln_kernel_copy(&a, &b);
  }
  roll_ctx_t c = {x, out, n, shift, kiln_dtype_size(x->dtype)};
  kiln_parallel_for(n, KI_GRAIN / 8, roll_flat, &c);
  return KILN_OK;
}

/* torch.roll: up to 2^n block copies (or a flattened roll). */
kiln_status_t kiln_kernel_roll(const kiln_tensor_t* x, const int64_t* shifts, const int* dims,
                               int n, kiln_tensor_t* out) {
  const char* op = "roll";
  KILN_RETURN_IF_ERROR(kiln_idx_check(x, op, "x"));
  KILN_RETURN_IF_ERROR(kiln_idx_check(out, op, "out"));
  KILN_RETURN_IF_ERROR(same_shape(x, out, op));
  if (n < 1 || !shifts)
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s: `shifts` required", op);
  if (!dims) {
    if (n != 1)
      return kiln_error(KILN_ERROR_INVALID_ARGUMENT,
                        "%s: without dims, shifts must have one entry, got %d", op, n);
    return roll_flattened(x, shifts[0], out);
  }
  int64_t total[KILN_MAX_DIMS] = {0};
  for (int i = 0; i < n; i++) {
    int d;
    KILN_RETURN_IF_ERROR(kiln_idx_wrap_dim(dims[i], x->ndim, op, &d));
    const int64_t size = x->ndim ? x->shape[d] : 1;
    if (size > 0) total[d] = (total[d] + shifts[i] % size + size) % size;
  }
  if (kiln_tensor_numel(x) == 0) return KILN_OK;
  int rd[KILN_MAX_DIMS], m = 0;
  for (int d = 0; d < x->ndim; d++)
    if (total[d]) rd[m++] = d;
  /* 2^m pieces: along each rolled dim, out[s:] <- x[:size-s] and out[:s] <- x[size-s:]. */
  for (int combo = 0; combo < (1 << m); combo++) {
    kiln_tensor_t a = *x, b = *out;
    for (int k = 0; k < m; k++) {
      const int d = rd[k];
      const int64_t s = total[d], size = x->shape[d];
      if (combo & (1 << k)) {
        narrow(&a, d, size - s, s);
        narrow(&b, d, 0, s);
      } else {
        narrow(&a, d, 0, size - s);
        narrow(&b, d, s, size - s);
      }
    }
    KILN_RETURN_IF_ERROR(kiln_kernel_copy(&a, &b));
  }
  return KILN_OK;
}

/* ---- constant pad ---------------------------------------------------------------------------- */

/* F.pad constant: interior copy plus border fills. */
kiln_status_t kiln_kernel_constant_pad(const kiln_tensor_t* x, const int64_t* pad, int n_pad,
                                       double value, kiln_tensor_t* out) {
  const char* op = "constant_pad";
  KILN_RETURN_IF_ERROR(kiln_idx_check(x, op, "x"));
  KILN_RETURN_IF_ERROR(kiln_idx_check(out, op, "out"));
  KILN_RETURN_IF_ERROR(kiln_idx_same_dtype(x, out, op, "x", "out"));
  if (n_pad < 0 || n_pad % 2 || n_pad / 2 > x->ndim || (n_pad && !pad))
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT,
                      "%s: padding length %d must be even and at most 2 * rank (%d)", op, n_pad,
                      2 * (int)x->ndim);
  const int nd = x->ndim;
  int64_t os[KILN_MAX_DIMS], xs[KILN_MAX_DIMS], len[KILN_MAX_DIMS], oshape[KILN_MAX_DIMS];
  for (int d = 0; d < nd; d++) {
    const int i = nd - 1 - d; /* pad pair index */
    const int64_t lo = 2 * i < n_pad ? pad[2 * i] : 0, hi = 2 * i < n_pad ? pad[2 * i + 1] : 0;
    const int64_t S = x->shape[d];
    oshape[d] = S + lo + hi;
    len[d] = S - (lo < 0 ? -lo : 0) - (hi < 0 ? -hi : 0);
    os[d] = lo > 0 ? lo : 0;
    xs[d] = lo < 0 ? -lo : 0;
    if (len[d] < 0 || oshape[d] < 0)
      return kiln_error(KILN_ERROR_INVALID_ARGUMENT,
                        "%s: dim %d of size %lld with padding (%lld, %lld) leaves a negative size",
                        op, d, (long long)S, (long long)lo, (long long)hi);
  }
  int ok = out->ndim == nd;
  for (int d = 0; ok && d < nd; d++) ok = out->shape[d] == oshape[d];
  if (!ok) {
    char b1[200], b2[200];
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s: out %s must be %s", op,
                      kiln_idx_shape(out, b1), kiln_format_shape(b2, oshape, nd));
  }
  if (kiln_tensor_numel(out) == 0) return KILN_OK;
  /* Interior: the (possibly cropped) input. */
  kiln_tensor_t a = *x, b = *out;
  int64_t interior = 1;
  for (int d = 0; d < nd; d++) {
    narrow(&a, d, xs[d], len[d]);
    narrow(&b, d, os[d], len[d]);
    interior *= len[d];
  }
  if (interior > 0) KILN_RETURN_IF_ERROR(kiln_kernel_copy(&a, &b));
  /* Border slabs: dims before d restricted to the interior, dim d outside it, later dims full. */
  for (int d = 0; d < nd; d++) {
    for (int side = 0; side < 2; side++) {
      const int64_t start = side ? os[d] + len[d] : 0;
      const int64_t cnt = side ? oshape[d] - start : os[d];
      if (cnt <= 0) continue;
      kiln_tensor_t v = *out;
      int empty = 0;
      for (int e = 0; e < d; e++) {
        narrow(&v, e, os[e], len[e]);
        empty |= len[e] == 0;
      }
      if (empty) break;
      narrow(&v, d, start, cnt);
      KILN_RETURN_IF_ERROR(kiln_kernel_fill(&v, value));
    }
  }
  return KILN_OK;
}
