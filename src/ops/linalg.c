/* Matrix products: matmul's torch.matmul rules, and the forms built on it. */
#include <math.h>

#include "exec/autocast.h"
#include "exec/dispatch.h"
#include "kiln/ops.h"
#include "ops/op_rules.h"
#include "ops/ops_internal.h"

/* The batched product of a [..., M, K] and b [..., K, N] (both at least 2-d): batch dims
 * broadcast, the promoted dtype. */
KN_RULE(kn_infer_matmul) {
    const kn_tensor *a = in[0], *b = in[1];
    if (a->ndim < 2 || b->ndim < 2) KN_RULE_FAIL(KN_ERR_SHAPE, "both operands need at least 2 dims");
    int64_t M = a->shape[a->ndim - 2], K = a->shape[a->ndim - 1];
    int64_t K2 = b->shape[b->ndim - 2], N = b->shape[b->ndim - 1];
    if (K != K2) KN_RULE_FAIL(KN_ERR_SHAPE, "inner sizes differ (%lld vs %lld)", (long long)K, (long long)K2);
    kn_shape batch_a = {.n = a->ndim - 2}, batch_b = {.n = b->ndim - 2}, batch;
    for (int d = 0; d < batch_a.n; d++) batch_a.v[d] = a->shape[d];
    for (int d = 0; d < batch_b.n; d++) batch_b.v[d] = b->shape[d];
    if (!kn_broadcast_shapes(kn_op_name(op), batch_a, batch_b, &batch))
        KN_RULE_FAIL(KN_ERR_SHAPE, "batch dims do not broadcast (%s)", kn_last_error());
    if (batch.n + 2 > KN_MAX_DIMS) KN_RULE_FAIL(KN_ERR_SHAPE, "too many dims");
    r->compute = kn_promote_types(a->dtype, b->dtype);
    batch.v[batch.n++] = M, batch.v[batch.n++] = N;
    kn_infer_out(r, r->compute, batch.v, batch.n);
    return KN_OK;
}

/* Records matmul of a and b by the rule, each operand cast to the result's dtype and
 * expanded to the result's batch dims for the kernel. */
static kn_tensor *matmul_nd(kn_tensor *a, kn_tensor *b) {
    kn_opctx c;
    kn_op_infer r;
    if (!kn_op_begin(&c, KN_OP_matmul, 2, (kn_tensor *[]){a, b}) || !kn_op_infer_node(&c, &r)) return NULL;
    kn_tensor *ops[2] = {c.node->in[0], c.node->in[1]}; /* autocast's casts, if it made them */
    for (int i = 0; i < 2; i++) {
        kn_shape wide_shape = r.shape[0];
        wide_shape.v[wide_shape.n - 2] = ops[i]->shape[ops[i]->ndim - 2];
        wide_shape.v[wide_shape.n - 1] = ops[i]->shape[ops[i]->ndim - 1];
        kn_tensor *cast = ops[i]->dtype == r.compute ? kn_retain(ops[i]) : kn_cast(ops[i], r.compute);
        kn_tensor *wide = cast ? kn_expand(cast, wide_shape) : NULL;
        kn_release(cast);
        if (!wide) {
            kn_node_free(c.node);
            return NULL;
        }
        kn_op_set_input(&c, i, wide);
        kn_release(wide);
    }
    if (!kn_op_add_outputs(&c, &r)) return NULL;
    return kn_op_run(&c);
}

kn_tensor *kn_matmul(kn_tensor *a, kn_tensor *b) {
    if (!a || !b) {
        kn_error_null_input("matmul", a ? 1 : 0);
        return NULL;
    }
    if (a->ndim == 0 || b->ndim == 0) {
        char da[96], db[96];
        return kn_error_null(KN_ERR_SHAPE, "matmul(%s, %s): both operands need at least 1 dim",
                             kn_describe(a, da, sizeof da), kn_describe(b, db, sizeof db));
    }
    /* [..., K] @ [K, N] folds the batch dims into rows, as torch does: one GEMM, and a weight
     * gradient computed as one GEMM rather than per batch and then summed. */
    if (a->ndim > 2 && b->ndim == 2 && b->shape[0] > 0 && a->shape[a->ndim - 1] == b->shape[0]) {
        kn_shape out = kn_shape_of(a);
        out.v[out.n - 1] = b->shape[1];
        kn_tensor *rows = kn_reshape(a, KN_SHAPE(-1, b->shape[0]));
        kn_tensor *r = rows ? matmul_nd(rows, b) : NULL;
        kn_tensor *s = r ? kn_reshape(r, out) : NULL;
        kn_release(rows);
        kn_release(r);
        return s;
    }
    /* 1-d operands become matrices, and the added dim is removed from the result. */
    kn_tensor *a2 = a->ndim == 1 ? kn_unsqueeze(a, 0) : kn_retain(a);
    kn_tensor *b2 = b->ndim == 1 ? kn_unsqueeze(b, 1) : kn_retain(b);
    kn_tensor *r = a2 && b2 ? matmul_nd(a2, b2) : NULL;
    kn_release(a2);
    kn_release(b2);
    if (!r || (a->ndim > 1 && b->ndim > 1)) return r;
    kn_tensor *s = r;
    if (b->ndim == 1) s = kn_squeeze(s, -1);
    if (a->ndim == 1) {
        kn_tensor *t = kn_squeeze(s, -1 - (b->ndim == 1 ? 0 : 1));
        if (s != r) kn_release(s);
        s = t;
    }
    kn_release(r);
    return s;
}

kn_tensor *kn_bmm(kn_tensor *a, kn_tensor *b) {
    if (!a || !b) {
        kn_error_null_input("bmm", a ? 1 : 0);
        return NULL;
    }
    char da[96], db[96];
    if (a->ndim != 3 || b->ndim != 3 || a->shape[0] != b->shape[0])
        return kn_error_null(KN_ERR_SHAPE, "bmm(%s, %s): needs two 3-d tensors with the same batch size",
                             kn_describe(a, da, sizeof da), kn_describe(b, db, sizeof db));
    return matmul_nd(a, b);
}

/* t * k for addmm: an integer tensor takes k truncated to an integer and stays integer, as in
 * PyTorch's addmm (beta=2.7 scales by 2). */
static kn_tensor *scaled(kn_tensor *t, double k) {
    if (t && !kn_dtype_is_float(kn_dtype_of(t)) && fabs(k) < 0x1p63) return kn_mul_scalar_int(t, (int64_t)k);
    return kn_mul_scalar(t, k);
}

/* An operand added to a product: under autocast it joins the product's low dtype (as the
 * bias of PyTorch's linear and addmm does); otherwise t itself (a new handle). */
static kn_tensor *joined(kn_tensor *t) {
    kn_dtype d = kn_autocast_low_for(t->dtype);
    return d == t->dtype ? kn_retain(t) : kn_cast(t, d);
}

kn_tensor *kn_addmm(kn_tensor *input, kn_tensor *a, kn_tensor *b, double beta, double alpha) {
    if (!input || !a || !b) {
        kn_error_null_input("addmm", !input ? 0 : !a ? 1 : 2);
        return NULL;
    }
    char da[96], db[96];
    if (a->ndim != 2 || b->ndim != 2)
        return kn_error_null(KN_ERR_SHAPE, "addmm(%s, %s): needs 2-d matrices", kn_describe(a, da, sizeof da),
                             kn_describe(b, db, sizeof db));
    kn_scope_push();
    kn_tensor *mm = matmul_nd(a, b);
    kn_tensor *in = joined(input); /* under autocast, the product's dtype */
    kn_tensor *lhs = !in || beta == 1 ? in : scaled(in, beta);
    kn_tensor *rhs = alpha == 1 ? mm : scaled(mm, alpha);
    /* beta = 0 ignores input, NaN included, as BLAS and PyTorch do. */
    kn_tensor *out = beta == 0 ? rhs : kn_add(lhs, rhs);
    kn_release(in);
    if (out && kn_ndim(out) != 2) {
        char di[96];
        out = kn_error_null(KN_ERR_SHAPE, "addmm(%s, ...): input does not broadcast to the product's [M, N]",
                            kn_describe(input, di, sizeof di));
    }
    return kn_scope_pop_keep(out);
}

kn_tensor *kn_linear(kn_tensor *x, kn_tensor *weight, kn_tensor *bias) {
    if (!x || !weight) {
        kn_error_null_input("linear", x ? 1 : 0);
        return NULL;
    }
    char dx[96], dw[96];
    if (weight->ndim != 2)
        return kn_error_null(KN_ERR_SHAPE, "linear(%s, %s): weight must be [out, in]", kn_describe(x, dx, sizeof dx),
                             kn_describe(weight, dw, sizeof dw));
    kn_tensor *wt = kn_transpose(weight, 0, 1);
    kn_tensor *y = wt ? kn_matmul(x, wt) : NULL;
    kn_release(wt);
    if (!y || !bias) return y;
    kn_tensor *b = joined(bias);
    kn_tensor *out = b ? kn_add(y, b) : NULL;
    kn_release(b);
    kn_release(y);
    return out;
}

kn_tensor *kn_outer(kn_tensor *a, kn_tensor *b) {
    if (!a || !b) {
        kn_error_null_input("outer", a ? 1 : 0);
        return NULL;
    }
    char da[96], db[96];
    if (a->ndim != 1 || b->ndim != 1)
        return kn_error_null(KN_ERR_SHAPE, "outer(%s, %s): needs two 1-d tensors", kn_describe(a, da, sizeof da),
                             kn_describe(b, db, sizeof db));
    kn_tensor *col = kn_unsqueeze(a, 1), *row = kn_unsqueeze(b, 0);
    kn_tensor *out = col && row ? matmul_nd(col, row) : NULL;
    kn_release(col);
    kn_release(row);
    return out;
}
