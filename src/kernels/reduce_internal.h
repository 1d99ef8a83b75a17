/* SPDX-License-Identifier: Apache-2.0 */
/* reduce_internal.h - reduction state and per-type accumulation shared by reduce.c and
 * reduce_acc.c. Internal to libkiln. */
#ifndef KILN_KERNELS_REDUCE_INTERNAL_H
#define KILN_KERNELS_REDUCE_INTERNAL_H

#include <stdint.h>

#include "kiln/kernels/reduce.h"

/* Partial result of one op over a set of elements. Floating compute uses a/b (double), integer
 * compute uses i; n counts elements. VAR: a = mean, b = M2 once a chunk is closed (sum while it
 * is open); LOGSUMEXP: a = max, b = sum of exp(x - a). `pivot` is the first-pass result of the
 * two-pass ops (VAR: the mean, LOGSUMEXP: the max). */
typedef struct kiln_red_state {
  double a, b, pivot;
  int64_t i, n;
} kiln_red_state_t;

/* NORM orders with their own accumulation. */
enum { KILN_NORM_P0, KILN_NORM_P1, KILN_NORM_P2, KILN_NORM_INF, KILN_NORM_NINF, KILN_NORM_PGEN };

typedef struct kiln_red_op {
  kiln_reduce_op_t op;
  int norm_kind; /* KILN_NORM_* for NORM */
  double p;      /* NORM order */
  int pass;      /* 0, or 1 for the second pass of VAR/STD/LOGSUMEXP */
} kiln_red_op_t;

/* Accumulates n contiguous elements of internal type `type` into one state (horizontal). */
void kiln_red_seg(const kiln_red_op_t* op, kiln_dtype_t type, const void* v, int64_t n,
                  kiln_red_state_t* st);
/* Accumulates element j of v into st[j] for j < n (vertical). */
void kiln_red_vert(const kiln_red_op_t* op, kiln_dtype_t type, const void* v, int64_t n,
                   kiln_red_state_t* st);
/* Initial state of op (integer or floating family). */
void kiln_red_init(const kiln_red_op_t* op, int is_float, kiln_red_state_t* st);
/* Folds chunk b (closed) into a (closed), in order. */
void kiln_red_combine(const kiln_red_op_t* op, int is_float, kiln_red_state_t* a,
                      const kiln_red_state_t* b);

#endif /* KILN_KERNELS_REDUCE_INTERNAL_H */
