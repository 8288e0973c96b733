/* proto.h: the node protocol's message bodies and flags: what follows the
 * header (net/wire.h: the header, the message types wire_type_t, the
 * bounded writer/reader and the peer records) in each message, with the
 * encoder and the decoder of every structured body.  Little-endian
 * throughout; "str" is a u32 length then the bytes (no NUL), "bytes" a u32
 * length then the bytes.  A decoder never reads past its input and returns
 * -1 on any malformed body; what it returns points into the input.
 *
 * Header flags (wire_hdr_t.flags) by type:
 *   ACT     ACT_FLAG_EVAL, ACT_FLAG_AHEAD, ACT_FLAG_FINAL, ACT_FLAG_LAST; bits 8..15 the issue attempt
 *   GRAD    GRAD_FLAG_DUP; bits 8..15 the issue attempt
 *   JOIN    JOIN_FLAG_INTRO, JOIN_FLAG_OUTWARD
 *   PING    PING_FLAG_PROBE (and its PONG), PING_FLAG_DRAIN (and its PONG)
 *   STATE, STATE_REQ  STATE_FLAG_BACKUP, STATE_FLAG_REPLY
 *   RELAY   RELAY_FLAG_FWD        DIAL  DIAL_FLAG_FWD
 *   any     PLAN_FLAG_KNOWN, PLAN_FLAG_LATE, PLAN_FLAG_FRONT (bits 16-18: the run's split)
 *
 * Bodies (frames after the header):
 *   JOIN        frame 0: proto_join_t (below)
 *   WELCOME     frame 0: the run config (proto_put_runcfg); frame 1:
 *               proto_welcome_t; frame 2: a table (proto_put_table)
 *   PEERS       frame 0: a table, then proto_peers_tail_t
 *   PING, PONG  none (hdr.mb: the nonce)
 *   ACT, GRAD, AVG  frame 0: a tensor frame (compress/frame.h), or in the
 *               simulator a modelled one (proto_put_modelled); ACT frame 1:
 *               the targets (the last stage's): proto_put_targets
 *   STATE_REQ   none (hdr.stage: the stage wanted)
 *   STATE       frame 0: proto_state_pre_t; frame 1: the chunk's bytes
 *               (hdr.mb: the chunk's index)
 *   BYE         frame 0 (optional): a reason, raw text
 *   DONE        frame 0 (optional): the proof (DONE_LEN, net/ticket.h)
 *   STATUS_REQ  frame 0 (closed swarm): the asker's ticket (TICKET_LEN)
 *   STATUS      frame 0: proto_status_t, a table, then the links
 *               (proto_put_links)
 *   DIAL        none (hdr.mb: the peer to link to)
 *   RELAY       frame 0: a sealed envelope (net/relay.h) */
#ifndef BRIGADE_RUNTIME_PROTO_H
#define BRIGADE_RUNTIME_PROTO_H
#include <stddef.h>
#include <stdint.h>
#include "net/keys.h"
#include "net/ticket.h"
#include "net/wire.h"
#include "node/runtime/options.h"

#define ACT_FLAG_EVAL 0x1u     /* ACT: an evaluation microbatch: forward only */
#define ACT_FLAG_AHEAD 0x2u    /* ACT: the data stage's update under way does not wait for it (served after the others) */
#define ACT_FLAG_FINAL 0x4u    /* ACT with ACT_FLAG_EVAL: the run's final evaluation (the last stage ends after it) */
#define ACT_FLAG_LAST 0x8u     /* ACT: among the last `stages` its data stage's update under way waits for (served first) */
#define GRAD_FLAG_DUP 0x2u     /* GRAD without tensor: a later stage had already applied this microbatch */
#define MB_ATTEMPT_SHIFT 8     /* ACT/GRAD flags bits 8..15: the issue attempt of the microbatch */
#define MB_ATTEMPT(flags) (((flags) >> MB_ATTEMPT_SHIFT) & 0xffu)
#define JOIN_FLAG_INTRO 0x1u   /* JOIN: an introduction (ticket) to a peer, no WELCOME wanted */
#define JOIN_FLAG_OUTWARD 0x2u /* JOIN: the sender is reachable only over links it opens (no probe; send back over them) */
#define PING_FLAG_PROBE 0x1u   /* PING/PONG: the bootstrap's reachability probe of a joiner's address */
#define PING_FLAG_DRAIN 0x2u   /* PING/PONG: sent right behind a tensor, to time its bytes leaving (codecpick.h) */
#define PLAN_FLAG_KNOWN 0x10000u  /* any message (flags bit 16): the sender knows the run's split (--split auto:
                                    chosen by its data stage before the first update) */
#define PLAN_FLAG_LATE 0x20000u   /* with PLAN_FLAG_KNOWN (bit 17): that split is late, */
#define PLAN_FLAG_FRONT 0x40000u  /* (bit 18) or front; with neither, even */
#define RELAY_FLAG_FWD 0x1u     /* RELAY: from the relay to the receiver (hdr.mb: the sealer); without it,
                                   from the sealer to the relay (hdr.mb: the receiver) */
#define DIAL_FLAG_FWD 0x1u     /* DIAL: forwarded to the outward-only node itself (hdr.mb: who wants a link) */
#define STATE_CHUNK (1u << 20) /* bytes per STATE message */
#define STATE_FLAG_BACKUP 0x1u /* STATE/STATE_REQ: a backup snapshot (held for a stage by another node) */
#define STATE_FLAG_REPLY 0x2u  /* STATE: an answer to a STATE_REQ (not a backup push) */

/* The header flags that say split `plan` (SPLIT_EVEN, _LATE or _FRONT; -1
 * not known: none), and the split a message's flags say (-1: not said). */
static inline uint32_t plan_flags(int plan)
{
    return plan < 0 ? 0 : PLAN_FLAG_KNOWN | (plan == SPLIT_LATE ? PLAN_FLAG_LATE : plan == SPLIT_FRONT ? PLAN_FLAG_FRONT : 0);
}
static inline int plan_of_flags(uint32_t flags)
{
    return !(flags & PLAN_FLAG_KNOWN) ? -1 : (flags & PLAN_FLAG_LATE) ? SPLIT_LATE : (flags & PLAN_FLAG_FRONT) ? SPLIT_FRONT : SPLIT_EVEN;
}

/* ---- JOIN ----------------------------------------------------------------
 *   offset size field
 *        0  4+n adv        str: HOST:PORT the sender listens at (< PEER_ADDR_MAX)
 *        .    4 want       i32: the stage wanted, -1 the bootstrap chooses
 *        .  4+t ticket     bytes: the admission ticket (t = TICKET_LEN), or t = 0
 *        .    8 hint_run   u64, optional (only with want >= 0): the run of the
 *                          checkpoint whose stage `want` is (another run's
 *                          stage is no claim on this one) */
typedef struct {
    char adv[PEER_ADDR_MAX];
    int32_t want;
    const uint8_t *ticket;      /* NULL (tlen 0) when none */
    size_t tlen;
    int has_hint;               /* hint_run was said */
    uint64_t hint_run;
} proto_join_t;

/* Writes a JOIN body; ticket NULL: none; hint_run 0: none (and none when want < 0). */
void proto_put_join(wbuf_t *w, const char *adv, int want, const uint8_t *ticket, uint64_t hint_run);
/* Reads a JOIN body.  0, or -1 when malformed (the address is not checked here). */
int proto_get_join(proto_join_t *j, const uint8_t *buf, size_t len);

/* ---- WELCOME frame 1: the joiner's assignment ------------------------------
 *   offset size field
 *        0    4 stage      u32: the stage it serves
 *        4    4 shard      u32: its data shard
 *        8    1 done       u8: 1 when the run has already finished
 *        9    1 reachable  u8, optional (older bootstraps end before it; then 1):
 *                          0 when the probe of its address failed */
typedef struct {
    int stage, shard;
    int done, reachable;
} proto_welcome_t;

void proto_put_welcome(wbuf_t *w, const proto_welcome_t *a);
/* 0, or -1 when truncated (values are not range-checked here). */
int proto_get_welcome(proto_welcome_t *a, const uint8_t *buf, size_t len);

/* ---- the run config (WELCOME frame 0) --------------------------------------
 *   offset size field
 *        0  4+n model name      str
 *        .   28 kind V maxT C L NH D   7 x i32
 *        .  4+n data            str
 *        .   32 stages steps batch micro warmup schedule stash max_inflight  8 x i32
 *        .   12 lr wd clip      3 x f32
 *        .  4+n codec           str
 *        .  4+n grad_codec      str
 *        .    8 seed            u64
 *        .    8 eval_every eval_batches  2 x u32
 *        .    1 closed          u8 (0, 1)
 *        .   32 owner_pub       raw
 *        .    5 staleness max_delay optim_kind split max_delay_given  5 x u8
 *        .    1 recompute       u8 (RECOMPUTE_*)
 *   then, only in a run of a model with a bottleneck (--bottleneck S, S > 0):
 *        .    4 bottleneck      u32: S (its cuts are those of `stages`)
 *   then, only in a run started from a checkpoint (--init):
 *        .    8 init_size       u64 (> 0)
 *        .   32 init_hash       raw (BLAKE2b-256 of the file) */
/* Writes the run config (everything opts_run_text covers, and --recompute,
 * which changes no result and so not the run id). */
void proto_put_runcfg(wbuf_t *w, const opts_t *o);
/* Reads a run config into o, keeping o's local options (listen, join,
 * stage, files, threads, emulation).  Returns 0, or -1 with a reason when
 * the bytes are malformed ("run config: truncated or malformed"), or "run
 * config: " and opts_check_run's reason when a value is out of range; o is
 * unchanged on failure. */
int proto_get_runcfg(rbuf_t *r, opts_t *o, char *err, size_t errlen);

/* ---- tables (WELCOME, PEERS, STATUS) ---------------------------------------
 *   peers_encode's records (net/wire.h: u32 count k, then k records), then
 *   u32 k again and, per record in the same order, bytes: its signed
 *   announcement (ANNOUNCE_LEN, net/ticket.h), or none (length 0). */
/* Writes k records and their announcements (blobs[i] NULL: none). */
void proto_put_table(wbuf_t *w, const peer_info_t *recs, const uint8_t *const *blobs, int k);
/* The record count a table at buf says it holds (unchecked; 0 when truncated). */
uint32_t proto_table_count(const uint8_t *buf, size_t len);
/* Reads the announcement part after k records (peers_decode read those):
 * blobs[i] and lens[i] (both may be NULL: skipped).  0, or -1 when the
 * count is not k or it is truncated. */
int proto_get_announces(rbuf_t *r, int k, const uint8_t **blobs, size_t *lens);

/* ---- PEERS: after the table ------------------------------------------------
 *   offset size field
 *        0    8 completed     u64: the sender's completed microbatches
 *        8    4 loss          f32: its latest loss (NaN unknown)
 *       12    1 done          u8: 1 when it completed the run (not interrupted)
 *       13    4 np            u32: progress records (at most PROTO_PROGRESS_MAX)
 *       17 16np id completed  u64 + u64 each: last-stage peers' progress
 *        .    8 progress      u64, optional (older senders end before it): the
 *                             run's progress as the sender counts it */
#define PROTO_PROGRESS_MAX 256
typedef struct {
    uint64_t completed;
    float loss;
    int done;
    uint32_t np;
    uint64_t id[PROTO_PROGRESS_MAX], done_by[PROTO_PROGRESS_MAX];
    int said;                   /* progress was said */
    uint64_t progress;
} proto_peers_tail_t;

void proto_put_peers_tail(wbuf_t *w, const proto_peers_tail_t *t);
/* 0, or -1 when truncated or np is above PROTO_PROGRESS_MAX. */
int proto_get_peers_tail(rbuf_t *r, proto_peers_tail_t *t);

/* ---- STATE frame 0: the chunk prefix ---------------------------------------
 *   offset size field
 *        0    8 total      u64: the snapshot's bytes
 *        8    4 checksum   u32: frame_checksum of all of them (0 modelled)
 *       12    8 version    u64: the snapshot's weight version
 *       20    4 nchunks    u32: (total + STATE_CHUNK - 1) / STATE_CHUNK
 *       24              = PROTO_STATE_PRE_LEN */
#define PROTO_STATE_PRE_LEN 24
typedef struct {
    uint64_t total;
    uint32_t checksum;
    int64_t version;
    uint32_t nchunks;
} proto_state_pre_t;

/* Writes the prefix into out; nchunks is computed from total. */
void proto_put_state_pre(uint8_t out[PROTO_STATE_PRE_LEN], uint64_t total, uint32_t checksum, int64_t version);
/* 0, or -1 when truncated (values are not range-checked here). */
int proto_get_state_pre(proto_state_pre_t *p, const uint8_t *buf, size_t len);

/* ---- STATUS ----------------------------------------------------------------
 *   offset size field
 *        0    4 nstages    u32
 *        4    8 target     u64: the run's microbatches (steps x micro)
 *       12    8 completed  u64: completed, swarm-wide
 *       20    4 loss       f32: the last stage's latest loss (NaN unknown)
 *       24  4+n model      str: the model's name
 *        .      a table (all live records, the answering node's first)
 *        .    4 nlinks     u32, optional (older nodes end before it)
 *        .    n links      u8 each, per record: STATUS_LINK_* */
#define STATUS_LINK_SELF 0      /* STATUS: the answering node itself */
#define STATUS_LINK_DIRECT 1    /* STATUS: it has a link to that peer's address */
#define STATUS_LINK_REVERSE 2   /* STATUS: it sends over the link that peer opened to it (the peer is behind NAT) */
#define STATUS_LINK_NONE 3      /* STATUS: no link yet (opened on first use) */
#define STATUS_LINK_RELAY 4     /* STATUS: through a relay (both are reachable only outward) */
#define STATUS_LINK_UNKNOWN 5   /* (decoded) not said: an older node */
typedef struct {
    uint32_t nstages;
    uint64_t target, completed;
    float loss;
    char model[64];
} proto_status_t;

void proto_put_status(wbuf_t *w, const proto_status_t *s);
/* 0, or -1 when truncated (nstages is not range-checked here). */
int proto_get_status(rbuf_t *r, proto_status_t *s);
/* Writes the links part: a u32 count n and links[0..n). */
void proto_put_links(wbuf_t *w, const uint8_t *links, uint32_t n);
/* Reads what follows a STATUS table of k records, leniently (a node prints
 * what it can): blobs[i]/lens[i] each record's announcement (NULL/0 when
 * absent), links[i] STATUS_LINK_* or STATUS_LINK_UNKNOWN. */
void proto_get_status_rest(rbuf_t *r, int k, const uint8_t **blobs, size_t *lens, uint8_t *links);

/* ---- ACT frame 1: the targets ---------------------------------------------
 *   offset size field
 *        0  n*w targets    n unsigned integers of w bytes each, little-endian:
 *                          target i at offset i*w.  w = proto_target_width(V)
 *                          of the run's vocabulary V: 1 when V <= 256 (one
 *                          byte each), 2 when V <= 65536, else 4.  n: the
 *                          microbatch's batch x context (batch for an mlp) */
/* The bytes per target of a run of vocabulary V (1, 2 or 4). */
int proto_target_width(int V);
/* Writes targets t[0..n) (each in 0 .. 2^(8w)-1) into out, n*w bytes. */
void proto_put_targets(uint8_t *out, const int *t, size_t n, int w);
/* Reads n targets of w bytes from buf (len bytes) into t[0..n) (t NULL:
 * checks only).  0, or -1 when len is not n*w or a target is not below V
 * (t then partly written). */
int proto_get_targets(int *t, const uint8_t *buf, size_t len, size_t n, int w, int V);

/* ---- a modelled tensor (simulator) -----------------------------------------
 *   offset size field
 *        0    8 n          u64: the values it stands for */
#define PROTO_MODELLED_LEN 8
void proto_put_modelled(uint8_t out[PROTO_MODELLED_LEN], uint64_t n);
/* 0 with *n, or -1 when truncated. */
int proto_get_modelled(uint64_t *n, const uint8_t *buf, size_t len);
#endif
