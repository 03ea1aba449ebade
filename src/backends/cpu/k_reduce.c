/* CPU kernels of the reductions. Float sums accumulate in double; each output's reduction
 * runs on one thread (or, for few outputs, is split across threads and combined). */
#include "backends/cpu/reduce_plan.h"

/* Sum of n contiguous elements of a float dtype, in double. */
#define SUM_ROW(unused, SUF, DT, ST, CT, LOAD, STORE)                                    \
    static double sum_row_##SUF(const void *data, int64_t n) {                   \
        const ST *x = data;                                                      \
        double acc = 0;                                                          \
        _Pragma("omp simd reduction(+ : acc)") for (int64_t i = 0; i < n; i++) acc += (double)LOAD(x[i]); \
        return acc;                                                              \
    }
KN_DTYPES_FLOAT(SUM_ROW, ~)

static double sum_row_float(kn_dtype dt, const void *data, int64_t n) {
    switch (dt) {
    case KN_F32: return sum_row_f32(data, n);
    case KN_F64: return sum_row_f64(data, n);
    case KN_F16: return sum_row_f16(data, n);
    default: return sum_row_bf16(data, n);
    }
}

static int64_t sum_row_int(kn_dtype dt, const void *data, int64_t n) {
    int64_t acc = 0;
    if (dt == KN_I32) {
        const int32_t *x = data;
        for (int64_t i = 0; i < n; i++) acc += x[i];
    } else if (dt == KN_I64) {
        const int64_t *x = data;
        for (int64_t i = 0; i < n; i++) acc += x[i];
    } else {
        const uint8_t *x = data;
        for (int64_t i = 0; i < n; i++) acc += x[i] != 0;
    }
    return acc;
}

static void store_double(kn_tensor *t, int64_t i, double v) {
    void *base = kn_tensor_data(t);
    switch (t->dtype) {
    case KN_F32: ((float *)base)[i] = (float)v; break;
    case KN_F64: ((double *)base)[i] = v; break;
    case KN_F16: ((uint16_t *)base)[i] = kn_f64_to_f16(v); break;
    case KN_BF16: ((uint16_t *)base)[i] = kn_f64_to_bf16(v); break;
    default: break;
    }
}

/* Sums (or means, with scale = 1/inner) of every output row. */
static kn_status sum_like(kn_node *n, bool mean) {
    kn_tensor *x = n->in[0], *out = n->out[0];
    kn_reduce_plan p;
    kn_status st = kn_reduce_plan_make(&p, x, n->attrs.s[0]);
    if (st != KN_OK) return st;
    int64_t outer = p.outer, inner = p.inner;
    size_t esize = kn_dtype_size(x->dtype);
    const char *data = p.data;
    kn_dtype dt = x->dtype;
    if (!kn_dtype_is_float(dt)) {
        int64_t *o = kn_tensor_data(out);
        KN_PARALLEL_RANGE(outer, inner, b, e, {
            for (int64_t r = b; r < e; r++) o[r] = sum_row_int(dt, data + (size_t)(r * inner) * esize, inner);
        });
    } else if (outer >= kn_get_num_threads() || inner < 65536) {
        double scale = mean ? 1.0 / (double)inner : 1.0;
        KN_PARALLEL_RANGE(outer, inner, b, e, {
            for (int64_t r = b; r < e; r++)
                store_double(out, r, sum_row_float(dt, data + (size_t)(r * inner) * esize, inner) * scale);
        });
    } else {
        /* Few long rows: split each row across the threads. */
        for (int64_t r = 0; r < outer; r++) {
            const char *row = data + (size_t)(r * inner) * esize;
            double total = 0;
            int threads = kn_cpu_threads_for(inner);
#pragma omp parallel for num_threads(threads) reduction(+ : total) schedule(static)
            for (int64_t c = 0; c < threads; c++) {
                int64_t b = inner * c / threads, e = inner * (c + 1) / threads;
                total += sum_row_float(dt, row + (size_t)b * esize, e - b);
            }
            store_double(out, r, mean ? total / (double)inner : total);
        }
    }
    kn_reduce_plan_free(&p);
    if (mean && inner == 0) { /* the mean of nothing is NaN, as in PyTorch */
        for (int64_t r = 0; r < outer; r++) store_double(out, r, NAN);
    }
    return KN_OK;
}

static kn_status sum_kernel(kn_node *n) { return sum_like(n, false); }
static kn_status mean_kernel(kn_node *n) { return sum_like(n, true); }

const kn_kernel_reg kn_cpu_kernels_reduce[] = {
    {KN_OP_sum, sum_kernel, KN_DTS_ALL},
    {KN_OP_mean, mean_kernel, KN_DTS_FLOAT},
    {0},
};
