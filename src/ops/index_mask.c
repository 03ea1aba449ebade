/* Advanced indexing, masks, bags of embeddings, ordering and sampling. index_put wraps
 * negative indices (x[-1] is the last row); every other op rejects them. */
#include "core/runtime_impl.h"
#include "kiln/ops.h"
#include "ops/index_common.h"
#include "ops/op_rules.h"
#include "ops/ops_internal.h"

/* index_put's shapes: B, the n index tensors broadcast together, and full, B followed by x's
 * unindexed dims (what values broadcast to). */
static kn_status index_put_shapes(const kn_tensor *x, kn_tensor *const *indices, int n, kn_shape *B, kn_shape *full,
                                  char *why, size_t why_size) {
    if (n < 1 || n > x->ndim) KN_RULE_FAIL(KN_ERR_ARG, "%d index tensors for %d dims", n, x->ndim);
    *B = kn_shape_of(indices[0]);
    for (int k = 0; k < n; k++) {
        kn_status st = kn_index_dtype_why(indices[k], "indices", why, why_size);
        if (st != KN_OK) return st;
        kn_shape next;
        if (!kn_broadcast_shapes("index_put", *B, kn_shape_of(indices[k]), &next))
            KN_RULE_FAIL(KN_ERR_SHAPE, "index tensors do not broadcast together");
        *B = next;
    }
    *full = *B;
    for (int d = n; d < x->ndim; d++) {
        if (full->n == KN_MAX_DIMS) KN_RULE_FAIL(KN_ERR_SHAPE, "too many dims");
        full->v[full->n++] = x->shape[d];
    }
    return KN_OK;
}

/* index_put: x, values, then the index tensors; values broadcast to the indexed shape;
 * out[0] like x. */
KN_RULE(kn_infer_index_put) {
    kn_shape B, full, vb;
    kn_status st = index_put_shapes(in[0], in + 2, n_in - 2, &B, &full, why, why_size);
    if (st != KN_OK) return st;
    bool fits = kn_broadcast_shapes("index_put", kn_shape_of(in[1]), full, &vb) && vb.n == full.n;
    for (int d = 0; fits && d < full.n; d++) fits = vb.v[d] == full.v[d];
    kn_clear_error();
    if (!fits) KN_RULE_FAIL(KN_ERR_SHAPE, "values do not broadcast to the indexed shape");
    return kn_infer_like_first(op, n_in, in, at, r, why, why_size);
}

kn_tensor *kn_index_put(kn_tensor *x, kn_tensor *const *indices, int n, kn_tensor *values, bool accumulate) {
    if (!x || !values || !indices) {
        kn_error_null_input("index_put", !x ? 0 : 1);
        return NULL;
    }
    if (n < 1 || n > x->ndim || n > KN_MAX_DIMS) {
        char d[96];
        return kn_error_null(KN_ERR_ARG, "index_put(%s): %d index tensors for %d dims", kn_describe(x, d, sizeof d), n,
                             x->ndim);
    }
    kn_tensor *in[2 + KN_MAX_DIMS] = {x, values};
    for (int k = 0; k < n; k++) in[2 + k] = indices[k];
    kn_opctx c;
    kn_op_infer r;
    if (!kn_op_begin(&c, KN_OP_index_put, 2 + n, in)) return NULL;
    *KN_ATTRS(c.node, index_put) = (kn_attrs_index_put){.n = n, .accumulate = accumulate};
    kn_shape B, full;
    char why[160];
    if (!kn_op_infer_node(&c, &r)) return NULL;
    index_put_shapes(x, indices, n, &B, &full, why, sizeof why); /* as the rule found them */
    kn_dtype vdt = accumulate ? (x->dtype == KN_F64 ? KN_F64 : kn_dtype_is_float(x->dtype) ? KN_F32 : KN_I64) : x->dtype;
    kn_scope_push();
    kn_tensor *v = kn_expand(values, full);
    bool ok = kn_index_set_input(&c, 1, kn_keep(v ? kn_cast(v, vdt) : NULL));
    for (int k = 0; ok && k < n; k++) {
        kn_tensor *e = kn_expand(indices[k], B);
        ok = kn_index_set_input(&c, 2 + k, kn_keep(e ? kn_cast(e, KN_I64) : NULL));
    }
    kn_scope_pop();
    if (!ok || !kn_op_add_outputs(&c, &r)) return NULL;
    return kn_op_run(&c);
}

