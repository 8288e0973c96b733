/* test_queue: the thread-safe mail queue (node/runtime/queue.h): FIFO,
 * pops that time out, and pushes from another thread. */
#include "tests/check.h"
#include "node/runtime/queue.h"

#include <pthread.h>
#include <stdlib.h>
#include <time.h>

typedef struct {
    queue_item_t link;
    int value;
} qitem_t;

static int s_freed;
static void s_free_item(queue_item_t *it) { s_freed++; free(it); }

static qitem_t *s_qitem(int v)
{
    qitem_t *it = calloc(1, sizeof *it);
    it->value = v;
    return it;
}

static void test_queue_fifo(void)
{
    queue_t q;
    queue_init(&q);
    CHECK(queue_pop(&q, 0) == NULL);
    for (int i = 0; i < 100; i++) queue_push(&q, &s_qitem(i)->link);
    CHECK(queue_len(&q) == 100);
    int order_ok = 1;
    for (int i = 0; i < 60; i++) {
        qitem_t *it = (qitem_t *)queue_pop(&q, 0);
        if (!it || it->value != i) order_ok = 0;
        free(it);
    }
    CHECK(order_ok);
    CHECK(queue_len(&q) == 40);
    /* interleaved pushes keep the order */
    queue_push(&q, &s_qitem(1000)->link);
    qitem_t *it = (qitem_t *)queue_pop(&q, 0);
    CHECK(it && it->value == 60);
    free(it);
    s_freed = 0;
    queue_fini(&q, s_free_item);  /* 61..99 and 1000 */
    CHECK(s_freed == 40);
}

static void test_queue_timeout_empty(void)
{
    queue_t q;
    queue_init(&q);
    CHECK(queue_pop(&q, 150) == NULL);
    CHECK(queue_pop(&q, 1) == NULL);
    CHECK(queue_len(&q) == 0);
    /* still usable after a timeout */
    queue_push(&q, &s_qitem(5)->link);
    qitem_t *it = (qitem_t *)queue_pop(&q, 150);
    CHECK(it && it->value == 5);
    free(it);
    queue_fini(&q, NULL);
}

typedef struct {
    queue_t *q;
    int n;          /* items to push */
    int delay_ms;   /* before the first push */
} pusher_t;

static void *s_pusher(void *arg)
{
    pusher_t *p = arg;
    struct timespec ts = { 0, (long)p->delay_ms * 1000000L };
    nanosleep(&ts, NULL);
    for (int i = 0; i < p->n; i++) queue_push(p->q, &s_qitem(i)->link);
    return NULL;
}

static void test_queue_cross_thread(void)
{
    queue_t q;
    queue_init(&q);
    /* a pop waiting with a long timeout is woken by the push */
    pusher_t p = { &q, 1, 100 };
    pthread_t th;
    CHECK(pthread_create(&th, NULL, s_pusher, &p) == 0);
    qitem_t *it = (qitem_t *)queue_pop(&q, 20000);
    CHECK(it && it->value == 0);
    free(it);
    pthread_join(th, NULL);
    /* many items from another thread arrive complete and in order */
    pusher_t many = { &q, 20000, 0 };
    CHECK(pthread_create(&th, NULL, s_pusher, &many) == 0);
    int next = 0, bad = 0;
    while (next < many.n) {
        it = (qitem_t *)queue_pop(&q, 20000);
        if (!it) { bad++; break; }
        if (it->value != next) bad++;
        next++;
        free(it);
    }
    pthread_join(th, NULL);
    CHECKF(bad == 0 && next == many.n, "bad=%d next=%d", bad, next);
    CHECK(queue_len(&q) == 0);
    queue_fini(&q, s_free_item);
}

int main(void)
{
    RUN(test_queue_fifo);
    RUN(test_queue_timeout_empty);
    RUN(test_queue_cross_thread);
    CHECK_EXIT();
}
