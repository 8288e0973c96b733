/* assemble.c: `brigade assemble CHECKPOINT_DIR... --out FILE` joins the stage
 * checkpoints of one run into a whole-model file. */
#include "node/cli/cli.h"
#include "node/engine/modelfile.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define ASSEMBLE_MAX MODEL_STAGES_MAX   /* one folder per stage */

int cmd_assemble(int argc, char **argv)
{
    const char *out = NULL;
    const char *dirs[ASSEMBLE_MAX];
    int nd = 0;
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("usage: brigade assemble CHECKPOINT_DIR... --out FILE\n"
                   "  joins the stage checkpoints (DIR/stage.ckpt) of one run, one per stage,\n"
                   "  into a model file for brigade sample and brigade solo --resume\n");
            return 0;
        }
        if (!strcmp(argv[i], "--out")) {
            if (i + 1 >= argc) return cli_fail("assemble: --out needs a FILE");
            out = argv[++i];
        } else if (argv[i][0] == '-') {
            char e[300];
            snprintf(e, sizeof e, "assemble: unknown option '%s'", argv[i]);
            return cli_fail(e);
        } else if (nd < ASSEMBLE_MAX) {
            dirs[nd++] = argv[i];
        } else {
            char e[300];
            snprintf(e, sizeof e, "assemble: at most %d checkpoint folders (one per stage)", ASSEMBLE_MAX);
            return cli_fail(e);
        }
    }
    if (!out || nd == 0) return cli_fail("assemble: usage: brigade assemble CHECKPOINT_DIR... --out FILE");
    checkpoint_info_t info[ASSEMBLE_MAX];
    float *state[ASSEMBLE_MAX] = {0};
    size_t np[ASSEMBLE_MAX];
    char err[600], path[4200];
    int rc = 0;
    for (int i = 0; i < nd && !rc; i++) {
        struct stat sb;
        if (stat(dirs[i], &sb) == 0 && S_ISDIR(sb.st_mode)) snprintf(path, sizeof path, "%s/stage.ckpt", dirs[i]);
        else snprintf(path, sizeof path, "%s", dirs[i]);
        state[i] = checkpoint_load(path, &info[i], &np[i], err, sizeof err);
        if (!state[i]) rc = cli_fail(err);
    }
    int K = rc ? 0 : info[0].nstages;
    int *which = calloc(K > 0 ? (size_t)K : 1, sizeof(int));
    for (int s = 0; s < K; s++) which[s] = -1;
    for (int i = 0; i < nd && !rc; i++) {
        if (info[i].run != info[0].run || info[i].nstages != K || memcmp(&info[i].cfg, &info[0].cfg, sizeof info[0].cfg)) {
            snprintf(err, sizeof err, "assemble: %s is from another run or split than %s", dirs[i], dirs[0]);
            rc = cli_fail(err);
        } else if (which[info[i].stage] >= 0) {
            snprintf(err, sizeof err, "assemble: stage %d given twice (%s and %s)", info[i].stage, dirs[which[info[i].stage]], dirs[i]);
            rc = cli_fail(err);
        } else {
            which[info[i].stage] = i;
        }
    }
    for (int s = 0; s < K && !rc; s++)
        if (which[s] < 0) {
            snprintf(err, sizeof err, "assemble: no checkpoint of stage %d among the folders given", s);
            rc = cli_fail(err);
        }
    if (!rc) {
        size_t total = model_num_params(&info[0].cfg), off = 0;
        float *all = malloc(sizeof(float) * total);
        int64_t version = -1;
        for (int s = 0; s < K && all; s++) {
            int i = which[s];
            memcpy(all + off, state[i], sizeof(float) * np[i]);
            off += np[i];
            if (version < 0 || info[i].version < version) version = info[i].version;
        }
        if (!all || off != total) rc = cli_fail("assemble: the stages do not add up to the model");
        else if (modelfile_save(out, &info[0].cfg, version, all, total, err, sizeof err) < 0) rc = cli_fail(err);
        else printf("assembled %d stages of %s (%zu parameters, version %lld) into %s\n", K, info[0].cfg.name, total, (long long)version, out);
        free(all);
    }
    for (int i = 0; i < nd; i++) free(state[i]);
    free(which);
    return rc;
}
