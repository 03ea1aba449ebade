/* The kernel IR of fused mode: one generated kernel = a chain of elementwise steps over one
 * iteration space, optionally with values per row of it (reductions of chain values over
 * trailing dims, and elementwise ops of those): a hand-written softmax or LayerNorm is one
 * kernel, its chain run over each row once per reduction and once more for what follows the
 * last (a value inside is never written unless something else reads it). The scheduler
 * (exec/fused_schedule.c) builds it from recorded nodes; a backend's code generator turns it
 * into source (backends/cpu/codegen.c). Everything that selects the generated code is in the
 * IR (ops, wiring, dtypes, which values are stored, and the geometry *pattern*); sizes,
 * strides and attribute values are launch arguments, so a sequence length that grows by one
 * each step reuses the same kernel. */
#ifndef KILN_GRAPH_FUSED_IR_H
#define KILN_GRAPH_FUSED_IR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kiln/stats.h"
#include "ops/op_table.h"

#define KN_FUSED_MAX_STEPS 48
#define KN_FUSED_MAX_INPUTS 24
#define KN_FUSED_MAX_OUTPUTS KN_NODE_MAX_OUT /* stored steps and row values together */
#define KN_FUSED_MAX_OPERANDS (KN_FUSED_MAX_INPUTS + KN_FUSED_MAX_OUTPUTS)
#define KN_FUSED_MAX_ROWS 6

/* Values are numbered inputs first (0..n_in-1), then step results (n_in + j); a step reads
 * row value e (broadcast back over the row) as KN_FUSED_REDUCED + e. */
#define KN_FUSED_REDUCED 9999
typedef struct kn_fused_step {
    kn_op_id op;
    int n_arg;
    int arg[3];
    kn_dtype in_dtype;  /* the dtype of every argument (the node's kernel dtype) */
    kn_dtype out_dtype;
    int output;         /* the kernel output it is stored to, or -1 (dead: only used inside) */
} kn_fused_step;

/* How an operand moves along the (coalesced) dims. */
enum {
    KN_FUSED_INNER_UNIT = 0,   /* innermost stride 1 */
    KN_FUSED_INNER_ZERO = 1,   /* innermost stride 0 (broadcast along it) */
    KN_FUSED_INNER_STRIDED = 2,
};

typedef struct kn_fused_ir {
    int n_in, n_out, n_steps;
    kn_dtype in_dtype[KN_FUSED_MAX_INPUTS];
    kn_fused_step steps[KN_FUSED_MAX_STEPS];
    /* The pattern: rank after coalescing; per operand (outputs first, then inputs) the
     * inner-stride class and a bit per outer dim whose stride is 0. */
    int rank;
    unsigned char inner[KN_FUSED_MAX_OPERANDS];
    unsigned outer_zero[KN_FUSED_MAX_OPERANDS];
    /* Values per row (each run of `row` consecutive elements), computed in order, each stored
     * (one value a row, contiguously, after the other operands). A reduction (sum, mean, amax,
     * amin) folds chain value arg[0] over the row; any other op is elementwise over earlier row
     * values arg[0..n_arg) (indices into rows) with its attributes. Steps [0, after) come before
     * it; steps from `after` on may read it. */
    int n_rows;
    struct kn_fused_row {
        kn_op_id op;
        int n_arg, arg[3];
        kn_dtype dtype; /* f32 or f64: the reduced value's, or a row op's inputs' and output's */
        int after;
    } rows[KN_FUSED_MAX_ROWS];
} kn_fused_ir;

/* The thread pool as a generated kernel sees it (core/thread_pool.h's kn_parallel_chunks and
 * kn_parallel_run): pointers, since a kernel loaded with dlopen cannot count on resolving
 * kiln's symbols. The code generator emits this very text, so the two sides cannot drift. */
#define KN_FUSED_POOL_TYPES                                                                         \
    typedef void (*kn_fused_chunk_fn)(void *ctx, int64_t begin, int64_t end, int chunk);            \
    typedef struct kn_fused_pool {                                                                  \
        int (*chunks)(int64_t n, int64_t cost);                                                     \
        void (*run)(int64_t n, int chunks, kn_fused_chunk_fn fn, void *ctx);                        \
    } kn_fused_pool;
KN_FUSED_POOL_TYPES

/* The launch arguments of one generated kernel: operand pointers are taken from the node. */
typedef int (*kn_fused_fn)(char *const *base, const int64_t *size, const int64_t *stride, int64_t numel,
                           int64_t row, const double *attrs, const kn_fused_pool *pool);

typedef struct kn_fused_launch {
    kn_fused_fn fn;
    int rank, n_steps, n_out; /* n_out: stored chain values (row values come after the inputs) */
    int n_rows;
    int64_t numel, row;        /* row: elements per row value (0 without them) */
    int64_t size[KN_MAX_DIMS];
    int64_t stride[KN_FUSED_MAX_OPERANDS * KN_MAX_DIMS]; /* operand-major, elements */
    double attrs[2 * (KN_FUSED_MAX_STEPS + KN_FUSED_MAX_ROWS)]; /* each step's a, b, then each row op's */
    char desc[96];                                        /* "add+gelu", for messages */
} kn_fused_launch;

/* Whether op, as a row value, is a reduction (sum, mean, amax, amin) rather than a row op. */
static inline bool kn_fused_reduces(kn_op_id op) {
    return op == KN_OP_sum || op == KN_OP_mean || op == KN_OP_amax || op == KN_OP_amin;
}
/* The steps before the last reduction (run once per reduction); those after it run once more. */
static inline int kn_fused_epilogue_start(const kn_fused_ir *ir) {
    int start = 0;
    for (int e = 0; e < ir->n_rows; e++)
        if (kn_fused_reduces(ir->rows[e].op)) start = ir->rows[e].after;
    return start;
}

/* Whether a copy step converting `from` to `to` can be generated exactly as the copy kernel
 * converts (the rest stay eager ops). */
bool kn_fused_cast_supported(kn_dtype from, kn_dtype to);

/* Coalesces the iteration space of n operands of one shape (dims of size 1 dropped,
 * neighbours merged where every operand is contiguous across them) into L and the pattern
 * fields of ir. */
void kn_fused_geometry(kn_fused_ir *ir, kn_fused_launch *L, kn_tensor *const *operands, int n);

/* The call-site signature (ops and wiring; what stays fixed when only dtypes or shapes
 * change) and the full key text (signature + dtypes + pattern), both canonical text. */
void kn_fused_signature(const kn_fused_ir *ir, char *buf, size_t size);

/* What selects ir's generated code (everything kn_fused_key_text prints) packed into ints:
 * equal packings, equal kernels. Cheap enough for every flush, where the text is not (a fifth
 * of a decode step's host time went to formatting keys). Returns the count written. */
#define KN_FUSED_KEY_MAX (8 + KN_FUSED_MAX_INPUTS + 8 * KN_FUSED_MAX_STEPS + 8 * KN_FUSED_MAX_ROWS + 2 * KN_FUSED_MAX_OPERANDS)
int kn_fused_key(const kn_fused_ir *ir, int32_t *key);

/* A map from IRs (by kn_fused_key) to pointers, for the per-process tables in front of the
 * text-keyed ones (loaded kernels, seen variants). Not locked: its owner's lock guards it. */
typedef struct kn_fused_memo {
    struct kn_fused_memo_entry **slots;
    size_t cap, count;
} kn_fused_memo;
/* The pointer stored for ir's key, or NULL. */
void *kn_fused_memo_get(const kn_fused_memo *m, const kn_fused_ir *ir);
/* Stores value for ir's key (over an earlier one); false when out of memory. */
bool kn_fused_memo_put(kn_fused_memo *m, const kn_fused_ir *ir, void *value);
void kn_fused_key_text(const kn_fused_ir *ir, char *buf, size_t size);
/* The first part of the key that differs between two IRs of one call site. */
kn_recompile_reason kn_fused_diff(const kn_fused_ir *a, const kn_fused_ir *b);

#endif
