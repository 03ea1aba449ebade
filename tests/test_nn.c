/* nn modules: the module tree and its names, seeded initializers, and every layer's forward
 * against float64 loops written here. */
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "kiln/nn.h"

/* ---- float64 references ---------------------------------------------------------------- */

/* y[r, o] = sum_i x[r, i] w[o, i] + b[o] */
static void ref_linear(const double *x, int64_t rows, int64_t in, const double *w, const double *b, int64_t out,
                       double *y) {
    for (int64_t r = 0; r < rows; r++)
        for (int64_t o = 0; o < out; o++) {
            double s = b ? b[o] : 0;
            for (int64_t i = 0; i < in; i++) s += x[r * in + i] * w[o * in + i];
            y[r * out + o] = s;
        }
}

/* Normalizes each of `rows` rows of len values (rms: no centering), times w, plus b. */
static void ref_norm(const double *x, int64_t rows, int64_t len, const double *w, const double *b, double eps, bool rms,
                     double *y) {
    for (int64_t r = 0; r < rows; r++) {
        const double *xr = x + r * len;
        double mean = 0, var = 0;
        for (int64_t i = 0; i < len; i++) mean += xr[i];
        mean = rms ? 0 : mean / (double)len;
        for (int64_t i = 0; i < len; i++) var += (xr[i] - mean) * (xr[i] - mean);
        var /= (double)len;
        for (int64_t i = 0; i < len; i++)
            y[r * len + i] = (xr[i] - mean) / sqrt(var + eps) * (w ? w[i] : 1) + (b ? b[i] : 0);
    }
}

static double gelu_ref(double v) { return 0.5 * v * (1 + erf(v / sqrt(2.0))); }
static double gelu_tanh_ref(double v) { return 0.5 * v * (1 + tanh(sqrt(2 / acos(-1.0)) * (v + 0.044715 * v * v * v))); }
static double silu_ref(double v) { return v / (1 + exp(-v)); }

static double *values(kn_tensor *t) { return read_f64(t); }

static bool all_equal(kn_tensor *a, kn_tensor *b) {
    double *x = read_f64(a), *y = read_f64(b);
    bool same = x && y && kn_numel(a) == kn_numel(b);
    for (int64_t i = 0; same && i < kn_numel(a); i++) same = x[i] == y[i];
    free(x), free(y);
    return same;
}

/* ---- the module tree ------------------------------------------------------------------- */

typedef struct block {
    kn_module base;
    kn_nn_layer_norm *ln_1;
    kn_nn_attention *attn;
    kn_nn_mlp *mlp;
} block;

static block *block_new(int64_t C) {
    block *b = kn_module_alloc(sizeof *b, "Block");
    b->ln_1 = kn_module_add(b, "ln_1", kn_nn_layer_norm_new(KN_SHAPE(C), 1e-5, true, KN_F32));
    b->attn = kn_module_add(b, "attn", kn_nn_attention_new((kn_nn_attention_cfg){.dim = C, .n_heads = 2, .out_bias = true, .dtype = KN_F32}));
    b->mlp = kn_module_add(b, "mlp", kn_nn_mlp_new(C, 2 * C, KN_ACT_GELU_TANH, false, true, KN_F32));
    return kn_module_check(b);
}

/* wte, h.0, h.1 (a list), bn */
static kn_module *tiny_model(void) {
    kn_module *m = kn_module_alloc(sizeof *m, "Tiny");
    kn_module_add(m, "wte", kn_nn_embedding_new(10, 4, KN_F32));
    kn_module *h = kn_module_add(m, "h", kn_module_alloc(sizeof(kn_module), "ModuleList"));
    kn_module_add(h, NULL, block_new(4));
    kn_module_add(h, NULL, block_new(4));
    kn_module_add(m, "bn", kn_nn_batch_norm2d_new(3, 1e-5, 0.1, true, KN_F32));
    return kn_module_check(m);
}

static const char *const TINY_STATE[] = {
    "wte.weight",
    "h.0.ln_1.weight", "h.0.ln_1.bias",
    "h.0.attn.q_proj.weight", "h.0.attn.k_proj.weight", "h.0.attn.v_proj.weight",
    "h.0.attn.o_proj.weight", "h.0.attn.o_proj.bias",
    "h.0.mlp.fc1.weight", "h.0.mlp.fc1.bias", "h.0.mlp.fc2.weight", "h.0.mlp.fc2.bias",
    "h.1.ln_1.weight", "h.1.ln_1.bias",
    "h.1.attn.q_proj.weight", "h.1.attn.k_proj.weight", "h.1.attn.v_proj.weight",
    "h.1.attn.o_proj.weight", "h.1.attn.o_proj.bias",
    "h.1.mlp.fc1.weight", "h.1.mlp.fc1.bias", "h.1.mlp.fc2.weight", "h.1.mlp.fc2.bias",
    "bn.weight", "bn.bias", "bn.running_mean", "bn.running_var", "bn.num_batches_tracked",
};
#define TINY_COUNT ((int)(sizeof TINY_STATE / sizeof *TINY_STATE))

static void test_state_names_follow_pytorch(void) {
    kn_module *m = tiny_model();
    CHECK(m != NULL);
    kn_named_tensors state, params, buffers;
    CHECK(kn_module_named(m, KN_STATE, &state) == KN_OK);
    CHECK(kn_module_named(m, KN_PARAMS, &params) == KN_OK);
    CHECK(kn_module_named(m, KN_BUFFERS, &buffers) == KN_OK);
    CHECK(state.count == TINY_COUNT);
    for (int i = 0; i < state.count && i < TINY_COUNT; i++)
        CHECK_MSG(!strcmp(state.names[i], TINY_STATE[i]), "state[%d] is %s, want %s", i, state.names[i], TINY_STATE[i]);
    CHECK(params.count == TINY_COUNT - 3 && buffers.count == 3);
    CHECK(!strcmp(buffers.names[0], "bn.running_mean") && !strcmp(buffers.names[2], "bn.num_batches_tracked"));
    for (int i = 0; i < params.count; i++) CHECK(!strcmp(params.names[i], TINY_STATE[i]));
    /* lookup by full name gives the handle the tree owns */
    CHECK(kn_module_get(m, "h.1.attn.q_proj.weight") == state.tensors[14]);
    CHECK(kn_module_get(m, "bn.running_var") == state.tensors[26]);
    CHECK(kn_dtype_of(kn_module_get(m, "bn.num_batches_tracked")) == KN_I64);
    CHECK_ERROR(kn_module_get(m, "h.2.ln_1.weight") != NULL, KN_ERR_ARG, "no parameter or buffer named \"h.2.ln_1.weight\"");
    CHECK_ERROR(kn_module_get(m, "h.0.ln_1") != NULL, KN_ERR_ARG, "h.0.ln_1");
    /* wte 10*4; per block ln 4+4, attn 4*16+4, mlp 8*4+8 + 4*8+4; bn 3+3 */
    CHECK(kn_module_num_params(m) == 40 + 2 * (8 + 68 + 76) + 6);
    kn_named_tensors again;
    CHECK(kn_module_named(m, KN_STATE, &again) == KN_OK);
    for (int i = 0; i < again.count; i++) CHECK(!strcmp(again.names[i], state.names[i]) && again.tensors[i] == state.tensors[i]);
    kn_named_tensors_free(&again);
    kn_named_tensors_free(&state), kn_named_tensors_free(&params), kn_named_tensors_free(&buffers);
    kn_module_free(m);
}

