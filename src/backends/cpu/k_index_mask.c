/* CPU kernels of advanced indexing and masks: index_put, masked_fill, masked_select, nonzero. */
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/k_index_common.h"

/* ---- index_put --------------------------------------------------------------------------------
 * Each broadcast index position b picks a row of R trailing elements at pos[b]. Work is split
 * over the trailing elements only, so every thread walks b in order: the last of duplicate
 * positions wins, and accumulation is race-free and deterministic. */

typedef struct put_ctx {
    void *dst;
    const void *src;
    const int64_t *pos;
    int64_t B, R, chunk; /* items: chunks of `chunk` trailing elements */
} put_ctx;

/* NAME: over chunks [begin, end) of the trailing elements, for b in order, STORE(o, v) with
 * o the destination element of (b, r) and v its source value. */
#define PUT_FN(NAME, E, STORE)                                                                     \
    static void NAME(void *ctx, int64_t begin, int64_t end, int chunk) {                           \
        const put_ctx *c = ctx;                                                                    \
        E *restrict d = c->dst;                                                                    \
        const E *restrict s = c->src;                                                              \
        int64_t B = c->B, R = c->R;                                                                \
        (void)chunk;                                                                               \
        for (int64_t k = begin; k < end; k++) {                                                    \
            int64_t r0 = k * c->chunk, r1 = r0 + c->chunk < R ? r0 + c->chunk : R;                 \
            for (int64_t b = 0; b < B; b++)                                                        \
                for (int64_t r = r0; r < r1; r++) STORE(d[c->pos[b] * R + r], s[b * R + r]);       \
        }                                                                                          \
    }
#define PUT_STORE(o, v) (o) = (v)
#define PLAIN_ADD(o, v) (o) = (o) + (v)
#define WRAP_ADD(o, v) (o) = (int64_t)((uint64_t)(o) + (uint64_t)(v))
PUT_FN(put_1, uint8_t, PUT_STORE)
PUT_FN(put_2, uint16_t, PUT_STORE)
PUT_FN(put_4, uint32_t, PUT_STORE)
PUT_FN(put_8, uint64_t, PUT_STORE)
PUT_FN(accumulate_put_f32, float, PLAIN_ADD)
PUT_FN(accumulate_put_f64, double, PLAIN_ADD)
PUT_FN(accumulate_put_i64, int64_t, WRAP_ADD)

kn_status kn_cpu_index_put(kn_node *n) {
    kn_tensor *x = n->in[0], *values = n->in[1], *out = n->out[0];
    int k_count = (int)KN_ATTRS(n, index_put)->n;
    bool accumulate = KN_ATTRS(n, index_put)->accumulate;
    int64_t B = kn_numel(n->in[2]), R = 1;
    for (int d = k_count; d < x->ndim; d++) R *= x->shape[d];
    int64_t *pos = malloc(sizeof *pos * (size_t)(B ? B : 1));
    if (!pos) return kn_error(KN_ERR_OOM, "index_put: out of host memory");
    for (int64_t b = 0; b < B; b++) pos[b] = 0;
    for (int k = 0; k < k_count; k++) {
        const int64_t *idx = kn_tensor_data(n->in[2 + k]);
        int64_t size = x->shape[k];
        for (int64_t b = 0; b < B; b++) {
            int64_t v = idx[b];
            if (v < -size || v >= size) {
                free(pos);
                return kn_error(KN_ERR_INDEX, "index_put: index %lld is out of range for dim %d of size %lld",
                                (long long)v, k, (long long)size);
            }
            pos[b] = pos[b] * size + (v < 0 ? v + size : v);
        }
    }
    kn_dtype acc = accumulate ? kn_index_acc_dtype(out->dtype) : out->dtype;
    kn_tensor *buf = out->dtype == acc ? out : kn_tensor_alloc("index_put", acc, out->shape, out->ndim, KN_CPU);
    kn_status st = buf ? kn_cpu_copy_into(buf, x) : kn_last_status();
    if (st == KN_OK && B && R) {
        int64_t want = 4 * (int64_t)kn_get_num_threads();
        int64_t chunk = B * R < 2 * 65536 || R < want ? R : (R + want - 1) / want;
        kn_chunk_fn fn;
        if (accumulate) fn = acc == KN_F32 ? accumulate_put_f32 : acc == KN_F64 ? accumulate_put_f64 : accumulate_put_i64;
        else {
            size_t es = kn_dtype_size(acc);
            fn = es == 1 ? put_1 : es == 2 ? put_2 : es == 4 ? put_4 : put_8;
        }
        put_ctx c = {.dst = kn_tensor_data(buf), .src = kn_tensor_data(values), .pos = pos, .B = B, .R = R, .chunk = chunk};
        kn_parallel_for((R + chunk - 1) / chunk, B * chunk, fn, &c);
        if (buf != out) st = kn_cpu_copy_into(out, buf);
    }
    if (buf && buf != out) kn_tensor_decref(buf);
    free(pos);
    return st;
}

/* ---- masked_fill ------------------------------------------------------------------------------ */

#define MASKED_FILL(unused, SUF, DT, ST, CT, LOAD, STORE)                                               \
    static int masked_fill_##SUF(char *const *p, const int64_t *s, int64_t n, const void *ctx) {        \
        ST *restrict o = (ST *)p[0];                                                                    \
        const ST *restrict x = (const ST *)p[1];                                                        \
        const uint8_t *restrict m = (const uint8_t *)p[2];                                              \
        ST v = STORE(KN_ATTR(CT, ((const kn_attrs *)ctx)->masked_fill.value));                          \
        if (s[0] == 1 && s[1] == 1 && s[2] == 1)                                                        \
            for (int64_t i = 0; i < n; i++) o[i] = m[i] ? v : x[i];                                     \
        else                                                                                            \
            for (int64_t i = 0; i < n; i++) o[i * s[0]] = m[i * s[2]] ? v : x[i * s[1]];                \
        return 0;                                                                                       \
    }
KN_DTYPES_CLASS_ALL(MASKED_FILL, ~)

kn_status kn_cpu_masked_fill(kn_node *n) {
    kn_ew_inner_fn fn = NULL;
    switch (n->in[0]->dtype) {
#define FILL_CASE(unused, SUF, DT, ST, CT, LOAD, STORE) \
    case DT: fn = masked_fill_##SUF; break;
        KN_DTYPES_CLASS_ALL(FILL_CASE, ~)
#undef FILL_CASE
    default: return kn_error(KN_ERR_INTERNAL, "masked_fill: no loop for this dtype");
    }
    kn_ew_run(n, fn);
    return KN_OK;
}

/* ---- masked_select and nonzero ------------------------------------------------------------------
 * Two passes over the same chunks of the mask: count the true elements of each chunk, then
 * each chunk writes from its prefix-sum position, so the output keeps row-major order. */

typedef struct mask_pass {
    int count;      /* chunks */
    int64_t *start; /* count + 1 entries: output position of each chunk's first element */
    const uint8_t *mask;
    void *dst;
    const void *src;      /* masked_select's input */
    const int64_t *shape; /* nonzero's input shape, of nd dims */
    int nd;
} mask_pass;

static void count_chunk(void *ctx, int64_t begin, int64_t end, int chunk) {
    mask_pass *c = ctx;
    int64_t k = 0;
    for (int64_t i = begin; i < end; i++) k += c->mask[i] != 0;
    c->start[chunk + 1] = k;
}

static kn_status count_chunks(mask_pass *c, const uint8_t *mask, int64_t numel) {
    *c = (mask_pass){.count = kn_parallel_chunks(numel, 1), .mask = mask};
    c->start = calloc((size_t)c->count + 1, sizeof *c->start);
    if (!c->start) return kn_error(KN_ERR_OOM, "out of host memory counting a mask");
    kn_parallel_run(numel, c->count, count_chunk, c);
    for (int t = 0; t < c->count; t++) c->start[t + 1] += c->start[t];
    return KN_OK;
}

#define COMPACT(E, SIZE)                                                                              \
    static void compact_##SIZE(void *ctx, int64_t begin, int64_t end, int chunk) {                    \
        const mask_pass *c = ctx;                                                                     \
        E *restrict d = c->dst;                                                                       \
        const E *restrict s = c->src;                                                                 \
        int64_t k = c->start[chunk];                                                                  \
        for (int64_t i = begin; i < end; i++)                                                         \
            if (c->mask[i]) d[k++] = s[i];                                                            \
    }
COMPACT(uint8_t, 1)
COMPACT(uint16_t, 2)
COMPACT(uint32_t, 4)
COMPACT(uint64_t, 8)

kn_status kn_cpu_masked_select(kn_node *n) {
    kn_tensor *x = n->in[0];
    int64_t numel = kn_numel(x);
    mask_pass c;
    kn_status st = count_chunks(&c, kn_tensor_data(n->in[1]), numel);
    if (st != KN_OK) return st;
    int64_t total = c.start[c.count];
    kn_tensor *out = kn_tensor_alloc("masked_select", x->dtype, &total, 1, x->storage->device);
    if (out) {
        n->out[n->n_out++] = out;
        size_t es = kn_dtype_size(x->dtype);
        c.dst = kn_tensor_data(out);
        c.src = kn_tensor_data(x);
        if (total)
            kn_parallel_run(numel, c.count, es == 1 ? compact_1 : es == 2 ? compact_2 : es == 4 ? compact_4 : compact_8, &c);
    }
    free(c.start);
    return out ? KN_OK : kn_last_status();
}

static void nonzero_chunk(void *ctx, int64_t begin, int64_t end, int chunk) {
    const mask_pass *c = ctx;
    int64_t *o = c->dst, k = c->start[chunk];
    int nd = c->nd;
    for (int64_t i = begin; i < end; i++) {
        if (!c->mask[i]) continue;
        int64_t rest = i;
        for (int d = nd - 1; d >= 0; d--) {
            o[k * nd + d] = rest % c->shape[d];
            rest /= c->shape[d];
        }
        k++;
    }
}

kn_status kn_cpu_nonzero(kn_node *n) {
    kn_tensor *x = n->in[0];
    int64_t numel = kn_numel(x);
    mask_pass c;
    kn_status st = count_chunks(&c, kn_tensor_data(x), numel);
    if (st != KN_OK) return st;
    int64_t shape[2] = {c.start[c.count], x->ndim};
    kn_tensor *out = kn_tensor_alloc("nonzero", KN_I64, shape, 2, x->storage->device);
    if (out) {
        n->out[n->n_out++] = out;
        c.dst = kn_tensor_data(out);
        c.shape = x->shape;
        c.nd = x->ndim;
        kn_parallel_run(numel, c.count, nonzero_chunk, &c);
    }
    free(c.start);
    return out ? KN_OK : kn_last_status();
}
