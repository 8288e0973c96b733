/* ticket.c: owner keys, admission tickets, signed announcements. */
#include "net/ticket.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define S_TICKET_SIGNED 80     /* ticket bytes covered by the signature */
#define S_ANNOUNCE_SIGNED 184  /* announcement bytes covered by the signature */
#define S_PATH_MAX 4096

/* ---- files ---- */

static int s_path(char *out, const char *dir, const char *name, char *err, size_t errlen)
{
    if (snprintf(out, S_PATH_MAX, "%s/%s", dir, name) >= S_PATH_MAX) {
        net_errf(err, errlen, "%s: path too long", dir);
        return -1;
    }
    return 0;
}

/* Reads a key file holding 32 hex-encoded bytes.  secret: refuse
 * group/world access.  Returns 0, 1 when missing, -1. */
static int s_read_hex32(const char *path, uint8_t out[32], int secret, char *err, size_t errlen)
{
    char text[80];
    int rc = keyfile_read(path, text, sizeof text, secret, err, errlen);
    if (rc != 0) return rc;
    size_t bin_len = 0;
    int ok = strlen(text) == 64 && sodium_hex2bin(out, 32, text, 64, NULL, &bin_len, NULL) == 0 && bin_len == 32;
    sodium_memzero(text, sizeof text);
    if (!ok) {
        sodium_memzero(out, 32);
        net_errf(err, errlen, "%s: does not hold a 64-digit hex key", path);
        return -1;
    }
    return 0;
}

/* ---- owner key ---- */

int owner_keys_generate(owner_keys_t *k, char *err, size_t errlen)
{
    memset(k, 0, sizeof *k);
    if (keys_sodium(err, errlen)) return -1;
    if (crypto_sign_keypair(k->pub, k->sec) != 0) {
        net_errf(err, errlen, "cannot make a signing keypair");
        return -1;
    }
    return 0;
}

void owner_keys_wipe(owner_keys_t *k) { sodium_memzero(k, sizeof *k); }

void owner_pub_to_hex(char out[OWNER_PUB_HEX_LEN + 1], const uint8_t pub[32])
{
    sodium_bin2hex(out, OWNER_PUB_HEX_LEN + 1, pub, 32);
}

int owner_keys_save(const owner_keys_t *k, const char *dir, char *err, size_t errlen)
{
    if (keys_sodium(err, errlen)) return -1;
    if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
        net_errf(err, errlen, "cannot create directory %s: %s", dir, strerror(errno));
        return -1;
    }
    char path[S_PATH_MAX], line[2 * 32 + 2];
    if (s_path(path, dir, "owner.sign", err, errlen)) return -1;
    sodium_bin2hex(line, sizeof line, k->sec, 32);          /* the seed half */
    strcat(line, "\n");
    int rc = keyfile_write(path, line, 0600, 1, err, errlen);
    sodium_memzero(line, sizeof line);
    if (rc) return -1;
    if (s_path(path, dir, "owner.pub", err, errlen)) return -1;
    owner_pub_to_hex(line, k->pub);
    strcat(line, "\n");
    return keyfile_write(path, line, 0644, 0, err, errlen);
}

int owner_keys_load(owner_keys_t *k, const char *dir, char *err, size_t errlen)
{
    memset(k, 0, sizeof *k);
    if (keys_sodium(err, errlen)) return -1;
    char path[S_PATH_MAX];
    uint8_t seed[32];
    if (s_path(path, dir, "owner.sign", err, errlen)) return -1;
    if (s_read_hex32(path, seed, 1, err, errlen) != 0) return -1;
    int rc = crypto_sign_seed_keypair(k->pub, k->sec, seed);
    sodium_memzero(seed, sizeof seed);
    if (rc != 0) {
        net_errf(err, errlen, "%s: not a usable signing key", path);
        owner_keys_wipe(k);
        return -1;
    }
    if (s_path(path, dir, "owner.pub", err, errlen)) { owner_keys_wipe(k); return -1; }
    uint8_t pub[32];
    rc = s_read_hex32(path, pub, 0, err, errlen);
    if (rc == 1) return 0;   /* optional: derived above */
    if (rc < 0) { owner_keys_wipe(k); return -1; }
    if (sodium_memcmp(pub, k->pub, 32) != 0) {
        net_errf(err, errlen, "%s does not match the public key of %s/owner.sign", path, dir);
        owner_keys_wipe(k);
        return -1;
    }
    return 0;
}

int owner_keys_ensure(const char *dir, char *err, size_t errlen)
{
    char path[S_PATH_MAX];
    owner_keys_t k;
    if (s_path(path, dir, "owner.sign", err, errlen)) return -1;
    struct stat st;
    if (lstat(path, &st) == 0) {
        int rc = owner_keys_load(&k, dir, err, errlen);
        owner_keys_wipe(&k);
        return rc < 0 ? -1 : 0;
    }
    if (errno != ENOENT) {
        net_errf(err, errlen, "cannot look at %s: %s", path, strerror(errno));
        return -1;
    }
    if (owner_keys_generate(&k, err, errlen) < 0) return -1;
    int rc = owner_keys_save(&k, dir, err, errlen);
    owner_keys_wipe(&k);
    return rc < 0 ? -1 : 1;
}

int owner_pub_parse(uint8_t pub[32], const char *text, char *err, size_t errlen)
{
    if (keys_sodium(err, errlen)) return -1;
    size_t n = strlen(text), bin_len = 0;
    if (n == OWNER_PUB_HEX_LEN
        && sodium_hex2bin(pub, 32, text, n, NULL, &bin_len, NULL) == 0 && bin_len == 32)
        return 0;
    struct stat st;
    char path[S_PATH_MAX];
    if (stat(text, &st) != 0) {
        net_errf(err, errlen, "%s: neither 64 hex digits nor an owner.pub file or key directory", text);
        return -1;
    }
    if (S_ISDIR(st.st_mode)) {
        if (s_path(path, text, "owner.pub", err, errlen)) return -1;
    } else {
        snprintf(path, sizeof path, "%s", text);
    }
    return s_read_hex32(path, pub, 0, err, errlen) == 0 ? 0 : -1;
}

/* ---- tickets ---- */

void ticket_encode(uint8_t out[TICKET_LEN], const ticket_t *t)
{
    memset(out, 0, TICKET_LEN);
    le_put32(out, TICKET_MAGIC);
    out[4] = t->version;
    memcpy(out + 8, t->owner, 32);
    memcpy(out + 40, t->peer, 32);
    le_put64(out + 72, t->expires);
    memcpy(out + 80, t->sig, 64);
}

int ticket_decode(ticket_t *t, const uint8_t *buf, size_t len, char *err, size_t errlen)
{
    memset(t, 0, sizeof *t);
    if (len != TICKET_LEN) {
        net_errf(err, errlen, "not a ticket: %zu bytes, expected %d", len, TICKET_LEN);
        return -1;
    }
    if (le_get32(buf) != TICKET_MAGIC) { net_errf(err, errlen, "not a ticket: bad magic"); return -1; }
    if (buf[4] != TICKET_VERSION) {
        net_errf(err, errlen, "ticket version %u not supported (expected %d)", (unsigned)buf[4], TICKET_VERSION);
        return -1;
    }
    if (buf[5] | buf[6] | buf[7]) { net_errf(err, errlen, "not a ticket: reserved bytes set"); return -1; }
    t->version = buf[4];
    memcpy(t->owner, buf + 8, 32);
    memcpy(t->peer, buf + 40, 32);
    t->expires = le_get64(buf + 72);
    memcpy(t->sig, buf + 80, 64);
    return 0;
}

int ticket_issue(ticket_t *t, const owner_keys_t *owner, const uint8_t peer_pub[32],
                 uint64_t expires, char *err, size_t errlen)
{
    memset(t, 0, sizeof *t);
    if (keys_sodium(err, errlen)) return -1;
    t->version = TICKET_VERSION;
    memcpy(t->owner, owner->pub, 32);
    memcpy(t->peer, peer_pub, 32);
    t->expires = expires;
    uint8_t buf[TICKET_LEN];
    ticket_encode(buf, t);
    if (crypto_sign_detached(t->sig, NULL, buf, S_TICKET_SIGNED, owner->sec) != 0) {
        net_errf(err, errlen, "cannot sign the ticket");
        return -1;
    }
    return 0;
}

void ticket_encode_text(char out[TICKET_TEXT_LEN + 1], const ticket_t *t)
{
    uint8_t buf[TICKET_LEN];
    ticket_encode(buf, t);
    sodium_bin2base64(out, TICKET_TEXT_LEN + 1, buf, TICKET_LEN,
                      sodium_base64_VARIANT_URLSAFE_NO_PADDING);
}

int ticket_decode_text(ticket_t *t, const char *text, char *err, size_t errlen)
{
    memset(t, 0, sizeof *t);
    if (keys_sodium(err, errlen)) return -1;
    while (isspace((unsigned char)*text)) text++;
    size_t n = strlen(text);
    while (n > 0 && isspace((unsigned char)text[n - 1])) n--;
    if (n != TICKET_TEXT_LEN) {
        net_errf(err, errlen, "not a ticket: %zu characters, expected %d", n, TICKET_TEXT_LEN);
        return -1;
    }
    /* check the alphabet first: libsodium 1.0.18 maps some bytes >= 0x80 to
     * base64 digits instead of refusing them */
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)text[i];
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')) && c != '-' && c != '_') {
            net_errf(err, errlen, "not a ticket: not URL-safe base64");
            return -1;
        }
    }
    uint8_t buf[TICKET_LEN];
    size_t bin_len = 0;
    const char *end = NULL;
    if (sodium_base642bin(buf, sizeof buf, text, n, NULL, &bin_len, &end,
                          sodium_base64_VARIANT_URLSAFE_NO_PADDING) != 0
        || bin_len != TICKET_LEN || end != text + n) {
        net_errf(err, errlen, "not a ticket: not URL-safe base64");
        return -1;
    }
    return ticket_decode(t, buf, bin_len, err, errlen);
}

int ticket_verify(const ticket_t *t, const uint8_t owner_pub[32], const uint8_t peer_pub[32],
                  uint64_t now, char *err, size_t errlen)
{
    if (keys_sodium(err, errlen)) return -1;
    if (t->version != TICKET_VERSION) { net_errf(err, errlen, "ticket version not supported"); return -1; }
    if (sodium_memcmp(t->owner, owner_pub, 32) != 0) {
        net_errf(err, errlen, "ticket from another owner");
        return -1;
    }
    uint8_t buf[TICKET_LEN];
    ticket_encode(buf, t);
    if (crypto_sign_verify_detached(t->sig, buf, S_TICKET_SIGNED, owner_pub) != 0) {
        net_errf(err, errlen, "bad ticket signature");
        return -1;
    }
    if (sodium_memcmp(t->peer, peer_pub, 32) != 0) {
        net_errf(err, errlen, "ticket for another peer key");
        return -1;
    }
    if (t->expires != 0 && now >= t->expires) {
        net_errf(err, errlen, "ticket expired");
        return -1;
    }
    return 0;
}

/* ---- announcements ---- */

/* The X25519 scalar of a Curve25519 secret key (as crypto_scalarmult clamps it). */
static void s_clamp(uint8_t k[32], const uint8_t sec[32])
{
    memcpy(k, sec, 32);
    k[0] &= 248;
    k[31] &= 127;
    k[31] |= 64;
}

void announce_encode(uint8_t out[ANNOUNCE_LEN], const announce_t *a)
{
    memset(out, 0, ANNOUNCE_LEN);
    le_put32(out, ANNOUNCE_MAGIC);
    out[4] = ANNOUNCE_VERSION;
    out[5] = a->flags;
    le_put16(out + 6, (uint16_t)a->stage);
    le_put64(out + 8, a->id);
    le_put64(out + 16, a->seq);
    memcpy(out + 24, a->pubkey, 32);
    memcpy(out + 56, a->sign_pub, 32);
    size_t n = strnlen(a->addr, PEER_ADDR_MAX - 1);
    memcpy(out + 88, a->addr, n);
    memcpy(out + 184, a->sig, 64);
}

/* The signing scalar k of node key kp and its Edwards public point A, which
 * must map back to kp's X25519 public key.  0, or -1. */
static int s_edwards_key(uint8_t k[32], uint8_t A[32], const keypair_t *kp)
{
    uint8_t curve[32];
    s_clamp(k, kp->sec);
    int rc = crypto_scalarmult_ed25519_base_noclamp(A, k);
    if (rc == 0) rc = crypto_sign_ed25519_pk_to_curve25519(curve, A);
    if (rc == 0 && memcmp(curve, kp->pub, 32) != 0) rc = -1;
    return rc;
}

/* Ed25519 signature of m[0..mlen) with the raw scalar k whose public point is
 * A: R = rB, s = r + H(R||A||m) k (mod L), r from fresh randomness, k and m. */
static int s_sign_scalar(uint8_t sig[64], const uint8_t *m, size_t mlen,
                         const uint8_t k[32], const uint8_t A[32])
{
    uint8_t wide[64], a[32], r[32], h[32], ha[32], z[64];
    crypto_hash_sha512_state st;
    memset(wide, 0, sizeof wide);
    memcpy(wide, k, 32);
    crypto_core_ed25519_scalar_reduce(a, wide);
    randombytes_buf(z, sizeof z);
    crypto_hash_sha512_init(&st);
    crypto_hash_sha512_update(&st, z, sizeof z);
    crypto_hash_sha512_update(&st, a, 32);
    crypto_hash_sha512_update(&st, m, mlen);
    crypto_hash_sha512_final(&st, wide);
    crypto_core_ed25519_scalar_reduce(r, wide);
    int rc = crypto_scalarmult_ed25519_base_noclamp(sig, r);   /* R */
    if (rc == 0) {
        crypto_hash_sha512_init(&st);
        crypto_hash_sha512_update(&st, sig, 32);
        crypto_hash_sha512_update(&st, A, 32);
        crypto_hash_sha512_update(&st, m, mlen);
        crypto_hash_sha512_final(&st, wide);
        crypto_core_ed25519_scalar_reduce(h, wide);
        crypto_core_ed25519_scalar_mul(ha, h, a);
        crypto_core_ed25519_scalar_add(sig + 32, r, ha);
    }
    sodium_memzero(wide, sizeof wide);
    sodium_memzero(a, sizeof a);
    sodium_memzero(r, sizeof r);
    sodium_memzero(ha, sizeof ha);
    sodium_memzero(z, sizeof z);
    return rc;
}

int announce_sign(announce_t *a, const peer_info_t *self, uint64_t seq,
                  const keypair_t *kp, char *err, size_t errlen)
{
    memset(a, 0, sizeof *a);
    if (keys_sodium(err, errlen)) return -1;
    if (memcmp(self->pubkey, kp->pub, 32) != 0 || self->id != node_id_from_pubkey(kp->pub)) {
        net_errf(err, errlen, "announcement: the record is not this node's");
        return -1;
    }
    size_t n = strnlen(self->addr, PEER_ADDR_MAX);
    if (n == 0 || n >= PEER_ADDR_MAX) { net_errf(err, errlen, "announcement: bad address"); return -1; }
    if (self->stage < -1) { net_errf(err, errlen, "announcement: bad stage"); return -1; }
    a->stage = self->stage;
    a->flags = (uint8_t)(self->flags & PEER_FLAGS_KNOWN);
    a->id = self->id;
    a->seq = seq;
    memcpy(a->pubkey, kp->pub, 32);
    memcpy(a->addr, self->addr, n + 1);
    uint8_t k[32];
    int rc = s_edwards_key(k, a->sign_pub, kp);
    if (rc == 0) {
        uint8_t buf[ANNOUNCE_LEN];
        announce_encode(buf, a);
        rc = s_sign_scalar(a->sig, buf, S_ANNOUNCE_SIGNED, k, a->sign_pub);
    }
    sodium_memzero(k, sizeof k);
    if (rc != 0) {
        net_errf(err, errlen, "announcement: cannot sign with this node key");
        memset(a, 0, sizeof *a);
        return -1;
    }
    return 0;
}

/* Decodes buf (ANNOUNCE_LEN bytes) into a and checks its form (no
 * cryptography).  NULL, or the reason it is malformed. */
static const char *s_announce_parse(announce_t *a, const uint8_t *buf)
{
    if (le_get32(buf) != ANNOUNCE_MAGIC || buf[4] != ANNOUNCE_VERSION || (buf[5] & ~PEER_FLAGS_KNOWN) != 0)
        return "bad magic or version";
    a->stage = (int16_t)le_get16(buf + 6);
    a->flags = buf[5];
    a->id = le_get64(buf + 8);
    a->seq = le_get64(buf + 16);
    memcpy(a->pubkey, buf + 24, 32);
    memcpy(a->sign_pub, buf + 56, 32);
    memcpy(a->sig, buf + 184, 64);
    const uint8_t *addr = buf + 88;
    size_t n = strnlen((const char *)addr, PEER_ADDR_MAX);
    if (a->stage < -1) return "bad stage";
    if (n == 0 || n >= PEER_ADDR_MAX) return "bad address";
    for (size_t i = n; i < PEER_ADDR_MAX; i++)
        if (addr[i] != 0) return "bytes after the address";
    if (!peer_addr_valid((const char *)addr)) return "address is not HOST:PORT";
    memcpy(a->addr, addr, n);
    a->addr[n] = '\0';
    return NULL;
}

