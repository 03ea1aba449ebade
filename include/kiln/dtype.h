/* Element types, their sizes and names, and the 16-bit float conversions. */
#ifndef KILN_DTYPE_H
#define KILN_DTYPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kiln/api.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum kn_dtype {
    KN_F32 = 0,
    KN_F64,
    KN_F16,
    KN_BF16,
    KN_I32,
    KN_I64,
    KN_BOOL,
    KN_DTYPE_COUNT
} kn_dtype;

/* Sets of dtypes, as bit masks (1u << dtype). */
#define KN_DT(d) (1u << (d))
#define KN_DTS_FLOAT (KN_DT(KN_F32) | KN_DT(KN_F64) | KN_DT(KN_F16) | KN_DT(KN_BF16))
#define KN_DTS_INT (KN_DT(KN_I32) | KN_DT(KN_I64))
#define KN_DTS_NUMERIC (KN_DTS_FLOAT | KN_DTS_INT)
#define KN_DTS_ALL (KN_DTS_NUMERIC | KN_DT(KN_BOOL))

KN_API size_t kn_dtype_size(kn_dtype d);
/* "f32", "bf16", ...; "?" for an invalid value. */
KN_API const char *kn_dtype_name(kn_dtype d);
/* Parse a dtype name ("f32", "float32", "bf16", "int64", "bool", ...); false if unknown. */
KN_API bool kn_dtype_parse(const char *name, kn_dtype *out);
KN_API bool kn_dtype_is_float(kn_dtype d);
KN_API bool kn_dtype_is_int(kn_dtype d);   /* i32, i64 (not bool) */
KN_API bool kn_dtype_valid(kn_dtype d);

/* The dtype two operands promote to (PyTorch's rules: bool < int < float, then width;
 * f16 with bf16 gives f32). */
KN_API kn_dtype kn_promote_types(kn_dtype a, kn_dtype b);

/* IEEE half and bfloat16 conversions, round-to-nearest-even, NaN preserved. */
KN_API uint16_t kn_f32_to_f16(float f);
KN_API float kn_f16_to_f32(uint16_t h);
KN_API uint16_t kn_f32_to_bf16(float f);
KN_API float kn_bf16_to_f32(uint16_t h);
/* Direct from double, rounded once (not through a float). */
KN_API uint16_t kn_f64_to_f16(double d);
KN_API uint16_t kn_f64_to_bf16(double d);

#ifdef __cplusplus
}
#endif
#endif
