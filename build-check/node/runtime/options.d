build-check/node/runtime/options.o: node/runtime/options.c \
 node/runtime/options.h node/engine/model.h node/engine/data.h \
 node/engine/optim.h net/wire.h compress/codec.h
node/runtime/options.h:
node/engine/model.h:
node/engine/data.h:
node/engine/optim.h:
net/wire.h:
compress/codec.h:
