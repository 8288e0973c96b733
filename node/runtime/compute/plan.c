/* plan.c: the run's split at the compute side (plan.h): --split auto's
 * choice at the data stage before its first update, and its adoption by
 * every node. */
#include "node/runtime/compute/internal.h"

#define PLAN_PROBES 3         /* --split auto: forwards the choosing data stage times (the best counts) */
#define PLAN_WAIT_S 20.0      /* and how long it waits for a round trip to stage 1 before choosing without one */
#define PLAN_SEEK_S 30.0      /* a node that took a split of precedence: how long it looks for a peer of its stage
                                 that trained on it (peers out of reach until then come back in that time) */

/* Whether the late split can serve this run at all: a gpt of 3 or more
 * stages whose window adapts to the round trip (not gpipe, not a fixed
 * --max-inflight), and whose budget may grow by an update (not 2bw's). */
static int s_late_split_may_pay(const compute_t *c)
{
    return c->model.kind == MODEL_GPT && c->nstages >= 3 && c->issue.auto_window && c->o->stash != STASH_2BW;
}

#define FRONT_STATE_MAX ((double)(128u << 20))   /* bytes of stage 0's state (weights and moments) under the front
                                                   split past which --split auto does not choose it */

/* Whether the front split would serve this run better than the others: a
 * gpt whose stage 0 holds more blocks under it than under the even split,
 * an adaptive window (as the late split), a swarm of at least two nodes per
 * stage in this node's view (its own included), whose data stage gets
 * several nodes, and a stage-0 state (fp32 weights and two moments) within
 * FRONT_STATE_MAX: rebalancing fills stage 0 by moves, each a download of
 * that state.  Measured (`brigade sim`, 32 nodes, 4 stages, 20-50 ms links,
 * 100 Mbit/s, 600 s, steady share of the compute bound, front against
 * even): gpt-small (47 MB) 86.3% / 71.7% at --micro 8, 84.7% / 84.1% at
 * its default 16; gpt-base (340 MB, 4000 s) 32.6% / 76.7%, its nodes moving
 * 277 times against 42, a third of stage 0's time spent downloading.  A
 * single pipeline would run at the pace of its stage 0, the most loaded. */
static int s_front_split_pays(const compute_t *c)
{
    const model_config_t *m = &c->model;
    int K = c->nstages, even0 = m->L / K + (m->L % K > 0), live = 1;
    for (int s = 0; s < K; s++) live += view_stage_live(c, s);
    if (m->kind != MODEL_GPT || K < 2 || m->L - (K - 1) <= even0 || !c->issue.auto_window || live < 2 * K) return 0;
    model_config_t front = *m;
    front.split = SPLIT_FRONT;
    return 3.0 * sizeof(float) * (double)stage_num_params(&front, 0, K) <= FRONT_STATE_MAX;
}

/* Whether the late split would serve this run better than the even one: it
 * may pay, and the round trip asks for `need` microbatches in flight, at
 * least 1.75 times the `holds` the delay budget holds.
 * Measured (sim, gpt-tiny, 4 stages, micro 4): at 50 ms / 20 Mbit/s (27
 * asked, 12 held: 2.25 x) and 100 ms / 10 Mbit/s (49) the late split ran
 * 1-3% faster and ended 0.9-1.0% lower; at 25 ms / 50 Mbit/s (16: 1.33 x) it
 * ran 6% slower, and gpt-small at 50 ms / 20 Mbit/s, which asks for no more
 * than it holds, 9%: between 1.33 and 2.25 the gain crosses zero near 1.85
 * (linearly), and a choice near there costs little either way. */
int plan_late_split_helps(const compute_t *c, int need, int holds)
{
    return s_late_split_may_pay(c) && 4 * need >= 7 * holds;
}

/* This node's layout follows split `plan` from now on (chosen here, or
 * said by a peer's message or the network side) when it has none yet, or
 * when --split auto's `plan` takes precedence over the one it holds
 * (plan_outranks: two data-stage nodes chose apart, unheard of by each
 * other; a split given by --split is never left).  Laid out anew, the node
 * takes the stage's state from a peer of the split that has trained on it,
 * else that split's initial weights (state_take_split), until such a peer
 * shows up within PLAN_SEEK_S (plan_seek_state).  Otherwise nothing
 * changes: a node only ever goes up the precedence, so no two nodes trade
 * splits back and forth. */
void plan_adopt(compute_t *c, plan_t plan, const char *how)
{
    plan_t held = c->plan.split;
    if (!plan_outranks(plan, held) || c->phase == PH_DONE || (plan_chosen(held) && c->o->split != SPLIT_AUTO)) return;
    model_config_t model = c->model;
    model.split = (model_split_t)plan;
    if (stage_num_params(&model, c->stage, c->nstages) == 0) return;   /* not a layout of this run (a peer's word) */
    int relaid = plan != (int)c->model.split;
    if (relaid) {
        issued_t issued[REC_MAX];   /* a data stage's microbatches in flight: issued again in the new layout */
        int nissued = schedule_issued_save(c, issued);
        if (state_relayout(c, &model, c->stage) < 0) {
            if (c->phase != PH_DONE) compute_fail(c, "out of memory to lay out the run's split");
            return;
        }
        schedule_issued_restore(c, issued, nissued);
    }
    c->plan.split = plan;
    char why[300];
    snprintf(why, sizeof why, "%s", how);
    if (plan_chosen(held))
        snprintf(why, sizeof why, "%s: it takes precedence over the %s split this node held (chosen apart)", how,
                 split_name((model_split_t)held));
    metrics_event(c->cfg.metrics, "plan", "\"split\":%s,\"how\":%s", split_name((model_split_t)plan), why);
    if (plan_chosen(held)) {
        char line[360];
        snprintf(line, sizeof line, "--split auto: the %s split, %s", split_name((model_split_t)plan), why);
        compute_say(c, line);
    }
    compute_send_self(c, MAIL_SELF);   /* the network side sizes state transfers by it */
    if (!relaid) return;
    if (plan_chosen(held)) {
        compute_trace(c, TRACE_RELAYOUT, (uint64_t)c->stage, c->version);
        applied_clear(&c->work.applied);   /* what was applied in the other layout is not in this one */
    }
    if (!state_take_split(c) && plan_chosen(held)) c->plan.seek_until = compute_now(c) + PLAN_SEEK_S;
}

/* On each view, after plan_adopt laid this node out anew with its initial
 * weights, no peer of its stage then known to have trained on that split:
 * the stage's state from one that shows up (PLAN_SEEK_S at most). */
void plan_seek_state(compute_t *c)
{
    if (c->plan.seek_until == 0) return;
    if (c->phase == PH_DONE || compute_now(c) > c->plan.seek_until) c->plan.seek_until = 0;
    else if (c->phase == PH_RUN && !c->state.fetching && state_take_split(c)) c->plan.seek_until = 0;
}

/* A tensor says the run's split: taken when this node has none yet.  0
 * when it says another one than this node's (the tensor is dropped).  One
 * that takes precedence over this node's is taken from the view the
 * network side publishes next (it says the split heard, and which peers
 * hold it: the stage's state is taken from one of them). */
int plan_tensor_split_ok(compute_t *c, const mail_t *m)
{
    plan_t said = plan_of_flags(m->hdr.flags);
    if (!plan_chosen(c->plan.split)) plan_adopt(c, said, "said by a peer");
    return !plan_chosen(said) || said == c->plan.split;
}

/* A forward of a validation batch, timed and not sent: what the data
 * stage reckons the pipeline's compute per microbatch from before the
 * first update.  -1 when there is no memory for it. */
static int s_probe(compute_t *c)
{
    int slot = eval_slot(c);
    if (slot < 0) return -1;
    acts_t *a = c->work.pool[slot];
    if (a && c->issue.data) {
        data_val_batch(c->issue.data, &c->issue.batch, 0);
        schedule_load_batch(c, slot);
    }
    if (a) stage_forward(&c->lay, compute_params(c), a);
    c->upd.flops += schedule_fwd_flops(c);
    c->plan.probing = 1;
    c->plan.probes++;
    return 0;
}

/* The data stage's part of --split auto, until the split is chosen: once
 * every stage has a peer, the live data-stage node of the lowest id
 * chooses (the others wait to hear it; one that sees no lower one
 * chooses): late where the round trip asks for at least 1.75 times what the
 * delay budget holds (plan_late_split_helps, reckoned as delay_window_need does
 * from the smallest round trip to stage 1 and the best of PLAN_PROBES
 * timed forwards, a microbatch's compute taken as three forwards), else
 * even; even too when no round trip is measured PLAN_WAIT_S after it could
 * choose.  Returns 1 when it ran a forward. */
int plan_step(compute_t *c)
{
    if (!view_all_stages_served(c) || view_stage_lowest(c) != c->cfg.id) {
        c->plan.wait_from = 0;   /* not this node's choice now: its wait starts again when it is */
        return 0;
    }
    double now = compute_now(c), mean, rtt;
    if (c->plan.wait_from == 0) c->plan.wait_from = now;
    if (!s_late_split_may_pay(c)) { plan_adopt(c, SPLIT_EVEN, "chosen: the late split cannot pay"); return 0; }
    view_rtt(c, &mean, &rtt);
    if (rtt <= 0 && now - c->plan.wait_from < PLAN_WAIT_S) return 0;   /* the pings measure it soon */
    if (rtt > 0 && c->plan.probes < PLAN_PROBES) {
        if (s_probe(c) == 0) return 1;
        rtt = 0;   /* no memory to time a forward: even */
    }
    int holds = delay_budget_holds(c);   /* --max-delay's: no split chosen yet */
    int need = delay_inflight_need(c->nstages, rtt, 3.0 * c->plan.probe_best * c->issue.busiest);
    model_split_t split = s_front_split_pays(c) ? SPLIT_FRONT : plan_late_split_helps(c, need, holds) ? SPLIT_LATE : SPLIT_EVEN;
    char how[200], line[360];
    if (split == SPLIT_FRONT) {
        plan_adopt(c, split, "chosen: a swarm of two nodes or more per stage");
        snprintf(line, sizeof line, "--split auto: the front split (a swarm of two nodes or more per stage: the "
                 "data stage's many nodes hold all but one block per later stage)");
        compute_say(c, line);
        return 0;
    }
    snprintf(how, sizeof how, "chosen: the round trip asks for %d microbatches in flight, the delay budget holds %d", need, holds);
    plan_adopt(c, split, how);
    snprintf(line, sizeof line, "--split auto: the %s split (the round trip asks for %d microbatches in flight; a delay "
             "budget of %d update%s holds %d at --micro %d)%s", split_name(split), need, c->o->max_delay,
             c->o->max_delay == 1 ? "" : "s", holds, c->o->micro,
             delay_max_delay(c) > c->o->max_delay ? "; stage 0 holds no block now: its budget is one update more" : "");
    compute_say(c, line);
    return 0;
}

plan_t compute_plan(const opts_t *o, plan_t ck_split, plan_t net_plan)
{
    if (o->split != SPLIT_AUTO) return o->split;
    return plan_chosen(ck_split) ? ck_split : net_plan;
}
