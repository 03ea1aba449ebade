/* Creation ops: fills, ranges, the identity, scalars and the Philox random draws
 * (reproducible across runs, modes and thread counts; the right distributions; errors). */
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static void test_fills_every_dtype(void) {
    for (int k = 0; k < KN_DTYPE_COUNT; k++) {
        kn_dtype d = ALL_DTYPES[k];
        double want0[6] = {0}, want1[6], wantv[6], v = d == KN_BOOL ? 1 : kn_dtype_is_int(d) ? -7 : -2.5;
        for (int i = 0; i < 6; i++) want1[i] = 1, wantv[i] = v;
        CHECK_CLOSE(kn_zeros(KN_SHAPE(2, 3), d), want0, tol_for(d), "zeros");
        CHECK_CLOSE(kn_ones(KN_SHAPE(2, 3), d), want1, tol_for(d), "ones");
        kn_tensor *f = kn_full(KN_SHAPE(3, 2), v, d);
        CHECK_CLOSE(f, wantv, tol_for(d), "full");
        CHECK_SHAPE(kn_empty(KN_SHAPE(3, 2), d), KN_SHAPE(3, 2));
        kn_tensor *e = kn_empty_like(f);
        CHECK(e && kn_dtype_of(e) == d);
        CHECK_SHAPE(e, KN_SHAPE(3, 2));
        CHECK_CLOSE(kn_zeros_like(f), want0, tol_for(d), "zeros_like");
        CHECK_CLOSE(kn_ones_like(f), want1, tol_for(d), "ones_like");
        CHECK_CLOSE(kn_full_like(f, v), wantv, tol_for(d), "full_like");
        kn_tensor *s = kn_scalar(v, d);
        CHECK(s && kn_ndim(s) == 0 && kn_numel(s) == 1);
        CHECK_CLOSE(s, wantv, tol_for(d), "scalar");
        CHECK(kn_numel(kn_zeros(KN_SHAPE(0, 4), d)) == 0);
    }
    CHECK_CLOSE(kn_full(KN_SHAPE(2), 1e10, KN_I32), ((double[]){2147483647.0, 2147483647.0}), tol_for(KN_I32), "saturates");
    kn_mode saved = debug_checks_off(); /* the overflow to inf is the point; debug mode refuses it */
    CHECK_CLOSE(kn_full(KN_SHAPE(1), 1e6, KN_F16), ((double[]){INFINITY}), tol_for(KN_F16), "f16 overflow");
    debug_checks_restore(saved);
    CHECK_ERROR(kn_full(KN_SHAPE(2), 1, (kn_dtype)42) != NULL, KN_ERR_DTYPE, "dtype");
    CHECK_ERROR(kn_zeros_like(NULL) != NULL, KN_ERR_NULL, "like");
}

static void test_arange(void) {
    static const struct { double start, end, step; } cases[] = {
        {0, 10, 1}, {2, 3, 0.25}, {5, -5, -1.5}, {0, 1, 0.1}, {-3, -3, 1}, {1, 0, -0.3},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        double s = cases[c].start, e = cases[c].end, st = cases[c].step, want[64];
        int64_t n = 0;
        while (st > 0 ? s + (double)n * st < e : s + (double)n * st > e) {
            want[n] = s + (double)n * st;
            n++;
        }
        for (int k = 0; k < 4; k++) {
            kn_tensor *t = kn_arange(s, e, st, FLOAT_DTYPES[k]);
            CHECK(t && kn_numel(t) == n);
            CHECK_CLOSE(t, want, tol_for(FLOAT_DTYPES[k]), "arange");
        }
    }
    kn_tensor *i = kn_arange(3, -4, -2, KN_I64);
    CHECK_CLOSE(i, ((double[]){3, 1, -1, -3}), tol_for(KN_I64), "integer arange, negative step");
    CHECK_ERROR(kn_arange(0, 5, 0, KN_F32) != NULL, KN_ERR_ARG, "step");
    CHECK_ERROR(kn_arange(0, 5, -1, KN_F32) != NULL, KN_ERR_ARG, "points away");
    CHECK_ERROR(kn_arange(5, 0, 1, KN_I32) != NULL, KN_ERR_ARG, "points away");
    CHECK_ERROR(kn_arange(0, INFINITY, 1, KN_F32) != NULL, KN_ERR_ARG, "finite");
}

static void test_linspace_and_eye(void) {
    static const struct { double start, end; int64_t n; } cases[] = {{0, 1, 11}, {-2.5, 7.1, 8}, {3, 3, 4}, {1, -1, 2}, {4, 9, 1}, {0, 1, 0}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        double s = cases[c].start, e = cases[c].end, want[16];
        int64_t n = cases[c].n;
        for (int64_t i = 0; i < n; i++) want[i] = n == 1 ? s : s + (e - s) * (double)i / (double)(n - 1);
        for (int k = 0; k < 4; k++) {
            kn_tensor *t = kn_linspace(s, e, n, FLOAT_DTYPES[k]);
            CHECK(t && kn_numel(t) == n);
            CHECK_CLOSE(t, want, tol_for(FLOAT_DTYPES[k]), "linspace");
        }
        if (n > 1) { /* both ends exact in f64 */
            double *g = read_f64(kn_linspace(s, e, n, KN_F64));
            CHECK(g && g[0] == s && g[n - 1] == e);
            free(g);
        }
    }
    double *g = read_f64(kn_linspace(0.1, 0.7, 7, KN_F64));
    CHECK(g && g[0] == 0.1 && g[6] == 0.7);
    free(g);
    CHECK_ERROR(kn_linspace(0, 1, -1, KN_F32) != NULL, KN_ERR_ARG, "count");
    for (int k = 0; k < KN_DTYPE_COUNT; k++) {
        double want[12];
        for (int i = 0; i < 12; i++) want[i] = i / 4 == i % 4;
        CHECK_CLOSE(kn_eye(3, 4, ALL_DTYPES[k]), want, tol_for(ALL_DTYPES[k]), "eye 3x4");
        for (int i = 0; i < 12; i++) want[i] = i / 3 == i % 3;
        CHECK_CLOSE(kn_eye(4, 3, ALL_DTYPES[k]), want, tol_for(ALL_DTYPES[k]), "eye 4x3");
    }
    CHECK(kn_numel(kn_eye(0, 3, KN_F32)) == 0);
    CHECK_ERROR(kn_eye(-1, 3, KN_F32) != NULL, KN_ERR_ARG, "rows");
}

/* ---- random ------------------------------------------------------------------------------- */
#define N_DRAW 200000

typedef kn_tensor *(*draw_fn)(kn_dtype d);
static kn_tensor *d_rand(kn_dtype d) { return kn_rand(KN_SHAPE(N_DRAW), d); }
static kn_tensor *d_uniform(kn_dtype d) { return kn_uniform(KN_SHAPE(N_DRAW), -3, 5, d); }
static kn_tensor *d_randn(kn_dtype d) { return kn_randn(KN_SHAPE(N_DRAW), d); }
static kn_tensor *d_normal(kn_dtype d) { return kn_normal(KN_SHAPE(N_DRAW), 2, 0.5, d); }
static kn_tensor *d_randint(kn_dtype d) { return kn_randint(-4, 7, KN_SHAPE(N_DRAW), d); }
static kn_tensor *d_bern_p(kn_dtype d) { return kn_bernoulli_p(KN_SHAPE(N_DRAW), 0.3, d); }
static kn_tensor *d_bern(kn_dtype d) { return kn_bernoulli(kn_full(KN_SHAPE(N_DRAW), 0.7, d)); }

typedef struct dist_case {
    const char *name;
    draw_fn draw;
    double mean, var, lo, hi; /* support [lo, hi] */
    bool integer;
} dist_case;

static const dist_case DISTS[] = {
    {"rand", d_rand, 0.5, 1.0 / 12, 0, 1, false},
    {"uniform", d_uniform, 1, 64.0 / 12, -3, 5, false},
    {"randn", d_randn, 0, 1, -HUGE_VAL, HUGE_VAL, false},
    {"normal", d_normal, 2, 0.25, -HUGE_VAL, HUGE_VAL, false},
    {"randint", d_randint, 1, (121.0 - 1) / 12, -4, 6, true},
    {"bernoulli_p", d_bern_p, 0.3, 0.21, 0, 1, true},
    {"bernoulli", d_bern, 0.7, 0.21, 0, 1, true},
};

/* Raw bytes of a draw under a seed. */
static unsigned char *draw_bytes(const dist_case *c, kn_dtype d, uint64_t seed) {
    kn_manual_seed(seed);
    kn_tensor *t = c->draw(d);
    size_t bytes = kn_dtype_size(d) * N_DRAW;
    unsigned char *buf = malloc(bytes);
    if (!t || kn_to_host(t, buf, bytes) != KN_OK) {
        free(buf);
        buf = NULL;
    }
    kn_release(t);
    return buf;
}

static kn_dtype dist_dtypes(const dist_case *c, int k) {
    static const kn_dtype ints[] = {KN_I64, KN_I32, KN_F32, KN_F64};
    return (strcmp(c->name, "randint") == 0 ? ints : FLOAT_DTYPES)[k];
}

static void test_random_is_reproducible_across_modes_and_threads(void) {
    int threads = kn_get_num_threads();
    for (size_t k = 0; k < sizeof DISTS / sizeof DISTS[0]; k++)
        for (int j = 0; j < 4; j++) {
            const dist_case *c = &DISTS[k];
            kn_dtype d = dist_dtypes(c, j);
            size_t bytes = kn_dtype_size(d) * N_DRAW;
            kn_set_num_threads(1);
            unsigned char *a = draw_bytes(c, d, 1234);
            kn_set_num_threads(2);
            unsigned char *b = draw_bytes(c, d, 1234);
            kn_mode mode = kn_get_mode();
            kn_set_mode(KN_MODE_DEBUG);
            unsigned char *dbg = draw_bytes(c, d, 1234);
            kn_set_mode(mode); /* back to $KILN_MODE's mode, not strict */
            unsigned char *other = draw_bytes(c, d, 999);
            CHECK_MSG(a && b && memcmp(a, b, bytes) == 0, "%s %s: 1 and 2 threads differ", c->name, kn_dtype_name(d));
            CHECK_MSG(a && dbg && memcmp(a, dbg, bytes) == 0, "%s %s: strict and debug differ", c->name, kn_dtype_name(d));
            CHECK_MSG(a && other && memcmp(a, other, bytes) != 0, "%s %s: seeds 1234 and 999 agree", c->name,
                      kn_dtype_name(d));
            free(a), free(b), free(dbg), free(other);
        }
    kn_set_num_threads(threads);
    /* Consecutive draws continue the stream; restoring the state repeats it. */
    kn_manual_seed(7);
    uint64_t seed, off;
    kn_rng_get_state(&seed, &off);
    double *x = read_f64(kn_rand(KN_SHAPE(64), KN_F64)), *y = read_f64(kn_rand(KN_SHAPE(64), KN_F64));
    kn_rng_set_state(seed, off);
    double *z = read_f64(kn_rand(KN_SHAPE(64), KN_F64));
    CHECK(x && y && z && memcmp(x, y, 64 * sizeof(double)) != 0 && memcmp(x, z, 64 * sizeof(double)) == 0);
    free(x), free(y), free(z);
}

static void test_random_distributions(void) {
    kn_manual_seed(test_seed());
    for (size_t k = 0; k < sizeof DISTS / sizeof DISTS[0]; k++)
        for (int j = 0; j < 4; j++) {
            const dist_case *c = &DISTS[k];
            kn_dtype d = dist_dtypes(c, j);
            kn_tensor *t = c->draw(d);
            CHECK(t && kn_dtype_of(t) == d);
            double *v = read_f64(t);
            if (!v) continue;
            double sum = 0, sq = 0, lo = HUGE_VAL, hi = -HUGE_VAL;
            bool integral = true;
            for (int i = 0; i < N_DRAW; i++) {
                sum += v[i];
                lo = fmin(lo, v[i]);
                hi = fmax(hi, v[i]);
                integral &= v[i] == floor(v[i]);
            }
            double mean = sum / N_DRAW;
            for (int i = 0; i < N_DRAW; i++) sq += (v[i] - mean) * (v[i] - mean);
            double var = sq / (N_DRAW - 1);
            /* 6 standard errors; the 16-bit formats add their rounding to the variance. */
            double se_mean = sqrt(c->var / N_DRAW), se_var = c->var * sqrt(2.0 / N_DRAW) * 2;
            double slack = d == KN_BF16 ? 0.02 * fabs(c->mean) + 0.01 : d == KN_F16 ? 0.002 : 0;
            CHECK_MSG(fabs(mean - c->mean) <= 6 * se_mean + slack, "%s %s: mean %g, expected %g", c->name, kn_dtype_name(d),
                      mean, c->mean);
            CHECK_MSG(fabs(var - c->var) <= 6 * se_var + 4 * slack, "%s %s: variance %g, expected %g", c->name,
                      kn_dtype_name(d), var, c->var);
            CHECK_MSG(lo >= c->lo && hi <= c->hi, "%s %s: values in [%g, %g], expected within [%g, %g]", c->name,
                      kn_dtype_name(d), lo, hi, c->lo, c->hi);
            if (c->integer) CHECK_MSG(integral && lo == c->lo && hi == c->hi, "%s %s: not the whole integer range", c->name, kn_dtype_name(d));
            if (strcmp(c->name, "rand") == 0 && d != KN_BF16 && d != KN_F16) CHECK_MSG(hi < 1, "rand reached 1");
            free(v);
        }
    double *b = read_f64(kn_bernoulli(tensor_from((double[]){0, 1, 0, 1}, KN_SHAPE(4), KN_F32)));
    CHECK(b && b[0] == 0 && b[1] == 1 && b[2] == 0 && b[3] == 1);
    free(b);
}

