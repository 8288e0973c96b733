/* modelfile.c: model files and stage checkpoints (modelfile.h). */
#include "node/engine/modelfile.h"
#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

_Static_assert(sizeof(float) == 4, "float must be IEEE-754 binary32");
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "modelfile.c writes floats in host order and assumes a little-endian host"
#endif

#define CFG_LEN (7 * 4 + 24)
#define MODEL_HDR_LEN1 (8 + 4 + CFG_LEN + 8 + 8)   /* format version 1: no run id */
#define MODEL_HDR_LEN (MODEL_HDR_LEN1 + 8)
#define MODEL_HDR_LEN3 (MODEL_HDR_LEN + 12)   /* format version 3: a bottleneck's S, its cuts' stages, the split */
#define CKPT_HDR_LEN (8 + 4 + CFG_LEN + 8 + 4 + 4 + 4 + 8 + 8 + 8 + 8)
#define CKPT_HDR_LEN3 (CKPT_HDR_LEN + 8)      /* version 3: a bottleneck's S and its cuts' stages */
#define EXTRA_HDR_LEN (8 + 4 + 8 + 8 + 8 + 8)

size_t model_num_params(const model_config_t *cfg)
{
    return stage_num_params(cfg, 0, 1);
}

static uint8_t *s_put32(uint8_t *p, uint32_t v) { for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i)); return p + 4; }
static uint8_t *s_put64(uint8_t *p, uint64_t v) { for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i)); return p + 8; }
static uint32_t s_get32(const uint8_t **pp) { const uint8_t *p = *pp; uint32_t v = 0; for (int i = 0; i < 4; i++) v |= (uint32_t)p[i] << (8 * i); *pp += 4; return v; }
static uint64_t s_get64(const uint8_t **pp) { const uint8_t *p = *pp; uint64_t v = 0; for (int i = 0; i < 8; i++) v |= (uint64_t)p[i] << (8 * i); *pp += 8; return v; }

static uint8_t *s_put_cfg(uint8_t *p, const model_config_t *cfg)
{
    int32_t f[7] = { cfg->kind, cfg->V, cfg->maxT, cfg->C, cfg->L, cfg->NH, cfg->D };
    for (int i = 0; i < 7; i++) p = s_put32(p, (uint32_t)f[i]);
    memset(p, 0, 24);
    memcpy(p, cfg->name, strnlen(cfg->name, 23));
    return p + 24;
}

/* Reads and checks a config; 0 or -1. */
static int s_get_cfg(const uint8_t **p, model_config_t *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    int32_t f[7];
    for (int i = 0; i < 7; i++) f[i] = (int32_t)s_get32(p);
    cfg->kind = (model_kind_t)f[0]; cfg->V = f[1]; cfg->maxT = f[2]; cfg->C = f[3];
    cfg->L = f[4]; cfg->NH = f[5]; cfg->D = f[6];
    memcpy(cfg->name, *p, 23);
    *p += 24;
    for (const char *c = cfg->name; *c; c++)
        if (*c < 0x20 || *c > 0x7e) return -1;   /* printable: the name reaches terminals */
    char why[200];
    if (cfg->kind != MODEL_GPT && cfg->kind != MODEL_MLP) return -1;
    if (model_check(cfg, why, sizeof why) < 0) return -1;
    if (cfg->kind == MODEL_MLP && (cfg->V < 2 || cfg->V > 100000 || cfg->D < 1 || cfg->D > (1 << 20))) return -1;
    return 0;
}

/* The temporary file an atomic write of path goes to first (malloc'd), or
 * NULL with a reason. */
static char *s_tmp_path(const char *path, char *err, size_t errlen)
{
    size_t plen = strlen(path) + 32;
    char *tmp = malloc(plen);
    if (!tmp) { snprintf(err, errlen, "%s: out of memory", path); return NULL; }
    snprintf(tmp, plen, "%s.tmp.%d", path, (int)getpid());
    return tmp;
}

/* Where the chain of symbolic links at path ends (each link's text taken
 * relative to its folder; path itself when it is not a link), a new string,
 * whether that file exists or not (a write creates it); NULL for a loop or a
 * chain of more than 40 links (errno ELOOP), or when a link cannot be read. */
static char *s_link_end(const char *path)
{
    char *cur = strdup(path);
    struct stat sb;
    for (int hops = 0; cur && lstat(cur, &sb) == 0 && S_ISLNK(sb.st_mode); hops++) {
        char text[4096];
        ssize_t n = hops < 40 ? readlink(cur, text, sizeof text - 1) : -1;
        if (n <= 0) {
            if (hops >= 40) errno = ELOOP;
            free(cur);
            return NULL;
        }
        text[n] = '\0';
        const char *slash = strrchr(cur, '/');
        size_t dir = text[0] == '/' || !slash ? 0 : (size_t)(slash - cur) + 1;
        char *next = malloc(dir + (size_t)n + 1);
        if (next) {
            memcpy(next, cur, dir);
            memcpy(next + dir, text, (size_t)n + 1);
        }
        free(cur);
        cur = next;
    }
    return cur;
}

/* The file a write to path replaces (a new string, the caller frees it):
 * path itself, or the file a chain of symbolic links there ends at, so that
 * the rename replaces that file and not the link.  NULL with a reason when
 * it exists and is not a regular file: the rename would put a file in place
 * of a folder, a device or a pipe. */
static char *s_write_target(const char *path, char *err, size_t errlen)
{
    char *target = s_link_end(path);
    if (!target) {
        snprintf(err, errlen, "%s: a link to a file that cannot be reached: %s", path, strerror(errno));
        return NULL;
    }
    struct stat sb;
    if (stat(target, &sb) == 0 && !S_ISREG(sb.st_mode)) {
        snprintf(err, errlen, "%s: %s", path, S_ISDIR(sb.st_mode) ? "is a folder" : "not a regular file (a device or a pipe)");
        free(target);
        return NULL;
    }
    return target;
}

int modelfile_check_writable(const char *path, char *err, size_t errlen)
{
    char *target = s_write_target(path, err, errlen);
    char *tmp = target ? s_tmp_path(target, err, errlen) : NULL;
    int fd = tmp ? open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644) : -1;
    if (tmp && fd < 0) snprintf(err, errlen, "%s: cannot write: %s", path, strerror(errno));
    if (fd >= 0) { close(fd); unlink(tmp); }
    free(tmp);
    free(target);
    return fd < 0 ? -1 : 0;
}

int modelfile_check_model_target(const char *path, char *err, size_t errlen)
{
    if (modelfile_check_writable(path, err, errlen) < 0) return -1;
    FILE *fp = fopen(path, "rb");
    if (!fp) return 0;
    char magic[8];
    size_t n = fread(magic, 1, sizeof magic, fp);
    fclose(fp);
    if (n == sizeof magic && memcmp(magic, "BRGDCKPT", sizeof magic) == 0) {
        snprintf(err, errlen, "%s: holds a checkpoint (a stage's training state), which a model file would replace; "
                 "choose another name", path);
        return -1;
    }
    return 0;
}

/* Flushes the folder holding path to disk (best effort), so that a rename
 * into it survives a crash of the machine, not only of the process. */
static void s_sync_folder(const char *path)
{
    const char *slash = strrchr(path, '/');
    size_t n = slash ? (size_t)(slash - path) : 0;
    char *dir = malloc(n + 2);
    if (!dir) return;
    if (!slash) strcpy(dir, ".");
    else if (n == 0) strcpy(dir, "/");
    else { memcpy(dir, path, n); dir[n] = '\0'; }
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    if (fd >= 0) { (void)fsync(fd); close(fd); }
    free(dir);
}

/* modelfile_write_atomic's work on the file at target (path names it in errors). */
static int s_write_to(const char *target, const char *path, const void *const *parts, const size_t *lens, int n,
                      char *err, size_t errlen)
{
    char *tmp = s_tmp_path(target, err, errlen);
    if (!tmp) return -1;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) { snprintf(err, errlen, "%s: %s", path, strerror(errno)); free(tmp); return -1; }
    struct stat sb;
    if (stat(target, &sb) == 0) (void)fchmod(fd, sb.st_mode & 07777);   /* a rewrite keeps the file's permissions */
    FILE *fp = fdopen(fd, "wb");
    int ok = fp != NULL;
    for (int i = 0; ok && i < n; i++) ok = fwrite(parts[i], 1, lens[i], fp) == lens[i];
    ok = ok && fflush(fp) == 0 && fsync(fd) == 0;
    int saved = errno;
    if (fp) fclose(fp); else close(fd);
    if (!ok || rename(tmp, target) < 0) {
        snprintf(err, errlen, "%s: write failed: %s", path, strerror(ok ? errno : saved));
        unlink(tmp);
        free(tmp);
        return -1;
    }
    free(tmp);
    s_sync_folder(target);
    return 0;
}

int modelfile_write_atomic(const char *path, const void *const *parts, const size_t *lens, int n,
                           char *err, size_t errlen)
{
    char *target = s_write_target(path, err, errlen);
    if (!target) return -1;
    int r = s_write_to(target, path, parts, lens, n, err, errlen);
    free(target);
    return r;
}

/* Writes header h (hlen bytes), then the narr arrays of n floats, then the
 * CRC of all of it, atomically (modelfile_write_atomic). */
static int s_write(const char *path, const uint8_t *h, size_t hlen, const float *const *arr, int narr, size_t n,
                   char *err, size_t errlen)
{
    uLong crc = crc32(0L, h, (uInt)hlen);
    for (int i = 0; i < narr; i++) crc = crc32_z(crc, (const Bytef *)arr[i], n * sizeof(float));
    uint8_t tail[4];
    s_put32(tail, (uint32_t)crc);
    const void *parts[8];
    size_t lens[8];
    assert(narr <= 6);
    parts[0] = h; lens[0] = hlen;
    for (int i = 0; i < narr; i++) { parts[1 + i] = arr[i]; lens[1 + i] = n * sizeof(float); }
    parts[1 + narr] = tail; lens[1 + narr] = 4;
    return modelfile_write_atomic(path, parts, lens, narr + 2, err, errlen);
}

/* Reads the rest of a file after its header h: nfloats floats and the CRC;
 * checks the CRC over h and the floats.  Returns the floats or NULL. */
static float *s_read_body(FILE *fp, const char *path, const uint8_t *h, size_t hlen, size_t nfloats,
                          char *err, size_t errlen)
{
    /* the header's count against the file's size first: a damaged count is
     * a one-line error, not an allocation of whatever it says */
    struct stat sb;
    long at = ftell(fp);
    if (fstat(fileno(fp), &sb) == 0 && S_ISREG(sb.st_mode) && at >= 0) {
        uint64_t left = (uint64_t)sb.st_size - (uint64_t)at;
        if (nfloats > (left < 4 ? 0 : (left - 4) / sizeof(float))) {
            snprintf(err, errlen, "%s: truncated (expected %zu values)", path, nfloats);
            return NULL;
        }
    }
    float *x = malloc(nfloats ? nfloats * sizeof(float) : 1);
    if (!x) { snprintf(err, errlen, "%s: out of memory", path); return NULL; }
    uint8_t tail[4];
    if (fread(x, sizeof(float), nfloats, fp) != nfloats || fread(tail, 1, 4, fp) != 4) {
        snprintf(err, errlen, "%s: truncated (expected %zu values)", path, nfloats);
        free(x);
        return NULL;
    }
    if (fgetc(fp) != EOF) {   /* the size is fixed by the header: more is damage, not data */
        snprintf(err, errlen, "%s: longer than its header says (file damaged)", path);
        free(x);
        return NULL;
    }
    uLong crc = crc32(0L, h, (uInt)hlen);
    crc = crc32_z(crc, (const Bytef *)x, nfloats * sizeof(float));
    const uint8_t *tp = tail;
    if ((uint32_t)crc != s_get32(&tp)) {
        snprintf(err, errlen, "%s: checksum mismatch (file damaged)", path);
        free(x);
        return NULL;
    }
    return x;
}

int modelfile_save(const char *path, const model_config_t *cfg, int64_t updates, uint64_t run,
                   const float *params, size_t n, char *err, size_t errlen)
{
    uint8_t h[MODEL_HDR_LEN3], *p = h;
    int bneck = cfg->bneck > 0;   /* only a model with a bottleneck needs version 3 */
    memcpy(p, "BRGDMODL", 8); p += 8;
    p = s_put32(p, bneck ? MODELFILE_VERSION_BNECK : MODELFILE_VERSION);
    p = s_put_cfg(p, cfg);
    p = s_put64(p, (uint64_t)updates);
    p = s_put64(p, n);
    p = s_put64(p, run);
    if (bneck) {
        p = s_put32(p, (uint32_t)cfg->bneck);
        p = s_put32(p, (uint32_t)cfg->bneck_k);
        s_put32(p, (uint32_t)cfg->split);
    }
    const float *arr[1] = { params };
    return s_write(path, h, bneck ? MODEL_HDR_LEN3 : MODEL_HDR_LEN, arr, 1, n, err, errlen);
}

/* A bottleneck's fields after a version 3 header (model file or
 * checkpoint): checked with the rest of the config; 0 or -1. */
static int s_get_bneck(const uint8_t **p, model_config_t *cfg, int with_split)
{
    cfg->bneck = (int)s_get32(p);
    cfg->bneck_k = (int)s_get32(p);
    if (with_split) cfg->split = (model_split_t)s_get32(p);
    char why[200];
    return cfg->bneck > 0 && model_check(cfg, why, sizeof why) == 0 ? 0 : -1;
}

/* Opens path and reads a header of hlen bytes with the given magic and a
 * format version from oldest to version (the one read in *got, may be NULL). */
static FILE *s_open_versions(const char *path, const char *magic, uint32_t oldest, uint32_t version, uint32_t *got,
                             uint8_t *h, size_t hlen, const char *what, char *err, size_t errlen)
{
    int fd = open(path, O_RDONLY | O_NONBLOCK);   /* a pipe must not hold the open */
    FILE *fp = fd >= 0 ? fdopen(fd, "rb") : NULL;
    if (!fp) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        if (fd >= 0) close(fd);
        return NULL;
    }
    struct stat sb;
    if (fstat(fd, &sb) == 0 && !S_ISREG(sb.st_mode)) {
        snprintf(err, errlen, "%s: not a file (a folder, a device or a pipe)", path);
    } else if (fread(h, 1, hlen, fp) != hlen) {
        snprintf(err, errlen, "%s: truncated header", path);
    } else if (memcmp(h, magic, 8) != 0) {
        snprintf(err, errlen, "%s: not a brigade %s (bad magic)", path, what);
    } else {
        const uint8_t *p = h + 8;
        uint32_t v = s_get32(&p);
        if (got) *got = v;
        if (v >= oldest && v <= version) return fp;
        snprintf(err, errlen, "%s: format version %u, this brigade reads %u", path, v, version);
    }
    fclose(fp);
    return NULL;
}

/* s_open_versions of one format version. */
static FILE *s_open(const char *path, const char *magic, uint32_t version, uint8_t *h, size_t hlen,
                    const char *what, char *err, size_t errlen)
{
    return s_open_versions(path, magic, version, version, NULL, h, hlen, what, err, errlen);
}

float *modelfile_load(const char *path, model_config_t *cfg, int64_t *updates, uint64_t *run, size_t *n,
                      char *err, size_t errlen)
{
    uint8_t h[MODEL_HDR_LEN3];
    uint32_t v = 0;
    FILE *fp = s_open_versions(path, "BRGDMODL", 1, MODELFILE_VERSION_BNECK, &v, h, MODEL_HDR_LEN1, "model file", err,
                               errlen);
    if (!fp) return NULL;
    size_t hlen = v == 1 ? MODEL_HDR_LEN1 : v == 2 ? MODEL_HDR_LEN : MODEL_HDR_LEN3;
    if (hlen > MODEL_HDR_LEN1 && fread(h + MODEL_HDR_LEN1, 1, hlen - MODEL_HDR_LEN1, fp) != hlen - MODEL_HDR_LEN1) {
        snprintf(err, errlen, "%s: truncated header", path);
        fclose(fp);
        return NULL;
    }
    const uint8_t *p = h + 12;
    float *x = NULL;
    if (s_get_cfg(&p, cfg) < 0) {
        snprintf(err, errlen, "%s: invalid model config", path);
    } else {
        *updates = (int64_t)s_get64(&p);
        uint64_t count = s_get64(&p);
        uint64_t id = v == 1 ? 0 : s_get64(&p);
        if (run) *run = id;
        int bad = v == MODELFILE_VERSION_BNECK && s_get_bneck(&p, cfg, 1) < 0;
        size_t want = bad ? 0 : model_num_params(cfg);
        if (bad)
            snprintf(err, errlen, "%s: invalid bottleneck (S %d at the cuts of %d stages)", path, cfg->bneck, cfg->bneck_k);
        else if (*updates < 0)   /* a version below 0 would index solo's weight rings before their start */
            snprintf(err, errlen, "%s: invalid update count %lld", path, (long long)*updates);
        else if (count != want)
            snprintf(err, errlen, "%s: %llu parameters, the config needs %zu", path, (unsigned long long)count, want);
        else if ((x = s_read_body(fp, path, h, hlen, want, err, errlen)))
            *n = want;
    }
    fclose(fp);
    return x;
}

int checkpoint_save(const char *path, const checkpoint_info_t *info, const float *params,
                    const float *m, const float *v, size_t n, char *err, size_t errlen)
{
    uint8_t h[CKPT_HDR_LEN3], *p = h;
    int bneck = info->cfg.bneck > 0;   /* only a model with a bottleneck needs version 3 */
    memcpy(p, "BRGDCKPT", 8); p += 8;
    p = s_put32(p, bneck ? CHECKPOINT_VERSION_BNECK : CHECKPOINT_VERSION);
    p = s_put_cfg(p, &info->cfg);
    p = s_put64(p, info->run);
    p = s_put32(p, (uint32_t)info->stage);
    p = s_put32(p, (uint32_t)info->nstages);
    p = s_put32(p, (uint32_t)info->cfg.split);
    p = s_put64(p, (uint64_t)info->version);
    p = s_put64(p, info->cursor);
    p = s_put64(p, info->completed);
    p = s_put64(p, n);
    if (bneck) {
        p = s_put32(p, (uint32_t)info->cfg.bneck);
        s_put32(p, (uint32_t)info->cfg.bneck_k);
    }
    const float *arr[3] = { params, m, v };
    return s_write(path, h, bneck ? CKPT_HDR_LEN3 : CKPT_HDR_LEN, arr, 3, n, err, errlen);
}

float *checkpoint_load(const char *path, checkpoint_info_t *info, size_t *n, char *err, size_t errlen)
{
    uint8_t h[CKPT_HDR_LEN3];
    uint32_t ver = 0;
    FILE *fp = s_open_versions(path, "BRGDCKPT", CHECKPOINT_VERSION, CHECKPOINT_VERSION_BNECK, &ver, h, CKPT_HDR_LEN,
                               "checkpoint", err, errlen);
    if (!fp) return NULL;
    size_t hlen = ver == CHECKPOINT_VERSION_BNECK ? CKPT_HDR_LEN3 : CKPT_HDR_LEN;
    if (hlen > CKPT_HDR_LEN && fread(h + CKPT_HDR_LEN, 1, hlen - CKPT_HDR_LEN, fp) != hlen - CKPT_HDR_LEN) {
        snprintf(err, errlen, "%s: truncated header", path);
        fclose(fp);
        return NULL;
    }
    const uint8_t *p = h + 12;
    float *x = NULL;
    memset(info, 0, sizeof *info);
    if (s_get_cfg(&p, &info->cfg) < 0) {
        snprintf(err, errlen, "%s: invalid model config", path);
        fclose(fp);
        return NULL;
    }
    info->run = s_get64(&p);
    info->stage = (int)s_get32(&p);
    info->nstages = (int)s_get32(&p);
    info->cfg.split = (model_split_t)s_get32(&p);
    info->version = (int64_t)s_get64(&p);
    info->cursor = s_get64(&p);
    info->completed = s_get64(&p);
    uint64_t count = s_get64(&p);
    stage_t s;
    char why[200];
    if (ver == CHECKPOINT_VERSION_BNECK && s_get_bneck(&p, &info->cfg, 0) < 0) {
        snprintf(err, errlen, "%s: invalid bottleneck", path);
    } else if (stage_init(&s, &info->cfg, info->stage, info->nstages, why, sizeof why) < 0) {
        snprintf(err, errlen, "%s: invalid stage split", path);
    } else if (info->version < 0 || info->version > CKPT_VERSION_MAX || info->completed > CKPT_COMPLETED_MAX) {
        /* (the CRC checks what was written, not that a writer was honest: a rewritten one restarted a 3-step
         * run as complete) */
        snprintf(err, errlen, "%s: invalid weight version %lld or completed count %llu", path, (long long)info->version,
                 (unsigned long long)info->completed);
    } else if (count != s.nparams) {
        snprintf(err, errlen, "%s: %llu parameters, stage %d needs %zu", path, (unsigned long long)count, info->stage, s.nparams);
    } else if ((x = s_read_body(fp, path, h, hlen, 3 * s.nparams, err, errlen))) {
        *n = s.nparams;
    }
    fclose(fp);
    return x;
}

int ckpt_extra_save(const char *path, uint64_t run, int64_t version, int64_t floor, const float *x, size_t n,
                    char *err, size_t errlen)
{
    uint8_t h[EXTRA_HDR_LEN], *p = h;
    memcpy(p, "BRGDSXTR", 8); p += 8;
    p = s_put32(p, CKPT_EXTRA_VERSION);
    p = s_put64(p, run);
    p = s_put64(p, (uint64_t)version);
    p = s_put64(p, (uint64_t)floor);
    s_put64(p, n);
    const float *arr[1] = { x };
    return s_write(path, h, sizeof h, arr, 1, n, err, errlen);
}

float *ckpt_extra_load(const char *path, uint64_t run, int64_t version, int64_t *floor, size_t n, char *err,
                       size_t errlen)
{
    uint8_t h[EXTRA_HDR_LEN];
    FILE *fp = s_open(path, "BRGDSXTR", CKPT_EXTRA_VERSION, h, sizeof h, "checkpoint's extra state", err, errlen);
    if (!fp) return NULL;
    const uint8_t *p = h + 12;
    uint64_t r = s_get64(&p);
    int64_t v = (int64_t)s_get64(&p), f = (int64_t)s_get64(&p);
    uint64_t count = s_get64(&p);
    float *x = NULL;
    if (r != run || v != version)
        snprintf(err, errlen, "%s: of another checkpoint (version %lld, the checkpoint's %lld)", path, (long long)v,
                 (long long)version);
    else if (count != n || f < 0 || f > v)
        snprintf(err, errlen, "%s: %llu values from version %lld, this run keeps %zu", path, (unsigned long long)count,
                 (long long)f, n);
    else if ((x = s_read_body(fp, path, h, sizeof h, n, err, errlen)))
        *floor = f;
    fclose(fp);
    return x;
}

/* Takes the lock of checkpoint folder dir (checkpoint_find).  The
 * descriptor, or -1 with the reason in why. */
static int s_lock_folder(const char *dir, char *why, size_t whylen)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/.lock", dir);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) { snprintf(why, whylen, "%s: %s", path, strerror(errno)); return -1; }
    if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
        int e = errno;
        char pid[24] = "";
        ssize_t k = e == EWOULDBLOCK ? pread(fd, pid, sizeof pid - 1, 0) : 0;
        pid[k > 0 ? k : 0] = '\0';
        pid[strcspn(pid, "\n")] = '\0';
        if (e == EWOULDBLOCK)
            snprintf(why, whylen, "in use by another brigade process%s%s%s; use another folder", pid[0] ? " (pid " : "", pid,
                     pid[0] ? ")" : "");
        else snprintf(why, whylen, "%s: %s", path, strerror(e));
        close(fd);
        return -1;
    }
    char pid[24];
    int len = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
    if (ftruncate(fd, 0) < 0 || pwrite(fd, pid, (size_t)len, 0) != len) { /* the pid is only for the message above */ }
    return fd;
}

/* Removes dir/stage.ckpt.tmp.PID and dir/stage.ckpt.solo.tmp.PID files:
 * saves cut short (a process killed between its write and its rename).
 * Only the holder of the folder's lock saves into it, so none of them is
 * being written. */
static void s_sweep_tmp(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return;
    static const char prefix[] = "stage.ckpt", extra[] = ".solo";
    for (struct dirent *e; (e = readdir(d));) {
        const char *rest = e->d_name + sizeof prefix - 1;
        if (strncmp(e->d_name, prefix, sizeof prefix - 1) != 0) continue;
        if (strncmp(rest, extra, sizeof extra - 1) == 0) rest += sizeof extra - 1;
        if (strncmp(rest, ".tmp.", 5) != 0) continue;
        char p[4096];
        if ((size_t)snprintf(p, sizeof p, "%s/%s", dir, e->d_name) < sizeof p) unlink(p);
    }
    closedir(d);
}

int checkpoint_find(const char *dir, char *path, size_t pathlen, checkpoint_info_t *info, float **state, size_t *n,
                    int *lock, char *err, size_t errlen)
{
    char why[400];
    *state = NULL;
    *lock = -1;
    snprintf(path, pathlen, "%s/stage.ckpt", dir);
    int bad = mkdir(dir, 0755) < 0 && errno != EEXIST;
    if (bad) snprintf(why, sizeof why, "%s", strerror(errno));
    else bad = modelfile_check_writable(path, why, sizeof why) < 0;   /* a file named dir, a read-only folder */
    if (!bad) bad = (*lock = s_lock_folder(dir, why, sizeof why)) < 0;
    if (bad) {
        snprintf(err, errlen, "--checkpoint %s: %s", dir, why);
        return -1;
    }
    s_sweep_tmp(dir);
    struct stat sb;
    if (stat(path, &sb) < 0) return 0;
    if (!(*state = checkpoint_load(path, info, n, why, sizeof why))) {
        snprintf(err, errlen, "--checkpoint %s: %s (move it away or use another folder)", dir, why);
        close(*lock);
        *lock = -1;
        return -1;
    }
    return 1;
}
