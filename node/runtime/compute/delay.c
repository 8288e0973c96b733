/* delay.c: weight delay at the compute side (delay.h): the delay
 * budget, the weights each version's forwards use, and the data stage's
 * window that the round trip asks for and the budget holds. */
#include "node/runtime/compute/internal.h"
#include "node/engine/staleness.h"

/* The delay budget in updates at this (data) stage: --max-delay, and when
 * it was not given, one more when --split auto chose the late split: stage
 * 0 then holds the embedding alone, and the blocks, a stage later each, see
 * about the delays the default budget gives them under the even split
 * (README, "Where the blocks sit"). */
int delay_max_delay(const compute_t *c)
{
    return c->o->max_delay + (c->o->split == SPLIT_AUTO && c->plan.split == SPLIT_LATE && !c->o->max_delay_given);
}

/* The weight delay budget of the current version in microbatches beyond
 * --micro (stale_budget_micro): --max-delay x micro, let in as the learning
 * rate decays with --staleness ramp; 0 under gpipe. */
static int s_budget_micro(const compute_t *c)
{
    if (c->o->schedule == SCHED_GPIPE) return 0;
    return stale_budget_micro(&c->o->optim, c->o->staleness, (int)c->version, delay_max_delay(c), c->o->micro);
}

/* The delay budget lets the data stage start another microbatch: FIFO
 * completion puts its backward after bwd_count + inflight others of this
 * update (delay_micro_needed). */
int delay_budget_room(const compute_t *c)
{
    return c->upd.bwd_count + c->work.inflight < c->o->micro + s_budget_micro(c);
}

/* The window, not the delay budget, is what holds the data stage back
 * from issuing more. */
int delay_window_held(const compute_t *c)
{
    return c->work.inflight >= c->issue.max_inflight && delay_budget_room(c);
}

/* The most microbatches the automatic window lets the data stage keep in
 * flight: 8 x stages microbatches of 8 sequences or more, of smaller ones
 * 8 x stages x (8 / sequences, rounded down), at most 64 x stages sequences
 * (each holds activations at every stage, so the cap is one of memory),
 * within the activation slots. */
static int s_window_cap(const compute_t *c)
{
    int cap = 8 * c->nstages * (c->shape.B < 8 ? 8 / c->shape.B : 1);
    return cap > POOL_MAX ? POOL_MAX : cap;
}

/* The congestion window from scratch (a new stage, a new path): 2 x
 * stages, within [stages, s_window_cap] as the round trip's need is. */
void delay_window_reset(compute_t *c)
{
    window_init(&c->issue.win, 2 * c->nstages, c->nstages, s_window_cap(c));
}

/* The same budget in updates: the most a backward may now be late. */
int delay_budget(const compute_t *c)
{
    return stale_budget_updates(s_budget_micro(c), c->o->micro);
}

/* The delay this stage runs with now: the measured one rounded up, so that
 * a stage some of whose microbatches are late predicts for them (as solo
 * --delay does), within the budget. */
int delay_now(const compute_t *c)
{
    int d = c->delay.ewma > 0.05 ? (int)ceil(c->delay.ewma - 0.05) : 0, b = delay_budget(c);
    return d < b ? d : b;
}

/* The weights the live version's forwards (and so their backwards) use. */
const float *delay_version_weights(const compute_t *c)
{
    return c->delay.fwd_for == c->version ? c->delay.fwd_w : compute_params(c);
}

/* At the first forward of a version: chooses its weights, the live ones or
 * (--staleness predict) those predicted delay_now() updates ahead. */
void delay_choose_weights(compute_t *c)
{
    if (c->delay.fwd_chosen == c->version) return;
    c->delay.fwd_chosen = c->version;
    c->delay.fwd_for = -1;
    int d = delay_now(c);
    if (!c->st || !(c->o->staleness & STALE_PREDICT) || d <= 0 || c->version == 0) return;
    if (!c->delay.fwd_w && !(c->delay.fwd_w = malloc(sizeof(float) * c->lay.nparams))) return;   /* no memory: live weights */
    stale_forward_weights(c->delay.fwd_w, &c->st->s, &c->o->optim, c->o->staleness, c->st->params, c->st->m, c->st->v,
                          (int)c->version, d);
    c->delay.fwd_for = c->version;
}

/* Microbatches the full delay budget lets the data stage keep in flight:
 * (--max-delay + 1) x --micro (delay_micro_needed). */
int delay_budget_holds(const compute_t *c)
{
    return (delay_max_delay(c) + 1) * c->o->micro;
}

/* The micro an update would need for the window the round trip asks for
 * (window_need) to fit the delay budget: microbatch j's backward at the
 * data stage follows the backwards of the ones in flight before it, so it
 * is at most D updates late while bwd_count + inflight < (D + 1) x micro.
 * 0 when the current micro is enough (or this is not the data stage). */
int delay_micro_needed(const compute_t *c)
{
    int D = delay_max_delay(c);
    if (c->stage != 0 || c->o->schedule == SCHED_GPIPE || c->issue.window_need <= delay_budget_holds(c)) return 0;
    return (c->issue.window_need + D) / (D + 1);
}

/* A backward of a microbatch whose forward ran at version v starts now. */
void delay_note(compute_t *c, int64_t v)
{
    int d = (int)(c->version - v);
    c->delay.ewma = c->delay.ewma < 0 ? d : 0.9 * c->delay.ewma + 0.1 * d;
    if (d > c->delay.max) c->delay.max = d;
    c->delay.sum += d;
    c->delay.n++;
    if (!stash_holds(&c->delay.stash, v, c->version)) c->delay.stash_mismatch++;
}

/* The microbatches in flight that keep K stages busy: one per stage plus
 * enough to cover the pipeline's propagation round trip (rtt_ms per link)
 * with compute (Little's law: latency / per_mb, the seconds per microbatch
 * of the busiest stage).  0 when either is unknown. */
int delay_inflight_need(int K, double rtt_ms, double per_mb)
{
    if (rtt_ms <= 0 || per_mb <= 0) return 0;
    /* forward and backward cross K-1 links each way: (K-1) round trips */
    return K + (int)ceil((K - 1) * rtt_ms * 1e-3 / per_mb);
}

/* delay_inflight_need from what this data stage measured: the minimum round
 * trip, not the smoothed one (queueing the window itself causes must not
 * grow the window), and its compute per microbatch reckoned to the busiest
 * stage by parameters.  0 until both are measured. */
int delay_window_need(compute_t *c)
{
    double mean, rtt;
    view_rtt(c, &mean, &rtt);
    double per_mb = c->count.fwd_done ? c->issue.busiest * c->count.busy_s / (double)c->count.fwd_done : 0;  /* the busiest stage's */
    return delay_inflight_need(c->nstages, rtt, per_mb);
}

/* Whether other data-stage nodes share the later stages' peers with this
 * one.  Its window is then the cap, not what the congestion window (one
 * queue along the path) or the round trip's need would give: the queues
 * its microbatches meet are the other data stages' work as much as its
 * own, so they say little about what its own window adds, and a later
 * peer idles whenever the data stages it serves hold back at once
 * (`brigade sim`, 100 nodes, 8 stages, gpt-small, 600 s, seeds 1-3: 77.9,
 * 78.5, 77.4% of the compute bound in steady state with a congestion window
 * kept to three microbatches waiting per later stage and at least 4 per
 * stage in flight; 80.8, 77.2, 77.9% at the cap, and 82.3, 79.6, 81.1%
 * with ACT_FLAG_LAST too; tests/bench/results/84-scale8.md). */
static int s_shared(const compute_t *c)
{
    return view_stage_live(c, 0) > 0;
}

/* The data stage's window when --max-inflight is not given: what the round
 * trip needs, at least 2 per stage and at most s_window_cap (the cap when
 * shared); the delay budget narrows it further at admission
 * (schedule_may_issue).  Says when the budget cannot hold the window at
 * this micro: once, and again when the micro needed moves by a quarter. */
void delay_auto_window(compute_t *c)
{
    int K = c->nstages, w = delay_window_need(c), cap = s_window_cap(c);
    window_set_path(&c->issue.win, w);
    if (w == 0) w = 2 * K;   /* not measured yet */
    c->issue.window_need = w;
    if (w < 2 * K) w = 2 * K;
    if (w > cap || s_shared(c)) w = cap;
    int q = s_shared(c) ? cap : window_limit(&c->issue.win);   /* alone: no more than the queues along the pipeline allow */
    c->issue.max_inflight = q < w ? q : w;
    int need = delay_micro_needed(c), said = c->issue.micro_said;
    int settled = c->count.fwd_done >= (uint64_t)(8 * K);   /* round trips and compute times measured a while */
    if (settled && need && (!said || 4 * abs(need - said) >= said + 4)) {   /* news: the first, or a change of a quarter */
        char line[384];
        snprintf(line, sizeof line, "the round trip asks for %d microbatches in flight; a delay budget of %d update%s "
                 "holds %d at --micro %d: --micro %d would keep every stage busy%s", c->issue.window_need, delay_max_delay(c),
                 delay_max_delay(c) == 1 ? "" : "s", delay_budget_holds(c), c->o->micro, need,
                 c->o->split == SPLIT_EVEN && plan_late_split_helps(c, c->issue.window_need, delay_budget_holds(c)) ? "; on links this slow a run created with --split late trains faster and "
                                         "better per update" : "");
        metrics_event(c->cfg.metrics, "warning", "\"what\":\"window\",\"micro_needed\":%d,\"why\":%s", need, line);
        compute_say(c, line);
        c->issue.micro_said = need;
    }
}
