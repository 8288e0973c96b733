build-check/node/runtime/metrics.o: node/runtime/metrics.c \
 node/runtime/metrics.h
node/runtime/metrics.h:
