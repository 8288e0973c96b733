/* wire.h: the message header, a bounded byte writer/reader and the peer
 * record codec used by gossip.
 *
 * Every message is a ZeroMQ multipart message whose first frame is the fixed
 * header below, encoded field by field in little-endian:
 *
 *   offset size field
 *        0    4 magic          "BRGD"
 *        4    2 version        WIRE_VERSION
 *        6    2 type           wire_type_t
 *        8    8 run            run id (hash of the run config)
 *       16    8 sender         sender's node id (node_id_from_pubkey)
 *       24    8 mb             microbatch id
 *       32    2 stage          pipeline stage, WIRE_STAGE_NONE if none
 *       34    4 wversion       weight version
 *       38    4 flags          type-specific bits
 *       42                     = WIRE_HDR_LEN
 *
 * Anything read from the network goes through wire_hdr_decode() and rbuf_t,
 * which never read past the end of their input. */
#ifndef BRIGADE_NET_WIRE_H
#define BRIGADE_NET_WIRE_H
#include <stddef.h>
#include <stdint.h>

#define WIRE_MAGIC      0x44475242u  /* bytes 'B','R','G','D' read as LE u32 */
#define WIRE_VERSION    1
#define WIRE_HDR_LEN    42
#define WIRE_STAGE_NONE 0xFFFFu      /* header stage of a node without a stage */
#define WIRE_FRAME_BYTES_MAX (64u << 20) /* the largest frame of a message a node takes (the transport's limit):
                                           * a larger one never arrives (its connection is reset) */

typedef enum {
    WIRE_JOIN = 1,     /* joiner -> member: please admit me */
    WIRE_WELCOME,      /* member -> joiner: run config + peer table */
    WIRE_PEERS,        /* gossip: peer table */
    WIRE_PING,         /* heartbeat and RTT probe */
    WIRE_PONG,         /* answer to PING */
    WIRE_ACT,          /* forward activations */
    WIRE_GRAD,         /* backward gradients */
    WIRE_STATE_REQ,    /* joiner -> stage peer: send me your state */
    WIRE_STATE,        /* stage state, chunked */
    WIRE_AVG,          /* within-stage weight averaging */
    WIRE_BYE,          /* clean exit */
    WIRE_DONE,         /* the run finished */
    WIRE_STATUS_REQ,   /* `brigade status` asks for the swarm map */
    WIRE_STATUS,       /* the swarm map */
    WIRE_DIAL,         /* please open a link to a peer (to an outward-only node, through one it has a link to) */
    WIRE_RELAY,        /* a sealed message between two outward-only nodes, through a relay (net/relay.h) */
    WIRE_TYPE_END      /* one past the last valid type */
} wire_type_t;

typedef struct {
    uint32_t magic;     /* WIRE_MAGIC */
    uint16_t version;   /* WIRE_VERSION */
    uint16_t type;      /* wire_type_t */
    uint64_t run;       /* run id */
    uint64_t sender;    /* sender's node id */
    uint64_t mb;        /* microbatch id (or chunk index, type-specific) */
    uint16_t stage;     /* stage, WIRE_STAGE_NONE if none */
    uint32_t wversion;  /* weight version */
    uint32_t flags;     /* type-specific bits */
} wire_hdr_t;

/* Fills h with magic, version and the given type; every other field 0 and
 * stage WIRE_STAGE_NONE. */
void wire_hdr_init(wire_hdr_t *h, wire_type_t type);

/* Writes exactly WIRE_HDR_LEN bytes to out.  h->magic and h->version are
 * written as they are (set them with wire_hdr_init). */
void wire_hdr_encode(uint8_t *out, const wire_hdr_t *h);

/* Decodes a header frame of len bytes.  Returns 0, or -1 with a one-line
 * reason in err when the length is not WIRE_HDR_LEN, the magic or protocol
 * version is wrong, or the type is unknown.  h is unspecified on failure. */
int wire_hdr_decode(wire_hdr_t *h, const uint8_t *buf, size_t len,
                    char *err, size_t errlen);

/* "JOIN", "ACT", ... ; "?" for an unknown type. */
const char *wire_type_name(int type);

/* Little-endian fixed-width fields at p (the byte order of every format
 * of net/): le_put* write 2, 4 or 8 bytes, le_get* read them. */
static inline void le_put16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); }
static inline void le_put32(uint8_t *p, uint32_t v) { for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i)); }
static inline void le_put64(uint8_t *p, uint64_t v) { for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i)); }
static inline uint16_t le_get16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static inline uint32_t le_get32(const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}
static inline uint64_t le_get64(const uint8_t *p) { return (uint64_t)le_get32(p) | ((uint64_t)le_get32(p + 4) << 32); }

/* Formats a one-line reason into err (errlen bytes, cut to fit); does
 * nothing when err is NULL or errlen is 0.  The one error writer of net/. */
void net_errf(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* ---- bounded writer ------------------------------------------------------
 * Grows a heap buffer up to max bytes, or fills a caller's fixed buffer.
 * Writing past the limit sets a sticky error and writes nothing more: check
 * wbuf_error() once at the end. */
typedef struct {
    uint8_t *data;   /* bytes written so far */
    size_t len;      /* bytes used */
    size_t cap;      /* bytes allocated */
    size_t max;      /* hard limit on len */
    int owned;       /* data is ours to grow and free */
    int err;         /* sticky: a write did not fit */
} wbuf_t;

/* An empty heap-backed writer that may grow up to max bytes. */
void wbuf_init(wbuf_t *w, size_t max);
/* Grows a heap-backed writer's buffer to hold at least n bytes in all (at
 * most its max) in one step, for a writer about to write that much (growth
 * by doubling from 256 bytes copies it several times).  Nothing is written;
 * no error when it cannot (the writes grow it as usual). */
void wbuf_reserve(wbuf_t *w, size_t n);
/* A writer over the caller's buffer buf of cap bytes (never reallocated). */
void wbuf_init_fixed(wbuf_t *w, uint8_t *buf, size_t cap);
/* Frees a heap-backed writer's buffer; the writer is empty afterwards. */
void wbuf_free(wbuf_t *w);
/* Nonzero when some write did not fit. */
int wbuf_error(const wbuf_t *w);

void wbuf_put_u8(wbuf_t *w, uint8_t v);
void wbuf_put_u16(wbuf_t *w, uint16_t v);
void wbuf_put_u32(wbuf_t *w, uint32_t v);
void wbuf_put_u64(wbuf_t *w, uint64_t v);
void wbuf_put_f32(wbuf_t *w, float v);
void wbuf_put_f64(wbuf_t *w, double v);
/* n raw bytes, no length prefix. */
void wbuf_put_raw(wbuf_t *w, const void *p, size_t n);
/* u32 length then n bytes. */
void wbuf_put_bytes(wbuf_t *w, const void *p, size_t n);
/* u32 length then the bytes of the NUL-terminated s (without the NUL). */
void wbuf_put_str(wbuf_t *w, const char *s);

/* ---- bounded reader ------------------------------------------------------
 * Reads from a caller's buffer; never reads past its end.  A read that does
 * not fit (or a length above its bound) sets a sticky error, returns zeros
 * and makes every later read fail too: check rbuf_error() once at the end. */
typedef struct {
    const uint8_t *data;  /* input */
    size_t len;           /* input bytes */
    size_t pos;           /* next byte to read */
    int err;              /* sticky: a read failed */
} rbuf_t;

void rbuf_init(rbuf_t *r, const void *data, size_t len);
int rbuf_error(const rbuf_t *r);
/* Bytes left to read (0 after an error). */
size_t rbuf_remaining(const rbuf_t *r);

uint8_t rbuf_get_u8(rbuf_t *r);
uint16_t rbuf_get_u16(rbuf_t *r);
uint32_t rbuf_get_u32(rbuf_t *r);
uint64_t rbuf_get_u64(rbuf_t *r);
float rbuf_get_f32(rbuf_t *r);
double rbuf_get_f64(rbuf_t *r);
/* n raw bytes into out (zeroed on error). */
void rbuf_get_raw(rbuf_t *r, void *out, size_t n);
/* A u32-length-prefixed blob of at most max bytes: returns a pointer into the
 * input and its length in *n, or NULL (and *n = 0) on error. */
const uint8_t *rbuf_get_bytes(rbuf_t *r, size_t max, size_t *n);
/* A u32-length-prefixed string into out (outlen bytes incl. the NUL): refused
 * when it does not fit or contains a NUL byte.  out is "" on error. */
void rbuf_get_str(rbuf_t *r, char *out, size_t outlen);

/* ---- peer records (gossip) --------------------------------------------- */
#define PEER_ADDR_MAX 96   /* "HOST:PORT" incl. NUL */
#define PEERS_MAX     4096 /* most records in one PEERS/WELCOME message */

/* 1 when s is a peer's listening address: HOST:PORT where HOST is a
 * hostname (letters, digits, '-', '.', '_') or an IP literal (IPv6 in
 * brackets), not the wildcard "*", and PORT is 1..65535, nothing else; the
 * whole of it shorter than PEER_ADDR_MAX.  Else 0.  An address that passes
 * holds no quote, backslash, space or control byte. */
int peer_addr_valid(const char *s);

typedef struct {
    /* (the small fields first: a peer table's scans read them, not the address and key) */
    uint64_t id;                 /* node_id_from_pubkey(pubkey) */
    int16_t stage;               /* its stage, -1 if none yet */
    uint8_t flags;               /* PEER_FLAG_*: not in peers_encode; carried by the peer's signed announcement */
    float rate;                  /* measured microbatches per second */
    float rtt_ms;                /* RTT as seen by the sender of the table */
    uint32_t version;            /* its weight version */
    uint64_t seen_ms;            /* ms since the sender last heard from it */
    char addr[PEER_ADDR_MAX];    /* HOST:PORT where it listens */
    uint8_t pubkey[32];          /* CurveZMQ public key */
} peer_info_t;

#define PEER_FLAG_OUTWARD 0x1u   /* reachable only over the connections it opens (behind NAT, --no-listen) */
#define PEER_FLAG_RELAY   0x2u   /* reachable, and relays sealed traffic between outward-only nodes (--relay on) */
#define PEER_FLAGS_KNOWN  (PEER_FLAG_OUTWARD | PEER_FLAG_RELAY)

/* Writes a u32 count and n records. */
void peers_encode(wbuf_t *w, const peer_info_t *p, int n);

/* Reads records written by peers_encode into out (room for max).  Returns 0
 * with *n records, or -1 with a reason in err (when given) and *n = 0: count
 * above max, truncated input, an address that is not peer_addr_valid, a stage
 * below -1, a NaN/Inf/negative rate or RTT, or an id that is not
 * node_id_from_pubkey(pubkey). */
int peers_decode(rbuf_t *r, peer_info_t *out, int max, int *n,
                 char *err, size_t errlen);

#endif
