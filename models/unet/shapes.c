/* The synthetic shapes (shapes.h). */
#include "unet/shapes.h"

#include <math.h>
#include <stdbool.h>

#include <kiln/kiln.h>

#define SUPERSAMPLE 4

/* The k-th uniform number in [0, 1) of image (seed, index). */
static double draw(uint64_t seed, uint64_t index, int k) {
    return (double)(kn_mix64(kn_mix64(seed ^ kn_mix64(index)) + (uint64_t)k) >> 11) * 0x1.0p-53;
}

/* Six saturated colors: red, yellow, green, cyan, blue, magenta (RGB in [0, 1]). */
static void palette_rgb(double u, double rgb[3]) {
    static const double colors[6][3] = {{1, 0, 0}, {1, 1, 0}, {0, 1, 0}, {0, 1, 1}, {0, 0, 1}, {1, 0, 1}};
    const double *c = colors[(int)(u * 6) % 6];
    for (int i = 0; i < 3; i++) rgb[i] = c[i];
}

void shapes_render(uint64_t seed, uint64_t index, int size, int channels, float *out) {
    bool square = draw(seed, index, 0) < 0.5;
    double r = size * (0.18 + 0.17 * draw(seed, index, 1)); /* radius or half side */
    double cx = r + (size - 2 * r) * draw(seed, index, 2), cy = r + (size - 2 * r) * draw(seed, index, 3);
    double rgb[3];
    palette_rgb(draw(seed, index, 4), rgb);
    for (int y = 0; y < size; y++)
        for (int x = 0; x < size; x++) {
            int inside = 0;
            for (int sy = 0; sy < SUPERSAMPLE; sy++)
                for (int sx = 0; sx < SUPERSAMPLE; sx++) {
                    double px = x + (sx + 0.5) / SUPERSAMPLE - cx, py = y + (sy + 0.5) / SUPERSAMPLE - cy;
                    inside += square ? fabs(px) <= r && fabs(py) <= r : px * px + py * py <= r * r;
                }
            double cover = (double)inside / (SUPERSAMPLE * SUPERSAMPLE);
            if (channels == 1) {
                double luma = 0.299 * rgb[0] + 0.587 * rgb[1] + 0.114 * rgb[2];
                out[y * size + x] = (float)(2 * cover * luma - 1);
                continue;
            }
            for (int c = 0; c < 3; c++) out[(c * size + y) * size + x] = (float)(2 * cover * rgb[c] - 1);
        }
}
