/* CPU scaled dot-product attention: for each (batch, head, block of queries), a sweep over
 * blocks of keys with an online softmax (running max and sum per query), both products of a
 * block (q k^T and p v) through BLAS GEMM. Memory is O(block^2 + block * D) per chunk of
 * tasks, never Tq x Tk; key blocks past the causal diagonal are skipped. A query with no
 * allowed key gives zeros, as PyTorch's attention does (its sum of weights stays 0). Each row's
 * log-sum-exp (max + log(sum), 0 for such a row: finite for debug mode, and any finite value
 * weighs its -inf scores to 0 in the backward) is the second output, for k_attention_grad.c. */
#include <cblas.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/k_attention.h"
#include "core/error.h"
#include "core/thread_pool.h"

enum { BLOCK_Q = 64, BLOCK_K = 128 };

/* What the chunks of the forward read and write (out and lse in the compute type). */
typedef struct attention_ctx {
    const attn_problem *P;
    const attn_operand *q, *k, *v;
    const kn_tensor *mask;
    void *out, *lse;
    atomic_int failed; /* a chunk could not allocate its buffers */
} attention_ctx;

/* The max (NaN ignored, as a scalar compare would) and the sum of a row of scores, in 8 lanes
 * that the compiler keeps in vectors: one running value would keep the loop scalar, and with
 * it the exponentials between them (~a third of a 128-token prefill's attention). */
#define ROW_MAX_SUM(T)                                                                                        \
    static inline T row_max_##T(const T *row, int64_t n, T init) {                                          \
        T part[8];                                                                                           \
        for (int l = 0; l < 8; l++) part[l] = init;                                                          \
        int64_t c = 0;                                                                                       \
        for (; c + 8 <= n; c += 8)                                                                           \
            for (int l = 0; l < 8; l++) part[l] = row[c + l] > part[l] ? row[c + l] : part[l];               \
        for (; c < n; c++) part[0] = row[c] > part[0] ? row[c] : part[0];                                    \
        T mx = part[0];                                                                                      \
        for (int l = 1; l < 8; l++) mx = part[l] > mx ? part[l] : mx;                                        \
        return mx;                                                                                           \
    }                                                                                                        \
    static inline T row_sum_##T(const T *row, int64_t n) {                                                  \
        T part[8] = {0};                                                                                     \
        int64_t c = 0;                                                                                       \
        for (; c + 8 <= n; c += 8)                                                                           \
            for (int l = 0; l < 8; l++) part[l] += row[c + l];                                               \
        for (; c < n; c++) part[0] += row[c];                                                                \
        return ((part[0] + part[4]) + (part[1] + part[5])) + ((part[2] + part[6]) + (part[3] + part[7]));    \
    }
ROW_MAX_SUM(float)
ROW_MAX_SUM(double)
#define row_max(row, n, init) _Generic((row), float *: row_max_float, double *: row_max_double)(row, n, init)
#define row_sum(row, n) _Generic((row), float *: row_sum_float, double *: row_sum_double)(row, n)

#define ATTENTION(SUF, T, GEMM)                                                                            \
    static void attention_task_##SUF(const attn_problem *P, const attn_operand *q, const attn_operand *k,    \
                                     const attn_operand *v, const attn_mask *mask_bh, int64_t b, int64_t h,  \
                                     int64_t i0, T *S, T *acc, T *m, T *l, T *out, T *lse) {                 \
        const int64_t bq = P->Tq - i0 < BLOCK_Q ? P->Tq - i0 : BLOCK_Q, D = P->D, Dv = P->Dv;               \
        const int64_t hk = h / (P->H / P->Hkv), shift = P->shift;                                           \
        const T *qp = (const T *)q->base + kn_cpu_attn_batch_offset(q->t, P->batch_dims, b) + h * q->head_stride + i0 * q->ld; \
        const T *kp = (const T *)k->base + kn_cpu_attn_batch_offset(k->t, P->batch_dims, b) + hk * k->head_stride;      \
        const T *vp = (const T *)v->base + kn_cpu_attn_batch_offset(v->t, P->batch_dims, b) + hk * v->head_stride;      \
        for (int64_t r = 0; r < bq; r++) m[r] = -INFINITY, l[r] = 0;                                         \
        memset(acc, 0, sizeof(T) * (size_t)(bq * Dv));                                                      \
        /* Keys at or past j_end are masked for every query of the block. */                                \
        int64_t j_end = P->Tk;                                                                               \
        if (P->causal && i0 + bq + shift < j_end) j_end = i0 + bq + shift;                                   \
        for (int64_t j0 = 0; j0 < j_end; j0 += BLOCK_K) {                                                    \
            const int64_t bk = j_end - j0 < BLOCK_K ? j_end - j0 : BLOCK_K;                                  \
            GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, (int)bq, (int)bk, (int)D, (T)P->scale, qp,        \
                 (int)q->ld, kp + j0 * k->ld, (int)k->ld, 0, S, BLOCK_K);                                    \
            for (int64_t r = 0; r < bq; r++) {                                                               \
                T *restrict row = S + r * BLOCK_K;                                                           \
                const int64_t i = i0 + r;                                                                    \
                if (mask_bh->base) {                                                                         \
                    const char *mrow = mask_bh->base;                                                        \
                    if (mask_bh->is_bool) {                                                                  \
                        const uint8_t *mb = (const uint8_t *)mrow + i * mask_bh->is + j0 * mask_bh->js;      \
                        for (int64_t c = 0; c < bk; c++) /* adds -inf, as PyTorch: a NaN score stays NaN */  \
                            if (!mb[c * mask_bh->js]) row[c] -= (T)INFINITY;                                 \
                    } else {                                                                                 \
                        const T *mf = (const T *)mrow + i * mask_bh->is + j0 * mask_bh->js;                  \
                        for (int64_t c = 0; c < bk; c++) row[c] += mf[c * mask_bh->js];                      \
                    }                                                                                        \
                }                                                                                            \
                if (P->causal)                                                                               \
                    for (int64_t c = i + shift - j0 + 1 > 0 ? i + shift - j0 + 1 : 0; c < bk; c++)           \
                        row[c] = -INFINITY;                                                                  \
                T mx = row_max(row, bk, m[r]);                                                               \
                if (mx == -INFINITY) { /* nothing allowed yet: this block adds nothing, unless NaN */        \
                    for (int64_t c = 0; c < bk; c++) mx = row[c] != row[c] ? row[c] : mx;                    \
                    if (mx == -INFINITY) {                                                                   \
                        for (int64_t c = 0; c < bk; c++) row[c] = 0;                                         \
                        continue;                                                                            \
                    }                                                                                        \
                }                                                                                            \
                const T alpha = kn_exp((T)(m[r] - mx));                                                      \
                for (int64_t c = 0; c < bk; c++) row[c] = kn_exp((T)(row[c] - mx));                          \
                const T sum = row_sum(row, bk);                                                              \
                l[r] = l[r] * alpha + sum;                                                                   \
                m[r] = mx;                                                                                   \
                if (alpha != 1)                                                                              \
                    for (int64_t d = 0; d < Dv; d++) acc[r * Dv + d] *= alpha;                               \
                if (P->dropout) {                                                                            \
                    uint64_t e0 = (uint64_t)(((b * P->H + h) * P->Tq + i) * P->Tk + j0);                     \
                    for (int64_t c = 0; c < bk; c++)                                                         \
                        if (!kn_dropout_keep(P->seed, P->offset, e0 + (uint64_t)c, P->threshold)) row[c] = 0; \
                }                                                                                            \
            }                                                                                                \
            GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)bq, (int)Dv, (int)bk, 1, S, BLOCK_K,       \
                 vp + j0 * v->ld, (int)v->ld, 1, acc, (int)Dv);                                              \
        }                                                                                                    \
        T *o = out + ((b * P->H + h) * P->Tq + i0) * Dv;                                                     \
        for (int64_t r = 0; r < bq; r++) {                                                                   \
            const bool none = l[r] == 0; /* no allowed key: zeros (acc * 0 keeps a NaN of v) */              \
            const T f = none ? 0 : (T)P->out_scale / l[r];                                                   \
            for (int64_t d = 0; d < Dv; d++) o[r * Dv + d] = acc[r * Dv + d] * f;                            \
            lse[(b * P->H + h) * P->Tq + i0 + r] = none ? 0 : m[r] + kn_log(l[r]);                           \
        }                                                                                                    \
    }                                                                                                        \
    /* Tasks [begin, end) (batch, head, block of queries), with the chunk's own block buffers. */            \
    static void attention_chunk_##SUF(void *ctx, int64_t begin, int64_t end, int chunk) {                    \
        attention_ctx *c = ctx;                                                                              \
        const attn_problem *P = c->P;                                                                        \
        const int64_t q_blocks = (P->Tq + BLOCK_Q - 1) / BLOCK_Q;                                            \
        T *S = malloc(sizeof(T) * BLOCK_Q * BLOCK_K), *acc = malloc(sizeof(T) * (size_t)(BLOCK_Q * P->Dv));  \
        T *ml = malloc(sizeof(T) * 2 * BLOCK_Q);                                                             \
        for (int64_t task = begin; S && acc && ml && task < end; task++) {                                   \
            int64_t qb = task % q_blocks, bh = task / q_blocks, h = bh % P->H, b = bh / P->H;                \
            attn_mask mb = kn_cpu_attn_mask(c->mask, P->batch_dims, b, h);                                   \
            attention_task_##SUF(P, c->q, c->k, c->v, &mb, b, h, qb * BLOCK_Q, S, acc, ml, ml + BLOCK_Q,     \
                                 c->out, c->lse);                                                            \
        }                                                                                                    \
        if (!(S && acc && ml)) atomic_store(&c->failed, 1);                                                  \
        free(S);                                                                                             \
        free(acc);                                                                                           \
        free(ml);                                                                                            \
    }                                                                                                        \
    static bool attention_##SUF(const attn_problem *P, const attn_operand *q, const attn_operand *k,         \
                                const attn_operand *v, const kn_tensor *mask, T *out, T *lse) {             \
        const int64_t tasks = P->batches * P->H * ((P->Tq + BLOCK_Q - 1) / BLOCK_Q);                         \
        attention_ctx c = {.P = P, .q = q, .k = k, .v = v, .mask = mask, .out = out, .lse = lse, .failed = 0}; \
        kn_parallel_for(tasks, BLOCK_Q * (P->Tk + 1) * (P->D + P->Dv + 1) / 16, attention_chunk_##SUF, &c);  \
        return !atomic_load(&c.failed);                                                                      \
    }
ATTENTION(f32, float, cblas_sgemm)
ATTENTION(f64, double, cblas_dgemm)

kn_status kn_cpu_attn_operand(kn_tensor *t, kn_dtype compute, kn_tensor **scratch, attn_operand *o) {
    int nd = t->ndim;
    int64_t rows = t->shape[nd - 2], cols = t->shape[nd - 1];
    bool direct = t->dtype == compute && (t->stride[nd - 1] == 1 || cols <= 1) &&
                  (t->stride[nd - 2] >= cols || rows <= 1) && t->stride[nd - 2] >= 1;
    const kn_tensor *src = t;
    *scratch = NULL;
    if (!direct) {
        *scratch = kn_tensor_alloc("scaled_dot_product_attention", compute, t->shape, nd, t->storage->device);
        if (!*scratch) return kn_last_status();
        kn_status st = kn_cpu_copy_into(*scratch, t);
        if (st != KN_OK) return st;
        src = *scratch;
    }
    int64_t ld = src->stride[nd - 2];
    o->t = src;
    o->base = kn_tensor_data(src);
    o->head_stride = src->stride[nd - 3];
    o->ld = ld > cols ? ld : cols > 1 ? cols : 1;
    return KN_OK;
}

kn_status kn_cpu_attention_kernel(kn_node *n) {
    kn_tensor *q = n->in[0], *mask = KN_INPUT(n, scaled_dot_product_attention, mask);
    kn_tensor *out = n->out[0];
    attn_problem P = kn_cpu_attn_problem(n);
    int64_t count = kn_numel(out);
    if (count == 0 || P.Tk == 0) { /* softmax over no keys weighs nothing: zeros, as a product with an empty v */
        memset(kn_tensor_data(out), 0, (size_t)count * kn_dtype_size(out->dtype));
        /* No gradient flows back from here, so no backward reads these log-sum-exps: zeros
         * keep debug mode's check of finite outputs quiet. */
        memset(kn_tensor_data(n->out[1]), 0, (size_t)kn_numel(n->out[1]) * kn_dtype_size(n->out[1]->dtype));
        return KN_OK;
    }
    if (kn_cpu_attention_decode_fits(n, &P)) return kn_cpu_attention_decode(n, &P);
    kn_dtype compute = q->dtype == KN_F64 ? KN_F64 : KN_F32;
    kn_tensor *scratch[4] = {0};
    attn_operand ops[3];
    kn_status st = KN_OK;
    for (int i = 0; i < 3 && st == KN_OK; i++) st = kn_cpu_attn_operand(n->in[i], compute, &scratch[i], &ops[i]);
    if (st == KN_OK && compute != out->dtype) {
        scratch[3] = kn_tensor_alloc("scaled_dot_product_attention", compute, out->shape, out->ndim, out->storage->device);
        if (!scratch[3]) st = kn_last_status();
    }
    if (st == KN_OK) {
        void *dst = kn_tensor_data(scratch[3] ? scratch[3] : out);
        void *lse = kn_tensor_data(n->out[1]);
        bool ok = compute == KN_F64 ? attention_f64(&P, &ops[0], &ops[1], &ops[2], mask, dst, lse)
                                    : attention_f32(&P, &ops[0], &ops[1], &ops[2], mask, dst, lse);
        if (!ok) st = kn_error(KN_ERR_OOM, "scaled_dot_product_attention: out of memory for the block buffers");
        else if (scratch[3]) st = kn_cpu_copy_into(out, scratch[3]);
    }
    for (int i = 0; i < 4; i++) kn_tensor_decref(scratch[i]);
    return st;
}
