/* Products split over kiln's pool (gemm_tiles.h): every element of C is computed by exactly one
 * block whatever the shape, batch and pool size, panels split the dim the tiler promised, and
 * the openblas and onednn blocks give the float64 reference's values through the split,
 * overwriting or accumulating. */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/gemm_provider.h"
#include "backends/cpu/gemm_tiles.h"
#include "harness.h"

/* A block that counts the writes to each element of C (contiguous, f64 here) and checks the
 * block lies inside the product. */
static atomic_int *writes;
static const kn_gemm_block *whole_product;
static atomic_int blocks_seen, blocks_outside;

static kn_gemm_result counting_block(const kn_gemm_block *k) {
    const kn_gemm_block *w = whole_product;
    atomic_fetch_add(&blocks_seen, 1);
    const int64_t first = ((const double *)k->c - (const double *)w->c);
    for (int64_t bi = 0; bi < k->batches; bi++)
        for (int64_t i = 0; i < k->M; i++)
            for (int64_t j = 0; j < k->N; j++) {
                int64_t e = first + bi * k->c_bs + i * k->ldc + j;
                if (e < 0 || e >= w->batches * w->c_bs) atomic_fetch_add(&blocks_outside, 1);
                else atomic_fetch_add(&writes[e], 1);
            }
    return KN_GEMM_DONE;
}

static void test_every_element_once(void) {
    const int64_t shapes[][3] = {{1, 1, 1}, {3, 200, 17}, {200, 3, 17}, {130, 1000, 64}, {1000, 130, 33}, {64, 64, 0}, {257, 259, 300}};
    const int64_t batch_counts[] = {1, 3, 7, 40};
    const int sizes[] = {1, 2, 3};
    for (int s = 0; s < 3; s++) {
        kn_set_num_threads(sizes[s]);
        for (size_t sh = 0; sh < sizeof shapes / sizeof *shapes; sh++)
            for (int b = 0; b < 4; b++) {
                const int64_t M = shapes[sh][0], N = shapes[sh][1], K = shapes[sh][2], B = batch_counts[b];
                double *c = calloc((size_t)(B * M * N), sizeof *c);
                writes = calloc((size_t)(B * M * N), sizeof *writes);
                kn_gemm_block w = {.dt = KN_F64, .a = c, .b = c, .c = c, .ars = K, .acs = 1, .brs = N, .bcs = 1,
                                   .ldc = N, .M = M, .N = N, .K = K, .batches = B, .a_bs = M * K, .b_bs = 0, .c_bs = M * N};
                whole_product = &w;
                atomic_store(&blocks_seen, 0);
                atomic_store(&blocks_outside, 0);
                CHECK(kn_gemm_tiled(&w, counting_block) == KN_GEMM_DONE);
                int64_t wrong = 0;
                for (int64_t e = 0; e < B * M * N; e++) wrong += atomic_load(&writes[e]) != 1;
                CHECK_MSG(wrong == 0 && atomic_load(&blocks_outside) == 0,
                          "%d threads, %lld x [%lld,%lld,%lld]: %lld elements not written once, %d outside",
                          sizes[s], (long long)B, (long long)M, (long long)N, (long long)K, (long long)wrong,
                          atomic_load(&blocks_outside));
                /* one thread, or too little work: one block */
                if (sizes[s] == 1) CHECK(atomic_load(&blocks_seen) == 1);
                free(writes);
                free(c);
            }
    }
    kn_set_num_threads(2);
}

