/* options.c: the trainer option table (options.h). */
#include "node/runtime/options.h"
#include <errno.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sodium.h>
#include "net/wire.h"
#include "compress/codec.h"
#include "node/runtime/codecpick.h"
#include "node/engine/staleness.h"

typedef enum { T_INT, T_U64, T_FLOAT, T_DOUBLE, T_STR, T_SCHED, T_STASH, T_RECOMPUTE, T_STAGE, T_CODEC, T_STALE, T_OPTIM, T_SPLIT, T_DELAYS, T_FLAG } opt_type_t;

typedef enum { B_NONE, B_CLOSED, B_OPEN_LO } opt_bound_t;  /* no bounds, [lo, hi], (lo, hi] */

typedef struct {
    const char *name;   /* without the leading -- */
    opt_type_t type;
    size_t off;         /* offset in opts_t */
    size_t size;        /* for strings */
    int which;          /* OPTS_SOLO | OPTS_NODE */
    const char *arg;    /* argument name for --help */
    const char *help;
    int run;            /* part of the run config (the creator's word, sent to joiners) */
    opt_bound_t bound;  /* the value's bounds, checked by opts_check_run (run) or opts_resolve (local) */
    double lo, hi;
} opt_def_t;

/* The last four fields of a table entry. */
#define RUN(lo, hi)    1, B_CLOSED, lo, hi     /* run config, lo <= x <= hi */
#define RUN_GT(lo, hi) 1, B_OPEN_LO, lo, hi    /* run config, lo < x <= hi */
#define RUN_ANY        1, B_NONE, 0, 0         /* run config, checked elsewhere (model_check, parsing) */
#define LOCAL(lo, hi)  0, B_CLOSED, lo, hi     /* this node's own, lo <= x <= hi */
#define LOCAL_GT(lo, hi) 0, B_OPEN_LO, lo, hi  /* this node's own, lo < x <= hi */
#define LOCAL_ANY      0, B_NONE, 0, 0
#define NMAX 100000000                         /* steps, warmup, evaluation and save intervals */

#define O(f) offsetof(opts_t, f)
#define S(f) sizeof(((opts_t *)0)->f)
#define BOTH (OPTS_SOLO | OPTS_NODE | OPTS_SIM)   /* the run's options: every trainer takes them */
static const opt_def_t s_opts[] = {
    { "model", T_STR, O(model), S(model), BOTH, "NAME", "gpt-tiny | gpt-small | gpt-base | gpt2 | mlp-fmnist (default gpt-tiny)", RUN_ANY },
    { "layers", T_INT, O(layers), 0, BOTH, "N", "override the preset's transformer blocks / hidden layers", RUN_ANY },
    { "dim", T_INT, O(dim), 0, BOTH, "N", "override the preset's width", RUN_ANY },
    { "heads", T_INT, O(heads), 0, BOTH, "N", "override the preset's attention heads", RUN_ANY },
    { "ctx", T_INT, O(ctx), 0, BOTH, "N", "override the preset's context length", RUN_ANY },
    { "vocab", T_INT, O(vocab), 0, BOTH, "N", "override the preset's vocabulary (gpt; the presets but gpt2 read bytes: 256)", RUN_ANY },
    { "bottleneck", T_INT, O(bottleneck), 0, BOTH, "S", "a learned bottleneck at each cut between stages (gpt): LayerNorm, Linear to width/S, LayerNorm on the sending stage, Linear back to the width on the receiving one; the codecs code the narrow tensor and its gradient.  S divides the width; 0 = none (default); refused with --stages 1 (no cut)", RUN(0, 8192) },
    { "data", T_STR, O(data), S(data), BOTH, "SPEC", "synthetic | text:PATH | tokens:PATH (llm.c shards: file, folder or glob) | nanogpt:DIR | fmnist[:DIR] (default synthetic)", RUN_ANY },
    { "init", T_STR, O(init), S(init), OPTS_SOLO | OPTS_NODE, "FILE", "start from a checkpoint: safetensors with GPT-2's names or llm.c's .bin (the run creator's; a joiner gives its own copy)", LOCAL_ANY },
    { "stages", T_INT, O(stages), 0, BOTH, "K", "pipeline stages (default 1 solo, 4 node)", RUN(1, MODEL_STAGES_MAX) },
    { "steps", T_INT, O(steps), 0, BOTH, "N", "optimizer updates of the run (default 500; sim without it: until --sim-seconds)", RUN(1, NMAX) },
    { "batch", T_INT, O(batch), 0, BOTH, "B", "microbatch size (default 8 gpt, 64 mlp)", RUN(1, 65536) },
    { "micro", T_INT, O(micro), 0, BOTH, "M", "microbatches per update (default: 4 x stages, stages squared from 5 stages on, at most 256: enough that an update's microbatches keep the pipeline busy within the delay budget; at most --max-inflight where that is given; 1 for one stage and in solo)", RUN(1, 65536) },
    { "optim", T_OPTIM, O(optim.kind), 0, BOTH, "O", "adamw (default) | muon (orthogonalized momentum for the blocks' matrices, AdamW for the rest; much less hurt by weight delay)", RUN(OPTIM_ADAMW, OPTIM_MUON) },
    { "lr", T_FLOAT, O(optim.lr), 0, BOTH, "X", "peak learning rate (default 1e-3; muon's steps are scaled to AdamW's size)", RUN_GT(0, 10) },
    { "wd", T_FLOAT, O(optim.wd), 0, BOTH, "X", "decoupled weight decay of every matrix (default 0.01)", RUN(0, 10) },
    { "warmup", T_INT, O(optim.warmup), 0, BOTH, "N", "linear warmup updates, then cosine decay to 0.1 x lr (default 10)", RUN(0, NMAX) },
    { "clip", T_FLOAT, O(optim.clip), 0, BOTH, "X", "gradient L2 norm limit per unit (embeddings, block, head), 0 = off (default 1)", RUN(0, 1e6) },
    { "codec", T_CODEC, O(codec), S(codec), BOTH, "C", "activation codec: auto fp32 fp16 bf16 int8 int4 hq1 hq2 hq3 hq4 pca (default auto node: int8 per link, pca on a link too slow for it; fp32 solo)", RUN_ANY },
    { "grad-codec", T_CODEC, O(grad_codec), S(grad_codec), BOTH, "C", "gradient codec (same choices and defaults)", RUN_ANY },
    { "schedule", T_SCHED, O(schedule), 0, BOTH, "S", "async (1F1B, weight stashing; default) | gpipe", RUN(SCHED_ASYNC, SCHED_GPIPE) },
    { "split", T_SPLIT, O(split), 0, BOTH, "R", "auto (default; solo: even) | even | late: stage 0 holds the embedding alone, the blocks the later stages, which an async pipeline delays less (better per update on slow links, slower where compute binds) | front: each later stage holds one block, stage 0 the rest (a swarm of many data-stage nodes keeps them busy through their round trips); auto: the data stage chooses before the first update: front in a swarm of two nodes or more per stage (where stage 0's state would stay within 128 MiB), else late where its measured round trip asks for 1.75 times the window the delay budget holds or more, else even", RUN(SPLIT_EVEN, SPLIT_FRONT) },
    { "stash", T_STASH, O(stash), 0, BOTH, "S", "full (default) | 2bw: weight versions kept for in-flight work", RUN(STASH_FULL, STASH_2BW) },
    { "recompute", T_RECOMPUTE, O(recompute), 0, BOTH, "R", "auto (default) | on | off: keep only each in-flight microbatch's stage input and redo the stage's forward at its backward (the same gradients, about one forward more per microbatch); auto: on where the activations of 2 x stages microbatches in flight would pass 256 MiB", RUN(RECOMPUTE_AUTO, RECOMPUTE_ON) },
    { "max-inflight", T_INT, O(max_inflight), 0, BOTH, "N", "most microbatches a data-stage node keeps in flight (default: adapts to the round trip and the queues, 1..8 x stages, more for microbatches under 8 sequences, within --max-delay)", RUN(0, 4096) },
    { "max-delay", T_INT, O(max_delay), 0, BOTH, "D", "weight delay budget in updates: a stage's backward runs at most D updates after its forward (default 2, 3 with --optim muon, 1 with --stash 2bw)", RUN(0, 64) },
    { "staleness", T_STALE, O(staleness), 0, BOTH, "C", "delay compensation: none or predict, ramp, lr, dc joined by + (default predict+ramp; dc in solo only)", RUN(0, STALE_ALL) },
    { "delay", T_DELAYS, O(delay), 0, OPTS_SOLO, "D0,D1,..", "stage k computes its gradients at its weights of Dk updates earlier, as an async stage with that delay", LOCAL_ANY },
    { "seed", T_U64, O(seed), 0, BOTH, "S", "random seed (default 1)", RUN_ANY },
    { "threads", T_INT, O(threads), 0, BOTH, "T", "compute threads per engine call (default 1)", LOCAL(1, 256) },
    { "eval-every", T_INT, O(eval_every), 0, BOTH, "N", "validation every N updates and after the last (default 0: solo at the end only, node none)", RUN(0, NMAX) },
    { "eval-batches", T_INT, O(eval_batches), 0, BOTH, "N", "held-out batches per evaluation, 0 = all (default 32 gpt, all mlp)", RUN(0, OPTS_EVAL_BATCHES_MAX) },
    { "metrics", T_STR, O(metrics), S(metrics), BOTH, "FILE", "append JSON Lines metrics to FILE", LOCAL_ANY },
    { "checkpoint", T_STR, O(checkpoint), S(checkpoint), OPTS_SOLO | OPTS_NODE, "DIR", "stage checkpoints in DIR; a restart resumes", LOCAL_ANY },
    { "save-every", T_INT, O(save_every), 0, OPTS_SOLO | OPTS_NODE, "N", "with --checkpoint: save every N updates (default 50; refused without it)", LOCAL(1, NMAX) },
    { "save", T_STR, O(save), S(save), OPTS_SOLO, "FILE", "write the whole model to FILE at the end", LOCAL_ANY },
    { "resume", T_STR, O(resume), S(resume), OPTS_SOLO, "FILE", "start from a model file", LOCAL_ANY },
    { "listen", T_STR, O(listen), S(listen), OPTS_NODE, "HOST:PORT", "where this node listens (default 0.0.0.0:7700)", LOCAL_ANY },
    { "join", T_STR, O(join), S(join), OPTS_NODE, "HOST:PORT/KEY", "join the swarm of this node (omit to start a run)", LOCAL_ANY },
    { "stage", T_STAGE, O(stage), 0, OPTS_NODE, "auto|N", "stage to serve (default auto: the least served)", LOCAL_ANY },
    { "advertise", T_STR, O(advertise), S(advertise), OPTS_NODE, "HOST:PORT", "address peers should use (behind NAT)", LOCAL_ANY },
    { "no-listen", T_FLAG, O(no_listen), 0, OPTS_NODE, "", "accept no connection: open every link outward, any --listen ignored (a node behind NAT is detected without it)", LOCAL_ANY },
    { "relay", T_STR, O(relay), S(relay), OPTS_NODE, "on|off", "relay sealed traffic between nodes behind NAT, when reachable (default on)", LOCAL_ANY },
    { "relay-mbit", T_DOUBLE, O(relay_mbit), 0, OPTS_NODE, "MBIT", "cap on what this node relays for others (default 100)", LOCAL_GT(0, 1e6) },
    { "keys", T_STR, O(keys), S(keys), OPTS_NODE, "DIR", "identity from brigade keygen (default: ephemeral)", LOCAL_ANY },
    { "owner", T_STR, O(owner), S(owner), OPTS_NODE, "DIR", "start a closed swarm owned by DIR's owner key (brigade keygen)", LOCAL_ANY },
    { "ticket", T_STR, O(ticket), S(ticket), OPTS_NODE, "T|@FILE", "admission ticket for a closed swarm (brigade ticket)", LOCAL_ANY },
    { "http", T_INT, O(http), 0, OPTS_NODE, "PORT", "serve a status page on 127.0.0.1:PORT (0: a free port, printed at start)", LOCAL(0, 65535) },
    { "emu-latency-ms", T_DOUBLE, O(emu_latency_ms), 0, OPTS_NODE, "MS", "test: delay outgoing messages", LOCAL(0, 60000) },
    { "emu-jitter-ms", T_DOUBLE, O(emu_jitter_ms), 0, OPTS_NODE, "MS", "test: random extra delay", LOCAL(0, 60000) },
    { "emu-bandwidth-mbit", T_DOUBLE, O(emu_bandwidth_mbit), 0, OPTS_NODE, "MBIT", "test: uplink rate (all outgoing links share it)", LOCAL(0, 1e6) },
    { "emu-downlink-mbit", T_DOUBLE, O(emu_downlink_mbit), 0, OPTS_NODE, "MBIT", "test: downlink rate (all incoming links share it)", LOCAL(0, 1e6) },
    { "emu-loss", T_DOUBLE, O(emu_loss), 0, OPTS_NODE, "P", "test: drop outgoing messages with probability P", LOCAL(0, 1) },
    { "emu-slowdown", T_DOUBLE, O(emu_slowdown), 0, OPTS_NODE, "F", "test: make compute F times slower", LOCAL(1, 1000) },
    { "emu-relay-tamper", T_DOUBLE, O(emu_relay_tamper), 0, OPTS_NODE, "P", "test: alter each envelope this node relays with probability P", LOCAL(0, 1) },
};
#define NOPTS (int)(sizeof s_opts / sizeof s_opts[0])

