/* Compiled mode (kiln/compile.h): a training step with AdamW and a layer norm, run as
 * programs, gives strict mode's losses; a step is one program, or two when it reads a value
 * (a graph break); dead code does not run; the memory plan's arena takes the intermediates;
 * outside compiled mode the step runs as it is; bad arguments are errors. */
#define _GNU_SOURCE
#include <math.h>
#include <stdlib.h>

#include "harness.h"

enum { B = 16, IN = 24, HID = 32, OUT = 8 };

typedef struct model {
    kn_tensor *w1, *b1, *w2, *ln_w, *ln_b;
    kn_optimizer *opt;
    bool read_loss;  /* the step reads its loss on the host (a graph break) */
    bool dead_code;  /* the step also computes something no one reads */
} model;

static void model_init(model *m) {
    kn_manual_seed(11);
    m->w1 = kn_requires_grad(kn_mul_scalar(kn_randn(KN_SHAPE(HID, IN), KN_F32), 0.2), true);
    m->b1 = kn_requires_grad(kn_zeros(KN_SHAPE(HID), KN_F32), true);
    m->w2 = kn_requires_grad(kn_mul_scalar(kn_randn(KN_SHAPE(OUT, HID), KN_F32), 0.2), true);
    m->ln_w = kn_requires_grad(kn_ones(KN_SHAPE(HID), KN_F32), true);
    m->ln_b = kn_requires_grad(kn_zeros(KN_SHAPE(HID), KN_F32), true);
    kn_tensor *params[] = {m->w1, m->b1, m->w2, m->ln_w, m->ln_b};
    kn_param_group g = kn_adamw_group(params, 5, 1e-2, 0.01);
    m->opt = kn_adamw_new(&g, 1);
    m->read_loss = m->dead_code = false;
}

static void model_free(model *m) {
    kn_optimizer_free(m->opt);
    kn_release(m->w1), kn_release(m->b1), kn_release(m->w2), kn_release(m->ln_w), kn_release(m->ln_b);
}

/* forward (linear, layer norm, GELU, linear), MSE loss, backward, AdamW: loss out */
static kn_status train_step(void *ctx, kn_tensor *const *in, int n_in, kn_tensor **out, int n_out) {
    model *m = ctx;
    (void)n_in, (void)n_out;
    kn_tensor *h = kn_linear(in[0], m->w1, m->b1);
    h = kn_gelu(kn_layer_norm(h, KN_SHAPE(HID), m->ln_w, m->ln_b, 1e-5));
    kn_tensor *loss = kn_mse_loss(kn_linear(h, m->w2, NULL), in[1], KN_REDUCTION_MEAN);
    if (m->dead_code) kn_exp(kn_mul(h, h));
    if (m->read_loss) {
        double v;
        kn_status st = kn_item(loss, &v);
        if (st != KN_OK) return st;
    }
    kn_status st = loss ? kn_optimizer_zero_grad(m->opt) : kn_last_status();
    if (st == KN_OK) st = kn_backward(loss);
    if (st == KN_OK) st = kn_optimizer_step(m->opt);
    out[0] = loss;
    return st;
}

/* Losses of steps steps in mode, from the same start and batches. */
static void losses(kn_mode mode, bool read_loss, int steps, double *got) {
    kn_mode before = kn_get_mode();
    CHECK(kn_set_mode(mode) == KN_OK);
    model m;
    model_init(&m);
    m.read_loss = read_loss;
    kn_compiled *step = kn_compile(train_step, &m, &(kn_compile_options){.name = "mlp"});
    CHECK(step != NULL);
    for (int s = 0; s < steps; s++) {
        kn_scope_push();
        kn_manual_seed(100 + (uint64_t)s);
        kn_tensor *x = kn_randn(KN_SHAPE(B, IN), KN_F32), *y = kn_randn(KN_SHAPE(B, OUT), KN_F32);
        kn_tensor *loss = NULL;
        CHECK(kn_compiled_run(step, (kn_tensor *[]){x, y}, 2, &loss, 1) == KN_OK);
        CHECK(loss != NULL && kn_item(loss, &got[s]) == KN_OK);
        kn_scope_pop();
    }
    CHECK(kn_compiled_runs(step) == steps);
    kn_compiled_free(step);
    model_free(&m);
    CHECK(kn_set_mode(before) == KN_OK);
}

static void test_losses_equal_strict_over_20_steps(void) {
    double strict[20], compiled[20], broken[20];
    kn_stats s0, s1, s2;
    losses(KN_MODE_STRICT, false, 20, strict);
    kn_stats_get(&s0);
    losses(KN_MODE_COMPILED, false, 20, compiled);
    kn_stats_get(&s1);
    losses(KN_MODE_COMPILED, true, 20, broken);
    kn_stats_get(&s2);
    for (int s = 0; s < 20; s++) {
        CHECK_MSG(fabs(compiled[s] - strict[s]) <= 1e-5 * fabs(strict[s]), "step %d: compiled loss %.9g, strict %.9g", s,
                  compiled[s], strict[s]);
        CHECK_MSG(fabs(broken[s] - strict[s]) <= 1e-5 * fabs(strict[s]), "step %d: with a graph break %.9g, strict %.9g",
                  s, broken[s], strict[s]);
    }
    CHECK_MSG(strict[19] < 0.8 * strict[0], "the model did not learn: %g -> %g", strict[0], strict[19]);
    /* one program a step, plus the model's set-up and each loss read in between */
    CHECK_MSG(s1.programs - s0.programs >= 20 && s1.programs - s0.programs <= 42, "%lld programs for 20 steps",
              (long long)(s1.programs - s0.programs));
    CHECK_MSG(s2.programs - s1.programs >= (s1.programs - s0.programs) + 20, "a read inside the step: %lld programs",
              (long long)(s2.programs - s1.programs));
    CHECK(s1.fused_kernels > s0.fused_kernels);
}

static kn_status dead_step(void *ctx, kn_tensor *const *in, int n_in, kn_tensor **out, int n_out) {
    (void)ctx, (void)n_in, (void)n_out;
    kn_tensor *unused = kn_exp(kn_mul(in[0], in[0]));
    (void)unused;
    out[0] = kn_sum(kn_add(in[0], in[0]), KN_ALL_DIMS, false);
    return out[0] ? KN_OK : kn_last_status();
}

static void test_dead_code_does_not_run(void) {
    kn_mode before = kn_get_mode();
    CHECK(kn_set_mode(KN_MODE_COMPILED) == KN_OK);
    kn_tensor *x = kn_arange(0, 6, 1, KN_F32);
    kn_compiled *p = kn_compile(dead_step, NULL, NULL);
    kn_stats s0, s1;
    kn_stats_get(&s0);
    kn_tensor *sum = NULL;
    CHECK(kn_compiled_run(p, &x, 1, &sum, 1) == KN_OK);
    double v = 0;
    CHECK(kn_item(sum, &v) == KN_OK && v == 30);
    kn_stats_get(&s1);
    CHECK_MSG(s1.ops_eliminated - s0.ops_eliminated == 2, "%lld ops eliminated",
              (long long)(s1.ops_eliminated - s0.ops_eliminated));
    kn_release(sum);
    kn_release(x);
    kn_compiled_free(p);
    CHECK(kn_set_mode(before) == KN_OK);
}

/* exp(x) twice: the second is the first's value (graph/cse.c; fused mode's tests cover the
 * in-place writes that forbid it). */
static kn_status twice_step(void *ctx, kn_tensor *const *in, int n_in, kn_tensor **out, int n_out) {
    (void)ctx, (void)n_in, (void)n_out;
    out[0] = kn_sum(kn_add(kn_exp(in[0]), kn_mul(kn_exp(in[0]), in[0])), KN_ALL_DIMS, false);
    return out[0] ? KN_OK : kn_last_status();
}

