// fuzz-sources: node/engine/tokenizer.c
/* fuzz_tokenizer.c: libFuzzer target for llm.c's tokenizer file
 * (tokenizer_parse).
 *
 * An accepted file's pieces must be 1..255 bytes, and encoding a piece's
 * text must give one token of the same bytes (the longest match).  A refusal
 * leaves a one-line reason. */
#include "node/engine/tokenizer.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[300] = "";
    tokenizer_t *t = tokenizer_parse(data, size, "fuzz.bin", err, sizeof err);
    if (!t) {
        if (!err[0] || strchr(err, '\n')) abort();
        return 0;
    }
    int V = tokenizer_size(t);
    if (tokenizer_eot(t) >= V) abort();
    for (int i = 0; i < V && i < 64; i++) {
        size_t n;
        const uint8_t *p = tokenizer_piece(t, i, &n);
        if (n < 1 || n > 255) abort();
        if (memchr(p, 0, n)) continue;   /* a piece with a NUL is no C string to encode */
        char text[256];
        memcpy(text, p, n);
        text[n] = '\0';
        int ids[256], k = tokenizer_encode(t, text, ids, 256);
        size_t m = 0;
        const uint8_t *q = k == 1 ? tokenizer_piece(t, ids[0], &m) : NULL;
        if (k != 1 || m != n || memcmp(q, p, n) != 0) abort();   /* the longest match of a piece's text is as long */
    }
    tokenizer_destroy(&t);
    return 0;
}
