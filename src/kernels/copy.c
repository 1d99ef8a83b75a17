/* SPDX-License-Identifier: Apache-2.0 */
/* copy.c - kiln_kernel_copy (torch copy_: cast + broadcast + arbitrary strides) and fill. */
#include <string.h>

#include "kernels/ew_internal.h"

static void copy_loop(void* ctx, char** ptrs, const int64_t* strides, int64_t n) {
  const kiln_iter_t* it = ctx;
  kiln_cvt(it->dtype[1], ptrs[1], strides[1], it->dtype[0], ptrs[0], strides[0], n);
}

kiln_status_t kiln_kernel_copy(const kiln_tensor_t* src, kiln_tensor_t* dst) {
  kiln_iter_t it;
  const kiln_tensor_t* ins[1] = {src};
  KILN_RETURN_IF_ERROR(kiln_iter_init(&it, dst, ins, 1, "copy"));
  if (it.numel == 0) return KILN_OK;
  if (it.data[0] == it.data[1] && it.dtype[0] == it.dtype[1]) { /* x.copy_(x) */
    int same = 1;
    for (int d = 0; d < it.ndim; d++) same &= it.strides[d][0] == it.strides[d][1];
    if (same) return KILN_OK;
  }
  kiln_iter_run(&it, KILN_ITER_GRAIN, copy_loop, &it);
  return KILN_OK;
}

typedef struct {
  size_t size;
  uint64_t bits; /* the element's bytes, in the low `size` bytes */
} fill_ctx_t;

static void fill_loop(void* ctx, char** ptrs, const int64_t* strides, int64_t n) {
  const fill_ctx_t* f = ctx;
  char* p = ptrs[0];
  const int64_t s = strides[0];
  switch (f->size) {
    case 1: {
      uint8_t v = (uint8_t)f->bits;
      if (s == 1) memset(p, v, (size_t)n);
      else for (int64_t i = 0; i < n; i++) p[i * s] = (char)v;
      break;
    }
    case 2: {
      uint16_t v = (uint16_t)f->bits;
      if (s == 2) for (int64_t i = 0; i < n; i++) ((uint16_t*)p)[i] = v;
      else for (int64_t i = 0; i < n; i++) *(uint16_t*)(p + i * s) = v;
      break;
    }
    case 4: {
      uint32_t v = (uint32_t)f->bits;
      if (s == 4) for (int64_t i = 0; i < n; i++) ((uint32_t*)p)[i] = v;
      else for (int64_t i = 0; i < n; i++) *(uint32_t*)(p + i * s) = v;
      break;
    }
    default: {
      uint64_t v = f->bits;
      if (s == 8) for (int64_t i = 0; i < n; i++) ((uint64_t*)p)[i] = v;
      else for (int64_t i = 0; i < n; i++) *(uint64_t*)(p + i * s) = v;
      break;
    }
  }
}

static kiln_status_t fill_bytes(kiln_tensor_t* dst, const void* elem) {
  kiln_iter_t it;
  KILN_RETURN_IF_ERROR(kiln_iter_init(&it, dst, NULL, 0, "fill"));
  fill_ctx_t f = {kiln_dtype_size(dst->dtype), 0};
  memcpy(&f.bits, elem, f.size);
  kiln_iter_run(&it, KILN_ITER_GRAIN * 4, fill_loop, &f);
  return KILN_OK;
}

kiln_status_t kiln_kernel_fill(kiln_tensor_t* dst, double value) {
  KILN_RETURN_IF_ERROR(kiln_check_tensor(dst, "fill"));
  char elem[8] = {0};
  kiln_store_f64(elem, dst->dtype, value);
  return fill_bytes(dst, elem);
}

kiln_status_t kiln_kernel_fill_i64(kiln_tensor_t* dst, int64_t value) {
  KILN_RETURN_IF_ERROR(kiln_check_tensor(dst, "fill"));
  char elem[8] = {0};
  kiln_store_i64(elem, dst->dtype, value);
  return fill_bytes(dst, elem);
}
