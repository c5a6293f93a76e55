/* What cuemu's test programs (selftest.cu, nccltest.cu) share: reading a child's output and
 * printing a case's line, "ok - PREFIX/NAME WHY" or "not ok - ..." with the first lines of
 * the child's stdout and stderr. */
#ifndef CUEMU_VERDICT_H
#define CUEMU_VERDICT_H

#include <stdio.h>

#include <string>

static inline std::string slurp(const std::string &path)
{
    std::string s;
    FILE *f = fopen(path.c_str(), "r");
    if (!f)
        return s;
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0)
        s.append(buf, n);
    fclose(f);
    return s;
}

static int npass, nfail;

static inline void verdict_of(const char *prefix, bool good, const std::string &name,
                              const std::string &why, const std::string &out,
                              const std::string &err)
{
    printf("%s - %s/%s%s\n", good ? "ok" : "not ok", prefix, name.c_str(), why.c_str());
    (good ? npass : nfail)++;
    if (good)
        return;
    for (const std::string *s : {&out, &err}) {
        size_t p = 0;
        for (int k = 0; k < 25 && p < s->size(); k++) {
            size_t q = s->find('\n', p);
            printf("#   %s\n", s->substr(p, q == std::string::npos ? q : q - p).c_str());
            p = q == std::string::npos ? s->size() : q + 1;
        }
    }
}

#endif
