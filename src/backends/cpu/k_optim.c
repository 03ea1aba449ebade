/* CPU kernels of the optimizer updates (src/ops/defs/optim.def). Each runs through the
 * elementwise engine over the node's inputs (param first), which splits large tensors
 * across threads; runs with unit strides take a vectorizable loop. The arithmetic follows
 * torch's single-tensor code op by op, in the compute type (f32 for f16/bf16 params). The
 * grad is read times the node's grad_scale, rounded to its dtype as kn_mul_scalar rounds it,
 * so a clipped step is the same floats as scaling the grads first. */
#include <math.h>

#include "backends/cpu/cpu_kernels.h"

/* Element i of operand k (type T) when the run is strided. */
#define AT(T, k, i) (((T *)ptr[k])[(i) * stride[k]])

/* AdamW on one element: p, m, v updated from g; a is the node's kn_attrs_adamw_update. */
#define ADAMW_ELEM(CT, p, m, v, g, a, small)                                                         \
    do {                                                                                             \
        p = p * (CT)a->decay;                                                                        \
        /* exp_avg.lerp_(grad, 1 - beta1): torch picks the form by the weight's size */              \
        m = small ? m + (CT)a->beta1_weight * (g - m) : g - (g - m) * ((CT)1 - (CT)a->beta1_weight); \
        v = v * (CT)a->beta2 + (CT)a->one_minus_beta2 * g * g;                                       \
        CT denom_ = sqrt##CT##_fn(v) / (CT)a->bias_correction2_sqrt + (CT)a->eps;                    \
        p = p + -(CT)a->step_size * m / denom_;                                                      \
    } while (0)
#define sqrtfloat_fn sqrtf
#define sqrtdouble_fn sqrt

/* Operands: 0 param (T), 1 exp_avg, 2 exp_avg_sq (CT), 3 grad (T). */
#define ADAMW_INNER(sfx, T, CT, LD, ST)                                                           \
    static int adamw_##sfx(char *const *ptr, const int64_t *stride, int64_t n, const void *ctx) { \
        const kn_attrs_adamw_update *a = &((const kn_attrs *)ctx)->adamw_update;                  \
        bool small = fabs(a->beta1_weight) < 0.5;                                                 \
        const CT gs = (CT)a->grad_scale;                                                          \
        if (stride[0] == 1 && stride[1] == 1 && stride[2] == 1 && stride[3] == 1) {               \
            T *restrict pp = (T *)ptr[0];                                                         \
            CT *restrict mp = (CT *)ptr[1], *restrict vp = (CT *)ptr[2];                          \
            const T *restrict gp = (const T *)ptr[3];                                             \
            for (int64_t i = 0; i < n; i++) {                                                     \
                CT p = LD(pp[i]), m = mp[i], v = vp[i], g = LD(ST(LD(gp[i]) * gs));                \
                ADAMW_ELEM(CT, p, m, v, g, a, small);                                             \
                pp[i] = ST(p), mp[i] = m, vp[i] = v;                                              \
            }                                                                                     \
            return 0;                                                                             \
        }                                                                                         \
        for (int64_t i = 0; i < n; i++) {                                                         \
            CT p = LD(AT(T, 0, i)), m = AT(CT, 1, i), v = AT(CT, 2, i);                           \
            CT g = LD(ST(LD(AT(T, 3, i)) * gs));                                                  \
            ADAMW_ELEM(CT, p, m, v, g, a, small);                                                 \
            AT(T, 0, i) = ST(p), AT(CT, 1, i) = m, AT(CT, 2, i) = v;                              \
        }                                                                                         \
        return 0;                                                                                 \
    }
ADAMW_INNER(f32, float, float, KN_LD, KN_ST)
ADAMW_INNER(f64, double, double, KN_LD, KN_ST)
ADAMW_INNER(f16, uint16_t, float, KN_LD_F16, KN_ST_F16)
ADAMW_INNER(bf16, uint16_t, float, KN_LD_BF16, KN_ST_BF16)

/* SGD on one element: g is the grad, b the buffer (when momentum != 0). */
#define SGD_ELEM(CT, p, g, b, a, nesterov, first, has_buf)                                    \
    do {                                                                                      \
        if (a->weight_decay != 0) g = g + (CT)a->weight_decay * p;                            \
        if (has_buf) {                                                                        \
            b = first ? g : b * (CT)a->momentum + (CT)(1 - a->dampening) * g;                 \
            g = nesterov ? g + (CT)a->momentum * b : b;                                       \
        }                                                                                     \
        p = p + (CT)(-a->lr) * g;                                                             \
    } while (0)

/* Operands: 0 param, 1 grad, 2 momentum buffer (when present), all T. */
#define SGD_INNER(sfx, T, CT, LD, ST)                                                           \
    static int sgd_##sfx(char *const *ptr, const int64_t *stride, int64_t n, const void *ctx) { \
        const kn_attrs *at = ctx;                                                               \
        const kn_attrs_sgd_update *a = &at->sgd_update;                                         \
        bool nesterov = a->nesterov, first = a->first_step;                                     \
        bool has_buf = kn_input_pos(at, KN_SLOT(sgd_update, momentum_buffer)) >= 0;             \
        const CT gs = (CT)a->grad_scale;                                                        \
        if (stride[0] == 1 && stride[1] == 1 && (!has_buf || stride[2] == 1)) {                 \
            T *restrict pp = (T *)ptr[0], *restrict bp = has_buf ? (T *)ptr[2] : NULL;          \
            const T *restrict gp = (const T *)ptr[1];                                           \
            if (!has_buf) {                                                                     \
                for (int64_t i = 0; i < n; i++) {                                               \
                    CT p = LD(pp[i]), g = LD(ST(LD(gp[i]) * gs)), b = 0;                        \
                    SGD_ELEM(CT, p, g, b, a, false, false, false);                              \
                    pp[i] = ST(p);                                                              \
                }                                                                               \
                return 0;                                                                       \
            }                                                                                   \
            for (int64_t i = 0; i < n; i++) {                                                   \
                CT p = LD(pp[i]), g = LD(ST(LD(gp[i]) * gs)), b = LD(bp[i]);                    \
                SGD_ELEM(CT, p, g, b, a, nesterov, first, true);                                \
                pp[i] = ST(p), bp[i] = ST(b);                                                   \
            }                                                                                   \
            return 0;                                                                           \
        }                                                                                       \
        for (int64_t i = 0; i < n; i++) {                                                       \
            CT p = LD(AT(T, 0, i)), g = LD(ST(LD(AT(T, 1, i)) * gs));                           \
            CT b = has_buf ? LD(AT(T, 2, i)) : 0;                                               \
            SGD_ELEM(CT, p, g, b, a, nesterov, first, has_buf);                                 \
            AT(T, 0, i) = ST(p);                                                                \
            if (has_buf) AT(T, 2, i) = ST(b);                                                   \
        }                                                                                       \
        return 0;                                                                               \
    }
SGD_INNER(f32, float, float, KN_LD, KN_ST)
SGD_INNER(f64, double, double, KN_LD, KN_ST)
SGD_INNER(f16, uint16_t, float, KN_LD_F16, KN_ST_F16)
SGD_INNER(bf16, uint16_t, float, KN_LD_BF16, KN_ST_BF16)

static kn_ew_inner_fn pick(kn_dtype d, kn_ew_inner_fn f32, kn_ew_inner_fn f64, kn_ew_inner_fn f16,
                           kn_ew_inner_fn bf16) {
    return d == KN_F32 ? f32 : d == KN_F64 ? f64 : d == KN_F16 ? f16 : bf16;
}

static kn_status adamw_update(kn_node *n) {
    kn_ew_run_operands(n->in, n->n_in, pick(n->in[0]->dtype, adamw_f32, adamw_f64, adamw_f16, adamw_bf16),
                       &n->attrs);
    return KN_OK;
}

static kn_status sgd_update(kn_node *n) {
    kn_ew_run_operands(n->in, n->n_in, pick(n->in[0]->dtype, sgd_f32, sgd_f64, sgd_f16, sgd_bf16), &n->attrs);
    return KN_OK;
}

const kn_kernel_reg kn_cpu_kernels_optim[] = {
    {KN_OP_adamw_update, adamw_update, KN_DTS_FLOAT},
    {KN_OP_sgd_update, sgd_update, KN_DTS_FLOAT},
    {0},
};
