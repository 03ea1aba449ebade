/* A small DDPM denoiser UNet (Ho et al. 2020) as a kn_module tree, predicting the noise in an
 * image x_t [B, C, H, W] at diffusion steps t [B]:
 *
 *     time_embed.{0,2}       sinusoidal embedding of t (width ch) -> Linear, SiLU, Linear (4 ch)
 *     conv_in                3x3 conv to ch channels
 *     down.i.res             a residual block per level i (ch * mult[i] channels); its output
 *                            is the skip connection of level i
 *     down.i.downsample      3x3 conv with stride 2 (all levels but the last)
 *     mid.res_1, mid.attn, mid.res_2   at the lowest resolution (attn optional)
 *     up.i.res               a residual block over [h, skip of level i] (from the last level up)
 *     up.i.upsample          nearest x2 then 3x3 conv (all levels but the first)
 *     norm_out, conv_out     GroupNorm, SiLU, 3x3 conv back to C channels
 *
 * A residual block (names as diffusers' ResnetBlock2D): h = conv1(silu(norm1(x))) +
 * time_emb_proj(silu(temb)) per channel; out = conv2(silu(norm2(h))) + conv_shortcut(x) (a 1x1
 * conv when the width changes). Like DDPM, conv2, the attention output projection and conv_out
 * start at zero, so the untrained network predicts zero noise and each block starts as its
 * shortcut. H and W must be divisible by 2^(n_levels - 1). */
#ifndef KILN_MODELS_UNET_H
#define KILN_MODELS_UNET_H

#include <kiln/kiln.h>

#define UNET_MAX_LEVELS 4

typedef struct unet_config {
    int in_channels;
    int base_channels;              /* ch; also the width of the sinusoidal embedding */
    int n_levels;
    int mult[UNET_MAX_LEVELS];      /* channels of level i: ch * mult[i] */
    int groups;                     /* GroupNorm groups (divides every width) */
    bool attention;                 /* one self-attention block at the lowest resolution */
} unet_config;

typedef struct unet_res_block {
    kn_module base;
    kn_nn_group_norm *norm1, *norm2;
    kn_nn_conv2d *conv1, *conv2, *conv_shortcut; /* conv_shortcut NULL when widths match */
    kn_nn_linear *time_emb_proj;
} unet_res_block;

typedef struct unet_attn_block {
    kn_module base;
    kn_nn_group_norm *norm;
    kn_nn_conv2d *qkv, *proj_out; /* 1x1 convs */
} unet_attn_block;

typedef struct unet {
    kn_module base;
    unet_config cfg;
    kn_nn_linear *time_fc1, *time_fc2;
    kn_nn_conv2d *conv_in, *conv_out;
    kn_nn_group_norm *norm_out;
    unet_res_block *down[UNET_MAX_LEVELS], *up[UNET_MAX_LEVELS], *mid_1, *mid_2;
    kn_nn_conv2d *downsample[UNET_MAX_LEVELS], *upsample[UNET_MAX_LEVELS];
    unet_attn_block *mid_attn; /* NULL without attention */
} unet;

kn_status unet_config_check(const unet_config *c);
/* A model with PyTorch's default init (the current Philox seed) and the zero-initialized
 * layers above; free with kn_module_free. NULL with an error on a bad config. */
unet *unet_new(const unet_config *cfg);

/* DDPM's sinusoidal embedding of steps t [B] (float): [B, dim] with
 * emb[b, i] = sin(t_b f_i), emb[b, half + i] = cos(t_b f_i), f_i = 10000^(-i / (half - 1)),
 * half = dim / 2 (dim even, at least 4). */
kn_tensor *unet_timestep_embedding(kn_tensor *t, int64_t dim);
/* The predicted noise [B, C, H, W] for x [B, C, H, W] (f32) at steps t [B] (f32). */
kn_tensor *unet_forward(unet *m, kn_tensor *x, kn_tensor *t);

#endif
