/* Normalization ops (layer_norm, rms_norm, group_norm, batch_norm) against float64 loops. */
#include <stdlib.h>

#include "harness.h"
#include "ops/nn_backward.h"

/* The affine step rounds 3-4 times in the compute type on values up to ~4 standard
 * deviations, so f32/f64 results get 4x the elementwise tolerance. */
static tolerance norm_tol(kn_dtype d) {
    tolerance t = tol_for(d);
    if (d == KN_F32 || d == KN_F64) t.rtol *= 4, t.atol *= 4;
    return t;
}

/* Normalizes `groups` consecutive chunks of len values of x; channel c of chunk element i
 * is i / per_channel (weight/bias index), rms skips centering. */
static void ref_chunks(const double *x, double *y, int64_t chunks, int64_t len, const double *w, const double *b,
                       int64_t per_weight, int64_t weights, double eps, int rms) {
    for (int64_t r = 0; r < chunks; r++) {
        const double *xr = x + r * len;
        double mean = 0, var = 0;
        for (int64_t i = 0; i < len; i++) mean += xr[i];
        mean = rms ? 0 : mean / (double)len;
        for (int64_t i = 0; i < len; i++) var += (xr[i] - mean) * (xr[i] - mean);
        var /= (double)len;
        for (int64_t i = 0; i < len; i++) {
            int64_t c = (r * len + i) / per_weight % weights;
            y[r * len + i] = (xr[i] - mean) / sqrt(var + eps) * (w ? w[c] : 1) + (b ? b[c] : 0);
        }
    }
}

static void test_layer_norm_matches_reference(void) {
    for (int k = 0; k < 4; k++) {
        kn_dtype dt = FLOAT_DTYPES[k];
        kn_tensor *x = rand_tensor(KN_SHAPE(5, 3, 16), dt, -2, 3);
        kn_tensor *w = rand_tensor(KN_SHAPE(3, 16), dt, 0.5, 1.5), *b = rand_tensor(KN_SHAPE(3, 16), dt, -1, 1);
        double *xv = read_f64(x), *wv = read_f64(w), *bv = read_f64(b), want[240], plain[240], rms[240];
        ref_chunks(xv, want, 5, 48, wv, bv, 1, 48, 1e-5, 0);
        ref_chunks(xv, plain, 5, 48, NULL, NULL, 1, 48, 1e-5, 0);
        ref_chunks(xv, rms, 5, 48, wv, NULL, 1, 48, 1e-6, 1);
        CHECK_CLOSE(kn_layer_norm(x, KN_SHAPE(3, 16), w, b, 1e-5), want, norm_tol(dt), kn_dtype_name(dt));
        CHECK_CLOSE(kn_layer_norm(non_contiguous_copy(x), KN_SHAPE(3, 16), non_contiguous_copy(w), b, 1e-5), want,
                    norm_tol(dt), "non-contiguous");
        CHECK_CLOSE(kn_layer_norm(x, KN_SHAPE(3, 16), NULL, NULL, 1e-5), plain, norm_tol(dt), "no affine");
        CHECK_CLOSE(kn_rms_norm(x, KN_SHAPE(3, 16), w, 1e-6), rms, norm_tol(dt), "rms_norm");
        free(xv), free(wv), free(bv);
    }
}

static void test_layer_norm_wide_rows_and_large_mean(void) {
    /* values around 1000 with spread 1: a naive sum of squares in f32 would lose the variance */
    kn_tensor *x = rand_tensor(KN_SHAPE(64, 768), KN_F32, 999, 1001);
    double *xv = read_f64(x), *want = malloc(sizeof(double) * 64 * 768);
    ref_chunks(xv, want, 64, 768, NULL, NULL, 1, 768, 1e-5, 0);
    /* outputs ~1 computed from inputs ~1000: f32 rounding of x - mean costs 1000 * 6e-8 */
    CHECK_CLOSE(kn_layer_norm(x, KN_SHAPE(768), NULL, NULL, 1e-5), want, ((tolerance){2e-4, 2e-4}), "large mean");
    free(xv), free(want);
}

static void test_group_norm_matches_reference(void) {
    for (int k = 0; k < 4; k++) {
        kn_dtype dt = FLOAT_DTYPES[k];
        kn_tensor *x = rand_tensor(KN_SHAPE(2, 6, 4, 5), dt, -1, 2);
        kn_tensor *w = rand_tensor(KN_SHAPE(6), dt, 0.5, 1.5), *b = rand_tensor(KN_SHAPE(6), dt, -1, 1);
        double *xv = read_f64(x), *wv = read_f64(w), *bv = read_f64(b), want[240];
        ref_chunks(xv, want, 2 * 3, 2 * 20, wv, bv, 20, 6, 1e-5, 0);
        CHECK_CLOSE(kn_group_norm(non_contiguous_copy(x), 3, w, b, 1e-5), want, norm_tol(dt), kn_dtype_name(dt));
        ref_chunks(xv, want, 2, 120, NULL, NULL, 20, 6, 1e-5, 0);
        CHECK_CLOSE(kn_group_norm(x, 1, NULL, NULL, 1e-5), want, norm_tol(dt), "one group");
        free(xv), free(wv), free(bv);
    }
}

static void test_batch_norm_training_updates_running_stats(void) {
    for (int k = 0; k < 4; k++) {
        kn_dtype dt = FLOAT_DTYPES[k];
        int64_t N = 3, C = 4, P = 6;
        kn_tensor *x = rand_tensor(KN_SHAPE(3, 4, 2, 3), dt, -1, 3);
        kn_tensor *rm = rand_tensor(KN_SHAPE(4), dt, -0.5, 0.5), *rv = rand_tensor(KN_SHAPE(4), dt, 0.5, 2);
        kn_tensor *w = rand_tensor(KN_SHAPE(4), dt, 0.5, 1.5), *b = rand_tensor(KN_SHAPE(4), dt, -1, 1);
        double *xv = read_f64(x), *rmv = read_f64(rm), *rvv = read_f64(rv), *wv = read_f64(w), *bv = read_f64(b);
        double want[72], want_rm[4], want_rv[4], momentum = 0.1, eps = 1e-5;
        for (int64_t c = 0; c < C; c++) {
            double mean = 0, var = 0;
            for (int64_t i = 0; i < N; i++)
                for (int64_t p = 0; p < P; p++) mean += xv[(i * C + c) * P + p];
            mean /= (double)(N * P);
            for (int64_t i = 0; i < N; i++)
                for (int64_t p = 0; p < P; p++) var += pow(xv[(i * C + c) * P + p] - mean, 2);
            want_rm[c] = (1 - momentum) * rmv[c] + momentum * mean;
            want_rv[c] = (1 - momentum) * rvv[c] + momentum * var / (double)(N * P - 1);
            var /= (double)(N * P);
            for (int64_t i = 0; i < N; i++)
                for (int64_t p = 0; p < P; p++) {
                    int64_t e = (i * C + c) * P + p;
                    want[e] = (xv[e] - mean) / sqrt(var + eps) * wv[c] + bv[c];
                }
        }
        CHECK_CLOSE(kn_batch_norm(non_contiguous_copy(x), rm, rv, w, b, true, momentum, eps), want, norm_tol(dt),
                    kn_dtype_name(dt));
        CHECK_CLOSE(rm, want_rm, tol_for(dt), "running_mean");
        CHECK_CLOSE(rv, want_rv, tol_for(dt), "running_var");
        /* inference normalizes with the (now updated) running statistics */
        double *rm2 = read_f64(rm), *rv2 = read_f64(rv);
        for (int64_t e = 0; e < 72; e++) {
            int64_t c = e / P % C;
            want[e] = (xv[e] - rm2[c]) / sqrt(rv2[c] + eps) * wv[c] + bv[c];
        }
        CHECK_CLOSE(kn_batch_norm(x, rm, rv, w, b, false, momentum, eps), want, norm_tol(dt), "inference");
        CHECK_CLOSE(rm, rm2, tol_for(dt), "inference leaves running_mean");
        free(xv), free(rmv), free(rvv), free(wv), free(bv), free(rm2), free(rv2);
    }
}

static void test_batch_norm_on_a_strided_running_mean(void) {
    /* running stats that are views (every other element) are updated in place */
    kn_tensor *x = rand_tensor(KN_SHAPE(4, 2), KN_F64, -1, 1);
    kn_tensor *base = kn_zeros(KN_SHAPE(4), KN_F64), *rv = kn_ones(KN_SHAPE(2), KN_F64);
    kn_tensor *rm = kn_slice(base, 0, 0, 4, 2);
    double *xv = read_f64(x), want[4] = {0, 0, 0, 0};
    for (int c = 0; c < 2; c++) want[2 * c] = 0.5 * (xv[c] + xv[2 + c] + xv[4 + c] + xv[6 + c]) / 4;
    CHECK(kn_batch_norm(x, rm, rv, NULL, NULL, true, 0.5, 1e-5) != NULL);
    CHECK_CLOSE(base, want, tol_for(KN_F64), "strided running_mean");
    free(xv);
}

static void test_norm_errors(void) {
    kn_tensor *x = kn_zeros(KN_SHAPE(2, 4, 3), KN_F32);
    CHECK_ERROR(kn_layer_norm(x, KN_SHAPE(4), NULL, NULL, 1e-5) != NULL, KN_ERR_SHAPE, "trailing size");
    CHECK_ERROR(kn_layer_norm(x, KN_SHAPE(3), kn_zeros(KN_SHAPE(4), KN_F32), NULL, 1e-5) != NULL, KN_ERR_SHAPE,
                "weight must have normalized_shape");
    CHECK_ERROR(kn_layer_norm(x, KN_SHAPE(1, 2, 4, 3), NULL, NULL, 1e-5) != NULL, KN_ERR_SHAPE, "4 dims");
    CHECK_ERROR(kn_rms_norm(NULL, KN_SHAPE(3), NULL, 1e-5) != NULL, KN_ERR_NULL, "rms_norm");
    CHECK_ERROR(kn_group_norm(x, 3, NULL, NULL, 1e-5) != NULL, KN_ERR_ARG, "divide the 4 channels");
    CHECK_ERROR(kn_group_norm(x, 2, kn_zeros(KN_SHAPE(3), KN_F32), NULL, 1e-5) != NULL, KN_ERR_SHAPE,
                "weight must be [4]");
    CHECK_ERROR(kn_group_norm(kn_zeros(KN_SHAPE(4), KN_F32), 2, NULL, NULL, 1e-5) != NULL, KN_ERR_SHAPE, "[N, C, *]");
    CHECK_ERROR(kn_batch_norm(x, NULL, NULL, NULL, NULL, false, 0.1, 1e-5) != NULL, KN_ERR_ARG, "inference needs");
    CHECK_ERROR(kn_batch_norm(x, kn_zeros(KN_SHAPE(4), KN_F32), NULL, NULL, NULL, true, 0.1, 1e-5) != NULL,
                KN_ERR_ARG, "together");
    CHECK_ERROR(kn_batch_norm(x, kn_zeros(KN_SHAPE(3), KN_F32), kn_ones(KN_SHAPE(3), KN_F32), NULL, NULL, true, 0.1,
                              1e-5) != NULL,
                KN_ERR_SHAPE, "running_mean must be [4]");
    CHECK_ERROR(kn_batch_norm(kn_zeros(KN_SHAPE(1, 4), KN_F32), NULL, NULL, NULL, NULL, true, 0.1, 1e-5) != NULL,
                KN_ERR_SHAPE, "more than 1 value");
    CHECK_ERROR(kn_layer_norm(kn_zeros(KN_SHAPE(2, 3), KN_I32), KN_SHAPE(3), NULL, NULL, 1e-5) != NULL, KN_ERR_DTYPE,
                "i32");
}

/* The running stats are written in place: the caller's handles stay the caller's, alive and
 * owned by their scope, after the op's own scope is gone. */
static void test_batch_norm_running_stats_keep_their_owner(void) {
    kn_scope_push();
    kn_tensor *rm = kn_zeros(KN_SHAPE(3), KN_F32), *rv = kn_ones(KN_SHAPE(3), KN_F32);
    kn_scope_push();
    kn_tensor *x = rand_tensor(KN_SHAPE(4, 3), KN_F32, -1, 1);
    CHECK(kn_batch_norm(x, rm, rv, NULL, NULL, true, 0.1, 1e-5) != NULL);
    kn_scope_pop();
    double *m = read_f64(rm);
    CHECK(m != NULL && m[0] != 0);
    free(m);
    kn_scope_pop();
}

/* layer_norm_backward / rms_norm_backward (the gradient formulas' kernel) against the
 * textbook formulas: dx = rstd (gw - mean(gw) - xhat mean(gw xhat)) with gw = gy w, and the
 * row sums dweight = sum(gy xhat), dbias = sum(gy). */
static void ref_norm_backward(const double *gy, const double *x, const double *w, int64_t rows, int64_t inner,
                              double eps, int rms, double *dx, double *dw, double *db) {
    for (int64_t i = 0; i < inner; i++) dw[i] = db[i] = 0;
    for (int64_t r = 0; r < rows; r++) {
        const double *xr = x + r * inner, *gr = gy + r * inner;
        double mean = 0, var = 0, a = 0, b = 0;
        for (int64_t i = 0; i < inner; i++) mean += xr[i];
        mean = rms ? 0 : mean / (double)inner;
        for (int64_t i = 0; i < inner; i++) var += (xr[i] - mean) * (xr[i] - mean);
        double rstd = 1 / sqrt(var / (double)inner + eps);
        for (int64_t i = 0; i < inner; i++) {
            double xh = (xr[i] - mean) * rstd;
            a += gr[i] * w[i], b += gr[i] * w[i] * xh;
            dw[i] += gr[i] * xh, db[i] += gr[i];
        }
        a = rms ? 0 : a / (double)inner, b /= (double)inner;
        for (int64_t i = 0; i < inner; i++) dx[r * inner + i] = rstd * (gr[i] * w[i] - a - (xr[i] - mean) * rstd * b);
    }
}

static void test_norm_backward_matches_reference(void) {
    /* [5, 48] in every dtype; [96, 768] f32 runs on several threads (per-thread row sums) */
    int64_t shapes[2][2] = {{5, 48}, {96, 768}};
    for (int si = 0; si < 2; si++)
        for (int k = 0; k < (si ? 1 : 4); k++)
            for (int rms = 0; rms < 2; rms++) {
                kn_dtype dt = si ? KN_F32 : FLOAT_DTYPES[k];
                int64_t rows = shapes[si][0], inner = shapes[si][1], n = rows * inner;
                kn_tensor *x = rand_tensor(KN_SHAPE(rows, inner), dt, -2, 3), *gy = rand_tensor(KN_SHAPE(rows, inner), dt, -1, 1);
                kn_tensor *w = rand_tensor(KN_SHAPE(inner), dt, 0.5, 1.5), *dx = NULL, *dw = NULL, *db = NULL;
                double *xv = read_f64(x), *gv = read_f64(gy), *wv = read_f64(w);
                double *want = malloc(sizeof(double) * (size_t)(n + 2 * inner));
                ref_norm_backward(gv, xv, wv, rows, inner, 1e-5, rms, want, want + n, want + n + inner);
                CHECK(kn_norm_backward(non_contiguous_copy(gy), x, w, inner, 1e-5, rms, &dx, &dw, rms ? NULL : &db) == KN_OK);
                /* dx cancels two means of ~inner terms; the weight sums add rows terms */
                tolerance t = norm_tol(dt), tw = t;
                t.rtol *= 4, t.atol *= 4, tw.rtol *= (double)rows / 4 + 1, tw.atol *= (double)rows / 4 + 1;
                CHECK_CLOSE(dx, want, t, rms ? "rms dx" : "dx");
                CHECK_CLOSE(dw, want + n, tw, rms ? "rms dweight" : "dweight");
                if (!rms) CHECK_CLOSE(db, want + n + inner, tw, "dbias");
                CHECK(kn_dtype_of(dx) == dt && kn_dtype_of(dw) == dt);
                free(xv), free(gv), free(wv), free(want);
            }
    kn_tensor *x = kn_zeros(KN_SHAPE(2, 6), KN_F32), *dx = NULL;
    CHECK_ERROR(kn_norm_backward(kn_zeros(KN_SHAPE(2, 5), KN_F32), x, NULL, 6, 1e-5, false, &dx, NULL, NULL) == KN_OK,
                KN_ERR_SHAPE, "same size");
}

/* batch_norm_backward (batch_norm's gradient kernel) against the textbook formulas per
 * channel over (N, inner): training dx = rstd w (gy - mean(gy) - xhat mean(gy xhat)) with the
 * batch statistics, inference dx = gy w rstd with the running ones (rm, rv; NULL in
 * training); dweight = sum(gy xhat), dbias = sum(gy). */
static void ref_batch_norm_backward(const double *gy, const double *x, const double *w, const double *rm,
                                    const double *rv, int64_t N, int64_t C, int64_t inner, double eps, double *dx,
                                    double *dw, double *db) {
    for (int64_t c = 0; c < C; c++) {
        double count = (double)(N * inner), mean = 0, var = 0, sg = 0, sgx = 0;
        for (int64_t n = 0; n < N; n++)
            for (int64_t i = 0; i < inner; i++) mean += x[(n * C + c) * inner + i] / count;
        for (int64_t n = 0; n < N; n++)
            for (int64_t i = 0; i < inner; i++) var += pow(x[(n * C + c) * inner + i] - mean, 2) / count;
        if (rm) mean = rm[c], var = rv[c];
        double rstd = 1 / sqrt(var + eps);
        for (int64_t n = 0; n < N; n++)
            for (int64_t i = 0; i < inner; i++) {
                int64_t e = (n * C + c) * inner + i;
                sg += gy[e], sgx += gy[e] * (x[e] - mean) * rstd;
            }
        dw[c] = sgx, db[c] = sg;
        for (int64_t n = 0; n < N; n++)
            for (int64_t i = 0; i < inner; i++) {
                int64_t e = (n * C + c) * inner + i;
                double xh = (x[e] - mean) * rstd;
                dx[e] = rstd * w[c] * (rm ? gy[e] : gy[e] - sg / count - xh * sgx / count);
            }
    }
}

