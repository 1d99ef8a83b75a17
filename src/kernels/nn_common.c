/* SPDX-License-Identifier: Apache-2.0 */
/* nn_common.c - shared machinery of the nn kernels: ISA dispatch, the generic (portable C) row
 * and block primitives, row views, conversions, per-call scratch and argument checks. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/half.h"
#include "kernels/nn_internal.h"
#include "kiln/allocator.h"
#include "kiln/parallel.h"
#include "runtime/checked.h"

/* ---- dispatch ------------------------------------------------------------------------------- */

static int g_nn_isa = -1; /* -1 unknown, 0 generic, 1 avx2, 2 avx2 + avx512 */
static int g_nn_forced;   /* kiln_nn_force_generic: 0 auto, 1 generic, 2 at most AVX2 */

#if defined(__x86_64__) || defined(__i386__)
/* The AVX2 table with the AVX-512F attention primitives over it (filled before g_nn_isa
 * publishes 2, so readers of 2 see it complete). */
static kiln_nn_ops_t g_nn_avx512;
#endif

static int detect(void) {
#if defined(__x86_64__) || defined(__i386__)
  const char* env = getenv("KILN_DISABLE_AVX2");
  if (env != NULL && env[0] != '\0' && env[0] != '0') return 0;
  __builtin_cpu_init();
  /* Every AVX2+FMA CPU also has F16C (and clang's builtin does not know "f16c"). */
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) return 0;
#if defined(__x86_64__)
  if (__builtin_cpu_supports("avx512f")) {
    kiln_nn_ops_t t = kiln_nn_ops_avx2;
    t.gemm = kiln_nn_avx512_gemm;
    t.exp_sum = kiln_nn_avx512_exp_sum;
    t.max = kiln_nn_avx512_max;
    t.log_softmax_bwd = kiln_nn_avx512_log_softmax_bwd;
    t.softmax_bwd = kiln_nn_avx512_softmax_bwd;
    g_nn_avx512 = t;
    return 2;
  }
#endif
  return 1;
#else
  return 0;
#endif
}

/* Once per process: the first calls may come from several threads at once, and the AVX-512
 * table must be written by one of them only. */
static pthread_once_t g_nn_once = PTHREAD_ONCE_INIT;
static void detect_once(void) { __atomic_store_n(&g_nn_isa, detect(), __ATOMIC_RELEASE); }

const kiln_nn_ops_t* kiln_nn_ops(void) {
  const int forced = __atomic_load_n(&g_nn_forced, __ATOMIC_RELAXED);
  if (forced == 1) return &kiln_nn_ops_generic;
  int v = __atomic_load_n(&g_nn_isa, __ATOMIC_ACQUIRE);
  if (v < 0) {
    pthread_once(&g_nn_once, detect_once);
    v = __atomic_load_n(&g_nn_isa, __ATOMIC_ACQUIRE);
  }
#if defined(__x86_64__) || defined(__i386__)
  if (v == 2 && forced == 0) return &g_nn_avx512;
  return v ? &kiln_nn_ops_avx2 : &kiln_nn_ops_generic;
#else
  return &kiln_nn_ops_generic;
#endif
}

void kiln_nn_force_generic(int on) {
  __atomic_store_n(&g_nn_forced, on == 1 || on == 2 ? on : 0, __ATOMIC_RELAXED);
}

/* ---- scalar access -------------------------------------------------------------------------- */

double kiln_nn_get(const void* p, kiln_dtype_t dt) {
  switch (dt) {
    case KILN_DTYPE_F32: return *(const float*)p;
    case KILN_DTYPE_F16: return kiln_f16_to_f32(*(const uint16_t*)p);
    case KILN_DTYPE_BF16: return kiln_bf16_to_f32(*(const uint16_t*)p);
    case KILN_DTYPE_F64: return *(const double*)p;
    case KILN_DTYPE_I8: return *(const int8_t*)p;
    case KILN_DTYPE_I16: return *(const int16_t*)p;
    case KILN_DTYPE_I32: return *(const int32_t*)p;
    case KILN_DTYPE_I64: return (double)*(const int64_t*)p;
    case KILN_DTYPE_U8: return *(const uint8_t*)p;
    case KILN_DTYPE_BOOL: return *(const uint8_t*)p != 0;
    default: return 0.0;
  }
}

float kiln_nn_getf(const void* p, kiln_dtype_t dt) {
  switch (dt) {
    case KILN_DTYPE_F32: return *(const float*)p;
    case KILN_DTYPE_F16: return kiln_f16_to_f32(*(const uint16_t*)p);
    case KILN_DTYPE_BF16: return kiln_bf16_to_f32(*(const uint16_t*)p);
    default: return (float)kiln_nn_get(p, dt);
  }
}

void kiln_nn_setf(void* p, kiln_dtype_t dt, float v) {
  switch (dt) {
    case KILN_DTYPE_F32: *(float*)p = v; break;
    case KILN_DTYPE_F16: *(uint16_t*)p = kiln_f32_to_f16(v); break;
    case KILN_DTYPE_BF16: *(uint16_t*)p = kiln_f32_to_bf16(v); break;
    case KILN_DTYPE_F64: *(double*)p = v; break;
    default: break; /* callers only pass floating dtypes */
  }
}

void kiln_nn_set(void* p, kiln_dtype_t dt, double v) {
  if (dt == KILN_DTYPE_F64)
    *(double*)p = v;
  else
    kiln_nn_setf(p, dt, (float)v);
}

void kiln_nn_load_strided(const void* src, kiln_dtype_t dt, int64_t stride, int64_t n,
                          float* dst) {
  const char* s = src;
  const int64_t bs = stride * (int64_t)kiln_dtype_size(dt);
  if (stride == 1 && (dt == KILN_DTYPE_F32 || dt == KILN_DTYPE_F16 || dt == KILN_DTYPE_BF16)) {
    kiln_nn_ops()->load(src, dt, n, dst);
    return;
  }
  switch (dt) {
    case KILN_DTYPE_F32:
      for (int64_t i = 0; i < n; i++) dst[i] = *(const float*)(s + i * bs);
      break;
    case KILN_DTYPE_F16:
      for (int64_t i = 0; i < n; i++) dst[i] = kiln_f16_to_f32(*(const uint16_t*)(s + i * bs));
      break;
    case KILN_DTYPE_BF16:
      for (int64_t i = 0; i < n; i++) dst[i] = kiln_bf16_to_f32(*(const uint16_t*)(s + i * bs));
      break;
    default:
      for (int64_t i = 0; i < n; i++) dst[i] = (float)kiln_nn_get(s + i * bs, dt);
      break;
  }
}

void kiln_nn_store_strided(const float* src, int64_t n, kiln_dtype_t dt, void* dst,
                           int64_t stride) {
  char* d = dst;
  const int64_t bs = stride * (int64_t)kiln_dtype_size(dt);
  if (stride == 1 && (dt == KILN_DTYPE_F32 || dt == KILN_DTYPE_F16 || dt == KILN_DTYPE_BF16)) {
    kiln_nn_ops()->store(src, n, dt, dst);
    return;
  }
  for (int64_t i = 0; i < n; i++) kiln_nn_setf(d + i * bs, dt, src[i]);
}

/* ---- views ---------------------------------------------------------------------------------- */

void kiln_nn_view_init(kiln_nn_view_t* v, const kiln_tensor_t* t, uint32_t inner_mask) {
  memset(v, 0, sizeof(*v));
  v->base = t->data;
  v->dtype = t->dtype;
  v->esize = (int64_t)kiln_dtype_size(t->dtype);
  v->rows = 1;
  v->n = 1;
  for (int d = 0; d < t->ndim; d++) {
    if (inner_mask & (1u << d)) {
      v->ishape[v->ind] = t->shape[d];
      v->istride[v->ind++] = t->strides[d];
      v->n *= t->shape[d];
    } else {
      v->oshape[v->ond] = t->shape[d];
      v->ostride[v->ond++] = t->strides[d];
      v->rows *= t->shape[d];
    }
  }
  int linear = 1, first = 1;
  int64_t step = 1, expect = 0;
  for (int d = v->ind - 1; d >= 0; d--) {
    if (v->ishape[d] == 1) continue;
    if (first) {
      step = v->istride[d];
      expect = step * v->ishape[d];
      first = 0;
    } else if (v->istride[d] != expect) {
      linear = 0;
      break;
    } else {
      expect *= v->ishape[d];
    }
  }
  v->linear = linear;
  v->step = linear ? step : 0;
  v->unit = linear && step == 1;
}

int64_t kiln_nn_view_row(const kiln_nn_view_t* v, int64_t row) {
  int64_t off = 0;
  for (int d = v->ond - 1; d >= 0; d--) {
    const int64_t s = v->oshape[d];
    if (s == 1) continue;
    off += (row % s) * v->ostride[d];
    row /= s;
  }
  return off;
}

int64_t kiln_nn_view_elem(const kiln_nn_view_t* v, int64_t t) {
  if (v->linear) return t * v->step;
  int64_t off = 0;
  for (int d = v->ind - 1; d >= 0; d--) {
    const int64_t s = v->ishape[d];
    if (s == 1) continue;
    off += (t % s) * v->istride[d];
    t /= s;
  }
  return off;
}

const float* kiln_nn_row_in(const kiln_nn_view_t* v, int64_t row, int64_t c0, int64_t c1,
                            float* buf) {
  const int64_t r = kiln_nn_view_row(v, row);
  if (v->linear) {
    const char* p = v->base + (r + c0 * v->step) * v->esize;
    if (v->unit && v->dtype == KILN_DTYPE_F32) return (const float*)p;
    kiln_nn_load_strided(p, v->dtype, v->step, c1 - c0, buf);
    return buf;
  }
  for (int64_t t = c0; t < c1; t++)
    buf[t - c0] = kiln_nn_getf(v->base + (r + kiln_nn_view_elem(v, t)) * v->esize, v->dtype);
  return buf;
}

float* kiln_nn_row_out(const kiln_nn_view_t* v, int64_t row, int64_t c0, float* buf) {
  if (v->unit && v->dtype == KILN_DTYPE_F32)
    return (float*)(v->base + (kiln_nn_view_row(v, row) + c0) * v->esize);
  return buf;
}

void kiln_nn_row_commit(const kiln_nn_view_t* v, int64_t row, int64_t c0, int64_t c1,
                        const float* p) {
  const int64_t r = kiln_nn_view_row(v, row);
  if (v->linear) {
    char* d = v->base + (r + c0 * v->step) * v->esize;
    if ((const char*)p == d) return;
    kiln_nn_store_strided(p, c1 - c0, v->dtype, d, v->step);
    return;
  }
  for (int64_t t = c0; t < c1; t++)
    kiln_nn_setf(v->base + (r + kiln_nn_view_elem(v, t)) * v->esize, v->dtype, p[t - c0]);
}

void kiln_nn_row_in_f64(const kiln_nn_view_t* v, int64_t row, double* dst) {
  const int64_t r = kiln_nn_view_row(v, row);
  for (int64_t t = 0; t < v->n; t++)
    dst[t] = kiln_nn_get(v->base + (r + kiln_nn_view_elem(v, t)) * v->esize, v->dtype);
}

void kiln_nn_row_out_f64(const kiln_nn_view_t* v, int64_t row, const double* src) {
  const int64_t r = kiln_nn_view_row(v, row);
  for (int64_t t = 0; t < v->n; t++)
    kiln_nn_set(v->base + (r + kiln_nn_view_elem(v, t)) * v->esize, v->dtype, src[t]);
}

void kiln_nn_zero(kiln_tensor_t* t) {
  if (kiln_tensor_numel(t) == 0) return;
  kiln_nn_view_t v;
  kiln_nn_view_init(&v, t, t->ndim ? 1u << (t->ndim - 1) : 0u);
  for (int64_t r = 0; r < v.rows; r++) {
    char* p = v.base + kiln_nn_view_row(&v, r) * v.esize;
    if (v.unit) {
      memset(p, 0, (size_t)(v.n * v.esize));
    } else {
      for (int64_t i = 0; i < v.n; i++) memset(p + i * v.step * v.esize, 0, (size_t)v.esize);
    }
  }
}

/* ---- scratch -------------------------------------------------------------------------------- */

/* Scratch blocks are reused across calls: a few freed blocks are kept (reachable from this
 * table, so nothing leaks) and handed to the next call that fits, so steady-state calls do not
 * allocate. Blocks above NN_CACHE_MAX are freed instead of kept. */
#define NN_CACHE_SLOTS 8
#define NN_CACHE_MAX ((size_t)64 << 20)

