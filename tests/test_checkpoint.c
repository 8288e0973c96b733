/* test_checkpoint: stage checkpoints and solo's extra state beside them
 * (node/engine/modelfile.h): read back as written, saved atomically, and a
 * damaged or out-of-range file refused with a reason. */
#include "tests/check.h"
#include "tests/runtime_fixture.h"
#include "node/engine/modelfile.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char s_dir[64];

static void s_path(char *out, size_t len, const char *name)
{
    snprintf(out, len, "%s/%s", s_dir, name);
}

static long s_file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (long)st.st_size : -1;
}

static int s_rewrite(const char *path, long off, uint8_t xor_mask, long truncate_to)
{
    FILE *fp = fopen(path, "r+b");
    if (!fp) return -1;
    if (xor_mask) {
        fseek(fp, off, SEEK_SET);
        int ch = fgetc(fp);
        fseek(fp, off, SEEK_SET);
        fputc((ch ^ xor_mask) & 0xFF, fp);
    }
    fclose(fp);
    if (truncate_to >= 0 && truncate(path, truncate_to) != 0) return -1;
    return 0;
}

typedef struct {
    checkpoint_info_t info;
    size_t n;
    float *p, *m, *v;
} ckpt_case_t;

static int s_ckpt_case(ckpt_case_t *k)
{
    memset(k, 0, sizeof *k);
    char err[256];
    if (model_preset(&k->info.cfg, "gpt-tiny", err, sizeof err) < 0) return -1;
    k->info.cfg.L = 3;
    k->info.cfg.split = SPLIT_LATE;
    stage_t s;
    if (stage_init(&s, &k->info.cfg, 1, 3, err, sizeof err) < 0) return -1;
    k->info.run = 0xFEDCBA9876543210ull;
    k->info.stage = 1;
    k->info.nstages = 3;
    k->info.version = 4242;
    k->info.cursor = 0x1122334455667788ull;
    k->info.completed = 987654321ull;
    k->n = s.nparams;
    k->p = malloc(sizeof(float) * k->n);
    k->m = malloc(sizeof(float) * k->n);
    k->v = malloc(sizeof(float) * k->n);
    for (size_t i = 0; i < k->n; i++) {
        k->p[i] = sinf((float)i) * 0.1f;
        k->m[i] = (float)i * 1e-7f - 0.25f;
        k->v[i] = 1.0f / (float)(i + 1);
    }
    k->p[0] = -0.0f;
    k->v[k->n - 1] = 1e-38f;
    return 0;
}

static void s_ckpt_free(ckpt_case_t *k)
{
    free(k->p); free(k->m); free(k->v);
}

static void test_checkpoint_roundtrip(void)
{
    ckpt_case_t k;
    CHECK(s_ckpt_case(&k) == 0);
    char path[128], err[512] = "";
    s_path(path, sizeof path, "stage.ckpt");
    CHECKF(checkpoint_save(path, &k.info, k.p, k.m, k.v, k.n, err, sizeof err) == 0, "%s", err);
    CHECK(s_file_size(path) > (long)(3 * k.n * sizeof(float)));
    checkpoint_info_t got;
    size_t n = 0;
    float *x = checkpoint_load(path, &got, &n, err, sizeof err);
    CHECKF(x != NULL, "%s", err);
    if (x) {
        CHECK(n == k.n);
        CHECK(memcmp(x, k.p, n * sizeof(float)) == 0);
        CHECK(memcmp(x + n, k.m, n * sizeof(float)) == 0);
        CHECK(memcmp(x + 2 * n, k.v, n * sizeof(float)) == 0);
        CHECK(got.run == k.info.run);
        CHECK(got.stage == 1 && got.nstages == 3 && got.cfg.split == SPLIT_LATE);
        CHECK(got.version == 4242);
        CHECK(got.cursor == k.info.cursor);
        CHECK(got.completed == k.info.completed);
        CHECK(got.cfg.kind == k.info.cfg.kind && got.cfg.L == 3 && got.cfg.C == k.info.cfg.C
              && got.cfg.NH == k.info.cfg.NH && got.cfg.maxT == k.info.cfg.maxT && got.cfg.V == k.info.cfg.V);
        CHECK(strcmp(got.cfg.name, "gpt-tiny") == 0);
        free(x);
    }
    /* overwriting is atomic: a second save replaces the first, no temp file left */
    k.info.version = 4243;
    CHECK(checkpoint_save(path, &k.info, k.p, k.m, k.v, k.n, err, sizeof err) == 0);
    x = checkpoint_load(path, &got, &n, err, sizeof err);
    CHECK(x && got.version == 4243);
    free(x);
    char tmpname[160];
    snprintf(tmpname, sizeof tmpname, "%s.tmp.%d", path, (int)getpid());
    CHECK(access(tmpname, F_OK) != 0);
    /* a version or completed count no run reaches, with a valid CRC (a rewritten file): refused (one restarted
     * a 3-step run as complete, or at update 2^63) */
    int64_t versions[] = { CKPT_VERSION_MAX + 1, 7 };
    uint64_t completed[] = { 0, UINT64_MAX };
    for (int i = 0; i < 2; i++) {
        k.info.version = versions[i];
        k.info.completed = completed[i];
        CHECK(checkpoint_save(path, &k.info, k.p, k.m, k.v, k.n, err, sizeof err) == 0);
        err[0] = 0;
        x = checkpoint_load(path, &got, &n, err, sizeof err);
        CHECKF(!x && strstr(err, "invalid weight version"), "version %lld, completed %llu: %s", (long long)versions[i],
               (unsigned long long)completed[i], x ? "loaded" : err);
        free(x);
    }
    s_ckpt_free(&k);
}

/* solo's extra state beside a checkpoint: read back as written; one of
 * another version or run, another size or with a flipped byte is refused
 * with a reason naming the file (a save cut short between the two files
 * leaves one of another version). */
static void test_checkpoint_extra(void)
{
    char path[128], err[512] = "";
    s_path(path, sizeof path, "stage.ckpt.solo");
    float x[100];
    for (int i = 0; i < 100; i++) x[i] = (float)i * 0.5f - 7.0f;
    CHECKF(ckpt_extra_save(path, 77, 12, 9, x, 100, err, sizeof err) == 0, "%s", err);
    int64_t floor = -1;
    float *y = ckpt_extra_load(path, 77, 12, &floor, 100, err, sizeof err);
    CHECKF(y && floor == 9 && memcmp(x, y, sizeof x) == 0, "read back: %s", y ? "other values" : err);
    free(y);
    const struct { uint64_t run; int64_t version; size_t n; const char *why; } bad[] = {
        { 77, 15, 100, "of another checkpoint" }, { 78, 12, 100, "of another checkpoint" }, { 77, 12, 99, "this run keeps 99" } };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        err[0] = '\0';
        y = ckpt_extra_load(path, bad[k].run, bad[k].version, &floor, bad[k].n, err, sizeof err);
        CHECKF(!y && strstr(err, path) && strstr(err, bad[k].why), "case %zu: '%s'", k, err);
        free(y);
    }
    FILE *f = fopen(path, "r+b");
    CHECK(f && fseek(f, 60, SEEK_SET) == 0 && fputc(0x55, f) != EOF);
    if (f) fclose(f);
    y = ckpt_extra_load(path, 77, 12, &floor, 100, err, sizeof err);
    CHECKF(!y && strstr(err, "checksum"), "a flipped byte: '%s'", y ? "read" : err);
    free(y);
}

