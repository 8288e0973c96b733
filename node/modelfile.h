/* modelfile.h: the whole-model file written by `solo --save` and `brigade
 * assemble`, read by `solo --resume` and `brigade sample`.
 * Layout (little-endian): magic "BRGDMODL", u32 format version, the model
 * config (kind, V, maxT, C, L, NH, D as i32, name as 24 bytes), u64 updates
 * done, u64 parameter count, the parameters as f32 in unit order (the
 * 1-stage layout of model.h), u32 CRC-32 of everything before it. */
#ifndef BRIGADE_MODELFILE_H
#define BRIGADE_MODELFILE_H
#include <stddef.h>
#include <stdint.h>
#include "node/model.h"

#define MODELFILE_VERSION 1

/* Writes cfg and params (n floats, the whole model) to path atomically (temp
 * file, fsync, rename).  0, or -1 with a reason. */
int modelfile_save(const char *path, const model_config_t *cfg, int64_t updates,
                   const float *params, size_t n, char *err, size_t errlen);
/* Reads a model file: fills cfg and updates, and returns a malloc'd array of
 * *n floats (the caller frees it).  NULL with a one-line reason naming the
 * file (missing, truncated, bad magic, checksum mismatch, sizes that do not
 * match the config). */
float *modelfile_load(const char *path, model_config_t *cfg, int64_t *updates, size_t *n,
                      char *err, size_t errlen);
/* Parameters of the whole model (all stages of a 1-stage split). */
size_t model_num_params(const model_config_t *cfg);
#endif
