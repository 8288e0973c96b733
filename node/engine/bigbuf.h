/* bigbuf.h: the engine's large float buffers (parameters with their
 * gradients and moments, activations, backward scratch).
 *
 * They are allocated zeroed, aligned to 2 MiB and, on Linux, marked for
 * transparent huge pages (madvise MADV_HUGEPAGE), so that the products'
 * strided reads (a BLAS packing a column panel reads one row per 4 KiB page
 * at these widths) are not paced by TLB misses.  Where huge pages are
 * unavailable the advice is ignored and the buffer is an ordinary one. */
#ifndef BRIGADE_BIGBUF_H
#define BRIGADE_BIGBUF_H
#include <stddef.h>

/* n floats (at least one), zeroed; NULL when out of memory.  Release with
 * bigbuf_free. */
float *bigbuf_new(size_t n);
void bigbuf_free(float *p);
#endif
