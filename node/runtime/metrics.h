/* metrics.h: the JSON Lines metrics log (DESIGN.md, "Metrics").  Every line
 * carries t (seconds since the process started), event, node and stage; the
 * caller adds the event's own keys as a JSON fragment.  Thread-safe. */
#ifndef BRIGADE_METRICS_H
#define BRIGADE_METRICS_H
#include <stddef.h>

typedef struct metrics metrics_t;

/* Opens path for appending (NULL path: a metrics object that writes nothing).
 * Returns NULL with a reason in err when the file cannot be opened. */
metrics_t *metrics_open(const char *path, const char *node, char *err, size_t errlen);
/* Another metrics object writing to the same file as parent (its own node
 * id, stage and the parent's clock); the file is closed with the last of
 * them.  NULL when out of memory. */
metrics_t *metrics_share(metrics_t *parent, const char *node);
void metrics_close(metrics_t **self_p);
/* The clock of `t` (default metrics_now: seconds since the process started;
 * the simulator's virtual clock). */
void metrics_set_clock(metrics_t *self, double (*now)(void *arg), void *arg);
/* Sets the stage written on following lines (-1 writes null). */
void metrics_set_stage(metrics_t *self, int stage);
/* Sets the node id written on following lines. */
void metrics_set_node(metrics_t *self, const char *node);
/* Appends {"t":..,"event":event,"node":..,"stage":..,<fields>}; fields is a
 * printf format for the rest of the object without braces, e.g.
 * "\"loss\":%.6f", or NULL.  Flushed at once. */
void metrics_event(metrics_t *self, const char *event, const char *fields, ...)
    __attribute__((format(printf, 3, 4)));
/* Seconds since process start (monotonic). */
double metrics_now(void);
/* Writes a JSON number, or null when x is not finite, into buf. */
const char *metrics_num(char *buf, size_t len, double x);
#endif
