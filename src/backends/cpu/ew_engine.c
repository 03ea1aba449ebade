/* The elementwise engine: coalesced strided iteration split across threads. */
#include "backends/cpu/cpu_kernels.h"

#include <stdatomic.h>

#include "core/thread_pool.h"

typedef struct ew_loop {
    int ndim, nop;
    int64_t numel;
    int64_t shape[KN_MAX_DIMS];
    int64_t stride[KN_EW_MAX_OPERANDS][KN_MAX_DIMS]; /* elements */
    char *base[KN_EW_MAX_OPERANDS];
    int64_t esize[KN_EW_MAX_OPERANDS];
} ew_loop;

/* Drops size-1 dims and merges neighbours that are contiguous for every operand. */
static void ew_prepare(ew_loop *L, kn_tensor *const *ops, int nop) {
    const kn_tensor *out = ops[0];
    L->nop = nop;
    L->ndim = 0;
    L->numel = 1;
    for (int k = 0; k < nop; k++) {
        L->base[k] = kn_tensor_data(ops[k]);
        L->esize[k] = (int64_t)kn_dtype_size(ops[k]->dtype);
    }
    for (int d = 0; d < out->ndim; d++) {
        int64_t size = out->shape[d];
        L->numel *= size;
        if (size == 1) continue;
        int m = L->ndim;
        if (m > 0) {
            bool mergeable = true;
            for (int k = 0; k < nop && mergeable; k++)
                mergeable = L->stride[k][m - 1] == ops[k]->stride[d] * size;
            if (mergeable) {
                L->shape[m - 1] *= size;
                for (int k = 0; k < nop; k++) L->stride[k][m - 1] = ops[k]->stride[d];
                continue;
            }
        }
        L->shape[m] = size;
        for (int k = 0; k < nop; k++) L->stride[k][m] = ops[k]->stride[d];
        L->ndim++;
    }
    if (L->ndim == 0) { /* a single element */
        L->ndim = 1;
        L->shape[0] = 1;
        for (int k = 0; k < nop; k++) L->stride[k][0] = 1;
    }
}

static int ew_chunk(const ew_loop *L, int64_t begin, int64_t end, kn_ew_inner_fn fn, const void *ctx) {
    int last = L->ndim - 1;
    int64_t idx[KN_MAX_DIMS];
    int64_t rem = begin;
    for (int d = last; d >= 0; d--) {
        idx[d] = rem % L->shape[d];
        rem /= L->shape[d];
    }
    int64_t inner[KN_EW_MAX_OPERANDS];
    for (int k = 0; k < L->nop; k++) inner[k] = L->stride[k][last];
    int bad = 0;
    for (int64_t pos = begin; pos < end;) {
        int64_t len = L->shape[last] - idx[last];
        if (len > end - pos) len = end - pos;
        char *ptr[KN_EW_MAX_OPERANDS];
        for (int k = 0; k < L->nop; k++) {
            int64_t off = 0;
            for (int d = 0; d <= last; d++) off += idx[d] * L->stride[k][d];
            ptr[k] = L->base[k] + off * L->esize[k];
        }
        bad |= fn(ptr, inner, len, ctx);
        pos += len;
        idx[last] += len;
        for (int d = last; d > 0 && idx[d] == L->shape[d]; d--) {
            idx[d] = 0;
            idx[d - 1]++;
        }
    }
    return bad;
}

/* The loop's items are blocks of 16 elements, so that chunks keep vector loops whole and
 * cache lines unshared. */
#define EW_BLOCK 16

typedef struct ew_run_ctx {
    const ew_loop *L;
    kn_ew_inner_fn fn;
    const void *ctx;
    atomic_int bad;
} ew_run_ctx;

static void ew_run_chunk(void *ctx, int64_t begin, int64_t end, int chunk) {
    (void)chunk;
    ew_run_ctx *c = ctx;
    int64_t last = end * EW_BLOCK < c->L->numel ? end * EW_BLOCK : c->L->numel;
    int bad = ew_chunk(c->L, begin * EW_BLOCK, last, c->fn, c->ctx);
    if (bad) atomic_fetch_or(&c->bad, bad);
}

int kn_ew_run_operands(kn_tensor *const *ops, int nop, kn_ew_inner_fn fn, const void *ctx) {
    ew_loop L;
    ew_prepare(&L, ops, nop);
    if (L.numel == 0) return 0;
    ew_run_ctx c = {.L = &L, .fn = fn, .ctx = ctx};
    kn_parallel_for((L.numel + EW_BLOCK - 1) / EW_BLOCK, EW_BLOCK, ew_run_chunk, &c);
    return atomic_load(&c.bad);
}

int kn_ew_run(kn_node *n, kn_ew_inner_fn fn) {
    kn_tensor *ops[KN_EW_MAX_OPERANDS];
    ops[0] = n->out[0];
    for (int i = 0; i < n->n_in; i++) ops[i + 1] = n->in[i];
    return kn_ew_run_operands(ops, n->n_in + 1, fn, &n->attrs);
}
