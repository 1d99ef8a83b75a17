/* SPDX-License-Identifier: Apache-2.0 */
/* version.c - kiln_version() and kiln_build_compiler(): the facts CMake passes in as definitions. */
#include "kiln/version.h"

#ifndef KILN_VERSION_STRING
#error "KILN_VERSION_STRING is defined by CMakeLists.txt (project(kiln VERSION ...))"
#endif
#ifndef KILN_BUILD_COMPILER
#error "KILN_BUILD_COMPILER is defined by CMakeLists.txt"
#endif

const char* kiln_version(void) { return KILN_VERSION_STRING; }

const char* kiln_build_compiler(void) { return KILN_BUILD_COMPILER; }
