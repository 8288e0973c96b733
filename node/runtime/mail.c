/* mail.c: mail between a node's two sides (mail.h). */
#include "node/runtime/mail.h"
#include <stdlib.h>
#include <string.h>

mail_t *mail_new(int kind)
{
    mail_t *m = calloc(1, sizeof *m);
    if (!m) return NULL;
    m->kind = kind;
    m->codec = -1;
    return m;
}

void mail_free(mail_t *m)
{
    if (!m) return;
    free(m->x);
    free(m->aux);
    free(m->view);
    state_blob_destroy(&m->state);
    free(m);
}

void mail_free_q(queue_item_t *q)
{
    mail_free((mail_t *)q);
}

peer_view_t *peer_view_new(int n)
{
    peer_view_t *v = calloc(1, sizeof *v + sizeof(view_peer_t) * (size_t)(n > 0 ? n : 1));
    if (v) v->n = n;
    return v;
}

const view_peer_t *peer_view_find(const peer_view_t *v, uint64_t id)
{
    for (int i = 0; v && i < v->n; i++)
        if (v->p[i].id == id) return &v->p[i];
    return NULL;
}

state_blob_t *state_blob_new(int stage, size_t nparams)
{
    state_blob_t *b = calloc(1, sizeof *b);
    if (!b) return NULL;
    b->stage = stage;
    b->nparams = nparams;
    if (nparams && !(b->data = malloc(3 * nparams * sizeof(float)))) { free(b); return NULL; }
    return b;
}

void state_blob_destroy(state_blob_t **self_p)
{
    if (!*self_p) return;
    free((*self_p)->data);
    free(*self_p);
    *self_p = NULL;
}
