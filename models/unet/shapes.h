/* Synthetic images for the diffusion example: on a black background, one disc or square in
 * one of six saturated colors (red, yellow, green, cyan, blue, magenta), of random size and
 * position, fully inside the image, edges anti-aliased. Image i of a seed is always the same. */
#ifndef KILN_MODELS_UNET_SHAPES_H
#define KILN_MODELS_UNET_SHAPES_H

#include <stdint.h>

/* Writes image `index` of the set `seed` into out [channels, size, size] (planar), values in
 * [-1, 1]; channels 3 (RGB) or 1 (the color's luma). */
void shapes_render(uint64_t seed, uint64_t index, int size, int channels, float *out);

#endif
