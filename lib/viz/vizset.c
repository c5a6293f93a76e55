#include "viz/vizset.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/fileio.h"
#include "base/outdir.h"
#include "formats/npy.h"
#include "viz/colormap.h"
#include "viz/heatmap.h"

struct tupe_vizset {
    tupe_vizopts o;
    int file_fmt;               /* single-file mode: TUPE_VIZ_PNG or TUPE_VIZ_SVG; else 0 */
    json_t *meta, *files, *figures;
    char **paths;
    size_t npaths;
};

static int ends_with(const char *s, const char *suf)
{
    size_t n = strlen(s), k = strlen(suf);
    return n >= k && strcasecmp(s + n - k, suf) == 0;
}

int tupe_vizset_new(tupe_vizset **out, const tupe_vizopts *o, int nfigures, tupe_err *e)
{
    *out = NULL;
    int file_fmt = 0;
    if (o->out && (strcmp(o->out, "-") == 0 || ends_with(o->out, ".png") || ends_with(o->out, ".svg"))) {
        int ext = strcmp(o->out, "-") == 0 ? 0 : ends_with(o->out, ".svg") ? TUPE_VIZ_SVG : TUPE_VIZ_PNG;
        if (o->format == TUPE_VIZ_BOTH)
            return tupe_fail(e, TUPE_EUSAGE, "--format both writes two files: give -o a directory");
        if (ext && o->format && o->format != ext)
            return tupe_fail(e, TUPE_EUSAGE, "-o %s does not end in .%s", o->out,
                             o->format == TUPE_VIZ_SVG ? "svg" : "png");
        if (nfigures != 1)
            return tupe_fail(e, TUPE_EUSAGE, "-o %s holds one figure and this draws %d: give -o "
                             "a directory (or choose one view)", o->out, nfigures);
        file_fmt = ext ? ext : o->format ? o->format : TUPE_VIZ_PNG;
    }
    /* Figures are added to a directory: a new one, one of figures, or one of the user's,
     * never one of another kind (a checkpoint, a run). */
    if (o->out && !file_fmt) {
        int rc = tupe_outdir_into(o->out, TUPE_FIGURES_KIND, e);
        if (rc)
            return rc;
    }
    if (o->npy_dir) {
        int rc = tupe_outdir_into(o->npy_dir, TUPE_FIGURES_KIND, e);
        if (rc)
            return rc;
    }
    tupe_vizset *s = calloc(1, sizeof *s);
    if (!s)
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    s->o = *o;
    if (!s->o.format)
        s->o.format = TUPE_VIZ_PNG;
    s->file_fmt = file_fmt;
    s->meta = json_object();
    s->files = json_array();
    s->figures = json_array();
    if (!s->meta || !s->files || !s->figures) {
        tupe_vizset_free(s);
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    }
    *out = s;
    return 0;
}

void tupe_vizset_free(tupe_vizset *s)
{
    if (!s)
        return;
    json_decref(s->files);
    json_decref(s->figures);
    json_decref(s->meta);
    for (size_t i = 0; i < s->npaths; i++)
        free(s->paths[i]);
    free(s->paths);
    free(s);
}

size_t tupe_vizset_count(const tupe_vizset *s) { return s->npaths; }
const char *tupe_vizset_path(const tupe_vizset *s, size_t i) { return i < s->npaths ? s->paths[i] : NULL; }

static int remember(tupe_vizset *s, const char *path, tupe_err *e)
{
    char **p = realloc(s->paths, (s->npaths + 1) * sizeof *p);
    char *c = strdup(path);
    if (!p || !c) {
        free(c);
        if (p)
            s->paths = p;
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    }
    s->paths = p;
    s->paths[s->npaths++] = c;
    return 0;
}

void tupe_view_limits(const tupe_view *v, int per_panel, int p, double *lo, double *hi)
{
    size_t per = (size_t)v->rows * v->cols;
    int p0 = per_panel ? p : 0, p1 = per_panel ? p + 1 : v->npanels;
    double mx = 0, mn = 0;
    for (size_t i = (size_t)p0 * per; i < (size_t)p1 * per; i++) {
        double x = v->data[i];
        if (isnan(x))
            continue;
        if (v->cmap == TUPE_CMAP_COOLWARM)
            x = fabs(x);
        mx = x > mx ? x : mx;
        mn = x < mn ? x : mn;
    }
    if (v->cmap == TUPE_CMAP_COOLWARM) {
        *lo = mx > 0 ? -mx : -1;
        *hi = mx > 0 ? mx : 1;
    } else {
        *lo = mn;
        *hi = mx > mn ? mx : mn + 1;
    }
}

static json_t *limits_json(const tupe_view *v, int per_panel)
{
    double lo, hi;
    if (!per_panel) {
        tupe_view_limits(v, 0, 0, &lo, &hi);
        return json_pack("[f, f]", lo, hi);
    }
    json_t *a = json_array();
    for (int p = 0; p < v->npanels; p++) {
        tupe_view_limits(v, 1, p, &lo, &hi);
        json_array_append_new(a, json_pack("[f, f]", lo, hi));
    }
    return a;
}

static json_t *shape_json(int ndim, const uint64_t *shape)
{
    json_t *a = json_array();
    for (int i = 0; i < ndim; i++)
        json_array_append_new(a, json_integer((json_int_t)shape[i]));
    return a;
}

static int write_npy(tupe_vizset *s, const char *name, const char *descr, int ndim,
                     const uint64_t *shape, const void *data, const char *what, tupe_err *e)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s.npy", s->o.npy_dir, name);
    int rc = tupe_npy_write(path, descr, ndim, shape, data, e);
    if (!rc)
        rc = remember(s, path, e);
    if (rc)
        return rc;
    json_t *f = json_object();
    json_object_set_new(f, "file", json_sprintf("%s.npy", name));
    json_object_set_new(f, "dtype", json_string(descr));
    json_object_set_new(f, "shape", shape_json(ndim, shape));
    if (what)
        json_object_set_new(f, "what", json_string(what));
    json_array_append_new(s->files, f);
    return 0;
}

int tupe_vizset_draw(tupe_vizset *s, const tupe_view *v, tupe_err *e)
{
    /* NaN marks a cell without data (drawn grey); an infinity has no colour to be drawn in. */
    size_t total = (size_t)v->npanels * v->rows * v->cols;
    for (size_t i = 0; i < total; i++)
        if (isinf(v->data[i]))
            return tupe_fail(e, TUPE_EDATA, "%s: panel %zu holds an infinite value: nothing "
                             "non-finite can be drawn", v->name, i / ((size_t)v->rows * v->cols));
    tupe_panel *pn = calloc((size_t)v->npanels, sizeof *pn);
    json_t *fig = json_object(), *files = json_array(), *titles = json_array();
    if (!pn || !fig || !files || !titles) {
        free(pn);
        json_decref(fig), json_decref(files), json_decref(titles);
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    }
    size_t per = (size_t)v->rows * v->cols;
    for (int p = 0; p < v->npanels; p++) {
        pn[p].v = v->data + (size_t)p * per;
        pn[p].rows = v->rows;
        pn[p].cols = v->cols;
        snprintf(pn[p].title, sizeof pn[p].title, "%s", v->titles[p]);
        tupe_view_limits(v, s->o.per_panel, p, &pn[p].lo, &pn[p].hi);
        json_array_append_new(titles, json_string(v->titles[p]));
    }
    tupe_figure f = {v->title, v->cmap, pn, v->npanels, v->grid_cols, s->o.cell, v->labels,
                     v->labels, 0, s->o.per_panel, v->value_label};
    int rc = 0;
    if (s->o.out && s->file_fmt) {
        rc = tupe_figure_write(&f, s->o.out, s->file_fmt == TUPE_VIZ_SVG ? TUPE_FIG_SVG : TUPE_FIG_PNG, e);
        if (!rc && strcmp(s->o.out, "-") != 0)
            rc = remember(s, s->o.out, e);
        json_array_append_new(files, json_string(s->o.out));
    } else if (s->o.out) {
        for (int k = 0; !rc && k < 2; k++) {
            if (!(s->o.format & (k ? TUPE_VIZ_SVG : TUPE_VIZ_PNG)))
                continue;
            char path[4200];
            snprintf(path, sizeof path, "%s/%s.%s", s->o.out, v->name, k ? "svg" : "png");
            rc = tupe_figure_write(&f, path, k ? TUPE_FIG_SVG : TUPE_FIG_PNG, e);
            if (!rc)
                rc = remember(s, path, e);
            json_array_append_new(files, json_string(path));
        }
    }
    if (!rc && s->o.term)
        tupe_figure_term(&f, s->o.term, s->o.term_cells);
    free(pn);
    json_object_set_new(fig, "name", json_string(v->name));
    json_object_set_new(fig, "title", json_string(v->title ? v->title : ""));
    json_object_set_new(fig, "files", files);
    json_object_set_new(fig, "panels", titles);
    json_object_set_new(fig, "colormap", json_string(v->cmap == TUPE_CMAP_COOLWARM ? "coolwarm" : "viridis"));
    json_object_set_new(fig, "limits", limits_json(v, s->o.per_panel));
    if (v->npy)
        json_object_set_new(fig, "npy", json_sprintf("%s.npy", v->npy));
    json_array_append_new(s->figures, fig);
    if (!rc && s->o.npy_dir && v->npy) {
        uint64_t shape[3] = {(uint64_t)v->npanels, (uint64_t)v->rows, (uint64_t)v->cols};
        rc = write_npy(s, v->npy, "<f4", 3, shape, v->data, v->what, e);
    }
    return rc;
}

int tupe_vizset_npy(tupe_vizset *s, const char *name, const char *descr, int ndim,
                    const uint64_t *shape, const void *data, const char *what, tupe_err *e)
{
    if (!s->o.npy_dir)
        return 0;
    return write_npy(s, name, descr, ndim, shape, data, what, e);
}

int tupe_vizset_text(tupe_vizset *s, const char *name, const char *text, const char *what,
                     tupe_err *e)
{
    if (!s->o.npy_dir)
        return 0;
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", s->o.npy_dir, name);
    int rc = tupe_write_file(path, text, strlen(text), e);
    if (!rc)
        rc = remember(s, path, e);
    if (rc)
        return rc;
    json_t *f = json_pack("{s:s, s:s}", "file", name, "what", what);
    json_array_append_new(s->files, f);
    return 0;
}

int tupe_vizset_note(tupe_vizset *s, const char *key, const char *value)
{
    return json_object_set_new(s->meta, key, json_string(value));
}

int tupe_vizset_note_bool(tupe_vizset *s, const char *key, int value)
{
    return json_object_set_new(s->meta, key, json_boolean(value));
}

int tupe_vizset_note_num(tupe_vizset *s, const char *key, double value)
{
    return json_object_set_new(s->meta, key, value == floor(value) && fabs(value) < 1e15
                                                  ? json_integer((json_int_t)value)
                                                  : json_real(value));
}

int tupe_vizset_note_ints(tupe_vizset *s, const char *key, const int *v, int n)
{
    json_t *a = json_array();
    for (int i = 0; i < n; i++)
        json_array_append_new(a, json_integer(v[i]));
    return json_object_set_new(s->meta, key, a);
}

int tupe_vizset_finish(tupe_vizset *s, tupe_err *e)
{
    if (!s->o.npy_dir)
        return 0;
    /* The notes first, then what was written. */
    if (json_object_set(s->meta, "figures", s->figures) || json_object_set(s->meta, "files", s->files))
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    char *txt = json_dumps(s->meta, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    if (!txt)
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    char path[4200];
    snprintf(path, sizeof path, "%s/meta.json", s->o.npy_dir);
    tupe_out *o;
    int rc = tupe_out_open(&o, path, e);
    if (!rc && ((rc = tupe_out_write(o, txt, strlen(txt), e)) || (rc = tupe_out_write(o, "\n", 1, e))))
        tupe_out_abort(o);
    else if (!rc)
        rc = tupe_out_commit(o, e);
    free(txt);
    if (!rc)
        rc = remember(s, path, e);
    return rc;
}
