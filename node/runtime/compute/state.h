/* state.h: the stage's state at the compute side (state.c): fetches in,
 * snapshots out (downloads, backups, averaging, checkpoints), moves. */
#ifndef BRIGADE_RUNTIME_COMPUTE_STATE_H
#define BRIGADE_RUNTIME_COMPUTE_STATE_H
#include "node/runtime/compute.h"

#define AVG_EVERY 20         /* updates between within-stage averaging (weights sent as fp16) */

typedef struct {
    int fetching;                 /* a fetch is under way: st is not the stage's state yet (never saved) */
    int fetch_from;               /* moving: the stage left (-1 at start) */
    int fetch_kind;               /* START_DOWNLOAD or START_BACKUP */
    uint64_t fetch_donor;         /* the peer asked (0: backup holders) */
    int fetch_tries;              /* fetches of this stage so far */
    char fetch_why[128];          /* why the move */
    double last_backup;           /* when the last backup snapshot was pushed */
    uint64_t backup_sent_mark;    /* bytes_sent at the last backup */
    mail_t *avg_pending;          /* a replica's weights, averaged into ours right after our next update: the
                                     forwards of this version used ours, and their backwards must find them */
    int avg_refused;              /* this stage's weights take more than a frame may: said once, not averaged */
    uint64_t ckpt_failures;       /* periodic checkpoints not written */
    int saved_stage;              /* the stage the checkpoint file holds (compute_save_checkpoint) */
    int64_t saved_version;        /* and its version (-1: nothing written by this process) */
    double last_move;             /* when this node last moved to another stage */
    double next_move;             /* when a move is considered next (balance_consider_move) */
} state_moves_t;

/* Each contract at its definition in state.c. */
void state_save_periodic(compute_t *c);
void state_average(compute_t *c);
void state_maybe_backup(compute_t *c);
int state_on_avg(compute_t *c, mail_t *m);
void state_apply_avg(compute_t *c);
void state_send(compute_t *c, uint64_t peer, uint32_t flags);
void state_fetch(compute_t *c, uint64_t donor);
void state_check_donor(compute_t *c);
int state_stage_setup(compute_t *c);
void state_stage_teardown(compute_t *c);
void state_on_fetched(compute_t *c, mail_t *m);
int state_relayout(compute_t *c, const model_config_t *model, int stage);
void state_move(compute_t *c, int to, const char *why);
int state_take_split(compute_t *c);
#endif
