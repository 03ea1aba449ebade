/* PNG writing through libpng into an atomic file (png_image.h). */
#include "png/png_image.h"

#include <math.h>
#include <png.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct png_failure {
    char message[256];
} png_failure;

/* libpng reports errors through this and never returns from it: back to the setjmp. */
static void on_error(png_structp png, png_const_charp msg) {
    png_failure *f = png_get_error_ptr(png);
    snprintf(f->message, sizeof f->message, "%s", msg);
    png_longjmp(png, 1);
}

static void on_warning(png_structp png, png_const_charp msg) { (void)png, (void)msg; }

/* Encodes the image into an open stream; false with f->message on error. */
static bool encode(FILE *out, const uint8_t *pixels, int width, int height, int channels, png_failure *f) {
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, f, on_error, on_warning);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    if (!info) {
        snprintf(f->message, sizeof f->message, "libpng could not start (out of memory)");
        png_destroy_write_struct(&png, NULL);
        return false;
    }
    if (setjmp(png_jmpbuf(png))) {
        png_destroy_write_struct(&png, &info);
        return false;
    }
    png_init_io(png, out);
    png_set_IHDR(png, info, (png_uint_32)width, (png_uint_32)height, 8,
                 channels == 3 ? PNG_COLOR_TYPE_RGB : PNG_COLOR_TYPE_GRAY, PNG_INTERLACE_NONE,
                 PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    png_write_info(png, info);
    for (int y = 0; y < height; y++) png_write_row(png, pixels + (size_t)y * width * channels);
    png_write_end(png, NULL);
    png_destroy_write_struct(&png, &info);
    return true;
}

kn_status png_write(const char *path, const uint8_t *pixels, int width, int height, int channels) {
    if (!path || !pixels || width < 1 || height < 1 || (channels != 1 && channels != 3))
        return kn_set_error(KN_ERR_ARG, "png_write %s: a %dx%d image with %d channels (1 or 3) is not writable",
                            path ? path : "(no path)", width, height, channels);
    kn_atomic_file *a = kn_atomic_file_open(path);
    if (!a) return kn_last_status();
    png_failure failure = {{0}};
    if (!encode(kn_atomic_file_stream(a), pixels, width, height, channels, &failure)) {
        kn_atomic_file_abort(a);
        return kn_set_error(KN_ERR_IO, "png_write %s: %s", path, failure.message);
    }
    return kn_atomic_file_commit(a);
}

kn_status png_write_grid(const char *path, const float *images, int n, int channels, int height, int width, int cols,
                         float lo, float hi) {
    if (n < 1 || cols < 1 || height < 1 || width < 1 || !(hi > lo))
        return kn_set_error(KN_ERR_ARG, "png_write_grid %s: %d images of %dx%d in %d columns, range [%g, %g]",
                            path ? path : "(no path)", n, height, width, cols, lo, hi);
    int rows = (n + cols - 1) / cols, gw = cols * (width + 1) + 1, gh = rows * (height + 1) + 1;
    uint8_t *grid = malloc((size_t)gw * gh * channels);
    if (!grid) return kn_set_error(KN_ERR_OOM, "png_write_grid %s: out of host memory", path);
    memset(grid, 128, (size_t)gw * gh * channels);
    for (int i = 0; i < n; i++) {
        int x0 = 1 + (i % cols) * (width + 1), y0 = 1 + (i / cols) * (height + 1);
        for (int c = 0; c < channels; c++)
            for (int y = 0; y < height; y++)
                for (int x = 0; x < width; x++) {
                    float v = images[(((size_t)i * channels + c) * height + y) * width + x];
                    float u = (v - lo) / (hi - lo);
                    if (!(u >= 0)) u = 0; /* NaN too */
                    if (u > 1) u = 1;
                    grid[((size_t)(y0 + y) * gw + x0 + x) * channels + c] = (uint8_t)lrintf(u * 255);
                }
    }
    kn_status st = png_write(path, grid, gw, gh, channels);
    free(grid);
    return st;
}
