build-check/node/engine/modelfile.o: node/engine/modelfile.c \
 node/engine/modelfile.h node/engine/model.h node/engine/data.h
node/engine/modelfile.h:
node/engine/model.h:
node/engine/data.h:
