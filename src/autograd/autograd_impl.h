/* Autograd internals: the per-tensor state, backward nodes, and how history is recorded: an
 * interposer on the dispatcher (exec/interpose.h) and the view functions' calls. */
#ifndef KILN_AUTOGRAD_AUTOGRAD_IMPL_H
#define KILN_AUTOGRAD_AUTOGRAD_IMPL_H

#include <stdatomic.h>

#include "graph/node.h"
#include "kiln/autograd.h"
#include "ops/grad.h"

typedef struct kn_ag_node kn_ag_node;

/* A tensor's autograd state, shared by the handles kn_retain makes. */
typedef struct kn_ag_meta {
    atomic_int refs;
    bool requires_grad;
    kn_ag_node *grad_fn; /* the node that made this tensor (one reference); NULL for leaves */
    int out_index;       /* which output of grad_fn */
    kn_tensor *grad;     /* leaves: the accumulated gradient (an unscoped handle) */
} kn_ag_meta;

/* One recorded op (or view) in the backward graph. */
struct kn_ag_node {
    atomic_int refs;
    bool is_view;
    kn_op_id op;
    kn_view_rec view;
    kn_attrs attrs;
    uint64_t rng_seed, rng_offset;
    int n_in, n_out;
    kn_ag_meta **next;       /* n_in: the inputs' state, NULL where no gradient is wanted */
    kn_tensor **saved_in;    /* n_in: detached handles, NULL where not saved */
    unsigned *saved_in_version;
    kn_shape *in_shape;
    kn_dtype *in_dtype;
    kn_tensor *saved_out[KN_NODE_MAX_OUT];
    unsigned saved_out_version[KN_NODE_MAX_OUT];
    kn_shape out_shape[KN_NODE_MAX_OUT];
    kn_dtype out_dtype[KN_NODE_MAX_OUT];
    uint8_t fresh_out;       /* outputs made by the op (in-place outputs get no history) */
    bool released;           /* saved tensors freed by a backward without retain_graph */
    /* Scratch of one backward pass. */
    int pending;
    bool queued;
    kn_tensor *gbuf[KN_NODE_MAX_OUT];
    uint8_t gbuf_own;        /* bit j: gbuf[j] is memory backward made for it alone (writable) */
};

kn_ag_meta *kn_ag_meta_share(kn_ag_meta *m);  /* another reference (NULL passes through) */
void kn_ag_meta_release(kn_ag_meta *m);
void kn_ag_node_release(kn_ag_node *n);
void kn_ag_node_free_saved(kn_ag_node *n);
void kn_ag_count_node(int delta);

/* Whether an op with these inputs records history now (grad mode on, an input needs grad). */
bool kn_ag_wants(kn_tensor *const *in, int n_in);
/* Builds the backward node of op node n before it is submitted (the interposer's record) (saving what its formula
 * reads). Fails, with the error set, for an op without a gradient formula or an in-place
 * write the graph cannot express. *out_node is NULL when nothing is to be recorded. */
kn_status kn_ag_record_op(const kn_node *n, kn_ag_node **out_node);
/* After a successful submit: outputs become results of node (which is consumed; the
 * interposer's done). */
void kn_ag_attach(kn_ag_node *node, kn_tensor *const *outs, int n_out);
/* A view of src: records its geometry when src needs grad. */
kn_status kn_ag_record_view(kn_tensor *src, kn_tensor *view, const kn_view_rec *rec);

/* The dispatcher's interposer (record.c); installed with the tensor hooks (state.c). */
struct kn_interposer;
extern const struct kn_interposer kn_ag_interposer;

/* A handle of t's values with no autograd state and no scope (what nodes save). */
kn_tensor *kn_ag_detached(kn_tensor *t);

#endif
