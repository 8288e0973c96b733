/* test_options: the option table (node/runtime/options.h): command lines
 * parsed and refused with a message naming the option, values checked
 * together by opts_resolve, the commands' own defaults. */
#include "tests/check.h"
#include "tests/runtime_fixture.h"
#include "node/engine/staleness.h"
#include "node/runtime/options.h"

#include <stdint.h>
#include <string.h>

static void test_opts_parse_good(void)
{
    opts_t o;
    char err[512];
    int rc = s_parse(&o, OPTS_NODE, "--model gpt-tiny --layers 2 --stages 2 --steps 30 --codec int4 "
                     "--grad-codec=fp16 --lr 3e-4 --seed 18446744073709551615 --stage auto --listen 127.0.0.1:1 "
                     "--schedule gpipe --stash 2bw", err, sizeof err);
    CHECKF(rc == 0, "%s", err);
    CHECK(opts_resolve(&o, err, sizeof err) == 0);
    CHECK(o.cfg.L == 2 && o.cfg.C == 128 && o.cfg.NH == 4 && o.cfg.V == 256 && o.cfg.maxT == 64);
    CHECK(o.stages == 2 && o.steps == 30);
    CHECK(strcmp(o.codec, "int4") == 0 && strcmp(o.grad_codec, "fp16") == 0);
    CHECK(o.optim.lr == 3e-4f);
    CHECK(o.seed == UINT64_MAX);
    CHECK(o.stage == -1);
    CHECK(o.schedule == SCHED_GPIPE && o.stash == STASH_2BW);
    CHECK(o.max_delay == 1);   /* 2bw's default budget: two versions */
    CHECK(o.optim.total == 30);
    CHECK(strcmp(o.listen, "127.0.0.1:1") == 0);
    CHECK(opts_given(&o, "codec") && opts_given(&o, "grad-codec") && opts_given(&o, "listen"));
    CHECK(!opts_given(&o, "batch") && !opts_given(&o, "join") && !opts_given(&o, "no-such"));
    CHECK(o.batch == 8);   /* gpt default */
    rc = s_parse(&o, OPTS_NODE, "--stage 3", err, sizeof err);
    CHECK(rc == 0 && o.stage == 3);
    rc = s_parse(&o, OPTS_SOLO, "--model mlp-fmnist --save /tmp/x.model", err, sizeof err);
    CHECK(rc == 0 && opts_resolve(&o, err, sizeof err) == 0);
    CHECK(o.batch == 64 && strcmp(o.save, "/tmp/x.model") == 0);
    CHECK(s_parse(&o, OPTS_SOLO, "--steps 3 --help", err, sizeof err) == 1);
    rc = s_parse(&o, OPTS_SOLO, "--metrics=--steps --steps 5 --checkpoint /tmp/ck --save-every 2", err, sizeof err);
    CHECK(rc == 0 && opts_resolve(&o, err, sizeof err) == 0);   /* joined, a value may start with -- */
    CHECK(strcmp(o.metrics, "--steps") == 0 && o.steps == 5 && o.save_every == 2);
    rc = s_parse(&o, OPTS_SOLO, "--stages 4 --delay 3,2,1,0 --staleness none", err, sizeof err);
    CHECK(rc == 0 && o.ndelay == 4 && o.delay[0] == 3 && o.delay[3] == 0 && o.staleness == 0);
    rc = s_parse(&o, OPTS_SOLO, "--delay 64", err, sizeof err);
    CHECK(rc == 0 && o.ndelay == 1 && o.delay[0] == 64 && o.staleness == STALE_DEFAULT);
    rc = s_parse(&o, OPTS_SOLO, "--staleness lr+predict+dc+ramp", err, sizeof err);
    CHECK(rc == 0 && o.staleness == STALE_ALL && o.ndelay == 0);
    rc = s_parse(&o, OPTS_NODE, "--model gpt-tiny", err, sizeof err);
    CHECK(rc == 0 && opts_resolve(&o, err, sizeof err) == 0 && o.max_delay == 2 && !o.max_delay_given);   /* the default budget */
    CHECK(o.split == SPLIT_AUTO && o.cfg.split == SPLIT_EVEN);   /* a swarm's default: the data stage chooses */
    rc = s_parse(&o, OPTS_NODE, "--model gpt-tiny --stages 4", err, sizeof err);
    CHECK(rc == 0 && opts_resolve(&o, err, sizeof err) == 0 && o.micro == 16);   /* 4 x stages */
    rc = s_parse(&o, OPTS_NODE, "--model gpt-tiny --stages 4 --max-inflight 1", err, sizeof err);
    CHECK(rc == 0 && opts_resolve(&o, err, sizeof err) == 0 && o.micro == 1);    /* a fixed window of one needs one */
    rc = s_parse(&o, OPTS_NODE, "--model gpt-tiny --stages 4 --max-inflight 6 --micro 9", err, sizeof err);
    CHECK(rc == 0 && opts_resolve(&o, err, sizeof err) == 0 && o.micro == 9);    /* as given */
    rc = s_parse(&o, OPTS_SOLO, "--model gpt-tiny --stages 3", err, sizeof err);
    CHECK(rc == 0 && opts_resolve(&o, err, sizeof err) == 0 && o.micro == 1);    /* solo: the unstaged computation */
    rc = s_parse(&o, OPTS_NODE, "--stash 2bw --max-delay 0", err, sizeof err);
    CHECK(rc == 0 && opts_resolve(&o, err, sizeof err) == 0 && o.max_delay == 0 && o.max_delay_given);
    rc = s_parse(&o, OPTS_NODE, "--optim muon", err, sizeof err);
    CHECK(rc == 0 && opts_resolve(&o, err, sizeof err) == 0 && o.max_delay == 3 && o.optim.kind == OPTIM_MUON);
    rc = s_parse(&o, OPTS_NODE, "--optim muon --max-delay 2", err, sizeof err);
    CHECK(rc == 0 && opts_resolve(&o, err, sizeof err) == 0 && o.max_delay == 2);
    rc = s_parse(&o, OPTS_NODE, "--optim muon --stash 2bw", err, sizeof err);
    CHECK(rc == 0 && opts_resolve(&o, err, sizeof err) == 0 && o.max_delay == 1);
}

/* opts_take: the small commands' options (keygen, status, sample, assemble,
 * ticket) take values by opts_parse's rule. */
static void test_opts_take(void)
{
    char *argv[] = { "brigade", "assemble", "--out", "m.bin", "--out=--x", "--outer", "--out", "--prompt", "-1", NULL };
    int argc = 9, i = 2;
    const char *v = NULL;
    char err[256];
    CHECK(opts_take(argc, argv, &i, "out", "FILE", &v, err, sizeof err) == 1 && i == 3 && strcmp(v, "m.bin") == 0);
    i = 4;
    CHECK(opts_take(argc, argv, &i, "out", "FILE", &v, err, sizeof err) == 1 && i == 4 && strcmp(v, "--x") == 0);
    i = 5;
    CHECK(opts_take(argc, argv, &i, "out", "FILE", &v, err, sizeof err) == 0 && i == 5);   /* another option */
    i = 6;
    CHECK(opts_take(argc, argv, &i, "out", "FILE", &v, err, sizeof err) == -1 && i == 6);
    CHECKF(strstr(err, "--out needs a value (FILE): '--prompt' is the next option") != NULL, "%s", err);
    i = 7;
    CHECK(opts_take(argc, argv, &i, "prompt", "TEXT", &v, err, sizeof err) == 1 && i == 8 && strcmp(v, "-1") == 0);
    i = 8;
    CHECK(opts_value(argc, argv, &i, "seed", "S", err, sizeof err) == NULL && strstr(err, "--seed needs a value (S)"));
}

static void test_opts_parse_bad(void)
{
    CHECK(s_refused(OPTS_NODE, "--bogus 1", "unknown option"));
    CHECK(s_refused(OPTS_NODE, "--bogus", "bogus"));
    CHECK(s_refused(OPTS_SOLO, "--listen 127.0.0.1:1", "unknown option"));  /* node only */
    CHECK(s_refused(OPTS_NODE, "--save x", "unknown option"));              /* solo only */
    CHECK(s_refused(OPTS_NODE, "stray", "unexpected argument"));
    CHECK(s_refused(OPTS_NODE, "--steps", "needs a value"));
    /* a value apart that starts with -- is the next option, not the value (a file named --steps was written) */
    CHECK(s_refused(OPTS_SOLO, "--metrics --steps 5", "--metrics needs a value (FILE): '--steps' is the next option"));
    CHECK(s_refused(OPTS_NODE, "--metrics --no-listen", "written --metrics=--no-listen"));
    CHECK(s_refused(OPTS_SIM, "--data --steps 5", "'--steps' is the next option"));
    CHECK(s_refused(OPTS_SOLO, "--lr -0.1", "--lr -0.1: must be in"));   /* one dash: a value, as before */
    /* --save-every sets how often --checkpoint is written: alone it would be ignored */
    CHECK(s_refused(OPTS_SOLO, "--save-every 5", "--save-every 5: needs --checkpoint"));
    CHECK(s_refused(OPTS_NODE, "--steps 9 --save-every 5", "needs --checkpoint"));
    CHECK(s_refused(OPTS_NODE, "--model gpt-tiny --join", "--join"));
    CHECK(s_refused(OPTS_NODE, "--steps 12x", "not a valid integer"));
    CHECK(s_refused(OPTS_SOLO, "--recompute yes", "--recompute yes: want on, off or auto"));
    CHECK(s_refused(OPTS_NODE, "--batch 99999999999", "not a valid integer"));
    CHECK(s_refused(OPTS_NODE, "--seed -1", "seed"));
    CHECK(s_refused(OPTS_NODE, "--lr abc", "not a valid number"));
    CHECK(s_refused(OPTS_NODE, "--lr nan", "lr"));
    CHECK(s_refused(OPTS_NODE, "--codec int3", "unknown codec"));
    CHECK(s_refused(OPTS_NODE, "--grad-codec zstd", "unknown codec"));
    /* a stage cut over FRAME_MAX_VALUES (2^16 x 64 x 128 = 2^29) could never be sent */
    CHECK(s_refused(OPTS_NODE, "--model gpt-tiny --stages 2 --batch 65536", "between stages 0 and 1"));
    CHECK(s_refused(OPTS_SOLO, "--model gpt-tiny --stages 2 --batch 65536 --codec int8", "more than a frame carries"));
    CHECK(s_refused(OPTS_NODE, "--model gpt-tiny --dim 4 --heads 1 --stages 2 --codec pca", "--codec pca: the tensor between stages 0 and 1 has rows of 4"));
    CHECK(s_refused(OPTS_NODE, "--codec autox", "unknown codec (auto, fp32"));
    CHECK(s_refused(OPTS_NODE, "--model gpt-tiny --dim 12 --heads 1 --stages 2 --codec int8 --grad-codec hq2", "--grad-codec hq2"));
    /* a cut of 2^25 values (4096 x 64 x 128) fits a frame's count, but not its bytes (WIRE_FRAME_BYTES_MAX,
     * 64 MiB) in fp32 or fp16: the receiver's transport reset the connection at each, the microbatch lost */
    CHECK(s_refused(OPTS_NODE, "--model gpt-tiny --stages 2 --batch 4096 --codec fp32 --grad-codec int8", "its --codec fp32"));
    CHECK(s_refused(OPTS_NODE, "--model gpt-tiny --stages 2 --batch 4096 --codec int8 --grad-codec fp16", "its --grad-codec fp16"));
    {
        opts_t o;
        char err[512];
        int rc = s_parse(&o, OPTS_NODE, "--model gpt-tiny --stages 2 --batch 4096 --codec int8 --grad-codec int8", err, sizeof err);
        CHECKF(rc == 0 && opts_resolve(&o, err, sizeof err) == 0, "a cut of 2^25 values in int8 both ways (32 MiB): %s", err);
    }
    CHECK(s_refused(OPTS_NODE, "--stage middle", "want auto"));
    CHECK(s_refused(OPTS_NODE, "--stage -1", "--stage"));
    CHECK(s_refused(OPTS_NODE, "--schedule sync", "async or gpipe"));
    CHECK(s_refused(OPTS_NODE, "--stash half", "full or 2bw"));
    CHECK(s_refused(OPTS_NODE, "--split lat", "even, late, front or auto"));
    CHECK(s_refused(OPTS_NODE, "--model mlp-fmnist --split front", "--split front"));
    CHECK(s_refused(OPTS_NODE, "--split front --stages 5", "--stages 5"));
    CHECK(s_refused(OPTS_NODE, "--model mlp-fmnist --split late", "--split late"));
    CHECK(s_refused(OPTS_NODE, "--split late --stages 6", "--stages 6"));
    CHECK(s_refused(OPTS_NODE, "--staleness predictive", "--staleness"));
    CHECK(s_refused(OPTS_NODE, "--staleness predict+predict", "--staleness"));
    CHECK(s_refused(OPTS_NODE, "--optim sgd", "muon or adamw"));
    CHECK(s_refused(OPTS_SOLO, "--optim muon --staleness dc", "--optim adamw"));   /* dc reads AdamW's v */
    CHECK(s_refused(OPTS_SOLO, "--optim muon --staleness predict+dc", "--optim adamw"));
    CHECK(s_refused(OPTS_NODE, "--delay 1,0", "unknown option"));            /* solo only */
    CHECK(s_refused(OPTS_NODE, "--staleness predict+dc", "solo only"));        /* dc too */
    CHECK(s_refused(OPTS_SIM, "--staleness dc", "solo only"));
    CHECK(s_refused(OPTS_SOLO, "--delay 3,-1", "--delay"));
    CHECK(s_refused(OPTS_SOLO, "--delay 1.5,0", "--delay"));
    CHECK(s_refused(OPTS_SOLO, "--delay 1,,0", "--delay"));
    CHECK(s_refused(OPTS_SOLO, "--delay 2,", "--delay"));
    CHECK(s_refused(OPTS_SOLO, "--delay x", "--delay"));
    CHECK(s_refused(OPTS_SOLO, "--delay +1", "--delay"));
    CHECK(s_refused(OPTS_SOLO, "--delay 65", "--delay"));
    CHECK(s_refused(OPTS_SOLO, "--delay 99999999999999999999", "--delay"));
    /* resolve: values that parse but do not fit together */
    CHECK(s_refused(OPTS_NODE, "--model gpt-huge", "gpt-huge"));
    CHECK(s_refused(OPTS_NODE, "--heads 3", "--heads"));
    CHECK(s_refused(OPTS_NODE, "--layers 100000", "--layers"));
    CHECK(s_refused(OPTS_SOLO, "--layers 0", "--layers 0"));   /* not the preset's 4 */
    CHECK(s_refused(OPTS_SOLO, "--dim 0", "--dim 0"));
    CHECK(s_refused(OPTS_SOLO, "--heads 0", "--heads 0"));
    CHECK(s_refused(OPTS_SOLO, "--ctx 0", "--ctx 0"));
    CHECK(s_refused(OPTS_NODE, "--steps 0", "--steps"));
    CHECK(s_refused(OPTS_NODE, "--batch -3", "--batch"));
    CHECK(s_refused(OPTS_NODE, "--threads 0", "--threads"));
    CHECK(s_refused(OPTS_NODE, "--lr 0", "--lr"));
    CHECK(s_refused(OPTS_NODE, "--clip inf", "--clip"));
    CHECK(s_refused(OPTS_NODE, "--emu-loss 1.5", "--emu-loss"));
    CHECK(s_refused(OPTS_NODE, "--max-delay -1", "--max-delay"));
    CHECK(s_refused(OPTS_NODE, "--max-delay 65", "--max-delay"));
    CHECK(s_refused(OPTS_NODE, "--stash 2bw --max-delay 2", "--max-delay"));
}

