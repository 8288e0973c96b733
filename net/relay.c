/* relay.c: sealed envelopes for relayed messages (relay.h). */
#include "net/relay.h"
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int relay_key(uint8_t key[32], const uint8_t pub[32], const uint8_t sec[32])
{
    if (sodium_init() < 0) return -1;
    return crypto_box_beforenm(key, pub, sec) == 0 ? 0 : -1;
}

size_t relay_sealed_len(const size_t *lens, int nframes)
{
    size_t n = RELAY_OVERHEAD;
    for (int i = 0; i < nframes; i++) n += 4 + lens[i];
    return n;
}

long relay_seal(uint8_t *out, size_t cap, const uint8_t key[32], uint64_t seq, const wire_hdr_t *h,
                const void *const *frames, const size_t *lens, int nframes)
{
    if (nframes < 0 || nframes > TRANSPORT_MAX_FRAMES) return -1;
    size_t total = relay_sealed_len(lens, nframes), plen = total - RELAY_NONCE - RELAY_TAG;
    if (cap < total) return -1;
    uint8_t *plain = malloc(plen);
    if (!plain) return -1;
    wbuf_t w;
    wbuf_init_fixed(&w, plain, plen);
    wbuf_put_u8(&w, RELAY_VERSION);
    wbuf_put_u8(&w, (uint8_t)nframes);
    wbuf_put_u64(&w, seq);
    uint8_t hdr[WIRE_HDR_LEN];
    wire_hdr_encode(hdr, h);
    wbuf_put_raw(&w, hdr, WIRE_HDR_LEN);
    for (int i = 0; i < nframes; i++) wbuf_put_bytes(&w, frames[i], lens[i]);
    long rc = -1;
    if (!wbuf_error(&w) && w.len == plen) {
        randombytes_buf(out, RELAY_NONCE);
        if (crypto_box_easy_afternm(out + RELAY_NONCE, plain, plen, out, key) == 0) rc = (long)total;
    }
    sodium_memzero(plain, plen);
    free(plain);
    return rc;
}

int relay_parse(relay_msg_t *out, const uint8_t *plain, size_t len, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    rbuf_t r;
    rbuf_init(&r, plain, len);
    uint8_t version = rbuf_get_u8(&r), nf = rbuf_get_u8(&r);
    out->seq = rbuf_get_u64(&r);
    uint8_t hdr[WIRE_HDR_LEN];
    rbuf_get_raw(&r, hdr, WIRE_HDR_LEN);
    if (rbuf_error(&r)) { net_errf(err, errlen, "relayed message truncated"); return -1; }
    if (version != RELAY_VERSION) { net_errf(err, errlen, "relayed message of another version"); return -1; }
    if (nf > TRANSPORT_MAX_FRAMES) { net_errf(err, errlen, "relayed message with too many frames"); return -1; }
    char herr[96];
    if (wire_hdr_decode(&out->hdr, hdr, WIRE_HDR_LEN, herr, sizeof herr) < 0) {
        net_errf(err, errlen, "relayed message with a bad header");
        return -1;
    }
    for (int i = 0; i < nf; i++) {
        size_t n = 0;
        const uint8_t *p = rbuf_get_bytes(&r, len, &n);
        if (!p) { net_errf(err, errlen, "relayed frame truncated"); return -1; }
        out->frame[i] = p;
        out->len[i] = n;
    }
    if (rbuf_remaining(&r) != 0) { net_errf(err, errlen, "bytes after the relayed frames"); return -1; }
    out->nframes = nf;
    return 0;
}

int relay_open(relay_msg_t *out, uint8_t *plain, const uint8_t *in, size_t len, const uint8_t key[32],
               char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    if (len < RELAY_NONCE + RELAY_TAG + RELAY_PLAIN_FIXED) { net_errf(err, errlen, "relayed envelope too short"); return -1; }
    size_t plen = len - RELAY_NONCE - RELAY_TAG;
    if (crypto_box_open_easy_afternm(plain, in + RELAY_NONCE, len - RELAY_NONCE, in, key) != 0) {
        net_errf(err, errlen, "relayed envelope does not open (altered, or not sealed for us by its sender)");
        return -1;
    }
    return relay_parse(out, plain, plen, err, errlen);
}
