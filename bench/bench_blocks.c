/* Model building blocks: softmax, layer_norm, causal attention and conv2d on the shapes of
 * GPT-2 and ResNet, timed in ms (the same shapes as bench/torch_compare.py). */
#include "bench_common.h"

typedef struct blocks_ctx {
    kn_tensor *logits;                 /* softmax [256, 50257] */
    kn_tensor *ln_x, *ln_w, *ln_b;     /* layer_norm [1024, 768] */
    kn_tensor *q, *k, *v;              /* attention [4, 12, T, 64] */
    kn_tensor *img, *filt, *filt_bias; /* conv2d [32, 64, 32, 32] x [64, 64, 3, 3] */
} blocks_ctx;

static void run_softmax(void *p) {
    blocks_ctx *c = p;
    bench_check(kn_softmax(c->logits, -1), "softmax");
}

static void run_layer_norm(void *p) {
    blocks_ctx *c = p;
    bench_check(kn_layer_norm(c->ln_x, KN_SHAPE(768), c->ln_w, c->ln_b, 1e-5), "layer_norm");
}

static void run_attention(void *p) {
    blocks_ctx *c = p;
    bench_check(kn_scaled_dot_product_attention(c->q, c->k, c->v, NULL, (kn_sdpa_opts){.causal = true}),
                "scaled_dot_product_attention");
}

static void run_conv2d(void *p) {
    blocks_ctx *c = p;
    bench_check(kn_conv2d(c->img, c->filt, c->filt_bias, (kn_conv_opts){.padding = {1, 1}}), "conv2d");
}

static void report_ms(const char *bench, const char *shape, bench_fn fn, blocks_ctx *c, int reps) {
    bench_report("kiln", bench, shape, "ms", 1e3 * bench_time(fn, c, 2, reps), "", 0);
}

static void bench_attention(blocks_ctx *c, int64_t T) {
    kn_scope_push();
    c->q = bench_check(kn_randn(KN_SHAPE(4, 12, T, 64), KN_F32), "randn");
    c->k = bench_check(kn_randn(KN_SHAPE(4, 12, T, 64), KN_F32), "randn");
    c->v = bench_check(kn_randn(KN_SHAPE(4, 12, T, 64), KN_F32), "randn");
    char shape[48];
    snprintf(shape, sizeof shape, "B4 H12 T%lld D64 causal", (long long)T);
    report_ms("attention", shape, run_attention, c, T > 256 ? 5 : 21);
    kn_scope_pop();
}

int main(void) {
    bench_header("bench_blocks");
    kn_manual_seed(11);
    blocks_ctx c = {0};
    kn_scope_push();
    c.logits = bench_check(kn_randn(KN_SHAPE(256, 50257), KN_F32), "randn");
    report_ms("softmax", "256x50257", run_softmax, &c, 9);

    c.ln_x = bench_check(kn_randn(KN_SHAPE(1024, 768), KN_F32), "randn");
    c.ln_w = bench_check(kn_randn(KN_SHAPE(768), KN_F32), "randn");
    c.ln_b = bench_check(kn_randn(KN_SHAPE(768), KN_F32), "randn");
    report_ms("layer_norm", "1024x768", run_layer_norm, &c, 21);

    bench_attention(&c, 64);
    bench_attention(&c, 1024);

    c.img = bench_check(kn_randn(KN_SHAPE(32, 64, 32, 32), KN_F32), "randn");
    c.filt = bench_check(kn_randn(KN_SHAPE(64, 64, 3, 3), KN_F32), "randn");
    c.filt_bias = bench_check(kn_randn(KN_SHAPE(64), KN_F32), "randn");
    report_ms("conv2d", "32x64x32x32 k64x3x3 pad1", run_conv2d, &c, 9);
    kn_scope_pop();
    bench_print_json();
    return 0;
}
