/* optim.c: AdamW, the learning-rate schedule and per-unit clipping (optim.h).
 *
 * optim_step visits the parameter buffer unit by unit.  A unit (a gpt block
 * is 12 C^2 + 13 C floats, 3 MB of gradients at C = 256) is read twice: once
 * for its gradient norm, then once more, from cache, by the update, which
 * writes params, m and v and zeroes the gradients in the same loop.  The loops
 * run over fixed blocks of S_LANES elements so that gcc -O2 vectorizes them;
 * the arithmetic of an element is the reference's, operation for operation.
 * The norm is summed in double per chunk of S_CHUNK floats and the chunks in
 * order, so it does not depend on how chunks are shared among threads. */
#include "node/engine/optim.h"
#include <math.h>
#include <string.h>

#define S_LANES 8
#define S_CHUNK 16384   /* floats per norm partial */

void optim_defaults(optim_config_t *o)
{
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
        if (norm > worst) worst = norm;
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

/* ---------------------------------------------------------------------------
 * The fused step. */

/* Sum of squares of g[0, n), in double. */
static double s_sumsq(const float *restrict g, size_t n)
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
static void s_adamw_zero(float *restrict p, float *restrict g, float *restrict m, float *restrict v,
                         size_t n, const s_adamw_k *k)
{
    const float f = k->f, b1 = k->b1, b2 = k->b2, ob1 = k->ob1, ob2 = k->ob2;
    const float c1 = k->c1, c2 = k->c2, lr = k->lr, eps = k->eps, decay = k->decay;
    size_t i = 0;
    for (; i + S_LANES <= n; i += S_LANES)
        for (int j = 0; j < S_LANES; j++) {
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

/* Gradient norm of the unit whose tensors are [k0, k1): chunk partials in order. */
static float s_unit_norm(const stage_t *s, const float *grads, int k0, int k1)
{
    size_t u0 = s->tensors[k0].offset, u1 = s->tensors[k1 - 1].offset + s->tensors[k1 - 1].size;
    double ss = 0.0;
    for (size_t c = u0; c < u1; c += S_CHUNK)
        ss += s_sumsq(grads + c, u1 - c < S_CHUNK ? u1 - c : S_CHUNK);
    return (float)sqrt(ss);
}

float optim_step(const stage_t *s, const optim_config_t *o, const optim_adjust_t *adj, int t,
                 float *params, float *grads, float *m, float *v)
{
    float scale = adj && adj->lr_scale != 0.0f ? adj->lr_scale : 1.0f;
    s_adamw_k k = {
        .b1 = o->beta1, .b2 = o->beta2, .ob1 = 1.0f - o->beta1, .ob2 = 1.0f - o->beta2,
        .c1 = 1.0f / (1.0f - powf(o->beta1, (float)(t + 1))),
        .c2 = 1.0f / (1.0f - powf(o->beta2, (float)(t + 1))),
        .lr = optim_lr(o, t) * scale, .eps = o->eps,
    };
    float worst = 0.0f;
    int k0 = 0;
    while (k0 < s->ntensors) {
        int u = s->tensors[k0].unit, k1 = k0;
        while (k1 < s->ntensors && s->tensors[k1].unit == u) k1++;
        size_t off = s->tensors[k0].offset;
        size_t n = s->tensors[k1 - 1].offset + s->tensors[k1 - 1].size - off;
        if (adj && adj->grad_fn)
            adj->grad_fn(adj->ctx, s, u, grads + off, off, n);
        float norm = s_unit_norm(s, grads, k0, k1);
        if (norm > worst) worst = norm;
        k.f = o->clip > 0.0f && norm > o->clip ? o->clip / norm : 1.0f;
        for (int j = k0; j < k1; j++) {
            const param_tensor_t *pt = &s->tensors[j];
            k.decay = pt->decay ? 1.0f - k.lr * o->wd : 1.0f;
            s_adamw_zero(params + pt->offset, grads + pt->offset, m + pt->offset, v + pt->offset,
                         pt->size, &k);
        }
        k0 = k1;
    }
    return worst;
}
