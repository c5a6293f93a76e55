/* The figures of tupe-attnviz, read back independently: the PNG decodes (libpng), has the
 * size of its grid (tupe_figure_size), is not constant, and its pixels follow the colormap of
 * the matrix values at sampled cells, with figure-wide and per-panel limits, for the signed
 * (coolwarm, symmetric limits) and probability (viridis, [0, max]) maps of a trained TUPE-R
 * checkpoint; the single-file mode; the .npy files and meta.json. */
#include "formats/npy.h"
#include "viz/colormap.h"
#include "viz/heatmap.h"
#include "viz/inspect.h"
#include "viz/poscorr.h"
#include "unit.h"
#include "viz/vizset.h"

enum { N = 40 };
static const char *const titles[4] = {"H0", "H1", "H2", "H3"};

/* The positional terms of the committed TUPE-R checkpoint. */
static void load(tupe_poscorr *pc, float *soft)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/tests/fixtures/attnviz/tupe-r", unit_src());
    tupe_inspect in;
    tupe_err e;
    if (tupe_inspect_open(&in, path, 1, 1, &e) || tupe_poscorr_compute(&in, N, pc, &e)) {
        printf("# %s\n", e.msg);
        exit(1);
    }
    tupe_inspect_close(&in);
    tupe_softmax_rows(pc->bias, soft, 4 * N, N);
}

/* Check the PNG of view v drawn with these options against its values. */
static void check_png(const char *path, const tupe_view *v, int per_panel, int cell)
{
    int w, h;
    unsigned char *px = unit_png_rgb(path, &w, &h);
    CHECK_MSG(px != NULL, "%s does not decode", path);
    if (!px)
        return;
    tupe_panel pn[4];
    for (int p = 0; p < v->npanels; p++) {
        pn[p].v = v->data + (size_t)p * N * N;
        pn[p].rows = pn[p].cols = N;
        snprintf(pn[p].title, sizeof pn[p].title, "%s", titles[p]);
        tupe_view_limits(v, per_panel, p, &pn[p].lo, &pn[p].hi);
    }
    tupe_figure f = {v->title, v->cmap, pn, v->npanels, v->grid_cols, cell, NULL, NULL, 0, per_panel, v->value_label};
    int fw, fh;
    tupe_figure_size(&f, &fw, &fh);
    CHECK_INT(w, fw);
    CHECK_INT(h, fh);
    int bad = 0, checked = 0, x, y, c;
    for (int p = 0; p < v->npanels; p++)
        for (int r = 0; r < N; r += 3)
            for (int col = 0; col < N; col += 7) {
                tupe_figure_cell_origin(&f, p, r, col, &x, &y, &c);
                uint8_t want[3];
                tupe_cmap_rgb8(v->cmap, v->data[((size_t)p * N + r) * N + col], pn[p].lo, pn[p].hi, want);
                for (int dy = 0; dy < c; dy += c > 1 ? c - 1 : 1)
                    for (int dx = 0; dx < c; dx += c > 1 ? c - 1 : 1) {
                        const unsigned char *q = px + 3 * ((size_t)(y + dy) * (size_t)w + (size_t)(x + dx));
                        if ((q[0] != want[0] || q[1] != want[1] || q[2] != want[2]) && bad++ < 3)
                            CHECK_MSG(0, "%s panel %d cell (%d,%d): %d,%d,%d, want %d,%d,%d", path, p, r, col,
                                      q[0], q[1], q[2], want[0], want[1], want[2]);
                        checked++;
                    }
            }
    CHECK(checked > 500);
    CHECK_INT(bad, 0);
    int distinct = 0;
    for (size_t i = 3; i < (size_t)w * (size_t)h * 3; i += 3 * 89)
        distinct += memcmp(px + i, px + i - 3, 3) != 0;
    CHECK_MSG(distinct > 50, "%s looks constant (%d changes)", path, distinct);
    free(px);
}

static void figures_follow_the_colormap(void)
{
    tupe_poscorr pc;
    float *soft = malloc(4 * N * N * sizeof *soft);
    load(&pc, soft);
    tupe_view vb = {"pos-bias", "pos_bias", "bias", "positional term", TUPE_CMAP_COOLWARM, 4, N, N,
                    pc.bias, titles, NULL, "logit", 0};
    tupe_view vs = {"pos-softmax", "pos_softmax", "softmax", "softmax", TUPE_CMAP_VIRIDIS, 4, N, N,
                    soft, titles, NULL, "probability", 0};
    for (int per_panel = 0; per_panel < 2; per_panel++) {
        const char *dir = unit_path(per_panel ? "per" : "glob");
        tupe_vizopts o = {dir, TUPE_VIZ_BOTH, per_panel, per_panel ? 3 : 0, NULL, 0, unit_path("npy")};
        tupe_vizset *s;
        tupe_err e;
        CHECK_INT(tupe_vizset_new(&s, &o, 2, &e), 0);
        CHECK_INT(tupe_vizset_draw(s, &vb, &e), 0);
        CHECK_INT(tupe_vizset_draw(s, &vs, &e), 0);
        CHECK_INT(tupe_vizset_finish(s, &e), 0);
        CHECK_INT(tupe_vizset_count(s), 7); /* 2 PNG, 2 SVG, 2 .npy, meta.json */
        tupe_vizset_free(s);
        char path[4200];
        snprintf(path, sizeof path, "%s/pos-bias.png", dir);
        check_png(path, &vb, per_panel, o.cell);
        snprintf(path, sizeof path, "%s/pos-softmax.png", dir);
        check_png(path, &vs, per_panel, o.cell);
        snprintf(path, sizeof path, "%s/pos-softmax.svg", dir);
        char *svg = unit_slurp(path, NULL);
        CHECK_HAS(svg, "<image");
        free(svg);
    }
    /* Limits: symmetric for the signed map, [0, max] for probabilities; per panel when asked. */
    double lo, hi, lo1, hi1, mx = 0;
    for (int i = 0; i < 4 * N * N; i++)
        mx = fabs(pc.bias[i]) > mx ? fabs(pc.bias[i]) : mx;
    tupe_view_limits(&vb, 0, 0, &lo, &hi);
    CHECK(lo == -mx && hi == mx);
    tupe_view_limits(&vb, 1, 1, &lo1, &hi1);
    CHECK(lo1 == -hi1 && hi1 <= hi);
    tupe_view_limits(&vs, 0, 0, &lo, &hi);
    CHECK(lo == 0 && hi > 0 && hi <= 1);
    float zero[4] = {0};
    tupe_view vz = {"z", NULL, NULL, NULL, TUPE_CMAP_COOLWARM, 1, 2, 2, zero, titles, NULL, NULL, 0};
    tupe_view_limits(&vz, 0, 0, &lo, &hi);
    CHECK(lo == -1 && hi == 1);
    /* The .npy holds the matrices drawn, and meta.json the limits. */
    tupe_npy a;
    tupe_err e;
    CHECK_INT(tupe_npy_read(unit_path("npy/pos_softmax.npy"), &a, &e), 0);
    CHECK(a.ndim == 3 && a.shape[0] == 4 && a.shape[1] == N && a.shape[2] == N);
    CHECK(memcmp(a.data, soft, 4 * N * N * sizeof *soft) == 0);
    tupe_npy_free(&a);
    char *meta = unit_slurp(unit_path("npy/meta.json"), NULL);
    CHECK_HAS(meta, "\"name\": \"pos-softmax\"");
    CHECK_HAS(meta, "\"colormap\": \"viridis\"");
    CHECK_HAS(meta, "\"what\": \"positional term\"");
    free(meta);
    tupe_poscorr_free(&pc);
    free(soft);
}

static void single_file(void)
{
    float v[9] = {0, 1, 2, 3, 4, 5, 6, 7, 8};
    tupe_view one = {"x", NULL, "t", NULL, TUPE_CMAP_VIRIDIS, 1, 3, 3, v, titles, NULL, NULL, 0};
    tupe_err e;
    tupe_vizset *s;
    tupe_vizopts o = {unit_path("one.svg"), 0, 0, 0, NULL, 0, NULL};
    CHECK_INT(tupe_vizset_new(&s, &o, 1, &e), 0);
    CHECK_INT(tupe_vizset_draw(s, &one, &e), 0);
    CHECK_INT(tupe_vizset_finish(s, &e), 0);
    CHECK_STR(tupe_vizset_path(s, 0), unit_path("one.svg"));
    tupe_vizset_free(s);
    char *svg = unit_slurp(unit_path("one.svg"), NULL);
    CHECK(strncmp(svg, "<?xml", 5) == 0);
    free(svg);
    CHECK_INT(tupe_vizset_new(&s, &o, 2, &e), TUPE_EUSAGE);
    CHECK_HAS(e.msg, "holds one figure and this draws 2");
    o.format = TUPE_VIZ_PNG;
    CHECK_INT(tupe_vizset_new(&s, &o, 1, &e), TUPE_EUSAGE);
    CHECK_HAS(e.msg, "does not end in .png");
    o.format = TUPE_VIZ_BOTH;
    o.out = unit_path("two");
    CHECK_INT(tupe_vizset_new(&s, &o, 3, &e), 0);
    tupe_vizset_free(s);
    o.out = "/dev/null/x";
    CHECK_INT(tupe_vizset_new(&s, &o, 3, &e), TUPE_ECANTCREAT);
}

UNIT_MAIN(T(figures_follow_the_colormap), T(single_file))
