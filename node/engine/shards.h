/* shards.h: token shards on disk, read in place (mmap), never loaded whole.
 *
 * llm.c's shard (`--data tokens:PATH`), little-endian:
 *   bytes 0..1023   256 int32: [0] magic, [1] version, [2] token count n,
 *                   the rest unused.  Magic 20240520 with version 1 holds
 *                   uint16 tokens; magic 20240801 with version 7 uint32.
 *   bytes 1024..    the n tokens; the file is exactly 1024 + n x width bytes.
 * nanoGPT's `train.bin` / `val.bin` (`--data nanogpt:DIR`): uint16 tokens,
 * no header.
 *
 * PATH is a file, a folder (its files ending in ".bin", not recursively) or
 * a glob; the shards are taken in strcmp order of their paths.  The
 * held-out part is the concatenation of the shards whose file name contains
 * "val"; when none does, it is the last 5% of the tokens of all shards
 * together.  The training part is the rest, concatenated.  Windows may cross
 * from one shard into the next.
 */
#ifndef BRIGADE_SHARDS_H
#define BRIGADE_SHARDS_H
#include <stddef.h>
#include <stdint.h>

#define SHARD_HEADER_BYTES 1024
#define SHARD_MAGIC_U16 20240520u   /* version 1: uint16 tokens */
#define SHARD_MAGIC_U32 20240801u   /* version 7: uint32 tokens */

enum { SHARDS_TRAIN = 0, SHARDS_VAL = 1 };

typedef struct shards shards_t;

/* Checks an llm.c shard of len bytes whose first bytes are buf (at least
 * min(len, SHARD_HEADER_BYTES) of them): the magic and version, and that
 * len equals 1024 + count x width.  Fills *width (2 or 4) and *count.
 * 0, or -1 with a one-line reason naming `name` in err. */
int shards_check_header(const uint8_t *buf, size_t len, const char *name, int *width, uint64_t *count,
                        char *err, size_t errlen);
/* Opens spec: "tokens:PATH" or "nanogpt:DIR" (see above), maps every shard,
 * checks each header and size, and reads every token once to find the
 * largest id (shards_max_id).  NULL with a one-line reason naming the file
 * (missing, no shards, bad magic, version or size, no training or no
 * held-out tokens). */
shards_t *shards_open(const char *spec, char *err, size_t errlen);
void shards_close(shards_t **self_p);
/* Tokens in part SHARDS_TRAIN or SHARDS_VAL. */
size_t shards_len(const shards_t *self, int part);
/* Copies tokens [at, at + n) of part into out (at + n <= shards_len). */
void shards_read(const shards_t *self, int part, size_t at, size_t n, int *out);
/* The largest token id of all shards; *file and *offset (may be NULL) get
 * the file and the byte offset in it of its first occurrence. */
uint32_t shards_max_id(const shards_t *self, const char **file, uint64_t *offset);
#endif
