build-check/node/cli/sim_cmd.o: node/cli/sim_cmd.c node/cli/cli.h \
 node/runtime/sim.h node/runtime/options.h node/engine/model.h \
 node/engine/data.h node/engine/optim.h
node/cli/cli.h:
node/runtime/sim.h:
node/runtime/options.h:
node/engine/model.h:
node/engine/data.h:
node/engine/optim.h:
