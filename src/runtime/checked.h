/* SPDX-License-Identifier: Apache-2.0 */
/* checked.h - overflow-checked integer arithmetic for shape and size computations (internal).
 *
 * The rule (docs/DESIGN-NOTES.md, "Checked arithmetic"): every product or sum of dims, strides,
 * element counts or byte sizes that comes from user input (builder arguments, .kiln files, kernel
 * descriptors) goes through these helpers, never a bare `*` or `+`. Each helper returns 1 when
 * the exact result fits and 0 when it does not (the stored result is then unspecified); the
 * caller turns 0 into an INVALID_ARGUMENT status whose message names the op. Converting a double
 * to an integer is checked the same way (NaN, infinities and out-of-range values are rejected).
 *
 * Once a shape has passed kiln_numel_capped with KILN_NUMEL_MAX, products of its dims and of its
 * element size (<= 8 bytes) cannot overflow int64, so loops over an already validated tensor may
 * use plain arithmetic.
 */
#ifndef KILN_RUNTIME_CHECKED_H
#define KILN_RUNTIME_CHECKED_H

#include <stddef.h>
#include <stdint.h>

#include "kiln/tensor.h"

/* The largest element count of any tensor a graph value, a constant or a planned buffer may
 * have (2^48: byte sizes, strides and offsets of such tensors stay far from int64's range). */
#define KILN_NUMEL_MAX (INT64_C(1) << 48)

/* *out = a * b; 0 on int64 overflow. */
static inline int kiln_mul_i64(int64_t a, int64_t b, int64_t* out) {
  return !__builtin_mul_overflow(a, b, out);
}

/* *out = a + b; 0 on int64 overflow. */
static inline int kiln_add_i64(int64_t a, int64_t b, int64_t* out) {
  return !__builtin_add_overflow(a, b, out);
}

/* *out = a - b; 0 on int64 overflow. */
static inline int kiln_sub_i64(int64_t a, int64_t b, int64_t* out) {
  return !__builtin_sub_overflow(a, b, out);
}

/* *out = a * b + c; 0 on int64 overflow of either step. */
static inline int kiln_muladd_i64(int64_t a, int64_t b, int64_t c, int64_t* out) {
  int64_t p;
  return kiln_mul_i64(a, b, &p) && kiln_add_i64(p, c, out);
}

/* *out = product of shape[0..ndim) (1 for ndim 0); 0 if a dim is negative or the product of
 * the nonzero dims exceeds cap (cap >= 1). Zero dims count as 1 for the cap, so any sub-product
 * of a passing shape's dims, and any of its contiguous strides, is at most cap too. */
static inline int kiln_numel_capped(const int64_t* shape, int ndim, int64_t cap, int64_t* out) {
  int64_t n = 1;
  int zero = 0;
  for (int i = 0; i < ndim; i++) {
    if (shape[i] < 0) return 0;
    if (shape[i] == 0) zero = 1;
    else if (!kiln_mul_i64(n, shape[i], &n) || n > cap) return 0;
  }
  *out = zero ? 0 : n;
  return 1;
}

/* *out = numel(shape) * elem_size bytes, with numel capped at KILN_NUMEL_MAX; 0 otherwise. */
static inline int kiln_nbytes(const int64_t* shape, int ndim, size_t elem_size, int64_t* out) {
  int64_t n;
  return kiln_numel_capped(shape, ndim, KILN_NUMEL_MAX, &n) &&
         kiln_mul_i64(n, (int64_t)elem_size, out);
}

/* 1 if a descriptor (rank already checked to be in [0, KILN_MAX_DIMS], dims >= 0) is one the
 * kernels can index without overflow: numel within KILN_NUMEL_MAX (kiln_numel_capped) and a
 * byte span sum(|stride| * (dim - 1)) * 8 that fits int64. Every kernel's descriptor check calls
 * this, so products of a checked tensor's dims and its element offsets need no further checks. */
static inline int kiln_tensor_size_ok(const kiln_tensor_t* t) {
  int64_t n, span = 0, s;
  if (!kiln_numel_capped(t->shape, t->ndim, KILN_NUMEL_MAX, &n)) return 0;
  if (n == 0) return 1;
  for (int i = 0; i < t->ndim; i++) {
    const int64_t st = t->strides[i];
    if (t->shape[i] <= 1) continue;
    if (st == INT64_MIN || !kiln_mul_i64(st < 0 ? -st : st, t->shape[i] - 1, &s) ||
        !kiln_add_i64(span, s, &span))
      return 0;
  }
  return kiln_mul_i64(span, 8, &s);
}

/* *out = (int64_t)v truncated toward zero; 0 for NaN, +-inf and values outside int64's range
 * (the C cast would be undefined behaviour there). */
static inline int kiln_f64_to_i64(double v, int64_t* out) {
  if (!(v >= -9223372036854775808.0 && v < 9223372036854775808.0)) return 0;
  *out = (int64_t)v;
  return 1;
}

/* (int64_t)v with x86 cvttsd2si semantics (what torch gives on x86): NaN and out-of-range values
 * become INT64_MIN. For element conversions, where every double must map to some integer. */
static inline int64_t kiln_f64_to_i64_cvtt(double v) {
  int64_t r;
  return kiln_f64_to_i64(v, &r) ? r : INT64_MIN;
}

/* v clamped to int64's range (NaN gives `nan_value`): for bounds, where "beyond every int64"
 * saturates. */
static inline int64_t kiln_f64_to_i64_sat(double v, int64_t nan_value) {
  if (v != v) return nan_value;
  if (v >= 9223372036854775808.0) return INT64_MAX;
  if (v < -9223372036854775808.0) return INT64_MIN;
  return (int64_t)v;
}

#endif /* KILN_RUNTIME_CHECKED_H */
