/* export_cmd.c: `brigade export MODEL_FILE --format safetensors|llmc --out FILE`,
 * a model in the formats PyTorch / Hugging Face and llm.c load (gpt2file.h). */
#include "node/cli/cli.h"
#include "node/engine/gpt2file.h"
#include "node/engine/modelfile.h"
#include "node/runtime/options.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void s_help(void)
{
    printf("usage: brigade export MODEL_FILE --format safetensors|llmc --out FILE [--heads N]\n"
           "  writes a gpt model file (brigade assemble, solo --save; or a safetensors / llm.c .bin) as\n"
           "  safetensors   Hugging Face GPT-2's tensor names and layouts (lm_head.weight when untied),\n"
           "                the shape and the run id in __metadata__: torch / transformers load it\n"
           "  llmc          llm.c's model file (fp32, vocabulary padded to a multiple of 128; tied only)\n"
           "  --heads N     attention heads of a safetensors whose __metadata__ does not say (n_head)\n");
}

/* Parses argv[2..]: 0, 1 after --help, or 2 after a one-line error. */
static int s_parse(int argc, char **argv, const char **in, const char **out, gpt2_format_t *fmt, int *heads)
{
    const char *f = NULL, *h = NULL;
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) { s_help(); return 1; }
        const char *v = NULL;
        char why[400];
        int r = opts_take(argc, argv, &i, "out", "FILE", &v, why, sizeof why);
        if (r > 0) { *out = v; continue; }
        if (r == 0) r = opts_take(argc, argv, &i, "format", "safetensors|llmc", &v, why, sizeof why);
        if (r > 0) { f = v; continue; }
        if (r == 0) r = opts_take(argc, argv, &i, "heads", "N", &v, why, sizeof why);
        if (r > 0) { h = v; continue; }
        if (r < 0) return cli_fail(why);
        if (argv[i][0] == '-' || *in) {
            snprintf(why, sizeof why, "export: unexpected argument '%s' (see brigade export --help)", argv[i]);
            return cli_fail(why);
        }
        *in = argv[i];
    }
    if (!*in || !*out || !f) return cli_fail("export: usage: brigade export MODEL_FILE --format safetensors|llmc --out FILE");
    char *end = NULL;
    long nh = h ? strtol(h, &end, 10) : 0;
    if (h && (end == h || *end || nh < 1 || nh > 8192)) {
        char e[200];
        snprintf(e, sizeof e, "--heads %s: want a whole number 1..8192", h);
        return cli_fail(e);
    }
    *heads = (int)nh;
    if (!strcmp(f, "safetensors")) *fmt = GPT2_SAFETENSORS;
    else if (!strcmp(f, "llmc")) *fmt = GPT2_LLMC;
    else {
        char e[200];
        snprintf(e, sizeof e, "--format %s: want safetensors or llmc", f);
        return cli_fail(e);
    }
    return 0;
}

int cmd_export(int argc, char **argv)
{
    const char *in = NULL, *out = NULL;
    gpt2_format_t fmt = GPT2_SAFETENSORS;
    int heads = 0;
    int rc = s_parse(argc, argv, &in, &out, &fmt, &heads);
    if (rc) return rc == 1 ? 0 : rc;
    char err[600], e2[700];
    model_config_t cfg;
    uint64_t run = 0;
    float *params = gpt2file_load_any(in, heads, &cfg, NULL, &run, err, sizeof err);
    if (!params) {
        snprintf(e2, sizeof e2, "export: %s", err);
        return cli_fail(e2);
    }
    if (cfg.kind != MODEL_GPT) rc = cli_fail("export: the model file holds a classifier, not a gpt");
    else if (modelfile_check_writable(out, err, sizeof err) < 0 || gpt2file_save(out, fmt, &cfg, params, run, err, sizeof err) < 0) {
        snprintf(e2, sizeof e2, "export: --out %s", err);
        rc = cli_fail(e2);
    } else {
        printf("exported %s (%zu parameters) to %s as %s\n", in, model_num_params(&cfg), out,
               fmt == GPT2_LLMC ? "llm.c's fp32 model file" : "safetensors");
    }
    free(params);
    return rc;
}
