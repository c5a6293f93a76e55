#include "viz/heatmap.h"

#include <cairo-svg.h>
#include <cairo.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/fileio.h"
#include "viz/colormap.h"

/* Layout constants, in pixels. */
#define FONT "DejaVu Sans"
#define TICK_FONT 10.0
#define TITLE_FONT 12.0
#define FIG_TITLE_FONT 15.0
#define PAD 12
#define BAR_W 14
#define BAR_GAP 8
#define BAR_TEXT 48

typedef struct layout {
    int cell, cols, rows_of_grid;
    int mat_w, mat_h;          /* matrix area of one panel (the largest panel) */
    int left, top, bottom;     /* margins of one panel for labels and title */
    int right;                 /* per-panel colorbar space */
    int panel_w, panel_h;
    int fig_top;               /* figure title */
    int bar;                   /* global colorbar width (0 if per panel) */
    int width, height;
} layout;

static int max_dim(const tupe_figure *f, int *rows, int *cols)
{
    int r = 1, c = 1;
    for (int i = 0; i < f->npanels; i++) {
        r = f->panels[i].rows > r ? f->panels[i].rows : r;
        c = f->panels[i].cols > c ? f->panels[i].cols : c;
    }
    *rows = r, *cols = c;
    return r > c ? r : c;
}

/* Label text widths without a cairo context: a conservative estimate (0.62 em per char). */
static int text_w(const char *s, double size)
{
    int n = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        n += (*p & 0xc0) != 0x80; /* count code points */
    return (int)ceil(n * size * 0.62);
}

static int labels_w(const char *const *lab, int n)
{
    int w = 0;
    for (int i = 0; lab && i < n; i++) {
        int t = text_w(lab[i], TICK_FONT);
        w = t > w ? t : w;
    }
    return w;
}

static void make_layout(const tupe_figure *f, layout *L)
{
    memset(L, 0, sizeof *L);
    int R, C;
    int m = max_dim(f, &R, &C);
    L->cell = f->cell > 0 ? f->cell : (m >= 384 ? 1 : 384 / m);
    L->cols = f->grid_cols > 0 ? f->grid_cols : (int)ceil(sqrt((double)f->npanels));
    if (f->grid_cols <= 0 && L->cols > 4)
        L->cols = 4;
    if (L->cols > f->npanels)
        L->cols = f->npanels > 0 ? f->npanels : 1;
    L->rows_of_grid = (f->npanels + L->cols - 1) / L->cols;
    L->mat_w = C * L->cell;
    L->mat_h = R * L->cell;
    int lw = f->row_labels ? labels_w(f->row_labels, R) : text_w("0000", TICK_FONT);
    int bh = f->col_labels ? labels_w(f->col_labels, C) : (int)TICK_FONT + 4;
    L->left = lw + 8;
    L->bottom = bh + 8;
    L->top = (int)TITLE_FONT + 8;
    L->right = f->per_panel_colorbar ? BAR_GAP + BAR_W + BAR_TEXT : 0;
    L->panel_w = L->left + L->mat_w + L->right + PAD;
    L->panel_h = L->top + L->mat_h + L->bottom + PAD;
    L->fig_top = f->title ? (int)FIG_TITLE_FONT + 14 : 6;
    L->bar = f->per_panel_colorbar ? 0 : BAR_GAP + BAR_W + BAR_TEXT + PAD;
    L->width = PAD + L->cols * L->panel_w + L->bar;
    L->height = L->fig_top + L->rows_of_grid * L->panel_h + PAD;
}

void tupe_figure_size(const tupe_figure *f, int *w, int *h)
{
    layout L;
    make_layout(f, &L);
    *w = L.width;
    *h = L.height;
}

static void panel_origin(const layout *L, int p, int *x, int *y)
{
    *x = PAD + (p % L->cols) * L->panel_w + L->left;
    *y = L->fig_top + (p / L->cols) * L->panel_h + L->top;
}

void tupe_figure_cell_origin(const tupe_figure *f, int p, int r, int c, int *x, int *y, int *cell)
{
    layout L;
    make_layout(f, &L);
    int px, py;
    panel_origin(&L, p, &px, &py);
    *x = px + c * L.cell;
    *y = py + r * L.cell;
    *cell = L.cell;
}