static void test_tied_weights_are_listed_once_as_parameters(void) {
    kn_module *m = kn_module_alloc(sizeof *m, "Tied");
    kn_nn_embedding *wte = kn_module_add(m, "wte", kn_nn_embedding_new(6, 3, KN_F32));
    kn_module *head = kn_module_add(m, "lm_head", kn_module_alloc(sizeof *head, "Head"));
    kn_module_param(head, "weight", wte->weight);
    CHECK(kn_module_check(m) == m);
    kn_named_tensors params, state;
    CHECK(kn_module_named(m, KN_PARAMS, &params) == KN_OK && kn_module_named(m, KN_STATE, &state) == KN_OK);
    CHECK(params.count == 1 && state.count == 2);
    CHECK(!strcmp(state.names[1], "lm_head.weight") && kn_shares_storage(state.tensors[0], state.tensors[1]));
    CHECK(kn_module_num_params(m) == 18);
    kn_named_tensors_free(&params), kn_named_tensors_free(&state);
    kn_module_free(m);
}

/* A module with 300000 members of each kind: names are hashed, so registering, listing and
 * looking up stay linear (with a scan of earlier names this takes hours), and the rules
 * hold at that size: unique names, tied handles listed once as parameters. */
static void test_a_module_with_many_members_keeps_its_rules(void) {
    enum { N = 300000 };
    kn_scope_push();
    kn_module *m = kn_module_alloc(sizeof *m, "Wide");
    kn_tensor *all = kn_zeros(KN_SHAPE(N), KN_F32);
    char name[32];
    bool ok = m && all;
    for (int i = 0; ok && i < N; i++) {
        snprintf(name, sizeof name, "p%d", i);
        ok = kn_module_param(m, name, kn_narrow(all, 0, i, 1)) != NULL;
        snprintf(name, sizeof name, "c%d", i);
        ok = ok && kn_module_add(m, name, kn_module_alloc(sizeof(kn_module), "Child")) != NULL;
    }
    CHECK_MSG(ok, "%s", kn_last_error());
    kn_module *last = m->children[N - 1];
    CHECK(kn_module_param(last, "w", kn_narrow(all, 0, N - 1, 1)) != NULL); /* tied to p<N-1> */
    CHECK_ERROR(kn_module_param(m, "c123456", all) != NULL, KN_ERR_ARG, "already has a member named \"c123456\"");
    CHECK_ERROR(kn_module_add(m, "p7", kn_module_alloc(sizeof(kn_module), "Child")) != NULL, KN_ERR_ARG, "\"p7\"");
    kn_clear_error();
    CHECK(kn_module_get(m, "p299998") == m->params[N - 2]);
    snprintf(name, sizeof name, "c%d.w", N - 1);
    CHECK(kn_module_get(m, name) == last->params[0]);
    CHECK_ERROR(kn_module_get(m, "c5.p5") != NULL, KN_ERR_ARG, "no parameter or buffer named \"c5.p5\"");
    kn_named_tensors params = {0}, state = {0};
    CHECK(kn_module_named(m, KN_PARAMS, &params) == KN_OK && kn_module_named(m, KN_STATE, &state) == KN_OK);
    CHECK(params.count == N && state.count == N + 1 && !strcmp(state.names[N], name));
    CHECK(params.count == N && !strcmp(params.names[N - 1], "p299999"));
    kn_named_tensors_free(&params), kn_named_tensors_free(&state);
    kn_module_free(m);
    kn_scope_pop();
}

static void test_train_eval_propagates(void) {
    kn_module *m = tiny_model();
    block *b0 = (block *)m->children[1]->children[0];
    CHECK(kn_module_is_training(m) && kn_module_is_training(b0->attn->q_proj));
    kn_module_train(m, false);
    CHECK(!kn_module_is_training(m) && !kn_module_is_training(b0->attn->q_proj) && !kn_module_is_training(b0->mlp));
    kn_module_train(m, true);
    CHECK(kn_module_is_training(b0->ln_1));
    FILE *f = tmpfile();
    CHECK(kn_module_print(m, f) == KN_OK);
    char line[256] = "";
    rewind(f);
    int found = 0;
    while (fgets(line, sizeof line, f)) found += strstr(line, "running_var f32[3] (buffer)") != NULL;
    fclose(f);
    CHECK(found == 1);
    kn_module_free(m);
}

static void test_registration_errors(void) {
    kn_module *m = kn_module_alloc(sizeof *m, "M");
    kn_tensor *t = kn_zeros(KN_SHAPE(2), KN_F32);
    CHECK(kn_module_param(m, "w", t) != NULL);
    CHECK_ERROR(kn_module_buffer(m, "w", t) != NULL, KN_ERR_ARG, "already has a member named \"w\"");
    CHECK_ERROR(kn_module_param(m, "a.b", t) != NULL, KN_ERR_ARG, "contain no '.'");
    CHECK(kn_module_check(m) == NULL); /* failed registrations free the tree */
    kn_clear_error();
    kn_module *p = kn_module_alloc(sizeof *p, "P"), *q = kn_module_alloc(sizeof *q, "Q");
    kn_nn_linear *l = kn_module_add(p, "l", kn_nn_linear_new(2, 2, true, KN_F32));
    CHECK(l != NULL);
    CHECK_ERROR(kn_module_add(q, "l", l) != NULL, KN_ERR_ARG, "already has a parent");
    kn_module_free(q), kn_module_free(p);
    kn_clear_error();
    CHECK_ERROR((kn_module_train(t, true), kn_last_status() == KN_OK), KN_ERR_ARG, "not a kn_module");
    kn_module *empty = kn_module_alloc(sizeof *empty, "Empty");
    CHECK_ERROR(kn_module_forward(empty, t) != NULL, KN_ERR_ARG, "Empty has no one-input forward");
    kn_module_free(empty);
    CHECK_ERROR(kn_nn_linear_new(3, 4, true, KN_I32) != NULL, KN_ERR_DTYPE, "float dtype");
    CHECK_ERROR(kn_nn_linear_new(0, 4, true, KN_F32) != NULL, KN_ERR_ARG, "positive");
}

/* ---- initializers ---------------------------------------------------------------------- */

/* Mean, standard deviation, min and max of t's values. */
static void stats(kn_tensor *t, double *mean, double *std, double *lo, double *hi) {
    double *v = read_f64(t), s = 0, ss = 0;
    int64_t n = kn_numel(t);
    *lo = INFINITY, *hi = -INFINITY;
    for (int64_t i = 0; i < n; i++) s += v[i], *lo = fmin(*lo, v[i]), *hi = fmax(*hi, v[i]);
    *mean = s / (double)n;
    for (int64_t i = 0; i < n; i++) ss += (v[i] - *mean) * (v[i] - *mean);
    *std = sqrt(ss / (double)(n - 1));
    free(v);
}

/* Draws of n values: the mean within 5 standard errors, the standard deviation within 5 of
 * its standard errors (std * sqrt((kurtosis - 1) / 4n): kurtosis 3 normal, 1.8 uniform). */
static void check_normal(kn_tensor *t, double mean, double std, const char *what) {
    double m, s, lo, hi, n = (double)kn_numel(t);
    stats(t, &m, &s, &lo, &hi);
    CHECK_MSG(fabs(m - mean) < 5 * std / sqrt(n) && fabs(s / std - 1) < 5 * sqrt(0.5 / n),
              "%s: mean %g std %g, want %g, %g", what, m, s, mean, std);
}

/* Uniform on [low, high]: inside, and within 10/n of the width of both ends (missed with
 * probability e^-10). */
static void check_uniform(kn_tensor *t, double low, double high, const char *what) {
    double m, s, lo, hi, width = high - low, n = (double)kn_numel(t);
    stats(t, &m, &s, &lo, &hi);
    CHECK_MSG(lo >= low && hi <= high && lo < low + 10 / n * width && hi > high - 10 / n * width,
              "%s: range [%g, %g] for [%g, %g]", what, lo, hi, low, high);
    CHECK_MSG(fabs(m - (low + high) / 2) < 5 * width / sqrt(12 * n) && fabs(s / (width / sqrt(12)) - 1) < 5 * sqrt(0.2 / n),
              "%s: mean %g std %g", what, m, s);
}

static void test_initializers_have_the_right_statistics(void) {
    kn_tensor *t = kn_empty(KN_SHAPE(256, 64, 3, 3), KN_F32); /* fan_in 576, fan_out 2304 */
    int64_t fi, fo;
    CHECK(kn_init_fans(t, &fi, &fo) == KN_OK && fi == 576 && fo == 2304);
    CHECK(kn_init_normal_(t, 1.5, 2.0) == KN_OK);
    check_normal(t, 1.5, 2.0, "normal");
    CHECK(kn_init_uniform_(t, -3, 1) == KN_OK);
    check_uniform(t, -3, 1, "uniform");
    CHECK(kn_init_kaiming_uniform_(t, 0, KN_FAN_IN, KN_NL_RELU) == KN_OK);
    check_uniform(t, -sqrt(6.0 / 576), sqrt(6.0 / 576), "kaiming_uniform relu fan_in");
    CHECK(kn_init_kaiming_uniform_(t, 0.2, KN_FAN_OUT, KN_NL_LEAKY_RELU) == KN_OK);
    double b = sqrt(3.0) * sqrt(2 / 1.04) / sqrt(2304.0);
    check_uniform(t, -b, b, "kaiming_uniform leaky fan_out");
    CHECK(kn_init_kaiming_normal_(t, 0, KN_FAN_IN, KN_NL_TANH) == KN_OK);
    check_normal(t, 0, 5.0 / 3 / sqrt(576.0), "kaiming_normal tanh");
    CHECK(kn_init_kaiming_normal_(t, 0, KN_FAN_OUT, KN_NL_LINEAR) == KN_OK);
    check_normal(t, 0, 1 / sqrt(2304.0), "kaiming_normal linear fan_out");
    CHECK(kn_init_xavier_uniform_(t, 2.0) == KN_OK);
    b = 2 * sqrt(6.0 / (576 + 2304));
    check_uniform(t, -b, b, "xavier_uniform");
    CHECK(kn_init_xavier_normal_(t, 1.0) == KN_OK);
    check_normal(t, 0, sqrt(2.0 / (576 + 2304)), "xavier_normal");
    CHECK(kn_init_ones_(t) == KN_OK);
    double m, s, lo, hi;
    stats(t, &m, &s, &lo, &hi);
    CHECK(lo == 1 && hi == 1);
    CHECK(kn_init_zeros_(kn_slice(t, 0, 0, 256, 2)) == KN_OK); /* a view is filled in place */
    stats(t, &m, &s, &lo, &hi);
    CHECK(lo == 0 && hi == 1 && m == 0.5);
    CHECK(fabs(kn_init_gain(KN_NL_LEAKY_RELU, sqrt(5.0)) - sqrt(1.0 / 3)) < 1e-15 && kn_init_gain(KN_NL_SIGMOID, 0) == 1);
    CHECK(kn_init_gain(KN_NL_SELU, 0) == 0.75 && fabs(kn_init_gain(KN_NL_RELU, 0) - sqrt(2.0)) < 1e-15);
    CHECK_ERROR(kn_init_fans(kn_zeros(KN_SHAPE(5), KN_F32), &fi, &fo) == KN_OK, KN_ERR_SHAPE, "fewer than 2 dims");
    CHECK_ERROR(kn_init_normal_(kn_zeros(KN_SHAPE(5), KN_I64), 0, 1) == KN_OK, KN_ERR_DTYPE, "not a float tensor");
    CHECK_ERROR(kn_init_uniform_(t, 1, 0) == KN_OK, KN_ERR_ARG, "above high");
}

static void test_module_default_inits_match_pytorch(void) {
    kn_nn_linear *l = kn_nn_linear_new(400, 300, true, KN_F32);
    check_uniform(l->weight, -1 / sqrt(400.0), 1 / sqrt(400.0), "Linear.weight");
    check_uniform(l->bias, -1 / sqrt(400.0), 1 / sqrt(400.0), "Linear.bias");
    kn_nn_conv2d *c = kn_nn_conv2d_new(32, 64, 3, (kn_conv_opts){.groups = 2}, true, KN_F32); /* fan_in 16*9 */
    CHECK_SHAPE(c->weight, KN_SHAPE(64, 16, 3, 3));
    check_uniform(c->weight, -1 / 12.0, 1 / 12.0, "Conv2d.weight");
    check_uniform(c->bias, -1 / 12.0, 1 / 12.0, "Conv2d.bias");
    kn_nn_conv2d *ct = kn_nn_conv_transpose2d_new(64, 32, 4, (kn_conv_opts){0}, true, KN_F32); /* fan_in 32*16 */
    CHECK_SHAPE(ct->weight, KN_SHAPE(64, 32, 4, 4));
    check_uniform(ct->weight, -1 / sqrt(512.0), 1 / sqrt(512.0), "ConvTranspose2d.weight");
    check_uniform(ct->bias, -1 / sqrt(512.0), 1 / sqrt(512.0), "ConvTranspose2d.bias");
    kn_nn_embedding *e = kn_nn_embedding_new(1000, 100, KN_F32);
    check_normal(e->weight, 0, 1, "Embedding.weight");
    kn_nn_batch_norm2d *bn = kn_nn_batch_norm2d_new(5, 1e-5, 0.1, true, KN_F64);
    double ones[5] = {1, 1, 1, 1, 1}, zeros[5] = {0};
    CHECK_CLOSE(bn->weight, ones, tol_for(KN_F64), "bn weight");
    CHECK_CLOSE(bn->bias, zeros, tol_for(KN_F64), "bn bias");
    CHECK_CLOSE(bn->running_mean, zeros, tol_for(KN_F64), "running_mean");
    CHECK_CLOSE(bn->running_var, ones, tol_for(KN_F64), "running_var");
    CHECK_CLOSE(bn->num_batches_tracked, zeros, tol_for(KN_F64), "num_batches_tracked");
    kn_nn_rms_norm *r = kn_nn_rms_norm_new(KN_SHAPE(5), 1e-6, KN_F64);
    CHECK_CLOSE(r->weight, ones, tol_for(KN_F64), "rms weight");
    kn_module_free(l), kn_module_free(c), kn_module_free(ct), kn_module_free(e), kn_module_free(bn), kn_module_free(r);
}

static void test_seed_reproduces_the_model(void) {
    kn_named_tensors a, b, c;
    kn_module *m1, *m2, *m3;
    kn_manual_seed(1234);
    m1 = tiny_model();
    kn_manual_seed(1234);
    m2 = tiny_model();
    kn_manual_seed(1235);
    m3 = tiny_model();
    CHECK(kn_module_named(m1, KN_PARAMS, &a) == KN_OK && kn_module_named(m2, KN_PARAMS, &b) == KN_OK &&
          kn_module_named(m3, KN_PARAMS, &c) == KN_OK);
    for (int i = 0; i < a.count; i++) CHECK_MSG(all_equal(a.tensors[i], b.tensors[i]), "%s differs", a.names[i]);
    CHECK(!all_equal(a.tensors[0], c.tensors[0]) && !all_equal(a.tensors[3], c.tensors[3]));
    kn_named_tensors_free(&a), kn_named_tensors_free(&b), kn_named_tensors_free(&c);
    kn_module_free(m1), kn_module_free(m2), kn_module_free(m3);
}

/* ---- layers against references --------------------------------------------------------- */

static void test_linear_matches_reference(void) {
    for (int k = 0; k < 2; k++) {
        kn_dtype dt = k ? KN_F32 : KN_F64;
        kn_nn_linear *l = kn_nn_linear_new(5, 3, k == 0, dt);
        kn_tensor *x = rand_tensor(KN_SHAPE(2, 4, 5), dt, -1, 1);
        double *xv = values(x), *w = values(l->weight), *b = l->bias ? values(l->bias) : NULL, want[24];
        ref_linear(xv, 8, 5, w, b, 3, want);
        tolerance tol = tol_for(dt);
        CHECK_CLOSE(kn_nn_linear_forward(l, x), want, tol, "linear");
        CHECK_CLOSE(kn_module_forward(l, non_contiguous_copy(x)), want, tol, "linear, non-contiguous input");
        /* a transposed input: xt [5, 8] viewed as [8, 5] */
        kn_tensor *xt = kn_transpose(kn_contiguous(kn_transpose(kn_reshape(x, KN_SHAPE(8, 5)), 0, 1)), 0, 1);
        CHECK(!kn_is_contiguous(xt));
        CHECK_CLOSE(kn_nn_linear_forward(l, xt), want, tol, "linear, transposed input");
        free(xv), free(w), free(b);
        kn_module_free(l);
    }
}

static void test_embedding_and_bag_match_reference(void) {
    kn_nn_embedding *e = kn_nn_embedding_new(7, 3, KN_F64);
    double idx[6] = {0, 6, 2, 2, 5, 1}, *w = values(e->weight), want[18];
    for (int i = 0; i < 6; i++)
        for (int d = 0; d < 3; d++) want[i * 3 + d] = w[(int)idx[i] * 3 + d];
    kn_tensor *ix = tensor_from(idx, KN_SHAPE(2, 3), KN_I64);
    kn_tensor *y = kn_nn_embedding_forward(e, ix);
    CHECK_SHAPE(y, KN_SHAPE(2, 3, 3));
    CHECK_CLOSE(y, want, tol_for(KN_F64), "embedding");
    for (int mode = 0; mode < 3; mode++) {
        kn_nn_embedding_bag *bag = kn_nn_embedding_bag_new(7, 3, (kn_bag_mode)mode, KN_F64);
        double *bw = values(bag->weight), bwant[6];
        for (int b = 0; b < 2; b++)
            for (int d = 0; d < 3; d++) {
                double acc = mode == KN_BAG_MAX ? -INFINITY : 0;
                for (int j = 0; j < 3; j++) {
                    double v = bw[(int)idx[b * 3 + j] * 3 + d];
                    acc = mode == KN_BAG_MAX ? fmax(acc, v) : acc + v;
                }
                bwant[b * 3 + d] = mode == KN_BAG_MEAN ? acc / 3 : acc;
            }
        CHECK_CLOSE(kn_nn_embedding_bag_forward(bag, ix, NULL, NULL), bwant, tol_for(KN_F64), "bag [B, L]");
        double off[2] = {0, 3};
        CHECK_CLOSE(kn_nn_embedding_bag_forward(bag, kn_reshape(ix, KN_SHAPE(6)), tensor_from(off, KN_SHAPE(2), KN_I64), NULL),
                    bwant, tol_for(KN_F64), "bag with offsets");
        free(bw);
        kn_module_free(bag);
    }
    free(w);
    kn_module_free(e);
}

/* Sets every parameter of m to fresh random values (so affine terms are not trivial). */
static void randomize(void *m) {
    kn_named_tensors p;
    CHECK(kn_module_named(m, KN_PARAMS, &p) == KN_OK);
    for (int i = 0; i < p.count; i++) CHECK(kn_init_uniform_(p.tensors[i], 0.5, 1.5) == KN_OK);
    kn_named_tensors_free(&p);
}

static void test_norm_modules_match_reference(void) {
    kn_tensor *x = rand_tensor(KN_SHAPE(3, 2, 4), KN_F64, -2, 3);
    double *xv = values(x), want[24];
    kn_nn_layer_norm *ln = kn_nn_layer_norm_new(KN_SHAPE(2, 4), 1e-5, true, KN_F64);
    randomize(ln);
    double *w = values(ln->weight), *b = values(ln->bias);
    ref_norm(xv, 3, 8, w, b, 1e-5, false, want);
    CHECK_CLOSE(kn_nn_layer_norm_forward(ln, x), want, tol_for(KN_F64), "LayerNorm");
    kn_nn_layer_norm *plain = kn_nn_layer_norm_new(KN_SHAPE(4), 1e-5, false, KN_F64);
    CHECK(plain->weight == NULL && plain->base.n_params == 0);
    ref_norm(xv, 6, 4, NULL, NULL, 1e-5, false, want);
    CHECK_CLOSE(kn_module_forward(plain, x), want, tol_for(KN_F64), "LayerNorm without affine");
    kn_nn_rms_norm *rms = kn_nn_rms_norm_new(KN_SHAPE(4), 1e-6, KN_F64);
    randomize(rms);
    double *rw = values(rms->weight), rw8[8];
    for (int i = 0; i < 8; i++) rw8[i] = rw[i % 4];
    ref_norm(xv, 6, 4, rw8, NULL, 1e-6, true, want);
    CHECK_CLOSE(kn_nn_rms_norm_forward(rms, x), want, tol_for(KN_F64), "RMSNorm");
    /* GroupNorm: [3, 4 channels, 2] in 2 groups of 2 channels; weight per channel */
    kn_nn_group_norm *gn = kn_nn_group_norm_new(2, 4, 1e-5, true, KN_F64);
    randomize(gn);
    double *gw = values(gn->weight), *gb = values(gn->bias), gw4[4], gb4[4];
    kn_tensor *xg = kn_reshape(x, KN_SHAPE(3, 4, 2));
    for (int g = 0; g < 6; g++) {
        for (int i = 0; i < 4; i++) gw4[i] = gw[(g % 2) * 2 + i / 2], gb4[i] = gb[(g % 2) * 2 + i / 2];
        ref_norm(xv + 4 * g, 1, 4, gw4, gb4, 1e-5, false, want + 4 * g);
    }
    CHECK_CLOSE(kn_nn_group_norm_forward(gn, xg), want, tol_for(KN_F64), "GroupNorm");
    free(xv), free(w), free(b), free(rw), free(gw), free(gb);
    kn_module_free(ln), kn_module_free(plain), kn_module_free(rms), kn_module_free(gn);
}

static void test_batch_norm2d_tracks_running_stats_then_evaluates(void) {
    int64_t N = 3, C = 2, P = 4;
    kn_nn_batch_norm2d *bn = kn_nn_batch_norm2d_new(C, 1e-5, 0.1, true, KN_F64);
    randomize(bn);
    double *w = values(bn->weight), *b = values(bn->bias), rm[2] = {0, 0}, rv[2] = {1, 1}, want[24];
    for (int step = 0; step < 2; step++) {
        kn_tensor *x = rand_tensor(KN_SHAPE(3, 2, 2, 2), KN_F64, -1, 3);
        double *xv = values(x);
        for (int64_t c = 0; c < C; c++) {
            double mean = 0, var = 0;
            for (int64_t i = 0; i < N; i++)
                for (int64_t p = 0; p < P; p++) mean += xv[(i * C + c) * P + p] / (double)(N * P);
            for (int64_t i = 0; i < N; i++)
                for (int64_t p = 0; p < P; p++) var += pow(xv[(i * C + c) * P + p] - mean, 2);
            rm[c] = 0.9 * rm[c] + 0.1 * mean;
            rv[c] = 0.9 * rv[c] + 0.1 * var / (double)(N * P - 1);
            for (int64_t i = 0; i < N; i++)
                for (int64_t p = 0; p < P; p++) {
                    int64_t e = (i * C + c) * P + p;
                    want[e] = (xv[e] - mean) / sqrt(var / (double)(N * P) + 1e-5) * w[c] + b[c];
                }
        }
        CHECK_CLOSE(kn_nn_batch_norm2d_forward(bn, x), want, tol_for(KN_F64), "train");
        free(xv);
    }
    CHECK_CLOSE(kn_module_get(bn, "running_mean"), rm, tol_for(KN_F64), "running_mean");
    CHECK_CLOSE(kn_module_get(bn, "running_var"), rv, tol_for(KN_F64), "running_var");
    double two = 2;
    CHECK_CLOSE(bn->num_batches_tracked, &two, tol_for(KN_F64), "num_batches_tracked");
    kn_module_train(bn, false);
    kn_tensor *x = rand_tensor(KN_SHAPE(3, 2, 2, 2), KN_F64, -1, 3);
    double *xv = values(x);
    for (int64_t e = 0; e < 24; e++) {
        int64_t c = e / P % C;
        want[e] = (xv[e] - rm[c]) / sqrt(rv[c] + 1e-5) * w[c] + b[c];
    }
    CHECK_CLOSE(kn_module_forward(bn, x), want, tol_for(KN_F64), "eval uses running stats");
    CHECK_CLOSE(bn->running_mean, rm, tol_for(KN_F64), "eval leaves running_mean");
    CHECK_CLOSE(bn->num_batches_tracked, &two, tol_for(KN_F64), "eval leaves num_batches_tracked");
    CHECK_ERROR(kn_nn_batch_norm2d_forward(bn, kn_zeros(KN_SHAPE(3, 2, 4), KN_F64)) != NULL, KN_ERR_SHAPE, "[N, C, H, W]");
    free(xv), free(w), free(b);
    kn_module_free(bn);
}

/* Direct convolution loops: out [N, Co, OH, OW] for x [N, Ci, H, W]; transposed scatters. */
static void ref_conv(const double *x, const double *w, const double *b, int64_t N, int64_t Ci, int64_t H, int64_t W,
                     int64_t Co, int64_t K, int64_t S, int64_t Pd, int64_t G, bool transposed, double *out, int64_t OH,
                     int64_t OW) {
    int64_t cig = Ci / G, cog = Co / G;
    for (int64_t i = 0; i < N * Co * OH * OW; i++) out[i] = b ? b[i / (OH * OW) % Co] : 0;
    for (int64_t n = 0; n < N; n++)
        for (int64_t g = 0; g < G; g++)
            for (int64_t ci = 0; ci < cig; ci++)
                for (int64_t co = 0; co < cog; co++)
                    for (int64_t ky = 0; ky < K; ky++)
                        for (int64_t kx = 0; kx < K; kx++) {
                            int64_t ic = g * cig + ci, oc = g * cog + co;
                            double wv = transposed ? w[((ic * cog + co) * K + ky) * K + kx] : w[((oc * cig + ci) * K + ky) * K + kx];
                            if (!transposed) {
                                for (int64_t oy = 0; oy < OH; oy++)
                                    for (int64_t ox = 0; ox < OW; ox++) {
                                        int64_t iy = oy * S - Pd + ky, ix = ox * S - Pd + kx;
                                        if (iy < 0 || iy >= H || ix < 0 || ix >= W) continue;
                                        out[((n * Co + oc) * OH + oy) * OW + ox] += x[((n * Ci + ic) * H + iy) * W + ix] * wv;
                                    }
                            } else {
                                for (int64_t iy = 0; iy < H; iy++)
                                    for (int64_t ix = 0; ix < W; ix++) {
                                        int64_t oy = iy * S - Pd + ky, ox = ix * S - Pd + kx;
                                        if (oy < 0 || oy >= OH || ox < 0 || ox >= OW) continue;
                                        out[((n * Co + oc) * OH + oy) * OW + ox] += x[((n * Ci + ic) * H + iy) * W + ix] * wv;
                                    }
                            }
                        }
}

static void test_conv_modules_match_direct_loops(void) {
    kn_conv_opts opts = {.stride = {2, 2}, .padding = {1, 1}, .groups = 2};
    kn_nn_conv2d *c = kn_nn_conv2d_new(4, 6, 3, opts, true, KN_F64);
    kn_tensor *x = rand_tensor(KN_SHAPE(2, 4, 5, 6), KN_F64, -1, 1);
    double *xv = values(x), *w = values(c->weight), *b = values(c->bias), want[2 * 6 * 3 * 3];
    ref_conv(xv, w, b, 2, 4, 5, 6, 6, 3, 2, 1, 2, false, want, 3, 3);
    kn_tensor *y = kn_nn_conv2d_forward(c, x);
    CHECK_SHAPE(y, KN_SHAPE(2, 6, 3, 3));
    CHECK_CLOSE(y, want, tol_for(KN_F64), "Conv2d");
    kn_nn_conv2d *t = kn_nn_conv_transpose2d_new(4, 6, 3, opts, false, KN_F64);
    double *tw = values(t->weight), *twant = malloc(sizeof(double) * 2 * 6 * 9 * 11);
    ref_conv(xv, tw, NULL, 2, 4, 5, 6, 6, 3, 2, 1, 2, true, twant, 9, 11); /* (5-1)*2-2+3 = 9, (6-1)*2-2+3 = 11 */
    y = kn_module_forward(t, x);
    CHECK_SHAPE(y, KN_SHAPE(2, 6, 9, 11));
    CHECK_CLOSE(y, twant, tol_for(KN_F64), "ConvTranspose2d");
    free(xv), free(w), free(b), free(tw), free(twant);
    kn_module_free(c), kn_module_free(t);
    CHECK_ERROR(kn_nn_conv2d_new(3, 4, 3, (kn_conv_opts){.groups = 2}, true, KN_F32) != NULL, KN_ERR_ARG, "groups 2");
}

static void test_dropout_only_in_training(void) {
    kn_nn_dropout *d = kn_nn_dropout_new(0.25);
    kn_tensor *x = kn_ones(KN_SHAPE(100, 100), KN_F32);
    double *v = values(kn_nn_dropout_forward(d, x));
    int64_t zeros = 0;
    bool scaled = true;
    for (int i = 0; i < 10000; i++) zeros += v[i] == 0, scaled &= v[i] == 0 || fabs(v[i] - 1 / 0.75) < 1e-6;
    CHECK_MSG(zeros > 2300 && zeros < 2700 && scaled, "training dropout zeroed %lld of 10000", (long long)zeros);
    free(v);
    kn_module_train(d, false);
    CHECK(all_equal(kn_module_forward(d, x), x));
    kn_module_free(d);
    CHECK_ERROR(kn_nn_dropout_new(1.5) != NULL, KN_ERR_ARG, "[0, 1]");
}

static void test_mlp_variants_match_reference(void) {
    kn_act acts[3] = {KN_ACT_GELU, KN_ACT_GELU_TANH, KN_ACT_SILU};
    double (*fns[3])(double) = {gelu_ref, gelu_tanh_ref, silu_ref};
    kn_tensor *x = rand_tensor(KN_SHAPE(3, 4), KN_F64, -2, 2);
    double *xv = values(x);
    for (int k = 0; k < 3; k++) {
        bool gated = k == 2;
        kn_nn_mlp *m = kn_nn_mlp_new(4, 6, acts[k], gated, !gated, KN_F64);
        CHECK(m->base.n_children == (gated ? 3 : 2));
        CHECK(!strcmp(m->base.child_names[0], gated ? "gate_proj" : "fc1"));
        double h[18], u[18], want[12];
        double *wu = values(m->up->weight), *bu = m->up->bias ? values(m->up->bias) : NULL;
        double *wd = values(m->down->weight), *bd = m->down->bias ? values(m->down->bias) : NULL;
        if (gated) {
            double *wg = values(m->gate->weight);
            ref_linear(xv, 3, 4, wg, NULL, 6, h);
            ref_linear(xv, 3, 4, wu, NULL, 6, u);
            for (int i = 0; i < 18; i++) h[i] = fns[k](h[i]) * u[i];
            free(wg);
        } else {
            ref_linear(xv, 3, 4, wu, bu, 6, h);
            for (int i = 0; i < 18; i++) h[i] = fns[k](h[i]);
        }
        ref_linear(h, 3, 6, wd, bd, 4, want);
        CHECK_CLOSE(kn_nn_mlp_forward(m, x), want, ((tolerance){1e-10, 1e-10}), gated ? "SwiGLU" : "GELU MLP");
        free(wu), free(bu), free(wd), free(bd);
        kn_module_free(m);
    }
    free(xv);
}

