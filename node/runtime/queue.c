/* queue.c: thread-safe FIFO (queue.h). */
#include "node/runtime/queue.h"
#include <errno.h>
#include <time.h>

void queue_init(queue_t *q)
{
    q->head = q->tail = NULL;
    q->len = 0;
    pthread_mutex_init(&q->lock, NULL);
    pthread_condattr_t a;
    pthread_condattr_init(&a);
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    pthread_cond_init(&q->cond, &a);
    pthread_condattr_destroy(&a);
}

void queue_fini(queue_t *q, void (*free_fn)(queue_item_t *))
{
    queue_item_t *it = q->head;
    while (it) {
        queue_item_t *next = it->next;
        if (free_fn) free_fn(it);
        it = next;
    }
    q->head = q->tail = NULL;
    pthread_mutex_destroy(&q->lock);
    pthread_cond_destroy(&q->cond);
}

void queue_push(queue_t *q, queue_item_t *item)
{
    item->next = NULL;
    pthread_mutex_lock(&q->lock);
    if (q->tail) q->tail->next = item;
    else q->head = item;
    q->tail = item;
    q->len++;
    pthread_cond_signal(&q->cond);
    pthread_mutex_unlock(&q->lock);
}

/* With the lock held: waits up to timeout_ms for an item. */
static void s_wait_locked(queue_t *q, int timeout_ms)
{
    if (q->head || timeout_ms <= 0) return;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += timeout_ms / 1000;
    ts.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) { ts.tv_sec++; ts.tv_nsec -= 1000000000L; }
    while (!q->head)
        if (pthread_cond_timedwait(&q->cond, &q->lock, &ts) == ETIMEDOUT) break;
}

int queue_wait(queue_t *q, int timeout_ms)
{
    pthread_mutex_lock(&q->lock);
    s_wait_locked(q, timeout_ms);
    int any = q->head != NULL;
    pthread_mutex_unlock(&q->lock);
    return any;
}

queue_item_t *queue_pop(queue_t *q, int timeout_ms)
{
    pthread_mutex_lock(&q->lock);
    s_wait_locked(q, timeout_ms);
    queue_item_t *it = q->head;
    if (it) {
        q->head = it->next;
        if (!q->head) q->tail = NULL;
        q->len--;
        it->next = NULL;
    }
    pthread_mutex_unlock(&q->lock);
    return it;
}

size_t queue_len(queue_t *q)
{
    pthread_mutex_lock(&q->lock);
    size_t n = q->len;
    pthread_mutex_unlock(&q->lock);
    return n;
}
