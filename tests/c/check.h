/* A minimal assertion helper for the C tests: failed checks print file:line
 * and the values, the run goes on, and check_summary() gives the exit code. */
#ifndef LT_TEST_CHECK_H
#define LT_TEST_CHECK_H

#include <stdio.h>
#include <string.h>

static int check_count;
static int check_failures;

#define CHECK(cond)                                                             \
  do {                                                                          \
    check_count++;                                                              \
    if (!(cond)) {                                                              \
      check_failures++;                                                         \
      fprintf(stderr, "%s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #cond);  \
    }                                                                           \
  } while (0)

#define CHECK_EQ_INT(a, b)                                                      \
  do {                                                                          \
    long long check_a_ = (long long)(a), check_b_ = (long long)(b);             \
    check_count++;                                                              \
    if (check_a_ != check_b_) {                                                 \
      check_failures++;                                                         \
      fprintf(stderr, "%s:%d: CHECK_EQ_INT(%s, %s) failed: %lld != %lld\n",     \
              __FILE__, __LINE__, #a, #b, check_a_, check_b_);                  \
    }                                                                           \
  } while (0)

#define CHECK_EQ_STR(a, b)                                                      \
  do {                                                                          \
    const char *check_a_ = (a), *check_b_ = (b);                                \
    check_count++;                                                              \
    if (!check_a_ || !check_b_ || strcmp(check_a_, check_b_) != 0) {           \
      check_failures++;                                                         \
      fprintf(stderr, "%s:%d: CHECK_EQ_STR(%s, %s) failed:\n  \"%s\"\n  \"%s\"\n", \
              __FILE__, __LINE__, #a, #b, check_a_ ? check_a_ : "(null)",       \
              check_b_ ? check_b_ : "(null)");                                  \
    }                                                                           \
  } while (0)

/* Prints the tally; returns the process exit code (non-zero on any failure). */
static inline int check_summary(const char *test_name) {
  printf("%s: %d checks, %d failed\n", test_name, check_count, check_failures);
  return check_failures ? 1 : 0;
}

#endif