void opts_defaults(opts_t *o, int which)
{
    memset(o, 0, sizeof *o);
    o->command = which;
    snprintf(o->model, sizeof o->model, "gpt-tiny");
    snprintf(o->data, sizeof o->data, "synthetic");
    o->stages = which == OPTS_SOLO ? 1 : 4;
    snprintf(o->codec, sizeof o->codec, "%s", which == OPTS_SOLO ? "fp32" : "auto");
    snprintf(o->grad_codec, sizeof o->grad_codec, "%s", o->codec);
    o->steps = 500;
    o->micro = 1;
    optim_defaults(&o->optim);
    o->seed = 1;
    o->threads = 1;
    o->save_every = 50;
    o->stage = -1;
    o->emu_slowdown = 1.0;
    o->relay_mbit = 100;
    o->staleness = STALE_DEFAULT;
    o->max_delay = 2;   /* 1 with --stash 2bw, 3 with --optim muon, unless given: opts_resolve */
    o->split = which == OPTS_SOLO ? SPLIT_EVEN : SPLIT_AUTO;   /* solo has no links to choose by */
}

static const opt_def_t *s_find(const char *name)
{
    for (int i = 0; i < NOPTS; i++)
        if (strcmp(s_opts[i].name, name) == 0)
            return &s_opts[i];
    return NULL;
}

int opts_given(const opts_t *o, const char *name)
{
    const opt_def_t *d = s_find(name);
    if (!d) return 0;
    int i = (int)(d - s_opts);
    return (o->given[i / 64] >> (i % 64)) & 1;
}

/* --delay D0,D1,...: whole numbers 0..OPT_MAX_DELAY, one per stage (solo checks the count against --stages). */
static int s_set_delays(opts_t *o, const char *v, char *err, size_t errlen)
{
    int n = 0;
    for (const char *p = v;;) {
        char *end = NULL;
        errno = 0;
        long x = *p >= '0' && *p <= '9' ? strtol(p, &end, 10) : -1;
        if (x < 0 || x > OPT_MAX_DELAY || errno || (*end && *end != ',') || n == MODEL_STAGES_MAX) {
            snprintf(err, errlen, "--delay %s: want whole numbers 0..%d separated by commas, one per stage", v, OPT_MAX_DELAY);
            return -1;
        }
        o->delay[n++] = (int)x;
        if (!*end) break;
        p = end + 1;
    }
    o->ndelay = n;
    return 0;
}

/* The numeric options (T_INT, T_U64, T_FLOAT, T_DOUBLE): v parsed whole
 * into *p.  0, or -1 with a one-line reason. */
/* "--NAME V: unknown codec (fp32, fp16, ...)" into err; -1. */
static int s_bad_codec(const char *name, const char *v, char *err, size_t errlen)
{
    char list[128] = "auto";
    size_t k = 4;
    for (int i = 0; i < CODEC_COUNT && k < sizeof list; i++)
        k += (size_t)snprintf(list + k, sizeof list - k, ", %s", codec_name(i));
    snprintf(err, errlen, "--%s %s: unknown codec (%s)", name, v, list);
    return -1;
}

static int s_set_number(void *p, const opt_def_t *d, const char *v, char *err, size_t errlen)
{
    char *end = NULL;
    errno = 0;
    switch (d->type) {
    case T_INT: {
        long x = strtol(v, &end, 10);
        if (end == v || *end || errno || x < INT_MIN || x > INT_MAX) goto bad;
        *(int *)p = (int)x;
        return 0;
    }
    case T_U64: {
        if (*v < '0' || *v > '9') goto bad;   /* strtoull would take " -1" as 2^64 - 1 */
        unsigned long long x = strtoull(v, &end, 10);
        if (end == v || *end || errno) goto bad;
        *(uint64_t *)p = x;
        return 0;
    }
    case T_FLOAT: case T_DOUBLE: {
        double x = strtod(v, &end);
        if (end == v || *end || errno || x != x) goto bad;
        if (d->type == T_FLOAT && (fabs(x) > FLT_MAX || (x != 0 && fabs(x) < FLT_MIN))) {
            snprintf(err, errlen, "--%s %s: out of range", d->name, v);
            return -1;
        }
        if (d->type == T_FLOAT) *(float *)p = (float)x;
        else *(double *)p = x;
        return 0;
    }
    default:
        break;
    }
bad:
    snprintf(err, errlen, "--%s %s: not a valid %s", d->name, v,
             d->type == T_INT || d->type == T_U64 ? "integer" : "number");
    return -1;
}

