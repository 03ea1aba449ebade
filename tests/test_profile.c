/* The kernel profile: what ran is counted per op while profiling and not outside it, in every
 * mode; the report names the ops. */
#include <string.h>

#include "harness.h"

static const kn_profile_row *row_of(const kn_profile_row *rows, int n, const char *op) {
    for (int i = 0; i < n; i++)
        if (strcmp(rows[i].op, op) == 0) return &rows[i];
    return NULL;
}

static void test_counts_what_ran_while_profiling(void) {
    kn_mode modes[] = {KN_MODE_STRICT, KN_MODE_DEBUG, KN_MODE_FUSED};
    for (int m = 0; m < 3; m++) {
        kn_scope_push();
        kn_set_mode(modes[m]);
        kn_tensor *a = rand_tensor(KN_SHAPE(32, 64), KN_F32, -1, 1), *b = rand_tensor(KN_SHAPE(64, 64), KN_F32, -1, 1);
        kn_sync();
        kn_profile_start();
        kn_tensor *c = kn_matmul(a, b);
        for (int i = 0; i < 2; i++) c = kn_matmul(kn_softmax(c, -1), kn_transpose(b, 0, 1));
        kn_profile_stop();
        (void)kn_matmul(a, b); /* after the stop: not counted */
        kn_sync();
        kn_profile_row rows[64];
        int n = kn_profile_rows(rows, 64);
        const kn_profile_row *mm = row_of(rows, n < 64 ? n : 64, "matmul"), *sm = row_of(rows, n < 64 ? n : 64, "softmax");
        CHECK_MSG(mm && mm->calls == 3 && mm->total_ms > 0, "%s mode: matmul row %lld calls",
                  kn_mode_name(modes[m]), mm ? (long long)mm->calls : -1LL);
        CHECK_MSG(sm && sm->calls == 2, "%s mode: softmax row %lld calls", kn_mode_name(modes[m]),
                  sm ? (long long)sm->calls : -1LL);
        for (int i = 1; i < n && i < 64; i++) CHECK(rows[i - 1].total_ms >= rows[i].total_ms);
        char text[4096];
        size_t want = kn_profile_report(text, sizeof text);
        CHECK(want < sizeof text && strstr(text, "matmul") && strstr(text, "softmax") && strstr(text, "kernels "));
        CHECK(kn_profile_report(text, 8) == want && strlen(text) == 7); /* truncated, still terminated */
        kn_set_mode(KN_MODE_STRICT);
        kn_scope_pop();
    }
}

int main(void) {
    RUN(test_counts_what_ran_while_profiling);
    return test_summary();
}
