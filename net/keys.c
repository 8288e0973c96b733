/* keys.c: keypairs on disk, node ids, HOST:PORT/KEY addresses. */
#include "net/keys.h"
#include "net/wire.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

static const char s_z85_chars[] =
    "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#";

int keys_sodium(char *err, size_t errlen)
{
    if (sodium_init() < 0) {
        net_errf(err, errlen, "libsodium could not be initialised");
        return -1;
    }
    return 0;
}

void key_to_z85(char out[KEY_Z85_LEN + 1], const uint8_t pub[32])
{
    zmq_z85_encode(out, pub, 32);
    out[KEY_Z85_LEN] = '\0';
}

int key_from_z85(uint8_t pub[32], const char *z85)
{
    if (strlen(z85) != KEY_Z85_LEN) return -1;
    for (int i = 0; i < KEY_Z85_LEN; i++)
        if (!strchr(s_z85_chars, z85[i])) return -1;
    return zmq_z85_decode(pub, z85) ? 0 : -1;
}

int keypair_generate(keypair_t *kp, char *err, size_t errlen)
{
    memset(kp, 0, sizeof *kp);
    if (keys_sodium(err, errlen)) return -1;
    crypto_box_keypair(kp->pub, kp->sec);
    key_to_z85(kp->pub_z85, kp->pub);
    key_to_z85(kp->sec_z85, kp->sec);
    return 0;
}

int keypair_from_seed(keypair_t *kp, const uint8_t seed[32], char *err, size_t errlen)
{
    memset(kp, 0, sizeof *kp);
    if (keys_sodium(err, errlen)) return -1;
    crypto_box_seed_keypair(kp->pub, kp->sec, seed);
    key_to_z85(kp->pub_z85, kp->pub);
    key_to_z85(kp->sec_z85, kp->sec);
    return 0;
}

void keypair_wipe(keypair_t *kp) { sodium_memzero(kp, sizeof *kp); }

/* Writes all of text to a new file path created with mode, O_EXCL when excl. */
int keyfile_write(const char *path, const char *text, unsigned mode, int excl,
                  char *err, size_t errlen)
{
    int fd = open(path, O_WRONLY | O_CREAT | (excl ? O_EXCL : O_TRUNC) | O_CLOEXEC, (mode_t)mode);
    if (fd < 0) {
        if (errno == EEXIST)
            net_errf(err, errlen, "%s already exists; refusing to overwrite a key", path);
        else
            net_errf(err, errlen, "cannot create %s: %s", path, strerror(errno));
        return -1;
    }
    size_t n = strlen(text), off = 0;
    while (off < n) {
        ssize_t k = write(fd, text + off, n - off);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) {
            net_errf(err, errlen, "cannot write %s: %s", path, strerror(errno));
            close(fd);
            return -1;
        }
        off += (size_t)k;
    }
    if (close(fd) != 0) {
        net_errf(err, errlen, "cannot write %s: %s", path, strerror(errno));
        return -1;
    }
    return 0;
}

int keypair_save(const keypair_t *kp, const char *dir, char *err, size_t errlen)
{
    if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
        net_errf(err, errlen, "cannot create directory %s: %s", dir, strerror(errno));
        return -1;
    }
    char path[4096];
    char line[KEY_Z85_LEN + 2];
    if (snprintf(path, sizeof path, "%s/node.key", dir) >= (int)sizeof path) {
        net_errf(err, errlen, "%s: path too long", dir);
        return -1;
    }
    snprintf(line, sizeof line, "%s\n", kp->sec_z85);
    int rc = keyfile_write(path, line, 0600, 1, err, errlen);
    sodium_memzero(line, sizeof line);
    if (rc) return -1;
    snprintf(path, sizeof path, "%s/node.pub", dir);
    snprintf(line, sizeof line, "%s\n", kp->pub_z85);
    return keyfile_write(path, line, 0644, 0, err, errlen);
}

int keyfile_read(const char *path, char *out, size_t outlen, int secret, char *err, size_t errlen)
{
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);   /* a pipe must not hold the open */
    if (fd < 0) {
        if (errno == ENOENT) {
            net_errf(err, errlen, "%s: no such file (make one with: brigade keygen --out DIR)", path);
            return 1;
        }
        net_errf(err, errlen, "cannot open %s: %s", path, strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        net_errf(err, errlen, "%s: not a regular file", path);
        close(fd);
        return -1;
    }
    if (secret && (st.st_mode & 077)) {
        net_errf(err, errlen, "%s: permissions %04o are too open for a secret key; run: chmod 600 %s",
              path, (unsigned)(st.st_mode & 0777), path);
        close(fd);
        return -1;
    }
    char buf[256];
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n < 0) {
        net_errf(err, errlen, "cannot read %s: %s", path, strerror(errno));
        return -1;
    }
    buf[n] = '\0';
    while (n > 0 && isspace((unsigned char)buf[n - 1])) buf[--n] = '\0';
    int ok = (size_t)n < outlen;
    if (ok) memcpy(out, buf, (size_t)n + 1);
    sodium_memzero(buf, sizeof buf);
    if (!ok) {
        net_errf(err, errlen, "%s: too long for a key file", path);
        return -1;
    }
    return 0;
}

/* Reads a 40-character Z85 key file into out[41]: 0, 1 if missing, -1. */
static int s_read_key_file(const char *path, char out[KEY_Z85_LEN + 1], int check_mode,
                           char *err, size_t errlen)
{
    char text[KEY_Z85_LEN + 2];
    int rc = keyfile_read(path, text, sizeof text, check_mode, err, errlen);
    if (rc == 0 && strlen(text) != KEY_Z85_LEN) {
        net_errf(err, errlen, "%s: does not hold a 40-character Z85 key", path);
        rc = -1;
    }
    if (rc == 0) memcpy(out, text, KEY_Z85_LEN + 1);
    sodium_memzero(text, sizeof text);
    return rc;
}

int keypair_load(keypair_t *kp, const char *dir, char *err, size_t errlen)
{
    memset(kp, 0, sizeof *kp);
    if (keys_sodium(err, errlen)) return -1;
    char path[4096];
    if (snprintf(path, sizeof path, "%s/node.key", dir) >= (int)sizeof path) {
        net_errf(err, errlen, "%s: path too long", dir);
        return -1;
    }
    if (s_read_key_file(path, kp->sec_z85, 1, err, errlen) != 0) {
        keypair_wipe(kp);
        return -1;
    }
    if (key_from_z85(kp->sec, kp->sec_z85) != 0) {
        net_errf(err, errlen, "%s: does not hold a 40-character Z85 key", path);
        keypair_wipe(kp);
        return -1;
    }
    if (crypto_scalarmult_base(kp->pub, kp->sec) != 0) {
        net_errf(err, errlen, "%s: not a usable Curve25519 secret key", path);
        keypair_wipe(kp);
        return -1;
    }
    key_to_z85(kp->pub_z85, kp->pub);

    snprintf(path, sizeof path, "%s/node.pub", dir);
    char pubtext[KEY_Z85_LEN + 1];
    int rc = s_read_key_file(path, pubtext, 0, err, errlen);
    if (rc == 1) return 0;   /* the public file is optional: derived above */
    if (rc < 0) { keypair_wipe(kp); return -1; }
    if (strcmp(pubtext, kp->pub_z85) != 0) {
        net_errf(err, errlen, "%s does not match the public key of %s/node.key", path, dir);
        keypair_wipe(kp);
        return -1;
    }
    return 0;
}

uint64_t node_id_from_pubkey(const uint8_t pub[32])
{
    uint8_t h[32];
    if (sodium_init() < 0) abort();   /* idempotent; fails only if the library is broken */
    crypto_generichash(h, sizeof h, pub, 32, NULL, 0);
    uint64_t id = 0;
    for (int i = 7; i >= 0; i--) id = (id << 8) | h[i];
    return id;
}

void node_id_short(uint64_t id, char out[9])
{
    snprintf(out, 9, "%08x", (unsigned)(id >> 32));
}

/* ---- addresses ---- */

static int s_host_char(int c) { return isalnum(c) || c == '-' || c == '.' || c == '_'; }
static int s_host6_char(int c) { return isxdigit(c) || c == ':' || c == '.'; }

/* Splits s into host and port; *rest points after the port digits. */
static int s_parse_hostport(const char *s, char *host, size_t hostlen, int *port,
                            int allow_port0, const char **rest, char *err, size_t errlen)
{
    const char *p = s, *h0, *h1;
    if (!*s) { net_errf(err, errlen, "empty address (expected HOST:PORT)"); return -1; }
    if (*p == '[') {
        h0 = ++p;
        while (*p && *p != ']') {
            if (!s_host6_char((unsigned char)*p)) { net_errf(err, errlen, "%s: bad IPv6 host", s); return -1; }
            p++;
        }
        if (*p != ']') { net_errf(err, errlen, "%s: missing ] after IPv6 host", s); return -1; }
        h1 = p++;
    } else {
        h0 = p;
        if (*p == '*') p++;
        else while (*p && *p != ':' && *p != '/') {
            if (!s_host_char((unsigned char)*p)) { net_errf(err, errlen, "%s: bad character in host", s); return -1; }
            p++;
        }
        h1 = p;
    }
    if (h1 == h0) { net_errf(err, errlen, "%s: missing host (expected HOST:PORT)", s); return -1; }
    if ((size_t)(h1 - h0) >= hostlen) { net_errf(err, errlen, "%s: host too long", s); return -1; }
    if (*p != ':') { net_errf(err, errlen, "%s: missing :PORT (expected HOST:PORT)", s); return -1; }
    p++;
    if (!isdigit((unsigned char)*p)) { net_errf(err, errlen, "%s: port is not a number", s); return -1; }
    long v = 0;
    while (isdigit((unsigned char)*p)) {
        if (v < 100000) v = v * 10 + (*p - '0');
        p++;
    }
    if (v > 65535 || (v == 0 && !allow_port0)) { net_errf(err, errlen, "%s: port out of range", s); return -1; }
    memcpy(host, h0, (size_t)(h1 - h0));
    host[h1 - h0] = '\0';
    *port = (int)v;
    *rest = p;
    return 0;
}

int hostport_parse(const char *s, char *host, size_t hostlen, int *port,
                   int allow_port0, char *err, size_t errlen)
{
    const char *rest;
    if (s_parse_hostport(s, host, hostlen, port, allow_port0, &rest, err, errlen)) return -1;
    if (*rest) {
        net_errf(err, errlen, "%s: unexpected text after the port (expected HOST:PORT)", s);
        return -1;
    }
    return 0;
}

int addr_parse(const char *s, char *host, size_t hostlen, int *port,
               uint8_t pubkey[32], char *err, size_t errlen)
{
    const char *rest;
    if (s_parse_hostport(s, host, hostlen, port, 0, &rest, err, errlen)) return -1;
    if (*rest == '\0') {
        net_errf(err, errlen, "%s: missing /KEY part (expected HOST:PORT/KEY)", s);
        return -1;
    }
    if (*rest != '/') { net_errf(err, errlen, "%s: port is not a number", s); return -1; }
    if (key_from_z85(pubkey, rest + 1) != 0) {
        net_errf(err, errlen, "%s: key is not 40 Z85 characters", s);
        return -1;
    }
    return 0;
}

int hostport_format(char *out, size_t outlen, const char *host, int port)
{
    int v6 = strchr(host, ':') != NULL;
    int n = snprintf(out, outlen, v6 ? "[%s]:%d" : "%s:%d", host, port);
    return n < 0 || (size_t)n >= outlen ? -1 : n;
}

int addr_format(char *out, size_t outlen, const char *host, int port,
                const uint8_t pubkey[32])
{
    char z[KEY_Z85_LEN + 1];
    key_to_z85(z, pubkey);
    int n = hostport_format(out, outlen, host, port);
    if (n < 0) return -1;
    int m = snprintf(out + n, outlen - (size_t)n, "/%s", z);
    return m < 0 || (size_t)(n + m) >= outlen ? -1 : n + m;
}
