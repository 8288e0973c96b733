/* sample.c: `brigade sample`, text generation from a trained gpt model file. */
#include "node/cli/cli.h"
#include "node/engine/model.h"
#include "node/engine/gpt2file.h"
#include "node/engine/rng.h"
#include "node/engine/tokenizer.h"
#include "node/runtime/options.h"
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cli_fail(const char *why)
{
    fputs("brigade: ", stderr);
    for (const char *c = why; *c; c++)   /* one line whatever the argument it quotes holds */
        fputc((unsigned char)*c < 0x20 || *c == 0x7f ? '?' : *c, stderr);
    fputc('\n', stderr);
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
           "                      [--tokenizer FILE]\n"
           "                      [--heads N]\n"
           "  generates text from a gpt model file (solo --save, brigade assemble; or a safetensors with GPT-2's\n"
           "  names, or llm.c's .bin)\n"
           "  --heads N          attention heads of a safetensors whose __metadata__ does not say (n_head)\n"
           "  --tokenizer FILE   llm.c's tokenizer file (e.g. gpt2_tokenizer.bin) for a model of tokens, not bytes:\n"
           "                     the output is decoded with it, the prompt encoded greedily (longest token first)\n"
           "  --prompt TEXT      the text it continues (default a newline)\n"
           "  --length N         bytes to generate, 1..100000 (default 200)\n"
           "  --temperature X    0 always takes the likeliest byte; higher draws more freely (default 0.8)\n"
           "  --seed S           the draws' seed: the same seed, the same text (default 1)\n");
}

typedef struct {
    const char *file, *prompt, *tokenizer;
    int length, heads;
    double temp;
    unsigned long long seed;
} sample_opts_t;

/* Parses argv[2..] into *o.  0, 1 after --help, or 2 after a one-line error. */
static int s_parse(sample_opts_t *o, int argc, char **argv)
{
    *o = (sample_opts_t){ .prompt = "\n", .length = 200, .temp = 0.8, .seed = 1 };
    static const char *const known[][2] = { { "model-file", "FILE" }, { "prompt", "TEXT" }, { "length", "N" },
                                            { "temperature", "X" }, { "seed", "S" }, { "tokenizer", "FILE" },
                                            { "heads", "N" } };
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { s_help(); return 1; }
        const char *v = NULL, *name = NULL;
        char e[300], why[400];
        int r = 0;
        for (size_t k = 0; k < sizeof known / sizeof known[0] && r == 0; k++) {
            r = opts_take(argc, argv, &i, known[k][0], known[k][1], &v, why, sizeof why);
            name = known[k][0];
        }
        if (r == 0) { snprintf(e, sizeof e, "unknown option '%s' (see brigade sample --help)", a); return cli_fail(e); }
        if (r < 0) return cli_fail(why);
        double x = 0;
        if (!strcmp(name, "model-file")) o->file = v;
        else if (!strcmp(name, "prompt")) o->prompt = v;
        else if (!strcmp(name, "tokenizer")) o->tokenizer = v;
        else if (!strcmp(name, "heads")) {
            if (s_number(v, &x) < 0 || x != floor(x) || x < 1 || x > 8192) return cli_fail("--heads: want a whole number 1..8192");
            o->heads = (int)x;
        }
        else if (!strcmp(name, "length")) {
            if (s_number(v, &x) < 0 || x != floor(x) || x < 1 || x > 100000) return cli_fail("--length: want a whole number 1..100000");
            o->length = (int)x;
        } else if (!strcmp(name, "temperature")) {
            if (s_number(v, &o->temp) < 0 || o->temp < 0 || o->temp > 100) return cli_fail("--temperature: want a number 0..100");
        } else {   /* --seed */
            char *end = NULL;
            errno = 0;
            o->seed = strtoull(v, &end, 10);
            if (!(*v >= '0' && *v <= '9') || *end || errno) return cli_fail("--seed: want a whole number 0..2^64-1");
        }
    }
    if (!o->file) return cli_fail("sample: --model-file FILE is required");
    return 0;
}

/* The next token from V logits: the largest at temperature 0, else drawn
 * from softmax(logits / temp) with prob (V doubles) as scratch. */
static int s_pick(const float *lg, int V, double temp, double *prob, rng_t *r)
{
    int next = 0;
    if (temp == 0) {
        for (int k = 1; k < V; k++) if (lg[k] > lg[next]) next = k;
        return next;
    }
    double mx = lg[0], z = 0;
    for (int k = 1; k < V; k++) if (lg[k] > mx) mx = lg[k];
    for (int k = 0; k < V; k++) { prob[k] = exp((lg[k] - mx) / temp); z += prob[k]; }
    double u = rng_uniform(r) * z, c = 0;
    for (next = 0; next < V - 1; next++) { c += prob[next]; if (c > u) break; }
    return next;
}

/* Appends token tok to the context ctx of *len tokens (at most T: the oldest drops out). */
static void s_push(int *ctx, int *len, int T, int tok)
{
    if (*len == T) {
        for (int t = 1; t < T; t++) ctx[t - 1] = ctx[t];
        (*len)--;
    }
    ctx[(*len)++] = tok;
}