static void test_sequential_and_residual(void) {
    kn_module *seq = kn_nn_sequential_new();
    kn_nn_linear *l1 = kn_module_add(seq, NULL, kn_nn_linear_new(4, 5, true, KN_F64));
    kn_module_add(seq, NULL, kn_nn_dropout_new(0.5));
    kn_nn_linear *l2 = kn_module_add(seq, NULL, kn_nn_linear_new(5, 4, false, KN_F64));
    CHECK(kn_module_check(seq) == seq);
    CHECK(kn_module_get(seq, "2.weight") == l2->weight);
    kn_module_train(seq, false);
    kn_tensor *x = rand_tensor(KN_SHAPE(2, 4), KN_F64, -1, 1);
    double *xv = values(x), *w1 = values(l1->weight), *b1 = values(l1->bias), *w2 = values(l2->weight), h[10], want[8];
    ref_linear(xv, 2, 4, w1, b1, 5, h);
    ref_linear(h, 2, 5, w2, NULL, 4, want);
    CHECK_CLOSE(kn_module_forward(seq, x), want, tol_for(KN_F64), "Sequential");
    /* x + seq(norm(x)) */
    kn_nn_layer_norm *ln = kn_nn_layer_norm_new(KN_SHAPE(4), 1e-5, false, KN_F64);
    double n[8];
    ref_norm(xv, 2, 4, NULL, NULL, 1e-5, false, n);
    ref_linear(n, 2, 4, w1, b1, 5, h);
    ref_linear(h, 2, 5, w2, NULL, 4, want);
    for (int i = 0; i < 8; i++) want[i] += xv[i];
    CHECK_CLOSE(kn_nn_residual(x, ln, seq), want, tol_for(KN_F64), "residual");
    free(xv), free(w1), free(b1), free(w2);
    kn_module_free(seq), kn_module_free(ln);
}

/* ---- attention ------------------------------------------------------------------------- */

/* HF Llama's rotary embedding of one head vector at position p, in place. */
static void ref_rope(double *v, int64_t D, double p, double theta) {
    for (int64_t i = 0; i < D / 2; i++) {
        double a = p / pow(theta, 2.0 * (double)i / (double)D), x1 = v[i], x2 = v[i + D / 2];
        v[i] = x1 * cos(a) - x2 * sin(a);
        v[i + D / 2] = x2 * cos(a) + x1 * sin(a);
    }
}

/* The module's output for x [B, T, C] (positions 0..T-1), in float64 loops. */
static void ref_attention(kn_nn_attention *a, const double *x, int64_t B, int64_t T, double *out) {
    const kn_nn_attention_cfg *c = &a->cfg;
    int64_t C = c->dim, H = c->n_heads, Hkv = c->n_kv_heads, D = c->head_dim, rows = B * T;
    double *wq = values(a->q_proj->weight), *wk = values(a->k_proj->weight), *wv = values(a->v_proj->weight);
    double *wo = values(a->o_proj->weight), *bq = NULL, *bk = NULL, *bv = NULL, *bo = NULL;
    if (c->qkv_bias) bq = values(a->q_proj->bias), bk = values(a->k_proj->bias), bv = values(a->v_proj->bias);
    if (c->out_bias) bo = values(a->o_proj->bias);
    double *q = malloc(sizeof(double) * rows * H * D), *k = malloc(sizeof(double) * rows * Hkv * D);
    double *v = malloc(sizeof(double) * rows * Hkv * D), *y = malloc(sizeof(double) * rows * H * D);
    ref_linear(x, rows, C, wq, bq, H * D, q);
    ref_linear(x, rows, C, wk, bk, Hkv * D, k);
    ref_linear(x, rows, C, wv, bv, Hkv * D, v);
    if (c->rope_theta > 0)
        for (int64_t r = 0; r < rows; r++) {
            for (int64_t h = 0; h < H; h++) ref_rope(q + (r * H + h) * D, D, (double)(r % T), c->rope_theta);
            for (int64_t h = 0; h < Hkv; h++) ref_rope(k + (r * Hkv + h) * D, D, (double)(r % T), c->rope_theta);
        }
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t t = 0; t < T; t++) {
                int64_t g = h / (H / Hkv);
                double s[64], m = -INFINITY, z = 0;
                for (int64_t j = 0; j <= t; j++) {
                    s[j] = 0;
                    for (int64_t d = 0; d < D; d++) s[j] += q[((b * T + t) * H + h) * D + d] * k[((b * T + j) * Hkv + g) * D + d];
                    s[j] /= sqrt((double)D);
                    m = fmax(m, s[j]);
                }
                for (int64_t j = 0; j <= t; j++) z += s[j] = exp(s[j] - m);
                for (int64_t d = 0; d < D; d++) {
                    double acc = 0;
                    for (int64_t j = 0; j <= t; j++) acc += s[j] / z * v[((b * T + j) * Hkv + g) * D + d];
                    y[((b * T + t) * H + h) * D + d] = acc;
                }
            }
    ref_linear(y, rows, H * D, wo, bo, C, out);
    free(wq), free(wk), free(wv), free(wo), free(bq), free(bk), free(bv), free(bo), free(q), free(k), free(v), free(y);
}

static const kn_nn_attention_cfg ATTN_CFGS[] = {
    {.dim = 8, .n_heads = 2, .dtype = KN_F64},                                         /* plain multi-head */
    {.dim = 12, .n_heads = 4, .n_kv_heads = 2, .head_dim = 4, .qkv_bias = true, .out_bias = true,
     .rope_theta = 10000, .dtype = KN_F64},                                             /* GQA, RoPE, Qwen2 biases */
    {.dim = 16, .n_heads = 4, .n_kv_heads = 1, .rope_theta = 500, .dtype = KN_F64},   /* one shared kv head */
};

static void test_attention_matches_naive_reference(void) {
    for (int k = 0; k < 3; k++) {
        kn_nn_attention *a = kn_nn_attention_new(ATTN_CFGS[k]);
        CHECK(a != NULL);
        if (!a) continue;
        int64_t B = 2, T = 5, C = a->cfg.dim;
        kn_tensor *x = rand_tensor(KN_SHAPE(B, T, C), KN_F64, -1, 1);
        double *xv = values(x), *want = malloc(sizeof(double) * B * T * C);
        ref_attention(a, xv, B, T, want);
        CHECK_CLOSE(kn_module_forward(a, x), want, ((tolerance){1e-10, 1e-10}), "attention");
        free(xv), free(want);
        kn_module_free(a);
    }
    /* rope on its own, at an offset, in f32 */
    kn_tensor *x = rand_tensor(KN_SHAPE(2, 3, 6), KN_F32, -1, 1);
    double *xv = values(x);
    for (int r = 0; r < 6; r++) ref_rope(xv + 6 * r, 6, 7 + r % 3, 10000);
    CHECK_CLOSE(kn_nn_rope(x, 7, 10000), xv, ((tolerance){1e-5, 1e-5}), "rope at offset 7");
    free(xv);
}

