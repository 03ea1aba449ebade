/* The matmul provider table (src/backends/cpu/gemm_provider.h): oneDNN against OpenBLAS in
 * f32 over plain, batched, transposed (strided), K=1 and empty products; bf16 and f16 through
 * every provider against a float64 reference; KILN_GEMM forcing each provider (the counters
 * prove which ran), refusing an unknown name, and falling back for a dtype the forced one lacks;
 * the defaults (fixed rules); oneDNN's ISA on a CPU with AMX. Shapes keep off the decode path
 * (k_linalg_skinny.c), which stays outside the table. oneDNN cases print a skip message in a build without it. */
#define _GNU_SOURCE /* setenv */
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/gemm_provider.h"
#include "backends/cpu/onednn.h"
#include "harness.h"

/* Forces a provider (NULL: none) for the products queued from now on; what was queued runs first. */
static void force(const char *name) {
    kn_sync();
    if (name) setenv("KILN_GEMM", name, 1);
    else unsetenv("KILN_GEMM");
    kn_gemm_reload();
}

static bool have_onednn(kn_dtype dt, const char *test) {
    if (kn_gemm_onednn_has(dt)) return true;
    printf("  skip %s for %s: oneDNN is not built in or lacks the dtype\n", test, kn_dtype_name(dt));
    return false;
}

/* want[b, m, n] = sum_k a[b, m, k] * b[b, k, n] for contiguous [B, M, K] and [B, K, N] values. */
static double *reference(const double *a, const double *b, int64_t B, int64_t M, int64_t N, int64_t K) {
    double *want = calloc((size_t)(B * M * N) + 1, sizeof *want);
    for (int64_t i = 0; i < B; i++)
        for (int64_t m = 0; m < M; m++)
            for (int64_t n = 0; n < N; n++)
                for (int64_t k = 0; k < K; k++)
                    want[(i * M + m) * N + n] += a[(i * M + m) * K + k] * b[(i * K + k) * N + n];
    return want;
}

/* The operands of a [B, M, K] x [B, K, N] product (B = 0: plain matrices). With transposed set,
 * both are transposed views of contiguous tensors (strided for BLAS and oneDNN alike). */
typedef struct operands {
    kn_tensor *a, *b;
    int64_t B, M, N, K;
} operands;

static operands make(kn_dtype dt, int64_t B, int64_t M, int64_t N, int64_t K, bool transposed) {
    operands o = {NULL, NULL, B ? B : 1, M, N, K};
    int nd = B ? 3 : 2, r = nd - 2, c = nd - 1;
    kn_shape sa = B ? KN_SHAPE(B, M, K) : KN_SHAPE(M, K), sb = B ? KN_SHAPE(B, K, N) : KN_SHAPE(K, N);
    if (transposed) {
        kn_shape ta = B ? KN_SHAPE(B, K, M) : KN_SHAPE(K, M), tb = B ? KN_SHAPE(B, N, K) : KN_SHAPE(N, K);
        o.a = kn_transpose(rand_tensor(ta, dt, -1, 1), r, c);
        o.b = kn_transpose(rand_tensor(tb, dt, -1, 1), r, c);
    } else {
        o.a = rand_tensor(sa, dt, -1, 1);
        o.b = rand_tensor(sb, dt, -1, 1);
    }
    return o;
}

/* A product on the forced provider; its values as doubles (NULL for an empty one). */
static double *product(const operands *o, const char *provider) {
    force(provider);
    kn_tensor *y = kn_matmul(o->a, o->b);
    CHECK(y != NULL);
    double *v = y ? read_f64(y) : NULL;
    force(NULL);
    return v;
}

static int64_t selected(kn_gemm_provider p, kn_dtype dt) {
    kn_gemm_counts c;
    kn_gemm_counts_get(&c);
    return c.selected[p][dt];
}

static int64_t fallbacks(kn_dtype dt) {
    kn_gemm_counts c;
    kn_gemm_counts_get(&c);
    return c.fallbacks[dt];
}

/* oneDNN and OpenBLAS agree in f32 within 1e-5 relative to the results' size. */
static void check_f32_pair(int64_t B, int64_t M, int64_t N, int64_t K, bool transposed) {
    kn_scope_push();
    operands o = make(KN_F32, B, M, N, K, transposed);
    int64_t before = selected(KN_GEMM_ONEDNN, KN_F32);
    double *blas = product(&o, "openblas"), *dnnl = product(&o, "onednn");
    int64_t n = o.B * M * N;
    CHECK_MSG(M * N == 0 || selected(KN_GEMM_ONEDNN, KN_F32) == before + 1, "onednn not selected for f32");
    double scale = 1e-30;
    for (int64_t i = 0; i < n; i++) scale = fabs(blas[i]) > scale ? fabs(blas[i]) : scale;
    for (int64_t i = 0; i < n; i++)
        CHECK_MSG(fabs(dnnl[i] - blas[i]) <= 1e-5 * scale,
                  "f32 [%lld] %lldx%lldx%lld%s: onednn %.9g, openblas %.9g at %lld", (long long)B, (long long)M,
                  (long long)K, (long long)N, transposed ? " transposed" : "", dnnl[i], blas[i], (long long)i);
    if (K == 0)
        for (int64_t i = 0; i < n; i++) CHECK_MSG(dnnl[i] == 0, "K = 0 leaves a nonzero at %lld", (long long)i);
    free(blas), free(dnnl);
    kn_scope_pop();
}

static void test_onednn_matches_openblas_f32(void) {
    if (!have_onednn(KN_F32, "onednn vs openblas")) return;
    check_f32_pair(0, 17, 23, 31, false);
    check_f32_pair(0, 64, 48, 96, true);
    check_f32_pair(4, 12, 9, 33, false); /* one batched primitive */
    check_f32_pair(3, 10, 20, 16, true);
    check_f32_pair(0, 19, 13, 1, false); /* K = 1 */
    check_f32_pair(0, 11, 7, 0, false);  /* K = 0: zeros */
    check_f32_pair(0, 0, 7, 5, false);   /* empty rows */
    check_f32_pair(2, 9, 0, 5, false);   /* empty columns */
}

/* A batch against one shared matrix (broadcast) and a batch whose matrices are not at one
 * stride (a slice of two batch dims: one matrix at a time), through oneDNN without fallback. */
static void test_onednn_batch_layouts(void) {
    if (!have_onednn(KN_F32, "batch layouts")) return;
    kn_scope_push();
    const int64_t B = 3, M = 10, N = 12, K = 14;
    kn_tensor *a = rand_tensor(KN_SHAPE(B, M, K), KN_F32, -1, 1), *w = rand_tensor(KN_SHAPE(K, N), KN_F32, -1, 1);
    kn_tensor *a4 = rand_tensor(KN_SHAPE(2, 4, M, K), KN_F32, -1, 1);
    kn_tensor *b4 = rand_tensor(KN_SHAPE(2, 4, K, N), KN_F32, -1, 1);
    operands shared = {a, w, B, M, N, K}, sliced = {kn_slice(a4, 1, 0, 3, 1), kn_slice(b4, 1, 1, 4, 1), 6, M, N, K};
    operands *cases[2] = {&shared, &sliced};
    for (int c = 0; c < 2; c++) {
        int64_t fb = fallbacks(KN_F32);
        double *want = product(cases[c], "ref"), *got = product(cases[c], "onednn");
        tolerance tol = tol_for(KN_F32);
        tol.atol *= (double)K;
        for (int64_t i = 0; i < cases[c]->B * M * N; i++)
            CHECK_MSG(fabs(got[i] - want[i]) <= tol.atol + tol.rtol * fabs(want[i]),
                      "batch layout %d at %lld: %g vs %g", c, (long long)i, got[i], want[i]);
        CHECK(fallbacks(KN_F32) == fb);
        free(want), free(got);
    }
    kn_scope_pop();
}

/* bf16 and f16 through every provider against float64 sums of the rounded inputs. */
static void test_half_providers(void) {
    const kn_dtype dts[] = {KN_BF16, KN_F16};
    const char *providers[] = {"openblas", "onednn", "ref", NULL};
    for (int d = 0; d < 2; d++)
        for (int p = 0; providers[p]; p++) {
            if (strcmp(providers[p], "onednn") == 0 && !have_onednn(dts[d], "16-bit product")) continue;
            for (int t = 0; t < 2; t++) {
                kn_scope_push();
                const int64_t B = t ? 2 : 0, M = 21, N = 19, K = 40;
                operands o = make(dts[d], B, M, N, K, t);
                kn_tensor *ac = kn_contiguous(o.a), *bc = kn_contiguous(o.b);
                double *a = read_f64(ac), *b = read_f64(bc), *want = reference(a, b, o.B, M, N, K);
                force(providers[p]);
                kn_tensor *y = kn_matmul(o.a, o.b);
                tolerance tol = tol_for(dts[d]);
                tol.atol *= (double)K / 8; /* f32 sums in another order, one rounding */
                char what[80];
                snprintf(what, sizeof what, "%s %s%s", kn_dtype_name(dts[d]), providers[p],
                         t ? " batched transposed" : "");
                CHECK(y && kn_dtype_of(y) == dts[d]);
                CHECK_CLOSE(y, want, tol, what);
                force(NULL);
                free(a), free(b), free(want);
                kn_scope_pop();
            }
        }
}

/* Each KILN_GEMM value runs the product where it says; an unknown one is an error naming it;
 * a dtype the forced provider lacks runs on the default and counts a fallback. */
static void test_forcing(void) {
    const struct {
        const char *name;
        kn_gemm_provider p;
    } cases[] = {{"openblas", KN_GEMM_OPENBLAS}, {"onednn", KN_GEMM_ONEDNN}, {"ref", KN_GEMM_REF}};
    kn_scope_push();
    operands o = make(KN_F32, 0, 16, 12, 20, false);
    for (int i = 0; i < 3; i++) {
        bool lacks = !kn_gemm_has(cases[i].p, KN_F32);
        int64_t before = selected(cases[i].p, KN_F32), fb = fallbacks(KN_F32);
        free(product(&o, cases[i].name));
        if (lacks) {
            printf("  %s lacks f32 in this build: the product falls back\n", cases[i].name);
            CHECK(fallbacks(KN_F32) == fb + 1);
        } else {
            CHECK_MSG(selected(cases[i].p, KN_F32) == before + 1, "KILN_GEMM=%s did not select it", cases[i].name);
            CHECK(fallbacks(KN_F32) == fb);
        }
    }
    /* f64: oneDNN has no f64 product, so forcing it falls back to openblas. */
    operands d = make(KN_F64, 0, 16, 12, 20, false);
    int64_t blas = selected(KN_GEMM_OPENBLAS, KN_F64), fb = fallbacks(KN_F64);
    free(product(&d, "onednn"));
    CHECK(selected(KN_GEMM_OPENBLAS, KN_F64) == blas + 1);
    CHECK(fallbacks(KN_F64) == fb + 1);

    /* An unknown name: the product fails, and the message names the value and the choices. */
    force("blis");
    kn_gemm_provider p;
    CHECK_ERROR(kn_gemm_choice(KN_F32, &p) == KN_OK, KN_ERR_ARG, "KILN_GEMM=blis");
    kn_tensor *y = kn_matmul(o.a, o.b);
    kn_status st = y ? kn_sync() : kn_last_status();
    CHECK_MSG(st == KN_ERR_ARG && strstr(kn_last_error(), "openblas, onednn or ref"),
              "unknown KILN_GEMM: status %d, %s", (int)st, kn_last_error());
    kn_clear_error();
    force(NULL);
    kn_scope_pop();
}

/* The defaults, fixed rules: f32 on onednn except where OpenBLAS runs AVX-512 kernels, f64 on
 * openblas, bf16 and f16 on onednn exactly where oneDNN has them; the same answer every time. */
static void test_default_rules(void) {
    force(NULL);
    const kn_dtype dts[] = {KN_F32, KN_F64, KN_BF16, KN_F16};
    for (int i = 0; i < 4; i++) {
        const kn_dtype dt = dts[i];
        const bool onednn = dt == KN_F32   ? kn_gemm_onednn_has(dt) && !kn_gemm_openblas_runs_avx512()
                            : dt == KN_F64 ? false
                                           : kn_gemm_onednn_has(dt);
        kn_gemm_provider p, again;
        CHECK(kn_gemm_choice(dt, &p) == KN_OK && p == (onednn ? KN_GEMM_ONEDNN : KN_GEMM_OPENBLAS));
        CHECK(kn_gemm_choice(dt, &again) == KN_OK && again == p);
        printf("  %s -> %s\n", kn_dtype_name(dt), kn_gemm_provider_name(p));
    }
}

/* On a CPU with AMX for bf16, oneDNN dispatches to AMX (kiln asked the kernel for it). */
static void test_amx_isa(void) {
    /* The skip below must come from the flags, not from a read that saw nothing (the harness's
     * reader once took /proc/cpuinfo's size of 0 bytes at its word and skipped on AMX hosts). */
    CHECK_MSG(file_contains("/proc/cpuinfo", "processor"), "/proc/cpuinfo reads as empty");
    if (!file_contains("/proc/cpuinfo", "amx_bf16")) {
        printf("  skip AMX: /proc/cpuinfo has no amx_bf16 (oneDNN's ISA here: %s)\n", kn_onednn_isa());
        return;
    }
    if (!have_onednn(KN_BF16, "AMX")) return;
    CHECK_MSG(strstr(kn_onednn_isa(), "amx") != NULL, "oneDNN's ISA %s, AMX permission %s", kn_onednn_isa(),
              kn_onednn_amx());
}

int main(void) {
    RUN(test_onednn_matches_openblas_f32);
    RUN(test_onednn_batch_layouts);
    RUN(test_half_providers);
    RUN(test_forcing);
    RUN(test_default_rules);
    RUN(test_amx_isa);
    return test_summary();
}
