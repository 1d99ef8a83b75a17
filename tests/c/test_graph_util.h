/* SPDX-License-Identifier: Apache-2.0 */
/* test_graph_util.h - helpers shared by the graph compiler tests. */
#ifndef KILN_TEST_GRAPH_UTIL_H
#define KILN_TEST_GRAPH_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kiln/graph.h"
#include "kiln/kernels/elementwise.h"
#include "kiln/kernels/gemm.h"
#include "kiln/kernels/nn.h"
#include "kiln/kernels/reduce.h"
#include "kiln_test.h"

static uint64_t gt_rng = 0x12345678abcdefull;
static inline double gt_rand(void) { /* uniform in [-1, 1) */
  gt_rng ^= gt_rng << 13;
  gt_rng ^= gt_rng >> 7;
  gt_rng ^= gt_rng << 17;
  return (double)(gt_rng >> 11) / 9007199254740992.0 * 2.0 - 1.0;
}

static inline float* gt_randf(int64_t n) {
  float* p = malloc(sizeof(float) * (size_t)(n ? n : 1));
  for (int64_t i = 0; i < n; i++) p[i] = (float)gt_rand();
  return p;
}

static inline kiln_tensor_t gt_t(void* data, kiln_dtype_t dt, int ndim, const int64_t* shape) {
  kiln_tensor_t t;
  kiln_tensor_init_contiguous(&t, data, dt, ndim, shape);
  return t;
}

/* max |a - b| / (1 + |b|) over n floats */
static inline double gt_maxrel(const float* a, const float* b, int64_t n) {
  double m = 0;
  for (int64_t i = 0; i < n; i++) {
    double d = fabs((double)a[i] - (double)b[i]) / (1.0 + fabs((double)b[i]));
    if (d != d) return 1e30;
    if (d > m) m = d;
  }
  return m;
}

static inline kiln_exec_stats_t gt_stats(kiln_exec_t* e) {
  kiln_exec_stats_t s;
  memset(&s, 0, sizeof s);
  kiln_exec_stats(e, &s);
  return s;
}

static inline void gt_dump(kiln_exec_t* e, int stage) {
  size_t need = 0;
  kiln_exec_dump(e, stage, NULL, 0, &need);
  char* buf = malloc(need ? need : 1);
  kiln_exec_dump(e, stage, buf, need, NULL);
  fputs(buf, stderr);
  free(buf);
}

#endif /* KILN_TEST_GRAPH_UTIL_H */
