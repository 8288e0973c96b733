/* modelcfg.c: a model's configuration (see model.h): the presets, the one
 * validator of shapes, what data a model takes, which units (embedding,
 * blocks, head) each stage of a split holds, and where a bottleneck's cuts
 * sit. */
#include "node/engine/model.h"
#include <stdio.h>
#include <string.h>

int model_preset(model_config_t *cfg, const char *name, char *err, size_t errlen)
{
    memset(cfg, 0, sizeof *cfg);
    snprintf(cfg->name, sizeof cfg->name, "%s", name);
    cfg->kind = MODEL_GPT;
    cfg->V = 256;
    if (strcmp(name, "gpt-tiny") == 0) {
        cfg->maxT = 64; cfg->C = 128; cfg->L = 4; cfg->NH = 4;
    } else if (strcmp(name, "gpt-small") == 0) {
        cfg->maxT = 128; cfg->C = 256; cfg->L = 8; cfg->NH = 8;
    } else if (strcmp(name, "gpt-base") == 0) {
        cfg->maxT = 256; cfg->C = 512; cfg->L = 12; cfg->NH = 8;
    } else if (strcmp(name, "gpt2") == 0) {   /* GPT-2 small's shape */
        cfg->V = 50257; cfg->maxT = 1024; cfg->C = 768; cfg->L = 12; cfg->NH = 12;
    } else if (strcmp(name, "mlp-fmnist") == 0) {
        cfg->kind = MODEL_MLP; cfg->V = 10; cfg->maxT = 1; cfg->C = 1024; cfg->L = 3;
        cfg->D = 784;
    } else {
        snprintf(err, errlen, "--model %s: unknown model (gpt-tiny, gpt-small, gpt-base, gpt2, mlp-fmnist)", name);
        return -1;
    }
    return 0;
}

/* The bottleneck's part of model_check: S divides a gpt's width, the cuts
 * are those of 2..MODEL_STAGES_MAX stages and their tensors fit a stage_t. */
static int s_check_bneck(const model_config_t *cfg, char *err, size_t errlen)
{
    if (cfg->bneck == 0 && cfg->bneck_k == 0) return 0;
    if (cfg->kind != MODEL_GPT) {
        snprintf(err, errlen, "--bottleneck %d: %s is not a gpt (only a gpt's residual stream is narrowed)", cfg->bneck, cfg->name);
        return -1;
    }
    if (cfg->bneck < 1 || cfg->C % cfg->bneck != 0) {
        snprintf(err, errlen, "--bottleneck %d: must divide the width %d (--dim)", cfg->bneck, cfg->C);
        return -1;
    }
    if (cfg->bneck_k < 2 || cfg->bneck_k > MODEL_STAGES_MAX) {
        snprintf(err, errlen, "--bottleneck %d: needs 2..%d stages for its cuts, not %d", cfg->bneck, MODEL_STAGES_MAX, cfg->bneck_k);
        return -1;
    }
    if (12 * cfg->L + 5 + 8 * (cfg->bneck_k - 1) > STAGE_MAX_TENSORS) {
        snprintf(err, errlen, "--bottleneck %d: %d blocks and %d cuts are more tensors than a stage holds (%d)", cfg->bneck, cfg->L,
                 cfg->bneck_k - 1, STAGE_MAX_TENSORS);
        return -1;
    }
    return 0;
}

int model_check(const model_config_t *cfg, char *err, size_t errlen)
{
    if (cfg->L < 1 || cfg->L > 128) {
        snprintf(err, errlen, "--layers %d: must be 1..128", cfg->L);
        return -1;
    }
    if (cfg->C < 1 || cfg->C > 8192) {
        snprintf(err, errlen, "--dim %d: must be 1..8192", cfg->C);
        return -1;
    }
    if (cfg->kind == MODEL_MLP && (cfg->V < 2 || cfg->V > 65536 || cfg->D < 1 || cfg->D > (1 << 20))) {
        snprintf(err, errlen, "mlp: classes %d and inputs %d out of range", cfg->V, cfg->D);
        return -1;
    }
    if (cfg->kind == MODEL_GPT) {
        if (cfg->V < 2 || cfg->V > MODEL_VOCAB_MAX) {
            snprintf(err, errlen, "--vocab %d: must be 2..%d", cfg->V, MODEL_VOCAB_MAX);
            return -1;
        }
        if (cfg->NH < 1 || cfg->C % cfg->NH != 0) {
            snprintf(err, errlen, "--heads %d: must divide --dim %d", cfg->NH, cfg->C);
            return -1;
        }
        if (cfg->maxT < 2 || cfg->maxT > 4096) {
            snprintf(err, errlen, "--ctx %d: must be 2..4096", cfg->maxT);
            return -1;
        }
    }
    if (s_check_bneck(cfg, err, errlen) < 0) return -1;
    /* parameters of the whole model, counted in double so no size overflows */
    double C = cfg->C, n;
    if (cfg->kind == MODEL_GPT) n = (double)cfg->V * C + (double)cfg->maxT * C + cfg->L * (12 * C * C + 13 * C) + 2 * C + (double)cfg->V * C;
    else n = (double)cfg->D * C + C + (cfg->L - 1) * (C * C + C) + C * cfg->V + cfg->V;
    if (cfg->bneck > 0) n += (cfg->bneck_k - 1) * (2 * C * (C / cfg->bneck) + 3 * C + 3 * (C / cfg->bneck));
    if (n > (double)MODEL_MAX_PARAMS) {
        snprintf(err, errlen, "model too large: %.0f parameters (at most %llu)", n, (unsigned long long)MODEL_MAX_PARAMS);
        return -1;
    }
    return 0;
}

