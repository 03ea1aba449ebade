/* Pieces the CPU attention kernels share: the forward (k_attention.c) and the backward
 * (k_attention_grad.c) read their operands, masks and problem sizes the same way. */
#ifndef KILN_BACKENDS_CPU_K_ATTENTION_H
#define KILN_BACKENDS_CPU_K_ATTENTION_H

#include "backends/cpu/k_loss.h"

/* The problem, with q, k, v as [batch..., heads, T, cols] and mask as [batch..., H, Tq, Tk]. */
typedef struct attn_problem {
    int batch_dims;
    int64_t batches, H, Hkv, Tq, Tk, D, Dv;
    int64_t shift; /* causal: key j is visible to query i iff j <= i + shift */
    double scale, out_scale;
    bool causal, dropout;
    uint64_t seed, offset, threshold;
} attn_problem;

/* The problem of a forward or backward node (q, k, v its first inputs; the backward's
 * attributes begin as the forward's: op_table.c). */
static inline attn_problem kn_cpu_attn_problem(const kn_node *n) {
    const kn_tensor *q = n->in[0], *k = n->in[1], *v = n->in[2];
    const kn_attrs_scaled_dot_product_attention *a = KN_ATTRS(n, scaled_dot_product_attention);
    int nd = q->ndim;
    attn_problem P = {.batch_dims = nd - 3, .batches = 1, .H = q->shape[nd - 3], .Hkv = k->shape[nd - 3],
                      .Tq = q->shape[nd - 2], .Tk = k->shape[nd - 2], .D = q->shape[nd - 1], .Dv = v->shape[nd - 1],
                      .scale = a->scale, .causal = a->causal, .seed = n->rng_seed, .offset = n->rng_offset};
    for (int d = 0; d < nd - 3; d++) P.batches *= q->shape[d];
    P.shift = a->causal_align == KN_CAUSAL_TOP_LEFT ? 0 : P.Tk - P.Tq;
    double p = a->dropout_p;
    P.dropout = p > 0;
    P.threshold = kn_dropout_threshold(p);
    P.out_scale = p >= 1 ? 0.0 : 1.0 / (1.0 - p);
    return P;
}

/* One operand as the kernels read it: unit column stride, row stride `ld`. */
typedef struct attn_operand {
    const kn_tensor *t; /* for its batch strides */
    const char *base;
    int64_t head_stride, ld;
} attn_operand;

/* An operand BLAS can read in place (unit column stride, row stride at least the row), else
 * a contiguous copy in `compute` in *scratch (16-bit operands are always widened). */
kn_status kn_cpu_attn_operand(kn_tensor *t, kn_dtype compute, kn_tensor **scratch, attn_operand *o);

/* Element offset of flat batch index b in t (batch dims may be broadcast, stride 0). */
static inline int64_t kn_cpu_attn_batch_offset(const kn_tensor *t, int batch_dims, int64_t b) {
    int64_t off = 0;
    for (int d = batch_dims - 1; d >= 0; d--) {
        off += (b % t->shape[d]) * t->stride[d];
        b /= t->shape[d];
    }
    return off;
}

/* The mask of (batch b, head h) as a function of (query i, key j). */
typedef struct attn_mask {
    const char *base; /* NULL: no mask */
    bool is_bool;
    int64_t is, js;   /* element strides */
} attn_mask;

static inline attn_mask kn_cpu_attn_mask(const kn_tensor *mask, int batch_dims, int64_t b, int64_t h) {
    attn_mask mb = {0};
    if (!mask) return mb;
    int nd = mask->ndim;
    mb.is_bool = mask->dtype == KN_BOOL;
    mb.is = mask->stride[nd - 2], mb.js = mask->stride[nd - 1];
    mb.base = (const char *)kn_tensor_data(mask) +
              (kn_cpu_attn_batch_offset(mask, batch_dims, b) + h * mask->stride[nd - 3]) *
                  (int64_t)kn_dtype_size(mask->dtype);
    return mb;
}

/* The forward of few queries per head (k_attention_decode.c): for at most this many queries, no
 * dropout, q, k, v and out of one float dtype below f64 with unit column strides, and a log-sum-
 * exp in f32; kn_cpu_attention_decode_fits says whether a node is such. */
#define KN_ATTENTION_DECODE_MAX_Q 8
bool kn_cpu_attention_decode_fits(const kn_node *n, const attn_problem *P);
kn_status kn_cpu_attention_decode(kn_node *n, const attn_problem *P);

#endif
