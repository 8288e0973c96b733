/* status_cmd.c: `brigade status`: asks a node for its swarm map (STATUS_REQ)
 * and prints the STATUS reply. */
#include "net/keys.h"
#include "net/ticket.h"
#include "net/transport.h"
#include "node/cli/cli.h"
#include "node/runtime/metrics.h"
#include "node/runtime/options.h"
#include "node/runtime/proto.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What a STATUS table says of each record's reachability, after the
 * records: reach[i] 1 public, 2 outward only, 3 public and relays for
 * outward-only nodes (the peer's own signed announcement), 0 unknown;
 * link[i] how the answering node reaches it (STATUS_LINK_*; 5 unknown: an
 * older node). */
static void s_status_reach(rbuf_t *r, int k, const peer_info_t *recs, uint8_t *reach, uint8_t *link)
{
    const uint8_t **blobs = malloc(sizeof *blobs * (size_t)(k + 1));
    size_t *lens = malloc(sizeof *lens * (size_t)(k + 1));
    if (!blobs || !lens) { free(blobs); free(lens); memset(link, STATUS_LINK_UNKNOWN, (size_t)k); return; }
    proto_get_status_rest(r, k, blobs, lens, link);
    for (int i = 0; i < k; i++) {
        announce_t a;
        char err[160];
        if (blobs[i] && lens[i] == ANNOUNCE_LEN && announce_verify(&a, blobs[i], lens[i], err, sizeof err) == 0
            && announce_matches(&a, &recs[i]))
            reach[i] = (a.flags & PEER_FLAG_OUTWARD) ? 2 : (a.flags & PEER_FLAG_RELAY) ? 3 : 1;
    }
    free(blobs);
    free(lens);
}

/* Replaces every byte of s that is not printable ASCII with '?', so that a
 * string from the network cannot drive the terminal it is printed on. */
static void s_printable(char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || (unsigned char)*s >= 0x7f) *s = '?';
}

/* Prints the swarm map of a STATUS reply.  0, or -1 with a reason when it is malformed. */
static int s_status_print(const transport_msg_t *m, char *err, size_t errlen)
{
    rbuf_t r;
    rbuf_init(&r, m->frame[0], m->len[0]);
    proto_status_t st;
    proto_get_status(&r, &st);   /* (truncated: nstages 0, or peers_decode says so) */
    uint32_t nst = st.nstages;
    uint64_t target = st.target, done = st.completed;
    float loss = st.loss;
    char *model = st.model;
    s_printable(model);
    if (nst < 1 || nst > MODEL_STAGES_MAX) {   /* a line per stage below: a hostile count would print billions */
        snprintf(err, errlen, "status: a malformed reply: %u stages, at most %d", (unsigned)nst, MODEL_STAGES_MAX);
        return -1;
    }
    peer_info_t *recs = malloc(sizeof(peer_info_t) * PEERS_MAX);
    if (!recs) { snprintf(err, errlen, "out of memory"); return -1; }
    int k = 0;
    char why[200];
    if (peers_decode(&r, recs, PEERS_MAX, &k, why, sizeof why) < 0) {   /* it also reports a truncated header */
        snprintf(err, errlen, "status: a malformed reply: %s", why);
        free(recs);
        return -1;
    }
    char lossbuf[32] = "-";   /* none logged yet */
    if (isfinite(loss)) snprintf(lossbuf, sizeof lossbuf, "%.4f", loss);
    int plan = plan_of_flags(m->hdr.flags);   /* every message says the run's split once the node knows it */
    printf("run %016llx: %s, %u stages, split %s, %llu/%llu microbatches done, last loss %s\n",
           (unsigned long long)m->hdr.run, model, nst, plan < 0 ? "not chosen yet" : split_name((model_split_t)plan),
           (unsigned long long)done, (unsigned long long)target, lossbuf);
    uint8_t *reach = calloc((size_t)k + 1, 1), *link = calloc((size_t)k + 1, 1);
    if (reach && link) s_status_reach(&r, k, recs, reach, link);
    printf("%-6s %-9s %-24s %10s %9s %8s  %-8s %s\n", "stage", "peer", "address", "ubatch/s", "rtt ms", "version",
           "reach", "link");
    static const char *rn[] = { "?", "public", "outward", "relay" };
    static const char *ln[] = { "self", "direct", "reverse", "none", "relayed", "?" };
    for (uint32_t s = 0; s < nst; s++) {
        int any = 0;
        for (int i = 0; i < k; i++) {
            if (recs[i].stage != (int)s) continue;
            char id[9];
            node_id_short(recs[i].id, id);
            printf("%-6u %-9s %-24s %10.2f %9.1f %8u  %-8s %s\n", s, id, recs[i].addr, recs[i].rate, recs[i].rtt_ms,
                   recs[i].version, rn[reach ? reach[i] : 0], ln[link ? link[i] : 5]);
            any = 1;
        }
        if (!any) printf("%-6u (no peer: the swarm waits for one)\n", s);
    }
    free(recs);
    free(reach);
    free(link);
    return 0;
}

/* Asks the node at host:port (its key) for its swarm map as identity kp
 * (with a ticket for a closed swarm, or NULL) and prints it.  0, or -1
 * with a reason (no answer in 10 s, a malformed reply). */
static int s_status_query(const char *host, int port, const uint8_t *key, const keypair_t *kp, const uint8_t *ticket,
                          char *err, size_t errlen)
{
    transport_opts_t to = {0};
    to.listen_host = "127.0.0.1";
    to.keys = kp;
    transport_t *tr = transport_new(&to, err, errlen);
    if (!tr) return -1;
    int link = transport_connect(tr, host, port, key, err, errlen);
    if (link < 0) { transport_destroy(&tr); return -1; }
    wire_hdr_t h;
    wire_hdr_init(&h, WIRE_STATUS_REQ);
    const void *f[1] = { ticket };
    size_t l[1] = { TICKET_LEN };
    transport_send(tr, link, &h, f, l, ticket ? 1 : 0);
    snprintf(err, errlen, "status: no answer from %s:%d in 10 s", host, port);
    int rc = -1;
    for (double deadline = metrics_now() + 10.0; metrics_now() < deadline;) {
        transport_msg_t m;
        if (transport_poll(tr, 100, &m) != 1) continue;
        int answer = m.hdr.type == WIRE_STATUS && m.nframes >= 1;
        if (answer) rc = s_status_print(&m, err, errlen);
        transport_msg_close(&m);
        if (answer) break;
    }
    transport_destroy(&tr);
    return rc;
}

int cmd_status(int argc, char **argv)
{
    if (argc >= 3 && (!strcmp(argv[2], "--help") || !strcmp(argv[2], "-h"))) {
        printf("usage: brigade status HOST:PORT/KEY [--keys DIR --ticket T|@FILE]\n"
               "  prints the swarm map as that node sees it; a closed swarm answers only\n"
               "  a key with a ticket (--keys DIR of that key and its --ticket)\n");
        return 0;
    }
    if (argc < 3 || argv[2][0] == '-')
        return cli_fail("status: the first argument is the node's address HOST:PORT/KEY (see brigade status --help)");
    char host[ADDR_HOST_MAX], err[512];
    const char *keys = NULL, *tk = NULL;
    for (int i = 3; i < argc; i++) {
        char why[400];
        int r = opts_take(argc, argv, &i, "keys", "DIR", &keys, why, sizeof why);
        if (r == 0) r = opts_take(argc, argv, &i, "ticket", "T|@FILE", &tk, why, sizeof why);
        if (r < 0) snprintf(err, sizeof err, "status: %s", why);
        else if (r == 0) snprintf(err, sizeof err, "status: unknown option '%s' (see brigade status --help)", argv[i]);
        if (r <= 0) return cli_fail(err);
    }
    int port;
    uint8_t key[32];
    if (addr_parse(argv[2], host, sizeof host, &port, key, err, sizeof err) < 0) return cli_fail(err);
    keypair_t kp;
    char why[400];
    if (keys && keypair_load(&kp, keys, why, sizeof why) < 0) { snprintf(err, sizeof err, "status: --keys: %s", why); return cli_fail(err); }
    if (!keys && keypair_generate(&kp, err, sizeof err) < 0) return cli_fail(err);
    uint8_t tbytes[TICKET_LEN];
    int r = tk ? cli_read_ticket(tk, tbytes, err, sizeof err) : 0;
    if (r == 0) r = s_status_query(host, port, key, &kp, tk ? tbytes : NULL, err, sizeof err);
    keypair_wipe(&kp);
    return r < 0 ? cli_fail(err) : 0;
}
