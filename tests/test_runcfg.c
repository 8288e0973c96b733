/* test_runcfg: the run config a creator sends its joiners
 * (proto_put_runcfg / proto_get_runcfg) and the run id over it: every run
 * field carried, damaged or out-of-range configs refused, and one validator
 * with the same bounds and messages on both sides. */
#include "tests/check.h"
#include "tests/runtime_fixture.h"
#include "net/wire.h"
#include "node/engine/staleness.h"
#include "node/runtime/compute.h"
#include "node/runtime/options.h"
#include "node/runtime/proto.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* A creator's options with every run field away from its default. */
#define S_CREATOR_LINE "--model gpt-tiny --layers 3 --dim 64 --heads 2 --ctx 32 --data synthetic " \
    "--stages 3 --steps 123 --batch 5 --micro 2 --lr 0.002 --wd 0.05 --warmup 7 --clip 0.5 " \
    "--codec int4 --grad-codec bf16 --schedule gpipe --split late --stash 2bw --max-inflight 6 --max-delay 0 --seed 99 " \
    "--recompute on " \
    "--eval-every 11 --eval-batches 5 --staleness lr+ramp --listen 127.0.0.1:40001 --metrics /tmp/creator.jsonl --threads 2"

static void s_creator(opts_t *o)
{
    char err[512];
    int rc = s_parse(o, OPTS_NODE, S_CREATOR_LINE, err, sizeof err);
    if (rc != 0 || opts_resolve(o, err, sizeof err) != 0) {
        printf("  creator options refused: %s\n", err);
        check_case_failed = 1;
    }
    o->closed = 1;
    for (int i = 0; i < 32; i++) o->owner_pub[i] = (uint8_t)(0xA0 + i);
}

/* A joiner's options: only local ones. */
static void s_joiner(opts_t *o)
{
    char err[512];
    s_parse(o, OPTS_NODE, "--listen 127.0.0.1:40002 --join 127.0.0.1:40001/abc --metrics /tmp/joiner.jsonl "
            "--threads 3 --stage 1 --checkpoint /tmp/ck --keys /tmp/keys --emu-latency-ms 5", err, sizeof err);
    opts_resolve(o, err, sizeof err);
}

static size_t s_encode(const opts_t *o, uint8_t *buf, size_t cap)
{
    wbuf_t w;
    wbuf_init_fixed(&w, buf, cap);
    proto_put_runcfg(&w, o);
    return wbuf_error(&w) ? 0 : w.len;
}

static void test_opts_run_roundtrip(void)
{
    opts_t c, j;
    s_creator(&c);
    s_joiner(&j);
    uint8_t buf[8192];
    size_t len = s_encode(&c, buf, sizeof buf);
    CHECK(len > 0);
    rbuf_t r;
    rbuf_init(&r, buf, len);
    char err[256] = "";
    int rc = proto_get_runcfg(&r, &j, err, sizeof err);
    CHECKF(rc == 0, "%s", err);
    if (rc != 0) return;
    CHECK(rbuf_remaining(&r) == 0);
    /* every run field */
    CHECK(memcmp(&j.cfg, &c.cfg, sizeof c.cfg) == 0);
    CHECK(strcmp(j.model, c.model) == 0);
    CHECK(strcmp(j.data, c.data) == 0);
    CHECK(j.stages == 3 && j.steps == 123 && j.batch == 5 && j.micro == 2);
    CHECK(j.optim.lr == c.optim.lr && j.optim.wd == c.optim.wd && j.optim.clip == c.optim.clip);
    CHECK(j.optim.warmup == 7 && j.optim.total == 123);
    CHECK(strcmp(j.codec, "int4") == 0 && strcmp(j.grad_codec, "bf16") == 0);
    CHECK(j.schedule == SCHED_GPIPE && j.stash == STASH_2BW);
    CHECK(j.split == SPLIT_LATE && j.cfg.split == SPLIT_LATE);
    CHECK(j.recompute == RECOMPUTE_ON);
    CHECK(j.max_inflight == 6 && j.eval_every == 11 && j.eval_batches == 5 && j.seed == 99);
    CHECK(j.staleness == (STALE_LR | STALE_RAMP) && j.max_delay == 0 && j.max_delay_given == c.max_delay_given);
    CHECK(j.optim.kind == OPTIM_ADAMW);
    CHECK(j.closed == 1 && memcmp(j.owner_pub, c.owner_pub, 32) == 0);
    CHECK(opts_run_id(&j) == opts_run_id(&c));
    char a[2048], b[2048];
    opts_run_text(&c, a, sizeof a);
    opts_run_text(&j, b, sizeof b);
    CHECK(strcmp(a, b) == 0);
    /* the local ones stay the joiner's */
    CHECK(strcmp(j.listen, "127.0.0.1:40002") == 0);
    CHECK(strcmp(j.join, "127.0.0.1:40001/abc") == 0);
    CHECK(strcmp(j.metrics, "/tmp/joiner.jsonl") == 0);
    CHECK(strcmp(j.checkpoint, "/tmp/ck") == 0 && strcmp(j.keys, "/tmp/keys") == 0);
    CHECK(j.threads == 3 && j.stage == 1 && j.emu_latency_ms == 5.0);
}

static void test_opts_run_truncated(void)
{
    opts_t c, j, keep;
    s_creator(&c);
    s_joiner(&j);
    keep = j;
    uint8_t buf[8192];
    size_t len = s_encode(&c, buf, sizeof buf);
    CHECK(len > 0);
    int accepted = 0, changed = 0, noreason = 0;
    for (size_t n = 0; n < len; n++) {
        uint8_t *cut = malloc(n ? n : 1);  /* exact size: ASan sees any over-read */
        memcpy(cut, buf, n);
        rbuf_t r;
        rbuf_init(&r, cut, n);
        char err[256] = "";
        if (proto_get_runcfg(&r, &j, err, sizeof err) == 0) accepted++;
        else if (!err[0]) noreason++;
        if (memcmp(&j, &keep, sizeof j) != 0) { changed++; j = keep; }
        free(cut);
    }
    CHECKF(accepted == 0, "%d truncations accepted", accepted);
    CHECKF(changed == 0, "%d failed decodes changed the options", changed);
    CHECKF(noreason == 0, "%d failures without a reason", noreason);
}

/* Encodes c, decodes into a joiner: 0 when accepted. */
static int s_decode_of(const opts_t *c)
{
    opts_t j;
    s_joiner(&j);
    uint8_t buf[8192];
    size_t len = s_encode(c, buf, sizeof buf);
    if (!len) return -2;
    rbuf_t r;
    rbuf_init(&r, buf, len);
    char err[256];
    return proto_get_runcfg(&r, &j, err, sizeof err);
}

/* --split auto: the run config carries "auto" (the even layout until the
 * data stage chooses); a message's flags say the choice, and a starting
 * node takes its checkpoint's split first, then what the network heard. */
static void test_split_auto_plan(void)
{
    opts_t c, j;
    s_creator(&c);
    c.split = SPLIT_AUTO;
    c.cfg.split = SPLIT_EVEN;
    uint8_t buf[8192];
    size_t len = s_encode(&c, buf, sizeof buf);
    CHECK(len > 0);
    s_joiner(&j);
    rbuf_t r;
    rbuf_init(&r, buf, len);
    char err[256] = "";
    CHECKF(proto_get_runcfg(&r, &j, err, sizeof err) == 0, "%s", err);
    CHECK(j.split == SPLIT_AUTO && j.cfg.split == SPLIT_EVEN && opts_run_id(&j) == opts_run_id(&c));
    opts_t e = c;
    e.split = SPLIT_EVEN;
    CHECK(opts_run_id(&e) != opts_run_id(&c));   /* another run than the even one */
    opts_t g = c;
    g.max_delay_given = !c.max_delay_given;
    CHECK(opts_run_id(&g) != opts_run_id(&c));   /* the budget's extra update under auto hangs on it */
    CHECK(plan_of_flags(plan_flags(-1)) == -1 && plan_flags(-1) == 0);
    CHECK(plan_of_flags(plan_flags(SPLIT_EVEN)) == SPLIT_EVEN && plan_of_flags(plan_flags(SPLIT_LATE)) == SPLIT_LATE);
    CHECK(plan_of_flags(PLAN_FLAG_LATE) == -1);   /* not said without the known bit */
    uint32_t f = ACT_FLAG_EVAL | ACT_FLAG_FINAL | (0xffu << MB_ATTEMPT_SHIFT);
    CHECK((plan_flags(SPLIT_LATE) & f) == 0);     /* clear of every type's own bits */
    CHECK(compute_plan(&c, -1, -1) == -1 && compute_plan(&c, -1, SPLIT_LATE) == SPLIT_LATE);
    CHECK(compute_plan(&c, SPLIT_EVEN, SPLIT_LATE) == SPLIT_EVEN);   /* the checkpoint's first */
    CHECK(compute_plan(&e, SPLIT_LATE, SPLIT_LATE) == SPLIT_EVEN);   /* not auto: the run's */
    opts_t o;
    char *argv[] = { "node", "--split", "bogus" };
    opts_defaults(&o, OPTS_NODE);
    CHECK(opts_parse(&o, OPTS_NODE, 3, argv, 1, err, sizeof err) == -1 && strstr(err, "want even, late, front or auto"));
}

static void test_opts_run_out_of_range(void)
{
    opts_t base, c;
    s_creator(&base);
    CHECK(s_decode_of(&base) == 0);
    c = base; c.optim.clip = INFINITY;      CHECK(s_decode_of(&c) == -1);
    c = base; c.optim.lr = NAN;             CHECK(s_decode_of(&c) == -1);
    c = base; c.optim.lr = -1.0f;           CHECK(s_decode_of(&c) == -1);
    c = base; c.optim.wd = INFINITY;        CHECK(s_decode_of(&c) == -1);
    c = base; c.cfg.L = 1000000;            CHECK(s_decode_of(&c) == -1);
    c = base; c.cfg.C = 1 << 30;            CHECK(s_decode_of(&c) == -1);
    c = base; c.cfg.NH = 3;                 CHECK(s_decode_of(&c) == -1);
    c = base; c.cfg.V = -5;                 CHECK(s_decode_of(&c) == -1);
    c = base; c.cfg.kind = (model_kind_t)7; CHECK(s_decode_of(&c) == -1);
    c = base; snprintf(c.codec, sizeof c.codec, "int3");      CHECK(s_decode_of(&c) == -1);
    c = base; c.grad_codec[0] = 0; CHECK(s_decode_of(&c) == -1);
    c = base; snprintf(c.cfg.name, sizeof c.cfg.name, "gpt\x1b[2J"); CHECK(s_decode_of(&c) == -1);   /* printed by joiners */
    c = base; snprintf(c.data, sizeof c.data, "text:/a\rb");         CHECK(s_decode_of(&c) == -1);
    c = base; snprintf(c.data, sizeof c.data, "text:/home/jos\xc3\xa9/fortunes"); CHECK(s_decode_of(&c) == 0);   /* UTF-8 */
    c = base; c.stages = c.cfg.L + 2;       CHECK(s_decode_of(&c) == -1);   /* more stages than layers */
    c.split = SPLIT_EVEN; c.stages = c.cfg.L + 1; CHECK(s_decode_of(&c) == -1);   /* the late split has one more */
    c = base; c.split = SPLIT_FRONT; c.stages = c.cfg.L; CHECK(s_decode_of(&c) == 0);
    c.stages = c.cfg.L + 1;                 CHECK(s_decode_of(&c) == -1);   /* a block per later stage, one at stage 0 */
    c = base; c.split = 4;                  CHECK(s_decode_of(&c) == -1);
    c = base; c.split = SPLIT_AUTO; c.stages = c.cfg.L; CHECK(s_decode_of(&c) == 0);
    c.stages = c.cfg.L + 1;                 CHECK(s_decode_of(&c) == -1);   /* auto may choose even: its stage count */
    c = base; c.stages = 100000;            CHECK(s_decode_of(&c) == -1);
    c = base; c.stages = 0;                 CHECK(s_decode_of(&c) == -1);
    c = base; c.stages = -2;                CHECK(s_decode_of(&c) == -1);
    c = base; c.steps = 0;                  CHECK(s_decode_of(&c) == -1);
    c = base; c.batch = 0;                  CHECK(s_decode_of(&c) == -1);
    c = base; c.batch = 1 << 30;            CHECK(s_decode_of(&c) == -1);
    c = base; c.micro = -1;                 CHECK(s_decode_of(&c) == -1);
    c = base; c.schedule = 2;               CHECK(s_decode_of(&c) == -1);
    c = base; c.stash = 9;                  CHECK(s_decode_of(&c) == -1);
    c = base; c.max_inflight = -1;          CHECK(s_decode_of(&c) == -1);
    c = base; c.recompute = RECOMPUTE_ON + 1; CHECK(s_decode_of(&c) == -1);
    c = base; c.recompute = RECOMPUTE_ON;   CHECK(s_decode_of(&c) == 0);
    c = base; c.eval_every = -1;            CHECK(s_decode_of(&c) == -1);
    c = base; c.staleness = STALE_ALL + 1;  CHECK(s_decode_of(&c) == -1);
    c = base; c.staleness = 0;              CHECK(s_decode_of(&c) == 0);
    c = base; c.optim.kind = 2;             CHECK(s_decode_of(&c) == -1);
    c = base; c.bottleneck = 2;             CHECK(s_decode_of(&c) == 0);
    c = base; c.bottleneck = 2; c.init_size = 7; CHECK(s_decode_of(&c) == 0);   /* both tails */
    c = base; c.bottleneck = 3;             CHECK(s_decode_of(&c) == -1);   /* not dividing the width 64 */
    c = base; c.bottleneck = 1 << 30;       CHECK(s_decode_of(&c) == -1);
    c = base; c.staleness |= STALE_DC; c.optim.kind = OPTIM_MUON; CHECK(s_decode_of(&c) == -1);   /* dc with muon */
    c.staleness = STALE_LR;                 CHECK(s_decode_of(&c) == 0);
    /* a flag byte that is neither 0 nor 1 */
    uint8_t buf[8192];
    size_t len = s_encode(&base, buf, sizeof buf);
    CHECK(len > 39);
    buf[len - 39] = 2;   /* closed: before the owner key, the staleness flags, the delay budget, the optimizer, the split,
                            whether the budget was given, --recompute */
    rbuf_t r;
    rbuf_init(&r, buf, len);
    opts_t j;
    s_joiner(&j);
    char err[256];
    CHECK(proto_get_runcfg(&r, &j, err, sizeof err) == -1);
    len = s_encode(&base, buf, sizeof buf);
    buf[len - 2] = 2;    /* whether the budget was given */
    rbuf_init(&r, buf, len);
    CHECK(proto_get_runcfg(&r, &j, err, sizeof err) == -1);
}

