/* The hooks upper layers install into core (core/hooks.h). */
#include "core/hooks.h"

kn_core_hooks kn_hooks;

void kn_hooks_install_realize(kn_status (*realize)(kn_tensor *t)) { kn_hooks.realize = realize; }

void kn_hooks_install_release_device_memory(void (*release)(kn_device device)) {
    kn_hooks.release_device_memory = release;
}

void kn_hooks_install_tensor_state(struct kn_ag_meta *(*share)(struct kn_ag_meta *m),
                                   void (*release)(struct kn_ag_meta *m)) {
    kn_hooks.ag_share = share;
    kn_hooks.ag_release = release;
}
