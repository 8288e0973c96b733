/* solo.c: `brigade solo`, the whole model in one process (the reference).
 * With --stages K the model is cut into K stages exactly as the swarm cuts
 * it, and the activations and gradients crossing each cut go through the
 * chosen codecs (--codec, --grad-codec) as they would on the wire.  With
 * --delay D0,...,DK-1 stage k computes its gradients at its weights of Dk
 * updates earlier, as a stage of an asynchronous swarm with that weight
 * delay does at steady state, and --staleness corrects for it (staleness.h). */
#include "node/cli/cli.h"
#include "node/engine/data.h"
#include "node/engine/gemm.h"
#include "node/runtime/metrics.h"
#include "node/engine/model.h"
#include "node/engine/gpt2file.h"
#include "node/engine/modelfile.h"
#include "node/runtime/options.h"
#include "node/cli/progress.h"
#include "node/cli/stopsig.h"
#include "node/engine/staleness.h"
#include "node/engine/train.h"
#include "compress/codec.h"
#include "node/runtime/codecpick.h"
#include "compress/cpu.h"
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    opts_t o;
    int K;
    stage_state_t *st[MODEL_STAGES_MAX];
    acts_t *acts[MODEL_STAGES_MAX];
    grad_scratch_t *gs[MODEL_STAGES_MAX];
    float *residual[MODEL_STAGES_MAX];      /* error feedback per gradient cut stream */
    codec_ctx_t *codec;
    int act_codec, grad_codec;
    int evaluating;                       /* 1 in s_eval: no codec at the cuts */
    uint64_t wire_act, wire_grad;         /* bytes of the training passes' frames at the cuts, each direction */
    data_t *data;
    batch_t batch;
    metrics_t *metrics;
    float *ring[MODEL_STAGES_MAX];        /* --delay: delay[k] + 1 forward-weight versions of stage k, by version mod delay[k] + 1 */
    const float *w[MODEL_STAGES_MAX];     /* the weights stage k's passes of this microbatch use */
    int budget[MODEL_STAGES_MAX];         /* --delay: stage k's delay budget this update, in microbatches */
    int64_t floor;                        /* the first version the rings hold: no weights before it are read */
    int64_t ck_version;                   /* the version resumed from --checkpoint, or -1 */
    progress_t prog;                      /* the progress lines */
    char ckpt[OPT_PATH + 16];             /* --checkpoint DIR: DIR/stage.ckpt, or "" */
    int ckpt_lock;                        /* the lock of --checkpoint DIR (checkpoint_find), or -1 */
    float *resume;                        /* --resume: the model file's parameters until the stages take them */
    int64_t resume_version;               /* and its updates */
} solo_t;

static void s_destroy(solo_t *s)
{
    for (int k = 0; k < s->K; k++) {
        stage_state_destroy(&s->st[k]);
        acts_destroy(&s->acts[k]);
        grad_scratch_destroy(&s->gs[k]);
        free(s->residual[k]);
        free(s->ring[k]);
    }
    codec_ctx_destroy(&s->codec);
    data_batch_free(&s->batch);
    data_close(&s->data);
    metrics_close(&s->metrics);
    free(s->resume);
    s->resume = NULL;
}

/* Copies batch inputs/targets into the first and last stages' activations. */
static void s_load_batch(solo_t *s, const batch_t *b)
{
    acts_t *a0 = s->acts[0], *aL = s->acts[s->K - 1];
    const model_config_t *c = &s->o.cfg;
    if (c->kind == MODEL_GPT) {
        memcpy(a0->tokens, b->tokens, sizeof(int) * b->B * b->T);
        memcpy(aL->targets, b->targets, sizeof(int) * b->B * b->T);
    } else {
        memcpy(a0->x, b->x, sizeof(float) * b->B * c->D);
        memcpy(aL->targets, b->targets, sizeof(int) * b->B);
    }
}

/* The n values at a cut through codec as the wire would carry them (in
 * place); returns the bytes they take there (fp32: 4 n, the values alone,
 * sent as they are), or -1 when they are not finite. */
static long s_wire(solo_t *s, float *x, size_t n, int codec, const encode_opts_t *eo)
{
    if (codec == CODEC_FP32) return (long)(4 * n);
    return codec_roundtrip_len(s->codec, x, n, codec, eo);
}

/* Forward through all stages; returns 0, or -1 when a tensor at a cut is not finite. */
static int s_forward(solo_t *s)
{
    int B = s->o.batch, T = s->o.cfg.maxT;
    for (int k = 0; k < s->K; k++) {
        if (k > 0) {
            size_t n = stage_in_size(&s->st[k]->s, B, T);
            memcpy(s->acts[k]->in, s->acts[k - 1]->out, sizeof(float) * n);
            encode_opts_t eo = { .block_size = codec_block_for_rows(s->act_codec, n / ((size_t)B * T)) };
            long len = s->evaluating ? 0 : s_wire(s, s->acts[k]->in, n, s->act_codec, &eo);
            if (len < 0) return -1;
            s->wire_act += (uint64_t)len;
        }
        stage_forward(&s->st[k]->s, s->w[k], s->acts[k]);
    }
    return 0;
}

/* Backward through all stages.  With --recompute on each stage but the
 * last (whose backward follows its forward at once) first runs its forward
 * again from its input, at the same weights, as a node of a swarm does for
 * a microbatch whose activations it did not keep: the same bits (solo holds
 * one microbatch, so it keeps them all the same).  Returns 0, or -1 when a
 * gradient at a cut is not finite. */
static int s_backward(solo_t *s, float scale)
{
    int B = s->o.batch, T = s->o.cfg.maxT;
    for (int k = s->K - 1; k >= 0; k--) {
        if (s->o.recompute == RECOMPUTE_ON && k < s->K - 1) stage_recompute(&s->st[k]->s, s->w[k], s->acts[k]);
        if (k < s->K - 1) {
            size_t n = stage_out_size(&s->st[k]->s, B, T);
            memcpy(s->acts[k]->dout, s->acts[k + 1]->din, sizeof(float) * n);
            encode_opts_t eo = { .residual = s->residual[k], .sr_seed = 0,
                                 .block_size = codec_block_for_rows(s->grad_codec, n / ((size_t)B * T)) };
            long len = s_wire(s, s->acts[k]->dout, n, s->grad_codec, &eo);
            if (len < 0) return -1;
            s->wire_grad += (uint64_t)len;
        }
        stage_backward(&s->st[k]->s, s->w[k], s->st[k]->grads, s->acts[k], s->gs[k], scale);
    }
    return 0;
}

/* Validation loss (and accuracy for classifiers) over the held-out batches. */
static void s_eval(solo_t *s, double *loss, double *acc)
{
    int nb = opts_eval_batches(&s->o, data_val_batches(s->data, s->o.batch));
    double sum = 0.0;
    long correct = 0, samples = 0;
    for (int i = 0; i < nb; i++) {
        data_val_batch(s->data, &s->batch, i);
        s_load_batch(s, &s->batch);
        int K = s->K;
        const float *w[MODEL_STAGES_MAX];
        s->evaluating = 1;   /* evaluation measures the model (the live weights), not the wire */
        for (int k = 0; k < K; k++) { w[k] = s->w[k]; s->w[k] = s->st[k]->params; }
        s_forward(s);
        for (int k = 0; k < K; k++) s->w[k] = w[k];
        s->evaluating = 0;
        sum += s->acts[K - 1]->loss;
        correct += s->acts[K - 1]->correct;
        samples += s->o.batch;
    }
    *loss = sum / nb;
    *acc = (double)correct / (double)samples;
}

static void s_emit_eval(solo_t *s, int64_t version)
{
    double vl, va;
    s_eval(s, &vl, &va);
    if (s->o.cfg.kind == MODEL_MLP) {
        metrics_event(s->metrics, "eval", "\"version\":%lld,\"val_loss\":%.9g,\"val_acc\":%.9g", (long long)version, vl, va);
        progress_line(&s->prog, 1, 0, "eval after update %lld: val_loss %.4f val_acc %.4f", (long long)version, vl, va);
    } else {
        metrics_event(s->metrics, "eval", "\"version\":%lld,\"val_loss\":%.9g", (long long)version, vl);
        progress_line(&s->prog, 1, 0, "eval after update %lld: val_loss %.4f", (long long)version, vl);
    }
    progress_done(&s->prog);
}

/* Stage k's steady-state weight delay in updates (--delay; 0 without it). */
static int s_delay(const solo_t *s, int k)
{
    return s->o.ndelay ? s->o.delay[k] : 0;
}

/* Before update t: stores version t's forward weights in each delayed
 * stage's ring (with predict, those ahead by the updates of delay the
 * stage's budget this update allows) and keeps the budget, in microbatches,
 * in s->budget[k].  Returns stage 0's mean delay this update. */
static double s_store_weights(solo_t *s, int64_t t)
{
    for (int k = 0; k < s->K; k++) {
        stage_state_t *st = s->st[k];
        int d = s_delay(s, k);
        s->budget[k] = stale_budget_micro(&s->o.optim, s->o.staleness, (int)t, d, s->o.micro);
        if (d == 0) continue;
        stale_forward_weights(s->ring[k] + (size_t)(t % (d + 1)) * st->s.nparams, &st->s, &s->o.optim, s->o.staleness,
                              st->params, st->m, st->v, (int)t, stale_budget_updates(s->budget[k], s->o.micro));
    }
    return (double)s->budget[0] / s->o.micro;
}

/* Points s->w[k] at the weights microbatch m of update t runs with: those of
 * version t - stale_micro_delay(budget) (never before s->floor, the first
 * version the rings hold), as a pipeline stage whose window holds
 * micro + budget microbatches. */
static void s_point_weights(solo_t *s, int64_t t, int m)
{
    for (int k = 0; k < s->K; k++) {
        int d = s_delay(s, k);
        if (d == 0) { s->w[k] = s->st[k]->params; continue; }
        int64_t u = t - stale_micro_delay(s->budget[k], s->o.micro, m);
        if (u < s->floor) u = s->floor;
        s->w[k] = s->ring[k] + (size_t)(u % (d + 1)) * s->st[k]->s.nparams;
    }
}

/* The optimizer step of every stage, with its delay's corrections. */
static void s_step(solo_t *s)
{
    for (int k = 0; k < s->K; k++) {
        stage_state_t *st = s->st[k];
        optim_adjust_t adj;
        stale_dc_t dc;
        stale_adjust(&adj, &dc, &s->o.optim, s->o.staleness, (int)st->version, s_delay(s, k), st->params, s->w[k], st->v);
        stage_state_step_adjusted(st, &s->o.optim, &adj);
    }
}

/* --resume FILE: its parameters, and o resolved with its model (unless
 * --model or an override names one, which must then be the file's).  0, or
 * -1 with a reason. */
static int s_load_resume(solo_t *s, char *err, size_t errlen)
{
    opts_t *o = &s->o;
    model_config_t rcfg;
    size_t n = 0;
    char why[400];
    s->resume = modelfile_load(o->resume, &rcfg, &s->resume_version, NULL, &n, why, sizeof why);
    if (!s->resume) {   /* the reason begins with the file's name */
        snprintf(err, errlen, "--resume %s", why);
        return -1;
    }
    if (!opts_model_given(o)) return opts_resolve_model(o, &rcfg, err, errlen);
    if (opts_resolve(o, err, errlen) < 0) return -1;
    rcfg.split = o->cfg.split;   /* how the stages are cut is this run's choice, not the model file's */
    if (memcmp(&rcfg, &o->cfg, sizeof rcfg) != 0) {
        snprintf(err, errlen, "--resume: the model file's model differs from --model and its overrides");
        return -1;
    }
    return 0;
}

/* --init FILE: a GPT-2 checkpoint's parameters for the resolved model (their
 * shapes must be its), as --resume's at update 0; the run config gets the
 * file's size and hash.  0, or -1 with a reason. */
static int s_load_init(solo_t *s, char *err, size_t errlen)
{
    opts_t *o = &s->o;
    char why[400];
    if (o->resume[0]) {
        snprintf(err, errlen, "--init: not with --resume (a run starts from one or the other)");
        return -1;
    }
    s->resume = gpt2file_load(o->init, 0, &o->cfg, 1, NULL, why, sizeof why);
    if (!s->resume || opts_set_init(o, why, sizeof why) < 0) {   /* the reason begins with the file's name */
        snprintf(err, errlen, "--init %s", why);
        return -1;
    }
    s->resume_version = 0;
    return 0;
}

/* The stages (from the seed, or resume's parameters at `version`). 0, or -1 with a reason. */
static int s_make_stages(solo_t *s, const float *resume, int64_t version, char *err, size_t errlen)
{
    const opts_t *o = &s->o;
    size_t off = 0;
    for (int k = 0; k < s->K; k++) {
        s->st[k] = stage_state_new(&o->cfg, k, s->K, o->seed, err, errlen);
        if (!s->st[k]) return -1;
        s->st[k]->s.threads = o->threads;
        if (!resume) continue;
        memcpy(s->st[k]->params, resume + off, sizeof(float) * s->st[k]->s.nparams);
        off += s->st[k]->s.nparams;
        s->st[k]->version = version;
    }
    return 0;
}

/* Parameters of all stages. */
static size_t s_nparams(const solo_t *s)
{
    size_t n = 0;
    for (int k = 0; k < s->K; k++) n += s->st[k]->s.nparams;
    return n;
}

/* --checkpoint DIR: solo keeps the training state of the whole model
 * (params, m and v of every stage in the one-stage layout, as stage 0 of 1,
 * which `brigade assemble DIR` also reads) in DIR/stage.ckpt.  Makes the
 * folder and checks that it takes a checkpoint; a checkpoint found there
 * must be of this run (the same options), and its state and version replace
 * the stages' and *first.  0, or -1 with a reason. */
static int s_checkpoint_resume(solo_t *s, int64_t *first, char *err, size_t errlen)
{
    const opts_t *o = &s->o;
    if (!o->checkpoint[0]) return 0;
    checkpoint_info_t ck;
    size_t n = 0;
    float *x;
    int found = checkpoint_find(o->checkpoint, s->ckpt, sizeof s->ckpt, &ck, &x, &n, &s->ckpt_lock, err, errlen);
    if (found <= 0) return found;
    if (ck.run != opts_run_id(o) || n != s_nparams(s)) {
        free(x);
        snprintf(err, errlen, "--checkpoint %s: holds another run; use another folder or the same options", o->checkpoint);
        return -1;
    }
    size_t off = 0;
    for (int k = 0; k < s->K; off += s->st[k]->s.nparams, k++) {
        stage_state_t *st = s->st[k];
        memcpy(st->params, x + off, sizeof(float) * st->s.nparams);
        memcpy(st->m, x + n + off, sizeof(float) * st->s.nparams);
        memcpy(st->v, x + 2 * n + off, sizeof(float) * st->s.nparams);
        st->version = ck.version;
    }
    free(x);
    *first = s->ck_version = ck.version;
    fprintf(stderr, "brigade solo: resumed at update %lld from %s\n", (long long)ck.version, s->ckpt);
    return 0;
}

/* What a restart needs besides the stages' state to go on as the run would
 * have (--checkpoint: DIR/stage.ckpt.solo): each stage's error-feedback
 * residuals (a lossy --grad-codec) and --delay's ring of earlier weights.
 * Copies them into buf (out 1) or from it (out 0); buf NULL: only counts.
 * Returns the floats. */
static size_t s_extra_io(solo_t *s, float *buf, int out)
{
    int T = s->o.cfg.kind == MODEL_GPT ? s->o.cfg.maxT : 1;
    size_t at = 0;
    for (int k = 0; k < s->K; k++) {
        float *arr[2] = { s->residual[k], s->ring[k] };   /* the residuals change only with a --grad-codec */
        size_t len[2] = { s->residual[k] && s->grad_codec != CODEC_FP32 ? stage_out_size(&s->st[k]->s, s->o.batch, T) : 0,
                          s->ring[k] ? s->st[k]->s.nparams * (size_t)(s_delay(s, k) + 1) : 0 };
        for (int i = 0; i < 2; i++) {
            if (buf && len[i]) memcpy(out ? buf + at : arr[i], out ? arr[i] : buf + at, len[i] * sizeof(float));
            at += len[i];
        }
    }
    return at;
}

