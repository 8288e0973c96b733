/* mail.c: mail between a node's two sides (mail.h). */
#include "node/runtime/mail.h"
#include <stdlib.h>
#include <string.h>

mail_t *mail_new(mail_kind_t kind)
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

size_t mail_bytes(const mail_t *m)
{
    return m->n * sizeof(float) + m->aux_len;
}

/* Index slots for n entries: a power of two >= 2n. */
static size_t s_ix_slots(int n)
{
    size_t k = 4;
    while (k < 2 * (size_t)(n > 0 ? n : 1)) k <<= 1;
    return k;
}

/* The index slot of id (Fibonacci hashing, then linear probing). */
static uint32_t s_ix_home(uint32_t mask, uint64_t id)
{
    return (uint32_t)((id * 0x9e3779b97f4a7c15ULL) >> 32) & mask;
}

/* Puts entries p[from..n) into the index ix of mask + 1 slots (slot value i + 1). */
static void s_ix_insert(int32_t *ix, uint32_t mask, const view_peer_t *p, int from, int n)
{
    for (int i = from; i < n; i++) {
        uint32_t h = s_ix_home(mask, p[i].id);
        while (ix[h]) h = (h + 1) & mask;
        ix[h] = i + 1;
    }
}

peer_view_t *peer_view_alloc(int n)
{
    size_t np = (size_t)(n > 0 ? n : 1), slots = s_ix_slots(n);
    peer_view_t *v = malloc(sizeof *v + sizeof(view_peer_t) * np + sizeof(int32_t) * slots);
    if (!v) return NULL;
    memset(v, 0, sizeof *v);
    v->n = n;
    return v;
}

peer_view_t *peer_view_new(int n)
{
    peer_view_t *v = peer_view_alloc(n);
    if (v) memset(v->p, 0, sizeof(view_peer_t) * (size_t)(n > 0 ? n : 1));
    return v;
}

void peer_view_index(peer_view_t *v)
{
    size_t slots = s_ix_slots(v->n);
    v->ix = (int32_t *)(void *)&v->p[v->n > 0 ? v->n : 1];
    v->ixmask = (uint32_t)(slots - 1);
    memset(v->ix, 0, sizeof(int32_t) * slots);
    s_ix_insert(v->ix, v->ixmask, v->p, 0, v->n);
}

int peer_view_index_grow(int32_t **ix, size_t *slots, int *done, const view_peer_t *p, int n)
{
    size_t want = s_ix_slots(n);
    if (want != *slots) {
        int32_t *x = realloc(*ix, sizeof(int32_t) * want);
        if (!x) return -1;
        memset(x, 0, sizeof(int32_t) * want);
        *ix = x;
        *slots = want;
        *done = 0;
    }
    s_ix_insert(*ix, (uint32_t)(want - 1), p, *done, n);
    *done = n;
    return 0;
}

void peer_view_index_copy(peer_view_t *v, const int32_t *ix, size_t slots)
{
    v->ix = (int32_t *)(void *)&v->p[v->n > 0 ? v->n : 1];
    v->ixmask = (uint32_t)(slots - 1);
    memcpy(v->ix, ix, sizeof(int32_t) * slots);
}

const view_peer_t *peer_view_find(const peer_view_t *v, uint64_t id)
{
    if (!v) return NULL;
    if (v->ix) {
        for (uint32_t h = s_ix_home(v->ixmask, id); v->ix[h]; h = (h + 1) & v->ixmask)
            if (v->p[v->ix[h] - 1].id == id) return &v->p[v->ix[h] - 1];
        return NULL;
    }
    for (int i = 0; i < v->n; i++)
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
