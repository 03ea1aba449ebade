/* Views against copies: every view's values checked against indices computed here from the
 * base tensor's row-major values; storage sharing, writes through copy_, and elementwise ops
 * broadcasting over views. */
#include <stdlib.h>

#include "harness.h"

/* The values of x at the given row-major flat indices. */
static double *pick(kn_tensor *x, const int64_t *flat, int64_t n) {
    double *v = read_f64(x), *out = malloc(sizeof(double) * (size_t)(n ? n : 1));
    for (int64_t i = 0; i < n; i++) out[i] = v[flat[i]];
    free(v);
    return out;
}
#define CHECK_PICK(t, x, flat, n, what)                      \
    do {                                                     \
        double *w_ = pick((x), (flat), (n));                 \
        CHECK_CLOSE((t), w_, tol_for(kn_dtype_of(x)), what); \
        free(w_);                                            \
    } while (0)

static void test_view_and_reshape(void) {
    for (int k = 0; k < KN_DTYPE_COUNT; k++) {
        kn_tensor *x = rand_tensor(KN_SHAPE(2, 3, 4), ALL_DTYPES[k], -5, 5);
        int64_t id[24];
        for (int i = 0; i < 24; i++) id[i] = i;
        kn_tensor *v = kn_view(x, KN_SHAPE(4, -1));
        if (CHECK_SHAPE(v, KN_SHAPE(4, 6))) CHECK_PICK(v, x, id, 24, "view");
        CHECK(kn_shares_storage(v, x));
        kn_tensor *t = kn_transpose(x, 0, 2); /* [4, 3, 2] */
        CHECK_ERROR(kn_view(t, KN_SHAPE(24)) != NULL, KN_ERR_VIEW, "reshape");
        kn_tensor *r = kn_reshape(t, KN_SHAPE(-1));
        int64_t tr[24], idx[3];
        for (int f = 0; f < 24; f++) {
            unravel(f, KN_SHAPE(4, 3, 2), idx);
            tr[f] = (idx[2] * 3 + idx[1]) * 4 + idx[0];
        }
        if (CHECK_SHAPE(r, KN_SHAPE(24))) CHECK_PICK(r, x, tr, 24, "reshape of transpose");
        CHECK(!kn_shares_storage(r, x));
        CHECK_PICK(t, x, tr, 24, "transpose");
        kn_tensor *p = kn_permute(x, KN_DIMS(2, 0, 1)); /* [4, 2, 3] */
        int64_t pf[24];
        for (int f = 0; f < 24; f++) {
            unravel(f, KN_SHAPE(4, 2, 3), idx);
            pf[f] = (idx[1] * 3 + idx[2]) * 4 + idx[0];
        }
        if (CHECK_SHAPE(p, KN_SHAPE(4, 2, 3))) CHECK_PICK(p, x, pf, 24, "permute");
        kn_tensor *fl = kn_flatten(t, 1, 2);
        if (CHECK_SHAPE(fl, KN_SHAPE(4, 6))) CHECK_PICK(fl, x, tr, 24, "flatten");
    }
    kn_tensor *x = kn_zeros(KN_SHAPE(2, 3), KN_F32);
    CHECK_ERROR(kn_view(x, KN_SHAPE(-1, -1)) != NULL, KN_ERR_SHAPE, "only one");
    CHECK_ERROR(kn_view(x, KN_SHAPE(4, -1)) != NULL, KN_ERR_SHAPE, "infer");
    CHECK_ERROR(kn_reshape(x, KN_SHAPE(7)) != NULL, KN_ERR_SHAPE, "6 elements");
    CHECK_ERROR(kn_permute(x, KN_DIMS(0, 0)) != NULL, KN_ERR_ARG, "twice");
    CHECK_SHAPE(kn_view(kn_zeros(KN_SHAPE(0, 3), KN_F32), KN_SHAPE(3, -1, 5)), KN_SHAPE(3, 0, 5));
}

static void test_slice_steps_and_clamps(void) {
    struct { int64_t start, end, step, n, idx[4]; } cases[] = {
        {1, 6, 2, 3, {1, 3, 5}},       {-1, -100, -2, 4, {6, 4, 2, 0}}, {10, 2, -3, 2, {6, 3}},
        {-100, 100, 3, 3, {0, 3, 6}},  {5, 1, 1, 0, {0}},               {-2, 100, 1, 2, {5, 6}},
    };
    for (int k = 0; k < KN_DTYPE_COUNT; k++) {
        kn_tensor *x = rand_tensor(KN_SHAPE(3, 7), ALL_DTYPES[k], -5, 5);
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
            kn_tensor *s = kn_slice(x, 1, cases[c].start, cases[c].end, cases[c].step);
            int64_t n = cases[c].n, flat[12];
            for (int r = 0; r < 3; r++)
                for (int64_t i = 0; i < n; i++) flat[r * n + i] = r * 7 + cases[c].idx[i];
            if (CHECK_SHAPE(s, KN_SHAPE(3, n))) CHECK_PICK(s, x, flat, 3 * n, "slice");
            CHECK(kn_shares_storage(s, x));
        }
        kn_tensor *sel = kn_select(x, 1, -2);
        int64_t sf[3] = {5, 12, 19};
        if (CHECK_SHAPE(sel, KN_SHAPE(3))) CHECK_PICK(sel, x, sf, 3, "select");
        kn_tensor *nar = kn_narrow(x, 0, 1, 2);
        int64_t nf[14];
        for (int i = 0; i < 14; i++) nf[i] = 7 + i;
        if (CHECK_SHAPE(nar, KN_SHAPE(2, 7))) CHECK_PICK(nar, x, nf, 14, "narrow");
    }
    kn_tensor *x = kn_zeros(KN_SHAPE(3, 7), KN_F32);
    CHECK_ERROR(kn_slice(x, 1, 0, 3, 0) != NULL, KN_ERR_ARG, "step");
    CHECK_ERROR(kn_slice(x, 2, 0, 3, 1) != NULL, KN_ERR_INDEX, "dim 2");
    CHECK_ERROR(kn_select(x, 0, 3) != NULL, KN_ERR_INDEX, "index 3");
    CHECK_ERROR(kn_narrow(x, 1, 5, 3) != NULL, KN_ERR_INDEX, "do not fit");
}

static void test_expand_squeeze_unfold(void) {
    kn_tensor *x = rand_tensor(KN_SHAPE(3, 1), KN_F64, -5, 5);
    kn_tensor *e = kn_expand(x, KN_SHAPE(2, 3, 4));
    int64_t ef[24], idx[3];
    for (int f = 0; f < 24; f++) unravel(f, KN_SHAPE(2, 3, 4), idx), ef[f] = idx[1];
    if (CHECK_SHAPE(e, KN_SHAPE(2, 3, 4))) CHECK_PICK(e, x, ef, 24, "expand");
    CHECK(kn_stride(e, 0) == 0 && kn_stride(e, 2) == 0 && kn_shares_storage(e, x));
    CHECK_SHAPE(kn_broadcast_to(x, KN_SHAPE(-1, 0)), KN_SHAPE(3, 0));
    CHECK_ERROR(kn_expand(x, KN_SHAPE(4, 4)) != NULL, KN_ERR_SHAPE, "cannot expand");
    CHECK_ERROR(kn_expand(x, KN_SHAPE(4)) != NULL, KN_ERR_SHAPE, "2 dims to 1");
    CHECK_SHAPE(kn_squeeze(x, 1), KN_SHAPE(3));
    CHECK_SHAPE(kn_squeeze(x, 0), KN_SHAPE(3, 1));
    CHECK_SHAPE(kn_squeeze_all(kn_zeros(KN_SHAPE(1, 2, 1), KN_F32)), KN_SHAPE(2));
    CHECK_SHAPE(kn_unsqueeze(x, -1), KN_SHAPE(3, 1, 1));
    CHECK_SHAPE(kn_unsqueeze(kn_scalar(1, KN_F32), 0), KN_SHAPE(1));
    CHECK_ERROR(kn_unsqueeze(x, 3) != NULL, KN_ERR_INDEX, "dim 3");
    kn_tensor *v = rand_tensor(KN_SHAPE(7), KN_I32, -50, 50);
    kn_tensor *u = kn_unfold(v, 0, 3, 2);
    int64_t uf[9] = {0, 1, 2, 2, 3, 4, 4, 5, 6};
    if (CHECK_SHAPE(u, KN_SHAPE(3, 3))) CHECK_PICK(u, v, uf, 9, "unfold");
    CHECK_ERROR(kn_unfold(v, 0, 8, 1) != NULL, KN_ERR_ARG, "does not fit");
    kn_tensor *a = kn_as_strided(v, KN_SHAPE(2, 3), KN_SHAPE(1, 2), 1);
    int64_t af[6] = {1, 3, 5, 2, 4, 6};
    if (CHECK_SHAPE(a, KN_SHAPE(2, 3))) CHECK_PICK(a, v, af, 6, "as_strided");
    CHECK_ERROR(kn_as_strided(v, KN_SHAPE(2, 3), KN_SHAPE(1, 3), 1) != NULL, KN_ERR_VIEW, "outside the storage");
    CHECK_ERROR(kn_as_strided(v, KN_SHAPE(2), KN_SHAPE(-1), 0) != NULL, KN_ERR_VIEW, "outside the storage");
}

