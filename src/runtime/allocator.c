/* SPDX-License-Identifier: Apache-2.0 */
/* allocator.c - the system host allocator and NULL-means-system wrappers. */
#include "kiln/allocator.h"

#include <stdlib.h>

static void* system_alloc(void* self, size_t size, size_t alignment) {
  (void)self;
  void* p = NULL;
  if (alignment < sizeof(void*)) alignment = sizeof(void*);
  if (posix_memalign(&p, alignment, size ? size : 1) != 0) return NULL;
  return p;
}

static void system_free(void* self, void* ptr) {
  (void)self;
  free(ptr);
}

kiln_allocator_t kiln_allocator_system(void) {
  kiln_allocator_t a = {system_alloc, system_free, NULL};
  return a;
}

void* kiln_allocator_alloc(const kiln_allocator_t* a, size_t size, size_t alignment) {
  if (!a) return system_alloc(NULL, size, alignment);
  return a->alloc(a->self, size, alignment);
}

void kiln_allocator_free(const kiln_allocator_t* a, void* ptr) {
  if (!ptr) return;
  if (!a) {
    free(ptr);
    return;
  }
  a->free(a->self, ptr);
}
