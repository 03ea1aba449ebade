/* Layout ops against references built here from the inputs' values with plain index loops. */
#include <stdlib.h>
#include <string.h>

#include "harness.h"

/* Output index -> input index (false: the element is the fill value). */
typedef bool (*index_map)(const int64_t *o, int64_t *in, const void *ctx);

/* want[o] = x[map(o)] or fill, row-major over out_shape; x given as its row-major values. */
static double *reference(const double *x, kn_shape in_shape, kn_shape out_shape, index_map map, const void *ctx,
                         double fill) {
    int64_t n = kn_shape_numel(out_shape);
    double *want = malloc(sizeof(double) * (size_t)(n ? n : 1));
    int64_t o[KN_MAX_DIMS], in[KN_MAX_DIMS];
    for (int64_t f = 0; f < n; f++) {
        unravel(f, out_shape, o);
        if (!map(o, in, ctx)) {
            want[f] = fill;
            continue;
        }
        int64_t flat = 0;
        for (int d = 0; d < in_shape.n; d++) flat = flat * in_shape.v[d] + in[d];
        want[f] = x[flat];
    }
    return want;
}

/* Inputs of each layout: contiguous, transposed-back copy, and reversed along dim 0. */
enum { LAYOUT_DENSE, LAYOUT_STRIDED, LAYOUT_NEGATIVE, LAYOUT_COUNT };
static kn_tensor *make_input(kn_shape shape, kn_dtype dt, int layout) {
    if (layout == LAYOUT_DENSE) return rand_tensor(shape, dt, -5, 5);
    if (layout == LAYOUT_STRIDED) return non_contiguous_copy(rand_tensor(shape, dt, -5, 5));
    kn_tensor *t = rand_tensor(shape, dt, -5, 5);
    return shape.n ? kn_slice(t, 0, -1, INT64_MIN / 2, -1) : t;
}

static void check_against(kn_tensor *got, kn_tensor *x, kn_shape out_shape, index_map map, const void *ctx, double fill,
                          const char *what, int line) {
    double *xv = read_f64(x);
    double *want = xv ? reference(xv, kn_shape_of(x), out_shape, map, ctx, fill) : NULL;
    if (check_shape(got, out_shape, __FILE__, line) && want)
        check_close_at(got, want, tol_for(kn_dtype_of(x)), what, __FILE__, line);
    free(xv);
    free(want);
}
#define CHECK_AGAINST(got, x, shape, map, ctx, fill, what) check_against(got, x, shape, map, ctx, fill, what, __LINE__)

/* ---- cat / stack ------------------------------------------------------------------------------ */

static void test_cat_matches_reference(void) {
    for (int k = 0; k < KN_DTYPE_COUNT; k++)
        for (int l = 0; l < LAYOUT_COUNT; l++) {
            kn_dtype dt = ALL_DTYPES[k];
            kn_tensor *a = make_input(KN_SHAPE(2, 3, 4), dt, l);
            kn_tensor *b = make_input(KN_SHAPE(2, 5, 4), dt, (l + 1) % LAYOUT_COUNT);
            kn_tensor *e = kn_zeros(KN_SHAPE(2, 0, 4), dt);
            kn_tensor *legacy = kn_zeros(KN_SHAPE(0), dt);
            kn_tensor *parts[] = {a, e, legacy, b, a};
            kn_tensor *got = kn_cat(parts, 5, -2);
            double *av = read_f64(a), *bv = read_f64(b);
            double want[2 * 11 * 4];
            for (int i = 0; i < 2; i++)
                for (int j = 0; j < 11; j++)
                    for (int m = 0; m < 4; m++)
                        want[(i * 11 + j) * 4 + m] = j < 3 ? av[(i * 3 + j) * 4 + m]
                                                     : j < 8 ? bv[(i * 5 + j - 3) * 4 + m]
                                                             : av[(i * 3 + j - 8) * 4 + m];
            if (CHECK_SHAPE(got, KN_SHAPE(2, 11, 4))) CHECK_CLOSE(got, want, tol_for(dt), kn_dtype_name(dt));
            free(av);
            free(bv);
            /* along the last dim too (short contiguous blocks) */
            kn_tensor *pair[] = {a, a};
            kn_tensor *last = kn_cat(pair, 2, 2);
            av = read_f64(a);
            double want2[2 * 3 * 8];
            for (int r = 0; r < 6; r++)
                for (int m = 0; m < 8; m++) want2[r * 8 + m] = av[r * 4 + m % 4];
            if (CHECK_SHAPE(last, KN_SHAPE(2, 3, 8))) CHECK_CLOSE(last, want2, tol_for(dt), "cat last dim");
            free(av);
        }
}

static void test_cat_promotes_and_handles_empties(void) {
    kn_tensor *i = kn_arange(0, 3, 1, KN_I32), *f = kn_full(KN_SHAPE(2), 0.5, KN_F32), *b = kn_ones(KN_SHAPE(1), KN_BOOL);
    kn_tensor *parts[] = {b, i, f};
    kn_tensor *got = kn_cat(parts, 3, 0);
    CHECK(got && kn_dtype_of(got) == KN_F32);
    double want[] = {1, 0, 1, 2, 0.5, 0.5};
    CHECK_CLOSE(got, want, tol_for(KN_F32), "promoted");
    kn_tensor *ib[] = {b, i};
    CHECK(kn_dtype_of(kn_cat(ib, 2, 0)) == KN_I32);
    kn_tensor *empties[] = {kn_zeros(KN_SHAPE(0), KN_F16), kn_zeros(KN_SHAPE(0), KN_F16)};
    CHECK_SHAPE(kn_cat(empties, 2, 0), KN_SHAPE(0));
    kn_tensor *zero_rows[] = {kn_zeros(KN_SHAPE(0, 3), KN_F64), kn_zeros(KN_SHAPE(0, 3), KN_F64)};
    CHECK_SHAPE(kn_cat(zero_rows, 2, 1), KN_SHAPE(0, 6));
}

static void test_cat_errors(void) {
    kn_tensor *a = kn_zeros(KN_SHAPE(2, 3), KN_F32), *b = kn_zeros(KN_SHAPE(3, 3), KN_F32);
    kn_tensor *ab[] = {a, b};
    CHECK_ERROR(kn_cat(ab, 2, 1) != NULL, KN_ERR_SHAPE, "size 3 in dim 0");
    CHECK_ERROR(kn_cat(ab, 2, 2) != NULL, KN_ERR_INDEX, "dim 2 is out of range");
    CHECK_ERROR(kn_cat(ab, 0, 0) != NULL, KN_ERR_ARG, "at least one");
    kn_tensor *c[] = {a, kn_zeros(KN_SHAPE(2, 3, 1), KN_F32)};
    CHECK_ERROR(kn_cat(c, 2, 0) != NULL, KN_ERR_SHAPE, "dims");
    kn_tensor *s[] = {kn_scalar(1, KN_F32)};
    CHECK_ERROR(kn_cat(s, 1, 0) != NULL, KN_ERR_SHAPE, "0-d");
    kn_tensor *nul[] = {a, NULL};
    CHECK_ERROR(kn_cat(nul, 2, 0) != NULL, KN_ERR_NULL, "input 1");
}

static void test_stack_matches_reference(void) {
    for (int k = 0; k < KN_DTYPE_COUNT; k++) {
        kn_dtype dt = ALL_DTYPES[k];
        kn_tensor *x[3];
        double *v[3];
        for (int i = 0; i < 3; i++) x[i] = make_input(KN_SHAPE(2, 4), dt, i), v[i] = read_f64(x[i]);
        for (int dim = 0; dim <= 2; dim++) {
            kn_tensor *got = kn_stack(x, 3, dim - 3 + (dim == 0 ? 3 : 0));
            kn_shape shape = dim == 0 ? KN_SHAPE(3, 2, 4) : dim == 1 ? KN_SHAPE(2, 3, 4) : KN_SHAPE(2, 4, 3);
            double want[24];
            int64_t idx[3];
            for (int f = 0; f < 24; f++) {
                unravel(f, shape, idx);
                int64_t t = idx[dim], r = dim == 0 ? idx[1] : idx[0], c = dim == 2 ? idx[1] : idx[2];
                want[f] = v[t][r * 4 + c];
            }
            if (CHECK_SHAPE(got, shape)) CHECK_CLOSE(got, want, tol_for(dt), "stack");
        }
        for (int i = 0; i < 3; i++) free(v[i]);
    }
    kn_tensor *bad[] = {kn_zeros(KN_SHAPE(2), KN_F32), kn_zeros(KN_SHAPE(3), KN_F32)};
    CHECK_ERROR(kn_stack(bad, 2, 0) != NULL, KN_ERR_SHAPE, "equal shapes");
    CHECK_ERROR(kn_stack(bad, 1, 3) != NULL, KN_ERR_INDEX, "dim 3");
    CHECK_ERROR(kn_stack(bad, 0, 0) != NULL, KN_ERR_ARG, "at least one");
}

/* ---- split / chunk ---------------------------------------------------------------------------- */

static void check_pieces(kn_tensor *x, kn_tensor **out, int n, const int64_t *sizes, int line) {
    double *xv = read_f64(x);
    int64_t start = 0, cols = kn_size(x, 1);
    for (int k = 0; k < n; k++) {
        if (!check_shape(out[k], KN_SHAPE(kn_size(x, 0), sizes[k]), __FILE__, line)) break;
        CHECK(kn_shares_storage(out[k], x));
        double want[64];
        for (int64_t r = 0; r < kn_size(x, 0); r++)
            for (int64_t c = 0; c < sizes[k]; c++) want[r * sizes[k] + c] = xv[r * cols + start + c];
        check_close_at(out[k], want, tol_for(kn_dtype_of(x)), "piece", __FILE__, line);
        start += sizes[k];
    }
    free(xv);
}

static void test_split_and_chunk_are_views(void) {
    for (int k = 0; k < KN_DTYPE_COUNT; k++) {
        kn_tensor *x = make_input(KN_SHAPE(3, 7), ALL_DTYPES[k], k % LAYOUT_COUNT);
        kn_tensor *out[8];
        int n = 0;
        CHECK(kn_split(x, 3, 1, out, 8, &n) == KN_OK && n == 3);
        check_pieces(x, out, n, (int64_t[]){3, 3, 1}, __LINE__);
        CHECK(kn_split_sizes(x, (int64_t[]){2, 0, 5}, 3, -1, out) == KN_OK);
        check_pieces(x, out, 3, (int64_t[]){2, 0, 5}, __LINE__);
        CHECK(kn_chunk(x, 3, 1, out, &n) == KN_OK && n == 3);
        check_pieces(x, out, n, (int64_t[]){3, 3, 1}, __LINE__);
        CHECK(kn_chunk(x, 6, 1, out, &n) == KN_OK && n == 4); /* pieces of 2: fewer than asked */
        check_pieces(x, out, n, (int64_t[]){2, 2, 2, 1}, __LINE__);
    }
    kn_tensor *e = kn_zeros(KN_SHAPE(0, 2), KN_F32), *out[4];
    int n = 0;
    CHECK(kn_chunk(e, 3, 0, out, &n) == KN_OK && n == 3);
    CHECK(kn_split(e, 2, 0, out, 4, &n) == KN_OK && n == 1);
}

static void test_split_errors(void) {
    kn_tensor *x = kn_zeros(KN_SHAPE(4, 6), KN_F32), *out[2];
    int n;
    CHECK_ERROR(kn_split(x, 2, 1, out, 2, &n) == KN_OK, KN_ERR_ARG, "3 pieces");
    CHECK_ERROR(kn_split(x, 0, 1, out, 2, &n) == KN_OK, KN_ERR_ARG, "split_size 0");
    CHECK_ERROR(kn_split(x, 2, 2, out, 2, &n) == KN_OK, KN_ERR_INDEX, "dim 2");
    CHECK_ERROR(kn_split_sizes(x, (int64_t[]){2, 3}, 2, 1, out) == KN_OK, KN_ERR_SHAPE, "add up to 5");
    CHECK_ERROR(kn_split_sizes(x, (int64_t[]){7, -1}, 2, 1, out) == KN_OK, KN_ERR_ARG, "negative");
    CHECK_ERROR(kn_chunk(x, 0, 1, out, &n) == KN_OK, KN_ERR_ARG, "positive");
    CHECK_ERROR(kn_chunk(kn_scalar(1, KN_F32), 2, 0, out, &n) == KN_OK, KN_ERR_SHAPE, "0-d");
    CHECK_ERROR(kn_split(NULL, 2, 0, out, 2, &n) == KN_OK, KN_ERR_NULL, "split");
}

/* ---- pad -------------------------------------------------------------------------------------- */

typedef struct pad_ctx {
    kn_shape in;
    int64_t before[KN_MAX_DIMS];
    kn_pad_mode mode;
} pad_ctx;

static bool pad_map(const int64_t *o, int64_t *in, const void *p) {
    const pad_ctx *c = p;
    for (int d = 0; d < c->in.n; d++) {
        int64_t j = o[d] - c->before[d], n = c->in.v[d];
        if (j < 0 || j >= n) {
            if (c->mode == KN_PAD_CONSTANT) return false;
            if (c->mode == KN_PAD_REPLICATE) j = j < 0 ? 0 : n - 1;
            else j = j < 0 ? -j : 2 * (n - 1) - j;
        }
        in[d] = j;
    }
    return true;
}

static void test_pad_matches_reference(void) {
    const int64_t pads[3][6] = {{2, -1, 0, 3, 1, 1}, {2, 3, 1, 0, 0, 1}, {4, 1, 0, 2, 3, 0}};
    for (int mode = 0; mode < 3; mode++)
        for (int k = 0; k < KN_DTYPE_COUNT; k++)
            for (int l = 0; l < LAYOUT_COUNT; l++) {
                kn_dtype dt = ALL_DTYPES[k];
                kn_tensor *x = make_input(KN_SHAPE(2, 3, 5), dt, l);
                int n_pads = mode == 2 ? 6 : 4;
                kn_tensor *got = kn_pad(x, pads[mode], n_pads, (kn_pad_mode)mode, 1.5);
                pad_ctx c = {.in = KN_SHAPE(2, 3, 5), .mode = (kn_pad_mode)mode};
                kn_shape out = c.in;
                for (int i = 0; i < n_pads / 2; i++) {
                    c.before[2 - i] = pads[mode][2 * i];
                    out.v[2 - i] += pads[mode][2 * i] + pads[mode][2 * i + 1];
                }
                double fill = dt == KN_BOOL ? 1 : kn_dtype_is_int(dt) ? 1 : 1.5;
                CHECK_AGAINST(got, x, out, pad_map, &c, fill, kn_dtype_name(dt));
            }
    /* zero-size and 0-d corners */
    CHECK_SHAPE(kn_pad(kn_zeros(KN_SHAPE(3, 0), KN_F32), (int64_t[]){1, 1}, 2, KN_PAD_CONSTANT, 0), KN_SHAPE(3, 2));
    double seven[] = {7};
    CHECK_CLOSE(kn_pad(kn_scalar(7, KN_I64), NULL, 0, KN_PAD_REFLECT, 0), seven, tol_for(KN_I64), "0-d");
}

static void test_pad_errors(void) {
    kn_tensor *x = kn_zeros(KN_SHAPE(2, 3), KN_F32);
    CHECK_ERROR(kn_pad(x, (int64_t[]){3, 0}, 2, KN_PAD_REFLECT, 0) != NULL, KN_ERR_ARG, "smaller than dim 1");
    CHECK_ERROR(kn_pad(x, (int64_t[]){1}, 1, KN_PAD_CONSTANT, 0) != NULL, KN_ERR_ARG, "even count");
    CHECK_ERROR(kn_pad(x, (int64_t[]){1, 1, 1, 1, 1, 1}, 6, KN_PAD_CONSTANT, 0) != NULL, KN_ERR_ARG, "up to 4");
    CHECK_ERROR(kn_pad(x, (int64_t[]){-2, -2}, 2, KN_PAD_CONSTANT, 0) != NULL, KN_ERR_SHAPE, "negative size");
    CHECK_ERROR(kn_pad(x, (int64_t[]){-1, 0}, 2, KN_PAD_REPLICATE, 0) != NULL, KN_ERR_ARG, "constant mode");
    CHECK_ERROR(kn_pad(kn_zeros(KN_SHAPE(2, 0), KN_F32), (int64_t[]){1, 0}, 2, KN_PAD_REPLICATE, 0) != NULL, KN_ERR_ARG,
                "empty");
    CHECK_ERROR(kn_pad(x, (int64_t[]){1, 0}, 2, (kn_pad_mode)9, 0) != NULL, KN_ERR_ARG, "mode");
}

/* ---- flip / roll / repeat --------------------------------------------------------------------- */

typedef struct shift_ctx {
    kn_shape in;
    int64_t shift[KN_MAX_DIMS];
    bool flip[KN_MAX_DIMS];
} shift_ctx;

static bool shift_map(const int64_t *o, int64_t *in, const void *p) {
    const shift_ctx *c = p;
    for (int d = 0; d < c->in.n; d++) {
        int64_t n = c->in.v[d], j = o[d] % n; /* % n: repeat's tiling */
        j = ((j - c->shift[d]) % n + n) % n;
        in[d] = c->flip[d] ? n - 1 - j : j;
    }
    return true;
}

static void test_flip_roll_repeat_match_reference(void) {
    kn_shape s = KN_SHAPE(3, 4, 5);
    for (int k = 0; k < KN_DTYPE_COUNT; k++)
        for (int l = 0; l < LAYOUT_COUNT; l++) {
            kn_dtype dt = ALL_DTYPES[k];
            kn_tensor *x = make_input(s, dt, l);
            shift_ctx f = {.in = s, .flip = {true, false, true}};
            CHECK_AGAINST(kn_flip(x, KN_DIMS(0, -1)), x, s, shift_map, &f, 0, "flip");
            kn_tensor *flipped = kn_flip(x, KN_DIMS(1));
            CHECK(!kn_shares_storage(flipped, x));
            shift_ctx r = {.in = s, .shift = {-4, 0, 3}};
            CHECK_AGAINST(kn_roll(x, (int64_t[]){3, -4}, KN_DIMS(2, 0)), x, s, shift_map, &r, 0, "roll");
            shift_ctx rep = {.in = s};
            CHECK_AGAINST(kn_repeat(x, KN_SHAPE(2, 1, 3)), x, KN_SHAPE(6, 4, 15), shift_map, &rep, 0, "repeat");
            /* flattened roll: shift 7 over 60 elements */
            kn_tensor *flat = kn_roll(x, (int64_t[]){7}, KN_ALL_DIMS);
            double *xv = read_f64(x), want[60];
            for (int i = 0; i < 60; i++) want[i] = xv[((i - 7) % 60 + 60) % 60];
            if (CHECK_SHAPE(flat, s)) CHECK_CLOSE(flat, want, tol_for(dt), "flattened roll");
            free(xv);
        }
    /* repeat with new leading dims */
    kn_tensor *v = kn_arange(0, 3, 1, KN_I64);
    double want[2 * 2 * 6];
    for (int i = 0; i < 24; i++) want[i] = i % 3;
    kn_tensor *got = kn_repeat(v, KN_SHAPE(2, 2, 2));
    if (CHECK_SHAPE(got, KN_SHAPE(2, 2, 6))) CHECK_CLOSE(got, want, tol_for(KN_I64), "repeat lead");
    CHECK_SHAPE(kn_repeat(v, KN_SHAPE(0, 2)), KN_SHAPE(0, 6));
    CHECK_SHAPE(kn_flip(kn_zeros(KN_SHAPE(0, 3), KN_F32), KN_DIMS(0, 1)), KN_SHAPE(0, 3));
    CHECK_SHAPE(kn_roll(kn_zeros(KN_SHAPE(0, 3), KN_F32), (int64_t[]){1}, KN_DIMS(0)), KN_SHAPE(0, 3));
    CHECK_ERROR(kn_repeat(kn_zeros(KN_SHAPE(2, 2), KN_F32), KN_SHAPE(2)) != NULL, KN_ERR_ARG, "1 repeats");
    CHECK_ERROR(kn_repeat(v, KN_SHAPE(-1)) != NULL, KN_ERR_ARG, "negative");
    CHECK_ERROR(kn_flip(v, KN_DIMS(1)) != NULL, KN_ERR_INDEX, "flip");
    CHECK_ERROR(kn_flip(kn_zeros(KN_SHAPE(2, 2), KN_F32), KN_DIMS(0, -2)) != NULL, KN_ERR_ARG, "twice");
    CHECK_ERROR(kn_roll(v, (int64_t[]){1}, KN_DIMS(1)) != NULL, KN_ERR_INDEX, "dim 1");
    CHECK_ERROR(kn_roll(v, NULL, KN_DIMS(0)) != NULL, KN_ERR_NULL, "shifts");
}

static void test_repeat_interleave_matches_reference(void) {
    for (int k = 0; k < KN_DTYPE_COUNT; k++) {
        kn_dtype dt = ALL_DTYPES[k];
        kn_tensor *x = make_input(KN_SHAPE(2, 3, 2), dt, k % LAYOUT_COUNT);
        double *xv = read_f64(x), want[2 * 9 * 2];
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 9; j++)
                for (int m = 0; m < 2; m++) want[(i * 9 + j) * 2 + m] = xv[(i * 3 + j / 3) * 2 + m];
        kn_tensor *got = kn_repeat_interleave(x, 3, -2);
        if (CHECK_SHAPE(got, KN_SHAPE(2, 9, 2))) CHECK_CLOSE(got, want, tol_for(dt), "repeat_interleave");
        free(xv);
    }
    double five[] = {5, 5, 5};
    CHECK_CLOSE(kn_repeat_interleave(kn_scalar(5, KN_F32), 3, 0), five, tol_for(KN_F32), "0-d");
    CHECK_SHAPE(kn_repeat_interleave(kn_zeros(KN_SHAPE(2, 3), KN_F32), 0, 1), KN_SHAPE(2, 0));
    CHECK_ERROR(kn_repeat_interleave(kn_zeros(KN_SHAPE(2), KN_F32), -1, 0) != NULL, KN_ERR_ARG, "negative");
    CHECK_ERROR(kn_repeat_interleave(kn_zeros(KN_SHAPE(2), KN_F32), 2, 1) != NULL, KN_ERR_INDEX, "dim 1");
}

/* ---- tril / triu ------------------------------------------------------------------------------ */

static bool tri_map(const int64_t *o, int64_t *in, const void *p) {
    const int64_t *k = p; /* k[0] diagonal, k[1] upper */
    for (int d = 0; d < 3; d++) in[d] = o[d];
    int64_t off = o[2] - o[1];
    return k[1] ? off >= k[0] : off <= k[0];
}

static void test_tril_triu_match_reference(void) {
    kn_shape s = KN_SHAPE(2, 4, 5);
    for (int k = 0; k < KN_DTYPE_COUNT; k++)
        for (int l = 0; l < LAYOUT_COUNT; l++) {
            kn_tensor *x = make_input(s, ALL_DTYPES[k], l);
            for (int64_t diag = -5; diag <= 6; diag += 2)
                for (int upper = 0; upper < 2; upper++) {
                    int64_t ctx[2] = {diag, upper};
                    kn_tensor *got = upper ? kn_triu(x, diag) : kn_tril(x, diag);
                    CHECK_AGAINST(got, x, s, tri_map, ctx, 0, upper ? "triu" : "tril");
                }
        }
    CHECK_SHAPE(kn_tril(kn_zeros(KN_SHAPE(3, 0, 2), KN_F32), 0), KN_SHAPE(3, 0, 2));
    CHECK_ERROR(kn_triu(kn_zeros(KN_SHAPE(3), KN_F32), 0) != NULL, KN_ERR_SHAPE, "2 dims");
}

/* ---- one_hot / meshgrid ----------------------------------------------------------------------- */

static void test_one_hot(void) {
    kn_dtype dts[] = {KN_I32, KN_I64};
    for (int k = 0; k < 2; k++) {
        kn_tensor *idx = make_input(KN_SHAPE(3, 4), dts[k], k + 1);
        idx = kn_abs(idx); /* values 0..5 */
        double *v = read_f64(idx), hi = 0;
        for (int i = 0; i < 12; i++) hi = v[i] > hi ? v[i] : hi;
        for (int pass = 0; pass < 2; pass++) {
            int64_t classes = pass ? (int64_t)hi + 1 : 8;
            kn_tensor *got = kn_one_hot(idx, pass ? -1 : 8);
            double *want = calloc((size_t)(12 * classes), sizeof(double));
            for (int i = 0; i < 12; i++) want[i * classes + (int64_t)v[i]] = 1;
            CHECK(got && kn_dtype_of(got) == KN_I64);
            if (CHECK_SHAPE(got, KN_SHAPE(3, 4, classes))) CHECK_CLOSE(got, want, tol_for(KN_I64), "one_hot");
            free(want);
        }
        free(v);
    }
    kn_tensor *bad = kn_arange(-1, 3, 1, KN_I64);
    CHECK_ERROR(kn_one_hot(bad, 5) != NULL, KN_ERR_INDEX, "negative");
    CHECK_ERROR(kn_one_hot(kn_arange(0, 4, 1, KN_I64), 3) != NULL, KN_ERR_INDEX, "out of range for 3 classes");
    CHECK_ERROR(kn_one_hot(kn_zeros(KN_SHAPE(0), KN_I64), -1) != NULL, KN_ERR_ARG, "empty");
    CHECK_ERROR(kn_one_hot(kn_zeros(KN_SHAPE(2), KN_F32), 3) != NULL, KN_ERR_DTYPE, "f32");
    CHECK_ERROR(kn_one_hot(kn_zeros(KN_SHAPE(2), KN_I64), -2) != NULL, KN_ERR_ARG, "num_classes");
    CHECK_SHAPE(kn_one_hot(kn_zeros(KN_SHAPE(0), KN_I64), 4), KN_SHAPE(0, 4));
}

static void test_meshgrid(void) {
    for (int k = 0; k < KN_DTYPE_COUNT; k++)
        for (int xy = 0; xy < 2; xy++) {
            kn_dtype dt = ALL_DTYPES[k];
            kn_tensor *in[3] = {make_input(KN_SHAPE(2), dt, 0), make_input(KN_SHAPE(3), dt, 1),
                                make_input(KN_SHAPE(4), dt, 2)};
            double *v[3];
            for (int i = 0; i < 3; i++) v[i] = read_f64(in[i]);
            kn_tensor *out[3];
            CHECK(kn_meshgrid(in, 3, xy, out) == KN_OK);
            kn_shape s = xy ? KN_SHAPE(3, 2, 4) : KN_SHAPE(2, 3, 4);
            for (int i = 0; i < 3; i++) {
                double want[24];
                int64_t idx[3];
                for (int f = 0; f < 24; f++) {
                    unravel(f, s, idx);
                    int pos = xy && i < 2 ? 1 - i : i;
                    want[f] = v[i][idx[pos]];
                }
                if (CHECK_SHAPE(out[i], s)) CHECK_CLOSE(out[i], want, tol_for(dt), "meshgrid");
                CHECK(kn_shares_storage(out[i], in[i]));
            }
            for (int i = 0; i < 3; i++) free(v[i]);
        }
    kn_tensor *out[2];
    kn_tensor *mixed[] = {kn_zeros(KN_SHAPE(2), KN_F32), kn_zeros(KN_SHAPE(2), KN_I64)};
    CHECK_ERROR(kn_meshgrid(mixed, 2, false, out) == KN_OK, KN_ERR_DTYPE, "i64");
    kn_tensor *two_d[] = {kn_zeros(KN_SHAPE(2, 2), KN_F32)};
    CHECK_ERROR(kn_meshgrid(two_d, 1, false, out) == KN_OK, KN_ERR_SHAPE, "2 dims");
    CHECK_ERROR(kn_meshgrid(mixed, 0, false, out) == KN_OK, KN_ERR_ARG, "0 tensors");
}

int main(void) {
    RUN(test_cat_matches_reference);
    RUN(test_cat_promotes_and_handles_empties);
    RUN(test_cat_errors);
    RUN(test_stack_matches_reference);
    RUN(test_split_and_chunk_are_views);
    RUN(test_split_errors);
    RUN(test_pad_matches_reference);
    RUN(test_pad_errors);
    RUN(test_flip_roll_repeat_match_reference);
    RUN(test_repeat_interleave_matches_reference);
    RUN(test_tril_triu_match_reference);
    RUN(test_one_hot);
    RUN(test_meshgrid);
    return test_summary();
}
