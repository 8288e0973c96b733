/* applied.h: the microbatches whose gradient a node has accumulated, so that
 * none is applied twice.  The last APPLIED_GEN to 2 x APPLIED_GEN ids are
 * remembered exactly.  Of the older ones, per origin (an id's top 32 bits,
 * drawn anew at each start of a data-stage node; its low 32 bits are that
 * start's sequence number, which only grows, modulo 2^32), the latest
 * sequence number forgotten: an id of that origin not after it counts as
 * applied.  So a re-issue that comes after thousands of newer microbatches
 * (its data stage was cut off for minutes) is answered as a duplicate, not
 * applied again; one that was never applied here is answered so too, and
 * skipped like work applied further on.  The floors are consulted for
 * re-issues only (an attempt after the first): they rise with whatever ids
 * previous-stage peers send, and one forged id far ahead of an origin's
 * sequence, once forgotten, would otherwise have every later microbatch of
 * that origin answered as applied here (its data stage silenced for good);
 * so such an id can turn away only re-issues, which are rare.  Owned by the
 * compute side. */
#ifndef BRIGADE_RUNTIME_APPLIED_H
#define BRIGADE_RUNTIME_APPLIED_H
#include <stdint.h>
#include "node/runtime/idmap.h"

#define APPLIED_GEN 4096          /* ids per generation */
#define APPLIED_SEQ_BITS 32       /* an id's sequence number: its low bits */

typedef struct {
    idmap_t gen[2];               /* the newer and the older generation of ids */
    idmap_t origin_ix;            /* origin -> index into floor */
    uint64_t *floor;              /* per origin: the latest sequence number forgotten */
    int nfloor, capfloor;
} applied_t;

void applied_init(applied_t *a);
void applied_fini(applied_t *a);
/* Forgets everything (a new stage). */
void applied_clear(applied_t *a);
/* 1 when mb counts as applied here: remembered exactly, or, when reissue
 * (not the microbatch's first attempt), not after its origin's floor. */
int applied_has(const applied_t *a, uint64_t mb, int reissue);
/* Remembers mb as applied.  0, or -1 when out of memory (mb not kept; a
 * generation whose floors could not be raised is kept, not forgotten). */
int applied_mark(applied_t *a, uint64_t mb);
#endif
