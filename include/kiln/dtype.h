/* SPDX-License-Identifier: Apache-2.0 */
/* kiln/dtype.h - element types understood by devices, kernels and the compiler. */
#ifndef KILN_DTYPE_H
#define KILN_DTYPE_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum kiln_dtype {
  KILN_DTYPE_F32 = 0,
  KILN_DTYPE_F16 = 1,
  KILN_DTYPE_BF16 = 2,
  KILN_DTYPE_F64 = 3,
  KILN_DTYPE_I8 = 4,
  KILN_DTYPE_I16 = 5,
  KILN_DTYPE_I32 = 6,
  KILN_DTYPE_I64 = 7,
  KILN_DTYPE_U8 = 8,
  KILN_DTYPE_BOOL = 9, /* one byte, 0 or 1 */
  KILN_DTYPE_COUNT
} kiln_dtype_t;

/* Size in bytes of one element; 0 for an invalid dtype. */
size_t kiln_dtype_size(kiln_dtype_t dtype);
/* Short static name ("f32", "bf16", ...); "invalid" for an invalid dtype. */
const char* kiln_dtype_name(kiln_dtype_t dtype);
/* 1 for f32/f16/bf16/f64, 0 otherwise. */
int kiln_dtype_is_float(kiln_dtype_t dtype);

#ifdef __cplusplus
}
#endif
#endif /* KILN_DTYPE_H */
