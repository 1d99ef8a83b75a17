/* SPDX-License-Identifier: Apache-2.0 */
/* sort.c - sort, argsort and topk (see kiln/kernels/index.h).
 *
 * Every element becomes a 64-bit key whose unsigned order is torch's order (NaN largest, -0.0 ==
 * 0.0; descending flips the bits) paired with its position. sort is a stable merge sort of the
 * pairs. topk replays libstdc++'s partial_sort / nth_element / sort step for step on the same
 * comparisons torch CPU makes, so ties resolve to the same indices. Values are then gathered
 * bytewise from x. Slices run in parallel; scratch is on the stack up to SORT_STACK elements. */
#include <stdatomic.h>
#include <stdio.h>

#include "kernels/index_internal.h"

#define SORT_STACK 256
#define SIGN64 (1ull << 63)

typedef struct kv {
  uint64_t k;
  int64_t i;
} kv_t;

static inline uint64_t key_of(const char* p, kiln_dtype_t dt) {
  switch (dt) {
    case KILN_DTYPE_F32: {
      uint32_t u;
      memcpy(&u, p, 4);
      if ((u & 0x7fffffffu) > 0x7f800000u) return UINT64_MAX;
      if (u == 0x80000000u) u = 0;
      return (u & 0x80000000u) ? (uint32_t)~u : (u | 0x80000000u);
    }
    case KILN_DTYPE_F64: {
      uint64_t u;
      memcpy(&u, p, 8);
      const uint64_t sb = 1ull << 63;
      if ((u & ~sb) > 0x7ff0000000000000ull) return UINT64_MAX;
      if (u == sb) u = 0;
      return (u & sb) ? ~u : (u | sb);
    }
    case KILN_DTYPE_F16:
    case KILN_DTYPE_BF16: {
      uint16_t h;
      memcpy(&h, p, 2);
      const uint16_t inf = dt == KILN_DTYPE_F16 ? 0x7c00u : 0x7f80u;
      if ((h & 0x7fffu) > inf) return UINT64_MAX;
      if (h == 0x8000u) h = 0;
      return (h & 0x8000u) ? (uint16_t)~h : (uint16_t)(h | 0x8000u);
    }
    case KILN_DTYPE_I8: return (uint64_t)(int64_t)(int8_t)*p ^ SIGN64;
    case KILN_DTYPE_I16: { int16_t v; memcpy(&v, p, 2); return (uint64_t)(int64_t)v ^ SIGN64; }
    case KILN_DTYPE_I32: { int32_t v; memcpy(&v, p, 4); return (uint64_t)(int64_t)v ^ SIGN64; }
    case KILN_DTYPE_I64: { int64_t v; memcpy(&v, p, 8); return (uint64_t)v ^ SIGN64; }
    default: return *(const uint8_t*)p;
  }
}

/* ---- stable merge sort ---------------------------------------------------------------------- */

static void ins_sort_stable(kv_t* a, int64_t n) {
  for (int64_t i = 1; i < n; i++) {
    const kv_t v = a[i];
    int64_t j = i;
    while (j > 0 && a[j - 1].k > v.k) {
      a[j] = a[j - 1];
      j--;
    }
    a[j] = v;
  }
}

/* Sorts a[0..n) stably by key; tmp has n slots. */
static void merge_sort(kv_t* a, kv_t* tmp, int64_t n) {
  const int64_t run = 32;
  for (int64_t i = 0; i < n; i += run) ins_sort_stable(a + i, n - i < run ? n - i : run);
  kv_t* src = a;
  kv_t* dst = tmp;
  for (int64_t w = run; w < n; w *= 2) {
    for (int64_t lo = 0; lo < n; lo += 2 * w) {
      const int64_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
      int64_t i = lo, j = mid, o = lo;
      while (i < mid && j < hi) dst[o++] = src[j].k < src[i].k ? src[j++] : src[i++];
      while (i < mid) dst[o++] = src[i++];
      while (j < hi) dst[o++] = src[j++];
    }
    kv_t* t = src;
    src = dst;
    dst = t;
  }
  if (src != a) memcpy(a, src, sizeof(kv_t) * (size_t)n);
}

/* ---- libstdc++ algorithms, replayed on key order (comp(a, b) = a.k < b.k) -------------------- */

#define LESS(a, b) ((a).k < (b).k)

