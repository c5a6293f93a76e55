#include "tfevents.h"

#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

#include "crc32c.h"
#include "fileio.h"
#include "tfevent.pb-c.h"

struct tupe_tfevents {
    FILE *f;
    char path[PATH_MAX];
};

double tupe_tfevents_now(void)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (double)tv.tv_sec + (double)tv.tv_usec * 1e-6;
}

const char *tupe_tfevents_path(const tupe_tfevents *w) { return w->path; }

static void le64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void le32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/* One TFRecord holding the packed Event. */
static int write_event(tupe_tfevents *w, const Tensorboard__Event *ev, tupe_err *e)
{
    size_t n = tensorboard__event__get_packed_size(ev);
    uint8_t head[12], tail[4], *buf = malloc(n ? n : 1);
    if (!buf)
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    tensorboard__event__pack(ev, buf);
    le64(head, n);
    le32(head + 8, tupe_crc32c_masked(head, 8));
    le32(tail, tupe_crc32c_masked(buf, n));
    int ok = fwrite(head, 1, sizeof head, w->f) == sizeof head && fwrite(buf, 1, n, w->f) == n &&
             fwrite(tail, 1, sizeof tail, w->f) == sizeof tail && fflush(w->f) == 0;
    free(buf);
    return ok ? 0 : tupe_fail_errno(e, TUPE_EIO, errno, "%s", w->path);
}

int tupe_tfevents_open(tupe_tfevents **out, const char *path, double wall, tupe_err *e)
{
    tupe_tfevents *w = calloc(1, sizeof *w);
    if (!w)
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    snprintf(w->path, sizeof w->path, "%s", path);
    if (!(w->f = fopen(path, "wb"))) {
        int rc = tupe_fail_errno(e, TUPE_ECANTCREAT, errno, "%s", path);
        free(w);
        return rc;
    }
    Tensorboard__Event ev = TENSORBOARD__EVENT__INIT;
    ev.wall_time = wall;
    ev.what_case = TENSORBOARD__EVENT__WHAT_FILE_VERSION;
    ev.file_version = "brain.Event:2";
    int rc = write_event(w, &ev, e);
    if (rc) {
        fclose(w->f);
        free(w);
        return rc;
    }
    *out = w;
    return 0;
}

int tupe_tfevents_open_dir(tupe_tfevents **w, const char *dir, tupe_err *e)
{
    int rc = tupe_mkdir_p(dir, e);
    if (rc)
        return rc;
    char host[256] = "localhost", path[PATH_MAX];
    gethostname(host, sizeof host - 1);
    double now = tupe_tfevents_now();
    /* TensorBoard finds files by "tfevents" in the name; the pid keeps two runs apart. */
    if ((size_t)snprintf(path, sizeof path, "%s/events.out.tfevents.%lld.%s.%ld", dir,
                         (long long)now, host, (long)getpid()) >= sizeof path)
        return tupe_fail(e, TUPE_ECANTCREAT, "%s: path too long", dir);
    return tupe_tfevents_open(w, path, now, e);
}

int tupe_tfevents_scalar(tupe_tfevents *w, const char *tag, int64_t step, double value,
                         double wall, tupe_err *e)
{
    Tensorboard__Summary__Value v = TENSORBOARD__SUMMARY__VALUE__INIT;
    v.tag = (char *)tag;
    v.value_case = TENSORBOARD__SUMMARY__VALUE__VALUE_SIMPLE_VALUE;
    v.simple_value = (float)value;
    Tensorboard__Summary__Value *vals[1] = {&v};
    Tensorboard__Summary s = TENSORBOARD__SUMMARY__INIT;
    s.n_value = 1;
    s.value = vals;
    Tensorboard__Event ev = TENSORBOARD__EVENT__INIT;
    ev.wall_time = wall;
    ev.step = step;
    ev.what_case = TENSORBOARD__EVENT__WHAT_SUMMARY;
    ev.summary = &s;
    return write_event(w, &ev, e);
}

static int scalars(tupe_tfevents *w, const char *prefix, json_t *o, int64_t step, double wall,
                   tupe_err *e)
{
    const char *k;
    json_t *v;
    int rc = 0;
    json_object_foreach(o, k, v) {
        char tag[512];
        snprintf(tag, sizeof tag, "%s%s%s", prefix, *prefix ? "/" : "", k);
        if (!*prefix && strcmp(k, "step") == 0)
            continue;
        if (json_is_number(v))
            rc = tupe_tfevents_scalar(w, tag, step, json_number_value(v), wall, e);
        else if (json_is_object(v))
            rc = scalars(w, tag, v, step, wall, e);
        if (rc)
            return rc;
    }
    return 0;
}

/* printf's nan, -nan, inf and -inf (how a C program logs a diverged loss) are not JSON: outside
 * strings they become null, and so are left out. */
static char *finite_json(const char *line)
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

int tupe_tfevents_json(tupe_tfevents *w, const char *line, double wall, tupe_err *e)
{
    json_error_t je;
    char *clean = finite_json(line);
    if (!clean)
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    json_t *o = json_loads(clean, 0, &je);
    free(clean);
    json_t *step = json_object_get(o, "step");
    int rc = json_is_integer(step)
                 ? scalars(w, "", o, json_integer_value(step), wall, e)
                 : tupe_fail(e, TUPE_EFAIL, "metrics record without an integer \"step\": %.80s", line);
    json_decref(o);
    return rc;
}

int tupe_tfevents_close(tupe_tfevents *w, tupe_err *e)
{
    if (!w)
        return 0;
    int rc = fclose(w->f) == 0 ? 0 : tupe_fail_errno(e, TUPE_EIO, errno, "%s", w->path);
    free(w);
    return rc;
}
