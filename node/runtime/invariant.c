/* invariant.c: a broken invariant's report (invariant.h). */
#include "node/runtime/invariant.h"
#include <stdio.h>
#include <stdlib.h>

void invariant_fail(const char *expr, const char *file, int line)
{
    fprintf(stderr, "brigade: invariant violation at %s:%d: %s\n", file, line, expr);
    fflush(stderr);
    abort();
}
