#include "base/jsonnum.h"

#include <stdlib.h>
#include <string.h>

char *tupe_jsonnum_finite(const char *line)
{
    size_t n = strlen(line);
    char *s = malloc(2 * n + 1), *d = s; /* "nan" -> "null" grows by one byte */
    if (!s)
        return NULL;
    int in_str = 0;
    for (const char *p = line; *p;) {
        if (in_str) {
            if (*p == '\\' && p[1])
                *d++ = *p++;
            else if (*p == '"')
                in_str = 0;
            *d++ = *p++;
            continue;
        }
        const char *q = p + (*p == '-');
        size_t k = strncmp(q, "nan", 3) == 0 || strncmp(q, "inf", 3) == 0 ? (size_t)(q - p) + 3 : 0;
        if (k) {
            memcpy(d, "null", 4);
            d += 4;
            p += k;
            continue;
        }
        in_str = *p == '"';
        *d++ = *p++;
    }
    *d = 0;
    return s;
}
