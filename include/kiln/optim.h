/* Optimizers (AdamW, SGD), learning-rate schedules and gradient clipping, with the exact
 * semantics of torch.optim.AdamW, torch.optim.SGD (single-tensor code paths) and
 * torch.nn.utils.clip_grad_norm_.
 *
 *     kn_tensor *params[] = {w, b};
 *     kn_param_group g = kn_adamw_group(params, 2, 3e-4, 0.1);
 *     kn_optimizer *opt = kn_adamw_new(&g, 1);
 *     kn_lr_schedule s;
 *     kn_lr_schedule_init(&s, "cosine", 3e-4, 3e-5, 100, 5000);
 *     for (int64_t i = 0; i < 5000; i++) {
 *         for (int k = 0; k < accum; k++) kn_backward(kn_div_scalar(loss_of(batch[k]), accum));
 *         kn_clip_grad_norm(params, 2, 1.0, NULL);
 *         kn_optimizer_set_lr(opt, kn_lr_at(&s, i));
 *         kn_optimizer_step(opt);
 *         kn_optimizer_zero_grad(opt);
 *     }
 *     kn_optimizer_free(opt);
 *
 * Gradient accumulation is repeated kn_backward before one step: gradients add, so a trainer
 * that wants the mean over k micro-batches divides each micro-batch's loss by k. */
#ifndef KILN_OPTIM_H
#define KILN_OPTIM_H

#include <stdbool.h>
#include <stdint.h>

#include "kiln/ops_optim.h"
#include "kiln/status.h"
#include "kiln/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The update ops they run, kn_adamw_update and kn_sgd_update, are in kiln/ops_optim.h. */

/* ---- optimizers -------------------------------------------------------------------------- */

/* A parameter group: params (float tensors, retained by the optimizer) and their
 * hyperparameters. AdamW reads beta1, beta2, eps; SGD reads momentum, dampening, nesterov. */
typedef struct kn_param_group {
    kn_tensor *const *params;
    int n_params;
    double lr, weight_decay;
    double beta1, beta2, eps;
    double momentum, dampening;
    bool nesterov;
} kn_param_group;

/* Groups with torch's defaults for the rest (AdamW: betas 0.9, 0.999, eps 1e-8; SGD:
 * dampening 0, no nesterov). */
KN_API kn_param_group kn_adamw_group(kn_tensor *const *params, int n_params, double lr, double weight_decay);
KN_API kn_param_group kn_sgd_group(kn_tensor *const *params, int n_params, double lr, double momentum, double weight_decay);

typedef struct kn_optimizer kn_optimizer;

/* NULL with an error for bad hyperparameters (negative lr, a beta outside [0, 1), nesterov
 * without momentum or with dampening...), a NULL or non-float param, or a param listed twice.
 * The state (moments, momentum buffers) is allocated here, zeroed. */
KN_API kn_optimizer *kn_adamw_new(const kn_param_group *groups, int n_groups);
KN_API kn_optimizer *kn_sgd_new(const kn_param_group *groups, int n_groups);
KN_API void kn_optimizer_free(kn_optimizer *opt);

/* Updates every param that has a gradient (kn_grad), with grad mode off; params without one
 * are skipped and their step counts stay. */
KN_API kn_status kn_optimizer_step(kn_optimizer *opt);
/* kn_optimizer_step with each gradient read as grad * grad_scale rounded to its dtype (what
 * kn_mul_scalar would give), the .grad tensors left as they are: with the factor from
 * kn_clip_grad_norm_coef it makes the same update, bit for bit, as kn_clip_grad_norm then
 * kn_optimizer_step, without a pass writing the clipped gradients. */
KN_API kn_status kn_optimizer_step_scaled(kn_optimizer *opt, double grad_scale);
/* Forgets every param's gradient (torch's zero_grad(set_to_none=True)). */
KN_API kn_status kn_optimizer_zero_grad(kn_optimizer *opt);

/* Sets every group's lr; or each group's lr to its initial lr times scale (for schedules
 * over groups with different lrs: scale = kn_lr_at(s, i) / s->lr). */
KN_API kn_status kn_optimizer_set_lr(kn_optimizer *opt, double lr);
KN_API kn_status kn_optimizer_scale_lr(kn_optimizer *opt, double scale);
KN_API double kn_optimizer_get_lr(const kn_optimizer *opt, int group); /* NaN for a bad group */
KN_API int kn_optimizer_group_count(const kn_optimizer *opt);
KN_API int kn_optimizer_param_count(const kn_optimizer *opt); /* params of all groups, in order */

/* State for checkpoints. State tensors are numbered 0..count-1 and named after the param
 * they belong to (its index over all groups in order): "adamw.exp_avg.3",
 * "adamw.exp_avg_sq.3", "sgd.momentum_buffer.3" (none when momentum is 0). The tensor
 * returned is a new handle of the optimizer's own storage (adopted into the current scope):
 * read it to save, kn_copy_ into it to restore; *name (may be NULL) lives as long as the
 * optimizer. Each param also has a
 * step count (updates made so far); restore it with the tensors for an exact resume. */
KN_API int kn_optimizer_state_count(const kn_optimizer *opt);
KN_API kn_tensor *kn_optimizer_state_tensor(kn_optimizer *opt, int i, const char **name);
KN_API int64_t kn_optimizer_get_step(const kn_optimizer *opt, int param); /* -1 for a bad index */
KN_API kn_status kn_optimizer_set_step(kn_optimizer *opt, int param, int64_t step);

/* ---- learning-rate schedules ------------------------------------------------------------- */

typedef enum kn_lr_decay { KN_LR_CONSTANT, KN_LR_COSINE, KN_LR_LINEAR } kn_lr_decay;

/* Linear warmup over warmup_steps to lr, then decay to min_lr at total_steps (held there
 * after): at 0-based step i < warmup, lr * (i + 1) / warmup; else with
 * p = min(1, (i - warmup) / max(1, total - warmup)): constant lr; cosine
 * min_lr + (lr - min_lr) * (1 + cos(pi p)) / 2; linear lr + (min_lr - lr) * p. */
typedef struct kn_lr_schedule {
    kn_lr_decay decay;
    double lr, min_lr;
    int64_t warmup_steps, total_steps;
} kn_lr_schedule;

/* Fills s from a decay name ("constant", "cosine", "linear"); errors for an unknown name,
 * a negative or non-finite lr, or negative step counts. */
KN_API kn_status kn_lr_schedule_init(kn_lr_schedule *s, const char *decay, double lr, double min_lr, int64_t warmup_steps,
                              int64_t total_steps);
KN_API bool kn_lr_decay_parse(const char *name, kn_lr_decay *out);
KN_API double kn_lr_at(const kn_lr_schedule *s, int64_t step);

/* ---- gradient clipping ------------------------------------------------------------------- */

/* Scales the gradients of params (those that have one) by min(1, max_norm / (total + 1e-6)),
 * where total is the 2-norm of all of them together, computed in the gradients' dtype (f32
 * for f32 grads); *total_norm_out (may be NULL) gets total. Gradients are replaced by their
 * scaled values (kn_set_grad); nothing changes when that factor is 1. */
KN_API kn_status kn_clip_grad_norm(kn_tensor *const *params, int n, double max_norm, double *total_norm_out);
/* The same measure, changing nothing: *coef_out gets the factor kn_clip_grad_norm would scale
 * the gradients by (exactly 1 when it would leave them), for kn_optimizer_step_scaled. */
KN_API kn_status kn_clip_grad_norm_coef(kn_tensor *const *params, int n, double max_norm, double *total_norm_out,
                                        double *coef_out);

#ifdef __cplusplus
}
#endif
#endif
