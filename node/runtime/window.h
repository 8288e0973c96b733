/* window.h: the data stage's congestion window in microbatches, sized from
 * the queueing a microbatch meets along the pipeline (Vegas-style).
 *
 * A microbatch's turnaround (issue to gradient back at stage 0) is the
 * propagation and serialization of its tensors over every link, the
 * stages' compute, and the time it waits behind others at the slowest
 * resource.  The smallest turnaround seen lately (`base`) is the path
 * without queueing; with n microbatches in flight and turnaround t, about
 * n x (1 - base / t) of them are waiting in some queue (a socket buffer, a
 * shaped uplink, a busy stage).  Judged once per round trip on the round's
 * smallest turnaround (a burst's later microbatches wait behind its first
 * by design), the window grows by one while fewer than WINDOW_QUEUE_LO wait
 * and shrinks by the excess (at least one) while more than WINDOW_QUEUE_HI do, so the
 * slowest link or stage always has work and its queue stays under about one
 * microbatch: more in flight would only lengthen every round trip (and
 * every ping behind it).  Below what the caller reckons the path holds
 * (window_set_path: the round trip over the busiest stage's compute per
 * microbatch) it judges on the smallest turnaround of the last WINDOW_ROUNDS rounds
 * instead: a CPU shared with other work now and then holds up every return
 * for a while, and a queue the window made would outlast that.  Once a
 * period (when its minimum drifted) the window drops to its floor until a
 * microbatch issued then comes back, so that the minimum is measured again
 * without the window's own queue.
 *
 * Pure state: the caller gives the clock.  Not thread-safe (one owner: the
 * compute thread of the data stage). */
#ifndef BRIGADE_WINDOW_H
#define BRIGADE_WINDOW_H

#define WINDOW_QUEUE_LO 0.3   /* microbatches waiting below which the window grows */
#define WINDOW_QUEUE_HI 1.0   /* above which it shrinks */
#define WINDOW_ROUNDS 3       /* below the path: rounds whose smallest turnaround a decision takes */
#define WINDOW_SAME 1.1       /* a period's minimum within 10% of the last probe's needs no new probe */

typedef struct {
    double cwnd;            /* the window, fractional between steps */
    double lo, hi;          /* its bounds */
    double min_now, min_prev; /* smallest turnarounds in this period and the one before (0: none) */
    double period_end;      /* when this period ends (0: not started) */
    double probe_start;     /* since when the window is held at its floor to measure the path (0: it is not) */
    double saved;           /* the window to return to after the probe */
    double clean;           /* the turnaround the last probe measured (at first: the first period's minimum) */
    double queued;          /* the last round's estimate of microbatches waiting */
    double round_end;       /* when the current round ends (about one unloaded round trip) */
    double round_min;       /* its smallest turnaround (0: none yet) */
    double past_min[WINDOW_ROUNDS - 1]; /* the smallest turnarounds of the rounds before it (0: none) */
    int path;               /* microbatches the path holds without queueing, as the caller reckons (0: unknown) */
    int round_n;            /* the most in flight at its gradients */
    int round_limited;      /* the window held issuing back at one of them */
} window_t;

/* Starts the window at `start`, within [lo, hi] (lo >= 1). */
void window_init(window_t *w, int start, int lo, int hi);

/* One microbatch's gradient came back `turn_s` seconds after it was
 * issued, at time `now_s`, while `inflight` microbatches (itself
 * included) were in flight.  `limited` says whether the window was what
 * held issuing back (else the window does not grow: a window that is not
 * used says nothing about the path). */
void window_on_turn(window_t *w, double now_s, double turn_s, int inflight, int limited);

/* The microbatches the path holds in flight without queueing, as the
 * caller reckons it (0: unknown); see the top of this file. */
void window_set_path(window_t *w, int path);

/* The smallest recent turnaround in seconds (0: none measured yet). */
double window_base(const window_t *w);

/* The window: microbatches that may be in flight. */
int window_limit(const window_t *w);
#endif
