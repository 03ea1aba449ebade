/* Index ops built on the axis walk: index_select, embedding, gather, scatter and its
 * accumulating forms, index_add. Negative indices are rejected here, as in PyTorch (only
 * index_put wraps them). */
#include "exec/dispatch.h"
#include "kiln/ops.h"
#include "ops/index_common.h"
#include "ops/op_rules.h"
#include "ops/ops_internal.h"

/* Replaces input i with t (NULL: the node is freed and false returned). */
bool kn_index_set_input(kn_opctx *c, int i, kn_tensor *t) {
    if (!t) {
        kn_node_free(c->node);
        c->node = NULL;
        return false;
    }
    kn_op_set_input(c, i, t);
    kn_release(t);
    return true;
}

static int64_t size_at(const kn_tensor *t, int64_t d) { return t->ndim ? t->shape[d] : 1; }

kn_status kn_index_dtype_why(const kn_tensor *index, const char *what, char *why, size_t why_size) {
    if (index->dtype == KN_I32 || index->dtype == KN_I64) return KN_OK;
    KN_RULE_FAIL(KN_ERR_DTYPE, "%s must be i32 or i64, not %s", what, kn_dtype_name(index->dtype));
}
#define INDEX_DTYPE(t, what)                                                   \
    do {                                                                       \
        kn_status st_ = kn_index_dtype_why(t, what, why, why_size);            \
        if (st_ != KN_OK) return st_;                                          \
    } while (0)

KN_RULE(kn_infer_index_select) {
    const kn_tensor *x = in[0], *index = in[1];
    int64_t d = at->index_select.dim;
    INDEX_DTYPE(index, "index");
    if (index->ndim > 1) KN_RULE_FAIL(KN_ERR_SHAPE, "index must be 0-d or 1-d, not %d-d", index->ndim);
    kn_shape s = kn_shape_of(x);
    if (s.n) s.v[d] = kn_numel(index);
    kn_infer_out(r, x->dtype, s.v, s.n);
    return KN_OK;
}

kn_tensor *kn_index_select(kn_tensor *x, int64_t dim, kn_tensor *index) {
    kn_opctx c;
    if (!kn_op_begin(&c, KN_OP_index_select, 2, (kn_tensor *[]){x, index})) return NULL;
    int64_t d;
    if (!kn_op_dim(&c, dim, x->ndim, &d)) return NULL;
    KN_ATTRS(c.node, index_select)->dim = d;
    if (!kn_op_outputs_inferred(&c)) return NULL;
    return kn_op_run(&c);
}

KN_RULE(kn_infer_embedding) {
    const kn_tensor *weight = in[0], *indices = in[1];
    INDEX_DTYPE(indices, "indices");
    if (weight->ndim != 2) KN_RULE_FAIL(KN_ERR_SHAPE, "weight must be [V, D]");
    if (indices->ndim + 1 > KN_MAX_DIMS) KN_RULE_FAIL(KN_ERR_SHAPE, "too many index dims");
    kn_shape s = kn_shape_of(indices);
    s.v[s.n++] = weight->shape[1];
    kn_infer_out(r, weight->dtype, s.v, s.n);
    return KN_OK;
}

kn_tensor *kn_embedding(kn_tensor *weight, kn_tensor *indices) {
    kn_opctx c;
    kn_op_infer r;
    if (!kn_op_begin(&c, KN_OP_embedding, 2, (kn_tensor *[]){weight, indices}) || !kn_op_infer_node(&c, &r)) return NULL;
    if (!kn_index_set_input(&c, 1, kn_contiguous(indices)) || !kn_op_add_outputs(&c, &r)) return NULL;
    return kn_op_run(&c);
}

KN_RULE(kn_infer_embedding_backward) {
    const kn_tensor *grad = in[0], *indices = in[1];
    int64_t num_weights = at->embedding_backward.num_weights;
    INDEX_DTYPE(indices, "indices");
    if (!kn_dtype_is_float(grad->dtype)) KN_RULE_FAIL(KN_ERR_DTYPE, "grad must be a float tensor");
    if (num_weights < 0) KN_RULE_FAIL(KN_ERR_ARG, "num_weights %lld is negative", (long long)num_weights);
    bool fits = grad->ndim == indices->ndim + 1;
    for (int d = 0; fits && d < indices->ndim; d++) fits = grad->shape[d] == indices->shape[d];
    if (!fits) KN_RULE_FAIL(KN_ERR_SHAPE, "grad must be [indices' shape..., D]");
    kn_infer_out(r, grad->dtype == KN_F64 ? KN_F64 : KN_F32, (int64_t[]){num_weights, grad->shape[grad->ndim - 1]}, 2);
    return KN_OK;
}

kn_tensor *kn_embedding_backward(kn_tensor *grad, kn_tensor *indices, int64_t num_weights) {
    kn_opctx c;
    kn_op_infer r;
    if (!kn_op_begin(&c, KN_OP_embedding_backward, 2, (kn_tensor *[]){grad, indices})) return NULL;
    KN_ATTRS(c.node, embedding_backward)->num_weights = num_weights;
    if (!kn_op_infer_node(&c, &r)) return NULL;
    if (!kn_index_set_input(&c, 0, kn_contiguous(grad)) || !kn_index_set_input(&c, 1, kn_contiguous(indices)))
        return NULL;
    if (!kn_op_add_outputs(&c, &r)) return NULL;
    return kn_op_run(&c);
}

KN_RULE(kn_infer_gather) {
    const kn_tensor *x = in[0], *index = in[1];
    int64_t d = at->gather.dim;
    INDEX_DTYPE(index, "index");
    if (index->ndim != x->ndim) KN_RULE_FAIL(KN_ERR_SHAPE, "index must have x's %d dims", x->ndim);
    for (int k = 0; k < x->ndim; k++)
        if (k != d && index->shape[k] > x->shape[k])
            KN_RULE_FAIL(KN_ERR_SHAPE, "index size %lld exceeds x's %lld in dim %d", (long long)index->shape[k],
                         (long long)x->shape[k], k);
    kn_infer_out(r, x->dtype, index->shape, index->ndim);
    return KN_OK;
}

kn_tensor *kn_gather(kn_tensor *x, int64_t dim, kn_tensor *index) {
    kn_opctx c;
    if (!kn_op_begin(&c, KN_OP_gather, 2, (kn_tensor *[]){x, index})) return NULL;
    int64_t d;
    if (!kn_op_dim(&c, dim, x->ndim, &d)) return NULL;
    KN_ATTRS(c.node, gather)->dim = d;
    if (!kn_op_outputs_inferred(&c)) return NULL;
    return kn_op_run(&c);
}

/* The scatter family (scatter, scatter_value, scatter_add, scatter_reduce): index and src
 * (absent for scatter_value) within x's dims; out[0] like x. */
KN_RULE(kn_infer_scatter) {
    const kn_tensor *x = in[0], *index = in[1], *src = n_in > 2 ? in[2] : NULL;
    int64_t d = op == KN_OP_scatter ? at->scatter.dim : op == KN_OP_scatter_value ? at->scatter_value.dim
                                                                                  : at->scatter_reduce.dim;
    INDEX_DTYPE(index, "index");
    if (index->ndim != x->ndim || (src && src->ndim != x->ndim))
        KN_RULE_FAIL(KN_ERR_SHAPE, "x, index and src must have the same number of dims");
    for (int k = 0; k < x->ndim; k++) {
        if (k != d && index->shape[k] > x->shape[k])
            KN_RULE_FAIL(KN_ERR_SHAPE, "index size %lld exceeds x's %lld in dim %d", (long long)index->shape[k],
                         (long long)x->shape[k], k);
        if (src && index->shape[k] > src->shape[k])
            KN_RULE_FAIL(KN_ERR_SHAPE, "index size %lld exceeds src's %lld in dim %d", (long long)index->shape[k],
                         (long long)src->shape[k], k);
    }
    if (op == KN_OP_scatter_reduce || op == KN_OP_scatter_add) {
        int64_t red = at->scatter_reduce.reduce; /* scatter_add's is scatter_reduce's (op_table.c) */
        if (red < KN_SCATTER_SUM || red > KN_SCATTER_AMIN) KN_RULE_FAIL(KN_ERR_ARG, "unknown reduction %d", (int)red);
    }
    return kn_infer_like_first(op, n_in, in, at, r, why, why_size);
}

/* Begins a scatter-family node with dim wrapped into its attributes (dim is each op's first
 * attribute); src may be NULL (scatter_value). */
static bool scatter_begin(kn_opctx *c, kn_op_id op, kn_tensor *x, int64_t dim, kn_tensor *index, kn_tensor *src,
                          int64_t *d) {
    int n_in = src ? 3 : 2;
    if (!kn_op_begin(c, op, n_in, (kn_tensor *[]){x, index, src})) return false;
    return kn_op_dim(c, dim, x->ndim, d);
}

kn_tensor *kn_scatter(kn_tensor *x, int64_t dim, kn_tensor *index, kn_tensor *src) {
    kn_opctx c;
    int64_t d;
    kn_op_infer r;
    if (!src) {
        kn_error_null_input("scatter", 2);
        return NULL;
    }
    if (!scatter_begin(&c, KN_OP_scatter, x, dim, index, src, &d)) return NULL;
    KN_ATTRS(c.node, scatter)->dim = d;
    if (!kn_op_infer_node(&c, &r)) return NULL;
    if (src->dtype != x->dtype && !kn_index_set_input(&c, 2, kn_cast(src, x->dtype))) return NULL;
    if (!kn_op_add_outputs(&c, &r)) return NULL;
    return kn_op_run(&c);
}

kn_tensor *kn_scatter_value(kn_tensor *x, int64_t dim, kn_tensor *index, double value) {
    kn_opctx c;
    int64_t d;
    if (!scatter_begin(&c, KN_OP_scatter_value, x, dim, index, NULL, &d)) return NULL;
    *KN_ATTRS(c.node, scatter_value) = (kn_attrs_scatter_value){.dim = d, .value = value};
    if (!kn_op_outputs_inferred(&c)) return NULL;
    return kn_op_run(&c);
}

/* The rule, then src in the accumulator dtype the kernel adds in, then the output. */
static bool accumulating_outputs(kn_opctx *c, kn_tensor *x, kn_tensor *src) {
    kn_op_infer r;
    if (!kn_op_infer_node(c, &r)) return false;
    kn_dtype acc = x->dtype == KN_F64 ? KN_F64 : kn_dtype_is_float(x->dtype) ? KN_F32 : KN_I64;
    if (src->dtype != acc && !kn_index_set_input(c, 2, kn_cast(src, acc))) return false;
    return kn_op_add_outputs(c, &r);
}

kn_tensor *kn_scatter_reduce(kn_tensor *x, int64_t dim, kn_tensor *index, kn_tensor *src, kn_scatter_reduce_op op,
                             bool include_self) {
    kn_opctx c;
    int64_t d;
    if (!src) {
        kn_error_null_input("scatter_reduce", 2);
        return NULL;
    }
    if (!scatter_begin(&c, KN_OP_scatter_reduce, x, dim, index, src, &d)) return NULL;
    *KN_ATTRS(c.node, scatter_reduce) = (kn_attrs_scatter_reduce){.dim = d, .reduce = op, .include_self = include_self};
    if (!accumulating_outputs(&c, x, src)) return NULL;
    return kn_op_run(&c);
}

kn_tensor *kn_scatter_add(kn_tensor *x, int64_t dim, kn_tensor *index, kn_tensor *src) {
    kn_opctx c;
    int64_t d;
    if (!src) {
        kn_error_null_input("scatter_add", 2);
        return NULL;
    }
    if (!scatter_begin(&c, KN_OP_scatter_add, x, dim, index, src, &d)) return NULL;
    *KN_ATTRS(c.node, scatter_add) = (kn_attrs_scatter_add){.dim = d, .reduce = KN_SCATTER_SUM, .include_self = true};
    if (!accumulating_outputs(&c, x, src)) return NULL;
    return kn_op_run(&c);
}

KN_RULE(kn_infer_index_add) {
    const kn_tensor *x = in[0], *index = in[1], *src = in[2];
    int64_t d = at->index_add.dim;
    INDEX_DTYPE(index, "index");
    if (index->ndim > 1) KN_RULE_FAIL(KN_ERR_SHAPE, "index must be 0-d or 1-d");
    bool fits = src->ndim == x->ndim && size_at(src, d) == kn_numel(index);
    for (int k = 0; fits && k < x->ndim; k++) fits = k == d || src->shape[k] == x->shape[k];
    if (!fits)
        KN_RULE_FAIL(KN_ERR_SHAPE, "src must be x's shape with dim %lld of size %lld", (long long)d,
                     (long long)kn_numel(index));
    return kn_infer_like_first(op, n_in, in, at, r, why, why_size);
}

kn_tensor *kn_index_add(kn_tensor *x, int64_t dim, kn_tensor *index, kn_tensor *src, double alpha) {
    kn_opctx c;
    if (!kn_op_begin(&c, KN_OP_index_add, 3, (kn_tensor *[]){x, index, src})) return NULL;
    int64_t d;
    if (!kn_op_dim(&c, dim, x->ndim, &d)) return NULL;
    *KN_ATTRS(c.node, index_add) =
        (kn_attrs_index_add){.dim = d, .reduce = KN_SCATTER_SUM, .include_self = true, .alpha = alpha};
    if (!accumulating_outputs(&c, x, src)) return NULL;
    return kn_op_run(&c);
}
