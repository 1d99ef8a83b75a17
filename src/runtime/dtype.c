/* SPDX-License-Identifier: Apache-2.0 */
/* dtype.c - element type properties and tensor descriptor helpers. */
#include "kiln/dtype.h"

#include "kiln/status.h"
#include "kiln/tensor.h"
#include "runtime/checked.h"

size_t kiln_dtype_size(kiln_dtype_t dtype) {
  switch (dtype) {
    case KILN_DTYPE_F64: case KILN_DTYPE_I64: return 8;
    case KILN_DTYPE_F32: case KILN_DTYPE_I32: return 4;
    case KILN_DTYPE_F16: case KILN_DTYPE_BF16: case KILN_DTYPE_I16: return 2;
    case KILN_DTYPE_I8: case KILN_DTYPE_U8: case KILN_DTYPE_BOOL: return 1;
    default: return 0;
  }
}

const char* kiln_dtype_name(kiln_dtype_t dtype) {
  static const char* names[KILN_DTYPE_COUNT] = {"f32", "f16", "bf16", "f64", "i8",
                                                "i16", "i32", "i64",  "u8",  "bool"};
  if ((int)dtype < 0 || dtype >= KILN_DTYPE_COUNT) return "invalid";
  return names[dtype];
}

int kiln_dtype_is_float(kiln_dtype_t dtype) {
  return dtype == KILN_DTYPE_F32 || dtype == KILN_DTYPE_F16 || dtype == KILN_DTYPE_BF16 ||
         dtype == KILN_DTYPE_F64;
}

int64_t kiln_tensor_numel(const kiln_tensor_t* t) {
  int64_t n;
  if (t->ndim < 0 || t->ndim > KILN_MAX_DIMS) return -1;
  if (!kiln_numel_capped(t->shape, t->ndim, INT64_MAX, &n)) return -1;
  return n;
}

int kiln_tensor_is_contiguous(const kiln_tensor_t* t) {
  int64_t expected = 1;
  for (int32_t i = t->ndim - 1; i >= 0; i--) {
    if (t->shape[i] == 0) return 1;
    if (t->shape[i] != 1 && t->strides[i] != expected) return 0;
    if (!kiln_mul_i64(expected, t->shape[i], &expected)) return 0;
  }
  return 1;
}

int kiln_tensor_init_contiguous(kiln_tensor_t* t, void* data, kiln_dtype_t dtype, int32_t ndim,
                                const int64_t* shape) {
  if (ndim < 0 || ndim > KILN_MAX_DIMS)
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "tensor rank %d outside [0, %d]", (int)ndim,
                      KILN_MAX_DIMS);
  t->data = data;
  t->dtype = dtype;
  t->ndim = ndim;
  int64_t stride = 1;
  int too_large = 0;
  for (int32_t i = ndim - 1; i >= 0; i--) {
    if (shape[i] < 0)
      return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "negative dimension %lld at %d",
                        (long long)shape[i], (int)i);
    t->shape[i] = shape[i];
    t->strides[i] = stride;
    /* the strides stay defined (saturated) even for a rejected shape */
    if (shape[i] > 1 && (!kiln_mul_i64(stride, shape[i], &stride) || stride > KILN_NUMEL_MAX)) {
      too_large = 1;
      stride = KILN_NUMEL_MAX;
    }
  }
  if (too_large)
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT,
                      "tensor shape too large (limit 2^48 elements, zero dims counted as 1)");
  return KILN_OK;
}
