/* pending.c: tensors waiting for a node's compute (pending.h). */
#include "node/runtime/pending.h"

int pending_push(pending_t *p, mail_t *m)
{
    size_t b = mail_bytes(m);
    if (p->n == PENDING_MAX || (p->n >= PENDING_MIN && p->bytes + b > PENDING_BYTES)) return -1;
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
    p->bytes -= mail_bytes(m);
    return m;
}

void pending_clear(pending_t *p)
{
    mail_t *m;
    while ((m = pending_pop(p))) mail_free(m);
}
