/* simtime.c: where the simulated swarm's time goes (simcore.h): every
 * node's time, by the stage it serves, split into computing, waiting for
 * input, held by the delay budget or a flush, held by the window, and idle
 * behind its own uplink (averaging weights or other bytes); and the steady
 * state, from when every initial node started its stage to when the last
 * stage's count reaches --steps, with the compute bound within it. */
#include "node/runtime/simcore.h"
#include <math.h>

static int s_on(const sim_t *s)
{
    return s->res->steady.reached && s->res->steady.to == 0;
}

/* Adds [a, b) of what to the node's stage. */
static void s_add(sim_t *s, int stage, int what, double a, double b)
{
    if (b > a && stage >= 0 && stage < MODEL_STAGES_MAX && what >= 0) s->res->steady.t[stage][what] += b - a;
}

/* Closes the node's current interval at now: an idle one begins behind its
 * uplink (averaging first, as it was sent first, then the rest). */
static void s_close(snode_t *n)
{
    sim_t *s = n->sim;
    simtime_t *m = &n->tm;
    double a = m->since, b = s->now;
    m->since = b;
    if (!s_on(s) || m->what < 0) return;
    if (m->what != SIM_T_COMPUTE && m->what != SIM_T_OTHER) {
        double avg = fmin(b, m->avg_until), link = fmin(b, m->link_until);
        s_add(s, m->stage, SIM_T_AVG, a, avg);
        s_add(s, m->stage, SIM_T_LINK, fmax(a, avg), link);
        a = fmax(a, fmax(avg, link));
    }
    s_add(s, m->stage, m->what, a, b);
}

void simtime_set(snode_t *n, int what)
{
    s_close(n);
    simtime_t *m = &n->tm;
    m->what = what;
    m->stage = n->net && what >= 0 ? netside_stage(n->net) : -1;
    m->link_until = n->egress_free;
    m->avg_until = fmin(m->avg_end, n->egress_free);
}

double simtime_capacity(const sim_t *s)
{
    double cap = s->capacity;
    for (int i = 0; i < s->nnodes; i++)
        if (s->node[i]->alive) cap += (s->now - s->node[i]->started_at) * s->so.gflops * 1e9 * s->node[i]->speed;
    return cap;
}

void simtime_prepared(snode_t *n)
{
    sim_t *s = n->sim;
    sim_steady_t *st = &s->res->steady;
    if (n->tm.prepared) return;
    n->tm.prepared = 1;
    if (st->reached || n->idx >= s->so.nodes || ++s->prepared < s->so.nodes) return;
    st->reached = 1;
    st->from = s->now;
    s->cap0 = simtime_capacity(s);
    s->mb0 = s->res->applied_last;
    for (int i = 0; i < s->nnodes; i++) s->node[i]->tm.since = s->now;
}

/* Ends the steady state now. */
static void s_end(sim_t *s)
{
    sim_steady_t *st = &s->res->steady;
    for (int i = 0; i < s->nnodes; i++) s_close(s->node[i]);
    st->to = s->now > st->from ? s->now : st->from + 1e-9;
    st->mb = s->res->applied_last - s->mb0;
    double per_mb = sim_mb_flops(&s->so);
    st->bound_mb = per_mb > 0 ? (simtime_capacity(s) - s->cap0) / per_mb : 0;
}

void simtime_applied(sim_t *s)
{
    if (s_on(s) && s->so.steps_given && s->res->applied_last >= (uint64_t)s->so.o.steps * (uint64_t)s->so.o.micro) s_end(s);
}

void simtime_finish(sim_t *s)
{
    if (s_on(s)) s_end(s);
}
