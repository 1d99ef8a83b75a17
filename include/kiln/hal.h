/* SPDX-License-Identifier: Apache-2.0 */
/* kiln/hal.h - the device ABI. A chip vendor ports Kiln by implementing this one vtable.
 *
 * A device object is any struct whose first member is a kiln_device_t; the vtable receives that
 * pointer. Versioning: the vtable starts with `struct_size` (sizeof the vendor's compiled view of
 * kiln_device_vtable_t). Fields are only ever appended; a slot is used only when it lies within
 * struct_size and is non-NULL (KILN_HAL_HAS). Slots marked (optional) may be NULL, in which case
 * the runtime reports KILN_ERROR_UNIMPLEMENTED. Required slots must be set; kiln_hal_validate
 * checks that before a device is registered.
 *
 * Streams and events are opaque, vendor-defined. A NULL stream argument means the device's
 * default stream. Work on one stream runs in submission order; work on different streams is
 * unordered unless an event links them. Memory handed out by `alloc` is device memory; if the
 * device reports KILN_CAP_HOST_VISIBLE the host may also read and write it directly (after the
 * work touching it has been synchronized).
 *
 * Every slot returns KILN_OK or an error code with the message set via kiln_error().
 * Threading: the runtime adds no locking, so every slot except `destroy` (and the destroy slots
 * of streams and events, for their object) may be called from several threads at once and must
 * be thread-safe; a stream's work still runs in submission order, whichever threads submit it.
 * Tests: tests/hal/ is the conformance suite any implementation must pass.
 */
#ifndef KILN_HAL_H
#define KILN_HAL_H

#include <stddef.h>
#include <stdint.h>

#include "kiln/allocator.h"
#include "kiln/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kiln_device kiln_device_t;
typedef struct kiln_device_vtable kiln_device_vtable_t;
typedef struct kiln_stream kiln_stream_t; /* vendor-defined */
typedef struct kiln_event kiln_event_t;   /* vendor-defined */
typedef struct kiln_executable kiln_executable_t; /* vendor-defined: a program prepared for a device */
typedef struct kiln_exec kiln_exec_t;             /* a compiled kiln program (kiln/graph.h) */

/* Capability bits in kiln_device_props_t.capabilities. */
#define KILN_CAP_HOST_VISIBLE (1ull << 0)     /* device pointers are host pointers */
#define KILN_CAP_ASYNC_STREAMS (1ull << 1)    /* streams run work asynchronously */
#define KILN_CAP_CACHING_ALLOCATOR (1ull << 2) /* frees are cached; empty_cache returns them */
#define KILN_CAP_MULTITHREADED (1ull << 3)    /* kernels run on more than one thread */

typedef struct kiln_device_props {
  size_t struct_size;        /* set by the caller to sizeof(kiln_device_props_t) */
  char name[32];             /* driver name: "cpu", "ref", ... */
  char description[96];      /* free text, e.g. CPU model and ISA in use */
  uint64_t memory_limit;     /* bytes the device may hand out (0 = no limit known) */
  uint32_t compute_units;    /* threads / cores / SMs */
  uint32_t alignment;        /* guaranteed alignment of alloc results, bytes */
  uint64_t capabilities;     /* KILN_CAP_* */
} kiln_device_props_t;

typedef struct kiln_memory_stats {
  size_t struct_size;        /* set by the caller */
  uint64_t allocated;        /* bytes currently handed out (rounded to the allocator's blocks) */
  uint64_t reserved;         /* bytes held from the system: allocated + cached */
  uint64_t peak_allocated;   /* max of allocated since creation or the last reset_peak */
  uint64_t peak_reserved;    /* max of reserved since creation or the last reset_peak */
  uint64_t num_allocs;       /* successful alloc calls */
  uint64_t num_frees;        /* free calls */
  uint64_t num_cache_hits;   /* allocs served from the cache */
  /* Appended fields (a caller with an older struct_size does not see them). */
  uint64_t total_allocated;  /* bytes handed out since creation, summed over allocs (rounded) */
  uint64_t total_freed;      /* bytes given back by free calls since creation (rounded) */
  uint64_t total_reserved;   /* bytes obtained from the system since creation */
  uint64_t total_released;   /* bytes returned to the system since creation */
  uint64_t num_system_allocs; /* blocks obtained from the system (segments) */
  uint64_t num_system_frees; /* blocks returned to the system */
  uint64_t num_alloc_retries; /* allocs that returned the cache to the system and tried again */
  uint64_t num_ooms;         /* allocs refused with OUT_OF_MEMORY */
} kiln_memory_stats_t;

typedef enum kiln_copy_kind {
  KILN_COPY_HOST_TO_DEVICE = 0,
  KILN_COPY_DEVICE_TO_HOST = 1,
  KILN_COPY_DEVICE_TO_DEVICE = 2, /* both pointers from this device */
} kiln_copy_kind_t;

/* A host callback enqueued on a stream (runs on a device-owned thread, in stream order). */
typedef void (*kiln_host_fn_t)(void* user);

/* The buffers of one execution. The arrays are copied before `execute` returns; the buffers
 * themselves (device memory) must stay valid until the stream has run the work. */
typedef struct kiln_execute_args {
  size_t struct_size;          /* sizeof(kiln_execute_args_t) */
  int n_inputs;
  const void* const* inputs;   /* contiguous device buffers, in the program's input order */
  int n_outputs;
  void* const* outputs;        /* contiguous device buffers the results are written to */
  void* workspace;             /* device memory of >= workspace_bytes (NULL when 0) */
  uint64_t workspace_bytes;    /* at least kiln_exec_workspace_size(program) */
  uint32_t flags;              /* KILN_EXECUTE_* */
} kiln_execute_args_t;

/* The caller synchronizes the stream right after this execute (a blocking call such as
 * kiln_model_run): a device may then run the work on the calling thread when the stream has
 * nothing else queued, sparing the hand-off to its worker. Errors still come from the
 * synchronize. */
#define KILN_EXECUTE_WAIT (1u << 0)

struct kiln_device_vtable {
  size_t struct_size;

  /* Releases everything the device owns (streams, events, cached memory) and the object. */
  void (*destroy)(kiln_device_t* dev);
  /* Fills props (up to props->struct_size). */
  kiln_status_t (*query_props)(kiln_device_t* dev, kiln_device_props_t* props);

  /* Allocates `size` bytes (> 0) of device memory. OUT_OF_MEMORY if refused. */
  kiln_status_t (*alloc)(kiln_device_t* dev, size_t size, void** out_ptr);
  /* Frees memory from alloc. The caller guarantees no queued work still uses it. */
  void (*free)(kiln_device_t* dev, void* ptr);

  /* Copies `size` bytes on `stream`. Asynchronous on async devices: host memory must stay valid
   * and unchanged until the stream is synchronized. */
  kiln_status_t (*copy)(kiln_device_t* dev, kiln_stream_t* stream, kiln_copy_kind_t kind, void* dst,
                        const void* src, size_t size);
  /* Fills `size` bytes of device memory with a repeating pattern of 1, 2, 4 or 8 bytes
   * (size must be a multiple of pattern_size). The pattern is copied before return. */
  kiln_status_t (*fill)(kiln_device_t* dev, kiln_stream_t* stream, void* dst, size_t size,
                        const void* pattern, size_t pattern_size);

  kiln_status_t (*stream_create)(kiln_device_t* dev, kiln_stream_t** out_stream);
  /* Waits for the stream's work, then destroys it. Never the default stream. */
  void (*stream_destroy)(kiln_device_t* dev, kiln_stream_t* stream);
  /* Blocks until all work submitted to the stream so far has finished. Returns the first error
   * raised by asynchronous work on this stream since the last synchronize, if any. */
  kiln_status_t (*stream_synchronize)(kiln_device_t* dev, kiln_stream_t* stream);
  /* *out_idle = 1 if all submitted work has finished, else 0. Never blocks. */
  kiln_status_t (*stream_query)(kiln_device_t* dev, kiln_stream_t* stream, int* out_idle);

