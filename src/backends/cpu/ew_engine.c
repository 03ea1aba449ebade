/* The elementwise engine: coalesced strided iteration split across threads. */
#include "backends/cpu/cpu_kernels.h"

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

int kn_ew_run_operands(kn_tensor *const *ops, int nop, kn_ew_inner_fn fn, const void *ctx) {
    ew_loop L;
    ew_prepare(&L, ops, nop);
    if (L.numel == 0) return 0;
    int threads = kn_cpu_threads_for(L.numel);
    if (threads == 1) return ew_chunk(&L, 0, L.numel, fn, ctx);
    int bad = 0;
#pragma omp parallel num_threads(threads) reduction(| : bad)
    {
        int t = omp_get_thread_num(), nt = omp_get_num_threads();
        /* Chunks aligned to 16 elements keep vector loops whole and cache lines unshared. */
        int64_t per = ((L.numel + nt - 1) / nt + 15) & ~(int64_t)15;
        int64_t begin = per * t, end = begin + per < L.numel ? begin + per : L.numel;
        if (begin < end) bad |= ew_chunk(&L, begin, end, fn, ctx);
    }
    return bad;
}

int kn_ew_run(kn_node *n, kn_ew_inner_fn fn) {
    kn_tensor *ops[KN_EW_MAX_OPERANDS];
    ops[0] = n->out[0];
    for (int i = 0; i < n->n_in; i++) ops[i + 1] = n->in[i];
    return kn_ew_run_operands(ops, n->n_in + 1, fn, &n->attrs);
}
