/* test_codecpick.c: `--codec auto`'s choice of a link's codec
 * (node/runtime/codecpick.h) from its measured throughput, the tensor's
 * int8 size and the two encoders' times. */
#include "tests/check.h"
#include "compress/codec.h"
#include "node/runtime/codecpick.h"

/* gpt-tiny's cut: 65,536 values, an int8 frame of about 68 KB; encodes of
 * 0.1 ms (int8) and 4.5 ms (pca), as bench_codec measures them. */
#define N8 (68.0 * 1024)
#define E8 1e-4
#define EP 4.5e-3

static double s_mbit(double m) { return m * 1e6 / 8; }

/* One link's decision, its uplink carrying this tensor only and the
 * pipeline's time per microbatch mb_s (0 unknown). */
static int s_pick(int current, double bps, double enc_pca_s, double mb_s)
{
    codecpick_in_t in = { .bytes_per_s = bps, .int8_bytes = N8, .enc_int8_s = E8, .enc_pca_s = enc_pca_s,
                          .uplink_int8_bytes = N8, .mb_s = mb_s };
    return codecpick_choose(current, &in);
}

/* A slow link (5 Mbit/s: an int8 tensor takes about 110 ms) takes pca; a
 * fast one (loopback, 1 Gbit/s: 0.6 ms) keeps int8, and so does a link
 * not measured yet. */
static void test_slow_takes_pca_fast_keeps_int8(void)
{
    CHECK(s_pick(CODEC_INT8, s_mbit(5), EP, 0) == CODEC_PCA);
    CHECK(s_pick(CODEC_INT8, s_mbit(20), EP, 0) == CODEC_PCA);
    CHECK(s_pick(CODEC_INT8, s_mbit(1000), EP, 0) == CODEC_INT8);
    CHECK(s_pick(CODEC_INT8, 0, EP, 0) == CODEC_INT8);
    CHECK(s_pick(CODEC_PCA, 0, EP, 0) == CODEC_PCA);
    CHECK(s_pick(CODEC_PCA, s_mbit(1000), EP, 0) == CODEC_INT8);
}

/* Between the two thresholds the link keeps what it has: a throughput that
 * wanders there never flaps the codec. */
static void test_hysteresis(void)
{
    double extra = EP - E8;
    double up = N8 / (CODECPICK_UP * extra + CODECPICK_MARGIN_S), down = N8 / (CODECPICK_DOWN * extra);
    CHECK(up < down);
    double mid = 0.5 * (up + down);
    CHECK(s_pick(CODEC_INT8, mid, EP, 0) == CODEC_INT8);
    CHECK(s_pick(CODEC_PCA, mid, EP, 0) == CODEC_PCA);
    CHECK(s_pick(CODEC_INT8, 0.99 * up, EP, 0) == CODEC_PCA);
    CHECK(s_pick(CODEC_PCA, 1.01 * down, EP, 0) == CODEC_INT8);
    int codec = CODEC_INT8, changes = 0;
    for (int i = 0; i < 100; i++) {   /* +-20% around the middle */
        int next = s_pick(codec, mid * (i % 2 ? 1.2 : 0.8), EP, 0);
        changes += next != codec;
        codec = next;
    }
    CHECKF(changes == 0, "%d changes", changes);
}

/* A faster pca encoder (a faster machine) moves the switch to faster links. */
static void test_encode_cost_moves_the_switch(void)
{
    double bps = s_mbit(150);   /* int8 tensor: 3.7 ms */
    CHECK(s_pick(CODEC_INT8, bps, EP, 0) == CODEC_INT8);
    CHECK(s_pick(CODEC_INT8, bps, EP / 4, 0) == CODEC_PCA);
}

/* A link that int8 would keep busy for less than CODECPICK_BUSY_UP of the
 * pipeline's time per microbatch is off the critical path: it keeps int8,
 * whose encode leaves the CPU to the compute, however slow the link is
 * against pca's encode (gpt-small on a loaded 2-core machine: 20 Mbit/s,
 * int8 tensors of 134 ms each way, microbatches of 530 ms).  Slower, or
 * with faster compute, it takes pca; a link on pca goes back to int8 only
 * below CODECPICK_BUSY_DOWN. */
static void test_off_the_path_keeps_int8(void)
{
    double bps = s_mbit(20), wire = N8 / bps;   /* 28 ms: pca by the encode rule alone */
    CHECK(s_pick(CODEC_INT8, bps, EP, 0) == CODEC_PCA);
    CHECK(s_pick(CODEC_INT8, bps, EP, wire / (0.9 * CODECPICK_BUSY_UP)) == CODEC_INT8);
    CHECK(s_pick(CODEC_INT8, bps, EP, wire / (1.1 * CODECPICK_BUSY_UP)) == CODEC_PCA);
    CHECK(s_pick(CODEC_PCA, bps, EP, wire / (1.1 * CODECPICK_BUSY_DOWN)) == CODEC_PCA);   /* hysteresis */
    CHECK(s_pick(CODEC_PCA, bps, EP, wire / (0.9 * CODECPICK_BUSY_DOWN)) == CODEC_INT8);
    /* the uplink's bytes count, not one tensor's: a middle stage sends activations and gradients */
    codecpick_in_t in = { .bytes_per_s = bps, .int8_bytes = N8, .enc_int8_s = E8, .enc_pca_s = EP,
                          .uplink_int8_bytes = 2 * N8, .mb_s = wire / (0.9 * CODECPICK_BUSY_UP) };
    CHECK(codecpick_choose(CODEC_INT8, &in) == CODEC_PCA);
    /* on the path but slower to encode than to send: int8 still */
    CHECK(s_pick(CODEC_INT8, s_mbit(1000), EP, 1e-4) == CODEC_INT8);
}

/* Drain samples: bytes over the probe's round trip above the link's
 * smallest; the link's rate is the median of the last few, so neither a
 * jittered sample nor one whose probe overtook its tensor (no drain: the
 * capped rate) moves it; none learnt without a smallest round trip. */
static void test_samples(void)
{
    codecpick_t p;
    codecpick_init(&p);
    CHECK(p.codec == CODEC_INT8);
    CHECK(codecpick_rate(&p) == 0);
    p.probe_bytes = 1e5;
    CHECK(codecpick_sample(&p, 0.2, 0) == 0);
    CHECK(codecpick_samples(&p) == 0);
    CHECK(codecpick_sample(&p, 0.11, 0.01) == 1);   /* 0.1 s: 1 MB/s */
    CHECK(codecpick_samples(&p) == 1);
    CHECK_NEAR(codecpick_rate(&p), 1e6, 1e-9);
    CHECK(codecpick_sample(&p, 0.11, 0.01) == 1);
    CHECK(codecpick_sample(&p, 0.21, 0.01) == 1);   /* a jittered one: 0.5 MB/s */
    CHECK_NEAR(codecpick_rate(&p), 1e6, 1e-9);
    for (int i = 0; i < CODECPICK_SAMPLES; i++) CHECK(codecpick_sample(&p, 0.06, 0.01) == 1);   /* 2 MB/s */
    CHECK_NEAR(codecpick_rate(&p), 2e6, 1e-9);
    CHECK(codecpick_samples(&p) == CODECPICK_SAMPLES);
    CHECK(codecpick_sample(&p, 0.01, 0.01) == 1);   /* no measurable drain: capped, not infinite ... */
    CHECK(codecpick_sample(&p, 0.26, 0.01) == 1);   /* ... and a jittered one: neither moves the rate */
    CHECK_NEAR(codecpick_rate(&p), 2e6, 1e-9);
    for (int i = 0; i < CODECPICK_SAMPLES; i++) CHECK(codecpick_sample(&p, 0.51, 0.01) == 1);   /* slower for good */
    CHECK_NEAR(codecpick_rate(&p), 2e5, 1e-9);
    for (int i = 0; i < CODECPICK_SAMPLES; i++) CHECK(codecpick_sample(&p, 0.01, 0.01) == 1);
    CHECK(isfinite(codecpick_rate(&p)) && codecpick_rate(&p) > 1e9);
}

static void test_names(void)
{
    CHECK(codecpick_id("auto") == CODEC_AUTO);
    CHECK(codecpick_id("pca") == CODEC_PCA);
    CHECK(codecpick_id("int8") == CODEC_INT8);
    CHECK(codecpick_id("nope") < 0);
}

int main(void)
{
    RUN(test_slow_takes_pca_fast_keeps_int8);
    RUN(test_hysteresis);
    RUN(test_encode_cost_moves_the_switch);
    RUN(test_off_the_path_keeps_int8);
    RUN(test_samples);
    RUN(test_names);
    CHECK_EXIT();
}
