/* The graph's values: a node is one recorded op (its inputs, attributes and outputs), the
 * unit every mode schedules and every backend executes. Its outputs are the values; in a
 * mode that defers storage they have none until the node is launched (core's deferred
 * storage). Nodes are structurally hashed here, so that whatever asks "is this the same
 * computation?" (fused mode's common subexpressions today, the compiled mode's graph keys
 * next) asks it in one place. */
#ifndef KILN_GRAPH_NODE_H
#define KILN_GRAPH_NODE_H

#include <stdbool.h>
#include <stdint.h>

#include "core/task.h"
#include "ops/op_table.h"

/* It holds a reference to each input and output until it has run. */
typedef struct kn_node {
    kn_op_id op;
    int n_in, n_out;
    kn_tensor **in;                     /* in_inline, or a malloc'd array for many inputs */
    kn_tensor *out[KN_NODE_MAX_OUT];
    kn_attrs attrs;
    uint64_t rng_seed, rng_offset;      /* KN_OPF_RANDOM ops: the generator state they draw from */
    uint8_t fresh_out;                  /* bit i: out[i] was made for this op (else written in place) */
    void *aux;                          /* malloc'd launch data of a generated kernel (freed with the node) */
    char *origin;                       /* malloc'd: where it was recorded, kept only for a later check
                                         * (the shadow on a compiled program, exec/compiled_shadow.h) */
    struct kn_stream *stream;           /* where it runs: its device's current stream when recorded */
    kn_task task;                       /* how exec hands it to the stream (exec/dispatch.c) */
    kn_tensor *in_inline[KN_NODE_MAX_IN];
} kn_node;

/* A zeroed node of op with room for n_in inputs (NULL with an error when out of memory). */
kn_node *kn_node_make(kn_op_id op, int n_in);
/* Frees a node and drops the references it still holds (NULL slots are skipped). */
void kn_node_free(kn_node *n);

/* The dtype that selects a node's kernel: its first input's, else its first output's. */
kn_dtype kn_node_key_dtype(const kn_node *n);
/* Error text for the node's inputs: "f32[2, 3], i64[4]". */
void kn_op_describe_inputs(const kn_node *n, char *buf, size_t size);
/* Its FLOPs by the op's formula (kn_op_flops). */
double kn_node_flops(const kn_node *n);

/* Whether the node computes a function of its inputs' values and attributes alone, into
 * outputs made for it: not random, not value-dependent, no in-place write, not a custom op
 * (whose kernel kiln cannot see), not a generated kernel. Only such nodes may stand in for
 * one another. */
bool kn_node_is_pure(const kn_node *n);
/* The structural hash: op, attributes (kn_attrs_hash), each input's value (storage and view:
 * offset, shape, strides, dtype) and each output's dtype and shape. Equal for nodes that
 * kn_node_same calls the same. */
uint64_t kn_node_hash(const kn_node *n);
/* Whether a and b compute the same values: the same op and attributes over the same input
 * views, with outputs of the same dtypes and shapes. The caller answers whether the inputs'
 * storages were written between the two (an in-place write keeps the storage). */
bool kn_node_same(const kn_node *a, const kn_node *b);

#endif
