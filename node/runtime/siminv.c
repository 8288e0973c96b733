/* siminv.c: the simulator's invariants and results (simcore.h): every
 * microbatch applied at most once per node, versions only forward, no
 * microbatch unaccounted for, finite losses, the byte balance of the
 * network, and the run's figures. */
#include "node/runtime/simcore.h"
#include <math.h>
#include <sodium.h>
#include <string.h>

void sim_trace(void *arg, int what, uint64_t mb, int64_t v)
{
    snode_t *n = arg;
    sim_t *s = n->sim;
    sim_fold(s, ((uint64_t)what << 56) ^ mb ^ ((uint64_t)n->idx << 40));
    switch (what) {
    case TRACE_ISSUE: n->chk.issued++; break;
    case TRACE_APPLY:
        if (idmap_get(&n->chk.applied, mb) >= 0) {
            s->res->duplicated++;
            sim_violation(s, "node %d applied microbatch %016llx twice", n->idx, (unsigned long long)mb);
        } else {
            idmap_put(&n->chk.applied, mb, 0);
        }
        if (netside_stage(n->net) == 0) n->chk.resolved++;
        if (netside_stage(n->net) == n->o.stages - 1) {
            s->res->applied_last++;
            sim_progressed(s);
            simtime_applied(s);
        }
        break;
    case TRACE_LOST: n->chk.resolved++; break;
    case TRACE_SKIP: n->chk.resolved++; break;
    case TRACE_UPDATE:
        if ((int)mb == n->chk.last_vstage && v <= n->chk.last_v)
            sim_violation(s, "node %d: weight version went from %lld to %lld", n->idx, (long long)n->chk.last_v, (long long)v);
        n->chk.last_vstage = (int)mb;
        n->chk.last_v = v;
        sim_progressed(s);
        break;
    case TRACE_MOVE:   /* a new stage tenure: its microbatches are new, and its version is the state it takes (a
                        * peer's, a backup's, or the initial one): a node back at a stage it left may resume below
                        * the version it left it at, its own state of then being gone */
        idmap_clear(&n->chk.applied);
        n->chk.last_vstage = -1;
        break;
    case TRACE_RELAYOUT:   /* another layout: new microbatches, and a version that starts again */
        idmap_clear(&n->chk.applied);
        n->chk.last_vstage = -1;
        break;
    default: break;
    }
}

void sim_report(void *arg, const node_report_t *r)
{
    snode_t *n = arg;
    sim_t *s = n->sim;
    if (!r->last) return;
    if (!isfinite(r->loss)) sim_violation(s, "node %d: loss not finite at version %lld", n->idx, (long long)r->version);
    if (isnan(s->res->first_loss)) s->res->first_loss = r->loss;
    s->res->last_loss = r->loss;
}

/* The outcome of a node's compute side, once, when it ends (finished,
 * died with its node, or still running at the end of the simulation). */
void sim_close_compute(snode_t *n, int died)
{
    sim_t *s = n->sim;
    if (!n->comp || n->closed) return;
    n->closed = 1;
    compute_result_t r;
    compute_result(n->comp, &r);
    s->res->lost += r.lost;
    s->res->skipped += r.skipped;
    /* a data-stage node's microbatches are completed, counted lost, or still held; those of a node that died go with it */
    if (!died && r.stage == 0 && n->chk.issued > n->chk.resolved + (uint64_t)r.inflight) {
        uint64_t k = n->chk.issued - n->chk.resolved - (uint64_t)r.inflight;
        s->res->uncounted += k;
        sim_violation(s, "node %d: %llu microbatches issued, never completed, not counted lost", n->idx, (unsigned long long)k);
    }
    if (s->so.real && !died) {
        const stage_state_t *st = compute_state(n->comp);
        uint64_t h = 0;
        if (st) crypto_generichash((uint8_t *)&h, sizeof h, (const uint8_t *)st->params, st->s.nparams * sizeof(float), NULL, 0);
        s->res->weights = sim_mix(s->res->weights ^ h ^ (uint64_t)n->idx);
    }
}

/* A node that has not yet learnt every stage: does it now? */
void sim_check_learned(snode_t *n)
{
    if (n->learned || !n->net) return;
    const peers_t *t = netside_peers(n->net);
    int K = n->o.stages, have = 0;
    unsigned char seen[MODEL_STAGES_MAX] = {0};
    for (int i = 0; i < t->n; i++) {
        int st = t->p[i].info.stage;
        if (t->p[i].health != PEER_GONE && st >= 0 && st < K && !seen[st]) { seen[st] = 1; have++; }
    }
    if (have == K) {
        n->learned = 1;
        n->sim->res->learn_all_s += n->sim->now - n->started_at;
        n->sim->res->learn_n++;
    }
}

/* ---- the end ---- */

/* Modelled FLOPs of one microbatch through every stage: forward 2, backward
 * 4 per parameter and sample position (compute.c's model of the work). */
double sim_mb_flops(const sim_opts_t *so)
{
    double P = 0;
    char err[200];
    for (int st = 0; st < so->o.stages; st++) {
        stage_t lay;
        if (stage_init(&lay, &so->o.cfg, st, so->o.stages, err, sizeof err) < 0) return 0;
        P += (double)lay.nparams;
    }
    int T = so->o.cfg.kind == MODEL_GPT ? so->o.cfg.maxT : 1;
    return 6.0 * P * so->o.batch * T;
}

/* By when every node must have ended once the run completed: a grace
 * after the completion, or after the end of the last plan pause (a paused
 * node ends only after it resumes). */
double sim_end_deadline(const sim_t *s)
{
    return fmax(s->done_at, s->pause_end) + END_GRACE_S;
}

void sim_finish(sim_t *s)
{
    sim_result_t *r = s->res;
    uint64_t best = 0, sent = s->sent_dead + s->rogue_sent, recv = s->recv_dead;
    int complete = s->so.steps_given && isfinite(s->done_at);
    simtime_finish(s);
    for (int i = 0; i < s->nnodes; i++) {
        snode_t *n = s->node[i];
        if (!n->alive) continue;
        if (complete && s->now >= sim_end_deadline(s))
            sim_violation(s, "node %d still running %.0f s after the run completed", i, s->now - s->done_at);
        if (n->net) {
            uint64_t c;
            double l;
            netside_progress(n->net, &c, &l);
            if (c > best) best = c;
            const net_counters_t *k = netside_counters(n->net);
            sent += atomic_load(&k->bytes_sent);
            recv += atomic_load(&k->bytes_recv);
        }
        sim_close_compute(n, 0);
        r->node_seconds += s->now - n->started_at;
        s->capacity += (s->now - n->started_at) * s->so.gflops * 1e9 * n->speed;
    }
    double per_mb = sim_mb_flops(&s->so);
    r->bound_mb = per_mb > 0 ? s->capacity / per_mb : 0;
    r->completed = best;
    r->target = s->so.steps_given ? (uint64_t)s->so.o.steps * (uint64_t)s->so.o.micro : 0;
    if (r->completed < s->best_done) r->completed = s->best_done;
    r->run_complete = s->so.steps_given ? complete : s->now >= s->so.sim_seconds - 1e-9;
    if (sent != r->bytes_sent) sim_violation(s, "bytes sent by the nodes (%llu) differ from bytes put on the network (%llu)",
                                           (unsigned long long)sent, (unsigned long long)r->bytes_sent);
    if (r->bytes_sent != r->bytes_delivered + r->bytes_dropped + r->bytes_inflight)
        sim_violation(s, "bytes sent %llu != delivered %llu + dropped %llu + in flight %llu", (unsigned long long)r->bytes_sent,
                    (unsigned long long)r->bytes_delivered, (unsigned long long)r->bytes_dropped, (unsigned long long)r->bytes_inflight);
    if (recv != r->bytes_delivered) sim_violation(s, "bytes received by the nodes (%llu) differ from bytes delivered (%llu)",
                                                (unsigned long long)recv, (unsigned long long)r->bytes_delivered);
    r->sim_s = s->now;
    r->wall_s = sim_wall() - s->wall0;
    r->cpu_s = metrics_cpu_process() - s->cpu0;
    r->trace = s->trace;
    r->nodes_total = s->nnodes;
    if (r->learn_n) r->learn_all_s /= r->learn_n;
}

void sim_progressed(sim_t *s)
{
    s->last_progress = s->now;
}

/* Whether every stage has a live node serving it now, none paused and no
 * partition in force (the conditions liveness is owed under). */
static int s_all_served(const sim_t *s)
{
    unsigned char served[MODEL_STAGES_MAX] = {0};
    int K = s->so.o.stages, have = 0;
    if (s->part_active) return 0;
    for (int i = 0; i < s->nnodes; i++) {
        const snode_t *n = s->node[i];
        if (n->alive && n->paused_until > s->now) return 0;
        if (!n->alive || !n->comp || n->finished || !n->net) continue;
        int st = netside_stage(n->net);
        if (st >= 0 && st < K && !served[st]) { served[st] = 1; have++; }
    }
    return have == K;
}

void sim_check_live(sim_t *s)
{
    if (isfinite(s->done_at)) return;
    if (!s_all_served(s)) { s->live_since = s->now; return; }
    double since = fmax(s->live_since, s->last_progress);
    if (s->now - since > LIVE_BOUND_S)
        sim_violation(s, "no progress for %.0f s (since %.1f s) while every stage had a live node", s->now - since, since);
}