/* Draws within half a float step of high would round up to it: they stay below high. Over
 * [2^24 - 1, 2^24) half the draws are that close in f32; in f64 the span makes the top draw
 * round up. */
static void test_uniform_stays_below_high(void) {
    const double two24 = 16777216.0;
    double *f = read_f64(kn_uniform(KN_SHAPE(1000), two24 - 1, two24, KN_F32));
    CHECK(f);
    for (int i = 0; f && i < 1000; i++) CHECK_MSG(f[i] == two24 - 1, "f32 draw %d is %.17g", i, f[i]);
    free(f);
    double *d = read_f64(kn_uniform(KN_SHAPE(1000), 1.0, 1.0 + 0x1p-51, KN_F64));
    CHECK(d);
    for (int i = 0; d && i < 1000; i++) CHECK_MSG(d[i] >= 1.0 && d[i] < 1.0 + 0x1p-51, "f64 draw %d is %.17g", i, d[i]);
    free(d);
}

static void test_random_errors(void) {
    CHECK_ERROR(kn_randint(5, 5, KN_SHAPE(3), KN_I64) != NULL, KN_ERR_ARG, "low");
    CHECK_ERROR(kn_randint(6, 5, KN_SHAPE(3), KN_I64) != NULL, KN_ERR_ARG, "randint");
    CHECK_ERROR(kn_uniform(KN_SHAPE(3), 2, 1, KN_F32) != NULL, KN_ERR_ARG, "low");
    CHECK_ERROR(kn_normal(KN_SHAPE(3), 0, -1, KN_F32) != NULL, KN_ERR_ARG, "std");
    CHECK_ERROR(kn_bernoulli_p(KN_SHAPE(3), 1.5, KN_F32) != NULL, KN_ERR_ARG, "p");
    CHECK_ERROR(kn_bernoulli_p(KN_SHAPE(3), -0.1, KN_F32) != NULL, KN_ERR_ARG, "outside");
    CHECK_ERROR(kn_bernoulli_p(KN_SHAPE(3), NAN, KN_F32) != NULL, KN_ERR_ARG, "p");
    CHECK_ERROR(kn_rand(KN_SHAPE(3), KN_BOOL) != NULL, KN_ERR_UNSUPPORTED, "rand");
    CHECK_ERROR(kn_bernoulli(NULL) != NULL, KN_ERR_NULL, "bernoulli");
    CHECK_ERROR(kn_rand_like(NULL) != NULL, KN_ERR_NULL, "like");
    CHECK(kn_numel(kn_randn(KN_SHAPE(0, 3), KN_F32)) == 0);
    kn_tensor *like = kn_randn_like(kn_zeros(KN_SHAPE(2, 5), KN_F16));
    CHECK(like && kn_dtype_of(like) == KN_F16 && kn_numel(like) == 10);
}

int main(void) {
    RUN(test_fills_every_dtype);
    RUN(test_arange);
    RUN(test_linspace_and_eye);
    RUN(test_random_is_reproducible_across_modes_and_threads);
    RUN(test_random_distributions);
    RUN(test_uniform_stays_below_high);
    RUN(test_random_errors);
    return test_summary();
}
