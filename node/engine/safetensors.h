/* safetensors.h: the safetensors container, read from memory and written.
 *
 * Layout: bytes 0..7 u64 little-endian N, the header's length; bytes 8..8+N
 * a JSON object (UTF-8, padded with spaces): for each tensor NAME,
 *   "NAME": {"dtype": "F32"|"F16"|"BF16"|..., "shape": [d0, ...],
 *            "data_offsets": [BEGIN, END]}
 * and optionally "__metadata__": {"KEY": "VALUE", ...} (strings only);
 * bytes 8+N.. the data: tensor NAME is bytes [BEGIN, END) of it, row-major,
 * little-endian.
 */
#ifndef BRIGADE_SAFETENSORS_H
#define BRIGADE_SAFETENSORS_H
#include <stddef.h>
#include <stdint.h>

#define ST_NAME_MAX 160        /* bytes of a tensor name, NUL included */
#define ST_DIMS_MAX 8          /* dimensions of a tensor */
#define ST_HEADER_MAX (100u << 20)   /* largest header accepted */

enum { ST_OTHER = 0, ST_F32 = 1, ST_F16 = 2, ST_BF16 = 3 };

typedef struct {
    char name[ST_NAME_MAX];    /* as in the file */
    int dtype;                 /* ST_F32, ST_F16, ST_BF16, or ST_OTHER (not readable here) */
    int ndim;                  /* dimensions */
    uint64_t shape[ST_DIMS_MAX];
    uint64_t begin, end;       /* byte range in the data */
} st_tensor_t;

typedef struct {
    st_tensor_t *t;            /* the tensors, in the header's order */
    int n;
    char (*key)[64];           /* __metadata__ entries */
    char (*val)[256];
    int nmeta;
    const uint8_t *data;       /* the data part (inside the caller's buffer) */
    uint64_t datalen;
} st_file_t;

/* Parses the safetensors file in buf (len bytes; name for messages): its
 * header, every tensor's dtype, shape and range (inside the data, its size
 * that of the shape for the dtypes read here).  0, or -1 with a one-line
 * reason naming name (cut short, bad header length, malformed JSON, a
 * range outside the data or of the wrong size).  st_free after either. */
int st_parse(st_file_t *f, const uint8_t *buf, size_t len, const char *name, char *err, size_t errlen);
void st_free(st_file_t *f);
/* The tensor named name, or "transformer." name; NULL when there is none. */
const st_tensor_t *st_find(const st_file_t *f, const char *name);
/* The value of metadata key, or NULL. */
const char *st_meta(const st_file_t *f, const char *key);
/* Elements of t. */
uint64_t st_numel(const st_tensor_t *t);
/* Element i of t (a readable dtype) as a float. */
float st_get(const st_file_t *f, const st_tensor_t *t, uint64_t i);

/* Writes the header of a file of n F32 tensors (names[i], ndims[i]
 * dimensions shapes[i]) laid out in that order, with metadata pairs
 * meta_kv[2j], meta_kv[2j+1] (nmeta pairs; every name and value printable
 * ASCII without '"' or '\\', asserted): the 8-byte length and the JSON,
 * padded to a multiple of 8.  Returns a malloc'd buffer of *len bytes, or
 * NULL when out of memory. */
uint8_t *st_header_write(int n, const char *const *names, const int *ndims, const uint64_t (*shapes)[ST_DIMS_MAX],
                         int nmeta, const char *const *meta_kv, size_t *len);
#endif