static void test_contiguous_clone_and_copy_into_views(void) {
    kn_tensor *x = rand_tensor(KN_SHAPE(3, 4), KN_F32, -5, 5);
    CHECK(kn_shares_storage(kn_contiguous(x), x));
    CHECK(!kn_shares_storage(kn_clone(x), x));
    kn_tensor *t = kn_transpose(x, 0, 1), *tc = kn_contiguous(t);
    CHECK(kn_is_contiguous(tc) && !kn_shares_storage(tc, x));
    double *xv = read_f64(x);
    /* write a column through a view; see it through the base and a transposed view */
    kn_tensor *base = kn_zeros(KN_SHAPE(3, 4), KN_F32);
    kn_tensor *col = kn_select(base, 1, 2), *bt = kn_transpose(base, 0, 1);
    CHECK(kn_copy_(col, kn_select(x, 1, 0)) == KN_OK);
    double want[12] = {0};
    for (int r = 0; r < 3; r++) want[r * 4 + 2] = xv[r * 4];
    CHECK_CLOSE(base, want, tol_for(KN_F32), "base after copy_");
    double want_t[12];
    for (int c = 0; c < 4; c++)
        for (int r = 0; r < 3; r++) want_t[c * 3 + r] = want[r * 4 + c];
    CHECK_CLOSE(bt, want_t, tol_for(KN_F32), "transposed view after copy_");
    /* overlapping source: shift columns right by one within the same storage */
    kn_tensor *y = kn_clone(x);
    CHECK(kn_copy_(kn_slice(y, 1, 1, 4, 1), kn_slice(y, 1, 0, 3, 1)) == KN_OK);
    double want_y[12];
    for (int r = 0; r < 3; r++)
        for (int c = 0; c < 4; c++) want_y[r * 4 + c] = xv[r * 4 + (c ? c - 1 : 0)];
    CHECK_CLOSE(y, want_y, tol_for(KN_F32), "overlapping copy_");
    /* a reversed source, broadcast over rows, converted to f64 */
    kn_tensor *d = kn_zeros(KN_SHAPE(2, 4), KN_F64);
    CHECK(kn_copy_(d, kn_slice(kn_select(x, 0, 1), 0, -1, -100, -1)) == KN_OK);
    double want_d[8];
    for (int i = 0; i < 8; i++) want_d[i] = xv[4 + 3 - i % 4];
    CHECK_CLOSE(d, want_d, tol_for(KN_F32), "broadcast reversed copy_");
    CHECK_ERROR(kn_copy_(kn_expand(kn_zeros(KN_SHAPE(1), KN_F32), KN_SHAPE(3)), kn_ones(KN_SHAPE(3), KN_F32)) == KN_OK,
                KN_ERR_VIEW, "broadcast");
    CHECK_ERROR(kn_copy_(base, kn_ones(KN_SHAPE(5), KN_F32)) == KN_OK, KN_ERR_SHAPE, "expand");
    free(xv);
}

static void test_elementwise_broadcasts_over_views(void) {
    for (int k = 0; k < 4; k++) {
        kn_dtype dt = FLOAT_DTYPES[k];
        kn_tensor *m = rand_tensor(KN_SHAPE(3, 4), dt, -5, 5);
        kn_tensor *a = kn_slice(kn_select(m, 1, 1), 0, -1, -100, -1); /* [3], stride -4 */
        kn_tensor *col = kn_unsqueeze(a, 1);                          /* [3, 1] */
        kn_tensor *row = kn_select(kn_transpose(m, 0, 1), 1, 2);     /* [4], stride 1 of row 2 */
        kn_tensor *s = kn_add(col, row);
        double *mv = read_f64(m), want[12];
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 4; j++) want[i * 4 + j] = mv[(2 - i) * 4 + 1] + mv[2 * 4 + j];
        if (CHECK_SHAPE(s, KN_SHAPE(3, 4))) CHECK_CLOSE(s, want, tol_for(dt), "add of views");
        kn_tensor *z = kn_mul(kn_scalar(2, dt), col); /* 0-d with a view */
        double wz[3];
        for (int i = 0; i < 3; i++) wz[i] = 2 * mv[(2 - i) * 4 + 1];
        if (CHECK_SHAPE(z, KN_SHAPE(3, 1))) CHECK_CLOSE(z, wz, tol_for(dt), "0-d times view");
        CHECK_SHAPE(kn_add(kn_zeros(KN_SHAPE(0, 1), dt), row), KN_SHAPE(0, 4));
        CHECK_SHAPE(kn_add(kn_scalar(1, dt), kn_scalar(2, dt)), KN_SHAPE0);
        CHECK_ERROR(kn_add(col, kn_zeros(KN_SHAPE(2, 4), dt)) != NULL, KN_ERR_SHAPE, "broadcast");
        free(mv);
    }
}

int main(void) {
    RUN(test_view_and_reshape);
    RUN(test_slice_steps_and_clamps);
    RUN(test_expand_squeeze_unfold);
    RUN(test_contiguous_clone_and_copy_into_views);
    RUN(test_elementwise_broadcasts_over_views);
    return test_summary();
}
