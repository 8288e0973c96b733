/* idmap.h: a map from 64-bit ids (node ids, microbatch ids) to small
 * non-negative integers (indices into the caller's arrays).  Open
 * addressing with linear probing; it grows by itself; entries are never
 * removed one by one (idmap_clear empties it). */
#ifndef BRIGADE_RUNTIME_IDMAP_H
#define BRIGADE_RUNTIME_IDMAP_H
#include <stdint.h>

typedef struct {
    uint64_t key;    /* the id */
    int64_t val;     /* value + 1; 0: empty slot */
} idmap_slot_t;

typedef struct {
    idmap_slot_t *slot; /* key and value side by side: one cache line per probe */
    int cap;         /* slots (a power of two) */
    int n;           /* entries */
} idmap_t;

/* An empty map (no allocation until the first put). */
void idmap_init(idmap_t *m);
void idmap_fini(idmap_t *m);
/* The value of key, or -1. */
int idmap_get(const idmap_t *m, uint64_t key);
/* Sets key to val (>= 0).  0, or -1 when out of memory. */
int idmap_put(idmap_t *m, uint64_t key, int val);
/* Removes every entry. */
void idmap_clear(idmap_t *m);
#endif
