/* Elementwise ops with a C number as one operand, computed as PyTorch computes a tensor with
 * a Python number on the CPU, to the bit. A double is a float operand whatever its value
 * (`x + 2.0`: an integer or bool tensor gives f32); the _int forms take an integer operand
 * (`x + 2`: an integer tensor keeps its dtype, bool gives i64). On a float tensor the number
 * is an attribute of the op (defs/scalar.def), met in the compute type: f32 for f16/bf16
 * (PyTorch's opmath), except where PyTorch rounds it to the tensor's dtype first. */
#include <math.h>

#include "core/error.h"
#include "core/half.h"
#include "kiln/ops.h"
#include "ops/ops_internal.h"

/* v rounded to float dtype d as c10 converts a number to it: f16 and bf16 through f32. */
static double round_to(double v, kn_dtype d) {
    switch (d) {
    case KN_F32: return (float)v;
    case KN_F16: return kn_half_to_f32_f16(kn_half_from_f32_f16((float)v));
    case KN_BF16: return kn_half_to_f32_bf16(kn_half_from_f32_bf16((float)v));
    default: return v;
    }
}

/* An integer number as a float operand next to dtype d: converted once, to f32 (which holds
 * the f16/bf16 compute type) or to f64, as c10 converts an int64_t. */
static double int_as_float(int64_t b, kn_dtype d) { return d == KN_F64 ? (double)b : (double)(float)b; }

/* The tensor a float number computes with: a itself when it is float, else a cast to f32
 * (PyTorch's default dtype). A new reference either way, NULL (error kept) for a NULL a. */
static kn_tensor *as_float(kn_tensor *a, const char *op) {
    if (!a) {
        kn_error_null_input(op, 0);
        return NULL;
    }
    return kn_dtype_is_float(a->dtype) ? kn_retain(a) : kn_cast(a, KN_F32);
}

/* One attribute row on the float tensor x, released here. */
static kn_tensor *row(kn_op_id op, kn_tensor *x, double a) {
    kn_tensor *out = x ? kn_elementwise(op, 1, &x, a, 0) : NULL;
    kn_release(x);
    return out;
}

/* PyTorch's subtraction refuses bool tensors (it is add with alpha -1). */
static bool refuse_bool_sub(kn_tensor *a) {
    if (a && a->dtype == KN_BOOL) {
        kn_error(KN_ERR_DTYPE, "sub_scalar: subtracting from a bool tensor is refused (as in PyTorch); use "
                               "logical_not to invert a mask, or cast it first");
        return true;
    }
    return false;
}

/* ---- add, sub, mul, div ------------------------------------------------------------------------
 * add rounds the number to the tensor's dtype (PyTorch casts the wrapped number to the common
 * dtype); mul and div keep it at f32 for f16/bf16 (their reduced-float scalar paths). sub is
 * add of the negated number, as PyTorch's sub is add with alpha -1 (same bits). */

static kn_tensor *add_float(kn_tensor *a, double b, const char *op) {
    kn_tensor *x = as_float(a, op);
    return x ? row(KN_OP_add_scalar, x, round_to(b, x->dtype)) : NULL;
}

kn_tensor *kn_add_scalar(kn_tensor *a, double b) { return add_float(a, b, "add_scalar"); }
kn_tensor *kn_sub_scalar(kn_tensor *a, double b) { return refuse_bool_sub(a) ? NULL : add_float(a, -b, "sub_scalar"); }
kn_tensor *kn_mul_scalar(kn_tensor *a, double b) { return row(KN_OP_mul_scalar, as_float(a, "mul_scalar"), b); }
kn_tensor *kn_div_scalar(kn_tensor *a, double b) { return row(KN_OP_div_scalar, as_float(a, "div_scalar"), b); }

/* An integer number next to an integer or bool tensor: a 0-d tensor of a's dtype holding b
 * wrapped to it (PyTorch casts the number so: int32 + 2**32 adds 0), or i64 next to bool. */
static kn_tensor *int_operand(kn_tensor *a, int64_t b) {
    if (a->dtype == KN_I32) {
        int32_t v = (int32_t)(uint32_t)(uint64_t)b;
        return kn_from_host(&v, KN_I32, KN_SHAPE0, kn_device_of(a));
    }
    return kn_from_host(&b, KN_I64, KN_SHAPE0, kn_device_of(a));
}

static kn_tensor *with_int(kn_tensor *(*op)(kn_tensor *, kn_tensor *), kn_tensor *a, int64_t b) {
    kn_tensor *s = int_operand(a, b);
    kn_tensor *out = s ? op(a, s) : NULL;
    kn_release(s);
    return out;
}

static kn_tensor *add_int(kn_tensor *a, int64_t b, bool negate, const char *op) {
    if (!a) {
        kn_error_null_input(op, 0);
        return NULL;
    }
    if (kn_dtype_is_float(a->dtype)) return add_float(a, int_as_float(b, a->dtype) * (negate ? -1 : 1), op);
    return with_int(negate ? kn_sub : kn_add, a, b);
}

kn_tensor *kn_add_scalar_int(kn_tensor *a, int64_t b) { return add_int(a, b, false, "add_scalar_int"); }
kn_tensor *kn_sub_scalar_int(kn_tensor *a, int64_t b) {
    return refuse_bool_sub(a) ? NULL : add_int(a, b, true, "sub_scalar_int");
}

kn_tensor *kn_mul_scalar_int(kn_tensor *a, int64_t b) {
    if (!a) {
        kn_error_null_input("mul_scalar_int", 0);
        return NULL;
    }
    if (kn_dtype_is_float(a->dtype)) return kn_mul_scalar(a, int_as_float(b, a->dtype));
    return with_int(kn_mul, a, b);
}

/* ---- pow ---------------------------------------------------------------------------------------
 * As PyTorch's pow_tensor_scalar_kernel: exponents 0.5, -0.5 and -1 are sqrt, rsqrt and
 * reciprocal, and 2, 3 and -2 products (x*x, x*x*x, 1/(x*x)) rounded to the dtype at each
 * step; any other exponent calls pow as its scalar loop does: in f64 for f32 tensors
 * (std::pow(float, double)), in f32 with the exponent rounded to the dtype for f16 and bf16.
 * f16 takes none of the special forms; bf16 tests 2, 3 and -2 on the rounded exponent.
 * Exponent 0 gives 1 and 1 gives x, NaN included. */

static kn_tensor *pow_float(kn_tensor *x, double e) {
    if (!x) return NULL;
    kn_dtype d = x->dtype;
    kn_tensor *out = NULL;
    if (d != KN_F16 && (e == 0.5 || e == -0.5 || e == -1)) {
        out = e == 0.5 ? kn_sqrt(x) : e == -0.5 ? kn_rsqrt(x) : kn_reciprocal(x);
        kn_release(x);
        return out;
    }
    double max = d == KN_F16 ? 65504.0 : d == KN_BF16 ? 3.38953138925153547590e38 : INFINITY;
    if (fabs(e) > max && !isinf(e)) {
        kn_release(x);
        return kn_error_null(KN_ERR_ARG, "pow_scalar: exponent %g does not fit %s, the tensor's dtype, which PyTorch "
                                         "converts it to", e, kn_dtype_name(d));
    }
    double r = d == KN_BF16 ? round_to(e, d) : e;
    if (d != KN_F16 && (r == 2 || r == 3 || r == -2)) {
        kn_tensor *sq = kn_mul(x, x);
        out = r == 2 ? sq : r == 3 ? kn_mul(sq, x) : kn_reciprocal(sq);
        if (out != sq) kn_release(sq);
        kn_release(x);
        return out;
    }
    if (d == KN_F32) {
        kn_tensor *wide = kn_cast(x, KN_F64);
        kn_release(x);
        kn_tensor *p = row(KN_OP_pow_scalar, wide, e);
        out = p ? kn_cast(p, KN_F32) : NULL;
        kn_release(p);
        return out;
    }
    return row(KN_OP_pow_scalar, x, round_to(e, d));
}

kn_tensor *kn_pow_scalar(kn_tensor *a, double b) { return pow_float(as_float(a, "pow_scalar"), b); }

kn_tensor *kn_pow_scalar_int(kn_tensor *a, int64_t b) {
    if (!a) {
        kn_error_null_input("pow_scalar_int", 0);
        return NULL;
    }
    if (kn_dtype_is_float(a->dtype)) return pow_float(kn_retain(a), (double)b);
    if (b < 0)
        return kn_error_null(KN_ERR_ARG, "pow_scalar_int: an integer tensor to the negative power %lld (PyTorch "
                                         "refuses integers to negative integer powers too); cast to float first",
                             (long long)b);
    if (a->dtype == KN_I32 && b > INT32_MAX)
        return kn_error_null(KN_ERR_ARG, "pow_scalar_int: exponent %lld does not fit int32, the tensor's dtype",
                             (long long)b);
    return with_int(kn_pow, a, b);
}

/* ---- lerp ----------------------------------------------------------------------------------- */

kn_tensor *kn_lerp_scalar(kn_tensor *start, kn_tensor *end, double weight) {
    return kn_elementwise(KN_OP_lerp_scalar, 2, (kn_tensor *[]){start, end}, weight, 0);
}