/* Prefill, then one token at a time through the cache, equals the full causal forward. */
static void test_kv_cache_decoding_matches_full_forward(void) {
    for (int k = 1; k < 3; k++) {
        kn_nn_attention *a = kn_nn_attention_new(ATTN_CFGS[k]);
        int64_t B = 2, T = 6, C = a->cfg.dim;
        kn_tensor *x = rand_tensor(KN_SHAPE(B, T, C), KN_F64, -1, 1);
        double *full = values(kn_nn_attention_forward(a, x));
        kn_kv_cache *cache = kn_kv_cache_new(a, B, T);
        kn_tensor *steps[5];
        steps[0] = kn_nn_attention_forward_cached(a, kn_narrow(x, 1, 0, 2), cache);
        CHECK(cache->len == 2);
        for (int t = 2; t < T; t++) steps[t - 1] = kn_nn_attention_forward_cached(a, kn_narrow(x, 1, t, 1), cache);
        CHECK(cache->len == T);
        CHECK_CLOSE(kn_cat(steps, 5, 1), full, ((tolerance){1e-10, 1e-10}), "decoding");
        CHECK_ERROR(kn_nn_attention_forward_cached(a, kn_narrow(x, 1, 0, 1), cache) != NULL, KN_ERR_SHAPE,
                    "does not fit a cache holding 6 of 6");
        CHECK(cache->len == T);
        kn_kv_cache_reset(cache);
        CHECK_CLOSE(kn_nn_attention_forward_cached(a, x, cache), full, ((tolerance){1e-10, 1e-10}), "after reset");
        free(full);
        kn_kv_cache_free(cache);
        kn_module_free(a);
    }
}

static void test_bad_arguments_give_clear_errors(void) {
    kn_nn_attention_cfg cfg = {.dim = 12, .n_heads = 4, .n_kv_heads = 3, .dtype = KN_F32};
    CHECK_ERROR(kn_nn_attention_new(cfg) != NULL, KN_ERR_ARG, "n_heads 4 is not a multiple of n_kv_heads 3");
    cfg = (kn_nn_attention_cfg){.dim = 10, .n_heads = 4, .dtype = KN_F32};
    CHECK_ERROR(kn_nn_attention_new(cfg) != NULL, KN_ERR_ARG, "dim 10 is not a multiple of n_heads 4");
    cfg = (kn_nn_attention_cfg){.dim = 6, .n_heads = 2, .rope_theta = 10000, .dtype = KN_F32};
    CHECK_ERROR(kn_nn_attention_new(cfg) != NULL, KN_ERR_ARG, "even head_dim (3)");
    cfg = (kn_nn_attention_cfg){.dim = 8, .n_heads = 2, .dtype = KN_F32};
    kn_nn_attention *a = kn_nn_attention_new(cfg);
    CHECK_ERROR(kn_nn_attention_forward(a, kn_zeros(KN_SHAPE(2, 3, 6), KN_F32)) != NULL, KN_ERR_SHAPE,
                "x must be [B, T, 8], not f32[2, 3, 6]");
    kn_kv_cache *cache = kn_kv_cache_new(a, 1, 4);
    CHECK_ERROR(kn_nn_attention_forward_cached(a, kn_zeros(KN_SHAPE(2, 1, 8), KN_F32), cache) != NULL, KN_ERR_SHAPE,
                "for batch 2 does not fit");
    kn_kv_cache_free(cache);
    kn_module_free(a);
    kn_nn_linear *l = kn_nn_linear_new(4, 3, true, KN_F32);
    CHECK_ERROR(kn_nn_linear_forward(l, kn_zeros(KN_SHAPE(2, 5), KN_F32)) != NULL, KN_ERR_SHAPE,
                "Linear(4 -> 3): x f32[2, 5] must have 4 features");
    kn_module_free(l);
    CHECK_ERROR(kn_nn_group_norm_new(3, 4, 1e-5, true, KN_F32) != NULL, KN_ERR_ARG, "3 groups must divide 4 channels");
    CHECK_ERROR(kn_nn_rope(kn_zeros(KN_SHAPE(2, 5), KN_F32), 0, 10000) != NULL, KN_ERR_SHAPE, "D even");
    CHECK_ERROR(kn_nn_linear_forward(NULL, NULL) != NULL, KN_ERR_NULL, "Linear");
}

/* ---- gradients ------------------------------------------------------------------------- */

typedef kn_tensor *(*apply_fn)(void *module, kn_tensor *x);

/* What a gradient check runs: module(input(x)), where input is x or its transpose. */
typedef struct grad_case {
    void *module;
    apply_fn apply;        /* NULL: kn_module_forward */
    kn_tensor *x;          /* a float64 leaf, or an integer input (not checked) */
    bool transpose_x;
} grad_case;

static kn_tensor *run_case(const grad_case *c) {
    kn_tensor *in = c->transpose_x ? kn_transpose(c->x, 0, 1) : c->x;
    return c->apply ? c->apply(c->module, in) : kn_module_forward(c->module, in);
}

/* sum(f(x) * r) without history; the Philox state is reset so dropout draws the same mask. */
static double loss_value(const grad_case *c, kn_tensor *r, uint64_t seed, uint64_t offset) {
    double v = NAN;
    kn_rng_set_state(seed, offset);
    kn_no_grad_push();
    kn_scope_push();
    kn_item(kn_sum(kn_mul(run_case(c), r), KN_ALL_DIMS, false), &v);
    kn_scope_pop();
    kn_no_grad_pop();
    return v;
}

static void set_values(kn_tensor *t, const double *v) {
    kn_no_grad_push();
    kn_scope_push();
    CHECK(kn_copy_(t, tensor_from(v, kn_shape_of(t), KN_F64)) == KN_OK);
    kn_scope_pop();
    kn_no_grad_pop();
}

/* Compares kn_backward's gradient of t with central differences at up to 40 elements. */
static void check_tensor_grad(const grad_case *c, kn_tensor *t, kn_tensor *r, uint64_t seed, uint64_t offset,
                              const char *what) {
    kn_tensor *g = kn_grad(t);
    CHECK_MSG(g != NULL, "%s: no gradient", what);
    if (!g) return;
    double *gv = read_f64(g), *v = read_f64(t), h = 1e-6;
    int64_t n = kn_numel(t), step = n > 40 ? n / 40 : 1;
    for (int64_t i = 0; i < n; i += step) {
        double keep = v[i];
        v[i] = keep + h, set_values(t, v);
        double up = loss_value(c, r, seed, offset);
        v[i] = keep - h, set_values(t, v);
        double down = loss_value(c, r, seed, offset);
        v[i] = keep, set_values(t, v);
        double want = (up - down) / (2 * h);
        CHECK_MSG(fabs(gv[i] - want) <= 1e-6 * fabs(want) + 1e-7, "%s[%lld]: backward %.12g, finite differences %.12g",
                  what, (long long)i, gv[i], want);
    }
    free(gv), free(v);
}

