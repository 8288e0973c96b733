/* balance.h: rebalancing across the stages at the compute side
 * (balance.c): a node moves to a stage with no peer, or to even out the
 * stages' capacities; a data-stage node drains before it moves. */
#ifndef BRIGADE_RUNTIME_COMPUTE_BALANCE_H
#define BRIGADE_RUNTIME_COMPUTE_BALANCE_H
#include "node/runtime/compute.h"

typedef struct {
    int drain_to;                 /* data stage: the stage it moves to once its microbatches are back (-1: none) */
    char drain_why[128];          /* why */
} balance_t;

/* Each contract at its definition in balance.c. */
void balance_consider_move(compute_t *c);
void balance_drained(compute_t *c);
int balance_take_data(compute_t *c);
#endif
