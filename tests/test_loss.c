/* Losses and dropout against float64 references written here as naive loops; the gradient of
 * the class-index losses (cross_entropy_backward) against central differences of them. */
#include <stdlib.h>
#include <string.h>

#include "core/philox.h"
#include "harness.h"

static const tolerance EXACT = {0, 0};
static const kn_reduction REDUCTIONS[3] = {KN_REDUCTION_MEAN, KN_REDUCTION_SUM, KN_REDUCTION_NONE};

/* Reduces per-position losses like PyTorch: mean divides by the summed weights `den`. */
static void reduce_ref(const double *per, const double *den, int64_t P, kn_reduction r, double *out) {
    if (r == KN_REDUCTION_NONE) {
        memcpy(out, per, sizeof(double) * (size_t)P);
        return;
    }
    double s = 0, d = 0;
    for (int64_t p = 0; p < P; p++) s += per[p], d += den[p];
    out[0] = r == KN_REDUCTION_SUM ? s : s / d;
}

/* Class-index or probability cross-entropy over x [N, C, S] (S: spatial positions). */
static void ce_ref(const double *x, int64_t N, int64_t C, int64_t S, const double *t, bool probs, const double *w,
                   int64_t ignore, double eps, bool log_given, kn_reduction r, double *out) {
    int64_t P = N * S;
    double *per = calloc((size_t)P + 1, sizeof(double)), *den = calloc((size_t)P + 1, sizeof(double));
    double *logp = malloc(sizeof(double) * (size_t)C);
    for (int64_t n = 0; n < N; n++)
        for (int64_t s = 0; s < S; s++) {
            int64_t p = n * S + s;
            double mx = -INFINITY, sum = 0;
            for (int64_t c = 0; c < C; c++) mx = fmax(mx, x[(n * C + c) * S + s]);
            for (int64_t c = 0; c < C; c++) sum += exp(x[(n * C + c) * S + s] - mx);
            for (int64_t c = 0; c < C; c++) logp[c] = x[(n * C + c) * S + s] - (log_given ? 0 : mx + log(sum));
            if (probs) {
                double acc = 0;
                for (int64_t c = 0; c < C; c++)
                    acc += (w ? w[c] : 1) * (t[(n * C + c) * S + s] * (1 - eps) + eps / (double)C) * logp[c];
                per[p] = -acc, den[p] = 1;
                continue;
            }
            int64_t tc = (int64_t)t[p];
            if (tc == ignore) continue;
            double smooth = 0;
            for (int64_t c = 0; c < C; c++) smooth -= (w ? w[c] : 1) * logp[c];
            per[p] = (1 - eps) * -(w ? w[tc] : 1) * logp[tc] + eps / (double)C * smooth;
            den[p] = w ? w[tc] : 1;
        }
    reduce_ref(per, den, P, r, out);
    free(per), free(den), free(logp);
}

/* Random class targets in [0, C), about a fifth of them set to `ignore` but never the first:
 * a mean over no targets is 0/0, whose gradient the finite differences cannot check. */
static kn_tensor *rand_targets(kn_shape shape, int64_t C, int64_t ignore, kn_dtype dt, double **values) {
    int64_t n = kn_shape_numel(shape);
    double *v = malloc(sizeof(double) * (size_t)(n + 1)), *u = malloc(sizeof(double) * (size_t)(n + 1));
    rand_fill(v, n, 0, (double)C);
    rand_fill(u, n, 0, 1);
    for (int64_t i = 0; i < n; i++) v[i] = i > 0 && u[i] < 0.2 ? (double)ignore : floor(v[i]);
    if (n && v[0] == (double)ignore) v[0] = (double)((ignore + 1) % C); /* ignore may be a class */
    free(u);
    *values = v;
    return tensor_from(v, shape, dt);
}

/* d/dx of sum(loss * seed), computed by cross_entropy_backward, against central differences
 * of ce_ref at the same (rounded) values. */
static void check_ce_grad(kn_tensor *x, double *xv, kn_tensor *t, const double *tv, const double *wv, int64_t N,
                          int64_t C, int64_t S, kn_ce_opts o, bool nll, const char *what) {
    kn_scope_push();
    kn_dtype dt = kn_dtype_of(x);
    kn_tensor *leaf = kn_requires_grad(kn_detach(x), true);
    kn_tensor *got = nll ? kn_nll_loss(leaf, t, o) : kn_cross_entropy(leaf, t, o);
    kn_tensor *seed = rand_tensor(kn_shape_of(got), dt, -1, 1);
    double *sv = read_f64(seed), *loss = malloc(sizeof(double) * (size_t)(N * S + 1));
    int64_t n = kn_numel(x), outs = kn_numel(got);
    double *want = malloc(sizeof(double) * (size_t)n);
    for (int64_t j = 0; j < n; j++) {
        double keep = xv[j], sum[2] = {0, 0};
        for (int side = 0; side < 2; side++) {
            xv[j] = keep + (side ? -1e-6 : 1e-6);
            ce_ref(xv, N, C, S, tv, false, wv, o.ignore_index, o.label_smoothing, nll, o.reduction, loss);
            for (int64_t i = 0; i < outs; i++) sum[side] += loss[i] * sv[i];
        }
        xv[j] = keep;
        want[j] = (sum[0] - sum[1]) / 2e-6;
    }
    CHECK(kn_backward_ex(got, seed, false) == KN_OK);
    kn_tensor *g = kn_grad(leaf);
    CHECK(g && kn_dtype_of(g) == dt);
    tolerance tol = tol_for(dt);
    if (dt == KN_F64) tol = (tolerance){1e-7, 1e-8}; /* the differences' own error */
    if (dt == KN_F32) tol.rtol *= 4, tol.atol *= 4;
    char name[160];
    snprintf(name, sizeof name, "gradient of %s", what);
    CHECK_CLOSE(g, want, tol, name);
    free(sv), free(loss), free(want);
    kn_scope_pop();
}

static void check_ce_case(kn_dtype dt, int64_t N, int64_t C, int64_t S, bool weighted, double eps, int64_t ignore,
                          bool nll, bool noncontig) {
    kn_shape xs = S > 1 ? KN_SHAPE(N, C, S) : KN_SHAPE(N, C), ts = S > 1 ? KN_SHAPE(N, S) : KN_SHAPE(N);
    kn_tensor *x = rand_tensor(xs, dt, -4, 4);
    if (noncontig) x = non_contiguous_copy(x);
    double *xv = read_f64(x), *tv;
    kn_tensor *t = rand_targets(ts, C, ignore, N % 2 ? KN_I32 : KN_I64, &tv);
    kn_tensor *w = weighted ? rand_tensor(KN_SHAPE(C), dt, 0.2, 2) : NULL;
    double *wv = w ? read_f64(w) : NULL;
    double *want = malloc(sizeof(double) * (size_t)(N * S + 1));
    for (int r = 0; r < 3; r++) {
        kn_ce_opts o = {.reduction = REDUCTIONS[r], .ignore_index = ignore, .label_smoothing = eps, .weight = w};
        kn_tensor *got = nll ? kn_nll_loss(x, t, o) : kn_cross_entropy(x, t, o);
        ce_ref(xv, N, C, S, tv, false, wv, ignore, eps, nll, REDUCTIONS[r], want);
        char what[128];
        snprintf(what, sizeof what, "%s %s C=%lld S=%lld w=%d eps=%g red=%d", nll ? "nll" : "ce", kn_dtype_name(dt),
                 (long long)C, (long long)S, weighted, eps, r);
        /* Sums of many positions round once from double, but a 16-bit logit row of C entries
         * feeds an f32 log-sum-exp; C up to 50k needs a wider f32 bound. */
        tolerance tol = tol_for(dt);
        if (dt == KN_F32) tol.rtol *= 4, tol.atol *= 4;
        CHECK_CLOSE(got, want, tol, what);
        if (N * C * S <= 200) check_ce_grad(x, xv, t, tv, wv, N, C, S, o, nll, what);
    }
    free(xv), free(tv), free(wv), free(want);
}

static void test_cross_entropy_class_indices(void) {
    for (int k = 0; k < 4; k++) {
        kn_dtype dt = FLOAT_DTYPES[k];
        check_ce_case(dt, 7, 5, 1, false, 0, -100, false, false);
        check_ce_case(dt, 8, 6, 1, true, 0, -100, false, false);
        check_ce_case(dt, 6, 5, 1, true, 0.1, -100, false, false);
        check_ce_case(dt, 5, 4, 1, false, 0.25, 2, false, true);
        check_ce_case(dt, 3, 4, 6, true, 0.1, -100, false, false);
    }
}

static void test_cross_entropy_large_vocab(void) { check_ce_case(KN_F32, 4, 50257, 1, false, 0.1, -100, false, false); }

static void test_nll_loss(void) {
    for (int k = 0; k < 4; k++) {
        check_ce_case(FLOAT_DTYPES[k], 9, 5, 1, true, 0, -100, true, false);
        check_ce_case(FLOAT_DTYPES[k], 3, 4, 5, false, 0, 1, true, true);
    }
}

static void test_cross_entropy_probabilities(void) {
    for (int k = 0; k < 4; k++) {
        kn_dtype dt = FLOAT_DTYPES[k];
        for (int spatial = 0; spatial < 2; spatial++) {
            int64_t N = 4, C = 5, S = spatial ? 3 : 1;
            kn_shape xs = spatial ? KN_SHAPE(N, C, S) : KN_SHAPE(N, C);
            kn_tensor *x = rand_tensor(xs, dt, -3, 3), *t = rand_tensor(xs, dt, 0, 1);
            kn_tensor *w = rand_tensor(KN_SHAPE(C), KN_F32, 0.5, 1.5);
            double *xv = read_f64(x), *tv = read_f64(t), *wv = read_f64(w), want[16];
            for (int r = 0; r < 3; r++) {
                kn_ce_opts o = {.reduction = REDUCTIONS[r], .ignore_index = -100, .label_smoothing = 0.2, .weight = w};
                ce_ref(xv, N, C, S, tv, true, wv, -100, 0.2, false, REDUCTIONS[r], want);
                CHECK_CLOSE(kn_cross_entropy(x, t, o), want, tol_for(dt), "probability targets");
            }
            free(xv), free(tv), free(wv);
        }
    }
}

static void test_cross_entropy_errors(void) {
    kn_tensor *x = rand_tensor(KN_SHAPE(3, 4), KN_F32, -1, 1);
    double bad[3] = {0, 4, 1}, ok[3] = {0, 1, 2};
    kn_tensor *t_bad = tensor_from(bad, KN_SHAPE(3), KN_I64), *t = tensor_from(ok, KN_SHAPE(3), KN_I64);
    /* Strict mode reports the bad target at the next sync; debug mode, which reports it at
     * the call, is checked next. */
    kn_mode saved = debug_checks_off();
    CHECK(kn_cross_entropy(x, t_bad, KN_CE_OPTS_DEFAULT) != NULL);
    CHECK_ERROR(kn_sync() == KN_OK, KN_ERR_INDEX, "target 4 at position 1 is out of range for 4 classes");
    kn_set_mode(KN_MODE_DEBUG);
    CHECK_ERROR(kn_nll_loss(x, t_bad, KN_CE_OPTS_DEFAULT) != NULL, KN_ERR_INDEX, "out of range");
    debug_checks_restore(saved); /* back to $KILN_MODE's mode, not strict */
    kn_tensor *t2 = tensor_from(ok, KN_SHAPE(3, 1), KN_I64);
    CHECK_ERROR(kn_cross_entropy(x, t2, KN_CE_OPTS_DEFAULT) != NULL, KN_ERR_SHAPE, "target must have shape");
    kn_ce_opts o = KN_CE_OPTS_DEFAULT;
    o.weight = kn_ones(KN_SHAPE(5), KN_F32);
    CHECK_ERROR(kn_cross_entropy(x, t, o) != NULL, KN_ERR_SHAPE, "weight must have shape [4]");
    o = KN_CE_OPTS_DEFAULT;
    o.label_smoothing = 1.5;
    CHECK_ERROR(kn_cross_entropy(x, t, o) != NULL, KN_ERR_ARG, "label_smoothing");
    o.label_smoothing = 0.1;
    CHECK_ERROR(kn_nll_loss(x, t, o) != NULL, KN_ERR_ARG, "no label smoothing");
    o = KN_CE_OPTS_DEFAULT;
    o.reduction = (kn_reduction)7;
    CHECK_ERROR(kn_cross_entropy(x, t, o) != NULL, KN_ERR_ARG, "reduction 7");
    CHECK_ERROR(kn_cross_entropy(kn_cast(x, KN_I32), t, KN_CE_OPTS_DEFAULT) != NULL, KN_ERR_DTYPE, "float");
    CHECK_ERROR(kn_nll_loss(x, x, KN_CE_OPTS_DEFAULT) != NULL, KN_ERR_DTYPE, "class indices");
    CHECK_ERROR(kn_cross_entropy(x, kn_cast(t, KN_BOOL), KN_CE_OPTS_DEFAULT) != NULL, KN_ERR_DTYPE, "bool");
    CHECK_ERROR(kn_cross_entropy(kn_scalar(1, KN_F32), t, KN_CE_OPTS_DEFAULT) != NULL, KN_ERR_SHAPE, "class dim");
    CHECK_ERROR(kn_cross_entropy(NULL, t, KN_CE_OPTS_DEFAULT) != NULL, KN_ERR_NULL, "cross_entropy");
}

/* ---- pointwise losses ---- */

typedef enum { MSE, L1, SMOOTH, BCE, BCE_LOGITS } pw_kind;

static double pw_ref(pw_kind k, double x, double y, double w, double pw, double beta) {
    double d = fabs(x - y);
    switch (k) {
    case MSE: return (x - y) * (x - y);
    case L1: return d;
    case SMOOTH: return d < beta ? 0.5 * d * d / beta : d - 0.5 * beta;
    case BCE: return -w * (y * fmax(log(x), -100) + (1 - y) * fmax(log(1 - x), -100));
    default: {
        double sig = 1 / (1 + exp(-x));
        return w * -(pw * y * log(sig) + (1 - y) * log(1 - sig));
    }
    }
}

static kn_tensor *pw_call(pw_kind k, kn_tensor *x, kn_tensor *y, kn_tensor *w, kn_tensor *pw, kn_reduction r,
                          double beta) {
    switch (k) {
    case MSE: return kn_mse_loss(x, y, r);
    case L1: return kn_l1_loss(x, y, r);
    case SMOOTH: return kn_smooth_l1_loss(x, y, r, beta);
    case BCE: return kn_bce_loss(x, y, w, r);
    default: return kn_bce_with_logits(x, y, w, pw, r);
    }
}

/* Inputs large enough to be split into several chunks of the thread pool, with two bad
 * entries in different chunks: whichever chunk runs first (on the calling thread or a
 * worker), the error reaches the caller and names the first bad position. */
static void test_errors_found_by_any_chunk_reach_the_caller(void) {
    int threads = kn_get_num_threads();
    kn_set_num_threads(2);
    enum { N = 512, C = 256, COUNT = 4 * 16384 };
    double *target = calloc(N, sizeof(double)), *p = malloc(sizeof(double) * COUNT);
    for (int i = 0; i < N; i++) target[i] = i % C;
    target[300] = 999, target[450] = -5;
    kn_tensor *x = rand_tensor(KN_SHAPE(N, C), KN_F32, -1, 1), *t = tensor_from(target, KN_SHAPE(N), KN_I64);
    rand_fill(p, COUNT, 0.1, 0.9);
    p[40000] = 1.5, p[60000] = -0.5;
    kn_tensor *pt = tensor_from(p, KN_SHAPE(COUNT), KN_F32), *yt = rand_tensor(KN_SHAPE(COUNT), KN_F32, 0, 1);
    kn_mode saved = debug_checks_off(); /* strict mode's report at the next sync */
    for (int round = 0; round < 4; round++) {
        CHECK(kn_cross_entropy(x, t, KN_CE_OPTS_DEFAULT) != NULL);
        CHECK_ERROR(kn_sync() == KN_OK, KN_ERR_INDEX, "target 999 at position 300 is out of range for 256 classes");
        CHECK(kn_bce_loss(pt, yt, NULL, KN_REDUCTION_SUM) != NULL);
        CHECK_ERROR(kn_sync() == KN_OK, KN_ERR_ARG, "[0, 1]");
    }
    debug_checks_restore(saved);
    kn_set_num_threads(threads);
    free(target), free(p);
}

