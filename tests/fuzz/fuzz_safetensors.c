// fuzz-sources: node/engine/*.c compress/*.c
/* fuzz_safetensors.c: libFuzzer target for the safetensors reader
 * (st_parse) and the GPT-2 mapping on top of it (gpt2file_read).
 *
 * A parsed file's tensors must lie inside its data, and every element of a
 * readable one can be read; a checkpoint that gpt2file_read accepts must be
 * a model model_check passes.  A refusal leaves a one-line reason. */
#include "node/engine/gpt2file.h"
#include "node/engine/safetensors.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[300] = "";
    st_file_t f;
    if (st_parse(&f, data, size, "fuzz.safetensors", err, sizeof err) == 0) {
        volatile float sink = 0;
        for (int i = 0; i < f.n; i++) {
            const st_tensor_t *t = &f.t[i];
            if (t->begin > t->end || t->end > f.datalen || f.data + f.datalen != data + size) abort();
            if (t->dtype != ST_OTHER)
                for (uint64_t k = 0; k < st_numel(t); k++) sink += st_get(&f, t, k);
        }
        (void)sink;
    } else if (!err[0] || strchr(err, '\n')) {
        abort();
    }
    st_free(&f);
    model_config_t cfg;
    err[0] = '\0';
    float *p = gpt2file_read(data, size, "fuzz.safetensors", 2, &cfg, 0, NULL, err, sizeof err);
    char why[200];
    if (p && model_check(&cfg, why, sizeof why) < 0) abort();
    if (!p && (!err[0] || strchr(err, '\n'))) abort();
    free(p);
    return 0;
}
