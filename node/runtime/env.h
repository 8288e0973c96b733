/* env.h: what a node's logic takes from the outside, injected: a clock and
 * a network port.  Production wires them to the monotonic clock and the
 * ZeroMQ/CurveZMQ transport (node.c); the simulator (sim.c) to a
 * virtual clock and a virtual network, so the same logic runs in both. */
#ifndef BRIGADE_RUNTIME_ENV_H
#define BRIGADE_RUNTIME_ENV_H
#include <stddef.h>
#include <stdint.h>
#include "net/transport.h"
#include "net/wire.h"

typedef struct {
    void *arg;
    double (*now)(void *arg);        /* seconds, monotonic (virtual in the simulator) */
    uint64_t (*wall_ms)(void *arg);  /* milliseconds since the Unix epoch (announcement seqs, ticket expiry) */
} rt_clock_t;

/* The network port of one node.  Messages in are handed to the node by its
 * driver (a transport_msg_t: header, authenticated sender, frames). */
typedef struct {
    void *arg;
    /* Opens a link to addr ("HOST:PORT") of the node whose key is pub.
     * Returns the link (>= 0) or -1 with a reason in err. */
    int (*connect)(void *arg, const char *addr, const uint8_t pub[32], char *err, size_t errlen);
    /* Closes a link; what is queued on it is discarded. */
    void (*disconnect)(void *arg, int link);
    /* Sends [h][f[0]]..[f[nf-1]] on link, or as a reply to the sender of
     * `to` when link < 0 (to then non-NULL).  virt_bytes: bytes the message
     * stands for beyond its frames (modelled tensors in the simulator; 0
     * otherwise).  0 sent or queued, 1 link full (nothing queued), -1 bad link. */
    int (*send)(void *arg, int link, const transport_msg_t *to, const wire_hdr_t *h,
                const void *const *f, const size_t *l, int nf, uint64_t virt_bytes);
    /* Optional (NULL: every node is reachable at its address).  A link back
     * to the sender of `from` (a message that did not come in on a link of
     * ours) over the connection it opened to us: for a peer that is not
     * reachable itself (behind NAT).  `link` is the one adopted from that
     * peer before, or -1; it is returned, brought up to date, when it is
     * still one.  Returns the link or -1. */
    int (*adopt)(void *arg, int link, const transport_msg_t *from);
} rt_port_t;

/* Reads the clock. */
static inline double rt_now(const rt_clock_t *c) { return c->now(c->arg); }
#endif
