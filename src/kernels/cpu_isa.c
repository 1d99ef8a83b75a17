/* SPDX-License-Identifier: Apache-2.0 */
/* cpu_isa.c - kiln_cpu_isa(): the name of the kernel dispatch level (kiln/version.h). */
#include "kernels/ew_internal.h"
#include "kiln/version.h"

const char* kiln_cpu_isa(void) {
  if (kiln_cpu_has_avx512()) return "avx512";
  if (kiln_cpu_has_avx2()) return "avx2";
  return "generic";
}
