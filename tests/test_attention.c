/* scaled_dot_product_attention against a naive full-matrix float64 reference; its backward
 * (scaled_dot_product_attention_backward) against central differences of that reference. */
#include <stdlib.h>

#include "core/philox.h"
#include "harness.h"

typedef struct attn_case {
    int64_t B, H, Hkv, Tq, Tk, D, Dv;
    bool causal;
    int mask; /* 0 none, 1 bool [Tq, Tk], 2 float [B, 1, Tq, Tk] */
    double scale, dropout_p;
    bool transposed; /* q, k, v as transposed views of [B, T, H, D] tensors */
} attn_case;

/* out[b, h, i, :] = sum_j softmax_j(scale q.k + mask) v_j; NaN when no key is allowed. */
static void attention_ref(const attn_case *c, const double *q, const double *k, const double *v, const double *m,
                          kn_shape mshape, uint64_t seed, uint64_t off, double *out) {
    double scale = c->scale ? c->scale : 1 / sqrt((double)c->D);
    double *s = malloc(sizeof(double) * (size_t)c->Tk);
    for (int64_t b = 0; b < c->B; b++)
        for (int64_t h = 0; h < c->H; h++)
            for (int64_t i = 0; i < c->Tq; i++) {
                int64_t hk = h / (c->H / c->Hkv);
                const double *qi = q + ((b * c->H + h) * c->Tq + i) * c->D;
                double mx = -INFINITY;
                for (int64_t j = 0; j < c->Tk; j++) {
                    const double *kj = k + ((b * c->Hkv + hk) * c->Tk + j) * c->D;
                    double dot = 0;
                    for (int64_t d = 0; d < c->D; d++) dot += qi[d] * kj[d];
                    s[j] = dot * scale;
                    int64_t idx[4] = {b, h, i, j};
                    if (c->mask == 1 && m[ravel_broadcast(idx, 4, mshape)] == 0) s[j] = -INFINITY;
                    if (c->mask == 2) s[j] += m[ravel_broadcast(idx, 4, mshape)];
                    if (c->causal && j > i + c->Tk - c->Tq) s[j] = -INFINITY;
                    mx = fmax(mx, s[j]);
                }
                double sum = 0;
                for (int64_t j = 0; j < c->Tk; j++) sum += s[j] = mx == -INFINITY ? 0 : exp(s[j] - mx);
                double *o = out + ((b * c->H + h) * c->Tq + i) * c->Dv;
                for (int64_t d = 0; d < c->Dv; d++) o[d] = 0;
                for (int64_t j = 0; j < c->Tk; j++) {
                    double p = s[j] / sum;
                    if (c->dropout_p > 0) {
                        uint64_t e = (uint64_t)(((b * c->H + h) * c->Tq + i) * c->Tk + j);
                        bool keep = kn_philox(seed, off + e / 4).v[e % 4] >= (uint64_t)(c->dropout_p * 4294967296.0);
                        p = keep ? p / (1 - c->dropout_p) : 0;
                    }
                    const double *vj = v + ((b * c->Hkv + hk) * c->Tk + j) * c->Dv;
                    for (int64_t d = 0; d < c->Dv; d++) o[d] += p * vj[d];
                }
                if (mx == -INFINITY)
                    for (int64_t d = 0; d < c->Dv; d++) o[d] = NAN;
            }
    free(s);
}

/* A random [B, H, T, D] operand, or the same values as a transpose of a [B, T, H, D] tensor. */
static kn_tensor *operand(kn_dtype dt, int64_t B, int64_t H, int64_t T, int64_t D, bool transposed) {
    if (!transposed) return rand_tensor(KN_SHAPE(B, H, T, D), dt, -1, 1);
    return kn_transpose(rand_tensor(KN_SHAPE(B, T, H, D), dt, -1, 1), 1, 2);
}

static void check_case(attn_case c, kn_dtype dt) {
    kn_tensor *q = operand(dt, c.B, c.H, c.Tq, c.D, c.transposed);
    kn_tensor *k = operand(dt, c.B, c.Hkv, c.Tk, c.D, c.transposed);
    kn_tensor *v = operand(dt, c.B, c.Hkv, c.Tk, c.Dv, c.transposed);
    kn_tensor *mask = NULL;
    kn_shape mshape = KN_SHAPE(1);
    if (c.mask == 1) mshape = KN_SHAPE(c.Tq, c.Tk), mask = rand_tensor(mshape, KN_BOOL, 0, 1.25);
    if (c.mask == 2) mshape = KN_SHAPE(c.B, 1, c.Tq, c.Tk), mask = rand_tensor(mshape, KN_F32, -2, 2);
    double *qv = read_f64(q), *kv = read_f64(k), *vv = read_f64(v), *mv = mask ? read_f64(mask) : NULL;
    double *want = malloc(sizeof(double) * (size_t)(c.B * c.H * c.Tq * c.Dv + 1));
    uint64_t seed, off;
    kn_rng_get_state(&seed, &off);
    attention_ref(&c, qv, kv, vv, mv, mshape, seed, off, want);
    /* Rows that see no key (causal with Tq > Tk, a bool mask with a row of false) are NaN by
     * design, which debug mode refuses from finite inputs: such a case runs without. */
    bool nan_rows = !all_finite(want, c.B * c.H * c.Tq * c.Dv);
    kn_mode saved = nan_rows ? debug_checks_off() : kn_get_mode();
    kn_tensor *got = kn_scaled_dot_product_attention(
        q, k, v, mask, (kn_sdpa_opts){.causal = c.causal, .scale = c.scale, .dropout_p = c.dropout_p});
    if (nan_rows) debug_checks_restore(saved);
    char what[160];
    snprintf(what, sizeof what, "%s B%lld H%lld/%lld Tq%lld Tk%lld D%lld/%lld causal %d mask %d drop %g tr %d",
             kn_dtype_name(dt), (long long)c.B, (long long)c.H, (long long)c.Hkv, (long long)c.Tq, (long long)c.Tk,
             (long long)c.D, (long long)c.Dv, c.causal, c.mask, c.dropout_p, c.transposed);
    /* f32 runs the dot products and the online softmax in float over up to 1000 keys: allow
     * a few times the elementwise bound. */
    tolerance tol = tol_for(dt);
    if (dt == KN_F32) tol.rtol *= 20, tol.atol *= 20;
    CHECK_SHAPE(got, KN_SHAPE(c.B, c.H, c.Tq, c.Dv));
    CHECK_CLOSE(got, want, tol, what);
    free(qv), free(kv), free(vv), free(mv), free(want);
}

/* sum(attention_ref(q, k, v) * r). */
static double weighted_ref(const attn_case *c, double *const *qkv, const double *m, kn_shape mshape, uint64_t seed,
                           uint64_t off, const double *r, double *out) {
    attention_ref(c, qkv[0], qkv[1], qkv[2], m, mshape, seed, off, out);
    double acc = 0;
    for (int64_t i = 0; i < c->B * c->H * c->Tq * c->Dv; i++) acc += out[i] * r[i];
    return acc;
}

/* The gradients of sum(out * r) for q, k and v in dtype dt (through the backward op) against
 * central differences of the float64 reference at the same (rounded) inputs. */
static void check_grad_case(attn_case c, kn_dtype dt) {
    kn_scope_push();
    kn_shape shapes[3] = {KN_SHAPE(c.B, c.H, c.Tq, c.D), KN_SHAPE(c.B, c.Hkv, c.Tk, c.D), KN_SHAPE(c.B, c.Hkv, c.Tk, c.Dv)};
    kn_tensor *in[3];
    double *vals[3];
    for (int i = 0; i < 3; i++) {
        in[i] = kn_requires_grad(rand_tensor(shapes[i], dt, -1, 1), true);
        vals[i] = read_f64(in[i]);
    }
    kn_shape mshape = KN_SHAPE(c.B, 1, c.Tq, c.Tk);
    kn_tensor *mask = c.mask == 2 ? rand_tensor(mshape, KN_F32, -2, 2) : NULL;
    double *mv = mask ? read_f64(mask) : NULL;
    kn_shape oshape = KN_SHAPE(c.B, c.H, c.Tq, c.Dv);
    kn_tensor *r = rand_tensor(oshape, KN_F64, -1, 1);
    double *rv = read_f64(r), *out = malloc(sizeof(double) * (size_t)(kn_shape_numel(oshape) + 1));
    uint64_t seed, off;
    kn_rng_get_state(&seed, &off);
    kn_tensor *got = kn_scaled_dot_product_attention(
        in[0], in[1], in[2], mask, (kn_sdpa_opts){.causal = c.causal, .scale = c.scale, .dropout_p = c.dropout_p});
    CHECK(kn_backward(kn_sum(kn_mul(kn_cast(got, KN_F64), r), KN_ALL_DIMS, false)) == KN_OK);
    tolerance tol = tol_for(dt);
    tol.rtol *= dt == KN_F64 ? 1e4 : 20, tol.atol *= dt == KN_F64 ? 1e4 : 20; /* differences: ~1e-9 */
    for (int i = 0; i < 3; i++) {
        int64_t n = kn_shape_numel(shapes[i]);
        double *want = malloc(sizeof(double) * (size_t)(n + 1));
        for (int64_t j = 0; j < n; j++) {
            double keep = vals[i][j];
            vals[i][j] = keep + 1e-6;
            double up = weighted_ref(&c, vals, mv, mshape, seed, off, rv, out);
            vals[i][j] = keep - 1e-6;
            double down = weighted_ref(&c, vals, mv, mshape, seed, off, rv, out);
            vals[i][j] = keep;
            want[j] = (up - down) / 2e-6;
        }
        kn_tensor *g = kn_grad(in[i]);
        CHECK(g && kn_dtype_of(g) == dt);
        char what[160];
        snprintf(what, sizeof what, "d%c %s H%lld/%lld Tq%lld Tk%lld causal %d mask %d drop %g", "qkv"[i],
                 kn_dtype_name(dt), (long long)c.H, (long long)c.Hkv, (long long)c.Tq, (long long)c.Tk, c.causal,
                 c.mask, c.dropout_p);
        CHECK_CLOSE(g, want, tol, what);
        free(want);
    }
    for (int i = 0; i < 3; i++) free(vals[i]);
    free(mv), free(rv), free(out);
    kn_scope_pop();
}

static void test_attention_backward(void) {
    for (int k = 0; k < 4; k++)
        check_grad_case((attn_case){.B = 2, .H = 4, .Hkv = 2, .Tq = 9, .Tk = 11, .D = 4, .Dv = 3, .causal = true},
                        FLOAT_DTYPES[k]);
    check_grad_case((attn_case){.B = 1, .H = 2, .Hkv = 1, .Tq = 70, .Tk = 140, .D = 2, .Dv = 2, .mask = 2}, KN_F32);
    check_grad_case((attn_case){.B = 1, .H = 1, .Hkv = 1, .Tq = 8, .Tk = 8, .D = 4, .Dv = 4, .dropout_p = 0.4,
                                .scale = 0.5},
                    KN_F64);
}

static void test_attention_every_dtype(void) {
    for (int k = 0; k < 4; k++) {
        check_case((attn_case){.B = 2, .H = 3, .Hkv = 3, .Tq = 16, .Tk = 16, .D = 8, .Dv = 8}, FLOAT_DTYPES[k]);
        check_case((attn_case){.B = 2, .H = 2, .Hkv = 2, .Tq = 9, .Tk = 9, .D = 8, .Dv = 5, .causal = true},
                   FLOAT_DTYPES[k]);
    }
}

static void test_attention_causal_offsets_and_masks(void) {
    check_case((attn_case){.B = 1, .H = 2, .Hkv = 2, .Tq = 5, .Tk = 12, .D = 8, .Dv = 8, .causal = true}, KN_F64);
    check_case((attn_case){.B = 1, .H = 2, .Hkv = 2, .Tq = 12, .Tk = 5, .D = 8, .Dv = 8, .causal = true}, KN_F32);
    check_case((attn_case){.B = 2, .H = 2, .Hkv = 2, .Tq = 7, .Tk = 11, .D = 4, .Dv = 6, .mask = 1}, KN_F32);
    check_case((attn_case){.B = 2, .H = 3, .Hkv = 3, .Tq = 7, .Tk = 11, .D = 4, .Dv = 6, .mask = 2, .scale = 0.7},
               KN_F64);
    check_case((attn_case){.B = 2, .H = 2, .Hkv = 2, .Tq = 8, .Tk = 8, .D = 4, .Dv = 4, .mask = 2, .causal = true},
               KN_BF16);
}

static void test_attention_grouped_query_and_layouts(void) {
    check_case((attn_case){.B = 2, .H = 6, .Hkv = 2, .Tq = 10, .Tk = 10, .D = 8, .Dv = 8, .causal = true}, KN_F32);
    check_case((attn_case){.B = 1, .H = 4, .Hkv = 1, .Tq = 3, .Tk = 20, .D = 16, .Dv = 16}, KN_F16);
    check_case((attn_case){.B = 2, .H = 4, .Hkv = 2, .Tq = 33, .Tk = 33, .D = 8, .Dv = 8, .transposed = true}, KN_F32);
    check_case((attn_case){.B = 1, .H = 2, .Hkv = 2, .Tq = 20, .Tk = 20, .D = 8, .Dv = 8, .transposed = true, .mask = 1},
               KN_BF16);
}

static void test_attention_long_sequences(void) {
    check_case((attn_case){.B = 1, .H = 2, .Hkv = 1, .Tq = 1000, .Tk = 1000, .D = 32, .Dv = 32}, KN_F32);
    check_case((attn_case){.B = 1, .H = 2, .Hkv = 2, .Tq = 1000, .Tk = 1000, .D = 32, .Dv = 16, .causal = true},
               KN_F32);
    check_case((attn_case){.B = 1, .H = 1, .Hkv = 1, .Tq = 300, .Tk = 700, .D = 16, .Dv = 16, .causal = true,
                           .transposed = true},
               KN_F64);
}

static void test_attention_dropout_uses_philox(void) {
    kn_manual_seed(99);
    check_case((attn_case){.B = 1, .H = 2, .Hkv = 2, .Tq = 70, .Tk = 150, .D = 8, .Dv = 8, .dropout_p = 0.3}, KN_F64);
    check_case((attn_case){.B = 1, .H = 1, .Hkv = 1, .Tq = 6, .Tk = 6, .D = 4, .Dv = 4, .dropout_p = 0.5,
                           .causal = true},
               KN_F32);
}

static void test_attention_fully_masked_rows_are_nan_and_corners(void) {
    kn_tensor *q = rand_tensor(KN_SHAPE(1, 2, 4), KN_F32, -1, 1), *k = rand_tensor(KN_SHAPE(1, 3, 4), KN_F32, -1, 1);
    kn_tensor *mask = kn_zeros(KN_SHAPE(2, 3), KN_BOOL);
    kn_mode saved = debug_checks_off(); /* the NaN is the point; debug mode refuses NaN from finite inputs */
    double *out = read_f64(kn_scaled_dot_product_attention(q, k, k, mask, (kn_sdpa_opts){0}));
    debug_checks_restore(saved);
    CHECK(out && isnan(out[0]) && isnan(out[7]));
    free(out);
    /* 2-d operands, an empty query set, and no keys (zeros, as an empty product) */
    kn_tensor *q2 = rand_tensor(KN_SHAPE(3, 4), KN_F32, -1, 1);
    CHECK_SHAPE(kn_scaled_dot_product_attention(q2, q2, q2, NULL, (kn_sdpa_opts){0}), KN_SHAPE(3, 4));
    kn_tensor *e = kn_zeros(KN_SHAPE(1, 0, 4), KN_F32);
    CHECK_SHAPE(kn_scaled_dot_product_attention(e, k, k, NULL, (kn_sdpa_opts){0}), KN_SHAPE(1, 0, 4));
    double zeros[8] = {0};
    CHECK_CLOSE(kn_scaled_dot_product_attention(q, e, e, NULL, (kn_sdpa_opts){0}), zeros, tol_for(KN_F32), "no keys");
}

static void test_attention_errors(void) {
    kn_sdpa_opts o = {0};
    kn_tensor *q = rand_tensor(KN_SHAPE(2, 4, 5, 8), KN_F32, -1, 1);
    kn_tensor *k3 = rand_tensor(KN_SHAPE(2, 3, 5, 8), KN_F32, -1, 1);
    kn_tensor *k = rand_tensor(KN_SHAPE(2, 2, 5, 8), KN_F32, -1, 1);
    CHECK_ERROR(kn_scaled_dot_product_attention(q, k3, k3, NULL, o) != NULL, KN_ERR_SHAPE, "do not divide");
    CHECK_ERROR(kn_scaled_dot_product_attention(q, rand_tensor(KN_SHAPE(2, 2, 5, 7), KN_F32, 0, 1), k, NULL, o) != NULL,
                KN_ERR_SHAPE, "head sizes");
    CHECK_ERROR(kn_scaled_dot_product_attention(q, k, rand_tensor(KN_SHAPE(2, 2, 6, 8), KN_F32, 0, 1), NULL, o) != NULL,
                KN_ERR_SHAPE, "different lengths");
    CHECK_ERROR(kn_scaled_dot_product_attention(q, rand_tensor(KN_SHAPE(3, 2, 5, 8), KN_F32, 0, 1), k, NULL, o) != NULL,
                KN_ERR_SHAPE, "batch dims");
    CHECK_ERROR(kn_scaled_dot_product_attention(q, k, k, kn_ones(KN_SHAPE(5, 4), KN_BOOL), o) != NULL, KN_ERR_SHAPE,
                "mask");
    CHECK_ERROR(kn_scaled_dot_product_attention(q, k, k, kn_ones(KN_SHAPE(5, 5), KN_I32), o) != NULL, KN_ERR_DTYPE,
                "input 3 has dtype i32");
    CHECK_ERROR(kn_scaled_dot_product_attention(kn_cast(q, KN_I64), k, k, NULL, o) != NULL, KN_ERR_DTYPE, "input 0 has dtype i64");
    CHECK_ERROR(kn_scaled_dot_product_attention(kn_cast(q, KN_BOOL), k, k, NULL, o) != NULL, KN_ERR_DTYPE, "q must be");
    CHECK_ERROR(kn_scaled_dot_product_attention(kn_ones(KN_SHAPE(8), KN_F32), k, k, NULL, o) != NULL, KN_ERR_SHAPE,
                "2 to");
    CHECK_ERROR(kn_scaled_dot_product_attention(q, k, k, NULL, (kn_sdpa_opts){.dropout_p = 2}) != NULL, KN_ERR_ARG,
                "dropout_p");
    CHECK_ERROR(kn_scaled_dot_product_attention(q, NULL, k, NULL, o) != NULL, KN_ERR_NULL, "scaled_dot_product_attention");
}

int main(void) {
    RUN(test_attention_every_dtype);
    RUN(test_attention_causal_offsets_and_masks);
    RUN(test_attention_grouped_query_and_layouts);
    RUN(test_attention_long_sequences);
    RUN(test_attention_dropout_uses_philox);
    RUN(test_attention_fully_masked_rows_are_nan_and_corners);
    RUN(test_attention_errors);
    RUN(test_attention_backward);
    return test_summary();
}
