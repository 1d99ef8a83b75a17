/* SPDX-License-Identifier: Apache-2.0 */
/* fuzz_load.c - libFuzzer harness for the .kiln loader (kiln_exec_load_buffer).
 *
 * The input is loaded as it is, and again with the header's size field and checksum
 * recomputed as serialize.c defines them (versions 1 to 3): a mutated payload would
 * otherwise almost always stop at the checksum and never reach the node validation, the compiler
 * or the plan check. A program that loads is then dumped, run on bounded inputs and
 * round-tripped through save/load (fuzz_common.c).
 */
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"
#include "kiln_file_test.h"

#define HEADER_BYTES KFT_HEADER_BYTES

int LLVMFuzzerInitialize(int* argc, char*** argv) {
  (void)argc;
  (void)argv;
  kf_init();
  return 0;
}

static uint64_t seed_of(const uint8_t* data, size_t size) {
  return kft_fnv1a(KFT_FNV_SEED, data, size < 256 ? size : 256) ^ size;
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
  if (kft_repair(fixed, size) && memcmp(fixed, data, HEADER_BYTES) != 0) load_and_exercise(fixed, size);
  free(fixed);
  return 0;
}
