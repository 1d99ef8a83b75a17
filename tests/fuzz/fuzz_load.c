/* SPDX-License-Identifier: Apache-2.0 */
/* fuzz_load.c - libFuzzer harness for the .kiln loader (kiln_exec_load_buffer).
 *
 * The input is loaded as it is, and again with the header's size field and checksum
 * recomputed as serialize.c defines them (versions 1 to 3): a mutated payload would
 * otherwise almost always stop at the checksum and never reach the node validation, the compiler
 * or the plan check. A program that loads is then dumped, run on bounded inputs and
 * round-tripped through save/load (fuzz_common.c). The same bytes go through kiln_model_load_buffer
 * (kiln/model.h): a model that loads has its signature read and is run at the smallest sizes of
 * its dynamic dims (a second specialization: the size expressions and the rebuild at other
 * sizes), on bounded zero inputs.
 */
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"
#include "kiln/model.h"
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

static void model_exercise(const uint8_t* data, size_t size) {
  kiln_model_t* m = (kiln_model_t*)1;
  kiln_status_t st = kiln_model_load_buffer(data, size, 0, &m);
  if (st != KILN_OK) {
    if (m != NULL) kf_fail("kiln_model_load_buffer failed but left *out set");
    if (st != KILN_ERROR_DATA_LOSS && st != KILN_ERROR_OUT_OF_MEMORY)
      kf_fail("kiln_model_load_buffer failed with a code other than DATA_LOSS / OUT_OF_MEMORY");
    return;
  }
  int ni = kiln_model_num_inputs(m), no = kiln_model_num_outputs(m);
  kiln_model_info_t info;
  if (kiln_model_get_info(m, &info) != KILN_OK || info.n_inputs != ni || info.n_outputs != no)
    kf_fail("kiln_model_get_info disagrees with the counts");
  for (int k = 0; k < info.n_symbols; k++) {
    const char* name;
    int64_t lo, hi;
    if (kiln_model_symbol(m, k, &name, &lo, &hi) != KILN_OK || !name || lo > hi)
      kf_fail("kiln_model_symbol: a loaded symbol is invalid");
  }
  enum { MAXIO = 16 };
  kiln_tensor_t ins[MAXIO], outs[MAXIO];
  void* bufs[MAXIO] = {NULL};
  int64_t total = info.workspace_bytes;
  int ok = ni <= MAXIO && no <= MAXIO;
  for (int i = 0; ok && i < ni; i++) {
    kiln_model_io_t io;
    if (kiln_model_input_info(m, i, &io) != KILN_OK || !io.name) kf_fail("kiln_model_input_info failed");
    int64_t nb = (int64_t)kiln_dtype_size((kiln_dtype_t)io.dtype);
    for (int d = 0; d < io.ndim && ok; d++) {
      if (io.min[d] < 0 || io.min[d] > io.shape[d]) kf_fail("input bounds out of order");
      ok = io.min[d] == 0 || nb <= KILN_FUZZ_MAX_RUN_BYTES / io.min[d];
      nb *= io.min[d];
    }
    total += nb;
    ok = ok && total <= KILN_FUZZ_MAX_RUN_BYTES;
    if (ok) bufs[i] = calloc(1, (size_t)nb + 8);
    kiln_tensor_init_contiguous(&ins[i], bufs[i], (kiln_dtype_t)io.dtype, io.ndim, io.min);
  }
  for (int k = 0; ok && k < no; k++) {
    kiln_model_io_t io;
    if (kiln_model_output_info(m, k, &io) != KILN_OK) kf_fail("kiln_model_output_info failed");
    int64_t nb = (int64_t)kiln_dtype_size((kiln_dtype_t)io.dtype);
    for (int d = 0; d < io.ndim && ok; d++) {
      ok = io.shape[d] == 0 || nb <= KILN_FUZZ_MAX_RUN_BYTES / io.shape[d];
      nb *= io.shape[d];
    }
    total += nb;
    ok = ok && total <= KILN_FUZZ_MAX_RUN_BYTES;
  }
  memset(outs, 0, sizeof outs);
  if (ok && kiln_model_run(m, ni, ins, no, outs) == KILN_OK)
    for (int k = 0; k < no; k++) {
      if (!outs[k].data) kf_fail("kiln_model_run succeeded without an output");
      kiln_model_free_output(m, outs[k].data);
    }
  for (int i = 0; i < MAXIO; i++) free(bufs[i]);
  kiln_model_destroy(m);
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  load_and_exercise(data, size);
  model_exercise(data, size);
  if (size < HEADER_BYTES || memcmp(data, "KILNGRF", 8) != 0) return 0;
  unsigned char* fixed = malloc(size);
  if (!fixed) return 0;
  memcpy(fixed, data, size);
  if (kft_repair(fixed, size) && memcmp(fixed, data, HEADER_BYTES) != 0) {
    load_and_exercise(fixed, size);
    model_exercise(fixed, size);
  }
  free(fixed);
  return 0;
}
