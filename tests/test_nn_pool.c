/* Pooling and upsampling against float64 loops written from PyTorch's formulas. */
#include <stdlib.h>

#include "harness.h"

static int64_t out_size(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil_mode) {
    int64_t eff = d * (k - 1) + 1;
    int64_t o = ceil_mode ? (in + 2 * p - eff + s - 1) / s + 1 : (in + 2 * p - eff) / s + 1;
    if (ceil_mode && (o - 1) * s >= in + p) o--; /* the last window must start inside the input or left padding */
    return o;
}

static void test_max_pool2d_values_and_indices(void) {
    kn_pool_opts opts[] = {
        {.kernel = {3, 2}, .stride = {2, 1}, .padding = {1, 1}},
        {.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 0}, .dilation = {2, 1}, .ceil_mode = true},
        {.kernel = {2, 2}},
    };
    for (int oi = 0; oi < 3; oi++)
        for (int k = 0; k < 4; k++) {
            kn_dtype dt = FLOAT_DTYPES[k];
            kn_pool_opts o = opts[oi];
            int64_t H = 7, W = 8, P = 6, s0 = o.stride[0] ? o.stride[0] : o.kernel[0], s1 = o.stride[1] ? o.stride[1] : o.kernel[1];
            int64_t d0 = o.dilation[0] ? o.dilation[0] : 1, d1 = o.dilation[1] ? o.dilation[1] : 1;
            int64_t OH = out_size(H, o.kernel[0], s0, o.padding[0], d0, o.ceil_mode);
            int64_t OW = out_size(W, o.kernel[1], s1, o.padding[1], d1, o.ceil_mode);
            kn_tensor *x = rand_tensor(KN_SHAPE(2, 3, 7, 8), dt, -1, 1), *out = NULL, *idx = NULL;
            CHECK(kn_max_pool2d_with_indices(non_contiguous_copy(x), o, &out, &idx) == KN_OK);
            CHECK_SHAPE(out, KN_SHAPE(2, 3, OH, OW));
            double *xv = read_f64(x), *want = malloc(sizeof(double) * (size_t)(P * OH * OW));
            double *want_i = malloc(sizeof(double) * (size_t)(P * OH * OW));
            for (int64_t q = 0; q < P; q++)
                for (int64_t oh = 0; oh < OH; oh++)
                    for (int64_t ow = 0; ow < OW; ow++) {
                        double best = -INFINITY;
                        int64_t bi = -1;
                        for (int64_t kh = 0; kh < o.kernel[0]; kh++)
                            for (int64_t kw = 0; kw < o.kernel[1]; kw++) {
                                int64_t ih = oh * s0 - o.padding[0] + kh * d0, iw = ow * s1 - o.padding[1] + kw * d1;
                                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                                if (xv[(q * H + ih) * W + iw] > best) best = xv[(q * H + ih) * W + iw], bi = ih * W + iw;
                            }
                        want[(q * OH + oh) * OW + ow] = best, want_i[(q * OH + oh) * OW + ow] = (double)bi;
                    }
            CHECK_CLOSE(out, want, tol_for(dt), kn_dtype_name(dt));
            /* 16-bit ties can pick another equal element; the index must still hold the max */
            if (dt == KN_F32 || dt == KN_F64) CHECK_CLOSE(idx, want_i, tol_for(KN_I64), "indices");
            CHECK(kn_dtype_of(idx) == KN_I64);
            CHECK_CLOSE(kn_max_pool2d(x, o), want, tol_for(dt), "max_pool2d");
            free(xv), free(want), free(want_i);
        }
}

/* Each window's maximum, its index and where the gradient goes, against PyTorch 2.15: NaN wins
 * and the index is the window's last NaN; a window of -inf keeps its first element; equal
 * maxima keep the first. Seeds 1, 2, ... make each output's gradient land where it points. */
static void check_max_pool_against_torch(const double *x, kn_shape shape, kn_pool_opts o, const double *want,
                                         const double *want_i, const double *want_grad, kn_dtype dt) {
    kn_tensor *xt = kn_requires_grad(tensor_from(x, shape, dt), true), *y = NULL, *idx = NULL;
    CHECK(kn_max_pool2d_with_indices(xt, o, &y, &idx) == KN_OK);
    CHECK_CLOSE(y, want, tol_for(dt), kn_dtype_name(dt));
    CHECK_CLOSE(idx, want_i, tol_for(KN_I64), "indices");
    kn_tensor *seed = kn_cast(kn_reshape(kn_arange(1, (double)kn_numel(y) + 1, 1, KN_F64), kn_shape_of(y)), dt);
    CHECK(kn_backward_ex(y, seed, false) == KN_OK);
    CHECK_CLOSE(kn_grad(xt), want_grad, tol_for(dt), "gradient");
}

