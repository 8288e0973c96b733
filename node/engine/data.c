/* data.c: the data sources of data.h.
 *
 * synthetic, tokens: a byte stream drawn from a fixed random second-order
 *   Markov chain over a 16-letter alphabet (" etaoinshrdlucm\n").  Every
 *   context of the two previous letters has 3 distinct successors with
 *   probabilities 0.7, 0.2 and 0.1, chosen from the seed; the likely one
 *   depends on the previous letter only, the other two on both.  The entropy
 *   rate, so the loss floor a perfect model reaches, is
 *   H(0.7, 0.2, 0.1) = 0.80 nats per byte.  Knowing only the previous letter
 *   gives about 1.06, only the letter frequencies about 2.3, uniform bytes
 *   ln 256 = 5.55: gpt-tiny gets near 1.1 within 100 updates of 8 x 64.
 *   The stream is generated once at open (1 MiB for training, then 64 KiB
 *   for validation, more for long contexts) and then used like text.
 * synthetic, images: 10 classes of 784 pixels: a fixed random prototype per
 *   class plus gaussian noise (sigma 0.5), clipped to [0,1].  The prototypes
 *   share a random base (30% of pixels lit) and differ from it in 60 random
 *   pixels each (+-0.3).  60000 training and 10000 validation samples, each
 *   generated on demand from (seed, split, index); label = index mod 10.
 *   Nearest class mean gets about 98.5% of the validation samples right, so
 *   an mlp can reach the high 90s, and it is not trivially separable.
 * text:PATH, tokens: the bytes of PATH if it is a file (followed if a
 *   symlink), read up to the total cap.  If PATH is a folder: every regular
 *   file under it, recursively, in strcmp order of the path, concatenated
 *   without separators.  Left out: symbolic links (fortune folders hold
 *   `x.u8 -> x`), names ending in ".dat" (strfile's binary indexes), names
 *   starting with '.', files over 64 MiB; reading stops at the first file
 *   that would take the total past 256 MiB.  The last 5% of the bytes (at
 *   least T+1) are the validation part; the input needs at least 2(T+1) bytes.
 * tokens:PATH, nanogpt:DIR, tokens: token shards (shards.h), read in place;
 *   the held-out part is shards.h's.  The vocabulary data_classes reports is
 *   the largest token id + 1 (data_token_max names where it is).
 * fmnist[:DIR], images: the four gzip'd IDX files of Fashion-MNIST; the
 *   t10k set is the validation part.  Pixels are kept as bytes and scaled to
 *   [0,1] when a batch is filled.
 *
 * Training batches.  Tokens: sample k of shard s of n is the window of T+1
 *   bytes starting at a pseudo-random offset o with o = s (mod n), drawn from
 *   a hash of (seed, s, n, k): shards never share a start offset.  Images:
 *   epoch e = k / m_s of a shard that owns m_s samples per epoch takes
 *   positions s, s+n, s+2n, ... of a pseudo-random permutation of the
 *   training set keyed by (seed, e); the permutation is a 4-round Feistel
 *   network with cycle walking, evaluated per index: nothing is stored and
 *   any cursor can be reached without replaying the ones before it.
 *   The cursor counts the samples a shard has drawn.
 * Validation: tokens use the fixed, non-overlapping windows of T+1 bytes
 *   of the validation part, images the validation samples in order.  There
 *   are floor(W/B) batches of B (at least 1; indices wrap only if W < B).
 */
#include "node/engine/data.h"
#include "node/engine/shards.h"

#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

#define DATA_D          784                  /* pixels per image (28x28) */
#define DATA_NCLASS     10                   /* image classes */
#define DATA_VOCAB      256                  /* byte tokens */
#define TEXT_FILE_MAX   ((size_t)64 << 20)   /* larger files in a folder are skipped */
#define TEXT_TOTAL_MAX  ((size_t)256 << 20)  /* total bytes read */
#define TEXT_DEPTH_MAX  64                   /* folder nesting */
#define IDX_COUNT_MAX   1000000u             /* plausible samples in one IDX file */
#define SYN_ALPHA       16                   /* synthetic alphabet size */
#define SYN_TRAIN       ((size_t)1 << 20)    /* synthetic training bytes */
#define SYN_VAL         ((size_t)1 << 16)    /* synthetic validation bytes */
#define SYN_IMG_TRAIN   60000                /* synthetic training images */
#define SYN_IMG_VAL     10000                /* synthetic validation images */
#define SYN_IMG_SIGMA   0.5f                 /* synthetic image noise */
#define SYN_IMG_MARKS   60                   /* pixel changes that set a class apart */
#define SYN_IMG_MARK    0.3f                 /* by how much each */

/* hash domain tags, so that no two uses of the seed draw the same numbers */
enum { TAG_CHAIN = 1, TAG_WALK, TAG_WINDOW, TAG_PERM, TAG_PROTO, TAG_NOISE };

struct data {
    data_kind_t kind;      /* DATA_TOKENS or DATA_IMAGES */
    int T;                 /* positions per token sample; 1 for images */
    uint64_t seed;         /* fixes synthetic data and shuffling */
    /* tokens */
    uint8_t *bytes;        /* ntrain training bytes then nval validation bytes (NULL with shards) */
    shards_t *shards;      /* tokens:/nanogpt: shards, read in place */
    size_t ntrain;         /* training tokens */
    size_t nval;           /* validation tokens */
    /* images */
    int synthetic;         /* images generated from protos, not stored */
    float *protos;         /* (10,784) synthetic class prototypes */
    uint8_t *train_px;     /* (ntrain_img,784) stored pixels */
    uint8_t *train_lab;    /* (ntrain_img) labels */
    uint8_t *val_px;       /* (nval_img,784) */
    uint8_t *val_lab;      /* (nval_img) */
    int ntrain_img;        /* training images */
    int nval_img;          /* validation images */
};

/* ---------------------------------------------------------------- hashing */

/* splitmix64's finalizer of x + golden ratio: a strong 64-bit mix. */
static uint64_t s_mix(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

/* A counter-based random 64-bit value keyed by the seed and four words. */
static uint64_t s_hash(uint64_t seed, uint64_t a, uint64_t b, uint64_t c, uint64_t d)
{
    uint64_t h = s_mix(seed);
    h = s_mix(h ^ a);
    h = s_mix(h ^ b);
    h = s_mix(h ^ c);
    return s_mix(h ^ d);
}

/* uniform in [0,1) from the top 53 bits */
static double s_unit(uint64_t h)
{
    return (double)(h >> 11) * (1.0 / 9007199254740992.0);
}

/* A pseudo-random permutation of [0,n) keyed by key, evaluated at i: a
 * balanced 4-round Feistel network on 2^bits >= n values (bits even, so
 * 2^bits < 4n) and cycle walking until the value falls inside [0,n). */
static uint64_t s_permute(uint64_t i, uint64_t n, uint64_t key)
{
    assert(i < n);
    int bits = 2;
    while (((uint64_t)1 << bits) < n) bits += 2;
    int half = bits / 2;
    uint64_t mask = ((uint64_t)1 << half) - 1;
    uint64_t x = i;
    do {
        uint64_t l = x >> half, r = x & mask;
        for (uint64_t round = 0; round < 4; round++) {
            uint64_t f = s_mix(r ^ s_mix(key + round)) & mask;
            uint64_t nl = r;
            r = l ^ f;
            l = nl;
        }
        x = (l << half) | r;
    } while (x >= n);
    return x;
}

/* ----------------------------------------------------------------- errors */

static void s_err(char *err, size_t errlen, const char *fmt, ...)
{
    if (!err || errlen == 0) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

/* -------------------------------------------------------- synthetic text */

/* Fills out[0..n) with the synthetic Markov chain of the header comment. */
static void s_synthetic_bytes(uint8_t *out, size_t n, uint64_t seed)
{
    static const char alphabet[SYN_ALPHA + 1] = " etaoinshrdlucm\n";
    static const double prob[3] = {0.7, 0.2, 0.1};
    uint8_t succ[SYN_ALPHA * SYN_ALPHA][3];   /* successors per (prev2, prev1) */
    for (int ctx = 0; ctx < SYN_ALPHA * SYN_ALPHA; ctx++) {
        /* the likely successor depends on prev1 only, the other two on both */
        uint64_t ctr = 0;
        for (int j = 0; j < 3; j++) {
            int c, dup;
            do {   /* three distinct letters */
                uint64_t key = j == 0 ? (uint64_t)(ctx % SYN_ALPHA) : SYN_ALPHA + (uint64_t)ctx;
                c = (int)(s_hash(seed, TAG_CHAIN, key, ctr++, (uint64_t)j) % SYN_ALPHA);
                dup = 0;
                for (int q = 0; q < j; q++) dup |= succ[ctx][q] == c;
            } while (dup);
            succ[ctx][j] = (uint8_t)c;
        }
    }
    int p2 = (int)(s_hash(seed, TAG_WALK, 0, 0, 1) % SYN_ALPHA);
    int p1 = (int)(s_hash(seed, TAG_WALK, 0, 0, 2) % SYN_ALPHA);
    for (size_t i = 0; i < n; i++) {
        double u = s_unit(s_hash(seed, TAG_WALK, i, 0, 3));
        int ctx = p2 * SYN_ALPHA + p1;
        int j = u < prob[0] ? 0 : u < prob[0] + prob[1] ? 1 : 2;
        int c = succ[ctx][j];
        out[i] = (uint8_t)alphabet[c];
        p2 = p1;
        p1 = c;
    }
}

/* --------------------------------------------------------------- text */

typedef struct {
    char **paths;      /* files to read, in order */
    size_t *sizes;     /* their sizes at listing time */
    size_t n, cap;     /* used, allocated */
    size_t total;      /* sum of sizes */
    int full;          /* the total cap was reached: list no more */
} s_files_t;

static void s_files_free(s_files_t *fl)
{
    for (size_t i = 0; i < fl->n; i++) free(fl->paths[i]);
    free(fl->paths);
    free(fl->sizes);
    memset(fl, 0, sizeof(*fl));
}

static int s_files_add(s_files_t *fl, const char *path, size_t size)
{
    if (fl->n == fl->cap) {
        size_t cap = fl->cap ? 2 * fl->cap : 64;
        char **p = realloc(fl->paths, cap * sizeof(*p));
        if (!p) return -1;
        fl->paths = p;
        size_t *s = realloc(fl->sizes, cap * sizeof(*s));
        if (!s) return -1;
        fl->sizes = s;
        fl->cap = cap;
    }
    char *copy = strdup(path);
    if (!copy) return -1;
    fl->paths[fl->n] = copy;
    fl->sizes[fl->n] = size;
    fl->n++;
    fl->total += size;
    return 0;
}

static int s_cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int s_ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* Lists the files of folder dir (see the header comment) into fl, in order. */
static int s_list_folder(s_files_t *fl, const char *dir, int depth, char *err, size_t errlen)
{
    if (depth > TEXT_DEPTH_MAX) {
        s_err(err, errlen, "text: %s: folders nested too deeply", dir);
        return -1;
    }
    DIR *d = opendir(dir);
    if (!d) {
        s_err(err, errlen, "text: %s: %s", dir, strerror(errno));
        return -1;
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    int rc = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') continue;   /* ".", "..", hidden */
        if (n == cap) {
            cap = cap ? 2 * cap : 64;
            char **p = realloc(names, cap * sizeof(*p));
            if (!p) { rc = -1; break; }
            names = p;
        }
        if (!(names[n] = strdup(e->d_name))) { rc = -1; break; }
        n++;
    }
    closedir(d);
    if (rc != 0) s_err(err, errlen, "text: %s: out of memory", dir);
    if (n) qsort(names, n, sizeof(*names), s_cmp_str);
    for (size_t i = 0; i < n && rc == 0 && !fl->full; i++) {
        size_t len = strlen(dir) + strlen(names[i]) + 2;
        char *path = malloc(len);
        if (!path) {
            s_err(err, errlen, "text: %s: out of memory", dir);
            rc = -1;
            break;
        }
        snprintf(path, len, "%s/%s", dir, names[i]);
        struct stat st;
        if (lstat(path, &st) != 0) {
            s_err(err, errlen, "text: %s: %s", path, strerror(errno));
            rc = -1;
        } else if (S_ISDIR(st.st_mode)) {
            rc = s_list_folder(fl, path, depth + 1, err, errlen);
        } else if (S_ISREG(st.st_mode) && !s_ends_with(names[i], ".dat")
                   && (size_t)st.st_size <= TEXT_FILE_MAX) {
            if (fl->total + (size_t)st.st_size > TEXT_TOTAL_MAX) {
                fl->full = 1;
            } else if (s_files_add(fl, path, (size_t)st.st_size) != 0) {
                s_err(err, errlen, "text: %s: out of memory", path);
                rc = -1;
            }
        }   /* symlinks, devices, .dat, huge files: left out */
        free(path);
    }
    for (size_t i = 0; i < n; i++) free(names[i]);
    free(names);
    return rc;
}

/* Reads the listed files into one buffer; *n gets the bytes actually read. */
static uint8_t *s_read_files(const s_files_t *fl, size_t *n, char *err, size_t errlen)
{
    uint8_t *buf = malloc(fl->total ? fl->total : 1);
    if (!buf) {
        s_err(err, errlen, "text: out of memory for %zu bytes", fl->total);
        return NULL;
    }
    size_t at = 0;
    for (size_t i = 0; i < fl->n; i++) {
        FILE *f = fopen(fl->paths[i], "rb");
        if (!f) {
            s_err(err, errlen, "text: %s: %s", fl->paths[i], strerror(errno));
            free(buf);
            return NULL;
        }
        /* at most the listed size: a file that grew is cut, one that shrank is short */
        size_t got = fread(buf + at, 1, fl->sizes[i], f);
        int bad = ferror(f);
        fclose(f);
        if (bad) {
            s_err(err, errlen, "text: %s: read error", fl->paths[i]);
            free(buf);
            return NULL;
        }
        at += got;
    }
    *n = at;
    return buf;
}

/* Loads text:PATH into self->bytes and splits it; returns 0, or -1 with err. */
static int s_text_load(data_t *self, const char *path, char *err, size_t errlen)
{
    struct stat st;
    if (path[0] == '\0') {
        s_err(err, errlen, "text: no path given (use text:FILE or text:FOLDER)");
        return -1;
    }
    if (stat(path, &st) != 0) {
        s_err(err, errlen, "text: %s: %s", path, strerror(errno));
        return -1;
    }
    s_files_t fl = {0};
    int rc = 0;
    if (S_ISREG(st.st_mode)) {
        size_t size = (size_t)st.st_size < TEXT_TOTAL_MAX ? (size_t)st.st_size : TEXT_TOTAL_MAX;
        if (s_files_add(&fl, path, size) != 0) {
            s_err(err, errlen, "text: %s: out of memory", path);
            rc = -1;
        }
    } else if (S_ISDIR(st.st_mode)) {
        rc = s_list_folder(&fl, path, 0, err, errlen);
    } else {
        s_err(err, errlen, "text: %s: not a regular file or folder", path);
        rc = -1;
    }
    size_t n = 0;
    if (rc == 0) {
        self->bytes = s_read_files(&fl, &n, err, errlen);
        if (!self->bytes) rc = -1;
    }
    s_files_free(&fl);
    if (rc != 0) return -1;
    size_t need = 2 * ((size_t)self->T + 1);
    if (n < need) {
        s_err(err, errlen, "text: %s: %zu bytes of text%s, need at least %zu (2 x (T+1) with T=%d)",
              path, n, S_ISDIR(st.st_mode) ? " in the folder" : "", need, self->T);
        return -1;
    }
    size_t nval = n / 20;
    if (nval < (size_t)self->T + 1) nval = (size_t)self->T + 1;
    self->ntrain = n - nval;
    self->nval = nval;
    return 0;
}

/* ------------------------------------------------------------- shards */

/* Opens tokens:PATH or nanogpt:DIR (shards.h); returns 0, or -1 with err. */
static int s_shards_load(data_t *self, const char *spec, char *err, size_t errlen)
{
    self->shards = shards_open(spec, err, errlen);
    if (!self->shards) return -1;
    self->ntrain = shards_len(self->shards, SHARDS_TRAIN);
    self->nval = shards_len(self->shards, SHARDS_VAL);
    size_t need = (size_t)self->T + 1;
    if (self->ntrain < need || self->nval < need) {
        s_err(err, errlen, "%s: %zu training and %zu held-out tokens, need at least %zu of each (T+1 with T=%d)",
              spec, self->ntrain, self->nval, need, self->T);
        return -1;
    }
    return 0;
}

/* -------------------------------------------------------------- fmnist */

static int s_gz_read(gzFile f, void *buf, size_t n, size_t *got)
{
    size_t at = 0;
    while (at < n) {
        size_t chunk = n - at < ((size_t)1 << 30) ? n - at : ((size_t)1 << 30);
        int r = gzread(f, (char *)buf + at, (unsigned)chunk);
        if (r <= 0) break;
        at += (size_t)r;
    }
    *got = at;
    int errnum = Z_OK;
    gzerror(f, &errnum);
    return errnum;
}

/* zlib's message for f's error, without the "path: " it puts in front */
static const char *s_gz_msg(gzFile f, const char *path)
{
    int errnum = Z_OK;
    const char *msg = gzerror(f, &errnum);
    size_t n = strlen(path);
    if (strncmp(msg, path, n) == 0 && msg[n] == ':' && msg[n + 1] == ' ') msg += n + 2;
    return msg;
}

static uint32_t s_be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Reads and checks the header of an IDX file open in f: images (magic
 * 0x803, dims count x 28 x 28) when images is set, else labels (0x801, dims
 * count).  0 with *count set, or -1 with a one-line reason naming path. */
static int s_idx_header(gzFile f, const char *path, int images, uint32_t *count, char *err, size_t errlen)
{
    uint8_t hdr[16];
    size_t hlen = images ? 16 : 8, got = 0;
    int errnum = s_gz_read(f, hdr, hlen, &got);
    if (got > 0 && gzdirect(f)) {
        s_err(err, errlen, "fmnist: %s: not a gzip file", path);
    } else if (errnum != Z_OK && errnum != Z_BUF_ERROR) {
        s_err(err, errlen, "fmnist: %s: corrupt gzip data (%s)", path, s_gz_msg(f, path));
    } else if (got == 0) {
        s_err(err, errlen, "fmnist: %s: empty", path);
    } else if (got < hlen) {
        s_err(err, errlen, "fmnist: %s: truncated header (%zu of %zu bytes)", path, got, hlen);
    } else if (s_be32(hdr) != (images ? 0x803u : 0x801u)) {
        s_err(err, errlen, "fmnist: %s: bad IDX magic 0x%08x (expected 0x%08x, %s)", path,
              s_be32(hdr), images ? 0x803u : 0x801u, images ? "images" : "labels");
    } else if (s_be32(hdr + 4) == 0 || s_be32(hdr + 4) > IDX_COUNT_MAX) {
        s_err(err, errlen, "fmnist: %s: implausible count %u", path, s_be32(hdr + 4));
    } else if (images && (s_be32(hdr + 8) != 28 || s_be32(hdr + 12) != 28)) {
        s_err(err, errlen, "fmnist: %s: images are %ux%u, expected 28x28", path,
              s_be32(hdr + 8), s_be32(hdr + 12));
    } else {
        *count = s_be32(hdr + 4);
        return 0;
    }
    return -1;
}

/* Reads the n bytes after the header into buf and checks that the stream
 * ends there and that labels (images 0) are classes.  0, or -1 with a
 * one-line reason naming path. */
static int s_idx_body(gzFile f, const char *path, int images, uint8_t *buf, size_t n, uint32_t cnt,
                      char *err, size_t errlen)
{
    const char *what = images ? "pixel" : "label";
    size_t got = 0, more = 0;
    uint8_t extra;
    int errnum = s_gz_read(f, buf, n, &got);
    if (errnum == Z_OK && got == n) errnum = s_gz_read(f, &extra, 1, &more);
    if (errnum != Z_OK && errnum != Z_BUF_ERROR) {
        s_err(err, errlen, "fmnist: %s: corrupt gzip data (%s)", path, s_gz_msg(f, path));
    } else if (got < n) {
        s_err(err, errlen, "fmnist: %s: truncated (expected %zu %s bytes, got %zu)", path, n, what, got);
    } else if (errnum != Z_OK) {
        s_err(err, errlen, "fmnist: %s: truncated gzip stream after the data", path);
    } else if (more) {
        s_err(err, errlen, "fmnist: %s: unexpected data after the %u %s", path, cnt, images ? "images" : "labels");
    } else {
        for (uint32_t i = 0; !images && i < cnt; i++)
            if (buf[i] >= DATA_NCLASS) {
                s_err(err, errlen, "fmnist: %s: label %d at index %u is not in [0,10)", path, buf[i], i);
                return -1;
            }
        return 0;
    }
    return -1;
}

/* Reads one gzip'd IDX file (s_idx_header): *data gets count x 784 or count
 * bytes.  Returns 0, or -1 with a one-line reason naming path. */
static int s_idx_read(const char *path, int images, uint8_t **data, int *count,
                      char *err, size_t errlen)
{
    *data = NULL;
    errno = 0;
    gzFile f = gzopen(path, "rb");
    if (!f) {
        s_err(err, errlen, "fmnist: %s: cannot open: %s", path,
              errno ? strerror(errno) : "out of memory");
        return -1;
    }
    gzbuffer(f, 1 << 17);
    int rc = -1;
    uint32_t cnt = 0;
    uint8_t *buf = NULL;
    size_t n = 0;
    if (s_idx_header(f, path, images, &cnt, err, errlen) == 0) {
        n = (size_t)cnt * (images ? DATA_D : 1);
        buf = malloc(n ? n : 1);
        if (!buf) s_err(err, errlen, "fmnist: %s: out of memory for %zu bytes", path, n);
    }
    if (buf && s_idx_body(f, path, images, buf, n, cnt, err, errlen) == 0) {
        *data = buf;
        *count = (int)cnt;
        rc = 0;
    } else {
        free(buf);
    }
    gzclose(f);
    return rc;
}

/* Loads one split (prefix "train" or "t10k") of dir. */
static int s_fmnist_split(const char *dir, const char *prefix, uint8_t **px, uint8_t **lab,
                          int *count, char *err, size_t errlen)
{
    char ipath[4096], lpath[4096];
    snprintf(ipath, sizeof(ipath), "%s/%s-images-idx3-ubyte.gz", dir, prefix);
    snprintf(lpath, sizeof(lpath), "%s/%s-labels-idx1-ubyte.gz", dir, prefix);
    int ni = 0, nl = 0;
    if (s_idx_read(ipath, 1, px, &ni, err, errlen) != 0) return -1;
    if (s_idx_read(lpath, 0, lab, &nl, err, errlen) != 0) return -1;
    if (ni != nl) {
        s_err(err, errlen, "fmnist: %s: %d labels but %s-images-idx3-ubyte.gz has %d images",
              lpath, nl, prefix, ni);
        return -1;
    }
    *count = ni;
    return 0;
}

/* ------------------------------------------------------- synthetic images */

static int s_synthetic_images(data_t *self)
{
    self->protos = malloc((size_t)DATA_NCLASS * DATA_D * sizeof(float));
    if (!self->protos) return -1;
    for (int i = 0; i < DATA_D; i++) {   /* the base every class shares */
        double u = s_unit(s_hash(self->seed, TAG_PROTO, 0, (uint64_t)i, 0));
        double v = s_unit(s_hash(self->seed, TAG_PROTO, 0, (uint64_t)i, 1));
        self->protos[i] = u < 0.3 ? (float)(0.4 + 0.4 * v) : 0.1f;
    }
    for (int c = 1; c < DATA_NCLASS; c++) memcpy(self->protos + c * DATA_D, self->protos, DATA_D * sizeof(float));
    for (int c = 0; c < DATA_NCLASS; c++) {   /* and what sets each class apart */
        for (int k = 0; k < SYN_IMG_MARKS; k++) {
            uint64_t h = s_hash(self->seed, TAG_PROTO, 1 + (uint64_t)c, (uint64_t)k, 2);
            float *px = self->protos + c * DATA_D + (h % DATA_D);
            *px += (h >> 32) & 1 ? SYN_IMG_MARK : -SYN_IMG_MARK;
        }
    }
    self->synthetic = 1;
    self->ntrain_img = SYN_IMG_TRAIN;
    self->nval_img = SYN_IMG_VAL;
    return 0;
}

/* Writes image i of split (0 train, 1 val) into x (784) and returns its label. */
static int s_image(const data_t *self, int split, int i, float *x)
{
    if (!self->synthetic) {
        const uint8_t *px = (split ? self->val_px : self->train_px) + (size_t)i * DATA_D;
        for (int j = 0; j < DATA_D; j++) x[j] = px[j] * (1.0f / 255.0f);
        return split ? self->val_lab[i] : self->train_lab[i];
    }
    int label = i % DATA_NCLASS;
    const float *p = self->protos + label * DATA_D;
    for (int j = 0; j < DATA_D; j += 2) {   /* Box-Muller: two normals per pair of draws */
        uint64_t h = s_hash(self->seed, TAG_NOISE, (uint64_t)split, (uint64_t)i, (uint64_t)j);
        double u1 = 1.0 - s_unit(h), u2 = s_unit(s_mix(h));
        double r = sqrt(-2.0 * log(u1));
        float z0 = (float)(r * cos(6.283185307179586 * u2));
        float z1 = (float)(r * sin(6.283185307179586 * u2));
        float a = p[j] + SYN_IMG_SIGMA * z0, b = p[j + 1] + SYN_IMG_SIGMA * z1;
        x[j] = a < 0.0f ? 0.0f : a > 1.0f ? 1.0f : a;
        x[j + 1] = b < 0.0f ? 0.0f : b > 1.0f ? 1.0f : b;
    }
    return label;
}

/* ------------------------------------------------------------- public */

data_t *data_open(const char *spec, data_kind_t kind, int T, uint64_t seed,
                  char *err, size_t errlen)
{
    assert(spec);
    assert(kind == DATA_TOKENS || kind == DATA_IMAGES);
    if (kind == DATA_TOKENS && T < 1) {
        s_err(err, errlen, "data: context length T=%d must be at least 1", T);
        return NULL;
    }
    data_t *self = calloc(1, sizeof(*self));
    if (!self) {
        s_err(err, errlen, "data: out of memory");
        return NULL;
    }
    self->kind = kind;
    self->T = kind == DATA_TOKENS ? T : 1;
    self->seed = seed;
    int rc = -1;
    if (strcmp(spec, "synthetic") == 0) {
        if (kind == DATA_TOKENS) {
            size_t ntrain = SYN_TRAIN, nval = SYN_VAL;
            if (ntrain < 64 * ((size_t)T + 1)) ntrain = 64 * ((size_t)T + 1);
            if (nval < 8 * ((size_t)T + 1)) nval = 8 * ((size_t)T + 1);
            self->bytes = malloc(ntrain + nval);
            if (self->bytes) {
                s_synthetic_bytes(self->bytes, ntrain + nval, seed);
                self->ntrain = ntrain;
                self->nval = nval;
                rc = 0;
            } else {
                s_err(err, errlen, "synthetic: out of memory");
            }
        } else {
            rc = s_synthetic_images(self);
            if (rc != 0) s_err(err, errlen, "synthetic: out of memory");
        }
    } else if (strncmp(spec, "text:", 5) == 0 || strcmp(spec, "text") == 0) {
        if (kind != DATA_TOKENS)
            s_err(err, errlen, "%s: text gives byte tokens, but this model takes images", spec);
        else
            rc = s_text_load(self, spec[4] ? spec + 5 : "", err, errlen);
    } else if (strncmp(spec, "tokens:", 7) == 0 || strncmp(spec, "nanogpt:", 8) == 0) {
        if (kind != DATA_TOKENS)
            s_err(err, errlen, "%s: shards hold tokens, but this model takes images", spec);
        else
            rc = s_shards_load(self, spec, err, errlen);
    } else if (strcmp(spec, "fmnist") == 0 || strncmp(spec, "fmnist:", 7) == 0) {
        const char *dir = spec[6] ? spec + 7 : "/usr/share/datasets/fashion-mnist";
        if (kind != DATA_IMAGES)
            s_err(err, errlen, "%s: fmnist gives images, but this model takes tokens", spec);
        else if (!*dir)
            s_err(err, errlen, "fmnist: empty folder name (use fmnist or fmnist:DIR)");
        else if (s_fmnist_split(dir, "train", &self->train_px, &self->train_lab,
                                &self->ntrain_img, err, errlen) == 0
                 && s_fmnist_split(dir, "t10k", &self->val_px, &self->val_lab,
                                   &self->nval_img, err, errlen) == 0)
            rc = 0;
    } else {
        s_err(err, errlen, "data: unknown spec '%s' (synthetic, text:PATH, tokens:PATH, nanogpt:DIR, fmnist[:DIR])", spec);
    }
    if (rc != 0) {
        data_close(&self);
        return NULL;
    }
    return self;
}

void data_close(data_t **self_p)
{
    assert(self_p);
    data_t *self = *self_p;
    if (!self) return;
    free(self->bytes);
    shards_close(&self->shards);
    free(self->protos);
    free(self->train_px);
    free(self->train_lab);
    free(self->val_px);
    free(self->val_lab);
    free(self);
    *self_p = NULL;
}

data_kind_t data_kind(const data_t *self)
{
    assert(self);
    return self->kind;
}

int data_dim(const data_t *self)
{
    assert(self);
    return self->kind == DATA_IMAGES ? DATA_D : 0;
}

int data_classes(const data_t *self)
{
    assert(self);
    if (self->kind == DATA_IMAGES) return DATA_NCLASS;
    if (!self->shards) return DATA_VOCAB;
    uint32_t top = shards_max_id(self->shards, NULL, NULL);
    return top >= 0x7fffffffu ? 0x7fffffff : (int)top + 1;
}

uint32_t data_token_max(const data_t *self, const char **file, uint64_t *offset)
{
    assert(self && self->kind == DATA_TOKENS);
    if (file) *file = NULL;
    if (offset) *offset = 0;
    return self->shards ? shards_max_id(self->shards, file, offset) : DATA_VOCAB - 1;
}

int data_batch_alloc(const data_t *self, batch_t *b, int B)
{
    assert(self && b && B >= 1);
    memset(b, 0, sizeof(*b));
    b->B = B;
    b->T = self->T;
    size_t n = (size_t)B * (size_t)self->T;
    if (self->kind == DATA_TOKENS) {
        b->tokens = malloc(n * sizeof(int));
        b->targets = malloc(n * sizeof(int));
        if (!b->tokens || !b->targets) goto fail;
    } else {
        b->x = malloc((size_t)B * DATA_D * sizeof(float));
        b->targets = malloc((size_t)B * sizeof(int));
        if (!b->x || !b->targets) goto fail;
    }
    return 0;
fail:
    data_batch_free(b);
    return -1;
}

void data_batch_free(batch_t *b)
{
    if (!b) return;
    free(b->tokens);
    free(b->x);
    free(b->targets);
    memset(b, 0, sizeof(*b));
}

/* Copies the window of T+1 tokens at offset o of part (SHARDS_TRAIN or
 * SHARDS_VAL) into sample s of b. */
static void s_fill_window(const data_t *self, batch_t *b, int s, int part, size_t o)
{
    int T = self->T;
    int *tok = b->tokens + (size_t)s * T, *tgt = b->targets + (size_t)s * T;
    if (self->shards) {
        shards_read(self->shards, part, o, (size_t)T, tok);
        shards_read(self->shards, part, o + 1, (size_t)T, tgt);
        return;
    }
    const uint8_t *p = self->bytes + (part == SHARDS_VAL ? self->ntrain : 0) + o;
    for (int t = 0; t < T; t++) {
        tok[t] = p[t];
        tgt[t] = p[t + 1];
    }
}

void data_next_train(data_t *self, batch_t *b, int shard, int nshards, uint64_t *cursor)
{
    assert(self && b && cursor && b->targets);
    assert(nshards >= 1 && shard >= 0 && shard < nshards);
    assert(b->B >= 1 && b->T == self->T);
    uint64_t k0 = *cursor;
    if (self->kind == DATA_TOKENS) {
        assert(b->tokens);
        /* start offsets o in [0, last] with o = shard (mod nshards) */
        uint64_t last = self->ntrain - ((size_t)self->T + 1);
        uint64_t s = (uint64_t)shard, n = (uint64_t)nshards;
        if (s > last) s %= last + 1;   /* more shards than offsets: share */
        uint64_t count = (last - s) / n + 1;
        for (int i = 0; i < b->B; i++) {
            uint64_t h = s_hash(self->seed, TAG_WINDOW, (uint64_t)shard, n, k0 + (uint64_t)i);
            uint64_t o = s + n * (h % count);
            s_fill_window(self, b, i, SHARDS_TRAIN, o);
        }
    } else {
        assert(b->x);
        uint64_t N = (uint64_t)self->ntrain_img, n = (uint64_t)nshards;
        uint64_t s = (uint64_t)shard % (N < n ? N : n);   /* more shards than images: share */
        uint64_t per = (N - s + n - 1) / n;                /* samples of this shard per epoch */
        for (int i = 0; i < b->B; i++) {
            uint64_t k = k0 + (uint64_t)i, epoch = k / per, j = k % per;
            uint64_t idx = s_permute(s + j * n, N, s_hash(self->seed, TAG_PERM, epoch, 0, 0));
            b->targets[i] = s_image(self, 0, (int)idx, b->x + (size_t)i * DATA_D);
        }
    }
    *cursor = k0 + (uint64_t)b->B;
}

/* validation samples: windows of the validation bytes, or validation images */
static int s_val_count(const data_t *self)
{
    if (self->kind == DATA_TOKENS) {
        size_t w = self->nval / ((size_t)self->T + 1);
        return w > (size_t)0x7fffffff ? 0x7fffffff : (int)w;
    }
    return self->nval_img;
}

int data_val_batches(const data_t *self, int B)
{
    assert(self && B >= 1);
    int n = s_val_count(self) / B;
    return n >= 1 ? n : 1;
}

void data_val_batch(data_t *self, batch_t *b, int i)
{
    assert(self && b && b->targets && b->B >= 1 && b->T == self->T);
    assert(i >= 0 && i < data_val_batches(self, b->B));
    int W = s_val_count(self);
    for (int s = 0; s < b->B; s++) {
        int j = (int)(((int64_t)i * b->B + s) % W);
        if (self->kind == DATA_TOKENS)
            s_fill_window(self, b, s, SHARDS_VAL, (size_t)j * ((size_t)self->T + 1));
        else
            b->targets[s] = s_image(self, 1, j, b->x + (size_t)s * DATA_D);
    }
}

size_t data_val_tokens(const data_t *self)
{
    assert(self && self->kind == DATA_TOKENS);
    return self->nval;
}

void data_val_window(data_t *self, batch_t *b, int s, size_t at)
{
    assert(self && b && self->kind == DATA_TOKENS && b->T == self->T && s >= 0 && s < b->B);
    assert(at + (size_t)self->T < self->nval);
    s_fill_window(self, b, s, SHARDS_VAL, at);
}
