/* linkemu.h: the model behind the test-only link emulation (--emu-* options).
 *
 * Uplink: a node's links (its TCP connections) share ONE uplink of the
 * emulated rate.  Each link sends its messages in order; the links that
 * have something to send share the rate equally (processor sharing: the
 * fluid limit of TCP flows taking turns, packet by packet, at one shaped
 * bottleneck), so two busy links each get half the rate, and a small
 * message on an idle link is not held behind another link's backlog.  A
 * message leaves when its last byte is serialized; propagation latency and
 * jitter are added after.  The rate counts what a 1500-byte-MTU Ethernet
 * path carries: each message costs its ZeroMQ/CurveZMQ framing and the
 * TCP/IP/Ethernet headers of its segments (linkemu_wire_bytes), and what a
 * node receives costs its uplink the TCP acknowledgements
 * (linkemu_ack_bytes).
 *
 * Downlink: one serialization queue in arrival order (linkemu_serialize).
 *
 * Pure: the caller passes the times (monotonic µs) and keeps the queues, so
 * the model is tested without a clock. */
#ifndef BRIGADE_NET_LINKEMU_H
#define BRIGADE_NET_LINKEMU_H
#include <stddef.h>
#include <stdint.h>

#define LINKEMU_MSS 1448          /* TCP payload of a 1500-byte frame (IPv4, TCP timestamps) */
#define LINKEMU_SEG_HDR 66        /* Ethernet 14 + IPv4 20 + TCP 20 + timestamps 12 */
#define LINKEMU_FRAME_HDR 42      /* per ZeroMQ frame: ZMTP header, CurveZMQ MESSAGE command, nonce, MAC */

/* Bytes on the wire of one message of `bytes` in `frames` ZeroMQ frames. */
double linkemu_wire_bytes(size_t bytes, int frames);

/* Bytes the receiver's uplink spends acknowledging `wire` bytes (one
 * 66-byte ACK every two segments). */
double linkemu_ack_bytes(double wire);

/* Serves the flows of a shared uplink of `mbit` Mbit/s from from_us on:
 * every flow with left[i] > 0 bytes gets an equal share of the rate, until
 * to_us or until the first of them has sent all its bytes, whichever is
 * first.  Subtracts what each flow sent from left[] (a flow that finished
 * gets exactly 0) and returns the time reached (<= to_us).  With no active
 * flow, or mbit <= 0 (unlimited: every flow finishes at from_us), returns
 * to_us or from_us accordingly. */
int64_t linkemu_share(double mbit, double *left, int n, int64_t from_us, int64_t to_us);

/* When the first active flow would finish if nothing else arrived (from_us
 * for mbit <= 0), or INT64_MAX with no active flow. */
int64_t linkemu_next_finish(double mbit, const double *left, int n, int64_t from_us);

/* A FIFO serialization queue (the emulated downlink). */
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
int64_t linkemu_serialize(linkemu_queue_t *q, int64_t now_us, double bytes);

#endif
