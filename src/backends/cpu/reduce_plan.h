/* How a CPU reduction walks its input: `outer` outputs, each reducing `inner` elements. The
 * plan hands each kernel a contiguous [outer, inner] view, copying (with the reduced dims
 * moved last) only when the input's layout does not already give one. */
#ifndef KILN_BACKENDS_CPU_REDUCE_PLAN_H
#define KILN_BACKENDS_CPU_REDUCE_PLAN_H

#include "backends/cpu/cpu_kernels.h"

typedef struct kn_reduce_plan {
    int64_t outer, inner;
    const void *data;     /* [outer, inner] row-major, elements of the input dtype */
    kn_tensor *scratch;   /* the copy, when one was made */
} kn_reduce_plan;

/* Plans the reduction of x over the sorted dims in `reduced`. Fails only on OOM. */
kn_status kn_reduce_plan_make(kn_reduce_plan *p, kn_tensor *x, kn_shape reduced);
void kn_reduce_plan_free(kn_reduce_plan *p);

/* Splits [0, count) among threads: body(begin, end) runs once per thread's range. */
#define KN_PARALLEL_RANGE(count, work_per_item, begin, end, ...)                               \
    do {                                                                                       \
        int64_t count_ = (count);                                                              \
        int threads_ = kn_cpu_threads_for(count_ * (work_per_item));                           \
        if (threads_ > count_) threads_ = count_ > 0 ? (int)count_ : 1;                        \
        _Pragma("omp parallel num_threads(threads_)") {                                        \
            int t_ = omp_get_thread_num(), nt_ = omp_get_num_threads();                        \
            int64_t begin = count_ * t_ / nt_, end = count_ * (t_ + 1) / nt_;                  \
            __VA_ARGS__                                                                        \
        }                                                                                      \
    } while (0)

/* Row helpers shared by the reduction kernels: element loads widened to double (floats)
 * or int64 (ints, bool), and stores of element i that narrow to the output's dtype. */
void kn_reduce_load_f64(kn_dtype dt, const void *src, int64_t n, double *dst);
void kn_reduce_load_i64(kn_dtype dt, const void *src, int64_t n, int64_t *dst);
void kn_reduce_store_f64(kn_tensor *t, int64_t i, double v);
void kn_reduce_store_i64(kn_tensor *t, int64_t i, int64_t v);

/* Runs fn on every row of the plan of n->in[0] over its reduce dims: row r has `len` elements
 * at `row`; `scratch` holds len doubles for the calling thread. */
typedef void (*kn_reduce_row_fn)(kn_node *n, const void *row, int64_t len, int64_t r, void *scratch);
kn_status kn_reduce_rows(kn_node *n, kn_reduce_row_fn fn);

/* The along-dim kernels (k_reduce_along.c), registered with the others in k_reduce.c. */
kn_status kn_cpu_cumsum(kn_node *n);
kn_status kn_cpu_cumprod(kn_node *n);
kn_status kn_cpu_softmax(kn_node *n);
kn_status kn_cpu_log_softmax(kn_node *n);
/* Their gradients (k_softmax_backward.c). */
kn_status kn_cpu_softmax_backward(kn_node *n);
kn_status kn_cpu_log_softmax_backward(kn_node *n);

#endif
