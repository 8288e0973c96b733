// fuzz-sources: node/runtime/*.c node/runtime/*/*.c node/engine/*.c net/*.c compress/*.c
/* fuzz_plan.c: libFuzzer target for the simulator's fault-plan parser
 * (sim_plan_parse, the text of `brigade sim --plan FILE`).
 *
 * The first byte gives the swarm's size (1 + byte nodes), the rest is the
 * plan's text.  A refused plan leaves no events and says why in one line
 * naming its line; an accepted one holds only events the simulator can
 * apply (a known kind, nodes of the swarm, a time, factor and pause in
 * range), sorted by time then line, and printed back as a plan it parses to
 * the same events. */
#include "node/runtime/sim.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Aborts unless err is one printable line beginning "line N:" with N in
 * 1..lines (or the parser ran out of memory). */
static void s_check_reason(const char *err, int lines)
{
    int at = 0;
    if (strcmp(err, "out of memory") == 0) return;
    if (sscanf(err, "line %d:", &at) != 1 || at < 1 || at > lines) abort();
    for (const char *c = err; *c; c++)
        if (*c == '\n' || *c == '\r') abort();
}

/* Aborts unless every event is one the simulator can apply, in order. */
static void s_check_events(const plan_ev_t *ev, int n, int nodes, int lines)
{
    for (int i = 0; i < n; i++) {
        const plan_ev_t *p = &ev[i];
        if (!isfinite(p->at) || p->at < 0 || p->line < 1 || p->line > lines) abort();
        if (i && (p->at < ev[i - 1].at || (p->at == ev[i - 1].at && p->line <= ev[i - 1].line))) abort();
        switch (p->kind) {
        case PLAN_KILL: case PLAN_RESTART: case PLAN_ROGUE:
            if (p->node < 0 || p->node >= nodes) abort();
            break;
        case PLAN_SLOW:
            if (p->node < 0 || p->node >= nodes || !(p->factor >= 1.0 && p->factor <= 1000.0)) abort();
            break;
        case PLAN_PAUSE:
            if (p->node < 0 || p->node >= nodes || !(p->factor > 0 && p->factor <= 3600.0)) abort();
            break;
        case PLAN_PARTITION:
            if (p->nset < 1 || p->nset > (int)(sizeof p->set / sizeof p->set[0])) abort();
            for (int k = 0; k < p->nset; k++)
                if (p->set[k] < 0 || p->set[k] >= nodes) abort();
            break;
        case PLAN_HEAL:
            break;
        default:
            abort();
        }
    }
}

/* Appends event p as one plan line to out (room for it: the caller's). */
static size_t s_print(char *out, size_t cap, const plan_ev_t *p)
{
    static const char *const names[] = { "", "kill", "restart", "slow", "partition", "heal", "rogue", "pause" };
    int k = snprintf(out, cap, "%.17g %s", p->at, names[p->kind]);
    if (p->kind == PLAN_PARTITION)
        for (int i = 0; i < p->nset; i++) k += snprintf(out + k, cap - (size_t)k, "%c%d", i ? ',' : ' ', p->set[i]);
    else if (p->kind != PLAN_HEAL)
        k += snprintf(out + k, cap - (size_t)k, " %d", p->node);
    if (p->kind == PLAN_SLOW || p->kind == PLAN_PAUSE) k += snprintf(out + k, cap - (size_t)k, " %.17g", p->factor);
    k += snprintf(out + k, cap - (size_t)k, "\n");
    return (size_t)k;
}

/* Aborts unless the events printed back parse to the same events. */
static void s_check_reprint(const plan_ev_t *ev, int n, int nodes)
{
    enum { LINE_MAX_CHARS = 64 * 12 + 64 };   /* a partition of 64 nodes, the time and the word */
    char *text = malloc((size_t)n * LINE_MAX_CHARS + 1), err[256] = "";
    if (!text) abort();
    size_t len = 0;
    text[0] = 0;
    for (int i = 0; i < n; i++) len += s_print(text + len, LINE_MAX_CHARS, &ev[i]);
    plan_ev_t *again = NULL;
    int m = sim_plan_parse(text, nodes, &again, err, sizeof err);
    if (m != n) abort();
    for (int i = 0; i < n; i++) {
        const plan_ev_t *a = &ev[i], *b = &again[i];
        if (a->at != b->at || a->kind != b->kind || a->node != b->node || a->factor != b->factor || a->nset != b->nset
            || memcmp(a->set, b->set, sizeof a->set[0] * (size_t)a->nset) != 0 || b->line != i + 1)
            abort();
    }
    free(again);
    free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    int nodes = 1 + data[0];
    char *text = malloc(size);   /* the rest, NUL-terminated */
    if (!text) return 0;
    memcpy(text, data + 1, size - 1);
    text[size - 1] = 0;
    int lines = 1;
    for (const char *c = text; *c; c++) lines += *c == '\n';
    plan_ev_t *ev = (plan_ev_t *)1;
    char err[256] = "";
    int n = sim_plan_parse(text, nodes, &ev, err, sizeof err);
    if (n < 0) {
        if (ev != NULL || !err[0]) abort();
        s_check_reason(err, lines);
    } else {
        if (n > lines || (n > 0) != (ev != NULL)) abort();
        s_check_events(ev, n, nodes, lines);
        s_check_reprint(ev, n, nodes);
    }
    free(ev);
    free(text);
    return 0;
}
