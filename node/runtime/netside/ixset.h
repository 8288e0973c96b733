/* ixset.h: a set of record indices of the peer table, kept ascending, so
 * that a pass over them goes in table order as a scan of the table would,
 * touching only these records.  A set starts zeroed with ok = 1. */
#ifndef BRIGADE_RUNTIME_NETSIDE_IXSET_H
#define BRIGADE_RUNTIME_NETSIDE_IXSET_H

typedef struct {
    int *ix;
    int n, cap;
    int ok;                 /* complete (0 once an allocation failed: the table is scanned instead) */
} ixset_t;

/* Where ix is, or would go, in set (0..set->n). */
int ixset_pos(const ixset_t *set, int ix);
/* Adds ix (nothing when it is there already); out of memory makes the set
 * incomplete (ok 0) for good. */
void ixset_add(ixset_t *set, int ix);
/* Removes the index at position at (0 <= at < set->n). */
void ixset_del_at(ixset_t *set, int at);
/* Removes ix when it is there. */
void ixset_del(ixset_t *set, int ix);
/* Frees the indices; the set is empty and complete again. */
void ixset_free(ixset_t *set);
#endif
