/* keys.h: node identity (a Curve25519 keypair for CurveZMQ), node ids and
 * node addresses.
 *
 * On disk, a key directory holds:
 *   DIR/node.key  the secret key in Z85 (40 characters + newline), mode 0600
 *   DIR/node.pub  the public key in Z85 (40 characters + newline)
 *
 * A node's address is HOST:PORT/KEY, KEY its public key in Z85; IPv6 hosts
 * are written in brackets: [::1]:7000/KEY. */
#ifndef BRIGADE_NET_KEYS_H
#define BRIGADE_NET_KEYS_H
#include <stddef.h>
#include <stdint.h>

#define KEY_Z85_LEN 40      /* Z85 text of a 32-byte key */
#define ADDR_HOST_MAX 256   /* host buffer size that fits any valid host */
#define ADDR_TEXT_MAX 320   /* buffer size that fits any HOST:PORT/KEY */

typedef struct {
    uint8_t pub[32];                /* Curve25519 public key */
    uint8_t sec[32];                /* Curve25519 secret key */
    char pub_z85[KEY_Z85_LEN + 1];  /* pub in Z85, NUL-terminated */
    char sec_z85[KEY_Z85_LEN + 1];  /* sec in Z85, NUL-terminated */
} keypair_t;

/* Initialises libsodium (any number of times, from any thread).  0, or -1
 * with a reason in err. */
int keys_sodium(char *err, size_t errlen);

/* Makes a fresh random keypair.  Returns 0, or -1 with a reason in err
 * (libsodium could not initialise). */
int keypair_generate(keypair_t *kp, char *err, size_t errlen);

/* The keypair derived from a 32-byte seed (deterministic: the simulator's
 * virtual nodes).  Returns 0, or -1 with a reason in err. */
int keypair_from_seed(keypair_t *kp, const uint8_t seed[32], char *err, size_t errlen);

/* Writes dir/node.key (mode 0600, refused if it already exists) and
 * dir/node.pub, creating dir (mode 0700) when missing.  Returns 0, or -1
 * with a reason naming the file in err. */
int keypair_save(const keypair_t *kp, const char *dir, char *err, size_t errlen);

/* Reads dir/node.key, derives the public key, and checks dir/node.pub
 * against it when present.  Refuses a secret file readable or writable by
 * group or others ("... run: chmod 600 FILE").  Returns 0, or -1 with a
 * one-line reason in err; kp is wiped on failure. */
int keypair_load(keypair_t *kp, const char *dir, char *err, size_t errlen);

/* Writes text to path with mode (a new file only when excl).  0, or -1
 * with a reason in err.  Shared by every key file. */
int keyfile_write(const char *path, const char *text, unsigned mode, int excl,
                  char *err, size_t errlen);

/* Reads the first line of a key file into out (outlen bytes, trailing
 * space removed); secret refuses a file readable or writable by group or
 * others.  Returns 0, 1 when the file is missing, -1 with a reason. */
int keyfile_read(const char *path, char *out, size_t outlen, int secret, char *err, size_t errlen);

/* Overwrites the whole keypair with zeros (sodium_memzero). */
void keypair_wipe(keypair_t *kp);

/* A node's id: the first 8 bytes (LE) of BLAKE2b-256 of its public key. */
uint64_t node_id_from_pubkey(const uint8_t pub[32]);

/* The 8 hex digits of the top 32 bits of id, for logs and metrics. */
void node_id_short(uint64_t id, char out[9]);

/* pub in Z85 into out (KEY_Z85_LEN + 1 bytes). */
void key_to_z85(char out[KEY_Z85_LEN + 1], const uint8_t pub[32]);

/* Parses a 40-character Z85 key.  Returns 0, or -1 (not 40 Z85 characters). */
int key_from_z85(uint8_t pub[32], const char *z85);

/* Parses HOST:PORT/KEY.  host gets the host without brackets (hostlen bytes
 * incl. NUL), port 1..65535, pubkey the decoded key.  Returns 0, or -1 with
 * a one-line reason in err of the form "<s>: missing /KEY part (expected
 * HOST:PORT/KEY)", "<s>: port out of range", "<s>: key is not 40 Z85
 * characters", ... ; the caller prefixes the option name. */
int addr_parse(const char *s, char *host, size_t hostlen, int *port,
               uint8_t pubkey[32], char *err, size_t errlen);

/* Parses a plain HOST:PORT (for --listen, --advertise).  Port 0 is accepted
 * only when allow_port0 (listen on a free port).  Same errors as addr_parse. */
int hostport_parse(const char *s, char *host, size_t hostlen, int *port,
                   int allow_port0, char *err, size_t errlen);

/* Writes "HOST:PORT/KEY" (brackets around an IPv6 host) to out.  Returns
 * the length, or -1 when it does not fit in outlen. */
int addr_format(char *out, size_t outlen, const char *host, int port,
                const uint8_t pubkey[32]);

/* Writes "HOST:PORT" (brackets around an IPv6 host).  Same return. */
int hostport_format(char *out, size_t outlen, const char *host, int port);

#endif
