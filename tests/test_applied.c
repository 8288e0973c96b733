/* test_applied: the ids of the microbatches a stage applied
 * (node/runtime/applied.h), remembered exactly and by each origin's floor. */
#include "tests/check.h"
#include "node/runtime/applied.h"

#include <stdint.h>

/* applied: ids remembered exactly for two generations, older ones by their
 * origin's floor (serial order of the 32-bit sequence numbers), which
 * re-issues (R) consult and first attempts (F) do not. */
static void test_applied_floor(void)
{
    enum { F = 0, R = 1 };
    applied_t a;
    applied_init(&a);
    const uint64_t A = (uint64_t)0x123456 << APPLIED_SEQ_BITS, C = (uint64_t)0xabcdef << APPLIED_SEQ_BITS;
    const uint64_t top = (UINT64_C(1) << APPLIED_SEQ_BITS) - 1;
    for (uint64_t i = 0; i < 3 * APPLIED_GEN; i++) CHECK(applied_mark(&a, A | (1000 + 2 * i)) == 0);   /* even seqs */
    int all = 1;
    for (uint64_t i = 0; i < 3 * APPLIED_GEN; i++) all &= applied_has(&a, A | (1000 + 2 * i), R);
    CHECKF(all, "an applied id was forgotten");
    CHECK(applied_has(&a, A | 1001, R));                       /* old, never applied: below the floor, refused */
    CHECK(!applied_has(&a, A | 1001, F));                      /* ... unless a first attempt */
    CHECK(applied_has(&a, A | (1000 + 2 * (3 * APPLIED_GEN - 1)), F));  /* recent: remembered exactly */
    CHECK(!applied_has(&a, A | (1001 + 2 * (3 * APPLIED_GEN - 1)), R));   /* recent, never applied: still in the exact sets' time */
    CHECK(!applied_has(&a, A | (1000 + 2 * 3 * APPLIED_GEN), R));  /* newer than every applied one */
    CHECK(!applied_has(&a, C | 1000, R));                      /* another origin */
    /* an origin whose sequence wraps past 2^32: newer ids after the wrap are new */
    for (uint64_t i = 0; i < 3 * APPLIED_GEN; i++) CHECK(applied_mark(&a, C | ((top - 2 * APPLIED_GEN + i) & top)) == 0);
    CHECK(applied_has(&a, C | (top - 2 * APPLIED_GEN), R));
    CHECK(!applied_has(&a, C | (APPLIED_GEN + 5), R));
    CHECK(applied_has(&a, C | (top - 4 * APPLIED_GEN), R));   /* before the first applied: refused (below the floor) */
    /* the same node started again draws another origin: none of its ids is below a floor */
    const uint64_t A2 = (uint64_t)0x123457 << APPLIED_SEQ_BITS;
    CHECK(!applied_has(&a, A2 | 1, R) && !applied_has(&a, A2 | 1000, R));
    /* one forged id of A2 far ahead of its sequence, forgotten after a few
     * thousand others: A2's next first attempts still count as new */
    CHECK(applied_mark(&a, A2 | (1000 + (UINT64_C(1) << 30))) == 0);
    for (uint64_t i = 0; i < 2 * APPLIED_GEN + 2; i++) CHECK(applied_mark(&a, C | (APPLIED_GEN + 100 + i)) == 0);
    CHECK(!applied_has(&a, A2 | (1000 + (UINT64_C(1) << 30)), F));   /* forgotten exactly */
    CHECK(applied_has(&a, A2 | 1001, R));                      /* the floor it raised turns away re-issues */
    all = 1;
    for (uint64_t i = 0; i < 1000; i++) all &= !applied_has(&a, A2 | (1001 + i), F);
    CHECKF(all, "a forged id far ahead silenced its origin's first attempts");
    applied_clear(&a);
    CHECK(!applied_has(&a, A | 1000, R) && !applied_has(&a, A | 1001, R));
    applied_fini(&a);
}

int main(void)
{
    RUN(test_applied_floor);
    CHECK_EXIT();
}
