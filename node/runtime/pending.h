/* pending.h: tensors waiting for a node's compute (one FIFO for
 * activations, one for gradients), bounded in tensors and in bytes.
 *
 * The network side checks a tensor's shape, not how much it compressed:
 * a neighbour can send many tensors that are small on the wire and full
 * size once decoded.  A queue therefore refuses a tensor once it holds
 * PENDING_BYTES of them, unless it holds fewer than PENDING_MIN (a stage
 * with very large tensors still queues a window's worth); the refused
 * tensor's data stage issues the work again.  Owned by the compute side. */
#ifndef BRIGADE_RUNTIME_PENDING_H
#define BRIGADE_RUNTIME_PENDING_H
#include <stddef.h>
#include "node/runtime/mail.h"

#define PENDING_MAX 1024                     /* tensors a queue holds at most */
#define PENDING_MIN 32                       /* tensors it takes whatever their size */
#define PENDING_BYTES ((size_t)256 << 20)    /* bytes of tensors past which it takes no more (past PENDING_MIN) */

typedef struct {
    mail_t *m[PENDING_MAX];
    int head, n;
    size_t bytes;           /* mail_bytes() of the tensors held */
} pending_t;

/* The bound of this header for any queue of tensors holding at most
 * max_held of them: 1 when one of `more` bytes may join `held` tensors of
 * held_bytes bytes (fewer than max_held, and fewer than PENDING_MIN or
 * within PENDING_BYTES with it), else 0.  (The node's mailbox uses it too.) */
int pending_fits(size_t held, size_t held_bytes, size_t more, size_t max_held);

/* Appends m (the queue owns it from then on).  0 kept; -1 full (in
 * tensors or bytes), m still the caller's. */
int pending_push(pending_t *p, mail_t *m);

/* The oldest tensor, left in the queue (NULL when empty). */
mail_t *pending_peek(const pending_t *p);

/* Removes the oldest tensor and gives it to the caller (NULL when empty). */
mail_t *pending_pop(pending_t *p);

/* Frees every tensor held; the queue is empty after. */
void pending_clear(pending_t *p);
#endif
