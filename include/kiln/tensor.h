/* Tensors: shapes, devices, creation from host memory, reading back, views, scopes. */
#ifndef KILN_TENSOR_H
#define KILN_TENSOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "kiln/dtype.h"
#include "kiln/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define KN_MAX_DIMS 8

/* A shape, or a list of dims; n is the count. Pass by value. */
typedef struct kn_shape {
    int n;
    int64_t v[KN_MAX_DIMS];
} kn_shape;

#define KN_NARGS_(...) KN_NARGS_N_(__VA_ARGS__, 8, 7, 6, 5, 4, 3, 2, 1, 0)
#define KN_NARGS_N_(a, b, c, d, e, f, g, h, n, ...) n
/* KN_SHAPE(2, 3) is the shape [2, 3]; KN_SHAPE0 is the 0-d shape []. */
#define KN_SHAPE(...) ((kn_shape){.n = KN_NARGS_(__VA_ARGS__), .v = {__VA_ARGS__}})
#define KN_SHAPE0 ((kn_shape){.n = 0})
/* A list of dims, e.g. for reductions; KN_ALL_DIMS (the empty list) means every dim. */
#define KN_DIMS(...) KN_SHAPE(__VA_ARGS__)
#define KN_ALL_DIMS KN_SHAPE0

typedef enum kn_device_type {
    KN_DEVICE_CPU = 0,
    KN_DEVICE_META,
    KN_DEVICE_CUDA,
    KN_DEVICE_TYPE_COUNT
} kn_device_type;

typedef struct kn_device {
    kn_device_type type;
    int index;
} kn_device;

#define KN_CPU ((kn_device){KN_DEVICE_CPU, 0})
#define KN_META ((kn_device){KN_DEVICE_META, 0})

typedef struct kn_tensor kn_tensor;

/* ---- reference counting and scopes ----------------------------------------------------
 * Every op returns a new reference. Inside a scope that reference belongs to the scope and
 * is released by kn_scope_pop; kn_keep hands it to the enclosing scope (or, at the outermost
 * scope, to the caller). Outside any scope the caller owns it and calls kn_release. */
/* Another handle to t (same storage, shape and strides) that the caller owns and releases;
 * it is a different pointer, so that every handle has exactly one owner. */
KN_API kn_tensor *kn_retain(kn_tensor *t);
KN_API void kn_release(kn_tensor *t);         /* NULL is ignored */
KN_API void kn_scope_push(void);
KN_API void kn_scope_pop(void);
KN_API kn_tensor *kn_keep(kn_tensor *t);      /* returns t; NULL passes through */
KN_API kn_tensor *kn_scope_pop_keep(kn_tensor *t);  /* kn_keep(t) then kn_scope_pop() */

/* ---- metadata --------------------------------------------------------------------------- */
KN_API int kn_ndim(const kn_tensor *t);
KN_API int64_t kn_size(const kn_tensor *t, int64_t dim);    /* negative dims count from the end; -1 on error */
KN_API int64_t kn_stride(const kn_tensor *t, int64_t dim);  /* in elements */
KN_API kn_shape kn_shape_of(const kn_tensor *t);
KN_API kn_shape kn_strides_of(const kn_tensor *t);
KN_API int64_t kn_offset(const kn_tensor *t);               /* storage offset, in elements */
KN_API int64_t kn_numel(const kn_tensor *t);
KN_API kn_dtype kn_dtype_of(const kn_tensor *t);
KN_API kn_device kn_device_of(const kn_tensor *t);
KN_API bool kn_is_contiguous(const kn_tensor *t);
/* True when a and b are views of the same storage. */
KN_API bool kn_shares_storage(const kn_tensor *a, const kn_tensor *b);
KN_API int64_t kn_shape_numel(kn_shape s);

/* ---- host memory -------------------------------------------------------------------------
 * kn_from_host copies `data` (row-major, dtype-sized elements) into a new tensor on `device`.
 * kn_to_host waits for the work that produces t, then copies its values in row-major order
 * into dst, which must hold kn_numel(t) * kn_dtype_size(dtype) bytes. Both fail with a
 * message on NULL arguments, a short buffer, or a device that holds no values (meta). */
