build-check/node/cli/http.o: node/cli/http.c node/cli/http.h
node/cli/http.h:
