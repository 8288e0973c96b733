/* view.c: the peer table as the compute side sees it (view.h): the
 * latest snapshot grouped by stage, round trips to the neighbouring
 * stages, and the routes to the next stage's peers. */
#include "node/runtime/compute/internal.h"

/* Takes a new snapshot of the peer table and groups it by stage. */
void view_take(compute_t *c, peer_view_t *v)
{
    int *ix = malloc(sizeof(int) * (size_t)(v->n > 0 ? v->n : 1));
    if (!ix) { free(v); return; }   /* keep the old one */
    free(c->seen.view);
    free(c->seen.by_stage);
    c->seen.view = v;
    c->seen.gen++;
    c->seen.by_stage = ix;
    int K = c->nstages;
    c->seen.live = 0;
    for (int i = 0; i < v->n; i++) c->seen.live += v->p[i].health != PEER_GONE;
    memset(c->seen.stage_at, 0, sizeof(int) * (size_t)(K + 1));
    for (int i = 0; i < v->n; i++)
        if (v->p[i].stage >= 0 && v->p[i].stage < K) c->seen.stage_at[v->p[i].stage + 1]++;
    for (int s = 0; s < K; s++) c->seen.stage_at[s + 1] += c->seen.stage_at[s];
    int fill[MODEL_STAGES_MAX];
    memcpy(fill, c->seen.stage_at, sizeof(int) * (size_t)K);
    memset(c->seen.live_at, 0, sizeof(int) * (size_t)K);
    for (int i = 0; i < v->n; i++)
        if (v->p[i].stage >= 0 && v->p[i].stage < K) {
            ix[fill[v->p[i].stage]++] = i;
            c->seen.live_at[v->p[i].stage] += v->p[i].health != PEER_GONE;
        }
    c->seen.rtt_for = -1;
    if (c->seen.router.n > 2 * v->n + 64) router_prune(&c->seen.router, v);   /* amortized: the routes of forgotten peers */
}

/* The view entries of stage s (count in *n). */
const int *view_stage_peers(const compute_t *c, int s, int *n)
{
    if (!c->seen.view || s < 0 || s >= c->nstages) { *n = 0; return NULL; }
    *n = c->seen.stage_at[s + 1] - c->seen.stage_at[s];
    return c->seen.by_stage + c->seen.stage_at[s];
}

/* Live peers of `stage` in the view (self excluded). */
int view_stage_live(const compute_t *c, int stage)
{
    return c->seen.view && stage >= 0 && stage < c->nstages ? c->seen.live_at[stage] : 0;
}

/* Every other stage has a live peer in the view. */
int view_all_stages_served(const compute_t *c)
{
    for (int s = 0; s < c->nstages; s++)
        if (s != c->stage && view_stage_live(c, s) == 0) return 0;
    return 1;
}

/* Mean smoothed and minimum round trips to the live peers of the
 * neighbouring stages, the links this node's work crosses (ms; 0 unknown). */
void view_rtt(compute_t *c, double *mean, double *min)
{
    if (c->seen.rtt_for != c->stage) {
        double sum = 0, lo = 0;
        int n = 0;
        for (int s = c->stage - 1; s <= c->stage + 1; s += 2) {
            int k;
            const int *ix = view_stage_peers(c, s, &k);
            for (int i = 0; i < k; i++) {
                const view_peer_t *p = &c->seen.view->p[ix[i]];
                if (p->health == PEER_GONE || p->rtt_ms <= 0) continue;
                sum += p->rtt_ms;
                if (p->rtt_min_ms > 0 && (lo == 0 || p->rtt_min_ms < lo)) lo = p->rtt_min_ms;
                n++;
            }
        }
        c->seen.rtt_mean = n ? sum / n : 0;
        c->seen.rtt_min = lo;
        c->seen.rtt_for = c->stage;
    }
    *mean = c->seen.rtt_mean;
    if (min) *min = c->seen.rtt_min;
}

/* The peer of `stage` the router picks (router_pick_ix), the routes of
 * the stage's peers indexed once per view, stage and route count. */
uint64_t view_pick(compute_t *c, int stage, uint64_t avoid)
{
    int n;
    const int *ix = view_stage_peers(c, stage, &n);
    if (c->seen.pick_gen != c->seen.gen || c->seen.pick_stage != stage || c->seen.pick_routes != c->seen.router.n) {
        if (n > c->seen.pick_cap) {
            int *r = realloc(c->seen.pick_rix, sizeof(int) * (size_t)n);
            if (!r) return router_pick(&c->seen.router, c->seen.view, ix, n, avoid);
            c->seen.pick_rix = r;
            c->seen.pick_cap = n;
        }
        router_index(&c->seen.router, c->seen.view, ix, n, c->seen.pick_rix);
        c->seen.pick_gen = c->seen.gen;
        c->seen.pick_stage = stage;
        c->seen.pick_routes = c->seen.router.n;
    }
    return router_pick_ix(&c->seen.router, c->seen.view, ix, c->seen.pick_rix, n, avoid);
}

/* Peer returned (or lost: turnaround 0) a microbatch (router_returned). */
void view_peer_returned(compute_t *c, uint64_t peer, double turnaround, int silent)
{
    router_returned(&c->seen.router, peer, turnaround, silent);
}

/* The loss a last-stage peer of the view said (the last one listed that
 * said a finite one), NaN none. */
double view_loss(const compute_t *c)
{
    double loss = NAN;
    int n;
    const int *ix = view_stage_peers(c, c->nstages - 1, &n);
    for (int i = 0; i < n; i++)
        if (isfinite(c->seen.view->p[ix[i]].loss) && c->seen.view->p[ix[i]].loss > 0) loss = c->seen.view->p[ix[i]].loss;
    return loss;
}

/* The live node of this stage of the lowest id, this one included: at the
 * last stage the one an evaluation's batches go to (schedule_next_peer), at the
 * data stage the one that chooses --split auto's split (plan_step). */
uint64_t view_stage_lowest(const compute_t *c)
{
    int n;
    const int *ix = view_stage_peers(c, c->stage, &n);
    uint64_t lo = router_pick_lowest(c->seen.view, ix, n, 0);
    return lo && lo < c->cfg.id ? lo : c->cfg.id;
}
