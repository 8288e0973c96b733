/* metrics.h: the JSON Lines metrics log (DESIGN.md, "Metrics").  Every line
 * carries t (seconds since the process started), event, node and stage; the
 * caller adds the event's own keys through a format whose strings are always
 * escaped (metrics_event).  Thread-safe. */
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
/* Appends {"t":..,"event":event,"node":..,"stage":..,<fields>} and flushes.
 * fields (or NULL) is a printf-style format for the rest of the object
 * without braces whose conversions are written as JSON:
 *   %s         a const char * written as a JSON string through json_quote
 *              (quoted and escaped; NULL is null; cut at METRICS_STR_MAX
 *              bytes), so the format says "\"why\":%s", never quotes
 *              around %s;
 *   %d %i %u with hh h l ll z j t: integers, as printf writes them;
 *   %f %e %g (width, precision, the '-' and ' ' flags): a number, or null
 *              when the value is NaN or infinite;
 *   %%.
 * Quotes in the format's own text are the caller's (e.g. "\"run\":\"%016llx\"");
 * inside them %x and %X and the '+', '#' and '0' flags are written as printf
 * writes them too.  A %s inside quotes, %x, %X or the '+', '#' or '0' flag
 * outside them (they would write "ff", "+1", "1." or "007", which are not
 * JSON), or any other conversion, is a programmer error (assert). */
void metrics_event(metrics_t *self, const char *event, const char *fields, ...)
    __attribute__((format(printf, 3, 4)));
#define METRICS_STR_MAX 1024   /* bytes of one string value written, at most */
/* Seconds since process start (monotonic). */
double metrics_now(void);
/* CPU seconds used so far by the whole process / by the calling thread. */
double metrics_cpu_process(void);
double metrics_cpu_thread(void);
#endif
