/* modelfile.c: whole-model files (modelfile.h). */
#include "node/modelfile.h"
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

_Static_assert(sizeof(float) == 4, "float must be IEEE-754 binary32");
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "modelfile.c writes floats in host order and assumes a little-endian host"
#endif

static const char s_magic[8] = { 'B', 'R', 'G', 'D', 'M', 'O', 'D', 'L' };
#define HDR_LEN (8 + 4 + 7 * 4 + 24 + 8 + 8)

size_t model_num_params(const model_config_t *cfg)
{
    stage_t s;
    char err[128];
    if (stage_init(&s, cfg, 0, 1, err, sizeof err) < 0) return 0;
    return s.nparams;
}

static void s_put32(uint8_t *p, uint32_t v) { for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i)); }
static void s_put64(uint8_t *p, uint64_t v) { for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i)); }
static uint32_t s_get32(const uint8_t *p) { uint32_t v = 0; for (int i = 0; i < 4; i++) v |= (uint32_t)p[i] << (8 * i); return v; }
static uint64_t s_get64(const uint8_t *p) { uint64_t v = 0; for (int i = 0; i < 8; i++) v |= (uint64_t)p[i] << (8 * i); return v; }

int modelfile_save(const char *path, const model_config_t *cfg, int64_t updates,
                   const float *params, size_t n, char *err, size_t errlen)
{
    uint8_t h[HDR_LEN] = {0}, *p = h;
    memcpy(p, s_magic, 8); p += 8;
    s_put32(p, MODELFILE_VERSION); p += 4;
    int32_t f[7] = { cfg->kind, cfg->V, cfg->maxT, cfg->C, cfg->L, cfg->NH, cfg->D };
    for (int i = 0; i < 7; i++) { s_put32(p, (uint32_t)f[i]); p += 4; }
    memcpy(p, cfg->name, strnlen(cfg->name, 23)); p += 24;
    s_put64(p, (uint64_t)updates); p += 8;
    s_put64(p, n); p += 8;
    uLong crc = crc32(0L, h, HDR_LEN);
    crc = crc32_z(crc, (const Bytef *)params, n * sizeof(float));
    uint8_t tail[4];
    s_put32(tail, (uint32_t)crc);

    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) { snprintf(err, errlen, "%s: %s", path, strerror(errno)); return -1; }
    FILE *fp = fdopen(fd, "wb");
    int ok = fp && fwrite(h, 1, HDR_LEN, fp) == HDR_LEN && fwrite(params, sizeof(float), n, fp) == n
             && fwrite(tail, 1, 4, fp) == 4 && fflush(fp) == 0 && fsync(fd) == 0;
    int saved = errno;
    if (fp) fclose(fp); else close(fd);
    if (!ok || rename(tmp, path) < 0) {
        snprintf(err, errlen, "%s: write failed: %s", path, strerror(ok ? errno : saved));
        unlink(tmp);
        return -1;
    }
    return 0;
}

float *modelfile_load(const char *path, model_config_t *cfg, int64_t *updates, size_t *n,
                      char *err, size_t errlen)
{
    FILE *fp = fopen(path, "rb");
    if (!fp) { snprintf(err, errlen, "%s: %s", path, strerror(errno)); return NULL; }
    uint8_t h[HDR_LEN];
    float *params = NULL;
    if (fread(h, 1, HDR_LEN, fp) != HDR_LEN) { snprintf(err, errlen, "%s: truncated header", path); goto fail; }
    if (memcmp(h, s_magic, 8) != 0) { snprintf(err, errlen, "%s: not a brigade model file (bad magic)", path); goto fail; }
    const uint8_t *p = h + 8;
    uint32_t ver = s_get32(p); p += 4;
    if (ver != MODELFILE_VERSION) { snprintf(err, errlen, "%s: format version %u, this brigade reads %d", path, ver, MODELFILE_VERSION); goto fail; }
    memset(cfg, 0, sizeof *cfg);
    int32_t f[7];
    for (int i = 0; i < 7; i++) { f[i] = (int32_t)s_get32(p); p += 4; }
    cfg->kind = (model_kind_t)f[0]; cfg->V = f[1]; cfg->maxT = f[2]; cfg->C = f[3];
    cfg->L = f[4]; cfg->NH = f[5]; cfg->D = f[6];
    memcpy(cfg->name, p, 23); p += 24;
    *updates = (int64_t)s_get64(p); p += 8;
    uint64_t count = s_get64(p);
    char why[200];
    if ((cfg->kind != MODEL_GPT && cfg->kind != MODEL_MLP) || model_check(cfg, why, sizeof why) < 0
        || (cfg->kind == MODEL_GPT && (cfg->V != 256)) || (cfg->kind == MODEL_MLP && (cfg->V < 2 || cfg->V > 100000 || cfg->D < 1 || cfg->D > 1 << 20))) {
        snprintf(err, errlen, "%s: invalid model config", path);
        goto fail;
    }
    size_t want = model_num_params(cfg);
    if (count != want) { snprintf(err, errlen, "%s: %llu parameters, the config needs %zu", path, (unsigned long long)count, want); goto fail; }
    params = malloc(want * sizeof(float));
    if (!params) { snprintf(err, errlen, "%s: out of memory", path); goto fail; }
    uint8_t tail[4];
    if (fread(params, sizeof(float), want, fp) != want || fread(tail, 1, 4, fp) != 4) {
        snprintf(err, errlen, "%s: truncated (expected %zu parameters)", path, want);
        goto fail;
    }
    uLong crc = crc32(0L, h, HDR_LEN);
    crc = crc32_z(crc, (const Bytef *)params, want * sizeof(float));
    if ((uint32_t)crc != s_get32(tail)) { snprintf(err, errlen, "%s: checksum mismatch (file damaged)", path); goto fail; }
    fclose(fp);
    *n = want;
    return params;
fail:
    free(params);
    fclose(fp);
    return NULL;
}
