build-tsan/net/transport.o: net/transport.c net/transport.h net/keys.h \
 net/wire.h
net/transport.h:
net/keys.h:
net/wire.h:
