build-check/node/cli/sample.o: node/cli/sample.c node/cli/cli.h \
 node/engine/model.h node/engine/data.h node/engine/modelfile.h \
 node/engine/rng.h
node/cli/cli.h:
node/engine/model.h:
node/engine/data.h:
node/engine/modelfile.h:
node/engine/rng.h:
