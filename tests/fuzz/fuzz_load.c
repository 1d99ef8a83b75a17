/* SPDX-License-Identifier: Apache-2.0 */
/* fuzz_load.c - libFuzzer harness for the .kiln loader (kiln_exec_load_buffer).
 *
 * The input is loaded as it is, and again with the header's payload length and checksum
 * recomputed as serialize.c defines them (version 1 and later): a mutated payload would
 * otherwise almost always stop at the checksum and never reach the node validation, the compiler
 * or the plan check. A program that loads is then dumped, run on bounded inputs and
 * round-tripped through save/load (fuzz_common.c).
 */
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"

#define HEADER_BYTES 32

int LLVMFuzzerInitialize(int* argc, char*** argv) {
  (void)argc;
  (void)argv;
  kf_init();
  return 0;
}

static void put_u64(unsigned char* p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}

#define FNV_SEED 0xcbf29ce484222325ull

static uint64_t fnv1a(uint64_t h, const unsigned char* p, size_t n) {
  for (size_t i = 0; i < n; i++) {
    h ^= p[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

static uint64_t seed_of(const uint8_t* data, size_t size) {
  return fnv1a(FNV_SEED, data, size < 256 ? size : 256) ^ size;
}

static void load_and_exercise(const uint8_t* data, size_t size) {
  kiln_exec_t* e = (kiln_exec_t*)1; /* must be reset to NULL on every path */
  kiln_status_t st = kiln_exec_load_buffer(data, size, &e);
  if (st != KILN_OK) {
    if (e != NULL) kf_fail("kiln_exec_load_buffer failed but left *out set");
    if (st != KILN_ERROR_DATA_LOSS && st != KILN_ERROR_OUT_OF_MEMORY)
      kf_fail("kiln_exec_load_buffer failed with a code other than DATA_LOSS / OUT_OF_MEMORY");
    return;
  }
  if (!e) kf_fail("kiln_exec_load_buffer succeeded with a NULL exec");
  kf_exercise(e, seed_of(data, size));
  kiln_exec_destroy(e);
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  load_and_exercise(data, size);
  if (size < HEADER_BYTES || memcmp(data, "KILNGRF", 8) != 0) return 0;
  unsigned char* fixed = malloc(size);
  if (!fixed) return 0;
  memcpy(fixed, data, size);
  put_u64(fixed + 16, (uint64_t)(size - HEADER_BYTES));
  /* version 1 sums the payload; later versions header bytes [8, 24) and then the payload */
  uint64_t h = fixed[8] == 1 && !fixed[9] && !fixed[10] && !fixed[11]
                   ? FNV_SEED : fnv1a(FNV_SEED, fixed + 8, 16);
  put_u64(fixed + 24, fnv1a(h, fixed + HEADER_BYTES, size - HEADER_BYTES));
  if (memcmp(fixed, data, HEADER_BYTES) != 0) load_and_exercise(fixed, size);
  free(fixed);
  return 0;
}
