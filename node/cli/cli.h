/* cli.h: the `brigade` subcommands.  Each takes the whole argv (argv[1] is
 * the subcommand) and returns the process exit status. */
#ifndef BRIGADE_CLI_H
#define BRIGADE_CLI_H

int cmd_solo(int argc, char **argv);
int cmd_sample(int argc, char **argv);
int cmd_node(int argc, char **argv);
int cmd_keygen(int argc, char **argv);
int cmd_status(int argc, char **argv);
int cmd_assemble(int argc, char **argv);
int cmd_ticket(int argc, char **argv);
int cmd_sim(int argc, char **argv);

/* Prints "brigade: <why>" on stderr, one line (control characters in why,
 * say from an argument it quotes, shown as '?'), and returns 2 (the
 * bad-input status). */
int cli_fail(const char *why);
#endif
