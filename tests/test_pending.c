/* test_pending: the compute side's bounded queues of tensors
 * (node/runtime/pending.h). */
#include "tests/check.h"
#include "node/runtime/pending.h"

#include <stdint.h>
#include <stdlib.h>

/* Tensor mail of n floats (no values: only its size counts here), mb as its id. */
static mail_t *s_tensor_mail(size_t n, uint64_t mb)
{
    mail_t *m = mail_new(MAIL_TENSOR);
    if (m) { m->n = n; m->hdr.mb = mb; }
    return m;
}

/* Pushes tensors of n floats (ids 0, 1, ...) until p refuses one (freed
 * here); how many it took. */
static int s_pending_fill(pending_t *p, size_t n)
{
    for (int k = 0;; k++) {
        mail_t *m = s_tensor_mail(n, (uint64_t)k);
        if (!m || pending_push(p, m) < 0) { mail_free(m); return k; }
    }
}

/* How many tensors of n floats a fresh queue takes before it refuses one,
 * cleared after. */
static int s_pending_takes(size_t n)
{
    pending_t *p = calloc(1, sizeof *p);
    if (!p) return -1;
    int k = s_pending_fill(p, n);
    pending_clear(p);
    int empty = p->n == 0 && p->bytes == 0;
    free(p);
    return empty ? k : -1;
}

/* The compute side's queues are bounded in tensors and in decoded bytes:
 * small tensors up to PENDING_MAX, large ones up to PENDING_BYTES, and at
 * least PENDING_MIN whatever their size; FIFO, and popping makes room. */
static void test_pending_bounds(void)
{
    CHECKF(s_pending_takes(1000) == PENDING_MAX, "4 KB tensors: %d taken", s_pending_takes(1000));
    CHECKF(s_pending_takes((size_t)1 << 20) == 64, "4 MiB tensors: %d taken (want 256 MiB worth)",
           s_pending_takes((size_t)1 << 20));
    CHECKF(s_pending_takes((size_t)4 << 20) == PENDING_MIN, "16 MiB tensors: %d taken", s_pending_takes((size_t)4 << 20));
    pending_t *p = calloc(1, sizeof *p);
    if (!p) { CHECK(0); return; }
    CHECK(s_pending_fill(p, (size_t)1 << 20) == 64);
    mail_t *extra = s_tensor_mail((size_t)1 << 20, 999);
    CHECK(pending_push(p, extra) < 0);
    mail_t *first = pending_peek(p);
    CHECK(first && first->hdr.mb == 0 && p->n == 64);
    mail_t *m = pending_pop(p);
    CHECK(m == first && p->bytes == (size_t)63 << 22);
    mail_free(m);
    CHECK(pending_push(p, extra) == 0);   /* room again, at the back */
    int order_ok = 1;
    for (uint64_t want = 1; (m = pending_pop(p)); want++) {
        if (m->hdr.mb != (want == 64 ? 999 : want)) order_ok = 0;
        mail_free(m);
    }
    CHECK(order_ok && p->n == 0 && p->bytes == 0 && pending_peek(p) == NULL);
    free(p);
}

int main(void)
{
    RUN(test_pending_bounds);
    CHECK_EXIT();
}
