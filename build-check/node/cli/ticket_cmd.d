build-check/node/cli/ticket_cmd.o: node/cli/ticket_cmd.c net/keys.h \
 net/ticket.h net/wire.h node/cli/cli.h
net/keys.h:
net/ticket.h:
net/wire.h:
node/cli/cli.h:
