/* balance.c: rebalancing across the stages (balance.h).  Every few
 * seconds a node of a stage served by several peers considers a move: to a
 * stage with no live peer, or to even out the stages' capacities (their
 * summed rates, compute_rate). */
#include "node/runtime/compute/internal.h"

#define MOVE_FIRST_S 10.0     /* no move before a node has run this long, */
#define MOVE_BALANCE_S 20.0   /* nor a move for capacity (not to fill an empty stage) before this: rates settle first */
#define MOVE_COOLDOWN_S 60.0  /* nor sooner than this after its last move */
#define MOVE_GAIN 1.02        /* a move for capacity leaves its stage at least this much above the one it goes to */

/* Each stage's capacity in microbatches per second (the measured rates of
 * its live peers, this node's own included; a peer whose rate is not known
 * yet, new or just moved, counts as its stage's mean known one) and its
 * peers, into cap[] and count[]; *above: peers of this node's stage with a
 * higher id.  0, or -1 when a stage has no known rate (or this node none). */
static int s_stage_caps(const compute_t *c, double mine, double *cap, int *count, int *above)
{
    int K = c->nstages, known[MODEL_STAGES_MAX] = {0};
    const peer_view_t *v = c->seen.view;
    memset(cap, 0, sizeof(double) * (size_t)K);
    memset(count, 0, sizeof(int) * (size_t)K);
    count[c->stage] = known[c->stage] = 1;
    cap[c->stage] = mine;
    *above = 0;
    for (int i = 0; v && i < v->n; i++) {
        const view_peer_t *p = &v->p[i];
        int s = p->stage;
        if (p->health == PEER_GONE || s < 0 || s >= K) continue;
        count[s]++;
        cap[s] += p->rate > 0 ? p->rate : 0;
        known[s] += p->rate > 0;
        if (s == c->stage && p->id > c->cfg.id) (*above)++;
    }
    for (int s = 0; s < K; s++) {
        if (count[s] && !known[s]) return -1;
        if (known[s]) cap[s] *= (double)count[s] / known[s];
    }
    return mine > 0 ? 0 : -1;
}

/* The stage a node of this one (rate `mine`) moves to for capacity, -1
 * none.  From a stage above the mean capacity: drawn by its id among the
 * stages below the mean, in proportion to how far below (the movers of a
 * stage spread over the short ones), as many of its nodes at once as its
 * surplus holds (at least one; the highest ids first, `above` being the
 * peers of its stage with higher ids), never all of them.  From another stage: its highest-id
 * node to the stage of the least capacity.  Either only when the stage it
 * leaves keeps MOVE_GAIN x what the other had (the slower of the two gets
 * faster, and no move undoes another).  Only the stage of the most
 * capacity among those served by several gives nodes in a round. */
static int s_balance_target(const compute_t *c, const double *cap, const int *count, double mine, int above)
{
    int K = c->nstages, from = c->stage, least = 0, giver = from;
    double mean = 0, short_sum = 0;
    for (int s = 0; s < K; s++) {
        mean += cap[s] / K;
        if (cap[s] < cap[least]) least = s;
        if (count[s] >= 2 && cap[s] > cap[giver]) giver = s;
    }
    if (giver != from) return -1;   /* one stage gives at a time, the one of the most capacity: the others'
                                       movers would all go to the same short stage at once */
    if (above + 1 >= count[from]) return -1;   /* the movers of a round (this node and the peers above it)
                                                   leave the stage a node: two slow nodes left one empty */
    if (cap[from] <= mean) return above == 0 && least != from && cap[from] - mine >= MOVE_GAIN * cap[least] ? least : -1;
    if (above >= (int)fmax(1.0, floor((cap[from] - mean) / mine))) return -1;
    for (int s = 0; s < K; s++) short_sum += cap[s] < mean ? mean - cap[s] : 0;
    if (short_sum <= 0) return -1;
    uint64_t h = (c->cfg.id ^ c->seen.gen) * 0x9e3779b97f4a7c15ULL;
    double u = (double)((h ^ (h >> 29)) >> 11) * (1.0 / 9007199254740992.0) * short_sum;
    int b = -1;
    for (int s = 0; s < K && b < 0; s++) {
        double want = cap[s] < mean ? mean - cap[s] : 0;
        if (want > 0 && u < want) b = s;
        u -= want;
    }
    if (b < 0 || b == from) return -1;
    return cap[from] - mine >= MOVE_GAIN * cap[b] ? b : -1;
}

/* A move to `to`, at once, or for a data-stage node once the microbatches
 * it has in flight have come back (balance_drained): they are its own, and
 * no other node would re-issue them. */
static void s_move_or_drain(compute_t *c, int to, const char *why)
{
    if (c->stage != 0) { state_move(c, to, why); return; }
    c->balance.drain_to = to;
    snprintf(c->balance.drain_why, sizeof c->balance.drain_why, "%s", why);
}

/* A draining data-stage node moves once nothing of its own is in flight
 * (and not at all once the run is closing: it holds the data then). */
void balance_drained(compute_t *c)
{
    if (c->balance.drain_to < 0) return;
    if (c->closing.active || c->stage != 0) { c->balance.drain_to = -1; return; }
    if (c->work.inflight == 0 && c->issue.ncarried == 0) state_move(c, c->balance.drain_to, c->balance.drain_why);
}

/* A node about to move to the data stage: the data (real compute: opened
 * here unless held from an earlier tenure) and a shard of its own, the next
 * after the data-stage peers it knows (as a WELCOME assigns them).  0, or
 * -1 when the data cannot be opened (it stays where it is). */
int balance_take_data(compute_t *c)
{
    c->cfg.shard = 1 + view_stage_live(c, 0);
    if (c->cfg.modelled || c->issue.data) return 0;
    char err[300];
    c->issue.data = data_open(c->o->data, model_data_kind(&c->o->cfg), c->o->cfg.maxT, c->o->seed, err, sizeof err);
    if (c->issue.data && model_check_data(&c->o->cfg, c->issue.data, c->o->data, err, sizeof err) < 0) data_close(&c->issue.data);
    if (!c->issue.data) {
        char line[400];
        snprintf(line, sizeof line, "cannot move to the data stage: %s", err);
        compute_say(c, line);
        return -1;
    }
    return 0;
}

/* Rebalancing (every few seconds): a node of a stage served by several
 * peers moves to a stage with none (the highest-id peer of its stage, not
 * at the data stage, whose microbatches wait for that stage), or
 * evens out the stages' capacities (s_balance_target), once every stage's
 * rate is known and MOVE_BALANCE_S into its run, at most once per
 * MOVE_COOLDOWN_S.  A data-stage node drains first (balance_drained); a
 * node that moves to the data stage becomes a data-stage node. */
void balance_consider_move(compute_t *c)
{
    double now = compute_now(c);
    if (c->nstages < 2 || c->balance.drain_to >= 0 || now - c->t0 < MOVE_FIRST_S || now - c->state.last_move < MOVE_COOLDOWN_S) return;
    int count[MODEL_STAGES_MAX], above;
    double cap[MODEL_STAGES_MAX], mine = compute_rate(c);
    int known = s_stage_caps(c, mine, cap, count, &above) == 0;
    if (count[c->stage] < 2) return;
    for (int s = 0; s < c->nstages && c->stage != 0; s++)   /* a data-stage node would drain for good: its
                                                               microbatches wait for the empty stage */
        if (count[s] == 0 && above == 0) { state_move(c, s, "stage without peers"); return; }
    if (!known || now - c->t0 < MOVE_BALANCE_S || c->closing.active) return;
    int b = s_balance_target(c, cap, count, mine, above);
    if (b < 0) return;
    char why[128];
    snprintf(why, sizeof why, "stage %d has less capacity (%.1f vs %.1f microbatches/s here)", b, cap[b], cap[c->stage]);
    s_move_or_drain(c, b, why);
}
