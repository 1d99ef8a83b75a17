/* SPDX-License-Identifier: Apache-2.0 */
/* ew_test_util.h - helpers for the elementwise / copy / reduction C tests: host tensors with
 * arbitrary strides, independent scalar element access (not libkiln's conversion code), random
 * data, and a NaN/inf-aware closeness check against double references. */
#ifndef KILN_EW_TEST_UTIL_H
#define KILN_EW_TEST_UTIL_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/half.h"
#include "kiln_test.h"

/* A host tensor owning its storage (`buf`, `cap` elements). */
typedef struct {
  kiln_tensor_t t;
  void* buf;
  int64_t cap;
} ht_t;

static uint64_t ht_rng = 0x9e3779b97f4a7c15ull;
static inline double ht_uniform(void) { /* [0, 1) */
  ht_rng ^= ht_rng << 13;
  ht_rng ^= ht_rng >> 7;
  ht_rng ^= ht_rng << 17;
  return (double)(ht_rng >> 11) / 9007199254740992.0;
}

static inline int ht_is_float(kiln_dtype_t d) {
  return d == KILN_DTYPE_F32 || d == KILN_DTYPE_F64 || d == KILN_DTYPE_F16 ||
         d == KILN_DTYPE_BF16;
}

/* Wraps an integer to dtype d (two's complement), bool -> 0/1. */
static inline int64_t ht_wrap(kiln_dtype_t d, int64_t v) {
  switch (d) {
    case KILN_DTYPE_I8: return (int8_t)(uint8_t)(uint64_t)v;
    case KILN_DTYPE_I16: return (int16_t)(uint16_t)(uint64_t)v;
    case KILN_DTYPE_I32: return (int32_t)(uint32_t)(uint64_t)v;
    case KILN_DTYPE_U8: return (uint8_t)(uint64_t)v;
    case KILN_DTYPE_BOOL: return v != 0;
    default: return v;
  }
}

/* Rounds a double to what dtype d can hold (floats) or wraps it (integers, from a truncated
 * in-range value). */
static inline double ht_round(kiln_dtype_t d, double v) {
  switch (d) {
    case KILN_DTYPE_F32: return (float)v;
    case KILN_DTYPE_F16: return kiln_f16_to_f32(kiln_f32_to_f16((float)v));
    case KILN_DTYPE_BF16: return kiln_bf16_to_f32(kiln_f32_to_bf16((float)v));
    case KILN_DTYPE_F64: return v;
    case KILN_DTYPE_BOOL: return v != 0;
    default: return (double)ht_wrap(d, (int64_t)v);
  }
}

static inline void* ht_ptr(const kiln_tensor_t* t, const int64_t* idx) {
  int64_t off = 0;
  for (int i = 0; i < t->ndim; i++) off += idx[i] * t->strides[i];
  return (char*)t->data + off * (int64_t)kiln_dtype_size(t->dtype);
}

static inline double ht_get_p(const void* p, kiln_dtype_t d) {
  switch (d) {
    case KILN_DTYPE_F32: return *(const float*)p;
    case KILN_DTYPE_F16: return kiln_f16_to_f32(*(const uint16_t*)p);
    case KILN_DTYPE_BF16: return kiln_bf16_to_f32(*(const uint16_t*)p);
    case KILN_DTYPE_F64: return *(const double*)p;
    case KILN_DTYPE_I8: return *(const int8_t*)p;
    case KILN_DTYPE_I16: return *(const int16_t*)p;
    case KILN_DTYPE_I32: return *(const int32_t*)p;
    case KILN_DTYPE_I64: return (double)*(const int64_t*)p;
    case KILN_DTYPE_U8: return *(const uint8_t*)p;
    default: return *(const uint8_t*)p != 0;
  }
}

static inline int64_t ht_geti_p(const void* p, kiln_dtype_t d) {
  if (d == KILN_DTYPE_I64) return *(const int64_t*)p;
  return (int64_t)ht_get_p(p, d);
}

/* Stores an exactly representable value (already rounded with ht_round). */
static inline void ht_set_p(void* p, kiln_dtype_t d, double v) {
  switch (d) {
    case KILN_DTYPE_F32: *(float*)p = (float)v; break;
    case KILN_DTYPE_F16: *(uint16_t*)p = kiln_f32_to_f16((float)v); break;
    case KILN_DTYPE_BF16: *(uint16_t*)p = kiln_f32_to_bf16((float)v); break;
    case KILN_DTYPE_F64: *(double*)p = v; break;
    case KILN_DTYPE_I8: *(int8_t*)p = (int8_t)v; break;
    case KILN_DTYPE_I16: *(int16_t*)p = (int16_t)v; break;
    case KILN_DTYPE_I32: *(int32_t*)p = (int32_t)v; break;
    case KILN_DTYPE_I64: *(int64_t*)p = (int64_t)v; break;
    case KILN_DTYPE_U8: *(uint8_t*)p = (uint8_t)v; break;
    default: *(uint8_t*)p = v != 0; break;
  }
}

static inline double ht_get(const kiln_tensor_t* t, const int64_t* idx) {
  return ht_get_p(ht_ptr(t, idx), t->dtype);
}
static inline void ht_set(const kiln_tensor_t* t, const int64_t* idx, double v) {
  ht_set_p(ht_ptr(t, idx), t->dtype, v);
}

/* Allocates storage for a tensor of `shape` with `strides` (elements; NULL = contiguous). */
static inline void ht_make(ht_t* h, kiln_dtype_t d, int ndim, const int64_t* shape,
                    const int64_t* strides) {
  memset(h, 0, sizeof *h);
  kiln_tensor_init_contiguous(&h->t, NULL, d, ndim, shape);
  int64_t span = 1;
  for (int i = 0; i < ndim; i++) {
    if (strides) h->t.strides[i] = strides[i];
    if (shape[i] == 0) span = 0;
  }
  if (span) {
    for (int i = 0; i < ndim; i++) span += (shape[i] - 1) * llabs(h->t.strides[i]);
  }
  h->cap = span ? span : 1;
  h->buf = calloc((size_t)h->cap, kiln_dtype_size(d) ? kiln_dtype_size(d) : 1);
  h->t.data = h->buf;
}

/* The contiguous tensor of `shape` viewed with its last two dims swapped (a transpose). */
static inline void ht_make_t(ht_t* h, kiln_dtype_t d, int ndim, const int64_t* shape) {
  int64_t s[KILN_MAX_DIMS], st[KILN_MAX_DIMS], acc = 1;
  memcpy(s, shape, sizeof(int64_t) * (size_t)ndim);
  int64_t tmp = s[ndim - 1];
  s[ndim - 1] = s[ndim - 2];
  s[ndim - 2] = tmp;
  for (int i = ndim - 1; i >= 0; i--) st[i] = acc, acc *= s[i];
  int64_t vs[KILN_MAX_DIMS];
  memcpy(vs, st, sizeof(int64_t) * (size_t)ndim);
  vs[ndim - 1] = st[ndim - 2];
  vs[ndim - 2] = st[ndim - 1];
  ht_make(h, d, ndim, shape, vs);
}

static inline void ht_free(ht_t* h) { free(h->buf); }

/* Advances a multi-index over `shape`; returns 0 after the last element. */
static inline int ht_next(int64_t* idx, const int64_t* shape, int ndim) {
  for (int i = ndim - 1; i >= 0; i--) {
    if (++idx[i] < shape[i]) return 1;
    idx[i] = 0;
  }
  return 0;
}

static inline int64_t ht_numel(const kiln_tensor_t* t) { return kiln_tensor_numel(t); }

/* Fills every element with a random value in [lo, hi) rounded to the dtype (integers: whole
 * numbers in range, bool: 0/1). */
static inline void ht_rand(ht_t* h, double lo, double hi) {
  int64_t idx[KILN_MAX_DIMS] = {0};
  if (ht_numel(&h->t) == 0) return;
  do {
    double v = lo + (hi - lo) * ht_uniform();
    if (!ht_is_float(h->t.dtype)) v = floor(v);
    if (h->t.dtype == KILN_DTYPE_U8 && v < 0) v = -v;
    if (h->t.dtype == KILN_DTYPE_BOOL) v = v > (lo + hi) / 2;
    ht_set(&h->t, idx, ht_round(h->t.dtype, v));
  } while (ht_next(idx, h->t.shape, h->t.ndim));
}

/* The element of `in` that broadcasting maps output index `oidx` (rank `ond`) to. */
static inline double ht_bget(const kiln_tensor_t* in, const int64_t* oidx, int ond) {
  int64_t idx[KILN_MAX_DIMS] = {0};
  for (int i = 0; i < in->ndim; i++) {
    int o = ond - in->ndim + i;
    idx[i] = (o >= 0 && in->shape[i] != 1) ? oidx[o] : 0;
  }
  return ht_get(in, idx);
}

/* |got - want| <= atol + rtol |want|, with NaN == NaN and infinities compared exactly. */
static inline int ht_close(double got, double want, double rtol, double atol) {
  if (isnan(want)) return isnan(got);
  if (isinf(want)) return got == want;
  return fabs(got - want) <= atol + rtol * fabs(want);
}

#define HT_CHECK_CLOSE(got, want, rtol, atol, ...)                                       \
  do {                                                                                   \
    double g_ = (got), w_ = (want);                                                      \
    if (!ht_close(g_, w_, (rtol), (atol))) {                                             \
      fprintf(stderr, "  %s:%d: got %.9g want %.9g: ", __FILE__, __LINE__, g_, w_);      \
      fprintf(stderr, __VA_ARGS__);                                                      \
      fprintf(stderr, "\n");                                                             \
      kt_failed_checks++;                                                                \
      kt_current_failed = 1;                                                             \
    }                                                                                    \
  } while (0)

#endif /* KILN_EW_TEST_UTIL_H */
