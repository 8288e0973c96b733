/* stash.h: weight stashing.  A microbatch's backward pass must use the
 * weights its forward pass used; when the stage updates while microbatches
 * of the current version are still in flight, that version is copied aside
 * first.  Mode full keeps one copy per version in use; mode 2bw keeps at
 * most one old version (PipeDream-2BW): microbatches of older versions then
 * run their backward with the oldest version kept. */
#ifndef BRIGADE_STASH_H
#define BRIGADE_STASH_H
#include <stddef.h>
#include <stdint.h>

#define STASH_MAX 64

typedef struct {
    int64_t version;  /* weight version held */
    int refs;         /* in-flight microbatches that used it */
    float *params;    /* copy of the weights; NULL for the live version */
} stash_slot_t;

typedef struct {
    int two_bw;                 /* keep at most one old version */
    size_t n;                   /* floats per copy */
    int nslots;                 /* entries of slot[] in use */
    stash_slot_t slot[STASH_MAX];
    float *spare[STASH_MAX];    /* freed copies kept for reuse */
    int nspare;
    int peak;                   /* most versions held at once */
} stash_t;

void stash_init(stash_t *s, size_t n, int two_bw);
void stash_fini(stash_t *s);
/* A forward pass at the live version v starts: one more reference. */
void stash_ref(stash_t *s, int64_t v);
/* The version a backward pass of a microbatch whose forward used v runs
 * with: v itself, or under 2bw the oldest version kept when v is gone.
 * Returns the weights (live when v is the live version). */
const float *stash_params(const stash_t *s, int64_t v, int64_t live_version, const float *live);
/* 1 when the weights version v's forwards used are still held (v is the
 * live version or a copy of v is kept); 0 when 2bw folded them away. */
int stash_holds(const stash_t *s, int64_t v, int64_t live_version);
/* The backward of a microbatch of version v is done (or it was abandoned). */
void stash_unref(stash_t *s, int64_t v, int64_t live_version);
/* Called before the live weights (version v) are updated in place: copies
 * them aside when microbatches of v are in flight.  Returns 0, -1 when out
 * of memory or slots. */
int stash_before_update(stash_t *s, int64_t v, const float *live);
/* Weight versions held now (the live one included). */
int stash_versions(const stash_t *s, int64_t live_version);
#endif
