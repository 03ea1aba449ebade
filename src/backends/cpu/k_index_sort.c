/* CPU kernels of the ordering ops: sort (also argsort and topk, which keep the first k of
 * each sorted row) and unique. A stable merge sort of (key, position) pairs per row; NaN
 * sorts as the largest value, and in unique each NaN is a value of its own (as in PyTorch:
 * NaN equals nothing), in the order the NaNs appear. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/k_index_common.h"

static inline bool nan_f(float v) { return isnan(v); }
static inline bool nan_d(double v) { return isnan(v); }
static inline bool nan_none(int64_t v) { return false; }
#define KEY_NAN(v) _Generic((v), float: nan_f, double: nan_d, default: nan_none)(v)
#define KEY_LESS(a, b) ((a) < (b) || (KEY_NAN(b) && !KEY_NAN(a)))
/* Whether sorted neighbours a <= b start a new value in unique: they differ, or b is NaN. */
#define KEY_NEW_VALUE(a, b) (KEY_LESS(a, b) || KEY_NAN(b))

#define SORT_DTYPE(unused, SUF, DT, ST, CT, LOAD, STORE)                                                 \
    typedef struct pair_##SUF {                                                                          \
        CT key;                                                                                          \
        int64_t pos;                                                                                     \
    } pair_##SUF;                                                                                        \
    static inline bool before_##SUF(const pair_##SUF *a, const pair_##SUF *b, bool desc) {              \
        return desc ? KEY_LESS(b->key, a->key) : KEY_LESS(a->key, b->key);                              \
    }                                                                                                    \
    /* Sorts a[0, n) stably; tmp holds n pairs. */                                                       \
    static void merge_sort_##SUF(pair_##SUF *a, pair_##SUF *tmp, int64_t n, bool desc) {                \
        enum { RUN = 16 };                                                                               \
        for (int64_t s = 0; s < n; s += RUN) {                                                           \
            int64_t e = s + RUN < n ? s + RUN : n;                                                       \
            for (int64_t i = s + 1; i < e; i++) {                                                        \
                pair_##SUF v = a[i];                                                                     \
                int64_t j = i;                                                                           \
                while (j > s && before_##SUF(&v, &a[j - 1], desc)) {                                     \
                    a[j] = a[j - 1];                                                                     \
                    j--;                                                                                 \
                }                                                                                        \
                a[j] = v;                                                                                \
            }                                                                                            \
        }                                                                                                \
        pair_##SUF *src = a, *dst = tmp;                                                                 \
        for (int64_t width = RUN; width < n; width *= 2) {                                               \
            for (int64_t lo = 0; lo < n; lo += 2 * width) {                                              \
                int64_t mid = lo + width < n ? lo + width : n, hi = lo + 2 * width < n ? lo + 2 * width : n; \
                int64_t i = lo, j = mid, k = lo;                                                         \
                while (i < mid && j < hi) dst[k++] = before_##SUF(&src[j], &src[i], desc) ? src[j++] : src[i++]; \
                while (i < mid) dst[k++] = src[i++];                                                     \
                while (j < hi) dst[k++] = src[j++];                                                      \
            }                                                                                            \
            pair_##SUF *swap = src;                                                                      \
            src = dst;                                                                                   \
            dst = swap;                                                                                  \
        }                                                                                                \
        if (src != a) memcpy(a, src, sizeof *a * (size_t)n);                                             \
    }                                                                                                    \
    /* Rows (o, i) of x [outer, n, inner]; keeps the first k of each sorted row. */                      \
    typedef struct sort_ctx_##SUF {                                                                      \
        const ST *x;                                                                                     \
        ST *vals;                                                                                        \
        int64_t *idx;                                                                                    \
        int64_t n, inner, k;                                                                             \
        bool desc;                                                                                       \
        atomic_bool failed; /* a chunk could not get its scratch */                                      \
    } sort_ctx_##SUF;                                                                                    \
    static void sort_chunk_##SUF(void *ctx, int64_t begin, int64_t end, int chunk) {                     \
        sort_ctx_##SUF *c = ctx;                                                                         \
        int64_t n = c->n, inner = c->inner, k = c->k;                                                    \
        (void)chunk;                                                                                     \
        pair_##SUF *buf = malloc(sizeof *buf * (size_t)(2 * n + 1));                                     \
        if (!buf) {                                                                                      \
            atomic_store(&c->failed, true);                                                              \
            return;                                                                                      \
        }                                                                                                \
        for (int64_t r = begin; r < end; r++) {                                                          \
            int64_t o = r / inner, i = r % inner;                                                        \
            const ST *row = c->x + o * n * inner + i;                                                    \
            for (int64_t j = 0; j < n; j++) buf[j] = (pair_##SUF){LOAD(row[j * inner]), j};              \
            merge_sort_##SUF(buf, buf + n, n, c->desc);                                                  \
            ST *vrow = c->vals + o * k * inner + i;                                                      \
            int64_t *irow = c->idx + o * k * inner + i;                                                  \
            for (int64_t j = 0; j < k; j++) {                                                            \
                vrow[j * inner] = row[buf[j].pos * inner];                                               \
                irow[j * inner] = buf[j].pos;                                                            \
            }                                                                                            \
        }                                                                                                \
        free(buf);                                                                                       \
    }                                                                                                    \
    static bool sort_rows_##SUF(const ST *x, ST *vals, int64_t *idx, int64_t outer, int64_t n,           \
                                int64_t inner, int64_t k, bool desc) {                                   \
        sort_ctx_##SUF c = {.x = x, .vals = vals, .idx = idx, .n = n, .inner = inner, .k = k, .desc = desc}; \
        kn_parallel_for(outer * inner, n * 4, sort_chunk_##SUF, &c);                                     \
        return !atomic_load(&c.failed);                                                                  \
    }                                                                                                    \
    /* unique of x[0, count): fills the outputs it allocates into n->out. */                             \
    static kn_status unique_##SUF(kn_node *n, const ST *x, int64_t count) {                              \
        pair_##SUF *buf = malloc(sizeof *buf * (size_t)(2 * count + 1));                                 \
        if (!buf) return kn_error(KN_ERR_OOM, "unique: out of host memory");                             \
        for (int64_t j = 0; j < count; j++) buf[j] = (pair_##SUF){LOAD(x[j]), j};                        \
        merge_sort_##SUF(buf, buf + count, count, false);                                                \
        int64_t groups = count ? 1 : 0;                                                                  \
        for (int64_t j = 1; j < count; j++) groups += KEY_NEW_VALUE(buf[j - 1].key, buf[j].key);         \
        kn_tensor *in = n->in[0];                                                                        \
        kn_device dev = in->storage->device;                                                             \
        kn_tensor *v = kn_tensor_alloc("unique", in->dtype, &groups, 1, dev);                            \
        kn_tensor *inv = v ? kn_tensor_alloc("unique", KN_I64, in->shape, in->ndim, dev) : NULL;         \
        kn_tensor *cnt = inv ? kn_tensor_alloc("unique", KN_I64, &groups, 1, dev) : NULL;                \
        if (!cnt) {                                                                                      \
            if (v) kn_tensor_decref(v);                                                                  \
            if (inv) kn_tensor_decref(inv);                                                              \
            free(buf);                                                                                   \
            return kn_last_status();                                                                     \
        }                                                                                                \
        ST *vo = kn_tensor_data(v);                                                                      \
        int64_t *io = kn_tensor_data(inv), *co = kn_tensor_data(cnt);                                    \
        int64_t g = -1;                                                                                  \
        for (int64_t j = 0; j < count; j++) {                                                            \
            if (j == 0 || KEY_NEW_VALUE(buf[j - 1].key, buf[j].key)) {                                   \
                vo[++g] = x[buf[j].pos];                                                                 \
                co[g] = 0;                                                                               \
            }                                                                                            \
            co[g]++;                                                                                     \
            io[buf[j].pos] = g;                                                                          \
        }                                                                                                \
        n->out[n->n_out++] = v;                                                                          \
        n->out[n->n_out++] = inv;                                                                        \
        n->out[n->n_out++] = cnt;                                                                        \
        free(buf);                                                                                       \
        return KN_OK;                                                                                    \
    }
KN_DTYPES_CLASS_ALL(SORT_DTYPE, ~)

kn_status kn_cpu_sort(kn_node *n) {
    kn_tensor *x = n->in[0];
    const kn_attrs_sort *a = KN_ATTRS(n, sort);
    int dim = (int)a->dim;
    bool desc = a->descending;
    int64_t k = a->k, outer = 1, inner = 1, len = x->ndim ? x->shape[dim] : 1;
    for (int d = 0; d < dim; d++) outer *= x->shape[d];
    for (int d = dim + 1; d < x->ndim; d++) inner *= x->shape[d];
    void *vals = kn_tensor_data(n->out[0]);
    int64_t *idx = kn_tensor_data(n->out[1]);
    const void *data = kn_tensor_data(x);
    if (outer * inner * len == 0) return KN_OK;
    bool ok = false;
    switch (x->dtype) {
#define SORT_CASE(unused, SUF, DT, ST, CT, LOAD, STORE) \
    case DT: ok = sort_rows_##SUF(data, vals, idx, outer, len, inner, k, desc); break;
        KN_DTYPES_CLASS_ALL(SORT_CASE, ~)
#undef SORT_CASE
    default: break;
    }
    return ok ? KN_OK : kn_error(KN_ERR_OOM, "%s: out of host memory for a row of %lld", kn_op_name(n->op), (long long)len);
}

kn_status kn_cpu_unique(kn_node *n) {
    kn_tensor *x = n->in[0];
    const void *data = kn_tensor_data(x);
    int64_t count = kn_numel(x);
    switch (x->dtype) {
#define UNIQUE_CASE(unused, SUF, DT, ST, CT, LOAD, STORE) \
    case DT: return unique_##SUF(n, data, count);
        KN_DTYPES_CLASS_ALL(UNIQUE_CASE, ~)
#undef UNIQUE_CASE
    default: return kn_error(KN_ERR_INTERNAL, "unique: no loop for this dtype");
    }
}
