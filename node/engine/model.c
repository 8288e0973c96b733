/* model.c: a stage's parameter layout and initialisation, its activations,
 * and its forward/backward passes (see model.h; the configuration and the
 * split's units are in modelcfg.c). */
#include "node/engine/model.h"
#include "node/engine/attention.h"
#include "node/engine/bigbuf.h"
#include "node/engine/layers.h"
#include "node/engine/rng.h"
#include "node/engine/split.h"
#include <assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* rows: the rows of a hidden matrix (param_tensor_t.rows), else 0. */
static void s_add(stage_t *s, int unit, size_t size, int decay, int rows)
{
    assert(s->ntensors < STAGE_MAX_TENSORS);  /* model_check bounds L, so this holds */
    param_tensor_t *t = &s->tensors[s->ntensors++];
    t->offset = s->nparams;
    t->size = size;
    t->unit = unit;
    t->decay = decay;
    t->rows = rows;
    s->nparams += size;
}

/* Tensor order inside a gpt block: ln1w ln1b qkvw qkvb projw projb ln2w ln2b fcw fcb fcpw fcpb. */
enum { BLK_LN1W, BLK_LN1B, BLK_QKVW, BLK_QKVB, BLK_PROJW, BLK_PROJB, BLK_LN2W, BLK_LN2B,
       BLK_FCW, BLK_FCB, BLK_FCPW, BLK_FCPB, BLK_N };

static void s_unit_tensors(stage_t *s, int u)
{
    const model_config_t *c = &s->cfg;
    size_t C = (size_t)c->C;
    if (c->kind == MODEL_MLP) {
        size_t in = u == 0 ? (size_t)c->D : C, out = u == c->L ? (size_t)c->V : C;
        s_add(s, u, out * in, 1, 0);
        s_add(s, u, out, 0, 0);
        return;
    }
    if (u == 0) {
        s_add(s, u, (size_t)c->V * C, 1, 0);     /* wte */
        s_add(s, u, (size_t)c->maxT * C, 1, 0);  /* wpe */
    } else if (u == c->L + 1) {
        s_add(s, u, C, 0, 0);                    /* lnf weight */
        s_add(s, u, C, 0, 0);                    /* lnf bias */
        s_add(s, u, (size_t)c->V * C, 1, 0);     /* head (V,C), untied */
    } else {
        /* the block's matrices are (out, in) row-major: qkv (3C,C), proj (C,C), fc (4C,C), fc proj (C,4C) */
        size_t sz[BLK_N] = { C, C, 3 * C * C, 3 * C, C * C, C, C, C, 4 * C * C, 4 * C, C * 4 * C, C };
        int rows[BLK_N] = { [BLK_QKVW] = 3 * c->C, [BLK_PROJW] = c->C, [BLK_FCW] = 4 * c->C, [BLK_FCPW] = c->C };
        for (int i = 0; i < BLK_N; i++) s_add(s, u, sz[i], rows[i] > 0, rows[i]);
    }
}

/* Cut j's tensors (model.h): the sending part (up 0: LN1, down, LN2) or the
 * receiving part (up 1: the up projection). */
enum { CUT_LN1W, CUT_LN1B, CUT_DOWNW, CUT_DOWNB, CUT_LN2W, CUT_LN2B };
enum { CUT_UPW, CUT_UPB };

static void s_cut_tensors(stage_t *s, int j, int up)
{
    size_t C = (size_t)s->cfg.C, w = (size_t)model_cut_width(&s->cfg);
    int u = MODEL_CUT_UNIT + 2 * j + up;
    if (up) {
        s_add(s, u, C * w, 1, 0);
        s_add(s, u, C, 0, 0);
        return;
    }
    size_t sz[6] = { C, C, w * C, w, w, w };
    for (int i = 0; i < 6; i++) s_add(s, u, sz[i], i == CUT_DOWNW, 0);
}

int stage_init(stage_t *s, const model_config_t *cfg, int stage, int nstages,
               char *err, size_t errlen)
{
    memset(s, 0, sizeof *s);
    s->cfg = *cfg;
    if (model_check(cfg, err, errlen) < 0)
        return -1;
    int late = cfg->split == SPLIT_LATE;
    if ((late || cfg->split == SPLIT_FRONT) && cfg->kind != MODEL_GPT) {
        snprintf(err, errlen, "--split %s: %s is not a gpt (its layers split evenly only)", late ? "late" : "front", cfg->name);
        return -1;
    }
    if (cfg->split != SPLIT_EVEN && cfg->split != SPLIT_FRONT && !late) {
        snprintf(err, errlen, "--split: unknown split rule %d", (int)cfg->split);
        return -1;
    }
    int maxk = cfg->kind == MODEL_GPT ? cfg->L + late : cfg->L + 1;
    if (nstages > MODEL_STAGES_MAX) {
        snprintf(err, errlen, "--stages %d: at most %d", nstages, MODEL_STAGES_MAX);
        return -1;
    }
    if (nstages < 1 || nstages > maxk) {
        snprintf(err, errlen, "--stages %d: %s has %d layers to split%s, so 1..%d stages",
                 nstages, cfg->name, cfg->kind == MODEL_GPT ? cfg->L : maxk,
                 late ? " after the embedding's stage" : "", maxk);
        return -1;
    }
    if (stage < 0 || stage >= nstages) {
        snprintf(err, errlen, "--stage %d: must be 0..%d", stage, nstages - 1);
        return -1;
    }
    if (cfg->bneck > 0 && (cfg->bneck_k > maxk || (nstages != 1 && nstages != cfg->bneck_k))) {
        snprintf(err, errlen, "--stages %d: the model's bottleneck sits at the cuts of %d stages, so %d stages (or 1)",
                 nstages, cfg->bneck_k, cfg->bneck_k);
        return -1;
    }
    s->stage = stage;
    s->nstages = nstages;
    s->threads = 1;
    s->first = stage == 0;
    s->last = stage == nstages - 1;
    stage_units(cfg, stage, nstages, &s->unit0, &s->unit1);
    for (int u = s->unit0; u < s->unit1; u++) {
        int j = u > 0 ? model_cut_after(cfg, u - 1) : -1;
        if (j >= 0) s_cut_tensors(s, j, 1);
        s_unit_tensors(s, u);
        j = model_cut_after(cfg, u);
        if (j >= 0) s_cut_tensors(s, j, 0);
    }
    return 0;
}

size_t stage_num_params(const model_config_t *cfg, int stage, int nstages)
{
    stage_t s;
    char err[200];
    return stage_init(&s, cfg, stage, nstages, err, sizeof err) < 0 ? 0 : s.nparams;
}

/* Index of tensor i of unit u in s->tensors. */
static const float *s_tensor(const stage_t *s, const float *base, int u, int i)
{
    for (int k = 0; k < s->ntensors; k++)
        if (s->tensors[k].unit == u)
            return base + s->tensors[k + i].offset;
    assert(!"unit not in stage");
    return NULL;
}

void stage_init_params(const stage_t *s, float *params, uint64_t seed)
{
    const model_config_t *c = &s->cfg;
    int first_of_unit = 0;
    for (int k = 0; k < s->ntensors; k++) {
        const param_tensor_t *t = &s->tensors[k];
        if (k == 0 || s->tensors[k - 1].unit != t->unit)
            first_of_unit = k;
        int i = k - first_of_unit;  /* tensor index within its unit */
        float *p = params + t->offset;
        rng_t r;
        rng_seed(&r, seed, (uint64_t)t->unit * 64 + (uint64_t)i);
        float std = 0.0f, fill = 0.0f;
        if (t->unit >= MODEL_CUT_UNIT) {
            /* layernorms 1 and 0; projections of unit gain (std 1/sqrt(fan-in)): the down projection's
             * output as wide as LN2's input wants it, the up projection's about as large as a
             * residual stream.  On gpt-tiny (4 stages, S 4, 300 updates) GPT-2's 0.02 for both
             * ended 6.9% above fp32, this 1.8%; a smaller up projection did worse still. */
            int up = (t->unit - MODEL_CUT_UNIT) % 2;
            if (up ? i == CUT_UPW : i == CUT_DOWNW) std = 1.0f / sqrtf((float)(up ? model_cut_width(c) : c->C));
            if (!up && (i == CUT_LN1W || i == CUT_LN2W)) fill = 1.0f;
        } else if (c->kind == MODEL_MLP) {
            size_t in = t->unit == 0 ? (size_t)c->D : (size_t)c->C;
            if (i == 0)
                std = t->unit == c->L ? sqrtf(1.0f / in) : sqrtf(2.0f / in);
        } else if (t->unit == 0) {
            std = 0.02f;
        } else if (t->unit == c->L + 1) {
            if (i == 0) fill = 1.0f;
            if (i == 2) std = 0.02f;
        } else {
            if (i == BLK_LN1W || i == BLK_LN2W) fill = 1.0f;
            if (i == BLK_QKVW || i == BLK_FCW) std = 0.02f;
            if (i == BLK_PROJW || i == BLK_FCPW) std = 0.02f / sqrtf(2.0f * c->L);
        }
        for (size_t j = 0; j < t->size; j++)
            p[j] = std > 0.0f ? std * rng_normal(&r) : fill;
    }
}

/* Width of the tensor crossing into or out of a stage: stage boundaries are
 * the bottleneck's cuts where there is one. */
static size_t s_width(const stage_t *s)
{
    return (size_t)model_cut_width(&s->cfg);
}

size_t stage_in_size(const stage_t *s, int B, int T)
{
    if (s->first) return 0;
    return s->cfg.kind == MODEL_GPT ? (size_t)B * T * s_width(s) : (size_t)B * s_width(s);
}

size_t stage_out_size(const stage_t *s, int B, int T)
{
    if (s->last) return 0;
    return s->cfg.kind == MODEL_GPT ? (size_t)B * T * s_width(s) : (size_t)B * s_width(s);
}

/* ---- activations ----
 * gpt layout in acts_t.buf: [in][emb][blocks...][head][dout][din][scratch]
 * block: ln1m ln1r (N) qkv (N,3C) att (B,NH,T,T) atty (N,C) res2 (N,C)
 *        ln2m ln2r (N) fch (N,4C) fchg (N,4C) res3 (N,C)
 *        (after the forward, fch holds gelu' of the fc output: the backward's
 *        only use of it.  The layernorm outputs are not kept: the forward
 *        writes them to the scratch, where the product after each reads
 *        them, and the backward recomputes them, the same bits, from the
 *        input and the saved mean and rstd just before the weight gradient
 *        that reads them.)
 * head:  lnfm lnfr (N) losses (N) logits (R,V) probs (R,V)  (lnf recomputed too):
 *        the head runs on chunks of R rows (s_head_rows), so no (N,V)
 *        buffer exists at a large vocabulary; the buffers keep the last
 *        chunk's logits and probabilities, the backward recomputes the
 *        others' (with one chunk, as at V 256, it recomputes nothing)
 * scratch: the forward's, reused in turn by every block (ln1, attention's
 *        per-thread scratch, ln2) and the head (lnf)
 * mlp layout: [in][x][per unit: h (B,out)][probs (B,V)][losses (B)][dout][din] */
typedef struct {
    float *ln1m, *ln1r, *qkv, *att, *atty, *res2, *ln2m, *ln2r, *fch, *fchg, *res3;
} block_acts_t;

static size_t s_block_floats(const model_config_t *c, int B, int T)
{
    size_t N = (size_t)B * T, C = (size_t)c->C;
    return N * 4 + N * 3 * C + (size_t)B * c->NH * T * T + N * C * 2 + N * 8 * C + N * C;
}

static block_acts_t s_block(const model_config_t *c, float *p, int B, int T)
{
    size_t N = (size_t)B * T, C = (size_t)c->C;
    block_acts_t b;
    b.ln1m = p; p += N;
    b.ln1r = p; p += N;
    b.qkv = p; p += N * 3 * C;
    b.att = p; p += (size_t)B * c->NH * T * T;
    b.atty = p; p += N * C;
    b.res2 = p; p += N * C;
    b.ln2m = p; p += N;
    b.ln2r = p; p += N;
    b.fch = p; p += N * 4 * C;
    b.fchg = p; p += N * 4 * C;
    b.res3 = p;
    return b;
}

/* A bottleneck cut's saved activations (model.h), one record per cut of
 * which the stage holds a part: ln1m ln1r (N) h (N,w) ln2m ln2r (N) z (N,w)
 * xup (N,C), w = C/S.  z is what the sending part outputs (the stage's out
 * at its end), xup what the receiving part makes of z (the stage's input
 * a->in at its start); LN1's output is not kept (the backward recomputes
 * it, as a block's layernorms). */
typedef struct {
    float *ln1m, *ln1r, *h, *ln2m, *ln2r, *z, *xup;
} cut_acts_t;

static size_t s_cut_floats(const model_config_t *c, int B, int T)
{
    size_t N = (size_t)B * T, w = (size_t)model_cut_width(c);
    return 4 * N + 2 * N * w + N * (size_t)c->C;
}

/* The cuts of which stage s holds a part: how many, the first in *cut0. */
static int s_stage_cuts(const stage_t *s, int *cut0)
{
    int n = 0;
    *cut0 = 0;
    for (int u = s->unit0 > 0 ? s->unit0 - 1 : 0; u < s->unit1; u++) {
        int j = model_cut_after(&s->cfg, u);
        if (j < 0) continue;
        if (n++ == 0) *cut0 = j;
    }
    return n;
}

/* Rows of one chunk of the head (model.h: stage_t.head_rows; by default
 * as many as keep a chunk's logits within MODEL_HEAD_CHUNK_FLOATS). */
static int s_head_rows(const stage_t *s, int N)
{
    long r = s->head_rows > 0 ? s->head_rows : MODEL_HEAD_CHUNK_FLOATS / (long)s->cfg.V;
    return r < 1 ? 1 : r > N ? N : (int)r;
}

static size_t s_head_floats(const stage_t *s, int B, int T)
{
    size_t N = (size_t)B * T;
    return 3 * N + 2 * (size_t)s_head_rows(s, B * T) * s->cfg.V;
}

/* Threads the scratch of new activations and gradients is sized for. */
static int s_workers(const stage_t *s)
{
    return s->threads < 1 ? 1 : s->threads > TEAM_MAX ? TEAM_MAX : s->threads;
}

/* Local layout offsets of a stage's activations; returns the total floats. */
typedef struct {
    size_t in, emb, blocks, head, cuts, dout, din, scratch, total;
    int cut0;   /* the first cut the stage holds a part of (its record is the first at cuts) */
} acts_layout_t;

static acts_layout_t s_layout(const stage_t *s, int B, int T)
{
    const model_config_t *c = &s->cfg;
    acts_layout_t L = {0};
    size_t off = 0, N = (size_t)B * T;
    L.in = off; off += stage_in_size(s, B, T);
    if (c->kind == MODEL_GPT) {
        L.emb = off; if (s->first) off += N * c->C;
        int u0 = s->unit0 < 1 ? 1 : s->unit0, u1 = s->unit1 > c->L + 1 ? c->L + 1 : s->unit1;
        L.blocks = off; off += (size_t)(u1 - u0) * s_block_floats(c, B, T);
        L.head = off; if (s->last) off += s_head_floats(s, B, T);
        L.cuts = off; off += (size_t)s_stage_cuts(s, &L.cut0) * s_cut_floats(c, B, T);
    } else {
        L.emb = off; if (s->first) off += (size_t)B * c->D;
        L.blocks = off;
        for (int u = s->unit0; u < s->unit1; u++)
            off += (size_t)B * (u == c->L ? c->V : c->C);
        L.head = off; if (s->last) off += (size_t)B * c->V + B;
    }
    L.dout = off; off += stage_out_size(s, B, T);
    L.din = off; off += stage_in_size(s, B, T);
    L.scratch = off;   /* the forward's scratch (see above) */
    if (c->kind == MODEL_GPT) {
        size_t att = (size_t)s_workers(s) * attention_scratch_floats(T, c->C, c->NH), ln = N * c->C;
        off += att > ln ? att : ln;
    }
    L.total = off;
    return L;
}

/* Cut j's record in a's activations (the stage holds a part of cut j). */
static cut_acts_t s_cut_acts(const stage_t *s, const acts_t *a, const acts_layout_t *L, int j)
{
    size_t N = (size_t)a->B * a->T, w = (size_t)model_cut_width(&s->cfg);
    float *p = a->buf + L->cuts + (size_t)(j - L->cut0) * s_cut_floats(&s->cfg, a->B, a->T);
    cut_acts_t k;
    k.ln1m = p; p += N;
    k.ln1r = p; p += N;
    k.h = p; p += N * w;
    k.ln2m = p; p += N;
    k.ln2r = p; p += N;
    k.z = p; p += N * w;
    k.xup = p;
    return k;
}

size_t acts_floats(const stage_t *s, int B, int T)
{
    return s_layout(s, B, T).total;
}

