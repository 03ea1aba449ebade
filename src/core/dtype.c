/* dtype names, sizes, promotion, and the 16-bit float conversions. */
#include "kiln/dtype.h"

#include <math.h>
#include <string.h>

#include "core/half.h"

static const struct {
    const char *name;
    size_t size;
} dtype_info[KN_DTYPE_COUNT] = {
    [KN_F32] = {"f32", 4}, [KN_F64] = {"f64", 8}, [KN_F16] = {"f16", 2}, [KN_BF16] = {"bf16", 2},
    [KN_I32] = {"i32", 4}, [KN_I64] = {"i64", 8}, [KN_BOOL] = {"bool", 1},
};

bool kn_dtype_valid(kn_dtype d) { return (unsigned)d < KN_DTYPE_COUNT; }
size_t kn_dtype_size(kn_dtype d) { return kn_dtype_valid(d) ? dtype_info[d].size : 0; }
const char *kn_dtype_name(kn_dtype d) { return kn_dtype_valid(d) ? dtype_info[d].name : "?"; }
bool kn_dtype_is_float(kn_dtype d) { return d == KN_F32 || d == KN_F64 || d == KN_F16 || d == KN_BF16; }
bool kn_dtype_is_int(kn_dtype d) { return d == KN_I32 || d == KN_I64; }

bool kn_dtype_parse(const char *name, kn_dtype *out) {
    static const struct {
        const char *alias;
        kn_dtype d;
    } aliases[] = {
        {"f32", KN_F32},     {"float32", KN_F32}, {"float", KN_F32},   {"f64", KN_F64},
        {"float64", KN_F64}, {"double", KN_F64},  {"f16", KN_F16},     {"float16", KN_F16},
        {"half", KN_F16},    {"bf16", KN_BF16},   {"bfloat16", KN_BF16}, {"i32", KN_I32},
        {"int32", KN_I32},   {"int", KN_I32},     {"i64", KN_I64},     {"int64", KN_I64},
        {"long", KN_I64},    {"bool", KN_BOOL},
    };
    if (!name) return false;
    for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++)
        if (strcmp(aliases[i].alias, name) == 0) {
            *out = aliases[i].d;
            return true;
        }
    return false;
}

/* Rank within a category: bool 0; ints 1; floats 2. */
static int category(kn_dtype d) { return d == KN_BOOL ? 0 : kn_dtype_is_int(d) ? 1 : 2; }

kn_dtype kn_promote_types(kn_dtype a, kn_dtype b) {
    if (a == b) return a;
    int ca = category(a), cb = category(b);
    if (ca != cb) return ca > cb ? a : b;
    if (ca == 1) return KN_I64; /* i32 with i64 */
    if ((a == KN_F16 && b == KN_BF16) || (a == KN_BF16 && b == KN_F16)) return KN_F32;
    if (a == KN_F64 || b == KN_F64) return KN_F64;
    return KN_F32; /* a 16-bit float with f32 */
}

/* ---- 16-bit floats: the inline versions in core/half.h, exported ------------------------- */

uint16_t kn_f32_to_bf16(float f) { return kn_half_from_f32_bf16(f); }
float kn_bf16_to_f32(uint16_t h) { return kn_half_to_f32_bf16(h); }
uint16_t kn_f32_to_f16(float f) { return kn_half_from_f32_f16(f); }
float kn_f16_to_f32(uint16_t h) { return kn_half_to_f32_f16(h); }

/* A double rounded to float with round-to-odd: correct input for a second rounding to any
 * narrower format (so double -> 16-bit rounds once, as if direct). */
static float f64_to_f32_round_odd(double d) {
    if (isnan(d) || isinf(d)) return (float)d;
    float f = (float)d;
    if ((double)f == d) return f;
    if (fabs((double)f) > fabs(d)) f = nextafterf(f, 0.0f); /* truncate toward zero */
    uint32_t u;
    memcpy(&u, &f, 4);
    u |= 1u;
    memcpy(&f, &u, 4);
    return f;
}

uint16_t kn_f64_to_f16(double d) { return kn_f32_to_f16(f64_to_f32_round_odd(d)); }
uint16_t kn_f64_to_bf16(double d) { return kn_f32_to_bf16(f64_to_f32_round_odd(d)); }
