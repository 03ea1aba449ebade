/* Gradients of the nn ops (normalization, convolution, pooling, resampling) against finite
 * differences, f32 gradients against f64 ones, and the family's place in the gradient table. */
#include <stdlib.h>

#include "gradcheck.h"
#include "ops/grad.h"

/* in[0] arrives as [.., b, a] and is transposed to [.., a, b]: a non-contiguous input. */
static kn_tensor *swap_last(kn_tensor *t) { return kn_transpose(t, -1, -2); }

/* ---- normalization ---- */

/* ctx: 0 weight and bias, 1 weight only, 2 none, 3 bias only; x [3, 5, 4] -> [3, 4, 5]. */
static kn_tensor *f_layer_norm(kn_tensor *const *in, const void *ctx) {
    int k = *(const int *)ctx;
    kn_tensor *w = k <= 1 ? in[1] : NULL, *b = k == 0 ? in[2] : k == 3 ? in[1] : NULL;
    return kn_layer_norm(swap_last(in[0]), KN_SHAPE(4, 5), w, b, 1e-5);
}
static kn_tensor *f_layer_norm_last(kn_tensor *const *in, const void *ctx) {
    return kn_layer_norm(in[0], KN_SHAPE(6), in[1], in[2], 1e-3);
}
static kn_tensor *f_rms_norm(kn_tensor *const *in, const void *ctx) {
    return kn_rms_norm(swap_last(in[0]), KN_SHAPE(4, 5), ctx ? in[1] : NULL, 1e-6);
}

static void test_layer_norm_and_rms_norm(void) {
    for (int k = 0; k < 4; k++) {
        int n = k == 2 ? 1 : k == 0 ? 3 : 2;
        GRADCHECK("layer_norm", f_layer_norm, &k, n, GC_IN(KN_SHAPE(3, 5, 4), -2, 2), GC_IN(KN_SHAPE(4, 5), 0.5, 1.5),
                  GC_IN(KN_SHAPE(4, 5), -1, 1));
    }
    GRADCHECK("layer_norm last dim", f_layer_norm_last, NULL, 3, GC_IN(KN_SHAPE(7, 6), -3, 1),
              GC_IN(KN_SHAPE(6), -1, 1), GC_IN(KN_SHAPE(6), -1, 1));
    GRADCHECK("rms_norm", f_rms_norm, "w", 2, GC_IN(KN_SHAPE(3, 5, 4), -2, 2), GC_IN(KN_SHAPE(4, 5), 0.5, 1.5));
    GRADCHECK("rms_norm no weight", f_rms_norm, NULL, 1, GC_IN(KN_SHAPE(3, 5, 4), -2, 2));
}

typedef struct gn_case {
    int64_t groups;
    bool affine;
} gn_case;
static kn_tensor *f_group_norm(kn_tensor *const *in, const void *ctx) {
    const gn_case *g = ctx;
    return kn_group_norm(swap_last(in[0]), g->groups, g->affine ? in[1] : NULL, g->affine ? in[2] : NULL, 1e-5);
}

static void test_group_norm(void) {
    gn_case cases[] = {{3, true}, {1, true}, {6, true}, {2, false}};
    for (int k = 0; k < 4; k++)
        GRADCHECK("group_norm", f_group_norm, &cases[k], cases[k].affine ? 3 : 1, GC_IN(KN_SHAPE(2, 6, 2, 3), -2, 2),
                  GC_IN(KN_SHAPE(6), 0.5, 1.5), GC_IN(KN_SHAPE(6), -1, 1));
}

/* ctx: the batch_norm variant; running statistics (fixed inputs) are in[3], in[4]. */
typedef struct bn_case {
    bool training, affine, running;
} bn_case;
static kn_tensor *f_batch_norm(kn_tensor *const *in, const void *ctx) {
    const bn_case *b = ctx;
    kn_tensor *x = in[0]->ndim == 4 ? swap_last(in[0]) : in[0];
    return kn_batch_norm(x, b->running ? in[3] : NULL, b->running ? in[4] : NULL, b->affine ? in[1] : NULL,
                         b->affine ? in[2] : NULL, b->training, 0.1, 1e-5);
}

static void test_batch_norm(void) {
    bn_case cases[] = {{true, true, false}, {true, false, false}, {true, true, true}, {false, true, true},
                       {false, false, true}};
    for (int k = 0; k < 5; k++) {
        /* left to the scope: batch_norm's in-place outputs detach them from it (kn_op_run) */
        kn_tensor *rm = rand_tensor(KN_SHAPE(4), KN_F64, -0.5, 0.5), *rv = rand_tensor(KN_SHAPE(4), KN_F64, 0.5, 2);
        int n = cases[k].running ? 5 : cases[k].affine ? 3 : 1;
        GRADCHECK("batch_norm", f_batch_norm, &cases[k], n, GC_IN(KN_SHAPE(3, 4, 3, 2), -2, 2),
                  GC_IN(KN_SHAPE(4), 0.5, 1.5), GC_IN(KN_SHAPE(4), -1, 1), GC_FIXED(rm), GC_FIXED(rv));
        /* [N, C] input */
        GRADCHECK("batch_norm 2-d", f_batch_norm, &cases[k], n, GC_IN(KN_SHAPE(5, 4), -2, 2),
                  GC_IN(KN_SHAPE(4), 0.5, 1.5), GC_IN(KN_SHAPE(4), -1, 1), GC_FIXED(rm), GC_FIXED(rv));
    }
}

/* ---- convolution ---- */

typedef struct conv_case {
    kn_conv_opts o;
    bool bias;
} conv_case;
static kn_tensor *f_conv2d(kn_tensor *const *in, const void *ctx) {
    const conv_case *c = ctx;
    return kn_conv2d(swap_last(in[0]), in[1], c->bias ? in[2] : NULL, c->o);
}
static kn_tensor *f_conv_transpose2d(kn_tensor *const *in, const void *ctx) {
    const conv_case *c = ctx;
    return kn_conv_transpose2d(swap_last(in[0]), in[1], c->bias ? in[2] : NULL, c->o);
}

static void test_conv2d(void) {
    /* x [2, 4, 5, 6] (stored [2, 4, 6, 5]); weight [6, 4/groups, 3, 2] */
    conv_case cases[] = {
        {{.groups = 1}, true},
        {{.stride = {2, 3}, .padding = {1, 1}, .dilation = {1, 2}, .groups = 2}, true}, /* floor drops rows */
        {{.stride = {2, 1}, .groups = 1}, false},
    };
    for (int k = 0; k < 3; k++) {
        int64_t g = cases[k].o.groups;
        GRADCHECK("conv2d", f_conv2d, &cases[k], cases[k].bias ? 3 : 2, GC_IN(KN_SHAPE(2, 4, 6, 5), -1, 1),
                  GC_IN(KN_SHAPE(6, 4 / g, 3, 2), -1, 1), GC_IN(KN_SHAPE(6), -1, 1));
    }
    conv_case pointwise = {{.groups = 2}, true}; /* 1x1: the kernels' direct path */
    GRADCHECK("conv2d 1x1", f_conv2d, &pointwise, 3, GC_IN(KN_SHAPE(2, 4, 3, 3), -1, 1),
              GC_IN(KN_SHAPE(6, 2, 1, 1), -1, 1), GC_IN(KN_SHAPE(6), -1, 1));
}

static void test_conv_transpose2d(void) {
    /* x [2, 4, 3, 4] (stored [2, 4, 4, 3]); weight [4, 6/groups, 3, 2] */
    conv_case cases[] = {
        {{.groups = 1}, true},
        {{.stride = {2, 3}, .padding = {1, 0}, .output_padding = {1, 2}, .groups = 2}, true},
        {{.dilation = {3, 1}, .output_padding = {2, 0}, .groups = 1}, false}, /* output_padding >= stride */
    };
    for (int k = 0; k < 3; k++) {
        int64_t g = cases[k].o.groups;
        GRADCHECK("conv_transpose2d", f_conv_transpose2d, &cases[k], cases[k].bias ? 3 : 2,
                  GC_IN(KN_SHAPE(2, 4, 4, 3), -1, 1), GC_IN(KN_SHAPE(4, 6 / g, 3, 2), -1, 1),
                  GC_IN(KN_SHAPE(6), -1, 1));
    }
}

/* ---- pooling and resampling ---- */

static kn_tensor *f_max_pool(kn_tensor *const *in, const void *ctx) {
    return kn_max_pool2d(swap_last(in[0]), *(const kn_pool_opts *)ctx);
}
static kn_tensor *f_avg_pool(kn_tensor *const *in, const void *ctx) {
    return kn_avg_pool2d(swap_last(in[0]), *(const kn_pool_opts *)ctx);
}

