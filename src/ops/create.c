/* Creation ops: fills, ranges, the identity and random draws on the default device. */
#include <math.h>

#include "core/runtime_impl.h"
#include "exec/dispatch.h"
#include "kiln/ops.h"
#include "ops/op_rules.h"
#include "ops/ops_internal.h"

/* Every creation op: its shape and dtype attributes (bernoulli's probabilities, if given,
 * have that shape). */
KN_RULE(kn_infer_creation) {
    const kn_creation_attrs *a = &at->creation;
    if (!kn_dtype_valid((kn_dtype)a->dtype)) KN_RULE_FAIL(KN_ERR_DTYPE, "invalid dtype %d", (int)a->dtype);
    if (a->shape.n < 0 || a->shape.n > KN_MAX_DIMS)
        KN_RULE_FAIL(KN_ERR_SHAPE, "%d dims requested; at most %d", a->shape.n, KN_MAX_DIMS);
    bool fits = n_in == 0 || in[0]->ndim == a->shape.n;
    for (int d = 0; fits && n_in && d < a->shape.n; d++) fits = in[0]->shape[d] == a->shape.v[d];
    if (!fits) KN_RULE_FAIL(KN_ERR_SHAPE, "the probabilities do not have the output's shape");
    kn_infer_out(r, (kn_dtype)a->dtype, a->shape.v, a->shape.n);
    return KN_OK;
}

/* Records a creation node of `shape` and `dtype` on `device`; set the other attributes one by
 * one (the shape and dtype head must stay), then run. */
static bool begin_creation(kn_opctx *c, kn_op_id op, kn_shape shape, kn_dtype dtype, kn_device device) {
    if (!kn_op_begin_on(c, op, 0, NULL, device)) return false;
    *KN_ATTRS(c->node, creation) = (kn_creation_attrs){.shape = shape, .dtype = dtype};
    return kn_op_outputs_inferred(c);
}

kn_tensor *kn_full_on(kn_shape shape, double value, kn_dtype dtype, kn_device device) {
    kn_opctx c;
    if (!begin_creation(&c, KN_OP_fill, shape, dtype, device)) return NULL;
    KN_ATTRS(c.node, fill)->a = value;
    return kn_op_run(&c);
}

kn_tensor *kn_full(kn_shape shape, double value, kn_dtype dtype) {
    return kn_full_on(shape, value, dtype, kn_default_device());
}
kn_tensor *kn_zeros(kn_shape shape, kn_dtype dtype) { return kn_full(shape, 0, dtype); }
kn_tensor *kn_ones(kn_shape shape, kn_dtype dtype) { return kn_full(shape, 1, dtype); }
kn_tensor *kn_scalar(double value, kn_dtype dtype) { return kn_full(KN_SHAPE0, value, dtype); }

kn_tensor *kn_empty_on(kn_shape shape, kn_dtype dtype, kn_device device) {
    kn_opctx c;
    if (!begin_creation(&c, KN_OP_empty, shape, dtype, device)) return NULL;
    return kn_op_run(&c);
}

kn_tensor *kn_empty(kn_shape shape, kn_dtype dtype) { return kn_empty_on(shape, dtype, kn_default_device()); }

#define LIKE(t, call)                                  \
    do {                                               \
        if (!(t)) {                                    \
            kn_error_null_input("like", 0);            \
            return NULL;                               \
        }                                              \
        return call;                                   \
    } while (0)
kn_tensor *kn_empty_like(kn_tensor *t) { LIKE(t, kn_empty_on(kn_shape_of(t), t->dtype, kn_device_of(t))); }
kn_tensor *kn_zeros_like(kn_tensor *t) { LIKE(t, kn_full_on(kn_shape_of(t), 0, t->dtype, kn_device_of(t))); }
kn_tensor *kn_ones_like(kn_tensor *t) { LIKE(t, kn_full_on(kn_shape_of(t), 1, t->dtype, kn_device_of(t))); }
kn_tensor *kn_full_like(kn_tensor *t, double v) { LIKE(t, kn_full_on(kn_shape_of(t), v, t->dtype, kn_device_of(t))); }

kn_tensor *kn_arange(double start, double end, double step, kn_dtype dtype) {
    kn_opctx c;
    if (!kn_op_begin(&c, KN_OP_arange, 0, NULL)) return NULL;
    if (step == 0 || !isfinite(start) || !isfinite(end) || !isfinite(step))
        return kn_op_fail(&c, KN_ERR_ARG, "start %g, end %g, step %g: need finite values and a nonzero step",
                          start, end, step);
    if ((end - start) / step < 0)
        return kn_op_fail(&c, KN_ERR_ARG, "step %g points away from end %g (start %g)", step, end, start);
    int64_t count = (int64_t)ceil((end - start) / step);
    kn_node_free(c.node);
    if (!begin_creation(&c, KN_OP_arange, KN_SHAPE(count), dtype, kn_default_device())) return NULL;
    c.node->attrs.arange.start = start, c.node->attrs.arange.step = step;
    return kn_op_run(&c);
}

kn_tensor *kn_linspace(double start, double end, int64_t count, kn_dtype dtype) {
    kn_opctx c;
    if (!begin_creation(&c, KN_OP_linspace, KN_SHAPE(count < 0 ? 0 : count), dtype, kn_default_device()))
        return NULL;
    if (count < 0) return kn_op_fail(&c, KN_ERR_ARG, "count %lld is negative", (long long)count);
    c.node->attrs.linspace.start = start, c.node->attrs.linspace.end = end;
    return kn_op_run(&c);
}

kn_tensor *kn_eye(int64_t rows, int64_t cols, kn_dtype dtype) {
    kn_opctx c;
    if (!begin_creation(&c, KN_OP_eye, KN_SHAPE(rows < 0 ? 0 : rows, cols < 0 ? 0 : cols), dtype,
                        kn_default_device()))
        return NULL;
    if (rows < 0 || cols < 0)
        return kn_op_fail(&c, KN_ERR_ARG, "rows %lld and cols %lld must be non-negative", (long long)rows,
                          (long long)cols);
    return kn_op_run(&c);
}

/* ---- random ---------------------------------------------------------------------------------- */

static bool begin_random(kn_opctx *c, kn_op_id op, kn_shape shape, kn_dtype dtype, kn_device device) {
    if (!begin_creation(c, op, shape, dtype, device)) return false;
    kn_rng_reserve((uint64_t)kn_shape_numel(shape), &c->node->rng_seed, &c->node->rng_offset);
    return true;
}

static kn_tensor *uniform_on(kn_shape shape, double low, double high, kn_dtype dtype, kn_device device) {
    kn_opctx c;
    if (!begin_random(&c, KN_OP_rand, shape, dtype, device)) return NULL;
    if (!(low <= high)) return kn_op_fail(&c, KN_ERR_ARG, "low %g is above high %g", low, high);
    c.node->attrs.rand.low = low, c.node->attrs.rand.high = high;
    return kn_op_run(&c);
}

kn_tensor *kn_uniform(kn_shape shape, double low, double high, kn_dtype dtype) {
    return uniform_on(shape, low, high, dtype, kn_default_device());
}
kn_tensor *kn_rand(kn_shape shape, kn_dtype dtype) { return kn_uniform(shape, 0, 1, dtype); }

static kn_tensor *normal_on(kn_shape shape, double mean, double std, kn_dtype dtype, kn_device device) {
    kn_opctx c;
    if (!begin_random(&c, KN_OP_randn, shape, dtype, device)) return NULL;
    if (!(std >= 0)) return kn_op_fail(&c, KN_ERR_ARG, "std %g must be non-negative", std);
    c.node->attrs.randn.mean = mean, c.node->attrs.randn.std = std;
    return kn_op_run(&c);
}

kn_tensor *kn_normal(kn_shape shape, double mean, double std, kn_dtype dtype) {
    return normal_on(shape, mean, std, dtype, kn_default_device());
}
kn_tensor *kn_randn(kn_shape shape, kn_dtype dtype) { return kn_normal(shape, 0, 1, dtype); }

kn_tensor *kn_randint(int64_t low, int64_t high, kn_shape shape, kn_dtype dtype) {
    kn_opctx c;
    if (!begin_random(&c, KN_OP_randint, shape, dtype, kn_default_device())) return NULL;
    if (low >= high) return kn_op_fail(&c, KN_ERR_ARG, "low %lld must be below high %lld", (long long)low, (long long)high);
    c.node->attrs.randint.low = low, c.node->attrs.randint.high = high;
    return kn_op_run(&c);
}

kn_tensor *kn_bernoulli_p(kn_shape shape, double p, kn_dtype dtype) {
    kn_opctx c;
    if (!begin_random(&c, KN_OP_bernoulli, shape, dtype, kn_default_device())) return NULL;
    if (!(p >= 0 && p <= 1)) return kn_op_fail(&c, KN_ERR_ARG, "p %g is outside [0, 1]", p);
    KN_ATTRS(c.node, bernoulli)->p = p;
    c.node->attrs.absent = 1u << KN_SLOT(bernoulli, probs);
    return kn_op_run(&c);
}

kn_tensor *kn_bernoulli(kn_tensor *p) {
    kn_opctx c;
    if (!kn_op_begin(&c, KN_OP_bernoulli, 1, &p)) return NULL;
    /* The kernel reads probabilities as contiguous f64. */
    kn_tensor *p64 = p->dtype == KN_F64 ? kn_contiguous(p) : kn_cast(p, KN_F64);
    if (!p64) {
        kn_node_free(c.node);
        return NULL;
    }
    kn_op_set_input(&c, 0, p64);
    kn_release(p64);
    kn_rng_reserve((uint64_t)kn_numel(p), &c.node->rng_seed, &c.node->rng_offset);
    *KN_ATTRS(c.node, creation) = (kn_creation_attrs){.shape = kn_shape_of(p), .dtype = p->dtype};
    if (!kn_op_outputs_inferred(&c)) return NULL;
    return kn_op_run(&c);
}

kn_tensor *kn_rand_like(kn_tensor *t) { LIKE(t, uniform_on(kn_shape_of(t), 0, 1, t->dtype, kn_device_of(t))); }
kn_tensor *kn_randn_like(kn_tensor *t) { LIKE(t, normal_on(kn_shape_of(t), 0, 1, t->dtype, kn_device_of(t))); }
