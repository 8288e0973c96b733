/* cli.h: the `brigade` subcommands.  Each takes the whole argv (argv[1] is
 * the subcommand) and returns the process exit status. */
#ifndef BRIGADE_CLI_H
#define BRIGADE_CLI_H
#include <stddef.h>
#include <stdint.h>

int cmd_solo(int argc, char **argv);
int cmd_sample(int argc, char **argv);
int cmd_node(int argc, char **argv);
int cmd_keygen(int argc, char **argv);
int cmd_status(int argc, char **argv);
int cmd_assemble(int argc, char **argv);
int cmd_ticket(int argc, char **argv);
int cmd_sim(int argc, char **argv);
int cmd_eval(int argc, char **argv);
int cmd_export(int argc, char **argv);

/* Prints "brigade: <why>" on stderr, one line (control characters in why,
 * say from an argument it quotes, shown as '?'), and returns 2 (the
 * bad-input status). */
int cli_fail(const char *why);
/* A ticket given as text or @FILE (--ticket of node and status) into its
 * TICKET_LEN bytes at out.  0, or -1 with a one-line reason naming --ticket. */
int cli_read_ticket(const char *arg, uint8_t *out, char *err, size_t errlen);
#endif
