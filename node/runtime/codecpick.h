/* codecpick.h: `--codec auto`: the codec of one link (peer) and direction,
 * chosen from what the node measures of that link.
 *
 * int8 is cheap to encode (about 0.1 ms per 256 KB tensor) and 4x smaller
 * than fp32; pca sends about 5x fewer bytes again but its encoder takes
 * milliseconds.  A link keeps int8 while it puts an int8 tensor on the
 * wire faster than pca's extra encode time, and takes pca when the link is
 * the bottleneck.  The link's throughput is measured by drain probes: a
 * PING sent right behind a tensor on an idle link comes back after the
 * tensor's bytes have left (the PONG answers it in order), so the probe's
 * round trip over the link's smallest one is the tensor's time on the wire
 * (codecpick_sample).  Jitter lengthens it, and a probe that overtakes its
 * tensor (timed against a smallest round trip that a busy peer inflated)
 * makes a sample of no drain at all, so the link's estimate is the median
 * of its last CODECPICK_SAMPLES samples (codecpick_rate): one stray sample
 * either way never flips a link.
 *
 * pca also costs CPU that the stages' compute needs, so a link takes it only
 * when int8 would put the link on the critical path: when the int8 bytes
 * this node's uplink carries per microbatch (activations and gradients
 * together) would keep it busy for more than CODECPICK_BUSY_UP of the
 * pipeline's time per microbatch (its slowest stage's compute), and goes
 * back to int8 below CODECPICK_BUSY_DOWN of it. */
#ifndef BRIGADE_RUNTIME_CODECPICK_H
#define BRIGADE_RUNTIME_CODECPICK_H
#include <stddef.h>

#define CODEC_AUTO 100              /* the codec id that stands for `auto` (never on the wire) */
#define CODECPICK_SAMPLES 8         /* drain samples a link's throughput is the best of */
#define CODECPICK_UP 2.0            /* pca when int8's wire time exceeds this x pca's extra encode time ... */
#define CODECPICK_MARGIN_S 0.001    /* ... plus this */
#define CODECPICK_DOWN 1.0          /* back to int8 when it falls below this x that extra time */
#define CODECPICK_PCA_S_PER_VALUE 7e-8    /* pca's encode time before one is measured (bench_codec: 4-5 ms / 64 Ki values) */
#define CODECPICK_INT8_S_PER_VALUE 1.5e-9 /* int8's */
#define CODECPICK_PCA_OVER_INT8 40.0      /* pca's encode time over int8's, at least, before pca's is measured */
#define CODECPICK_FIRST 3           /* drain samples a link takes before its first decision */
#define CODECPICK_BUSY_UP 0.6       /* pca when int8 would keep the uplink busy this share of a microbatch's time ... */
#define CODECPICK_BUSY_DOWN 0.3     /* ... back to int8 below this share */

/* The codec of one link and direction under `auto`, with its measurements. */
typedef struct {
    int codec;                      /* the codec now (CODEC_INT8 until measured) */
    double rate[CODECPICK_SAMPLES]; /* drain samples, bytes/s (0: none) */
    int at;                         /* the next sample's slot */
    double probe_t;                 /* clock time of the outstanding drain probe (0: none) */
    double probe_bytes;             /* the bytes of the tensor it follows */
} codecpick_t;

/* "auto" -> CODEC_AUTO, else codec_from_name(name) (-1 unknown). */
int codecpick_id(const char *name);

/* A link starting on int8, nothing measured. */
void codecpick_init(codecpick_t *p);

/* What the decision weighs for one link and direction. */
typedef struct {
    double bytes_per_s;     /* the link's measured throughput (<= 0 unknown: the codec is kept) */
    double int8_bytes;      /* the tensor's bytes in int8 */
    double enc_int8_s;      /* its encode time in int8 (seconds) */
    double enc_pca_s;       /* and in pca */
    double uplink_int8_bytes; /* the int8 bytes this node's uplink carries per microbatch (every direction) */
    double mb_s;            /* the pipeline's time per microbatch: its slowest stage's compute (<= 0 unknown) */
} codecpick_in_t;

/* The decision, a pure function: the codec a link on `current` takes next.
 * int8 -> pca when the int8 tensor's wire time exceeds CODECPICK_UP x
 * pca's extra encode time + CODECPICK_MARGIN_S and (mb_s known) the uplink's
 * int8 bytes per microbatch take more than CODECPICK_BUSY_UP x mb_s on the
 * link; pca -> int8 when the wire time is below CODECPICK_DOWN x that extra
 * time or the uplink's share is below CODECPICK_BUSY_DOWN; otherwise
 * current (hysteresis).  current must be CODEC_INT8 or CODEC_PCA. */
int codecpick_choose(int current, const codecpick_in_t *in);

/* A drain probe came back: rtt_s its round trip, min_rtt_s the link's
 * smallest (0: unknown, nothing learnt).  Adds the sample bytes / (rtt -
 * min), at most bytes / 10 us.  Returns 1 when a sample was added. */
int codecpick_sample(codecpick_t *p, double rtt_s, double min_rtt_s);

/* The drain samples the link holds (at most CODECPICK_SAMPLES). */
int codecpick_samples(const codecpick_t *p);

/* The link's throughput: the median of its samples (the lower middle one of
 * an even count; bytes/s, 0 none). */
double codecpick_rate(const codecpick_t *p);

#endif
