/* `kiln demo`: a short tour of the runtime — the same computation in strict and debug mode,
 * an error reported as a value, debug mode naming the op that made a NaN, and a meta-device
 * trace of a model too large to hold. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "commands.h"
#include "kiln/kiln.h"

static int fail(const char *what) {
    fprintf(stderr, "kiln demo: %s: %s\n", what, kn_last_error());
    return 1;
}

/* softmax(x @ w) row sums, in the current mode. */
static kn_tensor *small_model(kn_tensor *x, kn_tensor *w) {
    kn_scope_push();
    kn_tensor *logits = kn_matmul(x, w);
    kn_tensor *e = kn_exp(kn_sub(logits, kn_mean(logits, KN_DIMS(-1), true)));
    kn_tensor *p = kn_div(e, kn_sum(e, KN_DIMS(-1), true));
    return kn_scope_pop_keep(p);
}

int kiln_cmd_demo(int argc, char **argv) {
    if (argc > 1) {
        bool help = kiln_wants_help(argc, argv);
        if (!help) fprintf(stderr, "kiln demo: unknown option '%s'\n", argv[1]);
        fprintf(help ? stdout : stderr,
                "usage: kiln demo\n"
                "  a short tour of the runtime: the same ops in strict and debug mode, an error reported as a value,\n"
                "  debug mode naming the op that made a NaN, and a meta-device trace of a model too large to hold.\n"
                "  It takes no options; KILN_THREADS sets its threads.\n");
        return help ? 0 : 2;
    }
    printf("kiln %s demo  (threads: %d)\n\n", kn_version(), kn_get_num_threads());
    kn_manual_seed(42);
    kn_scope_push();
    kn_tensor *x = kn_randn(KN_SHAPE(4, 8), KN_F32);
    kn_tensor *w = kn_randn(KN_SHAPE(8, 3), KN_F32);

    printf("1. The same ops in strict (asynchronous) and debug (synchronous, checked) mode:\n");
    kn_tensor *strict = small_model(x, w);
    kn_set_mode(KN_MODE_DEBUG);
    kn_tensor *debug = small_model(x, w);
    kn_set_mode(KN_MODE_STRICT);
    if (!strict || !debug) return fail("model");
    kn_print(strict);
    kn_tensor *same = kn_eq(strict, debug);
    double all_same = 0;
    kn_item(kn_sum(same, KN_ALL_DIMS, false), &all_same);
    printf("   strict and debug agree on %.0f of %lld values\n\n", all_same, (long long)kn_numel(strict));

    printf("2. Bad input is an error value naming the op, shapes and dtypes:\n");
    kn_tensor *bad = kn_matmul(x, x);
    printf("   kn_matmul(x, x) -> %s\n   %s\n\n", bad ? "a tensor?" : "NULL", kn_last_error());
    kn_clear_error();

    printf("3. Debug mode names the first op that turns finite numbers into NaN/Inf:\n");
    kn_set_mode(KN_MODE_DEBUG);
    kn_tensor *neg = kn_full(KN_SHAPE(3), -1.0, KN_F32);
    kn_tensor *r = kn_sqrt(neg);
    printf("   kn_sqrt(-1) -> %s\n   %s\n\n", r ? "a tensor?" : "NULL", kn_last_error());
    kn_clear_error();
    kn_set_mode(KN_MODE_STRICT);

    printf("4. The meta device traces a GPT-2-XL-sized stack of matmuls with no memory:\n");
    kn_set_default_device(KN_META);
    kn_meta_trace_reset();
    kn_tensor *h = kn_empty(KN_SHAPE(8, 1024, 1600), KN_F32);
    for (int layer = 0; layer < 48; layer++) {
        kn_scope_push();
        kn_tensor *up = kn_gelu_tanh(kn_matmul(h, kn_empty(KN_SHAPE(1600, 6400), KN_F32)));
        kn_tensor *down = kn_matmul(up, kn_empty(KN_SHAPE(6400, 1600), KN_F32));
        h = kn_scope_pop_keep(kn_add(h, down));
    }
    kn_set_default_device(KN_CPU);
    kn_meta_trace trace;
    kn_meta_trace_get(&trace);
    if (!h) return fail("meta trace");
    printf("   %lld ops, %.1f TFLOP, peak %.1f GiB of tensors; nothing allocated\n", (long long)trace.ops,
           trace.flops / 1e12, (double)trace.peak_bytes / (1 << 30));

    kn_memory_stats ms;
    kn_memory_stats_get(KN_CPU, &ms);
    printf("\ncpu allocator: %lld allocations, %lld from the cache, peak %.1f KiB\n", (long long)ms.alloc_count,
           (long long)ms.cache_hits, (double)ms.peak_allocated_bytes / 1024);
    kn_scope_pop();
    return kn_sync() == KN_OK ? 0 : fail("sync");
}
