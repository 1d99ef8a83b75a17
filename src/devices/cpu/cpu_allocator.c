/* SPDX-License-Identifier: Apache-2.0 */
/* cpu_allocator.c - caching allocator of the CPU device.
 *
 * Each system block is [64-byte header][payload]; the returned pointer is the payload, so it
 * stays 64-byte aligned and free() finds the block size in the header.
 */
#include "devices/cpu/cpu_allocator.h"

#include <stdlib.h>
#include <string.h>

#define HEADER_SIZE 64
#define MAGIC_LIVE 0x6b696c6eu /* "kiln" */
#define MAGIC_CACHED 0x63616368u
#define MAX_REQUEST ((size_t)1 << 60)

typedef struct block_header {
  size_t size;       /* payload bytes (the size class) */
  void* next;        /* next cached payload of the same class */
  uint32_t cls;
  uint32_t magic;
} block_header_t;

_Static_assert(sizeof(block_header_t) <= HEADER_SIZE, "block header must fit in 64 bytes");

static block_header_t* header_of(void* payload) {
  return (block_header_t*)((char*)payload - HEADER_SIZE);
}

/* Size class index of `size` (1 <= size <= MAX_REQUEST); stores the rounded size. */
static uint32_t size_class(size_t size, size_t* out_rounded) {
  if (size <= 2048) {
    size_t r = size <= 512 ? 512 : (size + 511) & ~(size_t)511;
    *out_rounded = r;
    return (uint32_t)(r / 512 - 1);
  }
  int k = 63 - __builtin_clzll((unsigned long long)(size - 1)); /* size in (2^k, 2^(k+1)] */
  size_t base = (size_t)1 << k, step = base / 4;
  size_t j = (size - base + step - 1) / step; /* 1..4 */
  *out_rounded = base + j * step;
  return (uint32_t)(4 + (k - 11) * 4 + (int)(j - 1));
}

/* The block size (size class) that a request of `size` bytes is rounded to. */
size_t kiln_cpu_allocator_round(size_t size) {
  size_t r = 0;
  if (size == 0 || size > MAX_REQUEST) return 0;
  size_class(size, &r);
  return r;
}

/* Initializes an empty allocator with a limit on reserved bytes (0 = unlimited). */
void kiln_cpu_allocator_init(kiln_cpu_allocator_t* a, uint64_t memory_limit) {
  memset(a, 0, sizeof(*a));
  pthread_mutex_init(&a->mu, NULL);
  a->memory_limit = memory_limit;
  a->stats.struct_size = sizeof(a->stats);
}

/* Releases the cache and the mutex. */
void kiln_cpu_allocator_deinit(kiln_cpu_allocator_t* a) {
  kiln_cpu_allocator_empty_cache(a);
  pthread_mutex_destroy(&a->mu);
}

/* Unlinks every cached block (caller holds the lock); returns them as one chain. */
static block_header_t* take_cache_locked(kiln_cpu_allocator_t* a) {
  block_header_t* chain = NULL;
  for (int c = 0; c < KILN_CPU_NUM_CLASSES; c++) {
    void* p = a->free_lists[c];
    a->free_lists[c] = NULL;
    while (p != NULL) {
      block_header_t* h = header_of(p);
      p = h->next;
      a->stats.reserved -= h->size;
      a->stats.total_released += h->size;
      a->stats.num_system_frees++;
      h->next = chain;
      chain = h;
    }
  }
  return chain;
}

static void free_chain(block_header_t* chain) {
  while (chain != NULL) {
    block_header_t* next = chain->next;
    free(chain);
    chain = next;
  }
}

static void note_alloc_locked(kiln_cpu_allocator_t* a, size_t rounded) {
  a->stats.allocated += rounded;
  a->stats.total_allocated += rounded;
  a->stats.num_allocs++;
  if (a->stats.allocated > a->stats.peak_allocated) a->stats.peak_allocated = a->stats.allocated;
}

/* Returns a 64-byte aligned block of at least `size` bytes, from the cache when possible. */
kiln_status_t kiln_cpu_allocator_alloc(kiln_cpu_allocator_t* a, size_t size, void** out_ptr) {
  *out_ptr = NULL;
  if (size == 0) return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "kiln cpu: alloc of 0 bytes");
  unsigned long long allocated, reserved, limit = (unsigned long long)a->memory_limit;
  if (size > MAX_REQUEST) {
    pthread_mutex_lock(&a->mu);
    allocated = a->stats.allocated;
    reserved = a->stats.reserved;
    pthread_mutex_unlock(&a->mu);
    goto out_of_memory;
  }
  size_t rounded;
  uint32_t cls = size_class(size, &rounded);

  pthread_mutex_lock(&a->mu);
  void* p = a->free_lists[cls];
  if (p != NULL) {
    block_header_t* h = header_of(p);
    a->free_lists[cls] = h->next;
    h->magic = MAGIC_LIVE;
    a->stats.num_cache_hits++;
    note_alloc_locked(a, rounded);
    pthread_mutex_unlock(&a->mu);
    *out_ptr = p;
    return KILN_OK;
  }
  for (int attempt = 0; attempt < 2; attempt++) {
    block_header_t* released = NULL;
    if (a->memory_limit != 0 && a->stats.reserved + rounded > a->memory_limit) {
      a->stats.num_alloc_retries++; /* over the limit: give back the cache and try again */
      released = take_cache_locked(a);
      if (a->stats.reserved + rounded > a->memory_limit) {
        allocated = a->stats.allocated;
        reserved = a->stats.reserved;
        pthread_mutex_unlock(&a->mu);
        free_chain(released);
        goto out_of_memory;
      }
    }
    a->stats.reserved += rounded; /* reserve before unlocking so the limit holds across threads */
    if (a->stats.reserved > a->stats.peak_reserved) a->stats.peak_reserved = a->stats.reserved;
    pthread_mutex_unlock(&a->mu);
    free_chain(released);

    block_header_t* h = aligned_alloc(KILN_CPU_ALIGNMENT, HEADER_SIZE + rounded);
    pthread_mutex_lock(&a->mu);
    if (h != NULL) {
      h->size = rounded;
      h->next = NULL;
      h->cls = cls;
      h->magic = MAGIC_LIVE;
      note_alloc_locked(a, rounded);
      a->stats.total_reserved += rounded;
      a->stats.num_system_allocs++;
      pthread_mutex_unlock(&a->mu);
      *out_ptr = (char*)h + HEADER_SIZE;
      return KILN_OK;
    }
    a->stats.reserved -= rounded;
    if (attempt == 0) {
      a->stats.num_alloc_retries++;
      released = take_cache_locked(a); /* the system refused: give back the cache and retry */
      pthread_mutex_unlock(&a->mu);
      free_chain(released);
      pthread_mutex_lock(&a->mu);
    }
  }
  allocated = a->stats.allocated;
  reserved = a->stats.reserved;
  pthread_mutex_unlock(&a->mu);
out_of_memory:
  pthread_mutex_lock(&a->mu);
  a->stats.num_ooms++;
  pthread_mutex_unlock(&a->mu);
  return kiln_error(KILN_ERROR_OUT_OF_MEMORY,
                    "kiln cpu: out of memory: tried to allocate %zu bytes (%llu allocated, %llu "
                    "reserved, limit %llu)",
                    size, allocated, reserved, limit);
}

/* Puts a block back into its size class's free list. NULL is a no-op. */
void kiln_cpu_allocator_free(kiln_cpu_allocator_t* a, void* ptr) {
  if (ptr == NULL) return;
  block_header_t* h = header_of(ptr);
  KILN_ASSERT(h->magic == MAGIC_LIVE && "kiln cpu: free of a pointer not allocated here (or twice)");
  pthread_mutex_lock(&a->mu);
  h->magic = MAGIC_CACHED;
  h->next = a->free_lists[h->cls];
  a->free_lists[h->cls] = ptr;
  a->stats.allocated -= h->size;
  a->stats.total_freed += h->size;
  a->stats.num_frees++;
  pthread_mutex_unlock(&a->mu);
}

/* Copies the statistics (up to out->struct_size bytes; 0 means the full struct). */
void kiln_cpu_allocator_stats(kiln_cpu_allocator_t* a, kiln_memory_stats_t* out) {
  size_t n = out->struct_size == 0 || out->struct_size > sizeof(*out) ? sizeof(*out) : out->struct_size;
  size_t keep = out->struct_size;
  pthread_mutex_lock(&a->mu);
  kiln_memory_stats_t s = a->stats;
  pthread_mutex_unlock(&a->mu);
  if (n > sizeof(size_t)) memcpy((char*)out + sizeof(size_t), (char*)&s + sizeof(size_t), n - sizeof(size_t));
  out->struct_size = keep == 0 ? sizeof(*out) : keep;
}

/* Sets the peaks to the current values. */
void kiln_cpu_allocator_reset_peak(kiln_cpu_allocator_t* a) {
  pthread_mutex_lock(&a->mu);
  a->stats.peak_allocated = a->stats.allocated;
  a->stats.peak_reserved = a->stats.reserved;
  pthread_mutex_unlock(&a->mu);
}

/* Returns every cached block to the system. */
void kiln_cpu_allocator_empty_cache(kiln_cpu_allocator_t* a) {
  pthread_mutex_lock(&a->mu);
  block_header_t* chain = take_cache_locked(a);
  pthread_mutex_unlock(&a->mu);
  free_chain(chain);
}
