/* test_compute: the compute side (node/runtime/compute.h) driven by hand,
 * with its clock, mail and peer view made here: a mover's and a restarted
 * node's state downloads, and bad or repeated tensors dropped. */
#include "tests/check.h"
#include "net/wire.h"
#include "node/runtime/compute.h"
#include "node/runtime/metrics.h"
#include "node/runtime/proto.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    double now;
    mail_t *out[256];      /* mail posted to the network side */
    int nout;
    char said[8][256];     /* the last lines for the user */
    int nsaid;
} hand_t;

static double s_hand_now(void *arg) { return ((hand_t *)arg)->now; }
static uint64_t s_hand_wall(void *arg) { return 1700000000000ULL + (uint64_t)(((hand_t *)arg)->now * 1000); }

static void s_hand_post(void *arg, mail_t *m)
{
    hand_t *h = arg;
    if (h->nout < (int)(sizeof h->out / sizeof h->out[0])) h->out[h->nout++] = m;
    else mail_free(m);
}

static void s_hand_say(void *arg, const char *line)
{
    hand_t *h = arg;
    snprintf(h->said[h->nsaid % 8], sizeof h->said[0], "%s", line);
    h->nsaid++;
}

static void s_hand_clear(hand_t *h)
{
    for (int i = 0; i < h->nout; i++) mail_free(h->out[i]);
    h->nout = 0;
}

/* Node options of a small gpt cut into `stages` stages of one layer each. */
static void s_hand_opts(opts_t *o, char *stages)
{
    char err[256];
    char *argv[] = { "node", "--stages", stages, "--layers", stages, "--dim", "16", "--heads", "1", "--ctx", "8", "--batch", "1" };
    opts_defaults(o, OPTS_NODE);
    CHECKF(opts_parse(o, OPTS_NODE, 13, argv, 1, err, sizeof err) == 0 && opts_resolve(o, err, sizeof err) == 0, "%s", err);
}

/* A compute side on cc driven by hand: its clock, mail and lines go to h,
 * its counters to net, its metrics (named name) to *mt; flushed once, and
 * the tensor sizes it said it takes into *in_n and *out_n (either NULL).
 * NULL (a failed check) when it cannot be made. */
/* A modelled node of `stage` (id 99, run 1, the even split) seeing view v. */
static compute_cfg_t s_hand_cfg(const opts_t *o, int stage, peer_view_t *v)
{
    return (compute_cfg_t){.o = o, .id = 99, .run = 1, .stage = stage, .plan = SPLIT_EVEN, .view = v, .modelled = 1};
}

static compute_t *s_hand_compute(hand_t *h, net_counters_t *net, metrics_t **mt, compute_cfg_t cc, const char *name,
                                 size_t *in_n, size_t *out_n)
{
    char err[256];
    memset(net, 0, sizeof *net);
    *mt = metrics_open(NULL, name, err, sizeof err);
    cc.net = net;
    cc.metrics = *mt;
    cc.clock = (rt_clock_t){.arg = h, .now = s_hand_now, .wall_ms = s_hand_wall};
    cc.post = s_hand_post;
    cc.post_arg = h;
    cc.obs = (node_observer_t){.arg = h, .say = s_hand_say};
    compute_t *c = compute_new(&cc, err, sizeof err);
    CHECKF(c != NULL, "%s", err);
    if (!c) { metrics_close(mt); return NULL; }
    compute_flush(c);
    for (int i = 0; i < h->nout; i++)
        if (h->out[i]->kind == MAIL_SELF) {
            if (in_n) *in_n = h->out[i]->self.in_n;
            if (out_n) *out_n = h->out[i]->self.out_n;
        }
    return c;
}

/* Ends what s_hand_compute started. */
static void s_hand_end(hand_t *h, compute_t **c, metrics_t **mt)
{
    s_hand_clear(h);
    compute_destroy(c);
    metrics_close(mt);
}

/* The peer a MAIL_FETCH among the posted mail asks (0: a backup), or -1. */
static int64_t s_hand_fetch(const hand_t *h)
{
    int64_t donor = -1;
    for (int i = 0; i < h->nout; i++)
        if (h->out[i]->kind == MAIL_FETCH) donor = (int64_t)h->out[i]->peer;
    return donor;
}

/* A checked tensor (ACT or GRAD) from the network side, as a compute side driven by hand gets it:
 * mb's attempt, n floats, targets bytes of targets (ACT). */
static mail_t *s_hand_tensor(int type, uint64_t mb, int stage, unsigned attempt, uint64_t from, size_t n, size_t targets)
{
    mail_t *m = mail_new(MAIL_TENSOR);
    wire_hdr_init(&m->hdr, (uint8_t)type);
    m->hdr.mb = mb;
    m->hdr.stage = (uint16_t)stage;
    m->hdr.flags = attempt << MB_ATTEMPT_SHIFT;
    m->peer = m->hdr.sender = from;
    m->n = n;
    m->aux_len = targets;
    m->aux = targets ? calloc(targets, 1) : NULL;
    return m;
}

/* The network side ends a fetch of stage's state from donor with nothing. */
static void s_hand_fetch_fails(compute_t *c, hand_t *h, int stage, uint64_t donor)
{
    s_hand_clear(h);
    mail_t *m = mail_new(MAIL_STATE);
    m->hdr.stage = (uint16_t)stage;
    m->peer = donor;
    compute_on_mail(c, m);   /* ownership passes */
    compute_flush(c);
}

/* A node moved to the slowest stage whose download from a peer of it ends
 * with nothing asks the stage's peers again (three tries in all), then a
 * backup, before it serves the stage from its initial weights (a mover went
 * straight to them, at version 0 beside trained replicas, where a joiner
 * asked elsewhere). */
static void test_mover_fetches_elsewhere(void)
{
    opts_t o;
    s_hand_opts(&o, "4");
    const struct { uint64_t id; int stage; float rate; uint32_t version; } ps[] = {
        {10, 0, 10.0f, 0}, {50, 1, 1.0f, 0}, {60, 2, 0.05f, 500}, {61, 2, 0.05f, 499}, {70, 3, 10.0f, 0}};
    peer_view_t *v = peer_view_new(5);
    for (int i = 0; i < 5; i++) {
        v->p[i] = (view_peer_t){.id = ps[i].id, .stage = ps[i].stage, .health = PEER_ALIVE, .rtt_ms = 20,
                                .rtt_min_ms = 20, .rate = ps[i].rate, .loss = NAN, .version = ps[i].version};
    }
    v->plan = SPLIT_EVEN;
    peer_view_index(v);
    hand_t h = {.now = 100.0};
    net_counters_t net;
    metrics_t *mt;
    size_t in_n = 0;   /* the activation size the node said it takes */
    compute_t *c = s_hand_compute(&h, &net, &mt, s_hand_cfg(&o, 1, v), "mover", &in_n, NULL);
    if (!c) return;
    s_hand_clear(&h);
    /* one microbatch in a second here: stage 2 is the slowest by far */
    compute_on_mail(c, s_hand_tensor(WIRE_ACT, 12345, 1, 1, 10, in_n, (size_t)o.batch * (size_t)o.cfg.maxT));
    compute_step(c, NULL);
    compute_account(c, 1.0);
    compute_flush(c);
    s_hand_clear(&h);
    h.now += 130.0;            /* moves for speed wait for rates to settle */
    compute_tick(c);
    compute_flush(c);
    /* every fetch ends with nothing: the donors asked, in order */
    int64_t asked[8];
    int n = 0;
    for (int64_t d; n < 8 && (d = s_hand_fetch(&h)) >= 0; n++) {
        asked[n] = d;
        s_hand_fetch_fails(c, &h, 2, (uint64_t)d);
    }
    CHECKF(n == 4 && asked[0] == 60 && asked[1] == 61 && asked[2] == 60 && asked[3] == 0,
           "the mover asked %d times (want 60, 61, 60, then a backup: 0); the first %lld, the last %lld",
           n, n ? (long long)asked[0] : -1LL, n ? (long long)asked[n - 1] : -1LL);
    CHECKF(h.nsaid > 0 && strstr(h.said[(h.nsaid - 1) % 8], "initial weights"),
           "after every fetch failed: '%s' (want the initial weights)", h.nsaid ? h.said[(h.nsaid - 1) % 8] : "");
    compute_result_t r;
    compute_result(c, &r);
    CHECK(r.stage == 2);
    s_hand_end(&h, &c, &mt);
}

/* A view of n alive peers, ids[i] serving stages[i], 20 ms away, even plan. */
static peer_view_t *s_hand_view(int n, const uint64_t *ids, const int *stages)
{
    peer_view_t *v = peer_view_new(n);
    for (int i = 0; i < n; i++)
        v->p[i] = (view_peer_t){.id = ids[i], .stage = stages[i], .health = PEER_ALIVE, .rtt_ms = 20, .rtt_min_ms = 20,
                                .rate = 1, .loss = NAN};
    v->plan = SPLIT_EVEN;
    peer_view_index(v);
    return v;
}

/* A re-issued activation of a microbatch held here that does not fit this
 * stage (another stage or size) is dropped, and the held one stays: its
 * gradient is still taken (the held record was freed before the check, so
 * a bad copy cost a good microbatch). */
static void test_bad_reissue_keeps_held(void)
{
    opts_t o;
    s_hand_opts(&o, "3");
    peer_view_t *v = s_hand_view(2, (uint64_t[]){10, 70}, (int[]){0, 2});
    hand_t h = {.now = 100.0};
    net_counters_t net;
    metrics_t *mt;
    size_t in_n = 0, out_n = 0, targets = (size_t)o.batch * (size_t)o.cfg.maxT;
    compute_t *c = s_hand_compute(&h, &net, &mt, s_hand_cfg(&o, 1, v), "reissue", &in_n, &out_n);
    if (!c) return;
    s_hand_clear(&h);
    compute_on_mail(c, s_hand_tensor(WIRE_ACT, 777, 1, 1, 10, in_n, targets));
    compute_step(c, NULL);
    compute_flush(c);
    int sent_on = 0;
    for (int i = 0; i < h.nout; i++) sent_on += h.out[i]->kind == MAIL_SEND && h.out[i]->hdr.type == WIRE_ACT && h.out[i]->peer == 70;
    CHECKF(sent_on == 1, "the activation went on to stage 2 %d times", sent_on);
    s_hand_clear(&h);
    /* attempt 2 of the same microbatch, one float short, then of another stage */
    compute_on_mail(c, s_hand_tensor(WIRE_ACT, 777, 1, 2, 10, in_n - 1, targets));
    compute_on_mail(c, s_hand_tensor(WIRE_ACT, 777, 2, 3, 10, in_n, targets));
    compute_step(c, NULL);
    compute_flush(c);
    s_hand_clear(&h);
    compute_on_mail(c, s_hand_tensor(WIRE_GRAD, 777, 1, 1, 70, out_n, 0));
    compute_step(c, NULL);
    compute_flush(c);
    int sent_back = 0;
    for (int i = 0; i < h.nout; i++)
        sent_back += h.out[i]->kind == MAIL_SEND && h.out[i]->hdr.type == WIRE_GRAD && h.out[i]->peer == 10 && h.out[i]->hdr.mb == 777;
    CHECKF(sent_back == 1, "the held microbatch's gradient went back %d times (want 1)", sent_back);
    s_hand_end(&h, &c, &mt);
}

/* A shared stage serves first the activations a data stage's update under
 * way waits for: one marked ACT_FLAG_LAST that came last goes on first, one
 * marked ACT_FLAG_AHEAD that came first goes on last, and each keeps its
 * mark on the way. */
static void test_marks_set_the_order(void)
{
    opts_t o;
    s_hand_opts(&o, "3");
    peer_view_t *v = s_hand_view(2, (uint64_t[]){10, 70}, (int[]){0, 2});
    hand_t h = {.now = 100.0};
    net_counters_t net;
    metrics_t *mt;
    size_t in_n = 0, targets = (size_t)o.batch * (size_t)o.cfg.maxT;
    compute_t *c = s_hand_compute(&h, &net, &mt, s_hand_cfg(&o, 1, v), "ahead", &in_n, NULL);
    if (!c) return;
    s_hand_clear(&h);
    mail_t *early = s_hand_tensor(WIRE_ACT, 501, 1, 1, 10, in_n, targets);
    early->hdr.flags |= ACT_FLAG_AHEAD;
    compute_on_mail(c, early);
    compute_on_mail(c, s_hand_tensor(WIRE_ACT, 502, 1, 1, 10, in_n, targets));
    compute_on_mail(c, s_hand_tensor(WIRE_ACT, 503, 1, 1, 10, in_n, targets));
    mail_t *last = s_hand_tensor(WIRE_ACT, 504, 1, 1, 10, in_n, targets);
    last->hdr.flags |= ACT_FLAG_LAST;
    compute_on_mail(c, last);
    for (int i = 0; i < 4; i++) compute_step(c, NULL);
    compute_flush(c);
    uint64_t order[4] = {0};
    uint32_t flags[4] = {0};
    int n = 0;
    for (int i = 0; i < h.nout && n < 4; i++)
        if (h.out[i]->kind == MAIL_SEND && h.out[i]->hdr.type == WIRE_ACT) {
            flags[n] = h.out[i]->hdr.flags;
            order[n++] = h.out[i]->hdr.mb;
        }
    CHECKF(n == 4 && order[0] == 504 && order[1] == 502 && order[2] == 503 && order[3] == 501,
           "went on in the order %llu %llu %llu %llu (want 504 502 503 501)", (unsigned long long)order[0],
           (unsigned long long)order[1], (unsigned long long)order[2], (unsigned long long)order[3]);
    CHECK((flags[3] & ACT_FLAG_AHEAD) && !(flags[1] & ACT_FLAG_AHEAD));
    CHECK((flags[0] & ACT_FLAG_LAST) && !(flags[1] & ACT_FLAG_LAST) && !(flags[3] & ACT_FLAG_LAST));
    s_hand_end(&h, &c, &mt);
}

/* The data stage marks the last `stages` microbatches of its update under
 * way ACT_FLAG_LAST and none ahead of it (the ramp keeps the first updates
 * to a flush): --micro 5 on 3 stages issues 5, the last 3 marked. */
static void test_data_stage_marks_last(void)
{
    opts_t o;
    char err[256];
    char *argv[] = { "node", "--stages", "3", "--layers", "3", "--dim", "16", "--heads", "1", "--ctx", "8", "--batch", "1",
                     "--micro", "5", "--split", "even" };
    opts_defaults(&o, OPTS_NODE);
    CHECKF(opts_parse(&o, OPTS_NODE, 17, argv, 1, err, sizeof err) == 0 && opts_resolve(&o, err, sizeof err) == 0, "%s", err);
    peer_view_t *v = s_hand_view(2, (uint64_t[]){50, 70}, (int[]){1, 2});
    hand_t h = {.now = 100.0};
    net_counters_t net;
    metrics_t *mt;
    compute_t *c = s_hand_compute(&h, &net, &mt, s_hand_cfg(&o, 0, v), "last", NULL, NULL);
    if (!c) return;
    s_hand_clear(&h);
    for (int i = 0; i < 20; i++) compute_step(c, NULL);
    compute_flush(c);
    int n = 0, last = 0, ahead = 0, order_ok = 1;
    for (int i = 0; i < h.nout; i++)
        if (h.out[i]->kind == MAIL_SEND && h.out[i]->hdr.type == WIRE_ACT && !(h.out[i]->hdr.flags & ACT_FLAG_EVAL)) {
            int is_last = (h.out[i]->hdr.flags & ACT_FLAG_LAST) != 0;
            if (is_last != (n >= 2)) order_ok = 0;
            last += is_last;
            ahead += (h.out[i]->hdr.flags & ACT_FLAG_AHEAD) != 0;
            n++;
        }
    CHECKF(n == 5 && last == 3 && ahead == 0 && order_ok, "issued %d, %d marked last (want the last 3 of 5), %d ahead", n, last, ahead);
    s_hand_end(&h, &c, &mt);
}

/* A second copy of the attempt held here (from another previous-stage peer:
 * ids are easy to guess) is dropped: taking it forwarded the microbatch
 * again, possibly to another next-stage peer that applied it too, and sent
 * the honest gradient to the copy's sender. */
static void test_same_attempt_copy_dropped(void)
{
    opts_t o;
    s_hand_opts(&o, "3");
    peer_view_t *v = s_hand_view(4, (uint64_t[]){10, 11, 70, 71}, (int[]){0, 0, 2, 2});
    hand_t h = {.now = 100.0};
    net_counters_t net;
    metrics_t *mt;
    size_t in_n = 0, out_n = 0, targets = (size_t)o.batch * (size_t)o.cfg.maxT;
    compute_t *c = s_hand_compute(&h, &net, &mt, s_hand_cfg(&o, 1, v), "copy", &in_n, &out_n);
    if (!c) return;
    uint64_t first_to = 0, again = 0;
    for (int k = 0; k < 3; k++) {   /* the held copy from 10, then twice the same attempt from 11 */
        s_hand_clear(&h);
        compute_on_mail(c, s_hand_tensor(WIRE_ACT, 777, 1, 1, k ? 11 : 10, in_n, targets));
        compute_step(c, NULL);
        compute_flush(c);
        for (int i = 0; i < h.nout; i++)
            if (h.out[i]->kind == MAIL_SEND && h.out[i]->hdr.type == WIRE_ACT) *(k ? &again : &first_to) = h.out[i]->peer;
    }
    compute_result_t r;
    compute_result(c, &r);
    CHECKF(first_to != 0 && again == 0 && r.drops == 2, "held copy sent to %llu; the same attempt again sent to %llu, drops %llu (want 2)",
           (unsigned long long)first_to, (unsigned long long)again, (unsigned long long)r.drops);
    s_hand_clear(&h);
    compute_on_mail(c, s_hand_tensor(WIRE_GRAD, 777, 1, 1, first_to, out_n, 0));
    compute_step(c, NULL);
    compute_flush(c);
    uint64_t back_to = 0;
    for (int i = 0; i < h.nout; i++) if (h.out[i]->kind == MAIL_SEND && h.out[i]->hdr.type == WIRE_GRAD) back_to = h.out[i]->peer;
    CHECKF(back_to == 10, "the gradient went back to %llu, want the held copy's sender 10", (unsigned long long)back_to);
    s_hand_end(&h, &c, &mt);
}

/* What a middle stage driven by hand sent for the run of s_rc_run: every
 * tensor (activations on, gradients back) in order, and its FLOPs. */
typedef struct {
    int n;
    int type[32];
    uint64_t mb[32];
    float *x[32];
    size_t len[32];
    double flops;
} rc_sent_t;

/* Delivers m to c, runs what it can, and keeps the tensors it sent in *out. */
static void s_rc_deliver(compute_t *c, hand_t *h, mail_t *m, rc_sent_t *out)
{
    s_hand_clear(h);
    compute_on_mail(c, m);
    double f = 0;
    while (compute_step(c, &f)) out->flops += f;
    compute_flush(c);
    for (int i = 0; i < h->nout && out->n < 32; i++) {
        mail_t *s = h->out[i];
        if (s->kind != MAIL_SEND || !s->x) continue;
        out->type[out->n] = s->hdr.type;
        out->mb[out->n] = s->hdr.mb;
        out->len[out->n] = s->n;
        out->x[out->n] = s->x;
        s->x = NULL;
        out->n++;
    }
}

/* A tensor of n floats for mb (its values from mb, so each differs), as s_hand_tensor. */
static mail_t *s_rc_tensor(int type, uint64_t mb, uint64_t from, size_t n, size_t targets)
{
    mail_t *m = s_hand_tensor(type, mb, 1, 1, from, n, targets);
    m->x = malloc(sizeof(float) * n);
    for (size_t i = 0; i < n; i++) m->x[i] = sinf((float)(i * 7 + mb * 13)) * (type == WIRE_ACT ? 1.0f : 1e-3f);
    return m;
}

/* Stage 1 of 3 of a small gpt, real compute, --micro 2, --recompute as
 * given: four activations in flight, their gradients back out of order with
 * updates between (so backwards run at stashed versions), one more
 * activation before the last gradients and one after the last update. */
static void s_rc_run(int recompute, rc_sent_t *out)
{
    opts_t o;
    char err[256];
    s_hand_opts(&o, "3");
    o.micro = 2;
    o.recompute = recompute;
    memset(out, 0, sizeof *out);
    stage_state_t *st = stage_state_new(&o.cfg, 1, 3, o.seed, err, sizeof err);
    CHECKF(st != NULL, "%s", err);
    if (!st) return;
    peer_view_t *v = s_hand_view(2, (uint64_t[]){10, 70}, (int[]){0, 2});
    hand_t h = {.now = 100.0};
    net_counters_t net;
    metrics_t *mt;
    size_t in_n = 0, out_n = 0, targets = (size_t)o.batch * (size_t)o.cfg.maxT;
    compute_t *c = s_hand_compute(&h, &net, &mt, (compute_cfg_t){.o = &o, .id = 99, .run = 1, .stage = 1, .plan = SPLIT_EVEN,
                                                                 .view = v, .st = st}, "recompute", &in_n, &out_n);
    if (!c) return;
    const struct { int type; uint64_t mb; } ev[] = {
        {WIRE_ACT, 1}, {WIRE_ACT, 2}, {WIRE_ACT, 3}, {WIRE_ACT, 4}, {WIRE_GRAD, 2}, {WIRE_GRAD, 1},
        {WIRE_ACT, 5}, {WIRE_GRAD, 4}, {WIRE_GRAD, 3}, {WIRE_GRAD, 5}, {WIRE_ACT, 6}};
    for (size_t i = 0; i < sizeof ev / sizeof ev[0]; i++) {
        int act = ev[i].type == WIRE_ACT;
        s_rc_deliver(c, &h, s_rc_tensor(ev[i].type, ev[i].mb, act ? 10 : 70, act ? in_n : out_n, act ? targets : 0), out);
    }
    compute_result_t r;
    compute_result(c, &r);
    CHECKF(r.version == 2 && r.drops == 0, "recompute %d: version %lld (want 2), drops %llu", recompute,
           (long long)r.version, (unsigned long long)r.drops);
    s_hand_end(&h, &c, &mt);
}

/* --recompute on keeps only each microbatch's input and runs its forward
 * again at its backward, at the weights its forward used: every tensor a
 * stage sends (its outputs, and the input gradients, which carry the
 * weights of each update) is the same bits as with it off, and the redone
 * forwards are work done. */
static void test_recompute_same_bits(void)
{
    rc_sent_t off, on;
    s_rc_run(RECOMPUTE_OFF, &off);
    s_rc_run(RECOMPUTE_ON, &on);
    int same = off.n == on.n && off.n == 11;
    for (int i = 0; same && i < off.n; i++)
        same = off.type[i] == on.type[i] && off.mb[i] == on.mb[i] && off.len[i] == on.len[i]
               && memcmp(off.x[i], on.x[i], sizeof(float) * off.len[i]) == 0;
    CHECKF(same, "recompute on sent %d tensors, off %d (want 11 each, the same bits)", on.n, off.n);
    CHECKF(on.flops > off.flops, "recompute on did %.0f FLOPs, off %.0f: no forward was run again", on.flops, off.flops);
    for (int i = 0; i < off.n; i++) free(off.x[i]);
    for (int i = 0; i < on.n; i++) free(on.x[i]);
}

/* An evaluation activation whose id names no batch of its round (index at
 * or past the round's count) is dropped and counted, before any forward. */
static void test_bad_eval_act_counted(void)
{
    opts_t o;
    s_hand_opts(&o, "3");
    peer_view_t *v = s_hand_view(2, (uint64_t[]){10, 50}, (int[]){0, 1});
    hand_t h = {.now = 100.0};
    net_counters_t net;
    metrics_t *mt;
    size_t in_n = 0, targets = (size_t)o.batch * (size_t)o.cfg.maxT;
    compute_t *c = s_hand_compute(&h, &net, &mt, s_hand_cfg(&o, 2, v), "evalbad", &in_n, NULL);
    if (!c) return;
    uint64_t ids[] = {(5ull << 32) | (0 << 16) | 3, (5ull << 32) | (4 << 16) | 9, (5ull << 32) | (4 << 16) | 4};
    for (int k = 0; k < 3; k++) {
        mail_t *m = s_hand_tensor(WIRE_ACT, ids[k], 2, 1, 50, in_n, targets);
        m->hdr.flags |= ACT_FLAG_EVAL;
        compute_on_mail(c, m);
        compute_step(c, NULL);
    }
    compute_flush(c);
    compute_result_t r;
    compute_result(c, &r);
    CHECKF(r.drops == 3, "3 evaluation activations naming no batch (count 0; index 9 and 4 of 4): %llu drops counted",
           (unsigned long long)r.drops);
    s_hand_end(&h, &c, &mt);
}

/* A node restarted from its checkpoint (version 630) while a peer of its
 * stage is further ahead downloads from that peer; when no download comes
 * it keeps its checkpoint's state, and refuses a backup older than it (it
 * once fell to its initial weights, which its next save wrote over the
 * checkpoint). */
static void test_restart_keeps_checkpoint(void)
{
    opts_t o;
    char err[256];
    s_hand_opts(&o, "2");
    peer_view_t *v = peer_view_new(2);
    v->p[0] = (view_peer_t){.id = 10, .stage = 0, .health = PEER_ALIVE, .rtt_ms = 20, .rtt_min_ms = 20, .rate = 1, .loss = NAN};
    v->p[1] = (view_peer_t){.id = 60, .stage = 1, .health = PEER_ALIVE, .rtt_ms = 20, .rtt_min_ms = 20, .rate = 1, .loss = NAN,
                            .version = 700};
    v->plan = SPLIT_EVEN;
    peer_view_index(v);
    int use_ck;
    uint64_t donor;
    int start = compute_choose_start(v, 1, 630, 1, &donor, &use_ck);
    CHECK(start == START_DOWNLOAD && donor == 60 && !use_ck);
    stage_state_t *st = stage_state_new(&o.cfg, 1, 2, o.seed, err, sizeof err);
    CHECKF(st != NULL, "%s", err);
    if (!st) { free(v); return; }
    size_t np = st->s.nparams;
    for (size_t i = 0; i < np; i++) st->params[i] = 0.25f;   /* the checkpoint's weights */
    st->version = 630;
    hand_t h = {.now = 100.0};
    net_counters_t net;
    metrics_t *mt;
    compute_t *c = s_hand_compute(&h, &net, &mt, (compute_cfg_t){.o = &o, .id = 99, .run = 1, .stage = 1, .plan = SPLIT_EVEN,
                                                                 .view = v, .st = st, .start = start, .donor = donor},
                                  "restart", NULL, NULL);
    if (!c) return;
    /* every download ends with nothing; every backup that comes is older than the checkpoint */
    int downloads = 0, backups = 0;
    for (int64_t d; downloads + backups < 12 && (d = s_hand_fetch(&h)) >= 0;) {
        if (d > 0) { downloads++; s_hand_fetch_fails(c, &h, 1, (uint64_t)d); continue; }
        backups++;
        s_hand_clear(&h);
        mail_t *m = mail_new(MAIL_STATE);
        m->hdr.stage = 1;
        m->state = state_blob_new(1, np);
        m->state->version = 100;
        m->state->backup = 1;
        m->state->nparams = np;
        compute_on_mail(c, m);
        compute_flush(c);
    }
    CHECKF(downloads >= 1 && backups >= 1 && s_hand_fetch(&h) == -1, "%d downloads, %d backups asked for, still fetching: %d",
           downloads, backups, s_hand_fetch(&h) != -1);
    compute_result_t r;
    compute_result(c, &r);
    const stage_state_t *now = compute_state(c);
    CHECKF(r.version == 630 && now && now->params[0] == 0.25f && now->params[np - 1] == 0.25f,
           "after the downloads failed and an older backup came: version %lld, weights %g (want 630, the checkpoint's 0.25)",
           (long long)r.version, now ? now->params[0] : -1.0);
    CHECKF(h.nsaid > 0 && strstr(h.said[(h.nsaid - 1) % 8], "resumes from its checkpoint at version 630"),
           "said: '%s'", h.nsaid ? h.said[(h.nsaid - 1) % 8] : "");
    s_hand_end(&h, &c, &mt);
}

/* The split the last MAIL_SELF among the posted mail says, or -2 (none). */
static int s_hand_self_plan(const hand_t *h)
{
    int plan = -2;
    for (int i = 0; i < h->nout; i++)
        if (h->out[i]->kind == MAIL_SELF) plan = h->out[i]->self.plan;
    return plan;
}

/* The view of s_hand_view(5: stages 0, 1, 1, 2, 3) saying split `plan`,
 * the two stage-1 peers (50, 51) on late and even, at versions 7 and 9. */
static peer_view_t *s_split_view(int plan)
{
    const uint64_t ids[] = {10, 50, 51, 60, 70};
    const int stages[] = {0, 1, 1, 2, 3};
    peer_view_t *v = s_hand_view(5, ids, stages);
    v->plan = plan;
    v->p[1].plan = SPLIT_LATE;
    v->p[1].version = 7;
    v->p[2].plan = SPLIT_EVEN;
    v->p[2].version = 9;
    return v;
}

/* The view's split, given to the compute side (ownership passes). */
static void s_hand_view_mail(compute_t *c, hand_t *h, int plan)
{
    s_hand_clear(h);
    mail_t *m = mail_new(MAIL_VIEW);
    m->view = s_split_view(plan);
    compute_on_mail(c, m);
    compute_flush(c);
}

/* --split auto, two data-stage nodes that chose apart: a node on the even
 * split that hears of the late one (which takes precedence) lays it out and
 * downloads its stage's state from the peer of its stage on late (not the
 * one on even, at a higher version); a view saying even again, or a split
 * that is none, changes nothing, and a tensor of the even split is dropped
 * from then on.  A node whose --split is given keeps it. */
static void test_split_of_precedence(void)
{
    for (int given = 0; given < 2; given++) {
        opts_t o;
        s_hand_opts(&o, "4");
        o.split = given ? SPLIT_EVEN : SPLIT_AUTO;
        hand_t h = {.now = 100.0};
        net_counters_t net;
        metrics_t *mt;
        size_t in_n = 0;
        compute_t *c = s_hand_compute(&h, &net, &mt, s_hand_cfg(&o, 1, s_split_view(SPLIT_EVEN)),
                                      "apart", &in_n, NULL);
        if (!c) return;
        s_hand_view_mail(c, &h, SPLIT_LATE);
        int took = s_hand_self_plan(&h);
        int64_t donor = s_hand_fetch(&h);
        if (given) {
            CHECKF(took == -2 && donor == -1, "--split even given: said split %d, fetched from %lld (want neither)", took, (long long)donor);
            s_hand_end(&h, &c, &mt);
            continue;
        }
        CHECKF(took == SPLIT_LATE && donor == 50, "took split %d from %lld (want late, 1, from 50)", took, (long long)donor);
        CHECKF(h.nsaid > 0 && strstr(h.said[(h.nsaid - 1) % 8], "takes precedence over the even split"), "said '%s'",
               h.nsaid ? h.said[(h.nsaid - 1) % 8] : "");
        int said = h.nsaid;
        s_hand_view_mail(c, &h, SPLIT_EVEN);
        s_hand_view_mail(c, &h, SPLIT_AUTO);   /* not a split a peer can say: no layout */
        CHECKF(s_hand_self_plan(&h) == -2 && s_hand_fetch(&h) == -1 && h.nsaid == said, "a view of even or of no split changed the split");
        compute_result_t r;
        compute_result(c, &r);
        mail_t *t = s_hand_tensor(WIRE_ACT, 4242, 1, 1, 10, in_n, (size_t)o.batch * (size_t)o.cfg.maxT);
        t->hdr.flags |= plan_flags(SPLIT_EVEN);
        compute_on_mail(c, t);
        compute_result_t r2;
        compute_result(c, &r2);
        CHECKF(r2.drops == r.drops + 1, "a tensor of the even split: drops %llu -> %llu (want one more)",
               (unsigned long long)r.drops, (unsigned long long)r2.drops);
        s_hand_end(&h, &c, &mt);
    }
}

int main(void)
{
    RUN(test_mover_fetches_elsewhere);
    RUN(test_restart_keeps_checkpoint);
    RUN(test_bad_reissue_keeps_held);
    RUN(test_marks_set_the_order);
    RUN(test_data_stage_marks_last);
    RUN(test_same_attempt_copy_dropped);
    RUN(test_recompute_same_bits);
    RUN(test_bad_eval_act_counted);
    RUN(test_split_of_precedence);
    CHECK_EXIT();
}
