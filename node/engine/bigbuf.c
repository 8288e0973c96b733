/* bigbuf.c: large zeroed float buffers on huge pages where possible (bigbuf.h). */
#include "node/engine/bigbuf.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define S_HUGE ((size_t)2 << 20)   /* the x86-64 huge page */

float *bigbuf_new(size_t n)
{
    size_t bytes = (n ? n : 1) * sizeof(float);
    if (bytes / sizeof(float) != (n ? n : 1)) return NULL;
    /* small buffers gain nothing from a huge page: keep them ordinary */
    if (bytes < S_HUGE) return calloc(n ? n : 1, sizeof(float));
    if (bytes > SIZE_MAX - (S_HUGE - 1)) return NULL;   /* rounding up would wrap to a small size */
    size_t rounded = (bytes + S_HUGE - 1) / S_HUGE * S_HUGE;
    void *p = NULL;
    if (posix_memalign(&p, S_HUGE, rounded) != 0) return NULL;
#ifdef MADV_HUGEPAGE
    (void)madvise(p, rounded, MADV_HUGEPAGE);   /* advice only: fine if refused */
#endif
    memset(p, 0, rounded);
    return p;
}

void bigbuf_free(float *p)
{
    free(p);
}
