/* Optimizers, schedules and clipping against float64 references written here, following
 * torch.optim.AdamW / SGD and torch.nn.utils.clip_grad_norm_. */
#include <stdlib.h>
#include <string.h>

#include "harness.h"

/* Several steps of a few roundings each: f32 results get 5x the elementwise tolerance. */
static tolerance steps_tol(kn_dtype d) {
    tolerance t = tol_for(d);
    if (d == KN_F32 || d == KN_F64) t.rtol *= 5, t.atol *= 5;
    return t;
}

static void ref_adamw(double *p, double *m, double *v, const double *g, int64_t n, const kn_param_group *h,
                      int64_t step) {
    double bc1 = 1 - pow(h->beta1, (double)step), bc2 = 1 - pow(h->beta2, (double)step);
    for (int64_t i = 0; i < n; i++) {
        p[i] *= 1 - h->lr * h->weight_decay;
        m[i] = h->beta1 * m[i] + (1 - h->beta1) * g[i];
        v[i] = h->beta2 * v[i] + (1 - h->beta2) * g[i] * g[i];
        p[i] -= h->lr / bc1 * m[i] / (sqrt(v[i]) / sqrt(bc2) + h->eps);
    }
}

static void ref_sgd(double *p, double *buf, const double *g, int64_t n, const kn_param_group *h, bool first) {
    for (int64_t i = 0; i < n; i++) {
        double d = g[i] + h->weight_decay * p[i];
        if (h->momentum != 0) {
            buf[i] = first ? d : h->momentum * buf[i] + (1 - h->dampening) * d;
            d = h->nesterov ? d + h->momentum * buf[i] : buf[i];
        }
        p[i] -= h->lr * d;
    }
}

/* A fresh random gradient for p (set with kn_set_grad); its values into g. */
static void new_grad(kn_tensor *p, double *g) {
    kn_tensor *t = rand_tensor(kn_shape_of(p), kn_dtype_of(p), -1, 1);
    CHECK(kn_set_grad(p, t) == KN_OK);
    double *v = read_f64(t);
    memcpy(g, v, sizeof(double) * (size_t)kn_numel(p));
    free(v);
}

static kn_tensor *param(kn_shape shape, kn_dtype dt) {
    return kn_requires_grad(rand_tensor(shape, dt, -1, 1), true);
}

static void test_adamw_matches_reference_with_groups(void) {
    for (int k = 0; k < 4; k++) {
        kn_dtype dt = FLOAT_DTYPES[k];
        bool half = dt == KN_F16 || dt == KN_BF16;
        /* b is large enough to be split across threads; c never gets a gradient */
        kn_tensor *a = param(KN_SHAPE(37, 19), dt), *b = param(KN_SHAPE(70001), dt), *c = param(KN_SHAPE(4), dt);
        kn_param_group groups[2] = {kn_adamw_group((kn_tensor *[]){a, c}, 2, 1e-2, 0.1),
                                    {.params = (kn_tensor *[]){b}, .n_params = 1, .lr = 3e-2, .weight_decay = 0,
                                     .beta1 = 0.8, .beta2 = 0.99, .eps = 1e-6}};
        kn_optimizer *opt = kn_adamw_new(groups, 2);
        CHECK(opt != NULL);
        kn_tensor *ps[2] = {a, b};
        const kn_param_group *hs[2] = {&groups[0], &groups[1]};
        double *p[2], *m[2], *v[2], *g[2], *c0 = read_f64(c);
        for (int j = 0; j < 2; j++) {
            int64_t n = kn_numel(ps[j]);
            p[j] = read_f64(ps[j]), g[j] = malloc(8 * (size_t)n);
            m[j] = calloc((size_t)n, 8), v[j] = calloc((size_t)n, 8);
        }
        int steps = half ? 1 : 5; /* half params round each step; one step keeps the reference exact */
        for (int s = 1; s <= steps; s++) {
            for (int j = 0; j < 2; j++) {
                new_grad(ps[j], g[j]);
                ref_adamw(p[j], m[j], v[j], g[j], kn_numel(ps[j]), hs[j], s);
            }
            CHECK(kn_optimizer_step(opt) == KN_OK);
            CHECK_CLOSE(a, p[0], steps_tol(dt), kn_dtype_name(dt));
            CHECK_CLOSE(b, p[1], steps_tol(dt), "group 1");
        }
        CHECK_CLOSE(c, c0, tol_for(dt), "a param without a gradient is left alone");
        CHECK(kn_optimizer_get_step(opt, 0) == steps && kn_optimizer_get_step(opt, 1) == 0 &&
              kn_optimizer_get_step(opt, 2) == steps);
        /* state 0, 1 are a's moments (f32 for half params), 2, 3 c's, 4, 5 b's */
        const char *name = NULL;
        kn_tensor *m_b = kn_optimizer_state_tensor(opt, 4, &name);
        CHECK(name && strcmp(name, "adamw.exp_avg.2") == 0);
        CHECK(kn_dtype_of(m_b) == (dt == KN_F64 ? KN_F64 : KN_F32));
        CHECK_CLOSE(m_b, m[1], steps_tol(half ? KN_F32 : dt), "exp_avg");
        CHECK_CLOSE(kn_optimizer_state_tensor(opt, 5, NULL), v[1], steps_tol(half ? KN_F32 : dt), "exp_avg_sq");
        kn_optimizer_free(opt);
        for (int j = 0; j < 2; j++) free(p[j]), free(m[j]), free(v[j]), free(g[j]);
        free(c0);
    }
}

static void test_adamw_update_on_a_strided_param(void) {
    kn_tensor *base = kn_zeros(KN_SHAPE(6, 8), KN_F32);
    kn_tensor *p = kn_slice(base, 1, 0, 8, 2); /* every other column, updated in place */
    kn_tensor *g = rand_tensor(KN_SHAPE(6, 4), KN_F32, -1, 1);
    kn_tensor *m = kn_zeros(KN_SHAPE(6, 4), KN_F32), *v = kn_zeros(KN_SHAPE(6, 4), KN_F32);
    CHECK(kn_copy_(p, rand_tensor(KN_SHAPE(6, 4), KN_F32, -1, 1)) == KN_OK);
    double *pv = read_f64(p), *gv = read_f64(g), mv[24] = {0}, vv[24] = {0}, rest[48];
    kn_param_group h = kn_adamw_group(NULL, 0, 0.1, 0.01);
    ref_adamw(pv, mv, vv, gv, 24, &h, 1);
    CHECK(kn_adamw_update(p, non_contiguous_copy(g), m, v, 0.1, 0.9, 0.999, 1e-8, 0.01, 1) == KN_OK);
    CHECK_CLOSE(p, pv, tol_for(KN_F32), "strided param");
    double *all = read_f64(base);
    for (int i = 0; i < 48; i++) rest[i] = i % 2 ? 0 : all[i];
    CHECK_CLOSE(base, rest, tol_for(KN_F32), "odd columns untouched");
    free(pv), free(gv), free(all);
}

static void test_sgd_matches_reference_for_every_option(void) {
    /* momentum, dampening, nesterov, weight_decay */
    static const double opts[][4] = {{0, 0, 0, 0},   {0, 0, 0, 0.01}, {0.9, 0, 0, 0}, {0.9, 0.5, 0, 0.01},
                                     {0.9, 0, 1, 0}, {0.8, 0, 1, 0.05}};
    for (int k = 0; k < 2; k++)
        for (size_t o = 0; o < sizeof opts / sizeof opts[0]; o++) {
            kn_dtype dt = k ? KN_F64 : KN_F32;
            kn_tensor *a = param(KN_SHAPE(5, 7), dt), *b = param(KN_SHAPE(70001), dt);
            kn_param_group h = kn_sgd_group((kn_tensor *[]){a, b}, 2, 0.05, opts[o][0], opts[o][3]);
            h.dampening = opts[o][1], h.nesterov = opts[o][2] != 0;
            kn_optimizer *opt = kn_sgd_new(&h, 1);
            CHECK(opt != NULL);
            CHECK(kn_optimizer_state_count(opt) == (opts[o][0] != 0 ? 2 : 0));
            kn_tensor *ps[2] = {a, b};
            double *p[2], *buf[2], *g[2];
            for (int j = 0; j < 2; j++) {
                int64_t n = kn_numel(ps[j]);
                p[j] = read_f64(ps[j]), buf[j] = calloc((size_t)n, 8), g[j] = malloc(8 * (size_t)n);
            }
            for (int s = 0; s < 4; s++) {
                for (int j = 0; j < 2; j++) {
                    new_grad(ps[j], g[j]);
                    ref_sgd(p[j], buf[j], g[j], kn_numel(ps[j]), &h, s == 0);
                }
                CHECK(kn_optimizer_step(opt) == KN_OK);
                CHECK_MSG(check_close(a, p[0], steps_tol(dt), "sgd") && check_close(b, p[1], steps_tol(dt), "sgd"),
                          "sgd %s momentum %g dampening %g nesterov %g weight_decay %g, step %d", kn_dtype_name(dt),
                          opts[o][0], opts[o][1], opts[o][2], opts[o][3], s);
            }
            kn_optimizer_free(opt);
            for (int j = 0; j < 2; j++) free(p[j]), free(buf[j]), free(g[j]);
        }
}

static void test_learning_rates_of_groups(void) {
    kn_tensor *a = param(KN_SHAPE(3), KN_F32), *b = param(KN_SHAPE(3), KN_F32);
    kn_param_group g[2] = {kn_sgd_group((kn_tensor *[]){a}, 1, 0.1, 0, 0),
                           kn_sgd_group((kn_tensor *[]){b}, 1, 0.4, 0, 0)};
    kn_optimizer *opt = kn_sgd_new(g, 2);
    CHECK(kn_optimizer_group_count(opt) == 2 && kn_optimizer_param_count(opt) == 2);
    CHECK(kn_optimizer_scale_lr(opt, 0.5) == KN_OK);
    CHECK(kn_optimizer_get_lr(opt, 0) == 0.05 && kn_optimizer_get_lr(opt, 1) == 0.2);
    CHECK(kn_optimizer_set_lr(opt, 0.3) == KN_OK);
    CHECK(kn_optimizer_get_lr(opt, 0) == 0.3 && kn_optimizer_get_lr(opt, 1) == 0.3);
    CHECK(isnan(kn_optimizer_get_lr(opt, 2)));
    CHECK_ERROR(kn_optimizer_set_lr(opt, -1) == KN_OK, KN_ERR_ARG, "lr of group 0 would be -1");
    /* lr 0.3 on both: p -= 0.3 * g */
    double av[3], bv[3], *a0 = read_f64(a), *b0 = read_f64(b);
    new_grad(a, av);
    new_grad(b, bv);
    CHECK(kn_optimizer_step(opt) == KN_OK);
    for (int i = 0; i < 3; i++) a0[i] -= 0.3 * av[i], b0[i] -= 0.3 * bv[i];
    CHECK_CLOSE(a, a0, tol_for(KN_F32), "a");
    CHECK_CLOSE(b, b0, tol_for(KN_F32), "b");
    /* zero_grad forgets the gradients: the next step changes nothing */
    CHECK(kn_optimizer_zero_grad(opt) == KN_OK);
    CHECK(kn_grad(a) == NULL);
    CHECK(kn_optimizer_step(opt) == KN_OK);
    CHECK_CLOSE(a, a0, tol_for(KN_F32), "no gradient, no update");
    kn_optimizer_free(opt);
    free(a0), free(b0);
}

static void test_lr_schedules(void) {
    kn_lr_schedule s;
    /* warmup 4, total 14: decay over 10 steps from 1.0 to 0.1 */
    int64_t at[] = {0, 1, 3, 4, 6, 9, 13, 14, 100};
    double warm[] = {0.25, 0.5, 1.0};
    const char *kinds[] = {"constant", "cosine", "linear"};
    for (int k = 0; k < 3; k++) {
        CHECK(kn_lr_schedule_init(&s, kinds[k], 1.0, 0.1, 4, 14) == KN_OK);
        for (size_t i = 0; i < sizeof at / sizeof at[0]; i++) {
            double want, p = at[i] < 4 ? 0 : fmin(1, (double)(at[i] - 4) / 10);
            if (at[i] < 4) want = warm[at[i] == 0 ? 0 : at[i] == 1 ? 1 : 2];
            else if (k == 0) want = 1.0;
            else if (k == 1) want = 0.1 + 0.9 * 0.5 * (1 + cos(3.14159265358979323846 * p));
            else want = 1.0 + (0.1 - 1.0) * p;
            CHECK_MSG(fabs(kn_lr_at(&s, at[i]) - want) < 1e-15, "%s at %lld: %.17g, want %.17g", kinds[k],
                      (long long)at[i], kn_lr_at(&s, at[i]), want);
        }
    }
    /* spot values: cosine halfway is the mean of lr and min_lr; linear at the end is min_lr */
    kn_lr_schedule_init(&s, "cosine", 1.0, 0.1, 4, 14);
    CHECK(fabs(kn_lr_at(&s, 9) - 0.55) < 1e-15);
    kn_lr_schedule_init(&s, "linear", 1.0, 0.1, 0, 10);
    CHECK(kn_lr_at(&s, 0) == 1.0 && fabs(kn_lr_at(&s, 10) - 0.1) < 1e-15);
    kn_lr_decay d;
    CHECK(kn_lr_decay_parse("cosine", &d) && d == KN_LR_COSINE);
    CHECK(!kn_lr_decay_parse("step", &d));
    CHECK_ERROR(kn_lr_schedule_init(&s, "exponential", 1, 0, 0, 10) == KN_OK, KN_ERR_ARG,
                "unknown decay \"exponential\"");
    CHECK_ERROR(kn_lr_schedule_init(&s, "cosine", -1, 0, 0, 10) == KN_OK, KN_ERR_ARG, "lr -1");
    CHECK_ERROR(kn_lr_schedule_init(&s, "cosine", 1, 0, -2, 10) == KN_OK, KN_ERR_ARG, "warmup_steps -2");
}

static void test_clip_grad_norm(void) {
    for (int k = 0; k < 2; k++) {
        kn_dtype dt = k ? KN_F64 : KN_F32;
        kn_tensor *a = param(KN_SHAPE(30, 20), dt), *b = param(KN_SHAPE(70001), dt), *c = param(KN_SHAPE(3), dt);
        kn_tensor *ps[3] = {a, b, c}; /* c has no gradient */
        double *ga = malloc(8 * 600), *gb = malloc(8 * 70001), want = 0;
        new_grad(a, ga);
        new_grad(b, gb);
        for (int i = 0; i < 600; i++) want += ga[i] * ga[i];
        for (int i = 0; i < 70001; i++) want += gb[i] * gb[i];
        want = sqrt(want);
        /* below the threshold: reported, nothing scaled */
        double total = 0;
        CHECK(kn_clip_grad_norm(ps, 3, want * 2, &total) == KN_OK);
        CHECK(fabs(total - want) <= 1e-5 * want);
        CHECK_CLOSE(kn_grad(a), ga, tol_for(dt), "unclipped");
        /* above: every grad scaled by max_norm / (total + 1e-6) */
        CHECK(kn_clip_grad_norm(ps, 3, 1.5, &total) == KN_OK);
        double coef = 1.5 / (want + 1e-6);
        for (int i = 0; i < 600; i++) ga[i] *= coef;
        for (int i = 0; i < 70001; i++) gb[i] *= coef;
        CHECK_CLOSE(kn_grad(a), ga, tol_for(dt), "clipped a");
        CHECK_CLOSE(kn_grad(b), gb, tol_for(dt), "clipped b");
        CHECK(kn_grad(c) == NULL);
        /* the clipped norm is max_norm */
        CHECK(kn_clip_grad_norm(ps, 3, 1e9, &total) == KN_OK);
        CHECK(fabs(total - 1.5) < 1e-5);
        free(ga), free(gb);
    }
    double total = -1;
    CHECK(kn_clip_grad_norm(NULL, 0, 1.0, &total) == KN_OK && total == 0);
    CHECK_ERROR(kn_clip_grad_norm((kn_tensor *[]){NULL}, 1, 1.0, NULL) == KN_OK, KN_ERR_NULL, "param 0 is NULL");
    CHECK_ERROR(kn_clip_grad_norm(NULL, 0, NAN, NULL) == KN_OK, KN_ERR_ARG, "max_norm");
}

/* p's values, bit for bit where they compare equal (no NaN here), against want. */
static bool same_values(kn_tensor *p, kn_tensor *want) {
    double *a = read_f64(p), *b = read_f64(want);
    bool same = a && b;
    for (int64_t i = 0; same && i < kn_numel(p); i++) same = a[i] == b[i];
    free(a), free(b);
    return same;
}

/* Clipping folded into the step (kn_clip_grad_norm_coef + kn_optimizer_step_scaled) updates
 * params and state to the same floats as clipping the grads and stepping, for both optimizers
 * and every float dtype, and leaves the grads as they were. */
static void test_clip_folded_into_the_step_is_exact(void) {
    for (int k = 0; k < 4; k++)
        for (int sgd = 0; sgd < 2; sgd++) {
            kn_dtype dt = FLOAT_DTYPES[k];
            kn_tensor *pa[2] = {param(KN_SHAPE(30, 20), dt), param(KN_SHAPE(4001), dt)}, *pb[2], *ga[2];
            for (int i = 0; i < 2; i++) pb[i] = kn_requires_grad(kn_clone(kn_detach(pa[i])), true);
            kn_param_group gA = sgd ? kn_sgd_group(pa, 2, 0.1, 0.9, 0.01) : kn_adamw_group(pa, 2, 0.01, 0.1);
            kn_param_group gB = sgd ? kn_sgd_group(pb, 2, 0.1, 0.9, 0.01) : kn_adamw_group(pb, 2, 0.01, 0.1);
            kn_optimizer *A = sgd ? kn_sgd_new(&gA, 1) : kn_adamw_new(&gA, 1);
            kn_optimizer *B = sgd ? kn_sgd_new(&gB, 1) : kn_adamw_new(&gB, 1);
            for (int step = 0; step < 2; step++) {
                for (int i = 0; i < 2; i++) {
                    ga[i] = rand_tensor(kn_shape_of(pa[i]), dt, -1, 1);
                    CHECK(kn_set_grad(pa[i], ga[i]) == KN_OK && kn_set_grad(pb[i], kn_clone(ga[i])) == KN_OK);
                }
                double ta = 0, tb = 0, coef = 0;
                CHECK(kn_clip_grad_norm(pa, 2, 0.5, &ta) == KN_OK && kn_optimizer_step(A) == KN_OK);
                CHECK(kn_clip_grad_norm_coef(pb, 2, 0.5, &tb, &coef) == KN_OK);
                CHECK(kn_optimizer_step_scaled(B, coef) == KN_OK);
                CHECK_MSG(ta == tb && coef < 1, "%s: totals %g and %g, factor %g", kn_dtype_name(dt), ta, tb, coef);
                for (int i = 0; i < 2; i++) {
                    CHECK_MSG(same_values(pb[i], pa[i]), "%s %s step %d: param %d differs from clip then step",
                              kn_dtype_name(dt), sgd ? "sgd" : "adamw", step, i);
                    CHECK_MSG(same_values(kn_grad(pb[i]), ga[i]), "%s: grad %d was changed", kn_dtype_name(dt), i);
                }
                for (int s = 0; s < kn_optimizer_state_count(A); s++)
                    CHECK_MSG(same_values(kn_optimizer_state_tensor(B, s, NULL), kn_optimizer_state_tensor(A, s, NULL)),
                              "%s: state %d differs", kn_dtype_name(dt), s);
            }
            double coef = 0;
            CHECK(kn_clip_grad_norm_coef(pb, 2, 1e9, NULL, &coef) == KN_OK && coef == 1);
            kn_optimizer_free(A);
            kn_optimizer_free(B);
        }
    CHECK_ERROR(kn_clip_grad_norm_coef(NULL, 0, 1.0, NULL, NULL) == KN_OK, KN_ERR_NULL, "coef_out is NULL");
    CHECK_ERROR(kn_optimizer_step_scaled(NULL, 1) == KN_OK, KN_ERR_NULL, "optimizer is NULL");
}

/* Saves opt's state to host, restores it into a fresh optimizer over copies of the params,
 * and checks that the next steps agree exactly. */
static void test_state_restores_exactly(void) {
    kn_tensor *a = param(KN_SHAPE(9, 5), KN_F32), *b = param(KN_SHAPE(33), KN_F32);
    kn_param_group g = kn_adamw_group((kn_tensor *[]){a, b}, 2, 1e-2, 0.1);
    kn_optimizer *opt = kn_adamw_new(&g, 1);
    CHECK(opt != NULL);
    if (!opt) return;
    double ga[45], gb[33];
    for (int s = 0; s < 3; s++) {
        new_grad(a, ga);
        if (s < 2) new_grad(b, gb); /* b misses a step: its count differs */
        else kn_zero_grad(b);
        CHECK(kn_optimizer_step(opt) == KN_OK);
    }
    int n_state = kn_optimizer_state_count(opt);
    CHECK(n_state == 4);
    double *saved[4];
    const char *names[4];
    for (int i = 0; i < n_state; i++) saved[i] = read_f64(kn_optimizer_state_tensor(opt, i, &names[i]));
    CHECK(strcmp(names[3], "adamw.exp_avg_sq.1") == 0);
    CHECK(kn_optimizer_get_step(opt, 0) == 3 && kn_optimizer_get_step(opt, 1) == 2);

    kn_tensor *a2 = kn_requires_grad(kn_clone(kn_detach(a)), true);
    kn_tensor *b2 = kn_requires_grad(kn_clone(kn_detach(b)), true);
    kn_param_group g2 = kn_adamw_group((kn_tensor *[]){a2, b2}, 2, 1e-2, 0.1);
    kn_optimizer *fresh = kn_adamw_new(&g2, 1);
    CHECK(fresh != NULL);
    if (!fresh) return;
    for (int i = 0; i < n_state; i++) {
        const char *name;
        kn_tensor *dst = kn_optimizer_state_tensor(fresh, i, &name);
        CHECK(strcmp(name, names[i]) == 0);
        CHECK(kn_copy_(dst, tensor_from(saved[i], kn_shape_of(dst), KN_F32)) == KN_OK);
        kn_release(dst);
        free(saved[i]);
    }
    for (int j = 0; j < 2; j++) CHECK(kn_optimizer_set_step(fresh, j, kn_optimizer_get_step(opt, j)) == KN_OK);
    for (int s = 0; s < 2; s++) {
        kn_tensor *da = rand_tensor(KN_SHAPE(9, 5), KN_F32, -1, 1), *db = rand_tensor(KN_SHAPE(33), KN_F32, -1, 1);
        kn_set_grad(a, da), kn_set_grad(a2, da), kn_set_grad(b, db), kn_set_grad(b2, db);
        CHECK(kn_optimizer_step(opt) == KN_OK && kn_optimizer_step(fresh) == KN_OK);
    }
    double *x = read_f64(a), *y = read_f64(a2), *z = read_f64(b), *w = read_f64(b2);
    CHECK(memcmp(x, y, sizeof(double) * 45) == 0 && memcmp(z, w, sizeof(double) * 33) == 0);
    free(x), free(y), free(z), free(w);
    kn_optimizer_free(opt);
    kn_optimizer_free(fresh);
}

/* Accumulated micro-batch gradients (each loss divided by the count) equal the full batch's;
 * a few AdamW steps on them lower the loss. */
static kn_tensor *mse(kn_tensor *x, kn_tensor *w, kn_tensor *y) {
    kn_tensor *d = kn_sub(kn_matmul(x, w), y);
    return kn_mean(kn_mul(d, d), KN_ALL_DIMS, false);
}

static void test_backward_accumulation_and_training(void) {
    /* y = x w* with w* = (1.5, -2, 1); w starts at 0, so the loss has far to fall */
    kn_tensor *x = rand_tensor(KN_SHAPE(8, 3), KN_F32, -1, 1);
    kn_tensor *y = kn_matmul(x, tensor_from((double[]){1.5, -2, 1}, KN_SHAPE(3, 1), KN_F32));
    kn_tensor *w = kn_requires_grad(kn_zeros(KN_SHAPE(3, 1), KN_F32), true);
    kn_optimizer *opt = kn_adamw_new(&(kn_param_group){.params = &w, .n_params = 1, .lr = 0.05, .beta1 = 0.9,
                                                       .beta2 = 0.999, .eps = 1e-8}, 1);
    double first = 0, last = 0;
    for (int s = 0; s < 20; s++) {
        kn_scope_push();
        kn_tensor *loss = mse(x, w, y);
        CHECK(kn_backward(loss) == KN_OK);
        double *full = read_f64(kn_grad(w));
        CHECK(kn_optimizer_zero_grad(opt) == KN_OK);
        for (int half = 0; half < 2; half++) {
            kn_tensor *xs = kn_narrow(x, 0, 4 * half, 4), *ys = kn_narrow(y, 0, 4 * half, 4);
            kn_tensor *part = mse(xs, w, ys);
            CHECK(kn_backward(kn_div_scalar(part, 2)) == KN_OK);
        }
        CHECK_CLOSE(kn_grad(w), full, tol_for(KN_F32), "accumulated gradient");
        CHECK(kn_optimizer_step(opt) == KN_OK);
        CHECK(kn_optimizer_zero_grad(opt) == KN_OK);
        double v = 0;
        CHECK(kn_item(loss, &v) == KN_OK);
        if (s == 0) first = v;
        last = v;
        free(full);
        kn_scope_pop();
    }
    CHECK_MSG(last < 0.5 * first, "loss %g after 20 steps, %g at first", last, first);
    kn_optimizer_free(opt);
}

