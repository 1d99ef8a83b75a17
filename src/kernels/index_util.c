/* SPDX-License-Identifier: Apache-2.0 */
/* index_util.c - shared helpers of the index kernels: the nd walk, checks, index range
 * validation, scalar conversion and the typed element combiner (see index_internal.h). */
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>

#include "kernels/half.h"
#include "kernels/index_internal.h"
#include "kiln/kernels/elementwise.h"
#include "runtime/checked.h"

/* Builds the coalesced row-major walk (see index_internal.h). */
void kiln_idx_nd_init(ki_nd_t* w, int nd, const int64_t* shape, int nops,
                      const int64_t* const* strides, int merge) {
  w->nops = nops;
  w->nd = 0;
  w->numel = 1;
  for (int d = 0; d < nd; d++) w->numel *= shape[d];
  for (int d = 0; d < nd; d++) {
    if (merge && shape[d] == 1) continue;
    int j = w->nd;
    if (merge && j > 0) {
      int ok = 1;
      for (int k = 0; k < nops; k++)
        if (w->st[k][j - 1] != strides[k][d] * shape[d]) ok = 0;
      if (ok) {
        w->shape[j - 1] *= shape[d];
        for (int k = 0; k < nops; k++) w->st[k][j - 1] = strides[k][d];
        continue;
      }
    }
    w->shape[j] = shape[d];
    for (int k = 0; k < nops; k++) w->st[k][j] = strides[k][d];
    w->nd++;
  }
  w->inner = w->nd ? w->shape[w->nd - 1] : 1;
  for (int k = 0; k < nops; k++) w->ist[k] = w->nd ? w->st[k][w->nd - 1] : 0;
  w->rows = w->inner ? w->numel / w->inner : 0;
  if (w->numel == 0) w->rows = 0;
}

/* Wraps a negative dim; 0-d tensors accept dims 0 and -1. */
kiln_status_t kiln_idx_wrap_dim(int dim, int ndim, const char* op, int* out) {
  const int n = ndim > 0 ? ndim : 1;
  if (dim < -n || dim >= n)
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT,
                      "%s: dimension out of range (expected to be in range of [%d, %d], but got "
                      "%d)", op, -n, n - 1, dim);
  *out = dim < 0 ? dim + n : dim;
  return KILN_OK;
}

/* kiln_check_tensor with "op: what" in the message. */
kiln_status_t kiln_idx_check(const kiln_tensor_t* t, const char* op, const char* what) {
  char name[160];
  snprintf(name, sizeof name, "%s: %s", op, what);
  return kiln_check_tensor(t, name);
}

/* Rejects index tensors that are not i64 (or i32 when allowed). */
kiln_status_t kiln_idx_check_index_dtype(const kiln_tensor_t* t, int allow_i32, const char* op,
                                         const char* what) {
  if (t->dtype == KILN_DTYPE_I64 || (allow_i32 && t->dtype == KILN_DTYPE_I32)) return KILN_OK;
  return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s: %s must be %s, got %s", op, what,
                    allow_i32 ? "i64 or i32" : "i64", kiln_dtype_name(t->dtype));
}

/* Rejects mismatched dtypes, naming both tensors. */
kiln_status_t kiln_idx_same_dtype(const kiln_tensor_t* a, const kiln_tensor_t* b, const char* op,
                                  const char* an, const char* bn) {
  if (a->dtype == b->dtype) return KILN_OK;
  return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s: %s has dtype %s but %s has %s", op, an,
                    kiln_dtype_name(a->dtype), bn, kiln_dtype_name(b->dtype));
}

/* Formats a tensor's shape as "[2, 3]". */
const char* kiln_idx_shape(const kiln_tensor_t* t, char* buf) {
  return kiln_format_shape(buf, t->shape, t->ndim);
}

/* ---- index range check ----------------------------------------------------------------------- */

typedef struct range_ctx {
  ki_nd_t w;
  const char* base;
  kiln_dtype_t dt;
  int64_t lo, hi;
  _Atomic int64_t first_bad; /* flat position, INT64_MAX when none */
} range_ctx_t;

static void range_rows(void* arg, int64_t r0, int64_t r1, int tid) {
  (void)tid;
  range_ctx_t* c = arg;
  const int64_t es = (int64_t)kiln_dtype_size(c->dt), is = c->w.ist[0] * es;
  for (int64_t r = r0; r < r1; r++) {
    if (r * c->w.inner >= atomic_load_explicit(&c->first_bad, memory_order_relaxed)) return;
    int64_t off;
    ki_nd_row(&c->w, r, &off);
    const char* p = c->base + off * es;
    int64_t bad = -1;
    if (c->dt == KILN_DTYPE_I64 && is == 8) {
      const int64_t* q = (const int64_t*)p;
      for (int64_t e = 0; e < c->w.inner; e++)
        if (q[e] < c->lo || q[e] >= c->hi) { bad = e; break; }
    } else {
      for (int64_t e = 0; e < c->w.inner; e++) {
        const int64_t v = ki_load_index(p + e * is, c->dt);
        if (v < c->lo || v >= c->hi) { bad = e; break; }
      }
    }
    if (bad >= 0) {
      int64_t pos = r * c->w.inner + bad;
      int64_t cur = atomic_load(&c->first_bad);
      while (pos < cur && !atomic_compare_exchange_weak(&c->first_bad, &cur, pos)) {
      }
      return;
    }
  }
}

/* Parallel bounds check; reports the first bad index in row-major order. */
kiln_status_t kiln_idx_check_range(const kiln_tensor_t* index, int64_t size, int wrap, int dim,
                                   const char* op) {
  range_ctx_t c;
  const int64_t* st[1] = {index->strides};
  kiln_idx_nd_init(&c.w, index->ndim, index->shape, 1, st, 1);
  if (c.w.numel == 0) return KILN_OK;
  c.base = index->data;
  c.dt = index->dtype;
  c.lo = wrap ? -size : 0;
  c.hi = size;
  atomic_init(&c.first_bad, INT64_MAX);
  kiln_parallel_for(c.w.rows, ki_grain(c.w.inner), range_rows, &c);
  const int64_t pos = atomic_load(&c.first_bad);
  if (pos == INT64_MAX) return KILN_OK;
  int64_t off;
  ki_nd_row(&c.w, pos / c.w.inner, &off);
  off += (pos % c.w.inner) * c.w.ist[0];
  const int64_t v = ki_load_index(c.base + off * (int64_t)kiln_dtype_size(c.dt), c.dt);
  return kiln_error(KILN_ERROR_OUT_OF_RANGE,
                    "%s: index %lld is out of bounds for dimension %d with size %lld", op,
                    (long long)v, dim, (long long)size);
}

/* A double converted to dt's bytes exactly as fill_ converts it. */
void kiln_idx_scalar_bytes(kiln_dtype_t dt, double value, void* out) {
  uint64_t bits = 0; /* aligned for kiln_kernel_fill's stores */
  kiln_tensor_t t;
  memset(&t, 0, sizeof t);
  t.data = &bits;
  t.dtype = dt;
  t.ndim = 0;
  (void)kiln_kernel_fill(&t, value);
  memcpy(out, &bits, 8);
}

/* ---- typed combiner -------------------------------------------------------------------------- */

static inline float ld_f32(const char* p) { float v; memcpy(&v, p, 4); return v; }
static inline void st_f32(char* p, float v) { memcpy(p, &v, 4); }
static inline double ld_f64(const char* p) { double v; memcpy(&v, p, 8); return v; }
static inline void st_f64(char* p, double v) { memcpy(p, &v, 8); }
static inline float ld_f16(const char* p) {
  uint16_t v;
  memcpy(&v, p, 2);
  return kiln_f16_to_f32(v);
}
static inline void st_f16(char* p, float v) { uint16_t h = kiln_f32_to_f16(v); memcpy(p, &h, 2); }
static inline float ld_bf16(const char* p) {
  uint16_t v;
  memcpy(&v, p, 2);
  return kiln_bf16_to_f32(v);
}
static inline void st_bf16(char* p, float v) { uint16_t h = kiln_f32_to_bf16(v); memcpy(p, &h, 2); }

