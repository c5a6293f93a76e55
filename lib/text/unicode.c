#include "text/unicode.h"

#include "text/unicode_tables.inc"

enum { SBASE = 0xAC00, LBASE = 0x1100, VBASE = 0x1161, TBASE = 0x11A7, NV = 21, NT = 28 };

const uint8_t *tupe_uni_mapped(uint32_t cp, const tupe_uni_entry *e, int which,
                               uint8_t tmp[TUPE_UNI_MAX_OUT], size_t *len)
{
    if ((e->flags & TUPE_UNI_HANGUL) && which != TUPE_UNI_MAP_LOWER) {
        uint32_t s = cp - SBASE;
        size_t n = (size_t)tupe_utf8_encode(LBASE + s / (NV * NT), tmp);
        n += (size_t)tupe_utf8_encode(VBASE + s % (NV * NT) / NT, tmp + n);
        if (s % NT)
            n += (size_t)tupe_utf8_encode(TBASE + s % NT, tmp + n);
        *len = n;
        return tmp;
    }
    uint16_t off = e->map[which];
    if (!off)
        return NULL;
    *len = tupe_uni_pool[off];
    return tupe_uni_pool + off + 1;
}

int tupe_uni_ccc(uint32_t cp)
{
    size_t lo = 0, hi = tupe_uni_nccc;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (tupe_uni_ccc_table[mid][0] < cp)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < tupe_uni_nccc && tupe_uni_ccc_table[lo][0] == cp ? (int)tupe_uni_ccc_table[lo][1] : 0;
}

size_t tupe_utf8_count(const char *s, size_t n)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        k += ((unsigned char)s[i] & 0xC0) != 0x80;
    return k;
}

size_t tupe_utf8_first_bad(const char *s, size_t n)
{
    const uint8_t *p = (const uint8_t *)s, *end = p + n;
    while (p < end) {
        uint32_t cp;
        int k = tupe_utf8_decode(p, end, &cp);
        if (k < 0)
            break;
        p += k;
    }
    return (size_t)(p - (const uint8_t *)s);
}