static pthread_mutex_t g_cache_mu = PTHREAD_MUTEX_INITIALIZER;
static struct {
  void* p;
  size_t cap;
} g_cache[NN_CACHE_SLOTS];

static void* cache_acquire(size_t bytes, size_t* cap) {
  pthread_mutex_lock(&g_cache_mu);
  int best = -1;
  for (int i = 0; i < NN_CACHE_SLOTS; i++)
    if (g_cache[i].p != NULL && g_cache[i].cap >= bytes &&
        (best < 0 || g_cache[i].cap < g_cache[best].cap))
      best = i;
  if (best >= 0) {
    void* p = g_cache[best].p;
    *cap = g_cache[best].cap;
    g_cache[best].p = NULL;
    pthread_mutex_unlock(&g_cache_mu);
    return p;
  }
  pthread_mutex_unlock(&g_cache_mu);
  *cap = bytes;
  return kiln_allocator_alloc(NULL, bytes, 64);
}

static void cache_release(void* p, size_t cap) {
  if (p == NULL) return;
  if (cap > NN_CACHE_MAX) {
    kiln_allocator_free(NULL, p);
    return;
  }
  pthread_mutex_lock(&g_cache_mu);
  int slot = -1;
  for (int i = 0; i < NN_CACHE_SLOTS && slot < 0; i++)
    if (g_cache[i].p == NULL) slot = i;
  if (slot < 0) { /* full: evict the smallest block if it is smaller than this one */
    slot = 0;
    for (int i = 1; i < NN_CACHE_SLOTS; i++)
      if (g_cache[i].cap < g_cache[slot].cap) slot = i;
    if (g_cache[slot].cap >= cap) {
      pthread_mutex_unlock(&g_cache_mu);
      kiln_allocator_free(NULL, p);
      return;
    }
    kiln_allocator_free(NULL, g_cache[slot].p);
  }
  g_cache[slot].p = p;
  g_cache[slot].cap = cap;
  pthread_mutex_unlock(&g_cache_mu);
}

kiln_status_t kiln_nn_scratch_init(kiln_nn_scratch_t* s, size_t per_thread, const char* op) {
  s->heap = NULL;
  s->cap = 0;
  s->per_thread = kiln_nn_align(per_thread);
  s->nthreads = 0;
  if (s->per_thread <= KILN_NN_STACK_BYTES) return KILN_OK;
  s->nthreads = kiln_threadpool_size(kiln_threadpool_default());
  if (s->nthreads < 1) s->nthreads = 1;
  s->heap = cache_acquire(s->per_thread * (size_t)s->nthreads, &s->cap);
  if (s->heap == NULL)
    return kiln_error(KILN_ERROR_OUT_OF_MEMORY, "%s: cannot allocate %zu bytes of scratch", op,
                      s->per_thread * (size_t)s->nthreads);
  return KILN_OK;
}

void* kiln_nn_scratch_get(const kiln_nn_scratch_t* s, int tid, void* stack) {
  if (s->heap == NULL) return stack;
  KILN_ASSERT(tid >= 0 && tid < s->nthreads);
  return s->heap + (size_t)tid * s->per_thread;
}

void kiln_nn_scratch_free(kiln_nn_scratch_t* s) {
  cache_release(s->heap, s->cap);
  s->heap = NULL;
}

int64_t kiln_nn_grain(int64_t work_per_item) {
  if (work_per_item < 1) work_per_item = 1;
  const int64_t g = 32768 / work_per_item;
  return g < 1 ? 1 : g;
}

/* ---- checks --------------------------------------------------------------------------------- */

const char* kiln_nn_shape_str(const kiln_tensor_t* t, char* buf, size_t size) {
  if (t == NULL) {
    snprintf(buf, size, "(null)");
    return buf;
  }
  size_t pos = 0;
  pos += (size_t)snprintf(buf + pos, size - pos, "[");
  for (int d = 0; d < t->ndim && d < KILN_MAX_DIMS && pos < size; d++)
    pos += (size_t)snprintf(buf + pos, size - pos, d ? ", %lld" : "%lld", (long long)t->shape[d]);
  if (pos < size) snprintf(buf + pos, size - pos, "]");
  return buf;
}

