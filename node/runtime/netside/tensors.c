/* tensors.c: the checking, decoding and encoding of ACT/GRAD tensors, with
 * the per-stream error feedback of gradients. */
#include "node/runtime/netside/internal.h"

#define NORM_FACTOR 1000.0      /* a tensor this many times its stream's usual RMS is refused */
#define NORM_WARMUP 16          /* tensors seen before the norm check applies */

/* Checks a tensor's scale against the usual scale of its sender's stream:
 * 0 when plausible (and learns from it), -1 when far outside. */
static int s_norm_ok(netside_t *ns, uint64_t from, const float *t, size_t len)
{
    peer_t *p = peers_find(&ns->peers, from);
    if (!p || !t) return 0;
    double ss = 0;
    for (size_t i = 0; i < len; i++) ss += (double)t[i] * t[i];
    double rms = sqrt(ss / (double)(len ? len : 1));
    if (p->norm.n >= NORM_WARMUP && rms > NORM_FACTOR * p->norm.mean + 1e-6) return -1;
    p->norm.n++;
    double w = p->norm.n < 20 ? 1.0 / p->norm.n : 0.05;
    p->norm.mean += w * (rms - p->norm.mean);
    return 0;
}

/* The floats a tensor of this type must have, and the stage its sender must serve. */
static size_t s_expect(const netside_t *ns, int type, int *want_stage)
{
    if (type == WIRE_ACT) { *want_stage = ns->me.stage - 1; return ns->me.in_n; }
    if (type == WIRE_GRAD) { *want_stage = ns->me.stage + 1; return ns->me.out_n; }
    *want_stage = ns->me.stage;
    return ns->me.nparams;
}

/* A modelled tensor (simulator): one u64, the number of values it stands for. */
static long s_decode_modelled(const transport_msg_t *m, size_t expect)
{
    uint64_t n;
    return proto_get_modelled(&n, m->frame[0], m->len[0]) < 0 || n != expect ? -1 : (long)n;
}

/* The checks of a tensor frame that need no buffer of its size: its header
 * (modelled: its count) says expect values.  NULL when they pass, else why not. */
static const char *s_tensor_shape(const netside_t *ns, const transport_msg_t *m, size_t expect)
{
    if (ns->c.modelled) return s_decode_modelled(m, expect) < 0 ? "modelled tensor of the wrong size" : NULL;
    frame_info_t fi;
    char err[200];
    if (frame_peek(&fi, m->frame[0], m->len[0], err, sizeof err) < 0) return "bad tensor frame";
    return fi.n_values != expect ? "tensor shape does not match the run" : NULL;
}

/* Decodes a frame that passed s_tensor_shape into t (expect floats) and
 * checks its values.  NULL when they pass, else why not. */
static const char *s_tensor_values(netside_t *ns, const transport_msg_t *m, float *t, size_t expect)
{
    char err[200];
    if (frame_decode(ns->tensor.dec, t, expect, NULL, NULL, m->frame[0], m->len[0], err, sizeof err) != (long)expect)
        return "tensor frame refused";
    for (size_t i = 0; i < expect; i++)
        if (!isfinite(t[i])) return "non-finite tensor";
    if (m->hdr.type != WIRE_AVG && s_norm_ok(ns, m->sender, t, expect) < 0) return "tensor norm far outside its stream's range";
    return NULL;
}

/* Checks and decodes the tensor of an ACT/GRAD/AVG into a mail for the
 * compute side.  Nothing of the tensor's size is allocated before its
 * frame header has been found to match the run. */
void ns_on_tensor(netside_t *ns, const transport_msg_t *m)
{
    int type = m->hdr.type, want_stage;
    peer_t *p = peers_find(&ns->peers, m->sender);
    if (!p) { ns_drop(ns, "tensor from an unknown peer", m->sender); return; }
    if (ns->left) return;   /* this node's compute side has ended; its peers have not all heard yet */
    if (ns->me.stage < 0 || m->hdr.stage != ns->me.stage) { ns_discard(ns); return; }  /* in flight across a move */
    size_t expect = s_expect(ns, type, &want_stage);
    if (p->info.stage != want_stage) { ns_drop(ns, "tensor from a peer of the wrong stage", m->sender); return; }
    ns_traffic(ns, p);
    if (type == WIRE_GRAD && (m->hdr.flags & GRAD_FLAG_DUP) && m->nframes == 0) {
        /* no tensor: the microbatch was applied further on already */
        mail_t *mail = mail_new(MAIL_TENSOR);
        if (!mail) return;
        mail->hdr = m->hdr;
        mail->peer = m->sender;
        mail->silent_until = p->silent_until;
        ns_post(ns, mail);
        return;
    }
    if (m->nframes < 1 || expect == 0) { ns_drop(ns, "tensor message without tensor", m->sender); return; }
    /* an ACT's targets: ntarg of them, tlen bytes on the wire (proto_put_targets) */
    const model_config_t *cfg = &ns->c.o->cfg;
    size_t ntarg = type == WIRE_ACT ? (size_t)ns->c.o->batch * (size_t)(cfg->kind == MODEL_GPT ? cfg->maxT : 1) : 0;
    size_t tlen = ntarg * (size_t)proto_target_width(cfg->V);
    if (type == WIRE_ACT && (m->nframes < 2 || m->len[1] != tlen)) { ns_drop(ns, "ACT without valid targets", m->sender); return; }
    const char *bad = s_tensor_shape(ns, m, expect);
    if (bad) { ns_drop(ns, bad, m->sender); return; }
    mail_t *mail = mail_new(MAIL_TENSOR);
    float *t = NULL;
    if (!ns->c.modelled) t = malloc(sizeof(float) * expect);
    uint8_t *tg = tlen ? malloc(tlen) : NULL;
    if (!mail || (!ns->c.modelled && !t) || (tlen && !tg)) {
        mail_free(mail); free(t); free(tg);
        ns_drop(ns, "out of memory", m->sender);
        return;
    }
    if (!ns->c.modelled) bad = s_tensor_values(ns, m, t, expect);
    if (!bad && tlen) {
        memcpy(tg, m->frame[1], tlen);
        if (proto_get_targets(NULL, tg, tlen, ntarg, proto_target_width(cfg->V), cfg->V) < 0) bad = "target out of range";
    }
    if (bad) {
        mail_free(mail); free(t); free(tg);
        ns_drop(ns, bad, m->sender);
        return;
    }
    mail->hdr = m->hdr;
    mail->peer = m->sender;
    mail->silent_until = p->silent_until;
    mail->x = t;
    mail->n = expect;
    mail->aux = tg;
    mail->aux_len = tlen;
    ns_post(ns, mail);
}

/* The residual of the gradient stream to peer (n floats), made on first use
 * (all streams taken: in place of the one unused longest, a peer gone
 * most likely; the 64 first upstream peers of a churning swarm held them
 * all for good and every later one went without error feedback); NULL when
 * out of memory. */
static float *s_residual(netside_t *ns, uint64_t peer, size_t n)
{
    double now = ns_now(ns);
    int old = 0;
    for (int i = 0; i < ns->tensor.nfb; i++) {
        if (ns->tensor.fb[i].peer == peer) {
            ns->tensor.fb[i].used = now;
            return ns->tensor.fb[i].n == n ? ns->tensor.fb[i].residual : NULL;
        }
        if (ns->tensor.fb[i].used < ns->tensor.fb[old].used) old = i;
    }
    float *r = calloc(n, sizeof(float));
    if (!r) return NULL;
    if (ns->tensor.nfb == FEEDBACK_STREAMS) free(ns->tensor.fb[old].residual);
    else old = ns->tensor.nfb++;
    INVARIANT(ns->tensor.nfb <= FEEDBACK_STREAMS);
    ns->tensor.fb[old] = (feedback_t){ .peer = peer, .n = n, .residual = r, .used = now };
    return r;
}

/* Forgets every gradient stream (this node moved to another stage). */
void ns_feedback_reset(netside_t *ns)
{
    for (int i = 0; i < ns->tensor.nfb; i++) free(ns->tensor.fb[i].residual);
    ns->tensor.nfb = 0;
}

/* The values of one row (one position's vector) of a cut tensor of n values. */
static size_t s_row(const netside_t *ns, size_t n)
{
    size_t rows = (size_t)ns->c.o->batch * (size_t)(ns->c.o->cfg.kind == MODEL_GPT ? ns->c.o->cfg.maxT : 1);
    return rows ? n / rows : 0;
}

/* The encode time of n values in codec (int8 or pca): measured, or before
 * a measure (and in the simulator, whose clock stands still while the
 * node works) the nominal one; pca's before its own measure at least
 * CODECPICK_PCA_OVER_INT8 x int8's measured one (the same machine). */
static double s_enc_s(const netside_t *ns, int codec, size_t n)
{
    double i8 = ns->tensor.enc_s_per_value[0], pca = ns->tensor.enc_s_per_value[1];
    if (!(i8 > 0)) i8 = CODECPICK_INT8_S_PER_VALUE;
    if (!(pca > 0)) pca = fmax(CODECPICK_PCA_S_PER_VALUE, CODECPICK_PCA_OVER_INT8 * i8);
    return (codec == CODEC_PCA ? pca : i8) * (double)n;
}

/* The codec of mail m's tensor: its own, or under auto the one its link
 * has now (int8 where pca's blocks do not fit the rows). */
static int s_codec_of(netside_t *ns, const mail_t *m, peer_t *to)
{
    if (m->codec != CODEC_AUTO) return m->codec;
    if (!to || codec_block_for_rows(CODEC_PCA, s_row(ns, m->n)) == 0) return CODEC_INT8;
    return to->pick.codec;
}

/* Encodes mail m's tensor in codec (block: its block size) into frame
 * (returns its length, -1 on failure); *virt: the bytes a modelled tensor
 * stands for.  Under auto a real encode is timed (s_enc_s). */
static long s_encode(netside_t *ns, const mail_t *m, int codec, int block, uint8_t **frame, uint64_t *virt)
{
    *virt = 0;
    if (ns->c.modelled || !m->x) {
        /* a modelled tensor: its size only; on the wire as its codec would make it */
        *frame = malloc(PROTO_MODELLED_LEN);
        if (!*frame) return -1;
        proto_put_modelled(*frame, m->n);
        *virt = frame_typical_len(m->n, codec);
        return PROTO_MODELLED_LEN;
    }
    size_t cap = frame_bound(m->n, codec);
    *frame = malloc(cap);
    if (!*frame) return -1;
    uint32_t shape[1] = { (uint32_t)m->n };
    encode_opts_t eo = { .residual = m->feedback ? s_residual(ns, m->peer, m->n) : NULL, .block_size = block };
    char err[200];
    double t0 = ns_now(ns);
    long len = frame_encode(ns->tensor.enc, *frame, cap, m->x, shape, 1, codec, &eo, err, sizeof err);
    if (m->codec == CODEC_AUTO && len > 0 && m->n > 0) {   /* an EWMA of the time per value */
        double *per = &ns->tensor.enc_s_per_value[codec == CODEC_PCA], t = (ns_now(ns) - t0) / (double)m->n;
        *per = *per > 0 ? 0.8 * *per + 0.2 * t : t;
    }
    return len;
}

/* A drain probe behind the tensor of `bytes` just sent to p under auto,
 * when none is out (one lost is given up after 5 s): the PING waits behind
 * the tensor on the link, so its PONG times the tensor's bytes leaving. */
static void s_drain_probe(netside_t *ns, peer_t *p, double bytes)
{
    double now = ns_now(ns);
    if (p->pick.probe_t > 0 && now - p->pick.probe_t < 5.0) return;
    wire_hdr_t h;
    ns_hdr(ns, &h, WIRE_PING);
    h.mb = (uint64_t)(now * 1e6);
    h.flags |= PING_FLAG_DRAIN;
    if (ns_send(ns, p->info.id, &h, NULL, NULL, 0, 0, 0) != 0) return;
    p->pick.probe_t = now;
    p->pick.probe_bytes = bytes;
}

/* The pipeline's time per microbatch as gossip tells it: one over the
 * smallest capacity of a stage past the data stage (its replicas' rates
 * summed; the data stage's rate counts the time the delay budget held it,
 * so it is only the fallback); 0 unknown. */
static double s_mb_s(const netside_t *ns)
{
    double lo = 0;
    for (int s = 1; s < ns->nstages; s++) {
        double sum = s == ns->me.stage ? ns->me.rate : 0;
        for (int i = 0; i < ns->peers.n; i++) {
            const peer_t *q = &ns->peers.p[i];
            if (q->info.id != ns->id && q->info.stage == s && q->health != PEER_GONE && q->info.rate > 0) sum += q->info.rate;
        }
        if (sum > 0 && (lo == 0 || sum < lo)) lo = sum;
    }
    if (lo == 0) lo = ns->me.rate;
    return lo > 0 ? 1.0 / lo : 0;
}

/* Says a change of p's codec under auto: a `codec` event and a line. */
static void s_codec_said(netside_t *ns, const peer_t *p, int was, double rate, double wire_s, double extra_s, double mb_s)
{
    char id[9], line[300];
    node_id_short(p->info.id, id);
    const char *dir = p->info.stage > ns->me.stage ? "act" : "grad";
    snprintf(line, sizeof line, "%s to %s: %s, was %s (the link moves %.2f Mbit/s: an int8 tensor takes %.1f ms on it, "
             "pca encodes in %.1f ms more, a microbatch takes %.1f ms)", dir[0] == 'a' ? "activations" : "gradients", id,
             codec_name(p->pick.codec), codec_name(was), rate * 8e-6, wire_s * 1e3, extra_s * 1e3, mb_s * 1e3);
    metrics_event(ns->c.metrics, "codec", "\"peer\":%s,\"dir\":%s,\"codec\":%s,\"was\":%s,\"mbit\":%.3f,"
                  "\"int8_ms\":%.3f,\"pca_extra_ms\":%.3f,\"mb_ms\":%.3f,\"why\":%s", id, dir, codec_name(p->pick.codec),
                  codec_name(was), rate * 8e-6, wire_s * 1e3, extra_s * 1e3, mb_s * 1e3, line);
    mail_t *m = mail_new(MAIL_SAY);
    if (!m) return;
    m->aux = (uint8_t *)strdup(line);
    if (m->aux) m->aux_len = strlen(line) + 1;
    ns_post(ns, m);
}

void ns_on_drain_pong(netside_t *ns, const transport_msg_t *m)
{
    peer_t *p = peers_find(&ns->peers, m->sender);
    if (!p || p->pick.probe_t <= 0 || (uint64_t)(p->pick.probe_t * 1e6) != m->hdr.mb) return;   /* not the one out */
    double rtt = ns_now(ns) - p->pick.probe_t;
    p->pick.probe_t = 0;
    if (!codecpick_sample(&p->pick, rtt, p->rtt_min_ms * 1e-3) || codecpick_samples(&p->pick) < CODECPICK_FIRST) return;
    int stage_n = p->info.stage > ns->me.stage ? 1 : 0;   /* the tensor to it: our output (ACT) or our input (GRAD) */
    size_t n = stage_n ? ns->me.out_n : ns->me.in_n;
    if (n == 0) return;   /* the compute side has ended (its sizes are gone): nothing to weigh */
    codecpick_in_t in = { .bytes_per_s = codecpick_rate(&p->pick), .int8_bytes = (double)frame_typical_len(n, CODEC_INT8),
                          .enc_int8_s = s_enc_s(ns, CODEC_INT8, n), .enc_pca_s = s_enc_s(ns, CODEC_PCA, n),
                          .mb_s = s_mb_s(ns) };
    if (ns->me.stage > 0) in.uplink_int8_bytes += (double)frame_typical_len(ns->me.in_n, CODEC_INT8);
    if (ns->me.stage < ns->nstages - 1) in.uplink_int8_bytes += (double)frame_typical_len(ns->me.out_n, CODEC_INT8);
    int was = p->pick.codec;
    p->pick.codec = codecpick_choose(was, &in);
    if (p->pick.codec != was)
        s_codec_said(ns, p, was, in.bytes_per_s, in.int8_bytes / in.bytes_per_s, in.enc_pca_s - in.enc_int8_s, in.mb_s);
}

/* Sends the message of a MAIL_SEND: header, the tensor (encoded here), the aux frame. */
void ns_on_send(netside_t *ns, mail_t *m)
{
    const void *f[2];
    size_t l[2];
    int nf = 0;
    uint8_t *frame = NULL;
    uint64_t virt = 0;
    peer_t *to = m->peer ? peers_find(&ns->peers, m->peer) : NULL;
    if (m->codec >= 0) {
        int codec = s_codec_of(ns, m, to);
        int block = m->codec == CODEC_AUTO ? codec_block_for_rows(codec, s_row(ns, m->n)) : m->block;
        long len = s_encode(ns, m, codec, block, &frame, &virt);
        if (len < 0) { free(frame); ns_drop(ns, "tensor could not be encoded", ns->id); return; }
        f[nf] = frame;
        l[nf++] = (size_t)len;
    }
    if (m->aux) { f[nf] = m->aux; l[nf++] = m->aux_len; }
    wire_hdr_t h = m->hdr;
    h.run = ns->run;
    if (m->peer) {
        if (to && (h.type == WIRE_ACT || h.type == WIRE_GRAD)) ns_traffic(ns, to);
        if (ns_send(ns, m->peer, &h, f, l, nf, m->raw_bytes, virt) != 0)   /* not the peer's offence */
            ns_count_drop(ns, "send failed (peer unknown or its queue full)", m->peer);
        else if (m->state_bytes) atomic_fetch_add(&ns->ctr.bytes_sent_state, WIRE_HDR_LEN + l[0] + (nf > 1 ? l[1] : 0));
        else if (to && m->codec == CODEC_AUTO) s_drain_probe(ns, to, (double)(WIRE_HDR_LEN + virt + l[0] + (nf > 1 ? l[1] : 0)));
    } else {
        uint64_t *ids = malloc(sizeof(uint64_t) * (size_t)(ns->peers.n + 1));
        int k = ids ? ns_live_ids(ns, ids) : 0;
        for (int i = 0; i < k; i++) ns_send(ns, ids[i], &h, f, l, nf, m->raw_bytes, virt);
        free(ids);
    }
    free(frame);
}
