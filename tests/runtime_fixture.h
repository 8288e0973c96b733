/* runtime_fixture.h: set-up shared by the runtime's unit tests: command
 * lines parsed through the option table, and a scratch folder per test
 * binary.  Every helper is static inline: a test includes the header and
 * uses what it needs. */
#ifndef BRIGADE_TESTS_RUNTIME_FIXTURE_H
#define BRIGADE_TESTS_RUNTIME_FIXTURE_H
#include "node/runtime/options.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Parses a space-separated command line (after the command word). */
static inline int s_parse(opts_t *o, int which, const char *line, char *err, size_t errlen)
{
    char buf[1024];
    char *argv[64];
    int argc = 0;
    snprintf(buf, sizeof buf, "%s", line);
    argv[argc++] = "brigade";
    for (char *tok = strtok(buf, " "); tok && argc < 63; tok = strtok(NULL, " ")) argv[argc++] = tok;
    argv[argc] = NULL;
    opts_defaults(o, which);
    err[0] = 0;
    return opts_parse(o, which, argc, argv, 1, err, errlen);
}

/* The line must be refused by parse (or resolve when parse accepts it) with
 * a message containing frag. */
static inline int s_refused(int which, const char *line, const char *frag)
{
    opts_t o;
    char err[512];
    int rc = s_parse(&o, which, line, err, sizeof err);
    if (rc == 0) rc = opts_resolve(&o, err, sizeof err);
    if (rc != -1) { printf("  '%s' was accepted (rc %d)\n", line, rc); return 0; }
    if (!strstr(err, frag)) { printf("  '%s': message '%s' lacks '%s'\n", line, err, frag); return 0; }
    return 1;
}

/* Makes a fresh folder /tmp/brigade-<name>.XXXXXX into dir (at least 64
 * bytes): 0, or -1 with the reason printed. */
static inline int fixture_tmpdir(char *dir, size_t len, const char *name)
{
    snprintf(dir, len, "/tmp/brigade-%s.XXXXXX", name);
    if (!mkdtemp(dir)) { perror("mkdtemp"); return -1; }
    return 0;
}

/* Removes dir and everything in it; says so when it cannot. */
static inline void fixture_rmdir(const char *dir)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) printf("  could not remove %s\n", dir);
}
#endif
