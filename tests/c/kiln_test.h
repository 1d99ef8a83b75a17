/* SPDX-License-Identifier: Apache-2.0 */
/* kiln_test.h - a tiny C test runner. Each test file defines tests with KT_TEST and calls
 * KT_MAIN(); the closing line reports counts and the exit status is non-zero on any failure. */
#ifndef KILN_TEST_H
#define KILN_TEST_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kiln/kiln.h"

typedef void (*kt_fn)(void);
typedef struct { const char* name; kt_fn fn; } kt_case;

static kt_case kt_cases[256];
static int kt_ncases;
static int kt_failed_checks;
static int kt_current_failed;

#define KT_TEST(test_fn)                                                 \
  static void test_fn(void);                                             \
  __attribute__((constructor)) static void kt_reg_##test_fn(void) {      \
    kt_cases[kt_ncases].name = #test_fn;                                 \
    kt_cases[kt_ncases++].fn = test_fn;                                  \
  }                                                                      \
  static void test_fn(void)

#define KT_CHECK(cond)                                                           \
  do {                                                                           \
    if (!(cond)) {                                                               \
      fprintf(stderr, "  %s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      kt_failed_checks++;                                                        \
      kt_current_failed = 1;                                                     \
    }                                                                            \
  } while (0)

/* Checks a kiln_status_t is KILN_OK; prints the message otherwise. */
#define KT_OK(expr)                                                                   \
  do {                                                                                \
    kiln_status_t kt_s_ = (expr);                                                     \
    if (kt_s_ != KILN_OK) {                                                           \
      fprintf(stderr, "  %s:%d: %s -> %s: %s\n", __FILE__, __LINE__, #expr,           \
              kiln_status_code_name(kt_s_), kiln_status_message());                   \
      kt_failed_checks++;                                                             \
      kt_current_failed = 1;                                                          \
    }                                                                                 \
  } while (0)

/* Checks a call fails with the given code. */
#define KT_FAILS(code, expr)                                                      \
  do {                                                                            \
    kiln_status_t kt_s_ = (expr);                                                 \
    if (kt_s_ != (code)) {                                                        \
      fprintf(stderr, "  %s:%d: %s -> %s, expected %s\n", __FILE__, __LINE__, #expr, \
              kiln_status_code_name(kt_s_), kiln_status_code_name(code));         \
      kt_failed_checks++;                                                         \
      kt_current_failed = 1;                                                      \
    }                                                                             \
  } while (0)

#define KT_NEAR(a, b, tol) KT_CHECK(fabs((double)(a) - (double)(b)) <= (tol))

static int kt_run_all(const char* file) {
  int failed = 0;
  for (int i = 0; i < kt_ncases; i++) {
    kt_current_failed = 0;
    kt_cases[i].fn();
    printf("%s %s\n", kt_current_failed ? "FAIL" : "ok  ", kt_cases[i].name);
    failed += kt_current_failed;
  }
  printf("%s: %d tests, %d passed, %d failed\n", file, kt_ncases, kt_ncases - failed, failed);
  return failed ? 1 : 0;
}

#define KT_MAIN() \
  int main(void) { return kt_run_all(__FILE__); }

#endif /* KILN_TEST_H */
