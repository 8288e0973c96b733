// fuzz-sources: node/runtime/options.c node/runtime/proto.c node/engine/*.c net/wire.c net/keys.c compress/*.c
/* fuzz_runcfg.c: libFuzzer target for the run config a joiner receives in
 * WELCOME (proto_get_runcfg).
 *
 * A config that decodes must be one the node can run with: a model that
 * passes model_check, a stage split that stage_init accepts for every
 * stage, known codecs, positive sizes; it must encode back to a config that
 * decodes to the same run id, and a refused one must leave the caller's
 * options untouched. */
#include "net/wire.h"
#include "node/engine/model.h"
#include "node/runtime/options.h"
#include "node/runtime/proto.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static opts_t base, o, o2;
    static int init;
    if (!init) {
        opts_defaults(&base, OPTS_NODE);
        char err[256];
        if (opts_resolve(&base, err, sizeof err) < 0) abort();
        init = 1;
    }
    uint8_t *copy = malloc(size ? size : 1);
    if (size) memcpy(copy, data, size);
    o = base;
    rbuf_t r;
    rbuf_init(&r, copy, size);
    char err[256];
    err[0] = '\0';
    if (proto_get_runcfg(&r, &o, err, sizeof err) == 0) {
        char why[256];
        if (model_check(&o.cfg, why, sizeof why) < 0) abort();
        if (o.stages < 1 || o.steps < 1 || o.batch < 1 || o.micro < 1) abort();
        for (int s = 0; s < o.stages && s < 4; s++) {
            stage_t st;
            if (stage_init(&st, &o.cfg, s, o.stages, why, sizeof why) < 0) abort();
        }
        if (!isfinite(o.optim.lr) || !isfinite(o.optim.wd) || !isfinite(o.optim.clip)) abort();
        wbuf_t w;
        wbuf_init(&w, 1 << 16);
        proto_put_runcfg(&w, &o);
        if (wbuf_error(&w)) abort();
        o2 = base;
        rbuf_t r2;
        rbuf_init(&r2, w.data, w.len);
        if (proto_get_runcfg(&r2, &o2, why, sizeof why) < 0) abort();
        if (opts_run_id(&o2) != opts_run_id(&o)) abort();
        wbuf_free(&w);
    } else {
        if (err[0] == '\0') abort();
        if (memcmp(&o, &base, sizeof o) != 0) abort();   /* refused: o untouched */
    }
    free(copy);
    return 0;
}
