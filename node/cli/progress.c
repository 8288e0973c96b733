/* progress.c: progress lines (progress.h). */
#include "node/cli/progress.h"
#include "node/runtime/metrics.h"
#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

static double s_last = -1e9;
static int s_open;

void progress_line(int force, double every, const char *fmt, ...)
{
    int tty = isatty(2);
    double now = metrics_now();
    if (!force && now - s_last < (tty ? 0.25 : every))
        return;
    s_last = now;
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (tty) {
        fprintf(stderr, "\r\033[K%s", line);
        s_open = 1;
    } else {
        fprintf(stderr, "%s\n", line);
    }
    fflush(stderr);
}

void progress_done(void)
{
    if (s_open) {
        fputc('\n', stderr);
        s_open = 0;
    }
}
