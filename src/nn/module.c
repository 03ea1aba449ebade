/* The module tree: registration, traversal with state_dict names, lookup, modes, freeing. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/call_site.h"
#include "core/error.h"
#include "core/strmap.h"
#include "core/tensor_alias.h"
#include "nn/nn_internal.h"

#define MODULE_MAGIC 0x6b6e6d64u /* "knmd" */

static kn_module *as_module(void *p, const char *op) {
    kn_module *m = p;
    if (!m) {
        kn_error_null_input(op, 0);
        return NULL;
    }
    if (m->magic != MODULE_MAGIC) return kn_error_null(KN_ERR_ARG, "%s: the pointer is not a kn_module", op);
    return m;
}

void *kn_module_alloc(size_t size, const char *type) {
    if (size < sizeof(kn_module)) return kn_error_null(KN_ERR_ARG, "module_alloc: size %zu is smaller than kn_module", size);
    kn_module *m = calloc(1, size);
    if (!m) return kn_error_null(KN_ERR_OOM, "module_alloc: out of host memory");
    m->magic = MODULE_MAGIC;
    m->type = type ? type : "Module";
    m->training = true;
    return m;
}

/* Appends (name, item) to parallel arrays that grow by doubling; false on out-of-memory. */
static bool append_tensor(char ***names, kn_tensor ***items, int *n, int *cap, const char *name, kn_tensor *t) {
    if (*n == *cap) {
        int c = *cap ? 2 * *cap : 4;
        char **nn = realloc(*names, sizeof *nn * (size_t)c);
        if (!nn) return false;
        *names = nn;
        kn_tensor **ni = realloc(*items, sizeof *ni * (size_t)c);
        if (!ni) return false;
        *items = ni, *cap = c;
    }
    char *copy = strdup(name);
    if (!copy) return false;
    (*names)[*n] = copy, (*items)[(*n)++] = t;
    return true;
}

static bool append_child(kn_module *m, const char *name, kn_module *child) {
    if (m->n_children == m->cap_children) {
        int c = m->cap_children ? 2 * m->cap_children : 4;
        char **nn = realloc(m->child_names, sizeof *nn * (size_t)c);
        if (!nn) return false;
        m->child_names = nn;
        kn_module **ni = realloc(m->children, sizeof *ni * (size_t)c);
        if (!ni) return false;
        m->children = ni, m->cap_children = c;
    }
    char *copy = strdup(name);
    if (!copy) return false;
    m->child_names[m->n_children] = copy, m->children[m->n_children++] = child;
    return true;
}

/* Members share one namespace: the map takes each name to its kind and index. */
enum { MEMBER_PARAM, MEMBER_BUFFER, MEMBER_CHILD };

static int32_t member(const kn_module *m, const char *name, size_t len) {
    return m->members ? kn_strmap_get(m->members, name, len) : -1;
}

static bool name_taken(const kn_module *m, const char *name) { return member(m, name, strlen(name)) >= 0; }

/* Records the member just appended (its name owned by the module); false on out-of-memory. */
static bool index_member(kn_module *m, const char *name, int kind, int index) {
    if (!m->members && !(m->members = calloc(1, sizeof(kn_strmap)))) return false;
    return index < (1 << 29) && kn_strmap_put(m->members, name, strlen(name), (int32_t)(index << 2 | kind));
}

/* A name is one non-empty segment of a dotted path, unique within its module. */
static bool check_name(kn_module *m, const char *op, const char *name) {
    if (!name || !*name || strchr(name, '.')) {
        kn_error(KN_ERR_ARG, "%s: name \"%s\" must be non-empty and contain no '.'", op, name ? name : "(null)");
        return false;
    }
    if (name_taken(m, name)) {
        kn_error(KN_ERR_ARG, "%s: %s already has a member named \"%s\"", op, m->type, name);
        return false;
    }
    return true;
}

static kn_tensor *register_tensor(void *module, const char *op, const char *name, kn_tensor *t, bool param) {
    kn_module *m = as_module(module, op);
    if (!m) return NULL;
    if (!t) {
        kn_error_null_input(op, 2);
        m->failed = true;
        return NULL;
    }
    if (!check_name(m, op, name)) {
        m->failed = true;
        return NULL;
    }
    kn_tensor *h = kn_retain(t);
    if (h && param && !kn_requires_grad(h, true)) {
        kn_release(h);
        h = NULL;
    }
    bool ok = h && (param ? append_tensor(&m->param_names, &m->params, &m->n_params, &m->cap_params, name, h)
                          : append_tensor(&m->buffer_names, &m->buffers, &m->n_buffers, &m->cap_buffers, name, h));
    char **names = param ? m->param_names : m->buffer_names;
    int *n = param ? &m->n_params : &m->n_buffers;
    if (ok && !index_member(m, names[*n - 1], param ? MEMBER_PARAM : MEMBER_BUFFER, *n - 1)) {
        free(names[--*n]);
        ok = false;
    }
    if (!ok) {
        if (h) kn_error(KN_ERR_OOM, "%s: out of host memory", op);
        kn_release(h);
        m->failed = true;
        return NULL;
    }
    return h;
}

kn_tensor *kn_module_param(void *module, const char *name, kn_tensor *t) {
    return register_tensor(module, "module_param", name, t, true);
}

kn_tensor *kn_module_buffer(void *module, const char *name, kn_tensor *t) {
    return register_tensor(module, "module_buffer", name, t, false);
}

void *kn_module_add(void *module, const char *name, void *child) {
    kn_module *c = child ? as_module(child, "module_add") : NULL;
    if (!child) kn_error_null_input("module_add", 2);
    if (c && c->attached) {
        kn_error(KN_ERR_ARG, "module_add: the %s added as \"%s\" already has a parent", c->type, name ? name : "");
        c = NULL; /* it stays with its parent */
    }
    kn_module *m = as_module(module, "module_add");
    char index[24];
    if (m && !name) snprintf(index, sizeof index, "%d", m->n_children), name = index;
    if (c && (!m || !check_name(m, "module_add", name))) {
        kn_module_free(c);
        c = NULL;
    }
    if (c && !append_child(m, name, c)) {
        kn_error(KN_ERR_OOM, "module_add: out of host memory");
        kn_module_free(c);
        c = NULL;
    } else if (c && !index_member(m, m->child_names[m->n_children - 1], MEMBER_CHILD, m->n_children - 1)) {
        free(m->child_names[--m->n_children]);
        kn_error(KN_ERR_OOM, "module_add: out of host memory");
        kn_module_free(c);
        c = NULL;
    }
    if (!c) {
        if (m) m->failed = true;
        return NULL;
    }
    c->attached = true;
    c->parent = m;
    c->name = m->child_names[m->n_children - 1];
    return c;
}

static bool tree_failed(const kn_module *m) {
    if (m->failed) return true;
    for (int i = 0; i < m->n_children; i++)
        if (tree_failed(m->children[i])) return true;
    return false;
}

void *kn_module_check(void *module) {
    kn_module *m = as_module(module, "module_check");
    if (!m) return NULL;
    if (!tree_failed(m)) return m;
    kn_module_free(m);
    return NULL;
}

void kn_module_free(void *module) {
    kn_module *m = module;
    if (!m || m->magic != MODULE_MAGIC) return;
    for (int i = 0; i < m->n_children; i++) kn_module_free(m->children[i]), free(m->child_names[i]);
    for (int i = 0; i < m->n_params; i++) kn_release(m->params[i]), free(m->param_names[i]);
    for (int i = 0; i < m->n_buffers; i++) kn_release(m->buffers[i]), free(m->buffer_names[i]);
    free(m->children), free(m->child_names), free(m->params), free(m->param_names);
    free(m->buffers), free(m->buffer_names);
    if (m->members) kn_strmap_free(m->members), free(m->members);
    m->magic = 0;
    free(m);
}

void kn_module_train(void *module, bool training) {
    kn_module *m = as_module(module, "module_train");
    if (!m) return;
    m->training = training;
    for (int i = 0; i < m->n_children; i++) kn_module_train(m->children[i], training);
}

bool kn_module_is_training(const void *module) {
    const kn_module *m = module;
    return m && m->magic == MODULE_MAGIC && m->training;
}

kn_tensor *kn_module_forward(void *module, kn_tensor *x) {
    kn_module *m = as_module(module, "module_forward");
    if (!m) return NULL;
    if (!m->forward) return kn_error_null(KN_ERR_ARG, "module_forward: a %s has no one-input forward", m->type);
    nn_enter(m);
    return nn_leave(m->forward(m, x));
}

/* `"h.0.mlp" (MLP)`: the module's path from the root, as in state_dict names, and its type. */
static void describe(const void *module, char *buf, size_t size) {
    const kn_module *m = module, *chain[64];
    int n = 0;
    for (const kn_module *p = m; p->parent && n < 64; p = p->parent) chain[n++] = p;
    if (!n) {
        snprintf(buf, size, "%s (the root)", m->type);
        return;
    }
    size_t len = (size_t)snprintf(buf, size, "\"");
    for (int i = n - 1; i >= 0 && len < size; i--)
        len += (size_t)snprintf(buf + len, size - len, i ? "%s." : "%s", chain[i]->name);
    if (len < size) snprintf(buf + len, size - len, "\" (%s)", m->type);
}

void nn_enter(const void *module) { kn_module_path_push(module, describe); }

kn_tensor *nn_leave(kn_tensor *result) {
    kn_module_path_pop();
    return result;
}

/* ---- traversal -------------------------------------------------------------------------- */

/* Tied weights: the same elements under two names (PyTorch lists such a parameter once). */
static bool same_tensor(const kn_tensor *a, const kn_tensor *b) {
    if (!kn_shares_storage(a, b) || kn_offset(a) != kn_offset(b)) return false;
    kn_shape sa = kn_shape_of(a), sb = kn_shape_of(b);
    return sa.n == sb.n && !memcmp(sa.v, sb.v, sizeof(int64_t) * (size_t)sa.n);
}

/* Keeps the first name of each tensor listed more than once. */
static bool drop_aliases(kn_named_tensors *l) {
    int *first = malloc(sizeof *first * (size_t)(l->count ? l->count : 1));
    if (!first || !kn_tensor_first_alias(l->tensors, l->count, same_tensor, first)) return free(first), false;
    int kept = 0;
    for (int i = 0; i < l->count; i++) {
        if (first[i] != i) {
            free(l->names[i]);
            continue;
        }
        l->names[kept] = l->names[i], l->tensors[kept++] = l->tensors[i];
    }
    l->count = kept;
    free(first);
    return true;
}

static bool add_named(kn_named_tensors *l, int *cap, const char *prefix, const char *name, kn_tensor *t) {
    size_t len = strlen(prefix) + strlen(name) + 2;
    char *full = malloc(len);
    if (!full) return false;
    snprintf(full, len, "%s%s%s", prefix, *prefix ? "." : "", name);
    bool ok = append_tensor(&l->names, &l->tensors, &l->count, cap, full, t);
    free(full);
    return ok;
}

static bool collect(const kn_module *m, const char *prefix, int which, kn_named_tensors *l, int *cap) {
    if (which & KN_PARAMS)
        for (int i = 0; i < m->n_params; i++) {
            if (!add_named(l, cap, prefix, m->param_names[i], m->params[i])) return false;
        }
    if (which & KN_BUFFERS)
        for (int i = 0; i < m->n_buffers; i++)
            if (!add_named(l, cap, prefix, m->buffer_names[i], m->buffers[i])) return false;
    for (int i = 0; i < m->n_children; i++) {
        size_t len = strlen(prefix) + strlen(m->child_names[i]) + 2;
        char *sub = malloc(len);
        if (!sub) return false;
        snprintf(sub, len, "%s%s%s", prefix, *prefix ? "." : "", m->child_names[i]);
        bool ok = collect(m->children[i], sub, which, l, cap);
        free(sub);
        if (!ok) return false;
    }
    return true;
}

kn_status kn_module_named(void *module, int which, kn_named_tensors *out) {
    if (!out) return kn_error(KN_ERR_NULL, "module_named: output list is NULL");
    *out = (kn_named_tensors){0};
    kn_module *m = as_module(module, "module_named");
    if (!m) return kn_last_status();
    if (which < KN_PARAMS || which > KN_STATE)
        return kn_error(KN_ERR_ARG, "module_named: which must be KN_PARAMS, KN_BUFFERS or KN_STATE, not %d", which);
    int cap = 0;
    if (!collect(m, "", which, out, &cap) || (which == KN_PARAMS && !drop_aliases(out))) {
        kn_named_tensors_free(out);
        return kn_error(KN_ERR_OOM, "module_named: out of host memory");
    }
    return KN_OK;
}

void kn_named_tensors_free(kn_named_tensors *list) {
    if (!list) return;
    for (int i = 0; i < list->count; i++) free(list->names[i]);
    free(list->names), free(list->tensors);
    *list = (kn_named_tensors){0};
}

kn_tensor *kn_module_get(void *module, const char *full_name) {
    kn_module *m = as_module(module, "module_get");
    if (!m) return NULL;
    if (!full_name) return kn_error_null(KN_ERR_NULL, "module_get: name is NULL");
    const char *rest = full_name;
    for (const char *dot; (dot = strchr(rest, '.'));) {
        int32_t at = member(m, rest, (size_t)(dot - rest));
        if (at < 0 || (at & 3) != MEMBER_CHILD) break;
        m = m->children[at >> 2], rest = dot + 1;
    }
    int32_t at = member(m, rest, strlen(rest));
    if (at >= 0 && (at & 3) == MEMBER_PARAM) return m->params[at >> 2];
    if (at >= 0 && (at & 3) == MEMBER_BUFFER) return m->buffers[at >> 2];
    return kn_error_null(KN_ERR_ARG, "module_get: no parameter or buffer named \"%s\"", full_name);
}

int64_t kn_module_num_params(void *module) {
    kn_named_tensors l;
    if (kn_module_named(module, KN_PARAMS, &l) != KN_OK) return -1;
    int64_t n = 0;
    for (int i = 0; i < l.count; i++) n += kn_numel(l.tensors[i]);
    kn_named_tensors_free(&l);
    return n;
}

static void print_tree(const kn_module *m, const char *name, int depth, FILE *f) {
    char desc[128];
    fprintf(f, "%*s%s%s(%s)\n", 2 * depth, "", name, *name ? " " : "", m->type);
    for (int i = 0; i < m->n_params; i++)
        fprintf(f, "%*s%s %s\n", 2 * depth + 2, "", m->param_names[i], kn_describe(m->params[i], desc, sizeof desc));
    for (int i = 0; i < m->n_buffers; i++)
        fprintf(f, "%*s%s %s (buffer)\n", 2 * depth + 2, "", m->buffer_names[i],
                kn_describe(m->buffers[i], desc, sizeof desc));
    for (int i = 0; i < m->n_children; i++) print_tree(m->children[i], m->child_names[i], depth + 1, f);
}

kn_status kn_module_print(void *module, FILE *f) {
    kn_module *m = as_module(module, "module_print");
    if (!m) return kn_last_status();
    if (!f) return kn_error(KN_ERR_NULL, "module_print: FILE is NULL");
    print_tree(m, "", 0, f);
    return KN_OK;
}
