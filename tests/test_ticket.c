/* test_ticket.c: owner keys, admission tickets, signed announcements. */
#include "net/ticket.h"
#include "tests/check.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char s_dir[256];

static void s_tmpdir(char *out, size_t n)
{
    snprintf(out, n, "/tmp/brigade_ticket_XXXXXX");
    if (!mkdtemp(out)) { perror("mkdtemp"); exit(1); }
}

static void s_rm(const char *dir)
{
    const char *names[] = { "owner.sign", "owner.pub" };
    char p[512];
    for (int i = 0; i < 2; i++) { snprintf(p, sizeof p, "%s/%s", dir, names[i]); unlink(p); }
    rmdir(dir);
}

static void s_node(keypair_t *kp)
{
    char err[200];
    if (keypair_generate(kp, err, sizeof err) < 0) { printf("%s\n", err); exit(1); }
}

static void test_roundtrip(void)
{
    owner_keys_t o;
    keypair_t peer;
    char err[256];
    CHECK(owner_keys_generate(&o, err, sizeof err) == 0);
    s_node(&peer);
    ticket_t t, u;
    CHECK(ticket_issue(&t, &o, peer.pub, 1000, err, sizeof err) == 0);
    CHECK(ticket_verify(&t, o.pub, peer.pub, 999, err, sizeof err) == 0);
    uint8_t buf[TICKET_LEN];
    ticket_encode(buf, &t);
    CHECK(ticket_decode(&u, buf, sizeof buf, err, sizeof err) == 0);
    CHECK(ticket_verify(&u, o.pub, peer.pub, 0, err, sizeof err) == 0);
    CHECK(u.expires == 1000 && memcmp(u.peer, peer.pub, 32) == 0 && memcmp(u.owner, o.pub, 32) == 0);
    /* wrong lengths */
    CHECK(ticket_decode(&u, buf, sizeof buf - 1, err, sizeof err) < 0);
    /* a never-expiring ticket */
    CHECK(ticket_issue(&t, &o, peer.pub, 0, err, sizeof err) == 0);
    CHECK(ticket_verify(&t, o.pub, peer.pub, UINT64_MAX, err, sizeof err) == 0);
    owner_keys_wipe(&o);
    keypair_wipe(&peer);
}

static void test_tamper_every_byte(void)
{
    owner_keys_t o;
    keypair_t peer;
    char err[256];
    CHECK(owner_keys_generate(&o, err, sizeof err) == 0);
    s_node(&peer);
    ticket_t t, u;
    CHECK(ticket_issue(&t, &o, peer.pub, 5000, err, sizeof err) == 0);
    uint8_t buf[TICKET_LEN];
    ticket_encode(buf, &t);
    int accepted = 0;
    for (int i = 0; i < TICKET_LEN; i++) {
        for (int bit = 0; bit < 8; bit += 3) {
            uint8_t m[TICKET_LEN];
            memcpy(m, buf, sizeof m);
            m[i] ^= (uint8_t)(1u << bit);
            if (ticket_decode(&u, m, sizeof m, err, sizeof err) == 0
                && ticket_verify(&u, o.pub, peer.pub, 10, err, sizeof err) == 0) {
                accepted++;
                printf("  tampered byte %d bit %d accepted\n", i, bit);
            }
        }
    }
    CHECK(accepted == 0);
    owner_keys_wipe(&o);
    keypair_wipe(&peer);
}

static void test_refusals(void)
{
    owner_keys_t o, other;
    keypair_t peer, peer2;
    char err[256];
    CHECK(owner_keys_generate(&o, err, sizeof err) == 0);
    CHECK(owner_keys_generate(&other, err, sizeof err) == 0);
    s_node(&peer);
    s_node(&peer2);
    ticket_t t;
    CHECK(ticket_issue(&t, &o, peer.pub, 100, err, sizeof err) == 0);
    CHECK(ticket_verify(&t, other.pub, peer.pub, 50, err, sizeof err) < 0);
    CHECK(strstr(err, "another owner") != NULL);
    CHECK(ticket_verify(&t, o.pub, peer2.pub, 50, err, sizeof err) < 0);
    CHECK(strstr(err, "another peer") != NULL);
    CHECK(ticket_verify(&t, o.pub, peer.pub, 100, err, sizeof err) < 0);
    CHECK(strstr(err, "expired") != NULL);
    CHECK(ticket_verify(&t, o.pub, peer.pub, 101, err, sizeof err) < 0);
    /* a ticket signed by another owner who claims to be the owner */
    ticket_t f;
    CHECK(ticket_issue(&f, &other, peer.pub, 0, err, sizeof err) == 0);
    memcpy(f.owner, o.pub, 32);
    CHECK(ticket_verify(&f, o.pub, peer.pub, 50, err, sizeof err) < 0);
    CHECK(strstr(err, "signature") != NULL);
    /* moving a ticket to another peer breaks the signature */
    ticket_t g = t;
    memcpy(g.peer, peer2.pub, 32);
    CHECK(ticket_verify(&g, o.pub, peer2.pub, 50, err, sizeof err) < 0);
    CHECK(strstr(err, "signature") != NULL);
    /* extending the expiry breaks the signature */
    g = t;
    g.expires = 0;
    CHECK(ticket_verify(&g, o.pub, peer.pub, 50, err, sizeof err) < 0);
    owner_keys_wipe(&o);
    owner_keys_wipe(&other);
}

static void test_text(void)
{
    owner_keys_t o;
    keypair_t peer;
    char err[256];
    CHECK(owner_keys_generate(&o, err, sizeof err) == 0);
    s_node(&peer);
    ticket_t t, u;
    CHECK(ticket_issue(&t, &o, peer.pub, 123456789, err, sizeof err) == 0);
    char text[TICKET_TEXT_LEN + 1];
    ticket_encode_text(text, &t);
    CHECK(strlen(text) == TICKET_TEXT_LEN);
    for (size_t i = 0; i < TICKET_TEXT_LEN; i++) {
        char c = text[i];
        CHECK((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_');
    }
    CHECK(ticket_decode_text(&u, text, err, sizeof err) == 0);
    CHECK(ticket_verify(&u, o.pub, peer.pub, 5, err, sizeof err) == 0);
    char padded[TICKET_TEXT_LEN + 8];
    snprintf(padded, sizeof padded, "  %s\n", text);
    CHECK(ticket_decode_text(&u, padded, err, sizeof err) == 0);
    /* garbage */
    CHECK(ticket_decode_text(&u, "", err, sizeof err) < 0);
    CHECK(ticket_decode_text(&u, "hello", err, sizeof err) < 0);
    char bad[TICKET_TEXT_LEN + 1];
    memcpy(bad, text, sizeof bad);
    bad[10] = '*';
    CHECK(ticket_decode_text(&u, bad, err, sizeof err) < 0);
    memcpy(bad, text, sizeof bad);
    bad[170] = (char)0x8e;                     /* a high byte is no base64 digit */
    CHECK(ticket_decode_text(&u, bad, err, sizeof err) < 0);
    memcpy(bad, text, sizeof bad);
    bad[TICKET_TEXT_LEN - 1] = '\0';
    CHECK(ticket_decode_text(&u, bad, err, sizeof err) < 0);
    /* a changed character decodes but no longer verifies */
    memcpy(bad, text, sizeof bad);
    bad[100] = bad[100] == 'A' ? 'B' : 'A';
    CHECK(ticket_decode_text(&u, bad, err, sizeof err) < 0 || ticket_verify(&u, o.pub, peer.pub, 5, err, sizeof err) < 0);
    /* 192 random base64url characters are no ticket */
    int ok = 0;
    for (int trial = 0; trial < 50; trial++) {
        for (int i = 0; i < TICKET_TEXT_LEN; i++)
            bad[i] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"[rand() % 64];
        bad[TICKET_TEXT_LEN] = '\0';
        if (ticket_decode_text(&u, bad, err, sizeof err) == 0 && ticket_verify(&u, o.pub, peer.pub, 5, err, sizeof err) == 0) ok++;
    }
    CHECK(ok == 0);
    owner_keys_wipe(&o);
}

static void test_owner_files(void)
{
    char err[512], path[512];
    s_tmpdir(s_dir, sizeof s_dir);
    CHECK(owner_keys_ensure(s_dir, err, sizeof err) == 1);
    CHECK(owner_keys_ensure(s_dir, err, sizeof err) == 0);
    owner_keys_t a, b;
    CHECK(owner_keys_load(&a, s_dir, err, sizeof err) == 0);
    snprintf(path, sizeof path, "%s/owner.sign", s_dir);
    struct stat st;
    CHECK(stat(path, &st) == 0 && (st.st_mode & 0777) == 0600);
    /* save refuses to overwrite */
    CHECK(owner_keys_generate(&b, err, sizeof err) == 0);
    CHECK(owner_keys_save(&b, s_dir, err, sizeof err) < 0);
    /* owner.pub parses as hex, as a file and as a directory */
    uint8_t pub[32];
    char hex[OWNER_PUB_HEX_LEN + 1];
    owner_pub_to_hex(hex, a.pub);
    CHECK(owner_pub_parse(pub, hex, err, sizeof err) == 0 && memcmp(pub, a.pub, 32) == 0);
    CHECK(owner_pub_parse(pub, s_dir, err, sizeof err) == 0 && memcmp(pub, a.pub, 32) == 0);
    char pubpath[512];
    snprintf(pubpath, sizeof pubpath, "%s/owner.pub", s_dir);
    CHECK(owner_pub_parse(pub, pubpath, err, sizeof err) == 0 && memcmp(pub, a.pub, 32) == 0);
    CHECK(owner_pub_parse(pub, "nothex", err, sizeof err) < 0);
    /* a ticket from the loaded key verifies under the file's public key */
    keypair_t peer;
    s_node(&peer);
    ticket_t t;
    CHECK(ticket_issue(&t, &a, peer.pub, 0, err, sizeof err) == 0);
    CHECK(ticket_verify(&t, pub, peer.pub, 1, err, sizeof err) == 0);
    /* group/world readable secret refused, ensure too */
    CHECK(chmod(path, 0644) == 0);
    CHECK(owner_keys_load(&b, s_dir, err, sizeof err) < 0);
    CHECK(strstr(err, "chmod 600") != NULL);
    CHECK(owner_keys_ensure(s_dir, err, sizeof err) < 0);
    CHECK(chmod(path, 0640) == 0);
    CHECK(owner_keys_load(&b, s_dir, err, sizeof err) < 0);
    CHECK(chmod(path, 0600) == 0);
    CHECK(owner_keys_load(&b, s_dir, err, sizeof err) == 0 && memcmp(a.pub, b.pub, 32) == 0);
    /* a mismatched owner.pub refused */
    FILE *f = fopen(pubpath, "w");
    CHECK(f != NULL);
    if (f) { fprintf(f, "%064d\n", 0); fclose(f); }
    CHECK(owner_keys_load(&b, s_dir, err, sizeof err) < 0);
    CHECK(strstr(err, "does not match") != NULL);
    /* missing */
    char empty[256];
    s_tmpdir(empty, sizeof empty);
    CHECK(owner_keys_load(&b, empty, err, sizeof err) < 0);
    rmdir(empty);
    owner_keys_wipe(&a);
    owner_keys_wipe(&b);
    s_rm(s_dir);
}

static peer_info_t s_info(const keypair_t *kp, const char *addr, int stage)
{
    peer_info_t p;
    memset(&p, 0, sizeof p);
    p.id = node_id_from_pubkey(kp->pub);
    snprintf(p.addr, sizeof p.addr, "%s", addr);
    memcpy(p.pubkey, kp->pub, 32);
    p.stage = (int16_t)stage;
    return p;
}

static void test_announce(void)
{
    char err[256];
    int bad = 0;
    for (int trial = 0; trial < 64; trial++) {   /* many keys: both signs of the Edwards x */
        keypair_t kp;
        s_node(&kp);
        peer_info_t p = s_info(&kp, "127.0.0.1:7001", trial % 3 - 1);
        announce_t a, v;
        if (announce_sign(&a, &p, 1000 + trial, &kp, err, sizeof err) < 0) { bad++; continue; }
        uint8_t buf[ANNOUNCE_LEN];
        announce_encode(buf, &a);
        if (announce_verify(&v, buf, sizeof buf, err, sizeof err) < 0) { bad++; printf("  %s\n", err); continue; }
        if (!announce_matches(&v, &p) || v.seq != (uint64_t)(1000 + trial)) bad++;
        keypair_wipe(&kp);
    }
    CHECK(bad == 0);
}

/* An announcement signed over an address that is not HOST:PORT (a quote,
 * a backslash, the wildcard) is refused, however well signed. */
static void test_announce_hostile_addr(void)
{
    char err[256];
    keypair_t kp;
    s_node(&kp);
    const char *hostile[] = {"a\"b:7000", "x\\y:7000", "*:7000", "h:0", "h:7000/KEY"};
    for (size_t c = 0; c < sizeof hostile / sizeof *hostile; c++) {
        peer_info_t p = s_info(&kp, hostile[c], 1);
        announce_t a, v;
        if (announce_sign(&a, &p, 7, &kp, err, sizeof err) < 0) continue;   /* refused at the source: fine */
        uint8_t buf[ANNOUNCE_LEN];
        announce_encode(buf, &a);
        CHECKF(announce_verify(&v, buf, sizeof buf, err, sizeof err) < 0, "%s", hostile[c]);
    }
    keypair_wipe(&kp);
}

static void test_announce_tamper(void)
{
    char err[256];
    keypair_t kp, other;
    s_node(&kp);
    s_node(&other);
    peer_info_t p = s_info(&kp, "10.0.0.5:7000", 1);
    announce_t a, v;
    CHECK(announce_sign(&a, &p, 42, &kp, err, sizeof err) == 0);
    uint8_t buf[ANNOUNCE_LEN];
    announce_encode(buf, &a);
    int accepted = 0;
    for (int i = 0; i < ANNOUNCE_LEN; i++) {
        uint8_t m[ANNOUNCE_LEN];
        memcpy(m, buf, sizeof m);
        m[i] ^= 0x01;
        if (announce_verify(&v, m, sizeof m, err, sizeof err) == 0) { accepted++; printf("  byte %d\n", i); }
    }
    CHECK(accepted == 0);
    CHECK(announce_verify(&v, buf, sizeof buf - 1, err, sizeof err) < 0);
    CHECK(v.flags == 0 && buf[5] == 0);   /* a reachable node's announcement is what it always was */
    /* the outward-only flag is signed: it cannot be added or removed by a third party */
    peer_info_t po = p;
    po.flags = PEER_FLAG_OUTWARD;
    uint8_t ob[ANNOUNCE_LEN];
    CHECK(announce_sign(&a, &po, 44, &kp, err, sizeof err) == 0);
    announce_encode(ob, &a);
    CHECK(ob[5] == PEER_FLAG_OUTWARD);
    CHECK(announce_verify(&v, ob, sizeof ob, err, sizeof err) == 0 && (v.flags & PEER_FLAG_OUTWARD));
    ob[5] = 0;
    CHECK(announce_verify(&v, ob, sizeof ob, err, sizeof err) < 0);
    ob[5] = 0x80;   /* an unknown flag */
    CHECK(announce_verify(&v, ob, sizeof ob, err, sizeof err) < 0);
    /* a record that differs from the announcement */
    CHECK(announce_verify(&v, buf, sizeof buf, err, sizeof err) == 0);
    peer_info_t q = p;
    q.stage = 0;
    CHECK(!announce_matches(&v, &q));
    q = p;
    snprintf(q.addr, sizeof q.addr, "10.0.0.6:7000");
    CHECK(!announce_matches(&v, &q));
    /* another node cannot sign for p: not its record */
    CHECK(announce_sign(&a, &p, 43, &other, err, sizeof err) < 0);
    /* a forger swaps in its own key material: the id no longer matches, or
     * the key is not the one the record names */
    announce_t f;
    peer_info_t fp = s_info(&other, "10.0.0.66:7000", 1);
    CHECK(announce_sign(&f, &fp, 99, &other, err, sizeof err) == 0);
    f.id = p.id;                               /* claim to be p */
    uint8_t fb[ANNOUNCE_LEN];
    announce_encode(fb, &f);
    CHECK(announce_verify(&v, fb, sizeof fb, err, sizeof err) < 0);
    memcpy(f.pubkey, p.pubkey, 32);           /* and p's key, signed by other */
    announce_encode(fb, &f);
    CHECK(announce_verify(&v, fb, sizeof fb, err, sizeof err) < 0);
    keypair_wipe(&kp);
    keypair_wipe(&other);
}

int main(void)
{
    RUN(test_roundtrip);
    RUN(test_tamper_every_byte);
    RUN(test_refusals);
    RUN(test_text);
    RUN(test_owner_files);
    RUN(test_announce);
    RUN(test_announce_tamper);
    RUN(test_announce_hostile_addr);
    CHECK_EXIT();
}
