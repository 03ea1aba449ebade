/* Float products spread over kiln's thread pool. A provider (OpenBLAS, oneDNN) runs each piece
 * on one thread; this layer decides the pieces: whole products when a batch has enough of them,
 * else panels of each product, so the pool's dynamic chunks balance the cores (a thread whose
 * core another process holds takes fewer panels) and no library starts threads of its own. */
#ifndef KILN_BACKENDS_CPU_GEMM_TILES_H
#define KILN_BACKENDS_CPU_GEMM_TILES_H

#include <stdbool.h>
#include <stdint.h>

#include "kiln/dtype.h"
#include "kiln/tensor.h"

/* A GEMM flop costs about this fraction of an element of the simple code the pool's grain is
 * measured in (~190 GFLOP/s per core against a few elements per nanosecond): a product's cost
 * for kn_parallel_chunks is its flops divided by this. */
#define KN_GEMM_FLOPS_PER_COST 64

/* `batches` products C = A B (C += A B when accumulate): A [M, K] and B [K, N] by element
 * strides, C [M, N] with rows ldc apart (columns contiguous). Product i's operands start at
 * i * a_bs, i * b_bs and i * c_bs elements (a batch stride of 0: one matrix for all). */
typedef struct kn_gemm_block {
    kn_dtype dt;
    const void *a, *b;
    void *c;
    int64_t ars, acs, brs, bcs, ldc;
    int64_t M, N, K;
    int64_t batches, a_bs, b_bs, c_bs;
    bool accumulate;
} kn_gemm_block;

/* What running a block came to. */
typedef enum kn_gemm_result {
    KN_GEMM_DONE,
    KN_GEMM_NO_MEMORY,   /* a gather or workspace could not be allocated */
    KN_GEMM_TURNED_DOWN, /* the provider cannot take this layout (the caller falls back) */
    KN_GEMM_FAILED,      /* the library failed otherwise */
} kn_gemm_result;

/* A provider's product of one block on the calling thread. It must not raise kiln errors (it may
 * run on a pool worker): it says what happened through its result. */
typedef kn_gemm_result (*kn_gemm_block_fn)(const kn_gemm_block *blk);

/* The openblas provider's block (k_linalg.c): f32 or f64, each product one BLAS call. */
kn_gemm_result kn_gemm_openblas_block(const kn_gemm_block *blk);
/* The onednn provider's block (gemm_onednn.c): f32, bf16 or f16 where oneDNN has the dtype;
 * KN_GEMM_TURNED_DOWN for a layout it cannot take, and always without oneDNN in the build. */
kn_gemm_result kn_gemm_onednn_block(const kn_gemm_block *blk);

/* Runs the product `whole` describes, split over the pool into blocks for fn; the worst result
 * of any block. Panels split N when M <= N (each panel then re-reads A, the smaller operand)
 * and M otherwise, in multiples of 16 so vector stores stay whole. */
kn_gemm_result kn_gemm_tiled(const kn_gemm_block *whole, kn_gemm_block_fn fn);

/* The batched matmul out = a b of tensors (a and b have out's rank, broadcast batch dims; out
 * contiguous) through fn, in out's dtype. Batches whose matrices lie at one stride from each
 * other are one tiled product; other batch layouts are tiled one matrix at a time. */
kn_gemm_result kn_gemm_tensors(const kn_tensor *a, const kn_tensor *b, kn_tensor *out, int64_t batches, int64_t M,
                               int64_t N, int64_t K, kn_gemm_block_fn fn);

#endif
