/* The DDPM UNet: the module tree and its forward pass (unet.h). */
#include "unet/unet.h"

#include <math.h>
#include <stdlib.h>

#define CONV3 ((kn_conv_opts){.padding = {1, 1}})

kn_status unet_config_check(const unet_config *c) {
    if (c->in_channels < 1 || c->base_channels < 2 || c->base_channels % 2 || c->groups < 1)
        return kn_set_error(KN_ERR_ARG, "unet: in_channels %d, base_channels %d (even, at least 2) and groups %d",
                            c->in_channels, c->base_channels, c->groups);
    if (c->n_levels < 1 || c->n_levels > UNET_MAX_LEVELS)
        return kn_set_error(KN_ERR_ARG, "unet: %d levels (1 to %d)", c->n_levels, UNET_MAX_LEVELS);
    for (int i = 0; i < c->n_levels; i++)
        if (c->mult[i] < 1 || (c->base_channels * c->mult[i]) % c->groups)
            return kn_set_error(KN_ERR_ARG, "unet: level %d has %d channels, not a positive multiple of %d groups", i,
                                c->base_channels * c->mult[i], c->groups);
    if (c->base_channels % c->groups)
        return kn_set_error(KN_ERR_ARG, "unet: %d base channels are not a multiple of %d groups", c->base_channels,
                            c->groups);
    return KN_OK;
}

static kn_nn_conv2d *zero_conv(kn_nn_conv2d *c) {
    if (c && (kn_init_zeros_(c->weight) != KN_OK || kn_init_zeros_(c->bias) != KN_OK)) {
        kn_module_free(c);
        return NULL;
    }
    return c;
}

static unet_res_block *res_block_new(int64_t in, int64_t out, int64_t temb, int groups) {
    unet_res_block *b = kn_module_alloc(sizeof *b, "ResnetBlock2D");
    if (!b) return NULL;
    b->norm1 = kn_module_add(b, "norm1", kn_nn_group_norm_new(groups, in, 1e-5, true, KN_F32));
    b->conv1 = kn_module_add(b, "conv1", kn_nn_conv2d_new(in, out, 3, CONV3, true, KN_F32));
    b->time_emb_proj = kn_module_add(b, "time_emb_proj", kn_nn_linear_new(temb, out, true, KN_F32));
    b->norm2 = kn_module_add(b, "norm2", kn_nn_group_norm_new(groups, out, 1e-5, true, KN_F32));
    b->conv2 = kn_module_add(b, "conv2", zero_conv(kn_nn_conv2d_new(out, out, 3, CONV3, true, KN_F32)));
    if (in != out)
        b->conv_shortcut = kn_module_add(b, "conv_shortcut", kn_nn_conv2d_new(in, out, 1, (kn_conv_opts){0}, true, KN_F32));
    return kn_module_check(b);
}

/* temb: the embedding after the time MLP, [B, temb]. */
static kn_tensor *res_block_forward(unet_res_block *b, kn_tensor *x, kn_tensor *temb) {
    kn_scope_push();
    kn_tensor *h = kn_nn_conv2d_forward(b->conv1, kn_silu(kn_nn_group_norm_forward(b->norm1, x)));
    kn_tensor *t = kn_nn_linear_forward(b->time_emb_proj, kn_silu(temb));
    h = kn_add(h, kn_unsqueeze(kn_unsqueeze(t, -1), -1));
    h = kn_nn_conv2d_forward(b->conv2, kn_silu(kn_nn_group_norm_forward(b->norm2, h)));
    kn_tensor *shortcut = b->conv_shortcut ? kn_nn_conv2d_forward(b->conv_shortcut, x) : x;
    return kn_scope_pop_keep(kn_add(h, shortcut));
}

static unet_attn_block *attn_block_new(int64_t ch, int groups) {
    unet_attn_block *a = kn_module_alloc(sizeof *a, "AttentionBlock");
    if (!a) return NULL;
    a->norm = kn_module_add(a, "norm", kn_nn_group_norm_new(groups, ch, 1e-5, true, KN_F32));
    a->qkv = kn_module_add(a, "qkv", kn_nn_conv2d_new(ch, 3 * ch, 1, (kn_conv_opts){0}, true, KN_F32));
    a->proj_out = kn_module_add(a, "proj_out", zero_conv(kn_nn_conv2d_new(ch, ch, 1, (kn_conv_opts){0}, true, KN_F32)));
    return kn_module_check(a);
}

/* One head of self-attention over the H x W positions, added to x. */
static kn_tensor *attn_block_forward(unet_attn_block *a, kn_tensor *x) {
    kn_shape s = kn_shape_of(x);
    int64_t B = s.v[0], C = s.v[1], HW = s.v[2] * s.v[3];
    kn_scope_push();
    kn_tensor *qkv = kn_nn_conv2d_forward(a->qkv, kn_nn_group_norm_forward(a->norm, x));
    qkv = kn_permute(kn_reshape(qkv, KN_SHAPE(B, 3, C, HW)), KN_SHAPE(1, 0, 3, 2)); /* [3, B, HW, C] */
    kn_tensor *q = kn_unsqueeze(kn_select(qkv, 0, 0), 1), *k = kn_unsqueeze(kn_select(qkv, 0, 1), 1),
              *v = kn_unsqueeze(kn_select(qkv, 0, 2), 1); /* [B, 1, HW, C] */
    kn_tensor *h = kn_scaled_dot_product_attention(q, k, v, NULL, (kn_sdpa_opts){0});
    h = kn_reshape(kn_transpose(kn_squeeze(h, 1), 1, 2), s);
    return kn_scope_pop_keep(kn_add(x, kn_nn_conv2d_forward(a->proj_out, h)));
}

/* The next level of a list ("down.0", "down.1"...: named by position). */
static kn_module *new_level(kn_module *list) {
    return kn_module_add(list, NULL, kn_module_alloc(sizeof(kn_module), "Level"));
}

unet *unet_new(const unet_config *cfg) {
    if (unet_config_check(cfg) != KN_OK) return NULL;
    unet *m = kn_module_alloc(sizeof *m, "UNet");
    if (!m) return NULL;
    m->cfg = *cfg;
    int64_t ch = cfg->base_channels, temb = 4 * ch, L = cfg->n_levels;
    int g = cfg->groups;
    kn_module *time = kn_module_add(m, "time_embed", kn_module_alloc(sizeof(kn_module), "Sequential"));
    if (!time) return kn_module_check(m);
    m->time_fc1 = kn_module_add(time, "0", kn_nn_linear_new(ch, temb, true, KN_F32));
    m->time_fc2 = kn_module_add(time, "2", kn_nn_linear_new(temb, temb, true, KN_F32));
    m->conv_in = kn_module_add(m, "conv_in", kn_nn_conv2d_new(cfg->in_channels, ch, 3, CONV3, true, KN_F32));
    kn_module *down = kn_module_add(m, "down", kn_module_alloc(sizeof(kn_module), "ModuleList"));
    kn_module *mid = kn_module_add(m, "mid", kn_module_alloc(sizeof(kn_module), "Mid"));
    kn_module *up = kn_module_add(m, "up", kn_module_alloc(sizeof(kn_module), "ModuleList"));
    if (!down || !mid || !up) return kn_module_check(m);
    int64_t width = ch;
    for (int i = 0; i < L; i++) {
        kn_module *lv = new_level(down);
        int64_t out = ch * cfg->mult[i];
        if (!lv) return kn_module_check(m);
        m->down[i] = kn_module_add(lv, "res", res_block_new(width, out, temb, g));
        if (i + 1 < L)
            m->downsample[i] = kn_module_add(lv, "downsample",
                                             kn_nn_conv2d_new(out, out, 3, (kn_conv_opts){.stride = {2, 2}, .padding = {1, 1}}, true, KN_F32));
        width = out;
    }
    m->mid_1 = kn_module_add(mid, "res_1", res_block_new(width, width, temb, g));
    if (cfg->attention) m->mid_attn = kn_module_add(mid, "attn", attn_block_new(width, g));
    m->mid_2 = kn_module_add(mid, "res_2", res_block_new(width, width, temb, g));
    /* up.i pairs with down.i; they are added from level 0 so that the names match. */
    for (int i = 0; i < L; i++) {
        kn_module *lv = new_level(up);
        int64_t out = ch * cfg->mult[i], below = i + 1 < L ? ch * cfg->mult[i + 1] : out;
        if (!lv) return kn_module_check(m);
        m->up[i] = kn_module_add(lv, "res", res_block_new(below + out, out, temb, g));
        if (i > 0) m->upsample[i] = kn_module_add(lv, "upsample", kn_nn_conv2d_new(out, out, 3, CONV3, true, KN_F32));
    }
    m->norm_out = kn_module_add(m, "norm_out", kn_nn_group_norm_new(g, ch, 1e-5, true, KN_F32));
    m->conv_out = kn_module_add(m, "conv_out", zero_conv(kn_nn_conv2d_new(ch, cfg->in_channels, 3, CONV3, true, KN_F32)));
    return kn_module_check(m);
}

kn_tensor *unet_timestep_embedding(kn_tensor *t, int64_t dim) {
    if (!t) return NULL;
    if (dim < 4 || dim % 2) {
        kn_set_error(KN_ERR_ARG, "unet_timestep_embedding: width %lld (even, at least 4)", (long long)dim);
        return NULL;
    }
    int64_t half = dim / 2;
    float *freq = malloc(sizeof *freq * (size_t)half);
    if (!freq) {
        kn_set_error(KN_ERR_OOM, "unet_timestep_embedding: out of host memory");
        return NULL;
    }
    for (int64_t i = 0; i < half; i++) freq[i] = (float)exp(-log(10000.0) * (double)i / (double)(half - 1));
    kn_scope_push();
    kn_tensor *f = kn_from_host(freq, KN_F32, KN_SHAPE(1, half), kn_device_of(t));
    free(freq);
    kn_tensor *arg = kn_mul(kn_unsqueeze(kn_cast(t, KN_F32), 1), f); /* [B, half] */
    kn_tensor *parts[2] = {kn_sin(arg), kn_cos(arg)};
    return kn_scope_pop_keep(kn_cat(parts, 2, 1));
}

kn_tensor *unet_forward(unet *m, kn_tensor *x, kn_tensor *t) {
    if (!m || !x || !t) {
        if (!kn_last_status()) kn_set_error(KN_ERR_ARG, "unet_forward: NULL model, image or steps");
        return NULL;
    }
    const unet_config *c = &m->cfg;
    int64_t scale = 1 << (c->n_levels - 1);
    if (kn_ndim(x) != 4 || kn_size(x, 1) != c->in_channels || kn_size(x, 2) % scale || kn_size(x, 3) % scale) {
        char d[64];
        kn_set_error(KN_ERR_SHAPE, "unet_forward: images %s, want [B, %d, H, W] with H and W multiples of %lld",
                     kn_describe(x, d, sizeof d), c->in_channels, (long long)scale);
        return NULL;
    }
    kn_scope_push();
    kn_tensor *temb = unet_timestep_embedding(t, c->base_channels);
    temb = kn_nn_linear_forward(m->time_fc2, kn_silu(kn_nn_linear_forward(m->time_fc1, temb)));
    kn_tensor *h = kn_nn_conv2d_forward(m->conv_in, x), *skip[UNET_MAX_LEVELS];
    for (int i = 0; i < c->n_levels; i++) {
        h = skip[i] = res_block_forward(m->down[i], h, temb);
        if (m->downsample[i]) h = kn_nn_conv2d_forward(m->downsample[i], h);
    }
    h = res_block_forward(m->mid_1, h, temb);
    if (m->mid_attn) h = attn_block_forward(m->mid_attn, h);
    h = res_block_forward(m->mid_2, h, temb);
    for (int i = c->n_levels - 1; i >= 0; i--) {
        kn_tensor *cat[2] = {h, skip[i]};
        h = res_block_forward(m->up[i], kn_cat(cat, 2, 1), temb);
        if (m->upsample[i])
            h = kn_nn_conv2d_forward(m->upsample[i], kn_upsample_nearest2d(h, 2 * kn_size(h, 2), 2 * kn_size(h, 3)));
    }
    h = kn_nn_conv2d_forward(m->conv_out, kn_silu(kn_nn_group_norm_forward(m->norm_out, h)));
    return kn_scope_pop_keep(h);
}
