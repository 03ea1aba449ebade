/* AdamW and SGD optimizers: parameter groups, per-param state, the step. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/tensor_impl.h"
#include "kiln/autograd.h"
#include "kiln/nn.h"
#include "kiln/ops.h"
#include "kiln/optim.h"
#include "kiln/runtime.h"
#include "ops/ops_internal.h"
#include "ops/optim_check.h"

typedef enum { ADAMW, SGD } opt_kind;

typedef struct opt_group {
    kn_param_group h; /* hyperparameters (params unused) */
    double initial_lr;
} opt_group;

typedef struct opt_param {
    kn_tensor *param; /* the caller's handle, referenced */
    int group;
    int64_t step;
    kn_tensor *state[2]; /* AdamW: exp_avg, exp_avg_sq; SGD: the momentum buffer or NULL */
} opt_param;

struct kn_optimizer {
    opt_kind kind;
    int n_groups, n_params;
    opt_group *groups;
    opt_param *params;
    int n_state; /* every param's state tensors in order, with their names */
    kn_tensor **state;
    char **names;
};

static const char *kind_name(opt_kind k) { return k == ADAMW ? "adamw" : "sgd"; }

void kn_optimizer_free(kn_optimizer *opt) {
    if (!opt) return;
    for (int j = 0; j < opt->n_params; j++) kn_tensor_decref(opt->params[j].param);
    for (int s = 0; s < opt->n_state; s++) {
        kn_tensor_decref(opt->state[s]);
        free(opt->names[s]);
    }
    free(opt->groups);
    free(opt->params);
    free(opt->state);
    free(opt->names);
    free(opt);
}

static kn_status check_group(opt_kind kind, const kn_param_group *g, int gi) {
    char why[160];
    const char *e = kind == ADAMW ? kn_adamw_check(g->lr, g->beta1, g->beta2, g->eps, g->weight_decay, why, sizeof why)
                                  : kn_sgd_check(g->lr, g->momentum, g->dampening, g->weight_decay, g->nesterov, why,
                                                 sizeof why);
    if (e) return kn_error(KN_ERR_ARG, "%s: group %d: %s", kind_name(kind), gi, e);
    if (g->n_params < 0 || (g->n_params > 0 && !g->params))
        return kn_error(KN_ERR_NULL, "%s: group %d: params is NULL or n_params (%d) is negative", kind_name(kind), gi,
                        g->n_params);
    for (int k = 0; k < g->n_params; k++) {
        kn_tensor *p = g->params[k];
        if (!p) return kn_error(KN_ERR_NULL, "%s: group %d: param %d is NULL", kind_name(kind), gi, k);
        if (!kn_dtype_is_float(p->dtype))
            return kn_error(KN_ERR_DTYPE, "%s: group %d: param %d has dtype %s; params must be floats",
                            kind_name(kind), gi, k, kn_dtype_name(p->dtype));
    }
    return KN_OK;
}

/* Allocates the state of param j (zeroed): moments (f32 for f16/bf16 params), or a momentum
 * buffer when its group has momentum. */
static kn_status add_state(kn_optimizer *opt, int j) {
    static const char *const names[2][2] = {{"exp_avg", "exp_avg_sq"}, {"momentum_buffer"}};
    opt_param *q = &opt->params[j];
    kn_tensor *p = q->param;
    kn_dtype d = opt->kind == ADAMW && p->dtype != KN_F64 ? KN_F32 : p->dtype;
    int n = opt->kind == ADAMW ? 2 : opt->groups[q->group].h.momentum != 0;
    for (int k = 0; k < n; k++) {
        kn_tensor *t = kn_full_on(kn_shape_of(p), 0, d, p->storage->device);
        if (!t) return kn_last_status();
        char name[64];
        snprintf(name, sizeof name, "%s.%s.%d", kind_name(opt->kind), names[opt->kind][k], j);
        if (!(opt->names[opt->n_state] = malloc(strlen(name) + 1)))
            return kn_error(KN_ERR_OOM, "%s: out of host memory", kind_name(opt->kind));
        strcpy(opt->names[opt->n_state], name);
        /* the optimizer's own reference; the caller's scope drops the one t came with */
        q->state[k] = opt->state[opt->n_state++] = kn_tensor_incref(t);
    }
    return KN_OK;
}

/* Whether a and b are handles (or equal views) of the same values. */
static bool same_values(const kn_tensor *a, const kn_tensor *b) {
    bool same = a->storage == b->storage && a->offset == b->offset && a->ndim == b->ndim;
    for (int d = 0; same && d < a->ndim; d++) same = a->shape[d] == b->shape[d] && a->stride[d] == b->stride[d];
    return same;
}

static kn_optimizer *optimizer_new(opt_kind kind, const kn_param_group *groups, int n_groups) {
    if (!groups || n_groups < 1) {
        kn_error(KN_ERR_ARG, "%s: needs at least one parameter group (got %d)", kind_name(kind), groups ? n_groups : 0);
        return NULL;
    }
    int n_params = 0;
    for (int gi = 0; gi < n_groups; gi++) {
        if (check_group(kind, &groups[gi], gi) != KN_OK) return NULL;
        n_params += groups[gi].n_params;
    }
    kn_optimizer *opt = calloc(1, sizeof *opt);
    if (!opt) return kn_error(KN_ERR_OOM, "%s: out of host memory", kind_name(kind)), NULL;
    opt->kind = kind;
    opt->groups = calloc((size_t)n_groups, sizeof *opt->groups);
    opt->params = calloc((size_t)n_params + 1, sizeof *opt->params);
    opt->state = calloc(2 * (size_t)n_params + 1, sizeof *opt->state);
    opt->names = calloc(2 * (size_t)n_params + 1, sizeof *opt->names);
    if (!opt->groups || !opt->params || !opt->state || !opt->names) {
        kn_optimizer_free(opt);
        return kn_error(KN_ERR_OOM, "%s: out of host memory", kind_name(kind)), NULL;
    }
    opt->n_groups = n_groups;
    for (int gi = 0; gi < n_groups; gi++) {
        opt->groups[gi] = (opt_group){.h = groups[gi], .initial_lr = groups[gi].lr};
        opt->groups[gi].h.params = NULL; /* the caller's array; the params are in opt->params */
        for (int k = 0; k < groups[gi].n_params; k++) {
            kn_tensor *p = groups[gi].params[k];
            for (int j = 0; j < opt->n_params; j++)
                if (same_values(opt->params[j].param, p)) {
                    kn_error(KN_ERR_ARG, "%s: group %d: param %d is already param %d of the optimizer",
                             kind_name(kind), gi, k, j);
                    kn_optimizer_free(opt);
                    return NULL;
                }
            opt->params[opt->n_params++] = (opt_param){.param = kn_tensor_incref(p), .group = gi};
        }
    }
    kn_scope_push();
    kn_status st = KN_OK;
    for (int j = 0; j < opt->n_params && st == KN_OK; j++) st = add_state(opt, j);
    kn_scope_pop();
    if (st != KN_OK) {
        kn_optimizer_free(opt);
        return NULL;
    }
    return opt;
}

kn_optimizer *kn_adamw_new(const kn_param_group *groups, int n_groups) {
    return optimizer_new(ADAMW, groups, n_groups);
}
kn_optimizer *kn_sgd_new(const kn_param_group *groups, int n_groups) { return optimizer_new(SGD, groups, n_groups); }

kn_param_group kn_adamw_group(kn_tensor *const *params, int n_params, double lr, double weight_decay) {
    return (kn_param_group){.params = params, .n_params = n_params, .lr = lr, .weight_decay = weight_decay,
                            .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8};
}

kn_param_group kn_sgd_group(kn_tensor *const *params, int n_params, double lr, double momentum, double weight_decay) {
    return (kn_param_group){.params = params, .n_params = n_params, .lr = lr, .weight_decay = weight_decay,
                            .momentum = momentum};
}

static kn_status null_optimizer(const char *fn) { return kn_error(KN_ERR_NULL, "%s: the optimizer is NULL", fn); }

/* Updates param j from grad g times grad_scale; its step count advances only when the update
 * is recorded. */
static kn_status update(kn_optimizer *opt, int j, kn_tensor *g, double grad_scale) {
    opt_param *q = &opt->params[j];
    const kn_param_group *h = &opt->groups[q->group].h;
    kn_status st = opt->kind == ADAMW
                       ? kn_adamw_update_scaled(q->param, g, q->state[0], q->state[1], h->lr, h->beta1, h->beta2,
                                                h->eps, h->weight_decay, q->step + 1, grad_scale)
                       : kn_sgd_update_scaled(q->param, g, q->state[0], h->lr, h->momentum, h->dampening,
                                              h->weight_decay, h->nesterov, q->step == 0, grad_scale);
    if (st == KN_OK) q->step++;
    return st;
}

static kn_status step(kn_optimizer *opt, const char *fn, double grad_scale) {
    if (!opt) return null_optimizer(fn);
    kn_scope_push();
    kn_status st = KN_OK;
    for (int j = 0; j < opt->n_params && st == KN_OK; j++) {
        kn_tensor *g = kn_grad(opt->params[j].param);
        if (g) st = update(opt, j, g, grad_scale);
    }
    kn_scope_pop();
    return st;
}

kn_status kn_optimizer_step(kn_optimizer *opt) { return step(opt, "optimizer_step", 1); }
kn_status kn_optimizer_step_scaled(kn_optimizer *opt, double grad_scale) {
    return step(opt, "optimizer_step_scaled", grad_scale);
}

kn_status kn_optimizer_zero_grad(kn_optimizer *opt) {
    if (!opt) return null_optimizer("optimizer_zero_grad");
    for (int j = 0; j < opt->n_params; j++) {
        kn_status st = kn_zero_grad(opt->params[j].param);
        if (st != KN_OK) return st;
    }
    return KN_OK;
}

static kn_status set_lrs(kn_optimizer *opt, const char *fn, double lr, bool scale) {
    if (!opt) return null_optimizer(fn);
    for (int gi = 0; gi < opt->n_groups; gi++) {
        double v = scale ? opt->groups[gi].initial_lr * lr : lr;
        if (!(v >= 0 && isfinite(v)))
            return kn_error(KN_ERR_ARG, "%s: lr of group %d would be %g; it must be finite and >= 0", fn, gi, v);
    }
    for (int gi = 0; gi < opt->n_groups; gi++) opt->groups[gi].h.lr = scale ? opt->groups[gi].initial_lr * lr : lr;
    return KN_OK;
}

kn_status kn_optimizer_set_lr(kn_optimizer *opt, double lr) { return set_lrs(opt, "optimizer_set_lr", lr, false); }
kn_status kn_optimizer_scale_lr(kn_optimizer *opt, double scale) {
    return set_lrs(opt, "optimizer_scale_lr", scale, true);
}

double kn_optimizer_get_lr(const kn_optimizer *opt, int group) {
    return opt && group >= 0 && group < opt->n_groups ? opt->groups[group].h.lr : NAN;
}

int kn_optimizer_group_count(const kn_optimizer *opt) { return opt ? opt->n_groups : 0; }
int kn_optimizer_param_count(const kn_optimizer *opt) { return opt ? opt->n_params : 0; }
int kn_optimizer_state_count(const kn_optimizer *opt) { return opt ? opt->n_state : 0; }

kn_tensor *kn_optimizer_state_tensor(kn_optimizer *opt, int i, const char **name) {
    if (!opt) return null_optimizer("optimizer_state_tensor"), NULL;
    if (i < 0 || i >= opt->n_state)
        return kn_error(KN_ERR_INDEX, "optimizer_state_tensor: index %d is out of range [0, %d)", i, opt->n_state),
               NULL;
    if (name) *name = opt->names[i];
    return kn_scope_adopt(kn_retain(opt->state[i]));
}

int64_t kn_optimizer_get_step(const kn_optimizer *opt, int param) {
    return opt && param >= 0 && param < opt->n_params ? opt->params[param].step : -1;
}

kn_status kn_optimizer_set_step(kn_optimizer *opt, int param, int64_t step) {
    if (!opt) return null_optimizer("optimizer_set_step");
    if (param < 0 || param >= opt->n_params)
        return kn_error(KN_ERR_INDEX, "optimizer_set_step: param %d is out of range [0, %d)", param, opt->n_params);
    if (step < 0) return kn_error(KN_ERR_ARG, "optimizer_set_step: step is %lld; it must be >= 0", (long long)step);
    opt->params[param].step = step;
    return KN_OK;
}
