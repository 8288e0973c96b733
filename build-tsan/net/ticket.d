build-tsan/net/ticket.o: net/ticket.c net/ticket.h net/keys.h net/wire.h
net/ticket.h:
net/keys.h:
net/wire.h:
