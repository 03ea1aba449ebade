/* The op table, expanded from the .def lists: each op's entry and its signature. */
#include "ops/op_table.h"
#include "ops/op_rules.h"

#include <string.h>

#define ENTRY(name_, kind_, dtypes_, flags_, expr_, infer_) \
    [KN_OP_##name_] = {.name = #name_, .kind = kind_, .dtypes = dtypes_, .flags = flags_, .expr = expr_, .infer = infer_},
const kn_op_def kn_op_table[KN_OP_COUNT] = {
#define KN_OP(name_, kind_, dtypes_, flags_, infer_, expr_, ins_, attrs_) \
    ENTRY(name_, kind_, dtypes_, flags_, expr_, infer_)
#include "ops/defs/all.def" /* the elementwise forms name kn_infer_elementwise */
#undef KN_OP
};

/* Each op's parameter list is a static array in its own case, where `attrs_t` names the op's
 * attribute struct for the offsets (an attribute item does not know its op's name). The items
 * expand to initializers with commas, so each form puts them in its own body. */
#define CASE_OPEN(name)                  \
    case KN_OP_##name: {                 \
        typedef kn_attrs_##name attrs_t; \
        static const kn_param params[] = {
#define CASE_CLOSE                \
    {NULL, KN_PARAM_IN, 0}};      \
    (void)sizeof(attrs_t);        \
    return params;                \
    }
const kn_param *kn_op_params(kn_op_id op) {
#define KN_IN(nm) {#nm, KN_PARAM_IN, 0},
#define KN_OPT(nm) {#nm, KN_PARAM_OPT, 0},
#define KN_INS(nm) {#nm, KN_PARAM_INS, 0},
#define KN_A(T, nm) {#nm, KN_PARAM_##T, (uint16_t)offsetof(attrs_t, nm)},
#define KN_OP(name, kind, dtypes, flags, infer, expr, ins, attrs) CASE_OPEN(name) ins attrs CASE_CLOSE
#define KN_UNARY(name, cls, out, attrs, expr) CASE_OPEN(name) KN_IN(x) attrs CASE_CLOSE
#define KN_BINARY(name, cls, out, attrs, expr) CASE_OPEN(name) KN_IN(x) KN_IN(y) attrs CASE_CLOSE
#define KN_TERNARY(name, cls, out, attrs, expr) CASE_OPEN(name) KN_IN(x) KN_IN(y) KN_IN(z) attrs CASE_CLOSE
    switch (op) {
#include "ops/defs/all.def"
    default: break;
    }
#undef KN_OP
#undef KN_UNARY
#undef KN_BINARY
#undef KN_TERNARY
#undef KN_A
#undef KN_IN
#undef KN_OPT
#undef KN_INS
    static const kn_param none[] = {{NULL, KN_PARAM_IN, 0}};
    return none;
}

/* kn_reduce_attrs is a view of these ops' attributes. */
#define REDUCE_HEAD(name)                                                                          \
    _Static_assert(offsetof(kn_attrs_##name, dims) == offsetof(kn_reduce_attrs, dims), #name);     \
    _Static_assert(sizeof(((kn_attrs_##name *)0)->dims) == sizeof(kn_shape), #name);
#define CHECK_KN_KIND_REDUCTION(name)                                                        \
    REDUCE_HEAD(name)                                                                        \
    _Static_assert(offsetof(kn_attrs_##name, keepdim) == offsetof(kn_reduce_attrs, keepdim), #name);
#define CHECK_KN_KIND_ELEMENTWISE(name)
#define CHECK_KN_KIND_OPAQUE(name)
#define CHECK_KN_KIND_CREATION(name)                                                                 \
    _Static_assert(offsetof(kn_attrs_##name, shape) == offsetof(kn_creation_attrs, shape) &&            \
                       offsetof(kn_attrs_##name, dtype) == offsetof(kn_creation_attrs, dtype),          \
                   #name);
#define KN_OP(name, kind, ...) CHECK_##kind(name)
#include "ops/defs/all.def"
#undef KN_OP
REDUCE_HEAD(cumsum)
REDUCE_HEAD(cumprod)
REDUCE_HEAD(softmax)
REDUCE_HEAD(log_softmax)
REDUCE_HEAD(softmax_backward)
REDUCE_HEAD(log_softmax_backward)

/* Ops that share one kernel share their attributes' layout, and the kernel reads the first
 * op's struct for all (its comment says so): roll and repeat run pad's remap kernel;
 * scatter_add and index_add scatter_reduce's; conv_transpose2d and conv2d_backward_weight
 * conv2d's; avg_pool2d max_pool2d's; rms_norm and the norm backward ops layer_norm's;
 * nll_loss cross_entropy's; the pointwise losses mse_loss's reduction; the attention backward
 * the forward's (but mask_grad). */
#define SAME_FIELD(a, b, f)                                                                  \
    _Static_assert(offsetof(kn_attrs_##a, f) == offsetof(kn_attrs_##b, f) &&                 \
                       sizeof(((kn_attrs_##a *)0)->f) == sizeof(((kn_attrs_##b *)0)->f),     \
                   #a " and " #b ": " #f);
SAME_FIELD(roll, pad, mode) SAME_FIELD(roll, pad, value) SAME_FIELD(roll, pad, before) SAME_FIELD(roll, pad, size)
SAME_FIELD(repeat, pad, mode) SAME_FIELD(repeat, pad, value) SAME_FIELD(repeat, pad, before) SAME_FIELD(repeat, pad, size)
SAME_FIELD(scatter_add, scatter_reduce, dim) SAME_FIELD(scatter_add, scatter_reduce, reduce)
SAME_FIELD(scatter_add, scatter_reduce, include_self) SAME_FIELD(scatter_add, scatter_reduce, alpha)
SAME_FIELD(index_add, scatter_reduce, dim) SAME_FIELD(index_add, scatter_reduce, reduce)
SAME_FIELD(index_add, scatter_reduce, include_self) SAME_FIELD(index_add, scatter_reduce, alpha)
SAME_FIELD(conv_transpose2d, conv2d, stride) SAME_FIELD(conv_transpose2d, conv2d, padding)
SAME_FIELD(conv_transpose2d, conv2d, dilation) SAME_FIELD(conv_transpose2d, conv2d, groups)
SAME_FIELD(conv2d_backward_weight, conv2d, stride) SAME_FIELD(conv2d_backward_weight, conv2d, padding)
SAME_FIELD(conv2d_backward_weight, conv2d, dilation) SAME_FIELD(conv2d_backward_weight, conv2d, groups)
SAME_FIELD(avg_pool2d, max_pool2d, kernel) SAME_FIELD(avg_pool2d, max_pool2d, stride)
SAME_FIELD(avg_pool2d, max_pool2d, padding) SAME_FIELD(avg_pool2d, max_pool2d, dilation)
SAME_FIELD(avg_pool2d, max_pool2d, exclude_pad) SAME_FIELD(avg_pool2d, max_pool2d, ceil_mode)
SAME_FIELD(rms_norm, layer_norm, inner) SAME_FIELD(rms_norm, layer_norm, eps)
SAME_FIELD(layer_norm_backward, layer_norm, inner) SAME_FIELD(layer_norm_backward, layer_norm, eps)
SAME_FIELD(rms_norm_backward, layer_norm, inner) SAME_FIELD(rms_norm_backward, layer_norm, eps)
SAME_FIELD(nll_loss, cross_entropy, reduction) SAME_FIELD(nll_loss, cross_entropy, ignore_index)
SAME_FIELD(nll_loss, cross_entropy, probs) SAME_FIELD(nll_loss, cross_entropy, label_smoothing)
SAME_FIELD(l1_loss, mse_loss, reduction) SAME_FIELD(smooth_l1_loss, mse_loss, reduction)
SAME_FIELD(bce_loss, mse_loss, reduction) SAME_FIELD(bce_with_logits, mse_loss, reduction)
#define SDPA_BACKWARD_FIELD(f) SAME_FIELD(scaled_dot_product_attention_backward, scaled_dot_product_attention, f)
SDPA_BACKWARD_FIELD(causal) SDPA_BACKWARD_FIELD(causal_align) SDPA_BACKWARD_FIELD(scale) SDPA_BACKWARD_FIELD(dropout_p)

int kn_op_lookup(const char *name) {
    for (int i = 0; i < KN_OP_COUNT; i++)
        if (strcmp(kn_op_table[i].name, name) == 0) return i;
    return -1;
}