static cairo_surface_t *matrix_image(const tupe_figure *f, const tupe_panel *p)
{
    cairo_surface_t *img = cairo_image_surface_create(CAIRO_FORMAT_RGB24, p->cols, p->rows);
    if (cairo_surface_status(img) != CAIRO_STATUS_SUCCESS)
        return img;
    cairo_surface_flush(img);
    unsigned char *d = cairo_image_surface_get_data(img);
    int stride = cairo_image_surface_get_stride(img);
    for (int r = 0; r < p->rows; r++) {
        uint32_t *row = (uint32_t *)(d + (size_t)r * (size_t)stride);
        for (int c = 0; c < p->cols; c++) {
            uint8_t rgb[3];
            tupe_cmap_rgb8(f->cmap, p->v[(size_t)r * (size_t)p->cols + (size_t)c], p->lo, p->hi, rgb);
            row[c] = (uint32_t)rgb[0] << 16 | (uint32_t)rgb[1] << 8 | rgb[2];
        }
    }
    cairo_surface_mark_dirty(img);
    return img;
}

static void text_at(cairo_t *cr, double x, double y, const char *s, double size, int align)
{
    /* align: 0 left, 1 centre, 2 right (x is that point); y is the baseline */
    cairo_set_font_size(cr, size);
    cairo_text_extents_t te;
    cairo_text_extents(cr, s, &te);
    double dx = align == 1 ? -te.x_advance / 2 : align == 2 ? -te.x_advance : 0;
    cairo_move_to(cr, x + dx, y);
    cairo_show_text(cr, s);
}

static int auto_tick(int n)
{
    static const int steps[] = {1, 2, 4, 8, 16, 32, 64, 128, 256};
    for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++)
        if (n / steps[i] <= 8)
            return steps[i];
    return 512;
}

static void colorbar(cairo_t *cr, const tupe_figure *f, double x, double y, double h, double lo, double hi)
{
    cairo_surface_t *g = cairo_image_surface_create(CAIRO_FORMAT_RGB24, 1, 256);
    unsigned char *d = cairo_image_surface_get_data(g);
    int stride = cairo_image_surface_get_stride(g);
    for (int i = 0; i < 256; i++) {
        const float *c = tupe_cmap_entry(f->cmap, 255 - i);
        *(uint32_t *)(d + (size_t)i * (size_t)stride) = (uint32_t)lrintf(c[0] * 255) << 16 |
                                                        (uint32_t)lrintf(c[1] * 255) << 8 |
                                                        (uint32_t)lrintf(c[2] * 255);
    }
    cairo_surface_mark_dirty(g);
    cairo_save(cr);
    cairo_translate(cr, x, y);
    cairo_scale(cr, BAR_W, h / 256.0);
    cairo_set_source_surface(cr, g, 0, 0);
    cairo_pattern_set_filter(cairo_get_source(cr), CAIRO_FILTER_NEAREST);
    cairo_paint(cr);
    cairo_restore(cr);
    cairo_surface_destroy(g);
    cairo_set_source_rgb(cr, 0, 0, 0);
    cairo_set_line_width(cr, 1);
    cairo_rectangle(cr, x + 0.5, y + 0.5, BAR_W - 1, h - 1);
    cairo_stroke(cr);
    char buf[32];
    snprintf(buf, sizeof buf, "%.3g", hi);
    text_at(cr, x + BAR_W + 4, y + TICK_FONT, buf, TICK_FONT, 0);
    snprintf(buf, sizeof buf, "%.3g", (lo + hi) / 2);
    text_at(cr, x + BAR_W + 4, y + h / 2 + TICK_FONT / 2, buf, TICK_FONT, 0);
    snprintf(buf, sizeof buf, "%.3g", lo);
    text_at(cr, x + BAR_W + 4, y + h, buf, TICK_FONT, 0);
    if (f->value_label) {
        cairo_save(cr);
        cairo_move_to(cr, x + BAR_W + BAR_TEXT - 4, y + h / 2);
        cairo_rotate(cr, -M_PI / 2);
        cairo_set_font_size(cr, TICK_FONT);
        cairo_text_extents_t te;
        cairo_text_extents(cr, f->value_label, &te);
        cairo_rel_move_to(cr, -te.x_advance / 2, 0);
        cairo_show_text(cr, f->value_label);
        cairo_restore(cr);
    }
}

