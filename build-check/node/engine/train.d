build-check/node/engine/train.o: node/engine/train.c node/engine/train.h \
 node/engine/model.h node/engine/data.h node/engine/optim.h
node/engine/train.h:
node/engine/model.h:
node/engine/data.h:
node/engine/optim.h:
