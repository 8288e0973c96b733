/* model.h: brigade's models (a byte-level gpt and an MLP classifier) cut into
 * pipeline stages.
 *
 * A model is a chain of units: for a gpt the token+position embedding, L
 * transformer blocks, and the head (final layernorm, an untied (V,C) output
 * matrix, softmax cross-entropy); for the MLP, four linear layers (ReLU after
 * the first three, cross-entropy after the last).  A K-stage split gives each
 * stage a contiguous run of units: stage 0 holds the embedding (gpt) and the
 * last stage the head.  Between stages travels one float tensor: the residual
 * stream (B,T,C) of a gpt, the hidden activation (B,H) of the MLP.
 *
 * A stage's parameters are one contiguous float buffer of stage_num_params()
 * floats (gradients and AdamW moments are buffers of the same layout), so the
 * optimizer, checkpoints and averaging are single loops over it.  Parameter
 * values depend only on (seed, unit, tensor), never on the split, so any K
 * computes the same model.
 */
#ifndef BRIGADE_MODEL_H
#define BRIGADE_MODEL_H
#include <stddef.h>
#include <stdint.h>
#include "node/engine/data.h"

typedef enum { MODEL_GPT = 1, MODEL_MLP = 2 } model_kind_t;
/* How the blocks are dealt out to the stages (stage_units). */
/* How the units are dealt to the stages (model.c, stage_units); 2 is
 * --split auto's (node/runtime/options.h), never a layout. */
typedef enum { SPLIT_EVEN = 0, SPLIT_LATE = 1, SPLIT_FRONT = 3 } model_split_t;

typedef struct {
    model_kind_t kind;  /* gpt or mlp */
    char name[24];      /* preset name, e.g. "gpt-tiny" */
    int V;              /* gpt: vocabulary (256: bytes); mlp: classes */
    int maxT;           /* gpt: context length; mlp: 1 */
    int C;              /* gpt: channels; mlp: hidden width */
    int L;              /* gpt: transformer blocks; mlp: hidden layers */
    int NH;             /* gpt: attention heads; mlp: 0 */
    int D;              /* mlp: input features (784); gpt: 0 */
    model_split_t split;/* the split rule of a K-stage split (not the model: any split computes the same one,
                           but for where a bottleneck's cuts sit) */
    int bneck;          /* gpt: the learned bottleneck's width divisor S (0: none): see below */
    int bneck_k;        /* with bneck: the cuts sit at the boundaries of a bneck_k-stage split (by split) */
} model_config_t;

/* The learned bottleneck (--bottleneck S): at each of the bneck_k - 1 cuts of
 * a bneck_k-stage split the residual stream x (N,C) is narrowed to
 * z = LN2(LN1(x) @ Wdown^T + bdown) of width C/S (what crosses the cut, and
 * whose gradient crosses back), and the next unit reads x' = z @ Wup^T + bup.
 * The sending stage holds cut j's LN1, down and LN2 (after its units), the
 * receiving stage its up (before its units); a 1-stage split of the model
 * holds every cut inside it and computes the same.  Their tensors' unit is
 * MODEL_CUT_UNIT + 2 j (the sending part) and + 2 j + 1 (the receiving part),
 * in the order ln_1.weight ln_1.bias down.weight (C/S,C) down.bias ln_2.weight
 * ln_2.bias, then up.weight (C,C/S) up.bias. */
#define MODEL_CUT_UNIT 1024
/* The cut after unit u (its index j), or -1 when none follows it. */
int model_cut_after(const model_config_t *cfg, int u);
/* Width of the tensor that crosses a cut between stages: C, or C/S with a bottleneck. */
int model_cut_width(const model_config_t *cfg);

#define MODEL_VOCAB_MAX (1 << 20)   /* largest gpt vocabulary */

/* Fills cfg with a preset: gpt-tiny, gpt-small, gpt-base, gpt2 (GPT-2
 * small's shape: vocabulary 50257, context 1024, width 768, 12 blocks of 12
 * heads), mlp-fmnist.
 * Returns 0, or -1 with a reason in err. */
int model_preset(model_config_t *cfg, const char *name, char *err, size_t errlen);
/* Checks sizes (positive, C divisible by NH, a bottleneck's S dividing C, limits).  0 or -1 with reason. */
int model_check(const model_config_t *cfg, char *err, size_t errlen);
/* Number of units in the chain (gpt: L + 2, mlp: L + 1). */
int model_num_units(const model_config_t *cfg);
/* The data kind the model consumes. */
data_kind_t model_data_kind(const model_config_t *cfg);
/* Checks that the opened data set d fits cfg: an mlp reads data_dim(d)
 * inputs per sample and needs a class for each of data_classes(d) labels;
 * a gpt's vocabulary holds every token of d (the reason names the file and
 * byte offset of a token outside it).  The sizes of a model file
 * or a run config are otherwise only checked against their limits.  Returns
 * 0, or -1 with a reason naming spec (--data's value) in err. */
int model_check_data(const model_config_t *cfg, const data_t *d, const char *spec, char *err, size_t errlen);

/* One tensor of a stage's parameter buffer. */
typedef struct {
    size_t offset, size;  /* in floats, within the stage buffer */
    int unit;             /* which unit of the chain */
    int decay;            /* 1: AdamW weight decay applies (matrices) */
    int rows;             /* a gpt block's matrix, (rows, size / rows) row-major, that
                             --optim muon orthogonalizes; 0 for every other tensor */
} param_tensor_t;

/* Most pipeline stages of any split: solo --stages, a swarm's run config,
 * node --stage, the runtime's per-stage tables and assemble all use this one
 * bound.  model_check allows 128 blocks, so every gpt can still be cut one
 * block per stage. */
#define MODEL_STAGES_MAX 128
#define STAGE_MAX_TENSORS 1600   /* 128 blocks x 12 tensors + embedding + head */
#define MODEL_MAX_PARAMS (1ULL << 28)  /* refuse bigger models (1 GiB of fp32 weights) */
#define MODEL_HEAD_CHUNK_FLOATS (1L << 24)   /* a gpt head's logits per chunk of rows, by default (64 MiB) */

/* The static description of one stage of a split. */
typedef struct {
    model_config_t cfg;   /* the whole model */
    int stage, nstages;   /* this stage, of how many */
    int unit0, unit1;     /* units [unit0, unit1) live here */
    int first, last;      /* 1 when this is the first / last stage */
    size_t nparams;       /* floats in the parameter buffer */
    int ntensors;         /* entries of tensors[] */
    int threads;          /* threads an engine call on this stage may use (stage_init: 1); not part of the model */
    int head_rows;        /* rows per chunk of a gpt's head (0, stage_init's: MODEL_HEAD_CHUNK_FLOATS / V); set
                             before acts_new and grad_scratch_new; not part of the model */
    param_tensor_t tensors[STAGE_MAX_TENSORS];
} stage_t;

/* Describes stage `stage` of a K-stage split of cfg.  Returns 0, or -1 with a
 * reason (e.g. more stages than units). */
int stage_init(stage_t *s, const model_config_t *cfg, int stage, int nstages,
               char *err, size_t errlen);
/* Range of units that stage `stage` of K holds (the split rule). */
void stage_units(const model_config_t *cfg, int stage, int nstages, int *unit0, int *unit1);
/* A split rule's name as --split spells it ("even", "late", "front"). */
const char *split_name(model_split_t split);
/* Floats of stage `stage`'s parameters in a K-stage split of cfg (0 when
 * stage_init refuses the split or the stage). */
size_t stage_num_params(const model_config_t *cfg, int stage, int nstages);
/* Writes the initial parameters (deterministic in seed; independent of the split). */
void stage_init_params(const stage_t *s, float *params, uint64_t seed);
/* Floats in the tensor that crosses into this stage (0 for the first stage)
 * and out of it (0 for the last), for a microbatch of B samples of T positions. */
size_t stage_in_size(const stage_t *s, int B, int T);
size_t stage_out_size(const stage_t *s, int B, int T);

/* Activations of one microbatch in flight through a stage: everything the
 * backward pass needs, plus the input/output/gradient buffers that cross the
 * stage boundaries.  Allocated once per (stage, B, T) and reused. */
typedef struct {
    int B, T;
    float *in;        /* (B,T,C)/(B,H) input from the previous stage; NULL on the first */
    int *tokens;      /* (B,T) first stage of a gpt */
    float *x;         /* (B,D) first stage of the mlp */
    int *targets;     /* (B,T) or (B): last stage */
    float *out;       /* output to the next stage; NULL on the last */
    float *dout;      /* gradient of out, from the next stage; NULL on the last */
    float *din;       /* gradient of in, for the previous stage; NULL on the first */
    float loss;       /* last stage: mean loss of the forward pass */
    int correct;      /* last stage, classifiers: samples predicted right */
    float *buf;       /* one allocation behind every saved activation */
    size_t nbuf;      /* floats in buf */
    int workers;      /* threads its forward's scratch is sized for (s->threads at acts_new) */
} acts_t;

/* Allocates the activations of stage s for B samples of T positions, with
 * scratch for s->threads threads. NULL when out of memory. */
acts_t *acts_new(const stage_t *s, int B, int T);
void acts_destroy(acts_t **self_p);
/* The inputs alone of a microbatch at stage s (what activation
 * recomputation keeps while it is in flight): in, tokens or x, targets, as
 * acts_new has them; out, dout, din and the saved activations are NULL, so
 * stage_forward and stage_backward do not take it: its inputs are copied
 * into full activations (acts_copy_inputs) to run a pass.  NULL when out of
 * memory. */
acts_t *acts_new_inputs(const stage_t *s, int B, int T);
/* Copies the inputs of src (in, tokens, x, targets: those stage s has) into
 * dst; both are stage s's for the same B and T, from acts_new or
 * acts_new_inputs. */
void acts_copy_inputs(const stage_t *s, acts_t *dst, const acts_t *src);
/* Floats acts_new allocates (for memory reports). */
size_t acts_floats(const stage_t *s, int B, int T);

/* Scratch for the backward pass, shared by all microbatches of a stage;
 * sized for s->threads threads. */
typedef struct grad_scratch grad_scratch_t;
grad_scratch_t *grad_scratch_new(const stage_t *s, int B, int T);
void grad_scratch_destroy(grad_scratch_t **self_p);

/* Forward pass of stage s with parameters params on the inputs in a (in or
 * tokens/x, plus targets on the last stage).  Fills a->out (or a->loss and
 * a->correct on the last stage) and saves what backward needs in a.  Uses
 * min(s->threads, a->workers) threads: its own, started and joined in the
 * call (team.h); the results do not depend on the thread count except
 * through the BLAS's rounding of split products (split.h). */
void stage_forward(const stage_t *s, const float *params, acts_t *a);
/* Backward pass: with a->dout set (not on the last stage) and the activations
 * saved by stage_forward with the same params, accumulates parameter
 * gradients into grads (+=) and writes a->din (not on the first stage).
 * loss_scale multiplies the gradient of the summed per-position losses
 * (usually 1 / (positions x microbatches per update)).  Threads as
 * stage_forward, up to the scratch's size. */
void stage_backward(const stage_t *s, const float *params, float *grads, acts_t *a,
                    grad_scratch_t *g, float loss_scale);
/* stage_forward for a backward alone (activation recomputation): saves
 * the same bits stage_backward reads, but a->out, which it reads not, is
 * left as it was on a gpt stage before the last (its last product is
 * skipped: about a sixth of a two-block stage's forward). */
void stage_recompute(const stage_t *s, const float *params, acts_t *a);
/* Forward-only pass for evaluation/sampling: same as stage_forward. */
#define stage_eval stage_forward

/* Last stage of a gpt: the logits (V floats) of row `row` (b * T + t) of the
 * last forward with params, recomputed into out (the head keeps no (B,T,V)
 * logits: it runs on chunks of rows, see head_rows). */
void stage_head_logits(const stage_t *s, const float *params, const acts_t *a, int row, float *out);
#endif
