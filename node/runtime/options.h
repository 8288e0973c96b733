/* options.h: the trainer options shared by `brigade solo` and `brigade node`
 * (DESIGN.md, "Command line").  One table drives parsing, checking and --help. */
#ifndef BRIGADE_OPTIONS_H
#define BRIGADE_OPTIONS_H
#include <stdint.h>
#include <stdio.h>
#include "node/engine/model.h"
#include "node/engine/optim.h"

enum { SCHED_ASYNC = 0, SCHED_GPIPE = 1 };
enum { STASH_FULL = 0, STASH_2BW = 1 };
/* --recompute: keep only each in-flight microbatch's stage input and redo the
 * stage's forward at its backward (auto: where a window of activations is big). */
enum { RECOMPUTE_AUTO = 0, RECOMPUTE_OFF = 1, RECOMPUTE_ON = 2 };
#define OPT_PATH 1024
#define SPLIT_AUTO 2                 /* --split auto (opts_t.split only): the run's data stage chooses the split */
#define OPT_MAX_DELAY 64             /* solo --delay: most updates of delay per stage */

/* A node's word of the run's split (its plan): SPLIT_EVEN, _LATE or _FRONT
 * (node/engine/model.h), or PLAN_UNCHOSEN while --split auto has not chosen
 * one yet (a node lays its stage out even meanwhile, and its data stage
 * issues nothing). */
typedef int plan_t;
#define PLAN_UNCHOSEN (-1)
static inline int plan_chosen(plan_t plan) { return plan >= 0; }
/* Whether split a takes precedence over b (PLAN_UNCHOSEN included): of two
 * splits chosen apart by two data-stage nodes that did not hear each other,
 * the run keeps the one of precedence (compute/plan.c plan_adopt).  The
 * order is the one the choosing rule tries them in: front (3), then late
 * (1), then even (0): either of the first two is chosen on evidence (a
 * swarm seen, a round trip measured), even also where that was missing. */
static inline int plan_outranks(plan_t a, plan_t b) { return plan_chosen(a) && a > b; }

typedef struct {
    /* model */
    char model[24];              /* preset name */
    int layers, dim, heads, ctx; /* overrides; 0 = preset */
    int vocab;                   /* --vocab override (gpt); 0 = preset */
    int bottleneck;              /* --bottleneck S: the learned bottleneck's width divisor at every cut, 0 = none
                                    (copied into cfg.bneck, with cfg.bneck_k the stages) */
    model_config_t cfg;          /* the resolved model */
    /* data and training */
    char data[OPT_PATH];         /* data spec */
    int stages, steps, batch, micro;
    optim_config_t optim;
    char codec[8], grad_codec[8];
    int schedule, stash, max_inflight;
    int recompute;               /* --recompute: RECOMPUTE_AUTO (default), _OFF or _ON */
    int split;                   /* --split: SPLIT_EVEN, _LATE or _FRONT (node/engine/model.h), copied into cfg, or
                                    SPLIT_AUTO (cfg holds SPLIT_EVEN until the run's data stage chooses: compute/plan.c) */
    int staleness;               /* delay compensation: STALE_* flags (node/engine/staleness.h) */
    int max_delay;               /* weight delay budget in updates (--max-delay; async schedule) */
    int max_delay_given;         /* --max-delay was given when the run was created (else the default: one update
                                    more at stage 0 when --split auto chooses the late split, compute/delay.c) */
    int delay[MODEL_STAGES_MAX]; /* solo --delay: weight delay of each stage, in updates */
    int ndelay;                  /* entries of delay[]; 0 without --delay */
    uint64_t seed;
    int threads;
    int eval_every;
    int eval_batches;            /* validation batches per evaluation, 0: all held-out ones */
    /* files */
    char metrics[OPT_PATH], checkpoint[OPT_PATH], save[OPT_PATH], resume[OPT_PATH];
    char init[OPT_PATH];         /* --init: the checkpoint the run starts from (this node's copy) */
    uint64_t init_size;          /* run config: that file's size in bytes, 0 without --init */
    uint8_t init_hash[32];       /* run config: its BLAKE2b-256 (crypto_generichash) */
    int save_every;
    /* node */
    char listen[256], join[512], advertise[256], keys[OPT_PATH];
    int stage;                   /* -1: auto */
    uint64_t stage_run;          /* stage came from a checkpoint of this run (a joiner's hint), 0: from --stage */
    int no_listen;               /* --no-listen: reachable only over the links this node opens */
    char relay[8];               /* --relay on|off ("": on) */
    double relay_mbit;           /* --relay-mbit: cap on relayed traffic, Mbit/s (> 0) */
    double emu_relay_tamper;     /* test-only: alter relayed envelopes with this probability */
    char owner[OPT_PATH];        /* creator of a closed swarm: the owner key folder */
    char ticket[OPT_PATH];       /* joiner of a closed swarm: ticket text or @FILE */
    int closed;                  /* run config: only ticket holders are admitted */
    uint8_t owner_pub[32];       /* run config: the owner's Ed25519 public key */
    int http;
    /* link emulation (tests) */
    double emu_latency_ms, emu_bandwidth_mbit, emu_downlink_mbit, emu_jitter_ms, emu_loss, emu_slowdown;
    /* which options were given on the command line (bit per table entry) */
    uint64_t given[2];
    int command;                 /* the command these are for: OPTS_SOLO, OPTS_NODE or OPTS_SIM (opts_defaults) */
} opts_t;

enum { OPTS_SOLO = 1, OPTS_NODE = 2, OPTS_SIM = 4 };

/* Fills the defaults of the command `which` (OPTS_SOLO or OPTS_NODE). */
void opts_defaults(opts_t *o, int which);
/* Parses argv[first..argc) for the command `which` (OPTS_SOLO or OPTS_NODE).
 * Returns 0; 1 when --help was asked (help printed to stdout); -1 with a
 * one-line reason in err for a bad option or value. */
int opts_parse(opts_t *o, int which, int argc, char **argv, int first, char *err, size_t errlen);
/* The one rule by which every brigade command takes the value of an option
 * (solo, node and sim through opts_parse; keygen, status, sample, assemble
 * and ticket through opts_take).  A value is written joined, "--out=VALUE"
 * (any text), or apart, "--out VALUE".  opts_value: the value apart of
 * option `name` (without dashes; `arg` names the value for the message):
 * argv[*i + 1], with *i moved onto it.  NULL with a one-line reason in err
 * when there is none, or when it starts with "--": that is the next option
 * (`--metrics --steps 5` must not write a file named --steps), and such a
 * value is written joined.  One dash passes (--lr -0.1). */
const char *opts_value(int argc, char **argv, int *i, const char *name, const char *arg, char *err, size_t errlen);
/* Whether argv[*i] is option `name` (without dashes), joined or apart as
 * opts_value takes it.  1 with *value set (*i moved past a value apart), 0
 * when argv[*i] is another argument, -1 with a one-line reason in err. */
int opts_take(int argc, char **argv, int *i, const char *name, const char *arg, const char **value, char *err, size_t errlen);
/* Resolves the model (preset and overrides) and the batch default, then
 * checks the run config (opts_check_run) and this node's own options (every
 * bound of the option table, --advertise, --save-every only with
 * --checkpoint).  Returns 0, or -1 with a one-line reason naming the option. */
int opts_resolve(opts_t *o, char *err, size_t errlen);
/* As opts_resolve, with the model given whole (a model file's) instead of
 * --model and its overrides; the defaults that follow the model (--batch,
 * --eval-batches) follow it. */
int opts_resolve_model(opts_t *o, const model_config_t *cfg, char *err, size_t errlen);
/* Whether --model or any of its overrides (--layers --dim --heads --ctx --vocab) was given. */
int opts_model_given(const opts_t *o);
/* The one check of a run config, the same for `brigade solo`, for the node
 * that creates a swarm (both through opts_resolve) and for a joiner on the
 * config it receives (proto_get_runcfg): the model (model_check), every bound
 * of the option table's run options, the stage split (stage_init) and the
 * codec names.  Returns 0, or -1 with a one-line reason naming the option,
 * e.g. "--steps 100000001: must be 1..100000000". */
int opts_check_run(const opts_t *o, char *err, size_t errlen);
/* Reads the file --init names (o->init) and puts its size and BLAKE2b-256
 * hash into the run config (init_size, init_hash).  0, or -1 with a
 * one-line reason that begins with the file's name. */
int opts_set_init(opts_t *o, char *err, size_t errlen);
/* Whether the file --init names (o->init) is the one of the run config
 * (init_size, init_hash).  0, or -1 with a one-line reason. */
int opts_check_init(const opts_t *o, char *err, size_t errlen);
/* Prints the option table of `which` to f. */
void opts_help(FILE *f, int which);
/* 1 when option `name` (without dashes) was given on the command line. */
int opts_given(const opts_t *o, const char *name);


#define OPTS_EVAL_BATCHES_MAX 65535   /* most validation batches of one evaluation */

/* Validation batches one evaluation runs over when the held-out data holds
 * `available` of them: --eval-batches (0: all), at most available and
 * OPTS_EVAL_BATCHES_MAX.  solo and the swarm both use it, so their val_loss
 * is measured on the same batches. */
int opts_eval_batches(const opts_t *o, int available);

/* The run id: a 64-bit hash of everything that fixes the computation (model,
 * split, data, seed, optimizer, codecs, schedule, batch sizes).  Messages of
 * another run are refused. */
uint64_t opts_run_id(const opts_t *o);
/* The canonical text the run id hashes (also sent to joiners). */
void opts_run_text(const opts_t *o, char *buf, size_t len);

/* (the run config on the wire: proto_put_runcfg, proto_get_runcfg in proto.h) */
#endif