/* masked_fill: a bool mask that broadcasts to x; out[0] like x. */
KN_RULE(kn_infer_masked_fill) {
    const kn_tensor *x = in[0], *mask = in[1];
    if (mask->dtype != KN_BOOL) KN_RULE_FAIL(KN_ERR_DTYPE, "mask must be bool");
    kn_shape s;
    if (!kn_broadcast_shapes("masked_fill", kn_shape_of(mask), kn_shape_of(x), &s) || s.n != x->ndim)
        KN_RULE_FAIL(KN_ERR_SHAPE, "mask does not broadcast to x");
    for (int d = 0; d < s.n; d++)
        if (s.v[d] != x->shape[d]) KN_RULE_FAIL(KN_ERR_SHAPE, "mask does not broadcast to x");
    return kn_infer_like_first(op, n_in, in, at, r, why, why_size);
}

kn_tensor *kn_masked_fill(kn_tensor *x, kn_tensor *mask, double value) {
    kn_opctx c;
    kn_op_infer r;
    if (!kn_op_begin(&c, KN_OP_masked_fill, 2, (kn_tensor *[]){x, mask})) return NULL;
    KN_ATTRS(c.node, masked_fill)->value = value;
    if (!kn_op_infer_node(&c, &r) || !kn_index_set_input(&c, 1, kn_expand(mask, kn_shape_of(x)))) return NULL;
    if (!kn_op_add_outputs(&c, &r)) return NULL;
    return kn_op_run(&c);
}

kn_tensor *kn_masked_select(kn_tensor *x, kn_tensor *mask) {
    kn_opctx c;
    if (!kn_op_begin(&c, KN_OP_masked_select, 2, (kn_tensor *[]){x, mask})) return NULL;
    if (mask->dtype != KN_BOOL) return kn_op_fail(&c, KN_ERR_DTYPE, "mask must be bool");
    kn_shape s;
    if (!kn_broadcast_shapes("masked_select", kn_shape_of(mask), kn_shape_of(x), &s))
        return kn_op_fail(&c, KN_ERR_SHAPE, "mask and x do not broadcast");
    kn_scope_push();
    kn_tensor *xe = kn_expand(x, s), *me = kn_expand(mask, s);
    bool ok = kn_index_set_input(&c, 0, kn_keep(xe ? kn_cast(xe, x->dtype) : NULL)) &&
              kn_index_set_input(&c, 1, kn_keep(me ? kn_cast(me, KN_BOOL) : NULL));
    kn_scope_pop();
    if (!ok) return NULL;
    return kn_op_run(&c);
}

kn_tensor *kn_nonzero(kn_tensor *x) {
    kn_opctx c;
    if (!kn_op_begin(&c, KN_OP_nonzero, 1, &x)) return NULL;
    if (!kn_index_set_input(&c, 0, kn_cast(x, KN_BOOL))) return NULL;
    return kn_op_run(&c);
}

/* embedding_bag: weight [V, D] float; indices 1-d with offsets, else [B, L] (length L);
 * out[0] [bags, D]. */