#define d2i64 kiln_f64_to_i64_cvtt /* runtime/checked.h: NaN, out of range -> INT64_MIN */

#define KI_ELEM_LOOP(A, LD, ST, EXPR)                             \
  for (int64_t k = 0; k < n; k++) {                               \
    char* dp = dst + (doff ? doff[k] : k * ds);                   \
    const A a = LD(dp), b = LD(src + k * ss);                     \
    ST(dp, (EXPR));                                               \
  }

#define KI_FLOAT_COMBINE(NAME, A, LD, ST)                                                        \
  static void NAME(ki_op_t op, char* dst, const int64_t* doff, int64_t ds, const char* src,     \
                   int64_t ss, int64_t n, double alpha) {                                      \
    const A al = (A)alpha;                                                                      \
    switch (op) {                                                                               \
      case KI_ADD: KI_ELEM_LOOP(A, LD, ST, a + b) break;                                        \
      case KI_MUL: KI_ELEM_LOOP(A, LD, ST, a * b) break;                                        \
      case KI_MAX: KI_ELEM_LOOP(A, LD, ST, isnan(b) ? b : (a < b ? b : a)) break;               \
      case KI_MIN: KI_ELEM_LOOP(A, LD, ST, isnan(b) ? b : (b < a ? b : a)) break;               \
      case KI_ADD_ALPHA: KI_ELEM_LOOP(A, LD, ST, a + al * b) break;                             \
      case KI_ADD_SCALED: {                                                                     \
        const A alr = RND(al);                                                                  \
        KI_ELEM_LOOP(A, LD, ST, a + RND(b * alr)) break;                                        \
      }                                                                                         \
      default: break;                                                                           \
    }                                                                                           \
  }

static inline float rnd_f32(float v) { return v; }
static inline double rnd_f64(double v) { return v; }
static inline float rnd_f16(float v) { return kiln_f16_to_f32(kiln_f32_to_f16(v)); }
static inline float rnd_bf16(float v) { return kiln_bf16_to_f32(kiln_f32_to_bf16(v)); }
#define RND rnd_f32
KI_FLOAT_COMBINE(comb_f32, float, ld_f32, st_f32)
#undef RND
#define RND rnd_f64
KI_FLOAT_COMBINE(comb_f64, double, ld_f64, st_f64)
#undef RND
#define RND rnd_f16
KI_FLOAT_COMBINE(comb_f16, float, ld_f16, st_f16)
#undef RND
#define RND rnd_bf16
KI_FLOAT_COMBINE(comb_bf16, float, ld_bf16, st_bf16)
#undef RND

#define KI_INT_LDST(T, SUF)                                                            \
  static inline int64_t ld_##SUF(const char* p) { T v; memcpy(&v, p, sizeof v); return v; } \
  static inline void st_##SUF(char* p, int64_t v) { T t = (T)v; memcpy(p, &t, sizeof t); }
KI_INT_LDST(int8_t, i8)
KI_INT_LDST(int16_t, i16)
KI_INT_LDST(int32_t, i32)
KI_INT_LDST(int64_t, i64)
KI_INT_LDST(uint8_t, u8)

