/* Constant folding in compiled mode (graph/const_fold.h): elementwise ops on fills made in the
 * program become fills of their value, with strict mode's bits in every dtype; fills written in
 * place, random draws and values from before the program are not constants. */
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static int64_t folded_now(void) {
    kn_sync();
    kn_stats s;
    kn_stats_get(&s);
    return s.ops_folded;
}

/* x * (sqrt(full(16)) * 0.25 + full(1)) / full(d): sqrt, mul_scalar, add and the division's
 * divisor chain fold; only the products with x run. */
static kn_tensor *scaled(kn_tensor *x, kn_dtype dt) {
    kn_tensor *c = kn_add(kn_mul_scalar(kn_sqrt(kn_full(KN_SHAPE0, 16, dt)), 0.25), kn_full(KN_SHAPE0, 1, dt));
    return kn_div(kn_mul(x, c), kn_sqrt(kn_full(KN_SHAPE(1), 3, dt)));
}

/* The same block in strict and compiled mode: the results' bits, and the ops folded. */
static int64_t compare_with_strict(const char *what, kn_tensor *(*block)(kn_tensor *, kn_dtype), kn_tensor *x, kn_dtype dt) {
    kn_tensor *r[2];
    int64_t folded = 0;
    for (int m = 0; m < 2; m++) {
        CHECK(kn_set_mode(m ? KN_MODE_COMPILED : KN_MODE_STRICT) == KN_OK);
        int64_t before = folded_now();
        kn_manual_seed(3); /* the same draws in both modes */
        kn_scope_push();
        r[m] = kn_scope_pop_keep(block(x, dt));
        folded = folded_now() - before;
    }
    CHECK(kn_set_mode(KN_MODE_STRICT) == KN_OK);
    double *want = read_f64(r[0]), *got = read_f64(r[1]);
    CHECK_MSG(want && got, "%s: %s", what, kn_last_error());
    int64_t n = kn_numel(r[0]);
    for (int64_t i = 0; want && got && i < n; i++)
        if (memcmp(&want[i], &got[i], sizeof want[i]) != 0) {
            test_fail(__FILE__, __LINE__, "%s (%s): element %lld: compiled %.17g, strict %.17g", what,
                      kn_dtype_name(dt), (long long)i, got[i], want[i]);
            break;
        }
    free(want);
    free(got);
    kn_release(r[0]);
    kn_release(r[1]);
    return folded;
}

static void test_scalar_chains_fold_to_strict_bits(void) {
    const kn_dtype dts[] = {KN_F32, KN_F64, KN_F16, KN_BF16};
    for (int d = 0; d < 4; d++) {
        kn_tensor *x = rand_tensor(KN_SHAPE(5, 7), dts[d], -3, 3);
        int64_t folded = compare_with_strict("scaled", scaled, x, dts[d]);
        CHECK_MSG(folded == 4, "%s: %lld ops folded, want 4 (sqrt, mul_scalar, add; sqrt)", kn_dtype_name(dts[d]),
                  (long long)folded);
        kn_release(x);
    }
    /* what is left: the two folded fills (the fills they read are dead) and one fused kernel */
    kn_tensor *x = rand_tensor(KN_SHAPE(5, 7), KN_F32, -3, 3);
    CHECK(kn_set_mode(KN_MODE_COMPILED) == KN_OK);
    kn_stats s0, s1;
    kn_sync();
    kn_stats_get(&s0);
    kn_scope_push();
    kn_tensor *y = kn_scope_pop_keep(scaled(x, KN_F32));
    kn_sync();
    kn_stats_get(&s1);
    CHECK(kn_set_mode(KN_MODE_STRICT) == KN_OK);
    CHECK_MSG(y && s1.kernels_launched - s0.kernels_launched == 3, "%lld kernels, want 3 (two fills, one fused)",
              (long long)(s1.kernels_launched - s0.kernels_launched));
    CHECK_MSG(s1.ops_eliminated - s0.ops_eliminated == 5, "%lld ops eliminated, want the 5 dead fills",
              (long long)(s1.ops_eliminated - s0.ops_eliminated));
}

/* Integers, casts and comparisons fold too: (full(7) // full(2)) + full(1) as i32, cast to f32,
 * and a mask from a comparison of two fills, cast to the where's dtype. */
static kn_tensor *integer_chain(kn_tensor *x, kn_dtype dt) {
    (void)dt;
    kn_tensor *q = kn_add(kn_floor_divide(kn_full(KN_SHAPE0, 7, KN_I32), kn_full(KN_SHAPE0, 2, KN_I32)),
                          kn_full(KN_SHAPE0, 1, KN_I32));
    kn_tensor *mask = kn_gt(kn_full(KN_SHAPE(7), 2, KN_F32), kn_full(KN_SHAPE0, 1, KN_F32));
    return kn_where(mask, kn_mul(x, kn_cast(q, KN_F32)), x);
}

static void test_integers_and_masks_fold(void) {
    kn_tensor *x = rand_tensor(KN_SHAPE(3, 7), KN_F32, -3, 3);
    int64_t folded = compare_with_strict("integer chain", integer_chain, x, KN_F32);
    CHECK_MSG(folded == 5, "%lld ops folded, want 5 (floor_divide, add, gt, two casts)", (long long)folded);
    kn_release(x);
}

/* Not constants: a fill written in place before its use, a random draw, a fill made by an
 * earlier program. */
static kn_tensor *not_constants(kn_tensor *x, kn_dtype dt) {
    kn_tensor *a = kn_full(KN_SHAPE(7), 2, dt);
    kn_copy_(kn_narrow(a, 0, 0, 3), kn_narrow(x, 0, 0, 3)); /* a is no longer one value */
    kn_tensor *r = kn_sqrt(kn_abs(kn_rand(KN_SHAPE(7), dt)));
    return kn_add(kn_add(kn_exp(a), r), kn_neg(x));
}

static void test_what_is_not_a_constant_is_not_folded(void) {
    kn_tensor *x = rand_tensor(KN_SHAPE(7), KN_F32, -1, 1);
    CHECK(compare_with_strict("not constants", not_constants, x, KN_F32) == 0);
    /* a fill from before the program is an outside value */
    CHECK(kn_set_mode(KN_MODE_COMPILED) == KN_OK);
    kn_tensor *earlier = kn_full(KN_SHAPE0, 4, KN_F32);
    kn_sync();
    int64_t before = folded_now();
    kn_tensor *y = kn_mul(x, kn_sqrt(earlier));
    double *got = read_f64(y);
    CHECK(folded_now() == before);
    CHECK(kn_set_mode(KN_MODE_STRICT) == KN_OK);
    double *want = read_f64(x);
    for (int i = 0; got && want && i < 7; i++) CHECK_MSG(got[i] == (double)(float)(want[i] * 2), "element %d", i);
    free(got);
    free(want);
}

int main(void) {
    RUN(test_scalar_chains_fold_to_strict_bits);
    RUN(test_integers_and_masks_fold);
    RUN(test_what_is_not_a_constant_is_not_folded);
    return test_summary();
}
