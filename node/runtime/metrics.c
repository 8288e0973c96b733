/* metrics.c: JSON Lines metrics (metrics.h). */
#include "node/runtime/metrics.h"
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct metrics {
    FILE *f;               /* NULL: discard */
    char node[24];         /* short node id */
    int stage;             /* -1: null */
    pthread_mutex_t lock;  /* one line at a time */
};

static double s_start = -1.0;

static double s_mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

__attribute__((constructor)) static void s_init_clock(void)
{
    s_start = s_mono();
}

double metrics_now(void)
{
    return s_mono() - s_start;
}

const char *metrics_num(char *buf, size_t len, double x)
{
    if (isfinite(x)) snprintf(buf, len, "%.9g", x);
    else snprintf(buf, len, "null");
    return buf;
}

metrics_t *metrics_open(const char *path, const char *node, char *err, size_t errlen)
{
    metrics_t *m = calloc(1, sizeof *m);
    if (!m) { snprintf(err, errlen, "out of memory"); return NULL; }
    if (path && *path) {
        m->f = fopen(path, "a");
        if (!m->f) {
            snprintf(err, errlen, "--metrics %s: %s", path, strerror(errno));
            free(m);
            return NULL;
        }
    }
    snprintf(m->node, sizeof m->node, "%s", node ? node : "solo");
    m->stage = -1;
    pthread_mutex_init(&m->lock, NULL);
    return m;
}

void metrics_close(metrics_t **self_p)
{
    metrics_t *m = *self_p;
    if (!m) return;
    if (m->f) fclose(m->f);
    pthread_mutex_destroy(&m->lock);
    free(m);
    *self_p = NULL;
}

void metrics_set_stage(metrics_t *m, int stage)
{
    pthread_mutex_lock(&m->lock);
    m->stage = stage;
    pthread_mutex_unlock(&m->lock);
}

void metrics_set_node(metrics_t *m, const char *node)
{
    pthread_mutex_lock(&m->lock);
    snprintf(m->node, sizeof m->node, "%s", node);
    pthread_mutex_unlock(&m->lock);
}

void metrics_event(metrics_t *m, const char *event, const char *fields, ...)
{
    if (!m || !m->f) return;
    pthread_mutex_lock(&m->lock);
    fprintf(m->f, "{\"t\":%.3f,\"event\":\"%s\",\"node\":\"%s\",\"stage\":", metrics_now(), event, m->node);
    if (m->stage < 0) fputs("null", m->f);
    else fprintf(m->f, "%d", m->stage);
    if (fields && *fields) {
        fputc(',', m->f);
        va_list ap;
        va_start(ap, fields);
        vfprintf(m->f, fields, ap);
        va_end(ap);
    }
    fputs("}\n", m->f);
    fflush(m->f);
    pthread_mutex_unlock(&m->lock);
}
