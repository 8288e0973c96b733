/* view.h: the peer table as the compute side sees it (view.c): the latest
 * snapshot grouped by stage, the round trips to the neighbouring stages,
 * and the routes to the next stage's peers. */
#ifndef BRIGADE_RUNTIME_COMPUTE_VIEW_H
#define BRIGADE_RUNTIME_COMPUTE_VIEW_H
#include "node/engine/model.h"
#include "node/runtime/compute.h"
#include "node/runtime/router.h"

typedef struct {
    peer_view_t *view;            /* the latest snapshot of the peer table */
    uint64_t gen;                 /* views taken so far */
    int *by_stage;                /* view entries grouped by stage: stage s at by_stage[stage_at[s] .. stage_at[s + 1]) */
    int stage_at[MODEL_STAGES_MAX + 1];
    int live;                     /* live peers in the view */
    int live_at[MODEL_STAGES_MAX]; /* live peers of each stage in the view */
    int rtt_for;                  /* the stage rtt_mean/rtt_min were computed for with this view, -1 none */
    double rtt_mean, rtt_min;     /* view_rtt's result, kept until the view or the stage changes */
    router_t router;              /* per peer we send to */
    int *pick_rix;                /* routes of the picked stage's peers (router_index), for: */
    int pick_cap, pick_stage, pick_routes;
    uint64_t pick_gen;            /* the view (gen), stage and route count they were found for; 0: none */
} view_cache_t;

/* Each contract at its definition in view.c. */
void view_take(compute_t *c, peer_view_t *v);
const int *view_stage_peers(const compute_t *c, int s, int *n);
int view_stage_live(const compute_t *c, int stage);
int view_all_stages_served(const compute_t *c);
void view_rtt(compute_t *c, double *mean, double *min);
uint64_t view_pick(compute_t *c, int stage, uint64_t avoid);
void view_peer_returned(compute_t *c, uint64_t peer, double turnaround, int silent);
double view_loss(const compute_t *c);
uint64_t view_stage_lowest(const compute_t *c);
#endif
