build-check/node/cli/statuspage.o: node/cli/statuspage.c \
 node/cli/statuspage.h node/cli/http.h
node/cli/statuspage.h:
node/cli/http.h:
