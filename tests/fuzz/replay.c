/* The replay driver of `make check`: runs every file named on the command line (directories:
 * every file in them, in name order) through the target's LLVMFuzzerTestOneInput, as libFuzzer
 * would replay them, without libFuzzer. Prints "N inputs" and exits 0, or dies as the target
 * does (an abort, a sanitizer report). */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/fileio.h"
#include "fuzz.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

static long count;

static void one(const char *path)
{
    char *buf;
    size_t len;
    tupe_err e;
    if (tupe_read_file(path, &buf, &len, (size_t)1 << 30, &e)) {
        fprintf(stderr, "replay: %s\n", e.msg);
        exit(2);
    }
    /* An exact-size copy, so that a read past the end is an overread under ASan. */
    uint8_t *d = malloc(len ? len : 1);
    memcpy(d, buf, len);
    free(buf);
    LLVMFuzzerTestOneInput(d, len);
    free(d);
    count++;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int main(int argc, char **argv)
{
    if (LLVMFuzzerInitialize)
        LLVMFuzzerInitialize(&argc, &argv);
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) != 0) {
            perror(argv[i]);
            return 2;
        }
        if (!S_ISDIR(st.st_mode)) {
            one(argv[i]);
            continue;
        }
        DIR *d = opendir(argv[i]);
        if (!d) {
            perror(argv[i]);
            return 2;
        }
        char **names = NULL;
        size_t n = 0;
        struct dirent *de;
        while ((de = readdir(d))) {
            if (de->d_name[0] == '.')
                continue;
            names = realloc(names, (n + 1) * sizeof *names);
            size_t k = strlen(argv[i]) + strlen(de->d_name) + 2;
            names[n] = malloc(k);
            snprintf(names[n++], k, "%s/%s", argv[i], de->d_name);
        }
        closedir(d);
        qsort(names, n, sizeof *names, by_name);
        for (size_t j = 0; j < n; j++) {
            one(names[j]);
            free(names[j]);
        }
        free(names);
    }
    printf("%ld inputs\n", count);
    return 0;
}
