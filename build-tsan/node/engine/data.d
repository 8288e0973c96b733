build-tsan/node/engine/data.o: node/engine/data.c node/engine/data.h
node/engine/data.h:
