/* Gradients of the index family (src/ops/grad_index.c, grad_index_put.c, grad_embedding.c):
 * gradcheck on float64 for every op and attribute variant, with duplicate indices, broadcast
 * and non-contiguous inputs; f32 gradients against the f64 ones; the family's coverage in
 * the gradient table. (embedding_backward's forward is checked in test_index.c.) */
#include <stdlib.h>

#include "gradcheck.h"
#include "ops/grad.h"

static kn_tensor *ints(const double *v, kn_shape shape) { return tensor_from(v, shape, KN_I64); }
#define INTS(shape, ...) ints((const double[]){__VA_ARGS__}, shape)

/* x [a, b] given as its transpose [b, a]: the op sees a non-contiguous view. */
static kn_tensor *tr(kn_tensor *x) { return kn_transpose(x, 0, 1); }

/* ---- f32 against f64 ------------------------------------------------------------------------
 * The same computation on f32 leaves (values rounded to f32, used by both runs): each
 * gradient must be f32 and close to the f64 one. */

static kn_tensor *loss_and_grads(gc_fn f, const void *ctx, int n, const gc_input *in, double *const *vals,
                                 kn_dtype dt, kn_tensor **grads) {
    kn_tensor *args[8], *leaves[8] = {0};
    for (int i = 0; i < n; i++) {
        args[i] = in[i].fixed ? in[i].fixed : kn_requires_grad(tensor_from(vals[i], in[i].shape, dt), true);
        leaves[i] = in[i].fixed ? NULL : args[i];
    }
    kn_tensor *out = f(args, ctx);
    kn_tensor *r = out ? kn_cos(kn_cast(kn_reshape(kn_arange(0, (double)kn_numel(out), 1, KN_F64), kn_shape_of(out)), KN_F64)) : NULL;
    kn_tensor *loss = r ? kn_sum(kn_mul(kn_cast(out, KN_F64), r), KN_ALL_DIMS, false) : NULL;
    if (!loss || kn_backward(loss) != KN_OK) return NULL;
    for (int i = 0; i < n; i++) grads[i] = leaves[i] ? kn_grad(leaves[i]) : NULL;
    return loss;
}

static void check_f32_at(const char *what, gc_fn f, const void *ctx, int n, const gc_input *in, const char *file,
                         int line) {
    kn_scope_push();
    double *vals[8] = {0};
    for (int i = 0; i < n; i++) {
        if (in[i].fixed) continue;
        int64_t cnt = kn_shape_numel(in[i].shape);
        vals[i] = malloc(sizeof(double) * (size_t)(cnt ? cnt : 1));
        rand_fill(vals[i], cnt, in[i].lo, in[i].hi);
        for (int64_t j = 0; j < cnt; j++) vals[i][j] = (float)vals[i][j];
    }
    kn_tensor *g64[8] = {0}, *g32[8] = {0};
    bool ok = loss_and_grads(f, ctx, n, in, vals, KN_F64, g64) && loss_and_grads(f, ctx, n, in, vals, KN_F32, g32);
    if (!ok) test_fail(file, line, "%s (f32): forward or backward failed: %s", what, kn_last_error());
    for (int i = 0; ok && i < n; i++) {
        if (in[i].fixed || !g64[i]) continue;
        if (!g32[i] || kn_dtype_of(g32[i]) != KN_F32) {
            test_fail(file, line, "%s (f32): input %d's gradient is missing or not f32", what, i);
            continue;
        }
        double *want = read_f64(g64[i]);
        char name[160];
        snprintf(name, sizeof name, "%s (f32) input %d", what, i);
        check_close_at(g32[i], want, (tolerance){1e-4, 1e-5}, name, file, line);
        free(want);
    }
    for (int i = 0; i < n; i++) free(vals[i]);
    kn_scope_pop();
}
#define CHECK_F32(what, f, ctx, n, ...) \
    check_f32_at((what), (f), (ctx), (n), (const gc_input[]){__VA_ARGS__}, __FILE__, __LINE__)

/* ---- index_select, gather, scatter family --------------------------------------------------- */

typedef struct axis_ctx {
    int64_t dim;
    kn_tensor *index;
    int reduce; /* scatter_reduce: kn_scatter_reduce_op */
    bool include_self;
    double alpha;
} axis_ctx;

static kn_tensor *f_index_select(kn_tensor *const *in, const void *ctx) {
    const axis_ctx *a = ctx;
    return kn_index_select(tr(in[0]), a->dim, a->index);
}

static void test_index_select(void) {
    kn_tensor *rows = INTS(KN_SHAPE(4), 2, 0, 2, 3), *cols = INTS(KN_SHAPE(6), 4, 4, 1, 0, 4, 3);
    axis_ctx a0 = {.dim = 0, .index = rows}, a1 = {.dim = -1, .index = cols};
    axis_ctx a2 = {.dim = 1, .index = INTS(KN_SHAPE0, 3)};
    GRADCHECK("index_select dim 0", f_index_select, &a0, 1, GC_IN(KN_SHAPE(5, 4), -1, 1));
    GRADCHECK("index_select dim -1", f_index_select, &a1, 1, GC_IN(KN_SHAPE(5, 4), -1, 1));
    GRADCHECK("index_select 0-d index", f_index_select, &a2, 1, GC_IN(KN_SHAPE(5, 4), -1, 1));
    CHECK_F32("index_select", f_index_select, &a0, 1, GC_IN(KN_SHAPE(5, 4), -1, 1));
}

static kn_tensor *f_gather(kn_tensor *const *in, const void *ctx) {
    const axis_ctx *a = ctx;
    return kn_gather(tr(in[0]), a->dim, a->index);
}

static void test_gather(void) {
    kn_tensor *i0 = INTS(KN_SHAPE(2, 4), 0, 3, 3, 1, 2, 2, 0, 0), *i1 = INTS(KN_SHAPE(3, 2), 1, 1, 0, 3, 2, 0);
    axis_ctx a0 = {.dim = 0, .index = i0}, a1 = {.dim = 1, .index = i1};
    GRADCHECK("gather dim 0", f_gather, &a0, 1, GC_IN(KN_SHAPE(4, 4), -1, 1));
    GRADCHECK("gather dim 1", f_gather, &a1, 1, GC_IN(KN_SHAPE(4, 4), -1, 1));
    CHECK_F32("gather", f_gather, &a0, 1, GC_IN(KN_SHAPE(4, 4), -1, 1));
}

/* x [3, 4] (given transposed), src [3, 5] larger than the index. */
static kn_tensor *f_scatter(kn_tensor *const *in, const void *ctx) {
    const axis_ctx *a = ctx;
    return kn_scatter(tr(in[0]), a->dim, a->index, in[1]);
}

static kn_tensor *f_scatter_value(kn_tensor *const *in, const void *ctx) {
    const axis_ctx *a = ctx;
    return kn_scatter_value(tr(in[0]), a->dim, a->index, 2.5);
}

static kn_tensor *f_scatter_add(kn_tensor *const *in, const void *ctx) {
    const axis_ctx *a = ctx;
    return kn_scatter_add(tr(in[0]), a->dim, a->index, in[1]);
}

static void test_scatter(void) {
    /* Duplicates along the dim: only the last write of each element carries a gradient. */
    kn_tensor *i0 = INTS(KN_SHAPE(2, 3), 2, 0, 1, 2, 0, 0), *i1 = INTS(KN_SHAPE(3, 3), 1, 3, 1, 0, 0, 2, 3, 1, 3);
    for (int k = 0; k < 2; k++) {
        axis_ctx a = {.dim = k, .index = k ? i1 : i0};
        GRADCHECK("scatter", f_scatter, &a, 2, GC_IN(KN_SHAPE(4, 3), -1, 1), GC_IN(KN_SHAPE(3, 5), -1, 1));
        GRADCHECK("scatter_value", f_scatter_value, &a, 1, GC_IN(KN_SHAPE(4, 3), -1, 1));
        GRADCHECK("scatter_add", f_scatter_add, &a, 2, GC_IN(KN_SHAPE(4, 3), -1, 1), GC_IN(KN_SHAPE(3, 5), -1, 1));
    }
    axis_ctx a = {.dim = 1, .index = i1};
    CHECK_F32("scatter", f_scatter, &a, 2, GC_IN(KN_SHAPE(4, 3), -1, 1), GC_IN(KN_SHAPE(3, 5), -1, 1));
    CHECK_F32("scatter_value", f_scatter_value, &a, 1, GC_IN(KN_SHAPE(4, 3), -1, 1));
    CHECK_F32("scatter_add", f_scatter_add, &a, 2, GC_IN(KN_SHAPE(4, 3), -1, 1), GC_IN(KN_SHAPE(3, 5), -1, 1));
}

