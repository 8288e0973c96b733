/* test_window.c: the data stage's congestion window (node/runtime/window.h)
 * against a closed-loop model of a pipeline: microbatches cross a
 * propagation delay, wait in one FIFO bottleneck (a shaped uplink or a busy
 * stage) and come back; the window should settle where the bottleneck is
 * always busy and at most about one microbatch waits in front of it. */
#include "tests/check.h"
#include "node/engine/rng.h"
#include "node/runtime/window.h"

#define RING 256

/* The window outside the probes at its floor (what it returns to). */
static int s_level(const window_t *w)
{
    return w->probe_start > 0 ? (int)w->saved : window_limit(w);
}

/* The model: bottleneck service time `serve` s, propagation `prop` s there
 * and back (half each way); issuing at the window whenever it allows. */
typedef struct {
    double serve, prop;
    double jitter;                     /* the returns of each interval of prop / 2 are held up to this much more */
    double issued[RING], back[RING];   /* in flight, in issue order (FIFO keeps it) */
    int head, n;
    double now, free_at;               /* the clock; when the bottleneck is free */
    double turn_sum, busy;             /* turnarounds summed; the bottleneck's busy time */
    int turns;
} model_t;

static void s_issue(model_t *m)
{
    double arrive = m->now + m->prop / 2, start = arrive > m->free_at ? arrive : m->free_at;
    m->free_at = start + m->serve;
    m->busy += m->serve;
    int i = (m->head + m->n++) % RING;
    m->issued[i] = m->now;
    m->back[i] = m->free_at + m->prop / 2;
    if (m->jitter > 0) {   /* a level per interval (a busy CPU stalls every return for a while), from a hash */
        uint64_t x = rng_mix((uint64_t)(m->back[i] / (m->prop / 2)));
        m->back[i] += m->jitter * (double)(x >> 11) / 9007199254740992.0;
    }
}

/* Runs the loop until time `until`; counts turnarounds and busy time from `from` on. */
static void s_run(model_t *m, window_t *w, double from, double until)
{
    while (m->now < until) {
        while (m->n < window_limit(w) && m->n < RING) s_issue(m);
        int i = m->head;
        if (m->back[i] > m->now) m->now = m->back[i];   /* FIFO: a return held up holds up those behind it */
        double turn = m->now - m->issued[i];
        window_on_turn(w, m->now, turn, m->n, m->n >= window_limit(w));
        m->head = (m->head + 1) % RING;
        m->n--;
        if (m->now >= from) { m->turn_sum += turn; m->turns++; }
    }
}

static void s_model(model_t *m, double serve, double prop)
{
    *m = (model_t){ .serve = serve, .prop = prop };
}

/* From the floor, the window grows to the path's bandwidth-delay product
 * plus up to a microbatch, keeps the bottleneck busy, and the round trip
 * stays within two services of the unloaded one; `path` is what the caller
 * reckons the path holds (window_set_path). */
static void s_settles(int path)
{
    model_t m;
    s_model(&m, 1.0, 5.0);   /* unloaded round trip 6: six microbatches fill the path */
    window_t w;
    window_init(&w, 4, 4, 64);
    window_set_path(&w, path);
    s_run(&m, &w, 0, 2000);
    int lim = s_level(&w);
    CHECKF(lim >= 7 && lim <= 9, "path %d: window %d, want 6 + up to 1 waiting", path, lim);
    CHECK_NEAR(window_base(&w), 6.0, 1e-9);
    m.turn_sum = 0; m.turns = 0;
    double t0 = m.now, busy0 = m.busy;
    s_run(&m, &w, t0, t0 + 1000);
    double mean = m.turn_sum / m.turns;
    CHECKF(mean <= 6.0 + 2.0 * 1.0 + 1e-9, "path %d: mean round trip %g, unloaded 6", path, mean);
    CHECKF((m.busy - busy0) / (m.now - t0) > 0.95, "bottleneck busy %g of the time", (m.busy - busy0) / (m.now - t0));
}

static void test_settles_at_the_bottleneck(void)
{
    s_settles(0);    /* unknown */
    s_settles(12);   /* reckoned above the link's 6, as a node on a link-bound path does */
}

/* Returns that a busy CPU holds up for a while (the same delay for all that
 * come back in that interval) are not a queue the window made: below what
 * the caller reckons the path holds, the smallest turnaround of a few
 * rounds sees past them, so the window still grows to keep the bottleneck
 * busy. */
static void test_grows_through_jitter(void)
{
    model_t m;
    s_model(&m, 1.0, 5.0);
    m.jitter = 3.0;   /* three services: one round's smallest return may meet it all */
    window_t w;
    window_init(&w, 4, 4, 64);
    window_set_path(&w, 12);   /* as a node reckons it: round trip over compute, more than the link's 6 */
    s_run(&m, &w, 0, 2000);
    m.turn_sum = 0; m.turns = 0;
    double t0 = m.now, busy0 = m.busy;
    s_run(&m, &w, t0, t0 + 1000);
    double busy = (m.busy - busy0) / (m.now - t0);
    CHECKF(busy > 0.8, "bottleneck busy %g of the time (window %d)", busy, s_level(&w));
    double mean = m.turn_sum / m.turns;
    CHECKF(mean <= 6.0 + 2.0 * 1.0 + 1.5, "mean round trip %g, unloaded 6 + 1.5 of jitter", mean);
}

/* Started far too wide (the old fixed 2K on a slow link), it comes down. */
static void test_shrinks_a_standing_queue(void)
{
    model_t m;
    s_model(&m, 1.0, 1.0);   /* unloaded round trip 2 */
    window_t w;
    window_init(&w, 32, 1, 64);
    s_run(&m, &w, 0, 3000);
    int lim = s_level(&w);
    CHECKF(lim >= 2 && lim <= 5, "window %d, want 2 + up to 1 waiting", lim);
    CHECKF(w.queued <= WINDOW_QUEUE_HI + 1, "queued %g", w.queued);
}

/* A window that is not what holds issuing back does not grow. */
static void test_unused_window_does_not_grow(void)
{
    window_t w;
    window_init(&w, 5, 2, 40);
    for (int i = 0; i < 1000; i++) window_on_turn(&w, i, 1.0, 2, 0);
    CHECK(window_limit(&w) == 5);
    for (int i = 1000; i < 2000; i++) window_on_turn(&w, i, 1.0, 5, 1);
    CHECK(window_limit(&w) > 5);
}

/* Bounds hold; nonsense turnarounds are ignored. */
static void test_bounds_and_bad_input(void)
{
    window_t w;
    window_init(&w, 100, 3, 9);
    CHECK(window_limit(&w) == 9);
    window_init(&w, 0, 0, 0);
    CHECK(window_limit(&w) == 1);
    window_init(&w, 6, 3, 9);
    window_on_turn(&w, 0, 1.0, 1, 1);
    for (int i = 1; i < 20; i++) window_on_turn(&w, i, 50.0, 9, 1);   /* a long queue, within one period */
    CHECK(window_limit(&w) == 3);
    for (int i = 20; i < 5000; i++) window_on_turn(&w, i, 1.0, 9, 1);
    CHECK(s_level(&w) == 9);
    int lim = window_limit(&w);
    double base = window_base(&w);
    window_on_turn(&w, 6000, 0.0, 4, 1);
    window_on_turn(&w, 6001, -1.0, 4, 1);
    window_on_turn(&w, 6002, 0.0 / 0.0, 4, 1);
    window_on_turn(&w, 6003, 0.5, 0, 1);
    CHECK(window_base(&w) == base && window_limit(&w) == lim);
}

/* A path that gets slower (another peer) is learnt within two periods of
 * the minimum: the window grows to the new bandwidth-delay product. */
static void test_forgets_a_faster_path(void)
{
    model_t m;
    s_model(&m, 1.0, 1.0);
    window_t w;
    window_init(&w, 4, 1, 64);
    s_run(&m, &w, 0, 500);
    CHECK_NEAR(window_base(&w), 2.0, 1e-9);
    int before = s_level(&w);
    m.prop = 9.0;   /* unloaded round trip now 10 */
    s_run(&m, &w, 0, m.now + 3000);
    /* within the 10% a period's minimum may stay above the last probe's without a new probe */
    CHECKF(window_base(&w) >= 10.0 && window_base(&w) <= 10.0 * WINDOW_SAME, "base %g", window_base(&w));
    CHECKF(s_level(&w) >= 10 && s_level(&w) > before, "window %d (was %d)", s_level(&w), before);
}

/* Turnarounds of `turn` s every 0.1 s from t0 to t1, the window full; 1
 * when a probe at the floor started meanwhile. */
static int s_feed(window_t *w, double t0, double t1, double turn)
{
    int probed = 0;
    for (double t = t0; t < t1; t += 0.1) {
        window_on_turn(w, t, turn, 8, 1);
        probed |= w->probe_start > 0;
    }
    return probed;
}

/* A path that got faster is the one a later standing queue is judged
 * against: the queue (turnarounds 0.9 s on a 0.5 s path) starts a probe as
 * it does on a path 0.5 s from the start (the last probe's 1.0 s stayed the
 * reference, and the queue passed for the path). */
static void test_learns_a_faster_path(void)
{
    window_t a, b;
    window_init(&a, 8, 1, 64);
    window_init(&b, 8, 1, 64);
    s_feed(&a, 0, 40, 1.0);
    s_feed(&a, 40, 100, 0.5);
    s_feed(&b, 0, 100, 0.5);
    int pa = s_feed(&a, 100, 200, 0.9), pb = s_feed(&b, 100, 200, 0.9);
    CHECKF(pb, "a queue on a path 0.5 s from the start: no probe");
    CHECKF(pa, "a queue on a path that got faster (1.0 s, then 0.5 s): no probe, base %g", window_base(&a));
}

int main(void)
{
    RUN(test_settles_at_the_bottleneck);
    RUN(test_grows_through_jitter);
    RUN(test_shrinks_a_standing_queue);
    RUN(test_unused_window_does_not_grow);
    RUN(test_bounds_and_bad_input);
    RUN(test_forgets_a_faster_path);
    RUN(test_learns_a_faster_path);
    CHECK_EXIT();
}
