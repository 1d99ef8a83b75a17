/* SPDX-License-Identifier: Apache-2.0 */
/* fuzz_common.h - what both fuzz harnesses do with a compiled program: dump it, run it on
 * bounded inputs, and check that save / load round-trips it exactly.
 *
 * A property that does not hold (a save that does not load back, a loaded program that saves to
 * other bytes or computes other bits, an output buffer left partly unwritten) is reported on
 * stderr and abort()s, so libFuzzer records the input as a crash like a sanitizer report.
 */
#ifndef KILN_FUZZ_COMMON_H
#define KILN_FUZZ_COMMON_H

#include <stddef.h>
#include <stdint.h>

#include "kiln/graph.h"

/* Runs are skipped when inputs + outputs + workspace exceed this many bytes. */
#define KILN_FUZZ_MAX_RUN_BYTES (8 << 20)

/* libFuzzer's entry points (the harness defines them; replay_main.c calls them). */
int LLVMFuzzerInitialize(int* argc, char*** argv);
int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

/* One-time setup: a single kernel thread (determinism, and the fuzzing machine is shared). */
void kf_init(void);

/* Everything the harnesses check on a compiled program `e` (borrowed): all dumps, a bounded run
 * (twice, over output buffers pre-filled with different bytes: the results must agree bit for
 * bit), then save -> load -> save, which must succeed, give the same bytes and the same results.
 * `seed` picks the input values. Returns the first run's status, or -1 when the run was skipped
 * (too big). */
int kf_exercise(kiln_exec_t* e, uint64_t seed);

/* Prints `what` and aborts (a property violation). */
void kf_fail(const char* what);

#endif /* KILN_FUZZ_COMMON_H */