static void test_checkpoint_damaged(void)
{
    ckpt_case_t k;
    CHECK(s_ckpt_case(&k) == 0);
    char path[128], err[512];
    s_path(path, sizeof path, "bad.ckpt");
    long size = 0;
    checkpoint_info_t got;
    size_t n;
    /* a flipped byte in the tensors, in a header counter, in the CRC itself */
    long offs[3] = { 0, 0, 0 };
    CHECK(checkpoint_save(path, &k.info, k.p, k.m, k.v, k.n, err, sizeof err) == 0);
    size = s_file_size(path);
    offs[0] = size - 4 - (long)(k.n * sizeof(float)) - 3;   /* inside m */
    offs[1] = 8 + 4 + 52 + 8 + 4 + 4 + 4 + 8 + 8 + 2;       /* inside `completed` */
    offs[2] = size - 2;                                     /* the CRC */
    for (int t = 0; t < 3; t++) {
        CHECK(checkpoint_save(path, &k.info, k.p, k.m, k.v, k.n, err, sizeof err) == 0);
        CHECK(s_rewrite(path, offs[t], 0x10, -1) == 0);
        err[0] = 0;
        float *x = checkpoint_load(path, &got, &n, err, sizeof err);
        CHECKF(x == NULL, "flip at %ld accepted", offs[t]);
        CHECKF(strstr(err, "checksum") != NULL, "flip at %ld: '%s'", offs[t], err);
        CHECK(strstr(err, path) != NULL);
        free(x);
    }
    /* truncated: in the body, in the CRC, in the header, empty */
    long cuts[4] = { size - 100, size - 1, 20, 0 };
    for (int t = 0; t < 4; t++) {
        CHECK(checkpoint_save(path, &k.info, k.p, k.m, k.v, k.n, err, sizeof err) == 0);
        CHECK(s_rewrite(path, 0, 0, cuts[t]) == 0);
        err[0] = 0;
        float *x = checkpoint_load(path, &got, &n, err, sizeof err);
        CHECKF(x == NULL, "cut at %ld accepted", cuts[t]);
        CHECKF(strstr(err, "truncated") != NULL, "cut at %ld: '%s'", cuts[t], err);
        free(x);
    }
    /* wrong magic: a model file, and garbage */
    CHECK(checkpoint_save(path, &k.info, k.p, k.m, k.v, k.n, err, sizeof err) == 0);
    CHECK(s_rewrite(path, 4, 0x01, -1) == 0);
    float *x = checkpoint_load(path, &got, &n, err, sizeof err);
    CHECK(x == NULL && strstr(err, "magic") != NULL);
    free(x);
    char mpath[128];
    s_path(mpath, sizeof mpath, "whole.model");
    CHECK(modelfile_save(mpath, &k.info.cfg, 3, 0, k.p, k.n, err, sizeof err) == 0);
    x = checkpoint_load(mpath, &got, &n, err, sizeof err);
    CHECK(x == NULL && strstr(err, "magic") != NULL);
    free(x);
    /* a missing file */
    s_path(path, sizeof path, "missing.ckpt");
    x = checkpoint_load(path, &got, &n, err, sizeof err);
    CHECK(x == NULL && strstr(err, "missing.ckpt") != NULL);
    free(x);
    s_ckpt_free(&k);
}

static void test_checkpoint_bad_values(void)
{
    /* a checkpoint whose split does not fit its config is refused even with
     * a valid checksum */
    ckpt_case_t k;
    CHECK(s_ckpt_case(&k) == 0);
    char path[128], err[512];
    s_path(path, sizeof path, "split.ckpt");
    checkpoint_info_t bad = k.info, got;
    bad.stage = 5;   /* of 3 */
    CHECK(checkpoint_save(path, &bad, k.p, k.m, k.v, k.n, err, sizeof err) == 0);
    size_t n;
    float *x = checkpoint_load(path, &got, &n, err, sizeof err);
    CHECK(x == NULL);
    free(x);
    bad = k.info;
    bad.stage = 0;   /* stage 0 holds a different number of parameters */
    CHECK(checkpoint_save(path, &bad, k.p, k.m, k.v, k.n, err, sizeof err) == 0);
    x = checkpoint_load(path, &got, &n, err, sizeof err);
    CHECK(x == NULL && strstr(err, "parameters") != NULL);
    free(x);
    s_ckpt_free(&k);
}

int main(void)
{
    if (fixture_tmpdir(s_dir, sizeof s_dir, "checkpoint") < 0) return 1;
    RUN(test_checkpoint_roundtrip);
    RUN(test_checkpoint_extra);
    RUN(test_checkpoint_damaged);
    RUN(test_checkpoint_bad_values);
    fixture_rmdir(s_dir);
    CHECK_EXIT();
}
