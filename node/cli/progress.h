/* progress.h: the human progress line on stderr: one line rewritten in place
 * when stderr is a terminal, plain periodic lines when it is not.  A
 * progress_t belongs to the command that prints (one thread). */
#ifndef BRIGADE_PROGRESS_H
#define BRIGADE_PROGRESS_H

typedef struct {
    double last;   /* metrics_now() of the last line printed */
    int open;      /* a terminal line is open (no newline yet) */
} progress_t;

/* A progress with nothing printed yet: its first line is due at once. */
void progress_init(progress_t *p);
/* Prints the line when due (every 0.25 s on a terminal, every `every`
 * seconds otherwise) or when force is set.  printf-style. */
void progress_line(progress_t *p, int force, double every, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* Ends a line left open on a terminal. */
void progress_done(progress_t *p);
#endif
