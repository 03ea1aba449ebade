/* The interposer list (exec/interpose.h): kept sorted, with one list per mode of the
 * interposers active in it, so the dispatcher's passes touch only those. */
#include "exec/interpose.h"

#include "core/error.h"

typedef struct active_list {
    const kn_interposer *ip[KN_INTERPOSERS_MAX];
    int n;
} active_list;

static const kn_interposer *all[KN_INTERPOSERS_MAX];
static int count;
static active_list active[KN_MODE_COUNT];

kn_status kn_interposer_register(const kn_interposer *ip) {
    if (count == KN_INTERPOSERS_MAX)
        return kn_error(KN_ERR_ARG, "interposer %s: the list is full (%d)", ip->name, KN_INTERPOSERS_MAX);
    for (int i = 0; i < count; i++)
        if (all[i] == ip) return kn_error(KN_ERR_ARG, "interposer %s is registered already", ip->name);
    int at = count++;
    for (; at > 0 && all[at - 1]->order > ip->order; at--) all[at] = all[at - 1];
    all[at] = ip;
    for (int m = 0; m < KN_MODE_COUNT; m++) {
        active[m].n = 0;
        for (int i = 0; i < count; i++)
            if (all[i]->modes & KN_MODE_BIT(m)) active[m].ip[active[m].n++] = all[i];
    }
    return KN_OK;
}

kn_status kn_interpose_record(kn_mode mode, const kn_node *n, const kn_backend *b, void **state, bool *any) {
    const active_list *a = &active[mode];
    kn_status st = KN_OK;
    bool left = false;
    for (int i = 0; i < a->n; i++) {
        state[i] = NULL;
        if (st == KN_OK) st = a->ip[i]->record(n, b, &state[i]);
        left |= state[i] != NULL;
    }
    if (any) *any = left;
    return st;
}

kn_status kn_interpose_done(kn_mode mode, void **state, kn_status st, kn_tensor *const *outs, int n_out) {
    const active_list *a = &active[mode];
    for (int i = a->n - 1; i >= 0; i--)
        if (state[i]) st = a->ip[i]->done(state[i], st, outs, n_out);
    return st;
}

kn_status kn_interpose_view(kn_tensor *t, kn_tensor *v, const struct kn_view_rec *rec) {
    const active_list *a = &active[kn_get_mode()];
    kn_status st = KN_OK;
    for (int i = 0; i < a->n && st == KN_OK; i++)
        if (a->ip[i]->view) st = a->ip[i]->view(t, v, rec);
    return st;
}

/* exec's own interposers; layers above register theirs the same way. */
__attribute__((constructor)) static void register_builtin(void) {
    (void)kn_interposer_register(&kn_shadow_interposer); /* cannot fail: the list starts empty */
    (void)kn_interposer_register(&kn_debug_check_interposer);
}
