/* Gradients of the losses, dropout and attention (ops/grad_loss.c, ops/grad_attention.c):
 * float64 gradchecks over every attribute variant, and f32 gradients against f64 ones. */
#include <stdlib.h>

#include "gradcheck.h"
#include "ops/grad.h"

static const kn_reduction REDUCTIONS[3] = {KN_REDUCTION_MEAN, KN_REDUCTION_SUM, KN_REDUCTION_NONE};

/* Every op of the family (defs/loss.def) is in the gradient table, as KN_GRAD or KN_NO_GRAD. */
static void test_every_op_is_listed(void) {
    static const kn_op_id family[] = {
#define KN_OP(name, ...) KN_OP_##name,
#include "ops/defs/loss.def"
#undef KN_OP
    };
    for (size_t i = 0; i < sizeof family / sizeof family[0]; i++)
        CHECK_MSG(kn_grad_table[family[i]].fn || kn_grad_table[family[i]].nondiff, "%s is not in grad.def",
                  kn_op_name(family[i]));
}

/* Class targets in [0, C) from a fixed pattern, with `ignore` at every fifth position when set. */
static kn_tensor *targets(kn_shape shape, int64_t C, bool with_ignore, int64_t ignore, kn_dtype dt) {
    int64_t n = kn_shape_numel(shape);
    double *v = malloc(sizeof(double) * (size_t)(n + 1));
    for (int64_t i = 0; i < n; i++) v[i] = with_ignore && i % 5 == 3 ? (double)ignore : (double)((i * 7 + 2) % C);
    kn_tensor *t = tensor_from(v, shape, dt);
    free(v);
    return t;
}

/* The f32 gradients of f equal the f64 ones (inputs rounded to f32 first) and are f32. */
static void check_f32_at(const char *what, gc_fn f, const void *ctx, int n, const gc_input *in, const char *file,
                         int line) {
    kn_scope_push();
    kn_tensor *a64[8], *a32[8];
    for (int i = 0; i < n; i++) {
        if (in[i].fixed) {
            a64[i] = a32[i] = in[i].fixed;
            continue;
        }
        a32[i] = rand_tensor(in[i].shape, KN_F32, in[i].lo, in[i].hi);
        a64[i] = kn_requires_grad(kn_cast(a32[i], KN_F64), true);
        kn_requires_grad(a32[i], true);
    }
    kn_tensor *y64 = f(a64, ctx), *y32 = f(a32, ctx);
    kn_tensor *r = y64 ? rand_tensor(kn_shape_of(y64), KN_F64, -1, 1) : NULL;
    bool ok = y64 && y32 && kn_dtype_of(y32) == KN_F32;
    ok = ok && kn_backward(kn_sum(kn_mul(y64, r), KN_ALL_DIMS, false)) == KN_OK;
    ok = ok && kn_backward(kn_sum(kn_mul(y32, kn_cast(r, KN_F32)), KN_ALL_DIMS, false)) == KN_OK;
    if (!ok) test_fail(file, line, "%s: f32 forward or backward failed: %s", what, kn_last_error());
    for (int i = 0; ok && i < n; i++) {
        if (in[i].fixed) continue;
        kn_tensor *g32 = kn_grad(a32[i]), *g64 = kn_grad(a64[i]);
        if (!g32 || kn_dtype_of(g32) != KN_F32) {
            test_fail(file, line, "%s: input %d's f32 gradient is missing or not f32", what, i);
            break;
        }
        double *want = read_f64(g64), scale = 0;
        int64_t cnt = kn_numel(g64);
        for (int64_t j = 0; j < cnt; j++) scale = fmax(scale, fabs(want[j]));
        char name[160];
        snprintf(name, sizeof name, "%s: f32 gradient of input %d", what, i);
        check_close_at(g32, want, (tolerance){2e-3, 1e-4 * (scale > 1 ? scale : 1)}, name, file, line);
        free(want);
    }
    kn_scope_pop();
}
#define CHECK_F32(what, f, ctx, n, ...) check_f32_at((what), (f), (ctx), (n), (const gc_input[]){__VA_ARGS__}, __FILE__, __LINE__)

/* ---- cross_entropy, nll_loss ------------------------------------------------------------- */

typedef struct class_case {
    kn_ce_opts o;
    kn_tensor *target; /* index targets (NULL: probabilities, input 1) */
    bool nll, transpose; /* transpose: input 0 comes as [C, N] */
} class_case;

static kn_tensor *f_class(kn_tensor *const *in, const void *ctx) {
    const class_case *c = ctx;
    kn_tensor *x = c->transpose ? kn_transpose(in[0], 0, 1) : in[0];
    kn_tensor *t = c->target ? c->target : in[1];
    if (!c->target && c->transpose) t = kn_transpose(t, 0, 1);
    return c->nll ? kn_nll_loss(x, t, c->o) : kn_cross_entropy(x, t, c->o);
}

static void test_cross_entropy(void) {
    kn_scope_push();
    double wv[19];
    for (int i = 0; i < 19; i++) wv[i] = 0.5 + 0.1 * i;
    kn_tensor *w5 = tensor_from(wv, KN_SHAPE(5), KN_F64), *w19 = tensor_from(wv, KN_SHAPE(19), KN_F64);
    for (int ri = 0; ri < 3; ri++) {
        kn_reduction r = REDUCTIONS[ri];
        for (int v = 0; v < 4; v++) { /* plain; ignore_index; weight + smoothing; all three */
            class_case c = {.o = {.reduction = r, .ignore_index = v & 1 ? 1 : -100, .label_smoothing = v >= 2 ? 0.2 : 0,
                                  .weight = v >= 2 ? w5 : NULL},
                            .target = targets(KN_SHAPE(4), 5, v & 1, 1, KN_I64)};
            GRADCHECK("cross_entropy [4, 5]", f_class, &c, 1, GC_IN(KN_SHAPE(4, 5), -2, 2));
            c.nll = true, c.o.label_smoothing = 0;
            GRADCHECK("nll_loss [4, 5]", f_class, &c, 1, GC_IN(KN_SHAPE(4, 5), -3, 0));
        }
        /* Spatial dims [N, C, d] with i32 targets, a row longer than the kernel's 16 lanes, a
         * transposed (non-contiguous) input, and a single [C] row. */
        class_case sp = {.o = {.reduction = r, .ignore_index = 0, .label_smoothing = 0.1},
                         .target = targets(KN_SHAPE(2, 3), 4, true, 0, KN_I32)};
        GRADCHECK("cross_entropy [2, 4, 3]", f_class, &sp, 1, GC_IN(KN_SHAPE(2, 4, 3), -2, 2));
        class_case wide = {.o = {.reduction = r, .ignore_index = -100, .weight = w19, .label_smoothing = 0.1},
                           .target = targets(KN_SHAPE(3), 19, false, 0, KN_I64), .transpose = true};
        GRADCHECK("cross_entropy [3, 19] transposed", f_class, &wide, 1, GC_IN(KN_SHAPE(19, 3), -2, 2));
        wide.nll = true, wide.o.label_smoothing = 0;
        GRADCHECK("nll_loss [3, 19] transposed", f_class, &wide, 1, GC_IN(KN_SHAPE(19, 3), -3, 0));
        class_case one = {.o = {.reduction = r, .ignore_index = -100}, .target = targets(KN_SHAPE0, 6, false, 0, KN_I64)};
        GRADCHECK("cross_entropy [6]", f_class, &one, 1, GC_IN(KN_SHAPE(6), -2, 2));
        /* Probability targets: gradients for both the logits and the targets. */
        for (int v = 0; v < 2; v++) {
            class_case pr = {.o = {.reduction = r, .label_smoothing = v ? 0.3 : 0, .weight = v ? w5 : NULL},
                             .transpose = v};
            GRADCHECK("cross_entropy probabilities", f_class, &pr, 2, GC_IN(v ? KN_SHAPE(5, 4) : KN_SHAPE(4, 5), -2, 2),
                      GC_IN(v ? KN_SHAPE(5, 4) : KN_SHAPE(4, 5), 0, 1));
        }
    }
    class_case c = {.o = {.reduction = KN_REDUCTION_MEAN, .ignore_index = 3, .label_smoothing = 0.1, .weight = w19},
                    .target = targets(KN_SHAPE(64), 19, true, 3, KN_I64)};
    CHECK_F32("cross_entropy f32", f_class, &c, 1, GC_IN(KN_SHAPE(64, 19), -4, 4));
    class_case big = {.o = KN_CE_OPTS_DEFAULT, .target = targets(KN_SHAPE(8), 1000, true, -100, KN_I64)};
    CHECK_F32("cross_entropy f32 [8, 1000]", f_class, &big, 1, GC_IN(KN_SHAPE(8, 1000), -4, 4));
    class_case pr = {.o = {.reduction = KN_REDUCTION_SUM, .label_smoothing = 0.1}};
    CHECK_F32("cross_entropy f32 probabilities", f_class, &pr, 2, GC_IN(KN_SHAPE(6, 19), -4, 4), GC_IN(KN_SHAPE(6, 19), 0, 1));
    c.nll = true, c.o.label_smoothing = 0;
    CHECK_F32("nll_loss f32", f_class, &c, 1, GC_IN(KN_SHAPE(64, 19), -4, 0));
    kn_scope_pop();
}

static void test_class_weight_gradient_is_refused(void) {
    kn_scope_push();
    kn_tensor *x = kn_requires_grad(rand_tensor(KN_SHAPE(3, 4), KN_F64, -1, 1), true);
    kn_tensor *w = kn_requires_grad(rand_tensor(KN_SHAPE(4), KN_F64, 0.5, 1), true);
    kn_ce_opts o = KN_CE_OPTS_DEFAULT;
    o.weight = w;
    kn_tensor *loss = kn_cross_entropy(x, targets(KN_SHAPE(3), 4, false, 0, KN_I64), o);
    CHECK_ERROR(kn_backward(loss) == KN_OK, KN_ERR_UNSUPPORTED, "no gradient for the class weight");
    kn_scope_pop();
}

/* ---- pointwise losses --------------------------------------------------------------------- */

typedef struct pointwise_case {
    kn_op_id op;
    kn_reduction r;
    double beta;
    int n_in;       /* x, y, then weight and pos_weight for the bce losses */
    bool has_weight, transpose;
} pointwise_case;

static kn_tensor *f_pointwise(kn_tensor *const *in, const void *ctx) {
    const pointwise_case *c = ctx;
    kn_tensor *x = c->transpose ? kn_transpose(in[0], 0, 1) : in[0], *y = in[1];
    kn_tensor *w = c->has_weight ? in[2] : NULL, *pw = c->n_in > 2 + c->has_weight ? in[2 + c->has_weight] : NULL;
    switch (c->op) {
    case KN_OP_mse_loss: return kn_mse_loss(x, y, c->r);
    case KN_OP_l1_loss: return kn_l1_loss(x, y, c->r);
    case KN_OP_smooth_l1_loss: return kn_smooth_l1_loss(x, y, c->r, c->beta);
    case KN_OP_bce_loss: return kn_bce_loss(x, y, w, c->r);
    default: return kn_bce_with_logits(x, y, w, pw, c->r);
    }
}

static void test_pointwise_losses(void) {
    for (int ri = 0; ri < 3; ri++) {
        kn_reduction r = REDUCTIONS[ri];
        /* x [3, 4] (or its transpose) against y [4]: broadcasting and a strided input. */
        kn_op_id diffs[3] = {KN_OP_mse_loss, KN_OP_l1_loss, KN_OP_smooth_l1_loss};
        for (int k = 0; k < 3; k++)
            for (int t = 0; t < 2; t++) {
                pointwise_case c = {.op = diffs[k], .r = r, .beta = t ? 0 : 0.7, .n_in = 2, .transpose = t};
                GRADCHECK(kn_op_name(diffs[k]), f_pointwise, &c, 2, GC_IN(t ? KN_SHAPE(4, 3) : KN_SHAPE(3, 4), -1, 1),
                          GC_IN(KN_SHAPE(4), -1, 1));
            }
        for (int wmode = 0; wmode < 2; wmode++) {
            pointwise_case b = {.op = KN_OP_bce_loss, .r = r, .n_in = 2 + wmode, .has_weight = wmode, .transpose = true};
            GRADCHECK("bce_loss", f_pointwise, &b, b.n_in, GC_IN(KN_SHAPE(4, 3), 0.05, 0.95), GC_IN(KN_SHAPE(3, 4), 0, 1),
                      GC_IN(KN_SHAPE(4), 0.5, 1.5));
        }
        for (int mode = 0; mode < 4; mode++) { /* bit 0: weight; bit 1: pos_weight */
            bool w = mode & 1, pw = mode & 2;
            pointwise_case b = {.op = KN_OP_bce_with_logits, .r = r, .n_in = 2 + w + pw, .has_weight = w};
            gc_input in[4] = {GC_IN(KN_SHAPE(3, 4), -3, 3), GC_IN(KN_SHAPE(3, 4), 0, 1), GC_IN(KN_SHAPE(3, 1), 0.5, 1.5),
                              GC_IN(KN_SHAPE(4), 0.5, 2)};
            if (!w) in[2] = in[3];
            GRADCHECK("bce_with_logits", f_pointwise, &b, b.n_in, in[0], in[1], in[2], in[3]);
        }
    }
    kn_op_id all[5] = {KN_OP_mse_loss, KN_OP_l1_loss, KN_OP_smooth_l1_loss, KN_OP_bce_loss, KN_OP_bce_with_logits};
    for (int k = 0; k < 5; k++) {
        bool bce = k >= 3;
        pointwise_case c = {.op = all[k], .r = KN_REDUCTION_MEAN, .beta = 0.5, .n_in = bce ? 3 + (k == 4) : 2,
                            .has_weight = bce};
        CHECK_F32(kn_op_name(all[k]), f_pointwise, &c, c.n_in, GC_IN(KN_SHAPE(5, 6), k == 3 ? 0.05 : -1, k == 3 ? 0.95 : 1),
                  GC_IN(KN_SHAPE(5, 6), 0, 1), GC_IN(KN_SHAPE(6), 0.5, 1.5), GC_IN(KN_SHAPE(6), 0.5, 2));
    }
}

/* ---- dropout ------------------------------------------------------------------------------ */

typedef struct dropout_case {
    double p;
    bool transpose;
} dropout_case;

/* Reseeds first, so every call of the gradcheck draws the same mask. */
static kn_tensor *f_dropout(kn_tensor *const *in, const void *ctx) {
    const dropout_case *c = ctx;
    kn_manual_seed(1234);
    return kn_dropout(c->transpose ? kn_transpose(in[0], 0, 1) : in[0], c->p, true);
}

static void test_dropout(void) {
    for (int t = 0; t < 2; t++) {
        dropout_case c = {.p = 0.4, .transpose = t};
        GRADCHECK("dropout", f_dropout, &c, 1, GC_IN(KN_SHAPE(7, 5), -1, 1));
    }
    dropout_case all = {.p = 1};
    GRADCHECK("dropout p = 1", f_dropout, &all, 1, GC_IN(KN_SHAPE(3), -1, 1));
    dropout_case c = {.p = 0.3};
    CHECK_F32("dropout f32", f_dropout, &c, 1, GC_IN(KN_SHAPE(33, 9), -1, 1));
}

/* ---- attention -------------------------------------------------------------------------------- */

typedef struct attn_case {
    kn_sdpa_opts o;
    kn_tensor *mask;      /* a fixed bool mask, or NULL */
    bool float_mask;      /* the mask is input 3 (differentiated) */
    bool transpose_q;     /* q comes as [..., D, T] */
    bool reseed;          /* dropout: the same mask every call */
} attn_case;

static kn_tensor *f_attn(kn_tensor *const *in, const void *ctx) {
    const attn_case *c = ctx;
    if (c->reseed) kn_manual_seed(99);
    kn_tensor *q = c->transpose_q ? kn_transpose(in[0], -1, -2) : in[0];
    return kn_scaled_dot_product_attention(q, in[1], in[2], c->float_mask ? in[3] : c->mask, c->o);
}

static void test_attention(void) {
    kn_scope_push();
    /* Grouped heads (H 4, Hkv 2), with and without causal (bottom-right, top-left), Tq < Tk and
     * Tq > Tk (where bottom-right leaves the first queries no key). */
    int64_t lens[3][2] = {{3, 5}, {5, 5}, {6, 4}};
    for (int li = 0; li < 3; li++)
        for (int causal = 0; causal < 3; causal++) {
            int64_t tq = lens[li][0], tk = lens[li][1];
            kn_causal_align align = causal == 2 ? KN_CAUSAL_TOP_LEFT : KN_CAUSAL_BOTTOM_RIGHT;
            attn_case c = {.o = {.causal = causal > 0, .causal_align = align, .scale = li == 2 ? 0.7 : 0}};
            GRADCHECK("attention", f_attn, &c, 3, GC_IN(KN_SHAPE(2, 4, tq, 3), -1, 1), GC_IN(KN_SHAPE(2, 2, tk, 3), -1, 1),
                      GC_IN(KN_SHAPE(2, 2, tk, 2), -1, 1));
        }
    /* A bool mask broadcast over the batch, a custom scale, and batch broadcasting of k and v. */
    double mv[20];
    for (int i = 0; i < 20; i++) mv[i] = i % 3 != 1 || i % 5 == 0;
    attn_case m = {.o = {.scale = 0.6}, .mask = tensor_from(mv, KN_SHAPE(4, 5), KN_BOOL)};
    GRADCHECK("attention bool mask", f_attn, &m, 3, GC_IN(KN_SHAPE(2, 2, 4, 3), -1, 1), GC_IN(KN_SHAPE(1, 2, 5, 3), -1, 1),
              GC_IN(KN_SHAPE(2, 5, 3), -1, 1));
    /* A float mask, differentiated, broadcast over heads, with causal. */
    attn_case fm = {.o = {.causal = true}, .float_mask = true};
    GRADCHECK("attention float mask", f_attn, &fm, 4, GC_IN(KN_SHAPE(2, 2, 4, 3), -1, 1), GC_IN(KN_SHAPE(2, 1, 4, 3), -1, 1),
              GC_IN(KN_SHAPE(2, 1, 4, 3), -1, 1), GC_IN(KN_SHAPE(2, 1, 4, 4), -1, 1));
    /* 2-d q, k, v; a transposed q; dropout with a replayed mask. */
    attn_case plain = {0};
    GRADCHECK("attention 2-d", f_attn, &plain, 3, GC_IN(KN_SHAPE(3, 4), -1, 1), GC_IN(KN_SHAPE(5, 4), -1, 1),
              GC_IN(KN_SHAPE(5, 2), -1, 1));
    attn_case tr = {.o = {.causal = true}, .transpose_q = true};
    GRADCHECK("attention transposed q", f_attn, &tr, 3, GC_IN(KN_SHAPE(2, 3, 4), -1, 1), GC_IN(KN_SHAPE(2, 4, 3), -1, 1),
              GC_IN(KN_SHAPE(2, 4, 3), -1, 1));
    attn_case dr = {.o = {.dropout_p = 0.3, .causal = true}, .reseed = true};
    GRADCHECK("attention dropout", f_attn, &dr, 3, GC_IN(KN_SHAPE(2, 5, 3), -1, 1), GC_IN(KN_SHAPE(2, 5, 3), -1, 1),
              GC_IN(KN_SHAPE(2, 5, 3), -1, 1));
    /* Longer than one block of queries (64) and keys (128). */
    attn_case lc = {.o = {.causal = true}};
    GRADCHECK("attention long", f_attn, &lc, 3, GC_IN(KN_SHAPE(1, 70, 2), -1, 1), GC_IN(KN_SHAPE(1, 140, 2), -1, 1),
              GC_IN(KN_SHAPE(1, 140, 2), -1, 1));
    /* f32 against f64: blocks, grouped heads, causal, float mask, dropout. */
    attn_case f1 = {.o = {.causal = true}};
    CHECK_F32("attention f32", f_attn, &f1, 3, GC_IN(KN_SHAPE(2, 4, 150, 16), -1, 1), GC_IN(KN_SHAPE(2, 2, 200, 16), -1, 1),
              GC_IN(KN_SHAPE(2, 2, 200, 8), -1, 1));
    attn_case f2 = {.float_mask = true, .o = {.dropout_p = 0.2}, .reseed = true};
    CHECK_F32("attention f32 mask dropout", f_attn, &f2, 4, GC_IN(KN_SHAPE(3, 70, 8), -1, 1), GC_IN(KN_SHAPE(3, 130, 8), -1, 1),
              GC_IN(KN_SHAPE(3, 130, 8), -1, 1), GC_IN(KN_SHAPE(70, 130), -1, 1));
    kn_scope_pop();
}

/* A query that sees no key gives zeros forward (as PyTorch) and no gradient, NaN nowhere. */
static void test_attention_masked_row(void) {
    kn_scope_push();
    kn_tensor *q = kn_requires_grad(rand_tensor(KN_SHAPE(3, 2), KN_F64, -1, 1), true);
    kn_tensor *k = kn_requires_grad(rand_tensor(KN_SHAPE(4, 2), KN_F64, -1, 1), true);
    double mv[12] = {1, 1, 0, 1, 0, 0, 0, 0, 1, 0, 1, 1};
    kn_tensor *mask = tensor_from(mv, KN_SHAPE(3, 4), KN_BOOL);
    kn_tensor *out = kn_scaled_dot_product_attention(q, k, k, mask, (kn_sdpa_opts){0});
    double *ov = read_f64(out);
    CHECK(ov && ov[2] == 0 && ov[3] == 0);
    free(ov);
    CHECK(kn_backward(kn_sum(out, KN_ALL_DIMS, false)) == KN_OK);
    double *gq = read_f64(kn_grad(q)), *gk = read_f64(kn_grad(k));
    CHECK(gq != NULL && gk != NULL);
    for (int i = 0; gq && i < 6; i++) CHECK(isfinite(gq[i]));
    for (int i = 0; gk && i < 8; i++) CHECK(isfinite(gk[i]));
    CHECK(gq && gq[2] == 0 && gq[3] == 0);
    free(gq), free(gk);
    kn_scope_pop();
}

int main(void) {
    RUN(test_every_op_is_listed);
    RUN(test_cross_entropy);
    RUN(test_class_weight_gradient_is_refused);
    RUN(test_pointwise_losses);
    RUN(test_dropout);
    RUN(test_attention);
    RUN(test_attention_masked_row);
    return test_summary();
}
