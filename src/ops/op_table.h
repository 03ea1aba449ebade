/* THE op table (DESIGN.md): one entry per op, from the X-macro lists in defs/. Every
 * mode, backend, code generator and `kiln ops` reads ops from here, and each entry carries
 * the op's signature: its inputs and its named, typed attributes (docs/adding-ops.md). */
#ifndef KILN_OPS_OP_TABLE_H
#define KILN_OPS_OP_TABLE_H

#include <stddef.h>
#include <stdint.h>

#include "core/tensor_impl.h"
#include "kiln/custom_op.h"

/* Fusion class: how the scheduler of fused and compiled modes may treat the op. */
typedef enum kn_op_kind {
    KN_KIND_ELEMENTWISE, /* one output element from the same element of each input */
    KN_KIND_REDUCTION,   /* reduces dims; fuses with elementwise prologues/epilogues */
    KN_KIND_OPAQUE,      /* a prebuilt kernel per backend (GEMM, conv, sort...) */
    KN_KIND_CREATION,    /* no tensor inputs (fill, arange, random) */
} kn_op_kind;

/* Op flags. */
enum {
    KN_OPF_SYNC = 1u << 0,    /* output shape depends on values: the host waits, the kernel allocates */
    KN_OPF_RANDOM = 1u << 1,  /* draws from the Philox generator (offset advanced at record time) */
    KN_OPF_NOCHECK = 1u << 2, /* debug mode skips the NaN/Inf check (outputs are not values) */
    KN_OPF_INT_TO_FLOAT = 1u << 3, /* integer and bool inputs are cast to f32 first (exp, div...) */
    KN_OPF_BOOL_OUT = 1u << 4,     /* elementwise: the output is bool (comparisons, isnan...) */
    KN_OPF_NO_GRAD = 1u << 5,      /* never recorded for autograd: its in-place writes into tensors that
                                      require grad are allowed (the optimizers' updates) */
};

typedef enum kn_op_id {
#define KN_OP(name, ...) KN_OP_##name,
#include "ops/defs/all.def"
#undef KN_OP
    KN_OP_COUNT
} kn_op_id;

#define KN_NODE_MAX_IN 6
#define KN_NODE_MAX_OUT 8

/* Attribute types of the .def signatures (KN_A(TYPE, name)) and the C type each becomes. */
#define KN_ATTR_DECL_I64(nm) int64_t nm
#define KN_ATTR_DECL_F64(nm) double nm
#define KN_ATTR_DECL_BOOL(nm) bool nm
#define KN_ATTR_DECL_DIMS(nm) kn_shape nm          /* a list of dims or of per-dim values */
#define KN_ATTR_DECL_PAIR(nm) int64_t nm[2]        /* (height, width) of 2-d windows */
#define KN_ATTR_DECL_CUSTOM(nm) kn_custom_attrs nm /* a custom op's call attributes */

/* Per op, from its entry: kn_attrs_<op>, its attributes in declaration order, and
 * kn_in_<op>, one byte per input whose offset is the input's slot (KN_SLOT). `end_` closes
 * each (C has no empty structs); it is not an attribute. */
#define KN_IN(nm)
#define KN_OPT(nm)
#define KN_INS(nm)
#define KN_A(T, nm) KN_ATTR_DECL_##T(nm);
#define KN_OP(name, kind, dtypes, flags, infer, expr, ins, attrs) \
    typedef struct kn_attrs_##name {                     \
        attrs char end_;                                   \
    } kn_attrs_##name;
#include "ops/defs/all.def"
#undef KN_OP
#undef KN_A
#undef KN_IN
#undef KN_OPT
#undef KN_INS
#define KN_IN(nm) uint8_t nm;
#define KN_OPT(nm) uint8_t nm;
#define KN_INS(nm) uint8_t nm;
#define KN_A(T, nm)
#define KN_OP(name, kind, dtypes, flags, infer, expr, ins, attrs) \
    typedef struct kn_in_##name {                        \
        ins uint8_t end_;                                  \
    } kn_in_##name;
#include "ops/defs/all.def"
#undef KN_OP
#undef KN_A
#undef KN_IN
#undef KN_OPT
#undef KN_INS

/* The head every reduction's attributes start with, and the dims of the scans and softmaxes
 * (checked in op_table.c): code serving them all reads KN_ATTRS(n, reduce)->dims. */
typedef struct kn_reduce_attrs {
    kn_shape dims;
    bool keepdim;
} kn_reduce_attrs;

/* The head every creation op's attributes start with (checked in op_table.c): the output's
 * shape and dtype, which its rule reads as KN_ATTRS(n, creation). */
typedef struct kn_creation_attrs {
    kn_shape shape;
    int64_t dtype;
} kn_creation_attrs;

/* A node's attributes: the struct of its op (one member per op, named as the op) and which
 * optional inputs are absent. Fixed size, so a node never allocates for them. */
typedef struct kn_attrs {
    uint32_t absent; /* bit s: the optional input of slot s was not given (inputs are packed) */
    union {
#define KN_OP(name, ...) kn_attrs_##name name;
#include "ops/defs/all.def"
#undef KN_OP
        kn_reduce_attrs reduce;
        kn_creation_attrs creation;
    };
} kn_attrs;

/* The attributes of node (or anything with a kn_attrs `attrs`) n of op `name`:
 *     const kn_attrs_layer_norm *a = KN_ATTRS(n, layer_norm);   ... a->eps ... */
#define KN_ATTRS(n, name) (&(n)->attrs.name)
/* The slot of input `nm` of op `name` as its entry declares it (0, 1, ...). */
#define KN_SLOT(name, nm) ((int)offsetof(kn_in_##name, nm))

/* The position in a node's packed inputs of the input declared in `slot`, or -1 where that
 * optional input is absent. */
static inline int kn_input_pos(const kn_attrs *at, int slot) {
    if (at->absent >> slot & 1u) return -1;
    return slot - __builtin_popcount(at->absent & ((1u << slot) - 1u));
}
/* Input `nm` of node (or gradient context) n of op `name`, or NULL where it is absent. */
#define KN_INPUT(n, name, nm) kn_input_at((n)->in, &(n)->attrs, KN_SLOT(name, nm))
static inline kn_tensor *kn_input_at(kn_tensor *const *in, const kn_attrs *at, int slot) {
    int pos = kn_input_pos(at, slot);
    return pos < 0 ? NULL : in[pos];
}

/* One parameter of an op's signature: an input or an attribute. */
typedef enum kn_param_kind {
    KN_PARAM_IN,   /* a required input */
    KN_PARAM_OPT,  /* an optional input (absent: the attrs' `absent` bit of its slot) */
    KN_PARAM_INS,  /* any number of inputs, from this slot on (last) */
    KN_PARAM_I64,
    KN_PARAM_F64,
    KN_PARAM_BOOL,
    KN_PARAM_DIMS,
    KN_PARAM_PAIR,
    KN_PARAM_CUSTOM,
} kn_param_kind;

typedef struct kn_param {
    const char *name; /* NULL ends an op's list */
    kn_param_kind kind;
    uint16_t offset; /* attributes: the offset in the op's kn_attrs_<op> */
} kn_param;

/* What a shape and dtype rule finds: each output's shape and dtype, and the dtype the inputs
 * are brought to first (elementwise ops compute in it; bool outputs differ from it). */
typedef struct kn_op_infer {
    int n_out;
    kn_shape shape[KN_NODE_MAX_OUT];
    kn_dtype out[KN_NODE_MAX_OUT];
    uint8_t in_place[KN_NODE_MAX_OUT]; /* 1 + the input an output is (updated in place); 0: fresh */
    kn_dtype compute;
} kn_op_infer;
/* An op's shape and dtype rule, over its (already checked non-NULL) inputs, packed as a node
 * holds them, and its attributes: KN_OK with every output in r (which starts empty), or an
 * error code with what does not fit written to why (the caller names the op and inputs).
 * A rule alone rejects every shape and attribute an API function would reject, so a graph
 * can be checked and planned without running API functions. Rules are in ops/op_rules.h. */
typedef kn_status (*kn_infer_fn)(kn_op_id op, int n_in, kn_tensor *const *in, const kn_attrs *at, kn_op_infer *r,
                                 char *why, size_t why_size);

typedef struct kn_op_def {
    const char *name;
    kn_op_kind kind;
    uint32_t dtypes;  /* input dtypes the op accepts (KN_DT masks) */
    uint32_t flags;
    const char *expr; /* elementwise ops: the scalar expression (x, y, z inputs; a, b attributes) */
    kn_infer_fn infer; /* the shape and dtype rule (ops/op_rules.h). NULL: "value-dependent, the
                        * kernel allocates" (KN_OPF_SYNC ops whose output shape depends on values:
                        * masked_select, nonzero, unique, one_hot), and `fused`, whose outputs are
                        * those of the ruled nodes it was made from (its kn_fused_launch says) */
} kn_op_def;

extern const kn_op_def kn_op_table[KN_OP_COUNT];

static inline const char *kn_op_name(kn_op_id op) { return kn_op_table[op].name; }
/* The op with this name, or -1. */
int kn_op_lookup(const char *name);

/* The op's signature from its entry: inputs, then attributes, ended by a NULL name. */
const kn_param *kn_op_params(kn_op_id op);
/* How many input slots the entry declares (a KN_INS counts one). */
int kn_op_input_slots(kn_op_id op);
/* FLOPs of one call of op on inputs in[0..n_in) with first output out0 (ops/op_flops.c): 2 per
 * multiply-add for products (matmul, convolutions, attention), one per element of the larger
 * of the first input and the first output otherwise. A new op whose cost is not that adds its
 * case there. */
double kn_op_flops(kn_op_id op, kn_tensor *const *in, int n_in, const kn_tensor *out0);

/* Generated from the signatures (ops/op_attrs.c). Hash and equality cover the declared
 * attributes and the absent inputs only (doubles by their bits, dims up to their count). */
uint64_t kn_attrs_hash(kn_op_id op, const kn_attrs *a);
bool kn_attrs_equal(kn_op_id op, const kn_attrs *a, const kn_attrs *b);
/* "dim=1, keepdim=true" into buf (truncated to size); returns the length it wanted. */
size_t kn_attrs_format(kn_op_id op, const kn_attrs *a, char *buf, size_t size);
/* Whether every double attribute is finite. */
bool kn_attrs_finite(kn_op_id op, const kn_attrs *a);
/* The signature text is kiln/optable.h's kn_op_signature (ops/op_attrs.c). */
/* The scalar-expression attributes a and b of an elementwise op (0 where it has none), and
 * setting them: what the code generators and kn_elementwise use for every such op. */
void kn_op_scalars(kn_op_id op, const kn_attrs *at, double ab[2]);
void kn_op_set_scalars(kn_op_id op, kn_attrs *at, double a, double b);

#endif
