/* Reduction plans (a zero-copy [outer, inner] view when the reduced dims are the innermost
 * and contiguous, else one strided copy with them moved last) and the row helpers. */
#include "backends/cpu/reduce_plan.h"

#include <stdatomic.h>
#include <stdlib.h>

#include "core/error.h"

kn_status kn_reduce_plan_make(kn_reduce_plan *p, kn_tensor *x, kn_shape reduced) {
    p->scratch = NULL;
    p->outer = 1;
    p->inner = 1;
    bool is_reduced[KN_MAX_DIMS] = {false};
    for (int i = 0; i < reduced.n; i++) is_reduced[reduced.v[i]] = true;
    for (int d = 0; d < x->ndim; d++) {
        if (is_reduced[d]) p->inner *= x->shape[d];
        else p->outer *= x->shape[d];
    }
    /* Reduced dims last (size-1 dims aside) and the whole tensor contiguous: read it in place. */
    bool trailing = true, reduced_before = false;
    for (int d = 0; d < x->ndim; d++) {
        if (x->shape[d] == 1) continue;
        if (is_reduced[d]) reduced_before = true;
        else if (reduced_before) trailing = false;
    }
    if (trailing && kn_tensor_is_contiguous(x)) {
        p->data = kn_tensor_data(x);
        return KN_OK;
    }
    /* Otherwise copy into [kept..., reduced...] order. */
    int64_t shape[KN_MAX_DIMS], stride[KN_MAX_DIMS];
    int n = 0;
    for (int d = 0; d < x->ndim; d++)
        if (!is_reduced[d]) shape[n] = x->shape[d], stride[n++] = x->stride[d];
    for (int d = 0; d < x->ndim; d++)
        if (is_reduced[d]) shape[n] = x->shape[d], stride[n++] = x->stride[d];
    kn_tensor *permuted = kn_tensor_view_of(x, shape, n, stride, x->offset);
    kn_tensor *copy = permuted ? kn_tensor_alloc("reduce", x->dtype, shape, n, x->storage->device) : NULL;
    kn_status st = copy ? kn_cpu_copy_into(copy, permuted) : kn_last_status();
    kn_tensor_decref(permuted);
    if (st != KN_OK) {
        kn_tensor_decref(copy);
        return st;
    }
    p->scratch = copy;
    p->data = kn_tensor_data(copy);
    return KN_OK;
}

void kn_reduce_plan_free(kn_reduce_plan *p) {
    kn_tensor_decref(p->scratch);
    p->scratch = NULL;
}

#define LOAD_CASE(T, SUF, DT, ST, CT, LOAD, STORE)              \
    case DT: {                                                  \
        const ST *s = src;                                      \
        for (int64_t i = 0; i < n; i++) dst[i] = (T)LOAD(s[i]); \
        break;                                                  \
    }
void kn_reduce_load_f64(kn_dtype dt, const void *src, int64_t n, double *dst) {
    switch (dt) { KN_DTYPES_CLASS_ALL(LOAD_CASE, double) default: break; }
}
void kn_reduce_load_i64(kn_dtype dt, const void *src, int64_t n, int64_t *dst) {
    switch (dt) { KN_DTYPES_CLASS_ALL(LOAD_CASE, int64_t) default: break; }
}

void kn_reduce_store_f64(kn_tensor *t, int64_t i, double v) {
    if (kn_dtype_is_float(t->dtype)) kn_cpu_store_f64(kn_tensor_data(t), t->dtype, i, v);
    else kn_reduce_store_i64(t, i, (int64_t)v);
}

void kn_reduce_store_i64(kn_tensor *t, int64_t i, int64_t v) {
    void *base = kn_tensor_data(t);
    switch (t->dtype) {
    case KN_I32: ((int32_t *)base)[i] = (int32_t)v; break;
    case KN_I64: ((int64_t *)base)[i] = v; break;
    case KN_BOOL: ((uint8_t *)base)[i] = v != 0; break;
    default: kn_reduce_store_f64(t, i, (double)v); break;
    }
}

typedef struct rows_ctx {
    kn_row_fn fn;
    void *ctx;
    size_t scratch_bytes;
    atomic_int failed;
} rows_ctx;

static void rows_chunk(void *ctx, int64_t begin, int64_t end, int chunk) {
    rows_ctx *c = ctx;
    void *scratch = malloc(c->scratch_bytes ? c->scratch_bytes : 1);
    if (!scratch) {
        atomic_store(&c->failed, 1); /* raised by the caller: a chunk may run on a pool worker */
        return;
    }
    for (int64_t r = begin; r < end; r++) c->fn(c->ctx, r, scratch);
    free(scratch);
}

bool kn_parallel_rows(int64_t rows, int64_t cost, size_t scratch_bytes, kn_row_fn fn, void *ctx) {
    rows_ctx c = {.fn = fn, .ctx = ctx, .scratch_bytes = scratch_bytes, .failed = 0};
    kn_parallel_for(rows, cost, rows_chunk, &c);
    return !atomic_load(&c.failed);
}

typedef struct reduce_rows_ctx {
    kn_node *n;
    kn_reduce_row_fn fn;
    const char *data;
    int64_t inner;
    size_t esize;
} reduce_rows_ctx;

static void reduce_row(void *ctx, int64_t r, void *scratch) {
    reduce_rows_ctx *c = ctx;
    c->fn(c->n, c->data + (size_t)(r * c->inner) * c->esize, c->inner, r, scratch);
}

kn_status kn_reduce_rows(kn_node *n, kn_reduce_row_fn fn) {
    kn_reduce_plan p;
    kn_status st = kn_reduce_plan_make(&p, n->in[0], KN_ATTRS(n, reduce)->dims);
    if (st != KN_OK) return st;
    reduce_rows_ctx c = {.n = n, .fn = fn, .data = p.data, .inner = p.inner, .esize = kn_dtype_size(n->in[0]->dtype)};
    bool ok = kn_parallel_rows(p.outer, p.inner, (size_t)(p.inner > 0 ? p.inner : 1) * sizeof(double), reduce_row, &c);
    kn_reduce_plan_free(&p);
    return ok ? KN_OK : kn_error(KN_ERR_OOM, "%s: no memory for a row buffer", kn_op_name(n->op));
}
