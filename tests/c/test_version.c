/* SPDX-License-Identifier: Apache-2.0 */
/* test_version.c - kiln/version.h: the version CMake's project() set, the compiler, the ISA name
 * following the dispatch. */
#include <string.h>

#include "kernels/ew_internal.h"
#include "kiln_test.h"

KT_TEST(version_is_the_project_version) {
  KT_CHECK(strcmp(kiln_version(), KILN_EXPECTED_VERSION) == 0);
  int major = -1, minor = -1, patch = -1, used = 0;
  KT_CHECK(sscanf(kiln_version(), "%d.%d.%d%n", &major, &minor, &patch, &used) == 3);
  KT_CHECK(used == (int)strlen(kiln_version()) && major >= 0 && minor >= 0 && patch >= 0);
}

KT_TEST(build_compiler_names_a_compiler) {
  const char* c = kiln_build_compiler();
  KT_CHECK(c != NULL && strlen(c) > 2 && strchr(c, ' ') != NULL);
}

KT_TEST(cpu_isa_follows_the_dispatch) {
  const char* isa = kiln_cpu_isa();
  const char* expect = kiln_cpu_has_avx512() ? "avx512" : kiln_cpu_has_avx2() ? "avx2" : "generic";
  KT_CHECK(strcmp(isa, expect) == 0);
  kiln_cpu_force_generic(1);
  KT_CHECK(strcmp(kiln_cpu_isa(), "generic") == 0);
  kiln_cpu_force_generic(0);
  KT_CHECK(strcmp(kiln_cpu_isa(), expect) == 0);
}

KT_MAIN()
