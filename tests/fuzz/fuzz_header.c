// fuzz-sources: net/wire.c net/keys.c
/* fuzz_header.c: libFuzzer target for the message header decoder and the
 * bounded reader.
 *
 * The whole input and its first WIRE_HDR_LEN bytes go through
 * wire_hdr_decode(); a header that decodes must encode back to the same
 * bytes.  Then the input drives rbuf_t: byte k chooses the next read
 * (u8/u16/u32/u64/f32/f64/raw/bytes/str with sizes from the input) over the
 * rest of the input, checking that the reader never points outside its input,
 * that errors are sticky and that strings come back NUL-terminated and short
 * enough. */
#include "net/wire.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void s_header(const uint8_t *d, size_t n)
{
    wire_hdr_t h;
    char err[256];
    err[0] = '\0';
    if (wire_hdr_decode(&h, d, n, err, sizeof err) == 0) {
        uint8_t again[WIRE_HDR_LEN];
        if (n != WIRE_HDR_LEN || h.magic != WIRE_MAGIC || h.version != WIRE_VERSION
            || h.type < 1 || h.type >= WIRE_TYPE_END)
            abort();
        wire_hdr_encode(again, &h);
        if (memcmp(again, d, WIRE_HDR_LEN) != 0)
            abort();
        if (wire_type_name(h.type)[0] == '?')
            abort();
    } else if (err[0] == '\0') {
        abort();                                   /* a refusal always says why */
    }
}

static void s_reader(const uint8_t *ops, size_t nops, const uint8_t *d, size_t n)
{
    rbuf_t r;
    rbuf_init(&r, d, n);
    int failed = 0;
    char str[300];
    uint8_t raw[300];
    for (size_t k = 0; k < nops; k++) {
        uint8_t op = ops[k];
        size_t arg = op >> 4;
        size_t before = r.pos;
        switch (op & 15) {
        case 0: (void)rbuf_get_u8(&r); break;
        case 1: (void)rbuf_get_u16(&r); break;
        case 2: (void)rbuf_get_u32(&r); break;
        case 3: (void)rbuf_get_u64(&r); break;
        case 4: (void)rbuf_get_f32(&r); break;
        case 5: (void)rbuf_get_f64(&r); break;
        case 6: rbuf_get_raw(&r, raw, arg * 17); break;
        case 7: {
            size_t len;
            const uint8_t *p = rbuf_get_bytes(&r, arg * 19, &len);
            if (p && (p < d || p + len > d + n || len > arg * 19)) abort();
            if (!p && len != 0) abort();
            break;
        }
        case 8: {
            size_t cap = 1 + arg * 18;
            rbuf_get_str(&r, str, cap);
            size_t len = strnlen(str, cap);
            if (len >= cap) abort();
            break;
        }
        default: break;
        }
        if (r.pos > r.len) abort();
        if (failed && (!rbuf_error(&r) || r.pos != before)) abort();   /* sticky, no progress */
        if (rbuf_error(&r)) {
            failed = 1;
            if (rbuf_remaining(&r) != 0) abort();
        } else if (rbuf_remaining(&r) != r.len - r.pos) {
            abort();
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *copy = calloc(size ? size : 1, 1);    /* exact size: ASan sees overreads */
    if (size) memcpy(copy, data, size);
    s_header(copy, size);
    if (size > WIRE_HDR_LEN) s_header(copy, WIRE_HDR_LEN);
    /* first byte: how many op bytes follow; the rest is the reader's input */
    if (size >= 1) {
        size_t nops = copy[0];
        if (nops > size - 1) nops = size - 1;
        size_t rest = size - 1 - nops;
        uint8_t *in = malloc(rest ? rest : 1);
        if (rest) memcpy(in, copy + 1 + nops, rest);
        s_reader(copy + 1, nops, in, rest);
        free(in);
    }
    free(copy);
    return 0;
}