static void test_common_subexpressions_merge(void) {
    kn_mode before = kn_get_mode();
    CHECK(kn_set_mode(KN_MODE_COMPILED) == KN_OK);
    kn_tensor *x = kn_arange(0, 4, 1, KN_F32), *sum = NULL;
    kn_compiled *p = kn_compile(twice_step, NULL, NULL);
    kn_stats s0, s1;
    kn_stats_get(&s0);
    CHECK(kn_compiled_run(p, &x, 1, &sum, 1) == KN_OK);
    double v = 0, want = 0;
    CHECK(kn_item(sum, &v) == KN_OK);
    kn_stats_get(&s1);
    for (int i = 0; i < 4; i++) want += exp(i) * (1 + i);
    CHECK_MSG(fabs(v - want) <= 1e-5 * want, "sum %.9g, want %.9g", v, want);
    CHECK_MSG(s1.ops_merged - s0.ops_merged == 1, "%lld ops merged", (long long)(s1.ops_merged - s0.ops_merged));
    kn_release(sum);
    kn_release(x);
    kn_compiled_free(p);
    CHECK(kn_set_mode(before) == KN_OK);
}

/* A chain of same-sized values whose fused kernels cannot take all of it (a product between
 * each pair): the arena holds them, and the device's allocations during a program stay at the
 * arena and the results. */
static kn_status chain_step(void *ctx, kn_tensor *const *in, int n_in, kn_tensor **out, int n_out) {
    (void)ctx, (void)n_in, (void)n_out;
    kn_tensor *h = in[0];
    for (int i = 0; i < 12; i++) h = kn_tanh(kn_matmul(h, in[1]));
    out[0] = h;
    return h ? KN_OK : kn_last_status();
}

static void test_intermediates_share_the_arena(void) {
    kn_mode before = kn_get_mode();
    kn_tensor *x = kn_randn(KN_SHAPE(64, 64), KN_F32), *w = kn_mul_scalar(kn_randn(KN_SHAPE(64, 64), KN_F32), 0.1);
    kn_compiled *p = kn_compile(chain_step, NULL, NULL);
    double results[2][64 * 64 / 64];
    int64_t allocated[2];
    for (int k = 0; k < 2; k++) {
        CHECK(kn_set_mode(k ? KN_MODE_COMPILED : KN_MODE_STRICT) == KN_OK);
        kn_tensor *y = NULL;
        CHECK(kn_compiled_run(p, (kn_tensor *[]){x, w}, 2, &y, 1) == KN_OK); /* warm: the arena exists */
        kn_release(y);
        CHECK(kn_sync() == KN_OK);
        kn_memory_stats m0, m1;
        CHECK(kn_memory_stats_get(KN_CPU, &m0) == KN_OK);
        CHECK(kn_compiled_run(p, (kn_tensor *[]){x, w}, 2, &y, 1) == KN_OK);
        CHECK(kn_sync() == KN_OK);
        CHECK(kn_memory_stats_get(KN_CPU, &m1) == KN_OK);
        allocated[k] = m1.allocated_total_bytes - m0.allocated_total_bytes;
        float row[64];
        CHECK(kn_to_host(kn_narrow(y, 0, 0, 1), row, sizeof row) == KN_OK);
        for (int i = 0; i < 64; i++) results[k][i] = row[i];
        kn_release(y);
    }
    for (int i = 0; i < 64; i++) CHECK_MSG(fabs(results[0][i] - results[1][i]) <= 1e-5, "element %d differs", i);
    /* kn_memory_empty_cache gives the arena (11 planned values of 16 KiB, at least 2 live at once) back */
    kn_memory_stats held, after;
    CHECK(kn_memory_stats_get(KN_CPU, &held) == KN_OK);
    kn_memory_empty_cache(KN_CPU);
    CHECK(kn_memory_stats_get(KN_CPU, &after) == KN_OK);
    CHECK_MSG(held.allocated_bytes - after.allocated_bytes >= 2 * 64 * 64 * 4, "empty_cache freed %lld bytes",
              (long long)(held.allocated_bytes - after.allocated_bytes));
    /* strict: 24 values of 16 KiB; compiled: the result alone (plus the narrow's copy) */
    CHECK_MSG(allocated[1] <= 2 * 64 * 64 * 4, "compiled mode allocated %lld bytes for one step (strict %lld)",
              (long long)allocated[1], (long long)allocated[0]);
    CHECK(allocated[0] >= 12 * 64 * 64 * 4);
    kn_compiled_free(p);
    kn_release(x), kn_release(w);
    CHECK(kn_set_mode(before) == KN_OK);
}

/* masked_select's output shape depends on values: it runs where it is (a graph break), and the
 * step gives strict mode's result. */
static kn_status selecting_step(void *ctx, kn_tensor *const *in, int n_in, kn_tensor **out, int n_out) {
    (void)ctx, (void)n_in, (void)n_out;
    kn_tensor *doubled = kn_mul_scalar(in[0], 2);
    kn_tensor *picked = kn_masked_select(doubled, kn_gt(in[0], kn_scalar(2, KN_F32)));
    out[0] = kn_sum(kn_exp(kn_mul_scalar(picked, 0.5)), KN_ALL_DIMS, false);
    return out[0] ? KN_OK : kn_last_status();
}

static void test_a_value_dependent_shape_is_a_graph_break(void) {
    kn_mode before = kn_get_mode();
    kn_tensor *x = kn_arange(0, 6, 1, KN_F32);
    kn_compiled *p = kn_compile(selecting_step, NULL, NULL);
    double got[2];
    kn_stats s0, s1;
    for (int k = 0; k < 2; k++) {
        CHECK(kn_set_mode(k ? KN_MODE_COMPILED : KN_MODE_STRICT) == KN_OK);
        kn_stats_get(&s0);
        kn_tensor *y = NULL;
        CHECK(kn_compiled_run(p, &x, 1, &y, 1) == KN_OK);
        CHECK(kn_item(y, &got[k]) == KN_OK);
        kn_stats_get(&s1);
        kn_release(y);
    }
    CHECK_MSG(s1.programs - s0.programs >= 2, "%lld programs", (long long)(s1.programs - s0.programs));
    CHECK_MSG(fabs(got[1] - got[0]) <= 1e-6 * got[0] && fabs(got[0] - (exp(3) + exp(4) + exp(5))) < 1e-3,
              "compiled %.9g, strict %.9g", got[1], got[0]);
    kn_compiled_free(p);
    kn_release(x);
    CHECK(kn_set_mode(before) == KN_OK);
}

/* KILN_COMPILE_DUMP: the chain step's program after each stage, in text and dot, and a fusing
 * step's generated kernels. */
static void test_programs_are_dumped(void) {
    char dir[] = "/tmp/kiln_compile_dump_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    kn_mode before = kn_get_mode();
    CHECK(kn_set_mode(KN_MODE_COMPILED) == KN_OK);
    kn_tensor *x = kn_randn(KN_SHAPE(8, 8), KN_F32), *w = kn_randn(KN_SHAPE(8, 8), KN_F32), *y = NULL;
    CHECK(kn_sync() == KN_OK);
    kn_compiled *p = kn_compile(chain_step, NULL, NULL);
    kn_compiled *fusing = kn_compile(twice_step, NULL, NULL);
    kn_tensor *sum = NULL;
    setenv("KILN_COMPILE_DUMP", dir, 1);
    CHECK(kn_compiled_run(p, (kn_tensor *[]){x, w}, 2, &y, 1) == KN_OK);
    CHECK(kn_compiled_run(fusing, &x, 1, &sum, 1) == KN_OK);
    unsetenv("KILN_COMPILE_DUMP");
    CHECK(kn_sync() == KN_OK);
    char cmd[256];
    snprintf(cmd, sizeof cmd, "cat %s/program-*-recorded.txt > %s/all-recorded", dir, dir);
    CHECK(system(cmd) == 0);
    snprintf(cmd, sizeof cmd, "cat %s/program-*-planned.txt %s/program-*-planned.dot > %s/all-planned", dir, dir, dir);
    CHECK(system(cmd) == 0);
    char path[128];
    snprintf(path, sizeof path, "%s/all-recorded", dir);
    CHECK(file_contains(path, "n0 = matmul(x0, x1) -> v0 f32[8, 8]"));
    CHECK(file_contains(path, "n23 = tanh(v22) -> v23 f32[8, 8]"));
    snprintf(path, sizeof path, "%s/all-planned", dir);
    CHECK(file_contains(path, "n0 = matmul(x0, x1) -> v0 f32[8, 8] (arena +0)")); /* an intermediate placed */
    CHECK(file_contains(path, "n1 = tanh(v0) -> v1 f32[8, 8] (arena +0)"));      /* written over its dead input */
    CHECK(file_contains(path, "(own memory at launch)")); /* the result the caller holds */
    CHECK(file_contains(path, "digraph program_"));
    /* 23 values, two slots of 8 x 8 floats: each tanh writes over its matmul's result */
    CHECK(file_contains(path, "# memory plan: 23 values in an arena of 512 bytes; at most 512 bytes live at once"));
    snprintf(cmd, sizeof cmd, "cat %s/program-*-1-dce.txt %s/program-*-2-fused.dot | grep -q tanh", dir, dir);
    CHECK(system(cmd) == 0);
    /* the generated source of the second step's fused kernel */
    snprintf(cmd, sizeof cmd, "grep -q 'kn_fk_[0-9a-f]*(' %s/program-*-kernels.c", dir);
    CHECK(system(cmd) == 0);
    kn_release(sum);
    kn_compiled_free(fusing);
    kn_release(y);
    kn_compiled_free(p);
    kn_release(x), kn_release(w);
    CHECK(kn_set_mode(before) == KN_OK);
    remove_tree(dir);
}

static kn_status failing_step(void *ctx, kn_tensor *const *in, int n_in, kn_tensor **out, int n_out) {
    (void)ctx, (void)n_in, (void)n_out;
    out[0] = kn_matmul(in[0], in[0]); /* [3] x [3] is a dot, but [2, 3] x [2, 3] is not */
    return out[0] ? KN_OK : kn_last_status();
}

static void test_bad_arguments_and_step_errors(void) {
    kn_tensor *x = kn_ones(KN_SHAPE(2, 3), KN_F32), *out = NULL;
    CHECK_ERROR(kn_compile(NULL, NULL, NULL) != NULL, KN_ERR_ARG, "no step function");
    CHECK_ERROR(kn_compiled_run(NULL, &x, 1, &out, 1) == KN_OK, KN_ERR_ARG, "no program");
    kn_compiled *p = kn_compile(failing_step, NULL, &(kn_compile_options){.name = "bad"});
    CHECK_ERROR(kn_compiled_run(p, NULL, 1, &out, 1) == KN_OK, KN_ERR_ARG, "compiled_run(bad): 1 inputs");
    CHECK_ERROR(kn_compiled_run(p, (kn_tensor *[]){NULL}, 1, &out, 1) == KN_OK, KN_ERR_ARG, "input 0 is NULL");
    kn_mode before = kn_get_mode();
    CHECK(kn_set_mode(KN_MODE_COMPILED) == KN_OK);
    CHECK_ERROR(kn_compiled_run(p, &x, 1, &out, 1) == KN_OK, KN_ERR_SHAPE, "matmul");
    CHECK(out == NULL);
    CHECK(kn_set_mode(before) == KN_OK);
    kn_compiled_free(p);
    kn_release(x);
}

int main(void) {
    RUN(test_losses_equal_strict_over_20_steps);
    RUN(test_dead_code_does_not_run);
    RUN(test_common_subexpressions_merge);
    RUN(test_intermediates_share_the_arena);
    RUN(test_a_value_dependent_shape_is_a_graph_break);
    RUN(test_programs_are_dumped);
    RUN(test_bad_arguments_and_step_errors);
    return test_summary();
}
