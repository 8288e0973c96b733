/* pending.c: tensors waiting for a node's compute (pending.h). */
#include "node/runtime/pending.h"
#include "node/runtime/invariant.h"

int pending_fits(size_t held, size_t held_bytes, size_t more, size_t max_held)
{
    return held < max_held && (held < PENDING_MIN || held_bytes + more <= PENDING_BYTES);
}

int pending_push(pending_t *p, mail_t *m)
{
    size_t b = mail_bytes(m);
    if (!pending_fits((size_t)p->n, p->bytes, b, PENDING_MAX)) return -1;
    p->m[(p->head + p->n++) % PENDING_MAX] = m;
    p->bytes += b;
    return 0;
}

mail_t *pending_peek(const pending_t *p)
{
    return p->n ? p->m[p->head] : NULL;
}

mail_t *pending_pop(pending_t *p)
{
    if (!p->n) return NULL;
    mail_t *m = p->m[p->head];
    p->head = (p->head + 1) % PENDING_MAX;
    p->n--;
    INVARIANT(p->bytes >= mail_bytes(m));
    p->bytes -= mail_bytes(m);
    return m;
}

void pending_clear(pending_t *p)
{
    mail_t *m;
    while ((m = pending_pop(p))) mail_free(m);
}
