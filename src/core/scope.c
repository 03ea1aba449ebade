/* Scopes for temporaries: each op's result belongs to the innermost scope of its thread. */
#include <stdlib.h>

#include "core/error.h"
#include "core/tensor_impl.h"

typedef struct kn_scope {
    kn_tensor **items;
    int64_t count, cap;
    struct kn_scope *parent;
} kn_scope;

static _Thread_local kn_scope *current_scope;

static bool scope_add(kn_scope *s, kn_tensor *t) {
    if (s->count == s->cap) {
        int64_t cap = s->cap ? s->cap * 2 : 64;
        kn_tensor **items = realloc(s->items, sizeof *items * (size_t)cap);
        if (!items) return false;
        s->items = items;
        s->cap = cap;
    }
    t->scope = s;
    t->scope_slot = s->count;
    s->items[s->count++] = t;
    return true;
}

kn_tensor *kn_scope_adopt(kn_tensor *t) {
    if (t && current_scope && !scope_add(current_scope, t)) {
        /* The caller still gets a valid tensor; it just is not released with the scope. */
        kn_error(KN_ERR_OOM, "scope: out of host memory tracking a temporary");
    }
    return t;
}

void kn_scope_push(void) {
    kn_scope *s = calloc(1, sizeof *s);
    if (!s) {
        kn_error(KN_ERR_OOM, "scope_push: out of host memory");
        return;
    }
    s->parent = current_scope;
    current_scope = s;
}

void kn_scope_pop(void) {
    kn_scope *s = current_scope;
    if (!s) return;
    current_scope = s->parent;
    for (int64_t i = 0; i < s->count; i++) {
        kn_tensor *t = s->items[i];
        if (!t) continue;
        t->scope = NULL;
        t->scope_slot = -1;
        kn_tensor_decref(t);
    }
    free(s->items);
    free(s);
}

/* Takes t out of the scope that owns its reference (the reference passes to the caller). */
static void scope_detach(kn_tensor *t) {
    kn_scope *s = t->scope;
    if (!s) return;
    s->items[t->scope_slot] = NULL;
    t->scope = NULL;
    t->scope_slot = -1;
}

kn_tensor *kn_keep(kn_tensor *t) {
    /* A tensor of an outer scope already outlives the current one. */
    if (!t || !t->scope || t->scope != current_scope) return t;
    kn_scope *parent = t->scope->parent;
    scope_detach(t);
    if (parent && !scope_add(parent, t)) kn_error(KN_ERR_OOM, "keep: out of host memory");
    return t;
}

kn_tensor *kn_scope_pop_keep(kn_tensor *t) {
    kn_keep(t);
    kn_scope_pop();
    return t;
}

void kn_release(kn_tensor *t) {
    if (!t) return;
    scope_detach(t);
    kn_tensor_decref(t);
}
