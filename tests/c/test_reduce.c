/* SPDX-License-Identifier: Apache-2.0 */
/* test_reduce.c - reductions, arg-reductions and scans vs double references over dtypes and
 * layouts (contiguous, permuted, transposed/vertical, stepped, rank 0, empty, chunked-parallel
 * sizes), NaN propagation, empty-set rules, the keepdim=False view and errors.
 * Tolerances: floats rtol 1e-5 for f32 (the reference is exact double, kiln accumulates in
 * double and rounds once), 1e-12 f64, 1e-2 bf16; integers and index results exact. */
#include "ew_test_util.h"
#include "kernels/ew_internal.h"
#include "kiln/kernels/reduce.h"

typedef struct { int ndim; int64_t shape[4]; uint32_t mask; int kind; } red_layout_t;
/* kind: 0 contiguous, 1 last two dims transposed, 2 last dim stepped by 2, 3 reversed dims */
static const red_layout_t k_layouts[] = {
    {1, {1000}, 0, 0},       {2, {37, 41}, 2, 0},      {2, {37, 41}, 1, 0},
    {4, {4, 5, 6, 7}, 5, 0}, {4, {4, 5, 6, 7}, 10, 3}, {2, {300, 20}, 1, 1},
    {2, {9, 130}, 2, 2},     {0, {0}, 0, 0},           {2, {0, 5}, 1, 0},
    {2, {3, 0}, 2, 0},       {1, {200000}, 0, 0},      {2, {3, 70000}, 2, 0},
    {2, {70000, 3}, 1, 0},   {2, {513, 300}, 1, 0},    {3, {2, 1, 3}, 2, 0}};
#define NLAYOUT (int)(sizeof k_layouts / sizeof k_layouts[0])

static void make_input(ht_t* h, kiln_dtype_t d, const red_layout_t* L) {
  if (L->kind == 1) {
    ht_make_t(h, d, L->ndim, L->shape);
  } else if (L->kind == 2) {
    int64_t st[4], acc = 1;
    for (int i = L->ndim - 1; i >= 0; i--) st[i] = acc * (i == L->ndim - 1 ? 2 : 1), acc = st[i] * L->shape[i];
    ht_make(h, d, L->ndim, L->shape, st);
  } else if (L->kind == 3) {
    int64_t st[4], acc = 1;
    for (int i = 0; i < L->ndim; i++) st[i] = acc, acc *= L->shape[i];
    ht_make(h, d, L->ndim, L->shape, st);
  } else {
    ht_make(h, d, L->ndim, L->shape, NULL);
  }
}

static double ref_reduce(kiln_reduce_op_t op, const double* v, int64_t n, double p) {
  double r = 0, m = -INFINITY;
  switch (op) {
    case KILN_REDUCE_SUM: for (int64_t i = 0; i < n; i++) r += v[i]; return r;
    case KILN_REDUCE_MEAN: for (int64_t i = 0; i < n; i++) r += v[i]; return r / (double)n;
    case KILN_REDUCE_PROD: r = 1; for (int64_t i = 0; i < n; i++) r *= v[i]; return r;
    case KILN_REDUCE_AMAX:
      for (int64_t i = 0; i < n; i++) m = (isnan(v[i]) || v[i] > m) && !isnan(m) ? v[i] : m;
      return m;
    case KILN_REDUCE_AMIN:
      m = INFINITY;
      for (int64_t i = 0; i < n; i++) m = (isnan(v[i]) || v[i] < m) && !isnan(m) ? v[i] : m;
      return m;
    case KILN_REDUCE_ANY: for (int64_t i = 0; i < n; i++) if (v[i] != 0) return 1; return 0;
    case KILN_REDUCE_ALL: for (int64_t i = 0; i < n; i++) if (v[i] == 0) return 0; return 1;
    case KILN_REDUCE_VAR:
    case KILN_REDUCE_STD: {
      double mean = 0, ss = 0;
      for (int64_t i = 0; i < n; i++) mean += v[i];
      mean /= (double)n;
      for (int64_t i = 0; i < n; i++) ss += (v[i] - mean) * (v[i] - mean);
      double var = ss / fmax(0.0, (double)n - 1);
      return op == KILN_REDUCE_STD ? sqrt(var) : var;
    }
    case KILN_REDUCE_NORM:
      if (p == INFINITY) { for (int64_t i = 0; i < n; i++) r = fmax(r, fabs(v[i])); return r; }
      if (p == 0) { for (int64_t i = 0; i < n; i++) r += v[i] != 0; return r; }
      for (int64_t i = 0; i < n; i++) r += pow(fabs(v[i]), p);
      return pow(r, 1 / p);
    case KILN_REDUCE_LOGSUMEXP:
      for (int64_t i = 0; i < n; i++) m = fmax(m, v[i]);
      if (isinf(m)) return m;
      for (int64_t i = 0; i < n; i++) r += exp(v[i] - m);
      return m + log(r);
    default: return NAN;
  }
}

