/* window.c: see window.h. */
#include "node/runtime/window.h"
#include "node/runtime/invariant.h"
#include <math.h>
#include <string.h>

/* How long one period of the minimum lasts: long enough to hold many round
 * trips.  At each period's end the window drops to its floor until a
 * microbatch issued after the drop comes back (the queue has drained in
 * front of it), unless the period's minimum came back near the last clean
 * one (the first period's, or the last probe's), so the new period's
 * minimum is measured without the window's own queue: a standing queue
 * would otherwise pass for the path and the window would creep up on it.
 * A path that got slower (a new peer) is learnt within two periods, one
 * that got faster at once. */
#define WINDOW_PERIOD_S 30.0
#define WINDOW_PERIOD_TURNS 20.0

static double s_clamp(double x, double lo, double hi)
{
    return x < lo ? lo : x > hi ? hi : x;
}

/* The end of a period starting at now_s on a path of round trip turn_s. */
static double s_period_end(double now_s, double turn_s)
{
    return now_s + fmax(WINDOW_PERIOD_S, WINDOW_PERIOD_TURNS * turn_s);
}

void window_init(window_t *w, int start, int lo, int hi)
{
    memset(w, 0, sizeof *w);
    w->lo = lo < 1 ? 1 : lo;
    w->hi = hi < w->lo ? w->lo : hi;
    w->cwnd = s_clamp(start, w->lo, w->hi);
}

void window_set_path(window_t *w, int path)
{
    w->path = path > 0 ? path : 0;
}

double window_base(const window_t *w)
{
    if (w->min_now <= 0) return w->min_prev;
    if (w->min_prev <= 0) return w->min_now;
    return fmin(w->min_now, w->min_prev);
}

/* Keeps the smallest turnaround of this period and the last one; starts
 * the probe at the floor when a period ends and ends it with the first
 * microbatch issued during it. */
static void s_note_min(window_t *w, double now_s, double turn_s)
{
    if (w->period_end == 0) w->period_end = s_period_end(now_s, turn_s);
    if (w->probe_start > 0 && now_s - turn_s >= w->probe_start) {
        w->cwnd = w->saved;
        w->probe_start = 0;
        w->clean = turn_s;
    }
    if (now_s >= w->period_end) {
        double base = window_base(w);
        /* a period whose minimum came back near the last clean one confirmed it: no probe */
        if (w->clean <= 0) w->clean = w->min_now;
        int confirmed = w->min_now <= WINDOW_SAME * w->clean;
        if (confirmed && w->min_now > 0 && w->min_now < w->clean) w->clean = w->min_now;   /* the path got faster */
        w->min_prev = w->min_now;
        w->min_now = 0;
        w->period_end = s_period_end(now_s, base);
        if (!confirmed && w->probe_start == 0 && w->cwnd > w->lo) {
            w->saved = w->cwnd;
            w->cwnd = w->lo;
            w->probe_start = now_s;
        }
    }
    if (w->min_now <= 0 || turn_s < w->min_now) w->min_now = turn_s;
}

/* Once a round (about one unloaded round trip) the window moves on the
 * round's smallest turnaround: a burst's later microbatches wait behind its
 * first by design, only a queue that even the round's best one met is
 * standing.  Below what the path holds, on the best of the last
 * WINDOW_ROUNDS rounds: a stall of the machine's CPU can hold up a whole
 * round's returns, a queue the window made would stand through them all.
 * Up by one, or down by the excess over WINDOW_QUEUE_HI (at least one). */
static void s_end_round(window_t *w, double now_s)
{
    double base = window_base(w), best = w->round_min;
    if (w->cwnd < w->path)
        for (int i = 0; i < WINDOW_ROUNDS - 1; i++)
            if (w->past_min[i] > 0 && w->past_min[i] < best) best = w->past_min[i];
    for (int i = WINDOW_ROUNDS - 2; i > 0; i--) w->past_min[i] = w->past_min[i - 1];
    w->past_min[0] = w->round_min;
    w->queued = w->round_n * (1.0 - base / best);
    if (w->probe_start == 0) {
        if (w->queued > WINDOW_QUEUE_HI) w->cwnd -= fmax(1.0, w->queued - WINDOW_QUEUE_HI);
        else if (w->queued < WINDOW_QUEUE_LO && w->round_limited) w->cwnd += 1.0;
        w->cwnd = s_clamp(w->cwnd, w->lo, w->hi);
    }
    w->round_end = now_s + base;
    w->round_min = 0;
    w->round_n = 0;
    w->round_limited = 0;
}

void window_on_turn(window_t *w, double now_s, double turn_s, int inflight, int limited)
{
    if (!(turn_s > 0) || !(now_s >= 0) || inflight < 1) return;
    s_note_min(w, now_s, turn_s);
    if (w->round_min <= 0 || turn_s < w->round_min) w->round_min = turn_s;
    if (inflight > w->round_n) w->round_n = inflight;
    w->round_limited |= limited;
    if (now_s >= w->round_end) s_end_round(w, now_s);
    INVARIANT(w->cwnd >= w->lo && w->cwnd <= w->hi);
}

int window_limit(const window_t *w)
{
    return (int)floor(w->cwnd + 1e-9);
}
