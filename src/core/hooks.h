/* What the layers above core install into it, so that core never names them
 * (docs/architecture.md): exec realizes pending work, autograd owns a tensor's autograd state.
 * Each is installed once, before main (a constructor of the layer that provides it), and read
 * without a lock afterwards. A hook that is not installed means its layer is not linked in,
 * so there is nothing for it to do: no pending work, no autograd state. */
#ifndef KILN_CORE_HOOKS_H
#define KILN_CORE_HOOKS_H

#include "kiln/tensor.h"

struct kn_ag_meta;

typedef struct kn_core_hooks {
    /* exec (kn_realize): runs the recorded work t's value depends on, or all recorded work for
     * t == NULL, and returns the first error of launching it. Core calls it before reading
     * values or waiting for the streams; it never asks which mode holds the work. */
    kn_status (*realize)(kn_tensor *t);
    /* exec: lets go of the memory it keeps on device between runs (compiled mode's arenas), once
     * the device's queued work is done; called by kn_memory_empty_cache. */
    void (*release_device_memory)(kn_device device);
    /* autograd: a tensor handle's autograd state (kn_tensor.ag). ag_share returns another
     * reference for a new handle (kn_retain); ag_release drops one when a handle dies. Only
     * called for a non-NULL state, which only autograd ever sets. */
    struct kn_ag_meta *(*ag_share)(struct kn_ag_meta *m);
    void (*ag_release)(struct kn_ag_meta *m);
} kn_core_hooks;

extern kn_core_hooks kn_hooks;

void kn_hooks_install_realize(kn_status (*realize)(kn_tensor *t));
void kn_hooks_install_release_device_memory(void (*release)(kn_device device));
void kn_hooks_install_tensor_state(struct kn_ag_meta *(*share)(struct kn_ag_meta *m),
                                   void (*release)(struct kn_ag_meta *m));

/* kn_hooks.realize(t), or KN_OK when exec is not linked in. */
static inline kn_status kn_realize_pending(kn_tensor *t) { return kn_hooks.realize ? kn_hooks.realize(t) : KN_OK; }

#endif
