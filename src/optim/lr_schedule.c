/* Learning-rate schedules: linear warmup, then constant, cosine or linear decay. */
#include <math.h>
#include <string.h>

#include "core/error.h"
#include "kiln/optim.h"

static const char *const decay_names[] = {"constant", "cosine", "linear"};

bool kn_lr_decay_parse(const char *name, kn_lr_decay *out) {
    for (int k = 0; name && k < 3; k++)
        if (strcmp(name, decay_names[k]) == 0) {
            if (out) *out = (kn_lr_decay)k;
            return true;
        }
    return false;
}

kn_status kn_lr_schedule_init(kn_lr_schedule *s, const char *decay, double lr, double min_lr, int64_t warmup_steps,
                              int64_t total_steps) {
    kn_lr_decay d;
    if (!s) return kn_error(KN_ERR_NULL, "lr_schedule: the schedule is NULL");
    if (!kn_lr_decay_parse(decay, &d))
        return kn_error(KN_ERR_ARG, "lr_schedule: unknown decay \"%s\" (constant, cosine or linear)",
                        decay ? decay : "(null)");
    if (!(lr >= 0 && isfinite(lr)) || !(min_lr >= 0 && isfinite(min_lr)))
        return kn_error(KN_ERR_ARG, "lr_schedule: lr %g and min_lr %g must be finite and >= 0", lr, min_lr);
    if (warmup_steps < 0 || total_steps < 0)
        return kn_error(KN_ERR_ARG, "lr_schedule: warmup_steps %lld and total_steps %lld must be >= 0",
                        (long long)warmup_steps, (long long)total_steps);
    *s = (kn_lr_schedule){d, lr, min_lr, warmup_steps, total_steps};
    return KN_OK;
}

double kn_lr_at(const kn_lr_schedule *s, int64_t step) {
    if (!s) return NAN;
    if (step < s->warmup_steps) return s->lr * (double)(step + 1) / (double)s->warmup_steps;
    int64_t span = s->total_steps - s->warmup_steps;
    double p = (double)(step - s->warmup_steps) / (double)(span > 1 ? span : 1);
    if (p > 1) p = 1;
    switch (s->decay) {
    case KN_LR_COSINE: return s->min_lr + (s->lr - s->min_lr) * 0.5 * (1 + cos(M_PI * p));
    case KN_LR_LINEAR: return s->lr + (s->min_lr - s->lr) * p;
    default: return s->lr;
    }
}
