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

#ifdef __cplusplus
}
#endif
#endif
