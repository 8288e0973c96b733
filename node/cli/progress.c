/* progress.c: progress lines (progress.h). */
#include "node/cli/progress.h"
#include "node/runtime/metrics.h"
#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

void progress_init(progress_t *p)
{
    p->last = -1e9;
    p->open = 0;
}

void progress_line(progress_t *p, int force, double every, const char *fmt, ...)
{
    int tty = isatty(2);
    double now = metrics_now();
    if (!force && now - p->last < (tty ? 0.25 : every))
        return;
    p->last = now;
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (tty) {
        fprintf(stderr, "\r\033[K%s", line);
        p->open = 1;
    } else {
        fprintf(stderr, "%s\n", line);
    }
    fflush(stderr);
}

void progress_done(progress_t *p)
{
    if (p->open) {
        fputc('\n', stderr);
        p->open = 0;
    }
}
