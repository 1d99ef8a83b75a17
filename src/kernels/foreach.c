/* SPDX-License-Identifier: Apache-2.0 */
/* foreach.c - list versions of the elementwise kernels (torch._foreach_*): one call runs an op
 * over every entry of tensor lists, so an optimizer step over N parameters costs N kernel calls
 * in C instead of N framework dispatches. Each entry is exactly the single-tensor kernel
 * (kiln_kernel_unary / binary / ternary), so the numerics are those of the eager ops. */
#include <stdio.h>

#include "kiln/kernels/elementwise.h"

/* torch's opmath: 16-bit floats compute in f32. */
static kiln_dtype_t opmath(kiln_dtype_t dt) {
  return dt == KILN_DTYPE_F16 || dt == KILN_DTYPE_BF16 ? KILN_DTYPE_F32 : dt;
}

/* A rank-0 f64 host tensor over *v (a wrapped Python number). */
static kiln_tensor_t scalar_desc(double* v) {
  kiln_tensor_t d = {0};
  d.data = v;
  d.dtype = KILN_DTYPE_F64;
  d.ndim = 0;
  return d;
}

static kiln_status_t check_lists(const char* op, int n, kiln_tensor_t* const* a,
                                 kiln_tensor_t* const* out) {
  if (n < 0) return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s: n = %d < 0", op, n);
  if (n > 0 && (!a || !out))
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s: NULL tensor list", op);
  return KILN_OK;
}

/* Re-raises the failing entry's error with its index. */
static kiln_status_t entry_error(kiln_status_t s, const char* op, int i) {
  char msg[512]; /* the message lives in the buffer kiln_error writes */
  snprintf(msg, sizeof msg, "%s", kiln_status_message());
  return kiln_error((kiln_status_code_t)s, "%s: entry %d: %s", op, i, msg);
}

kiln_status_t kiln_kernel_foreach_unary(kiln_unary_op_t op, int n, kiln_tensor_t* const* x,
                                        kiln_tensor_t* const* out) {
  static const char* name = "kiln_kernel_foreach_unary";
  KILN_RETURN_IF_ERROR(check_lists(name, n, x, out));
  for (int i = 0; i < n; i++) {
    if (!x[i] || !out[i]) return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s: entry %d is NULL", name, i);
    const kiln_status_t s = kiln_kernel_unary(op, x[i], opmath(out[i]->dtype), out[i]);
    if (s != KILN_OK) return entry_error(s, name, i);
  }
  return KILN_OK;
}

kiln_status_t kiln_kernel_foreach_binary(kiln_binary_op_t op, int n, kiln_tensor_t* const* a,
                                         kiln_tensor_t* const* b, const double* scalars,
                                         double scalar, double alpha, kiln_tensor_t* const* out) {
  static const char* name = "kiln_kernel_foreach_binary";
  KILN_RETURN_IF_ERROR(check_lists(name, n, a, out));
  for (int i = 0; i < n; i++) {
    if (!a[i] || !out[i] || (b && !b[i]))
      return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s: entry %d is NULL", name, i);
    double v = scalars ? scalars[i] : scalar;
    const kiln_tensor_t sd = scalar_desc(&v);
    const kiln_status_t s =
        kiln_kernel_binary(op, a[i], b ? b[i] : &sd, alpha, opmath(out[i]->dtype), out[i]);
    if (s != KILN_OK) return entry_error(s, name, i);
  }
  return KILN_OK;
}

kiln_status_t kiln_kernel_foreach_ternary(kiln_ternary_op_t op, int n, kiln_tensor_t* const* a,
                                          kiln_tensor_t* const* b, kiln_tensor_t* const* c,
                                          const double* scalars, double scalar,
                                          kiln_tensor_t* const* out) {
  static const char* name = "kiln_kernel_foreach_ternary";
  KILN_RETURN_IF_ERROR(check_lists(name, n, a, out));
  if (n > 0 && !b) return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s: NULL tensor list", name);
  if (n > 0 && !c && op != KILN_TERNARY_LERP)
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s: only LERP takes a scalar third operand",
                      name);
  for (int i = 0; i < n; i++) {
    if (!a[i] || !out[i] || !b[i] || (c && !c[i]))
      return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s: entry %d is NULL", name, i);
    double v = scalars ? scalars[i] : scalar;
    const kiln_tensor_t sd = scalar_desc(&v);
    const kiln_status_t s = kiln_kernel_ternary(op, a[i], b[i], c ? c[i] : &sd, v,
                                                opmath(out[i]->dtype), out[i]);
    if (s != KILN_OK) return entry_error(s, name, i);
  }
  return KILN_OK;
}