#define KI_WRAP(x) ((int64_t)(uint64_t)(x))
#define KI_INT_COMBINE(NAME, LD, ST)                                                             \
  static void NAME(ki_op_t op, char* dst, const int64_t* doff, int64_t ds, const char* src,     \
                   int64_t ss, int64_t n, double alpha) {                                      \
    const int64_t al = d2i64(alpha);                                                            \
    switch (op) {                                                                               \
      case KI_ADD: KI_ELEM_LOOP(int64_t, LD, ST, KI_WRAP((uint64_t)a + (uint64_t)b)) break;     \
      case KI_MUL: KI_ELEM_LOOP(int64_t, LD, ST, KI_WRAP((uint64_t)a * (uint64_t)b)) break;     \
      case KI_MAX: KI_ELEM_LOOP(int64_t, LD, ST, a < b ? b : a) break;                          \
      case KI_MIN: KI_ELEM_LOOP(int64_t, LD, ST, b < a ? b : a) break;                          \
      case KI_ADD_ALPHA:                                                                        \
      case KI_ADD_SCALED:                                                                       \
        KI_ELEM_LOOP(int64_t, LD, ST, KI_WRAP((uint64_t)a + (uint64_t)al * (uint64_t)b)) break; \
      default: break;                                                                           \
    }                                                                                           \
  }
KI_INT_COMBINE(comb_i8, ld_i8, st_i8)
KI_INT_COMBINE(comb_i16, ld_i16, st_i16)
KI_INT_COMBINE(comb_i32, ld_i32, st_i32)
KI_INT_COMBINE(comb_i64, ld_i64, st_i64)
KI_INT_COMBINE(comb_u8, ld_u8, st_u8)

static inline int64_t ld_b(const char* p) { return *(const uint8_t*)p != 0; }
static inline void st_b(char* p, int64_t v) { *(uint8_t*)p = v != 0; }

static void comb_bool(ki_op_t op, char* dst, const int64_t* doff, int64_t ds, const char* src,
                      int64_t ss, int64_t n, double alpha) {
  const int64_t al = alpha != 0;
  switch (op) {
    case KI_ADD: case KI_MAX: KI_ELEM_LOOP(int64_t, ld_b, st_b, a | b) break;
    case KI_MUL: case KI_MIN: KI_ELEM_LOOP(int64_t, ld_b, st_b, a & b) break;
    case KI_ADD_ALPHA: case KI_ADD_SCALED: KI_ELEM_LOOP(int64_t, ld_b, st_b, a | (al & b)) break;
    default: break;
  }
}

/* Typed element-wise combine (set/add/mul/max/min/add-alpha) with torch rounding. */
void kiln_idx_combine(kiln_dtype_t dt, ki_op_t op, char* dst, const int64_t* doff, int64_t ds,
                      const char* src, int64_t ss, int64_t n, double alpha) {
  if (op == KI_SET) {
    const size_t es = kiln_dtype_size(dt);
    if (!doff) {
      ki_copy_n(dst, ds, src, ss, n, es);
      return;
    }
    for (int64_t k = 0; k < n; k++) memcpy(dst + doff[k], src + k * ss, es);
    return;
  }
  switch (dt) {
    case KILN_DTYPE_F32: comb_f32(op, dst, doff, ds, src, ss, n, alpha); break;
    case KILN_DTYPE_F64: comb_f64(op, dst, doff, ds, src, ss, n, alpha); break;
    case KILN_DTYPE_F16: comb_f16(op, dst, doff, ds, src, ss, n, alpha); break;
    case KILN_DTYPE_BF16: comb_bf16(op, dst, doff, ds, src, ss, n, alpha); break;
    case KILN_DTYPE_I8: comb_i8(op, dst, doff, ds, src, ss, n, alpha); break;
    case KILN_DTYPE_I16: comb_i16(op, dst, doff, ds, src, ss, n, alpha); break;
    case KILN_DTYPE_I32: comb_i32(op, dst, doff, ds, src, ss, n, alpha); break;
    case KILN_DTYPE_I64: comb_i64(op, dst, doff, ds, src, ss, n, alpha); break;
    case KILN_DTYPE_U8: comb_u8(op, dst, doff, ds, src, ss, n, alpha); break;
    default: comb_bool(op, dst, doff, ds, src, ss, n, alpha); break;
  }
}

static int64_t floor_div(int64_t a, int64_t c) {
  int64_t q = a / c;
  if (a % c != 0 && ((a < 0) != (c < 0))) q--;
  return q;
}

