/* The backward engine: walks the recorded graph from a root in reverse topological order,
 * calling each node's formula from the op table and adding the results into leaves. */
#include <stdlib.h>
#include <string.h>

#include "autograd/autograd_impl.h"
#include "core/error.h"
#include "core/tensor_impl.h"
#include "kiln/autocast.h"
#include "kiln/ops.h"
#include "ops/custom_registry.h"

typedef struct node_list {
    kn_ag_node **items;
    int64_t count, cap;
} node_list;

static bool list_push(node_list *l, kn_ag_node *n) {
    if (l->count == l->cap) {
        int64_t cap = l->cap ? l->cap * 2 : 256;
        kn_ag_node **items = realloc(l->items, sizeof *items * (size_t)cap);
        if (!items) return false;
        l->items = items;
        l->cap = cap;
    }
    l->items[l->count++] = n;
    return true;
}

static const char *node_name(const kn_ag_node *n) {
    return n->is_view ? "view" : kn_op_name_in(n->op, &n->attrs);
}

/* Every node reachable from root, each with `pending` = the number of edges into it. */
static kn_status collect(kn_ag_node *root, node_list *all) {
    node_list stack = {0};
    kn_status st = KN_OK;
    root->queued = true;
    if (!list_push(&stack, root) || !list_push(all, root)) st = KN_ERR_OOM;
    while (st == KN_OK && stack.count) {
        kn_ag_node *n = stack.items[--stack.count];
        for (int i = 0; i < n->n_in; i++) {
            kn_ag_node *next = n->next[i] ? n->next[i]->grad_fn : NULL;
            if (!next) continue;
            next->pending++;
            if (next->queued) continue;
            next->queued = true;
            if (!list_push(&stack, next) || !list_push(all, next)) st = KN_ERR_OOM;
        }
    }
    free(stack.items);
    return st == KN_OK ? KN_OK : kn_error(KN_ERR_OOM, "backward: out of host memory walking the graph");
}

static bool same_shape(kn_shape a, kn_shape b) {
    if (a.n != b.n) return false;
    for (int d = 0; d < a.n; d++)
        if (a.v[d] != b.v[d]) return false;
    return true;
}

/* The formula's result as the input's gradient: summed over broadcast dims, in its dtype. */
static kn_tensor *conform(kn_tensor *g, kn_shape shape, kn_dtype dtype) {
    if (!same_shape(kn_shape_of(g), shape)) g = kn_sum_to(g, shape);
    if (g && kn_dtype_of(g) != dtype) g = kn_cast(g, dtype);
    return g;
}

/* Adds g into *slot (an unscoped handle owned by the engine or a leaf). A leaf's first
 * gradient takes g over when it is contiguous and its memory is not already a leaf's .grad or
 * the caller's seed; otherwise it gets a copy, so two leaves never share one gradient buffer
 * and a seed stays the caller's. Other references to g's memory are backward's own (views made
 * on the way, the node still computing it on a stream), and backward never writes into a
 * gradient once made, so waiting for them to go would only cost a copy of every gradient. */
static kn_status accumulate(kn_tensor **slot, kn_tensor *g, bool own_storage) {
    kn_tensor *sum = g;
    if (*slot) sum = kn_add(*slot, g);
    else if (own_storage && (!kn_is_contiguous(g) || atomic_exchange(&g->storage->grad_taken, true))) sum = kn_clone(g);
    if (!sum) return kn_last_status();
    kn_tensor *kept = kn_ag_detached(sum);
    if (!kept) return kn_last_status();
    kn_tensor_decref(*slot);
    *slot = kept;
    return KN_OK;
}

/* accumulate into output j's gradient buffer of node n, noting whether that buffer is
 * backward's own: a sum it made, or g when g is (own). */
static kn_status accumulate_output(kn_ag_node *n, int j, kn_tensor *g, bool own) {
    if (n->gbuf[j]) own = true;
    kn_status st = accumulate(&n->gbuf[j], g, false);
    n->gbuf_own = (uint8_t)(own ? n->gbuf_own | 1u << j : n->gbuf_own & ~(1u << j));
    return st;
}

static kn_status check_saved(const kn_ag_node *n) {
    if (n->released)
        return kn_error(KN_ERR_ARG,
                        "backward through %s a second time: its saved tensors were freed by the first "
                        "backward; pass retain_graph to kn_backward_ex to keep them",
                        node_name(n));
    for (int i = 0; i < n->n_in; i++)
        if (n->saved_in[i] && atomic_load(&n->saved_in[i]->storage->version) != n->saved_in_version[i])
            return kn_error(KN_ERR_ARG,
                            "backward: input %d of %s was modified in place after the forward pass saved it "
                            "(an optimizer step or copy_ between forward and backward?)",
                            i, node_name(n));
    for (int j = 0; j < n->n_out; j++)
        if (n->saved_out[j] && atomic_load(&n->saved_out[j]->storage->version) != n->saved_out_version[j])
            return kn_error(KN_ERR_ARG, "backward: the output of %s was modified in place after it was saved",
                            node_name(n));
    return KN_OK;
}

/* Whether window view n can add its gradient straight into the buffer its input's node
 * already holds for it (backward's own memory of the right kind), instead of making a
 * zero-filled buffer the size of the input and adding that: the three narrows of a fused
 * qkv projection. */
static bool adds_into_input(const kn_ag_node *n) {
    kn_ag_meta *m = n->next[0];
    if (!n->is_view || !m || !m->grad_fn || !(m->grad_fn->gbuf_own & 1u << m->out_index) || !n->gbuf[0] ||
        !kn_grad_view_is_window(&n->view))
        return false;
    kn_tensor *buf = m->grad_fn->gbuf[m->out_index];
    return buf && kn_is_contiguous(buf) && kn_dtype_of(buf) == kn_dtype_of(n->gbuf[0]) &&
           kn_dtype_of(buf) == n->in_dtype[0] && same_shape(kn_shape_of(buf), n->in_shape[0]);
}

/* Runs one node's formula and routes its input gradients. */
static kn_status run_node(kn_ag_node *n, node_list *ready) {
    kn_status st = check_saved(n);
    if (st != KN_OK) return st;
    bool any = false;
    for (int j = 0; j < n->n_out; j++) any |= n->gbuf[j] != NULL;
    kn_tensor *gin_small[KN_NODE_MAX_IN] = {0};
    bool needs_small[KN_NODE_MAX_IN];
    kn_tensor **gin = n->n_in <= KN_NODE_MAX_IN ? gin_small : calloc((size_t)n->n_in, sizeof *gin);
    bool *needs = n->n_in <= KN_NODE_MAX_IN ? needs_small : calloc((size_t)n->n_in, sizeof *needs);
    if (!gin || !needs) st = kn_error(KN_ERR_OOM, "backward: out of host memory");
    bool fresh_window = false; /* gin[0] is a buffer made here, zero outside the window */
    kn_scope_push();
    if (st == KN_OK && any) {
        for (int i = 0; i < n->n_in; i++) needs[i] = n->next[i] != NULL;
        if (adds_into_input(n)) {
            kn_ag_meta *m = n->next[0];
            st = kn_grad_view_add_into(&n->view, m->grad_fn->gbuf[m->out_index], n->gbuf[0]);
        } else if (n->is_view) {
            gin[0] = kn_grad_view(&n->view, n->gbuf[0]);
            if (!gin[0]) st = kn_last_status();
            fresh_window = kn_grad_view_is_window(&n->view);
        } else {
            kn_grad_ctx c = {.op = n->op, .attrs = &n->attrs, .n_in = n->n_in, .n_out = n->n_out,
                             .in = n->saved_in, .out = n->saved_out, .in_shape = n->in_shape,
                             .in_dtype = n->in_dtype, .needs = needs, .rng_seed = n->rng_seed,
                             .rng_offset = n->rng_offset};
            st = kn_grad_table[n->op].fn(&c, n->gbuf, gin);
        }
        if (st != KN_OK && kn_last_status() == KN_OK) st = kn_error(st, "backward of %s failed", node_name(n));
    }
    for (int i = 0; st == KN_OK && i < n->n_in; i++) {
        kn_ag_meta *m = n->next[i];
        if (!m) continue;
        kn_tensor *g = any && gin[i] ? conform(gin[i], n->in_shape[i], n->in_dtype[i]) : NULL;
        if (any && gin[i] && !g) {
            st = kn_last_status();
            break;
        }
        if (!m->grad_fn) {
            if (g) st = accumulate(&m->grad, g, true);
            continue;
        }
        kn_ag_node *next = m->grad_fn;
        if (g) st = accumulate_output(next, m->out_index, g, fresh_window && g == gin[i]);
        if (--next->pending == 0 && !list_push(ready, next))
            st = kn_error(KN_ERR_OOM, "backward: out of host memory");
    }
    kn_scope_pop();
    if (gin != gin_small) free(gin);
    if (needs != needs_small) free(needs);
    if (st != KN_OK && kn_last_status() != KN_OK && !strstr(kn_last_error(), "backward"))
        kn_error(st, "backward of %s: %s", node_name(n), kn_last_error());
    return st;
}

static kn_status describe_root_error(const kn_tensor *root, const char *why) {
    char desc[96];
    return kn_error(KN_ERR_ARG, "backward(%s): %s", kn_describe(root, desc, sizeof desc), why);
}

kn_status kn_backward_ex(kn_tensor *root, kn_tensor *seed, bool retain_graph) {
    if (!root) {
        kn_error_null_input("backward", 0);
        return kn_last_status();
    }
    if (!kn_needs_grad(root))
        return describe_root_error(root, "the tensor does not require grad (no input of it was marked with "
                                         "kn_requires_grad, or it was computed with grad mode off)");
    if (!seed && kn_numel(root) != 1)
        return describe_root_error(root, "a seed gradient is needed for a root with more than one element");
    if (seed && (!same_shape(kn_shape_of(seed), kn_shape_of(root)) || kn_dtype_of(seed) != kn_dtype_of(root)))
        return describe_root_error(root, "the seed gradient's shape or dtype differs from the root's");
    /* Formulas run in the dtypes their forward ops ran in, as in PyTorch: autocast off. */
    if (kn_autocast_push(KN_F32) != KN_OK) return kn_last_status();
    bool was_enabled = kn_set_grad_enabled(false);
    kn_scope_push();
    kn_tensor *g = seed ? seed : kn_ones_like(root);
    if (seed) atomic_store(&seed->storage->grad_taken, true); /* the caller's: never a .grad as it is */
    kn_status st = g ? KN_OK : kn_last_status();
    kn_ag_meta *m = root->ag;
    node_list all = {0}, ready = {0};
    if (st == KN_OK && !m->grad_fn) {
        st = accumulate(&m->grad, g, true);
    } else if (st == KN_OK) {
        kn_ag_node *top = m->grad_fn;
        st = collect(top, &all);
        if (st == KN_OK) st = accumulate_output(top, m->out_index, g, false);
        if (st == KN_OK && !list_push(&ready, top)) st = kn_error(KN_ERR_OOM, "backward: out of host memory");
        while (st == KN_OK && ready.count) {
            kn_ag_node *n = ready.items[--ready.count];
            st = run_node(n, &ready);
            for (int j = 0; j < KN_NODE_MAX_OUT; j++) {
                kn_release(n->gbuf[j]);
                n->gbuf[j] = NULL;
            }
            n->gbuf_own = 0;
            if (st == KN_OK && !retain_graph) {
                kn_ag_node_free_saved(n);
                n->released = true;
            }
        }
        for (int64_t i = 0; i < all.count; i++) { /* reset scratch, also after an error */
            kn_ag_node *n = all.items[i];
            n->pending = 0;
            n->queued = false;
            for (int j = 0; j < KN_NODE_MAX_OUT; j++) {
                kn_release(n->gbuf[j]);
                n->gbuf[j] = NULL;
            }
            n->gbuf_own = 0;
        }
    }
    free(all.items);
    free(ready.items);
    kn_scope_pop();
    kn_set_grad_enabled(was_enabled);
    kn_autocast_pop();
    return st;
}

kn_status kn_backward(kn_tensor *loss) { return kn_backward_ex(loss, NULL, false); }
