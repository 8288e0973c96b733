build-check/node/runtime/stash.o: node/runtime/stash.c \
 node/runtime/stash.h
node/runtime/stash.h:
