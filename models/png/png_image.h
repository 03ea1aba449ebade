/* Writing images as PNG files (libpng) for people to look at: single images and grids of
 * float images. Files are written atomically (a temporary file renamed into place), so an
 * error never leaves a partial file behind; errors name the file and libpng's complaint. */
#ifndef KILN_MODELS_PNG_IMAGE_H
#define KILN_MODELS_PNG_IMAGE_H

#include <stdint.h>

#include <kiln/kiln.h>

/* 8-bit pixels, row-major, channels 1 (gray) or 3 (RGB) interleaved. */
kn_status png_write(const char *path, const uint8_t *pixels, int width, int height, int channels);

/* n images [n, channels, height, width] (planar floats, values in [lo, hi], clamped) tiled
 * row by row into `cols` columns with a 1-pixel gray border around each. */
kn_status png_write_grid(const char *path, const float *images, int n, int channels, int height, int width, int cols,
                         float lo, float hi);

#endif
