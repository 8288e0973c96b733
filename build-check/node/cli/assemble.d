build-check/node/cli/assemble.o: node/cli/assemble.c node/cli/cli.h \
 node/engine/modelfile.h node/engine/model.h node/engine/data.h
node/cli/cli.h:
node/engine/modelfile.h:
node/engine/model.h:
node/engine/data.h:
