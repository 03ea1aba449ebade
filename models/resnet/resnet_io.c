/* ResNet state_dicts in safetensors files, under torchvision's names. */
#include "resnet/resnet.h"

kn_status resnet_load(resnet *m, const char *path) {
    if (!m) return kn_set_error(KN_ERR_ARG, "resnet_load: the model is NULL");
    kn_hf_weights *w = kn_hf_weights_open(path);
    if (!w) return kn_last_status();
    /* Each entry keeps its own dtype (f32 weights, i64 num_batches_tracked); f16 and bf16
     * files convert. */
    kn_hf_load_opts opts = {.device = kn_device_of(m->conv1->weight), .dtype = KN_DTYPE_COUNT};
    int unused = 0;
    kn_status st = kn_hf_load_module(m, w, &opts, &unused);
    if (st == KN_OK && unused)
        st = kn_set_error(KN_ERR_ARG, "%s: %d tensors are no part of torchvision's resnet%d state_dict", path, unused,
                          m->depth);
    kn_hf_weights_close(w);
    return st;
}

kn_status resnet_save(resnet *m, const char *path) {
    kn_named_tensors state;
    kn_status st = kn_module_named(m, KN_STATE, &state);
    if (st != KN_OK) return st;
    st = kn_safetensors_save(path, state.count, (const char *const *)state.names, state.tensors, NULL, NULL, 0);
    kn_named_tensors_free(&state);
    return st;
}
