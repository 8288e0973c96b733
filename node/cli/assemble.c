/* assemble.c: `brigade assemble CHECKPOINT_DIR... --out FILE` joins the stage
 * checkpoints of one run into a whole-model file. */
#include "node/cli/cli.h"
#include "node/engine/modelfile.h"
#include "node/runtime/options.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define ASSEMBLE_MAX MODEL_STAGES_MAX   /* one folder per stage */

/* Reads the command line into *out and dirs[0, *nd).  0, 1 when --help was
 * shown, or 2 after a one-line error. */
static int s_args(int argc, char **argv, const char **out, const char **dirs, int *nd)
{
    char e[600];
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("usage: brigade assemble CHECKPOINT_DIR... --out FILE\n"
                   "  joins the stage checkpoints (DIR/stage.ckpt) of one run, one per stage,\n"
                   "  into a model file for brigade sample and brigade solo --resume\n");
            return 1;
        }
        const char *v = NULL, *was = *out;
        char why[500];
        int r = opts_take(argc, argv, &i, "out", "FILE", &v, why, sizeof why);
        if (r < 0) {
            snprintf(e, sizeof e, "assemble: %s", why);
            return cli_fail(e);
        }
        if (r > 0 && was) {   /* one model file: the last of two is not taken silently */
            snprintf(e, sizeof e, "assemble: --out given twice ('%s' and '%s'); the model goes to one file", was, v);
            return cli_fail(e);
        }
        if ((r > 0 && !*v) || (r == 0 && !argv[i][0])) {   /* a write of all the stages would fail at its end */
            snprintf(e, sizeof e, "assemble: %s: empty value", r > 0 ? "--out" : "a checkpoint folder");
            return cli_fail(e);
        }
        if (r > 0) {
            *out = v;
        } else if (argv[i][0] == '-') {
            snprintf(e, sizeof e, "assemble: unknown option '%s'", argv[i]);
            return cli_fail(e);
        } else if (*nd < ASSEMBLE_MAX) {
            dirs[(*nd)++] = argv[i];
        } else {
            snprintf(e, sizeof e, "assemble: at most %d checkpoint folders (one per stage)", ASSEMBLE_MAX);
            return cli_fail(e);
        }
    }
    if (!*out || *nd == 0) return cli_fail("assemble: usage: brigade assemble CHECKPOINT_DIR... --out FILE");
    return 0;
}

/* which[s] = the index in info[0, nd) of stage s's checkpoint, for the K
 * stages of info[0]'s run: every checkpoint of that run and split, each stage
 * once.  0, or 2 after a one-line error. */
static int s_stage_order(int *which, const checkpoint_info_t *info, const char **dirs, int nd, int K)
{
    char err[600];
    for (int s = 0; s < K; s++) which[s] = -1;
    for (int i = 0; i < nd; i++) {
        if (info[i].run != info[0].run || info[i].nstages != K || memcmp(&info[i].cfg, &info[0].cfg, sizeof info[0].cfg)) {
            snprintf(err, sizeof err, "assemble: %s is from another run or split than %s", dirs[i], dirs[0]);
            return cli_fail(err);
        }
        if (info[i].stage < 0 || info[i].stage >= K) {
            snprintf(err, sizeof err, "assemble: %s holds stage %d of a %d-stage split", dirs[i], info[i].stage, K);
            return cli_fail(err);
        }
        if (which[info[i].stage] >= 0) {
            snprintf(err, sizeof err, "assemble: stage %d given twice (%s and %s)", info[i].stage, dirs[which[info[i].stage]], dirs[i]);
            return cli_fail(err);
        }
        which[info[i].stage] = i;
    }
    for (int s = 0; s < K; s++)
        if (which[s] < 0) {
            snprintf(err, sizeof err, "assemble: no checkpoint of stage %d among the folders given", s);
            return cli_fail(err);
        }
    return 0;
}

/* Joins the K stages' parameters, in stage order (which), into the model
 * file out, at the oldest of their versions.  0, or 2 after a one-line error. */
static int s_join(const char *out, const int *which, const checkpoint_info_t *info, float *const *state,
                  const size_t *np, int K)
{
    char err[600];
    size_t total = model_num_params(&info[0].cfg), off = 0;
    float *all = malloc(sizeof(float) * total);
    if (!all) return cli_fail("assemble: out of memory");
    int64_t version = -1;
    for (int s = 0; s < K && off <= total; s++) {
        int i = which[s];
        if (np[i] <= total - off) memcpy(all + off, state[i], sizeof(float) * np[i]);
        off += np[i];
        if (version < 0 || info[i].version < version) version = info[i].version;
    }
    int rc = 0;
    if (off != total) rc = cli_fail("assemble: the stages do not add up to the model");
    else if (modelfile_save(out, &info[0].cfg, version, info[0].run, all, total, err, sizeof err) < 0) rc = cli_fail(err);
    else printf("assembled %d stage%s of %s (%zu parameters, version %lld) into %s\n", K, K == 1 ? "" : "s", info[0].cfg.name, total, (long long)version, out);
    free(all);
    return rc;
}

int cmd_assemble(int argc, char **argv)
{
    const char *out = NULL;
    const char *dirs[ASSEMBLE_MAX];
    int nd = 0;
    int rc = s_args(argc, argv, &out, dirs, &nd);
    if (rc) return rc == 1 ? 0 : rc;
    checkpoint_info_t info[ASSEMBLE_MAX];
    float *state[ASSEMBLE_MAX] = {0};
    size_t np[ASSEMBLE_MAX];
    char err[600], path[4200];
    if (modelfile_check_model_target(out, err, sizeof err) < 0) {
        char e2[640];
        snprintf(e2, sizeof e2, "assemble: --out %s", err);
        return cli_fail(e2);
    }
    for (int i = 0; i < nd && !rc; i++) {
        struct stat sb;
        if (stat(dirs[i], &sb) == 0 && S_ISDIR(sb.st_mode)) snprintf(path, sizeof path, "%s/stage.ckpt", dirs[i]);
        else snprintf(path, sizeof path, "%s", dirs[i]);
        state[i] = checkpoint_load(path, &info[i], &np[i], err, sizeof err);
        if (!state[i]) rc = cli_fail(err);
    }
    int which[ASSEMBLE_MAX];
    int K = rc ? 0 : info[0].nstages;
    if (!rc && (K < 1 || K > ASSEMBLE_MAX)) rc = cli_fail("assemble: the checkpoints name an impossible number of stages");
    if (!rc) rc = s_stage_order(which, info, dirs, nd, K);
    if (!rc) rc = s_join(out, which, info, state, np, K);
    for (int i = 0; i < nd; i++) free(state[i]);
    return rc;
}
