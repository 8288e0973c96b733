/* linkemu.c: serialization queues of the link emulation (linkemu.h). */
#include "net/linkemu.h"

#include <math.h>

linkemu_queue_t linkemu_queue(double mbit)
{
    linkemu_queue_t q = {.mbit = mbit > 0 ? mbit : 0, .busy_until_us = 0};
    return q;
}

int64_t linkemu_serialize(linkemu_queue_t *q, int64_t now_us, size_t bytes)
{
    if (q->mbit <= 0) return now_us;
    int64_t start = q->busy_until_us > now_us ? q->busy_until_us : now_us;
    q->busy_until_us = start + (int64_t)ceil((double)bytes * 8.0 / q->mbit);
    return q->busy_until_us;
}

