/* SPDX-License-Identifier: Apache-2.0 */
/* kiln/version.h - what this libkiln is: its version, how it was built, which ISA it dispatches to.
 *
 * The version has one source, `project(kiln VERSION ...)` in CMakeLists.txt: the Python package
 * (torch_kiln.__version__), the CMake package config (find_package(Kiln 0.1)) and kiln.pc report
 * the same string.
 *
 *   printf("libkiln %s (%s), kernels: %s\n", kiln_version(), kiln_build_compiler(), kiln_cpu_isa());
 */
#ifndef KILN_VERSION_H
#define KILN_VERSION_H

#ifdef __cplusplus
extern "C" {
#endif

/* The library's version, "MAJOR.MINOR.PATCH" (e.g. "0.1.0"). Static storage, never NULL. */
const char* kiln_version(void);

/* The C compiler that built the library, "<CMake compiler id> <version>" (e.g. "GNU 12.2.0").
 * Static storage, never NULL. */
const char* kiln_build_compiler(void);

/* The instruction set the CPU kernels dispatch to in this process: "avx512" (AVX-512F kernels
 * where they exist, AVX2 + FMA elsewhere), "avx2" (AVX2 + FMA + F16C) or "generic" (portable C).
 * Decided from the CPU at first use; KILN_DISABLE_AVX512=1 / KILN_DISABLE_AVX2=1 in the
 * environment step it down. Static storage, never NULL. */
const char* kiln_cpu_isa(void);

#ifdef __cplusplus
}
#endif
#endif /* KILN_VERSION_H */
