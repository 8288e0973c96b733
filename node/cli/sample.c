/* sample.c: `brigade sample`, text generation from a trained gpt model file. */
#include "node/cli/cli.h"
#include "node/engine/model.h"
#include "node/engine/modelfile.h"
#include "node/engine/rng.h"
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cli_fail(const char *why)
{
    fprintf(stderr, "brigade: %s\n", why);
    return 2;
}

/* v parsed whole as a finite number into *x: 0, or -1 (empty, trailing text, out of range). */
static int s_number(const char *v, double *x)
{
    char *end = NULL;
    errno = 0;
    *x = strtod(v, &end);
    return end == v || *end || errno || !isfinite(*x) ? -1 : 0;
}

static void s_help(void)
{
    printf("usage: brigade sample --model-file FILE [--prompt TEXT] [--length N] [--temperature X] [--seed S]\n"
           "  generates text from a gpt model file (solo --save, or brigade assemble)\n");
}

int cmd_sample(int argc, char **argv)
{
    const char *file = NULL, *prompt = "\n";
    int length = 200;
    double temp = 0.8;
    unsigned long long seed = 1;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { s_help(); return 0; }
        static const char *const known[] = { "--model-file", "--prompt", "--length", "--temperature", "--seed" };
        int is_known = 0;
        for (size_t k = 0; k < sizeof known / sizeof known[0]; k++) is_known |= !strcmp(a, known[k]);
        char e[256];
        if (!is_known) { snprintf(e, sizeof e, "unknown option '%s' (see brigade sample --help)", a); return cli_fail(e); }
        if (i + 1 >= argc) { snprintf(e, sizeof e, "%s: needs a value (see brigade sample --help)", a); return cli_fail(e); }
        const char *v = argv[++i];
        double x = 0;
        if (!strcmp(a, "--model-file")) file = v;
        else if (!strcmp(a, "--prompt")) prompt = v;
        else if (!strcmp(a, "--length")) {
            if (s_number(v, &x) < 0 || x != floor(x) || x < 1 || x > 100000) return cli_fail("--length: want a whole number 1..100000");
            length = (int)x;
        } else if (!strcmp(a, "--temperature")) {
            if (s_number(v, &temp) < 0 || temp < 0 || temp > 100) return cli_fail("--temperature: want a number 0..100");
        } else if (!strcmp(a, "--seed")) {
            char *end = NULL;
            errno = 0;
            seed = strtoull(v, &end, 10);
            if (!(*v >= '0' && *v <= '9') || *end || errno) return cli_fail("--seed: want a whole number 0..2^64-1");
        }
    }
    if (!file) return cli_fail("sample: --model-file FILE is required");
    char err[512];
    model_config_t cfg;
    int64_t updates;
    size_t n;
    float *params = modelfile_load(file, &cfg, &updates, &n, err, sizeof err);
    if (!params) return cli_fail(err);
    if (cfg.kind != MODEL_GPT) { free(params); return cli_fail("sample: the model file holds a classifier, not a gpt"); }
    stage_t s;
    if (stage_init(&s, &cfg, 0, 1, err, sizeof err) < 0) { free(params); return cli_fail(err); }
    int T = cfg.maxT;
    acts_t *a = acts_new(&s, 1, T);
    if (!a) { free(params); return cli_fail("out of memory"); }
    int *ctx = calloc((size_t)T, sizeof(int));
    int len = 0;
    for (const unsigned char *p = (const unsigned char *)prompt; *p; p++) {
        if (len == T) { memmove(ctx, ctx + 1, sizeof(int) * (T - 1)); len--; }
        ctx[len++] = *p;
    }
    if (len == 0) ctx[len++] = '\n';
    rng_t r;
    rng_seed(&r, seed, 0);
    fputs(prompt, stdout);
    double *prob = malloc(sizeof(double) * cfg.V);
    for (int i = 0; i < length; i++) {
        /* a context of len tokens, run with T positions (the tail is padding the causal mask ignores) */
        memcpy(a->tokens, ctx, sizeof(int) * len);
        for (int t = len; t < T; t++) a->tokens[t] = 0;
        memset(a->targets, 0, sizeof(int) * T);
        stage_forward(&s, params, a);
        const float *lg = acts_logits(&s, a) + (size_t)(len - 1) * cfg.V;
        int next = 0;
        if (temp == 0) {
            for (int k = 1; k < cfg.V; k++) if (lg[k] > lg[next]) next = k;
        } else {
            double mx = lg[0], z = 0;
            for (int k = 1; k < cfg.V; k++) if (lg[k] > mx) mx = lg[k];
            for (int k = 0; k < cfg.V; k++) { prob[k] = exp((lg[k] - mx) / temp); z += prob[k]; }
            double u = rng_uniform(&r) * z, c = 0;
            for (next = 0; next < cfg.V - 1; next++) { c += prob[next]; if (c > u) break; }
        }
        putchar(next);
        if (len == T) { memmove(ctx, ctx + 1, sizeof(int) * (T - 1)); len--; }
        ctx[len++] = next;
    }
    putchar('\n');
    free(prob);
    free(ctx);
    acts_destroy(&a);
    free(params);
    return 0;
}
