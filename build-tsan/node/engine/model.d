build-tsan/node/engine/model.o: node/engine/model.c node/engine/model.h \
 node/engine/data.h node/engine/layers.h node/engine/rng.h
node/engine/model.h:
node/engine/data.h:
node/engine/layers.h:
node/engine/rng.h:
