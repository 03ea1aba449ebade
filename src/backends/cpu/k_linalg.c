/* CPU matmul. Float products go to the provider gemm_provider.h chooses; this file is the
 * openblas provider: products are split over kiln's pool (gemm_tiles.h) and each piece is one
 * single-threaded BLAS call; strided operands go to BLAS as they are when one of their
 * last two strides is 1, single rows use GEMV (no packing), 16-bit floats are widened to f32
 * and multiplied by the f32 provider, integers use a plain loop. A few rows times a weight
 * stored [N, K] (decode) go to k_linalg_skinny.c instead, in f32 and 16-bit floats alike. */
#include <cblas.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/gemm_provider.h"
#include "backends/cpu/gemm_tiles.h"
#include "backends/cpu/k_linalg_skinny.h"
#include "core/error.h"
#include "core/thread_pool.h"

/* One matrix operand as BLAS sees it. */
typedef struct mat {
    const char *base;           /* the batch's first matrix */
    int64_t rows, cols;
    int64_t rs, cs;             /* element strides of rows and cols */
} mat;

static bool blas_layout(const mat *m, CBLAS_TRANSPOSE *trans, int64_t *ld) {
    if (m->cs == 1 && (m->rs >= (m->cols > 1 ? m->cols : 1) || m->rows == 1)) {
        *trans = CblasNoTrans;
        *ld = m->rows == 1 ? (m->cols > 1 ? m->cols : 1) : m->rs;
        return true;
    }
    if (m->rs == 1 && (m->cs >= (m->rows > 1 ? m->rows : 1) || m->cols == 1)) {
        *trans = CblasTrans;
        *ld = m->cols == 1 ? (m->rows > 1 ? m->rows : 1) : m->cs;
        return true;
    }
    return false;
}

#define GEMM_FLOAT(SUF, T, gemm, gemv)                                                                    \
    /* One product on this thread: c (rows ldc apart) = a b, or c += a b when beta is 1. */              \
    static kn_gemm_result product_##SUF(const T *a, int64_t ars, int64_t acs, const T *b, int64_t brs,   \
                                        int64_t bcs, T *c, int64_t ldc, int64_t M, int64_t N, int64_t K, \
                                        T beta) {                                                        \
        mat A = {(const char *)a, M, K, ars, acs}, B = {(const char *)b, K, N, brs, bcs};                \
        CBLAS_TRANSPOSE ta, tb;                                                                          \
        int64_t lda, ldb;                                                                                \
        if (K == 0) {                                                                                    \
            for (int64_t i = 0; i < M && beta == 0; i++) memset(c + i * ldc, 0, sizeof(T) * (size_t)N);  \
            return KN_GEMM_DONE;                                                                         \
        }                                                                                                \
        if (M == 1 && acs > 0 && blas_layout(&B, &tb, &ldb)) { /* row vector times matrix */        \
            if (tb == CblasNoTrans) /* B stored [K, N]: y = B^T a */                                     \
                gemv(CblasRowMajor, CblasTrans, (int)K, (int)N, 1, b, (int)ldb, a, (int)acs, beta, c, 1);\
            else /* B stored as [N, K]: y = Bs a */                                                      \
                gemv(CblasRowMajor, CblasNoTrans, (int)N, (int)K, 1, b, (int)ldb, a, (int)acs, beta, c, 1);\
            return KN_GEMM_DONE;                                                                         \
        }                                                                                                \
        if (N == 1 && brs > 0 && blas_layout(&A, &ta, &lda)) { /* matrix times column vector */        \
            const int incc = (int)(ldc > 0 ? ldc : 1);                                                   \
            if (ta == CblasNoTrans)                                                                      \
                gemv(CblasRowMajor, CblasNoTrans, (int)M, (int)K, 1, a, (int)lda, b, (int)brs, beta, c, incc);\
            else                                                                                         \
                gemv(CblasRowMajor, CblasTrans, (int)K, (int)M, 1, a, (int)lda, b, (int)brs, beta, c, incc);\
            return KN_GEMM_DONE;                                                                         \
        }                                                                                                \
        T *ca = NULL, *cb = NULL;                                                                        \
        if (!blas_layout(&A, &ta, &lda)) { /* a gather of the odd-strided operand */                     \
            ca = malloc(sizeof(T) * (size_t)(M * K));                                                    \
            if (!ca) return KN_GEMM_NO_MEMORY;                                                           \
            for (int64_t i = 0; i < M; i++)                                                              \
                for (int64_t k = 0; k < K; k++) ca[i * K + k] = a[i * ars + k * acs];                    \
            a = ca, ta = CblasNoTrans, lda = K;                                                          \
        }                                                                                                \
        if (!blas_layout(&B, &tb, &ldb)) {                                                               \
            cb = malloc(sizeof(T) * (size_t)(K * N));                                                    \
            if (!cb) {                                                                                   \
                free(ca);                                                                                \
                return KN_GEMM_NO_MEMORY;                                                                \
            }                                                                                            \
            for (int64_t k = 0; k < K; k++)                                                              \
                for (int64_t j = 0; j < N; j++) cb[k * N + j] = b[k * brs + j * bcs];                    \
            b = cb, tb = CblasNoTrans, ldb = N;                                                          \
        }                                                                                                \
        gemm(CblasRowMajor, ta, tb, (int)M, (int)N, (int)K, 1, a, (int)lda, b, (int)ldb, beta, c,        \
             (int)(ldc > 1 ? ldc : 1));                                                                  \
        free(ca);                                                                                        \
        free(cb);                                                                                        \
        return KN_GEMM_DONE;                                                                             \
    }                                                                                                    \
    /* The openblas provider's block (gemm_tiles.h): its products one after another. */                \
    static kn_gemm_result block_##SUF(const kn_gemm_block *k) {                                          \
        const T *a = k->a, *b = k->b;                                                                    \
        T *c = k->c;                                                                                     \
        kn_gemm_result r = KN_GEMM_DONE;                                                                 \
        for (int64_t bi = 0; bi < k->batches && r == KN_GEMM_DONE; bi++)                                 \
            r = product_##SUF(a + bi * k->a_bs, k->ars, k->acs, b + bi * k->b_bs, k->brs, k->bcs,         \
                              c + bi * k->c_bs, k->ldc, k->M, k->N, k->K, k->accumulate ? 1 : 0);        \
        return r;                                                                                        \
    }
GEMM_FLOAT(f32, float, cblas_sgemm, cblas_sgemv)
GEMM_FLOAT(f64, double, cblas_dgemm, cblas_dgemv)

kn_gemm_result kn_gemm_openblas_block(const kn_gemm_block *k) {
    return k->dt == KN_F64 ? block_f64(k) : block_f32(k);
}

/* Widens n 16-bit values (contiguous) to f32. */
static void widen(kn_dtype dt, const uint16_t *restrict x, float *restrict y, int64_t n) {
    if (dt == KN_BF16)
        for (int64_t i = 0; i < n; i++) y[i] = kn_half_to_f32_bf16(x[i]);
    else
        for (int64_t i = 0; i < n; i++) y[i] = kn_half_to_f32_f16(x[i]);
}

/* 16-bit floats widened to f32 are multiplied by the f32 provider: oneDNN's block, or OpenBLAS's
 * for a layout oneDNN turns down. */
static kn_gemm_result onednn_else_openblas_block(const kn_gemm_block *blk) {
    const kn_gemm_result r = kn_gemm_onednn_block(blk);
    return r == KN_GEMM_TURNED_DOWN ? kn_gemm_openblas_block(blk) : r;
}

static kn_gemm_block_fn widened_block(void) {
    kn_gemm_provider p = KN_GEMM_OPENBLAS;
    kn_gemm_choice(KN_F32, &p); /* a bad KILN_GEMM has failed the product's own selection already */
    return p == KN_GEMM_ONEDNN ? onednn_else_openblas_block : kn_gemm_openblas_block;
}

static kn_status widened_status(kn_gemm_result r) {
    return r == KN_GEMM_DONE        ? KN_OK
           : r == KN_GEMM_FAILED    ? kn_error(KN_ERR_INTERNAL, "matmul: the f32 provider failed on a widened product")
                                    : kn_error(KN_ERR_OOM, "matmul: out of memory widening an operand");
}

/* Many rows times a 16-bit weight stored [N, K] (prefill): the weight is widened one panel of
 * rows at a time into a buffer that stays in cache, in its own memory order, and each panel
 * goes to the f32 provider; panels spread over the pool, at least one a thread where N allows
 * (stories15M's 288-wide products were one panel, which one thread did alone; two a thread,
 * narrower, were slower on Zen 1). Widening the transposed weight as a whole (the general
 * path) gathers it against its strides and writes an f32 copy of the matrix, and cost more
 * than the product. */
typedef struct half_weight_job {
    kn_dtype dt;
    kn_gemm_block_fn f32_block;
    const float *af; /* a widened, [M, K] */
    const uint16_t *w;
    uint16_t *c;
    int64_t ldw, M, N, K, nb;
    atomic_int worst; /* kn_gemm_result */
} half_weight_job;

static void half_weight_panels(void *ctx, int64_t begin, int64_t end, int chunk) {
    half_weight_job *j = ctx;
    const int64_t M = j->M, K = j->K, nb = j->nb;
    float *wf = malloc(sizeof(float) * (size_t)(nb * K)), *cf = malloc(sizeof(float) * (size_t)(M * nb));
    kn_gemm_result res = wf && cf ? KN_GEMM_DONE : KN_GEMM_NO_MEMORY;
    for (int64_t p = begin; p < end && res == KN_GEMM_DONE; p++) {
        const int64_t n0 = p * nb, rows = j->N - n0 < nb ? j->N - n0 : nb;
        for (int64_t r = 0; r < rows; r++) widen(j->dt, j->w + (n0 + r) * j->ldw, wf + r * K, K);
        /* cf [M, rows] = af [M, K] times wf^T, wf [rows, K] */
        const kn_gemm_block blk = {.dt = KN_F32, .a = j->af, .b = wf, .c = cf, .ars = K, .acs = 1, .brs = 1,
                                   .bcs = K, .ldc = rows, .M = M, .N = rows, .K = K, .batches = 1};
        res = j->f32_block(&blk);
        for (int64_t i = 0; i < M && res == KN_GEMM_DONE; i++)
            for (int64_t r = 0; r < rows; r++) {
                const float v = cf[i * rows + r];
                j->c[i * j->N + n0 + r] = j->dt == KN_BF16 ? kn_half_from_f32_bf16(v) : kn_half_from_f32_f16(v);
            }
    }
    int cur = atomic_load(&j->worst);
    while ((int)res > cur && !atomic_compare_exchange_weak(&j->worst, &cur, (int)res)) {
    }
    free(wf);
    free(cf);
}

static kn_gemm_result matmul_half_weight(kn_dtype dt, kn_gemm_block_fn f32_block, const kn_tensor *a,
                                         const uint16_t *w, int64_t ldw, uint16_t *c, int64_t M, int64_t N,
                                         int64_t K) {
    int64_t nb = K >= 16384 ? 16 : 262144 / K; /* a panel of about 1 MB */
    const int64_t a_thread = (N + kn_pool_threads() - 1) / kn_pool_threads();
    if (nb > a_thread) nb = a_thread < 64 ? 64 : (a_thread + 15) & ~(int64_t)15;
    float *af = malloc(sizeof(float) * (size_t)(M * K));
    if (!af) return KN_GEMM_NO_MEMORY;
    const uint16_t *a0 = kn_tensor_data(a);
    const int64_t ars = a->stride[0], acs = a->stride[1];
    for (int64_t i = 0; i < M; i++) {
        if (acs == 1) widen(dt, a0 + i * ars, af + i * K, K);
        else
            for (int64_t k = 0; k < K; k++) widen(dt, a0 + i * ars + k * acs, af + i * K + k, 1);
    }
    half_weight_job job = {dt, f32_block, af, w, c, ldw, M, N, K, nb, KN_GEMM_DONE};
    kn_parallel_for((N + nb - 1) / nb, 2 * M * nb * K / 64, half_weight_panels, &job);
    free(af);
    return (kn_gemm_result)atomic_load(&job.worst);
}

/* 16-bit floats: widen both operands to contiguous f32, multiply, narrow the result. */
static kn_status matmul_half(kn_tensor *a, kn_tensor *b, kn_tensor *out, int64_t batches, int64_t M, int64_t N,
                             int64_t K) {
    kn_device dev = out->storage->device;
    kn_tensor *wa = kn_tensor_alloc("matmul", KN_F32, a->shape, a->ndim, dev);
    kn_tensor *wb = wa ? kn_tensor_alloc("matmul", KN_F32, b->shape, b->ndim, dev) : NULL;
    kn_tensor *wc = wb ? kn_tensor_alloc("matmul", KN_F32, out->shape, out->ndim, dev) : NULL;
    kn_status st = wc ? KN_OK : kn_last_status();
    if (st == KN_OK) st = kn_cpu_copy_into(wa, a);
    if (st == KN_OK) st = kn_cpu_copy_into(wb, b);
    if (st == KN_OK) st = widened_status(kn_gemm_tensors(wa, wb, wc, batches, M, N, K, widened_block()));
    if (st == KN_OK) st = kn_cpu_copy_into(out, wc);
    kn_tensor_decref(wa);
    kn_tensor_decref(wb);
    kn_tensor_decref(wc);
    return st;
}

/* Integer products: a plain loop, rows of every batch spread over the pool; sums wrap. */
typedef struct int_product {
    const kn_tensor *A, *B;
    void *c;
    int64_t M, N, K;
} int_product;

#define MATMUL_INT(SUF, T)                                                                           \
    static void int_rows_##SUF(void *ctx, int64_t begin, int64_t end, int chunk) {                  \
        const int_product *p = ctx;                                                                  \
        const T *a0 = kn_tensor_data(p->A), *b0 = kn_tensor_data(p->B);                              \
        T *c = p->c;                                                                                 \
        const int nd = p->A->ndim;                                                                   \
        const int64_t ars = p->A->stride[nd - 2], acs = p->A->stride[nd - 1];                        \
        const int64_t brs = p->B->stride[nd - 2], bcs = p->B->stride[nd - 1];                        \
        for (int64_t row = begin; row < end; row++) {                                                \
            const int64_t bi = row / p->M, i = row % p->M;                                           \
            const T *a = a0 + kn_gemm_batch_offset(p->A, bi) + i * ars;                              \
            const T *b = b0 + kn_gemm_batch_offset(p->B, bi);                                        \
            for (int64_t j = 0; j < p->N; j++) {                                                     \
                T acc = 0;                                                                           \
                for (int64_t k = 0; k < p->K; k++)                                                   \
                    acc = (T)((uint64_t)acc + (uint64_t)a[k * acs] * (uint64_t)b[k * brs + j * bcs]); \
                c[row * p->N + j] = acc;                                                             \
            }                                                                                        \
        }                                                                                            \
    }
MATMUL_INT(i32, int32_t)
MATMUL_INT(i64, int64_t)

static void matmul_int(kn_node *n, int64_t batches, int64_t M, int64_t N, int64_t K) {
    int_product p = {n->in[0], n->in[1], kn_tensor_data(n->out[0]), M, N, K};
    kn_parallel_for(batches * M, N * K, n->out[0]->dtype == KN_I32 ? int_rows_i32 : int_rows_i64, &p);
}

kn_status kn_gemm_openblas(kn_tensor *a, kn_tensor *b, kn_tensor *out, int64_t batches, int64_t M, int64_t N,
                           int64_t K) {
    const int nd = out->ndim;
    if (out->dtype == KN_F32 || out->dtype == KN_F64)
        return kn_gemm_tensors(a, b, out, batches, M, N, K, kn_gemm_openblas_block) == KN_GEMM_DONE
                   ? KN_OK
                   : kn_error(KN_ERR_OOM, "matmul: out of memory gathering an operand");
    if (!(batches == 1 && nd == 2 && b->stride[0] == 1 && b->stride[1] >= K))
        return matmul_half(a, b, out, batches, M, N, K);
    return widened_status(
        matmul_half_weight(out->dtype, widened_block(), a, kn_tensor_data(b), b->stride[1], kn_tensor_data(out), M, N, K));
}

/* A float product on the provider chosen for its dtype; one that oneDNN turns down (a layout
 * it cannot take) runs on openblas and counts a fallback. */
static kn_status matmul_float(kn_node *n, int64_t batches, int64_t M, int64_t N, int64_t K) {
    kn_tensor *a = n->in[0], *b = n->in[1], *out = n->out[0];
    kn_gemm_provider p;
    kn_status st = kn_gemm_select(out->dtype, &p);
    if (st != KN_OK) return st;
    if (p == KN_GEMM_REF) {
        kn_gemm_ref(a, b, out, batches, M, N, K);
        return KN_OK;
    }
    if (p == KN_GEMM_ONEDNN) {
        st = kn_gemm_onednn(a, b, out, batches, M, N, K);
        if (st != KN_ERR_UNSUPPORTED) return st;
        kn_gemm_count_fallback(out->dtype);
    }
    return kn_gemm_openblas(a, b, out, batches, M, N, K);
}

static kn_status matmul_kernel(kn_node *n) {
    kn_tensor *a = n->in[0], *b = n->in[1], *out = n->out[0];
    int nd = out->ndim;
    int64_t M = out->shape[nd - 2], N = out->shape[nd - 1], K = a->shape[nd - 1];
    int64_t batches = 1;
    for (int d = 0; d < nd - 2; d++) batches *= out->shape[d];
    if (batches == 0 || M == 0 || N == 0) return KN_OK;
    if (M > INT32_MAX || N > INT32_MAX || K > INT32_MAX)
        return kn_error(KN_ERR_SHAPE, "matmul: a dim over 2^31 is beyond BLAS");
    /* A few rows times a weight stored [N, K] (decode): k_linalg_skinny.c. */
    if (batches == 1 && M <= KN_SKINNY_MAX_ROWS && out->dtype != KN_F64 && kn_dtype_is_float(out->dtype) &&
        b->stride[nd - 2] == 1 && (b->stride[nd - 1] >= K || N == 1)) {
        if (!kn_cpu_skinny(out->dtype, kn_tensor_data(a), a->stride[nd - 2], a->stride[nd - 1], kn_tensor_data(b),
                           b->stride[nd - 1], kn_tensor_data(out), M, N, K))
            return kn_error(KN_ERR_OOM, "matmul: out of memory widening an operand");
        return KN_OK;
    }
    switch (out->dtype) {
    case KN_F32:
    case KN_F64:
    case KN_F16:
    case KN_BF16: return matmul_float(n, batches, M, N, K);
    case KN_I32:
    case KN_I64: matmul_int(n, batches, M, N, K); return KN_OK;
    default: return kn_error(KN_ERR_DTYPE, "matmul: no CPU kernel for %s", kn_dtype_name(out->dtype));
    }
}

const kn_kernel_reg kn_cpu_kernels_linalg[] = {
    {KN_OP_matmul, matmul_kernel, KN_DTS_NUMERIC},
    {0},
};
