/* The memory of a compiled program's values (exec/compiled.h). A value is a storage that a
 * node of the program creates (a fresh, deferred output). It lives from its producer to the
 * last node that touches a header on it. It is the program's own, and goes to the arena, when
 * every reference to it comes from the program's nodes: each header on it is held only by node
 * slots (its reference count equals the slots holding it), and the storage only by those
 * headers. A handle the user keeps (a step's result), one autograd saved or a view made
 * outside makes it escape: it then gets its own memory, since it outlives the program. An
 * elementwise node's output may take over the memory of an input that dies there (in-place
 * reuse, take_over_dead_inputs). */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include "core/error.h"
#include "core/hooks.h"
#include "core/tensor_impl.h"
#include "exec/compiled.h"
#include "graph/fused_ir.h"
#include "graph/memory_plan.h"
#include "graph/ptr_map.h"

enum { ALIGN = 64, MAX_ARENAS = 16 };

typedef struct value {
    kn_storage *storage;
    int headers; /* distinct headers on it held by the nodes */
    bool escapes;
} value;

/* Each stream's arena (its planned values run in stream order, so one arena serves them all);
 * the lock guards the table against kn_memory_empty_cache on another thread. */
static pthread_mutex_t arenas_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
    const kn_stream *stream;
    kn_device device;
    kn_storage *arena;
} arenas[MAX_ARENAS];

static kn_storage *arena_for_locked(const kn_stream *s, size_t bytes) {
    int slot = -1;
    for (int i = 0; i < MAX_ARENAS && slot < 0; i++)
        if (arenas[i].stream == s && arenas[i].device.type == s->device.type && arenas[i].device.index == s->device.index)
            slot = i;
    for (int i = 0; i < MAX_ARENAS && slot < 0; i++)
        if (!arenas[i].stream) slot = i;
    if (slot < 0) slot = 0; /* more streams than slots: the first one's arena is replaced */
    if (arenas[slot].stream != s) {
        kn_storage_release(arenas[slot].arena);
        arenas[slot].arena = NULL;
    }
    if (!arenas[slot].arena || arenas[slot].arena->bytes < bytes) {
        /* The old arena stays alive while a value placed in it does (each holds a reference). */
        kn_storage *grown = kn_storage_new("compiled program's arena", s->device, bytes);
        if (!grown) return NULL;
        kn_storage_release(arenas[slot].arena);
        arenas[slot].arena = grown;
    }
    arenas[slot].stream = s;
    arenas[slot].device = s->device;
    return arenas[slot].arena;
}

/* The stream's arena, at least bytes long; NULL (with an error) when out of memory. */
static kn_storage *arena_for(const kn_stream *s, size_t bytes) {
    pthread_mutex_lock(&arenas_lock);
    kn_storage *a = arena_for_locked(s, bytes);
    pthread_mutex_unlock(&arenas_lock);
    return a;
}

/* Tensor slot k of node x: its inputs, then its outputs (NULL where a slot is empty). */
static kn_tensor *slot_tensor(const kn_node *x, int k) { return k < x->n_in ? x->in[k] : x->out[k - x->n_in]; }

/* Whether t covers its whole storage, contiguous from its start. */
static bool whole(const kn_tensor *t) {
    return t->offset == 0 && kn_tensor_is_contiguous(t) &&
           (size_t)kn_numel(t) * kn_dtype_size(t->dtype) == t->storage->bytes;
}

static bool same_layout(const kn_tensor *a, const kn_tensor *b) {
    if (a->ndim != b->ndim || kn_dtype_size(a->dtype) != kn_dtype_size(b->dtype)) return false;
    for (int d = 0; d < a->ndim; d++)
        if (a->shape[d] != b->shape[d]) return false;
    return whole(a) && whole(b);
}

/* Whether input i is the only operand of x on its storage. */
static bool sole_reader(const kn_node *x, int i) {
    for (int k = 0; k < x->n_in; k++)
        if (k != i && x->in[k]->storage == x->in[i]->storage) return false;
    return true;
}

/* Whether x's kernel reads element i of each input before it writes element i of each output,
 * whatever its vector width or thread split: the elementwise ops' loops (backends' kernels from
 * the op table's expressions; not copy, which may be a memcpy, nor random draws) and generated
 * kernels without a reduction (whose rows are read twice). */
static bool writes_in_step(const kn_node *x) {
    if (x->op == KN_OP_fused) return ((const kn_fused_launch *)x->aux)->row == 0;
    const kn_op_def *def = &kn_op_table[x->op];
    return def->kind == KN_KIND_ELEMENTWISE && x->op != KN_OP_copy && !(def->flags & KN_OPF_RANDOM);
}

/* In-place reuse of dead inputs (graph/memory_plan.h's takes_over): an output of a node that
 * writes in step may take over an input that dies at that node, of the same layout, covering
 * its whole storage, and the node's only operand on it. plan_of[v]: value v's index in plan,
 * or -1 when it is not planned. */
static void take_over_dead_inputs(kn_node *const *nodes, int n, const kn_ptr_map *index, const int *plan_of,
                                  kn_plan_value *plan, bool *taken) {
    for (int j = 0; j < n; j++) {
        const kn_node *x = nodes[j];
        if (!writes_in_step(x)) continue;
        for (int o = 0; o < x->n_out; o++) {
            int out = kn_ptr_map_get(index, x->out[o]->storage);
            out = out >= 0 ? plan_of[out] : -1;
            if (out < 0 || plan[out].first != j) continue;
            for (int i = 0; i < x->n_in && !plan[out].takes_over; i++) {
                int in = kn_ptr_map_get(index, x->in[i]->storage);
                in = in >= 0 ? plan_of[in] : -1;
                if (in < 0 || taken[in] || plan[in].last != j || plan[in].bytes != plan[out].bytes ||
                    !same_layout(x->in[i], x->out[o]) || !sole_reader(x, i))
                    continue;
                plan[out].takes_over = in + 1;
                taken[in] = true;
            }
        }
    }
}

/* The arenas on device go (kn_memory_empty_cache): the next program makes a new one. */
static void release_arenas(kn_device device) {
    pthread_mutex_lock(&arenas_lock);
    for (int i = 0; i < MAX_ARENAS; i++)
        if (arenas[i].stream && arenas[i].device.type == device.type && arenas[i].device.index == device.index) {
            kn_storage_release(arenas[i].arena);
            arenas[i].arena = NULL;
            arenas[i].stream = NULL;
        }
    pthread_mutex_unlock(&arenas_lock);
}

__attribute__((constructor)) static void install_release(void) { kn_hooks_install_release_device_memory(release_arenas); }

kn_status kn_compiled_place(kn_node *const *nodes, int n, kn_plan_summary *summary) {
    if (!n || !nodes[0]->stream->backend->holds_values) return KN_OK;
    int slots = 0;
    for (int j = 0; j < n; j++) slots += nodes[j]->n_in + nodes[j]->n_out;
    kn_ptr_map held = {0}, index = {0};
    value *vals = malloc((size_t)(slots ? slots : 1) * sizeof *vals);
    kn_plan_value *plan = malloc((size_t)(slots ? slots : 1) * sizeof *plan);
    int *planned = malloc((size_t)(slots ? slots : 1) * sizeof *planned);
    int *plan_of = malloc((size_t)(slots ? slots : 1) * sizeof *plan_of);
    bool *taken = calloc((size_t)(slots ? slots : 1), sizeof *taken);
    kn_status st = KN_OK;
    if (!vals || !plan || !planned || !plan_of || !taken || !kn_ptr_map_init(&held, (size_t)slots) || !kn_ptr_map_init(&index, (size_t)slots)) {
        st = kn_error(KN_ERR_OOM, "compiled mode: out of host memory for the memory plan");
        goto out;
    }
    int n_vals = 0;
    for (int j = 0; j < n; j++) {
        const kn_node *x = nodes[j];
        for (int o = 0; o < x->n_out; o++) {
            kn_storage *s = x->out[o]->storage;
            if (!(x->fresh_out & (1u << o)) || !s->deferred || !s->bytes || kn_ptr_map_get(&index, s) >= 0) continue;
            *kn_ptr_map_at(&index, s, n_vals) = n_vals;
            vals[n_vals] = (value){.storage = s};
            plan[n_vals++] = (kn_plan_value){.bytes = s->bytes, .first = j, .last = j};
        }
        for (int k = 0; k < x->n_in + x->n_out; k++) {
            const kn_tensor *t = slot_tensor(x, k);
            if (!t) continue;
            ++*kn_ptr_map_at(&held, t, 0);
            int v = kn_ptr_map_get(&index, t->storage);
            if (v >= 0 && plan[v].last < j) plan[v].last = j;
        }
    }
    /* Escapes: per header (each counted once), then per storage. */
    for (size_t i = 0; i <= held.mask; i++) {
        const kn_tensor *t = held.keys[i];
        int v = t ? kn_ptr_map_get(&index, t->storage) : -1;
        if (v < 0) continue;
        vals[v].headers++;
        if (atomic_load(&t->refs) > held.vals[i]) vals[v].escapes = true;
    }
    int n_planned = 0;
    for (int v = 0; v < n_vals; v++) {
        plan_of[v] = -1;
        if (vals[v].escapes || atomic_load(&vals[v].storage->refs) > vals[v].headers) continue;
        plan_of[v] = n_planned;
        plan[n_planned] = plan[v];
        planned[n_planned++] = v;
    }
    take_over_dead_inputs(nodes, n, &index, plan_of, plan, taken);
    size_t bytes = kn_memory_plan(plan, n_planned, ALIGN);
    if (summary && bytes != SIZE_MAX)
        *summary = (kn_plan_summary){n_planned, bytes, kn_memory_plan_peak(plan, n_planned, ALIGN)};
    if (bytes == SIZE_MAX) {
        st = kn_error(KN_ERR_OOM, "compiled mode: out of host memory for the memory plan");
        goto out;
    }
#ifndef NDEBUG
    char why[320];
    if (!kn_memory_plan_check(plan, n_planned, bytes, ALIGN, why, sizeof why)) {
        st = kn_error(KN_ERR_INTERNAL, "compiled mode: the memory plan is wrong: %s", why);
        goto out;
    }
#endif
    kn_storage *arena = n_planned ? arena_for(nodes[0]->stream, bytes) : NULL;
    if (n_planned && !arena) {
        st = kn_last_status();
        goto out;
    }
    for (int k = 0; k < n_planned; k++) kn_storage_realize_in(vals[planned[k]].storage, arena, plan[k].offset);
out:
    kn_ptr_map_free(&held), kn_ptr_map_free(&index);
    free(vals), free(plan), free(planned), free(plan_of), free(taken);
    return st;
}
