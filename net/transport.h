/* transport.h: the ZeroMQ transport of one node.
 *
 * One ROUTER socket listens at HOST:PORT as a CurveZMQ server; outgoing
 * links are DEALER sockets, CurveZMQ clients holding this node's keypair and
 * the server's public key.  A ZAP handler, served by the same thread inside
 * transport_poll(), admits or refuses every CURVE client key through the
 * admit callback and refuses every other mechanism (plaintext clients), so
 * each message that reaches the caller carries the authenticated public key
 * of its sender.
 *
 * Threading: a transport is used by ONE thread (the node's I/O thread).
 * The only exception is transport_wake(), callable from any thread.
 *
 * Link indices: transport_connect() and transport_adopt() return the
 * index of a link; once transport_disconnect() has closed it, that index is
 * free and the next link opened or adopted may get it (the lowest free
 * index is taken, so indices stay below the most links open at once).
 * Nothing sent or received on the closed link comes out under its index
 * afterwards: its unsent messages and the messages received on it that
 * transport_poll() has not delivered yet are discarded.  The caller must
 * forget every copy of an index it disconnects (a transport_msg_t it still
 * holds included), or it will later name someone else's link.
 *
 * Every message is [header][frame]...; a message whose header does not
 * decode, or whose header sender id is not node_id_from_pubkey() of the
 * authenticated key, is dropped and counted.  transport_send() and
 * transport_reply() stamp the header's sender with this node's id.
 *
 * Link emulation (test-only opts.emu_*, net/linkemu.h): the emulated
 * bandwidth is the node's uplink, shared by all its links and the replies
 * (one flow): each link sends its messages in order, the links with
 * something to send share the rate equally, and a message is due latency +
 * jitter (uniform in [0, jitter]) after its last byte has left, order kept
 * per link.  The rate counts the framing and TCP/IP headers of each message
 * and the acknowledgements of what the node receives.  A message lost to
 * emulated loss is dropped silently and counted.  With emu_downlink_mbit,
 * received messages also pass one serialization queue at that rate, in
 * arrival order, before transport_poll() delivers them. */
#ifndef BRIGADE_NET_TRANSPORT_H
#define BRIGADE_NET_TRANSPORT_H
#include <stddef.h>
#include <stdint.h>
#include "net/keys.h"
#include "net/wire.h"

#define TRANSPORT_MAX_FRAMES 16   /* most extra frames after the header */

typedef struct transport_t transport_t;

/* Admission: return 1 to admit the key, 0 to refuse it (with a short reason
 * in why).  Called from transport_poll() on the transport's thread. */
typedef int (*transport_admit_fn)(void *arg, const uint8_t pubkey[32],
                                  char *why, size_t whylen);
/* A received message dropped or a client refused: why is a short reason,
 * pubkey the sender's key or NULL when unknown.  Called from
 * transport_poll() on the transport's thread; it must not open or close
 * links (transport_poll is in the middle of reading them). */
typedef void (*transport_drop_fn)(void *arg, const char *why, const uint8_t *pubkey);

typedef struct {
    const char *listen_host;     /* bind address ("127.0.0.1", "0.0.0.0", "*", "::") */
    int listen_port;             /* 0: a free port, see transport_port() */
    const keypair_t *keys;       /* this node's identity (copied) */
    transport_admit_fn admit;    /* NULL: open swarm, admit every CURVE key */
    void *admit_arg;
    transport_drop_fn on_drop;   /* optional */
    void *drop_arg;
    int64_t max_msg_bytes;       /* largest frame accepted; 0: WIRE_FRAME_BYTES_MAX (libzmq's limit is per
                                  * frame: a message of many frames is held whole before
                                  * transport_poll can refuse it) */
    int sndhwm;                  /* per-socket send queue, messages; 0: 100 */
    int rcvhwm;                  /* per-socket receive queue, messages; 0: 1000 */
    int linger_ms;               /* 0: 200 */
    int heartbeat_ivl_ms;        /* ZMTP heartbeat interval; 0: 1000 */
    int heartbeat_timeout_ms;    /* silence before a connection is dropped; 0: 10000 */
    int reconnect_ivl_ms;        /* 0: 100 (backs off up to 20x) */
    /* test-only link emulation of outgoing messages (all 0: off) */
    double emu_latency_ms;
    double emu_jitter_ms;
    double emu_bandwidth_mbit;   /* uplink rate, all links together; 0: unlimited */
    double emu_downlink_mbit;    /* downlink rate, all senders together; 0: unlimited */
    double emu_loss;             /* probability in [0, 1] */
    uint64_t emu_seed;
    size_t emu_max_queue_bytes;  /* per link; 0: 256 MiB */
} transport_opts_t;

typedef struct {
    wire_hdr_t hdr;                            /* decoded header */
    uint8_t sender_pub[32];                    /* authenticated key of the sender */
    uint64_t sender;                           /* == hdr.sender == node_id_from_pubkey(sender_pub) */
    int link;                                  /* link it came in on; -1: the listening socket (reply with transport_reply) */
    int nframes;                               /* extra frames after the header */
    const uint8_t *frame[TRANSPORT_MAX_FRAMES];/* frame data, valid until transport_msg_close */
    size_t len[TRANSPORT_MAX_FRAMES];          /* frame lengths */
    uint8_t route[256];                        /* private: routing id on the listening socket */
    size_t route_len;                          /* private */
    void *parts_;                              /* private: owned zmq messages */
} transport_msg_t;

typedef struct {
    uint64_t msgs_sent;      /* messages handed to ZeroMQ (after emulation) */
    uint64_t bytes_sent;     /* their bytes, header included */
    uint64_t msgs_recv;      /* messages received (delivered, or waiting for the emulated downlink) */
    uint64_t bytes_recv;     /* their bytes, header included */
    uint64_t drops;          /* received messages dropped (bad header, sender, ...) */
    uint64_t send_fails;     /* due messages ZeroMQ refused (e.g. reply route gone) */
    uint64_t emu_lost;       /* outgoing messages dropped by loss emulation */
    uint64_t zap_admitted;   /* client handshakes admitted */
    uint64_t zap_refused;    /* client handshakes refused (key or mechanism) */
    uint64_t handshake_failed; /* clients failing the handshake (plaintext, wrong key) */
    uint64_t wakeups;        /* transport_poll calls ended by transport_wake */
    char last_drop[256];     /* reason of the last drop or refusal */
} transport_stats_t;

/* Creates the transport: a context, the ZAP handler and the listening
 * ROUTER bound at opts->listen_host:listen_port.  Returns NULL with a
 * one-line reason in err, e.g. "cannot listen on 127.0.0.1:7000: Address
 * already in use". */
transport_t *transport_new(const transport_opts_t *opts, char *err, size_t errlen);

/* Closes every socket (unsent messages wait at most linger), frees
 * everything and sets *self_p to NULL.  NULL-safe. */
void transport_destroy(transport_t **self_p);

/* The port the listening socket is bound to (useful after port 0). */
int transport_port(const transport_t *self);

/* This node's id (node_id_from_pubkey of its public key). */
uint64_t transport_id(const transport_t *self);

/* Opens an outgoing link to host:port whose CurveZMQ public key is
 * server_pub.  Connection happens in the background (with reconnects);
 * messages sent before it is up are queued.  Returns the link index (>= 0,
 * possibly one closed before: see "Link indices" above), or -1 with a
 * reason in err. */
int transport_connect(transport_t *self, const char *host, int port,
                      const uint8_t server_pub[32], char *err, size_t errlen);

/* A link to the sender of `from`, a message that came in on the listening
 * socket (from->link == -1), over the connection it came in on: the peer
 * opened it (it may not be reachable itself, e.g. behind NAT), and we send
 * back through our ROUTER by that connection's routing id.  Pass the link
 * adopted from this peer before (or -1): when it is one, its routing id is
 * brought up to date (the peer may have connected again) and it is
 * returned.  Sending on an adopted link after the peer's connection went
 * away fails (send_fails) until a message from its new connection is
 * adopted.  Returns the link (a new one may reuse a closed index), or -1
 * (not a listening-socket message, out of memory). */
int transport_adopt(transport_t *self, int link, const transport_msg_t *from);

/* Closes a link; messages still queued on it are discarded, and so are
 * the ones received on it that transport_poll() has not delivered yet
 * (emulated downlink).  Its index is free for the next link opened or
 * adopted.  A link that is not open: nothing happens. */
void transport_disconnect(transport_t *self, int link);

/* Queues [header][frames[0]]...[frames[n-1]] on link (copied; h->magic,
 * h->version and h->sender are stamped: WIRE_MAGIC, WIRE_VERSION, this
 * node's id).  Never blocks.  Returns 0 when sent or
 * queued (or lost to loss emulation), 1 when the link is full (nothing
 * queued: retry later or elsewhere), -1 when link is not an open link or
 * nframes is out of range. */
int transport_send(transport_t *self, int link, const wire_hdr_t *h,
                   const void *const *frames, const size_t *lens, int nframes);

/* Same as transport_send, to the sender of a message that came in on the
 * listening socket (to->link == -1).  A sender that has gone away makes the
 * message fail later (counted in send_fails). */
int transport_reply(transport_t *self, const transport_msg_t *to, const wire_hdr_t *h,
                    const void *const *frames, const size_t *lens, int nframes);

/* Sends whatever is due, serves the ZAP handler, and waits up to timeout_ms
 * (-1: no limit) for one incoming message.  Returns 1 with *out filled (the
 * caller must transport_msg_close it), 0 on timeout or transport_wake(),
 * -1 on a ZeroMQ error; after 0 or -1, closing *out is a no-op. */
int transport_poll(transport_t *self, int timeout_ms, transport_msg_t *out);

/* Releases a received message's frames.  NULL-safe and idempotent. */
void transport_msg_close(transport_msg_t *msg);

/* Makes a transport_poll() in progress (or the next one) return soon: 0,
 * or 1 if a message arrived at the same moment (the wake is consumed
 * either way, so check your own queues after every poll).  Thread-safe. */
void transport_wake(transport_t *self);

/* Bytes waiting in link's emulation queue (0 without emulation), -1 for
 * a link that is not open. */
int64_t transport_pending(const transport_t *self, int link);

/* A copy of the counters. */
void transport_stats(const transport_t *self, transport_stats_t *out);

#endif