static int s_set(opts_t *o, const opt_def_t *d, const char *v, char *err, size_t errlen)
{
    char *end = NULL;
    void *p = (char *)o + d->off;
    switch (d->type) {
    case T_FLAG:
        *(int *)p = 1;
        return 0;
    case T_INT: case T_U64: case T_FLOAT: case T_DOUBLE:
        return s_set_number(p, d, v, err, errlen);
    case T_STR: case T_CODEC:
        if (!*v) {   /* an unset shell variable: not the same as leaving the option out */
            snprintf(err, errlen, "--%s: empty value (leave the option out for its default)", d->name);
            return -1;
        }
        if (strlen(v) >= d->size) {
            snprintf(err, errlen, "--%s: value too long (at most %zu characters)", d->name, d->size - 1);
            return -1;
        }
        if (d->type == T_CODEC && codecpick_id(v) < 0)
            return s_bad_codec(d->name, v, err, errlen);
        snprintf((char *)p, d->size, "%s", v);
        return 0;
    case T_SCHED:
        if (strcmp(v, "async") == 0) *(int *)p = SCHED_ASYNC;
        else if (strcmp(v, "gpipe") == 0) *(int *)p = SCHED_GPIPE;
        else { snprintf(err, errlen, "--schedule %s: want async or gpipe", v); return -1; }
        return 0;
    case T_SPLIT:
        if (strcmp(v, "even") == 0) *(int *)p = SPLIT_EVEN;
        else if (strcmp(v, "late") == 0) *(int *)p = SPLIT_LATE;
        else if (strcmp(v, "front") == 0) *(int *)p = SPLIT_FRONT;
        else if (strcmp(v, "auto") == 0) *(int *)p = SPLIT_AUTO;
        else { snprintf(err, errlen, "--split %s: want even, late, front or auto", v); return -1; }
        return 0;
    case T_STASH:
        if (strcmp(v, "full") == 0) *(int *)p = STASH_FULL;
        else if (strcmp(v, "2bw") == 0) *(int *)p = STASH_2BW;
        else { snprintf(err, errlen, "--stash %s: want full or 2bw", v); return -1; }
        return 0;
    case T_STALE:
        if (stale_parse(v, (int *)p) < 0) {
            snprintf(err, errlen, "--staleness %s: want none, or predict, ramp, lr, dc joined by + (e.g. predict+ramp)", v);
            return -1;
        }
        return 0;
    case T_OPTIM:
        if (optim_parse_kind(v, (int *)p) < 0) {
            snprintf(err, errlen, "--optim %s: want muon or adamw", v);
            return -1;
        }
        return 0;
    case T_DELAYS:
        return s_set_delays(o, v, err, errlen);
    case T_RECOMPUTE:
        if (strcmp(v, "auto") == 0) *(int *)p = RECOMPUTE_AUTO;
        else if (strcmp(v, "on") == 0) *(int *)p = RECOMPUTE_ON;
        else if (strcmp(v, "off") == 0) *(int *)p = RECOMPUTE_OFF;
        else { snprintf(err, errlen, "--recompute %s: want on, off or auto", v); return -1; }
        return 0;
    case T_STAGE:
        if (strcmp(v, "auto") == 0) { *(int *)p = -1; return 0; }
        {
            long x = strtol(v, &end, 10);
            if (end == v || *end || x < 0 || x >= MODEL_STAGES_MAX) {
                snprintf(err, errlen, "--stage %s: want auto or a stage number 0..%d", v, MODEL_STAGES_MAX - 1);
                return -1;
            }
            *(int *)p = (int)x;
        }
        return 0;
    }
    return 0;
}

const char *opts_value(int argc, char **argv, int *i, const char *name, const char *arg, char *err, size_t errlen)
{
    if (*i + 1 >= argc) {
        snprintf(err, errlen, "--%s needs a value (%s)", name, arg);
        return NULL;
    }
    const char *v = argv[*i + 1];
    if (strncmp(v, "--", 2) == 0) {
        snprintf(err, errlen, "--%s needs a value (%s): '%s' is the next option (a value that starts with -- is "
                 "written --%s=%s)", name, arg, v, name, v);
        return NULL;
    }
    ++*i;
    return v;
}

int opts_take(int argc, char **argv, int *i, const char *name, const char *arg, const char **value, char *err, size_t errlen)
{
    const char *a = argv[*i];
    size_t n = strlen(name);
    if (strncmp(a, "--", 2) != 0 || strncmp(a + 2, name, n) != 0 || (a[2 + n] && a[2 + n] != '='))
        return 0;
    if (a[2 + n] == '=') {
        *value = a + 3 + n;
        return 1;
    }
    *value = opts_value(argc, argv, i, name, arg, err, errlen);
    return *value ? 1 : -1;
}

int opts_parse(opts_t *o, int which, int argc, char **argv, int first, char *err, size_t errlen)
{
    for (int i = first; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0)
            return 1;
        if (strncmp(a, "--", 2) != 0) {
            snprintf(err, errlen, "unexpected argument '%s' (options start with --; see --help)", a);
            return -1;
        }
        char name[64];
        const char *eq = strchr(a + 2, '=');
        size_t n = eq ? (size_t)(eq - a - 2) : strlen(a + 2);
        if (n >= sizeof name) n = sizeof name - 1;
        memcpy(name, a + 2, n);
        name[n] = 0;
        const opt_def_t *d = s_find(name);
        if (!d || !(d->which & which)) {
            snprintf(err, errlen, "unknown option '%s' (see brigade %s --help)", a,
                     which == OPTS_SOLO ? "solo" : which == OPTS_SIM ? "sim" : "node");
            return -1;
        }
        const char *v = eq ? eq + 1 : NULL;
        if (d->type == T_FLAG) {
            if (v) { snprintf(err, errlen, "--%s takes no value", name); return -1; }
            v = "1";
        }
        if (!v && !(v = opts_value(argc, argv, &i, name, d->arg, err, errlen)))
            return -1;
        if (s_set(o, d, v, err, errlen) < 0)
            return -1;
        int k = (int)(d - s_opts);
        o->given[k / 64] |= 1ULL << (k % 64);
    }
    if (which != OPTS_SOLO && (o->staleness & STALE_DC)) {
        snprintf(err, errlen, "--staleness dc: solo only (a swarm does not keep the live and the used weights of every microbatch)");
        return -1;
    }
    return 0;
}

