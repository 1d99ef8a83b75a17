/* SPDX-License-Identifier: Apache-2.0 */
/* random.c - Philox4x32-10 random kernels: uniform, normal, exponential, bernoulli, random_int,
 * randperm, dropout.
 *
 * Work is split over element groups (one Philox block each, see kiln/kernels/random.h), so a
 * value depends only on (seed, offset, logical index). Outputs and inputs are walked in logical
 * row-major order with a small strided cursor; when every operand is contiguous the cursor is
 * skipped. Nothing is allocated. */
#include <math.h>
#include <stdatomic.h>
#include <string.h>

#include "kernels/half.h"
#include "kiln/kernels/random.h"
#include "kiln/parallel.h"
#include "runtime/checked.h"

#define PH_M0 0xD2511F53u
#define PH_M1 0xCD9E8D57u
#define PH_W0 0x9E3779B9u
#define PH_W1 0xBB67AE85u
#define RNG_GRAIN_ELEMS 16384 /* elements per parallel chunk, at least */
#define RNG_MAX_OPS 3

static const double k2pow32inv = 1.0 / 4294967296.0;
static const double k2pow53inv = 1.0 / 9007199254740992.0;
static const double k2pow24inv = 1.0 / 16777216.0;
static const double kTwoPi = 6.283185307179586476925286766559;

static inline void philox(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]) {
  uint32_t c0 = ctr[0], c1 = ctr[1], c2 = ctr[2], c3 = ctr[3];
  uint32_t k0 = key[0], k1 = key[1];
  for (int r = 0; r < 10; r++) {
    if (r) {
      k0 += PH_W0;
      k1 += PH_W1;
    }
    const uint64_t p0 = (uint64_t)PH_M0 * c0;
    const uint64_t p1 = (uint64_t)PH_M1 * c2;
    const uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0;
    const uint32_t n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
    c1 = (uint32_t)p1;
    c3 = (uint32_t)p0;
    c0 = n0;
    c2 = n2;
  }
  out[0] = c0;
  out[1] = c1;
  out[2] = c2;
  out[3] = c3;
}

/* Philox4x32-10 block; see random.h. */
void kiln_philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]) {
  philox(ctr, key, out);
}

/* High 64 bits of a * b. */
static inline uint64_t mulhi64(uint64_t a, uint64_t b) {
#if defined(__SIZEOF_INT128__)
  __extension__ typedef unsigned __int128 u128;
  return (uint64_t)(((u128)a * b) >> 64);
#else
  const uint64_t a0 = (uint32_t)a, a1 = a >> 32, b0 = (uint32_t)b, b1 = b >> 32;
  const uint64_t t = a1 * b0 + ((a0 * b0) >> 32);
  const uint64_t w1 = (uint32_t)t + a0 * b1;
  return a1 * b1 + (t >> 32) + (w1 >> 32);
#endif
}

static inline uint64_t lane64(const uint32_t r[4], int l) {
  return (uint64_t)r[2 * l] | ((uint64_t)r[2 * l + 1] << 32);
}

/* ---- scalar element access -------------------------------------------------------------- */

static inline double load_d(const char* p, kiln_dtype_t dt) {
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
    default: return *(const uint8_t*)p != 0;
  }
}

static inline float load_f(const char* p, kiln_dtype_t dt) {
  switch (dt) {
    case KILN_DTYPE_F32: return *(const float*)p;
    case KILN_DTYPE_F16: return kiln_f16_to_f32(*(const uint16_t*)p);
    case KILN_DTYPE_BF16: return kiln_bf16_to_f32(*(const uint16_t*)p);
    default: return (float)load_d(p, dt);
  }
}

static inline void store_f(char* p, kiln_dtype_t dt, float v) {
  switch (dt) {
    case KILN_DTYPE_F32: *(float*)p = v; break;
    case KILN_DTYPE_F16: *(uint16_t*)p = kiln_f32_to_f16(v); break;
    case KILN_DTYPE_BF16: *(uint16_t*)p = kiln_f32_to_bf16(v); break;
    default: *(double*)p = v; break; /* f64 */
  }
}

/* Stores an integer value (exactly representable in dt, checked by the caller). */
static inline void store_i(char* p, kiln_dtype_t dt, int64_t v) {
  switch (dt) {
    case KILN_DTYPE_F32: *(float*)p = (float)v; break;
    case KILN_DTYPE_F16: *(uint16_t*)p = kiln_f32_to_f16((float)v); break;
    case KILN_DTYPE_BF16: *(uint16_t*)p = kiln_f32_to_bf16((float)v); break;
    case KILN_DTYPE_F64: *(double*)p = (double)v; break;
    case KILN_DTYPE_I8: *(int8_t*)p = (int8_t)v; break;
    case KILN_DTYPE_I16: *(int16_t*)p = (int16_t)v; break;
    case KILN_DTYPE_I32: *(int32_t*)p = (int32_t)v; break;
    case KILN_DTYPE_I64: *(int64_t*)p = v; break;
    case KILN_DTYPE_U8: *(uint8_t*)p = (uint8_t)v; break;
    default: *(uint8_t*)p = v != 0; break;
  }
}

/* Stores a floating value into a floating dtype (rounded once; double via float for halves). */
static inline void store_d(char* p, kiln_dtype_t dt, double v) {
  dt == KILN_DTYPE_F64 ? (void)(*(double*)p = v) : store_f(p, dt, (float)v);
}

/* v rounded to dt (a floating dtype), as a double. */
static double round_to(kiln_dtype_t dt, double v) {
  switch (dt) {
    case KILN_DTYPE_F32: return (float)v;
    case KILN_DTYPE_F16: return kiln_f16_to_f32(kiln_f32_to_f16((float)v));
    case KILN_DTYPE_BF16: return kiln_bf16_to_f32(kiln_f32_to_bf16((float)v));
    default: return v;
  }
}

/* The largest value of floating dtype dt below t (t representable in dt, finite). */
static double prev_below(kiln_dtype_t dt, double t) {
  if (dt == KILN_DTYPE_F64) return nextafter(t, -INFINITY);
  if (dt == KILN_DTYPE_F32) return nextafterf((float)t, -INFINITY);
  uint16_t h = dt == KILN_DTYPE_F16 ? kiln_f32_to_f16((float)t) : kiln_f32_to_bf16((float)t);
  if ((h & 0x7fffu) == 0)
    h = 0x8001u; /* below +-0: the smallest negative subnormal */
  else if (h & 0x8000u)
    h++; /* negative: grow the magnitude */
  else
    h--;
  return dt == KILN_DTYPE_F16 ? kiln_f16_to_f32(h) : kiln_bf16_to_f32(h);
}

/* ---- jobs ----------------------------------------------------------------------------------- */

enum { K_UNIFORM, K_NORMAL, K_EXPO, K_RANDINT, K_BERN, K_BERN_T, K_DROPOUT };

typedef struct rng_job {
  int kind, E, fast, nops, nd;
  int64_t numel;
  int64_t shape[KILN_MAX_DIMS];
  int64_t strides[RNG_MAX_OPS][KILN_MAX_DIMS]; /* elements; op 0 = out, 1 = input, 2 = mask */
  char* base[RNG_MAX_OPS];
  kiln_dtype_t dt[RNG_MAX_OPS];
  int64_t es[RNG_MAX_OPS];
  uint32_t key[2], off[2];
  double a, b, lo, hi; /* uniform: from, span, from, clamp; normal: mean, std; expo: 1/lambda */
  uint64_t range;      /* random_int */
  int64_t from;
  double p;            /* bernoulli scalar / dropout keep probability */
  int keep_const;      /* dropout: -1 draw, else every element kept (1) or dropped (0) */
  int f64math;         /* dropout */
  float scalef;
  double scaled;
  atomic_int* bad; /* bernoulli tensor: set when a p is outside [0, 1] */
} rng_job_t;

typedef struct cursor {
  int64_t idx[KILN_MAX_DIMS];
  int64_t off[RNG_MAX_OPS];
} cursor_t;

static void cur_init(cursor_t* c, const rng_job_t* j, int64_t lin) {
  for (int k = 0; k < j->nops; k++) c->off[k] = 0;
  for (int d = j->nd - 1; d >= 0; d--) {
    const int64_t s = j->shape[d];
    c->idx[d] = s ? lin % s : 0;
    lin = s ? lin / s : 0;
    for (int k = 0; k < j->nops; k++) c->off[k] += c->idx[d] * j->strides[k][d];
  }
}

static inline void cur_next(cursor_t* c, const rng_job_t* j) {
  for (int d = j->nd - 1; d >= 0; d--) {
    for (int k = 0; k < j->nops; k++) c->off[k] += j->strides[k][d];
    if (++c->idx[d] < j->shape[d]) return;
    for (int k = 0; k < j->nops; k++) c->off[k] -= j->strides[k][d] * j->shape[d];
    c->idx[d] = 0;
  }
}

/* Per-block values: v[] (doubles) or iv[] (random_int) for lanes 0..E-1. */
static inline void block_values(const rng_job_t* j, const uint32_t r[4], double v[4],
                                int64_t iv[2]) {
  switch (j->kind) {
    case K_UNIFORM:
      if (j->E == 4) {
        for (int l = 0; l < 4; l++) v[l] = j->a + (double)(r[l] >> 8) * k2pow24inv * j->b;
      } else {
        for (int l = 0; l < 2; l++) v[l] = j->a + (double)(lane64(r, l) >> 11) * k2pow53inv * j->b;
      }
      break;
    case K_NORMAL:
      for (int q = 0; q < j->E / 2; q++) { /* E = 4: two pairs; E = 2: one pair */
        double u1, u2;
        if (j->E == 4) {
          u1 = ((double)r[2 * q] + 1.0) * k2pow32inv;
          u2 = (double)r[2 * q + 1] * k2pow32inv;
        } else {
          u1 = ((double)(lane64(r, 0) >> 11) + 1.0) * k2pow53inv; /* (0, 1] */
          u2 = (double)(lane64(r, 1) >> 11) * k2pow53inv;
        }
        const double rad = sqrt(-2.0 * log(u1)), th = kTwoPi * u2;
        v[2 * q] = j->a + j->b * (rad * cos(th));
        v[2 * q + 1] = j->a + j->b * (rad * sin(th));
      }
      break;
    case K_EXPO:
      if (j->E == 4) {
        for (int l = 0; l < 4; l++) v[l] = -log(((double)r[l] + 0.5) * k2pow32inv) * j->a;
      } else {
        for (int l = 0; l < 2; l++)
          v[l] = -log(((double)(lane64(r, l) >> 11) + 0.5) * k2pow53inv) * j->a;
      }
      break;
    case K_RANDINT:
      for (int l = 0; l < 2; l++)
        iv[l] = (int64_t)((uint64_t)j->from + mulhi64(lane64(r, l), j->range));
      break;
    default: /* bernoulli / dropout: u in [0, 1) with 32 bits */
      for (int l = 0; l < 4; l++) v[l] = (double)r[l] * k2pow32inv;
      break;
  }
}

static inline void element(const rng_job_t* j, int l, const double v[4], const int64_t iv[2],
                           const int64_t off[RNG_MAX_OPS]) {
  char* o = j->base[0] + off[0] * j->es[0];
  switch (j->kind) {
    case K_UNIFORM: {
      double x = round_to(j->dt[0], v[l]);
      if (x >= j->hi) x = j->hi; /* hi: the largest value below `to` (x <= to always) */
      store_d(o, j->dt[0], x);
      break;
    }
    case K_NORMAL:
    case K_EXPO: store_d(o, j->dt[0], v[l]); break;
    case K_RANDINT: store_i(o, j->dt[0], iv[l]); break;
    case K_BERN: store_i(o, j->dt[0], v[l] < j->p); break;
    case K_BERN_T: {
      const double p = load_d(j->base[1] + off[1] * j->es[1], j->dt[1]);
      if (!(p >= 0.0 && p <= 1.0)) atomic_store_explicit(j->bad, 1, memory_order_relaxed);
      store_i(o, j->dt[0], v[l] < p);
      break;
    }
    default: { /* K_DROPOUT */
      const int keep = j->keep_const >= 0 ? j->keep_const : v[l] < j->p;
      const char* x = j->base[1] + off[1] * j->es[1];
      if (j->f64math)
        store_d(o, j->dt[0], (load_d(x, j->dt[1]) * (double)keep) * j->scaled);
      else
        store_f(o, j->dt[0], (load_f(x, j->dt[1]) * (float)keep) * j->scalef);
      if (j->nops > 2) store_i(j->base[2] + off[2] * j->es[2], j->dt[2], keep);
      break;
    }
  }
}

static void rng_worker(void* ctx, int64_t b0, int64_t b1, int tid) {
  (void)tid;
  const rng_job_t* j = ctx;
  const int E = j->E;
  int64_t e = b0 * E;
  const int64_t e_end = b1 * E < j->numel ? b1 * E : j->numel;
  const int need_bits = j->kind != K_DROPOUT || j->keep_const < 0;
  cursor_t c;
  if (!j->fast) cur_init(&c, j, e);
  int64_t off[RNG_MAX_OPS];
  for (int64_t g = b0; g < b1 && e < e_end; g++) {
    uint32_t r[4] = {0, 0, 0, 0};
    double v[4] = {0, 0, 0, 0};
    int64_t iv[2] = {0, 0};
    if (need_bits) {
      const uint32_t ctr[4] = {j->off[0], j->off[1], (uint32_t)g, (uint32_t)((uint64_t)g >> 32)};
      philox(ctr, j->key, r);
      block_values(j, r, v, iv);
    }
    for (int l = 0; l < E && e < e_end; l++, e++) {
      if (j->fast) {
        for (int k = 0; k < j->nops; k++) off[k] = e;
        element(j, l, v, iv, off);
      } else {
        element(j, l, v, iv, c.off);
        cur_next(&c, j);
      }
    }
  }
}

/* ---- setup and validation ------------------------------------------------------------------- */

static kiln_status_t check_desc(const kiln_tensor_t* t, const char* op, const char* name) {
  if (!t) return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s: %s is NULL", op, name);
  if (t->ndim < 0 || t->ndim > KILN_MAX_DIMS)
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s: %s has rank %d (max %d)", op, name,
                      (int)t->ndim, KILN_MAX_DIMS);
  if ((int)t->dtype < 0 || t->dtype >= KILN_DTYPE_COUNT)
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s: %s has an invalid dtype %d", op, name,
                      (int)t->dtype);
  for (int d = 0; d < t->ndim; d++)
    if (t->shape[d] < 0)
      return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s: %s has a negative size %lld at dim %d",
                        op, name, (long long)t->shape[d], d);
  if (!kiln_tensor_size_ok(t))
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT,
                      "%s: %s is too large (limit 2^48 elements) or strided beyond int64", op,
                      name);
  if (!t->data && kiln_tensor_numel(t) > 0)
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s: %s has NULL data", op, name);
  return KILN_OK;
}

static kiln_status_t check_out(const kiln_tensor_t* out, const kiln_philox_t* gen, int need_float,
                               const char* op) {
  if (!gen) return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s: NULL generator", op);
  KILN_RETURN_IF_ERROR(check_desc(out, op, "out"));
  if (need_float && !kiln_dtype_is_float(out->dtype))
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s: out must be floating, got %s", op,
                      kiln_dtype_name(out->dtype));
  return KILN_OK;
}

static int same_shape(const kiln_tensor_t* a, const kiln_tensor_t* b) {
  if (a->ndim != b->ndim) return 0;
  for (int d = 0; d < a->ndim; d++)
    if (a->shape[d] != b->shape[d]) return 0;
  return 1;
}

static void job_init(rng_job_t* j, int kind, int E, const kiln_tensor_t* out,
                     const kiln_philox_t* gen) {
  memset(j, 0, sizeof *j);
  j->kind = kind;
  j->E = E;
  j->nops = 1;
  j->nd = out->ndim;
  j->numel = kiln_tensor_numel(out);
  for (int d = 0; d < out->ndim; d++) {
    j->shape[d] = out->shape[d];
    j->strides[0][d] = out->strides[d];
  }
  j->base[0] = out->data;
  j->dt[0] = out->dtype;
  j->es[0] = (int64_t)kiln_dtype_size(out->dtype);
  j->fast = kiln_tensor_is_contiguous(out);
  j->key[0] = (uint32_t)gen->seed;
  j->key[1] = (uint32_t)(gen->seed >> 32);
  j->off[0] = (uint32_t)gen->offset;
  j->off[1] = (uint32_t)(gen->offset >> 32);
  j->keep_const = -1;
}

/* Adds an operand with out's shape; strides[] already aligned to out's dims. */
static void job_add(rng_job_t* j, const kiln_tensor_t* t, const int64_t* strides, int contiguous) {
  const int k = j->nops++;
  for (int d = 0; d < j->nd; d++) j->strides[k][d] = strides[d];
  j->base[k] = t->data;
  j->dt[k] = t->dtype;
  j->es[k] = (int64_t)kiln_dtype_size(t->dtype);
  j->fast = j->fast && contiguous;
}

static void job_run(rng_job_t* j) {
  if (j->numel == 0) return;
  const int64_t nblocks = (j->numel + j->E - 1) / j->E;
  kiln_parallel_for(nblocks, RNG_GRAIN_ELEMS / j->E, rng_worker, j);
}

/* ---- kernels ------------------------------------------------------------------------------ */

/* torch uniform_; see random.h. */
kiln_status_t kiln_kernel_uniform(kiln_tensor_t* out, double from, double to,
                                  kiln_philox_t* gen) {
  static const char* op = "uniform";
  KILN_RETURN_IF_ERROR(check_out(out, gen, 1, op));
  if (!isfinite(from) || !isfinite(to) || !(from <= to))
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT,
                      "%s: expects finite from <= to, got from=%g, to=%g", op, from, to);
  const double f = round_to(out->dtype, from), t = round_to(out->dtype, to);
  if (!isfinite(f) || !isfinite(t) || !isfinite(t - f))
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s: [%g, %g) overflows %s", op, from, to,
                      kiln_dtype_name(out->dtype));
  rng_job_t j;
  const int f64 = out->dtype == KILN_DTYPE_F64;
  job_init(&j, K_UNIFORM, f64 ? 2 : 4, out, gen);
  j.a = f;
  j.b = t - f;
  j.hi = t > f ? prev_below(out->dtype, t) : f;
  job_run(&j);
  gen->offset++;
  return KILN_OK;
}

/* torch normal_; see random.h. */
kiln_status_t kiln_kernel_normal(kiln_tensor_t* out, double mean, double std, kiln_philox_t* gen) {
  static const char* op = "normal";
  KILN_RETURN_IF_ERROR(check_out(out, gen, 1, op));
  if (!isfinite(mean) || !isfinite(std) || std < 0.0)
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT,
                      "%s: expects finite mean and std >= 0, got mean=%g, std=%g", op, mean, std);
  rng_job_t j;
  job_init(&j, K_NORMAL, out->dtype == KILN_DTYPE_F64 ? 2 : 4, out, gen);
  j.a = mean;
  j.b = std;
  job_run(&j);
  gen->offset++;
  return KILN_OK;
}

/* torch exponential_; see random.h. */
kiln_status_t kiln_kernel_exponential(kiln_tensor_t* out, double lambd, kiln_philox_t* gen) {
  static const char* op = "exponential";
  KILN_RETURN_IF_ERROR(check_out(out, gen, 1, op));
  if (!isfinite(lambd) || !(lambd > 0.0))
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s: expects finite lambda > 0, got %g", op,
                      lambd);
  rng_job_t j;
  job_init(&j, K_EXPO, out->dtype == KILN_DTYPE_F64 ? 2 : 4, out, gen);
  j.a = 1.0 / lambd;
  job_run(&j);
  gen->offset++;
  return KILN_OK;
}

/* torch bernoulli_(float p); see random.h. */
kiln_status_t kiln_kernel_bernoulli_scalar(kiln_tensor_t* out, double p, kiln_philox_t* gen) {
  static const char* op = "bernoulli";
  KILN_RETURN_IF_ERROR(check_out(out, gen, 0, op));
  if (!(p >= 0.0 && p <= 1.0))
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s: expects 0 <= p <= 1, got p=%g", op, p);
  rng_job_t j;
  job_init(&j, K_BERN, 4, out, gen);
  j.p = p;
  job_run(&j);
  gen->offset++;
  return KILN_OK;
}

/* torch bernoulli_(Tensor p); see random.h. */
kiln_status_t kiln_kernel_bernoulli_tensor(kiln_tensor_t* out, const kiln_tensor_t* p,
                                           kiln_philox_t* gen) {
  static const char* op = "bernoulli";
  KILN_RETURN_IF_ERROR(check_out(out, gen, 0, op));
  KILN_RETURN_IF_ERROR(check_desc(p, op, "p"));
  if (!kiln_dtype_is_float(p->dtype))
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s: p must be floating, got %s", op,
                      kiln_dtype_name(p->dtype));
  int64_t st[KILN_MAX_DIMS] = {0};
  int ok = p->ndim <= out->ndim;
  for (int i = 0; ok && i < p->ndim; i++) {
    const int od = out->ndim - p->ndim + i;
    if (p->shape[i] == out->shape[od])
      st[od] = p->shape[i] == 1 ? 0 : p->strides[i];
    else if (p->shape[i] == 1)
      st[od] = 0;
    else
      ok = 0;
  }
  if (!ok)
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT,
                      "%s: p (rank %d) does not broadcast to out (rank %d); shapes must match or "
                      "be 1 from the right",
                      op, (int)p->ndim, (int)out->ndim);
  rng_job_t j;
  atomic_int bad = 0;
  job_init(&j, K_BERN_T, 4, out, gen);
  job_add(&j, p, st, same_shape(p, out) && kiln_tensor_is_contiguous(p));
  j.bad = &bad;
  job_run(&j);
  if (atomic_load(&bad))
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT,
                      "%s: expects all elements of p to be in [0, 1]", op);
  gen->offset++;
  return KILN_OK;
}

/* Largest integer magnitude dt holds exactly (bool: 1). */
static void int_bounds(kiln_dtype_t dt, int64_t* lo, int64_t* hi) {
  switch (dt) {
    case KILN_DTYPE_F32: *hi = (int64_t)1 << 24; *lo = -*hi; break;
    case KILN_DTYPE_F16: *hi = 2048; *lo = -*hi; break;
    case KILN_DTYPE_BF16: *hi = 256; *lo = -*hi; break;
    case KILN_DTYPE_F64: *hi = (int64_t)1 << 53; *lo = -*hi; break;
    case KILN_DTYPE_I8: *lo = INT8_MIN; *hi = INT8_MAX; break;
    case KILN_DTYPE_I16: *lo = INT16_MIN; *hi = INT16_MAX; break;
    case KILN_DTYPE_I32: *lo = INT32_MIN; *hi = INT32_MAX; break;
    case KILN_DTYPE_I64: *lo = INT64_MIN; *hi = INT64_MAX; break;
    case KILN_DTYPE_U8: *lo = 0; *hi = UINT8_MAX; break;
    default: *lo = 0; *hi = 1; break;
  }
}

/* torch random_(from, to); see random.h. */
kiln_status_t kiln_kernel_random_int(kiln_tensor_t* out, int64_t from, int64_t to_exclusive,
                                     kiln_philox_t* gen) {
  static const char* op = "random_int";
  KILN_RETURN_IF_ERROR(check_out(out, gen, 0, op));
  if (!(from < to_exclusive))
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s: expects from < to, got [%lld, %lld)", op,
                      (long long)from, (long long)to_exclusive);
  int64_t lo, hi;
  int_bounds(out->dtype, &lo, &hi);
  if (from < lo || to_exclusive - 1 > hi)
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT,
                      "%s: [%lld, %lld) is out of the exact range [%lld, %lld] of %s", op,
                      (long long)from, (long long)to_exclusive, (long long)lo, (long long)hi,
                      kiln_dtype_name(out->dtype));
  rng_job_t j;
  job_init(&j, K_RANDINT, 2, out, gen);
  j.from = from;
  j.range = (uint64_t)to_exclusive - (uint64_t)from;
  job_run(&j);
  gen->offset++;
  return KILN_OK;
}

/* torch.randperm(n); see random.h. */
kiln_status_t kiln_kernel_randperm(kiln_tensor_t* out, int64_t n, kiln_philox_t* gen) {
  static const char* op = "randperm";
  KILN_RETURN_IF_ERROR(check_out(out, gen, 0, op));
  if (n < 0) return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s: n must be >= 0, got %lld", op,
                               (long long)n);
  if (out->ndim != 1 || out->shape[0] != n)
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s: out must be 1-d of length %lld", op,
                      (long long)n);
  int64_t lo, hi;
  int_bounds(out->dtype, &lo, &hi);
  if (out->dtype == KILN_DTYPE_BOOL || (n > 0 && n - 1 > hi))
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s: n = %lld does not fit dtype %s", op,
                      (long long)n, kiln_dtype_name(out->dtype));
  if (n > 1 && out->strides[0] == 0)
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s: out has stride 0", op);
  char* base = out->data;
  const int64_t es = (int64_t)kiln_dtype_size(out->dtype), step = out->strides[0] * es;
  for (int64_t k = 0; k < n; k++) store_i(base + k * step, out->dtype, k);
  const uint32_t key[2] = {(uint32_t)gen->seed, (uint32_t)(gen->seed >> 32)};
  uint32_t r[4] = {0, 0, 0, 0};
  for (int64_t i = n - 1, d = 0; i >= 1; i--, d++) {
    if ((d & 1) == 0) {
      const uint64_t g = (uint64_t)d >> 1;
      const uint32_t ctr[4] = {(uint32_t)gen->offset, (uint32_t)(gen->offset >> 32), (uint32_t)g,
                               (uint32_t)(g >> 32)};
      philox(ctr, key, r);
    }
    const int64_t k = (int64_t)mulhi64(lane64(r, (int)(d & 1)), (uint64_t)i + 1);
    if (k != i) {
      char tmp[8];
      memcpy(tmp, base + i * step, (size_t)es);
      memcpy(base + i * step, base + k * step, (size_t)es);
      memcpy(base + k * step, tmp, (size_t)es);
    }
  }
  gen->offset++;
  return KILN_OK;
}

/* aten::native_dropout; see random.h. */
kiln_status_t kiln_kernel_dropout(const kiln_tensor_t* x, double p, int train, kiln_tensor_t* out,
                                  kiln_tensor_t* mask_out, kiln_philox_t* gen) {
  static const char* op = "dropout";
  KILN_RETURN_IF_ERROR(check_out(out, gen, 1, op));
  KILN_RETURN_IF_ERROR(check_desc(x, op, "x"));
  if (!kiln_dtype_is_float(x->dtype))
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s: x must be floating, got %s", op,
                      kiln_dtype_name(x->dtype));
  if (!same_shape(x, out))
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s: out must have x's shape", op);
  if (mask_out) {
    KILN_RETURN_IF_ERROR(check_desc(mask_out, op, "mask"));
    if (!same_shape(x, mask_out))
      return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s: mask must have x's shape", op);
  }
  if (!(p >= 0.0 && p <= 1.0))
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s: expects 0 <= p <= 1, got p=%g", op, p);
  rng_job_t j;
  job_init(&j, K_DROPOUT, 4, out, gen);
  job_add(&j, x, x->strides, kiln_tensor_is_contiguous(x));
  if (mask_out) job_add(&j, mask_out, mask_out->strides, kiln_tensor_is_contiguous(mask_out));
  j.f64math = x->dtype == KILN_DTYPE_F64 || out->dtype == KILN_DTYPE_F64;
  const double p1m = 1.0 - p;
  j.p = p1m;
  j.scaled = !train ? 1.0 : p1m == 0.0 ? 0.0 : 1.0 / p1m;
  if (!train || p1m == 1.0) j.keep_const = 1; /* eval, p == 0: keep all, no bits needed */
  if (train && p1m == 0.0) j.keep_const = 0;  /* p == 1: drop all */
  j.scalef = (float)j.scaled;
  job_run(&j);
  if (train) gen->offset++;
  return KILN_OK;
}