KN_RULE(kn_infer_embedding_bag) {
    const kn_attrs_embedding_bag *a = &at->embedding_bag;
    const kn_tensor *weight = in[0], *indices = in[1];
    const kn_tensor *offsets = kn_input_at(in, at, KN_SLOT(embedding_bag, offsets));
    const kn_tensor *psw = kn_input_at(in, at, KN_SLOT(embedding_bag, per_sample_weights));
    if (!kn_dtype_is_float(weight->dtype)) KN_RULE_FAIL(KN_ERR_DTYPE, "weight must be a float tensor");
    if (weight->ndim != 2) KN_RULE_FAIL(KN_ERR_SHAPE, "weight must be [V, D]");
    kn_status st = kn_index_dtype_why(indices, "indices", why, why_size);
    if (st == KN_OK && offsets) st = kn_index_dtype_why(offsets, "offsets", why, why_size);
    if (st != KN_OK) return st;
    if (a->mode < KN_BAG_SUM || a->mode > KN_BAG_MAX) KN_RULE_FAIL(KN_ERR_ARG, "unknown mode %d", (int)a->mode);
    int64_t bags;
    if (offsets) {
        if (indices->ndim != 1 || offsets->ndim != 1)
            KN_RULE_FAIL(KN_ERR_SHAPE, "with offsets, indices and offsets must be 1-d");
        bags = offsets->shape[0] - (a->include_last_offset ? 1 : 0);
        if (bags < 0) KN_RULE_FAIL(KN_ERR_SHAPE, "include_last_offset needs at least one offset");
    } else {
        if (indices->ndim != 2) KN_RULE_FAIL(KN_ERR_SHAPE, "without offsets, indices must be [B, L]");
        bags = indices->shape[0];
        if (a->length != indices->shape[1]) KN_RULE_FAIL(KN_ERR_ARG, "length must be indices' L");
    }
    if (psw) {
        if (a->mode != KN_BAG_SUM) KN_RULE_FAIL(KN_ERR_ARG, "per_sample_weights need mode sum");
        bool same = psw->ndim == indices->ndim;
        for (int d = 0; same && d < psw->ndim; d++) same = psw->shape[d] == indices->shape[d];
        if (!same) KN_RULE_FAIL(KN_ERR_SHAPE, "per_sample_weights must have indices' shape");
    }
    kn_infer_out(r, weight->dtype, (int64_t[]){bags, weight->shape[1]}, 2);
    return KN_OK;
}

kn_tensor *kn_embedding_bag(kn_tensor *weight, kn_tensor *indices, kn_tensor *offsets, kn_bag_mode mode,
                            kn_tensor *per_sample_weights, bool include_last_offset) {
    kn_opctx c;
    kn_op_infer r;
    if (!kn_op_begin_slots(&c, KN_OP_embedding_bag, 4, (kn_tensor *[]){weight, indices, offsets, per_sample_weights}))
        return NULL;
    int64_t length = !offsets && indices->ndim == 2 ? indices->shape[1] : 0;
    *KN_ATTRS(c.node, embedding_bag) =
        (kn_attrs_embedding_bag){.mode = mode, .include_last_offset = include_last_offset, .length = length};
    if (!kn_op_infer_node(&c, &r)) return NULL;
    int k = 2;
    if (!kn_index_set_input(&c, 0, kn_contiguous(weight)) || !kn_index_set_input(&c, 1, kn_contiguous(indices)) ||
        (offsets && !kn_index_set_input(&c, k++, kn_contiguous(offsets))) ||
        (per_sample_weights && !kn_index_set_input(&c, k, kn_cast(per_sample_weights, weight->dtype))))
        return NULL;
    if (!kn_op_add_outputs(&c, &r)) return NULL;
    return kn_op_run(&c);
}

/* sort: k values per row along dim (all of it for sort), and their i64 indices. */
KN_RULE(kn_infer_sort) {
    const kn_attrs_sort *a = &at->sort;
    const kn_tensor *x = in[0];
    int64_t len = x->ndim ? x->shape[a->dim] : 1;
    if (a->k < 0 || a->k > len)
        KN_RULE_FAIL(KN_ERR_ARG, "k %lld is outside [0, %lld] for dim %lld", (long long)a->k, (long long)len,
                     (long long)a->dim);
    kn_shape s = kn_shape_of(x);
    if (s.n) s.v[a->dim] = a->k;
    kn_infer_out(r, x->dtype, s.v, s.n);
    kn_infer_out(r, KN_I64, s.v, s.n);
    return KN_OK;
}

/* sort with k kept values per row (k = the row length for sort). */
static kn_status sort_k(const char *name, kn_tensor *x, int64_t k, int64_t dim, bool descending, bool check_k,
                        kn_tensor **values, kn_tensor **indices) {
    kn_opctx c;
    if (!kn_op_begin(&c, KN_OP_sort, 1, &x)) return kn_last_status();
    int64_t d;
    if (!kn_op_dim(&c, dim, x->ndim, &d)) return kn_last_status();
    if (!check_k) k = x->ndim ? x->shape[d] : 1;
    *KN_ATTRS(c.node, sort) = (kn_attrs_sort){.dim = d, .descending = descending, .k = k};
    kn_op_infer r;
    if (!kn_op_infer_node(&c, &r)) return kn_last_status();
    if (!kn_index_set_input(&c, 0, kn_contiguous(x)) || !kn_op_add_outputs(&c, &r)) return kn_last_status();
    return kn_op_run_to(&c, (kn_tensor **const[]){values, indices}, 2);
}

