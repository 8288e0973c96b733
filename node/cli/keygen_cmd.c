/* keygen_cmd.c: `brigade keygen`: a node identity and a run owner's signing key. */
#include "net/keys.h"
#include "net/ticket.h"
#include "node/cli/cli.h"
#include "node/runtime/options.h"
#include <stdio.h>
#include <string.h>

int cmd_keygen(int argc, char **argv)
{
    const char *dir = NULL;
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("usage: brigade keygen --out DIR\n"
                   "  writes DIR/node.key (secret, mode 0600) and DIR/node.pub: a node identity (--keys DIR),\n"
                   "  and DIR/owner.sign (secret, 0600) and DIR/owner.pub: a run owner's signing key\n"
                   "  (brigade node --owner DIR starts a closed swarm; brigade ticket --owner DIR admits peers)\n");
            return 0;
        }
        char why[400], e[600];
        int r = opts_take(argc, argv, &i, "out", "DIR", &dir, why, sizeof why);
        if (r < 0) snprintf(e, sizeof e, "keygen: %s", why);
        else if (r == 0) snprintf(e, sizeof e, "keygen: unknown option '%s' (usage: brigade keygen --out DIR)", argv[i]);
        if (r <= 0) return cli_fail(e);
    }
    if (!dir) return cli_fail("keygen: --out DIR is required");
    keypair_t kp;
    char err[512];
    if (keypair_generate(&kp, err, sizeof err) < 0 || keypair_save(&kp, dir, err, sizeof err) < 0) {
        keypair_wipe(&kp);
        return cli_fail(err);
    }
    if (owner_keys_ensure(dir, err, sizeof err) < 0) {
        keypair_wipe(&kp);
        return cli_fail(err);
    }
    printf("public key: %s\nwritten: %s/node.key (secret, 0600) and %s/node.pub,\n"
           "         %s/owner.sign (run-owner signing key, 0600) and %s/owner.pub\n", kp.pub_z85, dir, dir, dir, dir);
    keypair_wipe(&kp);
    return 0;
}
