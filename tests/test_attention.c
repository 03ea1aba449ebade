/* scaled_dot_product_attention against a naive full-matrix float64 reference and against
 * PyTorch's values; its backward (scaled_dot_product_attention_backward) against central
 * differences of that reference and against PyTorch's gradients. */
#include <stdlib.h>

#include "core/philox.h"
#include "harness.h"

typedef struct attn_case {
    int64_t B, H, Hkv, Tq, Tk, D, Dv;
    bool causal;
    kn_causal_align align;
    int mask; /* 0 none, 1 bool [Tq, Tk], 2 float [B, 1, Tq, Tk] */
    double scale, dropout_p;
    bool transposed; /* q, k, v as transposed views of [B, T, H, D] tensors */
} attn_case;

/* out[b, h, i, :] = sum_j softmax_j(scale q.k + mask) v_j; zeros when no key is allowed. */
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
                    if (c->causal && j > i + (c->align == KN_CAUSAL_TOP_LEFT ? 0 : c->Tk - c->Tq)) s[j] = -INFINITY;
                    mx = fmax(mx, s[j]);
                }
                double sum = 0;
                for (int64_t j = 0; j < c->Tk; j++) sum += s[j] = mx == -INFINITY ? 0 : exp(s[j] - mx);
                double *o = out + ((b * c->H + h) * c->Tq + i) * c->Dv;
                for (int64_t d = 0; d < c->Dv; d++) o[d] = 0;
                for (int64_t j = 0; j < c->Tk && mx > -INFINITY; j++) {
                    double p = s[j] / sum;
                    if (c->dropout_p > 0) {
                        uint64_t e = (uint64_t)(((b * c->H + h) * c->Tq + i) * c->Tk + j);
                        bool keep = kn_philox(seed, off + e / 4).v[e % 4] >= (uint64_t)(c->dropout_p * 4294967296.0);
                        p = keep ? p / (1 - c->dropout_p) : 0;
                    }
                    const double *vj = v + ((b * c->Hkv + hk) * c->Tk + j) * c->Dv;
                    for (int64_t d = 0; d < c->Dv; d++) o[d] += p * vj[d];
                }
            }
    free(s);
}

static kn_sdpa_opts opts_of(const attn_case *c) {
    return (kn_sdpa_opts){.causal = c->causal, .causal_align = c->align, .scale = c->scale, .dropout_p = c->dropout_p};
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
    kn_tensor *got = kn_scaled_dot_product_attention(q, k, v, mask, opts_of(&c));
    char what[160];
    snprintf(what, sizeof what, "%s B%lld H%lld/%lld Tq%lld Tk%lld D%lld/%lld causal %d/%d mask %d drop %g tr %d",
             kn_dtype_name(dt), (long long)c.B, (long long)c.H, (long long)c.Hkv, (long long)c.Tq, (long long)c.Tk,
             (long long)c.D, (long long)c.Dv, c.causal, c.align, c.mask, c.dropout_p, c.transposed);
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
    kn_tensor *got = kn_scaled_dot_product_attention(in[0], in[1], in[2], mask, opts_of(&c));
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
        snprintf(what, sizeof what, "d%c %s H%lld/%lld Tq%lld Tk%lld causal %d/%d mask %d drop %g", "qkv"[i],
                 kn_dtype_name(dt), (long long)c.H, (long long)c.Hkv, (long long)c.Tq, (long long)c.Tk, c.causal,
                 c.align, c.mask, c.dropout_p);
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
    /* Tq > Tk: bottom-right leaves the first queries no key (no gradient), top-left does not */
    check_grad_case((attn_case){.B = 1, .H = 2, .Hkv = 1, .Tq = 9, .Tk = 5, .D = 3, .Dv = 2, .causal = true,
                                .dropout_p = 0.3},
                    KN_F64);
    check_grad_case((attn_case){.B = 1, .H = 2, .Hkv = 1, .Tq = 9, .Tk = 5, .D = 3, .Dv = 2, .causal = true,
                                .align = KN_CAUSAL_TOP_LEFT},
                    KN_F64);
    check_grad_case((attn_case){.B = 1, .H = 1, .Hkv = 1, .Tq = 7, .Tk = 12, .D = 3, .Dv = 3, .causal = true,
                                .align = KN_CAUSAL_TOP_LEFT, .mask = 2},
                    KN_F32);
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
    kn_causal_align tl = KN_CAUSAL_TOP_LEFT;
    check_case((attn_case){.B = 1, .H = 2, .Hkv = 2, .Tq = 5, .Tk = 12, .D = 8, .Dv = 8, .causal = true, .align = tl},
               KN_F64);
    check_case((attn_case){.B = 1, .H = 2, .Hkv = 2, .Tq = 12, .Tk = 5, .D = 8, .Dv = 8, .causal = true, .align = tl},
               KN_F32);
    /* bottom-right, Tq > Tk over several query blocks: the first 110 queries (a whole block) see no key */
    check_case((attn_case){.B = 1, .H = 2, .Hkv = 1, .Tq = 150, .Tk = 40, .D = 8, .Dv = 8, .causal = true}, KN_F32);
    check_case((attn_case){.B = 1, .H = 1, .Hkv = 1, .Tq = 200, .Tk = 150, .D = 8, .Dv = 4, .causal = true,
                           .align = tl},
               KN_F64);
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

/* Decode's shapes (a few queries over a long bf16 or f16 cache): head dims with and without a
 * lane tail, one key and many, grouped heads, a transposed layout, both causal alignments,
 * and rows that see no key. */
static void test_attention_decode_shapes_in_16bit(void) {
    const kn_dtype dts[] = {KN_BF16, KN_F16};
    for (int k = 0; k < 2; k++) {
        kn_dtype dt = dts[k];
        check_case((attn_case){.B = 1, .H = 2, .Hkv = 2, .Tq = 1, .Tk = 1, .D = 5, .Dv = 5, .causal = true}, dt);
        check_case((attn_case){.B = 2, .H = 6, .Hkv = 2, .Tq = 1, .Tk = 300, .D = 40, .Dv = 24, .causal = true}, dt);
        check_case((attn_case){.B = 1, .H = 3, .Hkv = 3, .Tq = 4, .Tk = 37, .D = 16, .Dv = 16, .causal = true,
                               .transposed = true},
                   dt);
        check_case((attn_case){.B = 1, .H = 2, .Hkv = 1, .Tq = 8, .Tk = 37, .D = 33, .Dv = 7, .causal = true,
                               .align = KN_CAUSAL_TOP_LEFT, .scale = 0.3},
                   dt);
        /* bottom-right with more queries than keys: the first 5 rows see no key */
        check_case((attn_case){.B = 1, .H = 2, .Hkv = 2, .Tq = 8, .Tk = 3, .D = 8, .Dv = 8, .causal = true}, dt);
    }
}

/* Up to 8 queries per head run the decode kernel, more the blocked one: the first 8 rows of a
 * 9-query problem must come out of both alike (each row depends only on its own query), with
 * masks of both kinds, grouped heads, a transposed layout and keys enough for several chunks. */
static void test_attention_decode_kernel_matches_blocked(void) {
    const kn_dtype dts[] = {KN_F32, KN_BF16};
    for (int t = 0; t < 2; t++) {
        for (int mask_kind = 0; mask_kind < 3; mask_kind++) {
            const kn_dtype dt = dts[t];
            const int64_t B = 2, H = 4, Hkv = 2, Tk = 300, D = 64;
            kn_tensor *q9 = operand(dt, B, H, 9, D, t == 1), *k = operand(dt, B, Hkv, Tk, D, t == 1);
            kn_tensor *v = operand(dt, B, Hkv, Tk, D, false);
            kn_tensor *mask9 = mask_kind == 1   ? rand_tensor(KN_SHAPE(9, Tk), KN_BOOL, 0, 1.25)
                               : mask_kind == 2 ? rand_tensor(KN_SHAPE(B, 1, 9, Tk), KN_F32, -2, 2)
                                                : NULL;
            kn_tensor *mask8 = mask9 ? kn_narrow(mask9, -2, 0, 8) : NULL;
            kn_tensor *blocked = kn_narrow(kn_scaled_dot_product_attention(q9, k, v, mask9, (kn_sdpa_opts){0}), 2, 0, 8);
            kn_tensor *decode = kn_scaled_dot_product_attention(kn_narrow(q9, 2, 0, 8), k, v, mask8, (kn_sdpa_opts){0});
            double *want = read_f64(blocked);
            char what[64];
            snprintf(what, sizeof what, "%s mask %d", kn_dtype_name(dt), mask_kind);
            CHECK_CLOSE(decode, want, tol_for(dt), what);
            free(want);
        }
    }
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

/* ---- against PyTorch 2.15 ----------------------------------------------------------------------
 * torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=...,
 * enable_gqa=H != Hkv) in float64 on the math path (the flash path agrees to 1e-5 in float32),
 * with q, k, v = pattern(shape, 0 / 1 / 2) and the gradients of sum(out * pattern(out's shape,
 * 3)). tests/fixtures/make_attention_values.py prints these tables. */
/* q [1, 2, 3, 2], k, v [1, 1, 4, 2]: sdpa(q, k, v, attn_mask=bool_mask, enable_gqa=True) (row 1 all False) */
static const double bool_row_out[12] = {-0.21994138455873263, -0.43537624677811049, 0, 0, -0.2341671709789126,
    0.1613628229454914, -0.2353223305560897, -0.35924784818169442, 0, 0, -0.046819391961826169, 0.020690108224895837};
static const double bool_row_dq[12] = {-0.25621751267334225, 0.22409710358143642, 0, 0, 0.04949676531734841,
    -0.090583360947548222, 0.21459693629887733, -0.15397541073749074, 0, 0, 0.069730053816028204,
    -0.035648384000698807};
static const double bool_row_dk[8] = {-0.25778936813108605, -0.032021824507732416, 0.044231328017406174,
    -0.096515740167079672, 0.068026579195131304, 0.054600341820112357, 0.14553146091854857, 0.073937222854699725};
static const double bool_row_dv[8] = {-0.020309470126246565, 0.27950544413302231, -0.41628785578920369,
    0.20156033563666639, 0.00065176659606297482, 0.60226117133635826, 0.18594555931938725, 0.041673048893952888};
/* the same with attn_mask=inf_mask (row 1 all -inf), and its gradient */
static const double inf_row_out[12] = {-0.13846596483408791, -0.40185249848180482, 0, 0, -0.13532667545025462,
    0.024433036850272899, -0.19314559606486875, -0.2753439042972477, 0, 0, 0.013364920789948539,
    -0.10817059423924126};
static const double inf_row_dq[12] = {-0.27124348231620765, 0.18292591272205638, 0, 0, 0.05028626896747708,
    -0.11657885021879778, 0.23937025797943509, -0.14216285067189408, 0, 0, 0.040480112043093326,
    -0.027572667944270948};
static const double inf_row_dk[8] = {-0.26973213095798954, 0.014302650808665607, 0.05057719931441601,
    -0.13341430382519551, 0.15880604598939718, 0.094058460611727124, 0.060348885654176419, 0.025053192404802794};
static const double inf_row_dv[8] = {-0.070749100792046216, 0.35860110157560787, -0.39364548460555004,
    0.24541270129287662, 0.14113273709433194, 0.50960182261606779, 0.073261848303264376, 0.011384374515447625};
static const double inf_row_dmask[12] = {0.048340339448856184, 0, 0.0087061155072862551, -0.057046454956142495, 0, 0,
    0, 0, -0.38728867564272157, 0.23094793255775414, 0.15634074308496743, 0};
/* q [1, 1, 3, 2], k, v [1, 1, 5, 2]: sdpa(q, k, v, is_causal=True) */
static const double top_left_3_5_out[6] = {0.25, -1, 0.068712530763922725, -0.15399181023163933, -0.2341671709789126,
    0.1613628229454914};
static const double top_left_3_5_dq[6] = {0, 0, 0.099327726436391331, 0.099327726436391345, 0.04949676531734841,
    -0.090583360947548222};
static const double top_left_3_5_dk[10] = {0.13279211420727505, 0.021244154970996024, -0.15751213648931564,
    0.036435897020431977, 0.02472002228204059, -0.05768005199142804, 0, 0, 0, 0};
static const double top_left_3_5_dv[10] = {1.1614874923563439, -0.53679211749227085, 0.27391933264623852,
    -0.10495328248707081, 0.064593174997417693, 0.51674539997934155, 0, 0, 0, 0};
/* sdpa(q, k, v, attn_mask=torch.ones(3, 5, dtype=torch.bool).tril(diagonal=2)) */
static const double bottom_right_3_5_out[6] = {-0.043798058891091687, 0.058959294358232828, -0.47874996915276719,
    0.099814973439448146, -0.071113172417610226, -0.040313975761119739};
static const double bottom_right_3_5_dq[6] = {-0.031047266986629855, 0.083200533378061339, -0.099559504470056986,
    0.088756357172579958, 0.017079481909031986, 0.01335336046310413};
static const double bottom_right_3_5_dk[10] = {-0.10442841862827119, -0.022956692525372621, 0.11647161878124228,
    -0.026539095522494657, 0.032261779487408916, -0.015435702333881515, -0.027226755005359461, 0.025082299566700838,
    -0.01707822463502056, 0.039849190815047973};
static const double bottom_right_3_5_dv[10] = {0.40019121641265376, -0.14122605339204447, 0.50800819003391429,
    -0.16775145943295328, 0.34557986915446259, -0.1095982991494194, 0.2090213784451892, -0.0040189556558238859,
    0.037199345953780126, 0.29759476763024101};
/* q [1, 1, 5, 2], k, v [1, 1, 3, 2]: sdpa(q, k, v, is_causal=True) */
static const double top_left_5_3_out[10] = {0.25, -1, 0.068712530763922725, -0.15399181023163933, -0.2341671709789126,
    0.1613628229454914, -0.067509578673220827, -0.070003254965286879, -0.054910572781610656, -0.02987195445919584};
static const double top_left_5_3_dq[10] = {0, 0, 0.099327726436391331, 0.099327726436391345, 0.04949676531734841,
    -0.090583360947548222, 0.051756485676871536, -0.098927668164914717, 0.054100480246014118, -0.067371445953178233};
static const double top_left_5_3_dk[6] = {0.17872733789000758, -0.20878761936965401, -0.18201113790160245,
    0.17583962537936004, 0.0032838000115948817, 0.03294799399029389};
static const double top_left_5_3_dv[6] = {0.80826430053445808, -0.1787102854443002, -0.049776943291824971,
    0.19642670710721283, -0.13348735724263305, 0.73228357833708735};
/* sdpa(q, k, v, attn_mask=torch.ones(5, 3, dtype=torch.bool).tril(diagonal=-2)) (queries 0, 1 see no key) */
static const double bottom_right_5_3_out[10] = {0, 0, 0, 0, 0.25, -1, 0.084154761897177549, -0.22605555552016188,
    -0.054910572781610656, -0.02987195445919584};
static const double bottom_right_5_3_dq[10] = {0, 0, 0, 0, 0, 0, -0.077670860327303526, -0.07767086032730354,
    0.054100480246014118, -0.067371445953178233};
static const double bottom_right_5_3_dk[6] = {0.045935223682732521, -0.24247897234068497, -0.024499001412286812,
    0.21389734264675733, -0.021436222270445709, 0.028581629693927607};
static const double bottom_right_5_3_dv[6] = {-0.26442514960132968, 1.4485867264965804, -0.35240192075944116,
    0.37314410164772782, -0.13317292963922911, 0.05326917185569164};
/* q, k, v [2, 1, 4, 2], w [2, 3]: sdpa(q, k, v, attn_mask=causal & key padding).reshape(8, 2) @ w */
static const double left_pad_y[24] = {0, 0, 0, 0, 0, 0, 0.265625, 0.15625, 0.3125, 0.39000892857711678,
    -0.0095952381028224509, 0.56126785715423355, -0.5, -0.0625, -0.6875, -0.33477153101385976, -0.28280462531485373,
    -0.35704306202771952, -0.3541174803950774, 0.02553890742381508, -0.51682736088888837, -0.29195700725536672,
    0.10618350763078363, -0.46258865649228831};
static const double left_pad_dq[16] = {0, 0, 0, 0, 0, 0, -0.024527640103359012, -0.024527640103359012, 0, 0,
    -0.015814492608264022, 0.073800965505232102, -0.0061531228589890652, -0.10909511528005961, -0.075074562434037956,
    0.020673548613943184};
static const double left_pad_dk[16] = {0, 0, 0, 0, 0, -0.057231160241171024, 0, 0.057231160241171031,
    0.051911066635860904, 0.010778888957898138, -0.19414005747858423, 0.082811388253528073, 0.12264330191874645,
    -0.074004588287449311, 0.01958568892397692, -0.01958568892397692};
static const double left_pad_dv[16] = {0, 0, 0, 0, 0.78063392857711689, 0.41162003969707639, -0.12438392857711682,
    -0.31787003969707628, -0.36195838082961207, -0.0024808710398779854, 0.19164880022631575, 0.18346417356867389,
    0.32877700216944356, 0.33626514880965219, 0.075907578433852638, 0.15462654866155168};
static const double left_pad_dw[6] = {-0.12421045483729906, 0.68588567335274842, 0.72935293184511563,
    0.25848826600537789, 0.11464404147643537, -0.79384891043264039};


/* The inputs of the PyTorch cases: ((i * 7 + salt * 5) mod 17 - 8) / 8 at row-major index i. */
static kn_tensor *pattern(kn_shape shape, kn_dtype dt, int salt) {
    int64_t n = kn_shape_numel(shape);
    double *v = malloc(sizeof(double) * (size_t)(n + 1));
    for (int64_t i = 0; i < n; i++) v[i] = (double)((i * 7 + salt * 5) % 17 - 8) / 8;
    kn_tensor *t = tensor_from(v, shape, dt);
    free(v);
    return t;
}

/* One PyTorch case: q [B, H, Tq, D], k and v [B, Hkv, Tk, D], an optional [Tq, Tk] mask (bool,
 * or float in q's dtype when dmask is given), and the (batch, head, query) rows that see no key. */
typedef struct torch_case {
    const char *what;
    kn_shape q, kv;
    kn_sdpa_opts o;
    const double *mask;
    const double *out, *dq, *dk, *dv, *dmask;
    unsigned no_key_rows;
} torch_case;

/* The rows (bits of the flat (batch, head, query) index) of a [B, H, Tq, D] tensor are exactly 0. */
static bool rows_are_zero(kn_tensor *t, unsigned rows) {
    double *v = read_f64(t);
    kn_shape s = kn_shape_of(t);
    bool ok = v != NULL;
    for (int64_t e = 0; ok && e < kn_shape_numel(s); e++)
        if (rows >> (e / s.v[s.n - 1]) & 1) ok = v[e] == 0;
    free(v);
    return ok;
}

static void check_torch_case(const torch_case *c, kn_dtype dt) {
    kn_scope_push();
    kn_tensor *in[4] = {kn_requires_grad(pattern(c->q, dt, 0), true), kn_requires_grad(pattern(c->kv, dt, 1), true),
                        kn_requires_grad(pattern(c->kv, dt, 2), true), NULL};
    if (c->mask) in[3] = tensor_from(c->mask, KN_SHAPE(c->q.v[2], c->kv.v[2]), c->dmask ? dt : KN_BOOL);
    if (c->dmask) kn_requires_grad(in[3], true);
    kn_tensor *out = kn_scaled_dot_product_attention(in[0], in[1], in[2], in[3], c->o);
    tolerance tol = dt == KN_F64 ? (tolerance){1e-12, 1e-12} : tol_for(dt);
    char what[120];
    snprintf(what, sizeof what, "%s, %s: out", c->what, kn_dtype_name(dt));
    CHECK_CLOSE(out, c->out, tol, what);
    CHECK_MSG(rows_are_zero(out, c->no_key_rows), "%s: a query with no key is not exactly 0", what);
    CHECK(kn_backward(kn_sum(kn_mul(out, pattern(kn_shape_of(out), dt, 3)), KN_ALL_DIMS, false)) == KN_OK);
    const double *want[4] = {c->dq, c->dk, c->dv, c->dmask};
    const char *names[4] = {"q", "k", "v", "mask"};
    for (int i = 0; i < (c->dmask ? 4 : 3); i++) {
        snprintf(what, sizeof what, "%s, %s: d%s", c->what, kn_dtype_name(dt), names[i]);
        CHECK_CLOSE(kn_grad(in[i]), want[i], tol, what);
    }
    CHECK_MSG(rows_are_zero(kn_grad(in[0]), c->no_key_rows), "%s: a query with no key has a gradient", c->what);
    kn_scope_pop();
}

/* A query row with no allowed key gives zeros and passes no gradient, as in PyTorch (not NaN,
 * which the next matmul would spread): a bool mask row of false and a float mask row of -inf,
 * with grouped heads; debug mode's NaN/Inf check has nothing to refuse. */
static void test_attention_fully_masked_rows_give_zeros_as_pytorch(void) {
    /* [Tq 3, Tk 4]: query 1 sees no key */
    const double bool_mask[12] = {1, 0, 1, 1, 0, 0, 0, 0, 1, 1, 1, 0};
    const double inf_mask[12] = {0, -INFINITY, 0.5, -1, -INFINITY, -INFINITY, -INFINITY, -INFINITY,
                                 0.25, 0, -0.5, -INFINITY};
    const torch_case cases[] = {
        {"bool mask row of false", KN_SHAPE(1, 2, 3, 2), KN_SHAPE(1, 1, 4, 2), {0}, bool_mask, bool_row_out,
         bool_row_dq, bool_row_dk, bool_row_dv, NULL, 1u << 1 | 1u << 4},
        {"float mask row of -inf", KN_SHAPE(1, 2, 3, 2), KN_SHAPE(1, 1, 4, 2), {0}, inf_mask, inf_row_out, inf_row_dq,
         inf_row_dk, inf_row_dv, inf_row_dmask, 1u << 1 | 1u << 4},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        check_torch_case(&cases[i], KN_F64);
        check_torch_case(&cases[i], KN_F32);
    }
}

/* Bottom-right (the default: j <= i + Tk - Tq, PyTorch's attn_mask=ones(Tq, Tk).tril(Tk - Tq))
 * and top-left (j <= i, PyTorch's is_causal=True), for Tq < Tk and Tq > Tk. */
static void test_attention_causal_alignment_matches_pytorch(void) {
    const kn_sdpa_opts br = {.causal = true}, tl = {.causal = true, .causal_align = KN_CAUSAL_TOP_LEFT};
    const torch_case cases[] = {
        {"top-left Tq 3 Tk 5", KN_SHAPE(1, 1, 3, 2), KN_SHAPE(1, 1, 5, 2), tl, NULL, top_left_3_5_out, top_left_3_5_dq,
         top_left_3_5_dk, top_left_3_5_dv, NULL, 0},
        {"bottom-right Tq 3 Tk 5", KN_SHAPE(1, 1, 3, 2), KN_SHAPE(1, 1, 5, 2), br, NULL, bottom_right_3_5_out,
         bottom_right_3_5_dq, bottom_right_3_5_dk, bottom_right_3_5_dv, NULL, 0},
        {"top-left Tq 5 Tk 3", KN_SHAPE(1, 1, 5, 2), KN_SHAPE(1, 1, 3, 2), tl, NULL, top_left_5_3_out, top_left_5_3_dq,
         top_left_5_3_dk, top_left_5_3_dv, NULL, 0},
        {"bottom-right Tq 5 Tk 3", KN_SHAPE(1, 1, 5, 2), KN_SHAPE(1, 1, 3, 2), br, NULL, bottom_right_5_3_out,
         bottom_right_5_3_dq, bottom_right_5_3_dk, bottom_right_5_3_dv, NULL, 3u},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        check_torch_case(&cases[i], KN_F64);
        check_torch_case(&cases[i], KN_F32);
    }
}

/* A left-padded batch (row 0 has 2 pad tokens): causal attention with a key padding mask leaves
 * the padded queries no key; their zeros go through a matmul, and every value and gradient stays
 * finite and equal to PyTorch's (attn_mask = causal & key padding, then @ w). */
static void test_attention_left_padded_batch_stays_finite_through_a_matmul(void) {
    const double keys[8] = {0, 0, 1, 1, 1, 1, 1, 1}; /* [B, 1, 1, Tk]: batch 0's first 2 keys are padding */
    for (int k = 0; k < 2; k++) {
        kn_dtype dt = k ? KN_F32 : KN_F64;
        kn_scope_push();
        kn_tensor *in[4] = {kn_requires_grad(pattern(KN_SHAPE(2, 1, 4, 2), dt, 0), true),
                            kn_requires_grad(pattern(KN_SHAPE(2, 1, 4, 2), dt, 1), true),
                            kn_requires_grad(pattern(KN_SHAPE(2, 1, 4, 2), dt, 2), true),
                            kn_requires_grad(pattern(KN_SHAPE(2, 3), dt, 4), true)};
        kn_tensor *pad = tensor_from(keys, KN_SHAPE(2, 1, 1, 4), KN_BOOL);
        kn_tensor *out = kn_scaled_dot_product_attention(in[0], in[1], in[2], pad, (kn_sdpa_opts){.causal = true});
        kn_tensor *y = kn_matmul(kn_reshape(out, KN_SHAPE(8, 2)), in[3]);
        tolerance tol = dt == KN_F64 ? (tolerance){1e-12, 1e-12} : tol_for(dt);
        CHECK_CLOSE(y, left_pad_y, tol, "left-padded y");
        CHECK(rows_are_zero(out, 3u));
        CHECK(kn_backward(kn_sum(kn_mul(y, pattern(KN_SHAPE(8, 3), dt, 3)), KN_ALL_DIMS, false)) == KN_OK);
        const double *want[4] = {left_pad_dq, left_pad_dk, left_pad_dv, left_pad_dw};
        const char *names[4] = {"dq", "dk", "dv", "dw"};
        for (int i = 0; i < 4; i++) CHECK_CLOSE(kn_grad(in[i]), want[i], tol, names[i]);
        CHECK(rows_are_zero(kn_grad(in[0]), 3u));
        kn_scope_pop();
    }
}

/* A NaN in q makes its row NaN even where the mask allows no key, as in PyTorch (which adds the
 * mask's -inf to the NaN score): the zeros are for masked rows, not for lost NaNs. */
static void test_attention_nan_query_stays_nan_in_a_masked_row(void) {
    const double bool_mask[12] = {1, 0, 1, 1, 0, 0, 0, 0, 1, 1, 1, 0};
    for (int f = 0; f < 2; f++) {
        kn_scope_push();
        double *qv = read_f64(pattern(KN_SHAPE(1, 1, 3, 2), KN_F32, 0));
        qv[0] = qv[2] = NAN; /* queries 0 (some keys allowed) and 1 (none) */
        kn_tensor *q = tensor_from(qv, KN_SHAPE(1, 1, 3, 2), KN_F32), *k = pattern(KN_SHAPE(1, 1, 4, 2), KN_F32, 1);
        free(qv);
        kn_tensor *mask = tensor_from(bool_mask, KN_SHAPE(3, 4), KN_BOOL);
        if (f) mask = kn_masked_fill(kn_zeros(KN_SHAPE(3, 4), KN_F32), kn_logical_not(mask), -INFINITY);
        double *out = read_f64(kn_scaled_dot_product_attention(q, k, pattern(KN_SHAPE(1, 1, 4, 2), KN_F32, 2), mask,
                                                               (kn_sdpa_opts){0}));
        /* F.scaled_dot_product_attention(q, k, v, attn_mask=m) with q[0, 0, :2, 0] = nan, math and flash:
         * [[nan, nan], [nan, nan], [-0.2341672, 0.1613628]] */
        CHECK(out && isnan(out[0]) && isnan(out[1]) && isnan(out[2]) && isnan(out[3]));
        CHECK(out && fabs(out[4] - bool_row_out[4]) < 1e-6 && fabs(out[5] - bool_row_out[5]) < 1e-6);
        free(out);
        kn_scope_pop();
    }
}

/* 2-d operands, an empty query set, and no keys (zeros, as an empty product). */
static void test_attention_corners(void) {
    kn_tensor *q = rand_tensor(KN_SHAPE(1, 2, 4), KN_F32, -1, 1), *k = rand_tensor(KN_SHAPE(1, 3, 4), KN_F32, -1, 1);
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
    kn_sdpa_opts bad_align = {.causal = true, .causal_align = 2};
    CHECK_ERROR(kn_scaled_dot_product_attention(q, k, k, NULL, bad_align) != NULL, KN_ERR_ARG, "causal_align 2 is neither");
    CHECK_ERROR(kn_scaled_dot_product_attention(q, NULL, k, NULL, o) != NULL, KN_ERR_NULL, "scaled_dot_product_attention");
}

int main(void) {
    RUN(test_attention_every_dtype);
    RUN(test_attention_causal_offsets_and_masks);
    RUN(test_attention_grouped_query_and_layouts);
    RUN(test_attention_decode_shapes_in_16bit);
    RUN(test_attention_decode_kernel_matches_blocked);
    RUN(test_attention_long_sequences);
    RUN(test_attention_dropout_uses_philox);
    RUN(test_attention_fully_masked_rows_give_zeros_as_pytorch);
    RUN(test_attention_causal_alignment_matches_pytorch);
    RUN(test_attention_left_padded_batch_stays_finite_through_a_matmul);
    RUN(test_attention_nan_query_stays_nan_in_a_masked_row);
    RUN(test_attention_corners);
    RUN(test_attention_errors);
    RUN(test_attention_backward);
    return test_summary();
}