static void draw(cairo_t *cr, const tupe_figure *f, const layout *L)
{
    cairo_set_source_rgb(cr, 1, 1, 1);
    cairo_paint(cr);
    cairo_select_font_face(cr, FONT, CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
    cairo_set_source_rgb(cr, 0, 0, 0);
    if (f->title)
        text_at(cr, L->width / 2.0, FIG_TITLE_FONT + 4, f->title, FIG_TITLE_FONT, 1);
    for (int p = 0; p < f->npanels; p++) {
        const tupe_panel *pn = &f->panels[p];
        int x, y;
        panel_origin(L, p, &x, &y);
        cairo_surface_t *img = matrix_image(f, pn);
        cairo_save(cr);
        cairo_translate(cr, x, y);
        cairo_scale(cr, L->cell, L->cell);
        cairo_set_source_surface(cr, img, 0, 0);
        cairo_pattern_set_filter(cairo_get_source(cr), CAIRO_FILTER_NEAREST);
        cairo_rectangle(cr, 0, 0, pn->cols, pn->rows);
        cairo_fill(cr);
        cairo_restore(cr);
        cairo_surface_destroy(img);
        cairo_set_source_rgb(cr, 0, 0, 0);
        int mw = pn->cols * L->cell, mh = pn->rows * L->cell;
        text_at(cr, x + mw / 2.0, y - 5, pn->title, TITLE_FONT, 1);
        /* Rows: token labels or numeric ticks on the left. */
        if (f->row_labels) {
            for (int r = 0; r < pn->rows; r++)
                text_at(cr, x - 4, y + (r + 0.5) * L->cell + TICK_FONT / 3, f->row_labels[r], TICK_FONT, 2);
        } else {
            int step = f->tick_every > 0 ? f->tick_every : auto_tick(pn->rows);
            for (int r = 0; r < pn->rows; r += step) {
                char buf[16];
                snprintf(buf, sizeof buf, "%d", r);
                text_at(cr, x - 4, y + (r + 0.5) * L->cell + TICK_FONT / 3, buf, TICK_FONT, 2);
            }
        }
        if (f->col_labels) {
            for (int c = 0; c < pn->cols; c++) {
                cairo_save(cr);
                cairo_move_to(cr, x + (c + 0.5) * L->cell + TICK_FONT / 3, y + mh + 4);
                cairo_rotate(cr, M_PI / 2);
                cairo_set_font_size(cr, TICK_FONT);
                cairo_show_text(cr, f->col_labels[c]);
                cairo_restore(cr);
            }
        } else {
            int step = f->tick_every > 0 ? f->tick_every : auto_tick(pn->cols);
            for (int c = 0; c < pn->cols; c += step) {
                char buf[16];
                snprintf(buf, sizeof buf, "%d", c);
                text_at(cr, x + (c + 0.5) * L->cell, y + mh + TICK_FONT + 3, buf, TICK_FONT, 1);
            }
        }
        if (f->per_panel_colorbar)
            colorbar(cr, f, x + mw + BAR_GAP, y, mh, pn->lo, pn->hi);
    }
    if (!f->per_panel_colorbar && f->npanels > 0) {
        int x = PAD + L->cols * L->panel_w + BAR_GAP;
        int y = L->fig_top + L->top;
        int h = L->rows_of_grid * L->panel_h - L->top - L->bottom - PAD;
        colorbar(cr, f, x, y, h, f->panels[0].lo, f->panels[0].hi);
    }
}

typedef struct {
    tupe_out *o;
    tupe_err *e;
    int failed;
} sink;

static cairo_status_t sink_write(void *closure, const unsigned char *data, unsigned int len)
{
    sink *s = closure;
    if (s->failed || tupe_out_write(s->o, data, len, s->e)) {
        s->failed = 1;
        return CAIRO_STATUS_WRITE_ERROR;
    }
    return CAIRO_STATUS_SUCCESS;
}

int tupe_figure_write(const tupe_figure *f, const char *path, int format, tupe_err *e)
{
    layout L;
    make_layout(f, &L);
    /* The drawing library's image surface holds at most 32767 pixels a side: said in the
     * figure's own terms (which size, and the largest --cell that fits), before any file. */
    if (format != TUPE_FIG_SVG && (L.width > 32767 || L.height > 32767)) {
        int R, C;
        max_dim(f, &R, &C);
        long fixed_w = (long)L.width - (long)L.cols * L.mat_w;
        long fixed_h = (long)L.height - (long)L.rows_of_grid * L.mat_h;
        long cw = (32767 - fixed_w) / ((long)L.cols * (C > 0 ? C : 1));
        long ch = (32767 - fixed_h) / ((long)L.rows_of_grid * (R > 0 ? R : 1));
        long most = cw < ch ? cw : ch;
        if (most >= 1)
            return tupe_fail(e, TUPE_EUSAGE, "%s: the figure would be %d x %d pixels, more than "
                             "the 32767 a PNG holds a side (%d x %d cells of %d pixels): give "
                             "--cell %ld or less, or --format svg", path, L.width, L.height, R, C,
                             L.cell, most);
        return tupe_fail(e, TUPE_EUSAGE, "%s: the figure would be %d x %d pixels, more than the "
                         "32767 a PNG holds a side (%d x %d cells): draw fewer, or --format svg",
                         path, L.width, L.height, R, C);
    }
    sink s = {NULL, e, 0};
    int rc = tupe_out_open(&s.o, path, e);
    if (rc)
        return rc;
    cairo_surface_t *surf = format == TUPE_FIG_SVG
        ? cairo_svg_surface_create_for_stream(sink_write, &s, L.width, L.height)
        : cairo_image_surface_create(CAIRO_FORMAT_RGB24, L.width, L.height);
    cairo_t *cr = cairo_create(surf);
    draw(cr, f, &L);
    cairo_status_t st = cairo_status(cr);
    cairo_destroy(cr);
    if (st == CAIRO_STATUS_SUCCESS && format != TUPE_FIG_SVG)
        st = cairo_surface_write_to_png_stream(surf, sink_write, &s);
    cairo_surface_finish(surf); /* the SVG surface writes its document here */
    if (st == CAIRO_STATUS_SUCCESS)
        st = cairo_surface_status(surf);
    cairo_surface_destroy(surf);
    if (s.failed || st != CAIRO_STATUS_SUCCESS) {
        if (!s.failed)
            tupe_fail(e, TUPE_EFAIL, "%s: drawing failed: %s", path, cairo_status_to_string(st));
        tupe_out_abort(s.o);
        return e->code;
    }
    return tupe_out_commit(s.o, e);
}

void tupe_figure_term(const tupe_figure *f, FILE *out, int max_cells)
{
    const char *nc = getenv("NO_COLOR"), *term = getenv("TERM");
    int color = !(nc && *nc) && !(term && strcmp(term, "dumb") == 0);
    static const char ramp[] = " .:-=+*#%@";
    if (max_cells < 4)
        max_cells = 4;
    if (f->title)
        fprintf(out, "%s\n", f->title);
    for (int p = 0; p < f->npanels; p++) {
        const tupe_panel *pn = &f->panels[p];
        int step = (pn->cols + max_cells - 1) / max_cells;
        if (step < 1)
            step = 1;
        fprintf(out, "%s  [%.3g, %.3g]%s\n", pn->title, pn->lo, pn->hi,
                step > 1 ? "  (every cell shows the top-left value of its block)" : "");
        for (int r = 0; r < pn->rows; r += step) {
            for (int c = 0; c < pn->cols; c += step) {
                double v = pn->v[(size_t)r * (size_t)pn->cols + (size_t)c];
                if (color) {
                    uint8_t rgb[3];
                    tupe_cmap_rgb8(f->cmap, v, pn->lo, pn->hi, rgb);
                    fprintf(out, "\033[48;2;%d;%d;%dm  ", rgb[0], rgb[1], rgb[2]);
                } else {
                    int i = tupe_cmap_index(v, pn->lo, pn->hi);
                    char ch = i < 0 ? '?' : ramp[i * 10 / 256];
                    fprintf(out, "%c%c", ch, ch);
                }
            }
            fprintf(out, color ? "\033[0m\n" : "\n");
        }
    }
}
