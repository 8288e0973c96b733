build-check/node/runtime/queue.o: node/runtime/queue.c \
 node/runtime/queue.h
node/runtime/queue.h:
