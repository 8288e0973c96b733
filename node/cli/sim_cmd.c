/* sim_cmd.c: `brigade sim`: a whole swarm of the real runtime in one
 * process on a virtual network and clock (node/runtime/sim.h). */
#include "node/cli/cli.h"
#include "net/wire.h"
#include "node/runtime/sim.h"
#include <malloc.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum { A_INT, A_DOUBLE, A_RANGE, A_COMPUTE, A_PATH } arg_type_t;

typedef struct {
    const char *name;     /* without the leading -- */
    arg_type_t type;
    const char *arg;      /* for --help */
    const char *help;
} sim_arg_t;

static const sim_arg_t s_args[] = {
    { "nodes", A_INT, "N", "virtual nodes at the start (default 8)" },
    { "compute", A_COMPUTE, "real|model", "run the engine (tiny models: real losses) or model each step's time from its FLOPs (default model)" },
    { "sim-seconds", A_DOUBLE, "S", "bound on simulated time; without --steps the run is these S seconds (default 600)" },
    { "wall-seconds", A_DOUBLE, "S", "bound on wall time (default 600)" },
    { "plan", A_PATH, "FILE", "fault plan: lines 'AT kill N | restart N | slow N F | pause N S | partition A,B.. | heal | rogue N'" },
    { "faults", A_INT, "K", "K random fault events drawn from the seed: kills (restarted later), slowdowns, pauses, partitions (healed), rogues" },
    { "churn", A_DOUBLE, "PER_HOUR", "nodes leaving per node-hour, as many new ones joining (default 0)" },
    { "latency-ms", A_RANGE, "A:B", "one-way latency per directed link, drawn in [A,B] (default 20:50)" },
    { "bandwidth-mbit", A_RANGE, "A:B", "uplink per node, drawn in [A,B]; 0 unlimited (default 100:100)" },
    { "speed", A_RANGE, "A:B", "compute speed factor per node, drawn in [A,B] (default 1:1)" },
    { "jitter-ms", A_DOUBLE, "MS", "extra delay per message, uniform in [0,MS] (default 0)" },
    { "loss", A_DOUBLE, "P", "probability a message is lost (default 0)" },
    { "gflops", A_DOUBLE, "G", "modelled compute: GFLOP/s of a speed-1 node (default 50)" },
};
#define NARGS (int)(sizeof s_args / sizeof s_args[0])

static void s_help(void)
{
    printf("usage: brigade sim --nodes N --stages K [--compute real|model] [--sim-seconds S] [--steps U]\n"
           "                   [--seed X] [--plan FILE] [--churn PER_HOUR] [--latency-ms A:B] [--bandwidth-mbit A:B]\n"
           "                   [--speed A:B] [--metrics FILE] [run options]\n\n"
           "Runs a whole swarm of the real node code (routing, schedule, stash, failure detection,\n"
           "re-issue, gossip, join, backups, rebalancing, admission) in one process on a virtual\n"
           "network and clock.  Node 0 starts the run, the others join it.  The same options and\n"
           "seed give the same event trace.  Its last line:\n"
           "  sim: N nodes, completed C, lost L, duplicated D, sim S s in W s wall, trace HEX\n"
           "Exit 0 only when the run completed and every invariant held.\n\n"
           "simulation options:\n");
    for (int i = 0; i < NARGS; i++) {
        char left[64];
        snprintf(left, sizeof left, "--%s %s", s_args[i].name, s_args[i].arg);
        printf("  %-30s %s\n", left, s_args[i].help);
    }
    printf("\nrun options (as brigade node takes them):\n");
    opts_help(stdout, OPTS_SIM);
}

static const sim_arg_t *s_find(const char *name)
{
    for (int i = 0; i < NARGS; i++)
        if (!strcmp(s_args[i].name, name)) return &s_args[i];
    return NULL;
}

static int s_number(const char *name, const char *v, double lo, double hi, double *out, char *err, size_t errlen)
{
    char *end;
    double x = strtod(v, &end);
    if (end == v || *end || !isfinite(x) || x < lo || x > hi) {
        snprintf(err, errlen, "--%s %s: want a number in %g..%g", name, v, lo, hi);
        return -1;
    }
    *out = x;
    return 0;
}

static int s_range(const char *name, const char *v, double hi, double *a, double *b, char *err, size_t errlen)
{
    char buf[64];
    if (strlen(v) >= sizeof buf) { snprintf(err, errlen, "--%s %.40s...: too long for A or A:B", name, v); return -1; }
    snprintf(buf, sizeof buf, "%s", v);
    char *colon = strchr(buf, ':');
    if (colon) *colon = 0;
    if (s_number(name, buf, 0, hi, a, err, errlen) < 0 || (colon && s_number(name, colon + 1, 0, hi, b, err, errlen) < 0)) {
        snprintf(err, errlen, "--%s %s: want A or A:B, numbers in 0..%g", name, v, hi);   /* the value as given */
        return -1;
    }
    if (!colon) { *b = *a; return 0; }
    if (*b < *a) { snprintf(err, errlen, "--%s %s: A:B with A <= B", name, v); return -1; }
    return 0;
}

/* Takes one simulation option with its value. */
static int s_set(sim_opts_t *so, const sim_arg_t *d, const char *v, char *err, size_t errlen)
{
    double x, y;
    if (!*v) {   /* an unset shell variable: not the same as leaving the option out (as the run options) */
        snprintf(err, errlen, "--%s: empty value (leave the option out for its default)", d->name);
        return -1;
    }
    switch (d->type) {
    case A_INT:
        if (s_number(d->name, v, 0, 100000, &x, err, errlen) < 0 || x != floor(x) || (x < 1 && !strcmp(d->name, "nodes"))) {
            snprintf(err, errlen, "--%s %s: want a whole number in %d..100000", d->name, v, strcmp(d->name, "nodes") ? 0 : 1);
            return -1;
        }
        if (!strcmp(d->name, "nodes")) so->nodes = (int)x;
        else so->faults = (int)x;
        return 0;
    case A_COMPUTE:
        if (!strcmp(v, "real")) so->real = 1;
        else if (!strcmp(v, "model")) so->real = 0;
        else { snprintf(err, errlen, "--compute %s: want real or model", v); return -1; }
        return 0;
    case A_PATH:
        if (strlen(v) >= sizeof so->plan) { snprintf(err, errlen, "--%s: path too long", d->name); return -1; }
        snprintf(so->plan, sizeof so->plan, "%s", v);
        return 0;
    case A_RANGE:
        if (!strcmp(d->name, "latency-ms")) {
            if (s_range(d->name, v, 60000, &so->lat_lo, &so->lat_hi, err, errlen) < 0) return -1;
        } else if (!strcmp(d->name, "bandwidth-mbit")) {
            if (s_range(d->name, v, 1e6, &so->bw_lo, &so->bw_hi, err, errlen) < 0) return -1;
        } else {
            if (s_range(d->name, v, 1000, &x, &y, err, errlen) < 0) return -1;
            if (x <= 0) { snprintf(err, errlen, "--speed %s: speeds must be above 0", v); return -1; }
            so->speed_lo = x;
            so->speed_hi = y;
        }
        return 0;
    case A_DOUBLE:
        if (!strcmp(d->name, "sim-seconds")) return s_number(d->name, v, 1, 1e7, &so->sim_seconds, err, errlen);
        if (!strcmp(d->name, "wall-seconds")) return s_number(d->name, v, 1, 1e6, &so->wall_seconds, err, errlen);
        if (!strcmp(d->name, "churn")) return s_number(d->name, v, 0, 1e4, &so->churn_per_hour, err, errlen);
        if (!strcmp(d->name, "jitter-ms")) return s_number(d->name, v, 0, 60000, &so->jitter_ms, err, errlen);
        if (!strcmp(d->name, "loss")) return s_number(d->name, v, 0, 0.5, &so->loss, err, errlen);
        return s_number(d->name, v, 0.001, 1e6, &so->gflops, err, errlen);
    }
    return -1;
}

