/* DDPM schedule, loss and sampler (ddpm.h). */
#include "unet/ddpm.h"

#include <math.h>
#include <stdlib.h>

kn_status ddpm_schedule_linear(ddpm_schedule *s, int steps, double beta_start, double beta_end) {
    *s = (ddpm_schedule){0};
    if (steps < 2 || !(beta_start > 0 && beta_start < 1) || !(beta_end > 0 && beta_end < 1))
        return kn_set_error(KN_ERR_ARG, "ddpm: %d steps (at least 2) and betas from %g to %g (each in (0, 1))", steps,
                            beta_start, beta_end);
    s->beta = malloc(sizeof *s->beta * (size_t)steps);
    s->alpha_bar = malloc(sizeof *s->alpha_bar * (size_t)steps);
    if (!s->beta || !s->alpha_bar) {
        ddpm_schedule_free(s);
        return kn_set_error(KN_ERR_OOM, "ddpm: out of host memory");
    }
    s->steps = steps;
    double prod = 1;
    for (int t = 0; t < steps; t++) {
        s->beta[t] = beta_start + (beta_end - beta_start) * t / (steps - 1);
        prod *= 1 - s->beta[t];
        s->alpha_bar[t] = prod;
    }
    return KN_OK;
}

void ddpm_schedule_free(ddpm_schedule *s) {
    free(s->beta);
    free(s->alpha_bar);
    *s = (ddpm_schedule){0};
}

/* A per-image coefficient [B, 1, 1, 1] on x's device: f(t[b]). */
static kn_tensor *per_image(const ddpm_schedule *s, const int *t, int64_t B, kn_device dev, double (*f)(const ddpm_schedule *, int)) {
    float *v = malloc(sizeof *v * (size_t)B);
    if (!v) {
        kn_set_error(KN_ERR_OOM, "ddpm: out of host memory");
        return NULL;
    }
    kn_tensor *out = NULL;
    for (int64_t b = 0; b < B; b++) {
        if (t[b] < 0 || t[b] >= s->steps) {
            kn_set_error(KN_ERR_INDEX, "ddpm: step %d of image %lld is outside [0, %d)", t[b], (long long)b, s->steps);
            free(v);
            return NULL;
        }
        v[b] = (float)f(s, t[b]);
    }
    out = kn_from_host(v, KN_F32, KN_SHAPE(B, 1, 1, 1), dev);
    free(v);
    return out;
}

static double signal_coef(const ddpm_schedule *s, int t) { return sqrt(s->alpha_bar[t]); }
static double noise_coef(const ddpm_schedule *s, int t) { return sqrt(1 - s->alpha_bar[t]); }

kn_tensor *ddpm_add_noise(const ddpm_schedule *s, kn_tensor *x0, kn_tensor *noise, const int *t) {
    if (!x0 || !noise) return NULL;
    int64_t B = kn_size(x0, 0);
    kn_device dev = kn_device_of(x0);
    kn_scope_push();
    kn_tensor *x = kn_add(kn_mul(x0, per_image(s, t, B, dev, signal_coef)), kn_mul(noise, per_image(s, t, B, dev, noise_coef)));
    return kn_scope_pop_keep(x);
}

kn_tensor *ddpm_loss(unet *m, const ddpm_schedule *s, kn_tensor *x0, const int *t) {
    if (!x0) return NULL;
    int64_t B = kn_size(x0, 0);
    float *steps = malloc(sizeof *steps * (size_t)B);
    if (!steps) {
        kn_set_error(KN_ERR_OOM, "ddpm: out of host memory");
        return NULL;
    }
    for (int64_t b = 0; b < B; b++) steps[b] = (float)t[b];
    kn_scope_push();
    kn_tensor *noise = kn_randn_like(x0);
    kn_tensor *tt = kn_from_host(steps, KN_F32, KN_SHAPE(B), kn_device_of(x0));
    free(steps);
    kn_tensor *pred = unet_forward(m, ddpm_add_noise(s, x0, noise, t), tt);
    return kn_scope_pop_keep(kn_mse_loss(pred, noise, KN_REDUCTION_MEAN));
}

/* One reverse step t -> t-1 for the whole batch (every image at the same step). */
static kn_tensor *reverse_step(unet *m, const ddpm_schedule *s, kn_tensor *x, int t) {
    double ab = s->alpha_bar[t], ab_prev = t > 0 ? s->alpha_bar[t - 1] : 1.0, beta = s->beta[t];
    kn_scope_push();
    kn_tensor *tt = kn_full(KN_SHAPE(kn_size(x, 0)), t, KN_F32);
    kn_tensor *eps = unet_forward(m, x, tt);
    kn_tensor *x0 = kn_clamp(kn_div_scalar(kn_sub(x, kn_mul_scalar(eps, sqrt(1 - ab))), sqrt(ab)), -1, 1);
    /* The posterior q(x_{t-1} | x_t, x0): mean c0 x0 + ct x_t, variance beta (1 - ab_prev) / (1 - ab). */
    double c0 = sqrt(ab_prev) * beta / (1 - ab), ct = sqrt(1 - beta) * (1 - ab_prev) / (1 - ab);
    kn_tensor *mean = kn_add(kn_mul_scalar(x0, c0), kn_mul_scalar(x, ct));
    if (t > 0) mean = kn_add(mean, kn_mul_scalar(kn_randn_like(x), sqrt(beta * (1 - ab_prev) / (1 - ab))));
    return kn_scope_pop_keep(mean);
}

kn_tensor *ddpm_sample(unet *m, const ddpm_schedule *s, kn_shape shape) {
    bool was_training = kn_module_is_training(m);
    kn_module_train(m, false);
    kn_no_grad_push();
    kn_tensor *x = kn_randn(shape, KN_F32);
    for (int t = s->steps - 1; x && t >= 0; t--) {
        kn_tensor *next = reverse_step(m, s, x, t);
        kn_release(x);
        x = next;
        /* Bound the queue of work (and the memory it holds) once per step. */
        if (x && kn_sync() != KN_OK) {
            kn_release(x);
            x = NULL;
        }
    }
    kn_no_grad_pop();
    kn_module_train(m, was_training);
    return x;
}
