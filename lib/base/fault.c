#include "base/fault.h"

#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* One process-wide hit counter: it exists only for tests, and never changes behaviour
 * unless TUPE_FAULT is set. */
static atomic_long hits;

int tupe_fault_hit(const char *point)
{
    const char *spec = getenv("TUPE_FAULT");
    if (!spec || !*spec)
        return 0;
    size_t n = strlen(point);
    if (strncmp(spec, point, n) != 0 || (spec[n] != 0 && spec[n] != ':'))
        return 0;
    long want = spec[n] == ':' ? atol(spec + n + 1) : 1;
    return atomic_fetch_add(&hits, 1) + 1 == want;
}

void tupe_fault_point(const char *point)
{
    const char *spec = getenv("TUPE_FAULT");
    if (!spec || !*spec)
        return;
    size_t n = strlen(point);
    if (strncmp(spec, point, n) != 0 || (spec[n] != 0 && spec[n] != ':'))
        return;
    long want = spec[n] == ':' ? atol(spec + n + 1) : 1;
    if (atomic_fetch_add(&hits, 1) + 1 == want) {
        kill(getpid(), SIGKILL);
        pause();
    }
}