/* Writes token id: its bytes with a tokenizer, else the byte. */
static void s_put(const tokenizer_t *tk, int id)
{
    if (!tk) { putchar(id); return; }
    size_t n;
    const uint8_t *p = tokenizer_piece(tk, id, &n);
    fwrite(p, 1, n, stdout);
}

/* The prompt into the context: its bytes, or with a tokenizer its tokens;
 * an empty one is a newline (the end-of-text token with a tokenizer that
 * has one, else token 0). */
static void s_prompt(const sample_opts_t *o, const tokenizer_t *tk, int *ctx, int *len, int T)
{
    if (!tk) {
        for (const unsigned char *p = (const unsigned char *)o->prompt; *p; p++) s_push(ctx, len, T, *p);
        if (*len == 0) s_push(ctx, len, T, '\n');
        return;
    }
    int n = (int)strlen(o->prompt) + 1;
    int *ids = malloc(sizeof(int) * (size_t)n);
    n = ids ? tokenizer_encode(tk, o->prompt, ids, n) : 0;
    for (int i = 0; i < n; i++) s_push(ctx, len, T, ids[i]);
    free(ids);
    if (*len == 0) s_push(ctx, len, T, tokenizer_eot(tk) >= 0 ? tokenizer_eot(tk) : 0);
}

/* Writes o->length tokens after the prompt with the model (s, params), decoded
 * with tk (NULL: bytes). 0, or 2 out of memory. */
static int s_generate(const sample_opts_t *o, const model_config_t *cfg, const stage_t *s, const float *params,
                      const tokenizer_t *tk)
{
    int T = cfg->maxT, len = 0;
    acts_t *a = acts_new(s, 1, T);
    int *ctx = calloc((size_t)T, sizeof(int));
    double *prob = malloc(sizeof(double) * (size_t)cfg->V);
    float *logits = malloc(sizeof(float) * (size_t)cfg->V);
    if (!a || !ctx || !prob || !logits) {
        acts_destroy(&a);
        free(ctx);
        free(prob);
        free(logits);
        return cli_fail("out of memory");
    }
    s_prompt(o, tk, ctx, &len, T);
    rng_t r;
    rng_seed(&r, o->seed, 0);
    fputs(o->prompt, stdout);
    for (int i = 0; i < o->length; i++) {
        /* a context of len tokens, run with T positions (the tail is padding the causal mask ignores) */
        memcpy(a->tokens, ctx, sizeof(int) * (size_t)len);
        for (int t = len; t < T; t++) a->tokens[t] = 0;
        memset(a->targets, 0, sizeof(int) * (size_t)T);
        stage_forward(s, params, a);
        stage_head_logits(s, params, a, len - 1, logits);
        int next = s_pick(logits, cfg->V, o->temp, prob, &r);
        s_put(tk, next);
        s_push(ctx, &len, T, next);
    }
    putchar('\n');
    free(logits);
    free(prob);
    free(ctx);
    acts_destroy(&a);
    if (fflush(stdout) != 0 || ferror(stdout)) {   /* a failure during the run: 1 (man brigade, EXIT STATUS) */
        fprintf(stderr, "brigade: sample: the output could not be written: %s\n", strerror(errno));
        return 1;
    }
    return 0;
}

/* s_generate with the tokenizer --tokenizer names, which a model of more
 * than 256 tokens needs.  0, or 2 after a one-line error. */
static int s_sample(const sample_opts_t *o, const model_config_t *cfg, const stage_t *s, const float *params)
{
    char err[512], e2[600];
    if (!o->tokenizer && cfg->V > 256) {
        snprintf(e2, sizeof e2, "sample: the model reads %d tokens, not bytes: give its --tokenizer FILE (llm.c's)", cfg->V);
        return cli_fail(e2);
    }
    tokenizer_t *tk = o->tokenizer ? tokenizer_load(o->tokenizer, err, sizeof err) : NULL;
    if (o->tokenizer && !tk) {
        snprintf(e2, sizeof e2, "--tokenizer %s", err);
        return cli_fail(e2);
    }
    if (tk && tokenizer_size(tk) < cfg->V) {
        snprintf(e2, sizeof e2, "--tokenizer %s: %d tokens, the model's vocabulary is %d", o->tokenizer,
                 tokenizer_size(tk), cfg->V);
        tokenizer_destroy(&tk);
        return cli_fail(e2);
    }
    int rc = s_generate(o, cfg, s, params, tk);
    tokenizer_destroy(&tk);
    return rc;
}

int cmd_sample(int argc, char **argv)
{
    sample_opts_t o;
    int rc = s_parse(&o, argc, argv);
    if (rc) return rc == 1 ? 0 : rc;
    char err[512];
    model_config_t cfg;
    float *params = gpt2file_load_any(o.file, o.heads, &cfg, NULL, NULL, err, sizeof err);
    if (!params) {   /* the reason begins with the file's name */
        char e2[600];
        snprintf(e2, sizeof e2, "--model-file %s", err);
        return cli_fail(e2);
    }
    stage_t s;
    if (cfg.kind != MODEL_GPT) rc = cli_fail("sample: the model file holds a classifier, not a gpt");
    else if (stage_init(&s, &cfg, 0, 1, err, sizeof err) < 0) rc = cli_fail(err);
    else rc = s_sample(&o, &cfg, &s, params);
    free(params);
    return rc;
}
