/* codecpick.c: see codecpick.h. */
#include "node/runtime/codecpick.h"
#include "compress/codec.h"
#include <math.h>
#include <string.h>

int codecpick_id(const char *name)
{
    return strcmp(name, "auto") == 0 ? CODEC_AUTO : codec_from_name(name);
}

void codecpick_init(codecpick_t *p)
{
    memset(p, 0, sizeof *p);
    p->codec = CODEC_INT8;
}

int codecpick_choose(int current, const codecpick_in_t *in)
{
    if (!(in->bytes_per_s > 0)) return current;
    double wire = in->int8_bytes / in->bytes_per_s, extra = in->enc_pca_s - in->enc_int8_s;
    if (extra < 0) extra = 0;
    /* the share of a microbatch's time the uplink would spend on int8 (unknown: as if on the path) */
    double busy = in->mb_s > 0 ? in->uplink_int8_bytes / in->bytes_per_s / in->mb_s : INFINITY;
    if (current == CODEC_PCA)
        return wire < CODECPICK_DOWN * extra || busy < CODECPICK_BUSY_DOWN ? CODEC_INT8 : CODEC_PCA;
    return wire > CODECPICK_UP * extra + CODECPICK_MARGIN_S && busy > CODECPICK_BUSY_UP ? CODEC_PCA : CODEC_INT8;
}

int codecpick_sample(codecpick_t *p, double rtt_s, double min_rtt_s)
{
    if (!(min_rtt_s > 0) || !(rtt_s > 0) || !(p->probe_bytes > 0)) return 0;
    double drain = rtt_s - min_rtt_s;
    if (drain < 1e-5) drain = 1e-5;
    p->rate[p->at] = p->probe_bytes / drain;
    p->at = (p->at + 1) % CODECPICK_SAMPLES;
    return 1;
}

double codecpick_rate(const codecpick_t *p)
{
    double v[CODECPICK_SAMPLES];
    int n = 0;
    for (int i = 0; i < CODECPICK_SAMPLES; i++)
        if (p->rate[i] > 0) v[n++] = p->rate[i];
    for (int i = 1; i < n; i++)   /* insertion sort: a handful of values */
        for (int j = i; j > 0 && v[j - 1] > v[j]; j--) { double t = v[j]; v[j] = v[j - 1]; v[j - 1] = t; }
    return n ? v[(n - 1) / 2] : 0;
}

int codecpick_samples(const codecpick_t *p)
{
    int n = 0;
    for (int i = 0; i < CODECPICK_SAMPLES; i++) n += p->rate[i] > 0;
    return n;
}
