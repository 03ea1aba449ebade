/* Convolutions (conv2d, conv1d, conv_transpose2d, conv2d_backward_weight) against direct
 * float64 loops; each of them through each provider forced by KILN_GEMM (im2col + GEMM, oneDNN)
 * in f32 and bf16, oneDNN against im2col in f32, and the provider counters (conv_onednn.h).
 * oneDNN cases print a skip message in a build without it. */
#define _GNU_SOURCE /* setenv */
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/conv_onednn.h"
#include "harness.h"
#include "ops/nn_backward.h"

/* A sum of K products rounds up to K times in the compute type, so the tolerance grows with
 * the reduction length (K/8, at least the elementwise tolerance). */
static tolerance conv_tol(kn_dtype d, int64_t K) {
    tolerance t = tol_for(d);
    double s = K > 8 ? (double)K / 8 : 1;
    t.rtol *= s, t.atol *= s;
    return t;
}

typedef struct conv_case {
    int64_t N, C, H, W, Cout, KH, KW, g;
    kn_conv_opts o;
} conv_case;

static void ref_conv2d(const conv_case *k, int64_t OH, int64_t OW, const double *x, const double *w, const double *b,
                       double *y) {
    int64_t Cg = k->C / k->g, Coutg = k->Cout / k->g;
    const int64_t *s = k->o.stride, *p = k->o.padding, *d = k->o.dilation;
    for (int64_t n = 0; n < k->N; n++)
        for (int64_t oc = 0; oc < k->Cout; oc++)
            for (int64_t oh = 0; oh < OH; oh++)
                for (int64_t ow = 0; ow < OW; ow++) {
                    double acc = b ? b[oc] : 0;
                    for (int64_t ic = 0; ic < Cg; ic++)
                        for (int64_t kh = 0; kh < k->KH; kh++)
                            for (int64_t kw = 0; kw < k->KW; kw++) {
                                int64_t ih = oh * s[0] - p[0] + kh * d[0], iw = ow * s[1] - p[1] + kw * d[1];
                                if (ih < 0 || ih >= k->H || iw < 0 || iw >= k->W) continue;
                                int64_t c = oc / Coutg * Cg + ic;
                                acc += x[((n * k->C + c) * k->H + ih) * k->W + iw] *
                                       w[((oc * Cg + ic) * k->KH + kh) * k->KW + kw];
                            }
                    y[((n * k->Cout + oc) * OH + oh) * OW + ow] = acc;
                }
}

static void ref_conv_transpose2d(const conv_case *k, int64_t OH, int64_t OW, const double *x, const double *w,
                                 const double *b, double *y) {
    int64_t Cg = k->C / k->g, Coutg = k->Cout / k->g;
    const int64_t *s = k->o.stride, *p = k->o.padding, *d = k->o.dilation;
    for (int64_t e = 0; e < k->N * k->Cout * OH * OW; e++) y[e] = b ? b[e / (OH * OW) % k->Cout] : 0;
    for (int64_t n = 0; n < k->N; n++)
        for (int64_t c = 0; c < k->C; c++)
            for (int64_t ih = 0; ih < k->H; ih++)
                for (int64_t iw = 0; iw < k->W; iw++)
                    for (int64_t oc = 0; oc < Coutg; oc++)
                        for (int64_t kh = 0; kh < k->KH; kh++)
                            for (int64_t kw = 0; kw < k->KW; kw++) {
                                int64_t oh = ih * s[0] - p[0] + kh * d[0], ow = iw * s[1] - p[1] + kw * d[1];
                                if (oh < 0 || oh >= OH || ow < 0 || ow >= OW) continue;
                                int64_t o = c / Cg * Coutg + oc;
                                y[((n * k->Cout + o) * OH + oh) * OW + ow] +=
                                    x[((n * k->C + c) * k->H + ih) * k->W + iw] * w[((c * Coutg + oc) * k->KH + kh) * k->KW + kw];
                            }
}

static const conv_case cases[] = {
    {2, 4, 7, 6, 6, 3, 3, 1, {.stride = {1, 1}, .padding = {1, 1}, .dilation = {1, 1}, .groups = 1}},
    {2, 4, 9, 8, 6, 3, 2, 2, {.stride = {2, 1}, .padding = {1, 0}, .dilation = {1, 2}, .groups = 2}},
    {1, 6, 5, 5, 3, 1, 1, 3, {.stride = {1, 1}, .dilation = {1, 1}, .groups = 3}}, /* 1x1, grouped */
    {3, 5, 4, 6, 4, 1, 1, 1, {.stride = {1, 1}, .dilation = {1, 1}, .groups = 1}}, /* 1x1: no im2col */
    {2, 2, 8, 7, 4, 3, 3, 2, {.stride = {3, 2}, .padding = {2, 1}, .dilation = {2, 1}, .groups = 2}},
};

static void test_conv2d_matches_direct_loops(void) {
    for (size_t ci = 0; ci < sizeof cases / sizeof *cases; ci++)
        for (int k = 0; k < 4; k++) {
            const conv_case *c = &cases[ci];
            kn_dtype dt = FLOAT_DTYPES[k];
            kn_tensor *x = rand_tensor(KN_SHAPE(c->N, c->C, c->H, c->W), dt, -1, 1);
            kn_tensor *w = rand_tensor(KN_SHAPE(c->Cout, c->C / c->g, c->KH, c->KW), dt, -1, 1);
            kn_tensor *b = rand_tensor(KN_SHAPE(c->Cout), dt, -1, 1);
            kn_tensor *y = kn_conv2d(non_contiguous_copy(x), w, ci % 2 ? NULL : b, c->o);
            CHECK(y != NULL);
            if (!y) continue;
            int64_t OH = kn_size(y, 2), OW = kn_size(y, 3);
            int64_t eh = c->o.dilation[0] * (c->KH - 1) + 1, ew = c->o.dilation[1] * (c->KW - 1) + 1;
            CHECK(OH == (c->H + 2 * c->o.padding[0] - eh) / c->o.stride[0] + 1);
            CHECK(OW == (c->W + 2 * c->o.padding[1] - ew) / c->o.stride[1] + 1);
            double *xv = read_f64(x), *wv = read_f64(w), *bv = read_f64(b);
            double *want = malloc(sizeof(double) * (size_t)kn_numel(y));
            ref_conv2d(c, OH, OW, xv, wv, ci % 2 ? NULL : bv, want);
            char what[64];
            snprintf(what, sizeof what, "case %zu %s", ci, kn_dtype_name(dt));
            CHECK_CLOSE(y, want, conv_tol(dt, c->C / c->g * c->KH * c->KW), what);
            free(xv), free(wv), free(bv), free(want);
        }
}

static void test_conv1d_matches_direct_loops(void) {
    for (int k = 0; k < 4; k++) {
        kn_dtype dt = FLOAT_DTYPES[k];
        kn_tensor *x = rand_tensor(KN_SHAPE(2, 4, 11), dt, -1, 1), *w = rand_tensor(KN_SHAPE(6, 2, 3), dt, -1, 1);
        kn_tensor *b = rand_tensor(KN_SHAPE(6), dt, -1, 1);
        kn_conv_opts o = {.stride = {2}, .padding = {2}, .dilation = {2}, .groups = 2};
        kn_tensor *y = kn_conv1d(x, w, b, o);
        CHECK_SHAPE(y, KN_SHAPE(2, 6, 6));
        conv_case c = {2, 4, 1, 11, 6, 1, 3, 2, {.stride = {1, 2}, .padding = {0, 2}, .dilation = {1, 2}, .groups = 2}};
        double *xv = read_f64(x), *wv = read_f64(w), *bv = read_f64(b), want[72];
        ref_conv2d(&c, 1, 6, xv, wv, bv, want);
        CHECK_CLOSE(y, want, conv_tol(dt, 6), kn_dtype_name(dt));
        free(xv), free(wv), free(bv);
    }
}

static void test_conv_transpose2d_matches_scatter_loops(void) {
    static const conv_case tcases[] = {
        {2, 4, 5, 4, 6, 3, 3, 2, {.stride = {2, 2}, .padding = {1, 0}, .dilation = {1, 1}, .output_padding = {1, 0}, .groups = 2}},
        {1, 3, 4, 6, 2, 2, 3, 1, {.stride = {1, 3}, .padding = {0, 1}, .dilation = {2, 1}, .output_padding = {1, 2}, .groups = 1}},
    };
    for (size_t ci = 0; ci < 2; ci++)
        for (int k = 0; k < 4; k++) {
            const conv_case *c = &tcases[ci];
            kn_dtype dt = FLOAT_DTYPES[k];
            kn_tensor *x = rand_tensor(KN_SHAPE(c->N, c->C, c->H, c->W), dt, -1, 1);
            kn_tensor *w = rand_tensor(KN_SHAPE(c->C, c->Cout / c->g, c->KH, c->KW), dt, -1, 1);
            kn_tensor *b = rand_tensor(KN_SHAPE(c->Cout), dt, -1, 1);
            kn_tensor *y = kn_conv_transpose2d(x, non_contiguous_copy(w), b, c->o);
            CHECK(y != NULL);
            if (!y) continue;
            int64_t OH = (c->H - 1) * c->o.stride[0] - 2 * c->o.padding[0] + c->o.dilation[0] * (c->KH - 1) +
                         c->o.output_padding[0] + 1;
            int64_t OW = (c->W - 1) * c->o.stride[1] - 2 * c->o.padding[1] + c->o.dilation[1] * (c->KW - 1) +
                         c->o.output_padding[1] + 1;
            CHECK_SHAPE(y, KN_SHAPE(c->N, c->Cout, OH, OW));
            double *xv = read_f64(x), *wv = read_f64(w), *bv = read_f64(b);
            double *want = malloc(sizeof(double) * (size_t)kn_numel(y));
            ref_conv_transpose2d(c, OH, OW, xv, wv, bv, want);
            CHECK_CLOSE(y, want, conv_tol(dt, c->C / c->g * c->KH * c->KW), kn_dtype_name(dt));
            free(xv), free(wv), free(bv), free(want);
        }
}

static void test_conv_errors(void) {
    kn_tensor *x = kn_zeros(KN_SHAPE(1, 4, 5, 5), KN_F32), *w = kn_zeros(KN_SHAPE(6, 4, 3, 3), KN_F32);
    kn_conv_opts none = {0};
    CHECK_ERROR(kn_conv2d(x, kn_zeros(KN_SHAPE(6, 3, 3, 3), KN_F32), NULL, none) != NULL, KN_ERR_SHAPE,
                "weight expects 3 input channels, x has 4");
    CHECK_ERROR(kn_conv2d(x, kn_zeros(KN_SHAPE(6, 4, 3, 3), KN_F32), NULL, (kn_conv_opts){.groups = 3}) != NULL,
                KN_ERR_ARG, "groups (3) must divide");
    CHECK_ERROR(kn_conv2d(x, kn_zeros(KN_SHAPE(6, 4, 7, 3), KN_F32), NULL, none) != NULL, KN_ERR_SHAPE,
                "larger than the padded input");
    CHECK_ERROR(kn_conv2d(kn_zeros(KN_SHAPE(4, 5, 5), KN_F32), w, NULL, none) != NULL, KN_ERR_SHAPE, "4-d");
    CHECK_ERROR(kn_conv2d(x, w, kn_zeros(KN_SHAPE(4), KN_F32), none) != NULL, KN_ERR_SHAPE, "bias must be [6]");
    CHECK_ERROR(kn_conv2d(x, NULL, NULL, none) != NULL, KN_ERR_NULL, "conv2d");
    CHECK_ERROR(kn_conv2d(x, w, NULL, (kn_conv_opts){.stride = {-1, 1}}) != NULL, KN_ERR_ARG, "positive");
    CHECK_ERROR(kn_conv1d(x, w, NULL, none) != NULL, KN_ERR_SHAPE, "3-d");
    CHECK_ERROR(kn_conv_transpose2d(x, kn_zeros(KN_SHAPE(3, 2, 3, 3), KN_F32), NULL, none) != NULL, KN_ERR_SHAPE,
                "input channels");
    CHECK_ERROR(kn_conv_transpose2d(x, kn_zeros(KN_SHAPE(4, 2, 3, 3), KN_F32), NULL,
                                    (kn_conv_opts){.output_padding = {1, 0}}) != NULL,
                KN_ERR_ARG, "output_padding");
    CHECK_ERROR(kn_conv_transpose2d(kn_zeros(KN_SHAPE(1, 4, 1, 1), KN_F32), kn_zeros(KN_SHAPE(4, 2, 1, 1), KN_F32),
                                    NULL, (kn_conv_opts){.padding = {1, 1}}) != NULL,
                KN_ERR_SHAPE, "not positive");
}

/* conv2d_backward_weight: dw[oc, ic, kh, kw] = sum over (n, oh, ow) of gy at the output
 * times the input element that tap reads. The last case is big enough for several threads. */
static void ref_conv2d_weight_grad(const conv_case *k, int64_t OH, int64_t OW, const double *x, const double *gy,
                                   double *dw) {
    int64_t Cg = k->C / k->g, Coutg = k->Cout / k->g;
    const int64_t *s = k->o.stride, *p = k->o.padding, *d = k->o.dilation;
    for (int64_t oc = 0; oc < k->Cout; oc++)
        for (int64_t ic = 0; ic < Cg; ic++)
            for (int64_t kh = 0; kh < k->KH; kh++)
                for (int64_t kw = 0; kw < k->KW; kw++) {
                    double acc = 0;
                    for (int64_t n = 0; n < k->N; n++)
                        for (int64_t oh = 0; oh < OH; oh++)
                            for (int64_t ow = 0; ow < OW; ow++) {
                                int64_t ih = oh * s[0] - p[0] + kh * d[0], iw = ow * s[1] - p[1] + kw * d[1];
                                if (ih < 0 || ih >= k->H || iw < 0 || iw >= k->W) continue;
                                acc += gy[((n * k->Cout + oc) * OH + oh) * OW + ow] *
                                       x[((n * k->C + oc / Coutg * Cg + ic) * k->H + ih) * k->W + iw];
                            }
                    dw[((oc * Cg + ic) * k->KH + kh) * k->KW + kw] = acc;
                }
}

static void test_conv2d_backward_weight_matches_loops(void) {
    conv_case big = {8, 16, 12, 12, 16, 3, 3, 2, {.stride = {1, 1}, .padding = {1, 1}, .dilation = {1, 1}, .groups = 2}};
    for (size_t ci = 0; ci <= sizeof cases / sizeof *cases; ci++)
        for (int k = 0; k < 4; k++) {
            const conv_case *c = ci < sizeof cases / sizeof *cases ? &cases[ci] : &big;
            kn_dtype dt = FLOAT_DTYPES[k];
            int64_t eh = c->o.dilation[0] * (c->KH - 1) + 1, ew = c->o.dilation[1] * (c->KW - 1) + 1;
            int64_t OH = (c->H + 2 * c->o.padding[0] - eh) / c->o.stride[0] + 1;
            int64_t OW = (c->W + 2 * c->o.padding[1] - ew) / c->o.stride[1] + 1;
            kn_tensor *x = rand_tensor(KN_SHAPE(c->N, c->C, c->H, c->W), dt, -1, 1);
            kn_tensor *gy = rand_tensor(KN_SHAPE(c->N, c->Cout, OH, OW), dt, -1, 1);
            kn_tensor *dw = kn_conv2d_backward_weight(non_contiguous_copy(gy), x, c->KH, c->KW, c->o.stride,
                                                      c->o.padding, c->o.dilation, c->g);
            CHECK(dw && kn_dtype_of(dw) == dt);
            if (!dw) continue;
            CHECK_SHAPE(dw, KN_SHAPE(c->Cout, c->C / c->g, c->KH, c->KW));
            double *xv = read_f64(x), *gv = read_f64(gy), *want = malloc(sizeof(double) * (size_t)kn_numel(dw));
            ref_conv2d_weight_grad(c, OH, OW, xv, gv, want);
            char what[64];
            snprintf(what, sizeof what, "case %zu %s", ci, kn_dtype_name(dt));
            CHECK_CLOSE(dw, want, conv_tol(dt, c->N * OH * OW), what);
            free(xv), free(gv), free(want);
        }
}


/* Forces a provider (NULL: none) for the convolutions queued from now on. */
static void force(const char *name) {
    kn_sync();
    if (name) setenv("KILN_GEMM", name, 1);
    else unsetenv("KILN_GEMM");
    kn_gemm_reload();
}

static int64_t selected(kn_gemm_provider p, kn_dtype dt) {
    kn_gemm_counts c;
    kn_conv_counts_get(&c);
    return c.selected[p][dt];
}

static int64_t fallbacks(kn_dtype dt) {
    kn_gemm_counts c;
    kn_conv_counts_get(&c);
    return c.fallbacks[dt];
}

enum { OP_CONV, OP_TRANSPOSED, OP_WEIGHT_GRAD, OP_COUNT };
static const char *const op_names[OP_COUNT] = {"conv2d", "conv_transpose2d", "conv2d_backward_weight"};

