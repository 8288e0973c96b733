build-check/node/cli/node_cmd.o: node/cli/node_cmd.c node/cli/cli.h \
 node/cli/progress.h node/cli/statuspage.h node/cli/http.h \
 node/engine/modelfile.h node/engine/model.h node/engine/data.h \
 node/runtime/node.h net/keys.h net/ticket.h net/wire.h \
 node/runtime/compute.h node/engine/train.h node/engine/optim.h \
 node/runtime/env.h net/transport.h node/runtime/mail.h \
 node/runtime/queue.h node/runtime/metrics.h node/runtime/netside.h \
 node/runtime/options.h node/runtime/peers.h node/runtime/idmap.h \
 /usr/include/x86_64-linux-gnu/openblas-pthread/cblas.h \
 /usr/include/x86_64-linux-gnu/openblas-pthread/openblas_config.h
node/cli/cli.h:
node/cli/progress.h:
node/cli/statuspage.h:
node/cli/http.h:
node/engine/modelfile.h:
node/engine/model.h:
node/engine/data.h:
node/runtime/node.h:
net/keys.h:
net/ticket.h:
net/wire.h:
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
/usr/include/x86_64-linux-gnu/openblas-pthread/cblas.h:
/usr/include/x86_64-linux-gnu/openblas-pthread/openblas_config.h:
