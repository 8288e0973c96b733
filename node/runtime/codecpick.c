/* codecpick.c: see codecpick.h. */
#include "node/runtime/codecpick.h"
#include "compress/codec.h"
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

int codecpick_choose(int current, double bytes_per_s, double int8_bytes, double enc_int8_s, double enc_pca_s)
{
    if (!(bytes_per_s > 0)) return current;
    double wire = int8_bytes / bytes_per_s, extra = enc_pca_s - enc_int8_s;
    if (extra < 0) extra = 0;
    if (current == CODEC_PCA) return wire < CODECPICK_DOWN * extra ? CODEC_INT8 : CODEC_PCA;
    return wire > CODECPICK_UP * extra + CODECPICK_MARGIN_S ? CODEC_PCA : CODEC_INT8;
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
    double best = 0;
    for (int i = 0; i < CODECPICK_SAMPLES; i++)
        if (p->rate[i] > best) best = p->rate[i];
    return best;
}

int codecpick_samples(const codecpick_t *p)
{
    int n = 0;
    for (int i = 0; i < CODECPICK_SAMPLES; i++) n += p->rate[i] > 0;
    return n;
}
