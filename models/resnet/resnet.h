/* ResNet (torchvision's resnet18/34/50/101/152) as a kn_module tree whose state_dict names,
 * order, shapes and dtypes are torchvision's ("conv1.weight", "layer1.0.bn1.running_mean",
 * "layer2.0.downsample.0.weight", "fc.bias", ...; num_batches_tracked is i64), so a file
 * written by safetensors.torch.save_file(model.state_dict()) loads as it is. Bottleneck blocks
 * stride in their 3x3 convolution (torchvision's "ResNet v1.5"). */
#ifndef KILN_MODELS_RESNET_H
#define KILN_MODELS_RESNET_H

#include <kiln/kiln.h>

/* One residual block: BasicBlock (conv3, bn3 NULL) or Bottleneck. */
typedef struct resnet_block {
    kn_module base;
    kn_nn_conv2d *conv1, *conv2, *conv3;
    kn_nn_batch_norm2d *bn1, *bn2, *bn3;
    kn_module *downsample; /* Sequential(1x1 conv, BatchNorm2d) when the shape changes, else NULL */
} resnet_block;

typedef struct resnet {
    kn_module base;
    int depth;             /* 18, 34, 50, 101 or 152 */
    int64_t num_classes;
    kn_nn_conv2d *conv1;
    kn_nn_batch_norm2d *bn1;
    kn_module *layers[4];  /* Sequentials of resnet_block: layer1..layer4 */
    kn_nn_linear *fc;
} resnet;

/* A model of `depth` on the default device (on meta: shapes only) with torchvision's
 * initialization drawn from the Philox generator: convolutions kaiming_normal (fan_out, relu),
 * batch norms weight 1 and bias 0, fc as Linear's default. Training mode, as torchvision's
 * constructors leave it. NULL with an error for another depth or num_classes < 1. */
resnet *resnet_new(int depth, int64_t num_classes, kn_dtype dtype);
void resnet_free(resnet *m); /* NULL is ignored */

/* Logits [N, num_classes] for images x [N, 3, H, W] (H, W >= 32 keep every stage non-empty).
 * In training mode batch norms use batch statistics and update their running statistics
 * (kn_module_train switches the whole tree). */
kn_tensor *resnet_forward(resnet *m, kn_tensor *x);
/* Mean cross-entropy of the logits against class indices labels [N] (i64). */
kn_tensor *resnet_loss(resnet *m, kn_tensor *x, kn_tensor *labels);

/* Loads a torchvision state_dict (kiln/hf.h: one safetensors file, or a directory with
 * model.safetensors or shards and their index), onto the model's device. Stored in the model's
 * dtype on the CPU the weights share the file's mapping (copy-on-write), else they convert
 * (f16 and bf16 files to f32). Every entry must be there with torchvision's shape and dtype,
 * and nothing else; on failure the model is unchanged and the message names the file and the
 * first problem. */
kn_status resnet_load(resnet *m, const char *path);
/* Saves the whole state_dict (parameters and buffers) under torchvision's names. */
kn_status resnet_save(resnet *m, const char *path);

#endif