/* Divides one element by a count (floor division for integers). */
void kiln_idx_div_count(kiln_dtype_t dt, char* p, int64_t count) {
  switch (dt) {
    case KILN_DTYPE_F32: st_f32(p, ld_f32(p) / (float)count); break;
    case KILN_DTYPE_F64: st_f64(p, ld_f64(p) / (double)count); break;
    case KILN_DTYPE_F16:
      st_f16(p, ld_f16(p) / kiln_f16_to_f32(kiln_f32_to_f16((float)count)));
      break;
    case KILN_DTYPE_BF16:
      st_bf16(p, ld_bf16(p) / kiln_bf16_to_f32(kiln_f32_to_bf16((float)count)));
      break;
    case KILN_DTYPE_I8: st_i8(p, floor_div(ld_i8(p), count)); break;
    case KILN_DTYPE_I16: st_i16(p, floor_div(ld_i16(p), count)); break;
    case KILN_DTYPE_I32: st_i32(p, floor_div(ld_i32(p), count)); break;
    case KILN_DTYPE_I64: st_i64(p, floor_div(ld_i64(p), count)); break;
    case KILN_DTYPE_U8: st_u8(p, floor_div(ld_u8(p), count)); break;
    default: break;
  }
}

/* The reduction identity of op in dtype dt. */
void kiln_idx_identity(kiln_dtype_t dt, ki_op_t op, void* out) {
  memset(out, 0, 8);
  char* p = out;
  if (op == KI_MUL) {
    kiln_idx_scalar_bytes(dt, 1.0, out);
    return;
  }
  if (op != KI_MAX && op != KI_MIN) return;
  const int mx = op == KI_MAX; /* identity of max is the lowest value */
  switch (dt) {
    case KILN_DTYPE_F32: st_f32(p, mx ? -INFINITY : INFINITY); break;
    case KILN_DTYPE_F64: st_f64(p, mx ? -INFINITY : INFINITY); break;
    case KILN_DTYPE_F16: st_f16(p, mx ? -INFINITY : INFINITY); break;
    case KILN_DTYPE_BF16: st_bf16(p, mx ? -INFINITY : INFINITY); break;
    case KILN_DTYPE_I8: st_i8(p, mx ? INT8_MIN : INT8_MAX); break;
    case KILN_DTYPE_I16: st_i16(p, mx ? INT16_MIN : INT16_MAX); break;
    case KILN_DTYPE_I32: st_i32(p, mx ? INT32_MIN : INT32_MAX); break;
    case KILN_DTYPE_I64: st_i64(p, mx ? INT64_MIN : INT64_MAX); break;
    case KILN_DTYPE_U8: st_u8(p, mx ? 0 : UINT8_MAX); break;
    default: st_b(p, !mx); break;
  }
}

/* Makes a contiguous f32 copy of src (stack for small tensors). */
kiln_status_t kiln_idx_shadow_init(ki_shadow_t* s, const kiln_tensor_t* src, const char* op) {
  memset(&s->t, 0, sizeof s->t);
  s->heap = NULL;
  if (!src) return KILN_OK;
  const int64_t n = kiln_tensor_numel(src);
  float* buf = s->stack;
  if (n > (int64_t)(sizeof s->stack / sizeof s->stack[0])) {
    s->heap = kiln_allocator_alloc(NULL, sizeof(float) * (size_t)n, 64);
    if (!s->heap)
      return kiln_error(KILN_ERROR_OUT_OF_MEMORY,
                        "%s: cannot allocate an f32 copy of %lld elements", op, (long long)n);
    buf = s->heap;
  }
  KILN_RETURN_IF_ERROR(
      kiln_tensor_init_contiguous(&s->t, buf, KILN_DTYPE_F32, src->ndim, src->shape));
  return kiln_kernel_copy(src, &s->t);
}

/* Releases a shadow's heap buffer, if any. */
void kiln_idx_shadow_free(ki_shadow_t* s) {
  kiln_allocator_free(NULL, s->heap);
  s->heap = NULL;
}
