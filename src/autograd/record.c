/* Recording history: autograd's interposer sees every op the dispatcher records and every
 * view the view functions make. */
#include <stdlib.h>
#include <string.h>

#include "autograd/autograd_impl.h"
#include "core/error.h"
#include "core/tensor_impl.h"
#include "exec/dispatch.h"
#include "exec/interpose.h"
#include "ops/custom_registry.h"

bool kn_ag_wants(kn_tensor *const *in, int n_in) {
    if (!kn_is_grad_enabled()) return false;
    for (int i = 0; i < n_in; i++)
        if (in[i]->ag && in[i]->ag->requires_grad) return true;
    return false;
}

static kn_ag_node *node_new(int n_in) {
    /* One block: the node, then its per-input arrays. */
    size_t size = sizeof(kn_ag_node) +
                  (size_t)n_in * (sizeof(kn_ag_meta *) + sizeof(kn_tensor *) + sizeof(kn_shape) + sizeof(unsigned) +
                                  sizeof(kn_dtype));
    kn_ag_node *n = calloc(1, size);
    if (!n) return kn_error_null(KN_ERR_OOM, "autograd: out of host memory recording a backward node");
    atomic_init(&n->refs, 1);
    n->n_in = n_in;
    char *p = (char *)(n + 1);
    n->next = (kn_ag_meta **)p;
    p += (size_t)n_in * sizeof(kn_ag_meta *);
    n->saved_in = (kn_tensor **)p;
    p += (size_t)n_in * sizeof(kn_tensor *);
    n->in_shape = (kn_shape *)p;
    p += (size_t)n_in * sizeof(kn_shape);
    n->saved_in_version = (unsigned *)p;
    p += (size_t)n_in * sizeof(unsigned);
    n->in_dtype = (kn_dtype *)p;
    kn_ag_count_node(1);
    return n;
}

static void take_input(kn_ag_node *g, int i, kn_tensor *t, bool save) {
    g->in_shape[i] = kn_shape_of(t);
    g->in_dtype[i] = t->dtype;
    if (t->ag && t->ag->requires_grad) g->next[i] = kn_ag_meta_share(t->ag);
    if (save) {
        g->saved_in[i] = kn_ag_detached(t);
        g->saved_in_version[i] = atomic_load(&t->storage->version);
    }
}

/* In-place writes: bump the storage version (so stale saved tensors are caught in backward)
 * and refuse writing over a tensor that requires grad while history is being recorded, except
 * by an op that is never recorded (KN_OPF_NO_GRAD: the optimizers' updates). */
static kn_status note_in_place(const kn_node *n) {
    bool refuse = kn_is_grad_enabled() && !(kn_op_table[n->op].flags & KN_OPF_NO_GRAD);
    for (int j = 0; j < n->n_out; j++) {
        if (n->fresh_out & (1u << j)) continue;
        kn_tensor *o = n->out[j];
        atomic_fetch_add(&o->storage->version, 1);
        if (refuse && o->ag && o->ag->requires_grad) {
            char inputs[320], desc[96];
            kn_op_describe_inputs(n, inputs, sizeof inputs);
            return kn_error(KN_ERR_ARG,
                            "%s(%s): writes in place into %s, which requires grad; do it under "
                            "kn_no_grad_push (as optimizers do) or on a kn_detach'ed tensor",
                            kn_op_name_in(n->op, &n->attrs), inputs, kn_describe(o, desc, sizeof desc));
        }
    }
    return KN_OK;
}

/* Custom ops share one table entry; their gradient is the registered op's backward. One with
 * only integer or bool outputs has no gradient to carry (*skip); one without backward refuses
 * history. */
static kn_status check_custom(const kn_node *n, bool *skip) {
    bool float_out = false;
    for (int j = 0; j < n->n_out; j++) float_out |= kn_dtype_is_float(n->out[j]->dtype);
    *skip = !float_out;
    const kn_custom_entry *e = kn_custom_of(&n->attrs);
    if (!float_out || e->def.backward) return KN_OK;
    char inputs[320];
    kn_op_describe_inputs(n, inputs, sizeof inputs);
    return kn_error(KN_ERR_UNSUPPORTED,
                    "%s(%s): custom op %s has no gradient (it was registered without backward); run it under "
                    "kn_no_grad_push or on kn_detach'ed inputs",
                    e->def.name, inputs, e->def.name);
}

kn_status kn_ag_record_op(const kn_node *n, kn_ag_node **out_node) {
    *out_node = NULL;
    kn_status st = note_in_place(n);
    if (st != KN_OK || (kn_op_table[n->op].flags & KN_OPF_NO_GRAD) || !kn_ag_wants(n->in, n->n_in)) return st;
    bool skip = false;
    if (n->op == KN_OP_custom && ((st = check_custom(n, &skip)) != KN_OK || skip)) return st;
    const kn_grad_def *def = &kn_grad_table[n->op];
    if (def->nondiff) return KN_OK;
    char inputs[320];
    if (!def->fn) {
        kn_op_describe_inputs(n, inputs, sizeof inputs);
        return kn_error(KN_ERR_UNSUPPORTED,
                        "%s(%s): kiln has no gradient formula for %s; run it under kn_no_grad_push or on "
                        "kn_detach'ed inputs",
                        kn_op_name_in(n->op, &n->attrs), inputs, kn_op_name_in(n->op, &n->attrs));
    }
    bool any_fresh = false;
    for (int j = 0; j < n->n_out; j++)
        any_fresh |= (n->fresh_out & (1u << j)) && kn_dtype_is_float(n->out[j]->dtype);
    if (!any_fresh) {
        kn_op_describe_inputs(n, inputs, sizeof inputs);
        return kn_error(KN_ERR_ARG,
                        "%s(%s): writes a result that requires grad into an existing tensor, which autograd "
                        "cannot track; use the op's returned tensor instead, or do it under kn_no_grad_push",
                        kn_op_name_in(n->op, &n->attrs), inputs);
    }
    kn_ag_node *g = node_new(n->n_in);
    if (!g) return kn_last_status();
    g->op = n->op;
    g->attrs = n->attrs;
    g->rng_seed = n->rng_seed;
    g->rng_offset = n->rng_offset;
    for (int i = 0; i < n->n_in; i++) {
        bool save = (def->saves & KN_SAVE_ALL_IN) == KN_SAVE_ALL_IN || (i < 24 && (def->saves & KN_SAVE_IN(i)));
        take_input(g, i, n->in[i], save);
    }
    g->n_out = n->n_out;
    for (int j = 0; j < n->n_out; j++) {
        kn_tensor *o = n->out[j];
        g->out_shape[j] = kn_shape_of(o);
        g->out_dtype[j] = o->dtype;
        if (def->saves & KN_SAVE_OUT(j)) {
            g->saved_out[j] = kn_ag_detached(o);
            g->saved_out_version[j] = atomic_load(&o->storage->version);
        }
    }
    g->fresh_out = n->fresh_out;
    *out_node = g;
    return KN_OK;
}

static kn_status attach_one(kn_ag_node *g, kn_tensor *t, int index) {
    kn_ag_meta *m = calloc(1, sizeof *m);
    if (!m) return kn_error(KN_ERR_OOM, "autograd: out of host memory");
    atomic_init(&m->refs, 1);
    m->requires_grad = true;
    atomic_fetch_add_explicit(&g->refs, 1, memory_order_relaxed);
    m->grad_fn = g;
    m->out_index = index;
    t->ag = m;
    return KN_OK;
}

void kn_ag_attach(kn_ag_node *g, kn_tensor *const *outs, int n_out) {
    if (!g) return;
    for (int j = 0; j < n_out; j++)
        if (outs[j] && (g->fresh_out & (1u << j)) && kn_dtype_is_float(outs[j]->dtype) && !outs[j]->ag)
            attach_one(g, outs[j], j);
    kn_ag_node_release(g); /* the outputs hold it now */
}

kn_status kn_ag_record_view(kn_tensor *src, kn_tensor *view, const kn_view_rec *rec) {
    if (!view || !kn_ag_wants(&src, 1)) return KN_OK;
    kn_ag_node *g = node_new(1);
    if (!g) return kn_last_status();
    g->is_view = true;
    g->view = *rec;
    g->view.in_shape = kn_shape_of(src);
    if (rec->kind == KN_VIEW_STORAGE) {
        g->view.in = (kn_view_geom){kn_shape_of(src), kn_strides_of(src), src->offset};
        g->view.storage_numel = (int64_t)(src->storage->bytes / kn_dtype_size(src->dtype));
    }
    take_input(g, 0, src, false);
    g->n_out = 1;
    g->out_shape[0] = kn_shape_of(view);
    g->out_dtype[0] = view->dtype;
    g->fresh_out = 1;
    kn_ag_attach(g, &view, 1);
    return KN_OK;
}

static kn_status interpose_record(const kn_node *n, const kn_backend *b, void **state) {
    (void)b;
    return kn_ag_record_op(n, (kn_ag_node **)state);
}

static kn_status interpose_done(void *state, kn_status st, kn_tensor *const *outs, int n_out) {
    if (st == KN_OK) kn_ag_attach(state, outs, n_out);
    else kn_ag_node_release(state);
    return st;
}

const kn_interposer kn_ag_interposer = {
    .name = "autograd",
    .order = KN_ORDER_AUTOGRAD,
    .modes = KN_ALL_MODES,
    .record = interpose_record,
    .done = interpose_done,
    .view = kn_ag_record_view,
};