/* Splits argv into simulation options (taken here) and run options (left in rest). */
static int s_parse(sim_opts_t *so, int argc, char **argv, char **rest, int *nrest, char *err, size_t errlen)
{
    *nrest = 0;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) return 1;
        const char *eq = strchr(a, '=');   /* --name=value, as the run options take it */
        const sim_arg_t *d = NULL;
        char name[32];
        size_t n = eq ? (size_t)(eq - a) - 2 : strlen(a) - 2;
        if (strncmp(a, "--", 2) == 0 && n < sizeof name) {
            memcpy(name, a + 2, n);
            name[n] = '\0';
            d = s_find(name);
        }
        if (!d) {   /* a run option with its value apart, unless the next argument is an option (opts_value) */
            rest[(*nrest)++] = argv[i];
            if (strncmp(a, "--", 2) == 0 && !eq && i + 1 < argc && strncmp(argv[i + 1], "--", 2) != 0) rest[(*nrest)++] = argv[++i];
            continue;
        }
        const char *v = eq ? eq + 1 : opts_value(argc, argv, &i, d->name, d->arg, err, errlen);
        if (!v || s_set(so, d, v, err, errlen) < 0) return -1;
    }
    return 0;
}

/* Where the node-time of the steady state went, per stage, and the steady
 * state's share of the compute bound (the line DESIGN.md names). */
static void s_print_steady(const sim_result_t *r, int stages)
{
    const sim_steady_t *st = &r->steady;
    if (!st->reached) { printf("sim: no steady state: not every initial node started its stage\n"); return; }
    double span = st->to - st->from;
    for (int k = 0; k < stages && k < MODEL_STAGES_MAX; k++) {
        double all = 0;
        for (int w = 0; w < SIM_T_N; w++) all += st->t[k][w];
        if (all <= 0) continue;
        const double *t = st->t[k];
        printf("sim: stage %d, %.1f nodes: computing %.1f%%, waiting for input %.1f%%, held by the delay budget or a flush "
               "%.1f%%, held by the window %.1f%%, averaging %.1f%%, waiting on a link %.1f%%, other %.1f%%\n",
               k, span > 0 ? all / span : 0.0, 100 * t[SIM_T_COMPUTE] / all, 100 * t[SIM_T_INPUT] / all,
               100 * t[SIM_T_HELD] / all, 100 * t[SIM_T_WINDOW] / all, 100 * t[SIM_T_AVG] / all,
               100 * t[SIM_T_LINK] / all, 100 * t[SIM_T_OTHER] / all);
    }
    printf("sim: steady state %.1f..%.1f s: %llu microbatches at the last stage, %.2f per simulated s, %.1f%% of the "
           "compute bound (%.2f per s)\n", st->from, st->to, (unsigned long long)st->mb, span > 0 ? st->mb / span : 0.0,
           st->bound_mb > 0 ? 100.0 * st->mb / st->bound_mb : 0.0, span > 0 ? st->bound_mb / span : 0.0);
}

int cmd_sim(int argc, char **argv)
{
    sim_opts_t *so = calloc(1, sizeof *so);
    char **rest = calloc((size_t)argc + 2, sizeof(char *));
    if (!so || !rest) { free(so); free(rest); return cli_fail("out of memory"); }
    sim_opts_defaults(so);
    char err[512];
    int nrest = 0, r = s_parse(so, argc, argv, rest + 2, &nrest, err, sizeof err);
    if (r == 1) { s_help(); free(so); free(rest); return 0; }
    rest[0] = argv[0];
    rest[1] = argv[1];
    if (r == 0) r = opts_parse(&so->o, OPTS_SIM, nrest + 2, rest, 2, err, sizeof err);
    if (r == 1) { s_help(); free(so); free(rest); return 0; }
    so->steps_given = opts_given(&so->o, "steps");
    if (r < 0 || opts_resolve(&so->o, err, sizeof err) < 0) {
        free(so);
        free(rest);
        return cli_fail(err);
    }
    free(rest);
    if (so->nodes < so->o.stages) {
        snprintf(err, sizeof err, "--nodes %d: fewer nodes than --stages %d", so->nodes, so->o.stages);
        free(so);
        return cli_fail(err);
    }
    if (so->real && so->nodes > 64) fprintf(stderr, "brigade sim: --compute real with %d nodes: each node holds its stage's weights; this may need a lot of memory\n", so->nodes);
    sim_result_t res;
    /* Thousands of nodes in one process allocate and free views and messages
     * of tens of kB many times a simulated second: the allocator keeps what
     * is freed (returning it to the system and faulting it back in was a
     * share of a large run of its own).  Changes no result. */
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, 512 << 20);
    if (sim_run(so, stderr, &res, err, sizeof err) < 0) { free(so); return cli_fail(err); }
    printf("sim: loss %.4f -> %.4f at the last stage; skipped %llu; uncounted %llu\n", res.first_loss, res.last_loss,
           (unsigned long long)res.skipped, (unsigned long long)res.uncounted);
    printf("sim: bytes sent %llu, delivered %llu, dropped %llu, in flight %llu; control (gossip, heartbeats, joins) %.1f B per node-second\n",
           (unsigned long long)res.bytes_sent, (unsigned long long)res.bytes_delivered, (unsigned long long)res.bytes_dropped,
           (unsigned long long)res.bytes_inflight, res.node_seconds > 0 ? res.control_bytes / res.node_seconds : 0.0);
    if (res.node_seconds > 0) {
        double ns = res.node_seconds;
        printf("sim: per node-second: gossip %.0f B (%.2f msgs), heartbeats %.0f B (%.2f msgs), joins and goodbyes %.0f B, "
               "tensors %.0f B (%.2f msgs), averaging %.0f B, state %.0f B\n",
               res.type_bytes[WIRE_PEERS] / ns, res.type_msgs[WIRE_PEERS] / ns,
               (res.type_bytes[WIRE_PING] + res.type_bytes[WIRE_PONG]) / ns, (res.type_msgs[WIRE_PING] + res.type_msgs[WIRE_PONG]) / ns,
               (res.type_bytes[WIRE_JOIN] + res.type_bytes[WIRE_WELCOME] + res.type_bytes[WIRE_BYE] + res.type_bytes[WIRE_DONE]) / ns,
               (res.type_bytes[WIRE_ACT] + res.type_bytes[WIRE_GRAD]) / ns, (res.type_msgs[WIRE_ACT] + res.type_msgs[WIRE_GRAD]) / ns,
               res.type_bytes[WIRE_AVG] / ns, (res.type_bytes[WIRE_STATE] + res.type_bytes[WIRE_STATE_REQ]) / ns);
    }
    if (res.learn_n) printf("sim: a node knew a live peer of every stage %.2f s after it started (mean of %d)\n", res.learn_all_s, res.learn_n);
    printf("sim: %llu microbatches applied at the last stage, %.2f per simulated s, %.1f%% of the compute bound (%.2f per s); "
           "speed %.1f simulated s per CPU s (%.1f CPU s)\n",
           (unsigned long long)res.applied_last, res.sim_s > 0 ? res.applied_last / res.sim_s : 0.0,
           res.bound_mb > 0 ? 100.0 * res.applied_last / res.bound_mb : 0.0, res.sim_s > 0 ? res.bound_mb / res.sim_s : 0.0,
           res.cpu_s > 0 ? res.sim_s / res.cpu_s : 0.0, res.cpu_s);
    s_print_steady(&res, so->o.stages);
    if (so->real) printf("sim: weights %016llx\n", (unsigned long long)res.weights);
    if (!res.run_complete) printf("sim: the run did not complete (%llu of %llu microbatches)\n",
                                  (unsigned long long)res.completed, (unsigned long long)res.target);
    if (res.violations) printf("sim: %d invariant violation%s; first: %s\n", res.violations, res.violations == 1 ? "" : "s", res.why);
    printf("sim: %d nodes, completed %llu, lost %llu, duplicated %llu, sim %.1f s in %.1f s wall, trace %016llx\n",
           res.nodes_total, (unsigned long long)res.completed, (unsigned long long)res.lost, (unsigned long long)res.duplicated,
           res.sim_s, res.wall_s, (unsigned long long)res.trace);
    int ok = res.run_complete && res.violations == 0;
    if (!ok) {
        fprintf(stderr, "brigade sim: %s; replay with: brigade", res.violations ? "invariant broken" : "run incomplete");
        for (int i = 1; i < argc; i++) fprintf(stderr, " %s", argv[i]);
        fprintf(stderr, "\n");
    }
    free(so);
    return ok ? 0 : 1;
}
