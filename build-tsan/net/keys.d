build-tsan/net/keys.o: net/keys.c net/keys.h
net/keys.h:
