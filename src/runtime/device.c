/* SPDX-License-Identifier: Apache-2.0 */
/* device.c - argument validation and vtable dispatch for the runtime device API. */
#include "kiln/device.h"

#include <stdio.h>
#include <string.h>

#define CHECK_DEV(dev)                                                           \
  do {                                                                           \
    if (!(dev) || !(dev)->vtable)                                                \
      return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s: NULL device", __func__); \
  } while (0)

#define CHECK_PTR(p)                                                                  \
  do {                                                                                \
    if (!(p)) return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s: " #p " is NULL", __func__); \
  } while (0)

kiln_status_t kiln_device_props(kiln_device_t* dev, kiln_device_props_t* out) {
  CHECK_DEV(dev);
  CHECK_PTR(out);
  if (out->struct_size == 0) out->struct_size = sizeof(*out);
  return dev->vtable->query_props(dev, out);
}

kiln_status_t kiln_device_alloc(kiln_device_t* dev, size_t size, void** out_ptr) {
  CHECK_DEV(dev);
  CHECK_PTR(out_ptr);
  *out_ptr = NULL;
  if (size == 0) return KILN_OK;
  return dev->vtable->alloc(dev, size, out_ptr);
}

void kiln_device_free(kiln_device_t* dev, void* ptr) {
  if (!dev || !dev->vtable || !ptr) return;
  dev->vtable->free(dev, ptr);
}

kiln_status_t kiln_device_copy(kiln_device_t* dev, kiln_stream_t* stream, kiln_copy_kind_t kind,
                               void* dst, const void* src, size_t size) {
  CHECK_DEV(dev);
  if (kind != KILN_COPY_HOST_TO_DEVICE && kind != KILN_COPY_DEVICE_TO_HOST &&
      kind != KILN_COPY_DEVICE_TO_DEVICE)
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "kiln_device_copy: unknown copy kind %d",
                      (int)kind);
  if (size == 0) return KILN_OK;
  CHECK_PTR(dst);
  CHECK_PTR(src);
  return dev->vtable->copy(dev, stream, kind, dst, src, size);
}

kiln_status_t kiln_device_fill(kiln_device_t* dev, kiln_stream_t* stream, void* dst, size_t size,
                               const void* pattern, size_t pattern_size) {
  CHECK_DEV(dev);
  if (pattern_size != 1 && pattern_size != 2 && pattern_size != 4 && pattern_size != 8)
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT,
                      "kiln_device_fill: pattern size %zu is not 1, 2, 4 or 8", pattern_size);
  if (size % pattern_size != 0)
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT,
                      "kiln_device_fill: size %zu is not a multiple of the pattern size %zu",
                      size, pattern_size);
  if (size == 0) return KILN_OK;
  CHECK_PTR(dst);
  CHECK_PTR(pattern);
  return dev->vtable->fill(dev, stream, dst, size, pattern, pattern_size);
}

kiln_status_t kiln_stream_create(kiln_device_t* dev, kiln_stream_t** out_stream) {
  CHECK_DEV(dev);
  CHECK_PTR(out_stream);
  return dev->vtable->stream_create(dev, out_stream);
}

void kiln_stream_destroy(kiln_device_t* dev, kiln_stream_t* stream) {
  if (!dev || !dev->vtable || !stream) return;
  dev->vtable->stream_destroy(dev, stream);
}

kiln_status_t kiln_stream_synchronize(kiln_device_t* dev, kiln_stream_t* stream) {
  CHECK_DEV(dev);
  return dev->vtable->stream_synchronize(dev, stream);
}

kiln_status_t kiln_stream_query(kiln_device_t* dev, kiln_stream_t* stream, int* out_idle) {
  CHECK_DEV(dev);
  CHECK_PTR(out_idle);
  return dev->vtable->stream_query(dev, stream, out_idle);
}

kiln_status_t kiln_stream_launch_host_fn(kiln_device_t* dev, kiln_stream_t* stream,
                                         kiln_host_fn_t fn, void* user) {
  CHECK_DEV(dev);
  CHECK_PTR(fn);
  if (!KILN_HAL_HAS(dev->vtable, launch_host_fn))
    return kiln_error(KILN_ERROR_UNIMPLEMENTED, "device has no launch_host_fn");
  return dev->vtable->launch_host_fn(dev, stream, fn, user);
}

/* ---- compute ---------------------------------------------------------------------------- */

static kiln_status_t no_compute(kiln_device_t* dev) {
  kiln_device_props_t p;
  memset(&p, 0, sizeof p);
  p.struct_size = sizeof p;
  if (dev->vtable->query_props(dev, &p) != KILN_OK) p.name[0] = 0;
  return kiln_error(KILN_ERROR_UNIMPLEMENTED, "device %s has no compute slots (kiln/hal.h)",
                    p.name[0] ? p.name : "?");
}

kiln_status_t kiln_device_supports(kiln_device_t* dev, const kiln_exec_t* program, char* reason,
                                   size_t reason_cap) {
  CHECK_DEV(dev);
  CHECK_PTR(program);
  if (reason && reason_cap) reason[0] = 0;
  if (!KILN_HAL_HAS(dev->vtable, supports)) {
    kiln_status_t st = no_compute(dev);
    if (reason && reason_cap) snprintf(reason, reason_cap, "%s", kiln_status_message());
    return st;
  }
  return dev->vtable->supports(dev, program, reason, reason_cap);
}

kiln_status_t kiln_device_prepare(kiln_device_t* dev, const kiln_exec_t* program,
                                  kiln_executable_t** out_exe) {
  CHECK_DEV(dev);
  CHECK_PTR(out_exe);
  *out_exe = NULL;
  CHECK_PTR(program);
  if (!KILN_HAL_HAS(dev->vtable, prepare)) return no_compute(dev);
  return dev->vtable->prepare(dev, program, out_exe);
}

kiln_status_t kiln_device_execute(kiln_device_t* dev, kiln_stream_t* stream, kiln_executable_t* exe,
                                  const kiln_execute_args_t* args) {
  CHECK_DEV(dev);
  CHECK_PTR(exe);
  CHECK_PTR(args);
  if (!KILN_HAL_HAS(dev->vtable, execute)) return no_compute(dev);
  return dev->vtable->execute(dev, stream, exe, args);
}

void kiln_executable_destroy(kiln_device_t* dev, kiln_executable_t* exe) {
  if (!dev || !dev->vtable || !exe || !KILN_HAL_HAS(dev->vtable, executable_destroy)) return;
  dev->vtable->executable_destroy(dev, exe);
}

kiln_status_t kiln_event_create(kiln_device_t* dev, kiln_event_t** out_event) {
  CHECK_DEV(dev);
  CHECK_PTR(out_event);
  return dev->vtable->event_create(dev, out_event);
}

void kiln_event_destroy(kiln_device_t* dev, kiln_event_t* event) {
  if (!dev || !dev->vtable || !event) return;
  dev->vtable->event_destroy(dev, event);
}

kiln_status_t kiln_event_record(kiln_device_t* dev, kiln_event_t* event, kiln_stream_t* stream) {
  CHECK_DEV(dev);
  CHECK_PTR(event);
  return dev->vtable->event_record(dev, event, stream);
}

kiln_status_t kiln_stream_wait_event(kiln_device_t* dev, kiln_stream_t* stream, kiln_event_t* event) {
  CHECK_DEV(dev);
  CHECK_PTR(event);
  return dev->vtable->stream_wait_event(dev, stream, event);
}

kiln_status_t kiln_event_synchronize(kiln_device_t* dev, kiln_event_t* event) {
  CHECK_DEV(dev);
  CHECK_PTR(event);
  return dev->vtable->event_synchronize(dev, event);
}

kiln_status_t kiln_event_query(kiln_device_t* dev, kiln_event_t* event, int* out_done) {
  CHECK_DEV(dev);
  CHECK_PTR(event);
  CHECK_PTR(out_done);
  return dev->vtable->event_query(dev, event, out_done);
}

kiln_status_t kiln_device_synchronize(kiln_device_t* dev) {
  CHECK_DEV(dev);
  return dev->vtable->synchronize(dev);
}

kiln_status_t kiln_device_memory_stats(kiln_device_t* dev, kiln_memory_stats_t* out_stats) {
  CHECK_DEV(dev);
  CHECK_PTR(out_stats);
  if (!KILN_HAL_HAS(dev->vtable, memory_stats))
    return kiln_error(KILN_ERROR_UNIMPLEMENTED, "device has no memory statistics");
  size_t sz = out_stats->struct_size ? out_stats->struct_size : sizeof(*out_stats);
  memset(out_stats, 0, sz < sizeof(*out_stats) ? sz : sizeof(*out_stats));
  out_stats->struct_size = sz;
  return dev->vtable->memory_stats(dev, out_stats);
}

kiln_status_t kiln_device_memory_reset_peak(kiln_device_t* dev) {
  CHECK_DEV(dev);
  if (!KILN_HAL_HAS(dev->vtable, memory_reset_peak))
    return kiln_error(KILN_ERROR_UNIMPLEMENTED, "device has no memory statistics");
  return dev->vtable->memory_reset_peak(dev);
}

kiln_status_t kiln_device_memory_empty_cache(kiln_device_t* dev) {
  CHECK_DEV(dev);
  if (!KILN_HAL_HAS(dev->vtable, memory_empty_cache)) return KILN_OK;
  return dev->vtable->memory_empty_cache(dev);
}

void kiln_device_destroy(kiln_device_t* dev) {
  if (!dev || !dev->vtable) return;
  dev->vtable->destroy(dev);
}
