/* Little-endian loads and stores of the on-disk formats, independent of the host's order. */
#ifndef TUPE_BYTEORDER_H
#define TUPE_BYTEORDER_H

#include <stdint.h>

static inline void tupe_put32le(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)v, p[1] = (unsigned char)(v >> 8);
    p[2] = (unsigned char)(v >> 16), p[3] = (unsigned char)(v >> 24);
}

static inline void tupe_put64le(unsigned char *p, uint64_t v)
{
    tupe_put32le(p, (uint32_t)v);
    tupe_put32le(p + 4, (uint32_t)(v >> 32));
}

static inline uint32_t tupe_get32le(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline uint64_t tupe_get64le(const unsigned char *p)
{
    return tupe_get32le(p) | (uint64_t)tupe_get32le(p + 4) << 32;
}

#endif
