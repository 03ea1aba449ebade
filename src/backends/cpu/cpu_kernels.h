/* Shared pieces of the CPU kernels: dtype instantiation lists, the elementwise engine, the
 * family registration lists. */
#ifndef KILN_BACKENDS_CPU_CPU_KERNELS_H
#define KILN_BACKENDS_CPU_CPU_KERNELS_H

#include "backends/backend.h"
#include "core/half.h"
#include "core/runtime_impl.h"
#include "ops/scalar_math.h"

/* ---- dtypes: X(suffix, dtype, storage type, compute type, load, store) ------------------- */
#define KN_LD(v) (v)
#define KN_ST(v) (v)
#define KN_LD_F16(v) kn_half_to_f32_f16(v)
#define KN_ST_F16(v) kn_half_from_f32_f16(v)
#define KN_LD_BF16(v) kn_half_to_f32_bf16(v)
#define KN_ST_BF16(v) kn_half_from_f32_bf16(v)
#define KN_ST_BOOL(v) ((uint8_t)((v) != 0))

#define KN_DTYPES_FLOAT(X, ...)                                        \
    X(__VA_ARGS__, f32, KN_F32, float, float, KN_LD, KN_ST)            \
    X(__VA_ARGS__, f64, KN_F64, double, double, KN_LD, KN_ST)          \
    X(__VA_ARGS__, f16, KN_F16, uint16_t, float, KN_LD_F16, KN_ST_F16) \
    X(__VA_ARGS__, bf16, KN_BF16, uint16_t, float, KN_LD_BF16, KN_ST_BF16)
#define KN_DTYPES_INTEGER(X, ...)                                  \
    X(__VA_ARGS__, i32, KN_I32, int32_t, int32_t, KN_LD, KN_ST)    \
    X(__VA_ARGS__, i64, KN_I64, int64_t, int64_t, KN_LD, KN_ST)
#define KN_DTYPES_BOOL(X, ...) X(__VA_ARGS__, b8, KN_BOOL, uint8_t, uint8_t, KN_LD, KN_ST_BOOL)

/* The classes of the .def lists. */
#define KN_DTYPES_CLASS_FLOAT(X, ...) KN_DTYPES_FLOAT(X, __VA_ARGS__)
#define KN_DTYPES_CLASS_NUMERIC(X, ...) KN_DTYPES_FLOAT(X, __VA_ARGS__) KN_DTYPES_INTEGER(X, __VA_ARGS__)
#define KN_DTYPES_CLASS_INT(X, ...) KN_DTYPES_INTEGER(X, __VA_ARGS__) KN_DTYPES_BOOL(X, __VA_ARGS__)
#define KN_DTYPES_CLASS_ALL(X, ...) KN_DTYPES_CLASS_NUMERIC(X, __VA_ARGS__) KN_DTYPES_BOOL(X, __VA_ARGS__)
#define KN_KERNEL_DTS_FLOAT KN_DTS_FLOAT
#define KN_KERNEL_DTS_NUMERIC KN_DTS_NUMERIC
#define KN_KERNEL_DTS_INT (KN_DTS_INT | KN_DT(KN_BOOL))
#define KN_KERNEL_DTS_ALL KN_DTS_ALL

/* Stores a double as element i of a contiguous array of dtype d (floats round to nearest,
 * integers saturate with NaN as 0, bool is v != 0). */
static inline void kn_cpu_store_f64(void *base, kn_dtype d, int64_t i, double v) {
    switch (d) {
    case KN_F32: ((float *)base)[i] = (float)v; break;
    case KN_F64: ((double *)base)[i] = v; break;
    case KN_F16: ((uint16_t *)base)[i] = kn_f64_to_f16(v); break;
    case KN_BF16: ((uint16_t *)base)[i] = kn_f64_to_bf16(v); break;
    case KN_I32: ((int32_t *)base)[i] = kn_attr_int32(v); break;
    case KN_I64: ((int64_t *)base)[i] = kn_attr_int64(v); break;
    default: ((uint8_t *)base)[i] = v != 0; break;
    }
}

/* Attribute conversion to a compute type (integers saturate). */
#define KN_ATTR(CT, v)                                                                          \
    _Generic((CT)0, float: kn_attr_float, double: kn_attr_double, int32_t: kn_attr_int32,    \
             int64_t: kn_attr_int64, uint8_t: kn_attr_bool)(v)

/* ---- the elementwise engine ---------------------------------------------------------------
 * Runs an inner function over out[0] and the node's inputs, which all have out[0]'s shape
 * (broadcast inputs carry stride 0). Dims are coalesced, the flat range is split across
 * threads, and the inner function sees runs of the innermost dim: pointers to each operand's
 * first element and each operand's stride in elements (operand 0 is the output). It returns
 * nonzero to report a domain error. */
#define KN_EW_MAX_OPERANDS (KN_NODE_MAX_IN + 1)
/* ctx: the node's kn_attrs (kn_ew_run), or what the caller of kn_ew_run_operands passes. */
typedef int (*kn_ew_inner_fn)(char *const *ptr, const int64_t *stride, int64_t n, const void *ctx);
/* Returns nonzero if any run reported an error. */
int kn_ew_run(kn_node *n, kn_ew_inner_fn fn);
/* The same over explicit operands (operand 0 written). */
int kn_ew_run_operands(kn_tensor *const *operands, int count, kn_ew_inner_fn fn, const void *ctx);

/* Copies src into dst (same shape, any dtypes and strides) on the calling thread. */
kn_status kn_cpu_copy_into(kn_tensor *dst, kn_tensor *src);

/* ---- families --------------------------------------------------------------------------- */
extern const kn_kernel_reg kn_cpu_kernels_creation[];
extern const kn_kernel_reg kn_cpu_kernels_elementwise[];
extern const kn_kernel_reg kn_cpu_kernels_copy[];
extern const kn_kernel_reg kn_cpu_kernels_reduce[];
extern const kn_kernel_reg kn_cpu_kernels_linalg[];
extern const kn_kernel_reg kn_cpu_kernels_layout[];
extern const kn_kernel_reg kn_cpu_kernels_index[];
extern const kn_kernel_reg kn_cpu_kernels_nn[];
extern const kn_kernel_reg kn_cpu_kernels_loss[];
extern const kn_kernel_reg kn_cpu_kernels_optim[];
extern const kn_kernel_reg kn_cpu_kernels_fused[];
extern const kn_kernel_reg kn_cpu_kernels_custom[];
/* NULL-terminated list of the above, registered at start-up. */
extern const kn_kernel_reg *const kn_cpu_kernel_families[];

#endif
