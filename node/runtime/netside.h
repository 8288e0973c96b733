/* netside.h: the network side of a node.  It owns the peer table, the
 * transport's links, joining, gossip, heartbeats and failure detection,
 * admission (closed swarms), the checking, decoding and encoding of
 * tensors, state transfers (downloads, backups held for other stages) and
 * the byte counters.  It reacts to three things: a message from a peer
 * (netside_on_msg), mail from the compute side (netside_on_mail) and time
 * (netside_tick); it talks to the compute side only by mail (mail.h).
 *
 * Threading: a netside is driven by one thread (the node's I/O thread, or
 * the simulator's); its counters may be read from any thread.
 *
 * The messages' flags and bodies: proto.h.  The implementation: one file
 * per part under netside/ (internal.h says what they share). */
#ifndef BRIGADE_RUNTIME_NETSIDE_H
#define BRIGADE_RUNTIME_NETSIDE_H
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include "net/keys.h"
#include "net/ticket.h"
#include "net/transport.h"
#include "net/vcache.h"
#include "node/runtime/env.h"
#include "node/runtime/mail.h"
#include "node/runtime/metrics.h"
#include "node/runtime/options.h"
#include "node/runtime/peers.h"
#include "node/runtime/proto.h"

#define RELAYED_LINK (-3)       /* transport_msg_t.link of a message that came through a relay */

/* Byte and drop counters: written by the network side only, readable anywhere. */
typedef struct {
    atomic_uint_fast64_t bytes_sent;        /* on the wire, headers included */
    atomic_uint_fast64_t bytes_sent_raw;    /* the same messages with tensors as raw fp32 */
    atomic_uint_fast64_t bytes_sent_state;  /* of bytes_sent: stage state (downloads served, backups) */
    atomic_uint_fast64_t bytes_recv;        /* received, headers included */
    atomic_uint_fast64_t drops;             /* messages refused or lost */
    atomic_uint_fast64_t relay_bytes;       /* relayed for others: bytes forwarded */
    atomic_uint_fast64_t relay_msgs;        /* relayed for others: messages forwarded */
    atomic_uint_fast64_t relay_refused;     /* relay requests refused (over the cap, no link to the receiver, relay off) */
} net_counters_t;

typedef struct {
    opts_t *o;                 /* the run config and local options; a joiner's is filled in at WELCOME */
    const keypair_t *keys;     /* this node's identity */
    const uint8_t *ticket;     /* closed swarm: this node's admission ticket (TICKET_LEN), or NULL */
    const char *adv;           /* HOST:PORT peers reach this node at */
    rt_clock_t clock;          /* time */
    rt_port_t port;            /* the network */
    metrics_t *metrics;        /* events (shared with the compute side; thread-safe) */
    void (*post)(void *arg, mail_t *m);  /* mail to the compute side (ownership passes) */
    void *post_arg;
    int modelled;              /* simulator: tensors are modelled (sizes only, no values) */
    int no_listen;             /* --no-listen: reachable only over the links this node opens */
    int relay;                 /* --relay on: relay for outward-only nodes (when this node is reachable) */
    double relay_mbit;         /* cap on relayed traffic, Mbit/s (0: RELAY_MBIT_DEFAULT) */
    double emu_relay_tamper;   /* test-only: probability that a relayed envelope is altered here */
    vcache_t *vcache;          /* announcements verified already, shared by the simulator's nodes
                                  (one thread); NULL: the netside keeps a small one of its own */
} netside_cfg_t;

typedef struct netside netside_t;

/* A network side for a node with the given identity.  It knows itself as
 * serving o->stage of a run with o's config (the creator), until a join
 * says otherwise.  NULL with a reason when out of memory. */
netside_t *netside_new(const netside_cfg_t *cfg, char *err, size_t errlen);
void netside_destroy(netside_t **self_p);

/* Starts joining through the node at join_addr (HOST:PORT/KEY) asking for
 * stage want (-1: the bootstrap chooses).  0, or -1 with a reason. */
int netside_join(netside_t *self, const char *join_addr, int want, char *err, size_t errlen);
/* The join's state: 1 welcomed (the run config is in cfg->o, the stage in
 * netside_stage()), 0 still waiting, -1 failed with a one-line reason in err
 * (refused, malformed WELCOME, finished run, no answer in time). */
int netside_join_state(netside_t *self, char *err, size_t errlen);
/* 1 when this node is reachable only over the links it opens (--no-listen,
 * or the bootstrap's probe of its address failed at JOIN). */
int netside_outward(const netside_t *self);
/* The run id, the stage this node serves and its data shard (after a join: as assigned). */
uint64_t netside_run(const netside_t *self);
int netside_stage(const netside_t *self);
int netside_shard(const netside_t *self);
/* Sets this node's own record before the compute side exists: stage and
 * tensor sizes (the creator's, or a joiner's after WELCOME). */
void netside_set_self(netside_t *self, const self_info_t *s);

/* A message from a peer (the driver closes it afterwards).  virt_bytes: the
 * bytes its modelled tensors stand for (simulator), 0 otherwise. */
void netside_on_msg(netside_t *self, const transport_msg_t *m, uint64_t virt_bytes);
/* A message the transport refused before netside_on_msg could see it (bad
 * header, sender id not matching its key, a failed handshake...): counted
 * and logged as a `drop` with reason why; the sender's key, when known
 * (else NULL), earns a strike like the sender of any bad message.  Called
 * by the driver of netside_on_msg, on the same thread. */
void netside_on_drop(netside_t *self, const char *why, const uint8_t *pubkey);
/* Mail from the compute side (ownership passes). */
void netside_on_mail(netside_t *self, mail_t *m);
/* Timed work (heartbeats, gossip, failure detection, fetch deadlines).
 * Returns the clock time it wants to be called again by. */
double netside_tick(netside_t *self);
/* 1 when the compute side has left and what had to be said was said: after
 * a completed run, every peer heard from lately has said it ended too (or
 * LINGER_S passed: a partitioned peer hears DONE when it comes back). */
int netside_finished(netside_t *self);
/* Says goodbye to every live peer (BYE, and DONE when this last-stage node completed the run). */
void netside_bye(netside_t *self);

/* The run's progress (last-stage microbatches, swarm-wide, this node's
 * included) and the last stage's latest loss (NaN unknown); driver thread only. */
void netside_progress(const netside_t *self, uint64_t *completed, double *loss);
/* The run's split as this node's messages say it (SPLIT_EVEN, _LATE or
 * _FRONT: its compute side's layout once it has one), -1 while --split
 * auto has not chosen (as far as this node heard); driver thread only. */
int netside_plan(const netside_t *self);
/* A snapshot of the peer table for the compute side (NULL when out of memory). */
peer_view_t *netside_view(netside_t *self);
/* The counters (readable from any thread). */
const net_counters_t *netside_counters(const netside_t *self);
/* The peer table, for a status page; driver thread only. */
const peers_t *netside_peers(const netside_t *self);
#endif
