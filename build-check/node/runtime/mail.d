build-check/node/runtime/mail.o: node/runtime/mail.c node/runtime/mail.h \
 net/wire.h node/runtime/queue.h
node/runtime/mail.h:
net/wire.h:
node/runtime/queue.h:
