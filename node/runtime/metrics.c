/* metrics.c: JSON Lines metrics (metrics.h). */
#include "node/runtime/metrics.h"
#include "node/runtime/json.h"
#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The file behind one or more metrics objects (the simulator's nodes share one). */
typedef struct {
    FILE *f;               /* NULL: discard */
    pthread_mutex_t lock;  /* one line at a time */
    int refs;              /* metrics objects writing here (guarded by lock) */
    int failed;            /* a write failed (said once on stderr; guarded by lock) */
} sink_t;

struct metrics {
    sink_t *sink;          /* where lines go */
    char node[24];         /* short node id */
    int stage;             /* -1: null */
    double (*now)(void *arg);  /* the clock of `t` (NULL: metrics_now) */
    void *now_arg;
};

static double s_start = -1.0;

static double s_clock_s(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static double s_mono(void)
{
    return s_clock_s(CLOCK_MONOTONIC);
}

__attribute__((constructor)) static void s_init_clock(void)
{
    s_start = s_mono();
}

double metrics_now(void)
{
    return s_mono() - s_start;
}

double metrics_cpu_process(void)
{
    return s_clock_s(CLOCK_PROCESS_CPUTIME_ID);
}

double metrics_cpu_thread(void)
{
    return s_clock_s(CLOCK_THREAD_CPUTIME_ID);
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

/* One conversion of a metrics format: the text of "%...c", its conversion
 * character and its length modifier ('H' hh, 'h', 'l', 'L' ll, 'z', 'j', 't' or 0). */
typedef struct {
    char text[24];  /* "%-08.3f", NUL-terminated */
    char conv;      /* d i u x X f e g s % ... */
    char len;       /* length modifier */
} s_spec_t;

/* Parses the conversion at f (which points at '%'); returns the characters
 * used.  Outside the format's own quotes (quoted 0) a conversion writes a
 * bare JSON value, which the '+', '#' and '0' flags ("+1", "1.", "007") and
 * hexadecimal (%x, %X: "ff") would make invalid: those are programmer
 * errors (assert), as an unsupported conversion is. */
static size_t s_spec(s_spec_t *sp, const char *f, int quoted)
{
    size_t i = 1;
    while (f[i] && strchr("-+ #0", f[i])) {
        assert((quoted || !strchr("+#0", f[i])) && "metrics format: flag + # or 0 outside quotes (invalid JSON)");
        i++;
    }
    while (isdigit((unsigned char)f[i])) i++;
    if (f[i] == '.') { i++; while (isdigit((unsigned char)f[i])) i++; }
    sp->len = 0;
    if (f[i] == 'h') { sp->len = f[i + 1] == 'h' ? 'H' : 'h'; i += sp->len == 'H' ? 2 : 1; }
    else if (f[i] == 'l') { sp->len = f[i + 1] == 'l' ? 'L' : 'l'; i += sp->len == 'L' ? 2 : 1; }
    else if (f[i] == 'z' || f[i] == 'j' || f[i] == 't') sp->len = f[i++];
    sp->conv = f[i];
    assert(sp->conv && "metrics format ends inside a conversion");
    assert((quoted || (sp->conv != 'x' && sp->conv != 'X')) && "metrics format: %x or %X outside quotes (invalid JSON)");
    i++;
    assert(i < sizeof sp->text && "metrics format conversion too long");
    memcpy(sp->text, f, i);
    sp->text[i] = '\0';
    return i;
}

/* Writes one integer conversion, fetching the argument its type names. */
static void s_put_int(FILE *out, const s_spec_t *sp, va_list *ap)
{
    int u = sp->conv == 'u' || sp->conv == 'x' || sp->conv == 'X';
    switch (sp->len) {
    case 'l': if (u) fprintf(out, sp->text, va_arg(*ap, unsigned long)); else fprintf(out, sp->text, va_arg(*ap, long)); break;
    case 'L': if (u) fprintf(out, sp->text, va_arg(*ap, unsigned long long)); else fprintf(out, sp->text, va_arg(*ap, long long)); break;
    case 'z': if (u) fprintf(out, sp->text, va_arg(*ap, size_t)); else fprintf(out, sp->text, va_arg(*ap, ptrdiff_t)); break;
    case 'j': if (u) fprintf(out, sp->text, va_arg(*ap, uintmax_t)); else fprintf(out, sp->text, va_arg(*ap, intmax_t)); break;
    case 't': fprintf(out, sp->text, va_arg(*ap, ptrdiff_t)); break;
    default:  if (u) fprintf(out, sp->text, va_arg(*ap, unsigned)); else fprintf(out, sp->text, va_arg(*ap, int)); break;
    }
}

/* Writes the fields format with JSON conversions (metrics.h). */
static void s_put_fields(FILE *out, const char *f, va_list *ap)
{
    int quoted = 0;   /* inside a string of the format's own text */
    while (*f) {
        if (*f != '%') {
            if (*f == '\\' && f[1]) { fputc(*f++, out); }
            else if (*f == '"') quoted = !quoted;
            fputc(*f++, out);
            continue;
        }
        s_spec_t sp;
        f += s_spec(&sp, f, quoted);
        switch (sp.conv) {
        case '%':
            fputc('%', out);
            break;
        case 's': {
            assert(!quoted && "metrics format: %s inside quotes (%s writes its own)");
            const char *s = va_arg(*ap, const char *);
            char q[JSON_QUOTE_LEN(METRICS_STR_MAX)];
            if (s) { json_quote(q, sizeof q, s, METRICS_STR_MAX); fputs(q, out); }
            else fputs("null", out);
            break;
        }
        case 'd': case 'i': case 'u': case 'x': case 'X':
            s_put_int(out, &sp, ap);
            break;
        case 'f': case 'F': case 'e': case 'E': case 'g': case 'G': {
            assert(sp.len == 0 || sp.len == 'l');
            double x = va_arg(*ap, double);
            if (isfinite(x)) fprintf(out, sp.text, x);
            else fputs("null", out);
            break;
        }
        default:
            assert(!"metrics format: unsupported conversion");
        }
    }
}

void metrics_event(metrics_t *m, const char *event, const char *fields, ...)
{
    if (!m || !m->sink->f) return;
    FILE *f = m->sink->f;
    char ev[JSON_QUOTE_LEN(64)], node[JSON_QUOTE_LEN(sizeof m->node)];
    json_quote(ev, sizeof ev, event, 64);
    pthread_mutex_lock(&m->sink->lock);
    json_quote(node, sizeof node, m->node, sizeof m->node);
    double t = m->now ? m->now(m->now_arg) : metrics_now();
    fprintf(f, "{\"t\":%.3f,\"event\":%s,\"node\":%s,\"stage\":", t, ev, node);
    if (m->stage < 0) fputs("null", f);
    else fprintf(f, "%d", m->stage);
    if (fields && *fields) {
        fputc(',', f);
        va_list ap;
        va_start(ap, fields);
        s_put_fields(f, fields, &ap);
        va_end(ap);
    }
    fputs("}\n", f);
    int bad = fflush(f) != 0 ? errno : ferror(f) ? EIO : 0;
    if (bad && !m->sink->failed) {   /* said once: the run goes on without its metrics */
        m->sink->failed = 1;
        fprintf(stderr, "brigade: --metrics: writing failed (%s); later events may be lost\n", strerror(bad));
    }
    pthread_mutex_unlock(&m->sink->lock);
}
