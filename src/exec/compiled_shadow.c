/* The float64 shadow on a compiled program (exec/compiled_shadow.h). */
#include "exec/compiled_shadow.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/backend_device.h"
#include "core/error.h"
#include "core/runtime_impl.h"
#include "core/tensor_impl.h"
#include "exec/dispatch.h"
#include "exec/shadow.h"
#include "graph/escape.h"
#include "graph/ptr_map.h"
#include "ops/custom_registry.h"

/* A value the program hands out: as the program made it (got) and as its ops one by one did. */
typedef struct handed_out {
    kn_tensor *got, *want;
    char *what; /* "the value of gelu(f32[4, 16]) called from f+0x1c, output 0" */
} handed_out;

struct kn_program_shadow {
    int64_t program;
    kn_device device;
    int n;
    kn_node **nodes; /* the copies, in program order; each freed once it has run */
    kn_backend **backends;
    handed_out *out;
    int n_out;
};

bool kn_program_shadow_on(void) {
    kn_device d;
    return kn_shadow_reference(&d) != NULL;
}

static void program_shadow_free(kn_program_shadow *ps) {
    if (!ps) return;
    for (int j = 0; ps->nodes && j < ps->n; j++) kn_node_free(ps->nodes[j]);
    for (int k = 0; k < ps->n_out; k++) {
        kn_tensor_decref(ps->out[k].got);
        kn_tensor_decref(ps->out[k].want);
        free(ps->out[k].what);
    }
    free(ps->nodes);
    free(ps->backends);
    free(ps->out);
    free(ps);
}

/* The copy's memory: a storage for each one the program makes or writes in place, and a header
 * over it for each header the program's nodes hold there. */
typedef struct cloner {
    kn_ptr_map storages, headers; /* -> index into copy, head */
    kn_storage **copy;
    kn_tensor **head;
    int n_copy, n_head;
} cloner;

static void cloner_free(cloner *c) {
    for (int i = 0; i < c->n_head; i++) kn_tensor_decref(c->head[i]);
    for (int i = 0; i < c->n_copy; i++) kn_storage_release(c->copy[i]);
    free(c->copy);
    free(c->head);
    kn_ptr_map_free(&c->storages);
    kn_ptr_map_free(&c->headers);
}

/* A new reference to the copy's header for h: the same geometry over the copy of h's storage,
 * or h itself for memory the program only reads. NULL when out of memory. */
static kn_tensor *clone_header(cloner *c, kn_tensor *h) {
    int s = kn_ptr_map_get(&c->storages, h->storage);
    if (s < 0) return kn_tensor_incref(h);
    int *at = kn_ptr_map_at(&c->headers, h, -1);
    if (*at < 0) {
        kn_storage_retain(c->copy[s]);
        kn_tensor *t = kn_tensor_wrap(c->copy[s], h->dtype, h->shape, h->ndim, h->stride, h->offset);
        if (!t) return NULL;
        *at = c->n_head;
        c->head[c->n_head++] = t;
    }
    return kn_tensor_incref(c->head[*at]);
}

/* "gelu(f32[4, 16]) called from f+0x1c" */
static void describe(const kn_node *n, char *buf, size_t size) {
    char inputs[320];
    kn_op_describe_inputs(n, inputs, sizeof inputs);
    snprintf(buf, size, "%s(%s)%s", kn_op_name_in(n->op, &n->attrs), inputs, n->origin ? n->origin : "");
}

static bool note_out(kn_program_shadow *ps, kn_tensor *got, kn_tensor *want, const char *fmt, const kn_node *n, int k) {
    char call[800], what[900];
    describe(n, call, sizeof call);
    snprintf(what, sizeof what, fmt, call, k);
    char *text = strdup(what);
    if (!got || !want || !text) {
        kn_tensor_decref(got), kn_tensor_decref(want), free(text);
        return false;
    }
    ps->out[ps->n_out++] = (handed_out){got, want, text};
    return true;
}

/* A header over the whole of s, in dtype's elements. */
static kn_tensor *whole(kn_storage *s, kn_dtype dtype) {
    int64_t numel = (int64_t)(s->bytes / kn_dtype_size(dtype)), stride = 1;
    kn_storage_retain(s);
    return kn_tensor_wrap(s, dtype, &numel, 1, &stride, 0);
}

/* The copies of the program's memory: what it makes gets memory when the copy of its producer
 * runs; what it writes in place from outside is copied now, on the program's stream, before
 * the program runs. The outside memory's handed-out comparison covers all of it. */
static kn_status copy_memory(kn_program_shadow *ps, cloner *c, kn_node *const *nodes, int n) {
    for (int j = 0; j < n; j++)
        for (int k = 0; k < nodes[j]->n_out; k++) {
            kn_storage *s = nodes[j]->out[k]->storage;
            if (!(nodes[j]->fresh_out & (1u << k)) || kn_ptr_map_get(&c->storages, s) >= 0) continue;
            if (!(c->copy[c->n_copy] = kn_storage_new_deferred("shadow", s->device, s->bytes))) return kn_last_status();
            *kn_ptr_map_at(&c->storages, s, 0) = c->n_copy++;
        }
    for (int j = 0; j < n; j++)
        for (int k = 0; k < nodes[j]->n_out; k++) {
            kn_tensor *t = nodes[j]->out[k];
            kn_storage *s = t->storage;
            if ((nodes[j]->fresh_out & (1u << k)) || kn_ptr_map_get(&c->storages, s) >= 0) continue;
            kn_storage *copy = kn_storage_new("shadow", s->device, s->bytes);
            if (!copy) return kn_last_status();
            c->copy[c->n_copy] = copy;
            *kn_ptr_map_at(&c->storages, s, 0) = c->n_copy++;
            kn_status st = s->bytes ? s->backend->copy_device(nodes[j]->stream, copy, 0, s, 0, s->bytes) : KN_OK;
            if (st != KN_OK) return st;
            if (!note_out(ps, whole(s, t->dtype), whole(copy, t->dtype),
                          "the memory written in place by %s (output %d), as a whole", nodes[j], k))
                return kn_error(KN_ERR_OOM, "shadow: out of host memory copying a compiled program");
        }
    return KN_OK;
}

/* The values someone outside the program can see, compared once both runs are done: decided
 * for all of them before the comparison holds a reference to any. */
static kn_status note_handed_out(kn_program_shadow *ps, cloner *c, kn_node *const *nodes, int n, size_t refs) {
    int *seen = malloc(refs * sizeof *seen), count = 0; /* node * KN_NODE_MAX_OUT + output */
    if (!seen) return kn_error(KN_ERR_OOM, "shadow: out of host memory copying a compiled program");
    for (int j = 0; j < n; j++)
        for (int k = 0; k < nodes[j]->n_out; k++)
            if ((nodes[j]->fresh_out & (1u << k)) && kn_value_escapes(nodes, 0, n, nodes[j]->out[k]))
                seen[count++] = j * KN_NODE_MAX_OUT + k;
    bool ok = true;
    for (int q = 0; q < count && ok; q++) {
        const kn_node *node = nodes[seen[q] / KN_NODE_MAX_OUT];
        int k = seen[q] % KN_NODE_MAX_OUT;
        ok = note_out(ps, kn_tensor_incref(node->out[k]), clone_header(c, node->out[k]), "the value of %s, output %d",
                      node, k);
    }
    free(seen);
    return ok ? KN_OK : kn_error(KN_ERR_OOM, "shadow: out of host memory copying a compiled program");
}

/* The copy of each node, over the copied memory. */
static kn_status copy_nodes(kn_program_shadow *ps, cloner *c, kn_node *const *nodes, kn_backend *const *backends,
                            int n) {
    for (int j = 0; j < n; j++) {
        const kn_node *x = nodes[j];
        kn_node *m = kn_node_make(x->op, x->n_in);
        if (!m) return kn_last_status();
        ps->nodes[j] = m;
        ps->backends[j] = backends[j];
        m->n_out = x->n_out;
        m->attrs = x->attrs;
        m->rng_seed = x->rng_seed, m->rng_offset = x->rng_offset;
        m->fresh_out = x->fresh_out;
        m->stream = x->stream;
        bool ok = !x->origin || (m->origin = strdup(x->origin));
        for (int i = 0; i < x->n_in; i++) ok = ok && (m->in[i] = clone_header(c, x->in[i]));
        for (int k = 0; k < x->n_out; k++) ok = ok && (m->out[k] = clone_header(c, x->out[k]));
        if (!ok) return kn_error(KN_ERR_OOM, "shadow: out of host memory copying a compiled program");
    }
    return KN_OK;
}

kn_status kn_program_shadow_begin(kn_node *const *nodes, kn_backend *const *backends, int n, int64_t program,
                                  kn_program_shadow **out) {
    *out = NULL;
    if (!n || !kn_program_shadow_on()) return KN_OK;
    size_t refs = 0;
    for (int j = 0; j < n; j++) {
        if (!backends[j]->holds_values || nodes[j]->aux) return KN_OK; /* nothing to compare, or generated already */
        refs += (size_t)(nodes[j]->n_in + nodes[j]->n_out);
    }
    cloner c = {0};
    kn_program_shadow *ps = calloc(1, sizeof *ps);
    bool ok = ps && kn_ptr_map_init(&c.storages, refs) && kn_ptr_map_init(&c.headers, refs) &&
              (c.copy = malloc(refs * sizeof *c.copy)) && (c.head = malloc(refs * sizeof *c.head)) &&
              (ps->nodes = calloc((size_t)n, sizeof *ps->nodes)) && (ps->backends = malloc((size_t)n * sizeof *ps->backends)) &&
              (ps->out = malloc(refs * sizeof *ps->out));
    kn_status st = ok ? KN_OK : kn_error(KN_ERR_OOM, "shadow: out of host memory copying a compiled program");
    if (ps) ps->program = program, ps->n = n, ps->device = nodes[0]->stream->device;
    if (st == KN_OK) st = copy_memory(ps, &c, nodes, n);
    if (st == KN_OK) st = note_handed_out(ps, &c, nodes, n, refs);
    if (st == KN_OK) st = copy_nodes(ps, &c, nodes, backends, n);
    cloner_free(&c);
    if (st != KN_OK) {
        program_shadow_free(ps);
        return st;
    }
    *out = ps;
    return KN_OK;
}

kn_status kn_program_shadow_check(kn_program_shadow *ps) {
    kn_status st = kn_device_sync(ps->device); /* the program has run */
    for (int j = 0; j < ps->n && st == KN_OK; j++) {
        kn_node *m = ps->nodes[j];
        for (int k = 0; k < m->n_out && st == KN_OK; k++)
            if (m->fresh_out & (1u << k)) st = kn_storage_realize(m->out[k]->storage, "shadow");
        if (st == KN_OK) st = kn_shadow_run_node(m, ps->backends[j], m->origin);
        kn_node_free(m); /* what only it still needed goes */
        ps->nodes[j] = NULL;
    }
    if (st == KN_OK) st = kn_device_sync(ps->device);
    for (int k = 0; k < ps->n_out && st == KN_OK; k++) {
        char what[1024];
        snprintf(what, sizeof what, "compiled program %lld differs from its ops run one by one at %s",
                 (long long)ps->program, ps->out[k].what);
        st = kn_shadow_compare(ps->out[k].got, ps->out[k].want, what);
    }
    program_shadow_free(ps);
    return st;
}
