/* router.h: where a stage sends its work.  Per peer it sends to: the
 * microbatches that peer holds and how fast it returns them; the choice,
 * among the live peers of a stage in a peer-table snapshot, of the one
 * expected to finish first.  Owned by the compute side. */
#ifndef BRIGADE_RUNTIME_ROUTER_H
#define BRIGADE_RUNTIME_ROUTER_H
#include <stdint.h>
#include "node/runtime/idmap.h"
#include "node/runtime/mail.h"

typedef struct {
    uint64_t id;          /* the peer */
    int outstanding;      /* our microbatches it holds */
    double turnaround;    /* EWMA seconds from our ACT to its GRAD, 0 unknown */
    int stale;            /* forgotten (ROUTER_FORGET_TURNS): the next measure replaces turnaround */
    uint64_t last_sent;   /* router's send count when we last sent to it */
} route_t;

/* Sends elsewhere after which a peer's turnaround counts as unknown again,
 * so that it is tried once more (it may have been slow only then), also
 * when work it was sent then was lost with it (a paused peer):
 * ROUTER_FORGET_TURNS per peer routed to, at most ROUTER_FORGET_SENDS.  A
 * stage of two peers is not left with one for 64 of our sends because the
 * other's first answer was slow (a warm-up, a loaded machine). */
#define ROUTER_FORGET_SENDS 64
#define ROUTER_FORGET_TURNS 8

typedef struct {
    route_t *r;           /* per peer */
    int n, cap;
    idmap_t ix;           /* id -> index in r */
    uint64_t sends;       /* microbatches sent, all peers */
} router_t;

void router_init(router_t *rt);
void router_fini(router_t *rt);
/* The record of peer, or NULL (make: created when missing; NULL when out of memory). */
route_t *router_get(router_t *rt, uint64_t peer, int make);
/* Among the peers ix[0..n) of snapshot v (the peers of one stage), the live
 * one with the lowest expected completion time: (outstanding + 1) x
 * turnaround + RTT; while a peer's turnaround is unknown (a new peer, or one
 * not chosen for ROUTER_FORGET_TURNS sends per route, at most
 * ROUTER_FORGET_SENDS), 0.5 x the mean of the live
 * candidates' measured turnarounds stands for it (an idle unknown peer is
 * tried before an idle known one slower than half the mean, and its share
 * grows with its first answers), or, when none is measured, outstanding x
 * 0.05 s; a slow peer costs 4 x + 1 s.
 * Never `avoid` (0: none), nor a peer we have no link to yet (reach < 0:
 * reachable only outward, asked for a link); a relayed peer (reach 1)
 * costs its extra hop, half its round trip + 2 ms more.  0 when there is none. */
uint64_t router_pick(router_t *rt, const peer_view_t *v, const int *ix, int n, uint64_t avoid);
/* The route of each of ix[0..n) into rix[0..n): its index in rt->r, -1
 * none yet.  Valid while rt->n and v stay the same (routes are only added). */
void router_index(router_t *rt, const peer_view_t *v, const int *ix, int n, int *rix);
/* router_pick with the routes found by router_index (the same choice,
 * without a lookup per candidate: a microbatch's choice among a hundred
 * peers was a hundred hash lookups). */
uint64_t router_pick_ix(const router_t *rt, const peer_view_t *v, const int *ix, const int *rix, int n, uint64_t avoid);
/* The peer with the lowest id among ix[0..n) of snapshot v that work can go
 * to now (not `avoid`, not gone, a link to it: reach >= 0); 0 when none.
 * Senders with the same view choose the same peer: an evaluation's batches
 * from every peer of a stage meet at one node of the next. */
uint64_t router_pick_lowest(const peer_view_t *v, const int *ix, int n, uint64_t avoid);
/* Forgets the routes of peers snapshot v no longer holds (their records were
 * replaced in a full table) and that hold none of our microbatches: the
 * routes grow with the peers ever sent to otherwise.  Indices change. */
void router_prune(router_t *rt, const peer_view_t *v);
/* A microbatch went to peer. */
void router_sent(router_t *rt, uint64_t peer);
/* Peer returned (or lost) one: turnaround > 0 is its measured time.
 * silent: the peer held the microbatch across a silence of its own (a
 * paused process); that time measured the pause, not the peer, and counts
 * only when none was ever measured (a link slow enough to always look
 * silent still gets one).  A forgotten route keeps its time until a
 * measure that is not silent replaces it. */
void router_returned(router_t *rt, uint64_t peer, double turnaround, int silent);
#endif