kiln_status_t kiln_nn_check(const kiln_tensor_t* t, const char* op, const char* name) {
  if (t == NULL) return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s: %s is NULL", op, name);
  if (t->ndim < 0 || t->ndim > KILN_MAX_DIMS)
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s: %s has rank %d (max %d)", op, name,
                      (int)t->ndim, KILN_MAX_DIMS);
  if ((int)t->dtype < 0 || t->dtype >= KILN_DTYPE_COUNT)
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s: %s has an invalid dtype %d", op, name,
                      (int)t->dtype);
  for (int d = 0; d < t->ndim; d++)
    if (t->shape[d] < 0)
      return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s: %s has a negative size at dim %d", op,
                        name, d);
  if (!kiln_tensor_size_ok(t))
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT,
                      "%s: %s is too large (limit 2^48 elements) or strided beyond int64", op,
                      name);
  if (t->data == NULL && kiln_tensor_numel(t) > 0)
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s: %s has NULL data", op, name);
  return KILN_OK;
}

kiln_status_t kiln_nn_check_float(const kiln_tensor_t* t, const char* op, const char* name) {
  KILN_RETURN_IF_ERROR(kiln_nn_check(t, op, name));
  if (!kiln_dtype_is_float(t->dtype))
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s: %s must be floating, got %s", op, name,
                      kiln_dtype_name(t->dtype));
  return KILN_OK;
}

int kiln_nn_same_shape(const kiln_tensor_t* a, const kiln_tensor_t* b) {
  if (a->ndim != b->ndim) return 0;
  for (int d = 0; d < a->ndim; d++)
    if (a->shape[d] != b->shape[d]) return 0;
  return 1;
}

kiln_status_t kiln_nn_shape_error(const char* op, const char* an, const kiln_tensor_t* a,
                                  const char* bn, const kiln_tensor_t* b, const char* what) {
  char sa[128], sb[128];
  return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s: %s %s and %s %s %s", op, an,
                    kiln_nn_shape_str(a, sa, sizeof sa), bn, kiln_nn_shape_str(b, sb, sizeof sb),
                    what);
}

int kiln_nn_dim(int dim, int ndim) {
  const int n = ndim > 0 ? ndim : 1;
  if (dim < -n || dim >= n) return -1;
  return dim < 0 ? dim + n : dim;
}

/* ---- generic primitives --------------------------------------------------------------------- */

static void g_load(const void* src, kiln_dtype_t dt, int64_t n, float* dst) {
  if (dt == KILN_DTYPE_F32) {
    if ((const void*)dst != src) memmove(dst, src, sizeof(float) * (size_t)n);
  } else if (dt == KILN_DTYPE_F16) {
    for (int64_t i = 0; i < n; i++) dst[i] = kiln_f16_to_f32(((const uint16_t*)src)[i]);
  } else {
    for (int64_t i = 0; i < n; i++) dst[i] = kiln_bf16_to_f32(((const uint16_t*)src)[i]);
  }
}

static void g_store(const float* src, int64_t n, kiln_dtype_t dt, void* dst) {
  if (dt == KILN_DTYPE_F32) {
    if ((const void*)src != dst) memmove(dst, src, sizeof(float) * (size_t)n);
  } else if (dt == KILN_DTYPE_F16) {
    for (int64_t i = 0; i < n; i++) ((uint16_t*)dst)[i] = kiln_f32_to_f16(src[i]);
  } else {
    for (int64_t i = 0; i < n; i++) ((uint16_t*)dst)[i] = kiln_f32_to_bf16(src[i]);
  }
}

static float g_max(const float* x, int64_t n) {
  float m = -INFINITY;
  for (int64_t i = 0; i < n; i++) m = x[i] > m ? x[i] : m;
  return m;
}

static float g_exp_sum(const float* x, float shift, float* y, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; i++) {
    const float e = expf(x[i] - shift);
    if (y) y[i] = e;
    s += e;
  }
  return (float)s;
}

static void g_affine(const float* x, float s, float t, float* y, int64_t n) {
  for (int64_t i = 0; i < n; i++) y[i] = x[i] * s + t;
}

static float g_dot(const float* a, const float* b, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; i++) s += (double)a[i] * b[i];
  return (float)s;
}

static void g_add(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; i++) y[i] += x[i];
}

static float g_sum(const float* x, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; i++) s += x[i];
  return (float)s;
}

static void g_softmax_bwd(const float* g, const float* y, float s, float* gi, int64_t n) {
  for (int64_t i = 0; i < n; i++) gi[i] = y[i] * (g[i] - s);
}

static void g_log_softmax_bwd(const float* g, const float* y, float s, float* gi, int64_t n) {
  for (int64_t i = 0; i < n; i++) gi[i] = g[i] - expf(y[i]) * s;
}

static void g_moments(const float* x, int64_t n, float* mean, float* var) {
  double s = 0;
  for (int64_t i = 0; i < n; i++) s += x[i];
  const float m = (float)(s / (double)n);
  double q = 0;
  for (int64_t i = 0; i < n; i++) {
    const float d = x[i] - m;
    q += (double)d * d;
  }
  *mean = m;
  *var = (float)(q / (double)n);
}

static float g_sumsq(const float* x, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; i++) s += (double)x[i] * x[i];
  return (float)s;
}

static void g_norm_apply(const float* x, int64_t n, float mean, float rstd, const float* w,
                         const float* b, float* y) {
  for (int64_t i = 0; i < n; i++) {
    float v = (x[i] - mean) * rstd;
    if (w) v *= w[i];
    if (b) v += b[i];
    y[i] = v;
  }
}

static void g_norm_bwd_sums(const float* g, const float* x, const float* w, int64_t n, float mean,
                            float rstd, float* s1, float* s2) {
  double a = 0, b = 0;
  for (int64_t i = 0; i < n; i++) {
    const float gw = w ? g[i] * w[i] : g[i];
    a += gw;
    b += (double)gw * ((x[i] - mean) * rstd);
  }
  *s1 = (float)a;
  *s2 = (float)b;
}

static void g_norm_bwd_apply(const float* g, const float* x, const float* w, int64_t n,
                             float mean, float rstd, float a, float b, float* dx) {
  for (int64_t i = 0; i < n; i++) {
    const float gw = w ? g[i] * w[i] : g[i];
    const float xh = (x[i] - mean) * rstd;
    dx[i] = rstd * (gw - a - xh * b);
  }
}

static void g_norm_wgrad_acc(const float* g, const float* x, int64_t n, float mean, float rstd,
                             float* aw, float* ab) {
  for (int64_t i = 0; i < n; i++) aw[i] += g[i] * ((x[i] - mean) * rstd);
  if (ab)
    for (int64_t i = 0; i < n; i++) ab[i] += g[i];
}

static void g_transpose(int64_t rows, int64_t cols, const float* src, int64_t lds, float* dst,
                        int64_t ldd) {
  for (int64_t r = 0; r < rows; r++)
    for (int64_t c = 0; c < cols; c++) dst[c * ldd + r] = src[r * lds + c];
}

static void g_gemm(int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t rs_a,
                   int64_t cs_a, const float* b, int64_t ldb, float* c, int64_t ldc, int acc) {
  float row[256];
  for (int64_t i = 0; i < m; i++) {
    float* cr = c + i * ldc;
    for (int64_t j0 = 0; j0 < n; j0 += 256) {
      const int64_t w = n - j0 < 256 ? n - j0 : 256;
      memset(row, 0, sizeof(float) * (size_t)w);
      for (int64_t p = 0; p < k; p++) {
        const float av = a[i * rs_a + p * cs_a];
        const float* br = b + p * ldb + j0;
        for (int64_t j = 0; j < w; j++) row[j] += av * br[j];
      }
      for (int64_t j = 0; j < w; j++) cr[j0 + j] = alpha * row[j] + (acc ? cr[j0 + j] : 0.0f);
    }
  }
}

const kiln_nn_ops_t kiln_nn_ops_generic = {
    .load = g_load,
    .store = g_store,
    .max = g_max,
    .exp_sum = g_exp_sum,
    .affine = g_affine,
    .dot = g_dot,
    .add = g_add,
    .sum = g_sum,
    .softmax_bwd = g_softmax_bwd,
    .log_softmax_bwd = g_log_softmax_bwd,
    .moments = g_moments,
    .sumsq = g_sumsq,
    .norm_apply = g_norm_apply,
    .norm_bwd_sums = g_norm_bwd_sums,
    .norm_bwd_apply = g_norm_bwd_apply,
    .norm_wgrad_acc = g_norm_wgrad_acc,
    .transpose = g_transpose,
    .gemm = g_gemm,
};
