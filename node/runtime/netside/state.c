/* state.c: stage state transfers: downloads for the compute side, backups
 * held for other stages, and serving both. */
#include "node/runtime/netside/internal.h"

#define STATE_REQ_EVERY_S 2.0   /* at most one state download per peer this often */
#define FETCH_RESEND_S 3.0      /* a state download none of which came this long asks its donor again */
#define STATE_STALL_S 5.0       /* an assembly with no new chunk this long gives way to another snapshot */
#define FETCH_QUIET_S 10.0      /* a state download that is arriving ends when no new chunk came for this long, */
#define FETCH_MIN_BPS 1e6       /* or when it would have come whole at this many bits/s after its first wait */
#define STATE_VERSION_MAX ((int64_t)INT32_MAX - 1)   /* a snapshot's version: the optimizer counts its steps in an int */

void ns_rx_free(state_rx_t *x)
{
    free(x->buf);
    free(x->have);
    memset(x, 0, sizeof *x);
}

static int s_rx_begin(state_rx_t *x, size_t total)
{
    ns_rx_free(x);
    x->total = total;
    x->nchunks = (uint32_t)((total + STATE_CHUNK - 1) / STATE_CHUNK);
    x->buf = malloc(total ? total : 1);
    x->have = calloc(x->nchunks ? x->nchunks : 1, 1);
    if (!x->buf || !x->have) { ns_rx_free(x); return -1; }
    return 0;
}

/* The values of a snapshot (params|m|v, total bytes at buf) can be trained from (optim_state_ok). */
static int s_state_values_ok(const uint8_t *buf, size_t total)
{
    size_t n = total / (3 * sizeof(float));
    const float *f = (const float *)(const void *)buf;   /* malloc'd: aligned */
    return optim_state_ok(f, f + n, f + 2 * n, n);
}

/* Checks a STATE chunk's preamble against an assembly and stores it.
 * Returns the chunk index, or -1 (dropped). */
static int s_state_chunk(netside_t *ns, state_rx_t *x, const transport_msg_t *m)
{
    proto_state_pre_t pre;
    int bad = proto_get_state_pre(&pre, m->frame[0], m->len[0]);
    uint64_t total = pre.total;
    uint32_t sum = pre.checksum;
    int64_t version = pre.version;
    uint32_t nchunks = pre.nchunks;
    uint64_t idx = m->hdr.mb;
    if (bad || total != x->total || nchunks != x->nchunks || idx >= nchunks || version < 0 || version > STATE_VERSION_MAX) {
        ns_drop(ns, "malformed STATE", m->sender);
        return -1;
    }
    size_t off = (size_t)idx * STATE_CHUNK, want = total - off < STATE_CHUNK ? total - off : STATE_CHUNK;
    if (m->len[1] != (ns->c.modelled ? 0 : want)) { ns_drop(ns, "STATE chunk of the wrong size", m->sender); return -1; }
    double now = ns_now(ns);
    if (x->got == 0) { x->checksum = sum; x->version = version; }
    else if (sum != x->checksum || version != x->version) {
        /* another snapshot: the one being assembled is finished first, unless it stalled */
        if (now - x->last_chunk < STATE_STALL_S) { ns_discard(ns); return -1; }
        memset(x->have, 0, x->nchunks);
        x->got = 0;
        x->checksum = sum;
        x->version = version;
    }
    x->last_chunk = now;
    if (!x->have[idx]) {
        if (!ns->c.modelled) memcpy(x->buf + off, m->frame[1], want);
        x->have[idx] = 1;
        x->got++;
        INVARIANT(x->got <= x->nchunks);
    }
    if (x->got == x->nchunks) {
        const char *bad = NULL;
        if (!ns->c.modelled && frame_checksum(x->buf, x->total, 0) != x->checksum) bad = "STATE checksum mismatch";
        else if (!ns->c.modelled && !s_state_values_ok(x->buf, x->total)) bad = "STATE with a non-finite value or a negative moment";
        if (bad) {
            ns_drop(ns, bad, m->sender);
            memset(x->have, 0, x->nchunks);
            x->got = 0;
            return -1;
        }
        x->complete = 1;
    }
    return (int)idx;
}

/* A snapshot (params|m|v as bytes) into a blob for the compute side. */
static state_blob_t *s_blob(const netside_t *ns, int stage, const uint8_t *buf, size_t total, int64_t version, int backup)
{
    size_t np = total / (3 * sizeof(float));
    state_blob_t *b = state_blob_new(stage, ns->c.modelled ? 0 : np);
    if (!b) return NULL;
    b->nparams = np;
    b->version = version;
    b->backup = backup;
    if (!ns->c.modelled) memcpy(b->data, buf, total);
    return b;
}

/* Ends the compute side's fetch: the blob (NULL: nothing came) goes to it. */
void ns_fetch_end(netside_t *ns, state_blob_t *blob)
{
    mail_t *m = mail_new(MAIL_STATE);
    if (!m) { state_blob_destroy(&blob); return; }
    m->hdr.stage = (uint16_t)ns->xfer.fetch.stage;
    m->peer = ns->xfer.fetch.donor;   /* which fetch ended: the compute side may have moved on */
    m->state = blob;
    ns_rx_free(&ns->xfer.fetch.rx);
    ns->xfer.fetch.active = 0;
    ns_post(ns, m);
}

void ns_fetch_ask(netside_t *ns)
{
    wire_hdr_t h;
    ns_hdr(ns, &h, WIRE_STATE_REQ);
    h.stage = (uint16_t)ns->xfer.fetch.stage;
    h.flags = ns->xfer.fetch.donor ? 0 : STATE_FLAG_BACKUP;
    if (ns->xfer.fetch.donor) {
        ns_send(ns, ns->xfer.fetch.donor, &h, NULL, NULL, 0, 0, 0);
        ns->xfer.fetch.resend = ns_now(ns) + FETCH_RESEND_S;
    } else {
        uint64_t *ids = malloc(sizeof(uint64_t) * (size_t)(ns->peers.n + 1));
        int k = ids ? ns_live_ids(ns, ids) : 0;
        for (int i = 0; i < k; i++) ns_send(ns, ids[i], &h, NULL, NULL, 0, 0, 0);
        free(ids);
        ns->xfer.fetch.resend = ns->xfer.fetch.deadline;  /* backups are asked for once */
    }
}

/* MAIL_FETCH: the compute side wants stage hdr.stage's state from peer (0: a backup). */
void ns_on_fetch(netside_t *ns, const mail_t *m)
{
    int stage = m->hdr.stage;
    if (ns->xfer.fetch.active) ns_rx_free(&ns->xfer.fetch.rx);
    memset(&ns->xfer.fetch, 0, sizeof ns->xfer.fetch);
    ns->xfer.fetch.active = 1;
    ns->xfer.fetch.stage = stage;
    ns->xfer.fetch.donor = m->peer;
    ns->xfer.fetch.deadline = ns_now(ns) + (double)m->hdr.mb * 1e-3;   /* hdr.mb: the wait in ms */
    if (!m->peer && stage >= 0 && stage < ns->nstages && ns->xfer.backups[stage].buf) {
        /* a backup of that stage is held here */
        backup_t *b = &ns->xfer.backups[stage];
        ns_fetch_end(ns, s_blob(ns, stage, b->buf, b->total, b->version, 1));
        return;
    }
    size_t bytes = 3 * ns_stage_params(ns, stage) * sizeof(float);
    ns->xfer.fetch.last_deadline = ns->xfer.fetch.deadline + 8.0 * (double)bytes / FETCH_MIN_BPS;
    if (s_rx_begin(&ns->xfer.fetch.rx, bytes) < 0) { ns_fetch_end(ns, NULL); return; }
    ns->xfer.fetch.rx.donor = m->peer;
    ns_fetch_ask(ns);
}

static void s_on_backup_push(netside_t *ns, const transport_msg_t *m)
{
    peer_t *p = peers_find(&ns->peers, m->sender);
    int s = m->hdr.stage;
    if (!p || p->info.stage != s || s >= ns->nstages || m->nframes < 2) {
        ns_drop(ns, "unexpected backup", m->sender);
        return;
    }
    backup_t *b = &ns->xfer.backups[s];
    state_rx_t *x = &b->rx;
    size_t total = 3 * ns_stage_params(ns, s) * sizeof(float);
    if ((!x->buf || x->total != total) && s_rx_begin(x, total) < 0) { ns_drop(ns, "out of memory", m->sender); return; }
    if (s_state_chunk(ns, x, m) < 0 || !x->complete) return;
    /* keep the complete snapshot; the assembly buffer becomes the held copy */
    free(b->buf);
    b->buf = x->buf;
    b->total = x->total;
    b->checksum = x->checksum;
    b->version = x->version;
    x->buf = NULL;
    ns_rx_free(x);
    char id[9];
    node_id_short(m->sender, id);
    metrics_event(ns->c.metrics, "backup", "\"held_stage\":%d,\"version\":%lld,\"from\":%s,\"bytes\":%zu",
                  s, (long long)b->version, id, b->total);
}

/* Sends a snapshot (total bytes at buf) in STATE chunks, to peer or as a reply to m. */
static void s_send_chunks(netside_t *ns, uint64_t peer, const transport_msg_t *m, int stage, uint32_t flags,
                          const uint8_t *buf, size_t total, int64_t version)
{
    uint32_t sum = ns->c.modelled ? 0 : frame_checksum(buf, total, 0);
    uint32_t nchunks = (uint32_t)((total + STATE_CHUNK - 1) / STATE_CHUNK);
    for (uint32_t k = 0; k < nchunks; k++) {
        size_t off = (size_t)k * STATE_CHUNK, len = total - off < STATE_CHUNK ? total - off : STATE_CHUNK;
        uint8_t pre[PROTO_STATE_PRE_LEN];
        proto_put_state_pre(pre, total, sum, version);
        wire_hdr_t h;
        ns_hdr(ns, &h, WIRE_STATE);
        h.stage = (uint16_t)stage;
        h.mb = k;
        h.flags = flags;
        h.wversion = (uint32_t)version;
        const void *f[2] = { pre, ns->c.modelled ? NULL : buf + off };
        size_t l[2] = { sizeof pre, ns->c.modelled ? 0 : len };
        uint64_t virt = ns->c.modelled ? len : 0;
        int r;
        if (peer) {
            r = ns_send(ns, peer, &h, f, l, 2, 0, virt);
        } else if (m->link == RELAYED_LINK) {
            r = ns_send(ns, m->sender, &h, f, l, 2, 0, virt);
        } else {
            r = ns_port_send(ns, m->link >= 0 ? m->link : -1, m, &h, f, l, 2, 0, virt);
        }
        if (r == 0) {
            atomic_fetch_add(&ns->ctr.bytes_sent_state, WIRE_HDR_LEN + l[0] + l[1] + virt);
        }
    }
}

/* 1 when the sender of a STATE_REQ may have a state download now: a peer
 * in the table (a node introduces itself on every link it opens, before
 * its first request), at most one download of either kind per
 * STATE_REQ_EVERY_S.  Each answer queues a whole snapshot in STATE chunks
 * on the link.  0 (dropped, counted) otherwise. */
static int s_state_req_allowed(netside_t *ns, const transport_msg_t *m)
{
    peer_t *p = peers_find(&ns->peers, m->sender);
    if (!p || p->info.id == ns->id) { ns_drop(ns, "STATE_REQ from an unknown peer", m->sender); return 0; }
    double now = ns_now(ns);
    if (p->last_state_req > 0 && now - p->last_state_req < STATE_REQ_EVERY_S) { ns_drop(ns, "STATE_REQ rate limit", m->sender); return 0; }
    p->last_state_req = now;
    return 1;
}