static void test_debug_mode_runs_the_updates(void) {
    kn_mode mode = kn_get_mode();
    CHECK(kn_set_mode(KN_MODE_DEBUG) == KN_OK);
    kn_tensor *a = param(KN_SHAPE(4, 4), KN_F64);
    kn_param_group g = kn_sgd_group((kn_tensor *[]){a}, 1, 0.1, 0.9, 0);
    kn_optimizer *opt = kn_sgd_new(&g, 1);
    double gv[16], *p = read_f64(a), buf[16];
    new_grad(a, gv);
    ref_sgd(p, buf, gv, 16, &g, true);
    CHECK(kn_optimizer_step(opt) == KN_OK);
    CHECK_CLOSE(a, p, tol_for(KN_F64), "debug mode");
    kn_optimizer_free(opt);
    free(p);
    kn_set_mode(mode); /* back to $KILN_MODE's mode, not strict */
}

/* The update ops write into parameters that require grad with grad mode on and record no
 * history (autograd's interposer knows them by their op table flag); the write still bumps
 * the param's version, so a saved copy of its old value is refused in backward. */
static void test_updates_need_no_grad_mode(void) {
    kn_tensor *p = param(KN_SHAPE(2, 3), KN_F32);
    kn_tensor *y = kn_sum(kn_mul(p, p), KN_ALL_DIMS, false); /* saves p */
    int64_t nodes = kn_autograd_live_nodes();
    CHECK(kn_is_grad_enabled());
    CHECK(kn_sgd_update(p, kn_ones(KN_SHAPE(2, 3), KN_F32), NULL, 0.1, 0, 0, 0, false, true) == KN_OK);
    kn_tensor *m = kn_zeros(KN_SHAPE(2, 3), KN_F32), *v = kn_zeros(KN_SHAPE(2, 3), KN_F32);
    CHECK(kn_adamw_update(p, kn_ones(KN_SHAPE(2, 3), KN_F32), m, v, 0.1, 0.9, 0.999, 1e-8, 0, 1) == KN_OK);
    CHECK(kn_is_grad_enabled() && kn_is_leaf(p) && kn_needs_grad(p) && !kn_needs_grad(m));
    CHECK(kn_autograd_live_nodes() == nodes);
    CHECK_ERROR(kn_backward(y) == KN_OK, KN_ERR_ARG, "modified in place");
}

