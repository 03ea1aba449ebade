/* Layers: Linear, Embedding(Bag), norms, convolutions, Dropout, MLP, Sequential, residuals.
 *
 * Each layer is a module struct (its kn_module `base` first) with typed fields for its
 * parameters (the same handles the tree owns). Constructors draw PyTorch's default
 * initialization from the Philox generator and return NULL with an error on bad arguments;
 * forward functions are compositions of kiln ops (so autograd differentiates them) and
 * return a new tensor, or NULL with the op's error. Pooling needs no module: use
 * kn_max_pool2d, kn_avg_pool2d and kn_adaptive_avg_pool2d (ops_nn.h). */
#ifndef KILN_NN_LAYERS_H
#define KILN_NN_LAYERS_H

#include "kiln/nn_module.h"
#include "kiln/ops.h"

#ifdef __cplusplus
extern "C" {
#endif

/* y = x weight^T + bias; weight [out, in], bias [out] (or NULL). Init: weight
 * kaiming_uniform(a = sqrt(5)), i.e. U(+-1/sqrt(in)), bias U(+-1/sqrt(in)). */
typedef struct kn_nn_linear {
    kn_module base;
    int64_t in_features, out_features;
    kn_tensor *weight, *bias;
} kn_nn_linear;
KN_API kn_nn_linear *kn_nn_linear_new(int64_t in_features, int64_t out_features, bool bias, kn_dtype dtype);
KN_API kn_tensor *kn_nn_linear_forward(kn_nn_linear *l, kn_tensor *x);

/* Rows of weight [num, dim] picked by integer indices of any shape. Init: N(0, 1). */
typedef struct kn_nn_embedding {
    kn_module base;
    int64_t num_embeddings, dim;
    kn_tensor *weight;
} kn_nn_embedding;
KN_API kn_nn_embedding *kn_nn_embedding_new(int64_t num_embeddings, int64_t dim, kn_dtype dtype);
KN_API kn_tensor *kn_nn_embedding_forward(kn_nn_embedding *e, kn_tensor *indices);

/* Sums, means or maxima of bags of rows (kn_embedding_bag); weight [num, dim], init N(0, 1). */
typedef struct kn_nn_embedding_bag {
    kn_module base;
    int64_t num_embeddings, dim;
    kn_bag_mode mode;
    kn_tensor *weight;
} kn_nn_embedding_bag;
KN_API kn_nn_embedding_bag *kn_nn_embedding_bag_new(int64_t num_embeddings, int64_t dim, kn_bag_mode mode, kn_dtype dtype);
/* indices [B, L] with offsets NULL, or 1-d with offsets [B]; per_sample_weights (sum mode) or NULL. */
KN_API kn_tensor *kn_nn_embedding_bag_forward(kn_nn_embedding_bag *e, kn_tensor *indices, kn_tensor *offsets,
                                       kn_tensor *per_sample_weights);

/* Normalizes over the trailing dims `shape`; weight ones and bias zeros when affine (else NULL). */
typedef struct kn_nn_layer_norm {
    kn_module base;
    kn_shape shape;
    double eps;
    kn_tensor *weight, *bias;
} kn_nn_layer_norm;
KN_API kn_nn_layer_norm *kn_nn_layer_norm_new(kn_shape shape, double eps, bool affine, kn_dtype dtype);
KN_API kn_tensor *kn_nn_layer_norm_forward(kn_nn_layer_norm *n, kn_tensor *x);

/* x / sqrt(mean(x^2) + eps) * weight over the trailing dims `shape`; weight ones. */
typedef struct kn_nn_rms_norm {
    kn_module base;
    kn_shape shape;
    double eps;
    kn_tensor *weight;
} kn_nn_rms_norm;
KN_API kn_nn_rms_norm *kn_nn_rms_norm_new(kn_shape shape, double eps, kn_dtype dtype);
KN_API kn_tensor *kn_nn_rms_norm_forward(kn_nn_rms_norm *n, kn_tensor *x);

/* x [N, C, *] normalized within `groups` groups of channels; weight [C] ones, bias zeros. */
typedef struct kn_nn_group_norm {
    kn_module base;
    int64_t groups, channels;
    double eps;
    kn_tensor *weight, *bias;
} kn_nn_group_norm;
KN_API kn_nn_group_norm *kn_nn_group_norm_new(int64_t groups, int64_t channels, double eps, bool affine, kn_dtype dtype);
KN_API kn_tensor *kn_nn_group_norm_forward(kn_nn_group_norm *n, kn_tensor *x);

/* x [N, C, H, W]. Training: batch statistics, and the buffers running_mean (zeros),
 * running_var (ones; updated with the unbiased variance) and num_batches_tracked (i64) are
 * updated in place. Eval: the running statistics. weight ones, bias zeros when affine. */
typedef struct kn_nn_batch_norm2d {
    kn_module base;
    int64_t channels;
    double eps, momentum;
    kn_tensor *weight, *bias, *running_mean, *running_var, *num_batches_tracked;
} kn_nn_batch_norm2d;
KN_API kn_nn_batch_norm2d *kn_nn_batch_norm2d_new(int64_t channels, double eps, double momentum, bool affine,
                                           kn_dtype dtype);
KN_API kn_tensor *kn_nn_batch_norm2d_forward(kn_nn_batch_norm2d *n, kn_tensor *x);

/* Square-kernel convolutions (opts as kn_conv2d; zero fields take PyTorch's defaults).
 * Conv2d: weight [out, in/groups, k, k]; ConvTranspose2d: weight [in, out/groups, k, k].
 * Init as Linear, with fan_in = weight.size(1) * k * k as in PyTorch. */
typedef struct kn_nn_conv2d {
    kn_module base;
    int64_t in_channels, out_channels, kernel;
    kn_conv_opts opts;
    kn_tensor *weight, *bias;
} kn_nn_conv2d;
KN_API kn_nn_conv2d *kn_nn_conv2d_new(int64_t in_channels, int64_t out_channels, int64_t kernel, kn_conv_opts opts,
                               bool bias, kn_dtype dtype);
KN_API kn_tensor *kn_nn_conv2d_forward(kn_nn_conv2d *c, kn_tensor *x);
KN_API kn_nn_conv2d *kn_nn_conv_transpose2d_new(int64_t in_channels, int64_t out_channels, int64_t kernel,
                                         kn_conv_opts opts, bool bias, kn_dtype dtype);
KN_API kn_tensor *kn_nn_conv_transpose2d_forward(kn_nn_conv2d *c, kn_tensor *x);

/* Zeroes elements with probability p and scales the rest by 1/(1-p), in training mode only. */
typedef struct kn_nn_dropout {
    kn_module base;
    double p;
} kn_nn_dropout;
KN_API kn_nn_dropout *kn_nn_dropout_new(double p);
KN_API kn_tensor *kn_nn_dropout_forward(kn_nn_dropout *d, kn_tensor *x);

typedef enum kn_act { KN_ACT_RELU = 0, KN_ACT_GELU, KN_ACT_GELU_TANH, KN_ACT_SILU } kn_act;
KN_API kn_tensor *kn_nn_activation(kn_tensor *x, kn_act act);

/* Plain: fc2(act(fc1(x))). Gated (SwiGLU with KN_ACT_SILU, as Llama):
 * down_proj(act(gate_proj(x)) * up_proj(x)). Children are named as in those models. */
typedef struct kn_nn_mlp {
    kn_module base;
    kn_act act;
    kn_nn_linear *up, *gate, *down;   /* fc1, NULL, fc2 when not gated */
} kn_nn_mlp;
KN_API kn_nn_mlp *kn_nn_mlp_new(int64_t dim, int64_t hidden, kn_act act, bool gated, bool bias, kn_dtype dtype);
KN_API kn_tensor *kn_nn_mlp_forward(kn_nn_mlp *m, kn_tensor *x);

/* A module whose forward runs its children (one-input modules, added with
 * kn_module_add(seq, NULL, child): named "0", "1", ...) in order. */
KN_API kn_module *kn_nn_sequential_new(void);
/* x + f(norm(x)) for one-input modules f and norm (norm NULL: x + f(x)). */
KN_API kn_tensor *kn_nn_residual(kn_tensor *x, void *norm, void *f);

#ifdef __cplusplus
}
#endif
#endif
