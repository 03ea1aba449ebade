/* Index ops against plain-loop references. */
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static const kn_dtype SOME[4] = {KN_F32, KN_F16, KN_I32, KN_I64};

static kn_tensor *idx_tensor(const double *v, kn_shape s, kn_dtype dt) { return tensor_from(v, s, dt); }

static void test_gather_matches_reference(void) {
    for (int t = 0; t < 4; t++) {
        kn_dtype dt = SOME[t];
        kn_tensor *x = rand_tensor(KN_SHAPE(3, 5), dt, -10, 10);
        double iv[3 * 4];
        rand_fill(iv, 12, 0, 5);
        for (int i = 0; i < 12; i++) iv[i] = floor(iv[i]);
        kn_tensor *index = non_contiguous_copy(idx_tensor(iv, KN_SHAPE(3, 4), t % 2 ? KN_I32 : KN_I64));
        kn_tensor *g = kn_gather(non_contiguous_copy(x), 1, index);
        double *xv = read_f64(x), want[12];
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 4; j++) want[i * 4 + j] = xv[i * 5 + (int)iv[i * 4 + j]];
        CHECK_SHAPE(g, KN_SHAPE(3, 4));
        CHECK_CLOSE(g, want, tol_for(dt), "gather");
        free(xv);
    }
}

static void test_scatter_last_duplicate_wins_and_add_sums(void) {
    for (int t = 0; t < 4; t++) {
        kn_dtype dt = SOME[t];
        kn_tensor *x = rand_tensor(KN_SHAPE(4, 3), dt, -5, 5);
        kn_tensor *src = rand_tensor(KN_SHAPE(5, 3), dt, -5, 5);
        double iv[6] = {0, 1, 1, 1, 1, 3}; /* rows of index [2, 3] along dim 0, duplicates */
        kn_tensor *index = idx_tensor(iv, KN_SHAPE(2, 3), KN_I64);
        double *xv = read_f64(x), *sv = read_f64(src), w1[12], w2[12];
        memcpy(w1, xv, sizeof w1);
        memcpy(w2, xv, sizeof w2);
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 3; j++) {
                int r = (int)iv[i * 3 + j];
                w1[r * 3 + j] = sv[i * 3 + j];
                w2[r * 3 + j] += sv[i * 3 + j];
            }
        CHECK_CLOSE(kn_scatter(x, 0, index, src), w1, tol_for(dt), "scatter");
        CHECK_CLOSE(kn_scatter_add(non_contiguous_copy(x), 0, index, src), w2, tol_for(dt), "scatter_add");
        double w3[12];
        memcpy(w3, xv, sizeof w3);
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 3; j++) w3[(int)iv[i * 3 + j] * 3 + j] = 2;
        CHECK_CLOSE(kn_scatter_value(x, 0, index, 2.0), w3, tol_for(dt), "scatter_value");
        free(xv);
        free(sv);
    }
}

static void test_scatter_reduce_modes(void) {
    kn_tensor *x = rand_tensor(KN_SHAPE(6), KN_F64, -3, 3);
    kn_tensor *src = rand_tensor(KN_SHAPE(8), KN_F64, -3, 3);
    double iv[8] = {0, 2, 2, 5, 0, 2, 1, 5};
    kn_tensor *index = idx_tensor(iv, KN_SHAPE(8), KN_I32);
    double *xv = read_f64(x), *sv = read_f64(src);
    for (int op = 0; op < 5; op++)
        for (int self = 0; self < 2; self++) {
            double want[6], cnt[6] = {0};
            bool hit[6] = {0};
            for (int e = 0; e < 6; e++) want[e] = xv[e];
            for (int i = 0; i < 8; i++) {
                int r = (int)iv[i];
                if (!hit[r] && !self) want[r] = op == 1 ? 1 : op == 3 ? -INFINITY : op == 4 ? INFINITY : 0;
                hit[r] = true;
                cnt[r]++;
                double v = sv[i];
                want[r] = op == 1 ? want[r] * v : op == 3 ? fmax(want[r], v) : op == 4 ? fmin(want[r], v) : want[r] + v;
            }
            if (op == 2)
                for (int e = 0; e < 6; e++)
                    if (cnt[e]) want[e] /= cnt[e] + self;
            kn_tensor *r = kn_scatter_reduce(x, 0, index, src, (kn_scatter_reduce_op)op, self);
            CHECK_CLOSE(r, want, tol_for(KN_F64), "scatter_reduce");
        }
    free(xv);
    free(sv);
}

static void test_index_select_add_embedding(void) {
    for (int t = 0; t < 4; t++) {
        kn_dtype dt = SOME[t];
        kn_tensor *x = rand_tensor(KN_SHAPE(4, 6), dt, -5, 5);
        double iv[5] = {3, 0, 3, 5, 1};
        kn_tensor *index = idx_tensor(iv, KN_SHAPE(5), KN_I64);
        double *xv = read_f64(x), want[20];
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 5; j++) want[i * 5 + j] = xv[i * 6 + (int)iv[j]];
        CHECK_CLOSE(kn_index_select(non_contiguous_copy(x), 1, index), want, tol_for(dt), "index_select");
        kn_tensor *src = rand_tensor(KN_SHAPE(4, 5), dt, -5, 5);
        double *sv = read_f64(src), w2[24];
        memcpy(w2, xv, sizeof w2);
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 5; j++) w2[i * 6 + (int)iv[j]] += 2 * sv[i * 5 + j];
        CHECK_CLOSE(kn_index_add(x, 1, index, src, 2.0), w2, tol_for(dt), "index_add");
        double ev[4] = {1, 3, 3, 0};
        kn_tensor *e = kn_embedding(x, idx_tensor(ev, KN_SHAPE(2, 2), KN_I32));
        double w3[24];
        for (int k = 0; k < 4; k++)
            for (int d = 0; d < 6; d++) w3[k * 6 + d] = xv[(int)ev[k] * 6 + d];
        CHECK_SHAPE(e, KN_SHAPE(2, 2, 6));
        CHECK_CLOSE(e, w3, tol_for(dt), "embedding");
        free(xv);
        free(sv);
    }
}

/* embedding_backward: every grad row added into its index's row, duplicates summed; the
 * result f32 for f32/f16/bf16, f64 for f64. */
static void test_embedding_backward(void) {
    enum { V = 37, D = 19, N = 50 };
    double iv[N], want[V * D];
    rand_fill(iv, N, 0, V);
    for (int i = 0; i < N; i++) iv[i] = (int)iv[i] % 4 == 0 ? 7 : (int)iv[i]; /* many duplicates */
    for (int t = 0; t < 4; t++) {
        kn_dtype dt = FLOAT_DTYPES[t], acc = dt == KN_F64 ? KN_F64 : KN_F32;
        kn_tensor *g = rand_tensor(KN_SHAPE(N, D), dt, -1, 1);
        double *gv = read_f64(g);
        memset(want, 0, sizeof want);
        for (int i = 0; i < N; i++)
            for (int d = 0; d < D; d++) want[(int)iv[i] * D + d] += gv[i * D + d];
        kn_tensor *out = kn_embedding_backward(non_contiguous_copy(g), idx_tensor(iv, KN_SHAPE(N), t % 2 ? KN_I32 : KN_I64), V);
        CHECK(out && kn_dtype_of(out) == acc);
        CHECK_SHAPE(out, KN_SHAPE(V, D));
        CHECK_CLOSE(out, want, tol_for(acc), kn_dtype_name(dt));
        free(gv);
    }
    double two[2] = {0, 1};
    kn_tensor *g = kn_zeros(KN_SHAPE(2, 3), KN_F32), *i3 = idx_tensor(two, KN_SHAPE(2), KN_I64);
    CHECK_ERROR(kn_embedding_backward(g, kn_unsqueeze(i3, 0), 4) != NULL, KN_ERR_SHAPE, "indices' shape");
    CHECK_ERROR(kn_embedding_backward(kn_zeros(KN_SHAPE(2, 3), KN_I64), i3, 4) != NULL, KN_ERR_DTYPE, "float");
    CHECK_ERROR(kn_embedding_backward(g, i3, -1) != NULL, KN_ERR_ARG, "negative");
    CHECK_SHAPE(kn_embedding_backward(kn_zeros(KN_SHAPE(0, 3), KN_F32), kn_zeros(KN_SHAPE(0), KN_I64), 4), KN_SHAPE(4, 3));
    double zero[12];
    memset(zero, 0, sizeof zero);
    CHECK_CLOSE(kn_embedding_backward(kn_zeros(KN_SHAPE(0, 3), KN_F32), kn_zeros(KN_SHAPE(0), KN_I64), 4), zero,
                tol_for(KN_F32), "no rows");
}

static void test_index_put_wraps_and_accumulates(void) {
    kn_tensor *x = rand_tensor(KN_SHAPE(4, 3), KN_F32, -5, 5);
    double iv[3] = {-1, 0, 3};
    kn_tensor *i0 = idx_tensor(iv, KN_SHAPE(3), KN_I64);
    kn_tensor *vals = rand_tensor(KN_SHAPE(3, 3), KN_F32, -5, 5);
    double *xv = read_f64(x), *vv = read_f64(vals), w1[12], w2[12];
    memcpy(w1, xv, sizeof w1);
    memcpy(w2, xv, sizeof w2);
    for (int b = 0; b < 3; b++) {
        int r = iv[b] < 0 ? (int)iv[b] + 4 : (int)iv[b];
        for (int j = 0; j < 3; j++) {
            w1[r * 3 + j] = vv[b * 3 + j];
            w2[r * 3 + j] += vv[b * 3 + j];
        }
    }
    CHECK_CLOSE(kn_index_put(x, &i0, 1, vals, false), w1, tol_for(KN_F32), "index_put");
    CHECK_CLOSE(kn_index_put(x, &i0, 1, vals, true), w2, tol_for(KN_F32), "index_put accumulate");
    free(xv);
    free(vv);
}

static void test_masks_and_nonzero(void) {
    kn_tensor *x = rand_tensor(KN_SHAPE(3, 4), KN_F32, -5, 5);
    kn_tensor *mask = rand_tensor(KN_SHAPE(1, 4), KN_BOOL, 0, 1);
    double *xv = read_f64(x), *mv = read_f64(mask), want[12], sel[12];
    int k = 0;
    for (int i = 0; i < 12; i++) {
        bool m = mv[i % 4] != 0;
        want[i] = m ? 7 : xv[i];
        if (m) sel[k++] = xv[i];
    }
    CHECK_CLOSE(kn_masked_fill(x, mask, 7), want, tol_for(KN_F32), "masked_fill");
    kn_tensor *s = kn_masked_select(non_contiguous_copy(x), mask);
    CHECK(s && kn_numel(s) == k);
    CHECK_CLOSE(s, sel, tol_for(KN_F32), "masked_select");
    double nv[6] = {0, 1, 0, 2, 0, -1};
    kn_tensor *nz = kn_nonzero(tensor_from(nv, KN_SHAPE(2, 3), KN_I32));
    double wnz[6] = {0, 1, 1, 0, 1, 2};
    CHECK_SHAPE(nz, KN_SHAPE(3, 2));
    CHECK_CLOSE(nz, wnz, tol_for(KN_I64), "nonzero");
    free(xv);
    free(mv);
}

static void test_embedding_bag_modes(void) {
    kn_tensor *w = rand_tensor(KN_SHAPE(5, 4), KN_F32, -2, 2);
    double iv[6] = {1, 2, 4, 4, 0, 3}, ov[3] = {0, 2, 2}; /* bag 1 is empty */
    kn_tensor *idx = idx_tensor(iv, KN_SHAPE(6), KN_I64), *off = idx_tensor(ov, KN_SHAPE(3), KN_I32);
    double *wv = read_f64(w);
    for (int mode = 0; mode < 3; mode++) {
        double want[12];
        for (int b = 0; b < 3; b++) {
            int s = (int)ov[b], e = b < 2 ? (int)ov[b + 1] : 6;
            for (int d = 0; d < 4; d++) {
                double acc = mode == 2 && e > s ? -INFINITY : 0;
                for (int i = s; i < e; i++) {
                    double v = wv[(int)iv[i] * 4 + d];
                    acc = mode == 2 ? fmax(acc, v) : acc + v;
                }
                want[b * 4 + d] = mode == 1 && e > s ? acc / (e - s) : acc;
            }
        }
        CHECK_CLOSE(kn_embedding_bag(w, idx, off, (kn_bag_mode)mode, NULL, false), want, tol_for(KN_F32), "bag");
    }
    free(wv);
}

static void test_sort_topk_unique(void) {
    for (int t = 0; t < 4; t++) {
        kn_dtype dt = SOME[t];
        kn_tensor *x = rand_tensor(KN_SHAPE(3, 7), dt, -4, 4);
        double *xv = read_f64(x);
        kn_tensor *v = NULL, *ix = NULL;
        CHECK(kn_sort(non_contiguous_copy(x), 1, true, &v, &ix) == KN_OK);
        double *sv = read_f64(v), *si = read_f64(ix);
        for (int r = 0; sv && si && r < 3; r++)
            for (int j = 0; j < 7; j++) {
                CHECK(xv[r * 7 + (int)si[r * 7 + j]] == sv[r * 7 + j]);
                if (j) CHECK(sv[r * 7 + j - 1] >= sv[r * 7 + j]);
                if (j && sv[r * 7 + j - 1] == sv[r * 7 + j]) CHECK(si[r * 7 + j - 1] < si[r * 7 + j]); /* stable */
            }
        kn_tensor *tv = NULL, *ti = NULL;
        CHECK(kn_topk(x, 3, 1, true, true, &tv, &ti) == KN_OK);
        double *tvv = read_f64(tv);
        for (int r = 0; tvv && sv && r < 3; r++)
            for (int j = 0; j < 3; j++) CHECK(tvv[r * 3 + j] == sv[r * 7 + j]);
        kn_tensor *u = NULL, *inv = NULL, *cnt = NULL;
        CHECK(kn_unique(x, &u, &inv, &cnt) == KN_OK);
        double *uv = read_f64(u), *iv = read_f64(inv), *cv = read_f64(cnt);
        int64_t total = 0;
        for (int64_t g = 0; uv && cv && g < kn_numel(u); g++) {
            if (g) CHECK(uv[g - 1] < uv[g]);
            total += (int64_t)cv[g];
        }
        CHECK(total == 21);
        for (int i = 0; iv && uv && i < 21; i++) CHECK(uv[(int)iv[i]] == xv[i]);
        free(xv), free(sv), free(si), free(tvv), free(uv), free(iv), free(cv);
    }
}

/* PyTorch 2.15's unique with return_inverse and return_counts: NaN equals nothing, so each NaN
 * is a value of its own, after the numbers, in the order the NaNs appear. */