/* DIR/stage.ckpt.solo in path (pathlen bytes). */
static void s_extra_path(const solo_t *s, char *path, size_t pathlen)
{
    snprintf(path, pathlen, "%s.solo", s->ckpt);
}

/* After the buffers: a run resumed from its checkpoint takes the extra
 * state saved with it; without it (a checkpoint of an older brigade, a save
 * cut short between the two files) the residuals and rings start afresh,
 * and a line says the losses differ from an uninterrupted run's. */
static void s_extra_resume(solo_t *s)
{
    size_t n = s_extra_io(s, NULL, 0);
    if (s->ck_version < 0 || n == 0) return;
    char path[sizeof s->ckpt + 8], err[600];
    s_extra_path(s, path, sizeof path);
    int64_t floor;
    float *x = ckpt_extra_load(path, opts_run_id(&s->o), s->ck_version, &floor, n, err, sizeof err);
    if (!x) {
        fprintf(stderr, "brigade solo: %s: --delay's earlier weights and the error feedback start afresh (the losses "
                        "differ from an uninterrupted run's)\n", err);
        return;
    }
    s_extra_io(s, x, 0);
    s->floor = floor;
    free(x);
}

/* Writes the state of every stage to --checkpoint (s_checkpoint_resume); a
 * failure is a `checkpoint` event and a line, as a node's, and the run goes
 * on (a run whose final state is not written then fails: s_train).  0, or
 * -1 when not written. */
static int s_checkpoint_save(solo_t *s)
{
    size_t n = s_nparams(s), off = 0;
    float *all = malloc(3 * n * sizeof(float));
    char err[600] = "out of memory";
    int64_t v = s->st[0]->version;
    for (int k = 0; all && k < s->K; off += s->st[k]->s.nparams, k++) {
        const stage_state_t *st = s->st[k];
        memcpy(all + off, st->params, sizeof(float) * st->s.nparams);
        memcpy(all + n + off, st->m, sizeof(float) * st->s.nparams);
        memcpy(all + 2 * n + off, st->v, sizeof(float) * st->s.nparams);
    }
    checkpoint_info_t info = { .cfg = s->o.cfg, .run = opts_run_id(&s->o), .stage = 0, .nstages = 1, .version = v,
                               .cursor = (uint64_t)v * (uint64_t)s->o.micro * (uint64_t)s->o.batch, .completed = (uint64_t)v * (uint64_t)s->o.micro };
    size_t nx = s_extra_io(s, NULL, 0);
    float *extra = nx ? malloc(nx * sizeof(float)) : NULL;
    char xpath[sizeof s->ckpt + 8];
    s_extra_path(s, xpath, sizeof xpath);
    if (extra) s_extra_io(s, extra, 1);
    int bad = !all || (nx && !extra) || checkpoint_save(s->ckpt, &info, all, all + n, all + 2 * n, n, err, sizeof err) < 0
              || (nx && ckpt_extra_save(xpath, info.run, v, s->floor, extra, nx, err, sizeof err) < 0);
    free(extra);
    if (bad) {
        metrics_event(s->metrics, "checkpoint", "\"ok\":false,\"why\":%s", err);
        progress_done(&s->prog);
        fprintf(stderr, "brigade solo: checkpoint at update %lld not written: %s\n", (long long)v, err);
        free(all);
        return -1;
    }
    free(all);
    return 0;
}

/* Data, activations, error-feedback residuals, --delay's weight rings, the
 * codec context and the metrics file.  0, or -1 with a reason. */
static int s_make_buffers(solo_t *s, char *err, size_t errlen)
{
    const opts_t *o = &s->o;
    char why[400];
    s->data = data_open(o->data, model_data_kind(&o->cfg), o->cfg.maxT, o->seed, why, sizeof why);
    if (!s->data) { snprintf(err, errlen, "--data: %s", why); return -1; }
    if (model_check_data(&o->cfg, s->data, o->data, err, errlen) < 0) return -1;
    int T = o->cfg.kind == MODEL_GPT ? o->cfg.maxT : 1;
    if (data_batch_alloc(s->data, &s->batch, o->batch) < 0) { snprintf(err, errlen, "out of memory for a batch"); return -1; }
    for (int k = 0; k < s->K; k++) {
        s->acts[k] = acts_new(&s->st[k]->s, o->batch, T);
        s->gs[k] = grad_scratch_new(&s->st[k]->s, o->batch, T);
        size_t nout = stage_out_size(&s->st[k]->s, o->batch, T);
        s->residual[k] = nout ? calloc(nout, sizeof(float)) : NULL;
        if (!s->acts[k] || !s->gs[k] || (nout && !s->residual[k])) { snprintf(err, errlen, "out of memory for activations"); return -1; }
        s->w[k] = s->st[k]->params;
        if (s_delay(s, k) > 0) {
            s->ring[k] = calloc(s->st[k]->s.nparams * (size_t)(s_delay(s, k) + 1), sizeof(float));   /* saved whole */
            if (!s->ring[k]) { snprintf(err, errlen, "--delay: out of memory for the weight versions"); return -1; }
        }
    }
    s->codec = codec_ctx_new(1);
    if (!s->codec) { snprintf(err, errlen, "out of memory"); return -1; }
    s->metrics = metrics_open(o->metrics, "solo", err, errlen);
    return s->metrics ? 0 : -1;
}

/* The `start` event and the first line. */
static void s_announce(solo_t *s)
{
    const opts_t *o = &s->o;
    metrics_set_stage(s->metrics, s->K == 1 ? 0 : -1);
    char stale[64], delays[MODEL_STAGES_MAX * 4] = "";
    stale_name(o->staleness, stale, sizeof stale);
    for (int k = 0; k < s->K; k++)
        snprintf(delays + strlen(delays), sizeof delays - strlen(delays), "%s%d", k ? "," : "", s_delay(s, k));
    metrics_event(s->metrics, "start", "\"role\":\"solo\",\"run\":\"%016llx\",\"model\":%s,\"params\":%zu,"
                  "\"stages\":%d,\"batch\":%d,\"micro\":%d,\"codec\":%s,\"grad_codec\":%s,\"optim\":%s,\"staleness\":%s,"
                  "\"delay\":%s,\"cpu\":%s,\"gemm\":%s",
                  (unsigned long long)opts_run_id(o), o->cfg.name, s_nparams(s), s->K, o->batch, o->micro, o->codec,
                  o->grad_codec, optim_kind_name(o->optim.kind), stale, delays, cpu_level_name(cpu_level()),
                  gemm_name());
    fprintf(stderr, "brigade solo: %s, %zu parameters, %d stage%s, data %s, %d updates of %d x %d\n",
            o->cfg.name, s_nparams(s), s->K, s->K > 1 ? "s" : "", o->data, o->steps, o->micro, o->batch);
}

/* Trains from version `first` to --steps, evaluating every --eval-every
 * updates; *tokens counts the positions trained.  A signal (stopsig.h) stops
 * it at the next update boundary: the state is then saved to --checkpoint
 * as at the end of the run (a node stopped by a signal saves too), without
 * the final evaluation.  0, 2 when a signal stopped it before --steps, or 1
 * with *why when training diverged or the last checkpoint was not written. */