/* The value of numeric option d in o. */
static double s_num(const opts_t *o, const opt_def_t *d)
{
    const void *p = (const char *)o + d->off;
    switch (d->type) {
    case T_INT: case T_SCHED: case T_STASH: case T_RECOMPUTE: case T_STAGE: case T_STALE: case T_OPTIM: case T_SPLIT: case T_FLAG: return *(const int *)p;
    case T_FLOAT: return *(const float *)p;
    case T_DOUBLE: return *(const double *)p;
    case T_U64: return (double)*(const uint64_t *)p;
    default: return 0;
    }
}

/* Checks the bounds of every table option with run flag `run`.  Returns 0,
 * or -1 with "--NAME VALUE: must be LO..HI" (integers) or "... in [LO, HI]". */
static int s_check_bounds(const opts_t *o, int run, char *err, size_t errlen)
{
    for (int i = 0; i < NOPTS; i++) {
        const opt_def_t *d = &s_opts[i];
        if (d->bound == B_NONE || d->run != run) continue;
        double x = s_num(o, d);
        int ok = d->bound == B_OPEN_LO ? x > d->lo && x <= d->hi : x >= d->lo && x <= d->hi;
        if (ok) continue;
        if (d->type == T_FLOAT || d->type == T_DOUBLE)
            snprintf(err, errlen, "--%s %g: must be in %c%g, %g]", d->name, x, d->bound == B_OPEN_LO ? '(' : '[', d->lo, d->hi);
        else
            snprintf(err, errlen, "--%s %.0f: must be %.0f..%.0f", d->name, x, d->lo, d->hi);
        return -1;
    }
    return 0;
}

int opts_check_run(const opts_t *o, char *err, size_t errlen)
{
    const model_config_t *c = &o->cfg;
    if (c->kind != MODEL_GPT && c->kind != MODEL_MLP) {
        snprintf(err, errlen, "--model: unknown model kind %d", (int)c->kind);
        return -1;
    }
    if (o->bottleneck > 0 && o->stages == 1) {
        snprintf(err, errlen, "--bottleneck %d: --stages 1 has no cut to narrow (give --stages 2 or more)", o->bottleneck);
        return -1;
    }
    if (model_check(c, err, errlen) < 0) return -1;
    if (s_check_bounds(o, 1, err, errlen) < 0) return -1;
    stage_t probe;
    if (stage_init(&probe, c, 0, o->stages, err, errlen) < 0) return -1;
    if (codecpick_id(o->codec) < 0) return s_bad_codec("codec", o->codec, err, errlen);
    if (codecpick_id(o->grad_codec) < 0) return s_bad_codec("grad-codec", o->grad_codec, err, errlen);
    /* every cut between stages crosses as one tensor frame, which holds at
     * most FRAME_MAX_VALUES values and WIRE_FRAME_BYTES_MAX bytes in either
     * direction's codec (a bigger one could never be sent: the receiver's
     * transport resets the connection, and the microbatch is lost each time) */
    for (int k = 0; k + 1 < o->stages; k++) {
        if (stage_init(&probe, c, k, o->stages, err, errlen) < 0) return -1;
        size_t n = stage_out_size(&probe, o->batch, c->maxT);
        if (n > FRAME_MAX_VALUES) {
            snprintf(err, errlen, "--batch %d: the tensor between stages %d and %d holds %zu values, more than a "
                     "frame carries (%u); lower --batch, --ctx or --dim", o->batch, k, k + 1, n, FRAME_MAX_VALUES);
            return -1;
        }
        const char *flag[2] = { "--codec", "--grad-codec" }, *codec[2] = { o->codec, o->grad_codec };
        size_t row = n / ((size_t)o->batch * (size_t)c->maxT);
        for (int d = 0; d < 2; d++) {
            int id = codec_from_name(codec[d]);
            if ((id == CODEC_PCA || (id >= CODEC_HQ1 && id <= CODEC_HQ4)) && codec_block_for_rows(id, row) == 0) {
                snprintf(err, errlen, "%s %s: the tensor between stages %d and %d has rows of %zu values, which its "
                         "blocks cannot keep to (pca: 8..4096 values, hq: a multiple of 8); pick int8",
                         flag[d], codec[d], k, k + 1, row);
                return -1;
            }
        }
        for (int d = 0; d < 2; d++)
            if (frame_bound(n, codecpick_id(codec[d]) == CODEC_AUTO ? CODEC_INT8 : codec_from_name(codec[d])) > WIRE_FRAME_BYTES_MAX) {
                snprintf(err, errlen, "--batch %d: the tensor between stages %d and %d (%zu values) can take more than "
                         "%u MiB in its %s %s, more than a message's frame may; lower --batch, --ctx or --dim, or pick "
                         "a smaller codec", o->batch, k, k + 1, n, WIRE_FRAME_BYTES_MAX >> 20, flag[d], codec[d]);
                return -1;
            }
    }
    if (o->stash == STASH_2BW && o->max_delay > 1) {
        snprintf(err, errlen, "--max-delay %d: --stash 2bw keeps two weight versions, so a delay of at most 1", o->max_delay);
        return -1;
    }
    if ((o->staleness & STALE_DC) && o->optim.kind == OPTIM_MUON) {
        snprintf(err, errlen, "--staleness dc reads AdamW's second moment: use it with --optim adamw");
        return -1;
    }
    return 0;
}

/* --micro when not given: 4 x stages, or stages squared from 5 stages on,
 * at most 256 (1 for one stage).  While the learning rate is high the
 * default ramp lets a quarter of an update's microbatches start before the
 * update (stale_budget_micro), and a data-stage node needs about K + (K -
 * 1) x round trip / its compute per microbatch in flight to stay busy: the
 * more stages a model is cut into, the less each computes, so the need
 * grows about as K squared.  In `brigade sim` (gpt-small, 20-50 ms links,
 * 300 s) an update of one microbatch kept 28% of the compute bound busy in
 * steady state with 32 nodes and 4 stages; micro 16, 79%; micro 32, 79%;
 * with 100 nodes and 8 stages micro 32 kept 65%, micro 64 71%.  A window
 * fixed by --max-inflight N needs no more than N: a larger update only
 * lengthens the run (with one microbatch in flight, 16 per update made
 * the 4-stage swarm of 300 updates sixteen times as long).  solo has no
 * pipeline to keep busy: 1, whatever --stages, so that a staged solo is
 * the unstaged one's computation and a swarm's of one in flight. */
static int s_default_micro(const opts_t *o)
{
    if (o->command == OPTS_SOLO || o->stages <= 1) return 1;
    int m = o->stages > 4 ? o->stages * o->stages : 4 * o->stages;
    if (o->max_inflight > 0 && m > o->max_inflight) m = o->max_inflight;
    return m > 256 ? 256 : m;
}

/* opts_resolve's work once o->cfg holds the model. */
static int s_resolve_run(opts_t *o, char *err, size_t errlen)
{
    o->cfg.split = o->split == SPLIT_AUTO ? SPLIT_EVEN : (model_split_t)o->split;   /* auto: even until chosen */
    o->cfg.bneck = o->bottleneck;
    o->cfg.bneck_k = o->bottleneck > 0 ? o->stages : 0;
    if (o->batch == 0 && !opts_given(o, "batch")) o->batch = o->cfg.kind == MODEL_GPT ? 8 : 64;
    if (!opts_given(o, "micro")) o->micro = s_default_micro(o);
    if (!opts_given(o, "eval-batches")) o->eval_batches = o->cfg.kind == MODEL_GPT ? 32 : 0;
    o->max_delay_given = opts_given(o, "max-delay");
    if (!o->max_delay_given)   /* 2bw holds two versions; Muon tolerates more delay (README) */
        o->max_delay = o->stash == STASH_2BW ? 1 : o->optim.kind == OPTIM_MUON ? 3 : 2;
    if (opts_check_run(o, err, errlen) < 0 || s_check_bounds(o, 0, err, errlen) < 0)
        return -1;
    if (opts_given(o, "save-every") && !o->checkpoint[0]) {   /* it would be ignored: there is nothing to save to */
        snprintf(err, errlen, "--save-every %d: needs --checkpoint DIR (it sets how often that checkpoint is written)", o->save_every);
        return -1;
    }
    if (o->advertise[0] && !peer_addr_valid(o->advertise)) {
        snprintf(err, errlen, "--advertise %s: want HOST:PORT (a hostname or IP address, port 1..65535)", o->advertise);
        return -1;
    }
    o->optim.total = o->steps;
    return 0;
}

int opts_resolve(opts_t *o, char *err, size_t errlen)
{
    if (model_preset(&o->cfg, o->model, err, errlen) < 0)
        return -1;
    /* an override given is taken as it is (model_check refuses --layers 0), never read as "the preset's" */
    if (opts_given(o, "layers")) o->cfg.L = o->layers;
    if (opts_given(o, "dim")) o->cfg.C = o->dim;
    if (opts_given(o, "heads")) o->cfg.NH = o->heads;
    if (opts_given(o, "ctx")) o->cfg.maxT = o->ctx;
    if (opts_given(o, "vocab")) {
        if (o->cfg.kind != MODEL_GPT) {
            snprintf(err, errlen, "--vocab: %s is not a gpt (its classes follow the data)", o->cfg.name);
            return -1;
        }
        o->cfg.V = o->vocab;
    }
    return s_resolve_run(o, err, errlen);
}

int opts_resolve_model(opts_t *o, const model_config_t *cfg, char *err, size_t errlen)
{
    if (cfg->bneck > 0 && o->stages != cfg->bneck_k) {
        snprintf(err, errlen, "--stages %d: the model's bottleneck sits at the cuts of %d stages", o->stages, cfg->bneck_k);
        return -1;
    }
    o->cfg = *cfg;
    o->bottleneck = cfg->bneck;
    snprintf(o->model, sizeof o->model, "%s", cfg->name);
    return s_resolve_run(o, err, errlen);
}

