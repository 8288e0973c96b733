/* gpt2file.c: GPT-2 checkpoints in safetensors and llm.c's format (gpt2file.h). */
#include "node/engine/gpt2file.h"
#include "net/wire.h"   /* le_get32, le_put32 */
#include "node/engine/modelfile.h"
#include "node/engine/safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "gpt2file.c writes floats in host order and assumes a little-endian host"
#endif

/* llm.c's tensors, in its order; a block's are model.c's block order. */
enum { LC_WTE, LC_WPE, LC_BLK0, LC_LNFW = LC_BLK0 + 12, LC_LNFB, LC_N };

static const char *const s_blk_name[12] = {
    "ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias", "attn.c_proj.weight", "attn.c_proj.bias",
    "ln_2.weight", "ln_2.bias", "mlp.c_fc.weight", "mlp.c_fc.bias", "mlp.c_proj.weight", "mlp.c_proj.bias" };

/* One tensor of the 1-stage layout, as the files know it. */
typedef struct {
    char name[64];      /* Hugging Face's name */
    uint64_t rows, cols;/* brigade's (out, in) shape; rows 0 for a vector of cols */
    int conv;           /* stored (in, out) in a safetensors (Conv1D) */
    int lc, layer;      /* llm.c tensor and block (-1 outside blocks) */
    int head;           /* the head: tied to wte where the file has none */
} s_desc_t;

/* Describes tensor i of unit u of gpt c. */
static void s_desc(const model_config_t *c, int u, int i, s_desc_t *d)
{
    uint64_t C = (uint64_t)c->C, V = (uint64_t)c->V;
    memset(d, 0, sizeof *d);
    d->layer = -1;
    if (u == 0) {
        snprintf(d->name, sizeof d->name, i == 0 ? "wte.weight" : "wpe.weight");
        d->rows = i == 0 ? V : (uint64_t)c->maxT;
        d->cols = C;
        d->lc = i == 0 ? LC_WTE : LC_WPE;
    } else if (u >= MODEL_CUT_UNIT) {   /* a bottleneck's cut: nn.Linear's (out, in) matrices */
        static const char *const n[2][6] = {
            { "ln_1.weight", "ln_1.bias", "down.weight", "down.bias", "ln_2.weight", "ln_2.bias" },
            { "up.weight", "up.bias" } };
        int up = (u - MODEL_CUT_UNIT) % 2;
        uint64_t w = (uint64_t)model_cut_width(c);
        snprintf(d->name, sizeof d->name, "cut.%d.%s", (u - MODEL_CUT_UNIT) / 2, n[up][i]);
        d->rows = up ? (i == 0 ? C : 0) : (i == 2 ? w : 0);
        d->cols = up ? (i == 0 ? w : C) : (i < 3 ? C : w);
        d->lc = -1;
    } else if (u == c->L + 1) {
        static const char *const n[3] = { "ln_f.weight", "ln_f.bias", "lm_head.weight" };
        snprintf(d->name, sizeof d->name, "%s", n[i]);
        d->cols = C;
        d->rows = i == 2 ? V : 0;
        d->lc = i == 0 ? LC_LNFW : i == 1 ? LC_LNFB : LC_WTE;
        d->head = i == 2;
    } else {
        static const uint64_t out[12] = { 0, 0, 3, 0, 1, 0, 0, 0, 4, 0, 1, 0 };   /* rows in C of the matrices */
        static const uint64_t in[12] = { 1, 1, 1, 3, 1, 1, 1, 1, 1, 4, 4, 1 };    /* cols in C */
        snprintf(d->name, sizeof d->name, "h.%d.%s", u - 1, s_blk_name[i]);
        d->rows = out[i] * C;
        d->cols = in[i] * C;
        d->conv = d->rows > 0;
        d->lc = LC_BLK0 + i;
        d->layer = u - 1;
    }
}

/* A checkpoint being read. */
typedef struct {
    const char *name;   /* the file, for messages */
    int llmc;           /* llm.c's format, else safetensors */
    st_file_t st;       /* safetensors */
    const uint8_t *body;/* llm.c: the floats */
    int32_t h[8];       /* llm.c: magic, version, maxT, V, L, NH, C, Vp */
} s_src_t;

/* Offset in floats of llm.c tensor lc of block layer (0 outside blocks). */
static uint64_t s_lc_offset(const int32_t *h, int lc, int layer)
{
    uint64_t T = (uint64_t)h[2], L = (uint64_t)h[4], C = (uint64_t)h[6], Vp = (uint64_t)h[7];
    uint64_t per[12] = { C, C, 3 * C * C, 3 * C, C * C, C, C, C, 4 * C * C, 4 * C, 4 * C * C, C };
    uint64_t off = 0;
    for (int k = 0; k < lc; k++)
        off += k == LC_WTE ? Vp * C : k == LC_WPE ? T * C : k < LC_LNFW ? L * per[k - LC_BLK0] : C;
    return lc >= LC_BLK0 && lc < LC_LNFW ? off + (uint64_t)layer * per[lc - LC_BLK0] : off;
}

/* Floats llm.c's header h says follow it. */
static uint64_t s_lc_total(const int32_t *h)
{
    return s_lc_offset(h, LC_N, 0);
}

static float s_f32(const uint8_t *p)
{
    uint32_t b = le_get32(p);
    float x;
    memcpy(&x, &b, 4);
    return x;
}

/* Copies tensor d from an llm.c file into dst. */
static void s_fill_llmc(const s_src_t *src, const s_desc_t *d, float *dst)
{
    const uint8_t *p = src->body + 4 * s_lc_offset(src->h, d->lc, d->layer);
    uint64_t n = (d->rows ? d->rows : 1) * d->cols;   /* wte, wpe: the first rows of the file's */
    for (uint64_t k = 0; k < n; k++) dst[k] = s_f32(p + 4 * k);
}

/* Copies tensor d from a safetensors into dst; 1 when the file has no such
 * head (tied: the caller copies wte), 0, or -1 with a reason. */
static int s_fill_st(const s_src_t *src, const s_desc_t *d, float *dst, char *err, size_t errlen)
{
    const st_tensor_t *t = st_find(&src->st, d->name);
    if (!t && d->head) return 1;
    if (!t) {
        snprintf(err, errlen, "%s: no tensor %s", src->name, d->name);
        return -1;
    }
    int wpe = !strcmp(d->name, "wpe.weight");
    uint64_t r0 = d->conv ? d->cols : d->rows, r1 = d->conv ? d->rows : d->cols;
    int ok = d->rows == 0 ? t->ndim == 1 && t->shape[0] == d->cols
                          : t->ndim == 2 && (wpe ? t->shape[0] >= r0 : t->shape[0] == r0) && t->shape[1] == r1;
    if (!ok) {
        char have[96] = "", want[64];
        for (int k = 0, at = 0; k < t->ndim && at < 80; k++)
            at += snprintf(have + at, sizeof have - (size_t)at, "%s%llu", k ? "x" : "", (unsigned long long)t->shape[k]);
        if (d->rows) snprintf(want, sizeof want, "%s%llux%llu", wpe ? "at least " : "", (unsigned long long)r0,
                              (unsigned long long)r1);
        else snprintf(want, sizeof want, "%llu", (unsigned long long)d->cols);
        snprintf(err, errlen, "%s: tensor %s is %s, the model wants %s", src->name, t->name, t->ndim ? have : "a scalar",
                 want);
        return -1;
    }
    if (t->dtype == ST_OTHER) {
        snprintf(err, errlen, "%s: tensor %s: dtype not read here (F32, F16 or BF16)", src->name, t->name);
        return -1;
    }
    if (d->conv) {   /* (in, out) in the file: transposed */
        for (uint64_t r = 0; r < d->rows; r++)
            for (uint64_t k = 0; k < d->cols; k++) dst[r * d->cols + k] = st_get(&src->st, t, k * d->rows + r);
    } else {
        uint64_t n = (d->rows ? d->rows : 1) * d->cols;
        for (uint64_t k = 0; k < n; k++) dst[k] = st_get(&src->st, t, k);
    }
    return 0;
}

/* Reads llm.c's header; 0 or -1 with a reason. */
static int s_llmc_open(s_src_t *src, const uint8_t *buf, size_t len, char *err, size_t errlen)
{
    if (len < LLMC_HEADER_BYTES) {
        snprintf(err, errlen, "%s: cut short: %zu bytes, less than llm.c's 1024-byte header", src->name, len);
        return -1;
    }
    for (int k = 0; k < 8; k++) src->h[k] = (int32_t)le_get32(buf + 4 * k);
    static const char *const field[8] = { "magic", "version", "max_seq_len", "vocab_size", "num_layers", "num_heads",
                                          "channels", "padded_vocab_size" };
    if ((uint32_t)src->h[1] != LLMC_VERSION) {
        snprintf(err, errlen, "%s: llm.c model version %d, this brigade reads %u (fp32)", src->name, src->h[1],
                 LLMC_VERSION);
        return -1;
    }
    for (int k = 2; k < 8; k++)
        if (src->h[k] < 1 || src->h[k] > (1 << 24)) {
            snprintf(err, errlen, "%s: llm.c header: %s %d out of range", src->name, field[k], src->h[k]);
            return -1;
        }
    if (src->h[7] < src->h[3]) {
        snprintf(err, errlen, "%s: llm.c header: padded_vocab_size %d below vocab_size %d", src->name, src->h[7], src->h[3]);
        return -1;
    }
    uint64_t want = LLMC_HEADER_BYTES + 4 * s_lc_total(src->h);
    if ((uint64_t)len != want) {
        snprintf(err, errlen, "%s: %s: %zu bytes, its header says %llu", src->name,
                 (uint64_t)len < want ? "cut short" : "longer than its header says", len, (unsigned long long)want);
        return -1;
    }
    src->body = buf + LLMC_HEADER_BYTES;
    return 0;
}

/* Blocks of a safetensors: h.0 .. h.(n-1) all have ln_1.weight. */
static int s_st_layers(const st_file_t *f)
{
    int n = 0;
    char name[64];
    for (;; n++) {
        snprintf(name, sizeof name, "h.%d.ln_1.weight", n);
        if (!st_find(f, name) || n >= 128) return n;
    }
}

/* A bottleneck a safetensors' __metadata__ says (bottleneck S,
 * bottleneck_stages K, bottleneck_split RULE) into cfg; 0 or -1 with a
 * reason (the tensors are checked as the others, by name and shape). */
static int s_st_bneck(const s_src_t *src, model_config_t *cfg, char *err, size_t errlen)
{
    const char *b = st_meta(&src->st, "bottleneck"), *k = st_meta(&src->st, "bottleneck_stages");
    const char *r = st_meta(&src->st, "bottleneck_split");
    if (!b) return 0;
    cfg->bneck = atoi(b);
    cfg->bneck_k = k ? atoi(k) : 0;
    int rule = -1;
    for (int i = 0; i < 4 && r; i++)
        if (i != 2 && !strcmp(r, split_name((model_split_t)i))) rule = i;
    if (rule < 0 || cfg->bneck < 1 || cfg->bneck_k < 2) {
        snprintf(err, errlen, "%s: __metadata__ bottleneck %s at the cuts of %s stages split %s: not a bottleneck this "
                 "brigade reads", src->name, b, k ? k : "(none)", r ? r : "(none)");
        return -1;
    }
    cfg->split = (model_split_t)rule;
    return 0;
}

/* The model a safetensors holds into cfg; 0 or -1 with a reason. */
static int s_st_shape(const s_src_t *src, int heads, model_config_t *cfg, char *err, size_t errlen)
{
    const st_tensor_t *wte = st_find(&src->st, "wte.weight"), *wpe = st_find(&src->st, "wpe.weight");
    if (!wte || !wpe || wte->ndim != 2 || wpe->ndim != 2) {
        snprintf(err, errlen, "%s: no GPT-2 tensors wte.weight and wpe.weight (matrices)", src->name);
        return -1;
    }
    const char *nh = st_meta(&src->st, "n_head");
    int fnh = nh ? atoi(nh) : 0;
    if (fnh && heads && fnh != heads) {
        snprintf(err, errlen, "--heads %d: %s says n_head %d", heads, src->name, fnh);
        return -1;
    }
    if (!fnh && !heads) {
        snprintf(err, errlen, "%s: the head count is not in its __metadata__ (n_head): give --heads N", src->name);
        return -1;
    }
    memset(cfg, 0, sizeof *cfg);
    cfg->kind = MODEL_GPT;
    snprintf(cfg->name, sizeof cfg->name, "gpt2file");
    cfg->V = wte->shape[0] > MODEL_VOCAB_MAX ? -1 : (int)wte->shape[0];
    cfg->C = wte->shape[1] > 8192 ? -1 : (int)wte->shape[1];
    cfg->maxT = wpe->shape[0] > 4096 ? -1 : (int)wpe->shape[0];
    cfg->L = s_st_layers(&src->st);
    cfg->NH = fnh ? fnh : heads;
    return s_st_bneck(src, cfg, err, errlen);
}

/* Checks a fixed model against what the file says of it; 0 or -1. */
static int s_check_fixed(const s_src_t *src, int heads, const model_config_t *cfg, char *err, size_t errlen)
{
    if (src->llmc) {
        static const char *const field[4] = { "vocab_size", "num_layers", "num_heads", "channels" };
        static const char *const opt[4] = { "--vocab", "--layers", "--heads", "--dim" };
        int want[4] = { cfg->V, cfg->L, cfg->NH, cfg->C };
        for (int k = 0; k < 4; k++)
            if (src->h[3 + k] != want[k]) {
                snprintf(err, errlen, "%s: %s %d, the model has %d (%s)", src->name, field[k], src->h[3 + k], want[k],
                         opt[k]);
                return -1;
            }
        if (src->h[2] < cfg->maxT) {
            snprintf(err, errlen, "%s: max_seq_len %d, the model's context is %d (--ctx)", src->name, src->h[2], cfg->maxT);
            return -1;
        }
        return 0;
    }
    const char *nh = st_meta(&src->st, "n_head");
    int L = s_st_layers(&src->st);
    if ((nh && atoi(nh) != cfg->NH) || (heads && heads != cfg->NH)) {
        snprintf(err, errlen, "%s: n_head %d, the model has %d (--heads)", src->name, nh ? atoi(nh) : heads, cfg->NH);
        return -1;
    }
    if (L != cfg->L) {
        snprintf(err, errlen, "%s: holds %d blocks (h.0 ..), the model %d (--layers)", src->name, L, cfg->L);
        return -1;
    }
    model_config_t f = *cfg;
    f.bneck = f.bneck_k = 0;
    if (s_st_bneck(src, &f, err, errlen) < 0) return -1;
    if (f.bneck != cfg->bneck || (f.bneck && (f.bneck_k != cfg->bneck_k || f.split != cfg->split))) {
        snprintf(err, errlen, "%s: a bottleneck of %d at the cuts of %d stages (%s split), the model has %d at %d (--bottleneck, "
                 "--stages, --split)", src->name, f.bneck, f.bneck_k, split_name(f.split), cfg->bneck, cfg->bneck_k);
        return -1;
    }
    return 0;
}

/* Fills params (1-stage layout of cfg) from src; 0 or -1. */
static int s_fill_all(const s_src_t *src, const model_config_t *cfg, float *params, int *tied, char *err, size_t errlen)
{
    stage_t *s = malloc(sizeof *s);
    if (!s || stage_init(s, cfg, 0, 1, err, errlen) < 0) {
        if (!s) snprintf(err, errlen, "%s: out of memory", src->name);
        free(s);
        return -1;
    }
    int rc = 0, first = 0;
    *tied = src->llmc;
    for (int k = 0; k < s->ntensors && rc == 0; k++) {
        const param_tensor_t *t = &s->tensors[k];
        if (k == 0 || s->tensors[k - 1].unit != t->unit) first = k;
        s_desc_t d;
        s_desc(cfg, t->unit, k - first, &d);
        float *dst = params + t->offset;
        if (src->llmc) { s_fill_llmc(src, &d, dst); continue; }
        rc = s_fill_st(src, &d, dst, err, errlen);
        if (rc == 1) {   /* tied: the head is wte (unit 0's first tensor) */
            memcpy(dst, params + s->tensors[0].offset, sizeof(float) * t->size);
            *tied = 1;
            rc = 0;
        }
    }
    free(s);
    return rc;
}

