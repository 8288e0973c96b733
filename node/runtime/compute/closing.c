/* closing.c: the end of a run at the compute side (closing.h): when the
 * run is complete, the final evaluation sent, passed on and awaited, and a
 * data stage that trains on when the swarm's count stays short. */
#include "node/runtime/compute/internal.h"
#include "node/runtime/invariant.h"

#define FINAL_EVAL_S 60.0     /* the last stage of a complete run waits this long at most for the final evaluation */
#define FINAL_GAP_S 10.0      /* and gives up on the rest of it when none of its batches has come for this long */
#define REOPEN_S 30.0         /* a data stage whose final evaluation went out at --steps while the swarm's count of
                                 completed microbatches stays short trains on after this long (the count comes by
                                 gossip, straight from last-stage nodes: in a large swarm seconds apart) */
#define CLOSED_HOLD_S (REOPEN_S / 2)   /* a stage the final evaluation passed takes no training for this long:
                                         the data stage trains on (s_train_on) only REOPEN_S after it sent it */
#define FINAL_LAG_S 5.0       /* a data stage behind a complete count sends its final evaluation this long (or two of
                                 its round trips) after it saw the count complete: the gradients of the last
                                 microbatches, which the gossip overtakes, bring its version to --steps first */

/* The run's progress: last-stage microbatches of every peer, and ours. */
static uint64_t s_progress(const compute_t *c)
{
    return (c->seen.view ? c->seen.view->completed : 0) + c->count.completed;
}

/* The run is complete by the swarm's count of last-stage microbatches. */
int closing_run_complete(const compute_t *c)
{
    return s_progress(c) >= (uint64_t)c->o->steps * (uint64_t)c->o->micro;
}

/* The run completed here: this node is done (rounds still summed reported). */
void closing_finish(compute_t *c)
{
    eval_flush(c, INFINITY);
    c->end.done = COMPUTE_ENDED;
    c->phase = PH_DONE;
}

/* The last stage of a complete run waits for the final evaluation (--eval-every;
 * none when the compute is modelled) while a data-stage node is live to send
 * it (each sends one; the first to come whole ends the run).  Every node of
 * the stage waits: the first to end tells the others (its DONE stops them),
 * and the one the batches go to (schedule_next_peer) ends when they are in. */
static int s_final_eval_coming(const compute_t *c)
{
    return c->nstages > 1 && c->o->eval_every > 0 && !c->cfg.modelled && view_stage_live(c, 0) > 0;
}

/* Sends the final evaluation now (out of memory: final_due, tried again on
 * each tick by closing_data_stage_end). */
static void s_send_final(compute_t *c, double now)
{
    c->closing.final_sent = now;
    c->closing.final_due = eval_issue(c, ACT_FLAG_FINAL) < 0;
}

/* The data stage's last evaluation, at the final version; it starts no
 * training microbatch after it (unless closing_data_stage_end reopens). */
void closing_issue_final(compute_t *c)
{
    if (c->closing.active) return;
    c->closing.active = 1;
    c->closing.final_short = !closing_run_complete(c);
    s_send_final(c, compute_now(c));
}

/* The microbatches the swarm still needs by its count (0 when complete). */
static uint64_t s_run_short(const compute_t *c)
{
    uint64_t want = (uint64_t)c->o->steps * (uint64_t)c->o->micro, have = s_progress(c);
    return have >= want ? 0 : want - have;
}

/* The most microbatches a live last-stage peer says the run still lacks by
 * its own count (0: none says it is short).  The data stage's count can run
 * ahead of the last stage's for good: the last stage's nodes restarted
 * without their counts (no checkpoint, and no node of the stage left to tell
 * them), and only the other stages' tables kept the earlier ones; such a
 * node may count 0, which is short too. */
static uint64_t s_last_stage_short(const compute_t *c)
{
    uint64_t want = (uint64_t)c->o->steps * (uint64_t)c->o->micro, most = 0;
    int n;
    const int *ix = view_stage_peers(c, c->nstages - 1, &n);
    for (int i = 0; i < n; i++) {
        const view_peer_t *p = &c->seen.view->p[ix[i]];
        if (p->health != PEER_GONE && p->progress_said && p->progress < want && want - p->progress > most)
            most = want - p->progress;
    }
    return most;
}

/* What a data stage that trains on (s_train_on) still waits for: the
 * swarm's count and every live last-stage node's. */
static uint64_t s_reopened_short(const compute_t *c)
{
    uint64_t a = s_run_short(c), b = s_last_stage_short(c);
    return a > b ? a : b;
}

/* The data stage stopped (its final evaluation went out, or its version
 * reached --steps) with `what` short: it trains on. */
static void s_train_on(compute_t *c, const char *what)
{
    c->closing.active = 0;
    c->closing.final_sent = 0;
    c->closing.final_due = 0;
    c->closing.reopened = 1;
    c->closing.count_done_t = 0;   /* complete again: the gradients of the last microbatches come before the evaluation */
    char line[200];
    snprintf(line, sizeof line, "%s %llu microbatches too few: training on", what, (unsigned long long)s_reopened_short(c));
    compute_say(c, line);
}

/* The end of a run without evaluations, at a data stage: once its version
 * reached --steps and the swarm's count is complete it issues nothing more,
 * and the last stage ends the run by its own count; when a live last-stage
 * node's count stays short REOPEN_S (s_last_stage_short), it trains on. */
static void s_data_stage_short(compute_t *c, double now)
{
    if (c->closing.reopened) return;
    if (c->version < c->o->steps || !closing_run_complete(c) || !s_last_stage_short(c)) {
        c->closing.last_short_t = 0;
        return;
    }
    if (c->closing.last_short_t == 0) c->closing.last_short_t = now;
    if (now - c->closing.last_short_t > REOPEN_S) s_train_on(c, "the last stage counts");
}

/* The end of a run with evaluations, at a data stage: the run is complete by
 * the swarm's count of microbatches the last stage completed, which this
 * stage's version can run ahead of (a last-stage node restarted without its
 * count) or fall behind (microbatches skipped or given up).  So the final
 * evaluation also goes out once the count is complete, and when it went out
 * at --steps while the count stays short, or a last-stage node's own count
 * does (s_last_stage_short), training goes on until neither is. */
void closing_data_stage_end(compute_t *c, double now)
{
    if (c->stage != 0 || c->nstages == 1) return;
    if (c->o->eval_every <= 0) { s_data_stage_short(c, now); return; }
    int complete = c->closing.reopened ? s_reopened_short(c) == 0 : closing_run_complete(c);
    if (complete && c->closing.count_done_t == 0) c->closing.count_done_t = now;
    double lag = 2 * c->issue.turn_mean > FINAL_LAG_S ? 2 * c->issue.turn_mean : FINAL_LAG_S;
    if (c->closing.final_due) s_send_final(c, now);
    if (!c->closing.active && complete && now - c->closing.count_done_t >= lag) {
        closing_issue_final(c);
    } else if (c->closing.active && c->closing.final_short && complete && now - c->closing.count_done_t >= lag) {
        /* sent with the count short: once more now that it is complete (a last stage whose count completed
         * REOPEN_S after that first one came waits for another, which this stage had not reopened to send) */
        c->closing.final_short = 0;
        s_send_final(c, now);
    } else if (c->closing.active && c->closing.final_sent > 0 && now - c->closing.final_sent > REOPEN_S && (!complete || s_last_stage_short(c))) {
        s_train_on(c, complete ? "the final evaluation went out, but the last stage counts"
                               : "the final evaluation went out, but the swarm has completed");
    }
}

/* A last-stage node of a complete run ends, or first waits for the final
 * evaluation (s_final_eval_coming; compute_tick ends the wait).  Checked
 * after each microbatch it completes and on each tick: the count that
 * completes the run may be another last-stage node's. */
void closing_last_stage_end(compute_t *c)
{
    if (!compute_last(c) || c->phase != PH_RUN || c->closing.final_wait_until > 0 || !closing_run_complete(c)) return;
    double now = compute_now(c);
    int had_final = c->closing.final_early_t > 0 && now - c->closing.final_early_t < REOPEN_S;
    if (s_final_eval_coming(c) && !had_final) {
        c->closing.active = 1;
        c->closing.final_wait_from = now;
        c->closing.final_wait_until = now + FINAL_EVAL_S;
        c->closing.final_receiver = view_stage_lowest(c);
    } else {
        closing_finish(c);
    }
}

/* The run's final evaluation is passing by this stage (not the data
 * stage) with the run complete by the count here: the training queued ahead
 * of it is not wanted any more (once the gossip says the run is complete: a
 * peer's flag alone must not stop this stage's training). */
void closing_final_passing(compute_t *c)
{
    if (c->closing.active) return;
    c->closing.active = 1;
    c->closing.passed_t = compute_now(c);
}

/* Closing here since the final evaluation passed: a training activation is
 * not wanted, unless it comes CLOSED_HOLD_S later, when it is one of a data
 * stage that trains on after its final evaluation (its count or a
 * last-stage node's short): this stage then trains again (it once dropped
 * every one for good, and the run waited for it to the end). */
int closing_closed_to_training(compute_t *c)
{
    if (!c->closing.active) return 0;
    if (c->closing.passed_t == 0 || c->closing.final_wait_until > 0 || compute_now(c) - c->closing.passed_t < CLOSED_HOLD_S) return 1;
    c->closing.active = 0;
    c->closing.passed_t = 0;
    compute_say(c, "training again after the final evaluation passed: the data stage trains on");
    return 0;
}

/* The last stage's wait for the final evaluation ends (the run with it)
 * at FINAL_EVAL_S, when no data-stage node is left, when the node its batches
 * go to has left, or FINAL_GAP_S after the last batch of the awaited round
 * came (the rest was lost: what came is reported, its count with it);
 * eval_batch ends it when the round is in. */
void closing_final_wait_end(compute_t *c, double now)
{
    if (c->phase != PH_RUN || c->closing.final_wait_until == 0) return;
    const evalsum_round_t *fin = evalsum_final(&c->evals);    /* some of a final evaluation's batches came, */
    int awaited = fin && fin->first_t >= c->closing.final_wait_from;  /* of the one awaited */
    const view_peer_t *rp = c->closing.final_receiver != c->cfg.id ? peer_view_find(c->seen.view, c->closing.final_receiver) : NULL;
    int receiver_gone = c->closing.final_receiver != c->cfg.id && (!rp || rp->health == PEER_GONE);
    if (!(now >= c->closing.final_wait_until || view_stage_live(c, 0) == 0 || receiver_gone || (awaited && now - fin->last_t > FINAL_GAP_S)))
        return;
    char line[128];
    if (fin) snprintf(line, sizeof line, "the run is complete; %d of its final evaluation's %d batches arrived", fin->n, fin->nval);
    else snprintf(line, sizeof line, "the run is complete; its final evaluation did not arrive%s",
                  receiver_gone ? " (the node it went to left)" : "");
    compute_say(c, line);
    closing_finish(c);   /* reports what came */
}

/* The data stage holds what the run still needs: before its version
 * reaches --steps, what its own updates up to there need (the microbatches
 * of its version, those accumulated since and those in flight: more ran
 * past the run's end, and past its final evaluation, which goes out at
 * --steps); after that, or once it trained on after its final evaluation,
 * what the swarm's count still lacks. */
int closing_steps_covered(const compute_t *c)
{
    if (c->closing.reopened) return (uint64_t)c->work.inflight >= s_reopened_short(c);
    if (c->version >= c->o->steps) return (uint64_t)c->work.inflight >= s_run_short(c);
    return c->version * c->o->micro + c->upd.bwd_count + c->work.inflight >= (int64_t)c->o->steps * c->o->micro;
}

/* The end of a run's invariants (on every tick): a last stage waits for the
 * final evaluation only while closing, and only a data stage trains on. */
void closing_check(const compute_t *c)
{
    INVARIANT(c->closing.final_wait_until == 0 || c->closing.active);
    INVARIANT(!c->closing.reopened || c->stage == 0);
}