/* Advances the reduced coordinates of idx (those in mask); 0 after the last. */
static int next_masked(int64_t* idx, const int64_t* shape, uint32_t mask, int ndim) {
  for (int i = ndim - 1; i >= 0; i--) {
    if (!((mask >> i) & 1u)) continue;
    if (++idx[i] < shape[i]) return 1;
    idx[i] = 0;
  }
  return 0;
}

static int red_float_only(kiln_reduce_op_t op) {
  return op == KILN_REDUCE_MEAN || op >= KILN_REDUCE_VAR;
}

static void run_reduce_case(kiln_reduce_op_t op, kiln_dtype_t dt, const red_layout_t* L,
                            double p) {
  ht_t x, y;
  make_input(&x, dt, L);
  ht_rand(&x, op == KILN_REDUCE_PROD ? 0.9 : -3, op == KILN_REDUCE_PROD ? 1.1 : 3);
  if (op == KILN_REDUCE_PROD && !ht_is_float(dt)) ht_rand(&x, -2, 3);
  const uint32_t mask = L->mask ? L->mask : (uint32_t)((1u << L->ndim) - 1);
  int64_t oshape[4];
  for (int i = 0; i < L->ndim; i++) oshape[i] = (mask >> i) & 1u ? 1 : L->shape[i];
  const int is_int = !ht_is_float(dt);
  const int boolres = op == KILN_REDUCE_ANY || op == KILN_REDUCE_ALL;
  kiln_dtype_t compute = is_int && !boolres ? KILN_DTYPE_I64 : dt;
  kiln_dtype_t od = boolres ? KILN_DTYPE_BOOL : compute;
  ht_make(&y, od, L->ndim, oshape, NULL);
  kiln_reduce_params_t rp = {1.0, p};
  int64_t nred = 1;
  for (int i = 0; i < L->ndim; i++) if ((mask >> i) & 1u) nred *= L->shape[i];
  kiln_status_t st = kiln_kernel_reduce(op, &x.t, L->mask, &rp, compute, &y.t);
  if (nred == 0 && (op == KILN_REDUCE_AMAX || op == KILN_REDUCE_AMIN ||
                    (op == KILN_REDUCE_NORM && isinf(p)))) {
    KT_CHECK(st == KILN_ERROR_INVALID_ARGUMENT);
    goto done;
  }
  KT_OK(st);
  double* vals = malloc(sizeof(double) * (size_t)(nred ? nred : 1));
  int64_t* ivals = malloc(sizeof(int64_t) * (size_t)(nred ? nred : 1));
  int64_t oidx[4] = {0};
  int bad = 0;
  if (ht_numel(&y.t)) do {
    int64_t ridx[4] = {0}, k = 0, full[4];
    if (nred) do {
      for (int i = 0; i < L->ndim; i++) full[i] = (mask >> i) & 1u ? ridx[i] : oidx[i];
      vals[k] = ht_get(&x.t, full);
      ivals[k++] = ht_geti_p(ht_ptr(&x.t, full), dt);
    } while (next_masked(ridx, L->shape, mask, L->ndim));
    double want;
    if (is_int && (op == KILN_REDUCE_SUM || op == KILN_REDUCE_PROD)) {
      uint64_t acc = op == KILN_REDUCE_PROD;
      for (int64_t i = 0; i < nred; i++)
        acc = op == KILN_REDUCE_SUM ? acc + (uint64_t)ivals[i] : acc * (uint64_t)ivals[i];
      want = (double)(int64_t)acc;
    } else {
      want = ht_round(od, ref_reduce(op, vals, nred, p));
    }
    const double rtol = dt == KILN_DTYPE_F32 ? 1e-5 : dt == KILN_DTYPE_F64 ? 1e-12
                        : dt == KILN_DTYPE_BF16 ? 1e-2 : 0;
    double got = ht_get(&y.t, oidx);
    if (!ht_close(got, want, rtol, rtol * 1e-3) && bad++ < 3)
      HT_CHECK_CLOSE(got, want, rtol, rtol * 1e-3, "reduce op %d %s layout ndim %d mask %u",
                     (int)op, kiln_dtype_name(dt), L->ndim, (unsigned)L->mask);
  } while (ht_next(oidx, oshape, L->ndim));
  free(vals);
  free(ivals);
done:
  ht_free(&x);
  ht_free(&y);
}

static void reduce_all(int generic) {
  const kiln_dtype_t dts[6] = {KILN_DTYPE_F32, KILN_DTYPE_F64, KILN_DTYPE_BF16, KILN_DTYPE_I32,
                               KILN_DTYPE_U8, KILN_DTYPE_BOOL};
  for (int op = 0; op < KILN_REDUCE_COUNT; op++)
    for (int l = 0; l < NLAYOUT; l++)
      for (int d = 0; d < 6; d++) {
        if (red_float_only(op) && !ht_is_float(dts[d])) continue;
        if (op == KILN_REDUCE_PROD && (dts[d] == KILN_DTYPE_BOOL || k_layouts[l].shape[0] > 1000 ||
                                       k_layouts[l].ndim == 1))
          continue;
        const int big = l >= 10 && l <= 13;
        if (big && d >= 2 && d != 3) continue; /* big cases: f32, f64, i32 */
        if (big && generic && op != KILN_REDUCE_SUM && op != KILN_REDUCE_VAR &&
            op != KILN_REDUCE_AMAX)
          continue; /* same chunking code as the AVX2 run; only the loops differ */
        if (op == KILN_REDUCE_LOGSUMEXP && l >= 8 && l <= 9) continue; /* empty: see edges */
        if (op == KILN_REDUCE_NORM) {
          const double ps[4] = {2.0, 1.0, INFINITY, 3.0};
          for (int i = 0; i < (big ? 1 : 4); i++) run_reduce_case(op, dts[d], &k_layouts[l], ps[i]);
        } else {
          run_reduce_case(op, dts[d], &k_layouts[l], 2.0);
        }
      }
}

KT_TEST(reduce_ops_avx2) {
  kiln_cpu_force_generic(0);
  reduce_all(0);
}

KT_TEST(reduce_ops_generic) {
  kiln_cpu_force_generic(1);
  reduce_all(1);
  kiln_cpu_force_generic(0);
}

/* Column sums (>= 8 kept columns innermost: a norm's weight gradient) run the AVX2 row-run kernel
 * (kiln_avx2_acc_rows_f32): the bits of the generic per-row double loop, for sum, mean and
 * var, widths around the 16- and 4-column blocks, reduced dims split by a kept one (the
 * odometer between runs), a stepped outer dim and the row-chunked parallel split. */
KT_TEST(column_sums_avx2_bits_match_generic) {
  if (!kiln_cpu_has_avx2()) return;
  static const struct { int nd; int64_t shape[4]; uint32_t mask; int stepped; } cases[] = {
      {3, {8, 128, 128}, 3, 0}, {2, {1000, 37}, 1, 0}, {2, {300, 20}, 1, 1}, {4, {4, 5, 6, 7}, 5, 0},
      {2, {70000, 9}, 1, 0},    {3, {9, 33, 19}, 3, 1}, {2, {5, 8}, 1, 0},   {3, {2, 2, 260}, 3, 0}};
  const kiln_reduce_op_t ops[] = {KILN_REDUCE_SUM, KILN_REDUCE_MEAN, KILN_REDUCE_VAR};
  int diff = 0;
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    const int nd = cases[c].nd;
    ht_t x;
    int64_t st[4], acc = 1;
    for (int i = nd - 1; i >= 0; i--) { /* dim 0 stepped by 2 when asked */
      st[i] = acc * (i == 0 && cases[c].stepped ? 2 : 1);
      acc = st[i] * cases[c].shape[i];
    }
    ht_make(&x, KILN_DTYPE_F32, nd, cases[c].shape, st);
    ht_rand(&x, -3.0, 3.0);
    int64_t oshape[4];
    for (int i = 0; i < nd; i++) oshape[i] = (cases[c].mask >> i) & 1u ? 1 : cases[c].shape[i];
    for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++) {
      ht_t y[2];
      for (int g = 0; g < 2; g++) {
        ht_make(&y[g], KILN_DTYPE_F32, nd, oshape, NULL);
        kiln_cpu_force_generic(g);
        kiln_reduce_params_t rp = {1.0, 2.0};
        KT_OK(kiln_kernel_reduce(ops[o], &x.t, cases[c].mask, &rp, KILN_DTYPE_F32, &y[g].t));
      }
      kiln_cpu_force_generic(0);
      diff += memcmp(y[0].t.data, y[1].t.data, sizeof(float) * (size_t)ht_numel(&y[0].t)) != 0;
      ht_free(&y[0]);
      ht_free(&y[1]);
    }
    ht_free(&x);
  }
  KT_CHECK(diff == 0);
}

static float f32_scalar(kiln_reduce_op_t op, const float* v, int64_t n, double corr) {
  kiln_tensor_t x, y;
  float r = -1;
  kiln_tensor_init_contiguous(&x, (void*)v, KILN_DTYPE_F32, 1, &n);
  kiln_tensor_init_contiguous(&y, &r, KILN_DTYPE_F32, 0, NULL);
  kiln_reduce_params_t p = {corr, 2.0};
  KT_OK(kiln_kernel_reduce(op, &x, 0, &p, KILN_DTYPE_F32, &y));
  return r;
}

KT_TEST(edges) {
  const float nanv[3] = {1.0f, NAN, 3.0f};
  for (int op = KILN_REDUCE_SUM; op < KILN_REDUCE_COUNT; op++)
    if (op != KILN_REDUCE_ANY && op != KILN_REDUCE_ALL && op != KILN_REDUCE_NORM)
      KT_CHECK(isnan(f32_scalar(op, nanv, 3, 1)) || op == KILN_REDUCE_PROD ? 1 : 0);
  KT_CHECK(isnan(f32_scalar(KILN_REDUCE_AMAX, nanv, 3, 1)));
  KT_CHECK(isnan(f32_scalar(KILN_REDUCE_AMIN, nanv, 3, 1)));
  const float infv[3] = {1.0f, INFINITY, 3.0f}, ninf[2] = {-INFINITY, -INFINITY};
  KT_CHECK(f32_scalar(KILN_REDUCE_LOGSUMEXP, infv, 3, 1) == INFINITY);
  KT_CHECK(f32_scalar(KILN_REDUCE_LOGSUMEXP, ninf, 2, 1) == -INFINITY);
  /* empty: sum 0, prod 1, mean NaN, any 0, all 1, logsumexp -inf, amax error */
  KT_CHECK(f32_scalar(KILN_REDUCE_SUM, nanv, 0, 1) == 0);
  KT_CHECK(f32_scalar(KILN_REDUCE_PROD, nanv, 0, 1) == 1);
  KT_CHECK(isnan(f32_scalar(KILN_REDUCE_MEAN, nanv, 0, 1)));
  KT_CHECK(f32_scalar(KILN_REDUCE_LOGSUMEXP, nanv, 0, 1) == -INFINITY);
  KT_CHECK(f32_scalar(KILN_REDUCE_ALL, nanv, 0, 1) == 1 && f32_scalar(KILN_REDUCE_ANY, nanv, 0, 1) == 0);
  /* var with corrections; a single element with correction 1 is NaN */
  const float v4[4] = {1, 2, 4, 7};
  KT_NEAR(f32_scalar(KILN_REDUCE_VAR, v4, 4, 0), 5.25, 1e-6);
  KT_NEAR(f32_scalar(KILN_REDUCE_VAR, v4, 4, 1), 7.0, 1e-6);
  KT_CHECK(isinf(f32_scalar(KILN_REDUCE_VAR, v4, 4, 4)));
  KT_CHECK(isnan(f32_scalar(KILN_REDUCE_STD, v4, 1, 1)));
  /* var of data with a large mean keeps its digits (two-pass in double) */
  float shifted[1000];
  for (int i = 0; i < 1000; i++) shifted[i] = 1e4f + (float)(i % 10);
  KT_NEAR(f32_scalar(KILN_REDUCE_VAR, shifted, 1000, 0), 8.25, 1e-5);
  /* amax over an empty set, bad mask, out shape mismatch, float-only op on ints */
  int64_t s[2] = {0, 3}, s2[2] = {4, 3}, so[2] = {1, 3};
  float buf[12] = {0}, ob[3];
  kiln_tensor_t e, x, y;
  kiln_tensor_init_contiguous(&e, NULL, KILN_DTYPE_F32, 2, s);
  kiln_tensor_init_contiguous(&y, ob, KILN_DTYPE_F32, 2, so);
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_kernel_reduce(KILN_REDUCE_AMAX, &e, 1, NULL, KILN_DTYPE_F32, &y));
  kiln_tensor_init_contiguous(&x, buf, KILN_DTYPE_F32, 2, s2);
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_kernel_reduce(KILN_REDUCE_SUM, &x, 4, NULL, KILN_DTYPE_F32, &y));
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_kernel_reduce(KILN_REDUCE_SUM, &x, 2, NULL, KILN_DTYPE_F32, &y));
  KT_CHECK(strstr(kiln_status_message(), "[1, 3]") != NULL);
  x.dtype = KILN_DTYPE_I32;
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_kernel_reduce(KILN_REDUCE_MEAN, &x, 1, NULL, KILN_DTYPE_I32, &y));
  /* keepdim=False: a [4] result viewed as [4, 1] with stride 0 on the size-1 dim */
  float m[4 * 3], r4[4];
  for (int i = 0; i < 12; i++) m[i] = (float)i;
  kiln_tensor_t tm, tr;
  kiln_tensor_init_contiguous(&tm, m, KILN_DTYPE_F32, 2, s2);
  int64_t rs[2] = {4, 1};
  kiln_tensor_init_contiguous(&tr, r4, KILN_DTYPE_F32, 2, rs);
  tr.strides[1] = 0;
  KT_OK(kiln_kernel_reduce(KILN_REDUCE_SUM, &tm, 2, NULL, KILN_DTYPE_F32, &tr));
  for (int i = 0; i < 4; i++) KT_CHECK(r4[i] == (float)(9 * i + 3));
}

KT_TEST(sum_16m_f32_accuracy) {
  const int64_t n = 1 << 24;
  float* v = malloc(sizeof(float) * (size_t)n);
  double ref = 0;
  for (int64_t i = 0; i < n; i++) v[i] = (float)(ht_uniform() * 4 - 1), ref += v[i];
  float got = f32_scalar(KILN_REDUCE_SUM, v, n, 1);
  KT_CHECK(fabs(got - ref) <= 1e-6 * fabs(ref));
  float mean = f32_scalar(KILN_REDUCE_MEAN, v, n, 1);
  KT_CHECK(fabs(mean - ref / (double)n) <= 1e-6 * fabs(ref / (double)n));
  free(v);
}

static void run_index_case(kiln_reduce_index_op_t op, kiln_dtype_t dt, int ndim,
                           const int64_t* shape, int dim, int transposed, int nan) {
  ht_t x, v, ix;
  if (transposed) ht_make_t(&x, dt, ndim, shape);
  else ht_make(&x, dt, ndim, shape, NULL);
  ht_rand(&x, -3, 3); /* few distinct values: ties must pick the first index */
  int64_t oshape[4];
  for (int i = 0; i < ndim; i++) oshape[i] = i == dim ? 1 : shape[i];
  if (nan && ndim == 2 && shape[0] > 5) {
    int64_t a[2] = {3, 1}, b[2] = {4, 1};
    ht_set(&x.t, a, NAN);
    ht_set(&x.t, b, NAN);
  }
  ht_make(&v, dt, ndim, oshape, NULL);
  ht_make(&ix, KILN_DTYPE_I64, ndim, oshape, NULL);
  KT_OK(kiln_kernel_reduce_index(op, &x.t, dim, &v.t, &ix.t));
  int64_t oidx[4] = {0};
  int bad = 0;
  do {
    int64_t full[4];
    memcpy(full, oidx, sizeof full);
    int64_t best = 0;
    double bv = 0;
    for (int64_t i = 0; i < (ndim ? shape[dim] : 1); i++) {
      if (ndim) full[dim] = i;
      double xv = ht_get(&x.t, full);
      if (i == 0 || (!isnan(bv) && (isnan(xv) || (op == KILN_REDUCE_INDEX_MAX ? xv > bv : xv < bv))))
        bv = xv, best = i;
    }
    int64_t gi = *(int64_t*)ht_ptr(&ix.t, oidx);
    double gv = ht_get(&v.t, oidx);
    if ((gi != best || !ht_close(gv, bv, 0, 0)) && bad++ < 3) {
      fprintf(stderr, "  index op %d %s: got %lld/%g want %lld/%g\n", (int)op,
              kiln_dtype_name(dt), (long long)gi, gv, (long long)best, bv);
      kt_failed_checks++;
      kt_current_failed = 1;
    }
  } while (ht_next(oidx, oshape, ndim));
  ht_free(&x);
  ht_free(&v);
  ht_free(&ix);
}

KT_TEST(reduce_index) {
  const kiln_dtype_t dts[5] = {KILN_DTYPE_F32, KILN_DTYPE_BF16, KILN_DTYPE_I64, KILN_DTYPE_U8,
                               KILN_DTYPE_BOOL};
  const int64_t s1[1] = {50}, s2[2] = {30, 40}, s3[2] = {300, 70}, s4[2] = {40000, 2};
  for (int op = 0; op < 2; op++)
    for (int d = 0; d < 5; d++) {
      run_index_case(op, dts[d], 1, s1, 0, 0, 0);
      run_index_case(op, dts[d], 2, s2, 1, 0, 1);
      run_index_case(op, dts[d], 2, s2, 0, 0, 1);
      run_index_case(op, dts[d], 2, s3, 0, 1, 1);
      run_index_case(op, dts[d], 2, s4, 0, 0, 0);
      run_index_case(op, dts[d], 0, s1, 0, 0, 0);
    }
  /* flat argmax over a transposed view, no values output */
  ht_t x, ix;
  const int64_t s[2] = {13, 17};
  ht_make_t(&x, KILN_DTYPE_F32, 2, s);
  ht_rand(&x, -5, 5);
  int64_t at[2] = {7, 3};
  ht_set(&x.t, at, 100);
  ht_make(&ix, KILN_DTYPE_I64, 0, NULL, NULL);
  KT_OK(kiln_kernel_reduce_index(KILN_REDUCE_INDEX_MAX, &x.t, KILN_REDUCE_INDEX_ALL_DIMS, NULL, &ix.t));
  KT_CHECK(*(int64_t*)ix.buf == 7 * 17 + 3);
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_kernel_reduce_index(KILN_REDUCE_INDEX_MAX, &x.t, 2, NULL, &ix.t));
  ht_free(&x);
  ht_free(&ix);
  int64_t es[2] = {0, 3}, eo[2] = {1, 3};
  kiln_tensor_t e, ei;
  int64_t ib[3];
  kiln_tensor_init_contiguous(&e, NULL, KILN_DTYPE_F32, 2, es);
  kiln_tensor_init_contiguous(&ei, ib, KILN_DTYPE_I64, 2, eo);
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_kernel_reduce_index(KILN_REDUCE_INDEX_MIN, &e, 0, NULL, &ei));
}

static void run_scan_case(int prod, kiln_dtype_t dt, int ndim, const int64_t* shape, int dim,
                          int transposed, int inplace) {
  ht_t x, y;
  if (transposed) ht_make_t(&x, dt, ndim, shape);
  else ht_make(&x, dt, ndim, shape, NULL);
  if (prod && ht_is_float(dt)) ht_rand(&x, 0.8, 1.25);
  else ht_rand(&x, -4, 4);
  const int is_int = !ht_is_float(dt);
  kiln_dtype_t compute = is_int ? KILN_DTYPE_I64 : dt;
  ht_make(&y, compute, ndim, shape, NULL);
  ht_t ref;
  ht_make(&ref, dt, ndim, shape, NULL);
  KT_OK(kiln_kernel_copy(&x.t, &ref.t));
  kiln_tensor_t* out = inplace ? &x.t : &y.t;
  KT_OK((prod ? kiln_kernel_cumprod : kiln_kernel_cumsum)(&x.t, dim, compute, out));
  int d = dim < 0 ? dim + ndim : dim;
  int64_t idx[4] = {0};
  int bad = 0;
  if (ht_numel(&x.t)) do {
    int64_t j[4];
    memcpy(j, idx, sizeof j);
    double acc = prod;
    int64_t iacc = prod;
    for (int64_t i = 0; i <= (ndim ? idx[d] : 0); i++) {
      if (ndim) j[d] = i;
      double v = ht_get(&ref.t, j);
      acc = prod ? acc * v : acc + v;
      iacc = (int64_t)(prod ? (uint64_t)iacc * (uint64_t)(int64_t)v : (uint64_t)iacc + (uint64_t)(int64_t)v);
    }
    double want = is_int ? (double)ht_wrap(out->dtype, iacc) : ht_round(out->dtype, acc);
    double got = ht_get(out, idx);
    double rtol = dt == KILN_DTYPE_F32 ? 1e-6 : dt == KILN_DTYPE_BF16 ? 8e-3 : 1e-12;
    if (!ht_close(got, want, is_int ? 0 : rtol, is_int ? 0 : 1e-5) && bad++ < 3)
      HT_CHECK_CLOSE(got, want, rtol, 1e-5, "scan prod=%d %s dim %d", prod, kiln_dtype_name(dt), dim);
  } while (ht_next(idx, shape, ndim));
  ht_free(&x);
  ht_free(&y);
  ht_free(&ref);
}

KT_TEST(cumsum_cumprod) {
  const kiln_dtype_t dts[5] = {KILN_DTYPE_F32, KILN_DTYPE_F64, KILN_DTYPE_BF16, KILN_DTYPE_I32,
                               KILN_DTYPE_BOOL};
  const int64_t s1[1] = {100}, s2[2] = {30, 40}, s3[3] = {4, 5, 6}, s4[2] = {600, 20};
  for (int prod = 0; prod < 2; prod++)
    for (int d = 0; d < 5; d++) {
      run_scan_case(prod, dts[d], 1, s1, 0, 0, 0);
      run_scan_case(prod, dts[d], 2, s2, 1, 0, 0);
      run_scan_case(prod, dts[d], 2, s2, 0, 0, 0);
      run_scan_case(prod, dts[d], 2, s2, 1, 1, 0);
      run_scan_case(prod, dts[d], 3, s3, -1, 0, 0);
      run_scan_case(prod, dts[d], 0, s1, 0, 0, 0);
      run_scan_case(prod, dts[d], 2, s4, 0, 0, 0);
    }
  run_scan_case(0, KILN_DTYPE_F64, 2, s2, 0, 0, 1); /* in place, vertical */
  run_scan_case(1, KILN_DTYPE_F64, 2, s2, 1, 0, 1); /* in place, horizontal */
  int64_t z[2] = {0, 3};
  kiln_tensor_t e;
  kiln_tensor_init_contiguous(&e, NULL, KILN_DTYPE_F32, 2, z);
  KT_OK(kiln_kernel_cumsum(&e, 0, KILN_DTYPE_F32, &e));
  KT_FAILS(KILN_ERROR_INVALID_ARGUMENT, kiln_kernel_cumsum(&e, 2, KILN_DTYPE_F32, &e));
}

KT_MAIN()
