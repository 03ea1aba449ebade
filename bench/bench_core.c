/* Core benchmarks: op dispatch overhead on tiny tensors, matmul against OpenBLAS called
 * directly, bf16 matmul through each provider (KILN_GEMM's choices), and large elementwise
 * ops and reductions against memcpy bandwidth. */
#include "bench_common.h"

#include <cblas.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include "backends/cpu/gemm_provider.h"

/* ---- dispatch ---------------------------------------------------------------------------- */

#define DISPATCH_BATCH 1000 /* ops per scope, so memory stays bounded */

/* ns per op of a chain x = x + b over 1x8 f32 tensors; *record_ns: the host's share (the
 * time until the last op is recorded, before waiting for the queue to drain). */
static double dispatch_ns(kn_mode mode, int64_t ops, int reps, double *record_ns) {
    if (kn_set_mode(mode) != KN_OK) {
        fprintf(stderr, "bench: set_mode %s: %s\n", kn_mode_name(mode), kn_last_error());
        exit(1);
    }
    const float va[8] = {1, 2, 3, 4, 5, 6, 7, 8}, vb[8] = {1e-3f, 2e-3f, 3e-3f, 4e-3f, 5e-3f, 6e-3f, 7e-3f, 8e-3f};
    kn_tensor *a = bench_check(kn_from_host(va, KN_F32, KN_SHAPE(1, 8), KN_CPU), "from_host");
    kn_tensor *b = bench_check(kn_from_host(vb, KN_F32, KN_SHAPE(1, 8), KN_CPU), "from_host");
    double total[64], record[64];
    if (reps > 64) reps = 64;
    for (int rep = -1; rep < reps; rep++) { /* rep -1 warms the allocator, the worker and the caches */
        int64_t n = rep < 0 ? ops / 10 : ops;
        kn_tensor *x = kn_retain(a);
        kn_sync();
        double t0 = bench_now();
        for (int64_t done = 0; done < n; done += DISPATCH_BATCH) {
            kn_scope_push();
            kn_tensor *y = x;
            for (int i = 0; i < DISPATCH_BATCH; i++) y = bench_check(kn_add(y, b), "add");
            kn_scope_pop_keep(y);
            kn_release(x);
            x = y;
        }
        double t1 = bench_now();
        kn_status st = kn_sync();
        double t2 = bench_now();
        if (st != KN_OK) {
            fprintf(stderr, "bench: dispatch chain failed: %s\n", kn_last_error());
            exit(1);
        }
        kn_release(x);
        if (rep >= 0) {
            record[rep] = (t1 - t0) * 1e9 / (double)n;
            total[rep] = (t2 - t0) * 1e9 / (double)n;
        }
    }
    kn_release(a);
    kn_release(b);
    kn_set_mode(KN_MODE_STRICT);
    *record_ns = bench_median(record, reps);
    return bench_median(total, reps);
}

static void bench_dispatch(void) {
    double rec;
    double strict = dispatch_ns(KN_MODE_STRICT, 100000, 7, &rec);
    bench_report("kiln", "dispatch_add_strict", "1x8 f32 chain", "ns_per_op", strict, "", 0);
    bench_report("kiln", "dispatch_add_record", "1x8 f32 chain", "ns_per_op", rec, "", 0);
    double debug = dispatch_ns(KN_MODE_DEBUG, 2000, 3, &rec);
    bench_report("kiln", "dispatch_add_debug", "1x8 f32 chain", "ns_per_op", debug, "", 0);
}

/* ---- matmul ------------------------------------------------------------------------------ */

typedef struct mm_ctx {
    int M, N, K;
    float *ha, *hb, *hc; /* host copies for cblas */
    kn_tensor *a, *b;    /* the same values in kiln */
} mm_ctx;

static void mm_kiln(void *p) {
    mm_ctx *c = p;
    bench_check(kn_matmul(c->a, c->b), "matmul");
}

static void mm_blas(void *p) {
    mm_ctx *c = p;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, c->M, c->N, c->K, 1.0f, c->ha, c->K, c->hb, c->N, 0.0f,
                c->hc, c->N);
}

static float *random_host(int64_t n, uint64_t seed) {
    float *v = malloc(sizeof *v * (size_t)n);
    if (!v) {
        fprintf(stderr, "bench: out of host memory\n");
        exit(1);
    }
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
    for (int64_t i = 0; i < n; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        v[i] = (float)((double)(s >> 40) / (double)(1ull << 24)) - 0.5f;
    }
    return v;
}

static void bench_matmul_one(int M, int N, int K) {
    mm_ctx c = {M, N, K, random_host((int64_t)M * K, 1), random_host((int64_t)K * N, 2),
                random_host((int64_t)M * N, 3), NULL, NULL};
    c.a = bench_check(kn_from_host(c.ha, KN_F32, KN_SHAPE(M, K), KN_CPU), "from_host");
    c.b = bench_check(kn_from_host(c.hb, KN_F32, KN_SHAPE(K, N), KN_CPU), "from_host");
    double flops = 2.0 * M * N * K;
    int reps = flops < 1e9 ? 21 : flops < 1e10 ? 9 : 5;
    /* Interleave the two so that drift of a shared host hits both alike. */
    double tb[3], tk[3];
    for (int round = 0; round < 3; round++) {
        /* OpenBLAS as its users call it, on its own threads; kiln keeps it on one (its pool
         * spreads the products) and gets that back after. */
        openblas_set_num_threads(kn_get_num_threads());
        tb[round] = bench_time(mm_blas, &c, 2, reps);
        openblas_set_num_threads(1);
        tk[round] = bench_time(mm_kiln, &c, 2, reps);
    }
    double blas = flops / bench_median(tb, 3) * 1e-9, kiln = flops / bench_median(tk, 3) * 1e-9;
    char shape[64];
    snprintf(shape, sizeof shape, "%dx%d @ %dx%d", M, K, K, N);
    bench_report("openblas", "matmul", shape, "gflops", blas, "", 0);
    bench_report("kiln", "matmul", shape, "gflops", kiln, "openblas", kiln / blas);
    kn_release(c.a);
    kn_release(c.b);
    free(c.ha);
    free(c.hb);
    free(c.hc);
}

/* One bf16 product through each matmul provider (backends/cpu/gemm_provider.h), the
 * providers alternated over three rounds, best round each: openblas widens to f32 and runs
 * SGEMM, onednn runs bf16 with f32 accumulation. */
static void bench_matmul_bf16_one(int M, int N, int K) {
    float *ha = random_host((int64_t)M * K, 1), *hb = random_host((int64_t)K * N, 2);
    mm_ctx c = {M, N, K, NULL, NULL, NULL, NULL, NULL};
    kn_tensor *a = bench_check(kn_from_host(ha, KN_F32, KN_SHAPE(M, K), KN_CPU), "from_host");
    kn_tensor *b = bench_check(kn_from_host(hb, KN_F32, KN_SHAPE(K, N), KN_CPU), "from_host");
    c.a = bench_check(kn_cast(a, KN_BF16), "cast");
    c.b = bench_check(kn_cast(b, KN_BF16), "cast");
    const char *names[] = {"openblas", "onednn"};
    double flops = 2.0 * M * N * K, best[2] = {0, 0};
    int reps = flops < 1e9 ? 21 : 9;
    for (int round = 0; round < 3; round++)
        for (int p = 0; p < 2; p++) {
            setenv("KILN_GEMM", names[p], 1);
            kn_gemm_reload();
            double t = bench_time(mm_kiln, &c, 2, reps);
            if (!best[p] || t < best[p]) best[p] = t;
        }
    unsetenv("KILN_GEMM");
    kn_gemm_reload();
    char shape[64];
    snprintf(shape, sizeof shape, "%dx%d @ %dx%d bf16", M, K, K, N);
    bench_report("kiln-openblas", "matmul", shape, "gflops", flops / best[0] * 1e-9, "", 0);
    bench_report("kiln-onednn", "matmul", shape, "gflops", flops / best[1] * 1e-9, "kiln-openblas", best[0] / best[1]);
    kn_release(a);
    kn_release(b);
    kn_release(c.a);
    kn_release(c.b);
    free(ha);
    free(hb);
}

static void bench_matmul(void) {
    openblas_set_num_threads(kn_get_num_threads());
    for (int n = 256; n <= 2048; n *= 2) bench_matmul_one(n, n, n);
    bench_matmul_one(256, 3072, 768);
    bench_matmul_one(256, 768, 3072);
    if (!kn_gemm_has(KN_GEMM_ONEDNN, KN_BF16)) {
        printf("bf16 matmul: skipped (this build or CPU has no oneDNN bf16)\n");
        return;
    }
    bench_matmul_bf16_one(1024, 1024, 1024);
    bench_matmul_bf16_one(256, 3072, 768);
    bench_matmul_bf16_one(256, 768, 3072);
}

/* ---- bandwidth: memcpy, elementwise, reductions ----------------------------------------- */

#define BIG_ROWS 32768
#define BIG_COLS 1024
#define BIG_N ((int64_t)BIG_ROWS * BIG_COLS) /* 128 MiB of f32 */

typedef struct copy_part {
    char *dst;
    const char *src;
    size_t bytes;
} copy_part;

static void *copy_part_run(void *p) {
    copy_part *c = p;
    memcpy(c->dst, c->src, c->bytes);
    return NULL;
}

typedef struct copy_ctx {
    char *dst, *src;
    size_t bytes;
    int threads;
} copy_ctx;

static void copy_run(void *p) {
    copy_ctx *c = p;
    if (c->threads == 1) {
        memcpy(c->dst, c->src, c->bytes);
        return;
    }
    pthread_t th[8];
    copy_part parts[8];
    size_t per = (c->bytes / (size_t)c->threads + 4095) & ~(size_t)4095;
    for (int t = 0; t < c->threads; t++) {
        size_t begin = per * (size_t)t, end = begin + per < c->bytes ? begin + per : c->bytes;
        parts[t] = (copy_part){c->dst + begin, c->src + begin, end > begin ? end - begin : 0};
        pthread_create(&th[t], NULL, copy_part_run, &parts[t]);
    }
    for (int t = 0; t < c->threads; t++) pthread_join(th[t], NULL);
}

/* The best memcpy rate of 1 and of kiln's thread count (at most 8), in GB/s (read + write). */
static double bench_memcpy(void) {
    size_t bytes = (size_t)BIG_N * sizeof(float);
    copy_ctx c = {malloc(bytes), malloc(bytes), bytes, 1};
    if (!c.dst || !c.src) {
        fprintf(stderr, "bench: out of host memory\n");
        exit(1);
    }
    memset(c.src, 1, bytes);
    memset(c.dst, 0, bytes);
    double best = 0;
    int most = kn_get_num_threads() < 8 ? kn_get_num_threads() : 8;
    for (int threads = 1; threads <= most; threads = threads < most ? most : most + 1) {
        c.threads = threads;
        double gbps = 2.0 * (double)bytes / bench_time(copy_run, &c, 2, 9) * 1e-9;
        char name[32];
        snprintf(name, sizeof name, "memcpy_%dthread%s", threads, threads > 1 ? "s" : "");
        bench_report("memcpy", name, "128 MiB", "gbps", gbps, "", 0);
        if (gbps > best) best = gbps;
    }
    free(c.dst);
    free(c.src);
    return best;
}

/* X(name, call, shape of x, bytes moved per element of x: inputs read + outputs written) */
#define FLAT "33554432 f32"
#define ROWS "32768x1024 f32"
#define BANDWIDTH_OPS(X)                                                                    \
    X(add, kn_add(c->x, c->y), FLAT, 12)                                                    \
    X(mul, kn_mul(c->x, c->y), FLAT, 12)                                                    \
    X(exp, kn_exp(c->x), FLAT, 8)                                                           \
    X(gelu_tanh, kn_gelu_tanh(c->x), FLAT, 8)                                               \
    X(sum_all, kn_sum(c->x, KN_ALL_DIMS, false), FLAT, 4)                                   \
    X(sum_last_dim, kn_sum(c->x2d, KN_DIMS(-1), false), ROWS, 4 + 4.0 / BIG_COLS)           \
    X(mean_all, kn_mean(c->x, KN_ALL_DIMS, false), FLAT, 4)

typedef struct bw_ctx {
    kn_tensor *x, *y, *x2d;
} bw_ctx;

#define BW_FN(name, call, shape, per_elem) \
    static void bw_##name(void *p) { \
        bw_ctx *c = p;               \
        bench_check(call, #name);    \
    }
BANDWIDTH_OPS(BW_FN)

static void bench_bandwidth(void) {
    double copy = bench_memcpy();
    kn_manual_seed(7);
    bw_ctx c;
    c.x = bench_check(kn_randn(KN_SHAPE(BIG_N), KN_F32), "randn");
    c.y = bench_check(kn_randn(KN_SHAPE(BIG_N), KN_F32), "randn");
    c.x2d = bench_check(kn_view(c.x, KN_SHAPE(BIG_ROWS, BIG_COLS)), "view");
    kn_sync();
#define BW_RUN(name, call, shape, per_elem)                                                      \
    {                                                                                            \
        double gbps = (double)(per_elem) * (double)BIG_N / bench_time(bw_##name, &c, 2, 9) * 1e-9; \
        bench_report("kiln", #name, shape, "gbps", gbps, "memcpy", gbps / copy);               \
    }
    BANDWIDTH_OPS(BW_RUN)
    kn_release(c.x2d);
    kn_release(c.x);
    kn_release(c.y);
}

int main(int argc, char **argv) {
    const char *only = argc > 1 ? argv[1] : NULL; /* dispatch, matmul or bandwidth */
    bench_header("bench_core");
    if (!only || strcmp(only, "dispatch") == 0) bench_dispatch();
    if (!only || strcmp(only, "matmul") == 0) bench_matmul();
    if (!only || strcmp(only, "bandwidth") == 0) bench_bandwidth();
    bench_print_json();
    return 0;
}
