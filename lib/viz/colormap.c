#include "viz/colormap.h"

#include <math.h>

int tupe_cmap_index(double v, double lo, double hi)
{
    if (isnan(v))
        return -1;
    double x = hi > lo ? (v - lo) / (hi - lo) : 0.5;
    if (x < 0)
        x = 0;
    int i = (int)floor(x * 256.0);
    return i > 255 ? 255 : i;
}

const float *tupe_cmap_entry(int cmap, int index)
{
    return cmap == TUPE_CMAP_COOLWARM ? tupe_cmap_coolwarm[index] : tupe_cmap_viridis[index];
}

void tupe_cmap_rgb8(int cmap, double v, double lo, double hi, uint8_t rgb[3])
{
    int i = tupe_cmap_index(v, lo, hi);
    if (i < 0) {
        rgb[0] = rgb[1] = rgb[2] = 128;
        return;
    }
    const float *c = tupe_cmap_entry(cmap, i);
    for (int k = 0; k < 3; k++)
        rgb[k] = (uint8_t)lrintf(c[k] * 255.0f);
}
