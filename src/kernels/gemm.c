/* SPDX-License-Identifier: Apache-2.0 */
/* gemm.c - the f32 GEMM driver (BLIS/GotoBLAS loop nest), its threading, validation and the
 * BLAS-style entry points of kiln/kernels/gemm.h.
 *
 * Loop nest (BLIS order): for each NC-wide column panel, for each KC-deep slice, one pool job.
 * Its work units are row blocks of C (<= MC rows; or, for short C, column ranges of the
 * panel), claimed dynamically; a unit packs its A block (per-thread buffer, L2) and sweeps the
 * shared packed B slice (L3) with the micro-kernel, one NR sliver (L1) at a time. B is packed on
 * demand in groups of B_GROUP slivers: the first thread to need a group packs it (atomic flag),
 * so a slice needs no packing barrier and a thread only ever waits for a group being packed.
 * Units start their sweep at staggered groups so threads pack different groups first. The
 * epilogue runs in the last KC slice, on runs of up to EPI_COLS finished columns of a row block
 * (still in L2). Small products run the unpacked
 * micro-kernel on the caller, x @ W^T with one or two rows a GEMV kernel.
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>

#include "kernels/gemm_internal.h"
#include "kiln/allocator.h"
#include "kiln/parallel.h"
#include "runtime/checked.h"

#define MR KILN_GEMM_MR
#define NR KILN_GEMM_NR
#ifndef KC
#define KC 256 /* A sliver 6 KB + B sliver 16 KB fit a 32 KB L1 */
#endif
#ifndef MC
#define MC 144 /* A block 144 KB in L2 */
#endif
#ifndef NC
#define NC 4080 /* widest column panel */
#endif
#define ADIRECT_MAX_N 256 /* up to this N, A is read in place (see kiln_sgemm_run) */
#define B_GROUP 16 /* slivers packed together: 1 KB sequential reads per row of B */
#define SMALL_MNK (64 * 64 * 64) /* below: unpacked, caller thread */
#define THREAD_MNK (128 * 128 * 128) /* from here: use the pool */

/* ---- micro-kernel selection ---------------------------------------------------------------- */

static int g_isa_override; /* 0 auto, 1 generic, 2 AVX2 */
static int g_no_adirect;    /* 1: always pack A (tests, benchmarks) */

/* Allows (1, the default) or forbids (0) reading A in place for narrow products. */
void kiln_gemm_set_adirect(int on) { g_no_adirect = !on; }

static int g_no_pair; /* 1: one B sliver per micro-kernel call (tests, benchmarks) */
void kiln_gemm_set_pair(int on) { g_no_pair = !on; }

/* Selects the micro-kernels (0 best, 1 generic, 2 AVX2). */
void kiln_gemm_set_isa(int isa) { g_isa_override = isa; }

static int use_avx2(void) {
#if defined(__x86_64__) || defined(__i386__)
  return g_isa_override != 1 && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
  return 0;
#endif
}

/* The packed AVX-512F micro-kernel applies, given use_avx2() (the unpacked and GEMV kernels stay
 * AVX2). */
static int use_avx512(void) {
#if defined(__x86_64__)
  return g_isa_override == 0 && __builtin_cpu_supports("avx512f");
#else
  return 0;
#endif
}

/* ---- scratch: a mutex-guarded free list of aligned blocks, reused across calls. Blocks are
 * always either in use or on the list (reachable), so nothing leaks. Packing needs are bounded
 * by the blocking constants (a few MB); blocks above SCRATCH_KEEP are freed on release. ------ */

#define SCRATCH_KEEP ((size_t)16 << 20)

static pthread_mutex_t g_scratch_mu = PTHREAD_MUTEX_INITIALIZER;
static gemm_scratch_t* g_scratch_free;

/* A block of at least `bytes` (64-byte aligned) from the free list, grown if needed. */
gemm_scratch_t* kiln_gemm_scratch_acquire(size_t bytes) {
  pthread_mutex_lock(&g_scratch_mu);
  /* The smallest listed block that fits, else the largest one (it is grown). */
  gemm_scratch_t **best = NULL, **big = NULL;
  for (gemm_scratch_t** p = &g_scratch_free; *p != NULL; p = &(*p)->next) {
    if ((*p)->cap >= bytes && (best == NULL || (*p)->cap < (*best)->cap)) best = p;
    if (big == NULL || (*p)->cap > (*big)->cap) big = p;
  }
  if (best == NULL) best = big;
  gemm_scratch_t* s = NULL;
  if (best != NULL) {
    s = *best;
    *best = s->next;
  }
  pthread_mutex_unlock(&g_scratch_mu);
  if (s == NULL) {
    s = kiln_allocator_alloc(NULL, sizeof(*s), _Alignof(gemm_scratch_t));
    if (s == NULL) return NULL;
    s->cap = 0;
    s->buf = NULL;
  }
  s->next = NULL;
  if (s->cap < bytes) {
    kiln_allocator_free(NULL, s->buf);
    s->buf = kiln_allocator_alloc(NULL, bytes, 64);
    s->cap = s->buf ? bytes : 0;
    if (s->buf == NULL) {
      kiln_allocator_free(NULL, s);
      return NULL;
    }
  }
  return s;
}

/* Returns a block to the free list (NULL is a no-op); oversized blocks are freed. */
void kiln_gemm_scratch_release(gemm_scratch_t* s) {
  if (s == NULL) return;
  if (s->cap > SCRATCH_KEEP) {
    kiln_allocator_free(NULL, s->buf);
    kiln_allocator_free(NULL, s);
    return;
  }
  pthread_mutex_lock(&g_scratch_mu);
  s->next = g_scratch_free;
  g_scratch_free = s;
  pthread_mutex_unlock(&g_scratch_mu);
}

/* A thread's own block, kept from one call to the next: what a thread packs there stays in its
 * core's caches, where a region of a shared block would move between threads (its offset
 * depends on each product's shape) and every store would first take the line from the other
 * core. Freed when the thread exits. */
typedef struct gemm_local {
  gemm_scratch_t s;
  int busy; /* a GEMM of this thread packs into it (a nested one takes shared scratch) */
} gemm_local_t;

static pthread_key_t g_local_key;
static pthread_once_t g_local_once = PTHREAD_ONCE_INIT;
static int g_local_ok;

static void local_free(void* p) {
  gemm_local_t* l = p;
  kiln_allocator_free(NULL, l->s.buf);
  kiln_allocator_free(NULL, l);
}

static void local_key_init(void) { g_local_ok = pthread_key_create(&g_local_key, local_free) == 0; }

/* The calling thread's block of at least `bytes`, marked busy; NULL when it is busy or cannot be
 * had (the caller takes shared scratch). */
static gemm_local_t* local_scratch(size_t bytes) {
  pthread_once(&g_local_once, local_key_init);
  if (!g_local_ok) return NULL;
  gemm_local_t* l = pthread_getspecific(g_local_key);
  if (l == NULL) {
    l = kiln_allocator_alloc(NULL, sizeof(*l), _Alignof(gemm_local_t));
    if (l == NULL) return NULL;
    memset(l, 0, sizeof(*l));
    if (pthread_setspecific(g_local_key, l) != 0) {
      kiln_allocator_free(NULL, l);
      return NULL;
    }
  }
  if (l->busy) return NULL;
  if (l->s.cap < bytes) {
    kiln_allocator_free(NULL, l->s.buf);
    l->s.buf = kiln_allocator_alloc(NULL, bytes, 64);
    l->s.cap = l->s.buf != NULL ? bytes : 0;
    if (l->s.buf == NULL) return NULL;
  }
  l->busy = 1;
  return l;
}

/* ---- driver ---------------------------------------------------------------------------------- */

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
static int64_t round_up(int64_t a, int64_t b) { return ceil_div(a, b) * b; }
static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

typedef struct gemm_ctx {
  const kiln_sgemm_problem_t* pr;
  kiln_sgemm_ukr_fn ukr;
  kiln_sgemm_ukr_fn ukr2; /* non-NULL: two adjacent B slivers at once (kiln_sgemm_ukr2_avx512) */
  kiln_sgemm_ukr_adirect_fn dukr; /* non-NULL: A is read in place (narrow products), not packed */
  int dukr2; /* AVX-512: full 8-row slivers of a row-major A read in place by the pair kernel */
  int avx2;
  int nthreads;
  int split_n;          /* 0: units are row blocks of C, 1: column ranges of the panel */
  float* bpack;         /* the packed slice of the panel: nslv slivers of kc x NR (column
                         * ranges: the running thread's own block, see b_local) */
  int64_t b_local;      /* > 0: column ranges; each thread packs its slivers into its own
                         * block of b_local floats (see local_scratch) */
  atomic_int* ready;    /* per group: 0 unpacked, 1 being packed, 2 packed */
  float* apack;         /* nthreads blocks of a_stride floats */
  int64_t a_stride;
  int64_t* a_held;      /* per thread: a_key() of the block its apack holds (0: none) */
  int64_t job;          /* (panel, slice) jobs started so far in this call */
  int64_t jc, nc, pc, kc;  /* the current column panel and KC slice */
  int64_t pc0;             /* the slice that applies the caller's beta (later ones add) */
  int64_t nslv, grp, ngrp; /* NR slivers in the panel, slivers per packing group, groups */
  int64_t nunits, mslv; /* work units; MR slivers of C's rows */
  atomic_int failed;    /* a thread could not get scratch */
} gemm_ctx_t;

static void cpu_pause(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

/* Packed B sliver s; the first thread to need its group packs it, others wait. */
static const float* b_sliver(gemm_ctx_t* g, int64_t s) {
  const int64_t grp = s / g->grp;
  atomic_int* flag = &g->ready[grp];
  if (atomic_load_explicit(flag, memory_order_acquire) != 2) {
    int expect = 0;
    if (atomic_compare_exchange_strong_explicit(flag, &expect, 1, memory_order_acq_rel,
                                                memory_order_acquire)) {
      const int64_t j0 = grp * g->grp * NR, j1 = min64(j0 + g->grp * NR, g->nc);
      kiln_gemm_pack_b(g->bpack + j0 * g->kc, &g->pr->b, g->pc, g->jc + j0, g->kc, j1 - j0, g->avx2);
      atomic_store_explicit(flag, 2, memory_order_release);
    } else {
      for (int spins = 0; atomic_load_explicit(flag, memory_order_acquire) != 2; spins++) {
        if (spins < 4096)
          cpu_pause();
        else
          sched_yield(); /* the packer was descheduled */
      }
    }
  }
  return g->bpack + s * NR * g->kc;
}

/* The epilogue runs on runs of finished columns of a row block, up to EPI_COLS wide: the block
 * is still in L2 and every row is one long contiguous stretch of C and of the residual (per
 * 6 x 32 tile, each residual row was a separate 128-byte miss the prefetchers could not see, and
 * each activation call covered 32 elements). The ops are elementwise, so where the runs start
 * and end does not change a bit. */
#define EPI_COLS 256

typedef struct epi_run {
  int64_t j0, j1; /* finished columns of C not yet through the epilogue; j0 < 0: none */
} epi_run_t;

static void epi_flush(const kiln_sgemm_problem_t* pr, epi_run_t* r, int64_t i0, int64_t mb) {
  if (r->j0 >= 0) kiln_gemm_epilogue_tile(pr, pr->c + i0 * pr->ldc + r->j0, i0, r->j0, mb, r->j1 - r->j0);
  r->j0 = -1;
}

/* Columns [j, j + nr) of rows [i0, i0+mb) are final. */
static void epi_add(const kiln_sgemm_problem_t* pr, epi_run_t* r, int64_t i0, int64_t mb, int64_t j,
                    int64_t nr) {
  if (r->j0 >= 0 && j != r->j1) epi_flush(pr, r, i0, mb);
  if (r->j0 < 0) r->j0 = j;
  r->j1 = j + nr;
  if (r->j1 - r->j0 >= EPI_COLS) epi_flush(pr, r, i0, mb);
}

/* Identifies the A block of rows from i0 in the current slice (never 0). */
static int64_t a_key(const gemm_ctx_t* g, int64_t i0) { return g->job * (g->pr->m + 1) + i0 + 1; }

/* Rows [i0, i0+mb) of C against panel slivers [s0, s1) (visited from `first`, wrapping): pack
 * the A block (unless *held says ap already holds it; held may be NULL), then sweep the slivers
 * with the micro-kernel. */
static void block_kernel(gemm_ctx_t* g, float* ap, int64_t* held, int64_t i0, int64_t mb,
                         int64_t s0, int64_t s1, int64_t first) {
  const kiln_sgemm_problem_t* pr = g->pr;
  const int64_t ns = s1 - s0, kc = g->kc;
  const float beta = g->pc == g->pc0 ? pr->beta : 1.0f;
  const int last = g->pc + kc == pr->k && pr->ep != NULL;
  epi_run_t run = {-1, -1};
  if (g->dukr != NULL) { /* A in place: each 6-row sliver (in L1) against every B sliver */
    const float* a = (const float*)pr->a.p + g->pc;
    for (int64_t ir = 0; ir < mb; ir += MR) {
      const int mr = (int)min64(MR, mb - ir);
      const float* ar = a + (i0 + ir) * pr->a.rs;
      for (int64_t t = 0; t < ns; t++) {
        const int64_t s = s0 + (first - s0 + t) % ns;
        const float* bp = b_sliver(g, s);
        const int64_t j = g->jc + s * NR;
        const int nr = (int)min64(NR, g->jc + g->nc - j);
        float* c = pr->c + (i0 + ir) * pr->ldc + j;
        g->dukr(kc, ar, pr->a.rs, bp, c, pr->ldc, pr->alpha, beta, mr, nr);
        if (last) epi_add(pr, &run, i0 + ir, mr, j, nr);
      }
      epi_flush(pr, &run, i0 + ir, mr);
    }
    return;
  }
  if (g->dukr2) { /* A in place: full 8-row slivers; the last 1-7 rows are packed */
    const float* a = (const float*)pr->a.p + g->pc;
    const int64_t full8 = mb / 8 * 8;
    if (full8 < mb) kiln_gemm_pack_a(ap, &pr->a, i0 + full8, g->pc, mb - full8, kc);
    for (int64_t t = 0; t < ns; t += 2) { /* every sliver has its pair (see select_kernels) */
      const int64_t s = s0 + (first - s0 + t) % ns;
      const float* bp = b_sliver(g, s);
      (void)b_sliver(g, s + 1);
      const int64_t j = g->jc + s * NR;
      const int nr = (int)min64(2 * NR, g->jc + g->nc - j);
      for (int64_t ir = 0; ir < full8; ir += 8)
        kiln_sgemm_ukr2_adirect8_avx512(kc, a + (i0 + ir) * pr->a.rs, pr->a.rs, bp,
                                        pr->c + (i0 + ir) * pr->ldc + j, pr->ldc, pr->alpha, beta, nr);
      for (int64_t ir = full8; ir < mb; ir += MR) /* the packed edge, MR rows per call */
        g->ukr2(kc, ap + (ir - full8) * kc, bp, pr->c + (i0 + ir) * pr->ldc + j, pr->ldc, pr->alpha, beta,
                (int)min64(MR, mb - ir), nr);
      if (last) epi_add(pr, &run, i0, mb, j, nr);
    }
    epi_flush(pr, &run, i0, mb);
    return;
  }
  if (held == NULL || *held != a_key(g, i0)) {
    kiln_gemm_pack_a(ap, &pr->a, i0, g->pc, mb, kc);
    if (held != NULL) *held = a_key(g, i0);
  }
  for (int64_t t = 0; t < ns; t++) {
    const int64_t s = s0 + (first - s0 + t) % ns;
    const float* bp = b_sliver(g, s);
    const int64_t j = g->jc + s * NR;
    /* slivers 2q and 2q+1 of the panel run as one double-width kernel: pairs are fixed by
     * position (sweeps start at even slivers), so a column's arithmetic never depends on the
     * thread count or the sweep order */
    const int pair = g->ukr2 != NULL && (s & 1) == 0 && t + 1 < ns && s + 1 < s1;
    if (pair) {
      (void)b_sliver(g, s + 1); /* packed (its group may be another), at bp + NR*kc */
      t++;
    }
    const int nr = (int)min64(pair ? 2 * NR : NR, g->jc + g->nc - j);
    for (int64_t ir = 0; ir < mb; ir += MR) {
      const int mr = (int)min64(MR, mb - ir);
      float* c = pr->c + (i0 + ir) * pr->ldc + j;
      if (pair) g->ukr2(kc, ap + ir * kc, bp, c, pr->ldc, pr->alpha, beta, mr, nr);
      else g->ukr(kc, ap + ir * kc, bp, c, pr->ldc, pr->alpha, beta, mr, nr);
    }
    if (last) epi_add(pr, &run, i0, mb, j, nr);
  }
  epi_flush(pr, &run, i0, mb);
}

/* The micro-kernels for pr (g->split_n already set): the packed kernel, the AVX-512 pair kernels
 * (A read in place when it is row-major f32) and, for narrow products on AVX2, reading a
 * row-major f32 A in place (with few B slivers per A block, packing A costs a noticeable share
 * of the multiply). */
static void select_kernels(gemm_ctx_t* g, const kiln_sgemm_problem_t* pr, int avx2) {
  g->ukr = avx2 && use_avx512() ? kiln_sgemm_ukr_avx512 : avx2 ? kiln_sgemm_ukr_avx2 : kiln_sgemm_ukr_generic;
  g->ukr2 = avx2 && use_avx512() && !g_no_pair ? kiln_sgemm_ukr2_avx512 : NULL;
  g->avx2 = avx2;
  g->dukr = avx2 && !use_avx512() && !g_no_adirect && !g->split_n && pr->n <= ADIRECT_MAX_N &&
                    pr->a.dtype == KILN_DTYPE_F32 && pr->a.cs == 1 && pr->a.rs >= 1
                ? kiln_sgemm_ukr_adirect_avx2
                : NULL;
  /* On AVX-512 a row-major f32 A is read in place, 8 rows per pair-kernel call (the same bits as
   * packing it; a last 1-7 rows are packed), when every
   * sliver has its pair (an even count: ranges and sweeps start at even slivers). 2 threads:
   * 128 x 384 x 128 48 -> 45 us, 1024 x 128 x 384 340 -> 294 us, 128 x 128 x 384 (K-parallel)
   * 55 -> 49 us, against packing A with 6-row slivers. A column-major A (a weight gradient's
   * dY^T) stays packed: read in place it was no faster (512 x 128 x 1024: 479 against 450 us). */
  const int64_t nslv = ceil_div(pr->n, NR);
  g->dukr2 = g->ukr2 != NULL && !g_no_adirect && nslv % 2 == 0 && pr->n <= NC &&
             pr->a.dtype == KILN_DTYPE_F32 && pr->a.cs == 1 && pr->a.rs >= 1;
}

/* Thread tid's block of `floats` in the per-thread array at base (nthreads blocks); an id beyond
 * the pool it was sized for (nested in a foreign job) gets a private block in *own. NULL (and
 * *failed set) when that cannot be had. */
static float* thread_block(float* base, int64_t floats, int nthreads, int tid, gemm_scratch_t** own,
                           atomic_int* failed) {
  *own = NULL;
  if (tid >= 0 && tid < nthreads) return base + (int64_t)tid * floats;
  *own = kiln_gemm_scratch_acquire(sizeof(float) * (size_t)floats);
  if (*own == NULL) {
    atomic_store(failed, 1);
    return NULL;
  }
  return (*own)->buf;
}

static void run_units(void* ctx, int64_t begin, int64_t end, int tid) {
  gemm_ctx_t* g = ctx;
  const kiln_sgemm_problem_t* pr = g->pr;
  gemm_scratch_t *own, *own_b = NULL;
  float* ap = thread_block(g->apack, g->a_stride, g->nthreads, tid, &own, &g->failed);
  if (ap == NULL) return;
  gemm_ctx_t local;
  gemm_local_t* lb = NULL;
  if (g->b_local > 0) { /* this thread's packed-B block */
    lb = local_scratch(sizeof(float) * (size_t)g->b_local);
    float* bp = lb != NULL ? lb->s.buf : NULL;
    if (bp == NULL) { /* nested in a GEMM of this thread, or out of memory */
      own_b = kiln_gemm_scratch_acquire(sizeof(float) * (size_t)g->b_local);
      if (own_b == NULL) {
        atomic_store(&g->failed, 1);
        kiln_gemm_scratch_release(own);
        return;
      }
      bp = own_b->buf;
    }
    local = *g;
    local.bpack = bp;
    g = &local;
  }
  /* a column-range unit reuses the block its thread packed for an earlier unit of the slice */
  int64_t* held = own == NULL && g->a_held != NULL ? &g->a_held[tid] : NULL;
  for (int64_t u = begin; u < end; u++) {
    if (!g->split_n) { /* a row block; the first T units start their sweeps T groups apart */
      const int64_t r0 = u * g->mslv / g->nunits * MR, r1 = min64((u + 1) * g->mslv / g->nunits * MR, pr->m);
      const int64_t first = ((u % g->nthreads) * g->ngrp / g->nthreads * g->grp) & ~(int64_t)1;
      block_kernel(g, ap, NULL, r0, r1 - r0, 0, g->nslv, first);
    } else { /* a column range, all rows */
      const int64_t npair = (g->nslv + 1) / 2; /* ranges start at even slivers (see pairs) */
      const int64_t s0 = min64(2 * (u * npair / g->nunits), g->nslv);
      const int64_t s1 = min64(2 * ((u + 1) * npair / g->nunits), g->nslv);
      if (s0 == s1) continue;
      for (int64_t i = 0; i < pr->m; i += MC) block_kernel(g, ap, held, i, min64(MC, pr->m - i), s0, s1, s0);
    }
  }
  kiln_gemm_scratch_release(own);
  kiln_gemm_scratch_release(own_b);
  if (lb != NULL) lb->busy = 0;
}

/* ---- K-parallel mode -------------------------------------------------------------------------
 * Short, deep products (weight gradients: M x N of a few hundred, K = tokens) have too few row
 * blocks per KC slice to keep the threads busy, and every slice is a pool job with its own B
 * packing. Here the slices are the work units instead: slice 0 accumulates into C (with the
 * caller's beta), slice s > 0 writes alpha * A_s B_s into a private partial P_s (beta 0, its own
 * packed B), and a second job adds P_1, P_2, ... to C in slice order, then runs the epilogue.
 * The serial loop computes the same values in the same order (each later slice's store is
 * C + alpha * acc, one rounding of the sum of two rounded terms, as c + P_s here), so results
 * are bit-identical to one thread and to the slice-by-slice path. */

#define KPAR_PARTIAL_MAX ((int64_t)2 << 20) /* floats of partials (8 MB) */

static int g_kpar = 0; /* 0 auto, 1 whenever eligible, 2 never */
void kiln_gemm_set_kpar(int mode) { g_kpar = mode; }

typedef struct kpar_ctx {
  const kiln_sgemm_problem_t* pr;
  gemm_ctx_t base; /* kernels and panel geometry (one panel: jc 0, nc n) */
  int64_t kc_max, nslices, per_thread;
  float* area;     /* per thread: packed B slice, A block, group flags */
  float* partials; /* nslices - 1 blocks of m x n */
  atomic_int failed;
} kpar_ctx_t;

static void kpar_slices(void* ctx, int64_t begin, int64_t end, int tid) {
  kpar_ctx_t* k = ctx;
  const kiln_sgemm_problem_t* pr = k->pr;
  gemm_scratch_t* own;
  float* area = thread_block(k->area, k->per_thread, k->base.nthreads, tid, &own, &k->failed);
  if (area == NULL) return;
  for (int64_t u = begin; u < end; u++) {
    kiln_sgemm_problem_t pu = *pr;
    pu.ep = NULL; /* after the reduction */
    if (u > 0) {
      pu.c = k->partials + (u - 1) * pr->m * pr->n;
      pu.ldc = pr->n;
      pu.beta = 0.0f;
    }
    gemm_ctx_t g = k->base;
    g.pr = &pu;
    g.pc = g.pc0 = u * k->kc_max;
    g.kc = min64(k->kc_max, pr->k - g.pc);
    g.bpack = area;
    g.apack = area + k->kc_max * round_up(g.nc, NR);
    g.ready = (atomic_int*)(void*)(g.apack + g.a_stride);
    for (int64_t f = 0; f < g.ngrp; f++) atomic_init(&g.ready[f], 0);
    for (int64_t i = 0; i < pr->m; i += MC)
      block_kernel(&g, g.apack, NULL, i, min64(MC, pr->m - i), 0, g.nslv, 0);
  }
  kiln_gemm_scratch_release(own);
}

static void kpar_reduce(void* ctx, int64_t r0, int64_t r1, int tid) {
  (void)tid;
  const kpar_ctx_t* k = ctx;
  const kiln_sgemm_problem_t* pr = k->pr;
  const int64_t n = pr->n;
  for (int64_t i = r0; i < r1; i++) {
    float* c = pr->c + i * pr->ldc;
    for (int64_t s = 1; s < k->nslices; s++) {
      const float* p = k->partials + (s - 1) * pr->m * n + i * n;
      for (int64_t j = 0; j < n; j++) c[j] += p[j];
    }
    if (pr->ep != NULL) kiln_gemm_epilogue_tile(pr, c, i, 0, 1, n);
  }
}

/* Runs pr in K-parallel mode when it qualifies; *done = 1 if it did. */
static kiln_status_t kpar_run(const kiln_sgemm_problem_t* pr, int64_t T, int avx2, int* done) {
  *done = 0;
  if (g_kpar == 2 || T < 2) return KILN_OK;
  const int64_t nslices = ceil_div(pr->k, KC), kc_max = ceil_div(pr->k, nslices);
  const int64_t mslv = ceil_div(pr->m, MR), nc = round_up(pr->n, NR);
  if (nslices < 2 || pr->n > NC || (nslices - 1) * pr->m * pr->n > KPAR_PARTIAL_MAX) return KILN_OK;
  /* auto: while a slice has fewer row blocks than ~4 per thread and there are slices for
   * every thread */
  if (g_kpar == 0 && !(mslv < 4 * MC / MR * T / 2 && nslices >= T)) return KILN_OK;
  kpar_ctx_t k;
  memset(&k, 0, sizeof k);
  k.pr = pr;
  k.kc_max = kc_max;
  k.nslices = nslices;
  gemm_ctx_t* g = &k.base; /* split_n 0: every unit sweeps the whole panel */
  select_kernels(g, pr, avx2);
  g->nthreads = (int)T;
  g->jc = 0;
  g->nc = pr->n;
  g->nslv = ceil_div(pr->n, NR);
  g->grp = B_GROUP;
  g->ngrp = ceil_div(g->nslv, g->grp);
  g->a_stride = round_up(min64(round_up(pr->m, MR), MC) * kc_max, 16);
  k.per_thread = round_up(kc_max * nc + g->a_stride + round_up(g->ngrp, 16), 16);
  const int64_t partial = (nslices - 1) * pr->m * pr->n;
  const size_t bytes = sizeof(float) * (size_t)(k.per_thread * T + partial);
  gemm_scratch_t* scratch = kiln_gemm_scratch_acquire(bytes);
  if (scratch == NULL)
    return kiln_error(KILN_ERROR_OUT_OF_MEMORY, "kiln_sgemm: cannot allocate %zu bytes of K-parallel scratch", bytes);
  k.area = scratch->buf;
  k.partials = scratch->buf + k.per_thread * T;
  atomic_init(&k.failed, 0);
  kiln_parallel_for(nslices, 1, kpar_slices, &k);
  if (!atomic_load(&k.failed))
    kiln_parallel_for(pr->m, ceil_div(pr->m, 4 * T), kpar_reduce, &k);
  kiln_gemm_scratch_release(scratch);
  if (atomic_load(&k.failed))
    return kiln_error(KILN_ERROR_OUT_OF_MEMORY, "kiln_sgemm: out of memory for packing scratch");
  *done = 1;
  return KILN_OK;
}

/* C = beta*C (beta == 0 writes zeros), then the epilogue: the k == 0 / alpha == 0 cases. */
static void scale_only(const kiln_sgemm_problem_t* pr) {
  for (int64_t i = 0; i < pr->m; i++) {
    float* row = pr->c + i * pr->ldc;
    if (pr->beta == 0.0f)
      memset(row, 0, sizeof(float) * (size_t)pr->n);
    else if (pr->beta != 1.0f)
      for (int64_t j = 0; j < pr->n; j++) row[j] *= pr->beta;
  }
  if (pr->ep != NULL) kiln_gemm_epilogue_tile(pr, pr->c, 0, 0, pr->m, pr->n);
}

/* Unpacked path: B has unit column stride, f32 operands. */
typedef struct small_ctx {
  const kiln_sgemm_problem_t* pr;
  kiln_sgemm_ukr_strided_fn ukr;
} small_ctx_t;

static void small_range(void* ctx, int64_t begin, int64_t end, int tid) {
  (void)tid;
  const small_ctx_t* s = ctx;
  const kiln_sgemm_problem_t* pr = s->pr;
  const float* a = pr->a.p;
  const float* b = pr->b.p;
  for (int64_t jb = begin; jb < end; jb++) {
    const int64_t j = jb * NR;
    const int nr = (int)min64(NR, pr->n - j);
    for (int64_t i = 0; i < pr->m; i += MR) {
      const int mr = (int)min64(MR, pr->m - i);
      float* c = pr->c + i * pr->ldc + j;
      s->ukr(pr->k, a + i * pr->a.rs, pr->a.rs, pr->a.cs, b + j, pr->b.rs, c, pr->ldc, pr->alpha,
             pr->beta, mr, nr);
      if (pr->ep != NULL) kiln_gemm_epilogue_tile(pr, c, i, j, mr, nr);
    }
  }
}

/* GEMV-like path: at most GEMV_ROWS rows of row-major A times a transposed B (B^T rows are
 * contiguous along k), as in x @ W^T at decode time; B is streamed once, never packed. */
#define GEMV_ROWS 2
#define GEMV_COLS 64 /* columns per work unit */

static void gemv_range(void* ctx, int64_t begin, int64_t end, int tid) {
  (void)tid;
  const kiln_sgemm_problem_t* pr = ctx;
  const int64_t j0 = begin * GEMV_COLS, j1 = min64(end * GEMV_COLS, pr->n);
  for (int64_t i = 0; i < pr->m; i++) {
    float* c = pr->c + i * pr->ldc + j0;
    const float* x = (const float*)pr->a.p + i * pr->a.rs;
    if (pr->b.nblk == 0) {
      kiln_sgemv_t_avx2(pr->k, x, (const float*)pr->b.p + j0 * pr->b.cs, pr->b.cs, j1 - j0, c,
                        pr->alpha, pr->beta);
    } else { /* the part of every weight block inside [j0, j1) */
      int64_t lo = 0;
      for (int s = 0; s < pr->b.nblk && lo < j1; lo += pr->b.blk[s++].n) {
        const int64_t b0 = lo > j0 ? lo : j0, b1 = min64(lo + pr->b.blk[s].n, j1);
        if (b0 < b1)
          kiln_sgemv_t_avx2(pr->k, x, pr->b.blk[s].w + (b0 - lo) * pr->b.blk[s].ld, pr->b.blk[s].ld,
                            b1 - b0, c + (b0 - j0), pr->alpha, pr->beta);
      }
    }
    if (pr->ep != NULL) kiln_gemm_epilogue_tile(pr, c, i, j0, 1, j1 - j0);
  }
}

/* Runs a validated problem. */
kiln_status_t kiln_sgemm_run(const kiln_sgemm_problem_t* pr) {
  if (pr->m == 0 || pr->n == 0) return KILN_OK;
  if (pr->k == 0 || pr->alpha == 0.0f) {
    scale_only(pr);
    return KILN_OK;
  }
  const int avx2 = use_avx2();
  const double mnk = (double)pr->m * (double)pr->n * (double)pr->k;
  int nthreads = 1;
  if (!pr->serial && mnk >= THREAD_MNK) nthreads = kiln_threadpool_size(kiln_threadpool_default());

  const int unit_b = pr->a.dtype == KILN_DTYPE_F32 && pr->b.dtype == KILN_DTYPE_F32 && pr->b.cs == 1 &&
                     pr->b.nblk == 0;
  if (unit_b && (mnk < SMALL_MNK || pr->m <= MR)) {
    /* Tiny products, or a few rows (GEMV-like: every B element is used once, packing would
     * triple the memory traffic). */
    small_ctx_t s = {pr, avx2 ? kiln_sgemm_ukr_strided_avx2 : kiln_sgemm_ukr_strided_generic};
    const int64_t nslv = ceil_div(pr->n, NR);
    if (nthreads > 1 && nslv >= 2)
      kiln_parallel_for(nslv, ceil_div(nslv, 2 * (int64_t)nthreads), small_range, &s);
    else
      small_range(&s, 0, nslv, 0);
    return KILN_OK;
  }
  if (avx2 && pr->m <= GEMV_ROWS && pr->a.dtype == KILN_DTYPE_F32 && pr->a.cs == 1 &&
      pr->b.dtype == KILN_DTYPE_F32 && pr->b.rs == 1) {
    const int64_t units = ceil_div(pr->n, GEMV_COLS);
    if (nthreads > 1 && units >= 2)
      kiln_parallel_for(units, ceil_div(units, 4 * (int64_t)nthreads), gemv_range, (void*)pr);
    else
      gemv_range((void*)pr, 0, units, 0);
    return KILN_OK;
  }

  if (nthreads > 1) {
    int done;
    KILN_RETURN_IF_ERROR(kpar_run(pr, nthreads, avx2, &done));
    if (done) return KILN_OK;
  }
  /* Blocking: balanced KC slices and NC panels; one pool job per (panel, slice). */
  const int64_t kc_max = ceil_div(pr->k, ceil_div(pr->k, KC));
  const int64_t nc_max = round_up(ceil_div(pr->n, ceil_div(pr->n, NC)), NR), nslv_max = nc_max / NR;
  const int64_t T = nthreads, mslv = ceil_div(pr->m, MR);
  gemm_ctx_t g;
  memset(&g, 0, sizeof(g));
  /* Column ranges when C is short: too few row slivers to share, or a single row block (then
   * every thread packs the whole A block once and only its own part of B, and no thread waits
   * for another's B packing; 128 x 384 x 128 on 2 threads 62 -> 49 us). */
  g.split_n = T > 1 && ((mslv < 8 * T && nslv_max > mslv) || (pr->m <= MC && nslv_max >= 2 * T));
  int64_t rows_max;
  if (!g.split_n) {
    g.nunits = ceil_div(mslv, MC / MR);
    if (T > 1 && g.nunits < 4 * T) g.nunits = min64(mslv, 4 * T);
    rows_max = ceil_div(mslv, g.nunits) * MR;
  } else {
    g.nunits = min64((nslv_max + 1) / 2, 2 * T); /* sliver pairs; a thread's A block is reused */
    rows_max = min64(round_up(pr->m, MR), MC);
  }
  g.pr = pr;
  select_kernels(&g, pr, avx2);
  /* Row blocks: groups small enough that threads starting apart rarely meet. Column ranges
   * (each thread packs into its own block): single sliver pairs, which never straddle two
   * ranges (ranges start at even slivers). */
  g.grp = g.split_n ? 2 : T > 1 ? min64(B_GROUP, ceil_div(nslv_max, 2 * T)) : B_GROUP;
  const int64_t a_stride = round_up(rows_max * kc_max, 16);
  const int64_t nflags = ceil_div(nslv_max, g.grp);
  const int64_t b_floats = g.split_n ? 0 : kc_max * nc_max;
  const int64_t floats = b_floats + a_stride * T + round_up(nflags, 16) + 2 * T;
  const size_t bytes = sizeof(float) * (size_t)floats;
  gemm_scratch_t* scratch = kiln_gemm_scratch_acquire(bytes);
  if (scratch == NULL)
    return kiln_error(KILN_ERROR_OUT_OF_MEMORY, "kiln_sgemm: cannot allocate %zu bytes of packing scratch", bytes);

  g.nthreads = nthreads;
  g.bpack = g.split_n ? NULL : scratch->buf; /* column ranges: set per thread by run_units */
  g.b_local = g.split_n ? kc_max * nc_max : 0;
  g.apack = scratch->buf + b_floats;
  g.ready = (atomic_int*)(void*)(g.apack + a_stride * T);
  g.a_stride = a_stride;
  g.a_held = (int64_t*)(void*)(g.apack + a_stride * T + round_up(nflags, 16));
  for (int64_t t = 0; t < T; t++) g.a_held[t] = 0;
  g.mslv = mslv;
  atomic_init(&g.failed, 0);
  for (g.jc = 0; g.jc < pr->n; g.jc += nc_max) {
    g.nc = min64(nc_max, pr->n - g.jc);
    g.nslv = ceil_div(g.nc, NR);
    g.ngrp = ceil_div(g.nslv, g.grp);
    for (g.pc = 0; g.pc < pr->k; g.pc += kc_max) {
      g.kc = min64(kc_max, pr->k - g.pc);
      for (int64_t f = 0; f < g.ngrp; f++) atomic_init(&g.ready[f], 0);
      g.job++;
      if (T > 1 && g.nunits > 1 && g.split_n) /* a thread keeps its columns (weights in its L2) */
        kiln_parallel_units(g.nunits, run_units, &g);
      else if (T > 1 && g.nunits > 1)
        kiln_parallel_for(g.nunits, 1, run_units, &g);
      else
        run_units(&g, 0, g.nunits, 0);
    }
  }
  kiln_gemm_scratch_release(scratch);
  if (atomic_load(&g.failed))
    return kiln_error(KILN_ERROR_OUT_OF_MEMORY, "kiln_sgemm: out of memory for packing scratch");
  return KILN_OK;
}

/* ---- validation and BLAS-style entry points ----------------------------------------------- */

static kiln_status_t check_gemm(const char* fn, int64_t m, int64_t n, int64_t k, const void* a,
                                int64_t lda, int ta, const void* b, int64_t ldb, int tb,
                                const void* c, int64_t ldc, int reads_ab) {
  if (m < 0 || n < 0 || k < 0)
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s: negative dimension (m=%lld n=%lld k=%lld)",
                      fn, (long long)m, (long long)n, (long long)k);
  const int64_t a_cols = ta ? m : k, b_cols = tb ? k : n;
  if (lda < (a_cols > 1 ? a_cols : 1))
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s: lda=%lld < %lld (m=%lld k=%lld trans_a=%d)",
                      fn, (long long)lda, (long long)(a_cols > 1 ? a_cols : 1), (long long)m,
                      (long long)k, ta != 0);
  if (ldb < (b_cols > 1 ? b_cols : 1))
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s: ldb=%lld < %lld (k=%lld n=%lld trans_b=%d)",
                      fn, (long long)ldb, (long long)(b_cols > 1 ? b_cols : 1), (long long)k,
                      (long long)n, tb != 0);
  if (ldc < (n > 1 ? n : 1))
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s: ldc=%lld < n=%lld", fn, (long long)ldc,
                      (long long)n);
  /* element spans (rows - 1) * ld + cols of A, B, C, in bytes, must fit int64 */
  const int64_t a_rows = ta ? k : m, b_rows = tb ? n : k;
  int64_t sa, sb, sc;
  if (!kiln_muladd_i64(a_rows, lda, a_cols, &sa) || !kiln_mul_i64(sa, 8, &sa) ||
      !kiln_muladd_i64(b_rows, ldb, b_cols, &sb) || !kiln_mul_i64(sb, 8, &sb) ||
      !kiln_muladd_i64(m, ldc, n, &sc) || !kiln_mul_i64(sc, 8, &sc))
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT,
                      "%s: matrix sizes overflow (m=%lld n=%lld k=%lld lda=%lld ldb=%lld ldc=%lld)",
                      fn, (long long)m, (long long)n, (long long)k, (long long)lda,
                      (long long)ldb, (long long)ldc);
  if (m > 0 && n > 0 && c == NULL)
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s: C is NULL", fn);
  if (reads_ab && m > 0 && n > 0 && k > 0 && (a == NULL || b == NULL))
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s: A or B is NULL", fn);
  return KILN_OK;
}

static void fill_problem(kiln_sgemm_problem_t* pr, int ta, int tb, int64_t m, int64_t n,
                         int64_t k, float alpha, const float* a, int64_t lda, const float* b,
                         int64_t ldb, float beta, float* c, int64_t ldc) {
  memset(pr, 0, sizeof(*pr));
  pr->m = m;
  pr->n = n;
  pr->k = k;
  pr->alpha = alpha;
  pr->beta = beta;
  pr->a = (kiln_gemm_src_t){a, ta ? 1 : lda, ta ? lda : 1, KILN_DTYPE_F32, NULL, 0};
  pr->b = (kiln_gemm_src_t){b, tb ? 1 : ldb, tb ? ldb : 1, KILN_DTYPE_F32, NULL, 0};
  /* A single column or row: pick the unit-stride reading so the fast paths apply. */
  if (n == 1) pr->b.cs = 1;
  pr->c = c;
  pr->ldc = ldc;
}

/* C = alpha*op(A)*op(B) + beta*C. */
kiln_status_t kiln_sgemm(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                         const float* a, int64_t lda, const float* b, int64_t ldb, float beta,
                         float* c, int64_t ldc) {
  return kiln_sgemm_ex(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, NULL);
}

/* Checks an epilogue for an n-column C; *out is ep, or NULL when it does nothing. */
static kiln_status_t check_epilogue(const char* fn, const kiln_gemm_epilogue_t* ep, int64_t n,
                                    const kiln_gemm_epilogue_t** out) {
  *out = NULL;
  if (ep == NULL) return KILN_OK;
  if (ep->bias_axis != 0 && ep->bias_axis != 1)
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s: bias_axis %d is not 0 or 1", fn, ep->bias_axis);
  if (ep->activation < KILN_GEMM_ACT_NONE || ep->activation > KILN_GEMM_ACT_SILU)
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s: unknown activation %d", fn, ep->activation);
  if (ep->residual_op != KILN_GEMM_RESIDUAL_ADD && ep->residual_op != KILN_GEMM_RESIDUAL_MUL)
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s: unknown residual_op %d", fn, ep->residual_op);
  if (ep->residual != NULL && ep->ldr < (n > 1 ? n : 1))
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s: ldr=%lld < n=%lld", fn, (long long)ep->ldr,
                      (long long)n);
  if (ep->bias != NULL || ep->residual != NULL || ep->activation != KILN_GEMM_ACT_NONE) *out = ep;
  return KILN_OK;
}

/* kiln_sgemm plus the fused epilogue. */
kiln_status_t kiln_sgemm_ex(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k,
                            float alpha, const float* a, int64_t lda, const float* b, int64_t ldb,
                            float beta, float* c, int64_t ldc, const kiln_gemm_epilogue_t* ep) {
  KILN_RETURN_IF_ERROR(check_gemm("kiln_sgemm", m, n, k, a, lda, trans_a, b, ldb, trans_b, c, ldc,
                                  alpha != 0.0f));
  kiln_sgemm_problem_t pr;
  fill_problem(&pr, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  KILN_RETURN_IF_ERROR(check_epilogue("kiln_sgemm_ex", ep, n, &pr.ep));
  KILN_RETURN_IF_ERROR(kiln_gemm_resolve_act(&pr));
  return kiln_sgemm_run(&pr);
}

/* kiln_sgemm_ex against the row-wise stack of weight blocks, read in place. */
kiln_status_t kiln_sgemm_wcat(int trans_a, int64_t m, int64_t k, float alpha, const float* a,
                              int64_t lda, int nblk, const kiln_gemm_wblock_t* blk, float beta,
                              float* c, int64_t ldc, const kiln_gemm_epilogue_t* ep) {
  if (blk == NULL || nblk < 1 || nblk > KILN_GEMM_MAX_WBLOCKS)
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "kiln_sgemm_wcat: %d weight blocks (%s; 1..%d allowed)",
                      nblk, blk == NULL ? "NULL" : "given", KILN_GEMM_MAX_WBLOCKS);
  int64_t n = 0;
  const int reads = alpha != 0.0f && m > 0 && k > 0;
  for (int s = 0; s < nblk; s++) {
    if (blk[s].n < 0 || blk[s].ld < (k > 1 ? k : 1))
      return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "kiln_sgemm_wcat: block %d has n=%lld ld=%lld (k=%lld)",
                        s, (long long)blk[s].n, (long long)blk[s].ld, (long long)k);
    if (reads && blk[s].n > 0 && blk[s].w == NULL)
      return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "kiln_sgemm_wcat: block %d is NULL", s);
    n += blk[s].n;
  }
  /* B is validated above; check_gemm sees it as a well-formed n x k matrix */
  KILN_RETURN_IF_ERROR(check_gemm("kiln_sgemm_wcat", m, n, k, a, lda, trans_a, blk, k > 1 ? k : 1, 1,
                                  c, ldc, alpha != 0.0f));
  /* Empty blocks hold no column; a single block left is a plain transposed B. */
  kiln_gemm_wblock_t used[KILN_GEMM_MAX_WBLOCKS];
  int nu = 0;
  for (int s = 0; s < nblk; s++)
    if (blk[s].n > 0) used[nu++] = blk[s];
  kiln_sgemm_problem_t pr;
  fill_problem(&pr, trans_a, 1, m, n, k, alpha, a, lda, nu ? used[0].w : NULL, nu ? used[0].ld : 1,
               beta, c, ldc);
  KILN_RETURN_IF_ERROR(check_epilogue("kiln_sgemm_wcat", ep, n, &pr.ep));
  KILN_RETURN_IF_ERROR(kiln_gemm_resolve_act(&pr));
  gemm_scratch_t* row = NULL;
  if (nu > 1 && k == 1 && reads) {
    /* K = 1: the concatenation is one contiguous row, which the unpacked path reads directly;
     * gather it so this call takes that path too (the same bits) */
    row = kiln_gemm_scratch_acquire(sizeof(float) * (size_t)n);
    if (row == NULL)
      return kiln_error(KILN_ERROR_OUT_OF_MEMORY, "kiln_sgemm_wcat: cannot allocate %lld floats", (long long)n);
    int64_t j = 0;
    for (int s = 0; s < nu; s++)
      for (int64_t r = 0; r < used[s].n; r++) row->buf[j++] = used[s].w[r * used[s].ld];
    pr.b = (kiln_gemm_src_t){row->buf, 1, 1, KILN_DTYPE_F32, NULL, 0};
  } else if (nu > 1) {
    pr.b.blk = used;
    pr.b.nblk = nu;
  }
  const kiln_status_t st = kiln_sgemm_run(&pr);
  kiln_gemm_scratch_release(row);
  return st;
}

typedef struct batch_ctx {
  kiln_sgemm_problem_t base;
  int64_t sa, sb, sc;
  atomic_int failed;
} batch_ctx_t;

static void batch_range(void* ctx, int64_t begin, int64_t end, int tid) {
  (void)tid;
  batch_ctx_t* bc = ctx;
  for (int64_t i = begin; i < end; i++) {
    kiln_sgemm_problem_t pr = bc->base;
    pr.a.p = (const float*)pr.a.p + i * bc->sa;
    pr.b.p = (const float*)pr.b.p + i * bc->sb;
    pr.c += i * bc->sc;
    if (kiln_sgemm_run(&pr) != KILN_OK) atomic_store(&bc->failed, 1);
  }
}

/* Strided batched kiln_sgemm. */
kiln_status_t kiln_sgemm_batched(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k,
                                 float alpha, const float* a, int64_t lda, int64_t stride_a,
                                 const float* b, int64_t ldb, int64_t stride_b, float beta,
                                 float* c, int64_t ldc, int64_t stride_c, int64_t batch) {
  if (batch < 0 || stride_a < 0 || stride_b < 0 || stride_c < 0)
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT,
                      "kiln_sgemm_batched: negative batch=%lld or stride (%lld, %lld, %lld)",
                      (long long)batch, (long long)stride_a, (long long)stride_b, (long long)stride_c);
  KILN_RETURN_IF_ERROR(check_gemm("kiln_sgemm_batched", m, n, k, a, lda, trans_a, b, ldb, trans_b,
                                  c, ldc, alpha != 0.0f));
  if (batch == 0 || m == 0 || n == 0) return KILN_OK;
  batch_ctx_t bc;
  fill_problem(&bc.base, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  bc.sa = stride_a;
  bc.sb = stride_b;
  bc.sc = stride_c;
  atomic_init(&bc.failed, 0);
  const double mnk = (double)m * (double)n * (double)k;
  if (batch > 1 && mnk < 4.0 * 128 * 128 * 128) {
    bc.base.serial = 1; /* one item per thread at a time */
    kiln_parallel_for(batch, 1, batch_range, &bc);
  } else {
    batch_range(&bc, 0, batch, 0);
  }
  if (atomic_load(&bc.failed))
    return kiln_error(KILN_ERROR_OUT_OF_MEMORY, "kiln_sgemm_batched: out of packing scratch");
  return KILN_OK;
}

/* C = alpha*op(A)*op(B) + beta*C in f64. */
kiln_status_t kiln_dgemm(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, double alpha,
                         const double* a, int64_t lda, const double* b, int64_t ldb, double beta,
                         double* c, int64_t ldc) {
  KILN_RETURN_IF_ERROR(check_gemm("kiln_dgemm", m, n, k, a, lda, trans_a, b, ldb, trans_b, c, ldc,
                                  alpha != 0.0));
  if (m == 0 || n == 0) return KILN_OK;
  return kiln_dgemm_strided(m, n, k, alpha, a, trans_a ? 1 : lda, trans_a ? lda : 1, b,
                            trans_b ? 1 : ldb, trans_b ? ldb : 1, beta, c, ldc, 1);
}