static void test_opts_run_id(void)
{
    opts_t base, c;
    s_creator(&base);
    uint64_t id = opts_run_id(&base);
    CHECK(id == opts_run_id(&base));
    int same = 0;
#define DIFF(stmt) do { c = base; stmt; if (opts_run_id(&c) == id) { same++; printf("  run id unchanged by: %s\n", #stmt); } } while (0)
    DIFF(snprintf(c.cfg.name, sizeof c.cfg.name, "gpt-small"));
    DIFF(c.cfg.L = 4);
    DIFF(c.cfg.C = 128);
    DIFF(c.cfg.NH = 4);
    DIFF(c.cfg.maxT = 64);
    DIFF(snprintf(c.data, sizeof c.data, "text:/tmp/x"));
    DIFF(c.stages = 2);
    DIFF(c.steps = 124);
    DIFF(c.batch = 6);
    DIFF(c.micro = 3);
    DIFF(c.optim.lr = 0.0021f);
    DIFF(c.optim.wd = 0.06f);
    DIFF(c.optim.warmup = 8);
    DIFF(c.optim.clip = 0.6f);
    DIFF(snprintf(c.codec, sizeof c.codec, "int8"));
    DIFF(snprintf(c.grad_codec, sizeof c.grad_codec, "int8"));
    DIFF(c.schedule = SCHED_ASYNC);
    DIFF(c.stash = STASH_FULL);
    DIFF(c.split = c.cfg.split = SPLIT_EVEN);
    DIFF(c.staleness = STALE_DEFAULT);
    DIFF(c.seed = 100);
    DIFF(c.closed = 0);
    DIFF(c.owner_pub[0] ^= 1);
    CHECKF(same == 0, "%d run fields do not change the run id", same);
#undef DIFF
    /* local options never change it */
    int moved = 0;
#define SAME(stmt) do { c = base; stmt; if (opts_run_id(&c) != id) { moved++; printf("  run id changed by: %s\n", #stmt); } } while (0)
    SAME(snprintf(c.listen, sizeof c.listen, "0.0.0.0:9"));
    SAME(snprintf(c.join, sizeof c.join, "127.0.0.1:1/x"));
    SAME(snprintf(c.metrics, sizeof c.metrics, "/tmp/other.jsonl"));
    SAME(snprintf(c.checkpoint, sizeof c.checkpoint, "/tmp/ck2"));
    SAME(snprintf(c.keys, sizeof c.keys, "/tmp/k2"));
    SAME(snprintf(c.ticket, sizeof c.ticket, "abc"));
    SAME(c.threads = 7);
    SAME(c.stage = 2);
    SAME(c.http = 8080);
    SAME(c.emu_latency_ms = 50);
    SAME(c.emu_slowdown = 3);
    SAME(c.save_every = 3);
#undef SAME
    CHECKF(moved == 0, "%d local options change the run id", moved);
}

/* The whole owner key and --max-inflight (sent to joiners and part of the
 * computation: 1 makes the swarm sequential) belong to the run identity. */
static void test_opts_run_id_all_run_fields(void)
{
    opts_t base, c;
    s_creator(&base);
    uint64_t id = opts_run_id(&base);
    c = base; c.owner_pub[31] ^= 1;
    CHECKF(opts_run_id(&c) != id, "owner key byte 31 does not change the run id");
    c = base; c.owner_pub[12] ^= 0x80;
    CHECKF(opts_run_id(&c) != id, "owner key byte 12 does not change the run id");
    c = base; c.max_inflight = 1;
    CHECKF(opts_run_id(&c) != id, "--max-inflight does not change the run id");
    c = base; c.eval_batches = 6;
    CHECKF(opts_run_id(&c) != id, "--eval-batches does not change the run id");
    c = base; c.optim.kind = OPTIM_MUON;
    CHECKF(opts_run_id(&c) != id, "--optim does not change the run id");
}

/* ---- one validator, both sides ------------------------------------------ */

/* Creator side: the creator's options with "--name value" added, through
 * parse and resolve.  Returns 0 or -1 with err. */
static int s_creator_with(const char *name, const char *value, char *err, size_t errlen)
{
    opts_t o;
    char line[1024];
    snprintf(line, sizeof line, "%s --%s %s", S_CREATOR_LINE, name, value);
    int rc = s_parse(&o, OPTS_NODE, line, err, errlen);
    if (rc == 0) rc = opts_resolve(&o, err, errlen);
    return rc;
}

/* Joiner side: a creator whose run config holds value for option name,
 * sent as a WELCOME would carry it and decoded by a joiner.  Returns 0 or
 * -1 with err. */
static int s_joiner_gets(const char *name, const char *value, char *err, size_t errlen)
{
    opts_t c;
    s_creator(&c);
    char opt[64];
    snprintf(opt, sizeof opt, "--%s", name);
    char *argv[4] = {"brigade", opt, (char *)value, NULL};
    if (opts_parse(&c, OPTS_NODE, 3, argv, 1, err, errlen) != 0) return -2;   /* no range checks here */
    if (c.layers) c.cfg.L = c.layers;
    if (c.dim) c.cfg.C = c.dim;
    if (c.ctx) c.cfg.maxT = c.ctx;
    opts_t j;
    s_joiner(&j);
    uint8_t buf[8192];
    size_t len = s_encode(&c, buf, sizeof buf);
    if (!len) return -2;
    rbuf_t r;
    rbuf_init(&r, buf, len);
    return proto_get_runcfg(&r, &j, err, errlen);
}

/* Every bounded run option: the values just outside are refused, the bounds
 * themselves accepted, by the creator (solo uses the same opts_resolve) and
 * by a joiner receiving them, with the same message naming the option. */
static void test_opts_same_bounds_both_sides(void)
{
    static const struct { const char *name, *v[4]; } cases[] = {   /* below, lowest, highest, above; NULL: skip */
        {"steps",        {"0", "1", "100000000", "100000001"}},
        {"batch",        {"0", "1", NULL, "65537"}},            /* 65536 x 32 x 64 values: more than a frame's bytes */
        {"micro",        {"0", "1", "65536", "65537"}},
        {"lr",           {"0", "1e-9", "10", "10.001"}},
        {"wd",           {"-0.001", "0", "10", "10.001"}},
        {"warmup",       {"-1", "0", "100000000", "100000001"}},
        {"clip",         {"-0.001", "0", "1000000", "1000001"}},
        {"max-inflight", {"-1", "0", "4096", "4097"}},
        {"eval-every",   {"-1", "0", "100000000", "100000001"}},
        {"eval-batches", {"-1", "0", "65535", "65536"}},
        {"stages",       {"0", "1", "4", "5"}},                 /* the creator's 3 blocks, split late */
        {"ctx",          {"1", "2", "4096", "4097"}},
        {"layers",       {NULL, "3", "128", "129"}},            /* 0 means the preset's, on the command line */
        {"dim",          {NULL, "2", NULL, "8194"}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        for (int k = 0; k < 4; k++) {
            const char *v = cases[i].v[k];
            if (!v) continue;
            char ec[512] = "", ej[512] = "";
            int rc = s_creator_with(cases[i].name, v, ec, sizeof ec);
            int rj = s_joiner_gets(cases[i].name, v, ej, sizeof ej);
            int bad = k == 0 || k == 3;
            if (!bad) {
                CHECKF(rc == 0, "creator --%s %s refused: %s", cases[i].name, v, ec);
                CHECKF(rj == 0, "joiner refused --%s %s: %s", cases[i].name, v, ej);
                continue;
            }
            char opt[64], want[600];
            snprintf(opt, sizeof opt, "--%s ", cases[i].name);
            snprintf(want, sizeof want, "run config: %s", ec);
            CHECKF(rc == -1 && strstr(ec, opt) == ec, "creator --%s %s: rc %d '%s'", cases[i].name, v, rc, ec);
            CHECKF(rj == -1 && strcmp(ej, want) == 0, "joiner --%s %s: rc %d '%s', creator said '%s'", cases[i].name, v, rj, ej, ec);
        }
    }
    /* the case that started it: a run the creator starts, every joiner refuses */
    char err[512];
    CHECK(s_creator_with("steps", "100000001", err, sizeof err) == -1);
    CHECKF(strcmp(err, "--steps 100000001: must be 1..100000000") == 0, "%s", err);
}

/* The stage count has one bound (MODEL_STAGES_MAX): a model that could be
 * cut finer (an mlp of 128 hidden layers has 129 units) is refused past it
 * on both sides, with the same message; --stage N likewise. */
static void test_opts_stages_max(void)
{
    char ec[512] = "", ej[512] = "";
    opts_t o;
    int rc = s_parse(&o, OPTS_NODE, "--model mlp-fmnist --layers 128 --dim 8 --stages 129", ec, sizeof ec);
    if (rc == 0) rc = opts_resolve(&o, ec, sizeof ec);
    CHECKF(rc == -1 && strcmp(ec, "--stages 129: must be 1..128") == 0, "rc %d: %s", rc, ec);
    CHECK(s_parse(&o, OPTS_NODE, "--model mlp-fmnist --layers 128 --dim 8 --stages 128", ec, sizeof ec) == 0);
    CHECKF(opts_resolve(&o, ec, sizeof ec) == 0, "%s", ec);
    o.stages = 129;   /* a creator's config past the bound, as a joiner would receive it */
    opts_t j;
    s_joiner(&j);
    uint8_t buf[8192];
    size_t len = s_encode(&o, buf, sizeof buf);
    rbuf_t r;
    rbuf_init(&r, buf, len);
    CHECK(proto_get_runcfg(&r, &j, ej, sizeof ej) == -1);
    CHECKF(strcmp(ej, "run config: --stages 129: must be 1..128") == 0, "%s", ej);
    CHECK(s_refused(OPTS_NODE, "--stage 128", "--stage 128: want auto or a stage number 0..127"));
    CHECK(s_parse(&o, OPTS_NODE, "--stage 127", ec, sizeof ec) == 0 && o.stage == 127);
}

/* --bottleneck: carried to joiners (the model, so the run id), and refused
 * alike on both sides where S does not divide the width or there is no cut. */
static void test_opts_bottleneck(void)
{
    opts_t c, j;
    char err[512] = "", ec[512] = "", ej[512] = "";
    CHECK(s_parse(&c, OPTS_NODE, "--model gpt-tiny --dim 64 --heads 2 --stages 3 --bottleneck 4", err, sizeof err) == 0);
    CHECKF(opts_resolve(&c, err, sizeof err) == 0, "%s", err);
    CHECK(c.cfg.bneck == 4 && c.cfg.bneck_k == 3);
    s_joiner(&j);
    uint8_t buf[8192];
    size_t len = s_encode(&c, buf, sizeof buf);
    rbuf_t r;
    rbuf_init(&r, buf, len);
    CHECKF(proto_get_runcfg(&r, &j, err, sizeof err) == 0, "%s", err);
    CHECK(j.bottleneck == 4 && memcmp(&j.cfg, &c.cfg, sizeof c.cfg) == 0 && opts_run_id(&j) == opts_run_id(&c));
    opts_t d = c;
    d.bottleneck = d.cfg.bneck = 8;
    CHECK(opts_run_id(&d) != opts_run_id(&c));
    const char *bad[2][2] = { { "--stages 3 --bottleneck 3", "--bottleneck 3: must divide the width 64 (--dim)" },
                              { "--stages 1 --bottleneck 4", "--bottleneck 4: --stages 1 has no cut to narrow (give --stages 2 or more)" } };
    for (int i = 0; i < 2; i++) {
        char line[256];
        snprintf(line, sizeof line, "--model gpt-tiny --dim 64 --heads 2 %s", bad[i][0]);
        int rc = s_parse(&c, OPTS_NODE, line, ec, sizeof ec);
        if (rc == 0) rc = opts_resolve(&c, ec, sizeof ec);
        CHECKF(rc == -1 && strcmp(ec, bad[i][1]) == 0, "creator %s: %s", bad[i][0], ec);
        /* a config past the check, as a joiner would receive it */
        CHECK(s_parse(&c, OPTS_NODE, "--model gpt-tiny --dim 64 --heads 2 --stages 3 --bottleneck 4", ec, sizeof ec) == 0);
        CHECK(opts_resolve(&c, ec, sizeof ec) == 0);
        c.bottleneck = i ? 4 : 3;
        c.stages = i ? 1 : 3;
        s_joiner(&j);
        len = s_encode(&c, buf, sizeof buf);
        rbuf_init(&r, buf, len);
        char want[600];
        snprintf(want, sizeof want, "run config: %s", bad[i][1]);
        CHECK(proto_get_runcfg(&r, &j, ej, sizeof ej) == -1);
        CHECKF(strcmp(ej, want) == 0, "joiner %s: %s", bad[i][0], ej);
    }
}

int main(void)
{
    RUN(test_opts_bottleneck);
    RUN(test_opts_run_roundtrip);
    RUN(test_opts_run_truncated);
    RUN(test_opts_run_out_of_range);
    RUN(test_opts_run_id);
    RUN(test_opts_run_id_all_run_fields);
    RUN(test_opts_same_bounds_both_sides);
    RUN(test_opts_stages_max);
    RUN(test_split_auto_plan);
    CHECK_EXIT();
}
