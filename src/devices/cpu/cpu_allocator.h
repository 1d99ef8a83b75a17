/* SPDX-License-Identifier: Apache-2.0 */
/* cpu_allocator.h - the CPU device's thread-safe caching allocator (internal).
 *
 * Every block is 64-byte aligned and rounded to a size class: multiples of 512 B up to 2 KiB,
 * then 4 classes per power of two. Freed blocks go to a per-class free list and are handed out
 * again (a cache hit); empty_cache returns them to the system. A memory limit (0 = none) caps the
 * reserved bytes (handed out + cached); on reaching it the cache is released before failing.
 */
#ifndef KILN_CPU_ALLOCATOR_H
#define KILN_CPU_ALLOCATOR_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "kiln/hal.h"

#define KILN_CPU_ALIGNMENT 64
#define KILN_CPU_NUM_CLASSES 208

typedef struct kiln_cpu_allocator {
  pthread_mutex_t mu;
  uint64_t memory_limit;
  void* free_lists[KILN_CPU_NUM_CLASSES]; /* cached blocks per size class */
  kiln_memory_stats_t stats;
} kiln_cpu_allocator_t;

/* Initializes an empty allocator with a byte limit on reserved memory (0 = unlimited). */
void kiln_cpu_allocator_init(kiln_cpu_allocator_t* a, uint64_t memory_limit);
/* Releases the cache and the allocator's resources. Blocks still handed out are not freed. */
void kiln_cpu_allocator_deinit(kiln_cpu_allocator_t* a);

/* Returns a 64-byte aligned block of at least `size` bytes. OUT_OF_MEMORY past the limit or
 * when the system refuses. */
kiln_status_t kiln_cpu_allocator_alloc(kiln_cpu_allocator_t* a, size_t size, void** out_ptr);
/* Returns a block to the cache. NULL is a no-op. */
void kiln_cpu_allocator_free(kiln_cpu_allocator_t* a, void* ptr);

/* Copies the statistics (up to out->struct_size bytes; struct_size 0 means the full struct). */
void kiln_cpu_allocator_stats(kiln_cpu_allocator_t* a, kiln_memory_stats_t* out);
/* Sets peak_allocated and peak_reserved to the current values. */
void kiln_cpu_allocator_reset_peak(kiln_cpu_allocator_t* a);
/* Returns every cached block to the system. */
void kiln_cpu_allocator_empty_cache(kiln_cpu_allocator_t* a);

/* The block size (size class) that a request of `size` bytes is rounded to. */
size_t kiln_cpu_allocator_round(size_t size);

#endif /* KILN_CPU_ALLOCATOR_H */
