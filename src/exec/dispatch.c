/* The dispatcher: one pipeline for every mode. An op records a node, the interposers see it
 * (exec/interpose.h), and the mode's scheduler decides when it runs (exec/scheduler.h). */
#include "exec/dispatch.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/call_site.h"
#include "core/runtime_impl.h"
#include "core/stats.h"
#include "exec/autocast.h"
#include "exec/compiled_shadow.h"
#include "exec/interpose.h"
#include "exec/profile.h"
#include "exec/scheduler.h"
#include "exec/shadow.h"
#include "ops/custom_registry.h"

static void dtype_list(uint32_t mask, char *buf, size_t size) {
    size_t len = 0;
    buf[0] = '\0';
    for (int d = 0; d < KN_DTYPE_COUNT && len < size; d++)
        if (mask & KN_DT(d)) len += (size_t)snprintf(buf + len, size - len, len ? ", %s" : "%s", kn_dtype_name(d));
}

void *kn_op_fail(kn_opctx *c, kn_status code, const char *fmt, ...) {
    char msg[640], inputs[320];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    kn_op_describe_inputs(c->node, inputs, sizeof inputs);
    kn_error(code, "%s(%s): %s", kn_op_name_in(c->node->op, &c->node->attrs), inputs, msg);
    kn_node_free(c->node);
    c->node = NULL;
    return NULL;
}

bool kn_op_begin_on(kn_opctx *c, kn_op_id op, int n_in, kn_tensor *const *in, kn_device device) {
    c->node = NULL;
    if (!kn_runtime_ready()) return false;
    kn_tasks_drain(); /* nodes that have run are released here, on the host */
    for (int i = 0; i < n_in; i++)
        if (!in[i]) {
            kn_error_null_input(kn_op_name(op), i);
            return false;
        }
    /* Under autocast the node takes the policy's casts of its inputs (recorded first). */
    kn_tensor *cast[KN_NODE_MAX_IN];
    bool autocast;
    if (!kn_autocast_inputs(op, n_in, in, cast, &autocast)) return false;
    kn_tensor *const *given = in;
    if (autocast) in = cast;
    kn_node *n = kn_node_make(op, n_in);
    if (n) {
        kn_stat_add(KN_STAT_OPS_RECORDED, 1);
        for (int i = 0; i < n_in; i++) n->in[i] = kn_tensor_incref(in[i]);
    }
    if (autocast) kn_autocast_release(n_in, given, cast);
    if (!n) return false;
    c->node = n;

    c->device = n_in ? in[0]->storage->device : device;
    for (int i = 1; i < n_in; i++) {
        kn_device d = in[i]->storage->device;
        if (d.type != c->device.type || d.index != c->device.index)
            return kn_op_fail(c, KN_ERR_DEVICE, "input %d is on %s:%d but input 0 is on %s:%d", i,
                              kn_device_type_name(d.type), d.index, kn_device_type_name(c->device.type),
                              c->device.index) != NULL;
    }
    uint32_t accepted = kn_op_table[op].dtypes;
    for (int i = 0; i < n_in; i++)
        if (!(accepted & KN_DT(in[i]->dtype))) {
            char list[128];
            dtype_list(accepted, list, sizeof list);
            return kn_op_fail(c, KN_ERR_DTYPE, "input %d has dtype %s; %s takes %s", i,
                              kn_dtype_name(in[i]->dtype), kn_op_name(op), list) != NULL;
        }
    c->backend = kn_backend_get(c->device);
    c->defer = kn_scheduler_for(kn_get_mode())->defers_storage;
    if (!c->backend || !(n->stream = kn_stream_of(c->device))) {
        kn_node_free(n);
        c->node = NULL;
        return false;
    }
    return true;
}

bool kn_op_begin(kn_opctx *c, kn_op_id op, int n_in, kn_tensor *const *in) {
    return kn_op_begin_on(c, op, n_in, in, kn_default_device());
}

void kn_op_set_input(kn_opctx *c, int i, kn_tensor *t) {
    kn_tensor_decref(c->node->in[i]);
    c->node->in[i] = kn_tensor_incref(t);
}

bool kn_op_dim(kn_opctx *c, int64_t dim, int ndim, int64_t *out) {
    int64_t lo = ndim ? -ndim : -1, hi = ndim ? ndim - 1 : 0;
    if (dim < lo || dim > hi) {
        kn_op_fail(c, KN_ERR_INDEX, "dim %lld is out of range [%lld, %lld] for a %d-d tensor", (long long)dim,
                   (long long)lo, (long long)hi, ndim);
        return false;
    }
    *out = dim < 0 ? dim + (ndim ? ndim : 1) : dim;
    return true;
}

kn_tensor *kn_op_output(kn_opctx *c, kn_dtype dtype, const int64_t *shape, int ndim) {
    kn_node *n = c->node;
    if (n->n_out == KN_NODE_MAX_OUT) return kn_op_fail(c, KN_ERR_INTERNAL, "too many outputs");
    kn_tensor *t = (c->defer ? kn_tensor_alloc_deferred : kn_tensor_alloc)(kn_op_name(n->op), dtype, shape, ndim, c->device);
    if (!t) {
        /* keep the allocator's message but name the inputs too */
        char msg[512];
        snprintf(msg, sizeof msg, "%s", kn_last_error());
        return kn_op_fail(c, kn_last_status(), "output: %s", msg);
    }
    n->fresh_out |= (uint8_t)(1u << n->n_out);
    n->out[n->n_out++] = t;
    return t;
}

kn_status kn_node_execute(kn_backend *b, kn_node *n) {
    kn_stat_add(KN_STAT_KERNELS_LAUNCHED, 1);
    if (!atomic_load_explicit(&kn_profiling, memory_order_relaxed)) return b->kernels->op[n->op].fn(n);
    int64_t t0 = kn_profile_now();
    kn_status st = b->kernels->op[n->op].fn(n);
    kn_profile_add(n->op, kn_profile_now() - t0);
    return st;
}

/* A node's work on its stream. An error names the op, its inputs, the device and the stream,
 * and stays with that stream until its sync. */
static kn_status run_node(void *arg) {
    kn_node *n = arg;
    kn_stream *s = n->stream;
    kn_status st = kn_node_execute(s->backend, n);
    if (st == KN_OK) return KN_OK;
    char msg[640], inputs[320];
    snprintf(msg, sizeof msg, "%s", kn_last_error());
    kn_op_describe_inputs(n, inputs, sizeof inputs);
    return kn_error(st, "%s (reported asynchronously) by %s(%s) on %s:%d, stream %d", msg,
                    kn_op_name_in(n->op, &n->attrs), inputs, s->backend->name, s->device.index, s->id);
}

/* The completion: exec releases the node on a host thread (kn_tasks_drain), never the backend. */
static void node_done(void *arg) { kn_node_free(arg); }

/* On the stream's thread once the node has run: the references that are not a tensor's last
 * are dropped there, so the host is left only with last references (whose release may tear
 * down autograd state) instead of a cache-line round trip per op. */
static bool node_settle(void *arg) {
    kn_node *n = arg;
    bool all = true;
    for (int i = 0; i < n->n_in; i++)
        if (kn_tensor_decref_unless_last(n->in[i])) n->in[i] = NULL;
        else all = false;
    for (int i = 0; i < n->n_out; i++)
        if (kn_tensor_decref_unless_last(n->out[i])) n->out[i] = NULL;
        else all = false;
    if (all) kn_node_free(n);
    return all;
}

/* The node's outputs get their memory now if their mode deferred it. Its inputs were realized
 * by the nodes that wrote them, launched before it. */
static kn_status realize_operands(const kn_node *n) {
    for (int i = 0; i < n->n_in; i++)
        if (n->in[i]->storage->deferred)
            return kn_error(KN_ERR_INTERNAL, "%s: input %d has no value: nothing launched before it wrote it",
                            kn_op_name(n->op), i);
    for (int i = 0; i < n->n_out; i++)
        if (kn_storage_realize(n->out[i]->storage, kn_op_name(n->op)) != KN_OK) return kn_last_status();
    return KN_OK;
}

void kn_node_launch(kn_node *n) {
    if (realize_operands(n) != KN_OK) { /* the stream's error, as if its kernel had failed */
        kn_stream_fail(n->stream, kn_last_status());
        kn_node_free(n);
        return;
    }
    n->task = (kn_task){.run = run_node, .done = node_done, .ctx = n, .settle = node_settle};
    n->stream->backend->launch(n->stream, &n->task);
}

kn_status kn_node_run_now(kn_node *n) {
    kn_stream *s = n->stream;
    kn_node_launch(n);
    kn_status st = kn_stream_sync(s);
    if (st == KN_OK) return KN_OK;
    char msg[1024], site[256];
    snprintf(msg, sizeof msg, "%s", kn_last_error());
    return kn_error(st, "%s; called from %s", msg, kn_call_site(site, sizeof site));
}

/* Hands the node to the mode's scheduler; the node is consumed. */
static kn_status submit(kn_opctx *c, kn_mode mode) {
    kn_node *n = c->node;
    c->node = NULL;
    kn_backend *b = c->backend;
    kn_kernel_entry k = b->kernels->op[n->op];
    kn_dtype key = kn_node_key_dtype(n);
    if (!k.fn || !(k.dtypes & KN_DT(key))) {
        char inputs[320];
        kn_op_describe_inputs(n, inputs, sizeof inputs);
        kn_error(KN_ERR_UNSUPPORTED, "%s(%s): the %s backend has no %s kernel for %s", kn_op_name(n->op), inputs,
                 b->name, kn_op_name(n->op), kn_dtype_name(key));
        kn_node_free(n);
        return KN_ERR_UNSUPPORTED;
    }
    if (mode == KN_MODE_COMPILED && kn_program_shadow_on()) n->origin = kn_shadow_origin(); /* for the check's errors */
    return kn_scheduler_for(mode)->submit(b, n);
}

/* A node the interposers refused: dropped unrun. */
static void drop(kn_opctx *c) {
    kn_node_free(c->node);
    c->node = NULL;
}

/* Ops whose output shape depends on values: wait for their inputs, run the kernel here (it
 * allocates the outputs), and hand the outputs over. */
static kn_status run_synchronously(kn_opctx *c, kn_tensor **outs) {
    kn_node *n = c->node;
    c->node = NULL;
    kn_backend *b = c->backend;
    kn_kernel_entry k = b->kernels->op[n->op];
    kn_dtype key = kn_node_key_dtype(n);
    char inputs[320];
    kn_op_describe_inputs(n, inputs, sizeof inputs);
    kn_status st;
    if (!k.fn || !(k.dtypes & KN_DT(key)))
        st = kn_error(KN_ERR_UNSUPPORTED, "%s(%s): the %s backend has no %s kernel for %s%s", kn_op_name(n->op),
                      inputs, b->name, kn_op_name(n->op), kn_dtype_name(key),
                      b->holds_values ? "" : " (its output shape depends on values, which meta tensors lack)");
    else if ((st = kn_realize(NULL)) == KN_OK && (st = kn_device_sync(c->device)) == KN_OK)
        st = kn_node_execute(b, n);
    /* The kernel made the outputs, so the interposers see the node once they exist. */
    if (st == KN_OK) {
        kn_mode mode = kn_get_mode();
        void *state[KN_INTERPOSERS_MAX];
        n->fresh_out = (uint8_t)((1u << n->n_out) - 1);
        st = kn_interpose_record(mode, n, b, state, NULL);
        for (int i = 0; i < n->n_out; i++) outs[i] = kn_tensor_incref(n->out[i]);
        st = kn_interpose_done(mode, state, st, outs, n->n_out);
        for (int i = 0; i < n->n_out; i++) {
            if (st == KN_OK) kn_scope_adopt(outs[i]);
            else kn_tensor_decref(outs[i]), outs[i] = NULL;
        }
    }
    kn_node_free(n);
    return st;
}

kn_status kn_op_run_multi(kn_opctx *c, kn_tensor **outs) {
    if (!c->node) return kn_last_status();
    kn_node *n = c->node;
    if (kn_op_table[n->op].flags & KN_OPF_SYNC) return run_synchronously(c, outs);
    int n_out = n->n_out;
    kn_mode mode = kn_get_mode();
    void *state[KN_INTERPOSERS_MAX];
    kn_status st = kn_interpose_record(mode, n, c->backend, state, NULL);
    /* The caller's references: one per output, beside the node's own (the scheduler may run
     * and free the node). An output written in place (batch_norm's running stats) is the
     * caller's own tensor: it gets a new handle, so that its owner's handle is never
     * re-registered with this scope. */
    for (int i = 0; i < n_out; i++)
        outs[i] = n->fresh_out & (1u << i) ? kn_tensor_incref(n->out[i]) : kn_retain(n->out[i]);
    if (st == KN_OK) st = submit(c, mode);
    else drop(c);
    st = kn_interpose_done(mode, state, st, outs, n_out);
    if (st != KN_OK) {
        for (int i = 0; i < n_out; i++) {
            kn_tensor_decref(outs[i]);
            outs[i] = NULL;
        }
        return st;
    }
    for (int i = 0; i < n_out; i++) kn_scope_adopt(outs[i]);
    return KN_OK;
}

kn_status kn_op_run_inplace(kn_opctx *c) {
    if (!c->node) return kn_last_status();
    kn_node *n = c->node;
    kn_mode mode = kn_get_mode();
    void *state[KN_INTERPOSERS_MAX];
    bool any;
    kn_status st = kn_interpose_record(mode, n, c->backend, state, &any);
    /* The written tensors outlive the node only for interposers that will look at them. */
    kn_tensor *outs[KN_NODE_MAX_OUT];
    int n_out = any ? n->n_out : 0;
    for (int i = 0; i < n_out; i++) outs[i] = kn_tensor_incref(n->out[i]);
    if (st == KN_OK) st = submit(c, mode);
    else drop(c);
    st = kn_interpose_done(mode, state, st, outs, n_out);
    for (int i = 0; i < n_out; i++) kn_tensor_decref(outs[i]);
    return st;
}

void kn_hand_outputs(kn_tensor *const *outs, kn_tensor **const *dst, int n) {
    for (int i = 0; i < n; i++) {
        if (dst[i]) *dst[i] = outs[i];
        else kn_release(outs[i]);
    }
}

kn_status kn_op_run_to(kn_opctx *c, kn_tensor **const *dst, int n) {
    kn_tensor *outs[KN_NODE_MAX_OUT] = {0};
    kn_status st = kn_op_run_multi(c, outs);
    if (st == KN_OK) kn_hand_outputs(outs, dst, n);
    return st;
}

kn_tensor *kn_op_run(kn_opctx *c) {
    if (!c->node) return NULL;
    kn_tensor *outs[KN_NODE_MAX_OUT] = {0};
    if (kn_op_run_multi(c, outs) != KN_OK) return NULL;
    for (int i = 1; i < KN_NODE_MAX_OUT; i++) kn_release(outs[i]);
    return outs[0];
}
