/* The synthetic images of `kiln train resnet18/50` (synthetic_images.h). */
#include "synthetic_images.h"

#include <math.h>
#include <stdbool.h>

#include "kiln/runtime.h"

/* A counter-based stream: draw i of image (seed, index) is a hash, so images are independent. */
typedef struct stream {
    uint64_t state;
} stream;

static uint64_t next_u64(stream *s) {
    uint64_t x = s->state;
    s->state += 0x9e3779b97f4a7c15ull; /* SplitMix64: a counter, mixed */
    return kn_mix64(x);
}

static double uniform(stream *s, double lo, double hi) {
    return lo + (hi - lo) * (double)(next_u64(s) >> 11) / 9007199254740992.0;
}

typedef struct shape {
    int label;
    double cx, cy, r, stripe, phase;
} shape;

/* Whether the point (x, y) of the unit square is foreground. */
static bool covers(const shape *s, double x, double y) {
    double dx = x - s->cx, dy = y - s->cy, ax = fabs(dx), ay = fabs(dy), r = s->r, d2 = dx * dx + dy * dy;
    bool in_box = ax < r && ay < r;
    switch (s->label) {
    case 0: return d2 < r * r;                                                  /* disc */
    case 1: return ax < 0.85 * r && ay < 0.85 * r;                              /* square */
    case 2: return d2 < r * r && d2 > 0.36 * r * r;                             /* ring */
    case 3: return in_box && (ax < 0.35 * r || ay < 0.35 * r);                  /* plus */
    case 4: return in_box && (fabs(dx - dy) < 0.5 * r || fabs(dx + dy) < 0.5 * r); /* X */
    case 5: return fmod(y + s->phase, 2 * s->stripe) < s->stripe;               /* horizontal stripes */
    case 6: return fmod(x + s->phase, 2 * s->stripe) < s->stripe;               /* vertical stripes */
    case 7: return ((int)floor((x + s->phase) / s->stripe) + (int)floor((y + s->phase) / s->stripe)) & 1; /* checkerboard */
    case 8: return ay < r && ax < 0.5 * (dy + r);                               /* triangle, apex up */
    default: return in_box && !(ax < 0.6 * r && ay < 0.6 * r);                  /* frame */
    }
}

int synthetic_image(uint64_t seed, uint64_t index, int size, float *pixels) {
    stream s = {seed * 0xd1342543de82ef95ull ^ (index + 1) * 0x9e3779b97f4a7c15ull};
    shape sh = {.label = (int)(next_u64(&s) % SYNTHETIC_CLASSES)};
    sh.cx = uniform(&s, 0.3, 0.7), sh.cy = uniform(&s, 0.3, 0.7), sh.r = uniform(&s, 0.22, 0.36);
    sh.stripe = uniform(&s, 0.08, 0.14), sh.phase = uniform(&s, 0, 1);
    /* Colors differ in every channel, so the shape is visible whatever they are. */
    double bg[3], fg[3];
    for (int c = 0; c < 3; c++) {
        bg[c] = uniform(&s, -0.8, 0.8);
        fg[c] = bg[c] + (bg[c] > 0 ? -1 : 1) * uniform(&s, 0.4, 1.0);
    }
    for (int y = 0; y < size; y++)
        for (int x = 0; x < size; x++) {
            bool on = covers(&sh, (x + 0.5) / size, (y + 0.5) / size);
            for (int c = 0; c < 3; c++) {
                double noise = (uniform(&s, 0, 1) + uniform(&s, 0, 1) + uniform(&s, 0, 1) - 1.5) * 0.2;
                pixels[((int64_t)c * size + y) * size + x] = (float)((on ? fg[c] : bg[c]) + noise);
            }
        }
    return sh.label;
}

const char *synthetic_class_name(int label) {
    static const char *const names[SYNTHETIC_CLASSES] = {"disc",     "square",   "ring",         "plus",     "X",
                                                         "h-stripes", "v-stripes", "checkerboard", "triangle", "frame"};
    return label >= 0 && label < SYNTHETIC_CLASSES ? names[label] : "?";
}
