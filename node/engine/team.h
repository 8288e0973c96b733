/* team.h: a few threads that share the work of one engine call.
 *
 * An engine call (a stage's forward or backward pass, an optimizer step) that
 * may use T threads starts a team of T - 1 helper threads, hands it parallel
 * loops (team_run), and stops it before it returns: no thread outlives the
 * call and nothing is shared between calls, so calls may run at the same time
 * in different threads of a program (next to a codec or network thread, say).
 * Between loops the helpers spin for a few microseconds, then sleep.
 *
 * A loop is ntasks calls fn(ctx, task, worker): tasks are handed out in
 * order to whichever worker is free (the caller is worker 0, helpers 1..T-1),
 * so a task must write only its own part of the output; the worker index
 * selects per-worker scratch.
 *
 * A loop of parts (team_run_parts) runs part w on worker w, once each, and
 * the parts are sized by the workers' shares (team_part): the team moves
 * the shares after each such loop toward the ones with which every worker
 * would have finished at once, so a core that runs slower for a while (two
 * virtual cores seldom keep one speed) gets less to do, and the faster one
 * does not wait for it at the loop's end.  The shares start equal. */
#ifndef BRIGADE_TEAM_H
#define BRIGADE_TEAM_H

#define TEAM_MAX 64   /* threads of one team, the caller included */

typedef struct team team_t;
typedef void (*team_fn)(void *ctx, int task, int worker);

/* Starts nthreads - 1 helpers (nthreads capped at TEAM_MAX).  Returns NULL
 * when nthreads <= 1 or no helper could be started: team_run then runs the
 * loop in the caller. */
team_t *team_start(int nthreads);
/* Stops and joins the helpers; sets *self_p to NULL.  NULL is fine. */
void team_stop(team_t **self_p);
/* Workers of the team, the caller included (1 for NULL). */
int team_size(const team_t *self);
/* Runs fn(ctx, i, worker) for every i in [0, ntasks) and returns when all
 * have returned.  Called by the thread that started the team only. */
void team_run(team_t *self, int ntasks, team_fn fn, void *ctx);
/* Worker w's part [*a, *b) of [0, n) under the team's current shares:
 * boundaries on multiples of align (the last part takes the rest), the parts
 * of workers 0..size-1 in order and covering [0, n).  NULL: [0, n). */
void team_part(const team_t *self, int n, int align, int w, int *a, int *b);
/* Runs fn(ctx, w, w) once on every worker w and returns when all have, then
 * moves the shares by when each finished; fn's work must be cut by
 * team_part.  The shares do not change during the loop.  Called by the
 * thread that started the team only; NULL runs fn(ctx, 0, 0). */
void team_run_parts(team_t *self, team_fn fn, void *ctx);
#endif
