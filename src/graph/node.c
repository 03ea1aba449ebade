/* Nodes: their memory, their description in errors, and their structural identity. */
#include "graph/node.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/hash.h"
#include "core/recycler.h"

static kn_recycler nodes = KN_RECYCLER_INIT(2, kn_node);

kn_node *kn_node_make(kn_op_id op, int n_in) {
    kn_node *n = kn_recycler_get(&nodes);
    if (!n) {
        kn_error(KN_ERR_OOM, "%s: out of host memory recording the op", kn_op_name(op));
        return NULL;
    }
    memset(n, 0, sizeof *n);
    n->op = op;
    n->in = n_in <= KN_NODE_MAX_IN ? n->in_inline : calloc((size_t)n_in, sizeof *n->in);
    if (!n->in) {
        kn_recycler_put(&nodes, n);
        kn_error(KN_ERR_OOM, "%s: out of host memory recording %d inputs", kn_op_name(op), n_in);
        return NULL;
    }
    n->n_in = n_in;
    return n;
}

void kn_node_free(kn_node *n) {
    if (!n) return;
    for (int i = 0; i < n->n_in; i++) kn_tensor_decref(n->in[i]);
    for (int i = 0; i < n->n_out; i++) kn_tensor_decref(n->out[i]);
    if (n->in != n->in_inline) free(n->in);
    free(n->aux);
    free(n->origin);
    kn_recycler_put(&nodes, n);
}

kn_dtype kn_node_key_dtype(const kn_node *n) {
    if (n->n_in) return n->in[0]->dtype;
    return n->n_out ? n->out[0]->dtype : KN_F32;
}

void kn_op_describe_inputs(const kn_node *n, char *buf, size_t size) {
    size_t len = 0;
    buf[0] = '\0';
    for (int i = 0; i < n->n_in && len + 1 < size; i++) {
        char d[96];
        len += (size_t)snprintf(buf + len, size - len, i ? ", %s" : "%s", kn_describe(n->in[i], d, sizeof d));
    }
}

double kn_node_flops(const kn_node *n) { return kn_op_flops(n->op, n->in, n->n_in, n->n_out ? n->out[0] : NULL); }

bool kn_node_is_pure(const kn_node *n) {
    const kn_op_def *def = &kn_op_table[n->op];
    return n->n_out > 0 && n->fresh_out == (uint8_t)((1u << n->n_out) - 1) && !n->aux && n->op != KN_OP_custom &&
           !(def->flags & (KN_OPF_RANDOM | KN_OPF_SYNC));
}

static uint64_t hash_geometry(uint64_t h, const kn_tensor *t, bool with_strides) {
    h = kn_hash_bytes(h, &t->dtype, sizeof t->dtype);
    h = kn_hash_bytes(h, &t->ndim, sizeof t->ndim);
    h = kn_hash_bytes(h, t->shape, (size_t)t->ndim * sizeof t->shape[0]);
    return with_strides ? kn_hash_bytes(h, t->stride, (size_t)t->ndim * sizeof t->stride[0]) : h;
}

uint64_t kn_node_hash(const kn_node *n) {
    uint64_t h = kn_attrs_hash(n->op, &n->attrs);
    h = kn_hash_bytes(h, &n->op, sizeof n->op);
    for (int i = 0; i < n->n_in; i++) {
        const kn_tensor *t = n->in[i];
        h = kn_hash_bytes(h, &t->storage, sizeof t->storage);
        h = kn_hash_bytes(h, &t->offset, sizeof t->offset);
        h = hash_geometry(h, t, true);
    }
    for (int i = 0; i < n->n_out; i++) h = hash_geometry(h, n->out[i], false);
    return h;
}

static bool same_shape_and_dtype(const kn_tensor *a, const kn_tensor *b) {
    return a->dtype == b->dtype && a->ndim == b->ndim && !memcmp(a->shape, b->shape, (size_t)a->ndim * sizeof a->shape[0]);
}

bool kn_node_same(const kn_node *a, const kn_node *b) {
    if (a->op != b->op || a->n_in != b->n_in || a->n_out != b->n_out || a->rng_seed != b->rng_seed ||
        a->rng_offset != b->rng_offset || !kn_attrs_equal(a->op, &a->attrs, &b->attrs))
        return false;
    for (int i = 0; i < a->n_in; i++)
        if (!kn_tensor_same_view(a->in[i], b->in[i])) return false;
    for (int i = 0; i < a->n_out; i++)
        if (!same_shape_and_dtype(a->out[i], b->out[i])) return false;
    return true;
}
