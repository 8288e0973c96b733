build-tsan/node/cli/main.o: node/cli/main.c node/cli/cli.h \
 node/runtime/options.h node/engine/model.h node/engine/data.h \
 node/engine/optim.h
node/cli/cli.h:
node/runtime/options.h:
node/engine/model.h:
node/engine/data.h:
node/engine/optim.h:
