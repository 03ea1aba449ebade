/* The enumerated arguments of ops (reductions, modes): part of the op table, so that the
 * kernels that read them know them without the op functions' headers (docs/architecture.md).
 * Programs see them through kiln/ops_index.h and kiln/ops_loss.h. */
#ifndef KILN_OP_ENUMS_H
#define KILN_OP_ENUMS_H

/* How kn_scatter_reduce combines the values written to one element. */
typedef enum kn_scatter_reduce_op {
    KN_SCATTER_SUM = 0, KN_SCATTER_PROD, KN_SCATTER_MEAN, KN_SCATTER_AMAX, KN_SCATTER_AMIN
} kn_scatter_reduce_op;

/* How kn_embedding_bag reduces a bag of rows. */
typedef enum kn_bag_mode { KN_BAG_SUM = 0, KN_BAG_MEAN, KN_BAG_MAX } kn_bag_mode;

/* How a loss reduces its elements. */
typedef enum kn_reduction { KN_REDUCTION_MEAN = 0, KN_REDUCTION_SUM, KN_REDUCTION_NONE } kn_reduction;

/* Where causal attention puts the diagonal when Tq != Tk (they agree when Tq == Tk). */
typedef enum kn_causal_align {
    KN_CAUSAL_BOTTOM_RIGHT = 0, /* key j visible to query i iff j <= i + Tk - Tq: the last query
                                   sees every key, as for a KV cache (the default) */
    KN_CAUSAL_TOP_LEFT,         /* j <= i: PyTorch's is_causal */
} kn_causal_align;

#endif
