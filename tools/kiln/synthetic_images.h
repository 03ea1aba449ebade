/* A synthetic image-classification set that kiln draws itself: ten shapes and textures
 * (disc, square, ring, plus, X, horizontal stripes, vertical stripes, checkerboard, triangle,
 * frame) at a random place and size, in a random foreground color on a random background,
 * plus Gaussian-like noise. The class is the shape, never the color, so a model has to look
 * at spatial structure. Image k of a seed is always the same picture. */
#ifndef KILN_TOOLS_SYNTHETIC_IMAGES_H
#define KILN_TOOLS_SYNTHETIC_IMAGES_H

#include <stdint.h>

#define SYNTHETIC_CLASSES 10

/* Draws image `index` ([3, size, size] floats, roughly in [-1, 1], channel-major) and returns
 * its class. size must be at least 8. */
int synthetic_image(uint64_t seed, uint64_t index, int size, float *pixels);
/* The class name ("disc", ...). */
const char *synthetic_class_name(int label);

#endif
