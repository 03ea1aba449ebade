/* A program's structural key (graph/program_key.h). */
#include "graph/program_key.h"

#include "core/backend_device.h"
#include "core/hash.h"
#include "core/tensor_impl.h"
#include "graph/ptr_map.h"

enum { FROM_OUTSIDE = -1, STEP_INPUT = -2 };

/* Where t's storage comes from: (node << 4 | output) of its producer here, else STEP_INPUT -
 * position, else FROM_OUTSIDE. */
static int64_t origin(const kn_ptr_map *made, const kn_tensor *t, kn_tensor *const *inputs, int n_inputs) {
    int at = kn_ptr_map_get(made, t->storage);
    if (at >= 0) return at;
    for (int i = 0; i < n_inputs; i++)
        if (inputs[i]->storage == t->storage) return (int64_t)STEP_INPUT - i;
    return FROM_OUTSIDE;
}

static uint64_t hash_value(uint64_t h, const kn_tensor *t) {
    int64_t what[2] = {t->dtype, t->ndim};
    return kn_hash_bytes(h, what, sizeof what);
}

/* The attributes that choose code rather than feed it: booleans, and how many dims a dims
 * attribute lists (their values, like every integer, are launch arguments). */
static uint64_t hash_attrs(uint64_t h, const kn_node *x) {
    h = kn_hash_bytes(h, &x->attrs.absent, sizeof x->attrs.absent);
    const char *base = (const char *)&x->attrs.copy;
    for (const kn_param *p = kn_op_params(x->op); p->name; p++) {
        if (p->kind == KN_PARAM_BOOL) h = kn_hash_bytes(h, base + p->offset, sizeof(bool));
        else if (p->kind == KN_PARAM_DIMS) h = kn_hash_bytes(h, &((const kn_shape *)(base + p->offset))->n, sizeof(int));
    }
    return h;
}

uint64_t kn_program_key(kn_node *const *nodes, int n, kn_tensor *const *inputs, int n_inputs) {
    kn_ptr_map made = {0};
    int outputs = 0;
    for (int j = 0; j < n; j++) outputs += nodes[j] ? nodes[j]->n_out : 0;
    if (!kn_ptr_map_init(&made, (size_t)outputs)) {
        kn_ptr_map_free(&made);
        return UINT64_MAX;
    }
    uint64_t h = kn_hash_bytes(KN_HASH_SEED, &n, sizeof n);
    int j_here = 0; /* node numbers without the NULL slots */
    for (int j = 0; j < n; j++) {
        const kn_node *x = nodes[j];
        if (!x) continue;
        int64_t head[5] = {x->op, x->n_in, x->n_out, x->fresh_out, x->stream ? (int64_t)x->stream->device.type : -1};
        h = hash_attrs(kn_hash_bytes(h, head, sizeof head), x);
        for (int i = 0; i < x->n_in; i++) {
            int64_t from = origin(&made, x->in[i], inputs, n_inputs);
            h = hash_value(kn_hash_bytes(h, &from, sizeof from), x->in[i]);
        }
        for (int o = 0; o < x->n_out; o++) {
            if (!(x->fresh_out & (1u << o))) { /* written in place: which value it writes */
                int64_t into = origin(&made, x->out[o], inputs, n_inputs);
                h = kn_hash_bytes(h, &into, sizeof into);
            } else if (kn_ptr_map_get(&made, x->out[o]->storage) < 0) {
                *kn_ptr_map_at(&made, x->out[o]->storage, 0) = j_here << 4 | o;
            }
            h = hash_value(h, x->out[o]);
        }
        j_here++;
    }
    kn_ptr_map_free(&made);
    return h == UINT64_MAX ? h - 1 : h;
}