static void test_max_pool2d_nan_points_at_the_last_nan_as_in_pytorch(void) {
    for (int k = 0; k < 4; k++) {
        kn_dtype dt = FLOAT_DTYPES[k];
        /* x = torch.tensor([nan,1,nan,2, -inf,-inf,-inf,-inf, 2,2,1,2, inf,nan,inf,nan]).reshape(1,4,2,2)
         * y, i = F.max_pool2d(x, 2, return_indices=True); y.backward(torch.arange(1., 5).reshape(y.shape)) */
        double x4[16] = {NAN, 1, NAN, 2, -INFINITY, -INFINITY, -INFINITY, -INFINITY, 2, 2, 1, 2, INFINITY, NAN, INFINITY, NAN};
        double y4[4] = {NAN, -INFINITY, 2, NAN}, i4[4] = {2, 0, 0, 3};
        double g4[16] = {0, 0, 1, 0, 2, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 4};
        check_max_pool_against_torch(x4, KN_SHAPE(1, 4, 2, 2), (kn_pool_opts){.kernel = {2, 2}}, y4, i4, g4, dt);
        /* padded overlapping windows: F.max_pool2d(x.reshape(1,1,3,4), 3, 1, 1, return_indices=True),
         * y.backward(torch.arange(1., 13).reshape(y.shape)) */
        double x3[12] = {1, NAN, NAN, 4, 5, NAN, 7, 8, 9, 10, 11, 12};
        double y3[12] = {NAN, NAN, NAN, NAN, NAN, NAN, NAN, NAN, NAN, NAN, NAN, 12};
        double i3[12] = {5, 5, 5, 2, 5, 5, 5, 2, 5, 5, 5, 11};
        double g3[12] = {0, 0, 12, 0, 0, 54, 0, 0, 0, 0, 0, 12};
        check_max_pool_against_torch(x3, KN_SHAPE(1, 1, 3, 4),
                                     (kn_pool_opts){.kernel = {3, 3}, .stride = {1, 1}, .padding = {1, 1}}, y3, i3, g3, dt);
    }
}

static void test_avg_pool2d_padding_modes(void) {
    for (int mode = 0; mode < 4; mode++)
        for (int k = 0; k < 4; k++) {
            kn_dtype dt = FLOAT_DTYPES[k];
            kn_pool_opts o = {.kernel = {3, 2}, .stride = {2, 2}, .padding = {1, 1}, .ceil_mode = mode & 1,
                              .exclude_pad = mode & 2};
            int64_t H = 6, W = 7;
            int64_t OH = out_size(H, 3, 2, 1, 1, o.ceil_mode), OW = out_size(W, 2, 2, 1, 1, o.ceil_mode);
            kn_tensor *x = rand_tensor(KN_SHAPE(3, 6, 7), dt, -1, 1);
            double *xv = read_f64(x), want[3 * 4 * 5];
            for (int64_t q = 0; q < 3; q++)
                for (int64_t oh = 0; oh < OH; oh++)
                    for (int64_t ow = 0; ow < OW; ow++) {
                        double acc = 0;
                        int64_t inside = 0, padded = 0;
                        for (int64_t ih = oh * 2 - 1; ih < oh * 2 - 1 + 3; ih++)
                            for (int64_t iw = ow * 2 - 1; iw < ow * 2 - 1 + 2; iw++) {
                                /* PyTorch counts padding cells (ih < H + pad) but not ceil_mode overhang */
                                if (ih < H + 1 && iw < W + 1) padded++;
                                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                                acc += xv[(q * H + ih) * W + iw], inside++;
                            }
                        want[(q * OH + oh) * OW + ow] = acc / (double)(o.exclude_pad ? inside : padded);
                    }
            kn_tensor *y = kn_avg_pool2d(non_contiguous_copy(x), o);
            CHECK_SHAPE(y, KN_SHAPE(3, OH, OW));
            CHECK_CLOSE(y, want, tol_for(dt), kn_dtype_name(dt));
            free(xv);
        }
}

static void test_adaptive_avg_pool2d(void) {
    for (int k = 0; k < 4; k++) {
        kn_dtype dt = FLOAT_DTYPES[k];
        int64_t H = 7, W = 5, OH = 3, OW = 4;
        kn_tensor *x = rand_tensor(KN_SHAPE(2, 2, 7, 5), dt, -1, 1);
        double *xv = read_f64(x), want[4 * 12];
        for (int64_t q = 0; q < 4; q++)
            for (int64_t oh = 0; oh < OH; oh++)
                for (int64_t ow = 0; ow < OW; ow++) {
                    int64_t hs = (int64_t)floor((double)oh * H / OH), he = (int64_t)ceil((double)(oh + 1) * H / OH);
                    int64_t ws = (int64_t)floor((double)ow * W / OW), we = (int64_t)ceil((double)(ow + 1) * W / OW);
                    double acc = 0;
                    for (int64_t ih = hs; ih < he; ih++)
                        for (int64_t iw = ws; iw < we; iw++) acc += xv[(q * H + ih) * W + iw];
                    want[(q * OH + oh) * OW + ow] = acc / (double)((he - hs) * (we - ws));
                }
        CHECK_CLOSE(kn_adaptive_avg_pool2d(non_contiguous_copy(x), 3, 4), want, tol_for(dt), kn_dtype_name(dt));
        free(xv);
    }
}

static void test_upsample_nearest_and_bilinear(void) {
    int64_t sizes[][2] = {{9, 11}, {2, 3}, {1, 1}};
    for (int si = 0; si < 3; si++)
        for (int k = 0; k < 4; k++) {
            kn_dtype dt = FLOAT_DTYPES[k];
            int64_t H = 4, W = 5, OH = sizes[si][0], OW = sizes[si][1];
            kn_tensor *x = rand_tensor(KN_SHAPE(2, 3, 4, 5), dt, -1, 1);
            double *xv = read_f64(x), *want = malloc(sizeof(double) * (size_t)(6 * OH * OW));
            for (int64_t q = 0; q < 6; q++)
                for (int64_t oh = 0; oh < OH; oh++)
                    for (int64_t ow = 0; ow < OW; ow++) {
                        int64_t ih = oh * H / OH, iw = ow * W / OW; /* floor(dst * in / out) */
                        want[(q * OH + oh) * OW + ow] = xv[(q * H + ih) * W + iw];
                    }
            CHECK_CLOSE(kn_upsample_nearest2d(non_contiguous_copy(x), OH, OW), want, tol_for(dt), "nearest");
            for (int align = 0; align < 2; align++) {
                for (int64_t q = 0; q < 6; q++)
                    for (int64_t oh = 0; oh < OH; oh++)
                        for (int64_t ow = 0; ow < OW; ow++) {
                            double sh, sw;
                            if (align) {
                                sh = OH > 1 ? (double)oh * (H - 1) / (OH - 1) : 0;
                                sw = OW > 1 ? (double)ow * (W - 1) / (OW - 1) : 0;
                            } else {
                                sh = fmax((oh + 0.5) * H / OH - 0.5, 0), sw = fmax((ow + 0.5) * W / OW - 0.5, 0);
                            }
                            int64_t h0 = (int64_t)sh, w0 = (int64_t)sw;
                            int64_t h1 = h0 < H - 1 ? h0 + 1 : h0, w1 = w0 < W - 1 ? w0 + 1 : w0;
                            double lh = sh - h0, lw = sw - w0;
                            const double *p = xv + q * H * W;
                            want[(q * OH + oh) * OW + ow] = (1 - lh) * ((1 - lw) * p[h0 * W + w0] + lw * p[h0 * W + w1]) +
                                                            lh * ((1 - lw) * p[h1 * W + w0] + lw * p[h1 * W + w1]);
                        }
                CHECK_CLOSE(kn_upsample_bilinear2d(x, OH, OW, align), want, tol_for(dt),
                            align ? "bilinear align_corners" : "bilinear");
            }
            free(xv), free(want);
        }
}

static void test_pool_errors(void) {
    kn_tensor *x = kn_zeros(KN_SHAPE(1, 2, 4, 4), KN_F32);
    CHECK_ERROR(kn_max_pool2d(x, (kn_pool_opts){.kernel = {2, 2}, .padding = {2, 0}}) != NULL, KN_ERR_ARG,
                "at most half the kernel");
    CHECK_ERROR(kn_max_pool2d(x, (kn_pool_opts){.kernel = {5, 2}}) != NULL, KN_ERR_SHAPE, "not positive");
    CHECK_ERROR(kn_max_pool2d(x, (kn_pool_opts){.kernel = {0, 2}}) != NULL, KN_ERR_ARG, "positive");
    CHECK_ERROR(kn_avg_pool2d(kn_zeros(KN_SHAPE(4, 4), KN_F32), (kn_pool_opts){.kernel = {2, 2}}) != NULL,
                KN_ERR_SHAPE, "[N, C, H, W]");
    CHECK_ERROR(kn_avg_pool2d(x, (kn_pool_opts){.kernel = {2, 2}, .dilation = {2, 2}}) != NULL, KN_ERR_ARG,
                "no dilation");
    CHECK_ERROR(kn_adaptive_avg_pool2d(x, 0, 2) != NULL, KN_ERR_SHAPE, "not positive");
    CHECK_ERROR(kn_upsample_nearest2d(x, 3, -1) != NULL, KN_ERR_SHAPE, "not positive");
    CHECK_ERROR(kn_upsample_bilinear2d(NULL, 3, 3, false) != NULL, KN_ERR_NULL, "upsample_bilinear2d");
}

int main(void) {
    RUN(test_max_pool2d_values_and_indices);
    RUN(test_max_pool2d_nan_points_at_the_last_nan_as_in_pytorch);
    RUN(test_avg_pool2d_padding_modes);
    RUN(test_adaptive_avg_pool2d);
    RUN(test_upsample_nearest_and_bilinear);
    RUN(test_pool_errors);
    return test_summary();
}
