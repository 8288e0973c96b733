/* bench_redo.c: what activation recomputation (--recompute) costs a stage.
 *
 *   bench_redo [--model NAME] [--dim N --layers N --heads N --ctx N]
 *              [--stages K] [--batch B] [--reps N]
 *
 * For each stage of a K-stage split: the best forward time F, recompute
 * time R (stage_recompute) and backward time B of one microbatch (the
 * calling thread's CPU time, so other processes on a shared machine do not
 * count), and the share of a microbatch's work a recomputing stage adds,
 * R / (F + B), with the bytes
 * of one microbatch's full activations and of its stage input alone
 * (what --recompute keeps while it is in flight).  The last stage runs its
 * backward right after its forward and recomputes nothing.  A line
 * "kv stage=K params=P acts_mib=A input_kib=I" follows each row. */
#include "node/engine/train.h"
#include "node/runtime/options.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double s_cpu(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    opts_t o;
    char err[256];
    int reps = 5;
    opts_defaults(&o, OPTS_SOLO);
    if (argc > 2 && strcmp(argv[argc - 2], "--reps") == 0) { reps = atoi(argv[argc - 1]); argc -= 2; }
    if (opts_parse(&o, OPTS_SOLO, argc, argv, 1, err, sizeof err) != 0 || opts_resolve(&o, err, sizeof err) != 0) {
        fprintf(stderr, "bench_redo: %s\n", err);
        return 2;
    }
    int B = o.batch, T = o.cfg.maxT, K = o.stages;
    printf("| stage | forward ms | recompute ms | backward ms | added by recompute | activations MiB | input KiB |\n"
           "|---|---|---|---|---|---|---|\n");
    for (int k = 0; k < K; k++) {
        stage_state_t *st = stage_state_new(&o.cfg, k, K, o.seed, err, sizeof err);
        acts_t *a = st ? acts_new(&st->s, B, T) : NULL;
        acts_t *in = st ? acts_new_inputs(&st->s, B, T) : NULL;
        grad_scratch_t *g = st ? grad_scratch_new(&st->s, B, T) : NULL;
        if (!st || !a || !in || !g) { fprintf(stderr, "bench_redo: out of memory\n"); return 1; }
        if (a->tokens) for (int i = 0; i < B * T; i++) a->tokens[i] = (i * 7) % o.cfg.V;
        if (a->targets) for (int i = 0; i < B * T; i++) a->targets[i] = (i * 3) % o.cfg.V;
        if (a->in) for (size_t i = 0; i < stage_in_size(&st->s, B, T); i++) a->in[i] = 0.01f * (float)(i % 97);
        if (a->dout) for (size_t i = 0; i < stage_out_size(&st->s, B, T); i++) a->dout[i] = 1e-4f * (float)(i % 89);
        double fbest = 1e30, rbest = 1e30, bbest = 1e30;
        for (int r = 0; r < reps; r++) {
            double t0 = s_cpu();
            stage_recompute(&st->s, st->params, a);
            double t1 = s_cpu();
            stage_forward(&st->s, st->params, a);
            double t2 = s_cpu();
            stage_backward(&st->s, st->params, st->grads, a, g, 1.0f / (B * T));
            double t3 = s_cpu();
            if (t1 - t0 < rbest) rbest = t1 - t0;
            if (t2 - t1 < fbest) fbest = t2 - t1;
            if (t3 - t2 < bbest) bbest = t3 - t2;
        }
        double in_kib = (double)in->nbuf * 4 / 1024.0 + (in->tokens ? B * T * 4 / 1024.0 : 0);
        char added[32] = "0 (last stage)";
        if (k < K - 1) snprintf(added, sizeof added, "%.1f%%", 100 * rbest / (fbest + bbest));
        printf("| %d | %.1f | %.1f | %.1f | %s | %.1f | %.0f |\n", k, fbest * 1e3, rbest * 1e3, bbest * 1e3, added,
               (double)acts_floats(&st->s, B, T) * 4 / 1048576.0, in_kib);
        printf("kv stage=%d params=%zu acts_mib=%.2f input_kib=%.1f\n", k, st->s.nparams,
               (double)acts_floats(&st->s, B, T) * 4 / 1048576.0, in_kib);
        grad_scratch_destroy(&g);
        acts_destroy(&in);
        acts_destroy(&a);
        stage_state_destroy(&st);
    }
    return 0;
}
