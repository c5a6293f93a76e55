#include "base/grow.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int tupe_grow(void *pp, size_t *cap, size_t need, size_t elem)
{
    size_t n = *cap ? *cap : 16;
    while (n < need) {
        if (n > SIZE_MAX / 2 / elem)
            return -1;
        n *= 2;
    }
    /* the pointer variable is read and written as bytes, whatever its pointed-to type */
    void *old;
    memcpy(&old, pp, sizeof old);
    void *p = realloc(old, n * elem);
    if (!p)
        return -1;
    memcpy(pp, &p, sizeof p);
    *cap = n;
    return 0;
}

int tupe_buf_reserve(tupe_buf *b, size_t extra) { return TUPE_RESERVE(b->p, b->cap, b->len + extra); }

void tupe_buf_free(tupe_buf *b)
{
    free(b->p);
    memset(b, 0, sizeof *b);
}
