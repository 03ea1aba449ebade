/* CPU kernels of the creation ops: fills, ranges, the identity, and Philox random draws. */
#include "backends/cpu/cpu_kernels.h"
#include "core/philox.h"

/* out[i] = value_of(i), for each element in parallel. */
#define GENERATE(out, VALUE_OF_I)                                                   \
    do {                                                                            \
        kn_tensor *t_ = (out);                                                      \
        void *base_ = kn_tensor_data(t_);                                           \
        int64_t n_ = kn_numel(t_);                                                  \
        kn_dtype dt_ = t_->dtype;                                                   \
        _Pragma("omp parallel for num_threads(kn_cpu_threads_for(n_ * 8)) schedule(static)") \
        for (int64_t i = 0; i < n_; i++) kn_cpu_store_f64(base_, dt_, i, (VALUE_OF_I));    \
    } while (0)

static kn_status fill_kernel(kn_node *n) {
    kn_tensor *t = n->out[0];
    int64_t count = kn_numel(t);
    double v = KN_ATTRS(n, fill)->a;
    if (t->dtype == KN_F32) { /* the common case, vectorized */
        float *p = kn_tensor_data(t), f = (float)v;
#pragma omp parallel for num_threads(kn_cpu_threads_for(count)) schedule(static)
        for (int64_t i = 0; i < count; i++) p[i] = f;
        return KN_OK;
    }
    GENERATE(t, v);
    return KN_OK;
}

static kn_status empty_kernel(kn_node *n) { return KN_OK; }

static kn_status arange_kernel(kn_node *n) {
    double start = KN_ATTRS(n, arange)->start, step = KN_ATTRS(n, arange)->step;
    GENERATE(n->out[0], start + (double)i * step);
    return KN_OK;
}

static kn_status linspace_kernel(kn_node *n) {
    double start = KN_ATTRS(n, linspace)->start, end = KN_ATTRS(n, linspace)->end;
    int64_t count = kn_numel(n->out[0]);
    double step = count > 1 ? (end - start) / (double)(count - 1) : 0;
    int64_t half = (count + 1) / 2;
    /* Like PyTorch: step from the start for the first half, from the end for the rest, so
     * both ends are exact (and a single value is start). */
    GENERATE(n->out[0], i < half ? start + step * (double)i : end - step * (double)(count - 1 - i));
    return KN_OK;
}

static kn_status eye_kernel(kn_node *n) {
    int64_t cols = n->out[0]->shape[1];
    GENERATE(n->out[0], (i / cols) == (i % cols) ? 1.0 : 0.0);
    return KN_OK;
}

static kn_status rand_kernel(kn_node *n) {
    uint64_t seed = n->rng_seed, off = n->rng_offset;
    double lo = KN_ATTRS(n, rand)->low, span = KN_ATTRS(n, rand)->high - lo;
    GENERATE(n->out[0], lo + span * kn_philox_uniform(kn_philox(seed, off + (uint64_t)i)));
    return KN_OK;
}

static kn_status randn_kernel(kn_node *n) {
    uint64_t seed = n->rng_seed, off = n->rng_offset;
    double mean = KN_ATTRS(n, randn)->mean, std = KN_ATTRS(n, randn)->std;
    GENERATE(n->out[0], mean + std * kn_philox_normal(kn_philox(seed, off + (uint64_t)i)));
    return KN_OK;
}

static kn_status randint_kernel(kn_node *n) {
    uint64_t seed = n->rng_seed, off = n->rng_offset;
    const kn_attrs_randint *a = KN_ATTRS(n, randint);
    int64_t lo = a->low;
    uint64_t span = (uint64_t)(a->high - a->low);
    kn_tensor *t = n->out[0];
    int64_t count = kn_numel(t);
    void *base = kn_tensor_data(t);
#pragma omp parallel for num_threads(kn_cpu_threads_for(count * 8)) schedule(static)
    for (int64_t i = 0; i < count; i++) {
        int64_t v = lo + (int64_t)(kn_philox_u64(kn_philox(seed, off + (uint64_t)i)) % span);
        if (t->dtype == KN_I64) ((int64_t *)base)[i] = v;
        else kn_cpu_store_f64(base, t->dtype, i, (double)v);
    }
    return KN_OK;
}

/* bernoulli: with its input, p per element (contiguous, f64); else the attribute p. */
static kn_status bernoulli_kernel(kn_node *n) {
    uint64_t seed = n->rng_seed, off = n->rng_offset;
    kn_tensor *probs = KN_INPUT(n, bernoulli, probs);
    const double *p = probs ? kn_tensor_data(probs) : NULL;
    double p0 = KN_ATTRS(n, bernoulli)->p;
    GENERATE(n->out[0], kn_philox_uniform(kn_philox(seed, off + (uint64_t)i)) < (p ? p[i] : p0) ? 1.0 : 0.0);
    return KN_OK;
}

const kn_kernel_reg kn_cpu_kernels_creation[] = {
    {KN_OP_fill, fill_kernel, KN_DTS_ALL},
    {KN_OP_empty, empty_kernel, KN_DTS_ALL},
    {KN_OP_arange, arange_kernel, KN_DTS_NUMERIC},
    {KN_OP_linspace, linspace_kernel, KN_DTS_FLOAT},
    {KN_OP_eye, eye_kernel, KN_DTS_ALL},
    {KN_OP_rand, rand_kernel, KN_DTS_FLOAT},
    {KN_OP_randn, randn_kernel, KN_DTS_FLOAT},
    {KN_OP_randint, randint_kernel, KN_DTS_NUMERIC},
    {KN_OP_bernoulli, bernoulli_kernel, KN_DTS_FLOAT},
    {0},
};
