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

#endif
