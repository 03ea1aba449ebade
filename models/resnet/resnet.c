/* ResNet: the module tree in torchvision's registration order, its init and its forward. */
#include "resnet/resnet.h"

#include <stddef.h>

#define BN_EPS 1e-5
#define BN_MOMENTUM 0.1

/* Blocks per stage and whether they are bottlenecks (torchvision's _resnet calls). */
static bool depth_layout(int depth, int blocks[4], bool *bottleneck) {
    static const struct { int depth, blocks[4]; bool bottleneck; } table[] = {
        {18, {2, 2, 2, 2}, false}, {34, {3, 4, 6, 3}, false},  {50, {3, 4, 6, 3}, true},
        {101, {3, 4, 23, 3}, true}, {152, {3, 8, 36, 3}, true},
    };
    for (size_t i = 0; i < sizeof table / sizeof *table; i++) {
        if (table[i].depth != depth) continue;
        for (int s = 0; s < 4; s++) blocks[s] = table[i].blocks[s];
        *bottleneck = table[i].bottleneck;
        return true;
    }
    return false;
}

/* A bias-free convolution with torchvision's init: kaiming_normal_(fan_out, relu). */
static kn_nn_conv2d *conv(int64_t in, int64_t out, int64_t kernel, int64_t stride, kn_dtype dtype) {
    kn_conv_opts opts = {.stride = {stride, stride}, .padding = {kernel / 2, kernel / 2}};
    kn_nn_conv2d *c = kn_nn_conv2d_new(in, out, kernel, opts, false, dtype);
    if (c && kn_init_kaiming_normal_(c->weight, 0, KN_FAN_OUT, KN_NL_RELU) != KN_OK) {
        kn_module_free(c);
        return NULL;
    }
    return c;
}

static kn_nn_batch_norm2d *bn(int64_t channels, kn_dtype dtype) {
    return kn_nn_batch_norm2d_new(channels, BN_EPS, BN_MOMENTUM, true, dtype);
}

static kn_tensor *block_forward(void *module, kn_tensor *x) {
    resnet_block *b = module;
    kn_scope_push();
    kn_tensor *h = kn_relu(kn_nn_batch_norm2d_forward(b->bn1, kn_nn_conv2d_forward(b->conv1, x)));
    h = kn_nn_batch_norm2d_forward(b->bn2, kn_nn_conv2d_forward(b->conv2, h));
    if (b->conv3) h = kn_nn_batch_norm2d_forward(b->bn3, kn_nn_conv2d_forward(b->conv3, kn_relu(h)));
    kn_tensor *identity = b->downsample ? kn_module_forward(b->downsample, x) : x;
    return kn_scope_pop_keep(kn_relu(kn_add(h, identity)));
}

/* BasicBlock: 3x3 (stride), 3x3. Bottleneck: 1x1, 3x3 (stride), 1x1 to 4x the width. */
static resnet_block *block_new(int64_t in, int64_t width, int64_t stride, bool bottleneck, kn_dtype dtype) {
    resnet_block *b = kn_module_alloc(sizeof *b, bottleneck ? "Bottleneck" : "BasicBlock");
    if (!b) return NULL;
    b->base.forward = block_forward;
    int64_t out = bottleneck ? 4 * width : width;
    if (bottleneck) {
        b->conv1 = kn_module_add(b, "conv1", conv(in, width, 1, 1, dtype));
        b->bn1 = kn_module_add(b, "bn1", bn(width, dtype));
        b->conv2 = kn_module_add(b, "conv2", conv(width, width, 3, stride, dtype));
        b->bn2 = kn_module_add(b, "bn2", bn(width, dtype));
        b->conv3 = kn_module_add(b, "conv3", conv(width, out, 1, 1, dtype));
        b->bn3 = kn_module_add(b, "bn3", bn(out, dtype));
    } else {
        b->conv1 = kn_module_add(b, "conv1", conv(in, width, 3, stride, dtype));
        b->bn1 = kn_module_add(b, "bn1", bn(width, dtype));
        b->conv2 = kn_module_add(b, "conv2", conv(width, width, 3, 1, dtype));
        b->bn2 = kn_module_add(b, "bn2", bn(width, dtype));
    }
    if (stride != 1 || in != out) {
        kn_module *down = kn_module_add(b, "downsample", kn_nn_sequential_new());
        if (down) {
            kn_module_add(down, NULL, conv(in, out, 1, stride, dtype));
            kn_module_add(down, NULL, bn(out, dtype));
        }
        b->downsample = down;
    }
    return kn_module_check(b);
}

static kn_tensor *model_forward(void *module, kn_tensor *x) { return resnet_forward(module, x); }

resnet *resnet_new(int depth, int64_t num_classes, kn_dtype dtype) {
    int blocks[4];
    bool bottleneck;
    if (!depth_layout(depth, blocks, &bottleneck)) {
        kn_set_error(KN_ERR_ARG, "resnet: depth %d is not one of 18, 34, 50, 101, 152", depth);
        return NULL;
    }
    if (num_classes < 1) {
        kn_set_error(KN_ERR_ARG, "resnet: num_classes must be at least 1, not %lld", (long long)num_classes);
        return NULL;
    }
    resnet *m = kn_module_alloc(sizeof *m, "ResNet");
    if (!m) return NULL;
    m->base.forward = model_forward;
    m->depth = depth, m->num_classes = num_classes;
    m->conv1 = kn_module_add(m, "conv1", conv(3, 64, 7, 2, dtype));
    m->bn1 = kn_module_add(m, "bn1", bn(64, dtype));
    int64_t in = 64;
    for (int s = 0; s < 4; s++) {
        char name[8] = "layer1";
        name[5] = (char)('1' + s);
        kn_module *layer = kn_module_add(m, name, kn_nn_sequential_new());
        int64_t width = 64 << s;
        for (int i = 0; layer && i < blocks[s]; i++) {
            kn_module_add(layer, NULL, block_new(in, width, i == 0 && s > 0 ? 2 : 1, bottleneck, dtype));
            in = bottleneck ? 4 * width : width;
        }
        m->layers[s] = layer;
    }
    m->fc = kn_module_add(m, "fc", kn_nn_linear_new(in, num_classes, true, dtype));
    return kn_module_check(m);
}

void resnet_free(resnet *m) { kn_module_free(m); }

kn_tensor *resnet_forward(resnet *m, kn_tensor *x) {
    if (!m) {
        kn_set_error(KN_ERR_ARG, "resnet_forward: the model is NULL");
        return NULL;
    }
    kn_scope_push();
    kn_tensor *h = kn_relu(kn_nn_batch_norm2d_forward(m->bn1, kn_nn_conv2d_forward(m->conv1, x)));
    h = kn_max_pool2d(h, (kn_pool_opts){.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}});
    for (int s = 0; s < 4; s++) h = kn_module_forward(m->layers[s], h);
    h = kn_flatten(kn_adaptive_avg_pool2d(h, 1, 1), 1, -1);
    return kn_scope_pop_keep(kn_nn_linear_forward(m->fc, h));
}

kn_tensor *resnet_loss(resnet *m, kn_tensor *x, kn_tensor *labels) {
    kn_scope_push();
    return kn_scope_pop_keep(kn_cross_entropy(resnet_forward(m, x), labels, KN_CE_OPTS_DEFAULT));
}
