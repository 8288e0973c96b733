/* bench_train.c: the training engine's speed and memory, measured side by
 * side in one run.
 *
 *   bench_train [--models gpt-tiny,gpt-small] [--threads 1,2] [--batch 8] [--ctx T]
 *               [--steps N] [--warmup N] [--rss-model NAME] [--brigade PATH]
 *   bench_train --dump-acts FILE.f32 --dump-grads FILE.f32 [--data SPEC]
 *               [--model NAME] [--stages K] [--cut C] [--updates N] [--count M]
 *
 * Benchmark mode prints markdown tables:
 *   1. cblas_sgemm GFLOP/s at each thread count (OpenBLAS's own threads) on
 *      the shapes of a gpt's matrix products (the best shape is "the peak");
 *   2. tokens/s of a full training step (forward + backward + clip + AdamW,
 *      --optim adamw, the optimizer of the PyTorch model in torch_gpt.py;
 *      through stage_state_step, the whole model in one stage, batch B of
 *      the preset's context T, the engine using `threads` threads of its own
 *      as `brigade solo --threads` does) after warm-up steps, from the fastest of the
 *      timed steps (the median, the mean and the fastest wall time are shown
 *      beside it),
 *      and the step's achieved
 *      GFLOP/s as a fraction of the peak at the same thread count;
 *   3. peak resident memory of a training run against what it must hold.
 * At 1 thread every time is the calling thread's CPU time
 * (CLOCK_THREAD_CPUTIME_ID): the work runs in that thread alone, and its CPU
 * clock does not count time taken by other processes on a shared machine.
 * With more threads the times are wall-clock.
 * Lines starting with "kv " carry the same figures as key=value pairs for
 * scripts (tests/bench/run.sh).
 *
 * FLOPs counted per step (tokens N = B*T; multiply-add = 2 FLOPs):
 *   matmuls: 6 * P_mm * N, with P_mm = L*12*C*C + V*C the weights of the
 *            qkv, attention projection, fc, fc projection and head matrices
 *            (2 forward + 4 backward per weight per token; biases, layernorm,
 *            embedding, GELU, softmax and AdamW are not counted);
 *   attention: 3 * L * (2*2*B*NH*T*T*hs) for q@k^T and att@v over the full
 *            T x T square (forward x1, backward x2), although the causal
 *            kernel skips most of the upper triangle.
 *
 * Dump mode trains a K-stage split on the data for N updates and writes the
 * tensor that crosses the cut between stages C and C+1 (0-based) forward
 * (the activation) and backward (its gradient) during the last M updates, as
 * raw little-endian float32, for bench_codec. */
#include "node/engine/data.h"
#include "node/engine/gemm.h"
#include "node/engine/model.h"
#include "node/engine/optim.h"
#include "node/engine/train.h"

#include <cblas.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define S_MAX_STAGES 16
#define S_MAX_LIST 8

static int s_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double s_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The clock of a measurement at `threads` BLAS threads: at 1 thread all the
 * work runs in the calling thread, so its CPU clock measures the work alone,
 * undisturbed by other processes sharing the machine; with more threads only
 * the wall clock can. */
static double s_clock(int threads)
{
    struct timespec ts;
    clock_gettime(threads == 1 ? CLOCK_THREAD_CPUTIME_ID : CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void s_die(const char *what)
{
    fprintf(stderr, "bench_train: %s\n", what);
    exit(1);
}

/* ---------------------------------------------------------------------------
 * A model cut into K stages, run in one process as `brigade solo` runs it. */

typedef struct {
    int K, B, T;
    model_config_t cfg;
    stage_state_t *st[S_MAX_STAGES];
    acts_t *acts[S_MAX_STAGES];
    grad_scratch_t *gs[S_MAX_STAGES];
    data_t *data;
    batch_t batch;
    uint64_t cursor;
    optim_config_t optim;
} s_pipe_t;

static void s_pipe_destroy(s_pipe_t **self_p)
{
    s_pipe_t *p = *self_p;
    if (!p) return;
    for (int k = 0; k < p->K; k++) {
        stage_state_destroy(&p->st[k]);
        acts_destroy(&p->acts[k]);
        grad_scratch_destroy(&p->gs[k]);
    }
    data_batch_free(&p->batch);
    data_close(&p->data);
    free(p);
    *self_p = NULL;
}

/* threads: the most threads a step will be asked to use (scratch is sized for it). */
static s_pipe_t *s_pipe_new(const char *model, int K, int B, const char *data, int total_updates, int threads, int ctx)
{
    char err[512];
    s_pipe_t *p = calloc(1, sizeof *p);
    if (!p) s_die("out of memory");
    if (model_preset(&p->cfg, model, err, sizeof err) < 0) s_die(err);
    if (p->cfg.kind != MODEL_GPT) s_die("only gpt models are benchmarked");
    if (ctx > 0) p->cfg.maxT = ctx;   /* --ctx: a shorter context of the preset */
    if (K < 1 || K > S_MAX_STAGES) s_die("--stages: 1..16");
    p->K = K;
    p->B = B;
    p->T = p->cfg.maxT;
    for (int k = 0; k < K; k++) {
        p->st[k] = stage_state_new(&p->cfg, k, K, 1, err, sizeof err);
        if (!p->st[k]) s_die(err);
        p->st[k]->s.threads = threads;
        p->acts[k] = acts_new(&p->st[k]->s, B, p->T);
        p->gs[k] = grad_scratch_new(&p->st[k]->s, B, p->T);
        if (!p->acts[k] || !p->gs[k]) s_die("out of memory for activations");
    }
    p->data = data_open(data, DATA_TOKENS, p->T, 1, err, sizeof err);
    if (!p->data) s_die(err);
    if (data_batch_alloc(p->data, &p->batch, B) < 0) s_die("out of memory for a batch");
    optim_defaults(&p->optim);
    p->optim.kind = OPTIM_ADAMW;   /* the optimizer of the PyTorch model it is compared with */
    p->optim.total = total_updates;
    return p;
}

/* One update of one microbatch: data, forward, backward, clip + AdamW.
 * Returns the loss. */
static float s_pipe_step(s_pipe_t *p)
{
    int K = p->K;
    size_t nt = (size_t)p->B * p->T;
    data_next_train(p->data, &p->batch, 0, 1, &p->cursor);
    memcpy(p->acts[0]->tokens, p->batch.tokens, nt * sizeof(int));
    memcpy(p->acts[K - 1]->targets, p->batch.targets, nt * sizeof(int));
    for (int k = 0; k < K; k++) {
        if (k > 0)
            memcpy(p->acts[k]->in, p->acts[k - 1]->out,
                   stage_in_size(&p->st[k]->s, p->B, p->T) * sizeof(float));
        stage_forward(&p->st[k]->s, p->st[k]->params, p->acts[k]);
    }
    float scale = 1.0f / (float)nt;
    for (int k = K - 1; k >= 0; k--) {
        if (k < K - 1)
            memcpy(p->acts[k]->dout, p->acts[k + 1]->din,
                   stage_out_size(&p->st[k]->s, p->B, p->T) * sizeof(float));
        stage_backward(&p->st[k]->s, p->st[k]->params, p->st[k]->grads, p->acts[k], p->gs[k], scale);
    }
    for (int k = 0; k < K; k++)
        stage_state_step(p->st[k], &p->optim);
    return p->acts[K - 1]->loss;
}

/* ---------------------------------------------------------------------------
 * FLOP count of one training step (see the file comment). */

static double s_matmul_params(const model_config_t *c)
{
    return (double)c->L * 12.0 * c->C * c->C + (double)c->V * c->C;
}

static double s_step_flops(const model_config_t *c, int B)
{
    double N = (double)B * c->maxT, T = c->maxT, hs = (double)c->C / c->NH;
    double mm = 6.0 * s_matmul_params(c) * N;
    double att = 3.0 * c->L * (2.0 * 2.0 * B * c->NH * T * T * hs);
    return mm + att;
}

/* ---------------------------------------------------------------------------
 * Matrix product peak: cblas_sgemm's, and that of the engine's own kernel
 * (node/engine/gemm.h), which gemm() runs on an AVX-512 CPU. */

typedef struct {
    int M, N, K;        /* C (M,N) = A (M,K) @ B^T, B stored (N,K) as linear_forward does */
    const char *what;   /* which product of the model has this shape */
} s_shape_t;

static const s_shape_t s_shapes[] = {
    {1024, 768, 256, "gpt-small qkv (B*T, 3C, C)"},
    {1024, 1024, 256, "gpt-small fc (B*T, 4C, C)"},
    {1024, 256, 1024, "gpt-small fc proj (B*T, C, 4C)"},
    {1024, 1024, 1024, "square 1024"},
};
#define S_NSHAPES ((int)(sizeof s_shapes / sizeof s_shapes[0]))

static void s_fill(float *x, size_t n, unsigned seed)
{
    uint32_t r = seed * 2654435761u + 1;
    for (size_t i = 0; i < n; i++) {
        r = r * 1664525u + 1013904223u;
        x[i] = (float)((int)(r >> 9) - (1 << 22)) * 0x1p-23f;
    }
}

/* Best GFLOP/s of one shape over repetitions filling about `budget` seconds:
 * cblas_sgemm at `threads` OpenBLAS threads, or (own) gemm_own in the
 * calling thread; 0 if the own kernel does not run here. */
static double s_sgemm_gflops(const s_shape_t *sh, double budget, int threads, int own)
{
    size_t na = (size_t)sh->M * sh->K, nb = (size_t)sh->N * sh->K, nc = (size_t)sh->M * sh->N;
    float *a = malloc(na * sizeof *a), *b = malloc(nb * sizeof *b), *c = malloc(nc * sizeof *c);
    if (!a || !b || !c) s_die("out of memory for sgemm");
    s_fill(a, na, 1);
    s_fill(b, nb, 2);
    memset(c, 0, nc * sizeof *c);
    double best = 1e30, all = 0;
    for (int r = 0; r < 200 && (r < 3 || all < budget); r++) {
        double t0 = s_clock(threads);
        if (!own)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, sh->M, sh->N, sh->K,
                        1.0f, a, sh->K, b, sh->K, 0.0f, c, sh->N);
        else if (gemm_own(0, 1, sh->M, sh->N, sh->K, 1.0f, a, sh->K, b, sh->K, 0.0f, c, sh->N) < 0)
            best = -1;
        double dt = s_clock(threads) - t0;
        if (best < 0) break;
        all += dt;
        if (dt < best) best = dt;
    }
    free(a); free(b); free(c);
    return best < 0 ? 0 : 2.0 * sh->M * sh->N * sh->K / best / 1e9;
}

/* ---------------------------------------------------------------------------
 * Peak RSS of a child process (a fresh exec, so nothing is inherited). */

static long s_child_maxrss_kb(char *const argv[])
{
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        if (!freopen("/dev/null", "w", stdout) || !freopen("/dev/null", "w", stderr)) _exit(127);
        execv(argv[0], argv);
        _exit(127);
    }
    int status;
    struct rusage ru;
    if (wait4(pid, &status, 0, &ru) < 0) return -1;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return -1;
    return ru.ru_maxrss;
}

