build-check/node/cli/solo.o: node/cli/solo.c node/cli/cli.h \
 node/engine/data.h node/runtime/metrics.h node/engine/model.h \
 node/engine/modelfile.h node/runtime/options.h node/engine/optim.h \
 node/cli/progress.h node/engine/train.h compress/codec.h \
 /usr/include/x86_64-linux-gnu/openblas-pthread/cblas.h \
 /usr/include/x86_64-linux-gnu/openblas-pthread/openblas_config.h
node/cli/cli.h:
node/engine/data.h:
node/runtime/metrics.h:
node/engine/model.h:
node/engine/modelfile.h:
node/runtime/options.h:
node/engine/optim.h:
node/cli/progress.h:
node/engine/train.h:
compress/codec.h:
/usr/include/x86_64-linux-gnu/openblas-pthread/cblas.h:
/usr/include/x86_64-linux-gnu/openblas-pthread/openblas_config.h:
