/* Loading --init into a module tree (train_init.h). */
#include "train_init.h"

kn_status train_init_module(void *module, const char *path, const char *task) {
    kn_hf_weights *w = kn_hf_weights_open(path);
    if (!w) return kn_last_status();
    kn_hf_load_opts opts = {.device = kn_default_device(), .dtype = KN_DTYPE_COUNT};
    int unused = 0;
    kn_status st = kn_hf_load_module(module, w, &opts, &unused);
    if (st == KN_OK && unused)
        st = kn_set_error(KN_ERR_ARG, "%s: %d tensors are no part of the %s model (--init takes its state_dict)", path,
                          unused, task);
    kn_hf_weights_close(w);
    return st;
}