static void test_pointwise_losses(void) {
    const int64_t N = 37, C = 23;
    for (int k = 0; k < 4; k++) {
        kn_dtype dt = FLOAT_DTYPES[k];
        for (int kind = MSE; kind <= BCE_LOGITS; kind++) {
            bool prob = kind == BCE;
            kn_tensor *x = rand_tensor(KN_SHAPE(N, C), dt, prob ? 0.01 : -3, prob ? 0.99 : 3);
            kn_tensor *xn = non_contiguous_copy(x);
            /* target broadcast along dim 0 for the distances; full shape for the BCEs */
            kn_tensor *y = kind >= BCE ? rand_tensor(KN_SHAPE(N, C), dt, 0, 1) : rand_tensor(KN_SHAPE(C), dt, -3, 3);
            kn_tensor *w = kind >= BCE ? rand_tensor(KN_SHAPE(N, 1), dt, 0.5, 2) : NULL;
            kn_tensor *pw = kind == BCE_LOGITS ? rand_tensor(KN_SHAPE(C), KN_F32, 0.5, 3) : NULL;
            double *xv = read_f64(x), *yv = read_f64(y), *wv = w ? read_f64(w) : NULL, *pv = pw ? read_f64(pw) : NULL;
            static const double betas[3] = {1.0, 0.5, 0.0};
            for (int bi = 0; bi < (kind == SMOOTH ? 3 : 1); bi++) {
                double beta = betas[bi], *per = malloc(sizeof(double) * N * C), *ones = malloc(sizeof(double) * N * C);
                for (int64_t i = 0; i < N * C; i++) {
                    int64_t n = i / C, c = i % C;
                    per[i] = pw_ref(kind, xv[i], yv[kind >= BCE ? i : c], wv ? wv[n] : 1, pv ? pv[c] : 1, beta);
                    ones[i] = 1;
                }
                for (int r = 0; r < 3; r++) {
                    double want[N * C];
                    reduce_ref(per, ones, N * C, REDUCTIONS[r], want);
                    char what[96];
                    snprintf(what, sizeof what, "loss %d %s red %d beta %g", kind, kn_dtype_name(dt), r, beta);
                    kn_dtype got_dt = pw && dt != KN_F64 ? kn_promote_types(dt, KN_F32) : dt;
                    tolerance tol = tol_for(got_dt == KN_F32 && dt != KN_F32 ? dt : got_dt);
                    CHECK_CLOSE(pw_call(kind, x, y, w, pw, REDUCTIONS[r], beta), want, tol, what);
                    CHECK_CLOSE(pw_call(kind, xn, y, w, pw, REDUCTIONS[r], beta), want, tol, what);
                }
                free(per), free(ones);
            }
            free(xv), free(yv), free(wv), free(pv);
        }
    }
}

static void test_bce_clamps_log_and_rejects_bad_probabilities(void) {
    double p[4] = {0, 1, 0, 1}, y[4] = {0, 1, 1, 0};
    kn_tensor *pt = tensor_from(p, KN_SHAPE(4), KN_F32), *yt = tensor_from(y, KN_SHAPE(4), KN_F32);
    double want[4] = {0, 0, 100, 100};
    CHECK_CLOSE(kn_bce_loss(pt, yt, NULL, KN_REDUCTION_NONE), want, tol_for(KN_F32), "clamped at -100");
    double bad[4] = {0.5, 1.5, 0.2, 0.1};
    kn_mode saved = debug_checks_off(); /* strict mode's report at the next sync; debug mode reports at the call */
    CHECK(kn_bce_loss(tensor_from(bad, KN_SHAPE(4), KN_F32), yt, NULL, KN_REDUCTION_MEAN) != NULL);
    CHECK_ERROR(kn_sync() == KN_OK, KN_ERR_ARG, "[0, 1]");
    debug_checks_restore(saved);
    CHECK_ERROR(kn_mse_loss(pt, kn_ones(KN_SHAPE(3), KN_F32), KN_REDUCTION_MEAN) != NULL, KN_ERR_SHAPE, "broadcast");
    CHECK_ERROR(kn_l1_loss(kn_cast(pt, KN_I64), yt, KN_REDUCTION_MEAN) != NULL, KN_ERR_DTYPE, "l1_loss");
    CHECK_ERROR(kn_smooth_l1_loss(pt, yt, KN_REDUCTION_MEAN, -1) != NULL, KN_ERR_ARG, "beta");
    CHECK_ERROR(kn_bce_loss(pt, yt, kn_ones(KN_SHAPE(3), KN_F32), KN_REDUCTION_MEAN) != NULL, KN_ERR_SHAPE, "weight");
    CHECK_ERROR(kn_mse_loss(pt, yt, (kn_reduction)-1) != NULL, KN_ERR_ARG, "reduction");
    /* empty means are NaN, empty sums 0 */
    kn_tensor *e = kn_zeros(KN_SHAPE(0, 3), KN_F32);
    double nan_v = NAN, zero = 0;
    saved = debug_checks_off(); /* the NaN is the point; debug mode refuses NaN from finite inputs */
    CHECK_CLOSE(kn_mse_loss(e, e, KN_REDUCTION_MEAN), &nan_v, tol_for(KN_F32), "empty mean");
    debug_checks_restore(saved);
    CHECK_CLOSE(kn_mse_loss(e, e, KN_REDUCTION_SUM), &zero, tol_for(KN_F32), "empty sum");
}

/* ---- dropout ---- */

static void test_dropout_statistics_and_scale(void) {
    const int64_t n = 100000;
    const double p = 0.3;
    for (int k = 0; k < 4; k++) {
        kn_dtype dt = FLOAT_DTYPES[k];
        kn_tensor *x = rand_tensor(KN_SHAPE(n), dt, 1, 2);
        uint64_t seed, off;
        kn_manual_seed(1234 + (uint64_t)k);
        kn_rng_get_state(&seed, &off);
        kn_tensor *y = kn_dropout(x, p, true);
        double *xv = read_f64(x), *yv = read_f64(y), *want = malloc(sizeof(double) * n);
        int64_t zeros = 0;
        for (int64_t i = 0; i < n; i++) {
            bool keep = kn_philox(seed, off + (uint64_t)i / 4).v[i % 4] >= (uint64_t)(p * 4294967296.0);
            want[i] = keep ? xv[i] / (1 - p) : 0;
            zeros += yv[i] == 0;
        }
        CHECK_CLOSE(y, want, tol_for(dt), "dropout values");
        CHECK_MSG(fabs((double)zeros / n - p) < 0.01, "fraction zeroed %g, expected about %g", (double)zeros / n, p);
        free(xv), free(yv), free(want);
    }
}

static void test_dropout_is_deterministic_across_modes_and_layouts(void) {
    kn_tensor *x = rand_tensor(KN_SHAPE(13, 17), KN_F32, -1, 1);
    kn_manual_seed(7);
    double *a = read_f64(kn_dropout(x, 0.5, true));
    kn_manual_seed(7);
    kn_mode mode = kn_get_mode();
    kn_set_mode(KN_MODE_DEBUG);
    CHECK_CLOSE(kn_dropout(x, 0.5, true), a, EXACT, "debug mode");
    kn_set_mode(mode); /* back to $KILN_MODE's mode, not strict */
    kn_manual_seed(7);
    CHECK_CLOSE(kn_dropout(non_contiguous_copy(x), 0.5, true), a, EXACT, "non-contiguous");
    kn_tensor *other = kn_dropout(x, 0.5, true); /* the generator moved on: another mask */
    double *b = read_f64(other);
    int same = 0;
    for (int i = 0; i < 13 * 17; i++) same += a[i] == b[i];
    CHECK(same < 13 * 17);
    free(a), free(b);
    double *xv = read_f64(x), zeros[13 * 17] = {0};
    kn_tensor *eval = kn_dropout(x, 0.5, false);
    CHECK(eval && eval != x && kn_shares_storage(eval, x));
    CHECK_CLOSE(eval, xv, EXACT, "not training");
    CHECK_CLOSE(kn_dropout(x, 0, true), xv, EXACT, "p = 0");
    CHECK_CLOSE(kn_dropout(x, 1, true), zeros, EXACT, "p = 1");
    CHECK_CLOSE(kn_dropout(kn_zeros(KN_SHAPE(0), KN_F32), 0.5, true), zeros, EXACT, "empty");
    free(xv);
    CHECK_ERROR(kn_dropout(x, 1.5, true) != NULL, KN_ERR_ARG, "outside [0, 1]");
    CHECK_ERROR(kn_dropout(x, -0.1, false) != NULL, KN_ERR_ARG, "outside [0, 1]");
    CHECK_ERROR(kn_dropout(kn_cast(x, KN_I32), 0.5, true) != NULL, KN_ERR_DTYPE, "dropout");
}

int main(void) {
    RUN(test_cross_entropy_class_indices);
    RUN(test_cross_entropy_large_vocab);
    RUN(test_nll_loss);
    RUN(test_cross_entropy_probabilities);
    RUN(test_cross_entropy_errors);
    RUN(test_errors_found_by_any_chunk_reach_the_caller);
    RUN(test_pointwise_losses);
    RUN(test_bce_clamps_log_and_rejects_bad_probabilities);
    RUN(test_dropout_statistics_and_scale);
    RUN(test_dropout_is_deterministic_across_modes_and_layouts);
    return test_summary();
}
