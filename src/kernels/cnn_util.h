/* SPDX-License-Identifier: Apache-2.0 */
/* cnn_util.h - small helpers shared by the conv, pooling and batch-norm kernels (internal). */
#ifndef KILN_KERNELS_CNN_UTIL_H
#define KILN_KERNELS_CNN_UTIL_H

#include <stdint.h>
#include <stdio.h>

#include "kernels/half.h"
#include "kiln/status.h"
#include "kiln/tensor.h"
#include "runtime/checked.h"

/* Formats t's shape as "[a, b, ...]" into buf (for error messages); returns buf. */
static inline const char* shp(const kiln_tensor_t* t, char* buf, size_t cap) {
  size_t n = (size_t)snprintf(buf, cap, "[");
  for (int i = 0; i < t->ndim && n < cap; i++)
    n += (size_t)snprintf(buf + n, cap - n, i ? ", %lld" : "%lld", (long long)t->shape[i]);
  if (n < cap) snprintf(buf + n, cap - n, "]");
  return buf;
}

/* INVALID_ARGUMENT unless t (non-NULL, rank checked) passes kiln_tensor_size_ok. */
static inline kiln_status_t cnn_check_size(const char* fn, const char* name,
                                           const kiln_tensor_t* t) {
  char b[128];
  if (t->ndim < 0 || t->ndim > KILN_MAX_DIMS || !kiln_tensor_size_ok(t))
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT,
                      "%s: %s %s has a negative dim, more than 2^48 elements or strides beyond "
                      "int64", fn, name,
                      t->ndim >= 0 && t->ndim <= KILN_MAX_DIMS ? shp(t, b, sizeof b) : "?");
  return KILN_OK;
}

/* One floating element (f32, f64, f16 or bf16) at p, as double. */
static inline double ld_elem(const char* p, kiln_dtype_t dt) {
  switch (dt) {
    case KILN_DTYPE_F32: return *(const float*)p;
    case KILN_DTYPE_F64: return *(const double*)p;
    case KILN_DTYPE_F16: return kiln_f16_to_f32(*(const uint16_t*)p);
    default: return kiln_bf16_to_f32(*(const uint16_t*)p);
  }
}

/* Stores v at p as a floating element of dtype dt (rounding to nearest even). */
static inline void st_elem(char* p, kiln_dtype_t dt, double v) {
  switch (dt) {
    case KILN_DTYPE_F32: *(float*)p = (float)v; break;
    case KILN_DTYPE_F64: *(double*)p = v; break;
    case KILN_DTYPE_F16: *(uint16_t*)p = kiln_f32_to_f16((float)v); break;
    default: *(uint16_t*)p = kiln_f32_to_bf16((float)v); break;
  }
}

#endif /* KILN_KERNELS_CNN_UTIL_H */
