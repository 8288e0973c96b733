/* shards.c: token shards read in place (shards.h). */
#include "node/engine/shards.h"
#include "net/wire.h"   /* le_get16, le_get32: the one little-endian reader */

#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define SHARDS_MAX 100000   /* files one spec may name */

/* One mapped file. */
typedef struct {
    char *path;             /* as listed */
    uint8_t *map;           /* the whole file, read only (NULL when empty) */
    size_t maplen;          /* its bytes */
    const uint8_t *tok;     /* the first token */
    int width;              /* bytes per token: 2 or 4 */
    uint64_t n;             /* tokens */
    int val;                /* held out (its name contains "val") */
} s_seg_t;

/* A run of one segment's tokens inside a part. */
typedef struct {
    int seg;                /* index into segs */
    uint64_t first, count;  /* tokens [first, first + count) of the segment */
    uint64_t start;         /* position of its first token in the part */
} s_piece_t;

struct shards {
    s_seg_t *segs;          /* every file, in order */
    int nsegs;
    s_piece_t *pieces[2];   /* per part */
    int npieces[2];
    uint64_t len[2];        /* tokens per part */
    uint32_t max_id;        /* largest token */
    int max_seg;            /* and where it first occurs */
    uint64_t max_at;
};

int shards_check_header(const uint8_t *buf, size_t len, const char *name, int *width, uint64_t *count,
                        char *err, size_t errlen)
{
    if (len < SHARD_HEADER_BYTES) {
        snprintf(err, errlen, "%s: cut short: %zu bytes, less than the 1024-byte header", name, len);
        return -1;
    }
    uint32_t magic = le_get32(buf), version = le_get32(buf + 4);
    int32_t n = (int32_t)le_get32(buf + 8);
    if (magic != SHARD_MAGIC_U16 && magic != SHARD_MAGIC_U32) {
        snprintf(err, errlen, "%s: not a token shard: magic %u (want %u or %u)", name, magic, SHARD_MAGIC_U16,
                 SHARD_MAGIC_U32);
        return -1;
    }
    uint32_t want = magic == SHARD_MAGIC_U16 ? 1 : 7;
    if (version != want) {
        snprintf(err, errlen, "%s: shard version %u, want %u with magic %u", name, version, want, magic);
        return -1;
    }
    if (n < 0) {
        snprintf(err, errlen, "%s: token count %d below 0", name, n);
        return -1;
    }
    *width = magic == SHARD_MAGIC_U16 ? 2 : 4;
    *count = (uint64_t)n;
    uint64_t size = SHARD_HEADER_BYTES + *count * (uint64_t)*width;
    if ((uint64_t)len != size) {
        snprintf(err, errlen, "%s: %s: %zu bytes, the header says %llu (1024 + %llu tokens x %d)", name,
                 (uint64_t)len < size ? "cut short" : "longer than its header says", len, (unsigned long long)size,
                 (unsigned long long)*count, *width);
        return -1;
    }
    return 0;
}

static int s_cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Appends path to the list (*paths, *n); 0 or -1 when out of memory or too many. */
static int s_list_add(char ***paths, int *n, const char *path)
{
    if (*n >= SHARDS_MAX) return -1;
    char **p = realloc(*paths, sizeof(char *) * (size_t)(*n + 1));
    if (!p) return -1;
    *paths = p;
    if (!(p[*n] = strdup(path))) return -1;
    ++*n;
    return 0;
}

static void s_list_free(char **paths, int n)
{
    for (int i = 0; i < n; i++) free(paths[i]);
    free(paths);
}

/* The files of folder dir ending in ".bin" (regular files, not names starting with '.'). */
static int s_list_folder(const char *dir, char ***paths, int *n, const char *kind, char *err, size_t errlen)
{
    DIR *d = opendir(dir);
    if (!d) {
        snprintf(err, errlen, "%s:%s: %s", kind, dir, strerror(errno));
        return -1;
    }
    struct dirent *e;
    int rc = 0;
    while (rc == 0 && (e = readdir(d))) {
        size_t l = strlen(e->d_name);
        if (e->d_name[0] == '.' || l < 4 || strcmp(e->d_name + l - 4, ".bin") != 0) continue;
        char *path = malloc(strlen(dir) + l + 2);
        if (!path) { rc = -1; break; }
        sprintf(path, "%s/%s", dir, e->d_name);
        struct stat st;
        if (stat(path, &st) == 0 && S_ISREG(st.st_mode) && s_list_add(paths, n, path) < 0) rc = -1;
        free(path);
    }
    closedir(d);
    if (rc < 0) snprintf(err, errlen, "%s:%s: out of memory, or more than %d shards", kind, dir, SHARDS_MAX);
    return rc;
}

/* Lists the files PATH names (shards.h): a file, a folder or a glob. */
static int s_list(const char *path, char ***paths, int *n, char *err, size_t errlen)
{
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
        if (s_list_folder(path, paths, n, "tokens", err, errlen) < 0) return -1;
    } else if (stat(path, &st) == 0) {
        if (s_list_add(paths, n, path) < 0) { snprintf(err, errlen, "tokens:%s: out of memory", path); return -1; }
    } else {
        glob_t g;
        int r = glob(path, 0, NULL, &g);
        for (size_t i = 0; r == 0 && i < g.gl_pathc; i++)
            if (s_list_add(paths, n, g.gl_pathv[i]) < 0) r = -1;
        if (r != GLOB_NOMATCH) globfree(&g);
        if (r == -1) { snprintf(err, errlen, "tokens:%s: out of memory, or more than %d shards", path, SHARDS_MAX); return -1; }
    }
    if (*n == 0) {
        snprintf(err, errlen, "tokens:%s: no shard there (a file, a folder of .bin files or a glob)", path);
        return -1;
    }
    qsort(*paths, (size_t)*n, sizeof(char *), s_cmp_str);
    return 0;
}

/* Maps the file of seg (its path set); headerless: nanoGPT's uint16 file. */
static int s_map(s_seg_t *seg, int headerless, char *err, size_t errlen)
{
    int fd = open(seg->path, O_RDONLY);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "%s: %s", seg->path, fd < 0 ? strerror(errno) : "not a regular file");
        if (fd >= 0) close(fd);
        return -1;
    }
    seg->maplen = (size_t)st.st_size;
    if (seg->maplen > 0) {
        seg->map = mmap(NULL, seg->maplen, PROT_READ, MAP_PRIVATE, fd, 0);
        if (seg->map == MAP_FAILED) {
            seg->map = NULL;
            snprintf(err, errlen, "%s: cannot map: %s", seg->path, strerror(errno));
            close(fd);
            return -1;
        }
    }
    close(fd);
    if (headerless) {
        if (seg->maplen % 2) {
            snprintf(err, errlen, "%s: %zu bytes, not a whole number of uint16 tokens", seg->path, seg->maplen);
            return -1;
        }
        seg->tok = seg->map;
        seg->width = 2;
        seg->n = seg->maplen / 2;
        return 0;
    }
    if (shards_check_header(seg->map, seg->maplen, seg->path, &seg->width, &seg->n, err, errlen) < 0) return -1;
    seg->tok = seg->map + SHARD_HEADER_BYTES;
    return 0;
}

static uint32_t s_tok(const s_seg_t *seg, uint64_t i)
{
    return seg->width == 2 ? le_get16(seg->tok + 2 * i) : le_get32(seg->tok + 4 * i);
}

/* Finds the largest token id and its first place. */
static void s_scan(shards_t *self)
{
    int found = 0;
    for (int k = 0; k < self->nsegs; k++) {
        const s_seg_t *seg = &self->segs[k];
        for (uint64_t i = 0; i < seg->n; i++) {
            uint32_t t = s_tok(seg, i);
            if (t > self->max_id || !found) {
                found = 1;
                self->max_id = t;
                self->max_seg = k;
                self->max_at = (seg->tok - seg->map) + i * (uint64_t)seg->width;
            }
        }
    }
}

static int s_add_piece(shards_t *self, int part, int seg, uint64_t first, uint64_t count)
{
    if (count == 0) return 0;
    s_piece_t *p = realloc(self->pieces[part], sizeof *p * (size_t)(self->npieces[part] + 1));
    if (!p) return -1;
    self->pieces[part] = p;
    p[self->npieces[part]++] = (s_piece_t){ .seg = seg, .first = first, .count = count, .start = self->len[part] };
    self->len[part] += count;
    return 0;
}

/* Splits the segments into the two parts (shards.h). */
static int s_split(shards_t *self)
{
    int anyval = 0;
    uint64_t total = 0;
    for (int k = 0; k < self->nsegs; k++) { anyval |= self->segs[k].val; total += self->segs[k].n; }
    uint64_t cut = total - total / 20, at = 0;   /* without val shards: tokens [cut, total) are held out */
    for (int k = 0; k < self->nsegs; k++) {
        const s_seg_t *seg = &self->segs[k];
        int rc = 0;
        if (anyval) {
            rc = s_add_piece(self, seg->val ? SHARDS_VAL : SHARDS_TRAIN, k, 0, seg->n);
        } else {
            uint64_t ntr = at >= cut ? 0 : cut - at < seg->n ? cut - at : seg->n;
            rc = s_add_piece(self, SHARDS_TRAIN, k, 0, ntr);
            if (rc == 0) rc = s_add_piece(self, SHARDS_VAL, k, ntr, seg->n - ntr);
        }
        if (rc < 0) return -1;
        at += seg->n;
    }
    return 0;
}

/* Maps the listed files into self. */
static int s_open_files(shards_t *self, char **paths, int n, int headerless, char *err, size_t errlen)
{
    self->segs = calloc((size_t)n, sizeof *self->segs);
    if (!self->segs) { snprintf(err, errlen, "tokens: out of memory"); return -1; }
    for (int k = 0; k < n; k++) {
        s_seg_t *seg = &self->segs[k];
        seg->path = paths[k];
        paths[k] = NULL;
        self->nsegs = k + 1;
        const char *base = strrchr(seg->path, '/');
        seg->val = strstr(base ? base + 1 : seg->path, "val") != NULL;
        if (s_map(seg, headerless, err, errlen) < 0) return -1;
    }
    return 0;
}

shards_t *shards_open(const char *spec, char *err, size_t errlen)
{
    int nano = strncmp(spec, "nanogpt:", 8) == 0;
    assert(nano || strncmp(spec, "tokens:", 7) == 0);
    const char *path = spec + (nano ? 8 : 7);
    if (!*path) {
        snprintf(err, errlen, "%s: no path given (tokens:FILE|FOLDER|GLOB, nanogpt:DIR)", spec);
        return NULL;
    }
    shards_t *self = calloc(1, sizeof *self);
    char **paths = NULL;
    int n = 0, rc = self ? 0 : -1;
    if (!self) snprintf(err, errlen, "%s: out of memory", spec);
    if (rc == 0 && nano) {
        static const char *const names[2] = { "train.bin", "val.bin" };
        for (int i = 0; i < 2 && rc == 0; i++) {
            char *p = malloc(strlen(path) + 16);
            if (!p) { rc = -1; break; }
            sprintf(p, "%s/%s", path, names[i]);
            rc = s_list_add(&paths, &n, p);
            free(p);
        }
        if (rc < 0) snprintf(err, errlen, "%s: out of memory", spec);
    } else if (rc == 0) {
        rc = s_list(path, &paths, &n, err, errlen);
    }
    if (rc == 0) rc = s_open_files(self, paths, n, nano, err, errlen);
    s_list_free(paths, n);
    if (rc == 0 && s_split(self) < 0) { snprintf(err, errlen, "%s: out of memory", spec); rc = -1; }
    if (rc == 0 && (self->len[SHARDS_TRAIN] == 0 || self->len[SHARDS_VAL] == 0)) {
        snprintf(err, errlen, "%s: no %s tokens (%llu in all; shards named *val* are held out, else the last 5%%)",
                 spec, self->len[SHARDS_TRAIN] == 0 ? "training" : "held-out",
                 (unsigned long long)(self->len[0] + self->len[1]));
        rc = -1;
    }
    if (rc < 0) { shards_close(&self); return NULL; }
    s_scan(self);
    return self;
}

void shards_close(shards_t **self_p)
{
    shards_t *self = *self_p;
    if (!self) return;
    for (int k = 0; k < self->nsegs; k++) {
        if (self->segs[k].map) munmap(self->segs[k].map, self->segs[k].maplen);
        free(self->segs[k].path);
    }
    free(self->segs);
    free(self->pieces[0]);
    free(self->pieces[1]);
    free(self);
    *self_p = NULL;
}

size_t shards_len(const shards_t *self, int part)
{
    return (size_t)self->len[part];
}

void shards_read(const shards_t *self, int part, size_t at, size_t n, int *out)
{
    assert(at + n <= self->len[part]);
    const s_piece_t *p = self->pieces[part];
    int lo = 0, hi = self->npieces[part] - 1;   /* the last piece starting at or before at */
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (p[mid].start <= at) lo = mid; else hi = mid - 1;
    }
    for (int k = lo; n > 0; k++) {
        const s_seg_t *seg = &self->segs[p[k].seg];
        uint64_t off = at - p[k].start, take = p[k].count - off < n ? p[k].count - off : n;
        for (uint64_t i = 0; i < take; i++) *out++ = (int)s_tok(seg, p[k].first + off + i);
        at += take;
        n -= take;
    }
}

uint32_t shards_max_id(const shards_t *self, const char **file, uint64_t *offset)
{
    if (file) *file = self->segs[self->max_seg].path;
    if (offset) *offset = self->max_at;
    return self->max_id;
}
