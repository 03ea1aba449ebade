/* Introspection of the op table, for tools such as `kiln ops`. */
#ifndef KILN_OPTABLE_H
#define KILN_OPTABLE_H

#include <stdint.h>

#include "kiln/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kn_op_info {
    const char *name;
    const char *kind;       /* "elementwise", "reduction", "opaque", "creation" */
    const char *expr;       /* the scalar expression of an elementwise op, else NULL */
    uint32_t accepted;      /* input dtypes the op takes (KN_DT masks) */
} kn_op_info;

KN_API int kn_op_count(void);
/* False if index is out of range. */
KN_API bool kn_op_get_info(int index, kn_op_info *out);
/* Dtypes (KN_DT mask) for which `device`'s backend has a kernel for op `index`; 0 if none. */
KN_API uint32_t kn_op_kernel_dtypes(int index, kn_device_type device);

/* The op's signature as its table entry declares it: inputs in order, then named, typed
 * attributes (docs/adding-ops.md). */
typedef struct kn_op_param_info {
    const char *name;
    const char *type; /* inputs: "tensor"; attributes: "i64", "f64", "bool", "dims", "i64[2]", "custom" */
    bool input;       /* an input (else an attribute) */
    bool optional;    /* an input that may be absent */
    bool variadic;    /* any number of inputs, from here on */
} kn_op_param_info;

/* Inputs plus attributes of op `index`; 0 if index is out of range. */
KN_API int kn_op_param_count(int index);
/* Parameter k of op `index`; false if either is out of range. */
KN_API bool kn_op_get_param(int index, int k, kn_op_param_info *out);
/* "layer_norm(x, weight?, bias?; inner: i64, eps: f64)" into buf (truncated to size; `?`
 * marks an optional input, `...` any number); returns the length it wanted, 0 for a bad index. */
KN_API size_t kn_op_signature(int index, char *buf, size_t size);

#ifdef __cplusplus
}
#endif
#endif
