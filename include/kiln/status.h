/* SPDX-License-Identifier: Apache-2.0 */
/* kiln/status.h - error reporting for every libkiln call.
 *
 * A kiln_status_t is an int code: 0 (KILN_OK) is success, anything else an error.
 * The human-readable message of the most recent error raised *on the calling thread* is kept in
 * thread-local storage and read with kiln_status_message(). Statuses never allocate, so an
 * out-of-memory error can always be reported, and nothing has to be freed on either path.
 *
 *   KILN_RETURN_IF_ERROR(kiln_device_alloc(dev, n, &p));
 */
#ifndef KILN_STATUS_H
#define KILN_STATUS_H

#ifdef __cplusplus
extern "C" {
#endif

typedef enum kiln_status_code {
  KILN_OK = 0,
  KILN_ERROR_INVALID_ARGUMENT = 1, /* bad shape, dtype, pointer, size, flag */
  KILN_ERROR_OUT_OF_MEMORY = 2,    /* allocation refused (system or KILN_MEMORY_LIMIT) */
  KILN_ERROR_NOT_FOUND = 3,        /* unknown device index / name / entry */
  KILN_ERROR_UNIMPLEMENTED = 4,    /* optional vtable slot is NULL, op not supported */
  KILN_ERROR_INTERNAL = 5,         /* a bug or an OS failure (thread creation, ...) */
  KILN_ERROR_FAILED_PRECONDITION = 6, /* object in the wrong state (e.g. registry full) */
  KILN_ERROR_DATA_LOSS = 7,        /* corrupt or truncated serialized data */
  KILN_ERROR_OUT_OF_RANGE = 8,     /* index outside bounds */
} kiln_status_code_t;

typedef int kiln_status_t;

/* Records `fmt` as this thread's last error message and returns `code` (so it can be returned
 * directly). `code` must not be KILN_OK. Messages longer than 511 bytes are truncated. */
kiln_status_t kiln_error(kiln_status_code_t code, const char* fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* The message of the last error raised on this thread ("" if none). Borrowed: valid until the
 * next error on this thread. */
const char* kiln_status_message(void);

/* A short static name for a code, e.g. "OUT_OF_MEMORY". Never NULL. */
const char* kiln_status_code_name(kiln_status_t status);

#define KILN_RETURN_IF_ERROR(expr)        \
  do {                                    \
    kiln_status_t kiln_s_ = (expr);       \
    if (kiln_s_ != KILN_OK) return kiln_s_; \
  } while (0)

/* Always-on assertion for programmer bugs (never for bad user input): prints and aborts. */
#define KILN_ASSERT(cond)                                          \
  do {                                                             \
    if (!(cond)) kiln_assert_fail(__FILE__, __LINE__, #cond);      \
  } while (0)
void kiln_assert_fail(const char* file, int line, const char* what)
#if defined(__GNUC__)
    __attribute__((noreturn))
#endif
    ;

#ifdef __cplusplus
}
#endif
#endif /* KILN_STATUS_H */
