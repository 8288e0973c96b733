/* optim.c: AdamW, the learning-rate schedule and per-unit clipping (optim.h).
 *
 * optim_step visits the parameter buffer unit by unit.  A unit (a gpt block
 * is 12 C^2 + 13 C floats, 3 MB of gradients at C = 256) is read twice: once
 * for its gradient norm, then once more, from cache, by the update, which
 * writes params, m and v and zeroes the gradients in the same loop.  The loops
 * run over fixed blocks of S_LANES elements (the update, which sums nothing,
 * of S_WIDE) so that gcc -O2 vectorizes them;
 * the arithmetic of an element is the reference's, operation for operation.
 * A unit is cut into tasks (S_TASK floats, more for huge units) that the
 * threads of a team share (team.h); the norm is summed in double per chunk
 * of S_CHUNK floats, chunks in order within a task and tasks in order, so it
 * does not depend on the thread count.  Both loops also have AVX2 and
 * AVX-512 copies with the same bits (vecmath.h, S_COPIES).
 *
 * With Muon the update loop skips the unit's block matrices, which then get
 * one task each: momentum, orthogonalization (muon.h) and the step, with the
 * gradient buffer as the iteration's matrix (it is zeroed at the end anyway)
 * and a scratch of their own. */
#include "node/engine/optim.h"
#include "node/engine/muon.h"
#include "node/engine/team.h"
#include "node/engine/vecmath.h"
#include <assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define S_CHUNK 16384        /* floats per norm partial */
#define S_TASK (4 * S_CHUNK) /* floats per task (more for units past S_MAX_TASKS tasks) */
#define S_MAX_TASKS 4096

void optim_defaults(optim_config_t *o)
{
    o->kind = OPTIM_ADAMW;
    o->momentum = 0.95f;
    o->lr = 1e-3f;
    o->wd = 0.01f;
    o->beta1 = 0.9f;
    o->beta2 = 0.95f;
    o->eps = 1e-8f;
    o->warmup = 10;
    o->total = 1000;
    o->lr_min_frac = 0.1f;
    o->clip = 1.0f;
}

int optim_parse_kind(const char *text, int *kind)
{
    if (strcmp(text, "adamw") == 0) *kind = OPTIM_ADAMW;
    else if (strcmp(text, "muon") == 0) *kind = OPTIM_MUON;
    else return -1;
    return 0;
}

const char *optim_kind_name(int kind)
{
    return kind == OPTIM_MUON ? "muon" : "adamw";
}

int optim_is_muon(const optim_config_t *o, const param_tensor_t *pt)
{
    return o->kind == OPTIM_MUON && pt->rows > 0;
}

/* Muon's step scale for a rows x cols matrix: an AdamW step's RMS size. */
static float s_muon_scale(int rows, int cols)
{
    return 0.2f * sqrtf((float)(rows > cols ? rows : cols));
}

/* Muon's momentum for one matrix: m <- mu m + f g, then g <- f g + mu m
 * (the Nesterov step, which the orthogonalization then works on in place). */
static void s_muon_momentum(float *restrict g, float *restrict m, size_t n, float f, float mu)
{
    for (size_t i = 0; i < n; i++) {
        float gi = g[i] * f;
        m[i] = mu * m[i] + gi;
        g[i] = gi + mu * m[i];
    }
}

/* Muon's step from the orthogonalized o: p <- p decay - lr scale o, v <- scale o. */
static void s_muon_apply(float *restrict p, float *restrict v, const float *restrict o, size_t n,
                         float lr, float scale, float decay)
{
    for (size_t i = 0; i < n; i++) {
        p[i] = p[i] * decay - lr * scale * o[i];
        v[i] = scale * o[i];
    }
}

float optim_lr(const optim_config_t *o, int t)
{
    if (t < o->warmup)
        return o->lr * (float)(t + 1) / (float)o->warmup;
    int span = o->total - o->warmup;
    if (span <= 0)
        return o->lr;
    float p = (float)(t - o->warmup) / (float)span;
    if (p > 1.0f) p = 1.0f;
    float cosine = 0.5f * (1.0f + cosf(3.14159265f * p));
    return o->lr * (o->lr_min_frac + (1.0f - o->lr_min_frac) * cosine);
}

/* ---------------------------------------------------------------------------
 * Reference. */

/* The larger of two unit norms, NaN when either is: a NaN never compares
 * larger, and a diverged update must show in the returned norm. */
static float s_worse(float worst, float norm)
{
    return isnan(worst) || norm <= worst ? worst : norm;
}

float optim_clip(const stage_t *s, float *grads, float clip)
{
    float worst = 0.0f;
    int k = 0;
    while (k < s->ntensors) {
        int u = s->tensors[k].unit, k1 = k;
        double ss = 0.0;
        for (; k1 < s->ntensors && s->tensors[k1].unit == u; k1++) {
            const float *g = grads + s->tensors[k1].offset;
            for (size_t i = 0; i < s->tensors[k1].size; i++)
                ss += (double)g[i] * g[i];
        }
        float norm = (float)sqrt(ss);
        worst = s_worse(worst, norm);
        if (clip > 0.0f && norm > clip) {
            float f = clip / norm;
            for (int j = k; j < k1; j++) {
                float *g = grads + s->tensors[j].offset;
                for (size_t i = 0; i < s->tensors[j].size; i++)
                    g[i] *= f;
            }
        }
        k = k1;
    }
    return worst;
}

void optim_adamw(const stage_t *s, const optim_config_t *o, float *params, const float *grads,
                 float *m, float *v, int t)
{
    float lr = optim_lr(o, t);
    float b1 = o->beta1, b2 = o->beta2;
    float c1 = 1.0f / (1.0f - powf(b1, (float)(t + 1)));
    float c2 = 1.0f / (1.0f - powf(b2, (float)(t + 1)));
    for (int k = 0; k < s->ntensors; k++) {
        const param_tensor_t *pt = &s->tensors[k];
        if (optim_is_muon(o, pt)) continue;
        float decay = pt->decay ? 1.0f - lr * o->wd : 1.0f;
        float *restrict p = params + pt->offset, *restrict mm = m + pt->offset, *restrict vv = v + pt->offset;
        const float *restrict g = grads + pt->offset;
        for (size_t i = 0; i < pt->size; i++) {
            mm[i] = b1 * mm[i] + (1.0f - b1) * g[i];
            vv[i] = b2 * vv[i] + (1.0f - b2) * g[i] * g[i];
            float mhat = mm[i] * c1, vhat = vv[i] * c2;
            p[i] = p[i] * decay - lr * mhat / (sqrtf(vhat) + o->eps);
        }
    }
}

int optim_muon(const stage_t *s, const optim_config_t *o, float *params, const float *grads,
               float *m, float *v, int t)
{
    float lr = optim_lr(o, t);
    for (int k = 0; k < s->ntensors; k++) {
        const param_tensor_t *pt = &s->tensors[k];
        if (!optim_is_muon(o, pt)) continue;
        int rows = pt->rows, cols = (int)(pt->size / (size_t)rows);
        float *u = malloc(sizeof(float) * pt->size);
        if (!u) return -1;
        memcpy(u, grads + pt->offset, sizeof(float) * pt->size);
        s_muon_momentum(u, m + pt->offset, pt->size, 1.0f, o->momentum);
        if (muon_orthogonalize_ref(u, rows, cols) < 0) { free(u); return -1; }
        s_muon_apply(params + pt->offset, v + pt->offset, u, pt->size, lr, s_muon_scale(rows, cols),
                     1.0f - lr * o->wd);
        free(u);
    }
    return 0;
}

/* ---------------------------------------------------------------------------
 * The fused step. */

/* Sum of squares of g[0, n), in double. */
S_BODY double s_sumsq(const float *restrict g, size_t n)
{
    double acc[S_LANES] = {0};
    size_t i = 0;
    for (; i + S_LANES <= n; i += S_LANES)
        for (int j = 0; j < S_LANES; j++) acc[j] += (double)g[i + j] * (double)g[i + j];
    double ss = 0.0;
    for (; i < n; i++) ss += (double)g[i] * (double)g[i];
    for (int j = 0; j < S_LANES; j++) ss += acc[j];
    return ss;
}

/* The constants of one tensor's update. */
typedef struct {
    float f;            /* clip factor applied to the gradient (1 = none) */
    float b1, b2, ob1, ob2;   /* betas and 1 - betas */
    float c1, c2;       /* bias corrections */
    float lr, eps, decay;
} s_adamw_k;

/* AdamW on n elements with the gradient scaled by k->f; grads set to 0. */
S_BODY void s_adamw_zero(float *restrict p, float *restrict g, float *restrict m, float *restrict v,
                         size_t n, const s_adamw_k *k)
{
    const float f = k->f, b1 = k->b1, b2 = k->b2, ob1 = k->ob1, ob2 = k->ob2;
    const float c1 = k->c1, c2 = k->c2, lr = k->lr, eps = k->eps, decay = k->decay;
    size_t i = 0;
    for (; i + S_WIDE <= n; i += S_WIDE)
        for (int j = 0; j < S_WIDE; j++) {
            float gi = g[i + j] * f;
            float mi = b1 * m[i + j] + ob1 * gi;
            float vi = b2 * v[i + j] + ob2 * gi * gi;
            m[i + j] = mi;
            v[i + j] = vi;
            p[i + j] = p[i + j] * decay - lr * (mi * c1) / (sqrtf(vi * c2) + eps);
            g[i + j] = 0.0f;
        }
    for (; i < n; i++) {
        float gi = g[i] * f;
        float mi = b1 * m[i] + ob1 * gi;
        float vi = b2 * v[i] + ob2 * gi * gi;
        m[i] = mi;
        v[i] = vi;
        p[i] = p[i] * decay - lr * (mi * c1) / (sqrtf(vi * c2) + eps);
        g[i] = 0.0f;
    }
}

/* One unit's share of the step: its tensors [k0, k1) cover floats [off,
 * off + n) of the buffers, cut into tasks of `task` floats (a size that
 * depends on n only, so the norm's order of sums does not depend on the
 * thread count). */
typedef struct {
    const stage_t *s;
    float *params, *grads, *m, *v;
    int k0, k1;
    size_t off, n, task;
    double partial[S_MAX_TASKS];   /* sum of squares per task */
    s_adamw_k k;
    const optim_config_t *o;        /* wd; with Muon, the block matrices skip the AdamW tasks */
    int nmuon, muon_k[8];           /* the unit's Muon matrices (tensor indices; a block has 4) */
} s_unit_t;

static void s_range(const s_unit_t *u, int i, size_t *a, size_t *b)
{
    *a = u->off + (size_t)i * u->task;
    *b = *a + u->task < u->off + u->n ? *a + u->task : u->off + u->n;
}

/* Task i of the norm: its chunks of S_CHUNK summed in order. */
S_BODY void s_norm_body(s_unit_t *u, int i)
{
    size_t a, b;
    s_range(u, i, &a, &b);
    double ss = 0.0;
    for (size_t c = a; c < b; c += S_CHUNK)
        ss += s_sumsq(u->grads + c, b - c < S_CHUNK ? b - c : S_CHUNK);
    u->partial[i] = ss;
}

/* Task i of the update: AdamW on its range, tensor by tensor (each has its decay). */
S_BODY void s_update_body(const s_unit_t *u, int i)
{
    size_t a, b;
    s_range(u, i, &a, &b);
    s_adamw_k k = u->k;
    for (int j = u->k0; j < u->k1; j++) {
        const param_tensor_t *pt = &u->s->tensors[j];
        size_t lo = pt->offset > a ? pt->offset : a, hi = pt->offset + pt->size < b ? pt->offset + pt->size : b;
        if (lo >= hi || optim_is_muon(u->o, pt)) continue;
        k.decay = pt->decay ? 1.0f - k.lr * u->o->wd : 1.0f;
        s_adamw_zero(u->params + lo, u->grads + lo, u->m + lo, u->v + lo, hi - lo, &k);
    }
}

S_COPIES(s_norm_body, (s_unit_t *u, int i), (u, i))
S_COPIES(s_update_body, (const s_unit_t *u, int i), (u, i))

static void s_norm_task(void *arg, int i, int worker)
{
    (void)worker;
    S_CALL_BEST(s_norm_body, (arg, i));
}

static void s_update_task(void *arg, int i, int worker)
{
    (void)worker;
    S_CALL_BEST(s_update_body, (arg, i));
}

/* Task i of Muon: the unit's i-th block matrix, whole, with its own scratch. */
static void s_muon_task(void *arg, int i, int worker)
{
    const s_unit_t *u = arg;
    const param_tensor_t *pt = &u->s->tensors[u->muon_k[i]];
    int rows = pt->rows, cols = (int)(pt->size / (size_t)rows);
    float *p = u->params + pt->offset, *g = u->grads + pt->offset;
    float *scratch = malloc(sizeof(float) * muon_scratch_floats(rows, cols));
    (void)worker;
    if (!scratch) {
        fprintf(stderr, "brigade: out of memory for the optimizer's scratch (%d x %d)\n", rows, cols);
        abort();
    }
    s_muon_momentum(g, u->m + pt->offset, pt->size, u->k.f, u->o->momentum);
    muon_orthogonalize(g, scratch, rows, cols);
    s_muon_apply(p, u->v + pt->offset, g, pt->size, u->k.lr, s_muon_scale(rows, cols), 1.0f - u->k.lr * u->o->wd);
    memset(g, 0, sizeof(float) * pt->size);
    free(scratch);
}

/* Unit [k0, k1)'s share of the step: the norm, the clip factor, the AdamW
 * tasks, then the Muon ones.  Returns the unit's norm before clipping. */
static float s_unit_step(team_t *team, s_unit_t *u, const optim_adjust_t *adj, int k0, int k1)
{
    const stage_t *s = u->s;
    const optim_config_t *o = u->o;
    u->k0 = k0;
    u->k1 = k1;
    u->off = s->tensors[k0].offset;
    u->n = s->tensors[k1 - 1].offset + s->tensors[k1 - 1].size - u->off;
    size_t min_task = (u->n + S_MAX_TASKS - 1) / S_MAX_TASKS;
    u->task = min_task > S_TASK ? (min_task + S_CHUNK - 1) / S_CHUNK * S_CHUNK : S_TASK;
    int ntasks = (int)((u->n + u->task - 1) / u->task);
    if (adj && adj->grad_fn)
        adj->grad_fn(adj->ctx, s, s->tensors[k0].unit, u->grads + u->off, u->off, u->n);
    team_run(team, ntasks, s_norm_task, u);
    double ss = 0.0;
    for (int i = 0; i < ntasks; i++) ss += u->partial[i];
    float norm = (float)sqrt(ss);
    u->k.f = o->clip > 0.0f && norm > o->clip ? o->clip / norm : 1.0f;
    team_run(team, ntasks, s_update_task, u);
    u->nmuon = 0;
    for (int j = k0; j < k1; j++)
        if (optim_is_muon(o, &s->tensors[j])) {
            assert(u->nmuon < (int)(sizeof u->muon_k / sizeof u->muon_k[0]));   /* a block has 4 */
            u->muon_k[u->nmuon++] = j;
        }
    team_run(team, u->nmuon, s_muon_task, u);
    return norm;
}

float optim_step(const stage_t *s, const optim_config_t *o, const optim_adjust_t *adj, int t,
                 float *params, float *grads, float *m, float *v)
{
    float scale = adj && adj->lr_scale != 0.0f ? adj->lr_scale : 1.0f;
    s_unit_t unit_state, *u = &unit_state;   /* 33 kB on the stack */
    *u = (s_unit_t){.s = s, .params = params, .grads = grads, .m = m, .v = v, .o = o};
    u->k = (s_adamw_k){
        .b1 = o->beta1, .b2 = o->beta2, .ob1 = 1.0f - o->beta1, .ob2 = 1.0f - o->beta2,
        .c1 = 1.0f / (1.0f - powf(o->beta1, (float)(t + 1))),
        .c2 = 1.0f / (1.0f - powf(o->beta2, (float)(t + 1))),
        .lr = optim_lr(o, t) * scale, .eps = o->eps,
    };
    team_t *team = team_start(s->threads);
    float worst = 0.0f;
    int k0 = 0;
    while (k0 < s->ntensors) {
        int unit = s->tensors[k0].unit, k1 = k0;
        while (k1 < s->ntensors && s->tensors[k1].unit == unit) k1++;
        float norm = s_unit_step(team, u, adj, k0, k1);
        worst = s_worse(worst, norm);
        k0 = k1;
    }
    team_stop(&team);
    return worst;
}

int optim_state_ok(const float *params, const float *m, const float *v, size_t n)
{
    int ok = 1;
    for (size_t i = 0; i < n; i++) ok &= isfinite(params[i]) && isfinite(m[i]) && isfinite(v[i]) && v[i] >= 0;
    return ok;
}