float *gpt2file_read(const uint8_t *buf, size_t len, const char *name, int heads, model_config_t *cfg, int fixed,
                     int *tied, char *err, size_t errlen)
{
    s_src_t src = { .name = name };
    src.llmc = len >= 4 && le_get32(buf) == LLMC_MAGIC;
    int rc = src.llmc ? s_llmc_open(&src, buf, len, err, errlen) : st_parse(&src.st, buf, len, name, err, errlen);
    if (rc == 0 && fixed) rc = s_check_fixed(&src, heads, cfg, err, errlen);
    if (rc == 0 && !fixed && src.llmc) {
        if (heads && heads != src.h[5]) {
            snprintf(err, errlen, "--heads %d: %s says num_heads %d", heads, name, src.h[5]);
            rc = -1;
        }
        memset(cfg, 0, sizeof *cfg);
        cfg->kind = MODEL_GPT;
        snprintf(cfg->name, sizeof cfg->name, "gpt2file");
        cfg->maxT = src.h[2]; cfg->V = src.h[3]; cfg->L = src.h[4]; cfg->NH = src.h[5]; cfg->C = src.h[6];
    } else if (rc == 0 && !fixed) {
        rc = s_st_shape(&src, heads, cfg, err, errlen);
    }
    char why[200];
    if (rc == 0 && (cfg->kind != MODEL_GPT || model_check(cfg, why, sizeof why) < 0)) {
        snprintf(err, errlen, "%s: not a model brigade runs: %s", name, cfg->kind != MODEL_GPT ? "not a gpt" : why);
        rc = -1;
    }
    float *params = NULL;
    if (rc == 0) {
        size_t n = model_num_params(cfg);
        params = malloc(sizeof(float) * (n ? n : 1));
        if (!params) snprintf(err, errlen, "%s: out of memory for %zu parameters", name, n);
    }
    int t = 0;
    if (params && s_fill_all(&src, cfg, params, &t, err, errlen) < 0) {
        free(params);
        params = NULL;
    }
    if (tied) *tied = t;
    st_free(&src.st);
    return params;
}

/* Maps the regular file at path read-only: *len its size.  NULL with a reason. */
static uint8_t *s_map(const char *path, size_t *len, char *err, size_t errlen)
{
    int fd = open(path, O_RDONLY | O_NONBLOCK);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size == 0) {
        snprintf(err, errlen, "%s: %s", path, fd < 0 ? strerror(errno) : st.st_size == 0 && S_ISREG(st.st_mode)
                 ? "empty" : "not a file (a folder, a device or a pipe)");
        if (fd >= 0) close(fd);
        return NULL;
    }
    *len = (size_t)st.st_size;
    uint8_t *m = mmap(NULL, *len, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (m == MAP_FAILED) {
        snprintf(err, errlen, "%s: cannot map: %s", path, strerror(errno));
        return NULL;
    }
    return m;
}

float *gpt2file_load(const char *path, int heads, model_config_t *cfg, int fixed, int *tied, char *err,
                     size_t errlen)
{
    size_t len;
    uint8_t *m = s_map(path, &len, err, errlen);
    if (!m) return NULL;
    float *p = gpt2file_read(m, len, path, heads, cfg, fixed, tied, err, errlen);
    munmap(m, len);
    return p;
}

/* gpt2file_load (the file's model) and, from a safetensors' __metadata__
 * "brigade_run", the run id (0 when it has none). */
static float *s_load_foreign(const char *path, int heads, model_config_t *cfg, uint64_t *run, char *err, size_t errlen)
{
    size_t len;
    uint8_t *m = s_map(path, &len, err, errlen);
    if (!m) return NULL;
    float *p = gpt2file_read(m, len, path, heads, cfg, 0, NULL, err, errlen);
    st_file_t f;
    char why[200];
    int st = p && run && !(len >= 4 && le_get32(m) == LLMC_MAGIC);
    if (st && st_parse(&f, m, len, path, why, sizeof why) == 0) {
        const char *id = st_meta(&f, "brigade_run");
        *run = id ? strtoull(id, NULL, 16) : 0;
    }
    if (st) st_free(&f);
    munmap(m, len);
    return p;
}

float *gpt2file_load_any(const char *path, int heads, model_config_t *cfg, int64_t *updates, uint64_t *run,
                         char *err, size_t errlen)
{
    char magic[8] = { 0 };
    /* opened without blocking, so that a pipe is refused rather than waited on */
    int fd = open(path, O_RDONLY | O_NONBLOCK);
    struct stat st;
    if (fd >= 0 && fstat(fd, &st) == 0 && !S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "%s: not a file (a folder, a device or a pipe)", path);
        close(fd);
        return NULL;
    }
    if (fd >= 0) {
        if (read(fd, magic, 8) != 8) memset(magic, 0, 8);
        close(fd);
    }
    if (updates) *updates = 0;
    if (run) *run = 0;
    if (memcmp(magic, "BRGDMODL", 8) != 0) return s_load_foreign(path, heads, cfg, run, err, errlen);
    int64_t u;
    size_t n;
    float *p = modelfile_load(path, cfg, &u, run, &n, err, errlen);
    if (p && heads && heads != cfg->NH) {
        snprintf(err, errlen, "--heads %d: %s's model has %d heads", heads, path, cfg->NH);
        free(p);
        return NULL;
    }
    if (p && updates) *updates = u;
    return p;
}

int gpt2file_load_stage(const char *path, const model_config_t *cfg, int stage, int nstages, float *params,
                        char *err, size_t errlen)
{
    model_config_t c = *cfg;
    float *all = gpt2file_load(path, 0, &c, 1, NULL, err, errlen);
    if (!all) return -1;
    size_t off = 0;
    for (int k = 0; k < stage; k++) off += stage_num_params(cfg, k, nstages);
    memcpy(params, all + off, sizeof(float) * stage_num_params(cfg, stage, nstages));
    free(all);
    return 0;
}

/* The offset of the head and of wte in the 1-stage layout of cfg. */
static void s_head_wte(const model_config_t *cfg, size_t *head, size_t *wte)
{
    size_t C = (size_t)cfg->C, V = (size_t)cfg->V;
    *wte = 0;
    *head = model_num_params(cfg) - V * C;
}

int gpt2file_tied(const model_config_t *cfg, const float *params)
{
    size_t head, wte;
    s_head_wte(cfg, &head, &wte);
    return memcmp(params + head, params + wte, sizeof(float) * (size_t)cfg->V * cfg->C) == 0;
}

/* The safetensors' tensors of cfg in file order: each one's name, shape and
 * 1-stage offset; the head only when untied.  Returns how many. */
static int s_st_list(const stage_t *s, int tied, s_desc_t *d, size_t *off)
{
    int n = 0, first = 0;
    for (int k = 0; k < s->ntensors; k++) {
        const param_tensor_t *t = &s->tensors[k];
        if (k == 0 || s->tensors[k - 1].unit != t->unit) first = k;
        s_desc(&s->cfg, t->unit, k - first, &d[n]);
        if (d[n].head && tied) continue;
        off[n++] = t->offset;
    }
    return n;
}

static int s_save_st(const char *path, const stage_t *s, const float *params, uint64_t run, char *err, size_t errlen)
{
    const model_config_t *c = &s->cfg;
    int tied = gpt2file_tied(c, params);
    s_desc_t *d = malloc(sizeof *d * STAGE_MAX_TENSORS);
    size_t *off = malloc(sizeof *off * STAGE_MAX_TENSORS);
    const char **names = malloc(sizeof *names * STAGE_MAX_TENSORS);
    int *ndims = malloc(sizeof *ndims * STAGE_MAX_TENSORS);
    uint64_t (*shapes)[ST_DIMS_MAX] = calloc(STAGE_MAX_TENSORS, sizeof *shapes);
    size_t total = model_num_params(c) - (tied ? (size_t)c->V * c->C : 0);
    float *data = malloc(sizeof(float) * total);
    uint8_t *hdr = NULL;
    size_t hlen = 0;
    int rc = -1;
    if (d && off && names && ndims && shapes && data) {
        int n = s_st_list(s, tied, d, off);
        float *o = data;
        for (int i = 0; i < n; i++) {
            const float *p = params + off[i];
            names[i] = d[i].name;
            ndims[i] = d[i].rows ? 2 : 1;
            shapes[i][0] = d[i].rows ? (d[i].conv ? d[i].cols : d[i].rows) : d[i].cols;
            shapes[i][1] = d[i].conv ? d[i].rows : d[i].cols;
            uint64_t m = (d[i].rows ? d[i].rows : 1) * d[i].cols;
            if (d[i].conv)   /* brigade's (out, in) to Conv1D's (in, out) */
                for (uint64_t r = 0; r < d[i].rows; r++)
                    for (uint64_t k = 0; k < d[i].cols; k++) o[k * d[i].rows + r] = p[r * d[i].cols + k];
            else
                memcpy(o, p, sizeof(float) * m);
            o += m;
        }
        char v[7][16], runhex[24];
        int sz[7] = { c->V, c->maxT, c->C, c->L, c->NH, c->bneck, c->bneck_k };
        for (int k = 0; k < 7; k++) snprintf(v[k], sizeof v[k], "%d", sz[k]);
        snprintf(runhex, sizeof runhex, "%016llx", (unsigned long long)run);
        const char *meta[20] = { "format", "pt", "n_vocab", v[0], "n_ctx", v[1], "n_embd", v[2], "n_layer", v[3],
                                 "n_head", v[4] };
        int nmeta = 6;
        if (c->bneck > 0) {   /* the cuts' tensors are cut.J.*: the file says where they sit */
            const char *b[6] = { "bottleneck", v[5], "bottleneck_stages", v[6], "bottleneck_split", split_name(c->split) };
            for (int k = 0; k < 6; k++) meta[2 * nmeta + k] = b[k];
            nmeta += 3;
        }
        if (run) { meta[2 * nmeta] = "brigade_run"; meta[2 * nmeta + 1] = runhex; nmeta++; }
        hdr = st_header_write(n, names, ndims, (const uint64_t (*)[ST_DIMS_MAX])shapes, nmeta, meta, &hlen);
    }
    if (hdr) {
        const void *parts[2] = { hdr, data };
        size_t lens[2] = { hlen, sizeof(float) * total };
        rc = modelfile_write_atomic(path, parts, lens, 2, err, errlen);
    } else {
        snprintf(err, errlen, "%s: out of memory", path);
    }
    free(hdr); free(data); free(shapes); free(ndims); free(names); free(off); free(d);
    return rc;
}

static int s_save_llmc(const char *path, const stage_t *s, const float *params, char *err, size_t errlen)
{
    const model_config_t *c = &s->cfg;
    if (c->bneck > 0) {
        snprintf(err, errlen, "%s: llm.c's format has no bottleneck (this model narrows its cuts: --bottleneck %d): use "
                 "--format safetensors", path, c->bneck);
        return -1;
    }
    if (!gpt2file_tied(c, params)) {
        snprintf(err, errlen, "%s: llm.c's format ties the head to the embedding, and this model's differ (trained "
                 "untied): use --format safetensors", path);
        return -1;
    }
    int32_t h[8] = { (int32_t)LLMC_MAGIC, LLMC_VERSION, c->maxT, c->V, c->L, c->NH, c->C, (c->V + 127) / 128 * 128 };
    uint8_t hdr[LLMC_HEADER_BYTES] = { 0 };
    for (int k = 0; k < 8; k++) le_put32(hdr + 4 * k, (uint32_t)h[k]);
    size_t total = (size_t)s_lc_total(h);
    float *data = calloc(total, sizeof(float));   /* the padded vocabulary rows stay 0 */
    if (!data) { snprintf(err, errlen, "%s: out of memory", path); return -1; }
    int first = 0;
    for (int k = 0; k < s->ntensors; k++) {
        const param_tensor_t *t = &s->tensors[k];
        if (k == 0 || s->tensors[k - 1].unit != t->unit) first = k;
        s_desc_t d;
        s_desc(c, t->unit, k - first, &d);
        if (d.head) continue;
        memcpy(data + s_lc_offset(h, d.lc, d.layer), params + t->offset, sizeof(float) * t->size);
    }
    const void *parts[2] = { hdr, data };
    size_t lens[2] = { sizeof hdr, sizeof(float) * total };
    int rc = modelfile_write_atomic(path, parts, lens, 2, err, errlen);
    free(data);
    return rc;
}

int gpt2file_save(const char *path, gpt2_format_t fmt, const model_config_t *cfg, const float *params,
                  uint64_t run, char *err, size_t errlen)
{
    if (cfg->kind != MODEL_GPT) {
        snprintf(err, errlen, "%s: only a gpt can be written as GPT-2 tensors", path);
        return -1;
    }
    stage_t *s = malloc(sizeof *s);
    int rc = s && stage_init(s, cfg, 0, 1, err, errlen) == 0 ? 0 : -1;
    if (!s) snprintf(err, errlen, "%s: out of memory", path);
    if (rc == 0)
        rc = fmt == GPT2_LLMC ? s_save_llmc(path, s, params, err, errlen) : s_save_st(path, s, params, run, err, errlen);
    free(s);
    return rc;
}
