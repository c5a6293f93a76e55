/* Heatmap figures: the PNG decodes (libpng, independently of cairo), has the grid's size, is
 * not constant, and its pixels follow the colormap of the matrix values at sampled cells;
 * the SVG is a complete document; the terminal preview uses the same colours. */
#include "viz/colormap.h"
#include "viz/heatmap.h"
#include "unit.h"

static void fill(float *v, int n, int k)
{
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            v[i * n + j] = (float)(sin(0.3 * i + k) * cos(0.2 * j) * (k + 1));
}

static void png_follows_the_colormap(void)
{
    enum { N = 24, P = 6 };
    float *v = malloc(P * N * N * sizeof *v);
    tupe_panel pn[P];
    for (int p = 0; p < P; p++) {
        fill(v + p * N * N, N, p);
        pn[p].v = v + p * N * N;
        pn[p].rows = pn[p].cols = N;
        snprintf(pn[p].title, sizeof pn[p].title, "L0 H%d", p);
        pn[p].lo = -6;
        pn[p].hi = 6;
    }
    tupe_figure f = {"positional correlation", TUPE_CMAP_COOLWARM, pn, P, 3, 0, NULL, NULL, 0, 0, "logit"};
    const char *path = unit_path("f.png");
    tupe_err e;
    CHECK_INT(tupe_figure_write(&f, path, TUPE_FIG_PNG, &e), 0);
    int w, h, fw, fh;
    unsigned char *px = unit_png_rgb(path, &w, &h);
    CHECK(px != NULL);
    if (!px)
        return;
    tupe_figure_size(&f, &fw, &fh);
    CHECK_INT(w, fw);
    CHECK_INT(h, fh);
    int x, y, cell;
    tupe_figure_cell_origin(&f, 0, 0, 0, &x, &y, &cell);
    CHECK_INT(cell, 384 / N);
    /* 2 rows x 3 panels of 24 x 16-pixel cells: the figure is at least that large. */
    CHECK(w > 3 * N * cell && h > 2 * N * cell);
    int checked = 0, bad = 0;
    for (int p = 0; p < P; p++)
        for (int r = 0; r < N; r += 5)
            for (int c = 0; c < N; c += 7) {
                tupe_figure_cell_origin(&f, p, r, c, &x, &y, &cell);
                uint8_t want[3];
                tupe_cmap_rgb8(TUPE_CMAP_COOLWARM, v[p * N * N + r * N + c], -6, 6, want);
                /* every pixel of the cell, not just its centre */
                for (int dy = 0; dy < cell; dy += cell - 1)
                    for (int dx = 0; dx < cell; dx += cell - 1) {
                        const unsigned char *q = px + 3 * ((size_t)(y + dy) * (size_t)w + (size_t)(x + dx));
                        if (q[0] != want[0] || q[1] != want[1] || q[2] != want[2]) {
                            if (bad++ < 3)
                                CHECK_MSG(0, "panel %d cell (%d,%d) pixel (%d,%d): %d,%d,%d want %d,%d,%d", p, r, c,
                                          x + dx, y + dy, q[0], q[1], q[2], want[0], want[1], want[2]);
                        }
                        checked++;
                    }
            }
    CHECK(checked > 200);
    CHECK_INT(bad, 0);
    /* Not constant: many distinct colours. */
    int distinct = 0;
    for (size_t i = 3; i < (size_t)w * (size_t)h * 3; i += 3 * 97)
        distinct += memcmp(px + i, px + i - 3, 3) != 0;
    CHECK(distinct > 100);
    free(px);
    free(v);
}

static void token_labels_and_svg(void)
{
    enum { N = 7 };
    float v[N * N];
    for (int i = 0; i < N * N; i++)
        v[i] = (float)(i % N) / N;
    const char *tok[N] = {"[CLS]", "the", "caf\xc3\xa9", "is", "open", ".", "[SEP]"};
    tupe_panel pn = {v, N, N, "L1 H0", 0, 1};
    tupe_figure f = {NULL, TUPE_CMAP_VIRIDIS, &pn, 1, 0, 0, tok, tok, 0, 1, "probability"};
    tupe_err e;
    const char *svg = unit_path("f.svg");
    CHECK_INT(tupe_figure_write(&f, svg, TUPE_FIG_SVG, &e), 0);
    char *s = unit_slurp(svg, NULL);
    CHECK(strncmp(s, "<?xml", 5) == 0);
    CHECK_HAS(s, "<svg");
    CHECK_HAS(s, "<image");
    CHECK_HAS(s, "</svg>");
    free(s);
    const char *png = unit_path("t.png");
    CHECK_INT(tupe_figure_write(&f, png, TUPE_FIG_PNG, &e), 0);
    int w, h;
    unsigned char *px = unit_png_rgb(png, &w, &h);
    CHECK(px != NULL);
    int x, y, cell;
    tupe_figure_cell_origin(&f, 0, 3, 6, &x, &y, &cell);
    uint8_t want[3];
    tupe_cmap_rgb8(TUPE_CMAP_VIRIDIS, v[3 * N + 6], 0, 1, want);
    const unsigned char *q = px + 3 * ((size_t)(y + cell / 2) * (size_t)w + (size_t)(x + cell / 2));
    CHECK(q[0] == want[0] && q[1] == want[1] && q[2] == want[2]);
    free(px);
    /* Output that cannot be created is an error, and nothing is left behind. */
    CHECK_INT(tupe_figure_write(&f, unit_path("no/dir/x.png"), TUPE_FIG_PNG, &e), TUPE_ECANTCREAT);
}

static void terminal_preview(void)
{
    float v[4] = {0, 0.25f, 0.75f, 1};
    tupe_panel pn = {v, 2, 2, "H0", 0, 1};
    tupe_figure f = {NULL, TUPE_CMAP_VIRIDIS, &pn, 1, 0, 0, NULL, NULL, 0, 0, NULL};
    const char *p = unit_path("term.txt");
    FILE *o = fopen(p, "w");
    unsetenv("NO_COLOR");
    setenv("TERM", "xterm-256color", 1);
    tupe_figure_term(&f, o, 80);
    setenv("NO_COLOR", "1", 1);
    tupe_figure_term(&f, o, 80);
    unsetenv("NO_COLOR");
    fclose(o);
    char *s = unit_slurp(p, NULL);
    CHECK_HAS(s, "\033[48;2;68;1;84m  "); /* viridis entry 0 = #440154 */
    CHECK_HAS(s, "\033[48;2;253;231;37m  ");  /* entry 255 = #fde725 */
    CHECK_HAS(s, "  ::\n##@@\n"); /* the ASCII ramp without colour */
    free(s);
}

static void colormap_tables(void)
{
    CHECK_NEAR(tupe_cmap_viridis[0][0], 0.267004, 1e-7);
    CHECK_NEAR(tupe_cmap_viridis[255][1], 0.906157, 1e-7);
    CHECK_INT(tupe_cmap_index(0.0, 0, 1), 0);
    CHECK_INT(tupe_cmap_index(1.0, 0, 1), 255);
    CHECK_INT(tupe_cmap_index(0.5, 0, 1), 128);
    CHECK_INT(tupe_cmap_index(-3, 0, 1), 0);
    CHECK_INT(tupe_cmap_index(NAN, 0, 1), -1);
}

UNIT_MAIN(T(png_follows_the_colormap), T(token_labels_and_svg), T(terminal_preview), T(colormap_tables))
