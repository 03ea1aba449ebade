/* Gradient formulas: the backward half of the op table (defs/grad.def). Each differentiable
 * op has one formula written with kiln ops, so a backward graph runs in every mode and on
 * every backend like a forward one; ops without a gradient are listed as such, and every op is in
 * one of the two lists (grad_table.c checks it at build time: no op is silently
 * non-differentiable). */
#ifndef KILN_OPS_GRAD_H
#define KILN_OPS_GRAD_H

#include "ops/op_table.h"

/* What a formula sees of the op it differentiates. */
typedef struct kn_grad_ctx {
    kn_op_id op;
    const kn_attrs *attrs;
    int n_in, n_out;
    kn_tensor *const *in;      /* saved inputs: NULL unless the entry's `saves` names them */
    kn_tensor *const *out;     /* saved outputs, likewise */
    const kn_shape *in_shape;  /* every input's shape and dtype, always kept */
    const kn_dtype *in_dtype;
    const bool *needs;         /* needs[i]: input i wants a gradient */
    uint64_t rng_seed, rng_offset; /* random ops: the Philox state the forward drew from */
} kn_grad_ctx;

/* Input `nm` of op `name` as the entry declares it (NULL where absent or not saved), and its
 * position in in, needs and in_shape (-1 where absent). Attributes: c->attrs->name.field. */
#define KN_GRAD_INPUT(c, name, nm) kn_input_at((c)->in, (c)->attrs, KN_SLOT(name, nm))
#define KN_GRAD_POS(c, name, nm) kn_input_pos((c)->attrs, KN_SLOT(name, nm))

/* Writes gin[i] for each input with needs[i] (NULL where the gradient is zero) from the
 * output gradients gout (gout[j] is NULL where no gradient reached output j). Results may
 * have the input's broadcast shape or another float dtype: the engine sums and casts them
 * to the input's. Runs with grad mode off, inside a scope the engine pops. */
typedef kn_status (*kn_grad_fn)(const kn_grad_ctx *c, kn_tensor *const *gout, kn_tensor **gin);

/* saves: which inputs and outputs the formula reads (the rest are not kept alive). */
#define KN_SAVE_IN(i) (1u << (i))
#define KN_SAVE_OUT(i) (1u << (24 + (i)))
#define KN_SAVE_ALL_IN 0x00ffffffu

typedef struct kn_grad_def {
    kn_grad_fn fn;      /* NULL: see nondiff */
    uint32_t saves;
    bool nondiff;       /* the op's outputs carry no gradient (comparisons, argmax, ...) */
} kn_grad_def;

extern const kn_grad_def kn_grad_table[KN_OP_COUNT];

#define KN_GRAD(name, saves) kn_status kn_grad_##name(const kn_grad_ctx *c, kn_tensor *const *gout, kn_tensor **gin);
#define KN_NO_GRAD(name)
#include "ops/defs/grad.def"
#undef KN_GRAD
#undef KN_NO_GRAD

/* Views record their geometry instead of an op: backward maps the gradient of the view onto
 * the tensor it was taken from (src/ops/grad_view.c). */
typedef enum kn_view_kind {
    KN_VIEW_RESHAPE,  /* view, reshape, flatten, squeeze, unsqueeze: same elements, new shape */
    KN_VIEW_PERMUTE,  /* permute, transpose: dims reordered (perm holds the order) */
    KN_VIEW_EXPAND,   /* expand: broadcast dims */
    KN_VIEW_WINDOW,   /* slice, select, narrow, unfold: a window of the input's elements */
    KN_VIEW_STORAGE,  /* as_strided: a window of the storage itself */
} kn_view_kind;

typedef struct kn_view_geom {
    kn_shape shape, stride;
    int64_t offset;
} kn_view_geom;

typedef struct kn_view_rec {
    kn_view_kind kind;
    kn_shape in_shape;
    kn_shape perm;            /* PERMUTE */
    kn_view_geom window;      /* WINDOW: over the input's row-major layout; STORAGE: over the storage */
    kn_view_geom in;          /* STORAGE: the input's own geometry in the storage */
    int64_t storage_numel;    /* STORAGE: elements in the shared storage */
} kn_view_rec;

/* The gradient of the viewed tensor from g, the gradient of the view. */
kn_tensor *kn_grad_view(const kn_view_rec *v, kn_tensor *g);
/* Whether the gradient of view v is a fresh buffer that is zero outside v's window (a
 * window without repeated elements), so that kn_grad_view_add_into can stand for it. */
bool kn_grad_view_is_window(const kn_view_rec *v);
/* Adds g, the gradient of window view v, into its window of buf in place: buf, contiguous and
 * shaped like the viewed tensor, already holds the gradient from its other uses. The same
 * floats as adding kn_grad_view(v, g) to buf, without a zero-filled buffer the size of buf. */
kn_status kn_grad_view_add_into(const kn_view_rec *v, kn_tensor *buf, kn_tensor *g);

/* Helpers formulas share. */
/* g summed over the dims where it was broadcast from shape (leading dims and size-1 dims). */
kn_tensor *kn_sum_to(kn_tensor *g, kn_shape shape);

#endif
