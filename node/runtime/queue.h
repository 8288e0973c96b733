/* queue.h: a thread-safe FIFO of heap items, used between a node's I/O and
 * compute threads.  Items are intrusive: each starts with a queue_item_t. */
#ifndef BRIGADE_QUEUE_H
#define BRIGADE_QUEUE_H
#include <pthread.h>
#include <stddef.h>

typedef struct queue_item {
    struct queue_item *next;  /* private link */
} queue_item_t;

typedef struct {
    queue_item_t *head, *tail;  /* FIFO */
    size_t len;                 /* items queued */
    pthread_mutex_t lock;
    pthread_cond_t cond;        /* signalled on push */
} queue_t;

void queue_init(queue_t *q);
/* Frees every item still queued with free_fn (may be NULL) and the lock. */
void queue_fini(queue_t *q, void (*free_fn)(queue_item_t *));
/* Appends item (the queue takes ownership until it is popped). */
void queue_push(queue_t *q, queue_item_t *item);
/* Removes the oldest item; waits up to timeout_ms (0: no wait) for one.
 * NULL when none came. */
queue_item_t *queue_pop(queue_t *q, int timeout_ms);
size_t queue_len(queue_t *q);
/* Waits up to timeout_ms until the queue is not empty (nothing is removed).
 * Returns 1 when it has items. */
int queue_wait(queue_t *q, int timeout_ms);
#endif
