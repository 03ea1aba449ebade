/* CPU kernels of advanced indexing and masks: index_put, masked_fill, masked_select, nonzero. */
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/k_index_common.h"

/* ---- index_put --------------------------------------------------------------------------------
 * Each broadcast index position b picks a row of R trailing elements at pos[b]. Work is split
 * over the trailing elements only, so every thread walks b in order: the last of duplicate
 * positions wins, and accumulation is race-free and deterministic. */

#define PUT_BY_SIZE(E, SIZE)                                                                       \
    static void put_##SIZE(void *dst, const void *src, const int64_t *pos, int64_t B, int64_t R,   \
                           int64_t chunk) {                                                        \
        E *restrict d = dst;                                                                       \
        const E *restrict s = src;                                                                 \
        int64_t chunks = (R + chunk - 1) / chunk;                                                  \
        _Pragma("omp parallel for num_threads(kn_cpu_threads_for(B * R)) schedule(static)")        \
        for (int64_t c = 0; c < chunks; c++) {                                                     \
            int64_t r0 = c * chunk, r1 = r0 + chunk < R ? r0 + chunk : R;                          \
            for (int64_t b = 0; b < B; b++)                                                        \
                for (int64_t r = r0; r < r1; r++) d[pos[b] * R + r] = s[b * R + r];                \
        }                                                                                          \
    }
PUT_BY_SIZE(uint8_t, 1)
PUT_BY_SIZE(uint16_t, 2)
PUT_BY_SIZE(uint32_t, 4)
PUT_BY_SIZE(uint64_t, 8)

#define ACCUMULATE_PUT(CT, SUF, ADD)                                                               \
    static void accumulate_put_##SUF(void *dst, const void *src, const int64_t *pos, int64_t B,    \
                                     int64_t R, int64_t chunk) {                                   \
        CT *restrict d = dst;                                                                      \
        const CT *restrict s = src;                                                                \
        int64_t chunks = (R + chunk - 1) / chunk;                                                  \
        _Pragma("omp parallel for num_threads(kn_cpu_threads_for(B * R)) schedule(static)")        \
        for (int64_t c = 0; c < chunks; c++) {                                                     \
            int64_t r0 = c * chunk, r1 = r0 + chunk < R ? r0 + chunk : R;                          \
            for (int64_t b = 0; b < B; b++)                                                        \
                for (int64_t r = r0; r < r1; r++) {                                                \
                    CT *o = &d[pos[b] * R + r];                                                    \
                    *o = ADD(*o, s[b * R + r]);                                                    \
                }                                                                                  \
        }                                                                                          \
    }
#define PLAIN_ADD(a, b) ((a) + (b))
#define WRAP_ADD(a, b) ((int64_t)((uint64_t)(a) + (uint64_t)(b)))
ACCUMULATE_PUT(float, f32, PLAIN_ADD)
ACCUMULATE_PUT(double, f64, PLAIN_ADD)
ACCUMULATE_PUT(int64_t, i64, WRAP_ADD)

typedef void (*put_fn)(void *, const void *, const int64_t *, int64_t, int64_t, int64_t);

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
        put_fn fn;
        if (accumulate) fn = acc == KN_F32 ? accumulate_put_f32 : acc == KN_F64 ? accumulate_put_f64 : accumulate_put_i64;
        else {
            size_t es = kn_dtype_size(acc);
            fn = es == 1 ? put_1 : es == 2 ? put_2 : es == 4 ? put_4 : put_8;
        }
        fn(kn_tensor_data(buf), kn_tensor_data(values), pos, B, R, chunk);
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
 * Two passes over chunks: count the true mask elements of each chunk, then each chunk writes
 * from its prefix-sum position, so the output keeps row-major order. */

typedef struct chunks {
    int count;
    int64_t *start; /* count + 1 entries: output position of each chunk's first element */
} chunks;

static kn_status count_chunks(chunks *c, const uint8_t *mask, int64_t numel) {
    c->count = kn_cpu_threads_for(numel);
    c->start = calloc((size_t)c->count + 1, sizeof *c->start);
    if (!c->start) return kn_error(KN_ERR_OOM, "out of host memory counting a mask");
#pragma omp parallel for num_threads(c->count) schedule(static)
    for (int t = 0; t < c->count; t++) {
        int64_t b = numel * t / c->count, e = numel * (t + 1) / c->count, k = 0;
        for (int64_t i = b; i < e; i++) k += mask[i] != 0;
        c->start[t + 1] = k;
    }
    for (int t = 0; t < c->count; t++) c->start[t + 1] += c->start[t];
    return KN_OK;
}

#define COMPACT(E, SIZE)                                                                              \
    static void compact_##SIZE(void *dst, const void *src, const uint8_t *mask, int64_t numel,        \
                               const chunks *c) {                                                     \
        E *restrict d = dst;                                                                          \
        const E *restrict s = src;                                                                    \
        _Pragma("omp parallel for num_threads(c->count) schedule(static)")                            \
        for (int t = 0; t < c->count; t++) {                                                          \
            int64_t b = numel * t / c->count, e = numel * (t + 1) / c->count, k = c->start[t];        \
            for (int64_t i = b; i < e; i++)                                                           \
                if (mask[i]) d[k++] = s[i];                                                           \
        }                                                                                             \
    }
COMPACT(uint8_t, 1)
COMPACT(uint16_t, 2)
COMPACT(uint32_t, 4)
COMPACT(uint64_t, 8)

kn_status kn_cpu_masked_select(kn_node *n) {
    kn_tensor *x = n->in[0];
    const uint8_t *mask = kn_tensor_data(n->in[1]);
    int64_t numel = kn_numel(x);
    chunks c;
    kn_status st = count_chunks(&c, mask, numel);
    if (st != KN_OK) return st;
    int64_t total = c.start[c.count];
    kn_tensor *out = kn_tensor_alloc("masked_select", x->dtype, &total, 1, x->storage->device);
    if (out) {
        n->out[n->n_out++] = out;
        size_t es = kn_dtype_size(x->dtype);
        void (*fn)(void *, const void *, const uint8_t *, int64_t, const chunks *) =
            es == 1 ? compact_1 : es == 2 ? compact_2 : es == 4 ? compact_4 : compact_8;
        if (total) fn(kn_tensor_data(out), kn_tensor_data(x), mask, numel, &c);
    }
    free(c.start);
    return out ? KN_OK : kn_last_status();
}

kn_status kn_cpu_nonzero(kn_node *n) {
    kn_tensor *x = n->in[0];
    const uint8_t *mask = kn_tensor_data(x);
    int64_t numel = kn_numel(x);
    int nd = x->ndim;
    chunks c;
    kn_status st = count_chunks(&c, mask, numel);
    if (st != KN_OK) return st;
    int64_t shape[2] = {c.start[c.count], nd};
    kn_tensor *out = kn_tensor_alloc("nonzero", KN_I64, shape, 2, x->storage->device);
    if (out) {
        n->out[n->n_out++] = out;
        int64_t *o = kn_tensor_data(out);
#pragma omp parallel for num_threads(c.count) schedule(static)
        for (int t = 0; t < c.count; t++) {
            int64_t b = numel * t / c.count, e = numel * (t + 1) / c.count, k = c.start[t];
            for (int64_t i = b; i < e; i++) {
                if (!mask[i]) continue;
                int64_t rest = i;
                for (int d = nd - 1; d >= 0; d--) {
                    o[k * nd + d] = rest % x->shape[d];
                    rest /= x->shape[d];
                }
                k++;
            }
        }
    }
    free(c.start);
    return out ? KN_OK : kn_last_status();
}