  kiln_status_t (*event_create)(kiln_device_t* dev, kiln_event_t** out_event);
  void (*event_destroy)(kiln_device_t* dev, kiln_event_t* event);
  /* Captures the work submitted to `stream` so far; the event completes when it has run.
   * Re-recording replaces the captured point. */
  kiln_status_t (*event_record)(kiln_device_t* dev, kiln_event_t* event, kiln_stream_t* stream);
  /* Work submitted to `stream` after this call waits for the event's captured work. An event
   * never recorded is complete. */
  kiln_status_t (*stream_wait_event)(kiln_device_t* dev, kiln_stream_t* stream, kiln_event_t* event);
  /* Blocks the host until the event is complete. */
  kiln_status_t (*event_synchronize)(kiln_device_t* dev, kiln_event_t* event);
  /* *out_done = 1 if complete. Never blocks. */
  kiln_status_t (*event_query)(kiln_device_t* dev, kiln_event_t* event, int* out_done);

  /* Blocks until all work on all of the device's streams has finished. */
  kiln_status_t (*synchronize)(kiln_device_t* dev);

  /* (optional) Allocator statistics. */
  kiln_status_t (*memory_stats)(kiln_device_t* dev, kiln_memory_stats_t* stats);
  /* (optional) Resets peak_allocated/peak_reserved to the current values. */
  kiln_status_t (*memory_reset_peak)(kiln_device_t* dev);
  /* (optional) Returns cached, unused memory to the system. */
  kiln_status_t (*memory_empty_cache)(kiln_device_t* dev);
  /* (optional) Enqueues fn(user) on the stream; it runs after earlier work, before later work. */
  kiln_status_t (*launch_host_fn)(kiln_device_t* dev, kiln_stream_t* stream, kiln_host_fn_t fn,
                                  void* user);

  /* ---- compute (optional as a group: a device sets all four or none) ----------------------
   * A program is a kiln_exec_t: the graph compiler's output after the device-independent
   * passes (kiln/graph.h; queried through its public functions). */
  /* KILN_OK if the device can run `program`; else UNIMPLEMENTED with the reason (the first op
   * it cannot run, and why) in the status message and, when reason_cap > 0, in `reason`. */
  kiln_status_t (*supports)(kiln_device_t* dev, const kiln_exec_t* program, char* reason,
                            size_t reason_cap);
  /* Turns `program` into an executable of this device. The program must outlive the
   * executable. Errors: UNIMPLEMENTED (supports would say why), OUT_OF_MEMORY. */
  kiln_status_t (*prepare)(kiln_device_t* dev, const kiln_exec_t* program,
                           kiln_executable_t** out_exe);
  /* Enqueues one run of `exe` on `stream` over device buffers. Arguments that do not match the
   * program (counts, a NULL buffer, a short workspace) are INVALID_ARGUMENT at once; errors of
   * the run itself (an index out of range, ...) are raised by the next synchronize of the stream
   * or the device, naming the op. Asynchronous on async devices. */
  kiln_status_t (*execute)(kiln_device_t* dev, kiln_stream_t* stream, kiln_executable_t* exe,
                           const kiln_execute_args_t* args);
  /* Frees an executable. The caller guarantees no queued work still uses it. */
  void (*executable_destroy)(kiln_device_t* dev, kiln_executable_t* exe);
};

/* The common header of every device object. The runtime owns `index` and `host_allocator`
 * fields' meaning; vendors fill `vtable` and `host_allocator` at creation. */
struct kiln_device {
  const kiln_device_vtable_t* vtable;
  kiln_allocator_t host_allocator; /* used for the device's own host-side objects */
  int32_t index;                   /* position in its registry, -1 until registered */
};

/* 1 if `vt` has a usable slot `field`: inside struct_size and non-NULL. */
#define KILN_HAL_HAS(vt, field)                                                         \
  ((vt)->struct_size >= offsetof(kiln_device_vtable_t, field) + sizeof((vt)->field) && \
   (vt)->field != NULL)

/* Checks that every required slot is present, and that the compute slots are all set or all
 * absent. INVALID_ARGUMENT naming the first missing one. */
kiln_status_t kiln_hal_validate(const kiln_device_vtable_t* vtable);

/* Factory signature for drivers. */
typedef kiln_status_t (*kiln_device_factory_fn_t)(const kiln_allocator_t* host_allocator,
                                                  kiln_device_t** out_device);

#ifdef __cplusplus
}
#endif
#endif /* KILN_HAL_H */