static void test_pooling(void) {
    kn_pool_opts max_cases[] = {
        {.kernel = {2, 2}},
        {.kernel = {3, 2}, .stride = {2, 1}, .padding = {1, 1}, .dilation = {1, 2}},
        {.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 0}, .ceil_mode = true}, /* overlapping windows */
    };
    for (int k = 0; k < 3; k++)
        GRADCHECK("max_pool2d", f_max_pool, &max_cases[k], 1, GC_IN(KN_SHAPE(2, 3, 6, 5), -1, 1));
    GRADCHECK("max_pool2d 3-d", f_max_pool, &max_cases[1], 1, GC_IN(KN_SHAPE(2, 6, 5), -1, 1));
    kn_pool_opts avg_cases[] = {
        {.kernel = {2, 3}},
        {.kernel = {3, 2}, .stride = {2, 1}, .padding = {1, 1}},
        {.kernel = {3, 2}, .stride = {2, 1}, .padding = {1, 1}, .exclude_pad = true},
        {.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}, .ceil_mode = true},
        {.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}, .ceil_mode = true, .exclude_pad = true},
    };
    for (int k = 0; k < 5; k++)
        GRADCHECK("avg_pool2d", f_avg_pool, &avg_cases[k], 1, GC_IN(KN_SHAPE(2, 3, 6, 5), -1, 1));
    GRADCHECK("avg_pool2d 3-d", f_avg_pool, &avg_cases[2], 1, GC_IN(KN_SHAPE(2, 6, 5), -1, 1));
}

/* ctx: {op (0 adaptive, 1 nearest, 2 bilinear, 3 bilinear align_corners), out_h, out_w}. */
static kn_tensor *f_resize(kn_tensor *const *in, const void *ctx) {
    const int64_t *r = ctx;
    kn_tensor *x = swap_last(in[0]);
    switch (r[0]) {
    case 0: return kn_adaptive_avg_pool2d(x, r[1], r[2]);
    case 1: return kn_upsample_nearest2d(x, r[1], r[2]);
    default: return kn_upsample_bilinear2d(x, r[1], r[2], r[0] == 3);
    }
}

static void test_resampling(void) {
    static const char *names[] = {"adaptive_avg_pool2d", "upsample_nearest2d", "upsample_bilinear2d",
                                  "upsample_bilinear2d align_corners"};
    int64_t sizes[][2] = {{3, 2}, {8, 11}, {1, 1}, {5, 3}};
    for (int op = 0; op < 4; op++)
        for (int s = 0; s < 4; s++) {
            int64_t r[3] = {op, sizes[s][0], sizes[s][1]};
            /* x [2, 2, 5, 4] (stored [2, 2, 4, 5]) */
            GRADCHECK(names[op], f_resize, r, 1, GC_IN(KN_SHAPE(2, 2, 4, 5), -1, 1));
        }
    int64_t r3[3] = {2, 7, 3};
    GRADCHECK("upsample_bilinear2d 3-d", f_resize, r3, 1, GC_IN(KN_SHAPE(3, 4, 5), -1, 1));
}

/* ---- f32 gradients ---- */

/* Runs f on inputs of dtype (the values of v64, rounded) and returns their gradients for the
 * loss sum(f(in) * r). */
static void grads_in(kn_dtype dt, gc_fn f, const void *ctx, int n, kn_tensor **v64, kn_tensor *r, kn_tensor **g) {
    kn_scope_push();
    kn_tensor *in[8];
    for (int i = 0; i < n; i++) in[i] = kn_requires_grad(kn_cast(v64[i], dt), true);
    kn_tensor *out = f(in, ctx);
    CHECK(out && kn_backward(kn_sum(kn_mul(kn_cast(out, KN_F64), r), KN_ALL_DIMS, false)) == KN_OK);
    for (int i = 0; i < n; i++) g[i] = kn_keep(kn_grad(in[i]));
    kn_scope_pop();
}

/* Each input's f32 gradient is f32 and within 1e-3 (relative to the gradient's scale) of the
 * f64 one on the same (f32-representable) values. */
