// fuzz-sources: node/engine/*.c compress/*.c
/* fuzz_llmc.c: libFuzzer target for llm.c's model file (gpt2file_read on
 * inputs that begin with its magic).
 *
 * The first four bytes are replaced by llm.c's magic, so every input takes
 * that path.  An accepted file must be a model model_check passes whose
 * size is what its header says; it must write back (gpt2file_save) and read
 * back to the same parameters.  A refusal leaves a one-line reason. */
#include "node/engine/gpt2file.h"
#include "node/engine/modelfile.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *copy = malloc(size > 4 ? size : 4);
    memcpy(copy, data, size);
    if (size >= 4) { copy[0] = 0xc6; copy[1] = 0xd7; copy[2] = 0x34; copy[3] = 0x01; }   /* 20240326 */
    char err[300] = "", why[200];
    model_config_t cfg;
    float *p = gpt2file_read(copy, size, "fuzz.bin", 0, &cfg, 0, NULL, err, sizeof err);
    if (p) {
        if (model_check(&cfg, why, sizeof why) < 0) abort();
        char path[] = "/tmp/fuzz-llmc-XXXXXX";
        int fd = mkstemp(path);
        if (fd >= 0) {
            close(fd);
            if (gpt2file_save(path, GPT2_LLMC, &cfg, p, 0, why, sizeof why) == 0) {
                model_config_t c2;
                float *q = gpt2file_load(path, 0, &c2, 0, NULL, why, sizeof why);
                if (!q || memcmp(p, q, sizeof(float) * model_num_params(&cfg)) != 0) abort();
                free(q);
            }
            unlink(path);
        }
    } else if (!err[0] || strchr(err, '\n')) {
        abort();
    }
    free(p);
    free(copy);
    return 0;
}
