/* eval_cmd.c: `brigade eval --model-file F --data SPEC`, the held-out loss of
 * any model file (brigade's, a safetensors, an llm.c .bin) on any token data,
 * in windows anyone can reproduce (DESIGN.md): the mean next-token loss over
 * the held-out tokens t[0..n) in windows k = 0, 1, ... while (k+1)T < n,
 * inputs t[kT..kT+T), targets t[kT+1..kT+T+1). */
#include "node/cli/cli.h"
#include "node/engine/gpt2file.h"
#include "node/engine/model.h"
#include "node/runtime/options.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EVAL_BATCH 8                   /* windows per forward, at most */
#define EVAL_ACTS_FLOATS (1L << 28)    /* and as many as keep the activations within 1 GiB (one at least) */

typedef struct {
    const char *file, *data;
    int heads, threads;
    int shape[4];      /* --vocab --ctx --dim --layers, 0: not given */
} eval_opts_t;

static const char *const s_shape_opt[4] = { "vocab", "ctx", "dim", "layers" };

static void s_help(void)
{
    printf("usage: brigade eval --model-file FILE --data SPEC [--heads N] [--threads N]\n"
           "  the mean next-token loss of a gpt over the held-out tokens of SPEC (tokens:PATH, nanogpt:DIR,\n"
           "  text:PATH), in windows k = 0, 1, ... while (k+1)T < n: inputs t[kT..kT+T), targets t[kT+1..kT+T+1)\n"
           "  (T the model's context); the last line says val_loss X\n"
           "  --model-file FILE  a brigade model file, a safetensors with GPT-2's names, or an llm.c .bin\n"
           "  --heads N          attention heads, for a safetensors whose __metadata__ does not say (n_head)\n"
           "  --vocab --ctx --dim --layers N   where given, must be the file's\n"
           "  --threads N        compute threads (default 1)\n");
}

/* A whole number 1..hi from v for option name into *x: 0, or 2 after a one-line error. */
static int s_int(const char *name, const char *v, int hi, int *x)
{
    char *end = NULL;
    long n = strtol(v, &end, 10);
    if (end == v || *end || n < 1 || n > hi) {
        char e[200];
        snprintf(e, sizeof e, "--%s %s: want a whole number 1..%d", name, v, hi);
        return cli_fail(e);
    }
    *x = (int)n;
    return 0;
}

/* Parses argv[2..] into *o.  0, 1 after --help, or 2 after a one-line error. */
static int s_parse(eval_opts_t *o, int argc, char **argv)
{
    *o = (eval_opts_t){ .threads = 1 };
    static const char *const known[] = { "model-file", "data", "heads", "threads", "vocab", "ctx", "dim", "layers" };
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) { s_help(); return 1; }
        const char *v = NULL, *name = NULL;
        char why[400];
        int r = 0;
        for (size_t k = 0; k < sizeof known / sizeof known[0] && r == 0; k++)
            r = opts_take(argc, argv, &i, name = known[k], "VALUE", &v, why, sizeof why);
        if (r == 0) {
            snprintf(why, sizeof why, "unknown option '%s' (see brigade eval --help)", argv[i]);
            return cli_fail(why);
        }
        if (r < 0) return cli_fail(why);
        int rc = 0;
        if (!strcmp(name, "model-file")) o->file = v;
        else if (!strcmp(name, "data")) o->data = v;
        else if (!strcmp(name, "heads")) rc = s_int(name, v, 8192, &o->heads);
        else if (!strcmp(name, "threads")) rc = s_int(name, v, 256, &o->threads);
        else
            for (int k = 0; k < 4; k++)
                if (!strcmp(name, s_shape_opt[k])) rc = s_int(name, v, 1 << 24, &o->shape[k]);
        if (rc) return rc;
    }
    if (!o->file || !o->data) return cli_fail("eval: --model-file FILE and --data SPEC are required");
    return 0;
}

/* The mean loss over the windows (see the top); 0, or 2 after a one-line error. */
static int s_run(const eval_opts_t *o, const model_config_t *cfg, const float *params, data_t *d, double *loss,
                 size_t *nwin)
{
    int T = cfg->maxT;
    size_t n = data_val_tokens(d), W = 0;
    while ((W + 1) * (size_t)T < n) W++;
    if (W == 0) {
        char e[300];
        snprintf(e, sizeof e, "--data %s: %zu held-out tokens, not one window of %d (+1)", o->data, n, T);
        return cli_fail(e);
    }
    char err[300];
    stage_t *s = malloc(sizeof *s);
    if (!s || stage_init(s, cfg, 0, 1, err, sizeof err) < 0) { free(s); return cli_fail(s ? err : "out of memory"); }
    s->threads = o->threads;
    int most = EVAL_BATCH;
    while (most > 1 && acts_floats(s, most, T) > (size_t)EVAL_ACTS_FLOATS) most /= 2;
    double total = 0;
    int rc = 0;
    for (size_t k = 0; k < W && rc == 0;) {
        int B = W - k < (size_t)most ? (int)(W - k) : most;
        acts_t *a = acts_new(s, B, T);
        batch_t b;
        if (!a || data_batch_alloc(d, &b, B) < 0) { acts_destroy(&a); rc = cli_fail("eval: out of memory"); break; }
        for (; W - k >= (size_t)B; k += (size_t)B) {
            for (int i = 0; i < B; i++) data_val_window(d, &b, i, (k + (size_t)i) * (size_t)T);
            memcpy(a->tokens, b.tokens, sizeof(int) * (size_t)B * T);
            memcpy(a->targets, b.targets, sizeof(int) * (size_t)B * T);
            stage_eval(s, params, a);
            total += (double)a->loss * B;
        }
        data_batch_free(&b);
        acts_destroy(&a);
    }
    free(s);
    *loss = total / (double)W;
    *nwin = W;
    return rc;
}

int cmd_eval(int argc, char **argv)
{
    eval_opts_t o;
    int rc = s_parse(&o, argc, argv);
    if (rc) return rc == 1 ? 0 : rc;
    char err[600], e2[700];
    model_config_t cfg;
    float *params = gpt2file_load_any(o.file, o.heads, &cfg, NULL, NULL, err, sizeof err);
    if (!params) {
        snprintf(e2, sizeof e2, "--model-file %s", err);
        return cli_fail(e2);
    }
    int file_shape[4] = { cfg.V, cfg.maxT, cfg.C, cfg.L };
    for (int k = 0; k < 4 && !rc; k++)
        if (o.shape[k] && o.shape[k] != file_shape[k]) {
            snprintf(e2, sizeof e2, "--%s %d: the model file's is %d", s_shape_opt[k], o.shape[k], file_shape[k]);
            rc = cli_fail(e2);
        }
    if (!rc && cfg.kind != MODEL_GPT) rc = cli_fail("eval: the model file holds a classifier, not a gpt");
    data_t *d = NULL;
    if (!rc) {
        d = data_open(o.data, DATA_TOKENS, cfg.maxT, 1, err, sizeof err);
        if (!d) { snprintf(e2, sizeof e2, "--data: %s", err); rc = cli_fail(e2); }
        else if (model_check_data(&cfg, d, o.data, err, sizeof err) < 0) rc = cli_fail(err);
    }
    double loss = 0;
    size_t W = 0;
    if (!rc) rc = s_run(&o, &cfg, params, d, &loss, &W);
    if (!rc) {
        fprintf(stderr, "eval: %s (vocabulary %d, context %d, width %d, %d blocks of %d heads) on %zu windows of %s\n",
                o.file, cfg.V, cfg.maxT, cfg.C, cfg.L, cfg.NH, W, o.data);
        printf("val_loss %.8f\n", loss);
    }
    data_close(&d);
    free(params);
    return rc;
}