static void test_unique_keeps_each_nan_as_pytorch_does(void) {
    for (int k = 0; k < 4; k++) {
        kn_dtype dt = FLOAT_DTYPES[k];
        /* torch.unique(torch.tensor([nan, 1, nan]), return_inverse=True, return_counts=True) */
        double x1[3] = {NAN, 1, NAN}, u1[3] = {1, NAN, NAN}, i1[3] = {1, 0, 2}, c1[3] = {1, 1, 1};
        kn_tensor *u = NULL, *inv = NULL, *cnt = NULL;
        CHECK(kn_unique(tensor_from(x1, KN_SHAPE(3), dt), &u, &inv, &cnt) == KN_OK);
        CHECK_CLOSE(u, u1, tol_for(dt), "values");
        CHECK_CLOSE(inv, i1, tol_for(KN_I64), "inverse");
        CHECK_CLOSE(cnt, c1, tol_for(KN_I64), "counts");
        /* torch.unique(torch.tensor([[nan, 1], [nan, nan]]), return_inverse=True, return_counts=True) */
        double x2[4] = {NAN, 1, NAN, NAN}, u2[4] = {1, NAN, NAN, NAN}, i2[4] = {1, 0, 2, 3}, c2[4] = {1, 1, 1, 1};
        CHECK(kn_unique(tensor_from(x2, KN_SHAPE(2, 2), dt), &u, &inv, &cnt) == KN_OK);
        CHECK_CLOSE(u, u2, tol_for(dt), "values 2-d");
        CHECK_SHAPE(inv, KN_SHAPE(2, 2));
        CHECK_CLOSE(inv, i2, tol_for(KN_I64), "inverse 2-d");
        CHECK_CLOSE(cnt, c2, tol_for(KN_I64), "counts 2-d");
        /* torch.unique(torch.tensor([nan, 1, nan, -0., 0., -inf, inf, 1, nan, 0., -0.]), ...): the zeros
         * are one value, -0.0 as first seen */
        double x3[11] = {NAN, 1, NAN, -0.0, 0.0, -INFINITY, INFINITY, 1, NAN, 0.0, -0.0};
        double u3[7] = {-INFINITY, -0.0, 1, INFINITY, NAN, NAN, NAN}, i3[11] = {4, 2, 5, 1, 1, 0, 3, 2, 6, 1, 1};
        double c3[7] = {1, 4, 2, 1, 1, 1, 1};
        CHECK(kn_unique(tensor_from(x3, KN_SHAPE(11), dt), &u, &inv, &cnt) == KN_OK);
        CHECK_CLOSE(u, u3, tol_for(dt), "values mixed");
        double *uv = read_f64(u);
        CHECK(uv && signbit(uv[1]));
        free(uv);
        CHECK_CLOSE(inv, i3, tol_for(KN_I64), "inverse mixed");
        CHECK_CLOSE(cnt, c3, tol_for(KN_I64), "counts mixed");
    }
}

/* topk's order among equal values is kiln's rule (PyTorch leaves it to its selection
 * algorithm): sorted by value, NaN the largest, equal values (-0.0 and 0.0 too) lower index
 * first. The values are PyTorch's: torch.topk(x, 5) and torch.topk(x, 5, largest=False). */
static void test_topk_ties_keep_the_lower_index(void) {
    double xv[11] = {NAN, 1, NAN, -0.0, 0.0, -INFINITY, INFINITY, 1, NAN, 0.0, -0.0};
    double big[5] = {NAN, NAN, NAN, INFINITY, 1}, big_i[5] = {0, 2, 8, 6, 1};
    double small[5] = {-INFINITY, 0, 0, 0, 0}, small_i[5] = {5, 3, 4, 9, 10};
    for (int k = 0; k < 4; k++) {
        kn_dtype dt = FLOAT_DTYPES[k];
        kn_tensor *x = tensor_from(xv, KN_SHAPE(11), dt), *v = NULL, *i = NULL;
        CHECK(kn_topk(x, 5, 0, true, true, &v, &i) == KN_OK);
        CHECK_CLOSE(v, big, tol_for(dt), "largest");
        CHECK_CLOSE(i, big_i, tol_for(KN_I64), "largest: ties in index order");
        CHECK(kn_topk(x, 5, 0, false, false, &v, &i) == KN_OK);
        CHECK_CLOSE(v, small, tol_for(dt), "smallest");
        CHECK_CLOSE(i, small_i, tol_for(KN_I64), "smallest: ties in index order");
    }
}

static void test_multinomial(void) {
    double p[4] = {0.1, 0.0, 0.6, 0.3};
    kn_tensor *probs = tensor_from(p, KN_SHAPE(4), KN_F32);
    kn_manual_seed(42);
    kn_tensor *a = kn_multinomial(probs, 20000, true);
    kn_manual_seed(42);
    kn_tensor *b = kn_multinomial(probs, 20000, true);
    double *av = read_f64(a), *bv = read_f64(b), freq[4] = {0};
    for (int i = 0; av && bv && i < 20000; i++) {
        CHECK(av[i] == bv[i]);
        freq[(int)av[i]] += 1.0 / 20000;
    }
    for (int c = 0; c < 4; c++) CHECK_MSG(fabs(freq[c] - p[c]) < 0.02, "category %d: %g vs %g", c, freq[c], p[c]);
    kn_tensor *w = kn_multinomial(rand_tensor(KN_SHAPE(5, 8), KN_F64, 0.1, 1), 8, false);
    double *wv = read_f64(w);
    for (int r = 0; wv && r < 5; r++) {
        int seen = 0;
        for (int s = 0; s < 8; s++) seen |= 1 << (int)wv[r * 8 + s];
        CHECK(seen == 255);
    }
    free(av), free(bv), free(wv);
}

