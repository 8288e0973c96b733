/* test_metrics: the metrics writer (node/runtime/metrics.h): every line is
 * one JSON object, whatever a peer sent, and a format that would print
 * something else is refused. */
#include "tests/check.h"
#include "tests/json_valid.h"
#include "tests/runtime_fixture.h"
#include "node/runtime/metrics.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static char s_dir[64];

/* Reads path's lines into lines[] (at most max, each NUL-terminated, no
 * newline); returns their count, or -1 when a line lacks its newline. */
static int s_read_lines(const char *path, char lines[][8192], int max)
{
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    int n = 0;
    while (n < max && fgets(lines[n], 8192, f)) {
        size_t l = strlen(lines[n]);
        if (l == 0 || lines[n][l - 1] != '\n') { fclose(f); return -1; }
        lines[n][l - 1] = '\0';
        n++;
    }
    fclose(f);
    return n;
}

static void test_metrics_lines_are_json(void)
{
    char path[300], err[256];
    snprintf(path, sizeof path, "%s/m.jsonl", s_dir);
    metrics_t *m = metrics_open(path, "n\"1", err, sizeof err);
    CHECK(m != NULL);
    if (!m) return;
    metrics_set_stage(m, 2);
    /* what a hostile peer controls: an address, a reason built from its bytes */
    const char *evil = "a\",\"event\":\"forged\",\"x\":\"\\\n\x01\xc3\xa9";
    metrics_event(m, "peer", "\"peer\":%s,\"what\":\"joined\",\"why\":%s,\"peer_stage\":%d,\"addr\":%s",
                  "abcd1234", "gossip", 1, evil);
    metrics_event(m, "update", "\"loss\":%.9g,\"acc\":%.6f,\"lr\":%g,\"n\":%llu,\"z\":%zu,\"d\":%d",
                  NAN, INFINITY, -INFINITY, 18446744073709551615ULL, (size_t)7, -3);
    metrics_event(m, "drop", "\"why\":\"silent %.1f s\",\"from\":\"%08llx\",\"p\":%s,\"pct\":\"100%%\"",
                  NAN, 0xdeadbeefULL, "");
    metrics_event(m, "end", NULL);
    char long_s[3000];
    memset(long_s, '"', sizeof long_s - 1);
    long_s[sizeof long_s - 1] = '\0';
    metrics_event(m, "long", "\"s\":%s", long_s);
    metrics_set_stage(m, -1);
    metrics_event(m, "ev\"il", "\"k\":1");
    metrics_close(&m);
    CHECK(m == NULL);

    static char lines[8][8192];
    int n = s_read_lines(path, lines, 8);
    CHECKF(n == 6, "%d lines", n);
    for (int i = 0; i < n; i++) {
        CHECKF(json_valid(lines[i], strlen(lines[i])), "line %d: %s", i + 1, lines[i]);
        CHECKF(lines[i][0] == '{' && strstr(lines[i], "\"t\":") && strstr(lines[i], "\"event\":")
               && strstr(lines[i], "\"node\":\"n\\\"1\"") && strstr(lines[i], "\"stage\":"), "line %d: %s", i + 1, lines[i]);
    }
    if (n < 6) return;
    CHECK(strstr(lines[0], "\"stage\":2,") != NULL);
    CHECK(strstr(lines[0], "\"addr\":\"a\\\",\\\"event\\\":\\\"forged\\\",\\\"x\\\":\\\"\\\\\\n\\u0001\\u00c3\\u00a9\"}") != NULL);
    CHECK(strstr(lines[0], "\"event\":\"forged\"") == NULL);
    CHECK(strstr(lines[1], "\"loss\":null,\"acc\":null,\"lr\":null,\"n\":18446744073709551615,\"z\":7,\"d\":-3}") != NULL);
    CHECK(strstr(lines[2], "\"why\":\"silent null s\",\"from\":\"deadbeef\",\"p\":\"\",\"pct\":\"100%\"}") != NULL);
    CHECK(strstr(lines[3], "\"event\":\"end\"") != NULL && strstr(lines[3], "\"stage\":2}") != NULL);
    CHECKF(strlen(lines[4]) < 2 * METRICS_STR_MAX + 100, "%zu bytes", strlen(lines[4]));   /* cut at METRICS_STR_MAX */
    CHECK(strstr(lines[5], "\"event\":\"ev\\\"il\"") != NULL && strstr(lines[5], "\"stage\":null") != NULL);
}

/* 1 when metrics_event(fields, arg) in a child process dies by an assert
 * (SIGABRT); its message goes to /dev/null. */
static int s_metrics_refuses(const char *fields, int arg)
{
    fflush(stdout);
    pid_t child = fork();
    if (child == 0) {
        if (!freopen("/dev/null", "w", stderr)) _exit(3);
        char path[300], err[256];
        snprintf(path, sizeof path, "%s/refused.jsonl", s_dir);
        metrics_t *m = metrics_open(path, "n", err, sizeof err);
        if (!m) _exit(3);
        metrics_event(m, "x", fields, arg);
        metrics_close(&m);
        _exit(0);
    }
    int st = 0;
    if (child < 0 || waitpid(child, &st, 0) != child) return 0;
    return WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT;
}

/* A bare value that printf would write as "+1", "ff", "1." or "007" is not
 * JSON: the format is refused; inside the format's quotes it is a string. */
static void test_metrics_refuses_non_json_conversions(void)
{
    const char *bad[] = {"\"n\":%+d", "\"n\":%x", "\"n\":%X", "\"n\":%#x", "\"n\":%05d", "\"n\":%+.1f",
                         "\"n\":%#.0f"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        CHECKF(s_metrics_refuses(bad[i], 1), "%s written", bad[i]);
    const char *good[] = {"\"n\":%d", "\"n\":\"%x\"", "\"n\":\"%+05d\"", "\"n\":% d", "\"n\":%-4d"};
    for (size_t i = 0; i < sizeof good / sizeof *good; i++)
        CHECKF(!s_metrics_refuses(good[i], 1), "%s refused", good[i]);
    char path[300], err[256];
    snprintf(path, sizeof path, "%s/quoted.jsonl", s_dir);
    unlink(path);
    metrics_t *m = metrics_open(path, "n", err, sizeof err);
    CHECK(m != NULL);
    if (!m) return;
    metrics_event(m, "x", "\"h\":\"%X\",\"p\":\"%+d\",\"z\":\"%03d\",\"s\":% d", 255, 5, 7, 2);
    metrics_close(&m);
    static char lines[2][8192];
    CHECK(s_read_lines(path, lines, 2) == 1);
    CHECKF(json_valid(lines[0], strlen(lines[0])), "%s", lines[0]);
    CHECKF(strstr(lines[0], "\"h\":\"FF\",\"p\":\"+5\",\"z\":\"007\",\"s\": 2}") != NULL, "%s", lines[0]);
}

int main(void)
{
    if (fixture_tmpdir(s_dir, sizeof s_dir, "metrics") < 0) return 1;
    RUN(test_metrics_lines_are_json);
    RUN(test_metrics_refuses_non_json_conversions);
    fixture_rmdir(s_dir);
    CHECK_EXIT();
}
