build-check/node/runtime/router.o: node/runtime/router.c \
 node/runtime/router.h node/runtime/idmap.h node/runtime/mail.h \
 net/wire.h node/runtime/queue.h node/runtime/peers.h net/ticket.h \
 net/keys.h
node/runtime/router.h:
node/runtime/idmap.h:
node/runtime/mail.h:
net/wire.h:
node/runtime/queue.h:
node/runtime/peers.h:
net/ticket.h:
net/keys.h:
