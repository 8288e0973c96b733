/* simplan.c: the simulator's fault plans (sim.h, simcore.h): parsing a
 * plan file, drawing random faults from the seed, applying plan events
 * to the swarm, and churn. */
#include "node/runtime/simcore.h"
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static int s_plan_cmp(const void *a, const void *b);

void sim_apply_plan(sim_t *s, const plan_ev_t *p)
{
    snode_t *n = p->node >= 0 && p->node < s->nnodes ? s->node[p->node] : NULL;
    if (s->log && !s->so.quiet) {
        static const char *names[] = { "?", "kill", "restart", "slow", "partition", "heal", "rogue", "pause" };
        fprintf(s->log, "sim %8.1f s: plan: %s", s->now, names[p->kind]);
        if (p->kind == PLAN_PARTITION) for (int i = 0; i < p->nset; i++) fprintf(s->log, "%s%d", i ? "," : " ", p->set[i]);
        else if (p->kind != PLAN_HEAL) fprintf(s->log, " node %d", p->node);
        if (p->kind == PLAN_SLOW) fprintf(s->log, " x%.1f", p->factor);
        if (p->kind == PLAN_PAUSE) fprintf(s->log, " for %.1f s", p->factor);
        fputc('\n', s->log);
    }
    switch (p->kind) {
    case PLAN_KILL:
        if (n && n->inc == 0) n->killed_early = 1;   /* not started yet */
        if (n) sim_node_stop(n, 1);
        break;
    case PLAN_RESTART: if (n && !n->alive && !isfinite(s->done_at)) sim_node_start(n); break;
    case PLAN_SLOW: if (n) n->slow = p->factor; break;
    case PLAN_PAUSE:   /* a node not started yet is paused from its start */
        if (n && (n->alive || n->inc == 0)) n->paused_until = fmax(n->paused_until, s->now + p->factor);
        if (n) s->pause_end = fmax(s->pause_end, n->paused_until);
        break;
    case PLAN_PARTITION:
        memset(s->part, 0, (size_t)s->nnodes);
        for (int i = 0; i < p->nset; i++) if (p->set[i] < s->nnodes) s->part[p->set[i]] = 1;
        s->part_active = 1;
        break;
    case PLAN_HEAL: s->part_active = 0; break;
    case PLAN_ROGUE:   /* a node not alive now starts sending at its (re)start */
        if (n && !n->rogue) {
            n->rogue = 1;
            if (n->alive) sim_push(s, s->now + ROGUE_EVERY_S, EV_ROGUE, n->idx, (uint64_t)n->inc, NULL);
        }
        break;
    default: break;
    }
}

/* Churn: a random live node leaves (crash or goodbye), a new one joins a little later. */
void sim_churn(sim_t *s)
{
    int alive = 0;
    for (int i = 0; i < s->nnodes; i++) alive += s->node[i]->alive;
    if (alive > 1 && !isfinite(s->done_at)) {
        int k = (int)(sim_uniform(s) * alive);
        for (int i = 0; i < s->nnodes; i++) {
            snode_t *n = s->node[i];
            if (n->alive && k-- == 0) {
                int crash = sim_uniform(s) < 0.5 || !n->comp;
                if (s->log && !s->so.quiet) fprintf(s->log, "sim %8.1f s: churn: node %d leaves (%s)\n", s->now, i, crash ? "crash" : "goodbye");
                if (crash) sim_node_stop(n, 1);
                else compute_stop(n->comp, 2), sim_comp_wake(n, s->now);
                break;
            }
        }
        snode_t *fresh = sim_node_new(s);
        if (fresh) sim_push(s, s->now - 10.0 * log(1.0 - sim_uniform(s)), EV_START, fresh->idx, 0, NULL);
    }
    double rate = alive * s->so.churn_per_hour / 3600.0;
    if (rate > 0) sim_push(s, s->now - log(1.0 - sim_uniform(s)) / rate, EV_CHURN, -1, 0, NULL);
}

/* The fault plan of the run: --plan's events, then --faults random ones
 * (sim_plan_random) merged in by time, into s->plan / s->nplan.  0, or -1
 * with a one-line reason (s->plan may be set: the caller frees it). */
int sim_load_plan(sim_t *s, char *err, size_t errlen)
{
    const sim_opts_t *so = &s->so;
    if (so->plan[0]) {
        FILE *f = fopen(so->plan, "r");
        if (!f) { snprintf(err, errlen, "--plan %s: cannot read it", so->plan); return -1; }
        char *text = calloc(1, 1 << 20);
        char e2[256] = "out of memory";
        if (text) {   /* all of it or nothing: a folder, a read error or a cut last line is no plan */
            size_t got = fread(text, 1, (1 << 20) - 1, f);
            int more = got == (1 << 20) - 1 && fgetc(f) != EOF;
            const char *nul = memchr(text, 0, got);
            if (ferror(f)) snprintf(e2, sizeof e2, "cannot read it: %s", strerror(errno));
            else if (more) snprintf(e2, sizeof e2, "longer than 1 MiB");
            else if (nul) snprintf(e2, sizeof e2, "a NUL byte at offset %zu: not a text file", (size_t)(nul - text));
            if (ferror(f) || more || nul) { free(text); text = NULL; }
        }
        fclose(f);
        s->nplan = text ? sim_plan_parse(text, so->nodes, &s->plan, e2, sizeof e2) : -1;
        free(text);
        if (s->nplan < 0) { snprintf(err, errlen, "--plan %s: %s", so->plan, e2); return -1; }
    }
    if (so->faults > 0) {
        plan_ev_t *rnd = NULL;   /* left unset when sim_plan_random fails */
        double horizon = so->sim_seconds > 120 ? 60.0 : so->sim_seconds / 2;
        int k = sim_plan_random(so->o.seed, so->nodes, so->faults, horizon, &rnd);
        plan_ev_t *all = k < 0 ? NULL : realloc(s->plan, sizeof(plan_ev_t) * (size_t)(s->nplan + k));
        if (!all) { free(rnd); snprintf(err, errlen, "out of memory"); return -1; }
        for (int i = 0; i < k; i++) { all[s->nplan + i] = rnd[i]; all[s->nplan + i].line += 100000; }
        s->plan = all;
        s->nplan += k;
        free(rnd);
        qsort(s->plan, (size_t)s->nplan, sizeof *s->plan, s_plan_cmp);
    }
    return 0;
}

/* ---- the plan ---- */

static int s_plan_node(const char *tok, int nodes, int line, const char *what, char *err, size_t errlen)
{
    char *end;
    long v = strtol(tok, &end, 10);
    if (!*tok || *end || v < 0 || v >= nodes) {
        snprintf(err, errlen, "line %d: %s: node '%.40s' is not a number in 0..%d", line, what, tok, nodes - 1);
        return -1;
    }
    return (int)v;
}

static int s_plan_cmp(const void *a, const void *b)
{
    const plan_ev_t *x = a, *y = b;
    if (x->at != y->at) return x->at < y->at ? -1 : 1;
    return x->line - y->line;   /* same time: file order */
}

/* One line of a plan into *p: 1 an event, 0 blank or comment, -1 error. */
static int s_plan_line(char *text, int nodes, int line, plan_ev_t *p, char *err, size_t errlen)
{
    char *hash = strchr(text, '#');
    if (hash) *hash = 0;
    char *tok[4] = {0}, *save = NULL;
    int nt = 0;
    for (char *t = strtok_r(text, " \t\r", &save); t; t = strtok_r(NULL, " \t\r", &save)) {
        if (nt == 4) { snprintf(err, errlen, "line %d: too many fields", line); return -1; }
        tok[nt++] = t;
    }
    if (nt == 0) return 0;
    memset(p, 0, sizeof *p);
    p->line = line;
    char *end;
    p->at = strtod(tok[0], &end);
    if (*end || !isfinite(p->at) || p->at < 0) { snprintf(err, errlen, "line %d: time '%.40s' is not a number of seconds >= 0", line, tok[0]); return -1; }
    if (nt < 2) { snprintf(err, errlen, "line %d: an event is missing after the time", line); return -1; }
    const char *w = tok[1];
    int need = 3;
    if (!strcmp(w, "kill")) p->kind = PLAN_KILL;
    else if (!strcmp(w, "restart")) p->kind = PLAN_RESTART;
    else if (!strcmp(w, "rogue")) p->kind = PLAN_ROGUE;
    else if (!strcmp(w, "slow")) { p->kind = PLAN_SLOW; need = 4; }
    else if (!strcmp(w, "pause")) { p->kind = PLAN_PAUSE; need = 4; }
    else if (!strcmp(w, "partition")) p->kind = PLAN_PARTITION;
    else if (!strcmp(w, "heal")) { p->kind = PLAN_HEAL; need = 2; }
    else { snprintf(err, errlen, "line %d: unknown event '%.40s' (kill, restart, slow, pause, partition, heal, rogue)", line, w); return -1; }
    if (nt != need) { snprintf(err, errlen, "line %d: %s takes %d field%s after the time", line, w, need - 2, need == 3 ? "" : "s"); return -1; }
    if (p->kind == PLAN_PARTITION) {
        char *s2 = NULL;
        for (char *t = strtok_r(tok[2], ",", &s2); t; t = strtok_r(NULL, ",", &s2)) {
            if (p->nset == (int)(sizeof p->set / sizeof p->set[0])) { snprintf(err, errlen, "line %d: partition: at most 64 nodes", line); return -1; }
            if ((p->set[p->nset++] = s_plan_node(t, nodes, line, "partition", err, errlen)) < 0) return -1;
        }
        if (!p->nset) { snprintf(err, errlen, "line %d: partition: no nodes", line); return -1; }
    } else if (p->kind != PLAN_HEAL) {
        if ((p->node = s_plan_node(tok[2], nodes, line, w, err, errlen)) < 0) return -1;
    }
    if (p->kind == PLAN_SLOW) {
        p->factor = strtod(tok[3], &end);
        if (*end || !isfinite(p->factor) || p->factor < 1.0 || p->factor > 1000.0) {
            snprintf(err, errlen, "line %d: slow: factor '%.40s' is not a number in 1..1000", line, tok[3]);
            return -1;
        }
    }
    if (p->kind == PLAN_PAUSE) {
        p->factor = strtod(tok[3], &end);
        if (*end || !isfinite(p->factor) || p->factor <= 0 || p->factor > 3600.0) {
            snprintf(err, errlen, "line %d: pause: '%.40s' is not a number of seconds in (0, 3600]", line, tok[3]);
            return -1;
        }
    }
    return 1;
}

int sim_plan_random(uint64_t seed, int nodes, int count, double horizon, plan_ev_t **out)
{
    plan_ev_t *ev = calloc((size_t)(2 * count + 1), sizeof *ev);
    if (!ev) return -1;
    uint64_t r = sim_mix(seed ^ 0xfa17ULL);
    int n = 0;
#define U() ((double)((r = sim_mix(r)) >> 11) * (1.0 / 9007199254740992.0))
    for (int k = 0; k < count; k++) {
        plan_ev_t *p = &ev[n++];
        p->at = 2.0 + U() * horizon;
        p->line = n;
        p->node = (int)(U() * nodes);
        double what = U();
        if (what < 0.45) {
            p->kind = PLAN_KILL;
            plan_ev_t *q = &ev[n++];
            *q = *p;
            q->kind = PLAN_RESTART;
            q->at = p->at + 1.0 + U() * 19.0;
            q->line = n;
        } else if (what < 0.6) {
            p->kind = PLAN_SLOW;
            p->factor = 2.0 + U() * 6.0;
        } else if (what < 0.7) {
            p->kind = PLAN_PAUSE;
            p->factor = 0.5 + U() * 9.5;
        } else if (what < 0.9) {
            p->kind = PLAN_PARTITION;
            p->nset = 1 + (int)(U() * (nodes / 2));
            int most = (int)(sizeof p->set / sizeof p->set[0]);   /* a side holds at most 64 nodes, as in a plan file */
            if (p->nset > most) p->nset = most;
            for (int i = 0; i < p->nset; i++) {   /* distinct nodes: nset <= max(1, nodes / 2), so a free one is drawn soon */
                int x, dup;
                do {
                    x = (int)(U() * nodes);
                    dup = 0;
                    for (int j = 0; j < i; j++) dup |= p->set[j] == x;
                } while (dup);
                p->set[i] = x;
            }
            plan_ev_t *q = &ev[n++];
            memset(q, 0, sizeof *q);
            q->kind = PLAN_HEAL;
            q->at = p->at + 1.0 + U() * 9.0;
            q->line = n;
        } else {
            p->kind = PLAN_ROGUE;
        }
    }
#undef U
    qsort(ev, (size_t)n, sizeof *ev, s_plan_cmp);
    *out = ev;
    return n;
}

int sim_plan_parse(const char *text, int nodes, plan_ev_t **out, char *err, size_t errlen)
{
    *out = NULL;
    char *copy = strdup(text);
    if (!copy) { snprintf(err, errlen, "out of memory"); return -1; }
    int n = 0, cap = 0, line = 0;
    plan_ev_t *ev = NULL;
    for (char *l = copy, *nl; l; l = nl) {
        nl = strchr(l, '\n');
        if (nl) *nl++ = 0;
        line++;
        plan_ev_t p;
        int r = s_plan_line(l, nodes, line, &p, err, errlen);
        if (r < 0) { free(ev); free(copy); return -1; }
        if (r == 0) continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 16;
            plan_ev_t *e2 = realloc(ev, sizeof(plan_ev_t) * (size_t)cap);
            if (!e2) { free(ev); free(copy); snprintf(err, errlen, "out of memory"); return -1; }
            ev = e2;
        }
        ev[n++] = p;
    }
    free(copy);
    if (n) qsort(ev, (size_t)n, sizeof *ev, s_plan_cmp);
    *out = ev;
    return n;
}
