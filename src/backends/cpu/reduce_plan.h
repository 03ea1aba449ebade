/* How a CPU reduction walks its input: `outer` outputs, each reducing `inner` elements. The
 * plan hands each kernel a contiguous [outer, inner] view, copying (with the reduced dims
 * moved last) only when the input's layout does not already give one. */
#ifndef KILN_BACKENDS_CPU_REDUCE_PLAN_H
#define KILN_BACKENDS_CPU_REDUCE_PLAN_H

#include "backends/cpu/cpu_kernels.h"
#include "core/thread_pool.h"

typedef struct kn_reduce_plan {
    int64_t outer, inner;
    const void *data;     /* [outer, inner] row-major, elements of the input dtype */
    kn_tensor *scratch;   /* the copy, when one was made */
} kn_reduce_plan;

/* Plans the reduction of x over the sorted dims in `reduced`. Fails only on OOM. */
kn_status kn_reduce_plan_make(kn_reduce_plan *p, kn_tensor *x, kn_shape reduced);
void kn_reduce_plan_free(kn_reduce_plan *p);

/* Runs fn(ctx, r, scratch) for every row r of [0, rows) on the thread pool (`cost`: the work
 * of one row); each chunk of rows has its own scratch of scratch_bytes. False when a chunk
 * could not allocate its scratch (its rows did not run). */
typedef void (*kn_row_fn)(void *ctx, int64_t r, void *scratch);
bool kn_parallel_rows(int64_t rows, int64_t cost, size_t scratch_bytes, kn_row_fn fn, void *ctx);

/* sum = the sum over i in [0, n) of the double EXPR (which reads i): the tail past the last
 * multiple of KN_LANES first, then KN_LANES independent lanes, so that the compiler vectorizes
 * the sum without reassociating one chain (kiln builds without -ffast-math). */
#define KN_LANES 16
#define KN_LANE_SUM(sum, n, i, EXPR)                                                           \
    do {                                                                                       \
        const int64_t n_ = (n), full_ = n_ / KN_LANES * KN_LANES;                              \
        double lane_[KN_LANES] = {0};                                                          \
        for (int64_t b_ = 0; b_ < full_; b_ += KN_LANES)                                       \
            for (int k_ = 0; k_ < KN_LANES; k_++) {                                            \
                const int64_t i = b_ + k_;                                                     \
                lane_[k_] += (EXPR);                                                           \
            }                                                                                  \
        (sum) = 0;                                                                             \
        for (int64_t i = full_; i < n_; i++) (sum) += (EXPR);                                  \
        for (int k_ = 0; k_ < KN_LANES; k_++) (sum) += lane_[k_];                              \
    } while (0)

/* The max of x[0..C) (elements of storage type loaded by LOAD into compute type CT) and the
 * sum of exp(x - max) in double, into mx and sum, both in lanes (as KN_LANE_SUM). */
#define KN_ROW_MAX_SUMEXP(CT, LOAD, x, C, mx, sum)                                             \
    do {                                                                                       \
        const int64_t full_max_ = (C) / KN_LANES * KN_LANES;                                   \
        CT top_[KN_LANES];                                                                     \
        for (int k_ = 0; k_ < KN_LANES; k_++) top_[k_] = (CT)-INFINITY;                        \
        for (int64_t c_ = 0; c_ < full_max_; c_ += KN_LANES)                                   \
            for (int k_ = 0; k_ < KN_LANES; k_++) {                                            \
                CT v_ = LOAD((x)[c_ + k_]);                                                    \
                top_[k_] = v_ > top_[k_] ? v_ : top_[k_];                                      \
            }                                                                                  \
        (mx) = (CT)-INFINITY;                                                                  \
        for (int64_t c_ = full_max_; c_ < (C); c_++) (mx) = LOAD((x)[c_]) > (mx) ? LOAD((x)[c_]) : (mx); \
        for (int k_ = 0; k_ < KN_LANES; k_++) (mx) = top_[k_] > (mx) ? top_[k_] : (mx);        \
        KN_LANE_SUM(sum, C, c_, (double)kn_exp((CT)(LOAD((x)[c_]) - (mx))));                   \
    } while (0)

/* Row helpers shared by the reduction kernels: element loads widened to double (floats)
 * or int64 (ints, bool), and stores of element i that narrow to the output's dtype. */
void kn_reduce_load_f64(kn_dtype dt, const void *src, int64_t n, double *dst);
void kn_reduce_load_i64(kn_dtype dt, const void *src, int64_t n, int64_t *dst);
void kn_reduce_store_f64(kn_tensor *t, int64_t i, double v);
void kn_reduce_store_i64(kn_tensor *t, int64_t i, int64_t v);

/* Runs fn on every row of the plan of n->in[0] over its reduce dims: row r has `len` elements
 * at `row`; `scratch` holds len doubles for the rows of its chunk. */
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
