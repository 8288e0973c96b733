build-check/node/runtime/idmap.o: node/runtime/idmap.c \
 node/runtime/idmap.h
node/runtime/idmap.h:
