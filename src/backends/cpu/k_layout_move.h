/* Byte movers of the layout kernels: layout ops never convert, so they move elements by
 * size (1, 2, 4 or 8 bytes) whatever the dtype, with memcpy for unit-stride runs. */
#ifndef KILN_BACKENDS_CPU_K_LAYOUT_MOVE_H
#define KILN_BACKENDS_CPU_K_LAYOUT_MOVE_H

#include <string.h>

#include "backends/cpu/cpu_kernels.h"

/* dst[0..n) (contiguous) = src[0], src[step], src[2 * step], ... (step in elements). */
static inline void kn_layout_move(char *restrict dst, const char *restrict src, int64_t n, int64_t step, size_t esize) {
    if (n <= 0) return;
    if (step == 1) {
        memcpy(dst, src, (size_t)n * esize);
        return;
    }
#define KN_LAYOUT_MOVE_AS(T)                                                   \
    do {                                                                       \
        T *restrict o_ = (T *)dst;                                             \
        const T *restrict x_ = (const T *)src;                                 \
        for (int64_t i = 0; i < n; i++) o_[i] = x_[i * step];                  \
    } while (0)
    switch (esize) {
    case 1: KN_LAYOUT_MOVE_AS(uint8_t); break;
    case 2: KN_LAYOUT_MOVE_AS(uint16_t); break;
    case 4: KN_LAYOUT_MOVE_AS(uint32_t); break;
    default: KN_LAYOUT_MOVE_AS(uint64_t); break;
    }
#undef KN_LAYOUT_MOVE_AS
}

/* dst[0..n) = the element whose bytes are `pattern`. */
static inline void kn_layout_fill(char *restrict dst, int64_t n, const void *pattern, size_t esize) {
    if (n <= 0) return;
#define KN_LAYOUT_FILL_AS(T)                                                   \
    do {                                                                       \
        T v_;                                                                  \
        memcpy(&v_, pattern, sizeof v_);                                       \
        T *restrict o_ = (T *)dst;                                             \
        for (int64_t i = 0; i < n; i++) o_[i] = v_;                            \
    } while (0)
    switch (esize) {
    case 1: KN_LAYOUT_FILL_AS(uint8_t); break;
    case 2: KN_LAYOUT_FILL_AS(uint16_t); break;
    case 4: KN_LAYOUT_FILL_AS(uint32_t); break;
    default: KN_LAYOUT_FILL_AS(uint64_t); break;
    }
#undef KN_LAYOUT_FILL_AS
}

/* The bytes of v stored as dtype dt (integers saturate, bool is v != 0). */
static inline void kn_layout_encode(double v, kn_dtype dt, void *pattern) {
    switch (dt) {
    case KN_F32: *(float *)pattern = (float)v; break;
    case KN_F64: *(double *)pattern = v; break;
    case KN_F16: *(uint16_t *)pattern = kn_f64_to_f16(v); break;
    case KN_BF16: *(uint16_t *)pattern = kn_f64_to_bf16(v); break;
    case KN_I32: *(int32_t *)pattern = kn_attr_int32(v); break;
    case KN_I64: *(int64_t *)pattern = kn_attr_int64(v); break;
    default: *(uint8_t *)pattern = v != 0; break;
    }
}

/* Storage offset (elements) of the row-major `row`-th run of t's last dim, from t's strides. */
static inline int64_t kn_layout_row_offset(const kn_tensor *t, int64_t row, int last_dims) {
    int64_t off = 0;
    for (int d = t->ndim - 1 - last_dims; d >= 0; d--) {
        off += (row % t->shape[d]) * t->stride[d];
        row /= t->shape[d];
    }
    return off;
}

/* The kernels of the layout family that live in their own files. */
kn_status kn_cpu_remap_kernel(kn_node *n);

#endif
