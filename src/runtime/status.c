/* SPDX-License-Identifier: Apache-2.0 */
/* status.c - thread-local error messages behind kiln_status_t codes. */
#include "kiln/status.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

static _Thread_local char g_message[512];

kiln_status_t kiln_error(kiln_status_code_t code, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(g_message, sizeof(g_message), fmt, ap);
  va_end(ap);
  return code == KILN_OK ? KILN_ERROR_INTERNAL : (kiln_status_t)code;
}

const char* kiln_status_message(void) { return g_message; }

const char* kiln_status_code_name(kiln_status_t status) {
  switch (status) {
    case KILN_OK: return "OK";
    case KILN_ERROR_INVALID_ARGUMENT: return "INVALID_ARGUMENT";
    case KILN_ERROR_OUT_OF_MEMORY: return "OUT_OF_MEMORY";
    case KILN_ERROR_NOT_FOUND: return "NOT_FOUND";
    case KILN_ERROR_UNIMPLEMENTED: return "UNIMPLEMENTED";
    case KILN_ERROR_INTERNAL: return "INTERNAL";
    case KILN_ERROR_FAILED_PRECONDITION: return "FAILED_PRECONDITION";
    case KILN_ERROR_DATA_LOSS: return "DATA_LOSS";
    case KILN_ERROR_OUT_OF_RANGE: return "OUT_OF_RANGE";
    default: return "UNKNOWN";
  }
}

void kiln_assert_fail(const char* file, int line, const char* what) {
  fprintf(stderr, "kiln: assertion failed at %s:%d: %s\n", file, line, what);
  abort();
}
