/* Backward through window views (narrow, slice, select) of a computed tensor: each view's
 * gradient is added into the buffer backward holds for that tensor, in place, instead of a
 * zero-filled buffer of the whole tensor per view (GPT-2's q, k, v narrows of one projection).
 * Values against float64 references written here; the zero-filled buffers counted with the
 * kernel profile. */
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "kiln/profile.h"

#define R 4
#define C 9

/* sum(t * w) for a constant w of t's shape: t's gradient is w. */
static kn_tensor *dot(kn_tensor *t, const double *w, kn_dtype dt) {
    return kn_sum(kn_mul(t, tensor_from(w, kn_shape_of(t), dt)), KN_ALL_DIMS, false);
}

/* Adds w ([R, width]) into grad ([R, C]) at columns from start. */
static void add_window(double *grad, const double *w, int start, int width) {
    for (int r = 0; r < R; r++)
        for (int c = 0; c < width; c++) grad[r * C + start + c] += w[r * width + c];
}

static double *random_values(int n) {
    double *v = malloc(sizeof *v * (size_t)n);
    for (int i = 0; i < n; i++) v[i] = (double)(rand() % 17 - 8) / 8;
    return v;
}

/* x [R, C]; h = 2x; loss = sum(h * u) (when whole) + the narrows' sums of products. The narrows
 * cover columns 0-2, 3-7 and 6-8 (the last two overlap). */
static void check_narrows(kn_dtype dt, bool whole, bool leaf) {
    kn_scope_push();
    static const int start[3] = {0, 3, 6}, width[3] = {3, 5, 3};
    kn_tensor *x = kn_requires_grad(rand_tensor(KN_SHAPE(R, C), dt, -1, 1), true);
    kn_tensor *h = leaf ? x : kn_mul_scalar(x, 2);
    double *u = random_values(R * C), *w[3], want[R * C] = {0};
    kn_tensor *loss = whole ? dot(h, u, dt) : NULL;
    if (whole) memcpy(want, u, sizeof want);
    for (int i = 0; i < 3; i++) {
        w[i] = random_values(R * width[i]);
        kn_tensor *term = dot(kn_narrow(h, 1, start[i], width[i]), w[i], dt);
        loss = loss ? kn_add(loss, term) : term;
        add_window(want, w[i], start[i], width[i]);
    }
    CHECK(kn_backward(loss) == KN_OK);
    for (int i = 0; i < R * C; i++) want[i] *= leaf ? 1 : 2;
    char what[96];
    snprintf(what, sizeof what, "%s grad of x (%s, %s)", kn_dtype_name(dt), whole ? "used whole too" : "narrows only",
             leaf ? "leaf" : "computed");
    CHECK_CLOSE(kn_grad(x), want, tol_for(dt), what);
    for (int i = 0; i < 3; i++) free(w[i]);
    free(u);
    kn_scope_pop();
}

static void test_gradients_of_narrows_add_up(void) {
    for (int k = 0; k < 4; k++)
        for (int whole = 0; whole < 2; whole++)
            for (int leaf = 0; leaf < 2; leaf++) check_narrows(FLOAT_DTYPES[k], whole, leaf);
}

/* fill kernels run by backward of three narrows of a computed tensor: the loss's seed and one
 * zero-filled buffer for the first narrow; the other two add into it. */
static void test_narrows_share_one_zero_filled_buffer(void) {
    kn_scope_push();
    kn_tensor *x = kn_requires_grad(rand_tensor(KN_SHAPE(64, 96), KN_F32, -1, 1), true);
    kn_tensor *h = kn_mul_scalar(x, 2);
    kn_tensor *loss = NULL;
    for (int i = 0; i < 3; i++) {
        kn_tensor *part = kn_sum(kn_narrow(h, 1, 32 * i, 32), KN_ALL_DIMS, false);
        loss = loss ? kn_add(loss, part) : part;
    }
    kn_sync();
    kn_profile_start();
    CHECK(kn_backward(loss) == KN_OK);
    kn_profile_stop();
    kn_profile_row rows[64];
    int n = kn_profile_rows(rows, 64);
    int64_t fills = 0;
    for (int i = 0; i < n && i < 64; i++)
        if (strcmp(rows[i].op, "fill") == 0) fills = rows[i].calls;
    CHECK_MSG(fills == 2, "backward ran %lld fill kernels; want 2 (the seed and one buffer)", (long long)fills);
    double *g = read_f64(kn_grad(x));
    bool all_two = g != NULL;
    for (int i = 0; all_two && i < 64 * 96; i++) all_two = g[i] == 2;
    CHECK_MSG(all_two, "x's gradient is not 2 everywhere");
    free(g);
    kn_scope_pop();
}

int main(void) {
    RUN(test_gradients_of_narrows_add_up);
    RUN(test_narrows_share_one_zero_filled_buffer);
    return test_summary();
}