static kn_tensor *f_scatter_reduce(kn_tensor *const *in, const void *ctx) {
    const axis_ctx *a = ctx;
    return kn_scatter_reduce(tr(in[0]), a->dim, a->index, in[1], (kn_scatter_reduce_op)a->reduce, a->include_self);
}

static void test_scatter_reduce(void) {
    /* Column 3 is never written. */
    kn_tensor *i0 = INTS(KN_SHAPE(3, 3), 2, 0, 1, 2, 0, 0, 1, 2, 0), *i1 = INTS(KN_SHAPE(3, 3), 1, 2, 1, 0, 0, 2, 1, 1, 1);
    const char *names[] = {"sum", "prod", "mean", "amax", "amin"};
    for (int op = KN_SCATTER_SUM; op <= KN_SCATTER_AMIN; op++)
        for (int k = 0; k < 4; k++) {
            axis_ctx a = {.dim = k & 1, .index = k & 1 ? i1 : i0, .reduce = op, .include_self = k < 2};
            char what[64];
            snprintf(what, sizeof what, "scatter_reduce %s dim %d include_self %d", names[op], k & 1, k < 2);
            /* prod: factors away from 0; amax/amin: distinct values, so no ties. */
            GRADCHECK(what, f_scatter_reduce, &a, 2, GC_IN(KN_SHAPE(4, 3), 0.5, 1.5), GC_IN(KN_SHAPE(3, 4), 0.5, 1.5));
            CHECK_F32(what, f_scatter_reduce, &a, 2, GC_IN(KN_SHAPE(4, 3), 0.5, 1.5), GC_IN(KN_SHAPE(3, 4), 0.5, 1.5));
        }
}

/* prod with zero factors, against the exact products of the other factors. */
static void test_scatter_reduce_prod_zeros(void) {
    kn_scope_push();
    kn_tensor *x = kn_requires_grad(tensor_from((const double[]){0, 3, 2}, KN_SHAPE(3), KN_F64), true);
    kn_tensor *src = kn_requires_grad(tensor_from((const double[]){4, 5, 0, 2, 0, 0, 7}, KN_SHAPE(7), KN_F64), true);
    kn_tensor *index = INTS(KN_SHAPE(7), 0, 0, 1, 1, 2, 2, 2);
    kn_tensor *out = kn_scatter_reduce(x, 0, index, src, KN_SCATTER_PROD, true);
    CHECK(kn_backward(kn_sum(out, KN_ALL_DIMS, false)) == KN_OK);
    CHECK_CLOSE(kn_grad(x), ((const double[]){20, 0, 0}), tol_for(KN_F64), "prod: x with a zero");
    CHECK_CLOSE(kn_grad(src), ((const double[]){0, 0, 6, 0, 0, 0, 0}), tol_for(KN_F64), "prod: src zeros");
    kn_scope_pop();
}

static kn_tensor *f_index_add(kn_tensor *const *in, const void *ctx) {
    const axis_ctx *a = ctx;
    return kn_index_add(tr(in[0]), a->dim, a->index, in[1], a->alpha);
}

static void test_index_add(void) {
    kn_tensor *rows = INTS(KN_SHAPE(5), 3, 0, 3, 1, 3), *cols = INTS(KN_SHAPE(2), 2, 2);
    axis_ctx a0 = {.dim = 0, .index = rows, .alpha = 1}, a1 = {.dim = 1, .index = cols, .alpha = -2.5};
    axis_ctx a2 = {.dim = 0, .index = rows, .alpha = 0.5};
    GRADCHECK("index_add dim 0", f_index_add, &a0, 2, GC_IN(KN_SHAPE(3, 4), -1, 1), GC_IN(KN_SHAPE(5, 3), -1, 1));
    GRADCHECK("index_add dim 1 alpha", f_index_add, &a1, 2, GC_IN(KN_SHAPE(3, 4), -1, 1), GC_IN(KN_SHAPE(4, 2), -1, 1));
    CHECK_F32("index_add", f_index_add, &a2, 2, GC_IN(KN_SHAPE(3, 4), -1, 1), GC_IN(KN_SHAPE(5, 3), -1, 1));
}

/* ---- index_put, masks, sort --------------------------------------------------------------------- */

typedef struct put_ctx {
    int n;
    kn_tensor *index[2];
    bool accumulate;
} put_ctx;

/* x [4, 3, 2] (its last two dims given swapped). */
static kn_tensor *f_index_put(kn_tensor *const *in, const void *ctx) {
    const put_ctx *p = ctx;
    return kn_index_put(kn_transpose(in[0], 1, 2), p->index, p->n, in[1], p->accumulate);
}

static void test_index_put(void) {
    /* One index tensor with a negative and a duplicate; two broadcast together [2, 1] x [3]
     * with repeats; values broadcast in both. */
    kn_tensor *one = INTS(KN_SHAPE(4), 1, -1, 3, 0), *a = INTS(KN_SHAPE(2, 1), 2, -4), *b = INTS(KN_SHAPE(3), 1, 0, 1);
    for (int acc = 0; acc < 2; acc++) {
        put_ctx p1 = {.n = 1, .index = {one}, .accumulate = acc}, p2 = {.n = 2, .index = {a, b}, .accumulate = acc};
        GRADCHECK(acc ? "index_put 1 accumulate" : "index_put 1", f_index_put, &p1, 2, GC_IN(KN_SHAPE(4, 2, 3), -1, 1),
                  GC_IN(KN_SHAPE(4, 1, 2), -1, 1));
        GRADCHECK(acc ? "index_put 2 accumulate" : "index_put 2", f_index_put, &p2, 2, GC_IN(KN_SHAPE(4, 2, 3), -1, 1),
                  GC_IN(KN_SHAPE(3, 2), -1, 1));
        CHECK_F32("index_put", f_index_put, &p2, 2, GC_IN(KN_SHAPE(4, 2, 3), -1, 1), GC_IN(KN_SHAPE(2, 3, 2), -1, 1));
    }
}

static kn_tensor *f_masked_fill(kn_tensor *const *in, const void *ctx) {
    return kn_masked_fill(tr(in[0]), (kn_tensor *)ctx, -3);
}

static kn_tensor *f_masked_select(kn_tensor *const *in, const void *ctx) {
    return kn_masked_select(in[0], (kn_tensor *)ctx);
}

static kn_tensor *f_masked_select_t(kn_tensor *const *in, const void *ctx) {
    return kn_masked_select(tr(in[0]), (kn_tensor *)ctx);
}

static void test_masks(void) {
    kn_tensor *row = tensor_from((const double[]){1, 0, 0, 1}, KN_SHAPE(4), KN_BOOL);
    kn_tensor *full = tensor_from((const double[]){1, 0, 1, 1, 0, 0, 0, 1, 1, 1, 0, 1}, KN_SHAPE(3, 4), KN_BOOL);
    GRADCHECK("masked_fill broadcast mask", f_masked_fill, row, 1, GC_IN(KN_SHAPE(4, 3), -1, 1));
    GRADCHECK("masked_fill", f_masked_fill, full, 1, GC_IN(KN_SHAPE(4, 3), -1, 1));
    CHECK_F32("masked_fill", f_masked_fill, full, 1, GC_IN(KN_SHAPE(4, 3), -1, 1));
    GRADCHECK("masked_select", f_masked_select_t, full, 1, GC_IN(KN_SHAPE(4, 3), -1, 1));
    GRADCHECK("masked_select broadcast x", f_masked_select, full, 1, GC_IN(KN_SHAPE(4), -1, 1));
    GRADCHECK("masked_select broadcast mask", f_masked_select, row, 1, GC_IN(KN_SHAPE(2, 4), -1, 1));
    CHECK_F32("masked_select", f_masked_select_t, full, 1, GC_IN(KN_SHAPE(4, 3), -1, 1));
}

typedef struct sort_ctx {
    int64_t dim, k;
    bool descending, topk;
} sort_ctx;

static kn_tensor *f_sort(kn_tensor *const *in, const void *ctx) {
    const sort_ctx *s = ctx;
    kn_tensor *values = NULL;
    kn_status st = s->topk ? kn_topk(tr(in[0]), s->k, s->dim, s->descending, true, &values, NULL)
                           : kn_sort(tr(in[0]), s->dim, s->descending, &values, NULL);
    return st == KN_OK ? values : NULL;
}

static void test_sort_topk(void) {
    for (int k = 0; k < 4; k++) {
        sort_ctx s = {.dim = k & 1 ? -1 : 0, .descending = k < 2};
        GRADCHECK("sort", f_sort, &s, 1, GC_IN(KN_SHAPE(5, 3), -1, 1));
        s.topk = true;
        s.k = 2;
        GRADCHECK("topk", f_sort, &s, 1, GC_IN(KN_SHAPE(5, 3), -1, 1));
    }
    sort_ctx s0 = {.dim = 1}, s1 = {.dim = 0, .k = 2, .topk = true, .descending = true};
    CHECK_F32("sort", f_sort, &s0, 1, GC_IN(KN_SHAPE(5, 3), -1, 1));
    CHECK_F32("topk", f_sort, &s1, 1, GC_IN(KN_SHAPE(5, 3), -1, 1));
}

/* ---- embeddings ------------------------------------------------------------------------------------ */

static kn_tensor *f_embedding(kn_tensor *const *in, const void *ctx) {
    return kn_embedding(tr(in[0]), (kn_tensor *)ctx);
}

static kn_tensor *f_embedding_backward(kn_tensor *const *in, const void *ctx) {
    return kn_embedding_backward(in[0], (kn_tensor *)ctx, 6);
}

static void test_embedding(void) {
    kn_tensor *idx = INTS(KN_SHAPE(2, 3), 5, 0, 5, 2, 5, 1);
    kn_tensor *idx32 = tensor_from((const double[]){3, 3, 0, 1}, KN_SHAPE(4), KN_I32);
    GRADCHECK("embedding", f_embedding, idx, 1, GC_IN(KN_SHAPE(3, 6), -1, 1));
    GRADCHECK("embedding i32", f_embedding, idx32, 1, GC_IN(KN_SHAPE(3, 6), -1, 1));
    CHECK_F32("embedding", f_embedding, idx, 1, GC_IN(KN_SHAPE(3, 6), -1, 1));
    GRADCHECK("embedding_backward", f_embedding_backward, idx, 1, GC_IN(KN_SHAPE(2, 3, 4), -1, 1));
    CHECK_F32("embedding_backward", f_embedding_backward, idx, 1, GC_IN(KN_SHAPE(2, 3, 4), -1, 1));
}

typedef struct bag_ctx {
    kn_tensor *indices, *offsets;
    kn_bag_mode mode;
    bool last, weighted;
} bag_ctx;

static kn_tensor *f_bag(kn_tensor *const *in, const void *ctx) {
    const bag_ctx *b = ctx;
    return kn_embedding_bag(tr(in[0]), b->indices, b->offsets, b->mode, b->weighted ? in[1] : NULL, b->last);
}

static void test_embedding_bag(void) {
    /* Offsets: index 0 in no bag, an empty bag, duplicates inside bags; with include_last_offset
     * the final two indices fall outside every bag. */
    kn_tensor *flat = INTS(KN_SHAPE(7), 4, 1, 1, 0, 4, 2, 1), *offsets = INTS(KN_SHAPE(3), 1, 3, 3);
    kn_tensor *last = INTS(KN_SHAPE(4), 1, 3, 3, 5), *rect = INTS(KN_SHAPE(3, 2), 2, 2, 0, 4, 3, 1);
    for (int mode = KN_BAG_SUM; mode <= KN_BAG_MAX; mode++) {
        bag_ctx cases[] = {{flat, offsets, mode, false, false}, {flat, last, mode, true, false},
                           {rect, NULL, mode, false, false}, {flat, offsets, mode, false, true},
                           {rect, NULL, mode, false, true}};
        for (int k = 0; k < 5; k++) {
            bag_ctx *b = &cases[k];
            if (b->weighted && mode != KN_BAG_SUM) continue;
            char what[64];
            snprintf(what, sizeof what, "embedding_bag mode %d case %d", mode, k);
            kn_shape ws = kn_shape_of(b->indices);
            GRADCHECK(what, f_bag, b, b->weighted ? 2 : 1, GC_IN(KN_SHAPE(3, 5), -1, 1), GC_IN(ws, -1, 1));
            CHECK_F32(what, f_bag, b, b->weighted ? 2 : 1, GC_IN(KN_SHAPE(3, 5), -1, 1), GC_IN(ws, -1, 1));
        }
    }
}

/* embedding_bag's max against PyTorch 2.15: a later row replaces the maximum only when greater
 * (so a NaN counts only as a bag's first row, and equal maxima keep the first), and each
 * column's gradient goes all to that row (PyTorch's max_indices). */
static void test_embedding_bag_max_keeps_the_first_maximum_as_pytorch(void) {
    for (int k = 0; k < 4; k++) {
        kn_dtype dt = FLOAT_DTYPES[k];
        /* w = torch.tensor([[1., nan], [3, 2], [nan, 0]]); y = F.embedding_bag(torch.tensor([0, 1, 2, 1, 2]), w,
         * torch.tensor([0, 3]), mode='max'); y.backward(torch.tensor([[1., 10], [100, 1000]])) */
        kn_tensor *w = kn_requires_grad(tensor_from((double[]){1, NAN, 3, 2, NAN, 0}, KN_SHAPE(3, 2), dt), true);
        kn_tensor *y = kn_embedding_bag(w, INTS(KN_SHAPE(5), 0, 1, 2, 1, 2), INTS(KN_SHAPE(2), 0, 3), KN_BAG_MAX, NULL, false);
        CHECK_CLOSE(y, ((double[]){3, NAN, 3, 2}), tol_for(dt), "values");
        CHECK(kn_backward_ex(y, tensor_from((double[]){1, 10, 100, 1000}, KN_SHAPE(2, 2), dt), false) == KN_OK);
        CHECK_CLOSE(kn_grad(w), ((double[]){0, 10, 101, 1000, 0, 0}), tol_for(dt), "gradient");
        /* ties: F.embedding_bag(torch.tensor([[0, 1, 2]]), torch.tensor([[1., 5], [1, 2], [0, 5]]), mode='max'),
         * backward of torch.tensor([[1., 10]]) */
        kn_tensor *t = kn_requires_grad(tensor_from((double[]){1, 5, 1, 2, 0, 5}, KN_SHAPE(3, 2), dt), true);
        kn_tensor *z = kn_embedding_bag(t, INTS(KN_SHAPE(1, 3), 0, 1, 2), NULL, KN_BAG_MAX, NULL, false);
        CHECK_CLOSE(z, ((double[]){1, 5}), tol_for(dt), "tied values");
        CHECK(kn_backward_ex(z, tensor_from((double[]){1, 10}, KN_SHAPE(1, 2), dt), false) == KN_OK);
        CHECK_CLOSE(kn_grad(t), ((double[]){1, 10, 0, 0, 0, 0}), tol_for(dt), "tied gradient");
    }
}

/* ---- non-differentiable ops and the table ------------------------------------------------------------ */

static void test_nondiff(void) {
    kn_scope_push();
    kn_tensor *x = kn_requires_grad(rand_tensor(KN_SHAPE(6), KN_F64, 0.1, 1), true);
    kn_tensor *values = NULL, *inverse = NULL, *counts = NULL;
    CHECK(kn_unique(x, &values, &inverse, &counts) == KN_OK && !kn_needs_grad(values));
    CHECK(!kn_needs_grad(kn_nonzero(x)));
    CHECK(!kn_needs_grad(kn_multinomial(x, 2, true)));
    kn_tensor *indices = NULL;
    CHECK(kn_sort(x, 0, false, NULL, &indices) == KN_OK && !kn_needs_grad(indices));
    kn_scope_pop();
}

static void test_table_lists_family(void) {
    static const kn_op_id family[] = {
#define KN_OP(name, ...) KN_OP_##name,
#include "ops/defs/index.def"
#undef KN_OP
    };
    for (size_t i = 0; i < sizeof family / sizeof family[0]; i++) {
        const kn_grad_def *g = &kn_grad_table[family[i]];
        CHECK_MSG(g->fn || g->nondiff, "%s is in neither KN_GRAD nor KN_NO_GRAD", kn_op_name(family[i]));
    }
}

int main(void) {
    RUN(test_index_select);
    RUN(test_gather);
    RUN(test_scatter);
    RUN(test_scatter_reduce);
    RUN(test_scatter_reduce_prod_zeros);
    RUN(test_index_add);
    RUN(test_index_put);
    RUN(test_masks);
    RUN(test_sort_topk);
    RUN(test_embedding);
    RUN(test_embedding_bag);
    RUN(test_embedding_bag_max_keeps_the_first_maximum_as_pytorch);
    RUN(test_nondiff);
    RUN(test_table_lists_family);
    return test_summary();
}
