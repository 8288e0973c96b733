/* linkemu.h: the clock of the test-only link emulation (--emu-* options).
 *
 * A node's uplink is ONE serialization queue: every message the node sends,
 * on any of its links or as a reply, is serialized after the previous one
 * has left, at the emulated rate, the way one home uplink shaped by its
 * router carries all of a node's connections.  Propagation latency and
 * jitter are added after serialization, per link.  The downlink, when
 * emulated, is a second such queue in front of delivery.
 *
 * Pure: the caller passes the time (monotonic µs), so the model is tested
 * without a clock. */
#ifndef BRIGADE_NET_LINKEMU_H
#define BRIGADE_NET_LINKEMU_H
#include <stddef.h>
#include <stdint.h>

typedef struct {
    double mbit;              /* rate in Mbit/s; <= 0: unlimited */
    int64_t busy_until_us;    /* when the last queued message has been serialized */
} linkemu_queue_t;

/* A queue at rate mbit (<= 0: unlimited), idle. */
linkemu_queue_t linkemu_queue(double mbit);

/* Queues a message of `bytes` arriving at now_us: its serialization starts
 * when the queue is free (now_us or when the previous message has left,
 * whichever is later) and takes bytes x 8 / mbit µs.  Returns the time its
 * last bit has left (now_us itself when the rate is unlimited). */
int64_t linkemu_serialize(linkemu_queue_t *q, int64_t now_us, size_t bytes);

#endif
