/* closing.h: the end of a run at the compute side (closing.c): the run
 * complete, the final evaluation sent by the data stage, passed on by a
 * middle stage and awaited by the last, and a data stage that trains on. */
#ifndef BRIGADE_RUNTIME_COMPUTE_CLOSING_H
#define BRIGADE_RUNTIME_COMPUTE_CLOSING_H
#include "node/runtime/compute.h"

typedef struct {
    int active;                   /* the run is complete: no more training here, only its final evaluation (sent by
                                     the data stage, seen passing by a middle stage, awaited by the last stage) */
    double passed_t;              /* a stage after the data stage: when the final evaluation passed (active; 0: not) */
    double final_wait_until;      /* last stage: active, waiting for the final evaluation until then (0: not) */
    double final_wait_from;       /* last stage: when it began waiting for the final evaluation (a final
                                     round begun before came too early: not the one awaited) */
    uint64_t final_receiver;      /* last stage, waiting: the node the final evaluation's batches go to */
    double final_early_t;         /* last stage: when a final evaluation that came whole before the run was
                                     complete began to arrive (0: none); REOPEN_S later its data stage trains on */
    double final_sent;            /* data stage: when its final evaluation went out (0: not yet, or trained on after it) */
    int final_due;                /* data stage: active, its final evaluation could not go out yet (no memory) */
    int final_short;              /* data stage: its final evaluation went out with the swarm's count short */
    int reopened;                 /* data stage: trained on after its final evaluation (or, without evaluations,
                                     after it stopped at --steps): s_reopened_short says when it has done enough */
    double count_done_t;          /* data stage: when it first saw the swarm's count complete (0: not yet) */
    double last_short_t;          /* data stage, no evaluations: since when it has stopped (version at --steps,
                                     count complete) while a last-stage node's own count is short (0: not) */
} closing_t;

/* Each contract at its definition in closing.c. */
int closing_run_complete(const compute_t *c);
void closing_finish(compute_t *c);
void closing_issue_final(compute_t *c);
void closing_data_stage_end(compute_t *c, double now);
void closing_last_stage_end(compute_t *c);
void closing_final_passing(compute_t *c);
int closing_closed_to_training(compute_t *c);
void closing_final_wait_end(compute_t *c, double now);
int closing_steps_covered(const compute_t *c);
void closing_check(const compute_t *c);
#endif
