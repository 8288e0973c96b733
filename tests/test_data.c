/* test_data.c: the data sources of node/data.h: synthetic tokens and images,
 * text files and folders, Fashion-MNIST (the installed files and broken
 * copies written to a temporary folder). */
#include "node/engine/data.h"
#include "tests/check.h"
/* RUN() in check.h puts "else x; y;" on one line */
#pragma GCC diagnostic ignored "-Wmisleading-indentation"

#include <ftw.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#define FMNIST_DIR "/usr/share/datasets/fashion-mnist"

static char tmpdir[256];   /* this run's scratch folder */

/* ------------------------------------------------------------ helpers */

static int s_rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st; (void)flag; (void)ftw;
    return remove(path);
}

static void s_rmtree(const char *path)
{
    nftw(path, s_rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* path = tmpdir/name in a static ring of buffers */
static const char *s_path(const char *name)
{
    static char buf[8][512];
    static int at;
    char *p = buf[at++ % 8];
    snprintf(p, 512, "%s/%s", tmpdir, name);
    return p;
}

static void s_write(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f) { perror(path); exit(1); }
    if (n && fwrite(data, 1, n, f) != n) { perror(path); exit(1); }
    fclose(f);
}

static void s_write_fill(const char *path, int byte, size_t n)
{
    char *buf = malloc(n ? n : 1);
    memset(buf, byte, n);
    s_write(path, buf, n);
    free(buf);
}

static uint64_t s_fnv(const void *p, size_t n)
{
    const uint8_t *b = p;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

static int s_cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static int s_same_batch(const batch_t *a, const batch_t *b)
{
    size_t n = (size_t)a->B * a->T;
    if (a->tokens && memcmp(a->tokens, b->tokens, n * sizeof(int))) return 0;
    if (a->x && memcmp(a->x, b->x, (size_t)a->B * 784 * sizeof(float))) return 0;
    return memcmp(a->targets, b->targets, (a->tokens ? n : (size_t)a->B) * sizeof(int)) == 0;
}

/* every target is the next token and every value a byte */
static int s_tokens_ok(const batch_t *b)
{
    for (int s = 0; s < b->B; s++) {
        const int *tok = b->tokens + (size_t)s * b->T, *tgt = b->targets + (size_t)s * b->T;
        for (int t = 0; t < b->T; t++) {
            if (tok[t] < 0 || tok[t] > 255 || tgt[t] < 0 || tgt[t] > 255) return 0;
            if (t + 1 < b->T && tgt[t] != tok[t + 1]) return 0;
        }
    }
    return 1;
}

/* -------------------------------------------------- synthetic tokens */

static void test_synthetic_tokens_deterministic(void)
{
    char err[256] = "";
    data_t *a = data_open("synthetic", DATA_TOKENS, 32, 7, err, sizeof(err));
    data_t *b = data_open("synthetic", DATA_TOKENS, 32, 7, err, sizeof(err));
    data_t *c = data_open("synthetic", DATA_TOKENS, 32, 8, err, sizeof(err));
    CHECKF(a && b && c, "%s", err);
    if (!a || !b || !c) return;
    CHECK(data_kind(a) == DATA_TOKENS);
    CHECK(data_classes(a) == 256);
    CHECK(data_dim(a) == 0);
    batch_t x, y, z;
    CHECK(data_batch_alloc(a, &x, 8) == 0);
    CHECK(data_batch_alloc(a, &y, 8) == 0);
    CHECK(data_batch_alloc(c, &z, 8) == 0);
    CHECK(x.B == 8 && x.T == 32 && x.tokens && x.targets && !x.x);

    uint64_t ca = 0, cb = 0, cc = 0;
    for (int step = 0; step < 5; step++) {
        data_next_train(a, &x, 0, 2, &ca);
        data_next_train(b, &y, 0, 2, &cb);
        data_next_train(c, &z, 0, 2, &cc);
        CHECK(s_same_batch(&x, &y));      /* same seed: same batches */
        CHECK(!s_same_batch(&x, &z));     /* another seed: other data */
        CHECK(s_tokens_ok(&x));
    }
    CHECK(ca == 40 && cb == 40);

    /* a cursor is reached without replaying the batches before it */
    uint64_t k = 16;
    data_next_train(a, &x, 1, 2, &k);
    uint64_t r = 0;
    for (int i = 0; i < 3; i++) data_next_train(b, &y, 1, 2, &r);
    CHECK(k == 24 && r == 24);
    CHECK(s_same_batch(&x, &y));

    /* other shard, same cursor: other windows */
    k = 16;
    data_next_train(a, &y, 0, 2, &k);
    CHECK(!s_same_batch(&x, &y));

    /* the alphabet is small and the stream uses most of it */
    int seen[256] = {0}, distinct = 0;
    for (int i = 0; i < 50; i++) {
        data_next_train(a, &x, 0, 1, &ca);
        for (int j = 0; j < 8 * 32; j++) seen[x.tokens[j]]++;
    }
    for (int v = 0; v < 256; v++) distinct += seen[v] > 0;
    CHECKF(distinct >= 12 && distinct <= 16, "%d distinct bytes", distinct);

    /* validation is fixed */
    int nv = data_val_batches(a, 8);
    CHECK(nv >= 1);
    data_val_batch(a, &x, nv - 1);
    data_val_batch(b, &y, nv - 1);
    CHECK(s_same_batch(&x, &y));
    CHECK(s_tokens_ok(&x));

    data_batch_free(&x);
    data_batch_free(&y);
    data_batch_free(&z);
    CHECK(x.tokens == NULL && x.targets == NULL);
    data_close(&a);
    data_close(&b);
    data_close(&c);
    CHECK(a == NULL);
}

/* Cross-entropy (nats) on the validation windows of an order-k model
 * (k = 0, 1, 2 previous bytes) fit by counting on training batches, with
 * add-0.01 smoothing over 256 bytes. */
static double s_order_k_loss(data_t *d, int k, int T)
{
    size_t nctx = (size_t)1 << (8 * k);
    float *cnt = calloc(nctx * 256, sizeof(float));
    float *tot = calloc(nctx, sizeof(float));
    batch_t b;
    if (!cnt || !tot || data_batch_alloc(d, &b, 64) != 0) { free(cnt); free(tot); return 99; }
    uint64_t cur = 0;
    for (int step = 0; step < 60; step++) {
        data_next_train(d, &b, 0, 1, &cur);
        for (int s = 0; s < b.B; s++) {
            const int *tok = b.tokens + (size_t)s * T, *tgt = b.targets + (size_t)s * T;
            for (int t = 1; t < T; t++) {
                size_t ctx = k == 0 ? 0 : k == 1 ? (size_t)tok[t] : (size_t)tok[t - 1] << 8 | (size_t)tok[t];
                cnt[ctx * 256 + (size_t)tgt[t]] += 1;
                tot[ctx] += 1;
            }
        }
    }
    double loss = 0;
    long n = 0;
    int nv = data_val_batches(d, b.B);
    for (int i = 0; i < nv; i++) {
        data_val_batch(d, &b, i);
        for (int s = 0; s < b.B; s++) {
            const int *tok = b.tokens + (size_t)s * T, *tgt = b.targets + (size_t)s * T;
            for (int t = 1; t < T; t++) {
                size_t ctx = k == 0 ? 0 : k == 1 ? (size_t)tok[t] : (size_t)tok[t - 1] << 8 | (size_t)tok[t];
                double p = (cnt[ctx * 256 + (size_t)tgt[t]] + 0.01) / (tot[ctx] + 2.56);
                loss -= log(p);
                n++;
            }
        }
    }
    data_batch_free(&b);
    free(cnt);
    free(tot);
    return loss / (double)n;
}

static void test_synthetic_tokens_learnable(void)
{
    char err[256] = "";
    int T = 64;
    data_t *d = data_open("synthetic", DATA_TOKENS, T, 1, err, sizeof(err));
    CHECKF(d, "%s", err);
    if (!d) return;
    double h0 = s_order_k_loss(d, 0, T);
    double h1 = s_order_k_loss(d, 1, T);
    double h2 = s_order_k_loss(d, 2, T);
    printf("  synthetic held-out loss of count models: order0 %.3f order1 %.3f order2 %.3f "
           "(chain entropy 0.802, ln 256 = 5.545)\n", h0, h1, h2);
    CHECK(h0 > 2.0 && h0 < 2.78);   /* about uniform over 16 letters */
    CHECK(h1 < h0 - 0.3);           /* the previous byte helps */
    CHECK(h2 < 1.0);                /* two previous bytes: near the 0.80 floor */
    CHECK(h2 < h1 - 0.1);           /* which the previous byte alone does not reach */
    CHECK(h2 > 0.7);                /* but not trivially predictable */
    data_close(&d);
}

/* -------------------------------------------------- synthetic images */

static void test_synthetic_images(void)
{
    char err[256] = "";
    data_t *d = data_open("synthetic", DATA_IMAGES, 0, 3, err, sizeof(err));
    data_t *d2 = data_open("synthetic", DATA_IMAGES, 0, 3, err, sizeof(err));
    CHECKF(d && d2, "%s", err);
    if (!d || !d2) return;
    CHECK(data_kind(d) == DATA_IMAGES && data_dim(d) == 784 && data_classes(d) == 10);
    CHECK(data_val_batches(d, 1) == 10000);
    CHECK(data_val_batches(d, 100) == 100);

    batch_t b, b2;
    CHECK(data_batch_alloc(d, &b, 500) == 0 && data_batch_alloc(d2, &b2, 500) == 0);
    CHECK(b.T == 1 && b.x && b.targets && !b.tokens);

    /* one epoch over 3 shards: 60000 distinct samples, 6000 per class */
    uint64_t *hash = malloc(60000 * sizeof(uint64_t));
    int count[10] = {0}, bad = 0, nh = 0;
    double mean[10][784];
    memset(mean, 0, sizeof(mean));
    for (int shard = 0; shard < 3; shard++) {
        uint64_t cur = 0, cur2 = 0;
        for (int step = 0; step < 40; step++) {
            data_next_train(d, &b, shard, 3, &cur);
            if (step == 0 || step == 39) {
                data_next_train(d2, &b2, shard, 3, &cur2);
                CHECK(s_same_batch(&b, &b2));
            } else {
                cur2 = cur;
            }
            for (int s = 0; s < b.B; s++) {
                int y = b.targets[s];
                if (y < 0 || y >= 10) { bad++; continue; }
                count[y]++;
                const float *x = b.x + (size_t)s * 784;
                for (int j = 0; j < 784; j++) {
                    if (!(x[j] >= 0.0f && x[j] <= 1.0f)) bad++;
                    mean[y][j] += x[j];
                }
                hash[nh++] = s_fnv(x, 784 * sizeof(float));
            }
        }
        CHECK(cur == 20000);
    }
    CHECK(bad == 0);
    for (int c = 0; c < 10; c++) CHECKF(count[c] == 6000, "class %d: %d", c, count[c]);
    qsort(hash, (size_t)nh, sizeof(uint64_t), s_cmp_u64);
    int dups = 0;
    for (int i = 1; i < nh; i++) dups += hash[i] == hash[i - 1];
    CHECKF(dups == 0, "%d repeated samples in one epoch", dups);
    free(hash);

    /* the next epoch is another order */
    uint64_t cur = 0, cur2 = 60000;
    data_next_train(d, &b, 0, 1, &cur);
    data_next_train(d, &b2, 0, 1, &cur2);
    CHECK(!s_same_batch(&b, &b2));

    /* learnable: nearest class mean classifies the validation set */
    for (int c = 0; c < 10; c++)
        for (int j = 0; j < 784; j++) mean[c][j] /= 6000.0;
    int right = 0, total = 0;
    for (int i = 0; i < data_val_batches(d, b.B); i++) {
        data_val_batch(d, &b, i);
        for (int s = 0; s < b.B; s++) {
            const float *x = b.x + (size_t)s * 784;
            int best = -1;
            double bestd = 1e30;
            for (int c = 0; c < 10; c++) {
                double dist = 0;
                for (int j = 0; j < 784; j++) dist += (x[j] - mean[c][j]) * (x[j] - mean[c][j]);
                if (dist < bestd) { bestd = dist; best = c; }
            }
            right += best == b.targets[s];
            total++;
        }
    }
    printf("  synthetic images: nearest-mean validation accuracy %.4f\n", (double)right / total);
    CHECK(total == 10000);
    CHECK(right > 9500);   /* about 9856 */
    CHECK(right < 10000);  /* but not trivially separable */
    data_batch_free(&b);
    data_batch_free(&b2);
    data_close(&d);
    data_close(&d2);
}

/* --------------------------------------------------------------- text */

static void test_text_file(void)
{
    const char *path = s_path("counting.txt");
    enum { N = 10000 };
    static uint8_t buf[N];
    for (int i = 0; i < N; i++) buf[i] = (uint8_t)(i % 251);
    s_write(path, buf, N);
    char spec[600], err[512] = "";
    snprintf(spec, sizeof(spec), "text:%s", path);
    int T = 16;
    data_t *d = data_open(spec, DATA_TOKENS, T, 5, err, sizeof(err));
    CHECKF(d, "%s", err);
    if (!d) return;
    /* validation: the last 500 bytes as 29 windows of 17 */
    CHECK(data_val_batches(d, 1) == 29);
    CHECK(data_val_batches(d, 10) == 2);
    CHECK(data_val_batches(d, 64) == 1);
    batch_t b;
    CHECK(data_batch_alloc(d, &b, 10) == 0);
    for (int i = 0; i < 2; i++) {
        data_val_batch(d, &b, i);
        CHECK(s_tokens_ok(&b));
        for (int s = 0; s < b.B; s++) {
            int start = 9500 + (i * 10 + s) * 17;
            for (int t = 0; t < T; t++) {
                CHECK(b.tokens[s * T + t] == (start + t) % 251);
                CHECK(b.targets[s * T + t] == (start + t + 1) % 251);
            }
        }
    }
    /* training windows are contiguous runs of the file */
    uint64_t cur = 0;
    int bad = 0;
    for (int step = 0; step < 100; step++) {
        data_next_train(d, &b, 0, 1, &cur);
        if (!s_tokens_ok(&b)) bad++;
        for (int s = 0; s < b.B; s++)
            for (int t = 0; t < T; t++)
                bad += b.targets[s * T + t] != (b.tokens[s * T + t] + 1) % 251;
    }
    CHECK(bad == 0);
    data_batch_free(&b);
    data_close(&d);

    /* kind mismatch */
    d = data_open(spec, DATA_IMAGES, 0, 5, err, sizeof(err));
    CHECK(d == NULL && strstr(err, "text"));
}

static void test_text_shards(void)
{
    /* byte p is p mod 3: the first token of a window is its offset mod 3 */
    const char *path = s_path("mod3.txt");
    enum { N = 3000 };
    static uint8_t buf[N];
    for (int i = 0; i < N; i++) buf[i] = (uint8_t)(i % 3);
    s_write(path, buf, N);
    char spec[600], err[512] = "";
    snprintf(spec, sizeof(spec), "text:%s", path);
    int T = 8;
    data_t *d = data_open(spec, DATA_TOKENS, T, 11, err, sizeof(err));
    CHECKF(d, "%s", err);
    if (!d) return;
    batch_t b, b2;
    CHECK(data_batch_alloc(d, &b, 32) == 0 && data_batch_alloc(d, &b2, 32) == 0);
    for (int shard = 0; shard < 3; shard++) {
        uint64_t cur = 0;
        int wrong = 0;
        for (int step = 0; step < 10; step++) {
            data_next_train(d, &b, shard, 3, &cur);
            for (int s = 0; s < b.B; s++) wrong += b.tokens[s * T] != shard;
        }
        CHECKF(wrong == 0, "shard %d: %d windows of another shard", shard, wrong);
    }
    /* one shard: every residue, and different cursors give different windows */
    uint64_t cur = 0;
    int res[3] = {0};
    data_next_train(d, &b, 0, 1, &cur);
    for (int s = 0; s < b.B; s++) res[b.tokens[s * T]]++;
    CHECK(res[0] > 0 && res[1] > 0 && res[2] > 0);
    data_next_train(d, &b2, 0, 1, &cur);
    CHECK(!s_same_batch(&b, &b2));
    data_batch_free(&b);
    data_batch_free(&b2);
    data_close(&d);
}

static void test_text_folder(void)
{
    /* z/: a (4000 'a'), a.dat (2000 'c', skipped), b -> a (symlink, skipped),
     * .hidden (skipped), sub/y (4000 'y'), big (sparse 65 MiB, skipped) */
    char dir[512];
    snprintf(dir, sizeof(dir), "%s", s_path("z"));
    mkdir(dir, 0700);
    mkdir(s_path("z/sub"), 0700);
    mkdir(s_path("z/empty"), 0700);
    s_write_fill(s_path("z/sub/y"), 'y', 4000);
    s_write_fill(s_path("z/a"), 'a', 4000);
    s_write_fill(s_path("z/a.dat"), 'c', 2000);
    s_write_fill(s_path("z/.hidden"), 'h', 2000);
    CHECK(symlink("a", s_path("z/b")) == 0);
    FILE *f = fopen(s_path("z/big"), "wb");
    CHECK(f && ftruncate(fileno(f), (off_t)65 << 20) == 0);
    if (f) fclose(f);

    char spec[600], err[512] = "";
    snprintf(spec, sizeof(spec), "text:%s", dir);
    int T = 3;
    data_t *d = data_open(spec, DATA_TOKENS, T, 2, err, sizeof(err));
    CHECKF(d, "%s", err);
    if (!d) return;
    /* 8000 bytes -> 400 validation bytes -> 100 windows of 4 */
    CHECKF(data_val_batches(d, 1) == 100, "%d validation windows", data_val_batches(d, 1));
    batch_t b;
    CHECK(data_batch_alloc(d, &b, 100) == 0);
    data_val_batch(d, &b, 0);
    int ny = 0;
    for (int i = 0; i < 100 * T; i++) ny += b.tokens[i] == 'y';
    CHECK(ny == 100 * T);   /* sub/y sorts after a: it is the tail */
    uint64_t cur = 0;
    int na = 0, other = 0;
    for (int step = 0; step < 20; step++) {
        data_next_train(d, &b, 0, 1, &cur);
        for (int i = 0; i < 100 * T; i++) {
            na += b.tokens[i] == 'a';
            other += b.tokens[i] != 'a' && b.tokens[i] != 'y';
        }
    }
    CHECK(other == 0);
    CHECK(na > 20 * 100 * T / 3 && na < 20 * 100 * T * 2 / 3);
    data_batch_free(&b);
    data_close(&d);
    /* the folder of the empty folder alone is too small */
    snprintf(spec, sizeof(spec), "text:%s", s_path("z/empty"));
    d = data_open(spec, DATA_TOKENS, T, 2, err, sizeof(err));
    CHECK(d == NULL && strstr(err, "z/empty") && strstr(err, "0 bytes"));
}

static void test_text_fortunes(void)
{
    char err[512] = "";
    data_t *d = data_open("text:/usr/share/games/fortunes", DATA_TOKENS, 64, 1, err, sizeof(err));
    CHECKF(d, "%s", err);
    if (!d) return;
    int nv = data_val_batches(d, 1);
    printf("  fortunes: %d validation windows of 65 bytes\n", nv);
    CHECK(nv > 500);
    batch_t b;
    CHECK(data_batch_alloc(d, &b, 16) == 0);
    uint64_t cur = 0;
    data_next_train(d, &b, 0, 1, &cur);
    CHECK(s_tokens_ok(&b));
    data_batch_free(&b);
    data_close(&d);
}

static void test_text_errors(void)
{
    char spec[600], err[512] = "";
    int T = 10;
    /* 2 x (T+1) - 1 bytes: too small; 2 x (T+1): enough */
    s_write_fill(s_path("small.txt"), 'q', 21);
    snprintf(spec, sizeof(spec), "text:%s", s_path("small.txt"));
    data_t *d = data_open(spec, DATA_TOKENS, T, 1, err, sizeof(err));
    CHECK(d == NULL);
    CHECKF(strstr(err, "small.txt") && strstr(err, "21 bytes") && strstr(err, "22"), "%s", err);
    s_write_fill(s_path("small.txt"), 'q', 22);
    d = data_open(spec, DATA_TOKENS, T, 1, err, sizeof(err));
    CHECKF(d != NULL, "%s", err);
    if (d) {
        CHECK(data_val_batches(d, 1) == 1);
        batch_t b;
        CHECK(data_batch_alloc(d, &b, 4) == 0);
        data_val_batch(d, &b, 0);   /* one window, repeated to fill the batch */
        uint64_t cur = 0;
        data_next_train(d, &b, 1, 2, &cur);   /* one start offset only: shared */
        CHECK(s_tokens_ok(&b) && b.tokens[0] == 'q');
        data_batch_free(&b);
        data_close(&d);
    }
    /* empty file */
    s_write_fill(s_path("empty.txt"), 0, 0);
    snprintf(spec, sizeof(spec), "text:%s", s_path("empty.txt"));
    d = data_open(spec, DATA_TOKENS, T, 1, err, sizeof(err));
    CHECK(d == NULL && strstr(err, "empty.txt") && strstr(err, "0 bytes"));
    /* missing */
    snprintf(spec, sizeof(spec), "text:%s", s_path("nope.txt"));
    d = data_open(spec, DATA_TOKENS, T, 1, err, sizeof(err));
    CHECK(d == NULL && strstr(err, "nope.txt") && strstr(err, "No such file"));
    /* no path, unknown spec, bad T */
    d = data_open("text:", DATA_TOKENS, T, 1, err, sizeof(err));
    CHECK(d == NULL && strstr(err, "text"));
    d = data_open("mnist", DATA_IMAGES, T, 1, err, sizeof(err));
    CHECK(d == NULL && strstr(err, "mnist"));
    d = data_open("synthetic", DATA_TOKENS, 0, 1, err, sizeof(err));
    CHECK(d == NULL && strstr(err, "T=0"));
    /* a tiny error buffer is not overrun */
    char tiny[8];
    memset(tiny, 'x', sizeof(tiny));
    d = data_open("nonsense", DATA_TOKENS, T, 1, tiny, 4);
    CHECK(d == NULL && tiny[3] == '\0' && tiny[4] == 'x');
}

/* ------------------------------------------------------------ fmnist */

static void test_fmnist_real(void)
{
    char err[512] = "";
    data_t *d = data_open("fmnist", DATA_IMAGES, 0, 1, err, sizeof(err));
    CHECKF(d, "%s (package dataset-fashion-mnist)", err);
    if (!d) return;
    CHECK(data_dim(d) == 784 && data_classes(d) == 10);
    CHECK(data_val_batches(d, 1) == 10000);
    CHECK(data_val_batches(d, 100) == 100);
    CHECK(data_val_batches(d, 64) == 156);
    batch_t b;
    CHECK(data_batch_alloc(d, &b, 1000) == 0);
    int vc[10] = {0}, bad = 0;
    double sum = 0;
    for (int i = 0; i < 10; i++) {
        data_val_batch(d, &b, i);
        for (int s = 0; s < b.B; s++) {
            if (b.targets[s] < 0 || b.targets[s] > 9) { bad++; continue; }
            vc[b.targets[s]]++;
        }
        for (int j = 0; j < b.B * 784; j++) {
            if (!(b.x[j] >= 0.0f && b.x[j] <= 1.0f)) bad++;
            sum += b.x[j];
        }
    }
    CHECK(bad == 0);
    for (int c = 0; c < 10; c++) CHECK(vc[c] == 1000);   /* t10k: 1000 per class */
    double m = sum / (10000.0 * 784);
    CHECKF(m > 0.2 && m < 0.4, "mean pixel %f", m);        /* about 0.286 */
    /* one training epoch in 60 batches of 1000: 6000 per class */
    int tc[10] = {0};
    uint64_t cur = 0;
    for (int i = 0; i < 60; i++) {
        data_next_train(d, &b, 0, 1, &cur);
        for (int s = 0; s < b.B; s++) {
            if (b.targets[s] < 0 || b.targets[s] > 9) { bad++; continue; }
            tc[b.targets[s]]++;
        }
    }
    CHECK(bad == 0);
    for (int c = 0; c < 10; c++) CHECKF(tc[c] == 6000, "class %d: %d", c, tc[c]);
    data_batch_free(&b);
    data_close(&d);
    d = data_open("fmnist:" FMNIST_DIR, DATA_TOKENS, 64, 1, err, sizeof(err));
    CHECK(d == NULL && strstr(err, "fmnist"));
}

/* An IDX file: magic, dims, then payload; gzip'd unless raw. */
static void s_write_idx(const char *name, uint32_t magic, int ndims, const uint32_t *dims,
                        const uint8_t *payload, size_t n)
{
    uint8_t hdr[16];
    uint32_t words[4] = {magic, dims[0], ndims > 1 ? dims[1] : 0, ndims > 2 ? dims[2] : 0};
    for (int w = 0; w < 1 + ndims; w++)
        for (int k = 0; k < 4; k++) hdr[w * 4 + k] = (uint8_t)(words[w] >> (24 - 8 * k));
    gzFile f = gzopen(s_path(name), "wb");
    if (!f) { perror(name); exit(1); }
    gzwrite(f, hdr, (unsigned)(4 + 4 * ndims));
    if (n) gzwrite(f, payload, (unsigned)n);
    gzclose(f);
}

enum { NTR = 20, NTE = 10 };

/* a valid small set in tmpdir/fm, with per-case damage */
typedef struct {
    uint32_t img_magic, lab_magic;   /* 0x803, 0x801 */
    uint32_t rows;                   /* 28 */
    int img_count, img_have;         /* header count, images written (train) */
    int lab_count;                   /* train labels in header and written */
    int bad_label;                   /* writes a label 10 */
} s_fm_t;

static void s_write_fmnist(const s_fm_t *c)
{
    static uint8_t px[NTR * 784], lab[NTR];
    for (int i = 0; i < NTR * 784; i++) px[i] = (uint8_t)(i * 7);
    for (int i = 0; i < NTR; i++) lab[i] = (uint8_t)(i % 10);
    if (c->bad_label) lab[3] = 10;
    uint32_t d3[3] = {(uint32_t)c->img_count, c->rows, 28};
    uint32_t d1[1] = {(uint32_t)c->lab_count};
    s_write_idx("fm/train-images-idx3-ubyte.gz", c->img_magic, 3, d3, px, (size_t)c->img_have * 784);
    s_write_idx("fm/train-labels-idx1-ubyte.gz", c->lab_magic, 1, d1, lab, (size_t)c->lab_count);
    uint32_t t3[3] = {NTE, 28, 28}, t1[1] = {NTE};
    s_write_idx("fm/t10k-images-idx3-ubyte.gz", 0x803, 3, t3, px, NTE * 784);
    s_write_idx("fm/t10k-labels-idx1-ubyte.gz", 0x801, 1, t1, lab, NTE);
}

static s_fm_t s_fm_ok(void)
{
    s_fm_t c = {0x803, 0x801, 28, NTR, NTR, NTR, 0};
    return c;
}

/* opens tmpdir/fm; expects failure with an error naming file and saying what */
static int s_fm_fails(const char *file, const char *what)
{
    char spec[600], err[512] = "";
    snprintf(spec, sizeof(spec), "fmnist:%s", s_path("fm"));
    data_t *d = data_open(spec, DATA_IMAGES, 0, 1, err, sizeof(err));
    if (d) {
        data_close(&d);
        printf("  opened a broken set (%s: %s)\n", file, what);
        return 0;
    }
    int ok = strstr(err, file) != NULL && strstr(err, what) != NULL && !strchr(err, '\n');
    printf("  %s: %s\n", ok ? "refused" : "WRONG MESSAGE", err);
    return ok;
}

static void test_fmnist_invalid(void)
{
    mkdir(s_path("fm"), 0700);
    char spec[600], err[512] = "";
    snprintf(spec, sizeof(spec), "fmnist:%s", s_path("fm"));

    /* the undamaged small set opens */
    s_fm_t c = s_fm_ok();
    s_write_fmnist(&c);
    data_t *d = data_open(spec, DATA_IMAGES, 0, 1, err, sizeof(err));
    CHECKF(d, "%s", err);
    if (d) {
        CHECK(data_val_batches(d, 1) == NTE);
        batch_t b;
        CHECK(data_batch_alloc(d, &b, NTE) == 0);
        data_val_batch(d, &b, 0);
        CHECK(b.targets[3] == 3);
        CHECK_NEAR(b.x[1], (float)7 / 255.0f, 1e-6);
        data_batch_free(&b);
        data_close(&d);
    }

    c = s_fm_ok(); c.img_have = NTR / 2;   /* header says 20, 10 present */
    s_write_fmnist(&c);
    CHECK(s_fm_fails("train-images-idx3-ubyte.gz", "truncated (expected 15680 pixel bytes, got 7840)"));

    c = s_fm_ok(); c.img_magic = 0x801;
    s_write_fmnist(&c);
    CHECK(s_fm_fails("train-images-idx3-ubyte.gz", "magic"));

    c = s_fm_ok(); c.lab_magic = 0x803;
    s_write_fmnist(&c);
    CHECK(s_fm_fails("train-labels-idx1-ubyte.gz", "magic"));

    c = s_fm_ok(); c.rows = 27;
    s_write_fmnist(&c);
    CHECK(s_fm_fails("train-images-idx3-ubyte.gz", "27x28"));

    c = s_fm_ok(); c.lab_count = NTR - 1;
    s_write_fmnist(&c);
    CHECK(s_fm_fails("train-labels-idx1-ubyte.gz", "19 labels"));

    c = s_fm_ok(); c.bad_label = 1;
    s_write_fmnist(&c);
    CHECK(s_fm_fails("train-labels-idx1-ubyte.gz", "label 10"));

    c = s_fm_ok(); c.img_count = 0; c.img_have = 0;
    s_write_fmnist(&c);
    CHECK(s_fm_fails("train-images-idx3-ubyte.gz", "count 0"));

    /* a gzip stream cut in the middle */
    c = s_fm_ok();
    s_write_fmnist(&c);
    struct stat st;
    const char *ti = s_path("fm/t10k-images-idx3-ubyte.gz");
    CHECK(stat(ti, &st) == 0 && truncate(ti, st.st_size / 2) == 0);
    CHECK(s_fm_fails("t10k-images-idx3-ubyte.gz", "truncated"));

    /* not gzip at all */
    s_write_fmnist(&c);
    uint8_t junk[3000];
    for (int i = 0; i < 3000; i++) junk[i] = (uint8_t)(i * 131 + 17);
    s_write(s_path("fm/t10k-labels-idx1-ubyte.gz"), junk, sizeof(junk));
    CHECK(s_fm_fails("t10k-labels-idx1-ubyte.gz", "not a gzip file"));

    /* gzip header then garbage */
    s_write_fmnist(&c);
    junk[0] = 0x1f; junk[1] = 0x8b; junk[2] = 8; junk[3] = 0;
    s_write(s_path("fm/t10k-labels-idx1-ubyte.gz"), junk, sizeof(junk));
    CHECK(s_fm_fails("t10k-labels-idx1-ubyte.gz", "t10k-labels"));

    /* empty file */
    s_write_fmnist(&c);
    s_write(s_path("fm/train-labels-idx1-ubyte.gz"), junk, 0);
    CHECK(s_fm_fails("train-labels-idx1-ubyte.gz", "empty"));

    /* missing file */
    s_write_fmnist(&c);
    CHECK(remove(s_path("fm/t10k-labels-idx1-ubyte.gz")) == 0);
    CHECK(s_fm_fails("t10k-labels-idx1-ubyte.gz", "No such file"));

    /* missing folder */
    d = data_open("fmnist:/nowhere", DATA_IMAGES, 0, 1, err, sizeof(err));
    CHECK(d == NULL && strstr(err, "/nowhere/train-images-idx3-ubyte.gz"));
}

/* Writes an llm.c shard of n tokens t0, t0+1, ... (mod 500) at path: uint16
 * (wide 0) or uint32 (wide 1). */
static void s_token_shard(const char *path, int n, int t0, int wide)
{
    int32_t h[256] = { wide ? 20240801 : 20240520, wide ? 7 : 1, n };
    FILE *f = fopen(path, "wb");
    fwrite(h, sizeof h, 1, f);
    for (int i = 0; i < n; i++) {
        uint32_t t = (uint32_t)((t0 + i) % 500);
        uint16_t s = (uint16_t)t;
        if (wide) fwrite(&t, 4, 1, f); else fwrite(&s, 2, 1, f);
    }
    fclose(f);
}

/* tokens:DIR reads llm.c shards of both widths in name order, holds out the
 * shards named *val* (else the last 5%), reads windows across shard
 * boundaries, and reports its largest token and where it is. */
static void test_token_shards(void)
{
    char dir[600], path[700], spec[700], err[400];
    snprintf(dir, sizeof dir, "%s/tok", tmpdir);
    mkdir(dir, 0755);
    snprintf(path, sizeof path, "%s/a_train_1.bin", dir);
    s_token_shard(path, 300, 0, 0);
    snprintf(path, sizeof path, "%s/a_train_2.bin", dir);
    s_token_shard(path, 200, 300, 1);
    snprintf(path, sizeof path, "%s/a_val_0.bin", dir);
    s_token_shard(path, 100, 7, 0);
    snprintf(spec, sizeof spec, "tokens:%s", dir);
    int T = 16;
    data_t *d = data_open(spec, DATA_TOKENS, T, 1, err, sizeof err);
    CHECKF(d != NULL, "%s", err);
    if (!d) return;
    CHECK(data_val_tokens(d) == 100 && data_classes(d) == 500);
    const char *file;
    uint64_t at;
    CHECK(data_token_max(d, &file, &at) == 499 && strstr(file, "a_train_2.bin") && at == 1024 + 199 * 4);
    batch_t b;
    CHECK(data_batch_alloc(d, &b, 1) == 0);
    data_val_window(d, &b, 0, 5);
    for (int t = 0; t < T; t++) CHECK(b.tokens[t] == 12 + t && b.targets[t] == 13 + t);
    uint64_t cursor = 0;
    int crossed = 0;
    for (int k = 0; k < 400; k++) {   /* every training window is consecutive, the ones across the shards too */
        data_next_train(d, &b, 0, 1, &cursor);
        for (int t = 0; t < T; t++) CHECK(b.targets[t] == (b.tokens[0] + t + 1) % 500 && b.tokens[t] < 500);
        crossed |= b.tokens[0] < 300 && b.tokens[T - 1] >= 300;
    }
    CHECK(crossed);
    data_batch_free(&b);
    data_close(&d);
    snprintf(path, sizeof path, "%s/a_val_0.bin", dir);   /* without val shards: the last 5% */
    unlink(path);
    d = data_open(spec, DATA_TOKENS, T, 1, err, sizeof err);
    CHECKF(d && data_val_tokens(d) == 25, "%s", d ? "wrong split" : err);
    data_close(&d);
    s_token_shard(path, 10, 0, 0);   /* a val shard too short for a window */
    d = data_open(spec, DATA_TOKENS, T, 1, err, sizeof err);
    CHECKF(!d && strstr(err, "held-out"), "%s", d ? "opened" : err);
    data_close(&d);
}

int main(void)
{
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/brigade-test-data-XXXXXX");
    if (!mkdtemp(tmpdir)) { perror("mkdtemp"); return 1; }
    RUN(test_synthetic_tokens_deterministic);
    RUN(test_synthetic_tokens_learnable);
    RUN(test_synthetic_images);
    RUN(test_text_file);
    RUN(test_text_shards);
    RUN(test_text_folder);
    RUN(test_text_fortunes);
    RUN(test_text_errors);
    RUN(test_token_shards);
    RUN(test_fmnist_real);
    RUN(test_fmnist_invalid);
    s_rmtree(tmpdir);
    CHECK_EXIT();
}
