/* vcache.h: a bounded set of signed blobs already verified (announcements,
 * tickets): a blob seen again is not verified again.  It holds whole blobs
 * and compares them byte for byte, so a hit means "these exact bytes passed
 * the checks before"; it trusts nothing else (a forged blob that shares a
 * hash with a cached one is simply a miss).  Set-associative, 4 ways, the
 * oldest entry of a set makes room; what it evicts is verified again when
 * it comes back.  Verification is a pure function of the bytes, so a cache
 * shared by several nodes (the simulator's, all in one thread) changes only
 * the time spent, never a result.
 *
 * Not thread-safe: one thread uses a cache. */
#ifndef BRIGADE_NET_VCACHE_H
#define BRIGADE_NET_VCACHE_H
#include <stddef.h>
#include <stdint.h>

#define VCACHE_BLOB_MAX 256    /* longest blob held (ANNOUNCE_LEN, TICKET_LEN fit) */

typedef struct vcache vcache_t;

/* A cache of at least `entries` blobs (rounded up to a power of two, >= 4).
 * NULL when out of memory. */
vcache_t *vcache_new(int entries);
void vcache_destroy(vcache_t **self_p);
/* 1 when these len bytes were added before and are still held; else 0 (also for len > VCACHE_BLOB_MAX). */
int vcache_has(vcache_t *self, const void *blob, size_t len);
/* Remembers blob as verified (no-op for len 0 or > VCACHE_BLOB_MAX). */
void vcache_add(vcache_t *self, const void *blob, size_t len);
/* Lookups that hit and missed since the cache was made (the simulator reports them). */
void vcache_stats(const vcache_t *self, uint64_t *hits, uint64_t *misses);
#endif
