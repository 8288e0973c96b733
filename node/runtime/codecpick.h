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
 * (codecpick_sample).  Jitter only lengthens it, so the link's estimate is
 * the best of its last CODECPICK_SAMPLES samples (codecpick_rate). */
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

/* The decision, a pure function: the codec a link on `current` takes next,
 * given its measured throughput (bytes/s, <= 0 unknown: current kept), the
 * bytes of the tensor in int8, and the encode times of that tensor in int8
 * and pca (seconds).  int8 -> pca when the int8 tensor's wire time exceeds
 * CODECPICK_UP x pca's extra encode time + CODECPICK_MARGIN_S; pca -> int8
 * when it is below CODECPICK_DOWN x that time; otherwise current
 * (hysteresis).  current must be CODEC_INT8 or CODEC_PCA. */
int codecpick_choose(int current, double bytes_per_s, double int8_bytes, double enc_int8_s, double enc_pca_s);

/* A drain probe came back: rtt_s its round trip, min_rtt_s the link's
 * smallest (0: unknown, nothing learnt).  Adds the sample bytes / (rtt -
 * min), at most bytes / 10 us.  Returns 1 when a sample was added. */
int codecpick_sample(codecpick_t *p, double rtt_s, double min_rtt_s);

/* The drain samples the link holds (at most CODECPICK_SAMPLES). */
int codecpick_samples(const codecpick_t *p);

/* The link's throughput: the best of its samples (bytes/s, 0 none). */
double codecpick_rate(const codecpick_t *p);

#endif
