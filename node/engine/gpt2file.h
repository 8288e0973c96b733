/* gpt2file.h: GPT-2 checkpoints of other programs, read into brigade's gpt
 * and written from it.
 *
 * brigade's gpt is GPT-2's architecture (learned positions, pre-layernorm
 * blocks with biases, tanh GELU, final layernorm), so the tensors map one
 * to one (model.h's 1-stage layout on the left):
 *   wte (V,C) wpe (T,C)                    wte.weight, wpe.weight
 *   block l: ln1 w,b                       h.l.ln_1.weight, .bias
 *            qkv (3C,C), bias              h.l.attn.c_attn.weight (C,3C), .bias
 *            proj (C,C), bias              h.l.attn.c_proj.weight (C,C), .bias
 *            ln2 w,b                       h.l.ln_2.weight, .bias
 *            fc (4C,C), bias               h.l.mlp.c_fc.weight (C,4C), .bias
 *            fc proj (C,4C), bias          h.l.mlp.c_proj.weight (4C,C), .bias
 *   lnf w,b, head (V,C)                    ln_f.weight, .bias, lm_head.weight
 * Hugging Face's names, with or without the "transformer." prefix; their
 * Conv1D matrices are (in, out): the transposes of brigade's (out, in).  A
 * file without lm_head.weight ties the head to wte: it fills both.
 *
 * llm.c's model file (magic 20240326, version 3: fp32), little-endian:
 *   bytes 0..1023   256 int32: magic, version, maxT, V, L, NH, C, Vp (V
 *                   padded up to a multiple of 128), the rest 0
 *   then fp32, llm.c's order and (out, in) layout: wte (Vp,C), wpe (maxT,C),
 *   ln1w (L,C), ln1b (L,C), qkvw (L,3C,C), qkvb (L,3C), projw (L,C,C),
 *   projb (L,C), ln2w (L,C), ln2b (L,C), fcw (L,4C,C), fcb (L,4C),
 *   fcprojw (L,C,4C), fcprojb (L,C), lnfw (C), lnfb (C); always tied.
 * A file's size must be exactly what its header says.
 */
#ifndef BRIGADE_GPT2FILE_H
#define BRIGADE_GPT2FILE_H
#include <stddef.h>
#include <stdint.h>
#include "node/engine/model.h"

#define LLMC_MAGIC 20240326u
#define LLMC_VERSION 3u
#define LLMC_HEADER_BYTES 1024

typedef enum { GPT2_SAFETENSORS = 1, GPT2_LLMC = 2 } gpt2_format_t;

/* Reads the checkpoint in buf (len bytes; name for messages), a safetensors
 * or an llm.c file, told apart by llm.c's magic.  With fixed 0 the model is
 * the file's and goes to *cfg: its sizes from the tensors or llm.c's header,
 * the head count from llm.c's header, a safetensors' __metadata__ "n_head",
 * or heads (0: none given) which, where the file says it too, must agree.
 * With fixed 1 *cfg is the model wanted and every tensor's shape must fit it
 * (wpe may hold more positions: the first maxT are taken).  Returns the
 * parameters in model.h's 1-stage layout (malloc'd, model_num_params
 * floats); *tied (may be NULL) is 1 when the file has no separate head.
 * NULL with a one-line reason naming name and the tensor or field. */
float *gpt2file_read(const uint8_t *buf, size_t len, const char *name, int heads, model_config_t *cfg, int fixed,
                     int *tied, char *err, size_t errlen);
/* gpt2file_read on the file at path (mapped, not copied). */
float *gpt2file_load(const char *path, int heads, model_config_t *cfg, int fixed, int *tied, char *err,
                     size_t errlen);
/* Any model file brigade reads: its own (modelfile.h: the model is the
 * file's; heads, when given, must agree), a safetensors or an llm.c file
 * (gpt2file_load with fixed 0).  *updates (may be NULL) gets the updates of
 * a brigade model file, 0 for the others.  NULL with a one-line reason. */
float *gpt2file_load_any(const char *path, int heads, model_config_t *cfg, int64_t *updates, uint64_t *run,
                         char *err, size_t errlen);
/* Fills params with stage `stage` of a `nstages` split of cfg (its
 * stage_num_params floats) from the checkpoint at path, whose shapes must
 * be cfg's (gpt2file_load with fixed 1).  0, or -1 with a one-line reason. */
int gpt2file_load_stage(const char *path, const model_config_t *cfg, int stage, int nstages, float *params,
                        char *err, size_t errlen);
/* 1 when the head of params (1-stage layout of cfg) equals wte bit for bit:
 * a tied model (one never trained apart from its embedding). */
int gpt2file_tied(const model_config_t *cfg, const float *params);
/* Writes params (1-stage layout of a gpt cfg) to path in format fmt,
 * atomically.  safetensors: Hugging Face's names and layouts, lm_head.weight
 * only when the head differs from wte, __metadata__ with the shape (n_vocab,
 * n_ctx, n_embd, n_layer, n_head) and run (brigade's run id in hex; 0: not
 * known, left out).  llm.c: refused when the head differs from wte.
 * 0, or -1 with a one-line reason. */
int gpt2file_save(const char *path, gpt2_format_t fmt, const model_config_t *cfg, const float *params,
                  uint64_t run, char *err, size_t errlen);
#endif
