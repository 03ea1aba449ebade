#define _GNU_SOURCE
/* Fused mode: chains of elementwise ops become generated kernels with the same results as
 * strict mode, kernel counts are what the schedule promises, and sizes do not recompile. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static kn_stats stats_now(void) {
    kn_sync();
    kn_stats s;
    kn_stats_get(&s);
    return s;
}

/* Runs f in strict and in fused mode on the same inputs; the results must be bit-identical. */
typedef kn_tensor *(*block_fn)(kn_tensor *const *in);

static void check_same_in_modes(const char *what, block_fn f, kn_tensor *const *in) {
    kn_set_mode(KN_MODE_STRICT);
    kn_tensor *want = f(in);
    double *w = read_f64(want);
    kn_set_mode(KN_MODE_FUSED);
    kn_tensor *got = f(in);
    double *g = read_f64(got);
    kn_set_mode(KN_MODE_STRICT);
    CHECK_MSG(w && g, "%s: no result (%s)", what, kn_last_error());
    if (w && g) {
        int64_t n = kn_numel(want);
        for (int64_t i = 0; i < n; i++)
            if (memcmp(&w[i], &g[i], sizeof w[i]) != 0 && !(w[i] != w[i] && g[i] != g[i])) {
                test_fail(__FILE__, __LINE__, "%s: element %lld: fused %.17g, strict %.17g", what, (long long)i, g[i], w[i]);
                break;
            }
    }
    free(w);
    free(g);
    kn_release(want);
    kn_release(got);
}

/* Runs f(in) in strict mode, then in fused mode, each in a scope of its own so that the
 * block's values die before the read: r gets the two results, *kernels and *fused what the
 * fused run launched. */
static void run_in_both_modes(block_fn f, kn_tensor *const *in, kn_tensor **r, int64_t *kernels, int64_t *fused) {
    for (int m = 0; m < 2; m++) {
        kn_set_mode(m ? KN_MODE_FUSED : KN_MODE_STRICT);
        kn_stats before = stats_now();
        kn_scope_push();
        r[m] = kn_keep(f(in));
        kn_scope_pop();
        kn_stats after = stats_now();
        *kernels = after.kernels_launched - before.kernels_launched;
        *fused = after.fused_kernels - before.fused_kernels;
    }
    kn_set_mode(KN_MODE_STRICT);
}

/* The fused result r[1] against strict's r[0] at tol; releases both. */
static void check_close_and_release(kn_tensor **r, tolerance tol, const char *what) {
    double *want = read_f64(r[0]);
    if (want) CHECK_CLOSE(r[1], want, tol, what);
    free(want);
    kn_release(r[0]);
    kn_release(r[1]);
}

static kn_tensor *bias_gelu(kn_tensor *const *in) { return kn_gelu(kn_add(in[0], in[1])); }

static kn_tensor *long_chain(kn_tensor *const *in) {
    kn_tensor *x = in[0], *y = in[1];
    kn_tensor *t = kn_mul(kn_sub(kn_exp(kn_neg(kn_abs(x))), y), kn_sigmoid(x));
    return kn_where(kn_gt(x, y), kn_tanh(t), kn_clamp(t, -0.25, 0.5));
}

static void test_chains_match_strict(void) {
    const kn_dtype dts[] = {KN_F32, KN_F64, KN_F16, KN_BF16};
    for (int d = 0; d < 4; d++) {
        kn_scope_push();
        kn_tensor *x = rand_tensor(KN_SHAPE(37, 65), dts[d], -3, 3);
        kn_tensor *b = rand_tensor(KN_SHAPE(65), dts[d], -1, 1);
        kn_tensor *y = rand_tensor(KN_SHAPE(37, 65), dts[d], -3, 3);
        check_same_in_modes("bias + gelu", bias_gelu, (kn_tensor *[]){x, b});
        check_same_in_modes("long chain", long_chain, (kn_tensor *[]){x, y});
        kn_tensor *xt = kn_transpose(x, 0, 1); /* a strided input */
        kn_tensor *yt = kn_transpose(y, 0, 1);
        check_same_in_modes("long chain, strided", long_chain, (kn_tensor *[]){xt, yt});
        kn_stats s = stats_now();
        CHECK_MSG(s.fused_kernels >= 3 * (d + 1), "only %lld fused kernels ran", (long long)s.fused_kernels);
        kn_scope_pop();
    }
}

static void test_gemm_epilogue_is_one_kernel(void) {
    kn_scope_push();
    kn_tensor *x = rand_tensor(KN_SHAPE(16, 32), KN_F32, -1, 1);
    kn_tensor *w = rand_tensor(KN_SHAPE(32, 48), KN_F32, -1, 1);
    kn_tensor *b = rand_tensor(KN_SHAPE(48), KN_F32, -1, 1);
    kn_set_mode(KN_MODE_FUSED);
    kn_stats before = stats_now();
    kn_tensor *y = kn_gelu(kn_add(kn_matmul(x, w), b));
    kn_stats after = stats_now();
    CHECK(y != NULL);
    CHECK_MSG(after.kernels_launched - before.kernels_launched == 2, "gelu(x @ w + b): %lld kernels, want 2 (GEMM + fused)",
              (long long)(after.kernels_launched - before.kernels_launched));
    CHECK(after.fused_kernels - before.fused_kernels == 1);
    CHECK(after.ops_fused - before.ops_fused == 2);
    kn_set_mode(KN_MODE_STRICT);
    kn_scope_pop();
}

/* Reductions of a chain over trailing dims run in the chain's kernel; the chain's values are
 * never written unless something else reads them. Sums reorder: compared at f32 tolerance. */
static int prologue_op;
static kn_shape prologue_dims;

static kn_tensor *reduced_chain(kn_tensor *const *in) {
    kn_tensor *t = kn_exp(kn_mul(kn_sub(in[0], in[1]), in[0]));
    kn_shape d = prologue_dims;
    switch (prologue_op) {
    case 0: return kn_sum(t, d, true);
    case 1: return kn_mean(t, d, false);
    case 2: return kn_amax(t, d, false);
    default: return kn_amin(t, d, true);
    }
}

static void test_reduction_prologues(void) {
    const kn_shape shapes[] = {KN_SHAPE(64, 48), KN_SHAPE(3, 70000)}; /* many rows; rows longer than a chunk */
    const kn_shape dims[] = {KN_DIMS(1), KN_ALL_DIMS};
    for (int si = 0; si < 2; si++)
        for (int di = 0; di < 2; di++)
            for (int op = 0; op < 4; op++) {
                kn_scope_push();
                kn_tensor *in[2] = {rand_tensor(shapes[si], KN_F32, -2, 2), rand_tensor(shapes[si], KN_F32, -2, 2)};
                kn_tensor *r[2];
                int64_t kernels, fused;
                prologue_op = op, prologue_dims = dims[di];
                run_in_both_modes(reduced_chain, in, r, &kernels, &fused);
                CHECK_MSG(kernels == 1 && fused == 1, "op %d shape %d dims %d: %lld kernels (%lld fused), want one fused",
                          op, si, di, (long long)kernels, (long long)fused);
                tolerance tol = tol_for(KN_F32);
                tol.rtol *= 10; /* sums of up to 210k terms in another order */
                check_close_and_release(r, tol, "fused reduction");
                kn_scope_pop();
            }
}

/* amax keeps a NaN wherever it is, as strict mode does. */
static void test_reduction_nan(void) {
    kn_scope_push();
    double v[6] = {1, 2, NAN, 4, 5, 6};
    kn_tensor *x = tensor_from(v, KN_SHAPE(2, 3), KN_F32);
    kn_set_mode(KN_MODE_FUSED);
    kn_tensor *m = kn_amax(kn_add_scalar(x, 1.0), KN_DIMS(1), false);
    double *got = read_f64(m);
    kn_set_mode(KN_MODE_STRICT);
    CHECK(got && isnan(got[0]) && got[1] == 7);
    free(got);
    kn_scope_pop();
}

/* A softmax, a LayerNorm and an RMSNorm's scale written by hand: one kernel each, a pass over
 * each row per reduction and one more for what follows, the row values (amax, sum; mean,
 * variance, and the row ops `var + eps` and `rsqrt` on them) read broadcast back. Short rows,
 * rows over several dims and rows longer than a chunk; f32 and f64. */
static kn_tensor *softmax_by_hand(kn_tensor *const *in) {
    kn_tensor *x = in[0];
    kn_tensor *e = kn_exp(kn_sub(x, kn_amax(x, KN_DIMS(-1), true)));
    return kn_div(e, kn_sum(e, KN_DIMS(-1), true));
}

static kn_tensor *layer_norm_by_hand(kn_tensor *const *in) {
    kn_tensor *x = in[0];
    kn_tensor *d = kn_sub(x, kn_mean(x, KN_DIMS(-1), true));
    kn_tensor *var = kn_mean(kn_mul(d, d), KN_DIMS(-1), true);
    kn_tensor *y = kn_mul(d, kn_rsqrt(kn_add_scalar(var, 1e-5)));
    return kn_add(kn_mul(y, in[1]), in[2]);
}

/* An RMSNorm's scale alone: the kernel ends with row ops, nothing after them. */
static kn_tensor *rms_scale(kn_tensor *const *in) {
    return kn_rsqrt(kn_add_scalar(kn_mean(kn_mul(in[0], in[0]), KN_DIMS(-1), true), 1e-6));
}

/* Both rows of a [.., 4, C] block: mean and max over the last two dims, combined. */
static kn_tensor *two_dim_rows(kn_tensor *const *in) {
    kn_tensor *x = in[0];
    kn_tensor *c = kn_sub(x, kn_mean(x, KN_DIMS(-2, -1), true));
    return kn_div(c, kn_add_scalar(kn_amax(kn_abs(c), KN_DIMS(-2, -1), true), 1.0));
}

static void test_reductions_by_hand_are_one_kernel(void) {
    const kn_shape shapes[] = {KN_SHAPE(6, 10, 33), KN_SHAPE(2, 40000)};
    const struct { const char *what; block_fn f; } blocks[] = {
        {"softmax by hand", softmax_by_hand}, {"layer norm by hand", layer_norm_by_hand}, {"two-dim rows", two_dim_rows},
        {"rms scale", rms_scale}};
    const kn_dtype dts[] = {KN_F32, KN_F64};
    for (int di = 0; di < 2; di++)
        for (int si = 0; si < 2; si++)
            for (int bi = 0; bi < 4; bi++) {
                kn_scope_push();
                int64_t c = shapes[si].v[shapes[si].n - 1];
                kn_tensor *in[3] = {rand_tensor(shapes[si], dts[di], -3, 3), rand_tensor(KN_SHAPE(c), dts[di], 0.5, 2),
                                    rand_tensor(KN_SHAPE(c), dts[di], -1, 1)};
                kn_tensor *r[2];
                int64_t kernels, fused;
                run_in_both_modes(blocks[bi].f, in, r, &kernels, &fused);
                CHECK_MSG(kernels == 1 && fused == 1, "%s, %s, shape %d: %lld kernels (%lld fused), want one fused",
                          blocks[bi].what, kn_dtype_name(dts[di]), si, (long long)kernels, (long long)fused);
                tolerance tol = tol_for(dts[di]);
                tol.rtol *= 10; /* sums of up to 40k terms in another order */
                check_close_and_release(r, tol, blocks[bi].what);
                kn_scope_pop();
            }
}

/* A row value someone still holds is kept; a row value read other than broadcast back, or a
 * reduction over other rows, ends the kernel, and the values stay strict mode's. */
static kn_tensor *held_row_value(kn_tensor *const *in) {
    kn_tensor *x = in[0];
    kn_tensor *m = kn_amax(x, KN_DIMS(-1), true);
    kn_tensor *y = kn_exp(kn_sub(x, m));
    kn_tensor *s = kn_sum(y, KN_DIMS(-1), true);
    kn_tensor *other_rows = kn_sum(y, KN_DIMS(-2, -1), true); /* not the same rows: a kernel of its own */
    return kn_add(kn_add(kn_div(y, s), m), other_rows);
}

static void test_row_values_held_or_read_otherwise(void) {
    kn_scope_push();
    kn_tensor *in[1] = {rand_tensor(KN_SHAPE(5, 7, 9), KN_F32, -2, 2)};
    kn_tensor *r[2];
    for (int m = 0; m < 2; m++) {
        kn_set_mode(m ? KN_MODE_FUSED : KN_MODE_STRICT);
        r[m] = kn_retain(held_row_value(in)); /* its values stay held: stored, not recomputed */
    }
    kn_set_mode(KN_MODE_STRICT);
    check_close_and_release(r, tol_for(KN_F32), "held row value");
    kn_scope_pop();
}

/* amax(x + y, -1, keepdim) * w: the epilogue brings an input of its own (w), after the
 * reduction had numbered the prologue's value; the reduction must still reduce x + y (it once
 * reduced w, the input that took that number), in one kernel, with strict mode's values. */
static kn_tensor *epilogue_with_new_input(kn_tensor *const *in) {
    return kn_mul(kn_amax(kn_add(in[0], in[1]), KN_DIMS(-1), true), in[2]);
}

static void test_epilogue_brings_an_input(void) {
    kn_scope_push();
    kn_tensor *in[3] = {rand_tensor(KN_SHAPE(8, 5), KN_F32, -1, 1), rand_tensor(KN_SHAPE(8, 5), KN_F32, -1, 1),
                        rand_tensor(KN_SHAPE(8, 5), KN_F32, -1, 1)};
    check_same_in_modes("amax(x + y) * w", epilogue_with_new_input, in);
    kn_set_mode(KN_MODE_FUSED);
    kn_stats before = stats_now();
    kn_tensor *y = epilogue_with_new_input(in);
    kn_stats after = stats_now();
    kn_set_mode(KN_MODE_STRICT);
    CHECK_MSG(y && after.kernels_launched - before.kernels_launched == 1, "%lld kernels, want 1",
              (long long)(after.kernels_launched - before.kernels_launched));
    kn_scope_pop();
}

/* A reduction right after a chain but of another tensor, and reductions of nothing. */
static void test_reduction_edges(void) {
    kn_scope_push();
    kn_tensor *x = rand_tensor(KN_SHAPE(4, 5), KN_F32, -1, 1), *other = rand_tensor(KN_SHAPE(7), KN_F32, -1, 1);
    kn_tensor *empty = kn_zeros(KN_SHAPE(0, 3), KN_F32);
    double *o = read_f64(other);
    double total = 0;
    for (int i = 0; o && i < 7; i++) total += o[i];
    kn_set_mode(KN_MODE_FUSED);
    kn_tensor *t = kn_exp(kn_neg(x));
    kn_tensor *s = kn_sum(other, KN_ALL_DIMS, false);
    kn_tensor *z = kn_sum(empty, KN_ALL_DIMS, false);
    double got_s = 0, got_z = -1;
    CHECK(kn_item(s, &got_s) == KN_OK && kn_item(z, &got_z) == KN_OK && t != NULL);
    kn_set_mode(KN_MODE_STRICT);
    CHECK_MSG(fabs(got_s - total) < 1e-5, "sum %g, want %g", got_s, total);
    CHECK_MSG(got_z == 0, "empty sum %g", got_z);
    free(o);
    kn_scope_pop();
}

/* Built-in normalizations are one kernel in every mode. */
static void test_layer_norm_is_one_kernel(void) {
    kn_scope_push();
    kn_tensor *x = rand_tensor(KN_SHAPE(16, 64), KN_F32, -1, 1);
    kn_tensor *w = rand_tensor(KN_SHAPE(64), KN_F32, -1, 1), *b = rand_tensor(KN_SHAPE(64), KN_F32, -1, 1);
    kn_set_mode(KN_MODE_FUSED);
    kn_stats before = stats_now();
    kn_tensor *y = kn_layer_norm(x, KN_DIMS(64), w, b, 1e-5);
    kn_stats after = stats_now();
    kn_set_mode(KN_MODE_STRICT);
    CHECK(y != NULL);
    CHECK(after.kernels_launched - before.kernels_launched == 1);
    kn_scope_pop();
}

/* A value the user still holds is stored; one only the chain used is not (same numbers). */
static void test_held_intermediates_are_stored(void) {
    kn_scope_push();
    kn_tensor *x = rand_tensor(KN_SHAPE(1000), KN_F32, -2, 2);
    kn_set_mode(KN_MODE_FUSED);
    kn_tensor *h = kn_mul_scalar(x, 3.0);
    kn_tensor *y = kn_tanh(kn_add_scalar(h, 1.0));
    double *hv = read_f64(h), *yv = read_f64(y), *xv = read_f64(x);
    kn_set_mode(KN_MODE_STRICT);
    for (int i = 0; i < 1000 && hv && yv && xv; i++) {
        float hw = (float)xv[i] * 3.0f;
        CHECK_MSG(hv[i] == hw, "h[%d] = %g, want %g", i, hv[i], (double)hw);
    }
    free(hv);
    free(yv);
    free(xv);
    kn_scope_pop();
}

/* Memory handed out by the CPU allocator since start-up, once queued work has finished. */
static int64_t bytes_handed_out(void) {
    kn_sync();
    kn_memory_stats m;
    kn_memory_stats_get(KN_CPU, &m);
    return m.allocated_total_bytes;
}

/* exp(x) * 2 + 1 with the two intermediates released before anything reads them: in fused
 * mode they never escape the generated kernel, so they take no memory at all, where strict
 * mode allocates all three results (the allocator's counters tell). */
static int64_t chain_bytes(kn_mode mode, kn_tensor *x, double *out0) {
    kn_set_mode(mode);
    int64_t before = bytes_handed_out();
    kn_tensor *a = kn_exp(x), *b = kn_mul_scalar(a, 2.0), *c = kn_add_scalar(b, 1.0);
    kn_release(a);
    kn_release(b);
    int64_t used = bytes_handed_out() - before;
    double *v = read_f64(c);
    *out0 = v ? v[0] : NAN;
    free(v);
    kn_release(c);
    kn_set_mode(KN_MODE_STRICT);
    return used;
}

static void test_unseen_intermediates_get_no_storage(void) {
    kn_scope_push();
    int64_t n = 1 << 20, bytes = n * 4; /* 4 MiB: a size class of its own */
    kn_tensor *x = rand_tensor(KN_SHAPE(n), KN_F32, -1, 1);
    double strict0, fused0, x0;
    int64_t strict = chain_bytes(KN_MODE_STRICT, x, &strict0), fused = chain_bytes(KN_MODE_FUSED, x, &fused0);
    double *xv = read_f64(x);
    x0 = xv ? xv[0] : NAN;
    free(xv);
    CHECK_MSG(strict == 3 * bytes, "strict mode allocated %lld bytes for the chain, want %lld", (long long)strict,
              (long long)(3 * bytes));
    CHECK_MSG(fused == bytes, "fused mode allocated %lld bytes for the chain, want %lld (its result only)",
              (long long)fused, (long long)bytes);
    CHECK_MSG(fused0 == strict0 && fabs(fused0 - (exp(x0) * 2 + 1)) < 1e-5 * fabs(fused0), "c[0] = %g fused, %g strict",
              fused0, strict0);
    kn_scope_pop();
}

/* matmul(x, w) + matmul(x, w) with both products released before the sum is read: the
 * window sees the second product recompute the first, which no one else can see, so it never
 * runs and never takes memory, and the sum is strict mode's. */
static void test_common_subexpressions_run_once(void) {
    kn_scope_push();
    kn_tensor *x = rand_tensor(KN_SHAPE(64, 32), KN_F32, -1, 1), *w = rand_tensor(KN_SHAPE(32, 48), KN_F32, -1, 1);
    double *want = NULL, *got = NULL;
    int64_t bytes[2], merged[2];
    for (int m = 0; m < 2; m++) {
        kn_set_mode(m ? KN_MODE_FUSED : KN_MODE_STRICT);
        kn_stats before = stats_now();
        int64_t held = bytes_handed_out();
        kn_tensor *p = kn_matmul(x, w), *q = kn_matmul(x, w);
        kn_tensor *y = kn_add(p, q);
        kn_release(p);
        kn_release(q);
        bytes[m] = bytes_handed_out() - held;
        merged[m] = stats_now().ops_merged - before.ops_merged;
        *(m ? &got : &want) = read_f64(y);
        kn_release(y);
    }
    kn_set_mode(KN_MODE_STRICT);
    int64_t one = 64 * 48 * 4;
    CHECK_MSG(merged[0] == 0 && merged[1] == 1, "ops merged: %lld strict, %lld fused", (long long)merged[0],
              (long long)merged[1]);
    CHECK_MSG(bytes[0] == 3 * one && bytes[1] == 2 * one, "bytes: %lld strict, %lld fused (one result: %lld)",
              (long long)bytes[0], (long long)bytes[1], (long long)one);
    CHECK(want && got && memcmp(want, got, 64 * 48 * sizeof *want) == 0);
    free(want);
    free(got);
    kn_scope_pop();
}

/* What must not be merged: a duplicate the caller still holds (it may be written in place,
 * and must not share memory with the first), and a duplicate whose input was written in place
 * between the two. */
static void test_visible_or_stale_duplicates_run(void) {
    kn_scope_push();
    kn_tensor *x = rand_tensor(KN_SHAPE(16), KN_F32, -1, 1), *ones = kn_full(KN_SHAPE(16), 1.0, KN_F32);
    kn_set_mode(KN_MODE_FUSED);
    kn_stats before = stats_now();
    kn_tensor *a = kn_exp(x), *b = kn_exp(x);
    CHECK(kn_copy_(b, ones) == KN_OK);
    double *va = read_f64(a), *vb = read_f64(b), *vx = read_f64(x);
    CHECK(va && vb && vx && fabs(va[3] - exp(vx[3])) < 1e-6 * exp(vx[3]) && vb[3] == 1.0);

    kn_tensor *c = kn_exp(x);
    CHECK(kn_copy_(x, ones) == KN_OK);
    kn_tensor *d = kn_exp(x), *y = kn_sub(d, c);
    kn_release(c);
    kn_release(d);
    double *vy = read_f64(y);
    CHECK(vy && fabs(vy[3] - (exp(1.0) - exp(vx[3]))) < 1e-5);
    CHECK_MSG(stats_now().ops_merged == before.ops_merged, "%lld ops merged",
              (long long)(stats_now().ops_merged - before.ops_merged));
    kn_set_mode(KN_MODE_STRICT);
    free(va);
    free(vb);
    free(vx);
    free(vy);
    kn_scope_pop();
}

/* A sequence length that grows by one each step compiles a bounded number of kernels. */
static void test_growing_sizes_do_not_recompile(void) {
    kn_scope_push();
    kn_tensor *b = rand_tensor(KN_SHAPE(24), KN_F32, -1, 1);
    kn_set_mode(KN_MODE_FUSED);
    kn_stats before = stats_now();
    for (int t = 1; t <= 40; t++) {
        kn_scope_push();
        kn_tensor *x = rand_tensor(KN_SHAPE(2, t, 24), KN_F32, -1, 1);
        kn_tensor *y = kn_mul(kn_gelu(kn_add(x, b)), x);
        kn_sync();
        CHECK(y != NULL);
        kn_scope_pop();
    }
    kn_stats after = stats_now();
    kn_set_mode(KN_MODE_STRICT);
    int64_t variants = (after.cache_misses + after.cache_disk_hits + after.cache_memory_hits) -
                       (before.cache_misses + before.cache_disk_hits + before.cache_memory_hits);
    CHECK_MSG(after.fused_kernels - before.fused_kernels == 40, "%lld fused kernels",
              (long long)(after.fused_kernels - before.fused_kernels));
    CHECK_MSG(after.recompiles - before.recompiles <= 1, "%lld recompiles for 40 lengths",
              (long long)(after.recompiles - before.recompiles));
    (void)variants;
    kn_scope_pop();
}

static void test_recompile_storm_is_reported(void) {
    kn_scope_push();
    setenv("KILN_RECOMPILE", "error", 1);
    kn_set_mode(KN_MODE_FUSED);
    kn_status st = KN_OK;
    /* a new rank each time (all dims reversed, so none coalesce): rank is part of the key */
    for (int r = 1; r <= 7 && st == KN_OK; r++) {
        kn_shape s = {.n = r}, reversed = {.n = r};
        for (int d = 0; d < r; d++) s.v[d] = 2 + d % 2, reversed.v[d] = r - 1 - d;
        kn_tensor *x = rand_tensor(s, KN_F32, -1, 1);
        kn_tensor *y = kn_exp(kn_neg(kn_permute(x, reversed)));
        (void)y;
        st = kn_sync();
    }
    CHECK_ERROR(st == KN_OK, KN_ERR_UNSUPPORTED, "recompile storm");
    unsetenv("KILN_RECOMPILE");
    kn_set_mode(KN_MODE_STRICT);
    kn_stats s = stats_now();
    CHECK(s.recompiles >= 4);
    kn_scope_pop();
}

int main(void) {
    char dir[] = "/tmp/kiln-test-fused-XXXXXX";
    if (!getenv("KILN_CACHE_DIR") && mkdtemp(dir)) setenv("KILN_CACHE_DIR", dir, 1);
    RUN(test_chains_match_strict);
    RUN(test_gemm_epilogue_is_one_kernel);
    RUN(test_reduction_prologues);
    RUN(test_reduction_nan);
    RUN(test_reduction_edges);
    RUN(test_reductions_by_hand_are_one_kernel);
    RUN(test_row_values_held_or_read_otherwise);
    RUN(test_epilogue_brings_an_input);
    RUN(test_layer_norm_is_one_kernel);
    RUN(test_held_intermediates_are_stored);
    RUN(test_unseen_intermediates_get_no_storage);
    RUN(test_common_subexpressions_run_once);
    RUN(test_visible_or_stale_duplicates_run);
    RUN(test_growing_sizes_do_not_recompile);
    RUN(test_recompile_storm_is_reported);
    return test_summary();
}
