/* SPDX-License-Identifier: Apache-2.0 */
/* kiln/allocator.h - the host allocator passed to every libkiln constructor.
 *
 * libkiln never calls malloc directly for its own objects: constructors take a kiln_allocator_t
 * (borrowed; copied by value into the object they create) so embedders can route host memory.
 * Device memory is a separate matter and belongs to the device (see kiln/hal.h).
 *
 * Threads: an object calls its allocator from whichever thread calls the object. An allocator
 * given to an object that is used from several threads at once (a kiln_exec_t run concurrently
 * makes run contexts on the running threads, see kiln/graph.h) must be thread-safe; the system
 * allocator is.
 */
#ifndef KILN_ALLOCATOR_H
#define KILN_ALLOCATOR_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kiln_allocator {
  /* Returns `size` bytes aligned to `alignment` (a power of two >= sizeof(void*)), or NULL. */
  void* (*alloc)(void* self, size_t size, size_t alignment);
  /* Frees a pointer returned by alloc (NULL is a no-op). */
  void (*free)(void* self, void* ptr);
  void* self; /* passed back to both callbacks */
} kiln_allocator_t;

/* The process allocator (aligned_alloc/free). Never fails to return; its alloc may return NULL. */
kiln_allocator_t kiln_allocator_system(void);

/* Convenience wrappers; `a` may be NULL meaning the system allocator. */
void* kiln_allocator_alloc(const kiln_allocator_t* a, size_t size, size_t alignment);
void kiln_allocator_free(const kiln_allocator_t* a, void* ptr);

#ifdef __cplusplus
}
#endif
#endif /* KILN_ALLOCATOR_H */
