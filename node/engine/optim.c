/* optim.c: AdamW, the learning-rate schedule and per-unit clipping (optim.h). */
#include "node/engine/optim.h"
#include <math.h>

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
