/* Backward passes of the GPT-2 blocks that dominate a training step: causal attention
 * [4, 12, T, 64] (forward, its backward op alone, forward + backward through autograd) and
 * cross_entropy on logits [256, 50257] (forward, its backward op alone, forward + backward of a
 * leaf, which includes the engine's copy of the first gradient), in ms. */
#include "bench_common.h"

#include <math.h>

#include "ops/loss_internal.h"

typedef struct grad_ctx {
    kn_tensor *q, *k, *v;            /* leaves */
    kn_tensor *bw_in[7];             /* the backward op's inputs, precomputed */
    kn_attrs attrs;
    kn_tensor *logits, *targets;     /* leaf, i64 */
    kn_tensor *ce_seed;              /* 0-d ones */
} grad_ctx;

static const kn_sdpa_opts CAUSAL = {.causal = true};

static void run_attention(void *p) {
    grad_ctx *c = p;
    kn_no_grad_push();
    bench_check(kn_scaled_dot_product_attention(c->q, c->k, c->v, NULL, CAUSAL), "attention");
    kn_no_grad_pop();
}

static void run_attention_backward_op(void *p) {
    grad_ctx *c = p;
    kn_tensor *dq, *dk, *dv;
    if (kn_sdpa_backward(c->bw_in, &c->attrs, 0, 0, &dq, &dk, &dv, NULL) != KN_OK) bench_check(NULL, "backward op");
}

static void run_attention_train(void *p) {
    grad_ctx *c = p;
    kn_zero_grad(c->q), kn_zero_grad(c->k), kn_zero_grad(c->v); /* time the gradient, not its accumulation */
    kn_tensor *out = bench_check(kn_scaled_dot_product_attention(c->q, c->k, c->v, NULL, CAUSAL), "attention");
    if (kn_backward_ex(out, kn_ones_like(out), false) != KN_OK) bench_check(NULL, "attention backward");
}

static void run_ce(void *p) {
    grad_ctx *c = p;
    kn_no_grad_push();
    bench_check(kn_cross_entropy(c->logits, c->targets, KN_CE_OPTS_DEFAULT), "cross_entropy");
    kn_no_grad_pop();
}

static void run_ce_train(void *p) {
    grad_ctx *c = p;
    kn_zero_grad(c->logits);
    if (kn_backward(bench_check(kn_cross_entropy(c->logits, c->targets, KN_CE_OPTS_DEFAULT), "cross_entropy")) != KN_OK)
        bench_check(NULL, "cross_entropy backward");
}

static void run_ce_backward_op(void *p) {
    grad_ctx *c = p;
    kn_attrs a = {.i = {KN_REDUCTION_MEAN, -100}};
    bench_check(kn_cross_entropy_backward(c->logits, c->targets, NULL, c->ce_seed, &a, false), "cross_entropy_backward");
}

static void report_ms(const char *bench, const char *shape, bench_fn fn, grad_ctx *c, int reps) {
    bench_report("kiln", bench, shape, "ms", 1e3 * bench_time(fn, c, 2, reps), "", 0);
}

static void bench_attention(grad_ctx *c, int64_t T) {
    kn_scope_push();
    kn_shape s = KN_SHAPE(4, 12, T, 64);
    c->q = kn_requires_grad(bench_check(kn_randn(s, KN_F32), "randn"), true);
    c->k = kn_requires_grad(bench_check(kn_randn(s, KN_F32), "randn"), true);
    c->v = kn_requires_grad(bench_check(kn_randn(s, KN_F32), "randn"), true);
    /* The forward node's outputs for the backward op alone: out and the row log-sum-exp. */
    kn_tensor *out = bench_check(kn_scaled_dot_product_attention(c->q, c->k, c->v, NULL, CAUSAL), "attention");
    kn_tensor *sc = kn_mul_scalar(kn_matmul(kn_detach(c->q), kn_transpose(kn_detach(c->k), -1, -2)), 0.125);
    kn_tensor *lse = kn_logsumexp(kn_masked_fill(sc, kn_logical_not(kn_tril(kn_ones(KN_SHAPE(T, T), KN_BOOL), 0)),
                                                 -INFINITY), KN_DIMS(-1), false);
    kn_tensor *in[7] = {c->q, c->k, c->v, kn_detach(out), kn_ones_like(out), bench_check(lse, "lse"), NULL};
    for (int i = 0; i < 7; i++) c->bw_in[i] = in[i];
    c->attrs = (kn_attrs){.i = {1}, .f = {0.125}};
    char shape[48];
    snprintf(shape, sizeof shape, "B4 H12 T%lld D64 causal", (long long)T);
    int reps = T > 256 ? 5 : 21;
    report_ms("attention", shape, run_attention, c, reps);
    report_ms("attention_backward_op", shape, run_attention_backward_op, c, reps);
    report_ms("attention_fwd_bwd", shape, run_attention_train, c, reps);
    kn_scope_pop();
}

int main(void) {
    bench_header("bench_grad");
    kn_manual_seed(11);
    grad_ctx c = {0};
    kn_scope_push();
    bench_attention(&c, 64);
    bench_attention(&c, 1024);
    c.logits = kn_requires_grad(bench_check(kn_randn(KN_SHAPE(256, 50257), KN_F32), "randn"), true);
    c.targets = bench_check(kn_randint(0, 50257, KN_SHAPE(256), KN_I64), "randint");
    report_ms("cross_entropy", "256x50257", run_ce, &c, 9);
    c.ce_seed = kn_ones(KN_SHAPE0, KN_F32);
    report_ms("cross_entropy_backward_op", "256x50257", run_ce_backward_op, &c, 9);
    report_ms("cross_entropy_fwd_bwd", "256x50257", run_ce_train, &c, 9);
    kn_scope_pop();
    bench_print_json();
    return 0;
}