acts_t *acts_new(const stage_t *s, int B, int T)
{
    acts_t *a = calloc(1, sizeof *a);
    if (!a) return NULL;
    acts_layout_t L = s_layout(s, B, T);
    a->B = B;
    a->T = T;
    a->nbuf = L.total;
    a->workers = s_workers(s);
    a->buf = bigbuf_new(L.total);
    size_t ntok = s->cfg.kind == MODEL_GPT ? (size_t)B * T : (size_t)B;
    if (s->first && s->cfg.kind == MODEL_GPT) a->tokens = calloc(ntok, sizeof(int));
    if (s->last) a->targets = calloc(ntok, sizeof(int));
    if (!a->buf || (s->first && s->cfg.kind == MODEL_GPT && !a->tokens) || (s->last && !a->targets)) {
        acts_destroy(&a);
        return NULL;
    }
    if (!s->first) { a->in = a->buf + L.in; a->din = a->buf + L.din; }
    if (s->first && s->cfg.kind == MODEL_MLP) a->x = a->buf + L.emb;
    if (!s->last) a->dout = a->buf + L.dout;
    /* out points at the last unit's output, so nothing is copied */
    int cut = s->cfg.kind == MODEL_GPT ? model_cut_after(&s->cfg, s->unit1 - 1) : -1;
    if (!s->last && cut >= 0) {
        a->out = s_cut_acts(s, a, &L, cut).z;
    } else if (!s->last) {
        if (s->cfg.kind == MODEL_GPT) {
            int nblk = s->unit1 - (s->unit0 < 1 ? 1 : s->unit0);
            a->out = nblk > 0
                ? s_block(&s->cfg, a->buf + L.blocks + (size_t)(nblk - 1) * s_block_floats(&s->cfg, B, T), B, T).res3
                : a->buf + L.emb;
        } else {
            a->out = a->buf + L.blocks + (size_t)(s->unit1 - s->unit0 - 1) * B * s->cfg.C;
        }
    }
    return a;
}

acts_t *acts_new_inputs(const stage_t *s, int B, int T)
{
    acts_t *a = calloc(1, sizeof *a);
    if (!a) return NULL;
    int gpt = s->cfg.kind == MODEL_GPT;
    size_t ntok = gpt ? (size_t)B * T : (size_t)B;
    a->B = B;
    a->T = T;
    a->workers = s_workers(s);
    a->nbuf = s->first ? (gpt ? 0 : (size_t)B * s->cfg.D) : stage_in_size(s, B, T);
    a->buf = a->nbuf ? bigbuf_new(a->nbuf) : NULL;
    if (s->first && gpt) a->tokens = calloc(ntok, sizeof(int));
    if (s->last) a->targets = calloc(ntok, sizeof(int));
    if ((a->nbuf && !a->buf) || (s->first && gpt && !a->tokens) || (s->last && !a->targets)) {
        acts_destroy(&a);
        return NULL;
    }
    if (!s->first) a->in = a->buf;
    else if (!gpt) a->x = a->buf;
    return a;
}

void acts_copy_inputs(const stage_t *s, acts_t *dst, const acts_t *src)
{
    size_t ntok = s->cfg.kind == MODEL_GPT ? (size_t)src->B * src->T : (size_t)src->B;
    if (src->in) memcpy(dst->in, src->in, sizeof(float) * stage_in_size(s, src->B, src->T));
    if (src->x) memcpy(dst->x, src->x, sizeof(float) * (size_t)src->B * s->cfg.D);
    if (src->tokens) memcpy(dst->tokens, src->tokens, sizeof(int) * ntok);
    if (src->targets) memcpy(dst->targets, src->targets, sizeof(int) * ntok);
}

void acts_destroy(acts_t **self_p)
{
    if (!*self_p) return;
    acts_t *a = *self_p;
    bigbuf_free(a->buf);
    free(a->tokens);
    free(a->targets);
    free(a);
    *self_p = NULL;
}

/* The head's input: the last block's output (or the stage's input, or the embedding). */
static const float *s_head_in(const stage_t *s, const acts_t *a, const acts_layout_t *L)
{
    const model_config_t *c = &s->cfg;
    int u0 = s->unit0 < 1 ? 1 : s->unit0, nblk = c->L + 1 - u0;
    if (nblk > 0) return s_block(c, a->buf + L->blocks + (size_t)(nblk - 1) * s_block_floats(c, a->B, a->T), a->B, a->T).res3;
    return s->first ? a->buf + L->emb : a->in;
}

void stage_head_logits(const stage_t *s, const float *params, const acts_t *a, int row, float *out)
{
    assert(s->last && s->cfg.kind == MODEL_GPT && row >= 0 && row < a->B * a->T);
    const model_config_t *c = &s->cfg;
    acts_layout_t L = s_layout(s, a->B, a->T);
    size_t N = (size_t)a->B * a->T;
    const float *m = a->buf + L.head, *r = m + N;
    int u = c->L + 1;
    float *ln = malloc(sizeof(float) * (size_t)c->C);
    assert(ln);
    layernorm_apply(ln, s_head_in(s, a, &L) + (size_t)row * c->C, m + row, r + row, s_tensor(s, params, u, 0),
                    s_tensor(s, params, u, 1), 1, c->C);
    linear_forward(out, ln, s_tensor(s, params, u, 2), NULL, 1, c->C, c->V);
    free(ln);
}

struct grad_scratch {
    float *dres, *dtmp, *dqkv, *dfchg, *attscratch, *dlogits;
    float *re;          /* (N,C): the layernorm outputs the backward recomputes (lnf, ln2, ln1 in turn) */
    float *part;        /* row-block sums of the layernorm and fc bias gradients (split.h) */
    size_t attstride;   /* floats of attention scratch per thread */
    int workers;        /* threads the scratch is sized for */
    float *buf;
};

grad_scratch_t *grad_scratch_new(const stage_t *s, int B, int T)
{
    grad_scratch_t *g = calloc(1, sizeof *g);
    if (!g) return NULL;
    const model_config_t *c = &s->cfg;
    size_t N = (size_t)B * T, C = (size_t)c->C;
    /* dres and dtmp hold the gradient of a unit's output or input: (N,C), and
     * the mlp's last output (B,V) (its first input gets none) */
    size_t wide = c->kind == MODEL_MLP && (size_t)c->V > C ? (size_t)c->V : C;
    g->workers = s_workers(s);
    g->attstride = c->kind == MODEL_GPT ? attention_scratch_floats(T, c->C, c->NH) : 0;
    size_t R = c->kind == MODEL_GPT && s->last ? (size_t)s_head_rows(s, B * T) : 0;
    size_t sz[8] = { N * wide, N * wide, N * 3 * C, N * 4 * C, g->workers * g->attstride, R * c->V, N * C,
                     split_part_floats(B * T, 4 * c->C) };
    if (c->kind == MODEL_MLP) { sz[2] = sz[3] = sz[4] = sz[6] = sz[7] = 0; }
    size_t total = 0;
    for (int i = 0; i < 8; i++) total += sz[i];
    g->buf = bigbuf_new(total);
    if (!g->buf) { free(g); return NULL; }
    float *p = g->buf, **dst[8] = { &g->dres, &g->dtmp, &g->dqkv, &g->dfchg, &g->attscratch, &g->dlogits, &g->re,
                                    &g->part };
    for (int i = 0; i < 8; i++) { *dst[i] = p; p += sz[i]; }
    return g;
}

void grad_scratch_destroy(grad_scratch_t **self_p)
{
    if (!*self_p) return;
    bigbuf_free((*self_p)->buf);
    free(*self_p);
    *self_p = NULL;
}

/* ---- gpt ---- */

/* A tensor of cut j's part (up: the receiving one) in a parameter or gradient buffer. */
static float *s_cut_tensor(const stage_t *s, const float *base, int j, int up, int i)
{
    return (float *)s_tensor(s, base, MODEL_CUT_UNIT + 2 * j + up, i);
}

/* The output of unit u (the embedding or a block) in a's activations. */
static const float *s_unit_out(const stage_t *s, const acts_t *a, const acts_layout_t *L, int u)
{
    int u0 = s->unit0 < 1 ? 1 : s->unit0;
    if (u == 0) return a->buf + L->emb;
    return s_block(&s->cfg, a->buf + L->blocks + (size_t)(u - u0) * s_block_floats(&s->cfg, a->B, a->T), a->B, a->T).res3;
}

/* After unit u, whose output is x: through cut j's sending part when one
 * follows u, and its receiving part too when this stage holds the next
 * unit.  Returns what the next unit reads (or the stage's out: z), x when
 * no cut follows u. */
static const float *s_after_unit(const stage_t *s, const float *params, acts_t *a, const acts_layout_t *L, int u,
                                 const float *x, team_t *tm)
{
    int j = model_cut_after(&s->cfg, u);
    if (j < 0) return x;
    int N = a->B * a->T, C = s->cfg.C, w = model_cut_width(&s->cfg);
    cut_acts_t k = s_cut_acts(s, a, L, j);
    float *scr = a->buf + L->scratch;   /* LN1's output */
    split_layernorm_forward(tm, scr, k.ln1m, k.ln1r, x, s_cut_tensor(s, params, j, 0, CUT_LN1W),
                            s_cut_tensor(s, params, j, 0, CUT_LN1B), N, C);
    split_linear_forward(tm, k.h, scr, s_cut_tensor(s, params, j, 0, CUT_DOWNW), s_cut_tensor(s, params, j, 0, CUT_DOWNB),
                         N, C, w);
    split_layernorm_forward(tm, k.z, k.ln2m, k.ln2r, k.h, s_cut_tensor(s, params, j, 0, CUT_LN2W),
                            s_cut_tensor(s, params, j, 0, CUT_LN2B), N, w);
    if (u + 1 >= s->unit1) return k.z;
    split_linear_forward(tm, k.xup, k.z, s_cut_tensor(s, params, j, 1, CUT_UPW), s_cut_tensor(s, params, j, 1, CUT_UPB),
                         N, w, C);
    return k.xup;
}

/* Before unit u, which reads x: at the stage's start after a cut, the
 * cut's receiving part on the stage's input.  Returns what u reads. */
static const float *s_before_unit(const stage_t *s, const float *params, acts_t *a, const acts_layout_t *L, int u,
                                  const float *x, team_t *tm)
{
    int j = u == s->unit0 && u > 0 ? model_cut_after(&s->cfg, u - 1) : -1;
    if (j < 0) return x;
    cut_acts_t k = s_cut_acts(s, a, L, j);
    split_linear_forward(tm, k.xup, a->in, s_cut_tensor(s, params, j, 1, CUT_UPW), s_cut_tensor(s, params, j, 1, CUT_UPB),
                         a->B * a->T, model_cut_width(&s->cfg), s->cfg.C);
    return k.xup;
}

/* Cut j's sending part backward: from dz (N,w), the gradient of its z, and
 * x, its input, adds its tensors' gradients and writes dx into g->dres. */
static void s_cut_down_backward(const stage_t *s, const float *params, float *grads, const acts_t *a,
                                grad_scratch_t *g, const acts_layout_t *L, int j, const float *dz, const float *x,
                                team_t *tm);

/* out 0: the stage's output is not wanted (stage_recompute): the last
 * block of a stage before the last skips its fc projection, whose result
 * only the next stage reads. */
static void s_gpt_forward(const stage_t *s, const float *params, acts_t *a, team_t *tm, int out)
{
    const model_config_t *c = &s->cfg;
    int B = a->B, T = a->T, C = c->C, NH = c->NH, V = c->V, N = B * T;
    acts_layout_t L = s_layout(s, B, T);
    const float *x = a->in;
    if (s->first) {
        float *emb = a->buf + L.emb;
        embedding_forward(emb, a->tokens, s_tensor(s, params, 0, 0), s_tensor(s, params, 0, 1), B, T, C);
        x = s_after_unit(s, params, a, &L, 0, emb, tm);
    }
    int u0 = s->unit0 < 1 ? 1 : s->unit0, u1 = s->unit1 > c->L + 1 ? c->L + 1 : s->unit1;
    size_t bf = s_block_floats(c, B, T);
    float *scr = a->buf + L.scratch;
    for (int u = u0; u < u1; u++) {
        block_acts_t b = s_block(c, a->buf + L.blocks + (size_t)(u - u0) * bf, B, T);
        const float *w[BLK_N];
        for (int i = 0; i < BLK_N; i++) w[i] = s_tensor(s, params, u, i);
        x = s_before_unit(s, params, a, &L, u, x, tm);
        split_layernorm_forward(tm, scr, b.ln1m, b.ln1r, x, w[BLK_LN1W], w[BLK_LN1B], N, C);
        split_linear_forward(tm, b.qkv, scr, w[BLK_QKVW], w[BLK_QKVB], N, C, 3 * C);
        split_attention_forward(tm, b.atty, b.att, scr, attention_scratch_floats(T, C, NH), b.qkv, B, T, C, NH);
        /* the biases of proj, fc and fcp are added in the pass on the product's blocks */
        split_linear_bias_residual_forward(tm, b.res2, b.atty, w[BLK_PROJW], w[BLK_PROJB], x, N, C, C);
        split_layernorm_forward(tm, scr, b.ln2m, b.ln2r, b.res2, w[BLK_LN2W], w[BLK_LN2B], N, C);
        /* fch holds gelu' */
        split_linear_bias_gelu_forward_grad(tm, b.fchg, b.fch, scr, w[BLK_FCW], w[BLK_FCB], N, C, 4 * C);
        if (!out && !s->last && u == u1 - 1 && model_cut_after(c, u) < 0) break;   /* a cut's backward reads res3 */
        split_linear_bias_residual_forward(tm, b.res3, b.fchg, w[BLK_FCPW], w[BLK_FCPB], b.res2, N, 4 * C, C);
        x = s_after_unit(s, params, a, &L, u, b.res3, tm);
    }
    if (s->last) {
        float *m = a->buf + L.head, *r = m + N, *losses = r + N;
        float *logits = losses + N, *probs = logits + (size_t)s_head_rows(s, N) * V;
        int u = c->L + 1, R = s_head_rows(s, N);
        split_layernorm_forward(tm, scr, m, r, x, s_tensor(s, params, u, 0), s_tensor(s, params, u, 1), N, C);
        for (int r0 = 0; r0 < N; r0 += R) {
            int n = N - r0 < R ? N - r0 : R;
            split_linear_forward(tm, logits, scr + (size_t)r0 * C, s_tensor(s, params, u, 2), NULL, n, C, V);
            split_crossentropy_forward(tm, losses + r0, probs, logits, a->targets + r0, n, V);
        }
        double total = 0.0;   /* as split_crossentropy_forward sums: in double, in row order */
        for (int n = 0; n < N; n++) total += losses[n];
        a->loss = N > 0 ? (float)(total / N) : 0.0f;
        a->correct = 0;
    }
}

/* The head's backward, chunk by chunk from the last (whose probabilities
 * the forward left in the buffers; the others' are recomputed from g->re,
 * the final layernorm's output): the head's weight gradient += and the
 * gradient of g->re into g->dtmp. */
static void s_head_backward(const stage_t *s, const float *params, float *grads, acts_t *a, grad_scratch_t *g,
                            float loss_scale, team_t *tm)
{
    const model_config_t *c = &s->cfg;
    int N = a->B * a->T, C = c->C, V = c->V, R = s_head_rows(s, N), u = c->L + 1;
    acts_layout_t L = s_layout(s, a->B, a->T);
    float *losses = a->buf + L.head + 2 * (size_t)N, *logits = losses + N, *probs = logits + (size_t)R * V;
    const float *w = s_tensor(s, params, u, 2);
    int last = (N - 1) / R * R;
    for (int r0 = last; r0 >= 0; r0 -= R) {
        int n = N - r0 < R ? N - r0 : R;
        if (r0 != last) {
            split_linear_forward(tm, logits, g->re + (size_t)r0 * C, w, NULL, n, C, V);
            split_crossentropy_forward(tm, losses + r0, probs, logits, a->targets + r0, n, V);
        }
        memset(g->dlogits, 0, sizeof(float) * (size_t)n * V);
        split_crossentropy_backward(tm, g->dlogits, probs, a->targets + r0, loss_scale, n, V);
        split_linear_backward(tm, g->dtmp + (size_t)r0 * C, (float *)s_tensor(s, grads, u, 2), NULL, g->dlogits,
                              g->re + (size_t)r0 * C, w, n, C, V, 0);
    }
}

static void s_cut_down_backward(const stage_t *s, const float *params, float *grads, const acts_t *a,
                                grad_scratch_t *g, const acts_layout_t *L, int j, const float *dz, const float *x,
                                team_t *tm)
{
    int N = a->B * a->T, C = s->cfg.C, w = model_cut_width(&s->cfg);
    cut_acts_t k = s_cut_acts(s, a, L, j);
    float *dh = g->dqkv;   /* (N,w): free between blocks */
    memset(dh, 0, sizeof(float) * (size_t)N * w);
    split_layernorm_backward(tm, dh, s_cut_tensor(s, grads, j, 0, CUT_LN2W), s_cut_tensor(s, grads, j, 0, CUT_LN2B),
                             g->part, dz, k.h, s_cut_tensor(s, params, j, 0, CUT_LN2W), k.ln2m, k.ln2r, N, w);
    split_layernorm_apply(tm, g->re, x, k.ln1m, k.ln1r, s_cut_tensor(s, params, j, 0, CUT_LN1W),
                          s_cut_tensor(s, params, j, 0, CUT_LN1B), N, C);
    split_linear_backward(tm, g->dtmp, s_cut_tensor(s, grads, j, 0, CUT_DOWNW), s_cut_tensor(s, grads, j, 0, CUT_DOWNB),
                          dh, g->re, s_cut_tensor(s, params, j, 0, CUT_DOWNW), N, C, w, 0);
    memset(g->dres, 0, sizeof(float) * (size_t)N * C);
    split_layernorm_backward(tm, g->dres, s_cut_tensor(s, grads, j, 0, CUT_LN1W), s_cut_tensor(s, grads, j, 0, CUT_LN1B),
                             g->part, g->dtmp, x, s_cut_tensor(s, params, j, 0, CUT_LN1W), k.ln1m, k.ln1r, N, C);
}

/* After block u's backward (g->dres holds the gradient of its input): when
 * a cut precedes u, its receiving part's backward, into a->din at the
 * stage's start (returns 1), else on through its sending part, into g->dres
 * again (returns 0). */
static int s_cut_backward(const stage_t *s, const float *params, float *grads, acts_t *a, grad_scratch_t *g,
                          const acts_layout_t *L, int u, team_t *tm)
{
    int j = model_cut_after(&s->cfg, u - 1);
    if (j < 0) return 0;
    int N = a->B * a->T, C = s->cfg.C, w = model_cut_width(&s->cfg), edge = u == s->unit0;
    cut_acts_t k = s_cut_acts(s, a, L, j);
    float *dz = edge ? a->din : g->dfchg;   /* (N,w) */
    split_linear_backward(tm, dz, s_cut_tensor(s, grads, j, 1, CUT_UPW), s_cut_tensor(s, grads, j, 1, CUT_UPB), g->dres,
                          edge ? a->in : k.z, s_cut_tensor(s, params, j, 1, CUT_UPW), N, w, C, 0);
    if (!edge) s_cut_down_backward(s, params, grads, a, g, L, j, dz, s_unit_out(s, a, L, u - 1), tm);
    return edge;
}

static void s_gpt_backward(const stage_t *s, const float *params, float *grads, acts_t *a,
                           grad_scratch_t *g, float loss_scale, team_t *tm)
{
    const model_config_t *c = &s->cfg;
    int B = a->B, T = a->T, C = c->C, NH = c->NH, N = B * T;
    size_t NC = (size_t)N * C;
    acts_layout_t L = s_layout(s, B, T);
    int u0 = s->unit0 < 1 ? 1 : s->unit0, u1 = s->unit1 > c->L + 1 ? c->L + 1 : s->unit1;
    size_t bf = s_block_floats(c, B, T);
    /* the input of unit u (block activations are laid out in order; after a cut, its up projection's output) */
    const float *first_in = s->first ? a->buf + L.emb : a->in;
#define BLOCK_IN(u) (model_cut_after(c, (u) - 1) >= 0 ? s_cut_acts(s, a, &L, model_cut_after(c, (u) - 1)).xup \
                     : (u) == u0 ? first_in : s_block(c, a->buf + L.blocks + (size_t)((u) - 1 - u0) * bf, B, T).res3)
    int din_done = 0;   /* a->din written by a cut's up projection */
    if (s->last) {
        float *m = a->buf + L.head, *r = m + N;
        int u = c->L + 1;
        split_layernorm_apply(tm, g->re, BLOCK_IN(u1), m, r, s_tensor(s, params, u, 0), s_tensor(s, params, u, 1), N, C);
        s_head_backward(s, params, grads, a, g, loss_scale, tm);
        memset(g->dres, 0, sizeof(float) * NC);
        split_layernorm_backward(tm, g->dres, (float *)s_tensor(s, grads, u, 0), (float *)s_tensor(s, grads, u, 1),
                                 g->part, g->dtmp, BLOCK_IN(u1), s_tensor(s, params, u, 0), m, r, N, C);
    } else if (model_cut_after(c, s->unit1 - 1) >= 0) {
        int j = model_cut_after(c, s->unit1 - 1);
        s_cut_down_backward(s, params, grads, a, g, &L, j, a->dout, s_unit_out(s, a, &L, s->unit1 - 1), tm);
    } else {
        memcpy(g->dres, a->dout, sizeof(float) * NC);
    }
    for (int u = u1 - 1; u >= u0; u--) {
        block_acts_t b = s_block(c, a->buf + L.blocks + (size_t)(u - u0) * bf, B, T);
        const float *x = BLOCK_IN(u);
        const float *w[BLK_N];
        float *dw[BLK_N];
        for (int i = 0; i < BLK_N; i++) {
            w[i] = s_tensor(s, params, u, i);
            dw[i] = (float *)s_tensor(s, grads, u, i);
        }
        /* res3 = res2 + fchg @ Wfcp: dres carries d res3 and becomes d res2.
         * The temporaries dfchg, dtmp, dqkv are written, not cleared and added to.
         * The layernorm outputs are recomputed into g->re, and the weight
         * gradients that read them run first, while re is in cache. */
        /* dfchg = d fchg times gelu' (in fch): d fch, whose column sums go to the fc bias */
        split_linear_backward_times(tm, g->dfchg, dw[BLK_FCPW], dw[BLK_FCPB], g->dres, b.fchg, w[BLK_FCPW], b.fch,
                                    N, 4 * C, C);
        split_bias_backward(tm, dw[BLK_FCB], g->part, g->dfchg, N, 4 * C);
        split_layernorm_apply(tm, g->re, b.res2, b.ln2m, b.ln2r, w[BLK_LN2W], w[BLK_LN2B], N, C);
        split_linear_backward(tm, NULL, dw[BLK_FCW], NULL, g->dfchg, g->re, w[BLK_FCW], N, C, 4 * C, 0);
        split_linear_backward(tm, g->dtmp, NULL, NULL, g->dfchg, NULL, w[BLK_FCW], N, C, 4 * C, 0);
        split_layernorm_backward(tm, g->dres, dw[BLK_LN2W], dw[BLK_LN2B], g->part, g->dtmp, b.res2, w[BLK_LN2W],
                                 b.ln2m, b.ln2r, N, C);
        /* res2 = x + atty @ Wproj: dres becomes d x */
        split_linear_backward(tm, g->dtmp, dw[BLK_PROJW], dw[BLK_PROJB], g->dres, b.atty, w[BLK_PROJW], N, C, C, 0);
        split_attention_backward(tm, g->dqkv, g->attscratch, g->attstride, g->dtmp, b.qkv, b.att, B, T, C, NH, 0);
        split_layernorm_apply(tm, g->re, x, b.ln1m, b.ln1r, w[BLK_LN1W], w[BLK_LN1B], N, C);
        split_linear_backward(tm, NULL, dw[BLK_QKVW], dw[BLK_QKVB], g->dqkv, g->re, w[BLK_QKVW], N, C, 3 * C, 0);
        split_linear_backward(tm, g->dtmp, NULL, NULL, g->dqkv, NULL, w[BLK_QKVW], N, C, 3 * C, 0);
        split_layernorm_backward(tm, g->dres, dw[BLK_LN1W], dw[BLK_LN1B], g->part, g->dtmp, x, w[BLK_LN1W], b.ln1m,
                                 b.ln1r, N, C);
        din_done |= s_cut_backward(s, params, grads, a, g, &L, u, tm);
    }
#undef BLOCK_IN
    if (s->first)
        embedding_backward((float *)s_tensor(s, grads, 0, 0), (float *)s_tensor(s, grads, 0, 1),
                           g->dres, a->tokens, B, T, C);
    else if (!din_done)
        memcpy(a->din, g->dres, sizeof(float) * NC);
}

/* ---- mlp ---- */

static void s_mlp_forward(const stage_t *s, const float *params, acts_t *a, team_t *tm)
{
    const model_config_t *c = &s->cfg;
    int B = a->B;
    acts_layout_t L = s_layout(s, B, 1);
    const float *x = s->first ? a->x : a->in;
    int in = s->first ? c->D : c->C;
    float *h = a->buf + L.blocks;
    for (int u = s->unit0; u < s->unit1; u++) {
        int out = u == c->L ? c->V : c->C;
        split_linear_forward(tm, h, x, s_tensor(s, params, u, 0), s_tensor(s, params, u, 1), B, in, out);
        if (u < c->L)
            relu_forward(h, h, B * out);
        x = h;
        h += (size_t)B * out;
        in = out;
    }
    if (s->last) {
        float *probs = a->buf + L.head, *losses = probs + (size_t)B * c->V;
        a->loss = split_crossentropy_forward(tm, losses, probs, x, a->targets, B, c->V);
        int correct = 0;
        for (int b = 0; b < B; b++) {
            const float *p = probs + (size_t)b * c->V;
            int best = 0;
            for (int k = 1; k < c->V; k++)
                if (p[k] > p[best]) best = k;
            correct += best == a->targets[b];
        }
        a->correct = correct;
    }
}

static void s_mlp_backward(const stage_t *s, const float *params, float *grads, acts_t *a,
                           grad_scratch_t *g, float loss_scale, team_t *tm)
{
    const model_config_t *c = &s->cfg;
    int B = a->B;
    acts_layout_t L = s_layout(s, B, 1);
    float *dh = g->dres, *dprev = g->dtmp;  /* gradient of the current unit's output / input */
    int nunits = s->unit1 - s->unit0;
    if (s->last) {
        float *probs = a->buf + L.head;
        memset(dh, 0, sizeof(float) * B * c->V);
        crossentropy_backward(dh, probs, a->targets, loss_scale, B, c->V);
    } else {
        memcpy(dh, a->dout, sizeof(float) * B * c->C);
    }
    for (int k = nunits - 1; k >= 0; k--) {
        int u = s->unit0 + k;
        int out = u == c->L ? c->V : c->C, in = u == 0 ? c->D : c->C;
        float *h = a->buf + L.blocks + (size_t)k * B * c->C;  /* units before the output have width C */
        const float *x = k == 0 ? (s->first ? a->x : a->in) : h - (size_t)B * c->C;
        if (u < c->L) {
            /* relu in place: dpre = (h > 0) * dh, kept in dh */
            for (size_t i = 0; i < (size_t)B * out; i++)
                if (!(h[i] > 0.0f)) dh[i] = 0.0f;
        }
        /* the first layer's input needs no gradient */
        split_linear_backward(tm, u > 0 ? dprev : NULL, (float *)s_tensor(s, grads, u, 0),
                              (float *)s_tensor(s, grads, u, 1), dh, x, s_tensor(s, params, u, 0), B, in, out, 0);
        float *t = dh; dh = dprev; dprev = t;
    }
    if (!s->first)
        memcpy(a->din, dh, sizeof(float) * B * c->C);
}

/* The team of one engine call: s->threads, capped by what the scratch was
 * sized for; NULL (serial) for one thread. */
static team_t *s_team(const stage_t *s, int workers)
{
    int n = s->threads < workers ? s->threads : workers;
    return team_start(n);
}

void stage_forward(const stage_t *s, const float *params, acts_t *a)
{
    team_t *tm = s_team(s, a->workers);
    if (s->cfg.kind == MODEL_GPT) s_gpt_forward(s, params, a, tm, 1);
    else s_mlp_forward(s, params, a, tm);
    team_stop(&tm);
}

void stage_recompute(const stage_t *s, const float *params, acts_t *a)
{
    team_t *tm = s_team(s, a->workers);
    if (s->cfg.kind == MODEL_GPT) s_gpt_forward(s, params, a, tm, 0);
    else s_mlp_forward(s, params, a, tm);
    team_stop(&tm);
}

void stage_backward(const stage_t *s, const float *params, float *grads, acts_t *a,
                    grad_scratch_t *g, float loss_scale)
{
    team_t *tm = s_team(s, g->workers);
    if (s->cfg.kind == MODEL_GPT) s_gpt_backward(s, params, grads, a, g, loss_scale, tm);
    else s_mlp_backward(s, params, grads, a, g, loss_scale, tm);
    team_stop(&tm);
}
