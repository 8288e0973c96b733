/* bucket.h: a token bucket, the network side's rate limits (JOINs, status
 * requests, relayed bytes, peers a member's gossip introduces): `tokens`
 * refill at a rate up to a burst; `last` is the clock time of the last
 * refill.  A zeroed bucket holds what it would have refilled since clock
 * time 0 (a process's clock starts near 0): start one with bucket_full. */
#ifndef BRIGADE_BUCKET_H
#define BRIGADE_BUCKET_H

typedef struct {
    double tokens, last;
} bucket_t;

/* A bucket that is full at time now (clamped to its burst on first use). */
static inline bucket_t bucket_full(double now)
{
    return (bucket_t){ 1e300, now };
}

/* Refills b at `rate` per second up to `burst` and takes `cost` from it.
 * 1 when it held that much (taken), 0 when not (nothing taken). */
static inline int bucket_take(bucket_t *b, double now, double rate, double burst, double cost)
{
    b->tokens += (now - b->last) * rate;
    if (b->tokens > burst) b->tokens = burst;
    b->last = now;
    if (b->tokens < cost) return 0;
    b->tokens -= cost;
    return 1;
}

#endif
