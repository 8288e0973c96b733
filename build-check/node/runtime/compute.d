build-check/node/runtime/compute.o: node/runtime/compute.c \
 node/runtime/compute.h node/engine/data.h node/engine/train.h \
 node/engine/model.h node/engine/optim.h node/runtime/env.h \
 net/transport.h net/keys.h net/wire.h node/runtime/mail.h \
 node/runtime/queue.h node/runtime/metrics.h node/runtime/netside.h \
 net/ticket.h node/runtime/options.h node/runtime/peers.h \
 node/runtime/idmap.h compress/codec.h node/engine/modelfile.h \
 node/runtime/router.h node/runtime/stash.h
node/runtime/compute.h:
node/engine/data.h:
node/engine/train.h:
node/engine/model.h:
node/engine/optim.h:
node/runtime/env.h:
net/transport.h:
net/keys.h:
net/wire.h:
node/runtime/mail.h:
node/runtime/queue.h:
node/runtime/metrics.h:
node/runtime/netside.h:
net/ticket.h:
node/runtime/options.h:
node/runtime/peers.h:
node/runtime/idmap.h:
compress/codec.h:
node/engine/modelfile.h:
node/runtime/router.h:
node/runtime/stash.h:
