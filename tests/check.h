/* check.h: a tiny test framework.  Each test binary runs its cases with RUN(),
 * prints "ok - name" or "FAIL - name: reason" per case, and exits non-zero if
 * any case failed.  A case that made no check fails too: a test that asserts
 * nothing proves nothing.  tests/run.sh counts the lines.  Self-contained
 * (libc and libm only), so `cc -I. t.c -lm` builds a one-case test. */
#ifndef BRIGADE_CHECK_H
#define BRIGADE_CHECK_H
#include <stdio.h>
#include <stdlib.h>
#include <math.h>

static int check_failed_cases;  /* cases that failed so far */
static int check_case_failed;   /* the running case has failed */
static long check_case_checks;  /* checks the running case has made */

#define CHECK(cond) do { check_case_checks++; if (!(cond)) { \
    fprintf(stdout, "  %s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
    check_case_failed = 1; } } while (0)
#define CHECKF(cond, ...) do { check_case_checks++; if (!(cond)) { \
    fprintf(stdout, "  %s:%d: check failed: %s: ", __FILE__, __LINE__, #cond); \
    fprintf(stdout, __VA_ARGS__); fputc('\n', stdout); check_case_failed = 1; } } while (0)
/* |a-b| <= tol * max(1, |a|) */
#define CHECK_NEAR(a, b, tol) do { double a_ = (a), b_ = (b); check_case_checks++; \
    if (!(fabs(a_ - b_) <= (tol) * fmax(1.0, fabs(a_)))) { \
    fprintf(stdout, "  %s:%d: %s=%.9g vs %s=%.9g (tol %g)\n", __FILE__, __LINE__, #a, a_, #b, b_, (double)(tol)); \
    check_case_failed = 1; } } while (0)

/* The larger of worst and e, where a NaN wins and stays: a loop keeping the
 * worst error with it cannot report 0 for a NaN output (fmax and `e > worst`
 * both pass over a NaN). */
static inline double check_worst(double worst, double e)
{
    return isnan(worst) || e <= worst ? worst : e;
}

#define RUN(fn) do { check_case_failed = 0; check_case_checks = 0; fn(); fflush(stdout); \
    if (!check_case_failed && check_case_checks == 0) { \
        printf("  %s made no check\n", #fn); check_case_failed = 1; } \
    if (check_case_failed) { check_failed_cases++; printf("FAIL - %s\n", #fn); } \
    else { printf("ok - %s\n", #fn); } \
    fflush(stdout); } while (0)
#define CHECK_EXIT() return check_failed_cases ? 1 : 0
#endif