/* --rss-run MODEL: what the measured child does; "none" only loads the
 * libraries and runs one small sgemm (the fixed cost of a process). */
static int s_rss_run(const char *model, int B)
{
    openblas_set_num_threads(1);
    if (!strcmp(model, "none")) {
        float a[64] = {0}, b[64] = {0}, c[64];
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, 8, 8, 8, 1.0f, a, 8, b, 8, 0.0f, c, 8);
        return c[0] == 0.0f ? 0 : 1;
    }
    s_pipe_t *p = s_pipe_new(model, 1, B, "synthetic", 3, 1, 0);
    for (int i = 0; i < 3; i++)
        s_pipe_step(p);
    s_pipe_destroy(&p);
    return 0;
}

/* ---------------------------------------------------------------------------
 * Dump mode. */

static int s_dump(const char *model, const char *data, int K, int cut, int updates, int count,
                  const char *acts_path, const char *grads_path)
{
    if (cut < 0 || cut + 1 >= K) s_die("--cut must be in 0..stages-2");
    if (count < 1 || count > updates) s_die("--count must be in 1..updates");
    openblas_set_num_threads(1);
    s_pipe_t *p = s_pipe_new(model, K, 8, data, updates, 1, 0);
    FILE *fa = acts_path ? fopen(acts_path, "wb") : NULL;
    FILE *fg = grads_path ? fopen(grads_path, "wb") : NULL;
    if ((acts_path && !fa) || (grads_path && !fg)) {
        fprintf(stderr, "bench_train: cannot write %s: %s\n", fa ? grads_path : acts_path, strerror(errno));
        return 1;
    }
    size_t n = stage_out_size(&p->st[cut]->s, p->B, p->T);
    double t0 = s_now();
    float loss = 0, first = 0;
    for (int u = 0; u < updates; u++) {
        loss = s_pipe_step(p);
        if (u == 0) first = loss;
        if (!isfinite(loss)) s_die("training diverged");
        if (u >= updates - count) {
            /* acts[cut+1]->in is the activation as stage cut+1 received it;
             * acts[cut]->dout the gradient as stage cut received it (the
             * optimizer step does not touch either) */
            if (fa && fwrite(p->acts[cut + 1]->in, sizeof(float), n, fa) != n) s_die("short write");
            if (fg && fwrite(p->acts[cut]->dout, sizeof(float), n, fg) != n) s_die("short write");
        }
    }
    if ((fa && fclose(fa) != 0) || (fg && fclose(fg) != 0)) s_die("cannot close a dump file");
    fprintf(stderr, "bench_train: %s, %d stages, %d updates on %s in %.1f s, loss %.3f -> %.3f; "
            "wrote %d x %zu floats crossing cut %d|%d\n",
            model, K, updates, data, s_now() - t0, first, loss, count, n, cut, cut + 1);
    s_pipe_destroy(&p);
    return 0;
}

/* ---------------------------------------------------------------------------
 * Benchmark mode. */

static int s_parse_list(const char *s, char out[][32], int max)
{
    int n = 0;
    while (*s && n < max) {
        const char *e = strchr(s, ',');
        size_t len = e ? (size_t)(e - s) : strlen(s);
        if (len == 0 || len >= 32) s_die("bad list");
        memcpy(out[n], s, len);
        out[n][len] = 0;
        n++;
        s += len + (e ? 1 : 0);
    }
    return n;
}

static void s_usage(void)
{
    fprintf(stderr,
            "usage: bench_train [--models A,B] [--threads 1,2] [--batch B] [--ctx T] [--steps N] [--warmup N]\n"
            "                   [--rss-model NAME] [--brigade PATH]\n"
            "       bench_train --dump-acts FILE --dump-grads FILE [--data SPEC] [--model NAME]\n"
            "                   [--stages K] [--cut C] [--updates N] [--count M]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    const char *models = "gpt-tiny,gpt-small", *threads = "1,2", *rss_model = "gpt-small";
    const char *brigade = NULL, *dump_acts = NULL, *dump_grads = NULL;
    const char *data = "text:/usr/share/games/fortunes", *model = "gpt-small", *rss_run = NULL;
    int B = 8, steps = 5, warmup = 2, K = 4, cut = 1, updates = 50, count = 8, ctx = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) s_usage();
        if (!strcmp(a, "--models")) models = v;
        else if (!strcmp(a, "--threads")) threads = v;
        else if (!strcmp(a, "--batch")) B = atoi(v);
        else if (!strcmp(a, "--ctx")) ctx = atoi(v);
        else if (!strcmp(a, "--steps")) steps = atoi(v);
        else if (!strcmp(a, "--warmup")) warmup = atoi(v);
        else if (!strcmp(a, "--rss-model")) rss_model = v;
        else if (!strcmp(a, "--rss-run")) rss_run = v;
        else if (!strcmp(a, "--brigade")) brigade = v;
        else if (!strcmp(a, "--dump-acts")) dump_acts = v;
        else if (!strcmp(a, "--dump-grads")) dump_grads = v;
        else if (!strcmp(a, "--data")) data = v;
        else if (!strcmp(a, "--model")) model = v;
        else if (!strcmp(a, "--stages")) K = atoi(v);
        else if (!strcmp(a, "--cut")) cut = atoi(v);
        else if (!strcmp(a, "--updates")) updates = atoi(v);
        else if (!strcmp(a, "--count")) count = atoi(v);
        else s_usage();
        i++;
    }
    if (B < 1 || steps < 1 || warmup < 0) s_usage();
    if (rss_run) return s_rss_run(rss_run, B);
    if (dump_acts || dump_grads)
        return s_dump(model, data, K, cut, updates, count, dump_acts, dump_grads);

    char mlist[S_MAX_LIST][32], tlist[S_MAX_LIST][32];
    int nm = s_parse_list(models, mlist, S_MAX_LIST), nt = s_parse_list(threads, tlist, S_MAX_LIST);
    const char *core = openblas_get_corename();
    printf("OpenBLAS core: **%s** (OPENBLAS_CORETYPE=%s, OPENBLAS_L2_SIZE=%s); config: %s\n\n", core,
           getenv("OPENBLAS_CORETYPE") ? getenv("OPENBLAS_CORETYPE") : "unset",
           getenv("OPENBLAS_L2_SIZE") ? getenv("OPENBLAS_L2_SIZE") : "unset", openblas_get_config());
    printf("kv what=env core=%s coretype=%s l2=%s\n", core,
           getenv("OPENBLAS_CORETYPE") ? getenv("OPENBLAS_CORETYPE") : "unset",
           getenv("OPENBLAS_L2_SIZE") ? getenv("OPENBLAS_L2_SIZE") : "unset");

    /* 1. matrix product peak per thread count: the best of cblas_sgemm at T
     * OpenBLAS threads and T x the own kernel's one-thread rate (its ideal
     * in T engine threads) */
    double peak[S_MAX_LIST], own1 = 0;
    printf("gemm() runs: %s\n\n", gemm_fast() ? "brigade's own AVX-512 kernel" : "cblas_sgemm");
    printf("| product (M, N, K), C = A @ B^T | kernel | threads | GFLOP/s |\n|---|---|---:|---:|\n");
    openblas_set_num_threads(1);
    for (int si = 0; si < S_NSHAPES; si++) {
        double g = s_sgemm_gflops(&s_shapes[si], 0.3, 1, 1);
        if (g > own1) own1 = g;
        if (g > 0)
            printf("| %s (%d, %d, %d) | brigade gemm_own | 1 | %.1f |\n", s_shapes[si].what, s_shapes[si].M,
                   s_shapes[si].N, s_shapes[si].K, g);
    }
    for (int ti = 0; ti < nt; ti++) {
        int th = atoi(tlist[ti]);
        double blas = 0;
        openblas_set_num_threads(th);
        for (int si = 0; si < S_NSHAPES; si++) {
            double g = s_sgemm_gflops(&s_shapes[si], 0.3, th, 0);
            if (g > blas) blas = g;
            printf("| %s (%d, %d, %d) | cblas_sgemm | %d | %.1f |\n", s_shapes[si].what, s_shapes[si].M,
                   s_shapes[si].N, s_shapes[si].K, th, g);
            fflush(stdout);
        }
        peak[ti] = blas > th * own1 ? blas : th * own1;
        printf("kv what=peak threads=%d gflops=%.2f blas=%.2f own=%.2f\n", th, peak[ti], blas, th * own1);
    }

    /* 2. training step throughput */
    printf("\n| model | params | threads | B x T | best step ms | tokens/s | GFLOP/step | GFLOP/s | sgemm peak | of peak | loss |\n");
    printf("|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|\n");
    int maxth = 1;
    for (int ti = 0; ti < nt; ti++) if (atoi(tlist[ti]) > maxth) maxth = atoi(tlist[ti]);
    for (int mi = 0; mi < nm; mi++) {
        s_pipe_t *p = s_pipe_new(mlist[mi], 1, B, "synthetic", 1000, maxth, ctx);
        double flops = s_step_flops(&p->cfg, B);
        for (int ti = 0; ti < nt; ti++) {
            int th = atoi(tlist[ti]);
            /* as brigade runs: th engine threads, each with single-threaded BLAS */
            openblas_set_num_threads(1);
            for (int k = 0; k < p->K; k++) p->st[k]->s.threads = th;
            for (int i = 0; i < warmup; i++)
                s_pipe_step(p);
            double best = 1e30, sum = 0, wall = 1e30, *all = calloc((size_t)steps, sizeof *all);
            float loss = 0;
            if (!all) s_die("out of memory");
            for (int i = 0; i < steps; i++) {
                double t0 = s_clock(th), w0 = s_now();
                loss = s_pipe_step(p);
                double dt = s_clock(th) - t0, dw = s_now() - w0;
                if (dw < wall) wall = dw;
                sum += dt;
                all[i] = dt;
                if (dt < best) best = dt;
            }
            qsort(all, (size_t)steps, sizeof *all, s_cmp_double);
            double median = steps % 2 ? all[steps / 2] : 0.5 * (all[steps / 2 - 1] + all[steps / 2]);
            free(all);
            double mean = sum / steps, tok = (double)B * p->T / best, gf = flops / best / 1e9;
            printf("| %s | %zu | %d | %d x %d | %.1f (median %.1f, mean %.1f, wall %.1f) | %.0f | %.2f | %.1f | %.1f | %.0f%% | %.3f |\n",
                   mlist[mi], p->st[0]->s.nparams, th, B, p->T, 1e3 * best, 1e3 * median, 1e3 * mean, 1e3 * wall,
                   tok, flops / 1e9, gf, peak[ti], 100.0 * gf / peak[ti], loss);
            printf("kv what=train model=%s threads=%d tok_s=%.1f best_ms=%.2f median_ms=%.2f mean_ms=%.2f wall_ms=%.2f "
                   "tok_s_median=%.1f gflop_step=%.4f gflops=%.2f peak=%.2f frac=%.4f\n", mlist[mi], th, tok,
                   1e3 * best, 1e3 * median, 1e3 * mean, 1e3 * wall, (double)B * p->T / median,
                   flops / 1e9, gf, peak[ti], gf / peak[ti]);
            fflush(stdout);
        }
        s_pipe_destroy(&p);
    }
    {
        model_config_t c;
        char err[256];
        if (model_preset(&c, mlist[nm - 1], err, sizeof err) == 0)
            printf("\nFLOPs counted for %s: matmuls 6 x %.0f weights x B*T tokens, plus attention "
                   "3 x L x 4*B*NH*T*T*hs (full T x T square); layernorm, GELU, softmax, "
                   "embedding and AdamW not counted.\n", mlist[nm - 1], s_matmul_params(&c));
    }

    /* 3. peak RSS of a training run, in a fresh process (--rss-model none: skipped) */
    if (strcmp(rss_model, "none") != 0) {
        char self[4096], bs[16];
        ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
        if (len < 0) s_die("cannot read /proc/self/exe");
        self[len] = 0;
        snprintf(bs, sizeof bs, "%d", B);
        char *a_base[] = {self, "--rss-run", "none", NULL};
        char *a_run[] = {self, "--rss-run", (char *)rss_model, "--batch", bs, NULL};
        long base = s_child_maxrss_kb(a_base), run = s_child_maxrss_kb(a_run), solo = -1;
        if (brigade) {
            char *a_solo[] = {(char *)brigade, "solo", "--model", (char *)rss_model, "--batch", bs,
                              "--steps", "3", "--data", "synthetic", NULL};
            solo = s_child_maxrss_kb(a_solo);
        }
        model_config_t c;
        char err[256];
        stage_t *st = malloc(sizeof *st);
        if (!st || model_preset(&c, rss_model, err, sizeof err) < 0 || stage_init(st, &c, 0, 1, err, sizeof err) < 0)
            s_die("cannot describe the rss model");
        double need_p = 16.0 * st->nparams, need_a = 4.0 * acts_floats(st, B, c.maxT);
        double need = need_p + need_a;
        printf("\n| peak RSS, %s B=%d T=%d, 1 thread | MiB | / must hold |\n|---|---:|---:|\n",
               rss_model, B, c.maxT);
        printf("| must hold: params + grads + 2 moments (16 x %zu B) | %.1f | |\n", st->nparams, need_p / 1048576);
        printf("| must hold: activations (4 x acts_floats = %zu floats) | %.1f | |\n",
               acts_floats(st, B, c.maxT), need_a / 1048576);
        printf("| must hold: total | %.1f | 1.00 |\n", need / 1048576);
        if (base > 0) printf("| a process that only loads the libraries and runs one sgemm | %.1f | |\n", base / 1024.0);
        if (run > 0) printf("| engine loop (bench_train --rss-run %s, 3 steps) | %.1f | %.2f |\n", rss_model,
                            run / 1024.0, run * 1024.0 / need);
        if (solo > 0) printf("| `brigade solo --model %s --steps 3` | %.1f | %.2f |\n", rss_model, solo / 1024.0,
                             solo * 1024.0 / need);
        printf("kv what=rss model=%s need_mib=%.2f base_mib=%.2f run_mib=%.2f solo_mib=%.2f ratio=%.3f "
               "solo_ratio=%.3f\n", rss_model, need / 1048576, base / 1024.0, run / 1024.0, solo / 1024.0,
               run > 0 ? run * 1024.0 / need : -1.0, solo > 0 ? solo * 1024.0 / need : -1.0);
        free(st);
    }
    return 0;
}