/* One op of case c on random inputs of dtype dt: the op's result (inputs kept in in[]) and the
 * float64 reference in *want. */
typedef struct op_run {
    kn_tensor *in[3];
    double *want;
} op_run;

static kn_conv_opts transposed_opts(const conv_case *c) {
    kn_conv_opts o = c->o;
    o.output_padding[0] = o.stride[0] > 1; /* below the stride, as conv_transpose2d requires */
    return o;
}

static op_run make_run(int op, const conv_case *c, kn_dtype dt) {
    op_run r = {{NULL}, NULL};
    int64_t eh = c->o.dilation[0] * (c->KH - 1) + 1, ew = c->o.dilation[1] * (c->KW - 1) + 1;
    int64_t OH = (c->H + 2 * c->o.padding[0] - eh) / c->o.stride[0] + 1;
    int64_t OW = (c->W + 2 * c->o.padding[1] - ew) / c->o.stride[1] + 1;
    if (op == OP_TRANSPOSED) {
        kn_conv_opts o = transposed_opts(c);
        OH = (c->H - 1) * o.stride[0] - 2 * o.padding[0] + eh + o.output_padding[0];
        OW = (c->W - 1) * o.stride[1] - 2 * o.padding[1] + ew;
    }
    r.in[0] = rand_tensor(KN_SHAPE(c->N, c->C, c->H, c->W), dt, -1, 1);
    r.in[1] = op == OP_WEIGHT_GRAD ? rand_tensor(KN_SHAPE(c->N, c->Cout, OH, OW), dt, -1, 1)
              : op == OP_CONV      ? rand_tensor(KN_SHAPE(c->Cout, c->C / c->g, c->KH, c->KW), dt, -1, 1)
                                   : rand_tensor(KN_SHAPE(c->C, c->Cout / c->g, c->KH, c->KW), dt, -1, 1);
    r.in[2] = rand_tensor(KN_SHAPE(c->Cout), dt, -1, 1);
    double *x = read_f64(r.in[0]), *w = read_f64(r.in[1]), *b = read_f64(r.in[2]);
    int64_t n = op == OP_WEIGHT_GRAD ? c->Cout * (c->C / c->g) * c->KH * c->KW : c->N * c->Cout * OH * OW;
    r.want = malloc(sizeof(double) * (size_t)n);
    if (op == OP_CONV) ref_conv2d(c, OH, OW, x, w, b, r.want);
    else if (op == OP_WEIGHT_GRAD) ref_conv2d_weight_grad(c, OH, OW, x, w, r.want);
    else {
        conv_case t = *c;
        t.o = transposed_opts(c);
        ref_conv_transpose2d(&t, OH, OW, x, w, b, r.want);
    }
    free(x), free(w), free(b);
    return r;
}

/* The op on the forced provider: its values as doubles (NULL on failure), their count in *n. */
static double *run_on(int op, const conv_case *c, const op_run *r, const char *provider, int64_t *n) {
    force(provider);
    kn_tensor *y = op == OP_CONV         ? kn_conv2d(r->in[0], r->in[1], r->in[2], c->o)
                   : op == OP_TRANSPOSED ? kn_conv_transpose2d(r->in[0], r->in[1], r->in[2], transposed_opts(c))
                                         : kn_conv2d_backward_weight(r->in[1], r->in[0], c->KH, c->KW, c->o.stride,
                                                                     c->o.padding, c->o.dilation, c->g);
    CHECK(y != NULL);
    double *v = y ? read_f64(y) : NULL;
    *n = y ? kn_numel(y) : 0;
    force(NULL);
    return v;
}

/* Odd shapes: five images over uneven chunks (with 3 threads) at 256 output positions, batch 1
 * with stride, dilation and groups, 1x1, a stride that leaves input rows unread (oneDNN may
 * turn it down: the op then runs on im2col), padding wider than the kernel reach. */
static const conv_case provider_cases[] = {
    {5, 16, 16, 16, 16, 3, 3, 1, {.stride = {1, 1}, .padding = {1, 1}, .dilation = {1, 1}, .groups = 1}},
    {1, 6, 11, 9, 8, 3, 2, 2, {.stride = {2, 1}, .padding = {1, 0}, .dilation = {1, 2}, .groups = 2}},
    {3, 8, 10, 10, 4, 1, 1, 1, {.stride = {1, 1}, .dilation = {1, 1}, .groups = 1}},
    {2, 4, 8, 8, 4, 1, 1, 1, {.stride = {3, 3}, .dilation = {1, 1}, .groups = 1}},
    {2, 4, 9, 8, 6, 3, 3, 2, {.stride = {2, 2}, .padding = {2, 1}, .dilation = {1, 1}, .groups = 2}},
};

static bool have_onednn(int op, kn_dtype dt) {
    if (kn_conv_onednn_has((kn_conv_kind)op, dt)) return true;
    printf("  skip %s on onednn in %s: oneDNN is not built in or lacks it\n", op_names[op], kn_dtype_name(dt));
    return false;
}

/* Each op through each provider in f32 and bf16 against the float64 reference; the counters
 * show that the forced provider ran (or that oneDNN turned the geometry down). */
static void test_conv_providers_match_loops(void) {
    int threads = kn_get_num_threads();
    kn_set_num_threads(3);
    static const char *const providers[] = {"openblas", "ref", "onednn"};
    static const kn_dtype dts[] = {KN_F32, KN_BF16};
    for (size_t ci = 0; ci < sizeof provider_cases / sizeof *provider_cases; ci++)
        for (int op = 0; op < OP_COUNT; op++)
            for (int d = 0; d < 2; d++)
                for (int p = 0; p < 3; p++) {
                    const conv_case *c = &provider_cases[ci];
                    kn_dtype dt = dts[d];
                    if (p == 2 && !have_onednn(op, dt)) continue;
                    kn_scope_push();
                    op_run r = make_run(op, c, dt);
                    int64_t dnnl = selected(KN_GEMM_ONEDNN, dt), blas = selected(KN_GEMM_OPENBLAS, dt);
                    int64_t fell = fallbacks(dt);
                    int64_t n;
                    double *got = run_on(op, c, &r, providers[p], &n);
                    bool turned_down = fallbacks(dt) == fell + 1;
                    bool on_dnnl = selected(KN_GEMM_ONEDNN, dt) == dnnl + 1 && !turned_down;
                    bool on_blas = selected(KN_GEMM_OPENBLAS, dt) == blas + 1;
                    char what[96];
                    snprintf(what, sizeof what, "case %zu %s %s on %s", ci, op_names[op], kn_dtype_name(dt), providers[p]);
                    CHECK_MSG(p == 2 ? on_dnnl || turned_down : on_blas, "%s: the counters show another provider", what);
                    tolerance tol = conv_tol(dt, op == OP_WEIGHT_GRAD ? c->N * c->H * c->W : c->C / c->g * c->KH * c->KW);
                    for (int64_t i = 0; got && i < n; i++)
                        if (fabs(got[i] - r.want[i]) > tol.atol + tol.rtol * fabs(r.want[i])) {
                            CHECK_MSG(false, "%s: [%lld] %.9g, want %.9g", what, (long long)i, got[i], r.want[i]);
                            break;
                        }
                    free(got), free(r.want);
                    kn_scope_pop();
                }
    kn_set_num_threads(threads);
}

/* oneDNN and im2col agree in f32 within 1e-5 relative to the results' size. */
static void test_conv_onednn_matches_im2col_f32(void) {
    int threads = kn_get_num_threads();
    kn_set_num_threads(3);
    for (size_t ci = 0; ci < sizeof provider_cases / sizeof *provider_cases; ci++)
        for (int op = 0; op < OP_COUNT; op++) {
            if (!have_onednn(op, KN_F32)) continue;
            const conv_case *c = &provider_cases[ci];
            kn_scope_push();
            op_run r = make_run(op, c, KN_F32);
            int64_t n, m;
            double *blas = run_on(op, c, &r, "openblas", &n), *dnnl = run_on(op, c, &r, "onednn", &m);
            CHECK(n == m);
            double scale = 1e-30;
            for (int64_t i = 0; blas && i < n; i++) scale = fabs(blas[i]) > scale ? fabs(blas[i]) : scale;
            for (int64_t i = 0; blas && dnnl && i < n; i++)
                if (fabs(dnnl[i] - blas[i]) > 1e-5 * scale) {
                    CHECK_MSG(false, "case %zu %s: onednn %.9g, im2col %.9g at %lld", ci, op_names[op], dnnl[i], blas[i],
                              (long long)i);
                    break;
                }
            free(blas), free(dnnl), free(r.want);
            kn_scope_pop();
        }
    kn_set_num_threads(threads);
}

/* The defaults and the forcing variable's edges: f16 and f64 stay on im2col, forced onednn
 * counts a fallback for them; a large f32 or bf16 convolution defaults to oneDNN, a 4x4 one
 * to im2col, and so does an f32 one of fewer images than threads; an unknown KILN_GEMM fails
 * the op naming the value and the choices. */
static void test_conv_provider_selection(void) {
    int threads = kn_get_num_threads();
    kn_set_num_threads(3);
    kn_scope_push();
    const conv_case big = provider_cases[0];
    const conv_case small = {2, 8, 4, 4, 8, 3, 3, 1, {.stride = {1, 1}, .padding = {1, 1}, .dilation = {1, 1}, .groups = 1}};
    const kn_dtype dts[] = {KN_F16, KN_F64, KN_F32, KN_BF16};
    for (int d = 0; d < 4; d++) {
        kn_dtype dt = dts[d];
        op_run r = make_run(OP_CONV, &big, dt);
        int64_t fell = fallbacks(dt), blas = selected(KN_GEMM_OPENBLAS, dt), dnnl = selected(KN_GEMM_ONEDNN, dt);
        int64_t n;
        double *v = run_on(OP_CONV, &big, &r, "onednn", &n);
        bool has = kn_conv_onednn_has(KN_CONV_FORWARD, dt);
        CHECK_MSG(has || (fallbacks(dt) == fell + 1 && selected(KN_GEMM_OPENBLAS, dt) == blas + 1),
                  "forced onednn without %s: no fallback counted", kn_dtype_name(dt));
        free(v);
        dnnl = selected(KN_GEMM_ONEDNN, dt);
        v = run_on(OP_CONV, &big, &r, NULL, &n);
        CHECK_MSG(selected(KN_GEMM_ONEDNN, dt) == dnnl + (has ? 1 : 0), "%s: default for 16x16 images", kn_dtype_name(dt));
        free(v), free(r.want);
        r = make_run(OP_CONV, &small, dt);
        blas = selected(KN_GEMM_OPENBLAS, dt);
        v = run_on(OP_CONV, &small, &r, NULL, &n);
        CHECK_MSG(selected(KN_GEMM_OPENBLAS, dt) == blas + 1, "%s: default for 4x4 images", kn_dtype_name(dt));
        free(v), free(r.want);
    }
    conv_case one = provider_cases[0];
    one.N = 2; /* fewer images than the 3 threads */
    for (int d = 2; d < 4; d++) {
        kn_dtype dt = dts[d];
        op_run r = make_run(OP_CONV, &one, dt);
        int64_t n, dnnl = selected(KN_GEMM_ONEDNN, dt);
        free(run_on(OP_CONV, &one, &r, NULL, &n));
        bool want = dt == KN_BF16 && kn_conv_onednn_has(KN_CONV_FORWARD, dt);
        CHECK_MSG(selected(KN_GEMM_ONEDNN, dt) == dnnl + want, "%s: default for 2 images on 3 threads", kn_dtype_name(dt));
        free(r.want);
    }
    op_run r = make_run(OP_CONV, &small, KN_F32);
    force("blis");
    kn_tensor *y = kn_conv2d(r.in[0], r.in[1], r.in[2], small.o);
    kn_status st = y ? kn_sync() : kn_last_status();
    CHECK_MSG(st == KN_ERR_ARG && strstr(kn_last_error(), "KILN_GEMM=blis") &&
                  strstr(kn_last_error(), "openblas, onednn or ref"),
              "unknown KILN_GEMM: status %d, %s", (int)st, kn_last_error());
    kn_clear_error();
    force(NULL);
    free(r.want);
    kn_scope_pop();
    kn_set_num_threads(threads);
}

int main(void) {
    RUN(test_conv2d_matches_direct_loops);
    RUN(test_conv1d_matches_direct_loops);
    RUN(test_conv_transpose2d_matches_scatter_loops);
    RUN(test_conv_errors);
    RUN(test_conv2d_backward_weight_matches_loops);
    RUN(test_conv_providers_match_loops);
    RUN(test_conv_onednn_matches_im2col_f32);
    RUN(test_conv_provider_selection);
    return test_summary();
}