KN_API kn_tensor *kn_from_host(const void *data, kn_dtype dtype, kn_shape shape, kn_device device);
KN_API kn_status kn_to_host(kn_tensor *t, void *dst, size_t dst_bytes);
/* The single value of a one-element tensor, as a double. */
KN_API kn_status kn_item(kn_tensor *t, double *out);

/* ---- devices -------------------------------------------------------------------------------- */
KN_API kn_tensor *kn_to_device(kn_tensor *t, kn_device device);   /* a copy; t itself if already there */
/* "cpu", "meta", "cuda", "cuda:1"; false if the text names no device type. */
KN_API bool kn_device_parse(const char *text, kn_device *out);
KN_API const char *kn_device_type_name(kn_device_type t);
/* Whether kiln can use this device in this process. */
KN_API bool kn_device_available(kn_device device);
/* Where creation ops put new tensors (default cpu, or $KILN_DEVICE). */
KN_API kn_status kn_set_default_device(kn_device device);
KN_API kn_device kn_default_device(void);

/* ---- views (no copy; they share storage) ---------------------------------------------------- */
KN_API kn_tensor *kn_view(kn_tensor *t, kn_shape shape);        /* fails if strides cannot express it; one -1 allowed */
KN_API kn_tensor *kn_reshape(kn_tensor *t, kn_shape shape);     /* a view when possible, else a copy */
KN_API kn_tensor *kn_permute(kn_tensor *t, kn_shape dims);
KN_API kn_tensor *kn_transpose(kn_tensor *t, int64_t dim0, int64_t dim1);
/* Elements start, start+step, ... before end, along dim (Python slice rules: negative start/end
 * count from the end and are clamped; step may be negative, walking backwards). */
KN_API kn_tensor *kn_slice(kn_tensor *t, int64_t dim, int64_t start, int64_t end, int64_t step);
KN_API kn_tensor *kn_select(kn_tensor *t, int64_t dim, int64_t index);  /* removes dim */
KN_API kn_tensor *kn_narrow(kn_tensor *t, int64_t dim, int64_t start, int64_t length);
KN_API kn_tensor *kn_expand(kn_tensor *t, kn_shape shape);      /* -1 keeps a size */
KN_API kn_tensor *kn_broadcast_to(kn_tensor *t, kn_shape shape);
KN_API kn_tensor *kn_squeeze(kn_tensor *t, int64_t dim);        /* no-op if that size is not 1 */
KN_API kn_tensor *kn_squeeze_all(kn_tensor *t);
KN_API kn_tensor *kn_unsqueeze(kn_tensor *t, int64_t dim);
KN_API kn_tensor *kn_flatten(kn_tensor *t, int64_t start_dim, int64_t end_dim);
/* Windows of `size` elements every `step` along dim, as a new last dim (torch.Tensor.unfold). */
KN_API kn_tensor *kn_unfold(kn_tensor *t, int64_t dim, int64_t size, int64_t step);
/* Any shape and strides over t's storage; fails if an element would fall outside it. */
KN_API kn_tensor *kn_as_strided(kn_tensor *t, kn_shape shape, kn_shape strides, int64_t offset);
/* A row-major copy, or t itself (a new reference) if already contiguous. */
KN_API kn_tensor *kn_contiguous(kn_tensor *t);
KN_API kn_tensor *kn_clone(kn_tensor *t);                       /* always a copy */
/* Copy src's values into dst (same shape after broadcasting src); dst may be a view. */
KN_API kn_status kn_copy_(kn_tensor *dst, kn_tensor *src);

/* Shape of broadcasting a with b; false (and an error naming `op`) if they do not broadcast. */
KN_API bool kn_broadcast_shapes(const char *op, kn_shape a, kn_shape b, kn_shape *out);

/* ---- printing -------------------------------------------------------------------------------- */
/* A readable rendering like "tensor([[1.0000, 2.0000], ...], f32[2, 2])", with large dims
 * summarized. Returns a malloc'd string the caller frees, or NULL on error. */
KN_API char *kn_to_string(kn_tensor *t);
KN_API kn_status kn_print(kn_tensor *t);
KN_API kn_status kn_fprint(FILE *f, kn_tensor *t);
/* "f32[2, 3]"; writes at most n bytes to buf and returns buf. */
KN_API char *kn_describe(const kn_tensor *t, char *buf, size_t n);

#ifdef __cplusplus
}
#endif
#endif
