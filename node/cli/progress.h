/* progress.h: the human progress line on stderr: one line rewritten in place
 * when stderr is a terminal, plain periodic lines when it is not. */
#ifndef BRIGADE_PROGRESS_H
#define BRIGADE_PROGRESS_H

/* Prints the line when due (every 0.25 s on a terminal, every `every`
 * seconds otherwise) or when force is set.  printf-style. */
void progress_line(int force, double every, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Ends a line left open on a terminal. */
void progress_done(void);
#endif