kn_status kn_topk(kn_tensor *x, int64_t k, int64_t dim, bool largest, bool sorted, kn_tensor **values,
                  kn_tensor **indices) {
    return sort_k("topk", x, k, dim, largest, true, values, indices);
}

kn_status kn_sort(kn_tensor *x, int64_t dim, bool descending, kn_tensor **values, kn_tensor **indices) {
    return sort_k("sort", x, 0, dim, descending, false, values, indices);
}

kn_tensor *kn_argsort(kn_tensor *x, int64_t dim, bool descending) {
    kn_tensor *idx = NULL;
    return sort_k("argsort", x, 0, dim, descending, false, NULL, &idx) == KN_OK ? idx : NULL;
}

kn_status kn_unique(kn_tensor *x, kn_tensor **values, kn_tensor **inverse, kn_tensor **counts) {
    kn_opctx c;
    if (!kn_op_begin(&c, KN_OP_unique, 1, &x)) return kn_last_status();
    if (!kn_index_set_input(&c, 0, kn_contiguous(x))) return kn_last_status();
    return kn_op_run_to(&c, (kn_tensor **const[]){values, inverse, counts}, 3);
}

/* multinomial: probs [N, C] float (the API function makes 1-d probs [1, C]); out [N,
 * num_samples] i64. */
KN_RULE(kn_infer_multinomial) {
    const kn_tensor *probs = in[0];
    const kn_attrs_multinomial *a = &at->multinomial;
    if (!kn_dtype_is_float(probs->dtype)) KN_RULE_FAIL(KN_ERR_DTYPE, "probabilities must be a float tensor");
    if (probs->ndim != 1 && probs->ndim != 2) KN_RULE_FAIL(KN_ERR_SHAPE, "probabilities must be [C] or [N, C]");
    int64_t C = probs->shape[probs->ndim - 1], N = probs->ndim == 2 ? probs->shape[0] : 1;
    if (a->num_samples < 0) KN_RULE_FAIL(KN_ERR_ARG, "num_samples %lld is negative", (long long)a->num_samples);
    if (!a->replacement && a->num_samples > C)
        KN_RULE_FAIL(KN_ERR_ARG, "num_samples %lld exceeds the %lld categories without replacement",
                     (long long)a->num_samples, (long long)C);
    kn_infer_out(r, KN_I64, (int64_t[]){N, a->num_samples}, 2);
    return KN_OK;
}

kn_tensor *kn_multinomial(kn_tensor *probs, int64_t num_samples, bool replacement) {
    kn_opctx c;
    kn_op_infer r;
    if (!kn_op_begin(&c, KN_OP_multinomial, 1, &probs)) return NULL;
    *KN_ATTRS(c.node, multinomial) = (kn_attrs_multinomial){.num_samples = num_samples, .replacement = replacement};
    if (!kn_op_infer_node(&c, &r)) return NULL; /* checks, naming the caller's probs */
    int64_t N = r.shape[0].v[0], C = probs->shape[probs->ndim - 1];
    kn_scope_push();
    kn_tensor *p = kn_cast(probs, KN_F64);
    kn_tensor *p2 = p ? kn_reshape(p, KN_SHAPE(N, C)) : NULL;
    bool ok = kn_index_set_input(&c, 0, kn_keep(p2));
    kn_scope_pop();
    if (!ok || !kn_op_add_outputs(&c, &r)) return NULL;
    kn_rng_reserve((uint64_t)(N * num_samples), &c.node->rng_seed, &c.node->rng_offset);
    kn_tensor *out = kn_op_run(&c);
    if (!out || probs->ndim == 2) return out;
    kn_tensor *row = kn_squeeze(out, 0); /* 1-d probs: one row of samples */
    kn_release(out);
    return row;
}
