/* relay.h: the sealed envelope of a message that travels through a relay.
 *
 * Two nodes that are both reachable only outward (behind NAT) cannot open a
 * link to each other; a reachable node that both have links to forwards
 * their messages.  The relay must not read or alter them, so the sender
 * seals the whole message (its header and frames) end to end for the
 * receiver with libsodium's crypto_box (X25519 of the two node keys,
 * XSalsa20-Poly1305): the relay sees the two ids, the size and the timing,
 * nothing else, and a frame it altered does not open.
 *
 * Envelope (one frame of a WIRE_RELAY message), little-endian:
 *
 *   off  size  field
 *     0    24  nonce (random)
 *    24     *  crypto_box_easy of the plaintext below (16-byte tag first)
 *
 * Plaintext:
 *     0     1  version RELAY_VERSION
 *     1     1  nframes (0..TRANSPORT_MAX_FRAMES)
 *     2     8  seq: the sender's counter for this receiver (replays are refused
 *              while the receiver runs: it keeps the highest in memory only)
 *    10    42  the inner header (wire_hdr_encode; its sender is the sealer)
 *    52     *  nframes x (u32 length, bytes)
 *
 * Everything that comes off the network is hostile: relay_parse() checks
 * every length against the input before touching it. */
#ifndef BRIGADE_NET_RELAY_H
#define BRIGADE_NET_RELAY_H
#include <stddef.h>
#include <stdint.h>
#include "net/transport.h"
#include "net/wire.h"

#define RELAY_VERSION 1
#define RELAY_NONCE 24
#define RELAY_TAG 16
#define RELAY_PLAIN_FIXED (1 + 1 + 8 + WIRE_HDR_LEN)
#define RELAY_OVERHEAD (RELAY_NONCE + RELAY_TAG + RELAY_PLAIN_FIXED)  /* + 4 per frame */

/* The shared key of this node (secret sec) and a peer (public pub), for
 * both directions.  0, or -1 (a bad public key). */
int relay_key(uint8_t key[32], const uint8_t pub[32], const uint8_t sec[32]);

/* Bytes of the envelope of a message with these frames. */
size_t relay_sealed_len(const size_t *lens, int nframes);

/* Seals [h][frames] (h already carries magic, version and sender) with
 * counter seq into out (room for relay_sealed_len bytes).  Returns the
 * length, or -1 (nframes out of range, cap too small, out of memory). */
long relay_seal(uint8_t *out, size_t cap, const uint8_t key[32], uint64_t seq, const wire_hdr_t *h,
                const void *const *frames, const size_t *lens, int nframes);

/* A message opened from an envelope: frames point into the plaintext. */
typedef struct {
    uint64_t seq;                              /* the sender's counter */
    wire_hdr_t hdr;                            /* the inner header (decoded and checked) */
    int nframes;
    const uint8_t *frame[TRANSPORT_MAX_FRAMES];
    size_t len[TRANSPORT_MAX_FRAMES];
} relay_msg_t;

/* Parses a plaintext of len bytes.  0, or -1 with a reason in err. */
int relay_parse(relay_msg_t *out, const uint8_t *plain, size_t len, char *err, size_t errlen);

/* Opens the envelope in (len bytes) into plain (room for len bytes) and
 * parses it.  0, or -1 with a reason in err: too short, does not open
 * (altered, or not sealed by the holder of that key for us), malformed. */
int relay_open(relay_msg_t *out, uint8_t *plain, const uint8_t *in, size_t len, const uint8_t key[32],
               char *err, size_t errlen);
#endif
