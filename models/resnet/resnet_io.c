/* ResNet state_dicts in safetensors files, under torchvision's names. */
#include "resnet/resnet.h"

/* Loads or saves every state_dict entry of m (parameters and buffers, in order) in one call. */
static kn_status with_state(resnet *m, const char *path, bool load) {
    kn_named_tensors state;
    kn_status st = kn_module_named(m, KN_STATE, &state);
    if (st != KN_OK) return st;
    if (load) {
        kn_no_grad_push(); /* writing into parameters is no step of training */
        st = kn_safetensors_load_into(path, state.count, (const char *const *)state.names, state.tensors,
                                      KN_LOAD_STRICT | KN_LOAD_CAST);
        kn_no_grad_pop();
    } else
        st = kn_safetensors_save(path, state.count, (const char *const *)state.names, state.tensors, NULL, NULL, 0);
    kn_named_tensors_free(&state);
    return st;
}

kn_status resnet_load(resnet *m, const char *path) { return with_state(m, path, true); }

kn_status resnet_save(resnet *m, const char *path) { return with_state(m, path, false); }
