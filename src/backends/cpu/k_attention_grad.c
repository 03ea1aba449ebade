/* CPU backward of scaled dot-product attention, as FlashAttention-2's: the probabilities are
 * recomputed block by block from q, k and the forward's per-row log-sum-exp, never as a
 * Tq x Tk matrix. One task owns a (batch, key head) pair, so the gradients of k and v summed
 * over the key head's group of query heads, and the gradients of those query heads' q, are
 * written by one thread without locks. Per (query block i, key block j), with P = exp(S - lse)
 * and delta = rowsum(dO * O):
 *     dV_j += P^T dO_i    dP = dO_i V_j^T    dS = P * (dP - delta)
 *     dQ_i += scale dS K_j    dK_j += scale dS^T Q_i
 * (five GEMMs; with dropout, P and dP are masked and scaled as the forward's P was). */
#include <cblas.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/k_attention.h"
#include "core/error.h"
#include "core/thread_pool.h"

enum { BLOCK_Q = 64, BLOCK_K = 128 };

/* The backward node's operands (in its input order) and outputs, as the kernel reads them. */
typedef struct attn_grad_io {
    attn_operand q, k, v, o, go;
    const void *lse;          /* [batches, H, Tq], contiguous */
    const kn_tensor *mask;    /* NULL: none */
    void *dq, *dk, *dv;       /* contiguous, compute dtype */
    void *dmask;              /* [batches, H, Tq, Tk] or NULL */
} attn_grad_io;

typedef struct attn_grad_ctx {
    const attn_problem *P;
    const attn_grad_io *io;
    atomic_int failed; /* a chunk could not allocate its buffers */
} attn_grad_ctx;