static void check_f32(const char *what, gc_fn f, const void *ctx, int n, const kn_shape *shapes) {
    kn_scope_push();
    kn_tensor *v[8], *g32[8] = {0}, *g64[8] = {0};
    for (int i = 0; i < n; i++) v[i] = kn_cast(rand_tensor(shapes[i], KN_F32, 0.5, 1.5), KN_F64);
    kn_no_grad_push();
    kn_tensor *probe = f(v, ctx);
    kn_no_grad_pop();
    kn_tensor *r = rand_tensor(kn_shape_of(probe), KN_F64, -1, 1);
    grads_in(KN_F32, f, ctx, n, v, r, g32);
    grads_in(KN_F64, f, ctx, n, v, r, g64);
    for (int i = 0; i < n; i++) {
        CHECK_MSG(g32[i] && kn_dtype_of(g32[i]) == KN_F32, "%s: input %d's gradient is not f32", what, i);
        double *a = read_f64(g32[i]), *b = read_f64(g64[i]), scale = 1e-12, err = 0;
        int64_t cnt = kn_shape_numel(shapes[i]);
        for (int64_t j = 0; a && b && j < cnt; j++) scale = fmax(scale, fabs(b[j]));
        for (int64_t j = 0; a && b && j < cnt; j++) err = fmax(err, fabs(a[j] - b[j]));
        CHECK_MSG(a && b && err <= 1e-3 * scale, "%s: input %d: f32 gradient off by %g (scale %g)", what, i, err, scale);
        free(a), free(b);
        kn_release(g32[i]), kn_release(g64[i]);
    }
    kn_scope_pop();
}

static void test_f32_gradients(void) {
    int ln = 0;
    check_f32("layer_norm", f_layer_norm, &ln, 3, (kn_shape[]){KN_SHAPE(3, 5, 4), KN_SHAPE(4, 5), KN_SHAPE(4, 5)});
    check_f32("rms_norm", f_rms_norm, "w", 2, (kn_shape[]){KN_SHAPE(3, 5, 4), KN_SHAPE(4, 5)});
    gn_case gn = {3, true};
    check_f32("group_norm", f_group_norm, &gn, 3, (kn_shape[]){KN_SHAPE(2, 6, 2, 3), KN_SHAPE(6), KN_SHAPE(6)});
    bn_case bn = {true, true, false};
    check_f32("batch_norm", f_batch_norm, &bn, 3, (kn_shape[]){KN_SHAPE(3, 4, 3, 2), KN_SHAPE(4), KN_SHAPE(4)});
    conv_case cv = {{.stride = {2, 1}, .padding = {1, 0}, .groups = 2}, true};
    check_f32("conv2d", f_conv2d, &cv, 3, (kn_shape[]){KN_SHAPE(2, 4, 6, 5), KN_SHAPE(6, 2, 3, 2), KN_SHAPE(6)});
    conv_case ct = {{.stride = {2, 1}, .padding = {1, 0}, .output_padding = {1, 0}, .groups = 2}, true};
    check_f32("conv_transpose2d", f_conv_transpose2d, &ct, 3,
              (kn_shape[]){KN_SHAPE(2, 4, 4, 3), KN_SHAPE(4, 3, 3, 2), KN_SHAPE(6)});
    kn_pool_opts mp = {.kernel = {3, 2}, .stride = {2, 1}, .padding = {1, 1}};
    check_f32("max_pool2d", f_max_pool, &mp, 1, (kn_shape[]){KN_SHAPE(2, 3, 6, 5)});
    check_f32("avg_pool2d", f_avg_pool, &mp, 1, (kn_shape[]){KN_SHAPE(2, 3, 6, 5)});
    for (int op = 0; op < 4; op++) {
        int64_t r[3] = {op, 7, 3};
        check_f32("resampling", f_resize, r, 1, (kn_shape[]){KN_SHAPE(2, 2, 4, 5)});
    }
}

/* ---- the table ---- */

static void test_family_in_grad_table(void) {
    static const kn_op_id family[] = {
#define KN_OP(name, ...) KN_OP_##name,
#include "ops/defs/nn.def"
#undef KN_OP
    };
    for (size_t k = 0; k < sizeof family / sizeof family[0]; k++) {
        const kn_grad_def *d = &kn_grad_table[family[k]];
        CHECK_MSG(d->fn || d->nondiff, "%s is in neither KN_GRAD nor KN_NO_GRAD", kn_op_name(family[k]));
    }
}

int main(void) {
    RUN(test_layer_norm_and_rms_norm);
    RUN(test_group_norm);
    RUN(test_batch_norm);
    RUN(test_conv2d);
    RUN(test_conv_transpose2d);
    RUN(test_pooling);
    RUN(test_resampling);
    RUN(test_f32_gradients);
    RUN(test_family_in_grad_table);
    return test_summary();
}