/* Serves a held backup to a replacement node of that stage. */
static void s_serve_backup(netside_t *ns, const transport_msg_t *m)
{
    int s = m->hdr.stage;
    if (s >= ns->nstages || !ns->xfer.backups[s].buf) return;  /* nothing held: silence (every live peer is asked) */
    if (!s_state_req_allowed(ns, m)) return;
    backup_t *b = &ns->xfer.backups[s];
    /* answer on the connection it used (it may be reachable only outward) */
    s_send_chunks(ns, 0, m, s, STATE_FLAG_BACKUP | STATE_FLAG_REPLY, b->buf, b->total, b->version);
    char id[9];
    node_id_short(m->sender, id);
    metrics_event(ns->c.metrics, "backup", "\"served_stage\":%d,\"version\":%lld,\"to\":%s", s, (long long)b->version, id);
}

/* How long a download may be silent before its donor is asked again:
 * FETCH_RESEND_S before its first chunk (the request may have been lost),
 * half of FETCH_QUIET_S after (each ask queues the whole snapshot again at
 * the donor, and on a slow link a 1 MiB chunk takes seconds). */
double ns_fetch_silence(const fetch_t *f)
{
    return f->rx.got == 0 ? FETCH_RESEND_S : FETCH_QUIET_S / 2;
}

/* A new chunk of the download came: it ends FETCH_QUIET_S after the last
 * one at the earliest (a stage's state is tens of MB or more, which no
 * fixed wait suits on every link), at last_deadline at the latest. */
static void s_fetch_progress(netside_t *ns, fetch_t *f)
{
    double d = ns_now(ns) + FETCH_QUIET_S;
    if (d > f->last_deadline) d = f->last_deadline;
    if (d > f->deadline) f->deadline = d;
}

void ns_on_state(netside_t *ns, const transport_msg_t *m)
{
    if (m->nframes < 2) { ns_drop(ns, "STATE without body", m->sender); return; }
    if ((m->hdr.flags & STATE_FLAG_BACKUP) && !(m->hdr.flags & STATE_FLAG_REPLY)) { s_on_backup_push(ns, m); return; }
    fetch_t *f = &ns->xfer.fetch;
    if (!f->active || m->hdr.stage != f->stage) { ns_discard(ns); return; }  /* a late chunk of a download already done */
    state_rx_t *x = &f->rx;
    if (x->donor ? m->sender != x->donor : !peers_find(&ns->peers, m->sender)) { ns_discard(ns); return; }
    uint32_t got = x->got;
    if (s_state_chunk(ns, x, m) < 0) return;
    /* a backup fetch takes the first known holder whose chunk is taken (a malformed reply of anyone took it over) */
    if (x->donor == 0) x->donor = m->sender;
    if (x->got > got) s_fetch_progress(ns, f);
    if (!x->complete) return;
    ns_fetch_end(ns, s_blob(ns, f->stage, x->buf, x->total, x->version, f->donor == 0));
}

/* MAIL_STATE_OUT: sends the compute side's snapshot to a peer. */
void ns_on_state_out(netside_t *ns, mail_t *m)
{
    state_blob_t *b = m->state;
    size_t total = 3 * b->nparams * sizeof(float);
    s_send_chunks(ns, m->peer, NULL, b->stage, m->hdr.flags, (const uint8_t *)b->data, total, b->version);
    char s[9];
    node_id_short(m->peer, s);
    metrics_event(ns->c.metrics, m->hdr.flags & STATE_FLAG_BACKUP ? "backup" : "state", "\"to\":%s,\"version\":%lld,\"bytes\":%zu",
                  s, (long long)b->version, total);
}

void ns_on_state_req(netside_t *ns, const transport_msg_t *m)
{
    if (m->hdr.flags & STATE_FLAG_BACKUP) { s_serve_backup(ns, m); return; }
    if (ns->me.stage < 0 || m->hdr.stage != ns->me.stage) { ns_drop(ns, "STATE_REQ this node cannot serve", m->sender); return; }
    if (!s_state_req_allowed(ns, m)) return;
    mail_t *mail = mail_new(MAIL_STATE_REQ);
    if (!mail) return;
    mail->hdr = m->hdr;
    mail->peer = m->sender;
    ns_post(ns, mail);
}
