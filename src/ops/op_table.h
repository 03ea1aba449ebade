/* THE op table (DESIGN.md): one entry per op, from the X-macro lists in defs/. Every
 * mode, backend, code generator and `kiln ops` reads ops from here. */
#ifndef KILN_OPS_OP_TABLE_H
#define KILN_OPS_OP_TABLE_H

#include <stdint.h>

#include "core/task.h"
#include "core/tensor_impl.h"

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
};

typedef enum kn_op_id {
#define KN_OP(name, kind, dtypes, flags, expr) KN_OP_##name,
#include "ops/defs/all.def"
#undef KN_OP
    KN_OP_COUNT
} kn_op_id;

#define KN_NODE_MAX_IN 6
#define KN_NODE_MAX_OUT 8

/* Attributes of a node. Each op's API function documents which slots it uses. */
typedef struct kn_attrs {
    int64_t i[16];
    double f[8];
    kn_shape s[2];
} kn_attrs;

/* One recorded op: the unit the modes schedule and the backends execute. It holds a
 * reference to each input and output until it has run. */
typedef struct kn_node {
    kn_op_id op;
    int n_in, n_out;
    kn_tensor **in;                     /* in_inline, or a malloc'd array for many inputs */
    kn_tensor *out[KN_NODE_MAX_OUT];
    kn_attrs attrs;
    uint64_t rng_seed, rng_offset;      /* KN_OPF_RANDOM ops: the generator state they draw from */
    uint8_t fresh_out;                  /* bit i: out[i] was made for this op (else written in place) */
    void *aux;                          /* malloc'd launch data of a generated kernel (freed with the node) */
    struct kn_stream *stream;           /* where it runs: its device's current stream when recorded */
    kn_task task;                       /* how exec hands it to the stream (exec/dispatch.c) */
    kn_tensor *in_inline[KN_NODE_MAX_IN];
} kn_node;

typedef struct kn_op_def {
    const char *name;
    kn_op_kind kind;
    uint32_t dtypes;  /* input dtypes the op accepts (KN_DT masks) */
    uint32_t flags;
    const char *expr; /* elementwise ops: the scalar expression (x, y, z inputs; a, b attributes) */
} kn_op_def;

extern const kn_op_def kn_op_table[KN_OP_COUNT];

static inline const char *kn_op_name(kn_op_id op) { return kn_op_table[op].name; }
/* The op with this name, or -1. */
int kn_op_lookup(const char *name);

#endif