static void adjust_heap(kv_t* f, int64_t hole, int64_t len, kv_t v) {
  const int64_t top = hole;
  int64_t sc = hole;
  while (sc < (len - 1) / 2) {
    sc = 2 * (sc + 1);
    if (LESS(f[sc], f[sc - 1])) sc--;
    f[hole] = f[sc];
    hole = sc;
  }
  if ((len & 1) == 0 && sc == (len - 2) / 2) {
    sc = 2 * (sc + 1);
    f[hole] = f[sc - 1];
    hole = sc - 1;
  }
  int64_t parent = (hole - 1) / 2;
  while (hole > top && LESS(f[parent], v)) {
    f[hole] = f[parent];
    hole = parent;
    parent = (hole - 1) / 2;
  }
  f[hole] = v;
}

static void make_heap(kv_t* f, int64_t len) {
  if (len < 2) return;
  for (int64_t parent = (len - 2) / 2;; parent--) {
    adjust_heap(f, parent, len, f[parent]);
    if (parent == 0) return;
  }
}

static void pop_heap(kv_t* f, int64_t len, kv_t* result) {
  const kv_t v = *result;
  *result = f[0];
  adjust_heap(f, 0, len, v);
}

static void heap_select(kv_t* f, int64_t mid, int64_t last) {
  make_heap(f, mid);
  for (int64_t i = mid; i < last; i++)
    if (LESS(f[i], f[0])) pop_heap(f, mid, &f[i]);
}

static void partial_sort(kv_t* f, int64_t mid, int64_t last) {
  heap_select(f, mid, last);
  for (int64_t len = mid; len > 1;) {
    len--;
    pop_heap(f, len, &f[len]);
  }
}

static void swap_kv(kv_t* a, kv_t* b) {
  const kv_t t = *a;
  *a = *b;
  *b = t;
}

static void unguarded_linear_insert(kv_t* last) {
  const kv_t v = *last;
  kv_t* next = last - 1;
  while (LESS(v, *next)) {
    *last = *next;
    last = next;
    --next;
  }
  *last = v;
}

static void insertion_sort(kv_t* f, kv_t* l) {
  if (f == l) return;
  for (kv_t* i = f + 1; i != l; ++i) {
    if (LESS(*i, *f)) {
      const kv_t v = *i;
      memmove(f + 1, f, sizeof(kv_t) * (size_t)(i - f));
      *f = v;
    } else {
      unguarded_linear_insert(i);
    }
  }
}

static void move_median_to_first(kv_t* r, kv_t* a, kv_t* b, kv_t* c) {
  if (LESS(*a, *b)) {
    if (LESS(*b, *c)) swap_kv(r, b);
    else if (LESS(*a, *c)) swap_kv(r, c);
    else swap_kv(r, a);
  } else if (LESS(*a, *c)) {
    swap_kv(r, a);
  } else if (LESS(*b, *c)) {
    swap_kv(r, c);
  } else {
    swap_kv(r, b);
  }
}

static kv_t* unguarded_partition(kv_t* first, kv_t* last, const kv_t* pivot) {
  for (;;) {
    while (LESS(*first, *pivot)) ++first;
    --last;
    while (LESS(*pivot, *last)) --last;
    if (!(first < last)) return first;
    swap_kv(first, last);
    ++first;
  }
}

static kv_t* partition_pivot(kv_t* first, kv_t* last) {
  kv_t* mid = first + (last - first) / 2;
  move_median_to_first(first, first + 1, mid, last - 1);
  return unguarded_partition(first + 1, last, first);
}

static int64_t lg2(int64_t n) { return 63 - __builtin_clzll((unsigned long long)n); }

static void introsort_loop(kv_t* first, kv_t* last, int64_t depth) {
  while (last - first > 16) {
    if (depth == 0) {
      partial_sort(first, last - first, last - first);
      return;
    }
    --depth;
    kv_t* cut = partition_pivot(first, last);
    introsort_loop(cut, last, depth);
    last = cut;
  }
}

static void std_sort(kv_t* f, kv_t* l) {
  if (f == l) return;
  introsort_loop(f, l, 2 * lg2(l - f));
  if (l - f > 16) {
    insertion_sort(f, f + 16);
    for (kv_t* i = f + 16; i != l; ++i) unguarded_linear_insert(i);
  } else {
    insertion_sort(f, l);
  }
}

static void nth_element(kv_t* first, kv_t* nth, kv_t* last) {
  if (first == last || nth == last) return;
  int64_t depth = 2 * lg2(last - first);
  while (last - first > 3) {
    if (depth == 0) {
      heap_select(first, nth + 1 - first, last - first);
      swap_kv(first, nth);
      return;
    }
    --depth;
    kv_t* cut = partition_pivot(first, last);
    if (cut <= nth) first = cut;
    else last = cut;
  }
  insertion_sort(first, last);
}

/* ---- drivers --------------------------------------------------------------------------------- */

typedef struct srt_ctx {
  ki_nd_t w; /* rest dims: op 0 = x, 1 = values, 2 = indices */
  const char* x;
  char* vals;
  char* idx;
  kiln_dtype_t dt;
  size_t es;
  int64_t n, k, xsd, vsd, isd;
  int descending, topk, sorted;
  _Atomic int oom; /* a chunk could not allocate its scratch */
} srt_ctx_t;

static void srt_slice(const srt_ctx_t* c, int64_t s, kv_t* a, kv_t* tmp) {
  const int64_t es = (int64_t)c->es;
  int64_t off[3];
  ki_nd_row(&c->w, s / c->w.inner, off);
  for (int k = 0; k < 3; k++) off[k] += (s % c->w.inner) * c->w.ist[k];
  const char* xp = c->x + off[0] * es;
  const uint64_t flip = c->descending ? UINT64_MAX : 0;
  for (int64_t j = 0; j < c->n; j++) {
    a[j].k = key_of(xp + j * c->xsd * es, c->dt) ^ flip;
    a[j].i = j;
  }
  int64_t m = c->n;
  if (!c->topk) {
    merge_sort(a, tmp, c->n);
  } else {
    m = c->k;
    if (c->k * 64 <= c->n) {
      partial_sort(a, c->k, c->n);
    } else {
      nth_element(a, a + c->k - 1, a + c->n);
      if (c->sorted) std_sort(a, a + c->k - 1);
    }
  }
  for (int64_t j = 0; j < m; j++) {
    if (c->vals)
      memcpy(c->vals + (off[1] + j * c->vsd) * es, xp + a[j].i * c->xsd * es, c->es);
    if (c->idx) memcpy(c->idx + (off[2] + j * c->isd) * 8, &a[j].i, 8);
  }
}

static void srt_slices(void* arg, int64_t s0, int64_t s1, int tid) {
  (void)tid;
  srt_ctx_t* c = arg;
  kv_t stack[2 * SORT_STACK];
  kv_t* buf = stack;
  if (c->n > SORT_STACK) { /* big slices: the sort outweighs one allocation per chunk */
    buf = kiln_allocator_alloc(NULL, sizeof(kv_t) * 2 * (size_t)c->n, 64);
    if (!buf) {
      atomic_store(&c->oom, 1);
      return;
    }
  }
  for (int64_t s = s0; s < s1; s++) srt_slice(c, s, buf, buf + c->n);
  if (buf != stack) kiln_allocator_free(NULL, buf);
}

/* Checks an output (NULL allowed) against x's shape with dim replaced by m. */
static kiln_status_t srt_check_out(const kiln_tensor_t* x, int dim, int64_t m,
                                   const kiln_tensor_t* o, kiln_dtype_t want, const char* op,
                                   const char* what) {
  if (!o) return KILN_OK;
  KILN_RETURN_IF_ERROR(kiln_idx_check(o, op, what));
  if (o->dtype != want)
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s: %s must be %s, got %s", op, what,
                      kiln_dtype_name(want), kiln_dtype_name(o->dtype));
  int ok = o->ndim == x->ndim;
  for (int d = 0; ok && d < x->ndim; d++) ok = o->shape[d] == (d == dim ? m : x->shape[d]);
  if (ok) return KILN_OK;
  char b1[200], b2[200];
  return kiln_error(KILN_ERROR_INVALID_ARGUMENT,
                    "%s: %s %s must be x %s with dim %d of size %lld", op, what,
                    kiln_idx_shape(o, b1), kiln_idx_shape(x, b2), dim, (long long)m);
}

static kiln_status_t srt_run(const kiln_tensor_t* x, int64_t k, int dim, int descending,
                             int topk, int sorted, kiln_tensor_t* values_out,
                             kiln_tensor_t* indices_out, const char* op) {
  KILN_RETURN_IF_ERROR(kiln_idx_check(x, op, "x"));
  if (!values_out && !indices_out)
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s: both outputs are NULL", op);
  KILN_RETURN_IF_ERROR(kiln_idx_wrap_dim(dim, x->ndim, op, &dim));
  const int64_t n = x->ndim ? x->shape[dim] : 1;
  if (topk && (k < 0 || k > n))
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT,
                      "%s: selected index k = %lld out of range for dim %d of size %lld", op,
                      (long long)k, dim, (long long)n);
  const int64_t m = topk ? k : n;
  KILN_RETURN_IF_ERROR(srt_check_out(x, dim, m, values_out, x->dtype, op, "values_out"));
  KILN_RETURN_IF_ERROR(srt_check_out(x, dim, m, indices_out, KILN_DTYPE_I64, op, "indices_out"));
  if (x->ndim == 0) { /* torch returns the scalar itself, even for k = 0 */
    if (values_out) memcpy(values_out->data, x->data, kiln_dtype_size(x->dtype));
    if (indices_out) memset(indices_out->data, 0, 8);
    return KILN_OK;
  }
  if (kiln_tensor_numel(x) == 0 || m == 0) return KILN_OK;
  srt_ctx_t c;
  memset(&c, 0, sizeof c);
  int64_t rs[KILN_MAX_DIMS], rx[KILN_MAX_DIMS], rv[KILN_MAX_DIMS], ri[KILN_MAX_DIMS];
  int nr = 0;
  for (int d = 0; d < x->ndim; d++)
    if (d != dim) {
      rs[nr] = x->shape[d];
      rx[nr] = x->strides[d];
      rv[nr] = values_out ? values_out->strides[d] : 0;
      ri[nr++] = indices_out ? indices_out->strides[d] : 0;
    }
  const int64_t* st[3] = {rx, rv, ri};
  kiln_idx_nd_init(&c.w, nr, rs, 3, st, 1);
  c.x = x->data;
  c.vals = values_out ? values_out->data : NULL;
  c.idx = indices_out ? indices_out->data : NULL;
  c.dt = x->dtype;
  c.es = kiln_dtype_size(x->dtype);
  c.n = n;
  c.k = k;
  c.xsd = x->ndim ? x->strides[dim] : 0;
  c.vsd = values_out && x->ndim ? values_out->strides[dim] : 0;
  c.isd = indices_out && x->ndim ? indices_out->strides[dim] : 0;
  c.descending = descending != 0;
  c.topk = topk;
  c.sorted = sorted != 0;
  atomic_init(&c.oom, 0);
  const int64_t work = n * (lg2(n) + 1);
  kiln_parallel_for(c.w.numel, ki_grain(work), srt_slices, &c);
  if (atomic_load(&c.oom))
    return kiln_error(KILN_ERROR_OUT_OF_MEMORY, "%s: cannot allocate scratch for %lld elements",
                      op, (long long)n);
  return KILN_OK;
}

/* torch.sort: always a stable merge sort per slice. */
kiln_status_t kiln_kernel_sort(const kiln_tensor_t* x, int dim, int descending, int stable,
                               kiln_tensor_t* values_out, kiln_tensor_t* indices_out) {
  (void)stable; /* always stable */
  return srt_run(x, 0, dim, descending, 0, 1, values_out, indices_out, "sort");
}

/* torch.argsort: sort without the values. */
kiln_status_t kiln_kernel_argsort(const kiln_tensor_t* x, int dim, int descending, int stable,
                                  kiln_tensor_t* indices_out) {
  (void)stable;
  if (!indices_out)
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "argsort: indices_out is NULL");
  return srt_run(x, 0, dim, descending, 0, 1, NULL, indices_out, "argsort");
}

/* torch.topk: replays libstdc++'s selection so ties match torch. */
kiln_status_t kiln_kernel_topk(const kiln_tensor_t* x, int64_t k, int dim, int largest,
                               int sorted, kiln_tensor_t* values_out, kiln_tensor_t* indices_out) {
  return srt_run(x, k, dim, largest != 0, 1, sorted, values_out, indices_out, "topk");
}
