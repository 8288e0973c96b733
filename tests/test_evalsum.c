/* test_evalsum: evaluation rounds summed at the last stage
 * (node/runtime/evalsum.h). */
#include "tests/check.h"
#include "node/runtime/evalsum.h"

/* evalsum: rounds summed apart, reported whole or pushed out partial. */
static void test_evalsum(void)
{
    evalsum_t s;
    evalsum_init(&s);
    evalsum_round_t out[2];
    /* two rounds interleaved, and a second round of version 10 (another data-stage node's) */
    CHECK(evalsum_add(&s, 10, 0, 3, 0, 1.0, 0, 1.0, out) == 0);
    CHECK(evalsum_add(&s, 20, 0, 3, 0, 5.0, 0, 1.1, out) == 0);
    CHECK(evalsum_add(&s, 10, 0, 3, 0, 2.0, 0, 1.2, out) == 0);   /* index 0 again: another round */
    CHECK(evalsum_add(&s, 10, 0, 3, 1, 1.0, 0, 1.3, out) == 0);
    CHECK(evalsum_add(&s, 20, 0, 3, 1, 5.0, 0, 1.4, out) == 0);
    int k = evalsum_add(&s, 10, 0, 3, 2, 1.0, 2, 1.5, out);
    CHECKF(k == 1 && out[0].round == 10 && out[0].n == 3 && out[0].loss == 3.0 && out[0].correct == 2 && !out[0].seen,
           "k %d round %u n %d loss %g", k, out[0].round, out[0].n, out[0].loss);
    CHECK(evalsum_add(&s, 10, 0, 3, 1, 2.0, 0, 1.6, out) == 0);
    k = evalsum_add(&s, 10, 0, 3, 2, 2.0, 0, 1.7, out);
    CHECKF(k == 1 && out[0].loss == 6.0 && out[0].first_t == 1.2, "k %d loss %g", k, out[0].loss);
    CHECK(evalsum_final(&s) == NULL);
    /* the final round, the same version as an ordinary one: apart */
    CHECK(evalsum_add(&s, 20, 1, 2, 0, 4.0, 0, 2.0, out) == 0);
    const evalsum_round_t *f = evalsum_final(&s);
    CHECK(f && f->round == 20 && f->final && f->n == 1 && f->first_t == 2.0);
    /* a fourth and a fifth round: the one heard from least recently (20, at 1.4) is pushed out, partial */
    CHECK(evalsum_add(&s, 30, 0, 2, 0, 1.0, 0, 2.1, out) == 0);
    CHECK(evalsum_add(&s, 40, 0, 2, 1, 1.0, 0, 2.2, out) == 0);
    k = evalsum_add(&s, 50, 0, 1, 0, 7.0, 0, 2.3, out);
    CHECKF(k == 2 && out[0].round == 20 && !out[0].final && out[0].n == 2 && out[1].round == 50 && out[1].n == 1,
           "k %d: %u/%d %u/%d", k, out[0].round, out[0].n, out[1].round, out[1].n);
    /* stale rounds: heard from before 2.15 */
    evalsum_round_t r;
    CHECK(evalsum_stale(&s, 2.15, &r) == 1 && r.round == 20 && r.final);   /* the oldest first: the final (2.0), then 30 (2.1) */
    CHECK(evalsum_stale(&s, 2.15, &r) == 1 && r.round == 30);
    CHECK(evalsum_stale(&s, 2.15, &r) == 0);
    CHECK(evalsum_final(&s) == NULL);
    CHECK(evalsum_add(&s, 60, 1, 2, 0, 1.0, 0, 3.0, out) == 0);
    f = evalsum_final(&s);
    evalsum_take(&s, f, &r);
    CHECK(r.round == 60 && r.n == 1 && evalsum_final(&s) == NULL);
    CHECK(evalsum_add(&s, 70, 0, 2, 2, 1.0, 0, 3.0, out) == -1 && evalsum_add(&s, 70, 0, 0, 0, 1.0, 0, 3.0, out) == -1);
    evalsum_fini(&s);   /* round 40 still held: freed */
}

int main(void)
{
    RUN(test_evalsum);
    CHECK_EXIT();
}
