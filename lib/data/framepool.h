/* Independent zstd frames compressed on worker threads and handed back in submission order.
 *
 * The caller fills a buffer per frame and submits it; `threads` workers compress frames in
 * parallel (one single-threaded ZSTD_CCtx each, so a frame's bytes do not depend on the
 * number of threads or on which worker took it); a sink receives each finished frame, in the
 * order submitted, on the caller's thread, with the XXH3-64 check of the stored bytes.
 * Level 0 stores frames as they are (checked, not compressed). */
#ifndef TUPE_FRAMEPOOL_H
#define TUPE_FRAMEPOOL_H

#include <stddef.h>
#include <stdint.h>

#include "base/error.h"

/* stored: the frame as it goes to disk (n bytes); raw: its size before compression. */
typedef int (*tupe_fpool_sink)(void *ctx, const void *stored, size_t n, uint64_t check,
                               size_t raw, uint64_t tag, tupe_err *e);

typedef struct tupe_fpool tupe_fpool;

int tupe_fpool_new(tupe_fpool **p, int threads, int level, size_t frame_cap,
                   tupe_fpool_sink sink, void *ctx, tupe_err *e);
/* A buffer of frame_cap bytes for the next frame; waits (delivering finished frames) while
 * every buffer is in use. */
int tupe_fpool_buffer(tupe_fpool *p, unsigned char **buf, tupe_err *e);
/* Submit the buffer last returned, holding len bytes; tag is passed to the sink. */
int tupe_fpool_submit(tupe_fpool *p, size_t len, uint64_t tag, tupe_err *e);
/* Wait until every submitted frame has reached the sink. */
int tupe_fpool_flush(tupe_fpool *p, tupe_err *e);
void tupe_fpool_free(tupe_fpool *p);
/* Memory a pool of these parameters uses (buffers and compression contexts), for budgets. */
size_t tupe_fpool_memory(int threads, int level, size_t frame_cap);

#endif
