/* Shared pieces of the CPU index kernels: reading index values, range checks, and the axis
 * walk that gather, scatter, index_select, index_add and embedding are built on. */
#ifndef KILN_BACKENDS_CPU_K_INDEX_COMMON_H
#define KILN_BACKENDS_CPU_K_INDEX_COMMON_H

#include "backends/cpu/cpu_kernels.h"
#include "core/error.h"
#include "core/thread_pool.h"

/* Index element `off` (in elements) of an i32 or i64 buffer. */
static inline int64_t kn_index_load(const void *base, bool is_i64, int64_t off) {
    return is_i64 ? ((const int64_t *)base)[off] : (int64_t)((const int32_t *)base)[off];
}

/* Checks that every element of the i32/i64 tensor idx lies in [lo, hi); otherwise returns
 * KN_ERR_INDEX with "<op>: index V is out of range for dim D of size S". */
kn_status kn_index_check_range(kn_tensor *idx, int64_t lo, int64_t hi, const char *op, int64_t dim);

/* The walk: a shape W split at `dim` into [outer, n, inner], and three operands, each seen
 * through strides over W's coordinates (0 where it does not move). Operand TARGET is
 * addressed along dim by the index value, the others by the coordinate j. */
enum { KN_AX_TARGET = 0, KN_AX_INDEX, KN_AX_OTHER, KN_AX_COUNT };

typedef struct kn_axis_walk {
    int64_t outer, n, inner;
    int64_t *outer_off[KN_AX_COUNT], *inner_off[KN_AX_COUNT]; /* element offsets per coordinate */
    int64_t dim_stride[KN_AX_COUNT];
    const void *index;
    bool index_i64;
    int64_t tasks, block; /* outer * blocks tasks, each a block of inner */
} kn_axis_walk;

/* Builds the walk over W (shape[ndim], a 0-d W is one element) for operands with the given
 * strides (stride[k][d] for d < ndim). Fails only on OOM. */
kn_status kn_axis_walk_make(kn_axis_walk *w, const int64_t *shape, int ndim, int dim,
                            const int64_t stride[KN_AX_COUNT][KN_MAX_DIMS], const kn_tensor *index);
void kn_axis_walk_free(kn_axis_walk *w);

/* Defines chunk function NAME over tasks of the walk ctx->walk (ctx: a CTX_T *, which has the
 * member `walk`): PROLOGUE, then BODY for every element of the tasks with t_off (TARGET's
 * offset, through the index value) and o_off (OTHER's offset). Elements that share their
 * coordinates outside dim are one task's, in increasing j, so writes through duplicate
 * indices land in row-major order. kn_axis_walk_run runs it. */
#define KN_AXIS_WALK_FN(NAME, CTX_T, PROLOGUE, BODY)                                              \
    static void NAME(void *ctx_, int64_t begin_, int64_t end_, int chunk_) {                      \
        const CTX_T *ctx = ctx_;                                                                  \
        const kn_axis_walk *w_ = ctx->walk;                                                       \
        int64_t blocks_ = (w_->inner + w_->block - 1) / (w_->block ? w_->block : 1);              \
        (void)chunk_;                                                                             \
        PROLOGUE                                                                                  \
        for (int64_t task_ = begin_; task_ < end_; task_++) {                                     \
            int64_t o_ = task_ / blocks_, i0_ = (task_ % blocks_) * w_->block;                    \
            int64_t i1_ = i0_ + w_->block < w_->inner ? i0_ + w_->block : w_->inner;              \
            const int64_t *tin_ = w_->inner_off[KN_AX_TARGET], *xin_ = w_->inner_off[KN_AX_INDEX]; \
            const int64_t *oin_ = w_->inner_off[KN_AX_OTHER];                                     \
            for (int64_t j_ = 0; j_ < w_->n; j_++) {                                              \
                int64_t tb_ = w_->outer_off[KN_AX_TARGET][o_];                                    \
                int64_t xb_ = w_->outer_off[KN_AX_INDEX][o_] + j_ * w_->dim_stride[KN_AX_INDEX];  \
                int64_t ob_ = w_->outer_off[KN_AX_OTHER][o_] + j_ * w_->dim_stride[KN_AX_OTHER];  \
                for (int64_t i_ = i0_; i_ < i1_; i_++) {                                          \
                    int64_t ix_ = kn_index_load(w_->index, w_->index_i64, xb_ + xin_[i_]);        \
                    int64_t t_off = tb_ + ix_ * w_->dim_stride[KN_AX_TARGET] + tin_[i_];          \
                    int64_t o_off = ob_ + oin_[i_];                                               \
                    (void)o_off;                                                                  \
                    BODY                                                                          \
                }                                                                                 \
            }                                                                                     \
        }                                                                                         \
    }

/* Runs a KN_AXIS_WALK_FN chunk function over w's tasks on the thread pool; ctx's walk is w. */
static inline void kn_axis_walk_run(const kn_axis_walk *w, kn_chunk_fn fn, void *ctx) {
    kn_parallel_for(w->tasks, w->n * w->block, fn, ctx);
}

/* The accumulator dtype of a dtype: f32 for f32/f16/bf16, f64, i64 for integers and bool. */
static inline kn_dtype kn_index_acc_dtype(kn_dtype d) {
    return d == KN_F64 ? KN_F64 : kn_dtype_is_float(d) ? KN_F32 : KN_I64;
}

/* Stores v converted to dtype d at element i of base. */

/* Kernels defined in the other k_index_*.c files, registered by k_index.c. */
kn_status kn_cpu_index_put(kn_node *n);
kn_status kn_cpu_masked_fill(kn_node *n);
kn_status kn_cpu_masked_select(kn_node *n);
kn_status kn_cpu_nonzero(kn_node *n);
kn_status kn_cpu_embedding_bag(kn_node *n);
kn_status kn_cpu_embedding_backward(kn_node *n);
kn_status kn_cpu_sort(kn_node *n);
kn_status kn_cpu_unique(kn_node *n);
kn_status kn_cpu_multinomial(kn_node *n);

#endif
