/* Growing arrays: make room for more elements by doubling the capacity, the one pattern
 * every growable buffer needs; and the two arrays most modules want (32-bit values, bytes).
 *
 *   if (TUPE_RESERVE(v->ids, v->cap, v->n + extra)) return out_of_memory;
 *
 * p is any pointer variable (NULL to start), cap its capacity in elements (a size_t). On
 * failure both are left as they were. */
#ifndef TUPE_GROW_H
#define TUPE_GROW_H

#include <stddef.h>

/* 0, or -1 when out of memory. pp points to the pointer variable. */
int tupe_grow(void *pp, size_t *cap, size_t need, size_t elem);

#define TUPE_RESERVE(p, cap, need) \
    ((size_t)(need) <= (cap) ? 0 : tupe_grow(&(p), &(cap), (size_t)(need), sizeof *(p)))

#include <stdint.h>

/* A growing array of 32-bit values (code points, token ids). */
typedef struct tupe_u32vec {
    uint32_t *v;
    size_t n, cap;
} tupe_u32vec;

static inline int tupe_u32vec_push(tupe_u32vec *a, uint32_t x)
{
    if (TUPE_RESERVE(a->v, a->cap, a->n + 1))
        return -1;
    a->v[a->n++] = x;
    return 0;
}

/* A growing byte buffer (encoded output, file text). */
typedef struct tupe_buf {
    uint8_t *p;
    size_t len, cap;
} tupe_buf;

/* Room for `extra` more bytes after len: 0, or -1 when out of memory. */
int tupe_buf_reserve(tupe_buf *b, size_t extra);
void tupe_buf_free(tupe_buf *b);

#endif
