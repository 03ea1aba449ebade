/* Autocast (kiln/autocast.h): a per-thread stack of settings, and the policy table the
 * dispatcher applies when an op begins recording (exec/dispatch.c), so no op's API function
 * knows about it. The lists follow PyTorch's autocast op lists (docs/decisions.md). */
#include "exec/autocast.h"

#include "core/error.h"
#include "kiln/autocast.h"

enum { KEEP, TO_LOW, TO_F32, TO_F32_FIRST };

/* What autocast does to each op's inputs: TO_LOW casts f32/f16/bf16 inputs to the autocast
 * dtype; TO_F32 casts f16/bf16 inputs to f32; TO_F32_FIRST only input 0 (batch_norm updates
 * its running stats in place, so they must stay the caller's tensors). */
static const unsigned char policy[KN_OP_COUNT] = {
    [KN_OP_matmul] = TO_LOW, [KN_OP_conv2d] = TO_LOW, [KN_OP_conv_transpose2d] = TO_LOW,
    [KN_OP_scaled_dot_product_attention] = TO_LOW,

    [KN_OP_softmax] = TO_F32, [KN_OP_log_softmax] = TO_F32, [KN_OP_logsumexp] = TO_F32,
    [KN_OP_cross_entropy] = TO_F32, [KN_OP_nll_loss] = TO_F32, [KN_OP_mse_loss] = TO_F32,
    [KN_OP_l1_loss] = TO_F32, [KN_OP_smooth_l1_loss] = TO_F32, [KN_OP_bce_loss] = TO_F32,
    [KN_OP_bce_with_logits] = TO_F32,
    [KN_OP_layer_norm] = TO_F32, [KN_OP_rms_norm] = TO_F32, [KN_OP_group_norm] = TO_F32,
    [KN_OP_batch_norm] = TO_F32_FIRST,
    [KN_OP_sum] = TO_F32, [KN_OP_mean] = TO_F32, [KN_OP_prod] = TO_F32, [KN_OP_var] = TO_F32,
    [KN_OP_std] = TO_F32, [KN_OP_norm] = TO_F32, [KN_OP_cumsum] = TO_F32, [KN_OP_cumprod] = TO_F32,
    [KN_OP_exp] = TO_F32, [KN_OP_expm1] = TO_F32, [KN_OP_log] = TO_F32, [KN_OP_log1p] = TO_F32,
    [KN_OP_log2] = TO_F32, [KN_OP_pow] = TO_F32, [KN_OP_pow_scalar] = TO_F32, [KN_OP_rsqrt] = TO_F32, [KN_OP_reciprocal] = TO_F32,
    [KN_OP_softplus] = TO_F32,
};

#define MAX_DEPTH 64
static _Thread_local kn_dtype saved[MAX_DEPTH];
static _Thread_local int depth;
static _Thread_local kn_dtype current = KN_F32;

kn_status kn_autocast_push(kn_dtype dtype) {
    if (dtype != KN_BF16 && dtype != KN_F16 && dtype != KN_F32)
        return kn_error(KN_ERR_DTYPE, "autocast_push: dtype %s is not bf16, f16 or f32 (off)", kn_dtype_name(dtype));
    if (depth == MAX_DEPTH)
        return kn_error(KN_ERR_ARG, "autocast_push: pushes nest deeper than %d (a pop missing?)", MAX_DEPTH);
    saved[depth++] = current;
    current = dtype;
    return KN_OK;
}

kn_status kn_autocast_pop(void) {
    if (depth == 0) return kn_error(KN_ERR_ARG, "autocast_pop: no kn_autocast_push to undo");
    current = saved[--depth];
    return KN_OK;
}

kn_dtype kn_autocast_dtype(void) { return current; }

kn_dtype kn_autocast_low_for(kn_dtype d) {
    bool cast = current != KN_F32 && (d == KN_F32 || d == KN_F16 || d == KN_BF16);
    return cast ? current : d;
}

static kn_tensor *(*cast_to)(kn_tensor *x, kn_dtype dtype);

void kn_autocast_install_cast(kn_tensor *(*cast)(kn_tensor *x, kn_dtype dtype)) { cast_to = cast; }

static kn_dtype target(int rule, int i, kn_dtype d) {
    switch (rule) {
    case TO_LOW: return kn_autocast_low_for(d);
    case TO_F32_FIRST: return i == 0 && (d == KN_F16 || d == KN_BF16) ? KN_F32 : d;
    case TO_F32: return d == KN_F16 || d == KN_BF16 ? KN_F32 : d;
    default: return d;
    }
}

bool kn_autocast_inputs(kn_op_id op, int n_in, kn_tensor *const *in, kn_tensor **out, bool *changed) {
    *changed = false;
    int rule = policy[op];
    if (current == KN_F32 || rule == KEEP || n_in > KN_NODE_MAX_IN || !cast_to) return true;
    bool any = false;
    for (int i = 0; i < n_in; i++) any |= target(rule, i, in[i]->dtype) != in[i]->dtype;
    if (!any) return true;
    for (int i = 0; i < n_in; i++) {
        kn_dtype d = target(rule, i, in[i]->dtype);
        int same = 0; /* a tensor given twice (attention's q, k, v) is cast once */
        while (same < i && (in[same] != in[i] || target(rule, same, in[same]->dtype) != d)) same++;
        out[i] = d == in[i]->dtype ? in[i] : same < i ? kn_retain(out[same]) : cast_to(in[i], d);
        if (!out[i]) {
            kn_autocast_release(i, in, out);
            return false;
        }
    }
    *changed = true;
    return true;
}

void kn_autocast_release(int n_in, kn_tensor *const *in, kn_tensor *const *out) {
    for (int i = 0; i < n_in; i++)
        if (out[i] != in[i]) kn_release(out[i]);
}