static void test_bad_arguments_are_refused(void) {
    kn_tensor *a = param(KN_SHAPE(2, 3), KN_F32);
    kn_tensor *ps[1] = {a};
    kn_param_group g = kn_adamw_group(ps, 1, -0.1, 0);
    CHECK_ERROR(kn_adamw_new(&g, 1) != NULL, KN_ERR_ARG, "adamw: group 0: lr is -0.1; it must be finite and >= 0");
    g = kn_adamw_group(ps, 1, 0.1, 0);
    g.beta1 = 1;
    CHECK_ERROR(kn_adamw_new(&g, 1) != NULL, KN_ERR_ARG, "beta1 is 1; it must be in [0, 1)");
    g.beta1 = 0.9, g.beta2 = -0.5;
    CHECK_ERROR(kn_adamw_new(&g, 1) != NULL, KN_ERR_ARG, "beta2 is -0.5");
    g = kn_adamw_group((kn_tensor *[]){NULL}, 1, 0.1, 0);
    CHECK_ERROR(kn_adamw_new(&g, 1) != NULL, KN_ERR_NULL, "param 0 is NULL");
    g = kn_adamw_group(NULL, 2, 0.1, 0);
    CHECK_ERROR(kn_adamw_new(&g, 1) != NULL, KN_ERR_NULL, "params is NULL");
    CHECK_ERROR(kn_adamw_new(NULL, 0) != NULL, KN_ERR_ARG, "at least one parameter group");
    kn_tensor *a2 = kn_retain(a); /* two handles of one param */
    g = kn_adamw_group((kn_tensor *[]){a, a2}, 2, 0.1, 0);
    CHECK_ERROR(kn_adamw_new(&g, 1) != NULL, KN_ERR_ARG, "param 1 is already param 0");
    kn_release(a2);
    g = kn_adamw_group((kn_tensor *[]){kn_ones(KN_SHAPE(2), KN_I32)}, 1, 0.1, 0);
    CHECK_ERROR(kn_adamw_new(&g, 1) != NULL, KN_ERR_DTYPE, "params must be floats");
    kn_param_group s = kn_sgd_group(ps, 1, 0.1, 0.9, 0);
    s.nesterov = true, s.dampening = 0.1;
    CHECK_ERROR(kn_sgd_new(&s, 1) != NULL, KN_ERR_ARG, "nesterov needs momentum > 0 and dampening 0");
    s = kn_sgd_group(ps, 1, 0.1, -0.9, 0);
    CHECK_ERROR(kn_sgd_new(&s, 1) != NULL, KN_ERR_ARG, "momentum is -0.9");

    /* the update ops name themselves and their operands */
    kn_tensor *m = kn_zeros(KN_SHAPE(2, 3), KN_F32), *v = kn_zeros(KN_SHAPE(2, 3), KN_F32);
    kn_tensor *bad_g = kn_ones(KN_SHAPE(3, 2), KN_F32);
    CHECK_ERROR(kn_adamw_update(a, bad_g, m, v, 0.1, 0.9, 0.999, 1e-8, 0, 1) == KN_OK, KN_ERR_SHAPE,
                "adamw_update(f32[2, 3], f32[2, 3], f32[2, 3], f32[3, 2]): grad must have param's shape");
    CHECK_ERROR(kn_adamw_update(a, kn_ones(KN_SHAPE(2, 3), KN_F64), m, v, 0.1, 0.9, 0.999, 1e-8, 0, 1) == KN_OK,
                KN_ERR_DTYPE, "grad has dtype f64; it must be f32");
    CHECK_ERROR(kn_adamw_update(a, m, m, v, 0.1, 0.9, 0.999, 1e-8, 0, 0) == KN_OK, KN_ERR_ARG, "step is 0");
    CHECK_ERROR(kn_adamw_update(a, m, kn_expand(kn_zeros(KN_SHAPE(1, 3), KN_F32), KN_SHAPE(2, 3)), v, 0.1, 0.9,
                                0.999, 1e-8, 0, 1) == KN_OK,
                KN_ERR_VIEW, "exp_avg has broadcast (stride 0) dims");
    CHECK_ERROR(kn_adamw_update(a, NULL, m, v, 0.1, 0.9, 0.999, 1e-8, 0, 1) == KN_OK, KN_ERR_NULL, NULL);
    CHECK_ERROR(kn_sgd_update(a, bad_g, NULL, 0.1, 0, 0, 0, false, true) == KN_OK, KN_ERR_SHAPE,
                "grad must have param's shape");
    CHECK_ERROR(kn_sgd_update(a, m, v, 0.1, 0, 0, 0, false, true) == KN_OK, KN_ERR_ARG, "momentum is 0");

    kn_optimizer *opt = kn_sgd_new(&(kn_param_group){.params = ps, .n_params = 1, .lr = 0.1}, 1);
    CHECK_ERROR(kn_optimizer_state_tensor(opt, 0, NULL) != NULL, KN_ERR_INDEX, "index 0 is out of range [0, 0)");
    CHECK_ERROR(kn_optimizer_set_step(opt, 1, 3) == KN_OK, KN_ERR_INDEX, "param 1 is out of range");
    CHECK_ERROR(kn_optimizer_step(NULL) == KN_OK, KN_ERR_NULL, "optimizer is NULL");
    CHECK(kn_optimizer_get_step(opt, 7) == -1);
    kn_optimizer_free(opt);
}

int main(void) {
    RUN(test_adamw_matches_reference_with_groups);
    RUN(test_adamw_update_on_a_strided_param);
    RUN(test_sgd_matches_reference_for_every_option);
    RUN(test_learning_rates_of_groups);
    RUN(test_lr_schedules);
    RUN(test_clip_grad_norm);
    RUN(test_clip_folded_into_the_step_is_exact);
    RUN(test_state_restores_exactly);
    RUN(test_backward_accumulation_and_training);
    RUN(test_debug_mode_runs_the_updates);
    RUN(test_updates_need_no_grad_mode);
    RUN(test_bad_arguments_are_refused);
    return test_summary();
}
