build-check/node/engine/optim.o: node/engine/optim.c node/engine/optim.h \
 node/engine/model.h node/engine/data.h
node/engine/optim.h:
node/engine/model.h:
node/engine/data.h:
