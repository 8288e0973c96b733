/* staleness.c: delay compensation (staleness.h). */
#include "node/engine/staleness.h"
#include <math.h>
#include <stdio.h>
#include <string.h>

static const struct { const char *name; int flag; } s_flags[] = {
    { "predict", STALE_PREDICT }, { "ramp", STALE_RAMP }, { "lr", STALE_LR }, { "dc", STALE_DC },
};
#define NFLAGS (int)(sizeof s_flags / sizeof s_flags[0])

int stale_parse(const char *text, int *flags)
{
    if (strcmp(text, "none") == 0) { *flags = 0; return 0; }
    int f = 0;
    const char *p = text;
    for (;;) {
        size_t n = strcspn(p, "+");
        int hit = 0;
        for (int i = 0; i < NFLAGS; i++)
            if (strlen(s_flags[i].name) == n && strncmp(p, s_flags[i].name, n) == 0) hit = s_flags[i].flag;
        if (!hit || (f & hit)) return -1;
        f |= hit;
        if (!p[n]) break;
        p += n + 1;
    }
    *flags = f;
    return 0;
}

void stale_name(int flags, char *buf, size_t len)
{
    size_t k = 0;
    buf[0] = '\0';
    for (int i = 0; i < NFLAGS; i++)
        if (flags & s_flags[i].flag) {
            snprintf(buf + k, len - k, "%s%s", k ? "+" : "", s_flags[i].name);
            k += strlen(buf + k);
        }
    if (!k) snprintf(buf, len, "none");
}

int stale_ramp_updates(const optim_config_t *o)
{
    return o->warmup > 0 ? 3 * o->warmup : 1;
}

int stale_budget_micro(const optim_config_t *o, int flags, int t, int delay, int micro)
{
    int full = delay > 0 && micro > 0 ? delay * micro : 0;
    if (!(flags & STALE_RAMP) || full == 0) return full;
    if (t < stale_ramp_updates(o)) return 0;
    float span = o->lr * (1.0f - o->lr_min_frac);
    float f = span > 0 && t < o->total ? (o->lr - optim_lr(o, t)) / span : 1.0f;
    /* whole updates: on a link whose round trip is long against a microbatch's compute, late microbatches
     * short of a whole update each hide one serialization, not the round trip, yet cost loss like any other */
    int b = (int)lroundf(f * (float)delay) * micro, floor = micro / 4 > 1 ? micro / 4 : 1;
    return b < floor ? floor : b > full ? full : b;
}

float stale_lr_scale(const optim_config_t *o, int flags, int t, int delay)
{
    if (!(flags & STALE_LR) || delay <= 0) return 1.0f;
    float p = o->total > 0 ? (float)t / (float)o->total : 1.0f;
    if (p > 1.0f) p = 1.0f;
    return powf(1.0f + (float)delay, p - 1.0f);
}

void stale_forward_weights(float *out, const stage_t *s, const optim_config_t *o, int flags, const float *params,
                           const float *m, const float *v, int version, int delay)
{
    if (!(flags & STALE_PREDICT) || delay <= 0 || version <= 0) {
        memcpy(out, params, sizeof(float) * s->nparams);
        return;
    }
    /* the moments after `version` updates carry the bias correction of update version - 1 */
    float c1 = 1.0f / (1.0f - powf(o->beta1, (float)version));
    float c2 = 1.0f / (1.0f - powf(o->beta2, (float)version));
    float lr_sum = 0.0f, keep = 1.0f;   /* the coming rates, summed; their decays, multiplied */
    for (int i = 0; i < delay; i++) {
        float lr = optim_lr(o, version + i) * stale_lr_scale(o, flags, version + i, delay);
        lr_sum += lr;
        keep *= 1.0f - lr * o->wd;
    }
    for (int k = 0; k < s->ntensors; k++) {
        const param_tensor_t *pt = &s->tensors[k];
        float decay = pt->decay ? keep : 1.0f;
        const float *restrict p = params + pt->offset, *restrict mm = m + pt->offset, *restrict vv = v + pt->offset;
        float *restrict w = out + pt->offset;
        if (optim_is_muon(o, pt)) {   /* v holds Muon's last step per unit rate */
            for (size_t i = 0; i < pt->size; i++) w[i] = p[i] * decay - lr_sum * vv[i];
            continue;
        }
        for (size_t i = 0; i < pt->size; i++)
            w[i] = p[i] * decay - lr_sum * (mm[i] * c1) / (sqrtf(vv[i] * c2) + o->eps);
    }
}

void stale_dc_grad(void *ctx, const stage_t *s, int unit, float *grads, size_t offset, size_t n)
{
    const stale_dc_t *dc = ctx;
    const float *wl = dc->w_live + offset, *wu = dc->w_used + offset, *v = dc->v + offset;
    (void)s;
    (void)unit;
    for (size_t i = 0; i < n; i++) {
        float g = grads[i];
        grads[i] = g + STALE_DC_LAMBDA * g * g / (sqrtf(v[i] * dc->c2) + dc->eps) * (wl[i] - wu[i]);
    }
}

void stale_adjust(optim_adjust_t *adj, stale_dc_t *dc, const optim_config_t *o, int flags, int t, int delay,
                  const float *w_live, const float *w_used, const float *v)
{
    memset(adj, 0, sizeof *adj);
    adj->lr_scale = stale_lr_scale(o, flags, t, delay);
    if (!(flags & STALE_DC) || delay <= 0 || t <= 0 || w_used == w_live) return;
    *dc = (stale_dc_t){ .w_live = w_live, .w_used = w_used, .v = v,
                        .c2 = 1.0f / (1.0f - powf(o->beta2, (float)t)), .eps = o->eps };
    adj->grad_fn = stale_dc_grad;
    adj->ctx = dc;
}
