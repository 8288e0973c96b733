/* modelfile.h: files of model state.
 *
 * A model file (`solo --save`, `brigade assemble`; read by `solo --resume`
 * and `brigade sample`) holds the whole model:
 *   magic "BRGDMODL", u32 format version, the model config (kind, V, maxT,
 *   C, L, NH, D as i32, name as 24 bytes), u64 updates done, u64 parameter
 *   count, u64 run id (from version 2; 0: not known), the parameters as f32
 *   in unit order (the 1-stage layout of model.h), u32 CRC-32 of everything
 *   before it.  Version 1 files (no run id) are read too.  A model with a
 *   bottleneck (model.h) is written as version 3: after the run id u32 S,
 *   u32 the stages of its cuts, u32 the split rule (where they sit); the
 *   others are written as version 2.
 * A stage checkpoint (`node --checkpoint DIR`, file DIR/stage.ckpt) holds
 * one stage's training state:
 *   magic "BRGDCKPT", u32 format version, the model config as above, u64 run
 *   id, u32 stage, u32 stages, u32 split rule (model.h's model_split_t),
 *   u64 weight version, u64 data cursor, u64
 *   microbatches completed, u64 parameter count n, (version 3, a model
 *   with a bottleneck: u32 S, u32 the stages of its cuts,) then params, m
 *   and v (3n f32), u32 CRC-32.
 * solo's extra state beside its checkpoint (file DIR/stage.ckpt.solo), what
 * a restart needs besides the stages' state to go on as an uninterrupted
 * run would: magic "BRGDSXTR", u32 format version, u64 run id, u64 the
 * checkpoint's weight version, u64 the first version its weight rings hold,
 * u64 count n, n f32 (solo.c says which), u32 CRC-32.
 * All integers little-endian.  Files are written atomically: a temporary
 * file, fsync, rename, so a crash mid-write leaves the previous file.
 */
#ifndef BRIGADE_MODELFILE_H
#define BRIGADE_MODELFILE_H
#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include "node/engine/model.h"

#define MODELFILE_VERSION 2      /* 2: the run id after the parameter count */
#define MODELFILE_VERSION_BNECK 3  /* a model with a bottleneck: 3, its fields after the run id */
#define CHECKPOINT_VERSION 2   /* 2: the split rule after the stage count */
#define CHECKPOINT_VERSION_BNECK 3   /* a model with a bottleneck: 3, its fields after the parameter count */
#define CKPT_EXTRA_VERSION 1

/* Writes cfg, the run id and params (n floats, the whole model) to path
 * atomically.  0, or -1 with a reason. */
int modelfile_save(const char *path, const model_config_t *cfg, int64_t updates, uint64_t run,
                   const float *params, size_t n, char *err, size_t errlen);
/* Reads a model file: fills cfg, updates and run (may be NULL), and returns a malloc'd array of
 * *n floats (the caller frees it).  NULL with a one-line reason naming the
 * file (missing, not a regular file, truncated or longer than its header
 * says, bad magic, checksum mismatch, an update count below 0, sizes that do
 * not match the config). */
float *modelfile_load(const char *path, model_config_t *cfg, int64_t *updates, uint64_t *run, size_t *n,
                      char *err, size_t errlen);
/* Whether a model file or checkpoint can be written at path, asked before
 * a run rather than found out at its end: path is no folder and its folder
 * takes the temporary file a save writes first (made and removed here).
 * 0, or -1 with a one-line reason naming path. */
int modelfile_check_writable(const char *path, char *err, size_t errlen);
/* Whether a model file can be written at path: as modelfile_check_writable,
 * and path is not a checkpoint (which the model file would replace, losing
 * the optimizer state it holds).  0, or -1 with a one-line reason. */
int modelfile_check_model_target(const char *path, char *err, size_t errlen);
/* The one atomic writer of files: the n byte ranges parts[i] (lens[i]
 * bytes) one after the other, into a temporary file beside path, synced,
 * renamed over path (over the file a symbolic link there ends at), the
 * folder synced: a crash or a failed write leaves the previous file and no
 * partial one.  0, or -1 with a one-line reason naming path. */
int modelfile_write_atomic(const char *path, const void *const *parts, const size_t *lens, int n,
                           char *err, size_t errlen);
/* Parameters of the whole model (all stages of a 1-stage split). */
size_t model_num_params(const model_config_t *cfg);

/* What a checkpoint may say it is at: a weight version an optimizer counts
 * in an int, and no more microbatches than --steps x --micro at their
 * bounds (1e8 x 65536) could complete.  checkpoint_load refuses others. */
#define CKPT_VERSION_MAX   ((int64_t)INT32_MAX - 1)
#define CKPT_COMPLETED_MAX (100000000ull * 65536ull)

/* What a stage checkpoint records besides the tensors. */
typedef struct {
    model_config_t cfg;   /* the model */
    uint64_t run;         /* run id */
    int stage, nstages;   /* the split (its rule: cfg.split) */
    int64_t version;      /* weight version */
    uint64_t cursor;      /* data position (data stage) */
    uint64_t completed;   /* microbatches completed here (last stage) */
} checkpoint_info_t;

/* Writes a stage checkpoint: params, m, v of n floats each. */
int checkpoint_save(const char *path, const checkpoint_info_t *info, const float *params,
                    const float *m, const float *v, size_t n, char *err, size_t errlen);
/* Reads a stage checkpoint: fills info and returns a malloc'd array of 3n
 * floats (params, m, v) with n in *n.  NULL with a reason. */
float *checkpoint_load(const char *path, checkpoint_info_t *info, size_t *n, char *err, size_t errlen);
/* Writes solo's extra state of checkpoint version `version` of run `run`
 * (floor: the first version its weight rings hold; x: n floats) to path
 * atomically.  0, or -1 with a reason. */
int ckpt_extra_save(const char *path, uint64_t run, int64_t version, int64_t floor, const float *x, size_t n,
                    char *err, size_t errlen);
/* Reads the extra state at path, which must be of run `run`, checkpoint
 * version `version` and n floats: a malloc'd array of n floats, the floor
 * in *floor.  NULL with a one-line reason naming the file (missing, damaged,
 * or of another checkpoint: a save cut short between the two files). */
float *ckpt_extra_load(const char *path, uint64_t run, int64_t version, int64_t *floor, size_t n, char *err,
                       size_t errlen);
/* A checkpoint folder (--checkpoint dir): makes dir if it is missing, takes
 * its lock (an exclusive flock of dir/.lock, which holds the owner's pid:
 * the descriptor goes to *lock, and the caller closes it when done with the
 * folder, or the process's end releases it; two processes saving into one
 * folder overwrote each other's stage), puts dir/stage.ckpt in path (pathlen
 * bytes), removes what saves cut short left there (stage.ckpt.tmp.PID
 * files), checks that a checkpoint can be written there and reads the one
 * there, if any (*state as checkpoint_load returns it, the caller frees it).
 * 1 when one was read, 0 when there is none yet (*state NULL), -1 with a
 * one-line reason that names the folder or the file (another process holds
 * the folder; an unreadable file is left as it is, and the reason says what
 * to do with it), *lock then -1. */
int checkpoint_find(const char *dir, char *path, size_t pathlen, checkpoint_info_t *info, float **state, size_t *n,
                    int *lock, char *err, size_t errlen);
#endif
