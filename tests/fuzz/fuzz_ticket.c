// fuzz-sources: net/ticket.c net/keys.c net/wire.c
/* fuzz_ticket.c: libFuzzer target for admission tickets and signed
 * announcements.
 *
 * The input is tried as a binary ticket, as a text ticket and as an
 * announcement.  The owner key and the admitted peer key are the fixed ones
 * tests/fuzz/gen_corpus.c uses, so the seed tickets verify and the fuzzer
 * mutates valid ones.  A ticket that verifies must be exactly one the owner
 * signed: with the seed corpus, that is only an unmodified seed (checked by
 * re-encoding), and a verified announcement must match its bytes again. */
#include "net/keys.h"
#include "net/ticket.h"

#include <sodium.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static owner_keys_t s_owner;
static uint8_t s_peer[32];

static void s_keys(void)
{
    static int done;
    if (done) return;
    if (sodium_init() < 0) abort();
    uint8_t seed[32];
    for (int i = 0; i < 32; i++) seed[i] = (uint8_t)(i + 1);
    crypto_sign_seed_keypair(s_owner.pub, s_owner.sec, seed);
    uint8_t sec[32];
    for (int i = 0; i < 32; i++) sec[i] = (uint8_t)(100 + i);
    crypto_scalarmult_base(s_peer, sec);
    done = 1;
}

static void s_ticket(const ticket_t *t)
{
    char err[256];
    err[0] = '\0';
    if (ticket_verify(t, s_owner.pub, s_peer, 1000, err, sizeof err) == 0) {
        /* accepted: the signature must really be the owner's over these bytes */
        uint8_t buf[TICKET_LEN];
        ticket_encode(buf, t);
        if (crypto_sign_verify_detached(t->sig, buf, 80, s_owner.pub) != 0) abort();
        if (memcmp(t->peer, s_peer, 32) != 0 || (t->expires != 0 && t->expires <= 1000)) abort();
    } else if (err[0] == '\0') {
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    s_keys();
    char err[256];
    ticket_t t;
    uint8_t *copy = malloc(size ? size : 1);
    if (size) memcpy(copy, data, size);
    if (ticket_decode(&t, copy, size, err, sizeof err) == 0) {
        uint8_t again[TICKET_LEN];
        ticket_encode(again, &t);
        if (memcmp(again, copy, TICKET_LEN) != 0) abort();
        s_ticket(&t);
    }
    char *text = malloc(size + 1);
    memcpy(text, data, size);
    text[size] = '\0';
    if (ticket_decode_text(&t, text, err, sizeof err) == 0) {
        char again[TICKET_TEXT_LEN + 1];
        ticket_encode_text(again, &t);
        if (!strstr(text, again)) abort();
        s_ticket(&t);
    }
    free(text);
    announce_t a;
    if (announce_verify(&a, copy, size, err, sizeof err) == 0) {
        uint8_t again[ANNOUNCE_LEN];
        announce_encode(again, &a);
        if (memcmp(again, copy, ANNOUNCE_LEN) != 0) abort();
        if (a.id != node_id_from_pubkey(a.pubkey) || a.stage < -1 || a.addr[0] == '\0') abort();
    }
    free(copy);
    return 0;
}
