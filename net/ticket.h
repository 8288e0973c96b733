/* ticket.h: closed-swarm admission tickets and signed peer announcements.
 *
 * ---- Owner key --------------------------------------------------------------
 * The run owner holds an Ed25519 signing keypair beside its node key:
 *   DIR/owner.sign  the 32-byte Ed25519 seed in hex (64 characters + newline),
 *                   mode 0600, refused when group- or world-accessible
 *   DIR/owner.pub   the 32-byte Ed25519 public key in hex (64 characters +
 *                   newline); this is what every node of a closed swarm is
 *                   given to check tickets with
 *
 * ---- Ticket -----------------------------------------------------------------
 * A ticket says "the owner admits the node whose CurveZMQ key is PEER until
 * EXPIRES".  Binary form, TICKET_LEN bytes, little-endian, field by field:
 *
 *   off size field
 *     0   4  magic "BTK1" (TICKET_MAGIC)
 *     4   1  version (TICKET_VERSION)
 *     5   3  reserved, zero
 *     8  32  owner's Ed25519 public key
 *    40  32  peer's Curve25519 public key (its node key)
 *    72   8  expiry, unix seconds; 0 = never
 *    80  64  Ed25519 signature by the owner of bytes 0..79
 *   144      = TICKET_LEN
 *
 * Text form: the 144 bytes in URL-safe base64 without padding, 192
 * characters from [A-Za-z0-9_-], safe on any command line.
 *
 * ---- Signed announcements ---------------------------------------------------
 * Gossip records (peer_info_t) say where a peer listens and which stage it
 * serves; any node could forge them about another.  An announcement is a
 * detached, fixed-size blob that the described node signs itself, with its
 * own Curve25519 node secret (XEdDSA-style: the secret scalar of the X25519
 * key is used as an Ed25519 scalar; the matching Edwards point sign_pub is
 * published in the blob and maps to the node's Curve25519 public key under
 * the standard birational map, so every verifier can check that the signing
 * key IS the node key: no extra key file, no trust on first use).
 *
 *   off size field
 *     0   4  magic "BAN1" (ANNOUNCE_MAGIC)
 *     4   1  version (ANNOUNCE_VERSION)
 *     5   1  flags: PEER_FLAG_OUTWARD (reachable only outward), PEER_FLAG_RELAY
 *              (relays for outward-only nodes); other bits zero
 *     6   2  stage (int16; -1 = none yet)
 *     8   8  node id (node_id_from_pubkey(pubkey))
 *    16   8  seq: strictly increasing per node (e.g. unix ms at signing)
 *    24  32  pubkey: Curve25519 node key
 *    56  32  sign_pub: Edwards form of pubkey
 *    88  96  addr "HOST:PORT", NUL-padded (PEER_ADDR_MAX bytes, at least one NUL)
 *   184  64  Ed25519 signature of bytes 0..183 under sign_pub
 *   248      = ANNOUNCE_LEN
 *
 * How a node uses it:
 *   1. At start, and every time its address or stage changes, a node calls
 *      announce_sign() on its own record with a larger seq and keeps the
 *      ANNOUNCE_LEN bytes.
 *   2. Wherever it sends peer records (JOIN, WELCOME, PEERS), it sends after
 *      the peers_encode() table a u32 count and, per record, the blob of that
 *      peer as received (wbuf_put_bytes), its own included.  It never signs
 *      for anyone else and forwards others' blobs verbatim.
 *   3. A receiver takes a record's addr and stage only when the blob for that
 *      id passes announce_verify(), announce_matches() the record, and its
 *      seq is >= the seq it holds for that peer (a replayed older blob cannot
 *      move a peer back).  It keeps the blob with the highest seq per peer and
 *      forwards that one.  rate, rtt_ms, version and seen_ms are unsigned
 *      measurements of the table's sender: hints only.
 *   4. A record without a valid blob may be kept as "heard of" (never routed
 *      to) until the peer's own announcement arrives.
 *
 * Threads: all functions are reentrant; libsodium is initialised on first use. */
#ifndef BRIGADE_NET_TICKET_H
#define BRIGADE_NET_TICKET_H
#include <stddef.h>
#include <stdint.h>
#include "net/keys.h"
#include "net/wire.h"

#define OWNER_PUB_HEX_LEN 64      /* hex text of a 32-byte owner public key */

#define TICKET_MAGIC   0x314B5442u /* "BTK1" read as LE u32 */
#define TICKET_VERSION 1
#define TICKET_LEN     144
#define TICKET_TEXT_LEN 192        /* base64url of TICKET_LEN bytes, no padding */

#define ANNOUNCE_MAGIC   0x314E4142u /* "BAN1" read as LE u32 */
#define ANNOUNCE_VERSION 1
#define ANNOUNCE_LEN     248

typedef struct {
    uint8_t pub[32];   /* Ed25519 public key */
    uint8_t sec[64];   /* Ed25519 secret key (libsodium layout: seed || pub) */
} owner_keys_t;

typedef struct {
    uint8_t version;   /* TICKET_VERSION */
    uint8_t owner[32]; /* owner's Ed25519 public key */
    uint8_t peer[32];  /* admitted node's Curve25519 public key */
    uint64_t expires;  /* unix seconds; 0 = never */
    uint8_t sig[64];   /* owner's signature of the encoded bytes 0..79 */
} ticket_t;

typedef struct {
    int16_t stage;             /* announced stage, -1 none */
    uint8_t flags;             /* PEER_FLAG_* of the node (self->flags when signed) */
    uint64_t id;               /* node_id_from_pubkey(pubkey) */
    uint64_t seq;              /* larger = newer */
    uint8_t pubkey[32];        /* Curve25519 node key */
    uint8_t sign_pub[32];      /* its Edwards form (the signature key) */
    char addr[PEER_ADDR_MAX];  /* HOST:PORT, NUL-terminated */
    uint8_t sig[64];           /* signature of the encoded bytes 0..183 */
} announce_t;

/* ---- owner key ---- */

/* A fresh random owner keypair.  Returns 0, or -1 with a reason in err. */
int owner_keys_generate(owner_keys_t *k, char *err, size_t errlen);

/* Writes dir/owner.sign (mode 0600, refused when it already exists: the
 * tickets already issued hang on it) and dir/owner.pub, creating dir (0700)
 * when missing.  Returns 0, or -1 with a reason naming the file. */
int owner_keys_save(const owner_keys_t *k, const char *dir, char *err, size_t errlen);

/* Reads dir/owner.sign (refused when group/world accessible: "... run: chmod
 * 600 FILE"), derives the keypair and checks dir/owner.pub against it when
 * present.  The seed text is wiped after use.  Returns 0, or -1 with a
 * one-line reason; k is wiped on failure. */
int owner_keys_load(owner_keys_t *k, const char *dir, char *err, size_t errlen);

/* Makes dir/owner.sign and dir/owner.pub unless dir/owner.sign exists, in
 * which case it is only checked (loadable, mode 0600).  Returns 1 when it
 * made a new key, 0 when a valid one was there, -1 with a reason. */
int owner_keys_ensure(const char *dir, char *err, size_t errlen);

/* Overwrites k with zeros (sodium_memzero). */
void owner_keys_wipe(owner_keys_t *k);

/* pub as 64 lowercase hex digits into out (OWNER_PUB_HEX_LEN + 1 bytes). */
void owner_pub_to_hex(char out[OWNER_PUB_HEX_LEN + 1], const uint8_t pub[32]);

/* Parses an owner public key: 64 hex digits, or the path of an owner.pub
 * file, or a directory holding owner.pub.  Returns 0, or -1 with a reason. */
int owner_pub_parse(uint8_t pub[32], const char *text, char *err, size_t errlen);

/* ---- tickets ---- */

/* Signs a ticket admitting peer_pub until expires (unix seconds, 0 =
 * never).  Returns 0, or -1 with a reason (libsodium failure). */
int ticket_issue(ticket_t *t, const owner_keys_t *owner, const uint8_t peer_pub[32],
                 uint64_t expires, char *err, size_t errlen);

/* The TICKET_LEN bytes of t. */
void ticket_encode(uint8_t out[TICKET_LEN], const ticket_t *t);

/* Parses TICKET_LEN bytes (len must be exactly that): magic, version and
 * reserved bytes are checked, NOT the signature (see ticket_verify).
 * Returns 0, or -1 with a reason. */
int ticket_decode(ticket_t *t, const uint8_t *buf, size_t len, char *err, size_t errlen);

/* The text form of t into out (TICKET_TEXT_LEN + 1 bytes, NUL-terminated). */
void ticket_encode_text(char out[TICKET_TEXT_LEN + 1], const ticket_t *t);

/* Parses the text form (surrounding white space allowed).  Returns 0, or
 * -1 with a reason ("not a ticket: ..."). */
int ticket_decode_text(ticket_t *t, const char *text, char *err, size_t errlen);

/* Checks that t was signed by owner_pub, admits peer_pub, and has not
 * expired at now (unix seconds; a ticket is valid while now < expires).
 * Returns 0, or -1 with one of the reasons "ticket from another owner",
 * "bad ticket signature", "ticket for another peer key", "ticket expired". */
int ticket_verify(const ticket_t *t, const uint8_t owner_pub[32], const uint8_t peer_pub[32],
                  uint64_t now, char *err, size_t errlen);

/* ---- signed announcements ---- */

/* Signs self's id, pubkey, addr and stage with seq under the node key kp
 * (kp->pub must equal self->pubkey, self->id its id).  Returns 0, or -1 with
 * a reason (mismatched key, address too long, libsodium failure). */
int announce_sign(announce_t *a, const peer_info_t *self, uint64_t seq,
                  const keypair_t *kp, char *err, size_t errlen);

/* The ANNOUNCE_LEN bytes of a. */
void announce_encode(uint8_t out[ANNOUNCE_LEN], const announce_t *a);

/* Decodes buf (exactly ANNOUNCE_LEN bytes) and checks everything: magic,
 * version, reserved bytes, stage >= -1, a NUL-terminated peer_addr_valid address,
 * id == node_id_from_pubkey(pubkey), sign_pub is the Edwards form of pubkey,
 * and the signature.  Returns 0 with a filled, or -1 with a reason. */
int announce_verify(announce_t *a, const uint8_t *buf, size_t len, char *err, size_t errlen);

/* 1 when the verified announcement a vouches for record p: same id, pubkey,
 * addr and stage; else 0. */
int announce_matches(const announce_t *a, const peer_info_t *p);

/* ---- signed completion ----
 * A last-stage node that completes a run signs "run R completed with C
 * microbatches" with its node key; every node relays the proof, so a node
 * that missed the last stage's DONE still learns it from anyone.
 *
 *   offset size field
 *        0    4 magic DONE_MAGIC ("BDN1")
 *        4    8 run id
 *       12    8 completed (microbatches at the last stage)
 *       20    8 signer's node id
 *       28   32 signer's Curve25519 node key
 *       60   32 its Edwards form (the signature key)
 *       92   64 Ed25519 signature of bytes 0..91
 *      156      = DONE_LEN */
#define DONE_MAGIC 0x314E4442u   /* "BDN1" read as LE u32 */
#define DONE_LEN   156

/* Signs the completion of run with completed microbatches under kp.  0, or -1 with a reason. */
int done_sign(uint8_t out[DONE_LEN], uint64_t run, uint64_t completed, const keypair_t *kp, char *err, size_t errlen);
/* Checks a completion proof for run: 0 with the signer's id in *signer, or -1 with a reason. */
int done_verify(const uint8_t *buf, size_t len, uint64_t run, uint64_t *signer, char *err, size_t errlen);

#endif
