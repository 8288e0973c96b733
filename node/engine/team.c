/* team.c: the threads of one engine call (team.h).
 *
 * One 64-bit word, claim, holds the loop's generation (high half) and the
 * next task (low half).  The caller publishes a loop by storing fn, ctx and
 * ntasks, then claim = (generation + 1) << 32; a worker takes a task by
 * compare-and-swap of claim to claim + 1, and only while the generation is
 * the one it is working on, so a helper that wakes late never takes a task
 * of a newer loop under an older one's ntasks.  The last task to finish
 * wakes the caller if it sleeps.  Sleeping and waking use a mutex and two
 * condition variables; the flags that say someone sleeps and the counters
 * they watch are sequentially consistent atomics, so a wake-up is never
 * missed (each side writes its own, then reads the other's).
 *
 * A loop of parts is published with S_PARTS as its next task: each worker
 * that sees it runs its own part once.  The next generation cannot start
 * before every worker has finished it, so fn and ctx stay the loop's while
 * any worker reads them.  The shares are the caller's: it changes them only
 * between loops (after seeing every worker's finish, before publishing the
 * next), and a worker reads them only inside a loop. */
#include "node/engine/team.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#define S_SPIN 2000   /* polls before sleeping (each with a pause: some microseconds) */
#define S_LEARN_S 0.004   /* a loop this long moves the shares half-way to its own */

typedef struct {
    team_t *team;
    int id;          /* worker index, 1.. */
} s_helper_t;

struct team {
    int n;                          /* workers, the caller included */
    int nhelpers;                   /* helper threads started */
    pthread_t th[TEAM_MAX];
    s_helper_t args[TEAM_MAX];
    _Atomic uint64_t claim;         /* generation << 32 | next task */
    _Atomic(team_fn) fn;            /* the loop of the current generation */
    _Atomic(void *) ctx;
    atomic_int ntasks;
    atomic_int done;                /* tasks of the current generation finished */
    atomic_int stop;                /* helpers must exit */
    atomic_int sleepers;            /* helpers waiting on cv_work */
    atomic_int caller_waits;        /* the caller waits on cv_done */
    double share[TEAM_MAX];         /* worker w's part of a loop of parts; they sum to 1 */
    double end[TEAM_MAX];           /* when worker w finished its part of the last one */
    pthread_mutex_t mu;
    pthread_cond_t cv_work, cv_done;
};

static inline void s_pause(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

#define S_CLOSED 0x7fffffffu   /* next-task value of a finished generation: above any task count */
#define S_PARTS 0x7ffffffeu    /* next-task value of a loop of parts */

static uint32_t s_gen(uint64_t claim) { return (uint32_t)(claim >> 32); }

static double s_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Counts one finished task of a loop of n; the last wakes the caller. */
static void s_finished(team_t *t, int n)
{
    if (atomic_fetch_add(&t->done, 1) + 1 == n && atomic_load(&t->caller_waits)) {
        pthread_mutex_lock(&t->mu);
        pthread_cond_broadcast(&t->cv_done);
        pthread_mutex_unlock(&t->mu);
    }
}

/* Takes and runs tasks of generation g until none is left; of a loop of
 * parts, the worker's own part. */
static void s_work(team_t *t, uint32_t g, int worker)
{
    for (;;) {
        uint64_t c = atomic_load_explicit(&t->claim, memory_order_acquire);
        if (s_gen(c) != g) return;
        if ((uint32_t)c == S_PARTS) {
            team_fn fn = atomic_load_explicit(&t->fn, memory_order_relaxed);
            fn(atomic_load_explicit(&t->ctx, memory_order_relaxed), worker, worker);
            t->end[worker] = s_now();
            s_finished(t, t->n);
            return;
        }
        /* acquire: a count of a newer loop comes with that loop's closing of
         * generation g (team_run), so the claim below then fails */
        int n = atomic_load_explicit(&t->ntasks, memory_order_acquire);
        if ((int)(uint32_t)c >= n) return;
        if (!atomic_compare_exchange_weak_explicit(&t->claim, &c, c + 1, memory_order_acq_rel,
                                                   memory_order_acquire))
            continue;
        team_fn fn = atomic_load_explicit(&t->fn, memory_order_relaxed);
        void *ctx = atomic_load_explicit(&t->ctx, memory_order_relaxed);
        fn(ctx, (int)(uint32_t)c, worker);
        s_finished(t, n);
    }
}

/* Waits for a generation other than seen; returns it, or 0 to exit. */
static uint32_t s_wait_loop(team_t *t, uint32_t seen)
{
    for (int i = 0; i < S_SPIN; i++) {
        if (atomic_load_explicit(&t->stop, memory_order_relaxed)) return 0;
        uint32_t g = s_gen(atomic_load_explicit(&t->claim, memory_order_acquire));
        if (g != seen) return g;
        s_pause();
    }
    pthread_mutex_lock(&t->mu);
    atomic_fetch_add(&t->sleepers, 1);
    uint32_t g = seen;
    while (!atomic_load(&t->stop) && (g = s_gen(atomic_load(&t->claim))) == seen)
        pthread_cond_wait(&t->cv_work, &t->mu);
    atomic_fetch_sub(&t->sleepers, 1);
    pthread_mutex_unlock(&t->mu);
    return atomic_load(&t->stop) ? 0 : g;
}

static void *s_helper(void *arg)
{
    s_helper_t *h = arg;
    uint32_t seen = 0;
    for (;;) {
        uint32_t g = s_wait_loop(h->team, seen);
        if (!g) return NULL;
        seen = g;
        s_work(h->team, g, h->id);
    }
}

team_t *team_start(int nthreads)
{
    if (nthreads > TEAM_MAX) nthreads = TEAM_MAX;
    if (nthreads <= 1) return NULL;
    team_t *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    if (pthread_mutex_init(&t->mu, NULL) != 0) { free(t); return NULL; }
    if (pthread_cond_init(&t->cv_work, NULL) != 0) {
        pthread_mutex_destroy(&t->mu);
        free(t);
        return NULL;
    }
    if (pthread_cond_init(&t->cv_done, NULL) != 0) {
        pthread_cond_destroy(&t->cv_work);
        pthread_mutex_destroy(&t->mu);
        free(t);
        return NULL;
    }
    for (int i = 1; i < nthreads; i++) {
        t->args[t->nhelpers] = (s_helper_t){t, t->nhelpers + 1};
        if (pthread_create(&t->th[t->nhelpers], NULL, s_helper, &t->args[t->nhelpers]) != 0) break;
        t->nhelpers++;
    }
    t->n = t->nhelpers + 1;
    for (int w = 0; w < t->n; w++) t->share[w] = 1.0 / t->n;
    if (t->nhelpers == 0) team_stop(&t);
    return t;
}

void team_stop(team_t **self_p)
{
    team_t *t = *self_p;
    if (!t) return;
    pthread_mutex_lock(&t->mu);
    atomic_store(&t->stop, 1);
    pthread_cond_broadcast(&t->cv_work);
    pthread_mutex_unlock(&t->mu);
    for (int i = 0; i < t->nhelpers; i++) pthread_join(t->th[i], NULL);
    pthread_cond_destroy(&t->cv_done);
    pthread_cond_destroy(&t->cv_work);
    pthread_mutex_destroy(&t->mu);
    free(t);
    *self_p = NULL;
}

int team_size(const team_t *t)
{
    return t ? t->n : 1;
}

/* Publishes a loop of ntasks tasks (next: its first task, or S_PARTS) and
 * returns its generation. */
static uint32_t s_publish(team_t *t, int ntasks, team_fn fn, void *ctx, uint32_t next)
{
    uint64_t last = atomic_load_explicit(&t->claim, memory_order_relaxed);
    uint32_t g = s_gen(last) + 1;
    if (g == 0) g = 1;   /* after 2^32 loops: 0 means "exit" to a helper */
    /* Close the finished generation before its task count and function are
     * overwritten: a helper still in s_work of it may hold the old claim
     * word; without this its claim could succeed against the next
     * generation's count and run a task of it twice (done overshot, the
     * caller waited forever). */
    atomic_store(&t->claim, (last & 0xffffffff00000000ULL) | S_CLOSED);
    atomic_store_explicit(&t->fn, fn, memory_order_relaxed);
    atomic_store_explicit(&t->ctx, ctx, memory_order_relaxed);
    /* release: a helper that reads this count also sees the generation closed */
    atomic_store_explicit(&t->ntasks, ntasks, memory_order_release);
    atomic_store_explicit(&t->done, 0, memory_order_relaxed);
    atomic_store(&t->claim, (uint64_t)g << 32 | next);
    if (atomic_load(&t->sleepers) > 0) {
        pthread_mutex_lock(&t->mu);
        pthread_cond_broadcast(&t->cv_work);
        pthread_mutex_unlock(&t->mu);
    }
    return g;
}

/* Waits until ntasks tasks of the current loop have finished. */
static void s_wait_done(team_t *t, int ntasks)
{
    for (int i = 0; i < S_SPIN; i++) {
        if (atomic_load_explicit(&t->done, memory_order_acquire) == ntasks) return;
        s_pause();
    }
    pthread_mutex_lock(&t->mu);
    atomic_store(&t->caller_waits, 1);
    while (atomic_load(&t->done) != ntasks)
        pthread_cond_wait(&t->cv_done, &t->mu);
    atomic_store(&t->caller_waits, 0);
    pthread_mutex_unlock(&t->mu);
}

void team_run(team_t *t, int ntasks, team_fn fn, void *ctx)
{
    if (ntasks <= 0) return;
    if (!t || ntasks == 1) {
        for (int i = 0; i < ntasks; i++) fn(ctx, i, 0);
        return;
    }
    s_work(t, s_publish(t, ntasks, fn, ctx, 0), 0);
    s_wait_done(t, ntasks);
}

/* The sum of the shares scaled by c, each held within [lo, hi]. */
static double s_clamped_sum(const double *share, int n, double c, double lo, double hi)
{
    double sum = 0.0;
    for (int w = 0; w < n; w++) {
        double s = c * share[w];
        sum += s < lo ? lo : s > hi ? hi : s;
    }
    return sum;
}

/* Scales shares (n of them, positive) to sum to 1 with each within half and
 * one and a half times an equal one: the scale c for which the clamped
 * shares sum to 1, found by bisection (the clamped sum grows with c, from
 * n lo = 0.5 to n hi = 1.5).  Clamping first and scaling after (as this
 * once did) moved a share clamped at the floor below it again when others
 * were clamped at the ceiling. */
static void s_bound_shares(double *share, int n)
{
    double lo = 0.5 / n, hi = 1.5 / n, least = share[0];
    for (int w = 1; w < n; w++) if (share[w] < least) least = share[w];
    double a = 0.0, b = hi / (least > 1e-300 ? least : 1e-300);
    for (int i = 0; i < 100; i++) {
        double m = 0.5 * (a + b);
        if (s_clamped_sum(share, n, m, lo, hi) < 1.0) a = m;
        else b = m;
    }
    double total = s_clamped_sum(share, n, b, lo, hi);
    for (int w = 0; w < n; w++) {
        double s = b * share[w];
        share[w] = (s < lo ? lo : s > hi ? hi : s) / total;
    }
}

/* Moves the shares toward those with which every worker would have
 * finished the loop published at t0 at once (worker w did share[w] of it
 * by end[w]; the wait for a helper to wake counts as its time).  A short
 * loop moves them little: its times are mostly waking and noise.  Each
 * share stays within half and one and a half times an equal one. */
static void s_learn(team_t *t, double t0)
{
    double rate[TEAM_MAX], sum = 0.0, longest = 0.0;
    for (int w = 0; w < t->n; w++) {
        double dt = t->end[w] - t0;
        if (dt < 1e-7) dt = 1e-7;
        rate[w] = t->share[w] / dt;
        sum += rate[w];
        if (dt > longest) longest = dt;
    }
    double a = longest / (longest + S_LEARN_S);
    for (int w = 0; w < t->n; w++)
        t->share[w] = (1.0 - a) * t->share[w] + a * rate[w] / sum;
    s_bound_shares(t->share, t->n);
}

void team_run_parts(team_t *t, team_fn fn, void *ctx)
{
    if (!t) { fn(ctx, 0, 0); return; }
    double t0 = s_now();
    s_work(t, s_publish(t, t->n, fn, ctx, S_PARTS), 0);
    s_wait_done(t, t->n);
    s_learn(t, t0);
}

/* Where part k of the team's shares of [0, n) starts. */
static int s_bound(const team_t *t, int n, int align, int k)
{
    if (k <= 0) return 0;
    if (k >= t->n) return n;
    double at = 0.0;
    for (int w = 0; w < k; w++) at += t->share[w];
    long long b = (long long)(at * n + 0.5) / align * align;
    return b < 0 ? 0 : b > n ? n : (int)b;
}

void team_part(const team_t *t, int n, int align, int w, int *a, int *b)
{
    if (!t) { *a = 0; *b = n; return; }
    *a = s_bound(t, n, align, w);
    int e = s_bound(t, n, align, w + 1);
    *b = e > *a ? e : *a;
}