/* Gradients of sum(module(x) * r) w.r.t. every parameter and x, against finite differences. */
static void gradcheck(grad_case c, const char *what) {
    uint64_t seed, offset;
    kn_rng_get_state(&seed, &offset);
    bool float_x = kn_dtype_is_float(kn_dtype_of(c.x));
    if (float_x) kn_requires_grad(c.x, true);
    kn_named_tensors p;
    CHECK(kn_module_named(c.module, KN_PARAMS, &p) == KN_OK);
    for (int i = 0; i < p.count; i++) kn_zero_grad(p.tensors[i]);
    kn_tensor *y = run_case(&c);
    if (!y && strstr(kn_last_error(), "no gradient formula")) {
        /* the gradient table is filled op by op; this check runs once its ops are there */
        printf("  skipped %s: %s\n", what, kn_last_error());
        kn_clear_error();
        kn_named_tensors_free(&p);
        return;
    }
    CHECK_MSG(y != NULL, "%s: forward failed: %s", what, kn_last_error());
    kn_tensor *r = y ? rand_tensor(kn_shape_of(y), KN_F64, -1, 1) : NULL;
    CHECK(y && kn_backward(kn_sum(kn_mul(y, r), KN_ALL_DIMS, false)) == KN_OK);
    char name[160];
    for (int i = 0; y && i < p.count; i++) {
        snprintf(name, sizeof name, "%s %s", what, p.names[i]);
        check_tensor_grad(&c, p.tensors[i], r, seed, offset, name);
    }
    kn_named_tensors_free(&p);
    if (y && float_x) {
        snprintf(name, sizeof name, "%s input", what);
        check_tensor_grad(&c, c.x, r, seed, offset, name);
    }
}

static kn_tensor *bag_apply(void *m, kn_tensor *x) { return kn_nn_embedding_bag_forward(m, x, NULL, NULL); }
static kn_tensor *residual_apply(void *m, kn_tensor *x) {
    kn_module *seq = m;
    return kn_nn_residual(x, seq->children[0], seq->children[1]);
}

static void test_gradients_of_layers(void) {
    kn_nn_linear *l = kn_nn_linear_new(5, 3, true, KN_F64);
    gradcheck((grad_case){l, NULL, rand_tensor(KN_SHAPE(4, 5), KN_F64, -1, 1), false}, "Linear");
    gradcheck((grad_case){l, NULL, rand_tensor(KN_SHAPE(5, 4), KN_F64, -1, 1), true}, "Linear, transposed input");
    kn_module_free(l);
    double idx[6] = {0, 3, 3, 1, 4, 0};
    kn_tensor *ix = tensor_from(idx, KN_SHAPE(2, 3), KN_I64);
    kn_nn_embedding *e = kn_nn_embedding_new(5, 3, KN_F64);
    gradcheck((grad_case){e, NULL, ix, false}, "Embedding");
    kn_module_free(e);
    for (int mode = 0; mode < 3; mode++) {
        kn_nn_embedding_bag *b = kn_nn_embedding_bag_new(5, 3, (kn_bag_mode)mode, KN_F64);
        gradcheck((grad_case){b, bag_apply, ix, false}, "EmbeddingBag");
        kn_module_free(b);
    }
    kn_nn_conv2d *c = kn_nn_conv2d_new(4, 2, 3, (kn_conv_opts){.stride = {2, 2}, .padding = {1, 1}, .groups = 2}, true, KN_F64);
    gradcheck((grad_case){c, NULL, rand_tensor(KN_SHAPE(2, 4, 5, 5), KN_F64, -1, 1), false}, "Conv2d");
    kn_module_free(c);
    c = kn_nn_conv_transpose2d_new(2, 4, 3, (kn_conv_opts){.stride = {2, 2}, .padding = {1, 1}}, true, KN_F64);
    gradcheck((grad_case){c, NULL, rand_tensor(KN_SHAPE(2, 2, 3, 3), KN_F64, -1, 1), false}, "ConvTranspose2d");
    kn_module_free(c);
    kn_nn_dropout *d = kn_nn_dropout_new(0.3);
    gradcheck((grad_case){d, NULL, rand_tensor(KN_SHAPE(4, 6), KN_F64, -1, 1), false}, "Dropout");
    kn_module_free(d);
}

static void test_gradients_of_norms(void) {
    kn_tensor *x = rand_tensor(KN_SHAPE(3, 4, 2, 2), KN_F64, -1, 2);
    void *mods[4] = {kn_nn_layer_norm_new(KN_SHAPE(2, 2), 1e-5, true, KN_F64), kn_nn_rms_norm_new(KN_SHAPE(2), 1e-6, KN_F64),
                     kn_nn_group_norm_new(2, 4, 1e-5, true, KN_F64), kn_nn_batch_norm2d_new(4, 1e-5, 0.1, true, KN_F64)};
    const char *names[4] = {"LayerNorm", "RMSNorm", "GroupNorm", "BatchNorm2d train"};
    for (int i = 0; i < 4; i++) {
        randomize(mods[i]);
        gradcheck((grad_case){mods[i], NULL, kn_clone(x), false}, names[i]);
    }
    kn_module_train(mods[3], false);
    gradcheck((grad_case){mods[3], NULL, kn_clone(x), false}, "BatchNorm2d eval");
    for (int i = 0; i < 4; i++) kn_module_free(mods[i]);
}

static void test_gradients_of_blocks(void) {
    kn_act acts[3] = {KN_ACT_GELU, KN_ACT_GELU_TANH, KN_ACT_SILU};
    for (int k = 0; k < 3; k++) {
        kn_nn_mlp *m = kn_nn_mlp_new(4, 6, acts[k], k == 2, k != 2, KN_F64);
        gradcheck((grad_case){m, NULL, rand_tensor(KN_SHAPE(3, 4), KN_F64, -1, 1), false}, k == 2 ? "SwiGLU" : "MLP");
        kn_module_free(m);
    }
    for (int k = 0; k < 3; k++) {
        kn_nn_attention *a = kn_nn_attention_new(ATTN_CFGS[k]);
        gradcheck((grad_case){a, NULL, rand_tensor(KN_SHAPE(2, 4, a->cfg.dim), KN_F64, -1, 1), false}, "Attention");
        kn_module_free(a);
    }
    kn_module *seq = kn_nn_sequential_new();
    kn_module_add(seq, NULL, kn_nn_layer_norm_new(KN_SHAPE(4), 1e-5, true, KN_F64));
    kn_module_add(seq, NULL, kn_nn_mlp_new(4, 8, KN_ACT_GELU, false, true, KN_F64));
    randomize(seq->children[0]);
    gradcheck((grad_case){seq, residual_apply, rand_tensor(KN_SHAPE(2, 3, 4), KN_F64, -1, 1), false}, "residual");
    gradcheck((grad_case){seq, NULL, rand_tensor(KN_SHAPE(2, 3, 4), KN_F64, -1, 1), false}, "Sequential");
    kn_module_free(seq);
}

int main(void) {
    RUN(test_state_names_follow_pytorch);
    RUN(test_tied_weights_are_listed_once_as_parameters);
    RUN(test_a_module_with_many_members_keeps_its_rules);
    RUN(test_train_eval_propagates);
    RUN(test_registration_errors);
    RUN(test_initializers_have_the_right_statistics);
    RUN(test_module_default_inits_match_pytorch);
    RUN(test_seed_reproduces_the_model);
    /* Forward values are checked as inference; the gradient tests below run the same
     * forwards with history. */
    bool grad_mode = kn_set_grad_enabled(false);
    RUN(test_linear_matches_reference);
    RUN(test_embedding_and_bag_match_reference);
    RUN(test_norm_modules_match_reference);
    RUN(test_batch_norm2d_tracks_running_stats_then_evaluates);
    RUN(test_conv_modules_match_direct_loops);
    RUN(test_dropout_only_in_training);
    RUN(test_mlp_variants_match_reference);
    RUN(test_sequential_and_residual);
    RUN(test_attention_matches_naive_reference);
    RUN(test_kv_cache_decoding_matches_full_forward);
    RUN(test_bad_arguments_give_clear_errors);
    kn_set_grad_enabled(grad_mode);
    RUN(test_gradients_of_layers);
    RUN(test_gradients_of_norms);
    RUN(test_gradients_of_blocks);
    return test_summary();
}
