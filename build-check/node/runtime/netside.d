build-check/node/runtime/netside.o: node/runtime/netside.c \
 node/runtime/netside.h net/keys.h net/ticket.h net/wire.h \
 net/transport.h node/runtime/env.h node/runtime/mail.h \
 node/runtime/queue.h node/runtime/metrics.h node/runtime/options.h \
 node/engine/model.h node/engine/data.h node/engine/optim.h \
 node/runtime/peers.h node/runtime/idmap.h compress/codec.h
node/runtime/netside.h:
net/keys.h:
net/ticket.h:
net/wire.h:
net/transport.h:
node/runtime/env.h:
node/runtime/mail.h:
node/runtime/queue.h:
node/runtime/metrics.h:
node/runtime/options.h:
node/engine/model.h:
node/engine/data.h:
node/engine/optim.h:
node/runtime/peers.h:
node/runtime/idmap.h:
compress/codec.h:
