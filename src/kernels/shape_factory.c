/* SPDX-License-Identifier: Apache-2.0 */
/* shape_factory.c - arange, linspace and eye (see kiln/kernels/index.h).
 *
 * Values follow torch CPU's scalar formulas: arange in the accumulate type (double for f32/f64,
 * f32 for f16/bf16, exact int64 for integers); linspace in the output type itself (f16/bf16 round
 * after every operation, like c10::Half arithmetic), in double for integer outputs. */
#include <math.h>

#include "kernels/half.h"
#include "kernels/index_internal.h"
#include "kiln/kernels/elementwise.h"
#include "runtime/checked.h"

typedef struct fac_ctx {
  char* out;
  int64_t st; /* bytes */
  kiln_dtype_t dt;
  int kind; /* 0 arange (double), 1 arange (int64), 2 linspace */
  double start, step, end;
  int64_t istart, istep, steps;
} fac_ctx_t;

static float h16(float v) { return kiln_f16_to_f32(kiln_f32_to_f16(v)); }
static float hb16(float v) { return kiln_bf16_to_f32(kiln_f32_to_bf16(v)); }

#define d2i64 kiln_f64_to_i64_cvtt /* runtime/checked.h: NaN, out of range -> INT64_MIN */

static void store_int(char* p, kiln_dtype_t dt, int64_t v) {
  switch (dt) {
    case KILN_DTYPE_I8: { int8_t t = (int8_t)v; memcpy(p, &t, 1); break; }
    case KILN_DTYPE_U8: { uint8_t t = (uint8_t)v; memcpy(p, &t, 1); break; }
    case KILN_DTYPE_I16: { int16_t t = (int16_t)v; memcpy(p, &t, 2); break; }
    case KILN_DTYPE_I32: { int32_t t = (int32_t)v; memcpy(p, &t, 4); break; }
    default: memcpy(p, &v, 8); break;
  }
}

static void store_float(char* p, kiln_dtype_t dt, double v) {
  switch (dt) {
    case KILN_DTYPE_F32: { float f = (float)v; memcpy(p, &f, 4); break; }
    case KILN_DTYPE_F64: memcpy(p, &v, 8); break;
    case KILN_DTYPE_F16: { uint16_t h = kiln_f32_to_f16((float)v); memcpy(p, &h, 2); break; }
    default: { uint16_t h = kiln_f32_to_bf16((float)v); memcpy(p, &h, 2); break; }
  }
}

/* linspace element i with c10::Half / BFloat16 arithmetic (round after each op). */
static float lin_half(const fac_ctx_t* c, int64_t i, float (*r)(float)) {
  const float s = r((float)c->start), e = r((float)c->end);
  const float step = r(r(e - s) / r((float)(c->steps - 1)));
  if (i < c->steps / 2) return r(s + r(step * r((float)i)));
  return r(e - r(step * r((float)(c->steps - i - 1))));
}

static void fac_range(void* arg, int64_t i0, int64_t i1, int tid) {
  (void)tid;
  const fac_ctx_t* c = arg;
  for (int64_t i = i0; i < i1; i++) {
    char* p = c->out + i * c->st;
    if (c->kind == 1) {
      store_int(p, c->dt, (int64_t)((uint64_t)c->istart + (uint64_t)c->istep * (uint64_t)i));
    } else if (c->kind == 0) {
      if (c->dt == KILN_DTYPE_F32 || c->dt == KILN_DTYPE_F64)
        store_float(p, c->dt, c->start + c->step * (double)i);
      else /* f16 / bf16: accumulate type f32 */
        store_float(p, c->dt, (float)c->start + (float)c->step * (float)i);
    } else {
      const int64_t half = c->steps / 2;
      switch (c->dt) {
        case KILN_DTYPE_F32: {
          const float s = (float)c->start, e = (float)c->end;
          const float step = (e - s) / (float)(c->steps - 1);
          store_float(p, c->dt, i < half ? s + step * (float)i
                                         : e - step * (float)(c->steps - i - 1));
          break;
        }
        case KILN_DTYPE_F64: {
          const double step = (c->end - c->start) / (double)(c->steps - 1);
          store_float(p, c->dt, i < half ? c->start + step * (double)i
                                         : c->end - step * (double)(c->steps - i - 1));
          break;
        }
        case KILN_DTYPE_F16: store_float(p, c->dt, lin_half(c, i, h16)); break;
        case KILN_DTYPE_BF16: store_float(p, c->dt, lin_half(c, i, hb16)); break;
        default: {
          const double s = (double)c->istart, e = (double)c->istep; /* start/end in the dtype */
          const double step = (e - s) / (double)(c->steps - 1);
          store_int(p, c->dt, d2i64(i < half ? s + step * (double)i
                                             : e - step * (double)(c->steps - i - 1)));
          break;
        }
      }
    }
  }
}

static kiln_status_t fac_check(const kiln_tensor_t* out, const char* op) {
  KILN_RETURN_IF_ERROR(kiln_idx_check(out, op, "out"));
  if (out->ndim != 1) {
    char b[200];
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s: out %s must be 1-d", op,
                      kiln_idx_shape(out, b));
  }
  if (out->dtype == KILN_DTYPE_BOOL)
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s: not implemented for bool", op);
  return KILN_OK;
}

static void fac_run(fac_ctx_t* c, kiln_tensor_t* out) {
  c->out = out->data;
  c->dt = out->dtype;
  c->st = out->strides[0] * (int64_t)kiln_dtype_size(out->dtype);
  kiln_parallel_for(out->shape[0], KI_GRAIN, fac_range, c);
}

/* An integer value converted to an integer dtype the way Scalar::to<T> does (wrapping). */
static int64_t wrap_to(kiln_dtype_t dt, int64_t v) {
  switch (dt) {
    case KILN_DTYPE_I8: return (int8_t)v;
    case KILN_DTYPE_U8: return (uint8_t)v;
    case KILN_DTYPE_I16: return (int16_t)v;
    case KILN_DTYPE_I32: return (int32_t)v;
    default: return v;
  }
}

/* torch.arange with a double start/step. */
kiln_status_t kiln_kernel_arange(kiln_tensor_t* out, double start, double step) {
  KILN_RETURN_IF_ERROR(fac_check(out, "arange"));
  fac_ctx_t c;
  memset(&c, 0, sizeof c);
  if (kiln_dtype_is_float(out->dtype)) {
    c.kind = 0;
    c.start = start;
    c.step = step;
  } else {
    c.kind = 1;
    if (!kiln_f64_to_i64(start, &c.istart) || !kiln_f64_to_i64(step, &c.istep))
      return kiln_error(KILN_ERROR_INVALID_ARGUMENT,
                        "arange: start %g / step %g is not a finite int64 value for a %s result",
                        start, step, kiln_dtype_name(out->dtype));
  }
  fac_run(&c, out);
  return KILN_OK;
}

/* torch.arange with exact int64 start/step. */
kiln_status_t kiln_kernel_arange_i64(kiln_tensor_t* out, int64_t start, int64_t step) {
  KILN_RETURN_IF_ERROR(fac_check(out, "arange"));
  fac_ctx_t c;
  memset(&c, 0, sizeof c);
  if (kiln_dtype_is_float(out->dtype)) {
    c.kind = 0;
    c.start = (double)start;
    c.step = (double)step;
  } else {
    c.kind = 1;
    c.istart = start;
    c.istep = step;
  }
  fac_run(&c, out);
  return KILN_OK;
}

/* torch.linspace with torch's two-sided formula. */
kiln_status_t kiln_kernel_linspace(kiln_tensor_t* out, double start, double end) {
  KILN_RETURN_IF_ERROR(fac_check(out, "linspace"));
  const int64_t n = out->shape[0];
  if (n == 0) return KILN_OK;
  if (n == 1) { /* torch fills `start` */
    kiln_tensor_t v = *out;
    return kiln_kernel_fill(&v, start);
  }
  fac_ctx_t c;
  memset(&c, 0, sizeof c);
  c.kind = 2;
  c.start = start;
  c.end = end;
  c.steps = n;
  if (!kiln_dtype_is_float(out->dtype)) { /* integer start/end in the dtype, kept in istart/istep */
    if (!kiln_f64_to_i64(start, &c.istart) || !kiln_f64_to_i64(end, &c.istep))
      return kiln_error(KILN_ERROR_INVALID_ARGUMENT,
                        "linspace: start %g / end %g is not a finite int64 value for a %s result",
                        start, end, kiln_dtype_name(out->dtype));
    c.istart = wrap_to(out->dtype, c.istart);
    c.istep = wrap_to(out->dtype, c.istep);
  }
  fac_run(&c, out);
  return KILN_OK;
}

/* torch.eye: zeros, then ones along the diagonal view. */
kiln_status_t kiln_kernel_eye(kiln_tensor_t* out) {
  KILN_RETURN_IF_ERROR(kiln_idx_check(out, "eye", "out"));
  if (out->ndim != 2) {
    char b[200];
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "eye: out %s must be 2-d",
                      kiln_idx_shape(out, b));
  }
  if (kiln_tensor_numel(out) == 0) return KILN_OK;
  KILN_RETURN_IF_ERROR(kiln_kernel_fill(out, 0.0));
  kiln_tensor_t d = *out;
  d.ndim = 1;
  d.shape[0] = out->shape[0] < out->shape[1] ? out->shape[0] : out->shape[1];
  d.strides[0] = out->strides[0] + out->strides[1];
  return kiln_kernel_fill(&d, 1.0);
}
