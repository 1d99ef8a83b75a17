/* SPDX-License-Identifier: Apache-2.0 */
/* cpu_stream.h - the CPU device's asynchronous in-order streams (internal).
 *
 * A stream is a growable ring of tasks run in order by one worker thread, started on the first
 * submission. `submitted` counts tasks enqueued, `completed` tasks finished; a point in the
 * stream is a sequence number (the value of `submitted` at that time), reached once
 * completed >= it. Streams are reference counted so events and cross-stream waits can keep one
 * readable after its owner destroyed it; the owner calls shutdown (drain + join) then release.
 */
#ifndef KILN_CPU_STREAM_H
#define KILN_CPU_STREAM_H

#include <stddef.h>
#include <stdint.h>

#include "kiln/hal.h"

typedef struct kiln_cpu_stream kiln_cpu_stream_t;

/* Creates an idle stream (no thread yet) with one reference owned by the caller. */
kiln_status_t kiln_cpu_stream_create(const kiln_allocator_t* host_allocator, kiln_cpu_stream_t** out);
/* Waits for all work, then stops and joins the worker. Called once, by the owner. */
void kiln_cpu_stream_shutdown(kiln_cpu_stream_t* s);
/* Adds a reference. */
void kiln_cpu_stream_retain(kiln_cpu_stream_t* s);
/* Drops a reference; the last one frees the stream (which must be shut down). */
void kiln_cpu_stream_release(kiln_cpu_stream_t* s);

/* Enqueues a copy of `size` bytes (memmove semantics when the ranges overlap). */
kiln_status_t kiln_cpu_stream_copy(kiln_cpu_stream_t* s, void* dst, const void* src, size_t size);
/* Enqueues a fill; pattern_size is 1, 2, 4 or 8 and divides size (checked by the caller). */
kiln_status_t kiln_cpu_stream_fill(kiln_cpu_stream_t* s, void* dst, size_t size, const void* pattern,
                                   size_t pattern_size);
/* Enqueues fn(user). */
kiln_status_t kiln_cpu_stream_host_fn(kiln_cpu_stream_t* s, kiln_host_fn_t fn, void* user);
/* Enqueues fn(user), whose status (and message) becomes the stream's error when it fails.
 * inline_if_idle != 0: when the stream has no queued or running work, fn runs now on the calling
 * thread, as the stream's next task (work submitted meanwhile waits for it). */
kiln_status_t kiln_cpu_stream_call(kiln_cpu_stream_t* s, kiln_status_t (*fn)(void* user), void* user,
                                   int inline_if_idle);
/* Makes later work on `s` wait until `other` reaches `seq`. Consumes one reference to `other`
 * (the caller retains it beforehand) in every case. */
kiln_status_t kiln_cpu_stream_wait(kiln_cpu_stream_t* s, kiln_cpu_stream_t* other, uint64_t seq);

/* The current sequence number: the point after all work submitted so far. */
uint64_t kiln_cpu_stream_position(kiln_cpu_stream_t* s);
/* 1 if all work up to `seq` has finished. Never blocks. */
int kiln_cpu_stream_reached(kiln_cpu_stream_t* s, uint64_t seq);
/* Blocks until all work up to `seq` has finished. */
void kiln_cpu_stream_wait_host(kiln_cpu_stream_t* s, uint64_t seq);
/* Waits for all submitted work; returns and clears the first error raised by it. */
kiln_status_t kiln_cpu_stream_synchronize(kiln_cpu_stream_t* s);

#endif /* KILN_CPU_STREAM_H */
