/* data.h: training data sources for brigade.
 *   synthetic      deterministic, learnable token sequences or images, no files
 *   text:PATH      the bytes of a file, or of every regular file under a folder
 *   tokens:PATH    llm.c token shards: a file, a folder or a glob (shards.h)
 *   nanogpt:DIR    nanoGPT's train.bin and val.bin (uint16 tokens)
 *   fmnist[:DIR]   Fashion-MNIST gzip'd IDX files (default /usr/share/datasets/fashion-mnist)
 * A data set is split into a training part and a held-out validation part.
 * Batches are drawn from a shard (shard_index of num_shards) of the training
 * part by a deterministic cursor, so a run is reproducible from its seed and a
 * checkpoint can store the cursor.
 */
#ifndef BRIGADE_DATA_H
#define BRIGADE_DATA_H
#include <stddef.h>
#include <stdint.h>

typedef enum { DATA_TOKENS = 1, DATA_IMAGES = 2 } data_kind_t;

typedef struct data data_t;   /* opaque: the loaded data set */

/* One batch.  For DATA_TOKENS: tokens (B,T) and targets (B,T) (targets are
 * tokens shifted left by one, the next byte).  For DATA_IMAGES: x (B,784)
 * pixel values in [0,1] and targets (B) class labels in [0,10).  The caller
 * owns the arrays (sized with data_batch_alloc) and reuses them. */
typedef struct {
    int B, T;          /* batch size; positions per sample (1 for images) */
    int *tokens;       /* (B,T) input tokens, DATA_TOKENS only */
    float *x;          /* (B,D) input features, DATA_IMAGES only */
    int *targets;      /* (B,T) next tokens, or (B) labels */
} batch_t;

/* Opens the data set named by spec ("synthetic", "text:PATH", "fmnist",
 * "fmnist:DIR").  kind says what the model consumes: DATA_TOKENS for a gpt
 * (vocab 256, contexts of T), DATA_IMAGES for the mlp.  seed fixes synthetic
 * data and the shuffling.  On failure returns NULL and writes a one-line
 * reason naming the file or spec into err (errlen bytes). */
data_t *data_open(const char *spec, data_kind_t kind, int T, uint64_t seed,
                  char *err, size_t errlen);
void data_close(data_t **self_p);

data_kind_t data_kind(const data_t *self);
/* Input features per sample for DATA_IMAGES (784); 0 for tokens. */
int data_dim(const data_t *self);
/* Number of classes (10) for images; for tokens the vocabulary the data
 * needs: 256 for bytes, the largest token id + 1 for shards. */
int data_classes(const data_t *self);
/* Tokens: the largest token id; for shards *file and *offset (may be NULL)
 * get the file and byte offset of its first occurrence (NULL and 0 for
 * bytes). */
uint32_t data_token_max(const data_t *self, const char **file, uint64_t *offset);

/* Allocates the arrays of a batch of B samples for this data set; free with
 * data_batch_free.  Returns 0, or -1 when out of memory. */
int data_batch_alloc(const data_t *self, batch_t *b, int B);
void data_batch_free(batch_t *b);

/* Fills b with the next training batch of shard `shard` of `nshards`, at the
 * position *cursor (an opaque counter that starts at 0), and advances *cursor.
 * Deterministic in (seed, shard, nshards, cursor). */
void data_next_train(data_t *self, batch_t *b, int shard, int nshards, uint64_t *cursor);

/* Number of validation batches of size B available (at least 1). */
int data_val_batches(const data_t *self, int B);
/* Fills b with validation batch i (0 <= i < data_val_batches) of size b->B. */
void data_val_batch(data_t *self, batch_t *b, int i);
/* Tokens: the length n of the held-out part t[0..n). */
size_t data_val_tokens(const data_t *self);
/* Tokens: fills sample s of b with inputs t[at..at+T) and targets
 * t[at+1..at+T+1) of the held-out part (at + T < data_val_tokens). */
void data_val_window(data_t *self, batch_t *b, int s, size_t at);
#endif
