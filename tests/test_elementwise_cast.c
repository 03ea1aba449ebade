/* Casts between every pair of the 7 dtypes against conversions written here: round to
 * nearest even for f16/bf16 (exact ties constructed), f16 overflow and subnormals, NaN kept,
 * float to int truncating toward zero with NaN -> 0 and saturation, x != 0 for bool. The
 * results are read as raw bytes and decoded here, not through another cast. */
#include <stdlib.h>
#include <string.h>

#include "harness.h"

/* Rounds v to a float format with `mant` stored mantissa bits and minimum normal exponent
 * emin, ties to even; overflow past max_finite rounds to Inf. */
static double round_format(double v, int mant, int emin, double max_finite) {
    if (isnan(v) || isinf(v) || v == 0) return v;
    int e;
    frexp(fabs(v), &e); /* |v| = f * 2^e, f in [0.5, 1) */
    e -= 1;
    if (e < emin) e = emin;
    double q = ldexp(1.0, e - mant);
    double r = nearbyint(v / q) * q; /* exact: v/q and the product are scalings by 2 */
    double limit = max_finite + ldexp(1.0, (int)floor(log2(max_finite)) - mant) / 2; /* halfway past the max */
    if (fabs(v) >= limit) return copysign(INFINITY, v);
    return r;
}
static double to_f16(double v) { return round_format(v, 10, -14, 65504.0); }
static double to_bf16(double v) { return round_format(v, 7, -126, 0x1.fep127); }

/* The reference conversion of a value of dtype `from` into dtype d; integer to integer wraps
 * as C and PyTorch do. */
static double convert(double v, kn_dtype from, kn_dtype d) {
    if (kn_dtype_is_int(from) && d == KN_I32) return (double)(int32_t)(uint32_t)(uint64_t)(int64_t)v;
    switch (d) {
    case KN_F32: return (float)v;
    case KN_F64: return v;
    case KN_F16: return to_f16(v);
    case KN_BF16: return to_bf16(v);
    case KN_I32: return isnan(v) ? 0 : v >= 2147483647.0 ? 2147483647.0 : v <= -2147483648.0 ? -2147483648.0 : trunc(v);
    case KN_I64: return isnan(v) ? 0 : v >= 0x1p63 ? 0x1p63 /* INT64_MAX read as a double */ : v <= -0x1p63 ? -0x1p63 : trunc(v);
    case KN_BOOL: return v != 0;
    default: return NAN;
    }
}

static double decode_half(uint16_t h, bool bf16) {
    if (bf16) {
        uint32_t u = (uint32_t)h << 16;
        float f;
        memcpy(&f, &u, 4);
        return f;
    }
    int e = (h >> 10) & 31, m = h & 1023;
    double mag = e == 31 ? (m ? NAN : INFINITY) : e == 0 ? ldexp(m, -24) : ldexp(1024 + m, e - 25);
    return h & 0x8000 ? -mag : mag;
}

/* Reads t's values from its raw bytes. int64 values beyond 2^53 lose bits, which the
 * saturation checks allow for. */
static double *raw_values(kn_tensor *t) {
    int64_t n = kn_numel(t);
    kn_dtype d = kn_dtype_of(t);
    size_t es = kn_dtype_size(d);
    unsigned char *buf = malloc(es * (size_t)n);
    double *v = malloc(sizeof(double) * (size_t)n);
    if (kn_to_host(t, buf, es * (size_t)n) != KN_OK) {
        free(buf);
        free(v);
        return NULL;
    }
    for (int64_t i = 0; i < n; i++) {
        unsigned char *p = buf + es * (size_t)i;
        float f; double g; int32_t a; int64_t b; uint16_t h;
        switch (d) {
        case KN_F32: memcpy(&f, p, 4); v[i] = f; break;
        case KN_F64: memcpy(&g, p, 8); v[i] = g; break;
        case KN_F16: memcpy(&h, p, 2); v[i] = decode_half(h, false); break;
        case KN_BF16: memcpy(&h, p, 2); v[i] = decode_half(h, true); break;
        case KN_I32: memcpy(&a, p, 4); v[i] = a; break;
        case KN_I64: memcpy(&b, p, 8); v[i] = (double)b; break;
        default: v[i] = *p; break;
        }
    }
    free(buf);
    return v;
}

/* A source tensor holding `vals` exactly: built from raw bytes in its dtype. */
static kn_tensor *source(const double *vals, int n, kn_dtype d) {
    size_t es = kn_dtype_size(d);
    unsigned char *buf = calloc((size_t)n, es);
    for (int i = 0; i < n; i++) {
        unsigned char *p = buf + es * (size_t)i;
        double v = vals[i];
        float f = (float)v; /* integer casts only for integer sources, whose values fit */
        uint16_t h = 0;
        if (d == KN_F16 || d == KN_BF16) { /* encode: the values given are representable */
            if (d == KN_BF16) {
                uint32_t u;
                memcpy(&u, &f, 4);
                h = (uint16_t)(u >> 16);
            } else {
                h = kn_f32_to_f16(f);
            }
        }
        switch (d) {
        case KN_F32: memcpy(p, &f, 4); break;
        case KN_F64: memcpy(p, &v, 8); break;
        case KN_F16: case KN_BF16: memcpy(p, &h, 2); break;
        case KN_I32: { int32_t a = (int32_t)v; memcpy(p, &a, 4); break; }
        case KN_I64: { int64_t b = (int64_t)v; memcpy(p, &b, 8); break; }
        default: *p = v != 0; break;
        }
    }
    kn_tensor *t = kn_from_host(buf, d, KN_SHAPE(n), KN_CPU);
    free(buf);
    return t;
}

static bool same_value(double g, double w) { return (isnan(g) && isnan(w)) || g == w; }

static void check_cast(const double *vals, int n, kn_dtype from, kn_dtype to, const char *what) {
    kn_tensor *s = source(vals, n, from);
    double *in = raw_values(s);
    /* A cast that overflows to +-inf from finite values (f16's range, ties past the largest
     * finite value) checks those infinities: debug mode would refuse it, so it runs without. */
    bool overflows = false;
    if (in && all_finite(in, n))
        for (int i = 0; i < n; i++) overflows |= !isfinite(convert(in[i], from, to));
    kn_mode saved = overflows ? debug_checks_off() : kn_get_mode();
    kn_tensor *t = kn_cast(s, to);
    CHECK(t && kn_dtype_of(t) == to);
    double *got = raw_values(t);
    for (int i = 0; got && in && i < n; i++) {
        double want = convert(in[i], from, to);
        if (!same_value(got[i], want)) {
            test_fail(__FILE__, __LINE__, "%s: %s %.17g -> %s gave %.17g, expected %.17g", what, kn_dtype_name(from), in[i],
                      kn_dtype_name(to), got[i], want);
            break;
        }
    }
    /* Non-contiguous sources take the strided path. */
    kn_tensor *rev = kn_slice(s, 0, -1, -(int64_t)n - 1, -1);
    double *got_rev = raw_values(kn_cast(rev, to));
    if (overflows) debug_checks_restore(saved);
    for (int i = 0; got && got_rev && i < n; i++)
        CHECK_MSG(same_value(got_rev[i], got[n - 1 - i]), "%s: reversed cast %s -> %s differs at %d", what,
                  kn_dtype_name(from), kn_dtype_name(to), i);
    free(in);
    free(got);
    free(got_rev);
}

static void test_every_pair_of_dtypes(void) {
    for (int a = 0; a < KN_DTYPE_COUNT; a++)
        for (int b = 0; b < KN_DTYPE_COUNT; b++) {
            double v[64];
            rand_fill(v, 48, -300, 300);
            double extra[16] = {0, -0.0, 1, -1, 0.5, -0.5, 2.75, -2.75, 65504, -70000, 1e6, 255.5, 256.5, 1e-5, -3e-6, 7};
            memcpy(v + 48, extra, sizeof extra);
            check_cast(v, 64, ALL_DTYPES[a], ALL_DTYPES[b], "mixed values");
        }
}

static void test_round_to_nearest_even_ties(void) {
    /* Exact halfway points between neighbouring f16 / bf16 values, both parities. */
    double f16_ties[] = {1 + 0x1p-11, 1 + 3 * 0x1p-11, -(1 + 0x1p-11), 2048 + 1, 2048 + 3, 0x1p-25, 3 * 0x1p-25,
                         0x1p-14 + 0x1p-25, 65504 + 16, 65504 + 15.99, 65520, -65520, 0x1p-24, 0x1p-26};
    double bf16_ties[] = {1 + 0x1p-8, 1 + 3 * 0x1p-8, -(1 + 0x1p-8), 256 + 1, 256 + 3, 0x1p-126 * (1 + 0x1p-8),
                          0x1.fep127, 0x1.ffp127 - 0x1p103};
    for (int k = 0; k < 2; k++) {
        kn_dtype from = k ? KN_F64 : KN_F32;
        check_cast(f16_ties, 14, from, KN_F16, "f16 ties");
        check_cast(bf16_ties, 8, from, KN_BF16, "bf16 ties");
    }
    /* The expected values themselves, so a wrong reference cannot hide a wrong kernel. */
    /* Both casts round values up to inf on purpose (65520 in f16; 0x1.ffp127 - 0x1p103, which
     * f32 rounds to 0x1.ffp127, a tie that bf16 rounds up), which debug mode refuses: they run
     * without debug checks. */
    kn_mode saved = debug_checks_off();
    double *g = raw_values(kn_cast(source(f16_ties, 14, KN_F32), KN_F16));
    double *gb = raw_values(kn_cast(source(bf16_ties, 8, KN_F32), KN_BF16));
    debug_checks_restore(saved);
    CHECK(g && g[0] == 1 && g[1] == 1 + 0x1p-9 && g[3] == 2048 && g[4] == 2052 && g[5] == 0 && g[6] == 0x1p-23);
    CHECK(g && isinf(g[8]) && g[9] == 65504 && isinf(g[10]) && g[12] == 0x1p-24 && g[13] == 0);
    CHECK(gb && gb[0] == 1 && gb[1] == 1 + 0x1p-6 && gb[3] == 256 && gb[4] == 260);
    free(g);
    free(gb);
}

static void test_special_values_and_saturation(void) {
    double v[] = {NAN, INFINITY, -INFINITY, 1e10, -1e10, 3e9, -2.9e9, 1e19, -1e19, 2.5, -2.5, -0.9, 0x1p-149, -0.0};
    for (int a = 0; a < 4; a++)
        for (int b = 0; b < KN_DTYPE_COUNT; b++) check_cast(v, 14, FLOAT_DTYPES[a], ALL_DTYPES[b], "specials");
    double *g = raw_values(kn_cast(source(v, 14, KN_F64), KN_I32));
    CHECK(g && g[0] == 0 && g[1] == 2147483647.0 && g[2] == -2147483648.0 && g[9] == 2 && g[10] == -2 && g[11] == 0);
    free(g);
    g = raw_values(kn_cast(source(v, 14, KN_F32), KN_BOOL));
    CHECK(g && g[0] == 1 && g[11] == 1 && g[12] == 1 && g[13] == 0);
    free(g);
    double big[] = {4294967297.0, -4294967297.0, 2147483648.0, 3e12};
    check_cast(big, 4, KN_I64, KN_I32, "i64 -> i32 wraps");
    g = raw_values(kn_cast(source(big, 4, KN_I64), KN_I32));
    CHECK(g && g[0] == 1 && g[1] == -1 && g[2] == -2147483648.0);
    free(g);
    int64_t odd = (1ll << 53) + 1;
    kn_tensor *o = kn_from_host(&odd, KN_I64, KN_SHAPE(1), KN_CPU);
    g = raw_values(kn_cast(o, KN_F64));
    CHECK(g && g[0] == 0x1p53); /* the tie rounds to even */
    free(g);
    CHECK_ERROR(kn_cast(kn_zeros(KN_SHAPE(2), KN_F32), (kn_dtype)99) != NULL, KN_ERR_DTYPE, "dtype");
    CHECK_ERROR(kn_cast(NULL, KN_F32) != NULL, KN_ERR_NULL, "copy");
}

/* Every f16 bit pattern widens exactly and narrows back to itself (NaNs stay NaN); random
 * f32 bit patterns narrow as the reference rounds them. */
static void test_f16_exhaustive(void) {
    uint16_t *h = malloc(sizeof(uint16_t) * 65536), *back = malloc(sizeof(uint16_t) * 65536);
    float *f = malloc(sizeof(float) * 65536);
    for (int i = 0; i < 65536; i++) h[i] = (uint16_t)i;
    kn_tensor *t = kn_from_host(h, KN_F16, KN_SHAPE(65536), KN_CPU);
    kn_tensor *w = kn_cast(t, KN_F32);
    CHECK(kn_to_host(w, f, sizeof(float) * 65536) == KN_OK);
    CHECK(kn_to_host(kn_cast(w, KN_F16), back, sizeof(uint16_t) * 65536) == KN_OK);
    int bad = 0;
    for (int i = 0; i < 65536 && bad < 3; i++) {
        double want = decode_half((uint16_t)i, false);
        bool nan = isnan(want);
        if (!same_value(f[i], want) || (nan ? (back[i] & 0x7e00) != 0x7e00 : back[i] != i)) {
            test_fail(__FILE__, __LINE__, "f16 0x%04x: widened to %a, back 0x%04x", i, (double)f[i], back[i]);
            bad++;
        }
    }
    const int n = 1 << 20;
    double *r = malloc(sizeof(double) * n);
    float *x = malloc(sizeof(float) * n);
    rand_fill(r, n, 0, 4294967296.0);
    for (int i = 0; i < n; i++) {
        uint32_t b = (uint32_t)r[i];
        b = (b & 0x8fffffffu) | ((b & 0x10000000u) ? 0x30000000u : 0x40000000u); /* mostly near f16 range */
        memcpy(&x[i], &b, 4);
    }
    uint16_t *g = malloc(sizeof(uint16_t) * n);
    kn_mode saved = debug_checks_off(); /* about a quarter overflow to inf on purpose; debug mode refuses that */
    CHECK(kn_to_host(kn_cast(kn_from_host(x, KN_F32, KN_SHAPE(n), KN_CPU), KN_F16), g, sizeof(uint16_t) * n) == KN_OK);
    debug_checks_restore(saved);
    for (int i = 0; i < n && bad < 6; i++)
        if (!same_value(decode_half(g[i], false), to_f16(x[i]))) {
            test_fail(__FILE__, __LINE__, "f32 %a -> f16 gave %a, expected %a", (double)x[i], decode_half(g[i], false),
                      to_f16(x[i]));
            bad++;
        }
    free(h), free(back), free(f), free(r), free(x), free(g);
}

/* A copy within f16 or bf16 keeps every bit, signaling NaNs included (the fuzzer found
 * read_into quieting them: 0x7C01 -> 0x7E01), also through a strided view. */
static void test_copy_within_16_bit_dtypes_keeps_the_bits(void) {
    const kn_dtype dts[2] = {KN_F16, KN_BF16};
    const uint16_t bits[2][4] = {{0x7C01, 0xFC01, 0x7E00, 0x3C00}, {0xFF84, 0x7F81, 0x7FC0, 0x3F80}};
    for (int d = 0; d < 2; d++) {
        kn_scope_push();
        kn_tensor *x = kn_from_host(bits[d], dts[d], KN_SHAPE(4), KN_CPU);
        kn_tensor *c = kn_clone(x), *into = kn_zeros(KN_SHAPE(4), dts[d]);
        CHECK(c && into && kn_copy_(into, kn_slice(x, 0, 0, 4, 1)) == KN_OK);
        uint16_t got[4], got_into[4];
        CHECK(kn_to_host(c, got, sizeof got) == KN_OK && kn_to_host(into, got_into, sizeof got_into) == KN_OK);
        for (int i = 0; i < 4; i++)
            CHECK_MSG(got[i] == bits[d][i] && got_into[i] == bits[d][i], "%s bits 0x%04x: clone 0x%04x, copy_ 0x%04x",
                      kn_dtype_name(dts[d]), bits[d][i], got[i], got_into[i]);
        kn_scope_pop();
    }
}

int main(void) {
    RUN(test_f16_exhaustive);
    RUN(test_every_pair_of_dtypes);
    RUN(test_round_to_nearest_even_ties);
    RUN(test_special_values_and_saturation);
    RUN(test_copy_within_16_bit_dtypes_keeps_the_bits);
    return test_summary();
}