static void test_batch_norm_backward_matches_reference(void) {
    /* odd sizes, N = 1, inner = 1 (x [N, C]), C = 1; the last, f32 only, runs on several
     * threads (channels split among them) */
    kn_shape shapes[] = {KN_SHAPE(3, 5, 7), KN_SHAPE(1, 4, 3, 5), KN_SHAPE(6, 3), KN_SHAPE(4, 1, 9),
                         KN_SHAPE(8, 16, 24, 24)};
    for (int si = 0; si < 5; si++)
        for (int k = 0; k < (si == 4 ? 1 : 4); k++)
            for (int mode = 0; mode < 3; mode++) { /* training with weight, without, inference */
                kn_dtype dt = si == 4 ? KN_F32 : FLOAT_DTYPES[k];
                kn_shape xs = shapes[si];
                int64_t N = xs.v[0], C = xs.v[1], n = kn_shape_numel(xs), inner = n / (N * C);
                kn_tensor *x = rand_tensor(xs, dt, -2, 3), *gy = rand_tensor(xs, dt, -1, 1);
                kn_tensor *w = mode == 1 ? NULL : rand_tensor(KN_SHAPE(C), dt, 0.5, 1.5);
                kn_tensor *rm = mode == 2 ? rand_tensor(KN_SHAPE(C), dt, -0.5, 0.5) : NULL;
                kn_tensor *rv = mode == 2 ? rand_tensor(KN_SHAPE(C), dt, 0.5, 2) : NULL;
                kn_tensor *dx = NULL, *dw = NULL, *db = NULL;
                double *xv = read_f64(x), *gv = read_f64(gy), *wv = w ? read_f64(w) : NULL;
                double *rmv = rm ? read_f64(rm) : NULL, *rvv = rv ? read_f64(rv) : NULL, ones[16];
                double *want = malloc(sizeof(double) * (size_t)(n + 2 * C));
                for (int c = 0; c < 16; c++) ones[c] = 1;
                ref_batch_norm_backward(gv, xv, wv ? wv : ones, rmv, rvv, N, C, inner, 1e-5, want, want + n,
                                        want + n + C);
                CHECK(kn_batch_norm_backward(non_contiguous_copy(gy), x, w, rm, rv, mode != 2, 1e-5, &dx, &dw, &db) ==
                      KN_OK);
                /* dx cancels two means of the channel's values; the sums accumulate in double
                 * and round once */
                tolerance t = norm_tol(dt);
                t.rtol *= 4, t.atol *= 4;
                const char *what[] = {"training", "no weight", "inference"};
                CHECK_CLOSE(dx, want, t, what[mode]);
                CHECK_CLOSE(dw, want + n, norm_tol(dt), "dweight");
                CHECK_CLOSE(db, want + n + C, norm_tol(dt), "dbias");
                CHECK(kn_dtype_of(dx) == dt && kn_dtype_of(dw) == dt && kn_dtype_of(db) == dt);
                free(xv), free(gv), free(wv), free(rmv), free(rvv), free(want);
            }
}

static void test_batch_norm_backward_errors(void) {
    kn_tensor *x = kn_zeros(KN_SHAPE(2, 4, 3), KN_F32), *v = kn_ones(KN_SHAPE(4), KN_F32), *dx = NULL;
    CHECK_ERROR(kn_batch_norm_backward(kn_zeros(KN_SHAPE(2, 4, 2), KN_F32), x, NULL, NULL, NULL, true, 1e-5, &dx, NULL,
                                       NULL) == KN_OK,
                KN_ERR_SHAPE, "of one shape");
    CHECK_ERROR(kn_batch_norm_backward(x, x, kn_ones(KN_SHAPE(3), KN_F32), NULL, NULL, true, 1e-5, &dx, NULL, NULL) ==
                    KN_OK,
                KN_ERR_SHAPE, "weight must be [4]");
    CHECK_ERROR(kn_batch_norm_backward(x, x, NULL, NULL, NULL, false, 1e-5, &dx, NULL, NULL) == KN_OK, KN_ERR_ARG,
                "both are required");
    CHECK_ERROR(kn_batch_norm_backward(x, x, NULL, v, v, true, 1e-5, &dx, NULL, NULL) == KN_OK, KN_ERR_ARG,
                "for inference");
}

int main(void) {
    RUN(test_batch_norm_running_stats_keep_their_owner);
    RUN(test_layer_norm_matches_reference);
    RUN(test_layer_norm_wide_rows_and_large_mean);
    RUN(test_group_norm_matches_reference);
    RUN(test_batch_norm_training_updates_running_stats);
    RUN(test_batch_norm_on_a_strided_running_mean);
    RUN(test_norm_errors);
    RUN(test_norm_backward_matches_reference);
    RUN(test_batch_norm_backward_matches_reference);
    RUN(test_batch_norm_backward_errors);
    return test_summary();
}
