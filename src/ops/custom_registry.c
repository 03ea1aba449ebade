/* The registry of custom ops: validated definitions in a fixed array of pointers that only
 * grows, so readers (kernels on the streams, gradients) need no lock. */
#include "ops/custom_registry.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"

_Static_assert(KN_CUSTOM_MAX_OUTPUTS <= KN_NODE_MAX_OUT, "a custom op's outputs are a node's");

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic(kn_custom_entry *) entries[KN_CUSTOM_MAX_OPS];
static atomic_int count;

const kn_custom_entry *kn_custom_get(int id) {
    if (id < 0 || id >= atomic_load_explicit(&count, memory_order_acquire)) return NULL;
    return atomic_load_explicit(&entries[id], memory_order_acquire);
}

const char *kn_custom_op_name(int id) {
    const kn_custom_entry *e = kn_custom_get(id);
    return e ? e->def.name : NULL;
}

static int find(const char *name) {
    int n = atomic_load_explicit(&count, memory_order_acquire);
    for (int i = 0; i < n; i++)
        if (strcmp(atomic_load_explicit(&entries[i], memory_order_acquire)->def.name, name) == 0) return i;
    return -1;
}

int kn_custom_op_lookup(const char *name) {
    int id = name ? find(name) : -1;
    if (id < 0) kn_error(KN_ERR_ARG, "kn_custom_op_lookup: no custom op is named '%s'", name ? name : "(null)");
    return id;
}

static bool has_kernel(const kn_custom_op_def *d) {
    for (int t = 0; t < KN_DEVICE_TYPE_COUNT; t++)
        if (d->kernels[t]) return true;
    return false;
}

/* Everything a definition must satisfy, except the name being free. */
static kn_status validate(const kn_custom_op_def *d) {
    const char *who = "kn_custom_op_register";
    if (!d) return kn_error(KN_ERR_NULL, "%s: the definition is NULL", who);
    if (!d->name || !d->name[0]) return kn_error(KN_ERR_ARG, "%s: the op needs a name", who);
    const char *name = d->name;
    if (d->n_inputs < 0 || d->n_inputs > KN_CUSTOM_MAX_INPUTS)
        return kn_error(KN_ERR_ARG, "%s(%s): n_inputs is %d; it must be in [0, %d]", who, name, d->n_inputs,
                        KN_CUSTOM_MAX_INPUTS);
    if (d->n_outputs < 1 || d->n_outputs > KN_CUSTOM_MAX_OUTPUTS)
        return kn_error(KN_ERR_ARG, "%s(%s): n_outputs is %d; it must be in [1, %d]", who, name, d->n_outputs,
                        KN_CUSTOM_MAX_OUTPUTS);
    if (!d->infer && d->n_inputs == 0)
        return kn_error(KN_ERR_ARG, "%s(%s): an op without inputs needs an infer rule for its output shapes", who,
                        name);
    if (!has_kernel(d) && !d->source)
        return kn_error(KN_ERR_ARG, "%s(%s): the op has neither a kernel nor a source", who, name);
    if (d->source) {
        if (!d->source[0]) return kn_error(KN_ERR_ARG, "%s(%s): the source is empty", who, name);
        if (d->infer)
            return kn_error(KN_ERR_ARG, "%s(%s): a source kernel is elementwise, so infer must be NULL", who, name);
        if (d->n_inputs < 1 || d->n_inputs > 3 || d->n_outputs != 1)
            return kn_error(KN_ERR_ARG, "%s(%s): a source kernel has 1 to 3 inputs (x, y, z) and 1 output, not %d and %d",
                            who, name, d->n_inputs, d->n_outputs);
    }
    return KN_OK;
}

static void entry_free(kn_custom_entry *e) {
    if (!e) return;
    free((char *)e->def.name);
    free((char *)e->def.source);
    free(e);
}

int kn_custom_op_register(const kn_custom_op_def *def) {
    if (validate(def) != KN_OK) return -1;
    kn_custom_entry *e = calloc(1, sizeof *e);
    if (e) {
        e->def = *def;
        e->def.name = strdup(def->name);
        e->def.source = def->source ? strdup(def->source) : NULL;
    }
    if (!e || !e->def.name || (def->source && !e->def.source)) {
        entry_free(e);
        kn_error(KN_ERR_OOM, "kn_custom_op_register(%s): out of host memory", def->name);
        return -1;
    }
    pthread_mutex_lock(&lock);
    int id = atomic_load_explicit(&count, memory_order_relaxed);
    kn_status st = KN_OK;
    if (find(def->name) >= 0)
        st = kn_error(KN_ERR_ARG, "kn_custom_op_register(%s): a custom op of that name is already registered",
                      def->name);
    else if (id == KN_CUSTOM_MAX_OPS)
        st = kn_error(KN_ERR_ARG, "kn_custom_op_register(%s): all %d custom op slots are taken", def->name,
                      KN_CUSTOM_MAX_OPS);
    if (st == KN_OK) {
        e->id = id;
        atomic_store_explicit(&entries[id], e, memory_order_release);
        atomic_store_explicit(&count, id + 1, memory_order_release);
    }
    pthread_mutex_unlock(&lock);
    if (st != KN_OK) {
        entry_free(e);
        return -1;
    }
    return id;
}

const char *kn_op_name_in(kn_op_id op, const kn_attrs *attrs) {
    const kn_custom_entry *e = op == KN_OP_custom && attrs ? kn_custom_of(attrs) : NULL;
    return e ? e->def.name : kn_op_name(op);
}
