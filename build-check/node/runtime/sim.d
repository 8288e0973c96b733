build-check/node/runtime/sim.o: node/runtime/sim.c node/runtime/sim.h \
 node/runtime/options.h node/engine/model.h node/engine/data.h \
 node/engine/optim.h compress/codec.h net/keys.h node/runtime/compute.h \
 node/engine/train.h node/runtime/env.h net/transport.h net/wire.h \
 node/runtime/mail.h node/runtime/queue.h node/runtime/metrics.h \
 node/runtime/netside.h net/ticket.h node/runtime/peers.h \
 node/runtime/idmap.h \
 /usr/include/x86_64-linux-gnu/openblas-pthread/cblas.h \
 /usr/include/x86_64-linux-gnu/openblas-pthread/openblas_config.h
node/runtime/sim.h:
node/runtime/options.h:
node/engine/model.h:
node/engine/data.h:
node/engine/optim.h:
compress/codec.h:
net/keys.h:
node/runtime/compute.h:
node/engine/train.h:
node/runtime/env.h:
net/transport.h:
net/wire.h:
node/runtime/mail.h:
node/runtime/queue.h:
node/runtime/metrics.h:
node/runtime/netside.h:
net/ticket.h:
node/runtime/peers.h:
node/runtime/idmap.h:
/usr/include/x86_64-linux-gnu/openblas-pthread/cblas.h:
/usr/include/x86_64-linux-gnu/openblas-pthread/openblas_config.h:
