build-tsan/net/wire.o: net/wire.c net/wire.h net/keys.h
net/wire.h:
net/keys.h:
