/* SPDX-License-Identifier: Apache-2.0 */
/* index_internal.h - helpers shared by the index, scatter, shape, factory and sort kernels
 * (index_util.c). Internal to libkiln. */
#ifndef KILN_KERNELS_INDEX_INTERNAL_H
#define KILN_KERNELS_INDEX_INTERNAL_H

#include <stdint.h>
#include <string.h>

#include "kernels/iter.h"
#include "kiln/kernels/index.h"
#include "kiln/parallel.h"

#define KI_MAX_OPS 4
#define KI_GRAIN 32768 /* elements per parallel chunk, at least */
#define KI_BLOCK 256   /* columns per work unit in the accumulating kernels */

/* A row-major walk over a box of up to KILN_MAX_DIMS dims for up to KI_MAX_OPS operands with
 * element strides. kiln_idx_nd_init drops size-1 dims and merges adjacent dims that are
 * contiguous for every operand (row-major order is kept); the last dim is the row. */
typedef struct ki_nd {
  int nd, nops;
  int64_t shape[KILN_MAX_DIMS];
  int64_t st[KI_MAX_OPS][KILN_MAX_DIMS];
  int64_t numel, inner, rows; /* rows * inner == numel */
  int64_t ist[KI_MAX_OPS];    /* stride of the row dim per operand (0 when nd == 0) */
} ki_nd_t;

/* Sets up a walk; strides[k] (nd entries) are operand k's element strides; merge = 0 keeps every
 * dim (so coordinates can be recovered). */
void kiln_idx_nd_init(ki_nd_t* w, int nd, const int64_t* shape, int nops,
                      const int64_t* const* strides, int merge);

/* Element offsets of the first element of row `row` for every operand. */
static inline void ki_nd_row(const ki_nd_t* w, int64_t row, int64_t* off) {
  for (int k = 0; k < w->nops; k++) off[k] = 0;
  for (int d = w->nd - 2; d >= 0 && row; d--) {
    const int64_t c = row % w->shape[d];
    row /= w->shape[d];
    for (int k = 0; k < w->nops; k++) off[k] += c * w->st[k][d];
  }
}

static inline int64_t ki_load_index(const char* p, kiln_dtype_t dt) {
  if (dt == KILN_DTYPE_I64) {
    int64_t v;
    memcpy(&v, p, 8);
    return v;
  }
  int32_t v;
  memcpy(&v, p, 4);
  return v;
}

/* Copies n elements of es bytes; ds/ss are byte strides. */
static inline void ki_copy_n(char* d, int64_t ds, const char* s, int64_t ss, int64_t n,
                             size_t es) {
  if (ds == (int64_t)es && ss == (int64_t)es) {
    memmove(d, s, (size_t)n * es);
    return;
  }
  switch (es) {
    case 1: for (int64_t i = 0; i < n; i++) d[i * ds] = s[i * ss]; break;
    case 2: for (int64_t i = 0; i < n; i++) memcpy(d + i * ds, s + i * ss, 2); break;
    case 4: for (int64_t i = 0; i < n; i++) memcpy(d + i * ds, s + i * ss, 4); break;
    default: for (int64_t i = 0; i < n; i++) memcpy(d + i * ds, s + i * ss, 8); break;
  }
}

/* A tensor seen with rank >= 1 (0-d becomes [1] with stride 0), as torch's scatter/gather
 * family treats scalars. */
typedef struct eff {
  int nd;
  int64_t shape[KILN_MAX_DIMS], st[KILN_MAX_DIMS];
} eff_t;

static inline void eff_init(eff_t* e, const kiln_tensor_t* t) {
  e->nd = t->ndim ? t->ndim : 1;
  e->shape[0] = 1;
  e->st[0] = 0;
  for (int d = 0; d < t->ndim; d++) {
    e->shape[d] = t->shape[d];
    e->st[d] = t->strides[d];
  }
}

/* Normalizes dim for a tensor of rank ndim (0-d counts as rank 1). */
kiln_status_t kiln_idx_wrap_dim(int dim, int ndim, const char* op, int* out);
/* Checks a descriptor (kiln_check_tensor) naming `what` in the message. */
kiln_status_t kiln_idx_check(const kiln_tensor_t* t, const char* op, const char* what);
/* INVALID_ARGUMENT unless t is i64 (or i32 when allow_i32). */
kiln_status_t kiln_idx_check_index_dtype(const kiln_tensor_t* t, int allow_i32, const char* op,
                                         const char* what);
/* INVALID_ARGUMENT "op: a has dtype x but b has y" unless equal. */
kiln_status_t kiln_idx_same_dtype(const kiln_tensor_t* a, const kiln_tensor_t* b, const char* op,
                                  const char* an, const char* bn);
/* Checks every element of index (i32/i64) lies in [0, size), or [-size, size) when wrap; scans in
 * parallel and reports the first bad one in row-major order as OUT_OF_RANGE "index I is out of
 * bounds for dimension D with size S". */
kiln_status_t kiln_idx_check_range(const kiln_tensor_t* index, int64_t size, int wrap, int dim,
                                   const char* op);
/* The bytes of `value` converted to dtype (as fill_ does) into out[8]. */
void kiln_idx_scalar_bytes(kiln_dtype_t dt, double value, void* out);
/* Formats t's shape into buf (>= 200 bytes). */
const char* kiln_idx_shape(const kiln_tensor_t* t, char* buf);

/* Element-wise combination used by the accumulating kernels. */
typedef enum ki_op {
  KI_SET = 0, /* d = s */
  KI_ADD,     /* d = d + s */
  KI_MUL,     /* d = d * s */
  KI_MAX,     /* d = isnan(s) ? s : max(d, s) (torch scatter_reduce amax) */
  KI_MIN,
  KI_ADD_ALPHA, /* d = d + alpha * s (alpha in the dtype, like torch's add) */
  KI_ADD_SCALED /* d = d + round(s * round(alpha)): c10::Half arithmetic (= ADD_ALPHA otherwise) */
} ki_op_t;

/* For k < n: element at dst + (doff ? doff[k] : k*ds) (op)= element at src + k*ss (byte offsets
 * and strides), in dtype dt, rounding each step like torch. */
void kiln_idx_combine(kiln_dtype_t dt, ki_op_t op, char* dst, const int64_t* doff, int64_t ds,
                      const char* src, int64_t ss, int64_t n, double alpha);
/* *p = *p / count in dtype dt (floor division for integers), torch scatter_reduce mean. */
void kiln_idx_div_count(kiln_dtype_t dt, char* p, int64_t count);
/* The identity of op (KI_ADD 0, KI_MUL 1, KI_MAX lowest/-inf, KI_MIN highest/+inf) into out[8]. */
void kiln_idx_identity(kiln_dtype_t dt, ki_op_t op, void* out);

/* A contiguous f32 working copy of a tensor (torch accumulates f16/bf16 reductions in f32 and
 * rounds once); small ones live in `stack`. */
typedef struct ki_shadow {
  kiln_tensor_t t;
  void* heap;
  float stack[256];
} ki_shadow_t;

/* Fills s with src converted to f32 (src may be NULL: s->t stays zeroed). Errors: OUT_OF_MEMORY. */
kiln_status_t kiln_idx_shadow_init(ki_shadow_t* s, const kiln_tensor_t* src, const char* op);
/* Frees the shadow's memory (safe on a zeroed or failed shadow). */
void kiln_idx_shadow_free(ki_shadow_t* s);

/* Grain (in work units of `unit` elements each) so a chunk moves about KI_GRAIN elements. */
static inline int64_t ki_grain(int64_t unit) {
  if (unit < 1) unit = 1;
  return unit >= KI_GRAIN ? 1 : KI_GRAIN / unit;
}

#endif /* KILN_KERNELS_INDEX_INTERNAL_H */
