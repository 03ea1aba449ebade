/* Denoising diffusion (DDPM, Ho et al. 2020) around the UNet: the linear noise schedule, the
 * noise-prediction training loss and ancestral sampling. Noise comes from kiln's Philox
 * generator, so a seed reproduces training and samples. */
#ifndef KILN_MODELS_DDPM_H
#define KILN_MODELS_DDPM_H

#include "unet/unet.h"

typedef struct ddpm_schedule {
    int steps;           /* T */
    double *beta;        /* [T], linear from beta_start to beta_end */
    double *alpha_bar;   /* [T], prod_{s <= t} (1 - beta_s) */
} ddpm_schedule;

/* beta_t = beta_start + (beta_end - beta_start) t / (T - 1), t = 0..T-1 (T >= 2, betas in
 * (0, 1)); errors name the bad value. */
kn_status ddpm_schedule_linear(ddpm_schedule *s, int steps, double beta_start, double beta_end);
void ddpm_schedule_free(ddpm_schedule *s);

/* x_t = sqrt(alpha_bar_t) x0 + sqrt(1 - alpha_bar_t) noise, per image, for steps t[B]. */
kn_tensor *ddpm_add_noise(const ddpm_schedule *s, kn_tensor *x0, kn_tensor *noise, const int *t);
/* The training loss: noise ~ N(0, I), x_t from x0 [B, C, H, W] at steps t[B], and the mean
 * squared error between the model's prediction and the noise. */
kn_tensor *ddpm_loss(unet *m, const ddpm_schedule *s, kn_tensor *x0, const int *t);
/* Ancestral sampling: x_T ~ N(0, I), then for t = T-1..0 the posterior mean given the
 * predicted x0 (clipped to [-1, 1], as DDPM's sampler) plus sqrt(posterior variance) noise.
 * Images of `shape` [N, C, H, W], values in about [-1, 1]. */
kn_tensor *ddpm_sample(unet *m, const ddpm_schedule *s, kn_shape shape);

#endif
