/* The copy kernel: strided copy with conversion between every pair of dtypes. Float to
 * integer saturates (NaN gives 0); anything to f16/bf16 rounds once to nearest even. */
#include "backends/cpu/cpu_kernels.h"
#include "core/error.h"

/* Converters from a loaded compute value (float, double, int32_t, int64_t or uint8_t) to the
 * destination's storage value. */
static inline uint16_t to_f16_from_f64(double v) { return kn_f64_to_f16(v); }
static inline uint16_t to_bf16_from_f64(double v) { return kn_f64_to_bf16(v); }
static inline uint16_t to_f16_from_int(int64_t v) { return kn_f64_to_f16((double)v); }
static inline uint16_t to_bf16_from_int(int64_t v) { return kn_f64_to_bf16((double)v); }

#define CVT_f32(v) ((float)(v))
#define CVT_f64(v) ((double)(v))
#define CVT_f16(v) _Generic((v), float: kn_half_from_f32_f16, double: to_f16_from_f64, default: to_f16_from_int)(v)
#define CVT_bf16(v) \
    _Generic((v), float: kn_half_from_f32_bf16, double: to_bf16_from_f64, default: to_bf16_from_int)(v)
#define CVT_INT(v, T, SAT) _Generic((v), float: SAT((double)(v)), double: SAT((double)(v)), default: (T)(v))
#define CVT_i32(v) CVT_INT(v, int32_t, kn_attr_int32)
#define CVT_i64(v) CVT_INT(v, int64_t, kn_attr_int64)
#define CVT_b8(v) ((uint8_t)((v) != 0))

#define COPY_INNER(DSUF, DST_ST, SSUF, SDT, SST, SCT, SLOAD, SSTORE)                              \
    static int copy_##SSUF##_to_##DSUF(char *const *p, const int64_t *s, int64_t n, const void *ctx) { \
        DST_ST *restrict o = (DST_ST *)p[0];                                                       \
        const SST *restrict x = (const SST *)p[1];                                                 \
        (void)ctx;                                                                                  \
        if (s[0] == 1 && s[1] == 1)                                                                \
            for (int64_t i = 0; i < n; i++) o[i] = CVT_##DSUF(SLOAD(x[i]));                        \
        else                                                                                       \
            for (int64_t i = 0; i < n; i++) o[i * s[0]] = CVT_##DSUF(SLOAD(x[i * s[1]]));          \
        return 0;                                                                                  \
    }

/* The source dtypes, listed again because a macro list cannot expand inside itself. */
#define SOURCES(X, ...)                                                \
    X(__VA_ARGS__, f32, KN_F32, float, float, KN_LD, KN_ST)            \
    X(__VA_ARGS__, f64, KN_F64, double, double, KN_LD, KN_ST)          \
    X(__VA_ARGS__, f16, KN_F16, uint16_t, float, KN_LD_F16, KN_ST_F16) \
    X(__VA_ARGS__, bf16, KN_BF16, uint16_t, float, KN_LD_BF16, KN_ST_BF16) \
    X(__VA_ARGS__, i32, KN_I32, int32_t, int32_t, KN_LD, KN_ST)        \
    X(__VA_ARGS__, i64, KN_I64, int64_t, int64_t, KN_LD, KN_ST)        \
    X(__VA_ARGS__, b8, KN_BOOL, uint8_t, uint8_t, KN_LD, KN_ST_BOOL)

/* For each destination, one inner loop per source dtype. */
#define COPY_FROM_ALL(unused, DSUF, DDT, DST, DCT, DLOAD, DSTORE) SOURCES(COPY_INNER, DSUF, DST)
KN_DTYPES_CLASS_ALL(COPY_FROM_ALL, ~)

#define SOURCE_CASE(DSUF, SSUF, SDT, SST, SCT, SLOAD, SSTORE) \
    case SDT: return copy_##SSUF##_to_##DSUF;
#define DEST_CASE(unused, DSUF, DDT, DST, DCT, DLOAD, DSTORE) \
    case DDT:                                                 \
        switch (src) { SOURCES(SOURCE_CASE, DSUF) default: return NULL; }

/* A copy within f16 or bf16 moves the bits (a signaling NaN stays signaling, as PyTorch's copy_
 * keeps it; the round trip through f32 that other copies take would quiet it). */
static int copy_bits_16(char *const *p, const int64_t *s, int64_t n, const void *ctx) {
    uint16_t *restrict o = (uint16_t *)p[0];
    const uint16_t *restrict x = (const uint16_t *)p[1];
    (void)ctx;
    for (int64_t i = 0; i < n; i++) o[i * s[0]] = x[i * s[1]];
    return 0;
}

static kn_ew_inner_fn copy_loop(kn_dtype dst, kn_dtype src) {
    if (dst == src && kn_dtype_size(dst) == 2) return copy_bits_16; /* f16, bf16 */
    switch (dst) {
        KN_DTYPES_CLASS_ALL(DEST_CASE, ~)
    default: return NULL;
    }
}

kn_status kn_cpu_copy_into(kn_tensor *dst, kn_tensor *src) {
    kn_ew_inner_fn fn = copy_loop(dst->dtype, src->dtype);
    if (!fn) return kn_error(KN_ERR_INTERNAL, "copy: no loop from %s to %s", kn_dtype_name(src->dtype),
                             kn_dtype_name(dst->dtype));
    kn_ew_run_operands((kn_tensor *[]){dst, src}, 2, fn, NULL);
    return KN_OK;
}

static kn_status copy_kernel(kn_node *n) { return kn_cpu_copy_into(n->out[0], n->in[0]); }

const kn_kernel_reg kn_cpu_kernels_copy[] = {
    {KN_OP_copy, copy_kernel, KN_DTS_ALL},
    {0},
};
