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

/* The file behind one or more metrics objects (the simulator's nodes share one). */
typedef struct {
    FILE *f;               /* NULL: discard */
    pthread_mutex_t lock;  /* one line at a time */
    int refs;              /* metrics objects writing here (guarded by lock) */
} sink_t;

struct metrics {
    sink_t *sink;          /* where lines go */
    char node[24];         /* short node id */
    int stage;             /* -1: null */
    double (*now)(void *arg);  /* the clock of `t` (NULL: metrics_now) */
    void *now_arg;
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

static metrics_t *s_new(sink_t *sink, const char *node)
{
    metrics_t *m = calloc(1, sizeof *m);
    if (!m) return NULL;
    m->sink = sink;
    snprintf(m->node, sizeof m->node, "%s", node ? node : "solo");
    m->stage = -1;
    return m;
}

metrics_t *metrics_open(const char *path, const char *node, char *err, size_t errlen)
{
    sink_t *sink = calloc(1, sizeof *sink);
    metrics_t *m = sink ? s_new(sink, node) : NULL;
    if (!m) { free(sink); snprintf(err, errlen, "out of memory"); return NULL; }
    if (path && *path) {
        sink->f = fopen(path, "a");
        if (!sink->f) {
            snprintf(err, errlen, "--metrics %s: %s", path, strerror(errno));
            free(sink);
            free(m);
            return NULL;
        }
    }
    pthread_mutex_init(&sink->lock, NULL);
    sink->refs = 1;
    return m;
}

metrics_t *metrics_share(metrics_t *parent, const char *node)
{
    metrics_t *m = s_new(parent->sink, node);
    if (!m) return NULL;
    pthread_mutex_lock(&parent->sink->lock);
    parent->sink->refs++;
    pthread_mutex_unlock(&parent->sink->lock);
    m->now = parent->now;
    m->now_arg = parent->now_arg;
    return m;
}

void metrics_close(metrics_t **self_p)
{
    metrics_t *m = *self_p;
    if (!m) return;
    sink_t *sink = m->sink;
    pthread_mutex_lock(&sink->lock);
    int last = --sink->refs == 0;
    pthread_mutex_unlock(&sink->lock);
    if (last) {
        if (sink->f) fclose(sink->f);
        pthread_mutex_destroy(&sink->lock);
        free(sink);
    }
    free(m);
    *self_p = NULL;
}

void metrics_set_clock(metrics_t *m, double (*now)(void *arg), void *arg)
{
    m->now = now;
    m->now_arg = arg;
}

void metrics_set_stage(metrics_t *m, int stage)
{
    pthread_mutex_lock(&m->sink->lock);
    m->stage = stage;
    pthread_mutex_unlock(&m->sink->lock);
}

void metrics_set_node(metrics_t *m, const char *node)
{
    pthread_mutex_lock(&m->sink->lock);
    snprintf(m->node, sizeof m->node, "%s", node);
    pthread_mutex_unlock(&m->sink->lock);
}

void metrics_event(metrics_t *m, const char *event, const char *fields, ...)
{
    if (!m || !m->sink->f) return;
    FILE *f = m->sink->f;
    pthread_mutex_lock(&m->sink->lock);
    double t = m->now ? m->now(m->now_arg) : metrics_now();
    fprintf(f, "{\"t\":%.3f,\"event\":\"%s\",\"node\":\"%s\",\"stage\":", t, event, m->node);
    if (m->stage < 0) fputs("null", f);
    else fprintf(f, "%d", m->stage);
    if (fields && *fields) {
        fputc(',', f);
        va_list ap;
        va_start(ap, fields);
        vfprintf(f, fields, ap);
        va_end(ap);
    }
    fputs("}\n", f);
    fflush(f);
    pthread_mutex_unlock(&m->sink->lock);
}
