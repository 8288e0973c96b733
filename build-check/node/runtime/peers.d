build-check/node/runtime/peers.o: node/runtime/peers.c \
 node/runtime/peers.h net/ticket.h net/keys.h net/wire.h \
 node/runtime/idmap.h node/runtime/mail.h node/runtime/queue.h \
 node/engine/model.h node/engine/data.h
node/runtime/peers.h:
net/ticket.h:
net/keys.h:
net/wire.h:
node/runtime/idmap.h:
node/runtime/mail.h:
node/runtime/queue.h:
node/engine/model.h:
node/engine/data.h:
