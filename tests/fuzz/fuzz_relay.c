// fuzz-sources: net/relay.c net/wire.c net/keys.c
/* fuzz_relay.c: libFuzzer target for relayed envelopes.
 *
 * The input is taken both as a plaintext (relay_parse: every frame it
 * returns lies inside the input, the inner header decoded) and as an
 * envelope (relay_open with a fixed key: random bytes never open, and a
 * parse that fails says why).  A sealed copy of the input as one frame
 * must open back to exactly it, and the same envelope with any one byte
 * flipped must not open. */
#include "net/relay.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static uint8_t key[32] = { 7, 1, 2, 3 };
    uint8_t *copy = malloc(size ? size : 1);
    if (size) memcpy(copy, data, size);
    relay_msg_t m;
    char err[160];
    err[0] = '\0';
    if (relay_parse(&m, copy, size, err, sizeof err) == 0) {
        if (m.nframes < 0 || m.nframes > TRANSPORT_MAX_FRAMES) abort();
        for (int i = 0; i < m.nframes; i++)
            if (m.frame[i] < copy || m.frame[i] + m.len[i] > copy + size) abort();
    } else if (err[0] == '\0') {
        abort();
    }
    uint8_t *plain = malloc(size ? size : 1);
    err[0] = '\0';
    if (relay_open(&m, plain, copy, size, key, err, sizeof err) == 0) abort();   /* forging needs the key */
    if (err[0] == '\0') abort();
    /* round trip of the input as one frame, and one flipped byte refused */
    wire_hdr_t h;
    wire_hdr_init(&h, WIRE_ACT);
    const void *f[1] = { copy };
    size_t l[1] = { size };
    size_t cap = relay_sealed_len(l, 1);
    uint8_t *env = malloc(cap), *back = malloc(cap);
    long n = relay_seal(env, cap, key, 5, &h, f, l, 1);
    if (n != (long)cap) abort();
    if (relay_open(&m, back, env, (size_t)n, key, err, sizeof err) != 0) abort();
    if (m.seq != 5 || m.nframes != 1 || m.len[0] != size || (size && memcmp(m.frame[0], copy, size) != 0)) abort();
    env[(size * 31 + 7) % (size_t)n] ^= 0x40;
    if (relay_open(&m, back, env, (size_t)n, key, err, sizeof err) == 0) abort();
    free(env);
    free(back);
    free(plain);
    free(copy);
    return 0;
}
