/* peers.h: a node's view of the swarm: who serves which stage, where they
 * listen, how fast they are, and which of them are alive.  Shared by the
 * I/O thread (gossip, heartbeats) and the compute thread (routing), so every
 * call takes the table's lock. */
#ifndef BRIGADE_PEERS_H
#define BRIGADE_PEERS_H
#include <pthread.h>
#include <stdint.h>
#include "net/ticket.h"
#include "net/wire.h"

#define PEERS_CAP 256

typedef enum { PEER_ALIVE = 0, PEER_SLOW, PEER_GONE } peer_health_t;

typedef struct {
    peer_info_t info;       /* gossip record (id, addr, key, stage, rate, version) */
    int link;               /* transport link, -1 until connected */
    peer_health_t health;   /* alive / slow / gone */
    double last_heard;      /* metrics_now() of the last message from it */
    double rtt_ms;          /* EWMA of our PING round trips, 0 unknown */
    double rtt_dev_ms;      /* EWMA of |rtt - mean| */
    uint64_t completed;     /* last-stage microbatches it reported */
    int outstanding;        /* our microbatches it holds (routing) */
    double turnaround;      /* EWMA seconds from our ACT to its GRAD */
    double last_loss;       /* its last reported loss (last stage) */
    int strikes;            /* messages of it refused since the last ban */
    int admitted;           /* closed swarm: its ticket was verified here */
    uint8_t announce[ANNOUNCE_LEN]; /* its own signed announcement (addr, stage), as received */
    uint64_t announce_seq;  /* the seq of that announcement; 0: none */
    double banned_until;    /* metrics_now() before which it is ignored */
    double last_state_req;  /* rate limit of its STATE_REQs */
    double norm_mean;       /* running mean of the per-value RMS of its tensors */
    int norm_n;             /* tensors in that mean */
} peer_t;

typedef struct {
    pthread_mutex_t lock;
    uint64_t self;          /* this node's id (kept in the table too) */
    int n;
    peer_t p[PEERS_CAP];
} peers_t;

void peers_init(peers_t *t, uint64_t self);
void peers_fini(peers_t *t);
/* Adds or refreshes a record; a record about self is ignored unless it is
 * the first.  Returns 1 when the peer is new, 0 when known, -1 when full. */
int peers_upsert(peers_t *t, const peer_info_t *info, double now);
/* Index of peer id, or -1 (call with the lock held). */
int peers_find_locked(peers_t *t, uint64_t id);
/* Peers (alive, self included) serving each stage, into count[nstages]
 * (nstages <= MODEL_STAGES_MAX, as every run config is). */
void peers_stage_counts(peers_t *t, int nstages, int *count);
/* The stage a newcomer should take: the one with the fewest alive peers,
 * ties broken by the lowest summed rate, then the lowest index. */
int peers_pick_stage(peers_t *t, int nstages);
/* The alive peer of `stage` (not self) with the lowest expected completion
 * time (outstanding work x turnaround + RTT); excludes `avoid` (0 = none).
 * Returns its id and its link in *link, or 0 when the stage has no peer. */
uint64_t peers_route(peers_t *t, int stage, uint64_t avoid, int *link);
/* Sum of `completed` over alive and gone peers (the run's progress). */
uint64_t peers_completed(peers_t *t);
#endif
