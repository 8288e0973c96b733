build-check/node/cli/progress.o: node/cli/progress.c node/cli/progress.h \
 node/runtime/metrics.h
node/cli/progress.h:
node/runtime/metrics.h:
