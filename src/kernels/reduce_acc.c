/* SPDX-License-Identifier: Apache-2.0 */
/* reduce_acc.c - per-type accumulation loops of the reductions (see reduce_internal.h).
 * Floating types accumulate in double, integers in 64 bits with wraparound. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("vect-cost-model=dynamic")
#endif
#include <math.h>

#include "kernels/ew_internal.h"
#include "kernels/reduce_internal.h"

static inline double maxp(double a, double b) { return a != a ? a : b != b ? b : a > b ? a : b; }
static inline double minp(double a, double b) { return a != a ? a : b != b ? b : a < b ? a : b; }

/* Sum of n values with four independent accumulators. */
#define SUM4(T, v, n, out)                                          \
  do {                                                              \
    double s0 = 0, s1 = 0, s2 = 0, s3 = 0;                          \
    int64_t i_ = 0;                                                 \
    for (; i_ + 4 <= (n); i_ += 4) {                                \
      s0 += (double)(v)[i_];                                        \
      s1 += (double)(v)[i_ + 1];                                    \
      s2 += (double)(v)[i_ + 2];                                    \
      s3 += (double)(v)[i_ + 3];                                    \
    }                                                               \
    for (; i_ < (n); i_++) s0 += (double)(v)[i_];                   \
    (out) = (s0 + s1) + (s2 + s3);                                  \
  } while (0)

#define DEF_SEG_FLOAT(S, T)                                                               \
  static void seg_##S(const kiln_red_op_t* op, const T* v, int64_t n, kiln_red_state_t* st) { \
    st->n += n;                                                                           \
    switch (op->op) {                                                                     \
      case KILN_REDUCE_SUM:                                                               \
      case KILN_REDUCE_MEAN: {                                                            \
        double s;                                                                         \
        if (KILN_DTYPE_##S == KILN_DTYPE_F32 && kiln_cpu_has_avx2())                      \
          s = kiln_avx2_sum_f32((const float*)(const void*)v, n);                         \
        else                                                                              \
          SUM4(T, v, n, s);                                                               \
        st->a += s;                                                                       \
        break;                                                                            \
      }                                                                                   \
      case KILN_REDUCE_PROD: for (int64_t i = 0; i < n; i++) st->a *= v[i]; break;         \
      case KILN_REDUCE_AMAX: for (int64_t i = 0; i < n; i++) st->a = maxp(st->a, v[i]); break; \
      case KILN_REDUCE_AMIN: for (int64_t i = 0; i < n; i++) st->a = minp(st->a, v[i]); break; \
      case KILN_REDUCE_ANY: for (int64_t i = 0; i < n; i++) st->i |= v[i] != 0; break;     \
      case KILN_REDUCE_ALL: for (int64_t i = 0; i < n; i++) st->i &= v[i] != 0; break;     \
      case KILN_REDUCE_VAR:                                                               \
      case KILN_REDUCE_STD:                                                               \
        if (op->pass == 0) {                                                              \
          double s;                                                                       \
          SUM4(T, v, n, s);                                                               \
          st->a += s;                                                                     \
        } else {                                                                          \
          double s = 0, m = st->pivot;                                                    \
          for (int64_t i = 0; i < n; i++) s += ((double)v[i] - m) * ((double)v[i] - m);   \
          st->b += s;                                                                     \
        }                                                                                 \
        break;                                                                            \
      case KILN_REDUCE_NORM:                                                              \
        switch (op->norm_kind) {                                                          \
          case KILN_NORM_P0: for (int64_t i = 0; i < n; i++) st->a += v[i] != 0; break;    \
          case KILN_NORM_P1: for (int64_t i = 0; i < n; i++) st->a += fabs((double)v[i]); break; \
          case KILN_NORM_P2:                                                              \
            for (int64_t i = 0; i < n; i++) st->a += (double)v[i] * (double)v[i];         \
            break;                                                                        \
          case KILN_NORM_INF:                                                             \
            for (int64_t i = 0; i < n; i++) st->a = maxp(st->a, fabs((double)v[i]));      \
            break;                                                                        \
          case KILN_NORM_NINF:                                                            \
            for (int64_t i = 0; i < n; i++) st->a = minp(st->a, fabs((double)v[i]));      \
            break;                                                                        \
          default:                                                                        \
            for (int64_t i = 0; i < n; i++) st->a += pow(fabs((double)v[i]), op->p);      \
            break;                                                                        \
        }                                                                                 \
        break;                                                                            \
      case KILN_REDUCE_LOGSUMEXP:                                                         \
        if (op->pass == 0) {                                                              \
          for (int64_t i = 0; i < n; i++) st->a = maxp(st->a, v[i]);                      \
        } else {                                                                          \
          double s = 0, m = st->pivot;                                                    \
          for (int64_t i = 0; i < n; i++) s += exp((double)v[i] - m);                     \
          st->b += s;                                                                     \
        }                                                                                 \
        break;                                                                            \
      default: break;                                                                     \
    }                                                                                     \
  }

#define DEF_SEG_INT(S, T)                                                                 \
  static void seg_##S(const kiln_red_op_t* op, const T* v, int64_t n, kiln_red_state_t* st) { \
    st->n += n;                                                                           \
    switch (op->op) {                                                                     \
      case KILN_REDUCE_SUM: {                                                             \
        uint64_t s = (uint64_t)st->i;                                                     \
        for (int64_t i = 0; i < n; i++) s += (uint64_t)(int64_t)v[i];                     \
        st->i = (int64_t)s;                                                               \
        break;                                                                            \
      }                                                                                   \
      case KILN_REDUCE_PROD: {                                                            \
        uint64_t s = (uint64_t)st->i;                                                     \
        for (int64_t i = 0; i < n; i++) s *= (uint64_t)(int64_t)v[i];                     \
        st->i = (int64_t)s;                                                               \
        break;                                                                            \
      }                                                                                   \
      case KILN_REDUCE_AMAX:                                                              \
        for (int64_t i = 0; i < n; i++) if (v[i] > st->i) st->i = v[i];                   \
        break;                                                                            \
      case KILN_REDUCE_AMIN:                                                              \
        for (int64_t i = 0; i < n; i++) if (v[i] < st->i) st->i = v[i];                   \
        break;                                                                            \
      case KILN_REDUCE_ANY: for (int64_t i = 0; i < n; i++) st->i |= v[i] != 0; break;     \
      case KILN_REDUCE_ALL: for (int64_t i = 0; i < n; i++) st->i &= v[i] != 0; break;     \
      default: break;                                                                     \
    }                                                                                     \
  }

DEF_SEG_FLOAT(F32, float)
DEF_SEG_FLOAT(F64, double)
DEF_SEG_INT(I8, int8_t)
DEF_SEG_INT(I16, int16_t)
DEF_SEG_INT(I32, int32_t)
DEF_SEG_INT(I64, int64_t)
DEF_SEG_INT(U8, uint8_t)
DEF_SEG_INT(BOOL, uint8_t)

void kiln_red_seg(const kiln_red_op_t* op, kiln_dtype_t type, const void* v, int64_t n,
                  kiln_red_state_t* st) {
  switch (type) {
    case KILN_DTYPE_F32: seg_F32(op, v, n, st); break;
    case KILN_DTYPE_F64: seg_F64(op, v, n, st); break;
    case KILN_DTYPE_I8: seg_I8(op, v, n, st); break;
    case KILN_DTYPE_I16: seg_I16(op, v, n, st); break;
    case KILN_DTYPE_I32: seg_I32(op, v, n, st); break;
    case KILN_DTYPE_I64: seg_I64(op, v, n, st); break;
    case KILN_DTYPE_U8: seg_U8(op, v, n, st); break;
    case KILN_DTYPE_BOOL: seg_BOOL(op, v, n, st); break;
    default: break;
  }
}

/* Vertical: element j goes into st[j]; reuses the horizontal loops one element at a time for
 * the rare ops and inlines the common ones. */
#define DEF_VERT(S, T, IS_FLOAT)                                                          \
  static void vert_##S(const kiln_red_op_t* op, const T* v, int64_t n, kiln_red_state_t* st) { \
    if (IS_FLOAT && (op->op == KILN_REDUCE_SUM || op->op == KILN_REDUCE_MEAN ||           \
                     ((op->op == KILN_REDUCE_VAR || op->op == KILN_REDUCE_STD) && op->pass == 0))) { \
      for (int64_t j = 0; j < n; j++) {                                                   \
        st[j].a += (double)v[j];                                                          \
        st[j].n++;                                                                        \
      }                                                                                   \
      return;                                                                             \
    }                                                                                     \
    if (!IS_FLOAT && op->op == KILN_REDUCE_SUM) {                                         \
      for (int64_t j = 0; j < n; j++) {                                                   \
        st[j].i = (int64_t)((uint64_t)st[j].i + (uint64_t)(int64_t)v[j]);                 \
        st[j].n++;                                                                        \
      }                                                                                   \
      return;                                                                             \
    }                                                                                     \
    if (IS_FLOAT && op->op == KILN_REDUCE_AMAX) {                                         \
      for (int64_t j = 0; j < n; j++) st[j].a = maxp(st[j].a, v[j]), st[j].n++;           \
      return;                                                                             \
    }                                                                                     \
    for (int64_t j = 0; j < n; j++) seg_##S(op, v + j, 1, st + j);                        \
  }
DEF_VERT(F32, float, 1)
DEF_VERT(F64, double, 1)
DEF_VERT(I8, int8_t, 0)
DEF_VERT(I16, int16_t, 0)
DEF_VERT(I32, int32_t, 0)
DEF_VERT(I64, int64_t, 0)
DEF_VERT(U8, uint8_t, 0)
DEF_VERT(BOOL, uint8_t, 0)

void kiln_red_vert(const kiln_red_op_t* op, kiln_dtype_t type, const void* v, int64_t n,
                   kiln_red_state_t* st) {
  switch (type) {
    case KILN_DTYPE_F32: vert_F32(op, v, n, st); break;
    case KILN_DTYPE_F64: vert_F64(op, v, n, st); break;
    case KILN_DTYPE_I8: vert_I8(op, v, n, st); break;
    case KILN_DTYPE_I16: vert_I16(op, v, n, st); break;
    case KILN_DTYPE_I32: vert_I32(op, v, n, st); break;
    case KILN_DTYPE_I64: vert_I64(op, v, n, st); break;
    case KILN_DTYPE_U8: vert_U8(op, v, n, st); break;
    case KILN_DTYPE_BOOL: vert_BOOL(op, v, n, st); break;
    default: break;
  }
}

void kiln_red_init(const kiln_red_op_t* op, int is_float, kiln_red_state_t* st) {
  st->a = st->b = st->pivot = 0;
  st->i = st->n = 0;
  switch (op->op) {
    case KILN_REDUCE_PROD: st->a = 1; st->i = 1; break;
    case KILN_REDUCE_AMAX: st->a = -INFINITY; st->i = INT64_MIN; break;
    case KILN_REDUCE_AMIN: st->a = INFINITY; st->i = INT64_MAX; break;
    case KILN_REDUCE_ALL: st->i = 1; break;
    case KILN_REDUCE_NORM: if (op->norm_kind == KILN_NORM_NINF) st->a = INFINITY; break;
    case KILN_REDUCE_LOGSUMEXP: st->a = -INFINITY; break;
    default: break;
  }
  (void)is_float;
}

void kiln_red_combine(const kiln_red_op_t* op, int is_float, kiln_red_state_t* a,
                      const kiln_red_state_t* b) {
  switch (op->op) {
    case KILN_REDUCE_SUM:
    case KILN_REDUCE_MEAN:
      a->a += b->a;
      a->i = (int64_t)((uint64_t)a->i + (uint64_t)b->i);
      break;
    case KILN_REDUCE_PROD:
      a->a *= b->a;
      a->i = (int64_t)((uint64_t)a->i * (uint64_t)b->i);
      break;
    case KILN_REDUCE_AMAX:
      if (is_float) a->a = maxp(a->a, b->a);
      else if (b->i > a->i) a->i = b->i;
      break;
    case KILN_REDUCE_AMIN:
      if (is_float) a->a = minp(a->a, b->a);
      else if (b->i < a->i) a->i = b->i;
      break;
    case KILN_REDUCE_ANY: a->i |= b->i; break;
    case KILN_REDUCE_ALL: a->i &= b->i; break;
    case KILN_REDUCE_VAR:
    case KILN_REDUCE_STD: { /* Chan et al. */
      if (b->n == 0) break;
      if (a->n == 0) { *a = *b; return; }
      double na = (double)a->n, nb = (double)b->n, n = na + nb;
      double delta = b->a - a->a;
      a->a += delta * (nb / n);
      a->b += b->b + delta * delta * (na * nb / n);
      break;
    }
    case KILN_REDUCE_NORM:
      if (op->norm_kind == KILN_NORM_INF) a->a = maxp(a->a, b->a);
      else if (op->norm_kind == KILN_NORM_NINF) a->a = minp(a->a, b->a);
      else a->a += b->a;
      break;
    case KILN_REDUCE_LOGSUMEXP: {
      double m = maxp(a->a, b->a);
      if (m != m || isinf(m)) { a->a = m; a->b = 1; break; }
      a->b = a->b * exp(a->a - m) + b->b * exp(b->a - m);
      a->a = m;
      break;
    }
    default: break;
  }
  a->n += b->n;
}