/* The reason a's keys or signature (over buf) do not hold, or NULL. */
static const char *s_announce_crypto(const announce_t *a, const uint8_t *buf)
{
    uint8_t curve[32];
    if (a->id != node_id_from_pubkey(a->pubkey)) return "id does not match its key";
    if (crypto_sign_ed25519_pk_to_curve25519(curve, a->sign_pub) != 0 || sodium_memcmp(curve, a->pubkey, 32) != 0)
        return "signing key is not the node key";
    if (crypto_sign_verify_detached(a->sig, buf, S_ANNOUNCE_SIGNED, a->sign_pub) != 0) return "bad signature";
    return NULL;
}

static int s_announce_read(announce_t *a, const uint8_t *buf, size_t len, int crypto, char *err, size_t errlen)
{
    memset(a, 0, sizeof *a);
    if (keys_sodium(err, errlen)) return -1;
    if (len != ANNOUNCE_LEN) {
        net_errf(err, errlen, "announcement of %zu bytes, expected %d", len, ANNOUNCE_LEN);
        return -1;
    }
    const char *why = s_announce_parse(a, buf);
    if (!why && crypto) why = s_announce_crypto(a, buf);
    if (why) {
        net_errf(err, errlen, "announcement: %s", why);
        memset(a, 0, sizeof *a);
        return -1;
    }
    return 0;
}

int announce_verify(announce_t *a, const uint8_t *buf, size_t len, char *err, size_t errlen)
{
    return s_announce_read(a, buf, len, 1, err, errlen);
}

int announce_decode(announce_t *a, const uint8_t *buf, size_t len, char *err, size_t errlen)
{
    return s_announce_read(a, buf, len, 0, err, errlen);
}

uint64_t announce_seq_of(const uint8_t *buf)
{
    return le_get64(buf + 16);
}

int announce_matches(const announce_t *a, const peer_info_t *p)
{
    return a->id == p->id && memcmp(a->pubkey, p->pubkey, 32) == 0
        && a->stage == p->stage && strncmp(a->addr, p->addr, PEER_ADDR_MAX) == 0;
}

/* ---- signed completion ---- */

#define S_DONE_SIGNED 92   /* completion bytes covered by the signature */

int done_sign(uint8_t out[DONE_LEN], uint64_t run, uint64_t completed, const keypair_t *kp, char *err, size_t errlen)
{
    memset(out, 0, DONE_LEN);
    if (keys_sodium(err, errlen)) return -1;
    uint8_t k[32];
    le_put32(out, DONE_MAGIC);
    le_put64(out + 4, run);
    le_put64(out + 12, completed);
    le_put64(out + 20, node_id_from_pubkey(kp->pub));
    memcpy(out + 28, kp->pub, 32);
    int rc = s_edwards_key(k, out + 60, kp);
    if (rc == 0) rc = s_sign_scalar(out + 92, out, S_DONE_SIGNED, k, out + 60);
    sodium_memzero(k, sizeof k);
    if (rc != 0) { net_errf(err, errlen, "completion: cannot sign with this node key"); memset(out, 0, DONE_LEN); return -1; }
    return 0;
}

int done_verify(const uint8_t *buf, size_t len, uint64_t run, uint64_t *signer, char *err, size_t errlen)
{
    if (keys_sodium(err, errlen)) return -1;
    const char *why = NULL;
    uint8_t curve[32];
    if (len != DONE_LEN) why = "wrong length";
    else if (le_get32(buf) != DONE_MAGIC) why = "bad magic";
    else if (le_get64(buf + 4) != run) why = "another run";
    else if (le_get64(buf + 20) != node_id_from_pubkey(buf + 28)) why = "id does not match its key";
    else if (crypto_sign_ed25519_pk_to_curve25519(curve, buf + 60) != 0 || sodium_memcmp(curve, buf + 28, 32) != 0)
        why = "signing key is not the node key";
    else if (crypto_sign_verify_detached(buf + 92, buf, S_DONE_SIGNED, buf + 60) != 0) why = "bad signature";
    if (why) { net_errf(err, errlen, "completion proof: %s", why); return -1; }
    *signer = le_get64(buf + 20);
    return 0;
}
