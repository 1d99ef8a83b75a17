/* SPDX-License-Identifier: Apache-2.0 */
/* kiln/device.h - the runtime API over devices: registry, memory, copies, streams, events.
 *
 * These functions validate their arguments, then dispatch through the device's vtable
 * (kiln/hal.h). Devices are owned by the registry they are added to; everything returned by
 * kiln_registry_get is borrowed from it.
 *
 * Typical use:
 *   kiln_registry_t* reg; KILN_RETURN_IF_ERROR(kiln_registry_default(&reg));
 *   kiln_device_t* dev;   KILN_RETURN_IF_ERROR(kiln_registry_get(reg, 0, &dev));
 *   void* p;              KILN_RETURN_IF_ERROR(kiln_device_alloc(dev, 1024, &p));
 *   kiln_device_copy(dev, NULL, KILN_COPY_HOST_TO_DEVICE, p, host, 1024);
 *   kiln_device_synchronize(dev);  kiln_device_free(dev, p);
 *
 * Thread safety: a device may be used from any number of threads at once (allocation, copies,
 * fills, streams, events, statistics; the built-in devices lock internally, and kiln/hal.h asks
 * the same of every driver). A registry is read-only once built: kiln_registry_default builds
 * the process registry exactly once, and kiln_registry_get / kiln_registry_count may then be
 * called from anywhere; kiln_registry_add and kiln_registry_destroy must not overlap any other
 * use of that registry or its devices. Destroying a device, stream or event must not overlap
 * other calls on it.
 */
#ifndef KILN_DEVICE_H
#define KILN_DEVICE_H

#include <stdint.h>

#include "kiln/hal.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- drivers ---------------------------------------------------------------------------- */

typedef struct kiln_cpu_device_options {
  size_t struct_size;     /* sizeof(kiln_cpu_device_options_t) */
  uint64_t memory_limit;  /* bytes the allocator may reserve; 0 = unlimited */
} kiln_cpu_device_options_t;

/* The embedded CPU device: 64-byte aligned caching allocator, the shared persistent thread
 * pool, asynchronous in-order streams (one worker thread per stream, started lazily).
 * `options` may be NULL (defaults). The caller owns the device until it is added to a registry.
 * Errors: OUT_OF_MEMORY, INTERNAL. */
kiln_status_t kiln_cpu_device_create(const kiln_cpu_device_options_t* options,
                                     const kiln_allocator_t* host_allocator,
                                     kiln_device_t** out_device);

/* The reference device: scalar, single-threaded, synchronous streams, no caching. Exists to
 * prove the ABI with a second implementation and as a reference for kernels. `memory_limit`
 * 0 = unlimited. */
kiln_status_t kiln_ref_device_create(uint64_t memory_limit, const kiln_allocator_t* host_allocator,
                                     kiln_device_t** out_device);

/* Creates a device by driver name ("cpu" or "ref") with `memory_limit` (0 = unlimited).
 * NOT_FOUND for an unknown name. */
kiln_status_t kiln_device_create_by_name(const char* driver, uint64_t memory_limit,
                                         const kiln_allocator_t* host_allocator,
                                         kiln_device_t** out_device);

/* Destroys a device not owned by a registry. NULL is a no-op. */
void kiln_device_destroy(kiln_device_t* dev);

/* ---- registry --------------------------------------------------------------------------- */

#define KILN_MAX_DEVICES 16

typedef struct kiln_registry kiln_registry_t;

/* An empty registry. Owned by the caller; destroy with kiln_registry_destroy. */
kiln_status_t kiln_registry_create(const kiln_allocator_t* host_allocator, kiln_registry_t** out);
/* Synchronizes and destroys every device it holds, then itself. NULL is a no-op. */
void kiln_registry_destroy(kiln_registry_t* reg);
/* Validates the device's vtable and takes ownership of it; its index is the number of devices
 * already held. Errors: INVALID_ARGUMENT (bad vtable; the device is then NOT taken), and
 * FAILED_PRECONDITION when KILN_MAX_DEVICES are held. */
kiln_status_t kiln_registry_add(kiln_registry_t* reg, kiln_device_t* dev, int32_t* out_index);
/* Number of devices held. */
int32_t kiln_registry_count(const kiln_registry_t* reg);
/* Borrowed device at `index`. NOT_FOUND if out of range. */
kiln_status_t kiln_registry_get(const kiln_registry_t* reg, int32_t index, kiln_device_t** out_dev);

/* The process-wide registry, built once (thread-safe) from the environment:
 *   KILN_DEVICES       comma list of drivers, default "cpu" (e.g. "cpu,ref", "cpu,cpu")
 *   KILN_MEMORY_LIMIT  per-device byte limit, with optional K/M/G suffix (default unlimited)
 *   KILN_NUM_THREADS   threads of the shared pool (default: online CPUs)
 * Borrowed; lives until process exit. Errors: INVALID_ARGUMENT for a malformed variable. */
kiln_status_t kiln_registry_default(kiln_registry_t** out);

/* Parses a byte count like "512", "64K", "1.5G". INVALID_ARGUMENT if malformed. */
kiln_status_t kiln_parse_bytes(const char* text, uint64_t* out_bytes);

/* ---- device operations (dispatch to the vtable) ----------------------------------------- */

kiln_status_t kiln_device_props(kiln_device_t* dev, kiln_device_props_t* out_props);

/* size 0 yields *out_ptr = NULL and KILN_OK. OUT_OF_MEMORY carries a message with the sizes. */
kiln_status_t kiln_device_alloc(kiln_device_t* dev, size_t size, void** out_ptr);
/* NULL is a no-op. */
void kiln_device_free(kiln_device_t* dev, void* ptr);

/* size 0 is a no-op. INVALID_ARGUMENT for NULL pointers or an unknown kind. */
kiln_status_t kiln_device_copy(kiln_device_t* dev, kiln_stream_t* stream, kiln_copy_kind_t kind,
                               void* dst, const void* src, size_t size);
kiln_status_t kiln_device_fill(kiln_device_t* dev, kiln_stream_t* stream, void* dst, size_t size,
                               const void* pattern, size_t pattern_size);

kiln_status_t kiln_stream_create(kiln_device_t* dev, kiln_stream_t** out_stream);
void kiln_stream_destroy(kiln_device_t* dev, kiln_stream_t* stream);
kiln_status_t kiln_stream_synchronize(kiln_device_t* dev, kiln_stream_t* stream);
kiln_status_t kiln_stream_query(kiln_device_t* dev, kiln_stream_t* stream, int* out_idle);
/* UNIMPLEMENTED if the device has no launch_host_fn slot. */
kiln_status_t kiln_stream_launch_host_fn(kiln_device_t* dev, kiln_stream_t* stream,
                                         kiln_host_fn_t fn, void* user);

kiln_status_t kiln_event_create(kiln_device_t* dev, kiln_event_t** out_event);
void kiln_event_destroy(kiln_device_t* dev, kiln_event_t* event);
kiln_status_t kiln_event_record(kiln_device_t* dev, kiln_event_t* event, kiln_stream_t* stream);
kiln_status_t kiln_stream_wait_event(kiln_device_t* dev, kiln_stream_t* stream, kiln_event_t* event);
kiln_status_t kiln_event_synchronize(kiln_device_t* dev, kiln_event_t* event);
kiln_status_t kiln_event_query(kiln_device_t* dev, kiln_event_t* event, int* out_done);

kiln_status_t kiln_device_synchronize(kiln_device_t* dev);

/* ---- compute (kiln/hal.h's compute slots) ----------------------------------------------- */

/* KILN_OK if the device can run the compiled program; UNIMPLEMENTED with the reason otherwise
 * (also when the device has no compute slots). `reason` (reason_cap bytes, may be NULL/0)
 * receives it too. */
kiln_status_t kiln_device_supports(kiln_device_t* dev, const kiln_exec_t* program, char* reason,
                                   size_t reason_cap);
/* A device executable for `program`, which must outlive it; free it with
 * kiln_executable_destroy. UNIMPLEMENTED on a device without compute slots. */
kiln_status_t kiln_device_prepare(kiln_device_t* dev, const kiln_exec_t* program,
                                  kiln_executable_t** out_exe);
/* Enqueues one run on `stream` (NULL: the default stream) over device buffers: asynchronous on
 * async devices; errors of the run come back from the next stream or device synchronize.
 * INVALID_ARGUMENT at once for arguments that do not fit the program. */
kiln_status_t kiln_device_execute(kiln_device_t* dev, kiln_stream_t* stream, kiln_executable_t* exe,
                                  const kiln_execute_args_t* args);
/* Frees an executable (no queued work may still use it). NULL is a no-op. */
void kiln_executable_destroy(kiln_device_t* dev, kiln_executable_t* exe);

/* UNIMPLEMENTED where the device has no allocator statistics. */
kiln_status_t kiln_device_memory_stats(kiln_device_t* dev, kiln_memory_stats_t* out_stats);
kiln_status_t kiln_device_memory_reset_peak(kiln_device_t* dev);
/* A device without a cache has nothing to empty: KILN_OK. */
kiln_status_t kiln_device_memory_empty_cache(kiln_device_t* dev);

#ifdef __cplusplus
}
#endif
#endif /* KILN_DEVICE_H */
