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
 * missed (each side writes its own, then reads the other's). */
#include "node/engine/team.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

#define S_SPIN 2000   /* polls before sleeping (each with a pause: some microseconds) */

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

static uint32_t s_gen(uint64_t claim) { return (uint32_t)(claim >> 32); }

/* Takes and runs tasks of generation g until none is left. */
static void s_work(team_t *t, uint32_t g, int worker)
{
    for (;;) {
        uint64_t c = atomic_load_explicit(&t->claim, memory_order_acquire);
        if (s_gen(c) != g) return;
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
        if (atomic_fetch_add(&t->done, 1) + 1 == n && atomic_load(&t->caller_waits)) {
            pthread_mutex_lock(&t->mu);
            pthread_cond_broadcast(&t->cv_done);
            pthread_mutex_unlock(&t->mu);
        }
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

void team_run(team_t *t, int ntasks, team_fn fn, void *ctx)
{
    if (ntasks <= 0) return;
    if (!t || ntasks == 1) {
        for (int i = 0; i < ntasks; i++) fn(ctx, i, 0);
        return;
    }
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
    atomic_store(&t->claim, (uint64_t)g << 32);
    if (atomic_load(&t->sleepers) > 0) {
        pthread_mutex_lock(&t->mu);
        pthread_cond_broadcast(&t->cv_work);
        pthread_mutex_unlock(&t->mu);
    }
    s_work(t, g, 0);
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
