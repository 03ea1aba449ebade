/* Index ops built on the axis walk: index_select, embedding, gather, scatter and its
 * accumulating forms, index_add. Negative indices are rejected here, as in PyTorch (only
 * index_put wraps them). */
#include "exec/dispatch.h"
#include "kiln/ops.h"
#include "ops/index_common.h"

bool kn_index_dtype_ok(kn_opctx *c, kn_tensor *index, const char *what) {
    if (index->dtype == KN_I32 || index->dtype == KN_I64) return true;
    kn_op_fail(c, KN_ERR_DTYPE, "%s must be i32 or i64, not %s", what, kn_dtype_name(index->dtype));
    return false;
}

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

kn_tensor *kn_index_select(kn_tensor *x, int64_t dim, kn_tensor *index) {
    kn_opctx c;
    if (!kn_op_begin(&c, KN_OP_index_select, 2, (kn_tensor *[]){x, index})) return NULL;
    int64_t d;
    if (!kn_op_dim(&c, dim, x->ndim, &d) || !kn_index_dtype_ok(&c, index, "index")) return NULL;
    if (index->ndim > 1) return kn_op_fail(&c, KN_ERR_SHAPE, "index must be 0-d or 1-d, not %d-d", index->ndim);
    KN_ATTRS(c.node, index_select)->dim = d;
    kn_shape s = kn_shape_of(x);
    if (s.n) s.v[d] = kn_numel(index);
    if (!kn_op_output(&c, x->dtype, s.v, s.n)) return NULL;
    return kn_op_run(&c);
}

kn_tensor *kn_embedding(kn_tensor *weight, kn_tensor *indices) {
    kn_opctx c;
    if (!kn_op_begin(&c, KN_OP_embedding, 2, (kn_tensor *[]){weight, indices})) return NULL;
    if (!kn_index_dtype_ok(&c, indices, "indices")) return NULL;
    if (weight->ndim != 2) return kn_op_fail(&c, KN_ERR_SHAPE, "weight must be [V, D]");
    if (indices->ndim + 1 > KN_MAX_DIMS) return kn_op_fail(&c, KN_ERR_SHAPE, "too many index dims");
    if (!kn_index_set_input(&c, 1, kn_contiguous(indices))) return NULL;
    kn_shape s = kn_shape_of(indices);
    s.v[s.n++] = weight->shape[1];
    if (!kn_op_output(&c, weight->dtype, s.v, s.n)) return NULL;
    return kn_op_run(&c);
}

kn_tensor *kn_embedding_backward(kn_tensor *grad, kn_tensor *indices, int64_t num_weights) {
    kn_opctx c;
    if (!kn_op_begin(&c, KN_OP_embedding_backward, 2, (kn_tensor *[]){grad, indices})) return NULL;
    if (!kn_index_dtype_ok(&c, indices, "indices")) return NULL;
    if (!kn_dtype_is_float(grad->dtype)) return kn_op_fail(&c, KN_ERR_DTYPE, "grad must be a float tensor");
    if (num_weights < 0) return kn_op_fail(&c, KN_ERR_ARG, "num_weights %lld is negative", (long long)num_weights);
    bool fits = grad->ndim == indices->ndim + 1;
    for (int d = 0; fits && d < indices->ndim; d++) fits = grad->shape[d] == indices->shape[d];
    if (!fits) return kn_op_fail(&c, KN_ERR_SHAPE, "grad must be [indices' shape..., D]");
    if (!kn_index_set_input(&c, 0, kn_contiguous(grad)) || !kn_index_set_input(&c, 1, kn_contiguous(indices)))
        return NULL;
    KN_ATTRS(c.node, embedding_backward)->num_weights = num_weights;
    int64_t shape[2] = {num_weights, grad->shape[grad->ndim - 1]};
    if (!kn_op_output(&c, grad->dtype == KN_F64 ? KN_F64 : KN_F32, shape, 2)) return NULL;
    return kn_op_run(&c);
}

kn_tensor *kn_gather(kn_tensor *x, int64_t dim, kn_tensor *index) {
    kn_opctx c;
    if (!kn_op_begin(&c, KN_OP_gather, 2, (kn_tensor *[]){x, index})) return NULL;
    int64_t d;
    if (!kn_op_dim(&c, dim, x->ndim, &d) || !kn_index_dtype_ok(&c, index, "index")) return NULL;
    if (index->ndim != x->ndim) return kn_op_fail(&c, KN_ERR_SHAPE, "index must have x's %d dims", x->ndim);
    for (int k = 0; k < x->ndim; k++)
        if (k != d && index->shape[k] > x->shape[k])
            return kn_op_fail(&c, KN_ERR_SHAPE, "index size %lld exceeds x's %lld in dim %d",
                              (long long)index->shape[k], (long long)x->shape[k], k);
    KN_ATTRS(c.node, gather)->dim = d;
    if (!kn_op_output(&c, x->dtype, index->shape, index->ndim)) return NULL;
    return kn_op_run(&c);
}

/* The scatter family's common checks; src may be NULL (scatter_value). */
static bool scatter_begin(kn_opctx *c, kn_op_id op, kn_tensor *x, int64_t dim, kn_tensor *index, kn_tensor *src,
                          int64_t *d) {
    int n_in = src ? 3 : 2;
    if (!kn_op_begin(c, op, n_in, (kn_tensor *[]){x, index, src})) return false;
    if (!kn_op_dim(c, dim, x->ndim, d) || !kn_index_dtype_ok(c, index, "index")) return false;
    if (index->ndim != x->ndim || (src && src->ndim != x->ndim))
        return kn_op_fail(c, KN_ERR_SHAPE, "x, index and src must have the same number of dims") != NULL;
    for (int k = 0; k < x->ndim; k++) {
        if (k != *d && index->shape[k] > x->shape[k])
            return kn_op_fail(c, KN_ERR_SHAPE, "index size %lld exceeds x's %lld in dim %d",
                              (long long)index->shape[k], (long long)x->shape[k], k) != NULL;
        if (src && index->shape[k] > src->shape[k])
            return kn_op_fail(c, KN_ERR_SHAPE, "index size %lld exceeds src's %lld in dim %d",
                              (long long)index->shape[k], (long long)src->shape[k], k) != NULL;
    }
    return true;
}

kn_tensor *kn_scatter(kn_tensor *x, int64_t dim, kn_tensor *index, kn_tensor *src) {
    kn_opctx c;
    int64_t d;
    if (!src) {
        kn_error_null_input("scatter", 2);
        return NULL;
    }
    if (!scatter_begin(&c, KN_OP_scatter, x, dim, index, src, &d)) return NULL;
    KN_ATTRS(c.node, scatter)->dim = d;
    if (src->dtype != x->dtype && !kn_index_set_input(&c, 2, kn_cast(src, x->dtype))) return NULL;
    if (!kn_op_output(&c, x->dtype, x->shape, x->ndim)) return NULL;
    return kn_op_run(&c);
}

kn_tensor *kn_scatter_value(kn_tensor *x, int64_t dim, kn_tensor *index, double value) {
    kn_opctx c;
    int64_t d;
    if (!scatter_begin(&c, KN_OP_scatter_value, x, dim, index, NULL, &d)) return NULL;
    *KN_ATTRS(c.node, scatter_value) = (kn_attrs_scatter_value){.dim = d, .value = value};
    if (!kn_op_output(&c, x->dtype, x->shape, x->ndim)) return NULL;
    return kn_op_run(&c);
}

/* src in the accumulator dtype the kernel adds in. */
static bool src_to_acc(kn_opctx *c, kn_tensor *x, kn_tensor *src) {
    kn_dtype acc = x->dtype == KN_F64 ? KN_F64 : kn_dtype_is_float(x->dtype) ? KN_F32 : KN_I64;
    return src->dtype == acc || kn_index_set_input(c, 2, kn_cast(src, acc));
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
    if ((int)op < KN_SCATTER_SUM || op > KN_SCATTER_AMIN)
        return kn_op_fail(&c, KN_ERR_ARG, "unknown reduction %d", (int)op);
    *KN_ATTRS(c.node, scatter_reduce) = (kn_attrs_scatter_reduce){.dim = d, .reduce = op, .include_self = include_self};
    if (!src_to_acc(&c, x, src) || !kn_op_output(&c, x->dtype, x->shape, x->ndim)) return NULL;
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
    if (!src_to_acc(&c, x, src) || !kn_op_output(&c, x->dtype, x->shape, x->ndim)) return NULL;
    return kn_op_run(&c);
}

kn_tensor *kn_index_add(kn_tensor *x, int64_t dim, kn_tensor *index, kn_tensor *src, double alpha) {
    kn_opctx c;
    if (!kn_op_begin(&c, KN_OP_index_add, 3, (kn_tensor *[]){x, index, src})) return NULL;
    int64_t d;
    if (!kn_op_dim(&c, dim, x->ndim, &d) || !kn_index_dtype_ok(&c, index, "index")) return NULL;
    if (index->ndim > 1) return kn_op_fail(&c, KN_ERR_SHAPE, "index must be 0-d or 1-d");
    bool fits = src->ndim == x->ndim && size_at(src, d) == kn_numel(index);
    for (int k = 0; fits && k < x->ndim; k++) fits = k == d || src->shape[k] == x->shape[k];
    if (!fits) return kn_op_fail(&c, KN_ERR_SHAPE, "src must be x's shape with dim %lld of size %lld", (long long)d,
                                 (long long)kn_numel(index));
    *KN_ATTRS(c.node, index_add) =
        (kn_attrs_index_add){.dim = d, .reduce = KN_SCATTER_SUM, .include_self = true, .alpha = alpha};
    if (!src_to_acc(&c, x, src) || !kn_op_output(&c, x->dtype, x->shape, x->ndim)) return NULL;
    return kn_op_run(&c);
}
