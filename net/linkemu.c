/* linkemu.c: the link emulation's model (linkemu.h). */
#include "net/linkemu.h"

#include <math.h>

double linkemu_wire_bytes(size_t bytes, int frames)
{
    double payload = (double)bytes + (double)frames * LINKEMU_FRAME_HDR;
    return payload + ceil(payload / LINKEMU_MSS) * LINKEMU_SEG_HDR;
}

double linkemu_ack_bytes(double wire)
{
    double segs = ceil(wire / (LINKEMU_MSS + LINKEMU_SEG_HDR));
    return ceil(segs / 2) * LINKEMU_SEG_HDR;
}

int64_t linkemu_share(double mbit, double *left, int n, int64_t from_us, int64_t to_us)
{
    int active = 0;
    double least = INFINITY;
    for (int i = 0; i < n; i++)
        if (left[i] > 0) {
            active++;
            if (left[i] < least) least = left[i];
        }
    if (!active) return to_us > from_us ? to_us : from_us;
    if (mbit <= 0) {
        for (int i = 0; i < n; i++) left[i] = 0;
        return from_us;
    }
    double share = mbit / 8.0 / active;           /* bytes per µs per active flow */
    double span = (double)(to_us - from_us);
    if (least / share <= span) {                  /* someone finishes first */
        for (int i = 0; i < n; i++)
            if (left[i] > 0) left[i] = left[i] <= least ? 0 : left[i] - least;
        int64_t t = from_us + (int64_t)ceil(least / share);
        return t < to_us ? t : to_us;
    }
    double sent = span * share;
    for (int i = 0; i < n; i++)
        if (left[i] > 0) left[i] = left[i] - sent > 0 ? left[i] - sent : 0;
    return to_us;
}

int64_t linkemu_next_finish(double mbit, const double *left, int n, int64_t from_us)
{
    int active = 0;
    double least = INFINITY;
    for (int i = 0; i < n; i++)
        if (left[i] > 0) {
            active++;
            if (left[i] < least) least = left[i];
        }
    if (!active) return INT64_MAX;
    if (mbit <= 0) return from_us;
    return from_us + (int64_t)ceil(least * 8.0 * active / mbit);
}

linkemu_queue_t linkemu_queue(double mbit)
{
    linkemu_queue_t q = {.mbit = mbit > 0 ? mbit : 0, .busy_until_us = 0};
    return q;
}

int64_t linkemu_serialize(linkemu_queue_t *q, int64_t now_us, double bytes)
{
    if (q->mbit <= 0) return now_us;
    int64_t start = q->busy_until_us > now_us ? q->busy_until_us : now_us;
    q->busy_until_us = start + (int64_t)ceil(bytes * 8.0 / q->mbit);
    return q->busy_until_us;
}
