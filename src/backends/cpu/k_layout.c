/* CPU kernels of the layout family (see src/ops/defs/layout.def): cat, tril/triu, one_hot
 * here; pad, roll and repeat share the remap kernel of k_layout_remap.c. */
#include <stdlib.h>

#include "backends/cpu/k_layout_move.h"
#include "core/error.h"

/* Contiguous inputs are memcpy'd block by block in one parallel loop; strided ones go
 * through the copy engine into a view of their slot in the output. */
static kn_status cat_kernel(kn_node *n) {
    kn_tensor *out = n->out[0];
    if (kn_numel(out) == 0) return KN_OK;
    int dim = (int)KN_ATTRS(n, cat)->dim;
    size_t es = kn_dtype_size(out->dtype);
    int64_t outer = 1, inner = 1;
    for (int d = 0; d < dim; d++) outer *= out->shape[d];
    for (int d = dim + 1; d < out->ndim; d++) inner *= out->shape[d];
    int64_t out_row = out->shape[dim] * inner;

    int64_t *col = malloc(sizeof *col * (size_t)n->n_in); /* each input's first column, in elements */
    int *dense = malloc(sizeof *dense * (size_t)n->n_in);
    if (!col || !dense) {
        free(col);
        free(dense);
        return kn_error(KN_ERR_OOM, "cat: out of host memory for %d inputs", n->n_in);
    }
    int n_dense = 0;
    kn_status st = KN_OK;
    for (int64_t k = 0, c = 0; k < n->n_in; k++) {
        kn_tensor *x = n->in[k];
        if (kn_numel(x) == 0) continue; /* contributes nothing (and may be a skipped 1-d empty) */
        col[k] = c;
        c += x->shape[dim] * inner;
        if (kn_tensor_is_contiguous(x)) {
            dense[n_dense++] = (int)k;
            continue;
        }
        kn_tensor *slot = kn_tensor_view_of(out, x->shape, x->ndim, out->stride, out->offset + col[k]);
        if (!slot) {
            st = kn_last_status();
            break;
        }
        st = kn_cpu_copy_into(slot, x);
        kn_tensor_decref(slot);
        if (st != KN_OK) break;
    }
    if (st == KN_OK) {
        char *dst = kn_tensor_data(out);
#pragma omp parallel for collapse(2) num_threads(kn_cpu_threads_for(kn_numel(out))) schedule(static)
        for (int64_t r = 0; r < outer; r++)
            for (int j = 0; j < n_dense; j++) {
                kn_tensor *x = n->in[dense[j]];
                int64_t block = x->shape[dim] * inner;
                memcpy(dst + (size_t)(r * out_row + col[dense[j]]) * es,
                       (const char *)kn_tensor_data(x) + (size_t)(r * block) * es, (size_t)block * es);
            }
    }
    free(col);
    free(dense);
    return st;
}

/* Each row of each matrix: the kept columns moved, the others zeroed (all-zero bytes are 0
 * in every dtype). */
static kn_status triangle_kernel(kn_node *n) {
    kn_tensor *x = n->in[0], *out = n->out[0];
    int nd = x->ndim;
    int64_t R = x->shape[nd - 2], C = x->shape[nd - 1];
    int64_t k = n->op == KN_OP_tril ? KN_ATTRS(n, tril)->diagonal : KN_ATTRS(n, triu)->diagonal;
    int64_t rows = kn_numel(out) / (C ? C : 1);
    if (kn_numel(out) == 0) return KN_OK;
    bool upper = n->op == KN_OP_triu;
    size_t es = kn_dtype_size(x->dtype);
    char *dst = kn_tensor_data(out);
    const char *src = kn_tensor_data(x);
    int64_t rs = x->stride[nd - 2], cs = x->stride[nd - 1];
#pragma omp parallel for num_threads(kn_cpu_threads_for(kn_numel(out))) schedule(static)
    for (int64_t g = 0; g < rows; g++) {
        int64_t r = g % R;
        int64_t lo = upper ? r + k : 0, hi = upper ? C : r + k + 1;
        lo = lo < 0 ? 0 : lo > C ? C : lo;
        hi = hi < lo ? lo : hi > C ? C : hi;
        char *row = dst + (size_t)(g * C) * es;
        const char *in = src + (kn_layout_row_offset(x, g / R, 2) + r * rs + lo * cs) * (int64_t)es;
        memset(row, 0, (size_t)lo * es);
        kn_layout_move(row + (size_t)lo * es, in, hi - lo, cs, es);
        memset(row + (size_t)hi * es, 0, (size_t)(C - hi) * es);
    }
    return KN_OK;
}

/* Runs on the calling thread (KN_OPF_SYNC): reads the indices, sizes and fills the output. */
static kn_status one_hot_kernel(kn_node *n) {
    kn_tensor *x = n->in[0];
    int64_t classes = KN_ATTRS(n, one_hot)->classes, count = kn_numel(x);
    kn_tensor *idx = NULL;
    if (x->dtype == KN_I64 && kn_tensor_is_contiguous(x)) {
        idx = kn_tensor_incref(x);
    } else {
        idx = kn_tensor_alloc("one_hot", KN_I64, x->shape, x->ndim, x->storage->device);
        if (!idx) return kn_last_status();
        kn_status st = kn_cpu_copy_into(idx, x);
        if (st != KN_OK) {
            kn_tensor_decref(idx);
            return st;
        }
    }
    const int64_t *v = kn_tensor_data(idx);
    int64_t lo = 0, hi = -1;
    for (int64_t i = 0; i < count; i++) {
        if (i == 0 || v[i] < lo) lo = v[i];
        if (i == 0 || v[i] > hi) hi = v[i];
    }
    kn_status st = KN_OK;
    if (classes < 0 && count == 0)
        st = kn_error(KN_ERR_ARG, "one_hot: cannot infer the number of classes from an empty tensor");
    else if (count && lo < 0)
        st = kn_error(KN_ERR_INDEX, "one_hot: index %lld is negative", (long long)lo);
    else if (count && classes >= 0 && hi >= classes)
        st = kn_error(KN_ERR_INDEX, "one_hot: index %lld is out of range for %lld classes", (long long)hi,
                      (long long)classes);
    if (st != KN_OK) {
        kn_tensor_decref(idx);
        return st;
    }
    if (classes < 0) classes = hi + 1;
    int64_t shape[KN_MAX_DIMS];
    memcpy(shape, x->shape, sizeof(int64_t) * (size_t)x->ndim);
    shape[x->ndim] = classes;
    kn_tensor *out = kn_tensor_alloc("one_hot", KN_I64, shape, x->ndim + 1, x->storage->device);
    if (!out) {
        kn_tensor_decref(idx);
        return kn_last_status();
    }
    int64_t *o = kn_tensor_data(out);
    if (count > 0 && classes > 0) {
        memset(o, 0, sizeof *o * (size_t)(count * classes));
#pragma omp parallel for num_threads(kn_cpu_threads_for(count * classes)) schedule(static)
        for (int64_t i = 0; i < count; i++) o[i * classes + v[i]] = 1;
    }
    kn_tensor_decref(idx);
    n->out[n->n_out++] = out;
    return KN_OK;
}

const kn_kernel_reg kn_cpu_kernels_layout[] = {
    {KN_OP_cat, cat_kernel, KN_DTS_ALL},
    {KN_OP_pad, kn_cpu_remap_kernel, KN_DTS_ALL},
    {KN_OP_roll, kn_cpu_remap_kernel, KN_DTS_ALL},
    {KN_OP_repeat, kn_cpu_remap_kernel, KN_DTS_ALL},
    {KN_OP_tril, triangle_kernel, KN_DTS_ALL},
    {KN_OP_triu, triangle_kernel, KN_DTS_ALL},
    {KN_OP_one_hot, one_hot_kernel, KN_DTS_INT},
    {0},
};
