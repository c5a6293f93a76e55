#include "unit.h"

#include <png.h>
#include <stdarg.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/fileio.h"

int unit_fails;
const char *unit_prog = "unit";
static char skip_reason[512];
static char *tmpdir;
static int tmp_serial;

void unit_fail(const char *file, int line, const char *fmt, ...)
{
    unit_fails++;
    if (unit_fails > 20)
        return; /* enough said */
    const char *base = strrchr(file, '/');
    printf("#   %s:%d: ", base ? base + 1 : file, line);
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    fflush(stdout);
}

static void cleanup(void)
{
    if (tmpdir && !getenv("UNIT_KEEP_TMP"))
        tupe_remove_tree(tmpdir);
}

const char *unit_tmpdir(void)
{
    static char cur[4096];
    if (!tmpdir) {
        const char *base = getenv("TMPDIR");
        char tmpl[4096];
        snprintf(tmpl, sizeof tmpl, "%s/tupe-unit-XXXXXX", base && *base ? base : "/tmp");
        char *d = mkdtemp(tmpl);
        if (!d) {
            perror("mkdtemp");
            exit(99);
        }
        tmpdir = strdup(d);
        atexit(cleanup);
    }
    snprintf(cur, sizeof cur, "%s/t%d", tmpdir, tmp_serial);
    mkdir(cur, 0777);
    return cur;
}

const char *unit_path(const char *name)
{
    static char buf[8][4096];
    static int k;
    char *p = buf[k++ & 7];
    snprintf(p, 4096, "%s/%s", unit_tmpdir(), name);
    return p;
}

const char *unit_src(void)
{
    const char *s = getenv("TUPE_SRC");
    return s && *s ? s : ".";
}

const char *unit_data(void)
{
    const char *s = getenv("TUPE_DATA");
    return s && *s ? s : "../shared/data";
}

void unit_skip(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(skip_reason, sizeof skip_reason, fmt, ap);
    va_end(ap);
    if (!skip_reason[0])
        snprintf(skip_reason, sizeof skip_reason, "skipped");
}

const char *unit_need_data(const char *rel)
{
    static char buf[4][4096];
    static int k;
    char *p = buf[k++ & 3];
    snprintf(p, 4096, "%s/%s", unit_data(), rel);
    if (access(p, F_OK) == 0)
        return p;
    unit_skip("no %s (the full test data: README.md, Tests)", p);
    return NULL;
}

char *unit_slurp(const char *path, size_t *len)
{
    char *buf;
    size_t n;
    tupe_err e;
    if (tupe_read_file(path, &buf, &n, (size_t)1 << 34, &e)) {
        printf("#   cannot read %s: %s\n", path, e.msg);
        fflush(stdout);
        exit(99);
    }
    if (len)
        *len = n;
    return buf;
}

void unit_write(const char *path, const void *buf, size_t len)
{
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(buf, 1, len, f) != len || fclose(f) != 0) {
        printf("#   cannot write %s\n", path);
        fflush(stdout);
        exit(99);
    }
}

int unit_main(const unit_test *tests, int argc, char **argv)
{
    const char *slash = strrchr(argv[0], '/');
    unit_prog = slash ? slash + 1 : argv[0];
    int failed = 0;
    for (const unit_test *t = tests; t->name; t++) {
        if (argc > 1 && !strstr(t->name, argv[1]))
            continue;
        unit_fails = 0;
        skip_reason[0] = 0;
        tmp_serial++;
        t->fn();
        if (skip_reason[0] && !unit_fails)
            printf("ok - %s: %s # SKIP %s\n", unit_prog, t->name, skip_reason);
        else
            printf("%s - %s: %s\n", unit_fails ? "not ok" : "ok", unit_prog, t->name);
        fflush(stdout);
        failed += unit_fails > 0;
    }
    return failed ? 1 : 0;
}

unsigned char *unit_png_rgb(const char *path, int *w, int *h)
{
    png_image img;
    memset(&img, 0, sizeof img);
    img.version = PNG_IMAGE_VERSION;
    if (!png_image_begin_read_from_file(&img, path))
        return NULL;
    img.format = PNG_FORMAT_RGB;
    unsigned char *buf = malloc(PNG_IMAGE_SIZE(img));
    if (!buf || !png_image_finish_read(&img, NULL, buf, 0, NULL)) {
        free(buf);
        png_image_free(&img);
        return NULL;
    }
    *w = (int)img.width;
    *h = (int)img.height;
    return buf;
}
