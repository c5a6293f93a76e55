/* What tupe-attnviz writes: named stacks of matrices ("views"), each drawn as one figure (a
 * grid of panels, heatmap.h) in PNG and/or SVG, previewed in a terminal, and saved as .npy in
 * a directory indexed by meta.json: every figure (files, panel titles, colormap, colour
 * limits), every array (file, dtype, shape, meaning), and the run's notes (checkpoint,
 * variant, heads...).
 *
 * Colour limits: a signed view (coolwarm) gets limits symmetric about 0, +-max|v|; a
 * non-negative view (viridis: probabilities) gets [0, max]. One pair for the whole figure
 * (panels comparable), or one per panel. NaN cells (no data) are ignored and drawn grey; an
 * infinite value is an error (TUPE_EDATA naming the view). */
#ifndef TUPE_VIZSET_H
#define TUPE_VIZSET_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "base/error.h"

typedef struct tupe_view {
    const char *name;           /* figure file stem: "pos-abs" -> pos-abs.png */
    const char *npy;            /* .npy name without extension, or NULL: not saved */
    const char *title;          /* above the figure */
    const char *what;           /* one line for meta.json: what the matrices are */
    int cmap;                   /* TUPE_CMAP_COOLWARM (signed) or TUPE_CMAP_VIRIDIS (>= 0) */
    int npanels, rows, cols;
    const float *data;          /* [npanels, rows, cols] */
    const char *const *titles;  /* one per panel */
    const char *const *labels;  /* token labels of rows and columns, or NULL (positions) */
    const char *value_label;    /* colorbar caption */
    int grid_cols;              /* panels per row (0: automatic) */
} tupe_view;

enum { TUPE_VIZ_DEFAULT = 0, TUPE_VIZ_PNG = 1, TUPE_VIZ_SVG = 2, TUPE_VIZ_BOTH = 3 };

/* What a directory of figures (and of their .npy arrays) says in its .tupe-kind (base/outdir.h). */
#define TUPE_FIGURES_KIND "figures directory"

typedef struct tupe_vizopts {
    /* A directory for the figures (created if needed; files DIR/<name>.png, .svg), or one
     * file, when the name ends in .png or .svg or is "-" (stdout), for a run that draws one
     * figure. NULL: no figure files. */
    const char *out;
    int format;                 /* TUPE_VIZ_*: DEFAULT is PNG (or the file's extension) */
    int per_panel;              /* colour limits per panel instead of per figure */
    int cell;                   /* pixels per matrix cell (0: automatic) */
    FILE *term;                 /* a preview of every figure here, or NULL */
    int term_cells;             /* columns of cells in the preview */
    const char *npy_dir;        /* directory for the .npy files and meta.json, or NULL */
} tupe_vizopts;

typedef struct tupe_vizset tupe_vizset;

/* nfigures: how many views will be drawn (a single output file holds one). Usage errors
 * (TUPE_EUSAGE) for a file name that does not fit the format or the number of figures. */
int tupe_vizset_new(tupe_vizset **s, const tupe_vizopts *o, int nfigures, tupe_err *e);
/* Draw a view (figure files, preview; its limits and panels go to meta.json) and save its
 * matrices as <npy>.npy, float32 [npanels, rows, cols]. */
int tupe_vizset_draw(tupe_vizset *s, const tupe_view *v, tupe_err *e);
/* Another array for the .npy directory (nothing without one). descr as npy.h. */
int tupe_vizset_npy(tupe_vizset *s, const char *name, const char *descr, int ndim,
                    const uint64_t *shape, const void *data, const char *what, tupe_err *e);
/* A text file in the .npy directory (e.g. tokens.txt). */
int tupe_vizset_text(tupe_vizset *s, const char *name, const char *text, const char *what,
                     tupe_err *e);
/* Notes for meta.json: a string, a number, a truth value, a list of integers. */
int tupe_vizset_note(tupe_vizset *s, const char *key, const char *value);
int tupe_vizset_note_bool(tupe_vizset *s, const char *key, int value);
int tupe_vizset_note_num(tupe_vizset *s, const char *key, double value);
int tupe_vizset_note_ints(tupe_vizset *s, const char *key, const int *v, int n);
/* Write meta.json (when there is a .npy directory). */
int tupe_vizset_finish(tupe_vizset *s, tupe_err *e);
void tupe_vizset_free(tupe_vizset *s);

/* Files written so far, in order. */
size_t tupe_vizset_count(const tupe_vizset *s);
const char *tupe_vizset_path(const tupe_vizset *s, size_t i);

/* The colour limits of panel p of a view (per_panel) or of the whole view. */
void tupe_view_limits(const tupe_view *v, int per_panel, int p, double *lo, double *hi);

#endif