static int s_train(solo_t *s, int64_t first, int64_t *tokens, const char **why)
{
    const opts_t *o = &s->o;
    int64_t per_mb = (int64_t)o->batch * (o->cfg.kind == MODEL_GPT ? o->cfg.maxT : 1);
    uint64_t cursor = (uint64_t)first * (uint64_t)o->micro * (uint64_t)o->batch;   /* samples drawn before version first */
    float scale = 1.0f / ((float)per_mb * o->micro);
    double t0 = metrics_now();
    int saved = 0;   /* the last checkpoint written: 0, or -1 not written */
    int stopped = 0;
    for (int64_t step = first; step < o->steps; step++) {
        if (stopsig_caught()) { stopped = 1; break; }   /* an update boundary */
        double loss_sum = 0.0, delay0 = s_store_weights(s, step);
        for (int m = 0; m < o->micro; m++) {
            s_point_weights(s, step, m);
            data_next_train(s->data, &s->batch, 0, 1, &cursor);
            s_load_batch(s, &s->batch);
            if (s_forward(s) < 0 || s_backward(s, scale) < 0) { *why = "non-finite values at a stage cut (training diverged)"; return 1; }
            loss_sum += s->acts[s->K - 1]->loss;
            *tokens += per_mb;
        }
        s_point_weights(s, step, 0);   /* dc: the weights of the most delayed microbatch */
        s_step(s);
        double loss = loss_sum / o->micro, el = metrics_now() - t0;
        if (!isfinite(loss)) { *why = "loss is not finite (training diverged; lower --lr)"; return 1; }
        int64_t v = s->st[0]->version;
        metrics_event(s->metrics, "update", "\"version\":%lld,\"tokens\":%lld,\"loss\":%.6f,\"lr\":%.6g,"
                      "\"bytes_sent\":0,\"bytes_sent_raw\":0,\"bytes_recv\":0,\"stash\":1,\"inflight\":0,\"delay\":%g",
                      (long long)v, (long long)*tokens, loss, optim_lr(&o->optim, (int)step), delay0);
        progress_line(&s->prog, v == o->steps, 5.0, "update %lld/%d  loss %.4f  %.0f tok/s", (long long)v, o->steps,
                      loss, el > 0 ? *tokens / el : 0.0);
        if (o->eval_every > 0 && v % o->eval_every == 0) { progress_done(&s->prog); s_emit_eval(s, v); }
        if (s->ckpt[0] && v % o->save_every == 0) saved = s_checkpoint_save(s);
    }
    progress_done(&s->prog);
    int64_t v = s->st[0]->version;
    if (s->ckpt[0] && v % o->save_every != 0) saved = s_checkpoint_save(s);   /* the final state, as a node leaves it */
    if (!stopped && (o->eval_every == 0 || v % o->eval_every != 0)) s_emit_eval(s, v);
    if (saved < 0) { *why = "the final checkpoint was not written (the line above says why)"; return 1; }
    return stopped ? 2 : 0;
}

/* --save FILE: every stage's parameters in one model file.  0, or -1 with a reason. */
static int s_save(solo_t *s, char *err, size_t errlen)
{
    size_t nparams = s_nparams(s), off = 0;
    float *all = malloc(sizeof(float) * nparams);
    if (!all) { snprintf(err, errlen, "out of memory"); return -1; }
    for (int k = 0; k < s->K; k++) {
        memcpy(all + off, s->st[k]->params, sizeof(float) * s->st[k]->s.nparams);
        off += s->st[k]->s.nparams;
    }
    /* checked again: the run's own checkpoint may be the file now (--checkpoint DIR --save DIR/stage.ckpt) */
    int r = modelfile_check_model_target(s->o.save, err, errlen);
    if (r == 0) r = modelfile_save(s->o.save, &s->o.cfg, s->st[0]->version, opts_run_id(&s->o), all, nparams, err, errlen);
    free(all);
    if (r == 0) fprintf(stderr, "saved the model to %s\n", s->o.save);
    return r;
}

/* Options, then the checks only a whole-model run makes.  0, 1 (--help
 * printed), or -1 with a reason. */
static int s_options(solo_t *s, int argc, char **argv, char *err, size_t errlen)
{
    opts_defaults(&s->o, OPTS_SOLO);
    int r = opts_parse(&s->o, OPTS_SOLO, argc, argv, 2, err, errlen);
    if (r == 1) {
        printf("usage: brigade solo [options]\n\nTrains the whole model in one process: the reference the swarm is checked\n"
               "against.  --stages K cuts it as a K-stage swarm would, passing activations and\n"
               "gradients through --codec/--grad-codec at the cuts.\n\noptions:\n");
        opts_help(stdout, OPTS_SOLO);
        return 1;
    }
    if (r < 0 || (s->o.resume[0] ? s_load_resume(s, err, errlen) : opts_resolve(&s->o, err, errlen)) < 0) return -1;
    if (s->o.init[0] && s_load_init(s, err, errlen) < 0) return -1;
    if (s->resume && s->resume_version > s->o.steps) {   /* equal: nothing to train, the model is evaluated */
        snprintf(err, errlen, "--steps %lld: the model of --resume %s is at update %lld already (--steps counts from "
                 "the start of the run)", (long long)s->o.steps, s->o.resume, (long long)s->resume_version);
        return -1;
    }
    s->K = s->o.stages;
    if (s->o.ndelay && s->o.ndelay != s->K) {
        snprintf(err, errlen, "--delay: %d value%s for %d stage%s (want one per stage)", s->o.ndelay,
                 s->o.ndelay == 1 ? "" : "s", s->K, s->K == 1 ? "" : "s");
        return -1;
    }
    /* auto: solo has no links to measure, so the cheap-to-encode codec auto starts every link on */
    s->act_codec = codecpick_id(s->o.codec) == CODEC_AUTO ? CODEC_INT8 : codec_from_name(s->o.codec);
    s->grad_codec = codecpick_id(s->o.grad_codec) == CODEC_AUTO ? CODEC_INT8 : codec_from_name(s->o.grad_codec);
    return 0;
}

/* Everything before the first update.  0, or -1 with a reason. */
static int s_setup(solo_t *s, int64_t *first, char *err, size_t errlen)
{
    char why[400];
    if (s->o.save[0] && modelfile_check_model_target(s->o.save, why, sizeof why) < 0) {   /* known now, not after the run */
        snprintf(err, errlen, "--save %s", why);
        return -1;
    }
    *first = s->resume ? s->resume_version : 0;
    int r = s_make_stages(s, s->resume, *first, err, errlen);
    free(s->resume);
    s->resume = NULL;
    s->ck_version = -1;
    if (r == 0) r = s_checkpoint_resume(s, first, err, errlen);
    s->floor = *first;
    if (r < 0 || s_make_buffers(s, err, errlen) < 0) return -1;
    s_extra_resume(s);
    return 0;
}

int cmd_solo(int argc, char **argv)
{
    solo_t *s = calloc(1, sizeof *s);
    if (!s) return cli_fail("out of memory");
    progress_init(&s->prog);
    char err[512];
    int64_t first = 0, tokens = 0;
    int r = s_options(s, argc, argv, err, sizeof err);
    openblas_set_num_threads(1);   /* the engine's own threads (--threads) each run single-threaded BLAS */
    if (r == 0) r = s_setup(s, &first, err, sizeof err);
    if (r != 0) {
        s_destroy(s);
        free(s);
        return r == 1 ? 0 : cli_fail(err);
    }
    stopsig_install();   /* from here on a signal stops the run with its `end` event, as a node's */
    s_announce(s);
    double t0 = metrics_now();
    const char *why = "ok";
    int status = s_train(s, first, &tokens, &why);
    double wall = metrics_now() - t0;
    if (status == 0 && s->o.save[0] && s_save(s, err, sizeof err) < 0) { status = 1; why = err; }
    if (status == 2) {   /* stopped by a signal: the node's status, reason and exit code */
        stopsig_reason(stopsig_caught(), err, sizeof err);
        why = err;
        status = stopsig_status(stopsig_caught());
    }
    int64_t v = s->st[0]->version;
    metrics_event(s->metrics, "end", "\"status\":%s,\"updates\":%lld,\"tokens\":%lld,\"wall_s\":%.3f,\"lost_microbatches\":0,\"why\":%s",
                  stopsig_end_status(status), (long long)v, (long long)tokens, wall, status ? why : "completed");
    fprintf(stderr, "done: %lld updates, %lld tokens in %.1f s (%.0f tok/s)\n", (long long)v, (long long)tokens, wall,
            wall > 0 ? tokens / wall : 0.0);
    if (s->K > 1 && tokens > 0)
        fprintf(stderr, "wire: %.1f B/token of activations, %.1f B/token of gradients at the cuts (%s / %s frames)\n",
                (double)s->wire_act / tokens, (double)s->wire_grad / tokens, codec_name(s->act_codec),
                codec_name(s->grad_codec));
    s_destroy(s);
    free(s);
    if (!status) return 0;
    fprintf(stderr, "brigade solo: %s\n", why);   /* as a node's: 1 an error during the run, 128 + a signal (2: bad command line) */
    return status;
}