int model_num_units(const model_config_t *cfg)
{
    return cfg->kind == MODEL_GPT ? cfg->L + 2 : cfg->L + 1;
}

data_kind_t model_data_kind(const model_config_t *cfg)
{
    return cfg->kind == MODEL_GPT ? DATA_TOKENS : DATA_IMAGES;
}

int model_check_data(const model_config_t *cfg, const data_t *d, const char *spec, char *err, size_t errlen)
{
    if (data_kind(d) != model_data_kind(cfg)) {
        snprintf(err, errlen, "--data %s: not the kind of data %s reads", spec, cfg->name);
        return -1;
    }
    if (cfg->kind == MODEL_GPT && data_classes(d) > cfg->V) {
        const char *file;
        uint64_t at;
        uint32_t top = data_token_max(d, &file, &at);
        if (file)
            snprintf(err, errlen, "--data %s: %s: token %u at byte %llu is outside the vocabulary of %d (--vocab)",
                     spec, file, top, (unsigned long long)at, cfg->V);
        else
            snprintf(err, errlen, "--data %s: bytes need a vocabulary of %d, the model has %d (--vocab)", spec,
                     data_classes(d), cfg->V);
        return -1;
    }
    if (cfg->kind == MODEL_MLP && (cfg->D != data_dim(d) || cfg->V < data_classes(d))) {
        snprintf(err, errlen, "--data %s: samples of %d inputs in %d classes, but the model reads %d inputs into %d classes",
                 spec, data_dim(d), data_classes(d), cfg->D, cfg->V);
        return -1;
    }
    return 0;
}

/* ---- the split ----
 * gpt: unit 0 embedding, units 1..L blocks, unit L+1 head.  SPLIT_EVEN deals
 * the L blocks out as evenly as possible, earlier stages taking the
 * remainder; the embedding joins stage 0 and the head the last stage.
 * SPLIT_LATE (K >= 2) gives stage 0 the embedding alone and deals the blocks
 * out over stages 1..K-1, later stages taking the remainder: an asynchronous
 * pipeline delays stage k's weights by about K-1-k shares of stage 0's delay,
 * and a block hurts more the more it is delayed and the earlier it sits.
 * SPLIT_FRONT gives each later stage one block (the last the head too) and
 * stage 0 the embedding and the rest: in a swarm whose data stage has many
 * nodes, each waits out its own updates' round trips (the delay budget), and
 * the more of a microbatch's compute it holds the less of its time that is.
 * mlp: the L+1 linear layers are dealt out evenly (the others are refused). */
/* Units of stage `stage` when stage 0 holds the embedding alone. */
static void s_units_late(const model_config_t *cfg, int stage, int nstages, int *unit0, int *unit1)
{
    if (stage == 0) { *unit0 = 0; *unit1 = 1; return; }
    int k = nstages - 1, base = cfg->L / k, extra = cfg->L % k, j = stage - 1;
    int plain = k - extra;   /* stages 1..plain hold base blocks, the rest base + 1 */
    int start = j * base + (j > plain ? j - plain : 0);
    *unit0 = 1 + start;
    *unit1 = stage == nstages - 1 ? cfg->L + 2 : 1 + start + base + (j >= plain ? 1 : 0);
}

const char *split_name(model_split_t split)
{
    return split == SPLIT_LATE ? "late" : split == SPLIT_FRONT ? "front" : "even";
}

/* Units of stage `stage` when each later stage holds one block. */
static void s_units_front(const model_config_t *cfg, int stage, int nstages, int *unit0, int *unit1)
{
    int first = cfg->L - (nstages - 1);   /* the blocks stage 0 holds */
    *unit0 = stage == 0 ? 0 : first + stage;
    *unit1 = stage == nstages - 1 ? cfg->L + 2 : first + stage + 1;
}

void stage_units(const model_config_t *cfg, int stage, int nstages, int *unit0, int *unit1)
{
    if (cfg->split == SPLIT_FRONT && cfg->kind == MODEL_GPT && nstages > 1) {
        s_units_front(cfg, stage, nstages, unit0, unit1);
        return;
    }
    if (cfg->split == SPLIT_LATE && cfg->kind == MODEL_GPT && nstages > 1) {
        s_units_late(cfg, stage, nstages, unit0, unit1);
        return;
    }
    int n = cfg->kind == MODEL_GPT ? cfg->L : cfg->L + 1;
    int base = n / nstages, extra = n % nstages;
    int start = stage * base + (stage < extra ? stage : extra);
    int count = base + (stage < extra ? 1 : 0);
    if (cfg->kind == MODEL_GPT) {
        *unit0 = stage == 0 ? 0 : 1 + start;
        *unit1 = stage == nstages - 1 ? cfg->L + 2 : 1 + start + count;
    } else {
        *unit0 = start;
        *unit1 = start + count;
    }
}

int model_cut_after(const model_config_t *cfg, int u)
{
    if (cfg->bneck <= 0) return -1;
    for (int j = 0; j + 1 < cfg->bneck_k; j++) {
        int u0, u1;
        stage_units(cfg, j, cfg->bneck_k, &u0, &u1);
        if (u1 - 1 == u) return j;
        if (u1 - 1 > u) break;   /* the cuts follow units in increasing order */
    }
    return -1;
}

int model_cut_width(const model_config_t *cfg)
{
    return cfg->bneck > 0 ? cfg->C / cfg->bneck : cfg->C;
}
