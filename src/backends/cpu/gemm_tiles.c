/* Float products spread over kiln's thread pool (gemm_tiles.h). */
#include "backends/cpu/gemm_tiles.h"

#include <stdatomic.h>

#include "backends/cpu/gemm_provider.h"
#include "core/tensor_impl.h"
#include "core/thread_pool.h"

/* Narrower panels repack their shared operand more often than they are worth, and run the
 * libraries' kernels on tails: a 128x768x2048 f32 product in 96-wide panels took twice as long
 * on 2 threads as in 384-wide ones (oneDNN, this Zen 4). */
#define MIN_PANEL 192
/* Panels per thread of one product: two keep the cores balanced when one of them is slowed;
 * more only re-read the shared operand. */
#define PANELS_PER_THREAD 2
/* A product too narrow for MIN_PANEL-wide panels on every thread still gets one panel a thread
 * down to this width (stories15M's 288-wide products: one thread was ~1.3x slower). */
#define NARROW_PANEL 64

typedef struct tiling {
    const kn_gemm_block *whole;
    kn_gemm_block_fn fn;
    int64_t panels; /* per product */
    bool split_n;
    atomic_int worst;
} tiling;

/* Where panel p of `panels` starts along a dim: a multiple of 16, the dim itself at the end. */
static int64_t panel_edge(int64_t dim, int64_t p, int64_t panels) {
    return p >= panels ? dim : (dim * p / panels) & ~(int64_t)15;
}

static void run_block(tiling *t, const kn_gemm_block *blk) {
    int r = (int)t->fn(blk), cur = atomic_load(&t->worst);
    while (r > cur && !atomic_compare_exchange_weak(&t->worst, &cur, r)) {
    }
}

/* Items [begin, end): product i / panels, panel i % panels. Consecutive panels of one product
 * are one block, and so are consecutive whole products. */
static void tile_chunk(void *ctx, int64_t begin, int64_t end, int chunk) {
    tiling *t = ctx;
    const kn_gemm_block *w = t->whole;
    const int64_t es = (int64_t)kn_dtype_size(w->dt);
    for (int64_t i = begin; i < end;) {
        const int64_t bi = i / t->panels, p0 = i % t->panels;
        const int64_t p1 = t->panels == 1 ? 1 : (end - bi * t->panels < t->panels ? end - bi * t->panels : t->panels);
        kn_gemm_block b = *w;
        b.batches = t->panels == 1 ? end - i : 1;
        b.a = (const char *)w->a + es * bi * w->a_bs;
        b.b = (const char *)w->b + es * bi * w->b_bs;
        b.c = (char *)w->c + es * bi * w->c_bs;
        if (t->panels > 1 && t->split_n) {
            const int64_t j0 = panel_edge(w->N, p0, t->panels), j1 = panel_edge(w->N, p1, t->panels);
            b.b = (const char *)b.b + es * j0 * w->bcs;
            b.c = (char *)b.c + es * j0;
            b.N = j1 - j0;
        } else if (t->panels > 1) {
            const int64_t r0 = panel_edge(w->M, p0, t->panels), r1 = panel_edge(w->M, p1, t->panels);
            b.a = (const char *)b.a + es * r0 * w->ars;
            b.c = (char *)b.c + es * r0 * w->ldc;
            b.M = r1 - r0;
        }
        if (b.M > 0 && b.N > 0) run_block(t, &b);
        i = t->panels == 1 ? end : bi * t->panels + p1;
    }
}

kn_gemm_result kn_gemm_tiled(const kn_gemm_block *whole, kn_gemm_block_fn fn) {
    const kn_gemm_block *w = whole;
    if (w->M <= 0 || w->N <= 0 || w->batches <= 0) return KN_GEMM_DONE;
    const double flops = 2.0 * (double)w->M * (double)w->N * (double)w->K * (double)w->batches;
    const bool split_n = w->M <= w->N;
    const int64_t dim = split_n ? w->N : w->M, threads = kn_pool_threads();
    int64_t most_panels = dim / MIN_PANEL;
    if (most_panels < threads) most_panels = dim / NARROW_PANEL < threads ? dim / NARROW_PANEL : threads;
    if (most_panels < 1) most_panels = 1;
    const int64_t items_most = w->batches * most_panels;
    const int want = kn_parallel_chunks(items_most, (int64_t)(flops / KN_GEMM_FLOPS_PER_COST / (double)items_most) + 1);
    if (want <= 1) return fn(w);
    int64_t panels = w->batches >= want ? 1 : (want + w->batches - 1) / w->batches;
    if (panels > most_panels) panels = most_panels;
    if (panels > PANELS_PER_THREAD * threads) panels = PANELS_PER_THREAD * threads;
    tiling t = {.whole = w, .fn = fn, .panels = panels, .split_n = split_n, .worst = KN_GEMM_DONE};
    const int64_t items = w->batches * panels;
    kn_parallel_run(items, want < items ? want : (int)items, tile_chunk, &t);
    return (kn_gemm_result)atomic_load(&t.worst);
}

/* The batch stride of t when its b-th matrix is at b * stride for every b (0: one matrix
 * shared by all), or -1. */
static int64_t uniform_batch_stride(const kn_tensor *t, int64_t batches) {
    if (batches == 1) return 0;
    const int64_t s = kn_gemm_batch_offset(t, 1);
    for (int64_t bi = 2; bi < batches; bi++)
        if (kn_gemm_batch_offset(t, bi) != bi * s) return -1;
    return s;
}

kn_gemm_result kn_gemm_tensors(const kn_tensor *a, const kn_tensor *b, kn_tensor *out, int64_t batches, int64_t M,
                               int64_t N, int64_t K, kn_gemm_block_fn fn) {
    const int nd = out->ndim;
    const int64_t es = (int64_t)kn_dtype_size(out->dtype);
    kn_gemm_block w = {
        .dt = out->dtype,
        .a = kn_tensor_data(a), .b = kn_tensor_data(b), .c = kn_tensor_data(out),
        .ars = a->stride[nd - 2], .acs = a->stride[nd - 1], .brs = b->stride[nd - 2], .bcs = b->stride[nd - 1],
        .ldc = N, .M = M, .N = N, .K = K,
        .batches = batches, .c_bs = M * N,
    };
    w.a_bs = uniform_batch_stride(a, batches), w.b_bs = uniform_batch_stride(b, batches);
    if (w.a_bs >= 0 && w.b_bs >= 0) return kn_gemm_tiled(&w, fn);
    kn_gemm_result worst = KN_GEMM_DONE;
    for (int64_t bi = 0; bi < batches; bi++) {
        kn_gemm_block one = w;
        one.batches = 1;
        one.a = (const char *)w.a + es * kn_gemm_batch_offset(a, bi);
        one.b = (const char *)w.b + es * kn_gemm_batch_offset(b, bi);
        one.c = (char *)w.c + es * bi * M * N;
        kn_gemm_result r = kn_gemm_tiled(&one, fn);
        if (r > worst) worst = r;
    }
    return worst;
}
