/* test_invariant.c: the runtime's invariant checks (node/runtime/invariant.h):
 * a held one costs its test only, a broken one names its file, line and
 * expression (tests/sim/simfuzz.sh finds the word "violation" and prints
 * the seed) and aborts. */
#include "tests/check.h"
#include "node/runtime/invariant.h"
#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

static void test_held_invariant_evaluates_once(void)
{
    int n = 0;
    INVARIANT(++n == 1);
    CHECK(n == 1);
}

/* Runs a broken invariant in a child: its stderr into out, its status into *status. */
static void s_broken_in_child(char *out, size_t outlen, int *status)
{
    int fd[2];
    out[0] = 0;
    *status = 0;
    if (pipe(fd) < 0) { CHECK(!"pipe"); return; }
    pid_t pid = fork();
    if (pid < 0) { CHECK(!"fork"); return; }
    if (pid == 0) {
        struct rlimit none = {0, 0};
        setrlimit(RLIMIT_CORE, &none);   /* no core file */
        dup2(fd[1], 2);
        close(fd[0]);
        INVARIANT(1 + 1 == 3);
        _exit(0);
    }
    close(fd[1]);
    size_t got = 0;
    ssize_t k;
    while (got + 1 < outlen && (k = read(fd[0], out + got, outlen - 1 - got)) > 0) got += (size_t)k;
    out[got] = 0;
    close(fd[0]);
    waitpid(pid, status, 0);
}

static void test_broken_invariant_names_its_place_and_aborts(void)
{
    char err[512];
    int status;
    s_broken_in_child(err, sizeof err, &status);
    CHECKF(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT, "status %#x", status);
    CHECKF(strstr(err, "brigade: invariant violation at tests/test_invariant.c:") != NULL, "stderr: %s", err);
    CHECKF(strstr(err, ": 1 + 1 == 3\n") != NULL, "stderr: %s", err);
}

int main(void)
{
    RUN(test_held_invariant_evaluates_once);
    RUN(test_broken_invariant_names_its_place_and_aborts);
    CHECK_EXIT();
}