/* --eval-batches: one default for solo and node (by model kind), and the
 * batches an evaluation runs over. */
static void test_opts_eval_batches(void)
{
    opts_t o;
    char err[512];
    for (int which = OPTS_SOLO; which <= OPTS_NODE; which++) {
        CHECK(s_parse(&o, which, "--model gpt-tiny", err, sizeof err) == 0 && opts_resolve(&o, err, sizeof err) == 0);
        CHECKF(o.eval_batches == 32, "%s: gpt default %d", which == OPTS_SOLO ? "solo" : "node", o.eval_batches);
        CHECK(s_parse(&o, which, "--model mlp-fmnist", err, sizeof err) == 0 && opts_resolve(&o, err, sizeof err) == 0);
        CHECKF(o.eval_batches == 0, "%s: mlp default %d", which == OPTS_SOLO ? "solo" : "node", o.eval_batches);
        CHECK(s_parse(&o, which, "--model mlp-fmnist --eval-batches 7", err, sizeof err) == 0 && opts_resolve(&o, err, sizeof err) == 0);
        CHECK(o.eval_batches == 7);
    }
    o.eval_batches = 7;
    CHECK(opts_eval_batches(&o, 100) == 7);
    CHECK(opts_eval_batches(&o, 3) == 3);        /* never more than the data holds */
    o.eval_batches = 0;                          /* all */
    CHECK(opts_eval_batches(&o, 156) == 156);
    CHECK(opts_eval_batches(&o, 1 << 20) == OPTS_EVAL_BATCHES_MAX);
}

/* The node's own options: bounds of the table, checked by opts_resolve. */
static void test_opts_local_bounds(void)
{
    CHECK(s_refused(OPTS_NODE, "--threads 0", "--threads 0: must be 1..256"));
    CHECK(s_refused(OPTS_NODE, "--threads 257", "--threads 257"));
    CHECK(s_refused(OPTS_NODE, "--save-every 0", "--save-every 0"));
    CHECK(s_refused(OPTS_NODE, "--http 65536", "--http 65536"));
    CHECK(s_refused(OPTS_NODE, "--emu-latency-ms -1", "--emu-latency-ms -1"));
    CHECK(s_refused(OPTS_NODE, "--emu-slowdown 0.5", "--emu-slowdown 0.5: must be in [1, 1000]"));
    CHECK(s_refused(OPTS_NODE, "--emu-loss 1.5", "--emu-loss 1.5"));
    CHECK(s_refused(OPTS_NODE, "--advertise *:7000", "--advertise"));
    CHECK(s_refused(OPTS_NODE, "--advertise h\"x:7000", "--advertise"));
    CHECK(s_refused(OPTS_SOLO, "--stages 0", "--stages 0"));
    opts_t o;
    char err[512];
    CHECK(s_parse(&o, OPTS_NODE, "--threads 256 --http 65535 --emu-slowdown 1000 --advertise example.org:7000", err, sizeof err) == 0);
    CHECKF(opts_resolve(&o, err, sizeof err) == 0, "%s", err);
    /* the commands' own defaults */
    CHECK(s_parse(&o, OPTS_SOLO, "", err, sizeof err) == 0 && opts_resolve(&o, err, sizeof err) == 0);
    CHECK(o.stages == 1 && strcmp(o.codec, "fp32") == 0 && strcmp(o.grad_codec, "fp32") == 0);
    CHECK(s_parse(&o, OPTS_NODE, "", err, sizeof err) == 0 && opts_resolve(&o, err, sizeof err) == 0);
    CHECK(o.stages == 4 && strcmp(o.codec, "auto") == 0 && strcmp(o.grad_codec, "auto") == 0);
    /* auto where pca's blocks do not fit the rows: taken (such links stay on int8) */
    CHECK(s_parse(&o, OPTS_NODE, "--model gpt-tiny --dim 4 --heads 1 --stages 2", err, sizeof err) == 0);
    CHECKF(opts_resolve(&o, err, sizeof err) == 0, "%s", err);
}

int main(void)
{
    RUN(test_opts_parse_good);
    RUN(test_opts_take);
    RUN(test_opts_parse_bad);
    RUN(test_opts_local_bounds);
    RUN(test_opts_eval_batches);
    CHECK_EXIT();
}
