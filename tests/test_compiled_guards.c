/* Compiled mode's guards (kiln/compile.h): a sequence length declared dynamic runs one program
 * at every length, compiling nothing after the first; an undeclared size change, a dtype
 * change, a size past the dynamic bound and a change in what the step records each count one
 * recompile with their reason (so does the same ops wired another way), and
 * KILN_RECOMPILE=error makes them errors (before the step runs when an input changed); bad
 * dynamic dims are errors. */
#define _GNU_SOURCE
#include <math.h>
#include <stdlib.h>

#include "harness.h"

enum { D = 16, MAX_T = 128 };

typedef struct block {
    kn_tensor *wq, *wk, *wv, *ln_w, *ln_b;
    bool extra; /* records one more op: a change of structure */
} block;

/* x [1, 1, T, D]: layer norm, causal attention, a residual GELU chain, softmax rows, their mean. */
static kn_status block_step(void *ctx, kn_tensor *const *in, int n_in, kn_tensor **out, int n_out) {
    block *b = ctx;
    (void)n_in, (void)n_out;
    kn_tensor *x = kn_layer_norm(in[0], KN_SHAPE(D), b->ln_w, b->ln_b, 1e-5);
    kn_tensor *a = kn_scaled_dot_product_attention(kn_matmul(x, b->wq), kn_matmul(x, b->wk), kn_matmul(x, b->wv), NULL,
                                                   (kn_sdpa_opts){.causal = true});
    kn_tensor *h = kn_gelu(kn_add(kn_mul_scalar(a, 0.5), in[0]));
    if (b->extra) h = kn_tanh(h);
    out[0] = kn_mean(kn_softmax(h, -1), KN_SHAPE(2, 3), false);
    return out[0] ? KN_OK : kn_last_status();
}

static void block_init(block *b) {
    kn_manual_seed(5);
    b->wq = kn_mul_scalar(kn_randn(KN_SHAPE(D, D), KN_F32), 0.25);
    b->wk = kn_mul_scalar(kn_randn(KN_SHAPE(D, D), KN_F32), 0.25);
    b->wv = kn_mul_scalar(kn_randn(KN_SHAPE(D, D), KN_F32), 0.25);
    b->ln_w = kn_ones(KN_SHAPE(D), KN_F32);
    b->ln_b = kn_zeros(KN_SHAPE(D), KN_F32);
    b->extra = false;
}

static void block_free(block *b) { kn_release(b->wq), kn_release(b->wk), kn_release(b->wv), kn_release(b->ln_w), kn_release(b->ln_b); }

static kn_tensor *input(int64_t T, kn_dtype dtype) {
    kn_manual_seed(100 + (uint64_t)T);
    return kn_cast(kn_randn(KN_SHAPE(1, 1, T, D), KN_F32), dtype);
}

/* The step's result at length T in mode (a fresh input of that length). */
static void run_at(kn_compiled *p, int64_t T, float *got) {
    kn_scope_push();
    kn_tensor *y = NULL;
    CHECK(kn_compiled_run(p, (kn_tensor *[]){input(T, KN_F32)}, 1, &y, 1) == KN_OK);
    CHECK(y != NULL && kn_to_host(y, got, 1 * sizeof *got) == KN_OK);
    kn_release(y);
    kn_scope_pop();
}

static void test_a_growing_length_runs_one_program(void) {
    block b;
    block_init(&b);
    kn_compile_dim seq = {.input = 0, .dim = 2, .max = MAX_T};
    kn_compiled *p = kn_compile(block_step, &b, &(kn_compile_options){"block", &seq, 1});
    kn_mode before = kn_get_mode();
    static float strict[MAX_T + 1], compiled[MAX_T + 1];
    CHECK(kn_set_mode(KN_MODE_STRICT) == KN_OK);
    for (int64_t T = 1; T <= MAX_T; T += 9) run_at(p, T, &strict[T]);
    CHECK(kn_set_mode(KN_MODE_COMPILED) == KN_OK);
    kn_stats s0, s1;
    run_at(p, 1, &compiled[1]);
    kn_stats_get(&s0);
    for (int64_t T = 2; T <= MAX_T; T++) run_at(p, T, &compiled[T]);
    kn_stats_get(&s1);
    CHECK_MSG(kn_compiled_recompiles(p) == 0, "%lld recompiles of the step", (long long)kn_compiled_recompiles(p));
    CHECK_MSG(s1.recompiles == s0.recompiles && s1.compiles == s0.compiles,
              "lengths 2..%d: %lld recompiles, %lld compiles", MAX_T, (long long)(s1.recompiles - s0.recompiles),
              (long long)(s1.compiles - s0.compiles));
    CHECK_MSG(s1.programs - s0.programs >= MAX_T - 1, "%lld programs", (long long)(s1.programs - s0.programs));
    for (int64_t T = 1; T <= MAX_T; T += 9)
        CHECK_MSG(fabsf(compiled[T] - strict[T]) <= 1e-5f * fabsf(strict[T]) + 1e-7f, "T=%lld: compiled %.9g, strict %.9g",
                  (long long)T, compiled[T], strict[T]);
    CHECK(kn_set_mode(before) == KN_OK);
    kn_compiled_free(p);
    block_free(&b);
}

static int64_t reason_count(kn_recompile_reason r) {
    kn_stats s;
    kn_stats_get(&s);
    return s.recompile_reasons[r];
}

/* One call of p on x in compiled mode, whose result is dropped. */
static kn_status call(kn_compiled *p, kn_tensor *x) {
    kn_tensor *y = NULL;
    kn_status st = kn_compiled_run(p, &x, 1, &y, 1);
    CHECK(st == KN_OK ? y != NULL : y == NULL);
    kn_release(y);
    return st;
}

static void test_changes_recompile_with_their_reason(void) {
    block b;
    block_init(&b);
    kn_compile_dim seq = {.input = 0, .dim = 2, .max = 8};
    kn_compiled *p = kn_compile(block_step, &b, &(kn_compile_options){"guarded", &seq, 1});
    kn_mode before = kn_get_mode();
    CHECK(kn_set_mode(KN_MODE_COMPILED) == KN_OK);
    kn_tensor *x4 = input(4, KN_F32), *x6 = input(6, KN_F32), *x9 = input(9, KN_F32);
    kn_tensor *wide = kn_randn(KN_SHAPE(2, 1, 4, D), KN_F32), *f64 = input(4, KN_F64);
    CHECK(call(p, x4) == KN_OK && call(p, x6) == KN_OK && kn_compiled_recompiles(p) == 0);
    const kn_recompile_reason reasons[] = {KN_RECOMPILE_SHAPE, KN_RECOMPILE_SHAPE, KN_RECOMPILE_DTYPE, KN_RECOMPILE_OPS};
    kn_tensor *inputs[] = {wide, x9, f64, x4}; /* a fused kernel's own variant may count a dtype recompile too */
    for (int k = 0; k < 4; k++) {
        int64_t n0 = reason_count(reasons[k]);
        b.extra = k == 3;
        CHECK(call(p, inputs[k]) == KN_OK);
        CHECK_MSG(kn_compiled_recompiles(p) == k + 1 && reason_count(reasons[k]) >= n0 + 1, "change %d: %lld recompiles", k,
                  (long long)kn_compiled_recompiles(p));
        CHECK(call(p, inputs[k]) == KN_OK && kn_compiled_recompiles(p) == k + 1); /* seen now */
    }
    b.extra = false;
    CHECK(call(p, x6) == KN_OK && kn_compiled_recompiles(p) == 4); /* back to the first variant */

    setenv("KILN_RECOMPILE", "error", 1);
    kn_tensor *x2wide = kn_randn(KN_SHAPE(3, 1, 4, D), KN_F32);
    CHECK_ERROR(call(p, x2wide) == KN_OK, KN_ERR_UNSUPPORTED,
                "compiled step guarded would recompile (KILN_RECOMPILE=error): input 0's size [3, 1, *, 16] (was [1, 1, *, 16]");
    CHECK(call(p, x9) == KN_OK); /* a variant seen before */
    unsetenv("KILN_RECOMPILE");
    CHECK(kn_compiled_recompiles(p) == 4);
    CHECK(kn_set_mode(before) == KN_OK);
    kn_compiled_free(p);
    kn_release(x4), kn_release(x6), kn_release(x9), kn_release(wide), kn_release(f64), kn_release(x2wide);
    block_free(&b);
}

/* -x, or exp(x) once *ctx is set. */
static kn_status switching_step(void *ctx, kn_tensor *const *in, int n_in, kn_tensor **out, int n_out) {
    (void)n_in, (void)n_out;
    out[0] = ctx && *(int *)ctx ? kn_exp(in[0]) : kn_neg(in[0]);
    return out[0] ? KN_OK : kn_last_status();
}

/* in0 - in1, or in1 - in0 once *ctx is set: the same ops, wired the other way. */
static kn_status rewired_step(void *ctx, kn_tensor *const *in, int n_in, kn_tensor **out, int n_out) {
    (void)n_in, (void)n_out;
    bool swap = *(int *)ctx;
    out[0] = kn_sub(in[swap], in[!swap]);
    return out[0] ? KN_OK : kn_last_status();
}

static void test_rewiring_is_a_change_of_structure(void) {
    kn_mode before = kn_get_mode();
    CHECK(kn_set_mode(KN_MODE_COMPILED) == KN_OK);
    int swap = 0;
    kn_tensor *a = kn_ones(KN_SHAPE(3), KN_F32), *b = kn_zeros(KN_SHAPE(3), KN_F32), *y = NULL;
    kn_compiled *p = kn_compile(rewired_step, &swap, NULL);
    for (int k = 0; k < 3; k++) {
        swap = k == 1;
        CHECK(kn_compiled_run(p, (kn_tensor *[]){a, b}, 2, &y, 1) == KN_OK);
        double v = 0;
        kn_tensor *sum = kn_sum(y, KN_ALL_DIMS, false);
        CHECK(kn_item(sum, &v) == KN_OK && v == (swap ? -3 : 3));
        kn_release(sum), kn_release(y);
    }
    CHECK_MSG(kn_compiled_recompiles(p) == 1, "%lld recompiles", (long long)kn_compiled_recompiles(p));
    kn_compiled_free(p);
    kn_release(a), kn_release(b);
    CHECK(kn_set_mode(before) == KN_OK);
}

/* Found only once recorded: the step has run (its in-place updates are made), its results are
 * dropped. */
static void test_a_changed_structure_is_an_error_when_asked(void) {
    kn_mode before = kn_get_mode();
    CHECK(kn_set_mode(KN_MODE_COMPILED) == KN_OK);
    int flag = 0;
    kn_tensor *x = kn_ones(KN_SHAPE(3), KN_F32);
    kn_compiled *p = kn_compile(switching_step, &flag, &(kn_compile_options){.name = "switch"});
    CHECK(call(p, x) == KN_OK);
    setenv("KILN_RECOMPILE", "error", 1);
    CHECK(call(p, x) == KN_OK);
    flag = 1;
    CHECK_ERROR(call(p, x) == KN_OK, KN_ERR_UNSUPPORTED,
                "compiled step switch recompiled (KILN_RECOMPILE=error): what the step records (its ops or their wiring)");
    CHECK(call(p, x) == KN_OK); /* counted once: seen now */
    unsetenv("KILN_RECOMPILE");
    CHECK(kn_compiled_recompiles(p) == 1);
    kn_compiled_free(p);
    kn_release(x);
    CHECK(kn_set_mode(before) == KN_OK);
}

static void test_bad_dynamic_dims(void) {
    kn_compile_dim bad[] = {{.input = -1, .dim = 0}, {.input = 0, .dim = 9}, {.input = 0, .dim = 0, .max = -2}};
    for (int k = 0; k < 3; k++)
        CHECK_ERROR(kn_compile(switching_step, NULL, &(kn_compile_options){"d", &bad[k], 1}) != NULL, KN_ERR_ARG,
                    "compile(d): dynamic dim 0 is input");
    CHECK_ERROR(kn_compile(switching_step, NULL, &(kn_compile_options){"d", NULL, 2}) != NULL, KN_ERR_ARG, "NULL array");
    kn_compile_dim past = {.input = 0, .dim = 1};
    kn_compiled *p = kn_compile(switching_step, NULL, &(kn_compile_options){"d", &past, 1});
    kn_tensor *x = kn_ones(KN_SHAPE(3), KN_F32);
    kn_mode before = kn_get_mode();
    CHECK(kn_set_mode(KN_MODE_COMPILED) == KN_OK);
    CHECK_ERROR(call(p, x) == KN_OK, KN_ERR_ARG, "dynamic dim 1 of input 0, which has 1 dims");
    CHECK(kn_set_mode(before) == KN_OK);
    kn_compiled_free(p);
    kn_release(x);
}

int main(void) {
    RUN(test_a_growing_length_runs_one_program);
    RUN(test_changes_recompile_with_their_reason);
    RUN(test_rewiring_is_a_change_of_structure);
    RUN(test_a_changed_structure_is_an_error_when_asked);
    RUN(test_bad_dynamic_dims);
    return test_summary();
}