#define ATTENTION_GRAD(SUF, T, GEMM)                                                                           \
    /* Query head h of batch b against keys [j0, j0 + bk): updates dq's rows and dk_j, dv_j. */                \
    static void grad_block_##SUF(const attn_problem *P, const attn_grad_io *io, const attn_mask *mb,           \
                                 int64_t b, int64_t h, int64_t j0, const T *delta, T *S, T *dP, T *Pd,         \
                                 uint8_t *keep) {                                                              \
        const int64_t D = P->D, Dv = P->Dv, shift = P->shift, hk = h / (P->H / P->Hkv);                        \
        const int ldd = D > 0 ? (int)D : 1; /* BLAS wants leading dims of at least 1 */                        \
        const int64_t bk = P->Tk - j0 < BLOCK_K ? P->Tk - j0 : BLOCK_K;                                        \
        const int bd = P->batch_dims;                                                                          \
        const T *qp = (const T *)io->q.base + kn_cpu_attn_batch_offset(io->q.t, bd, b) + h * io->q.head_stride; \
        const T *gp = (const T *)io->go.base + kn_cpu_attn_batch_offset(io->go.t, bd, b) + h * io->go.head_stride; \
        const T *kp = (const T *)io->k.base + kn_cpu_attn_batch_offset(io->k.t, bd, b) + hk * io->k.head_stride + \
                      j0 * io->k.ld;                                                                           \
        const T *vp = (const T *)io->v.base + kn_cpu_attn_batch_offset(io->v.t, bd, b) + hk * io->v.head_stride + \
                      j0 * io->v.ld;                                                                           \
        const T *lse = (const T *)io->lse + (b * P->H + h) * P->Tq;                                            \
        T *dq = (T *)io->dq + (b * P->H + h) * P->Tq * D;                                                      \
        T *dk = (T *)io->dk + ((b * P->Hkv + hk) * P->Tk + j0) * D;                                            \
        T *dv = (T *)io->dv + ((b * P->Hkv + hk) * P->Tk + j0) * Dv;                                           \
        T *dmask = io->dmask ? (T *)io->dmask + (b * P->H + h) * P->Tq * P->Tk + j0 : NULL;                    \
        /* Causal: queries before i_first see none of these keys. */                                           \
        int64_t i_first = P->causal && j0 - shift > 0 ? j0 - shift : 0;                                        \
        for (int64_t i0 = i_first; i0 < P->Tq; i0 += BLOCK_Q) {                                                \
            const int64_t bq = P->Tq - i0 < BLOCK_Q ? P->Tq - i0 : BLOCK_Q;                                    \
            GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, (int)bq, (int)bk, (int)D, (T)P->scale,               \
                 qp + i0 * io->q.ld, (int)io->q.ld, kp, (int)io->k.ld, 0, S, BLOCK_K);                         \
            for (int64_t r = 0; r < bq; r++) {                                                                 \
                T *restrict row = S + r * BLOCK_K;                                                             \
                const int64_t i = i0 + r;                                                                      \
                if (mb->base && mb->is_bool) { /* the forward's masking, to the bit */                         \
                    const uint8_t *m = (const uint8_t *)mb->base + i * mb->is + j0 * mb->js;                   \
                    for (int64_t c = 0; c < bk; c++)                                                           \
                        if (!m[c * mb->js]) row[c] -= (T)INFINITY;                                             \
                } else if (mb->base) {                                                                         \
                    const T *m = (const T *)mb->base + i * mb->is + j0 * mb->js;                               \
                    for (int64_t c = 0; c < bk; c++) row[c] += m[c * mb->js];                                  \
                }                                                                                              \
                if (P->causal)                                                                                 \
                    for (int64_t c = i + shift - j0 + 1 > 0 ? i + shift - j0 + 1 : 0; c < bk; c++)             \
                        row[c] = -INFINITY;                                                                    \
                /* A row with no allowed key is all -inf with a finite lse (0): weights 0, no gradient. */     \
                for (int64_t c = 0; c < bk; c++) row[c] = kn_exp((T)(row[c] - lse[i]));                        \
                if (P->dropout) {                                                                              \
                    const uint64_t e0 = (uint64_t)(((b * P->H + h) * P->Tq + i) * P->Tk + j0);                 \
                    const T os = (T)P->out_scale;                                                              \
                    for (int64_t c = 0; c < bk; c++) {                                                         \
                        keep[r * BLOCK_K + c] = kn_dropout_keep(P->seed, P->offset, e0 + (uint64_t)c, P->threshold); \
                        Pd[r * BLOCK_K + c] = keep[r * BLOCK_K + c] ? row[c] * os : 0;                         \
                    }                                                                                          \
                }                                                                                              \
            }                                                                                                  \
            const T *gi = gp + i0 * io->go.ld;                                                                 \
            GEMM(CblasRowMajor, CblasTrans, CblasNoTrans, (int)bk, (int)Dv, (int)bq, 1, P->dropout ? Pd : S,   \
                 BLOCK_K, gi, (int)io->go.ld, 1, dv, (int)Dv);                                                 \
            GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, (int)bq, (int)bk, (int)Dv, 1, gi, (int)io->go.ld,    \
                 vp, (int)io->v.ld, 0, dP, BLOCK_K);                                                           \
            for (int64_t r = 0; r < bq; r++) {                                                                 \
                T *restrict g = dP + r * BLOCK_K;                                                              \
                const T *restrict p = S + r * BLOCK_K;                                                         \
                const T dl = delta[i0 + r];                                                                    \
                if (P->dropout) {                                                                              \
                    const T os = (T)P->out_scale;                                                              \
                    for (int64_t c = 0; c < bk; c++) g[c] = keep[r * BLOCK_K + c] ? g[c] * os : 0;             \
                }                                                                                              \
                for (int64_t c = 0; c < bk; c++) g[c] = p[c] * (g[c] - dl);                                    \
                if (dmask) memcpy(dmask + (i0 + r) * P->Tk, g, sizeof(T) * (size_t)bk);                        \
            }                                                                                                  \
            GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)bq, (int)D, (int)bk, (T)P->scale, dP,         \
                 BLOCK_K, kp, (int)io->k.ld, 1, dq + i0 * D, ldd);                                             \
            GEMM(CblasRowMajor, CblasTrans, CblasNoTrans, (int)bk, (int)D, (int)bq, (T)P->scale, dP, BLOCK_K,  \
                 qp + i0 * io->q.ld, (int)io->q.ld, 1, dk, ldd);                                               \
        }                                                                                                      \
    }                                                                                                          \
    /* Tasks [begin, end) (batch, key head), with the chunk's own block buffers. */                            \
    static void attention_grad_chunk_##SUF(void *ctx, int64_t begin, int64_t end, int chunk) {                 \
        attn_grad_ctx *c = ctx;                                                                                \
        const attn_problem *P = c->P;                                                                          \
        const attn_grad_io *io = c->io;                                                                        \
        const int64_t group = P->H / P->Hkv;                                                                   \
        T *S = malloc(sizeof(T) * BLOCK_Q * BLOCK_K * (P->dropout ? 3 : 2));                                   \
        T *delta = malloc(sizeof(T) * (size_t)(P->Tq + 1));                                                    \
        uint8_t *keep = P->dropout ? malloc(BLOCK_Q * BLOCK_K) : NULL;                                         \
        const bool ok = S && delta && (keep || !P->dropout);                                                   \
        for (int64_t task = begin; ok && task < end; task++) {                                                 \
            const int64_t b = task / P->Hkv, hk = task % P->Hkv;                                               \
            memset((T *)io->dk + (b * P->Hkv + hk) * P->Tk * P->D, 0, sizeof(T) * (size_t)(P->Tk * P->D));     \
            memset((T *)io->dv + (b * P->Hkv + hk) * P->Tk * P->Dv, 0, sizeof(T) * (size_t)(P->Tk * P->Dv));   \
            for (int64_t h = hk * group; h < (hk + 1) * group; h++) {                                          \
                memset((T *)io->dq + (b * P->H + h) * P->Tq * P->D, 0, sizeof(T) * (size_t)(P->Tq * P->D));    \
                const int bd = P->batch_dims;                                                                  \
                const T *o = (const T *)io->o.base + kn_cpu_attn_batch_offset(io->o.t, bd, b) + h * io->o.head_stride; \
                const T *g = (const T *)io->go.base + kn_cpu_attn_batch_offset(io->go.t, bd, b) +              \
                             h * io->go.head_stride;                                                           \
                for (int64_t i = 0; i < P->Tq; i++) {                                                          \
                    T acc = 0;                                                                                 \
                    for (int64_t d = 0; d < P->Dv; d++) acc += o[i * io->o.ld + d] * g[i * io->go.ld + d];     \
                    delta[i] = acc;                                                                            \
                }                                                                                              \
                attn_mask mb = kn_cpu_attn_mask(io->mask, bd, b, h);                                           \
                for (int64_t j0 = 0; j0 < P->Tk; j0 += BLOCK_K)                                                \
                    grad_block_##SUF(P, io, &mb, b, h, j0, delta, S, S + BLOCK_Q * BLOCK_K,                    \
                                     S + 2 * BLOCK_Q * BLOCK_K, keep);                                         \
            }                                                                                                  \
        }                                                                                                      \
        if (!ok) atomic_store(&c->failed, 1);                                                                  \
        free(S);                                                                                               \
        free(delta);                                                                                           \
        free(keep);                                                                                            \
    }                                                                                                          \
    static bool attention_grad_##SUF(const attn_problem *P, const attn_grad_io *io) {                          \
        attn_grad_ctx c = {.P = P, .io = io, .failed = 0};                                                     \
        kn_parallel_for(P->batches * P->Hkv, (P->H / P->Hkv) * P->Tq * (P->Tk + 1) * (P->D + P->Dv + 1) / 8,   \
                        attention_grad_chunk_##SUF, &c);                                                       \
        return !atomic_load(&c.failed);                                                                        \
    }
ATTENTION_GRAD(f32, float, cblas_sgemm)
ATTENTION_GRAD(f64, double, cblas_dgemm)

kn_status kn_cpu_attention_backward_kernel(kn_node *n) {
    const char *op = "scaled_dot_product_attention_backward";
    attn_problem P = kn_cpu_attn_problem(n);
    kn_dtype compute = n->out[0]->dtype;
    bool mask_grad = KN_ATTRS(n, scaled_dot_product_attention_backward)->mask_grad;
    attn_grad_io io = {.mask = KN_INPUT(n, scaled_dot_product_attention_backward, mask),
                       .dq = kn_tensor_data(n->out[0]), .dk = kn_tensor_data(n->out[1]),
                       .dv = kn_tensor_data(n->out[2]), .dmask = mask_grad ? kn_tensor_data(n->out[3]) : NULL};
    for (int i = 0; i < (mask_grad ? 4 : 3); i++) /* zeros where no block writes (empty or masked) */
        memset(kn_tensor_data(n->out[i]), 0, (size_t)kn_numel(n->out[i]) * kn_dtype_size(compute));
    if (P.Tq == 0 || P.Tk == 0 || P.Dv == 0 || P.batches * P.H == 0) return KN_OK;
    kn_tensor *scratch[6] = {0};
    attn_operand *ops[5] = {&io.q, &io.k, &io.v, &io.o, &io.go};
    kn_status st = KN_OK;
    for (int i = 0; i < 5 && st == KN_OK; i++) st = kn_cpu_attn_operand(n->in[i], compute, &scratch[i], ops[i]);
    if (st == KN_OK) st = kn_cpu_loss_contiguous(n->in[5], compute, op, &scratch[5], &io.lse);
    if (st == KN_OK) {
        bool ok = compute == KN_F64 ? attention_grad_f64(&P, &io) : attention_grad_f32(&P, &io);
        if (!ok) st = kn_error(KN_ERR_OOM, "%s: out of memory for the block buffers", op);
    }
    for (int i = 0; i < 6; i++) kn_tensor_decref(scratch[i]);
    return st;
}
