/* ticket_cmd.c: `brigade ticket --owner DIR --peer PUBKEY [--expires T]`,
 * an admission ticket for a closed swarm, printed on stdout. */
#include "net/keys.h"
#include "net/ticket.h"
#include "node/cli/cli.h"
#include "node/runtime/options.h"

#include <ctype.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#define S_USAGE_LINE "brigade ticket --owner DIR --peer PUBKEY [--expires T]"
#define S_USAGE "usage: " S_USAGE_LINE "\n"

/* Parses T: 0 (never), N seconds, or N with a unit s/m/h/d/w.  Returns 0
 * with the seconds in *secs, or -1. */
static int s_parse_duration(const char *s, uint64_t *secs)
{
    if (!isdigit((unsigned char)*s)) return -1;
    uint64_t v = 0;
    for (; isdigit((unsigned char)*s); s++) {
        if (v > UINT64_C(1) << 40) return -1;     /* more than 34000 years */
        v = v * 10 + (uint64_t)(*s - '0');
    }
    uint64_t mul = 1;
    if (*s) {
        switch (*s) {
        case 's': mul = 1; break;
        case 'm': mul = 60; break;
        case 'h': mul = 3600; break;
        case 'd': mul = 86400; break;
        case 'w': mul = 7 * 86400; break;
        default: return -1;
        }
        if (s[1]) return -1;
    }
    if (v > (UINT64_C(1) << 40) / mul) return -1;
    *secs = v * mul;
    return 0;
}

/* A peer key: 40 Z85 characters, a node.pub file, or a key directory. */
static int s_parse_peer(uint8_t pub[32], const char *s, char *err, size_t errlen)
{
    if (key_from_z85(pub, s) == 0) return 0;
    char path[4096];
    struct stat st;
    if (stat(s, &st) != 0) {
        snprintf(err, errlen, "ticket: --peer %s: neither a 40-character Z85 key nor a node.pub file or key directory", s);
        return -1;
    }
    if (S_ISDIR(st.st_mode)) snprintf(path, sizeof path, "%s/node.pub", s);
    else snprintf(path, sizeof path, "%s", s);
    char line[128] = "", why[300];
    if (keyfile_read(path, line, sizeof line, 0, why, sizeof why) != 0) {   /* not a regular file: refused, a pipe too */
        snprintf(err, errlen, "ticket: --peer: %s", why);
        return -1;
    }
    if (key_from_z85(pub, line) != 0) {
        snprintf(err, errlen, "ticket: --peer: %s does not hold a 40-character Z85 key", path);
        return -1;
    }
    return 0;
}

int cmd_ticket(int argc, char **argv)
{
    const char *owner_dir = NULL, *peer = NULL, *expires = "0";
    char err[600];
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf(S_USAGE
                   "  --owner DIR    directory holding owner.sign (made by brigade keygen)\n"
                   "  --peer PUBKEY  the admitted node's public key: 40 Z85 characters,\n"
                   "                 its node.pub file or its key directory\n"
                   "  --expires T    lifetime: seconds (3600), or 30m, 12h, 30d, 2w; 0 = never (default)\n"
                   "prints the ticket (192 characters) on stdout; the node passes it at join\n");
            return 0;
        }
        char why[400];
        int r = opts_take(argc, argv, &i, "owner", "DIR", &owner_dir, why, sizeof why);
        if (r == 0) r = opts_take(argc, argv, &i, "peer", "PUBKEY", &peer, why, sizeof why);
        if (r == 0) r = opts_take(argc, argv, &i, "expires", "T", &expires, why, sizeof why);
        if (r < 0) snprintf(err, sizeof err, "ticket: %s", why);
        else if (r == 0) snprintf(err, sizeof err, "ticket: unknown option '%s' (" S_USAGE_LINE ")", argv[i]);
        if (r <= 0) return cli_fail(err);
    }
    if (!owner_dir) return cli_fail("ticket: --owner DIR is required");
    if (!peer) return cli_fail("ticket: --peer PUBKEY is required");
    uint64_t secs;
    if (s_parse_duration(expires, &secs) < 0) {
        snprintf(err, sizeof err, "ticket: --expires %s: expected seconds, or N with a unit s/m/h/d/w, or 0 for never", expires);
        return cli_fail(err);
    }
    uint8_t peer_pub[32];
    if (s_parse_peer(peer_pub, peer, err, sizeof err) < 0) return cli_fail(err);
    owner_keys_t owner;
    char e2[512];
    if (owner_keys_load(&owner, owner_dir, e2, sizeof e2) < 0) {
        snprintf(err, sizeof err, "ticket: --owner: %s", e2);
        return cli_fail(err);
    }
    uint64_t at = secs ? (uint64_t)time(NULL) + secs : 0;
    ticket_t t;
    int rc = ticket_issue(&t, &owner, peer_pub, at, e2, sizeof e2);
    owner_keys_wipe(&owner);
    if (rc < 0) {
        snprintf(err, sizeof err, "ticket: %s", e2);
        return cli_fail(err);
    }
    char text[TICKET_TEXT_LEN + 1], z85[KEY_Z85_LEN + 1], when[64] = "never";
    ticket_encode_text(text, &t);
    key_to_z85(z85, peer_pub);
    if (at) {
        time_t tt = (time_t)at;
        struct tm tm;
        if (gmtime_r(&tt, &tm)) strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S UTC", &tm);
    }
    printf("%s\n", text);
    if (fflush(stdout) != 0 || ferror(stdout)) {   /* the ticket is the whole output: 1, as sample */
        fprintf(stderr, "brigade: ticket: the ticket could not be written: %s\n", strerror(errno));
        return 1;
    }
    fprintf(stderr, "ticket for %s, expires %s\n", z85, when);
    return 0;
}

/* A ticket given as text or @FILE, into its bytes.  0, or -1 with a reason. */
int cli_read_ticket(const char *arg, uint8_t *out, char *err, size_t errlen)
{
    char text[TICKET_TEXT_LEN + 64] = {0};
    const char *src = arg;
    if (src[0] == '@') {
        FILE *f = fopen(src + 1, "r");
        if (!f) { snprintf(err, errlen, "--ticket %s: %s", src, strerror(errno)); return -1; }
        size_t got = fread(text, 1, sizeof text - 1, f);
        fclose(f);
        while (got && (text[got - 1] == '\n' || text[got - 1] == '\r' || text[got - 1] == ' ')) text[--got] = 0;
        src = text;
    }
    ticket_t t;
    char why[256];
    if (ticket_decode_text(&t, src, why, sizeof why) < 0) {
        snprintf(err, errlen, "--ticket: %s", why);
        return -1;
    }
    ticket_encode(out, &t);
    return 0;
}
