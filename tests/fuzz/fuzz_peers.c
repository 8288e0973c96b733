// fuzz-sources: net/wire.c net/keys.c
/* fuzz_peers.c: libFuzzer target for the gossip peer table decoder.
 *
 * peers_decode() must never read past its input, must refuse or return
 * records that satisfy everything it promises (printable address, stage >=
 * -1, finite non-negative rate and RTT, id derived from the key), and a
 * decoded table must encode back to exactly the bytes it was read from. */
#include "net/keys.h"
#include "net/wire.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define S_MAX 64

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static peer_info_t recs[S_MAX];
    uint8_t *copy = malloc(size ? size : 1);
    if (size) memcpy(copy, data, size);
    rbuf_t r;
    rbuf_init(&r, copy, size);
    int n = -1;
    char err[256];
    err[0] = '\0';
    if (peers_decode(&r, recs, S_MAX, &n, err, sizeof err) == 0) {
        if (n < 0 || n > S_MAX || rbuf_error(&r)) abort();
        for (int i = 0; i < n; i++) {
            const peer_info_t *p = &recs[i];
            size_t len = strnlen(p->addr, sizeof p->addr);
            if (len == 0 || len >= sizeof p->addr) abort();
            for (size_t k = 0; k < len; k++)
                if ((unsigned char)p->addr[k] <= 0x20 || (unsigned char)p->addr[k] >= 0x7f) abort();
            if (p->stage < -1 || !isfinite(p->rate) || p->rate < 0 || !isfinite(p->rtt_ms) || p->rtt_ms < 0)
                abort();
            if (p->id != node_id_from_pubkey(p->pubkey)) abort();
        }
        wbuf_t w;
        wbuf_init(&w, 1 << 20);
        peers_encode(&w, recs, n);
        if (wbuf_error(&w) || w.len != r.pos || memcmp(w.data, copy, w.len) != 0) abort();
        wbuf_free(&w);
    } else {
        if (n != 0 || err[0] == '\0') abort();
    }
    free(copy);
    return 0;
}