int opts_model_given(const opts_t *o)
{
    return opts_given(o, "model") || opts_given(o, "layers") || opts_given(o, "dim") || opts_given(o, "heads")
           || opts_given(o, "ctx") || opts_given(o, "vocab");
}

void opts_help(FILE *f, int which)
{
    for (int i = 0; i < NOPTS; i++) {
        const opt_def_t *d = &s_opts[i];
        if (!(d->which & which)) continue;
        char left[64];
        snprintf(left, sizeof left, d->arg[0] ? "--%s %s" : "--%s", d->name, d->arg);
        fprintf(f, "  %-30s %s\n", left, d->help);
    }
}

int opts_eval_batches(const opts_t *o, int available)
{
    int n = o->eval_batches > 0 && o->eval_batches < available ? o->eval_batches : available;
    return n > OPTS_EVAL_BATCHES_MAX ? OPTS_EVAL_BATCHES_MAX : n;
}

void opts_run_text(const opts_t *o, char *buf, size_t len)
{
    const model_config_t *c = &o->cfg;
    char stale[64];
    stale_name(o->staleness, stale, sizeof stale);
    snprintf(buf, len,
             "model=%s kind=%d V=%d T=%d C=%d L=%d NH=%d D=%d data=%s stages=%d steps=%d batch=%d micro=%d "
             "optim=%s lr=%.9g wd=%.9g warmup=%d clip=%.9g codec=%s grad-codec=%s schedule=%d split=%d stash=%d max-inflight=%d max-delay=%d staleness=%s seed=%llu "
             "eval-every=%d eval-batches=%d closed=%d max-delay-given=%d owner=",
             c->name, c->kind, c->V, c->maxT, c->C, c->L, c->NH, c->D, o->data, o->stages, o->steps,
             o->batch, o->micro, optim_kind_name(o->optim.kind), o->optim.lr, o->optim.wd, o->optim.warmup, o->optim.clip, o->codec,
             o->grad_codec, o->schedule, o->split, o->stash, o->max_inflight, o->max_delay, stale, (unsigned long long)o->seed, o->eval_every,
             o->eval_batches, o->closed, o->max_delay_given);
    size_t k = strlen(buf);
    for (int i = 0; i < 32 && k + 3 < len; i++, k += 2) snprintf(buf + k, len - k, "%02x", o->owner_pub[i]);
    if (o->bottleneck > 0 && k + 24 < len)   /* only a model with a bottleneck names it */
        k += (size_t)snprintf(buf + k, len - k, " bottleneck=%d", o->bottleneck);
    if (o->init_size > 0 && k + 90 < len) {   /* only a run started from a checkpoint names one */
        k += (size_t)snprintf(buf + k, len - k, " init=%llu:", (unsigned long long)o->init_size);
        for (int i = 0; i < 32; i++, k += 2) snprintf(buf + k, len - k, "%02x", o->init_hash[i]);
    }
    for (int i = 0; i < o->ndelay && k + 8 < len; i++) {   /* solo only: never part of a swarm's config */
        snprintf(buf + k, len - k, "%s%d", i ? "," : " delay=", o->delay[i]);
        k += strlen(buf + k);
    }
}

uint64_t opts_run_id(const opts_t *o)
{
    char text[2048];
    opts_run_text(o, text, sizeof text);
    unsigned char h[8];
    crypto_generichash(h, sizeof h, (const unsigned char *)text, strlen(text), NULL, 0);
    uint64_t id = 0;
    for (int i = 0; i < 8; i++) id |= (uint64_t)h[i] << (8 * i);
    return id;
}

int opts_set_init(opts_t *o, char *err, size_t errlen)
{
    FILE *f = fopen(o->init, "rb");
    if (!f) {
        snprintf(err, errlen, "%s: %s", o->init, strerror(errno));
        return -1;
    }
    crypto_generichash_state h;
    crypto_generichash_init(&h, NULL, 0, sizeof o->init_hash);
    unsigned char buf[1 << 16];
    uint64_t size = 0;
    size_t got;
    while ((got = fread(buf, 1, sizeof buf, f)) > 0) {
        crypto_generichash_update(&h, buf, got);
        size += got;
    }
    int bad = ferror(f);
    fclose(f);
    if (bad || size == 0) {
        snprintf(err, errlen, "%s: %s", o->init, bad ? "read error" : "empty");
        return -1;
    }
    crypto_generichash_final(&h, o->init_hash, sizeof o->init_hash);
    o->init_size = size;
    return 0;
}

int opts_check_init(const opts_t *o, char *err, size_t errlen)
{
    opts_t mine = *o;
    if (opts_set_init(&mine, err, errlen) < 0) return -1;
    if (mine.init_size != o->init_size || sodium_memcmp(mine.init_hash, o->init_hash, sizeof mine.init_hash) != 0) {
        snprintf(err, errlen, "%s: not the checkpoint this run starts from (%llu bytes here, %llu in the run's; the "
                 "hashes differ)", o->init, (unsigned long long)mine.init_size, (unsigned long long)o->init_size);
        return -1;
    }
    return 0;
}
