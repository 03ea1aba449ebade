/* The strict and debug schedulers, the table of schedulers by mode, and kn_realize. */
#include "exec/scheduler.h"

#include "core/hooks.h"
#include "exec/dispatch.h"

static kn_status strict_submit(kn_backend *b, kn_node *n) {
    (void)b;
    kn_node_launch(n);
    return KN_OK;
}

static kn_status debug_submit(kn_backend *b, kn_node *n) {
    (void)b;
    return kn_node_run_now(n);
}

const kn_scheduler kn_strict_scheduler = {"strict", strict_submit, NULL, false};
const kn_scheduler kn_debug_scheduler = {"debug", debug_submit, NULL, false};

static const kn_scheduler *const by_mode[KN_MODE_COUNT] = {
    [KN_MODE_STRICT] = &kn_strict_scheduler,
    [KN_MODE_DEBUG] = &kn_debug_scheduler,
    [KN_MODE_FUSED] = &kn_fused_scheduler,
    [KN_MODE_COMPILED] = &kn_compiled_scheduler,
};

const kn_scheduler *kn_scheduler_for(kn_mode mode) { return by_mode[mode]; }

kn_status kn_realize(kn_tensor *t) {
    (void)t;
    kn_status first = KN_OK;
    for (int m = 0; m < KN_MODE_COUNT; m++) {
        if (!by_mode[m] || !by_mode[m]->realize) continue;
        kn_status st = by_mode[m]->realize();
        if (first == KN_OK) first = st;
    }
    return first;
}

__attribute__((constructor)) static void install_realize(void) { kn_hooks_install_realize(kn_realize); }
