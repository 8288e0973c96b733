/* test_sim_plan: the simulator's random fault plans (node/runtime/sim.h). */
#include "tests/check.h"
#include "node/runtime/sim.h"

#include <stdlib.h>

/* A random partition names 1..64 nodes (the size of plan_ev_t's set), each
 * one of the swarm's, however many nodes it has: with --nodes 200 one side
 * could be drawn up to 100 nodes long and was read past its set. */
static void test_sim_plan_random_partitions(void)
{
    for (int nodes = 2; nodes <= 1000; nodes = nodes * 3 + 1) {
        plan_ev_t *ev = NULL;
        int n = sim_plan_random(7, nodes, 300, 60.0, &ev), bad = 0, parts = 0;
        CHECK(n > 0 && ev != NULL);
        for (int i = 0; i < n; i++) {
            if (ev[i].kind != PLAN_PARTITION) continue;
            parts++;
            if (ev[i].nset < 1 || ev[i].nset > 64) { bad++; continue; }
            for (int j = 0; j < ev[i].nset; j++) {
                bad += ev[i].set[j] < 0 || ev[i].set[j] >= nodes;
                for (int k = 0; k < j; k++) bad += ev[i].set[k] == ev[i].set[j];   /* a node twice: a smaller side than drawn */
            }
        }
        CHECKF(parts > 0 && bad == 0, "%d nodes: %d members of %d partitions out of bounds or repeated", nodes, bad, parts);
        free(ev);
    }
}

int main(void)
{
    RUN(test_sim_plan_random_partitions);
    CHECK_EXIT();
}
