#include "viz/attnstats.h"

#include <stdlib.h>

void tupe_attn_stats_of(const float *a, int T, int k, tupe_attn_stats *out)
{
    double dist = 0, local = 0, fwd = 0, cross = 0, self = 0;
    for (int i = 0; i < T; i++)
        for (int j = 0; j < T; j++) {
            double p = a[(size_t)i * T + j];
            int d = abs(i - j);
            dist += p * d;
            local += d <= k ? p : 0;
            fwd += j > i ? p : j < i ? -p : 0;
            cross += p * a[(size_t)j * T + i];
            self += p * p;
        }
    out->distance = T > 0 ? dist / T : 0;
    out->local = T > 0 ? local / T : 0;
    out->forward = T > 0 ? fwd / T : 0;
    out->symmetry = self > 0 ? cross / self : 1;
}

double tupe_attn_uniform_distance(int T)
{
    return T > 0 ? ((double)T * T - 1) / (3.0 * T) : 0;
}
