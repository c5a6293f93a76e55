/* Colormaps for heatmaps, embedded exactly (256 entries each):
 *   viridis   sequential, perceptually uniform (CC0); for probabilities and other values >= 0
 *   coolwarm  diverging (K. Moreland); for signed values, with limits symmetric about 0
 * A value v in [lo, hi] maps to entry min(255, floor((v - lo) / (hi - lo) * 256)), as
 * matplotlib maps it; NaN maps to a neutral grey. */
#ifndef TUPE_COLORMAP_H
#define TUPE_COLORMAP_H

#include <stdint.h>

enum { TUPE_CMAP_VIRIDIS, TUPE_CMAP_COOLWARM };

extern const float tupe_cmap_viridis[256][3];
extern const float tupe_cmap_coolwarm[256][3];

/* Table index of v in [lo, hi] (clipped); -1 for NaN. */
int tupe_cmap_index(double v, double lo, double hi);
/* 8-bit RGB of v. */
void tupe_cmap_rgb8(int cmap, double v, double lo, double hi, uint8_t rgb[3]);
/* The float RGB of an entry. */
const float *tupe_cmap_entry(int cmap, int index);

#endif
