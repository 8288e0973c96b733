/* tokenizer.h: llm.c's tokenizer file, to turn a gpt's token ids into text.
 *
 * Layout, little-endian: bytes 0..1023 256 uint32: [0] magic 20240328,
 * [1] version (1, or 2 with [3] the end-of-text token), [2] vocabulary size
 * V; then V entries, each a length byte n (1..255) and n bytes.  The file
 * holds exactly that.
 */
#ifndef BRIGADE_TOKENIZER_H
#define BRIGADE_TOKENIZER_H
#include <stddef.h>
#include <stdint.h>

#define TOKENIZER_MAGIC 20240328u

typedef struct tokenizer tokenizer_t;

/* Reads a tokenizer from buf (len bytes; name for messages).  NULL with a
 * one-line reason naming name (cut short, bad magic or version, an entry of
 * length 0, bytes after the last entry). */
tokenizer_t *tokenizer_parse(const uint8_t *buf, size_t len, const char *name, char *err, size_t errlen);
/* tokenizer_parse on the file at path. */
tokenizer_t *tokenizer_load(const char *path, char *err, size_t errlen);
void tokenizer_destroy(tokenizer_t **self_p);
/* Vocabulary size. */
int tokenizer_size(const tokenizer_t *self);
/* The end-of-text token (version 2), or -1. */
int tokenizer_eot(const tokenizer_t *self);
/* The bytes of token id (0 <= id < tokenizer_size), *len of them. */
const uint8_t *tokenizer_piece(const tokenizer_t *self, int id, size_t *len);
/* Encodes text greedily, the longest token that matches at each place (an
 * approximation of the BPE that made the file; a byte no token starts with
 * is skipped), into out (at most max ids).  Returns how many. */
int tokenizer_encode(const tokenizer_t *self, const char *text, int *out, int max);
#endif
