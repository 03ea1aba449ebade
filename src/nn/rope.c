/* Rotary position embeddings in Hugging Face Llama's rotate-half convention. */
#include "core/error.h"
#include "nn/nn_internal.h"

kn_tensor *kn_nn_rope(kn_tensor *x, int64_t offset, double theta) {
    if (!x) return kn_error_null_input("rope", 0), NULL;
    char desc[96];
    int nd = kn_ndim(x);
    if (nd < 2 || kn_size(x, -1) % 2)
        return kn_error_null(KN_ERR_SHAPE, "rope: x must be [..., T, D] with D even, not %s", kn_describe(x, desc, sizeof desc));
    if (!kn_dtype_is_float(kn_dtype_of(x)))
        return kn_error_null(KN_ERR_DTYPE, "rope: x must be a float tensor, not %s", kn_describe(x, desc, sizeof desc));
    if (!(theta > 0) || offset < 0)
        return kn_error_null(KN_ERR_ARG, "rope: theta %g must be positive and offset %lld non-negative", theta,
                             (long long)offset);
    int64_t T = kn_size(x, -2), D = kn_size(x, -1), half = D / 2;
    kn_dtype xt = kn_dtype_of(x), ct = xt == KN_F64 ? KN_F64 : KN_F32;
    kn_scope_push();
    /* inv_freq[i] = 1 / theta^(2i / D); angle[t, i] = (offset + t) * inv_freq[i], as HF in f32 */
    kn_tensor *exponent = kn_div_scalar(kn_arange(0, (double)D, 2, ct), (double)D);
    kn_tensor *inv_freq = kn_reciprocal(kn_pow(kn_scalar(theta, ct), exponent));
    kn_tensor *angle = kn_outer(kn_arange((double)offset, (double)(offset + T), 1, ct), inv_freq);
    kn_tensor *emb = kn_cat((kn_tensor *[]){angle, angle}, 2, 1);
    kn_tensor *cos = kn_cast(kn_cos(emb), xt), *sin = kn_cast(kn_sin(emb), xt);
    kn_tensor *x1 = kn_narrow(x, nd - 1, 0, half), *x2 = kn_narrow(x, nd - 1, half, half);
    kn_tensor *rotated = kn_cat((kn_tensor *[]){kn_neg(x2), x1}, 2, nd - 1);
    return kn_scope_pop_keep(kn_add(kn_mul(x, cos), kn_mul(rotated, sin)));
}
