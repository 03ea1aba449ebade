/* CPU kernels of the layout family (see src/ops/defs/layout.def): cat, tril/triu, one_hot
 * here; pad, roll and repeat share the remap kernel of k_layout_remap.c. */
#include <stdlib.h>

#include "backends/cpu/k_layout_move.h"
#include "core/error.h"
#include "core/thread_pool.h"

typedef struct cat_ctx {
    const kn_node *n;
    char *dst;
    size_t es;
    int dim, n_dense;
    int64_t inner, out_row;
    const int64_t *col; /* each input's first column */
    const int *dense;   /* the contiguous inputs */
} cat_ctx;

/* Blocks [begin, end) of the contiguous inputs: block i is row i / n_dense of input
 * dense[i % n_dense]. */
static void cat_chunk(void *ctx, int64_t begin, int64_t end, int chunk) {
    const cat_ctx *c = ctx;
    (void)chunk;
    for (int64_t i = begin; i < end; i++) {
        int64_t r = i / c->n_dense;
        int j = c->dense[i % c->n_dense];
        const kn_tensor *x = c->n->in[j];
        int64_t block = x->shape[c->dim] * c->inner;
        memcpy(c->dst + (size_t)(r * c->out_row + c->col[j]) * c->es,
               (const char *)kn_tensor_data(x) + (size_t)(r * block) * c->es, (size_t)block * c->es);
    }
}

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
        cat_ctx c = {.n = n, .dst = kn_tensor_data(out), .es = es, .dim = dim, .inner = inner, .out_row = out_row,
                     .col = col, .dense = dense, .n_dense = n_dense};
        int64_t blocks = outer * n_dense;
        if (blocks) kn_parallel_for(blocks, kn_numel(out) / blocks, cat_chunk, &c);
    }
    free(col);
    free(dense);
    return st;
}

typedef struct triangle_ctx {
    const kn_tensor *x;
    char *dst;
    const char *src;
    size_t es;
    int64_t R, C, k;
    bool upper;
} triangle_ctx;

/* Rows [begin, end) of all the matrices: the kept columns moved, the others zeroed (all-zero
 * bytes are 0 in every dtype). */
static void triangle_chunk(void *ctx, int64_t begin, int64_t end, int chunk) {
    const triangle_ctx *c = ctx;
    const kn_tensor *x = c->x;
    int nd = x->ndim;
    int64_t R = c->R, C = c->C, rs = x->stride[nd - 2], cs = x->stride[nd - 1];
    size_t es = c->es;
    (void)chunk;
    for (int64_t g = begin; g < end; g++) {
        int64_t r = g % R;
        int64_t lo = c->upper ? r + c->k : 0, hi = c->upper ? C : r + c->k + 1;
        lo = lo < 0 ? 0 : lo > C ? C : lo;
        hi = hi < lo ? lo : hi > C ? C : hi;
        char *row = c->dst + (size_t)(g * C) * es;
        const char *in = c->src + (kn_layout_row_offset(x, g / R, 2) + r * rs + lo * cs) * (int64_t)es;
        memset(row, 0, (size_t)lo * es);
        kn_layout_move(row + (size_t)lo * es, in, hi - lo, cs, es);
        memset(row + (size_t)hi * es, 0, (size_t)(C - hi) * es);
    }
}

/* Each row of each matrix: see triangle_chunk. */
static kn_status triangle_kernel(kn_node *n) {
    kn_tensor *x = n->in[0], *out = n->out[0];
    int nd = x->ndim;
    int64_t R = x->shape[nd - 2], C = x->shape[nd - 1];
    int64_t k = n->op == KN_OP_tril ? KN_ATTRS(n, tril)->diagonal : KN_ATTRS(n, triu)->diagonal;
    int64_t rows = kn_numel(out) / (C ? C : 1);
    if (kn_numel(out) == 0) return KN_OK;
    bool upper = n->op == KN_OP_triu;
    size_t es = kn_dtype_size(x->dtype);
    triangle_ctx c = {.x = x, .dst = kn_tensor_data(out), .src = kn_tensor_data(x), .es = es, .R = R, .C = C, .k = k,
                      .upper = upper};
    kn_parallel_for(rows, C, triangle_chunk, &c);
    return KN_OK;
}

typedef struct one_hot_ctx {
    int64_t *o;
    const int64_t *v;
    int64_t classes;
} one_hot_ctx;

static void one_hot_chunk(void *ctx, int64_t begin, int64_t end, int chunk) {
    const one_hot_ctx *c = ctx;
    (void)chunk;
    for (int64_t i = begin; i < end; i++) c->o[i * c->classes + c->v[i]] = 1;
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
        kn_parallel_for(count, classes, one_hot_chunk, &(one_hot_ctx){.o = o, .v = v, .classes = classes});
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
