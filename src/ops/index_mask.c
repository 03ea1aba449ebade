/* Advanced indexing, masks, bags of embeddings, ordering and sampling. index_put wraps
 * negative indices (x[-1] is the last row); every other op rejects them. */
#include "core/runtime_impl.h"
#include "kiln/ops.h"
#include "ops/index_common.h"
#include "ops/ops_internal.h"

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
    if (!kn_op_begin(&c, KN_OP_index_put, 2 + n, in)) return NULL;
    kn_shape B = kn_shape_of(indices[0]);
    for (int k = 0; k < n; k++) {
        if (!kn_index_dtype_ok(&c, indices[k], "indices")) return NULL;
        kn_shape next;
        if (!kn_broadcast_shapes("index_put", B, kn_shape_of(indices[k]), &next))
            return kn_op_fail(&c, KN_ERR_SHAPE, "index tensors do not broadcast together");
        B = next;
    }
    kn_shape full = B;
    for (int d = n; d < x->ndim; d++) {
        if (full.n == KN_MAX_DIMS) return kn_op_fail(&c, KN_ERR_SHAPE, "too many dims");
        full.v[full.n++] = x->shape[d];
    }
    kn_shape vb;
    if (!kn_broadcast_shapes("index_put", kn_shape_of(values), full, &vb) || vb.n != full.n)
        return kn_op_fail(&c, KN_ERR_SHAPE, "values do not broadcast to the indexed shape");
    for (int d = 0; d < full.n; d++)
        if (vb.v[d] != full.v[d]) return kn_op_fail(&c, KN_ERR_SHAPE, "values do not broadcast to the indexed shape");
    kn_clear_error();
    kn_dtype vdt = accumulate ? (x->dtype == KN_F64 ? KN_F64 : kn_dtype_is_float(x->dtype) ? KN_F32 : KN_I64) : x->dtype;
    kn_scope_push();
    kn_tensor *v = kn_expand(values, full);
    bool ok = kn_index_set_input(&c, 1, kn_keep(v ? kn_cast(v, vdt) : NULL));
    for (int k = 0; ok && k < n; k++) {
        kn_tensor *e = kn_expand(indices[k], B);
        ok = kn_index_set_input(&c, 2 + k, kn_keep(e ? kn_cast(e, KN_I64) : NULL));
    }
    kn_scope_pop();
    if (!ok) return NULL;
    *KN_ATTRS(c.node, index_put) = (kn_attrs_index_put){.n = n, .accumulate = accumulate};
    if (!kn_op_output(&c, x->dtype, x->shape, x->ndim)) return NULL;
    return kn_op_run(&c);
}