/* C (+)= A B through a provider's block, against float64 sums, on transposed and offset operands. */
static void check_provider(kn_gemm_block_fn fn, kn_dtype dt, bool accumulate, const char *name) {
    const int64_t M = 150, N = 333, K = 70, B = 3, ldc = N + 5;
    double *a = malloc(sizeof(double) * B * M * K), *b = malloc(sizeof(double) * K * N);
    double *c0 = malloc(sizeof(double) * B * M * ldc);
    rand_fill(a, B * M * K, -1, 1);
    rand_fill(b, K * N, -1, 1);
    rand_fill(c0, B * M * ldc, -1, 1);
    const size_t es = kn_dtype_size(dt);
    char *ad = malloc(es * B * M * K), *bd = malloc(es * K * N), *cd = malloc(es * B * M * ldc);
    /* A stored transposed per batch ([K, M]), B as is, C with padded rows */
    for (int64_t bi = 0; bi < B; bi++)
        for (int64_t i = 0; i < M; i++)
            for (int64_t k = 0; k < K; k++) {
                double v = a[(bi * M + i) * K + k];
                if (dt == KN_F32) ((float *)ad)[bi * M * K + k * M + i] = (float)v;
                else ((double *)ad)[bi * M * K + k * M + i] = v;
            }
    for (int64_t e = 0; e < K * N; e++)
        if (dt == KN_F32) ((float *)bd)[e] = (float)b[e];
        else ((double *)bd)[e] = b[e];
    for (int64_t e = 0; e < B * M * ldc; e++)
        if (dt == KN_F32) ((float *)cd)[e] = (float)c0[e];
        else ((double *)cd)[e] = c0[e];
    kn_gemm_block w = {.dt = dt, .a = ad, .b = bd, .c = cd, .ars = 1, .acs = M, .brs = N, .bcs = 1, .ldc = ldc,
                       .M = M, .N = N, .K = K, .batches = B, .a_bs = M * K, .b_bs = 0, .c_bs = M * ldc,
                       .accumulate = accumulate};
    const int sizes[] = {1, 2, 3};
    for (int s = 0; s < 3; s++) {
        kn_set_num_threads(sizes[s]);
        char *c = malloc(es * B * M * ldc);
        memcpy(c, cd, es * B * M * ldc);
        w.c = c;
        kn_gemm_result r = kn_gemm_tiled(&w, fn);
        CHECK_MSG(r == KN_GEMM_DONE, "%s: result %d", name, (int)r);
        double worst = 0;
        for (int64_t bi = 0; bi < B; bi++)
            for (int64_t i = 0; i < M; i++)
                for (int64_t j = 0; j < ldc; j++) {
                    double want = c0[(bi * M + i) * ldc + j];
                    if (j < N) {
                        double sum = 0;
                        for (int64_t k = 0; k < K; k++) sum += a[(bi * M + i) * K + k] * b[k * N + j];
                        want = accumulate ? want + sum : sum;
                    }
                    int64_t e = (bi * M + i) * ldc + j;
                    double got = dt == KN_F32 ? ((float *)c)[e] : ((double *)c)[e];
                    double err = fabs(got - want) / (1 + fabs(want));
                    if (j >= N) err = got == (dt == KN_F32 ? (double)(float)want : want) ? 0 : 1; /* padding untouched */
                    if (err > worst) worst = err;
                }
        CHECK_MSG(worst < (dt == KN_F32 ? 1e-5 : 1e-12), "%s, %s, %d threads, accumulate %d: worst relative error %g",
                  name, kn_dtype_name(dt), sizes[s], accumulate, worst);
        free(c);
    }
    kn_set_num_threads(2);
    free(a), free(b), free(c0), free(ad), free(bd), free(cd);
}

static void test_openblas_blocks_match_the_reference(void) {
    for (int acc = 0; acc < 2; acc++) {
        check_provider(kn_gemm_openblas_block, KN_F32, acc, "openblas");
        check_provider(kn_gemm_openblas_block, KN_F64, acc, "openblas");
    }
}

/* Through the matmul op, with every provider forced, products big enough to be split. */
static void test_matmul_split_on_each_provider(void) {
    const char *providers[] = {"openblas", "onednn"};
    for (int p = 0; p < 2; p++) {
        if (p == 1 && !kn_gemm_onednn_has(KN_F32)) {
            printf("  skip onednn: not built in\n");
            continue;
        }
        setenv("KILN_GEMM", providers[p], 1);
        kn_gemm_reload();
        for (int s = 1; s <= 3; s++) {
            kn_set_num_threads(s);
            kn_scope_push();
            kn_tensor *a = rand_tensor(KN_SHAPE(4, 96, 200), KN_F32, -1, 1);
            kn_tensor *b = rand_tensor(KN_SHAPE(200, 300), KN_F32, -1, 1);
            kn_tensor *c = kn_matmul(a, b);
            double *av = read_f64(a), *bv = read_f64(b);
            double *want = malloc(sizeof(double) * 4 * 96 * 300);
            for (int64_t r = 0; r < 4 * 96; r++)
                for (int64_t j = 0; j < 300; j++) {
                    double sum = 0;
                    for (int64_t k = 0; k < 200; k++) sum += av[r * 200 + k] * bv[k * 300 + j];
                    want[r * 300 + j] = sum;
                }
            tolerance tol = tol_for(KN_F32);
            tol.atol *= 200.0 / 8; /* f32 sums of K = 200 terms in the library's order */
            CHECK_CLOSE(c, want, tol, providers[p]);
            free(av), free(bv), free(want);
            kn_scope_pop();
        }
        unsetenv("KILN_GEMM");
        kn_gemm_reload();
    }
    kn_set_num_threads(2);
}

int main(void) {
    RUN(test_every_element_once);
    RUN(test_openblas_blocks_match_the_reference);
    RUN(test_matmul_split_on_each_provider);
    return test_summary();
}