static void test_errors(void) {
    kn_mode mode = kn_get_mode();
    kn_set_mode(KN_MODE_STRICT); /* the first checks are about strict mode's deferred report */
    kn_tensor *x = rand_tensor(KN_SHAPE(3, 4), KN_F32, -1, 1);
    double bad[2] = {0, 4};
    kn_tensor *bi = idx_tensor(bad, KN_SHAPE(2), KN_I64);
    kn_tensor *r = kn_index_select(x, 1, bi); /* strict: reported at the sync */
    CHECK(r != NULL);
    CHECK_ERROR(kn_sync() == KN_OK, KN_ERR_INDEX, "index 4 is out of range for dim 1 of size 4");
    kn_set_mode(KN_MODE_DEBUG);
    CHECK_ERROR(kn_index_select(x, 1, bi) != NULL, KN_ERR_INDEX, "index_select: index 4");
    double neg[2] = {-1, 0};
    CHECK_ERROR(kn_gather(x, 1, idx_tensor(neg, KN_SHAPE(1, 2), KN_I32)) != NULL, KN_ERR_INDEX, "index -1");
    kn_set_mode(KN_MODE_STRICT);
    CHECK_ERROR(kn_index_select(x, 1, kn_zeros(KN_SHAPE(2), KN_F32)) != NULL, KN_ERR_DTYPE, "i32 or i64");
    CHECK_ERROR(kn_gather(x, 1, kn_zeros(KN_SHAPE(2), KN_I64)) != NULL, KN_ERR_SHAPE, "dims");
    CHECK_ERROR(kn_topk(x, 5, 1, true, true, NULL, NULL) == KN_OK, KN_ERR_ARG, "k 5");
    CHECK_ERROR(kn_multinomial(kn_ones(KN_SHAPE(3), KN_F32), 4, false) != NULL, KN_ERR_ARG, "exceeds");
    double np[3] = {0.5, -0.5, 1};
    kn_tensor *m = kn_multinomial(tensor_from(np, KN_SHAPE(3), KN_F32), 2, true);
    CHECK(m != NULL);
    CHECK_ERROR(kn_sync() == KN_OK, KN_ERR_ARG, "negative");
    CHECK_ERROR(kn_masked_fill(x, kn_zeros(KN_SHAPE(4), KN_F32), 1) != NULL, KN_ERR_DTYPE, "bool");
    kn_set_mode(mode);
}

static void test_empty(void) {
    kn_tensor *x = rand_tensor(KN_SHAPE(0, 3), KN_F32, -1, 1);
    kn_tensor *g = kn_gather(x, 0, kn_zeros(KN_SHAPE(0, 3), KN_I64));
    CHECK_SHAPE(g, KN_SHAPE(0, 3));
    kn_tensor *s = kn_index_select(rand_tensor(KN_SHAPE(2, 3), KN_F32, 0, 1), 0, kn_zeros(KN_SHAPE(0), KN_I64));
    CHECK_SHAPE(s, KN_SHAPE(0, 3));
    CHECK(kn_sync() == KN_OK);
}


static void test_more_dtypes_and_forms(void) {
    const kn_dtype dts[3] = {KN_F64, KN_BF16, KN_BOOL};
    for (int t = 0; t < 3; t++) {
        kn_tensor *x = rand_tensor(KN_SHAPE(4, 2), dts[t], -3, 3);
        double iv[3] = {2, 0, 2};
        kn_tensor *g = kn_index_select(x, 0, idx_tensor(iv, KN_SHAPE(3), KN_I32));
        double *xv = read_f64(x), want[6];
        for (int j = 0; j < 3; j++)
            for (int d = 0; d < 2; d++) want[j * 2 + d] = xv[(int)iv[j] * 2 + d];
        CHECK_CLOSE(g, want, tol_for(dts[t]), "index_select dtype");
        free(xv);
    }
    /* index_put over two dims with broadcast index tensors. */
    kn_tensor *x = rand_tensor(KN_SHAPE(3, 4), KN_I64, -9, 9);
    double a[2] = {0, 2}, b[3] = {1, -1, 0};
    kn_tensor *ia = idx_tensor(a, KN_SHAPE(2, 1), KN_I64), *ib = idx_tensor(b, KN_SHAPE(3), KN_I32);
    kn_tensor *vals = kn_full(KN_SHAPE0, 5, KN_I64);
    double *xv = read_f64(x), want[12];
    memcpy(want, xv, sizeof want);
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++) want[(int)a[i] * 4 + ((int)b[j] + 4) % 4] += 5;
    CHECK_CLOSE(kn_index_put(x, (kn_tensor *[]){ia, ib}, 2, vals, true), want, tol_for(KN_I64), "index_put 2-d");
    free(xv);
    /* embedding_bag: per-sample weights, include_last_offset, and 2-d indices. */
    kn_tensor *w = rand_tensor(KN_SHAPE(4, 3), KN_F64, -1, 1);
    double iv[4] = {3, 1, 1, 0}, ov[3] = {0, 1, 4}, pw[4] = {0.5, 2, -1, 3};
    double *wv = read_f64(w), w1[6] = {0}, w2[6] = {0};
    for (int bag = 0; bag < 2; bag++)
        for (int e = (int)ov[bag]; e < (int)ov[bag + 1]; e++)
            for (int d = 0; d < 3; d++) w1[bag * 3 + d] += pw[e] * wv[(int)iv[e] * 3 + d];
    kn_tensor *bag = kn_embedding_bag(w, idx_tensor(iv, KN_SHAPE(4), KN_I64), idx_tensor(ov, KN_SHAPE(3), KN_I64),
                                      KN_BAG_SUM, tensor_from(pw, KN_SHAPE(4), KN_F64), true);
    CHECK_CLOSE(bag, w1, tol_for(KN_F64), "embedding_bag weights");
    for (int r = 0; r < 2; r++)
        for (int e = 0; e < 2; e++)
            for (int d = 0; d < 3; d++) w2[r * 3 + d] += wv[(int)iv[r * 2 + e] * 3 + d] / 2;
    CHECK_CLOSE(kn_embedding_bag(w, idx_tensor(iv, KN_SHAPE(2, 2), KN_I32), NULL, KN_BAG_MEAN, NULL, false), w2,
                tol_for(KN_F64), "embedding_bag 2-d");
    free(wv);
    /* sort puts NaN last ascending, argsort agrees with sort. */
    double sv[5] = {3, NAN, -1, 3, 0};
    kn_tensor *s = tensor_from(sv, KN_SHAPE(5), KN_F32);
    kn_tensor *vals2 = NULL;
    CHECK(kn_sort(s, 0, false, &vals2, NULL) == KN_OK);
    double ws[5] = {-1, 0, 3, 3, NAN};
    CHECK_CLOSE(vals2, ws, tol_for(KN_F32), "sort NaN");
    double wi[5] = {2, 4, 0, 3, 1};
    CHECK_CLOSE(kn_argsort(s, 0, false), wi, tol_for(KN_I64), "argsort");
    /* integer mean rounds down */
    double xi[2] = {0, 0}, si[3] = {1, 2, -3}, ii[3] = {0, 0, 1};
    double wm[2] = {1, -2}; /* (0+1+2)/3 = 1; (0-3)/2 = -1.5 -> -2 */
    CHECK_CLOSE(kn_scatter_reduce(tensor_from(xi, KN_SHAPE(2), KN_I32), 0, idx_tensor(ii, KN_SHAPE(3), KN_I64),
                                  tensor_from(si, KN_SHAPE(3), KN_I32), KN_SCATTER_MEAN, true),
                wm, tol_for(KN_I32), "integer mean");
}

static void test_debug_mode_data_errors(void) {
    kn_mode mode = kn_get_mode();
    kn_set_mode(KN_MODE_DEBUG);
    kn_tensor *x = rand_tensor(KN_SHAPE(3), KN_F32, 0, 1);
    double b[1] = {-4};
    kn_tensor *i0 = idx_tensor(b, KN_SHAPE(1), KN_I64);
    CHECK_ERROR(kn_index_put(x, &i0, 1, kn_scalar(1, KN_F32), false) != NULL, KN_ERR_INDEX, "index -4");
    double e[2] = {0, 7};
    CHECK_ERROR(kn_embedding(kn_zeros(KN_SHAPE(7, 2), KN_F32), idx_tensor(e, KN_SHAPE(2), KN_I64)) != NULL,
                KN_ERR_INDEX, "embedding: index 7");
    CHECK_ERROR(kn_embedding_backward(kn_zeros(KN_SHAPE(2, 2), KN_F32), idx_tensor(e, KN_SHAPE(2), KN_I64), 7) != NULL,
                KN_ERR_INDEX, "embedding_backward: index 7");
    double off[2] = {0, 9};
    CHECK_ERROR(kn_embedding_bag(kn_zeros(KN_SHAPE(7, 2), KN_F32), idx_tensor(e, KN_SHAPE(2), KN_I64),
                                 idx_tensor(off, KN_SHAPE(2), KN_I64), KN_BAG_SUM, NULL, false) != NULL,
                KN_ERR_INDEX, "offset");
    kn_set_mode(mode);
}

/* The worker runs queued selects while the host drops and takes references to the same
 * tensors: the kernel must read only the geometry it needs, never the whole header the host is
 * updating (`make test-tsan` finds the race; here the values must still come out right). */
static void test_select_kernels_run_while_the_host_releases_their_tensors(void) {
    double table[6 * 4], iv[5] = {5, 0, 3, 3, 1};
    for (int i = 0; i < 24; i++) table[i] = i;
    kn_tensor *w = tensor_from(table, KN_SHAPE(6, 4), KN_F32);
    kn_tensor *index = tensor_from(iv, KN_SHAPE(5), KN_I64);
    kn_tensor *last = NULL;
    for (int round = 0; round < 1000; round++) {
        kn_scope_push();
        kn_tensor *a = kn_embedding(index, w);
        kn_tensor *b = kn_index_select(w, 0, index);
        kn_release(kn_retain(w));
        kn_release(kn_retain(index));
        kn_release(a);
        kn_keep(b);
        kn_scope_pop();
        kn_release(last);
        last = b;
    }
    double want[5 * 4];
    for (int r = 0; r < 5; r++)
        for (int c = 0; c < 4; c++) want[r * 4 + c] = table[(int)iv[r] * 4 + c];
    CHECK_CLOSE(last, want, tol_for(KN_F32), "index_select after 1000 rounds");
    kn_release(last);
}

int main(void) {
    RUN(test_gather_matches_reference);
    RUN(test_scatter_last_duplicate_wins_and_add_sums);
    RUN(test_scatter_reduce_modes);
    RUN(test_index_select_add_embedding);
    RUN(test_embedding_backward);
    RUN(test_index_put_wraps_and_accumulates);
    RUN(test_masks_and_nonzero);
    RUN(test_embedding_bag_modes);
    RUN(test_sort_topk_unique);
    RUN(test_unique_keeps_each_nan_as_pytorch_does);
    RUN(test_topk_ties_keep_the_lower_index);
    RUN(test_multinomial);
    RUN(test_errors);
    RUN(test_empty);
    RUN(test_more_dtypes_and_forms);
    RUN(test_debug_mode_data_errors);
    RUN(test_select_kernels_run_while_the_host_releases_their_tensors);
    return test_summary();
}