kn_tensor *kn_masked_fill(kn_tensor *x, kn_tensor *mask, double value) {
    kn_opctx c;
    if (!kn_op_begin(&c, KN_OP_masked_fill, 2, (kn_tensor *[]){x, mask})) return NULL;
    if (mask->dtype != KN_BOOL) return kn_op_fail(&c, KN_ERR_DTYPE, "mask must be bool");
    kn_shape s;
    if (!kn_broadcast_shapes("masked_fill", kn_shape_of(mask), kn_shape_of(x), &s) || s.n != x->ndim)
        return kn_op_fail(&c, KN_ERR_SHAPE, "mask does not broadcast to x");
    if (!kn_index_set_input(&c, 1, kn_expand(mask, kn_shape_of(x)))) return NULL;
    KN_ATTRS(c.node, masked_fill)->value = value;
    if (!kn_op_output(&c, x->dtype, x->shape, x->ndim)) return NULL;
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

kn_tensor *kn_embedding_bag(kn_tensor *weight, kn_tensor *indices, kn_tensor *offsets, kn_bag_mode mode,
                            kn_tensor *per_sample_weights, bool include_last_offset) {
    kn_opctx c;
    if (!kn_op_begin_slots(&c, KN_OP_embedding_bag, 4, (kn_tensor *[]){weight, indices, offsets, per_sample_weights}))
        return NULL;
    if (!kn_dtype_is_float(weight->dtype)) return kn_op_fail(&c, KN_ERR_DTYPE, "weight must be a float tensor");
    if (weight->ndim != 2) return kn_op_fail(&c, KN_ERR_SHAPE, "weight must be [V, D]");
    if (!kn_index_dtype_ok(&c, indices, "indices") || (offsets && !kn_index_dtype_ok(&c, offsets, "offsets")))
        return NULL;
    if ((int)mode < KN_BAG_SUM || mode > KN_BAG_MAX) return kn_op_fail(&c, KN_ERR_ARG, "unknown mode %d", (int)mode);
    int64_t bags, length = 0;
    if (offsets) {
        if (indices->ndim != 1 || offsets->ndim != 1)
            return kn_op_fail(&c, KN_ERR_SHAPE, "with offsets, indices and offsets must be 1-d");
        bags = offsets->shape[0] - (include_last_offset ? 1 : 0);
        if (bags < 0) return kn_op_fail(&c, KN_ERR_SHAPE, "include_last_offset needs at least one offset");
    } else {
        if (indices->ndim != 2) return kn_op_fail(&c, KN_ERR_SHAPE, "without offsets, indices must be [B, L]");
        bags = indices->shape[0];
        length = indices->shape[1];
    }
    if (per_sample_weights) {
        if (mode != KN_BAG_SUM) return kn_op_fail(&c, KN_ERR_ARG, "per_sample_weights need mode sum");
        kn_shape a = kn_shape_of(indices), b = kn_shape_of(per_sample_weights);
        bool same = a.n == b.n;
        for (int d = 0; same && d < a.n; d++) same = a.v[d] == b.v[d];
        if (!same) return kn_op_fail(&c, KN_ERR_SHAPE, "per_sample_weights must have indices' shape");
    }
    *KN_ATTRS(c.node, embedding_bag) =
        (kn_attrs_embedding_bag){.mode = mode, .include_last_offset = include_last_offset, .length = length};
    int k = 2;
    if (!kn_index_set_input(&c, 0, kn_contiguous(weight)) || !kn_index_set_input(&c, 1, kn_contiguous(indices)) ||
        (offsets && !kn_index_set_input(&c, k++, kn_contiguous(offsets))) ||
        (per_sample_weights && !kn_index_set_input(&c, k, kn_cast(per_sample_weights, weight->dtype))))
        return NULL;
    int64_t shape[2] = {bags, weight->shape[1]};
    if (!kn_op_output(&c, weight->dtype, shape, 2)) return NULL;
    return kn_op_run(&c);
}

/* sort with k kept values per row (k = the row length for sort). */
static kn_status sort_k(const char *name, kn_tensor *x, int64_t k, int64_t dim, bool descending, bool check_k,
                        kn_tensor **values, kn_tensor **indices) {
    kn_opctx c;
    if (!kn_op_begin(&c, KN_OP_sort, 1, &x)) return kn_last_status();
    int64_t d;
    if (!kn_op_dim(&c, dim, x->ndim, &d)) return kn_last_status();
    int64_t len = x->ndim ? x->shape[d] : 1;
    if (!check_k) k = len;
    if (k < 0 || k > len) {
        kn_op_fail(&c, KN_ERR_ARG, "%s: k %lld is outside [0, %lld] for dim %lld", name, (long long)k, (long long)len,
                   (long long)d);
        return kn_last_status();
    }
    if (!kn_index_set_input(&c, 0, kn_contiguous(x))) return kn_last_status();
    *KN_ATTRS(c.node, sort) = (kn_attrs_sort){.dim = d, .descending = descending, .k = k};
    kn_shape s = kn_shape_of(x);
    if (s.n) s.v[d] = k;
    if (!kn_op_output(&c, x->dtype, s.v, s.n) || !kn_op_output(&c, KN_I64, s.v, s.n)) return kn_last_status();
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

kn_tensor *kn_multinomial(kn_tensor *probs, int64_t num_samples, bool replacement) {
    kn_opctx c;
    if (!kn_op_begin(&c, KN_OP_multinomial, 1, &probs)) return NULL;
    if (!kn_dtype_is_float(probs->dtype)) return kn_op_fail(&c, KN_ERR_DTYPE, "probabilities must be a float tensor");
    if (probs->ndim != 1 && probs->ndim != 2) return kn_op_fail(&c, KN_ERR_SHAPE, "probabilities must be [C] or [N, C]");
    int64_t C = probs->shape[probs->ndim - 1], N = probs->ndim == 2 ? probs->shape[0] : 1;
    if (num_samples < 0) return kn_op_fail(&c, KN_ERR_ARG, "num_samples %lld is negative", (long long)num_samples);
    if (!replacement && num_samples > C)
        return kn_op_fail(&c, KN_ERR_ARG, "num_samples %lld exceeds the %lld categories without replacement",
                          (long long)num_samples, (long long)C);
    kn_scope_push();
    kn_tensor *p = kn_cast(probs, KN_F64);
    kn_tensor *p2 = p ? kn_reshape(p, KN_SHAPE(N, C)) : NULL;
    bool ok = kn_index_set_input(&c, 0, kn_keep(p2));
    kn_scope_pop();
    if (!ok) return NULL;
    *KN_ATTRS(c.node, multinomial) = (kn_attrs_multinomial){.num_samples = num_samples, .replacement = replacement};
    kn_rng_reserve((uint64_t)(N * num_samples), &c.node->rng_seed, &c.node->rng_offset);
    int64_t shape[2] = {N, num_samples};
    if (!kn_op_output(&c, KN_I64, shape + (probs->ndim == 1), probs->ndim)) return NULL;
    return kn_op_run(&c);
}
