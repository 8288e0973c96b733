build-check/node/runtime/node.o: node/runtime/node.c node/runtime/node.h \
 net/keys.h net/ticket.h net/wire.h node/engine/modelfile.h \
 node/engine/model.h node/engine/data.h node/runtime/compute.h \
 node/engine/train.h node/engine/optim.h node/runtime/env.h \
 net/transport.h node/runtime/mail.h node/runtime/queue.h \
 node/runtime/metrics.h node/runtime/netside.h node/runtime/options.h \
 node/runtime/peers.h node/runtime/idmap.h
node/runtime/node.h:
net/keys.h:
net/ticket.h:
net/wire.h:
node/engine/modelfile.h:
node/engine/model.h:
node/engine/data.h:
node/runtime/compute.h:
node/engine/train.h:
node/engine/optim.h:
node/runtime/env.h:
net/transport.h:
node/runtime/mail.h:
node/runtime/queue.h:
node/runtime/metrics.h:
node/runtime/netside.h:
node/runtime/options.h:
node/runtime/peers.h:
node/runtime/idmap.h:
