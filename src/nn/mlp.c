/* Activations and the feed-forward block: plain (fc2(act(fc1 x))) or gated (SwiGLU). */
#include "core/error.h"
#include "nn/nn_internal.h"

kn_tensor *kn_nn_activation(kn_tensor *x, kn_act act) {
    switch (act) {
    case KN_ACT_RELU: return kn_relu(x);
    case KN_ACT_GELU: return kn_gelu(x);
    case KN_ACT_GELU_TANH: return kn_gelu_tanh(x);
    case KN_ACT_SILU: return kn_silu(x);
    }
    return kn_error_null(KN_ERR_ARG, "activation: unknown activation %d", (int)act);
}

static kn_tensor *mlp_forward(void *m, kn_tensor *x) { return kn_nn_mlp_forward(m, x); }

kn_nn_mlp *kn_nn_mlp_new(int64_t dim, int64_t hidden, kn_act act, bool gated, bool bias, kn_dtype dtype) {
    if (act < KN_ACT_RELU || act > KN_ACT_SILU) return kn_error_null(KN_ERR_ARG, "MLP: unknown activation %d", (int)act);
    kn_nn_mlp *m = kn_module_alloc(sizeof *m, "MLP");
    if (!m) return NULL;
    m->base.forward = mlp_forward;
    m->act = act;
    if (gated) {
        m->gate = kn_module_add(m, "gate_proj", kn_nn_linear_new(dim, hidden, bias, dtype));
        m->up = kn_module_add(m, "up_proj", kn_nn_linear_new(dim, hidden, bias, dtype));
        m->down = kn_module_add(m, "down_proj", kn_nn_linear_new(hidden, dim, bias, dtype));
    } else {
        m->up = kn_module_add(m, "fc1", kn_nn_linear_new(dim, hidden, bias, dtype));
        m->down = kn_module_add(m, "fc2", kn_nn_linear_new(hidden, dim, bias, dtype));
    }
    return kn_module_check(m);
}

kn_tensor *kn_nn_mlp_forward(kn_nn_mlp *m, kn_tensor *x) {
    if (!m) return kn_error_null_input("MLP", 0), NULL;
    nn_enter(m);
    kn_scope_push();
    kn_tensor *h = kn_nn_activation(kn_nn_linear_forward(m->gate ? m->gate : m->up, x), m->act);
    if (m->gate) h = kn_mul(h, kn_nn_linear_forward(m->up, x));
    return nn_leave(kn_scope_pop_keep(kn_nn_linear_forward(m->down, h)));
}
