/* Per-tensor autograd state, grad mode, the public accessors of autograd.h, and what autograd
 * installs below it: core's tensor-state hooks and the dispatcher's interposer. */
#include <stdlib.h>

#include "autograd/autograd_impl.h"
#include "core/error.h"
#include "core/hooks.h"
#include "core/tensor_impl.h"
#include "exec/interpose.h"
#include "kiln/ops.h"

static _Thread_local bool grad_disabled;
static _Thread_local int no_grad_depth;
static _Thread_local bool no_grad_saved[64];
static atomic_llong live_nodes;

bool kn_set_grad_enabled(bool enabled) {
    bool was = !grad_disabled;
    grad_disabled = !enabled;
    return was;
}

bool kn_is_grad_enabled(void) { return !grad_disabled; }

void kn_no_grad_push(void) {
    bool was = kn_set_grad_enabled(false);
    if (no_grad_depth < (int)(sizeof no_grad_saved / sizeof *no_grad_saved)) no_grad_saved[no_grad_depth] = was;
    no_grad_depth++;
}

void kn_no_grad_pop(void) {
    if (no_grad_depth == 0) return;
    no_grad_depth--;
    /* Beyond the saved depth every level was pushed with grad already off. */
    bool was = no_grad_depth < (int)(sizeof no_grad_saved / sizeof *no_grad_saved) ? no_grad_saved[no_grad_depth] : false;
    kn_set_grad_enabled(was);
}

int64_t kn_autograd_live_nodes(void) { return atomic_load(&live_nodes); }

void kn_ag_count_node(int delta) { atomic_fetch_add(&live_nodes, delta); }

kn_ag_meta *kn_ag_meta_share(kn_ag_meta *m) {
    if (m) atomic_fetch_add_explicit(&m->refs, 1, memory_order_relaxed);
    return m;
}

/* Frees a node's saved tensors (what backward without retain_graph drops early). */
void kn_ag_node_free_saved(kn_ag_node *n) {
    for (int i = 0; i < n->n_in; i++) {
        kn_tensor_decref(n->saved_in[i]);
        n->saved_in[i] = NULL;
    }
    for (int i = 0; i < n->n_out; i++) {
        kn_tensor_decref(n->saved_out[i]);
        n->saved_out[i] = NULL;
    }
    for (int i = 0; i < KN_NODE_MAX_OUT; i++) {
        kn_release(n->gbuf[i]);
        n->gbuf[i] = NULL;
    }
}

/* Releasing a node can release the metas it points to and, through them, older nodes: a
 * long history is a long chain, so the release walks it with an explicit stack rather than
 * recursion. */
typedef struct release_stack {
    kn_ag_node **items;
    int64_t count, cap;
} release_stack;

static void push_node(release_stack *s, kn_ag_node *n) {
    if (atomic_fetch_sub_explicit(&n->refs, 1, memory_order_acq_rel) != 1) return;
    if (s->count == s->cap) {
        int64_t cap = s->cap ? s->cap * 2 : 64;
        kn_ag_node **items = realloc(s->items, sizeof *items * (size_t)cap);
        if (!items) abort(); /* cannot unwind half-freed history; out of memory for 64 pointers */
        s->items = items;
        s->cap = cap;
    }
    s->items[s->count++] = n;
}

static void drop_meta(release_stack *s, kn_ag_meta *m) {
    if (!m || atomic_fetch_sub_explicit(&m->refs, 1, memory_order_acq_rel) != 1) return;
    kn_tensor_decref(m->grad);
    if (m->grad_fn) push_node(s, m->grad_fn);
    free(m);
}

static void drain(release_stack *s) {
    while (s->count) {
        kn_ag_node *n = s->items[--s->count];
        kn_ag_node_free_saved(n);
        for (int i = 0; i < n->n_in; i++) drop_meta(s, n->next[i]);
        free(n);
        kn_ag_count_node(-1);
    }
    free(s->items);
}

void kn_ag_meta_release(kn_ag_meta *m) {
    release_stack s = {0};
    drop_meta(&s, m);
    drain(&s);
}

void kn_ag_node_release(kn_ag_node *n) {
    if (!n) return;
    release_stack s = {0};
    push_node(&s, n);
    drain(&s);
}

/* Before main: this file is linked whenever a tensor can have autograd state (it makes the
 * leaves' state, and recording calls its grad mode), so history is recorded from the first op. */
__attribute__((constructor)) static void install(void) {
    kn_hooks_install_tensor_state(kn_ag_meta_share, kn_ag_meta_release);
    (void)kn_interposer_register(&kn_ag_interposer); /* fails only on a full list: exec's hold 2 of 8 */
}

kn_tensor *kn_ag_detached(kn_tensor *t) { return kn_tensor_view_of(t, t->shape, t->ndim, t->stride, t->offset); }

/* ---- public accessors ---------------------------------------------------------------------- */

static bool check_tensor(const char *op, const kn_tensor *t) {
    if (t) return true;
    kn_error_null_input(op, 0);
    return false;
}

kn_tensor *kn_requires_grad(kn_tensor *t, bool requires) {
    if (!check_tensor("requires_grad", t)) return NULL;
    char desc[96];
    if (t->ag && t->ag->grad_fn)
        return kn_error_null(KN_ERR_ARG,
                             "requires_grad(%s): the tensor is the result of an op (not a leaf); mark the "
                             "tensors it was computed from, or kn_detach it first",
                             kn_describe(t, desc, sizeof desc));
    if (requires && !kn_dtype_is_float(t->dtype))
        return kn_error_null(KN_ERR_DTYPE, "requires_grad(%s): only float tensors can require gradients",
                             kn_describe(t, desc, sizeof desc));
    if (!t->ag) {
        if (!requires) return t;
        t->ag = calloc(1, sizeof *t->ag);
        if (!t->ag) return kn_error_null(KN_ERR_OOM, "requires_grad: out of host memory");
        atomic_init(&t->ag->refs, 1);
    }
    t->ag->requires_grad = requires;
    return t;
}

bool kn_needs_grad(const kn_tensor *t) { return t && t->ag && t->ag->requires_grad; }

bool kn_is_leaf(const kn_tensor *t) { return t && !(t->ag && t->ag->grad_fn); }

kn_tensor *kn_grad(kn_tensor *t) {
    if (!check_tensor("grad", t)) return NULL;
    if (!t->ag || !t->ag->grad) return NULL;
    return kn_scope_adopt(kn_retain(t->ag->grad));
}

kn_status kn_set_grad(kn_tensor *t, kn_tensor *g) {
    if (!check_tensor("set_grad", t)) return kn_last_status();
    char desc[96], gdesc[96];
    if (g) {
        bool same = g->dtype == t->dtype && g->ndim == t->ndim;
        for (int d = 0; same && d < t->ndim; d++) same = g->shape[d] == t->shape[d];
        if (!same)
            return kn_error(KN_ERR_SHAPE, "set_grad(%s): the gradient is %s; it must match the tensor",
                            kn_describe(t, desc, sizeof desc), kn_describe(g, gdesc, sizeof gdesc));
        if (g->storage->device.type != t->storage->device.type || g->storage->device.index != t->storage->device.index)
            return kn_error(KN_ERR_DEVICE, "set_grad(%s): the gradient is on another device",
                            kn_describe(t, desc, sizeof desc));
    }
    if (!t->ag) {
        if (!g) return KN_OK;
        if (!kn_requires_grad(t, true)) return kn_last_status();
    }
    kn_tensor *old = t->ag->grad;
    t->ag->grad = g ? kn_ag_detached(g) : NULL;
    kn_tensor_decref(old);
    return KN_OK;
}

kn_status kn_zero_grad(kn_tensor *t) { return kn_set_grad(t, NULL); }

kn_tensor *kn_detach(kn_tensor *t) {
    if (!check_tensor("detach", t)) return NULL;
    return kn_scope_adopt(kn_ag_detached(t));
}
