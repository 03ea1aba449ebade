/* CPU kernels of the creation ops: fills, ranges, the identity, and Philox random draws. */
#include <string.h>

#include "backends/cpu/cpu_kernels.h"
#include "core/philox.h"
#include "core/thread_pool.h"

/* What a generator's value of element i reads: the output, and the kernel's parameters. */
typedef struct gen_ctx {
    void *base;
    kn_dtype dt;
    double a, b, step;              /* fill: a; ranges: start a, end b, step; rand: low a, span b */
    double top;                     /* rand: the dtype's largest value below high */
    int64_t count, half, cols, lo; /* linspace: count, half; eye: cols; randint: lo */
    uint64_t seed, off, span;       /* philox draws; randint: span */
    const double *p;                /* bernoulli's probabilities, or NULL */
} gen_ctx;

/* NAME_chunk: out[i] = VALUE_OF_I (of g and i) over a chunk of elements. */
#define GENERATOR(NAME, VALUE_OF_I)                                                          \
    static void NAME##_chunk(void *ctx, int64_t begin, int64_t end, int chunk) {             \
        const gen_ctx *g = ctx;                                                              \
        (void)chunk;                                                                         \
        for (int64_t i = begin; i < end; i++) kn_cpu_store_f64(g->base, g->dt, i, (VALUE_OF_I)); \
    }

/* Runs a generator over out's elements in parallel. */
static kn_status generate(kn_tensor *out, gen_ctx *g, kn_chunk_fn chunk) {
    g->base = kn_tensor_data(out);
    g->dt = out->dtype;
    kn_parallel_for(kn_numel(out), 8, chunk, g);
    return KN_OK;
}

/* fill: the value's bits worked out once, then stored by width, so every dtype's loop
 * vectorizes (storing through kn_cpu_store_f64 per element made a bf16 [4, 64, 2304] gradient
 * buffer cost as much as an f32 one twice its size). */
typedef struct fill_ctx {
    void *base;
    size_t size;
    uint64_t bits;
} fill_ctx;

static void fill_chunk(void *ctx, int64_t begin, int64_t end, int chunk) {
    const fill_ctx *f = ctx;
    (void)chunk;
    switch (f->size) {
    case 1: memset((uint8_t *)f->base + begin, (int)f->bits, (size_t)(end - begin)); break;
    case 2: for (int64_t i = begin; i < end; i++) ((uint16_t *)f->base)[i] = (uint16_t)f->bits; break;
    case 4: for (int64_t i = begin; i < end; i++) ((uint32_t *)f->base)[i] = (uint32_t)f->bits; break;
    default: for (int64_t i = begin; i < end; i++) ((uint64_t *)f->base)[i] = f->bits; break;
    }
}

static kn_status fill_kernel(kn_node *n) {
    kn_dtype dt = n->out[0]->dtype;
    fill_ctx f = {.base = kn_tensor_data(n->out[0]), .size = kn_dtype_size(dt)};
    union { uint8_t b8; uint16_t b16; uint32_t b32; uint64_t b64; } one = {.b64 = 0};
    kn_cpu_store_f64(&one, dt, 0, KN_ATTRS(n, fill)->a);
    f.bits = f.size == 1 ? one.b8 : f.size == 2 ? one.b16 : f.size == 4 ? one.b32 : one.b64;
    kn_parallel_for(kn_numel(n->out[0]), 1, fill_chunk, &f);
    return KN_OK;
}

static kn_status empty_kernel(kn_node *n) { return KN_OK; }

GENERATOR(arange, g->a + (double)i * g->step)
static kn_status arange_kernel(kn_node *n) {
    gen_ctx g = {.a = KN_ATTRS(n, arange)->start, .step = KN_ATTRS(n, arange)->step};
    return generate(n->out[0], &g, arange_chunk);
}

/* Like PyTorch: step from the start for the first half, from the end for the rest, so both
 * ends are exact (and a single value is start). */
GENERATOR(linspace, i < g->half ? g->a + g->step * (double)i : g->b - g->step * (double)(g->count - 1 - i))
static kn_status linspace_kernel(kn_node *n) {
    double start = KN_ATTRS(n, linspace)->start, end = KN_ATTRS(n, linspace)->end;
    int64_t count = kn_numel(n->out[0]);
    gen_ctx g = {.a = start, .b = end, .step = count > 1 ? (end - start) / (double)(count - 1) : 0,
                 .count = count, .half = (count + 1) / 2};
    return generate(n->out[0], &g, linspace_chunk);
}

GENERATOR(eye, (i / g->cols) == (i % g->cols) ? 1.0 : 0.0)
static kn_status eye_kernel(kn_node *n) {
    gen_ctx g = {.cols = n->out[0]->shape[1]};
    return generate(n->out[0], &g, eye_chunk);
}

/* A draw close enough to high rounds up to it in f32 or f64: such draws take the largest value
 * below high, so that draws stay in [low, high) (the 16-bit formats round as they must). */
static double rand_value(const gen_ctx *g, int64_t i) {
    double v = g->a + g->b * kn_philox_uniform(kn_philox(g->seed, g->off + (uint64_t)i));
    return v > g->top && g->top >= g->a ? g->top : v;
}

GENERATOR(rand, rand_value(g, i))
static kn_status rand_kernel(kn_node *n) {
    double lo = KN_ATTRS(n, rand)->low, hi = KN_ATTRS(n, rand)->high;
    kn_dtype dt = n->out[0]->dtype;
    double top = dt == KN_F64 ? nextafter(hi, -INFINITY) : INFINITY;
    if (dt == KN_F32) top = (double)(float)hi < hi ? (float)hi : nextafterf((float)hi, -INFINITY);
    gen_ctx g = {.seed = n->rng_seed, .off = n->rng_offset, .a = lo, .b = hi - lo, .top = top};
    return generate(n->out[0], &g, rand_chunk);
}

GENERATOR(randn, g->a + g->b * kn_philox_normal(kn_philox(g->seed, g->off + (uint64_t)i)))
static kn_status randn_kernel(kn_node *n) {
    gen_ctx g = {.seed = n->rng_seed, .off = n->rng_offset, .a = KN_ATTRS(n, randn)->mean, .b = KN_ATTRS(n, randn)->std};
    return generate(n->out[0], &g, randn_chunk);
}

static void randint_chunk(void *ctx, int64_t begin, int64_t end, int chunk) {
    const gen_ctx *g = ctx;
    (void)chunk;
    for (int64_t i = begin; i < end; i++) {
        int64_t v = g->lo + (int64_t)(kn_philox_u64(kn_philox(g->seed, g->off + (uint64_t)i)) % g->span);
        if (g->dt == KN_I64) ((int64_t *)g->base)[i] = v;
        else kn_cpu_store_f64(g->base, g->dt, i, (double)v);
    }
}

static kn_status randint_kernel(kn_node *n) {
    const kn_attrs_randint *a = KN_ATTRS(n, randint);
    gen_ctx g = {.seed = n->rng_seed, .off = n->rng_offset, .lo = a->low, .span = (uint64_t)(a->high - a->low)};
    return generate(n->out[0], &g, randint_chunk);
}

/* bernoulli: with its input, p per element (contiguous, f64); else the attribute p (a). */
GENERATOR(bernoulli, kn_philox_uniform(kn_philox(g->seed, g->off + (uint64_t)i)) < (g->p ? g->p[i] : g->a) ? 1.0 : 0.0)
static kn_status bernoulli_kernel(kn_node *n) {
    kn_tensor *probs = KN_INPUT(n, bernoulli, probs);
    gen_ctx g = {.seed = n->rng_seed, .off = n->rng_offset, .p = probs ? kn_tensor_data(probs) : NULL,
                 .a = KN_ATTRS(n, bernoulli)->p};
    return generate(n->out[0], &g, bernoulli_chunk);
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
