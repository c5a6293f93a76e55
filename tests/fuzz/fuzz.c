#include "fuzz.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/fileio.h"

void fuzz_fail(const char *file, int line, const char *what)
{
    fprintf(stderr, "%s:%d: expectation failed: %s\n", file, line, what);
    abort();
}

void fuzz_check_err(const tupe_err *e, const char *file, int line)
{
    if (e->msg[0] && (e->code == TUPE_EDATA ||
                      (e->code == TUPE_EFAIL && strstr(e->msg, "out of memory"))))
        return;
    fprintf(stderr, "%s:%d: unexpected error %d: %s\n", file, line, e->code, e->msg);
    abort();
}

static int write_all(int fd, const void *d, size_t n)
{
    const char *p = d;
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

int fuzz_memfile(const void *d, size_t n, char *path, size_t cap)
{
    int fd = memfd_create("tupe-fuzz", MFD_CLOEXEC);
    if (fd < 0 || write_all(fd, d, n) || lseek(fd, 0, SEEK_SET) != 0) {
        perror("fuzz_memfile");
        abort();
    }
    snprintf(path, cap, "/proc/self/fd/%d", fd);
    return fd;
}

static char dir[256];

static void remove_dir(void) { tupe_remove_tree(dir); }

const char *fuzz_dir(void)
{
    if (dir[0])
        return dir;
    const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/tupe-fuzz.XXXXXX", base ? base : "/tmp");
    if (!mkdtemp(dir)) {
        perror("fuzz_dir");
        abort();
    }
    atexit(remove_dir);
    return dir;
}

void fuzz_write(const char *d, const char *name, const void *data, size_t n, char *path,
                size_t cap)
{
    snprintf(path, cap, "%s/%s", d, name);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0 || write_all(fd, data, n) || close(fd) != 0) {
        perror(path);
        abort();
    }
}

unsigned fuzz_u8(fuzz_in *in)
{
    if (!in->n)
        return 0;
    in->n--;
    return *in->p++;
}

uint32_t fuzz_u32(fuzz_in *in)
{
    uint32_t v = 0;
    for (int i = 0; i < 4; i++)
        v |= (uint32_t)fuzz_u8(in) << (8 * i);
    return v;
}
