/* Matrix products in f32, bf16 and f16 against a float64 reference computed from the rounded
 * inputs: the decode shape (a few rows times a weight used transposed, which streams the
 * weight as it is: bf16 pairs by vdpbf16ps where the CPU has AVX512-BF16, other 16-bit weights
 * widened in registers; every tile the CPU has, AVX-512, AVX2 and the portable one) and the general shape (BLAS; 16-bit operands widened first), with odd
 * sizes that leave vector tails and partial tiles, strided rows (staged on the stack or, when
 * long, on the heap), and a batch. */
#include <stdlib.h>

#include "backends/cpu/k_linalg_skinny.h"
#include "harness.h"

/* want[m, n] = sum_k a[m, k] * w[n, k] */
static double *reference(const double *a, const double *w, int64_t M, int64_t N, int64_t K) {
    double *want = calloc((size_t)(M * N), sizeof *want);
    for (int64_t m = 0; m < M; m++)
        for (int64_t n = 0; n < N; n++)
            for (int64_t k = 0; k < K; k++) want[m * N + n] += a[m * K + k] * w[n * K + k];
    return want;
}

/* Sums of K products of [-1, 1) values: f32 accumulation (in another order than the
 * reference's), then one rounding to the dtype. */
static tolerance sum_tol(kn_dtype dt, int64_t K) {
    tolerance t = tol_for(dt);
    t.atol *= (double)K / 8;
    return t;
}

static void check_linear(kn_dtype dt, int64_t M, int64_t N, int64_t K) {
    kn_scope_push();
    kn_tensor *x = rand_tensor(KN_SHAPE(1, M, K), dt, -1, 1), *w = rand_tensor(KN_SHAPE(N, K), dt, -1, 1);
    double *a = read_f64(x), *wv = read_f64(w), *want = reference(a, wv, M, N, K);
    char what[96];
    snprintf(what, sizeof what, "linear %s [1, %lld, %lld] x [%lld, %lld]^T", kn_dtype_name(dt), (long long)M,
             (long long)K, (long long)N, (long long)K);
    kn_tensor *y = kn_linear(x, w, NULL);
    CHECK(y && kn_dtype_of(y) == dt);
    CHECK_SHAPE(y, KN_SHAPE(1, M, N));
    CHECK_CLOSE(y, want, sum_tol(dt, K), what);
    free(a), free(wv), free(want);
    kn_scope_pop();
}

static void decode_shapes(void) {
    kn_dtype dts[] = {KN_F32, KN_BF16, KN_F16};
    for (int d = 0; d < 3; d++) {
        check_linear(dts[d], 1, 37, 100);   /* a partial tile of rows and a vector tail */
        check_linear(dts[d], 1, 64, 288);
        check_linear(dts[d], 3, 130, 768);  /* a few rows at once */
        check_linear(dts[d], 8, 5, 7);      /* K shorter than one vector */
        check_linear(dts[d], 2, 7, 33);     /* one bf16 pair step and a masked tail of 1; a tile of 3 rows */
        check_linear(dts[d], 1, 6, 31);     /* a masked tail only; a tile of 2 rows */
        check_linear(dts[d], 17, 40, 96);   /* past the few-row path: SGEMM, 16-bit weights widened by panels */
        check_linear(dts[d], 20, 700, 20);  /* several panels, the last one partial */
    }
}

static const char *const tile_names[] = {"portable", "AVX2", "AVX-512", "AVX512-BF16"};

/* Runs check under each tile this CPU has, the widest (the default) last. */
static void for_each_tile(void (*check)(void)) {
    for (kn_skinny_tile t = KN_SKINNY_PORTABLE; t <= KN_SKINNY_AVX512_BF16; t++) {
        if (!kn_cpu_skinny_has(t)) {
            printf("# skip: the %s tile (this CPU lacks it)\n", tile_names[t]);
            continue;
        }
        kn_cpu_skinny_limit(t);
        check();
    }
}

static void test_decode_shapes(void) { for_each_tile(decode_shapes); }

/* Rows of x that are not contiguous (a column slice) and a weight that is a slice of a wider
 * matrix: the kernel reads both through their strides, staging the rows of x. */
static void check_strided(kn_dtype dt, int64_t M, int64_t N, int64_t K) {
    kn_scope_push();
    kn_tensor *xw = rand_tensor(KN_SHAPE(M, 2 * K), dt, -1, 1), *ww = rand_tensor(KN_SHAPE(N, K + 6), dt, -1, 1);
    kn_tensor *x = kn_slice(xw, 1, 0, 2 * K, 2), *w = kn_narrow(ww, 1, 3, K);
    double *a = read_f64(x), *wv = read_f64(w), *want = reference(a, wv, M, N, K);
    char what[96];
    snprintf(what, sizeof what, "strided %s rows [%lld, %lld] and weight [%lld, %lld]", kn_dtype_name(dt),
             (long long)M, (long long)K, (long long)N, (long long)K);
    kn_tensor *y = kn_matmul(x, kn_transpose(w, 0, 1));
    CHECK_SHAPE(y, KN_SHAPE(M, N));
    CHECK_CLOSE(y, want, sum_tol(dt, K), what);
    free(a), free(wv), free(want);
    kn_scope_pop();
}

static void strided_operands(void) {
    kn_dtype dts[] = {KN_F32, KN_BF16, KN_F16};
    for (int d = 0; d < 3; d++) {
        check_strided(dts[d], 2, 33, 50);
        check_strided(dts[d], 2, 9, 5000);  /* rows too long for the stack */
    }
}

static void test_strided_operands(void) { for_each_tile(strided_operands); }

/* A batch of single rows (bmm) does not take the weight path; its results are the same. */
static void test_batched_rows(void) {
    kn_scope_push();
    const int64_t B = 3, N = 20, K = 40;
    kn_tensor *x = rand_tensor(KN_SHAPE(B, 1, K), KN_BF16, -1, 1), *w = rand_tensor(KN_SHAPE(B, N, K), KN_BF16, -1, 1);
    double *a = read_f64(x), *wv = read_f64(w), *want = malloc(sizeof(double) * (size_t)(B * N));
    for (int64_t b = 0; b < B; b++) {
        double *r = reference(a + b * K, wv + b * N * K, 1, N, K);
        for (int64_t n = 0; n < N; n++) want[b * N + n] = r[n];
        free(r);
    }
    kn_tensor *y = kn_matmul(x, kn_transpose(w, 1, 2));
    CHECK_SHAPE(y, KN_SHAPE(B, 1, N));
    CHECK_CLOSE(y, want, sum_tol(KN_BF16, K), "batched bf16 rows");
    free(a), free(wv), free(want);
    kn_scope_pop();
}

/* A product whose right operand is not a weight used transposed ([K, N] stored as it is). */
static void test_plain_layout(void) {
    kn_scope_push();
    const int64_t M = 20, N = 25, K = 30;
    kn_tensor *x = rand_tensor(KN_SHAPE(M, K), KN_BF16, -1, 1), *y = rand_tensor(KN_SHAPE(K, N), KN_BF16, -1, 1);
    kn_tensor *yt = kn_contiguous(kn_transpose(y, 0, 1));
    double *a = read_f64(x), *wv = read_f64(yt), *want = reference(a, wv, M, N, K);
    kn_tensor *out = kn_matmul(x, y);
    CHECK_SHAPE(out, KN_SHAPE(M, N));
    CHECK_CLOSE(out, want, sum_tol(KN_BF16, K), "bf16 [M, K] x [K, N]");
    free(a), free(wv), free(want);
    kn_scope_pop();
}

/* A weight row gives the same bits whatever its place in a tile: the first 5 rows of a 16-row
 * weight (two full tiles) against those 5 alone (a partial tile). */
static void same_bits_in_partial_tiles(void) {
    kn_dtype dts[] = {KN_F32, KN_BF16, KN_F16};
    for (int d = 0; d < 3; d++) {
        kn_scope_push();
        kn_tensor *x = rand_tensor(KN_SHAPE(1, 300), dts[d], -1, 1), *w = rand_tensor(KN_SHAPE(16, 300), dts[d], -1, 1);
        kn_tensor *full = kn_cast(kn_linear(x, w, NULL), KN_F64);
        kn_tensor *part = kn_cast(kn_linear(x, kn_narrow(w, 0, 0, 5), NULL), KN_F64);
        double *f = read_f64(full), *p = read_f64(part);
        bool same = true;
        for (int n = 0; n < 5; n++) same = same && f[n] == p[n];
        CHECK_MSG(same, "%s: a row's sum differs between a full tile and a partial one", kn_dtype_name(dts[d]));
        free(f), free(p);
        kn_scope_pop();
    }
}

static void test_same_bits_in_partial_tiles(void) { for_each_tile(same_bits_in_partial_tiles); }

int main(void) {
    RUN(test_decode_shapes);
    RUN(test_same_bits_in_partial_tiles);
    RUN(test_strided_operands);
    RUN(test_batched_rows);
    RUN(test_plain_layout);
    return test_summary();
}
