/* evalsum.h: the sums of the evaluation rounds whose batches are coming in
 * (the last stage; a single-stage node sums its own).  Rounds may interleave
 * (two data-stage nodes evaluating at once) and share a version (each such
 * node's version 10): a round is keyed by its version and final flag, and a
 * batch index it holds already starts another round of the same key, so
 * each is summed apart and reported whole.  Owned by the compute side. */
#ifndef BRIGADE_RUNTIME_EVALSUM_H
#define BRIGADE_RUNTIME_EVALSUM_H
#include <stdint.h>

#define EVALSUM_ROUNDS 4   /* rounds summed at once; one more pushes out the one heard from least recently */

typedef struct {
    uint32_t round;        /* the version evaluated */
    int final;             /* the data stage's final evaluation */
    int nval, n;           /* batches of the round; arrived */
    double loss, correct;  /* sums over the arrived batches */
    double first_t, last_t;/* when its first and its last batch came */
    uint8_t *seen;         /* nval bits, batch i arrived (owned); NULL: a free entry */
} evalsum_round_t;

typedef struct {
    evalsum_round_t r[EVALSUM_ROUNDS];
} evalsum_t;

void evalsum_init(evalsum_t *s);
void evalsum_fini(evalsum_t *s);
/* Adds batch i (0 <= i < nval) of a round with its loss and count correct,
 * arrived at time t.  The rounds to report now go to out[0 .. return): first
 * a round pushed out to make room (partial), then this batch's round when it
 * is whole; they leave the sums (their seen NULL).  -1 when i is out of
 * range; a batch that finds no memory is not counted either. */
int evalsum_add(evalsum_t *s, uint32_t round, int final, int nval, int i, double loss, double correct, double t,
                evalsum_round_t out[2]);
/* The final round being summed (of several, the one whose last batch came
 * latest), NULL when none is. */
const evalsum_round_t *evalsum_final(const evalsum_t *s);
/* Takes out into *out the round heard from least recently, when its last
 * batch came before time `before` (its other batches were lost): 1, or 0
 * when there is none. */
int evalsum_stale(evalsum_t *s, double before, evalsum_round_t *out);
/* Takes the round at r (from evalsum_final) out of the sums into *out. */
void evalsum_take(evalsum_t *s, const evalsum_round_t *r, evalsum_round_t *out);
#endif
