/* Figures of heatmaps: a grid of panels (one matrix each, e.g. one attention head), each with
 * a title, position ticks or token labels on both axes, and a colorbar with the numeric range;
 * written as PNG or SVG through cairo (the SVG embeds each matrix as a raster image and draws
 * text, axes and colorbar as vectors), or previewed in a terminal with ANSI colours.
 *
 * Matrix row i is drawn top to bottom, column j left to right, origin at the top left (the
 * imshow convention, rows = queries, columns = keys). Each matrix cell covers exactly
 * `cell` x `cell` pixels of one colour, so tests can read values back from the picture. */
#ifndef TUPE_HEATMAP_H
#define TUPE_HEATMAP_H

#include <stdio.h>

#include "base/error.h"

typedef struct tupe_panel {
    const float *v;            /* rows x cols, row-major */
    int rows, cols;
    char title[64];
    double lo, hi;             /* colour limits of this panel */
} tupe_panel;

typedef struct tupe_figure {
    const char *title;         /* above the grid, or NULL */
    int cmap;                  /* TUPE_CMAP_VIRIDIS or TUPE_CMAP_COOLWARM */
    const tupe_panel *panels;
    int npanels;
    int grid_cols;             /* panels per row (0: ceil(sqrt(npanels)) capped at 4) */
    int cell;                  /* pixels per matrix cell (0: chosen so a panel is ~384 px) */
    const char *const *row_labels; /* token labels of the rows (NULL: numeric ticks) */
    const char *const *col_labels; /* token labels of the columns */
    int tick_every;            /* numeric tick spacing (0: automatic) */
    int per_panel_colorbar;    /* 1: a colorbar beside every panel (per-head limits) */
    const char *value_label;   /* colorbar caption, e.g. "logit" or "probability" */
} tupe_figure;

enum { TUPE_FIG_PNG, TUPE_FIG_SVG };

/* The figure's size in pixels (PNG) or points (SVG). */
void tupe_figure_size(const tupe_figure *f, int *width, int *height);
/* The top-left pixel of matrix cell (r, c) of panel p, and the cell size actually used. */
void tupe_figure_cell_origin(const tupe_figure *f, int p, int r, int c, int *x, int *y, int *cell);
/* Write atomically; "-" writes to stdout. */
int tupe_figure_write(const tupe_figure *f, const char *path, int format, tupe_err *e);
/* A preview with 24-bit ANSI colours (or an ASCII ramp when NO_COLOR is set or TERM=dumb),
 * each panel downsampled to at most max_cells columns. */
void tupe_figure_term(const tupe_figure *f, FILE *out, int max_cells);

#endif
